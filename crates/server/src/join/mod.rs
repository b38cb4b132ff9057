//! A node that joins a running cluster (`tenure server --join URL`,
//! `docs/MEMBERSHIP.md`).
//!
//! Before it starts, the node asks the cluster for its members
//! ([`cluster_members`]) and starts as a learner with the voters as its
//! peers ([`peers_of`], `NodeConfig::joining`). Once it runs, [`run`] (the
//! server runs it when [`crate::server::ServerConfig::join`] is set) asks
//! the leader to add it with its id, its peer address and its data
//! directory's identity, unless the cluster holds it already:
//!
//! * a member with the same directory (or one added without a directory):
//!   nothing to add, the node is (again) the member it was;
//! * a member with another directory: the node lost the data of the member
//!   it was ([`JoinError::OtherDirectory`]); it must be removed first, or
//!   replaced by a node of another id;
//! * refused for good (a duplicate address, a token without the admin
//!   role): [`JoinError`], and the server stops;
//! * anything that may pass (no leader, a change in progress, voters that
//!   did not answer the leader lately, a node that does not answer, an
//!   outcome unknown): asked again, from
//!   [`JOIN_RETRY_MIN`] doubling to [`JOIN_RETRY_MAX`], until it is added.
//!
//! The node keeps the members it joined with, and whether it was added, in
//! its data directory ([`record`]): it restarts from them, and a node that
//! was added once is never added again by a restart (it may have been
//! removed since).

pub mod record;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tenure_api::{MemberAddRequest, MembersBody, PromoteMode};
use tenure_client::error::with_causes;
use tenure_client::members::{change, members, refusal, MemberChange, LIST_TIMEOUT};
use tenure_client::{Cluster, Error};
use tenure_core::{DirectoryId, NodeId};
use tenure_kv::Store;
use tenure_node::status::PeerInfo;
use tenure_node::transport::NOT_A_MEMBER;
use tenure_node::{NodeHandle, Replicated};
use tracing::{info, warn};

/// First pause before asking again.
pub const JOIN_RETRY_MIN: Duration = Duration::from_millis(100);
/// Longest pause between two attempts.
pub const JOIN_RETRY_MAX: Duration = Duration::from_secs(5);

/// How a node asks the cluster to add it.
#[derive(Debug, Clone)]
pub struct Join {
    /// The cluster's HTTP API: its endpoints, the CA that signed their
    /// certificates and a token of role admin.
    pub cluster: Arc<Cluster>,
    /// This node's peer address as the other members dial it (HOST:PORT).
    pub address: String,
    /// Whether the leader promotes it on its own once it has caught up.
    pub promote: PromoteMode,
}

/// Two joins are the same when they ask the same endpoints to add the same
/// address the same way (the client's CA and token are not compared).
impl PartialEq for Join {
    fn eq(&self, other: &Join) -> bool {
        self.cluster.endpoints() == other.cluster.endpoints()
            && self.address == other.address
            && self.promote == other.promote
    }
}

impl Eq for Join {}

/// Why a node cannot join.
#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    /// None of the endpoints answered the members.
    #[error("none of the cluster's endpoints told its members: {0}")]
    Unreachable(String),
    /// An endpoint refused the token.
    #[error("{0}: give a token of role admin of the cluster (--join-token-file)")]
    Token(String),
    /// The cluster holds this node's id with another data directory.
    #[error(
        "node {id} is a member of the cluster already, added with data directory {theirs}, but \
         this node's data directory is {ours}: the members would refuse it. If --id {id} is a \
         typo, start this node with its own id (the member node {id} may be running fine: \
         `tenure member list` shows its lag). If node {id}'s disk was wiped or replaced, join \
         under a new id and replace it (`tenure member replace {id} NEW HOST:PORT`), or remove \
         it (`tenure member remove {id}`) and start this node again"
    )]
    OtherDirectory {
        /// This node's id.
        id: NodeId,
        /// The directory the cluster holds for it.
        theirs: String,
        /// This node's.
        ours: DirectoryId,
    },
    /// The cluster refused to add this node, for good.
    #[error("the cluster refused to add node {id}: {message}")]
    Refused {
        /// This node's id.
        id: NodeId,
        /// Why (the server's answer).
        message: String,
    },
    /// A member's peer address cannot be used.
    #[error("the cluster names node {id} at {address:?}, which {problem}")]
    BadAddress {
        /// The member.
        id: u64,
        /// Its address as the cluster gave it.
        address: String,
        /// What is wrong with it.
        problem: String,
    },
}

