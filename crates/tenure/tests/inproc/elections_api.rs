//! Named elections on a real three-node cluster in this process
//! (`tenure_server::server::run`, real sockets): campaigns through followers,
//! long polls that return when the candidate ahead leaves (resigned, or its
//! session revoked), proclaim, observe streams, tokens that only grow
//! (across a tenure leader change too), bad input that writes nothing, no
//! herd: a resignation wakes one waiter, not the queue, and observers that
//! resume with `Last-Event-ID` or `from_revision`.

use crate::servers::{
    agreement, authorization, eventually, start_cluster, status, Server, READ_TOKEN, WRITE_TOKEN,
};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tenure_server::http::HttpLimits;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

/// Bound on a first election or a server's start, on a busy machine.
const START_BOUND: Duration = Duration::from_secs(10);
/// Bound on a server's clean stop.
const STOP_BOUND: Duration = Duration::from_secs(5);
/// Bound on one answer or one event.
const ANSWER_BOUND: Duration = Duration::from_secs(5);
/// Bound on a handover seen by a waiter, from the answer to the resign (or
/// revoke) to the waiter's answer: a commit and an apply on loopback take
/// milliseconds; the bound leaves room for a loaded two-core machine.
const HANDOVER_BOUND: Duration = Duration::from_millis(1_000);

/// An answer: status and body.
#[derive(Debug)]
struct Answer {
    status: u16,
    body: Vec<u8>,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// `method path` with the write token and `body`, on a fresh connection.
async fn call(addr: SocketAddr, method: &str, path: &str, body: &[u8]) -> Answer {
    call_within(addr, method, path, body, ANSWER_BOUND).await
}

/// [`call`], waiting at most `bound` for the answer.
async fn call_within(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: &[u8],
    bound: Duration,
) -> Answer {
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: test\r\n{}Content-Length: {}\r\nConnection: close\r\n\r\n",
        authorization(Some(WRITE_TOKEN)),
        body.len()
    );
    let exchange = async {
        let mut conn = TcpStream::connect(addr).await.unwrap();
        conn.write_all(head.as_bytes()).await.unwrap();
        conn.write_all(body).await.unwrap();
        let mut got = Vec::new();
        let mut chunk = [0u8; 4096];
        while let Ok(n @ 1..) = conn.read(&mut chunk).await {
            got.extend_from_slice(&chunk[..n]);
        }
        got
    };
    let got = tokio::time::timeout(bound, exchange)
        .await
        .unwrap_or_else(|_| panic!("{method} {path}: no answer within {bound:?}"));
    let end = got.windows(4).position(|w| w == b"\r\n\r\n").expect("headers") + 4;
    let head = String::from_utf8_lossy(&got[..end]).into_owned();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let chunked = head.to_ascii_lowercase().contains("transfer-encoding: chunked");
    let body = if chunked { dechunk(&got[end..]) } else { got[end..].to_vec() };
    Answer { status, body }
}

/// The body of a chunked answer.
fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    loop {
        let line = raw.windows(2).position(|w| w == b"\r\n").expect("a chunk size");
        let size = usize::from_str_radix(std::str::from_utf8(&raw[..line]).unwrap().trim(), 16)
            .expect("a hex chunk size");
        if size == 0 {
            return body;
        }
        body.extend_from_slice(&raw[line + 2..line + 2 + size]);
        raw = &raw[line + 2 + size + 2..];
    }
}

/// One Server-Sent Event.
#[derive(Debug, Default, Clone, PartialEq)]
struct Sse {
    event: String,
    id: Option<u64>,
    data: Value,
}

/// An open SSE stream, read event by event.
struct Stream {
    conn: TcpStream,
    buffered: Vec<u8>,
}

impl Stream {
    /// Opens `path` with the read token; the answer's status.
    async fn open(addr: SocketAddr, path: &str) -> (u16, Stream) {
        Stream::resume(addr, path, None).await
    }

    /// Opens `path` with the read token and this `Last-Event-ID`.
    async fn resume(addr: SocketAddr, path: &str, last_event_id: Option<&str>) -> (u16, Stream) {
        let mut conn = TcpStream::connect(addr).await.unwrap();
        let id = last_event_id.map(|id| format!("Last-Event-ID: {id}\r\n")).unwrap_or_default();
        let head = format!(
            "GET {path} HTTP/1.1\r\nHost: test\r\n{id}{}\r\n",
            authorization(Some(READ_TOKEN))
        );
        conn.write_all(head.as_bytes()).await.unwrap();
        let mut s = Stream { conn, buffered: Vec::new() };
        let head = s.until(b"\r\n\r\n").await;
        (head.split(' ').nth(1).unwrap().parse().unwrap(), s)
    }

    async fn until(&mut self, delimiter: &[u8]) -> String {
        let read = async {
            loop {
                if let Some(i) = self.buffered.windows(delimiter.len()).position(|w| w == delimiter)
                {
                    let text = String::from_utf8_lossy(&self.buffered[..i]).into_owned();
                    self.buffered.drain(..i + delimiter.len());
                    return text;
                }
                let mut chunk = [0u8; 4096];
                let n = self.conn.read(&mut chunk).await.unwrap();
                assert!(n > 0, "the stream ended");
                self.buffered.extend_from_slice(&chunk[..n]);
            }
        };
        tokio::time::timeout(ANSWER_BOUND, read).await.expect("an event in time")
    }

