//! The key-value workload's checkers.
//!
//! * [`ReplicaChecks`], watching every replica output as it is handled:
//!   every node applies the same entry at each index (across restarts), a
//!   node applies indexes one after another (a snapshot may skip ahead), and
//!   the stores of two nodes that applied the same index are the same
//!   (revision and every key, compared by digest).
//! * [`check_history`], after the run, on the clients' history:
//!   1. revisions: every value is seen with one `mod_revision` (the one its
//!      write reported), two writes never share one, and the store revision
//!      in responses never goes back in real time (an operation invoked
//!      after another returned sees at least its revision, and a write
//!      gets a higher one). The revision is cluster-wide, so this is the
//!      check that ties the keys together;
//!   2. linearizability, key by key ([`crate::linearizability`]) against a
//!      register with the store's semantics. Every operation touches one
//!      key, so checking each key's history alone is exact for the values;
//!      the revisions that tie keys together are check 1's.
//!
//! "An acknowledged write is never lost" is part of 2: after healing, a
//! client reads every key, and a read that misses an acknowledged write (or
//! sees an older one) has no linearization.

use crate::checker::Check;
use crate::linearizability::{self, Model, Operation, Outcome};
use crate::workload::{value_id, Expected, Fate, KvInput, KvOutput, Record};
use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use tenure_kv::{KeyValue, OpResponse, RangeOpResponse, Response, Store, MAX_RANGE};
use tenure_replica::{LogOp, Position};

/// Search steps allowed per key before the verdict is "undecided".
pub const MAX_SEARCH_STEPS: u64 = 2_000_000;
/// Revision violations reported per history (the rest are counted).
const MAX_REVISION_VIOLATIONS: usize = 8;

/// A digest of a store: its revision and every key with its value and
/// revisions (the change history is left out: a store restored from a
/// snapshot has none).
pub fn digest(store: &Store) -> u64 {
    let mut h = DefaultHasher::new();
    store.revision().hash(&mut h);
    let (keys, _) = store.range("", MAX_RANGE);
    keys.hash(&mut h);
    h.finish()
}

/// The checks on replica outputs, for one run.
#[derive(Debug, Default)]
pub struct ReplicaChecks {
    /// The entry applied (or covered by an installed snapshot) at each index.
    entry_at: HashMap<u64, (Position, usize)>,
    /// The digest of the store at each applied index, and who had it first.
    state_at: HashMap<u64, (u64, usize)>,
    /// Per node: the index applied last (in its current incarnation).
    applied: Vec<Option<u64>>,
    /// Per node: the applied index whose state was compared last.
    compared: Vec<Option<u64>>,
}

impl ReplicaChecks {
    /// Checks for `n` nodes.
    pub fn new(n: usize) -> Self {
        ReplicaChecks {
            applied: vec![None; n],
            compared: vec![None; n],
            ..ReplicaChecks::default()
        }
    }

    /// True if node `node`'s state at `index` was not compared yet.
    pub fn state_due(&self, node: usize, index: u64) -> bool {
        self.compared[node] != Some(index)
    }

    /// Node `node` (re)built its replica, which has applied up to `applied`.
    pub fn on_start(&mut self, node: usize, applied: u64) {
        self.applied[node] = Some(applied);
        self.compared[node] = None;
    }

    /// Node `node` crashed.
    pub fn on_crash(&mut self, node: usize) {
        self.applied[node] = None;
        self.compared[node] = None;
    }

    fn same_entry(&mut self, node: usize, pos: Position) -> Option<(Check, String)> {
        let (first, by) = *self.entry_at.entry(pos.index).or_insert((pos, node));
        (first != pos).then(|| {
            (
                Check::SameEntryPerIndex,
                format!(
                    "n{} applied {pos:?} at index {} where n{} applied {first:?}",
                    node + 1,
                    pos.index,
                    by + 1
                ),
            )
        })
    }

