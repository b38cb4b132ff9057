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
use tokio::time::{Duration, Instant};

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

/// How often a transfer looks again whether its target holds the log.
const CATCH_UP_POLL: Duration = Duration::from_millis(5);

/// On the leader of the log: waits, at most an election timeout, until
/// `to` holds every entry this node held when the transfer was asked
/// (Raft's leadership transfer does the same). The voters that hold the
/// leader's entries refuse a successor whose log lacks them (the freshness
/// rule), so a transfer to a target a few milliseconds behind (the
/// leader's no-op of a new term still on its way) would fail and wait for
/// an election timeout instead. Elsewhere, and for a node that is not a
/// member, the elector's own checks answer.
async fn wait_for_log(st: &AppState, to: NodeId) -> Result<(), ApiError> {
    let (timings, _) = st.node.timings();
    let give_up = Instant::now() + timings.election_timeout;
    let wanted = st.kv.status().last.index;
    loop {
        let log = st.kv.status();
        let held = log.followers.iter().find(|(id, _)| *id == to).map(|&(_, index)| index);
        let Some(held) = held.filter(|_| log.leading.is_some()) else { return Ok(()) };
        if held >= wanted {
            return Ok(());
        }
        if Instant::now() >= give_up {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                format!(
                    "node {to} holds the log up to index {held}, this leader up to {wanted}: \
                     it has not caught up within an election timeout ({} ms); a successor \
                     that lacks entries would be refused by the voters that hold them, so \
                     nothing was handed over (see `tenure status` for its lag)",
                    timings.election_timeout.as_millis()
                ),
            ));
        }
        tokio::time::sleep(CATCH_UP_POLL).await;
    }
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
