//! `/v1/members`: the configuration of members this node's replicated log
//! holds (`GET`, role read), and changes of it (role admin), one at a time
//! through the log (`docs/MEMBERSHIP.md`):
//!
//! * `POST /v1/members {"id", "address", "directory", "promote", "probe"}`
//!   adds a learner (with `"probe": true`, only once the leader reached it
//!   at its address); the leader promotes it once it has caught up
//!   (`"promote": "auto"`, the default) or waits for
//! * `POST /v1/members/{id}/promote`, which makes a learner a voter;
//! * `DELETE /v1/members/{id}` removes a voter or a learner.
//!
//! A change is answered once its entry has committed, with the new
//! configuration. Only the ready leader takes one; every refusal changes
//! nothing:
//!
//! | refusal | status |
//! |---|---|
//! | asked of a follower | 409, `"leader"` and `"leader_http_address"` (send it there) |
//! | no leader known, or the leader has not committed an entry of its term yet | 503 + `Retry-After` |
//! | another change in progress, a duplicate id, address or directory, a node asked with `"probe": true` that the leader cannot reach at its address (reason `unreachable`), promoting a voter or a learner that has not caught up, removing the last voter, too many members, too few healthy voters after it | 409 |
//! | a member that does not exist | 404 |
//! | a malformed body, id 0 or above 65535, an address that is not HOST:PORT, a directory that is not 32 hex digits | 400 |
//! | the entry was written but leadership was lost before it committed (or it did not commit within [`CHANGE_TIMEOUT`]) | 504, `"outcome": "unknown"`: look at the members before retrying |
//!
//! Every refusal of a change carries `"reason"`, a word a program can match
//! ([`tenure_api::ErrorBody::reason`]).

use super::error::ApiError;
use super::state::AppState;
use super::status::{add_http_addresses, status_body};
use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use std::time::Duration;
use tenure_api::{
    ConfigPositionBody, MemberAddRequest, MemberBody, MembersBody, MembershipBody, PromoteMode,
    StatusBody,
};
use tenure_core::{DirectoryId, NodeId, MAX_NODE_ID};
use tenure_node::ChangeFailure;
use tenure_replica::{Change, ChangeError, Member, Membership};

/// The longest the leader tries to reach a node asked to be added with
/// `"probe": true` (name resolution, TCP, TLS and the peer handshake).
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a change may take to commit before it is answered as unknown
/// (504): a healthy cluster commits one in a few milliseconds.
pub const CHANGE_TIMEOUT: Duration = Duration::from_secs(10);

/// `GET /v1/members`: the configuration this node's log holds now.
pub async fn get(State(st): State<AppState>) -> Json<MembersBody> {
    let (membership, _) = st.kv.membership();
    let commit = st.kv.status().commit;
    Json(members_body(&st, &membership, membership.at.index <= commit))
}

/// `POST /v1/members`: adds the node of the body as a learner.
pub async fn add(
    State(st): State<AppState>,
    body: Result<Json<MemberAddRequest>, JsonRejection>,
) -> Result<Json<MembersBody>, ApiError> {
    let (member, probe) = member_to_add(body)?;
    if probe && st.kv.status().leading.is_some() {
        // Only the leader dials: anywhere else the change is refused anyway.
        reachable(&st, &member).await?;
    }
    change(&st, Change::AddLearner(member)).await
}

/// The 409 refusal (reason `unreachable`) unless node `member.id` answers
/// the peer handshake at `member.address`, within [`PROBE_TIMEOUT`].
async fn reachable(st: &AppState, member: &Member) -> Result<(), ApiError> {
    let probe = st.node.probe_peer(member.id, &member.address, member.directory);
    let why = match tokio::time::timeout(PROBE_TIMEOUT, probe).await {
        Ok(Ok(())) => return Ok(()),
        Ok(Err(why)) => why,
        Err(_) => format!("no answer within {} s", PROBE_TIMEOUT.as_secs()),
    };
    let mut e = ApiError::new(
        StatusCode::CONFLICT,
        format!(
            "the leader (node {}) cannot reach node {} at {}, the peer address to add it with: \
             {why}. Nothing changed. That address (the node's --advertise-peer, or its \
             --listen) must be one the members can dial, and node {} must listen there",
            st.node.id(),
            member.id,
            member.address,
            member.id
        ),
    );
    e.body.reason = Some("unreachable".into());
    Err(e)
}

