//! The node's incarnation: a number every start of a data directory takes
//! anew, larger than every number an earlier start of it took, written and
//! synced before the node dials or accepts any peer (persist, then send).
//!
//! Peers learn it at the handshake ([`crate::wire::Frame::Hello`]), and a
//! notice that "incarnation N of node X is dead" is taken only about X's
//! current incarnation: an incarnation number used twice would let a true
//! notice about a dead process stop the live one that reused its number. So
//! the number never repeats, even across a crash in the middle of its write.
//!
//! # Why a file of its own
//!
//! The lock file's record and the state file hold the term and vote, and are
//! written on every vote; the incarnation changes once per start. Keeping it
//! apart means:
//! * the formats of `state` and of the lock file's record stay as they are
//!   (the record's layout is fixed: a tenure that kept no incarnation reads
//!   it), and the vote's critical path is not touched;
//! * `--reset-state` rewrites the state and the record, never this file, so
//!   no reset can bring an incarnation back (and a damaged incarnation file
//!   is repaired on its own rule, below);
//! * each failure is told apart: a damaged state file says nothing of the
//!   incarnations, and the reverse.
//!
//! # The data directory's identity
//!
//! The file also holds the directory's identity ([`DirectoryId`]): 128
//! random bits taken when the file is first written, and kept by every
//! later start. A directory whose file is gone (wiped, or new) gets a new
//! one, so a node that comes back under its old id with none of its data
//! is told apart from the member it was: membership changes name a voter by
//! id *and* identity. A file of format 1 (before identities) gets one at its
//! next start.
//!
//! # Format (version 2)
//!
//! Two slots of [`INCARNATION_SLOT_LEN`] bytes, each a complete copy:
//!
//! | bytes | content                                                        |
//! |-------|----------------------------------------------------------------|
//! | 8     | magic `TENURE-I`                                               |
//! | 4     | format version, little endian                                  |
//! | 4     | body length `n`, little endian                                 |
//! | n     | body: postcard of cluster id, node id, incarnation, identity   |
//! | 4     | CRC32 (IEEE) of everything before it in the slot, little endian |
//! | ...   | zeros up to [`INCARNATION_SLOT_LEN`]                           |
//!
//! # Taking the next number
//!
//! A start reads the largest incarnation of a valid slot, adds one, and
//! writes the new number into both slots, one after the other, each synced:
//! first the slot that is damaged or holds the smaller number, then the
//! other. A crash while the first is written leaves the other slot holding
//! the previous number, which the next start reads and passes (the number
//! being written was never sent: the node sends only after both writes); a
//! crash while the second is written leaves the first holding the new
//! number. Once a start completed, both slots hold the same number, so one
//! slot damaged later (a flipped bit, a bad sector) loses nothing.
//!
//! # A missing or damaged file
//!
//! A data directory without the file (a first start, a directory of an
//! earlier tenure, or a deleted file: they cannot be told apart) starts the
//! count at the wall clock, in microseconds since the Unix epoch. Every
//! earlier start of the directory took either a number it read plus one, or
//! such a clock reading; a start takes far more than a microsecond (it
//! syncs files), so a counter started from a clock reading stays below the
//! clock, and a new reading is above every number used — as long as the
//! clock did not go back by more than the time since (a clock that reads
//! before 2020 is refused: [`MIN_CLOCK_US`]). Numbers stay below 2^53
//! ([`MAX_INCARNATION`]), which a JavaScript client reads exactly; the clock
//! reaches that in the year 2255.
//!
//! Format 1 had no identity; its slots are read, and rewritten as format 2.
//!
//! Both slots damaged is refused at start ([`StartError::CorruptIncarnation`]):
//! nothing tells which numbers were used. `--reset-state` then takes a
//! number from the wall clock, as for a missing file. A file of another node
//! or cluster, or of a newer format, is refused, with or without a reset.

use super::files::{
    create_two_slots, exists_regular, io_err, open_regular, read_bounded, LOCK_FILE,
};
use super::format::{decode_body, ParseError, SlotLayout};
use super::recovery::Identity;
use crate::error::StartError;
use serde::{Deserialize, Serialize};
use std::fs;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};
use tenure_core::{DirectoryId, NodeId};
use tracing::{info, warn};

