//! etcd's Cluster service over tenure's membership (docs/MEMBERSHIP.md):
//! MemberList is the log's configuration; MemberAdd, MemberRemove and
//! MemberPromote are tenure's changes, one at a time through the log
//! (`Replicated::change_members`), taken by the leader only. MemberUpdate
//! is not served: tenure replaces a node instead.

use crate::errors::{self, unimplemented};
use crate::Shared;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::time::Duration;
use tenure_etcd_api::etcdserverpb::cluster_server::Cluster;
use tenure_etcd_api::etcdserverpb::{
    Member, MemberAddRequest, MemberAddResponse, MemberListRequest, MemberListResponse,
    MemberPromoteRequest, MemberPromoteResponse, MemberRemoveRequest, MemberRemoveResponse,
    MemberUpdateRequest, MemberUpdateResponse,
};
use tenure_node::{ChangeFailure, NodeId};
use tenure_replica::{Change, ChangeError, Members, Membership};
use tonic::{Request, Response, Status};

/// How long a change may take to commit before it is answered as timed
/// out (its outcome unknown): a healthy cluster commits one in a few
/// milliseconds. The HTTP API's `CHANGE_TIMEOUT` too.
pub const CHANGE_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest node id tenure takes (`tenure_core::MAX_NODE_ID`).
const MAX_NODE_ID: u64 = 65_535;

/// How many ids a MemberAdd tries before it gives up (each a free one
/// drawn at random: only a change that raced it can take one first).
const ID_DRAWS: usize = 8;

/// The longest peer address accepted (a DNS name, a colon and a port).
const MAX_ADDRESS_LEN: usize = 260;

/// Cluster: the members, and changes of them.
pub(crate) struct ClusterService(pub(crate) Arc<Shared>);

impl ClusterService {
    /// Runs `change` through the log: the members after it, or etcd's
    /// answer to why not.
    async fn change(&self, change: Change) -> Result<Membership, Status> {
        let ctx = &self.0.ctx;
        match tokio::time::timeout(CHANGE_TIMEOUT, ctx.kv.change_members(change.clone())).await {
            Ok(Ok(membership)) => {
                tracing::info!(node = %ctx.node.id(), %change, members = %membership.members,
                    "a change of members (etcd API) committed");
                Ok(membership)
            }
            Ok(Err(e)) => Err(change_status(&e)),
            Err(_) => Err(Status::unavailable(errors::TIMEOUT)),
        }
    }

    /// etcd's members as this node's log lists them now.
    fn members(&self, membership: &Membership) -> Vec<Member> {
        let ctx = &self.0.ctx;
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
        let members = &membership.members;
        members
            .voters
            .iter()
            .map(|m| member(m, false))
            .chain(members.learners.iter().map(|m| member(m, true)))
            .collect()
    }

    /// The header of an answer: the store's revision on this node.
    fn header(&self) -> Option<tenure_etcd_api::etcdserverpb::ResponseHeader> {
        let revision = self.0.ctx.kv.read_stale(|s| s.revision()).0;
        Some(self.0.header(revision))
    }
}

#[tonic::async_trait]
impl Cluster for ClusterService {
    /// A learner at the peer URL, with an id tenure draws (free, 1 to
    /// 65,535): start the node with `tenure server --id ID --join ...`.
    /// Without `is_learner` the leader promotes it once it has caught up
    /// (etcd makes it a voter at once, which costs quorum until it has).
    async fn member_add(
        &self,
        request: Request<MemberAddRequest>,
    ) -> Result<Response<MemberAddResponse>, Status> {
        self.0.check_leader(&request)?;
        let r = request.into_inner();
        let [url] = r.peer_ur_ls.as_slice() else {
            return Err(Status::invalid_argument(
                "tenure: give one peer URL, the new node's peer address \
                 (http://HOST:PORT or https://HOST:PORT)",
            ));
        };
        let address = peer_address(url)?;
        for _ in 0..ID_DRAWS {
            let (membership, _) = self.0.ctx.kv.membership();
            let id = free_id(&membership.members, &address);
            let member = tenure_replica::Member {
                id,
                address: address.clone(),
                directory: None,
                auto_promote: !r.is_learner,
            };
            match self.change(Change::AddLearner(member)).await {
                Ok(membership) => {
                    let members = self.members(&membership);
                    let added = members.iter().find(|m| m.id == id.0).cloned();
                    return Ok(Response::new(MemberAddResponse {
                        header: self.header(),
                        member: added,
                        members,
                    }));
                }
                // Another change took the id first: draw again.
                Err(e) if e.message().contains("is a member already") => continue,
                Err(e) => return Err(e),
            }
        }
        Err(Status::unavailable("tenure: no free node id was found; retry"))
    }

    async fn member_remove(
        &self,
        request: Request<MemberRemoveRequest>,
    ) -> Result<Response<MemberRemoveResponse>, Status> {
        self.0.check_leader(&request)?;
        let id = node_id(request.into_inner().id)?;
        let membership = self.change(Change::Remove(id)).await?;
        let members = self.members(&membership);
        Ok(Response::new(MemberRemoveResponse { header: self.header(), members }))
    }

    async fn member_update(
        &self,
        _request: Request<MemberUpdateRequest>,
    ) -> Result<Response<MemberUpdateResponse>, Status> {
        Err(unimplemented(
            "a member keeps its peer address: to move a node, replace it (tenure member \
             replace OLD NEW HOST:PORT, or MemberAdd the new one, then MemberRemove the old)",
        ))
    }

    async fn member_list(
        &self,
        request: Request<MemberListRequest>,
    ) -> Result<Response<MemberListResponse>, Status> {
        self.0.check_leader(&request)?;
        let (membership, _) = self.0.ctx.kv.membership();
        let members = self.members(&membership);
        Ok(Response::new(MemberListResponse { header: self.header(), members }))
    }

