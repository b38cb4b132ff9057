//! Identifiers, terms, leader sequence numbers and roles.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A node's identity: a positive integer, unique within a cluster.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct NodeId(pub u64);

impl fmt::Debug for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "n{}", self.0)
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// An election term (a generation clock). Never decreases on a node, across restarts too.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
pub struct Term(pub u64);

impl Term {
    /// The highest valid term, `2^63 - 1`. A message carrying a higher term is
    /// refused, and a node never moves its own term above it: a forged or
    /// corrupted term near `u64::MAX` can neither overflow a node's arithmetic
    /// nor be adopted. At a thousand elections a second a cluster would need
    /// 290 million years to get there.
    pub const MAX_VALID: Term = Term(u64::MAX >> 1);

    /// The next term, unless that would pass [`Term::MAX_VALID`].
    pub fn checked_next(self) -> Option<Term> {
        (self < Term::MAX_VALID).then(|| Term(self.0 + 1))
    }

    /// True if the term is at most [`Term::MAX_VALID`].
    pub fn is_valid(self) -> bool {
        self <= Term::MAX_VALID
    }
}

impl fmt::Debug for Term {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "t{}", self.0)
    }
}

impl fmt::Display for Term {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A Leader Sequence Number: `(term, counter)`, ordered lexicographically.
///
/// Every message a leader sends carries one; the counter starts at 0 when the
/// leader takes office and increases with each message. A follower drops any
/// leader message whose LSN is not newer than the last one it accepted, which
/// discards messages from stale leaders and duplicated or reordered ones.
#[derive(
    Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Debug, Serialize, Deserialize,
)]
pub struct Lsn {
    /// The term of the leader that issued the number.
    pub term: Term,
    /// Position of the message within that leader's tenure.
    pub counter: u64,
}

/// A fencing token: the LSN `(term, 0)` with which a leader took office, reduced to its term.
///
/// Each term has at most one leader and terms only grow, so tokens strictly
/// increase across successive leaders. Storage that remembers the largest token
/// it has seen and rejects smaller ones is protected from deposed leaders
/// (Kleppmann's fencing rule).
#[derive(
    Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Debug, Serialize, Deserialize,
)]
pub struct FencingToken(pub u64);

impl FencingToken {
    /// The token of the leader of `term`.
    pub fn for_term(term: Term) -> Self {
        FencingToken(term.0)
    }
}

impl fmt::Display for FencingToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// What a node is doing in the election.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// Follows a leader, or waits for one.
    Follower,
    /// Polls peers ("would you vote for me in term+1?") without bumping its term
    /// (BlazingMQ's ElectionScouting, Raft's PreVote).
    PreCandidate,
    /// Has bumped its term, voted for itself and asks for votes.
    Candidate,
    /// Holds a majority's support for its term.
    Leader,
}

impl Role {
    /// Lower-case name, as shown by the API.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Follower => "follower",
            Role::PreCandidate => "pre-candidate",
            Role::Candidate => "candidate",
            Role::Leader => "leader",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
