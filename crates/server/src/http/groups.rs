//! Groups of partitions for applications (docs/API.md "Groups",
//! docs/PARTITIONS.md): `POST /v1/groups/{name}/join`, `leave` and
//! `release` are the member recipes of `tenure_partitions::recipe`, each
//! one guarded transaction through the log (nothing is ever half done), the
//! caller owning the session it names; `GET /v1/groups/{name}` reads the
//! group, with what the leader measured of it (`stats`, from the leader's
//! [`crate::groups::stats`]: a follower passes the request on to the
//! leader, with the caller's `Authorization`, and answers with the
//! leader's answer; when no leader answers, it answers from its own store
//! with `stats_error` saying why), and `GET /v1/groups/{name}/assignment`
//! is a member's long poll for what it owns. The leader's keeper grants and moves the partitions
//! (`tenure_partitions::keeper`); nothing here decides who owns what.
//!
//! A recipe reads the group (linearizably), builds its transaction and
//! proposes it; the transaction compares what it read, so a group that
//! changed in between (the keeper granting, a member joining) changes
//! nothing, and the recipe reads and tries again, at most
//! [`WRITE_ATTEMPTS`] times, then answers 409.

use super::auth::Caller;
use super::budget::{held_json, json_answer, json_str_len, MAX_LIST_BYTES};
use super::error::{json_body, ApiError};
use super::owner::{require_owner, Use};
use super::state::AppState;
use super::store::{
    propose, propose_together, query_from, read, read_error, unexpected, Consistency,
};
use super::watch::stream_slot;
use crate::elections::{DEFAULT_WAIT, MAX_WAIT};
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::{Extension, Json};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tenure_api::{
    AssignmentBody, GroupBody, GroupJoinRequest, GroupLeaveRequest, GroupListBody, GroupListEntry,
    GroupMemberBody, GroupMemberSpecBody, GroupOwnerBody, GroupReleaseRequest, GroupSpecBody,
    GroupWriteBody, OwnedPartitionBody,
};
use tenure_client::error::with_causes;
use tenure_kv::{
    Change, Command, KeyValue, LeaseId, Response, Store, MAX_KEYS_PER_LEASE, MAX_VALUE_BYTES,
};
use tenure_partitions::group::{
    group_prefix, member_key, spec_key, validate_group_name, Group, GroupError, GroupKeys,
    GroupSpec, MemberSpec, Ownership, StoredMember, DEFAULT_STABILISE_MS,
};
use tenure_partitions::recipe::{self, RecipeError, ReleaseRead};
use tenure_partitions::MemberId;
use tokio::time::Instant;

/// Largest body of a join: a member spec as large as the store keeps in a
/// value ([`MAX_VALUE_BYTES`]: preferred and excluded partitions by the
/// thousand), and room for the rest. Leaves and releases are a few bytes
/// (the server's [`super::MAX_BODY_BYTES`]).
pub const MAX_GROUP_BODY_BYTES: usize = MAX_VALUE_BYTES + 1024;

/// How many times a join, leave or release reads the group (linearizably,
/// after a first try from the node's own applied state) and proposes its
/// transaction when the group changed in between (the keeper granting
/// or moving partitions, another member joining) before it answers 409:
/// each try takes a read and a commit, milliseconds, and the keeper
/// proposes once per change, so a third failure in a row means a group
/// that changes faster than a member can write; the client tries again.
pub const WRITE_ATTEMPTS: usize = 3;

/// The longest an assignment long poll lasts (`timeout_ms`), as the
/// elections' `wait`.
pub const MAX_ASSIGNMENT_WAIT: Duration = MAX_WAIT;

/// How long an assignment long poll lasts without `timeout_ms`.
pub const DEFAULT_ASSIGNMENT_WAIT: Duration = DEFAULT_WAIT;

const JOIN_SHAPE: &str = r#"{"session": L, "partitions": N, "stabilise_ms": ms, "weight": w, "zone": "z", "ready": true, "preferred": [..], "excluded": [..]} (all but "session" optional)"#;
const LEAVE_SHAPE: &str = r#"{"session": L}"#;
const RELEASE_SHAPE: &str = r#"{"session": L, "partition": P, "epoch": E} or {"session": L, "partitions": [{"partition": P, "epoch": E}, ...]} (at most 63)"#;

// The API's limit is the recipe's: one transaction's comparisons.
const _: () = assert!(tenure_api::MAX_RELEASE_PARTITIONS == recipe::MAX_RELEASE_PARTITIONS);

/// How long a follower waits for the leader's answer to a group read it
/// passes on before it answers from its own store without the leader's
/// figures. With the wait for a list answer's permit (at most
/// [`super::budget::LIST_ANSWER_WAIT`], 1 s) it stays below the clients'
/// 2 s request timeout, so a slow leader costs a figure, not the read.
pub const LEADER_ANSWER_TIMEOUT: Duration = Duration::from_millis(500);

/// Most groups in one page of `GET /v1/groups` (and the default): counting
/// a group's members and owners walks all its keys (a key per member, up
/// to 10,000 owner keys).
pub const MAX_GROUPS_PER_PAGE: usize = 100;

/// The query of `GET /v1/groups`.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct GroupListQuery {
    /// Continue after this group's name (excluded).
    after: Option<String>,
    /// At most this many groups (1 to [`MAX_GROUPS_PER_PAGE`]).
    limit: Option<usize>,
    #[serde(default)]
    consistency: Consistency,
}

