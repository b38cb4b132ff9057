//! Death notices: "incarnation N of peer X is dead", from something that
//! knows, and the checks that keep a wrong one out.
//!
//! Each node starts with a new, larger incarnation
//! ([`crate::storage::incarnation`]) and shows it at every handshake. What
//! this node knows of a peer's incarnations ([`Known`]) is kept on the
//! peer's link and decides what a notice may say:
//!
//! * **The next incarnation** ([`Spy::NextIncarnation`]): a handshake that
//!   shows an incarnation higher than the one known proves the known one
//!   dead — the new process holds the data directory's lock, which the
//!   kernel released only when the old one died. The first incarnation seen
//!   of a peer proves nothing (this node may not have seen the earlier
//!   ones); an equal one is the same process; a lower one means the peer's
//!   data directory was rolled back (a restored copy), which is logged, and
//!   from then on no notice about that peer is taken until it shows an
//!   incarnation above every one seen.
//! * **External** ([`Spy::External`]: systemd's `ExecStopPost`, a
//!   supervisor, an operator, through [`crate::NodeHandle::notify_dead`]): taken
//!   only about the incarnation this node knows as the peer's current one.
//!   An older one is stale (nothing to do: that process is gone and this
//!   node already follows a newer one); a higher one was never seen, so
//!   nothing tells it is dead — nor that it is the live process.
//!
//! The trust assumption: an accepted external notice is believed. It comes
//! from an authenticated caller (the HTTP API's admin role) that must know
//! the process is dead — a supervisor that reaped it, systemd after the
//! main process exited, an operator who killed it. A notice about a live
//! process with its current incarnation is accepted like any other, and
//! makes this node stop supporting a live peer: a caller that is not sure
//! must make sure first (kill the process, then report).

use std::fmt;
use tenure_core::NodeId;

/// Who knows that an incarnation is dead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spy {
    /// The peer's next incarnation: a handshake showed `next`.
    NextIncarnation {
        /// The incarnation the handshake showed.
        next: u64,
    },
    /// An authenticated caller ([`crate::NodeHandle::notify_dead`]).
    External,
}

impl fmt::Display for Spy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Spy::NextIncarnation { next } => write!(f, "its next incarnation {next} connected"),
            Spy::External => f.write_str("an authenticated notice"),
        }
    }
}

/// Incarnation `incarnation` of node `peer` is dead, as `by` knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeathNotice {
    /// The peer.
    pub peer: NodeId,
    /// Its incarnation that died.
    pub incarnation: u64,
    /// Who knows.
    pub by: Spy,
}

/// What this node makes of a handshake's incarnation ([`Known::observe`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seen {
    /// The first incarnation seen of the peer: no notice.
    First,
    /// The one known: the same process.
    Same,
    /// Higher than every one seen: `previous` is dead.
    Newer {
        /// The incarnation known before.
        previous: u64,
    },
    /// Lower than one seen: the peer's state went back.
    Older {
        /// The highest incarnation seen.
        highest: u64,
        /// Whether this lower incarnation is news (not the one last seen
        /// below the highest): worth a log line, where a repeat is not.
        news: bool,
    },
}

/// What this node knows of a peer's incarnations.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Known {
    /// The highest incarnation seen at a handshake; 0: none yet.
    highest: u64,
    /// A lower one seen after it (a rolled-back peer), until a higher one
    /// than `highest` shows.
    rolled_back: Option<u64>,
}

impl Known {
    /// The peer's current incarnation: the highest seen, if any.
    pub fn current(&self) -> Option<u64> {
        (self.highest > 0).then_some(self.highest)
    }

    /// Records the incarnation a handshake showed.
    pub fn observe(&mut self, incarnation: u64) -> Seen {
        if self.highest == 0 {
            self.highest = incarnation;
            return Seen::First;
        }
        match incarnation.cmp(&self.highest) {
            std::cmp::Ordering::Greater => {
                let previous = std::mem::replace(&mut self.highest, incarnation);
                self.rolled_back = None;
                Seen::Newer { previous }
            }
            std::cmp::Ordering::Equal => Seen::Same,
            std::cmp::Ordering::Less => {
                let news = self.rolled_back.replace(incarnation) != Some(incarnation);
                Seen::Older { highest: self.highest, news }
            }
        }
    }

    /// Checks an external notice that `incarnation` of `peer` is dead.
    pub fn check(&self, peer: NodeId, incarnation: u64) -> Result<NoticeOutcome, NoticeError> {
        let current = self.current().ok_or(NoticeError::NeverSeen { peer })?;
        if let Some(lower) = self.rolled_back {
            return Err(NoticeError::RolledBack { peer, highest: current, lower });
        }
        match incarnation.cmp(&current) {
            std::cmp::Ordering::Equal => {
                Ok(NoticeOutcome::Accepted { peer, incarnation, was_leader: false })
            }
            std::cmp::Ordering::Less => Ok(NoticeOutcome::Stale { peer, incarnation, current }),
            std::cmp::Ordering::Greater => Err(NoticeError::Unseen { peer, incarnation, current }),
        }
    }
}

