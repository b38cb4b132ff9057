//! What a start does with what it found in the data directory: the state
//! file, and the lock file's record of the newest state the node acted on.
//! Pure: [`plan`] decides from the files' contents and opens nothing.
//!
//! The rule it keeps: a node never starts from a state older than one it sent
//! messages from. The lock file's record is written together with the state
//! file (at the same time, each synced) and before any message leaves, so
//! the state file is at least as new as the record — or one write behind it,
//! when a crash interrupted the write, and then the record is taken — unless
//! someone replaced or removed it; then the start is refused unless a reset
//! is asked for, and a reset never goes below the record.

use super::format::{
    parse_lock_file, parse_lock_file_seq, parse_state_file, ParseError, Record, StateFile,
};
use super::{LOCK_FILE, STATE_FILE};
use crate::error::{Recovery, StartError};
use std::path::{Path, PathBuf};
use tenure_core::{HardState, NodeId, ProtocolKind, Term};
use tracing::{info, warn};

/// Who a data directory belongs to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// The cluster.
    pub cluster_id: String,
    /// The node.
    pub node_id: NodeId,
    /// The election protocol the node runs.
    pub protocol: ProtocolKind,
}

impl Identity {
    /// The record of `state` for this node.
    pub(crate) fn record(&self, state: HardState) -> Record {
        Record {
            cluster_id: self.cluster_id.clone(),
            node_id: self.node_id,
            term: state.term,
            voted_for: state.voted_for,
            protocol: self.protocol,
        }
    }

    /// Refuses a record of another node or cluster (with or without a reset:
    /// it is another node's state, not this one's to overwrite).
    fn check_owner(&self, path: &Path, r: &Record) -> Result<(), StartError> {
        if r.cluster_id != self.cluster_id || r.node_id != self.node_id {
            return Err(StartError::ForeignState {
                path: path.to_path_buf(),
                found_cluster: r.cluster_id.clone(),
                found_node: r.node_id,
                expected_cluster: self.cluster_id.clone(),
                expected_node: self.node_id,
            });
        }
        Ok(())
    }

    fn mismatch(&self, path: &Path, r: &Record) -> Option<StartError> {
        (r.protocol != self.protocol).then(|| StartError::ProtocolMismatch {
            path: path.to_path_buf(),
            found: r.protocol,
            configured: self.protocol,
        })
    }
}

/// What was found at the state file's path.
#[derive(Debug)]
pub(crate) enum StateRead {
    /// No file.
    Missing,
    /// A file that cannot be used.
    Unreadable(ParseError),
    /// A usable file.
    Found(StateFile),
}

/// What the lock file holds.
#[derive(Debug)]
pub(crate) enum MarkRead {
    /// Nothing: the lock file was written by a tenure that kept no record.
    Absent,
    /// A damaged record.
    Damaged(String),
    /// The record of the newest state the node acted on, and the sequence
    /// number of the state file write it followed.
    Found(Record, u64),
}

impl StateRead {
    /// Classifies a state file's contents (`None`: no file).
    pub(crate) fn from_bytes(bytes: Option<&[u8]>) -> StateRead {
        match bytes.map(parse_state_file) {
            None => StateRead::Missing,
            Some(Ok(f)) => StateRead::Found(f),
            Some(Err(e)) => StateRead::Unreadable(e),
        }
    }
}

impl MarkRead {
    /// Classifies a lock file's contents; a record of a newer format is refused.
    pub(crate) fn from_bytes(bytes: &[u8], lock: &Path) -> Result<MarkRead, StartError> {
        Ok(match parse_lock_file_seq(bytes) {
            Ok(None) => MarkRead::Absent,
            Ok(Some((seq, r))) => MarkRead::Found(r, seq),
            Err(ParseError::Corrupt(d)) => MarkRead::Damaged(d),
            Err(ParseError::Version(version)) => {
                return Err(StartError::UnsupportedStateFormat {
                    path: lock.to_path_buf(),
                    version,
                    supported: super::format::STATE_FORMAT_VERSION,
                })
            }
        })
    }
}

