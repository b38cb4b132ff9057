use super::format::{encode_slot, testing::v1_file};
use super::*;
use std::time::Duration;
use tenure_core::{NodeId, ProtocolKind};

fn id(node: u64, protocol: ProtocolKind) -> Identity {
    Identity { cluster_id: "c".into(), node_id: NodeId(node), protocol }
}

fn raft() -> Identity {
    id(1, ProtocolKind::Raft)
}

fn open(dir: &Path) -> Result<(DataDir, HardState), StartError> {
    DataDir::open(dir, raft())
}

fn hs(term: u64, vote: Option<u64>) -> HardState {
    HardState { term: Term(term), voted_for: vote.map(NodeId) }
}

fn record_in_lock(dir: &Path) -> Option<Record> {
    parse_lock_file(&fs::read(dir.join(LOCK_FILE)).unwrap()).unwrap()
}

#[test]
fn lock_excludes_a_second_opener_and_is_released_on_drop() {
    let dir = tempfile::tempdir().unwrap();
    let (first, state) = open(dir.path()).unwrap();
    assert_eq!(state, HardState::default());
    let second = open(dir.path());
    assert!(
        matches!(second, Err(StartError::DataDirLocked { ref path }) if path.ends_with(LOCK_FILE))
    );
    drop(first);
    assert!(open(dir.path()).is_ok());
}

#[test]
fn writes_are_read_back_and_recorded_in_the_lock_file() {
    let dir = tempfile::tempdir().unwrap();
    let (data, _) = open(dir.path()).unwrap();
    assert_eq!(record_in_lock(dir.path()), Some(raft().record(HardState::default())));
    let state = hs(9, Some(1));
    data.write(state).unwrap();
    assert_eq!(record_in_lock(dir.path()), Some(raft().record(state)));
    drop(data);
    let (data, loaded) = open(dir.path()).unwrap();
    assert_eq!(loaded, state);
    drop(data);
    let before = fs::read(dir.path().join(STATE_FILE)).unwrap();
    let other_node = DataDir::open(dir.path(), id(2, ProtocolKind::Raft));
    assert!(matches!(other_node, Err(StartError::ForeignState { found_node: NodeId(1), .. })));
    let other_cluster = DataDir::open(dir.path(), Identity { cluster_id: "d".into(), ..raft() });
    assert!(
        matches!(other_cluster, Err(StartError::ForeignState { ref found_cluster, .. }) if found_cluster == "c")
    );
    assert_eq!(fs::read(dir.path().join(STATE_FILE)).unwrap(), before);
}

#[test]
fn a_write_survives_without_its_mirror_and_the_mirror_survives_a_damaged_primary() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(STATE_FILE);
    let (data, _) = open(dir.path()).unwrap();
    let first = hs(3, Some(1));
    data.write(first).unwrap();
    data.mirror().unwrap();
    let second = hs(4, Some(2));
    data.write(second).unwrap();
    drop(data);
    // Written but not mirrored (a crash right after the messages left):
    // slot 0 has the newest state and wins.
    assert_eq!(open(dir.path()).unwrap().1, second);
    assert_eq!(fs::metadata(&path).unwrap().len(), 2 * SLOT_LEN as u64);

    let (data, _) = open(dir.path()).unwrap();
    data.write(second).unwrap();
    data.mirror().unwrap();
    drop(data);
    // Both slots hold it: a damaged slot 0 loses nothing, and is repaired.
    let mut bytes = fs::read(&path).unwrap();
    bytes[26] ^= 0xff;
    fs::write(&path, &bytes).unwrap();
    assert_eq!(open(dir.path()).unwrap().1, second);
    let repaired = parse_state_file(&fs::read(&path).unwrap()).unwrap();
    assert_eq!((repaired.record.hard_state(), repaired.damaged_slot), (second, None));
}

#[test]
fn a_torn_primary_falls_back_to_the_previous_acknowledged_state() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(STATE_FILE);
    let (data, _) = open(dir.path()).unwrap();
    let acked = hs(3, Some(1));
    data.write(acked).unwrap();
    data.mirror().unwrap();
    drop(data);
    // A crash in the middle of the next write: half of slot 0 is new bytes
    // (and the lock file's record, written after the state, still the old one).
    let mut bytes = fs::read(&path).unwrap();
    let next = encode_slot(9, &raft().record(hs(4, None)));
    bytes[..SLOT_LEN / 16].copy_from_slice(&next[..SLOT_LEN / 16]);
    fs::write(&path, &bytes).unwrap();
    assert_eq!(open(dir.path()).unwrap().1, acked);
}

/// A crash after the state file's sync and before the record's: the state
/// file is newer than the record, which is fine (no message left).
#[test]
fn a_state_newer_than_the_record_starts_and_updates_it() {
    let dir = tempfile::tempdir().unwrap();
    let (data, _) = open(dir.path()).unwrap();
    data.write(hs(3, Some(1))).unwrap();
    drop(data);
    let old_lock = fs::read(dir.path().join(LOCK_FILE)).unwrap();
    let (data, _) = open(dir.path()).unwrap();
    data.write(hs(4, Some(2))).unwrap();
    drop(data);
    fs::write(dir.path().join(LOCK_FILE), old_lock).unwrap();
    assert_eq!(open(dir.path()).unwrap().1, hs(4, Some(2)));
    assert_eq!(record_in_lock(dir.path()), Some(raft().record(hs(4, Some(2)))));
}

