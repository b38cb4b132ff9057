//! The store's side of etcd's transaction ([`crate::Command::RangeTxn`]),
//! in etcd's order: the comparisons of the whole chosen path on the state
//! before the transaction, then every check (nothing is written if one
//! fails), then the operations, each seeing the writes before it.

use super::{
    compare_kv, ChangeKind, KeyRange, KeyValue, ReadError, Response, Store,
    MAX_CHANGES_PER_REVISION,
};
use crate::lease::Refusal;
use crate::range_txn::{
    RangeCompare, RangeOp, RangeOpResponse, RangeTxn, MAX_TXN_READ_BYTES, MAX_TXN_VISITED_KEYS,
    READ_OVERHEAD,
};
use std::collections::BTreeMap;

/// A range read answered before the writes: a read at a past revision.
type PastRead = (Vec<KeyValue>, u64);

/// Keys visited so far by one transaction, up to [`MAX_TXN_VISITED_KEYS`].
#[derive(Default)]
struct Budget {
    visited: usize,
}

impl Budget {
    fn visit(&mut self, keys: usize) -> Result<(), Refusal> {
        self.visited += keys;
        if self.visited > MAX_TXN_VISITED_KEYS {
            return Err(Refusal::TooManyKeysVisited);
        }
        Ok(())
    }
}

impl Store {
    /// Runs etcd's transaction `txn` at one revision.
    pub(super) fn range_txn(&mut self, txn: &RangeTxn) -> Response {
        let mut budget = Budget::default();
        let mut path = Vec::new();
        if let Err(refusal) = self.choose(txn, &mut path, &mut budget) {
            return Response::Refused(refusal);
        }
        let mut steps = Vec::new();
        collect(txn, &path, &mut 0, &mut steps);
        let past = match self.check(&steps, &mut budget) {
            Ok(past) => past,
            Err(refusal) => return Response::Refused(refusal),
        };
        let revision = self.revision + 1;
        let mut past = past.into_iter();
        let (succeeded, responses) = self.run(txn, &path, &mut 0, revision, &mut past);
        if responses.iter().any(RangeOpResponse::changed) {
            self.revision = revision;
        }
        Response::RangeTxn { succeeded, revision: self.revision, responses }
    }

    /// The outcome of the comparisons of `txn` and of every nested
    /// transaction on its chosen path, in the order they are met (etcd's
    /// `compareToPath`): all read on the state before any write.
    fn choose(
        &self,
        txn: &RangeTxn,
        path: &mut Vec<bool>,
        budget: &mut Budget,
    ) -> Result<(), Refusal> {
        let mut succeeded = true;
        for c in &txn.compare {
            succeeded &= self.span_holds(c, budget)?;
        }
        path.push(succeeded);
        let ops = if succeeded { &txn.success } else { &txn.failure };
        for op in ops {
            if let RangeOp::Txn(nested) = op {
                self.choose(nested, path, budget)?;
            }
        }
        Ok(())
    }

    /// Whether `c` holds for every key of its span, or, with none there,
    /// for an absent key.
    fn span_holds(&self, c: &RangeCompare, budget: &mut Budget) -> Result<bool, Refusal> {
        let range = c.span.range();
        let mut seen = false;
        for kv in self.keys_in(&range) {
            budget.visit(1)?;
            seen = true;
            if !compare_kv(Some(kv), &c.target, c.op) {
                return Ok(false);
            }
        }
        Ok(seen || compare_kv(None, &c.target, c.op))
    }

    /// etcd's checks of the operations that will run, on the state before
    /// the transaction, then tenure's bounds, found by playing the
    /// operations on the sizes of the keys they touch: the answers of the
    /// reads at a past revision, in order, or why nothing may be written.
    fn check<'a>(
        &'a self,
        steps: &[&'a RangeOp],
        budget: &mut Budget,
    ) -> Result<Vec<PastRead>, Refusal> {
        for (i, op) in steps.iter().enumerate() {
            let RangeOp::Put { key, lease, ignore_value, ignore_lease, .. } = op else { continue };
            // The key must be there when the put runs: before the
            // transaction, and not deleted by it before the put (a delete
            // of every key from one on may share its branch; etcd 3.4
            // panics there).
            let deleted_before = steps[..i].iter().any(|s| {
                matches!(s, RangeOp::DeleteRange(span) if span.range().contains(key.as_bytes()))
            });
            if (*ignore_value || *ignore_lease) && (!self.keys.contains_key(key) || deleted_before)
            {
                return Err(Refusal::KeyNotFound(key.clone()));
            }
            if let Some(id) = lease.filter(|_| !ignore_lease) {
                if !self.leases.contains_key(&id) {
                    return Err(Refusal::LeaseNotFound(id));
                }
            }
        }
        // What the transaction did so far to the keys it touched: their
        // size (key and value) after it, or `None` once deleted.
        let mut written: BTreeMap<&'a str, Option<usize>> = BTreeMap::new();
        let mut past = Vec::new();
        let (mut changes, mut read_bytes) = (0, 0);
        for &op in steps {
            match op {
                RangeOp::Put { key, value, ignore_value, .. } => {
                    changes += 1;
                    let value = match (ignore_value, self.keys.get(key)) {
                        (true, Some(kv)) => kv.value.len(),
                        _ => value.len(),
                    };
                    written.insert(key, Some(key.len() + value));
                }
                RangeOp::DeleteRange(span) => {
                    let present = self.sizes_now(&span.range(), &written, budget)?;
                    changes += present.len();
                    if changes > MAX_CHANGES_PER_REVISION {
                        return Err(Refusal::RangeTooLarge { keys: changes });
                    }
                    for (key, _) in present {
                        written.insert(key, None);
                    }
                }
                RangeOp::Range { span, revision: at @ 1.., max_keys } => {
                    let found = self.range_at(&span.range(), *at).map_err(|e| match e {
                        ReadError::Compacted { requested, compacted } => {
                            Refusal::Compacted { requested, compacted }
                        }
                        ReadError::Future { requested, current } => {
                            Refusal::FutureRevision { requested, current }
                        }
                    })?;
                    budget.visit(found.len())?;
                    let keep = max_keys.map_or(found.len(), |m| found.len().min(m as usize));
                    read_bytes += found[..keep]
                        .iter()
                        .map(|kv| kv.key.len() + kv.value.len() + READ_OVERHEAD)
                        .sum::<usize>();
                    if read_bytes > MAX_TXN_READ_BYTES {
                        return Err(Refusal::ReadTooLarge { bytes: read_bytes });
                    }
                    let count = found.len() as u64;
                    past.push((found.into_iter().take(keep).cloned().collect(), count));
                }
                RangeOp::Range { span, max_keys, .. } => {
                    let present = self.sizes_now(&span.range(), &written, budget)?;
                    let keep = max_keys.map_or(present.len(), |m| present.len().min(m as usize));
                    read_bytes +=
                        present[..keep].iter().map(|(_, size)| size + READ_OVERHEAD).sum::<usize>();
                    if read_bytes > MAX_TXN_READ_BYTES {
                        return Err(Refusal::ReadTooLarge { bytes: read_bytes });
                    }
                }
                RangeOp::Txn(_) => {}
            }
        }
        if changes > MAX_CHANGES_PER_REVISION {
            return Err(Refusal::RangeTooLarge { keys: changes });
        }
        let attach = steps.iter().filter_map(|op| match op {
            RangeOp::Put { key, ignore_lease: true, .. } => {
                Some((key.as_str(), self.keys.get(key).and_then(|kv| kv.lease)))
            }
            RangeOp::Put { key, lease, .. } => Some((key.as_str(), *lease)),
            _ => None,
        });
        self.check_attach(attach)?;
        Ok(past)
    }

