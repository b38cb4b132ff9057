//! The observe part of `tenure bench elect`: how long after a change to an
//! election its observers (`GET /v1/elections/{name}/observe`, Server-Sent
//! Events) hear of it, on the tenure leader and on a follower.
//!
//! Two sessions take turns on one election name; the changes cycle through
//! four kinds, each timed from just before its request is sent (so the
//! figure includes the commit) to the event's arrival at each observer:
//!
//! * **proclaim**: the leader sets a new value (same token);
//! * **handover**: the leader resigns and the queued candidate leads;
//! * **vacate**: the only candidate resigns (`no-leader`);
//! * **claim**: a candidate campaigns on the empty election and leads.
//!
//! Between timed changes the bench makes untimed ones that must not be
//! told (a candidate queueing behind the leader, the queued one resigning).
//! Every observer must receive exactly the expected event of each change,
//! in order, with growing revisions: a missed, extra or reordered event
//! fails the bench.

use super::stats::{summarize, Summary};
use super::system::{System, Tenure};
use anyhow::{anyhow, bail, Context};
use serde::Serialize;
use std::sync::Arc;
use std::time::Duration;
use tenure_client::{Candidacy, Cluster, Election, Observed, Session, Store, TenureStore};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Most observed changes (`--observe-trials`).
pub const MAX_OBSERVE_TRIALS: usize = 10_000;
/// The goal for an observe event's latency on loopback, p99, ms.
pub const OBSERVE_GOAL_MS: f64 = 5.0;
/// The longest an observer may take to receive one event before the bench
/// counts it as missed.
const EVENT_BOUND: Duration = Duration::from_secs(5);
/// Events an observer's reader holds for the bench (it takes them one change
/// at a time, so a handful are ever queued).
const EVENT_QUEUE: usize = 64;
/// After the last change, how long the bench listens for events that
/// should not come.
const QUIET_AFTER_LAST: Duration = Duration::from_millis(100);
/// The session TTL of the two candidates the bench drives (renewed in the
/// background by the client library every TTL / 3).
const SESSION_TTL: Duration = Duration::from_secs(10);

/// Observe-event latencies, ms, per observer.
#[derive(Debug, Serialize)]
pub struct ObserveReport {
    /// Timed changes.
    pub changes: usize,
    /// Node id (1-based) of the tenure leader, which the changes went to
    /// and the first observer followed.
    pub leader_node: usize,
    /// Node id (1-based) of the follower the second observer followed.
    pub follower_node: usize,
    /// From the change's request sent to the event at the leader's observer.
    pub leader_ms: Option<Summary>,
    /// The same at the follower's observer.
    pub follower_ms: Option<Summary>,
    /// For comparison: from the change's request sent to its answer (the
    /// commit as the client that made the change sees it).
    pub answer_ms: Option<Summary>,
    /// The observe path's own share: from the change's answer arriving to
    /// the event at the leader's observer (negative: the event came first).
    /// The answer is the writer's view of the commit, the moment after
    /// which there is something to observe.
    pub leader_after_commit_ms: Option<Summary>,
    /// The same at the follower's observer.
    pub follower_after_commit_ms: Option<Summary>,
}

/// One timed change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Change {
    Proclaim,
    Handover,
    Vacate,
    Claim,
}

const CYCLE: [Change; 4] = [Change::Proclaim, Change::Handover, Change::Vacate, Change::Claim];

/// What an event says, without its revision.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Expected {
    Leader { session: u64, value: String, token: u64 },
    NoLeader,
}

impl Expected {
    fn matches(&self, seen: &Observed) -> bool {
        match (self, seen) {
            (Expected::NoLeader, Observed::NoLeader { .. }) => true,
            (
                Expected::Leader { session, value, token },
                Observed::Leader { session: s, value: v, token: t, .. },
            ) => session == s && value == v && token == t,
            _ => false,
        }
    }
}

fn revision(o: &Observed) -> u64 {
    match o {
        Observed::Leader { revision, .. } | Observed::NoLeader { revision } => *revision,
        // Never parsed here (a `compacted` event fails the bench), and never
        // what a change is expected to cause.
        Observed::Missed { current, .. } => *current,
    }
}

/// One observe stream read by a task of its own, which stamps each event
/// with its arrival.
struct Observer {
    what: String,
    events: mpsc::Receiver<(Instant, anyhow::Result<Observed>)>,
    reader: JoinHandle<()>,
    last_revision: u64,
}

impl Drop for Observer {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl Observer {
    async fn open(
        client: &tenure_client::Client,
        endpoint: &str,
        name: &str,
        what: String,
    ) -> anyhow::Result<Self> {
        let url = format!("{endpoint}/v1/elections/{name}/observe");
        let mut stream = client.event_stream(&url, None).await?;
        let (tx, events) = mpsc::channel(EVENT_QUEUE);
        let reader = tokio::spawn(async move {
            loop {
                let read = match stream.next().await {
                    Ok(Some(event)) => parse(&event),
                    Ok(None) => Err(anyhow!("{url}: the stream ended")),
                    Err(e) => Err(e.into()),
                };
                let failed = read.is_err();
                if tx.send((Instant::now(), read)).await.is_err() || failed {
                    return;
                }
            }
        });
        Ok(Observer { what, events, reader, last_revision: 0 })
    }

