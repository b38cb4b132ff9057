//! The store-independent layer (docs/STORES.md §1, layer 2) over a store
//! whose answers the test scripts, in paused time: the races a real store
//! cannot be made to lose on demand (a leadership answered after the
//! deadline, a candidacy deleted while waiting, a suspension, a renewal
//! that proves less than its own send time). The stores themselves are
//! tested against real servers (crates/store-etcd, crates/store-zk, and
//! tenure's in crates/tenure/tests).

use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tenure_elect::failover::{Plan, Timings};
use tenure_elect::session::trusted_span;
use tenure_elect::{
    Candidacy, Check, Election, Error, Loss, Observed, Renewal, Session, SessionId, Store,
    StoreError, StoreKind, Waited,
};
use tokio::sync::Notify;
use tokio::time::Instant;

const TTL: Duration = Duration::from_secs(3);

/// What the scripted store answers.
#[derive(Debug, Default)]
struct Script {
    /// Renewals fail (no answer) from now on.
    renewals_fail: bool,
    /// Renewals answer this much before their own send time.
    renewal_lag: Duration,
    /// How a wait ends once `release` is notified.
    wait_answer: Option<Result<Waited, &'static str>>,
    /// The suspension's reason, once `suspend` is notified.
    suspended: Option<String>,
    renewals: u32,
    /// When the session was revoked, if it was.
    revoked_at: Option<Instant>,
}

#[derive(Debug, Default)]
struct Scripted {
    script: Mutex<Script>,
    release: Notify,
    suspend: Notify,
}

fn no_answer() -> StoreError {
    StoreError::NoAnswer { endpoint: "scripted".into(), sent: true, source: "scripted".into() }
}

impl Store for Scripted {
    fn kind(&self) -> StoreKind {
        StoreKind::Etcd
    }

    fn grant(&self, ttl: Duration) -> BoxFuture<'_, Result<Renewal, StoreError>> {
        Box::pin(async move { Ok(Renewal { session: SessionId(7), sent: Instant::now(), ttl }) })
    }

    fn renew(&self, session: SessionId) -> BoxFuture<'_, Result<Renewal, StoreError>> {
        Box::pin(async move {
            let sent = Instant::now();
            let mut s = self.script.lock().unwrap();
            s.renewals += 1;
            if s.renewals_fail {
                return Err(no_answer());
            }
            Ok(Renewal { session, sent: sent - s.renewal_lag, ttl: TTL })
        })
    }

    fn revoke(&self, _session: SessionId) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async move {
            self.script.lock().unwrap().revoked_at.get_or_insert(Instant::now());
            Ok(())
        })
    }

    fn campaign<'a>(
        &'a self,
        session: SessionId,
        election: &'a str,
        _value: &'a str,
    ) -> BoxFuture<'a, Result<Candidacy, StoreError>> {
        Box::pin(async move {
            Ok(Candidacy {
                session,
                election: election.into(),
                key: "k".into(),
                token: 40,
                leader: false,
            })
        })
    }

    fn wait<'a>(
        &'a self,
        _candidacy: &'a Candidacy,
        _timeout: Duration,
    ) -> BoxFuture<'a, Result<Waited, StoreError>> {
        Box::pin(async move {
            self.release.notified().await;
            match self.script.lock().unwrap().wait_answer.expect("scripted") {
                Ok(w) => Ok(w),
                Err("gone") => Err(StoreError::Gone("the candidacy's key was deleted".into())),
                Err(_) => Err(no_answer()),
            }
        })
    }

    fn resign<'a>(&'a self, _candidacy: &'a Candidacy) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async { Ok(()) })
    }

    fn check<'a>(
        &'a self,
        _election: &'a str,
        _token: u64,
    ) -> BoxFuture<'a, Result<Check, StoreError>> {
        Box::pin(async { Err(StoreError::Refused("not scripted".into())) })
    }

    fn timings(&self) -> BoxFuture<'_, Result<Option<Timings>, StoreError>> {
        // tenure's defaults: heartbeat 100 ms, election timeout 1000 ms.
        Box::pin(std::future::ready(Ok(Some(Timings {
            heartbeat_ms: 100,
            election_timeout_ms: 1000,
            candidacy_stagger_ms: 50,
            round_trip_ms: 50,
            clock_drift_ppm: 50_000,
            voters: 3,
            failover_bound_ms: 1555,
        }))))
    }

    fn suspended(&self, _session: SessionId) -> BoxFuture<'_, String> {
        Box::pin(async move {
            self.suspend.notified().await;
            self.script.lock().unwrap().suspended.clone().unwrap_or_default()
        })
    }

    fn observe(
        &self,
        _election: &str,
    ) -> Result<BoxStream<'static, Result<Observed, StoreError>>, StoreError> {
        Err(StoreError::Refused("not scripted".into()))
    }
}

