//! Servers started in this test process with `tenure_server::server::run` on
//! `127.0.0.1:0` listeners: a three-node cluster, and single nodes whose HTTP
//! limits (connection cap, header, body and idle timeouts) are shortened so
//! that real sockets can run into them in well under a second.

use crate::servers::{
    authorization, eventually, exchange, get, request, start_cluster, start_cluster_with,
    start_solo, status, test_auth, trickle_until_closed, wait_closed, Server, ADMIN_TOKEN,
};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tenure_server::http::{HttpLimits, ENDPOINTS};
use tokio::net::TcpStream;

/// Bound on a first election or a server's start, on a busy machine.
const START_BOUND: Duration = Duration::from_secs(10);
/// Bound on a server's clean stop.
const STOP_BOUND: Duration = Duration::from_secs(5);
/// The timeout under test in the limit tests.
const SHORT: Duration = Duration::from_millis(300);
/// A timeout that must not be the one that fires.
const LONG: Duration = Duration::from_secs(30);
/// Slack for scheduling on a loaded 2-core machine.
const SLACK: Duration = Duration::from_secs(2);

/// Waits until every server answers `/v1/status` with the same leader and
/// term, the leader included; returns (leader index, term).
async fn agreement(servers: &[Server]) -> (usize, u64) {
    eventually("every server agrees on one leader", START_BOUND, || async {
        let mut views = Vec::new();
        for s in servers {
            views.push(status(s.http).await?);
        }
        let (leader, term) = (views[0]["leader"].as_u64()?, views[0]["term"].as_u64()?);
        let agree = views.iter().all(|v| v["leader"] == leader && v["term"] == term);
        let i = servers.iter().position(|s| s.id == leader)?;
        (agree && views[i]["role"] == "leader").then_some((i, term))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_servers_in_one_process_elect_a_leader_and_stop_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    // A long election timeout: a handover that waited for it would be plain.
    let timeout = Duration::from_millis(2000);
    let heartbeat = Duration::from_millis(50);
    let mut servers = start_cluster(3, heartbeat, timeout, HttpLimits::default(), dir.path());
    let (leader, term) = agreement(&servers).await;
    let s = status(servers[leader].http).await.unwrap();
    assert_eq!((s["role"].as_str(), s["id"].as_u64()), (Some("leader"), Some(servers[leader].id)));
    assert_eq!(s["peers"].as_array().map(Vec::len), Some(2), "{s}");

    // The leader's shutdown signal: it hands over first, then stops.
    let survivors: Vec<SocketAddr> =
        servers.iter().enumerate().filter(|&(i, _)| i != leader).map(|(_, s)| s.http).collect();
    let at = Instant::now();
    servers[leader].signal_stop();
    let took = eventually("a survivor leads a newer term", START_BOUND, || async {
        for &addr in &survivors {
            let s = status(addr).await;
            if s.is_some_and(|s| s["role"] == "leader" && s["term"].as_u64() > Some(term)) {
                return Some(at.elapsed());
            }
        }
        None
    })
    .await;
    assert!(took < timeout / 4, "the handover took {took:?}; election timeout {timeout:?}");
    servers[leader].stop(STOP_BOUND).await.expect("the old leader stops cleanly");
    assert!(
        TcpStream::connect(servers[leader].http).await.is_err(),
        "a stopped server's HTTP port is closed"
    );
    for (i, s) in servers.iter_mut().enumerate().filter(|&(i, _)| i != leader) {
        s.stop(STOP_BOUND).await.unwrap_or_else(|e| panic!("server {i} stops cleanly: {e}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_methods_and_paths_are_answered_from_the_endpoint_table() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = start_solo(HttpLimits::default(), dir.path());
    eventually("the server answers", START_BOUND, || status(server.http)).await;
    let ask = |method: &str, path: &str| {
        let req = format!(
            "{method} {path} HTTP/1.1\r\nHost: test\r\n{}Content-Length: 0\r\n\r\n",
            authorization(Some(ADMIN_TOKEN))
        );
        async move { request(server.http, &req).await.expect("an answer") }
    };
    for (e, method) in ENDPOINTS.iter().flat_map(|e| e.methods.iter().map(move |m| (e, m))) {
        let path = e.example_path();
        let answer = ask(method.as_str(), &path).await;
        // A key or session that is absent is a 404 of its own, naming it.
        let absent = answer.status == 404
            && (answer.body.contains("no key") || answer.body.contains("does not exist"));
        assert!(absent || ![404, 405].contains(&answer.status), "{method} {path}: {answer:?}");
    }
    let answer = ask("POST", "/v1/status").await;
    assert_eq!((answer.status, answer.header("allow")), (405, Some("GET, HEAD")), "{answer:?}");
    assert!(answer.body.contains("\"error\""), "{answer:?}");
    let answer = ask("DELETE", "/v1/transfer").await;
    assert_eq!((answer.status, answer.header("allow")), (405, Some("POST")), "{answer:?}");
    // The rows of one path share its 405.
    let answer = ask("POST", "/v1/kv/a").await;
    assert_eq!((answer.status, answer.header("allow")), (405, Some("GET, HEAD, PUT, DELETE")));
    let answer = ask("GET", "/no/such/path").await;
    assert_eq!(answer.status, 404);
    for e in ENDPOINTS {
        let shown = e.shown_path();
        assert!(answer.body.contains(&shown), "404 does not name {shown}: {}", answer.body);
    }
    server.stop(STOP_BOUND).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_trickling_headers_is_disconnected_after_the_header_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let limits = HttpLimits {
        header_read_timeout: SHORT,
        body_read_timeout: LONG,
        idle_timeout: LONG,
        ..HttpLimits::default()
    };
    let mut server = start_solo(limits, dir.path());
    eventually("the server answers", START_BOUND, || status(server.http)).await;

    // One more header line every 50 ms, for ever.
    let (took, got) = trickle_until_closed(
        server.http,
        b"GET /healthz HTTP/1.1\r\nHost: test\r\n",
        std::iter::repeat_with(|| b"X-Slow: yes\r\n".to_vec()),
        Duration::from_millis(50),
        SHORT + SLACK,
    )
    .await;
    assert!(
        took >= SHORT - Duration::from_millis(20),
        "cut off after {took:?}, before the timeout"
    );
    assert!(got.is_empty(), "no answer expected: {}", String::from_utf8_lossy(&got));
    // The server still serves others.
    assert_eq!(request(server.http, &get("/healthz")).await.map(|a| a.status), Some(200));
    server.stop(STOP_BOUND).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_keep_alive_connection_is_closed_after_the_idle_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let limits = HttpLimits {
        header_read_timeout: LONG,
        body_read_timeout: LONG,
        idle_timeout: SHORT,
        ..HttpLimits::default()
    };
    let mut server = start_solo(limits, dir.path());
    eventually("the server answers", START_BOUND, || status(server.http)).await;

    // Requests every 100 ms keep the connection for twice the idle timeout.
    let mut conn = TcpStream::connect(server.http).await.unwrap();
    let busy_until = Instant::now() + 2 * SHORT;
    while Instant::now() < busy_until {
        let answer = exchange(&mut conn, &get("/healthz")).await;
        assert_eq!(answer.map(|a| a.status), Some(200), "a busy connection was closed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let answer = exchange(&mut conn, &get("/healthz")).await;
    assert_eq!(answer.map(|a| a.status), Some(200));
    let since = Instant::now();
    let got = wait_closed(&mut conn, SHORT + SLACK).await;
    let took = since.elapsed();
    assert!(took >= SHORT - Duration::from_millis(20), "closed after {took:?}, before the timeout");
    assert!(got.is_empty(), "{}", String::from_utf8_lossy(&got));
    server.stop(STOP_BOUND).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_sent_too_slowly_is_cut_off() {
    let dir = tempfile::tempdir().unwrap();
    let limits = HttpLimits {
        header_read_timeout: LONG,
        body_read_timeout: SHORT,
        idle_timeout: LONG,
        ..HttpLimits::default()
    };
    let mut server = start_solo(limits, dir.path());
    eventually("the server answers", START_BOUND, || status(server.http)).await;
    let body = "{\"to\": 1}";
    let head = format!(
        "POST /v1/transfer HTTP/1.1\r\nHost: test\r\n{}Content-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n",
        authorization(Some(ADMIN_TOKEN)),
        body.len()
    );

    // Sent at once, the body is read and answered (node 1 is itself: refused).
    let answer = request(server.http, &format!("{head}{body}")).await.expect("an answer");
    assert!(answer.body.contains("\"error\""), "{answer:?}");

    // One byte every 100 ms: 900 ms for the body, three times the timeout.
    let (took, got) = trickle_until_closed(
        server.http,
        head.as_bytes(),
        body.bytes().map(|b| vec![b]),
        Duration::from_millis(100),
        SHORT + SLACK,
    )
    .await;
    assert!(
        took >= SHORT - Duration::from_millis(20),
        "cut off after {took:?}, before the timeout"
    );
    assert!(took < Duration::from_millis(900), "cut off after {took:?}: the body had arrived");
    assert!(got.is_empty(), "no answer expected: {}", String::from_utf8_lossy(&got));
    server.stop(STOP_BOUND).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_the_cap_are_refused_while_held_ones_work() {
    let dir = tempfile::tempdir().unwrap();
    let limits = HttpLimits { max_connections: 2, ..HttpLimits::default() };
    let mut server = start_solo(limits, dir.path());
    eventually("the server answers", START_BOUND, || status(server.http)).await;
    let addr = server.http;
    // A slot is free once the server has seen the previous client close.
    let hold = || {
        eventually("a connection slot", SLACK, move || async move {
            let mut conn = TcpStream::connect(addr).await.ok()?;
            let answer = exchange(&mut conn, &get("/healthz")).await?;
            (answer.status == 200).then_some(conn)
        })
    };
    let mut held = vec![hold().await, hold().await];

    let mut extra = TcpStream::connect(addr).await.unwrap();
    let since = Instant::now();
    let answer = exchange(&mut extra, &get("/v1/status")).await.expect("a refusal, not silence");
    assert!(since.elapsed() < Duration::from_secs(1), "refused after {:?}", since.elapsed());
    assert_eq!(answer.status, 503, "{answer:?}");
    assert!(answer.body.contains("too many connections (at most 2)"), "{answer:?}");
    assert_eq!(answer.header("connection"), Some("close"), "{answer:?}");
    wait_closed(&mut extra, SLACK).await;

    for conn in &mut held {
        let answer = exchange(conn, &get("/v1/status")).await;
        assert_eq!(answer.map(|a| a.status), Some(200), "a held connection stopped working");
    }
    drop(held);
    let fresh = hold().await;
    drop(fresh);
    server.stop(STOP_BOUND).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_lists_every_family() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = start_solo(HttpLimits::default(), dir.path());
    eventually("the node leads", START_BOUND, || async {
        status(server.http).await.filter(|s| s["role"] == "leader")
    })
    .await;
    let answer = request(server.http, &get("/metrics")).await.expect("an answer");
    assert_eq!(answer.status, 200);
    let families: Vec<&str> = answer
        .body
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE tenure_"))
        .filter_map(|l| l.split(' ').next())
        .collect();
    let expected = [
        "is_leader",
        "term",
        "fencing_token",
        "storage_failed",
        "peers_connected",
        "leader_changes",
        "pre_votes_started",
        "elections_started",
        "elections_won",
        "heartbeats_sent",
        "heartbeats_received",
        "quorum_losses",
        "messages_ignored",
        "messages_refused",
        "death_notices",
        "messages_sent",
        "messages_received",
        "frames_rejected",
        "peer_rtt_seconds",
        "driver_lag_max_seconds",
        "driver_lag_recent_max_seconds",
        "driver_timer_wakes",
        "driver_late_wakes",
        "failover_duration_seconds",
        "log_last_index",
        "log_commit_index",
        "log_applied_index",
        "kv_revision",
        "log_snapshot_bytes",
        "log_follower_match_index",
        "log_follower_lag_entries",
        "log_writes",
        "log_proposed",
        "log_forwarded",
        "log_unknown",
        "log_write_failures",
        "log_compactions",
        "log_compaction_failures",
        "kv_commit_duration_seconds",
        "kv_writes_unknown",
        "sessions_held",
        "session_renewals",
        "session_renewals_refused",
        "session_renewal_asks",
        "session_expiries_proposed",
        "election_campaigns",
        "election_waiter_wakeups",
        "election_waits_won",
        "election_observe_events",
        "election_waiters",
        "election_observers",
        "partitions_unowned_seconds",
        "partitions_moves",
        "partitions_unowned",
        "partitions_imbalance",
    ];
    assert_eq!(families, expected, "{}", answer.body);
    assert!(answer.body.contains("tenure_is_leader 1\n"), "{}", answer.body);
    assert!(answer.body.contains("tenure_elections_won_total 1\n"), "{}", answer.body);
    server.stop(STOP_BOUND).await.unwrap();
}

/// With TLS the API speaks HTTPS with the node's certificate: a client that
/// trusts the CA gets answers, plain HTTP gets advice, and a client that
/// never starts its TLS handshake is cut off at the header timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_speaks_https_with_the_node_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let limits =
        HttpLimits { header_read_timeout: Duration::from_millis(300), ..HttpLimits::default() };
    let heartbeat = Duration::from_millis(20);
    let mut server =
        start_cluster_with(1, heartbeat, heartbeat * 10, limits, test_auth(), dir.path(), true)
            .pop()
            .unwrap();

    let roots = tenure_node::tls::read_roots(&dir.path().join("certs/ca.pem")).unwrap();
    let config =
        tokio_rustls::rustls::ClientConfig::builder_with_provider(tenure_node::tls::provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
    let addr = server.http;
    let leader = eventually("an answer over https", START_BOUND, || {
        let connector = connector.clone();
        async move {
            let tcp = TcpStream::connect(addr).await.ok()?;
            let name = tokio_rustls::rustls::pki_types::ServerName::from(addr.ip());
            let mut tls = connector.connect(name, tcp).await.ok()?;
            let answer = exchange(&mut tls, &get("/v1/status")).await?;
            let s: serde_json::Value = serde_json::from_str(&answer.body).ok()?;
            (answer.status == 200 && s["role"] == "leader").then_some(s)
        }
    })
    .await;
    assert_eq!(leader["id"], 1);

    let plain = request(addr, &get("/v1/status")).await.expect("a plain answer");
    assert_eq!(plain.status, 400);
    assert!(plain.body.contains("HTTPS only"), "{}", plain.body);

    let mut silent = TcpStream::connect(addr).await.unwrap();
    let since = Instant::now();
    wait_closed(&mut silent, Duration::from_secs(3)).await;
    let took = since.elapsed();
    assert!(took >= Duration::from_millis(250), "closed after {took:?}");
    server.stop(STOP_BOUND).await.expect("the server stops cleanly");
}

/// The HTTPS accept loop counts what never became a TLS connection in the
/// server's refusal log (no line each): plain HTTP (answered 400), a broken
/// TLS handshake, and a client that starts one and never finishes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_that_never_speak_tls_are_counted_in_the_refusal_log() {
    use tenure_core::NodeId;
    use tenure_node::tls::certgen::{self, CertRequest};
    use tenure_node::tls::TlsIdentity;
    use tokio::io::AsyncWriteExt;

    let dir = tempfile::tempdir().unwrap();
    let wanted = CertRequest::new("in-process", [NodeId(1)]);
    let made = certgen::generate(&dir.path().join("certs"), &wanted).unwrap();
    let identity = TlsIdentity::load(&made.nodes[0].1, "in-process", NodeId(1)).unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(identity.https_server_config());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // An interval longer than the test: everything lands in one summary.
    let log = std::sync::Arc::new(tenure_node::RateLimitedLog::new("HTTP requests", LONG));
    let limits = HttpLimits { header_read_timeout: SHORT, ..HttpLimits::default() };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tenure_server::http::serve(
        listener,
        axum::Router::new(),
        limits,
        Some(acceptor),
        log.clone(),
        async {
            let _ = stopped.await;
        },
    );
    let server = tokio::spawn(serving);

    let plain = request(addr, &get("/healthz")).await.expect("a plain answer");
    assert_eq!(plain.status, 400);
    let mut broken = TcpStream::connect(addr).await.unwrap();
    broken.write_all(&[0x16, 0x03, 0x01, 0x00, 0x04, 0xde, 0xad, 0xbe, 0xef]).await.unwrap();
    wait_closed(&mut broken, SLACK).await;
    let mut stalled = TcpStream::connect(addr).await.unwrap();
    stalled.write_all(&[0x16]).await.unwrap();
    wait_closed(&mut stalled, SHORT + SLACK).await;

    let _ = stop.send(());
    server.await.unwrap();
    let summary = log.flush().expect("the refusals were counted");
    assert_eq!(summary.total, 3, "{summary}");
    for reason in
        ["400 plain HTTP on the HTTPS port", "TLS handshake failed", "no TLS handshake in time"]
    {
        assert!(summary.reasons.contains(&(reason, 1)), "{reason}: {summary}");
    }
}
