//! The JSON bodies of tenure's HTTP API (docs/API.md), once: the server
//! writes them, the Rust client, the CLI, the fault tests and the fuzz
//! targets read them. serde only: no HTTP stack, no runtime.
//!
//! Ids, terms and tokens are plain numbers on the wire so that clients do not
//! depend on the core's types.

#![warn(missing_docs)]

use base64::Engine;
use serde::{Deserialize, Serialize};

mod groups;
pub use groups::{
    AssignmentBody, GroupBody, GroupJoinRequest, GroupLeaveRequest, GroupListBody, GroupListEntry,
    GroupMemberBody, GroupMemberSpecBody, GroupOwnerBody, GroupReleaseRequest, GroupSpecBody,
    GroupStatsBody, GroupWriteBody, OwnedPartitionBody, PartitionStatsBody, ReleasedGrant,
    MAX_RELEASE_PARTITIONS,
};

/// `GET /v1/status`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct StatusBody {
    /// This node.
    pub id: u64,
    /// This node's incarnation: larger at every start of the node (absent
    /// from servers without one: store-led, or of an earlier tenure).
    #[serde(default)]
    pub incarnation: Option<u64>,
    /// This node's data-directory identity, 32 hex digits: the same at
    /// every start of its data directory, new when the directory is new
    /// (absent from servers without one: store-led, or of an earlier tenure).
    #[serde(default)]
    pub directory: Option<String>,
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
    /// This node's HTTP API address (HOST:PORT), if configured.
    #[serde(default)]
    pub http_address: Option<String>,
    /// The known leader's HTTP API address: `--peer-http`, else the one its
    /// handshake advertised.
    #[serde(default)]
    pub leader_http_address: Option<String>,
    /// The replicated log as this node holds it (absent from servers
    /// without one).
    #[serde(default)]
    pub replication: Option<ReplicationBody>,
    /// This node's cluster id (absent from servers of an earlier tenure).
    #[serde(default)]
    pub cluster_id: Option<String>,
    /// The voters this node counts its majorities over, itself included,
    /// ascending (absent from servers without a node of their own): every
    /// node of a cluster must show the same set; `tenure status` flags
    /// endpoints that do not.
    #[serde(default)]
    pub voters: Option<Vec<u64>>,
    /// The elector's timings and the failover bound they give (absent from
    /// servers of an earlier tenure, and from store-led ones): what a
    /// client plans a session's TTL with (docs/ELECTIONS.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timings: Option<TimingsBody>,
    /// The configuration of members this node's log holds (absent from
    /// servers of an earlier tenure, and from store-led ones): its voters
    /// and learners and the entry that names them. `GET /v1/members` has
    /// every member's details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub membership: Option<MembershipBody>,
}

/// Where a configuration of members is in the replicated log: the entry
/// that holds it (index 0, token 0: the bootstrap list of `--peers`, before
/// any configuration entry).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ConfigPositionBody {
    /// The entry's index.
    pub index: u64,
    /// The fencing token of the leadership that wrote it.
    pub token: u64,
}

impl std::fmt::Display for ConfigPositionBody {
    /// `index@token`, as the CLI prints it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{}", self.index, self.token)
    }
}

/// The configuration of members in `GET /v1/status`: who votes, who
/// learns, and where it is in the log.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct MembershipBody {
    /// The entry that names it.
    pub config: ConfigPositionBody,
    /// Whether this node knows that entry committed.
    pub committed: bool,
    /// The voters' ids, in preference order.
    pub voters: Vec<u64>,
    /// The learners' ids.
    pub learners: Vec<u64>,
}

/// `GET /v1/members`, and the answer to a change of members: the
/// configuration the answering node's log holds.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct MembersBody {
    /// The node that answered.
    pub served_by: u64,
    /// The leader it knows of.
    pub leader: Option<u64>,
    /// That leader's HTTP API address, if known (changes go there).
    #[serde(default)]
    pub leader_http_address: Option<String>,
    /// The entry that names this configuration.
    pub config: ConfigPositionBody,
    /// Whether the answering node knows that entry committed (the answer
    /// to a change is given once it has).
    pub committed: bool,
    /// The answering node's commit index: what `lag_entries` counts from.
    pub commit_index: u64,
    /// The voters, in preference order.
    pub voters: Vec<MemberBody>,
    /// The learners: they receive the log and do not count.
    pub learners: Vec<MemberBody>,
}

