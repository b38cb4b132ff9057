//! `GET /v1/cluster` when the other voters' HTTP addresses (`--peer-http`)
//! answer badly: one real `tenure server` whose five peers are fake HTTP
//! servers run by this test. One sends bytes that are not HTTP, one a 200
//! whose body is not JSON, one a body without end, one a valid status of
//! another node, one accepts the connection and never answers.
//!
//! The serving node must answer within its per-peer timeout plus slack,
//! report each of them with a reason and no status, hang up on the endless
//! body and on the silent peer, and keep its own entry whole. With TLS (the
//! fakes hold their nodes' own certificates: compromised or broken nodes of
//! the cluster) and without.

mod harness;

use harness::{serial, TestCluster, ADMIN_TOKEN, CLUSTER};
use hyper::Method;
use std::time::{Duration, Instant};
use tenure_api::{ClusterBody, ClusterNodeBody};
use tenure_client::{Client, ClientOptions};
use tenure_node::tls::{TlsFiles, TlsIdentity};
use tenure_node::NodeId;
use tenure_server::http::PEER_STATUS_TIMEOUT;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

const HEARTBEAT_MS: u64 = 100;
const TIMEOUT_MS: u64 = 1000;
/// The real node and its five fake peers.
const VOTERS: usize = 6;
/// Room above the node's per-peer timeout for a loaded test machine.
const SLACK: Duration = Duration::from_millis(1000);
/// The test's own wait for `/v1/cluster`: far above the bound asserted, so
/// that a slow answer is measured rather than cut off.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Bound on the real node's first answer to `/v1/status`.
const START_BOUND: Duration = Duration::from_secs(15);
/// How much the endless peer sends at most before giving up on being cut
/// off (64 times the client's 1 MiB limit on an answer).
const ENDLESS_CAP: usize = 64 << 20;
/// What the endless peer sends per write.
const ENDLESS_CHUNK: usize = 64 << 10;
/// Longest request head a fake peer reads.
const MAX_HEAD: usize = 16 << 10;
/// Bound on the node hanging up on the silent peer after its timeout.
const HANG_UP_BOUND: Duration = Duration::from_secs(5);

/// How a fake peer answers `GET /v1/status`.
#[derive(Clone, Debug)]
enum Fake {
    /// Bytes that are not an HTTP answer, then the connection closed.
    NotHttp,
    /// `200 OK` with a body that is not JSON.
    NotJson,
    /// `200 OK` and a body without a length or an end.
    Endless,
    /// `200 OK` with this valid status body of another node.
    WrongNode(Vec<u8>),
    /// Nothing, the connection held open.
    Silent,
}

/// What a fake peer saw of one connection.
#[derive(Debug)]
enum Seen {
    /// The endless peer sent this many body bytes before the node hung up
    /// (or [`ENDLESS_CAP`] if it never did).
    EndlessSent(usize),
    /// The silent peer's connection was closed by the node this long after
    /// the request came (None: not within [`HANG_UP_BOUND`]).
    SilentClosedAfter(Option<Duration>),
}

trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

/// Reads a request head (to its blank line), at most [`MAX_HEAD`] bytes.
async fn read_head(s: &mut (dyn Stream + '_)) -> bool {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_HEAD {
        match s.read(&mut buf).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    true
}

/// Answers one connection as `fake` does; reports to `seen`.
async fn answer(mut s: Box<dyn Stream>, fake: Fake, seen: mpsc::UnboundedSender<Seen>) {
    if !read_head(&mut *s).await {
        return;
    }
    let asked = Instant::now();
    let ok = |body: &[u8]| {
        let mut a = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        a.extend_from_slice(body);
        a
    };
    match fake {
        Fake::NotHttp => {
            let _ = s.write_all(b"\x00\xff\xfeSSH-2.0-not-http\r\n\x07\x07\r\n\r\n").await;
            let _ = s.shutdown().await;
        }
        Fake::NotJson => {
            let _ = s.write_all(&ok(b"<html><body>tenure? never heard of it</body></html>")).await;
        }
        Fake::WrongNode(body) => {
            let _ = s.write_all(&ok(&body)).await;
        }
        Fake::Endless => {
            let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n";
            let mut sent = 0;
            if s.write_all(head.as_bytes()).await.is_ok() {
                let chunk = vec![b'['; ENDLESS_CHUNK];
                while sent < ENDLESS_CAP && s.write_all(&chunk).await.is_ok() {
                    sent += chunk.len();
                }
            }
            let _ = seen.send(Seen::EndlessSent(sent));
        }
        Fake::Silent => {
            let mut buf = [0u8; 1024];
            let closed = tokio::time::timeout(HANG_UP_BOUND, async {
                while let Ok(n) = s.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                }
            })
            .await;
            let _ = seen.send(Seen::SilentClosedAfter(closed.ok().map(|()| asked.elapsed())));
        }
    }
}

