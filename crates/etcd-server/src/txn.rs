//! Txn: etcd's checks (operation counts, duplicate keys, empty keys), then
//!
//! * a transaction that only reads (ranges, nested read-only transactions)
//!   is evaluated on the store at one linearizable read, in full: ranges
//!   with every option, comparisons over ranges, nesting;
//! * one that writes becomes one command through the log,
//!   [`tenure_kv::Command::RangeTxn`], which the store runs as etcd does:
//!   every comparison and operation, nested transactions, at one revision;
//!   the answers of its range reads are shaped here, with the options of
//!   their requests ([`shape`]).

use crate::auth::{self, Caller, Permission};
use crate::errors::{
    self, invalid, KEY_NOT_FOUND, KEY_NOT_PROVIDED, LEASE_PROVIDED, TOO_MANY_OPS, VALUE_PROVIDED,
};
use crate::kv::{check_writable, lease_of, unexpected, utf8_key};
use crate::range::{holds, range, shape, target_number, to_etcd};
use crate::Shared;
use tenure_etcd_api::etcdserverpb::compare::{CompareResult, CompareTarget, TargetUnion};
use tenure_etcd_api::etcdserverpb::range_request::{SortOrder, SortTarget};
use tenure_etcd_api::etcdserverpb::request_op::Request as Op;
use tenure_etcd_api::etcdserverpb::response_op::Response as OpAnswer;
use tenure_etcd_api::etcdserverpb::{
    Compare as EtcdCompare, DeleteRangeResponse, PutResponse, RangeRequest, RangeResponse,
    RequestOp, ResponseHeader, ResponseOp, TxnRequest, TxnResponse,
};
use tenure_kv::{
    Command, CompareOp, KeyRange, RangeCompare, RangeOp, RangeOpResponse, RangeTxn,
    Response as KvResponse, Span, Store, Target, MAX_TXN_OPS,
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
        let mut leases = Vec::new();
        put_leases(&t, &mut leases);
        for lease in leases {
            if let Some(lease) = lease_of(lease)? {
                shared.check_attach(caller, lease).await?;
            }
        }
    }
    if read_only(&t) {
        // The same bounds of depth and size as a transaction that writes.
        range_txn_of(&t)?.validate().map_err(|e| errors::invalid_command(&e))?;
        let (answer, revision) = shared.read(false, |s| (evaluate(s, &t), s.revision())).await?;
        let mut answer = answer?;
        answer.header = Some(shared.header(revision));
        return Ok(answer);
    }
    let txn = range_txn_of(&t)?;
    txn.validate().map_err(|e| errors::invalid_command(&e))?;
    match shared.propose(&Command::RangeTxn(txn)).await? {
        KvResponse::RangeTxn { succeeded, revision, responses } => {
            let changed = responses.iter().any(RangeOpResponse::changed);
            let mut at = Revisions { before: revision - u64::from(changed), changed: false };
            let ops = if succeeded { &t.success } else { &t.failure };
            let responses = answers(ops, responses, &mut at);
            Ok(TxnResponse { header: Some(shared.header(revision)), succeeded, responses })
        }
        other => Err(unexpected(&other)),
    }
}

/// etcd's checks before anything runs: counts, empty keys, empty
/// operations (keys written twice on one path: [`RangeTxn::validate`]).
fn check(t: &TxnRequest) -> Result<(), Status> {
    if [t.compare.len(), t.success.len(), t.failure.len()].iter().any(|&n| n > MAX_TXN_OPS) {
        return Err(invalid(TOO_MANY_OPS));
    }
    if t.compare.iter().any(|c| c.key.is_empty()) {
        return Err(invalid(KEY_NOT_PROVIDED));
    }
    for op in t.success.iter().chain(&t.failure) {
        match &op.request {
            None => return Err(invalid(KEY_NOT_FOUND)),
            Some(Op::RequestRange(r)) if r.key.is_empty() => return Err(invalid(KEY_NOT_PROVIDED)),
            Some(Op::RequestPut(p)) if p.key.is_empty() => return Err(invalid(KEY_NOT_PROVIDED)),
            Some(Op::RequestDeleteRange(d)) if d.key.is_empty() => {
                return Err(invalid(KEY_NOT_PROVIDED))
            }
            Some(Op::RequestTxn(nested)) => check(nested)?,
            Some(_) => {}
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

/// A read-only transaction on `store` (headers of nested ranges carry the
/// revision only, those of nested transactions nothing, as etcd's).
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
                // A nested transaction's header is empty, as etcd's.
                let mut a = evaluate(store, inner)?;
                a.header = Some(ResponseHeader::default());
                OpAnswer::ResponseTxn(a)
            }
            _ => return Err(invalid(KEY_NOT_FOUND)),
        };
        responses.push(ResponseOp { response: Some(answer) });
    }
    Ok(TxnResponse { header: None, succeeded, responses })
}