/// The members of the cluster, from the first of its endpoints that
/// answers; an error names each endpoint's failure.
pub async fn cluster_members(cluster: &Cluster) -> Result<MembersBody, JoinError> {
    let mut failures = Vec::new();
    for endpoint in cluster.endpoints() {
        let url = format!("{endpoint}/v1/members");
        let client = cluster.client();
        match client.json::<MembersBody>(hyper::Method::GET, &url, None, LIST_TIMEOUT).await {
            Ok(m) => return Ok(m),
            Err(Error::AuthRefused(a)) => return Err(JoinError::Token(a.to_string())),
            Err(e) => failures.push(with_causes(&e)),
        }
    }
    Err(JoinError::Unreachable(failures.join("; ")))
}

/// The peers a joining node `me` starts with: the voters of `members` but
/// itself, their addresses resolved.
pub async fn peers_of(
    members: &MembersBody,
    me: NodeId,
) -> Result<Vec<(NodeId, SocketAddr)>, JoinError> {
    let mut peers = Vec::new();
    for m in members.voters.iter().filter(|m| m.id != me.0) {
        let bad = |problem: String| JoinError::BadAddress {
            id: m.id,
            address: m.address.clone(),
            problem,
        };
        if m.address.is_empty() {
            return Err(bad("is empty: the answering node does not know it".into()));
        }
        let addr = match m.address.parse::<SocketAddr>() {
            Ok(addr) => addr,
            Err(_) => tokio::net::lookup_host(m.address.as_str())
                .await
                .map_err(|e| bad(format!("does not resolve: {e}")))?
                .next()
                .ok_or_else(|| bad("resolves to no address".into()))?,
        };
        peers.push((NodeId(m.id), addr));
    }
    if peers.is_empty() {
        return Err(JoinError::Refused {
            id: me,
            message: "the cluster has no voter other than this node".into(),
        });
    }
    Ok(peers)
}

/// What one attempt came to.
enum Attempt {
    /// The node is a member (now, or already).
    Member,
    /// Worth asking again: why not this time.
    Again(String),
}

/// Asks the cluster to add the started node `node` (its log `kv`) until it
/// is a member, or it is refused for good; then marks the record of
/// `cluster_id` in `data_dir` ([`record`]) as added.
pub async fn run(
    join: Join,
    node: NodeHandle,
    kv: Replicated<Store>,
    data_dir: PathBuf,
    cluster_id: String,
) -> Result<(), JoinError> {
    let me = node.id();
    ask_until_added(&join, &node, &kv).await?;
    if let Err(e) = record::mark_added(&data_dir, me, &cluster_id) {
        warn!(node = %me, error = %e, "cannot record that this node was added");
    }
    Ok(())
}

async fn ask_until_added(
    join: &Join,
    node: &NodeHandle,
    kv: &Replicated<Store>,
) -> Result<(), JoinError> {
    let (me, directory) = (node.id(), node.directory());
    let mut pause = JOIN_RETRY_MIN;
    loop {
        // The log holds this node already (a restart of a joined node).
        let (membership, _) = kv.membership();
        if let Some(m) = membership.members.get(me) {
            if m.directory.is_none_or(|d| d == directory) {
                info!(node = %me, config = ?membership.at, "this node is a member of the cluster");
                return Ok(());
            }
        }
        match attempt(join, node, directory).await? {
            Attempt::Member => return Ok(()),
            Attempt::Again(why) => {
                warn!(node = %me, retry_in = ?pause, "not added to the cluster yet: {why}");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(JOIN_RETRY_MAX);
            }
        }
    }
}

