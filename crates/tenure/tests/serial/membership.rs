//! Changes of members on real `tenure server` processes (mutual TLS, HTTPS,
//! logs on disk), while a client writes to the key-value store: a cluster
//! of three grows to five by `tenure server --join`, shrinks back to three
//! by `tenure member remove` sent to a follower, and replaces a member
//! whose process was killed and whose data directory was wiped by a new
//! node (`tenure member replace`, run twice: it continues where it
//! stopped). Joins with a wrong token, a wrong CA, a read token or a wiped
//! directory are refused, saying why; a joined node restarts without
//! `--join`, and a removed one started again with `--join` does not add
//! itself back; two `tenure member add` at once: one wins, the other is
//! refused. After each step every acknowledged write is read back.
//! `docs/MEMBERSHIP.md`.

use crate::harness::{serial, TestCluster, ADMIN_TOKEN};
use hyper::Method;
use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::process::{Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tenure_api::{KvListBody, MembersBody};
use tenure_client::{Client, ClientOptions, Cluster, Retry};

/// The cluster's timings: a learner is promoted three election timeouts
/// (1.5 s) after it caught up.
const HEARTBEAT_MS: u64 = 50;
const TIMEOUT_MS: u64 = 500;
/// Bound on a first election, a join and a promotion, on a busy machine.
const BOUND: Duration = Duration::from_secs(20);
/// Bound on one CLI run.
const CLI_BOUND: Duration = Duration::from_secs(30);
/// Pause between two writes of the writer.
const WRITE_EVERY: Duration = Duration::from_millis(20);

/// Servers prepared (certificates for nodes 1 to 7): 1-3 the first
/// cluster, 4 and 5 join it, 6 replaces 4, 7 is refused.
const NODES: usize = 7;

/// A client of the cluster's API with the admin token.
fn client(c: &TestCluster) -> Client {
    let ca = c.ca();
    Client::new(ClientOptions { cacert: Some(&ca), token: Some(ADMIN_TOKEN) }).unwrap()
}

/// The endpoints of the servers `among`, comma-separated.
fn endpoints(c: &TestCluster, among: &[usize]) -> String {
    among.iter().map(|&i| c.endpoint(i)).collect::<Vec<_>>().join(",")
}

/// `among`'s endpoints as a cluster to ask.
fn cluster(c: &TestCluster, among: &[usize]) -> Cluster {
    Cluster::new(client(c), among.iter().map(|&i| c.endpoint(i)).collect()).unwrap()
}

/// Writes `w/NNNNNN` to any node of the cluster, one after another, and
/// keeps the keys whose write was acknowledged.
struct Writer {
    acked: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Writer {
    fn start(c: &TestCluster) -> Writer {
        let cluster = cluster(c, &(0..NODES).collect::<Vec<_>>());
        let acked = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn({
            let (acked, stop) = (acked.clone(), stop.clone());
            async move {
                for n in 0u64.. {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let key = format!("w/{n:06}");
                    let path = format!("/v1/kv/{key}");
                    let value = serde_json::json!(n);
                    let answer = cluster
                        .call(Method::PUT, &path, Some(&value), Duration::from_secs(3), Retry::Once)
                        .await;
                    if matches!(answer, Ok((_, ref a)) if a.status.is_success()) {
                        acked.lock().unwrap().push(key);
                    }
                    tokio::time::sleep(WRITE_EVERY).await;
                }
            }
        });
        Writer { acked, stop, task }
    }

    /// Reads every key back through `among`: each write acknowledged so
    /// far must be there. Returns how many were.
    async fn check(&self, c: &TestCluster, among: &[usize], step: &str) -> usize {
        let acked: Vec<String> = self.acked.lock().unwrap().clone();
        check(c, among, &acked, step).await
    }

    /// Stops writing; the keys whose writes were acknowledged.
    async fn stop(self) -> Vec<String> {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.unwrap();
        let acked = self.acked.lock().unwrap();
        acked.clone()
    }
}

/// Reads every key back through `among` (a linearizable list): each of
/// `acked` must be there. Returns how many there are.
async fn check(c: &TestCluster, among: &[usize], acked: &[String], step: &str) -> usize {
    let cluster = cluster(c, among);
    let since = Instant::now();
    let listed = loop {
        let read = cluster
            .json::<KvListBody>(
                Method::GET,
                "/v1/kv?prefix=w/&limit=10000",
                None,
                Duration::from_secs(5),
                Retry::Idempotent,
            )
            .await;
        match read {
            Ok(list) => break list,
            Err(e) if since.elapsed() < BOUND => {
                eprintln!("{step}: reading the writes back: {e}; again");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("{step}: the writes cannot be read back: {e}\n{}", c.logs()),
        }
    };
    assert!(!listed.more, "{step}: more keys than one page");
    let held: BTreeSet<&str> = listed.kvs.iter().map(|kv| kv.key.as_str()).collect();
    let lost: Vec<&String> = acked.iter().filter(|k| !held.contains(k.as_str())).collect();
    assert!(lost.is_empty(), "{step}: acknowledged writes lost: {lost:?}\n{}", c.logs());
    acked.len()
}

/// The members as the leader among `among` holds them, once `done` holds
/// of them; panics after [`BOUND`].
async fn members_when(
    c: &TestCluster,
    among: &[usize],
    what: &str,
    done: impl Fn(&MembersBody) -> bool,
) -> MembersBody {
    let cluster = cluster(c, among);
    let since = Instant::now();
    loop {
        let last = match tenure_client::members::members(&cluster).await {
            Ok(m) if m.committed && m.leader == Some(m.served_by) && done(&m) => return m,
            Ok(m) => format!("{m:?}"),
            Err(e) => e.to_string(),
        };
        assert!(since.elapsed() < BOUND, "{what}: not within {BOUND:?}: {last}\n{}", c.logs());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The voters' ids, ascending.
fn voters(m: &MembersBody) -> Vec<u64> {
    let mut ids: Vec<u64> = m.voters.iter().map(|v| v.id).collect();
    ids.sort_unstable();
    ids
}

/// Runs the CLI with `args` (the admin token, the cluster's CA); killed if
/// the test fails first.
async fn cli(c: &TestCluster, args: &[&str]) -> Output {
    let out = tokio::process::Command::new(crate::harness::exe())
        .args(args)
        .env("TENURE_TOKEN", ADMIN_TOKEN)
        .env("TENURE_CACERT", c.ca())
        .env_remove("TENURE_ENDPOINTS")
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    tokio::time::timeout(CLI_BOUND, out).await.expect("the CLI ends in time").unwrap()
}

fn code(out: &Output) -> i32 {
    out.status.code().expect("an exit status")
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// Starts server `i` joining through the servers `via`, with `extra`
/// flags, and the admin token file unless they name another.
fn join(c: &mut TestCluster, i: usize, via: &[usize], extra: &[&str]) {
    c.servers[i].join = Some(endpoints(c, via));
    let token = c.token_file("admin");
    let mut flags = extra.to_vec();
    if !extra.contains(&"--join-token-file") {
        flags.extend(["--join-token-file", token.to_str().unwrap()]);
    }
    c.spawn_with(i, &flags);
}

/// Copies directory `from` (files only, as a data directory holds) to `to`.
fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Waits for server `i` to exit on its own (a refused join), and returns
/// its log.
async fn refused(c: &mut TestCluster, i: usize, what: &str) -> String {
    stopped(c, i, what, 1).await
}

/// The exit status of a server removed from the cluster (`tenure server`'s
/// `--help`).
const REMOVED_EXIT: i32 = 78;

/// Waits for server `i` to exit on its own with status `code`, and returns
/// its log.
async fn stopped(c: &mut TestCluster, i: usize, what: &str, code: i32) -> String {
    let exited = c.servers[i].proc.wait_exit(BOUND).await;
    let log = c.servers[i].proc.log_text();
    let status = exited.unwrap_or_else(|e| panic!("{what}: {e}\n{log}"));
    assert_eq!(status.code(), Some(code), "{what}: {log}");
    std::fs::write(&c.servers[i].log, "").unwrap();
    log
}

/// Node 4 (server 3) as a new member, from an empty data directory: added
/// with `add` (a manual promotion, so it stays a learner), started with
/// `--join`, and caught up, as the members `among` show.
async fn add_learner_4(c: &mut TestCluster, add: &[&str], among: &[usize]) {
    std::fs::remove_dir_all(&c.servers[3].data_dir).unwrap();
    let out = cli(c, add).await;
    assert_eq!(code(&out), 0, "{}", text(&out));
    join(c, 3, &[0, 2], &[]);
    members_when(c, among, "node 4 a caught-up learner", |m| {
        m.learners.iter().any(|l| l.id == 4 && l.lag_entries == Some(0))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_grows_shrinks_and_replaces_a_dead_node_through_the_log_while_writes_go_on() {
    let _serial = serial().await;
    let began = Instant::now();
    let mut c = TestCluster::new(NODES, HEARTBEAT_MS, TIMEOUT_MS);
    let first = [0, 1, 2];
    let addr = |c: &TestCluster, i: usize| format!("127.0.0.1:{}", c.servers[i].peer_port);
    c.peers = harness_list(first.iter().map(|&i| (c.servers[i].id, addr(&c, i))));
    c.peer_http = harness_list(
        first.iter().map(|&i| (c.servers[i].id, format!("127.0.0.1:{}", c.servers[i].http_port))),
    );
    for i in first {
        c.spawn(i);
    }
    c.wait_agreement(&first, BOUND).await;
    let writer = Writer::start(&c);

    // Refused joins: a token nobody configured, a CA that did not sign the
    // servers' certificates, a token of role read. Nothing is added.
    let wrong = c.dir.path().join("wrong.token");
    std::fs::write(&wrong, "not-a-token-of-this-cluster-0123").unwrap();
    std::fs::set_permissions(&wrong, std::fs::Permissions::from_mode(0o600)).unwrap();
    join(&mut c, 6, &first, &["--join-token-file", wrong.to_str().unwrap()]);
    let log = refused(&mut c, 6, "a wrong token").await;
    assert!(
        log.contains("does not accept this token") && log.contains("--join-token-file"),
        "{log}"
    );
    let other = c.dir.path().join("other-ca");
    crate::harness::tenure_cert(&[
        "--out",
        other.to_str().unwrap(),
        "--nodes",
        "1",
        "--cluster-id",
        "x",
    ]);
    join(&mut c, 6, &first, &["--join-cacert", other.join("ca.pem").to_str().unwrap()]);
    let log = refused(&mut c, 6, "a wrong CA").await;
    assert!(log.contains("cannot read the members") && log.contains("certificate"), "{log}");
    let read = c.token_file("read");
    join(&mut c, 6, &first, &["--join-token-file", read.to_str().unwrap()]);
    let log = refused(&mut c, 6, "a read token").await;
    assert!(log.contains("POST /v1/members needs admin"), "{log}");
    // A peer address the members cannot dial (well formed, but nothing of
    // node 7 listens there: a typo in --advertise-peer): the leader dials
    // it before the change and refuses it, naming the address.
    let typo = addr(&c, 5);
    join(&mut c, 6, &first, &["--advertise-peer", &typo]);
    let log = refused(&mut c, 6, "a wrong --advertise-peer").await;
    assert!(
        log.contains(&format!("cannot reach node 7 at {typo}")) && log.contains("--advertise-peer"),
        "{log}"
    );
    // Another cluster's id (its certificate from the same CA, the right
    // token): the members read its hello and refuse it, so it does not ask
    // to be added (it was added before, as a member that could never sync).
    c.servers[6].cluster_id = "another".into();
    let _ = std::fs::remove_dir_all(&c.servers[6].data_dir);
    join(&mut c, 6, &first, &[]);
    let since = Instant::now();
    while !c.servers[6].proc.log_text().contains("not asking to be added") {
        assert!(since.elapsed() < BOUND, "{}", c.servers[6].proc.log_text());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    c.crash(6);
    let m = members_when(&c, &first, "three voters", |m| voters(m) == [1, 2, 3]).await;
    assert!(m.learners.is_empty(), "another cluster's node was added: {m:?}");

    // Grow: nodes 4 and 5 join at once; the leader adds both (one waits for
    // the other's change) and promotes them once they caught up.
    join(&mut c, 3, &first, &[]);
    join(&mut c, 4, &[2, 1], &[]);
    let m = members_when(&c, &first, "five voters", |m| voters(m) == [1, 2, 3, 4, 5]).await;
    for id in [4, 5] {
        let (member, _) = m.get(id).unwrap();
        let status = c.status(id as usize - 1).await.expect("the joined node answers");
        assert_eq!(member.directory.as_deref(), status["directory"].as_str(), "{m:?}");
        assert_eq!(member.address, addr(&c, id as usize - 1));
    }
    let grown = writer.check(&c, &[0, 1, 2, 3, 4], "grown to five").await;
    eprintln!("grown to five after {:?}: {grown} writes", began.elapsed());
    let all5 = endpoints(&c, &[0, 1, 2, 3, 4]);
    let out = cli(&c, &["member", "list", "-e", &all5]).await;
    assert_eq!(code(&out), 0, "{}", text(&out));
    let rows =
        String::from_utf8_lossy(&out.stdout).lines().filter(|l| l.contains(" voter ")).count();
    assert_eq!(rows, 5, "{}", text(&out));
    let out = cli(&c, &["status", "-e", &all5]).await;
    assert_eq!(code(&out), 0, "no disagreement: {}", text(&out));

    // A change asked of a follower: 409 naming the leader and its API.
    let leader = m.leader.unwrap() as usize - 1;
    let follower = [0, 1, 2, 3, 4].into_iter().find(|&i| i != leader).unwrap();
    let body = r#"{"id": 9, "address": "127.0.0.1:1"}"#;
    let (status, json, _) = c
        .request(follower, Method::POST, "/v1/members", Some(("application/json", body)))
        .await
        .unwrap();
    assert_eq!(status, 409, "{json}");
    assert_eq!(json["leader"], m.leader.unwrap(), "{json}");
    assert_eq!(json["leader_http_address"], format!("127.0.0.1:{}", c.servers[leader].http_port));

    // A joined node restarts without --join or --peers: from its record.
    c.signal(3, nix::sys::signal::Signal::SIGTERM);
    c.wait_exit(3, BOUND);
    c.servers[3].join = None;
    c.servers[3].peers = Some(String::new());
    c.spawn(3);
    let since = Instant::now();
    loop {
        let s = c.status(3).await;
        let following = s.as_ref().is_some_and(|s| {
            s["leader"].is_u64()
                && s["membership"]["voters"].as_array().is_some_and(|v| v.len() == 5)
        });
        if following {
            break;
        }
        assert!(since.elapsed() < BOUND, "node 4 did not come back: {s:?}\n{}", c.logs());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Shrink: nodes 2 and 5 (one of the first three, one that joined)
    // removed through a follower's endpoint (the CLI takes the change to
    // the leader); node 2 stopped after its removal, node 5 before it (it
    // is away while it is removed).
    let kept = [0, 2, 3];
    for (id, i) in [(2, 1), (5, 4)] {
        if id == 5 {
            c.signal(i, nix::sys::signal::Signal::SIGTERM);
            c.wait_exit(i, BOUND);
        }
        let m = members_when(&c, &kept, "a leader", |_| true).await;
        let via = kept.into_iter().find(|&j| j != m.leader.unwrap() as usize - 1).unwrap();
        let out = cli(&c, &["member", "remove", &id.to_string(), "-e", &c.endpoint(via)]).await;
        assert_eq!(code(&out), 0, "remove {id} via node {}: {}", via + 1, text(&out));
        assert!(text(&out).contains(&format!("node {id} removed")), "{}", text(&out));
        if id == 2 {
            c.signal(i, nix::sys::signal::Signal::SIGTERM);
            c.wait_exit(i, BOUND);
        }
    }
    let m = members_when(&c, &kept, "three voters again", |m| voters(m) == [1, 3, 4]).await;
    assert!(m.learners.is_empty());
    // Node 2 ran through its own removal: started again on its log, it
    // says at once that it is no member (its log's newest configuration
    // leaves it out); or, if the change reached the others only, they tell
    // it it was removed and it stops (78). Either way it serves no one.
    std::fs::write(&c.servers[1].log, "").unwrap();
    c.spawn(1);
    let since = Instant::now();
    loop {
        let log = c.servers[1].proc.log_text();
        if log.contains("this node is not a member of the cluster's configuration") {
            c.signal(1, nix::sys::signal::Signal::SIGTERM);
            c.wait_exit(1, BOUND);
            break;
        }
        if log.contains("node 2 was removed from the cluster") {
            stopped(&mut c, 1, "node 2, removed while it ran", REMOVED_EXIT).await;
            break;
        }
        assert!(since.elapsed() < BOUND, "node 2 never said it is no member:\n{log}");
        tokio::time::sleep(crate::harness::POLL).await;
    }
    let n = writer.check(&c, &kept, "shrunk to three").await;
    eprintln!("shrunk to three after {:?}: {n} writes", began.elapsed());

    // Node 5, removed while it was away, starts again with --join: it was
    // added once, so it does not add itself again; the members tell it that
    // it was removed, and it stops for good (exit status 78, which the
    // supervisor and the systemd unit do not restart) with an error that
    // says what to do.
    std::fs::write(&c.servers[4].log, "").unwrap();
    join(&mut c, 4, &kept, &[]);
    let log = stopped(&mut c, 4, "node 5, removed while away", REMOVED_EXIT).await;
    assert!(
        log.contains("joined before")
            && log.contains("node 5 was removed from the cluster and its log never received")
            && log.contains("tenure member add 5"),
        "{log}"
    );
    let m = members_when(&c, &kept, "node 5 still removed", |_| true).await;
    assert_eq!((voters(&m), m.learners.len()), (vec![1, 3, 4], 0), "{m:?}");

    // Node 4 dies (SIGKILL) and its disk is wiped. Started again under its
    // id with --join, it is refused: it is not the member it was.
    c.crash(3);
    // Its disk as it was, to start it again once it is removed (below).
    let before_wipe = c.dir.path().join("node-4-before-the-wipe");
    copy_dir(&c.servers[3].data_dir, &before_wipe);
    std::fs::remove_dir_all(&c.servers[3].data_dir).unwrap();
    join(&mut c, 3, &[0, 2], &[]);
    let log = refused(&mut c, 3, "a wiped node").await;
    assert!(log.contains("tenure member replace 4"), "{log}");

    // Replaced by node 6: the first run adds it and gives up waiting (node 6
    // is not running yet); node 6 starts and joins (it is a member
    // already); the second run continues: waits for the promotion, then
    // removes node 4.
    let six = addr(&c, 5);
    let survivors = endpoints(&c, &[0, 2]);
    let out =
        cli(&c, &["member", "replace", "4", "6", &six, "-e", &survivors, "--wait-ms", "800"]).await;
    assert_eq!(code(&out), 4, "{}", text(&out));
    assert!(
        text(&out).contains("adding node 6") && text(&out).contains("run the same command again")
    );
    join(&mut c, 5, &[0, 2], &[]);
    let out = cli(&c, &["member", "replace", "4", "6", &six, "-e", &survivors]).await;
    assert_eq!(code(&out), 0, "{}", text(&out));
    let said = text(&out);
    assert!(!said.contains("adding node 6") && said.contains("removing node 4"), "{said}");
    assert!(said.contains("node 4 is replaced by node 6"), "{said}");
    let last = [0, 2, 5];
    let m = members_when(&c, &last, "node 6 in node 4's place", |m| voters(m) == [1, 3, 6]).await;
    assert!(m.learners.is_empty(), "{m:?}");
    // Run again, it has nothing to do; with a typo in OLD (node 3, a live
    // voter, beside node 6, a voter already) it refuses: removing node 3
    // would leave two voters.
    let out = cli(&c, &["member", "replace", "4", "6", &six, "-e", &survivors]).await;
    assert_eq!(code(&out), 0, "{}", text(&out));
    assert!(text(&out).contains("nothing to do"), "{}", text(&out));
    let out = cli(&c, &["member", "replace", "3", "6", &six, "-e", &survivors]).await;
    assert_eq!(code(&out), 2, "{}", text(&out));
    assert!(text(&out).contains("tenure member remove 3"), "{}", text(&out));
    assert_eq!(voters(&members_when(&c, &last, "unchanged", |_| true).await), [1, 3, 6]);
    // Node 4 back with the disk it had (a backup restored, a disk that
    // was not dead after all): removed while it was away, it is told so
    // by nodes 1 and 3, a majority of the voters its log knows, and stops
    // with an error that says what to do; nothing changes.
    std::fs::remove_dir_all(&c.servers[3].data_dir).unwrap();
    copy_dir(&before_wipe, &c.servers[3].data_dir);
    join(&mut c, 3, &[0, 2], &[]);
    let log = stopped(&mut c, 3, "node 4, removed while away", REMOVED_EXIT).await;
    assert!(
        log.contains("node 4 was removed from the cluster and its log never received")
            && log.contains("tenure member add 4"),
        "{log}"
    );
    assert_eq!(voters(&members_when(&c, &last, "unchanged", |_| true).await), [1, 3, 6]);
    let n = writer.check(&c, &last, "node 4 replaced").await;
    eprintln!("node 4 replaced after {:?}: {n} writes", began.elapsed());

    // A learner removed while it was away: node 4 again, as a new member
    // (an empty data directory) the leader leaves a learner, stopped, then
    // removed; started again with the disk it had, it is told so by the
    // voters and stops as a removed voter does, saying it was a learner.
    let four = addr(&c, 3);
    let add = ["member", "add", "4", &four, "--manual-promote", "-e", &survivors];
    add_learner_4(&mut c, &add, &last).await;
    c.crash(3);
    let out = cli(&c, &["member", "remove", "4", "-e", &survivors]).await;
    assert_eq!(code(&out), 0, "{}", text(&out));
    members_when(&c, &last, "node 4 removed", |m| m.learners.is_empty()).await;
    join(&mut c, 3, &[0, 2], &[]);
    let log = stopped(&mut c, 3, "learner 4, removed while away", REMOVED_EXIT).await;
    assert!(
        log.contains("node 4 was removed from the cluster and its log never received")
            && log.contains("still counts it a learner"),
        "{log}"
    );
    assert_eq!(voters(&members_when(&c, &last, "unchanged", |_| true).await), [1, 3, 6]);
    // The same learner removed while it runs: the leader stops sending it
    // the log at once, so it never hears of the change; the members drop
    // its connections, and when it dials again they tell it.
    add_learner_4(&mut c, &add, &last).await;
    let out = cli(&c, &["member", "remove", "4", "-e", &survivors]).await;
    assert_eq!(code(&out), 0, "{}", text(&out));
    let log = stopped(&mut c, 3, "learner 4, removed while it runs", REMOVED_EXIT).await;
    assert!(log.contains("still counts it a learner"), "{log}");
    assert_eq!(voters(&members_when(&c, &last, "unchanged", |_| true).await), [1, 3, 6]);

    // Every node names the leader and its peer address, a joined one too.
    let leader = m.leader.unwrap();
    for i in last {
        let (status, json, _) = c.request(i, Method::GET, "/v1/leader", None).await.unwrap();
        assert_eq!((status, &json["id"]), (200, &serde_json::json!(leader)), "{json}");
        assert_eq!(json["address"], addr(&c, leader as usize - 1), "{json}");
    }

    // Two `tenure member add` of one node at once: one wins, the other is
    // refused (a change in progress, or a member already); then removed.
    let eight = format!("127.0.0.1:{}", crate::harness::free_ports(1)[0]);
    let (three, six) = (c.endpoint(2), c.endpoint(5));
    let add_via_three = ["member", "add", "8", &eight, "-e", &three];
    let add_via_six = ["member", "add", "8", &eight, "-e", &six];
    let (a, b) = tokio::join!(cli(&c, &add_via_three), cli(&c, &add_via_six));
    let mut codes = [code(&a), code(&b)];
    codes.sort_unstable();
    assert_eq!(codes, [0, 2], "{}\n{}", text(&a), text(&b));
    let loser = if code(&a) == 2 { &a } else { &b };
    let why = text(loser);
    assert!(why.contains("refused (HTTP 409)"), "{why}");
    assert!(why.contains("in progress") || why.contains("node 8 is a member already"), "{why}");
    let out = cli(&c, &["member", "remove", "8", "-e", &survivors]).await;
    assert_eq!(code(&out), 0, "{}", text(&out));

    let acked = writer.stop().await;
    let n = check(&c, &last, &acked, "at the end").await;
    assert!(grown > 0 && n > grown, "the writer wrote all along: {grown}, then {n} writes");
    eprintln!("done after {:?}: {n} writes", began.elapsed());
}

/// `ID=ADDRESS,...`.
fn harness_list(nodes: impl Iterator<Item = (u64, String)>) -> String {
    tenure_launch::address_list(nodes)
}
