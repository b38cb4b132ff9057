//! The accept loop and inbound connections: admission (TLS, the hello, the
//! certificate's id), the limits on slots, and serving an authenticated peer.
//!
//! Slots: a connection is *pending* from its accept until its handshake is
//! done (TLS handshake, hello checked, the certificate naming the claimed
//! node), at most [`HANDSHAKE_TIMEOUT`]. At most [`MAX_PENDING_HANDSHAKES`]
//! are pending at once; one more takes the slot of the oldest, which is closed
//! — so silent strangers cannot keep a configured peer out: its handshake
//! takes a round trip or two, theirs never ends. An authenticated connection
//! holds the one slot of its peer: each configured peer has exactly one live
//! inbound connection, and a newer one replaces the older (a peer that
//! redials after a partition is not kept out by its own stale connection).
//! A live connection that carries no frame, not even a ping, for
//! [`PEER_IDLE_PINGS`] ping intervals is closed.

use super::inbound::{Inbound, PeerData};
use super::net::{show_voters, Advertised, Net, PeerLink, HANDSHAKE_TIMEOUT};
use super::reject_log::REJECT_LOG_INTERVAL;
use super::stream::{Conn, PeerStream, TLS_HANDSHAKE_RECORD};
use crate::storage::MAX_INCARNATION;
use crate::sync::lock;
use crate::tls::explain_io;
use crate::wire::{self, Frame, Timings, WIRE_VERSION};
use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tenure_core::{ConfigId, DirectoryId, NodeId};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify};
use tokio::task::{AbortHandle, JoinSet};
use tokio::time::{sleep, sleep_until, timeout, Instant, MissedTickBehavior};
use tokio_util::codec::Framed;
use tracing::{debug, info, warn};

/// Inbound connections in their handshake at once; one more closes the
/// oldest. A handshake between nodes takes a few round trips, so 16 leaves
/// room for every peer of the largest cluster (15 voters) to redial at once.
pub const MAX_PENDING_HANDSHAKES: usize = 16;
/// An authenticated inbound connection that carries no frame for this many
/// ping intervals (the dialer pings every heartbeat interval) is closed: its
/// dialer is gone or cut off, and will redial.
pub const PEER_IDLE_PINGS: u32 = 8;
/// Pause after a failed `accept` (e.g. out of file descriptors).
const ACCEPT_ERROR_BACKOFF: Duration = Duration::from_millis(50);
/// A hello of node X in another incarnation than that of X's live
/// connection, while that connection carried a frame within this many ping
/// intervals (at least [`DUPLICATE_ID_MIN_WINDOW`]), comes from a second
/// process claiming X (a duplicate node id), not from a restart: a process
/// that exits or is killed has its connections closed by its kernel at
/// once, and one that hangs or is cut off falls silent.
pub const DUPLICATE_ID_PINGS: u32 = 2;
/// The shortest window of [`DUPLICATE_ID_PINGS`], whatever the ping
/// interval: a busy machine may delay a live peer's ping by more than two
/// short intervals.
pub const DUPLICATE_ID_MIN_WINDOW: Duration = Duration::from_millis(500);

/// Inbound connections by state.
#[derive(Default)]
struct Slots {
    /// The next connection's number.
    next: u64,
    /// Connections in their handshake, oldest first.
    pending: VecDeque<(u64, SocketAddr, AbortHandle)>,
    /// Each authenticated peer's live connection.
    live: HashMap<NodeId, LiveConn>,
}

/// A peer's live inbound connection.
struct LiveConn {
    /// The connection's number.
    n: u64,
    /// Closes it (a newer connection of the peer replaces it).
    replaced: Arc<Notify>,
    /// The incarnation its hello showed.
    incarnation: u64,
    /// Where it comes from.
    remote: SocketAddr,
    /// Core-clock nanos of its last frame.
    last_frame: Arc<AtomicU64>,
}

