//! Sessions belong to the token that granted them (docs/SECURITY.md): on a
//! cluster of three servers in this process (`tenure_server::server::run`, real
//! sockets), another write token's keepalive, keepalive stream, revoke,
//! campaign, resign, proclaim and key attachments on a foreign session get
//! 403, on the leader and on a follower, and change nothing; the owner's
//! and an admin token's still work.

use crate::servers::{
    agreement, authorization, request, start_cluster_with, Answer, Server, ADMIN_TOKEN, READ_TOKEN,
};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::time::Duration;
use tenure_server::http::{ApiAuth, ApiToken, HttpLimits, Role};

/// The application that owns the session.
const APP_TOKEN: &str = "owners-app-7d3a9c1e5b20f4";
/// Another application's write token: the intruder.
const INTRUDER_TOKEN: &str = "owners-intruder-0e6b2f9a4c71";
/// Bound on a server's clean stop.
const STOP_BOUND: Duration = Duration::from_secs(5);

fn auth() -> ApiAuth {
    ApiAuth::with_tokens(vec![
        ApiToken::new("admin", Role::Admin, ADMIN_TOKEN).unwrap(),
        ApiToken::new("reader", Role::Read, READ_TOKEN).unwrap(),
        ApiToken::new("app", Role::Write, APP_TOKEN).unwrap(),
        ApiToken::new("intruder", Role::Write, INTRUDER_TOKEN).unwrap(),
    ])
    .unwrap()
}

fn json_of(a: &Answer) -> Value {
    serde_json::from_str(&a.body).unwrap_or(Value::Null)
}

async fn call(addr: SocketAddr, token: &str, method: &str, path: &str, body: &str) -> Answer {
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: test\r\n{}Content-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        authorization(Some(token)),
        body.len()
    );
    request(addr, &req).await.expect("an answer")
}

async fn ok(addr: SocketAddr, token: &str, method: &str, path: &str, body: &str) -> Value {
    let a = call(addr, token, method, path, body).await;
    assert_eq!(a.status, 200, "{method} {path} {body}: {a:?}");
    json_of(&a)
}