/// The incarnation file's name inside the data directory.
pub const INCARNATION_FILE: &str = "incarnation";
/// The temporary file a new incarnation file is written to before the rename.
pub const INCARNATION_TMP_FILE: &str = "incarnation.tmp";
/// The size of one slot of the incarnation file; the file holds two.
pub const INCARNATION_SLOT_LEN: usize = 256;
/// The incarnation file format this build writes (it reads format 1 too).
pub const INCARNATION_FORMAT_VERSION: u32 = 2;
/// The format before data-directory identities, still read.
const FORMAT_WITHOUT_IDENTITY: u32 = 1;
/// The largest incarnation: 2^53, the largest integer every JSON reader
/// (JavaScript's numbers included) reads exactly.
pub const MAX_INCARNATION: u64 = 1 << 53;
/// The earliest wall clock reading (2020-01-01T00:00:00Z, in microseconds
/// since the Unix epoch) a first incarnation is taken from: a clock that
/// reads earlier is wrong, and a number taken from it could repeat one.
pub const MIN_CLOCK_US: u64 = 1_577_836_800_000_000;

/// The incarnation file's slots: the state file's layout without its
/// sequence number.
const SLOT: SlotLayout =
    SlotLayout { magic: b"TENURE-I", file: "incarnation", len: INCARNATION_SLOT_LEN, extra: 0 };

/// What one slot holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IncarnationRecord {
    /// The cluster the node belongs to.
    pub cluster_id: String,
    /// The node.
    pub node_id: NodeId,
    /// The incarnation the last start took.
    pub incarnation: u64,
    /// The data directory's identity (None in a slot of format 1).
    pub directory: Option<DirectoryId>,
}

/// A slot body of format 2. (The field order is the postcard layout: never
/// reorder it.)
#[derive(Serialize, Deserialize)]
struct SlotBody {
    cluster_id: String,
    node_id: NodeId,
    incarnation: u64,
    directory: DirectoryId,
}

/// A slot body of format 1: format 2's without the identity.
#[derive(Deserialize)]
struct SlotBodyV1 {
    cluster_id: String,
    node_id: NodeId,
    incarnation: u64,
}

/// An incarnation file, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IncarnationFile {
    /// The valid slot with the larger incarnation.
    pub record: IncarnationRecord,
    /// What each slot holds: its incarnation, or why it is damaged.
    pub slots: [Result<u64, String>; 2],
}

impl IncarnationFile {
    /// The slot to write first: a damaged one, else the one with the
    /// smaller number (slot 0 when they are equal).
    fn first_to_write(&self) -> usize {
        match &self.slots {
            [Err(_), _] => 0,
            [_, Err(_)] => 1,
            [Ok(a), Ok(b)] => usize::from(b < a),
        }
    }
}

/// Encodes one slot (format 2) holding `record`, whose identity is given.
pub(crate) fn encode_slot(record: &IncarnationRecord) -> Vec<u8> {
    let body = SlotBody {
        cluster_id: record.cluster_id.clone(),
        node_id: record.node_id,
        incarnation: record.incarnation,
        directory: record.directory.expect("a slot of format 2 holds an identity"),
    };
    SLOT.encode(INCARNATION_FORMAT_VERSION, &[], &body)
}

/// Decodes one slot (exactly [`INCARNATION_SLOT_LEN`] bytes) of format 2
/// or 1.
fn decode_slot(slot: &[u8]) -> Result<IncarnationRecord, ParseError> {
    let record = match SLOT.open(slot, INCARNATION_FORMAT_VERSION) {
        Ok((_, body)) => {
            let b: SlotBody = decode_body(body)?;
            if b.directory == DirectoryId(0) {
                return Err(ParseError::Corrupt("data-directory identity 0".into()));
            }
            IncarnationRecord {
                cluster_id: b.cluster_id,
                node_id: b.node_id,
                incarnation: b.incarnation,
                directory: Some(b.directory),
            }
        }
        Err(ParseError::Version(FORMAT_WITHOUT_IDENTITY)) => {
            let (_, body) = SLOT.open(slot, FORMAT_WITHOUT_IDENTITY)?;
            let b: SlotBodyV1 = decode_body(body)?;
            IncarnationRecord {
                cluster_id: b.cluster_id,
                node_id: b.node_id,
                incarnation: b.incarnation,
                directory: None,
            }
        }
        Err(e) => return Err(e),
    };
    if record.node_id == NodeId(0) {
        return Err(ParseError::Corrupt("node id 0 (node ids are positive)".into()));
    }
    if record.incarnation == 0 || record.incarnation > MAX_INCARNATION {
        return Err(ParseError::Corrupt(format!(
            "incarnation {} is outside 1..={MAX_INCARNATION}",
            record.incarnation
        )));
    }
    Ok(record)
}

