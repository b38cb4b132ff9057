//! Stale expiries (docs/ELECTIONS.md, "Why a stale expiry cannot end a
//! session the new leader renewed"): what became of each expiry a ready
//! leader proposed, so a run shows whether the case of the argument was
//! reached, not only that nothing broke.
//!
//! An expiry `e = (C, i)` is *adopted* when it is applied for the first
//! time (anywhere) in a batch that a leadership of a later token committed:
//! the leader of `C` never counted it, it lost office first, and the new
//! leader took `e` into its log in its synchronisation and committed it
//! with its own entries. It is *lost* when index `i` is applied for the
//! first time with another entry: the old leader's log suffix was
//! replaced.
//!
//! Why the first application tells who committed: a replica advances its
//! commit index by counting only as a leader, and only up to an entry of
//! its own token, and applies everything committed within the same input.
//! So the first node to apply index `i` is the leader that counted it, and
//! the last entry of that batch carries its token. A follower applies only
//! what some leader committed, and a snapshot covers only applied entries.

use crate::stats::ElectStats;
use std::collections::BTreeMap;
use tenure_core::FencingToken;
use tenure_kv::LeaseId;
use tenure_replica::{Index, Position};

/// The expiries proposed and not yet decided, and the highest index any
/// node applied.
#[derive(Clone, Debug, Default)]
pub struct ExpiryLedger {
    /// The expiries proposed at each index above `first_applied` (more
    /// than one when leaders after one another proposed there): each
    /// proposer's token and the leases its entry ends.
    pending: BTreeMap<Index, Vec<(FencingToken, Vec<LeaseId>)>>,
    /// The highest index applied by any node so far.
    first_applied: Index,
}

/// What a batch applied decided about the expiries proposed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decided {
    /// The stale expiries among them.
    pub stale: Vec<Stale>,
    /// The leases whose expiry committed (applied for the first time).
    pub expired: Vec<LeaseId>,
}

impl ExpiryLedger {
    /// A leader proposed the expiry of `leases` as entry `pos`.
    pub fn proposed(&mut self, pos: Position, leases: &[LeaseId]) {
        if pos.index > self.first_applied {
            self.pending.entry(pos.index).or_default().push((pos.token, leases.to_vec()));
        }
    }

    /// A node applied `batch` (one output, in index order): decides the
    /// expiries at indices applied for the first time, counts the stale
    /// ones in `stats`, and returns them with the leases whose expiry
    /// committed.
    pub fn applied(&mut self, batch: &[Position], stats: &mut ElectStats) -> Decided {
        let mut out = Decided::default();
        let Some(committer) = batch.last().map(|p| p.token) else { return out };
        for p in batch {
            if p.index <= self.first_applied {
                continue;
            }
            self.first_applied = p.index;
            // Anything below was never applied as itself (it cannot be:
            // first applications come one index at a time); drop it.
            let rest = self.pending.split_off(&(p.index + 1));
            let mut decided = std::mem::replace(&mut self.pending, rest);
            for (token, leases) in decided.remove(&p.index).into_iter().flatten() {
                let proposed = Position { token, index: p.index };
                if token != p.token {
                    stats.stale_expiries_lost += 1;
                    out.stale.push(Stale::Lost { proposed, instead: *p });
                    continue;
                }
                if committer > token {
                    stats.stale_expiries_adopted += 1;
                    out.stale.push(Stale::Adopted { proposed, committer });
                }
                out.expired.extend(leases);
            }
        }
        out
    }
}

/// A stale expiry, decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stale {
    /// Proposed as `proposed`, committed by the leadership of `committer`.
    Adopted {
        /// The expiry's entry.
        proposed: Position,
        /// The token of the leadership that committed it.
        committer: FencingToken,
    },
    /// Proposed as `proposed`; its index holds `instead`.
    Lost {
        /// The expiry's entry.
        proposed: Position,
        /// The entry committed at its index.
        instead: Position,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(token: u64, index: Index) -> Position {
        Position { token: FencingToken(token), index }
    }

    fn lease(id: u64) -> Vec<LeaseId> {
        vec![LeaseId(id)]
    }

    #[test]
    fn an_expiry_is_adopted_lost_or_neither() {
        let mut l = ExpiryLedger::default();
        let mut s = ElectStats::default();
        // Committed by its own leader: neither, and the lease expired.
        l.proposed(pos(3, 5), &lease(1));
        let d = l.applied(&[pos(3, 4), pos(3, 5)], &mut s);
        assert_eq!((s.stale_expiries_adopted, s.stale_expiries_lost), (0, 0));
        assert_eq!(d.expired, lease(1));
        // Proposed under 3 at 6, committed with the no-op of 5: adopted
        // (and expired).
        l.proposed(pos(3, 6), &lease(2));
        // Proposed under 3 at 7, then 7 holds the no-op of 5: lost.
        l.proposed(pos(3, 7), &lease(3));
        let d = l.applied(&[pos(3, 6), pos(5, 7)], &mut s);
        assert_eq!((s.stale_expiries_adopted, s.stale_expiries_lost), (1, 1));
        assert_eq!(d.expired, lease(2));
        // Applying again (a follower, a restart) decides nothing more.
        let d = l.applied(&[pos(3, 6), pos(5, 7)], &mut s);
        assert_eq!((s.stale_expiries_adopted, s.stale_expiries_lost), (1, 1));
        assert_eq!(d, Decided::default());
        // Two leaders proposed at 9; one was lost, the other committed by
        // its own leader.
        l.proposed(pos(5, 9), &lease(4));
        l.proposed(pos(6, 9), &lease(5));
        let d = l.applied(&[pos(6, 8), pos(6, 9)], &mut s);
        assert_eq!((s.stale_expiries_adopted, s.stale_expiries_lost), (1, 2));
        assert_eq!(d.expired, lease(5));
        // Proposed at an index already applied: ignored.
        l.proposed(pos(7, 9), &lease(6));
        let d = l.applied(&[pos(7, 10)], &mut s);
        assert_eq!((s.stale_expiries_adopted, s.stale_expiries_lost), (1, 2));
        assert!(d.expired.is_empty());
    }
}