type SharedSlots = Arc<Mutex<Slots>>;

pub(super) async fn accept_loop(
    net: Arc<Net>,
    listener: TcpListener,
    inbound: Inbound,
    mut closing: watch::Receiver<bool>,
) {
    let slots = SharedSlots::default();
    let mut conns = JoinSet::new();
    let mut summaries = tokio::time::interval(REJECT_LOG_INTERVAL);
    summaries.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            // Only `true` is ever sent (and a dropped sender means the same).
            _ = closing.changed() => {
                drop(listener);
                conns.shutdown().await;
                net.flush_rejects(true);
                return;
            }
            _ = summaries.tick() => net.flush_rejects(false),
            accepted = listener.accept() => match accepted {
                Ok((stream, remote)) => {
                    let (to_net, to_driver) = (net.clone(), inbound.clone());
                    let in_slots = slots.clone();
                    let closed = closing.clone();
                    let task =
                        |n| serve_inbound(to_net, stream, remote, to_driver, in_slots, n, closed);
                    admit_pending(&net, &slots, &mut conns, remote, task);
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

/// Spawns an accepted connection's task (`task(n)` for connection number
/// `n`) in a pending slot, closing the oldest pending one if none is free.
fn admit_pending<F>(
    net: &Net,
    slots: &SharedSlots,
    conns: &mut JoinSet<()>,
    remote: SocketAddr,
    task: impl FnOnce(u64) -> F,
) where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let mut s = lock(slots);
    if s.pending.len() >= MAX_PENDING_HANDSHAKES {
        if let Some((_, oldest, handle)) = s.pending.pop_front() {
            handle.abort();
            net.reject(
                oldest,
                "handshake unfinished when every handshake slot was taken; closed to admit a \
                 newer connection",
            );
        }
    }
    let n = s.next;
    s.next += 1;
    // Spawned under the lock: the task's own removal from `pending` waits
    // until it is listed there.
    let handle = conns.spawn(task(n));
    s.pending.push_back((n, remote, handle));
}

/// Leaves the pending slots when the handshake ends, however it ends.
struct Pending<'a> {
    slots: &'a SharedSlots,
    n: u64,
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        lock(self.slots).pending.retain(|(n, _, _)| *n != self.n);
    }
}

/// Holds a peer's live slot; frees it on drop unless a newer connection took it.
struct Live {
    slots: SharedSlots,
    peer: NodeId,
    n: u64,
}

impl Live {
    /// Takes the slot of the peer of `hello` for connection `n` from
    /// `remote`, closing the older connection there; returns the guard,
    /// what closes this one in turn, and where to note its frames' times.
    fn take(
        net: &Net,
        slots: &SharedSlots,
        hello: &Hello,
        remote: SocketAddr,
        n: u64,
    ) -> (Live, Arc<Notify>, Arc<AtomicU64>) {
        let replaced = Arc::new(Notify::new());
        let last_frame = Arc::new(AtomicU64::new(net.clock.now().as_nanos()));
        let conn = LiveConn {
            n,
            replaced: replaced.clone(),
            incarnation: hello.incarnation,
            remote,
            last_frame: last_frame.clone(),
        };
        if let Some(older) = lock(slots).live.insert(hello.from, conn) {
            older.replaced.notify_one();
        }
        (Live { slots: slots.clone(), peer: hello.from, n }, replaced, last_frame)
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        let mut s = lock(&self.slots);
        if s.live.get(&self.peer).is_some_and(|c| c.n == self.n) {
            s.live.remove(&self.peer);
        }
    }
}

