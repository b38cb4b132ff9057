//! Named elections for applications (docs/ELECTIONS.md, "The HTTP
//! contract"): `POST /v1/elections/{name}/campaign`, `resign` and
//! `proclaim` change an election, each with one transaction through the
//! log (nothing is ever half done); `GET /v1/elections/{name}`,
//! `GET /v1/elections` and `check` read it (linearizable); `wait` is a long
//! poll woken only when the candidate ahead leaves (no herd, see
//! [`crate::elections::hub`]); `observe` is in [`super::election_observe`].

use super::auth::Caller;
use super::budget::{json_answer, json_str_len, MAX_LIST_BYTES};
use super::error::{json_body, ApiError};
use super::owner::{require_owner, Use};
use super::state::AppState;
use super::store::{propose, query_from, read, read_error, unexpected, Consistency};
use super::watch::stream_slot;
use crate::elections::wait::{until_leading, WaitEnd};
use crate::elections::{DEFAULT_WAIT, MAX_WAIT};
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::Deserialize;
use std::time::Duration;
use tenure_api::{
    CampaignRequest, CandidacyBody, ElectionBody, ElectionCandidateBody, ElectionLeaderBody,
    ElectionListBody, ElectionSummaryBody, ProclaimBody, ProclaimRequest, ResignBody,
    ResignRequest, TokenCheckBody,
};
use tenure_kv::{
    campaign_outcome, check_caps_in, proclaim_outcome, resign_outcome, summary, validate_name,
    validate_value, Candidate, Command, ElectionError, LeaseId, Names, Outcome, Place, Response,
    Standing, Store, MAX_ELECTIONS,
};

/// Largest body of a campaign or proclaim: a value of
/// [`tenure_kv::MAX_VALUE`] bytes with every byte
/// escaped in JSON (`\u00XX`, six bytes), and room for the rest.
pub const MAX_ELECTION_BODY_BYTES: usize = 32 * 1024;

/// Most elections one `GET /v1/elections` returns unless `limit` says fewer.
pub const DEFAULT_ELECTION_LIST: usize = 1_000;

const CAMPAIGN_SHAPE: &str = r#"{"session": L, "value": "v"}"#;
const PROCLAIM_SHAPE: &str = r#"{"session": L, "value": "v"}"#;
const RESIGN_SHAPE: &str = r#"{"session": L} or {"session": L, "token": T}"#;

/// The query of `GET /v1/elections/{name}/wait`.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct WaitQuery {
    session: u64,
    timeout_ms: Option<u64>,
}

/// The query of `GET /v1/elections/{name}/check`.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct CheckQuery {
    token: u64,
}

/// The query of `GET /v1/elections`.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    limit: Option<usize>,
    /// Continue after this election name (excluded): the last of the page before.
    after: Option<String>,
    #[serde(default)]
    consistency: Consistency,
}

