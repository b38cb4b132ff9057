//! `tenure cert` prints next commands that work as printed: the server
//! starts (it used to refuse: no API tokens configured) and the status
//! command reaches it with the token `tenure cert` wrote.

mod harness;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Bound on a server's start-up on a busy machine.
const START_BOUND: Duration = Duration::from_secs(15);

/// The printed line that starts with `  tenure <what> `, split into words
/// (the paths have no spaces: a temporary directory).
fn printed(out: &str, what: &str) -> Vec<String> {
    let line = out
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("tenure {what} ")))
        .unwrap_or_else(|| panic!("no `tenure {what}` line in:\n{out}"));
    line.split_whitespace().skip(1).map(str::to_string).collect()
}

#[test]
fn the_printed_server_and_status_commands_work() {
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("certs");
    let out = Command::new(harness::exe())
        .args(["cert", "--nodes", "1,2,3", "--out"])
        .arg(&certs)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = String::from_utf8_lossy(&out.stdout).into_owned();
    let server = printed(&out, "server");
    let status = printed(&out, "status");

    // As printed, but on free ports (the defaults may be taken on a shared
    // machine); nodes 2 and 3 are not started: node 1's API answers anyway.
    let [p1, p2, p3, http] = harness::free_ports(4)[..] else { unreachable!() };
    let peers = format!("1=127.0.0.1:{p1},2=127.0.0.1:{p2},3=127.0.0.1:{p3}");
    let mut node = Command::new(harness::exe())
        .args(&server)
        .args(["--http", &format!("127.0.0.1:{http}")])
        .args(["--peers", &peers])
        .current_dir(dir.path())
        .env_remove("TENURE_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let since = Instant::now();
    let answered = loop {
        if let Some(exit) = node.try_wait().unwrap() {
            let err = node.wait_with_output().unwrap().stderr;
            panic!("the printed server command exited {exit}: {}", String::from_utf8_lossy(&err));
        }
        let s = Command::new(harness::exe())
            .args(&status)
            .args(["--json", "--endpoints", &format!("127.0.0.1:{http}")])
            .env_remove("TENURE_TOKEN")
            .env_remove("TENURE_CACERT")
            .env_remove("TENURE_ENDPOINTS")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&s.stdout).into_owned();
        if s.status.success() && text.contains("\"role\"") {
            break text;
        }
        if since.elapsed() > START_BOUND {
            let _ = node.kill();
            panic!("the printed status command got no status within {START_BOUND:?}: {text}");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let _ = node.kill();
    let _ = node.wait();
    assert!(answered.contains("\"id\": 1"), "{answered}");
}

/// A directory of another cluster's certificates: a node of the default
/// cluster (a forgotten `--cluster-id`) is not signed beside them; the
/// error names the cluster id to give, and exits 64.
#[test]
fn certificates_for_another_cluster_id_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let cert = |args: &[&str]| {
        Command::new(harness::exe()).arg("cert").arg("--out").arg(dir.path()).args(args).output()
    };
    let out = cert(&["--nodes", "1,2,3", "--cluster-id", "prod"]).unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = cert(&["--nodes", "4"]).unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{err}");
    assert!(err.contains("cluster \"prod\"") && err.contains("--cluster-id prod"), "{err}");
    assert!(!dir.path().join("node-4.pem").exists());
    let out = cert(&["--nodes", "4", "--cluster-id", "prod"]).unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}