/// `GET /v1/groups[?after=NAME][&limit=N][&consistency=stale]`: the
/// groups in key order, each with its spec and how many members and owned
/// partitions it has; a page at a time.
pub async fn list(
    State(st): State<AppState>,
    query: Result<Query<GroupListQuery>, QueryRejection>,
) -> Result<Json<GroupListBody>, ApiError> {
    let q = query_from(query, "after=NAME, limit=N and consistency=stale")?;
    if let Some(after) = q.after.as_deref() {
        validate_group_name(after)
            .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, format!("after: {e}")))?;
    }
    let limit = match q.limit {
        None => MAX_GROUPS_PER_PAGE,
        Some(n @ 1..=MAX_GROUPS_PER_PAGE) => n,
        Some(n) => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                format!("limit={n}: give 1 to {MAX_GROUPS_PER_PAGE}"),
            ))
        }
    };
    let permit = st.lists.permit().await?;
    let body = read(&st, q.consistency, |s| {
        let mut names = Group::names_after(s, q.after.as_deref(), limit + 1);
        let more = names.len() > limit;
        names.truncate(limit);
        let groups = names.into_iter().map(|name| list_entry(s, name)).collect();
        GroupListBody { groups, more, revision: s.revision() }
    })
    .await?;
    drop(permit);
    Ok(Json(body))
}

/// One group as `GET /v1/groups` lists it: its keys counted, not parsed
/// (but the spec's).
fn list_entry(s: &Store, name: String) -> GroupListEntry {
    let spec = s
        .get(&spec_key(&name))
        .and_then(|kv| serde_json::from_slice::<GroupSpec>(&kv.value).ok())
        .map(|g| GroupSpecBody { partitions: g.partitions, stabilise_ms: g.stabilise_ms });
    let prefix = group_prefix(&name);
    let (mut members, mut owned) = (0, 0);
    for kv in s.keys_from(&prefix).take_while(|kv| kv.key.starts_with(&prefix)) {
        let rest = &kv.key[prefix.len()..];
        if rest.starts_with("members/") {
            members += 1;
        } else if rest.starts_with("owners/") {
            owned += 1;
        }
    }
    GroupListEntry { name, spec, members, owned }
}

/// The query of `GET /v1/groups/{name}`.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct GroupQuery {
    /// Continue the members after this id (16 hex digits, excluded).
    after: Option<String>,
    #[serde(default)]
    consistency: Consistency,
    /// Answer from this node, without asking the leader (the leader's
    /// figures only if this node measures them). A node passing a request
    /// on sets it, so that a request is passed on once at most.
    #[serde(default)]
    local: bool,
}

/// The query of `GET /v1/groups/{name}/assignment`.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct AssignmentQuery {
    session: u64,
    /// Answer once a key the answer is made of changed after this revision.
    after: Option<u64>,
    timeout_ms: Option<u64>,
}