    /// Checks what one output of node `node` applied (`write` for
    /// installed snapshots). Returns the violations found.
    pub fn on_output(
        &mut self,
        node: usize,
        write: &[LogOp],
        applied: &[Position],
    ) -> Vec<(Check, String)> {
        let mut bad = Vec::new();
        let installed: Vec<Position> = write
            .iter()
            .filter_map(|op| match op {
                // A follower that already holds a leader snapshot's last
                // entry installs it as a compaction (keeping what follows),
                // so a `Compact` may skip applications too; a node's own
                // compaction is at an index it applied, so the entry after
                // it is the next one anyway.
                LogOp::InstallSnapshot { last, .. } | LogOp::Compact { last, .. } => Some(*last),
                _ => None,
            })
            .collect();
        for &last in &installed {
            bad.extend(self.same_entry(node, last));
        }
        for &pos in applied {
            bad.extend(self.same_entry(node, pos));
            let upto = self.applied[node].unwrap_or(0);
            // Only an installed snapshot's next entry may follow it.
            let skipped_by_snapshot =
                installed.iter().any(|s| s.index >= upto && pos.index == s.index + 1);
            if pos.index != upto + 1 && !(pos.index > upto && skipped_by_snapshot) {
                bad.push((
                    Check::ReplicaInvariant,
                    format!("n{} applied index {} after index {upto}", node + 1, pos.index),
                ));
            }
            self.applied[node] = Some(pos.index);
        }
        if let Some(max) = installed.iter().map(|s| s.index).max() {
            let upto = self.applied[node].unwrap_or(0);
            self.applied[node] = Some(upto.max(max));
        }
        bad
    }

    /// Node `node`'s store, having applied up to `index`, has digest `d`.
    pub fn on_state(&mut self, node: usize, index: u64, d: u64) -> Option<(Check, String)> {
        self.compared[node] = Some(index);
        let (first, by) = *self.state_at.entry(index).or_insert((d, node));
        (first != d).then(|| {
            (
                Check::SameStatePerIndex,
                format!(
                    "n{}'s store at applied index {index} differs from n{}'s at the same index",
                    node + 1,
                    by + 1
                ),
            )
        })
    }
}

/// The verdict on a history.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HistoryVerdict {
    /// Violations found.
    pub violations: Vec<(Check, String)>,
    /// Keys whose linearizability the search could not decide in its bound.
    pub undecided: Vec<String>,
    /// Search steps taken, over every key.
    pub steps: u64,
    /// The most steps one key took.
    pub max_steps: u64,
}

/// What the revisions in the history say: each write's revision, and the
/// write of each revision.
#[derive(Debug, Default)]
struct Revisions {
    of_write: HashMap<u32, u64>,
    writer: HashMap<u64, u32>,
}

/// The key-values an output shows (read, previous, got), with the key.
fn shown(output: &KvOutput) -> Vec<&KeyValue> {
    let mut out = Vec::new();
    match output {
        KvOutput::Read { kv, .. } => out.extend(kv.as_ref()),
        KvOutput::Written { .. } => {}
        KvOutput::Write(r) => match r {
            Response::Put { prev, .. } | Response::Delete { prev, .. } => out.extend(prev.as_ref()),
            Response::Txn { responses, .. } => {
                for op in responses {
                    match op {
                        OpResponse::Put { prev } | OpResponse::Delete { prev } => {
                            out.extend(prev.as_ref())
                        }
                        OpResponse::Get { kv } => out.extend(kv.as_ref()),
                    }
                }
            }
            Response::RangeTxn { responses, .. } => shown_by(responses, &mut out),
            // The workload takes no lease: these show no key.
            Response::Conflict { .. }
            | Response::Invalid(_)
            | Response::Granted { .. }
            | Response::LeaseEnded { .. }
            | Response::LeasesExpired { .. }
            | Response::Checkpointed { .. }
            | Response::Refused(_) => {}
        },
    }
    out
}

/// The key-values the answers of etcd's transaction show, nested ones
/// included.
fn shown_by<'a>(responses: &'a [RangeOpResponse], out: &mut Vec<&'a KeyValue>) {
    for op in responses {
        match op {
            RangeOpResponse::Put { prev } => out.extend(prev.as_ref()),
            RangeOpResponse::DeleteRange { prev } => out.extend(prev),
            RangeOpResponse::Range { kvs, .. } => out.extend(kvs),
            RangeOpResponse::Txn { responses, .. } => shown_by(responses, out),
        }
    }
}

