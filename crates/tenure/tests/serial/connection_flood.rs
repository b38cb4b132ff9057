//! Strangers without a token or a certificate hold hundreds of connections
//! on every node (docs/SECURITY.md, "Cannot exhaust the node"), on a cluster
//! of three real `tenure server` processes with TLS and API tokens: per
//! node, [`FLOOD_PER_NODE`] connections in three styles (silent TCP, a TLS
//! handshake then silence, a TLS handshake and one anonymous `/healthz`
//! then idle), each redialled the moment the server closes it. Meanwhile an
//! application keeps a session of a 3 s TTL alive and leads an election
//! with it, and a client with a token sends requests, each on a new
//! connection, to every node in turn. Every one of those requests is
//! answered 200, the session never expires, the election keeps its leader
//! and token, and the cluster keeps its leader and term.
//!
//! Before connections had to prove themselves with a token, a place of the
//! connection cap (256) was taken at `accept`: 300 such connections per
//! node took every place, authenticated clients got 503 or a closed
//! connection (3 of 32 requests served in a probe), and an application's
//! session expired.

use crate::harness::{api_name, serial, TestCluster, APP_TOKEN, READ_TOKEN};
use hyper::Method;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// Strangers' connections held on each node at once.
const FLOOD_PER_NODE: usize = 300;
/// How long the flood lasts, once every connection is up.
const FLOOD: Duration = Duration::from_secs(10);
/// The session's TTL: 3 s, as an application with fast failover would choose.
const TTL_MS: u64 = 3_000;
/// How often the application renews it (a third of the TTL, as the client does).
const RENEW_EVERY: Duration = Duration::from_millis(TTL_MS / 3);
/// How often the client with a token sends a request on a new connection.
const PROBE_EVERY: Duration = Duration::from_millis(50);
/// How long a request on a new connection may take, TLS handshake included,
/// before it counts as not served.
const ANSWER_BOUND: Duration = Duration::from_secs(2);
/// The cluster's timings: a heartbeat every 100 ms, elections after 1 s.
const HEARTBEAT_MS: u64 = 100;
const ELECTION_TIMEOUT_MS: u64 = 1_000;

/// One stranger's way of holding a connection.
#[derive(Clone, Copy, Debug)]
enum Style {
    /// TCP connected, not a byte sent.
    SilentTcp,
    /// A TLS handshake, then silence.
    SilentTls,
    /// A TLS handshake and one anonymous `GET /healthz`, then idle.
    IdleAfterProbe,
}

/// Holds one connection of `style` to `port` until the server closes it;
/// whether it got that far (connected).
async fn hold(style: Style, port: u16, tls: &TlsConnector) -> bool {
    let Ok(tcp) = TcpStream::connect(("127.0.0.1", port)).await else { return false };
    let mut buf = [0u8; 4096];
    match style {
        Style::SilentTcp => {
            let mut tcp = tcp;
            while matches!(tcp.read(&mut buf).await, Ok(n) if n > 0) {}
        }
        Style::SilentTls | Style::IdleAfterProbe => {
            let Ok(mut stream) = tls.connect(api_name(), tcp).await else { return true };
            if matches!(style, Style::IdleAfterProbe) {
                let probe = b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n";
                if stream.write_all(probe).await.is_err() {
                    return true;
                }
            }
            while matches!(stream.read(&mut buf).await, Ok(n) if n > 0) {}
        }
    }
    true
}

