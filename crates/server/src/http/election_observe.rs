//! `GET /v1/elections/{name}/observe[?from_revision=R]`: Server-Sent
//! Events of one election's leadership. First the state when the stream
//! opens (a linearizable read): `event: leader` with `{"session","value",
//! "token","revision"}`, or `event: no-leader` with `{"revision"}`. Then
//! one event per revision that changes it: a new leader, a proclaim (same
//! token, new value), or `no-leader` when the last candidate leaves.
//!
//! Every one of those events carries `id: <revision>`: the client has seen
//! the election up to that revision. A client that reconnects with the
//! `Last-Event-ID` header (as a browser's `EventSource` does) or with
//! `from_revision=<last id + 1>` (as for `/v1/kv-watch`; both given, the
//! later wins) is not told the state first: it is told every change after
//! the id, in order, then the stream goes on live (a [`Resume`] rebuilds
//! the election as it stood then, holding the replica's lock only to copy
//! the candidates and the changes since, and to read the few older values
//! it will tell). A resumption from after the store's revision is a 400, as
//! is an id or revision that is not a number; an empty `Last-Event-ID` is
//! none.
//!
//! The stream replays the store's change history of the election's keys
//! revision by revision, so no leader in between is skipped. When the
//! changes it needs are no longer kept ([`tenure_kv::MAX_HISTORY`], or a
//! snapshot was installed), at the start of a resumption or later, it sends
//! `event: compacted` (no id) with `{"error","compacted","current"}`, then
//! the state as of `current` (with its id), and goes on from there: the
//! changes in between are not told, and the client starts over from that
//! state. A stream takes a watch slot, as `/v1/kv-watch` streams do.

use super::auth::Caller;
use super::elections::{name_from, text};
use super::error::ApiError;
use super::kv_watch::start_revision;
use super::state::AppState;
use super::store::{read, Consistency};
use super::watch::{acquire_slot, SSE_KEEP_ALIVE};
use super::watchers::WatchSlot;
use crate::elections::observe::{Observation, Observed, Resume};
use crate::elections::{whole_revisions, CHANGE_BATCH};
use crate::metrics::{GaugeGuard, Metrics};
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use futures_util::stream::{self, Stream};
use serde::Deserialize;
use std::collections::VecDeque;
use std::convert::Infallible;
use tenure_api::{ErrorBody, ObservedLeaderBody, ObservedNoLeaderBody};
use tenure_kv::{Compacted, Standing, Store};
use tenure_node::Replicated;
use tokio::sync::watch;

/// The query of `GET /v1/elections/{name}/observe`.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct ObserveQuery {
    /// Tell the changes from this revision on (the last id seen + 1).
    from_revision: Option<u64>,
}

/// Where a stream starts.
#[derive(Debug)]
enum Start {
    /// The state now, then what follows.
    Fresh,
    /// The changes after this revision.
    After(u64),
}

/// The revision to resume after, from the query and the `Last-Event-ID`
/// header (empty: absent, as the SSE spec has it); 400 for a value that is
/// not a revision, or one after which there is none.
fn start_of(
    query: Result<Query<ObserveQuery>, QueryRejection>,
    headers: &HeaderMap,
) -> Result<Start, ApiError> {
    let Query(q) = query.map_err(|r| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("{}; this endpoint takes from_revision=R (a revision)", r.body_text()),
        )
    })?;
    let header = headers.get("last-event-id").map(|v| v.to_str().map(str::trim));
    let last_event_id = match header {
        None | Some(Ok("")) => None,
        Some(Ok(id)) => Some(id.parse::<u64>().map_err(|e| {
            let why = match e.kind() {
                std::num::IntErrorKind::PosOverflow => "too large",
                _ => "not a revision",
            };
            ApiError::new(StatusCode::BAD_REQUEST, format!("Last-Event-ID {id:?} is {why}"))
        })?),
        Some(Err(_)) => {
            return Err(ApiError::new(StatusCode::BAD_REQUEST, "Last-Event-ID is not a revision"))
        }
    };
    if last_event_id == Some(u64::MAX) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("cannot resume after revision {}: no revision follows it", u64::MAX),
        ));
    }
    Ok(match (q.from_revision, last_event_id) {
        (None, None) => Start::Fresh,
        // The first revision to tell, less one: at most u64::MAX - 1.
        (from, id) => Start::After(start_revision(from, id, 0) - 1),
    })
}

