//! Durable state in the data directory: the `state` file (term and vote),
//! the `lock` file that keeps two processes out of one directory and records
//! the newest state the node acted on, and the `incarnation` file, the
//! number every start takes anew ([`incarnation`]: its format, and why it is
//! a file of its own).
//!
//! # State file format (version 2)
//!
//! The file is two fixed-size slots of [`SLOT_LEN`] bytes, each a complete copy
//! of the state:
//!
//! | bytes    | content                                                          |
//! |----------|------------------------------------------------------------------|
//! | 8        | magic `TENURE-S`                                                 |
//! | 4        | format version, little endian                                    |
//! | 8        | write sequence number, little endian                             |
//! | 4        | body length `n`, little endian                                   |
//! | n        | body: postcard of cluster id, node id, term, voted_for, protocol |
//! | 4        | CRC32 (IEEE) of everything before it in the slot, little endian  |
//! | ...      | zeros up to [`SLOT_LEN`]                                         |
//!
//! # Writing: state and record, then messages
//!
//! A write overwrites slot 0 in place and calls `fdatasync` once: the file
//! never changes size, so no metadata needs flushing, which costs a third of
//! the rename dance (temporary file, fsync, rename, directory fsync) that a
//! single-copy file would need. At the same time, on a second thread, the
//! same slot is written over the lock file's record and synced; only when
//! both are durable do the messages that depend on the state leave. Then, off
//! the critical path, [`DataDir::mirror`] copies the slot into slot 1 of the
//! state file and syncs again (and if the next write comes first, it mirrors
//! before overwriting slot 0; a start mirrors a state found in slot 0 only).
//!
//! Reading takes the valid slot with the highest sequence number:
//! * a crash while slot 0 is written leaves it torn, and slot 1 holds the
//!   previous state — the only one that was acknowledged, so nothing is lost
//!   (the record may hold the interrupted write: it is taken, see below);
//! * a crash while slot 1 is written leaves slot 0 complete and newest;
//! * once mirrored, both slots hold the same state, so one damaged slot (a bad
//!   sector, a flipped bit) is survived with a warning.
//!
//! # The lock file's record
//!
//! The lock file holds one slot: the newest state the node acted on. It is
//! written with the state file and before any message, so a state file that
//! is older than the record (by more than the one write a crash can
//! interrupt), or missing next to a record of a node that had a term, was
//! replaced or removed behind the node's back (a restored backup, a
//! deleted file): starting from it could make the node vote twice in one
//! term, so the start is refused ([`StartError::StateRolledBack`],
//! [`StartError::StateMissing`]) unless a reset is asked for
//! ([`reset_state`](crate::reset_state)), which starts from the record. The
//! rules are in [`recovery`] (module `storage::recovery`, pure).
//!
//! Only when both slots are damaged does the node refuse to start for damage;
//! it never overwrites a damaged file without a reset.
//!
//! Version 1 files (one copy, no protocol field, written by rename) are read as
//! written by the Raft protocol and rewritten in version 2 when opened. A file
//! of one protocol is never used by another: terms and votes of one protocol
//! mean nothing to another.
//!
//! The state and lock paths must be regular files: a FIFO, socket, device or
//! directory there is refused ([`StartError::NotAFile`]) after a `stat`,
//! without being opened, and files are opened non-blocking so that one swapped
//! in after the check cannot hang the start either.

mod files;
mod format;
pub mod incarnation;
pub mod recovery;

pub use files::LOCK_FILE;
pub use format::{
    parse_lock_file, parse_state_file, ParseError, Record, StateFile, MAX_STATE_FILE_LEN, SLOT_LEN,
    STATE_FORMAT_VERSION,
};
pub use incarnation::{
    dead_incarnation, parse_incarnation_file, DeadIncarnation, DeadIncarnationError,
    IncarnationFile, IncarnationRecord, NextIncarnation, INCARNATION_FILE, MAX_INCARNATION,
};
pub use recovery::{Identity, Plan};

use files::{create_two_slots, exists_regular, into_io, io_err, open_regular, read_bounded};

use crate::error::StartError;
use crate::sync::lock;
use recovery::{MarkRead, Paths, StateRead};
use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{self, Write};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use tenure_core::{DirectoryId, HardState, Term};

