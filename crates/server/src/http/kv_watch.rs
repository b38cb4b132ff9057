//! `GET /v1/kv-watch?prefix=P&from_revision=R` (or `key=K`): the changes
//! of the store as Server-Sent Events, from revision R on, until the client
//! leaves or the server stops.
//!
//! Each change is an event `put` or `delete` whose data is a
//! [`KvEventBody`]. The last event of each revision carries `id: <revision>`
//! (a transaction's changes share one revision, and the id comes after all
//! of them), so a client that reconnects resumes with
//! `from_revision=<last id> + 1`, or by sending the `Last-Event-ID` header
//! as browsers do. Without either, the stream starts after this node's
//! current revision.
//!
//! The store keeps the last [`tenure_kv::MAX_HISTORY`] changes. A
//! `from_revision` older than that is answered 410 Gone with
//! `{"error", "compacted", "current"}`; if the stream falls that far
//! behind (or the node installs a snapshot) while it runs, it sends an
//! event `compacted` with the same body and ends. Either way the client
//! reads the keys again and watches from `current + 1`.
//!
//! The changes are this node's, as it applies them (a follower's are a
//! little behind the leader's, never different). A stream takes a watcher
//! slot, as `/v1/watch` streams do, and is woken by every advance of the
//! applied log index.

use super::auth::Caller;
use super::error::ApiError;
use super::kv_body::{check_key, check_prefix, invalid, kv_body};
use super::state::AppState;
use super::watch::{acquire_slot, SSE_KEEP_ALIVE};
use super::watchers::WatchSlot;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use futures_util::stream::{self, Stream};
use serde::Deserialize;
use std::collections::VecDeque;
use std::convert::Infallible;
use tenure_api::{ErrorBody, KvEventBody};
use tenure_kv::{Change, ChangeKind, Compacted, Store, MAX_CHANGES_PER_REVISION};
use tenure_node::Replicated;
use tokio::sync::watch;

/// Most changes read from the store at once: twice the most one revision
/// can hold (a transaction's branch, or the keys of a lease that ends), so
/// that a full batch always ends with a whole revision once its incomplete
/// last one is put back.
const BATCH: usize = 2 * MAX_CHANGES_PER_REVISION;

/// The query of `GET /v1/kv-watch`.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct WatchQuery {
    prefix: Option<String>,
    key: Option<String>,
    from_revision: Option<u64>,
}

/// Which keys a stream follows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Filter {
    /// The keys starting with this ("": every key).
    Prefix(String),
    /// This key only.
    Key(String),
}

impl Filter {
    /// The filter of a query: `prefix` or `key`, not both; neither is every key.
    fn new(prefix: Option<String>, key: Option<String>) -> Result<Filter, ApiError> {
        let filter = match (prefix, key) {
            (Some(_), Some(_)) => {
                return Err(ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "give prefix=P or key=K, not both",
                ))
            }
            (None, Some(k)) => {
                check_key(&k).map_err(|e| invalid(&e))?;
                Filter::Key(k)
            }
            (p, None) => {
                let p = p.unwrap_or_default();
                check_prefix(&p).map_err(|e| invalid(&e))?;
                Filter::Prefix(p)
            }
        };
        Ok(filter)
    }

    /// The prefix to ask the store for.
    fn prefix(&self) -> &str {
        match self {
            Filter::Prefix(p) | Filter::Key(p) => p,
        }
    }

    fn matches(&self, change: &Change) -> bool {
        match self {
            Filter::Prefix(_) => true,
            Filter::Key(k) => change.kv.key == *k,
        }
    }
}

/// The first revision a stream sends: the later of `from_revision` and the
/// one after `Last-Event-ID`, or, with neither, the one after `current`.
/// Revisions start at 1 (0 is taken as 1).
pub fn start_revision(from_revision: Option<u64>, last_event_id: Option<u64>, current: u64) -> u64 {
    let resume = last_event_id.map(|id| id.saturating_add(1));
    match (from_revision, resume) {
        (None, None) => current + 1,
        (from, resume) => from.unwrap_or(0).max(resume.unwrap_or(0)).max(1),
    }
}

