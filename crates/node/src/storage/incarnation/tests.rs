use super::*;
use crate::storage::format::{le_u32, CRC_LEN};
use crate::storage::{reset, DataDir, ResetOutcome, STATE_FILE};
use tenure_core::{HardState, ProtocolKind, Term};

/// Magic, version and body length.
const HEADER_LEN: usize = SLOT.header_len();

fn id() -> Identity {
    Identity { cluster_id: "c".into(), node_id: NodeId(1), protocol: ProtocolKind::Raft }
}

/// The identity in the records these tests write.
const DIR: DirectoryId = DirectoryId(0xd1);
/// The identity a directory without one takes in these tests.
const FRESH: DirectoryId = DirectoryId(0xf7);

fn record(incarnation: u64) -> IncarnationRecord {
    IncarnationRecord {
        cluster_id: "c".into(),
        node_id: NodeId(1),
        incarnation,
        directory: Some(DIR),
    }
}

/// A slot of format 1 (no identity), as tenure wrote it before identities.
fn slot_v1(incarnation: u64) -> Vec<u8> {
    #[derive(Serialize)]
    struct V1 {
        cluster_id: String,
        node_id: NodeId,
        incarnation: u64,
    }
    let body = V1 { cluster_id: "c".into(), node_id: NodeId(1), incarnation };
    SLOT.encode(FORMAT_WITHOUT_IDENTITY, &[], &body)
}

fn file(a: u64, b: u64) -> Vec<u8> {
    let mut f = encode_slot(&record(a));
    f.extend(encode_slot(&record(b)));
    f
}

const NOW: u64 = 1_750_000_000_000_000;
const PATH: &str = "/d/incarnation";

fn next(bytes: Option<&[u8]>, reset: bool) -> Result<NextIncarnation, StartError> {
    decide(&id(), Path::new(PATH), &IncarnationRead::from_bytes(bytes), reset, NOW, FRESH)
}

/// The slot's bytes with the checksum recomputed (for values a checksum
/// cannot catch).
fn slot_with(f: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut s = encode_slot(&record(5));
    f(&mut s);
    let len = le_u32(&s[12..16]) as usize;
    let crc = crc32fast::hash(&s[..HEADER_LEN + len]);
    s[HEADER_LEN + len..HEADER_LEN + len + CRC_LEN].copy_from_slice(&crc.to_le_bytes());
    s
}

#[test]
fn the_larger_slot_wins_and_the_next_start_adds_one() {
    let f = parse_incarnation_file(&file(7, 8)).unwrap();
    assert_eq!((f.record.incarnation, f.slots.clone()), (8, [Ok(7), Ok(8)]));
    assert_eq!(f.first_to_write(), 0, "the smaller slot is written first");
    assert_eq!(parse_incarnation_file(&file(9, 8)).unwrap().first_to_write(), 1);
    let n = next(Some(&file(7, 8)), false).unwrap();
    assert_eq!(
        n,
        NextIncarnation {
            incarnation: 9,
            directory: DIR,
            new_directory: false,
            write: WriteMode::InPlace { first: 0 },
            reset: None
        }
    );
    let biggest = IncarnationRecord { cluster_id: "x".repeat(128), ..record(MAX_INCARNATION) };
    let slot = encode_slot(&biggest);
    assert_eq!(slot.len(), INCARNATION_SLOT_LEN);
    assert_eq!(decode_slot(&slot).unwrap(), biggest);
}

/// Every single flipped byte of a file whose slots agree is survived, and a
/// flip in a slot's checksummed part is reported in that slot.
#[test]
fn one_damaged_slot_is_survived_and_written_first() {
    let good = file(5, 5);
    let used = HEADER_LEN + le_u32(&good[12..16]) as usize + CRC_LEN;
    for i in 0..good.len() {
        let mut bad = good.clone();
        bad[i] ^= 0x40;
        let f = parse_incarnation_file(&bad).unwrap_or_else(|e| panic!("flip at {i}: {e}"));
        assert_eq!(f.record, record(5), "flip at {i}");
        let slot = i / INCARNATION_SLOT_LEN;
        if i % INCARNATION_SLOT_LEN < used {
            assert!(f.slots[slot].is_err(), "flip at {i} undetected");
            assert_eq!(f.first_to_write(), slot, "the damaged slot is written first");
        }
    }
}

