//! Three-node clusters in one process: election, hand-over, transfer, and
//! peers that must be refused.

mod common;

use common::{dial_tls, identity, wait_for, Cluster, CLUSTER, ELECTION_TIMEOUT, HEARTBEAT};
use std::time::{Duration, Instant};
use tenure_node::tls::certgen::{self, CertRequest};
use tenure_node::TransferError;
use tenure_node::{FencingToken, LeadershipEvent, NodeConfig, NodeId, Role, Security};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_elect_one_leader_and_agree() {
    let mut c = Cluster::start(3).await;
    let mut events: Vec<_> = c.running().iter().map(|h| h.events()).collect();
    let leader = c.stable_leader().await;
    let lh = c.handle(c.index_of(leader));
    let status = lh.status();
    assert_eq!(status.role, Role::Leader);
    assert_eq!(status.fencing_token, Some(FencingToken(status.term.0)));
    assert_eq!(status.leader_addr, Some(c.configs[c.index_of(leader)].listen));
    // The leader announced its leadership with the token of its term (unless
    // it won before we subscribed, which the status above already covers).
    let rx = &mut events[c.index_of(leader)];
    let mut seen = Vec::new();
    while let Ok(e) = rx.try_recv() {
        seen.push(e);
    }
    if let Some(LeadershipEvent::BecameLeader { term, fencing_token }) =
        seen.iter().rev().find(|e| matches!(e, LeadershipEvent::BecameLeader { .. }))
    {
        assert_eq!(*term, status.term);
        assert_eq!(fencing_token.0, term.0);
    }
    // Every node measures an RTT to each peer and sees it connected.
    for h in c.running() {
        let peers = wait_for("pings to every peer", || {
            let s = h.status();
            s.peers
                .iter()
                .all(|p| p.connected && p.rtt_ms.is_some() && p.last_heard_ms.is_some())
                .then_some(s.peers)
        })
        .await;
        assert_eq!(peers.len(), 2);
        let m = h.metrics();
        assert!(m.messages_sent > 0 && m.messages_received > 0, "{m:?}");
        assert_eq!(m.frames_rejected, 0);
    }
    // The watch channel shows the leadership the status shows. (Not
    // necessarily `leader` any more: on a loaded machine a stall may have
    // let its lease lapse since, and the cluster elected again.)
    for h in c.running() {
        wait_for("the watch channel to show the status's leadership", || {
            let l = h.leadership().borrow().clone();
            let s = h.status();
            (l.leader.is_some() && (l.leader, l.term) == (s.leader, s.term)).then_some(())
        })
        .await;
    }
    c.stop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_leader_shutdown_hands_over_without_a_timeout() {
    // A long election timeout makes a timeout-driven failover easy to tell
    // from a hand-over.
    let timeout = Duration::from_millis(2000);
    let mut c = Cluster::start_with(3, Duration::from_millis(50), timeout).await;
    let old = c.stable_leader().await;
    let old_term = c.handle(c.index_of(old)).status().term;
    let others: Vec<_> = c.running().into_iter().filter(|h| h.id() != old).collect();
    // Let every follower acknowledge a few heartbeats so a successor is known.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let t0 = Instant::now();
    c.stop(c.index_of(old)).await;
    let new =
        wait_for("a new leader", || others.iter().find(|h| h.is_leader()).map(|h| h.id())).await;
    let elapsed = t0.elapsed();
    assert_ne!(new, old);
    println!("hand-over took {elapsed:?} (election timeout {timeout:?})");
    assert!(
        elapsed < timeout / 2,
        "hand-over took {elapsed:?}, not well under the {timeout:?} timeout"
    );
    let s = others.iter().find(|h| h.id() == new).unwrap().status();
    assert!(s.term > old_term);
    assert!(s.fencing_token.unwrap() > FencingToken(old_term.0));
    // The surviving follower agrees and measured the failover.
    let follower = others.iter().find(|h| h.id() != new).unwrap();
    wait_for("the follower to follow the new leader", || {
        (follower.status().leader == Some(new)).then_some(())
    })
    .await;
    let m = follower.metrics();
    assert!(m.leader_changes >= 2, "{m:?}");
    assert!(m.failover_durations_ms.iter().all(|&d| d < timeout.as_secs_f64() * 1e3), "{m:?}");
    c.stop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transfer_moves_leadership_to_the_named_node() {
    let mut c = Cluster::start(3).await;
    let leader = c.stable_leader().await;
    let lh = c.handle(c.index_of(leader));
    let target = c.running().into_iter().find(|h| h.id() != leader).unwrap();
    // Followers cannot transfer.
    let refused = target.transfer_leadership(leader).await;
    assert!(
        matches!(
            refused,
            Err(TransferError::Refused(tenure_core::TransferError::NotLeader { .. }))
        ),
        "{refused:?}"
    );
    assert!(matches!(
        lh.transfer_leadership(NodeId(99)).await,
        Err(TransferError::Refused(tenure_core::TransferError::UnknownNode(NodeId(99))))
    ));
    // Wait until the target has acknowledged the leader, then hand over.
    tokio::time::sleep(HEARTBEAT * 3).await;
    let mut lost = lh.events();
    let t0 = Instant::now();
    lh.transfer_leadership(target.id()).await.unwrap();
    wait_for("the named node to lead", || target.is_leader().then_some(())).await;
    println!("transfer took {:?}", t0.elapsed());
    assert!(t0.elapsed() < ELECTION_TIMEOUT, "transfer took {:?}", t0.elapsed());
    assert!(!lh.is_leader());
    assert!(matches!(lost.recv().await.unwrap(), LeadershipEvent::LostLeadership { .. }));
    assert_eq!(c.stable_leader().await, target.id());
    c.stop_all().await;
}

/// Two nodes that disagree on the cluster id never connect, hear or lead:
/// with TLS their certificates name other clusters (same CA), without TLS
/// the hello is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peer_with_another_cluster_id_is_rejected() {
    common::init_logs();
    for tls in [true, false] {
        let (mut configs, listeners, dir) =
            Cluster::configure_with(2, HEARTBEAT, ELECTION_TIMEOUT, tls);
        configs[1].cluster_id = "other".into();
        if tls {
            // Node 2's certificate for cluster "other", from the same CA.
            let other = dir.path().join("other-certs");
            std::fs::create_dir(&other).unwrap();
            for f in [certgen::CA_CERT_FILE, certgen::CA_KEY_FILE] {
                std::fs::copy(dir.path().join("certs").join(f), other.join(f)).unwrap();
            }
            let made = certgen::generate(&other, &CertRequest::new("other", [NodeId(2)])).unwrap();
            configs[1].security = Security::MutualTls(made.nodes[0].1.clone());
        }
        let mut nodes = Vec::new();
        for (cfg, l) in configs.into_iter().zip(listeners) {
            nodes.push(tenure_node::start_with_listener(cfg, l).await.unwrap());
        }
        let handles: Vec<_> = nodes.iter().map(|n| n.handle()).collect();
        wait_for("both sides to refuse the other", || {
            handles.iter().all(|h| h.metrics().frames_rejected >= 1).then_some(())
        })
        .await;
        // Give them several election timeouts: nobody may connect, hear, or lead.
        let deadline = Instant::now() + ELECTION_TIMEOUT * 4;
        while Instant::now() < deadline {
            for h in &handles {
                let s = h.status();
                assert!(
                    !s.peers[0].connected,
                    "node {} counted a foreign peer as connected",
                    h.id()
                );
                assert!(!h.is_leader());
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        for h in &handles {
            assert_eq!(h.metrics().messages_received, 0);
            assert_eq!(h.status().peers[0].last_heard_ms, None);
        }
        for n in nodes {
            n.shutdown().await;
        }
    }
}

/// Opens a TLS connection to `target` with `as_node`'s certificate, writes
/// `bytes` and returns whether the node closed the connection afterwards.
async fn send_raw(as_node: &NodeConfig, target: &NodeConfig, bytes: &[u8]) -> bool {
    let mut conn = dial_tls(&identity(as_node), target).await.unwrap().into_inner();
    let _ = conn.write_all(bytes).await;
    let _ = conn.flush().await;
    let mut buf = [0u8; 256];
    let closed = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match conn.read(&mut buf).await {
                Ok(0) | Err(_) => return, // the close (or a reset)
                Ok(_) => continue,        // a Reject frame, then the close
            }
        }
    });
    closed.await.is_ok()
}

