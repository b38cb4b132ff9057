//! `GET /v1/leader` (who leads) and `GET /v1/is-leader` (does this node lead,
//! for load balancers).

use super::state::{ApiError, AppState};
use crate::api::LeaderBody;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

/// The known leader, or 503 when none is known.
pub async fn get(State(st): State<AppState>) -> Result<Json<LeaderBody>, ApiError> {
    let s = st.node.status();
    match s.leader {
        Some(id) => Ok(Json(LeaderBody {
            id: id.0,
            address: s.leader_addr.map(|a| a.to_string()),
            term: s.term.0,
            fencing_token: s.fencing_token.map(|t| t.0),
        })),
        None => Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("no leader is known in term {}", s.term),
        )),
    }
}

/// 200 while this node leads (its lease checked now), 503 naming the known
/// leader otherwise.
pub async fn is_leader(State(st): State<AppState>) -> Response {
    if st.node.is_leader() {
        (StatusCode::OK, Json(serde_json::json!({"leader": true}))).into_response()
    } else {
        let mut e = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "this node is not the leader");
        e.body.leader = st.node.status().leader.map(|n| n.0);
        e.into_response()
    }
}
