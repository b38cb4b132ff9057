//! The replicated log on real nodes: in-process, over real TCP with mutual
//! TLS, logs on disk. Writes and linearizable reads on any node, through a
//! leader's graceful stop, a restart of every node, a node whose data
//! directory was wiped, and no leader at all.

mod common;

use common::{wait_for, Cluster, ELECTION_TIMEOUT, HEARTBEAT};
use std::net::TcpListener;
use std::time::Duration;
use tenure_node::replicated::no_leader_wait;
use tenure_node::{start_replicated, Node, NodeConfig, Replicated, WriteError};
use tenure_replica::{Position, StateMachine};

/// A state machine that keeps every command, in order: what a node applied
/// is visible as a whole, so two nodes can be compared.
#[derive(Default)]
struct Journal {
    commands: Vec<String>,
}

impl StateMachine for Journal {
    fn apply(&mut self, _pos: Position, command: &[u8]) -> Vec<u8> {
        self.commands.push(String::from_utf8_lossy(command).into_owned());
        (self.commands.len() as u64).to_le_bytes().to_vec()
    }

    fn snapshot(&self) -> Vec<u8> {
        self.commands.join("\n").into_bytes()
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), String> {
        let text = std::str::from_utf8(snapshot).map_err(|e| e.to_string())?;
        self.commands =
            if text.is_empty() { Vec::new() } else { text.lines().map(String::from).collect() };
        Ok(())
    }
}

struct LogCluster {
    configs: Vec<NodeConfig>,
    nodes: Vec<Option<(Node, Replicated<Journal>)>>,
    _dir: tempfile::TempDir,
}

impl LogCluster {
    async fn start(n: u64) -> LogCluster {
        common::init_logs();
        let (configs, listeners, dir) = Cluster::configure(n, HEARTBEAT, ELECTION_TIMEOUT);
        let mut nodes = Vec::new();
        for (cfg, l) in configs.iter().zip(listeners) {
            nodes.push(Some(start_replicated(cfg.clone(), Some(l)).await.unwrap()));
        }
        LogCluster { configs, nodes, _dir: dir }
    }

    fn log(&self, i: usize) -> Replicated<Journal> {
        self.nodes[i].as_ref().expect("node running").1.clone()
    }

    fn leader(&self) -> Option<usize> {
        self.nodes.iter().position(|n| n.as_ref().is_some_and(|(n, _)| n.handle().is_leader()))
    }

    async fn stable_leader(&self) -> usize {
        wait_for("a leader", || self.leader()).await
    }

    async fn stop(&mut self, i: usize) {
        if let Some((n, _)) = self.nodes[i].take() {
            n.shutdown().await;
        }
    }

    async fn restart(&mut self, i: usize) {
        let cfg = self.configs[i].clone();
        let l = TcpListener::bind(cfg.listen).unwrap();
        self.nodes[i] = Some(start_replicated(cfg, Some(l)).await.unwrap());
    }

    /// Every running node's applied commands, once they agree on `n` of them
    /// (as many as node `i` applied).
    async fn converged(&self, i: usize) -> Vec<String> {
        let n = self.log(i).read_stale(|j| j.commands.len()).0;
        let logs: Vec<_> = self.nodes.iter().flatten().map(|(_, r)| r.clone()).collect();
        wait_for("every node applied the same commands", || {
            let all: Vec<Vec<String>> =
                logs.iter().map(|r| r.read_stale(|j| j.commands.clone()).0).collect();
            (all.iter().all(|c| c.len() == n) && all.windows(2).all(|w| w[0] == w[1]))
                .then(|| all[0].clone())
        })
        .await
    }
}

