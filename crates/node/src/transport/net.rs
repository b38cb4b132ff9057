//! What every transport task shares: the peers' links and queues, the
//! counters, the TLS identity, and the rate-limited log of refused
//! connections.

use super::reject_log::{RejectLog, Verdict, REJECT_LOG_INTERVAL};
use crate::clock::Clock;
use crate::spy::{DeathNotice, Known, NoticeError, NoticeOutcome, Seen, Spy};
use crate::sync::lock;
use crate::tls::TlsIdentity;
use crate::wire::{Frame, Timings};
use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};
use tenure_core::{ConfigId, DirectoryId, Message, NodeId, ProtocolKind};
use tokio::sync::{mpsc, watch, Notify};
use tracing::{debug, info, warn};

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

/// What a peer's handshake advertised of the services it embeds: where
/// its API and its etcd API answer (HOST:PORT each, opaque to the node).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Advertised {
    /// Its API (tenure: the HTTP API).
    pub api: Option<String>,
    /// Its etcd API.
    pub etcd: Option<String>,
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
    /// The peer's incarnations seen at handshakes, both ways (the acceptor
    /// records the dialer's hello, the dialer the acceptor's answer).
    incarnation: Mutex<Known>,
    /// The API address the peer's last accepted handshake advertised.
    api_address: Mutex<Option<String>>,
    /// The etcd API address the peer's last accepted handshake advertised.
    etcd_address: Mutex<Option<String>>,
    /// The data-directory identity the peer's last accepted handshake showed.
    directory: Mutex<Option<DirectoryId>>,
    /// Why the last handshake with the peer failed, either way (refused by
    /// it or by us); cleared by an accepted one.
    handshake_error: Mutex<Option<String>>,
    /// A guest's link (a node this node's configuration does not name, heard
    /// because its configuration is newer): it lives as long as the guest's
    /// connection, whatever configurations this node goes through meanwhile.
    guest: AtomicBool,
    /// The link left the links (its member left the configuration, or its
    /// address changed): the peer's inbound connection that was served with
    /// it closes, so that the peer dials again and is admitted afresh.
    closed: AtomicBool,
}