/// `POST /v1/members/{id}/promote`: makes the learner of the path a voter.
pub async fn promote(
    State(st): State<AppState>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Json<MembersBody>, ApiError> {
    change(&st, Change::Promote(member_id(id)?)).await
}

/// `DELETE /v1/members/{id}`: removes the member of the path.
pub async fn remove(
    State(st): State<AppState>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Json<MembersBody>, ApiError> {
    change(&st, Change::Remove(member_id(id)?)).await
}

/// The member a `POST /v1/members` body names and whether the leader is
/// asked to reach it first, or the 400 answer for a body that names none.
/// Pure.
pub fn member_to_add(
    body: Result<Json<MemberAddRequest>, JsonRejection>,
) -> Result<(Member, bool), ApiError> {
    let Json(req) = body.map_err(|r| {
        invalid(format!(
            "{}; expected a JSON body like {{\"id\": 4, \"address\": \"10.0.0.4:7001\", \
             \"directory\": \"<32 hex digits>\", \"promote\": \"auto\"}}",
            r.body_text()
        ))
    })?;
    let id = node_id(req.id)?;
    check_address(&req.address)?;
    let directory =
        req.directory.as_deref().map(|d| d.parse::<DirectoryId>()).transpose().map_err(|e| {
            invalid(format!("\"directory\": {e}; `directory` of the node's /v1/status"))
        })?;
    let member = Member {
        id,
        address: req.address,
        directory,
        auto_promote: req.promote == PromoteMode::Auto,
    };
    Ok((member, req.probe))
}

/// The node id of the path, or 400.
fn member_id(id: Result<Path<String>, PathRejection>) -> Result<NodeId, ApiError> {
    let Path(text) = id.map_err(|r| invalid(r.body_text()))?;
    match text.parse::<u64>() {
        Ok(n) => node_id(n),
        Err(_) => {
            let shown: String = text.chars().take(40).collect();
            Err(invalid(format!("{shown:?} is not a node id: node ids are 1 to {MAX_NODE_ID}")))
        }
    }
}

/// `n` as a node id, or 400.
fn node_id(n: u64) -> Result<NodeId, ApiError> {
    if n == 0 || n > MAX_NODE_ID {
        return Err(invalid(format!(
            "node id {n} is not allowed: node ids are 1 to {MAX_NODE_ID}"
        )));
    }
    Ok(NodeId(n))
}

/// 400 unless `address` is HOST:PORT that the other members can dial
/// ([`tenure_replica::address_problem`]).
fn check_address(address: &str) -> Result<(), ApiError> {
    match tenure_replica::address_problem(address) {
        None => Ok(()),
        Some(why) => {
            let shown: String = address.chars().take(80).collect();
            Err(invalid(format!(
                "\"address\": {shown:?} {why}; write HOST:PORT, the node's peer address, for \
                 example 10.0.0.4:7001"
            )))
        }
    }
}

/// A 400 answer, reason `invalid`.
fn invalid(message: impl Into<String>) -> ApiError {
    let mut e = ApiError::new(StatusCode::BAD_REQUEST, message);
    e.body.reason = Some("invalid".into());
    e
}

/// Asks the log for `change` and answers with the configuration once it
/// committed, or with the refusal.
async fn change(st: &AppState, change: Change) -> Result<Json<MembersBody>, ApiError> {
    match tokio::time::timeout(CHANGE_TIMEOUT, st.kv.change_members(change.clone())).await {
        Ok(Ok(membership)) => {
            tracing::info!(node = %st.node.id(), %change, members = %membership.members,
                "a change of members committed");
            Ok(Json(members_body(st, &membership, true)))
        }
        Ok(Err(e)) => Err(change_error(st, &change, e)),
        Err(_) => Err(unknown(format!(
            "the change ({change}) was not committed within {} s: its outcome is unknown; \
             look at the members (GET /v1/members) before retrying",
            CHANGE_TIMEOUT.as_secs()
        ))),
    }
}

/// 504, outcome unknown.
fn unknown(message: String) -> ApiError {
    let mut e = ApiError::new(StatusCode::GATEWAY_TIMEOUT, message);
    e.body.outcome = Some("unknown".into());
    e.body.reason = Some("unknown".into());
    e
}

/// The answer to a change the log did not make (or may not have).
fn change_error(st: &AppState, change: &Change, e: ChangeFailure) -> ApiError {
    let refused = match e {
        ChangeFailure::Refused(r) => r,
        ChangeFailure::Unknown => return unknown(format!("{change}: {}", ChangeFailure::Unknown)),
        ChangeFailure::Failed(why) => {
            return ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "{change}: the log failed ({why}); look at the members (GET /v1/members) \
                     before retrying"
                ),
            )
            .retry_after(1)
        }
        ChangeFailure::Stopped => {
            return ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "this node is stopping; nothing changed: ask another node",
            )
            .retry_after(1)
        }
    };
    if let ChangeError::NotLeader { leader } = refused {
        return not_leader(st, leader);
    }
    let (status, reason) = match &refused {
        ChangeError::ZeroId => (StatusCode::BAD_REQUEST, "invalid"),
        ChangeError::NotMember(_) => (StatusCode::NOT_FOUND, "not_member"),
        ChangeError::Pending(_) => (StatusCode::CONFLICT, "in_progress"),
        ChangeError::DuplicateId(_) => (StatusCode::CONFLICT, "duplicate_id"),
        ChangeError::DuplicateAddress(..) => (StatusCode::CONFLICT, "duplicate_address"),
        ChangeError::DuplicateDirectory(..) => (StatusCode::CONFLICT, "duplicate_directory"),
        ChangeError::AlreadyVoter(_) => (StatusCode::CONFLICT, "already_voter"),
        ChangeError::LastVoter(_) => (StatusCode::CONFLICT, "last_voter"),
        ChangeError::TooMany(_) | ChangeError::TooManyVoters(_) => {
            (StatusCode::CONFLICT, "too_many")
        }
        ChangeError::Unhealthy { .. } => (StatusCode::CONFLICT, "unhealthy"),
        ChangeError::Behind(_) => (StatusCode::CONFLICT, "behind"),
        ChangeError::NotLeader { .. } => (StatusCode::CONFLICT, "not_leader"),
    };
    let mut e = ApiError::new(status, format!("{refused}; nothing changed"));
    e.body.reason = Some(reason.into());
    e
}

