//! Sessions (leases of the replicated store): `POST /v1/sessions` grants one,
//! `DELETE /v1/sessions/{id}` revokes it (deleting its keys at one
//! revision), `GET /v1/sessions/{id}` and `GET /v1/sessions` read them.
//! docs/ELECTIONS.md, "The HTTP contract", is the description these follow.
//!
//! Grants and revocations are log entries, proposed like any write (a
//! follower forwards them); the store checks the TTL's range and its limits
//! and refuses with nothing written (400, 429). Reads are linearizable.

use super::auth::Caller;
use super::budget::{json_answer, json_str_len, MAX_LIST_BYTES};
use super::error::ApiError;
use super::kv_body::invalid;
use super::owner::{grant_owner, not_found, require_owner, Use};
use super::state::AppState;
use super::store::{propose, query_from, read, unexpected, Consistency};
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::Deserialize;
use tenure_api::{
    SessionBody, SessionGrantRequest, SessionInfoBody, SessionListBody, SessionRevokedBody,
};
use tenure_kv::{Command, Lease, LeaseEnd, LeaseId, Response, Store};

/// Most sessions one `GET /v1/sessions` returns unless `limit` says fewer.
pub const DEFAULT_SESSION_LIST: usize = 1_000;

/// Most sessions one `GET /v1/sessions` returns (`limit`): a page of about
/// a megabyte of JSON; the rest is read page by page (`after`).
pub const MAX_SESSION_LIST: usize = 10_000;
/// Sessions of a list whose remaining time is asked of the leader (the
/// first ones; the rest answer `remaining_ms: null`).
pub const MAX_REMAINING_ASKED: usize = 100;

/// The shape of a grant, for the error answer to a malformed one.
const GRANT_SHAPE: &str = r#"{"ttl_ms": N} with N from 500 to 86400000"#;

/// The query of `GET /v1/sessions`.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    limit: Option<usize>,
    /// Continue after this session id (excluded): the last of the page before.
    after: Option<u64>,
    #[serde(default)]
    consistency: Consistency,
}