/// One attempt: read the members; add this node unless it is one, once
/// its handshakes show that it suits the cluster ([`suits_the_cluster`]).
async fn attempt(
    join: &Join,
    node: &NodeHandle,
    directory: DirectoryId,
) -> Result<Attempt, JoinError> {
    let me = node.id();
    let current = match members(&join.cluster).await {
        Ok(m) => m,
        Err(Error::AuthRefused(a)) => return Err(JoinError::Token(a.to_string())),
        Err(e) => return Ok(Attempt::Again(with_causes(&e))),
    };
    if let Some((m, voter)) = current.get(me.0) {
        return match m.directory.as_deref() {
            Some(theirs) if theirs != directory.to_string() => Err(JoinError::OtherDirectory {
                id: me,
                theirs: theirs.to_string(),
                ours: directory,
            }),
            _ => {
                let role = if voter { "a voter" } else { "a learner" };
                info!(node = %me, config = %current.config, "this node is {role} of the cluster already");
                if m.address != join.address {
                    warn!(node = %me, listed = %m.address, advertised = %join.address,
                        "the cluster dials this node at the address it was added with, not at \
                         this one: replace the member if that address is wrong");
                }
                Ok(Attempt::Member)
            }
        };
    }
    if let Err(why) = suits_the_cluster(&node.status().peers) {
        return Ok(Attempt::Again(why));
    }
    let request = MemberAddRequest {
        id: me.0,
        address: join.address.clone(),
        directory: Some(directory.to_string()),
        promote: join.promote,
        // The leader adds this node only once it reached it at that address.
        probe: true,
    };
    match change(&join.cluster, &MemberChange::Add(request)).await {
        Ok(added) => {
            info!(node = %me, address = %join.address, config = %added.config,
                "added to the cluster as a learner");
            Ok(Attempt::Member)
        }
        Err(Error::AuthRefused(a)) => Err(JoinError::Token(a.to_string())),
        Err(e) => match refusal(&e) {
            Some((status, body)) if retried(status, body.reason.as_deref()) => {
                Ok(Attempt::Again(body.error))
            }
            Some((_, body)) => Err(JoinError::Refused { id: me, message: body.error }),
            None => Ok(Attempt::Again(with_causes(&e))),
        },
    }
}

/// Whether this node's handshakes with the members it dials (`peers`)
/// show that it can take part once added: one accepted it, or refused it
/// only as no member yet, which a member says after this node's
/// certificate, cluster id and protocol passed. Before that, adding it
/// would change the cluster for a node that cannot join it (another
/// cluster's id, a CA the members do not trust, another protocol): `Err`
/// gives what the handshakes said.
fn suits_the_cluster(peers: &[PeerInfo]) -> Result<(), String> {
    let heard = |p: &PeerInfo| {
        p.connected || p.handshake_error.as_deref().is_some_and(|e| e.contains(NOT_A_MEMBER))
    };
    if peers.iter().any(heard) {
        return Ok(());
    }
    let said: Vec<String> = peers
        .iter()
        .map(|p| {
            let what = p.handshake_error.as_deref().unwrap_or("no handshake yet");
            format!("node {}: {what}", p.id)
        })
        .collect();
    Err(format!(
        "not asking to be added before a member has checked this node's peer handshake (its \
         certificate, CA and cluster id); so far {}",
        said.join("; ")
    ))
}