    /// The next event, which must say `expected`; when it arrived.
    async fn expect(&mut self, expected: &Expected, change: &str) -> anyhow::Result<Instant> {
        let (at, seen) = tokio::time::timeout(EVENT_BOUND, self.events.recv())
            .await
            .map_err(|_| {
                anyhow!(
                    "{}: missed the event of {change} ({expected:?}): none within {EVENT_BOUND:?}",
                    self.what
                )
            })?
            .ok_or_else(|| anyhow!("{}: the reader stopped", self.what))?;
        let seen =
            seen.with_context(|| format!("{}: waiting for the event of {change}", self.what))?;
        if !expected.matches(&seen) {
            bail!(
                "{}: the event after {change} is {seen:?}, expected {expected:?} \
                 (an event missed, extra or out of order)",
                self.what
            );
        }
        let r = revision(&seen);
        if r <= self.last_revision {
            bail!(
                "{}: the event of {change} has revision {r}, not above the previous event's {}",
                self.what,
                self.last_revision
            );
        }
        self.last_revision = r;
        Ok(at)
    }

    /// Fails if an event is waiting or comes within `quiet`.
    async fn expect_none(&mut self, quiet: Duration) -> anyhow::Result<()> {
        match tokio::time::timeout(quiet, self.events.recv()).await {
            Err(_) => Ok(()),
            Ok(None) => bail!("{}: the reader stopped", self.what),
            Ok(Some((_, seen))) => bail!("{}: an event no change explains: {seen:?}", self.what),
        }
    }
}

/// An observe event as an [`Observed`]; other event names are errors here.
fn parse(event: &tenure_client::SseEvent) -> anyhow::Result<Observed> {
    let v: serde_json::Value = serde_json::from_str(&event.data)
        .with_context(|| format!("bad {} event {}", event.event, event.data))?;
    let revision = v["revision"].as_u64().ok_or_else(|| anyhow!("no revision in {v}"))?;
    match event.event.as_str() {
        "leader" => Ok(Observed::Leader {
            session: v["session"].as_u64().ok_or_else(|| anyhow!("no session in {v}"))?,
            value: v["value"].as_str().ok_or_else(|| anyhow!("no value in {v}"))?.to_string(),
            token: v["token"].as_u64().ok_or_else(|| anyhow!("no token in {v}"))?,
            revision,
        }),
        "no-leader" => Ok(Observed::NoLeader { revision }),
        other => bail!("an event named {other:?}: {}", event.data),
    }
}

/// A candidate: its session and, while it is in the queue, its value and place.
struct Seat {
    session: Session,
    queued: Option<(String, u64)>,
    candidacy: Option<Candidacy>,
}

impl Seat {
    async fn campaign(&mut self, election: &Election, value: String) -> anyhow::Result<u64> {
        let c = election.campaign(&self.session, &value).await?;
        let token = c.token;
        self.queued = Some((value, token));
        self.candidacy = Some(c);
        Ok(token)
    }

    async fn resign(&mut self, election: &Election) -> anyhow::Result<()> {
        if let Some(c) = self.candidacy.take() {
            election.resign(&c).await?;
        }
        self.queued = None;
        Ok(())
    }

    /// The event that says this seat leads.
    fn leads(&self) -> anyhow::Result<Expected> {
        let (value, token) = self.queued.clone().ok_or_else(|| anyhow!("not a candidate"))?;
        Ok(Expected::Leader { session: self.session.id(), value, token })
    }
}

/// The two candidates the bench drives on one election: `lead` leads
/// and the other is queued behind it before every change but a claim.
struct Driver {
    store: Arc<TenureStore>,
    election: Election,
    seats: Vec<Seat>,
    lead: usize,
}

impl Driver {
    /// Makes change `t`: when its request was sent and what its event must say.
    async fn change(&mut self, t: usize, change: Change) -> anyhow::Result<(Instant, Expected)> {
        let (election, seats) = (&self.election, &mut self.seats);
        let (lead, other) = (self.lead, 1 - self.lead);
        match change {
            Change::Proclaim => {
                let value = format!("p-{t}");
                let sent = Instant::now();
                let token = self
                    .store
                    .proclaim(seats[lead].session.session_id(), election.name(), &value)
                    .await?;
                let held = seats[lead].queued.as_ref().map(|q| q.1);
                if held != Some(token) {
                    bail!("the proclaim answered token {token}, the leader holds {held:?}");
                }
                seats[lead].queued = Some((value, token));
                Ok((sent, seats[lead].leads()?))
            }
            Change::Handover => {
                let sent = Instant::now();
                seats[lead].resign(election).await?;
                self.lead = other;
                Ok((sent, seats[other].leads()?))
            }
            Change::Vacate => {
                seats[other].resign(election).await?; // untimed: the queued one leaves
                let sent = Instant::now();
                seats[lead].resign(election).await?;
                Ok((sent, Expected::NoLeader))
            }
            Change::Claim => {
                self.lead = other;
                let sent = Instant::now();
                seats[other].campaign(election, format!("c-{t}-{other}")).await?;
                Ok((sent, seats[other].leads()?))
            }
        }
    }