/// `POST /v1/elections/{name}/campaign`: joins the queue and answers at once.
pub async fn campaign(
    State(st): State<AppState>,
    Extension(caller): Extension<Caller>,
    name: Result<Path<String>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<CandidacyBody>, ApiError> {
    let name = name_from(name)?;
    let (session, command) = campaign_command(&name, &body_bytes(body)?)?;
    require_owner(&st, &caller, &[session], Use::Campaign).await?;
    st.kv.read_stale(|s| check_caps_in(s, &name, session)).0.map_err(|e| refused(&name, &e))?;
    let response = propose(&st, &command).await?.0;
    match campaign_outcome(&response) {
        Ok(revision) => {
            st.metrics.election_campaign();
            // A follower's answer may come before it applied the entry itself.
            let place =
                read(&st, Consistency::Linearizable, |s| Place::read(s, &name, session)).await?;
            match place {
                Some(place) => Ok(Json(candidacy(&name, &place))),
                None => Err(ApiError::new(
                    StatusCode::NOT_FOUND,
                    format!(
                        "session {session} joined {name:?} at revision {revision}, but the \
                         candidacy ended since (resigned, or the session ended)"
                    ),
                )),
            }
        }
        Err(Outcome::AlreadyCandidate(since)) => {
            let mut e = ApiError::new(
                StatusCode::CONFLICT,
                format!(
                    "session {session} is already a candidate of {name:?} (since revision \
                     {since}); nothing was written"
                ),
            );
            if let Response::Txn { revision, .. } = response {
                e.body.revision = Some(revision);
            }
            Err(e)
        }
        // An unknown session is refused by `propose` (404).
        Err(Outcome::NoSession(_) | Outcome::NotCandidate | Outcome::Other(_)) => {
            Err(unexpected(&response))
        }
    }
}

/// `POST /v1/elections/{name}/resign`: the candidacy ends (the next leads).
pub async fn resign(
    State(st): State<AppState>,
    Extension(caller): Extension<Caller>,
    name: Result<Path<String>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<ResignBody>, ApiError> {
    let name = name_from(name)?;
    let (session, command) = resign_command(&name, &body_bytes(body)?)?;
    require_owner(&st, &caller, &[session], Use::Resign).await?;
    let response = propose(&st, &command).await?.0;
    match resign_outcome(&response) {
        Ok(revision) => Ok(Json(ResignBody { revision })),
        Err(Outcome::NotCandidate) => Err(not_a_candidate(&name, session)),
        Err(_) => Err(unexpected(&response)),
    }
}

/// `POST /v1/elections/{name}/proclaim`: the leader's new value, same token.
pub async fn proclaim(
    State(st): State<AppState>,
    Extension(caller): Extension<Caller>,
    name: Result<Path<String>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<ProclaimBody>, ApiError> {
    let name = name_from(name)?;
    let (session, value) = proclaim_request(&name, &body_bytes(body)?)?;
    require_owner(&st, &caller, &[session], Use::Proclaim).await?;
    let place = read(&st, Consistency::Linearizable, |s| Place::read(s, &name, session)).await?;
    let leading = match place {
        Some(s) if s.ahead == 0 => s.own.create_revision,
        Some(s) => return Err(not_leading(&name, session, Some(s.ahead))),
        None => return Err(not_leading(&name, session, None)),
    };
    let command =
        tenure_kv::proclaim(&name, session, leading, &value).map_err(|e| refused(&name, &e))?;
    let response = propose(&st, &command).await?.0;
    match proclaim_outcome(&response) {
        Ok(revision) => Ok(Json(ProclaimBody { revision, token: leading })),
        Err(Outcome::NotCandidate) => Err(not_leading(&name, session, None)),
        Err(_) => Err(unexpected(&response)),
    }
}

/// `GET /v1/elections/{name}`: the leader and every candidate.
pub async fn get(
    State(st): State<AppState>,
    name: Result<Path<String>, PathRejection>,
) -> Result<Json<ElectionBody>, ApiError> {
    let name = name_from(name)?;
    let (standing, revision) =
        read(&st, Consistency::Linearizable, |s| (Standing::read(s, &name), s.revision())).await?;
    Ok(Json(ElectionBody {
        leader: standing.leader().map(leader_body),
        candidates: standing
            .candidates
            .iter()
            .map(|c| ElectionCandidateBody {
                session: c.session.0,
                value: text(&c.value),
                create_revision: c.create_revision,
            })
            .collect(),
        name,
        revision,
    }))
}

/// `GET /v1/elections[?limit=N][&after=NAME]`: the elections with a
/// candidate, by name, after NAME: a page of at most N and
/// [`MAX_LIST_BYTES`] of JSON, with `more: true` when some are left
/// (continue with `after=` the last name).
pub async fn list(
    State(st): State<AppState>,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Result<axum::response::Response, ApiError> {
    let q = query_from(query, "limit=N, after=NAME, consistency=stale")?;
    let limit = match q.limit {
        None => DEFAULT_ELECTION_LIST,
        Some(n @ 1..=MAX_ELECTIONS) => n,
        Some(n) => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                format!("limit={n}: give 1 to {MAX_ELECTIONS} (default {DEFAULT_ELECTION_LIST})"),
            ))
        }
    };
    let permit = st.lists.permit().await?;
    let after = q.after;
    let body = read(&st, q.consistency, |s: &Store| {
        let mut names = match &after {
            Some(after) => Names::after(s, after),
            None => Names::new(s),
        };
        let mut elections = Vec::new();
        let mut bytes = 0;
        let mut more = false;
        for name in names.by_ref() {
            let (leader, candidates) = summary(s, &name);
            // The name and the leader's value as JSON strings, and the rest.
            let value = leader.as_ref().map_or(0, |c| json_str_len(&c.value));
            let size = json_str_len(name.as_bytes()) + value + 160;
            if elections.len() == limit || (!elections.is_empty() && bytes + size > MAX_LIST_BYTES)
            {
                more = true;
                break;
            }
            bytes += size;
            elections.push(ElectionSummaryBody {
                leader: leader.as_ref().map(leader_body),
                name,
                candidates,
            });
        }
        ElectionListBody { elections, more, revision: s.revision() }
    })
    .await?;
    Ok(json_answer(permit, move || body).await)
}

/// `GET /v1/elections/{name}/check?token=T`: whether T is the leader's token now.
pub async fn check(
    State(st): State<AppState>,
    name: Result<Path<String>, PathRejection>,
    query: Result<Query<CheckQuery>, QueryRejection>,
) -> Result<Json<TokenCheckBody>, ApiError> {
    let name = name_from(name)?;
    let q = query_from(query, "token=T")?;
    let (leader, revision) =
        read(&st, Consistency::Linearizable, |s| (summary(s, &name).0, s.revision())).await?;
    let token = leader.map(|l| l.create_revision);
    Ok(Json(TokenCheckBody { current: token == Some(q.token), token, revision }))
}

/// `GET /v1/elections/{name}/wait?session=L[&timeout_ms=N]`: returns as soon
/// as the candidacy leads, or at the timeout; 404 once it is gone.
pub async fn wait(
    State(st): State<AppState>,
    Extension(caller): Extension<Caller>,
    name: Result<Path<String>, PathRejection>,
    query: Result<Query<WaitQuery>, QueryRejection>,
) -> Result<Json<CandidacyBody>, ApiError> {
    let name = name_from(name)?;
    let q = query_from(query, "session=L and timeout_ms=N")?;
    let session = session_from(q.session)?;
    let timeout = match q.timeout_ms.map(Duration::from_millis) {
        None => DEFAULT_WAIT,
        Some(t) if t <= MAX_WAIT => t,
        Some(t) => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                format!(
                    "timeout_ms={}: give at most {} (default {})",
                    t.as_millis(),
                    MAX_WAIT.as_millis(),
                    DEFAULT_WAIT.as_millis()
                ),
            ))
        }
    };
    let deadline = tokio::time::Instant::now() + timeout;
    let _slot = stream_slot(&st.waiters, &st.rejections, &caller)?;
    let _counted = st.metrics.election_waiter();
    // At least as fresh as the call; then this node's state, which only moves on.
    st.kv.read_index().await.map_err(|e| read_error(&e))?;
    match until_leading(&st.elections, &st.kv, st.stopping.clone(), &name, session, deadline).await
    {
        WaitEnd::Standing(place) => {
            if place.ahead == 0 {
                st.metrics.election_wait_won();
            }
            Ok(Json(candidacy(&name, &place)))
        }
        WaitEnd::Gone => Err(not_a_candidate(&name, session)),
        WaitEnd::Stopping => Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "the server is stopping; wait again on another node",
        )
        .retry_after(1)),
    }
}