/// `POST /v1/groups/{name}/join`: joins (creating the group), or updates
/// what the member says about itself.
pub async fn join(
    State(st): State<AppState>,
    Extension(caller): Extension<Caller>,
    name: Result<Path<String>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<GroupWriteBody>, ApiError> {
    let name = name_from(name)?;
    let body = body.map_err(|r| super::store::body_error(r, MAX_GROUP_BODY_BYTES, "body"))?;
    let request: GroupJoinRequest = json_body(&body, JOIN_SHAPE)?;
    let session = session_from(request.session)?;
    let (spec, member) = join_specs(&name, &request)?;
    require_owner(&st, &caller, &[session], Use::JoinGroup).await?;
    let revision = write(&st, &name, |s, _| {
        if let Some(ms) = request.stabilise_ms {
            other_stabilisation(s, &name, ms)?;
        }
        recipe::join(s, &name, spec.as_ref(), session.0, &member).map_err(|e| refused(&name, &e))
    })
    .await?;
    Ok(Json(GroupWriteBody { revision }))
}

/// `POST /v1/groups/{name}/leave`: the member and what it owns go at one
/// revision (it says it stopped its work on all of it), handed to the
/// members the keeper would grant them to when the store tells who they
/// are (`recipe::leave_with`), those beyond what one transaction holds in
/// transactions proposed right behind it; the last try is a plain leave,
/// and the keeper grants after it.
pub async fn leave(
    State(st): State<AppState>,
    Extension(caller): Extension<Caller>,
    name: Result<Path<String>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<GroupWriteBody>, ApiError> {
    let name = name_from(name)?;
    let body = body.map_err(|r| super::store::body_error(r, super::MAX_BODY_BYTES, "body"))?;
    let request: GroupLeaveRequest = json_body(&body, LEAVE_SHAPE)?;
    let session = session_from(request.session)?;
    require_owner(&st, &caller, &[session], Use::LeaveGroup).await?;
    let revision = write(&st, &name, |s, attempt| {
        // A handover compares keys the keeper may change meanwhile.
        recipe::leave_with(s, &name, session.0, !attempt.last).map_err(|e| refused(&name, &e))
    })
    .await?;
    Ok(Json(GroupWriteBody { revision }))
}

/// `POST /v1/groups/{name}/release`: the member gives up one partition,
/// named with the epoch of its grant, or several at one revision.
pub async fn release(
    State(st): State<AppState>,
    Extension(caller): Extension<Caller>,
    name: Result<Path<String>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<GroupWriteBody>, ApiError> {
    let name = name_from(name)?;
    let body = body.map_err(|r| super::store::body_error(r, super::MAX_BODY_BYTES, "body"))?;
    let request: GroupReleaseRequest = json_body(&body, RELEASE_SHAPE)?;
    let grants = request.grants().map_err(|e| {
        ApiError::new(StatusCode::BAD_REQUEST, format!("{e}; expected {RELEASE_SHAPE}"))
    })?;
    let session = session_from(request.session)?;
    require_owner(&st, &caller, &[session], Use::ReleasePartition).await?;
    let revision = write(&st, &name, |s, attempt| {
        // A store that may lag must show every grant held (one it has not
        // applied yet would be left out and never given back); the last
        // try is a plain release, which only a grant gone can void (a
        // handover compares keys the keeper may change meanwhile).
        let read = ReleaseRead { all_held: attempt.stale, hand_over: !attempt.last };
        recipe::release_with(s, &name, session.0, &grants, read).map_err(|e| match e {
            RecipeError::NotOwner { member, .. } if grants.len() > 1 => ApiError::new(
                StatusCode::CONFLICT,
                format!(
                    "session {member} owns none of the {} grants named in group {name:?} \
                     (released already, its session ended, or older grants' epochs); nothing \
                     was written",
                    grants.len()
                ),
            ),
            e => refused(&name, &e),
        })
    })
    .await?;
    Ok(Json(GroupWriteBody { revision }))
}

/// `GET /v1/groups/{name}[?after=ID][&consistency=stale][&local=true]`:
/// the spec, the members (a page of at most [`MAX_LIST_BYTES`] of JSON,
/// `more` when some are left: continue with `after=` the last id), every
/// owner, and what the leader measured (`stats`). A node that does not
/// measure as the leader passes the request on to the leader (unless
/// `local`) and answers with its answer; when none comes within
/// [`LEADER_ANSWER_TIMEOUT`] (or the leader answers 5xx), it answers
/// itself without `stats`, and `stats_error` says why.
pub async fn get(
    State(st): State<AppState>,
    headers: HeaderMap,
    name: Result<Path<String>, PathRejection>,
    query: Result<Query<GroupQuery>, QueryRejection>,
) -> Result<axum::response::Response, ApiError> {
    let name = name_from(name)?;
    let q = query_from(query, "after=ID (16 hex digits), consistency=stale and local=true")?;
    let after = q.after.as_deref().map(member_id_from).transpose()?;
    let watch = st.metrics.groups();
    // Taken before the leader is asked: its answer, as large as this
    // node's, is held and sent under the same budget.
    let permit = st.lists.permit().await?;
    let measuring = watch.leading().is_some_and(|t| *st.kv.ready_leader().borrow() == Some(t));
    let mut not_measured = None;
    if !measuring {
        let why = if q.local {
            "this node does not measure as the leader (local=true: not passed on)".to_string()
        } else {
            let authorization = headers.get(header::AUTHORIZATION).cloned();
            match from_leader(&st, authorization, &name, &q).await {
                Ok((status, body)) => return Ok(held_json(permit, status, body)),
                Err(why) => why,
            }
        };
        not_measured = Some(why);
    }
    let node = st.node.status().id.0;
    // Copied under the store's lock, which the log waits for; parsed after.
    let (keys, copied, revision) = read(&st, q.consistency, |s| {
        let keys = Arc::new(GroupKeys::copy(s, &name));
        (keys.clone(), watch.copy_reusing(s, &[keys]), s.revision())
    })
    .await?;
    if let Some(copied) = copied {
        watch.observe_copied(copied);
    }
    let mut body = group_body(&keys, after, revision)?;
    body.stats = watch.group_body(node, &name);
    if body.stats.is_none() {
        body.stats_error = Some(not_measured.unwrap_or_else(|| {
            format!("node {node} leads but has not measured group {name:?} yet")
        }));
    }
    Ok(json_answer(permit, move || body).await)
}

/// The leader's answer to `GET /v1/groups/{name}?...&local=true` (the
/// query rebuilt from what this node parsed), asked with the caller's
/// `authorization`: its status and body when it is a 200 or a 404 (no such
/// group); otherwise why there is none (no leader known or reached, a
/// refusal or a 5xx from it: this node then answers from its own store).
async fn from_leader(
    st: &AppState,
    authorization: Option<HeaderValue>,
    name: &str,
    q: &GroupQuery,
) -> Result<(StatusCode, Bytes), String> {
    let mut status = super::status::status_body(&st.node.status());
    super::status::add_http_addresses(&mut status, &st.cluster);
    let Some(leader) = status.leader else {
        return Err("no leader is known, and the leader measures".to_string());
    };
    if leader == status.id {
        return Err(format!("node {leader} leads but does not measure yet (it just began)"));
    }
    let Some(address) = status.leader_http_address else {
        return Err(format!(
            "the leader, node {leader}, has not told this node its HTTP address (see \
             --peer-http)"
        ));
    };
    let scheme = if st.cluster.client.https() { "https" } else { "http" };
    // Checked already: `after` is 16 hex digits, the name plain.
    let mut query = String::from("local=true");
    if let Some(after) = &q.after {
        query.push_str(&format!("&after={after}"));
    }
    if q.consistency == Consistency::Stale {
        query.push_str("&consistency=stale");
    }
    let url = format!("{scheme}://{address}/v1/groups/{name}?{query}");
    let client = st.cluster.client.with_authorization(authorization);
    match client.send(Method::GET, &url, None, LEADER_ANSWER_TIMEOUT).await {
        Ok(a) if a.status == StatusCode::OK || a.status == StatusCode::NOT_FOUND => {
            Ok((a.status, a.body))
        }
        Ok(a) => Err(format!("the leader, node {leader}, answered HTTP {}", a.status)),
        Err(e) => Err(format!(
            "the leader, node {leader}, did not answer at {address}, or refused the caller's \
             token: {}",
            with_causes(&e)
        )),
    }
}

/// `GET /v1/groups/{name}/assignment?session=L[&after=R][&timeout_ms=N]`:
/// the partitions the session owns. With `after`, a long poll: it answers
/// once a key its answer is made of (the spec, the keys on the session)
/// changed after revision R, or at the timeout with
/// the state then; without, at once. 404 when the group does not exist or
/// the session is not (or no longer) a member.
pub async fn assignment(
    State(st): State<AppState>,
    Extension(caller): Extension<Caller>,
    name: Result<Path<String>, PathRejection>,
    query: Result<Query<AssignmentQuery>, QueryRejection>,
) -> Result<Json<AssignmentBody>, ApiError> {
    let name = name_from(name)?;
    let q = query_from(query, "session=L, after=R and timeout_ms=N")?;
    let session = session_from(q.session)?.0;
    let timeout = wait_timeout(q.timeout_ms)?;
    let deadline = Instant::now() + timeout;
    // At least as fresh as the call; then this node's state, which only moves on.
    st.kv.read_index().await.map_err(|e| read_error(&e))?;
    let revision = st.kv.read_stale(|s| is_member(s, &name, session).map(|()| s.revision())).0?;
    if let Some(after) = q.after {
        if after > revision {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                format!(
                    "after={after} is beyond the store's revision {revision}: give the \
                     revision of an earlier answer (was the cluster restored from an older \
                     state?)"
                ),
            ));
        }
        wait_for_change(&st, &caller, &name, session, after, deadline).await?;
    }
    // Copied under the store's lock, which the log waits for; parsed after.
    let (keys, revision) =
        st.kv.read_stale(|s| (GroupKeys::copy_member_view(s, &name, session), s.revision())).0;
    assignment_body(&keys, session, revision).map(Json)
}

/// Returns once a key of group `name` that `session`'s assignment shows
/// changed after revision `after` (or the changes after it are no longer
/// kept), or at `deadline`. Wakes at every apply of this node and looks at
/// the changes applied since the last look; the poll holds a long poll's
/// slot while it sleeps.
async fn wait_for_change(
    st: &AppState,
    caller: &Caller,
    name: &str,
    session: MemberId,
    after: u64,
    deadline: Instant,
) -> Result<(), ApiError> {
    let seen = Seen { prefix: group_prefix(name), spec: spec_key(name), session };
    let mut applied = st.kv.applied();
    let mut stopping = st.stopping.clone();
    let mut slot = None;
    let mut from = after + 1;
    loop {
        // Seen before the look, so that an apply after it wakes the sleep.
        applied.borrow_and_update();
        let Some(through) = st.kv.read_stale(|s| unchanged_through(s, &seen, from)).0 else {
            return Ok(());
        };
        from = through + 1;
        if Instant::now() >= deadline {
            return Ok(());
        }
        if slot.is_none() {
            slot = Some(stream_slot(&st.waiters, &st.rejections, caller)?);
        }
        tokio::select! {
            changed = applied.changed() => if changed.is_err() { return Err(stopping_error()) },
            _ = tokio::time::sleep_until(deadline) => {}
            _ = stopping.wait_for(|s| *s) => return Err(stopping_error()),
        }
    }
}

/// The keys of a group that one member's assignment shows: the group's
/// spec, and the keys on the member's session (its member key and the
/// owner keys granted to it, also as they were before a change). A grant
/// to another member, a release asked of another, or another member's
/// coming and going does not wake the poll: at a join, each of the nine
/// releases would otherwise answer every member's poll. Nor does a
/// partition the member was asked to give back leaving its session (its
/// own release, or the handover in it): the member stopped that work when
/// it saw the request, and its next answer shows the key gone. At a join
/// that spares each of the nine releasers an answer and a new poll at the
/// moment its release commits, when the joiner's poll is answered.
struct Seen {
    prefix: String,
    spec: String,
    session: MemberId,
}

impl Seen {
    fn shows(&self, c: &Change) -> bool {
        if !c.kv.key.starts_with(&self.prefix) {
            return false;
        }
        if c.kv.key == self.spec {
            return true;
        }
        let on_session = |kv: &KeyValue| kv.lease == Some(LeaseId(self.session));
        // After a removal `kv` is the key as it was.
        let (before, after) =
            if c.kind.is_removal() { (Some(&c.kv), None) } else { (c.prev.as_ref(), Some(&c.kv)) };
        if after.is_some_and(on_session) {
            return true;
        }
        before.is_some_and(|b| on_session(b) && !self.asked_back(b))
    }

    /// Whether `kv` (a key of the group) is an owner key whose owner was
    /// asked to give it back.
    fn asked_back(&self, kv: &KeyValue) -> bool {
        kv.key[self.prefix.len()..].starts_with("owners/")
            && serde_json::from_slice::<Ownership>(&kv.value).is_ok_and(|o| o.release)
    }
}

/// `Some(revision)` when no key that `seen` shows changed from revision
/// `from` through the store's revision; `None` when one did, or when the
/// changes from `from` on are no longer all kept (the caller answers with
/// the state now).
fn unchanged_through(s: &Store, seen: &Seen, from: u64) -> Option<u64> {
    let changed = s.history_between(from, s.revision()).map(|mut c| c.any(|c| seen.shows(c)));
    (changed == Ok(false)).then(|| s.revision().max(from - 1))
}

fn stopping_error() -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "the server is stopping; poll again on another node",
    )
    .retry_after(1)
}

