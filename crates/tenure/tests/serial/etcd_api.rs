//! etcd's v3 API on a cluster of real `tenure server` processes
//! (`--etcd-listen`, TLS with client certificates), driven by the real
//! `etcdctl` (Debian's etcd-client 3.4): the KV script's output compared
//! with the same script against a real etcd, writes through a follower
//! seen by the HTTP API at the same revision, endpoint status and health,
//! member list, and bad input that changes nothing.
//!
//! Skipped (with a message) when `etcdctl` or `etcd` is not on PATH; CI
//! installs both (`.ci/run`).

use crate::etcdctl::{installed, relative, tenure_cluster, Endpoint, START_BOUND};
use crate::harness::{serial, ADMIN_TOKEN, APP_TOKEN, CLUSTER, OTHER_TOKEN, READ_TOKEN};
use hyper::Method;
use serde_json::Value;
use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::unix::ffi::OsStringExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tenure_testkit::etcd::EtcdCluster;

fn os(args: &[&str]) -> Vec<OsString> {
    args.iter().map(OsString::from).collect()
}

/// The KV script: etcdctl arguments (`{N}` is the revision N writes after
/// the store's first) and stdin.
fn script() -> Vec<(Vec<&'static str>, Option<&'static str>)> {
    let mut s: Vec<(Vec<&str>, Option<&str>)> = vec![];
    let mut cmd = |args: &[&'static str]| s.push((args.to_vec(), None));
    for (k, v) in [("a", "1"), ("b", "2"), ("c", "3"), ("a", "11"), ("d/x", "4"), ("d/y", "5")] {
        cmd(&["put", k, v]);
    }
    cmd(&["put", "b", "22", "--prev-kv"]);
    cmd(&["get", "a"]);
    cmd(&["get", "a", "-w", "json"]);
    cmd(&["get", "", "--prefix"]);
    cmd(&["get", "d/", "--prefix", "-w", "json"]);
    cmd(&["get", "b", "--from-key"]);
    cmd(&["get", "a", "c"]);
    cmd(&["get", "", "--prefix", "--limit", "2", "-w", "json"]);
    cmd(&["get", "", "--prefix", "--sort-by", "MODIFY", "--order", "DESCEND"]);
    cmd(&[
        "get",
        "",
        "--prefix",
        "--sort-by",
        "MODIFY",
        "--order",
        "DESCEND",
        "--limit",
        "2",
        "-w",
        "json",
    ]);
    cmd(&["get", "", "--prefix", "--sort-by", "CREATE", "--order", "ASCEND", "--limit", "1"]);
    cmd(&["get", "", "--prefix", "--sort-by", "VALUE", "--order", "DESCEND"]);
    cmd(&["get", "", "--prefix", "--keys-only"]);
    cmd(&["get", "", "--prefix", "--count-only", "-w", "json"]);
    cmd(&["get", "a", "--rev", "{1}", "-w", "json"]);
    cmd(&["get", "", "--prefix", "--rev", "{3}"]);
    cmd(&["del", "b", "--prev-kv"]);
    cmd(&["del", "nosuch"]);
    cmd(&["del", "d/", "--prefix", "--prev-kv", "-w", "json"]);
    s.push((
        vec!["txn"],
        Some("mod(\"a\") > \"0\"\nval(\"c\") = \"3\"\n\nput x yes\nget a\n\nput x no\n\n"),
    ));
    s.push((
        vec!["txn", "-w", "json"],
        Some("ver(\"a\") = \"7\"\n\nput y 1\n\nput y 2\nget y\ndel c\n\n"),
    ));
    s.push((vec!["txn"], Some("create(\"nosuch\") = \"0\"\n\nget a\nget y\n\n\n")));
    // A range delete, and a read of a prefix after a put inside it.
    s.push((
        vec!["txn", "-w", "json"],
        Some("ver(\"a\") > \"0\"\n\nput d/9 n\nget d/ --prefix\ndel y --prefix --prev-kv\n\n\n"),
    ));
    let mut cmd = |args: &[&'static str]| s.push((args.to_vec(), None));
    cmd(&["get", "", "--prefix", "-w", "json"]);
    cmd(&["compact", "{4}"]);
    cmd(&["get", "a", "--rev", "{3}"]);
    cmd(&["get", "a", "--rev", "{4}"]);
    cmd(&["get", "a", "--rev", "{1000}"]);
    cmd(&["compact", "{2}"]);
    cmd(&["put", "", "v"]);
    cmd(&["put", "a", "v", "--ignore-value"]);
    cmd(&["put", "a", "--ignore-value"]);
    cmd(&["put", "nosuch", "--ignore-value"]);
    cmd(&["get", "", "--prefix", "-w", "json"]);
    s
}

/// Runs the script on `e`, whose store's revision before it is `base`;
/// returns the outputs with revisions made relative to `base` and the
/// ids and terms of the headers left out.
fn run_script(e: &Endpoint, base: i64) -> Vec<String> {
    let mut outputs = Vec::new();
    for (template, stdin) in script() {
        let args: Vec<OsString> = template
            .iter()
            .map(|a| match a.strip_prefix('{').and_then(|a| a.strip_suffix('}')) {
                Some(n) => OsString::from((base + n.parse::<i64>().unwrap()).to_string()),
                None => OsString::from(a),
            })
            .collect();
        let (ok, out, err) = e.run(&args, stdin);
        let out = match serde_json::from_str::<Value>(&out) {
            Ok(mut v) => {
                relative(&mut v, base, &[]);
                v.to_string()
            }
            Err(_) => match out.strip_prefix("compacted revision ") {
                Some(n) => {
                    format!("compacted revision +{}", n.trim().parse::<i64>().unwrap() - base)
                }
                None => out,
            },
        };
        outputs.push(format!("$ etcdctl {template:?} -> {ok}\n{out}{err}"));
    }
    outputs
}

/// The same etcdctl script against a real etcd 3.4 and against tenure:
/// the same output, revisions included (both stores start at revision 1).
#[tokio::test(flavor = "multi_thread")]
async fn etcdctl_sees_the_same_kv_on_tenure_as_on_etcd() {
    if !installed("etcdctl", "version") || !installed("etcd", "--version") {
        eprintln!("SKIPPED: etcdctl or etcd is not on PATH (Debian: etcd-client, etcd-server)");
        return;
    }
    let _serial = serial().await;
    let etcd = EtcdCluster::start(1);
    let real = Endpoint { url: etcd.endpoints()[0].clone(), tls: Vec::new() };
    let expected = run_script(&real, 1);
    drop(etcd);

    let (c, endpoints) = tenure_cluster();
    endpoints[0].wait_serving(&c);
    let got = run_script(&endpoints[0], 1);
    for (want, got) in expected.iter().zip(&got) {
        assert_eq!(got, want, "tenure's output differs from etcd's\n{}", c.logs());
    }
    assert_eq!(got.len(), expected.len());
}

/// Writes through a follower's etcd listener are the HTTP API's, at the
/// same revision, and the other way round; status, health and the members.
#[tokio::test(flavor = "multi_thread")]
async fn etcdctl_works_against_every_node_of_a_tenure_cluster() {
    if !installed("etcdctl", "version") {
        eprintln!("SKIPPED: etcdctl is not on PATH (Debian: etcd-client)");
        return;
    }
    let _serial = serial().await;
    let (c, endpoints) = tenure_cluster();
    let (leader, _, _) = c.wait_leader(&[0, 1, 2], 0, Instant::now(), START_BOUND).await;
    for e in &endpoints {
        e.wait_serving(&c);
    }
    let follower = (leader + 1) % 3;

    // A put through a follower's listener, read by the HTTP API.
    let put = endpoints[follower].json(&["put", "shared/k", "from-etcdctl"]);
    let revision = put["header"]["revision"].as_i64().unwrap();
    let (status, body, _) = c.request(leader, Method::GET, "/v1/kv/shared/k", None).await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["value"], "from-etcdctl");
    assert_eq!(body["mod_revision"].as_i64(), Some(revision));
    // A put through the HTTP API, read through another follower's listener.
    let (status, body, _) = c
        .request(leader, Method::PUT, "/v1/kv/shared/h", Some(("text/plain", "from-http")))
        .await
        .unwrap();
    assert_eq!(status, 200, "{body}");
    let http_revision = body["revision"].as_i64().unwrap();
    let got = endpoints[(leader + 2) % 3].json(&["get", "shared/", "--prefix"]);
    assert_eq!(got["header"]["revision"].as_i64(), Some(http_revision));
    assert_eq!(got["kvs"][0]["mod_revision"].as_i64(), Some(http_revision));
    assert_eq!(got["count"], 2);

    // An application's own certificate (`tenure cert --clients NAME`, with
    // the cluster's CA) opens the listener; a call without a token has the
    // role of the API token named NAME, and none if there is no such token.
    let certs = c.dir.path().join("certs");
    let out = certs.to_str().unwrap();
    crate::harness::tenure_cert(&[
        "--out",
        out,
        "--cluster-id",
        CLUSTER,
        "--clients",
        "test-read,stranger",
    ]);
    let as_client = |name: &str| {
        let (cert, key) = (format!("client-{name}.pem"), format!("client-{name}-key.pem"));
        let tls = [("--cacert", "ca.pem"), ("--cert", cert.as_str()), ("--key", key.as_str())];
        let tls = tls.iter().flat_map(|(flag, file)| [(*flag).into(), certs.join(file).into()]);
        Endpoint { url: endpoints[follower].url.clone(), tls: tls.collect() }
    };
    let reader = as_client("test-read");
    let got = reader.json(&["get", "shared/k"]);
    assert_eq!(got["count"], 1, "{got}");
    let (ok, out, err) = reader.run(&["put", "shared/k", "by-reader"], None);
    assert!(!ok && err.contains("etcdserver: permission denied"), "{out}{err}");
    let (ok, out, err) = as_client("stranger").run(&["get", "shared/k"], None);
    assert!(
        !ok && err.contains("names the user \"stranger\", and no API token is named so"),
        "{out}{err}"
    );
    assert_eq!(
        endpoints[leader].json(&["get", "shared/k"])["kvs"][0]["mod_revision"],
        got["kvs"][0]["mod_revision"]
    );

    // Status from every node: one leader, the same term; health; members.
    let mut leaders = Vec::new();
    for e in &endpoints {
        let s = e.json(&["endpoint", "status"]);
        let s = &s[0]["Status"];
        assert!(s["version"].as_str().unwrap().starts_with("3.4"), "{s}");
        leaders.push(s["leader"].as_u64().unwrap());
        assert!(s["raftIndex"].as_u64().unwrap() > 0, "{s}");
        let health = e.run(&["endpoint", "health"], None);
        assert!(health.0 && !health.2.contains("Error"), "{health:?}");
        assert!(health.2.contains(&format!("{} is healthy", e.url)), "{health:?}");
    }
    assert!(leaders.iter().all(|l| *l == leader as u64 + 1), "{leaders:?}");
    // Every member with its own etcd URL, from any node: what clients
    // sync their endpoints to (`endpoint status --cluster` asks each).
    let members = endpoints[follower].ok(&["member", "list"]);
    for id in 1..=3 {
        let line = members.lines().find(|l| l.starts_with(&format!("{id}, started, node-{id}, ")));
        let line = line.unwrap_or_else(|| panic!("no member {id}: {members}"));
        assert!(line.ends_with(&format!(", {}, false", endpoints[id - 1].url)), "{members}");
    }
    let all = endpoints[follower].json(&["endpoint", "status", "--cluster"]);
    let mut reached: Vec<&str> =
        all.as_array().unwrap().iter().map(|s| s["Endpoint"].as_str().unwrap()).collect();
    reached.sort_unstable();
    let mut urls: Vec<&str> = endpoints.iter().map(|e| e.url.as_str()).collect();
    urls.sort_unstable();
    assert_eq!(reached, urls, "{all}");

    // Member changes with an admin token (a certificate alone is refused),
    // through a follower, which passes them on to the leader: a learner
    // added by its peer URL (an id drawn by tenure), listed unstarted,
    // refused promotion while it has not caught up, then removed.
    let err = endpoints[leader].fails(&["member", "add", "x", "--peer-urls=https://127.0.0.1:9"]);
    assert!(err.contains("member changes need an admin token"), "{err}");
    let err = endpoints[follower].fails(&["member", "add", "x", "--peer-urls=https://127.0.0.1:9"]);
    assert!(err.contains("member changes need an admin token"), "{err}");
    let l = &endpoints[leader].as_user("test-admin", ADMIN_TOKEN);
    let f = &endpoints[follower].as_user("test-admin", ADMIN_TOKEN);
    let added = f.json(&["member", "add", "new", "--learner", "--peer-urls=https://127.0.0.1:9"]);
    let id = added["member"]["ID"].as_u64().expect("the new member's id");
    assert!((4..=65_535).contains(&id), "{added}");
    assert_eq!(added["member"]["isLearner"], true, "{added}");
    assert_eq!(added["members"].as_array().map(Vec::len), Some(4), "{added}");
    let hex = format!("{id:x}");
    let listed = l.ok(&["member", "list"]);
    assert!(listed.contains("unstarted, , https://127.0.0.1:9, , true"), "{listed}");
    for e in [l, f] {
        let err = e.fails(&["member", "promote", &hex]);
        assert!(
            err.contains("can only promote a learner member which is in sync with leader"),
            "{err}"
        );
    }
    // A token of another role is refused before anything is passed on.
    let app = endpoints[follower].as_user("test-app", APP_TOKEN);
    let err = app.fails(&["member", "remove", &hex]);
    assert!(err.contains("permission denied"), "{err}");
    let err = l.fails(&["member", "update", &hex, "--peer-urls=https://127.0.0.1:10"]);
    assert!(err.contains("tenure member replace"), "{err}");
    let removed = f.ok(&["member", "remove", &hex]);
    assert!(removed.contains("removed"), "{removed}");
    assert!(!l.ok(&["member", "list"]).contains("127.0.0.1:9,"));
    let err = l.fails(&["member", "remove", &hex]);
    assert!(err.contains("etcdserver: member not found"), "{err}");
    forged_forward_markers_change_nothing(&endpoints[follower], &endpoints[leader]).await;
    let err = l.fails(&["member", "add", "bad", "--peer-urls=unix://127.0.0.1:9"]);
    assert!(err.contains("HOST:PORT"), "{err}");
    // Maintenance: no alarm, nothing to defragment; what tenure does not
    // serve says what it offers instead.
    assert_eq!(l.ok(&["alarm", "list"]).trim(), "");
    assert_eq!(l.ok(&["alarm", "disarm"]).trim(), "");
    assert!(l.ok(&["defrag"]).contains("Finished defragmenting"));
    assert!(l.fails(&["endpoint", "hashkv"]).contains("Unimplemented"));
    let backup = c.dir.path().join("etcd-backup.db");
    let err = l.fails(&["snapshot", "save", backup.to_str().unwrap()]);
    assert!(err.contains("every node holds all of it"), "{err}");
    assert!(!backup.exists(), "a snapshot file was left behind");
    let two = "--peer-urls=https://127.0.0.1:9,https://127.0.0.1:10";
    assert!(f.fails(&["member", "add", "two", two]).contains("give one peer URL"));
    assert!(l.fails(&["user", "list"]).contains("[[api_tokens]]"));
    assert!(l.fails(&["role", "add", "r"]).contains("[[api_tokens]]"));

    // Bad input: etcd's error, and nothing changes.
    let before = endpoints[0].json(&["get", "shared/k"])["header"]["revision"].as_i64();
    let e = &endpoints[follower];
    let many: String = (0..129).map(|i| format!("put k{i} v\n")).collect();
    let cases: Vec<(Vec<OsString>, Option<String>, &str)> = vec![
        (os(&["put", "", "v"]), None, "etcdserver: key is not provided"),
        // (etcdctl itself refuses --ignore-value with a value: the server's check is not reached.)
        (
            os(&["txn"]),
            Some(format!("\n{many}\n\n")),
            "etcdserver: too many operations in txn request",
        ),
        (
            os(&["txn"]),
            Some("\nput k 1\nput k 2\n\n\n".into()),
            "etcdserver: duplicate key given in txn request",
        ),
        (
            vec!["put".into(), OsString::from_vec(b"bad\xff".to_vec()), "v".into()],
            None,
            "tenure: keys are UTF-8 text",
        ),
        (
            os(&["get", "k", "--rev", "100000"]),
            None,
            "etcdserver: mvcc: required revision is a future revision",
        ),
        (os(&["put", "_tenure/x", "v"]), None, "tenure: keys under _tenure/"),
        (os(&["put", "k", "v", "--lease", "7777"]), None, "etcdserver: requested lease not found"),
    ];
    for (args, stdin, want) in cases {
        let (ok, out, err) = e.run(&args, stdin.as_deref());
        assert!(!ok && err.contains(want), "{args:?}: {out}{err} (wanted {want:?})");
    }
    let after = endpoints[0].json(&["get", "shared/k"])["header"]["revision"].as_i64();
    assert_eq!(before, after, "a refused request changed the store");

    // MoveLeader hands leadership to a voter once it holds the log; a
    // member that is not a voter is refused; to the leader itself, it is
    // done at once (as etcd answers).
    let err = endpoints[leader].fails(&["move-leader", "ffff"]);
    assert!(err.contains("etcdserver: bad leader transferee"), "{err}");
    let same = endpoints[leader].ok(&["move-leader", &format!("{:x}", leader + 1)]);
    assert!(same.contains("Leadership transferred"), "{same}");
    let to = (leader + 1) % 3;
    let moved = endpoints[leader].ok(&["move-leader", &format!("{:x}", to + 1)]);
    assert!(moved.contains("Leadership transferred"), "{moved}");
    let since = Instant::now();
    loop {
        let s = endpoints[to].json(&["endpoint", "status"]);
        if s[0]["Status"]["leader"].as_u64() == Some(to as u64 + 1) {
            break;
        }
        assert!(since.elapsed() < START_BOUND, "node {} does not lead: {s}\n{}", to + 1, c.logs());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// An `etcdctl lock` child, killed if the test ends first.
struct Locker(std::process::Child);

impl Drop for Locker {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// clientv3's `Mutex` (through `etcdctl lock`) on tenure: its transaction
/// puts the locker's key and reads the prefix in one step. Two lockers on
/// different nodes, each holding the lock for 1 s while it records when it
/// held it: the second waits for the first, the holds never overlap, and
/// the second's lock revision (its fencing token) is the higher.
#[tokio::test(flavor = "multi_thread")]
async fn etcdctl_lock_holders_on_two_nodes_never_overlap() {
    if !installed("etcdctl", "version") {
        eprintln!("SKIPPED: etcdctl is not on PATH (Debian: etcd-client)");
        return;
    }
    let _serial = serial().await;
    let (c, endpoints) = tenure_cluster();
    let (leader, _, _) = c.wait_leader(&[0, 1, 2], 0, Instant::now(), START_BOUND).await;
    for e in &endpoints {
        e.wait_serving(&c);
    }
    let record = c.dir.path().join("held");
    let hold = format!(
        "echo \"$(date +%s%N) start $ETCD_LOCK_REV\" >> {0}; sleep 1; echo \"$(date +%s%N) end\" >> {0}",
        record.display()
    );
    let spawn = |e: &Endpoint| {
        let mut cmd = Command::new("etcdctl");
        cmd.env("ETCDCTL_API", "3")
            .arg("--endpoints")
            .arg(&e.url)
            .args(&e.tls)
            .args(["--dial-timeout", "5s", "lock", "tenure-test-lock", "--", "sh", "-c", &hold])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        Locker(cmd.spawn().expect("run etcdctl lock"))
    };
    let mut first = spawn(&endpoints[(leader + 1) % 3]);
    std::thread::sleep(Duration::from_millis(300));
    let mut second = spawn(&endpoints[(leader + 2) % 3]);
    let since = Instant::now();
    for locker in [&mut first, &mut second] {
        loop {
            if let Some(status) = locker.0.try_wait().unwrap() {
                let mut err = String::new();
                std::io::Read::read_to_string(locker.0.stderr.as_mut().unwrap(), &mut err).unwrap();
                assert!(status.success(), "etcdctl lock failed: {err}");
                break;
            }
            assert!(since.elapsed() < Duration::from_secs(30), "etcdctl lock never ended");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let lines: Vec<Vec<String>> = std::fs::read_to_string(&record)
        .unwrap()
        .lines()
        .map(|l| l.split_whitespace().map(String::from).collect())
        .collect();
    assert_eq!(lines.len(), 4, "{lines:?}");
    let kinds: Vec<&str> = lines.iter().map(|l| l[1].as_str()).collect();
    assert_eq!(kinds, ["start", "end", "start", "end"], "the holds overlap: {lines:?}");
    let time = |i: usize| lines[i][0].parse::<u128>().unwrap();
    assert!(time(1) <= time(2), "the second held the lock before the first let go: {lines:?}");
    let rev = |i: usize| lines[i][2].parse::<i64>().unwrap();
    assert!(rev(2) > rev(0), "the fencing tokens do not rise: {lines:?}");
}

/// Debian's python-etcd3 (a client nobody here wrote) through a follower's
/// listener: status, put and get, a lease with a key (refresh, time to
/// live, keys, revoke), a watch's put and delete events, and its lock
/// (uncontended: Debian's 0.12 fails a contended acquire inside the
/// client, whatever the server; `etcdctl lock` tests contention): the script
/// `tests/python/etcd3_client.py`. Skipped when the module is missing
/// (CI installs python3-etcd3).
#[tokio::test(flavor = "multi_thread")]
async fn python_etcd3_works_through_a_follower() {
    let python = "/usr/bin/python3";
    let has_module = Command::new(python)
        .args(["-c", "import etcd3"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !has_module {
        eprintln!("SKIPPED: /usr/bin/python3 has no etcd3 module (Debian: python3-etcd3)");
        return;
    }
    let _serial = serial().await;
    let (c, endpoints) = tenure_cluster();
    let (leader, _, _) = c.wait_leader(&[0, 1, 2], 0, Instant::now(), START_BOUND).await;
    let follower = (leader + 1) % 3;
    endpoints[follower].wait_serving(&c);
    let port = endpoints[follower].url.rsplit(':').next().unwrap().to_string();
    let certs = c.dir.path().join("certs");
    let id = follower + 1;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/etcd3_client.py");
    let mut child = Command::new(python)
        .arg(script)
        .args(["127.0.0.1", &port])
        .arg(certs.join("ca.pem"))
        .arg(certs.join(format!("node-{id}.pem")))
        .arg(certs.join(format!("node-{id}-key.pem")))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run python3");
    let since = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if since.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the python-etcd3 script did not end within 60 s\n{}", c.logs());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = child.wait_with_output().unwrap();
    assert!(
        status.success() && String::from_utf8_lossy(&out.stdout).trim() == "ok",
        "python-etcd3: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// What a stranger can send to the etcd listener: a client without a
/// certificate of the cluster's CA is refused; bytes that are neither TLS
/// nor gRPC, and a value of 1.5 MiB (under gRPC's limit, far over tenure's
/// value limit), are refused; nothing is written and the listener keeps
/// serving.
#[tokio::test(flavor = "multi_thread")]
async fn strangers_and_huge_values_change_nothing() {
    if !installed("etcdctl", "version") {
        eprintln!("SKIPPED: etcdctl is not on PATH (Debian: etcd-client)");
        return;
    }
    let _serial = serial().await;
    let (c, endpoints) = tenure_cluster();
    c.wait_leader(&[0, 1, 2], 0, Instant::now(), START_BOUND).await;
    let e = &endpoints[0];
    e.wait_serving(&c);
    let before = e.json(&["get", "health"])["header"]["revision"].as_i64().unwrap_or(0);
    let addr = e.url.trim_start_matches("https://").to_string();

    // A connection that never starts its TLS handshake is closed (after
    // the listener's 5 s TLS_HANDSHAKE_TIMEOUT), not held: watched while
    // the rest runs.
    let silent = std::net::TcpStream::connect(&addr).unwrap();
    let opened = Instant::now();
    let silent = std::thread::spawn(move || {
        let mut silent = silent;
        silent.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
        let mut byte = [0u8; 1];
        let read = silent.read(&mut byte);
        (read.map_err(|e| e.kind()), opened.elapsed())
    });

    // No client certificate: only the CA to check the server.
    let ca_only = Endpoint { url: e.url.clone(), tls: e.tls[..2].to_vec() };
    let (ok, out, err) = ca_only.run(&["put", "stranger", "x"], None);
    assert!(!ok, "a client without a certificate wrote: {out}{err}");
    // `tenure kv` given this port instead of an API port is told which port
    // it is, at once (no retry mends it).
    let started = Instant::now();
    let kv = Command::new(crate::harness::exe())
        .args(["kv", "put", "stranger", "x", "--endpoints", &addr, "--wait-ms", "60000"])
        .arg("--cacert")
        .arg(&e.tls[1])
        .env("TENURE_TOKEN", crate::harness::APP_TOKEN)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&kv.stderr);
    assert_eq!(kv.status.code(), Some(1), "refused at TLS, so not sent: {said}");
    assert!(said.contains("etcd listener (--etcd-listen)"), "{said}");
    assert!(said.contains("asking again would not help"), "{said}");
    assert!(started.elapsed() < Duration::from_secs(30), "{:?}: {said}", started.elapsed());

    // Garbage on the port.
    let mut raw = std::net::TcpStream::connect(&addr).unwrap();
    raw.write_all(&[0x16, 0x03, 0x01, 0xff, 0xff]).unwrap();
    raw.write_all(&vec![0xab; 64 * 1024]).unwrap_or(());
    drop(raw);

    // A value far over tenure's limit.
    let huge = "v".repeat(1536 * 1024);
    let (ok, out, err) = e.run(&["put", "huge"], Some(&huge));
    assert!(!ok, "a 1.5 MiB value was accepted: {out}");
    assert!(err.contains("Error"), "no error for a 1.5 MiB value: {err}");

    let after = e.json(&["get", "health"])["header"]["revision"].as_i64().unwrap_or(0);
    assert_eq!(before, after, "a refused request changed the store");
    assert_eq!(e.json(&["get", "stranger"])["count"], Value::Null);
    e.ok(&["put", "still", "serving"]);

    let (read, after) = silent.join().unwrap();
    assert!(
        matches!(read, Ok(0) | Err(std::io::ErrorKind::ConnectionReset)),
        "a silent connection was held: {read:?} after {after:?}"
    );
    assert!(after < Duration::from_secs(10), "closed only after {after:?}");
}

impl Endpoint {
    /// This endpoint as the etcd user `name` (an API token's name) with
    /// `secret` (its secret): `etcdctl --user NAME:SECRET`.
    fn as_user(&self, name: &str, secret: &str) -> Endpoint {
        let mut tls = self.tls.clone();
        tls.extend(os(&["--user", &format!("{name}:{secret}")]));
        Endpoint { url: self.url.clone(), tls }
    }

    /// Runs `args`, which must fail; returns the error lines.
    fn fails(&self, args: &[&str]) -> String {
        let (ok, out, err) = self.run(args, None);
        assert!(!ok, "etcdctl {args:?} succeeded: {out}");
        err
    }
}

/// etcd's users are tenure's API tokens: `etcdctl --user NAME:SECRET` with
/// a token's name and secret gets the token's role; with
/// `--etcd-require-token` a call without one is refused; a lease belongs to
/// the token that granted it.
#[tokio::test(flavor = "multi_thread")]
async fn etcd_users_are_api_tokens_with_their_roles_and_leases() {
    if !installed("etcdctl", "version") {
        eprintln!("SKIPPED: etcdctl is not on PATH (Debian: etcd-client)");
        return;
    }
    let _serial = serial().await;
    let (c, endpoints) = crate::harness::etcd_cluster_with(&["--etcd-require-token"]);
    let (c, endpoints) =
        (c, endpoints.into_iter().map(|(url, tls)| Endpoint { url, tls }).collect::<Vec<_>>());
    c.wait_leader(&[0, 1, 2], 0, Instant::now(), START_BOUND).await;
    let e = &endpoints[1];
    let admin = e.as_user("test-admin", ADMIN_TOKEN);
    admin.wait_serving(&c);
    let reader = e.as_user("test-read", READ_TOKEN);
    let app = e.as_user("test-app", APP_TOKEN);
    let other = e.as_user("test-other", OTHER_TOKEN);

    // Without a token, a client certificate is not enough here; a health
    // probe's Check needs none (as on etcd).
    let err = e.fails(&["get", "k"]);
    assert!(err.contains("user name is empty"), "{err}");
    health_is_checked_without_a_token(e).await;
    // A wrong secret, or a right secret under another token's name.
    for (name, secret) in [("test-app", "not-the-secret-0000"), ("test-read", APP_TOKEN)] {
        let err = e.as_user(name, secret).fails(&["get", "k"]);
        assert!(err.contains("authentication failed"), "{name}: {err}");
    }

    // Roles: read reads; write writes; only admin compacts.
    app.ok(&["put", "k", "v"]);
    assert!(reader.ok(&["get", "k"]).contains('v'));
    let err = reader.fails(&["put", "k", "w"]);
    assert!(err.contains("permission denied"), "{err}");
    // A transaction that only reads is a read; one that writes is not.
    let (ok, out, err) = reader.run(&["txn"], Some("\nget k\n\n\n"));
    assert!(ok && out.contains("SUCCESS"), "a read-only txn by a reader: {out}{err}");
    let (ok, out, err) = reader.run(&["txn"], Some("\nput k w\n\n\n"));
    assert!(!ok && err.contains("permission denied"), "a reader's txn wrote: {out}{err}");
    let revision = admin.json(&["get", "k"])["header"]["revision"].as_i64().unwrap();
    let err = app.fails(&["compact", &revision.to_string()]);
    assert!(err.contains("permission denied"), "{err}");
    admin.ok(&["compact", &revision.to_string()]);

    // A lease is its grantor's: another write token can neither renew nor
    // revoke it; its owner and an administrator can.
    let id = app.json(&["lease", "grant", "60"])["ID"].as_i64().unwrap();
    let hex = format!("{id:x}");
    let err = other.fails(&["lease", "revoke", &hex]);
    assert!(err.contains("permission denied"), "{err}");
    let err = other.fails(&["put", "k2", "v", &format!("--lease={hex}")]);
    assert!(err.contains("permission denied"), "keys attached to another's lease: {err}");
    app.ok(&["put", "k2", "v", &format!("--lease={hex}")]);
    // A lease not granted yet is refused, not checked later: ids count up,
    // and another token's grant could take the id before the write applied.
    let err = other.fails(&["put", "k3", "v", &format!("--lease={:x}", id + 1000)]);
    assert!(err.contains("requested lease not found"), "{err}");
    // Proclaim puts with the leader key's lease: another token's is refused.
    proclaim_with_anothers_lease_is_refused(e, id).await;
    let (ok, out, err) = other.run(&["lease", "keep-alive", "--once", &hex], None);
    assert!(!ok || !out.contains("keepalived"), "another token renewed the lease: {out}{err}");
    assert!(app.ok(&["lease", "keep-alive", "--once", &hex]).contains("keepalived"));
    assert!(admin.ok(&["lease", "timetolive", &hex]).contains("remaining"));
    app.ok(&["lease", "revoke", &hex]);
    let mine = other.json(&["lease", "grant", "60"])["ID"].as_i64().unwrap();
    admin.ok(&["lease", "revoke", &format!("{mine:x}")]);
}

/// gRPC's health service on `e`, as `grpc_health_probe` and Kubernetes
/// call it, without a token: Check answers SERVING; Watch, which would hold
/// the listener's shutdown open, is refused.
async fn health_is_checked_without_a_token(e: &Endpoint) {
    use tonic_health::pb::health_client::HealthClient;
    use tonic_health::pb::{health_check_response::ServingStatus, HealthCheckRequest};
    let mut health = HealthClient::new(crate::harness::etcd_channel(&e.url, &e.tls).await);
    let answer = health.check(HealthCheckRequest { service: String::new() }).await;
    let status = answer.expect("a health check without a token").into_inner().status;
    assert_eq!(status, ServingStatus::Serving as i32);
    let refused = health.watch(HealthCheckRequest { service: String::new() }).await;
    let refused = refused.expect_err("Watch is not served");
    assert_eq!(refused.code(), tonic::Code::Unimplemented, "{refused:?}");
}

/// A stranger's `tenure-forwarded` marker (the one a follower puts on a
/// member change it passes on to the leader), with an admin token: a
/// follower answers "not leader" and passes nothing on, whatever the
/// marker's value; the leader ignores it (the token decides).
async fn forged_forward_markers_change_nothing(follower: &Endpoint, leader: &Endpoint) {
    use tenure_etcd_api::etcdserverpb::cluster_client::ClusterClient;
    use tenure_etcd_api::etcdserverpb::{MemberAddRequest, MemberListRequest, MemberRemoveRequest};
    let marked = |value: &str| {
        let value = value.to_string();
        move |mut r: tonic::Request<()>| {
            r.metadata_mut().insert("token", ADMIN_TOKEN.parse().unwrap());
            r.metadata_mut().insert("tenure-forwarded", value.parse().unwrap());
            Ok(r)
        }
    };
    let add =
        || MemberAddRequest { peer_ur_ls: vec!["https://127.0.0.1:11".into()], is_learner: true };
    let huge = "x".repeat(8 * 1024);
    let channel = crate::harness::etcd_channel(&follower.url, &follower.tls).await;
    for value in ["1", "", &huge] {
        let mut c = ClusterClient::with_interceptor(channel.clone(), marked(value));
        let refused = c.member_add(add()).await.expect_err("a forged marker on a follower");
        assert_eq!(refused.code(), tonic::Code::FailedPrecondition, "{refused:?}");
        assert_eq!(refused.message(), "etcdserver: not leader");
        let members = c.member_list(MemberListRequest::default()).await.unwrap().into_inner();
        assert_eq!(members.members.len(), 3, "a forged change was made: {members:?}");
    }
    let channel = crate::harness::etcd_channel(&leader.url, &leader.tls).await;
    let mut c = ClusterClient::with_interceptor(channel, marked("1"));
    let added = c.member_add(add()).await.expect("the leader ignores the marker").into_inner();
    let id = added.member.expect("the new member").id;
    c.member_remove(MemberRemoveRequest { id }).await.expect("and removes the learner");
}

/// `test-other` campaigns with a lease of its own, then proclaims with the
/// leader key naming `victim` (a lease of `test-app`): refused, and the
/// value is not written.
async fn proclaim_with_anothers_lease_is_refused(e: &Endpoint, victim: i64) {
    use tenure_etcd_api::etcdserverpb::lease_client::LeaseClient;
    use tenure_etcd_api::etcdserverpb::LeaseGrantRequest;
    use tenure_etcd_api::v3electionpb::election_client::ElectionClient;
    use tenure_etcd_api::v3electionpb::{CampaignRequest, LeaderKey, ProclaimRequest};
    let channel = crate::harness::etcd_channel(&e.url, &e.tls).await;
    let token = |mut r: tonic::Request<()>| {
        r.metadata_mut().insert("token", OTHER_TOKEN.parse().unwrap());
        Ok(r)
    };
    let mut lease = LeaseClient::with_interceptor(channel.clone(), token);
    let mine = lease.lease_grant(LeaseGrantRequest { ttl: 60, id: 0 }).await.unwrap();
    let mine = mine.into_inner().id;
    let mut election = ElectionClient::with_interceptor(channel, token);
    let campaign = CampaignRequest { name: b"owned".to_vec(), lease: mine, value: b"a".to_vec() };
    let leader = election.campaign(campaign).await.expect("a campaign").into_inner().leader;
    let leader = leader.expect("a leader key");
    let forged = LeaderKey { lease: victim, ..leader.clone() };
    let proclaim = ProclaimRequest { leader: Some(forged), value: b"b".to_vec() };
    let refused = election.proclaim(proclaim).await.expect_err("a proclaim with another's lease");
    assert!(refused.message().contains("permission denied"), "{refused:?}");
    let own = ProclaimRequest { leader: Some(leader), value: b"c".to_vec() };
    election.proclaim(own).await.expect("a proclaim with its own lease");
}
