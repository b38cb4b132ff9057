//! Messages of the two-phase ranked election (`protocol = "ranked"`, the ELECT/VOTE paper).

use crate::electorate::Freshness;
use crate::types::{Lsn, NodeId, Term};
use serde::{Deserialize, Serialize};

/// Messages of the ranked protocol.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum RankedMessage {
    /// The ELECT/VOTE paper's ELECT(id, term, msg): the sender is VOTING and reports its claim.
    /// The transport supplies the id.
    Elect {
        /// The sender's current term (the highest it knows; votes go above it).
        term: Term,
        /// The latest leader message the sender saw (the ELECT/VOTE paper's "term, msg"); for
        /// a former leader, its latest message a majority acknowledged. `None`
        /// after a restart.
        claim: Option<Lsn>,
        /// The sender's clock when it sent this message; echoed in a `Vote`, it
        /// bounds the lease the sender may take if elected.
        sent_at_nanos: u64,
        /// Set when the leader of this term resigned and named the sender its
        /// successor: the claim ranks first, and voters whose lease is on that
        /// leader drop it.
        transfer: Option<Term>,
        /// How long after sending this the sender will vote, in nanoseconds of
        /// its clock. Electors that start VOTING at different times (their
        /// leases on the old leader ended at different times) vote no earlier
        /// than every claimant they know of, so they rank the same slate.
        vote_in_nanos: u64,
        /// How fresh the sender's log is: a node whose own is fresher refuses
        /// (the freshness rule, [`crate::electorate`]).
        freshness: Freshness,
        /// Set when the sender's configuration removes it (it stands only to
        /// commit its own removal): among equal claims, voters rank it last.
        leaving: bool,
        /// False when the sender may not stand (a learner, a removed node):
        /// it takes part in the poll and votes, but nobody votes for it.
        /// Voters of a newer configuration that count it see it take part.
        stands: bool,
    },
    /// The ELECT/VOTE paper's VOTE(term, msg): the sender votes for the destination in `term`.
    Vote {
        /// The term voted in: above every term the voter knew.
        term: Term,
        /// The `sent_at_nanos` of the destination's `Elect` the vote answers.
        echo_sent_at_nanos: u64,
    },
    /// The ELECT/VOTE paper's LEAD: the leader's heartbeat and assertion of leadership.
    Lead {
        /// The leader's term.
        term: Term,
        /// The message number within the term (the LSN counter).
        counter: u64,
        /// The leader's clock when it sent this message, echoed by `LeadAck`.
        sent_at_nanos: u64,
    },
    /// Acknowledgement of a `Lead` (not in the seed): what keeps the leader's
    /// lease alive. With `ok == false`, the `Lead` was obsolete and `term` is
    /// the responder's higher term.
    LeadAck {
        /// The responder's term.
        term: Term,
        /// False when the `Lead` came from a lower term than the responder's.
        ok: bool,
        /// The `counter` of the `Lead` answered.
        counter: u64,
        /// The `sent_at_nanos` of the `Lead` answered.
        echo_sent_at_nanos: u64,
    },
    /// A leader leaving office (leadership transfer or graceful stop).
    Resign {
        /// The term the sender led.
        term: Term,
        /// The node asked to stand at once, if any.
        successor: Option<NodeId>,
    },
}

impl RankedMessage {
    /// The term the message carries.
    pub fn term(&self) -> Term {
        match self {
            RankedMessage::Elect { term, .. }
            | RankedMessage::Vote { term, .. }
            | RankedMessage::Lead { term, .. }
            | RankedMessage::LeadAck { term, .. }
            | RankedMessage::Resign { term, .. } => *term,
        }
    }

    /// A short name for logs and metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            RankedMessage::Elect { .. } => "ranked_elect",
            RankedMessage::Vote { .. } => "ranked_vote",
            RankedMessage::Lead { .. } => "ranked_lead",
            RankedMessage::LeadAck { .. } => "ranked_lead_ack",
            RankedMessage::Resign { .. } => "ranked_resign",
        }
    }

    /// If this message, sent to its destination, grants it a vote in a term:
    /// that term. Every `Vote` does.
    pub fn vote_grant(&self) -> Option<Term> {
        match self {
            RankedMessage::Vote { term, .. } => Some(*term),
            _ => None,
        }
    }

    /// If this is a leader's heartbeat (`Lead`): the leader's term.
    pub fn heartbeat_term(&self) -> Option<Term> {
        match self {
            RankedMessage::Lead { term, .. } => Some(*term),
            _ => None,
        }
    }

    /// True for the messages of the election itself (`Elect` and `Vote`), the
    /// ones the ELECT/VOTE paper bounds to two per server per round trip.
    pub fn is_election_message(&self) -> bool {
        matches!(self, RankedMessage::Elect { .. } | RankedMessage::Vote { .. })
    }
}
