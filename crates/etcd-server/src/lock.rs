//! etcd's Lock service (Lock, Unlock), with etcd 3.4's semantics: what
//! etcd's `v3lock` server does with clientv3's `Mutex` recipe, here over
//! the same KV paths as the KV service.
//!
//! A locker is the key `name/<lease in hex>` attached to its lease
//! ([`crate::queue`]); the lock belongs to the key of the name with the
//! lowest create revision, and that revision is the hold's fencing token.
//! Lock answers once the caller holds it; Unlock deletes the key it is
//! given (any key, as etcd's does). What differs from etcd: docs/ETCD.md.

use crate::auth::Caller;
use crate::kv::KvService;
use crate::queue::{self, as_etcd, Withdrawal};
use crate::Shared;
use std::sync::Arc;
use tenure_etcd_api::etcdserverpb::kv_server::Kv;
use tenure_etcd_api::etcdserverpb::DeleteRangeRequest;
use tenure_etcd_api::v3lockpb::lock_server::Lock;
use tenure_etcd_api::v3lockpb::{LockRequest, LockResponse, UnlockRequest, UnlockResponse};
use tonic::{Request, Response, Status};

/// clientv3's `ErrSessionExpired` (etcd 3.5 on): the locker's key was
/// deleted while its lease lives (an Unlock, or a delete of the key).
pub const SESSION_EXPIRED: &str = "mutex: session is expired";

/// The Lock service.
pub(crate) struct LockService(pub(crate) Arc<Shared>);

#[tonic::async_trait]
impl Lock for LockService {
    async fn lock(&self, request: Request<LockRequest>) -> Result<Response<LockResponse>, Status> {
        self.0.check_leader(&request)?;
        let caller = Caller::of(&request);
        let _slot = self.0.waiting.take()?;
        let r = request.into_inner();
        let lease = queue::candidate_lease(r.lease)?;
        self.0.check_attach(&caller, tenure_kv::LeaseId(lease as u64)).await.map_err(as_etcd)?;
        let key = queue::candidate_key(&r.name, lease);
        let place = queue::join(&self.0, &key, lease, b"").await?;
        // Withdrawn unless it gets the lock: a failure, or a client gone.
        let withdrawal = Withdrawal::new(self.0.clone(), key.clone(), place.rev);
        let prefix = queue::line(&r.name);
        let turn =
            queue::wait_turn(&self.0, &prefix, &key, place.rev, lease, SESSION_EXPIRED).await?;
        withdrawal.disarm();
        // etcd 3.4: the header of the transaction when the lock was free,
        // else that of the read that saw the last predecessor gone.
        let header = if turn.waited { turn.header } else { place.header };
        Ok(Response::new(LockResponse { header: Some(header), key }))
    }

    async fn unlock(
        &self,
        request: Request<UnlockRequest>,
    ) -> Result<Response<UnlockResponse>, Status> {
        self.0.check_leader(&request)?;
        let delete = DeleteRangeRequest { key: request.into_inner().key, ..Default::default() };
        let deleted =
            KvService(self.0.clone()).delete_range(Request::new(delete)).await.map_err(as_etcd)?;
        Ok(Response::new(UnlockResponse { header: deleted.into_inner().header }))
    }
}
