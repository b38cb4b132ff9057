//! The replica's durable log on a simulated disk, with torn writes.
//!
//! The real log store (`crates/node/src/log_store.rs`) writes the log
//! operations of one output as a run of checksummed records — a promise, a
//! truncation, one record per entry — and syncs once; a snapshot (installed
//! or taken by compaction) is written whole, atomically. After a crash it
//! replays the records and cuts a torn tail at a record boundary. So a crash
//! during a write leaves a prefix of its records on disk. The simulated disk
//! does the same: each write is pending until its fsync is done; a crash
//! before then keeps a prefix of the pending records (of every write still
//! pending, in order), chosen by the caller. A write counts as durable at
//! the latest when the replica's next output is handled ([`SimDisk::sync_all`]):
//! the replica took another input by then, and counts every earlier write
//! durable from then on (its calling contract), so a crash must not tear it.

use std::collections::VecDeque;
use tenure_core::FencingToken;
use tenure_replica::{Entry, Index, LogOp, Membership, Position, Restored};

/// One record of the journal: the unit a torn write keeps or loses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    /// A promise of a token.
    Promise(FencingToken),
    /// Entries after the index are removed.
    TruncateAfter(Index),
    /// One entry.
    Entry(Entry),
    /// A snapshot up to `last`, written atomically; `keep` keeps the
    /// entries after it (a compaction), else every entry goes (installed).
    Snapshot {
        /// The last entry it covers.
        last: Position,
        /// The configuration in force at `last`.
        membership: Membership,
        /// The state machine's bytes.
        data: Vec<u8>,
        /// Entries after `last` stay.
        keep: bool,
    },
}

impl Record {
    /// The records of one output's log operations, in order.
    pub fn of(ops: &[LogOp]) -> Vec<Record> {
        let mut out = Vec::new();
        for op in ops {
            match op {
                LogOp::Promise(t) => out.push(Record::Promise(*t)),
                LogOp::TruncateAfter(i) => out.push(Record::TruncateAfter(*i)),
                LogOp::Append(entries) => out.extend(entries.iter().cloned().map(Record::Entry)),
                LogOp::InstallSnapshot { last, membership, data } => out.push(Record::Snapshot {
                    last: *last,
                    membership: membership.clone(),
                    data: data.clone(),
                    keep: false,
                }),
                LogOp::Compact { last, membership, data } => out.push(Record::Snapshot {
                    last: *last,
                    membership: membership.clone(),
                    data: data.clone(),
                    keep: true,
                }),
            }
        }
        out
    }
}

/// What a disk holds: the promise, the snapshot and the entries after it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Image {
    /// The highest token promised.
    pub promised: FencingToken,
    /// The latest snapshot.
    pub snapshot: Option<(Position, Vec<u8>)>,
    /// The configuration in force at the snapshot's last entry.
    pub membership: Option<Membership>,
    /// The entries after the snapshot.
    pub entries: Vec<Entry>,
}

impl Image {
    /// Applies one record, as the log store's replay does.
    pub fn apply(&mut self, r: &Record) {
        match r {
            Record::Promise(t) => self.promised = self.promised.max(*t),
            Record::TruncateAfter(i) => self.entries.retain(|e| e.pos.index <= *i),
            Record::Entry(e) => self.entries.push(e.clone()),
            Record::Snapshot { last, membership, data, keep } => {
                self.snapshot = Some((*last, data.clone()));
                self.membership = Some(membership.clone());
                if *keep {
                    self.entries.retain(|e| e.pos.index > last.index);
                } else {
                    self.entries.clear();
                }
            }
        }
    }

    /// What a replica restarts from.
    pub fn restored(&self) -> Restored {
        Restored {
            promised: self.promised,
            snapshot: self.snapshot.clone(),
            entries: self.entries.clone(),
            membership: self.membership.clone(),
        }
    }
}

/// A write whose fsync has not finished.
#[derive(Clone, Debug)]
struct Pending {
    /// Global time its fsync is done.
    done_ns: u64,
    records: Vec<Record>,
}

/// A node's log on disk: what is synced, and the writes still syncing.
#[derive(Clone, Debug, Default)]
pub struct SimDisk {
    synced: Image,
    pending: VecDeque<Pending>,
}

