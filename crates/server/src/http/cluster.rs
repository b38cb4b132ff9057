//! `GET /v1/cluster`: every voter's status, read through this node (the
//! dashboard's view of the cluster), and `GET /v1/timeline`: the leadership
//! changes this node saw, with their causes.
//!
//! This node asks each other voter's `GET /v1/status` at its HTTP address
//! (`--peer-http`, else the one the voter advertised at its peer handshake:
//! `--advertise-http` or its `--http`), all at once, each within [`PEER_STATUS_TIMEOUT`], with
//! the caller's own `Authorization` header: a caller reads no more through
//! this node than it could read from the other nodes itself, and the nodes
//! must share their API tokens for it to work (a refusal is reported as the
//! node's error). It only ever asks the configured addresses, or those an
//! authenticated peer advertised. An answer
//! that is not that node's status (not HTTP, not JSON, over the client's
//! size limit, another node's id), or none within the timeout, is reported
//! as the node's error with its cause, never as its status
//! (`tests/cluster_view.rs` runs such peers).

use super::state::{AppState, ClusterLinks};
use super::status::node_status;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, Method};
use axum::Json;
use futures_util::future::join_all;
use std::time::Duration;
use tenure_api::{ClusterBody, ClusterNodeBody, StatusBody, TimelineBody, TimelineEntryBody};
use tenure_client::error::with_causes;
use tenure_core::NodeId;
use tenure_node::timeline::unix_ms;

/// How long this node waits for another node's status before reporting it
/// as not answering.
pub const PEER_STATUS_TIMEOUT: Duration = Duration::from_millis(500);

/// Every voter's status, this node's own included, by id.
pub async fn get(State(st): State<AppState>, headers: HeaderMap) -> Json<ClusterBody> {
    let own = node_status(&st);
    let authorization = headers.get(header::AUTHORIZATION).cloned();
    let mut ids: Vec<u64> = own.peers.iter().map(|p| p.id).collect();
    ids.push(own.id);
    ids.sort_unstable();
    let asks = ids.into_iter().map(|id| {
        let (cluster, own, authorization) = (&st.cluster, &own, authorization.clone());
        async move {
            if id == own.id {
                let http_address = own.http_address.clone();
                return ClusterNodeBody {
                    id,
                    http_address,
                    status: Some(own.clone()),
                    error: None,
                };
            }
            let address =
                own.peers.iter().find(|p| p.id == id).and_then(|p| p.http_address.clone());
            peer_status(cluster, NodeId(id), address, authorization).await
        }
    });
    let nodes = join_all(asks).await;
    Json(ClusterBody { served_by: own.id, now_unix_ms: unix_ms(), nodes })
}

/// The status of the voter `id` at its HTTP `address`, or why there is none.
async fn peer_status(
    cluster: &ClusterLinks,
    id: NodeId,
    address: Option<String>,
    authorization: Option<HeaderValue>,
) -> ClusterNodeBody {
    let Some(address) = address else {
        return ClusterNodeBody {
            id: id.0,
            http_address: None,
            status: None,
            error: Some(format!(
                "this node does not know node {id}'s HTTP address yet: node {id} tells it at \
                 their peer handshake, and none succeeded (see this node's peers' \
                 handshake_error); --peer-http (peer_http in the config file) names it \
                 explicitly"
            )),
        };
    };
    let scheme = if cluster.client.https() { "https" } else { "http" };
    let url = format!("{scheme}://{address}/v1/status");
    let client = cluster.client.with_authorization(authorization);
    let answer = client.send(Method::GET, &url, None, PEER_STATUS_TIMEOUT).await;
    let (status, error) = match answer {
        Ok(a) if a.status.is_success() => match serde_json::from_slice::<StatusBody>(&a.body) {
            Ok(s) if s.id == id.0 => (Some(s), None),
            Ok(s) => (None, Some(format!("{address} answers as node {}, not node {id}", s.id))),
            Err(e) => (None, Some(format!("{address} answered an unreadable status: {e}"))),
        },
        Ok(a) => (None, Some(format!("{address} answered HTTP {}", a.status))),
        // With its causes: "unreachable" alone does not say why.
        Err(e) => (None, Some(with_causes(&e))),
    };
    ClusterNodeBody { id: id.0, http_address: Some(address), status, error }
}

/// The leadership changes this node saw, oldest first.
pub async fn timeline(State(st): State<AppState>) -> Json<TimelineBody> {
    let entries = st
        .node
        .timeline()
        .into_iter()
        .map(|c| TimelineEntryBody {
            term: c.term.0,
            leader: c.leader.0,
            previous: c.previous.map(|p| p.0),
            at_unix_ms: c.at_unix_ms,
            no_leader_ms: c.no_leader_ms,
            cause: c.cause.as_str().to_string(),
            detail: c.detail,
        })
        .collect();
    Json(TimelineBody { now_unix_ms: unix_ms(), entries })
}
