//! The KV service: Range, Put, DeleteRange, Txn and Compact over the
//! node's replicated store, through the same log and read index as the
//! HTTP API.

use crate::auth::Caller;
use crate::errors::{
    self, invalid, not_utf8, reserved, KEY_NOT_FOUND, KEY_NOT_PROVIDED, LEASE_PROVIDED,
    VALUE_PROVIDED,
};
use crate::range::{key_range, range, to_etcd};
use crate::Shared;
use std::sync::Arc;
use tenure_etcd_api::etcdserverpb::kv_server::Kv;
use tenure_etcd_api::etcdserverpb::{
    CompactionRequest, CompactionResponse, DeleteRangeRequest, DeleteRangeResponse, PutRequest,
    PutResponse, RangeRequest, RangeResponse, TxnRequest, TxnResponse,
};
use tenure_kv::{
    Command, KeyRange, LeaseId, OpResponse, RangeOp, RangeOpResponse, RangeTxn,
    Response as KvResponse, Store,
};
use tonic::{Request, Response, Status};

/// Keys tenure keeps for its sessions and elections: not written here.
pub(crate) const RESERVED_PREFIX: &[u8] = b"_tenure/";

/// The KV service.
pub(crate) struct KvService(pub(crate) Arc<Shared>);

impl Shared {
    /// Proposes `command` through the log; a compare-and-set that did not
    /// match comes back as [`KvResponse::Conflict`].
    pub(crate) async fn propose(&self, command: &Command) -> Result<KvResponse, Status> {
        command.validate().map_err(|e| errors::invalid_command(&e))?;
        let committed =
            self.ctx.kv.propose(command.encode()).await.map_err(|e| errors::write_failure(&e))?;
        match KvResponse::decode(&committed.result) {
            Ok(KvResponse::Invalid(e)) => Err(errors::invalid_command(&e)),
            Ok(KvResponse::Refused(r)) => Err(errors::refused(&r)),
            Ok(r) => Ok(r),
            Err(e) => Err(Status::internal(format!(
                "tenure: the write was applied, but its answer cannot be read: {e}"
            ))),
        }
    }

    /// A read of the store: linearizable, or this node's applied state.
    pub(crate) async fn read<R>(
        &self,
        serializable: bool,
        f: impl FnOnce(&Store) -> R,
    ) -> Result<R, Status> {
        if serializable {
            return Ok(self.ctx.kv.read_stale(f).0);
        }
        self.ctx.kv.read(f).await.map(|(r, _)| r).map_err(|e| errors::read_failure(&e))
    }
}

/// The key as tenure's (UTF-8), or InvalidArgument.
pub(crate) fn utf8_key(key: &[u8]) -> Result<String, Status> {
    if key.is_empty() {
        return Err(invalid(KEY_NOT_PROVIDED));
    }
    String::from_utf8(key.to_vec()).map_err(|_| not_utf8())
}

/// PermissionDenied if the range holds a key of tenure's own.
pub(crate) fn check_writable(range: &KeyRange<'_>) -> Result<(), Status> {
    let covers = match range {
        KeyRange::Key(k) => k.starts_with(RESERVED_PREFIX),
        // Some key with the prefix is at or after the start and before the end.
        KeyRange::From(start) => *start < b"_tenure0".as_slice(),
        KeyRange::Between(start, end) => {
            *start < b"_tenure0".as_slice() && *end > RESERVED_PREFIX && start < end
        }
    };
    if covers {
        return Err(reserved());
    }
    Ok(())
}

/// etcd's lease id as tenure's session: 0 is none.
pub(crate) fn lease_of(lease: i64) -> Result<Option<LeaseId>, Status> {
    match lease {
        0 => Ok(None),
        l if l < 0 => Err(Status::not_found(errors::LEASE_NOT_FOUND)),
        l => Ok(Some(LeaseId(l as u64))),
    }
}

#[tonic::async_trait]
impl Kv for KvService {
    async fn range(
        &self,
        request: Request<RangeRequest>,
    ) -> Result<Response<RangeResponse>, Status> {
        self.0.check_leader(&request)?;
        let r = request.into_inner();
        let (answer, revision) =
            self.0.read(r.serializable, |s| (range(s, &r), s.revision())).await?;
        let mut answer = answer?;
        answer.header = Some(self.0.header(revision));
        Ok(Response::new(answer))
    }