/// The revision a write's own response gives it, if it took effect.
fn own_revision(input: &KvInput, output: &KvOutput) -> Option<(u32, u64)> {
    match (input, output) {
        (
            KvInput::Put { value, .. } | KvInput::Cas { value, .. },
            KvOutput::Write(Response::Put { revision, .. }),
        ) => Some((*value, *revision)),
        (
            KvInput::TxnCas { value, .. },
            KvOutput::Write(Response::Txn { succeeded: true, revision, .. }),
        ) => Some((*value, *revision)),
        (
            KvInput::Put { value, .. } | KvInput::Cas { value, .. },
            KvOutput::Written { revision },
        ) => Some((*value, *revision)),
        _ => None,
    }
}

/// The store revision a response reports, and whether the operation
/// changed the store.
fn store_revision(output: &KvOutput) -> Option<(u64, bool)> {
    match output {
        KvOutput::Read { revision, .. } => Some((*revision, false)),
        KvOutput::Written { revision } => Some((*revision, true)),
        KvOutput::Write(r) => match r {
            Response::Put { revision, .. } => Some((*revision, true)),
            Response::Delete { revision, prev } => Some((*revision, prev.is_some())),
            Response::Txn { revision, succeeded, responses } => {
                let wrote =
                    *succeeded && responses.iter().any(|o| !matches!(o, OpResponse::Get { .. }));
                Some((*revision, wrote))
            }
            Response::Conflict { revision, .. }
            | Response::Granted { revision, .. }
            | Response::Checkpointed { revision, .. } => Some((*revision, false)),
            Response::LeaseEnded { revision, deleted, .. }
            | Response::LeasesExpired { revision, deleted, .. } => Some((*revision, *deleted > 0)),
            Response::RangeTxn { revision, responses, .. } => {
                Some((*revision, responses.iter().any(RangeOpResponse::changed)))
            }
            Response::Invalid(_) | Response::Refused(_) => None,
        },
    }
}

fn returned(r: &Record) -> Option<(u64, &KvOutput)> {
    match &r.fate {
        Fate::Returned { at_ns, output } => Some((*at_ns, output)),
        _ => None,
    }
}

/// Check 1: revisions are consistent and never go back in real time.
fn check_revisions(history: &[Record], bad: &mut Vec<(Check, String)>) -> Revisions {
    let mut revs = Revisions::default();
    // The key each value was written to.
    let key_of: HashMap<u32, usize> = history
        .iter()
        .filter_map(|r| match r.input {
            KvInput::Put { key, value }
            | KvInput::Cas { key, value, .. }
            | KvInput::TxnCas { key, value, .. } => Some((value, key)),
            _ => None,
        })
        .collect();
    let mut note = |value: u32, rev: u64, what: &str, bad: &mut Vec<(Check, String)>| {
        let known = *revs.of_write.entry(value).or_insert(rev);
        if known != rev {
            bad.push((
                Check::RevisionOrder,
                format!("value v{value} seen with mod_revision {rev} ({what}) and {known}"),
            ));
        }
        let writer = *revs.writer.entry(rev).or_insert(value);
        if writer != value {
            bad.push((
                Check::RevisionOrder,
                format!("values v{writer} and v{value} both have mod_revision {rev}"),
            ));
        }
    };
    for (i, r) in history.iter().enumerate() {
        let Some((_, output)) = returned(r) else { continue };
        if let Some((value, rev)) = own_revision(&r.input, output) {
            note(value, rev, &format!("its write, op {i}"), bad);
        }
        for kv in shown(output) {
            let key = r.input.key();
            match value_id(&kv.value) {
                Some(v)
                    if key_of.get(&v) == Some(&key) && kv.key == crate::workload::key_name(key) =>
                {
                    note(v, kv.mod_revision, &format!("op {i}"), bad)
                }
                _ => bad.push((
                    Check::Linearizability,
                    format!(
                        "op {i} on key {} shows {:?}={:?}, which no client wrote there",
                        crate::workload::key_name(key),
                        kv.key,
                        String::from_utf8_lossy(&kv.value)
                    ),
                )),
            }
        }
    }
    check_real_time(history, bad);
    revs
}