/// `POST /v1/sessions`: grants a session with the body's TTL, owned by the
/// caller's token ([`super::owner`]).
pub async fn grant(
    State(st): State<AppState>,
    Extension(caller): Extension<Caller>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<SessionBody>, ApiError> {
    let body = body.map_err(|r| ApiError::new(r.status(), r.body_text()))?;
    let command = grant_command(&body, grant_owner(&caller))?;
    match propose(&st, &command).await? {
        (Response::Granted { lease, ttl_ms, .. }, _) => {
            Ok(Json(SessionBody { id: lease.0, ttl_ms }))
        }
        (other, _) => Err(unexpected(&other)),
    }
}

/// A grant body, as `POST /v1/sessions` reads it: the command to propose;
/// 400 for a body that is not `{"ttl_ms": N}` or a TTL outside
/// [`tenure_kv::MIN_TTL_MS`]..=[`tenure_kv::MAX_TTL_MS`] (nothing is
/// granted); the session is `owner`'s (a token's name; `None`: the
/// administrators'). Public for the fuzz target.
#[doc(hidden)]
pub fn grant_command(body: &[u8], owner: Option<String>) -> Result<Command, ApiError> {
    let request = Json::<SessionGrantRequest>::from_bytes(body).map_err(|r| {
        ApiError::new(StatusCode::BAD_REQUEST, format!("{}; expected {GRANT_SHAPE}", r.body_text()))
    })?;
    let command = Command::Grant { ttl_ms: request.ttl_ms, owner };
    command.validate().map_err(|e| invalid(&e))?;
    Ok(command)
}

/// `DELETE /v1/sessions/{id}`: ends the session and deletes its keys (its
/// owner or an admin token only).
pub async fn revoke(
    State(st): State<AppState>,
    Extension(caller): Extension<Caller>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Json<SessionRevokedBody>, ApiError> {
    let lease = session_id(id)?;
    require_owner(&st, &caller, &[lease], Use::Revoke).await?;
    match propose(&st, &Command::Revoke { lease }).await? {
        (Response::LeaseEnded { lease, reason: LeaseEnd::Revoked, revision, deleted }, _) => {
            Ok(Json(SessionRevokedBody { id: lease.0, keys_deleted: deleted, revision }))
        }
        (other, _) => Err(unexpected(&other)),
    }
}

/// `GET /v1/sessions/{id}`: the session's TTL and keys, or 404.
pub async fn get(
    State(st): State<AppState>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Json<SessionInfoBody>, ApiError> {
    let lease = session_id(id)?;
    let found = read(&st, Default::default(), |s: &Store| s.lease(lease).map(info)).await?;
    let mut found = found.ok_or_else(|| not_found(lease))?;
    // Only the leader's clock knows; null while no leader answers.
    found.remaining_ms = crate::sessions::remaining_ms(&st.kv, lease).await;
    Ok(Json(found))
}

/// `GET /v1/sessions[?limit=N]`: the sessions by id.
pub async fn list(
    State(st): State<AppState>,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Result<axum::response::Response, ApiError> {
    let q = query_from(query, "limit=N, after=ID, consistency=stale")?;
    let limit = match q.limit {
        None => DEFAULT_SESSION_LIST,
        Some(n @ 1..=MAX_SESSION_LIST) => n,
        Some(n) => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                format!("limit={n}: give 1 to {MAX_SESSION_LIST} (default {DEFAULT_SESSION_LIST})"),
            ))
        }
    };
    let permit = st.lists.permit().await?;
    let after = LeaseId(q.after.unwrap_or(0));
    let mut body = read(&st, q.consistency, |s: &Store| {
        let (sessions, more) = page(s, after, limit);
        SessionListBody { sessions, more, revision: s.revision() }
    })
    .await?;
    // The leader's clock says how long each has left: asked for the first
    // ones at once (null when no leader answers).
    let asks = body.sessions.iter().take(MAX_REMAINING_ASKED).map(|s| {
        let kv = &st.kv;
        async move { crate::sessions::remaining_ms(kv, LeaseId(s.id)).await }
    });
    let remaining = futures_util::future::join_all(asks).await;
    for (s, r) in body.sessions.iter_mut().zip(remaining) {
        s.remaining_ms = r;
    }
    Ok(json_answer(permit, move || body).await)
}

/// The sessions after `after`, by id: at most `limit` and
/// [`MAX_LIST_BYTES`] of JSON (one at least); and whether more are left.
fn page(store: &Store, after: LeaseId, limit: usize) -> (Vec<SessionInfoBody>, bool) {
    let mut found = Vec::new();
    let mut bytes = 0;
    for lease in store.leases_after(after) {
        // The keys and the owner as JSON strings, and the other fields.
        let keys: usize = lease.keys.iter().map(|k| json_str_len(k.as_bytes()) + 3).sum();
        let owner = lease.owner.as_ref().map_or(0, |o| json_str_len(o.as_bytes()));
        let size = keys + owner + 128;
        if found.len() == limit || (!found.is_empty() && bytes + size > MAX_LIST_BYTES) {
            return (found, true);
        }
        bytes += size;
        found.push(info(lease));
    }
    (found, false)
}

/// A session as the store holds it (the leader's remaining time is not
/// the store's).
fn info(lease: &Lease) -> SessionInfoBody {
    SessionInfoBody {
        id: lease.id.0,
        ttl_ms: lease.ttl_ms,
        keys: lease.keys.iter().cloned().collect(),
        owner: lease.owner.clone(),
        remaining_ms: None,
    }
}

/// The session id of the path: a positive integer, else 400.
pub(crate) fn session_id(id: Result<Path<String>, PathRejection>) -> Result<LeaseId, ApiError> {
    let Path(text) = id.map_err(|r| ApiError::new(StatusCode::BAD_REQUEST, r.body_text()))?;
    match text.parse::<u64>() {
        Ok(n) if n > 0 => Ok(LeaseId(n)),
        _ => Err(invalid_id(&text)),
    }
}

fn invalid_id(text: &str) -> ApiError {
    let shown: String = text.chars().take(40).collect();
    ApiError::new(
        StatusCode::BAD_REQUEST,
        format!("{shown:?} is not a session id: ids are positive integers, from POST /v1/sessions"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(s: &str) -> Result<Path<String>, PathRejection> {
        Ok(Path(s.to_string()))
    }

    #[test]
    fn session_ids_are_positive_integers() {
        assert_eq!(session_id(path("42")).unwrap(), LeaseId(42));
        for bad in ["0", "-1", "x", "", "18446744073709551616", "1.5"] {
            let e = session_id(path(bad)).unwrap_err();
            assert_eq!(e.status(), StatusCode::BAD_REQUEST, "{bad}");
            assert!(e.body().error.contains("not a session id"), "{}", e.body().error);
        }
    }

    #[test]
    fn a_session_lists_its_keys_in_order() {
        let lease = Lease {
            id: LeaseId(3),
            ttl_ms: 1000,
            keys: ["b".to_string(), "a".to_string()].into_iter().collect(),
            owner: Some("app".into()),
        };
        let body = info(&lease);
        assert_eq!((body.id, body.ttl_ms, body.keys), (3, 1000, vec!["a".into(), "b".into()]));
        assert_eq!((body.remaining_ms, body.owner.as_deref()), (None, Some("app")));
    }
}
