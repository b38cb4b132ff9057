//! The CLI as a shell uses it: a reporting command whose reader went away
//! (`tenure status --json | head`) ends by SIGPIPE as `cat` does, not with
//! a panic (exit 101); `TENURE_ENDPOINTS` stands for `--endpoints`; a
//! usage error exits 64, never a status a command documents.

use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};

fn tenure() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tenure"));
    c.env_remove("TENURE_ENDPOINTS").env_remove("TENURE_TOKEN").env_remove("TENURE_CACERT");
    c
}

#[test]
fn a_report_into_a_closed_pipe_ends_by_sigpipe_without_a_panic() {
    // Nothing listens on these ports: the report is a row per endpoint.
    for args in [
        &["status", "--json", "--endpoints", "127.0.0.1:1,127.0.0.1:2"][..],
        &["status", "--endpoints", "127.0.0.1:1,127.0.0.1:2"][..],
    ] {
        // The reader is gone before the command starts (closing it after
        // the spawn raced with a fast command, which then wrote into the
        // pipe's buffer and exited normally).
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let child = tenure().args(args).stdout(writer).stderr(Stdio::piped()).spawn().unwrap();
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(out.status.signal(), Some(libc_sigpipe()), "{args:?}: {:?} {err}", out.status);
    }
}

/// SIGPIPE's number on Linux.
fn libc_sigpipe() -> i32 {
    nix::sys::signal::Signal::SIGPIPE as i32
}

#[test]
fn tenure_endpoints_stands_for_the_flag_and_the_flag_wins() {
    let out = tenure()
        .args(["status", "--json"])
        .env("TENURE_ENDPOINTS", "127.0.0.1:1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("\"http://127.0.0.1:1\"") && !text.contains("8001"), "{text}");
    let out = tenure()
        .args(["status", "--json", "--endpoints", "127.0.0.1:2"])
        .env("TENURE_ENDPOINTS", "127.0.0.1:1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("127.0.0.1:2") && !text.contains("127.0.0.1:1\""), "{text}");
    for cmd in ["status", "watch", "transfer", "kv", "elect", "run", "notify-dead"] {
        let args: &[&str] = match cmd {
            "kv" => &["kv", "get", "--help"],
            _ => &[cmd, "--help"],
        };
        let help = tenure().args(args).output().unwrap();
        let help = String::from_utf8_lossy(&help.stdout);
        assert!(help.contains("TENURE_ENDPOINTS"), "{cmd} --help: {help}");
    }
}

#[test]
fn an_environment_endpoint_list_does_not_conflict_with_store() {
    // --store conflicts with --endpoints given on the command line only.
    let out = tenure()
        .args(["elect", "--store", "etcd://127.0.0.1:1", "x", "--ttl-ms", "100"])
        .env("TENURE_ENDPOINTS", "127.0.0.1:1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("cannot be used with"), "{err}");
    assert!(err.contains("--ttl-ms"), "the TTL is checked next: {err}");
    let out = tenure()
        .args(["elect", "--store", "etcd://127.0.0.1:1", "--endpoints", "127.0.0.1:2", "x"])
        .env("TENURE_ENDPOINTS", "127.0.0.1:1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--store and --endpoints both name the store"), "{err}");
    assert_eq!(out.status.code(), Some(64), "a usage error: {err}");
}

/// A typo'd flag, a missing or a malformed argument exits 64 with a
/// message and a pointer to --help, so a script never reads it as `tenure
/// status`'s 2 (the endpoints disagree), `tenure elect`'s 2 (leadership
/// lost), `tenure kv`'s 2 (a conflict) or `tenure member`'s 2 (refused);
/// help exits 0.
#[test]
fn a_usage_error_exits_64_and_help_exits_0() {
    for args in [
        &["status", "--endpoint", "127.0.0.1:1"][..],
        &["kv", "put", "only-a-key"][..],
        &["elect"][..],
        &["member", "remove", "two"][..],
        &["no-such-command"][..],
        // Malformed values, judged as the server would judge them, before
        // anything is asked of a cluster (no cluster answers here).
        &["member", "add", "5", "notanaddress"][..],
        &["member", "add", "0", "10.0.0.5:7001"][..],
        &["member", "add", "5", "10.0.0.5:7001", "--directory", "xyz"][..],
        &["member", "replace", "3", "6", "0.0.0.0:7001"][..],
        &["transfer", "--to", "0"][..],
        &["kv", "get", ""][..],
        &["kv", "put", "a\nb", "v"][..],
        &["cert", "--out", "/nonexistent-tenure/certs", "--nodes", "1,0"][..],
        // Found wrong by the command itself, once parsed.
        &["elect", "a b"][..],
        &["elect", "x", "--ttl-ms", "10"][..],
        &["run", "--election", "bad name", "--", "true"][..],
        &["run", "--election", "x", "--grace-ms", "9000", "--", "true"][..],
        &["run", "--election", "x", "--partitions", "4", "--", "true"][..],
        &["elect", "x", "--store", "etcd://127.0.0.1:1", "--endpoints", "127.0.0.1:2"][..],
        &["cert", "--out", "/nonexistent-tenure/certs", "--nodes", "1", "--cluster-id", "a b"][..],
    ] {
        let out = tenure().args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "{args:?}: {err}");
        assert!(err.starts_with("error: ") && err.contains("--help"), "{args:?}: {err}");
    }
    let out = tenure().args(["status", "--help"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("Example"));
}
