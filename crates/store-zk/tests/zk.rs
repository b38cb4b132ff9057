//! The ZooKeeper store against real ZooKeeper servers (`tenure_testkit::zookeeper`).

use tenure_testkit::zookeeper as common;

use common::{serial, Ensemble};
use futures_util::StreamExt;
use std::sync::Arc;
use std::time::Duration;
use tenure_elect::store::{Candidacy, Store, StoreError, Waited};
use tenure_elect::Observed;
use tenure_store_zk::{ZkOptions, ZkStore};
use tokio::time::Instant;
use zookeeper_client::{Acls, Client, CreateMode};

const TTL: Duration = Duration::from_secs(2);

/// Runs `test` on a runtime of its own, one test at a time.
fn run<F: std::future::Future>(test: F) -> F::Output {
    let _serial = serial();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build();
    rt.unwrap().block_on(test)
}

fn store(ensemble: &Ensemble) -> Arc<ZkStore> {
    Arc::new(ZkStore::new(ensemble.servers(), ZkOptions::default()).unwrap())
}

/// A plain client of its own, to look at (or tamper with) the znodes.
async fn raw(ensemble: &Ensemble) -> Client {
    Client::connector()
        .with_session_timeout(TTL)
        .connect(&ensemble.servers().join(","))
        .await
        .unwrap()
}

#[test]
fn grant_reports_the_negotiated_ttl_and_renew_rests_on_the_previous_send() {
    run(async {
        let zk = Ensemble::start(1);
        let store = store(&zk);
        // maxSessionTimeout=60000: a longer TTL is negotiated down, and reported so.
        let capped = store.grant(Duration::from_secs(90)).await.unwrap();
        assert_eq!(capped.ttl, Duration::from_secs(60));
        store.revoke(capped.session).await.unwrap();

        let before = Instant::now();
        let granted = store.grant(TTL).await.unwrap();
        assert_eq!(granted.ttl, TTL);
        assert!(granted.sent >= before && granted.sent <= Instant::now());
        // The first renewal rests on the grant's send time, each next one on
        // the previous renewal's.
        let first_call = Instant::now();
        let r1 = store.renew(granted.session).await.unwrap();
        let first_done = Instant::now();
        assert_eq!(r1.sent, granted.sent);
        assert_eq!((r1.session, r1.ttl), (granted.session, TTL));
        let r2 = store.renew(granted.session).await.unwrap();
        assert!(r2.sent >= first_call && r2.sent <= first_done, "{r2:?}");
        assert!(r2.deadline() < r2.sent + TTL);

        store.revoke(granted.session).await.unwrap();
        let gone = store.renew(granted.session).await.unwrap_err();
        assert!(matches!(gone, StoreError::Gone(_)), "{gone:?}");
        // Revoking again is fine.
        store.revoke(granted.session).await.unwrap();
        // The session is closed on the server too: its id is no longer served.
        assert_eq!(zk.serving(granted.session.0), None);

        // A store that needs a longer timeout than the ensemble grants refuses.
        let strict = ZkOptions { min_ttl: Duration::from_secs(3), ..ZkOptions::default() };
        let strict = ZkStore::new(zk.servers(), strict).unwrap();
        let refused = strict.grant(TTL).await.unwrap_err();
        assert!(matches!(refused, StoreError::Refused(_)), "{refused:?}");
    })
}