#[test]
fn version_1_files_are_read_as_raft_and_upgraded() {
    let record = raft().record(hs(4, Some(2)));
    let bytes = v1_file(&record);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(STATE_FILE);
    fs::write(&path, &bytes).unwrap();
    // Another protocol is refused before anything is rewritten.
    let paxos = DataDir::open(dir.path(), id(1, ProtocolKind::Paxos));
    assert!(matches!(
        paxos,
        Err(StartError::ProtocolMismatch {
            found: ProtocolKind::Raft,
            configured: ProtocolKind::Paxos,
            ..
        })
    ));
    assert_eq!(fs::read(&path).unwrap(), bytes);
    let (data, state) = open(dir.path()).unwrap();
    assert_eq!(state, hs(4, Some(2)));
    drop(data);
    assert_eq!(fs::metadata(&path).unwrap().len(), 2 * SLOT_LEN as u64, "upgraded");
    assert_eq!(open(dir.path()).unwrap().1, hs(4, Some(2)));
}

#[test]
fn another_protocols_state_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let (data, _) = DataDir::open(dir.path(), id(1, ProtocolKind::Ranked)).unwrap();
    data.write(hs(3, Some(1))).unwrap();
    drop(data);
    let before = fs::read(dir.path().join(STATE_FILE)).unwrap();
    let err = open(dir.path()).unwrap_err();
    assert!(err.to_string().contains("written by the ranked protocol"), "{err}");
    assert_eq!(fs::read(dir.path().join(STATE_FILE)).unwrap(), before);
    // Switching protocols: a reset starts above the old protocol's terms.
    let (_, plan) = DataDir::open_reset(dir.path(), raft(), None).unwrap();
    assert_eq!(plan.state, hs(4, None));
}

/// A lock file written by an earlier tenure is empty: the state file is
/// trusted and recorded in it.
#[test]
fn an_empty_lock_file_from_an_earlier_version_gets_the_record() {
    let dir = tempfile::tempdir().unwrap();
    let (data, _) = open(dir.path()).unwrap();
    data.write(hs(5, Some(3))).unwrap();
    drop(data);
    fs::write(dir.path().join(LOCK_FILE), b"").unwrap();
    assert_eq!(open(dir.path()).unwrap().1, hs(5, Some(3)));
    assert_eq!(record_in_lock(dir.path()), Some(raft().record(hs(5, Some(3)))));
}

/// A start interrupted after creating the lock file and before the state
/// file: the lock file records a node that never had a term.
#[test]
fn an_interrupted_first_start_starts_fresh() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(dir.path()).unwrap());
    fs::remove_file(dir.path().join(STATE_FILE)).unwrap();
    assert_eq!(open(dir.path()).unwrap().1, HardState::default());
}

#[test]
fn missing_or_rolled_back_state_is_refused_and_reset_from_the_record() {
    let dir = tempfile::tempdir().unwrap();
    let state_path = dir.path().join(STATE_FILE);
    let (data, _) = open(dir.path()).unwrap();
    data.write(hs(3, Some(2))).unwrap();
    drop(data);
    let backup = fs::read(&state_path).unwrap();
    let (data, _) = open(dir.path()).unwrap();
    data.write(hs(6, Some(3))).unwrap();
    data.write(hs(7, Some(3))).unwrap();
    drop(data);

    fs::write(&state_path, &backup).unwrap();
    match open(dir.path()) {
        Err(StartError::StateRolledBack { found, recorded, .. }) => {
            assert_eq!((found, recorded), (hs(3, Some(2)), hs(7, Some(3))))
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(fs::read(&state_path).unwrap(), backup, "refused, yet changed");

    fs::remove_file(&state_path).unwrap();
    assert!(matches!(open(dir.path()), Err(StartError::StateMissing { .. })));
    assert!(!state_path.exists(), "refused, yet created");

    let outcome = reset(dir.path(), raft(), None).unwrap();
    assert!(
        matches!(&outcome, ResetOutcome::Reset { state, refused } if *state == hs(7, Some(3)) && refused.contains("missing")),
        "{outcome:?}"
    );
    assert_eq!(open(dir.path()).unwrap().1, hs(7, Some(3)));
    // Once consistent, a reset changes nothing.
    assert_eq!(
        reset(dir.path(), raft(), Some(Term(2))).unwrap(),
        ResetOutcome::NotNeeded { state: hs(7, Some(3)) }
    );
    let e = reset(dir.path(), raft(), Some(Term(u64::MAX))).unwrap_err();
    assert!(matches!(e, StartError::ResetImpossible { .. }), "{e:?}");
}

/// Runs `f` on another thread and fails if it takes longer than a few
/// seconds: a blocking open of a FIFO would hang forever.
fn within_seconds<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(f()));
    rx.recv_timeout(Duration::from_secs(5)).expect("the open hung")
}