/// The leases the puts of `t` name, nested transactions included.
fn put_leases(t: &TxnRequest, leases: &mut Vec<i64>) {
    for op in t.success.iter().chain(&t.failure) {
        match &op.request {
            Some(Op::RequestPut(p)) if p.lease != 0 => leases.push(p.lease),
            Some(Op::RequestTxn(nested)) => put_leases(nested, leases),
            _ => {}
        }
    }
}

/// A comparison that always holds or never does, over `span` (no key has
/// version `u64::MAX`).
fn constant(span: Span, holds: bool) -> RangeCompare {
    let op = if holds { CompareOp::Less } else { CompareOp::Equal };
    RangeCompare { span, target: Target::Version(u64::MAX), op }
}

/// An etcd transaction that writes, as tenure's command.
fn range_txn_of(t: &TxnRequest) -> Result<RangeTxn, Status> {
    Ok(RangeTxn {
        compare: t.compare.iter().map(compare_of).collect::<Result<_, _>>()?,
        success: t.success.iter().map(op_of).collect::<Result<_, _>>()?,
        failure: t.failure.iter().map(op_of).collect::<Result<_, _>>()?,
    })
}

/// An etcd comparison as tenure's.
fn compare_of(c: &EtcdCompare) -> Result<RangeCompare, Status> {
    if c.key.is_empty() {
        return Err(invalid(KEY_NOT_PROVIDED));
    }
    let span = Span { key: c.key.clone(), end: c.range_end.clone() };
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
        return Ok(RangeCompare { span, target: Target::Value(value), op });
    }
    let number = target_number(c);
    // Every key's number is at least 0: above a negative one.
    let Ok(n) = u64::try_from(number) else {
        let holds = matches!(op, CompareOp::NotEqual | CompareOp::Greater);
        return Ok(constant(span, holds));
    };
    let target = match target {
        CompareTarget::Create => Target::CreateRevision(n),
        CompareTarget::Mod => Target::ModRevision(n),
        CompareTarget::Lease => Target::Lease(n),
        _ => Target::Version(n),
    };
    Ok(RangeCompare { span, target, op })
}

/// An etcd operation of a transaction that writes as tenure's, with
/// etcd's checks of a put and tenure's own keys kept out of reach.
fn op_of(op: &RequestOp) -> Result<RangeOp, Status> {
    match &op.request {
        Some(Op::RequestPut(p)) => {
            if p.ignore_value && !p.value.is_empty() {
                return Err(invalid(VALUE_PROVIDED));
            }
            if p.ignore_lease && p.lease != 0 {
                return Err(invalid(LEASE_PROVIDED));
            }
            check_writable(&KeyRange::Key(&p.key))?;
            Ok(RangeOp::Put {
                key: utf8_key(&p.key)?,
                value: p.value.clone(),
                lease: lease_of(p.lease)?,
                ignore_value: p.ignore_value,
                ignore_lease: p.ignore_lease,
            })
        }
        Some(Op::RequestDeleteRange(d)) => {
            if d.key.is_empty() {
                return Err(invalid(KEY_NOT_PROVIDED));
            }
            check_writable(&KeyRange::of(&d.key, &d.range_end))?;
            Ok(RangeOp::DeleteRange(Span { key: d.key.clone(), end: d.range_end.clone() }))
        }
        Some(Op::RequestRange(r)) => Ok(RangeOp::Range {
            span: Span { key: r.key.clone(), end: r.range_end.clone() },
            revision: u64::try_from(r.revision).unwrap_or(0),
            max_keys: max_keys(r),
        }),
        Some(Op::RequestTxn(nested)) => Ok(RangeOp::Txn(range_txn_of(nested)?)),
        None => Err(invalid(KEY_NOT_FOUND)),
    }
}