/// What a start will do: the state the node starts from and what is written first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The term and vote the node starts with.
    pub state: HardState,
    /// The sequence number the state is (re)written with.
    pub seq: u64,
    /// Write a new state file (both slots) holding `state` before starting:
    /// a fresh node, a repair of a damaged slot, a version-1 upgrade, a reset.
    pub rewrite_state: bool,
    /// Write `state` into the lock file's record (after the state file).
    pub write_mark: bool,
    /// Set by a reset: what was found, for the log.
    pub reset: Option<String>,
}

/// Whether `a` is at least as new as `b`: a later term, or the same term with
/// the same vote or with `b` not having voted. A state behind another would
/// let the node vote again in a term it may have voted in.
pub fn at_least(a: HardState, b: HardState) -> bool {
    a.term > b.term || (a.term == b.term && (b.voted_for.is_none() || a.voted_for == b.voted_for))
}

/// Decides a start from the contents of the state file (`None`: missing) and
/// of the lock file, for `id` in directory `dir`. With `reset` (`Some(min
/// term)`), a state that would be refused as missing, damaged, older than the
/// record or of another protocol is replaced by one no older than anything
/// the node knows (see [`reset_state`](crate::reset_state)).
pub fn plan(
    id: &Identity,
    dir: &Path,
    state: Option<&[u8]>,
    lock: &[u8],
    reset: Option<Option<Term>>,
) -> Result<Plan, StartError> {
    let paths = Paths { state: dir.join(STATE_FILE), lock: dir.join(LOCK_FILE) };
    let mark = MarkRead::from_bytes(lock, &paths.lock)?;
    decide(id, &paths, StateRead::from_bytes(state), mark, reset)
}

/// The two files' paths, for error messages.
pub(crate) struct Paths {
    pub(crate) state: PathBuf,
    pub(crate) lock: PathBuf,
}

/// [`plan`], from already classified files.
pub(crate) fn decide(
    id: &Identity,
    paths: &Paths,
    state: StateRead,
    mark: MarkRead,
    reset: Option<Option<Term>>,
) -> Result<Plan, StartError> {
    if let Some(Some(t)) = reset {
        if !t.is_valid() {
            return Err(StartError::ResetImpossible {
                reason: format!("term {t} is above the largest valid term {}", Term::MAX_VALID),
            });
        }
    }
    if let StateRead::Found(f) = &state {
        id.check_owner(&paths.state, &f.record)?;
    }
    if let MarkRead::Found(m, _) = &mark {
        id.check_owner(&paths.lock, m)?;
    }
    if let StateRead::Unreadable(ParseError::Version(version)) = state {
        return Err(StartError::UnsupportedStateFormat {
            path: paths.state.clone(),
            version,
            supported: super::format::STATE_FORMAT_VERSION,
        });
    }
    match (refusal(id, paths, &state, &mark), reset) {
        (None, reset) => {
            if reset.is_some() {
                info!("--reset-state: the state is consistent, nothing to reset");
            }
            Ok(consistent(&state, &mark))
        }
        (Some(refused), None) => Err(refused),
        (Some(refused), Some(min_term)) => reset_plan(id, &state, &mark, min_term, refused),
    }
}