async fn grant(addr: SocketAddr, token: &str) -> u64 {
    ok(addr, token, "POST", "/v1/sessions", r#"{"ttl_ms": 600000}"#).await["id"].as_u64().unwrap()
}

/// Everything the test looks at, read (linearizably) from `addr`: the
/// store's revision, the session, and the elections the intruder aims at.
async fn state(addr: SocketAddr, session: u64) -> (u64, Value, Value, Value) {
    let revision = ok(addr, READ_TOKEN, "GET", "/v1/kv?prefix=&limit=1", "").await["revision"]
        .as_u64()
        .unwrap();
    let mut info = ok(addr, READ_TOKEN, "GET", &format!("/v1/sessions/{session}"), "").await;
    info["remaining_ms"] = Value::Null; // the clock moves on
    let db = ok(addr, READ_TOKEN, "GET", "/v1/elections/db", "").await;
    let other = ok(addr, READ_TOKEN, "GET", "/v1/elections/other", "").await;
    (revision, info, db, other)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_tokens_calls_on_a_session_are_refused_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let heartbeat = Duration::from_millis(20);
    let mut servers: Vec<Server> = start_cluster_with(
        3,
        heartbeat,
        heartbeat * 10,
        HttpLimits::default(),
        auth(),
        dir.path(),
        false,
    );
    let leader = agreement(&servers).await;
    let lead = servers[leader].http;
    let follower = servers[(leader + 1) % 3].http;

    // The application's session, granted through a follower: its owner is
    // in the replicated grant, and every node shows it.
    let s = grant(follower, APP_TOKEN).await;
    for node in [lead, follower] {
        let info = ok(node, READ_TOKEN, "GET", &format!("/v1/sessions/{s}"), "").await;
        assert_eq!(info["owner"], "app", "{info}");
    }
    let campaign = json!({"session": s, "value": "app:1"}).to_string();
    let token = ok(lead, APP_TOKEN, "POST", "/v1/elections/db/campaign", &campaign).await["token"]
        .as_u64()
        .unwrap();
    ok(lead, APP_TOKEN, "PUT", &format!("/v1/kv/app-key?lease={s}"), "v").await;
    let before = state(lead, s).await;

    // The intruder, on the leader and on a follower: every call is 403 and
    // names the owner.
    let attach_txn =
        json!({"success": [{"put": {"key": "x", "value": "1", "lease": s}}]}).to_string();
    let calls: Vec<(&str, String, String)> = vec![
        ("POST", format!("/v1/sessions/{s}/keepalive"), String::new()),
        ("GET", format!("/v1/sessions/{s}/keepalive"), String::new()),
        ("DELETE", format!("/v1/sessions/{s}"), String::new()),
        (
            "POST",
            "/v1/elections/other/campaign".into(),
            json!({"session": s, "value": "x"}).to_string(),
        ),
        (
            "POST",
            "/v1/elections/db/campaign".into(),
            json!({"session": s, "value": "x"}).to_string(),
        ),
        ("POST", "/v1/elections/db/resign".into(), json!({"session": s}).to_string()),
        (
            "POST",
            "/v1/elections/db/proclaim".into(),
            json!({"session": s, "value": "attacker:6666"}).to_string(),
        ),
        ("PUT", format!("/v1/kv/x?lease={s}"), "1".into()),
        ("POST", "/v1/txn".into(), attach_txn.clone()),
    ];
    for node in [lead, follower] {
        for (method, path, body) in &calls {
            let a = call(node, INTRUDER_TOKEN, method, path, body).await;
            assert_eq!(a.status, 403, "{method} {path} {body}: {a:?}");
            let error = json_of(&a)["error"].as_str().unwrap_or_default().to_string();
            assert!(
                error.contains(&format!("session {s} belongs to API token \"app\""))
                    && error.contains("nothing was done"),
                "{method} {path}: {error}"
            );
        }
    }
    // Nothing changed anywhere: the same revision, session, leader value and
    // token, no candidate of the other election, no key x.
    for node in [lead, follower] {
        assert_eq!(state(node, s).await, before);
        let db = state(node, s).await.2;
        assert_eq!(
            (db["leader"]["value"].as_str(), db["leader"]["token"].as_u64()),
            (Some("app:1"), Some(token))
        );
        let x = call(node, READ_TOKEN, "GET", "/v1/kv/x", "").await;
        assert_eq!(x.status, 404, "{x:?}");
    }
    // A session that does not exist is 404, not 403.
    let ghost = call(follower, INTRUDER_TOKEN, "POST", "/v1/sessions/999999/keepalive", "").await;
    assert_eq!(ghost.status, 404, "{ghost:?}");

    // The intruder's own session works for it, and not for the application.
    let mine = grant(lead, INTRUDER_TOKEN).await;
    ok(follower, INTRUDER_TOKEN, "POST", &format!("/v1/sessions/{mine}/keepalive"), "").await;
    let a = call(lead, APP_TOKEN, "POST", &format!("/v1/sessions/{mine}/keepalive"), "").await;
    assert_eq!(a.status, 403, "{a:?}");
    // An admin token may use anyone's session.
    ok(follower, ADMIN_TOKEN, "POST", &format!("/v1/sessions/{mine}/keepalive"), "").await;
    // And one an admin granted is the admin's.
    let admins = grant(lead, ADMIN_TOKEN).await;
    let a = call(lead, APP_TOKEN, "DELETE", &format!("/v1/sessions/{admins}"), "").await;
    assert_eq!(a.status, 403, "{a:?}");

    // The owner's calls still work, on both nodes.
    for node in [follower, lead] {
        ok(node, APP_TOKEN, "POST", &format!("/v1/sessions/{s}/keepalive"), "").await;
    }
    let proclaim = json!({"session": s, "value": "app:2"}).to_string();
    let p = ok(follower, APP_TOKEN, "POST", "/v1/elections/db/proclaim", &proclaim).await;
    assert_eq!(p["token"].as_u64(), Some(token));
    ok(lead, APP_TOKEN, "POST", "/v1/txn", &attach_txn).await;
    ok(follower, APP_TOKEN, "POST", "/v1/elections/db/resign", &json!({"session": s}).to_string())
        .await;
    let revoked = ok(lead, APP_TOKEN, "DELETE", &format!("/v1/sessions/{s}"), "").await;
    assert_eq!(revoked["keys_deleted"], 2, "app-key and x: {revoked}");

    for s in &mut servers {
        if let Err(e) = s.stop(STOP_BOUND).await {
            panic!("server {} stops: {e}", s.id);
        }
    }
}