/// Reads the group and proposes `recipe`'s transaction, again while the
/// group changed in between, at most [`WRITE_ATTEMPTS`] times; the
/// revision of the change, or the refusal (nothing changed).
///
/// A recipe may return more commands, to propose right behind its own
/// (a leave's handovers that did not fit in it): each must be safe alone
/// and in any order; the write waits for them, and its outcome is the
/// first command's.
async fn write<W: Into<Writes>>(
    st: &AppState,
    name: &str,
    recipe: impl Fn(&Store, Attempt) -> Result<W, ApiError>,
) -> Result<u64, ApiError> {
    // First from this node's applied state, which costs no round to the
    // voters (the transaction's comparisons make a stale read harmless);
    // a refusal, or comparisons that failed, are checked on a
    // linearizable read, [`WRITE_ATTEMPTS`] times at most.
    let tries = std::iter::once(Attempt { stale: true, last: false })
        .chain((1..=WRITE_ATTEMPTS).map(|n| Attempt { stale: false, last: n == WRITE_ATTEMPTS }));
    for attempt in tries {
        let consistency =
            if attempt.stale { Consistency::Stale } else { Consistency::Linearizable };
        let Writes { first, then } = match read(st, consistency, |s| recipe(s, attempt)).await? {
            Ok(w) => w.into(),
            Err(_) if attempt.stale => continue,
            Err(refused) => return Err(refused),
        };
        // Proposed together, so written in one batch: what comes after
        // the first is the keeper's to do again should it fail.
        let response = if then.is_empty() {
            propose(st, &first).await?.0
        } else {
            let commands: Vec<Command> = std::iter::once(first).chain(then).collect();
            let mut answers = propose_together(st, &commands).await.into_iter();
            answers.next().expect("the first command's answer")?.0
        };
        if let Some(revision) = recipe::outcome(&response) {
            return Ok(revision);
        }
        if !matches!(response, Response::Txn { .. }) {
            return Err(unexpected(&response));
        }
    }
    Err(ApiError::new(
        StatusCode::CONFLICT,
        format!(
            "group {name:?} changed between the read and the write {WRITE_ATTEMPTS} times in a \
             row (partitions granted or moved, members coming and going); nothing was written: \
             retry"
        ),
    ))
}