/// Serves `fake` on `listener` (over TLS with `tls`, if given) until the
/// test ends.
async fn serve(
    listener: TcpListener,
    fake: Fake,
    tls: Option<tokio_rustls::TlsAcceptor>,
    seen: mpsc::UnboundedSender<Seen>,
) {
    while let Ok((tcp, _)) = listener.accept().await {
        let (fake, tls, seen) = (fake.clone(), tls.clone(), seen.clone());
        tokio::spawn(async move {
            let stream: Box<dyn Stream> = match tls {
                Some(acceptor) => match acceptor.accept(tcp).await {
                    Ok(s) => Box::new(s),
                    Err(_) => return,
                },
                None => Box::new(tcp),
            };
            answer(stream, fake, seen).await;
        });
    }
}

/// The TLS acceptor of fake node `id`: its own certificate from the cluster's CA.
fn acceptor(c: &TestCluster, id: u64) -> tokio_rustls::TlsAcceptor {
    let certs = c.dir.path().join("certs");
    let files = TlsFiles {
        cert: certs.join(format!("node-{id}.pem")),
        key: certs.join(format!("node-{id}-key.pem")),
        ca: c.ca(),
    };
    let identity = TlsIdentity::load(&files, CLUSTER, NodeId(id)).expect("the test certificates");
    tokio_rustls::TlsAcceptor::from(identity.https_server_config())
}

/// `GET /v1/cluster` of the real node with the admin token, and how long it took.
async fn read_cluster(c: &TestCluster, client: &Client) -> (ClusterBody, Duration) {
    let url = format!("{}/v1/cluster", c.endpoint(0));
    let started = Instant::now();
    let body = client
        .json::<ClusterBody>(Method::GET, &url, None, CALL_TIMEOUT)
        .await
        .unwrap_or_else(|e| panic!("{url}: {e:?}\n{}", c.logs()));
    (body, started.elapsed())
}

/// The entry of node `id`, which must be there.
fn entry(body: &ClusterBody, id: u64) -> &ClusterNodeBody {
    body.nodes.iter().find(|n| n.id == id).unwrap_or_else(|| panic!("no node {id} in {body:?}"))
}

/// Asserts that node `id` has no status and an error naming `reason` (any
/// of the words, case-insensitive).
fn assert_refused(body: &ClusterBody, id: u64, what: &str, reasons: &[&str]) {
    let n = entry(body, id);
    assert!(n.status.is_none(), "{what} (node {id}) was trusted: {n:?}");
    let error = n.error.as_deref().unwrap_or_else(|| panic!("{what} (node {id}): no error: {n:?}"));
    let lower = error.to_lowercase();
    assert!(
        reasons.iter().any(|r| lower.contains(r)),
        "{what} (node {id}): the error {error:?} does not say why (expected one of {reasons:?})"
    );
    println!("{what} (node {id}): {error}");
}