/// Whether `hello`, from `remote`, comes from a second process claiming the
/// node of a live connection (see [`DUPLICATE_ID_PINGS`]): the reason to
/// refuse it, naming both.
fn duplicate_id(
    net: &Net,
    slots: &SharedSlots,
    hello: &Hello,
    remote: SocketAddr,
) -> Option<String> {
    let s = lock(slots);
    let live = s.live.get(&hello.from)?;
    let silent = net.clock.now().as_nanos().saturating_sub(live.last_frame.load(Ordering::Relaxed));
    let window = (net.ping_interval * DUPLICATE_ID_PINGS).max(DUPLICATE_ID_MIN_WINDOW);
    let fresh = Duration::from_nanos(silent) <= window;
    (live.incarnation != hello.incarnation && fresh).then(|| {
        format!(
            "two processes claim node id {from}: one is connected from {} in incarnation {} \
             (its last frame {} ms ago), and this connection from {remote} shows incarnation \
             {}: a duplicate node id, not a restart. Each node needs its own id: stop the \
             process that is not node {from}, or give it its own --id (and data directory)",
            live.remote,
            live.incarnation,
            silent / 1_000_000,
            hello.incarnation,
            from = hello.from,
        )
    })
}

/// One inbound connection: admission within [`HANDSHAKE_TIMEOUT`], then the
/// peer's messages until it closes, goes idle or is replaced.
async fn serve_inbound(
    net: Arc<Net>,
    stream: TcpStream,
    remote: SocketAddr,
    inbound: Inbound,
    slots: SharedSlots,
    n: u64,
    closing: watch::Receiver<bool>,
) {
    let admitted = {
        let _pending = Pending { slots: &slots, n };
        match timeout(HANDSHAKE_TIMEOUT, admit(&net, &slots, stream, remote)).await {
            Err(_) => return net.reject(remote, "no handshake within the handshake timeout"),
            Ok(admitted) => admitted,
        }
    };
    let Some((mut conn, hello)) = admitted else { return };
    let (from, incarnation) = (hello.from, hello.incarnation);
    // The peer proved who it is: the replicated log's larger frames may pass.
    conn.codec_mut().set_max_frame_length(wire::MAX_DATA_FRAME_LEN);
    if let Some(at) = hello.guest_at.filter(|_| net.link(from).is_none()) {
        // A node this node's configuration does not name yet, ahead of it
        // (see `Hello::guest_at`): a link (this connection's frames need
        // one) and a dialer (to answer it), while this connection lasts or
        // until a configuration names it.
        let at =
            if at.ip().is_unspecified() { SocketAddr::new(remote.ip(), at.port()) } else { at };
        info!(peer = %from, %at, "a node this node's configuration does not name yet: heard as a guest");
        let link = Arc::new(PeerLink::guest(from, at));
        net.add_link(link.clone());
        let dialer = super::dial::dial_loop(net.clone(), link, inbound.deaths.clone(), closing);
        tokio::spawn(dialer);
    }
    if let Some(link) = net.link(from) {
        // Before any frame of the new incarnation is read: the driver learns
        // of the old one's death before it hears the new one.
        net.learned_incarnation(&link, incarnation, &inbound.deaths);
        link.handshake_accepted(hello.advertised.clone(), hello.directory);
    }
    let (_live, replaced, last_frame) = Live::take(&net, &slots, &hello, remote, n);
    serve_peer(&net, conn, from, remote, inbound, &replaced, &last_frame).await;
}