/// Whether a refused addition may pass when asked again: no leader yet, a
/// change in progress, voters that did not answer the leader lately (a
/// loaded or restarting cluster), an outcome unknown, or this id added
/// meanwhile (the next attempt reads the members again).
fn retried(status: hyper::StatusCode, reason: Option<&str>) -> bool {
    let again = ["not_leader", "in_progress", "unhealthy", "duplicate_id", "unknown"];
    status.is_server_error() || reason.is_some_and(|r| again.contains(&r))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::StatusCode;
    use tenure_api::{ConfigPositionBody, MemberBody};

    fn member(id: u64, address: &str) -> MemberBody {
        MemberBody {
            id,
            address: address.into(),
            directory: None,
            auto_promote: false,
            http_address: None,
            match_index: None,
            lag_entries: None,
        }
    }

    fn peer(id: u64, connected: bool, error: Option<&str>) -> PeerInfo {
        PeerInfo {
            id: NodeId(id),
            addr: "127.0.0.1:7001".parse().unwrap(),
            connected,
            last_heard_ms: None,
            rtt_ms: None,
            incarnation: None,
            api_address: None,
            etcd_address: None,
            directory: None,
            handshake_error: error.map(str::to_string),
        }
    }

    /// A node asks to be added only once a member has checked its handshake:
    /// accepted it, or refused it as no member yet; not while every member
    /// refuses its certificate or cluster, or none was reached.
    #[test]
    fn a_node_asks_to_be_added_only_once_a_member_checked_its_handshake() {
        let stranger = format!("node 1 refused our handshake: node 4 {NOT_A_MEMBER} (never added)");
        let tls = "TLS handshake with node 2 failed: invalid peer certificate: UnknownIssuer";
        let cluster = "node 3 refused our handshake: node 4 runs in cluster \"prod\"";
        assert!(suits_the_cluster(&[peer(1, false, Some(&stranger)), peer(2, false, Some(tls))])
            .is_ok());
        assert!(suits_the_cluster(&[peer(1, true, None)]).is_ok());
        let why = suits_the_cluster(&[peer(2, false, Some(tls)), peer(3, false, Some(cluster))])
            .unwrap_err();
        assert!(why.contains("UnknownIssuer") && why.contains("\"prod\""), "{why}");
        let why = suits_the_cluster(&[peer(1, false, None)]).unwrap_err();
        assert!(why.contains("node 1: no handshake yet"), "{why}");
        assert!(suits_the_cluster(&[]).is_err());
    }

    fn body(voters: Vec<MemberBody>, learners: Vec<MemberBody>) -> MembersBody {
        MembersBody {
            served_by: 1,
            leader: Some(1),
            leader_http_address: None,
            config: ConfigPositionBody { index: 3, token: 1 },
            committed: true,
            commit_index: 3,
            voters,
            learners,
        }
    }

    #[tokio::test]
    async fn a_joining_node_peers_with_the_voters_but_itself() {
        let m = body(
            vec![
                member(1, "127.0.0.1:7001"),
                member(2, "127.0.0.1:7002"),
                member(4, "127.0.0.1:7004"),
            ],
            vec![member(5, "127.0.0.1:7005")],
        );
        let peers = peers_of(&m, NodeId(4)).await.unwrap();
        let ids: Vec<u64> = peers.iter().map(|(id, _)| id.0).collect();
        assert_eq!(ids, [1, 2]);
        assert_eq!(peers[1].1, "127.0.0.1:7002".parse().unwrap());
        let e = peers_of(&body(vec![member(1, "")], vec![]), NodeId(4)).await.unwrap_err();
        assert!(e.to_string().contains("does not know it"), "{e}");
        let e = peers_of(&body(vec![member(4, "h:1")], vec![]), NodeId(4)).await.unwrap_err();
        assert!(e.to_string().contains("no voter other than this node"), "{e}");
    }

    #[test]
    fn only_refusals_that_may_pass_are_asked_again() {
        for reason in ["not_leader", "in_progress", "unhealthy", "duplicate_id", "unknown"] {
            assert!(retried(StatusCode::CONFLICT, Some(reason)), "{reason}");
        }
        assert!(retried(StatusCode::SERVICE_UNAVAILABLE, None));
        for reason in ["duplicate_address", "duplicate_directory", "too_many", "invalid"] {
            assert!(!retried(StatusCode::CONFLICT, Some(reason)), "{reason}");
        }
        let e = JoinError::OtherDirectory {
            id: NodeId(4),
            theirs: "0".repeat(32),
            ours: DirectoryId(7),
        };
        let text = e.to_string();
        assert!(
            text.contains("tenure member remove 4") && text.contains("tenure member replace 4")
        );
    }
}