impl MembersBody {
    /// Member `id`, voter or learner, and whether it votes.
    pub fn get(&self, id: u64) -> Option<(&MemberBody, bool)> {
        let voter = self.voters.iter().find(|m| m.id == id).map(|m| (m, true));
        voter.or_else(|| self.learners.iter().find(|m| m.id == id).map(|m| (m, false)))
    }
}

/// One member in `GET /v1/members`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct MemberBody {
    /// Its node id.
    pub id: u64,
    /// Its peer address, HOST:PORT (empty: not known to the answering node).
    pub address: String,
    /// The data-directory identity it was added with, 32 hex digits (null
    /// for a member of the bootstrap list, named before anyone saw its disk):
    /// a node that comes back with another directory is not this member.
    pub directory: Option<String>,
    /// For a learner: the leader promotes it once it has caught up and
    /// stayed caught up; false: it waits for `POST /v1/members/{id}/promote`.
    pub auto_promote: bool,
    /// Its HTTP API address, as the answering node knows it (`--peer-http`,
    /// or what its peer handshake advertised).
    #[serde(default)]
    pub http_address: Option<String>,
    /// On the leader: the last log index this member holds (the leader's
    /// own last index for itself); null elsewhere.
    #[serde(default)]
    pub match_index: Option<u64>,
    /// On the leader: how many committed entries it lacks (`commit_index`
    /// minus `match_index`, at least 0); null elsewhere.
    #[serde(default)]
    pub lag_entries: Option<u64>,
}

/// How a learner added by `POST /v1/members` becomes a voter.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum PromoteMode {
    /// The leader promotes it once it has caught up and stayed caught up
    /// for three election timeouts.
    #[default]
    Auto,
    /// It stays a learner until `POST /v1/members/{id}/promote`.
    Manual,
}

/// `POST /v1/members` request: add a node as a learner.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct MemberAddRequest {
    /// Its node id (1 to 65535), not a member's.
    pub id: u64,
    /// Its peer address, HOST:PORT (an IP address or a host name): where the
    /// other members dial it.
    pub address: String,
    /// Its data directory's identity (32 hex digits, `directory` of its
    /// `GET /v1/status`): it is refused at the peer handshake with any
    /// other. Absent: any directory is taken as this member's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub directory: Option<String>,
    /// How it becomes a voter (default `auto`).
    #[serde(default)]
    pub promote: PromoteMode,
    /// When true, the leader first dials the node at `address` and adds it
    /// only if node `id` answers the peer handshake there (with
    /// `directory`, when given); otherwise the change is refused (409,
    /// reason `unreachable`) and nothing changes. For a running node that
    /// asks to be added (`tenure server --join` sets it): a typo in its
    /// address would leave a learner the leader can never reach.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub probe: bool,
}

/// A node's elector timings, as `GET /v1/status` reports them in `timings`,
/// with the failover bound they give.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimingsBody {
    /// How often the leader sends heartbeats.
    pub heartbeat_ms: u64,
    /// How long followers tolerate a silent leader.
    pub election_timeout_ms: u64,
    /// Delay between successive voters' candidacies.
    pub candidacy_stagger_ms: u64,
    /// The configured bound on one message round trip (fsync included).
    pub round_trip_ms: u64,
    /// The clock-drift bound the cluster was configured with.
    pub clock_drift_ppm: u32,
    /// How many voters the cluster has.
    pub voters: u64,
    /// The longest one leader failover is expected to take, crash to a
    /// successor that answers renewals.
    pub failover_bound_ms: u64,
}

/// The replicated log of a node: how far it holds, knows committed and
/// applied it, and (on the leader) how far each follower holds it.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct ReplicationBody {
    /// Index of the last entry of this node's log.
    pub last_index: u64,
    /// Highest index this node knows to be committed.
    pub commit_index: u64,
    /// Highest index applied to this node's store.
    pub applied_index: u64,
    /// The store's revision as applied on this node.
    pub revision: u64,
    /// On the leader: each follower's last index held and how many entries
    /// of the leader's log it lacks. Empty elsewhere.
    pub followers: Vec<FollowerBody>,
}

/// A follower's place in the leader's log.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct FollowerBody {
    /// The follower.
    pub id: u64,
    /// The last index it holds.
    pub match_index: u64,
    /// Entries of the leader's log it does not hold yet.
    pub lag_entries: u64,
}

/// `GET /v1/cluster`: every voter's status, read through the answering node.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ClusterBody {
    /// The node that answered (and read the others).
    pub served_by: u64,
    /// Its wall clock, milliseconds since the Unix epoch.
    pub now_unix_ms: u64,
    /// One per voter, by id.
    pub nodes: Vec<ClusterNodeBody>,
}

