//! `tenure kv` (the binary) against a three-node cluster running in this
//! process: every subcommand, its exit statuses, endpoints tried in order,
//! and a watch that resumes on another node without losing or repeating a
//! change when its node stops.

use crate::servers::{eventually, start_cluster, status, Server, READ_TOKEN, WRITE_TOKEN};
use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::process::{Output, Stdio};
use std::time::Duration;
use tenure_server::http::HttpLimits;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

/// Bound on a first election or a server's start, on a busy machine.
const START_BOUND: Duration = Duration::from_secs(10);
/// Bound on a server's clean stop.
const STOP_BOUND: Duration = Duration::from_secs(5);
/// Bound on one CLI run or one line of `kv watch`.
const CLI_BOUND: Duration = Duration::from_secs(15);

/// `tenure kv ARGS` with `token` in `TENURE_TOKEN` and `stdin`.
fn kv(token: &str, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tenure"));
    command
        .arg("kv")
        .args(args)
        .env("TENURE_TOKEN", token)
        .env_remove("TENURE_CACERT")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    command
}

async fn run(token: &str, args: &[&str]) -> Output {
    let out = kv(token, args).output();
    tokio::time::timeout(CLI_BOUND, out).await.expect("the CLI ends in time").unwrap()
}

async fn run_with_stdin(token: &str, args: &[&str], stdin: &[u8]) -> Output {
    let mut child = kv(token, args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut input, stdin).await.unwrap();
    drop(input);
    tokio::time::timeout(CLI_BOUND, child.wait_with_output()).await.expect("in time").unwrap()
}