/// The commands of one write: the one whose outcome is the write's, then
/// those proposed right behind it.
struct Writes {
    first: Command,
    then: Vec<Command>,
}

impl From<Command> for Writes {
    fn from(first: Command) -> Writes {
        Writes { first, then: Vec::new() }
    }
}

impl From<recipe::Leave> for Writes {
    fn from(l: recipe::Leave) -> Writes {
        Writes { first: l.command, then: l.then }
    }
}

/// Which try of a member's write a recipe is asked for.
#[derive(Clone, Copy, Debug)]
struct Attempt {
    /// From this node's applied state, which may lag the cluster's.
    stale: bool,
    /// The last try.
    last: bool,
}

/// The group's spec (when the join may create it) and the member's, from
/// a join's body; 400 for a partition count beyond any group's.
fn join_specs(
    name: &str,
    request: &GroupJoinRequest,
) -> Result<(Option<GroupSpec>, MemberSpec), ApiError> {
    let spec = match request.partitions {
        None => None,
        Some(n) => {
            let partitions = u32::try_from(n)
                .map_err(|_| refused(name, &RecipeError::Invalid(GroupError::Partitions(n))))?;
            let stabilise_ms = request.stabilise_ms.unwrap_or(DEFAULT_STABILISE_MS);
            Some(GroupSpec { partitions, stabilise_ms })
        }
    };
    let member = MemberSpec {
        weight: request.weight,
        zone: request.zone.clone(),
        ready: request.ready,
        preferred: request.preferred.iter().copied().collect(),
        excluded: request.excluded.iter().copied().collect(),
    };
    Ok((spec, member))
}

/// 409 when group `name` exists with a stabilisation time other than `ms`
/// (a join does not change a group's spec).
fn other_stabilisation(s: &Store, name: &str, ms: u64) -> Result<(), ApiError> {
    let existing = s.get(&spec_key(name)).and_then(|kv| {
        serde_json::from_slice::<GroupSpec>(&kv.value).ok().map(|spec| spec.stabilise_ms)
    });
    match existing {
        Some(has) if has != ms => Err(ApiError::new(
            StatusCode::CONFLICT,
            format!(
                "group {name:?} has stabilise_ms {has}, not {ms} (a join does not change a \
                 group's spec); nothing was written"
            ),
        )),
        _ => Ok(()),
    }
}

/// Ok when group `name` exists and `session` is one of its members (its
/// key is there); else 404.
fn is_member(s: &Store, name: &str, session: MemberId) -> Result<(), ApiError> {
    if s.get(&spec_key(name)).is_none() {
        return Err(no_group(name));
    }
    if s.get(&member_key(name, session)).is_none() {
        return Err(refused(name, &RecipeError::NotMember(session)));
    }
    Ok(())
}

/// The group read from its copied keys, or 404 (500 for a spec that does
/// not parse).
fn found_copy(keys: &GroupKeys) -> Result<&Group, ApiError> {
    keys.group().ok_or_else(|| unread_group(keys.name(), keys.has_spec()))
}

/// 500 when group `name` has a spec no one can read, else 404.
fn unread_group(name: &str, has_spec: bool) -> ApiError {
    if has_spec {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the spec of group {name:?} cannot be read (only a bug writes one)"),
        )
    } else {
        no_group(name)
    }
}

/// What `session` owns in the group whose member view
/// ([`GroupKeys::copy_member_view`]) is `keys`, at `revision`.
fn assignment_body(
    keys: &GroupKeys,
    session: MemberId,
    revision: u64,
) -> Result<AssignmentBody, ApiError> {
    let name = keys.name();
    let group = found_copy(keys)?;
    if !group.members.contains_key(&session) {
        return Err(refused(name, &RecipeError::NotMember(session)));
    }
    let owned = group
        .owners
        .iter()
        .filter(|(_, o)| o.ownership.member == session)
        .map(|(&partition, o)| OwnedPartitionBody {
            partition,
            epoch: o.epoch,
            release: o.ownership.release,
        })
        .collect();
    Ok(AssignmentBody { name: name.to_string(), session, owned, revision })
}

