//! Misconfigured peers, with real `tenure server` processes: a voter list cut
//! short by a typo, nodes that disagree on the voters or the election
//! timings, a one-node cluster,
//! two processes with one node id, and nodes that learn each other's HTTP
//! API addresses at the peer handshake (no `--peer-http`).

use crate::harness::{serial, TestCluster, READ_TOKEN};
use hyper::Method;
use serde_json::Value;
use std::process::Output;
use std::time::{Duration, Instant};

const HEARTBEAT_MS: u64 = 20;
const TIMEOUT_MS: u64 = 200;
/// Bound on a first election, including process start-up on a busy machine.
const FIRST_ELECTION_BOUND: Duration = Duration::from_secs(10);
/// How long a refused node is watched for never leading: many election
/// timeouts.
const WATCH: Duration = Duration::from_millis(10 * TIMEOUT_MS);

fn log_of(c: &TestCluster, i: usize) -> String {
    std::fs::read_to_string(&c.servers[i].log).unwrap_or_default()
}

/// `tenure status` over every server's endpoint, with the read token.
fn tenure_status(c: &TestCluster) -> Output {
    let endpoints: Vec<String> = (0..c.servers.len()).map(|i| c.endpoint(i)).collect();
    std::process::Command::new(crate::harness::exe())
        .args(["status", "--endpoints", &endpoints.join(",")])
        .env("TENURE_CACERT", c.ca())
        .env("TENURE_TOKEN", READ_TOKEN)
        .output()
        .unwrap()
}

/// Node `i`'s view of peer `peer` in its `/v1/status`.
fn peer_of(status: &Value, peer: u64) -> Value {
    status["peers"].as_array().unwrap().iter().find(|p| p["id"] == peer).unwrap().clone()
}

/// Waits until node `i` reports a handshake error about peer `peer`.
async fn handshake_error(c: &TestCluster, i: usize, peer: u64) -> String {
    let since = Instant::now();
    loop {
        if let Some(s) = c.status(i).await {
            if let Some(e) = peer_of(&s, peer)["handshake_error"].as_str() {
                return e.to_string();
            }
        }
        assert!(
            since.elapsed() < FIRST_ELECTION_BOUND,
            "node {} shows no handshake error about node {peer}\n{}",
            c.servers[i].id,
            c.logs()
        );
        tokio::time::sleep(crate::harness::POLL).await;
    }
}

