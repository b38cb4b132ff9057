use super::*;
use std::sync::mpsc;
use tenure_core::NodeId;
use tenure_replica::{Member, Members, Payload};

/// The configuration the snapshots of these tests carry.
fn boot() -> Membership {
    Membership {
        at: Position::ZERO,
        members: Members::bootstrap(&[NodeId(1), NodeId(2), NodeId(3)]),
    }
}

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
        .write(vec![
            LogOp::Promise(FencingToken(3)),
            LogOp::Append(vec![e(1, 3, "a"), e(2, 3, "b")]),
        ])
        .unwrap();
    store.write(vec![LogOp::TruncateAfter(1), LogOp::Append(vec![e(2, 4, "c")])]).unwrap();
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
    store.write(vec![LogOp::Append(vec![e(1, 1, "a"), e(2, 1, "b"), e(3, 1, "c")])]).unwrap();
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
    store.write(vec![LogOp::Promise(FencingToken(1)), LogOp::Append(entries)]).unwrap();
    let last = Position { token: FencingToken(1), index: 7 };
    store
        .write(vec![LogOp::Compact { last, membership: boot(), data: b"state@7".to_vec() }])
        .unwrap();
    store.write(vec![LogOp::Append(vec![e(11, 2, "y")])]).unwrap();
    store.wait_for_compactions();
    assert_eq!((store.compactions(), store.compaction_failures()), (1, 0));
    drop(store);
    let (_, r, _) = LogStore::open(dir.path()).unwrap();
    assert_eq!(r.snapshot, Some((last, b"state@7".to_vec())));
    assert_eq!(r.membership, Some(boot()));
    assert_eq!(r.entries.iter().map(|e| e.pos.index).collect::<Vec<_>>(), [8, 9, 10, 11]);
    assert_eq!(r.promised, FencingToken(1));
    let journal = fs::metadata(dir.path().join("journal")).unwrap().len();
    assert!(journal < 200, "the journal was rewritten: {journal} bytes");
}

#[test]
fn a_snapshot_written_in_several_synced_pieces_reads_back_whole() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _, _) = LogStore::open(dir.path()).unwrap();
    // Two whole pieces and a partial one, every byte telling where it is.
    let data: Vec<u8> = (0..2 * SNAPSHOT_SYNC_BYTES + 12_345).map(|i| (i % 251) as u8).collect();
    let last = Position { token: FencingToken(2), index: 9 };
    store
        .write(vec![LogOp::InstallSnapshot { last, membership: boot(), data: data.clone() }])
        .unwrap();
    drop(store);
    let (_, r, _) = LogStore::open(dir.path()).unwrap();
    let (at, read) = r.snapshot.expect("the snapshot is read back");
    assert_eq!(at, last);
    assert!(read == data, "{} bytes read back for {} written", read.len(), data.len());
}

#[test]
fn a_crash_between_an_installed_snapshot_and_the_journal_brings_back_no_other_history() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _, _) = LogStore::open(dir.path()).unwrap();
    let entries: Vec<Entry> = (1..=5).map(|i| e(i, 1, "old")).collect();
    store.write(vec![LogOp::Promise(FencingToken(1)), LogOp::Append(entries)]).unwrap();
    // The journal's rewrite fails after the snapshot file is written (as a
    // crash there would leave it): its temporary file cannot be created.
    fs::create_dir(dir.path().join("journal.tmp")).unwrap();
    let last = Position { token: FencingToken(2), index: 3 };
    let install = LogOp::InstallSnapshot { last, membership: boot(), data: b"state@3".to_vec() };
    assert!(store.write(vec![install]).is_err());
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
    store
        .write(vec![LogOp::InstallSnapshot { last, membership: boot(), data: vec![7; 100] }])
        .unwrap();
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
        store.write(ops.clone()).unwrap();
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

// ---- Compactions in the background ----

const ALL_STEPS: [Step; 6] = [
    Step::SnapshotWritten,
    Step::SnapshotRenamed,
    Step::JournalBegun,
    Step::JournalWritten,
    Step::JournalSynced,
    Step::JournalRenamed,
];

/// How long a test waits for the compaction thread to reach a step.
const REACH_BOUND: Duration = Duration::from_secs(20);

fn pos(index: Index, token: u64) -> Position {
    Position { token: FencingToken(token), index }
}

/// Appends entries `from..=to` of `token`, each with `bytes` bytes of command.
fn append(store: &LogStore, from: Index, to: Index, token: u64, bytes: usize) {
    let es = (from..=to).map(|i| e(i, token, &"v".repeat(bytes))).collect();
    store.write(vec![LogOp::Append(es)]).unwrap();
}

