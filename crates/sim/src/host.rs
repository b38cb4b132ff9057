//! One simulated node: the real elector, its durable store, its clock, and the
//! crash / restart / pause life cycle around them.
//!
//! Crashing drops the elector (all volatile state) but keeps `durable`, the last
//! `HardState` the driver wrote; restarting builds a fresh elector from it,
//! exactly as a real process would after a reboot.

use crate::clock::NodeClock;
use crate::kvnode::KvHost;
use crate::workload::Request;
use rand_pcg::Pcg64Mcg;
use std::collections::VecDeque;
use tenure_core::{
    Config, Counters, DirectoryId, Elector, HardState, Instant, Message, NodeId, Protocol,
    ProtocolKind,
};
use tenure_replica::router::Forward;
use tenure_replica::ReplicaMessage;

/// Messages a paused node can hold; later ones are dropped like a full socket buffer.
pub const MAX_PAUSED_INBOX: usize = 4_096;

/// Something that arrived for a node: held in its inbox while it is paused.
#[derive(Clone, Debug)]
pub enum Inbound {
    /// An elector message from a peer.
    Elector(NodeId, Message),
    /// A replica message from a peer (key-value workload).
    Replica(NodeId, ReplicaMessage),
    /// A forwarded request or its answer, between the routers of two nodes
    /// (key-value workload).
    Forward(NodeId, Forward),
    /// A client's request (key-value workload).
    Client(Request),
    /// A spy's death notice about `peer`'s incarnation `incarnation`.
    PeerDead {
        /// The node reported dead.
        peer: NodeId,
        /// Its incarnation the spy saw die.
        incarnation: u64,
    },
}

/// A node of the simulated cluster.
pub struct Host {
    /// The node's id (index + 1).
    pub id: NodeId,
    /// The election protocol the node runs.
    pub protocol: ProtocolKind,
    /// The node's elector configuration.
    pub cfg: Config,
    /// The node's local clock.
    pub clock: NodeClock,
    /// The running elector; `None` while crashed.
    elector: Option<Box<dyn Protocol>>,
    /// The durable store: survives crashes.
    pub durable: HardState,
    /// Bumped at every restart; seeds the new elector and tells in-flight
    /// messages of an earlier life apart.
    pub incarnation: u64,
    /// Global time of the last crash.
    pub last_crash_ns: Option<u64>,
    /// True while frozen: inputs queue up and are handled on resume.
    pub paused: bool,
    /// Inputs that arrived while paused.
    pub inbox: VecDeque<Inbound>,
    /// True while writes to the durable store fail.
    pub storage_failing: bool,
    /// Generation of the armed timer; older timer events are stale.
    pub timer_gen: u64,
    /// Global time the armed timer fires at.
    pub timer_at: Option<u64>,
    /// Counters of earlier incarnations, so that totals survive crashes.
    past_counters: Counters,
    /// The last local time handed to the elector: `now` never goes backwards.
    last_local: Instant,
    run_seed: u64,
    /// The replica, its log and its clients' requests, when the key-value
    /// workload runs.
    pub kv: Option<KvHost>,
    /// Global times of every crash.
    pub crashes: Vec<u64>,
    /// The identity of the node's data directory: new after every wipe
    /// ([`Host::wipe`]).
    pub directory: DirectoryId,
    /// Global times the node's data was wiped: what it sent before is from
    /// another directory, which its peers no longer accept.
    pub wipes: Vec<u64>,
    /// Down for good (changes of members: removed, crashed and wiped):
    /// restarts and healing leave it down until it joins again.
    pub retired: bool,
}

/// Mixes the run seed, the node id and its incarnation into one RNG seed
/// (SplitMix64 finaliser), so nodes draw independent streams.
pub fn node_seed(run_seed: u64, id: NodeId, incarnation: u64) -> u128 {
    let mut z = run_seed
        ^ id.0.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ incarnation.wrapping_mul(0xD1B5_4A32_D192_ED03);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (u128::from(z) << 64) | u128::from(z ^ 0x5851_F42D_4C95_7F2D)
}

/// The identity of node `id`'s data directory after `wipes` wipes: drawn
/// from the run's seed, never zero (a zero identity is not one).
pub fn directory_of(run_seed: u64, id: NodeId, wipes: u64) -> DirectoryId {
    let bits = node_seed(run_seed ^ 0x6469_7265_6374_6f72, id, wipes);
    DirectoryId(bits.max(1))
}

