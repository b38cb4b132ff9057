//! `GET /metrics`: the node's state and counters in the Prometheus text format.
//!
//! The node keeps its own counters; each scrape copies them into a fresh
//! registry as constant metrics, so there is no second copy to keep in sync.
//! The failover histogram is the exception: it must be cumulative, while the
//! node only keeps a bounded ring of recent failovers, so this module measures
//! failovers itself from the leadership watch channel into a histogram that
//! lives as long as the server. So do the key-value API's commit-latency
//! histogram and its count of writes with an unknown outcome, measured by
//! the handlers. The groups' figures (`tenure_partitions_*`) are the groups
//! service's ([`crate::groups::stats`]): its histogram of spells without
//! an owner and its count of moves are cumulative for the process (what it
//! measured while it led); the per-group gauges are exported only while it
//! measures as the leader.

use crate::replication::replication;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tenure_kv::Store;
use tenure_node::{Leadership, NodeHandle, NodeMetrics, Replicated, Term};
use tokio::sync::watch;
use tokio::time::Instant;

/// Upper bounds of the failover histogram's buckets, in seconds: from a fast
/// handover (milliseconds) to a slow election (several timeouts).
const FAILOVER_BUCKETS_S: [f64; 14] =
    [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0];

/// Upper bounds of the commit-latency histogram's buckets, in seconds: from
/// a group commit on a fast disk (sub-millisecond) to a write that waited
/// for an election.
const COMMIT_BUCKETS_S: [f64; 14] =
    [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// Metrics that outlive a scrape.
#[derive(Debug, Clone)]
pub struct Metrics {
    failover_seconds: Histogram,
    kv_commit_seconds: Histogram,
    kv_writes_unknown: Counter,
    session_renewals: Counter,
    session_renewals_refused: Counter,
    session_renewal_asks: Counter,
    session_expiries_proposed: Counter,
    elections: ElectionMetrics,
    /// The groups' figures, measured by the groups service on the leader
    /// and read by `GET /v1/groups/{name}`.
    groups: std::sync::Arc<crate::groups::stats::GroupsWatch>,
}

/// The counters and gauges of the elections API, measured by its handlers.
#[derive(Debug, Clone, Default)]
struct ElectionMetrics {
    campaigns: Counter,
    wakeups: Counter,
    waits_won: Counter,
    observe_events: Counter,
    waiters: Gauge,
    observers: Gauge,
}

/// One open long poll or observe stream, counted in its gauge until dropped.
#[derive(Debug)]
pub struct GaugeGuard(Gauge);

impl Drop for GaugeGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            failover_seconds: Histogram::new(FAILOVER_BUCKETS_S),
            kv_commit_seconds: Histogram::new(COMMIT_BUCKETS_S),
            kv_writes_unknown: Counter::default(),
            session_renewals: Counter::default(),
            session_renewals_refused: Counter::default(),
            session_renewal_asks: Counter::default(),
            session_expiries_proposed: Counter::default(),
            elections: ElectionMetrics::default(),
            groups: Default::default(),
        }
    }
}

impl Metrics {
    /// The groups' figures of this node (docs/PARTITIONS.md, "Observing a
    /// group").
    pub fn groups(&self) -> &std::sync::Arc<crate::groups::stats::GroupsWatch> {
        &self.groups
    }

    /// Counts a key-value write through the API that committed after `took`.
    pub fn kv_write_committed(&self, took: Duration) {
        self.kv_commit_seconds.observe(took.as_secs_f64());
    }

    /// Counts a key-value write through the API whose outcome is unknown.
    pub fn kv_write_unknown(&self) {
        self.kv_writes_unknown.inc();
    }

    /// Counts a session renewal this node answered as the leader.
    pub fn session_renewed(&self) {
        self.session_renewals.inc();
    }

    /// Counts a renewal this node refused as the leader (or as a node that
    /// no longer leads): unknown, expired or expiring lease, busy.
    pub fn session_renewal_refused(&self) {
        self.session_renewals_refused.inc();
    }

    /// Counts an ask of renewals (of one session or many) this node
    /// answered as the leader (or as a node that no longer leads).
    pub fn session_renewal_ask(&self) {
        self.session_renewal_asks.inc();
    }

