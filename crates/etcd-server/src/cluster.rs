//! etcd's Cluster service over tenure's membership (docs/MEMBERSHIP.md):
//! MemberList is the log's configuration; MemberAdd, MemberRemove and
//! MemberPromote are tenure's changes, one at a time through the log
//! (`Replicated::change_members`), made by the leader: a follower passes
//! them on to it ([`crate::forward`]). MemberUpdate is not served: tenure
//! replaces a node instead.

use crate::errors::{self, unimplemented};
use crate::forward::{self, Target};
use crate::Shared;
use std::collections::hash_map::RandomState;
use std::collections::BTreeMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::time::Duration;
use tenure_etcd_api::etcdserverpb::cluster_client::ClusterClient;
use tenure_etcd_api::etcdserverpb::cluster_server::Cluster;
use tenure_etcd_api::etcdserverpb::{
    Member, MemberAddRequest, MemberAddResponse, MemberListRequest, MemberListResponse,
    MemberPromoteRequest, MemberPromoteResponse, MemberRemoveRequest, MemberRemoveResponse,
    MemberUpdateRequest, MemberUpdateResponse,
};
use tenure_node::{ChangeFailure, NodeId};
use tenure_replica::{Change, ChangeError, Members, Membership};
use tonic::transport::Channel;
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

/// Cluster: the members, and changes of them.
pub(crate) struct ClusterService(pub(crate) Arc<Shared>);

impl ClusterService {
    /// Runs `change` through the log: the members after it, or why not
    /// (`None`: not committed in time, its outcome unknown).
    async fn change(&self, change: Change) -> Result<Membership, Option<ChangeFailure>> {
        let ctx = &self.0.ctx;
        match tokio::time::timeout(CHANGE_TIMEOUT, ctx.kv.change_members(change.clone())).await {
            Ok(Ok(membership)) => {
                tracing::info!(node = %ctx.node.id(), %change, members = %membership.members,
                    "a change of members (etcd API) committed");
                Ok(membership)
            }
            Ok(Err(e)) => Err(Some(e)),
            Err(_) => Err(None),
        }
    }

