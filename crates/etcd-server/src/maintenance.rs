//! Maintenance (Status, Alarm, Defragment, MoveLeader; the rest answers
//! what tenure offers instead) and Auth, which tenure serves no further than
//! Authenticate (the rest says what tenure offers instead).

use crate::errors::unimplemented;
use crate::{Shared, VERSION};
use std::sync::Arc;
use tenure_etcd_api::etcdserverpb::alarm_request::AlarmAction;
use tenure_etcd_api::etcdserverpb::auth_server::Auth;
use tenure_etcd_api::etcdserverpb::maintenance_server::Maintenance;
use tenure_etcd_api::etcdserverpb::{
    AlarmRequest, AlarmResponse, AuthDisableRequest, AuthDisableResponse, AuthEnableRequest,
    AuthEnableResponse, AuthRoleAddRequest, AuthRoleAddResponse, AuthRoleDeleteRequest,
    AuthRoleDeleteResponse, AuthRoleGetRequest, AuthRoleGetResponse,
    AuthRoleGrantPermissionRequest, AuthRoleGrantPermissionResponse, AuthRoleListRequest,
    AuthRoleListResponse, AuthRoleRevokePermissionRequest, AuthRoleRevokePermissionResponse,
    AuthUserAddRequest, AuthUserAddResponse, AuthUserChangePasswordRequest,
    AuthUserChangePasswordResponse, AuthUserDeleteRequest, AuthUserDeleteResponse,
    AuthUserGetRequest, AuthUserGetResponse, AuthUserGrantRoleRequest, AuthUserGrantRoleResponse,
    AuthUserListRequest, AuthUserListResponse, AuthUserRevokeRoleRequest,
    AuthUserRevokeRoleResponse, AuthenticateRequest, AuthenticateResponse, DefragmentRequest,
    DefragmentResponse, HashKvRequest, HashKvResponse, HashRequest, HashResponse,
    MoveLeaderRequest, MoveLeaderResponse, SnapshotRequest, SnapshotResponse, StatusRequest,
    StatusResponse,
};
use tenure_kv::Store;
use tenure_node::replicated::handover::wait_for_log;
use tenure_node::NodeId;
use tonic::{Request, Response, Status};

/// etcd's answer to a MoveLeader naming no voter (or the leader itself).
const BAD_TRANSFEREE: &str = "etcdserver: bad leader transferee";
/// etcd's answer to a MoveLeader whose transferee did not catch up in time.
const TRANSFER_TIMEOUT: &str = "etcdserver: request timed out, leader transfer took too long";

/// What tenure offers instead of etcd's user and role administration.
const NO_RBAC: &str = "etcd's users are tenure's API tokens (the user name is a token's name, \
     the password its secret) with their roles read, write or admin; they are written in the \
     nodes' configuration ([[api_tokens]]), not through the etcd API";

/// What tenure offers instead of etcd's store hashes.
const NO_HASH: &str = "tenure does not hash its store: compare the members' applied index and \
     revision (Status, or GET /v1/status); the store's checks are its simulator and \
     linearizability tests (docs/VERIFICATION.md)";

/// Maintenance: Status, Alarm, Defragment, MoveLeader.
pub(crate) struct MaintenanceService(pub(crate) Arc<Shared>);

/// Bytes of the store's keys and values, with a few bytes per key: what
/// Status reports as the database size (tenure keeps its store in memory;
/// its log and snapshots on disk are another matter).
fn store_bytes(store: &Store) -> u64 {
    store.keys_from("").map(|kv| (kv.key.len() + kv.value.len() + 32) as u64).sum()
}

#[tonic::async_trait]
impl Maintenance for MaintenanceService {
    async fn status(
        &self,
        request: Request<StatusRequest>,
    ) -> Result<Response<StatusResponse>, Status> {
        self.0.check_leader(&request)?;
        let ctx = &self.0.ctx;
        let ((bytes, revision), _) = ctx.kv.read_stale(|s| (store_bytes(s), s.revision()));
        let log = ctx.kv.status();
        let leadership = ctx.node.leadership().borrow().clone();
        let me = ctx.node.id();
        let is_learner = log.membership.members.learners.iter().any(|m| m.id == me);
        Ok(Response::new(StatusResponse {
            header: Some(self.0.header(revision)),
            version: VERSION.to_string(),
            db_size: bytes as i64,
            leader: leadership.leader.map_or(0, |l| l.0),
            raft_index: log.commit,
            raft_term: leadership.term.0,
            raft_applied_index: log.applied,
            errors: Vec::new(),
            db_size_in_use: bytes as i64,
            is_learner,
            ..Default::default()
        }))
    }

