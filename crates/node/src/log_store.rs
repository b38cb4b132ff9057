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
//!   The snapshot is its last entry's position, the configuration in force
//!   there and the state machine's bytes (`TNRSNAP2`; a `TNRSNAP1` file,
//!   written before configurations were in the log, has no configuration
//!   and is read as the bootstrap one).
//! * A compaction ([`LogOp::Compact`]) is not needed for safety: the journal
//!   still holds every entry since the snapshot on disk. So
//!   [`LogStore::write`] hands it to a thread of its own and returns, and
//!   appends go on while it is written. One compaction runs at a time and at
//!   most one waits (a newer one replaces the waiting one: its snapshot
//!   covers more). The thread writes the snapshot file, then a new journal
//!   next to the old one (`journal.tmp`): a marker of the new snapshot, the
//!   promise and the entries after the snapshot, from the journal as it was
//!   when it began; then it copies the records appended since, at most
//!   [`MAX_CATCH_UP_ROUNDS`] times without the journal's lock, and holds the
//!   lock only to copy the last of them (under [`LOCKED_COPY_BYTES`] unless
//!   appends outran every round), sync, rename the new journal over the old
//!   one and sync the directory.
//! * An installed snapshot ([`LogOp::InstallSnapshot`]) replaces the whole
//!   state, within the write that carries it: the compaction running ends
//!   first and a waiting one is dropped (the installed snapshot supersedes
//!   it). A truncation after the snapshot's last entry is appended first,
//!   then the snapshot file and a fresh journal are written the same way.
//!
//! At every moment the directory replays to a state the replica wrote. Until
//! a snapshot file is renamed into place, the old snapshot and the whole
//! journal hold. After it, replaying the old journal over the new snapshot
//! skips the entries the snapshot covers and applies the rest as before (an
//! installed snapshot's truncation keeps the old journal's entries after it,
//! another history, from coming back). The new journal replays, from the new
//! snapshot, to the state the old one replays to, with the same records
//! after it; both hold every record appended before the rename.
//!
//! A failed compaction is logged, counted
//! ([`LogStore::compaction_failures`]) and otherwise harmless: the journal
//! still holds every entry, and the next compaction tries again. If it fails
//! after the new journal was renamed into place (the directory cannot be
//! synced), nothing more is appended: writes fail until the log is reopened.
//!
//! On open the journal is replayed. A damaged record at the very end (a write
//! torn by a crash: a short header, a length beyond the end of the file, or a
//! checksum that fails on the last record) is cut off with a warning; those
//! bytes were never acknowledged to anyone, because the replica sends nothing
//! before its write is synced. A damaged record followed by more data is not
//! a torn write: the node refuses to start, naming the file and offset.

use crate::sync::lock;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tenure_core::FencingToken;
use tenure_replica::{Entry, Index, LogOp, Membership, Position, Restored};
use tracing::{debug, error, warn};

/// The largest record accepted on replay (an entry with its command, or a
/// marker): larger lengths are damage.
pub const MAX_RECORD_BYTES: usize = 16 * 1024 * 1024;

/// Rounds in which a compaction copies the records appended since it began
/// into its new journal without holding the journal's lock.
pub const MAX_CATCH_UP_ROUNDS: usize = 4;

/// A compaction stops copying without the journal's lock once fewer bytes
/// than this were appended since its last round; it copies those holding the
/// lock (appends wait for that copy, one sync, the rename and a directory
/// sync).
pub const LOCKED_COPY_BYTES: u64 = 256 * 1024;

/// A snapshot is written and synced this many bytes at a time. One sync of
/// a whole 64 MiB snapshot held every other sync of the disk behind it (on
/// ext4 a journal commit waits for the data it orders): the journal's
/// appends on the node that writes it, the voters' on a machine they share.
/// Synced piece by piece, an append waits for one piece at most. In `tenure
/// bench membership`, where the new node installs a 64 MiB snapshot on the
/// voters' disk, the write p99 during the change fell from 6-10x its value
/// before to 4.8-7.3x (docs/BENCHMARKS.md, "Replacing a node").
pub const SNAPSHOT_SYNC_BYTES: usize = 4 * 1024 * 1024;

