//! Sessions' renewals and expiry on real `tenure server` processes: a
//! session kept alive through a follower outlives its TTL many times over;
//! one left alone expires within its TTL plus a stated slack, its keys with
//! it, and cannot be renewed after; SIGKILL of the tenure leader expires no
//! kept-alive session (the new leader gives it a fresh TTL) and keepalives
//! go on against the survivors.

use crate::harness::{serial, TestCluster};
use hyper::Method;
use serde_json::Value;
use std::time::{Duration, Instant};

const HEARTBEAT_MS: u64 = 20;
const TIMEOUT_MS: u64 = 200;
const FIRST_ELECTION_BOUND: Duration = Duration::from_secs(10);
/// The sessions' TTL in these tests.
const TTL: Duration = Duration::from_millis(1_500);
/// How late an abandoned session may be declared expired past its TTL:
/// the leader's timer fires at the deadline, the expiry is one log write
/// (an fsync) and the test polls every few milliseconds; the rest is
/// scheduling on a shared two-core machine.
const EXPIRY_SLACK: Duration = Duration::from_millis(750);
/// A client renews a few times per TTL (the contract says every TTL / 3).
const RENEW_EVERY: Duration = Duration::from_millis(300);

fn all(n: usize) -> Vec<usize> {
    (0..n).collect()
}