/// TLS (or, in the insecure mode, none), the hello, for TLS the certificate
/// naming the claimed node, and no live connection of another process
/// claiming that node; `None` if refused (logged, and noted on the claimed
/// peer's link).
async fn admit(
    net: &Net,
    slots: &SharedSlots,
    tcp: TcpStream,
    remote: SocketAddr,
) -> Option<(Conn, Hello)> {
    let _ = tcp.set_nodelay(true);
    let mut first = [0u8; 1];
    match tcp.peek(&mut first).await {
        Ok(1..) => {}
        Ok(0) | Err(_) => {
            debug!(%remote, "peer closed before its hello");
            return None;
        }
    }
    let speaks_tls = first[0] == TLS_HANDSHAKE_RECORD;
    let stream = match (&net.tls, speaks_tls) {
        (Some(tls), true) => match tls.peer_acceptor().accept(tcp).await {
            Ok(stream) => PeerStream::Tls(Box::new(stream.into())),
            Err(e) => {
                net.reject(remote, &format!("TLS handshake failed: {}", explain_io(&e)));
                return None;
            }
        },
        (Some(_), false) => {
            let reason = "this node requires TLS on peer connections and the peer connected \
                          without it (does it run with insecure_no_tls?); every node of a \
                          cluster must use TLS, or none";
            refuse(net, Framed::new(PeerStream::Plain(tcp), wire::codec()), remote, reason).await;
            return None;
        }
        (None, true) => {
            // No answer: a TLS client could not read ours.
            net.reject(
                remote,
                "the peer speaks TLS but this node runs without TLS (insecure_no_tls); every \
                 node of a cluster must use TLS, or none",
            );
            return None;
        }
        (None, false) => PeerStream::Plain(tcp),
    };
    let mut conn = Framed::new(stream, wire::codec());
    let hello = match conn.next().await {
        None => {
            debug!(%remote, "peer closed before its hello");
            return None;
        }
        Some(Err(e)) => {
            net.reject(remote, &format!("bad hello: {e}"));
            return None;
        }
        Some(Ok(bytes)) => wire::decode(&bytes),
    };
    // Only a peer whose certificate names the node it claims marks that
    // node's link with why it was refused: a holder of another certificate
    // of the CA (another cluster's node, an application's from `tenure cert
    // --clients`) cannot write what `tenure status` and the dashboard show
    // for a node it is not.
    // Whether the certificate names the node the hello claims, checked once.
    let certified = match &hello {
        Ok(Frame::Hello { from, .. }) => check_certificate(net, &conn, *from),
        _ => Err("no hello".into()),
    };
    let claimed = certified.as_ref().ok().and_then(|&from| net.link(from));
    let removed = removed_member(net, &hello);
    let checked = check_hello(net, hello)
        .and_then(|h| match removed {
            // A departing member (the last change removed it) passes the
            // checks, but it is no more a member than a stranger.
            Some(from) => Err(format!("node {from} {NOT_A_MEMBER} (removed)")),
            None => Ok(h),
        })
        .and_then(|h| certified.clone().map(|_| h))
        .and_then(|h| duplicate_id(net, slots, &h, remote).map_or(Ok(h), Err));
    let hello = match checked {
        Ok(hello) => hello,
        Err(reason) => {
            if let Some(link) = claimed {
                link.handshake_failed(&format!("this node refused its handshake: {reason}"));
            }
            // A member removed while it was away is told so, once its
            // certificate shows it is the node it claims to be.
            let removed = removed.filter(|_| reason.contains(NOT_A_MEMBER) && certified.is_ok());
            if let Some(from) = removed {
                let roster = net.roster();
                let reason = format!(
                    "node {from} {NOT_A_MEMBER}: configuration {} (voters {}) no longer names it",
                    roster.config,
                    show_voters(&roster.voters)
                );
                net.reject(remote, &reason);
                let frame = Frame::Removed { config: roster.config, voters: roster.voters, reason };
                let _ = conn.send(wire::encode(&frame)).await;
                return None;
            }
            refuse(net, conn, remote, &reason).await;
            return None;
        }
    };
    let roster = net.roster();
    let ack = Frame::HelloAck {
        version: WIRE_VERSION,
        cluster_id: net.cluster_id.clone(),
        node: net.me,
        protocol: net.protocol,
        incarnation: net.incarnation,
        voters: roster.voters,
        config: roster.config,
        api_address: net.api_address.clone(),
        directory: net.directory,
        etcd_address: net.etcd_address.clone(),
        timings: net.timings,
    };
    conn.send(wire::encode(&ack)).await.ok()?;
    debug!(peer = %hello.from, incarnation = hello.incarnation, %remote, "accepted a peer connection");
    Some((conn, hello))
}

