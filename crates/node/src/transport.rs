//! Peer transport over TCP: one outbound connection per peer (the dialer),
//! and an accept loop for the peers' connections to us.
//!
//! Election messages to peer P travel on our outbound connection to P; P's
//! messages to us arrive on P's outbound connection to our listener. Each
//! dialer also pings its peer every heartbeat interval on the same connection
//! and keeps a smoothed round-trip time (RFC 6298 style, gain 1/8).
//!
//! Sending never blocks the driver: each peer has a bounded queue that drops
//! its oldest message when full (a newer heartbeat or vote supersedes it, and
//! the protocol tolerates loss).

use crate::clock::Clock;
use crate::sync::lock;
use crate::wire::{self, Frame, WIRE_VERSION};
use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tenure_core::{Message, NodeId, ProtocolKind};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, Notify};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::{sleep, timeout, MissedTickBehavior};
use tokio_util::codec::Framed;
use tracing::{debug, info, warn};

/// Messages queued per peer before the oldest is dropped.
pub const PEER_QUEUE_CAPACITY: usize = 64;
/// First reconnect delay after a failed or lost connection.
pub const RECONNECT_MIN: Duration = Duration::from_millis(10);
/// Upper bound of the reconnect backoff, whatever the election timeout.
pub const RECONNECT_MAX: Duration = Duration::from_secs(1);
/// The longest a TCP connect may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// The shortest connect timeout, whatever the election timeout.
const MIN_CONNECT_TIMEOUT: Duration = Duration::from_millis(100);
/// A connection whose peer answered none of this many consecutive pings is
/// abandoned and redialled. After a partition heals, the kernel would deliver
/// on the old connection only at its next (exponentially backed-off)
/// retransmission, seconds later; a fresh connection is up in one round trip.
pub const SILENT_PINGS: u32 = 4;
/// How long either side waits for the other's handshake frame.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(1);
/// Inbound connections served at once; more are refused.
pub const MAX_INBOUND_CONNECTIONS: usize = 64;
/// Pause after a failed `accept` (e.g. out of file descriptors).
const ACCEPT_ERROR_BACKOFF: Duration = Duration::from_millis(50);
/// On close, how long a dialer waits for the peer to close its side after ours.
const CLOSE_LINGER: Duration = Duration::from_millis(200);
/// Gain of the smoothed RTT (1/8, as TCP's SRTT).
const RTT_GAIN: f64 = 0.125;

/// The reconnect backoff cap for an election timeout: a quarter of it (so a
/// restarted peer is reached again well before anyone times out), at most
/// [`RECONNECT_MAX`], at least [`RECONNECT_MIN`].
pub fn reconnect_cap(election_timeout: Duration) -> Duration {
    (election_timeout / 4).clamp(RECONNECT_MIN, RECONNECT_MAX)
}

/// Transport-wide counters.
#[derive(Debug, Default)]
pub struct WireStats {
    /// Election messages written.
    pub sent: AtomicU64,
    /// Election messages received.
    pub received: AtomicU64,
    /// Frames and handshakes refused.
    pub rejected: AtomicU64,
    /// Messages dropped from full queues.
    pub dropped: AtomicU64,
}

/// One peer: its send queue and what the transport knows about it.
#[derive(Debug)]
pub struct PeerLink {
    /// The peer.
    pub id: NodeId,
    /// Its configured address.
    pub addr: SocketAddr,
    queue: Mutex<VecDeque<Message>>,
    wake: Notify,
    connected: AtomicBool,
    /// Core-clock nanos + 1 of the last frame from the peer; 0 = never.
    last_heard: AtomicU64,
    rtt_ms: Mutex<Option<f64>>,
}

impl PeerLink {
    fn new(id: NodeId, addr: SocketAddr) -> Self {
        PeerLink {
            id,
            addr,
            queue: Mutex::new(VecDeque::with_capacity(PEER_QUEUE_CAPACITY)),
            wake: Notify::new(),
            connected: AtomicBool::new(false),
            last_heard: AtomicU64::new(0),
            rtt_ms: Mutex::new(None),
        }
    }

