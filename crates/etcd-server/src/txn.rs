//! Txn: etcd's checks (operation counts, duplicate keys, empty keys), then
//!
//! * a transaction that only reads (ranges, nested read-only transactions)
//!   is evaluated on the store at one linearizable read, in full: ranges
//!   with every option, comparisons over ranges, nesting;
//! * one that writes becomes one tenure transaction through the log, at
//!   one revision: comparisons of single keys (every target and result),
//!   puts (with a lease), deletes of single keys and reads of single keys;
//!   range reads and reads at a revision are answered after it commits,
//!   at its revision (see `deferred_reads`). Comparisons over a range,
//!   range deletes, nested transactions and `ignore_value`/`ignore_lease`
//!   inside a transaction that writes answer Unimplemented (docs/ETCD.md).

use crate::auth::{self, Caller, Permission};
use crate::errors::{
    invalid, unimplemented, DUPLICATE_KEY, KEY_NOT_FOUND, KEY_NOT_PROVIDED, TOO_MANY_OPS,
};
use crate::kv::{check_writable, lease_of, unexpected, utf8_key};
use crate::range::{holds, key_range, range, to_etcd};
use crate::Shared;
use std::collections::BTreeSet;
use tenure_etcd_api::etcdserverpb::compare::{CompareResult, CompareTarget, TargetUnion};
use tenure_etcd_api::etcdserverpb::request_op::Request as Op;
use tenure_etcd_api::etcdserverpb::response_op::Response as OpAnswer;
use tenure_etcd_api::etcdserverpb::{
    Compare as EtcdCompare, DeleteRangeResponse, PutResponse, RangeRequest, RangeResponse,
    RequestOp, ResponseHeader, ResponseOp, TxnRequest, TxnResponse,
};
use tenure_kv::{
    Command, Compare, CompareOp, OpResponse, Response as KvResponse, Store, Target, TxnOp,
    MAX_TXN_OPS,
};
use tonic::Status;

/// Runs a transaction.
pub(crate) async fn txn(
    shared: &Shared,
    caller: &Caller,
    t: TxnRequest,
) -> Result<TxnResponse, Status> {
    check(&t)?;
    if !read_only(&t) {
        // A read token may run a transaction that only reads (the auth
        // layer lets every Txn through with `read`).
        if caller.permission < Permission::Write {
            return Err(Status::permission_denied(auth::PERMISSION_DENIED));
        }
        for op in t.success.iter().chain(&t.failure) {
            if let Some(Op::RequestPut(p)) = &op.request {
                if let Some(lease) = lease_of(p.lease)? {
                    shared.check_attach(caller, lease).await?;
                }
            }
        }
    }
    if read_only(&t) {
        let (answer, revision) = shared.read(false, |s| (evaluate(s, &t), s.revision())).await?;
        let mut answer = answer?;
        answer.header = Some(shared.header(revision));
        return Ok(answer);
    }
    let compare = t.compare.iter().map(compare_of).collect::<Result<Vec<_>, _>>()?;
    let success = t.success.iter().map(op_of).collect::<Result<Vec<_>, _>>()?;
    let failure = t.failure.iter().map(op_of).collect::<Result<Vec<_>, _>>()?;
    let deferred_success = deferred_reads(&t.success)?;
    let deferred_failure = deferred_reads(&t.failure)?;
    let command = Command::Txn { compare, success, failure };
    match shared.propose(&command).await? {
        KvResponse::Txn { succeeded, revision, responses } => {
            let ops = if succeeded { &t.success } else { &t.failure };
            let nested = ResponseHeader { revision: revision as i64, ..Default::default() };
            let mut responses: Vec<ResponseOp> = ops
                .iter()
                .zip(responses)
                .map(|(op, answer)| answer_of(op, answer, &nested))
                .collect();
            let deferred = if succeeded { deferred_success } else { deferred_failure };
            if !deferred.is_empty() {
                // One linearizable read, after the transaction committed:
                // this node's store holds its revision by then.
                let answers = shared
                    .read(false, |s| {
                        deferred
                            .iter()
                            .map(|&i| read_after(s, &ops[i], revision))
                            .collect::<Vec<_>>()
                    })
                    .await?;
                for (&i, answer) in deferred.iter().zip(answers) {
                    let mut answer = answer?;
                    answer.header = Some(nested);
                    responses[i] = ResponseOp { response: Some(OpAnswer::ResponseRange(answer)) };
                }
            }
            Ok(TxnResponse { header: Some(shared.header(revision)), succeeded, responses })
        }
        other => Err(unexpected(&other)),
    }
}

