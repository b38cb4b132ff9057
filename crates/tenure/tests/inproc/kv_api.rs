//! The key-value API on a real three-node cluster in this process
//! (`tenure_server::server::run`, real sockets): writes through followers, reads on
//! other nodes, compare-and-set, transactions, lists, watches that resume,
//! and bad input that writes nothing.

use crate::servers::{
    agreement, authorization, eventually, start_cluster, status, Server, READ_TOKEN, WRITE_TOKEN,
};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::time::Duration;
use tenure_kv::{MAX_KEY_BYTES, MAX_TXN_OPS, MAX_VALUE_BYTES};
use tenure_server::http::HttpLimits;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Bound on a first election or a server's start, on a busy machine.
const START_BOUND: Duration = Duration::from_secs(10);
/// Bound on a server's clean stop.
const STOP_BOUND: Duration = Duration::from_secs(5);
/// Bound on one answer or one watch event.
const ANSWER_BOUND: Duration = Duration::from_secs(5);

/// An answer: status, headers (lower-case names) and body.
#[derive(Debug)]
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// `method path` with the write token and `body`, on a fresh connection
/// (`Connection: close`: the answer ends with the connection, whatever its
/// framing).
async fn call(addr: SocketAddr, method: &str, path: &str, body: &[u8]) -> Answer {
    call_as(addr, method, path, body, WRITE_TOKEN).await
}