/// Decodes a whole incarnation file. One damaged slot is survived; both
/// damaged, two slots of different nodes, or a file of the wrong size is
/// an error. A slot of a newer format is refused, whatever the other holds.
pub fn parse_incarnation_file(bytes: &[u8]) -> Result<IncarnationFile, ParseError> {
    if bytes.len() != 2 * INCARNATION_SLOT_LEN {
        return Err(ParseError::Corrupt(format!(
            "{} bytes, not the {} of two slots",
            bytes.len(),
            2 * INCARNATION_SLOT_LEN
        )));
    }
    let decoded =
        [decode_slot(&bytes[..INCARNATION_SLOT_LEN]), decode_slot(&bytes[INCARNATION_SLOT_LEN..])];
    for d in &decoded {
        if let Err(ParseError::Version(v)) = d {
            return Err(ParseError::Version(*v));
        }
    }
    let records: Vec<&IncarnationRecord> = decoded.iter().flatten().collect();
    let record = match records.as_slice() {
        [] => {
            let why = |d: &Result<IncarnationRecord, ParseError>| match d {
                Err(e) => e.to_string(),
                Ok(_) => String::new(),
            };
            return Err(ParseError::Corrupt(format!(
                "both copies are damaged (slot 0: {}; slot 1: {})",
                why(&decoded[0]),
                why(&decoded[1])
            )));
        }
        [a, b] if (&a.cluster_id, a.node_id) != (&b.cluster_id, b.node_id) => {
            return Err(ParseError::Corrupt(format!(
                "the two copies name different nodes (node {} of {:?}, node {} of {:?})",
                a.node_id, a.cluster_id, b.node_id, b.cluster_id
            )));
        }
        [a, b] if a.directory.is_some() && b.directory.is_some() && a.directory != b.directory => {
            return Err(ParseError::Corrupt(format!(
                "the two copies hold different data-directory identities ({} and {})",
                a.directory.unwrap_or(DirectoryId(0)),
                b.directory.unwrap_or(DirectoryId(0))
            )));
        }
        rs => {
            let mut record =
                rs.iter().max_by_key(|r| r.incarnation).map(|r| (*r).clone()).expect("one or two");
            // A start that upgraded one slot of a format-1 file and crashed:
            // the identity it took is in the upgraded slot.
            record.directory = rs.iter().find_map(|r| r.directory);
            record
        }
    };
    let slots = decoded.map(|d| d.map(|r| r.incarnation).map_err(|e| e.to_string()));
    Ok(IncarnationFile { record, slots })
}

/// What was found at the incarnation file's path.
#[derive(Debug)]
pub(crate) enum IncarnationRead {
    /// No file.
    Missing,
    /// A file that cannot be used.
    Unreadable(ParseError),
    /// A usable file.
    Found(IncarnationFile),
}

impl IncarnationRead {
    /// Classifies an incarnation file's contents (`None`: no file).
    pub(crate) fn from_bytes(bytes: Option<&[u8]>) -> IncarnationRead {
        match bytes.map(parse_incarnation_file) {
            None => IncarnationRead::Missing,
            Some(Ok(f)) => IncarnationRead::Found(f),
            Some(Err(e)) => IncarnationRead::Unreadable(e),
        }
    }
}

/// The incarnation a start takes, and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NextIncarnation {
    /// The number this start takes.
    pub incarnation: u64,
    /// The data directory's identity: the file's, or a new one.
    pub directory: DirectoryId,
    /// True when the identity is new (no file, a file of format 1, or a
    /// damaged file replaced by a reset).
    pub new_directory: bool,
    /// How it is written: in place over the slots of a good file (first
    /// the slot given), or as a new file.
    pub(crate) write: WriteMode,
    /// Set by a reset that replaced a damaged file: why a start without
    /// the reset would have been refused.
    pub reset: Option<String>,
}

