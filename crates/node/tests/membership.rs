//! Changes of members on real nodes (in-process, real TCP with mutual TLS,
//! logs on disk): a node joins as a learner, catches up, is promoted and
//! counts; a voter is removed and no longer counts; the leader removes
//! itself and hands over; a node whose disk was wiped is refused as the
//! member it was. `docs/MEMBERSHIP.md`.

mod common;

use common::{wait_for, Cluster, ELECTION_TIMEOUT, HEARTBEAT};
use std::net::TcpListener;
use tenure_core::NodeId;
use tenure_node::{start_replicated, ChangeFailure, Node, NodeConfig, Replicated};
use tenure_replica::{Change, ChangeError, Member, Position, StateMachine};

/// A state machine that counts what it applied.
#[derive(Default)]
struct Count(u64);

impl StateMachine for Count {
    fn apply(&mut self, _pos: Position, _command: &[u8]) -> Vec<u8> {
        self.0 += 1;
        Vec::new()
    }

    fn snapshot(&self) -> Vec<u8> {
        self.0.to_le_bytes().to_vec()
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), String> {
        let bytes: [u8; 8] = snapshot.try_into().map_err(|_| "8 bytes".to_string())?;
        self.0 = u64::from_le_bytes(bytes);
        Ok(())
    }
}

type Running = Option<(Node, Replicated<Count>)>;

/// Four configured nodes; the first three are the cluster, the fourth
/// joins (its `peers` are the three, `joining` set).
struct Members {
    configs: Vec<NodeConfig>,
    nodes: Vec<Running>,
    listeners: Vec<Option<TcpListener>>,
    _dir: tempfile::TempDir,
}

impl Members {
    async fn start() -> Members {
        common::init_logs();
        let (mut configs, listeners, dir) = Cluster::configure(4, HEARTBEAT, ELECTION_TIMEOUT);
        let three: Vec<_> = configs[0].peers[..3].to_vec();
        for c in &mut configs {
            c.peers = three.clone();
        }
        configs[3].joining = true;
        let mut listeners: Vec<Option<TcpListener>> = listeners.into_iter().map(Some).collect();
        let mut nodes = Vec::new();
        for i in 0..3 {
            let l = listeners[i].take();
            nodes.push(Some(start_replicated(configs[i].clone(), l).await.unwrap()));
        }
        nodes.push(None);
        Members { configs, nodes, listeners, _dir: dir }
    }

    async fn start_node(&mut self, i: usize) {
        let cfg = self.configs[i].clone();
        let l = match self.listeners[i].take() {
            Some(l) => l,
            None => TcpListener::bind(cfg.listen).unwrap(),
        };
        self.nodes[i] = Some(start_replicated(cfg, Some(l)).await.unwrap());
    }

    fn log(&self, i: usize) -> Replicated<Count> {
        self.nodes[i].as_ref().expect("running").1.clone()
    }

    fn node(&self, i: usize) -> &Node {
        &self.nodes[i].as_ref().expect("running").0
    }

    fn leader(&self) -> Option<usize> {
        self.nodes.iter().position(|n| {
            n.as_ref().is_some_and(|(n, r)| n.handle().is_leader() && r.status().ready_leader)
        })
    }

    async fn ready_leader(&self) -> usize {
        wait_for("a ready leader", || self.leader()).await
    }

    /// Node `i` as a member to add: its id, its peer address, and its data
    /// directory's identity (read from a first start, or given).
    fn member(&self, i: usize, directory: Option<tenure_core::DirectoryId>) -> Member {
        let c = &self.configs[i];
        Member { id: c.id, address: c.listen.to_string(), directory, auto_promote: false }
    }

    async fn change(&self, change: Change) -> Result<tenure_replica::Membership, ChangeFailure> {
        let leader = self.ready_leader().await;
        self.log(leader).change_members(change).await
    }

    async fn stop(&mut self, i: usize) {
        if let Some((n, _)) = self.nodes[i].take() {
            n.shutdown().await;
        }
    }
}