/// A dialer's hello that passed [`check_hello`]: who is calling, in which
/// incarnation, and where its API answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    /// The dialer.
    pub from: NodeId,
    /// Its incarnation.
    pub incarnation: u64,
    /// Where its API and etcd API answer, as it advertised them.
    pub advertised: Advertised,
    /// Its data-directory identity.
    pub directory: DirectoryId,
    /// Where to dial it back, when it is no member of this node's
    /// configuration and was admitted as a guest: its configuration is
    /// newer than this node's (this node's log lags behind the change that
    /// added it, or this node just joined), so it may be the leader this
    /// node must follow to catch up. An unspecified IP stands for the IP
    /// the connection comes from.
    pub guest_at: Option<SocketAddr>,
}

/// Where to dial back node `from`, whose hello shows configuration `config`
/// and peer address `advertised`, if it is no member of this node's
/// configuration but may be admitted as a guest: its configuration is
/// newer than this node's, and it says where it listens (an IP and a port).
/// A node whose configuration is not newer (a removed node, one never
/// added) is not a guest. With TLS its certificate must still name it.
fn guest_address(
    net: &Net,
    from: NodeId,
    config: tenure_core::ConfigId,
    advertised: Option<&str>,
) -> Option<SocketAddr> {
    if net.link(from).is_some() || config <= net.roster().config {
        return None;
    }
    advertised?.parse::<SocketAddr>().ok().filter(|a| a.port() != 0)
}

/// What a node refusing the handshake of a node its configuration does not
/// name says, once that node's certificate, cluster id and protocol have
/// passed: a node about to join can tell that its setup suits the cluster
/// before it asks to be added (`tenure server --join`).
pub const NOT_A_MEMBER: &str = "is not a member of this cluster";

/// The dialer of `hello`, if it is a member (a voter or a learner) removed
/// while it was away: this node's configuration names it no more (it is no
/// link of this node's, or the departing member of the last change), and
/// its hello shows an older configuration of the log. Neither is a node
/// that joins (its hello shows the bootstrap list), nor a guest (a newer
/// configuration), nor a leader committing its own removal (its hello
/// shows that newer configuration, without itself), nor a node of a build
/// before `Frame::Removed` (a joiner of which shows the bootstrap list with
/// itself). The dialer decides whether it counts ([`Net::note_removed`]:
/// only if its own configuration names it). Pure, as [`check_hello`].
pub(super) fn removed_member(net: &Net, hello: &Result<Frame, wire::FrameError>) -> Option<NodeId> {
    let Ok(Frame::Hello { from, config, .. }) = hello else { return None };
    let roster = net.roster();
    let named = roster.voters.contains(from) || roster.learners.contains(from);
    let older = *config != ConfigId::BOOTSTRAP && *config < roster.config;
    (*from != net.me && !named && older).then_some(*from)
}

/// Logs and counts a refusal, and tells the dialer why.
async fn refuse(net: &Net, mut conn: Conn, remote: SocketAddr, reason: &str) {
    net.reject(remote, reason);
    let _ = conn.send(wire::encode(&Frame::Reject { reason: reason.to_string() })).await;
}