    /// Counts an expiry this node proposed as the leader.
    pub fn session_expiry_proposed(&self) {
        self.session_expiries_proposed.inc();
    }

    /// Counts a campaign that joined an election's queue.
    pub fn election_campaign(&self) {
        self.elections.campaigns.inc();
    }

    /// Counts `n` waiters woken because a key they wait on was removed.
    pub fn election_wakeups(&self, n: u64) {
        self.elections.wakeups.inc_by(n);
    }

    /// Counts a long poll answered "this candidacy leads".
    pub fn election_wait_won(&self) {
        self.elections.waits_won.inc();
    }

    /// Counts an event sent to an observer.
    pub fn election_observe_event(&self) {
        self.elections.observe_events.inc();
    }

    /// Counts an open long poll until the guard is dropped.
    pub fn election_waiter(&self) -> GaugeGuard {
        self.elections.waiters.inc();
        GaugeGuard(self.elections.waiters.clone())
    }

    /// Counts an open observe stream until the guard is dropped.
    pub fn election_observer(&self) -> GaugeGuard {
        self.elections.observers.inc();
        GaugeGuard(self.elections.observers.clone())
    }

    /// Measures failovers as this node sees them: from the moment the known
    /// leader is lost (or replaced) to the moment a new leader is known.
    /// Returns when the node's leadership channel closes.
    pub async fn track_failovers(self, leadership: watch::Receiver<Leadership>) {
        self.track_failovers_with(leadership, |_| None).await
    }

    /// [`Metrics::track_failovers`] for a node, with the gaps of its
    /// leadership timeline where it has them: from the moment the old leader
    /// was last heard (a crashed leader is lost by this node only when it
    /// stands or votes, an election timeout later), so the histogram and the
    /// dashboard's timeline tell the same time.
    pub async fn track_node_failovers(self, node: NodeHandle) {
        let leadership = node.leadership();
        self.track_failovers_with(leadership, move |term| {
            let changes = node.timeline();
            let change = changes.iter().rev().find(|c| c.term == term)?;
            change.no_leader_ms.map(Duration::from_millis)
        })
        .await
    }

    /// The loop of [`Metrics::track_failovers`]; `gap` may know how long
    /// the cluster had no leader before the leader of a term.
    async fn track_failovers_with(
        self,
        mut leadership: watch::Receiver<Leadership>,
        gap: impl Fn(Term) -> Option<Duration>,
    ) {
        let mut leader = leadership.borrow_and_update().leader;
        // When the last leader was lost, while no leader is known.
        let mut lost_at: Option<Instant> = None;
        while leadership.changed().await.is_ok() {
            let now = Instant::now();
            let (next, term) = {
                let l = leadership.borrow_and_update();
                (l.leader, l.term)
            };
            match (leader, next) {
                (Some(_), None) => lost_at = Some(now),
                (None, Some(_)) => {
                    if let Some(t) = lost_at.take() {
                        let seen = gap(term).unwrap_or(now - t);
                        self.failover_seconds.observe(seen.as_secs_f64());
                    }
                }
                // A direct switch from one leader to another: no gap was
                // seen here (the timeline may know of one).
                (Some(a), Some(b)) if a != b => {
                    let seen = gap(term).unwrap_or_default();
                    self.failover_seconds.observe(seen.as_secs_f64());
                }
                _ => {}
            }
            leader = next;
        }
    }

    /// Renders every metric of `node` and its replicated store `kv` in the
    /// Prometheus text format.
    pub fn render(&self, node: &NodeHandle, kv: &Replicated<Store>) -> String {
        let m = node.metrics();
        let mut r = Registry::with_prefix("tenure");
        register_state(&mut r, node);
        register_election_counters(&mut r, &m);
        register_transport(&mut r, &m);
        self.register_failovers(&mut r);
        register_log(&mut r, kv);
        r.register(
            "kv_commit_duration_seconds",
            "Time of key-value writes through this node's API, from the proposal to the commit \
             and application on this node (committed writes only)",
            self.kv_commit_seconds.clone(),
        );
        r.register(
            "kv_writes_unknown",
            "Key-value writes through this node's API answered 504 with an unknown outcome",
            self.kv_writes_unknown.clone(),
        );
        register_sessions(&mut r, self, kv);
        register_elections(&mut r, &self.elections);
        self.groups.register(&mut r);
        encoded(&r)
    }