/// The state file's name inside the data directory.
pub const STATE_FILE: &str = "state";
/// The temporary file a new state file is written to before the rename
/// (creation, repairs, format upgrades and resets only).
pub const STATE_TMP_FILE: &str = "state.tmp";

/// The open state and lock files and what was last written to them.
#[derive(Debug)]
struct Slots {
    file: File,
    /// Held for its exclusive lock (released when the file is closed); its
    /// contents are the record of the newest state written.
    lock: File,
    /// Sequence number of the newest state written (slot 0).
    seq: u64,
    /// Sequence number of the state slot 1 holds.
    mirrored: u64,
    /// The newest slot's bytes, for the mirror.
    latest: Vec<u8>,
}

/// An open, locked data directory. The lock is held until this value is dropped.
#[derive(Debug)]
pub struct DataDir {
    dir: PathBuf,
    id: Identity,
    /// The incarnation this opening took (see [`incarnation`]).
    incarnation: u64,
    /// The directory's identity (see [`incarnation`]).
    directory: DirectoryId,
    slots: Mutex<Slots>,
}

/// What opening a data directory did.
struct Opened {
    data: DataDir,
    plan: Plan,
    incarnation: NextIncarnation,
}

impl DataDir {
    /// Creates the directory if missing, takes the lock, loads the state
    /// (writing an initial one for a fresh node) and takes the next
    /// incarnation ([`DataDir::incarnation`], written and synced before this
    /// returns). A state that could make the node vote twice in a term is
    /// refused (see [`recovery::plan`]), and so is a damaged incarnation file
    /// (see [`incarnation`]).
    pub fn open(dir: &Path, id: Identity) -> Result<(DataDir, HardState), StartError> {
        Self::open_with(dir, id, None).map(|o| (o.data, o.plan.state))
    }

    /// Like [`DataDir::open`], but a state that would be refused for being
    /// missing, damaged, older than the lock file's record or of another
    /// protocol is replaced by one no older than anything the node knows and
    /// in a term of at least `min_term` (see [`recovery::plan`]).
    /// A damaged incarnation file is replaced too (by a number from the wall
    /// clock).
    pub fn open_reset(
        dir: &Path,
        id: Identity,
        min_term: Option<Term>,
    ) -> Result<(DataDir, Plan), StartError> {
        Self::open_with(dir, id, Some(min_term)).map(|o| (o.data, o.plan))
    }

