//! A member change asked of a follower goes to the leader's etcd API, as
//! etcd's own followers pass a proposal to their leader: clients that
//! spread their calls over every endpoint (clientv3, `etcdctl --endpoints
//! a,b,c`) add, remove and promote members through any node.
//!
//! The leader's etcd address comes from its handshake with this node
//! ([`tenure_node::PeerInfo::etcd_address`]); the connection carries this
//! node's certificate and checks that the leader's names the leader
//! (`node-N.CLUSTER`, [`tenure_node::tls::node_name`]). The caller's token
//! goes along, so the leader checks the caller's rights itself. A change
//! is passed on once: a node that gets a forwarded change and no longer
//! leads answers etcd's "not leader".

use crate::errors::{NOT_LEADER, NO_LEADER, TIMEOUT_CONNECTION_LOST};
use crate::Shared;
use std::future::Future;
use std::time::Duration;
use tenure_etcd_api::etcdserverpb::cluster_client::ClusterClient;
use tenure_node::NodeId;
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};
use tonic::{Request, Response, Status};

/// The metadata key that marks a change passed on by another node.
pub const FORWARDED: &str = "tenure-forwarded";

/// How long connecting to the leader's etcd API may take (TCP, TLS and
/// HTTP/2 handshakes together).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// How long the leader may take to answer a change passed on to it: its
/// own bound on a change, and a second for the way there and back.
pub const CALL_TIMEOUT: Duration =
    Duration::from_secs(crate::cluster::CHANGE_TIMEOUT.as_secs() + 1);

/// Where a member change is made.
pub(crate) enum Target {
    /// Here: this node leads (as far as it knows).
    Here,
    /// On the leader, node `0`.
    Leader(NodeId),
}

/// Where the change in `request` is made, or etcd's answer when nowhere:
/// "no leader" while none is known, "not leader" for a change another
/// node passed on to this one, which no longer leads.
pub(crate) fn target<T>(shared: &Shared, request: &Request<T>) -> Result<Target, Status> {
    let me = shared.ctx.node.id();
    match shared.ctx.node.leadership().borrow().leader {
        Some(leader) if leader == me => Ok(Target::Here),
        _ if request.metadata().contains_key(FORWARDED) => {
            Err(Status::failed_precondition(NOT_LEADER))
        }
        Some(leader) => Ok(Target::Leader(leader)),
        None => Err(Status::unavailable(NO_LEADER)),
    }
}

/// Makes `call` with `request`'s message on the leader's Cluster service,
/// with the caller's token, and answers the leader's answer; bounded: a
/// leader that does not answer within [`CALL_TIMEOUT`], or a connection
/// that breaks, gives etcd's "request timed out, possibly due to connection
/// lost" (the change may or may not have been made).
pub(crate) async fn to_leader<Req, Resp, F, Fut>(
    shared: &Shared,
    leader: NodeId,
    request: Request<Req>,
    call: F,
) -> Result<Response<Resp>, Status>
where
    F: FnOnce(ClusterClient<Channel>, Request<Req>) -> Fut,
    Fut: Future<Output = Result<Response<Resp>, Status>>,
{
    let channel = connect(shared, leader).await?;
    let token = request.metadata().get("token").cloned();
    let mut passed = Request::new(request.into_inner());
    passed.set_timeout(CALL_TIMEOUT);
    if let Some(token) = token {
        passed.metadata_mut().insert("token", token);
    }
    passed.metadata_mut().insert(FORWARDED, tonic::metadata::MetadataValue::from_static("1"));
    tracing::debug!(%leader, "a member change asked of this follower: passed on to the leader");
    match tokio::time::timeout(CALL_TIMEOUT, call(ClusterClient::new(channel), passed)).await {
        // The leader's own answer, refusals included.
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(status)) if !is_transport_error(&status) => Err(status),
        Ok(Err(status)) => {
            tracing::warn!(%leader, error = %status, "a member change passed on to the leader: the connection broke");
            Err(Status::unavailable(TIMEOUT_CONNECTION_LOST))
        }
        Err(_) => Err(Status::unavailable(TIMEOUT_CONNECTION_LOST)),
    }
}

/// Whether `status` is the connection's failure rather than the leader's
/// answer (tonic gives the transport's error as the status's source).
fn is_transport_error(status: &Status) -> bool {
    std::error::Error::source(status).is_some()
}

/// A connection to the leader's etcd API.
async fn connect(shared: &Shared, leader: NodeId) -> Result<Channel, Status> {
    let unreachable = |why: String| {
        Status::unavailable(format!(
            "tenure: this node does not lead, and the leader (node {leader}) {why}; retry, or \
             ask the leader"
        ))
    };
    let address = shared
        .ctx
        .node
        .status()
        .peers
        .into_iter()
        .find(|p| p.id == leader)
        .and_then(|p| p.etcd_address)
        .ok_or_else(|| unreachable("serves no etcd API this node knows of".into()))?;
    let scheme = if shared.forward_tls.is_some() { "https" } else { "http" };
    let url = format!("{scheme}://{address}");
    let mut endpoint = Endpoint::from_shared(url.clone())
        .map_err(|e| unreachable(format!("advertises a bad etcd address {url}: {e}")))?
        .connect_timeout(CONNECT_TIMEOUT);
    if let Some(tls) = &shared.forward_tls {
        let name = tenure_node::tls::node_name(&shared.cluster_name, leader);
        endpoint = endpoint
            .tls_config(tls.clone().domain_name(name).timeout(CONNECT_TIMEOUT))
            .map_err(|e| unreachable(format!("cannot be reached over TLS: {e}")))?;
    }
    match tokio::time::timeout(CONNECT_TIMEOUT, endpoint.connect()).await {
        Ok(Ok(channel)) => Ok(channel),
        Ok(Err(e)) => Err(unreachable(format!("cannot be reached at {url}: {e}"))),
        Err(_) => Err(unreachable(format!(
            "did not finish connecting at {url} within {CONNECT_TIMEOUT:?}"
        ))),
    }
}

/// The TLS settings of the connections to the leader: the cluster's CA,
/// and this node's certificate as the client's.
pub(crate) fn client_tls(ca: &[u8], cert: &[u8], key: &[u8]) -> ClientTlsConfig {
    ClientTlsConfig::new()
        .ca_certificate(tonic::transport::Certificate::from_pem(ca))
        .identity(tonic::transport::Identity::from_pem(cert, key))
}
