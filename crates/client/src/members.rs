//! The members of a cluster through its HTTP API (`/v1/members`,
//! `docs/MEMBERSHIP.md`): the configuration as the leader holds it, and
//! changes of it sent to the leader.
//!
//! Only the ready leader takes a change; another node answers 409 with the
//! leader's id and, when it knows it, its API address
//! ([`tenure_api::ErrorBody::leader_http_address`]). [`change`] asks the
//! endpoints in turn and follows that answer to the leader (at most
//! [`MAX_LEADER_HOPS`] times). Any other refusal comes back as a
//! [`Refused`] error whose body says why ([`refusal`]): nothing changed. A
//! 504 with `"outcome": "unknown"` means the change may or may not commit:
//! look at the members before asking again.

use crate::cluster::Cluster;
use crate::error::{Error, Refused};
use crate::http::{normalize_endpoint, RawAnswer};
use hyper::{Method, StatusCode};
use std::fmt;
use std::time::Duration;
use tenure_api::{ErrorBody, MemberAddRequest, MembersBody};
use tenure_elect::Retry;

/// How long a change may take to be answered: the server answers within
/// its own bound (10 s, `tenure_server::http::CHANGE_TIMEOUT`), with room.
pub const CHANGE_REQUEST_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a read of the members may take.
pub const LIST_TIMEOUT: Duration = Duration::from_secs(2);
/// Most "not the leader" answers a change follows to the leader they name.
pub const MAX_LEADER_HOPS: usize = 3;

/// One change of the members.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemberChange {
    /// `POST /v1/members`: a new learner.
    Add(MemberAddRequest),
    /// `POST /v1/members/{id}/promote`: a learner becomes a voter.
    Promote(u64),
    /// `DELETE /v1/members/{id}`: a member leaves.
    Remove(u64),
}

impl MemberChange {
    /// The request that asks for it: method, path and JSON body.
    pub fn request(&self) -> (Method, String, Option<serde_json::Value>) {
        match self {
            MemberChange::Add(req) => {
                let body = serde_json::to_value(req).expect("a request body is JSON");
                (Method::POST, "/v1/members".to_string(), Some(body))
            }
            MemberChange::Promote(id) => (Method::POST, format!("/v1/members/{id}/promote"), None),
            MemberChange::Remove(id) => (Method::DELETE, format!("/v1/members/{id}"), None),
        }
    }
}

impl fmt::Display for MemberChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MemberChange::Add(req) => {
                write!(f, "add node {} ({}) as a learner", req.id, req.address)
            }
            MemberChange::Promote(id) => write!(f, "promote node {id}"),
            MemberChange::Remove(id) => write!(f, "remove node {id}"),
        }
    }
}

/// The error body of a refused answer, if `e` is one: its status and what
/// the server said (`reason` tells the refusals of a change apart).
pub fn refusal(e: &Error) -> Option<(StatusCode, ErrorBody)> {
    match e {
        Error::Refused(r) => Some((r.status, error_body(r))),
        _ => None,
    }
}

fn error_body(r: &Refused) -> ErrorBody {
    serde_json::from_slice(&r.body)
        .unwrap_or_else(|_| ErrorBody { error: r.message.clone(), ..ErrorBody::default() })
}

/// The configuration of members, from the first endpoint that answers; if
/// that node does not lead and knows where the leader's API answers, as the
/// leader holds it (with each member's lag), else as that node holds it.
pub async fn members(cluster: &Cluster) -> Result<MembersBody, Error> {
    let (url, answer) =
        cluster.call(Method::GET, "/v1/members", None, LIST_TIMEOUT, Retry::Idempotent).await?;
    let first: MembersBody = answer.json(&url)?;
    if first.leader == Some(first.served_by) {
        return Ok(first);
    }
    let Some(leader) = first.leader_http_address.as_deref() else { return Ok(first) };
    let Ok(endpoint) = normalize_endpoint(leader, cluster.client().https()) else {
        return Ok(first);
    };
    let url = format!("{endpoint}/v1/members");
    match cluster.client().json::<MembersBody>(Method::GET, &url, None, LIST_TIMEOUT).await {
        Ok(m) if m.leader == Some(m.served_by) => Ok(m),
        Ok(_) => Ok(first),
        // Auth refusals say something about the token: every node has the same.
        Err(e @ Error::AuthRefused(_)) => Err(e),
        Err(e) => {
            tracing::debug!(%url, error = %e, "the leader did not answer; its follower's view");
            Ok(first)
        }
    }
}

