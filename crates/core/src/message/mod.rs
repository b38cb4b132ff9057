//! Messages exchanged between electors.
//!
//! The transport adds the sender's identity (it is authenticated by the
//! connection handshake), so messages do not carry it.

pub mod paxos;
pub mod ranked;

use crate::electorate::Freshness;
use crate::types::{NodeId, Term};
pub use paxos::PaxosMessage;
pub use ranked::RankedMessage;
use serde::{Deserialize, Serialize};

/// A peer-to-peer election message.
///
/// Totally ordered (by variant, then fields) so that model checkers can keep
/// messages in flight in a canonical order.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Message {
    /// ElectionScouting / PreVote: "would you vote for me in `term`?", where
    /// `term` is the sender's term plus one. The sender's own term is unchanged.
    PreVote {
        /// The term the sender would campaign in.
        term: Term,
        /// How fresh the sender's log is: a node whose own is fresher refuses
        /// (the freshness rule, [`crate::electorate`]).
        freshness: Freshness,
    },
    /// Answer to [`Message::PreVote`].
    PreVoteResponse {
        /// The responder's current term.
        term: Term,
        /// The term that was asked about.
        proposed: Term,
        /// Whether the responder would vote for the sender.
        granted: bool,
        /// When refused because the responder still hears a live leader: how long,
        /// in milliseconds of the responder's clock, until its lease on that
        /// leader ends. Lets the pre-candidate retry exactly then.
        lease_remaining_ms: Option<u64>,
    },
    /// A request for a vote in `term`, which the sender has moved to and voted for itself in.
    Vote {
        /// The election term.
        term: Term,
        /// Set when the previous leader handed leadership to the sender (transfer
        /// or graceful stop): voters grant it even while their lease on that
        /// leader still runs.
        transfer: bool,
        /// How fresh the sender's log is: a node whose own is fresher refuses
        /// (the freshness rule, [`crate::electorate`]).
        freshness: Freshness,
    },
    /// Answer to [`Message::Vote`].
    VoteResponse {
        /// The responder's current term.
        term: Term,
        /// Whether the vote was granted.
        granted: bool,
    },
    /// Leader heartbeat: an assertion of leadership.
    Heartbeat {
        /// The leader's term.
        term: Term,
        /// The LSN counter of this message within the leader's term.
        counter: u64,
        /// The leader's clock when it sent this heartbeat, echoed back in the
        /// acknowledgement. Only the leader interprets it.
        sent_at_nanos: u64,
    },
    /// Acknowledgement of a heartbeat, or, with `ok == false`, the "invalid
    /// heartbeat" reply that tells a stale leader about the higher term.
    HeartbeatResponse {
        /// The responder's current term.
        term: Term,
        /// False when the heartbeat came from a stale term.
        ok: bool,
        /// The `sent_at_nanos` of the heartbeat being answered.
        echo_sent_at_nanos: u64,
    },
    /// A leader leaving office (leadership transfer or graceful stop).
    Resign {
        /// The term the sender led.
        term: Term,
        /// The node asked to campaign at once, if any.
        successor: Option<NodeId>,
    },
    /// A message of the two-phase ranked election (`protocol = "ranked"`).
    Ranked(RankedMessage),
    /// A message of Paxos leader election (`protocol = "paxos"`).
    Paxos(PaxosMessage),
}

impl From<RankedMessage> for Message {
    fn from(msg: RankedMessage) -> Self {
        Message::Ranked(msg)
    }
}

impl From<PaxosMessage> for Message {
    fn from(msg: PaxosMessage) -> Self {
        Message::Paxos(msg)
    }
}

impl Message {
    /// The term the message carries.
    pub fn term(&self) -> Term {
        match self {
            Message::PreVote { term, .. }
            | Message::PreVoteResponse { term, .. }
            | Message::Vote { term, .. }
            | Message::VoteResponse { term, .. }
            | Message::Heartbeat { term, .. }
            | Message::HeartbeatResponse { term, .. }
            | Message::Resign { term, .. } => *term,
            Message::Ranked(m) => m.term(),
            Message::Paxos(m) => m.term(),
        }
    }

    /// A short name for logs and metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Message::PreVote { .. } => "pre_vote",
            Message::PreVoteResponse { .. } => "pre_vote_response",
            Message::Vote { .. } => "vote",
            Message::VoteResponse { .. } => "vote_response",
            Message::Heartbeat { .. } => "heartbeat",
            Message::HeartbeatResponse { .. } => "heartbeat_response",
            Message::Resign { .. } => "resign",
            Message::Ranked(m) => m.kind(),
            Message::Paxos(m) => m.kind(),
        }
    }

    /// If this message, sent to its destination, grants the destination a vote
    /// (a promise, for Paxos) in a term: that term. Lets observers such as the
    /// simulator's checkers audit votes without knowing the protocol.
    pub fn vote_grant(&self) -> Option<Term> {
        match self {
            Message::VoteResponse { term, granted: true } => Some(*term),
            Message::Ranked(m) => m.vote_grant(),
            Message::Paxos(m) => m.vote_grant(),
            _ => None,
        }
    }

    /// If this is a leader's heartbeat: the leader's term.
    pub fn heartbeat_term(&self) -> Option<Term> {
        match self {
            Message::Heartbeat { term, .. } => Some(*term),
            Message::Ranked(m) => m.heartbeat_term(),
            Message::Paxos(m) => m.heartbeat_term(),
            _ => None,
        }
    }
}