/// The snapshot file's first bytes.
const SNAPSHOT_MAGIC: &[u8; 8] = b"TNRSNAP2";
/// The first bytes of a snapshot file written before the configuration was
/// part of it (read, never written).
const SNAPSHOT_MAGIC_V1: &[u8; 8] = b"TNRSNAP1";
const JOURNAL: &str = "journal";
const SNAPSHOT: &str = "snapshot";

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

/// Counts of a log's background compactions; shared, so that they outlive a
/// reopened log.
#[derive(Debug, Default)]
pub struct CompactionStats {
    /// Compactions written.
    pub written: AtomicU64,
    /// Compactions that failed (each is logged; the journal still holds
    /// their entries).
    pub failed: AtomicU64,
}

/// The replicated log's files in one directory, and the thread that writes
/// its compactions. Dropping it (or [`LogStore::close`]) lets the running
/// compaction end and drops a waiting one.
pub struct LogStore {
    inner: Arc<Inner>,
    compactor: Mutex<Option<JoinHandle<()>>>,
}

impl fmt::Debug for LogStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogStore").field("dir", &self.inner.dir).finish_non_exhaustive()
    }
}

/// What the writer and the compaction thread share.
struct Inner {
    dir: PathBuf,
    journal: Mutex<Journal>,
    queue: Mutex<Queue>,
    /// Signalled when a compaction is queued, ends, or the thread must stop.
    queue_changed: Condvar,
    stats: Arc<CompactionStats>,
    /// Added to every append's sync ([`FSYNC_DELAY_ENV`]): a slow disk, for
    /// benchmarks.
    sync_delay: Duration,
    /// Called at each step of a snapshot's and a journal's replacement: it
    /// may stop there (an error, as a crash would) or wait.
    #[cfg(test)]
    hook: Mutex<Option<Arc<Hook>>>,
}

#[cfg(test)]
type Hook = dyn Fn(Step) -> io::Result<()> + Send + Sync;

/// The journal being appended to.
struct Journal {
    file: File,
    /// Bytes of whole records, written and synced.
    len: u64,
    /// The snapshot the journal starts from.
    base: Position,
    /// Why nothing more may be appended until the log is reopened: a write
    /// failed (it may have left part of a record), or the journal was
    /// replaced but the replacement could not be made durable.
    broken: Option<String>,
}

impl Journal {
    /// Its length, unless it is broken.
    fn usable(&self) -> io::Result<u64> {
        match &self.broken {
            Some(why) => Err(io::Error::other(format!(
                "the journal takes no more writes until the log is reopened: {why}"
            ))),
            None => Ok(self.len),
        }
    }
}

#[derive(Default)]
struct Queue {
    /// The compaction to write next (at most one waits).
    waiting: Option<Compaction>,
    running: bool,
    stop: bool,
}

struct Compaction {
    last: Position,
    membership: Membership,
    data: Vec<u8>,
}

/// The steps of a snapshot's and a journal's replacement, where a test may
/// stop (as a crash would) or wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// `snapshot.tmp` is written and synced.
    SnapshotWritten,
    /// The snapshot file is renamed into place, its directory synced.
    SnapshotRenamed,
    /// `journal.tmp` holds the records up to where the compaction began (not
    /// synced).
    JournalBegun,
    /// `journal.tmp` holds the records up to where the compaction began (and
    /// the rounds copied after it), synced; the journal's lock is not held.
    JournalWritten,
    /// Under the journal's lock: the last records are copied and synced.
    JournalSynced,
    /// The new journal is renamed into place and opened (the directory sync
    /// follows).
    JournalRenamed,
}

/// Environment variable: milliseconds (at most [`MAX_FSYNC_DELAY_MS`]) added
/// to every sync of an append to the journal, as a slow disk adds them (on
/// a leader and on its followers alike). For benchmarks of the write path
/// (docs/BENCHMARKS.md, "The key-value store"); unset or 0 in service.
pub const FSYNC_DELAY_ENV: &str = "TENURE_FSYNC_DELAY_MS";
/// Largest accepted [`FSYNC_DELAY_ENV`].
pub const MAX_FSYNC_DELAY_MS: u64 = 1000;