/// The typo: nodes 1 and 3 list voters 1, 2, 3; node 2 lists itself
/// alone. Node 2 then refuses to start, naming the flag of a one-node
/// cluster. With the milder typo (node 2 lists 1 and 2), it starts, but the
/// nodes refuse each other at the handshake with an error naming both voter
/// sets (in both logs, in `/v1/status`), node 2 never leads, and `tenure
/// status` says the endpoints disagree and exits 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_typo_in_peers_is_refused_and_never_makes_a_second_leader() {
    let _serial = serial().await;
    let mut c = TestCluster::new(3, HEARTBEAT_MS, TIMEOUT_MS);
    // No --peer-http: it would name a node that node 2 does not list.
    c.peer_http = String::new();
    let port = |c: &TestCluster, i: usize| c.servers[i].peer_port;
    c.servers[1].peers = Some(format!("2=127.0.0.1:{}", port(&c, 1)));
    c.spawn(1);
    let exit = c.wait_exit(1, FIRST_ELECTION_BOUND);
    let log = log_of(&c, 1);
    assert!(!exit.success(), "node 2 alone started\n{log}");
    assert!(
        log.contains("the voters are node 2 alone") && log.contains("add --single-node"),
        "{log}"
    );

    c.servers[1].peers = Some(format!("1=127.0.0.1:{},2=127.0.0.1:{}", port(&c, 0), port(&c, 1)));
    for i in 0..3 {
        c.spawn(i);
    }
    let (leader, _) = c.wait_agreement(&[0, 2], FIRST_ELECTION_BOUND).await;
    assert_ne!(leader, 1);
    // Both sides say why, naming both sets.
    let both = |e: &str| e.contains("{1,2}") && e.contains("{1,2,3}") && e.contains("--peers");
    let e = handshake_error(&c, 0, 2).await;
    assert!(both(&e), "node 1's view of node 2: {e}");
    let e = handshake_error(&c, 1, 1).await;
    assert!(both(&e), "node 2's view of node 1: {e}");
    for i in [0, 1] {
        let log = log_of(&c, i);
        let line = log.lines().find(|l| l.contains("the voter sets differ")).unwrap_or("");
        assert!(both(line), "node {} logs no refusal naming both sets:\n{log}", i + 1);
    }
    let until = Instant::now() + WATCH;
    while Instant::now() < until {
        let s = c.status(1).await.expect("node 2 runs");
        assert_ne!(s["role"], "leader", "node 2 leads: {s}");
        assert!(s["leader"].is_null(), "node 2 learnt a leader: {s}");
        for p in s["peers"].as_array().unwrap() {
            assert_eq!(p["connected"], false, "node 2 connected: {s}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let s = c.status(0).await.unwrap();
    assert_eq!(s["voters"], serde_json::json!([1, 2, 3]));
    assert_eq!(s["cluster_id"], crate::harness::CLUSTER);

    let out = tenure_status(&c);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("the endpoints disagree on the voters")
            && err.contains("node 1, node 3 counts voters {1,2,3}")
            && err.contains("node 2 counts voters {1,2}"),
        "{err}"
    );
    assert!(err.contains("node 2 cannot talk to node 1: "), "{err}");
}

/// A node restarted with a shorter election timeout than the cluster's
/// could help elect a leader while the leader's lease still holds: its
/// peers refuse it at the handshake, both ways, naming both timings (in
/// `/v1/status`), it never leads, and `tenure status` exits 2. Restarted
/// with the cluster's timings, it is a peer again and `status` exits 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_with_other_election_timings_is_refused() {
    let _serial = serial().await;
    let mut c = TestCluster::start(3, HEARTBEAT_MS, TIMEOUT_MS);
    c.wait_agreement(&[0, 1, 2], FIRST_ELECTION_BOUND).await;
    c.crash(2);
    c.election_timeout_ms = 120;
    c.spawn(2);
    c.election_timeout_ms = TIMEOUT_MS;
    // Which side refused first (a dial's check of the answer, or the
    // acceptor's of the hello) decides the words' order: each error names
    // both nodes' timings and the flags.
    let both = |e: &str| {
        e.contains("election timeout 120 ms, heartbeat 20 ms, round trip 10 ms")
            && e.contains("election timeout 200 ms, heartbeat 20 ms, round trip 10 ms")
            && e.contains("--election-timeout-ms")
    };
    let e = handshake_error(&c, 0, 3).await;
    assert!(both(&e), "node 1's view: {e}");
    let e = handshake_error(&c, 2, 1).await;
    assert!(both(&e), "node 3's view: {e}");
    let until = Instant::now() + WATCH;
    while Instant::now() < until {
        let s = c.status(2).await.expect("node 3 runs");
        assert_ne!(s["role"], "leader", "node 3 leads: {s}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let out = tenure_status(&c);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let line = err.lines().find(|l| l.contains("node 1 cannot talk to node 3: ")).unwrap_or("");
    assert!(both(line), "{err}");

    c.crash(2);
    c.spawn(2);
    let since = Instant::now();
    loop {
        let out = tenure_status(&c);
        if out.status.success() {
            break;
        }
        assert!(
            since.elapsed() < FIRST_ELECTION_BOUND,
            "status never agreed again: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A one-node cluster on purpose (`--single-node`) runs and leads; next to
/// a three-node cluster of the same id and CA it is a second leader, which
/// `tenure status` flags on a line of its own, exiting 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_flags_two_leaders() {
    let _serial = serial().await;
    let mut c = TestCluster::new(3, HEARTBEAT_MS, TIMEOUT_MS);
    c.peer_http = String::new();
    for i in [0, 2] {
        c.spawn(i);
    }
    let lone = format!("2=127.0.0.1:{}", c.servers[1].peer_port);
    c.servers[1].peers = Some(lone);
    c.spawn_with(1, &["--single-node"]);
    let (leader, _) = c.wait_agreement(&[0, 2], FIRST_ELECTION_BOUND).await;
    let (lone, _) = c.wait_agreement(&[1], FIRST_ELECTION_BOUND).await;
    assert_eq!((lone, c.status(1).await.unwrap()["voters"].clone()), (1, serde_json::json!([2])));
    let out = tenure_status(&c);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let two = err.lines().find(|l| l.contains("TWO LEADERS")).unwrap_or_else(|| panic!("{err}"));
    let (a, b) = (c.servers[leader].id.min(2), c.servers[leader].id.max(2));
    assert!(
        two.contains(&format!("node {a} (term")) && two.contains(&format!("node {b} (term")),
        "{two}"
    );
    assert!(err.contains("the endpoints disagree on the voters"), "{err}");
    // `--single-node` with other voters is refused, naming the flags.
    let mut d = TestCluster::new(3, HEARTBEAT_MS, TIMEOUT_MS);
    d.spawn_with(0, &["--single-node"]);
    let exit = d.wait_exit(0, FIRST_ELECTION_BOUND);
    let log = log_of(&d, 0);
    assert!(!exit.success() && log.contains("single_node is set"), "{log}");
}

/// A second process started with node 2's id (its own ports and data
/// directory, the cluster's voters): the nodes refuse it at the handshake,
/// saying "two processes claim node id 2", not "rolled back"; the real
/// node 2 stays connected, and the cluster keeps its leader.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duplicate_node_id_is_named_as_such() {
    let _serial = serial().await;
    let mut c = TestCluster::start(3, HEARTBEAT_MS, TIMEOUT_MS);
    let (leader, term) = c.wait_agreement(&[0, 1, 2], FIRST_ELECTION_BOUND).await;
    let dup = c.add_duplicate(2);
    c.spawn(dup);
    let since = Instant::now();
    let said = |c: &TestCluster| {
        [0, 2, dup].iter().any(|&i| log_of(c, i).contains("two processes claim node id 2"))
    };
    while !said(&c) {
        assert!(since.elapsed() < FIRST_ELECTION_BOUND, "no duplicate named\n{}", c.logs());
        tokio::time::sleep(crate::harness::POLL).await;
    }
    tokio::time::sleep(Duration::from_millis(5 * TIMEOUT_MS)).await;
    // The refused process says why.
    let e = handshake_error(&c, dup, 1).await;
    assert!(e.contains("two processes claim node id 2"), "{e}");
    for i in [0, 2] {
        let log = log_of(&c, i);
        assert!(!log.contains("rolled back"), "node {} says rolled back:\n{log}", i + 1);
        let s = c.status(i).await.unwrap();
        assert_eq!(peer_of(&s, 2)["connected"], true, "node {} lost node 2: {s}", i + 1);
        assert_eq!(s["term"], term, "node {}: the cluster changed term: {s}", i + 1);
        assert_eq!(s["leader"], c.servers[leader].id);
    }
}

/// Without `--peer-http`, the nodes learn each other's HTTP API addresses at
/// the handshake: `/v1/leader` on a follower names the leader's, and
/// `/v1/cluster` reads every node's status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_learn_each_others_http_address_at_the_handshake() {
    let _serial = serial().await;
    let mut c = TestCluster::new(3, HEARTBEAT_MS, TIMEOUT_MS);
    c.peer_http = String::new();
    for i in 0..3 {
        c.spawn(i);
    }
    let (leader, _) = c.wait_agreement(&[0, 1, 2], FIRST_ELECTION_BOUND).await;
    let follower = (leader + 1) % 3;
    let want = format!("127.0.0.1:{}", c.servers[leader].http_port);
    let since = Instant::now();
    loop {
        let (code, body, _) = c.request(follower, Method::GET, "/v1/leader", None).await.unwrap();
        let (_, cluster, _) = c.request(follower, Method::GET, "/v1/cluster", None).await.unwrap();
        let read = cluster["nodes"].as_array().unwrap().iter().all(|n| !n["status"].is_null());
        if code == 200 && body["http_address"] == want.as_str() && read {
            break;
        }
        assert!(
            since.elapsed() < FIRST_ELECTION_BOUND,
            "/v1/leader: {body}\n/v1/cluster: {cluster}\n{}",
            c.logs()
        );
        tokio::time::sleep(crate::harness::POLL).await;
    }
}