/// What became of a death notice this node could judge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoticeOutcome {
    /// About the peer's current incarnation: taken, the election core was
    /// told.
    Accepted {
        /// The peer.
        peer: NodeId,
        /// Its incarnation.
        incarnation: u64,
        /// Whether this node knew the peer as its leader (it then stands at
        /// once, in rank order, instead of waiting for the election timeout).
        was_leader: bool,
    },
    /// About an incarnation older than the current one: that process is
    /// gone and this node already knows a newer one. Nothing to do.
    Stale {
        /// The peer.
        peer: NodeId,
        /// The incarnation the notice named.
        incarnation: u64,
        /// The peer's current incarnation.
        current: u64,
    },
}

/// Why a death notice was refused. Nothing changed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NoticeError {
    /// The notice is about this node itself.
    #[error("node {0} is this node: it is alive, it answered")]
    Myself(NodeId),
    /// The node is not one of this node's peers (voters).
    #[error("node {0} is not a voter of this cluster")]
    NotAVoter(NodeId),
    /// Incarnation numbers start at 1.
    #[error("incarnation 0 does not exist (incarnations are positive)")]
    InvalidIncarnation,
    /// No incarnation of the peer was ever seen.
    #[error(
        "no incarnation of node {peer} was seen yet (it has not connected since this node \
         started), so nothing tells that the one named is its current process"
    )]
    NeverSeen {
        /// The peer.
        peer: NodeId,
    },
    /// The incarnation named is higher than any seen.
    #[error(
        "incarnation {incarnation} of node {peer} was never seen (its current incarnation is \
         {current}): an unknown incarnation cannot be known dead"
    )]
    Unseen {
        /// The peer.
        peer: NodeId,
        /// The incarnation the notice named.
        incarnation: u64,
        /// The peer's current incarnation.
        current: u64,
    },
    /// The peer's incarnations went backwards.
    #[error(
        "node {peer} showed incarnation {lower} after {highest}: its data directory was rolled \
         back, and no notice about it is taken until it starts with an incarnation above \
         {highest}"
    )]
    RolledBack {
        /// The peer.
        peer: NodeId,
        /// The highest incarnation seen.
        highest: u64,
        /// The lower one seen after it.
        lower: u64,
    },
    /// The node is stopping or stopped.
    #[error("the node is stopped")]
    NodeStopped,
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: NodeId = NodeId(2);

    #[test]
    fn only_a_higher_incarnation_after_a_first_one_is_a_death() {
        let mut k = Known::default();
        assert_eq!(k.current(), None);
        assert_eq!(k.observe(10), Seen::First);
        assert_eq!(k.observe(10), Seen::Same);
        assert_eq!(k.observe(12), Seen::Newer { previous: 10 });
        assert_eq!(k.current(), Some(12));
        assert_eq!(k.observe(11), Seen::Older { highest: 12, news: true });
        assert_eq!(k.observe(11), Seen::Older { highest: 12, news: false });
        assert_eq!(k.observe(9), Seen::Older { highest: 12, news: true });
        assert_eq!(k.current(), Some(12), "a lower one never becomes current");
    }

    #[test]
    fn notices_are_taken_only_about_the_current_incarnation() {
        let mut k = Known::default();
        assert_eq!(k.check(P, 1), Err(NoticeError::NeverSeen { peer: P }));
        k.observe(7);
        assert_eq!(
            k.check(P, 7),
            Ok(NoticeOutcome::Accepted { peer: P, incarnation: 7, was_leader: false })
        );
        assert_eq!(k.check(P, 6), Ok(NoticeOutcome::Stale { peer: P, incarnation: 6, current: 7 }));
        assert_eq!(k.check(P, 8), Err(NoticeError::Unseen { peer: P, incarnation: 8, current: 7 }));
    }

    #[test]
    fn a_rolled_back_peer_gets_no_notice_until_it_passes_its_highest() {
        let mut k = Known::default();
        k.observe(7);
        k.observe(3);
        for n in [3, 7, 8] {
            assert_eq!(
                k.check(P, n),
                Err(NoticeError::RolledBack { peer: P, highest: 7, lower: 3 }),
                "{n}"
            );
        }
        assert_eq!(k.observe(7), Seen::Same);
        assert!(k.check(P, 7).is_err(), "the same highest again does not clear it");
        assert_eq!(k.observe(9), Seen::Newer { previous: 7 });
        assert!(matches!(k.check(P, 9), Ok(NoticeOutcome::Accepted { .. })));
    }
}
