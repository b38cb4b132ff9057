//! The bytes of the state file and of the record in the lock file: decoding
//! is pure (no file is opened here), so it can be tested and fuzzed alone.
//! [`SlotLayout`], the checksummed slot itself, is shared with the
//! incarnation file ([`super::incarnation`]).

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tenure_core::{HardState, NodeId, ProtocolKind, Term};

/// The size of one slot of the state file; the file holds two, and the lock
/// file one (its record of the newest state).
pub const SLOT_LEN: usize = 512;

const MAGIC: &[u8; 8] = b"TENURE-S";
/// The state file format this build writes.
pub const STATE_FORMAT_VERSION: u32 = 2;
/// The earlier format this build still reads (one copy, no protocol field).
pub(crate) const STATE_FORMAT_V1: u32 = 1;
/// The state file's slots (and the lock file's record): the header holds
/// the write's sequence number.
const STATE_SLOT: SlotLayout = SlotLayout { magic: MAGIC, file: "state", len: SLOT_LEN, extra: 8 };
/// Magic, version and body length of a version-1 file.
const V1_HEADER_LEN: usize = 8 + 4 + 4;
pub(crate) const CRC_LEN: usize = 4;
/// A slot's magic, then its format version: where the version ends.
const VERSION_END: usize = 8 + 4;
/// The body length field of a slot's header.
const BODY_LEN_LEN: usize = 4;
/// State and lock files are tiny; anything larger than this is not ours.
pub const MAX_STATE_FILE_LEN: u64 = 4096;

/// What one slot records: whose state it is, and the state. (The field order
/// is the postcard layout of the slot body: never reorder it.)
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The cluster the node belongs to.
    pub cluster_id: String,
    /// The node.
    pub node_id: NodeId,
    /// The node's term.
    pub term: Term,
    /// Whom it voted for in `term`.
    pub voted_for: Option<NodeId>,
    /// The election protocol the term and vote belong to.
    pub protocol: ProtocolKind,
}

impl Record {
    /// The term and vote.
    pub fn hard_state(&self) -> HardState {
        HardState { term: self.term, voted_for: self.voted_for }
    }
}

/// The body of a version-1 file.
#[derive(Deserialize)]
struct RecordV1 {
    cluster_id: String,
    node_id: NodeId,
    term: Term,
    voted_for: Option<NodeId>,
}

/// Why a state file or a lock file's record cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// The bytes are damaged or not ours.
    #[error("{0}")]
    Corrupt(String),
    /// A format version this build does not read.
    #[error("format version {0}")]
    Version(u32),
}

/// A state file, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateFile {
    /// The newest valid copy.
    pub record: Record,
    /// Its write sequence number (1 for a version-1 file).
    pub seq: u64,
    /// The file's format version.
    pub version: u32,
    /// A damaged slot that was skipped, and what is wrong with it.
    pub damaged_slot: Option<(usize, String)>,
}

/// A checksummed slot of a file kept in two copies:
///
/// | bytes   | content                                                |
/// |---------|--------------------------------------------------------|
/// | 8       | magic                                                  |
/// | 4       | format version, little endian                          |
/// | `extra` | more header (the state file's sequence number)         |
/// | 4       | body length `n`, little endian                         |
/// | n       | body: postcard                                         |
/// | 4       | CRC32 (IEEE) of everything before it, little endian    |
/// | ...     | zeros up to `len`                                      |
pub(crate) struct SlotLayout {
    /// The file's magic.
    pub(crate) magic: &'static [u8; 8],
    /// Which file, for messages ("not a tenure {file} file").
    pub(crate) file: &'static str,
    /// The slot's length.
    pub(crate) len: usize,
    /// Header bytes between the version and the body length.
    pub(crate) extra: usize,
}

impl SlotLayout {
    /// Magic, version, the extra header and the body length.
    pub(crate) const fn header_len(&self) -> usize {
        VERSION_END + self.extra + BODY_LEN_LEN
    }

    /// The largest body a slot holds.
    const fn max_body(&self) -> usize {
        self.len - self.header_len() - CRC_LEN
    }

