//! `GET /v1/elections/{name}/observe`: Server-Sent Events of one
//! election's leadership. First the state when the stream opens (a
//! linearizable read): `event: leader` with `{"session","value","token",
//! "revision"}`, or `event: no-leader` with `{"revision"}`. Then one event
//! per revision that changes it: a new leader, a proclaim (same token, new
//! value), or `no-leader` when the last candidate leaves.
//!
//! The stream replays the store's change history of the election's keys
//! revision by revision, so no leader in between is skipped. If it falls
//! behind the history the store keeps ([`tenure_kv::MAX_HISTORY`]), or the
//! node installs a snapshot, it reads the election again and tells the
//! state then, if it differs (leaders in between are not told). A stream
//! takes a watch slot, as `/v1/kv-watch` streams do; it is not resumable
//! (a client that reconnects is told the state first).

use super::auth::Caller;
use super::elections::{name_from, text};
use super::kv::{read, Consistency};
use super::state::{ApiError, AppState};
use super::watch::{acquire_slot, SSE_KEEP_ALIVE};
use super::watchers::WatchSlot;
use crate::api::{ObservedLeaderBody, ObservedNoLeaderBody};
use crate::elections::observe::{Observation, Observed};
use crate::elections::{whole_revisions, CHANGE_BATCH};
use crate::metrics::{GaugeGuard, Metrics};
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use futures_util::stream::{self, Stream};
use std::collections::VecDeque;
use std::convert::Infallible;
use tenure_kv::{Standing, Store};
use tenure_node::Replicated;
use tokio::sync::watch;

/// Opens a stream; 429/503 when the caller or the server has its share of
/// streams open.
pub async fn get(
    State(st): State<AppState>,
    Extension(caller): Extension<Caller>,
    name: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let name = name_from(name)?;
    let slot = acquire_slot(&st, &caller)?;
    let (observed, revision) = read(&st, Consistency::Linearizable, |s| {
        (Observed::new(Standing::read(s, &name), &name), s.revision())
    })
    .await?;
    let first = observed.now(revision);
    let observing = Observing {
        applied: st.kv.applied(),
        kv: st.kv.clone(),
        stopping: st.stopping.clone(),
        prefix: tenure_kv::prefix(&name),
        name,
        observed,
        next: revision + 1,
        pending: VecDeque::from([first]),
        metrics: st.metrics.clone(),
        _counted: st.metrics.election_observer(),
        _slot: slot,
    };
    let stream = events(observing);
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(SSE_KEEP_ALIVE)).into_response())
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
    /// Observations not sent yet.
    pending: VecDeque<Observation>,
    metrics: Metrics,
    _counted: GaugeGuard,
    _slot: WatchSlot,
}

impl Observing {
    /// Reads what was applied since `next`; false if nothing was.
    fn catch_up(&mut self) -> bool {
        let read = self.kv.read_stale(|s| s.changes_since(&self.prefix, self.next, CHANGE_BATCH)).0;
        match read {
            Err(_) => {
                let (queue, revision) =
                    self.kv.read_stale(|s| (Standing::read(s, &self.name), s.revision())).0;
                self.pending.extend(self.observed.reset(queue, &self.name, revision));
                self.next = revision + 1;
                true
            }
            Ok(changes) if changes.is_empty() => false,
            Ok(mut changes) => {
                self.next = whole_revisions(&mut changes, self.next);
                let seen = self.observed.apply(&changes);
                self.pending.extend(seen);
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
            if let Some(observation) = o.pending.pop_front() {
                o.metrics.election_observe_event();
                return Some((Ok(event(&observation)), o));
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

fn event(o: &Observation) -> Event {
    let event = match o {
        Observation::Leader { leader, revision } => {
            Event::default().event("leader").json_data(ObservedLeaderBody {
                session: leader.session.0,
                value: text(&leader.value),
                token: leader.create_revision,
                revision: *revision,
            })
        }
        Observation::NoLeader { revision } => Event::default()
            .event("no-leader")
            .json_data(ObservedNoLeaderBody { revision: *revision }),
    };
    event.unwrap_or_else(|_| Event::default().comment("unencodable observation"))
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
        let shown = format!("{:?}", event(&Observation::Leader { leader, revision: 20 }));
        assert!(shown.contains("event: leader"), "{shown}");
        assert!(shown.contains("\\\"token\\\":17") && shown.contains("10.0.0.1:80"), "{shown}");
        let none = format!("{:?}", event(&Observation::NoLeader { revision: 21 }));
        assert!(none.contains("event: no-leader") && none.contains("21"), "{none}");
    }
}
