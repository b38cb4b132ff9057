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

/// A follower that relays the leader's answer to a write has applied the
/// write by then: the caller's next read of that node, stale or not, sees
/// it (etcd answers a member's caller once that member applied). The
/// leader answers once a majority holds the entry, perhaps before its own
/// write ends; its commit notice goes out ahead of the answer on the same
/// connection rather than wait for that write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_answered_through_a_follower_is_applied_there_already() {
    let c = LogCluster::start(3).await;
    let leader = c.stable_leader().await;
    let follower = (leader + 1) % 3;
    // Writers on the leader keep its disk busy, so that commits come from
    // the followers' copies while the leader still writes its own.
    let busy = (0..4).map(|w| {
        let log = c.log(leader);
        tokio::spawn(async move {
            for i in 0..100 {
                log.propose(format!("busy{w}-{i}").into_bytes()).await.unwrap();
            }
        })
    });
    let busy: Vec<_> = busy.collect();
    let relayed = (0..4).map(|w| {
        let log = c.log(follower);
        tokio::spawn(async move {
            for i in 0..25 {
                let command = format!("ryw{w}-{i}");
                log.propose(command.clone().into_bytes()).await.unwrap();
                let (seen, _) = log.read_stale(|j| j.commands.contains(&command));
                assert!(seen, "the follower answered {command} before it applied it");
            }
        })
    });
    for task in relayed.collect::<Vec<_>>().into_iter().chain(busy) {
        task.await.unwrap();
    }
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

/// Commands proposed together are answered each, in their order, at
/// consecutive positions; on the leader they are written in one log write
/// (a leave's handovers commit with the leave, not a write later).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_proposed_together_are_written_together_in_order() {
    let c = LogCluster::start(3).await;
    let leader = c.stable_leader().await;
    let follower = (leader + 1) % 3;
    let writes = || c.log(leader).counters().writes.load(std::sync::atomic::Ordering::Relaxed);
    let before = writes();
    const CALLS: usize = 20;
    for (round, node) in [leader, follower].into_iter().enumerate() {
        for call in 0..CALLS {
            let commands: Vec<Vec<u8>> =
                (0..3).map(|k| format!("t{round}-{call}-{k}").into_bytes()).collect();
            let answers = c.log(node).propose_together(commands).await;
            let positions: Vec<_> =
                answers.into_iter().map(|a| a.expect("committed").position).collect();
            assert_eq!(positions.len(), 3);
            for w in positions.windows(2) {
                assert_eq!(w[0].token, w[1].token);
                assert_eq!(w[0].index + 1, w[1].index, "consecutive: {positions:?}");
            }
        }
        if node == leader {
            // One write per call, and a couple for the leadership's own
            // entries (its first may still be under way at `before`); one
            // write per command would be 60.
            let written = writes() - before;
            assert!(written as usize <= CALLS + 2, "{written} log writes for {CALLS} calls of 3");
        }
    }
    let all = user_commands(&c.converged(leader).await);
    let expected: Vec<String> = (0..2)
        .flat_map(|r| (0..CALLS).flat_map(move |c| (0..3).map(move |k| format!("t{r}-{c}-{k}"))))
        .collect();
    assert_eq!(all, expected);
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

// ---- Leader-only operations: propose_as, confirm_leader, ready_leader, asks ----

impl LogCluster {
    /// The node that is the ready leader, and its token, once one is.
    async fn ready_leader(&self) -> (usize, tenure_core::FencingToken) {
        wait_for("a ready leader", || {
            self.nodes.iter().enumerate().find_map(|(i, n)| {
                let t = *n.as_ref()?.1.ready_leader().borrow();
                t.map(|t| (i, t))
            })
        })
        .await
    }