/// How a new incarnation is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WriteMode {
    /// Over both slots of the existing file, this one first.
    InPlace {
        /// The slot written first.
        first: usize,
    },
    /// A new file (temporary file, sync, rename, directory sync).
    Create,
}

/// Decides the incarnation of a start, from what the file holds, for `id`,
/// at wall clock `now_us` (microseconds since the Unix epoch); `fresh` is
/// the identity a directory without one takes. With `reset`, a damaged file
/// is replaced by a clock reading instead of being refused. Pure.
pub(crate) fn decide(
    id: &Identity,
    path: &Path,
    found: &IncarnationRead,
    reset: bool,
    now_us: u64,
    fresh: DirectoryId,
) -> Result<NextIncarnation, StartError> {
    match found {
        IncarnationRead::Found(f) => {
            let r = &f.record;
            if r.cluster_id != id.cluster_id || r.node_id != id.node_id {
                return Err(StartError::ForeignState {
                    path: path.to_path_buf(),
                    found_cluster: r.cluster_id.clone(),
                    found_node: r.node_id,
                    expected_cluster: id.cluster_id.clone(),
                    expected_node: id.node_id,
                });
            }
            if r.incarnation >= MAX_INCARNATION {
                return Err(StartError::CorruptIncarnation {
                    path: path.to_path_buf(),
                    detail: format!("incarnation {} leaves no number above it", r.incarnation),
                });
            }
            Ok(NextIncarnation {
                incarnation: r.incarnation + 1,
                directory: r.directory.unwrap_or(fresh),
                new_directory: r.directory.is_none(),
                write: WriteMode::InPlace { first: f.first_to_write() },
                reset: None,
            })
        }
        IncarnationRead::Unreadable(ParseError::Version(version)) => {
            Err(StartError::UnsupportedStateFormat {
                path: path.to_path_buf(),
                version: *version,
                supported: INCARNATION_FORMAT_VERSION,
            })
        }
        IncarnationRead::Unreadable(ParseError::Corrupt(detail)) if !reset => {
            Err(StartError::CorruptIncarnation { path: path.to_path_buf(), detail: detail.clone() })
        }
        IncarnationRead::Unreadable(ParseError::Corrupt(detail)) => Ok(NextIncarnation {
            incarnation: from_clock(path, now_us)?,
            directory: fresh,
            new_directory: true,
            write: WriteMode::Create,
            reset: Some(format!("the incarnation file {} is corrupted ({detail})", path.display())),
        }),
        IncarnationRead::Missing => Ok(NextIncarnation {
            incarnation: from_clock(path, now_us)?,
            directory: fresh,
            new_directory: true,
            write: WriteMode::Create,
            reset: None,
        }),
    }
}

/// A first incarnation from the wall clock, if it reads a plausible time.
fn from_clock(path: &Path, now_us: u64) -> Result<u64, StartError> {
    if !(MIN_CLOCK_US..=MAX_INCARNATION).contains(&now_us) {
        return Err(StartError::IncarnationClock { path: path.to_path_buf(), now_us });
    }
    Ok(now_us)
}

/// A new data-directory identity: 128 bits from the operating system's
/// random source (never zero).
pub(crate) fn random_directory_id() -> DirectoryId {
    use rand_core::{OsRng, RngCore};
    loop {
        let mut bytes = [0u8; 16];
        OsRng.fill_bytes(&mut bytes);
        let id = u128::from_le_bytes(bytes);
        if id != 0 {
            return DirectoryId(id);
        }
    }
}

/// The wall clock in microseconds since the Unix epoch (0 if it reads
/// before the epoch, which [`decide`] refuses).
pub(crate) fn wall_clock_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// Reads the incarnation file in `dir` (a non-regular file is refused).
pub(crate) fn read(dir: &Path) -> Result<IncarnationRead, StartError> {
    let path = dir.join(INCARNATION_FILE);
    if !exists_regular(&path)? {
        return Ok(IncarnationRead::Missing);
    }
    let file = open_regular(&path, false)?;
    let bytes = read_bounded(&file, &path)?;
    Ok(IncarnationRead::from_bytes(Some(&bytes)))
}

