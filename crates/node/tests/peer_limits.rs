//! The bounds on inbound peer connections, against real sockets: the idle
//! timeout, the handshake slots a stranger cannot hold, one live connection
//! per peer, and refusals logged a few at a time with a summary.

mod common;

use common::{dial_tls, handshake, hello, identity, wait_for, Cluster, TlsConn};
use common::{ELECTION_TIMEOUT, HEARTBEAT};
use futures_util::{SinkExt, StreamExt};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tenure_node::transport::{
    HANDSHAKE_TIMEOUT, MAX_PENDING_HANDSHAKES, PEER_IDLE_PINGS, REJECT_LOG_BURST,
};
use tenure_node::wire::{self, Frame};
use tenure_node::{start_with_listener, Node, NodeConfig, NodeId};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Every log line of this test binary.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

static CAPTURE: OnceLock<Capture> = OnceLock::new();

/// Installs the capturing log subscriber (every test calls this first).
fn capture() -> &'static Capture {
    CAPTURE.get_or_init(|| {
        let capture = Capture::default();
        let writer = capture.clone();
        tracing_subscriber::fmt()
            .with_env_filter("tenure_node=info")
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .init();
        capture
    })
}

/// The log lines so far that contain every one of `words`.
fn lines_with(words: &[&str]) -> Vec<String> {
    let text = String::from_utf8_lossy(&capture().0.lock().unwrap()).into_owned();
    text.lines().filter(|l| words.iter().all(|w| l.contains(w))).map(str::to_string).collect()
}

/// Node 1 of a three-node configuration, alone (its peers are played by the
/// test), with the configurations of all three.
async fn lone_node(tls: bool) -> (Node, Vec<NodeConfig>, tempfile::TempDir) {
    let (configs, mut listeners, dir) =
        Cluster::configure_with(3, HEARTBEAT, ELECTION_TIMEOUT, tls);
    drop(listeners.split_off(1));
    let node = start_with_listener(configs[0].clone(), listeners.remove(0)).await.unwrap();
    (node, configs, dir)
}

/// Dials node 1 as node 2 and completes the handshake.
async fn authenticated(configs: &[NodeConfig]) -> TlsConn {
    let mut conn = dial_tls(&identity(&configs[1]), &configs[0]).await.unwrap();
    let ack = handshake(&mut conn, hello(NodeId(2), &configs[0])).await.unwrap();
    assert!(matches!(ack, Frame::HelloAck { .. }), "{ack:?}");
    conn
}

