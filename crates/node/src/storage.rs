//! Durable state in the data directory: the `state` file (term and vote) and
//! the `lock` file that keeps two processes out of one directory.
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
//! # Writing: one `fdatasync` on the critical path
//!
//! A write overwrites slot 0 in place and calls `fdatasync` once: the file
//! never changes size, so no metadata needs flushing, which costs a third of
//! the rename dance (temporary file, fsync, rename, directory fsync) that a
//! single-copy file would need. The messages that depend on the state leave
//! after that one sync. Then, off the critical path, [`DataDir::mirror`]
//! copies the same bytes into slot 1 and syncs again.
//!
//! Reading takes the valid slot with the highest sequence number:
//! * a crash while slot 0 is written leaves it torn, and slot 1 holds the
//!   previous state — the only one that was acknowledged, so nothing is lost;
//! * a crash while slot 1 is written leaves slot 0 complete and newest;
//! * once mirrored, both slots hold the same state, so one damaged slot (a bad
//!   sector, a flipped bit) is survived with a warning.
//!
//! Only when both slots are damaged does the node refuse to start; it never
//! overwrites a damaged file.
//!
//! Version 1 files (one copy, no protocol field, written by rename) are read as
//! written by the Raft protocol and rewritten in version 2 when opened. A file
//! of one protocol is never used by another: terms and votes of one protocol
//! mean nothing to another.

use crate::error::StartError;
use crate::sync::lock;
use serde::{Deserialize, Serialize};
use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{self, Write};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use tenure_core::{HardState, NodeId, ProtocolKind, Term};
use tracing::warn;

/// The state file's name inside the data directory.
pub const STATE_FILE: &str = "state";
/// The temporary file a new state file is written to before the rename
/// (creation and format upgrades only).
pub const STATE_TMP_FILE: &str = "state.tmp";
/// The lock file's name inside the data directory.
pub const LOCK_FILE: &str = "lock";
/// The size of one slot of the state file; the file holds two.
pub const SLOT_LEN: usize = 512;

const MAGIC: &[u8; 8] = b"TENURE-S";
/// The state file format this build writes.
pub const STATE_FORMAT_VERSION: u32 = 2;
/// The earlier format this build still reads (one copy, no protocol field).
const STATE_FORMAT_V1: u32 = 1;
/// Magic, version, sequence number and body length.
const SLOT_HEADER_LEN: usize = 8 + 4 + 8 + 4;
/// Magic, version and body length of a version-1 file.
const V1_HEADER_LEN: usize = 8 + 4 + 4;
const CRC_LEN: usize = 4;
/// The largest body a slot holds.
const MAX_BODY_LEN: usize = SLOT_LEN - SLOT_HEADER_LEN - CRC_LEN;
/// State files are tiny; anything larger than this is not ours.
const MAX_STATE_FILE_LEN: u64 = 4096;

#[derive(Serialize, Deserialize, Debug, PartialEq, Eq)]
struct StateBody {
    cluster_id: String,
    node_id: NodeId,
    term: Term,
    voted_for: Option<NodeId>,
    protocol: ProtocolKind,
}

/// The body of a version-1 file.
#[derive(Deserialize)]
struct StateBodyV1 {
    cluster_id: String,
    node_id: NodeId,
    term: Term,
    voted_for: Option<NodeId>,
}

/// The open state file and what was last written to it.
#[derive(Debug)]
struct Slots {
    file: File,
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
    cluster_id: String,
    node_id: NodeId,
    protocol: ProtocolKind,
    slots: Mutex<Slots>,
    /// Held for its exclusive lock (released when the file is closed).
    _lock: File,
}