fn compact(store: &LogStore, index: Index, token: u64) {
    let data = format!("state@{index}").into_bytes();
    store
        .write(vec![LogOp::Compact { last: pos(index, token), membership: boot(), data }])
        .unwrap();
}

fn indexes(r: &Restored) -> Vec<Index> {
    r.entries.iter().map(|e| e.pos.index).collect()
}

/// The compaction thread, stopped at steps of the test's choosing.
struct Held {
    reached: mpsc::Receiver<Step>,
    go: mpsc::Sender<io::Result<()>>,
}

impl Held {
    fn next(&self) -> Step {
        self.reached.recv_timeout(REACH_BOUND).expect("the compaction thread reaches a step")
    }

    /// Lets it go on (or fail there, with `Err`).
    fn go(&self, result: io::Result<()>) {
        self.go.send(result).unwrap();
    }
}

/// Calls `at_each` at every step (of any thread), and stops the compaction
/// thread at each of `hold` once, until the test lets it go.
fn hold(store: &LogStore, hold: &[Step], at_each: impl Fn(Step) + Send + Sync + 'static) -> Held {
    let (reached_tx, reached) = mpsc::channel();
    let (go, go_rx) = mpsc::channel();
    let go_rx = Mutex::new(go_rx);
    let armed = Mutex::new(hold.to_vec());
    store.set_hook(move |step| {
        at_each(step);
        if std::thread::current().name() != Some("tenure-log-compact") {
            return Ok(());
        }
        let mut armed = armed.lock().unwrap();
        let Some(i) = armed.iter().position(|&s| s == step) else { return Ok(()) };
        armed.remove(i);
        drop(armed);
        reached_tx.send(step).unwrap();
        go_rx.lock().unwrap().recv().unwrap()
    });
    Held { reached, go }
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for f in fs::read_dir(from).unwrap() {
        let f = f.unwrap();
        if f.file_type().unwrap().is_file() {
            fs::copy(f.path(), to.join(f.file_name())).unwrap();
        }
    }
}

#[test]
fn the_snapshot_file_keeps_its_format() {
    #[derive(Serialize)]
    struct SnapshotFile {
        last: Position,
        membership: Membership,
        data: Vec<u8>,
    }
    let dir = tempfile::tempdir().unwrap();
    let (store, _, _) = LogStore::open(dir.path()).unwrap();
    let last = pos(300, 2);
    let data: Vec<u8> = (0..1000).map(|i| i as u8).collect();
    store
        .write(vec![LogOp::InstallSnapshot { last, membership: boot(), data: data.clone() }])
        .unwrap();
    drop(store);
    let bytes = fs::read(dir.path().join("snapshot")).unwrap();
    let body =
        postcard::to_allocvec(&SnapshotFile { last, membership: boot(), data: data.clone() })
            .unwrap();
    assert_eq!(&bytes[..8], SNAPSHOT_MAGIC);
    assert_eq!(bytes[8..16], (body.len() as u64).to_le_bytes());
    assert_eq!(bytes[16..20], crc32fast::hash(&body).to_le_bytes());
    assert_eq!(&bytes[20..], &body[..]);
    let (_, r, _) = LogStore::open(dir.path()).unwrap();
    assert_eq!(r.snapshot, Some((last, data)));
    assert_eq!(r.membership, Some(boot()));
}

#[test]
fn appends_go_on_while_a_compaction_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _, _) = LogStore::open(dir.path()).unwrap();
    store.write(vec![LogOp::Promise(FencingToken(1))]).unwrap();
    append(&store, 1, 100, 1, 1);
    let held = hold(&store, &[Step::JournalBegun, Step::JournalWritten], |_| {});
    compact(&store, 60, 1);
    assert_eq!(held.next(), Step::JournalBegun);
    // The snapshot file is in place and the new journal holds what the old
    // one held when the compaction began; writes go on meanwhile: more than
    // LOCKED_COPY_BYTES of entries, a truncation and a new promise.
    append(&store, 101, 150, 1, 8 * 1024);
    store.write(vec![LogOp::TruncateAfter(140), LogOp::Promise(FencingToken(2))]).unwrap();
    append(&store, 141, 145, 2, 1);
    held.go(Ok(()));
    assert_eq!(held.next(), Step::JournalWritten);
    let tmp = fs::metadata(dir.path().join("journal.tmp")).unwrap().len();
    assert!(
        tmp > LOCKED_COPY_BYTES,
        "the entries appended since it began were copied without the lock: {tmp} bytes"
    );
    append(&store, 146, 147, 2, 1);
    held.go(Ok(()));
    store.wait_for_compactions();
    assert_eq!((store.compactions(), store.compaction_failures()), (1, 0));
    append(&store, 148, 148, 2, 1);
    drop(store);
    let (_, r, report) = LogStore::open(dir.path()).unwrap();
    assert_eq!(r.snapshot, Some((pos(60, 1), b"state@60".to_vec())));
    assert_eq!(indexes(&r), (61..=148).collect::<Vec<_>>());
    assert!(r
        .entries
        .iter()
        .all(|e| e.pos.token == FencingToken(u64::from(e.pos.index > 140) + 1)));
    assert_eq!(r.promised, FencingToken(2));
    // Base, promise, 61..=100 from the old journal; then the records
    // appended since, as they were: 50 entries, a truncation, a promise,
    // 141..=148.
    assert_eq!(report.records, 2 + 40 + 50 + 2 + 8);
    assert!(!dir.path().join("journal.tmp").exists());
}

