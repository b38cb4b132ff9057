//! Incarnations and death notices against real `tenure server` processes:
//! every start takes a higher incarnation, which `/v1/status` shows; a
//! death notice (`POST /v1/peers/{id}/dead`, `tenure notify-dead`) is
//! checked against the incarnations each node saw, needs an admin token,
//! and changes nothing when refused.

use crate::harness::{serial, TestCluster, READ_TOKEN};
use hyper::Method;
use nix::sys::signal::Signal;
use serde_json::Value;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The test cluster's timings: the election timeout of the death-notice goal.
const HEARTBEAT_MS: u64 = 100;
const TIMEOUT_MS: u64 = 1000;
/// Bound on a first election, including process start-up on a busy machine.
const FIRST_ELECTION_BOUND: Duration = Duration::from_secs(15);
/// Bound on the peers learning a (re)started node's incarnation.
const LEARN_BOUND: Duration = Duration::from_secs(10);

fn all() -> Vec<usize> {
    (0..3).collect()
}

/// Runs the CLI with `args` (admin token, the cluster's CA).
fn cli(c: &TestCluster, args: &[&str]) -> Output {
    Command::new(crate::harness::exe())
        .args(args)
        .env("TENURE_TOKEN", crate::harness::ADMIN_TOKEN)
        .env("TENURE_CACERT", c.ca())
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// The endpoints of `among`, comma-separated.
fn endpoints(c: &TestCluster, among: &[usize]) -> String {
    among.iter().map(|&i| c.endpoint(i)).collect::<Vec<_>>().join(",")
}

/// Node `i`'s own incarnation, from its status.
async fn incarnation(c: &TestCluster, i: usize) -> u64 {
    let s = c.status(i).await.expect("the node answers");
    s["incarnation"].as_u64().unwrap_or_else(|| panic!("no incarnation in {s}"))
}

/// The incarnation node `i` knows of peer `peer` (an id).
fn known(status: &Value, peer: u64) -> Option<u64> {
    let peers = status["peers"].as_array()?;
    peers.iter().find(|p| p["id"] == peer)?["incarnation"].as_u64()
}

/// Waits until every node in `among` knows every other's own incarnation.
async fn incarnations_learned(c: &TestCluster, among: &[usize]) {
    let since = Instant::now();
    loop {
        let mut own = Vec::new();
        for &i in among {
            own.push((c.servers[i].id, c.status(i).await));
        }
        let learned = own.iter().all(|(_, s)| {
            s.as_ref().is_some_and(|s| {
                own.iter().all(|(id, o)| {
                    *id == s["id"]
                        || o.as_ref().is_some_and(|o| known(s, *id) == o["incarnation"].as_u64())
                })
            })
        });
        if learned {
            return;
        }
        assert!(since.elapsed() < LEARN_BOUND, "incarnations not learned: {own:?}\n{}", c.logs());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A counter of node `i`'s `/metrics`.
async fn metric(c: &TestCluster, i: usize, name: &str) -> u64 {
    let (_, _, text) = c.request(i, Method::GET, "/metrics", None).await.expect("metrics");
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in\n{text}"))
}

/// `POST /v1/peers/{peer}/dead` with `body` on node `i`, with `token`.
async fn notify(
    c: &TestCluster,
    i: usize,
    token: Option<&str>,
    peer: &str,
    body: &str,
) -> crate::harness::Reply {
    let path = format!("/v1/peers/{peer}/dead");
    let json = Some(("application/json", body));
    c.request_as(i, token, Method::POST, &path, json).await.expect("an answer")
}

fn incarnation_body(n: u64) -> String {
    format!("{{\"incarnation\": {n}}}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_restart_raises_the_incarnation_and_the_peers_learn_it() {
    let _serial = serial().await;
    let mut c = TestCluster::start(3, HEARTBEAT_MS, TIMEOUT_MS);
    c.wait_agreement(&all(), FIRST_ELECTION_BOUND).await;
    incarnations_learned(&c, &all()).await;
    let i = 2;
    let id = c.servers[i].id;
    let mut last = incarnation(&c, i).await;
    for how in [Signal::SIGKILL, Signal::SIGTERM] {
        let notices = [
            metric(&c, 0, "tenure_death_notices_total").await,
            metric(&c, 1, "tenure_death_notices_total").await,
        ];
        c.signal(i, how);
        c.wait_exit(i, Duration::from_secs(5));
        c.spawn(i);
        c.wait_agreement(&all(), FIRST_ELECTION_BOUND).await;
        let now = incarnation(&c, i).await;
        assert_eq!(now, last + 1, "after {how}: incarnation {now} follows {last}");
        incarnations_learned(&c, &all()).await;
        for j in [0, 1] {
            let s = c.status(j).await.unwrap();
            assert_eq!(known(&s, id), Some(now), "node {} shows {s}", j + 1);
            // The new incarnation's handshake was the old one's death notice.
            let after = metric(&c, j, "tenure_death_notices_total").await;
            assert_eq!(after, notices[j] + 1, "node {}", j + 1);
        }
        eprintln!("after {how}: node {id} runs incarnation {now}");
        last = now;
    }
    // `tenure status` shows it in the node's row, before the first 8 hex
    // digits of the data directory's identity (the same at every restart).
    let directory = c.status(i).await.unwrap()["directory"].as_str().unwrap().to_string();
    let out = cli(&c, &["status", "--endpoints", &endpoints(&c, &all())]);
    let table = text(&out);
    let row = table.lines().find(|l| l.starts_with(&format!("{} ", c.endpoint(i))));
    let end = format!("  {last}  {}", &directory[..8]);
    assert!(row.is_some_and(|r| r.ends_with(&end)), "{table}");
}

/// Notices are checked against what each node saw, need an admin token,
/// and change nothing when refused; `tenure notify-dead` sends one to every
/// endpoint, reading the incarnation from the data directory if asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn death_notices_are_checked_and_need_an_admin_token() {
    let _serial = serial().await;
    let mut c = TestCluster::start(3, HEARTBEAT_MS, TIMEOUT_MS);
    let (leader, term) = c.wait_agreement(&all(), FIRST_ELECTION_BOUND).await;
    incarnations_learned(&c, &all()).await;
    let (f1, f2) = ((leader + 1) % 3, (leader + 2) % 3);
    let f2_id = c.servers[f2].id.to_string();
    let f2_inc = incarnation(&c, f2).await;
    let current = incarnation_body(f2_inc);
    let notices = metric(&c, f1, "tenure_death_notices_total").await;

    // Without admin rights: refused, nothing changes.
    let r = notify(&c, f1, Some(READ_TOKEN), &f2_id, &current).await;
    assert_eq!(r.status, 403, "{}", r.text);
    assert!(r.text.contains("needs admin"), "{}", r.text);
    let r = notify(&c, f1, None, &f2_id, &current).await;
    assert_eq!(r.status, 401, "{}", r.text);
    // Bad input: refused, nothing changes.
    let self_id = c.servers[f1].id.to_string();
    let self_inc = incarnation_body(incarnation(&c, f1).await);
    for (peer, body, status) in [
        ("0", current.as_str(), 400),
        ("two", current.as_str(), 400),
        (f2_id.as_str(), "{}", 400),
        (f2_id.as_str(), "{\"incarnation\": 0}", 400),
        (f2_id.as_str(), "{\"incarnation\": \"7\"}", 400),
        ("9", current.as_str(), 404),
        (self_id.as_str(), self_inc.as_str(), 400),
    ] {
        let r = notify(&c, f1, Some(crate::harness::ADMIN_TOKEN), peer, body).await;
        assert_eq!(r.status, status, "{peer} {body}: {}", r.text);
        assert!(r.json["error"].as_str().is_some_and(|e| !e.is_empty()), "{}", r.text);
    }
    // Never seen: refused, naming the current incarnation.
    let r =
        notify(&c, f1, Some(crate::harness::ADMIN_TOKEN), &f2_id, &incarnation_body(f2_inc + 1))
            .await;
    assert_eq!(r.status, 409, "{}", r.text);
    assert_eq!(r.json["current_incarnation"], f2_inc, "{}", r.text);
    assert_eq!(metric(&c, f1, "tenure_death_notices_total").await, notices, "a refusal counted");

    // A stale notice (an older incarnation) is refused by every node: 409
    // naming the current one, exit status 1.
    let others = endpoints(&c, &[leader, f1]);
    let stale = (f2_inc - 1).to_string();
    let out = cli(&c, &["notify-dead", "--node", &f2_id, "--incarnation", &stale, "-e", &others]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("stale"), "{}", text(&out));
    assert!(text(&out).contains(&format!("current incarnation {f2_inc}")), "{}", text(&out));

    // The current incarnation of a follower: accepted by the others (the
    // follower itself refuses a notice about itself); no leader changes.
    let everyone = endpoints(&c, &all());
    let inc = f2_inc.to_string();
    let out = cli(&c, &["notify-dead", "--node", &f2_id, "--incarnation", &inc, "-e", &everyone]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("2 of 3 nodes accepted"), "{}", text(&out));
    assert_eq!(metric(&c, f1, "tenure_death_notices_total").await, notices + 1);
    tokio::time::sleep(Duration::from_millis(3 * HEARTBEAT_MS)).await;
    for i in all() {
        let s = c.status(i).await.unwrap();
        assert_eq!(
            (s["leader"].as_u64(), s["term"].as_u64()),
            (Some(c.servers[leader].id), Some(term)),
            "node {}: {s}",
            i + 1
        );
    }

    // The data directory of a running node names no dead incarnation.
    let dir = c.servers[f2].data_dir.to_str().unwrap().to_string();
    let out = cli(&c, &["notify-dead", "--node", &f2_id, "--data-dir", &dir, "-e", &others]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("alive"), "{}", text(&out));
    // Once its process is gone, it does (as systemd's ExecStopPost would).
    c.crash(f2);
    let out = cli(&c, &["notify-dead", "--node", &f2_id, "--data-dir", &dir, "-e", &others]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("2 of 2 nodes accepted"), "{}", text(&out));

    // The trust assumption: a notice about a LIVE leader's current
    // incarnation is accepted like any other. The caller must know the
    // process is dead; nothing here can tell it is not.
    let l_id = c.servers[leader].id.to_string();
    let l_inc = incarnation_body(incarnation(&c, leader).await);
    let r = notify(&c, f1, Some(crate::harness::ADMIN_TOKEN), &l_id, &l_inc).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json["accepted"], true, "{}", r.text);
    assert_eq!(r.json["was_leader"], true, "{}", r.text);
}

/// SIGKILL of the leader, then the notice that systemd's `ExecStopPost`
/// would send: the survivors elect a new leader well within the election
/// timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notice_after_sigkill_of_the_leader_elects_a_new_one_within_milliseconds() {
    let _serial = serial().await;
    let mut c = TestCluster::start(3, HEARTBEAT_MS, TIMEOUT_MS);
    let (leader, term) = c.wait_agreement(&all(), FIRST_ELECTION_BOUND).await;
    incarnations_learned(&c, &all()).await;
    let survivors: Vec<usize> = all().into_iter().filter(|&i| i != leader).collect();
    let id = c.servers[leader].id.to_string();
    let dir = c.servers[leader].data_dir.to_str().unwrap().to_string();
    let others = endpoints(&c, &survivors);
    let killed_at = Instant::now();
    c.crash(leader);
    let out = cli(&c, &["notify-dead", "--node", &id, "--data-dir", &dir, "-e", &others]);
    let notified = killed_at.elapsed();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let (_, _, took) = c.wait_leader(&survivors, term, killed_at, Duration::from_secs(5)).await;
    eprintln!(
        "SIGKILL of the leader -> notice sent after {notified:?} -> new leader after {took:?} \
         (election timeout {TIMEOUT_MS} ms)"
    );
    let bound = Duration::from_millis(400);
    assert!(took < bound, "failover took {took:?}, bound {bound:?}\n{}", c.logs());
}

/// The pids of `pid`'s children (`/proc/<pid>/task/<pid>/children`).
fn children(pid: u32) -> Vec<u32> {
    let path = format!("/proc/{pid}/task/{pid}/children");
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    text.split_whitespace().filter_map(|p| p.parse().ok()).collect()
}

/// The one node process that supervisor `supervisor` runs, once it runs.
async fn supervised_node(supervisor: u32) -> u32 {
    let since = Instant::now();
    loop {
        if let [node] = children(supervisor)[..] {
            return node;
        }
        assert!(since.elapsed() < LEARN_BOUND, "supervisor {supervisor} runs no single node");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// `tenure server --supervised`: SIGKILL of the leader's node process is
/// reported by its supervisor at once, so the survivors elect a new leader
/// within milliseconds; the supervisor starts the node again, which rejoins
/// under the new leader without another election; SIGTERM to the supervisor
/// stops the node, then the supervisor, with status 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_supervisor_reports_its_nodes_death_and_starts_it_again() {
    let _serial = serial().await;
    let mut c = TestCluster::new(3, HEARTBEAT_MS, TIMEOUT_MS);
    let token = c.token_file("admin").display().to_string();
    for i in all() {
        c.spawn_with(i, &["--supervised", "--notify-token-file", &token]);
    }
    let (leader, term) = c.wait_agreement(&all(), FIRST_ELECTION_BOUND).await;
    incarnations_learned(&c, &all()).await;
    let before = incarnation(&c, leader).await;
    let supervisor = c.pid(leader).expect("running");
    let node = supervised_node(supervisor).await;
    let survivors: Vec<usize> = all().into_iter().filter(|&i| i != leader).collect();

    let killed_at = Instant::now();
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(node as i32), Signal::SIGKILL).unwrap();
    let (new, new_term, took) =
        c.wait_leader(&survivors, term, killed_at, Duration::from_secs(5)).await;
    eprintln!("supervised: SIGKILL of the leader's node -> new leader after {took:?}");
    let bound = Duration::from_millis(400);
    assert!(took < bound, "failover took {took:?}, bound {bound:?}\n{}", c.logs());

    // Restarted by its supervisor: a new incarnation, following the new leader.
    let restarted = supervised_node(supervisor).await;
    assert_ne!(restarted, node, "the supervisor runs a new process");
    assert_eq!(c.wait_agreement(&all(), FIRST_ELECTION_BOUND).await, (new, new_term));
    assert!(incarnation(&c, leader).await > before);
    // No election follows the rejoin.
    tokio::time::sleep(Duration::from_millis(2 * TIMEOUT_MS)).await;
    assert_eq!(c.wait_agreement(&all(), FIRST_ELECTION_BOUND).await, (new, new_term));

    // A node never outlives its supervisor: a SIGKILLed one's node stops.
    let follower = survivors.into_iter().find(|&i| i != new).expect("two survivors");
    let orphan = supervised_node(c.pid(follower).expect("running")).await;
    c.crash(follower);
    let since = Instant::now();
    while alive(orphan) {
        assert!(since.elapsed() < LEARN_BOUND, "node {orphan} outlived its supervisor");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    c.signal(leader, Signal::SIGTERM);
    let status = c.wait_exit(leader, Duration::from_secs(10));
    assert!(status.success(), "the supervisor exited with {status}\n{}", c.logs());
    assert!(!alive(restarted), "the node outlived its supervisor");
}

/// True while process `pid` runs (not gone, not a zombie).
fn alive(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The state follows the command name's closing parenthesis.
    let state = stat.rsplit_once(") ").and_then(|(_, rest)| rest.chars().next());
    !matches!(state, None | Some('Z') | Some('X'))
}

/// What a supervisor and a supervised node take at start is checked before
/// anything runs, and each refusal says what to fix: a supervisor whose
/// notices would be refused (no token, a token without the admin role)
/// starts no child; a node given a `TENURE_SUPERVISOR_PID` that is not a
/// number, or not its parent's (its supervisor is gone), does not start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn supervised_starts_are_refused_with_clear_errors() {
    let _serial = serial().await;
    let mut c = TestCluster::new(3, HEARTBEAT_MS, TIMEOUT_MS);
    let not_a_parent = i32::MAX.to_string();
    let gone = format!("the supervisor ({not_a_parent}) is gone; not starting");
    let read = c.token_file("read").display().to_string();
    let cases: [(&[&str], Option<&str>, &str); 4] = [
        (&["--supervised"], None, "need a token of role admin: give --notify-token-file FILE"),
        (
            &["--supervised", "--notify-token-file", &read],
            None,
            "the token has role read; death notices need admin",
        ),
        (&[], Some("abc"), "TENURE_SUPERVISOR_PID=\"abc\" is not a pid"),
        // Not the server's parent (no pid is that high): as if its
        // supervisor had died and the node had been handed to another.
        (&[], Some(&not_a_parent), &gone),
    ];
    for (flags, supervisor, refusal) in cases {
        c.env = supervisor
            .map(|p| vec![("TENURE_SUPERVISOR_PID".into(), p.into())])
            .unwrap_or_default();
        c.spawn_with(0, flags);
        let status = c.wait_exit(0, Duration::from_secs(10));
        let logs = c.logs();
        assert!(!status.success(), "{flags:?} {supervisor:?} started\n{logs}");
        assert!(logs.contains(refusal), "{flags:?} {supervisor:?}: no {refusal:?} in\n{logs}");
    }
    // Nothing was started: no data directory, no incarnation taken.
    let data_dir = &c.servers[0].data_dir;
    assert!(!data_dir.exists(), "a refused start wrote {data_dir:?}");
}
