//! The checked-in code under src/generated/ is what the .proto files under
//! proto/ generate: regenerated here with protox (no protoc) and
//! tonic-prost-build, and compared byte for byte. With `TENURE_REGENERATE=1`
//! the checked-in files are replaced instead.

use std::path::{Path, PathBuf};

/// The command that brings src/generated/ up to date.
const UPDATE: &str = "TENURE_REGENERATE=1 cargo test -p tenure-etcd-api --test generated";
/// The .proto files, relative to proto/ (the include directory).
const PROTOS: [&str; 5] = [
    "mvccpb/kv.proto",
    "authpb/auth.proto",
    "etcdserverpb/rpc.proto",
    "v3electionpb/v3election.proto",
    "v3lockpb/v3lock.proto",
];
/// The files generated, one per protobuf package.
const GENERATED: [&str; 5] =
    ["mvccpb.rs", "authpb.rs", "etcdserverpb.rs", "v3electionpb.rs", "v3lockpb.rs"];

/// Writes the generated code of proto/ into `out`.
fn generate(crate_dir: &Path, out: &Path) {
    let include = crate_dir.join("proto");
    let files: Vec<PathBuf> = PROTOS.iter().map(|p| include.join(p)).collect();
    let fds = protox::compile(&files, [&include]).expect("the .proto files compile");
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        // No `connect` constructors: the user builds the channel (TLS, keepalives).
        .build_transport(false)
        .out_dir(out)
        .compile_fds(fds)
        .expect("code generation");
}

#[test]
fn the_checked_in_code_is_what_the_protos_generate() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let checked_in = crate_dir.join("src/generated");
    let out = std::env::temp_dir().join(format!("tenure-etcd-api-gen-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).unwrap();
    generate(crate_dir, &out);
    let mut produced: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    produced.sort();
    let mut expected: Vec<String> = GENERATED.iter().map(|s| s.to_string()).collect();
    expected.sort();
    assert_eq!(
        produced, expected,
        "the packages generated changed: update GENERATED and src/lib.rs"
    );
    let regenerate = std::env::var_os("TENURE_REGENERATE").is_some_and(|v| v == "1");
    let mut stale = Vec::new();
    for name in GENERATED {
        let fresh = std::fs::read_to_string(out.join(name)).unwrap();
        let path = checked_in.join(name);
        if regenerate {
            std::fs::write(&path, &fresh).unwrap();
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(fresh.as_str()) {
            stale.push(path.display().to_string());
        }
    }
    std::fs::remove_dir_all(&out).unwrap();
    assert!(
        stale.is_empty(),
        "{} differ from what proto/ generates; update them with `{UPDATE}` and commit them",
        stale.join(", ")
    );
}
