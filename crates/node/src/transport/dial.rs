//! The dialer: one task per peer holding our outbound connection to it,
//! carrying our election messages and pings, redialled with a backoff.

use super::accept::{bad_api_address, cluster_mismatch, timings_mismatch};
use super::net::{Advertised, Net, PeerLink, HANDSHAKE_TIMEOUT};
use super::stream::{Conn, PeerStream};
use crate::spy::DeathNotice;
use crate::storage::MAX_INCARNATION;
use crate::tls::{explain_io, is_tls_error};
use crate::wire::{self, Frame, Timings, WIRE_VERSION};
use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tenure_core::{ConfigId, DirectoryId, NodeId, ProtocolKind};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tokio::time::{sleep, timeout, Instant, MissedTickBehavior};
use tokio_util::codec::Framed;
use tracing::{debug, info, warn};

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
/// On close, how long a dialer waits for the peer to close its side after ours.
const CLOSE_LINGER: Duration = Duration::from_millis(200);

/// The reconnect backoff cap for an election timeout: a quarter of it (so a
/// restarted peer is reached again well before anyone times out), at most
/// [`RECONNECT_MAX`], at least [`RECONNECT_MIN`].
pub fn reconnect_cap(election_timeout: Duration) -> Duration {
    (election_timeout / 4).clamp(RECONNECT_MIN, RECONNECT_MAX)
}

/// Why a dialer's connection ended.
enum Ended {
    /// The node is closing; the connection was flushed and closed.
    Closing,
    /// The connection failed or was refused.
    Failed(String),
}

pub(super) async fn dial_loop(
    net: Arc<Net>,
    link: Arc<PeerLink>,
    deaths: mpsc::Sender<DeathNotice>,
    mut closing: watch::Receiver<bool>,
) {
    let mut backoff = RECONNECT_MIN;
    // A hello shows the configuration this node counts by: a node with a
    // replicated log knows it once its log task gave it.
    tokio::select! {
        () = net.roster_known() => {}
        _ = closing.wait_for(|&c| c) => return,
    }
    loop {
        if *closing.borrow() {
            return;
        }
        if !net.link(link.id).is_some_and(|l| Arc::ptr_eq(&l, &link)) {
            // The peer left the configuration (or is dialled elsewhere now).
            return;
        }
        // The kernel retries a lost SYN only after a second: give up sooner and
        // redial on our own backoff, so a healed link is used again quickly.
        let connect_timeout = net.reconnect_cap.clamp(MIN_CONNECT_TIMEOUT, CONNECT_TIMEOUT);
        match timeout(connect_timeout, TcpStream::connect(link.addr)).await {
            Ok(Ok(stream)) => {
                link.refused.store(false, Ordering::Relaxed);
                let ended =
                    outbound(&net, &link, stream, &deaths, &mut closing, &mut backoff).await;
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
                let refused = e.kind() == std::io::ErrorKind::ConnectionRefused;
                link.refused.store(refused, Ordering::Relaxed);
                debug!(peer = %link.id, addr = %link.addr, error = %e, "cannot connect to a peer")
            }
            Err(_) => {
                link.refused.store(false, Ordering::Relaxed);
                debug!(peer = %link.id, addr = %link.addr, "connecting to a peer timed out")
            }
        }
        tokio::select! {
            _ = sleep(backoff) => {}
            _ = closing.changed() => return,
        }
        backoff = (backoff * 2).min(net.reconnect_cap);
    }
}

/// Runs one outbound connection: TLS and the handshake, then election
/// messages and pings until the connection fails or the node closes.
async fn outbound(
    net: &Net,
    link: &PeerLink,
    stream: TcpStream,
    deaths: &mpsc::Sender<DeathNotice>,
    closing: &mut watch::Receiver<bool>,
    backoff: &mut Duration,
) -> Ended {
    // Election messages are tiny and latency-bound: never wait to coalesce them.
    let _ = stream.set_nodelay(true);
    let stream = match secure(net, link, stream).await {
        Ok(stream) => stream,
        Err(reason) => {
            link.handshake_failed(&reason);
            return Ended::Failed(reason);
        }
    };
    let mut conn = Framed::new(stream, wire::codec());
    let incarnation = match handshake(net, link, &mut conn).await {
        Ok(incarnation) => incarnation,
        Err(reason) => return Ended::Failed(reason),
    };
    net.learned_incarnation(link, incarnation, deaths);
    // The peer proved who it is: the replicated log's larger frames may pass.
    conn.codec_mut().set_max_frame_length(wire::MAX_DATA_FRAME_LEN);
    link.connected.store(true, Ordering::Relaxed);
    link.heard(&net.clock);
    *backoff = RECONNECT_MIN;
    info!(peer = %link.id, addr = %link.addr, tls = net.tls.is_some(), "connected to peer");
    serve_outbound(net, link, conn, closing).await
}