impl DataDir {
    /// Creates the directory if missing, takes the lock and loads the state
    /// (writing an initial one for a fresh node).
    pub fn open(
        dir: &Path,
        cluster_id: &str,
        node_id: NodeId,
        protocol: ProtocolKind,
    ) -> Result<(DataDir, HardState), StartError> {
        let io_err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| StartError::Io { path, source }
        };
        fs::create_dir_all(dir).map_err(io_err(dir))?;
        let lock_path = dir.join(LOCK_FILE);
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(io_err(&lock_path))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(StartError::DataDirLocked { path: lock_path });
            }
            Err(TryLockError::Error(source)) => {
                return Err(StartError::Io { path: lock_path, source })
            }
        }
        let owner = Owner { cluster_id, node_id, protocol };
        let state_path = dir.join(STATE_FILE);
        let (state, seq) = match fs::metadata(&state_path) {
            Ok(meta) => {
                if meta.len() > MAX_STATE_FILE_LEN {
                    return Err(StartError::CorruptState {
                        path: state_path,
                        detail: format!("{} bytes, larger than any state file", meta.len()),
                    });
                }
                let bytes = fs::read(&state_path).map_err(io_err(&state_path))?;
                let loaded = load(&bytes).map_err(|e| e.into_start_error(&state_path))?;
                let state = owner.check(&state_path, &loaded.body)?;
                if let Some((slot, why)) = &loaded.damaged_slot {
                    warn!(
                        path = %state_path.display(),
                        slot,
                        damage = %why,
                        "one copy of the state is damaged (a write torn by a crash, or a bad \
                         sector); the other copy is used and written over the damaged one"
                    );
                }
                if loaded.damaged_slot.is_some() || loaded.version == STATE_FORMAT_V1 {
                    // Restore two good copies (or upgrade a version-1 file)
                    // atomically before any write touches slot 0.
                    create(dir, &owner.encode(loaded.seq, state)).map_err(io_err(&state_path))?;
                }
                (state, loaded.seq)
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                // A fresh node: record who owns this directory right away, so a
                // misdirected node is caught at its first start.
                let state = HardState::default();
                create(dir, &owner.encode(1, state)).map_err(io_err(&state_path))?;
                (state, 1)
            }
            Err(source) => return Err(StartError::Io { path: state_path, source }),
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&state_path)
            .map_err(io_err(&state_path))?;
        let data = DataDir {
            dir: dir.to_path_buf(),
            cluster_id: cluster_id.to_owned(),
            node_id,
            protocol,
            slots: Mutex::new(Slots { file, seq, mirrored: 0, latest: Vec::new() }),
            _lock: lock,
        };
        Ok((data, state))
    }

    /// The state file's path.
    pub fn state_path(&self) -> PathBuf {
        self.dir.join(STATE_FILE)
    }

    fn owner(&self) -> Owner<'_> {
        Owner { cluster_id: &self.cluster_id, node_id: self.node_id, protocol: self.protocol }
    }

    /// Writes `state` durably: overwrites slot 0 in place and `fdatasync`s it.
    /// When this returns `Ok`, the state survives a crash.
    ///
    /// If the state file was deleted (writes to the open file would go
    /// nowhere), it is created again with the full rename dance, which fails
    /// for as long as the directory is missing.
    pub fn write(&self, state: HardState) -> io::Result<()> {
        let mut slots = lock(&self.slots);
        let seq = slots.seq + 1;
        let bytes = self.owner().encode(seq, state);
        if slots.file.metadata()?.nlink() == 0 {
            create(&self.dir, &bytes)?;
            slots.file = OpenOptions::new().read(true).write(true).open(self.state_path())?;
            slots.mirrored = seq;
        } else {
            slots.file.write_all_at(&bytes, 0)?;
            slots.file.sync_data()?;
        }
        slots.seq = seq;
        slots.latest = bytes;
        Ok(())
    }

    /// Copies the newest state into slot 1 (and syncs), so that both slots hold
    /// it. Call it after the messages that waited for [`DataDir::write`] left;
    /// a failure only loses the redundancy, never the state.
    pub fn mirror(&self) -> io::Result<()> {
        let mut slots = lock(&self.slots);
        if slots.mirrored >= slots.seq || slots.latest.is_empty() {
            return Ok(());
        }
        let bytes = std::mem::take(&mut slots.latest);
        let result =
            slots.file.write_all_at(&bytes, SLOT_LEN as u64).and_then(|()| slots.file.sync_data());
        if result.is_ok() {
            slots.mirrored = slots.seq;
        }
        slots.latest = bytes;
        result
    }
}

/// Who a state file belongs to.
struct Owner<'a> {
    cluster_id: &'a str,
    node_id: NodeId,
    protocol: ProtocolKind,
}