    /// On every running node, a service that answers each ask with
    /// `node:token:question`.
    fn serve_asks(&self) {
        for (i, n) in self.nodes.iter().enumerate() {
            let Some((_, log)) = n else { continue };
            let mut asks = log.take_asks().expect("asks taken once");
            assert!(log.take_asks().is_none(), "asks given out twice");
            tokio::spawn(async move {
                while let Some(ask) = asks.recv().await {
                    let q = String::from_utf8_lossy(ask.request()).into_owned();
                    let answer = format!("{i}:{}:{q}", ask.token().0);
                    ask.answer(answer.into_bytes());
                }
            });
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn propose_as_writes_only_as_the_ready_leader_of_that_token() {
    use tenure_core::FencingToken;
    let mut c = LogCluster::start(3).await;
    let (leader, token) = c.ready_leader().await;
    let follower = (leader + 1) % 3;
    assert_eq!(*c.log(follower).ready_leader().borrow(), None, "a follower says it leads");

    let done = c.log(leader).propose_as(token, b"bound".to_vec()).await.unwrap();
    assert_eq!(done.fencing_token(), token);
    // A follower neither forwards it nor waits: refused at once.
    let started = std::time::Instant::now();
    let err = c.log(follower).propose_as(token, b"on-follower".to_vec()).await.unwrap_err();
    assert_eq!(err, WriteError::NotLeader);
    assert!(started.elapsed() < Duration::from_millis(500), "{:?}", started.elapsed());
    let other = FencingToken(token.0 + 1);
    let err = c.log(leader).propose_as(other, b"other-token".to_vec()).await.unwrap_err();
    assert_eq!(err, WriteError::NotLeader);

    // Under a later leader, the first leadership's token is stale.
    c.stop(leader).await;
    let (next, newer) = c.ready_leader().await;
    assert!(newer > token, "{newer:?} after {token:?}");
    let err = c.log(next).propose_as(token, b"stale".to_vec()).await.unwrap_err();
    assert_eq!(err, WriteError::NotLeader);
    c.log(next).propose_as(newer, b"fresh".to_vec()).await.unwrap();
    let all = user_commands(&c.converged(next).await);
    assert_eq!(all, ["bound", "fresh"], "a refused command was written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confirm_leader_answers_only_the_ready_leader_of_that_token() {
    use tenure_core::FencingToken;
    use tenure_node::ReadFailure;
    let mut c = LogCluster::start(3).await;
    let (leader, token) = c.ready_leader().await;
    let follower = (leader + 1) % 3;
    c.log(leader).propose(b"w".to_vec()).await.unwrap();
    let index = c.log(leader).confirm_leader(token).await.unwrap();
    assert!(index >= 2, "the no-op and the write are applied: {index}");
    assert_eq!(c.log(follower).confirm_leader(token).await, Err(ReadFailure::NotLeader));
    let other = FencingToken(token.0 + 1);
    assert_eq!(c.log(leader).confirm_leader(other).await, Err(ReadFailure::NotLeader));

    // Without its election lease the leader confirms after a round: with
    // one follower left it still has a majority.
    c.stop(follower).await;
    for _ in 0..20 {
        c.log(leader).confirm_leader(token).await.unwrap();
        tokio::time::sleep(HEARTBEAT).await;
    }
    // Without a majority it cannot confirm: nothing else may be answered.
    let third = 3 - leader - follower;
    c.stop(third).await;
    let log = c.log(leader);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let r = tokio::time::timeout(Duration::from_secs(2), log.confirm_leader(token)).await;
        match r {
            Ok(Ok(_)) if std::time::Instant::now() < deadline => {
                tokio::time::sleep(HEARTBEAT).await
            }
            Ok(Ok(i)) => panic!("a leader without a majority still confirms (index {i})"),
            Ok(Err(_)) | Err(_) => break,
        }
    }
    let again = tokio::time::timeout(Duration::from_secs(2), log.confirm_leader(token)).await;
    assert!(!matches!(again, Ok(Ok(_))), "confirmed again without a majority: {again:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ask_from_a_follower_reaches_the_leaders_service_and_comes_back() {
    use tenure_node::replicated::{AskError, MAX_ASK_LEN};
    let c = LogCluster::start(3).await;
    let (leader, token) = c.ready_leader().await;
    // Before any node serves asks, the leader refuses them.
    let follower = (leader + 1) % 3;
    assert_eq!(c.log(follower).ask_leader(b"q".to_vec()).await, Err(AskError::NoService));
    c.serve_asks();
    for node in [follower, leader, 3 - leader - follower] {
        let q = format!("from {node}");
        let answer = c.log(node).ask_leader(q.clone().into_bytes()).await.unwrap();
        assert_eq!(String::from_utf8(answer).unwrap(), format!("{leader}:{}:{q}", token.0));
    }
    let big = vec![0; MAX_ASK_LEN + 1];
    let err = c.log(follower).ask_leader(big).await.unwrap_err();
    assert_eq!(err, AskError::TooLarge { size: MAX_ASK_LEN + 1, max: MAX_ASK_LEN });
    let asks = (0..200).map(|i| {
        let log = c.log(i % 3);
        tokio::spawn(async move { log.ask_leader(format!("{i}").into_bytes()).await })
    });
    for (i, a) in futures_util::future::join_all(asks).await.into_iter().enumerate() {
        let answer = String::from_utf8(a.unwrap().unwrap()).unwrap();
        assert_eq!(answer, format!("{leader}:{}:{i}", token.0));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ask_while_the_leader_is_down_fails_no_leader_within_its_bound() {
    use tenure_node::replicated::AskError;
    let mut c = LogCluster::start(3).await;
    c.serve_asks();
    let (leader, _) = c.ready_leader().await;
    let alone = (leader + 1) % 3;
    for i in (0..3).filter(|&i| i != alone) {
        c.stop(i).await;
    }
    let handle = c.nodes[alone].as_ref().unwrap().0.handle();
    wait_for("the node alone to know no leader", || handle.status().leader.is_none().then_some(()))
        .await;
    let bound = no_leader_wait(ELECTION_TIMEOUT);
    let started = std::time::Instant::now();
    let err = c.log(alone).ask_leader(b"anyone?".to_vec()).await.unwrap_err();
    let waited = started.elapsed();
    // An ask forwarded to the stopped leader just before is asked again,
    // not failed: the one outcome is "no leader" after the wait.
    assert!(matches!(err, AskError::NoLeader { .. }), "{err:?}");
    assert!(waited >= bound, "gave up after {waited:?}, bound {bound:?}");
    assert!(waited < bound + Duration::from_secs(2), "waited {waited:?}, bound {bound:?}");
}

/// A peer with a valid certificate (node 3's, its node stopped) floods the
/// leader with asks: oversized ones, and more than its queues hold. The
/// leader refuses them without stalling: asks from a real follower are
/// still answered, and the leader stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_and_oversized_asks_from_a_peer_are_refused_without_harm() {
    use common::{dial_tls, handshake, hello, identity};
    use futures_util::SinkExt;
    use tenure_node::replicated::MAX_ASK_LEN;
    use tenure_node::wire::{self, Forward, Frame};

    let mut c = LogCluster::start(3).await;
    let (leader, token) = c.ready_leader().await;
    let follower = (leader + 1) % 3;
    let forger = 3 - leader - follower;
    let term = c.nodes[leader].as_ref().unwrap().0.handle().status().term;
    c.stop(forger).await;
    c.serve_asks();

    let target = &c.configs[leader];
    let mut conn = dial_tls(&identity(&c.configs[forger]), target).await.unwrap();
    let ack = handshake(&mut conn, hello(c.configs[forger].id, target)).await.unwrap();
    assert!(matches!(ack, Frame::HelloAck { .. }), "{ack:?}");
    let forged = tokio::spawn(async move {
        let huge = vec![7u8; 4 * MAX_ASK_LEN];
        for id in 0u64.. {
            let request = if id % 2 == 0 { huge.clone() } else { b"flood".to_vec() };
            let f = Forward::Ask { id, request };
            if conn.send(wire::encode(&Frame::Forward(f))).await.is_err() {
                return;
            }
            if id % 64 == 0 {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
    });
    for i in 0..20 {
        let q = format!("real{i}");
        let log = c.log(follower);
        let ask = log.ask_leader(q.clone().into_bytes());
        let answer = tokio::time::timeout(Duration::from_secs(5), ask).await.expect("stalled");
        let answer = String::from_utf8(answer.unwrap()).unwrap();
        assert_eq!(answer, format!("{leader}:{}:{q}", token.0));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    forged.abort();
    assert_eq!(c.ready_leader().await, (leader, token));
    assert_eq!(c.nodes[leader].as_ref().unwrap().0.handle().status().term, term);
}
