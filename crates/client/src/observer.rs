//! Following one of tenure's named elections over its Server-Sent Events
//! (`GET /v1/elections/{name}/observe`), across nodes and reconnections:
//! what [`crate::TenureStore`] observes with.

use crate::cluster::Cluster;
use crate::error::Error;
use hyper::StatusCode;
use std::sync::Arc;
use std::time::Duration;
use tenure_api::{ErrorBody, ObservedLeaderBody, ObservedNoLeaderBody};
use tenure_elect::election::{OBSERVE_BACKOFF_MAX, OBSERVE_BACKOFF_MIN};
use tenure_elect::Observed;

/// The changes of an election, across reconnections: when a node's stream
/// ends or fails, the next endpoint is followed from the id of the last
/// event received (`Last-Event-ID`), so the changes made while disconnected
/// are reported, in order, none twice. When the cluster no longer keeps
/// them, [`Observed::Missed`] says so (once per gap) and the state then
/// follows. So it does when the cluster refuses to resume after the last
/// id (a 400: it was restored with a lower revision): the observer starts
/// afresh, and `compacted` is that last id.
#[derive(Debug)]
pub struct Observer {
    cluster: Arc<Cluster>,
    /// The path of the election's observe stream.
    path: String,
    stream: Option<crate::http::EventStream>,
    /// The last observation reported.
    last: Option<Observed>,
    /// The id of the last event received: where a new stream resumes.
    last_id: Option<u64>,
    /// The stream was opened without an id after something was reported
    /// (a server whose events have none): its first event is the state,
    /// reported only if it differs from the last.
    afresh: bool,
    /// A resumption after this id was refused: the fresh stream's first
    /// event, the state, is reported after an [`Observed::Missed`].
    refused_after: Option<u64>,
    /// An observation to report before reading on (the state after a
    /// refused resumption's `Missed`).
    pending: Option<Observed>,
    backoff: Duration,
}

impl Observer {
    /// An observer of `election` (a checked name) on `cluster`: the
    /// current state first, then every change, including "no leader" (see
    /// [`Observer::next`]).
    pub(crate) fn new(cluster: Arc<Cluster>, election: &str) -> Observer {
        Observer {
            cluster,
            path: format!("/v1/elections/{election}/observe"),
            stream: None,
            last: None,
            last_id: None,
            afresh: false,
            refused_after: None,
            pending: None,
            backoff: OBSERVE_BACKOFF_MIN,
        }
    }

    /// The next change. Errors only when reconnecting cannot help: the
    /// token was refused, or the server refused the request (4xx but 429).
    pub async fn next(&mut self) -> Result<Observed, Error> {
        loop {
            if let Some(pending) = self.pending.take() {
                self.last = Some(pending.clone());
                return Ok(pending);
            }
            let cluster = &self.cluster;
            let endpoint = cluster.current().to_string();
            if self.stream.is_none() {
                let url = format!("{endpoint}{}", self.path);
                match cluster.client().event_stream(&url, self.last_id).await {
                    Ok(s) => {
                        self.afresh = self.last_id.is_none()
                            && self.last.is_some()
                            && self.refused_after.is_none();
                        self.stream = Some(s);
                    }
                    // Not a bad request but a resumption the cluster cannot
                    // make (restored with a lower revision): start afresh.
                    Err(Error::Refused(r))
                        if r.status == StatusCode::BAD_REQUEST && self.last_id.is_some() =>
                    {
                        tracing::warn!(
                            error = %r, after = ?self.last_id,
                            "observe: the cluster cannot resume; starting afresh"
                        );
                        self.refused_after = self.last_id.take();
                        continue;
                    }
                    Err(e) => {
                        self.failed(&endpoint, e).await?;
                        continue;
                    }
                }
            }
            let stream = self.stream.as_mut().expect("opened above");
            match stream.next().await {
                Ok(Some(event)) => {
                    self.backoff = OBSERVE_BACKOFF_MIN;
                    let Some(observed) = parse_event(stream.url(), &event)? else {
                        continue;
                    };
                    match event.id.as_deref().and_then(|id| id.parse().ok()) {
                        Some(id) => self.last_id = Some(id),
                        // `compacted`: the state follows. Should the stream
                        // drop before it, a fresh one tells the state, and
                        // not the gap again.
                        None if matches!(observed, Observed::Missed { .. }) => self.last_id = None,
                        None => {}
                    }
                    if let Some(after) = self.refused_after.take() {
                        if let Some(current) = observed.revision() {
                            self.pending = Some(observed);
                            let missed = Observed::Missed { compacted: after, current };
                            self.last = Some(missed.clone());
                            return Ok(missed);
                        }
                    }
                    if std::mem::take(&mut self.afresh)
                        && self.last.as_ref().and_then(Observed::state) == observed.state()
                    {
                        continue;
                    }
                    self.last = Some(observed.clone());
                    return Ok(observed);
                }
                Ok(None) => {
                    let e = Error::Stream {
                        url: stream.url().to_string(),
                        problem: "stream ended".into(),
                    };
                    self.failed(&endpoint, e).await?;
                }
                Err(e) => self.failed(&endpoint, e).await?,
            }
        }
    }