#[test]
fn the_first_candidacy_leads_with_its_czxid_and_the_second_queues_behind_it() {
    run(async {
        let zk = Ensemble::start(1);
        let store = store(&zk);
        let a = store.grant(TTL).await.unwrap().session;
        let b = store.grant(TTL).await.unwrap().session;
        let ca = store.campaign(a, "jobs", "node-a").await.unwrap();
        assert!(ca.leader, "{ca:?}");
        assert!(
            ca.key.starts_with(&format!("/tenure/elections/jobs/c-{:016x}-", a.0)),
            "{}",
            ca.key
        );
        let look = raw(&zk).await;
        let (data, stat) = look.get_data(&ca.key).await.unwrap();
        assert_eq!(data, b"node-a");
        assert_eq!(ca.token, stat.czxid as u64);
        assert_eq!(stat.ephemeral_owner as u64, a.0);

        let cb = store.campaign(b, "jobs", "node-b").await.unwrap();
        assert!(!cb.leader && cb.token > ca.token, "{ca:?} {cb:?}");
        assert_eq!(
            store.wait(&ca, Duration::from_millis(100)).await.unwrap(),
            Waited::Leads { token: ca.token }
        );
        let started = Instant::now();
        assert_eq!(
            store.wait(&cb, Duration::from_millis(300)).await.unwrap(),
            Waited::Ahead { ahead: 1 }
        );
        assert!(started.elapsed() >= Duration::from_millis(300));
        // A campaign retried (its answer lost) adopts the same node.
        let again = store.campaign(b, "jobs", "node-b").await.unwrap();
        assert_eq!(again, cb);
        let bad = store.campaign(a, "no/slash", "x").await.unwrap_err();
        assert!(matches!(bad, StoreError::Invalid(_)), "{bad:?}");
    })
}

#[test]
fn a_resignation_hands_over_to_the_waiting_candidacy() {
    run(async {
        let zk = Ensemble::start(1);
        let store = store(&zk);
        let a = store.grant(TTL).await.unwrap().session;
        let b = store.grant(TTL).await.unwrap().session;
        let ca = store.campaign(a, "handover", "a").await.unwrap();
        let cb = store.campaign(b, "handover", "b").await.unwrap();
        let waiting = {
            let (store, cb) = (store.clone(), cb.clone());
            tokio::spawn(
                async move { (store.wait(&cb, Duration::from_secs(10)).await, Instant::now()) },
            )
        };
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!waiting.is_finished());
        let resigned = Instant::now();
        store.resign(&ca).await.unwrap();
        let (waited, at) = waiting.await.unwrap();
        assert_eq!(waited.unwrap(), Waited::Leads { token: cb.token });
        let handover = at - resigned;
        println!("handover after a resignation: {handover:?}");
        assert!(handover < Duration::from_secs(1), "{handover:?}");
        // Resigning again (already gone) is fine.
        store.resign(&ca).await.unwrap();
    })
}

#[test]
fn a_waiting_candidacy_whose_node_was_deleted_never_leads() {
    run(async {
        let zk = Ensemble::start(1);
        let store = store(&zk);
        let a = store.grant(TTL).await.unwrap().session;
        let b = store.grant(TTL).await.unwrap().session;
        let ca = store.campaign(a, "phantom", "a").await.unwrap();
        let cb = store.campaign(b, "phantom", "b").await.unwrap();
        let waiting = {
            let (store, cb) = (store.clone(), cb.clone());
            tokio::spawn(async move { store.wait(&cb, Duration::from_secs(10)).await })
        };
        tokio::time::sleep(Duration::from_millis(200)).await;
        // B's node goes while its session lives (CURATOR-696, etcd#19597's shape).
        raw(&zk).await.delete(&cb.key, None).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        store.resign(&ca).await.unwrap();
        let waited = tokio::time::timeout(Duration::from_secs(5), waiting).await.unwrap().unwrap();
        assert!(matches!(waited, Err(StoreError::Gone(_))), "{waited:?}");
        // And asked again, still gone; the session itself is alive.
        let again = store.wait(&cb, Duration::from_millis(100)).await;
        assert!(matches!(again, Err(StoreError::Gone(_))), "{again:?}");
        store.renew(b).await.unwrap();
        // A node of another session with our name prefix is not ours either.
        let forged = raw(&zk).await;
        let ephemeral = CreateMode::Ephemeral.with_acls(Acls::anyone_all());
        forged.create(&cb.key, b"forged", &ephemeral).await.unwrap();
        let forged_wait = store.wait(&cb, Duration::from_millis(100)).await;
        assert!(matches!(forged_wait, Err(StoreError::Gone(_))), "{forged_wait:?}");
    })
}