/// One voter in `GET /v1/cluster`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ClusterNodeBody {
    /// The voter.
    pub id: u64,
    /// Its HTTP API address, if known.
    pub http_address: Option<String>,
    /// Its own `/v1/status`, or null when it did not answer.
    pub status: Option<StatusBody>,
    /// Why there is no status.
    pub error: Option<String>,
}

/// `GET /v1/timeline`: the leadership changes the answering node saw.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct TimelineBody {
    /// The answering node's wall clock, milliseconds since the Unix epoch.
    pub now_unix_ms: u64,
    /// Oldest first, at most `tenure_node::timeline::TIMELINE_LEN`.
    pub entries: Vec<TimelineEntryBody>,
}

/// One change of leader.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct TimelineEntryBody {
    /// The new leader's term.
    pub term: u64,
    /// The new leader.
    pub leader: u64,
    /// The leader known before, if any.
    pub previous: Option<u64>,
    /// When the answering node learned of it (ms since the Unix epoch).
    pub at_unix_ms: u64,
    /// How long it knew no leader before; null for a direct switch.
    pub no_leader_ms: Option<u64>,
    /// "startup", "transfer", "graceful_stop", "crash", "partition",
    /// "quorum_lost" or "election" (see docs/DASHBOARD.md).
    pub cause: String,
    /// The cause in a sentence.
    pub detail: String,
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
    /// Its HTTP API address: `--peer-http`, else the one its handshake
    /// advertised (`--advertise-http`, or its `--http`).
    #[serde(default)]
    pub http_address: Option<String>,
    /// Its current incarnation: the highest its handshakes showed since the
    /// answering node started (null before the first).
    #[serde(default)]
    pub incarnation: Option<u64>,
    /// Its data-directory identity, as its last accepted handshake showed
    /// it (null before the first).
    #[serde(default)]
    pub directory: Option<String>,
    /// Why the last handshake with it failed, either way (say, the voter
    /// sets differ), until one succeeds.
    #[serde(default)]
    pub handshake_error: Option<String>,
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
    /// The leader's HTTP API address: `--peer-http`, else the one its
    /// handshake advertised (null when neither is known).
    #[serde(default)]
    pub http_address: Option<String>,
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

/// `POST /v1/peers/{id}/dead` request: incarnation N of node `id` is dead.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct DeadNoticeRequest {
    /// The incarnation that died (`/v1/status` shows each peer's).
    pub incarnation: u64,
}

/// `POST /v1/peers/{id}/dead` success: the notice was taken.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeadNoticeBody {
    /// Always true (a notice that is not taken gets an error answer).
    pub accepted: bool,
    /// The node the notice is about.
    pub node: u64,
    /// Its incarnation that died.
    pub incarnation: u64,
    /// Whether the answering node followed it as its leader: it then stood
    /// at once, without waiting for the election timeout.
    pub was_leader: bool,
}

/// Every error answer: `{"error": "...", ...}`, with the fields below that
/// apply.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq)]
pub struct ErrorBody {
    /// What went wrong, for people.
    pub error: String,
    /// For "not the leader": the leader this node knows of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader: Option<u64>,
    /// Key-value answers (404 of a key, 409 of a compare-and-set): the
    /// store's revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<u64>,
    /// 409 of a compare-and-set: the key's `mod_revision` now (0: absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mod_revision: Option<u64>,
    /// 504 of a write: `"unknown"`, the write may or may not have been
    /// applied (never a failure: read the key to find out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    /// 410 of a watch: the changes up to this revision are no longer kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compacted: Option<u64>,
    /// 410 of a watch: the store's revision (read the keys, then watch from
    /// `current + 1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current: Option<u64>,
    /// 409 of a death notice: the node's current incarnation, as the
    /// answering node knows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_incarnation: Option<u64>,
    /// For "not the leader" of a change of members: the leader's HTTP API
    /// address, if the answering node knows it (send the change there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader_http_address: Option<String>,
    /// A refused change of members: why, as a word a program can match
    /// (`not_leader`, `in_progress`, `duplicate_id`, `duplicate_address`,
    /// `duplicate_directory`, `not_member`, `already_voter`, `last_voter`,
    /// `too_many`, `unhealthy`, `behind`, `invalid`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
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

/// `PUT /v1/kv/{key}` success.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvPutBody {
    /// The store's revision after the put (the key's new `mod_revision`).
    pub revision: u64,
    /// The fencing token of the leadership that committed it.
    pub fencing_token: u64,
}