/// The range reads of a branch that writes which are answered after the
/// transaction (indices into the branch): ranges, and reads at a
/// revision. A range is read at the transaction's revision, which is what
/// it sees in the transaction when no later operation of the branch writes
/// inside it (clientv3's `Mutex`: put its key, then read the prefix); if
/// one does, Unimplemented. A read at a past revision is the same either
/// way.
fn deferred_reads(branch: &[RequestOp]) -> Result<Vec<usize>, Status> {
    let mut deferred = Vec::new();
    for (i, op) in branch.iter().enumerate() {
        let Some(Op::RequestRange(r)) = &op.request else { continue };
        if r.range_end.is_empty() && r.revision <= 0 {
            continue;
        }
        if r.revision <= 0 {
            let range = key_range(&r.key, &r.range_end);
            let written_after = branch[i + 1..].iter().any(|later| match &later.request {
                Some(Op::RequestPut(p)) => range.contains(&p.key),
                Some(Op::RequestDeleteRange(d)) => range.contains(&d.key),
                _ => false,
            });
            if written_after {
                return Err(unimplemented(
                    "a range read followed by a write inside that range, in one transaction \
                     that writes, is not served yet; read the range after the write, or in a \
                     transaction of its own",
                ));
            }
        }
        deferred.push(i);
    }
    Ok(deferred)
}

/// A deferred range read of a transaction that committed at `revision`:
/// at that revision, or at the one it names.
fn read_after(store: &Store, op: &RequestOp, revision: u64) -> Result<RangeResponse, Status> {
    let Some(Op::RequestRange(r)) = &op.request else {
        return Ok(RangeResponse::default());
    };
    let mut r = r.clone();
    if r.revision <= 0 {
        r.revision = revision as i64;
    }
    range(store, &r)
}

/// etcd's checks before anything runs: counts, empty keys, empty
/// operations, keys written twice in one branch.
fn check(t: &TxnRequest) -> Result<(), Status> {
    if [t.compare.len(), t.success.len(), t.failure.len()].iter().any(|&n| n > MAX_TXN_OPS) {
        return Err(invalid(TOO_MANY_OPS));
    }
    if t.compare.iter().any(|c| c.key.is_empty()) {
        return Err(invalid(KEY_NOT_PROVIDED));
    }
    for branch in [&t.success, &t.failure] {
        let mut puts = BTreeSet::new();
        let mut deletes = Vec::new();
        for op in branch {
            match &op.request {
                None => return Err(invalid(KEY_NOT_FOUND)),
                Some(Op::RequestRange(r)) if r.key.is_empty() => {
                    return Err(invalid(KEY_NOT_PROVIDED))
                }
                Some(Op::RequestPut(p)) => {
                    if p.key.is_empty() {
                        return Err(invalid(KEY_NOT_PROVIDED));
                    }
                    if !puts.insert(p.key.as_slice()) {
                        return Err(invalid(DUPLICATE_KEY));
                    }
                }
                Some(Op::RequestDeleteRange(d)) => {
                    if d.key.is_empty() {
                        return Err(invalid(KEY_NOT_PROVIDED));
                    }
                    deletes.push(key_range(&d.key, &d.range_end));
                }
                Some(Op::RequestTxn(nested)) => check(nested)?,
                Some(Op::RequestRange(_)) => {}
            }
        }
        if puts.iter().any(|k| deletes.iter().any(|d| d.contains(k))) {
            return Err(invalid(DUPLICATE_KEY));
        }
    }
    Ok(())
}

