//! The data directory: term and vote survive restarts, damaged or foreign
//! state is refused untouched, one process per directory, and a node that
//! cannot persist neither votes nor leads.

mod common;

use common::{bind, dial_tls, handshake, hello, identity, wait_for, Cluster, TlsConn};
use common::{ELECTION_TIMEOUT, HEARTBEAT};
use futures_util::{SinkExt, StreamExt};
use std::time::Duration;
use tenure_core::{Message, Term};
use tenure_node::storage::recovery::at_least;
use tenure_node::tls::TlsIdentity;
use tenure_node::wire::{self, Frame, WIRE_VERSION};
use tenure_node::{start_with_listener, NodeConfig, NodeId, ResetOutcome, StartError};
use tokio::net::TcpListener;
use tokio_util::codec::{Framed, LengthDelimitedCodec};

/// A hand-driven peer with its own certificate: it dials the node to send
/// messages, and accepts the node's connection to read its answers.
struct FakePeer {
    id: NodeId,
    tls: TlsIdentity,
    listener: TcpListener,
}

impl FakePeer {
    async fn dial(&self, node: &NodeConfig) -> TlsConn {
        let mut c = dial_tls(&self.tls, node).await.unwrap();
        let ack = handshake(&mut c, hello(self.id, node)).await.unwrap();
        assert!(matches!(ack, Frame::HelloAck { node: n, .. } if n == node.id), "{ack:?}");
        c
    }

    /// Accepts the node's connections (answering their hellos) until one
    /// carries a vote response at or past `term`, and returns it. Connections
    /// the node made before it restarted are still queued on the listener;
    /// they end early.
    async fn vote_response(&self, node: &NodeConfig, term: Term) -> (Term, bool) {
        loop {
            let (s, _) = self.listener.accept().await.unwrap();
            let Ok(s) = self.tls.peer_acceptor().accept(s).await else { continue };
            if let Some(answer) = self.serve(node, Framed::new(s, wire::codec()), term).await {
                return answer;
            }
        }
    }

    async fn serve<S>(
        &self,
        node: &NodeConfig,
        mut c: Framed<S, LengthDelimitedCodec>,
        at: Term,
    ) -> Option<(Term, bool)>
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    {
        let hello = wire::decode(&c.next().await?.ok()?).unwrap();
        assert!(
            matches!(hello, Frame::Hello { from, to, .. } if from == node.id && to == self.id),
            "{hello:?}"
        );
        let ack = Frame::HelloAck {
            version: WIRE_VERSION,
            cluster_id: node.cluster_id.clone(),
            node: self.id,
            protocol: node.protocol,
            incarnation: 1,
            voters: {
                let mut v: Vec<NodeId> = node.peers.iter().map(|&(id, _)| id).collect();
                v.sort_unstable();
                v
            },
            api_address: None,
            etcd_address: None,
            directory: tenure_core::DirectoryId(0xd0),
            config: tenure_core::ConfigId::BOOTSTRAP,
            timings: wire::Timings::of(&node.core_config()),
        };
        c.send(wire::encode(&ack)).await.ok()?;
        loop {
            match wire::decode(&c.next().await?.ok()?).unwrap() {
                Frame::Message(Message::VoteResponse { term, granted }) if term >= at => {
                    return Some((term, granted))
                }
                Frame::Ping { nonce } => c.send(wire::encode(&Frame::Pong { nonce })).await.ok()?,
                _ => {}
            }
        }
    }
}

/// The election timeout of the vote tests, and so the startup lease.
const STARTUP_LEASE: Duration = Duration::from_secs(1);

/// What happens to the data directory while the node is down.
#[derive(Clone, Copy, Debug)]
enum Damage {
    /// Nothing: a plain restart.
    None,
    /// The state file is deleted.
    DeleteState,
    /// The state file is replaced by a copy taken before the vote (a backup).
    RestoreBackup,
}