/// The keys a Range needs from the store, in key order, when fewer than
/// all will do: none to count; the first limit + 1 when the answer is
/// those in key order ([`range::shape`] reads no more either).
fn max_keys(r: &RangeRequest) -> Option<u64> {
    if r.count_only {
        return Some(0);
    }
    let filtered = r.min_mod_revision != 0
        || r.max_mod_revision != 0
        || r.min_create_revision != 0
        || r.max_create_revision != 0;
    let order = SortOrder::try_from(r.sort_order).unwrap_or(SortOrder::None);
    let target = SortTarget::try_from(r.sort_target).unwrap_or(SortTarget::Key);
    let key_order =
        order == SortOrder::None || order == SortOrder::Ascend && target == SortTarget::Key;
    match u64::try_from(r.limit) {
        Ok(limit @ 1..) if key_order && !filtered => Some(limit + 1),
        _ => None,
    }
}

/// The revision each answer of a transaction shows, as etcd's: the one
/// before the transaction until its first change, the transaction's own
/// from then on.
struct Revisions {
    /// The store's revision before the transaction.
    before: u64,
    /// Whether an operation before this one changed a key.
    changed: bool,
}

impl Revisions {
    fn header(&self, changes: bool) -> Option<ResponseHeader> {
        let revision = self.before + u64::from(self.changed || changes);
        Some(ResponseHeader { revision: revision as i64, ..Default::default() })
    }
}

/// The answers to the operations of a branch that ran, shaped by what
/// each asked.
fn answers(
    ops: &[RequestOp],
    responses: Vec<RangeOpResponse>,
    at: &mut Revisions,
) -> Vec<ResponseOp> {
    ops.iter()
        .zip(responses)
        .map(|(op, answer)| {
            let changes = answer.changed();
            let response = match (&op.request, answer) {
                (Some(Op::RequestPut(p)), RangeOpResponse::Put { prev }) => {
                    OpAnswer::ResponsePut(PutResponse {
                        header: at.header(true),
                        prev_kv: prev.as_ref().filter(|_| p.prev_kv).map(to_etcd),
                    })
                }
                (Some(Op::RequestDeleteRange(d)), RangeOpResponse::DeleteRange { prev }) => {
                    OpAnswer::ResponseDeleteRange(DeleteRangeResponse {
                        header: at.header(changes),
                        deleted: prev.len() as i64,
                        prev_kvs: if d.prev_kv {
                            prev.iter().map(to_etcd).collect()
                        } else {
                            vec![]
                        },
                    })
                }
                (Some(Op::RequestRange(r)), RangeOpResponse::Range { kvs, count }) => {
                    let mut answer = shape(kvs.iter().collect(), count as i64, r)
                        .unwrap_or_else(|_| RangeResponse::default());
                    answer.header = at.header(false);
                    OpAnswer::ResponseRange(answer)
                }
                (Some(Op::RequestTxn(t)), RangeOpResponse::Txn { succeeded, responses }) => {
                    let ops = if succeeded { &t.success } else { &t.failure };
                    OpAnswer::ResponseTxn(TxnResponse {
                        header: Some(ResponseHeader::default()),
                        succeeded,
                        responses: answers(ops, responses, at),
                    })
                }
                // Built from the same operations: a mismatch is a bug,
                // shown as an empty answer.
                _ => OpAnswer::ResponseRange(RangeResponse::default()),
            };
            at.changed |= changes;
            ResponseOp { response: Some(response) }
        })
        .collect()
}