#[test]
fn both_slots_damaged_truncated_or_mixed_is_corrupt() {
    let mut bad = file(5, 5);
    bad[20] ^= 1;
    bad[INCARNATION_SLOT_LEN + 20] ^= 1;
    let e = parse_incarnation_file(&bad).unwrap_err();
    assert!(matches!(&e, ParseError::Corrupt(d) if d.contains("both copies")), "{e:?}");
    let whole = file(5, 5);
    for n in 0..whole.len() {
        assert!(parse_incarnation_file(&whole[..n]).is_err(), "cut to {n} undetected");
    }
    let mut longer = whole.clone();
    longer.push(0);
    assert!(parse_incarnation_file(&longer).is_err());
    let mut mixed = encode_slot(&record(5));
    mixed.extend(encode_slot(&IncarnationRecord { node_id: NodeId(2), ..record(6) }));
    let e = parse_incarnation_file(&mixed).unwrap_err();
    assert!(matches!(&e, ParseError::Corrupt(d) if d.contains("different nodes")), "{e:?}");
}

/// Checksummed but impossible: incarnation 0, above the maximum, node 0; and
/// a newer format, which is refused whatever the other slot holds.
#[test]
fn values_no_node_writes_are_corrupt_and_newer_formats_refused() {
    for bad in [
        IncarnationRecord { incarnation: 0, ..record(1) },
        IncarnationRecord { incarnation: MAX_INCARNATION + 1, ..record(1) },
        IncarnationRecord { node_id: NodeId(0), ..record(1) },
        IncarnationRecord { directory: Some(DirectoryId(0)), ..record(1) },
    ] {
        let e = decode_slot(&encode_slot(&bad)).unwrap_err();
        assert!(matches!(e, ParseError::Corrupt(_)), "{bad:?}: {e:?}");
    }
    let newer = slot_with(|s| s[8] = 3);
    let mut f = newer.clone();
    f.extend(encode_slot(&record(5)));
    assert_eq!(parse_incarnation_file(&f), Err(ParseError::Version(3)));
    for reset in [false, true] {
        let e = next(Some(&f), reset).unwrap_err();
        assert!(matches!(e, StartError::UnsupportedStateFormat { version: 3, .. }), "{e:?}");
    }
}

#[test]
fn a_missing_file_starts_at_the_clock_and_a_wrong_clock_is_refused() {
    let n = next(None, false).unwrap();
    let expected = NextIncarnation {
        incarnation: NOW,
        directory: FRESH,
        new_directory: true,
        write: WriteMode::Create,
        reset: None,
    };
    assert_eq!(n, expected);
    for bad in [0, MIN_CLOCK_US - 1, MAX_INCARNATION + 1] {
        let missing = IncarnationRead::Missing;
        let e = decide(&id(), Path::new(PATH), &missing, false, bad, FRESH).unwrap_err();
        assert!(matches!(e, StartError::IncarnationClock { now_us, .. } if now_us == bad), "{e:?}");
        assert!(e.to_string().contains("Set the system clock"), "{e}");
    }
}

#[test]
fn a_corrupt_file_is_refused_and_a_reset_takes_the_clock() {
    let e = next(Some(b"junk"), false).unwrap_err();
    assert!(matches!(&e, StartError::CorruptIncarnation { path, .. } if path == Path::new(PATH)));
    assert!(e.to_string().contains("--reset-state"), "{e}");
    let n = next(Some(b"junk"), true).unwrap();
    assert_eq!((n.incarnation, n.write), (NOW, WriteMode::Create));
    assert_eq!((n.directory, n.new_directory), (FRESH, true), "a replaced file is a new identity");
    assert!(n.reset.unwrap().contains("corrupted"));
    // A good file is not touched by a reset: it just counts on.
    assert_eq!(next(Some(&file(3, 3)), true).unwrap().incarnation, 4);
    let full = next(Some(&file(MAX_INCARNATION, MAX_INCARNATION)), false).unwrap_err();
    assert!(matches!(full, StartError::CorruptIncarnation { .. }), "{full:?}");
}