#[test]
fn appends_wait_only_while_the_journal_is_swapped() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _, _) = LogStore::open(dir.path()).unwrap();
    append(&store, 1, 10, 1, 1);
    let held = hold(&store, &[Step::JournalSynced], |_| {});
    compact(&store, 5, 1);
    assert_eq!(held.next(), Step::JournalSynced);
    std::thread::scope(|s| {
        let (done_tx, done) = mpsc::channel();
        let store = &store;
        s.spawn(move || done_tx.send(store.write(vec![LogOp::Append(vec![e(11, 1, "v")])])));
        assert!(
            done.recv_timeout(Duration::from_millis(200)).is_err(),
            "an append waits for the journal's rename"
        );
        held.go(Ok(()));
        done.recv_timeout(REACH_BOUND).unwrap().unwrap();
    });
    store.wait_for_compactions();
    drop(store);
    let (_, r, _) = LogStore::open(dir.path()).unwrap();
    assert_eq!(r.snapshot, Some((pos(5, 1), b"state@5".to_vec())));
    assert_eq!(indexes(&r), [6, 7, 8, 9, 10, 11]);
}

#[test]
fn a_newer_compaction_replaces_the_waiting_one() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _, _) = LogStore::open(dir.path()).unwrap();
    append(&store, 1, 10, 1, 1);
    let held = hold(&store, &[Step::SnapshotWritten], |_| {});
    compact(&store, 3, 1);
    assert_eq!(held.next(), Step::SnapshotWritten);
    compact(&store, 5, 1);
    compact(&store, 7, 1);
    held.go(Ok(()));
    store.wait_for_compactions();
    assert_eq!(store.compactions(), 2, "3, then 7; 5 was replaced while it waited");
    drop(store);
    let (_, r, _) = LogStore::open(dir.path()).unwrap();
    assert_eq!(r.snapshot, Some((pos(7, 1), b"state@7".to_vec())));
    assert_eq!(indexes(&r), [8, 9, 10]);
}

#[test]
fn an_install_waits_for_the_compaction_in_flight_and_drops_the_waiting_one() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _, _) = LogStore::open(dir.path()).unwrap();
    store.write(vec![LogOp::Promise(FencingToken(1))]).unwrap();
    append(&store, 1, 10, 1, 1);
    let held = hold(&store, &[Step::SnapshotRenamed], |_| {});
    compact(&store, 4, 1);
    assert_eq!(held.next(), Step::SnapshotRenamed);
    // Waits behind it; written after the install, it would replace the
    // installed snapshot with an older history's.
    compact(&store, 9, 1);
    let last = pos(6, 2);
    std::thread::scope(|s| {
        let (done_tx, done) = mpsc::channel();
        let install =
            LogOp::InstallSnapshot { last, membership: boot(), data: b"installed@6".to_vec() };
        let store = &store;
        s.spawn(move || done_tx.send(store.write(vec![install])));
        assert!(
            done.recv_timeout(Duration::from_millis(200)).is_err(),
            "the install waits for the compaction in flight"
        );
        held.go(Ok(()));
        done.recv_timeout(REACH_BOUND).unwrap().unwrap();
    });
    store.wait_for_compactions();
    assert_eq!(store.compactions(), 1, "the waiting compaction was dropped");
    append(&store, 7, 7, 2, 1);
    drop(store);
    let (_, r, _) = LogStore::open(dir.path()).unwrap();
    assert_eq!(r.snapshot, Some((last, b"installed@6".to_vec())));
    assert_eq!(r.entries, vec![e(7, 2, "v")]);
    assert_eq!(r.promised, FencingToken(1));
}

