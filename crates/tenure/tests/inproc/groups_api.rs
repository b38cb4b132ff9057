//! Groups of partitions through the HTTP API on a real three-node cluster
//! in this process (`tenure_server::server::run`, real sockets), every
//! member's call through a follower: the first join creates the group, a
//! second member joins, refusals (bad input, another partition count, a
//! release by a non-owner or with a past epoch, a read token, another
//! token's session) change nothing, a leave deletes the member and what it
//! owns; with the leader's keeper, two members each get half of eight
//! partitions, a released partition is granted again with a higher epoch,
//! and the assignment long poll answers at a change or at its timeout.

use crate::servers::{
    agreement, authorization, eventually, start_cluster, Server, ADMIN_TOKEN, READ_TOKEN,
    WRITE_TOKEN,
};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tenure_server::http::HttpLimits;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Bound on a first election and a first write, on a busy machine.
const START_BOUND: Duration = Duration::from_secs(10);
/// Bound on a server's clean stop.
const STOP_BOUND: Duration = Duration::from_secs(5);
/// Bound on one answer (a long poll: beyond its timeout).
const ANSWER_BOUND: Duration = Duration::from_secs(5);
/// Bound on the keeper settling a group (grants, releases asked, the
/// members' releases, grants again): a few commits on loopback; room for
/// a loaded two-core machine.
const SETTLE_BOUND: Duration = Duration::from_secs(15);
/// Bound on a long poll seeing a change, from the write's answer: a commit
/// and an apply on loopback take milliseconds.
const WAKE_BOUND: Duration = Duration::from_millis(1_000);

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

    fn error(&self) -> String {
        self.json()["error"].as_str().unwrap_or_default().to_string()
    }
}

/// `method path` with `token` and `body`, on a fresh connection, waiting at
/// most `bound`.
async fn call_as(
    addr: SocketAddr,
    token: &str,
    method: &str,
    path: &str,
    body: &[u8],
    bound: Duration,
) -> Answer {
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: test\r\n{}Content-Length: {}\r\nConnection: close\r\n\r\n",
        authorization(Some(token)),
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
    assert!(!head.to_ascii_lowercase().contains("chunked"), "{head}");
    Answer { status, body: got[end..].to_vec() }
}

/// `method path` with the write token.
async fn call(addr: SocketAddr, method: &str, path: &str, body: &[u8]) -> Answer {
    call_as(addr, WRITE_TOKEN, method, path, body, ANSWER_BOUND).await
}

/// `POST /v1/groups/{group}/{what}` with `body`, as `token`.
async fn post_as(addr: SocketAddr, token: &str, group: &str, what: &str, body: Value) -> Answer {
    let path = format!("/v1/groups/{group}/{what}");
    call_as(addr, token, "POST", &path, body.to_string().as_bytes(), ANSWER_BOUND).await
}

/// `POST /v1/groups/{group}/{what}` with `body`, as the write token.
async fn post(addr: SocketAddr, group: &str, what: &str, body: Value) -> Answer {
    post_as(addr, WRITE_TOKEN, group, what, body).await
}

/// `GET /v1/groups/{group}` as JSON (200 asserted).
async fn group(addr: SocketAddr, name: &str) -> Value {
    let a = call(addr, "GET", &format!("/v1/groups/{name}"), b"").await;
    assert_eq!(a.status, 200, "{a:?}");
    a.json()
}

/// `GET /v1/groups/{group}/assignment?session=L` with `extra` (`&after=R...`).
async fn assignment(addr: SocketAddr, name: &str, session: u64, extra: &str) -> Answer {
    let path = format!("/v1/groups/{name}/assignment?session={session}{extra}");
    call_as(addr, READ_TOKEN, "GET", &path, b"", Duration::from_secs(65)).await
}

/// What `session` owns, by partition: (epoch, release).
fn owned(answer: &Value) -> BTreeMap<u64, (u64, bool)> {
    answer["owned"]
        .as_array()
        .expect("owned")
        .iter()
        .map(|o| {
            let p = o["partition"].as_u64().unwrap();
            (p, (o["epoch"].as_u64().unwrap(), o["release"].as_bool().unwrap()))
        })
        .collect()
}