    /// The keys of `range` at this point of a transaction (the store's,
    /// changed by what it `written`), with their sizes, in key order; each
    /// of the store's keys visited is counted against `budget`.
    fn sizes_now<'a>(
        &'a self,
        range: &KeyRange<'a>,
        written: &BTreeMap<&'a str, Option<usize>>,
        budget: &mut Budget,
    ) -> Result<Vec<(&'a str, usize)>, Refusal> {
        let mut keys = BTreeMap::new();
        for kv in self.keys_in(range) {
            budget.visit(1)?;
            keys.insert(kv.key.as_str(), kv.key.len() + kv.value.len());
        }
        for (key, size) in written.iter().filter(|(k, _)| range.contains(k.as_bytes())) {
            match size {
                Some(size) => keys.insert(key, *size),
                None => keys.remove(key),
            };
        }
        Ok(keys.into_iter().collect())
    }

    /// Runs the chosen branch of `txn` (its outcome is `path[*at]`) at
    /// `revision`: the operations in order, nested transactions in place.
    fn run(
        &mut self,
        txn: &RangeTxn,
        path: &[bool],
        at: &mut usize,
        revision: u64,
        past: &mut impl Iterator<Item = PastRead>,
    ) -> (bool, Vec<RangeOpResponse>) {
        let succeeded = path[*at];
        *at += 1;
        let ops = if succeeded { &txn.success } else { &txn.failure };
        let mut responses = Vec::with_capacity(ops.len());
        for op in ops {
            responses.push(match op {
                RangeOp::Put { key, value, lease, ignore_value, ignore_lease } => {
                    let current = self.keys.get(key);
                    let value = match (ignore_value, current) {
                        (true, Some(kv)) => kv.value.clone(),
                        _ => value.clone(),
                    };
                    let lease =
                        if *ignore_lease { current.and_then(|kv| kv.lease) } else { *lease };
                    RangeOpResponse::Put { prev: self.put(key, &value, lease, revision) }
                }
                RangeOp::DeleteRange(span) => {
                    let keys: Vec<String> =
                        self.keys_in(&span.range()).map(|kv| kv.key.clone()).collect();
                    let prev = keys
                        .iter()
                        .filter_map(|k| self.delete(k, revision, ChangeKind::Delete))
                        .collect();
                    RangeOpResponse::DeleteRange { prev }
                }
                RangeOp::Range { revision: 1.., .. } => {
                    let (kvs, count) = past.next().unwrap_or_default();
                    RangeOpResponse::Range { kvs, count }
                }
                RangeOp::Range { span, max_keys, .. } => {
                    let keep = max_keys.map_or(usize::MAX, |m| m as usize);
                    let mut kvs = Vec::new();
                    let mut count = 0;
                    for kv in self.keys_in(&span.range()) {
                        if kvs.len() < keep {
                            kvs.push(kv.clone());
                        }
                        count += 1;
                    }
                    RangeOpResponse::Range { kvs, count }
                }
                RangeOp::Txn(nested) => {
                    let (succeeded, responses) = self.run(nested, path, at, revision, past);
                    RangeOpResponse::Txn { succeeded, responses }
                }
            });
        }
        (succeeded, responses)
    }
}

/// The operations that will run, nested ones in place, in order (what
/// [`Store::run`] meets): `path` holds each transaction's outcome.
fn collect<'a>(txn: &'a RangeTxn, path: &[bool], at: &mut usize, steps: &mut Vec<&'a RangeOp>) {
    let ops = if path[*at] { &txn.success } else { &txn.failure };
    *at += 1;
    for op in ops {
        match op {
            RangeOp::Txn(nested) => collect(nested, path, at, steps),
            op => steps.push(op),
        }
    }
}