    /// True while our outbound connection to the peer is up.
    pub fn connected(&self) -> bool {
        self.connected.load(Ordering::Relaxed)
    }

    /// When a frame from the peer last arrived (core clock nanos).
    pub fn last_heard_nanos(&self) -> Option<u64> {
        self.last_heard.load(Ordering::Relaxed).checked_sub(1)
    }

    /// Smoothed ping round-trip time.
    pub fn rtt_ms(&self) -> Option<f64> {
        *lock(&self.rtt_ms)
    }

    fn heard(&self, clock: &Clock) {
        self.last_heard.store(clock.now().as_nanos().saturating_add(1), Ordering::Relaxed);
    }

    fn record_rtt(&self, sample_ms: f64) {
        let mut rtt = lock(&self.rtt_ms);
        *rtt = Some(match *rtt {
            Some(old) => old + RTT_GAIN * (sample_ms - old),
            None => sample_ms,
        });
    }

    /// Queues `msg` and wakes the dialer; returns true if the oldest queued
    /// message was dropped to make room.
    fn enqueue(&self, msg: Message) -> bool {
        let dropped = {
            let mut q = lock(&self.queue);
            let full = q.len() >= PEER_QUEUE_CAPACITY;
            if full {
                q.pop_front();
            }
            q.push_back(msg);
            full
        };
        self.wake.notify_one();
        dropped
    }

    fn take_queued(&self) -> VecDeque<Message> {
        std::mem::take(&mut *lock(&self.queue))
    }
}

/// What every transport task shares.
#[derive(Debug)]
pub struct Net {
    /// This cluster.
    pub cluster_id: String,
    /// This node.
    pub me: NodeId,
    /// The election protocol this node runs.
    pub protocol: ProtocolKind,
    /// The clock shared with the driver.
    pub clock: Clock,
    /// The other voters.
    pub links: Vec<Arc<PeerLink>>,
    /// Counters.
    pub stats: WireStats,
    /// Ping period.
    pub ping_interval: Duration,
    /// Reconnect backoff cap.
    pub reconnect_cap: Duration,
}

impl Net {
    /// The shared transport state for `peers` (this node's own entry is skipped).
    pub fn new(
        cluster_id: String,
        me: NodeId,
        protocol: ProtocolKind,
        peers: &[(NodeId, SocketAddr)],
        clock: Clock,
        ping_interval: Duration,
        reconnect_cap: Duration,
    ) -> Self {
        Net {
            cluster_id,
            me,
            protocol,
            clock,
            links: peers
                .iter()
                .filter(|&&(id, _)| id != me)
                .map(|&(id, addr)| Arc::new(PeerLink::new(id, addr)))
                .collect(),
            stats: WireStats::default(),
            ping_interval,
            reconnect_cap,
        }
    }

    fn link(&self, id: NodeId) -> Option<&Arc<PeerLink>> {
        self.links.iter().find(|l| l.id == id)
    }

    fn reject(&self, remote: SocketAddr, reason: &str) {
        self.stats.rejected.fetch_add(1, Ordering::Relaxed);
        warn!(%remote, reason, "refused a peer connection");
    }
}

/// The running transport: queues messages and owns the network tasks.
pub struct Transport {
    net: Arc<Net>,
    closing: watch::Sender<bool>,
    dialers: Vec<JoinHandle<()>>,
    acceptor: JoinHandle<()>,
}

impl Transport {
    /// Spawns the accept loop on `listener` and one dialer per peer; election
    /// messages received are passed to `inbound`.
    pub fn spawn(
        net: Arc<Net>,
        listener: TcpListener,
        inbound: mpsc::Sender<(NodeId, Message)>,
    ) -> Self {
        let (closing, closing_rx) = watch::channel(false);
        let dialers = net
            .links
            .iter()
            .map(|link| tokio::spawn(dial_loop(net.clone(), link.clone(), closing_rx.clone())))
            .collect();
        let acceptor = tokio::spawn(accept_loop(net.clone(), listener, inbound, closing_rx));
        Transport { net, closing, dialers, acceptor }
    }