/// Asks the leader for `change`: the endpoints in turn, then the leader a
/// "not the leader" answer names. Returns the configuration once the change
/// committed; a refusal is a [`Refused`] error ([`refusal`] reads it).
pub async fn change(cluster: &Cluster, change: &MemberChange) -> Result<MembersBody, Error> {
    let (method, path, body) = change.request();
    let (mut url, mut answer) = cluster
        .call(method.clone(), &path, body.as_ref(), CHANGE_REQUEST_TIMEOUT, Retry::Once)
        .await?;
    for _ in 0..MAX_LEADER_HOPS {
        let Some(leader) = leader_named(&answer) else { break };
        let endpoint = normalize_endpoint(&leader, cluster.client().https())?;
        tracing::debug!(%url, leader = %endpoint, "not the leader; asking the leader");
        url = format!("{endpoint}{path}");
        let bytes = body.as_ref().map(|b| ("application/json", b.to_string().into_bytes()));
        answer = cluster.client().send(method.clone(), &url, bytes, CHANGE_REQUEST_TIMEOUT).await?;
    }
    answer.json(&url)
}

/// The leader's API address a "not the leader" answer names, if any.
fn leader_named(answer: &RawAnswer) -> Option<String> {
    if answer.status != StatusCode::CONFLICT {
        return None;
    }
    let body: ErrorBody = serde_json::from_slice(&answer.body).ok()?;
    (body.reason.as_deref() == Some("not_leader")).then_some(body.leader_http_address?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::body::Bytes;
    use tenure_api::PromoteMode;

    #[test]
    fn each_change_has_its_request() {
        let add = MemberChange::Add(MemberAddRequest {
            id: 4,
            address: "10.0.0.4:7001".into(),
            directory: None,
            promote: PromoteMode::Manual,
            probe: false,
        });
        let (method, path, body) = add.request();
        assert_eq!((method, path.as_str()), (Method::POST, "/v1/members"));
        assert_eq!(
            body.unwrap(),
            serde_json::json!({"id": 4, "address": "10.0.0.4:7001", "promote": "manual"})
        );
        assert_eq!(add.to_string(), "add node 4 (10.0.0.4:7001) as a learner");
        let (method, path, body) = MemberChange::Promote(4).request();
        assert_eq!((method, path.as_str(), body), (Method::POST, "/v1/members/4/promote", None));
        let (method, path, _) = MemberChange::Remove(2).request();
        assert_eq!((method, path.as_str()), (Method::DELETE, "/v1/members/2"));
    }

    #[test]
    fn only_a_not_leader_answer_with_an_address_is_followed() {
        let answer = |status: StatusCode, body: serde_json::Value| RawAnswer {
            status,
            retry_after: None,
            body: Bytes::from(body.to_string()),
        };
        let named = serde_json::json!({"error": "x", "leader": 1, "reason": "not_leader",
            "leader_http_address": "10.0.0.1:8001"});
        assert_eq!(
            leader_named(&answer(StatusCode::CONFLICT, named.clone())).as_deref(),
            Some("10.0.0.1:8001")
        );
        assert_eq!(leader_named(&answer(StatusCode::SERVICE_UNAVAILABLE, named)), None);
        let pending = serde_json::json!({"error": "x", "reason": "in_progress"});
        assert_eq!(leader_named(&answer(StatusCode::CONFLICT, pending)), None);
        let unknown_address =
            serde_json::json!({"error": "x", "leader": 1, "reason": "not_leader"});
        assert_eq!(leader_named(&answer(StatusCode::CONFLICT, unknown_address)), None);
    }
}