/// Part of check 1: after an operation returned, every operation invoked
/// later sees its revision, and a write gets a higher one.
fn check_real_time(history: &[Record], bad: &mut Vec<(Check, String)>) {
    let mut done: Vec<(u64, u64, usize)> = history
        .iter()
        .enumerate()
        .filter_map(|(i, r)| {
            let (at, out) = returned(r)?;
            Some((at, store_revision(out)?.0, i))
        })
        .collect();
    done.sort_unstable();
    let mut best: Vec<(u64, usize)> = Vec::with_capacity(done.len());
    for &(_, rev, i) in &done {
        let prev = best.last().copied().unwrap_or((0, usize::MAX));
        best.push(if rev > prev.0 { (rev, i) } else { prev });
    }
    for (i, r) in history.iter().enumerate() {
        let Some((_, out)) = returned(r) else { continue };
        let Some((rev, wrote)) = store_revision(out) else { continue };
        let before = done.partition_point(|&(at, _, _)| at <= r.call_ns);
        let Some(&(floor, by)) = before.checked_sub(1).map(|k| &best[k]) else { continue };
        if rev < floor || (wrote && rev == floor) {
            bad.push((
                Check::RevisionOrder,
                format!(
                    "op {i} ({:?}, invoked at {:.3} ms) reports revision {rev}, but op {by} returned revision {floor} before it was invoked",
                    r.input,
                    r.call_ns as f64 / 1e6
                ),
            ));
        }
    }
}

/// A key of the store as a register of writes: `None` when absent, else
/// the value (the write that set it).
struct KeyModel<'a> {
    revs: &'a Revisions,
}

impl KeyModel<'_> {
    /// True if state `s` has the revision the client compared with.
    fn matches(&self, s: &Option<u32>, e: &Expected) -> bool {
        *s == e.write
    }

    /// True if `kv` (or its absence) is state `s`.
    fn shows(&self, s: &Option<u32>, kv: Option<&KeyValue>) -> bool {
        *s == kv.and_then(|kv| value_id(&kv.value)) && (s.is_none() == kv.is_none())
    }

    /// True if state `s` can have `mod_revision` `m`.
    fn has_revision(&self, s: &Option<u32>, m: u64) -> bool {
        match s {
            None => m == 0,
            Some(w) => match self.revs.of_write.get(w) {
                Some(&r) => r == m,
                // A write nobody saw the revision of: any revision no other
                // write has.
                None => m != 0 && !self.revs.writer.contains_key(&m),
            },
        }
    }

    fn cas(
        &self,
        s: &Option<u32>,
        expected: &Expected,
        value: u32,
        output: Option<&Response>,
    ) -> Option<Option<u32>> {
        let holds = self.matches(s, expected);
        match output {
            None => Some(if holds { Some(value) } else { *s }),
            Some(Response::Put { prev, .. }) => {
                (holds && self.shows(s, prev.as_ref())).then_some(Some(value))
            }
            Some(Response::Conflict { mod_revision, .. }) => {
                (!holds && self.has_revision(s, *mod_revision)).then_some(*s)
            }
            Some(Response::Txn { succeeded: true, responses, .. }) => match responses.as_slice() {
                [OpResponse::Put { prev }] => {
                    (holds && self.shows(s, prev.as_ref())).then_some(Some(value))
                }
                _ => None,
            },
            Some(Response::Txn { succeeded: false, responses, .. }) => match responses.as_slice() {
                [OpResponse::Get { kv }] => (!holds && self.shows(s, kv.as_ref())).then_some(*s),
                _ => None,
            },
            Some(_) => None,
        }
    }
}