#[test]
fn another_nodes_file_is_refused_even_by_a_reset() {
    let mut other = encode_slot(&IncarnationRecord { node_id: NodeId(2), ..record(4) });
    other.extend(other.clone());
    for reset in [false, true] {
        match next(Some(&other), reset) {
            Err(StartError::ForeignState { found_node: NodeId(2), path, .. }) => {
                assert_eq!(path, Path::new(PATH))
            }
            r => panic!("{r:?}"),
        }
    }
}

#[test]
fn a_file_of_format_1_is_read_and_takes_an_identity() {
    let mut v1 = slot_v1(7);
    v1.extend(slot_v1(7));
    let f = parse_incarnation_file(&v1).unwrap();
    assert_eq!((f.record.incarnation, f.record.directory), (7, None));
    let n = next(Some(&v1), false).unwrap();
    assert_eq!((n.incarnation, n.directory, n.new_directory), (8, FRESH, true));
    // A start that upgraded one slot and crashed: the identity it took stays,
    // whichever slot it is in.
    for mixed in [[encode_slot(&record(8)), slot_v1(7)], [slot_v1(7), encode_slot(&record(8))]] {
        let n = next(Some(&mixed.concat()), false).unwrap();
        assert_eq!((n.incarnation, n.directory, n.new_directory), (9, DIR, false));
    }
}

#[test]
fn two_copies_with_different_identities_are_corrupt() {
    let other = IncarnationRecord { directory: Some(DirectoryId(0xd2)), ..record(5) };
    let both = [encode_slot(&record(5)), encode_slot(&other)].concat();
    let e = parse_incarnation_file(&both).unwrap_err();
    assert!(matches!(&e, ParseError::Corrupt(d) if d.contains("identities")), "{e:?}");
}

// The files, through `DataDir`.

fn open(dir: &Path) -> Result<DataDir, StartError> {
    DataDir::open(dir, id()).map(|(d, _)| d)
}

fn on_disk(dir: &Path) -> IncarnationFile {
    parse_incarnation_file(&fs::read(dir.join(INCARNATION_FILE)).unwrap()).unwrap()
}

#[test]
fn every_start_takes_the_next_number_and_both_slots_hold_it() {
    let dir = tempfile::tempdir().unwrap();
    let before = wall_clock_us();
    let first = open(dir.path()).unwrap().incarnation();
    assert!((before..=wall_clock_us()).contains(&first), "{first} is not the clock");
    for k in 1..=3 {
        let data = open(dir.path()).unwrap();
        assert_eq!(data.incarnation(), first + k);
        let f = on_disk(dir.path());
        assert_eq!(f.slots, [Ok(first + k), Ok(first + k)], "both slots hold it before use");
    }
}

/// A crash while the first slot is written: the other still holds the
/// previous number; the number being written was never used, and the next
/// start passes the previous one. A crash while the second is written: the
/// first holds the new number, and the next start passes it.
#[test]
fn a_torn_write_never_gives_a_used_number_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(INCARNATION_FILE);
    let used = open(dir.path()).unwrap().incarnation();
    // The next start tears slot 0 (written first: the slots are equal).
    let mut bytes = fs::read(&path).unwrap();
    let new = encode_slot(&record(used + 1));
    bytes[..20].copy_from_slice(&new[..20]);
    fs::write(&path, &bytes).unwrap();
    let f = on_disk(dir.path());
    assert!(f.slots[0].is_err() && f.slots[1] == Ok(used), "{f:?}");
    let after_first_tear = open(dir.path()).unwrap().incarnation();
    assert_eq!(after_first_tear, used + 1, "a number above every used one");
    // Slot 0 complete with the next number, slot 1 torn.
    let mut bytes = fs::read(&path).unwrap();
    bytes[..INCARNATION_SLOT_LEN].copy_from_slice(&encode_slot(&record(after_first_tear + 1)));
    bytes[INCARNATION_SLOT_LEN + 30] ^= 0xff;
    fs::write(&path, &bytes).unwrap();
    assert_eq!(open(dir.path()).unwrap().incarnation(), after_first_tear + 2);
    assert_eq!(on_disk(dir.path()).slots, [Ok(after_first_tear + 2), Ok(after_first_tear + 2)]);
}