fn user_commands(all: &[String]) -> Vec<String> {
    all.iter().filter(|c| !c.is_empty()).cloned().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_on_any_node_commit_once_in_one_order_and_reads_see_them() {
    let c = LogCluster::start(3).await;
    let leader = c.stable_leader().await;
    let follower = (leader + 1) % 3;
    let mut positions = Vec::new();
    for (i, node) in [leader, follower, leader, follower].into_iter().enumerate() {
        let done = c.log(node).propose(format!("w{i}").into_bytes()).await.unwrap();
        let token = c.nodes[leader].as_ref().unwrap().0.handle().status().fencing_token;
        assert_eq!(Some(done.fencing_token()), token, "written under the leader's token");
        // A linearizable read on the third node sees the write at once.
        let third = 3 - leader - follower;
        let (seen, _) = c.log(third).read(|j| j.commands.clone()).await.unwrap();
        assert!(seen.contains(&format!("w{i}")), "node {third} misses w{i}: {seen:?}");
        positions.push(done.position);
    }
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "positions not increasing: {positions:?}");
    let all = c.converged(leader).await;
    assert_eq!(user_commands(&all), ["w0", "w1", "w2", "w3"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writes_are_grouped_and_none_is_lost() {
    let c = LogCluster::start(3).await;
    let leader = c.stable_leader().await;
    let follower = (leader + 1) % 3;
    let writers = (0..200).map(|i| {
        let log = c.log(if i % 2 == 0 { leader } else { follower });
        tokio::spawn(async move { log.propose(format!("c{i}").into_bytes()).await })
    });
    for w in futures_util::future::join_all(writers).await {
        w.unwrap().unwrap();
    }
    let writes = c.log(leader).counters().writes.load(std::sync::atomic::Ordering::Relaxed);
    // Measured: 4 writes in all (the no-op's included). At most 50 means
    // every write carried 4 commands on average: grouping, not luck.
    assert!(writes <= 50, "{writes} log writes for 200 concurrent commands: too little grouping");
    let all = user_commands(&c.converged(leader).await);
    assert_eq!(all.len(), 200);
    let mut sorted = all.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), 200, "a command applied twice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_survives_the_leaders_stop_and_a_restart_of_every_node() {
    let mut c = LogCluster::start(3).await;
    let leader = c.stable_leader().await;
    c.log(leader).propose(b"before".to_vec()).await.unwrap();
    c.stop(leader).await;
    // A write sent to a follower while the cluster elects waits for the new
    // leader rather than failing; one forwarded to the old leader just as it
    // stopped may end unknown (never failed), and is retried as a new write.
    let other = (leader + 1) % 3;
    let mut acked = vec!["before".to_string()];
    for attempt in 0..5 {
        let cmd = format!("during{attempt}");
        match c.log(other).propose(cmd.clone().into_bytes()).await {
            Ok(_) => {
                acked.push(cmd);
                break;
            }
            Err(WriteError::Unknown(_)) => continue,
            Err(e) => panic!("a write during the election failed: {e}"),
        }
    }
    assert_eq!(acked.len(), 2, "no write went through after the leader stopped");
    for i in 0..3 {
        c.stop(i).await;
    }
    for i in 0..3 {
        c.restart(i).await;
    }
    c.stable_leader().await;
    let (seen, _) = c.log(leader).read(|j| user_commands(&j.commands)).await.unwrap();
    for a in &acked {
        assert!(seen.contains(a), "acknowledged write {a} lost: {seen:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_with_a_wiped_data_directory_catches_up() {
    let mut c = LogCluster::start(3).await;
    let leader = c.stable_leader().await;
    for i in 0..20 {
        c.log(leader).propose(format!("x{i}").into_bytes()).await.unwrap();
    }
    let wiped = (leader + 1) % 3;
    c.stop(wiped).await;
    std::fs::remove_dir_all(&c.configs[wiped].data_dir).unwrap();
    c.restart(wiped).await;
    let all = user_commands(&c.converged(leader).await);
    assert_eq!(all.len(), 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_leader_a_write_waits_its_bound_then_says_nothing_was_written() {
    let mut c = LogCluster::start(3).await;
    let leader = c.stable_leader().await;
    let alone = (leader + 1) % 3;
    for i in (0..3).filter(|&i| i != alone) {
        c.stop(i).await;
    }
    // Settled: it knows no leader. (A write sent while it still followed the
    // stopped leader is forwarded there and ends unknown, at once.)
    let handle = c.nodes[alone].as_ref().unwrap().0.handle();
    wait_for("the node alone to know no leader", || handle.status().leader.is_none().then_some(()))
        .await;
    // The log task follows the elector's view a moment later: a write it
    // still forwarded to the stopped leader ends unknown at once (correctly:
    // that leader may have written it). Such an attempt is not the bound.
    let bound = no_leader_wait(ELECTION_TIMEOUT);
    let (err, waited) = loop {
        let started = std::time::Instant::now();
        let err = c.log(alone).propose(b"lost".to_vec()).await.unwrap_err();
        let waited = started.elapsed();
        match err {
            WriteError::Unknown(_) if waited < bound => continue,
            err => break (err, waited),
        }
    };
    assert!(matches!(err, WriteError::NoLeader { .. }), "{err:?}");
    assert!(waited >= bound, "gave up after {waited:?}, bound {bound:?}");
    assert!(waited < bound + Duration::from_secs(2), "waited {waited:?}, bound {bound:?}");
}

/// A peer with a valid certificate (node 3's, its node stopped) sends a
/// follower answers it was never asked for, with every id a forwarded
/// request may have: committed at a made-up position, or a read index no
/// node will reach. The follower takes an answer only from the node it
/// forwarded to, so its writes still end at their true positions, its
/// reads are served at once, and the leader stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_to_forwarded_requests_from_another_peer_are_ignored() {
    use common::{dial_tls, handshake, hello, identity};
    use futures_util::SinkExt;
    use tenure_node::wire::{self, Forward, Frame};

    let mut c = LogCluster::start(3).await;
    let leader = c.stable_leader().await;
    let follower = (leader + 1) % 3;
    let forger = 3 - leader - follower;
    let term = c.nodes[leader].as_ref().unwrap().0.handle().status().term;
    c.stop(forger).await;

    let target = &c.configs[follower];
    let mut conn = dial_tls(&identity(&c.configs[forger]), target).await.unwrap();
    let ack = handshake(&mut conn, hello(c.configs[forger].id, target)).await.unwrap();
    assert!(matches!(ack, Frame::HelloAck { .. }), "{ack:?}");
    let forged = tokio::spawn(async move {
        let at = Position { token: tenure_core::FencingToken(u64::MAX), index: 1 << 40 };
        loop {
            for id in 0..64 {
                let lie = Forward::Proposed { id, result: Ok((at, b"forged".to_vec())) };
                let stall = Forward::ReadIndexReply { id, result: Ok(u64::MAX) };
                for f in [lie, stall] {
                    if conn.send(wire::encode(&Frame::Forward(f))).await.is_err() {
                        return;
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    });

    for i in 0..20 {
        let done = c.log(follower).propose(format!("f{i}").into_bytes()).await.unwrap();
        assert_ne!(done.position.index, 1 << 40, "a forged answer was taken");
        let log = c.log(follower);
        let read = tokio::time::timeout(Duration::from_secs(2), log.read(|j| j.commands.clone()));
        let (seen, _) = read.await.expect("a read waited for a forged index").unwrap();
        assert!(seen.contains(&format!("f{i}")), "the read misses f{i}");
    }
    forged.abort();
    let all = user_commands(&c.converged(leader).await);
    assert_eq!(all, (0..20).map(|i| format!("f{i}")).collect::<Vec<_>>());
    assert_eq!(c.stable_leader().await, leader);
    assert_eq!(c.nodes[leader].as_ref().unwrap().0.handle().status().term, term);
}
