//! What the replica model's nodes keep: a state machine that records what it
//! applies, and a durable log built only from the replica's [`LogOp`]s.

use tenure_core::FencingToken;
pub use tenure_replica::testkit::Recorder;
use tenure_replica::{Entry, LogOp, Membership, Payload, Position, Restored};

/// A node's log as the replica's writes built it: the promise, the latest
/// snapshot and the entries after it. It is all that survives a restart.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Disk {
    /// The highest token promised.
    pub promised: FencingToken,
    /// The latest snapshot: its last entry and the state machine's bytes.
    pub snapshot: Option<(Position, Vec<u8>)>,
    /// The configuration in force at the snapshot's last entry.
    pub membership: Option<Membership>,
    /// The entries after the snapshot, in order.
    pub entries: Vec<Entry>,
}

impl Disk {
    /// Applies one write, as a storage layer would; an error names a write
    /// that no correct replica asks for (the disk is unchanged then).
    pub fn apply(&mut self, op: &LogOp) -> Result<(), String> {
        match op {
            LogOp::Promise(t) if *t < self.promised => {
                return Err(format!("promise {t:?} below {:?}", self.promised));
            }
            LogOp::Promise(t) => self.promised = *t,
            LogOp::TruncateAfter(i) => self.entries.retain(|e| e.pos.index <= *i),
            LogOp::Append(entries) => {
                for e in entries {
                    if e.pos.index != self.last().index + 1 {
                        return Err(format!("append of {:?} after {:?}", e.pos, self.last()));
                    }
                    self.entries.push(e.clone());
                }
            }
            LogOp::InstallSnapshot { last, membership, data } => {
                self.snapshot = Some((*last, data.clone()));
                self.membership = Some(membership.clone());
                self.entries.clear();
            }
            LogOp::Compact { last, membership, data } => {
                self.snapshot = Some((*last, data.clone()));
                self.membership = Some(membership.clone());
                self.entries.retain(|e| e.pos.index > last.index);
            }
        }
        Ok(())
    }

    /// The position of the last entry (the snapshot's, or zero, if none).
    pub fn last(&self) -> Position {
        self.entries.last().map(|e| e.pos).unwrap_or_else(|| self.base())
    }

    /// The last entry the snapshot covers (zero if none).
    pub fn base(&self) -> Position {
        self.snapshot.as_ref().map_or(Position::ZERO, |(p, _)| *p)
    }

    /// True if this log holds the entry at `pos` carrying `command` (`None`:
    /// a no-op). An entry a snapshot covers is held if the snapshot's record
    /// shows it applied (a no-op there only if it is the snapshot's last).
    pub fn holds(&self, pos: Position, command: Option<&[u8]>) -> bool {
        let base = self.base();
        if pos.index > base.index {
            let at = usize::try_from(pos.index - base.index - 1).unwrap_or(usize::MAX);
            return self.entries.get(at).is_some_and(|e| {
                let held = match &e.payload {
                    Payload::Noop | Payload::Members(_) => None,
                    Payload::Command(c) => Some(c.as_slice()),
                };
                e.pos == pos && held == command
            });
        }
        let Some((_, data)) = &self.snapshot else { return false };
        let Ok(record) = Recorder::decode(data) else { return false };
        match command {
            Some(c) => record.command_at(pos) == Some(c),
            // A no-op: nothing applied at its index, and the snapshot's last
            // entry is this one if it ends there.
            None => {
                record.applied.iter().all(|(p, _)| p.index != pos.index)
                    && (pos.index < base.index || pos == base)
            }
        }
    }

    /// What a restart loads.
    pub fn restored(&self) -> Restored {
        Restored {
            promised: self.promised,
            snapshot: self.snapshot.clone(),
            entries: self.entries.clone(),
            membership: self.membership.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tenure_replica::{Index, StateMachine};

    fn pos(token: u64, index: Index) -> Position {
        Position { token: FencingToken(token), index }
    }

    #[test]
    fn the_disk_follows_the_writes_and_refuses_impossible_ones() {
        let e = |t, i, c: Option<u8>| Entry {
            pos: pos(t, i),
            payload: c.map_or(Payload::Noop, |c| Payload::Command(vec![c])),
        };
        let mut d = Disk::default();
        d.apply(&LogOp::Promise(FencingToken(1))).unwrap();
        assert!(d.apply(&LogOp::Promise(FencingToken(0))).is_err());
        d.apply(&LogOp::Append(vec![e(1, 1, None), e(1, 2, Some(7))])).unwrap();
        assert!(d.apply(&LogOp::Append(vec![e(1, 4, None)])).is_err());
        assert!(d.holds(pos(1, 2), Some(&[7])));
        assert!(!d.holds(pos(1, 2), Some(&[8])));
        assert!(!d.holds(pos(1, 2), None));
        d.apply(&LogOp::TruncateAfter(1)).unwrap();
        assert_eq!(d.last(), pos(1, 1));
        let mut r = Recorder::default();
        r.apply(pos(1, 2), &[7]);
        d.apply(&LogOp::Append(vec![e(1, 2, Some(7)), e(2, 3, None)])).unwrap();
        let membership = Membership {
            at: Position::ZERO,
            members: tenure_replica::Members::bootstrap(&[tenure_core::NodeId(1)]),
        };
        d.apply(&LogOp::Compact { last: pos(1, 2), membership, data: r.snapshot() }).unwrap();
        assert_eq!(d.entries.len(), 1);
        assert!(d.holds(pos(1, 2), Some(&[7])), "in the snapshot");
        assert!(d.holds(pos(1, 1), None), "a no-op the snapshot covers");
        assert!(d.holds(pos(2, 3), None));
        assert_eq!(d.restored().entries, d.entries);
    }
}