    /// Renders the metrics of a server whose leadership comes from a store
    /// ([`crate::store_server`]): whether it leads (`leading`, checked at
    /// the call), its term and fencing token (both the store's token) and
    /// the failover histogram.
    pub fn render_store(&self, leading: bool, leadership: &Leadership) -> String {
        let mut r = Registry::with_prefix("tenure");
        let token = leadership.fencing_token.map_or(0, |t| t.0);
        register_leading(&mut r, leading, leadership.term.0, token);
        self.register_failovers(&mut r);
        encoded(&r)
    }

    /// The failover histogram.
    fn register_failovers(&self, r: &mut Registry) {
        r.register(
            "failover_duration_seconds",
            "Time without a leader before each new one, as seen by this node (on a node: from \
             last hearing the old leader, or losing it, to knowing the next one)",
            self.failover_seconds.clone(),
        );
    }
}

/// The registry in the text format.
fn encoded(r: &Registry) -> String {
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = encode(&mut out, r);
    out
}

/// Whether this node leads, its term and the fencing token it knows of.
fn register_leading(r: &mut Registry, leading: bool, term: u64, fencing_token: u64) {
    r.register(
        "is_leader",
        "1 while this node leads (role leader with a valid lease), else 0",
        ConstGauge::new(i64::from(leading)),
    );
    r.register("term", "This node's current term", ConstGauge::new(clamp(term)));
    r.register(
        "fencing_token",
        "Fencing token of the leader this node knows of (0 when none)",
        ConstGauge::new(clamp(fencing_token)),
    );
}

/// The elections API's counters and gauges.
fn register_elections(r: &mut Registry, e: &ElectionMetrics) {
    let counters = [
        (
            "election_campaigns",
            "Campaigns through this node's API that joined a queue",
            &e.campaigns,
        ),
        (
            "election_waiter_wakeups",
            "Waiters of this node woken because the candidate ahead of them (or their own \
             candidacy) left: one per leaving candidate, not one per waiter (no herd)",
            &e.wakeups,
        ),
        ("election_waits_won", "Long polls of this node answered with leadership", &e.waits_won),
        (
            "election_observe_events",
            "Events sent to this node's observe streams (leaders, proclaims, no leader)",
            &e.observe_events,
        ),
    ];
    for (name, help, counter) in counters {
        r.register(name, help, counter.clone());
    }
    r.register("election_waiters", "Open long polls waiting for leadership", e.waiters.clone());
    r.register("election_observers", "Open observe streams", e.observers.clone());
}