/// `DELETE /v1/kv/{key}` success.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvDeleteBody {
    /// The store's revision after the delete (unchanged if nothing was deleted).
    pub revision: u64,
    /// Whether the key was there.
    pub deleted: bool,
    /// The fencing token of the leadership that committed it.
    pub fencing_token: u64,
}

/// A key, its value and its revisions. The value travels as a UTF-8
/// string in `value`; a value that is not UTF-8 travels in `value_base64`
/// instead (standard alphabet, padded), and `value` is absent.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct KvBody {
    /// The key.
    pub key: String,
    /// The value, if it is UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// The value in base64, if it is not UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_base64: Option<String>,
    /// The revision that created the key.
    pub create_revision: u64,
    /// The revision that last changed it.
    pub mod_revision: u64,
    /// Changes since it was created (1 after the first put; 0 in a delete event).
    pub version: u64,
    /// The session (lease) the key is attached to, if any: the key is
    /// deleted when that session ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<u64>,
}

impl KvBody {
    /// A value's two fields: `(value, value_base64)`, the string if the
    /// bytes are UTF-8, else their base64.
    pub fn encode_value(bytes: &[u8]) -> (Option<String>, Option<String>) {
        match std::str::from_utf8(bytes) {
            Ok(text) => (Some(text.to_string()), None),
            Err(_) => (None, Some(base64::engine::general_purpose::STANDARD.encode(bytes))),
        }
    }

    /// The value's bytes, from whichever field carries it.
    pub fn value_bytes(&self) -> Result<Vec<u8>, String> {
        value_from(self.value.as_deref(), self.value_base64.as_deref())
            .map(Option::unwrap_or_default)
    }
}

/// The bytes of a value given as a string or in base64 (at most one of
/// them); None if neither is given.
pub fn value_from(value: Option<&str>, base64: Option<&str>) -> Result<Option<Vec<u8>>, String> {
    match (value, base64) {
        (Some(_), Some(_)) => Err("give \"value\" or \"value_base64\", not both".to_string()),
        (Some(v), None) => Ok(Some(v.as_bytes().to_vec())),
        (None, Some(b)) => base64::engine::general_purpose::STANDARD
            .decode(b)
            .map(Some)
            .map_err(|e| format!("\"value_base64\" is not base64: {e}")),
        (None, None) => Ok(None),
    }
}

/// `GET /v1/kv/{key}` success: the key and the store's revision.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct KvGetBody {
    /// The key.
    #[serde(flatten)]
    pub kv: KvBody,
    /// The store's revision when it was read.
    pub revision: u64,
}

/// `GET /v1/kv?prefix=P` success.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct KvListBody {
    /// The keys starting with the prefix, in order.
    pub kvs: Vec<KvBody>,
    /// Whether more keys match than were returned.
    pub more: bool,
    /// The store's revision when they were read.
    pub revision: u64,
}

/// `POST /v1/txn` request: if every comparison holds, the `success`
/// operations, else the `failure` ones, at one revision.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TxnRequest {
    /// The comparisons, all of which must hold.
    #[serde(default)]
    pub compare: Vec<CompareBody>,
    /// Done when they all hold.
    #[serde(default)]
    pub success: Vec<TxnOpBody>,
    /// Done otherwise.
    #[serde(default)]
    pub failure: Vec<TxnOpBody>,
}

/// One comparison of a transaction: `{"key", "target", "op", "value"}`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CompareBody {
    /// The key.
    pub key: String,
    /// What of the key is compared.
    pub target: TargetName,
    /// How.
    pub op: CompareOpName,
    /// What it is compared with: a number for the revisions and the version,
    /// a string for the value.
    #[serde(default)]
    pub value: Option<serde_json::Value>,
    /// For `"target": "value"`: the value in base64 instead of `value`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_base64: Option<String>,
}

/// The property of a key a comparison reads.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum TargetName {
    /// The revision that last changed the key (0: absent).
    ModRevision,
    /// The revision that created it (0: absent).
    CreateRevision,
    /// Its version (0: absent).
    Version,
    /// Its value (a comparison with an absent key's value fails).
    Value,
}

/// A comparison operator.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareOpName {
    /// Equal.
    #[serde(rename = "=")]
    Equal,
    /// Not equal.
    #[serde(rename = "!=")]
    NotEqual,
    /// The key's property is less than the given one.
    #[serde(rename = "<")]
    Less,
    /// The key's property is greater than the given one.
    #[serde(rename = ">")]
    Greater,
}