    /// Drops the stream and moves on to the next endpoint after a pause,
    /// or gives up on errors reconnecting cannot fix.
    async fn failed(&mut self, endpoint: &str, e: Error) -> Result<(), Error> {
        self.stream = None;
        match &e {
            Error::AuthRefused(_) | Error::Config(_) | Error::Invalid(_) => return Err(e),
            Error::Refused(r) if final_refusal(r.status) => return Err(e),
            _ => {}
        }
        tracing::debug!(error = %e, "observe: trying the next endpoint");
        self.cluster.skip(endpoint);
        tokio::time::sleep(self.backoff).await;
        self.backoff = (self.backoff * 2).min(OBSERVE_BACKOFF_MAX);
        Ok(())
    }
}

/// Whether a refusal is final: a 4xx other than 429 (a limit on long polls
/// or streams held at once, which frees up: tried again after a pause).
fn final_refusal(status: StatusCode) -> bool {
    status.is_client_error() && status != StatusCode::TOO_MANY_REQUESTS
}

/// An observe event as an [`Observed`]; None for events of other names.
/// Public for the fuzz target.
#[doc(hidden)]
pub fn parse_event(url: &str, event: &crate::http::SseEvent) -> Result<Option<Observed>, Error> {
    let bad = |e: serde_json::Error| Error::Stream {
        url: url.to_string(),
        problem: format!("bad {} event {}: {e}", event.event, event.data),
    };
    match event.event.as_str() {
        "leader" => {
            let e: ObservedLeaderBody = serde_json::from_str(&event.data).map_err(bad)?;
            Ok(Some(Observed::Leader {
                session: e.session,
                value: e.value,
                token: e.token,
                revision: e.revision,
            }))
        }
        "no-leader" => {
            let e: ObservedNoLeaderBody = serde_json::from_str(&event.data).map_err(bad)?;
            Ok(Some(Observed::NoLeader { revision: e.revision }))
        }
        "compacted" => {
            let e: ErrorBody = serde_json::from_str(&event.data).map_err(bad)?;
            match (e.compacted, e.current) {
                (Some(compacted), Some(current)) => {
                    Ok(Some(Observed::Missed { compacted, current }))
                }
                _ => Err(Error::Stream {
                    url: url.to_string(),
                    problem: format!("a compacted event without its revisions: {}", event.data),
                }),
            }
        }
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::SseEvent;

    #[test]
    fn only_limits_among_refusals_are_tried_again() {
        assert!(final_refusal(StatusCode::NOT_FOUND));
        assert!(final_refusal(StatusCode::BAD_REQUEST));
        assert!(!final_refusal(StatusCode::TOO_MANY_REQUESTS));
        assert!(!final_refusal(StatusCode::SERVICE_UNAVAILABLE));
    }

    #[test]
    fn observe_events_are_parsed_and_others_skipped() {
        let ev =
            |name: &str, data: &str| SseEvent { event: name.into(), id: None, data: data.into() };
        let leader = parse_event(
            "u",
            &ev("leader", r#"{"session":3,"value":"a","token":17,"revision":17}"#),
        );
        assert_eq!(
            leader.unwrap(),
            Some(Observed::Leader { session: 3, value: "a".into(), token: 17, revision: 17 })
        );
        let none = parse_event("u", &ev("no-leader", r#"{"revision":20}"#)).unwrap();
        assert_eq!(none, Some(Observed::NoLeader { revision: 20 }));
        assert_eq!(parse_event("u", &ev("other", "{}")).unwrap(), None);
        assert!(parse_event("u", &ev("leader", "{}")).is_err());
        let gone = parse_event("u", &ev("compacted", r#"{"error":"x","compacted":5,"current":9}"#));
        assert_eq!(gone.unwrap(), Some(Observed::Missed { compacted: 5, current: 9 }));
        // A repeated state (a stream started afresh) compares equal whatever its revision.
        let a = Observed::NoLeader { revision: 1 };
        let b = Observed::NoLeader { revision: 9 };
        assert_eq!(a.state(), b.state());
        assert_eq!(Observed::Missed { compacted: 1, current: 2 }.state(), None);
    }
}