    /// No alarm: tenure raises none (a full disk stops writes with an
    /// error, not an alarm). Listing answers none; clearing one has
    /// nothing to clear; raising one by hand is refused.
    async fn alarm(
        &self,
        request: Request<AlarmRequest>,
    ) -> Result<Response<AlarmResponse>, Status> {
        self.0.check_leader(&request)?;
        if request.get_ref().action == AlarmAction::Activate as i32 {
            return Err(unimplemented(
                "tenure raises no alarms, and none is raised by hand: a node whose disk is \
                 full refuses writes with an error",
            ));
        }
        let revision = self.0.ctx.kv.read_stale(|s| s.revision()).0;
        Ok(Response::new(AlarmResponse {
            header: Some(self.0.header(revision)),
            alarms: Vec::new(),
        }))
    }

    /// Nothing to give back: the store is in memory, and the log's files
    /// are compacted by the node itself (a snapshot, then the entries
    /// before it are dropped). Answered as done.
    async fn defragment(
        &self,
        request: Request<DefragmentRequest>,
    ) -> Result<Response<DefragmentResponse>, Status> {
        self.0.check_leader(&request)?;
        let revision = self.0.ctx.kv.read_stale(|s| s.revision()).0;
        Ok(Response::new(DefragmentResponse { header: Some(self.0.header(revision)) }))
    }

    async fn hash(&self, _request: Request<HashRequest>) -> Result<Response<HashResponse>, Status> {
        Err(unimplemented(NO_HASH))
    }

    async fn hash_kv(
        &self,
        _request: Request<HashKvRequest>,
    ) -> Result<Response<HashKvResponse>, Status> {
        Err(unimplemented(NO_HASH))
    }

    type SnapshotStream = tokio_stream::Empty<Result<SnapshotResponse, Status>>;

    async fn snapshot(
        &self,
        _request: Request<SnapshotRequest>,
    ) -> Result<Response<Self::SnapshotStream>, Status> {
        Err(unimplemented(
            "there is no backup of the store to take: every node holds all of it, and a node \
             whose disk is lost catches up from the others (docs/OPERATIONS.md, backups); a copy \
             can be read with a Range over every key",
        ))
    }

    /// Hands leadership to the voter `target_id` once it holds the log (as
    /// `tenure transfer` does): on the leader only, as etcd.
    async fn move_leader(
        &self,
        request: Request<MoveLeaderRequest>,
    ) -> Result<Response<MoveLeaderResponse>, Status> {
        self.0.check_leader(&request)?;
        let ctx = &self.0.ctx;
        let target = request.into_inner().target_id;
        if !ctx.node.is_leader() {
            return Err(Status::failed_precondition(crate::errors::NOT_LEADER));
        }
        let (membership, _) = ctx.kv.membership();
        let to = NodeId(target);
        if target == ctx.node.id().0 {
            // To itself: nothing to do, as etcd answers.
            let revision = ctx.kv.read_stale(|s| s.revision()).0;
            return Ok(Response::new(MoveLeaderResponse { header: Some(self.0.header(revision)) }));
        }
        if !membership.members.is_voter(to) {
            return Err(Status::failed_precondition(BAD_TRANSFEREE));
        }
        if let Err(behind) = wait_for_log(&ctx.node, &ctx.kv, to).await {
            tracing::info!(%behind, %to, "etcd MoveLeader: no handover");
            return Err(Status::unavailable(TRANSFER_TIMEOUT));
        }
        if let Err(e) = ctx.node.transfer_leadership(to).await {
            tracing::info!(%e, %to, "etcd MoveLeader refused");
            return Err(Status::failed_precondition(BAD_TRANSFEREE));
        }
        let revision = ctx.kv.read_stale(|s| s.revision()).0;
        Ok(Response::new(MoveLeaderResponse { header: Some(self.0.header(revision)) }))
    }
}

