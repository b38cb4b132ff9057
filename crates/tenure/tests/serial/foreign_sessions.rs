//! A session belongs to the token that granted it (docs/SECURITY.md, "What a
//! client cannot take"), on a cluster of three real `tenure server`
//! processes with TLS and API tokens. Another application's write token
//! gets 403 for keepalives (one-shot and stream), revoke, proclaim and
//! resign on a foreign session, on the leader and on a follower, and changes
//! nothing. Above all it cannot keep a crashed leader in office: while it
//! renews the dead application's session in a loop, the session still
//! expires at its TTL and the standby takes over with a higher fencing
//! token.
//!
//! Before sessions had owners, any write token's keepalive loop kept a
//! crashed leader's session alive forever, so its election never failed
//! over, and another token's proclaim changed the leader's advertised value
//! under the same fencing token.

use crate::harness::{serial, Reply, TestCluster, APP_TOKEN, OTHER_TOKEN, READ_TOKEN};
use hyper::Method;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// The crashed application's session TTL: 3 s, as an application with fast
/// failover would choose.
const TTL_MS: u64 = 3_000;
/// The cluster's timings: a heartbeat every 100 ms, elections after 1 s.
const HEARTBEAT_MS: u64 = 100;
const ELECTION_TIMEOUT_MS: u64 = 1_000;
/// How long one request may take.
const ANSWER_BOUND: Duration = Duration::from_secs(5);
/// How long the owner keeps its session alive under the intruder's calls:
/// longer than the TTL, so a session that lived on the intruder's renewals
/// alone would show.
const OWNER_RENEWS_FOR: Duration = Duration::from_millis(TTL_MS * 3 / 2);
/// How often the owner renews (a third of the TTL, as the client does).
const OWNER_RENEWS_EVERY: Duration = Duration::from_millis(TTL_MS / 3);
/// How often the intruder renews the foreign session.
const INTRUDER_RENEWS_EVERY: Duration = Duration::from_millis(100);
/// The latest the standby may take over after the owner's last renewal:
/// the TTL, plus the leader's expiry sweep and the commit of the expiry,
/// with room for a loaded machine.
const TAKEOVER_BOUND: Duration = Duration::from_millis(TTL_MS + 5_000);

async fn call(
    cluster: &TestCluster,
    node: usize,
    token: &str,
    method: Method,
    path: &str,
    body: Option<&str>,
) -> Reply {
    let body = body.map(|b| ("application/json", b));
    cluster
        .request_within(ANSWER_BOUND, node, Some(token), method.clone(), path, body)
        .await
        .unwrap_or_else(|| panic!("{method} {path} on node {node}: no answer"))
}

async fn ok(
    cluster: &TestCluster,
    node: usize,
    token: &str,
    method: Method,
    path: &str,
    body: Option<&str>,
) -> Value {
    let r = call(cluster, node, token, method.clone(), path, body).await;
    assert_eq!(r.status, 200, "{method} {path}: {}", r.text);
    r.json
}

