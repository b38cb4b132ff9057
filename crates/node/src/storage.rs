//! Durable state in the data directory: the `state` file (term and vote) and
//! the `lock` file that keeps two processes out of one directory.
//!
//! # State file format (version 2)
//!
//! | bytes    | content                                                          |
//! |----------|------------------------------------------------------------------|
//! | 8        | magic `TENURE-S`                                                 |
//! | 4        | format version, little endian                                    |
//! | 4        | body length `n`, little endian                                   |
//! | n        | body: postcard of cluster id, node id, term, voted_for, protocol |
//! | 4        | CRC32 (IEEE) of everything before it, little endian              |
//!
//! Version 1 had no protocol field (only the Raft protocol existed); such files
//! are read as written by the Raft protocol and rewritten as version 2 at the
//! next write. A file of one protocol is never used by another: terms and votes
//! of one protocol mean nothing to another.
//!
//! Writes are atomic: the new content goes to `state.tmp`, which is fsynced,
//! renamed over `state`, and the directory is fsynced so the rename is durable.
//! A damaged or foreign state file is never overwritten: the node refuses to start.

use crate::error::StartError;
use serde::{Deserialize, Serialize};
use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use tenure_core::{HardState, NodeId, ProtocolKind, Term};

/// The state file's name inside the data directory.
pub const STATE_FILE: &str = "state";
/// The temporary file a new state is written to before the rename.
pub const STATE_TMP_FILE: &str = "state.tmp";
/// The lock file's name inside the data directory.
pub const LOCK_FILE: &str = "lock";

const MAGIC: &[u8; 8] = b"TENURE-S";
/// The state file format this build reads and writes.
pub const STATE_FORMAT_VERSION: u32 = 2;
/// The earlier format this build still reads (without the protocol field).
const STATE_FORMAT_V1: u32 = 1;
const HEADER_LEN: usize = 8 + 4 + 4;
const CRC_LEN: usize = 4;
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