impl PeerLink {
    pub(super) fn new(id: NodeId, addr: SocketAddr) -> Self {
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
            incarnation: Mutex::new(Known::default()),
            api_address: Mutex::new(None),
            etcd_address: Mutex::new(None),
            directory: Mutex::new(None),
            guest: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            handshake_error: Mutex::new(None),
        }
    }

    /// The link of a guest (see [`PeerLink::is_guest`]).
    pub(super) fn guest(id: NodeId, addr: SocketAddr) -> Self {
        let link = PeerLink::new(id, addr);
        link.guest.store(true, Ordering::Relaxed);
        link
    }

    /// Whether this is a guest's link, which lives as long as the guest's
    /// connection, not as long as a configuration.
    pub(super) fn is_guest(&self) -> bool {
        self.guest.load(Ordering::Relaxed)
    }

    /// A configuration names the guest now, at the address it was dialled
    /// at: its link is a member's, kept as long as configurations name it.
    pub(super) fn make_member(&self) {
        self.guest.store(false, Ordering::Relaxed);
    }

    /// The link left the links: the inbound connection served with it ends
    /// at its next frame (see [`PeerLink::is_closed`]).
    pub(super) fn close(&self) {
        self.closed.store(true, Ordering::Relaxed);
        self.connected.store(false, Ordering::Relaxed);
        self.wake.notify_waiters();
    }

    /// Whether the link left the links.
    pub(super) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }

    /// Where the peer's embedding service (tenure: its HTTP API) answers,
    /// as its last accepted handshake advertised it, HOST:PORT; an
    /// unspecified IP there (the peer's API binds every interface) is
    /// replaced by the IP of the peer's configured address, the one this
    /// node dials. `None` before a handshake, when the peer advertises
    /// none, or a loopback address while it is reached at another one.
    pub fn api_address(&self) -> Option<String> {
        self.resolve(lock(&self.api_address).clone()?)
    }

    /// Where the peer's etcd API answers, as its last accepted handshake
    /// advertised it (the unspecified IP replaced as for
    /// [`PeerLink::api_address`]); `None` before a handshake, or when the
    /// peer serves none.
    pub fn etcd_address(&self) -> Option<String> {
        self.resolve(lock(&self.etcd_address).clone()?)
    }

    /// An advertised HOST:PORT with an unspecified IP replaced by the IP of
    /// the peer's configured address; none for a loopback IP of a peer
    /// reached at another address (a service that listens on the peer's
    /// loopback only answers on that host: here it would be this host's).
    fn resolve(&self, advertised: String) -> Option<String> {
        match advertised.parse::<SocketAddr>() {
            Ok(a) if a.ip().is_unspecified() => {
                Some(SocketAddr::new(self.addr.ip(), a.port()).to_string())
            }
            Ok(a) if a.ip().is_loopback() && !self.addr.ip().is_loopback() => None,
            _ => Some(advertised),
        }
    }

    /// Why the last handshake with the peer failed (refused by the peer,
    /// or by this node), until one succeeds.
    pub fn handshake_error(&self) -> Option<String> {
        lock(&self.handshake_error).clone()
    }

    /// The data-directory identity the peer's last accepted handshake
    /// showed; `None` before one.
    pub fn directory(&self) -> Option<DirectoryId> {
        *lock(&self.directory)
    }

    /// Records an accepted handshake: what the peer advertised, and no error.
    pub(super) fn handshake_accepted(&self, advertised: Advertised, directory: DirectoryId) {
        *lock(&self.api_address) = advertised.api;
        *lock(&self.etcd_address) = advertised.etcd;
        *lock(&self.directory) = Some(directory);
        *lock(&self.handshake_error) = None;
    }

    /// Records why a handshake with the peer failed.
    pub(super) fn handshake_failed(&self, reason: &str) {
        *lock(&self.handshake_error) = Some(reason.to_string());
    }

    /// The peer's current incarnation: the highest one a handshake showed
    /// since this node started, if any.
    pub fn incarnation(&self) -> Option<u64> {
        lock(&self.incarnation).current()
    }

    /// Records the incarnation a handshake of the peer showed; when it is
    /// higher than the one known, calls `on_newer` with the one known, still
    /// under the lock: a handshake that sees the new incarnation after this
    /// one finds whatever `on_newer` queued already queued.
    pub(crate) fn observe_incarnation(&self, incarnation: u64, on_newer: impl FnOnce(u64)) -> Seen {
        let mut known = lock(&self.incarnation);
        let seen = known.observe(incarnation);
        if let Seen::Newer { previous } = seen {
            on_newer(previous);
        }
        seen
    }

    /// Checks an external notice that the peer's `incarnation` is dead
    /// against what this node knows of it.
    pub(crate) fn check_notice(&self, incarnation: u64) -> Result<NoticeOutcome, NoticeError> {
        lock(&self.incarnation).check(self.id, incarnation)
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
    /// This node's incarnation, shown at every handshake.
    pub incarnation: u64,
    /// The election protocol this node runs.
    pub protocol: ProtocolKind,
    /// The clock shared with the driver.
    pub clock: Clock,
    /// The other members: one link each (see [`Net::links`]).
    links: RwLock<Vec<Arc<PeerLink>>>,
    /// Counters.
    pub stats: WireStats,
    /// Ping period.
    pub ping_interval: Duration,
    /// Reconnect backoff cap.
    pub reconnect_cap: Duration,
    /// Mutual TLS on every peer connection; `None`: plain TCP (insecure mode).
    pub tls: Option<Arc<TlsIdentity>>,
    /// The configuration this node counts by: shown at every handshake
    /// and checked against the peer's ([`Net::voter_mismatch`],
    /// [`Net::directory_mismatch`]).
    roster: Mutex<Roster>,
    /// Where this node's embedding service answers, shown at every handshake.
    pub api_address: Option<String>,
    /// Where this node's etcd API answers, shown at every handshake.
    pub etcd_address: Option<String>,
    /// Where this node's peers reach it (its peer listener), shown at every
    /// handshake.
    pub peer_address: Option<String>,
    /// This node's data-directory identity, shown at every handshake.
    pub directory: DirectoryId,
    /// The election timings this node runs with, shown at every handshake;
    /// a peer with others is refused ([`crate::wire::Timings`]).
    pub timings: Timings,
    reject_log: Mutex<RejectLog>,
    /// The voters that told this node it was removed ([`Frame::Removed`]),
    /// with their configurations.
    removed_by: Mutex<BTreeMap<NodeId, RemovedNotice>>,
    /// Set once a majority of this node's voters told it so.
    removed: watch::Sender<Option<Removal>>,
    /// Whether this node knows the configuration it counts by: a node with
    /// a replicated log learns it from its log task ([`Net::set_roster`]),
    /// and dials no one before (its hello would show the wrong one).
    roster_known: watch::Sender<bool>,
}