impl Host {
    /// A fresh node, running from global time `now_ns`.
    pub fn new(
        protocol: ProtocolKind,
        cfg: Config,
        clock: NodeClock,
        run_seed: u64,
        now_ns: u64,
    ) -> Self {
        let cfg_id = cfg.id;
        let mut host = Host {
            id: cfg.id,
            protocol,
            cfg,
            clock,
            elector: None,
            durable: HardState::default(),
            incarnation: 0,
            last_crash_ns: None,
            paused: false,
            inbox: VecDeque::new(),
            storage_failing: false,
            timer_gen: 0,
            timer_at: None,
            past_counters: Counters::default(),
            last_local: Instant::ZERO,
            run_seed,
            kv: None,
            crashes: Vec::new(),
            directory: directory_of(run_seed, cfg_id, 0),
            wipes: Vec::new(),
            retired: false,
        };
        host.start(now_ns);
        host
    }

    fn start(&mut self, now_ns: u64) {
        let rng = Pcg64Mcg::new(node_seed(self.run_seed, self.id, self.incarnation));
        let now = self.local_now(now_ns);
        let elector = Elector::new(self.protocol, self.cfg.clone(), self.durable, rng, now);
        self.elector = Some(Box::new(elector));
    }

    /// The local time at global `now_ns`, never earlier than a previous reading.
    pub fn local_now(&mut self, now_ns: u64) -> Instant {
        self.last_local = self.last_local.max(self.clock.local(now_ns));
        self.last_local
    }

    /// The local time at global `now_ns`, as [`Host::local_now`] would read
    /// it, without recording the reading.
    pub fn local_at(&self, now_ns: u64) -> Instant {
        self.last_local.max(self.clock.local(now_ns))
    }

    /// The elector, unless crashed.
    pub fn elector(&self) -> Option<&dyn Protocol> {
        self.elector.as_deref()
    }

    /// The elector, mutably, unless crashed.
    pub fn elector_mut(&mut self) -> Option<&mut (dyn Protocol + 'static)> {
        self.elector.as_deref_mut()
    }

    /// True unless crashed.
    pub fn is_up(&self) -> bool {
        self.elector.is_some()
    }

    /// True if running and leading at global time `now_ns` by its own clock.
    pub fn is_leader_at(&self, now_ns: u64) -> bool {
        let local = self.local_at(now_ns);
        self.elector.as_ref().is_some_and(|e| e.is_leader(local))
    }

    /// Crashes the node: volatile state, queued inputs and the timer are lost.
    pub fn crash(&mut self, now_ns: u64) {
        if let Some(e) = self.elector.take() {
            add_counters(&mut self.past_counters, e.counters());
        }
        self.inbox.clear();
        self.paused = false;
        self.timer_gen += 1;
        self.timer_at = None;
        self.last_crash_ns = Some(now_ns);
        self.crashes.push(now_ns);
        if let Some(kv) = self.kv.as_mut() {
            kv.crash();
        }
    }

    /// True if the node crashed at some time in `[from_ns, until_ns)`.
    pub fn crashed_within(&self, from_ns: u64, until_ns: u64) -> bool {
        self.crashes.iter().rev().take_while(|&&c| c >= from_ns).any(|&c| c < until_ns)
    }

    /// Restarts a crashed node from its durable state.
    pub fn restart(&mut self, now_ns: u64) {
        debug_assert!(!self.is_up());
        self.incarnation += 1;
        self.start(now_ns);
    }

    /// True if the node's data was wiped at some time in `[from_ns, until_ns]`.
    pub fn wiped_within(&self, from_ns: u64, until_ns: u64) -> bool {
        self.wipes.iter().rev().take_while(|&&w| w >= from_ns).any(|&w| w <= until_ns)
    }

    /// The node, down, loses its data for good: its durable state and its
    /// log are gone and its data directory gets a new identity. It stays
    /// down ([`Host::retired`]) until it joins again with `cfg` (the
    /// settings of a node that joins a running cluster).
    pub fn wipe(&mut self, now_ns: u64, cfg: Config) {
        debug_assert!(!self.is_up());
        self.durable = HardState::default();
        self.wipes.push(now_ns);
        self.directory = directory_of(self.run_seed, self.id, self.wipes.len() as u64);
        self.retired = true;
        self.cfg = cfg;
        if let Some(kv) = self.kv.as_mut() {
            kv.disk = Default::default();
            kv.synced_at = 0;
        }
    }

    /// Counters summed over every incarnation.
    pub fn total_counters(&self) -> Counters {
        let mut total = self.past_counters.clone();
        if let Some(e) = &self.elector {
            add_counters(&mut total, e.counters());
        }
        total
    }
}

fn add_counters(into: &mut Counters, c: &Counters) {
    into.pre_votes_started += c.pre_votes_started;
    into.elections_started += c.elections_started;
    into.elections_won += c.elections_won;
    into.heartbeats_sent += c.heartbeats_sent;
    into.heartbeats_received += c.heartbeats_received;
    into.quorum_losses += c.quorum_losses;
    into.messages_ignored += c.messages_ignored;
    into.messages_refused += c.messages_refused;
}