/// One operation of a transaction branch: `{"put": {"key", "value"}}`,
/// `{"delete": {"key"}}` or `{"get": {"key"}}`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
pub enum TxnOpBody {
    /// Sets a key.
    Put {
        /// The key.
        key: String,
        /// The value as a string.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        value: Option<String>,
        /// The value in base64, instead of `value`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        value_base64: Option<String>,
        /// Attaches the key to this session (lease): it is deleted when the
        /// session ends.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        lease: Option<u64>,
    },
    /// Removes a key.
    Delete {
        /// The key.
        key: String,
    },
    /// Reads a key, as of the transaction.
    Get {
        /// The key.
        key: String,
    },
}

/// `POST /v1/txn` success.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct TxnBody {
    /// Whether every comparison held (the success branch ran).
    pub succeeded: bool,
    /// The store's revision after the transaction.
    pub revision: u64,
    /// The fencing token of the leadership that committed it.
    pub fencing_token: u64,
    /// One answer per operation of the branch that ran, in order.
    pub responses: Vec<TxnResponseBody>,
}

/// The answer to one transaction operation: `{"put": {"prev"}}`,
/// `{"delete": {"prev"}}` or `{"get": {"kv"}}` (null when absent).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum TxnResponseBody {
    /// A put, with the key as it was.
    Put {
        /// The key before the put.
        prev: Option<KvBody>,
    },
    /// A delete, with the key as it was.
    Delete {
        /// The key before the delete (null: it was absent).
        prev: Option<KvBody>,
    },
    /// A get.
    Get {
        /// The key (null: absent).
        kv: Option<KvBody>,
    },
}

/// One change of `GET /v1/kv-watch` (SSE event `put` or `delete`; its `id`
/// is the revision).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct KvEventBody {
    /// `"put"` or `"delete"`, as the event's name.
    #[serde(rename = "type")]
    pub kind: String,
    /// The revision of the change.
    pub revision: u64,
    /// Why a deleted key went away when its session ended: `"revoked"` or
    /// `"expired"`; absent for a put or a plain delete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// After a put, the key as it now is; after a delete, as it was, with
    /// `mod_revision` the delete's revision and version 0.
    #[serde(flatten)]
    pub kv: KvBody,
}

/// `POST /v1/sessions` request: a new session with this TTL.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SessionGrantRequest {
    /// Milliseconds the session lives without a renewal (500 to 86,400,000).
    pub ttl_ms: u64,
}

/// A session's id and TTL: the answer to a grant or a keepalive.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionBody {
    /// The session (lease) id, never reused.
    pub id: u64,
    /// Its TTL in milliseconds.
    pub ttl_ms: u64,
}

/// `DELETE /v1/sessions/{id}` success: the session ended and its keys with it.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionRevokedBody {
    /// The session.
    pub id: u64,
    /// How many keys attached to it were deleted.
    pub keys_deleted: usize,
    /// The store's revision after it (the deletions' revision, if any).
    pub revision: u64,
}

/// One session as the store holds it.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct SessionInfoBody {
    /// The session.
    pub id: u64,
    /// Its TTL in milliseconds.
    pub ttl_ms: u64,
    /// The keys attached to it, in order.
    pub keys: Vec<String>,
    /// The name of the API token it belongs to; null: the administrators'
    /// (granted without a token). Only its owner or an admin token may
    /// renew, revoke or use it (docs/SECURITY.md).
    #[serde(default)]
    pub owner: Option<String>,
    /// How long it has left before the leader expires it, if the leader
    /// answered (only the leader keeps that time); null otherwise.
    #[serde(default)]
    pub remaining_ms: Option<u64>,
}

/// `GET /v1/sessions` success.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct SessionListBody {
    /// The sessions, by id (the first `MAX_REMAINING_ASKED` with the
    /// leader's `remaining_ms`, when a leader answers).
    pub sessions: Vec<SessionInfoBody>,
    /// Whether more sessions exist than were returned.
    pub more: bool,
    /// The store's revision when they were read.
    pub revision: u64,
}

/// `POST /v1/elections/{name}/campaign` request: `session` joins the
/// election's queue with `value` (at most 4,096 bytes; empty if absent).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct CampaignRequest {
    /// The session (from `POST /v1/sessions`) the candidacy is attached to.
    pub session: u64,
    /// The candidate's value: what observers are told about the leader.
    #[serde(default)]
    pub value: String,
}

