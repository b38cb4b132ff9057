//! Messages between replicas.

use crate::entry::{Entry, Index, Position};
use crate::membership::Membership;
use serde::{Deserialize, Serialize};
use tenure_core::FencingToken;

/// A piece of a snapshot in transfer: the state after applying every entry
/// up to `last`, `total` bytes in all, of which `data` starts at `offset`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SnapshotChunk {
    /// The last entry the snapshot covers.
    pub last: Position,
    /// The snapshot's whole length in bytes.
    pub total: u64,
    /// Where `data` starts.
    pub offset: u64,
    /// The bytes from `offset` on (at most the configured chunk size).
    #[serde(with = "serde_bytes")]
    pub data: Vec<u8>,
    /// The configuration in force at `last`.
    pub membership: Membership,
}

/// A replication message. Every message carries the fencing token of the
/// leadership it belongs to; a node takes leader messages only from the node
/// its elector names as the leader of that token.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ReplicaMessage {
    /// Leader -> all: "promise me `token` and tell me your last position".
    Sync {
        /// The leader's token.
        token: FencingToken,
    },
    /// Answer to [`ReplicaMessage::Sync`].
    SyncReply {
        /// The token asked about.
        token: FencingToken,
        /// The sender's last position, once it promised `token`; `None` when it
        /// refused because it promised a higher token (`promised`).
        last: Option<Position>,
        /// The sender's promise after handling the request.
        promised: FencingToken,
    },
    /// Leader -> the node with the freshest log: "send me your entries after
    /// `after`" (or, from `offset`, the snapshot that replaced them).
    Fetch {
        /// The leader's token.
        token: FencingToken,
        /// The leader holds the entries up to here.
        after: Index,
        /// Snapshot bytes already received, when a snapshot is in transfer.
        offset: u64,
    },
    /// Answer to [`ReplicaMessage::Fetch`]: entries after `after`, or a piece
    /// of the snapshot when they were compacted away.
    FetchReply {
        /// The token asked about.
        token: FencingToken,
        /// The `after` of the request.
        after: Index,
        /// Consecutive entries from `after + 1` (empty with a snapshot chunk).
        entries: Vec<Entry>,
        /// A snapshot piece, when entries after `after` were compacted.
        snapshot: Option<SnapshotChunk>,
        /// The sender's last position: the fetch is done once it is reached.
        last: Position,
    },
    /// Leader -> follower: entries to append after `prev`, and the commit
    /// index. Empty, it is the replication heartbeat.
    Append {
        /// The leader's token.
        token: FencingToken,
        /// The entry the new ones follow; the follower must hold it.
        prev: Position,
        /// Consecutive entries from `prev.index + 1`.
        entries: Vec<Entry>,
        /// The leader's commit index.
        commit: Index,
        /// The leader's heartbeat round, echoed (read confirmation).
        round: u64,
    },
    /// Answer to [`ReplicaMessage::Append`], sent once the entries are durable.
    AppendReply {
        /// The token of the `Append`.
        token: FencingToken,
        /// The `round` of the `Append`.
        round: u64,
        /// `Ok(matched)`: the follower's log equals the leader's up to
        /// `matched`. `Err(last)`: it does not hold `prev`; its last index is
        /// `last` (where to resume).
        result: Result<Index, Index>,
    },
    /// Leader -> follower too far behind: a piece of the leader's snapshot.
    InstallSnapshot {
        /// The leader's token.
        token: FencingToken,
        /// The piece.
        chunk: SnapshotChunk,
    },
    /// Answer to [`ReplicaMessage::InstallSnapshot`]: bytes received so far of
    /// the snapshot up to `last` (all of them once installed and durable).
    SnapshotReply {
        /// The token of the chunk.
        token: FencingToken,
        /// The snapshot's last entry.
        last: Position,
        /// Bytes received in order.
        received: u64,
    },
}

impl ReplicaMessage {
    /// The fencing token the message belongs to.
    pub fn token(&self) -> FencingToken {
        match self {
            ReplicaMessage::Sync { token }
            | ReplicaMessage::SyncReply { token, .. }
            | ReplicaMessage::Fetch { token, .. }
            | ReplicaMessage::FetchReply { token, .. }
            | ReplicaMessage::Append { token, .. }
            | ReplicaMessage::AppendReply { token, .. }
            | ReplicaMessage::InstallSnapshot { token, .. }
            | ReplicaMessage::SnapshotReply { token, .. } => *token,
        }
    }

    /// About how many bytes of entries or snapshot the message carries (0
    /// for the others): what a driver that holds several bounds.
    pub fn payload_bytes(&self) -> usize {
        match self {
            ReplicaMessage::Append { entries, .. } | ReplicaMessage::FetchReply { entries, .. }
                if !entries.is_empty() =>
            {
                entries.iter().map(|e| e.payload.size()).sum()
            }
            ReplicaMessage::InstallSnapshot { chunk, .. } => chunk.data.len(),
            ReplicaMessage::FetchReply { snapshot: Some(chunk), .. } => chunk.data.len(),
            _ => 0,
        }
    }

    /// A short name for logs and metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            ReplicaMessage::Sync { .. } => "sync",
            ReplicaMessage::SyncReply { .. } => "sync_reply",
            ReplicaMessage::Fetch { .. } => "fetch",
            ReplicaMessage::FetchReply { .. } => "fetch_reply",
            ReplicaMessage::Append { .. } => "append",
            ReplicaMessage::AppendReply { .. } => "append_reply",
            ReplicaMessage::InstallSnapshot { .. } => "install_snapshot",
            ReplicaMessage::SnapshotReply { .. } => "snapshot_reply",
        }
    }
}