impl Model for KeyModel<'_> {
    type State = Option<u32>;
    type Input = KvInput;
    type Output = KvOutput;

    fn init(&self) -> Option<u32> {
        None
    }

    fn step(
        &self,
        s: &Option<u32>,
        input: &KvInput,
        output: Option<&KvOutput>,
    ) -> Option<Option<u32>> {
        fn write(o: Option<&KvOutput>) -> Option<Option<&Response>> {
            match o {
                Some(KvOutput::Write(r)) => Some(Some(r)),
                Some(KvOutput::Read { .. } | KvOutput::Written { .. }) => None,
                None => Some(None),
            }
        }
        // Acknowledged without the previous value: a put from any state, a
        // compare-and-set from a state that holds its comparison.
        if let Some(KvOutput::Written { .. }) = output {
            return match input {
                KvInput::Put { value, .. } => Some(Some(*value)),
                KvInput::Cas { expected, value, .. } => {
                    self.matches(s, expected).then_some(Some(*value))
                }
                _ => None,
            };
        }
        match input {
            KvInput::Put { value, .. } => match write(output)? {
                None => Some(Some(*value)),
                Some(Response::Put { prev, .. }) => {
                    self.shows(s, prev.as_ref()).then_some(Some(*value))
                }
                Some(_) => None,
            },
            KvInput::Cas { expected, value, .. } | KvInput::TxnCas { expected, value, .. } => {
                let r = write(output)?;
                let kind_ok = matches!(
                    (input, r),
                    (KvInput::Cas { .. }, Some(Response::Put { .. } | Response::Conflict { .. }))
                        | (KvInput::TxnCas { .. }, Some(Response::Txn { .. }))
                        | (_, None)
                );
                if !kind_ok {
                    return None;
                }
                self.cas(s, expected, *value, r)
            }
            KvInput::Delete { .. } => match write(output)? {
                None => Some(None),
                Some(Response::Delete { prev, .. }) => self.shows(s, prev.as_ref()).then_some(None),
                Some(_) => None,
            },
            KvInput::TxnGet { .. } => match write(output)? {
                None => Some(*s),
                Some(Response::Txn { responses, .. }) => match responses.as_slice() {
                    [OpResponse::Get { kv }] => self.shows(s, kv.as_ref()).then_some(*s),
                    _ => None,
                },
                Some(_) => None,
            },
            KvInput::Read { .. } => match output {
                None => Some(*s),
                Some(KvOutput::Read { kv, .. }) => self.shows(s, kv.as_ref()).then_some(*s),
                Some(KvOutput::Write(_) | KvOutput::Written { .. }) => None,
            },
        }
    }
}

/// Describes operation `i` for a report.
pub fn describe(i: usize, r: &Record) -> String {
    let ret = match &r.fate {
        Fate::Returned { at_ns, output } => {
            format!("returned at {:.3} ms: {output:?}", *at_ns as f64 / 1e6)
        }
        other => format!("{other:?}"),
    };
    format!(
        "op {i} (client {}, invoked at {:.3} ms{}) {:?} {ret}",
        r.client,
        r.call_ns as f64 / 1e6,
        if r.final_read { ", final read" } else { "" },
        r.input
    )
}