/// Why a start without a reset must be refused, if it must.
fn refusal(id: &Identity, paths: &Paths, state: &StateRead, mark: &MarkRead) -> Option<StartError> {
    if let StateRead::Found(f) = state {
        if let Some(e) = id.mismatch(&paths.state, &f.record) {
            return Some(e);
        }
    }
    if let MarkRead::Found(m, _) = mark {
        // The record of a node that never had a term says nothing of any protocol.
        if m.hard_state() != HardState::default() {
            if let Some(e) = id.mismatch(&paths.lock, m) {
                return Some(e);
            }
        }
    }
    let recovery = || match mark {
        MarkRead::Found(m, _) => {
            Recovery::FromRecord { lock: paths.lock.clone(), state: m.hard_state() }
        }
        MarkRead::Absent => Recovery::NeedsTerm {
            lock: paths.lock.clone(),
            why: "it is empty: written by an earlier tenure that kept no record".into(),
        },
        MarkRead::Damaged(d) => {
            Recovery::NeedsTerm { lock: paths.lock.clone(), why: format!("it is damaged: {d}") }
        }
    };
    match (state, mark) {
        // A record of a node that never had a term: nothing to forget.
        (StateRead::Missing, MarkRead::Found(m, _)) if m.hard_state() == HardState::default() => {
            None
        }
        (StateRead::Missing, _) => Some(missing(paths, recovery())),
        (StateRead::Unreadable(ParseError::Corrupt(detail)), _) => Some(StartError::CorruptState {
            path: paths.state.clone(),
            detail: detail.clone(),
            recovery: recovery(),
        }),
        (StateRead::Unreadable(ParseError::Version(_)), _) => None, // refused by `decide`
        (StateRead::Found(f), MarkRead::Found(m, seq))
            if !at_least(f.record.hard_state(), m.hard_state()) && !interrupted(f, m, *seq) =>
        {
            Some(StartError::StateRolledBack {
                path: paths.state.clone(),
                lock: paths.lock.clone(),
                found: f.record.hard_state(),
                recorded: m.hard_state(),
            })
        }
        (StateRead::Found(_), _) => None,
    }
}

/// Whether the record is one write ahead of the state file: the state file
/// and the record are written at the same time, so a crash can leave the
/// record of a write whose state file copy did not complete. Nothing was sent
/// from that write, and starting from the record is safe when it is newer.
/// (A record of another vote in the same term is no interrupted write: no
/// node changes its vote within a term. Found by the state_file fuzz target.)
fn interrupted(state: &StateFile, record: &Record, record_seq: u64) -> bool {
    state.seq.checked_add(1) == Some(record_seq)
        && at_least(record.hard_state(), state.record.hard_state())
}

fn missing(paths: &Paths, recovery: Recovery) -> StartError {
    StartError::StateMissing { path: paths.state.clone(), lock: paths.lock.clone(), recovery }
}

/// The plan when nothing is amiss: start from the state file (or fresh),
/// repairing a damaged slot, upgrading a version-1 file, and bringing the
/// lock file's record up to date.
fn consistent(state: &StateRead, mark: &MarkRead) -> Plan {
    let found = match state {
        StateRead::Found(f) => f,
        // `refusal` lets a missing state through only next to the record of a
        // node that never had a term: a fresh node.
        _ => {
            return Plan {
                state: HardState::default(),
                seq: 1,
                rewrite_state: true,
                write_mark: true,
                reset: None,
            }
        }
    };
    if let Some((slot, why)) = &found.damaged_slot {
        warn!(
            slot,
            damage = %why,
            "one copy of the state is damaged (a write torn by a crash, or a bad sector); \
             the other copy is used and written over the damaged one"
        );
    }
    let write_mark = match mark {
        MarkRead::Found(m, seq) if !at_least(found.record.hard_state(), m.hard_state()) => {
            // `refusal` lets this through only for an interrupted write.
            warn!(
                state_seq = found.seq,
                record_seq = seq,
                "the state file is one write behind the lock file's record: a crash \
                 interrupted the last write; the record is used and written to the state file"
            );
            return Plan {
                state: m.hard_state(),
                seq: *seq,
                rewrite_state: true,
                write_mark: false,
                reset: None,
            };
        }
        MarkRead::Found(m, _) => m != &found.record,
        MarkRead::Absent => {
            info!("recording the state in the lock file (its first start with this version)");
            true
        }
        MarkRead::Damaged(d) => {
            warn!(
                damage = %d,
                "the lock file's record of the newest state is damaged; it is rewritten from \
                 the state file, which checks out"
            );
            true
        }
    };
    Plan {
        state: found.record.hard_state(),
        seq: found.seq,
        rewrite_state: found.damaged_slot.is_some()
            || found.version == super::format::STATE_FORMAT_V1,
        write_mark,
        reset: None,
    }
}

