//! The log as a replica holds it in memory: a base (the last entry a snapshot
//! covers) and the entries after it.

use crate::entry::{Entry, Index, Payload, Position};
use crate::membership::Membership;
use tenure_core::FencingToken;

/// Entries `base.index + 1 ..= last().index`, after the snapshot up to `base`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Log {
    base: Position,
    entries: Vec<Entry>,
    bytes: u64,
    /// The configuration in force at the base.
    base_membership: Membership,
    /// The configuration entries among `entries`, in order.
    changes: Vec<Membership>,
}

fn size(e: &Entry) -> u64 {
    e.payload.size() as u64
}

impl Log {
    /// A log after the snapshot up to `base`, holding `entries` (which must
    /// follow it consecutively).
    /// A log from its base (with the configuration in force there) and the
    /// entries after it.
    pub(crate) fn new(
        base: Position,
        base_membership: Membership,
        entries: Vec<Entry>,
    ) -> Result<Log, String> {
        if base_membership.at.index > base.index {
            return Err(format!(
                "the configuration at {:?} is after the snapshot's last entry {base:?}",
                base_membership.at
            ));
        }
        let mut log = Log {
            base,
            entries: Vec::with_capacity(entries.len()),
            bytes: 0,
            base_membership,
            changes: Vec::new(),
        };
        for e in entries {
            if e.pos.index != log.last().index + 1 || e.pos.token < log.last().token {
                return Err(format!("entry {:?} does not follow {:?}", e.pos, log.last()));
            }
            log.push(e);
        }
        Ok(log)
    }

    /// The configuration in force: the newest the log holds.
    pub(crate) fn membership(&self) -> &Membership {
        self.changes.last().unwrap_or(&self.base_membership)
    }

    /// The configuration in force at `index` (at or after the base).
    /// The configuration before the newest, while the log still holds the
    /// newest as an entry (not when a snapshot carries it).
    pub(crate) fn previous_membership(&self) -> Option<&Membership> {
        let n = self.changes.len();
        match n {
            0 => None,
            1 => Some(&self.base_membership),
            _ => self.changes.get(n - 2),
        }
    }

    pub(crate) fn membership_at(&self, index: Index) -> &Membership {
        self.changes.iter().rev().find(|m| m.at.index <= index).unwrap_or(&self.base_membership)
    }

    /// The last entry a snapshot covers (index 0 if none).
    pub(crate) fn base(&self) -> Position {
        self.base
    }

    /// The position of the last entry (the base if there is none).
    pub(crate) fn last(&self) -> Position {
        self.entries.last().map_or(self.base, |e| e.pos)
    }

    /// The entry at `index`, if held (not compacted, not beyond the end).
    pub(crate) fn get(&self, index: Index) -> Option<&Entry> {
        let k = index.checked_sub(self.base.index + 1)?;
        self.entries.get(usize::try_from(k).ok()?)
    }

    /// The token of the entry at `index` (the base's too), if known.
    pub(crate) fn token_at(&self, index: Index) -> Option<FencingToken> {
        if index == self.base.index {
            return Some(self.base.token);
        }
        self.get(index).map(|e| e.pos.token)
    }

    /// True if the log holds the entry at `pos` (or it is the base).
    pub(crate) fn holds(&self, pos: Position) -> bool {
        self.token_at(pos.index) == Some(pos.token)
    }

    /// Appends `entry`, which must come right after the last one.
    pub(crate) fn push(&mut self, entry: Entry) {
        debug_assert_eq!(entry.pos.index, self.last().index + 1);
        self.bytes += size(&entry);
        if let Payload::Members(members) = &entry.payload {
            self.changes.push(Membership { at: entry.pos, members: members.clone() });
        }
        self.entries.push(entry);
    }

    /// Removes every entry after `index` (at least the base's).
    pub(crate) fn truncate_after(&mut self, index: Index) {
        let keep = usize::try_from(index.saturating_sub(self.base.index)).unwrap_or(usize::MAX);
        if keep < self.entries.len() {
            self.bytes -= self.entries[keep..].iter().map(size).sum::<u64>();
            self.entries.truncate(keep);
            self.changes.retain(|m| m.at.index <= index);
        }
    }

    /// Up to `max_entries` consecutive entries from `from`, at most
    /// `max_bytes` of commands (at least one entry if there is one).
    pub(crate) fn slice(&self, from: Index, max_entries: usize, max_bytes: usize) -> Vec<Entry> {
        let mut out = Vec::new();
        let mut bytes = 0;
        let mut i = from;
        while let Some(e) = self.get(i) {
            if out.len() >= max_entries || (!out.is_empty() && bytes + e.payload.size() > max_bytes)
            {
                break;
            }
            bytes += e.payload.size();
            out.push(e.clone());
            i += 1;
        }
        out
    }

    /// The position before `from` and the batch that follows it (as
    /// [`Log::slice`]), or `None` if that position is compacted or unknown.
    pub(crate) fn batch_from(
        &self,
        from: Index,
        max_entries: usize,
        max_bytes: usize,
    ) -> Option<(Position, Vec<Entry>)> {
        let prev_index = from.checked_sub(1)?;
        let prev = Position { index: prev_index, token: self.token_at(prev_index)? };
        Some((prev, self.slice(from, max_entries, max_bytes)))
    }

    /// Drops the entries up to `last` (held), which a snapshot now covers.
    pub(crate) fn compact(&mut self, last: Position) {
        debug_assert!(self.holds(last));
        let drop = last.index.saturating_sub(self.base.index);
        let drop = usize::try_from(drop).unwrap_or(usize::MAX).min(self.entries.len());
        self.bytes -= self.entries.drain(..drop).map(|e| size(&e)).sum::<u64>();
        self.base = last;
        let folded = self.changes.iter().take_while(|m| m.at.index <= last.index).count();
        if let Some(m) = self.changes.drain(..folded).next_back() {
            self.base_membership = m;
        }
    }