/// The answer of a campaign or a wait.
fn candidacy(name: &str, place: &Place) -> CandidacyBody {
    let leader = place.ahead == 0;
    CandidacyBody {
        name: name.to_string(),
        session: place.own.session.0,
        create_revision: place.own.create_revision,
        leader,
        token: leader.then_some(place.own.create_revision),
        ahead: place.ahead,
    }
}

fn leader_body(c: &Candidate) -> ElectionLeaderBody {
    ElectionLeaderBody { session: c.session.0, value: text(&c.value), token: c.create_revision }
}

/// A value as text (the API writes only strings, so this is exact).
pub(super) fn text(value: &[u8]) -> String {
    String::from_utf8_lossy(value).into_owned()
}

/// The election name of the path, checked: 400 if malformed.
pub(super) fn name_from(name: Result<Path<String>, PathRejection>) -> Result<String, ApiError> {
    let Path(name) = name.map_err(|r| ApiError::new(StatusCode::BAD_REQUEST, r.body_text()))?;
    validate_name(&name).map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e.to_string()))?;
    Ok(name)
}

fn session_from(id: u64) -> Result<LeaseId, ApiError> {
    match id {
        0 => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "session 0 is not a session id: ids are positive integers, from POST /v1/sessions",
        )),
        n => Ok(LeaseId(n)),
    }
}

/// The body's bytes, or 413 if too large.
fn body_bytes(body: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    body.map_err(|r| super::store::body_error(r, MAX_ELECTION_BODY_BYTES, "body"))
}