impl SimDisk {
    /// Starts a write of `records`, durable at global time `done_ns`.
    pub fn write(&mut self, done_ns: u64, records: Vec<Record>) {
        if !records.is_empty() {
            self.pending.push_back(Pending { done_ns, records });
        }
    }

    /// Makes the writes whose fsync is done by `now_ns` durable.
    pub fn settle(&mut self, now_ns: u64) {
        while self.pending.front().is_some_and(|p| p.done_ns <= now_ns) {
            let p = self.pending.pop_front().expect("peeked");
            for r in &p.records {
                self.synced.apply(r);
            }
        }
    }

    /// Makes every write made so far durable, whatever its fsync time: the
    /// replica took another input, and its calling contract is that every
    /// write of its earlier outputs is durable by then.
    pub fn sync_all(&mut self) {
        self.settle(u64::MAX);
    }

    /// Records still syncing at `now_ns`.
    pub fn unsynced_records(&self, now_ns: u64) -> usize {
        self.pending.iter().filter(|p| p.done_ns > now_ns).map(|p| p.records.len()).sum()
    }

    /// The disk as the running node sees it: every write made, synced or not.
    pub fn image(&self) -> Image {
        let mut image = self.synced.clone();
        for p in &self.pending {
            for r in &p.records {
                image.apply(r);
            }
        }
        image
    }

    /// The node crashed at `now_ns`: writes already synced stay; of the
    /// records still syncing, the first `keep` reach the disk (a torn write
    /// cut at a record boundary), the rest are lost.
    pub fn crash(&mut self, now_ns: u64, keep: usize) {
        self.settle(now_ns);
        let mut left = keep;
        for p in std::mem::take(&mut self.pending) {
            for r in p.records {
                if left == 0 {
                    return;
                }
                self.synced.apply(&r);
                left -= 1;
            }
        }
    }

    /// The synced image (for tests).
    pub fn synced(&self) -> &Image {
        &self.synced
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tenure_replica::Payload;

    fn e(index: Index, token: u64) -> Entry {
        Entry { pos: Position { token: FencingToken(token), index }, payload: Payload::Noop }
    }

    #[test]
    fn an_append_is_one_record_per_entry_and_a_snapshot_is_one() {
        let ops = vec![
            LogOp::Promise(FencingToken(2)),
            LogOp::Append(vec![e(1, 2), e(2, 2)]),
            LogOp::Compact {
                last: e(1, 2).pos,
                membership: tenure_replica::Membership::bootstrap(&[tenure_core::NodeId(1)]),
                data: vec![1],
            },
        ];
        assert_eq!(Record::of(&ops).len(), 4);
    }

    #[test]
    fn a_crash_keeps_synced_writes_and_a_prefix_of_the_rest() {
        let mut d = SimDisk::default();
        d.write(10, Record::of(&[LogOp::Append(vec![e(1, 1), e(2, 1)])]));
        d.write(20, Record::of(&[LogOp::Promise(FencingToken(3)), LogOp::Append(vec![e(3, 3)])]));
        assert_eq!(d.image().entries.len(), 3, "the running node sees every write");
        assert_eq!(d.unsynced_records(15), 2);
        d.crash(15, 1);
        assert_eq!(d.synced().entries.len(), 2, "the first write was synced");
        assert_eq!(d.synced().promised, FencingToken(3), "one record of the second kept");
        assert_eq!(d.image(), *d.synced(), "nothing pending after a crash");
        d.write(30, Record::of(&[LogOp::TruncateAfter(0), LogOp::Append(vec![e(1, 4)])]));
        d.crash(25, 0);
        assert_eq!(d.synced().entries.len(), 2, "a write torn before its first record");
        d.write(
            40,
            Record::of(&[LogOp::InstallSnapshot {
                last: e(9, 4).pos,
                membership: tenure_replica::Membership::bootstrap(&[tenure_core::NodeId(1)]),
                data: vec![],
            }]),
        );
        d.settle(40);
        assert!(d.synced().entries.is_empty());
        assert_eq!(d.synced().snapshot.as_ref().map(|s| s.0.index), Some(9));
    }
}