/// The node's state now: leading, term, fencing token, storage, connected peers.
fn register_state(r: &mut Registry, node: &NodeHandle) {
    let status = node.status();
    let token = status.fencing_token.map_or(0, |t| t.0);
    register_leading(r, node.is_leader(), status.term.0, token);
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
    let counters: [(&str, &str, u64); 10] = [
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
        (
            "death_notices",
            "Death notices the election core accepted about another voter (its next incarnation \
             connected, or an accepted POST /v1/peers/{id}/dead)",
            c.death_notices,
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
    let lag = &m.driver_lag;
    r.register(
        "driver_lag_max_seconds",
        "Latest the election driver woke for a deadline of its core, since the node started",
        ConstGauge::new(lag.max_ms / 1000.0),
    );
    r.register(
        "driver_lag_recent_max_seconds",
        "Latest the election driver woke for a deadline of its core in the last 10 to 20 s",
        ConstGauge::new(lag.recent_max_ms / 1000.0),
    );
    r.register(
        "driver_timer_wakes",
        "Times the election driver woke for a deadline of its core",
        ConstCounter::new(lag.wakes),
    );
    let late = Family::<Vec<(String, String)>, Counter>::default();
    for (over_ms, count) in &lag.late_wakes {
        late.get_or_create(&vec![("over_ms".to_string(), over_ms.to_string())]).inc_by(*count);
    }
    r.register(
        "driver_late_wakes",
        "Timer wakes of the election driver later than over_ms after their deadline",
        late,
    );
}

/// The replicated log: its indexes, the store's revision, the followers'
/// progress (on the leader), the last snapshot and the log task's counters.
fn register_log(r: &mut Registry, kv: &Replicated<Store>) {
    // The same figures as `/v1/status` shows, from the same function.
    let log = replication(kv);
    let gauges: [(&str, &str, u64); 5] = [
        ("log_last_index", "Index of the last entry of this node's log", log.last_index),
        ("log_commit_index", "Highest log index this node knows to be committed", log.commit_index),
        ("log_applied_index", "Highest log index applied to this node's store", log.applied_index),
        ("kv_revision", "The store's revision as applied on this node", log.revision),
        (
            "log_snapshot_bytes",
            "Size of the last snapshot this node wrote",
            kv.counters().snapshot_bytes.load(Ordering::Relaxed),
        ),
    ];
    for (name, help, value) in gauges {
        r.register(name, help, ConstGauge::new(clamp(value)));
    }
    let matched = Family::<Vec<(String, String)>, Gauge>::default();
    let lag = Family::<Vec<(String, String)>, Gauge>::default();
    for f in &log.followers {
        let label = vec![("follower".to_string(), f.id.to_string())];
        matched.get_or_create(&label).set(clamp(f.match_index));
        lag.get_or_create(&label).set(clamp(f.lag_entries));
    }
    r.register(
        "log_follower_match_index",
        "On the leader: the last log index each follower holds",
        matched,
    );
    r.register(
        "log_follower_lag_entries",
        "On the leader: entries of its log each follower does not hold yet",
        lag,
    );
    let c = kv.counters();
    let counters: [(&str, &str, &AtomicU64); 7] = [
        (
            "log_writes",
            "Log writes of this node (one fdatasync each; a batch of entries)",
            &c.writes,
        ),
        ("log_proposed", "Commands this node proposed as leader", &c.proposed),
        ("log_forwarded", "Commands this node forwarded to the leader", &c.forwarded),
        ("log_unknown", "Writes through this node that ended with an unknown outcome", &c.unknown),
        ("log_write_failures", "Log writes of this node that failed", &c.write_failures),
        (
            "log_compactions",
            "Compactions of this node's log (a snapshot file, the journal restarted from it) written in the background",
            &c.compactions.written,
        ),
        (
            "log_compaction_failures",
            "Compactions of this node's log that failed (logged; the journal keeps every entry, the next compaction tries again)",
            &c.compactions.failed,
        ),
    ];
    for (name, help, value) in counters {
        r.register(name, help, ConstCounter::new(value.load(Ordering::Relaxed)));
    }
}

/// Sessions: how many the store holds, and the leader's renewals and
/// expiries (counted on the node that answered or proposed them).
fn register_sessions(r: &mut Registry, m: &Metrics, kv: &Replicated<Store>) {
    let held = kv.read_stale(|s| s.leases().len()).0;
    r.register(
        "sessions_held",
        "Sessions (leases) in the store as applied on this node",
        ConstGauge::new(clamp(held as u64)),
    );
    r.register(
        "session_renewals",
        "Session renewals (keepalives) this node answered as the leader",
        m.session_renewals.clone(),
    );
    r.register(
        "session_renewals_refused",
        "Session renewals this node refused as the leader: unknown, expired or expiring \
         session, leadership not confirmed, too many waiting",
        m.session_renewals_refused.clone(),
    );
    r.register(
        "session_renewal_asks",
        "Asks of renewals this node answered as the leader: each from one node, renewing one \
         session or many (renewals waiting on a node leave together); session_renewals + \
         session_renewals_refused over this is the renewals per ask",
        m.session_renewal_asks.clone(),
    );
    r.register(
        "session_expiries_proposed",
        "Session expiries this node proposed as the leader (a TTL passed without a renewal)",
        m.session_expiries_proposed.clone(),
    );
}

/// Prometheus gauges here are i64; node values are u64 and never that large,
/// but saturate rather than wrap if they were.
fn clamp(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}