/// Makes a FIFO with the system call, not the `mkfifo` program: a forked
/// child holds every open file of this process until it execs, the data
/// directories' locks of tests running beside this one included, and they
/// would see `DataDirLocked`.
fn mkfifo(path: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: `c` is a valid NUL-terminated path that outlives the call.
    let rc = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
    assert_eq!(rc, 0, "mkfifo failed: {}", std::io::Error::last_os_error());
}

#[test]
fn special_files_are_refused_without_hanging() {
    type Make = fn(&Path);
    let makers: [(&str, Make); 4] = [
        ("FIFO (named pipe)", mkfifo),
        ("directory", |p| fs::create_dir(p).unwrap()),
        ("socket", |p| {
            std::mem::forget(std::os::unix::net::UnixListener::bind(p).unwrap());
        }),
        ("character device", |p| std::os::unix::fs::symlink("/dev/null", p).unwrap()),
    ];
    for name in [STATE_FILE, LOCK_FILE, INCARNATION_FILE] {
        for (kind, make) in makers {
            let dir = tempfile::tempdir().unwrap();
            make(&dir.path().join(name));
            let path = dir.path().to_path_buf();
            let result = within_seconds(move || open(&path).map(|_| ()));
            match result {
                Err(StartError::NotAFile { path, kind: k }) => {
                    assert_eq!((path, k), (dir.path().join(name), kind))
                }
                other => panic!("{name} as a {kind}: {other:?}"),
            }
            let path = dir.path().to_path_buf();
            let reset = within_seconds(move || reset(&path, raft(), Some(Term(9))).map(|_| ()));
            assert!(matches!(reset, Err(StartError::NotAFile { .. })), "{reset:?}");
        }
    }
}

#[test]
fn a_deleted_lock_file_is_created_and_locked_again_on_the_next_write() {
    let dir = tempfile::tempdir().unwrap();
    let (data, _) = open(dir.path()).unwrap();
    fs::remove_file(dir.path().join(LOCK_FILE)).unwrap();
    data.write(hs(2, Some(1))).unwrap();
    assert_eq!(record_in_lock(dir.path()), Some(raft().record(hs(2, Some(1)))));
    assert!(matches!(open(dir.path()), Err(StartError::DataDirLocked { .. })));
    drop(data);
    assert_eq!(open(dir.path()).unwrap().1, hs(2, Some(1)));
}

/// Two writes with no mirror between them (the mirror task had not run yet):
/// slot 1 must hold the first before slot 0 is overwritten with the second,
/// or a torn second write would fall back past an acknowledged state.
#[test]
fn slot_0_is_overwritten_only_once_slot_1_holds_the_state_before() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(STATE_FILE);
    let (data, _) = open(dir.path()).unwrap();
    data.write(hs(3, Some(1))).unwrap();
    data.write(hs(4, Some(2))).unwrap();
    drop(data);
    let mut bytes = fs::read(&path).unwrap();
    bytes[26] ^= 0xff; // slot 0 torn
    fs::write(&path, &bytes).unwrap();
    // Without the lock file's record, the state file alone must give the
    // acknowledged state before the torn one.
    fs::write(dir.path().join(LOCK_FILE), b"").unwrap();
    assert_eq!(open(dir.path()).unwrap().1, hs(3, Some(1)));
}

/// A crash after the newest state reached slot 0 and before the mirror: the
/// next start copies it into slot 1.
#[test]
fn a_start_mirrors_a_state_that_is_in_slot_0_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(STATE_FILE);
    let (data, _) = open(dir.path()).unwrap();
    data.write(hs(3, Some(1))).unwrap();
    drop(data);
    let bytes = fs::read(&path).unwrap();
    assert_ne!(bytes[..SLOT_LEN], bytes[SLOT_LEN..], "written, not mirrored");
    assert_eq!(open(dir.path()).unwrap().1, hs(3, Some(1)));
    let bytes = fs::read(&path).unwrap();
    assert_eq!(bytes[..SLOT_LEN], bytes[SLOT_LEN..], "mirrored at the start");
}

/// The state file and the record are written at the same time: a crash can
/// leave the record one write ahead, and the start takes the record.
#[test]
fn a_record_one_write_ahead_is_an_interrupted_write_and_is_taken() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(STATE_FILE);
    let (data, _) = open(dir.path()).unwrap();
    data.write(hs(3, Some(1))).unwrap();
    data.mirror().unwrap();
    let before = fs::read(&path).unwrap();
    data.write(hs(4, Some(2))).unwrap();
    drop(data);
    fs::write(&path, &before).unwrap();
    assert_eq!(open(dir.path()).unwrap().1, hs(4, Some(2)));
    let f = parse_state_file(&fs::read(&path).unwrap()).unwrap();
    assert_eq!(f.record.hard_state(), hs(4, Some(2)), "the record was written to the state file");
}