/// etcd's Auth service: Authenticate maps tenure's API tokens onto etcd's
/// users ([`crate::auth`]); the rest of etcd's user and role administration
/// is not served (tenure's roles are its token configuration).
pub(crate) struct AuthService(pub(crate) Arc<Shared>);

#[tonic::async_trait]
impl Auth for AuthService {
    /// A token's name and secret answer the token to send with each call;
    /// without tokens, etcd's "not enabled", which clients take as "carry
    /// on without a token".
    async fn authenticate(
        &self,
        request: Request<AuthenticateRequest>,
    ) -> Result<Response<AuthenticateResponse>, Status> {
        let revision = self.0.ctx.kv.read_stale(|s| s.revision()).0;
        self.0.ctx.auth.authenticate(request, self.0.header(revision))
    }

    async fn auth_enable(
        &self,
        _request: Request<AuthEnableRequest>,
    ) -> Result<Response<AuthEnableResponse>, Status> {
        Err(unimplemented(NO_RBAC))
    }

    async fn auth_disable(
        &self,
        _request: Request<AuthDisableRequest>,
    ) -> Result<Response<AuthDisableResponse>, Status> {
        Err(unimplemented(NO_RBAC))
    }

    async fn user_add(
        &self,
        _request: Request<AuthUserAddRequest>,
    ) -> Result<Response<AuthUserAddResponse>, Status> {
        Err(unimplemented(NO_RBAC))
    }

    async fn user_get(
        &self,
        _request: Request<AuthUserGetRequest>,
    ) -> Result<Response<AuthUserGetResponse>, Status> {
        Err(unimplemented(NO_RBAC))
    }

    async fn user_list(
        &self,
        _request: Request<AuthUserListRequest>,
    ) -> Result<Response<AuthUserListResponse>, Status> {
        Err(unimplemented(NO_RBAC))
    }

    async fn user_delete(
        &self,
        _request: Request<AuthUserDeleteRequest>,
    ) -> Result<Response<AuthUserDeleteResponse>, Status> {
        Err(unimplemented(NO_RBAC))
    }

    async fn user_change_password(
        &self,
        _request: Request<AuthUserChangePasswordRequest>,
    ) -> Result<Response<AuthUserChangePasswordResponse>, Status> {
        Err(unimplemented(NO_RBAC))
    }

    async fn user_grant_role(
        &self,
        _request: Request<AuthUserGrantRoleRequest>,
    ) -> Result<Response<AuthUserGrantRoleResponse>, Status> {
        Err(unimplemented(NO_RBAC))
    }

    async fn user_revoke_role(
        &self,
        _request: Request<AuthUserRevokeRoleRequest>,
    ) -> Result<Response<AuthUserRevokeRoleResponse>, Status> {
        Err(unimplemented(NO_RBAC))
    }

    async fn role_add(
        &self,
        _request: Request<AuthRoleAddRequest>,
    ) -> Result<Response<AuthRoleAddResponse>, Status> {
        Err(unimplemented(NO_RBAC))
    }

    async fn role_get(
        &self,
        _request: Request<AuthRoleGetRequest>,
    ) -> Result<Response<AuthRoleGetResponse>, Status> {
        Err(unimplemented(NO_RBAC))
    }

    async fn role_list(
        &self,
        _request: Request<AuthRoleListRequest>,
    ) -> Result<Response<AuthRoleListResponse>, Status> {
        Err(unimplemented(NO_RBAC))
    }

    async fn role_delete(
        &self,
        _request: Request<AuthRoleDeleteRequest>,
    ) -> Result<Response<AuthRoleDeleteResponse>, Status> {
        Err(unimplemented(NO_RBAC))
    }

    async fn role_grant_permission(
        &self,
        _request: Request<AuthRoleGrantPermissionRequest>,
    ) -> Result<Response<AuthRoleGrantPermissionResponse>, Status> {
        Err(unimplemented(NO_RBAC))
    }

    async fn role_revoke_permission(
        &self,
        _request: Request<AuthRoleRevokePermissionRequest>,
    ) -> Result<Response<AuthRoleRevokePermissionResponse>, Status> {
        Err(unimplemented(NO_RBAC))
    }
}