/// Writes `next` for `id` into `dir` and syncs it: when this returns `Ok`,
/// no later start can take `next.incarnation` or a smaller number.
pub(crate) fn write(dir: &Path, id: &Identity, next: &NextIncarnation) -> Result<(), StartError> {
    let path = dir.join(INCARNATION_FILE);
    let slot = encode_slot(&IncarnationRecord {
        cluster_id: id.cluster_id.clone(),
        node_id: id.node_id,
        incarnation: next.incarnation,
        directory: Some(next.directory),
    });
    match next.write {
        WriteMode::InPlace { first } => {
            let file = open_regular(&path, true)?;
            for i in [first, 1 - first] {
                file.write_all_at(&slot, (i * INCARNATION_SLOT_LEN) as u64)
                    .and_then(|()| file.sync_data())
                    .map_err(io_err(&path))?;
            }
        }
        WriteMode::Create => create_two_slots(dir, INCARNATION_TMP_FILE, INCARNATION_FILE, &slot)
            .map_err(io_err(&path))?,
    }
    match &next.reset {
        Some(why) => warn!(
            incarnation = next.incarnation,
            refused = %why,
            "--reset-state: a new incarnation file was written, from the wall clock"
        ),
        None if next.write == WriteMode::Create => info!(
            incarnation = next.incarnation,
            path = %path.display(),
            "no incarnation file (a first start, or a directory of an earlier tenure): the \
             count starts at the wall clock"
        ),
        None => {}
    }
    if next.new_directory {
        info!(
            directory = %next.directory,
            path = %path.display(),
            "this data directory's identity (new: a first start, a directory of an earlier tenure, \
             or a replaced incarnation file)"
        );
    }
    Ok(())
}

/// The incarnation of the process that last ran the node of data directory
/// `dir`, once that process is gone: what a supervisor or systemd's
/// `ExecStopPost` may tell the peers is dead (`tenure notify-dead
/// --data-dir`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeadIncarnation {
    /// The node the directory belongs to.
    pub node_id: NodeId,
    /// Its cluster.
    pub cluster_id: String,
    /// The largest incarnation the directory records: the one its last
    /// process took (or, if that process crashed while starting, one it
    /// never sent, which peers refuse as never seen).
    pub incarnation: u64,
}

/// Why [`dead_incarnation`] cannot name a dead incarnation.
#[derive(Debug, thiserror::Error)]
pub enum DeadIncarnationError {
    /// A process holds the directory's lock: the node runs.
    #[error(
        "the data directory {0} is in use (its lock file is held): the node's process is \
         alive, so no incarnation of it is known to be dead"
    )]
    Alive(PathBuf),
    /// No incarnation file: no start of this build ever completed here.
    #[error("no incarnation file in {0}: no node of this build has run in that directory")]
    Missing(PathBuf),
    /// The file cannot be read or used.
    #[error(transparent)]
    Unusable(#[from] StartError),
}

/// Reads the incarnation the last process of data directory `dir` took, if
/// no process holds the directory's lock. The lock is tested with a shared
/// lock taken and released at once, which a node starting at that very
/// moment would see as held (it then refuses to start, and its supervisor
/// starts it again).
pub fn dead_incarnation(dir: &Path) -> Result<DeadIncarnation, DeadIncarnationError> {
    let lock_path = dir.join(LOCK_FILE);
    if exists_regular(&lock_path)? {
        let lock = open_regular(&lock_path, false)?;
        match lock.try_lock_shared() {
            Ok(()) => drop(lock),
            Err(fs::TryLockError::WouldBlock) => {
                return Err(DeadIncarnationError::Alive(dir.to_path_buf()))
            }
            Err(fs::TryLockError::Error(source)) => {
                return Err(StartError::Io { path: lock_path, source }.into())
            }
        }
    }
    let path = dir.join(INCARNATION_FILE);
    match read(dir)? {
        IncarnationRead::Missing => Err(DeadIncarnationError::Missing(dir.to_path_buf())),
        IncarnationRead::Unreadable(ParseError::Corrupt(detail)) => {
            Err(StartError::CorruptIncarnation { path, detail }.into())
        }
        IncarnationRead::Unreadable(ParseError::Version(version)) => {
            Err(StartError::UnsupportedStateFormat {
                path,
                version,
                supported: INCARNATION_FORMAT_VERSION,
            }
            .into())
        }
        IncarnationRead::Found(f) => Ok(DeadIncarnation {
            node_id: f.record.node_id,
            cluster_id: f.record.cluster_id,
            incarnation: f.record.incarnation,
        }),
    }
}

#[cfg(test)]
mod tests;
