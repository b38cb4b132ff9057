//! Who may call which endpoint, and how many watch streams one client may
//! hold: servers in this process (`tenure_server::server::run`), real sockets.

use crate::servers::{
    authorization, eventually, exchange, get_as, request, start_solo_with, status, test_auth,
    Answer, ADMIN_TOKEN, OTHER_READ_TOKEN, READ_TOKEN, WRITE_TOKEN,
};
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;
use tenure_server::http::{
    Access, ApiAuth, HttpLimits, ENDPOINTS, MAX_WATCHERS, MAX_WATCHERS_PER_ADDRESS,
    MAX_WATCHERS_PER_TOKEN,
};
use tokio::net::{TcpSocket, TcpStream};

/// Bound on a server's start, on a busy machine.
const START_BOUND: Duration = Duration::from_secs(10);
/// Bound on a server's clean stop.
const STOP_BOUND: Duration = Duration::from_secs(5);

/// `method path` with `token` (or none) and an empty body.
async fn ask(addr: SocketAddr, method: &str, path: &str, token: Option<&str>) -> Answer {
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: test\r\n{}Content-Length: 0\r\n\r\n",
        authorization(token)
    );
    request(addr, &req).await.expect("an answer")
}

/// Asserts `answer` is a JSON error with `status` and a Bearer challenge.
fn assert_refused(answer: &Answer, status: u16, challenge: &str, what: &str) {
    assert_eq!(answer.status, status, "{what}: {answer:?}");
    let error: serde_json::Value = serde_json::from_str(&answer.body).expect("a JSON body");
    assert!(error["error"].as_str().is_some_and(|e| !e.is_empty()), "{what}: {answer:?}");
    assert_eq!(answer.header("www-authenticate"), Some(challenge), "{what}: {answer:?}");
}