/// Waits until every server agrees on one leader and a write through a
/// follower commits; the leader's index.
async fn three_nodes(dir: &std::path::Path) -> (Vec<Server>, usize) {
    let heartbeat = Duration::from_millis(50);
    let servers = start_cluster(3, heartbeat, heartbeat * 10, HttpLimits::default(), dir);
    let l = agreement(&servers).await;
    let follower = servers[(l + 1) % 3].http;
    eventually("a write through a follower commits", START_BOUND, || async {
        let a = call(follower, "PUT", "/v1/kv/_ready", b"").await;
        assert!([200, 503].contains(&a.status), "{a:?}");
        (a.status == 200).then_some(())
    })
    .await;
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

/// A new session of `token` with a TTL long enough for the test.
async fn session_as(addr: SocketAddr, token: &str) -> u64 {
    let body = br#"{"ttl_ms": 600000}"#;
    let grant = call_as(addr, token, "POST", "/v1/sessions", body, ANSWER_BOUND).await;
    assert_eq!(grant.status, 200, "{grant:?}");
    grant.json()["id"].as_u64().unwrap()
}

async fn session(addr: SocketAddr) -> u64 {
    session_as(addr, WRITE_TOKEN).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joins_leaves_and_refusals_that_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (mut servers, l) = three_nodes(dir.path()).await;
    let (f1, f2) = (servers[(l + 1) % 3].http, servers[(l + 2) % 3].http);
    let (a, b, c) = (session(f1).await, session(f2).await, session(f1).await);
    let admins = session_as(f1, ADMIN_TOKEN).await;
    // Members that are not ready: the keeper grants them nothing, so the
    // store's revision moves only by what the test writes.
    let idle = |session: u64| json!({"session": session, "ready": false});

    // No group yet: a join must say how many partitions.
    let before = revision(f1).await;
    let missing = post(f1, "jobs", "join", idle(a)).await;
    assert_eq!(missing.status, 404, "{missing:?}");
    assert!(missing.error().contains("does not exist"), "{missing:?}");
    let get = call(f2, "GET", "/v1/groups/jobs", b"").await;
    assert_eq!(get.status, 404, "{get:?}");
    assert!(get.error().contains("group \"jobs\" does not exist"), "{get:?}");

    // Bad input: 400 with the reason.
    let join = |extra: Value| {
        let mut body = json!({"session": a, "ready": false, "partitions": 8, "stabilise_ms": 0});
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        body
    };
    let bad = [
        (join(json!({"partitions": 0})), "1 to 10000 partitions, not 0"),
        (join(json!({"partitions": 1_000_000_000})), "not 1000000000"),
        (join(json!({"partitions": 1u64 << 40})), "1 to 10000 partitions"),
        (join(json!({"weight": 0})), "weight is at least 1"),
        (join(json!({"excluded": (0..8).collect::<Vec<_>>()})), "excludes all 8 partitions"),
        (join(json!({"preferred": [2], "excluded": [2]})), "partition 2 is both preferred"),
        (join(json!({"preferred": [8]})), "partition 8 is not one of the group's 8"),
        (join(json!({"stabilise_ms": 600_001})), "at most 600000 ms"),
        (join(json!({"zone": ""})), "a zone name has 1 to 64 bytes"),
        (join(json!({"session": 0})), "session 0 is not a session id"),
        (join(json!({"stabilize_ms": 0})), "unknown field `stabilize_ms`"),
    ];
    for (body, why) in bad {
        let refused = post(f1, "jobs", "join", body.clone()).await;
        assert_eq!(refused.status, 400, "{body}: {refused:?}");
        assert!(refused.error().contains(why), "{body}: {:?} lacks {why:?}", refused.error());
    }
    let name = post(f1, "no!such", "join", join(json!({}))).await;
    assert_eq!(name.status, 400, "{name:?}");
    assert!(name.error().contains("a group name is made of"), "{name:?}");
    let huge = vec![b' '; 70_000];
    let big = call(f1, "POST", "/v1/groups/jobs/join", &huge).await;
    assert_eq!(big.status, 413, "{big:?}");
    // Roles and owners: a read token may not join; another token's session
    // may not be used.
    let read_only = post_as(f1, READ_TOKEN, "jobs", "join", join(json!({}))).await;
    assert_eq!(read_only.status, 403, "{read_only:?}");
    let foreign = post(f1, "jobs", "join", join(json!({"session": admins}))).await;
    assert_eq!(foreign.status, 403, "{foreign:?}");
    assert!(foreign.error().contains("join a group with"), "{foreign:?}");
    let unknown = post(f1, "jobs", "join", join(json!({"session": a + 1000}))).await;
    assert_eq!(unknown.status, 404, "{unknown:?}");
    assert_eq!(revision(f2).await, before, "nothing was written");
    assert_eq!(call(f2, "GET", "/v1/groups/jobs", b"").await.status, 404);

    // The first member creates the group, through a follower.
    let created = post(f1, "jobs", "join", join(json!({"zone": "eu-1", "weight": 2}))).await;
    assert_eq!(created.status, 200, "{created:?}");
    let r1 = created.json()["revision"].as_u64().unwrap();
    let g = group(f2, "jobs").await;
    assert_eq!(g["spec"], json!({"partitions": 8, "stabilise_ms": 0}), "{g}");
    assert_eq!(g["revision"].as_u64(), Some(r1));
    assert_eq!(
        g["members"],
        json!([{
            "id": format!("{a:016x}"), "session": a,
            "spec": {"weight": 2, "zone": "eu-1", "ready": false, "preferred": [], "excluded": []},
            "joined_revision": r1, "owned": 0,
        }])
    );
    assert_eq!(
        (g["owners"].clone(), g["more"].clone(), g["unreadable"].clone()),
        (json!([]), json!(false), json!(0))
    );

    // A second member joins without saying the count, or with the same one.
    let second =
        post(f2, "jobs", "join", json!({"session": b, "ready": false, "excluded": [0]})).await;
    assert_eq!(second.status, 200, "{second:?}");
    let again =
        post(f2, "jobs", "join", json!({"session": b, "ready": false, "partitions": 8})).await;
    assert_eq!(again.status, 200, "{again:?}");
    let g = group(f1, "jobs").await;
    let ids: Vec<u64> =
        g["members"].as_array().unwrap().iter().map(|m| m["session"].as_u64().unwrap()).collect();
    assert_eq!(ids, [a.min(b), a.max(b)], "{g}");
    let bm = g["members"].as_array().unwrap().iter().find(|m| m["session"] == b).unwrap().clone();
    assert_eq!(bm["spec"]["excluded"], json!([]), "a join replaces the member's spec: {bm}");
    assert_eq!(bm["joined_revision"].as_u64(), second.json()["revision"].as_u64());

    // The list of groups: pages by name, members and owned counted.
    let other = json!({"session": c, "ready": false, "partitions": 2, "stabilise_ms": 0});
    assert_eq!(post(f1, "alpha", "join", other).await.status, 200);
    let page = call(f2, "GET", "/v1/groups?limit=1", b"").await;
    assert_eq!(page.status, 200, "{page:?}");
    let page = page.json();
    assert_eq!(
        (page["groups"].clone(), page["more"].clone()),
        (
            json!([{"name": "alpha", "spec": {"partitions": 2, "stabilise_ms": 0}, "members": 1, "owned": 0}]),
            json!(true)
        ),
        "{page}"
    );
    let page = call(f1, "GET", "/v1/groups?after=alpha", b"").await.json();
    assert_eq!(page["groups"].as_array().map(|g| g.len()), Some(1), "{page}");
    assert_eq!(
        (page["groups"][0]["name"].clone(), page["groups"][0]["members"].clone()),
        (json!("jobs"), json!(2))
    );
    assert_eq!(page["more"], json!(false), "{page}");
    for bad in [
        "/v1/groups?limit=0",
        "/v1/groups?limit=101",
        "/v1/groups?after=no!such",
        "/v1/groups?page=2",
    ] {
        let refused = call(f1, "GET", bad, b"").await;
        assert_eq!(refused.status, 400, "{bad}: {refused:?}");
    }
    assert_eq!(post(f1, "alpha", "leave", json!({"session": c})).await.status, 200);

    // Refusals against the group: nothing changes.
    let before = revision(f1).await;
    let other = post(f1, "jobs", "join", json!({"session": c, "partitions": 9})).await;
    assert_eq!(other.status, 409, "{other:?}");
    assert!(other.error().contains("group jobs has 8 partitions, not 9"), "{other:?}");
    let slower = post(f1, "jobs", "join", json!({"session": c, "stabilise_ms": 5})).await;
    assert_eq!(slower.status, 409, "{slower:?}");
    assert!(slower.error().contains("has stabilise_ms 0, not 5"), "{slower:?}");
    let release = json!({"session": a, "partition": 3, "epoch": r1});
    let not_owner = post(f2, "jobs", "release", release).await;
    assert_eq!(not_owner.status, 409, "{not_owner:?}");
    assert!(
        not_owner.error().contains(&format!("does not own partition 3 at epoch {r1}")),
        "{not_owner:?}"
    );
    let stranger = post(f2, "jobs", "leave", json!({"session": c})).await;
    assert_eq!(stranger.status, 404, "{stranger:?}");
    assert!(stranger.error().contains("is not a member of group \"jobs\""), "{stranger:?}");
    let nowhere = post(f2, "nowhere", "leave", json!({"session": a})).await;
    assert_eq!(nowhere.status, 404, "{nowhere:?}");
    let foreign = post(f2, "jobs", "leave", json!({"session": admins})).await;
    assert_eq!(foreign.status, 403, "{foreign:?}");
    let read_only = post_as(f2, READ_TOKEN, "jobs", "leave", json!({"session": a})).await;
    assert_eq!(read_only.status, 403, "{read_only:?}");
    assert_eq!(revision(f2).await, before, "nothing was written");

    // The assignment of a member that owns nothing; of a stranger: 404.
    let mine = assignment(f1, "jobs", b, "").await;
    assert_eq!(mine.status, 200, "{mine:?}");
    assert_eq!(mine.json()["owned"], json!([]));
    assert_eq!(mine.json()["revision"].as_u64(), Some(before));
    assert_eq!(assignment(f1, "jobs", c, "").await.status, 404);
    let future = assignment(f1, "jobs", b, &format!("&after={}", before + 100)).await;
    assert_eq!(future.status, 400, "{future:?}");
    assert_eq!(assignment(f1, "jobs", b, "&after=1&timeout_ms=60001").await.status, 400);

    // A leaves: its key goes; B stays.
    let left = post(f1, "jobs", "leave", json!({"session": a})).await;
    assert_eq!(left.status, 200, "{left:?}");
    let g = group(f2, "jobs").await;
    assert_eq!(g["members"].as_array().unwrap().len(), 1, "{g}");
    assert_eq!(g["members"][0]["session"].as_u64(), Some(b));
    assert_eq!(assignment(f2, "jobs", a, "").await.status, 404, "A is no member");
    let twice = post(f1, "jobs", "leave", json!({"session": a})).await;
    assert_eq!(twice.status, 404, "{twice:?}");
    stop_all(&mut servers).await;
}

/// Plays member `session` until `settled` says the group is as wanted:
/// polls its assignment and releases what it is asked to give up.
async fn serve_releases(addr: SocketAddr, name: &str, session: u64) -> BTreeMap<u64, (u64, bool)> {
    let a = assignment(addr, name, session, "").await;
    assert_eq!(a.status, 200, "{a:?}");
    let owned = owned(&a.json());
    for (p, (epoch, release)) in &owned {
        if *release {
            let body = json!({"session": session, "partition": p, "epoch": epoch});
            let r = post(addr, name, "release", body).await;
            // 409: the keeper's grant changed meanwhile (it cannot: only
            // the owner deletes a key it was asked to release) or a retry.
            assert!([200, 409].contains(&r.status), "{r:?}");
        }
    }
    owned
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_members_share_eight_partitions_and_a_release_is_granted_again() {
    let dir = tempfile::tempdir().unwrap();
    let (mut servers, l) = three_nodes(dir.path()).await;
    let (f1, f2) = (servers[(l + 1) % 3].http, servers[(l + 2) % 3].http);
    let (a, b) = (session(f1).await, session(f2).await);

    let joined =
        post(f1, "orders", "join", json!({"session": a, "partitions": 8, "stabilise_ms": 0})).await;
    assert_eq!(joined.status, 200, "{joined:?}");
    // A long poll from the join's revision answers once the keeper granted.
    let r = joined.json()["revision"].as_u64().unwrap();
    let first = assignment(f2, "orders", a, &format!("&after={r}&timeout_ms=10000")).await;
    assert_eq!(first.status, 200, "{first:?}");
    assert!(first.json()["revision"].as_u64().unwrap() > r, "{:?}", first.json());
    assert_eq!(
        post(f2, "orders", "join", json!({"session": b, "stabilise_ms": 0})).await.status,
        200
    );

    // Each member releases what it is asked to; the keeper grants B its half.
    let (mine, theirs) = eventually("each member owns 4 partitions", SETTLE_BOUND, || async {
        let mine = serve_releases(f1, "orders", a).await;
        let theirs = serve_releases(f2, "orders", b).await;
        let settled = mine.len() == 4
            && theirs.len() == 4
            && mine.values().chain(theirs.values()).all(|(_, release)| !release);
        if !settled {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        settled.then_some((mine, theirs))
    })
    .await;
    assert!(mine.keys().all(|p| !theirs.contains_key(p)), "{mine:?} {theirs:?}");
    let g = group(servers[l].http, "orders").await;
    let counts: Vec<u64> =
        g["members"].as_array().unwrap().iter().map(|m| m["owned"].as_u64().unwrap()).collect();
    assert_eq!(counts, [4, 4], "{g}");
    assert_eq!(g["owners"].as_array().unwrap().len(), 8, "{g}");

    // Settled: a poll with nothing changing answers at its timeout, as it was.
    let now = revision(f1).await;
    let started = Instant::now();
    let quiet = assignment(f1, "orders", a, &format!("&after={now}&timeout_ms=300")).await;
    assert!(started.elapsed() >= Duration::from_millis(300), "{:?}", started.elapsed());
    assert_eq!((quiet.status, owned(&quiet.json())), (200, mine.clone()), "{quiet:?}");
    assert_eq!(quiet.json()["revision"].as_u64(), Some(now));

    // A release with a past epoch, or by the other member: 409, nothing
    // changes.
    let (&p, &(epoch, _)) = mine.iter().next().unwrap();
    let past =
        post(f2, "orders", "release", json!({"session": a, "partition": p, "epoch": epoch - 1}))
            .await;
    assert_eq!(past.status, 409, "{past:?}");
    assert!(
        past.error().contains(&format!("does not own partition {p} at epoch {}", epoch - 1)),
        "{past:?}"
    );
    let by_b =
        post(f2, "orders", "release", json!({"session": b, "partition": p, "epoch": epoch})).await;
    assert_eq!(by_b.status, 409, "{by_b:?}");
    assert_eq!(revision(f2).await, now, "nothing was written");

    // A gives p up: a waiting poll of A answers at once, and p is granted
    // again (to A: 3 against 4) with a higher epoch.
    let poll = tokio::spawn(async move {
        assignment(f1, "orders", a, &format!("&after={now}&timeout_ms=20000")).await
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let released =
        post(f2, "orders", "release", json!({"session": a, "partition": p, "epoch": epoch})).await;
    assert_eq!(released.status, 200, "{released:?}");
    let at = Instant::now();
    let woken = tokio::time::timeout(WAKE_BOUND, poll).await.expect("the poll answers").unwrap();
    eprintln!("a poll saw the release after {:?}", at.elapsed());
    assert_eq!(woken.status, 200, "{woken:?}");
    assert!(
        woken.json()["revision"].as_u64().unwrap() >= released.json()["revision"].as_u64().unwrap()
    );
    let again = eventually("p is granted again", SETTLE_BOUND, || async {
        let a_now = owned(&assignment(f1, "orders", a, "").await.json());
        let b_now = owned(&assignment(f1, "orders", b, "").await.json());
        a_now.get(&p).or(b_now.get(&p)).map(|&(e, _)| e)
    })
    .await;
    assert!(again > epoch, "epochs grow: {epoch} then {again}");

    // B leaves: its key and its four partitions go at the leave's revision,
    // handed to A in the same transaction: each at the leave's revision, a
    // higher epoch, with no grant of the keeper's after it.
    let left = post(f1, "orders", "leave", json!({"session": b})).await;
    assert_eq!(left.status, 200, "{left:?}");
    let r = left.json()["revision"].as_u64().unwrap();
    let g = group(f2, "orders").await;
    assert!(g["members"].as_array().unwrap().iter().all(|m| m["session"] != b), "{g}");
    assert!(g["owners"].as_array().unwrap().iter().all(|o| o["session"] != b), "{g}");
    let all = eventually("A owns all 8", SETTLE_BOUND, || async {
        let a_now = serve_releases(f1, "orders", a).await;
        (a_now.len() == 8).then_some(a_now)
    })
    .await;
    for p in theirs.keys() {
        assert_eq!(all[p].0, r, "partition {p} handed over in the leave: {all:?}");
    }
    stop_all(&mut servers).await;
}