/// The answer of `GET /v1/groups/{name}` from the group's keys copied at
/// `revision`: the members after `after`, a page of at most
/// [`MAX_LIST_BYTES`] of JSON.
fn group_body(
    keys: &GroupKeys,
    after: Option<MemberId>,
    revision: u64,
) -> Result<GroupBody, ApiError> {
    let name = keys.name();
    let group = found_copy(keys)?;
    let mut owned: BTreeMap<MemberId, usize> = BTreeMap::new();
    for o in group.owners.values() {
        *owned.entry(o.ownership.member).or_default() += 1;
    }
    let owners = group
        .owners
        .iter()
        .map(|(&partition, o)| GroupOwnerBody {
            partition,
            member: format!("{:016x}", o.ownership.member),
            session: o.ownership.member,
            epoch: o.epoch,
            release: o.ownership.release,
        })
        .collect();
    let mut members = Vec::new();
    let mut bytes = 0;
    let mut more = false;
    for m in group.members.values().filter(|m| after.is_none_or(|a| m.id > a)) {
        let size = member_json_len(m);
        if !members.is_empty() && bytes + size > MAX_LIST_BYTES {
            more = true;
            break;
        }
        bytes += size;
        members.push(member_body(m, owned.get(&m.id).copied().unwrap_or(0)));
    }
    Ok(GroupBody {
        name: name.to_string(),
        spec: GroupSpecBody {
            partitions: group.spec.partitions,
            stabilise_ms: group.spec.stabilise_ms,
        },
        members,
        more,
        owners,
        unreadable: group.unreadable.len(),
        revision,
        stats: None,
        stats_error: None,
    })
}

fn member_body(m: &StoredMember, owned: usize) -> GroupMemberBody {
    GroupMemberBody {
        id: format!("{:016x}", m.id),
        session: m.id,
        spec: GroupMemberSpecBody {
            weight: m.spec.weight,
            zone: m.spec.zone.clone(),
            ready: m.spec.ready,
            preferred: m.spec.preferred.iter().copied().collect(),
            excluded: m.spec.excluded.iter().copied().collect(),
        },
        joined_revision: m.create_revision,
        owned,
    }
}

/// At least the length of a member's JSON in the answer: its fixed
/// fields, its zone, and up to 11 bytes per listed partition.
fn member_json_len(m: &StoredMember) -> usize {
    let zone = m.spec.zone.as_deref().map_or(4, |z| json_str_len(z.as_bytes()) + 2);
    200 + zone + 11 * (m.spec.preferred.len() + m.spec.excluded.len())
}

/// 404: no group of that name.
fn no_group(name: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        format!(
            "group {name:?} does not exist (a join with \"partitions\": N creates it); nothing \
             was written"
        ),
    )
}

/// A recipe's refusal: 400 bad input, 404 no such group, member or
/// session, 409 a join that disagrees with the group or a release of a
/// grant the member does not hold, 429 a full session or too many groups;
/// nothing written.
fn refused(name: &str, e: &RecipeError) -> ApiError {
    let (status, text) = match e {
        RecipeError::Invalid(e) => (StatusCode::BAD_REQUEST, format!("{e} (group {name:?})")),
        RecipeError::NoGroup(_) => return no_group(name),
        RecipeError::OtherPartitions { .. } => (StatusCode::CONFLICT, e.to_string()),
        RecipeError::NotMember(id) => (
            StatusCode::NOT_FOUND,
            format!(
                "session {id} is not a member of group {name:?} (it left, its session ended, or \
                 it never joined)"
            ),
        ),
        RecipeError::NotOwner { partition, epoch, member } => (
            StatusCode::CONFLICT,
            format!(
                "session {member} does not own partition {partition} at epoch {epoch} in group \
                 {name:?} (released already, its session ended, or the epoch is an older \
                 grant's)"
            ),
        ),
        RecipeError::NoSession(id) => (
            StatusCode::NOT_FOUND,
            format!("session {id} does not exist (never granted, or revoked or expired)"),
        ),
        // Caps that others leaving may lift.
        RecipeError::SessionFull(id) => (
            StatusCode::TOO_MANY_REQUESTS,
            format!(
                "session {id} holds {MAX_KEYS_PER_LEASE} keys, as many as a session may: it has \
                 no room to join group {name:?}"
            ),
        ),
        RecipeError::TooManyGroups => (StatusCode::TOO_MANY_REQUESTS, e.to_string()),
        RecipeError::NoGrants | RecipeError::TooManyGrants(_) | RecipeError::DuplicateGrant(_) => {
            (StatusCode::BAD_REQUEST, format!("{e} (group {name:?})"))
        }
    };
    ApiError::new(status, format!("{text}; nothing was written"))
}

/// The group name of the path, checked: 400 if malformed.
fn name_from(name: Result<Path<String>, PathRejection>) -> Result<String, ApiError> {
    let Path(name) = name.map_err(|r| ApiError::new(StatusCode::BAD_REQUEST, r.body_text()))?;
    validate_group_name(&name)
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e.to_string()))?;
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

/// A member id as the answers write it: 16 hex digits.
fn member_id_from(text: &str) -> Result<MemberId, ApiError> {
    let hex = text.len() == 16 && text.bytes().all(|b| b.is_ascii_hexdigit());
    hex.then(|| MemberId::from_str_radix(text, 16).ok()).flatten().ok_or_else(|| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            format!(
                "after={text:?}: give a member id, 16 hex digits (the last of the page before)"
            ),
        )
    })
}

