//! The embedding API: starting a node, its handle, and graceful shutdown.

use crate::clock::Clock;
use crate::config::NodeConfig;
use crate::driver::Driver;
use crate::error::{StartError, TransferError};
use crate::metrics::{DriverLag, LeaderTracker};
use crate::shared::{leadership_of, Command, Elector, Shared};
use crate::spy::{NoticeError, NoticeOutcome};
use crate::status::{
    DriverLagStats, Leadership, LeadershipEvent, NodeMetrics, NodeStatus, PeerInfo,
};
use crate::storage::{DataDir, Identity, ResetOutcome};
use crate::sync::lock;
use crate::timeline::{link_view, unix_ms, LeaderChange, Timeline};
use crate::tls::{Security, TlsIdentity};
use crate::transport::{reconnect_cap, Inbound, Net, PeerData, Transport};
use crate::wire::Timings;
use rand_core::{OsRng, RngCore, SeedableRng};
use rand_pcg::Pcg64Mcg;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use tenure_core::{DirectoryId, NodeId, Protocol, Role, Term};
use tokio::sync::{broadcast, mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tracing::{info, warn};

/// Leadership events buffered per subscriber; a slower one sees `Lagged`.
pub const EVENT_CHANNEL_CAPACITY: usize = 256;
/// Pending commands (transfers) before callers wait.
pub const COMMAND_QUEUE_CAPACITY: usize = 16;
/// Received election messages queued for the driver before readers wait
/// (back-pressure onto the peers' TCP connections).
pub const INBOUND_QUEUE_CAPACITY: usize = 1024;
/// Death notices of the next-incarnation spy queued for the driver before
/// the connections that found them wait (one per peer restart: a handful).
pub const DEATH_QUEUE_CAPACITY: usize = 16;

/// Starts a node: checks the configuration and the TLS files, locks and loads
/// the data directory, binds the peer listener to `config.listen` and spawns
/// the driver and transport tasks.
pub async fn start(config: NodeConfig) -> Result<Node, StartError> {
    // Checked before binding: a configuration that cannot work takes no port.
    let tls = checked_tls(&config)?;
    let listener = std::net::TcpListener::bind(config.listen)
        .map_err(|source| StartError::Bind { addr: config.listen, source })?;
    start_valid(config, tls, listener, None).await
}

/// Like [`start`], with a listener the caller already bound (tests bind every
/// node's listener first so that all addresses are known before any node
/// starts). `config.listen` is ignored.
pub async fn start_with_listener(
    config: NodeConfig,
    listener: std::net::TcpListener,
) -> Result<Node, StartError> {
    let tls = checked_tls(&config)?;
    start_valid(config, tls, listener, None).await
}

/// Starts a node whose replicated-log frames from peers go to `data`: on
/// `listener` if given, else bound to `config.listen`.
pub(crate) async fn start_with_data(
    config: NodeConfig,
    listener: Option<std::net::TcpListener>,
    data: mpsc::Sender<(NodeId, PeerData)>,
) -> Result<Node, StartError> {
    let tls = checked_tls(&config)?;
    let listener = match listener {
        Some(l) => l,
        None => std::net::TcpListener::bind(config.listen)
            .map_err(|source| StartError::Bind { addr: config.listen, source })?,
    };
    start_valid(config, tls, listener, Some(data)).await
}

/// Validates the configuration and loads its TLS files (`None`: the insecure
/// mode, warned about here).
fn checked_tls(config: &NodeConfig) -> Result<Option<Arc<TlsIdentity>>, StartError> {
    config.validate()?;
    match &config.security {
        Security::MutualTls(files) => {
            Ok(Some(Arc::new(TlsIdentity::load(files, &config.cluster_id, config.id)?)))
        }
        Security::InsecureNoTls => {
            warn!(
                node = %config.id,
                "INSECURE: peer connections run without TLS (insecure_no_tls): they are neither \
                 encrypted nor authenticated, and anyone who reaches the peer port can vote \
                 as any node. Use this on a development machine only"
            );
            Ok(None)
        }
    }
}

/// Who the node of `config` is, as its data directory records it.
fn identity(config: &NodeConfig) -> Identity {
    Identity {
        cluster_id: config.cluster_id.clone(),
        node_id: config.id,
        protocol: config.protocol,
    }
}

/// Resets the state in `config.data_dir` if a start would refuse it, so that
/// the node can start; call it before [`start`] (`tenure server
/// --reset-state` does), then remove the option that asked for it.
///
/// A start refuses a state file that is missing next to a lock file with a
/// record of the node's term, damaged, older than that record (a restored
/// backup) or of another protocol: starting from it could make the node vote
/// twice in one term. The reset writes a new state file instead, never older
/// than anything the node knows: the lock file's record (the newest state the
/// node sent a message from), the state file if it is newer, a term above
/// any term of another protocol either holds, and at least `min_term` (with
/// no vote) if given. When the lock file holds no record (written by an
/// earlier tenure, or damaged) and the state file is missing or damaged,
/// only `min_term` can make the reset safe: it must be above every term the
/// node may have voted in, which only the other nodes can tell (above the
/// terms a majority of them report); without it the refusal stands.
///
/// A state of another node or cluster, or of a newer format, is never reset.
/// If nothing would be refused, nothing is written
/// ([`ResetOutcome::NotNeeded`]). The lock is held during the reset and
/// released before this returns.
pub fn reset_state(
    config: &NodeConfig,
    min_term: Option<Term>,
) -> Result<ResetOutcome, StartError> {
    config.validate()?;
    crate::storage::reset(&config.data_dir, identity(config), min_term)
}

/// Starts a node whose configuration passed [`NodeConfig::validate`], with
/// its loaded TLS identity; replicated-log frames from peers go to `data`.
async fn start_valid(
    config: NodeConfig,
    tls: Option<Arc<TlsIdentity>>,
    listener: std::net::TcpListener,
    peer_data: Option<mpsc::Sender<(NodeId, PeerData)>>,
) -> Result<Node, StartError> {
    let bind_err = |source| StartError::Bind { addr: config.listen, source };
    let peer_addr = listener.local_addr().map_err(bind_err)?;
    listener.set_nonblocking(true).map_err(bind_err)?;
    let listener = tokio::net::TcpListener::from_std(listener).map_err(bind_err)?;

    // Persist, then send: the incarnation is taken and synced here, before
    // the transport dials or accepts any peer.
    let (data, hard_state) = DataDir::open(&config.data_dir, identity(&config))?;
    let incarnation = data.incarnation();
    let directory = data.directory_id();
    let clock = Clock::new();
    // The core only needs a seed; take it from OS entropy once, and log it so
    // a run can be replayed in the simulator.
    let seed = OsRng.next_u64();
    let core = Elector::new(
        config.protocol,
        config.core_config(),
        hard_state,
        Pcg64Mcg::seed_from_u64(seed),
        clock.now(),
    );
    let net = Arc::new(
        Net::new(
            config.cluster_id.clone(),
            config.id,
            incarnation,
            directory,
            config.protocol,
            &config.peers,
            clock,
            config.heartbeat_interval,
            reconnect_cap(config.election_timeout),
            tls.clone(),
        )
        .with_api_address(config.api_address.clone())
        .with_etcd_address(config.etcd_address.clone())
        .with_timings(Timings::of(&config.core_config()))
        .with_peer_address(Some(peer_addr.to_string()))
        .with_joining(config.joining)
        .with_roster_from_log(peer_data.is_some()),
    );
    let (inbound_tx, inbound_rx) = mpsc::channel(INBOUND_QUEUE_CAPACITY);
    let (commands_tx, commands_rx) = mpsc::channel(COMMAND_QUEUE_CAPACITY);
    let (deaths_tx, deaths_rx) = mpsc::channel(DEATH_QUEUE_CAPACITY);
    // A node with a replicated log counts by the log's configuration: its
    // driver waits for the log task to give it (`Command::Electorate`).
    let gated = peer_data.is_some();
    let inbound = Inbound { election: inbound_tx, data: peer_data, deaths: deaths_tx };
    let transport = Transport::spawn(net.clone(), listener, inbound);
    let shared = Arc::new(Shared {
        leadership: watch::Sender::new(leadership_of(&core)),
        events: broadcast::Sender::new(EVENT_CHANNEL_CAPACITY),
        commands: commands_tx,
        stop: watch::Sender::new(false),
        incarnation,
        core: Mutex::new(core),
        tracker: Mutex::new(LeaderTracker::default()),
        lag: Mutex::new(DriverLag::default()),
        timeline: Mutex::new(Timeline::new(config.id, config.election_timeout)),
        net,
        clock,
        config,
    });
    info!(
        node = %shared.config.id,
        cluster = %shared.config.cluster_id,
        protocol = %shared.config.protocol,
        listen = %peer_addr,
        tls = tls.as_ref().map_or("off (insecure)", |t| t.name()),
        data_dir = %shared.config.data_dir.display(),
        incarnation,
        %directory,
        term = %hard_state.term,
        voted_for = ?hard_state.voted_for,
        seed,
        "node started"
    );
    let channels =
        crate::driver::Channels { inbound: inbound_rx, commands: commands_rx, deaths: deaths_rx };
    let driver = Driver::new(shared.clone(), Arc::new(data), transport, channels, gated);
    let task = tokio::spawn(driver.run());
    Ok(Node { handle: NodeHandle { shared }, peer_addr, tls, driver: Some(task), log: None })
}

/// A running node. It owns the driver and transport tasks; dropping it without
/// [`Node::shutdown`] aborts them (without ceding leadership).
pub struct Node {
    handle: NodeHandle,
    peer_addr: SocketAddr,
    tls: Option<Arc<TlsIdentity>>,
    driver: Option<JoinHandle<()>>,
    /// The replicated log's task, when the node runs one.
    pub(crate) log: Option<JoinHandle<()>>,
}

impl Node {
    /// A handle to observe and command the node.
    pub fn handle(&self) -> NodeHandle {
        self.handle.clone()
    }

    /// The address the peer listener is bound to.
    pub fn peer_addr(&self) -> SocketAddr {
        self.peer_addr
    }

    /// The node's loaded TLS identity (`None` in the insecure mode), for
    /// serving other protocols with the same certificate: the `tenure`
    /// server's HTTPS API uses [`TlsIdentity::https_server_config`].
    pub fn tls(&self) -> Option<Arc<TlsIdentity>> {
        self.tls.clone()
    }

    /// Graceful stop: cedes leadership if leading (the core's `shutdown`),
    /// flushes the resulting Resign messages to connected peers (bounded by
    /// [`crate::driver::SHUTDOWN_FLUSH_TIMEOUT`]), stops every task and releases
    /// the data directory lock.
    pub async fn shutdown(mut self) {
        self.handle.shutdown_signal();
        if let Some(task) = self.driver.take() {
            let _ = task.await;
        }
        if let Some(task) = self.log.take() {
            let _ = task.await;
        }
        info!(node = %self.handle.id(), "node stopped");
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(task) = self.driver.take() {
            task.abort();
        }
        if let Some(task) = self.log.take() {
            task.abort();
        }
    }
}

/// A cheap, cloneable handle to a running node.
#[derive(Clone)]
pub struct NodeHandle {
    pub(crate) shared: Arc<Shared>,
}

impl NodeHandle {
    /// This node's id.
    pub fn id(&self) -> NodeId {
        self.shared.config.id
    }

    /// The election timeout this node runs with.
    pub fn election_timeout(&self) -> std::time::Duration {
        self.shared.config.election_timeout
    }

    /// True if this node leads now: its role is leader and its lease, checked
    /// against the clock at this call, has not run out.
    pub fn is_leader(&self) -> bool {
        lock(&self.shared.core).is_leader(self.shared.clock.now())
    }

    /// A snapshot of the node's state.
    pub fn status(&self) -> NodeStatus {
        let (s, leading) = {
            let core = lock(&self.shared.core);
            (core.status(), core.is_leader(self.shared.clock.now()))
        };
        // A leader whose lease has run out (say, just resumed from a pause)
        // no longer leads, even before the driver has processed the expiry.
        let lapsed = s.role == Role::Leader && !leading;
        let leader = if lapsed { None } else { s.leader };
        let now = self.shared.clock.now().as_nanos();
        NodeStatus {
            id: s.id,
            incarnation: self.shared.incarnation,
            directory: self.shared.net.directory,
            protocol: self.shared.config.protocol,
            role: if lapsed { Role::Follower } else { s.role },
            term: s.term,
            voted_for: s.voted_for,
            leader,
            // A member added through the log has no `--peers` entry: its
            // link (from the log's configuration) knows where it is.
            leader_addr: leader.and_then(|l| {
                self.shared.net.link(l).map(|k| k.addr).or_else(|| self.shared.config.peer_addr(l))
            }),
            fencing_token: if lapsed { None } else { s.fencing_token },
            lsn: s.lsn,
            storage_failed: s.storage_failed,
            peers: self
                .shared
                .net
                .links()
                .iter()
                .map(|l| PeerInfo {
                    id: l.id,
                    addr: l.addr,
                    connected: l.connected(),
                    last_heard_ms: l.last_heard_nanos().map(|t| now.saturating_sub(t) / 1_000_000),
                    rtt_ms: l.rtt_ms(),
                    incarnation: l.incarnation(),
                    api_address: l.api_address(),
                    etcd_address: l.etcd_address(),
                    directory: l.directory(),
                    handshake_error: l.handshake_error(),
                })
                .collect(),
            cluster_id: self.shared.config.cluster_id.clone(),
            voters: self.shared.net.roster().voters,
        }
    }

    /// The elector's settings (heartbeat, election timeout, stagger, drift
    /// bound, round trip) and the protocol: what a client needs to plan a
    /// session's TTL ([`tenure_core::failover::failover_bound`]).
    pub fn timings(&self) -> (tenure_core::Config, tenure_core::kind::ProtocolKind) {
        (self.shared.config.core_config(), self.shared.config.protocol)
    }

    /// This node's incarnation: larger at every start of the node, written
    /// to its data directory before it talked to any peer.
    pub fn incarnation(&self) -> u64 {
        self.shared.incarnation
    }

    /// This node's data-directory identity: the same at every start of its
    /// directory, new when the directory is new.
    pub fn directory(&self) -> DirectoryId {
        self.shared.net.directory
    }

    /// The current leadership; the receiver sees every change.
    pub fn leadership(&self) -> watch::Receiver<Leadership> {
        self.shared.leadership.subscribe()
    }

    /// Leadership events from now on.
    pub fn events(&self) -> broadcast::Receiver<LeadershipEvent> {
        self.shared.events.subscribe()
    }

    /// Hands leadership to `to`: this node steps down at once and `to`
    /// campaigns without waiting for a timeout. Fails if this node does not
    /// lead, `to` is not a voter, or `to` has not acknowledged it recently.
    pub async fn transfer_leadership(&self, to: NodeId) -> Result<(), TransferError> {
        let (reply, answer) = oneshot::channel();
        self.shared
            .commands
            .send(Command::Transfer { to, reply })
            .await
            .map_err(|_| TransferError::NodeStopped)?;
        answer.await.map_err(|_| TransferError::NodeStopped)?
    }

    /// Tells this node that incarnation `incarnation` of voter `peer` is
    /// dead: its process exited or was killed, as its supervisor, systemd's
    /// `ExecStopPost` or an operator knows for certain. If this node took
    /// `peer` as its leader, it stops waiting for the election timeout and
    /// stands at once, in rank order.
    ///
    /// Checked against what this node knows ([`crate::spy`]): taken only
    /// about `peer`'s current incarnation (the highest its handshakes
    /// showed); an older one is [`NoticeOutcome::Stale`] (nothing to do);
    /// one never seen, one about this node itself or a node that is not a
    /// voter is refused, and nothing changes.
    ///
    /// **Trust**: an accepted notice is believed. The caller must know the
    /// process is dead (a caller that is not sure kills it first, then
    /// reports): a notice about a live peer's current incarnation is
    /// accepted too, and makes this node stop supporting a live leader.
    pub async fn notify_dead(
        &self,
        peer: NodeId,
        incarnation: u64,
    ) -> Result<NoticeOutcome, NoticeError> {
        if peer == self.id() {
            return Err(NoticeError::Myself(peer));
        }
        if self.shared.net.link(peer).is_none() {
            return Err(NoticeError::NotAVoter(peer));
        }
        if incarnation == 0 {
            return Err(NoticeError::InvalidIncarnation);
        }
        let (reply, answer) = oneshot::channel();
        self.shared
            .commands
            .send(Command::NotifyDead { peer, incarnation, reply })
            .await
            .map_err(|_| NoticeError::NodeStopped)?;
        answer.await.map_err(|_| NoticeError::NodeStopped)?
    }

    /// The leadership changes this node saw, oldest first (at most
    /// [`crate::timeline::TIMELINE_LEN`]), each with its cause.
    pub fn timeline(&self) -> Vec<LeaderChange> {
        let now = self.shared.clock.now();
        let net = &self.shared.net;
        lock(&self.shared.timeline).changes(unix_ms(), |p| link_view(net, now, p))
    }

    /// Counters and measurements.
    pub fn metrics(&self) -> NodeMetrics {
        let counters = lock(&self.shared.core).counters().clone();
        let (leader_changes, failover_durations_ms) = {
            let t = lock(&self.shared.tracker);
            (t.changes, t.failovers_ms())
        };
        let net = &self.shared.net;
        let lag = {
            let lag = lock(&self.shared.lag);
            DriverLagStats {
                max_ms: lag.max().as_secs_f64() * 1e3,
                recent_max_ms: lag.recent_max(self.shared.clock.now()).as_secs_f64() * 1e3,
                wakes: lag.wakes(),
                late_wakes: lag.late_wakes(),
            }
        };
        NodeMetrics {
            driver_lag: lag,
            counters,
            leader_changes,
            failover_durations_ms,
            peer_rtt_ms: net.links().iter().map(|l| (l.id, l.rtt_ms())).collect(),
            messages_sent: net.stats.sent.load(Ordering::Relaxed),
            messages_received: net.stats.received.load(Ordering::Relaxed),
            frames_rejected: net.stats.rejected.load(Ordering::Relaxed),
        }
    }

    /// Asks the node to stop gracefully: the driver cedes leadership at once;
    /// the owner of the [`Node`] then awaits [`Node::shutdown`] (it can wait
    /// for this request with [`NodeHandle::stop_requested`]).
    pub fn shutdown_signal(&self) {
        self.shared.stop.send_replace(true);
    }

    /// Completes once [`NodeHandle::shutdown_signal`] has been called.
    pub async fn stop_requested(&self) {
        let mut rx = self.shared.stop.subscribe();
        let _ = rx.wait_for(|&stop| stop).await;
    }

    /// Completes once a majority of this node's voters told it that it was
    /// removed from the cluster while it was away
    /// ([`crate::transport::Removal`]): the node should stop.
    pub async fn removed(&self) -> crate::transport::Removal {
        self.shared.net.removed().await
    }

    /// Dials node `id` at peer address `address` (HOST:PORT) as a link to
    /// it would, and returns once it answered the peer handshake there (with
    /// data directory `directory`, where given); `Err` says what the dial
    /// found ([`crate::transport::probe`]).
    pub async fn probe_peer(
        &self,
        id: NodeId,
        address: &str,
        directory: Option<DirectoryId>,
    ) -> Result<(), String> {
        let addr = match address.parse::<std::net::SocketAddr>() {
            Ok(addr) => addr,
            Err(_) => tokio::net::lookup_host(address)
                .await
                .map_err(|e| format!("{address} does not resolve: {e}"))?
                .next()
                .ok_or_else(|| format!("{address} resolves to no address"))?,
        };
        crate::transport::probe(&self.shared.net, id, addr, directory).await
    }
}