/// The refusal of a change asked of a node that is not the ready leader:
/// 409 naming the leader (and where its API answers) when another node
/// leads, 503 while none is known or this node has not committed an entry
/// of its leadership yet.
fn not_leader(st: &AppState, leader: Option<NodeId>) -> ApiError {
    let me = st.node.id();
    let mut e = match leader {
        Some(l) if l != me => {
            let status = node_view(st);
            let http = status.leader_http_address.filter(|_| status.leader == Some(l.0));
            let at = http.as_deref().map(|a| format!(" (its API: {a})")).unwrap_or_default();
            let mut e = ApiError::new(
                StatusCode::CONFLICT,
                format!(
                    "this node is not the leader: the leader is node {l}{at}; send the change \
                     there. Nothing changed"
                ),
            );
            e.body.leader = Some(l.0);
            e.body.leader_http_address = http;
            e
        }
        Some(_) => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "this node leads, but has not committed an entry of its leadership yet (a change \
             must wait for that); nothing changed, retry",
        )
        .retry_after(1),
        None => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "no leader is known right now (an election is under way, or a majority is \
             unreachable); nothing changed, retry",
        )
        .retry_after(1),
    };
    e.body.reason = Some("not_leader".into());
    e
}

/// This node's status with the HTTP addresses it knows.
fn node_view(st: &AppState) -> StatusBody {
    let mut body = status_body(&st.node.status());
    add_http_addresses(&mut body, &st.cluster);
    body
}

/// The wire form of `membership`, as this node sees it: its members with
/// their peer and HTTP addresses, and, on the leader, how far each holds
/// the log.
pub(crate) fn members_body(st: &AppState, membership: &Membership, committed: bool) -> MembersBody {
    let view = node_view(st);
    let log = st.kv.status();
    let leads = log.leading.is_some();
    let me = st.node.id();
    let member = |m: &Member| {
        let matched = if !leads {
            None
        } else if m.id == me {
            Some(log.last.index)
        } else {
            log.followers.iter().find(|(id, _)| *id == m.id).map(|(_, i)| *i)
        };
        let http_address = if m.id == me {
            view.http_address.clone()
        } else {
            view.peers.iter().find(|p| p.id == m.id.0).and_then(|p| p.http_address.clone())
        };
        MemberBody {
            id: m.id.0,
            address: match m.address.is_empty() {
                true => st.cluster.peer_address(m.id).unwrap_or_default(),
                false => m.address.clone(),
            },
            directory: m.directory.map(|d| d.to_string()),
            auto_promote: m.auto_promote,
            http_address,
            match_index: matched,
            lag_entries: matched.map(|i| log.commit.saturating_sub(i)),
        }
    };
    MembersBody {
        served_by: view.id,
        leader: view.leader,
        leader_http_address: view.leader_http_address.clone(),
        config: position(membership),
        committed,
        commit_index: log.commit,
        voters: membership.members.voters.iter().map(member).collect(),
        learners: membership.members.learners.iter().map(member).collect(),
    }
}