    /// Queues `msg` for peer `to`, dropping that peer's oldest queued message if
    /// the queue is full. Never blocks.
    pub fn send(&self, to: NodeId, msg: Message) {
        let Some(link) = self.net.link(to) else {
            debug!(%to, "message for an unknown peer dropped");
            return;
        };
        if link.enqueue(msg) {
            self.net.stats.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Flushes queued messages to connected peers and closes every connection,
    /// waiting at most `bound`; then stops every task.
    pub async fn close(mut self, bound: Duration) {
        let _ = self.closing.send(true);
        let mut dialers = std::mem::take(&mut self.dialers);
        let acceptor = &mut self.acceptor;
        let flush = async {
            for d in &mut dialers {
                let _ = d.await;
            }
            // The accept loop closes the listener and every inbound
            // connection before it ends, so the port is free after this.
            let _ = acceptor.await;
        };
        if timeout(bound, flush).await.is_err() {
            warn!(?bound, "peers did not take the last messages in time; closing anyway");
        }
        for d in &dialers {
            d.abort();
        }
        self.acceptor.abort();
        for link in &self.net.links {
            link.connected.store(false, Ordering::Relaxed);
        }
    }
}

impl Drop for Transport {
    /// Stops every task (the listener closes with the accept loop); used when
    /// the node is dropped without a graceful shutdown.
    fn drop(&mut self) {
        for d in &self.dialers {
            d.abort();
        }
        self.acceptor.abort();
    }
}

type Conn = Framed<TcpStream, tokio_util::codec::LengthDelimitedCodec>;

/// Why a dialer's connection ended.
enum Ended {
    /// The node is closing; the connection was flushed and closed.
    Closing,
    /// The connection failed or was refused.
    Failed(String),
}

async fn dial_loop(net: Arc<Net>, link: Arc<PeerLink>, mut closing: watch::Receiver<bool>) {
    let mut backoff = RECONNECT_MIN;
    loop {
        if *closing.borrow() {
            return;
        }
        // The kernel retries a lost SYN only after a second: give up sooner and
        // redial on our own backoff, so a healed link is used again quickly.
        let connect_timeout = net.reconnect_cap.clamp(MIN_CONNECT_TIMEOUT, CONNECT_TIMEOUT);
        match timeout(connect_timeout, TcpStream::connect(link.addr)).await {
            Ok(Ok(stream)) => {
                let ended = outbound(&net, &link, stream, &mut closing, &mut backoff).await;
                let was_connected = link.connected.swap(false, Ordering::Relaxed);
                match ended {
                    Ended::Closing => return,
                    Ended::Failed(why) if was_connected => {
                        info!(peer = %link.id, addr = %link.addr, reason = %why, "lost the connection to a peer")
                    }
                    Ended::Failed(why) => {
                        debug!(peer = %link.id, addr = %link.addr, reason = %why, "connection to a peer failed")
                    }
                }
            }
            Ok(Err(e)) => {
                debug!(peer = %link.id, addr = %link.addr, error = %e, "cannot connect to a peer")
            }
            Err(_) => debug!(peer = %link.id, addr = %link.addr, "connecting to a peer timed out"),
        }
        tokio::select! {
            _ = sleep(backoff) => {}
            _ = closing.changed() => return,
        }
        backoff = (backoff * 2).min(net.reconnect_cap);
    }
}

/// Runs one outbound connection: the handshake, then election messages and
/// pings until the connection fails or the node closes.
async fn outbound(
    net: &Net,
    link: &PeerLink,
    stream: TcpStream,
    closing: &mut watch::Receiver<bool>,
    backoff: &mut Duration,
) -> Ended {
    // Election messages are tiny and latency-bound: never wait to coalesce them.
    let _ = stream.set_nodelay(true);
    let mut conn = Framed::new(stream, wire::codec());
    if let Err(reason) = handshake(net, link, &mut conn).await {
        return Ended::Failed(reason);
    }
    link.connected.store(true, Ordering::Relaxed);
    link.heard(&net.clock);
    *backoff = RECONNECT_MIN;
    info!(peer = %link.id, addr = %link.addr, "connected to peer");
    serve_outbound(net, link, conn, closing).await
}

/// Sends our hello and checks the peer's answer; `Err` holds the reason the
/// connection cannot be used (already logged and counted where it is the
/// peer's fault).
async fn handshake(net: &Net, link: &PeerLink, conn: &mut Conn) -> Result<(), String> {
    let hello = Frame::Hello {
        version: WIRE_VERSION,
        cluster_id: net.cluster_id.clone(),
        from: net.me,
        to: link.id,
        protocol: net.protocol,
    };
    conn.send(wire::encode(&hello)).await.map_err(|e| e.to_string())?;
    let reply = match timeout(HANDSHAKE_TIMEOUT, conn.next()).await {
        Err(_) => return Err("no handshake reply".into()),
        Ok(None) => return Err("closed during the handshake".into()),
        Ok(Some(Err(e))) => return Err(e.to_string()),
        Ok(Some(Ok(bytes))) => wire::decode(&bytes),
    };
    let addr = link.addr;
    let problem = match reply {
        Ok(Frame::HelloAck { version, cluster_id, node, protocol }) => {
            check_hello_ack(net, link, version, &cluster_id, node, protocol)
        }
        Ok(Frame::Reject { reason }) => {
            warn!(peer = %link.id, %addr, %reason, "peer refused our handshake");
            return Err(reason);
        }
        Ok(other) => Some(format!("unexpected handshake reply {other:?}")),
        Err(e) => Some(format!("bad handshake reply: {e}")),
    };
    match problem {
        Some(reason) => {
            net.reject(addr, &reason);
            Err(reason)
        }
        None => Ok(()),
    }
}

/// Checks the acceptor's hello acknowledgement; returns the reason to drop
/// the connection, if any. Pure, so the handshake can be fuzzed.
pub fn check_hello_ack(
    net: &Net,
    link: &PeerLink,
    version: u8,
    cluster_id: &str,
    node: NodeId,
    protocol: ProtocolKind,
) -> Option<String> {
    if version != WIRE_VERSION {
        Some(format!("peer speaks wire version {version}, we speak {WIRE_VERSION}"))
    } else if cluster_id != net.cluster_id {
        Some(format!("peer is in cluster {cluster_id:?}, we are in {:?}", net.cluster_id))
    } else if protocol != net.protocol {
        Some(format!(
            "peer runs the {protocol} protocol, we run {}; every node of a cluster \
             must use the same protocol",
            net.protocol
        ))
    } else if node != link.id {
        Some(format!("expected node {} at {} but node {node} answered", link.id, link.addr))
    } else {
        None
    }
}

/// The established connection: writes queued messages, pings every
/// [`Net::ping_interval`], reads the pongs, and closes in order when the node
/// closes.
async fn serve_outbound(
    net: &Net,
    link: &PeerLink,
    mut conn: Conn,
    closing: &mut watch::Receiver<bool>,
) -> Ended {
    // Pongs on this very connection (not inbound traffic from the peer, which
    // travels on its own connection and says nothing about ours).
    let mut last_pong = net.clock.now().as_nanos();
    let mut ping = tokio::time::interval(net.ping_interval);
    ping.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        // Whatever woke us, first write what is queued (queued while
        // disconnected, or a wake-up consumed by an earlier select).
        if let Err(e) = write_queued(net, link, &mut conn).await {
            return Ended::Failed(e.to_string());
        }
        let step = tokio::select! {
            _ = link.wake.notified() => Ok(()),
            _ = ping.tick() => send_ping(net, &mut conn, last_pong).await,
            frame = conn.next() => read_pong(net, link, frame, &mut last_pong),
            _ = closing.changed() => {
                let _ = write_queued(net, link, &mut conn).await;
                // Close our side (FIN) and wait for the peer to close its own,
                // so the last messages are not cut off by a reset.
                let _ = SinkExt::<Bytes>::close(&mut conn).await;
                let _ = timeout(CLOSE_LINGER, async { while conn.next().await.is_some() {} }).await;
                return Ended::Closing;
            }
        };
        if let Err(reason) = step {
            return Ended::Failed(reason);
        }
    }
}

/// Sends a ping, unless the peer left the last [`SILENT_PINGS`] unanswered:
/// then the connection is given up (the caller redials).
async fn send_ping(net: &Net, conn: &mut Conn, last_pong: u64) -> Result<(), String> {
    let silent_for = Duration::from_nanos(net.clock.now().as_nanos().saturating_sub(last_pong));
    if silent_for > net.ping_interval * SILENT_PINGS {
        return Err(format!(
            "no answer to {SILENT_PINGS} pings ({}ms); redialling",
            silent_for.as_millis()
        ));
    }
    let ping = Frame::Ping { nonce: net.clock.now().as_nanos() };
    conn.send(wire::encode(&ping)).await.map_err(|e| e.to_string())
}

/// Handles a frame read on an outbound connection: only pongs are expected.
fn read_pong(
    net: &Net,
    link: &PeerLink,
    frame: Option<std::io::Result<bytes::BytesMut>>,
    last_pong: &mut u64,
) -> Result<(), String> {
    let reason = match frame {
        None => return Err("closed by the peer".into()),
        Some(Err(e)) => e.to_string(),
        Some(Ok(bytes)) => match wire::decode(&bytes) {
            Ok(Frame::Pong { nonce }) => {
                link.heard(&net.clock);
                *last_pong = net.clock.now().as_nanos();
                let rtt = last_pong.saturating_sub(nonce);
                link.record_rtt(rtt as f64 / 1e6);
                return Ok(());
            }
            other => format!("unexpected frame from the acceptor: {other:?}"),
        },
    };
    net.reject(link.addr, &reason);
    Err(reason)
}

async fn write_queued(net: &Net, link: &PeerLink, conn: &mut Conn) -> std::io::Result<()> {
    let queued = link.take_queued();
    if queued.is_empty() {
        return Ok(());
    }
    let n = queued.len() as u64;
    for msg in queued {
        conn.feed(wire::encode(&Frame::Message(msg))).await?;
    }
    SinkExt::<Bytes>::flush(conn).await?;
    net.stats.sent.fetch_add(n, Ordering::Relaxed);
    Ok(())
}

async fn accept_loop(
    net: Arc<Net>,
    listener: TcpListener,
    inbound: mpsc::Sender<(NodeId, Message)>,
    mut closing: watch::Receiver<bool>,
) {
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            // Only `true` is ever sent (and a dropped sender means the same).
            _ = closing.changed() => {
                drop(listener);
                conns.shutdown().await;
                return;
            }
            accepted = listener.accept() => match accepted {
                Ok((stream, remote)) => {
                    if conns.len() >= MAX_INBOUND_CONNECTIONS {
                        net.reject(remote, "too many inbound connections");
                        continue;
                    }
                    conns.spawn(serve_inbound(net.clone(), stream, remote, inbound.clone()));
                }
                Err(e) => {
                    warn!(error = %e, "accepting a peer connection failed");
                    sleep(ACCEPT_ERROR_BACKOFF).await;
                }
            },
            Some(_) = conns.join_next() => {}
        }
    }
}