/// A stream ready to go: the election, the next revision to read, and the
/// first events to send.
type Opened = (Observed, u64, Vec<Told>);

/// How a stream opens, as read under the replica's lock.
enum Opening {
    /// Ready.
    Ready(Opened),
    /// A resumption to rebuild (outside the lock).
    Resume(Resume),
}

/// The state now, after `compacted` when the changes a stream needed are
/// gone (both read under one lock, so that `current` is the state's
/// revision).
fn restart(store: &Store, name: &str, compacted: Option<Compacted>) -> Opened {
    let revision = store.revision();
    let now = Observed::new(Standing::read(store, name), name);
    let first = Told::Observation(now.now(revision));
    (now, revision + 1, compacted.map(Told::Compacted).into_iter().chain([first]).collect())
}

/// What a stream tells first (under the replica's lock): the state now, or
/// what a resumption after `after` rebuilds from (after `compacted` when
/// the changes are gone); 400 when `after` is beyond the store's revision.
fn open(store: &Store, name: &str, start: Start) -> Result<Opening, ApiError> {
    let revision = store.revision();
    match start {
        Start::Fresh => Ok(Opening::Ready(restart(store, name, None))),
        Start::After(after) if after > revision => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("cannot resume after revision {after}: the store is at revision {revision}"),
        )),
        Start::After(after) => Ok(match Resume::read(store, name, after) {
            Ok(resume) => Opening::Resume(resume),
            Err(c) => Opening::Ready(restart(store, name, Some(c))),
        }),
    }
}

/// Rebuilds a resumption (the replay outside the replica's lock, on a
/// blocking thread), then reads the older values it will tell, if any,
/// under the lock.
async fn resume(st: &AppState, name: &str, resume: Resume) -> Opened {
    let after = resume.after();
    let rebuilt = match tokio::task::spawn_blocking(move || resume.rebuild()).await {
        Ok(rebuilt) => rebuilt,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    };
    let finished = if rebuilt.is_complete() {
        Ok(rebuilt.finish_complete())
    } else {
        st.kv.read_stale(|s| rebuilt.finish(s).map_err(|c| Box::new(restart(s, name, Some(c))))).0
    };
    match finished {
        Ok(then) => (then, after + 1, Vec::new()),
        Err(restarted) => *restarted,
    }
}

/// Opens a stream; 400 for a bad resumption; 429/503 when the caller or the
/// server has its share of streams open.
pub async fn get(
    State(st): State<AppState>,
    Extension(caller): Extension<Caller>,
    name: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    query: Result<Query<ObserveQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let name = name_from(name)?;
    let start = start_of(query, &headers)?;
    let slot = acquire_slot(&st, &caller)?;
    // Linearizable: every revision a client was told is applied here.
    let opening = read(&st, Consistency::Linearizable, |s| open(s, &name, start)).await??;
    let (observed, next, first) = match opening {
        Opening::Ready(opened) => opened,
        Opening::Resume(r) => resume(&st, &name, r).await,
    };
    let observing = Observing {
        applied: st.kv.applied(),
        kv: st.kv.clone(),
        stopping: st.stopping.clone(),
        prefix: tenure_kv::prefix(&name),
        name,
        observed,
        next,
        pending: VecDeque::from(first),
        metrics: st.metrics.clone(),
        _counted: st.metrics.election_observer(),
        _slot: slot,
    };
    let stream = events(observing);
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(SSE_KEEP_ALIVE)).into_response())
}

/// One event to send.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Told {
    /// A change of the leadership (or the state at the start).
    Observation(Observation),
    /// The changes the stream needed are gone; the state follows.
    Compacted(Compacted),
}

/// One open stream.
struct Observing {
    kv: Replicated<Store>,
    applied: watch::Receiver<u64>,
    stopping: watch::Receiver<bool>,
    name: String,
    prefix: String,
    observed: Observed,
    /// The next revision to read.
    next: u64,
    /// Events not sent yet.
    pending: VecDeque<Told>,
    metrics: Metrics,
    _counted: GaugeGuard,
    _slot: WatchSlot,
}