    /// A slot of format `version` with the header bytes `extra`, holding
    /// `body`. Panics if the body does not fit: the callers' records are
    /// plain integers and a cluster id of at most 128 bytes, which always
    /// serialize and fit.
    pub(crate) fn encode(&self, version: u32, extra: &[u8], body: &impl Serialize) -> Vec<u8> {
        let file = self.file;
        let body = postcard::to_allocvec(body).expect("a slot body serializes");
        assert_eq!(extra.len(), self.extra, "{file} slot header");
        assert!(body.len() <= self.max_body(), "{file} body of {} bytes", body.len());
        let mut out = Vec::with_capacity(self.len);
        out.extend_from_slice(self.magic);
        out.extend_from_slice(&version.to_le_bytes());
        out.extend_from_slice(extra);
        out.extend_from_slice(&u32::try_from(body.len()).unwrap_or(u32::MAX).to_le_bytes());
        out.extend_from_slice(&body);
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out.resize(self.len, 0);
        out
    }

    /// Checks one slot (exactly `len` bytes): its magic, body length and
    /// checksum, then that its version is `version`; returns its extra
    /// header bytes and its body.
    pub(crate) fn open<'a>(
        &self,
        slot: &'a [u8],
        version: u32,
    ) -> Result<(&'a [u8], &'a [u8]), ParseError> {
        let corrupt = |s: &str| ParseError::Corrupt(s.to_owned());
        debug_assert_eq!(slot.len(), self.len);
        if &slot[..self.magic.len()] != self.magic {
            return Err(ParseError::Corrupt(format!("not a tenure {} file: bad magic", self.file)));
        }
        let header = self.header_len();
        let len = le_u32(&slot[header - BODY_LEN_LEN..header]) as usize;
        if len > self.max_body() {
            return Err(corrupt("body length larger than a slot"));
        }
        let end = header + len;
        if crc32fast::hash(&slot[..end]) != le_u32(&slot[end..end + CRC_LEN]) {
            return Err(corrupt("checksum mismatch"));
        }
        let found = le_u32(&slot[VERSION_END - 4..VERSION_END]);
        if found != version {
            return Err(ParseError::Version(found));
        }
        Ok((&slot[VERSION_END..VERSION_END + self.extra], &slot[header..end]))
    }
}

/// Decodes a postcard `body` that must fill its bytes exactly.
pub(crate) fn decode_body<T: DeserializeOwned>(body: &[u8]) -> Result<T, ParseError> {
    let (value, rest) = postcard::take_from_bytes::<T>(body)
        .map_err(|e| ParseError::Corrupt(format!("undecodable body: {e}")))?;
    if !rest.is_empty() {
        return Err(ParseError::Corrupt("trailing bytes after the body".into()));
    }
    Ok(value)
}

/// Encodes one slot holding `record` with sequence number `seq`.
pub(crate) fn encode_slot(seq: u64, record: &Record) -> Vec<u8> {
    STATE_SLOT.encode(STATE_FORMAT_VERSION, &seq.to_le_bytes(), record)
}

pub(crate) fn le_u32(b: &[u8]) -> u32 {
    u32::from_le_bytes(b[..4].try_into().expect("4 bytes"))
}

/// Checks what a checksum cannot: values no node ever writes.
fn check_values(record: &Record) -> Result<(), ParseError> {
    if !record.term.is_valid() {
        return Err(ParseError::Corrupt(format!(
            "term {} is above the largest valid term {}",
            record.term,
            Term::MAX_VALID
        )));
    }
    if record.node_id == NodeId(0) || record.voted_for == Some(NodeId(0)) {
        return Err(ParseError::Corrupt("node id 0 (node ids are positive)".into()));
    }
    Ok(())
}

/// Decodes one version-2 slot (exactly [`SLOT_LEN`] bytes) into its sequence
/// number and record.
fn decode_slot(slot: &[u8]) -> Result<(u64, Record), ParseError> {
    let (seq, body) = STATE_SLOT.open(slot, STATE_FORMAT_VERSION)?;
    let seq = u64::from_le_bytes(seq.try_into().expect("8 bytes"));
    let record: Record = decode_body(body)?;
    check_values(&record)?;
    Ok((seq, record))
}

