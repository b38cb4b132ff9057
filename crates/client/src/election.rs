//! Named elections: campaign with a session, wait to lead, resign,
//! proclaim, read the leader, observe every change, check a token.

use crate::cluster::{Cluster, Retry};
use crate::error::Error;
use crate::http::REQUEST_TIMEOUT;
use crate::session::Session;
use hyper::{Method, StatusCode};
use std::sync::Arc;
use std::time::Duration;
use tenure_api::{
    CampaignRequest, ErrorBody, ObservedLeaderBody, ObservedNoLeaderBody, ProclaimBody,
    ProclaimRequest, ResignBody, ResignRequest,
};

/// Longest election name the servers accept.
pub const MAX_NAME_LEN: usize = 128;
/// Largest candidate value the servers accept, in bytes.
pub const MAX_VALUE_BYTES: usize = 4096;
/// The long poll of [`Election::wait_until_leader`]: each `wait` asks the
/// server to hold the answer this long (the server's default; at most 60 s).
pub const WAIT_POLL: Duration = Duration::from_secs(30);
/// Pause before an observer reconnects after its stream ended or failed;
/// it doubles up to [`OBSERVE_BACKOFF_MAX`].
pub const OBSERVE_BACKOFF_MIN: Duration = Duration::from_millis(50);
/// Longest pause between an observer's reconnections.
pub const OBSERVE_BACKOFF_MAX: Duration = Duration::from_secs(2);

/// Checks an election name: 1 to 128 characters of `A-Z a-z 0-9 . _ -`.
pub fn check_name(name: &str) -> Result<(), Error> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if name.is_empty() || name.len() > MAX_NAME_LEN || !name.chars().all(ok_char) {
        return Err(Error::Invalid(format!(
            "bad election name {name:?}: 1 to {MAX_NAME_LEN} characters of A-Z a-z 0-9 . _ -"
        )));
    }
    Ok(())
}

/// Checks a candidate value: at most 4,096 bytes.
pub fn check_value(value: &str) -> Result<(), Error> {
    if value.len() > MAX_VALUE_BYTES {
        return Err(Error::Invalid(format!(
            "a candidate value is at most {MAX_VALUE_BYTES} bytes, this one has {}",
            value.len()
        )));
    }
    Ok(())
}

/// The answer to a campaign, and to each long poll of a wait: where the
/// candidacy stands (the API's body).
pub type Campaign = tenure_api::CandidacyBody;

/// A leader of an election: its session, value and fencing token.
pub type Leader = tenure_api::ElectionLeaderBody;

/// A candidate of an election: its session, value and place in the queue.
pub type Candidate = tenure_api::ElectionCandidateBody;

/// An election's leader and candidates, and the revision they were read at.
pub type ElectionState = tenure_api::ElectionBody;

/// The answer to a token check: whether the token asked is the current
/// leader's, the current leader's token, the revision it was read at.
pub type Check = tenure_api::TokenCheckBody;

/// One change an observer sees.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Observed {
    /// A new leader, or a new value of the leader (a proclaim).
    Leader {
        /// Its session.
        session: u64,
        /// Its value.
        value: String,
        /// Its fencing token.
        token: u64,
        /// The revision of the change.
        revision: u64,
    },
    /// The last candidate left.
    NoLeader {
        /// The revision of the change.
        revision: u64,
    },
    /// The changes after the last one reported, up to `current`, could not
    /// be told (the cluster no longer keeps them, or refused to resume
    /// after the last one: then `compacted` is its revision): the next
    /// observation is the state as of `current`, whether it changed or not.
    Missed {
        /// Changes up to this revision are no longer kept.
        compacted: u64,
        /// The revision of the state that follows.
        current: u64,
    },
}

impl Observed {
    /// The state without its revision: two events with the same one say
    /// the same (a stream started afresh repeats the current state).
    fn state(&self) -> Option<(Option<u64>, Option<&str>, Option<u64>)> {
        match self {
            Observed::Leader { session, value, token, .. } => {
                Some((Some(*session), Some(value), Some(*token)))
            }
            Observed::NoLeader { .. } => Some((None, None, None)),
            Observed::Missed { .. } => None,
        }
    }

    /// The revision of a state (not of [`Observed::Missed`]).
    fn revision(&self) -> Option<u64> {
        match self {
            Observed::Leader { revision, .. } | Observed::NoLeader { revision } => Some(*revision),
            Observed::Missed { .. } => None,
        }
    }
}

/// One named election of a cluster.
#[derive(Clone, Debug)]
pub struct Election {
    cluster: Arc<Cluster>,
    name: String,
}