/// A majority of the voters this node counts by told it that their newer
/// configuration no longer names it: it was removed from the cluster and
/// its log never received the change (it was stopped or cut off during the
/// removal, or it is a learner, which the leader stops sending the log at
/// once). It cannot serve again with this data directory.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "node {me} was removed from the cluster and its log never received the change (it was \
     stopped or cut off during the removal, or it was a learner, which the leader stops \
     sending the log at once): node{s} {by} count{verb} by \
     configuration {config} (voters {voters}), which no longer names it, and this node's log \
     still counts it a {role} of configuration {own}. It cannot serve again with this data \
     directory; to bring it back, add it as a new member: `tenure member add {me} HOST:PORT` \
     on a member, then start it with an empty --data-dir and --join",
    role = if self.learner { "learner" } else { "voter" },
    s = if self.by.len() == 1 { "" } else { "s" },
    verb = if self.by.len() == 1 { "s" } else { "" },
    by = self.by.iter().map(|n| n.0.to_string()).collect::<Vec<_>>().join(", "),
    voters = show_voters(&self.voters),
)]
pub struct Removal {
    /// This node.
    pub me: NodeId,
    /// The voters that said so.
    pub by: Vec<NodeId>,
    /// The newest configuration they showed.
    pub config: ConfigId,
    /// Its voters.
    pub voters: Vec<NodeId>,
    /// The configuration this node counts by.
    pub own: ConfigId,
    /// Whether that configuration names this node a learner (else a voter).
    pub learner: bool,
}

/// A member's word that this node was removed: its configuration, the
/// voters of it, and when it said so.
type RemovedNotice = (ConfigId, Vec<NodeId>, Instant);

/// How long a member's word that this node was removed counts toward a
/// majority: the members' refusals come at each redial (every
/// [`crate::transport::RECONNECT_MAX`] at most), so a majority is the word
/// of members that said so at about the same time.
pub const REMOVED_NOTICE_AGE: Duration = Duration::from_secs(30);