/// Checks a dialer's hello; returns the peer id or the reason to refuse it.
/// Pure, so the handshake can be fuzzed.
pub fn check_hello(net: &Net, frame: Result<Frame, wire::FrameError>) -> Result<NodeId, String> {
    match frame {
        Ok(Frame::Hello { version, cluster_id, from, to, protocol }) => {
            if version != WIRE_VERSION {
                Err(format!("unsupported wire version {version} (we speak {WIRE_VERSION})"))
            } else if cluster_id != net.cluster_id {
                Err(format!("cluster id {cluster_id:?} is not ours ({:?})", net.cluster_id))
            } else if protocol != net.protocol {
                Err(format!(
                    "node {from} runs the {protocol} protocol, this node runs {}; every node \
                     of a cluster must use the same protocol",
                    net.protocol
                ))
            } else if from == net.me {
                Err(format!("peer claims our own node id {from}"))
            } else if net.link(from).is_none() {
                Err(format!("node {from} is not a voter of this cluster"))
            } else if to != net.me {
                Err(format!("peer {from} meant to reach node {to}, but this is node {}", net.me))
            } else {
                Ok(from)
            }
        }
        Ok(other) => Err(format!("expected a hello, got {other:?}")),
        Err(e) => Err(format!("bad hello: {e}")),
    }
}