    /// etcd's members as this node's log lists them now.
    fn members(&self, membership: &Membership) -> Vec<Member> {
        let ctx = &self.0.ctx;
        let scheme = if ctx.tls { "https" } else { "http" };
        let me = ctx.node.id();
        // The others' etcd addresses, as their handshakes advertised them.
        let etcd: BTreeMap<NodeId, String> = ctx
            .node
            .status()
            .peers
            .into_iter()
            .filter_map(|p| Some((p.id, p.etcd_address?)))
            .collect();
        let member = |m: &tenure_replica::Member, is_learner: bool| {
            let address = match m.address.is_empty() {
                true => ctx.peer_addresses.get(&m.id).cloned().unwrap_or_default(),
                false => m.address.clone(),
            };
            // A member added (by MemberAdd, or tenure member add) whose
            // node has not joined yet: no name, which etcdctl shows as
            // "unstarted".
            let unstarted = m.directory.is_none() && !ctx.peer_addresses.contains_key(&m.id);
            Member {
                id: m.id.0,
                name: if unstarted { String::new() } else { format!("node-{}", m.id.0) },
                peer_ur_ls: (!address.is_empty())
                    .then(|| format!("{scheme}://{address}"))
                    .into_iter()
                    .collect(),
                // A member's etcd API, if it serves one and this node has
                // heard from it: what clients sync their endpoints to.
                client_ur_ls: match m.id == me {
                    true => Some(own_url(&self.0.client_url, &address)),
                    false => etcd.get(&m.id).map(|a| format!("{scheme}://{a}")),
                }
                .into_iter()
                .collect(),
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
        if let Target::Leader(leader) = forward::target(&self.0, &request)? {
            let call = |mut c: ClusterClient<Channel>, r| async move { c.member_add(r).await };
            let mut answer = forward::to_leader(&self.0, leader, request, call).await?;
            answer.get_mut().header = self.header();
            return Ok(answer);
        }
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
            let id = free_id(&membership.members, &self.0.ctx.peer_addresses, &address);
            let member = tenure_replica::Member {
                id,
                address: address.clone(),
                directory: None,
                auto_promote: !r.is_learner,
            };
            match self.change(Change::AddLearner(member)).await {
                // Another change took the id first: draw again.
                Err(Some(ChangeFailure::Refused(ChangeError::DuplicateId(_)))) => continue,
                Err(e) => return Err(change_status(e.as_ref())),
                Ok(membership) => {
                    let members = self.members(&membership);
                    let added = members.iter().find(|m| m.id == id.0).cloned();
                    return Ok(Response::new(MemberAddResponse {
                        header: self.header(),
                        member: added,
                        members,
                    }));
                }
            }
        }
        Err(Status::unavailable("tenure: no free node id was found; retry"))
    }

    async fn member_remove(
        &self,
        request: Request<MemberRemoveRequest>,
    ) -> Result<Response<MemberRemoveResponse>, Status> {
        self.0.check_leader(&request)?;
        if let Target::Leader(leader) = forward::target(&self.0, &request)? {
            let call = |mut c: ClusterClient<Channel>, r| async move { c.member_remove(r).await };
            let mut answer = forward::to_leader(&self.0, leader, request, call).await?;
            answer.get_mut().header = self.header();
            return Ok(answer);
        }
        let id = node_id(request.into_inner().id)?;
        let membership =
            self.change(Change::Remove(id)).await.map_err(|e| change_status(e.as_ref()))?;
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
        if let Target::Leader(leader) = forward::target(&self.0, &request)? {
            let call = |mut c: ClusterClient<Channel>, r| async move { c.member_promote(r).await };
            let mut answer = forward::to_leader(&self.0, leader, request, call).await?;
            answer.get_mut().header = self.header();
            return Ok(answer);
        }
        let id = node_id(request.into_inner().id)?;
        let membership =
            self.change(Change::Promote(id)).await.map_err(|e| change_status(e.as_ref()))?;
        let members = self.members(&membership);
        Ok(Response::new(MemberPromoteResponse { header: self.header(), members }))
    }
}

/// This node's client URL for clients: an unspecified IP (the listener
/// binds every interface) replaced by the host of its peer address, as its
/// peers do ([`tenure_node::PeerInfo::etcd_address`]).
fn own_url(url: &str, peer_address: &str) -> String {
    let Some((scheme, address)) = url.split_once("://") else { return url.to_string() };
    match (address.parse::<std::net::SocketAddr>(), peer_address.rsplit_once(':')) {
        (Ok(a), Some((host, _))) if a.ip().is_unspecified() && !host.is_empty() => {
            format!("{scheme}://{host}:{}", a.port())
        }
        _ => url.to_string(),
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
/// trailing `/` allowed) that the members can dial
/// ([`tenure_replica::address_problem`]), or InvalidArgument.
fn peer_address(url: &str) -> Result<String, Status> {
    let bad = |why: &str| {
        let shown: String = url.chars().take(80).collect();
        Status::invalid_argument(format!(
            "tenure: the peer URL {shown:?} {why}; give http://HOST:PORT or https://HOST:PORT, \
             the new node's peer address"
        ))
    };
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .ok_or_else(|| bad("has no http:// or https://"))?;
    let address = rest.strip_suffix('/').unwrap_or(rest);
    match tenure_replica::address_problem(address) {
        Some(why) => Err(bad(&why)),
        None => Ok(address.to_string()),
    }
}

/// A node id that no member and no node of the bootstrap list has, drawn
/// at random: a removed node that came back with its old data under a
/// reused id would pass for the new member, and a draw among 65,535 ids
/// makes that unlikely (a smallest free id would make it certain).
fn free_id(members: &Members, bootstrap: &BTreeMap<NodeId, String>, address: &str) -> NodeId {
    let taken = |id: u64| {
        bootstrap.contains_key(&NodeId(id))
            || members.voters.iter().chain(&members.learners).any(|m| m.id.0 == id)
    };
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
/// log refused or could not make (`None`: not committed in time). Texts
/// that are not etcd's go with a code clientv3 3.4 passes on as it is (it
/// turns a FailedPrecondition it does not know into "the client connection
/// is closing").
fn change_status(e: Option<&ChangeFailure>) -> Status {
    let refused = match e {
        None => return Status::unavailable(errors::TIMEOUT),
        Some(ChangeFailure::Refused(r)) => r,
        Some(ChangeFailure::Unknown) => return Status::unavailable(errors::TIMEOUT_LEADER_FAIL),
        Some(ChangeFailure::Failed(why)) => {
            return Status::unavailable(format!("tenure: the log failed ({why}); retry"))
        }
        Some(ChangeFailure::Stopped) => return Status::unavailable(errors::SERVER_STOPPED),
    };
    let precondition = |text: &str| Status::failed_precondition(text);
    match refused {
        ChangeError::NotLeader { .. } => Status::failed_precondition(errors::NOT_LEADER),
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
        ChangeError::TooMany(_) | ChangeError::TooManyVoters(_) => {
            Status::resource_exhausted(format!("tenure: {refused}"))
        }
        ChangeError::LastVoter(_) | ChangeError::ZeroId | ChangeError::DuplicateDirectory(..) => {
            Status::invalid_argument(format!("tenure: {refused}"))
        }
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
            "http://::1:7001",
            "http://0.0.0.0:7001",
            "http://[::]:7001",
            "http://[::1:7001",
        ] {
            let e = peer_address(bad).unwrap_err();
            assert_eq!(e.code(), tonic::Code::InvalidArgument, "{bad}");
            assert!(e.message().contains("HOST:PORT"), "{bad}: {}", e.message());
        }
    }

    #[test]
    fn the_own_client_url_names_a_host_clients_can_reach() {
        assert_eq!(own_url("https://0.0.0.0:2379", "10.0.0.1:7001"), "https://10.0.0.1:2379");
        assert_eq!(own_url("http://[::]:2379", "[fd00::1]:7001"), "http://[fd00::1]:2379");
        assert_eq!(own_url("https://0.0.0.0:2379", "db1.example:7001"), "https://db1.example:2379");
        assert_eq!(own_url("https://127.0.0.1:2379", "10.0.0.1:7001"), "https://127.0.0.1:2379");
        assert_eq!(own_url("https://0.0.0.0:2379", ""), "https://0.0.0.0:2379");
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
            let id = free_id(&members, &BTreeMap::from([(NodeId(4), "h:4".into())]), "h:9").0;
            assert_ne!(id, 4, "a node of the bootstrap list");
            assert!((5..=MAX_NODE_ID).contains(&id), "{id}");
        }
    }
}