impl Net {
    /// The shared transport state for `peers` (this node's own entry is
    /// skipped), for node `me` in its incarnation `incarnation`, from the
    /// data directory of identity `directory`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        cluster_id: String,
        me: NodeId,
        incarnation: u64,
        directory: DirectoryId,
        protocol: ProtocolKind,
        peers: &[(NodeId, SocketAddr)],
        clock: Clock,
        ping_interval: Duration,
        reconnect_cap: Duration,
        tls: Option<Arc<TlsIdentity>>,
    ) -> Self {
        let mut voters: Vec<NodeId> = peers.iter().map(|&(id, _)| id).collect();
        voters.push(me);
        voters.sort_unstable();
        voters.dedup();
        let roster = Roster { config: ConfigId::BOOTSTRAP, voters, ..Roster::default() };
        Net {
            cluster_id,
            me,
            incarnation,
            protocol,
            clock,
            links: RwLock::new(
                peers
                    .iter()
                    .filter(|&&(id, _)| id != me)
                    .map(|&(id, addr)| Arc::new(PeerLink::new(id, addr)))
                    .collect(),
            ),
            stats: WireStats::default(),
            ping_interval,
            reconnect_cap,
            tls,
            roster: Mutex::new(roster),
            api_address: None,
            etcd_address: None,
            peer_address: None,
            directory,
            timings: Timings::default(),
            reject_log: Mutex::new(RejectLog::default()),
            removed_by: Mutex::new(BTreeMap::new()),
            removed: watch::Sender::new(None),
            roster_known: watch::Sender::new(true),
        }
    }

    /// The same, for a node whose replicated log gives it the configuration
    /// it counts by: it dials no one until [`Net::set_roster`] was called.
    pub fn with_roster_from_log(self, from_log: bool) -> Self {
        self.roster_known.send_replace(!from_log);
        self
    }

    /// Completes once this node knows the configuration it counts by.
    pub(super) async fn roster_known(&self) {
        let mut rx = self.roster_known.subscribe();
        let _ = rx.wait_for(|&known| known).await;
    }

    /// The same, for a node that joins a running cluster (see
    /// [`crate::NodeConfig::joining`]): until its log names a
    /// configuration, its handshakes do not count it among the voters (it
    /// is none), so that no member takes it for a removed voter.
    pub fn with_joining(mut self, joining: bool) -> Self {
        if joining {
            let me = self.me;
            self.roster.get_mut().unwrap_or_else(|e| e.into_inner()).voters.retain(|&v| v != me);
        }
        self
    }

    /// Voter `peer` refused this node's handshake with [`Frame::Removed`]:
    /// its configuration `config`, of `voters`, no longer names this node.
    /// Counted if this node's log's configuration still names it, a voter
    /// or a learner (with this data directory, where the configuration
    /// names one: a node re-added under its id with a new directory that
    /// replays the configurations naming its old one is not that member)
    /// and that configuration is newer than this node's. Entries older
    /// than [`REMOVED_NOTICE_AGE`] are forgotten; once a majority of the
    /// voters this node counts by said so within it, [`Net::removed`] tells
    /// it. Returns whether it counted.
    pub(crate) fn note_removed(&self, peer: NodeId, config: ConfigId, voters: Vec<NodeId>) -> bool {
        let roster = self.roster();
        let me = self.me;
        let mine = roster.directories.get(&me).is_none_or(|d| *d == self.directory);
        let learner = roster.learners.contains(&me);
        let member = roster.config != ConfigId::BOOTSTRAP
            && (roster.voters.contains(&me) || learner)
            && mine;
        let counts = roster.voters.contains(&peer) && !voters.contains(&me);
        if !member || !counts || config <= roster.config {
            return false;
        }
        let now = Instant::now();
        let mut by = lock(&self.removed_by);
        by.insert(peer, (config, voters, now));
        by.retain(|id, (c, _, at)| {
            roster.voters.contains(id)
                && *c > roster.config
                && now.duration_since(*at) <= REMOVED_NOTICE_AGE
        });
        // A majority of the voters this node counts by, not counting itself.
        if by.len() > roster.voters.len() / 2 {
            let (config, voters, _) =
                by.values().max_by_key(|(c, _, _)| *c).cloned().expect("not empty");
            let by = by.keys().copied().collect();
            let removal = Removal { me, by, config, voters, own: roster.config, learner };
            self.removed.send_if_modified(|r| {
                let changed = r.is_none();
                if changed {
                    *r = Some(removal);
                }
                changed
            });
        }
        true
    }

    /// Voter `peer` accepted this node's handshake: whatever it said
    /// before about a removal no longer stands.
    pub(crate) fn note_accepted(&self, peer: NodeId) {
        lock(&self.removed_by).remove(&peer);
    }

    /// Completes once a majority of this node's voters told it that it was
    /// removed ([`Removal`]).
    pub async fn removed(&self) -> Removal {
        let mut rx = self.removed.subscribe();
        let seen = rx.wait_for(|r| r.is_some()).await.ok().and_then(|r| r.clone());
        match seen {
            Some(removal) => removal,
            // The sender lives as long as `self`.
            None => std::future::pending().await,
        }
    }

    /// The removal, if a majority of this node's voters told it so.
    pub fn removal(&self) -> Option<Removal> {
        self.removed.borrow().clone()
    }

    /// The same, advertising `api_address` at every handshake (see
    /// [`Frame::Hello`]'s `api_address`).
    pub fn with_api_address(mut self, api_address: Option<String>) -> Self {
        self.api_address = api_address;
        self
    }

    /// The same, advertising `etcd_address` at every handshake (see
    /// [`Frame::Hello`]'s `etcd_address`).
    pub fn with_etcd_address(mut self, etcd_address: Option<String>) -> Self {
        self.etcd_address = etcd_address;
        self
    }

    /// The same, running with (and showing at every handshake) `timings`.
    pub fn with_timings(mut self, timings: Timings) -> Self {
        self.timings = timings;
        self
    }

    /// The same, advertising `peer_address` (where peers reach this node)
    /// at every handshake.
    pub fn with_peer_address(mut self, peer_address: Option<String>) -> Self {
        self.peer_address = peer_address;
        self
    }

    /// Why node `peer`, which counts its majorities over `theirs` (its
    /// configuration at `config`), cannot be this node's peer, if it cannot:
    /// a malformed list, or, while both still count by the bootstrap list
    /// (`--peers`, before the log holds any configuration of its own), a
    /// voter set not this node's own. Two nodes that bootstrap with
    /// different sets could each find a majority of its own (a node alone in
    /// its set is its own majority), so they never talk; the reason names
    /// both sets, and the fix. Once either holds a configuration of the log,
    /// the log decides who votes (the freshness rule keeps a node behind
    /// from winning), so nodes whose configurations differ (one is behind
    /// the other by a change) talk. Ids only: a peer's address may
    /// legitimately differ from host to host (NAT, containers), and a wrong
    /// address cannot make a majority (the node that answers there must
    /// prove the id it is dialled for).
    pub fn voter_mismatch(
        &self,
        peer: NodeId,
        theirs: &[NodeId],
        config: ConfigId,
    ) -> Option<String> {
        let well_formed = !theirs.is_empty()
            && theirs.len() <= tenure_core::MAX_VOTERS
            && theirs.windows(2).all(|w| w[0] < w[1])
            && theirs.first().is_some_and(|f| f.0 > 0);
        if !well_formed {
            return Some(format!(
                "node {peer} sent a malformed voter set {}: it must list 1 to {} positive ids, \
                 ascending, each once",
                show_voters(theirs),
                tenure_core::MAX_VOTERS
            ));
        }
        let roster = lock(&self.roster);
        let bootstrap = config == ConfigId::BOOTSTRAP && roster.config == ConfigId::BOOTSTRAP;
        (bootstrap && (theirs != roster.voters || !theirs.contains(&peer))).then(|| {
            format!(
                "the voter sets differ: node {peer} counts its majorities over voters {}, node \
                 {} over {}; every node of a cluster must list the same voter ids (--peers, or \
                 `peers` in the config file; the addresses may differ): correct the list of \
                 the node that is wrong and restart it",
                show_voters(theirs),
                self.me,
                show_voters(&roster.voters)
            )
        })
    }

    /// Why node `peer`, showing the data directory `theirs`, is not the
    /// member the configuration names, if it is not: the configuration
    /// added it with another directory (its disk was wiped or replaced
    /// since). It must be removed and added again: a node that lost what it
    /// acknowledged must not count as the voter that acknowledged it. Not
    /// while `their_config` is newer than this node's.
    pub fn directory_mismatch(
        &self,
        peer: NodeId,
        theirs: DirectoryId,
        their_config: ConfigId,
    ) -> Option<String> {
        let roster = lock(&self.roster);
        let known = roster.directories.get(&peer).copied()?;
        // A peer whose configuration is newer may be the member a later
        // change added again under this id, with the directory it has now
        // (this node's log lags behind that change): it is heard, so that
        // this node catches up. It is no danger: it votes only once its own
        // configuration names it with its new directory, so holding the
        // committed removal of its old self, and grants no vote to a
        // candidate whose log lacks that removal, the only candidates that
        // would count it as its old self (docs/MEMBERSHIP.md, "The identity of a data directory").
        if their_config > roster.config {
            return None;
        }
        (known != theirs).then(|| {
            format!(
                "node {peer} shows data directory {theirs}, but the cluster added node {peer} \
                 with data directory {known}: either a node was started with another's --id \
                 (a typo: give it its own id; the member node {peer} may be running fine), or \
                 node {peer}'s disk was wiped or replaced and it no longer holds what it \
                 acknowledged (then replace it: `tenure member replace`, docs/MEMBERSHIP.md)"
            )
        })
    }

    /// The configuration this node counts by, as its handshakes show it.
    pub fn roster(&self) -> Roster {
        lock(&self.roster).clone()
    }

    /// Counts by `roster` from now on (the log's configuration changed).
    pub(crate) fn set_roster(&self, mut roster: Roster) {
        roster.voters.sort_unstable();
        roster.voters.dedup();
        *lock(&self.roster) = roster;
        self.roster_known.send_replace(true);
    }

    /// Every other member's link (a snapshot: the set changes with the
    /// configuration).
    pub fn links(&self) -> Vec<Arc<PeerLink>> {
        read(&self.links).clone()
    }

    /// The link to member `id`, if it is one.
    pub(crate) fn link(&self, id: NodeId) -> Option<Arc<PeerLink>> {
        read(&self.links).iter().find(|l| l.id == id).cloned()
    }

    /// Adds a link to a new member.
    pub(super) fn add_link(&self, link: Arc<PeerLink>) {
        let mut links = self.links.write().unwrap_or_else(|e| e.into_inner());
        links.retain(|l| l.id != link.id);
        links.push(link);
    }

    /// Removes `link` if it is still the link to its peer (a guest's, when
    /// its connection ended), and closes it.
    pub(super) fn remove_exact(&self, link: &Arc<PeerLink>) {
        let mut links = self.links.write().unwrap_or_else(|e| e.into_inner());
        links.retain(|l| !Arc::ptr_eq(l, link));
        link.close();
    }

    /// Records the incarnation a handshake of `link`'s peer showed. One
    /// higher than the one known is the next-incarnation spy: the known one
    /// is dead, and `deaths` (the driver, which takes notices before
    /// messages) is told before anything the new incarnation sends, on this
    /// connection or on its other one, is read. A lower one is logged.
    ///
    /// A full queue (more than [`crate::node::DEATH_QUEUE_CAPACITY`] peer
    /// restarts the driver has not taken yet) loses the notice, with a
    /// warning: the election timeout stays the fallback.
    pub(super) fn learned_incarnation(
        &self,
        link: &PeerLink,
        incarnation: u64,
        deaths: &mpsc::Sender<DeathNotice>,
    ) {
        let peer = link.id;
        let by = Spy::NextIncarnation { next: incarnation };
        let mut lost = false;
        let seen = link.observe_incarnation(incarnation, |previous| {
            let notice = DeathNotice { peer, incarnation: previous, by };
            // Closed: the driver stopped and needs no notice.
            lost = matches!(deaths.try_send(notice), Err(mpsc::error::TrySendError::Full(_)));
        });
        match seen {
            Seen::First => debug!(%peer, incarnation, "learned a peer's incarnation"),
            Seen::Same => {}
            Seen::Newer { previous } => {
                info!(
                    %peer,
                    dead = previous,
                    incarnation,
                    "a peer restarted: its new incarnation holds its data directory's lock, so \
                     the previous one is dead"
                );
                if lost {
                    warn!(
                        %peer,
                        dead = previous,
                        "the driver's queue of death notices is full: this one is lost, and the \
                         election timeout stays the fallback"
                    );
                }
            }
            // Once per lower incarnation: a stranger (without TLS) or a
            // restored peer redialling must not fill the log.
            Seen::Older { news: false, .. } => {}
            Seen::Older { highest, news: true } => warn!(
                %peer,
                incarnation,
                highest,
                "a peer shows a lower incarnation than one it showed before: its data directory \
                 was rolled back (restored from a copy?), or, if the higher one shows again, two \
                 processes run with its node id; no death notice about it is taken until it \
                 shows one above {highest}"
            ),
        }
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

/// Reads a lock that a panicking writer cannot have left half-written
/// (the vector is replaced whole).
fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|e| e.into_inner())
}

/// The configuration a node counts by, as its handshakes show it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Roster {
    /// Where the configuration was written ([`ConfigId::BOOTSTRAP`]: the
    /// bootstrap list).
    pub config: ConfigId,
    /// Its voters, ids ascending.
    pub voters: Vec<NodeId>,
    /// Its learners.
    pub learners: Vec<NodeId>,
    /// The data directory each member was added with, where the
    /// configuration names one (not the bootstrap members).
    pub directories: BTreeMap<NodeId, DirectoryId>,
}

/// A voter set as `{1,2,3}`.
pub fn show_voters(voters: &[NodeId]) -> String {
    let ids: Vec<String> = voters.iter().map(|v| v.0.to_string()).collect();
    format!("{{{}}}", ids.join(","))
}
