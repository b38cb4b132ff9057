//! Messages of Paxos leader election with low-ball polling (`protocol = "paxos"`, TRex).

use crate::electorate::Freshness;
use crate::types::{Lsn, NodeId, Term};
use serde::{Deserialize, Serialize};

/// The low ball: a `Prepare` with it is a poll that nobody promises.
pub const LOW_BALL: Term = Term(0);

/// Messages of Paxos leader election.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum PaxosMessage {
    /// Phase 1a. With [`LOW_BALL`] a poll: answered by a `PrepareNack`
    /// carrying evidence, never promised. Otherwise a request to promise
    /// `ballot`, which the sender has promised itself.
    Prepare {
        /// The ballot (encoded as a term); [`LOW_BALL`] for a poll.
        ballot: Term,
        /// The sender's round number, echoed in the answers.
        attempt: u64,
        /// Set when the leader of this ballot resigned in favour of the sender
        /// (transfer or graceful stop): acceptors whose lease is on that
        /// leadership promise anyway.
        handover: Option<Term>,
        /// How fresh the sender's log is: a node whose own is fresher refuses
        /// (the freshness rule, [`crate::electorate`]).
        freshness: Freshness,
    },
    /// Phase 1b: the sender promised `ballot` to the destination.
    PrepareAck {
        /// The promised ballot.
        ballot: Term,
        /// The `attempt` of the `Prepare`.
        attempt: u64,
        /// The highest slot the sender knows to be committed.
        committed: u64,
        /// The highest slot the sender accepted.
        accepted_slot: u64,
    },
    /// Answer to a poll, or refusal of a high `Prepare`.
    PrepareNack {
        /// The ballot asked for ([`LOW_BALL`] for a poll).
        ballot: Term,
        /// The `attempt` of the `Prepare`.
        attempt: u64,
        /// The highest ballot the sender promised.
        promised: Term,
        /// Strong evidence: the highest slot the sender knows to be committed.
        committed: u64,
        /// Weak evidence: the newest leader heartbeat the sender received
        /// directly, as `(leader ballot, heartbeat counter)`.
        heartbeat: Option<Lsn>,
        /// When the sender would not promise the destination now (a lease on
        /// another node, its own leadership or candidacy, a poll it just
        /// answered for another node, or failing storage): for how long, in
        /// milliseconds of its clock.
        busy_ms: Option<u64>,
    },
    /// Phase 2a: accept the no-op at `slot` in `ballot`.
    Accept {
        /// The proposer's ballot.
        ballot: Term,
        /// The slot of the no-op.
        slot: u64,
        /// How fresh the sender's log is: a node whose own is fresher refuses
        /// (the freshness rule, [`crate::electorate`]).
        freshness: Freshness,
    },
    /// Phase 2b: the sender accepted `slot` in `ballot`.
    AcceptAck {
        /// The accepted ballot.
        ballot: Term,
        /// The accepted slot.
        slot: u64,
    },
    /// Refusal of an `Accept`.
    AcceptNack {
        /// The ballot refused.
        ballot: Term,
        /// The highest ballot the sender promised.
        promised: Term,
    },
    /// The learning message and leader heartbeat: `slot` is committed in
    /// `ballot`, whose leader is alive.
    Commit {
        /// The leader's ballot.
        ballot: Term,
        /// The highest committed slot.
        slot: u64,
        /// The heartbeat counter: 1 for the first Commit of a leadership,
        /// then one more for each repetition.
        heartbeat: u64,
        /// The leader's clock when it sent this, echoed in the acknowledgement.
        sent_at_nanos: u64,
    },
    /// Acknowledgement of a `Commit` (not in the seed: the leader's lease
    /// depends on it), or with `ok == false` its refusal because the sender
    /// promised a higher ballot.
    CommitAck {
        /// The ballot of the `Commit`.
        ballot: Term,
        /// False when `ballot` is below the sender's promise.
        ok: bool,
        /// The highest ballot the sender promised.
        promised: Term,
        /// The `sent_at_nanos` of the `Commit`.
        echo_sent_at_nanos: u64,
    },
    /// A leader leaving office (transfer or graceful stop).
    Resign {
        /// The ballot the sender led.
        ballot: Term,
        /// The node asked to take over at once, if any.
        successor: Option<NodeId>,
    },
}

impl PaxosMessage {
    /// The term (encoded ballot) the message carries: the ballot of requests
    /// and acknowledgements, the sender's promise in refusals.
    pub fn term(&self) -> Term {
        match self {
            PaxosMessage::Prepare { ballot, .. }
            | PaxosMessage::PrepareAck { ballot, .. }
            | PaxosMessage::Accept { ballot, .. }
            | PaxosMessage::AcceptAck { ballot, .. }
            | PaxosMessage::Commit { ballot, .. }
            | PaxosMessage::Resign { ballot, .. } => *ballot,
            PaxosMessage::PrepareNack { promised, .. }
            | PaxosMessage::AcceptNack { promised, .. }
            | PaxosMessage::CommitAck { promised, .. } => *promised,
        }
    }

    /// A short name for logs and metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            PaxosMessage::Prepare { ballot, .. } if *ballot == LOW_BALL => "paxos_poll",
            PaxosMessage::Prepare { .. } => "paxos_prepare",
            PaxosMessage::PrepareAck { .. } => "paxos_prepare_ack",
            PaxosMessage::PrepareNack { .. } => "paxos_prepare_nack",
            PaxosMessage::Accept { .. } => "paxos_accept",
            PaxosMessage::AcceptAck { .. } => "paxos_accept_ack",
            PaxosMessage::AcceptNack { .. } => "paxos_accept_nack",
            PaxosMessage::Commit { .. } => "paxos_commit",
            PaxosMessage::CommitAck { .. } => "paxos_commit_ack",
            PaxosMessage::Resign { .. } => "paxos_resign",
        }
    }

    /// If this message, sent to its destination, grants it a promise in a
    /// ballot: that ballot. A `PrepareAck` is a promise; an `AcceptAck` implies
    /// one (the acceptor's promise is at least the accepted ballot).
    pub fn vote_grant(&self) -> Option<Term> {
        match self {
            PaxosMessage::PrepareAck { ballot, .. } | PaxosMessage::AcceptAck { ballot, .. } => {
                Some(*ballot)
            }
            _ => None,
        }
    }

    /// If this is a leader's heartbeat (a `Commit`): the leader's ballot.
    pub fn heartbeat_term(&self) -> Option<Term> {
        match self {
            PaxosMessage::Commit { ballot, .. } => Some(*ballot),
            _ => None,
        }
    }
}