/// True if no operation of either branch, nested ones included, writes.
fn read_only(t: &TxnRequest) -> bool {
    t.success.iter().chain(&t.failure).all(|op| match &op.request {
        Some(Op::RequestRange(_)) => true,
        Some(Op::RequestTxn(nested)) => read_only(nested),
        _ => false,
    })
}

/// A read-only transaction on `store` (headers of nested answers carry the
/// revision only, as etcd's do).
fn evaluate(store: &Store, t: &TxnRequest) -> Result<TxnResponse, Status> {
    let mut succeeded = true;
    for c in &t.compare {
        succeeded &= holds(store, c)?;
    }
    let ops = if succeeded { &t.success } else { &t.failure };
    let nested = ResponseHeader { revision: store.revision() as i64, ..Default::default() };
    let mut responses = Vec::with_capacity(ops.len());
    for op in ops {
        let answer = match &op.request {
            Some(Op::RequestRange(r)) => {
                let mut a = range(store, r)?;
                a.header = Some(nested);
                OpAnswer::ResponseRange(a)
            }
            Some(Op::RequestTxn(inner)) => {
                let mut a = evaluate(store, inner)?;
                a.header = Some(nested);
                OpAnswer::ResponseTxn(a)
            }
            _ => return Err(invalid(KEY_NOT_FOUND)),
        };
        responses.push(ResponseOp { response: Some(answer) });
    }
    Ok(TxnResponse { header: None, succeeded, responses })
}

/// A comparison that always holds or never does, on `key` (no key has
/// version `u64::MAX`).
fn constant(key: String, holds: bool) -> Compare {
    let op = if holds { CompareOp::Less } else { CompareOp::Equal };
    Compare { key, target: Target::Version(u64::MAX), op }
}

/// An etcd comparison of one key as tenure's.
fn compare_of(c: &EtcdCompare) -> Result<Compare, Status> {
    if !c.range_end.is_empty() {
        return Err(unimplemented(
            "a comparison over a range (range_end) in a transaction that writes is not served \
             yet; compare single keys",
        ));
    }
    let key = utf8_key(&c.key)?;
    let op = match CompareResult::try_from(c.result).unwrap_or(CompareResult::Equal) {
        CompareResult::Equal => CompareOp::Equal,
        CompareResult::NotEqual => CompareOp::NotEqual,
        CompareResult::Less => CompareOp::Less,
        CompareResult::Greater => CompareOp::Greater,
    };
    let target = CompareTarget::try_from(c.target).unwrap_or(CompareTarget::Version);
    if target == CompareTarget::Value {
        let value = match &c.target_union {
            Some(TargetUnion::Value(v)) => v.clone(),
            _ => Vec::new(),
        };
        return Ok(Compare { key, target: Target::Value(value), op });
    }
    let number = match &c.target_union {
        Some(
            TargetUnion::Version(v)
            | TargetUnion::CreateRevision(v)
            | TargetUnion::ModRevision(v)
            | TargetUnion::Lease(v),
        ) => *v,
        _ => 0,
    };
    // Every key's number is at least 0: above a negative one.
    let Ok(n) = u64::try_from(number) else {
        let holds = matches!(op, CompareOp::NotEqual | CompareOp::Greater);
        return Ok(constant(key, holds));
    };
    let target = match target {
        CompareTarget::Create => Target::CreateRevision(n),
        CompareTarget::Mod => Target::ModRevision(n),
        CompareTarget::Lease => Target::Lease(n),
        _ => Target::Version(n),
    };
    Ok(Compare { key, target, op })
}