impl Observing {
    /// Reads what was applied since `next`; false if nothing was.
    fn catch_up(&mut self) -> bool {
        let (prefix, name, next) = (&self.prefix, &self.name, self.next);
        // The state after `compacted` is read under the same lock, so that
        // its revision is the event's `current`.
        let read = self.kv.read_stale(|s| {
            s.changes_since(prefix, next, CHANGE_BATCH)
                .map_err(|c| Box::new(restart(s, name, Some(c))))
        });
        match read.0 {
            Err(restarted) => {
                let (observed, next, told) = *restarted;
                self.observed = observed;
                self.next = next;
                self.pending.extend(told);
                true
            }
            Ok(changes) if changes.is_empty() => false,
            Ok(mut changes) => {
                self.next = whole_revisions(&mut changes, self.next);
                let seen = self.observed.apply(&changes);
                self.pending.extend(seen.into_iter().map(Told::Observation));
                true
            }
        }
    }
}

/// The observations as events, until the client leaves or the server stops.
fn events(start: Observing) -> impl Stream<Item = Result<Event, Infallible>> {
    stream::unfold(start, |mut o| async move {
        loop {
            if *o.stopping.borrow() {
                return None;
            }
            if let Some(told) = o.pending.pop_front() {
                o.metrics.election_observe_event();
                return Some((Ok(event(&told)), o));
            }
            // Seen before the read, so that an advance after it wakes the wait.
            o.applied.borrow_and_update();
            if !o.catch_up() {
                tokio::select! {
                    changed = o.applied.changed() => changed.ok()?,
                    _ = o.stopping.wait_for(|s| *s) => return None,
                }
            }
        }
    })
}

/// An event: with the revision as its id, but `compacted`, which is not a
/// point to resume from (the state after it is).
fn event(told: &Told) -> Event {
    let (event, revision) = match told {
        Told::Observation(Observation::Leader { leader, revision }) => (
            Event::default().event("leader").json_data(ObservedLeaderBody {
                session: leader.session.0,
                value: text(&leader.value),
                token: leader.create_revision,
                revision: *revision,
            }),
            Some(revision),
        ),
        Told::Observation(Observation::NoLeader { revision }) => (
            Event::default()
                .event("no-leader")
                .json_data(ObservedNoLeaderBody { revision: *revision }),
            Some(revision),
        ),
        Told::Compacted(c) => {
            let body = ErrorBody {
                error: format!(
                    "changes up to revision {} are no longer kept (the store is at {}): \
                     the changes since the revision asked for are not told; the state \
                     as of revision {} follows",
                    c.compacted, c.current, c.current
                ),
                compacted: Some(c.compacted),
                current: Some(c.current),
                ..ErrorBody::default()
            };
            (Event::default().event("compacted").json_data(body), None)
        }
    };
    match (event, revision) {
        (Ok(e), Some(r)) => e.id(r.to_string()),
        (Ok(e), None) => e,
        (Err(_), _) => Event::default().comment("unencodable observation"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tenure_kv::{Candidate, LeaseId};

    #[test]
    fn events_are_named_and_carry_the_token() {
        let leader = Candidate {
            session: LeaseId(3),
            value: b"10.0.0.1:80".to_vec(),
            create_revision: 17,
            mod_revision: 20,
        };
        let told = Told::Observation(Observation::Leader { leader, revision: 20 });
        let shown = format!("{:?}", event(&told));
        assert!(shown.contains("event: leader") && shown.contains("id: 20"), "{shown}");
        assert!(shown.contains("\\\"token\\\":17") && shown.contains("10.0.0.1:80"), "{shown}");
        let none =
            format!("{:?}", event(&Told::Observation(Observation::NoLeader { revision: 21 })));
        assert!(none.contains("event: no-leader") && none.contains("id: 21"), "{none}");
        let gone =
            format!("{:?}", event(&Told::Compacted(Compacted { compacted: 9, current: 30 })));
        assert!(gone.contains("event: compacted") && !gone.contains("id:"), "{gone}");
        assert!(gone.contains("\\\"current\\\":30"), "{gone}");
    }
}