#[test]
fn a_crash_at_any_step_of_a_compaction_or_an_install_replays_a_state_written() {
    let top = tempfile::tempdir().unwrap();
    let log = top.path().join("log");
    let crashes = top.path().join("crashes");
    let (store, _, _) = LogStore::open(&log).unwrap();
    store.write(vec![LogOp::Promise(FencingToken(1))]).unwrap();
    append(&store, 1, 30, 1, 1);
    // A copy of the directory at every step: what a crash there leaves.
    let taken = Arc::new(AtomicU64::new(0));
    let held = hold(&store, &ALL_STEPS, {
        let (log, crashes, taken) = (log.clone(), crashes.clone(), taken.clone());
        move |step| {
            let n = taken.fetch_add(1, Ordering::SeqCst);
            copy_dir(&log, &crashes.join(format!("{n:02}-{step:?}")));
        }
    });
    // A compaction up to 20, with appends between its steps (while it does
    // not hold the journal's lock).
    compact(&store, 20, 1);
    let mut written = 30;
    let mut crashed_at = Vec::new();
    for _ in ALL_STEPS {
        let step = held.next();
        crashed_at.push((step, written));
        if !matches!(step, Step::JournalSynced | Step::JournalRenamed) {
            append(&store, written + 1, written + 2, 1, 1);
            written += 2;
        }
        held.go(Ok(()));
    }
    store.wait_for_compactions();
    // An install of another history up to 25 (on this thread: not held).
    let installed = pos(25, 2);
    let install = LogOp::InstallSnapshot {
        last: installed,
        membership: boot(),
        data: b"installed@25".to_vec(),
    };
    store.write(vec![install]).unwrap();
    assert_eq!(taken.load(Ordering::SeqCst), 12, "six steps each");
    drop(store);
    let compacted = Some((pos(20, 1), b"state@20".to_vec()));
    for (n, (step, written)) in crashed_at.into_iter().enumerate() {
        let (_, r, report) = LogStore::open(&crashes.join(format!("{n:02}-{step:?}"))).unwrap();
        let (snapshot, first) =
            if step == Step::SnapshotWritten { (None, 1) } else { (compacted.clone(), 21) };
        assert_eq!(r.snapshot, snapshot, "a crash at {step:?} of the compaction");
        assert_eq!(indexes(&r), (first..=written).collect::<Vec<_>>(), "{step:?}");
        assert_eq!(r.promised, FencingToken(1), "{step:?}");
        assert_eq!(report.torn_tail, None, "{step:?}");
    }
    for n in 6..12 {
        let name = fs::read_dir(&crashes)
            .unwrap()
            .map(|d| d.unwrap().file_name().into_string().unwrap())
            .find(|f| f.starts_with(&format!("{n:02}-")))
            .unwrap();
        let (_, r, _) = LogStore::open(&crashes.join(&name)).unwrap();
        if name.ends_with("SnapshotWritten") {
            // The old snapshot, and the old history up to the truncation.
            assert_eq!(r.snapshot, compacted, "{name}");
            assert_eq!(indexes(&r), (21..=25).collect::<Vec<_>>(), "{name}");
        } else {
            assert_eq!(r.snapshot, Some((installed, b"installed@25".to_vec())), "{name}");
            assert_eq!(r.entries, vec![], "{name}");
        }
        assert_eq!(r.promised, FencingToken(1), "{name}");
    }
    let (_, r, _) = LogStore::open(&log).unwrap();
    assert_eq!(r.snapshot, Some((installed, b"installed@25".to_vec())));
    assert_eq!(r.entries, vec![]);
}

#[test]
fn a_failed_compaction_is_counted_and_loses_no_entry() {
    for fail in ALL_STEPS {
        let dir = tempfile::tempdir().unwrap();
        let (store, _, _) = LogStore::open(dir.path()).unwrap();
        store.write(vec![LogOp::Promise(FencingToken(1))]).unwrap();
        append(&store, 1, 10, 1, 1);
        let held = hold(&store, &[fail], |_| {});
        compact(&store, 6, 1);
        assert_eq!(held.next(), fail);
        held.go(Err(io::Error::other("injected")));
        store.wait_for_compactions();
        assert_eq!((store.compactions(), store.compaction_failures()), (0, 1), "{fail:?}");
        let more = store.write(vec![LogOp::Append(vec![e(11, 1, "v")])]);
        let (snapshot, last) = if fail == Step::JournalRenamed {
            // The new journal is in place, but its name may not be durable:
            // nothing more is appended until the log is reopened.
            assert!(more.is_err(), "{fail:?}");
            (6, 10)
        } else {
            // Nothing is lost, and the next compaction tries again.
            more.unwrap();
            compact(&store, 8, 1);
            store.wait_for_compactions();
            assert_eq!(store.compactions(), 1, "{fail:?}");
            (8, 11)
        };
        drop(store);
        let (store, r, _) = LogStore::open(dir.path()).unwrap();
        let data = format!("state@{snapshot}").into_bytes();
        assert_eq!(r.snapshot, Some((pos(snapshot, 1), data)), "{fail:?}");
        assert_eq!(indexes(&r), (snapshot + 1..=last).collect::<Vec<_>>(), "{fail:?}");
        assert_eq!(r.promised, FencingToken(1), "{fail:?}");
        // Reopened, it compacts again.
        compact(&store, 9, 1);
        store.wait_for_compactions();
        assert_eq!((store.compactions(), store.compaction_failures()), (1, 0), "{fail:?}");
    }
}