async fn serve_inbound(
    net: Arc<Net>,
    stream: TcpStream,
    remote: SocketAddr,
    inbound: mpsc::Sender<(NodeId, Message)>,
) {
    let _ = stream.set_nodelay(true);
    let mut conn = Framed::new(stream, wire::codec());
    let hello = match timeout(HANDSHAKE_TIMEOUT, conn.next()).await {
        Err(_) => return net.reject(remote, "no hello within the handshake timeout"),
        Ok(None) => return debug!(%remote, "peer closed before its hello"),
        Ok(Some(Err(e))) => return net.reject(remote, &format!("bad hello: {e}")),
        Ok(Some(Ok(bytes))) => wire::decode(&bytes),
    };
    let from = match check_hello(&net, hello) {
        Ok(from) => from,
        Err(reason) => {
            net.reject(remote, &reason);
            let _ = timeout(HANDSHAKE_TIMEOUT, conn.send(wire::encode(&Frame::Reject { reason })))
                .await;
            return;
        }
    };
    let Some(link) = net.link(from).cloned() else { return };
    let ack = Frame::HelloAck {
        version: WIRE_VERSION,
        cluster_id: net.cluster_id.clone(),
        node: net.me,
        protocol: net.protocol,
    };
    if conn.send(wire::encode(&ack)).await.is_err() {
        return;
    }
    debug!(peer = %from, %remote, "accepted a peer connection");
    while let Some(frame) = conn.next().await {
        let bytes: Bytes = match frame {
            Ok(b) => b.freeze(),
            Err(e) => return net.reject(remote, &format!("bad frame from peer {from}: {e}")),
        };
        match wire::decode(&bytes) {
            Ok(Frame::Message(msg)) => {
                link.heard(&net.clock);
                net.stats.received.fetch_add(1, Ordering::Relaxed);
                if inbound.send((from, msg)).await.is_err() {
                    return; // the driver stopped
                }
            }
            Ok(Frame::Ping { nonce }) => {
                link.heard(&net.clock);
                if conn.send(wire::encode(&Frame::Pong { nonce })).await.is_err() {
                    return;
                }
            }
            Ok(other) => {
                return net.reject(remote, &format!("unexpected frame from peer {from}: {other:?}"))
            }
            Err(e) => return net.reject(remote, &format!("bad frame from peer {from}: {e}")),
        }
    }
    debug!(peer = %from, %remote, "peer closed its connection");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconnect_cap_is_bounded() {
        assert_eq!(reconnect_cap(Duration::from_millis(200)), Duration::from_millis(50));
        assert_eq!(reconnect_cap(Duration::from_secs(10)), RECONNECT_MAX);
        assert_eq!(reconnect_cap(Duration::from_millis(8)), RECONNECT_MIN);
    }

    #[test]
    fn full_queue_drops_the_oldest() {
        let net = Arc::new(Net::new(
            "c".into(),
            NodeId(1),
            ProtocolKind::Raft,
            &[
                (NodeId(1), "127.0.0.1:1".parse().unwrap()),
                (NodeId(2), "127.0.0.1:2".parse().unwrap()),
            ],
            Clock::new(),
            Duration::from_millis(10),
            RECONNECT_MIN,
        ));
        let link = net.links[0].clone();
        for counter in 0..(PEER_QUEUE_CAPACITY as u64 + 5) {
            let msg = Message::Heartbeat { term: tenure_core::Term(1), counter, sent_at_nanos: 0 };
            assert_eq!(link.enqueue(msg), counter >= PEER_QUEUE_CAPACITY as u64);
        }
        let q = link.take_queued();
        assert_eq!(q.len(), PEER_QUEUE_CAPACITY);
        assert!(matches!(q.front(), Some(Message::Heartbeat { counter: 5, .. })));
    }
}
