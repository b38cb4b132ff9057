//! `POST /v1/transfer {"to": N}`: hand leadership to node N.

use super::error::ApiError;
use super::state::AppState;
use axum::extract::rejection::JsonRejection;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use tenure_api::{TransferBody, TransferRequest};
use tenure_core::NodeId;
use tenure_node::TransferError;

/// Asks this node to hand over; 409 names the leader when it does not lead.
pub async fn post(
    State(st): State<AppState>,
    body: Result<Json<TransferRequest>, JsonRejection>,
) -> Result<Json<TransferBody>, ApiError> {
    let to = target(body)?;
    let term = st.node.status().term.0;
    wait_for_log(&st, to).await?;
    match st.node.transfer_leadership(to).await {
        Ok(()) => Ok(Json(TransferBody { to: to.0, from_term: term })),
        Err(e) => Err(transfer_error(e)),
    }
}

/// On the leader of the log, waits (bounded) until `to` holds the log; 409
/// saying why if it does not (see [`tenure_node::replicated::handover`]).
async fn wait_for_log(st: &AppState, to: NodeId) -> Result<(), ApiError> {
    tenure_node::replicated::handover::wait_for_log(&st.node, &st.kv, to).await.map_err(|b| {
        ApiError::new(
            StatusCode::CONFLICT,
            format!(
                "node {to} cannot take over yet: {b}; a successor that lacks entries would \
                 be refused by the voters that hold them, so nothing was handed over (see \
                 `tenure status` for its lag)"
            ),
        )
    })
}

/// The node a transfer request names, or the error answer for a body that
/// names none. Pure (the fuzz target calls it with `Json::from_bytes`).
pub fn target(body: Result<Json<TransferRequest>, JsonRejection>) -> Result<NodeId, ApiError> {
    let Json(req) = body.map_err(|r| {
        ApiError::new(
            r.status(),
            format!("{}; expected a JSON body like {{\"to\": 2}}", r.body_text()),
        )
    })?;
    if req.to == 0 {
        return Err(ApiError::new(StatusCode::BAD_REQUEST, "node ids are positive integers"));
    }
    Ok(NodeId(req.to))
}

fn transfer_error(e: TransferError) -> ApiError {
    use tenure_core::TransferError as Core;
    let status = match &e {
        TransferError::Refused(Core::NotLeader { .. }) => StatusCode::CONFLICT,
        TransferError::Refused(Core::UnknownNode(_)) => StatusCode::NOT_FOUND,
        TransferError::Refused(Core::TargetUnreachable(_)) => StatusCode::CONFLICT,
        TransferError::NodeStopped => StatusCode::SERVICE_UNAVAILABLE,
    };
    match e {
        // Worded here: the core's message prints the leader as a Rust Option.
        TransferError::Refused(Core::NotLeader { leader }) => {
            let known = match leader {
                Some(id) => format!("the leader is node {id}; ask it"),
                None => "no leader is known right now".to_string(),
            };
            let mut err = ApiError::new(status, format!("this node is not the leader: {known}"));
            err.body.leader = leader.map(|n| n.0);
            err
        }
        other => ApiError::new(status, other.to_string()),
    }
}
