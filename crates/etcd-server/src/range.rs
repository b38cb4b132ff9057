//! etcd's Range over tenure's store, as etcd's `apply.go` does it: the
//! whole range when sorting or filtering (filters, then sort, then the
//! limit, `more` when the limit cut something), `count` before the
//! filters, `keys_only` and `count_only`; and what a read-only transaction
//! needs besides (comparisons over a range).

use crate::errors::{self, invalid, KEY_NOT_PROVIDED};
use std::cmp::Ordering;
use tenure_etcd_api::etcdserverpb::compare::{CompareResult, CompareTarget, TargetUnion};
use tenure_etcd_api::etcdserverpb::range_request::{SortOrder, SortTarget};
use tenure_etcd_api::etcdserverpb::{Compare, RangeRequest, RangeResponse};
use tenure_etcd_api::mvccpb;
use tenure_kv::{KeyRange, KeyValue, Store};
use tonic::Status;

/// The most bytes of keys and values one Range answer carries (etcd sends
/// up to 2 GiB); a larger answer is refused with ResourceExhausted: ask
/// with a limit, or a smaller range.
pub const MAX_RANGE_ANSWER_BYTES: usize = 64 * 1024 * 1024;

/// Bytes counted per key besides its key and value (revisions, lease,
/// framing).
const KV_OVERHEAD: usize = 48;

/// etcd's range of `key` to `range_end`: one key when the end is empty,
/// every key from `key` on when it is `"\0"`.
pub fn key_range<'a>(key: &'a [u8], range_end: &'a [u8]) -> KeyRange<'a> {
    KeyRange::of(key, range_end)
}

pub use tenure_etcd_api::prefix_end;

/// A tenure key as etcd's.
pub fn to_etcd(kv: &KeyValue) -> mvccpb::KeyValue {
    mvccpb::KeyValue {
        key: kv.key.as_bytes().to_vec(),
        create_revision: kv.create_revision as i64,
        mod_revision: kv.mod_revision as i64,
        version: kv.version as i64,
        value: kv.value.clone(),
        lease: kv.lease.map_or(0, |l| l.0 as i64),
    }
}

/// A Range on `store` (the header is the caller's).
pub fn range(store: &Store, r: &RangeRequest) -> Result<RangeResponse, Status> {
    if r.key.is_empty() {
        return Err(invalid(KEY_NOT_PROVIDED));
    }
    let at = u64::try_from(r.revision).unwrap_or(0);
    let found = store.range_at(&key_range(&r.key, &r.range_end), at);
    let kvs = found.map_err(|e| errors::read_error(&e))?;
    let count = kvs.len() as i64;
    shape(kvs, count, r)
}

/// The answer to `r` from the keys of its range in key order (all of
/// them, or the first ones its options need) and how many the range
/// holds: filters, sort, limit, `keys_only`, `count_only` (the header is
/// the caller's).
pub fn shape(
    mut kvs: Vec<&KeyValue>,
    count: i64,
    r: &RangeRequest,
) -> Result<RangeResponse, Status> {
    if r.count_only {
        return Ok(RangeResponse { header: None, kvs: Vec::new(), more: false, count });
    }
    let rev = |v: i64| u64::try_from(v).unwrap_or(0);
    let (min_mod, max_mod) = (rev(r.min_mod_revision), rev(r.max_mod_revision));
    let (min_create, max_create) = (rev(r.min_create_revision), rev(r.max_create_revision));
    kvs.retain(|kv| {
        !(max_mod != 0 && kv.mod_revision > max_mod
            || min_mod != 0 && kv.mod_revision < min_mod
            || max_create != 0 && kv.create_revision > max_create
            || min_create != 0 && kv.create_revision < min_create)
    });
    let target = SortTarget::try_from(r.sort_target).unwrap_or(SortTarget::Key);
    let mut order = SortOrder::try_from(r.sort_order).unwrap_or(SortOrder::None);
    let filtered = min_mod != 0 || max_mod != 0 || min_create != 0 || max_create != 0;
    if let (SortOrder::None, false, Ok(limit @ 1..)) = (order, filtered, usize::try_from(r.limit)) {
        // As etcd: without a sort order or filters it reads only the first
        // limit + 1 keys (in key order), then sorts those by a target other
        // than the key (below): not the whole range.
        kvs.truncate(limit + 1);
    }
    if target != SortTarget::Key && order == SortOrder::None {
        order = SortOrder::Ascend;
    }
    if order != SortOrder::None {
        let by = |a: &&KeyValue, b: &&KeyValue| -> Ordering {
            match target {
                SortTarget::Key => a.key.cmp(&b.key),
                SortTarget::Version => a.version.cmp(&b.version),
                SortTarget::Create => a.create_revision.cmp(&b.create_revision),
                SortTarget::Mod => a.mod_revision.cmp(&b.mod_revision),
                SortTarget::Value => a.value.cmp(&b.value),
            }
        };
        // Stable: equals stay in key order, in either direction. etcd sorts
        // with Go's sort.Sort (sort.Reverse for descending), an insertion
        // sort up to 12 items, so the same order there; beyond, its order
        // among equals is unspecified.
        match order {
            SortOrder::Descend => kvs.sort_by(|a, b| by(b, a)),
            _ => kvs.sort_by(by),
        }
    }
    let mut more = false;
    if let Ok(limit @ 1..) = usize::try_from(r.limit) {
        if kvs.len() > limit {
            kvs.truncate(limit);
            more = true;
        }
    }
    let bytes: usize = kvs
        .iter()
        .map(|kv| kv.key.len() + if r.keys_only { 0 } else { kv.value.len() } + KV_OVERHEAD)
        .sum();
    if bytes > MAX_RANGE_ANSWER_BYTES {
        return Err(Status::resource_exhausted(format!(
            "tenure: the answer would carry {bytes} bytes; at most {MAX_RANGE_ANSWER_BYTES} are \
             sent at once: give a limit (etcdctl get --limit) or a smaller range"
        )));
    }
    let kvs = kvs
        .into_iter()
        .map(|kv| {
            let mut e = to_etcd(kv);
            if r.keys_only {
                e.value.clear();
            }
            e
        })
        .collect();
    Ok(RangeResponse { header: None, kvs, more, count })
}