/// The newer of two states; when neither is (two votes in one term, which no
/// node casts), a term above both, with no vote.
fn newest(a: HardState, b: HardState) -> Option<HardState> {
    if at_least(a, b) {
        Some(a)
    } else if at_least(b, a) {
        Some(b)
    } else {
        above(a.term.max(b.term))
    }
}

/// A state in a term above `t`, with no vote.
fn above(t: Term) -> Option<HardState> {
    t.checked_next().map(|term| HardState { term, voted_for: None })
}

/// The reset: a state no older than every state of this protocol the node
/// knows (the state file's and the lock's record), in a term above every
/// term of another protocol it knows, and not below `min_term`. With nothing
/// known and no `min_term`, there is no safe state: the refusal stands.
fn reset_plan(
    id: &Identity,
    state: &StateRead,
    mark: &MarkRead,
    min_term: Option<Term>,
    refused: StartError,
) -> Result<Plan, StartError> {
    let mut known: Vec<(&Record, u64)> = Vec::new();
    if let StateRead::Found(f) = state {
        known.push((&f.record, f.seq));
    }
    if let MarkRead::Found(m, seq) = mark {
        known.push((m, *seq));
    }
    let mut result: Option<HardState> = min_term.map(|term| HardState { term, voted_for: None });
    let overflow = || StartError::ResetImpossible {
        reason: format!("a term of {} leaves no valid term above it", Term::MAX_VALID),
    };
    for (record, _) in &known {
        let hs = if record.protocol == id.protocol {
            record.hard_state()
        } else {
            above(record.term).ok_or_else(overflow)?
        };
        result = Some(match result {
            None => hs,
            Some(r) => newest(r, hs).ok_or_else(overflow)?,
        });
    }
    let Some(state) = result else { return Err(refused) };
    let seq = known.iter().map(|&(_, seq)| seq).max().unwrap_or(0).saturating_add(1);
    Ok(Plan { state, seq, rewrite_state: true, write_mark: true, reset: Some(refused.to_string()) })
}

