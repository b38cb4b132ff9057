//! `POST /v1/sessions/{id}/keepalive`: renews a session on the tenure
//! leader.
//!
//! Any node takes a keepalive: it asks the sessions service on the ready
//! leader ([`crate::sessions`]; a follower forwards the question over the
//! peer connection), which answers under R1–R3 of docs/ELECTIONS.md. A
//! renewal writes nothing to the log.

use super::auth::Caller;
use super::error::ApiError;
use super::owner::not_found;
use super::owner::{require_owner, Use};
use super::sessions::session_id;
use super::state::AppState;
use super::store::no_leader_retry;
use crate::sessions::{SessionAnswer, SessionAskError};
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use tenure_api::SessionBody;
use tenure_kv::LeaseId;
use tenure_node::replicated::AskError;

/// `POST /v1/sessions/{id}/keepalive`: 200 `{"id","ttl_ms"}` once the
/// leader renewed it (a full TTL from its answer); 404 when it does not
/// exist or its expiry is being proposed; 403 for another token's session;
/// 503 with `Retry-After` while no leader can answer.
pub async fn post(
    State(st): State<AppState>,
    Extension(caller): Extension<Caller>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Json<SessionBody>, ApiError> {
    let lease = session_id(id)?;
    require_owner(&st, &caller, &[lease], Use::Renew).await?;
    match st.renewer.renew(lease).await.map_err(ask_error)? {
        SessionAnswer::Renewed { ttl_ms } => Ok(Json(SessionBody { id: lease.0, ttl_ms })),
        other => Err(answer_error(lease, other)),
    }
}

/// The answer to a renewal the leader did not grant.
pub(super) fn answer_error(lease: LeaseId, answer: SessionAnswer) -> ApiError {
    match answer {
        SessionAnswer::NotFound => not_found(lease),
        SessionAnswer::Expiring => ApiError::new(
            StatusCode::NOT_FOUND,
            format!("session {lease} expired: its expiry is being proposed and cannot be undone"),
        ),
        SessionAnswer::NotLeader => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "the node asked no longer leads, or could not confirm it does; retry",
        )
        .retry_after(1),
        SessionAnswer::Busy => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "too many renewals wait on the leader; retry shortly",
        )
        .retry_after(1),
        SessionAnswer::BadRequest
        | SessionAnswer::Renewed { .. }
        | SessionAnswer::Remaining { .. } => ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the leader answered a renewal with {answer:?} (a node of another build?)"),
        ),
    }
}

/// The answer when the question reached no service.
pub(super) fn ask_error(e: SessionAskError) -> ApiError {
    match e {
        SessionAskError::Ask(AskError::NoLeader { waited }) => {
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string())
                .retry_after(no_leader_retry(waited))
        }
        SessionAskError::Ask(
            AskError::Busy | AskError::Stopped | AskError::NoService | AskError::Timeout(_),
        ) => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string()).retry_after(1),
        SessionAskError::Ask(AskError::TooLarge { .. }) | SessionAskError::Malformed(_) => {
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn refusals_map_to_clear_statuses() {
        let lease = LeaseId(9);
        assert_eq!(answer_error(lease, SessionAnswer::NotFound).status(), StatusCode::NOT_FOUND);
        let expiring = answer_error(lease, SessionAnswer::Expiring);
        assert_eq!(expiring.status(), StatusCode::NOT_FOUND);
        assert!(expiring.body().error.contains("expired"), "{}", expiring.body().error);
        for a in [SessionAnswer::NotLeader, SessionAnswer::Busy] {
            let e = answer_error(lease, a);
            assert_eq!((e.status(), e.retry_after), (StatusCode::SERVICE_UNAVAILABLE, Some(1)));
        }
        let waited = Duration::from_millis(9_001);
        let e = ask_error(SessionAskError::Ask(AskError::NoLeader { waited }));
        assert_eq!((e.status(), e.retry_after), (StatusCode::SERVICE_UNAVAILABLE, Some(4)));
        let e = ask_error(SessionAskError::Malformed("x".into()));
        assert_eq!(e.status(), StatusCode::INTERNAL_SERVER_ERROR);
    }
}
