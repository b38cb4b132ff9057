//! The state file and the lock file's record, and the start decision made
//! from them (`storage::recovery::plan`), with and without a reset.
//!
//! Input: one flag byte (bit 0: recompute the checksums, so that mutations
//! reach the body decoder and the decision instead of stopping at the CRC;
//! bits 1-2: no reset, a reset, or a reset with a minimum term; bits 3-4:
//! the configured protocol), the state file's length (u16 little endian,
//! `0xffff` for no state file), the minimum term (u64 little endian), then
//! the state file's bytes and the lock file's bytes.
//!
//! Properties: nothing panics; a plan never starts below the lock file's
//! record of this node and protocol, and a reset's never below either file
//! nor its minimum term (`recovery::check_plan`); a reset leaves a state that
//! starts as it is alone.

use std::path::Path;
use tenure_core::{NodeId, ProtocolKind, Term};
use tenure_node::storage::recovery::{check_plan, plan};
use tenure_node::storage::{parse_lock_file, parse_state_file, Identity, SLOT_LEN};

/// The flag byte, the state length and the minimum term.
const HEADER_LEN: usize = 1 + 2 + 8;
/// No state file.
const MISSING: u16 = 0xffff;
/// Slot header: magic, version, sequence number, body length.
const SLOT_HEADER_LEN: usize = 24;

/// The input, taken apart.
pub struct Input {
    /// The node's identity (cluster "c", node 1) and configured protocol.
    pub id: Identity,
    /// The state file's bytes, if there is one.
    pub state: Option<Vec<u8>>,
    /// The lock file's bytes.
    pub lock: Vec<u8>,
    /// `None`: a plain start; `Some(min_term)`: a reset.
    pub reset: Option<Option<Term>>,
}

/// Takes an input apart (`None` if it is too short for the header).
pub fn input(data: &[u8]) -> Option<Input> {
    let (header, rest) = data.split_at_checked(HEADER_LEN)?;
    let flags = header[0];
    let state_len = u16::from_le_bytes([header[1], header[2]]);
    let min_term = Term(u64::from_le_bytes(header[3..11].try_into().expect("8 bytes")));
    let protocol = match (flags >> 3) & 3 {
        1 => ProtocolKind::Ranked,
        2 => ProtocolKind::Paxos,
        _ => ProtocolKind::Raft,
    };
    let reset = match (flags >> 1) & 3 {
        1 => Some(None),
        2 => Some(Some(min_term)),
        _ => None,
    };
    let (state, lock) = if state_len == MISSING {
        (None, rest)
    } else {
        let (s, l) = rest.split_at(usize::from(state_len).min(rest.len()));
        (Some(s.to_vec()), l)
    };
    let mut input = Input {
        id: Identity { cluster_id: "c".into(), node_id: NodeId(1), protocol },
        state,
        lock: lock.to_vec(),
        reset,
    };
    if flags & 1 == 1 {
        if let Some(s) = input.state.as_mut() {
            fix_state_checksums(s);
        }
        if input.lock.len() == SLOT_LEN {
            fix_slot_checksum(&mut input.lock);
        }
    }
    Some(input)
}

/// Writes the right CRC into a slot whose body length fits.
fn fix_slot_checksum(slot: &mut [u8]) {
    let len = u32::from_le_bytes(slot[20..24].try_into().expect("4 bytes")) as usize;
    let end = SLOT_HEADER_LEN + len;
    if end + 4 <= slot.len() {
        let crc = crc32fast::hash(&slot[..end]);
        slot[end..end + 4].copy_from_slice(&crc.to_le_bytes());
    }
}

/// Fixes both slots of a version-2 file, or the trailing CRC of a version-1 one.
fn fix_state_checksums(file: &mut [u8]) {
    if file.len() == 2 * SLOT_LEN {
        let (a, b) = file.split_at_mut(SLOT_LEN);
        fix_slot_checksum(a);
        fix_slot_checksum(b);
    } else if file.len() >= 4 {
        let end = file.len() - 4;
        let crc = crc32fast::hash(&file[..end]);
        file[end..].copy_from_slice(&crc.to_le_bytes());
    }
}

/// Runs the target on one input.
pub fn run(data: &[u8]) {
    let Some(input) = input(data) else { return };
    let state = input.state.as_deref();
    if let Some(Ok(f)) = state.map(parse_state_file) {
        assert!(f.record.term.is_valid(), "{f:?}");
    }
    if let Ok(Some(r)) = parse_lock_file(&input.lock) {
        assert!(r.term.is_valid(), "{r:?}");
    }
    let dir = Path::new("/fuzz");
    let Ok(p) = plan(&input.id, dir, state, &input.lock, input.reset) else { return };
    if let Err(broken) = check_plan(&input.id, state, &input.lock, input.reset, &p) {
        panic!("{broken}");
    }
    if input.reset.is_none() {
        // A state that starts as it is is left alone by a reset.
        let reset = plan(&input.id, dir, state, &input.lock, Some(None));
        let reset = reset.unwrap_or_else(|e| panic!("starts, but a reset refuses: {e}"));
        assert_eq!((reset.state, reset.reset), (p.state, None));
    }
}
