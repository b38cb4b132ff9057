//! Incarnations in three-node clusters in one process: each start takes a
//! higher one, the peers learn it at the handshake, a higher one is the
//! previous one's death notice, and external notices are checked against
//! what the node knows.

mod common;

use common::{dial_tls, handshake, identity, wait_for, Cluster};
use tenure_node::storage::{INCARNATION_FILE, MAX_INCARNATION};
use tenure_node::wire::{Frame, WIRE_VERSION};
use tenure_node::{NodeHandle, NodeId, NoticeError, NoticeOutcome};

/// Waits until every running node knows every other running node's
/// current incarnation.
async fn incarnations_known(c: &Cluster) {
    let handles = c.running();
    wait_for("every node to know every peer's incarnation", || {
        handles
            .iter()
            .all(|h| {
                h.status().peers.iter().all(|p| {
                    match handles.iter().find(|o| o.id() == p.id) {
                        Some(o) => p.incarnation == Some(o.incarnation()),
                        None => true, // not running
                    }
                })
            })
            .then_some(())
    })
    .await;
}

fn deaths(h: &NodeHandle) -> u64 {
    h.metrics().counters.death_notices
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_takes_a_higher_incarnation_and_the_peers_take_it_as_the_old_ones_death() {
    let mut c = Cluster::start(3).await;
    c.stable_leader().await;
    incarnations_known(&c).await;
    // The first incarnation seen of a peer is no notice.
    for h in c.running() {
        assert_eq!(deaths(&h), 0, "node {}", h.id());
        assert_eq!(h.status().incarnation, h.incarnation());
    }
    let old = c.handle(2).incarnation();
    let directory = c.handle(2).directory();
    assert_eq!(c.handle(2).status().directory, directory);
    let directories: Vec<_> = c.running().iter().map(|h| h.directory()).collect();
    assert!(directories.iter().all(|d| directories.iter().filter(|e| *e == d).count() == 1));
    c.stop(2).await;
    c.restart(2).await;
    let new = c.handle(2).incarnation();
    assert_eq!(new, old + 1);
    assert_eq!(c.handle(2).directory(), directory, "a restart keeps the directory's identity");
    incarnations_known(&c).await;
    // Each other node saw the new incarnation (on its dial, or on the
    // restarted node's) and gave its core one notice of the old one's death;
    // its handshake showed the same directory.
    for i in [0, 1] {
        let h = c.handle(i);
        wait_for("the death notice", || (deaths(&h) == 1).then_some(())).await;
        let p = h.status().peers.into_iter().find(|p| p.id == NodeId(3)).unwrap();
        assert_eq!((p.incarnation, p.directory), (Some(new), Some(directory)));
    }
    // The restarted node saw its peers for the first time: no notice.
    assert_eq!(deaths(&c.handle(2)), 0);
    // The same incarnation again (a reconnection) is no notice.
    assert_eq!(c.handle(0).notify_dead(NodeId(3), old).await, stale(3, old, new));
    assert_eq!(deaths(&c.handle(0)), 1);
    c.stop_all().await;
}

fn stale(peer: u64, incarnation: u64, current: u64) -> Result<NoticeOutcome, NoticeError> {
    Ok(NoticeOutcome::Stale { peer: NodeId(peer), incarnation, current })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn external_notices_are_taken_only_about_a_voters_current_incarnation() {
    let mut c = Cluster::start(3).await;
    let leader = c.stable_leader().await;
    incarnations_known(&c).await;
    let li = c.index_of(leader);
    let (fi, oi) = ((li + 1) % 3, (li + 2) % 3);
    let (f, other) = (c.handle(fi), c.handle(oi));
    let n = other.incarnation();
    let me = f.id();
    assert_eq!(f.notify_dead(me, f.incarnation()).await, Err(NoticeError::Myself(me)));
    assert_eq!(f.notify_dead(NodeId(9), 1).await, Err(NoticeError::NotAVoter(NodeId(9))));
    assert_eq!(f.notify_dead(other.id(), 0).await, Err(NoticeError::InvalidIncarnation));
    let unseen = f.notify_dead(other.id(), n + 1).await;
    assert_eq!(
        unseen,
        Err(NoticeError::Unseen { peer: other.id(), incarnation: n + 1, current: n })
    );
    assert_eq!(f.notify_dead(other.id(), n - 1).await, stale(other.id().0, n - 1, n));
    assert_eq!(deaths(&f), 0, "refused and stale notices reach no core");
    // The current incarnation of a follower: accepted (it was not the leader).
    let accepted = f.notify_dead(other.id(), n).await;
    assert_eq!(
        accepted,
        Ok(NoticeOutcome::Accepted { peer: other.id(), incarnation: n, was_leader: false })
    );
    // The leader's: accepted, and named as the leader (the caller vouches
    // for its death: see `NodeHandle::notify_dead`).
    let ln = c.handle(li).incarnation();
    assert_eq!(
        f.notify_dead(leader, ln).await,
        Ok(NoticeOutcome::Accepted { peer: leader, incarnation: ln, was_leader: true })
    );
    assert_eq!(deaths(&f), 2);
    c.stop_all().await;
    let stopped = f.notify_dead(leader, ln).await;
    assert_eq!(stopped, Err(NoticeError::NodeStopped));
}

/// A node started from a copy of its data directory shows a lower
/// incarnation than before: the peers warn, and take no notice about it
/// until it passes the highest they saw.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolled_back_peer_gets_no_notice() {
    let mut c = Cluster::start(3).await;
    c.stable_leader().await;
    incarnations_known(&c).await;
    let file = c.data_dir(2).join(INCARNATION_FILE);
    let copy = std::fs::read(&file).unwrap();
    let first = c.handle(2).incarnation();
    for _ in 0..2 {
        c.stop(2).await;
        c.restart(2).await;
        incarnations_known(&c).await;
    }
    assert_eq!(c.handle(2).incarnation(), first + 2);
    c.stop(2).await;
    std::fs::write(&file, &copy).unwrap();
    c.restart(2).await;
    let lower = c.handle(2).incarnation();
    assert_eq!(lower, first + 1);
    let h = c.handle(0);
    let deaths_before = deaths(&h);
    let e = wait_for_rolled_back(&h, lower).await;
    assert_eq!(e, NoticeError::RolledBack { peer: NodeId(3), highest: first + 2, lower });
    // The current incarnation stays the highest seen, and a lower one is no
    // death notice.
    let p = h.status().peers.into_iter().find(|p| p.id == NodeId(3)).unwrap();
    assert_eq!(p.incarnation, Some(first + 2));
    assert_eq!(deaths(&h), deaths_before);
    c.stop_all().await;
}

/// The refusal of a notice about a peer whose lower incarnation this node
/// has seen (it may see it on the second connection a little later).
async fn wait_for_rolled_back(h: &NodeHandle, lower: u64) -> NoticeError {
    for _ in 0..500 {
        if let Err(e @ NoticeError::RolledBack { .. }) = h.notify_dead(NodeId(3), lower).await {
            return e;
        }
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    panic!("the rolled-back peer was never refused");
}

/// A forged "next incarnation": a peer holding node 3's certificate dials
/// node 1 as node 2, showing a higher incarnation than node 2's. The hello
/// is refused (the certificate does not name node 2) before its incarnation
/// is read: node 1 gives its core no notice and still knows node 2's own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_higher_incarnation_is_no_death_notice() {
    let mut c = Cluster::start(3).await;
    c.stable_leader().await;
    incarnations_known(&c).await;
    let (target, victim) = (c.handle(0), c.handle(1));
    let forged = Frame::Hello {
        version: WIRE_VERSION,
        cluster_id: c.configs[0].cluster_id.clone(),
        from: victim.id(),
        to: target.id(),
        protocol: c.configs[0].protocol,
        incarnation: MAX_INCARNATION,
        voters: c.configs[0].peers.iter().map(|&(id, _)| id).collect(),
        api_address: None,
        etcd_address: None,
        directory: tenure_core::DirectoryId(0xd0),
        config: tenure_core::ConfigId::BOOTSTRAP,
        peer_address: None,
        timings: tenure_node::wire::Timings::of(&c.configs[0].core_config()),
    };
    let mut conn = dial_tls(&identity(&c.configs[2]), &c.configs[0]).await.unwrap();
    let answer = handshake(&mut conn, forged).await;
    assert!(matches!(answer, Ok(Frame::Reject { .. })), "{answer:?}");
    let p = target.status().peers.into_iter().find(|p| p.id == victim.id()).unwrap();
    assert_eq!(p.incarnation, Some(victim.incarnation()));
    assert_eq!(deaths(&target), 0);
    c.stop_all().await;
}