#[test]
fn check_and_observe_follow_the_leader() {
    run(async {
        let zk = Ensemble::start(1);
        let store = store(&zk);
        let none = store.check("empty", 5).await.unwrap();
        assert_eq!((none.current, none.token), (false, None));

        let mut events = store.observe("watched").unwrap();
        assert!(matches!(next(&mut events).await, Ok(Observed::NoLeader { .. })));

        let a = store.grant(TTL).await.unwrap().session;
        let b = store.grant(TTL).await.unwrap().session;
        let ca = store.campaign(a, "watched", "a").await.unwrap();
        match next(&mut events).await.unwrap() {
            Observed::Leader { session, value, token, .. } => {
                assert_eq!((session, value.as_str(), token), (a.0, "a", ca.token));
            }
            other => panic!("{other:?}"),
        }
        let cb = store.campaign(b, "watched", "b").await.unwrap();
        let check = store.check("watched", ca.token).await.unwrap();
        assert!(
            check.current && check.token == Some(ca.token) && check.revision >= ca.token,
            "{check:?}"
        );
        let stale = store.check("watched", cb.token).await.unwrap();
        assert!(!stale.current && stale.token == Some(ca.token), "{stale:?}");

        store.resign(&ca).await.unwrap();
        match next(&mut events).await.unwrap() {
            Observed::Leader { session, token, .. } => {
                assert_eq!((session, token), (b.0, cb.token))
            }
            other => panic!("{other:?}"),
        }
        assert!(store.check("watched", cb.token).await.unwrap().current);
        store.revoke(b).await.unwrap();
        assert!(matches!(next(&mut events).await, Ok(Observed::NoLeader { .. })));
        assert_eq!(store.check("watched", cb.token).await.unwrap().token, None);
    })
}

type Events = futures_util::stream::BoxStream<'static, Result<Observed, StoreError>>;

/// The observer's next item, within 5 s.
async fn next(events: &mut Events) -> Result<Observed, StoreError> {
    let item = tokio::time::timeout(Duration::from_secs(5), events.next()).await;
    item.expect("an event within 5 s").expect("a stream never ends")
}

/// Waits until `c` leads, asking again after each `Ahead`.
async fn leads(store: &ZkStore, c: &Candidacy, within: Duration) -> Result<Waited, StoreError> {
    let end = Instant::now() + within;
    loop {
        match store.wait(c, Duration::from_millis(500)).await? {
            Waited::Ahead { .. } if Instant::now() < end => continue,
            w => return Ok(w),
        }
    }
}

/// What the frozen candidate saw when it woke up.
type Woke = (Option<String>, Duration, Result<Waited, StoreError>);

/// Candidate A on a runtime of its own thread: it campaigns, renews twice
/// (sending its deadline), then its whole runtime is frozen like a
/// SIGSTOPped process (no pings, no renewals) for as long as it is told.
fn frozen_candidate(
    servers: Vec<String>,
    ready: std::sync::mpsc::Sender<(Candidacy, Instant)>,
    freeze: std::sync::mpsc::Receiver<Duration>,
) -> Woke {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let store = ZkStore::new(servers, ZkOptions::default()).unwrap();
    let candidacy = rt.block_on(async {
        let g = store.grant(TTL).await.unwrap();
        let c = store.campaign(g.session, "expiry", "a").await.unwrap();
        assert!(c.leader);
        store.renew(g.session).await.unwrap();
        let r = store.renew(g.session).await.unwrap();
        ready.send((c.clone(), r.deadline())).unwrap();
        c
    });
    std::thread::sleep(freeze.recv().unwrap());
    rt.block_on(async {
        let woke = Instant::now();
        let limit = Duration::from_secs(5);
        let reason = tokio::time::timeout(limit, store.suspended(candidacy.session)).await.ok();
        let took = woke.elapsed();
        let mut waited = store.wait(&candidacy, Duration::from_millis(100)).await;
        while matches!(&waited, Err(e) if e.is_retryable()) && woke.elapsed() < limit {
            tokio::time::sleep(Duration::from_millis(100)).await;
            waited = store.wait(&candidacy, Duration::from_millis(100)).await;
        }
        (reason, took, waited)
    })
}