/// The election's leader as (session, value, token), read from `node`.
async fn leader_of(cluster: &TestCluster, node: usize) -> (Option<u64>, Value, Option<u64>) {
    let e = ok(cluster, node, READ_TOKEN, Method::GET, "/v1/elections/db", None).await;
    let l = &e["leader"];
    (l["session"].as_u64(), l["value"].clone(), l["token"].as_u64())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_token_cannot_renew_speak_for_or_end_a_session_on_a_tls_cluster() {
    let _serial = serial().await;
    let cluster = TestCluster::start(3, HEARTBEAT_MS, ELECTION_TIMEOUT_MS);
    let all = [0, 1, 2];
    let (leader, term) = cluster.wait_agreement(&all, Duration::from_secs(20)).await;
    let follower = (leader + 1) % 3;

    // The application's active instance leads "db"; a standby of the same
    // application waits behind it.
    let grant = json!({ "ttl_ms": TTL_MS }).to_string();
    let active = ok(&cluster, follower, APP_TOKEN, Method::POST, "/v1/sessions", Some(&grant))
        .await["id"]
        .as_u64()
        .expect("a session id");
    let campaign = json!({"session": active, "value": "active:1"}).to_string();
    let c =
        ok(&cluster, leader, APP_TOKEN, Method::POST, "/v1/elections/db/campaign", Some(&campaign))
            .await;
    let first_token = c["token"].as_u64().expect("a fencing token");
    assert_eq!(c["leader"], true, "{c}");
    let long = json!({ "ttl_ms": 600_000 }).to_string();
    let standby = ok(&cluster, leader, APP_TOKEN, Method::POST, "/v1/sessions", Some(&long)).await
        ["id"]
        .as_u64()
        .expect("a session id");
    let campaign = json!({"session": standby, "value": "standby:1"}).to_string();
    let c = ok(
        &cluster,
        follower,
        APP_TOKEN,
        Method::POST,
        "/v1/elections/db/campaign",
        Some(&campaign),
    )
    .await;
    assert_eq!(c["leader"], false, "{c}");

    // The intruder's every call on the active session, on both nodes: 403,
    // naming the owner.
    let foreign: Vec<(Method, String, Option<String>)> = vec![
        (Method::POST, format!("/v1/sessions/{active}/keepalive"), None),
        (Method::GET, format!("/v1/sessions/{active}/keepalive"), None),
        (Method::DELETE, format!("/v1/sessions/{active}"), None),
        (
            Method::POST,
            "/v1/elections/db/proclaim".into(),
            Some(json!({"session": active, "value": "attacker:6666"}).to_string()),
        ),
        (
            Method::POST,
            "/v1/elections/db/resign".into(),
            Some(json!({"session": active}).to_string()),
        ),
    ];
    for node in [leader, follower] {
        for (method, path, body) in &foreign {
            let r = call(&cluster, node, OTHER_TOKEN, method.clone(), path, body.as_deref()).await;
            assert_eq!(r.status, 403, "{method} {path} on node {node}: {}", r.text);
            let error = r.json["error"].as_str().unwrap_or_default();
            assert!(
                error.contains(&format!("session {active} belongs to API token \"test-app\"")),
                "{method} {path}: {error}"
            );
        }
    }
    // Nothing changed: the active instance leads with its value and token.
    for node in all {
        assert_eq!(
            leader_of(&cluster, node).await,
            (Some(active), json!("active:1"), Some(first_token)),
            "node {node}"
        );
    }

    // The intruder renews the active session in a loop from here on, on
    // every node in turn, as an attacker keeping a crashed leader in office
    // would. Every renewal is refused.
    let intruder = async {
        let mut refused = 0u64;
        let mut i = 0;
        loop {
            let path = format!("/v1/sessions/{active}/keepalive");
            if let Some(r) = cluster
                .request_within(ANSWER_BOUND, i % 3, Some(OTHER_TOKEN), Method::POST, &path, None)
                .await
            {
                match r.status {
                    403 => refused += 1,
                    // The session is gone: renewals of it are 404 now.
                    404 => return refused,
                    s => panic!("the intruder's renewal answered {s}: {}", r.text),
                }
            }
            i += 1;
            tokio::time::sleep(INTRUDER_RENEWS_EVERY).await;
        }
    };
    let owner_then_crash = async {
        // The owner renews for longer than the TTL: its session lives.
        let since = Instant::now();
        let mut last_renewal = since;
        while since.elapsed() < OWNER_RENEWS_FOR {
            tokio::time::sleep(OWNER_RENEWS_EVERY).await;
            let path = format!("/v1/sessions/{active}/keepalive");
            last_renewal = Instant::now();
            ok(&cluster, follower, APP_TOKEN, Method::POST, &path, None).await;
        }
        assert_eq!(
            leader_of(&cluster, leader).await,
            (Some(active), json!("active:1"), Some(first_token)),
            "the owner's session lived on its renewals"
        );
        // The owner crashes after that last renewal.
        loop {
            let (session, value, token) = leader_of(&cluster, leader).await;
            if session == Some(standby) {
                assert_eq!(value, json!("standby:1"));
                let token = token.expect("a fencing token");
                assert!(token > first_token, "the new leader's token {token} > {first_token}");
                return last_renewal.elapsed();
            }
            assert!(
                last_renewal.elapsed() < TAKEOVER_BOUND,
                "the standby did not take over within {TAKEOVER_BOUND:?} of the owner's last \
                 renewal: the intruder's renewals kept the crashed leader in office\n{}",
                cluster.logs()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let (refused, takeover) = tokio::join!(intruder, owner_then_crash);
    println!(
        "the intruder's {refused} renewals were refused; the standby took over {takeover:?} \
         after the owner's last renewal (TTL {TTL_MS} ms)"
    );
    assert!(refused > 0, "the intruder's renewals reached the cluster");
    // Nor did the session end early: its owner renewed it, last at the
    // instant measured from, so it lived at least its TTL beyond that.
    assert!(
        takeover >= Duration::from_millis(TTL_MS),
        "the session expired {takeover:?} after its owner's last renewal, before its TTL"
    );
    let gone =
        call(&cluster, leader, READ_TOKEN, Method::GET, &format!("/v1/sessions/{active}"), None)
            .await;
    assert_eq!(gone.status, 404, "the crashed session expired: {}", gone.text);

    // The cluster kept its leader and term throughout.
    assert_eq!(cluster.wait_agreement(&all, Duration::from_secs(5)).await, (leader, term));
}
