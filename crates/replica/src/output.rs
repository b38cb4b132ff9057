//! What one input of a replica produced.

use crate::entry::{Entry, Index, Position};
use crate::membership::Membership;
use crate::message::ReplicaMessage;
use serde::{Deserialize, Serialize};
use tenure_core::{Electorate, FencingToken, NodeId};

/// A change to the durable log, applied by the driver in order.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LogOp {
    /// Record the promise of `token` (never lower than the last one).
    Promise(FencingToken),
    /// Remove every entry after `index`.
    TruncateAfter(Index),
    /// Append the entries (consecutive, right after the current last one).
    Append(Vec<Entry>),
    /// Replace the whole state: the snapshot up to `last` becomes the base of
    /// the log, and every entry is removed. (A leader's snapshot whose last
    /// entry the log already holds is installed as a [`LogOp::Compact`]
    /// instead: the entries after it stay.)
    InstallSnapshot {
        /// The last entry the snapshot covers.
        last: Position,
        /// The configuration in force at `last`.
        membership: Membership,
        /// The state machine's snapshot.
        #[serde(with = "serde_bytes")]
        data: Vec<u8>,
    },
    /// Keep the snapshot up to `last` and drop the entries it covers (a
    /// compaction: later entries stay).
    Compact {
        /// The last entry the snapshot covers.
        last: Position,
        /// The configuration in force at `last`.
        membership: Membership,
        /// The state machine's snapshot.
        #[serde(with = "serde_bytes")]
        data: Vec<u8>,
    },
}

/// A proposal's id, unique on this node.
pub type ProposalId = u64;

/// A read's id, unique on this node.
pub type ReadId = u64;

/// Why a proposal did not commit, or may not have.
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error, Serialize, Deserialize)]
pub enum ProposalError {
    /// This node does not lead (or not yet: it is still synchronising).
    #[error("this node does not lead the log ({})", describe(*.leader))]
    NotLeader {
        /// The leader this node knows of.
        leader: Option<NodeId>,
    },
    /// The entry was written but leadership was lost before it committed: a
    /// later leader may still commit it. Neither a success nor a failure.
    #[error("leadership was lost before the entry committed: its outcome is unknown")]
    Unknown,
    /// The log could not be written; the entry was not sent anywhere.
    #[error("the log could not be written")]
    StorageFailed,
}

/// Why a read could not be served.
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error, Serialize, Deserialize)]
pub enum ReadError {
    /// This node does not lead the log (or not yet).
    #[error("this node does not lead the log ({})", describe(*.leader))]
    NotLeader {
        /// The leader this node knows of.
        leader: Option<NodeId>,
    },
}

fn describe(leader: Option<NodeId>) -> String {
    match leader {
        Some(l) => format!("the leader is node {l}"),
        None => "no leader is known".to_string(),
    }
}

/// The outcome of a proposal or a read this node accepted.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Completion {
    /// A proposal's outcome: committed and applied at a position with the
    /// state machine's result, or not (see [`ProposalError`]).
    Proposal {
        /// The id [`crate::Replica::propose`] returned.
        id: ProposalId,
        /// The outcome.
        result: Result<(Position, Vec<u8>), ProposalError>,
    },
    /// A read may now be served from the state applied up to `Ok(index)`.
    Read {
        /// The id [`crate::Replica::read`] returned.
        id: ReadId,
        /// The outcome.
        result: Result<Index, ReadError>,
    },
}

/// What the last inputs produced. Handle it in field order: send `early`,
/// persist `write` (with fsync), then send `messages`, and report the
/// write durable ([`crate::Replica::handle_persisted`]); `completions` may
/// be delivered at once (a commit rests on a majority's durable copies, a
/// read index on a majority's answers, neither on this node's write).
/// Outputs are handled in the order they were taken, but the driver need
/// not wait for one's write before it feeds the next input: each later
/// output's `early` messages may leave at once, its `messages` and
/// `electorate` wait for its own write and every earlier one.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
#[must_use = "the output carries log writes and messages"]
pub struct Output {
    /// Messages that may leave before `write` is durable: once its
    /// leadership's promise is durable, what a leader sends its followers
    /// (entries, heartbeats, commit notices, snapshot pieces), so that their
    /// writes run while the leader writes its own copy (Raft thesis
    /// §10.2.1), except after a message to the same peer that waits. The leader counts
    /// its own copy toward a commit only once the driver reports `write`
    /// durable ([`crate::Replica::handle_persisted`]). A leader whose
    /// `write` then fails must never lead under that token again: see
    /// [`crate::Replica::handle_persist_failed`].
    pub early: Vec<(NodeId, ReplicaMessage)>,
    /// Changes to the durable log, in order, to make durable before sending
    /// `messages`.
    pub write: Vec<LogOp>,
    /// Messages to send.
    pub messages: Vec<(NodeId, ReplicaMessage)>,
    /// Entries applied to the state machine, in order.
    pub applied: Vec<Position>,
    /// Outcomes of proposals and reads.
    pub completions: Vec<Completion>,
    /// The configuration in force, when these inputs changed it (an entry
    /// appended or removed, a snapshot installed): the driver tells the
    /// transport.
    pub membership: Option<Membership>,
    /// What this node's elector counts over, when these inputs changed it
    /// (the configuration in force, or whether its entry is known to be
    /// committed): the driver hands it to the elector
    /// (`Protocol::handle_electorate`) once `write` is durable and before
    /// any of `messages` leaves, so that no node acknowledges a
    /// configuration entry that its elector does not count by yet.
    pub electorate: Option<Electorate>,
    /// A leadership of this node that the log will not lead (a write failed
    /// under it, or it is at or below the replica's
    /// [`crate::Replica::lead_fence`]): the driver tells the elector to give
    /// it up (`Protocol::give_up_leadership`), so that a later term elects a
    /// leader whose log works.
    pub give_up: Option<FencingToken>,
}

impl Output {
    /// True when there is nothing to do.
    pub fn is_empty(&self) -> bool {
        self.early.is_empty()
            && self.write.is_empty()
            && self.messages.is_empty()
            && self.applied.is_empty()
            && self.completions.is_empty()
            && self.membership.is_none()
            && self.electorate.is_none()
            && self.give_up.is_none()
    }
}