/// The TLS handshake as a client presenting our certificate and expecting
/// the peer's to name it (or the plain stream in the insecure mode).
async fn secure(net: &Net, link: &PeerLink, tcp: TcpStream) -> Result<PeerStream, String> {
    let Some(tls) = &net.tls else { return Ok(PeerStream::Plain(tcp)) };
    let connect = tls.peer_connector().connect(tls.peer_server_name(link.id), tcp);
    match timeout(HANDSHAKE_TIMEOUT, connect).await {
        Ok(Ok(stream)) => Ok(PeerStream::Tls(Box::new(stream.into()))),
        Ok(Err(e)) => {
            let reason = format!("TLS handshake with node {} failed: {}", link.id, explain_io(&e));
            // A refused certificate, or a peer that closes at once (one
            // without TLS does): a configuration problem worth a warning. A
            // reset is the network's or a restarting peer's: debug only.
            if is_tls_error(&e) || e.kind() == std::io::ErrorKind::UnexpectedEof {
                net.reject(link.addr, &reason);
            }
            Err(reason)
        }
        Err(_) => Err("no TLS handshake within the handshake timeout".into()),
    }
}

/// Sends our hello and checks the peer's answer; returns the peer's
/// incarnation, or the reason the connection cannot be used (already logged
/// and counted where it is the peer's fault).
async fn handshake(net: &Net, link: &PeerLink, conn: &mut Conn) -> Result<u64, String> {
    let reply = exchange_hellos(net, link, conn).await?;
    let addr = link.addr;
    let (problem, incarnation, advertised, directory) = match reply {
        Ok(ref frame @ Frame::HelloAck { .. }) => {
            let ack = HelloAck::of(frame).expect("a hello acknowledgement");
            let problem = check_hello_ack(net, link, &ack);
            let advertised = Advertised {
                api: ack.api_address.map(str::to_string),
                etcd: ack.etcd_address.map(str::to_string),
            };
            (problem, ack.incarnation, advertised, ack.directory)
        }
        Ok(Frame::Reject { reason }) => {
            warn!(peer = %link.id, %addr, %reason, "peer refused our handshake");
            link.handshake_failed(&format!("node {} refused our handshake: {reason}", link.id));
            return Err(reason);
        }
        Ok(Frame::Removed { config, voters, reason }) => {
            let counted = net.note_removed(link.id, config, voters);
            let reason = if counted {
                format!("{reason}: this node was removed from the cluster, and its log does not know it")
            } else {
                reason
            };
            warn!(peer = %link.id, %addr, %reason, "peer refused our handshake");
            link.handshake_failed(&format!("node {} refused our handshake: {reason}", link.id));
            return Err(reason);
        }
        Ok(other) => {
            let problem = format!("unexpected handshake reply {other:?}");
            (Some(problem), 0, Advertised::default(), DirectoryId(0))
        }
        Err(e) => {
            (Some(format!("bad handshake reply: {e}")), 0, Advertised::default(), DirectoryId(0))
        }
    };
    match problem {
        Some(reason) => {
            net.reject(addr, &reason);
            link.handshake_failed(&format!("this node refused its handshake: {reason}"));
            Err(reason)
        }
        None => {
            link.handshake_accepted(advertised, directory);
            net.note_accepted(link.id);
            Ok(incarnation)
        }
    }
}

