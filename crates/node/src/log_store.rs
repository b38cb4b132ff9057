//! The replicated log on disk: a journal of log operations, checksummed
//! record by record, and the latest snapshot in a file of its own.
//!
//! * `log/journal` holds records `[length u32][crc32 u32][postcard record]`:
//!   promises, truncations, entries and a marker of the snapshot the journal
//!   starts from. [`LogStore::write`] appends the records of one output and
//!   syncs once (group commit: every write of the batch is durable after one
//!   `fdatasync`).
//! * `log/snapshot` holds `[magic][length u64][crc32 u32][postcard snapshot]`,
//!   replaced atomically (temporary file, fsync, rename, directory fsync).
//! * A compaction or an installed snapshot writes the snapshot file first,
//!   then a fresh journal (temporary file, fsync, rename) that starts from
//!   it: at every moment the directory replays to a state the replica wrote.
//!
//! On open the journal is replayed. A damaged record at the very end (a write
//! torn by a crash: a short header, a length beyond the end of the file, or a
//! checksum that fails on the last record) is cut off with a warning; those
//! bytes were never acknowledged to anyone, because the replica sends nothing
//! before its write is synced. A damaged record followed by more data is not
//! a torn write: the node refuses to start, naming the file and offset.

use crate::sync::lock;
use serde::{Deserialize, Serialize};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tenure_core::FencingToken;
use tenure_replica::{Entry, Index, LogOp, Position, Restored};
use tracing::debug;

/// The largest record accepted on replay (an entry with its command, or a
/// marker): larger lengths are damage.
pub const MAX_RECORD_BYTES: usize = 16 * 1024 * 1024;

/// The snapshot file's first bytes.
const SNAPSHOT_MAGIC: &[u8; 8] = b"TNRSNAP1";

/// One journal record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
enum Record {
    /// The promise of a token.
    Promise(FencingToken),
    /// Entries after this index are removed.
    TruncateAfter(Index),
    /// An entry.
    Entry(Entry),
    /// The journal starts from the snapshot up to this position.
    Base(Position),
}

#[derive(Serialize, Deserialize)]
struct SnapshotFile {
    last: Position,
    data: Vec<u8>,
}

/// Why the log cannot be opened.
#[derive(Debug, thiserror::Error)]
pub enum LogStoreError {
    /// The file system refused.
    #[error("cannot use {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// A record before the end of the journal, or the snapshot, is damaged.
    #[error("{path} is damaged at byte {offset}: {what}; the node stops rather than forget entries it may have acknowledged (restore the data directory from a replica of this node, or remove it and let the node catch up from the leader as a new member)")]
    Damaged {
        /// The file.
        path: PathBuf,
        /// Where the damage starts.
        offset: u64,
        /// What is wrong.
        what: String,
    },
}

/// What opening the log found, besides its contents.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OpenReport {
    /// Bytes cut off the end of the journal (a torn write), if any.
    pub torn_tail: Option<u64>,
    /// Records replayed.
    pub records: u64,
}

/// The replicated log's files in one directory.
#[derive(Debug)]
pub struct LogStore {
    dir: PathBuf,
    journal: Mutex<File>,
}