/// The delay [`FSYNC_DELAY_ENV`] asks for; an unreadable or too large value
/// is an error, not ignored.
fn sync_delay_from_env() -> io::Result<Duration> {
    match std::env::var(FSYNC_DELAY_ENV) {
        Ok(value) => parse_sync_delay(&value),
        Err(_) => Ok(Duration::ZERO),
    }
}

/// [`FSYNC_DELAY_ENV`]'s value read.
fn parse_sync_delay(value: &str) -> io::Result<Duration> {
    match value.trim().parse::<u64>() {
        Ok(ms) if ms <= MAX_FSYNC_DELAY_MS => Ok(Duration::from_millis(ms)),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{FSYNC_DELAY_ENV}={value:?}: expected milliseconds from 0 to {MAX_FSYNC_DELAY_MS}"
            ),
        )),
    }
}

impl LogStore {
    /// Opens (creating if missing) the log in `dir` and replays it.
    pub fn open(dir: &Path) -> Result<(LogStore, Restored, OpenReport), LogStoreError> {
        LogStore::open_counted(dir, Arc::default())
    }

    /// Opens the log in `dir` as [`LogStore::open`] does, counting its
    /// compactions in `stats`.
    pub fn open_counted(
        dir: &Path,
        stats: Arc<CompactionStats>,
    ) -> Result<(LogStore, Restored, OpenReport), LogStoreError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| LogStoreError::Io { path, source }
        };
        let sync_delay = sync_delay_from_env().map_err(io(dir))?;
        if !sync_delay.is_zero() {
            warn!(
                dir = %dir.display(),
                delay = ?sync_delay,
                "{FSYNC_DELAY_ENV} is set: every log sync waits this much longer (a slow disk \
                 for benchmarks; unset it in service)"
            );
        }
        fs::create_dir_all(dir).map_err(io(dir))?;
        let (snapshot, membership) = match read_snapshot(&dir.join(SNAPSHOT))? {
            Some((last, membership, data)) => (Some((last, data)), membership),
            None => (None, None),
        };
        let journal_path = dir.join(JOURNAL);
        let base = snapshot.as_ref().map_or(Position::ZERO, |(p, _)| *p);
        let mut restored =
            Restored { promised: FencingToken(0), snapshot, entries: Vec::new(), membership };
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
        // The journal may have just been created, or renamed by a compaction
        // that could not sync the directory: make its name durable.
        sync_dir(dir).map_err(io(dir))?;
        let inner = Arc::new(Inner {
            dir: dir.to_path_buf(),
            journal: Mutex::new(Journal { file, len: good, base, broken: None }),
            queue: Mutex::new(Queue::default()),
            queue_changed: Condvar::new(),
            stats,
            sync_delay,
            #[cfg(test)]
            hook: Mutex::new(None),
        });
        let worker = inner.clone();
        let compactor = std::thread::Builder::new()
            .name("tenure-log-compact".into())
            .spawn(move || worker.run())
            .map_err(io(dir))?;
        let store = LogStore { inner, compactor: Mutex::new(Some(compactor)) };
        Ok((store, restored, report))
    }

    /// Makes the operations of one output durable, in order, with one sync
    /// of the journal. A compaction among them is handed to the compaction
    /// thread once the rest is durable (it is not needed for safety: see the
    /// module's documentation); an installed snapshot is written before this
    /// returns.
    pub fn write(&self, ops: Vec<LogOp>) -> io::Result<()> {
        let mut buf = Vec::new();
        let mut compaction = None;
        for op in ops {
            match op {
                LogOp::Promise(t) => frame(&mut buf, &Record::Promise(t)),
                LogOp::TruncateAfter(i) => frame(&mut buf, &Record::TruncateAfter(i)),
                LogOp::Append(entries) => {
                    for e in entries {
                        frame(&mut buf, &Record::Entry(e));
                    }
                }
                LogOp::Compact { last, membership, data } => {
                    compaction = Some(Compaction { last, membership, data })
                }
                LogOp::InstallSnapshot { last, membership, data } => {
                    // It replaces everything, earlier compactions included.
                    compaction = None;
                    self.settle_compactions();
                    // Flush what came before with a truncation after the
                    // snapshot: after a crash between the snapshot file and
                    // the journal's replacement, the old journal's entries
                    // after the snapshot (another history) must not come back.
                    frame(&mut buf, &Record::TruncateAfter(last.index));
                    self.inner.append(&buf)?;
                    buf.clear();
                    self.inner.write_snapshot(last, &membership, &data)?;
                    self.inner.swap_journal(last, false)?;
                }
            }
        }
        self.inner.append(&buf)?;
        if let Some(c) = compaction {
            let mut q = lock(&self.inner.queue);
            if let Some(old) = q.waiting.replace(c) {
                debug!(index = old.last.index, "a newer compaction replaces a waiting one");
            }
            self.inner.queue_changed.notify_all();
        }
        Ok(())
    }

    /// Compactions written (counted in its [`CompactionStats`]).
    pub fn compactions(&self) -> u64 {
        self.inner.stats.written.load(Ordering::Relaxed)
    }

    /// Compactions that failed (each is logged; the journal still holds
    /// their entries).
    pub fn compaction_failures(&self) -> u64 {
        self.inner.stats.failed.load(Ordering::Relaxed)
    }

    /// Waits until no compaction runs or waits. Blocks: call it off the
    /// async workers.
    pub fn wait_for_compactions(&self) {
        let mut q = lock(&self.inner.queue);
        while q.running || q.waiting.is_some() {
            q = self.inner.wait(q);
        }
    }

    /// Stops the compaction thread: the running compaction ends first, a
    /// waiting one is dropped (the journal still holds its entries), later
    /// ones are not written. Blocks while a compaction runs: call it off the
    /// async workers. The next [`LogStore::open`] of the directory must come
    /// after it (or after the drop, which calls it).
    pub fn close(&self) {
        {
            let mut q = lock(&self.inner.queue);
            q.stop = true;
            q.waiting = None;
            self.inner.queue_changed.notify_all();
        }
        if let Some(thread) = lock(&self.compactor).take() {
            if thread.join().is_err() {
                error!(dir = %self.inner.dir.display(), "the log's compaction thread panicked");
            }
        }
    }

    /// Drops the waiting compaction and waits for the running one to end.
    fn settle_compactions(&self) {
        let mut q = lock(&self.inner.queue);
        q.waiting = None;
        while q.running {
            q = self.inner.wait(q);
        }
    }

    #[cfg(test)]
    fn set_hook(&self, hook: impl Fn(Step) -> io::Result<()> + Send + Sync + 'static) {
        *lock(&self.inner.hook) = Some(Arc::new(hook));
    }
}