/// Checks a history of `keys` keys: revisions, then each key's
/// linearizability with at most `max_steps` search steps per key.
pub fn check_history(history: &[Record], keys: usize, max_steps: u64) -> HistoryVerdict {
    let mut v = HistoryVerdict::default();
    let mut revision_violations = Vec::new();
    let revs = check_revisions(history, &mut revision_violations);
    let model = KeyModel { revs: &revs };
    for key in 0..keys {
        // The key's operations that may matter: reads without an answer
        // change nothing, operations no node accepted did not happen.
        let index: Vec<usize> = (0..history.len())
            .filter(|&i| {
                let r = &history[i];
                r.input.key() == key
                    && match r.fate {
                        Fate::Returned { .. } => true,
                        Fate::Unknown | Fate::Pending => !r.input.is_read(),
                        Fate::NotExecuted => false,
                    }
            })
            .collect();
        let ops: Vec<Operation<KvInput, KvOutput>> = index
            .iter()
            .map(|&i| {
                let r = &history[i];
                Operation {
                    client: r.client,
                    call: r.call_ns,
                    ret: returned(r).map(|(at, o)| (at, o.clone())),
                    input: r.input.clone(),
                }
            })
            .collect();
        let name = crate::workload::key_name(key);
        let (steps, verdict) = match linearizability::check(&model, &ops, max_steps) {
            Outcome::Linearizable { steps } => (steps, None),
            Outcome::Undecided { steps } => {
                v.undecided.push(format!(
                    "key {name}: no verdict within {max_steps} search steps ({} operations)",
                    ops.len()
                ));
                (steps, None)
            }
            Outcome::NotLinearizable { longest_prefix, stuck_at } => {
                let at = index[stuck_at];
                let from = stuck_at.saturating_sub(4);
                let context: Vec<String> = index[from..(stuck_at + 1).min(index.len())]
                    .iter()
                    .map(|&i| describe(i, &history[i]))
                    .collect();
                let what = format!(
                    "key {name}: no linearization of its {} operations; the longest attempt placed {longest_prefix} and could not get past the return of op {at}; the operations before it on this key: {}",
                    ops.len(),
                    context.join("; ")
                );
                (0, Some((Check::Linearizability, what)))
            }
        };
        v.steps += steps;
        v.max_steps = v.max_steps.max(steps);
        v.violations.extend(verdict);
    }
    // Linearizability first: it names the operation; revision violations
    // mostly follow from the same fault, a few of them say enough.
    let more = revision_violations.len().saturating_sub(MAX_REVISION_VIOLATIONS);
    revision_violations.truncate(MAX_REVISION_VIOLATIONS);
    v.violations.extend(revision_violations);
    if more > 0 {
        v.violations
            .push((Check::RevisionOrder, format!("... and {more} more revision violations")));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{key_name, value_bytes};

    fn kv(value: u32, rev: u64) -> KeyValue {
        KeyValue {
            key: key_name(0),
            value: value_bytes(value),
            create_revision: rev,
            mod_revision: rev,
            version: 1,
            lease: None,
        }
    }

    fn done(client: usize, call: u64, ret: u64, input: KvInput, output: KvOutput) -> Record {
        Record {
            client,
            call_ns: call,
            input,
            fate: Fate::Returned { at_ns: ret, output },
            final_read: false,
        }
    }

    fn put(rev: u64, prev: Option<KeyValue>) -> KvOutput {
        KvOutput::Write(Response::Put { revision: rev, prev })
    }

    fn read(v: Option<(u32, u64)>, revision: u64) -> KvOutput {
        KvOutput::Read { kv: v.map(|(v, r)| kv(v, r)), revision }
    }

    fn verdict(h: &[Record]) -> HistoryVerdict {
        check_history(h, 1, 100_000)
    }

    #[test]
    fn a_clean_history_passes() {
        let h = vec![
            done(0, 0, 10, KvInput::Put { key: 0, value: 1 }, put(1, None)),
            done(1, 20, 30, KvInput::Read { key: 0 }, read(Some((1, 1)), 1)),
            done(
                0,
                40,
                50,
                KvInput::Cas {
                    key: 0,
                    expected: Expected { write: Some(1), revision: 1 },
                    value: 2,
                },
                put(2, Some(kv(1, 1))),
            ),
            done(
                1,
                60,
                70,
                KvInput::Cas {
                    key: 0,
                    expected: Expected { write: Some(1), revision: 1 },
                    value: 3,
                },
                KvOutput::Write(Response::Conflict { mod_revision: 2, revision: 2 }),
            ),
            done(
                0,
                80,
                90,
                KvInput::Delete { key: 0 },
                KvOutput::Write(Response::Delete { revision: 3, prev: Some(kv(2, 2)) }),
            ),
            done(1, 100, 110, KvInput::Read { key: 0 }, read(None, 3)),
        ];
        let v = verdict(&h);
        assert_eq!(v.violations, vec![], "{v:?}");
        assert!(v.undecided.is_empty());
    }

    #[test]
    fn a_lost_acknowledged_write_is_caught() {
        let h = vec![
            done(0, 0, 10, KvInput::Put { key: 0, value: 1 }, put(1, None)),
            done(0, 20, 30, KvInput::Put { key: 0, value: 2 }, put(2, Some(kv(1, 1)))),
            done(1, 40, 50, KvInput::Read { key: 0 }, read(Some((1, 1)), 2)),
        ];
        let v = verdict(&h);
        assert!(v.violations.iter().any(|(c, _)| *c == Check::Linearizability), "{v:?}");
    }

    #[test]
    fn an_unknown_write_may_explain_a_read_but_a_stale_revision_is_caught() {
        let unknown = Record {
            client: 2,
            call_ns: 0,
            input: KvInput::Put { key: 0, value: 5 },
            fate: Fate::Unknown,
            final_read: false,
        };
        let h =
            vec![unknown.clone(), done(1, 40, 50, KvInput::Read { key: 0 }, read(Some((5, 7)), 7))];
        assert_eq!(verdict(&h).violations, vec![]);
        // A read invoked after a write returned revision 9 cannot report 8.
        let h = vec![
            done(0, 0, 10, KvInput::Put { key: 0, value: 1 }, put(9, None)),
            done(1, 20, 30, KvInput::Read { key: 0 }, read(Some((1, 9)), 8)),
        ];
        let v = verdict(&h);
        assert!(v.violations.iter().any(|(c, _)| *c == Check::RevisionOrder), "{v:?}");
        // Two writes reporting one revision.
        let h = vec![
            done(0, 0, 10, KvInput::Put { key: 0, value: 1 }, put(3, None)),
            done(0, 20, 30, KvInput::Put { key: 0, value: 2 }, put(3, Some(kv(1, 3)))),
        ];
        assert!(verdict(&h).violations.iter().any(|(c, _)| *c == Check::RevisionOrder));
    }

    #[test]
    fn writes_acknowledged_with_their_revision_only_are_checked() {
        let written = |revision| KvOutput::Written { revision };
        let cas = |write, revision, value| KvInput::Cas {
            key: 0,
            expected: Expected { write, revision },
            value,
        };
        let h = vec![
            done(0, 0, 10, KvInput::Put { key: 0, value: 1 }, written(1)),
            done(1, 20, 30, cas(Some(1), 1, 2), written(2)),
            done(0, 40, 50, KvInput::Read { key: 0 }, read(Some((2, 2)), 2)),
        ];
        assert_eq!(verdict(&h).violations, vec![]);
        // A compare-and-set acknowledged although its comparison failed.
        let h = vec![
            done(0, 0, 10, KvInput::Put { key: 0, value: 1 }, written(1)),
            done(1, 20, 30, cas(None, 0, 2), written(2)),
        ];
        assert!(verdict(&h).violations.iter().any(|(c, _)| *c == Check::Linearizability));
        // A read that misses an acknowledged write.
        let h = vec![
            done(0, 0, 10, KvInput::Put { key: 0, value: 1 }, written(1)),
            done(0, 20, 30, KvInput::Put { key: 0, value: 2 }, written(2)),
            done(1, 40, 50, KvInput::Read { key: 0 }, read(Some((1, 1)), 2)),
        ];
        assert!(verdict(&h).violations.iter().any(|(c, _)| *c == Check::Linearizability));
        // A value read with another revision than its write was given.
        let h = vec![
            done(0, 0, 10, KvInput::Put { key: 0, value: 1 }, written(3)),
            done(1, 20, 30, KvInput::Read { key: 0 }, read(Some((1, 2)), 3)),
        ];
        assert!(verdict(&h).violations.iter().any(|(c, _)| *c == Check::RevisionOrder));
    }

    #[test]
    fn a_value_nobody_wrote_is_caught() {
        let h = vec![done(1, 40, 50, KvInput::Read { key: 0 }, read(Some((77, 1)), 1))];
        assert!(verdict(&h).violations.iter().any(|(c, _)| *c == Check::Linearizability));
    }

    #[test]
    fn replica_checks_catch_different_entries_gaps_and_states() {
        use tenure_core::FencingToken;
        let p = |index, token| Position { token: FencingToken(token), index };
        let mut c = ReplicaChecks::new(2);
        c.on_start(0, 0);
        c.on_start(1, 0);
        assert!(c.on_output(0, &[], &[p(1, 1), p(2, 1)]).is_empty());
        assert!(c.on_output(1, &[], &[p(1, 1)]).is_empty());
        let bad = c.on_output(1, &[], &[p(2, 2)]);
        assert_eq!(bad[0].0, Check::SameEntryPerIndex);
        let bad = c.on_output(0, &[], &[p(4, 1)]);
        assert_eq!(bad[0].0, Check::ReplicaInvariant, "index 3 skipped");
        // An installed snapshot may skip ahead.
        let snap = LogOp::InstallSnapshot {
            last: p(9, 1),
            membership: tenure_replica::Membership::bootstrap(&[tenure_core::NodeId(1)]),
            data: vec![],
        };
        assert!(c.on_output(1, &[snap], &[p(10, 1)]).is_empty());
        assert!(c.on_state(0, 10, 77).is_none());
        assert_eq!(c.on_state(1, 10, 78).map(|b| b.0), Some(Check::SameStatePerIndex));
    }
}