impl Owner<'_> {
    /// Checks that a loaded body belongs to this owner.
    fn check(&self, path: &Path, body: &StateBody) -> Result<HardState, StartError> {
        if body.cluster_id != self.cluster_id || body.node_id != self.node_id {
            return Err(StartError::ForeignState {
                path: path.to_path_buf(),
                found_cluster: body.cluster_id.clone(),
                found_node: body.node_id,
                expected_cluster: self.cluster_id.to_owned(),
                expected_node: self.node_id,
            });
        }
        if body.protocol != self.protocol {
            return Err(StartError::ProtocolMismatch {
                path: path.to_path_buf(),
                found: body.protocol,
                configured: self.protocol,
            });
        }
        Ok(HardState { term: body.term, voted_for: body.voted_for })
    }

    /// One slot holding `state` with sequence number `seq`.
    fn encode(&self, seq: u64, state: HardState) -> Vec<u8> {
        encode_slot(
            seq,
            &StateBody {
                cluster_id: self.cluster_id.to_owned(),
                node_id: self.node_id,
                term: state.term,
                voted_for: state.voted_for,
                protocol: self.protocol,
            },
        )
    }
}

/// Writes a new state file holding `slot` twice: temporary file, fsync, rename,
/// directory fsync (the file's creation is metadata, so the full dance is needed).
fn create(dir: &Path, slot: &[u8]) -> io::Result<()> {
    let tmp = dir.join(STATE_TMP_FILE);
    {
        let mut f = OpenOptions::new().create(true).write(true).truncate(true).open(&tmp)?;
        f.write_all(slot)?;
        f.write_all(slot)?;
        f.sync_all()?;
    }
    fs::rename(&tmp, dir.join(STATE_FILE))?;
    File::open(dir)?.sync_all()
}

#[derive(Debug)]
enum DecodeError {
    Corrupt(String),
    Version(u32),
}

impl DecodeError {
    fn into_start_error(self, path: &Path) -> StartError {
        match self {
            DecodeError::Corrupt(detail) => {
                StartError::CorruptState { path: path.to_path_buf(), detail }
            }
            DecodeError::Version(version) => StartError::UnsupportedStateFormat {
                path: path.to_path_buf(),
                version,
                supported: STATE_FORMAT_VERSION,
            },
        }
    }
}

/// What a state file held.
#[derive(Debug)]
struct Loaded {
    body: StateBody,
    seq: u64,
    version: u32,
    /// A damaged slot that was skipped, and what is wrong with it.
    damaged_slot: Option<(usize, String)>,
}

fn encode_slot(seq: u64, body: &StateBody) -> Vec<u8> {
    // Serializing plain integers and a string into a Vec cannot fail; the
    // cluster id is at most 128 bytes, so the body always fits in a slot.
    let body = postcard::to_allocvec(body).expect("state body serializes");
    assert!(body.len() <= MAX_BODY_LEN, "state body of {} bytes does not fit a slot", body.len());
    let mut out = Vec::with_capacity(SLOT_LEN);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&STATE_FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(&u32::try_from(body.len()).unwrap_or(u32::MAX).to_le_bytes());
    out.extend_from_slice(&body);
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out.resize(SLOT_LEN, 0);
    out
}

fn le_u32(b: &[u8]) -> u32 {
    u32::from_le_bytes(b[..4].try_into().expect("4 bytes"))
}

/// Decodes one version-2 slot into its sequence number and body.
fn decode_slot(slot: &[u8]) -> Result<(u64, StateBody), DecodeError> {
    let corrupt = |s: &str| DecodeError::Corrupt(s.to_owned());
    if &slot[..8] != MAGIC {
        return Err(corrupt("not a tenure state file: bad magic"));
    }
    let len = le_u32(&slot[20..24]) as usize;
    if len > MAX_BODY_LEN {
        return Err(corrupt("body length larger than a slot"));
    }
    let end = SLOT_HEADER_LEN + len;
    let stored = le_u32(&slot[end..end + CRC_LEN]);
    if crc32fast::hash(&slot[..end]) != stored {
        return Err(corrupt("checksum mismatch"));
    }
    let version = le_u32(&slot[8..12]);
    if version != STATE_FORMAT_VERSION {
        return Err(DecodeError::Version(version));
    }
    let seq = u64::from_le_bytes(slot[12..20].try_into().expect("8 bytes"));
    let body = postcard::from_bytes(&slot[SLOT_HEADER_LEN..end])
        .map_err(|e| DecodeError::Corrupt(format!("undecodable body: {e}")))?;
    Ok((seq, body))
}

