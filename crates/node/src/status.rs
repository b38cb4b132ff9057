//! What the embedding API reports: leadership, status and metrics.

use serde::Serialize;
use std::net::SocketAddr;
use tenure_core::{Counters, DirectoryId, FencingToken, Lsn, NodeId, ProtocolKind, Role, Term};

/// Who leads, as this node knows it. Published on a watch channel on every change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Leadership {
    /// The leader this node knows of (itself included), if any.
    pub leader: Option<NodeId>,
    /// This node's term.
    pub term: Term,
    /// The known leader's fencing token.
    pub fencing_token: Option<FencingToken>,
    /// This node's role.
    pub role: Role,
}

/// A change of leadership, as seen by this node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum LeadershipEvent {
    /// This node became the leader of `term`.
    BecameLeader {
        /// The term it leads.
        term: Term,
        /// The token to attach to every write it makes to fenced storage.
        fencing_token: FencingToken,
    },
    /// This node stopped leading (step-down, transfer, lost quorum, shutdown).
    LostLeadership {
        /// The term it led.
        term: Term,
    },
    /// Another node is known to lead.
    LeaderObserved {
        /// The leader.
        leader: NodeId,
        /// Its term.
        term: Term,
        /// Its fencing token.
        fencing_token: FencingToken,
    },
    /// No leader is known any more.
    NoLeader {
        /// This node's term.
        term: Term,
    },
}

/// A snapshot of the node's state.
#[derive(Clone, Debug, Serialize)]
pub struct NodeStatus {
    /// This node.
    pub id: NodeId,
    /// Its incarnation: larger at every start of the node (see
    /// [`crate::storage::incarnation`]).
    pub incarnation: u64,
    /// Its data directory's identity (see [`crate::storage::incarnation`]).
    pub directory: DirectoryId,
    /// The election protocol it runs.
    pub protocol: ProtocolKind,
    /// Its role.
    pub role: Role,
    /// Its term.
    pub term: Term,
    /// Whom it voted for in `term`.
    pub voted_for: Option<NodeId>,
    /// The leader it knows of.
    pub leader: Option<NodeId>,
    /// The configured peer address of that leader.
    pub leader_addr: Option<SocketAddr>,
    /// The leader's fencing token.
    pub fencing_token: Option<FencingToken>,
    /// The last LSN issued (leader) or accepted (follower).
    pub lsn: Option<Lsn>,
    /// True while the state file cannot be written; the node then neither votes nor leads.
    pub storage_failed: bool,
    /// The other voters.
    pub peers: Vec<PeerInfo>,
    /// Its cluster.
    pub cluster_id: String,
    /// The voters it counts its majorities over, itself included, ids
    /// ascending: the set its handshakes show, and require of every peer.
    pub voters: Vec<NodeId>,
}

/// One peer as seen by this node's transport.
#[derive(Clone, Debug, Serialize)]
pub struct PeerInfo {
    /// The peer.
    pub id: NodeId,
    /// Its configured address.
    pub addr: SocketAddr,
    /// True while this node's outbound connection to the peer is established
    /// (handshake accepted).
    pub connected: bool,
    /// Milliseconds since any frame from the peer last arrived, if ever.
    pub last_heard_ms: Option<u64>,
    /// Smoothed round-trip time of transport pings to the peer.
    pub rtt_ms: Option<f64>,
    /// The peer's current incarnation: the highest its handshakes showed
    /// since this node started (none before the first).
    pub incarnation: Option<u64>,
    /// Where its embedding service (tenure: its HTTP API) answers, as its
    /// handshake advertised it ([`crate::transport::PeerLink::api_address`]).
    pub api_address: Option<String>,
    /// Where its etcd API answers, as its handshake advertised it
    /// ([`crate::transport::PeerLink::etcd_address`]).
    pub etcd_address: Option<String>,
    /// Its data directory's identity, as its last accepted handshake showed
    /// it (none before the first).
    pub directory: Option<DirectoryId>,
    /// Why the last handshake with it failed, either way, until one
    /// succeeds (say, the voter sets differ).
    pub handshake_error: Option<String>,
}

/// Counters and measurements.
#[derive(Clone, Debug, Serialize)]
pub struct NodeMetrics {
    /// The election core's counters.
    pub counters: Counters,
    /// How many times the known leader changed (to another node or to none).
    pub leader_changes: u64,
    /// Recent failovers (bounded ring, oldest first): milliseconds from losing
    /// a leader to observing the next.
    pub failover_durations_ms: Vec<f64>,
    /// Smoothed ping round-trip time per peer.
    pub peer_rtt_ms: Vec<(NodeId, Option<f64>)>,
    /// Election messages written to peers.
    pub messages_sent: u64,
    /// Election messages received from peers.
    pub messages_received: u64,
    /// Frames or handshakes refused: malformed, oversized, wrong cluster, unknown
    /// or own node id, unsupported version.
    pub frames_rejected: u64,
    /// How late the election driver woke for its timer.
    pub driver_lag: DriverLagStats,
}

/// How late the election driver woke for the election core's deadlines
/// (see [`crate::metrics::DriverLag`]): the measure of whether other work
/// starves it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct DriverLagStats {
    /// The largest lateness since the node started, in milliseconds.
    pub max_ms: f64,
    /// The largest in the last 10 to 20 s ([`crate::metrics::LAG_WINDOW`]).
    pub recent_max_ms: f64,
    /// Timer wakes recorded.
    pub wakes: u64,
    /// `(threshold_ms, wakes later than it)` for each of
    /// [`crate::metrics::LAG_THRESHOLDS_MS`].
    pub late_wakes: Vec<(u64, u64)>,
}