fn id(i: usize) -> NodeId {
    NodeId(i as u64 + 1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_joins_as_a_learner_is_promoted_and_counts() {
    let mut m = Members::start().await;
    let leader = m.ready_leader().await;
    for k in 0..20 {
        m.log(leader).propose(format!("w{k}").into_bytes()).await.unwrap();
    }
    // Node 4 starts (joining): it knows the three, none of them knows it.
    m.start_node(3).await;
    let directory = m.node(3).handle().status().directory;
    let added = m.change(Change::AddLearner(m.member(3, Some(directory)))).await.unwrap();
    assert!(added.members.is_learner(id(3)), "{}", added.members);
    assert_eq!(added.members.get(id(0)).unwrap().address, m.configs[0].listen.to_string());
    // It catches up: the 20 commands and everything committed after.
    let commit = m.log(leader).status().commit;
    wait_for("the learner catches up", || (m.log(3).status().applied >= commit).then_some(()))
        .await;
    assert!(m.log(3).read_stale(|c| c.0).0 >= 20);
    let (_, electorate) = m.log(3).membership();
    assert!(!electorate.stands && electorate.learners == [id(3)], "{electorate}");
    assert!(!m.node(3).handle().is_leader(), "a learner never leads");
    // Promoted once the leader has heard that it holds everything
    // committed (its answers may still be on their way).
    let promoted = loop {
        match m.change(Change::Promote(id(3))).await {
            Err(ChangeFailure::Refused(ChangeError::Behind(_))) => {
                tokio::time::sleep(HEARTBEAT).await
            }
            other => break other.unwrap(),
        }
    };
    assert!(promoted.members.is_voter(id(3)));
    // Two of four voters stopped: no majority, no writes. Node 4 counts.
    let leader = m.ready_leader().await;
    let others: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    m.stop(others[0]).await;
    m.log(leader).propose(b"with 3 of 4".to_vec()).await.unwrap();
    m.stop(others[1]).await;
    let stuck =
        tokio::time::timeout(ELECTION_TIMEOUT * 10, m.log(leader).propose(b"with 2 of 4".to_vec()))
            .await;
    assert!(!matches!(stuck, Ok(Ok(_))), "2 of 4 voters committed a write: {stuck:?}");
    m.start_node(others[0]).await;
    m.ready_leader().await;
    let l = m.ready_leader().await;
    m.log(l).propose(b"with 3 of 4 again".to_vec()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_removes_itself_and_hands_over() {
    let mut m = Members::start().await;
    let leader = m.ready_leader().await;
    m.log(leader).propose(b"before".to_vec()).await.unwrap();
    // A ready leader may not have heard every follower yet (a slow start
    // on a loaded machine): the strict check refuses until it has.
    let mut tries = 0;
    let removed = loop {
        match m.log(leader).change_members(Change::Remove(id(leader))).await {
            Err(ChangeFailure::Refused(ChangeError::Unhealthy { .. })) if tries < 50 => {
                tries += 1;
                tokio::time::sleep(HEARTBEAT).await
            }
            other => break other.unwrap(),
        }
    };
    assert!(!removed.members.is_voter(id(leader)));
    // Another node leads, soon: a handover, not a timeout.
    let next = wait_for("a new leader", || m.leader().filter(|&l| l != leader)).await;
    m.log(next).propose(b"after".to_vec()).await.unwrap();
    // The removed node never leads again, and its elector no longer stands.
    let (_, electorate) = m.log(leader).membership();
    assert!(!electorate.stands, "{electorate}");
    tokio::time::sleep(ELECTION_TIMEOUT * 5).await;
    assert!(!m.node(leader).handle().is_leader());
    // Two voters left, both needed.
    let change = m.change(Change::Remove(id(next))).await;
    match change {
        Err(ChangeFailure::Refused(ChangeError::Unhealthy { .. })) | Ok(_) => {}
        other => panic!("{other:?}"),
    }
    m.stop(leader).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_changes_are_refused_with_nothing_changed() {
    let mut m = Members::start().await;
    let leader = m.ready_leader().await;
    let follower = (leader + 1) % 3;
    // On a follower: refused, naming the leader.
    match m.log(follower).change_members(Change::Remove(id(2))).await {
        Err(ChangeFailure::Refused(ChangeError::NotLeader { leader: Some(l) })) => {
            assert_eq!(l, id(leader));
        }
        other => panic!("{other:?}"),
    }
    // A duplicate id or address; promoting a voter; removing a stranger.
    let dup =
        Member { id: id(1), address: "127.0.0.1:1".into(), directory: None, auto_promote: false };
    assert!(matches!(
        m.change(Change::AddLearner(dup)).await,
        Err(ChangeFailure::Refused(ChangeError::DuplicateId(_)))
    ));
    let same_address = Member {
        id: NodeId(9),
        address: m.configs[0].listen.to_string(),
        directory: None,
        auto_promote: false,
    };
    assert!(matches!(
        m.change(Change::AddLearner(same_address)).await,
        Err(ChangeFailure::Refused(ChangeError::DuplicateAddress(..)))
    ));
    assert!(matches!(
        m.change(Change::Promote(id(0))).await,
        Err(ChangeFailure::Refused(ChangeError::AlreadyVoter(_)))
    ));
    assert!(matches!(
        m.change(Change::Remove(NodeId(42))).await,
        Err(ChangeFailure::Refused(ChangeError::NotMember(_)))
    ));
    // Adding a node that never starts is fine (a learner counts for
    // nothing); promoting it is refused: it holds nothing.
    m.change(Change::AddLearner(m.member(3, None))).await.unwrap();
    let promoted = m.change(Change::Promote(id(3))).await;
    assert!(
        matches!(promoted, Err(ChangeFailure::Refused(ChangeError::Behind(_)))),
        "{promoted:?}"
    );
    let (members, _) = m.log(leader).membership();
    assert!(members.members.is_learner(id(3)) && members.members.voters.len() == 3);
    // Writes still commit on the three voters.
    m.log(leader).propose(b"still".to_vec()).await.unwrap();
    m.stop(follower).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wiped_node_is_not_the_member_it_was() {
    let mut m = Members::start().await;
    m.ready_leader().await;
    m.start_node(3).await;
    let directory = m.node(3).handle().status().directory;
    m.change(Change::AddLearner(m.member(3, Some(directory)))).await.unwrap();
    wait_for("the learner hears the leader", || m.node(3).handle().status().leader).await;
    // Its disk is wiped; it comes back under its id with a new directory.
    m.stop(3).await;
    std::fs::remove_dir_all(&m.configs[3].data_dir).unwrap();
    m.start_node(3).await;
    let new_directory = m.node(3).handle().status().directory;
    assert_ne!(new_directory, directory);
    tokio::time::sleep(ELECTION_TIMEOUT * 3).await;
    let status = m.node(3).handle().status();
    assert_eq!(status.leader, None, "the wiped node follows nobody: {status:?}");
    let leader = m.ready_leader().await;
    let refused = m.node(leader).handle().status();
    let why = refused
        .peers
        .iter()
        .find(|p| p.id == id(3))
        .and_then(|p| p.handshake_error.clone())
        .unwrap_or_default();
    assert!(why.contains("data directory"), "{why:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_missed_the_change_that_added_the_leader_catches_up() {
    let mut m = Members::start().await;
    m.ready_leader().await;
    // Node 3 is away while node 4 is added and promoted.
    m.stop(2).await;
    m.start_node(3).await;
    let directory = m.node(3).handle().status().directory;
    m.change(Change::AddLearner(m.member(3, Some(directory)))).await.unwrap();
    loop {
        match m.change(Change::Promote(id(3))).await {
            Err(ChangeFailure::Refused(ChangeError::Behind(_))) => {
                tokio::time::sleep(HEARTBEAT).await
            }
            other => {
                other.unwrap();
                break;
            }
        }
    }
    // Node 4 leads.
    let leader = m.ready_leader().await;
    if leader != 3 {
        m.node(leader).handle().transfer_leadership(id(3)).await.unwrap();
    }
    wait_for("node 4 leads", || (m.leader() == Some(3)).then_some(())).await;
    m.log(3).propose(b"under node 4".to_vec()).await.unwrap();
    // Node 3 comes back: its log names neither node 4 nor the change that
    // added it, yet it hears node 4 (a guest, ahead of it) and catches up.
    m.start_node(2).await;
    wait_for("node 3 holds the configuration that names node 4", || {
        m.log(2).membership().0.members.is_voter(id(3)).then_some(())
    })
    .await;
    wait_for("node 3 follows node 4", || {
        (m.node(2).handle().status().leader == Some(id(3))).then_some(())
    })
    .await;
    let commit = m.log(3).status().commit;
    wait_for("node 3 applied everything", || (m.log(2).status().applied >= commit).then_some(()))
        .await;
}
