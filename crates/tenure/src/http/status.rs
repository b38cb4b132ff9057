//! `GET /v1/status`: this node's view of the cluster.

use super::state::AppState;
use crate::api::{LsnBody, PeerBody, StatusBody};
use axum::extract::State;
use axum::Json;
use tenure_node::NodeStatus;

/// The node's status as JSON.
pub async fn get(State(st): State<AppState>) -> Json<StatusBody> {
    Json(status_body(&st.node.status()))
}

/// Converts the node's status to its wire form.
pub fn status_body(s: &NodeStatus) -> StatusBody {
    StatusBody {
        id: s.id.0,
        protocol: s.protocol.to_string(),
        role: s.role.as_str().to_string(),
        term: s.term.0,
        voted_for: s.voted_for.map(|n| n.0),
        leader: s.leader.map(|n| n.0),
        leader_address: s.leader_addr.map(|a| a.to_string()),
        fencing_token: s.fencing_token.map(|t| t.0),
        lsn: s.lsn.map(|l| LsnBody { term: l.term.0, counter: l.counter }),
        storage_failed: s.storage_failed,
        peers: s
            .peers
            .iter()
            .map(|p| PeerBody {
                id: p.id.0,
                address: p.addr.to_string(),
                connected: p.connected,
                last_heard_ms: p.last_heard_ms,
                rtt_ms: p.rtt_ms,
            })
            .collect(),
    }
}