/// Opens a stream; 410 when `from_revision` is compacted; 429/503 when the
/// caller or the server has its share of streams open.
pub async fn get(
    State(st): State<AppState>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    query: Result<Query<WatchQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(q) = query.map_err(|r| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            format!(
                "{}; this endpoint takes prefix=P or key=K, and from_revision=R",
                r.body_text()
            ),
        )
    })?;
    let filter = Filter::new(q.prefix, q.key)?;
    let last_event_id = match headers.get("last-event-id") {
        None => None,
        Some(v) => {
            Some(v.to_str().ok().and_then(|s| s.trim().parse::<u64>().ok()).ok_or_else(|| {
                ApiError::new(StatusCode::BAD_REQUEST, "Last-Event-ID is not a revision")
            })?)
        }
    };
    let (from, compacted) = st
        .kv
        .read_stale(|s| {
            let from = start_revision(q.from_revision, last_event_id, s.revision());
            (from, s.changes_since(filter.prefix(), from, 1).err())
        })
        .0;
    if let Some(c) = compacted {
        return Err(gone(&c));
    }
    let slot = acquire_slot(&st, &caller)?;
    let stream = changes(st.kv.clone(), st.stopping.clone(), filter, from, slot);
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(SSE_KEEP_ALIVE)).into_response())
}

/// 410: the changes asked for are compacted.
fn gone(c: &Compacted) -> ApiError {
    let mut e = ApiError::new(StatusCode::GONE, c.to_string());
    e.body.compacted = Some(c.compacted);
    e.body.current = Some(c.current);
    e
}

/// A stream of the store's changes.
struct Watching {
    kv: Replicated<Store>,
    applied: watch::Receiver<u64>,
    stopping: watch::Receiver<bool>,
    filter: Filter,
    /// The next revision to read.
    next: u64,
    /// Changes read, not yet sent: whole revisions.
    pending: VecDeque<Change>,
    /// Set after the `compacted` event: the stream ends.
    done: bool,
    _slot: WatchSlot,
}

/// The changes from `from` on, as events, until the server stops.
fn changes(
    kv: Replicated<Store>,
    stopping: watch::Receiver<bool>,
    filter: Filter,
    from: u64,
    slot: WatchSlot,
) -> impl Stream<Item = Result<Event, Infallible>> {
    let start = Watching {
        applied: kv.applied(),
        kv,
        stopping,
        filter,
        next: from,
        pending: VecDeque::new(),
        done: false,
        _slot: slot,
    };
    stream::unfold(start, |mut w| async move {
        loop {
            if w.done || *w.stopping.borrow() {
                return None;
            }
            if let Some(change) = w.pending.pop_front() {
                let last_of_revision =
                    w.pending.front().is_none_or(|n| n.revision != change.revision);
                return Some((Ok(change_event(&change, last_of_revision)), w));
            }
            // Marks the index seen before reading, so that an advance after
            // the read wakes the wait below.
            w.applied.borrow_and_update();
            let read = w.kv.read_stale(|s| s.changes_since(w.filter.prefix(), w.next, BATCH)).0;
            match read {
                Err(c) => {
                    w.done = true;
                    return Some((Ok(compacted_event(&c)), w));
                }
                Ok(changes) if changes.is_empty() => {
                    tokio::select! {
                        changed = w.applied.changed() => changed.ok()?,
                        _ = w.stopping.wait_for(|s| *s) => return None,
                    }
                }
                Ok(changes) => {
                    let changes = whole_revisions(changes, BATCH);
                    w.next = changes.last().map_or(w.next, |c| c.revision + 1);
                    let filter = &w.filter;
                    w.pending.extend(changes.into_iter().filter(|c| filter.matches(c)));
                }
            }
        }
    })
}

/// A batch of `max` changes may end in the middle of a revision: its last
/// revision is dropped then (read again with the next batch), unless it is
/// the only one.
fn whole_revisions(mut changes: Vec<Change>, max: usize) -> Vec<Change> {
    if changes.len() < max {
        return changes;
    }
    let Some(last) = changes.last().map(|c| c.revision) else { return changes };
    let keep = changes.iter().position(|c| c.revision == last).unwrap_or(0);
    if keep > 0 {
        changes.truncate(keep);
    }
    changes
}