/// Checks a dialer's hello; returns who is calling or the reason to refuse
/// it. Pure, so the handshake can be fuzzed.
pub fn check_hello(net: &Net, frame: Result<Frame, wire::FrameError>) -> Result<Hello, String> {
    match frame {
        Ok(Frame::Hello {
            version,
            cluster_id,
            from,
            to,
            protocol,
            incarnation,
            voters,
            config,
            api_address,
            directory,
            peer_address,
            etcd_address,
            timings,
        }) => {
            let guest_at = guest_address(net, from, config, peer_address.as_deref());
            if version != WIRE_VERSION {
                Err(format!("unsupported wire version {version} (we speak {WIRE_VERSION})"))
            } else if cluster_id != net.cluster_id {
                Err(cluster_mismatch(from, &cluster_id, net))
            } else if protocol != net.protocol {
                Err(format!(
                    "node {from} runs the {protocol} protocol, this node runs {}; every node \
                     of a cluster must use the same protocol",
                    net.protocol
                ))
            } else if timings != net.timings {
                Err(timings_mismatch(from, timings, net))
            } else if from == net.me {
                Err(format!(
                    "peer claims our own node id {from}: two nodes run with id {from} (a \
                     duplicate node id); give each node its own --id"
                ))
            } else if net.link(from).is_none() && guest_at.is_none() {
                let why = net
                    .voter_mismatch(from, &voters, config)
                    .filter(|_| voters != net.roster().voters)
                    .map_or(String::new(), |why| format!(": {why}"));
                Err(format!(
                    "node {from} {NOT_A_MEMBER} (never added, not added yet, or removed: \
                     `tenure member list` shows the members){why}"
                ))
            } else if let Some(why) = net.voter_mismatch(from, &voters, config) {
                Err(why)
            } else if to != net.me {
                Err(format!("peer {from} meant to reach node {to}, but this is node {}", net.me))
            } else if !(1..=MAX_INCARNATION).contains(&incarnation) {
                Err(format!(
                    "peer {from} shows incarnation {incarnation}, outside 1..={MAX_INCARNATION}"
                ))
            } else if let Some(why) = bad_api_address(from, "API", api_address.as_deref()) {
                Err(why)
            } else if let Some(why) = bad_api_address(from, "etcd API", etcd_address.as_deref()) {
                Err(why)
            } else if directory == DirectoryId(0) {
                Err(format!("peer {from} shows data-directory identity 0"))
            } else if let Some(why) = net.directory_mismatch(from, directory, config) {
                Err(why)
            } else {
                let advertised = Advertised { api: api_address, etcd: etcd_address };
                Ok(Hello { from, incarnation, advertised, directory, guest_at })
            }
        }
        Ok(other) => Err(format!("expected a hello, got {other:?}")),
        Err(e) => Err(format!("bad hello: {e}")),
    }
}

/// Why a peer's cluster id `theirs` is refused, and the fix: the same
/// `--cluster-id` on every node (the certificates name it too, so with TLS
/// a mismatch usually shows earlier, as a certificate naming another node).
pub(super) fn cluster_mismatch(peer: NodeId, theirs: &str, net: &Net) -> String {
    format!(
        "node {peer} runs in cluster {theirs:?}, this node in {:?}: every node of a cluster \
         must run with the same --cluster-id (cluster_id in the config file); restart the \
         node whose cluster id is wrong with the right one",
        net.cluster_id
    )
}

/// Why a peer running with election timings `theirs` is refused, and the
/// fix: the same timings on every node ([`crate::wire::Timings`]).
pub(super) fn timings_mismatch(peer: NodeId, theirs: Timings, net: &Net) -> String {
    format!(
        "node {peer} runs with {theirs}, node {} with {}: every node of a cluster must run \
         with the same --election-timeout-ms, --heartbeat-ms and --round-trip-ms \
         (election_timeout_ms, heartbeat_ms, round_trip_ms in the config file), since a \
         leader's lease counts on every voter waiting as long as it does; restart the node \
         whose timings are wrong with the cluster's",
        net.me, net.timings
    )
}

/// Why the advertised address of a service (`what`: "API", "etcd API") is
/// refused, if it is: empty, or longer than [`wire::MAX_API_ADDRESS_LEN`].
pub(super) fn bad_api_address(peer: NodeId, what: &str, address: Option<&str>) -> Option<String> {
    let a = address?;
    (a.is_empty() || a.len() > wire::MAX_API_ADDRESS_LEN).then(|| {
        format!(
            "node {peer} advertises an {what} address of {} bytes; 1 to {} are allowed",
            a.len(),
            wire::MAX_API_ADDRESS_LEN
        )
    })
}