impl Drop for LogStore {
    fn drop(&mut self) {
        self.close();
    }
}

/// Marks the running compaction ended when dropped (also if it panicked).
struct Running<'a>(&'a Inner);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        lock(&self.0.queue).running = false;
        self.0.queue_changed.notify_all();
    }
}

impl Inner {
    fn wait<'a>(&self, guard: MutexGuard<'a, Queue>) -> MutexGuard<'a, Queue> {
        self.queue_changed.wait(guard).unwrap_or_else(|e| e.into_inner())
    }

    /// The compaction thread: writes queued compactions until told to stop.
    fn run(&self) {
        while let Some(c) = self.next_compaction() {
            let _running = Running(self);
            let start = Instant::now();
            match self.compact(&c) {
                Ok(None) => {}
                Ok(Some(timing)) => {
                    self.stats.written.fetch_add(1, Ordering::Relaxed);
                    debug!(
                        index = c.last.index,
                        bytes = c.data.len(),
                        total_ms = ms(start.elapsed()),
                        snapshot_ms = ms(timing.snapshot),
                        journal_ms = ms(timing.journal),
                        locked_ms = ms(timing.locked),
                        "compacted the log"
                    );
                }
                Err(e) => {
                    self.stats.failed.fetch_add(1, Ordering::Relaxed);
                    error!(
                        dir = %self.dir.display(),
                        index = c.last.index,
                        error = %e,
                        "cannot compact the replicated log: its journal still holds every entry, the next compaction tries again"
                    );
                }
            }
        }
    }

    /// The next compaction to write, or `None` once told to stop.
    fn next_compaction(&self) -> Option<Compaction> {
        let mut q = lock(&self.queue);
        loop {
            if q.stop {
                return None;
            }
            if let Some(c) = q.waiting.take() {
                q.running = true;
                return Some(c);
            }
            q = self.wait(q);
        }
    }

    /// Writes the snapshot up to `last` and starts the journal from it,
    /// unless the journal starts there or later already.
    fn compact(&self, c: &Compaction) -> io::Result<Option<Timing>> {
        let (last, data) = (c.last, &c.data);
        let base = {
            let j = lock(&self.journal);
            j.usable()?;
            j.base
        };
        if last.index <= base.index {
            return Ok(None);
        }
        let start = Instant::now();
        self.write_snapshot(last, &c.membership, data)?;
        let snapshot = start.elapsed();
        let locked = self.swap_journal(last, true)?;
        Ok(Some(Timing { snapshot, journal: start.elapsed() - snapshot, locked }))
    }

    fn append(&self, buf: &[u8]) -> io::Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        let mut guard = lock(&self.journal);
        let j = &mut *guard;
        j.usable()?;
        let result = j.file.write_all(buf).and_then(|()| j.file.sync_data());
        if result.is_ok() && !self.sync_delay.is_zero() {
            // A slow disk holds the journal as long.
            std::thread::sleep(self.sync_delay);
        }
        match &result {
            Ok(()) => j.len += buf.len() as u64,
            Err(e) => j.broken = Some(format!("a write failed: {e}")),
        }
        result
    }

    /// Replaces the snapshot file with the snapshot up to `last`.
    fn write_snapshot(
        &self,
        last: Position,
        membership: &Membership,
        data: &[u8],
    ) -> io::Result<()> {
        // The body is the postcard encoding of (last, membership, data),
        // written without copying the data.
        let mut head = postcard::to_allocvec(&last).map_err(io::Error::other)?;
        head.extend(postcard::to_allocvec(membership).map_err(io::Error::other)?);
        head.extend(postcard::to_allocvec(&(data.len() as u64)).map_err(io::Error::other)?);
        let mut crc = crc32fast::Hasher::new();
        crc.update(&head);
        crc.update(data);
        let len = (head.len() + data.len()) as u64;
        let tmp = self.dir.join("snapshot.tmp");
        {
            let mut f = File::create(&tmp)?;
            let mut header = Vec::with_capacity(20 + head.len());
            header.extend_from_slice(SNAPSHOT_MAGIC);
            header.extend_from_slice(&len.to_le_bytes());
            header.extend_from_slice(&crc.finalize().to_le_bytes());
            header.extend_from_slice(&head);
            f.write_all(&header)?;
            for piece in data.chunks(SNAPSHOT_SYNC_BYTES) {
                f.write_all(piece)?;
                f.sync_data()?;
            }
            f.sync_all()?;
        }
        self.step(Step::SnapshotWritten)?;
        fs::rename(&tmp, self.dir.join(SNAPSHOT))?;
        sync_dir(&self.dir)?;
        self.step(Step::SnapshotRenamed)
    }

    /// Replaces the journal with one that starts from the snapshot up to
    /// `base`: the promise and (`keep`) the entries after it, as of when
    /// this began, then every record appended since. Appends wait only for
    /// the last part; returns how long they waited.
    fn swap_journal(&self, base: Position, keep: bool) -> io::Result<Duration> {
        let path = self.dir.join(JOURNAL);
        let tmp_path = self.dir.join("journal.tmp");
        let mut reader = File::open(&path)?;
        // Appends hold the lock until their records are synced: the journal
        // up to `start` is whole records, and stays as it is.
        let start = lock(&self.journal).usable()?;
        let mut prefix = vec![0; start as usize];
        reader.read_exact(&mut prefix)?;
        let mut state = Restored {
            promised: FencingToken(0),
            // The new snapshot is the base (its data is not needed here).
            snapshot: Some((base, Vec::new())),
            entries: Vec::new(),
            membership: None,
        };
        let good = replay(&path, &prefix, &mut state, &mut OpenReport::default())
            .map_err(io::Error::other)?;
        if good != start {
            return Err(io::Error::other(format!(
                "{} holds a partial record before byte {start}",
                path.display()
            )));
        }
        let mut head = Vec::new();
        frame(&mut head, &Record::Base(base));
        frame(&mut head, &Record::Promise(state.promised));
        if keep {
            for e in state.entries.into_iter().filter(|e| e.pos.index > base.index) {
                frame(&mut head, &Record::Entry(e));
            }
        }
        drop(prefix);
        let mut tmp = File::create(&tmp_path)?;
        tmp.write_all(&head)?;
        self.step(Step::JournalBegun)?;
        let mut copied = start;
        for _ in 0..MAX_CATCH_UP_ROUNDS {
            let end = lock(&self.journal).usable()?;
            if end - copied < LOCKED_COPY_BYTES {
                break;
            }
            copy_range(&mut reader, copied, end, &mut tmp)?;
            copied = end;
        }
        tmp.sync_all()?;
        self.step(Step::JournalWritten)?;
        let mut j = lock(&self.journal);
        let locked = Instant::now();
        let end = j.usable()?;
        copy_range(&mut reader, copied, end, &mut tmp)?;
        tmp.sync_all()?;
        drop(tmp);
        self.step(Step::JournalSynced)?;
        fs::rename(&tmp_path, &path)?;
        // From here the journal on disk is the new file: appends must go to
        // it, and only once its name is durable.
        let swapped = OpenOptions::new()
            .append(true)
            .open(&path)
            .and_then(|f| self.step(Step::JournalRenamed).map(|()| f))
            .and_then(|f| sync_dir(&self.dir).map(|()| f));
        match swapped {
            Ok(f) => {
                j.file = f;
                j.len = head.len() as u64 + (end - start);
                j.base = base;
                Ok(locked.elapsed())
            }
            Err(e) => {
                j.broken = Some(format!("it was replaced, but the replacement failed: {e}"));
                Err(e)
            }
        }
    }

    #[cfg(test)]
    fn step(&self, step: Step) -> io::Result<()> {
        let hook = lock(&self.hook).clone();
        hook.map_or(Ok(()), |h| h(step))
    }

    #[cfg(not(test))]
    fn step(&self, _: Step) -> io::Result<()> {
        Ok(())
    }
}