/// One real node (1) and two hand-driven peers (2, 3). The node grants
/// peer 2's vote in term 7 and stops; `damage` is done to its directory; it
/// starts again (with a reset where the damage makes the start refuse) and
/// peer 3 asks for its vote in term 7: it must be refused.
async fn no_second_vote_in_a_term_after(damage: Damage) {
    common::init_logs();
    // The node cannot campaign on its own: the peers never answer its pre-votes.
    let (mut configs, mut listeners, _dir) =
        Cluster::configure(3, Duration::from_millis(100), STARTUP_LEASE);
    let fake3 = FakePeer {
        id: NodeId(3),
        tls: identity(&configs[2]),
        listener: TcpListener::from_std(nonblocking(listeners.pop().unwrap())).unwrap(),
    };
    let fake2 = FakePeer {
        id: NodeId(2),
        tls: identity(&configs[1]),
        listener: TcpListener::from_std(nonblocking(listeners.pop().unwrap())).unwrap(),
    };
    let cfg = configs.remove(0);
    let node = start_with_listener(cfg.clone(), listeners.pop().unwrap()).await.unwrap();
    let state_path = cfg.data_dir.join("state");
    let backup = std::fs::read(&state_path).unwrap();

    // A started node refuses every candidate for an election timeout (its
    // startup lease: it may have promised one before it stopped).
    tokio::time::sleep(STARTUP_LEASE + STARTUP_LEASE / 4).await;
    // Two votes, so that the backup is more than the one write a crash can
    // interrupt behind (see `storage::recovery`).
    let mut to_node = fake2.dial(&cfg).await;
    for term in [6, 7] {
        let vote = Message::Vote {
            term: Term(term),
            transfer: false,
            freshness: tenure_core::Freshness::BOOTSTRAP,
        };
        to_node.send(wire::encode(&Frame::Message(vote))).await.unwrap();
    }
    let answer = tokio::time::timeout(Duration::from_secs(5), fake2.vote_response(&cfg, Term(7)))
        .await
        .unwrap();
    assert_eq!(answer, (Term(7), true), "a fresh node grants the first vote of a term");
    let s = node.handle().status();
    assert_eq!((s.term, s.voted_for), (Term(7), Some(NodeId(2))));
    node.shutdown().await;
    drop(to_node);

    let restart = || async {
        start_with_listener(cfg.clone(), std::net::TcpListener::bind(cfg.listen).unwrap()).await
    };
    match damage {
        Damage::None => {}
        Damage::DeleteState => {
            std::fs::remove_file(&state_path).unwrap();
            let err = restart().await.err().expect("a missing state file must stop the node");
            assert!(matches!(err, StartError::StateMissing { .. }), "{err:?}");
            let msg = err.to_string();
            assert!(msg.contains(&state_path.display().to_string()), "{msg}");
            assert!(msg.contains("--reset-state") && !msg.contains("backup"), "{msg}");
            assert!(!state_path.exists(), "the refused start created a state file");
        }
        Damage::RestoreBackup => {
            std::fs::write(&state_path, &backup).unwrap();
            let err = restart().await.err().expect("an older state file must stop the node");
            assert!(
                matches!(err, StartError::StateRolledBack { found, recorded, .. }
                    if found.term == Term(0) && recorded.term == Term(7)),
                "{err:?}"
            );
            assert!(err.to_string().contains("--reset-state"), "{err}");
            assert_eq!(std::fs::read(&state_path).unwrap(), backup, "the refused start wrote");
        }
    }
    if !matches!(damage, Damage::None) {
        let outcome = tenure_node::reset_state(&cfg, None).unwrap();
        assert!(
            matches!(outcome, ResetOutcome::Reset { state, .. }
                if (state.term, state.voted_for) == (Term(7), Some(NodeId(2)))),
            "{outcome:?}"
        );
    }

    // Restarted, the node remembers its vote...
    let node = restart().await.unwrap();
    let s = node.handle().status();
    assert_eq!((s.term, s.voted_for), (Term(7), Some(NodeId(2))));
    // ...so, once its startup lease no longer refuses everyone, another
    // candidate of the same term is refused for that vote.
    tokio::time::sleep(STARTUP_LEASE + STARTUP_LEASE / 4).await;
    let mut to_node = fake3.dial(&cfg).await;
    to_node
        .send(wire::encode(&Frame::Message(Message::Vote {
            term: Term(7),
            transfer: false,
            freshness: tenure_core::Freshness::BOOTSTRAP,
        })))
        .await
        .unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(5), fake3.vote_response(&cfg, Term(7)))
        .await
        .unwrap();
    assert_eq!(answer, (Term(7), false), "a restarted node voted twice in one term ({damage:?})");
    assert_eq!(node.handle().status().voted_for, Some(NodeId(2)));
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_keeps_term_and_vote_so_no_second_vote_in_a_term() {
    no_second_vote_in_a_term_after(Damage::None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_state_file_is_refused_and_a_reset_keeps_the_vote() {
    no_second_vote_in_a_term_after(Damage::DeleteState).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restored_backup_is_refused_and_a_reset_keeps_the_vote() {
    no_second_vote_in_a_term_after(Damage::RestoreBackup).await;
}

fn nonblocking(l: std::net::TcpListener) -> std::net::TcpListener {
    l.set_nonblocking(true).unwrap();
    l
}

/// One node's configuration in a fresh directory (a one-node cluster).
fn solo() -> (NodeConfig, tempfile::TempDir) {
    let (mut configs, _l, dir) = Cluster::configure(1, HEARTBEAT, ELECTION_TIMEOUT);
    (configs.remove(0), dir)
}

async fn start_solo(cfg: &NodeConfig) -> Result<tenure_node::Node, StartError> {
    start_with_listener(cfg.clone(), bind()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupted_state_file_is_refused_and_left_untouched() {
    common::init_logs();
    let (cfg, _dir) = solo();
    let node = start_solo(&cfg).await.unwrap();
    let h = node.handle();
    wait_for("the solo node to lead", || h.is_leader().then_some(())).await;
    let before = h.status();
    node.shutdown().await;

    let path = cfg.data_dir.join("state");
    let mut bytes = std::fs::read(&path).unwrap();
    // The term sits in both copies; damage both.
    let slot = tenure_node::storage::SLOT_LEN;
    bytes[30] ^= 0x01;
    bytes[slot + 30] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();
    let err = start_solo(&cfg).await.err().expect("a corrupted state file must stop the node");
    match &err {
        StartError::CorruptState { path: p, detail, .. } => {
            assert_eq!(p, &path);
            assert!(detail.contains("both copies") && detail.contains("checksum"), "{detail}");
        }
        other => panic!("expected CorruptState, got {other:?}"),
    }
    // The way out is the reset from the lock file's record, not a backup (an
    // older state file would be refused, and rightly).
    let msg = err.to_string();
    assert!(msg.contains(&path.display().to_string()) && msg.contains("--reset-state"), "{msg}");
    assert!(!msg.contains("backup") && !msg.contains("mv "), "{msg}");
    assert_eq!(std::fs::read(&path).unwrap(), bytes, "the corrupted file was modified");

    // Plain garbage too.
    std::fs::write(&path, b"hello").unwrap();
    assert!(matches!(start_solo(&cfg).await, Err(StartError::CorruptState { .. })));
    assert_eq!(std::fs::read(&path).unwrap(), b"hello");

    // The reset writes the state the node last acted on, and it starts.
    let outcome = tenure_node::reset_state(&cfg, None).unwrap();
    assert!(
        matches!(outcome, ResetOutcome::Reset { state, .. } if state.term == before.term),
        "{outcome:?}"
    );
    let node = start_solo(&cfg).await.unwrap();
    assert!(node.handle().status().term >= before.term);
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_in_place_of_the_state_file_is_refused_without_hanging() {
    common::init_logs();
    let (cfg, _dir) = solo();
    std::fs::create_dir_all(&cfg.data_dir).unwrap();
    let path = cfg.data_dir.join("state");
    let status = std::process::Command::new("mkfifo").arg(&path).status().unwrap();
    assert!(status.success());
    let result = tokio::time::timeout(Duration::from_secs(5), start_solo(&cfg))
        .await
        .expect("the start hung on the FIFO");
    match result {
        Err(StartError::NotAFile { path: p, kind }) => {
            assert_eq!(p, path);
            assert!(kind.contains("FIFO"), "{kind}");
        }
        other => panic!("expected NotAFile, got {:?}", other.err()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_state_file_is_refused_and_left_untouched() {
    common::init_logs();
    let (cfg, _dir) = solo();
    start_solo(&cfg).await.unwrap().shutdown().await;
    let path = cfg.data_dir.join("state");
    let before = std::fs::read(&path).unwrap();
    let mut other = cfg.clone();
    other.cluster_id = "another-cluster".into();
    // (Its certificate names cluster "test"; the state file is what is tested.)
    other.security = tenure_node::Security::InsecureNoTls;
    match start_solo(&other).await {
        Err(e @ StartError::ForeignState { .. }) => {
            let StartError::ForeignState { path: p, found_cluster, .. } = &e else {
                unreachable!()
            };
            assert_eq!(p, &path);
            assert_eq!(found_cluster, "test");
            // Its own directory under another cluster id: the fix is the
            // cluster id, not another directory.
            let text = e.to_string();
            assert!(text.contains("start it with --cluster-id test"), "{text}");
        }
        other => panic!("expected ForeignState, got {:?}", other.err()),
    }
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn second_instance_on_the_same_directory_is_locked_out() {
    common::init_logs();
    let (cfg, _dir) = solo();
    let first = start_solo(&cfg).await.unwrap();
    match start_solo(&cfg).await {
        Err(StartError::DataDirLocked { path }) => assert_eq!(path, cfg.data_dir.join("lock")),
        other => panic!("expected DataDirLocked, got {:?}", other.err()),
    }
    // The first node was not disturbed, and the lock goes with it.
    let h = first.handle();
    wait_for("the first node to lead", || h.is_leader().then_some(())).await;
    first.shutdown().await;
    start_solo(&cfg).await.unwrap().shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_data_directory_is_created() {
    common::init_logs();
    let (mut cfg, _dir) = solo();
    cfg.data_dir = cfg.data_dir.join("deeper/still");
    let node = start_solo(&cfg).await.unwrap();
    assert!(cfg.data_dir.join("state").is_file());
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_cannot_persist_neither_votes_nor_leads_until_it_can() {
    let mut c = Cluster::start(3).await;
    let leader = c.stable_leader().await;
    let li = c.index_of(leader);
    let fi = (0..3).find(|&i| i != li).unwrap();
    let follower = c.handle(fi);
    let mut events = follower.events();
    // Take the follower's directory away: its next state write fails.
    std::fs::remove_dir_all(c.data_dir(fi)).unwrap();
    tokio::time::sleep(HEARTBEAT * 3).await;
    c.handle(li).transfer_leadership(follower.id()).await.unwrap();
    wait_for("the follower to report its storage failure", || {
        follower.status().storage_failed.then_some(())
    })
    .await;
    // While it cannot persist it must not lead; the others elect a leader.
    let others: Vec<_> = c.running().into_iter().filter(|h| h.id() != follower.id()).collect();
    wait_for("another leader", || others.iter().any(|h| h.is_leader()).then_some(())).await;
    assert!(!follower.is_leader());
    // Give the directory back: the retry succeeds and the node recovers.
    std::fs::create_dir_all(c.data_dir(fi)).unwrap();
    wait_for("the follower to recover", || (!follower.status().storage_failed).then_some(())).await;
    assert!(c.data_dir(fi).join("state").is_file());
    // The lock file came back too, with the record of the state (read first:
    // the state file is written before it, so it is at least as new).
    let lock = std::fs::read(c.data_dir(fi).join("lock")).unwrap();
    let record = tenure_node::storage::parse_lock_file(&lock).unwrap().unwrap();
    let state = std::fs::read(c.data_dir(fi).join("state")).unwrap();
    let state = tenure_node::storage::parse_state_file(&state).unwrap().record;
    assert_eq!((&record.cluster_id, record.node_id), (&state.cluster_id, state.node_id));
    assert!(at_least(state.hard_state(), record.hard_state()), "{state:?} behind {record:?}");
    // At no point did it take office.
    while let Ok(e) = events.try_recv() {
        assert!(!matches!(e, tenure_node::LeadershipEvent::BecameLeader { .. }), "{e:?}");
    }
    let new_leader = c.stable_leader().await;
    assert_ne!(
        new_leader,
        follower.id(),
        "leadership should not have moved to the failed node while failed"
    );
    c.stop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_node_without_shutdown_stops_it_and_frees_the_directory() {
    common::init_logs();
    let (cfg, _dir) = solo();
    let node = start_solo(&cfg).await.unwrap();
    let addr = node.peer_addr();
    drop(node);
    // The tasks are aborted: the listener closes and the lock is released.
    let restarted = wait_for("the lock to be released", || {
        futures_util::FutureExt::now_or_never(start_solo(&cfg)).and_then(|r| r.ok())
    })
    .await;
    wait_for("the old listener to close", || {
        std::net::TcpStream::connect(addr).is_err().then_some(())
    })
    .await;
    restarted.shutdown().await;
}
