//! JSON bodies of the HTTP API, shared by the server (which writes them) and
//! the CLI clients and demo (which read them).
//!
//! Ids, terms and tokens are plain numbers on the wire so that clients do not
//! depend on the core's types.

use serde::{Deserialize, Serialize};

/// `GET /v1/status`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct StatusBody {
    /// This node.
    pub id: u64,
    /// The election protocol: "raft", "ranked" or "paxos".
    #[serde(default)]
    pub protocol: String,
    /// "leader", "follower", "candidate" or "pre-candidate".
    pub role: String,
    /// Current term.
    pub term: u64,
    /// Whom this node voted for in `term`.
    pub voted_for: Option<u64>,
    /// The leader this node knows of.
    pub leader: Option<u64>,
    /// Peer (transport) address of that leader.
    pub leader_address: Option<String>,
    /// The leader's fencing token.
    pub fencing_token: Option<u64>,
    /// Last leader sequence number issued or accepted.
    pub lsn: Option<LsnBody>,
    /// True while the node cannot write its durable state (it then does not vote).
    pub storage_failed: bool,
    /// The other voters.
    pub peers: Vec<PeerBody>,
}

/// A leader sequence number.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct LsnBody {
    /// Term of the issuing leader.
    pub term: u64,
    /// Message counter within that term.
    pub counter: u64,
}

/// A peer as seen by the node answering.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct PeerBody {
    /// The peer's id.
    pub id: u64,
    /// Its peer address.
    pub address: String,
    /// Whether a connection to it is up.
    pub connected: bool,
    /// Milliseconds since a message from it last arrived, if ever.
    pub last_heard_ms: Option<u64>,
    /// Last measured heartbeat round trip, in milliseconds.
    pub rtt_ms: Option<f64>,
}

impl StatusBody {
    /// How many peers are connected.
    pub fn connected_peers(&self) -> usize {
        self.peers.iter().filter(|p| p.connected).count()
    }
}

/// `GET /v1/leader`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct LeaderBody {
    /// The leader's id.
    pub id: u64,
    /// The leader's peer address.
    pub address: Option<String>,
    /// The leader's term.
    pub term: u64,
    /// The leader's fencing token.
    pub fencing_token: Option<u64>,
}

/// `POST /v1/transfer` request.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TransferRequest {
    /// The node to hand leadership to.
    pub to: u64,
}

/// `POST /v1/transfer` success.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct TransferBody {
    /// The node that was asked to take over.
    pub to: u64,
    /// The term the handing-over leader was in.
    pub from_term: u64,
}

/// Every error answer: `{"error": "...", ...}`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct ErrorBody {
    /// What went wrong, for people.
    pub error: String,
    /// For "not the leader": the leader this node knows of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader: Option<u64>,
}

/// One Server-Sent Event of `GET /v1/watch`: the node's view of leadership.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct LeadershipBody {
    /// The leader, or null when there is none.
    pub leader: Option<u64>,
    /// The node's term.
    pub term: u64,
    /// The leader's fencing token.
    pub fencing_token: Option<u64>,
    /// The answering node's own role.
    pub role: String,
}