async fn started() -> (Arc<Scripted>, Session, Election, Candidacy) {
    let scripted = Arc::new(Scripted::default());
    let store: Arc<dyn Store> = scripted.clone();
    let session = Session::start(store.clone(), TTL).await.unwrap();
    let election = Election::new(store, "jobs").unwrap();
    let candidacy = election.campaign(&session, "v").await.unwrap();
    (scripted, session, election, candidacy)
}

/// Answers the pending wait with `answer` at `after` from now.
async fn answer_wait(s: &Scripted, after: Duration, answer: Result<Waited, &'static str>) {
    tokio::time::sleep(after).await;
    s.script.lock().unwrap().wait_answer = Some(answer);
    s.release.notify_waiters();
}

/// The wait loses the race with the deadline: a store answering after it
/// gives no leadership. (`Election` checks the session again after a
/// `Leads` too, for a task starved past the deadline; paused time cannot
/// starve a task, so that check is not what this test reaches.)
#[tokio::test(start_paused = true)]
async fn no_leadership_once_the_deadline_passed_even_if_the_store_answers_later() {
    let (s, session, election, c) = started().await;
    let start = Instant::now();
    s.script.lock().unwrap().renewals_fail = true;
    let late = trusted_span(TTL) + Duration::from_millis(1);
    let waited = async {
        let got = election.wait_until_leader(&session, &c).await;
        (got, start.elapsed())
    };
    let ((got, ended_at), ()) =
        tokio::join!(waited, answer_wait(&s, late, Ok(Waited::Leads { token: 40 })));
    match got {
        Err(Error::SessionEnded { reason: Loss::DeadlinePassed, .. }) => {}
        other => panic!("a leadership after the deadline: {other:?}"),
    }
    assert!(ended_at <= trusted_span(TTL), "ended at {ended_at:?}");
    assert_eq!(session.ended(), Some(Loss::DeadlinePassed));
}