/// A started 3-node cluster whose leader takes writes; (cluster, leader).
async fn cluster() -> (TestCluster, usize) {
    let c = TestCluster::start(3, HEARTBEAT_MS, TIMEOUT_MS);
    let (leader, _) = c.wait_agreement(&all(3), FIRST_ELECTION_BOUND).await;
    let deadline = Instant::now() + FIRST_ELECTION_BOUND;
    loop {
        if let Some((200, _, _)) = c.request(leader, Method::PUT, "/v1/kv/_ready", None).await {
            break;
        }
        assert!(Instant::now() < deadline, "the leader takes no write\n{}", c.logs());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (c, leader)
}

/// Grants a session of `ttl` through node `i`; its id.
async fn grant(c: &TestCluster, i: usize, ttl: Duration) -> u64 {
    let body = format!("{{\"ttl_ms\": {}}}", ttl.as_millis());
    let (status, json, text) = c
        .request(i, Method::POST, "/v1/sessions", Some(("application/json", &body)))
        .await
        .expect("an answer to the grant");
    assert_eq!(status, 200, "{text}");
    json["id"].as_u64().unwrap()
}

/// `POST /v1/sessions/{id}/keepalive` through node `i`: the status and body
/// (None: no answer within the harness's request timeout).
async fn keepalive(c: &TestCluster, i: usize, id: u64) -> Option<(u16, Value)> {
    let path = format!("/v1/sessions/{id}/keepalive");
    c.request(i, Method::POST, &path, None).await.map(|(s, j, _)| (s, j))
}

async fn get(c: &TestCluster, i: usize, path: &str) -> Option<(u16, Value)> {
    c.request(i, Method::GET, path, None).await.map(|(s, j, _)| (s, j))
}

/// A `tenure_*` value of node `i`'s metrics.
async fn metric(c: &TestCluster, i: usize, name: &str) -> u64 {
    let (_, _, text) = c.request(i, Method::GET, "/metrics", None).await.unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("tenure_{name} ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in\n{text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewed_session_outlives_its_ttl_and_an_abandoned_one_expires_with_its_keys() {
    let _serial = serial().await;
    let (c, leader) = cluster().await;
    let follower = (leader + 1) % 3;
    let other = (leader + 2) % 3;

    let kept = grant(&c, follower, TTL).await;
    let sent = Instant::now();
    let abandoned = grant(&c, other, TTL).await;
    for (id, key) in [(kept, "kept"), (abandoned, "abandoned")] {
        let path = format!("/v1/kv/app/{key}?lease={id}");
        let (status, _, text) = c.request(follower, Method::PUT, &path, None).await.unwrap();
        assert_eq!(status, 200, "{text}");
    }

    // Renew `kept` through a follower for three TTLs; meanwhile watch
    // `abandoned` expire.
    let mut expired_after = None;
    let mut renewals = 0;
    let mut latencies = Vec::new();
    let mut next_renewal = Instant::now();
    while sent.elapsed() < 3 * TTL {
        if Instant::now() >= next_renewal {
            let asked = Instant::now();
            let (status, body) = keepalive(&c, follower, kept).await.expect("a keepalive answer");
            latencies.push(asked.elapsed());
            assert_eq!(status, 200, "keepalive of a live session: {body}\n{}", c.logs());
            assert_eq!((body["id"].as_u64(), body["ttl_ms"].as_u64()), (Some(kept), Some(1_500)));
            renewals += 1;
            next_renewal += RENEW_EVERY;
        }
        if expired_after.is_none() {
            let path = format!("/v1/sessions/{abandoned}");
            if let Some((404, _)) = get(&c, other, &path).await {
                expired_after = Some(sent.elapsed());
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let took = expired_after.expect("the abandoned session never expired");
    assert!(took >= TTL, "expired {took:?} after its grant, before its TTL {TTL:?}");
    assert!(took <= TTL + EXPIRY_SLACK, "expired after {took:?}: TTL {TTL:?} + {EXPIRY_SLACK:?}");
    eprintln!("abandoned session expired {took:?} after its grant was sent (TTL {TTL:?})");
    latencies.sort();
    eprintln!(
        "keepalive through a follower (HTTPS): p50 {:?}, max {:?} over {}",
        latencies[latencies.len() / 2],
        latencies[latencies.len() - 1],
        latencies.len()
    );

    // Its key went with it; the renewed one's stayed.
    assert_eq!(get(&c, follower, "/v1/kv/app/abandoned").await.unwrap().0, 404);
    let (status, kv) = get(&c, other, "/v1/kv/app/kept").await.unwrap();
    assert_eq!((status, kv["lease"].as_u64()), (200, Some(kept)), "{kv}");
    // A keepalive after the expiry is refused, on any node.
    for i in all(3) {
        let (status, body) = keepalive(&c, i, abandoned).await.unwrap();
        assert_eq!(status, 404, "keepalive of an expired session: {body}");
    }
    // The leader's clock says how long `kept` has, on any node.
    let (status, info) = get(&c, other, &format!("/v1/sessions/{kept}")).await.unwrap();
    assert_eq!(status, 200, "{info}");
    let remaining = info["remaining_ms"].as_u64().expect("remaining_ms from the leader");
    assert!(
        remaining <= 1_500 && remaining >= 1_500 - 2 * RENEW_EVERY.as_millis() as u64,
        "{info}"
    );

    assert_eq!(metric(&c, leader, "session_renewals_total").await, renewals);
    assert!(metric(&c, leader, "session_renewals_refused_total").await >= 3);
    assert_eq!(metric(&c, leader, "session_expiries_proposed_total").await, 1);
    assert_eq!(metric(&c, follower, "sessions_held").await, 1);

    // Unknown and malformed ids.
    assert_eq!(keepalive(&c, follower, 999).await.unwrap().0, 404);
    let (status, _, _) =
        c.request(follower, Method::POST, "/v1/sessions/x/keepalive", None).await.unwrap();
    assert_eq!(status, 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_of_the_tenure_leader_expires_no_renewed_session() {
    let _serial = serial().await;
    let (mut c, leader) = cluster().await;
    let survivors: Vec<usize> = all(3).into_iter().filter(|&i| i != leader).collect();
    let id = grant(&c, survivors[0], TTL).await;
    let path = format!("/v1/kv/app/held?lease={id}");
    assert_eq!(c.request(survivors[1], Method::PUT, &path, None).await.unwrap().0, 200);

    // Renew through the survivors in turn, before and across the crash,
    // as a client does: the session must not end, and keepalives must
    // succeed again once a new leader is ready.
    let started = Instant::now();
    let mut killed_at = None;
    let mut last_ok = Instant::now();
    let mut ok_after_kill = 0;
    let mut longest_gap = Duration::ZERO;
    let mut n = 0;
    while started.elapsed() < 6 * TTL {
        if killed_at.is_none() && started.elapsed() >= TTL {
            c.crash(leader);
            killed_at = Some(Instant::now());
        }
        let sent = Instant::now();
        match keepalive(&c, survivors[n % 2], id).await {
            Some((200, _)) => {
                longest_gap = longest_gap.max(sent - last_ok);
                last_ok = sent;
                if killed_at.is_some() {
                    ok_after_kill += 1;
                }
            }
            Some((503, _)) | None => {}
            Some((status, body)) => {
                panic!(
                    "keepalive answered {status} {body} after {:?}\n{}",
                    started.elapsed(),
                    c.logs()
                )
            }
        }
        assert!(
            last_ok.elapsed() < 2 * TTL,
            "no renewal for {:?}: the failover did not end\n{}",
            last_ok.elapsed(),
            c.logs()
        );
        n += 1;
        tokio::time::sleep(RENEW_EVERY).await;
    }
    assert!(killed_at.is_some());
    eprintln!("longest time between successful renewals across the failover: {longest_gap:?}");
    assert!(ok_after_kill >= 10, "{ok_after_kill} renewals after the crash");
    // Still there, with its key, on both survivors.
    for &i in &survivors {
        let (status, info) = get(&c, i, &format!("/v1/sessions/{id}")).await.unwrap();
        assert_eq!(status, 200, "the session ended across the failover: {info}\n{}", c.logs());
        assert!(info["remaining_ms"].as_u64().is_some(), "{info}");
        assert_eq!(get(&c, i, "/v1/kv/app/held").await.unwrap().0, 200);
    }
    // Nothing expired on the new leader.
    let (new_leader, _) = c.wait_agreement(&survivors, FIRST_ELECTION_BOUND).await;
    assert_eq!(metric(&c, new_leader, "session_expiries_proposed_total").await, 0);
}

/// A session abandoned before the tenure leader is SIGKILLed expires near
/// its own deadline, not a fresh TTL after the failover: the old leader
/// recorded it silent (docs/ELECTIONS.md, "Deadlines across leader
/// changes"). A session that went silent and came back is renewed (its
/// renewal held until a checkpoint cleared it) and lives on; one renewed
/// all along lives on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_abandoned_before_a_leader_crash_expires_on_its_own_deadline() {
    const LONG_TTL: Duration = Duration::from_millis(4_000);
    let _serial = serial().await;
    let (mut c, leader) = cluster().await;
    let survivors: Vec<usize> = all(3).into_iter().filter(|&i| i != leader).collect();
    let abandoned = grant(&c, survivors[0], LONG_TTL).await;
    let abandoned_at = Instant::now();
    let back = grant(&c, survivors[0], LONG_TTL).await;
    let live = grant(&c, survivors[1], LONG_TTL).await;

    // Past half the TTL (silent), then one checkpoint interval more: the
    // leader recorded both silent sessions. The live one is renewed on
    // time throughout, the one that comes back now.
    while abandoned_at.elapsed() < Duration::from_millis(3_000) {
        assert_eq!(keepalive(&c, survivors[1], live).await.unwrap().0, 200);
        tokio::time::sleep(RENEW_EVERY).await;
    }
    let (status, body) = keepalive(&c, survivors[0], back).await.unwrap();
    assert_eq!(status, 200, "a silent session's renewal: {body}\n{}", c.logs());
    assert_eq!(body["ttl_ms"].as_u64(), Some(LONG_TTL.as_millis() as u64));
    c.crash(leader);
    let killed_at = Instant::now();

    // Renew the live and the returned sessions through the survivors while
    // watching the abandoned one end.
    let mut expired_after = None;
    let mut n = 0;
    while killed_at.elapsed() < LONG_TTL + Duration::from_millis(1_500) {
        for id in [live, back] {
            match keepalive(&c, survivors[n % 2], id).await {
                Some((200, _)) | Some((503, _)) | None => {}
                Some((status, body)) => panic!("keepalive of {id}: {status} {body}\n{}", c.logs()),
            }
        }
        if expired_after.is_none() {
            let gone = get(&c, survivors[0], &format!("/v1/sessions/{abandoned}")).await;
            if gone.is_some_and(|(status, _)| status == 404) {
                expired_after = Some(abandoned_at.elapsed());
            }
        }
        n += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Its own deadline plus the failover and the slack; a fresh TTL from
    // the new leader would have been 3 s + TTL after it was abandoned.
    let bound = LONG_TTL + Duration::from_millis(1_500);
    let expired = expired_after.unwrap_or_else(|| panic!("never expired\n{}", c.logs()));
    eprintln!("abandoned session expired {expired:?} after its last renewal (TTL {LONG_TTL:?})");
    assert!(expired <= bound, "expired after {expired:?}, bound {bound:?}\n{}", c.logs());
    for id in [live, back] {
        let (status, info) = get(&c, survivors[1], &format!("/v1/sessions/{id}")).await.unwrap();
        assert_eq!(status, 200, "session {id} ended: {info}\n{}", c.logs());
    }
}

/// The keepalive stream (`GET /v1/sessions/{id}/keepalive`, SSE) keeps a
/// session through a follower for several TTLs with no request from the
/// client; every `renewed` event gives a deadline (the client's clock at
/// the request + `sent_after_ms`, both scaled by the drift bound, + the
/// TTL so scaled) that is still ahead when the event arrives, and the
/// deadlines only move on. Closing the stream lets the session expire; a
/// revoke ends the stream with `ended`; an unknown session is a 404.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keepalive_stream_keeps_the_session_and_its_deadlines_hold() {
    use tenure_client::{Client, ClientOptions};
    let _serial = serial().await;
    let (c, leader) = cluster().await;
    let follower = (leader + 1) % 3;
    let ca = c.ca();
    let client =
        Client::new(ClientOptions { cacert: Some(&ca), token: Some(crate::harness::ADMIN_TOKEN) })
            .unwrap();
    let url = |id: u64| format!("{}/v1/sessions/{id}/keepalive", c.endpoint(follower));
    // The drift factor a client applies: (1 − ρ)/(1 + ρ), ρ = 10 %.
    let scale = 0.9 / 1.1;

    let id = grant(&c, follower, TTL).await;
    let t0 = Instant::now();
    let mut stream = client.event_stream(&url(id), None).await.expect("the stream opens");
    let mut last_deadline = t0;
    let mut renewals = 0;
    while t0.elapsed() < 4 * TTL {
        let event = tokio::time::timeout(TTL, stream.next())
            .await
            .expect("a renewal within a TTL")
            .expect("the stream reads")
            .expect("the stream stays open");
        let arrived = Instant::now();
        assert_eq!(event.event, "renewed", "{event:?}");
        let body: Value = serde_json::from_str(&event.data).unwrap();
        assert_eq!((body["id"].as_u64(), body["ttl_ms"].as_u64()), (Some(id), Some(1_500)));
        let sent_after = Duration::from_millis(body["sent_after_ms"].as_u64().unwrap());
        let deadline = t0 + sent_after.mul_f64(scale) + TTL.mul_f64(scale);
        assert!(deadline > arrived, "a deadline {:?} in the past", arrived - deadline);
        assert!(deadline >= last_deadline, "the deadline went back");
        last_deadline = deadline;
        renewals += 1;
    }
    // Every TTL/3 (500 ms) over 4 TTLs (6 s): about 12, and the first at once.
    assert!((10..=14).contains(&renewals), "{renewals} renewals in 4 TTLs");
    let (status, info) = get(&c, leader, &format!("/v1/sessions/{id}")).await.unwrap();
    assert_eq!(status, 200, "{info}");

    // Closed: nothing renews it any more, and it expires.
    drop(stream);
    let closed = Instant::now();
    loop {
        let (status, _) = get(&c, leader, &format!("/v1/sessions/{id}")).await.unwrap();
        if status == 404 {
            break;
        }
        assert!(closed.elapsed() < TTL + EXPIRY_SLACK, "the session outlived its stream");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!(
        "keepalive stream: {renewals} renewals; expired {:?} after closing",
        closed.elapsed()
    );

    // A revoke ends a stream with `ended`.
    let id = grant(&c, follower, TTL).await;
    let mut stream = client.event_stream(&url(id), None).await.expect("the stream opens");
    assert_eq!(stream.next().await.unwrap().unwrap().event, "renewed");
    let path = format!("/v1/sessions/{id}");
    assert_eq!(c.request(leader, Method::DELETE, &path, None).await.unwrap().0, 200);
    let ended = tokio::time::timeout(TTL, stream.next()).await.expect("told within a TTL");
    let ended = ended.unwrap().expect("an event before the end");
    assert_eq!(ended.event, "ended", "{ended:?}");
    let done = tokio::time::timeout(TTL, stream.next()).await.expect("closed").unwrap();
    assert!(done.is_none(), "the stream closes after `ended`: {done:?}");

    // An unknown session: 404 before any stream.
    let refused = client.event_stream(&url(id + 1000), None).await.unwrap_err();
    assert!(refused.to_string().contains("404"), "{refused}");

    // A stranger's input: a malformed, zero or huge id is a 400 before any
    // stream; a read-only token may not keep a session alive (403).
    let huge = "9".repeat(5_000);
    for bad in ["abc", "0", "-1", "18446744073709551616", huge.as_str()] {
        let path = format!("/v1/sessions/{bad}/keepalive");
        let (status, _, text) = c.request(follower, Method::GET, &path, None).await.unwrap();
        assert_eq!(status, 400, "{bad:.20}: {text:.200}");
    }
    let path = format!("/v1/sessions/{id}/keepalive");
    let read = c.request_as(follower, Some(crate::harness::READ_TOKEN), Method::GET, &path, None);
    assert_eq!(read.await.unwrap().status, 403);
}

/// Many renewals at once through a follower, which sends the renewals that
/// wait together in one ask (`crates/server/src/sessions/renewer.rs`):
/// each is answered as its own session stands (renewed, or 404 for one
/// that does not exist) and the leader counts every one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_renewals_at_once_through_a_follower_are_each_answered() {
    const SESSIONS: u64 = 64;
    const ROUNDS: u64 = 5;
    let _serial = serial().await;
    let (c, leader) = cluster().await;
    let follower = (leader + 1) % 3;
    // Each its own TTL, so that an answer given to the wrong renewal shows.
    let ttl_ms = |i: u64| 60_000 + i;
    let mut ids = Vec::new();
    let mut ttls = std::collections::BTreeMap::new();
    for i in 0..SESSIONS {
        let id = grant(&c, leader, Duration::from_millis(ttl_ms(i))).await;
        ttls.insert(id, ttl_ms(i));
        ids.push(id);
    }
    let missing = ids.iter().max().unwrap() + 1_000;
    ids.push(missing);
    let renewals_before = metric(&c, leader, "session_renewals_total").await;
    let refused_before = metric(&c, leader, "session_renewals_refused_total").await;
    let asks_before = metric(&c, leader, "session_renewal_asks_total").await;
    for round in 0..ROUNDS {
        let calls = ids.iter().map(|&id| keepalive(&c, follower, id));
        let answers = futures_util::future::join_all(calls).await;
        for (&id, answer) in ids.iter().zip(answers) {
            let (status, body) = answer.unwrap_or_else(|| panic!("round {round}: no answer"));
            if id == missing {
                assert_eq!(status, 404, "round {round}, session {id}: {body}");
            } else {
                assert_eq!(status, 200, "round {round}, session {id}: {body}");
                assert_eq!(
                    (body["id"].as_u64(), body["ttl_ms"].as_u64()),
                    (Some(id), Some(ttls[&id]))
                );
            }
        }
    }
    let renewed = metric(&c, leader, "session_renewals_total").await - renewals_before;
    let refused = metric(&c, leader, "session_renewals_refused_total").await - refused_before;
    let asks = metric(&c, leader, "session_renewal_asks_total").await - asks_before;
    assert_eq!((renewed, refused), (SESSIONS * ROUNDS, ROUNDS));
    assert!((1..=(SESSIONS + 1) * ROUNDS).contains(&asks), "{asks} asks");
    eprintln!("{} renewals through a follower in {asks} asks", (SESSIONS + 1) * ROUNDS);
}