    fn open_with(
        dir: &Path,
        id: Identity,
        reset: Option<Option<Term>>,
    ) -> Result<Opened, StartError> {
        fs::create_dir_all(dir).map_err(io_err(dir))?;
        let paths = Paths { state: dir.join(STATE_FILE), lock: dir.join(LOCK_FILE) };
        ensure_lock_file(dir, &paths.lock, &id)?;
        let lock = open_regular(&paths.lock, true)?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(StartError::DataDirLocked { path: paths.lock });
            }
            Err(TryLockError::Error(source)) => {
                return Err(StartError::Io { path: paths.lock, source })
            }
        }
        let mark = MarkRead::from_bytes(&read_bounded(&lock, &paths.lock)?, &paths.lock)?;
        let (state, mirrored) = if exists_regular(&paths.state)? {
            let file = open_regular(&paths.state, false)?;
            let bytes = read_bounded(&file, &paths.state)?;
            let mirrored = bytes.len() == 2 * SLOT_LEN && bytes[..SLOT_LEN] == bytes[SLOT_LEN..];
            (StateRead::from_bytes(Some(&bytes)), mirrored)
        } else {
            (StateRead::Missing, false)
        };
        let plan = recovery::decide(&id, &paths, state, mark, reset)?;
        // Decided before anything is written: a refusal changes nothing.
        let found = incarnation::read(dir)?;
        let inc_path = dir.join(INCARNATION_FILE);
        let now_us = incarnation::wall_clock_us();
        let fresh = incarnation::random_directory_id();
        let next = incarnation::decide(&id, &inc_path, &found, reset.is_some(), now_us, fresh)?;
        let slot = format::encode_slot(plan.seq, &id.record(plan.state));
        if plan.rewrite_state {
            // State first, then the record: a crash between them leaves a
            // state newer than the record, which starts.
            create(dir, &slot).map_err(io_err(&paths.state))?;
        }
        if plan.write_mark {
            write_record(&lock, &slot).map_err(io_err(&paths.lock))?;
        }
        let file = open_regular(&paths.state, true)?;
        let mirrored = if plan.rewrite_state || mirrored { plan.seq } else { 0 };
        let mut slots = Slots { file, lock, seq: plan.seq, mirrored, latest: slot };
        // A state written just before a crash may be in slot 0 only: copy it
        // into slot 1 before a write overwrites slot 0.
        mirror_slots(&mut slots).map_err(io_err(&paths.state))?;
        incarnation::write(dir, &id, &next)?;
        let data = DataDir {
            dir: dir.to_path_buf(),
            id,
            incarnation: next.incarnation,
            directory: next.directory,
            slots: Mutex::new(slots),
        };
        Ok(Opened { data, plan, incarnation: next })
    }

    /// The incarnation this opening took: larger than that of every earlier
    /// opening of the directory, and durable (see [`incarnation`]).
    pub fn incarnation(&self) -> u64 {
        self.incarnation
    }

    /// The directory's identity: taken when its incarnation file was first
    /// written, the same at every opening since (see [`incarnation`]).
    pub fn directory_id(&self) -> DirectoryId {
        self.directory
    }

    /// The state file's path.
    pub fn state_path(&self) -> PathBuf {
        self.dir.join(STATE_FILE)
    }

    /// Writes `state` durably: overwrites slot 0 in place and `fdatasync`s it,
    /// and, at the same time (on a second thread), writes it over the lock
    /// file's record and syncs that. When this returns `Ok`, the state
    /// survives a crash, and a later start refuses any older state file
    /// without a reset.
    ///
    /// If the previous write was not mirrored yet, it is first: slot 0 is only
    /// overwritten while slot 1 holds the state before it, the one a torn
    /// slot 0 falls back to.
    ///
    /// If the state file was deleted (writes to the open file would go
    /// nowhere), it is created again with the full rename dance, which fails
    /// for as long as the directory is missing; a deleted lock file is
    /// created and locked again the same way.
    pub fn write(&self, state: HardState) -> io::Result<()> {
        let mut guard = lock(&self.slots);
        let slots = &mut *guard;
        if slots.mirrored < slots.seq && !slots.latest.is_empty() {
            mirror_slots(slots)?;
        }
        let seq = slots.seq + 1;
        let bytes = format::encode_slot(seq, &self.id.record(state));
        let Slots { file, lock: lock_file, mirrored, .. } = slots;
        let (state_written, record_written) = std::thread::scope(|s| {
            let record = s.spawn(|| self.write_record(lock_file, &bytes));
            let state = self.write_state(file, mirrored, seq, &bytes);
            (
                state,
                record.join().unwrap_or_else(|_| Err(io::Error::other("record writer panicked"))),
            )
        });
        state_written?;
        record_written?;
        slots.seq = seq;
        slots.latest = bytes;
        Ok(())
    }

    /// Writes `slot` (sequence number `seq`) as the state file's slot 0.
    fn write_state(
        &self,
        file: &mut File,
        mirrored: &mut u64,
        seq: u64,
        slot: &[u8],
    ) -> io::Result<()> {
        if file.metadata()?.nlink() == 0 {
            create(&self.dir, slot)?;
            *file = open_regular(&self.state_path(), true).map_err(into_io)?;
            *mirrored = seq;
            return Ok(());
        }
        file.write_all_at(slot, 0)?;
        file.sync_data()
    }

    /// Writes `slot` as the lock file's record, creating and locking the lock
    /// file again if it was deleted.
    fn write_record(&self, lock_file: &mut File, slot: &[u8]) -> io::Result<()> {
        if lock_file.metadata()?.nlink() == 0 {
            *lock_file = self.relock(slot)?;
            return Ok(());
        }
        write_record(lock_file, slot)
    }

    /// Creates the lock file again (it was deleted while the node ran),
    /// holding `record`, and locks it.
    fn relock(&self, record: &[u8]) -> io::Result<File> {
        let path = self.dir.join(LOCK_FILE);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .custom_flags(libc::O_NONBLOCK)
            .open(&path)?;
        if !file.metadata()?.is_file() {
            return Err(io::Error::other(format!("{} is not a regular file", path.display())));
        }
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(io::Error::other(format!(
                    "the lock file {} was deleted and another process holds the new one",
                    path.display()
                )))
            }
            Err(TryLockError::Error(e)) => return Err(e),
        }
        write_record(&file, record)?;
        File::open(&self.dir)?.sync_all()?;
        Ok(file)
    }

    /// Copies the newest state into slot 1 (and syncs), so that both slots hold
    /// it. Call it after the messages that waited for [`DataDir::write`] left;
    /// a failure only loses the redundancy, never the state.
    pub fn mirror(&self) -> io::Result<()> {
        mirror_slots(&mut lock(&self.slots))
    }
}