/// A request with `token` on a new TLS connection to `port`
/// (`connection: close`): its status, or None when it was not answered
/// within [`ANSWER_BOUND`].
async fn on_new_connection(
    tls: &TlsConnector,
    port: u16,
    token: &str,
    method: &str,
    path: &str,
) -> Option<u16> {
    let exchange = async {
        let tcp = TcpStream::connect(("127.0.0.1", port)).await.ok()?;
        let mut stream = tls.connect(api_name(), tcp).await.ok()?;
        let request = format!(
            "{method} {path} HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {token}\r\n\
             Content-Length: 0\r\nConnection: close\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer).await;
        let head = String::from_utf8_lossy(&answer);
        head.split(' ').nth(1)?.parse().ok()
    };
    tokio::time::timeout(ANSWER_BOUND, exchange).await.ok()?
}

/// `name value` of a Prometheus text exposition.
fn gauge(text: &str, name: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

/// The election's leader as (session, value, token), read from `node`.
async fn leader_of(cluster: &TestCluster, node: usize) -> (Option<u64>, Value, Option<u64>) {
    let e = cluster
        .request_within(ANSWER_BOUND, node, Some(READ_TOKEN), Method::GET, "/v1/elections/db", None)
        .await
        .expect("the election answered");
    assert_eq!(e.status, 200, "{}", e.text);
    let l = &e.json["leader"];
    (l["session"].as_u64(), l["value"].clone(), l["token"].as_u64())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strangers_holding_hundreds_of_connections_keep_no_client_with_a_token_out() {
    let _serial = serial().await;
    let cluster = TestCluster::start(3, HEARTBEAT_MS, ELECTION_TIMEOUT_MS);
    let all = [0, 1, 2];
    let (leader, term) = cluster.wait_agreement(&all, Duration::from_secs(20)).await;
    let ports: Vec<u16> = cluster.servers.iter().map(|s| s.http_port).collect();
    let tls = cluster.tls_connector();

    // The application's session and its election.
    let grant = json!({ "ttl_ms": TTL_MS }).to_string();
    let body = Some(("application/json", grant.as_str()));
    let g = cluster
        .request_within(ANSWER_BOUND, leader, Some(APP_TOKEN), Method::POST, "/v1/sessions", body)
        .await
        .expect("a grant answered");
    assert_eq!(g.status, 200, "{}", g.text);
    let session = g.json["id"].as_u64().expect("a session id");
    let campaign = json!({"session": session, "value": "app:1"}).to_string();
    let body = Some(("application/json", campaign.as_str()));
    let path = "/v1/elections/db/campaign";
    let c = cluster
        .request_within(ANSWER_BOUND, leader, Some(APP_TOKEN), Method::POST, path, body)
        .await
        .expect("a campaign answered");
    assert_eq!(c.status, 200, "{}", c.text);
    let fencing = c.json["token"].as_u64().expect("a fencing token");
    let before = (Some(session), json!("app:1"), Some(fencing));

    // The strangers: every connection redialled as soon as it is closed.
    let stop = Arc::new(AtomicBool::new(false));
    let dials = Arc::new(AtomicU64::new(0));
    let mut strangers = tokio::task::JoinSet::new();
    for &port in &ports {
        for k in 0..FLOOD_PER_NODE {
            let style = [Style::SilentTcp, Style::SilentTls, Style::IdleAfterProbe][k % 3];
            let (tls, stop, dials) = (tls.clone(), stop.clone(), dials.clone());
            strangers.spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    dials.fetch_add(1, Ordering::Relaxed);
                    if !hold(style, port, &tls).await {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
            });
        }
    }
    // Let every stranger connect before measuring.
    tokio::time::sleep(Duration::from_secs(1)).await;

    // The application renews its session on a new connection each time, on
    // every node in turn; a client with a token probes every node.
    let flood_since = Instant::now();
    let renewals = async {
        let mut outcomes = Vec::new();
        let mut i = 0;
        while flood_since.elapsed() < FLOOD {
            let path = format!("/v1/sessions/{session}/keepalive");
            let port = ports[i % 3];
            outcomes.push(on_new_connection(&tls, port, APP_TOKEN, "POST", &path).await);
            i += 1;
            tokio::time::sleep(RENEW_EVERY).await;
        }
        outcomes
    };
    let probes = async {
        let mut outcomes = Vec::new();
        let mut i = 0;
        while flood_since.elapsed() < FLOOD {
            let since = Instant::now();
            let status =
                on_new_connection(&tls, ports[i % 3], READ_TOKEN, "GET", "/v1/status").await;
            outcomes.push((status, since.elapsed()));
            i += 1;
            tokio::time::sleep(PROBE_EVERY).await;
        }
        outcomes
    };
    let (renewals, probes) = tokio::join!(renewals, probes);
    let held_for = flood_since.elapsed();
    let dialled = dials.load(Ordering::Relaxed);
    stop.store(true, Ordering::Relaxed);
    strangers.shutdown().await;

    // Every request with a token was served, on every node.
    let unserved: Vec<_> = probes.iter().filter(|(s, _)| *s != Some(200)).collect();
    let mut latencies: Vec<Duration> = probes.iter().map(|(_, took)| *took).collect();
    latencies.sort_unstable();
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize];
    let mut lags = Vec::new();
    for i in all {
        let m = cluster
            .request_within(ANSWER_BOUND, i, Some(READ_TOKEN), Method::GET, "/metrics", None)
            .await
            .expect("metrics answered");
        lags.push(gauge(&m.text, "tenure_driver_lag_max_seconds").unwrap_or(f64::NAN) * 1e3);
    }
    println!(
        "{FLOOD_PER_NODE} strangers' connections per node for {held_for:?} ({dialled} dials): \
         {} requests with a token on new connections, {} not served; latency (TLS handshake \
         included) p50 {:?}, p99 {:?}, max {:?}; {} renewals, {} not 200; the drivers' \
         longest late wake {lags:.1?} ms",
        probes.len(),
        unserved.len(),
        at(0.5),
        at(0.99),
        at(1.0),
        renewals.len(),
        renewals.iter().filter(|s| **s != Some(200)).count(),
    );
    assert!(dialled > (3 * FLOOD_PER_NODE) as u64, "the strangers held their connections");
    assert!(
        unserved.is_empty(),
        "{} of {} requests with a token not served, the first: {:?}",
        unserved.len(),
        probes.len(),
        &unserved[..unserved.len().min(5)]
    );
    assert!(
        renewals.iter().all(|s| *s == Some(200)),
        "the session's renewals: {renewals:?}\n{}",
        cluster.logs()
    );
    // The session lived, its election kept its leader and token, and the
    // cluster its leader and term.
    for node in all {
        assert_eq!(leader_of(&cluster, node).await, before, "node {node}");
    }
    assert_eq!(cluster.wait_agreement(&all, Duration::from_secs(5)).await, (leader, term));
}