/// Waits until the node closes `conn`; returns how long that took. Panics
/// after `bound`.
async fn closed_within(conn: &mut TlsConn, bound: Duration) -> Duration {
    let since = Instant::now();
    let closed =
        tokio::time::timeout(bound, async { while let Some(Ok(_)) = conn.next().await {} }).await;
    assert!(closed.is_ok(), "the connection is still open after {bound:?}");
    since.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_authenticated_connection_that_goes_silent_is_closed() {
    capture();
    let (node, configs, _dir) = lone_node(true).await;
    let idle = HEARTBEAT * PEER_IDLE_PINGS;

    // A peer that pings every heartbeat keeps its connection.
    let mut alive = authenticated(&configs).await;
    let until = Instant::now() + idle * 3;
    let mut nonce = 0;
    while Instant::now() < until {
        nonce += 1;
        alive.send(wire::encode(&Frame::Ping { nonce })).await.unwrap();
        let pong = tokio::time::timeout(Duration::from_secs(2), alive.next()).await.unwrap();
        let pong = wire::decode(&pong.expect("open").unwrap()).unwrap();
        assert_eq!(pong, Frame::Pong { nonce });
        tokio::time::sleep(HEARTBEAT).await;
    }

    // Silent from now on: closed after the idle timeout, not before.
    let took = closed_within(&mut alive, idle * 5).await;
    assert!(
        took + HEARTBEAT * 2 >= idle,
        "closed after {took:?}, before the idle timeout {idle:?}"
    );
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_strangers_cannot_keep_a_peer_out() {
    capture();
    let (node, configs, _dir) = lone_node(true).await;
    // More silent connections than there are handshake slots.
    let extra = 4;
    let mut strangers = Vec::new();
    for _ in 0..MAX_PENDING_HANDSHAKES + extra {
        strangers.push(TcpStream::connect(configs[0].listen).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(50)).await;

    // The peer gets in at once, by taking the oldest stranger's slot.
    let since = Instant::now();
    let mut conn = authenticated(&configs).await;
    assert!(since.elapsed() < HANDSHAKE_TIMEOUT / 2, "took {:?}", since.elapsed());
    conn.send(wire::encode(&Frame::Ping { nonce: 1 })).await.unwrap();
    let pong = tokio::time::timeout(Duration::from_secs(2), conn.next()).await.unwrap();
    assert!(matches!(wire::decode(&pong.unwrap().unwrap()), Ok(Frame::Pong { nonce: 1 })));

    // The oldest strangers were closed to make room; every one is closed by
    // the handshake timeout.
    let mut closed_early = 0;
    for s in strangers.iter_mut().take(extra + 1) {
        let mut b = [0u8; 1];
        if let Ok(Ok(0) | Err(_)) =
            tokio::time::timeout(Duration::from_millis(100), s.read(&mut b)).await
        {
            closed_early += 1;
        }
    }
    assert_eq!(closed_early, extra + 1, "the oldest handshakes were not closed for newer ones");
    for s in &mut strangers {
        let mut b = [0u8; 1];
        let read = tokio::time::timeout(HANDSHAKE_TIMEOUT * 2, s.read(&mut b)).await;
        assert!(matches!(read, Ok(Ok(0) | Err(_))), "a silent stranger kept its slot: {read:?}");
    }
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_connection_of_a_peer_replaces_the_older() {
    capture();
    let (node, configs, _dir) = lone_node(true).await;
    let mut older = authenticated(&configs).await;
    let mut newer = authenticated(&configs).await;
    closed_within(&mut older, Duration::from_secs(2)).await;
    newer.send(wire::encode(&Frame::Ping { nonce: 7 })).await.unwrap();
    let pong = tokio::time::timeout(Duration::from_secs(2), newer.next()).await.unwrap();
    assert!(matches!(wire::decode(&pong.unwrap().unwrap()), Ok(Frame::Pong { nonce: 7 })));
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_refused_connections_logs_a_few_lines_and_a_count() {
    capture();
    // Without TLS, garbage is cheap to send: a length no frame can have.
    let (node, configs, _dir) = lone_node(false).await;
    let flood = 200u64;
    for _ in 0..flood {
        let mut s = TcpStream::connect(configs[0].listen).await.unwrap();
        s.write_all(&[0xff, 0xff, 0xff, 0xff, 0]).await.unwrap();
        let mut rest = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(2), s.read_to_end(&mut rest)).await;
    }
    let h = node.handle();
    wait_for("every refusal counted", || (h.metrics().frames_rejected >= flood).then_some(()))
        .await;
    let one_by_one = lines_with(&["refused a peer connection", "bad hello"]);
    assert_eq!(one_by_one.len(), REJECT_LOG_BURST as usize, "{one_by_one:#?}");
    // The rest are summarised (at the end of the window, or at shutdown).
    node.shutdown().await;
    let expected = format!("refused={}", flood - u64::from(REJECT_LOG_BURST));
    let summaries = lines_with(&["(summary)", &expected, "bad hello"]);
    assert_eq!(summaries.len(), 1, "no summary with {expected}: {:#?}", lines_with(&["summary"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_tls_modes_are_logged_with_their_reason() {
    capture();
    let (mut configs, listeners, _dir) = Cluster::configure(2, HEARTBEAT, ELECTION_TIMEOUT);
    configs[1].security = tenure_node::Security::InsecureNoTls;
    let mut nodes = Vec::new();
    for (cfg, l) in configs.into_iter().zip(listeners) {
        nodes.push(start_with_listener(cfg, l).await.unwrap());
    }
    wait_for("both reasons logged", || {
        let plain_side = lines_with(&["speaks TLS but this node runs without TLS"]);
        let tls_side = lines_with(&["requires TLS on peer connections"]);
        (!plain_side.is_empty() && !tls_side.is_empty()).then_some(())
    })
    .await;
    // The plain dialer is told why, too.
    wait_for("the plain dialer told", || {
        (!lines_with(&["peer refused our handshake", "requires TLS"]).is_empty()).then_some(())
    })
    .await;
    for n in nodes {
        n.shutdown().await;
    }
}