/// An open, locked data directory. The lock is held until this value is dropped.
#[derive(Debug)]
pub struct DataDir {
    dir: PathBuf,
    cluster_id: String,
    node_id: NodeId,
    protocol: ProtocolKind,
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
        let data = DataDir {
            dir: dir.to_path_buf(),
            cluster_id: cluster_id.to_owned(),
            node_id,
            protocol,
            _lock: lock,
        };
        let state_path = data.state_path();
        let state = match fs::metadata(&state_path) {
            Ok(meta) => {
                if meta.len() > MAX_STATE_FILE_LEN {
                    return Err(StartError::CorruptState {
                        path: state_path,
                        detail: format!("{} bytes, larger than any state file", meta.len()),
                    });
                }
                let bytes = fs::read(&state_path).map_err(io_err(&state_path))?;
                data.check(&state_path, &bytes)?
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                // A fresh node: record who owns this directory right away, so a
                // misdirected node is caught at its first start.
                let state = HardState::default();
                data.write(state).map_err(io_err(&state_path))?;
                state
            }
            Err(source) => return Err(StartError::Io { path: state_path, source }),
        };
        Ok((data, state))
    }

    /// The state file's path.
    pub fn state_path(&self) -> PathBuf {
        self.dir.join(STATE_FILE)
    }

    /// Parses and validates a state file's bytes.
    fn check(&self, path: &Path, bytes: &[u8]) -> Result<HardState, StartError> {
        let corrupt =
            |detail: String| StartError::CorruptState { path: path.to_path_buf(), detail };
        let body = decode(bytes).map_err(|e| match e {
            DecodeError::Corrupt(detail) => corrupt(detail),
            DecodeError::Version(version) => StartError::UnsupportedStateFormat {
                path: path.to_path_buf(),
                version,
                supported: STATE_FORMAT_VERSION,
            },
        })?;
        if body.cluster_id != self.cluster_id || body.node_id != self.node_id {
            return Err(StartError::ForeignState {
                path: path.to_path_buf(),
                found_cluster: body.cluster_id,
                found_node: body.node_id,
                expected_cluster: self.cluster_id.clone(),
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

    /// Writes `state` durably and atomically (temp file, fsync, rename, fsync dir).
    pub fn write(&self, state: HardState) -> io::Result<()> {
        let bytes = encode(&StateBody {
            cluster_id: self.cluster_id.clone(),
            node_id: self.node_id,
            term: state.term,
            voted_for: state.voted_for,
            protocol: self.protocol,
        });
        let tmp = self.dir.join(STATE_TMP_FILE);
        {
            let mut f = OpenOptions::new().create(true).write(true).truncate(true).open(&tmp)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
        }
        fs::rename(&tmp, self.state_path())?;
        File::open(&self.dir)?.sync_all()
    }
}

enum DecodeError {
    Corrupt(String),
    Version(u32),
}

fn encode(body: &StateBody) -> Vec<u8> {
    // Serializing plain integers and a string into a Vec cannot fail.
    let body = postcard::to_allocvec(body).expect("state body serializes");
    let mut out = Vec::with_capacity(HEADER_LEN + body.len() + CRC_LEN);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&STATE_FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&u32::try_from(body.len()).unwrap_or(u32::MAX).to_le_bytes());
    out.extend_from_slice(&body);
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

fn decode(bytes: &[u8]) -> Result<StateBody, DecodeError> {
    let corrupt = |s: &str| DecodeError::Corrupt(s.to_owned());
    if bytes.len() < HEADER_LEN + CRC_LEN {
        return Err(DecodeError::Corrupt(format!("only {} bytes long", bytes.len())));
    }
    if &bytes[..8] != MAGIC {
        return Err(corrupt("not a tenure state file: bad magic"));
    }
    let (content, crc) = bytes.split_at(bytes.len() - CRC_LEN);
    let stored = u32::from_le_bytes(crc.try_into().expect("4 bytes"));
    if crc32fast::hash(content) != stored {
        return Err(corrupt("checksum mismatch"));
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
    if version != STATE_FORMAT_VERSION && version != STATE_FORMAT_V1 {
        return Err(DecodeError::Version(version));
    }
    let len = u32::from_le_bytes(bytes[12..16].try_into().expect("4 bytes")) as usize;
    if HEADER_LEN + len != content.len() {
        return Err(corrupt("body length does not match the file size"));
    }
    let undecodable = |e: postcard::Error| DecodeError::Corrupt(format!("undecodable body: {e}"));
    let body = &content[HEADER_LEN..];
    if version == STATE_FORMAT_V1 {
        let v1: StateBodyV1 = postcard::from_bytes(body).map_err(undecodable)?;
        return Ok(StateBody {
            cluster_id: v1.cluster_id,
            node_id: v1.node_id,
            term: v1.term,
            voted_for: v1.voted_for,
            protocol: ProtocolKind::Raft,
        });
    }
    postcard::from_bytes(body).map_err(undecodable)
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

    #[test]
    fn round_trips() {
        let bytes = encode(&body());
        assert!(matches!(decode(&bytes), Ok(b) if b == body()));
    }

    #[test]
    fn every_single_byte_flip_is_detected() {
        let bytes = encode(&body());
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x40;
            assert!(matches!(decode(&bad), Err(DecodeError::Corrupt(_))), "flip at {i} undetected");
        }
    }

    #[test]
    fn truncation_is_detected() {
        let bytes = encode(&body());
        for n in 0..bytes.len() {
            assert!(decode(&bytes[..n]).is_err(), "truncation to {n} undetected");
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
    fn version_1_files_are_read_as_raft() {
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
        fs::write(dir.path().join(STATE_FILE), &bytes).unwrap();
        let (data, hs) = DataDir::open(dir.path(), "c", NodeId(1), ProtocolKind::Raft).unwrap();
        assert_eq!(hs, HardState { term: Term(4), voted_for: Some(NodeId(2)) });
        drop(data);
        let paxos = DataDir::open(dir.path(), "c", NodeId(1), ProtocolKind::Paxos);
        assert!(matches!(
            paxos,
            Err(StartError::ProtocolMismatch {
                found: ProtocolKind::Raft,
                configured: ProtocolKind::Paxos,
                ..
            })
        ));
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