/// Checks the promise of [`plan`] on one of its results: the state it starts
/// from is at least as new as the lock file's record of this node and
/// protocol; after a reset, also as new as the state file's, above every term
/// of another protocol either file holds, and not below the minimum term.
/// `Err` describes a broken promise (the fuzz target and the tests call it).
pub fn check_plan(
    id: &Identity,
    state: Option<&[u8]>,
    lock: &[u8],
    reset: Option<Option<Term>>,
    p: &Plan,
) -> Result<(), String> {
    let mut records = Vec::new();
    if let Ok(Some(m)) = parse_lock_file(lock) {
        records.push(m);
    }
    if let Some(Ok(f)) = state.map(parse_state_file) {
        if reset.is_some() || f.record.protocol == id.protocol {
            records.push(f.record);
        }
    }
    for r in records.iter().filter(|r| r.hard_state() != HardState::default()) {
        let ok = if r.protocol == id.protocol {
            at_least(p.state, r.hard_state())
        } else {
            p.state.term > r.term
        };
        if !ok {
            return Err(format!("{:?} starts below {r:?}", p.state));
        }
    }
    if let Some(Some(min)) = reset {
        if p.reset.is_some() && p.state.term < min {
            return Err(format!("{:?} is below the minimum term {min}", p.state));
        }
    }
    if !p.state.term.is_valid() {
        return Err(format!("{:?} has an invalid term", p.state));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::format::{encode_slot, testing::v1_file};
    use super::*;

    const ME: NodeId = NodeId(1);

    fn id(protocol: ProtocolKind) -> Identity {
        Identity { cluster_id: "c".into(), node_id: ME, protocol }
    }

    fn hs(term: u64, vote: Option<u64>) -> HardState {
        HardState { term: Term(term), voted_for: vote.map(NodeId) }
    }

    fn slot(protocol: ProtocolKind, state: HardState) -> Vec<u8> {
        encode_slot(3, &id(protocol).record(state))
    }

    fn state_file(protocol: ProtocolKind, state: HardState) -> Vec<u8> {
        let mut f = slot(protocol, state);
        f.extend(slot(protocol, state));
        f
    }

    const RAFT: ProtocolKind = ProtocolKind::Raft;
    const DIR: &str = "/d";

    fn run(
        state: Option<&[u8]>,
        lock: &[u8],
        reset: Option<Option<Term>>,
    ) -> Result<Plan, StartError> {
        plan(&id(RAFT), Path::new(DIR), state, lock, reset)
    }

    #[test]
    fn a_state_at_or_past_the_record_starts_and_updates_the_record() {
        let s = state_file(RAFT, hs(5, Some(2)));
        for (mark, write_mark) in [
            (slot(RAFT, hs(5, Some(2))), false),
            (slot(RAFT, hs(5, None)), true),
            (slot(RAFT, hs(4, Some(3))), true),
            (Vec::new(), true),
            (vec![7; 100], true),
        ] {
            let p = run(Some(&s), &mark, None).unwrap();
            assert_eq!(
                (p.state, p.write_mark, p.rewrite_state),
                (hs(5, Some(2)), write_mark, false)
            );
        }
    }

    #[test]
    fn a_state_behind_the_record_is_refused_and_a_reset_takes_the_record() {
        for (found, recorded) in [
            (hs(3, Some(2)), hs(7, Some(3))),
            (hs(7, None), hs(7, Some(3))),
            (hs(7, Some(2)), hs(7, Some(3))),
        ] {
            let s = state_file(RAFT, found);
            let m = slot(RAFT, recorded);
            match run(Some(&s), &m, None) {
                Err(StartError::StateRolledBack { found: f, recorded: r, ref path, ref lock }) => {
                    assert_eq!((f, r), (found, recorded));
                    assert_eq!(
                        (path.as_path(), lock.as_path()),
                        (Path::new("/d/state"), Path::new("/d/lock"))
                    );
                }
                other => panic!("{found:?} behind {recorded:?}: {other:?}"),
            }
            let p = run(Some(&s), &m, Some(None)).unwrap();
            // Two votes in one term (no node casts them): a term above both.
            let expected = if found.term == recorded.term && found.voted_for.is_some() {
                hs(8, None)
            } else {
                recorded
            };
            assert_eq!(p.state, expected);
            assert!(p.rewrite_state && p.write_mark && p.reset.is_some());
            assert!(p.seq > 3);
        }
    }

    #[test]
    fn a_record_one_write_ahead_is_taken_and_two_ahead_refused() {
        let s = state_file(RAFT, hs(5, Some(2))); // sequence number 3
        let ahead = |seq| encode_slot(seq, &id(RAFT).record(hs(6, Some(3))));
        let p = run(Some(&s), &ahead(4), None).unwrap();
        assert_eq!(
            (p.state, p.seq, p.rewrite_state, p.write_mark),
            (hs(6, Some(3)), 4, true, false)
        );
        let e = run(Some(&s), &ahead(5), None).unwrap_err();
        assert!(matches!(e, StartError::StateRolledBack { .. }), "{e:?}");
        // A record one write behind the state file is just older.
        assert_eq!(run(Some(&s), &ahead(2), None).unwrap_err().to_string(), e.to_string());
        // Another vote in the same term one write ahead is no interrupted
        // write (no node changes its vote in a term): refused, and a reset
        // goes to the next term.
        let other_vote = encode_slot(4, &id(RAFT).record(hs(5, Some(3))));
        let e = run(Some(&s), &other_vote, None).unwrap_err();
        assert!(matches!(e, StartError::StateRolledBack { .. }), "{e:?}");
        assert_eq!(run(Some(&s), &other_vote, Some(None)).unwrap().state, hs(6, None));
    }

    #[test]
    fn a_missing_state_is_refused_unless_the_node_never_had_a_term() {
        let m = slot(RAFT, hs(9, Some(1)));
        let e = run(None, &m, None).unwrap_err();
        assert!(
            matches!(&e, StartError::StateMissing { recovery: Recovery::FromRecord { state, .. }, .. } if *state == hs(9, Some(1))),
            "{e:?}"
        );
        assert_eq!(run(None, &m, Some(None)).unwrap().state, hs(9, Some(1)));
        // A higher minimum term wins, with no vote.
        assert_eq!(run(None, &m, Some(Some(Term(20)))).unwrap().state, hs(20, None));
        // A lower one changes nothing.
        assert_eq!(run(None, &m, Some(Some(Term(2)))).unwrap().state, hs(9, Some(1)));

        let fresh = run(None, &slot(RAFT, HardState::default()), None).unwrap();
        assert_eq!(
            fresh,
            Plan {
                state: HardState::default(),
                seq: 1,
                rewrite_state: true,
                write_mark: true,
                reset: None
            }
        );
    }

    #[test]
    fn without_a_record_a_reset_needs_a_minimum_term() {
        for lock in [Vec::new(), vec![1; SLOT], slot(RAFT, hs(3, None))[..100].to_vec()] {
            let e = run(None, &lock, None).unwrap_err();
            assert!(
                matches!(&e, StartError::StateMissing { recovery: Recovery::NeedsTerm { .. }, .. }),
                "{e:?}"
            );
            assert!(e.to_string().contains("--reset-term"), "{e}");
            let again = run(None, &lock, Some(None)).unwrap_err();
            assert_eq!(again.to_string(), e.to_string());
            assert_eq!(run(None, &lock, Some(Some(Term(12)))).unwrap().state, hs(12, None));
        }
    }

    const SLOT: usize = super::super::format::SLOT_LEN;

    #[test]
    fn a_corrupt_state_is_refused_and_a_reset_takes_the_record() {
        let mut s = state_file(RAFT, hs(4, Some(2)));
        s[30] ^= 1;
        s[SLOT + 30] ^= 1;
        let m = slot(RAFT, hs(4, Some(2)));
        let e = run(Some(&s), &m, None).unwrap_err();
        assert!(
            matches!(e, StartError::CorruptState { recovery: Recovery::FromRecord { .. }, .. }),
            "{e:?}"
        );
        let msg = e.to_string();
        assert!(msg.contains("--reset-state") && !msg.contains("backup"), "{msg}");
        assert_eq!(run(Some(&s), &m, Some(None)).unwrap().state, hs(4, Some(2)));
        let e = run(Some(&s), &[], Some(None)).unwrap_err();
        assert!(
            matches!(e, StartError::CorruptState { recovery: Recovery::NeedsTerm { .. }, .. }),
            "{e:?}"
        );
    }

    #[test]
    fn another_protocols_terms_are_passed_by_a_reset() {
        let paxos = ProtocolKind::Paxos;
        let s = state_file(paxos, hs(40, Some(2)));
        let e = run(Some(&s), &slot(paxos, hs(40, Some(2))), None).unwrap_err();
        assert!(
            matches!(e, StartError::ProtocolMismatch { found: ProtocolKind::Paxos, .. }),
            "{e:?}"
        );
        assert!(e.to_string().contains("--reset-state"), "{e}");
        for lock in [slot(paxos, hs(40, Some(2))), Vec::new()] {
            let p = run(Some(&s), &lock, Some(None)).unwrap();
            assert_eq!(p.state, hs(41, None));
        }
        // A record of this protocol older than the other protocol's terms.
        let p = run(Some(&s), &slot(RAFT, hs(50, Some(3))), Some(None)).unwrap();
        assert_eq!(p.state, hs(50, Some(3)));
        // Only the lock of another protocol, no state: above it.
        let p = run(None, &slot(paxos, hs(40, Some(2))), Some(None)).unwrap();
        assert_eq!(p.state, hs(41, None));
    }

    #[test]
    fn foreign_records_are_refused_even_by_a_reset() {
        let other = Identity { node_id: NodeId(2), ..id(RAFT) };
        let foreign = encode_slot(1, &other.record(hs(3, None)));
        let mut f = foreign.clone();
        f.extend(&foreign);
        for (state, lock, path) in [
            (Some(&f[..]), &slot(RAFT, hs(3, None))[..], "/d/state"),
            (None, &foreign[..], "/d/lock"),
            (Some(&state_file(RAFT, hs(3, None))[..]), &foreign[..], "/d/lock"),
        ] {
            for reset in [None, Some(None), Some(Some(Term(99)))] {
                match run(state, lock, reset) {
                    Err(StartError::ForeignState { path: p, found_node: NodeId(2), .. }) => {
                        assert_eq!(p, Path::new(path))
                    }
                    other => panic!("{other:?}"),
                }
            }
        }
    }

    /// Found by the state_file fuzz target: a minimum term above the largest
    /// valid one made a plan with an invalid term.
    #[test]
    fn a_minimum_term_above_the_valid_ones_is_refused() {
        let m = slot(RAFT, hs(9, Some(1)));
        for min in [Term::MAX_VALID.0 + 1, u64::MAX] {
            let e = run(None, &m, Some(Some(Term(min)))).unwrap_err();
            assert!(matches!(e, StartError::ResetImpossible { .. }), "{e:?}");
        }
        assert_eq!(run(None, &m, Some(Some(Term::MAX_VALID))).unwrap().state.term, Term::MAX_VALID);
    }

    #[test]
    fn damaged_slots_and_version_1_are_rewritten() {
        let mut s = state_file(RAFT, hs(4, Some(2)));
        s[30] ^= 1;
        let p = run(Some(&s), &slot(RAFT, hs(4, Some(2))), None).unwrap();
        assert!(p.rewrite_state && !p.write_mark);
        let v1 = v1_file(&id(RAFT).record(hs(4, Some(2))));
        let p = run(Some(&v1), &[], None).unwrap();
        assert_eq!((p.state, p.rewrite_state, p.write_mark), (hs(4, Some(2)), true, true));
    }

    #[test]
    fn newer_formats_are_refused_even_by_a_reset() {
        let mut lock = slot(RAFT, hs(1, None));
        lock[8] = 9;
        // The version sits under the checksum: recompute it.
        let body_len = u32::from_le_bytes(lock[20..24].try_into().unwrap()) as usize;
        let end = 24 + body_len;
        let crc = crc32fast::hash(&lock[..end]);
        lock[end..end + 4].copy_from_slice(&crc.to_le_bytes());
        for reset in [None, Some(None)] {
            let e = run(None, &lock, reset).unwrap_err();
            assert!(matches!(e, StartError::UnsupportedStateFormat { version: 9, .. }), "{e:?}");
        }
    }

    /// Whatever the files hold, a plan never starts below a record of this
    /// node and protocol, and a reset never below either file.
    #[test]
    fn no_plan_goes_below_what_the_files_record() {
        let states: Vec<Option<Vec<u8>>> = vec![
            None,
            Some(b"junk".to_vec()),
            Some(state_file(RAFT, hs(0, None))),
            Some(state_file(RAFT, hs(5, None))),
            Some(state_file(RAFT, hs(5, Some(2)))),
            Some(state_file(RAFT, hs(6, Some(3)))),
            Some(state_file(ProtocolKind::Ranked, hs(9, Some(3)))),
        ];
        let locks: Vec<Vec<u8>> = vec![
            Vec::new(),
            vec![0; 3],
            slot(RAFT, hs(0, None)),
            slot(RAFT, hs(5, Some(2))),
            slot(RAFT, hs(5, Some(3))),
            slot(RAFT, hs(7, None)),
            slot(ProtocolKind::Ranked, hs(8, None)),
        ];
        for s in &states {
            for l in &locks {
                for reset in [None, Some(None), Some(Some(Term(6)))] {
                    if let Ok(p) = run(s.as_deref(), l, reset) {
                        check_plan(&id(RAFT), s.as_deref(), l, reset, &p)
                            .unwrap_or_else(|e| panic!("{e}"));
                    }
                }
            }
        }
    }
}