    /// The next event (keep-alive comments skipped).
    async fn next(&mut self) -> Sse {
        loop {
            let _size = self.until(b"\r\n").await;
            let chunk = self.until(b"\r\n").await;
            let mut sse = Sse::default();
            for line in chunk.lines() {
                match line.split_once(':') {
                    Some(("event", v)) => sse.event = v.trim().to_string(),
                    Some(("id", v)) => sse.id = Some(v.trim().parse().unwrap()),
                    Some(("data", v)) => sse.data = serde_json::from_str(v.trim()).unwrap(),
                    _ => {}
                }
            }
            if !sse.event.is_empty() {
                return sse;
            }
        }
    }
}

/// Waits until every server agrees on one leader and a write through a
/// follower commits; the leader's index.
async fn leader(servers: &[Server]) -> usize {
    let l = agreement(servers).await;
    let follower = servers[(l + 1) % servers.len()].http;
    eventually("a write through a follower commits", START_BOUND, || async {
        let a = call(follower, "PUT", "/v1/kv/_ready", b"").await;
        assert!([200, 503].contains(&a.status), "{a:?}");
        (a.status == 200).then_some(())
    })
    .await;
    l
}

async fn three_nodes(dir: &std::path::Path) -> (Vec<Server>, usize) {
    let heartbeat = Duration::from_millis(50);
    let servers = start_cluster(3, heartbeat, heartbeat * 10, HttpLimits::default(), dir);
    let l = leader(&servers).await;
    (servers, l)
}

async fn stop_all(servers: &mut [Server]) {
    for s in servers {
        if let Err(e) = s.stop(STOP_BOUND).await {
            panic!("server {} stops: {e}", s.id);
        }
    }
}

/// The store's revision as `addr` reads it (linearizable).
async fn revision(addr: SocketAddr) -> u64 {
    let list = call(addr, "GET", "/v1/kv?prefix=&limit=1", b"").await;
    assert_eq!(list.status, 200, "{list:?}");
    list.json()["revision"].as_u64().unwrap()
}