/// Whether comparison `c` holds on `store` now, as etcd evaluates it: on
/// every key of its range (an empty range: against an absent key; a value
/// comparison with an absent key fails).
pub fn holds(store: &Store, c: &Compare) -> Result<bool, Status> {
    if c.key.is_empty() {
        return Err(invalid(KEY_NOT_PROVIDED));
    }
    let kvs =
        store.range_at(&key_range(&c.key, &c.range_end), 0).map_err(|e| errors::read_error(&e))?;
    let target = CompareTarget::try_from(c.target).unwrap_or(CompareTarget::Version);
    if kvs.is_empty() {
        return Ok(target != CompareTarget::Value && compare_one(None, c));
    }
    Ok(kvs.into_iter().all(|kv| compare_one(Some(kv), c)))
}

/// The number comparison `c` compares with: its union's when the union is
/// of its target, else 0 (as etcd's `compareKV`: a MOD comparison given a
/// version compares with 0).
pub fn target_number(c: &Compare) -> i64 {
    let target = CompareTarget::try_from(c.target).unwrap_or(CompareTarget::Version);
    match (target, &c.target_union) {
        (CompareTarget::Version, Some(TargetUnion::Version(v)))
        | (CompareTarget::Create, Some(TargetUnion::CreateRevision(v)))
        | (CompareTarget::Mod, Some(TargetUnion::ModRevision(v)))
        | (CompareTarget::Lease, Some(TargetUnion::Lease(v))) => *v,
        _ => 0,
    }
}

/// One key (or an absent one) against `c`.
fn compare_one(kv: Option<&KeyValue>, c: &Compare) -> bool {
    let num = |n: u64, v: i64| -> Ordering {
        match u64::try_from(v) {
            Ok(v) => n.cmp(&v),
            Err(_) => Ordering::Greater,
        }
    };
    let target = CompareTarget::try_from(c.target).unwrap_or(CompareTarget::Version);
    let ordering = match target {
        CompareTarget::Value => {
            let Some(kv) = kv else { return false };
            let v = match &c.target_union {
                Some(TargetUnion::Value(v)) => v.as_slice(),
                _ => &[],
            };
            kv.value.as_slice().cmp(v)
        }
        number => {
            let v = target_number(c);
            let n = kv.map_or(0, |kv| match number {
                CompareTarget::Create => kv.create_revision,
                CompareTarget::Mod => kv.mod_revision,
                CompareTarget::Lease => kv.lease.map_or(0, |l| l.0),
                _ => kv.version,
            });
            num(n, v)
        }
    };
    match CompareResult::try_from(c.result).unwrap_or(CompareResult::Equal) {
        CompareResult::Equal => ordering.is_eq(),
        CompareResult::NotEqual => ordering.is_ne(),
        CompareResult::Less => ordering.is_lt(),
        CompareResult::Greater => ordering.is_gt(),
    }
}