/// Copies the newest state into slot 1 unless it is there already.
fn mirror_slots(slots: &mut Slots) -> io::Result<()> {
    if slots.mirrored >= slots.seq || slots.latest.is_empty() {
        return Ok(());
    }
    slots.file.write_all_at(&slots.latest, SLOT_LEN as u64)?;
    slots.file.sync_data()?;
    slots.mirrored = slots.seq;
    Ok(())
}

/// What a reset did; see [`reset_state`](crate::reset_state).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResetOutcome {
    /// The state could be started from as it is: nothing was written.
    NotNeeded {
        /// The state the node will start from.
        state: HardState,
    },
    /// A new state file was written.
    Reset {
        /// Why a start without the reset would have been refused.
        refused: String,
        /// The state written.
        state: HardState,
    },
}

/// Opens the data directory with a reset and closes it again. (The opening
/// takes an incarnation, which no peer ever sees: numbers only need to grow.)
pub(crate) fn reset(
    dir: &Path,
    id: Identity,
    min_term: Option<Term>,
) -> Result<ResetOutcome, StartError> {
    let Opened { data, plan, incarnation } = DataDir::open_with(dir, id, Some(min_term))?;
    drop(data);
    let refused: Vec<String> = plan.reset.into_iter().chain(incarnation.reset).collect();
    Ok(if refused.is_empty() {
        ResetOutcome::NotNeeded { state: plan.state }
    } else {
        ResetOutcome::Reset { refused: refused.join("; "), state: plan.state }
    })
}

/// Tells temporary lock files of concurrent openers in one process apart.
static LOCK_TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Creates the lock file if it is missing, holding the record of a node that
/// never had a term, atomically: written and synced under a temporary name,
/// then hard-linked into place (which never replaces an existing file). So a
/// lock file without a record can only come from an earlier tenure, and an
/// interrupted first start leaves either no lock file or a complete one.
fn ensure_lock_file(dir: &Path, lock: &Path, id: &Identity) -> Result<(), StartError> {
    if exists_regular(lock)? {
        return Ok(());
    }
    let n = LOCK_TMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let tmp = dir.join(format!("{LOCK_FILE}.{}.{n}.tmp", std::process::id()));
    let slot = format::encode_slot(0, &id.record(HardState::default()));
    let result = (|| {
        let mut f = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        f.write_all(&slot)?;
        f.sync_all()?;
        match fs::hard_link(&tmp, lock) {
            Ok(()) => {}
            // Another opener created it first: use theirs.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        fs::remove_file(&tmp)?;
        File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.map_err(io_err(lock))
}

/// Writes `slot` over the lock file's record and syncs it. (A lock file of
/// another length — empty, from an earlier tenure — gets the length of one
/// slot, which the sync covers.)
fn write_record(lock: &File, slot: &[u8]) -> io::Result<()> {
    lock.write_all_at(slot, 0)?;
    if lock.metadata()?.len() != slot.len() as u64 {
        lock.set_len(slot.len() as u64)?;
        return lock.sync_all();
    }
    lock.sync_data()
}

/// Writes a new state file holding `slot` twice.
fn create(dir: &Path, slot: &[u8]) -> io::Result<()> {
    create_two_slots(dir, STATE_TMP_FILE, STATE_FILE, slot)
}

#[cfg(test)]
mod tests;
