//! The store's side of etcd's transaction ([`crate::Command::RangeTxn`]),
//! in etcd's order: the comparisons of the whole chosen path on the state
//! before the transaction, then every check (nothing is written if one
//! fails), then the operations, each seeing the writes before it.

use super::{compare_kv, ChangeKind, KeyValue, Response, Store, MAX_CHANGES_PER_REVISION};
use crate::lease::Refusal;
use crate::range_txn::{RangeCompare, RangeOp, RangeOpResponse, RangeTxn, MAX_TXN_RANGE_KEYS};

/// A range read answered before the writes: a read at a past revision.
type PastRead = (Vec<KeyValue>, u64);

impl Store {
    /// Runs etcd's transaction `txn` at one revision.
    pub(super) fn range_txn(&mut self, txn: &RangeTxn) -> Response {
        let mut path = Vec::new();
        self.choose(txn, &mut path);
        let mut steps = Vec::new();
        collect(txn, &path, &mut 0, &mut steps);
        let past = match self.check(&steps) {
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
    fn choose(&self, txn: &RangeTxn, path: &mut Vec<bool>) {
        let succeeded = txn.compare.iter().all(|c| self.span_holds(c));
        path.push(succeeded);
        let ops = if succeeded { &txn.success } else { &txn.failure };
        for op in ops {
            if let RangeOp::Txn(nested) = op {
                self.choose(nested, path);
            }
        }
    }

    /// Whether `c` holds for every key of its span, or, with none there,
    /// for an absent key.
    fn span_holds(&self, c: &RangeCompare) -> bool {
        let range = c.span.range();
        let mut keys = self.keys_in(&range).peekable();
        if keys.peek().is_none() {
            return compare_kv(None, &c.target, c.op);
        }
        keys.all(|kv| compare_kv(Some(kv), &c.target, c.op))
    }

    /// etcd's checks of the operations that will run, on the state before
    /// the transaction, then tenure's bounds: the answers of the reads at
    /// a past revision, in order, or why nothing may be written.
    fn check(&self, steps: &[&RangeOp]) -> Result<Vec<PastRead>, Refusal> {
        let puts: Vec<(&str, &RangeOp)> = steps
            .iter()
            .filter_map(|op| match op {
                RangeOp::Put { key, .. } => Some((key.as_str(), *op)),
                _ => None,
            })
            .collect();
        for (key, op) in &puts {
            let RangeOp::Put { lease, ignore_value, ignore_lease, .. } = op else { continue };
            // The key must be there when the put runs: before the
            // transaction, and not deleted by it before the put (a delete
            // of every key from one on may share its branch; etcd 3.4
            // panics there).
            let deleted_before = || {
                steps.iter().take_while(|s| !std::ptr::eq(**s, *op)).any(|s| {
                    matches!(s, RangeOp::DeleteRange(span) if span.range().contains(key.as_bytes()))
                })
            };
            if (*ignore_value || *ignore_lease)
                && (!self.keys.contains_key(*key) || deleted_before())
            {
                return Err(Refusal::KeyNotFound(key.to_string()));
            }
            if let Some(id) = lease.filter(|_| !ignore_lease) {
                if !self.leases.contains_key(&id) {
                    return Err(Refusal::LeaseNotFound(id));
                }
            }
        }
        let mut past = Vec::new();
        let mut changes = puts.len();
        for op in steps {
            match op {
                RangeOp::Range { span, revision: at @ 1.., max_keys } => {
                    let found = self.range_at(&span.range(), *at);
                    let found = found.map_err(|e| match e {
                        super::ReadError::Compacted { requested, compacted } => {
                            Refusal::Compacted { requested, compacted }
                        }
                        super::ReadError::Future { requested, current } => {
                            Refusal::FutureRevision { requested, current }
                        }
                    })?;
                    let count = found.len() as u64;
                    let keep = max_keys.map_or(found.len(), |m| found.len().min(m as usize));
                    if keep > MAX_TXN_RANGE_KEYS {
                        return Err(Refusal::ReadTooLarge { keys: keep });
                    }
                    past.push((found.into_iter().take(keep).cloned().collect(), count));
                }
                RangeOp::Range { span, max_keys, .. } => {
                    // At most the keys there now and those the transaction
                    // puts in the span (counted up to the bound).
                    let range = span.range();
                    let put_inside = puts.iter().filter(|(k, _)| range.contains(k.as_bytes()));
                    let cap = MAX_TXN_RANGE_KEYS + 1;
                    let now = self.keys_in(&range).take(cap).count();
                    let most = (now + put_inside.count())
                        .min(max_keys.map_or(usize::MAX, |m| m.min(cap as u64) as usize));
                    if most > MAX_TXN_RANGE_KEYS {
                        return Err(Refusal::ReadTooLarge { keys: most });
                    }
                }
                RangeOp::DeleteRange(span) => {
                    changes +=
                        self.keys_in(&span.range()).take(MAX_CHANGES_PER_REVISION + 1).count();
                }
                RangeOp::Put { .. } | RangeOp::Txn(_) => {}
            }
        }
        if changes > MAX_CHANGES_PER_REVISION {
            return Err(Refusal::RangeTooLarge { keys: changes });
        }
        let attach = puts.iter().map(|(key, op)| match op {
            RangeOp::Put { ignore_lease: true, .. } => {
                (*key, self.keys.get(*key).and_then(|kv| kv.lease))
            }
            RangeOp::Put { lease, .. } => (*key, *lease),
            _ => (*key, None),
        });
        self.check_attach(attach)?;
        Ok(past)
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