fn code(out: &Output) -> i32 {
    out.status.code().expect("an exit status")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Waits for one leader that takes writes through a follower; its index.
async fn ready(servers: &[Server], endpoints: &str) -> usize {
    let l = eventually("every server agrees on one leader", START_BOUND, || async {
        let mut views = Vec::new();
        for s in servers {
            views.push(status(s.http).await?);
        }
        let leader = views[0]["leader"].as_u64()?;
        let i = servers.iter().position(|s| s.id == leader)?;
        (views.iter().all(|v| v["leader"] == leader) && views[i]["role"] == "leader").then_some(i)
    })
    .await;
    let out = run(WRITE_TOKEN, &["put", "_ready", "", "-e", endpoints]).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    l
}

/// An address nothing listens on.
fn dead_endpoint() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kv_subcommand_with_its_exit_status() {
    let dir = tempfile::tempdir().unwrap();
    let heartbeat = Duration::from_millis(50);
    let mut servers =
        start_cluster(3, heartbeat, heartbeat * 10, HttpLimits::default(), dir.path());
    // A dead endpoint first: the CLI moves on to the next.
    let all: Vec<String> = std::iter::once(dead_endpoint())
        .chain(servers.iter().map(|s| s.http))
        .map(|a| a.to_string())
        .collect();
    let e = all.join(",");
    let e = e.as_str();
    ready(&servers, e).await;

    let out = run(WRITE_TOKEN, &["put", "app/a b", "-1", "-e", e]).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let r1: u64 = stdout(&out).split_whitespace().nth(1).unwrap().parse().unwrap();
    let out = run(READ_TOKEN, &["get", "app/a b", "-e", e]).await;
    assert_eq!((code(&out), stdout(&out)), (0, "-1\n".to_string()), "{}", stderr(&out));

    // Compare-and-set: a mismatch is exit status 2.
    let out = run(WRITE_TOKEN, &["put", "app/a b", "x", "--if-mod-revision", "0", "-e", e]).await;
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("conflict (HTTP 409)"), "{}", stderr(&out));
    let r = r1.to_string();
    let out = run_with_stdin(
        WRITE_TOKEN,
        &["put", "app/a b", "-", "--if-mod-revision", &r, "--json", "-e", e],
        &[0xff, 0xfe],
    )
    .await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let put: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(put["revision"].as_u64() > Some(r1));
    let out = run(READ_TOKEN, &["get", "app/a b", "--stale", "--json", "-e", e]).await;
    let got: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(got["value_base64"] == "//4=" || got["value"] == "-1", "stale, maybe: {got}");
    let out = run(READ_TOKEN, &["get", "app/a b", "-e", e]).await;
    assert_eq!(out.stdout, [0xff, 0xfe, b'\n'], "binary values come back as they are");

    // Absent keys and a read token that writes: exit status 1; a bad key
    // is a usage error, 64, refused before anything is asked.
    let out = run(READ_TOKEN, &["get", "app/none", "-e", e]).await;
    assert_eq!(code(&out), 1);
    assert!(stderr(&out).contains("no key \"app/none\" (revision"), "{}", stderr(&out));
    let out = run(WRITE_TOKEN, &["put", "a\nb", "v", "-e", e]).await;
    assert_eq!(code(&out), 64);
    assert!(stderr(&out).contains("control character"), "{}", stderr(&out));
    let out = run(READ_TOKEN, &["put", "app/x", "v", "-e", e]).await;
    assert_eq!(code(&out), 1);
    assert!(stderr(&out).contains("needs write"), "{}", stderr(&out));

    // List, txn, del.
    run(WRITE_TOKEN, &["put", "app/c", "3", "-e", e]).await;
    let out = run(READ_TOKEN, &["list", "--prefix", "app/", "-e", e]).await;
    assert_eq!(stdout(&out), "app/a b\tbase64://4=\napp/c\t3\n", "{}", stderr(&out));
    let mut file = tempfile::NamedTempFile::new().unwrap();
    let txn = r#"{"compare": [{"key": "app/c", "target": "value", "op": "=", "value": "3"}],
                 "success": [{"put": {"key": "app/c", "value": "4"}}],
                 "failure": [{"get": {"key": "app/c"}}]}"#;
    file.write_all(txn.as_bytes()).unwrap();
    let path = file.path().to_str().unwrap();
    let out = run(WRITE_TOKEN, &["txn", path, "-e", e]).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).contains("\"succeeded\": true"), "{}", stdout(&out));
    let out = run(WRITE_TOKEN, &["txn", path, "-e", e]).await;
    assert_eq!(code(&out), 2, "the comparison fails now: {}", stdout(&out));
    let out = run_with_stdin(WRITE_TOKEN, &["txn", "-e", e], b"{\"compare\": 1}").await;
    assert_eq!(code(&out), 1);
    assert!(stderr(&out).contains("compare"), "{}", stderr(&out));
    let out = run(WRITE_TOKEN, &["del", "app/c", "-e", e]).await;
    assert!(stdout(&out).starts_with("deleted (revision"), "{}", stdout(&out));
    let out = run(WRITE_TOKEN, &["del", "app/c", "-e", e]).await;
    assert!(stdout(&out).starts_with("no such key"), "{}", stdout(&out));

    // No endpoint answers: an error, after --wait-ms.
    let dead = dead_endpoint().to_string();
    let out = run(READ_TOKEN, &["get", "k", "-e", &dead, "--wait-ms", "300"]).await;
    assert_eq!(code(&out), 1);
    assert!(stderr(&out).contains("answered within --wait-ms 300"), "{}", stderr(&out));

    for s in &mut servers {
        s.stop(STOP_BOUND).await.unwrap();
    }
}