#[test]
fn the_table_gives_transfer_to_admin_writes_to_write_reads_to_read_and_opens_the_probes() {
    let access = |method: &str, path: &str| {
        ENDPOINTS
            .iter()
            .find(|e| e.path == path && e.methods.iter().any(|m| m == method))
            .unwrap()
            .access
    };
    assert_eq!(access("POST", "/v1/transfer"), Access::Admin);
    for (method, path) in [
        ("PUT", "/v1/kv/{*key}"),
        ("DELETE", "/v1/kv/{*key}"),
        ("POST", "/v1/txn"),
        ("POST", "/v1/elections/{name}/campaign"),
        ("POST", "/v1/elections/{name}/resign"),
        ("POST", "/v1/elections/{name}/proclaim"),
    ] {
        assert_eq!(access(method, path), Access::Write, "{method} {path}");
    }
    for path in [
        "/v1/status",
        "/v1/leader",
        "/v1/watch",
        "/metrics",
        "/v1/kv/{*key}",
        "/v1/kv",
        "/v1/kv-watch",
        "/v1/elections",
        "/v1/elections/{name}",
        "/v1/elections/{name}/wait",
        "/v1/elections/{name}/observe",
        "/v1/elections/{name}/check",
    ] {
        assert_eq!(access("GET", path), Access::Read, "{path}");
    }
    for path in ["/healthz", "/v1/is-leader"] {
        assert_eq!(access("GET", path), Access::Probe, "{path}");
    }
    // Every method but GET/HEAD changes something: write or admin.
    for e in ENDPOINTS {
        if e.methods.iter().any(|m| m != "GET" && m != "HEAD") {
            assert!([Access::Write, Access::Admin].contains(&e.access), "{} writes", e.path);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_endpoint_admits_callers_by_the_access_in_its_table_row() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = start_solo_with(HttpLimits::default(), test_auth(), dir.path());
    let addr = server.http;
    eventually("the server answers", START_BOUND, || status(addr)).await;
    for (e, method) in ENDPOINTS.iter().flat_map(|e| e.methods.iter().map(move |m| (e, m))) {
        let (method, path) = (method.as_str(), &e.example_path());
        let what = format!("{method} {path} ({})", e.access.as_str());
        let anonymous = ask(addr, method, path, None).await;
        let bad = ask(addr, method, path, Some("not-a-configured-token-000")).await;
        let read = ask(addr, method, path, Some(READ_TOKEN)).await;
        let write = ask(addr, method, path, Some(WRITE_TOKEN)).await;
        let admin = ask(addr, method, path, Some(ADMIN_TOKEN)).await;
        match e.access {
            Access::Probe => {
                for a in [&anonymous, &bad, &read, &write, &admin] {
                    assert!(![401, 403].contains(&a.status), "{what} is open: {a:?}");
                }
            }
            Access::Read | Access::Write | Access::Admin => {
                assert_refused(&anonymous, 401, "Bearer realm=\"tenure\"", &what);
                assert!(anonymous.body.contains("needs a bearer token"), "{what}: {anonymous:?}");
                let invalid = "Bearer realm=\"tenure\", error=\"invalid_token\"";
                assert_refused(&bad, 401, invalid, &what);
                assert!(![401, 403].contains(&admin.status), "{what} with admin: {admin:?}");
            }
        }
        let scope = "Bearer realm=\"tenure\", error=\"insufficient_scope\"";
        let shown = path;
        match e.access {
            Access::Admin => {
                assert_refused(&read, 403, scope, &what);
                assert_refused(&write, 403, scope, &what);
                let expected = format!("this token's role is write; {method} {shown} needs admin");
                assert!(write.body.contains(&expected), "{what}: {write:?}");
            }
            Access::Write => {
                assert_refused(&read, 403, scope, &what);
                let expected = format!("this token's role is read; {method} {shown} needs write");
                assert!(read.body.contains(&expected), "{what}: {read:?}");
                assert!(![401, 403].contains(&write.status), "{what} with write: {write:?}");
            }
            Access::Probe | Access::Read => {
                assert!(![401, 403].contains(&read.status), "{what} with read: {read:?}");
                assert!(![401, 403].contains(&write.status), "{what} with write: {write:?}");
            }
        }
    }
    // A wrong scheme or two tokens are no token.
    let basic = "GET /v1/status HTTP/1.1\r\nHost: t\r\nAuthorization: Basic YTpi\r\n\r\n";
    let answer = request(addr, basic).await.unwrap();
    assert_eq!(answer.status, 401, "{answer:?}");
    let twice = format!(
        "GET /v1/status HTTP/1.1\r\nHost: t\r\n{}{}\r\n",
        authorization(Some(ADMIN_TOKEN)),
        authorization(Some(READ_TOKEN))
    );
    assert_eq!(request(addr, &twice).await.unwrap().status, 401);
    server.stop(STOP_BOUND).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_can_be_closed_and_a_server_without_tokens_answers_only_them() {
    let dir = tempfile::tempdir().unwrap();
    let closed = test_auth().open_probes(false);
    let mut server = start_solo_with(HttpLimits::default(), closed, &dir.path().join("closed"));
    let addr = server.http;
    eventually("the server answers", START_BOUND, || status(addr)).await;
    for e in ENDPOINTS.iter().filter(|e| e.access == Access::Probe) {
        let anonymous = ask(addr, e.methods[0].as_str(), e.path, None).await;
        assert_refused(&anonymous, 401, "Bearer realm=\"tenure\"", e.path);
        let read = ask(addr, e.methods[0].as_str(), e.path, Some(READ_TOKEN)).await;
        assert!(![401, 403].contains(&read.status), "{}: {read:?}", e.path);
    }
    server.stop(STOP_BOUND).await.unwrap();

    // What an embedder gets who configures nothing: locked but for the probes.
    let mut locked =
        start_solo_with(HttpLimits::default(), ApiAuth::default(), &dir.path().join("locked"));
    let addr = locked.http;
    eventually("the server answers", START_BOUND, || async {
        let a = request(addr, &get_as("/healthz", None)).await?;
        (a.status == 200).then_some(())
    })
    .await;
    let answer = ask(addr, "GET", "/v1/status", Some(ADMIN_TOKEN)).await;
    assert_eq!(answer.status, 401, "{answer:?}");
    let answer = ask(addr, "POST", "/v1/transfer", None).await;
    assert_eq!(answer.status, 401, "{answer:?}");
    locked.stop(STOP_BOUND).await.unwrap();

    // The dev mode: every endpoint open.
    let mut open =
        start_solo_with(HttpLimits::default(), ApiAuth::insecure_open(), &dir.path().join("open"));
    let addr = open.http;
    eventually("the server answers", START_BOUND, || async {
        let a = request(addr, &get_as("/v1/status", None)).await?;
        (a.status == 200).then_some(())
    })
    .await;
    let answer = ask(addr, "POST", "/v1/transfer", None).await;
    assert_eq!(answer.status, 415, "the handler ran (and wants a JSON body): {answer:?}");
    open.stop(STOP_BOUND).await.unwrap();
}

/// Opens `GET /v1/watch` from the loopback address `from` with `token`;
/// returns the answer and the connection (which holds a 200 stream open).
async fn watch_from(server: SocketAddr, from: Ipv4Addr, token: &str) -> (Answer, TcpStream) {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::from((from, 0))).unwrap();
    let mut conn = socket.connect(server).await.unwrap();
    let answer = exchange(&mut conn, &get_as("/v1/watch", Some(token))).await.expect("an answer");
    (answer, conn)
}

/// The loopback address 127.0.0.`n`.
fn lo(n: u8) -> Ipv4Addr {
    Ipv4Addr::new(127, 0, 0, n)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_client_cannot_take_every_watch_stream() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = start_solo_with(HttpLimits::default(), test_auth(), dir.path());
    let addr = server.http;
    eventually("the server answers", START_BOUND, || status(addr)).await;
    let mut held = Vec::new();
    let open = |held: &mut Vec<TcpStream>, answer: Answer, conn: TcpStream, what: &str| {
        assert_eq!(answer.status, 200, "{what}: {answer:?}");
        held.push(conn);
    };

    // One client (one address, one token) takes what it may, then gets 429.
    for _ in 0..MAX_WATCHERS_PER_ADDRESS {
        let (answer, conn) = watch_from(addr, lo(1), READ_TOKEN).await;
        open(&mut held, answer, conn, "a first client's stream");
    }
    let (answer, _) = watch_from(addr, lo(1), READ_TOKEN).await;
    assert_eq!(answer.status, 429, "{answer:?}");
    assert!(answer.body.contains("too many watch streams from 127.0.0.1"), "{answer:?}");
    // Another client still gets a stream.
    let (answer, conn) = watch_from(addr, lo(2), OTHER_READ_TOKEN).await;
    open(&mut held, answer, conn, "another client's stream");

    // The same token from other addresses: up to its own limit.
    for i in 0..(MAX_WATCHERS_PER_TOKEN - MAX_WATCHERS_PER_ADDRESS) {
        let from = lo(10 + (i / MAX_WATCHERS_PER_ADDRESS) as u8);
        let (answer, conn) = watch_from(addr, from, READ_TOKEN).await;
        open(&mut held, answer, conn, "the first token from elsewhere");
    }
    let (answer, _) = watch_from(addr, lo(20), READ_TOKEN).await;
    assert_eq!(answer.status, 429, "{answer:?}");
    assert!(answer.body.contains("with the token \\\"reader\\\""), "{answer:?}");

    // Everyone else fills the rest; beyond, the server is full: 503.
    let mut i = 0;
    while held.len() < MAX_WATCHERS {
        let token = if i < MAX_WATCHERS_PER_TOKEN - 1 { OTHER_READ_TOKEN } else { ADMIN_TOKEN };
        let from = lo(30 + (i / MAX_WATCHERS_PER_ADDRESS) as u8);
        let (answer, conn) = watch_from(addr, from, token).await;
        open(&mut held, answer, conn, "the rest");
        i += 1;
    }
    let (answer, _) = watch_from(addr, lo(100), ADMIN_TOKEN).await;
    assert_eq!(answer.status, 503, "{answer:?}");
    assert!(answer.body.contains(&format!("at most {MAX_WATCHERS}")), "{answer:?}");
    // Other endpoints still answer.
    assert_eq!(ask(addr, "GET", "/v1/status", Some(READ_TOKEN)).await.status, 200);

    // A client that goes away gives its stream back.
    drop(held.swap_remove(0));
    eventually("the closed stream's place is free", Duration::from_secs(15), || async {
        let (answer, conn) = watch_from(addr, lo(1), READ_TOKEN).await;
        (answer.status == 200).then_some(conn)
    })
    .await;
    server.stop(STOP_BOUND).await.unwrap();
}
