//! `POST /v1/peers/{id}/dead {"incarnation": N}`: incarnation N of node `id`
//! is dead. For whatever knows it for certain — systemd's `ExecStopPost`
//! (after the main process exited), a supervisor that reaped the process,
//! an operator who killed it — through `tenure notify-dead`. Role admin.
//!
//! The node takes the notice only about the peer's current incarnation (the
//! highest its handshakes showed): it then stops supporting that peer and,
//! if it was its leader, stands at once instead of waiting for the election
//! timeout. **Trust**: the notice is believed. One about a live peer's
//! current incarnation is taken like any other, so a caller that is not
//! sure the process is dead kills it first, then reports (see
//! `tenure_node::spy`).
//!
//! Answers: 200 `{"accepted": true, "node", "incarnation", "was_leader"}`;
//! 409 for a stale notice (an older incarnation: nothing to do), one about
//! an incarnation never seen, or a peer whose incarnations went back, with
//! `current_incarnation` where known; 400 for a bad path or body or a notice
//! about the answering node itself; 404 for a node that is not a voter.

use super::error::ApiError;
use super::state::AppState;
use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use tenure_api::{DeadNoticeBody, DeadNoticeRequest};
use tenure_core::NodeId;
use tenure_node::{NoticeError, NoticeOutcome};

/// Tells this node that the incarnation of the body, of the node of the
/// path, is dead.
pub async fn post(
    State(st): State<AppState>,
    id: Result<Path<String>, PathRejection>,
    body: Result<Json<DeadNoticeRequest>, JsonRejection>,
) -> Result<Json<DeadNoticeBody>, ApiError> {
    let (peer, incarnation) = notice(id, body)?;
    match st.node.notify_dead(peer, incarnation).await {
        Ok(NoticeOutcome::Accepted { peer, incarnation, was_leader }) => {
            Ok(Json(DeadNoticeBody { accepted: true, node: peer.0, incarnation, was_leader }))
        }
        Ok(NoticeOutcome::Stale { peer, incarnation, current }) => {
            let mut e = ApiError::new(
                StatusCode::CONFLICT,
                format!(
                    "stale: incarnation {incarnation} of node {peer} is not its current one \
                     ({current}); that process is gone already, nothing to do"
                ),
            );
            e.body.current_incarnation = Some(current);
            Err(e)
        }
        Err(e) => Err(refusal(e)),
    }
}

/// The node of the path and the incarnation of the body, or the error
/// answer for a notice that names none. Pure (the fuzz target calls it with
/// `Json::from_bytes`).
pub fn notice(
    id: Result<Path<String>, PathRejection>,
    body: Result<Json<DeadNoticeRequest>, JsonRejection>,
) -> Result<(NodeId, u64), ApiError> {
    let Path(text) = id.map_err(|r| ApiError::new(StatusCode::BAD_REQUEST, r.body_text()))?;
    let peer = match text.parse::<u64>() {
        Ok(n) if n > 0 => NodeId(n),
        _ => {
            let shown: String = text.chars().take(40).collect();
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                format!("{shown:?} is not a node id: node ids are positive integers"),
            ));
        }
    };
    // Every malformed body is a 400, whatever axum's own status for it.
    let Json(req) = body.map_err(|r| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("{}; expected a JSON body like {{\"incarnation\": 7}}", r.body_text()),
        )
    })?;
    if req.incarnation == 0 {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "incarnation 0 does not exist (incarnations are positive; /v1/status shows each \
             peer's)",
        ));
    }
    Ok((peer, req.incarnation))
}

/// The error answer for a refused notice (nothing changed).
fn refusal(e: NoticeError) -> ApiError {
    let (status, current) = match &e {
        NoticeError::Myself(_) | NoticeError::InvalidIncarnation => (StatusCode::BAD_REQUEST, None),
        NoticeError::NotAVoter(_) => (StatusCode::NOT_FOUND, None),
        NoticeError::NeverSeen { .. } => (StatusCode::CONFLICT, None),
        NoticeError::Unseen { current, .. } => (StatusCode::CONFLICT, Some(*current)),
        NoticeError::RolledBack { highest, .. } => (StatusCode::CONFLICT, Some(*highest)),
        NoticeError::NodeStopped => (StatusCode::SERVICE_UNAVAILABLE, None),
    };
    let mut answer = ApiError::new(status, format!("refused, nothing changed: {e}"));
    answer.body.current_incarnation = current;
    answer
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::response::IntoResponse;

    fn path(s: &str) -> Result<Path<String>, PathRejection> {
        Ok(Path(s.to_string()))
    }

    fn body(s: &str) -> Result<Json<DeadNoticeRequest>, JsonRejection> {
        Json::from_bytes(s.as_bytes())
    }

    fn status(r: Result<(NodeId, u64), ApiError>) -> u16 {
        r.map_err(|e| e.into_response().status().as_u16()).unwrap_err()
    }

    #[test]
    fn a_notice_names_a_positive_node_and_incarnation() {
        assert_eq!(notice(path("2"), body(r#"{"incarnation": 9}"#)).unwrap(), (NodeId(2), 9));
        for bad_path in ["0", "-1", "two", "", "18446744073709551616"] {
            let r = notice(path(bad_path), body(r#"{"incarnation": 9}"#));
            assert_eq!(status(r), 400, "{bad_path:?}");
        }
        for bad_body in [
            "",
            "{}",
            r#"{"incarnation": 0}"#,
            r#"{"incarnation": -3}"#,
            r#"{"incarnation": "9"}"#,
            r#"{"incarnation": 9, "node": 2}"#,
        ] {
            assert_eq!(status(notice(path("2"), body(bad_body))), 400, "{bad_body:?}");
        }
    }

    #[test]
    fn refusals_map_to_statuses_naming_the_current_incarnation() {
        let answer = |e| {
            let a = refusal(e);
            (a.status().as_u16(), a.body().current_incarnation)
        };
        let p = NodeId(2);
        assert_eq!(answer(NoticeError::Myself(p)), (400, None));
        assert_eq!(answer(NoticeError::NotAVoter(p)), (404, None));
        assert_eq!(answer(NoticeError::NeverSeen { peer: p }), (409, None));
        let unseen = NoticeError::Unseen { peer: p, incarnation: 9, current: 8 };
        assert_eq!(answer(unseen), (409, Some(8)));
        let back = NoticeError::RolledBack { peer: p, highest: 8, lower: 3 };
        assert_eq!(answer(back), (409, Some(8)));
        assert_eq!(answer(NoticeError::NodeStopped), (503, None));
    }
}