    /// Replaces everything with the snapshot base `last`, under
    /// `membership`, and no entries.
    pub(crate) fn reset(&mut self, last: Position, membership: Membership) {
        self.entries.clear();
        self.bytes = 0;
        self.base = last;
        self.base_membership = membership;
        self.changes.clear();
    }

    /// Command bytes of the entries held.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Entries held (after the base).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::Payload;
    use crate::membership::Members;
    use tenure_core::NodeId;

    fn boot() -> Membership {
        Membership { at: Position::ZERO, members: Members::bootstrap(&[NodeId(1)]) }
    }

    #[test]
    fn the_configuration_in_force_is_the_newest_held() {
        let members =
            |ids: &[u64]| Members::bootstrap(&ids.iter().map(|&i| NodeId(i)).collect::<Vec<_>>());
        let conf = |index: Index, ids: &[u64]| Entry {
            pos: Position { token: FencingToken(1), index },
            payload: Payload::Members(members(ids)),
        };
        let mut log = Log::new(Position::ZERO, boot(), vec![e(1, 1), conf(2, &[1, 2])]).unwrap();
        assert_eq!(log.membership().members, members(&[1, 2]), "used once held, before any commit");
        assert_eq!(log.membership_at(1), &boot());
        log.push(conf(3, &[1, 2, 3]));
        log.push(e(4, 1));
        assert_eq!(log.membership().at.index, 3);
        log.truncate_after(2);
        assert_eq!(log.membership().members, members(&[1, 2]), "a removed entry no longer counts");
        log.push(conf(3, &[1, 2, 4]));
        log.push(e(4, 1));
        log.compact(Position { token: FencingToken(1), index: 4 });
        assert_eq!(log.membership().members, members(&[1, 2, 4]), "a compaction keeps it");
        assert_eq!(log.membership_at(4).at.index, 3);
        log.reset(Position { token: FencingToken(2), index: 9 }, boot());
        assert_eq!(log.membership(), &boot());
        assert!(
            Log::new(
                Position::ZERO,
                Membership { at: Position { token: FencingToken(1), index: 1 }, ..boot() },
                vec![]
            )
            .is_err(),
            "a snapshot's configuration cannot come after its last entry"
        );
    }

    fn e(index: Index, token: u64) -> Entry {
        Entry { pos: Position { token: FencingToken(token), index }, payload: Payload::Noop }
    }

    #[test]
    fn positions_follow_the_base() {
        let base = Position { token: FencingToken(2), index: 10 };
        let mut log = Log::new(base, boot(), vec![e(11, 2), e(12, 3)]).unwrap();
        assert_eq!(log.last(), Position { token: FencingToken(3), index: 12 });
        assert_eq!(log.token_at(10), Some(FencingToken(2)));
        assert_eq!(log.token_at(9), None, "compacted");
        assert_eq!(log.token_at(13), None, "beyond the end");
        assert!(log.holds(Position { token: FencingToken(3), index: 12 }));
        assert!(!log.holds(Position { token: FencingToken(2), index: 12 }));
        log.truncate_after(11);
        assert_eq!(log.last().index, 11);
        log.truncate_after(5);
        assert_eq!(log.last(), base, "never below the base");
        log.push(e(11, 4));
        log.compact(Position { token: FencingToken(4), index: 11 });
        assert_eq!(log.len(), 0);
        assert_eq!(log.last(), Position { token: FencingToken(4), index: 11 });
    }

    #[test]
    fn the_command_bytes_held_follow_every_change() {
        let c = |index: Index, n: usize| Entry {
            pos: Position { token: FencingToken(1), index },
            payload: Payload::Command(vec![0; n]),
        };
        let mut log = Log::new(Position::ZERO, boot(), vec![c(1, 10), c(2, 20)]).unwrap();
        assert_eq!(log.bytes(), 30);
        log.push(c(3, 5));
        log.push(c(4, 7));
        assert_eq!(log.bytes(), 42);
        log.truncate_after(3);
        assert_eq!(log.bytes(), 35);
        log.compact(Position { token: FencingToken(1), index: 2 });
        assert_eq!(log.bytes(), 5);
        log.reset(Position { token: FencingToken(1), index: 9 }, boot());
        assert_eq!(log.bytes(), 0);
    }

    #[test]
    fn a_log_that_skips_an_index_or_goes_back_in_token_is_refused() {
        assert!(Log::new(Position::ZERO, boot(), vec![e(2, 1)]).is_err());
        assert!(Log::new(Position::ZERO, boot(), vec![e(1, 3), e(2, 2)]).is_err());
    }

    #[test]
    fn slices_are_bounded_but_never_empty_when_an_entry_is_there() {
        let big = |i| Entry {
            pos: Position { token: FencingToken(1), index: i },
            payload: Payload::Command(vec![0; 100]),
        };
        let log = Log::new(Position::ZERO, boot(), (1..=5).map(big).collect()).unwrap();
        assert_eq!(log.slice(1, 10, 250).len(), 2);
        assert_eq!(log.slice(1, 10, 50).len(), 1, "one entry even if larger than the bound");
        assert_eq!(log.slice(4, 10, 10_000).len(), 2);
        assert_eq!(log.slice(2, 1, 10_000).len(), 1);
        assert!(log.slice(6, 10, 10_000).is_empty());
    }
}
