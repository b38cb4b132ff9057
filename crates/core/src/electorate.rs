//! Who an elector counts: the voters of the configuration its node's log
//! holds, the learners that follow without counting, and where that
//! configuration was written.
//!
//! The members of a cluster live in its replicated log
//! (`docs/MEMBERSHIP.md`): each configuration is an entry, and a node uses
//! the newest one its log holds, committed or not. The driver hands the
//! elector that configuration as an [`Electorate`] every time it changes
//! ([`crate::Protocol::handle_electorate`]), before the node acknowledges the
//! entry that holds it to anyone. The elector then counts majorities over
//! its voters, sends its heartbeats to every member, and stands only as
//! [`Electorate::stands`] allows.
//!
//! **The freshness rule.** Every request for support (a pre-vote or vote, a
//! ranked claim, a Paxos Prepare or Accept) carries its sender's
//! [`Freshness`]: the fencing token of the last entry its log holds, then
//! the position of the configuration it holds ([`ConfigId`]); a node
//! supports no candidate less fresh than itself. Why it is enough (the
//! argument of Raft's single-server changes, with the token of the last
//! entry in place of Raft's whole-log comparison):
//!
//! * A configuration is appended by a leader only once the configuration
//!   before it committed and the leader committed an entry of its own token
//!   (its no-op): so every configuration committed after a configuration
//!   `C` was appended by a leader that held `C`, and consecutive committed
//!   configurations differ by one voter.
//! * Say `D` committed, appended by the leader of token `T` after its no-op
//!   committed on a majority of the configuration before it, `C`. Every
//!   node of that majority holds an entry of token `T` (or later) and
//!   refuses a candidate whose last entry is older than `T`. A candidate
//!   whose last entry is of token `T` or later holds `D` (the leader of `T`
//!   wrote `D` before any later leader took office, and every later leader
//!   held it), unless its last entry is of token `T` itself and it missed
//!   `D`: then a majority of `D`'s voters, which hold `D`, refuse it by the
//!   configuration's position. A candidate needs a majority of its own
//!   configuration, which is `C` or older (then its majority meets `C`'s
//!   majority of holders of `T`: single changes, and configurations older
//!   than `C` are refused by `C`'s majority the same way) or `D`.
//! * So a winner holds every committed configuration, and two candidates
//!   that can both win one term hold the same configuration or two
//!   consecutive ones, whose majorities share a node that votes once.
//!
//! Comparing the configurations' positions alone is not enough: two
//! leaders of different tokens may each append a change to the same
//! committed configuration ("siblings", differing by two voters); a node
//! that holds neither, but an entry of the later leader, must refuse the
//! holder of the earlier sibling. The model checker found that run
//! (`crates/model/tests/membership.rs`: two leaders at once).

use crate::types::{FencingToken, NodeId};
use serde::{Deserialize, Serialize};
use std::fmt;

/// The most members (voters and learners) a configuration holds.
pub const MAX_MEMBERS: usize = 2 * crate::MAX_VOTERS;

/// Where a configuration of members was written: the position of its entry
/// in the replicated log (the fencing token that wrote it, then its index),
/// [`ConfigId::BOOTSTRAP`] for the bootstrap list. Ordered as log positions
/// are: a later position is a newer configuration.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct ConfigId {
    /// The token of the leadership that wrote the entry.
    pub token: FencingToken,
    /// The entry's index in the log.
    pub index: u64,
}

impl ConfigId {
    /// The bootstrap list's position, before any configuration entry.
    pub const BOOTSTRAP: ConfigId = ConfigId { token: FencingToken(0), index: 0 };
}

impl fmt::Display for ConfigId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.index, self.token)
    }
}

/// How fresh a node's log is, for the freshness rule (see the module
/// documentation): the fencing token of its last entry, then the position
/// of its configuration; ordered in that order.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct Freshness {
    /// The token of the last entry the log holds (0: none).
    pub last_token: FencingToken,
    /// Where its configuration was written.
    pub config: ConfigId,
}

impl Freshness {
    /// An empty log that counts by the bootstrap list.
    pub const BOOTSTRAP: Freshness =
        Freshness { last_token: FencingToken(0), config: ConfigId::BOOTSTRAP };
}

impl fmt::Display for Freshness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "last entry of token {}, configuration {}", self.last_token, self.config)
    }
}

/// The members an elector counts over (see the module documentation).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Electorate {
    /// Where the configuration was written.
    pub id: ConfigId,
    /// The fencing token of the last entry the node's log holds (at least
    /// `id.token`).
    pub last_token: FencingToken,
    /// The voters, in preference order: when the leader fails, the earliest
    /// surviving voter stands first.
    pub voters: Vec<NodeId>,
    /// The members that follow the leader without counting.
    pub learners: Vec<NodeId>,
    /// Members of the configuration before this one that this one removes
    /// (one at most: changes are one at a time). They count for nothing,
    /// but their messages are still heard and a leader's heartbeats reach
    /// them, until the next configuration: a leader that is committing its
    /// own removal leads the others until the change commits, and then its
    /// resignation (a handover) is heard; a removed node that follows the
    /// leader stays quiet.
    pub departing: Vec<NodeId>,
    /// Whether this node belongs to the configuration by its own identity
    /// (a voter, a learner or the departing member, and, for a node that
    /// was added by a change, named with its own data directory). A node
    /// that does not grants no support (no vote, no promise): a node whose
    /// disk was wiped and that came back under its id must not be counted
    /// as the voter it was, by a stale candidate or while it replays the
    /// old configurations that named that voter.
    pub member: bool,
    /// Whether this node may stand for election: it is a voter, or the
    /// configuration removes it and is not known to be committed (it may be
    /// needed to commit its own removal: Raft's rule for a server outside
    /// its newest configuration, which then counts only the others). A
    /// learner, and a node whose removal committed, never stand.
    pub stands: bool,
}