#[test]
fn a_compaction_the_file_system_refuses_is_reported_and_the_next_one_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _, _) = LogStore::open(dir.path()).unwrap();
    append(&store, 1, 10, 1, 1);
    fs::create_dir(dir.path().join("journal.tmp")).unwrap();
    compact(&store, 5, 1);
    store.wait_for_compactions();
    assert_eq!(store.compaction_failures(), 1);
    append(&store, 11, 12, 1, 1);
    fs::remove_dir(dir.path().join("journal.tmp")).unwrap();
    compact(&store, 11, 1);
    store.wait_for_compactions();
    assert_eq!((store.compactions(), store.compaction_failures()), (1, 1));
    drop(store);
    let (_, r, _) = LogStore::open(dir.path()).unwrap();
    assert_eq!(r.snapshot, Some((pos(11, 1), b"state@11".to_vec())));
    assert_eq!(indexes(&r), [12]);
}

#[test]
fn a_snapshot_keeps_its_configuration_and_one_of_the_first_format_reads_as_the_bootstrap() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _, _) = LogStore::open(dir.path()).unwrap();
    store.write(vec![LogOp::Append((1..=4).map(|i| e(i, 1, "x")).collect())]).unwrap();
    let members = Members {
        voters: vec![Member::bare(NodeId(1)), Member::bare(NodeId(2))],
        learners: vec![Member {
            id: NodeId(4),
            address: "10.0.0.4:7000".into(),
            directory: Some(tenure_core::DirectoryId(0xd4)),
            auto_promote: false,
        }],
    };
    let membership = Membership { at: Position { token: FencingToken(1), index: 2 }, members };
    let last = Position { token: FencingToken(1), index: 3 };
    let install =
        LogOp::InstallSnapshot { last, membership: membership.clone(), data: b"s".to_vec() };
    store.write(vec![install]).unwrap();
    drop(store);
    let (_, r, _) = LogStore::open(dir.path()).unwrap();
    assert_eq!(r.membership, Some(membership));
    assert_eq!(r.snapshot, Some((last, b"s".to_vec())));

    // The same snapshot as a build of the first format wrote it: no
    // configuration, read as none (the bootstrap list).
    let mut head = postcard::to_allocvec(&last).unwrap();
    head.extend(postcard::to_allocvec(&1u64).unwrap());
    head.push(b's');
    let mut file = SNAPSHOT_MAGIC_V1.to_vec();
    file.extend_from_slice(&(head.len() as u64).to_le_bytes());
    file.extend_from_slice(&crc32fast::hash(&head).to_le_bytes());
    file.extend_from_slice(&head);
    fs::write(dir.path().join(SNAPSHOT), file).unwrap();
    let (_, r, _) = LogStore::open(dir.path()).unwrap();
    assert_eq!(r.membership, None);
    assert_eq!(r.snapshot, Some((last, b"s".to_vec())));
}

/// TENURE_FSYNC_DELAY_MS: milliseconds up to the limit; anything else (a
/// typo, a unit, a negative or huge number) is an error naming the variable
/// and the range, never ignored.
#[test]
fn the_sync_delay_is_milliseconds_within_bounds() {
    assert_eq!(parse_sync_delay("0").unwrap(), Duration::ZERO);
    assert_eq!(parse_sync_delay(" 4\n").unwrap(), Duration::from_millis(4));
    assert_eq!(parse_sync_delay("1000").unwrap(), Duration::from_secs(1));
    for bad in ["", "4ms", "-1", "1001", "99999999999999999999999", "x"] {
        let e = parse_sync_delay(bad).expect_err(bad).to_string();
        assert!(e.contains(FSYNC_DELAY_ENV) && e.contains("0 to 1000"), "{bad:?}: {e}");
    }
}