/// How long a compaction's parts took.
struct Timing {
    snapshot: Duration,
    journal: Duration,
    /// The part that held the journal's lock.
    locked: Duration,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Appends the bytes `from..to` of `reader` to `out`.
fn copy_range(reader: &mut File, from: u64, to: u64, out: &mut File) -> io::Result<()> {
    if to == from {
        return Ok(());
    }
    reader.seek(SeekFrom::Start(from))?;
    let n = io::copy(&mut Read::take(&mut *reader, to - from), out)?;
    if n != to - from {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the journal is shorter than written",
        ));
    }
    Ok(())
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

/// The snapshot file's position, configuration (none in a file of the
/// first format) and data, if there is one.
type SnapshotFile = (Position, Option<Membership>, Vec<u8>);

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
    let with_membership = match &bytes.get(..8) {
        Some(m) if *m == SNAPSHOT_MAGIC => true,
        Some(m) if *m == SNAPSHOT_MAGIC_V1 => false,
        _ => return Err(damaged("not a snapshot file")),
    };
    if bytes.len() < 20 {
        return Err(damaged("not a snapshot file"));
    }
    let len = u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes"));
    let crc = u32::from_le_bytes(bytes[16..20].try_into().expect("4 bytes"));
    let body = &bytes[20..];
    if body.len() as u64 != len || crc32fast::hash(body) != crc {
        return Err(damaged("a length or checksum mismatch"));
    }
    // The postcard encoding of (last, membership, data): the data's
    // length, then it.
    let (last, rest) =
        postcard::take_from_bytes::<Position>(body).map_err(|e| damaged(&e.to_string()))?;
    let (membership, rest) = if with_membership {
        let (m, rest) =
            postcard::take_from_bytes::<Membership>(rest).map_err(|e| damaged(&e.to_string()))?;
        (Some(m), rest)
    } else {
        (None, rest)
    };
    let (n, data) = postcard::take_from_bytes::<u64>(rest).map_err(|e| damaged(&e.to_string()))?;
    if data.len() as u64 != n {
        return Err(damaged("the snapshot's length does not match its data"));
    }
    Ok(Some((last, membership, data.to_vec())))
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests;