/// An authenticated peer that sends garbage loses its connection; the node
/// and the cluster carry on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_frames_close_the_connection_but_not_the_node() {
    let mut c = Cluster::start(3).await;
    let leader = c.stable_leader().await;
    let li = c.index_of(leader);
    let other = (li + 1) % 3;
    let term = c.handle(li).status().term;
    let before = c.handle(li).metrics().frames_rejected;
    let own_hello = tenure_node::wire::encode(&tenure_node::wire::Frame::Hello {
        version: tenure_node::wire::WIRE_VERSION,
        cluster_id: CLUSTER.into(),
        from: leader,
        to: leader,
        protocol: tenure_core::ProtocolKind::Raft,
        incarnation: 1,
        voters: vec![leader],
        api_address: None,
        etcd_address: None,
        directory: tenure_core::DirectoryId(0xd0),
        config: tenure_core::ConfigId::BOOTSTRAP,
        peer_address: None,
        timings: tenure_node::wire::Timings::of(&c.configs[li].core_config()),
    });
    let mut hello_as_own_id = (own_hello.len() as u32).to_be_bytes().to_vec();
    hello_as_own_id.extend_from_slice(&own_hello);
    let garbage: Vec<Vec<u8>> = vec![
        vec![0xff, 0xff, 0xff, 0xff, 1, 2, 3], // oversized length prefix
        vec![0, 0, 0, 5, 9, 9, 9, 9, 9],       // unknown wire version
        vec![0, 0, 0, 4, 1, 0xff, 0xff, 0xff], // right version, garbage body
        hello_as_own_id,                       // a peer claiming our own id
    ];
    let n = garbage.len() as u64;
    for g in &garbage {
        let closed = send_raw(&c.configs[other], &c.configs[li], g).await;
        assert!(closed, "a garbage connection was left open: {g:?}");
    }
    let h = c.handle(li);
    wait_for("every garbage frame counted", || {
        (h.metrics().frames_rejected >= before + n).then_some(())
    })
    .await;
    // The node and the cluster carry on under the same leader.
    assert_eq!(c.stable_leader().await, leader);
    assert_eq!(c.handle(li).status().term, term);
    c.stop_all().await;
}

#[test]
fn invalid_configs_are_refused() {
    let (configs, _l, _d) = Cluster::configure(3, HEARTBEAT, ELECTION_TIMEOUT);
    let mut cfg: NodeConfig = configs[0].clone();
    cfg.election_timeout = HEARTBEAT;
    assert!(cfg.validate().is_err());
    let mut cfg = configs[0].clone();
    cfg.cluster_id.clear();
    assert!(cfg.validate().is_err());
    let mut cfg = configs[0].clone();
    cfg.peers[1].1 = cfg.peers[0].1;
    assert!(matches!(cfg.validate(), Err(tenure_node::NodeConfigError::DuplicateAddress(..))));
    assert!(configs[0].validate().is_ok());
}
