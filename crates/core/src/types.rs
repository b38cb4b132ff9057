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

/// The identity of a node's data directory: a random 128-bit number written
/// when the directory is first used and kept for its life (as Kafka's
/// directory id, KIP-853). A node whose directory was wiped comes back under
/// its old id with a new identity, so a cluster can tell it from the voter
/// whose data it no longer holds. Never zero. Shown as 32 hex digits.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct DirectoryId(pub u128);

impl fmt::Display for DirectoryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

impl fmt::Debug for DirectoryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "dir-{:032x}", self.0)
    }
}

/// A text that is not a [`DirectoryId`]: 32 hex digits, not all zero.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a data-directory identity (32 hex digits, not all zero)")]
pub struct BadDirectoryId(pub String);

impl std::str::FromStr for DirectoryId {
    type Err = BadDirectoryId;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || BadDirectoryId(s.to_string());
        if s.len() != 32 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad());
        }
        match u128::from_str_radix(s, 16) {
            Ok(0) | Err(_) => Err(bad()),
            Ok(v) => Ok(DirectoryId(v)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_id_reads_back_from_its_32_hex_digits() {
        let id = DirectoryId(0x0123_4567_89ab_cdef_0011_2233_4455_6677);
        let text = id.to_string();
        assert_eq!(text, "0123456789abcdef0011223344556677");
        assert_eq!(text.parse::<DirectoryId>(), Ok(id));
        assert_eq!(format!("{id:?}"), "dir-0123456789abcdef0011223344556677");
        for bad in [
            "",
            "0123",
            "00000000000000000000000000000000",
            "+123456789abcdef0011223344556677",
            "0123456789abcdef00112233445566778",
            "0123456789abcdef001122334455667g",
        ] {
            assert_eq!(bad.parse::<DirectoryId>(), Err(BadDirectoryId(bad.to_string())), "{bad}");
        }
    }
}