    /// Untimed, told to nobody: after a handover or a claim, the seat not
    /// leading queues behind the leader.
    async fn requeue(&mut self, t: usize, change: Change) -> anyhow::Result<()> {
        if matches!(change, Change::Handover | Change::Claim) {
            let other = 1 - self.lead;
            self.seats[other].campaign(&self.election, format!("c-{t}-{other}")).await?;
        }
        Ok(())
    }
}

/// Makes `changes` timed changes on a fresh election, observed on the
/// `leader` and on the `follower` node (indexes).
pub async fn measure(
    tenure: &Tenure,
    leader: usize,
    follower: usize,
    changes: usize,
) -> anyhow::Result<ObserveReport> {
    let client = tenure.client().clone();
    // The leader first: every change is sent to it.
    let order = std::iter::once(leader).chain((0..tenure.len()).filter(|&i| i != leader));
    let endpoints: Vec<String> = order.map(|i| tenure.endpoint(i).to_string()).collect();
    let cluster = Arc::new(Cluster::new(client.clone(), endpoints)?);
    let name = format!("bench-observe-{}", std::process::id());
    let store = Arc::new(TenureStore::new(cluster));
    let shared: Arc<dyn Store> = store.clone();
    let election = Election::new(shared.clone(), &name)?;
    let mut seats = Vec::new();
    for _ in 0..2 {
        let session = Session::start(shared.clone(), SESSION_TTL).await?;
        seats.push(Seat { session, queued: None, candidacy: None });
    }
    let mut driver = Driver { store, election, seats, lead: 0 };
    driver.seats[0].campaign(&driver.election, "c-start-0".into()).await?;
    driver.seats[1].campaign(&driver.election, "c-start-1".into()).await?;
    let mut observers = Vec::new();
    for (i, role) in [(leader, "leader"), (follower, "follower")] {
        let what = format!("the observer on node {} (the {role})", i + 1);
        let mut o = Observer::open(&client, tenure.endpoint(i), &name, what).await?;
        o.expect(&driver.seats[0].leads()?, "opening the stream").await?;
        observers.push(o);
    }
    let mut samples = [Vec::with_capacity(changes), Vec::with_capacity(changes)];
    let mut after_commit = [Vec::with_capacity(changes), Vec::with_capacity(changes)];
    let mut answers = Vec::with_capacity(changes);
    for t in 0..changes {
        let change = CYCLE[t % CYCLE.len()];
        let what = format!("change {t} ({change:?})");
        let (sent, expected) = driver.change(t, change).await.context(what.clone())?;
        let answered = Instant::now();
        answers.push(ms_between(sent, answered));
        for (k, o) in observers.iter_mut().enumerate() {
            let at = o.expect(&expected, &what).await?;
            samples[k].push(ms_between(sent, at));
            after_commit[k].push(ms_between(answered, at));
        }
        driver.requeue(t, change).await.with_context(|| format!("after {what}"))?;
    }
    for o in &mut observers {
        o.expect_none(QUIET_AFTER_LAST).await?;
    }
    drop(observers);
    for seat in driver.seats {
        seat.session.close().await?;
    }
    Ok(ObserveReport {
        changes,
        leader_node: leader + 1,
        follower_node: follower + 1,
        leader_ms: summarize(&samples[0]),
        follower_ms: summarize(&samples[1]),
        answer_ms: summarize(&answers),
        leader_after_commit_ms: summarize(&after_commit[0]),
        follower_after_commit_ms: summarize(&after_commit[1]),
    })
}

/// `to − from` in milliseconds, negative when `to` came first.
fn ms_between(from: Instant, to: Instant) -> f64 {
    match to.checked_duration_since(from) {
        Some(d) => d.as_secs_f64() * 1000.0,
        None => -(from.duration_since(to).as_secs_f64() * 1000.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sse(event: &str, data: &str) -> tenure_client::SseEvent {
        tenure_client::SseEvent { event: event.into(), id: None, data: data.into() }
    }

    #[test]
    fn events_are_read_and_compared_without_their_revision() {
        let leader =
            parse(&sse("leader", r#"{"session":7,"value":"a","token":12,"revision":15}"#)).unwrap();
        assert_eq!(revision(&leader), 15);
        let expected = Expected::Leader { session: 7, value: "a".into(), token: 12 };
        assert!(expected.matches(&leader));
        let proclaimed = Expected::Leader { session: 7, value: "b".into(), token: 12 };
        assert!(!proclaimed.matches(&leader), "another value is another event");
        assert!(!Expected::NoLeader.matches(&leader));
        let none = parse(&sse("no-leader", r#"{"revision":16}"#)).unwrap();
        assert!(Expected::NoLeader.matches(&none) && !expected.matches(&none));
        assert!(parse(&sse("other", r#"{"revision":1}"#)).is_err());
        assert!(parse(&sse("leader", r#"{"revision":1}"#)).is_err(), "no session");
    }
}