/// An etcd operation of a transaction that writes as tenure's.
fn op_of(op: &RequestOp) -> Result<TxnOp, Status> {
    match &op.request {
        Some(Op::RequestPut(p)) => {
            if p.ignore_value || p.ignore_lease {
                return Err(unimplemented(
                    "ignore_value and ignore_lease inside a transaction are not served yet; \
                     use them in a plain Put",
                ));
            }
            check_writable(&key_range(&p.key, &[]))?;
            Ok(TxnOp::Put {
                key: utf8_key(&p.key)?,
                value: p.value.clone(),
                lease: lease_of(p.lease)?,
            })
        }
        Some(Op::RequestDeleteRange(d)) if d.range_end.is_empty() => {
            check_writable(&key_range(&d.key, &[]))?;
            Ok(TxnOp::Delete { key: utf8_key(&d.key)? })
        }
        Some(Op::RequestRange(r)) if r.range_end.is_empty() && r.revision <= 0 => {
            Ok(TxnOp::Get { key: utf8_key(&r.key)? })
        }
        // Answered after the transaction ([`deferred_reads`]); in it, a
        // read of the first key holds its place.
        Some(Op::RequestRange(r)) => Ok(TxnOp::Get { key: utf8_key(&r.key)? }),
        Some(Op::RequestDeleteRange(_)) => Err(unimplemented(
            "a range delete inside a transaction that writes is not served yet; delete single \
             keys, or send the range delete on its own",
        )),
        Some(Op::RequestTxn(_)) => Err(unimplemented(
            "a nested transaction inside a transaction that writes is not served yet",
        )),
        None => Err(invalid(KEY_NOT_FOUND)),
    }
}

/// The answer to one operation, shaped by what it asked.
fn answer_of(op: &RequestOp, answer: OpResponse, header: &ResponseHeader) -> ResponseOp {
    let header = Some(*header);
    let response = match (&op.request, answer) {
        (Some(Op::RequestPut(p)), OpResponse::Put { prev }) => OpAnswer::ResponsePut(PutResponse {
            header,
            prev_kv: prev.as_ref().filter(|_| p.prev_kv).map(to_etcd),
        }),
        (Some(Op::RequestDeleteRange(d)), OpResponse::Delete { prev }) => {
            OpAnswer::ResponseDeleteRange(DeleteRangeResponse {
                header,
                deleted: i64::from(prev.is_some()),
                prev_kvs: prev.iter().filter(|_| d.prev_kv).map(to_etcd).collect(),
            })
        }
        (Some(Op::RequestRange(r)), OpResponse::Get { kv }) => {
            OpAnswer::ResponseRange(single(r, kv.as_ref(), header))
        }
        // Built from the same operations: a mismatch is a bug, shown empty.
        _ => OpAnswer::ResponseRange(RangeResponse { header, ..Default::default() }),
    };
    ResponseOp { response: Some(response) }
}

/// A single-key Range's answer from the key read in the transaction,
/// with the request's filters and options.
fn single(
    r: &RangeRequest,
    kv: Option<&tenure_kv::KeyValue>,
    header: Option<ResponseHeader>,
) -> RangeResponse {
    let count = i64::from(kv.is_some());
    let rev = |v: i64| u64::try_from(v).unwrap_or(0);
    let kept = kv.filter(|kv| {
        !(rev(r.max_mod_revision) != 0 && kv.mod_revision > rev(r.max_mod_revision)
            || rev(r.min_mod_revision) != 0 && kv.mod_revision < rev(r.min_mod_revision)
            || rev(r.max_create_revision) != 0 && kv.create_revision > rev(r.max_create_revision)
            || rev(r.min_create_revision) != 0 && kv.create_revision < rev(r.min_create_revision))
    });
    let kvs = match r.count_only {
        true => Vec::new(),
        false => kept
            .map(|kv| {
                let mut e = to_etcd(kv);
                if r.keys_only {
                    e.value.clear();
                }
                e
            })
            .into_iter()
            .collect(),
    };
    RangeResponse { header, kvs, more: false, count }
}
