//! What every transport task shares: the peers' links and queues, the
//! counters, the TLS identity, and the rate-limited log of refused
//! connections.

use super::reject_log::{RejectLog, Verdict, REJECT_LOG_INTERVAL};
use crate::clock::Clock;
use crate::sync::lock;
use crate::tls::TlsIdentity;
use crate::wire::Frame;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tenure_core::{Message, NodeId, ProtocolKind};
use tokio::sync::Notify;
use tracing::warn;

/// Messages queued per peer before the oldest is dropped.
pub const PEER_QUEUE_CAPACITY: usize = 64;
/// Replicated-log frames ([`Frame::Replica`], [`Frame::Forward`]) queued per
/// peer before the oldest is dropped (the leader resends what is unanswered
/// at its next heartbeat; a forwarded request lost this way times out).
pub const PEER_DATA_QUEUE_CAPACITY: usize = 1024;
/// How long either side waits for the other's handshake: the TLS handshake
/// and the hello exchange together.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(1);
/// Gain of the smoothed RTT (1/8, as TCP's SRTT).
const RTT_GAIN: f64 = 0.125;

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
    /// Replicated-log frames written.
    pub data_sent: AtomicU64,
    /// Replicated-log frames received.
    pub data_received: AtomicU64,
    /// Replicated-log frames dropped: from full send queues, or received
    /// while the node's log task was too far behind to take them.
    pub data_dropped: AtomicU64,
}

/// One peer: its send queue and what the transport knows about it.
#[derive(Debug)]
pub struct PeerLink {
    /// The peer.
    pub id: NodeId,
    /// Its configured address.
    pub addr: SocketAddr,
    queue: Mutex<VecDeque<Message>>,
    data: Mutex<VecDeque<Frame>>,
    pub(super) wake: Notify,
    pub(super) connected: AtomicBool,
    /// The last attempt to connect was refused (see [`PeerLink::refused`]).
    pub(super) refused: AtomicBool,
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
            data: Mutex::new(VecDeque::new()),
            wake: Notify::new(),
            connected: AtomicBool::new(false),
            refused: AtomicBool::new(false),
            last_heard: AtomicU64::new(0),
            rtt_ms: Mutex::new(None),
        }
    }

    /// True while our outbound connection to the peer is up.
    pub fn connected(&self) -> bool {
        self.connected.load(Ordering::Relaxed)
    }

    /// True when the last attempt to connect to the peer was refused: its
    /// host answered, and nothing listens on the port (the process is down).
    /// A timed-out attempt (host down, or the network drops packets) is not
    /// a refusal.
    pub fn refused(&self) -> bool {
        self.refused.load(Ordering::Relaxed)
    }

    /// When a frame from the peer last arrived (core clock nanos).
    pub fn last_heard_nanos(&self) -> Option<u64> {
        self.last_heard.load(Ordering::Relaxed).checked_sub(1)
    }

    /// Smoothed ping round-trip time.
    pub fn rtt_ms(&self) -> Option<f64> {
        *lock(&self.rtt_ms)
    }

    pub(super) fn heard(&self, clock: &Clock) {
        self.last_heard.store(clock.now().as_nanos().saturating_add(1), Ordering::Relaxed);
    }

    pub(super) fn record_rtt(&self, sample_ms: f64) {
        let mut rtt = lock(&self.rtt_ms);
        *rtt = Some(match *rtt {
            Some(old) => old + RTT_GAIN * (sample_ms - old),
            None => sample_ms,
        });
    }

    /// Queues `msg` and wakes the dialer; returns true if the oldest queued
    /// message was dropped to make room.
    pub(super) fn enqueue(&self, msg: Message) -> bool {
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

    pub(super) fn take_queued(&self) -> VecDeque<Message> {
        std::mem::take(&mut *lock(&self.queue))
    }

    /// Queues a replicated-log frame and wakes the dialer; returns true if
    /// the oldest queued one was dropped to make room.
    pub(crate) fn enqueue_data(&self, frame: Frame) -> bool {
        let dropped = {
            let mut q = lock(&self.data);
            let full = q.len() >= PEER_DATA_QUEUE_CAPACITY;
            if full {
                q.pop_front();
            }
            q.push_back(frame);
            full
        };
        self.wake.notify_one();
        dropped
    }

    pub(super) fn take_queued_data(&self) -> VecDeque<Frame> {
        std::mem::take(&mut *lock(&self.data))
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
    /// Mutual TLS on every peer connection; `None`: plain TCP (insecure mode).
    pub tls: Option<Arc<TlsIdentity>>,
    reject_log: Mutex<RejectLog>,
}

impl Net {
    /// The shared transport state for `peers` (this node's own entry is skipped).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        cluster_id: String,
        me: NodeId,
        protocol: ProtocolKind,
        peers: &[(NodeId, SocketAddr)],
        clock: Clock,
        ping_interval: Duration,
        reconnect_cap: Duration,
        tls: Option<Arc<TlsIdentity>>,
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
            tls,
            reject_log: Mutex::new(RejectLog::default()),
        }
    }

    pub(crate) fn link(&self, id: NodeId) -> Option<&Arc<PeerLink>> {
        self.links.iter().find(|l| l.id == id)
    }

    /// Counts a refused connection or frame and logs it, at most
    /// [`super::reject_log::REJECT_LOG_BURST`] lines per [`REJECT_LOG_INTERVAL`];
    /// the rest are counted and summarised.
    pub(super) fn reject(&self, remote: SocketAddr, reason: &str) {
        self.stats.rejected.fetch_add(1, Ordering::Relaxed);
        let (summary, verdict) = lock(&self.reject_log).record(Instant::now(), remote, reason);
        if let Some(s) = summary {
            s.log();
        }
        match verdict {
            Verdict::Log => warn!(%remote, reason, "refused a peer connection"),
            Verdict::LogLast => warn!(
                %remote,
                reason,
                "refused a peer connection; further refusals are counted and summarised every {:?}",
                REJECT_LOG_INTERVAL
            ),
            Verdict::Suppress => {}
        }
    }

    /// Logs the summary of refusals not logged one by one: when the window
    /// has run out, or at once with `now`.
    pub(super) fn flush_rejects(&self, at_once: bool) {
        if let Some(s) = lock(&self.reject_log).flush(Instant::now(), at_once) {
            s.log();
        }
    }
}