/// A campaign body for the election `name`, as `POST .../campaign` reads
/// it: the session and the command to propose; 400 for a body that is not
/// `{"session": L, "value": "v"}`, a session 0, a bad name or a value over
/// [`tenure_kv::MAX_VALUE`] (nothing is written). Public for the fuzz
/// target.
#[doc(hidden)]
pub fn campaign_command(name: &str, body: &[u8]) -> Result<(LeaseId, Command), ApiError> {
    let request: CampaignRequest = json_body(body, CAMPAIGN_SHAPE)?;
    let session = session_from(request.session)?;
    let value = request.value.into_bytes();
    let command = tenure_kv::campaign(name, session, &value).map_err(|e| refused(name, &e))?;
    Ok((session, command))
}

/// A resignation body for the election `name`, as `POST .../resign` reads
/// it: the session and the command to propose (guarded by the candidacy's
/// token when the body gives one); 400 for a body that is not
/// `{"session": L}` or `{"session": L, "token": T}`, a session 0 or a bad
/// name. Public for the fuzz target.
#[doc(hidden)]
pub fn resign_command(name: &str, body: &[u8]) -> Result<(LeaseId, Command), ApiError> {
    validate_name(name).map_err(|e| refused(name, &e))?;
    let request: ResignRequest = json_body(body, RESIGN_SHAPE)?;
    let session = session_from(request.session)?;
    Ok((session, tenure_kv::resign(name, session, request.token)))
}

/// A proclaim body for the election `name`, as `POST .../proclaim` reads
/// it: the session and the new value (the command needs the leader's token,
/// read next); 400 for a body that is not `{"session": L, "value": "v"}`, a
/// session 0, a bad name or a value over [`tenure_kv::MAX_VALUE`]. Public
/// for the fuzz target.
#[doc(hidden)]
pub fn proclaim_request(name: &str, body: &[u8]) -> Result<(LeaseId, Vec<u8>), ApiError> {
    validate_name(name).map_err(|e| refused(name, &e))?;
    let request: ProclaimRequest = json_body(body, PROCLAIM_SHAPE)?;
    let session = session_from(request.session)?;
    let value = request.value.into_bytes();
    validate_value(&value).map_err(|e| refused(name, &e))?;
    Ok((session, value))
}

/// 400 for bad input, 429 for a cap that others leaving may lift; nothing
/// written.
fn refused(name: &str, e: &ElectionError) -> ApiError {
    let status = match e {
        ElectionError::TooManyCandidates
        | ElectionError::TooManyElections
        | ElectionError::TooManyOwnerCandidacies(_) => StatusCode::TOO_MANY_REQUESTS,
        ElectionError::NameLength(_)
        | ElectionError::NameCharacter(_)
        | ElectionError::ValueTooLarge(_) => StatusCode::BAD_REQUEST,
    };
    ApiError::new(status, format!("{e} (election {name:?}); nothing was written"))
}

fn not_a_candidate(name: &str, session: LeaseId) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        format!(
            "session {session} is not a candidate of {name:?} (it resigned, its session ended, \
             or it never campaigned)"
        ),
    )
}

fn not_leading(name: &str, session: LeaseId, ahead: Option<usize>) -> ApiError {
    let why = match ahead {
        Some(n) => format!("{n} candidates are ahead of it"),
        None => "it is not a candidate".to_string(),
    };
    ApiError::new(
        StatusCode::CONFLICT,
        format!("session {session} does not lead {name:?} ({why}); nothing was written"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use tenure_kv::MAX_NAME_BYTES;

    #[test]
    fn names_and_sessions_are_checked_with_clear_answers() {
        let path = |s: &str| Ok(Path(s.to_string()));
        assert_eq!(name_from(path("db")).unwrap(), "db");
        for bad in ["", "a/b", "a b", &"x".repeat(MAX_NAME_BYTES + 1)] {
            let e = name_from(path(bad)).unwrap_err();
            assert_eq!(e.status(), StatusCode::BAD_REQUEST, "{bad:?}");
            assert!(e.body().error.contains("name"), "{}", e.body().error);
        }
        assert_eq!(session_from(0).unwrap_err().status(), StatusCode::BAD_REQUEST);
        let cap = refused("db", &ElectionError::TooManyCandidates);
        assert_eq!(cap.status(), StatusCode::TOO_MANY_REQUESTS);
        assert!(
            cap.body().error.contains("1000 candidates") && cap.body().error.contains("\"db\"")
        );
        let names = refused("new", &ElectionError::TooManyElections);
        assert_eq!(names.status(), StatusCode::TOO_MANY_REQUESTS);
        let big = refused("db", &ElectionError::ValueTooLarge(5000));
        assert_eq!(big.status(), StatusCode::BAD_REQUEST);
        assert!(
            big.body().error.contains("at most 4096")
                && big.body().error.contains("nothing was written")
        );
    }
}
