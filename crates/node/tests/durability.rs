//! The data directory: term and vote survive restarts, damaged or foreign
//! state is refused untouched, one process per directory, and a node that
//! cannot persist neither votes nor leads.

mod common;

use common::{bind, dial_tls, handshake, hello, identity, wait_for, Cluster, TlsConn};
use common::{ELECTION_TIMEOUT, HEARTBEAT};
use futures_util::{SinkExt, StreamExt};
use std::time::Duration;
use tenure_core::{Message, Term};
use tenure_node::tls::TlsIdentity;
use tenure_node::wire::{self, Frame, WIRE_VERSION};
use tenure_node::{start_with_listener, NodeConfig, NodeId, StartError};
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
    /// carries a vote response, and returns it. Connections the node made
    /// before it restarted are still queued on the listener; they end early.
    async fn vote_response(&self, node: &NodeConfig) -> (Term, bool) {
        loop {
            let (s, _) = self.listener.accept().await.unwrap();
            let Ok(s) = self.tls.peer_acceptor().accept(s).await else { continue };
            if let Some(answer) = self.serve(node, Framed::new(s, wire::codec())).await {
                return answer;
            }
        }
    }

    async fn serve<S>(
        &self,
        node: &NodeConfig,
        mut c: Framed<S, LengthDelimitedCodec>,
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
        };
        c.send(wire::encode(&ack)).await.ok()?;
        loop {
            match wire::decode(&c.next().await?.ok()?).unwrap() {
                Frame::Message(Message::VoteResponse { term, granted }) => {
                    return Some((term, granted))
                }
                Frame::Ping { nonce } => c.send(wire::encode(&Frame::Pong { nonce })).await.ok()?,
                _ => {}
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_keeps_term_and_vote_so_no_second_vote_in_a_term() {
    common::init_logs();
    // One real node (1) and two hand-driven peers (2, 3) that answer no
    // pre-vote: the real node polls on its own but never raises its term.
    let timeout = Duration::from_millis(500);
    let (mut configs, mut listeners, _dir) =
        Cluster::configure(3, Duration::from_millis(100), timeout);
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

    // A freshly started node refuses every candidate for an election timeout
    // (the lease it may have granted before a crash): ask after it.
    tokio::time::sleep(timeout + Duration::from_millis(200)).await;
    let mut to_node = fake2.dial(&cfg).await;
    to_node
        .send(wire::encode(&Frame::Message(Message::Vote { term: Term(7), transfer: false })))
        .await
        .unwrap();
    let answer =
        tokio::time::timeout(Duration::from_secs(5), fake2.vote_response(&cfg)).await.unwrap();
    assert_eq!(answer, (Term(7), true), "a fresh node grants the first vote of a term");
    let s = node.handle().status();
    assert_eq!((s.term, s.voted_for), (Term(7), Some(NodeId(2))));
    node.shutdown().await;
    drop(to_node);

    // Restart from the same directory: the vote is remembered...
    let node = start_with_listener(cfg.clone(), std::net::TcpListener::bind(cfg.listen).unwrap())
        .await
        .unwrap();
    let s = node.handle().status();
    assert_eq!((s.term, s.voted_for), (Term(7), Some(NodeId(2))));
    // ...so, once its start-up lease ended, another candidate of the same
    // term is refused.
    tokio::time::sleep(timeout + Duration::from_millis(200)).await;
    let mut to_node = fake3.dial(&cfg).await;
    to_node
        .send(wire::encode(&Frame::Message(Message::Vote { term: Term(7), transfer: false })))
        .await
        .unwrap();
    let answer =
        tokio::time::timeout(Duration::from_secs(5), fake3.vote_response(&cfg)).await.unwrap();
    assert_eq!(answer, (Term(7), false), "a restarted node voted twice in one term");
    assert_eq!(node.handle().status().voted_for, Some(NodeId(2)));
    node.shutdown().await;
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
        StartError::CorruptState { path: p, detail } => {
            assert_eq!(p, &path);
            assert!(detail.contains("both copies") && detail.contains("checksum"), "{detail}");
        }
        other => panic!("expected CorruptState, got {other:?}"),
    }
    let msg = err.to_string();
    assert!(
        msg.contains(&path.display().to_string()) && msg.contains("Restore it from backup"),
        "{msg}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), bytes, "the corrupted file was modified");

    // Plain garbage too.
    std::fs::write(&path, b"hello").unwrap();
    assert!(matches!(start_solo(&cfg).await, Err(StartError::CorruptState { .. })));
    assert_eq!(std::fs::read(&path).unwrap(), b"hello");
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
        Err(StartError::ForeignState { path: p, found_cluster, .. }) => {
            assert_eq!(p, path);
            assert_eq!(found_cluster, "test");
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
