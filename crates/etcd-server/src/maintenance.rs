//! Maintenance.Status, Cluster.MemberList, and Auth, which tenure does
//! not serve beyond Authenticate (it says what tenure offers instead).

use crate::{Shared, VERSION};
use std::sync::Arc;
use tenure_etcd_api::etcdserverpb::auth_server::Auth;
use tenure_etcd_api::etcdserverpb::cluster_server::Cluster;
use tenure_etcd_api::etcdserverpb::maintenance_server::Maintenance;
use tenure_etcd_api::etcdserverpb::{
    AuthenticateRequest, AuthenticateResponse, Member, MemberListRequest, MemberListResponse,
    StatusRequest, StatusResponse,
};
use tenure_kv::Store;
use tonic::{Request, Response, Status};

/// Maintenance: Status.
pub(crate) struct MaintenanceService(pub(crate) Arc<Shared>);

/// Cluster: MemberList.
pub(crate) struct ClusterService(pub(crate) Arc<Shared>);

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
}

#[tonic::async_trait]
impl Cluster for ClusterService {
    async fn member_list(
        &self,
        request: Request<MemberListRequest>,
    ) -> Result<Response<MemberListResponse>, Status> {
        self.0.check_leader(&request)?;
        let ctx = &self.0.ctx;
        let (membership, _) = ctx.kv.membership();
        let scheme = if ctx.tls { "https" } else { "http" };
        let me = ctx.node.id();
        let member = |m: &tenure_replica::Member, is_learner: bool| {
            let address = match m.address.is_empty() {
                true => ctx.peer_addresses.get(&m.id).cloned().unwrap_or_default(),
                false => m.address.clone(),
            };
            Member {
                id: m.id.0,
                name: format!("node-{}", m.id.0),
                peer_ur_ls: (!address.is_empty())
                    .then(|| format!("{scheme}://{address}"))
                    .into_iter()
                    .collect(),
                // Only this node's etcd address is known here (each node
                // has its own --etcd-listen).
                client_ur_ls: (m.id == me).then(|| self.0.client_url.clone()).into_iter().collect(),
                is_learner,
            }
        };
        let members = membership.members;
        let list = members
            .voters
            .iter()
            .map(|m| member(m, false))
            .chain(members.learners.iter().map(|m| member(m, true)))
            .collect();
        let revision = ctx.kv.read_stale(|s| s.revision()).0;
        Ok(Response::new(MemberListResponse {
            header: Some(self.0.header(revision)),
            members: list,
        }))
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
}