async fn hostile_peers(tls: bool) {
    let _serial = serial().await;
    let mut c = TestCluster::new(VOTERS, HEARTBEAT_MS, TIMEOUT_MS);
    c.servers[0].tls = tls;
    // The fakes take their ports before the real node starts.
    let mut listeners = Vec::new();
    for s in &c.servers[1..] {
        listeners.push(TcpListener::bind(("127.0.0.1", s.http_port)).await.unwrap());
    }
    c.spawn(0);
    let cacert = c.ca();
    let client = Client::new(ClientOptions {
        cacert: tls.then_some(cacert.as_path()),
        token: Some(ADMIN_TOKEN),
    })
    .unwrap();
    let started = Instant::now();
    let own = loop {
        if let Some(s) = c.status(0).await {
            break s;
        }
        assert!(started.elapsed() < START_BOUND, "node 1 did not start\n{}", c.logs());
        tokio::time::sleep(harness::POLL).await;
    };
    let own_body = serde_json::to_vec(&own).unwrap();

    let fakes =
        [Fake::NotHttp, Fake::NotJson, Fake::Endless, Fake::WrongNode(own_body), Fake::Silent];
    let (seen_tx, mut seen_rx) = mpsc::unbounded_channel();
    let mut tasks = Vec::new();
    for ((listener, fake), id) in listeners.into_iter().zip(fakes).zip(2..) {
        let tls = tls.then(|| acceptor(&c, id));
        tasks.push(tokio::spawn(serve(listener, fake, tls, seen_tx.clone())));
    }

    let bound = PEER_STATUS_TIMEOUT + SLACK;
    for call in 1..=2 {
        let (body, took) = read_cluster(&c, &client).await;
        println!("call {call} (tls {tls}): /v1/cluster answered in {took:?}");
        assert!(took < bound, "/v1/cluster took {took:?}, over {bound:?}: {body:?}");
        assert_eq!(body.served_by, 1);
        let ids: Vec<u64> = body.nodes.iter().map(|n| n.id).collect();
        assert_eq!(ids, (1..=VOTERS as u64).collect::<Vec<_>>(), "one entry per voter, by id");
        let me = entry(&body, 1);
        let status = me.status.as_ref().unwrap_or_else(|| panic!("no own status: {me:?}"));
        assert_eq!((status.id, me.error.as_deref()), (1, None), "{me:?}");
        assert_eq!(status.peers.len(), VOTERS - 1, "{status:?}");
        assert_refused(&body, 2, "a peer answering bytes that are not HTTP", &["invalid", "parse"]);
        assert_refused(&body, 3, "a peer answering HTML", &["unreadable"]);
        assert_refused(&body, 4, "a peer answering without end", &["limit"]);
        assert_refused(&body, 5, "a peer answering as node 1", &["answers as node 1"]);
        assert_refused(&body, 6, "a peer that never answers", &["no answer within"]);
    }

    // The node hung up on the endless body near the client's limit, and
    // on the silent peer once its timeout passed.
    let (mut endless, mut silent) = (Vec::new(), Vec::new());
    while endless.len() < 2 || silent.len() < 2 {
        match tokio::time::timeout(HANG_UP_BOUND * 2, seen_rx.recv()).await {
            Ok(Some(Seen::EndlessSent(n))) => endless.push(n),
            Ok(Some(Seen::SilentClosedAfter(after))) => silent.push(after),
            other => panic!("the fakes did not report ({other:?}): {endless:?} {silent:?}"),
        }
    }
    println!("endless peer sent before the node hung up: {endless:?} bytes");
    println!("silent peer's connection closed after: {silent:?}");
    assert!(endless.iter().all(|&n| n < ENDLESS_CAP), "the node read on and on: {endless:?}");
    for after in silent {
        let after = after.expect("the node never hung up on the silent peer");
        assert!(after < bound, "the silent peer was held for {after:?}");
    }
    assert!(c.status(0).await.is_some(), "node 1 stopped answering\n{}", c.logs());
    for t in tasks {
        t.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_tls_hostile_peers_are_reported_not_trusted_nor_waited_for() {
    hostile_peers(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_tls_hostile_peers_are_reported_not_trusted_nor_waited_for() {
    hostile_peers(false).await;
}