/// Reads a whole state file: two slots (version 2) or one copy (version 1).
fn load(bytes: &[u8]) -> Result<Loaded, DecodeError> {
    if bytes.len() != 2 * SLOT_LEN {
        return load_v1(bytes);
    }
    let results = [decode_slot(&bytes[..SLOT_LEN]), decode_slot(&bytes[SLOT_LEN..])];
    // A slot of a newer format is not ours to judge: refuse rather than guess.
    for r in &results {
        if let Err(DecodeError::Version(v)) = r {
            return Err(DecodeError::Version(*v));
        }
    }
    let [first, second] = results;
    let loaded = |(seq, body), damaged_slot| Loaded {
        body,
        seq,
        version: STATE_FORMAT_VERSION,
        damaged_slot,
    };
    match (first, second) {
        (Ok(a), Ok(b)) => Ok(loaded(if b.0 > a.0 { b } else { a }, None)),
        (Ok(a), Err(e)) => Ok(loaded(a, Some((1, describe(&e))))),
        (Err(e), Ok(b)) => Ok(loaded(b, Some((0, describe(&e))))),
        (Err(a), Err(b)) => Err(DecodeError::Corrupt(format!(
            "both copies are damaged (slot 0: {}; slot 1: {})",
            describe(&a),
            describe(&b)
        ))),
    }
}

fn describe(e: &DecodeError) -> String {
    match e {
        DecodeError::Corrupt(s) => s.clone(),
        DecodeError::Version(v) => format!("format version {v}"),
    }
}