    async fn put(&self, request: Request<PutRequest>) -> Result<Response<PutResponse>, Status> {
        self.0.check_leader(&request)?;
        let caller = Caller::of(&request);
        let r = request.into_inner();
        if r.key.is_empty() {
            return Err(invalid(KEY_NOT_PROVIDED));
        }
        if r.ignore_value && !r.value.is_empty() {
            return Err(invalid(VALUE_PROVIDED));
        }
        if r.ignore_lease && r.lease != 0 {
            return Err(invalid(LEASE_PROVIDED));
        }
        let key = utf8_key(&r.key)?;
        check_writable(&KeyRange::Key(&r.key))?;
        let lease = lease_of(r.lease)?;
        if let Some(lease) = lease {
            self.0.check_attach(&caller, lease).await?;
        }
        if r.ignore_value || r.ignore_lease {
            // The key's current value or lease is kept: read and written in
            // one step of the store (etcd's transaction of one put).
            let put = RangeOp::Put {
                key,
                value: r.value.clone(),
                lease,
                ignore_value: r.ignore_value,
                ignore_lease: r.ignore_lease,
            };
            let txn = RangeTxn { compare: Vec::new(), success: vec![put], failure: Vec::new() };
            let answer = match self.0.propose(&Command::RangeTxn(txn)).await {
                // A plain Put checks its lease before the key (a
                // transaction's put the other way round): with both
                // missing, etcd names the lease.
                Err(e) if e.message() == KEY_NOT_FOUND => {
                    if let Some(id) = lease {
                        if self.0.read(false, |s| s.lease(id).is_none()).await? {
                            return Err(Status::not_found(errors::LEASE_NOT_FOUND));
                        }
                    }
                    return Err(e);
                }
                answer => answer?,
            };
            return match answer {
                KvResponse::RangeTxn { revision, mut responses, .. } => match responses.pop() {
                    Some(RangeOpResponse::Put { prev }) => {
                        let prev_kv = prev.as_ref().filter(|_| r.prev_kv).map(to_etcd);
                        let header = Some(self.0.header(revision));
                        Ok(Response::new(PutResponse { header, prev_kv }))
                    }
                    _ => Err(Status::internal("tenure: a put answered as something else")),
                },
                other => Err(unexpected(&other)),
            };
        }
        let command = Command::Put { key, value: r.value.clone(), if_mod_revision: None, lease };
        match self.0.propose(&command).await? {
            KvResponse::Put { revision, prev } => {
                let prev_kv = prev.as_ref().filter(|_| r.prev_kv).map(to_etcd);
                let header = Some(self.0.header(revision));
                Ok(Response::new(PutResponse { header, prev_kv }))
            }
            other => Err(unexpected(&other)),
        }
    }

    async fn delete_range(
        &self,
        request: Request<DeleteRangeRequest>,
    ) -> Result<Response<DeleteRangeResponse>, Status> {
        self.0.check_leader(&request)?;
        let r = request.into_inner();
        if r.key.is_empty() {
            return Err(invalid(KEY_NOT_PROVIDED));
        }
        let range = key_range(&r.key, &r.range_end);
        check_writable(&range)?;
        let (revision, prevs) = match range {
            KeyRange::Key(k) => match std::str::from_utf8(k) {
                Ok(key) => {
                    let command = Command::Delete { key: key.to_string(), if_mod_revision: None };
                    match self.0.propose(&command).await? {
                        KvResponse::Delete { revision, prev } => {
                            (revision, prev.into_iter().collect())
                        }
                        other => return Err(unexpected(&other)),
                    }
                }
                // No key that is not UTF-8 exists: nothing to delete.
                Err(_) => (self.0.read(false, |s| s.revision()).await?, Vec::new()),
            },
            KeyRange::From(from) | KeyRange::Between(from, _) => {
                let to = match range {
                    KeyRange::Between(_, to) => to.to_vec(),
                    _ => Vec::new(),
                };
                let command = Command::DeleteRange { from: from.to_vec(), to };
                match self.0.propose(&command).await? {
                    KvResponse::Txn { revision, responses, .. } => (
                        revision,
                        responses
                            .into_iter()
                            .filter_map(|op| match op {
                                OpResponse::Delete { prev } => prev,
                                _ => None,
                            })
                            .collect(),
                    ),
                    other => return Err(unexpected(&other)),
                }
            }
        };
        Ok(Response::new(DeleteRangeResponse {
            header: Some(self.0.header(revision)),
            deleted: prevs.len() as i64,
            prev_kvs: if r.prev_kv { prevs.iter().map(to_etcd).collect() } else { Vec::new() },
        }))
    }

    async fn txn(&self, request: Request<TxnRequest>) -> Result<Response<TxnResponse>, Status> {
        self.0.check_leader(&request)?;
        let caller = Caller::of(&request);
        crate::txn::txn(&self.0, &caller, request.into_inner()).await.map(Response::new)
    }

    async fn compact(
        &self,
        request: Request<CompactionRequest>,
    ) -> Result<Response<CompactionResponse>, Status> {
        self.0.check_leader(&request)?;
        let r = request.into_inner();
        let revision = u64::try_from(r.revision).unwrap_or(0);
        match self.0.propose(&Command::Compact { revision }).await? {
            KvResponse::Txn { revision, .. } => {
                Ok(Response::new(CompactionResponse { header: Some(self.0.header(revision)) }))
            }
            other => Err(unexpected(&other)),
        }
    }
}

/// An answer of another kind than the command's: a bug, said so.
pub(crate) fn unexpected(r: &KvResponse) -> Status {
    Status::internal(format!("tenure: unexpected answer of the store: {r:?}"))
}