#[test]
fn a_frozen_leader_expires_and_the_next_leads_only_after_its_deadline() {
    let _serial = serial();
    let zk = Ensemble::start(1);
    let (ready_tx, ready) = std::sync::mpsc::channel();
    let (freeze, freeze_rx) = std::sync::mpsc::channel();
    let servers = zk.servers();
    let a = std::thread::spawn(move || frozen_candidate(servers, ready_tx, freeze_rx));
    let rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let store = store(&zk);
    // B campaigns once A leads (else B could come first).
    let (ca, a_deadline) = ready.recv().unwrap();
    let cb = rt.block_on(async {
        let b = store.grant(TTL).await.unwrap().session;
        store.campaign(b, "expiry", "b").await.unwrap()
    });
    assert!(!cb.leader && cb.token > ca.token);
    let frozen = Instant::now();
    freeze.send(TTL * 3).unwrap();
    let (waited, led) = rt.block_on(async {
        let w = leads(&store, &cb, Duration::from_secs(10)).await;
        (w, Instant::now())
    });
    assert_eq!(waited.unwrap(), Waited::Leads { token: cb.token });
    let failover = led - frozen;
    println!(
        "frozen leader (TTL {TTL:?}): the next leads {failover:?} after the freeze, {:?} after \
         the frozen one's deadline",
        led - a_deadline
    );
    assert!(led > a_deadline, "B leads before A's deadline");
    assert!(failover < TTL * 2, "{failover:?}");
    let (reason, took, a_waited) = a.join().unwrap();
    println!(
        "the frozen one, woken: suspended after {took:?} ({reason:?}); its wait: {a_waited:?}"
    );
    assert!(reason.is_some(), "suspended never resolved after the wake-up");
    assert!(matches!(a_waited, Err(StoreError::Gone(_))), "{a_waited:?}");
}

/// Member loss (paused or killed; the member serving the session, or the
/// ensemble's leader): the session is suspended at once, reconnects with
/// the same id, and a wait proves its leadership again.
async fn lose_a_member(zk: &mut Ensemble, kill: bool, ensemble_leader: bool) {
    let store = store(zk);
    let ttl = Duration::from_secs(6);
    let s = store.grant(ttl).await.unwrap().session;
    let c = store.campaign(s, "failover", "a").await.unwrap();
    assert!(c.leader);
    let serving =
        zk.serving_within(s.0, Duration::from_secs(5)).expect("a member serves the session");
    let m = if ensemble_leader { zk.leader().expect("an ensemble leader") } else { serving };
    let suspended = {
        let store = store.clone();
        tokio::spawn(async move { store.suspended(s).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!suspended.is_finished());
    let lost = Instant::now();
    let what = if kill { "SIGKILL" } else { "SIGSTOP" };
    if kill {
        zk.kill(m);
    } else {
        zk.pause(m);
    }
    let reason =
        tokio::time::timeout(ttl, suspended).await.expect("suspended within the TTL").unwrap();
    let detected = lost.elapsed();
    assert!(reason.contains("Disconnected"), "{reason}");
    let mut renewed = store.renew(s).await;
    while matches!(&renewed, Err(e) if e.is_retryable()) && lost.elapsed() < ttl * 2 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        renewed = store.renew(s).await;
    }
    let reconnected = lost.elapsed();
    assert_eq!(renewed.unwrap().session, s);
    // Asked of every member with the `cons` word, which a busy JVM may be
    // slow to answer (CI once saw no member list it right after the
    // renewal): asked again for a while.
    let now = zk.serving_within(s.0, Duration::from_secs(5));
    assert!(now.is_some() && now != Some(m), "served by {now:?}, lost member {m}");
    assert_eq!(
        store.wait(&c, Duration::from_secs(1)).await.unwrap(),
        Waited::Leads { token: c.token }
    );
    println!(
        "{what} of member {} (serving the session: {}; ensemble leader after: {}): suspended after {detected:?}, renewed through \
         member {} after {reconnected:?}",
        m + 1,
        serving + 1,
        zk.leader().map_or("none".into(), |l| (l + 1).to_string()),
        now.unwrap() + 1
    );
    store.revoke(s).await.unwrap();
    if kill {
        zk.restart(m);
    } else {
        zk.resume(m);
        zk.wait_ready(m);
    }
}

#[test]
fn losing_the_member_suspends_the_session_and_a_wait_after_reconnect_proves_again() {
    run(async {
        let mut zk = Ensemble::start(3);
        lose_a_member(&mut zk, false, false).await;
        lose_a_member(&mut zk, true, false).await;
        lose_a_member(&mut zk, true, true).await;
    })
}