#[tokio::test(start_paused = true)]
async fn a_candidacy_deleted_while_waiting_ends_the_wait_never_leads() {
    let (s, session, election, c) = started().await;
    let (got, ()) = tokio::join!(
        election.wait_until_leader(&session, &c),
        answer_wait(&s, Duration::from_millis(100), Err("gone"))
    );
    match got {
        Err(Error::Store(StoreError::Gone(why))) => assert!(why.contains("deleted"), "{why}"),
        other => panic!("expected Gone: {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_leadership_with_another_token_is_refused() {
    let (s, session, election, c) = started().await;
    let (got, ()) = tokio::join!(
        election.wait_until_leader(&session, &c),
        answer_wait(&s, Duration::from_millis(100), Ok(Waited::Leads { token: 41 }))
    );
    assert!(matches!(got, Err(Error::Store(StoreError::Refused(_)))), "{got:?}");
    let (got, ()) = tokio::join!(
        election.wait_until_leader(&session, &c),
        answer_wait(&s, Duration::from_millis(100), Ok(Waited::Leads { token: 40 }))
    );
    assert_eq!(got.unwrap(), 40);
}

#[tokio::test(start_paused = true)]
async fn a_suspension_ends_the_session_and_the_wait_at_once() {
    let (s, session, election, c) = started().await;
    let start = Instant::now();
    let suspend = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        s.script.lock().unwrap().suspended = Some("Disconnected".into());
        s.suspend.notify_waiters();
    };
    let waited = async {
        let got = election.wait_until_leader(&session, &c).await;
        (got, start.elapsed())
    };
    let ((got, ended_at), ()) = tokio::join!(waited, suspend);
    match got {
        Err(Error::SessionEnded { reason: Loss::Suspended, .. }) => {}
        other => panic!("expected a suspension: {other:?}"),
    }
    assert!(ended_at <= Duration::from_millis(201), "{ended_at:?}");
    // Nothing is campaigned on a suspended session.
    assert!(matches!(
        election.campaign(&session, "v").await,
        Err(Error::SessionEnded { reason: Loss::Suspended, .. })
    ));
}

#[tokio::test(start_paused = true)]
async fn the_deadline_rests_on_the_send_time_the_store_answers() {
    let (s, session, _election, _c) = started().await;
    // The store's renewals prove only an instant 1 s before their own send
    // (as ZooKeeper's rest on the previous renewal).
    let lag = Duration::from_secs(1);
    s.script.lock().unwrap().renewal_lag = lag;
    let mut watch = session.watch();
    let before = Instant::now();
    watch.changed().await;
    let renewed_at = Instant::now();
    assert_eq!(renewed_at - before, TTL / 3, "renewed every TTL/3");
    assert_eq!(session.deadline(), renewed_at - lag + trusted_span(TTL));
    assert_eq!(s.script.lock().unwrap().renewals, 1);
}

#[tokio::test(start_paused = true)]
async fn a_session_of_another_store_is_refused() {
    let (_s, session, _election, _c) = started().await;
    let other: Arc<dyn Store> = Arc::new(Scripted::default());
    let election = Election::new(other, "jobs").unwrap();
    let err = election.campaign(&session, "v").await.unwrap_err().to_string();
    assert!(err.contains("another store"), "{err}");
}

#[tokio::test(start_paused = true)]
async fn a_suspended_session_is_revoked_at_its_deadline_not_before() {
    // The holder's work may run until the deadline (tenure run's guard stops
    // its command there at the latest): a revoke at the suspension would let
    // a successor lead while it still works.
    let (s, session, _election, _c) = started().await;
    s.script.lock().unwrap().suspended = Some("connection lost".into());
    s.suspend.notify_one();
    assert_eq!(session.lost().await, Loss::Suspended);
    let deadline = session.deadline();
    assert!(Instant::now() < deadline, "suspended before the deadline");
    tokio::time::sleep(TTL).await;
    let revoked = s.script.lock().unwrap().revoked_at.expect("revoked once the deadline passed");
    assert!(revoked >= deadline, "revoked {:?} before the deadline", deadline - revoked);
}

/// A store outage like a tenure failover (no renewal answered from 0.9 s
/// to 2.1 s of a 3 s TTL, deadline at 2.45 s): the renewal that failed is
/// tried again with a backoff (25 ms doubling to 200 ms), not every 50 ms
/// nor only at the next TTL/3 tick, and the first try after the outage
/// keeps the session. Once the deadline passes, the tries stop.
#[tokio::test(start_paused = true)]
async fn failed_renewals_are_retried_with_a_bounded_backoff_until_the_deadline() {
    use tenure_elect::session::{RENEW_RETRY_PAUSE, RENEW_RETRY_PAUSE_MAX};
    assert_eq!((RENEW_RETRY_PAUSE.as_millis(), RENEW_RETRY_PAUSE_MAX.as_millis()), (25, 200));
    let (s, session, _election, _c) = started().await;
    let start = Instant::now();
    tokio::time::sleep(Duration::from_millis(900)).await;
    s.script.lock().unwrap().renewals_fail = true;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let failed = {
        let mut script = s.script.lock().unwrap();
        script.renewals_fail = false;
        script.renewals
    };
    // Tries at 1.000, 1.025, 1.075, 1.175, 1.375 s, then every 200 ms to
    // 1.975 s: 8 (every 50 ms would be 22).
    assert_eq!(failed, 8, "tries during the outage");
    // The next try, at 2.175 s, succeeds: the session is kept.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(session.ended(), None);
    assert!(session.deadline() > start + Duration::from_millis(2175) + trusted_span(TTL) / 2);

    // A longer outage: the tries stop at the deadline.
    s.script.lock().unwrap().renewals_fail = true;
    let tries_before = s.script.lock().unwrap().renewals;
    assert_eq!(session.lost().await, Loss::DeadlinePassed);
    let tries = s.script.lock().unwrap().renewals - tries_before;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(s.script.lock().unwrap().renewals - tries_before, tries, "no try after the loss");
    assert!(tries <= 12, "{tries} tries in one TTL");
}

/// The check the CLI and `LeaderElector` make: against the store's
/// timings, a TTL that cannot ride out one failover is named with the
/// smallest one that can.
#[tokio::test]
async fn a_ttl_too_short_for_the_stores_failover_is_warned_about() {
    let store = Scripted::default();
    let plan = |ttl: Duration| Plan {
        ttl,
        interval: store.renew_interval(ttl),
        lag: store.renewal_lag(ttl),
        grace: Duration::ZERO,
    };
    let w = tenure_elect::failover::warning(&store, TTL, plan).await.expect("a warning");
    assert!(w.contains("TTL of 3000 ms cannot ride out") && w.ends_with("here is 3900 ms"), "{w}");
    let quiet = tenure_elect::failover::warning(&store, Duration::from_millis(3900), plan).await;
    assert_eq!(quiet, None);
}