#[test]
fn a_corrupted_file_stops_the_start_untouched_and_a_reset_passes_every_used_number() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(INCARNATION_FILE);
    let data = open(dir.path()).unwrap();
    data.write(HardState { term: Term(3), voted_for: Some(NodeId(1)) }).unwrap();
    let used = data.incarnation();
    drop(data);
    let mut bytes = fs::read(&path).unwrap();
    bytes[20] ^= 1;
    bytes[INCARNATION_SLOT_LEN + 20] ^= 1;
    fs::write(&path, &bytes).unwrap();
    let state = fs::read(dir.path().join(STATE_FILE)).unwrap();
    let e = open(dir.path()).unwrap_err();
    assert!(matches!(&e, StartError::CorruptIncarnation { path: p, .. } if *p == path), "{e:?}");
    assert_eq!(fs::read(&path).unwrap(), bytes, "refused, yet changed");
    assert_eq!(fs::read(dir.path().join(STATE_FILE)).unwrap(), state);
    match reset(dir.path(), id(), None).unwrap() {
        ResetOutcome::Reset { refused, state } => {
            assert!(refused.contains("incarnation file"), "{refused}");
            assert_eq!(state, HardState { term: Term(3), voted_for: Some(NodeId(1)) });
        }
        other => panic!("{other:?}"),
    }
    let after = open(dir.path()).unwrap().incarnation();
    assert!(after > used, "{after} after {used}");
}

#[test]
fn the_identity_survives_restarts_and_a_wiped_directory_or_lost_file_gets_a_new_one() {
    let dir = tempfile::tempdir().unwrap();
    let first = open(dir.path()).unwrap().directory_id();
    for _ in 0..3 {
        assert_eq!(open(dir.path()).unwrap().directory_id(), first);
    }
    assert_eq!(on_disk(dir.path()).record.directory, Some(first));
    fs::remove_file(dir.path().join(INCARNATION_FILE)).unwrap();
    let second = open(dir.path()).unwrap().directory_id();
    assert_ne!(second, first, "a lost incarnation file is a new identity");
    let wiped = tempfile::tempdir().unwrap();
    assert_ne!(open(wiped.path()).unwrap().directory_id(), second);
    // A directory of format 1 is upgraded in place, keeping its numbers.
    let path = dir.path().join(INCARNATION_FILE);
    let before = open(dir.path()).unwrap().incarnation();
    fs::write(&path, [slot_v1(before), slot_v1(before)].concat()).unwrap();
    let upgraded = open(dir.path()).unwrap();
    assert_eq!(upgraded.incarnation(), before + 1);
    assert_eq!(on_disk(dir.path()).record.directory, Some(upgraded.directory_id()));
    assert_eq!(on_disk(dir.path()).slots, [Ok(before + 1), Ok(before + 1)]);
}

#[test]
fn a_deleted_file_restarts_above_every_used_number() {
    let dir = tempfile::tempdir().unwrap();
    let mut used = 0;
    for _ in 0..3 {
        used = open(dir.path()).unwrap().incarnation();
    }
    fs::remove_file(dir.path().join(INCARNATION_FILE)).unwrap();
    let after = open(dir.path()).unwrap().incarnation();
    assert!(after > used, "{after} after {used}");
}

#[test]
fn the_dead_incarnation_is_read_only_once_the_lock_is_free() {
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(dead_incarnation(dir.path()), Err(DeadIncarnationError::Missing(_))));
    let data = open(dir.path()).unwrap();
    let n = data.incarnation();
    let e = dead_incarnation(dir.path()).unwrap_err();
    assert!(matches!(e, DeadIncarnationError::Alive(_)), "{e:?}");
    assert!(e.to_string().contains("alive"), "{e}");
    drop(data);
    let dead = dead_incarnation(dir.path()).unwrap();
    assert_eq!(
        dead,
        DeadIncarnation { node_id: NodeId(1), cluster_id: "c".into(), incarnation: n }
    );
    // The shared lock it took is gone: the node starts.
    assert_eq!(open(dir.path()).unwrap().incarnation(), n + 1);
}