/// With TLS: the dialer's certificate must name the node its hello claims.
fn check_certificate(net: &Net, conn: &Conn, from: NodeId) -> Result<NodeId, String> {
    match (&net.tls, conn.get_ref()) {
        (Some(tls), PeerStream::Tls(stream)) => {
            tls.check_peer(stream.get_ref().1.peer_certificates(), from).map(|()| from)
        }
        (None, PeerStream::Plain(_)) => Ok(from),
        _ => Err("internal: the connection's security does not match the node's".into()),
    }
}

/// Serves an authenticated peer's connection: passes its election messages
/// on, answers its pings; ends when it closes, sends garbage, stays silent
/// for [`PEER_IDLE_PINGS`] ping intervals, or a newer connection of the same
/// peer replaces it.
async fn serve_peer(
    net: &Net,
    mut conn: Conn,
    from: NodeId,
    remote: SocketAddr,
    inbound: Inbound,
    replaced: &Notify,
    last_frame: &AtomicU64,
) {
    let Some(link) = net.link(from) else { return };
    serve_frames(net, &mut conn, &link, remote, inbound, replaced, last_frame).await;
    if link.is_guest() {
        // The guest's connection ended: so does its link (and its dialer),
        // unless a configuration named it meanwhile.
        info!(peer = %from, %remote, "a guest's connection ended: its link is closed");
        net.remove_exact(&link);
    }
}

/// The loop of [`serve_peer`].
async fn serve_frames(
    net: &Net,
    conn: &mut Conn,
    link: &Arc<PeerLink>,
    remote: SocketAddr,
    inbound: Inbound,
    replaced: &Notify,
    last_frame: &AtomicU64,
) {
    let from = link.id;
    let idle = net.ping_interval * PEER_IDLE_PINGS;
    let mut deadline = Instant::now() + idle;
    loop {
        let frame = tokio::select! {
            () = replaced.notified() => {
                debug!(peer = %from, %remote, "closed a peer connection: replaced by a newer one");
                return;
            }
            () = sleep_until(deadline) => {
                // Late by more than a ping interval: this process stalled
                // (SIGSTOP, a paused VM), and the silence was ours. The peer
                // gets a fresh idle period.
                if Instant::now().saturating_duration_since(deadline) > net.ping_interval {
                    deadline = Instant::now() + idle;
                    continue;
                }
                info!(peer = %from, %remote, ?idle, "closed an idle peer connection (no frame)");
                return;
            }
            frame = conn.next() => frame,
        };
        if link.is_closed() {
            // Its member left this node's configuration (or moved): the
            // peer dials again and is admitted by what this node holds now.
            info!(peer = %from, %remote, "closed a peer connection: its link left the configuration");
            return;
        }
        deadline = Instant::now() + idle;
        last_frame.store(net.clock.now().as_nanos(), Ordering::Relaxed);
        let bytes: Bytes = match frame {
            None => {
                debug!(peer = %from, %remote, "peer closed its connection");
                return;
            }
            Some(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                debug!(peer = %from, %remote, "peer closed its connection (no close_notify)");
                return;
            }
            Some(Err(e)) => return net.reject(remote, &format!("bad frame from peer {from}: {e}")),
            Some(Ok(b)) => b.freeze(),
        };
        match wire::decode(&bytes) {
            Ok(Frame::Message(msg)) => {
                link.heard(&net.clock);
                net.stats.received.fetch_add(1, Ordering::Relaxed);
                if inbound.election.send((from, msg)).await.is_err() {
                    return; // the driver stopped
                }
            }
            Ok(Frame::Replica(msg)) => inbound.data(&net.stats, from, PeerData::Replica(msg)),
            Ok(Frame::Forward(fwd)) => inbound.data(&net.stats, from, PeerData::Forward(fwd)),
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
}