impl LogStore {
    /// Opens (creating if missing) the log in `dir` and replays it.
    pub fn open(dir: &Path) -> Result<(LogStore, Restored, OpenReport), LogStoreError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| LogStoreError::Io { path, source }
        };
        fs::create_dir_all(dir).map_err(io(dir))?;
        let snapshot = read_snapshot(&dir.join("snapshot"))?;
        let journal_path = dir.join("journal");
        let mut restored = Restored {
            promised: FencingToken(0),
            snapshot: snapshot.map(|s| (s.last, s.data)),
            entries: Vec::new(),
        };
        let mut report = OpenReport::default();
        let bytes = match fs::read(&journal_path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(io(&journal_path)(e)),
        };
        let good = replay(&journal_path, &bytes, &mut restored, &mut report)?;
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&journal_path)
            .map_err(io(&journal_path))?;
        if good < bytes.len() as u64 {
            // A torn write: cut it off before anything is appended.
            file.set_len(good).map_err(io(&journal_path))?;
            file.sync_data().map_err(io(&journal_path))?;
            report.torn_tail = Some(bytes.len() as u64 - good);
        }
        if bytes.is_empty() {
            // The journal may have just been created: make its name durable.
            sync_dir(dir).map_err(io(dir))?;
        }
        Ok((LogStore { dir: dir.to_path_buf(), journal: Mutex::new(file) }, restored, report))
    }

    /// Makes the operations of one output durable, in order, with one sync
    /// of the journal (plus the snapshot file's, when one is written).
    pub fn write(&self, ops: &[LogOp]) -> io::Result<()> {
        let mut buf = Vec::new();
        for op in ops {
            match op {
                LogOp::Promise(t) => frame(&mut buf, &Record::Promise(*t)),
                LogOp::TruncateAfter(i) => frame(&mut buf, &Record::TruncateAfter(*i)),
                LogOp::Append(entries) => {
                    for e in entries {
                        frame(&mut buf, &Record::Entry(e.clone()));
                    }
                }
                LogOp::InstallSnapshot { last, data } | LogOp::Compact { last, data } => {
                    // Flush what came before, then start over from the snapshot:
                    // a compaction keeps the entries after it, an installed
                    // snapshot replaces them all. Those go first, with what
                    // came before: after a crash between the snapshot file and
                    // the journal's rewrite, the old journal's entries after
                    // the snapshot (another history) must not come back.
                    let keep = matches!(op, LogOp::Compact { .. });
                    if !keep {
                        frame(&mut buf, &Record::TruncateAfter(last.index));
                    }
                    self.append(&buf)?;
                    buf.clear();
                    let start = Instant::now();
                    self.write_snapshot(*last, data)?;
                    let snapshot_done = Instant::now();
                    self.rewrite_journal(*last, keep)?;
                    debug!(
                        index = last.index,
                        bytes = data.len(),
                        snapshot_ms = ms(snapshot_done - start),
                        journal_ms = ms(snapshot_done.elapsed()),
                        "wrote a snapshot and rewrote the journal"
                    );
                }
            }
        }
        self.append(&buf)
    }

    fn append(&self, buf: &[u8]) -> io::Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        let mut file = lock(&self.journal);
        file.write_all(buf)?;
        file.sync_data()
    }

    fn write_snapshot(&self, last: Position, data: &[u8]) -> io::Result<()> {
        let body = postcard::to_allocvec(&SnapshotFile { last, data: data.to_vec() })
            .map_err(io::Error::other)?;
        let mut out = Vec::with_capacity(body.len() + 20);
        out.extend_from_slice(SNAPSHOT_MAGIC);
        out.extend_from_slice(&(body.len() as u64).to_le_bytes());
        out.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
        out.extend_from_slice(&body);
        let encoded = Instant::now();
        replace_file(&self.dir, "snapshot", &out)?;
        debug!(sync_ms = ms(encoded.elapsed()), "snapshot file written and synced");
        Ok(())
    }

    /// Replaces the journal with one that starts from the snapshot up to
    /// `base`: the promise, and (`keep`) the entries after it.
    fn rewrite_journal(&self, base: Position, keep: bool) -> io::Result<()> {
        let mut file = lock(&self.journal);
        let t0 = Instant::now();
        let path = self.dir.join("journal");
        let bytes = fs::read(&path)?;
        // The snapshot just written is the base (its data is not needed here).
        let mut state = Restored {
            promised: FencingToken(0),
            snapshot: Some((base, Vec::new())),
            entries: Vec::new(),
        };
        replay(&path, &bytes, &mut state, &mut OpenReport::default()).map_err(io::Error::other)?;
        let mut buf = Vec::new();
        frame(&mut buf, &Record::Base(base));
        frame(&mut buf, &Record::Promise(state.promised));
        if keep {
            for e in state.entries.iter().filter(|e| e.pos.index > base.index) {
                frame(&mut buf, &Record::Entry(e.clone()));
            }
        }
        let t1 = Instant::now();
        replace_file(&self.dir, "journal", &buf)?;
        debug!(
            read_replay_ms = ms(t1 - t0),
            bytes = bytes.len(),
            write_sync_ms = ms(t1.elapsed()),
            "journal rewritten"
        );
        *file = OpenOptions::new().append(true).open(path)?;
        Ok(())
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn frame(buf: &mut Vec<u8>, record: &Record) {
    let body = postcard::to_allocvec(record).expect("a record always serializes");
    buf.extend_from_slice(&(body.len() as u32).to_le_bytes());
    buf.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
    buf.extend_from_slice(&body);
}

/// Replays the journal into `restored`; returns the length of its good part.
fn replay(
    path: &Path,
    bytes: &[u8],
    restored: &mut Restored,
    report: &mut OpenReport,
) -> Result<u64, LogStoreError> {
    let mut at = 0usize;
    let damaged = |offset: usize, what: &str| LogStoreError::Damaged {
        path: path.to_path_buf(),
        offset: offset as u64,
        what: what.to_string(),
    };
    while at < bytes.len() {
        let rest = &bytes[at..];
        if rest.len() < 8 {
            return Ok(at as u64); // a torn header
        }
        let len = u32::from_le_bytes(rest[..4].try_into().expect("4 bytes")) as usize;
        let crc = u32::from_le_bytes(rest[4..8].try_into().expect("4 bytes"));
        if len == 0 || len > MAX_RECORD_BYTES {
            // Zeroes to the end are space the file system gave a write that
            // never completed; anything else is damage.
            return if is_zeroes(rest) {
                Ok(at as u64)
            } else {
                Err(damaged(at, "an impossible record length"))
            };
        }
        if rest.len() < 8 + len {
            return Ok(at as u64); // a torn record
        }
        let body = &rest[8..8 + len];
        let end = at + 8 + len;
        if crc32fast::hash(body) != crc {
            if end == bytes.len() || is_zeroes(&bytes[at..]) {
                return Ok(at as u64); // the last record, torn
            }
            return Err(damaged(at, "a checksum mismatch before the end of the journal"));
        }
        let record: Record =
            postcard::from_bytes(body).map_err(|e| damaged(at, &format!("not a record: {e}")))?;
        apply_record(restored, record).map_err(|what| damaged(at, &what))?;
        report.records += 1;
        at = end;
    }
    Ok(at as u64)
}

fn is_zeroes(bytes: &[u8]) -> bool {
    bytes.iter().all(|&b| b == 0)
}

fn apply_record(r: &mut Restored, record: Record) -> Result<(), String> {
    let base = r.snapshot.as_ref().map_or(Position::ZERO, |(p, _)| *p);
    match record {
        Record::Promise(t) => r.promised = r.promised.max(t),
        Record::Base(p) => {
            if p > base {
                // The journal starts after a snapshot newer than the one on
                // disk: the snapshot file was lost or replaced.
                return Err(format!(
                    "the journal starts after {p:?}, but the snapshot holds {base:?}"
                ));
            }
        }
        Record::TruncateAfter(i) => r.entries.retain(|e| e.pos.index <= i),
        Record::Entry(e) => {
            if e.pos.index <= base.index {
                return Ok(()); // covered by the snapshot (a compaction cut short)
            }
            let last = r.entries.last().map_or(base.index, |l| l.pos.index);
            if e.pos.index != last + 1 {
                return Err(format!("entry {:?} does not follow index {last}", e.pos));
            }
            r.entries.push(e);
        }
    }
    Ok(())
}

fn read_snapshot(path: &Path) -> Result<Option<SnapshotFile>, LogStoreError> {
    let mut bytes = Vec::new();
    match File::open(path) {
        Ok(mut f) => f
            .read_to_end(&mut bytes)
            .map_err(|source| LogStoreError::Io { path: path.to_path_buf(), source })?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(LogStoreError::Io { path: path.to_path_buf(), source }),
    };
    let damaged = |what: &str| LogStoreError::Damaged {
        path: path.to_path_buf(),
        offset: 0,
        what: what.to_string(),
    };
    if bytes.len() < 20 || &bytes[..8] != SNAPSHOT_MAGIC {
        return Err(damaged("not a snapshot file"));
    }
    let len = u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes"));
    let crc = u32::from_le_bytes(bytes[16..20].try_into().expect("4 bytes"));
    let body = &bytes[20..];
    if body.len() as u64 != len || crc32fast::hash(body) != crc {
        return Err(damaged("a length or checksum mismatch"));
    }
    postcard::from_bytes(body).map(Some).map_err(|e| damaged(&e.to_string()))
}

/// Replaces `dir/name` with `bytes` atomically and durably.
fn replace_file(dir: &Path, name: &str, bytes: &[u8]) -> io::Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    fs::rename(&tmp, dir.join(name))?;
    sync_dir(dir)
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tenure_replica::Payload;

    fn e(index: Index, token: u64, c: &str) -> Entry {
        Entry {
            pos: Position { token: FencingToken(token), index },
            payload: Payload::Command(c.as_bytes().to_vec()),
        }
    }

    #[test]
    fn what_is_written_is_what_is_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let (store, r, _) = LogStore::open(dir.path()).unwrap();
        assert_eq!(r, Restored::default());
        store
            .write(&[
                LogOp::Promise(FencingToken(3)),
                LogOp::Append(vec![e(1, 3, "a"), e(2, 3, "b")]),
            ])
            .unwrap();
        store.write(&[LogOp::TruncateAfter(1), LogOp::Append(vec![e(2, 4, "c")])]).unwrap();
        drop(store);
        let (_, r, report) = LogStore::open(dir.path()).unwrap();
        assert_eq!(r.promised, FencingToken(3));
        assert_eq!(r.entries, vec![e(1, 3, "a"), e(2, 4, "c")]);
        assert_eq!(report.torn_tail, None);
        assert_eq!(report.records, 5);
    }

    #[test]
    fn a_torn_tail_is_cut_off_and_damage_before_it_stops_the_node() {
        let dir = tempfile::tempdir().unwrap();
        let (store, _, _) = LogStore::open(dir.path()).unwrap();
        store.write(&[LogOp::Append(vec![e(1, 1, "a"), e(2, 1, "b"), e(3, 1, "c")])]).unwrap();
        drop(store);
        let path = dir.path().join("journal");
        let full = fs::read(&path).unwrap();
        // A crash in the middle of the last record.
        fs::write(&path, &full[..full.len() - 3]).unwrap();
        let (_, r, report) = LogStore::open(dir.path()).unwrap();
        assert_eq!(r.entries.len(), 2);
        assert!(report.torn_tail.is_some());
        assert_eq!(
            fs::read(&path).unwrap().len(),
            full.len() - full.len() / 3,
            "cut at a record boundary"
        );
        // A flipped bit in the first record, with records after it.
        let mut bad = fs::read(&path).unwrap();
        bad[9] ^= 0x40;
        fs::write(&path, &bad).unwrap();
        let err = LogStore::open(dir.path()).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("journal is damaged at byte 0"), "{text}");
        assert_eq!(fs::read(&path).unwrap(), bad, "nothing is overwritten");
        // Zeroes after the good records (a preallocated tail) are a torn write.
        let mut zeroed = full.clone();
        zeroed.extend_from_slice(&[0; 64]);
        fs::write(&path, &zeroed).unwrap();
        let (_, r, report) = LogStore::open(dir.path()).unwrap();
        assert_eq!(r.entries.len(), 3);
        assert_eq!(report.torn_tail, Some(64));
    }

    #[test]
    fn a_compaction_keeps_the_snapshot_and_the_entries_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let (store, _, _) = LogStore::open(dir.path()).unwrap();
        let entries: Vec<Entry> = (1..=10).map(|i| e(i, 1, "x")).collect();
        store.write(&[LogOp::Promise(FencingToken(1)), LogOp::Append(entries)]).unwrap();
        let last = Position { token: FencingToken(1), index: 7 };
        store.write(&[LogOp::Compact { last, data: b"state@7".to_vec() }]).unwrap();
        store.write(&[LogOp::Append(vec![e(11, 2, "y")])]).unwrap();
        drop(store);
        let (_, r, _) = LogStore::open(dir.path()).unwrap();
        assert_eq!(r.snapshot, Some((last, b"state@7".to_vec())));
        assert_eq!(r.entries.iter().map(|e| e.pos.index).collect::<Vec<_>>(), [8, 9, 10, 11]);
        assert_eq!(r.promised, FencingToken(1));
        let journal = fs::metadata(dir.path().join("journal")).unwrap().len();
        assert!(journal < 200, "the journal was rewritten: {journal} bytes");
    }

    #[test]
    fn a_crash_between_an_installed_snapshot_and_the_journal_brings_back_no_other_history() {
        let dir = tempfile::tempdir().unwrap();
        let (store, _, _) = LogStore::open(dir.path()).unwrap();
        let entries: Vec<Entry> = (1..=5).map(|i| e(i, 1, "old")).collect();
        store.write(&[LogOp::Promise(FencingToken(1)), LogOp::Append(entries)]).unwrap();
        // The journal's rewrite fails after the snapshot file is written (as a
        // crash there would leave it): its temporary file cannot be created.
        fs::create_dir(dir.path().join("journal.tmp")).unwrap();
        let last = Position { token: FencingToken(2), index: 3 };
        let install = LogOp::InstallSnapshot { last, data: b"state@3".to_vec() };
        assert!(store.write(&[install]).is_err());
        drop(store);
        fs::remove_dir(dir.path().join("journal.tmp")).unwrap();
        let (_, r, _) = LogStore::open(dir.path()).unwrap();
        assert_eq!(r.snapshot, Some((last, b"state@3".to_vec())));
        assert_eq!(r.entries, vec![], "entries of another history after the snapshot came back");
    }

    #[test]
    fn a_damaged_snapshot_stops_the_node() {
        let dir = tempfile::tempdir().unwrap();
        let (store, _, _) = LogStore::open(dir.path()).unwrap();
        let last = Position { token: FencingToken(1), index: 1 };
        store.write(&[LogOp::InstallSnapshot { last, data: vec![7; 100] }]).unwrap();
        drop(store);
        let path = dir.path().join("snapshot");
        let mut bytes = fs::read(&path).unwrap();
        let n = bytes.len();
        bytes[n - 1] ^= 1;
        fs::write(&path, &bytes).unwrap();
        let err = LogStore::open(dir.path()).unwrap_err().to_string();
        assert!(err.contains("snapshot is damaged"), "{err}");
    }

    #[test]
    fn a_crash_anywhere_in_a_write_leaves_a_prefix_of_its_records() {
        // Writes of random operations; then the journal is cut at every
        // byte offset of the last write in turn (a torn write), and reopened:
        // it must hold exactly the records before the cut.
        let dir = tempfile::tempdir().unwrap();
        let (store, _, _) = LogStore::open(dir.path()).unwrap();
        let path = dir.path().join("journal");
        let mut boundaries = vec![Restored::default()];
        let mut state = Restored::default();
        let mut next = 1;
        for round in 0..12u64 {
            let mut ops = vec![LogOp::Promise(FencingToken(round))];
            if round % 4 == 3 && next > 2 {
                next -= 2;
                ops.push(LogOp::TruncateAfter(next - 1));
            }
            let batch: Vec<Entry> = (0..3).map(|k| e(next + k, round, "v")).collect();
            next += 3;
            ops.push(LogOp::Append(batch));
            store.write(&ops).unwrap();
            // The expected state after each record of this write.
            for op in &ops {
                let records: Vec<Record> = match op {
                    LogOp::Promise(t) => vec![Record::Promise(*t)],
                    LogOp::TruncateAfter(i) => vec![Record::TruncateAfter(*i)],
                    LogOp::Append(es) => es.iter().cloned().map(Record::Entry).collect(),
                    _ => unreachable!(),
                };
                for r in records {
                    apply_record(&mut state, r).unwrap();
                    boundaries.push(state.clone());
                }
            }
        }
        drop(store);
        let full = fs::read(&path).unwrap();
        // Record boundaries, from the file itself.
        let mut ends = vec![0u64];
        let mut at = 0usize;
        while at < full.len() {
            let len = u32::from_le_bytes(full[at..at + 4].try_into().unwrap()) as usize;
            at += 8 + len;
            ends.push(at as u64);
        }
        assert_eq!(ends.len(), boundaries.len());
        for cut in (0..=full.len()).step_by(7).chain([full.len() - 1]) {
            fs::write(&path, &full[..cut]).unwrap();
            let (_, r, report) = LogStore::open(dir.path()).unwrap();
            let k = ends.iter().rposition(|&end| end <= cut as u64).unwrap();
            assert_eq!(r.entries, boundaries[k].entries, "cut at {cut}");
            assert_eq!(r.promised, boundaries[k].promised, "cut at {cut}");
            assert_eq!(report.torn_tail.is_some(), ends[k] < cut as u64, "cut at {cut}");
            assert_eq!(fs::read(&path).unwrap().len() as u64, ends[k], "cut back to a boundary");
        }
    }
}