/// Reads a version-1 file (magic, version, length, body, CRC; no slots).
fn load_v1(bytes: &[u8]) -> Result<Loaded, DecodeError> {
    let corrupt = |s: &str| DecodeError::Corrupt(s.to_owned());
    if bytes.len() < V1_HEADER_LEN + CRC_LEN {
        return Err(DecodeError::Corrupt(format!("only {} bytes long", bytes.len())));
    }
    if &bytes[..8] != MAGIC {
        return Err(corrupt("not a tenure state file: bad magic"));
    }
    let (content, crc) = bytes.split_at(bytes.len() - CRC_LEN);
    if crc32fast::hash(content) != le_u32(crc) {
        return Err(corrupt("checksum mismatch"));
    }
    let version = le_u32(&bytes[8..12]);
    if version != STATE_FORMAT_V1 {
        // A newer format with another layout, or a version-2 file cut short.
        return Err(if version > STATE_FORMAT_VERSION {
            DecodeError::Version(version)
        } else {
            DecodeError::Corrupt(format!(
                "{} bytes, not {} as version {version} requires",
                bytes.len(),
                2 * SLOT_LEN
            ))
        });
    }
    let len = le_u32(&bytes[12..16]) as usize;
    if V1_HEADER_LEN + len != content.len() {
        return Err(corrupt("body length does not match the file size"));
    }
    let v1: StateBodyV1 = postcard::from_bytes(&content[V1_HEADER_LEN..])
        .map_err(|e| DecodeError::Corrupt(format!("undecodable body: {e}")))?;
    Ok(Loaded {
        body: StateBody {
            cluster_id: v1.cluster_id,
            node_id: v1.node_id,
            term: v1.term,
            voted_for: v1.voted_for,
            protocol: ProtocolKind::Raft,
        },
        seq: 1,
        version: STATE_FORMAT_V1,
        damaged_slot: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body() -> StateBody {
        StateBody {
            cluster_id: "c".into(),
            node_id: NodeId(2),
            term: Term(7),
            voted_for: Some(NodeId(3)),
            protocol: ProtocolKind::Paxos,
        }
    }

    fn file(seq0: u64, seq1: u64) -> Vec<u8> {
        let mut f = encode_slot(seq0, &body());
        f.extend(encode_slot(seq1, &StateBody { term: Term(6), ..body() }));
        f
    }

    #[test]
    fn round_trips_and_takes_the_newest_slot() {
        let l = load(&file(3, 2)).unwrap();
        assert_eq!((l.body, l.seq, l.damaged_slot.is_none()), (body(), 3, true));
        let l = load(&file(3, 4)).unwrap();
        assert_eq!((l.body.term, l.seq), (Term(6), 4));
    }

    #[test]
    fn a_biggest_cluster_id_fits_a_slot() {
        let b = StateBody { cluster_id: "x".repeat(crate::config::MAX_CLUSTER_ID_LEN), ..body() };
        let slot = encode_slot(u64::MAX, &b);
        assert_eq!(slot.len(), SLOT_LEN);
        assert_eq!(decode_slot(&slot).unwrap().1, b);
    }

    #[test]
    fn one_damaged_slot_is_survived_and_reported() {
        let good = file(5, 5);
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x40;
            let l = load(&bad).unwrap_or_else(|e| panic!("flip at {i}: {e:?}"));
            assert_eq!(l.body.cluster_id, "c", "flip at {i}");
            // A flip inside a slot's checksummed part is detected; one in the
            // zero padding after it changes nothing that is read.
            let slot = i / SLOT_LEN;
            let used = SLOT_HEADER_LEN + postcard::to_allocvec(&body()).unwrap().len() + CRC_LEN;
            if i % SLOT_LEN < used {
                assert_eq!(l.damaged_slot.map(|(s, _)| s), Some(slot), "flip at {i}");
            }
        }
    }

    #[test]
    fn both_slots_damaged_is_corrupt() {
        let mut bad = file(5, 5);
        bad[30] ^= 1;
        bad[SLOT_LEN + 30] ^= 1;
        let e = load(&bad).unwrap_err();
        assert!(matches!(&e, DecodeError::Corrupt(d) if d.contains("both copies")), "{e:?}");
    }

    #[test]
    fn truncation_is_detected() {
        let bytes = file(1, 1);
        for n in 0..bytes.len() {
            assert!(load(&bytes[..n]).is_err(), "truncation to {n} undetected");
        }
    }

    #[test]
    fn lock_excludes_a_second_opener_and_is_released_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let (first, state) = DataDir::open(dir.path(), "c", NodeId(1), ProtocolKind::Raft).unwrap();
        assert_eq!(state, HardState::default());
        let second = DataDir::open(dir.path(), "c", NodeId(1), ProtocolKind::Raft);
        assert!(
            matches!(second, Err(StartError::DataDirLocked { ref path }) if path.ends_with(LOCK_FILE))
        );
        drop(first);
        assert!(DataDir::open(dir.path(), "c", NodeId(1), ProtocolKind::Raft).is_ok());
    }

    #[test]
    fn writes_are_read_back_and_foreign_owners_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (data, _) = DataDir::open(dir.path(), "c", NodeId(1), ProtocolKind::Raft).unwrap();
        let hs = HardState { term: Term(9), voted_for: Some(NodeId(1)) };
        data.write(hs).unwrap();
        drop(data);
        let (data, loaded) = DataDir::open(dir.path(), "c", NodeId(1), ProtocolKind::Raft).unwrap();
        assert_eq!(loaded, hs);
        drop(data);
        let before = fs::read(dir.path().join(STATE_FILE)).unwrap();
        let other_node = DataDir::open(dir.path(), "c", NodeId(2), ProtocolKind::Raft);
        assert!(matches!(other_node, Err(StartError::ForeignState { found_node: NodeId(1), .. })));
        let other_cluster = DataDir::open(dir.path(), "d", NodeId(1), ProtocolKind::Raft);
        assert!(
            matches!(other_cluster, Err(StartError::ForeignState { ref found_cluster, .. }) if found_cluster == "c")
        );
        assert_eq!(fs::read(dir.path().join(STATE_FILE)).unwrap(), before);
    }

    #[test]
    fn a_write_survives_without_its_mirror_and_the_mirror_survives_a_damaged_primary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(STATE_FILE);
        let open = || DataDir::open(dir.path(), "c", NodeId(1), ProtocolKind::Raft).unwrap();
        let (data, _) = open();
        let first = HardState { term: Term(3), voted_for: Some(NodeId(1)) };
        data.write(first).unwrap();
        data.mirror().unwrap();
        let second = HardState { term: Term(4), voted_for: Some(NodeId(2)) };
        data.write(second).unwrap();
        drop(data);
        // Written but not mirrored (a crash right after the messages left):
        // slot 0 has the newest state and wins.
        assert_eq!(open().1, second);
        assert_eq!(fs::metadata(&path).unwrap().len(), 2 * SLOT_LEN as u64);

        let (data, _) = open();
        data.write(second).unwrap();
        data.mirror().unwrap();
        drop(data);
        // Both slots hold it: a damaged slot 0 loses nothing.
        let mut bytes = fs::read(&path).unwrap();
        bytes[40] ^= 0xff;
        fs::write(&path, &bytes).unwrap();
        assert_eq!(open().1, second);
    }

    #[test]
    fn a_torn_primary_falls_back_to_the_previous_acknowledged_state() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(STATE_FILE);
        let (data, _) = DataDir::open(dir.path(), "c", NodeId(1), ProtocolKind::Raft).unwrap();
        let acked = HardState { term: Term(3), voted_for: Some(NodeId(1)) };
        data.write(acked).unwrap();
        data.mirror().unwrap();
        drop(data);
        // A crash in the middle of the next write: half of slot 0 is new bytes.
        let mut bytes = fs::read(&path).unwrap();
        let next = encode_slot(9, &StateBody { term: Term(4), ..body() });
        bytes[..SLOT_LEN / 16].copy_from_slice(&next[..SLOT_LEN / 16]);
        fs::write(&path, &bytes).unwrap();
        let (_, loaded) = DataDir::open(dir.path(), "c", NodeId(1), ProtocolKind::Raft).unwrap();
        assert_eq!(loaded, acked);
    }

    #[test]
    fn version_1_files_are_read_as_raft_and_upgraded() {
        #[derive(Serialize)]
        struct V1<'a> {
            cluster_id: &'a str,
            node_id: NodeId,
            term: Term,
            voted_for: Option<NodeId>,
        }
        let body = postcard::to_allocvec(&V1 {
            cluster_id: "c",
            node_id: NodeId(1),
            term: Term(4),
            voted_for: Some(NodeId(2)),
        })
        .unwrap();
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&STATE_FORMAT_V1.to_le_bytes());
        bytes.extend_from_slice(&(body.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&body);
        let crc = crc32fast::hash(&bytes);
        bytes.extend_from_slice(&crc.to_le_bytes());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(STATE_FILE);
        fs::write(&path, &bytes).unwrap();
        // Another protocol is refused before anything is rewritten.
        let paxos = DataDir::open(dir.path(), "c", NodeId(1), ProtocolKind::Paxos);
        assert!(matches!(
            paxos,
            Err(StartError::ProtocolMismatch {
                found: ProtocolKind::Raft,
                configured: ProtocolKind::Paxos,
                ..
            })
        ));
        assert_eq!(fs::read(&path).unwrap(), bytes);
        let (data, hs) = DataDir::open(dir.path(), "c", NodeId(1), ProtocolKind::Raft).unwrap();
        let expected = HardState { term: Term(4), voted_for: Some(NodeId(2)) };
        assert_eq!(hs, expected);
        drop(data);
        assert_eq!(fs::metadata(&path).unwrap().len(), 2 * SLOT_LEN as u64, "upgraded");
        assert_eq!(
            DataDir::open(dir.path(), "c", NodeId(1), ProtocolKind::Raft).unwrap().1,
            expected
        );
    }

    #[test]
    fn another_protocols_state_is_refused_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let (data, _) = DataDir::open(dir.path(), "c", NodeId(1), ProtocolKind::Ranked).unwrap();
        data.write(HardState { term: Term(3), voted_for: Some(NodeId(1)) }).unwrap();
        drop(data);
        let before = fs::read(dir.path().join(STATE_FILE)).unwrap();
        let err = DataDir::open(dir.path(), "c", NodeId(1), ProtocolKind::Raft).unwrap_err();
        assert!(err.to_string().contains("written by the ranked protocol"), "{err}");
        assert_eq!(fs::read(dir.path().join(STATE_FILE)).unwrap(), before);
    }
}