fn change_event(change: &Change, with_id: bool) -> Event {
    let kind = match change.kind {
        ChangeKind::Put => "put",
        // A key removed with its session is a deletion, with the reason.
        ChangeKind::Delete | ChangeKind::Revoked | ChangeKind::Expired => "delete",
    };
    let reason = match change.kind {
        ChangeKind::Revoked => Some("revoked".to_string()),
        ChangeKind::Expired => Some("expired".to_string()),
        ChangeKind::Put | ChangeKind::Delete => None,
    };
    let body = KvEventBody {
        kind: kind.to_string(),
        revision: change.revision,
        reason,
        kv: kv_body(&change.kv),
    };
    let event = Event::default()
        .event(kind)
        .json_data(&body)
        .unwrap_or_else(|_| Event::default().comment("unencodable change"));
    match with_id {
        true => event.id(change.revision.to_string()),
        false => event,
    }
}

fn compacted_event(c: &Compacted) -> Event {
    let body = ErrorBody {
        error: c.to_string(),
        compacted: Some(c.compacted),
        current: Some(c.current),
        ..ErrorBody::default()
    };
    Event::default()
        .event("compacted")
        .json_data(&body)
        .unwrap_or_else(|_| Event::default().comment("unencodable compaction"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tenure_kv::KeyValue;

    fn change(revision: u64, key: &str) -> Change {
        let kv = KeyValue {
            key: key.into(),
            value: vec![],
            create_revision: revision,
            mod_revision: revision,
            version: 1,
            lease: None,
        };
        Change { revision, kind: ChangeKind::Put, kv, prev: None }
    }

    #[test]
    fn a_stream_starts_where_the_client_left_off() {
        assert_eq!(start_revision(None, None, 41), 42, "from now by default");
        assert_eq!(start_revision(Some(5), None, 41), 5);
        assert_eq!(start_revision(None, Some(9), 41), 10, "after the last event seen");
        assert_eq!(start_revision(Some(5), Some(9), 41), 10, "a browser resends both");
        assert_eq!(start_revision(Some(20), Some(9), 41), 20);
        assert_eq!(start_revision(Some(0), None, 41), 1, "revisions start at 1");
        assert_eq!(start_revision(None, Some(u64::MAX), 0), u64::MAX);
    }

    #[test]
    fn a_full_batch_gives_back_its_incomplete_last_revision() {
        let batch = vec![change(1, "a"), change(2, "a"), change(2, "b"), change(3, "a")];
        assert_eq!(whole_revisions(batch.clone(), 5), batch, "not full: every change is there");
        let cut = whole_revisions(batch.clone(), 4);
        assert_eq!(cut.iter().map(|c| c.revision).collect::<Vec<_>>(), [1, 2, 2]);
        let one = vec![change(7, "a"), change(7, "b")];
        assert_eq!(whole_revisions(one.clone(), 2), one, "a single revision stays");
    }

    #[test]
    fn filters_are_a_prefix_or_one_key() {
        let key = Filter::new(None, Some("a/b".into())).unwrap();
        assert_eq!(key.prefix(), "a/b");
        assert!(key.matches(&change(1, "a/b")) && !key.matches(&change(1, "a/bc")));
        assert_eq!(Filter::new(None, None).unwrap(), Filter::Prefix(String::new()));
        assert_eq!(Filter::new(Some("x".into()), Some("y".into())).unwrap_err().status, 400);
        assert_eq!(Filter::new(None, Some(String::new())).unwrap_err().status, 400);
        assert_eq!(Filter::new(Some("\n".into()), None).unwrap_err().status, 400);
    }

    #[test]
    fn events_carry_the_revision_as_id_after_a_whole_revision() {
        let c = change(12, "k");
        let with = format!("{:?}", change_event(&c, true));
        assert!(with.contains("event: put") && with.contains("id: 12"), "{with}");
        let without = format!("{:?}", change_event(&c, false));
        assert!(without.contains("\\\"revision\\\":12") && !without.contains("id:"), "{without}");
        let compacted = format!("{:?}", compacted_event(&Compacted { compacted: 10, current: 20 }));
        assert!(compacted.contains("event: compacted"), "{compacted}");
        assert!(compacted.contains("\\\"current\\\":20"), "{compacted}");
        let gone = gone(&Compacted { compacted: 10, current: 20 });
        assert_eq!(gone.status, StatusCode::GONE);
        assert_eq!((gone.body.compacted, gone.body.current), (Some(10), Some(20)));
    }
}