    async fn member_promote(
        &self,
        request: Request<MemberPromoteRequest>,
    ) -> Result<Response<MemberPromoteResponse>, Status> {
        self.0.check_leader(&request)?;
        let id = node_id(request.into_inner().id)?;
        let membership = self.change(Change::Promote(id)).await?;
        let members = self.members(&membership);
        Ok(Response::new(MemberPromoteResponse { header: self.header(), members }))
    }
}

/// etcd's member id as tenure's node id, or etcd's "member not found".
fn node_id(id: u64) -> Result<NodeId, Status> {
    if id == 0 || id > MAX_NODE_ID {
        return Err(Status::not_found(MEMBER_NOT_FOUND));
    }
    Ok(NodeId(id))
}

/// etcd's answer when no member has the id.
const MEMBER_NOT_FOUND: &str = "etcdserver: member not found";

/// HOST:PORT of a peer URL (`http://HOST:PORT` or `https://HOST:PORT`, a
/// trailing `/` allowed), or InvalidArgument.
fn peer_address(url: &str) -> Result<String, Status> {
    let bad = |why: &str| {
        let shown: String = url.chars().take(80).collect();
        Status::invalid_argument(format!(
            "tenure: the peer URL {shown:?} {why}; give http://HOST:PORT or https://HOST:PORT, \
             the new node's peer address"
        ))
    };
    if url.len() > MAX_ADDRESS_LEN + 9 {
        return Err(bad("is too long"));
    }
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .ok_or_else(|| bad("has no http:// or https://"))?;
    let address = rest.strip_suffix('/').unwrap_or(rest);
    if address.is_empty()
        || address.contains(['/', '@', '?', '#'])
        || address.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(bad("is not a scheme and HOST:PORT"));
    }
    let Some((host, port)) = address.rsplit_once(':') else { return Err(bad("has no port")) };
    if host.is_empty() || !matches!(port.parse::<u16>(), Ok(1..)) {
        return Err(bad("has no host, or no port from 1 to 65535"));
    }
    Ok(address.to_string())
}

/// A node id no member has, drawn at random (no id is reused on purpose:
/// a removed node that comes back with its old data under a reused id would
/// pass for the new member).
fn free_id(members: &Members, address: &str) -> NodeId {
    let taken = |id: u64| members.voters.iter().chain(&members.learners).any(|m| m.id.0 == id);
    let mut hasher = RandomState::new().build_hasher();
    hasher.write(address.as_bytes());
    loop {
        let id = 1 + hasher.finish() % MAX_NODE_ID;
        if !taken(id) {
            return NodeId(id);
        }
        hasher.write_u64(id);
    }
}

/// etcd's answer (code and text, which clients match) to a change tenure's
/// log refused or could not make.
fn change_status(e: &ChangeFailure) -> Status {
    let refused = match e {
        ChangeFailure::Refused(r) => r,
        ChangeFailure::Unknown => return Status::unavailable(errors::TIMEOUT_LEADER_FAIL),
        ChangeFailure::Failed(why) => {
            return Status::unavailable(format!("tenure: the log failed ({why}); retry"))
        }
        ChangeFailure::Stopped => return Status::unavailable(errors::SERVER_STOPPED),
    };
    let precondition = |text: &str| Status::failed_precondition(text);
    match refused {
        ChangeError::NotLeader { .. } => Status::unavailable(
            "etcdserver: not leader (tenure changes members on the leader only: send it to the \
             leader's endpoint, Status names it)",
        ),
        ChangeError::NotMember(_) => Status::not_found(MEMBER_NOT_FOUND),
        ChangeError::DuplicateAddress(..) => precondition("etcdserver: Peer URLs already exists"),
        ChangeError::DuplicateId(_) => precondition("etcdserver: member ID already exist"),
        ChangeError::AlreadyVoter(_) => {
            precondition("etcdserver: can only promote a learner member")
        }
        ChangeError::Behind(_) => precondition(
            "etcdserver: can only promote a learner member which is in sync with leader",
        ),
        ChangeError::Unhealthy { .. } => {
            precondition("etcdserver: re-configuration failed due to not enough started members")
        }
        ChangeError::Pending(_) => Status::unavailable(format!("tenure: {refused}")),
        other => precondition(&format!("tenure: {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_urls_give_their_address_and_bad_ones_a_clear_refusal() {
        assert_eq!(peer_address("http://10.0.0.4:7001").unwrap(), "10.0.0.4:7001");
        assert_eq!(peer_address("https://[::1]:7001/").unwrap(), "[::1]:7001");
        assert_eq!(peer_address("https://node-4.example:7001").unwrap(), "node-4.example:7001");
        for bad in [
            "10.0.0.4:7001",
            "http://",
            "http://10.0.0.4",
            "http://10.0.0.4:0",
            "http://10.0.0.4:70000",
            "http://a@b:1",
            "http://h:1/path",
            "unix:///x",
        ] {
            let e = peer_address(bad).unwrap_err();
            assert_eq!(e.code(), tonic::Code::InvalidArgument, "{bad}");
            assert!(e.message().contains("HOST:PORT"), "{bad}: {}", e.message());
        }
    }

    #[test]
    fn a_drawn_id_is_free_and_in_range() {
        let mut members = Members::default();
        for id in 1..=3 {
            members.voters.push(tenure_replica::Member {
                id: NodeId(id),
                address: format!("h:{id}"),
                directory: None,
                auto_promote: false,
            });
        }
        for _ in 0..1_000 {
            let id = free_id(&members, "h:9").0;
            assert!((4..=MAX_NODE_ID).contains(&id), "{id}");
        }
    }
}