/// A new session with a TTL long enough for the test.
async fn session(addr: SocketAddr) -> u64 {
    let grant = call(addr, "POST", "/v1/sessions", br#"{"ttl_ms": 600000}"#).await;
    assert_eq!(grant.status, 200, "{grant:?}");
    grant.json()["id"].as_u64().unwrap()
}

async fn campaign(addr: SocketAddr, name: &str, session: u64, value: &str) -> Answer {
    let body = json!({"session": session, "value": value}).to_string();
    call(addr, "POST", &format!("/v1/elections/{name}/campaign"), body.as_bytes()).await
}

/// A long poll in a task of its own.
fn wait(addr: SocketAddr, name: &str, session: u64, timeout_ms: u64) -> JoinHandle<Answer> {
    let path = format!("/v1/elections/{name}/wait?session={session}&timeout_ms={timeout_ms}");
    let bound = Duration::from_millis(timeout_ms) + ANSWER_BOUND;
    tokio::spawn(async move { call_within(addr, "GET", &path, b"", bound).await })
}

/// Waits until `addr` counts `n` open long polls (they are waiting).
async fn waiting(addr: SocketAddr, n: u64) {
    eventually(&format!("{n} waits are open"), ANSWER_BOUND, || async move {
        (metric(addr, "tenure_election_waiters").await == n).then_some(())
    })
    .await;
}

/// The value of the sample `name` in `addr`'s metrics.
async fn metric(addr: SocketAddr, name: &str) -> u64 {
    let m = call(addr, "GET", "/metrics", b"").await.text();
    let line = m
        .lines()
        .find(|l| l.split(' ').next() == Some(name))
        .unwrap_or_else(|| panic!("no {name} in\n{m}"));
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_candidate_leads_when_the_leader_resigns_or_its_session_ends() {
    let dir = tempfile::tempdir().unwrap();
    let (mut servers, l) = three_nodes(dir.path()).await;
    let (f1, f2) = (servers[(l + 1) % 3].http, servers[(l + 2) % 3].http);
    let (a, b, c) = (session(f1).await, session(f2).await, session(f1).await);

    // A campaigns on a follower and leads at once; B queues behind it.
    let first = campaign(f1, "db", a, "10.0.0.1").await;
    assert_eq!(first.status, 200, "{first:?}");
    let first = first.json();
    assert_eq!((first["leader"].as_bool(), first["ahead"].as_u64()), (Some(true), Some(0)));
    let t1 = first["token"].as_u64().unwrap();
    assert_eq!(first["create_revision"].as_u64(), Some(t1), "the token is the create revision");
    let second = campaign(f2, "db", b, "10.0.0.2").await.json();
    assert_eq!((second["leader"].as_bool(), second["ahead"].as_u64()), (Some(false), Some(1)));
    assert!(second["token"].is_null(), "{second}");

    // A short wait times out, still behind.
    let started = Instant::now();
    let timed_out = wait(f2, "db", b, 300).await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(300), "{:?}", started.elapsed());
    assert_eq!(timed_out.status, 200, "{timed_out:?}");
    assert_eq!(timed_out.json()["leader"], false);
    assert_eq!(timed_out.json()["ahead"].as_u64(), Some(1));

    // A resigns: B's long poll answers, with a larger token, at once.
    let waiter = wait(f2, "db", b, 20_000);
    waiting(f2, 1).await;
    let resign =
        call(f1, "POST", "/v1/elections/db/resign", json!({"session": a}).to_string().as_bytes())
            .await;
    assert_eq!(resign.status, 200, "{resign:?}");
    let resigned = Instant::now();
    let won = tokio::time::timeout(HANDOVER_BOUND, waiter).await.expect("B leads in time").unwrap();
    let took = resigned.elapsed();
    assert_eq!(won.status, 200, "{won:?}");
    let won = won.json();
    assert_eq!((won["leader"].as_bool(), won["session"].as_u64()), (Some(true), Some(b)));
    let t2 = won["token"].as_u64().unwrap();
    assert!(t2 > t1, "tokens grow: {t1} then {t2}");
    eprintln!("handover after a resign seen by the waiter in {took:?}");

    // The check endpoint: only the current token is current.
    let check = |t: u64| format!("/v1/elections/db/check?token={t}");
    let old = call(servers[l].http, "GET", &check(t1), b"").await.json();
    assert_eq!((old["current"].as_bool(), old["token"].as_u64()), (Some(false), Some(t2)));
    assert_eq!(call(f1, "GET", &check(t2), b"").await.json()["current"], true);

    // A's candidacy is gone: waiting or resigning again is a 404.
    assert_eq!(wait(f1, "db", a, 1_000).await.unwrap().status, 404);
    let again =
        call(f1, "POST", "/v1/elections/db/resign", json!({"session": a}).to_string().as_bytes())
            .await;
    assert_eq!(again.status, 404, "{again:?}");

    // C queues behind B; revoking B's session hands over the same way,
    // its key deleted at the revocation's one revision.
    assert_eq!(campaign(f1, "db", c, "10.0.0.3").await.status, 200);
    let waiter = wait(f1, "db", c, 20_000);
    waiting(f1, 1).await;
    let revoke = call(f2, "DELETE", &format!("/v1/sessions/{b}"), b"").await;
    assert_eq!(revoke.status, 200, "{revoke:?}");
    let revoked = Instant::now();
    assert_eq!(revoke.json()["keys_deleted"].as_u64(), Some(1));
    let won = tokio::time::timeout(HANDOVER_BOUND, waiter).await.expect("C leads in time").unwrap();
    eprintln!("handover after a revoke seen by the waiter in {:?}", revoked.elapsed());
    let won = won.json();
    assert_eq!((won["leader"].as_bool(), won["session"].as_u64()), (Some(true), Some(c)));
    let t3 = won["token"].as_u64().unwrap();
    assert!(t3 > t2, "tokens grow: {t2} then {t3}");

    // The election as every node reads it.
    for s in &servers {
        let e = call(s.http, "GET", "/v1/elections/db", b"").await.json();
        assert_eq!(e["leader"]["session"].as_u64(), Some(c), "{e}");
        assert_eq!(
            (e["leader"]["token"].as_u64(), e["leader"]["value"].as_str()),
            (Some(t3), Some("10.0.0.3"))
        );
        assert_eq!(e["candidates"].as_array().map(Vec::len), Some(1), "{e}");
    }
    let list = call(f2, "GET", "/v1/elections", b"").await.json();
    assert_eq!(
        list["elections"],
        json!([{"name": "db", "leader": {"session": c, "value": "10.0.0.3", "token": t3}, "candidates": 1}])
    );
    // The waits that won are counted where they waited.
    assert_eq!(metric(f2, "tenure_election_waits_won_total").await, 1);
    assert_eq!(metric(f1, "tenure_election_waits_won_total").await, 1);

    // A resignation that names its candidacy's token ends that candidacy
    // only: arriving again after the session campaigned anew (a retry, or
    // one a follower's router held), it ends nothing.
    let resign_with = |t: u64| json!({"session": a, "token": t}).to_string();
    let ta = campaign(f1, "late", a, "x").await.json()["token"].as_u64().unwrap();
    let first = call(f1, "POST", "/v1/elections/late/resign", resign_with(ta).as_bytes()).await;
    assert_eq!(first.status, 200, "{first:?}");
    let ta2 = campaign(f2, "late", a, "x").await.json()["token"].as_u64().unwrap();
    let late = call(f2, "POST", "/v1/elections/late/resign", resign_with(ta).as_bytes()).await;
    assert_eq!(late.status, 404, "{late:?}");
    let e = call(servers[l].http, "GET", "/v1/elections/late", b"").await.json();
    assert_eq!(e["leader"]["token"].as_u64(), Some(ta2), "the new candidacy stands: {e}");
    let own = call(f1, "POST", "/v1/elections/late/resign", resign_with(ta2).as_bytes()).await;
    assert_eq!(own.status, 200, "{own:?}");
    stop_all(&mut servers).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proclaim_keeps_the_token_and_observers_see_every_change_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let (mut servers, l) = three_nodes(dir.path()).await;
    let (f1, f2, lead) = (servers[(l + 1) % 3].http, servers[(l + 2) % 3].http, servers[l].http);
    let (a, b) = (session(f1).await, session(f2).await);

    let (code, mut observer) = Stream::open(f2, "/v1/elections/web/observe").await;
    assert_eq!(code, 200);
    let first = observer.next().await;
    assert_eq!(first.event, "no-leader", "{first:?}");

    let t = campaign(f1, "web", a, "a1").await.json()["token"].as_u64().unwrap();
    campaign(lead, "web", b, "b1").await;
    let e = observer.next().await;
    assert_eq!(
        (e.event.as_str(), e.data["session"].as_u64(), e.data["token"].as_u64()),
        ("leader", Some(a), Some(t))
    );
    assert_eq!(e.data["value"], "a1");

    // A proclaim: a new value, the same token.
    let body = json!({"session": a, "value": "a2"}).to_string();
    let proclaimed = call(f2, "POST", "/v1/elections/web/proclaim", body.as_bytes()).await;
    assert_eq!(proclaimed.status, 200, "{proclaimed:?}");
    assert_eq!(proclaimed.json()["token"].as_u64(), Some(t));
    let e = observer.next().await;
    assert_eq!(
        (e.event.as_str(), e.data["value"].as_str(), e.data["token"].as_u64()),
        ("leader", Some("a2"), Some(t))
    );
    assert_eq!(e.data["revision"].as_u64(), proclaimed.json()["revision"].as_u64());

    // A non-leader's proclaim is a 409 and writes nothing.
    let before = revision(f1).await;
    let body = json!({"session": b, "value": "b2"}).to_string();
    let refused = call(f1, "POST", "/v1/elections/web/proclaim", body.as_bytes()).await;
    assert_eq!(refused.status, 409, "{refused:?}");
    assert!(refused.text().contains("does not lead"), "{refused:?}");
    assert_eq!(revision(f1).await, before, "nothing was written");
    let e = call(f1, "GET", "/v1/elections/web", b"").await.json();
    assert_eq!(e["candidates"][1]["value"], "b1");

    // A resigns: B leads (a larger token); B's session ends: nobody.
    let resign =
        call(f1, "POST", "/v1/elections/web/resign", json!({"session": a}).to_string().as_bytes())
            .await;
    assert_eq!(resign.status, 200);
    let e = observer.next().await;
    assert_eq!(
        (e.event.as_str(), e.data["session"].as_u64(), e.data["value"].as_str()),
        ("leader", Some(b), Some("b1"))
    );
    let tb = e.data["token"].as_u64().unwrap();
    assert!(tb > t, "{tb} > {t}");
    assert_eq!(e.data["revision"].as_u64(), resign.json()["revision"].as_u64());
    let revoke = call(lead, "DELETE", &format!("/v1/sessions/{b}"), b"").await.json();
    let e = observer.next().await;
    assert_eq!(
        (e.event.as_str(), e.data["revision"].as_u64()),
        ("no-leader", revoke["revision"].as_u64())
    );
    // A new observer is told the state first.
    let (_, mut late) = Stream::open(f1, "/v1/elections/web/observe").await;
    assert_eq!(late.next().await.event, "no-leader");
    assert_eq!(metric(f2, "tenure_election_observers").await, 1);
    assert!(metric(f2, "tenure_election_observe_events_total").await >= 5);
    drop((observer, late));
    stop_all(&mut servers).await;
}

/// The events' (name, id, session, value, token, revision).
type Told = (String, Option<u64>, Option<u64>, Option<String>, Option<u64>, Option<u64>);

fn told(e: &Sse) -> Told {
    let d = &e.data;
    (
        e.event.clone(),
        e.id,
        d["session"].as_u64(),
        d["value"].as_str().map(str::to_string),
        d["token"].as_u64(),
        d["revision"].as_u64(),
    )
}

async fn post(addr: SocketAddr, path: &str, body: Value) -> Value {
    let a = call(addr, "POST", path, body.to_string().as_bytes()).await;
    assert_eq!(a.status, 200, "{path}: {a:?}");
    a.json()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_that_reconnects_is_told_exactly_the_changes_it_missed() {
    let dir = tempfile::tempdir().unwrap();
    let (mut servers, l) = three_nodes(dir.path()).await;
    let (f1, f2, lead) = (servers[(l + 1) % 3].http, servers[(l + 2) % 3].http, servers[l].http);
    let (a, b, c) = (session(f1).await, session(f2).await, session(lead).await);
    // One observer stays for the whole test: what the others must match.
    let (_, mut stayed) = Stream::open(lead, "/v1/elections/app/observe").await;
    let (_, mut left) = Stream::open(f2, "/v1/elections/app/observe").await;
    let first = left.next().await;
    assert_eq!(first.event, "no-leader");
    assert_eq!(first.id, first.data["revision"].as_u64(), "every event has its revision as id");
    assert_eq!(told(&stayed.next().await).0, "no-leader");
    let t = campaign(f1, "app", a, "a1").await.json()["token"].as_u64().unwrap();
    let seen = left.next().await;
    assert_eq!(
        (seen.event.as_str(), seen.id, seen.data["token"].as_u64()),
        ("leader", Some(t), Some(t))
    );
    assert_eq!(told(&stayed.next().await), told(&seen));
    let last_id = seen.id.unwrap();
    drop(left);

    // Missed: a proclaim, a campaign behind (not a change), a resignation (a
    // new leader), a session revoked (no leader), a new leader again.
    let p = post(f1, "/v1/elections/app/proclaim", json!({"session": a, "value": "a2"})).await;
    let joined = campaign(f2, "app", b, "b1").await;
    assert_eq!(joined.status, 200);
    // Behind a: no token yet; its candidacy's create_revision is the token it leads with.
    let joined = joined.json();
    assert_eq!((joined["leader"].as_bool(), joined["token"].as_u64()), (Some(false), None));
    let tb = joined["create_revision"].as_u64();
    assert!(tb > Some(t), "b's token is larger");
    let r = post(f2, "/v1/elections/app/resign", json!({"session": a})).await;
    let revoked = call(lead, "DELETE", &format!("/v1/sessions/{b}"), b"").await.json();
    let tc = campaign(lead, "app", c, "c1").await.json()["token"].as_u64().unwrap();
    let mut missed = Vec::new();
    for _ in 0..4 {
        missed.push(told(&stayed.next().await));
    }
    let rev = |v: &Value| v["revision"].as_u64();
    let expected: Vec<Told> = vec![
        ("leader".into(), rev(&p), Some(a), Some("a2".into()), Some(t), rev(&p)),
        ("leader".into(), rev(&r), Some(b), Some("b1".into()), tb, rev(&r)),
        ("no-leader".into(), rev(&revoked), None, None, None, rev(&revoked)),
        ("leader".into(), Some(tc), Some(c), Some("c1".into()), Some(tc), Some(tc)),
    ];
    assert_eq!(missed, expected, "what the observer that stayed was told");

    // Resumed with Last-Event-ID (a browser's EventSource) on another node,
    // and with from_revision on a third: exactly those, in order, then live.
    let (code, mut by_id) =
        Stream::resume(f1, "/v1/elections/app/observe", Some(&last_id.to_string())).await;
    assert_eq!(code, 200);
    let by_query = format!("/v1/elections/app/observe?from_revision={}", last_id + 1);
    let (code, mut by_from) = Stream::open(lead, &by_query).await;
    assert_eq!(code, 200);
    // A browser resends its first URL's from_revision with a later id: the later wins.
    let (_, mut both) =
        Stream::resume(f2, "/v1/elections/app/observe?from_revision=1", Some(&last_id.to_string()))
            .await;
    for resumed in [&mut by_id, &mut by_from, &mut both] {
        for want in &expected {
            assert_eq!(&told(&resumed.next().await), want);
        }
    }
    let live = post(lead, "/v1/elections/app/proclaim", json!({"session": c, "value": "c2"})).await;
    for s in [&mut stayed, &mut by_id, &mut by_from, &mut both] {
        let e = s.next().await;
        assert_eq!(
            (e.id, e.data["value"].as_str()),
            (rev(&live), Some("c2")),
            "nothing else first"
        );
    }
    // Resuming at the latest id tells nothing until the next change.
    let (_, mut at_end) =
        Stream::resume(f2, "/v1/elections/app/observe", Some(&rev(&live).unwrap().to_string()))
            .await;
    post(f2, "/v1/elections/app/resign", json!({"session": c})).await;
    let e = at_end.next().await;
    assert_eq!((e.event.as_str(), e.id), ("no-leader", stayed.next().await.id));
    drop((stayed, by_id, by_from, both, at_end));
    stop_all(&mut servers).await;
}

/// The observer's next change, in time.
async fn next(o: &mut tenure_client::Observer) -> tenure_client::Observed {
    tokio::time::timeout(ANSWER_BOUND, o.next()).await.expect("in time").unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_observer_resumes_on_the_next_node_without_missing_a_change() {
    use tenure_client::{Client, ClientOptions, Cluster, Observed, TenureStore};
    let dir = tempfile::tempdir().unwrap();
    let (mut servers, l) = three_nodes(dir.path()).await;
    let (i1, i2) = ((l + 1) % 3, (l + 2) % 3);
    let (f1, f2, lead) = (servers[i1].http, servers[i2].http, servers[l].http);
    let client = Client::new(ClientOptions { cacert: None, token: Some(READ_TOKEN) }).unwrap();
    let endpoints = vec![format!("http://{f1}"), format!("http://{f2}")];
    let cluster = std::sync::Arc::new(Cluster::new(client, endpoints).unwrap());
    let mut observer = TenureStore::new(cluster).observer("app").unwrap();
    assert!(matches!(next(&mut observer).await, Observed::NoLeader { .. }));
    let (a, b, c) = (session(lead).await, session(lead).await, session(lead).await);
    let t = campaign(lead, "app", a, "a1").await.json()["token"].as_u64().unwrap();
    assert_eq!(
        next(&mut observer).await,
        Observed::Leader { session: a, value: "a1".into(), token: t, revision: t }
    );
    // The node it follows stops; changes are made while it is away.
    servers[i1].stop(STOP_BOUND).await.unwrap();
    let p = post(lead, "/v1/elections/app/proclaim", json!({"session": a, "value": "a2"})).await;
    let tb = campaign(lead, "app", b, "b1").await.json()["create_revision"].as_u64().unwrap();
    let r = post(lead, "/v1/elections/app/resign", json!({"session": a})).await;
    let revoked = call(lead, "DELETE", &format!("/v1/sessions/{b}"), b"").await.json();
    let tc = campaign(lead, "app", c, "c1").await.json()["token"].as_u64().unwrap();
    let rev = |v: &Value| v["revision"].as_u64().unwrap();
    let expected = [
        Observed::Leader { session: a, value: "a2".into(), token: t, revision: rev(&p) },
        Observed::Leader { session: b, value: "b1".into(), token: tb, revision: rev(&r) },
        Observed::NoLeader { revision: rev(&revoked) },
        Observed::Leader { session: c, value: "c1".into(), token: tc, revision: tc },
    ];
    for want in expected {
        assert_eq!(next(&mut observer).await, want);
    }
    // Then live, from the second node, with nothing repeated.
    let live = post(f2, "/v1/elections/app/proclaim", json!({"session": c, "value": "c2"})).await;
    assert_eq!(
        next(&mut observer).await,
        Observed::Leader { session: c, value: "c2".into(), token: tc, revision: rev(&live) }
    );
    drop(observer);
    for i in [l, i2] {
        servers[i].stop(STOP_BOUND).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumption_from_compacted_history_says_so_then_tells_the_state() {
    let dir = tempfile::tempdir().unwrap();
    let (mut servers, l) = three_nodes(dir.path()).await;
    let (f1, lead) = (servers[(l + 1) % 3].http, servers[l].http);
    let (a, b) = (session(f1).await, session(lead).await);
    let t = campaign(f1, "app", a, "a1").await.json()["token"].as_u64().unwrap();
    let (_, mut observer) = Stream::open(f1, "/v1/elections/app/observe").await;
    let last_id = observer.next().await.id.unwrap();
    drop(observer);
    // Missed: a resignation, then more changes than the store keeps.
    campaign(lead, "app", b, "b1").await;
    post(f1, "/v1/elections/app/resign", json!({"session": a})).await;
    let max_ops = tenure_kv::MAX_TXN_OPS;
    let batch: Vec<Value> =
        (0..max_ops).map(|i| json!({"put": {"key": format!("bulk/{i}"), "value": "x"}})).collect();
    let body = json!({ "success": batch }).to_string();
    for _ in 0..tenure_kv::MAX_HISTORY.div_ceil(max_ops) {
        assert_eq!(call(lead, "POST", "/v1/txn", body.as_bytes()).await.status, 200);
    }
    let now = revision(f1).await;
    for (path, id) in [
        ("/v1/elections/app/observe".to_string(), Some(last_id.to_string())),
        (format!("/v1/elections/app/observe?from_revision={}", last_id + 1), None),
    ] {
        let (code, mut resumed) = Stream::resume(f1, &path, id.as_deref()).await;
        assert_eq!(code, 200, "{path}");
        let gone = resumed.next().await;
        assert_eq!((gone.event.as_str(), gone.id), ("compacted", None), "{gone:?}");
        assert!(gone.data["compacted"].as_u64() > Some(last_id), "{gone:?}");
        assert_eq!(gone.data["current"].as_u64(), Some(now), "{gone:?}");
        assert!(gone.data["error"].as_str().unwrap().contains("state as of revision"), "{gone:?}");
        let state = resumed.next().await;
        assert_eq!(
            (state.event.as_str(), state.id, state.data["session"].as_u64()),
            ("leader", Some(now), Some(b)),
            "then the state now"
        );
        assert!(state.data["token"].as_u64() > Some(t));
    }
    stop_all(&mut servers).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_resumption_is_a_400() {
    let dir = tempfile::tempdir().unwrap();
    let (mut servers, l) = three_nodes(dir.path()).await;
    let f = servers[(l + 1) % 3].http;
    let now = revision(f).await;
    let path = "/v1/elections/app/observe";
    let future = (now + 1).to_string();
    for (query, id, why) in [
        ("", Some("seven"), "not a number"),
        ("", Some("-1"), "not a revision"),
        ("", Some(future.as_str()), "in the future"),
        ("", Some("18446744073709551615"), "far in the future"),
        ("?from_revision=x", None, "not a number"),
        ("?from_revision=-3", None, "not a revision"),
        ("?after=3", None, "not a parameter"),
    ] {
        let (code, _) = Stream::resume(f, &format!("{path}{query}"), id).await;
        assert_eq!(code, 400, "{why}: {query} {id:?}");
    }
    // What the 400 says for an id after which no revision follows, and for
    // one too large to be a revision.
    for (id, says) in [
        ("18446744073709551615", "cannot resume after revision 18446744073709551615"),
        ("18446744073709551616", "is too large"),
        ("seven", "is not a revision"),
    ] {
        let (code, mut s) = Stream::resume(f, path, Some(id)).await;
        assert_eq!(code, 400, "{id}");
        let body = s.until(b"}").await;
        assert!(body.contains(says), "{id}: {body}");
    }
    // An empty Last-Event-ID is no id (the SSE spec): the state first.
    let (code, mut s) = Stream::resume(f, path, Some("")).await;
    assert_eq!(code, 200, "an empty Last-Event-ID");
    assert_eq!(s.next().await.event, "no-leader");
    let far = format!("{path}?from_revision={}", now + 2);
    let (code, mut s) = Stream::open(f, &far).await;
    assert_eq!(code, 400, "from_revision after the next revision");
    let body = s.until(b"}").await;
    assert!(body.contains("cannot resume after revision"), "{body}");
    // The next revision is not the future: the stream waits for it.
    let (code, _) = Stream::open(f, &format!("{path}?from_revision={}", now + 1)).await;
    assert_eq!(code, 200);
    let (code, _) = Stream::resume(f, path, Some(&now.to_string())).await;
    assert_eq!(code, 200);
    stop_all(&mut servers).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_a_clear_4xx_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (mut servers, l) = three_nodes(dir.path()).await;
    let f = servers[(l + 1) % 3].http;
    let a = session(f).await;
    assert_eq!(campaign(f, "db", a, "first").await.status, 200);
    let before = revision(f).await;

    let long_name = "n".repeat(129);
    let body = |v: Value| v.to_string().into_bytes();
    let cases: Vec<(&str, String, Vec<u8>, u16, &str)> = vec![
        (
            "POST",
            "/v1/elections/a%20b/campaign".into(),
            body(json!({"session": a})),
            400,
            "A-Z a-z 0-9",
        ),
        ("POST", "/v1/elections/a%2Fb/campaign".into(), body(json!({"session": a})), 400, "name"),
        (
            "POST",
            format!("/v1/elections/{long_name}/campaign"),
            body(json!({"session": a})),
            400,
            "at most 128",
        ),
        (
            "POST",
            "/v1/elections/x/campaign".into(),
            body(json!({"session": a, "value": "v".repeat(4097)})),
            400,
            "at most 4096",
        ),
        (
            "POST",
            "/v1/elections/x/campaign".into(),
            body(json!({"session": a, "value": "v".repeat(100_000)})),
            413,
            "nothing was written",
        ),
        (
            "POST",
            "/v1/elections/x/campaign".into(),
            body(json!({"session": 999_999})),
            404,
            "does not exist",
        ),
        (
            "POST",
            "/v1/elections/db/campaign".into(),
            body(json!({"session": a, "value": "again"})),
            409,
            "already a candidate",
        ),
        (
            "POST",
            "/v1/elections/x/campaign".into(),
            body(json!({"session": 0})),
            400,
            "not a session id",
        ),
        ("POST", "/v1/elections/x/campaign".into(), body(json!({"sesion": a})), 400, "expected"),
        ("POST", "/v1/elections/x/campaign".into(), b"not json".to_vec(), 400, "expected"),
        (
            "POST",
            "/v1/elections/x/resign".into(),
            body(json!({"session": a})),
            404,
            "not a candidate",
        ),
        (
            "POST",
            "/v1/elections/x/proclaim".into(),
            body(json!({"session": a, "value": "v"})),
            409,
            "does not lead",
        ),
        (
            "GET",
            format!("/v1/elections/db/wait?session={a}&timeout_ms=60001"),
            vec![],
            400,
            "at most 60000",
        ),
        ("GET", "/v1/elections/db/wait".into(), vec![], 400, "session"),
        ("GET", "/v1/elections/db/check?token=x".into(), vec![], 400, "token"),
        ("GET", "/v1/elections?limit=0".into(), vec![], 400, "limit=0"),
        (
            "PUT",
            "/v1/kv/_tenure/elections/db/0000000000000001".into(),
            b"v".to_vec(),
            400,
            "only the election calls",
        ),
        (
            "DELETE",
            format!("/v1/kv/_tenure/elections/db/{a:016x}"),
            vec![],
            400,
            "only the election calls",
        ),
        (
            "POST",
            "/v1/txn".into(),
            body(json!({"success": [{"put": {"key": "_tenure/x", "value": "v"}}]})),
            400,
            "only the election calls",
        ),
    ];
    for (method, path, body, status, says) in cases {
        let a = call(f, method, &path, &body).await;
        let error = a.json()["error"].as_str().unwrap_or_default().to_string();
        assert_eq!(a.status, status, "{method} {path}: {error}");
        assert!(error.contains(says), "{method} {path}: {error:?} lacks {says:?}");
    }
    assert_eq!(revision(f).await, before, "nothing was written");
    // Reads under _tenure/ are fine, and show the candidate as the store holds it.
    let key = call(f, "GET", &format!("/v1/kv/_tenure/elections/db/{a:016x}"), b"").await;
    assert_eq!((key.status, key.json()["lease"].as_u64()), (200, Some(a)), "{key:?}");
    assert_eq!(key.json()["value"], "first", "the duplicate changed nothing");
    stop_all(&mut servers).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resignation_wakes_only_the_next_waiter() {
    let dir = tempfile::tempdir().unwrap();
    let (mut servers, l) = three_nodes(dir.path()).await;
    let f = servers[(l + 1) % 3].http;
    const N: usize = 6;
    let mut sessions = Vec::new();
    for i in 0..N {
        let s = session(f).await;
        assert_eq!(campaign(f, "queue", s, &format!("c{i}")).await.status, 200);
        sessions.push(s);
    }
    // Every candidate but the leader waits, on one node.
    let mut waiters: Vec<JoinHandle<Answer>> =
        sessions[1..].iter().map(|&s| wait(f, "queue", s, 30_000)).collect();
    waiting(f, (N - 1) as u64).await;
    let woken = metric(f, "tenure_election_waiter_wakeups_total").await;

    for round in 0..2 {
        let leaving = sessions[round];
        let body = json!({"session": leaving}).to_string();
        assert_eq!(
            call(f, "POST", "/v1/elections/queue/resign", body.as_bytes()).await.status,
            200
        );
        let next = waiters.remove(0);
        let won =
            tokio::time::timeout(HANDOVER_BOUND, next).await.expect("the next leads").unwrap();
        assert_eq!(won.json()["session"].as_u64(), Some(sessions[round + 1]), "{won:?}");
        assert_eq!(won.json()["leader"], true);
        // The others stay asleep: at most one wake-up per resignation, not
        // one per waiter. (None when the next waiter had not subscribed yet:
        // the waiters' gauge counts a long poll from its arrival, before its
        // read index and its subscription, so under load the resignation can
        // apply first and the waiter finds itself leading at its first look.)
        tokio::time::sleep(Duration::from_millis(200)).await;
        let wakeups = metric(f, "tenure_election_waiter_wakeups_total").await;
        assert!(wakeups <= woken + round as u64 + 1, "round {round}: {wakeups} wake-ups");
        assert!(waiters.iter().all(|w| !w.is_finished()), "round {round}: a later waiter answered");
        assert_eq!(metric(f, "tenure_election_waiters").await, (N - 2 - round) as u64);
    }
    // The second resignation's waiter had subscribed long before: it was woken.
    assert!(metric(f, "tenure_election_waiter_wakeups_total").await > woken);
    for w in waiters {
        w.abort();
    }
    stop_all(&mut servers).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_keep_growing_across_a_tenure_leader_change() {
    let dir = tempfile::tempdir().unwrap();
    let (mut servers, l) = three_nodes(dir.path()).await;
    let (f1, f2) = ((l + 1) % 3, (l + 2) % 3);
    let (a, b) = (session(servers[f1].http).await, session(servers[f2].http).await);
    let t1 = campaign(servers[f1].http, "jobs", a, "a").await.json()["token"].as_u64().unwrap();
    assert_eq!(campaign(servers[f2].http, "jobs", b, "b").await.status, 200);
    let waiter = wait(servers[f2].http, "jobs", b, 30_000);
    waiting(servers[f2].http, 1).await;

    // The tenure leader stops; the others elect a new one. The app's
    // leadership does not change with it.
    servers[l].stop(STOP_BOUND).await.unwrap();
    let rest = [f1, f2];
    let new_leader = eventually("a new tenure leader", START_BOUND, || async {
        for &i in &rest {
            let s = status(servers[i].http).await?;
            if s["role"] == "leader" {
                return Some(i);
            }
        }
        None
    })
    .await;
    let e = eventually("the election reads on the new leader", START_BOUND, || async {
        let a = call(servers[new_leader].http, "GET", "/v1/elections/jobs", b"").await;
        (a.status == 200).then(|| a.json())
    })
    .await;
    assert_eq!(
        (e["leader"]["session"].as_u64(), e["leader"]["token"].as_u64()),
        (Some(a), Some(t1))
    );
    assert!(!waiter.is_finished(), "B still waits");

    // A resigns through the new leader: B leads with a larger token.
    let body = json!({"session": a}).to_string();
    let resign = eventually("the resign commits", START_BOUND, || async {
        let r = call(servers[f1].http, "POST", "/v1/elections/jobs/resign", body.as_bytes()).await;
        assert!([200, 503].contains(&r.status), "{r:?}");
        (r.status == 200).then_some(r)
    })
    .await;
    let won =
        tokio::time::timeout(HANDOVER_BOUND + START_BOUND, waiter).await.unwrap().unwrap().json();
    let t2 = won["token"].as_u64().unwrap();
    assert!(t2 > t1 && resign.json()["revision"].as_u64() > Some(t1), "{t1} then {won}");
    // The stopped server comes back and catches up; then the new tenure
    // leader stops too. A campaign after both failovers, and B's
    // resignation: the token is larger still, read the same on the
    // restarted node.
    servers[l].restart();
    let back = servers[l].http;
    eventually("the restarted node reads B's leadership", START_BOUND, || async {
        let a = call(back, "GET", "/v1/elections/jobs", b"").await;
        (a.status == 200 && a.json()["leader"]["token"].as_u64() == Some(t2)).then_some(())
    })
    .await;
    servers[new_leader].stop(STOP_BOUND).await.unwrap();
    let other = if new_leader == f1 { f2 } else { f1 };
    let c = eventually("a session after the second failover", START_BOUND, || async {
        let a = call(servers[other].http, "POST", "/v1/sessions", br#"{"ttl_ms": 600000}"#).await;
        assert!([200, 503, 504].contains(&a.status), "{a:?}");
        (a.status == 200).then(|| a.json()["id"].as_u64().unwrap())
    })
    .await;
    let joined = campaign(back, "jobs", c, "c").await;
    assert_eq!((joined.status, joined.json()["ahead"].as_u64()), (200, Some(1)), "{joined:?}");
    let body = json!({"session": b}).to_string();
    let resigned =
        call(servers[other].http, "POST", "/v1/elections/jobs/resign", body.as_bytes()).await;
    assert_eq!(resigned.status, 200, "{resigned:?}");
    let e = call(back, "GET", "/v1/elections/jobs", b"").await.json();
    assert_eq!(e["leader"]["session"].as_u64(), Some(c), "{e}");
    let t3 = e["leader"]["token"].as_u64().unwrap();
    assert!(t3 > t2, "{t2} then {t3}");
    for i in [l, other] {
        servers[i].stop(STOP_BOUND).await.unwrap();
    }
}

/// `GET /v1/elections` and `GET /v1/sessions` page with `after=` (the last
/// name or id of the page before): every election and session once, in
/// order; a large leader value counts against a page's 4 MiB of JSON.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn election_and_session_lists_page_with_after() {
    let dir = tempfile::tempdir().unwrap();
    let (mut servers, l) = three_nodes(dir.path()).await;
    let node = servers[(l + 1) % 3].http;
    // 200 elections led by values of 4,000 control characters (24 KB of
    // JSON each, 4.8 MB in all), each by a session of its own.
    let value = "\u{1}".repeat(4_000);
    let mut sessions = Vec::new();
    for i in 0..200 {
        let s = session(node).await;
        sessions.push(s);
        let a = campaign(node, &format!("e{i:03}"), s, &value).await;
        assert_eq!(a.status, 200, "{a:?}");
    }
    let mut names = Vec::new();
    let mut pages = 0;
    let mut after = String::new();
    loop {
        let path = format!("/v1/elections?limit=1000&after={after}");
        let page = call(node, "GET", &path, b"").await.json();
        pages += 1;
        for e in page["elections"].as_array().unwrap() {
            names.push(e["name"].as_str().unwrap().to_string());
        }
        if page["more"] == false {
            break;
        }
        after = names.last().unwrap().clone();
    }
    let expected: Vec<String> = (0..200).map(|i| format!("e{i:03}")).collect();
    assert_eq!(names, expected);
    assert!(pages >= 2, "4.8 MB of leaders' values in {pages} page");
    // Sessions, three at a time.
    let mut ids = Vec::new();
    let mut after = 0;
    loop {
        let path = format!("/v1/sessions?limit=3&after={after}");
        let page = call(node, "GET", &path, b"").await.json();
        for s in page["sessions"].as_array().unwrap() {
            ids.push(s["id"].as_u64().unwrap());
        }
        if page["more"] == false {
            break;
        }
        after = *ids.last().unwrap();
    }
    assert_eq!(ids, sessions);
    stop_all(&mut servers).await;
}