/// The long poll's timeout: [`DEFAULT_ASSIGNMENT_WAIT`] when absent, 400
/// beyond [`MAX_ASSIGNMENT_WAIT`].
fn wait_timeout(timeout_ms: Option<u64>) -> Result<Duration, ApiError> {
    match timeout_ms.map(Duration::from_millis) {
        None => Ok(DEFAULT_ASSIGNMENT_WAIT),
        Some(t) if t <= MAX_ASSIGNMENT_WAIT => Ok(t),
        Some(t) => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!(
                "timeout_ms={}: give at most {} (default {})",
                t.as_millis(),
                MAX_ASSIGNMENT_WAIT.as_millis(),
                DEFAULT_ASSIGNMENT_WAIT.as_millis()
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tenure_kv::TxnOp;
    use tenure_partitions::group::GroupError;

    #[test]
    fn refusals_map_to_statuses_with_clear_messages() {
        let bad = refused("g", &RecipeError::Invalid(GroupError::ZeroWeight));
        assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
        assert!(bad.body().error.contains("weight is at least 1"), "{}", bad.body().error);
        assert!(bad.body().error.ends_with("nothing was written"));
        assert_eq!(refused("g", &RecipeError::NoGroup("g".into())).status(), StatusCode::NOT_FOUND);
        assert_eq!(refused("g", &RecipeError::NotMember(5)).status(), StatusCode::NOT_FOUND);
        assert_eq!(refused("g", &RecipeError::NoSession(5)).status(), StatusCode::NOT_FOUND);
        let other = RecipeError::OtherPartitions { name: "g".into(), has: 8, asked: 9 };
        let other = refused("g", &other);
        assert_eq!(other.status(), StatusCode::CONFLICT);
        assert!(other.body().error.contains("has 8 partitions, not 9"), "{}", other.body().error);
        let full = refused("g", &RecipeError::SessionFull(5));
        assert_eq!(full.status(), StatusCode::TOO_MANY_REQUESTS);
        assert!(full.body().error.contains("session 5 holds 1000 keys"), "{}", full.body().error);
        assert_eq!(
            refused("g", &RecipeError::TooManyGroups).status(),
            StatusCode::TOO_MANY_REQUESTS
        );
        let stale = refused("g", &RecipeError::NotOwner { member: 5, partition: 3, epoch: 9 });
        assert_eq!(stale.status(), StatusCode::CONFLICT);
        assert!(
            stale.body().error.contains("does not own partition 3 at epoch 9"),
            "{}",
            stale.body().error
        );
        for bad in
            [RecipeError::NoGrants, RecipeError::TooManyGrants(64), RecipeError::DuplicateGrant(4)]
        {
            let answer = refused("g", &bad);
            assert_eq!(answer.status(), StatusCode::BAD_REQUEST, "{bad}");
            assert!(answer.body().error.contains(&bad.to_string()), "{}", answer.body().error);
        }
    }

    #[test]
    fn join_bodies_become_specs_and_bad_counts_are_refused() {
        let mut request = GroupJoinRequest::new(7);
        let (spec, member) = join_specs("g", &request).unwrap();
        assert_eq!((spec, member), (None, MemberSpec::default()));
        request.partitions = Some(8);
        let spec = join_specs("g", &request).unwrap().0.unwrap();
        assert_eq!(spec, GroupSpec { partitions: 8, stabilise_ms: DEFAULT_STABILISE_MS });
        request.partitions = Some(1 << 40);
        let e = join_specs("g", &request).unwrap_err();
        assert_eq!(e.status(), StatusCode::BAD_REQUEST);
        assert!(e.body().error.contains("1 to 10000 partitions"), "{}", e.body().error);
    }

    #[test]
    fn queries_are_checked() {
        assert_eq!(member_id_from("000000000000002a").unwrap(), 42);
        for bad in ["2a", "00000000000000zz", "+00000000000002a", ""] {
            assert_eq!(member_id_from(bad).unwrap_err().status(), StatusCode::BAD_REQUEST, "{bad}");
        }
        assert_eq!(wait_timeout(None).unwrap(), DEFAULT_ASSIGNMENT_WAIT);
        assert_eq!(wait_timeout(Some(0)).unwrap(), Duration::ZERO);
        let long = wait_timeout(Some(60_001)).unwrap_err();
        assert!(long.body().error.contains("at most 60000"), "{}", long.body().error);
        assert_eq!(session_from(0).unwrap_err().status(), StatusCode::BAD_REQUEST);
    }

    #[test]
    fn a_group_reads_as_its_members_after_an_id_and_its_owners() {
        let mut s = Store::new();
        let (a, b) = (grant(&mut s), grant(&mut s));
        let body_of = |s: &Store, after| group_body(&GroupKeys::copy(s, "g"), after, s.revision());
        assert_eq!(body_of(&s, None).unwrap_err().status(), StatusCode::NOT_FOUND);
        let spec = GroupSpec { partitions: 2, stabilise_ms: 0 };
        for (id, spec) in [(a, Some(&spec)), (b, None)] {
            let c = recipe::join(&s, "g", spec, id, &MemberSpec::default()).unwrap();
            assert!(recipe::outcome(&s.execute(&c)).is_some());
        }
        let body = body_of(&s, None).unwrap();
        let ids: Vec<u64> = body.members.iter().map(|m| m.session).collect();
        assert_eq!((ids, body.more, body.owners.len()), (vec![a, b], false, 0));
        assert_eq!(body.members[0].id, format!("{a:016x}"));
        let rest = body_of(&s, Some(a)).unwrap();
        assert_eq!(rest.members.iter().map(|m| m.session).collect::<Vec<_>>(), [b]);
        let view = |id| GroupKeys::copy_member_view(&s, "g", id);
        assert_eq!(assignment_body(&view(b), b, 1).unwrap().owned, []);
        assert_eq!(
            assignment_body(&view(b + 1), b + 1, 1).unwrap_err().status(),
            StatusCode::NOT_FOUND
        );
        assert!(is_member(&s, "g", a).is_ok() && is_member(&s, "h", a).is_err());
        assert_eq!(other_stabilisation(&s, "g", 1).unwrap_err().status(), StatusCode::CONFLICT);
        assert!(other_stabilisation(&s, "g", 0).is_ok() && other_stabilisation(&s, "h", 1).is_ok());
    }

    fn grant(s: &mut Store) -> u64 {
        match s.execute(&Command::Grant { ttl_ms: 5_000, owner: None }) {
            Response::Granted { lease, .. } => lease.0,
            r => panic!("{r:?}"),
        }
    }

    #[test]
    fn a_poll_sees_the_changes_its_member_is_shown_after_its_revision() {
        let mut s = Store::new();
        let (a, b) = (grant(&mut s), grant(&mut s));
        let put = |key: &str, lease: Option<u64>| Command::Put {
            key: key.into(),
            value: b"v".to_vec(),
            if_mod_revision: None,
            lease: lease.map(LeaseId),
        };
        let seen = Seen { prefix: group_prefix("g"), spec: spec_key("g"), session: a };
        s.execute(&put("other", Some(a)));
        let at = s.revision();
        assert_eq!(unchanged_through(&s, &seen, at + 1), Some(at));
        for (key, lease, what) in [
            ("_tenure/groups/g2/owners/00000001", Some(a), "another group's key"),
            ("_tenure/groups/g/owners/00000001", Some(b), "a grant to another member"),
            ("_tenure/groups/g/members/x", None, "a key on no session"),
        ] {
            s.execute(&put(key, lease));
            assert_eq!(unchanged_through(&s, &seen, at + 1), Some(s.revision()), "{what}");
        }
        let moved = s.revision() + 1;
        // Handed over to `a`: the put is on its session.
        s.execute(&put("_tenure/groups/g/owners/00000001", Some(a)));
        assert_eq!(unchanged_through(&s, &seen, moved), None, "a grant to the member");
        let taken = s.revision() + 1;
        // Handed back to `b`: the key was on `a`'s session before.
        s.execute(&put("_tenure/groups/g/owners/00000001", Some(b)));
        assert_eq!(unchanged_through(&s, &seen, taken), None, "a grant taken from the member");
        let ended = s.revision() + 1;
        s.execute(&put("_tenure/groups/g/owners/00000002", Some(a)));
        s.execute(&Command::Revoke { lease: LeaseId(a) });
        assert_eq!(unchanged_through(&s, &Seen { session: b, ..seen }, ended), Some(s.revision()));
        let seen = Seen { prefix: group_prefix("g"), spec: spec_key("g"), session: a };
        assert_eq!(unchanged_through(&s, &seen, s.revision()), None, "the session's keys deleted");
        let spec = s.revision() + 1;
        s.execute(&put("_tenure/groups/g/spec", None));
        assert_eq!(unchanged_through(&s, &seen, spec), None, "the spec");
        assert_eq!(unchanged_through(&s, &seen, s.revision() + 1), Some(s.revision()));
    }

    #[test]
    fn a_poll_is_not_woken_when_what_its_member_was_asked_back_leaves() {
        let mut s = Store::new();
        let (a, b) = (grant(&mut s), grant(&mut s));
        let seen = Seen { prefix: group_prefix("g"), spec: spec_key("g"), session: a };
        let owner = |p: u32| format!("_tenure/groups/g/owners/{p:08x}");
        let owned = |member, release| {
            let o = Ownership { member, release, to: release.then_some(b) };
            serde_json::to_vec(&o).unwrap()
        };
        let put = |key: String, value: Vec<u8>, lease: u64| Command::Put {
            key,
            value,
            if_mod_revision: None,
            lease: Some(LeaseId(lease)),
        };
        let delete = |key: String| Command::Delete { key, if_mod_revision: None };
        for p in 1..=4 {
            s.execute(&put(owner(p), owned(a, false), a));
        }
        let marked = s.revision() + 1;
        s.execute(&put(owner(1), owned(a, true), a));
        assert_eq!(unchanged_through(&s, &seen, marked), None, "the request to give it back");
        s.execute(&put(owner(2), owned(a, true), a));
        let released = s.revision() + 1;
        s.execute(&delete(owner(1)));
        assert_eq!(unchanged_through(&s, &seen, released), Some(s.revision()), "its release");
        let handed = s.revision() + 1;
        s.execute(&Command::Txn {
            compare: Vec::new(),
            success: vec![
                TxnOp::Delete { key: owner(2) },
                TxnOp::Put { key: owner(2), value: owned(b, false), lease: Some(LeaseId(b)) },
            ],
            failure: Vec::new(),
        });
        assert_eq!(unchanged_through(&s, &seen, handed), Some(s.revision()), "its handover");
        // What it was not asked back still shows, removed or moved.
        let removed = s.revision() + 1;
        s.execute(&delete(owner(3)));
        assert_eq!(unchanged_through(&s, &seen, removed), None, "a grant removed");
        let moved = s.revision() + 1;
        s.execute(&put(owner(4), owned(b, false), b));
        assert_eq!(unchanged_through(&s, &seen, moved), None, "a grant moved");
    }
}