/// The peer address of member `id`: its entry's in the log's
/// configuration, else this node's own configuration's (`--peers`).
pub(crate) fn peer_address(st: &AppState, id: NodeId) -> Option<String> {
    let (membership, _) = st.kv.membership();
    let listed = membership.members.get(id).map(|m| m.address.clone()).filter(|a| !a.is_empty());
    listed.or_else(|| st.cluster.peer_address(id))
}

/// The configuration in `/v1/status`: voters, learners, position.
pub(crate) fn membership_body(membership: &Membership, commit: u64) -> MembershipBody {
    MembershipBody {
        config: position(membership),
        committed: membership.at.index <= commit,
        voters: membership.members.voters.iter().map(|m| m.id.0).collect(),
        learners: membership.members.learners.iter().map(|m| m.id.0).collect(),
    }
}

fn position(membership: &Membership) -> ConfigPositionBody {
    ConfigPositionBody { index: membership.at.index, token: membership.at.token.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(json: &str) -> Result<Json<MemberAddRequest>, JsonRejection> {
        Json::from_bytes(json.as_bytes())
    }

    #[test]
    fn a_member_to_add_is_checked_and_nothing_wrong_passes() {
        let m = member_to_add(body(
            r#"{"id": 4, "address": "10.0.0.4:7001", "directory": "0123456789abcdef0011223344556677"}"#,
        ))
        .unwrap()
        .0;
        assert_eq!(m.id, NodeId(4));
        assert_eq!(m.address, "10.0.0.4:7001");
        assert_eq!(m.directory, Some(DirectoryId(0x0123_4567_89ab_cdef_0011_2233_4455_6677)));
        assert!(m.auto_promote, "auto is the default");
        let (m, probe) =
            member_to_add(body(r#"{"id": 5, "address": "db5.example:7001", "promote": "manual"}"#))
                .unwrap();
        assert!(!m.auto_promote && m.directory.is_none() && !probe);
        let (_, probe) =
            member_to_add(body(r#"{"id": 5, "address": "h:7001", "probe": true}"#)).unwrap();
        assert!(probe);
        assert!(member_to_add(body(r#"{"id": 6, "address": "[::1]:7001"}"#)).is_ok());
        for (json, says) in [
            (r#"{"id": 0, "address": "10.0.0.4:7001"}"#, "1 to 65535"),
            (r#"{"id": 65536, "address": "10.0.0.4:7001"}"#, "1 to 65535"),
            (r#"{"id": 4, "address": "10.0.0.4"}"#, "port"),
            (r#"{"id": 4, "address": "10.0.0.4:0"}"#, "port"),
            (r#"{"id": 4, "address": ":7001"}"#, "no host"),
            (r#"{"id": 4, "address": "::1:7001"}"#, "brackets"),
            (r#"{"id": 4, "address": "0.0.0.0:7001"}"#, "unspecified"),
            (r#"{"id": 4, "address": "https://h:7001"}"#, "scheme"),
            (r#"{"id": 4, "address": "a b:7001"}"#, "spaces"),
            (r#"{"id": 4, "address": "h:1", "directory": "xyz"}"#, "32 hex digits"),
            (r#"{"id": 4, "address": "h:1", "promote": "later"}"#, "unknown variant"),
            (r#"{"id": 4, "address": "h:1", "role": "voter"}"#, "unknown field"),
            (r#"{"id": 4, "address": "h:1", "probe": "yes"}"#, "expected a boolean"),
            (r#"{"id": 4, "address": "h:1", "probe": 1}"#, "expected a boolean"),
            (r#"{"address": "h:1"}"#, "missing field `id`"),
            ("not json", "expected a JSON body like"),
        ] {
            let e = member_to_add(body(json)).unwrap_err();
            assert_eq!(e.status(), StatusCode::BAD_REQUEST, "{json}: {e:?}");
            assert!(e.body().error.contains(says), "{json}: {}", e.body().error);
            assert_eq!(e.body().reason.as_deref(), Some("invalid"));
        }
    }

    #[test]
    fn a_path_id_is_a_node_id() {
        let path = |s: &str| Ok(Path(s.to_string()));
        assert_eq!(member_id(path("7")).unwrap(), NodeId(7));
        for bad in ["0", "x", "-1", "70000"] {
            let e = member_id(path(bad)).unwrap_err();
            assert_eq!(e.status(), StatusCode::BAD_REQUEST, "{bad}");
            assert!(e.body().error.contains("1 to 65535"), "{}", e.body().error);
        }
    }
}
