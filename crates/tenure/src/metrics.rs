//! `GET /metrics`: the node's state and counters in the Prometheus text format.
//!
//! The node keeps its own counters; each scrape copies them into a fresh
//! registry as constant metrics, so there is no second copy to keep in sync.
//! The failover histogram is the exception: it must be cumulative, while the
//! node only keeps a bounded ring of recent failovers, so this module measures
//! failovers itself from the leadership watch channel into a histogram that
//! lives as long as the server.

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;
use tenure_node::{Leadership, NodeHandle, NodeMetrics};
use tokio::sync::watch;
use tokio::time::Instant;

/// Upper bounds of the failover histogram's buckets, in seconds: from a fast
/// handover (milliseconds) to a slow election (several timeouts).
const FAILOVER_BUCKETS_S: [f64; 14] =
    [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0];

/// Metrics that outlive a scrape.
#[derive(Debug, Clone)]
pub struct Metrics {
    failover_seconds: Histogram,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics { failover_seconds: Histogram::new(FAILOVER_BUCKETS_S) }
    }
}

impl Metrics {
    /// Measures failovers as this node sees them: from the moment the known
    /// leader is lost (or replaced) to the moment a new leader is known.
    /// Returns when the node's leadership channel closes.
    pub async fn track_failovers(self, mut leadership: watch::Receiver<Leadership>) {
        let mut leader = leadership.borrow_and_update().leader;
        // When the last leader was lost, while no leader is known.
        let mut lost_at: Option<Instant> = None;
        while leadership.changed().await.is_ok() {
            let now = Instant::now();
            let next = leadership.borrow_and_update().leader;
            match (leader, next) {
                (Some(_), None) => lost_at = Some(now),
                (None, Some(_)) => {
                    if let Some(t) = lost_at.take() {
                        self.failover_seconds.observe((now - t).as_secs_f64());
                    }
                }
                // A direct switch from one leader to another: no gap was seen.
                (Some(a), Some(b)) if a != b => self.failover_seconds.observe(0.0),
                _ => {}
            }
            leader = next;
        }
    }

    /// Renders every metric of `node` in the Prometheus text format.
    pub fn render(&self, node: &NodeHandle) -> String {
        let m = node.metrics();
        let mut r = Registry::with_prefix("tenure");
        register_state(&mut r, node);
        register_election_counters(&mut r, &m);
        register_transport(&mut r, &m);
        r.register(
            "failover_duration_seconds",
            "Time from losing the known leader to knowing the next one, as seen by this node",
            self.failover_seconds.clone(),
        );
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &r);
        out
    }
}

/// The node's state now: leading, term, fencing token, storage, connected peers.
fn register_state(r: &mut Registry, node: &NodeHandle) {
    let status = node.status();
    r.register(
        "is_leader",
        "1 while this node leads (role leader with a valid lease), else 0",
        ConstGauge::new(i64::from(node.is_leader())),
    );
    r.register("term", "This node's current term", ConstGauge::new(clamp(status.term.0)));
    r.register(
        "fencing_token",
        "Fencing token of the leader this node knows of (0 when none)",
        ConstGauge::new(clamp(status.fencing_token.map_or(0, |t| t.0))),
    );
    r.register(
        "storage_failed",
        "1 while the state file cannot be written",
        ConstGauge::new(i64::from(status.storage_failed)),
    );
    r.register(
        "peers_connected",
        "Peers with an established connection",
        ConstGauge::new(clamp(status.peers.iter().filter(|p| p.connected).count() as u64)),
    );
}

/// The election's counters: leader changes and the core's counters.
fn register_election_counters(r: &mut Registry, m: &NodeMetrics) {
    let c = &m.counters;
    let counters: [(&str, &str, u64); 9] = [
        (
            "leader_changes",
            "Times the known leader changed (to another node or to none)",
            m.leader_changes,
        ),
        ("pre_votes_started", "Pre-vote rounds started", c.pre_votes_started),
        ("elections_started", "Election rounds started by this node", c.elections_started),
        ("elections_won", "Elections this node won", c.elections_won),
        ("heartbeats_sent", "Heartbeats sent (one per destination)", c.heartbeats_sent),
        ("heartbeats_received", "Heartbeats received and accepted", c.heartbeats_received),
        (
            "quorum_losses",
            "Times this node stepped down as leader for lack of a quorum",
            c.quorum_losses,
        ),
        (
            "messages_ignored",
            "Election messages ignored (unknown sender, stale LSN, no longer relevant)",
            c.messages_ignored,
        ),
        (
            "messages_refused",
            "Election messages refused as impossible from a correct peer (invalid term, \
             acknowledgement of nothing sent, resignation from a non-leader, unasked transfer)",
            c.messages_refused,
        ),
    ];
    for (name, help, value) in counters {
        r.register(name, help, ConstCounter::new(value));
    }
}

/// The transport's counters and the round-trip time to each peer.
fn register_transport(r: &mut Registry, m: &NodeMetrics) {
    r.register(
        "messages_sent",
        "Election messages written to peers",
        ConstCounter::new(m.messages_sent),
    );
    r.register(
        "messages_received",
        "Election messages received from peers",
        ConstCounter::new(m.messages_received),
    );
    r.register(
        "frames_rejected",
        "Frames or handshakes refused (malformed, oversized, wrong cluster, unknown id)",
        ConstCounter::new(m.frames_rejected),
    );
    let rtt = Family::<Vec<(String, String)>, Gauge<f64, AtomicU64>>::default();
    for (peer, value) in &m.peer_rtt_ms {
        if let Some(ms) = value {
            rtt.get_or_create(&vec![("peer".to_string(), peer.0.to_string())]).set(ms / 1000.0);
        }
    }
    r.register("peer_rtt_seconds", "Smoothed round-trip time to each peer", rtt);
}

/// Prometheus gauges here are i64; node values are u64 and never that large,
/// but saturate rather than wrap if they were.
fn clamp(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}