/// Sends our hello to `link`'s node and reads its answer (undecoded where
/// it is not a frame); `Err` where none came.
async fn exchange_hellos(
    net: &Net,
    link: &PeerLink,
    conn: &mut Conn,
) -> Result<Result<Frame, wire::FrameError>, String> {
    let roster = net.roster();
    let hello = Frame::Hello {
        version: WIRE_VERSION,
        cluster_id: net.cluster_id.clone(),
        from: net.me,
        to: link.id,
        protocol: net.protocol,
        incarnation: net.incarnation,
        voters: roster.voters,
        config: roster.config,
        api_address: net.api_address.clone(),
        directory: net.directory,
        peer_address: net.peer_address.clone(),
        etcd_address: net.etcd_address.clone(),
        timings: net.timings,
    };
    conn.send(wire::encode(&hello)).await.map_err(|e| e.to_string())?;
    match timeout(HANDSHAKE_TIMEOUT, conn.next()).await {
        Err(_) => Err("no handshake reply".into()),
        Ok(None) => Err("closed during the handshake".into()),
        Ok(Some(Err(e))) if is_tls_error(&e) => {
            // TLS 1.3: the acceptor checks our certificate after our side of
            // the handshake ended, so its refusal arrives here.
            let reason = format!("node {} refused the TLS connection: {}", link.id, explain_io(&e));
            net.reject(link.addr, &reason);
            Err(reason)
        }
        Ok(Some(Err(e))) => Err(e.to_string()),
        Ok(Some(Ok(bytes))) => Ok(wire::decode(&bytes)),
    }
}

/// Dials node `id` at `addr` as its link would once it is a member, and
/// returns once it answered the handshake there as the links would accept
/// it, and with `directory` where one is given; `Err` says what the dial
/// found instead. None of this node's links changes (a refused TLS
/// handshake is logged and counted as any other), and the connection is
/// closed: for the leader, before it adds a node that asks
/// to be added at `addr` (a typo in its address would leave the cluster
/// with a learner it can never reach).
pub async fn probe(
    net: &Net,
    id: NodeId,
    addr: SocketAddr,
    directory: Option<DirectoryId>,
) -> Result<(), String> {
    let link = PeerLink::new(id, addr);
    let tcp = match timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
        Err(_) => return Err(format!("no TCP connection within {CONNECT_TIMEOUT:?}")),
        Ok(Err(e)) => return Err(explain_io(&e)),
        Ok(Ok(tcp)) => tcp,
    };
    let stream = secure(net, &link, tcp).await?;
    let mut conn = Framed::new(stream, wire::codec());
    match exchange_hellos(net, &link, &mut conn).await? {
        Ok(ref frame @ Frame::HelloAck { .. }) => {
            let ack = HelloAck::of(frame).expect("a hello acknowledgement");
            let theirs = ack.directory;
            // Not the checks that compare configurations: the node is no
            // member yet, and its link is checked in full once it is.
            if let Some(problem) = identity_problem(net, &link, &ack) {
                return Err(problem);
            }
            match directory {
                Some(d) if d != theirs => Err(format!(
                    "node {id} answered with data directory {theirs}, not {d}: another \
                     process of node {id} listens there"
                )),
                _ => Ok(()),
            }
        }
        Ok(Frame::Reject { reason } | Frame::Removed { reason, .. }) => {
            Err(format!("node {id} refused the handshake: {reason}"))
        }
        Ok(other) => Err(format!("unexpected handshake reply {other:?}")),
        Err(e) => Err(format!("bad handshake reply: {e}")),
    }
}

/// The fields of an acceptor's [`Frame::HelloAck`], borrowed.
#[derive(Clone, Copy, Debug)]
pub struct HelloAck<'a> {
    /// Its wire version.
    pub version: u8,
    /// Its cluster.
    pub cluster_id: &'a str,
    /// The acceptor.
    pub node: NodeId,
    /// Its election protocol.
    pub protocol: ProtocolKind,
    /// Its incarnation.
    pub incarnation: u64,
    /// The voters it counts its majorities over.
    pub voters: &'a [NodeId],
    /// Where its configuration was written.
    pub config: ConfigId,
    /// Where its API answers.
    pub api_address: Option<&'a str>,
    /// Its data-directory identity.
    pub directory: DirectoryId,
    /// Where its etcd API answers.
    pub etcd_address: Option<&'a str>,
    /// Its election timings.
    pub timings: Timings,
}

