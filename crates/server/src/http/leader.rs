//! `GET /v1/leader` (who leads) and `GET /v1/is-leader` (does this node lead,
//! for load balancers).

use super::error::ApiError;
use super::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use tenure_api::LeaderBody;

/// The known leader, or 503 when none is known.
pub async fn get(State(st): State<AppState>) -> Result<Json<LeaderBody>, ApiError> {
    let s = st.node.status();
    let advertised = |id| s.peers.iter().find(|p| p.id == id).and_then(|p| p.api_address.clone());
    leader_answer(
        s.leader.map(|id| LeaderBody {
            id: id.0,
            // A leader that joined is not in this node's --peers: its entry says.
            address: s
                .leader_addr
                .map(|a| a.to_string())
                .or_else(|| super::members::peer_address(&st, id)),
            http_address: st.cluster.http_address(id).or_else(|| advertised(id)),
            term: s.term.0,
            fencing_token: s.fencing_token.map(|t| t.0),
        }),
        s.term.0,
    )
}

/// The answer of `/v1/leader`: the leader, or 503 saying that none is known
/// in `term`.
pub(crate) fn leader_answer(
    leader: Option<LeaderBody>,
    term: u64,
) -> Result<Json<LeaderBody>, ApiError> {
    leader.map(Json).ok_or_else(|| {
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, format!("no leader is known in term {term}"))
    })
}

/// 200 while this node leads (its lease checked now), 503 naming the known
/// leader otherwise.
pub async fn is_leader(State(st): State<AppState>) -> Response {
    is_leader_answer(st.node.is_leader(), || st.node.status().leader.map(|n| n.0))
}

/// The answer of `/v1/is-leader`: 200 `{"leader": true}` when `leads`, else
/// 503 naming the leader this node knows of.
pub(crate) fn is_leader_answer(leads: bool, leader: impl FnOnce() -> Option<u64>) -> Response {
    if leads {
        (StatusCode::OK, Json(serde_json::json!({"leader": true}))).into_response()
    } else {
        let mut e = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "this node is not the leader");
        e.body.leader = leader();
        e.into_response()
    }
}