/// Decodes a whole state file: two slots (version 2) or one copy (version 1).
/// One damaged slot is survived (and reported in
/// [`StateFile::damaged_slot`]); both damaged is an error.
pub fn parse_state_file(bytes: &[u8]) -> Result<StateFile, ParseError> {
    if bytes.len() != 2 * SLOT_LEN {
        return parse_v1(bytes);
    }
    let results = [decode_slot(&bytes[..SLOT_LEN]), decode_slot(&bytes[SLOT_LEN..])];
    // A slot of a newer format is not ours to judge: refuse rather than guess.
    for r in &results {
        if let Err(ParseError::Version(v)) = r {
            return Err(ParseError::Version(*v));
        }
    }
    let [first, second] = results;
    let loaded = |(seq, record), damaged_slot| StateFile {
        record,
        seq,
        version: STATE_FORMAT_VERSION,
        damaged_slot,
    };
    match (first, second) {
        (Ok(a), Ok(b)) => Ok(loaded(if b.0 > a.0 { b } else { a }, None)),
        (Ok(a), Err(e)) => Ok(loaded(a, Some((1, e.to_string())))),
        (Err(e), Ok(b)) => Ok(loaded(b, Some((0, e.to_string())))),
        (Err(a), Err(b)) => {
            Err(ParseError::Corrupt(format!("both copies are damaged (slot 0: {a}; slot 1: {b})")))
        }
    }
}

/// Decodes the lock file's record of the newest state: `None` for an empty
/// lock file (written by a tenure that kept no record), else one slot.
pub fn parse_lock_file(bytes: &[u8]) -> Result<Option<Record>, ParseError> {
    parse_lock_file_seq(bytes).map(|r| r.map(|(_, record)| record))
}

/// [`parse_lock_file`], with the record's write sequence number (that of the
/// state file write it followed).
pub(crate) fn parse_lock_file_seq(bytes: &[u8]) -> Result<Option<(u64, Record)>, ParseError> {
    match bytes.len() {
        0 => Ok(None),
        SLOT_LEN => decode_slot(bytes).map(Some),
        n => Err(ParseError::Corrupt(format!("{n} bytes, not the {SLOT_LEN} of a record"))),
    }
}