/// `POST /v1/elections/{name}/proclaim` request: the leader's new value.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ProclaimRequest {
    /// The session that leads.
    pub session: u64,
    /// The new value (at most 4,096 bytes).
    pub value: String,
}

/// `POST /v1/elections/{name}/resign` request.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ResignRequest {
    /// The session whose candidacy ends.
    pub session: u64,
    /// The candidacy's fencing token (its key's `create_revision`, as the
    /// campaign answered it): only that candidacy ends, so a resignation
    /// that arrives late cannot end a later campaign of the same session.
    /// Absent: whatever candidacy the session holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<u64>,
}

/// Where a candidacy stands: the answer to a campaign and to a wait.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct CandidacyBody {
    /// The election.
    pub name: String,
    /// The candidate's session.
    pub session: u64,
    /// When it joined the queue: its key's `create_revision`.
    pub create_revision: u64,
    /// Whether it leads now.
    pub leader: bool,
    /// Its fencing token while it leads (its `create_revision`), else null.
    pub token: Option<u64>,
    /// How many candidates are ahead of it (0 when it leads).
    pub ahead: usize,
}

/// `POST /v1/elections/{name}/resign` success.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResignBody {
    /// The revision of the deletion.
    pub revision: u64,
}

/// `POST /v1/elections/{name}/proclaim` success.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProclaimBody {
    /// The revision of the new value.
    pub revision: u64,
    /// The leadership's token, unchanged by a proclaim.
    pub token: u64,
}

/// An election's leader.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct ElectionLeaderBody {
    /// Its session.
    pub session: u64,
    /// Its value.
    pub value: String,
    /// Its fencing token: the `create_revision` of its candidacy.
    pub token: u64,
}

/// A candidate of an election.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct ElectionCandidateBody {
    /// Its session.
    pub session: u64,
    /// Its value.
    pub value: String,
    /// When it joined the queue.
    pub create_revision: u64,
}

/// `GET /v1/elections/{name}` success.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct ElectionBody {
    /// The election.
    pub name: String,
    /// Its leader, or null when nobody is a candidate.
    pub leader: Option<ElectionLeaderBody>,
    /// Every candidate, in the order they joined (the leader first).
    pub candidates: Vec<ElectionCandidateBody>,
    /// The store's revision when it was read.
    pub revision: u64,
}

/// One election in `GET /v1/elections`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct ElectionSummaryBody {
    /// The election.
    pub name: String,
    /// Its leader.
    pub leader: Option<ElectionLeaderBody>,
    /// How many candidates it has.
    pub candidates: usize,
}

/// `GET /v1/elections` success.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct ElectionListBody {
    /// The elections with at least one candidate, by name.
    pub elections: Vec<ElectionSummaryBody>,
    /// Whether more exist than were returned (`?limit=N`).
    pub more: bool,
    /// The store's revision when they were read.
    pub revision: u64,
}

/// An event `leader` of `GET /v1/elections/{name}/observe`: a new leader,
/// or the leader's new value (a proclaim, same token).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct ObservedLeaderBody {
    /// The leader's session.
    pub session: u64,
    /// Its value.
    pub value: String,
    /// Its fencing token.
    pub token: u64,
    /// The revision of the change (for the first event: of the read).
    pub revision: u64,
}

/// An event `no-leader` of `GET /v1/elections/{name}/observe`: the last
/// candidate left.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObservedNoLeaderBody {
    /// The revision of the change (for the first event: of the read).
    pub revision: u64,
}

/// `GET /v1/elections/{name}/check?token=T` success.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenCheckBody {
    /// Whether T is the token of the election's leader now.
    pub current: bool,
    /// The leader's token now, or null when there is no leader.
    pub token: Option<u64>,
    /// The store's revision when it was read.
    pub revision: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_travels_as_text_or_base64_and_comes_back() {
        for bytes in [&b"leader-1"[..], &[0xff, 0x00, 0x80][..], &[][..]] {
            let (value, value_base64) = KvBody::encode_value(bytes);
            assert!(value.is_some() != value_base64.is_some(), "{bytes:?}");
            let back = value_from(value.as_deref(), value_base64.as_deref()).unwrap();
            assert_eq!(back.as_deref(), Some(bytes));
        }
        assert!(value_from(Some("a"), Some("YQ==")).unwrap_err().contains("not both"));
        assert!(value_from(None, Some("%%")).unwrap_err().contains("not base64"));
        assert_eq!(value_from(None, None), Ok(None));
    }
}