impl Election {
    /// The election `name` (checked: 1 to 128 characters of `A-Z a-z 0-9 . _ -`).
    pub fn new(cluster: Arc<Cluster>, name: &str) -> Result<Election, Error> {
        check_name(name)?;
        Ok(Election { cluster, name: name.to_string() })
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The cluster it is held on.
    pub fn cluster(&self) -> &Arc<Cluster> {
        &self.cluster
    }

    fn path(&self, call: &str) -> String {
        format!("/v1/elections/{}{call}", self.name)
    }

    /// Joins the queue with `session` and `value`, and returns at once: the
    /// answer says whether it leads already. Not resent after a request
    /// that may have arrived (a second campaign of a session is refused):
    /// on such an error, close the session and start again.
    pub async fn campaign(&self, session: &Session, value: &str) -> Result<Campaign, Error> {
        check_value(value)?;
        if let Some(reason) = session.ended() {
            return Err(Error::SessionEnded { id: session.id(), reason });
        }
        let body =
            serde_json::json!(CampaignRequest { session: session.id(), value: value.to_string() });
        self.cluster
            .json(Method::POST, &self.path("/campaign"), Some(&body), REQUEST_TIMEOUT, Retry::Once)
            .await
    }

    /// One long poll: answers when `session`'s candidacy leads, or after
    /// `timeout` (at most 60 s) with how many are ahead. A candidacy that is
    /// gone is a [`crate::Refused`] 404.
    pub async fn wait(&self, session: &Session, timeout: Duration) -> Result<Campaign, Error> {
        let path = self.path(&format!(
            "/wait?session={}&timeout_ms={}",
            session.id(),
            timeout.as_millis()
        ));
        self.cluster
            .json(Method::GET, &path, None, timeout + REQUEST_TIMEOUT, Retry::Idempotent)
            .await
    }

    /// Waits until `session`'s candidacy leads and returns its fencing
    /// token. Fails when the session ends (at its deadline at the latest)
    /// or the candidacy is gone; a node that does not answer is replaced
    /// by the next one.
    pub async fn wait_until_leader(&self, session: &Session) -> Result<u64, Error> {
        let mut pause = OBSERVE_BACKOFF_MIN;
        loop {
            let answer = tokio::select! {
                reason = session.lost() => {
                    return Err(Error::SessionEnded { id: session.id(), reason });
                }
                a = self.wait(session, WAIT_POLL) => a,
            };
            match answer {
                Ok(Campaign { leader: true, token: Some(token), .. }) => {
                    // A leadership is only worth anything before the deadline.
                    if let Some(reason) = session.ended() {
                        return Err(Error::SessionEnded { id: session.id(), reason });
                    }
                    return Ok(token);
                }
                Ok(_) => pause = OBSERVE_BACKOFF_MIN,
                Err(e @ (Error::AuthRefused(_) | Error::Invalid(_) | Error::Config(_))) => {
                    return Err(e)
                }
                Err(Error::Refused(r)) if final_refusal(r.status) => {
                    if r.status == StatusCode::NOT_FOUND {
                        if let Some(reason) = session.ended() {
                            return Err(Error::SessionEnded { id: session.id(), reason });
                        }
                    }
                    return Err(Error::Refused(r));
                }
                Err(e) => {
                    tracing::debug!(election = %self.name, error = %e, "wait failed; again");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(OBSERVE_BACKOFF_MAX);
                }
            }
        }
    }

    /// Leaves the queue (and leadership) with `session`; its successor is
    /// woken at once. A candidacy that is already gone is not an error.
    pub async fn resign(&self, session: &Session) -> Result<(), Error> {
        let body = serde_json::json!(ResignRequest { session: session.id() });
        let (url, answer) = self
            .cluster
            .call(
                Method::POST,
                &self.path("/resign"),
                Some(&body),
                REQUEST_TIMEOUT,
                Retry::Idempotent,
            )
            .await?;
        if answer.status == StatusCode::NOT_FOUND {
            return Ok(());
        }
        answer.json::<ResignBody>(&url).map(|_| ())
    }

    /// Changes the value of `session`'s leadership without a new election;
    /// returns its token. Refused (409) if `session` does not lead.
    pub async fn proclaim(&self, session: &Session, value: &str) -> Result<u64, Error> {
        check_value(value)?;
        let body =
            serde_json::json!(ProclaimRequest { session: session.id(), value: value.to_string() });
        let answer: ProclaimBody = self
            .cluster
            .json(
                Method::POST,
                &self.path("/proclaim"),
                Some(&body),
                REQUEST_TIMEOUT,
                Retry::Idempotent,
            )
            .await?;
        Ok(answer.token)
    }

    /// The leader and candidates now.
    pub async fn state(&self) -> Result<ElectionState, Error> {
        self.cluster
            .json(Method::GET, &self.path(""), None, REQUEST_TIMEOUT, Retry::Idempotent)
            .await
    }

    /// The leader now, if any.
    pub async fn leader(&self) -> Result<Option<Leader>, Error> {
        Ok(self.state().await?.leader)
    }

    /// Whether `token` is the current leader's token (a linearizable read):
    /// for resources that cannot store tokens.
    pub async fn check(&self, token: u64) -> Result<Check, Error> {
        let path = self.path(&format!("/check?token={token}"));
        self.cluster.json(Method::GET, &path, None, REQUEST_TIMEOUT, Retry::Idempotent).await
    }

    /// Follows the election's changes: the current state first, then every
    /// change, including "no leader" (see [`Observer::next`]).
    pub fn observe(&self) -> Observer {
        Observer {
            election: self.clone(),
            stream: None,
            last: None,
            last_id: None,
            afresh: false,
            refused_after: None,
            pending: None,
            backoff: OBSERVE_BACKOFF_MIN,
        }
    }
}

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
    election: Election,
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
    /// The next change. Errors only when reconnecting cannot help: the
    /// token was refused, or the server refused the request (4xx but 429).
    pub async fn next(&mut self) -> Result<Observed, Error> {
        loop {
            if let Some(pending) = self.pending.take() {
                self.last = Some(pending.clone());
                return Ok(pending);
            }
            let cluster = &self.election.cluster;
            let endpoint = cluster.current().to_string();
            if self.stream.is_none() {
                let url = format!("{endpoint}{}", self.election.path("/observe"));
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
        self.election.cluster.skip(endpoint);
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
    fn names_and_values_are_checked_before_asking() {
        assert!(check_name("db-primary.eu_1").is_ok());
        assert!(check_name(&"a".repeat(128)).is_ok());
        for bad in ["", "a/b", "a b", "é", &"a".repeat(129)] {
            let err = check_name(bad).unwrap_err().to_string();
            assert!(err.contains("bad election name"), "{bad}: {err}");
        }
        assert!(check_value(&"v".repeat(4096)).is_ok());
        assert!(check_value(&"v".repeat(4097)).unwrap_err().to_string().contains("4096"));
    }

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