/// Reads a version-1 file (magic, version, length, body, CRC; no slots).
fn parse_v1(bytes: &[u8]) -> Result<StateFile, ParseError> {
    let corrupt = |s: &str| ParseError::Corrupt(s.to_owned());
    if bytes.len() < V1_HEADER_LEN + CRC_LEN {
        return Err(ParseError::Corrupt(format!("only {} bytes long", bytes.len())));
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
            ParseError::Version(version)
        } else {
            ParseError::Corrupt(format!(
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
    let v1: RecordV1 = decode_body(&content[V1_HEADER_LEN..])?;
    let record = Record {
        cluster_id: v1.cluster_id,
        node_id: v1.node_id,
        term: v1.term,
        voted_for: v1.voted_for,
        protocol: ProtocolKind::Raft,
    };
    check_values(&record)?;
    Ok(StateFile { record, seq: 1, version: STATE_FORMAT_V1, damaged_slot: None })
}

/// Test helpers shared with the other storage tests.
#[cfg(test)]
pub(crate) mod testing {
    use super::*;

    /// A version-1 file holding `record` (its protocol is dropped: version 1
    /// had none).
    pub(crate) fn v1_file(record: &Record) -> Vec<u8> {
        #[derive(Serialize)]
        struct V1<'a> {
            cluster_id: &'a str,
            node_id: NodeId,
            term: Term,
            voted_for: Option<NodeId>,
        }
        let body = postcard::to_allocvec(&V1 {
            cluster_id: &record.cluster_id,
            node_id: record.node_id,
            term: record.term,
            voted_for: record.voted_for,
        })
        .unwrap();
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&STATE_FORMAT_V1.to_le_bytes());
        bytes.extend_from_slice(&(body.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&body);
        let crc = crc32fast::hash(&bytes);
        bytes.extend_from_slice(&crc.to_le_bytes());
        bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Magic, version, sequence number and body length.
    const SLOT_HEADER_LEN: usize = STATE_SLOT.header_len();

    fn record() -> Record {
        Record {
            cluster_id: "c".into(),
            node_id: NodeId(2),
            term: Term(7),
            voted_for: Some(NodeId(3)),
            protocol: ProtocolKind::Paxos,
        }
    }

    fn file(seq0: u64, seq1: u64) -> Vec<u8> {
        let mut f = encode_slot(seq0, &record());
        f.extend(encode_slot(seq1, &Record { term: Term(6), ..record() }));
        f
    }

    #[test]
    fn round_trips_and_takes_the_newest_slot() {
        let l = parse_state_file(&file(3, 2)).unwrap();
        assert_eq!((l.record, l.seq, l.damaged_slot.is_none()), (record(), 3, true));
        let l = parse_state_file(&file(3, 4)).unwrap();
        assert_eq!((l.record.term, l.seq), (Term(6), 4));
    }

    #[test]
    fn a_biggest_cluster_id_fits_a_slot() {
        let b = Record { cluster_id: "x".repeat(crate::config::MAX_CLUSTER_ID_LEN), ..record() };
        let slot = encode_slot(u64::MAX, &b);
        assert_eq!(slot.len(), SLOT_LEN);
        assert_eq!(decode_slot(&slot).unwrap().1, b);
        assert_eq!(parse_lock_file(&slot).unwrap(), Some(b));
    }

    #[test]
    fn one_damaged_slot_is_survived_and_reported() {
        let good = file(5, 5);
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x40;
            let l = parse_state_file(&bad).unwrap_or_else(|e| panic!("flip at {i}: {e:?}"));
            assert_eq!(l.record.cluster_id, "c", "flip at {i}");
            // A flip inside a slot's checksummed part is detected; one in the
            // zero padding after it changes nothing that is read.
            let slot = i / SLOT_LEN;
            let used = SLOT_HEADER_LEN + postcard::to_allocvec(&record()).unwrap().len() + CRC_LEN;
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
        let e = parse_state_file(&bad).unwrap_err();
        assert!(matches!(&e, ParseError::Corrupt(d) if d.contains("both copies")), "{e:?}");
    }

    #[test]
    fn truncation_is_detected() {
        let bytes = file(1, 1);
        for n in 0..bytes.len() {
            assert!(parse_state_file(&bytes[..n]).is_err(), "truncation to {n} undetected");
        }
        let slot = encode_slot(1, &record());
        for n in 1..slot.len() {
            assert!(parse_lock_file(&slot[..n]).is_err(), "record cut to {n} undetected");
        }
        assert_eq!(parse_lock_file(&[]), Ok(None), "an empty lock file holds no record");
    }

    /// Checksummed but impossible: a term no node reaches, node id 0.
    #[test]
    fn values_no_node_writes_are_corrupt() {
        for bad in [
            Record { term: Term(Term::MAX_VALID.0 + 1), ..record() },
            Record { node_id: NodeId(0), ..record() },
            Record { voted_for: Some(NodeId(0)), ..record() },
        ] {
            let slot = encode_slot(1, &bad);
            let e = parse_lock_file(&slot).unwrap_err();
            assert!(matches!(e, ParseError::Corrupt(_)), "{bad:?}: {e:?}");
            let mut f = slot.clone();
            f.extend(&slot);
            assert!(parse_state_file(&f).is_err(), "{bad:?}");
            let v1 = testing::v1_file(&bad);
            assert!(parse_state_file(&v1).is_err(), "{bad:?}");
        }
        let ok = Record { term: Term::MAX_VALID, ..record() };
        assert_eq!(parse_lock_file(&encode_slot(1, &ok)).unwrap(), Some(ok));
    }

    #[test]
    fn version_1_reads_as_raft() {
        let v1 = testing::v1_file(&record());
        let f = parse_state_file(&v1).unwrap();
        assert_eq!(f.version, STATE_FORMAT_V1);
        assert_eq!(f.record, Record { protocol: ProtocolKind::Raft, ..record() });
    }
}