async fn call_as(addr: SocketAddr, method: &str, path: &str, body: &[u8], token: &str) -> Answer {
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: test\r\n{}Content-Length: {}\r\nConnection: close\r\n\r\n",
        authorization(Some(token)),
        body.len()
    );
    let exchange = async {
        let mut conn = TcpStream::connect(addr).await.unwrap();
        conn.write_all(head.as_bytes()).await.unwrap();
        conn.write_all(body).await.unwrap();
        // A server that refuses a body closes without reading it all, and
        // the close may come as a reset: keep what arrived before it.
        let mut got = Vec::new();
        let mut chunk = [0u8; 4096];
        while let Ok(n @ 1..) = conn.read(&mut chunk).await {
            got.extend_from_slice(&chunk[..n]);
        }
        got
    };
    let got = tokio::time::timeout(ANSWER_BOUND, exchange).await.expect("an answer in time");
    let end = got.windows(4).position(|w| w == b"\r\n\r\n").expect("headers") + 4;
    let head = String::from_utf8_lossy(&got[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap().split(' ').nth(1).unwrap().parse().unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect::<Vec<_>>();
    let chunked = headers.iter().any(|(n, v)| n == "transfer-encoding" && v == "chunked");
    let body = if chunked { dechunk(&got[end..]) } else { got[end..].to_vec() };
    Answer { status, headers, body }
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
    id: Option<String>,
    data: Value,
}

/// An open `GET /v1/kv-watch` stream, read event by event.
struct Watch {
    conn: TcpStream,
    buffered: Vec<u8>,
}

impl Watch {
    /// Opens `path` with the read token (and `Last-Event-ID`); the answer's
    /// status and, for an error, its JSON body.
    async fn open(addr: SocketAddr, path: &str, last_event_id: Option<u64>) -> (u16, Watch) {
        let mut conn = TcpStream::connect(addr).await.unwrap();
        let last = last_event_id.map(|id| format!("Last-Event-ID: {id}\r\n")).unwrap_or_default();
        let head = format!(
            "GET {path} HTTP/1.1\r\nHost: test\r\n{}{last}\r\n",
            authorization(Some(READ_TOKEN))
        );
        conn.write_all(head.as_bytes()).await.unwrap();
        let mut w = Watch { conn, buffered: Vec::new() };
        let head = w.until(b"\r\n\r\n").await;
        let status = head.split(' ').nth(1).unwrap().parse().unwrap();
        (status, w)
    }

    /// Reads until `delimiter`; the text before it.
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

    /// The next event (keep-alive comments skipped). The chunked framing
    /// is read around it: hyper writes each event in a chunk of its own.
    async fn next(&mut self) -> Sse {
        loop {
            let _size = self.until(b"\r\n").await;
            let chunk = self.until(b"\r\n").await;
            let mut sse = Sse::default();
            for line in chunk.lines() {
                match line.split_once(':') {
                    Some(("event", v)) => sse.event = v.trim().to_string(),
                    Some(("id", v)) => sse.id = Some(v.trim().to_string()),
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

/// Waits until every server agrees on one leader, and a write through a
/// follower commits; the leader's index. (A leader just elected refuses
/// writes until it has synchronised its log; a follower's write gets 503 then.)
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

/// The store's revision as `addr` reads it (linearizable).
async fn revision(addr: SocketAddr) -> u64 {
    let list = call(addr, "GET", "/v1/kv?prefix=&limit=1", b"").await;
    assert_eq!(list.status, 200, "{list:?}");
    list.json()["revision"].as_u64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_key_value_api_on_three_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let heartbeat = Duration::from_millis(50);
    let mut servers =
        start_cluster(3, heartbeat, heartbeat * 10, HttpLimits::default(), dir.path());
    let l = leader(&servers).await;
    let token = status(servers[l].http).await.unwrap()["fencing_token"].as_u64().unwrap();
    let followers: Vec<SocketAddr> = (0..3).filter(|&i| i != l).map(|i| servers[i].http).collect();
    let (f1, f2, lead) = (followers[0], followers[1], servers[l].http);

    // A put on one follower is seen by a linearizable read on the other.
    let put = call(f1, "PUT", "/v1/kv/app/config", b"v1").await;
    assert_eq!(put.status, 200, "{put:?}");
    let r1 = put.json()["revision"].as_u64().unwrap();
    assert_eq!(put.json()["fencing_token"].as_u64(), Some(token), "the leader's token");
    let got = call(f2, "GET", "/v1/kv/app/config", b"").await;
    assert_eq!(got.status, 200, "{got:?}");
    let kv = got.json();
    assert_eq!((kv["key"].as_str(), kv["value"].as_str()), (Some("app/config"), Some("v1")));
    assert_eq!(kv["create_revision"].as_u64(), Some(r1));
    assert_eq!((kv["mod_revision"].as_u64(), kv["version"].as_u64()), (Some(r1), Some(1)));
    assert!(kv["revision"].as_u64() >= Some(r1), "{kv}");

    // Compare-and-set: 0 means absent, a stale revision is a 409.
    let cas = call(f2, "PUT", "/v1/kv/app/config?if_mod_revision=0", b"v2").await;
    assert_eq!(cas.status, 409, "{cas:?}");
    assert_eq!(cas.json()["mod_revision"].as_u64(), Some(r1));
    assert!(cas.json()["revision"].as_u64() >= Some(r1));
    let cas = call(f2, "PUT", &format!("/v1/kv/app/config?if_mod_revision={r1}"), b"v2").await;
    assert_eq!(cas.status, 200, "{cas:?}");
    let r2 = cas.json()["revision"].as_u64().unwrap();
    assert!(r2 > r1);
    // A stale read on the leader catches up.
    eventually("a stale read sees v2", ANSWER_BOUND, || async {
        let a = call(lead, "GET", "/v1/kv/app/config?consistency=stale", b"").await;
        (a.json()["value"] == "v2").then_some(())
    })
    .await;

    // Binary values travel in base64; keys may hold '/' and escapes.
    let put = call(lead, "PUT", "/v1/kv/bin/a%2Fb%20c", &[0xff, 0x00]).await;
    assert_eq!(put.status, 200, "{put:?}");
    let got = call(f1, "GET", "/v1/kv/bin/a/b%20c", b"").await.json();
    assert_eq!(got["key"], "bin/a/b c");
    assert_eq!((got["value_base64"].as_str(), got.get("value")), (Some("/wA="), None));

    // Lists by prefix, bounded.
    call(f1, "PUT", "/v1/kv/app/owner", b"nobody").await;
    let list = call(f2, "GET", "/v1/kv?prefix=app/", b"").await.json();
    let keys: Vec<&str> =
        list["kvs"].as_array().unwrap().iter().map(|k| k["key"].as_str().unwrap()).collect();
    assert_eq!(keys, ["app/config", "app/owner"]);
    assert_eq!(list["more"], false);
    let list = call(f2, "GET", "/v1/kv?prefix=app/&limit=1&consistency=stale", b"").await.json();
    assert_eq!((list["kvs"].as_array().map(Vec::len), &list["more"]), (Some(1), &json!(true)));

    // A transaction: the success branch when the comparison holds, else the failure one.
    let txn = |expected: u64| {
        json!({
            "compare": [{"key": "app/config", "target": "mod_revision", "op": "=", "value": expected}],
            "success": [{"put": {"key": "app/owner", "value": "me"}}, {"get": {"key": "app/config"}}],
            "failure": [{"get": {"key": "app/owner"}}]
        })
        .to_string()
    };
    let done = call(f2, "POST", "/v1/txn", txn(r2).as_bytes()).await;
    assert_eq!(done.status, 200, "{done:?}");
    let done = done.json();
    assert_eq!(done["succeeded"], true);
    assert_eq!(done["fencing_token"].as_u64(), Some(token));
    assert_eq!(done["responses"][0]["put"]["prev"]["value"], "nobody");
    assert_eq!(done["responses"][1]["get"]["kv"]["value"], "v2");
    let r3 = done["revision"].as_u64().unwrap();
    let failed = call(f1, "POST", "/v1/txn", txn(r1).as_bytes()).await.json();
    assert_eq!((&failed["succeeded"], failed["revision"].as_u64()), (&json!(false), Some(r3)));
    assert_eq!(failed["responses"][0]["get"]["kv"]["value"], "me");

    // Deletes: once, then nothing to delete; then 404 with the revision.
    let del = call(f1, "DELETE", "/v1/kv/bin/a%2Fb%20c", b"").await.json();
    assert_eq!((&del["deleted"], del["fencing_token"].as_u64()), (&json!(true), Some(token)));
    let r4 = del["revision"].as_u64().unwrap();
    let again = call(f2, "DELETE", "/v1/kv/bin/a%2Fb%20c", b"").await.json();
    assert_eq!((&again["deleted"], again["revision"].as_u64()), (&json!(false), Some(r4)));
    let gone = call(lead, "GET", "/v1/kv/bin/a%2Fb%20c", b"").await;
    assert_eq!((gone.status, gone.json()["revision"].as_u64()), (404, Some(r4)), "{gone:?}");
    let cad = call(f1, "DELETE", &format!("/v1/kv/app/owner?if_mod_revision={r1}"), b"").await;
    assert_eq!((cad.status, cad.json()["mod_revision"].as_u64()), (409, Some(r3)), "{cad:?}");

    // The metrics of the node that took the writes.
    let metrics = String::from_utf8(call(f1, "GET", "/metrics", b"").await.body).unwrap();
    for name in [
        "tenure_kv_commit_duration_seconds_count",
        "tenure_log_applied_index",
        "tenure_log_forwarded_total",
    ] {
        assert!(metrics.contains(name), "{name} missing:\n{metrics}");
    }
    let lead_metrics = String::from_utf8(call(lead, "GET", "/metrics", b"").await.body).unwrap();
    assert_eq!(
        lead_metrics.matches("tenure_log_follower_match_index{").count(),
        2,
        "{lead_metrics}"
    );

    for s in &mut servers {
        s.stop(STOP_BOUND).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_stream_changes_resume_from_a_revision_and_report_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let heartbeat = Duration::from_millis(50);
    let mut servers =
        start_cluster(3, heartbeat, heartbeat * 10, HttpLimits::default(), dir.path());
    let l = leader(&servers).await;
    let (lead, follower) = (servers[l].http, servers[(l + 1) % 3].http);

    let r1 = call(lead, "PUT", "/v1/kv/w/a", b"1").await.json()["revision"].as_u64().unwrap();
    // On a follower, from the first revision: the put already made, then the new ones.
    let (code, mut watch) =
        Watch::open(follower, "/v1/kv-watch?prefix=w/&from_revision=1", None).await;
    assert_eq!(code, 200);
    let first = watch.next().await;
    assert_eq!((first.event.as_str(), first.id.clone()), ("put", Some(r1.to_string())));
    assert_eq!(
        (first.data["key"].as_str(), first.data["value"].as_str()),
        (Some("w/a"), Some("1"))
    );
    call(lead, "PUT", "/v1/kv/other", b"not watched").await;
    // A transaction's two changes share a revision; only the last carries the id.
    let txn =
        json!({"success": [{"put": {"key": "w/b", "value": "2"}}, {"delete": {"key": "w/a"}}]});
    let r2 = call(lead, "POST", "/v1/txn", txn.to_string().as_bytes()).await.json()["revision"]
        .as_u64()
        .unwrap();
    let put = watch.next().await;
    let del = watch.next().await;
    assert_eq!(
        (put.event.as_str(), put.data["revision"].as_u64(), put.id),
        ("put", Some(r2), None)
    );
    assert_eq!((del.event.as_str(), del.id), ("delete", Some(r2.to_string())));
    assert_eq!((del.data["key"].as_str(), del.data["version"].as_u64()), (Some("w/a"), Some(0)));
    drop(watch);

    // Resume after the last id: only what came after.
    let r3 = call(lead, "PUT", "/v1/kv/w/c", b"3").await.json()["revision"].as_u64().unwrap();
    let path = format!("/v1/kv-watch?prefix=w/&from_revision={}", r2 + 1);
    let (_, mut resumed) = Watch::open(lead, &path, None).await;
    let next = resumed.next().await;
    assert_eq!((next.id, next.data["key"].as_str()), (Some(r3.to_string()), Some("w/c")));
    // Last-Event-ID (as a browser resends it) wins over an older from_revision; key= is one key.
    let (_, mut by_id) =
        Watch::open(follower, "/v1/kv-watch?key=w/b&from_revision=1", Some(r2)).await;
    call(lead, "PUT", "/v1/kv/w/bb", b"not this key").await;
    let r5 = call(lead, "PUT", "/v1/kv/w/b", b"4").await.json()["revision"].as_u64().unwrap();
    let next = by_id.next().await;
    assert_eq!((next.id, next.data["value"].as_str()), (Some(r5.to_string()), Some("4")));

    // Bad watch queries.
    for bad in ["/v1/kv-watch?prefix=a&key=b", "/v1/kv-watch?from=3", "/v1/kv-watch?key="] {
        assert_eq!(Watch::open(lead, bad, None).await.0, 400, "{bad}");
    }

    // More changes than the store keeps (transactions of MAX_TXN_OPS puts): from 1 is gone.
    let batch: Vec<Value> = (0..MAX_TXN_OPS)
        .map(|i| json!({"put": {"key": format!("bulk/{i}"), "value": "x"}}))
        .collect();
    let body = json!({ "success": batch }).to_string();
    for _ in 0..tenure_kv::MAX_HISTORY.div_ceil(MAX_TXN_OPS) {
        assert_eq!(call(lead, "POST", "/v1/txn", body.as_bytes()).await.status, 200);
    }
    let gone = call_as(lead, "GET", "/v1/kv-watch?from_revision=1", b"", READ_TOKEN).await;
    assert_eq!(gone.status, 410, "{gone:?}");
    let g = gone.json();
    assert!(g["compacted"].as_u64() >= Some(r5) && g["current"].as_u64() > Some(r5), "{g}");
    assert!(g["error"].as_str().unwrap().contains("read the keys again"), "{g}");
    // A watch from after the compacted revisions still works.
    let from = g["compacted"].as_u64().unwrap() + 1;
    let (code, _) = Watch::open(lead, &format!("/v1/kv-watch?from_revision={from}"), None).await;
    assert_eq!(code, 200);
    drop(by_id);

    for s in &mut servers {
        s.stop(STOP_BOUND).await.unwrap();
    }
}

/// Sessions through followers: a grant, keys attached with `?lease=` and in
/// a transaction, a revoke that deletes them at one revision (seen by a
/// watch with its reason), and the refusals that write nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_hold_keys_until_revoked() {
    let dir = tempfile::tempdir().unwrap();
    let heartbeat = Duration::from_millis(50);
    let mut servers =
        start_cluster(3, heartbeat, heartbeat * 10, HttpLimits::default(), dir.path());
    let l = leader(&servers).await;
    let (f1, f2) = (servers[(l + 1) % 3].http, servers[(l + 2) % 3].http);

    let grant = call(f1, "POST", "/v1/sessions", br#"{"ttl_ms": 60000}"#).await;
    assert_eq!(grant.status, 200, "{grant:?}");
    let id = grant.json()["id"].as_u64().unwrap();
    assert_eq!(grant.json()["ttl_ms"].as_u64(), Some(60_000));
    // Long enough not to expire before the end (the leader expires sessions).
    let other = call(f2, "POST", "/v1/sessions", br#"{"ttl_ms": 60000}"#).await.json()["id"]
        .as_u64()
        .unwrap();
    assert!(other > id, "ids grow: {id} then {other}");

    let put = call(f2, "PUT", &format!("/v1/kv/s/a?lease={id}"), b"held").await;
    assert_eq!(put.status, 200, "{put:?}");
    let txn = json!({"success": [{"put": {"key": "s/b", "value": "too", "lease": id}}]});
    assert_eq!(call(f1, "POST", "/v1/txn", txn.to_string().as_bytes()).await.status, 200);
    call(f1, "PUT", "/v1/kv/s/free", b"no session").await;
    let got = call(f1, "GET", "/v1/kv/s/a", b"").await.json();
    assert_eq!(got["lease"].as_u64(), Some(id), "{got}");
    assert!(call(f1, "GET", "/v1/kv/s/free", b"").await.json().get("lease").is_none());

    let info = call_as(f2, "GET", &format!("/v1/sessions/{id}"), b"", READ_TOKEN).await;
    assert_eq!(info.status, 200, "{info:?}");
    assert_eq!(info.json()["keys"], json!(["s/a", "s/b"]));
    let list = call_as(f1, "GET", "/v1/sessions?limit=1", b"", READ_TOKEN).await.json();
    assert_eq!(
        (list["sessions"][0]["id"].as_u64(), list["more"].as_bool()),
        (Some(id), Some(true))
    );

    let from = revision(f1).await + 1;
    let (_, mut watch) =
        Watch::open(f2, &format!("/v1/kv-watch?prefix=s/&from_revision={from}"), None).await;
    let revoke = call(f2, "DELETE", &format!("/v1/sessions/{id}"), b"").await;
    assert_eq!(revoke.status, 200, "{revoke:?}");
    let r = revoke.json();
    assert_eq!((r["id"].as_u64(), r["keys_deleted"].as_u64()), (Some(id), Some(2)), "{r}");
    let ended_at = r["revision"].as_u64().unwrap();
    for key in ["s/a", "s/b"] {
        let e = watch.next().await;
        assert_eq!((e.event.as_str(), e.data["key"].as_str()), ("delete", Some(key)), "{e:?}");
        assert_eq!(e.data["reason"].as_str(), Some("revoked"), "{e:?}");
        assert_eq!(e.data["revision"].as_u64(), Some(ended_at), "one revision");
    }
    assert_eq!(call(f1, "GET", "/v1/kv/s/a", b"").await.status, 404);
    assert_eq!(call(f1, "GET", "/v1/kv/s/free", b"").await.status, 200, "not attached");

    // Gone, bad, or over a limit: a clear 4xx, and nothing written.
    let before = revision(f1).await;
    let again = call(f1, "DELETE", &format!("/v1/sessions/{id}"), b"").await;
    assert_eq!(again.status, 404, "{again:?}");
    assert!(String::from_utf8_lossy(&again.body).contains("does not exist"), "{again:?}");
    let ended = call(f1, "PUT", &format!("/v1/kv/s/late?lease={id}"), b"x").await;
    assert_eq!(ended.status, 404, "a session that ended holds no key: {ended:?}");
    for (path, body) in [
        ("/v1/sessions", &br#"{"ttl_ms": 10}"#[..]),
        ("/v1/sessions", br#"{"ttl_ms": 86400001}"#),
        ("/v1/sessions", br#"{"ttl": 1000}"#),
        ("/v1/sessions", b"not json"),
    ] {
        let a = call(f1, "POST", path, body).await;
        assert_eq!(a.status, 400, "{path} {}: {a:?}", String::from_utf8_lossy(body));
    }
    // A page over MAX_SESSION_LIST (10,000) is refused, not built.
    for path in
        ["/v1/sessions/0", "/v1/sessions/x", "/v1/sessions?limit=0", "/v1/sessions?limit=10001"]
    {
        assert_eq!(call_as(f1, "GET", path, b"", READ_TOKEN).await.status, 400, "{path}");
    }
    assert_eq!(call(f1, "PUT", "/v1/kv/s/x?lease=abc", b"x").await.status, 400);
    assert_eq!(revision(f1).await, before, "nothing was written");
    assert_eq!(call(f1, "GET", &format!("/v1/sessions/{other}"), b"").await.status, 200);

    for s in &mut servers {
        s.stop(STOP_BOUND).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_a_4xx_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let heartbeat = Duration::from_millis(50);
    let mut servers =
        start_cluster(3, heartbeat, heartbeat * 10, HttpLimits::default(), dir.path());
    let l = leader(&servers).await;
    let follower = servers[(l + 1) % 3].http;
    let before = revision(follower).await;

    let long_key = format!("/v1/kv/{}", "k".repeat(MAX_KEY_BYTES + 1));
    let too_big = vec![b'x'; MAX_VALUE_BYTES + 1];
    let cases: Vec<(&str, &str, Vec<u8>, u16, &str)> = vec![
        ("PUT", "/v1/kv/", b"v".to_vec(), 400, "the key is empty"),
        ("PUT", &long_key, b"v".to_vec(), 400, "at most 1024"),
        ("PUT", "/v1/kv/a%0Ab", b"v".to_vec(), 400, "control character"),
        ("PUT", "/v1/kv/a%FF", b"v".to_vec(), 400, "UTF-8"),
        ("PUT", "/v1/kv/big", too_big, 413, "nothing was written"),
        ("PUT", "/v1/kv/a?if_mod_rev=1", b"v".to_vec(), 400, "if_mod_revision"),
        ("PUT", "/v1/kv/a?if_mod_revision=x", b"v".to_vec(), 400, "if_mod_revision"),
        ("DELETE", "/v1/kv/", vec![], 400, "the key is empty"),
        ("GET", "/v1/kv?prefix=a&limit=0", vec![], 400, "limit=0"),
        ("GET", "/v1/kv/a?consistency=strong", vec![], 400, "consistency"),
        (
            "POST",
            "/v1/txn",
            b"{\"success\": [{\"put\": {\"key\": \"a\"}}]}".to_vec(),
            400,
            "success[0]",
        ),
        ("POST", "/v1/txn", b"[1, 2]".to_vec(), 400, "expected"),
        (
            "POST",
            "/v1/txn",
            b"{\"success\": [{\"put\": {\"key\": \"\", \"value\": \"v\"}}]}".to_vec(),
            400,
            "the key is empty",
        ),
    ];
    for (method, path, body, status, says) in cases {
        let a = call(follower, method, path, &body).await;
        let error = a.json()["error"].as_str().unwrap_or_default().to_string();
        assert_eq!(a.status, status, "{method} {path}: {error}");
        assert!(error.contains(says), "{method} {path}: {error:?} lacks {says:?}");
    }
    // The empty key's answer is behind the gate too.
    let anonymous =
        crate::servers::request(follower, &crate::servers::get_as("/v1/kv/", None)).await.unwrap();
    assert_eq!(anonymous.status, 401, "{anonymous:?}");
    // A read token cannot write.
    let refused = call_as(follower, "PUT", "/v1/kv/a", b"v", READ_TOKEN).await;
    assert_eq!(refused.status, 403, "{refused:?}");
    assert_eq!(revision(follower).await, before, "nothing was written");
    assert_eq!(call(follower, "GET", "/v1/kv/a", b"").await.status, 404);

    // A value of exactly MAX_VALUE_BYTES goes through (the log's command
    // limit leaves room for the key and the encoding); one byte more is a
    // 413 that says nothing was written, and nothing is.
    let max = call(follower, "PUT", "/v1/kv/max", &vec![b'y'; MAX_VALUE_BYTES]).await;
    assert_eq!(max.status, 200, "{:?}", max.json());
    let at = revision(follower).await;
    let over = call(follower, "PUT", "/v1/kv/over", &vec![b'y'; MAX_VALUE_BYTES + 1]).await;
    let error = over.json()["error"].as_str().unwrap_or_default().to_string();
    assert_eq!(over.status, 413, "{error}");
    assert_eq!(revision(follower).await, at, "nothing was written");

    // Without a majority: writes and linearizable reads wait for a leader,
    // then get 503 with Retry-After; stale reads still answer.
    let last = (0..3).find(|&i| servers[i].http == follower).unwrap();
    for (i, s) in servers.iter_mut().enumerate().filter(|&(i, _)| i != last) {
        s.stop(STOP_BOUND).await.unwrap_or_else(|e| panic!("server {i} stops: {e}"));
    }
    // Settled: no leader, and nothing heard for longer than an election
    // timeout. (A write sent while the node still follows a leader that has
    // just stopped is forwarded to it, and ends with an unknown outcome.)
    let quiet = (heartbeat * 12).as_millis() as u64;
    eventually("the last node knows no leader", START_BOUND, || async {
        let s = status(follower).await?;
        let heard = s["peers"].as_array()?.iter().filter_map(|p| p["last_heard_ms"].as_u64());
        (s["leader"].is_null() && heard.min()? > quiet).then_some(())
    })
    .await;
    let put = call(follower, "PUT", "/v1/kv/lonely", b"v").await;
    assert_eq!(put.status, 503, "{put:?}");
    assert!(put.header("retry-after").and_then(|s| s.parse::<u64>().ok()) >= Some(1), "{put:?}");
    assert!(put.json()["error"].as_str().unwrap().contains("nothing was written"), "{put:?}");
    let read = call(follower, "GET", "/v1/kv/max", b"").await;
    assert_eq!(read.status, 503, "{read:?}");
    assert!(read.header("retry-after").is_some(), "{read:?}");
    let stale = call(follower, "GET", "/v1/kv/max?consistency=stale", b"").await;
    assert_eq!((stale.status, stale.json()["mod_revision"].as_u64()), (200, Some(at)));
    servers[last].stop(STOP_BOUND).await.unwrap();
}