impl<'a> HelloAck<'a> {
    /// The fields of `frame`, if it is a [`Frame::HelloAck`].
    pub fn of(frame: &'a Frame) -> Option<HelloAck<'a>> {
        let Frame::HelloAck {
            version,
            cluster_id,
            node,
            protocol,
            incarnation,
            voters,
            config,
            api_address,
            directory,
            etcd_address,
            timings,
        } = frame
        else {
            return None;
        };
        Some(HelloAck {
            version: *version,
            cluster_id,
            node: *node,
            protocol: *protocol,
            incarnation: *incarnation,
            voters,
            config: *config,
            api_address: api_address.as_deref(),
            directory: *directory,
            etcd_address: etcd_address.as_deref(),
            timings: *timings,
        })
    }
}

/// Checks the acceptor's hello acknowledgement; returns the reason to drop
/// the connection, if any. Pure, so the handshake can be fuzzed.
pub fn check_hello_ack(net: &Net, link: &PeerLink, ack: &HelloAck<'_>) -> Option<String> {
    let &HelloAck { node, voters, config, api_address, directory, etcd_address, .. } = ack;
    if let Some(why) = identity_problem(net, link, ack) {
        Some(why)
    } else if let Some(why) = net.voter_mismatch(node, voters, config) {
        Some(why)
    } else if directory == DirectoryId(0) {
        Some(format!("node {node} shows data-directory identity 0"))
    } else if let Some(why) = net.directory_mismatch(node, directory, config) {
        Some(why)
    } else {
        bad_api_address(node, "API", api_address)
            .or_else(|| bad_api_address(node, "etcd API", etcd_address))
    }
}

/// Whether the acceptor is the node `link` dials, of this cluster and
/// protocol, at this wire version, in a sane incarnation: the checks of
/// [`check_hello_ack`] that do not depend on the configurations either side
/// holds.
fn identity_problem(net: &Net, link: &PeerLink, ack: &HelloAck<'_>) -> Option<String> {
    let &HelloAck { version, cluster_id, node, protocol, incarnation, timings, .. } = ack;
    if version != WIRE_VERSION {
        Some(format!("peer speaks wire version {version}, we speak {WIRE_VERSION}"))
    } else if cluster_id != net.cluster_id {
        Some(cluster_mismatch(node, cluster_id, net))
    } else if protocol != net.protocol {
        Some(format!(
            "peer runs the {protocol} protocol, we run {}; every node of a cluster \
             must use the same protocol",
            net.protocol
        ))
    } else if timings != net.timings {
        Some(timings_mismatch(node, timings, net))
    } else if node != link.id {
        Some(format!("expected node {} at {} but node {node} answered", link.id, link.addr))
    } else if !(1..=MAX_INCARNATION).contains(&incarnation) {
        Some(format!("node {node} shows incarnation {incarnation}, outside 1..={MAX_INCARNATION}"))
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
    let mut last_tick = Instant::now();
    loop {
        // Whatever woke us, first write what is queued (queued while
        // disconnected, or a wake-up consumed by an earlier select).
        if let Err(e) = write_queued(net, link, &mut conn).await {
            return Ended::Failed(e.to_string());
        }
        let step = tokio::select! {
            _ = link.wake.notified() => Ok(()),
            _ = ping.tick() => {
                // A tick this late means this process stalled (SIGSTOP, a
                // paused VM, a scheduling gap): the silence was ours, not the
                // peer's, so the peer gets a fresh allowance of pings.
                let now = Instant::now();
                if now.saturating_duration_since(last_tick) > net.ping_interval * 2 {
                    last_pong = net.clock.now().as_nanos();
                }
                last_tick = now;
                send_ping(net, &mut conn, last_pong).await
            }
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
        // A TLS peer that went away without a close_notify (crashed).
        Some(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            return Err("closed by the peer".into())
        }
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

/// Writes the queued election messages, then the queued replicated-log
/// frames (election messages first: they are small and time-critical).
async fn write_queued(net: &Net, link: &PeerLink, conn: &mut Conn) -> std::io::Result<()> {
    let queued = link.take_queued();
    let data = link.take_queued_data();
    if queued.is_empty() && data.is_empty() {
        return Ok(());
    }
    let (n, d) = (queued.len() as u64, data.len() as u64);
    for msg in queued {
        conn.feed(wire::encode(&Frame::Message(msg))).await?;
    }
    for frame in data {
        conn.feed(wire::encode(&frame)).await?;
    }
    SinkExt::<Bytes>::flush(conn).await?;
    net.stats.sent.fetch_add(n, Ordering::Relaxed);
    net.stats.data_sent.fetch_add(d, Ordering::Relaxed);
    Ok(())
}