impl Electorate {
    /// The bootstrap configuration: these voters, in this order, no
    /// learners; `me` stands if it is one of them.
    pub fn bootstrap(me: NodeId, voters: &[NodeId]) -> Electorate {
        Electorate {
            id: ConfigId::BOOTSTRAP,
            last_token: FencingToken(0),
            voters: voters.to_vec(),
            learners: Vec::new(),
            departing: Vec::new(),
            stands: voters.contains(&me),
            member: voters.contains(&me),
        }
    }

    /// How fresh the node's log is, for the freshness rule.
    pub fn freshness(&self) -> Freshness {
        Freshness { last_token: self.last_token, config: self.id }
    }

    /// True if `id` votes.
    pub fn is_voter(&self, id: NodeId) -> bool {
        self.voters.contains(&id)
    }

    /// True if `id` is a voter or a learner.
    pub fn is_member(&self, id: NodeId) -> bool {
        self.voters.contains(&id) || self.learners.contains(&id)
    }

    /// True if `newer` only says that the log grew (a later last entry, the
    /// same configuration): the votes and claims counted over this one
    /// still count over it. A candidate whose log grows while it stands is
    /// fresher than the freshness it asked support with, which the voters
    /// checked against their own: its round goes on (aborting it cost a
    /// transfer whose target received the leader's no-op after it had
    /// voted for itself a whole election timeout).
    pub fn only_grew(&self, newer: &Electorate) -> bool {
        self.id == newer.id
            && self.voters == newer.voters
            && self.learners == newer.learners
            && self.departing == newer.departing
            && self.member == newer.member
            && self.stands == newer.stands
            && self.last_token <= newer.last_token
    }

    /// Why this cannot be an electorate, if it cannot: no voters, more than
    /// [`crate::MAX_VOTERS`], node id 0, or an id listed twice.
    pub fn check(&self) -> Result<(), String> {
        if self.voters.is_empty() {
            return Err("a configuration without voters".into());
        }
        if self.last_token < self.id.token {
            return Err(format!(
                "a log whose last entry (token {}) is older than its configuration ({})",
                self.last_token, self.id
            ));
        }
        if self.voters.len() + self.learners.len() > MAX_MEMBERS {
            return Err(format!("more than {MAX_MEMBERS} members"));
        }
        if self.voters.len() > crate::MAX_VOTERS {
            return Err(format!("{} voters, above {}", self.voters.len(), crate::MAX_VOTERS));
        }
        let mut all: Vec<NodeId> =
            self.voters.iter().chain(&self.learners).chain(&self.departing).copied().collect();
        if let Some(v) = all.iter().find(|v| v.0 == 0 || v.0 > crate::MAX_NODE_ID) {
            return Err(format!(
                "node id {v} in a configuration (ids are 1 to {})",
                crate::MAX_NODE_ID
            ));
        }
        all.sort_unstable();
        if let Some(w) = all.windows(2).find(|w| w[0] == w[1]) {
            return Err(format!("node {} listed twice in a configuration", w[0]));
        }
        Ok(())
    }
}

impl fmt::Display for Electorate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ids = |v: &[NodeId]| v.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(",");
        write!(
            f,
            "voters [{}] learners [{}] at {} (last entry of token {})",
            ids(&self.voters),
            ids(&self.learners),
            self.id,
            self.last_token
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configurations_order_as_log_positions() {
        let at = |token, index| ConfigId { token: FencingToken(token), index };
        assert!(ConfigId::BOOTSTRAP < at(1, 1));
        assert!(at(1, 9) < at(2, 3), "a later token is newer whatever the index");
        assert!(at(2, 3) < at(2, 4));
        let fresh = |t, c| Freshness { last_token: FencingToken(t), config: c };
        assert!(fresh(1, at(1, 3)) < fresh(2, at(1, 2)), "a later last entry first");
        assert!(fresh(2, at(1, 2)) < fresh(2, at(2, 4)));
    }

    #[test]
    fn a_bad_electorate_says_why() {
        let e = Electorate::bootstrap(NodeId(1), &[NodeId(1), NodeId(2)]);
        assert_eq!(e.check(), Ok(()));
        assert!(e.stands && e.is_voter(NodeId(2)) && !e.is_voter(NodeId(3)));
        let mut twice = e.clone();
        twice.learners.push(NodeId(2));
        assert!(twice.check().unwrap_err().contains("node 2 listed twice"));
        let mut back = e.clone();
        back.departing.push(NodeId(1));
        assert!(back.check().unwrap_err().contains("node 1 listed twice"));
        let none = Electorate { voters: vec![], ..e.clone() };
        assert!(none.check().is_err());
        assert!(!Electorate::bootstrap(NodeId(9), &[NodeId(1)]).stands);
    }
}