/// `tenure kv list` of more than one page (the node answers at most 4 MiB
/// of JSON at a time): every key once, in order; `--limit` counts across
/// pages; `--json` gathers the pages into one answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kv_list_follows_the_pages_of_a_large_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let heartbeat = Duration::from_millis(50);
    let mut servers =
        start_cluster(3, heartbeat, heartbeat * 10, HttpLimits::default(), dir.path());
    let e: Vec<String> = servers.iter().map(|s| s.http.to_string()).collect();
    let e = e.join(",");
    let e = e.as_str();
    ready(&servers, e).await;
    // 100 values of 64 KiB: 6.4 MiB of JSON, two pages at least.
    let value = vec![b'v'; 64 * 1024];
    for i in 0..100 {
        let key = format!("big/{i:03}");
        let out = run_with_stdin(WRITE_TOKEN, &["put", &key, "-", "-e", e], &value).await;
        assert_eq!(code(&out), 0, "{}", stderr(&out));
    }
    let keys = |out: &Output| -> Vec<String> {
        stdout(out).lines().map(|l| l.split('\t').next().unwrap().to_string()).collect()
    };
    let expected: Vec<String> = (0..100).map(|i| format!("big/{i:03}")).collect();
    let out = run(READ_TOKEN, &["list", "--prefix", "big/", "-e", e]).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(keys(&out), expected, "{}", stderr(&out));
    assert!(stdout(&out).lines().all(|l| l.len() == 8 + 64 * 1024), "every value whole");
    assert_eq!(stderr(&out), "", "no hint when every key was listed");
    let out = run(READ_TOKEN, &["list", "--prefix", "big/", "--limit", "70", "-e", e]).await;
    assert_eq!(keys(&out), expected[..70], "{}", stderr(&out));
    assert!(stderr(&out).contains("more keys match"), "{}", stderr(&out));
    let out = run(READ_TOKEN, &["list", "--prefix", "big/", "--json", "-e", e]).await;
    let body: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let listed: Vec<&str> =
        body["kvs"].as_array().unwrap().iter().map(|kv| kv["key"].as_str().unwrap()).collect();
    assert_eq!(listed, expected, "{}", stderr(&out));
    assert_eq!(body["more"], false);
    let out = run(READ_TOKEN, &["list", "--limit", "0", "-e", e]).await;
    assert_eq!(code(&out), 64, "a usage error");
    assert!(stderr(&out).contains("--limit 0"), "{}", stderr(&out));
    for s in &mut servers {
        s.stop(STOP_BOUND).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kv_watch_resumes_on_the_next_node_without_losing_or_repeating_a_change() {
    let dir = tempfile::tempdir().unwrap();
    let heartbeat = Duration::from_millis(50);
    let mut servers =
        start_cluster(3, heartbeat, heartbeat * 10, HttpLimits::default(), dir.path());
    let all = servers.iter().map(|s| s.http.to_string()).collect::<Vec<_>>().join(",");
    let l = ready(&servers, &all).await;
    let (a, b) = ((l + 1) % 3, (l + 2) % 3);
    let lead = servers[l].http.to_string();
    let followed = format!("{},{}", servers[a].http, servers[b].http);

    let out = run(WRITE_TOKEN, &["put", "w/0", "before", "-e", &lead]).await;
    let r0: u64 = stdout(&out).split_whitespace().nth(1).unwrap().parse().unwrap();
    let from = (r0 + 1).to_string();
    let args =
        ["watch", "--prefix", "w/", "--from-revision", &from, "--count", "4", "-e", &followed];
    let mut watch =
        kv(READ_TOKEN, &args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut lines = BufReader::new(watch.stdout.take().unwrap()).lines();
    let mut next_line = async || {
        let line =
            tokio::time::timeout(CLI_BOUND, lines.next_line()).await.expect("a line in time");
        line.unwrap().expect("a line")
    };
    // Changes of keys it watches (and one it does not).
    for (key, value) in [("w/1", "one"), ("x", "not watched"), ("w/2", "two")] {
        let out = run(WRITE_TOKEN, &["put", key, value, "-e", &lead]).await;
        assert_eq!(code(&out), 0, "{}", stderr(&out));
    }
    let first = [next_line().await, next_line().await];
    assert!(first[0].ends_with("\tput\tw/1\tone"), "{first:?}");
    assert!(first[1].ends_with("\tput\tw/2\ttwo"), "{first:?}");

    // Its node stops: the watch follows the next one from where it was.
    servers[a].stop(STOP_BOUND).await.unwrap();
    let out = run(WRITE_TOKEN, &["del", "w/1", "-e", &lead]).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let out = run(WRITE_TOKEN, &["put", "w/3", "three", "-e", &lead]).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let rest = [next_line().await, next_line().await];
    assert!(rest[0].ends_with("\tdelete\tw/1\tone"), "{rest:?}");
    assert!(rest[1].ends_with("\tput\tw/3\tthree"), "{rest:?}");
    let revisions: Vec<u64> =
        first.iter().chain(&rest).map(|l| l.split('\t').next().unwrap().parse().unwrap()).collect();
    assert!(revisions.windows(2).all(|w| w[0] < w[1]), "{revisions:?}");
    let exit = tokio::time::timeout(CLI_BOUND, watch.wait()).await.expect("--count 4 ends it");
    assert_eq!(exit.unwrap().code(), Some(0));
    let mut err = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut watch.stderr.take().unwrap(), &mut err)
        .await
        .unwrap();
    assert!(err.contains("stream ended; switching"), "{err}");

    for (i, s) in servers.iter_mut().enumerate().filter(|&(i, _)| i != a) {
        s.stop(STOP_BOUND).await.unwrap_or_else(|e| panic!("server {i} stops: {e}"));
    }
}
