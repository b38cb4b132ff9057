//! The event loop: one global virtual clock, an event queue ordered by
//! `(time, sequence number)`, and the driver side of the calling contract for
//! every node (persist, then send, then events; one timer per node).
//!
//! Scenarios script a [`Sim`] through plain method calls (`run_for`, `crash`,
//! `isolate`, ...); the checkers watch every output as it is processed.

use crate::bounds::{self, BoundInputs};
use crate::checker::{Check, Checker};
use crate::clock::NodeClock;
use crate::forger::{Forger, ForgerSpec, NodeView};
use crate::host::{Host, Inbound, MAX_PAUSED_INBOX};
use crate::network::{LinkParams, Network, NS_PER_MS};
use crate::spy::{Report as SpyReport, Spies, SpySpec};
use crate::stats::RunStats;
use crate::workload::{Reply, Request, WorkloadSpec};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::time::Duration;
use tenure_core::contract::{self, Driver, WriteFailed};
use tenure_core::{
    Config, Electorate, Event, HardState, Instant, Message, NodeId, Output, Protocol, ProtocolKind,
    Role, Term,
};
use tenure_replica::router::Forward;
use tenure_replica::ReplicaMessage;

mod elect;
mod kv;
mod membership;
mod partitions;
pub use kv::KvStats;
pub use partitions::{MAX_GROUP_PROPOSALS_IN_FLIGHT, MOVES_SLACK};

/// Events the queue may hold at once; more means a runaway feedback loop.
pub const MAX_QUEUED_EVENTS: usize = 1_000_000;
/// Times one node's timer may fire at the same global instant before the
/// simulator calls it a busy loop.
const MAX_TIMER_REFIRES: u32 = 64;
/// Leader elections kept in the log of a run.
pub const MAX_LEADER_LOG: usize = 100_000;
/// Heartbeats kept in the heartbeat log of a run (when enabled).
pub const MAX_HEARTBEAT_LOG: usize = 100_000;
/// Largest clock offset drawn for a node, in nanoseconds (its clock's origin is arbitrary).
const MAX_CLOCK_OFFSET_NS: u64 = 1_000_000_000_000;

/// How to build a simulated cluster.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Cluster size: the nodes (machines) of the run.
    pub nodes: usize,
    /// The bootstrap voters: nodes 1 to `voters` (all of them unless the
    /// run changes members; the others are spares, see
    /// [`crate::membership`]).
    pub voters: usize,
    /// Leader heartbeat interval.
    pub heartbeat: Duration,
    /// Election timeout.
    pub election_timeout: Duration,
    /// Give each node a random clock offset and a random rate within the
    /// core's `clock_drift_ppm` bound.
    pub clock_drift: bool,
    /// Simulated fsync: messages of an output that persisted leave this much later.
    pub fsync_ns: u64,
    /// The initial behaviour of every link.
    pub link: LinkParams,
    /// Print every input, output and fault to stderr (for replaying a seed).
    pub trace: bool,
    /// The election protocol every node runs.
    pub protocol: ProtocolKind,
    /// The key-value workload: a replica beside every elector, and clients.
    pub workload: Option<WorkloadSpec>,
}

impl SimConfig {
    /// Defaults: 100 ms heartbeats, 1 s election timeout, drifting clocks, 1 ms fsync, healthy links.
    pub fn new(nodes: usize) -> Self {
        SimConfig {
            nodes,
            voters: nodes,
            heartbeat: Duration::from_millis(100),
            election_timeout: Duration::from_millis(1000),
            clock_drift: true,
            fsync_ns: NS_PER_MS,
            link: LinkParams::HEALTHY,
            trace: false,
            protocol: ProtocolKind::Raft,
            workload: None,
        }
    }

    /// The core configuration of node `id`: the bootstrap voters, which
    /// do not hold `id` when it is a spare.
    pub fn core_config(&self, id: NodeId) -> Config {
        Config::new(id, self.bootstrap(), self.heartbeat, self.election_timeout)
    }

    /// The bootstrap voters, in order.
    pub fn bootstrap(&self) -> Vec<NodeId> {
        (1..=self.voters.clamp(1, self.nodes) as u64).map(NodeId).collect()
    }
}

/// A message between nodes: the elector's, or (with the key-value
/// workload) the replica's.
#[derive(Clone, Debug)]
enum Envelope {
    Elector(Message),
    Replica(ReplicaMessage),
    Forward(Forward),
}

#[derive(Debug)]
enum SimEvent {
    Deliver {
        from: usize,
        to: usize,
        msg: Envelope,
        sent_ns: u64,
        departs_ns: u64,
    },
    /// A workload client's timer (stale unless `gen` is the client's).
    ClientWake {
        client: usize,
        gen: u64,
    },
    /// A client's request reaches node index `node`.
    ToNode {
        node: usize,
        req: Request,
    },
    /// A node's answer reaches its client; it never left if node index
    /// `from` crashed between `sent_ns` and `departs_ns`.
    ToClient {
        from: usize,
        reply: Reply,
        sent_ns: u64,
        departs_ns: u64,
    },
    Timer {
        node: usize,
        gen: u64,
    },
    /// The forger's next burst (stale unless `gen` is the forger's current one).
    ForgerBurst {
        gen: u64,
    },
    /// A spy reports node index `about`'s incarnation `incarnation` dead: a
    /// notice leaves for every other node, over `about`'s links.
    SpyReport {
        about: usize,
        incarnation: u64,
    },
    /// A spy's death notice reaches node index `to`'s driver.
    Notice {
        about: usize,
        incarnation: u64,
        to: usize,
    },
    /// A forged frame: `msg` for node index `to`, claiming to come from
    /// `from` (a bystander, see [`crate::forger::Frame::from_bystander`]).
    Forged {
        to: usize,
        from: NodeId,
        msg: Message,
        from_bystander: bool,
    },
    /// The log write of a replica output of node index `node` is durable:
    /// the electorate it carried goes to the elector before its messages
    /// leave (stale unless `epoch` is still the replica's, and dropped if
    /// a newer one, `seq` higher, was handed already).
    Electorate {
        node: usize,
        epoch: u64,
        seq: u64,
        electorate: Electorate,
    },
    /// The log write of a replica output of node index `node` is durable:
    /// the replica hears so (stale unless `epoch` is still the replica's).
    Persisted {
        node: usize,
        epoch: u64,
    },
}

/// An event in the queue. The event is boxed: the queue's heap moves its
/// elements on every push and pop, and an event inline (a message with its
/// entries) made those moves most of the time of a run with 100,000 apps.
struct Scheduled {
    time: u64,
    seq: u64,
    event: Box<SimEvent>,
}

impl PartialEq for Scheduled {
    fn eq(&self, other: &Self) -> bool {
        (self.time, self.seq) == (other.time, other.seq)
    }
}
impl Eq for Scheduled {}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scheduled {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.time, self.seq).cmp(&(other.time, other.seq))
    }
}

/// One leader election, as logged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaderRecord {
    /// Global time, ns.
    pub time_ns: u64,
    /// The new leader.
    pub node: NodeId,
    /// Its term.
    pub term: Term,
}

/// A heartbeat sent, as logged when [`Sim::log_heartbeats`] is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeartbeatRecord {
    /// Global time, ns.
    pub time_ns: u64,
    /// The sender.
    pub from: NodeId,
    /// The term it claims.
    pub term: Term,
}

/// A leader failure waiting for the next leader (for failover statistics).
#[derive(Clone, Copy, Debug)]
struct PendingFailover {
    since_ns: u64,
    messages_at: u64,
    elections_at: u64,
    node: usize,
    term: Term,
    /// How a spy reported the failed leader's crash, if spies watch.
    spy: Option<SpyReport>,
}

enum Input {
    Message(NodeId, Message),
    Timer,
    /// A death notice about node `.0`'s incarnation `.1`.
    PeerDead(NodeId, u64),
    Replica(NodeId, ReplicaMessage),
    Forward(NodeId, Forward),
    Client(Request),
}

impl From<Inbound> for Input {
    fn from(i: Inbound) -> Input {
        match i {
            Inbound::Elector(from, m) => Input::Message(from, m),
            Inbound::Replica(from, m) => Input::Replica(from, m),
            Inbound::Forward(from, f) => Input::Forward(from, f),
            Inbound::Client(r) => Input::Client(r),
            Inbound::PeerDead { peer, incarnation } => Input::PeerDead(peer, incarnation),
        }
    }
}

/// A simulated cluster running the real core.
pub struct Sim {
    /// The run's seed.
    pub seed: u64,
    /// How the cluster was built.
    pub cfg: SimConfig,
    now: u64,
    queue: BinaryHeap<Reverse<Scheduled>>,
    seq: u64,
    hosts: Vec<Host>,
    /// The network, for scripted faults.
    pub net: Network,
    rng: Pcg64Mcg,
    /// The checkers.
    pub checker: Checker,
    /// Statistics of the run.
    pub stats: RunStats,
    pending_failover: Option<PendingFailover>,
    /// Set once the first stable leader was seen: leader changes count after it.
    first_stable_seen: bool,
    last_leader: Option<usize>,
    /// Every leader elected, in order.
    pub leader_log: Vec<LeaderRecord>,
    /// Heartbeats sent, when enabled.
    pub heartbeat_log: Option<Vec<HeartbeatRecord>>,
    timer_refire: (u64, usize, u32),
    /// The forger, once started (kept after it stops, for its counts).
    forger: Option<Forger>,
    /// Bumped when the forger starts or stops: older bursts are stale.
    forger_gen: u64,
    /// Set once a frame may have been forged: from then on a core that
    /// panics on an input is a crashed node and a violation, not the end
    /// of the run.
    frames_forged: bool,
    /// The key-value workload, when it runs.
    kv: Option<Box<kv::KvWorld>>,
    /// The spies that report crashes, when they watch (see [`crate::spy`]).
    spies: Option<Spies>,
    /// How the spies reported the latest crash.
    last_spy_report: Option<SpyReport>,
    /// The configuration the liveness and failover bounds are computed
    /// from: every node a voter.
    bound_cfg: Config,
}

impl Sim {
    /// A cluster of fresh nodes, all started at global time zero.
    pub fn new(cfg: SimConfig, seed: u64) -> Self {
        assert!(cfg.nodes >= 1, "a cluster needs a node");
        let mut rng = Pcg64Mcg::seed_from_u64(seed);
        let drift = i64::from(cfg.core_config(NodeId(1)).clock_drift_ppm);
        let mut hosts = Vec::with_capacity(cfg.nodes);
        for i in 0..cfg.nodes {
            let id = NodeId(i as u64 + 1);
            let core = cfg.core_config(id);
            let valid = if core.voters.contains(&id) {
                core.validate_for(cfg.protocol)
            } else {
                core.validate_settings_for(cfg.protocol)
            };
            valid.expect("the simulator's core configuration must be valid");
            let clock = if cfg.clock_drift {
                NodeClock::new(rng.gen_range(0..MAX_CLOCK_OFFSET_NS), rng.gen_range(-drift..=drift))
            } else {
                NodeClock::PERFECT
            };
            hosts.push(Host::new(cfg.protocol, core, clock, seed, 0));
        }
        // The bounds count every node as a voter: with changes of members
        // any of them may be one.
        let bound_cfg = Config {
            voters: (1..=cfg.nodes as u64).map(NodeId).collect(),
            ..cfg.core_config(NodeId(1))
        };
        let mut sim = Sim {
            seed,
            bound_cfg,
            net: Network::new(cfg.nodes, cfg.link),
            cfg,
            now: 0,
            queue: BinaryHeap::new(),
            seq: 0,
            hosts,
            rng,
            checker: Checker::new(seed, 0),
            stats: RunStats::default(),
            pending_failover: None,
            first_stable_seen: false,
            last_leader: None,
            leader_log: Vec::new(),
            heartbeat_log: None,
            timer_refire: (u64::MAX, 0, 0),
            forger: None,
            forger_gen: 0,
            frames_forged: false,
            kv: None,
            spies: None,
            last_spy_report: None,
        };
        sim.checker = Checker::new(seed, sim.hosts.len());
        if let Some(spec) = sim.cfg.workload.clone() {
            sim.kv_init(spec);
        }
        for i in 0..sim.hosts.len() {
            sim.drain(i);
        }
        sim
    }

    /// Starts logging every heartbeat sent (for scenario assertions).
    pub fn log_heartbeats(&mut self) {
        self.heartbeat_log = Some(Vec::new());
    }

    /// Global simulated time, ns.
    pub fn now_ns(&self) -> u64 {
        self.now
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.hosts.len()
    }

    /// True for an empty cluster (never: [`Sim::new`] requires a node).
    pub fn is_empty(&self) -> bool {
        self.hosts.is_empty()
    }

    /// The node at index `i` (id `i + 1`).
    pub fn host(&self, i: usize) -> &Host {
        &self.hosts[i]
    }

    /// The simulator's own random source (for fault schedules).
    pub fn rng(&mut self) -> &mut Pcg64Mcg {
        &mut self.rng
    }

    fn schedule(&mut self, time: u64, event: SimEvent) {
        assert!(self.queue.len() < MAX_QUEUED_EVENTS, "event queue overflow: runaway message loop");
        self.seq += 1;
        self.queue.push(Reverse(Scheduled { time, seq: self.seq, event: Box::new(event) }));
    }

    /// Processes every event up to and including global time `t_ns`.
    pub fn run_until(&mut self, t_ns: u64) {
        // What a scenario changed since the last event (a leader paused,
        // crashed or cut off at `now`) is sampled at `now`: the deadline
        // ledger's time without a leader starts at the fault, not at the
        // next event after it (ranked seed 130 of the partitions workload
        // with membership changes: a sole voter paused for 1.4 s, 0.5 s of
        // it uncounted, and a lease due in the pause reported as overrun).
        self.sample_leadership();
        while self.step_before(t_ns) {}
        self.now = self.now.max(t_ns);
        self.stats.sim_ns = self.now;
    }

    /// Runs for `d` of simulated time.
    pub fn run_for(&mut self, d: Duration) {
        self.run_until(self.now + dur_ns(d));
    }

    /// Processes the next event if it is due no later than `t_ns`.
    fn step_before(&mut self, t_ns: u64) -> bool {
        match self.queue.peek() {
            Some(Reverse(top)) if top.time <= t_ns => {}
            _ => return false,
        }
        let Reverse(s) = self.queue.pop().expect("peeked");
        self.now = s.time;
        self.dispatch(*s.event);
        self.sample_leadership();
        true
    }

    /// Runs until `cond` holds (checked after every event) or until `deadline_ns`.
    /// Returns the time `cond` first held.
    pub fn run_until_cond(
        &mut self,
        deadline_ns: u64,
        mut cond: impl FnMut(&Sim) -> bool,
    ) -> Option<u64> {
        // As in `run_until`.
        self.sample_leadership();
        if cond(self) {
            return Some(self.now);
        }
        while self.step_before(deadline_ns) {
            if cond(self) {
                self.stats.sim_ns = self.now;
                return Some(self.now);
            }
        }
        self.now = self.now.max(deadline_ns);
        self.stats.sim_ns = self.now;
        None
    }

    fn dispatch(&mut self, event: SimEvent) {
        match event {
            SimEvent::Deliver { from, to, msg: Envelope::Replica(msg), sent_ns, departs_ns } => {
                self.deliver_replica(from, to, msg, sent_ns, departs_ns)
            }
            SimEvent::Deliver { from, to, msg: Envelope::Forward(f), sent_ns, departs_ns } => {
                self.deliver_forward(from, to, f, sent_ns, departs_ns)
            }
            SimEvent::Deliver { from, to, msg: Envelope::Elector(msg), sent_ns, departs_ns } => {
                if self.net.is_blocked(from, to) {
                    return;
                }
                // A sender that crashed before its fsync finished never sent.
                if self.hosts[from].last_crash_ns.is_some_and(|c| c >= sent_ns && c < departs_ns) {
                    return;
                }
                if self.sender_wiped(from, sent_ns) || self.identity_refused(from, to) {
                    return;
                }
                let from_id = self.hosts[from].id;
                self.arrive(to, Inbound::Elector(from_id, msg));
            }
            SimEvent::ClientWake { client, gen } => self.client_wake(client, gen),
            SimEvent::ToNode { node, req } => self.request_arrives(node, req),
            SimEvent::ToClient { from, reply, sent_ns, departs_ns } => {
                self.reply_arrives(from, reply, sent_ns, departs_ns)
            }
            SimEvent::Timer { node, gen } => {
                let host = &self.hosts[node];
                if gen != host.timer_gen || !host.is_up() || host.paused {
                    return;
                }
                self.hosts[node].timer_at = None;
                if self.timer_refire.0 == self.now && self.timer_refire.1 == node {
                    self.timer_refire.2 += 1;
                    if self.timer_refire.2 > MAX_TIMER_REFIRES {
                        let id = self.hosts[node].id;
                        self.checker.fail(
                            self.now,
                            Check::Liveness,
                            format!("{id:?}'s timer keeps firing at the same instant (busy loop)"),
                        );
                        return;
                    }
                } else {
                    self.timer_refire = (self.now, node, 0);
                }
                self.input(node, Input::Timer);
            }
            SimEvent::ForgerBurst { gen } => {
                if gen == self.forger_gen {
                    self.forger_burst();
                }
            }
            SimEvent::Forged { to, from, msg, from_bystander } => {
                self.deliver_forged(to, from, msg, from_bystander)
            }
            SimEvent::SpyReport { about, incarnation } => self.spy_reports(about, incarnation),
            SimEvent::Electorate { node, epoch, seq, electorate } => {
                self.electorate_arrives(node, epoch, seq, electorate)
            }
            SimEvent::Persisted { node, epoch } => self.persisted(node, epoch),
            SimEvent::Notice { about, incarnation, to } => {
                if self.net.is_blocked(about, to) {
                    return;
                }
                let peer = self.hosts[about].id;
                self.arrive(to, Inbound::PeerDead { peer, incarnation });
            }
        }
    }

    fn input(&mut self, i: usize, input: Input) {
        if let Input::PeerDead(peer, incarnation) = input {
            if !self.notice_is_current(peer, incarnation) {
                return;
            }
        }
        let now = self.now;
        let host = &mut self.hosts[i];
        let id = host.id;
        let local = host.local_now(now);
        let el = host.elector_mut().expect("inputs go to running nodes");
        if el.is_leader(local) {
            let term = el.hard_state().term;
            self.checker.on_input_as_leader(now, id, term);
        }
        if self.cfg.trace {
            let what = match &input {
                Input::Message(from, m) => format!("from {from:?} {m:?}"),
                Input::Timer => "timer".to_string(),
                Input::PeerDead(peer, k) => format!("notice: {peer:?} (incarnation {k}) is dead"),
                Input::Replica(from, m) => format!("from {from:?} {m:?}"),
                Input::Forward(from, f) => format!("from {from:?} {f:?}"),
                Input::Client(r) => format!("client {r:?}"),
            };
            eprintln!("{:>12.3} {id:?} local {local:?} <- {what}", now as f64 / 1e6);
        }
        let input = match input {
            Input::Replica(from, msg) => {
                self.replica_message(i, local, from, msg);
                return self.drain(i);
            }
            Input::Client(req) => {
                self.client_request(i, local, req);
                return self.drain(i);
            }
            Input::Forward(from, f) => {
                self.forward_in(i, local, from, f);
                return self.drain(i);
            }
            // With the workload the timer serves the replica too: the
            // elector's timeout only when due.
            Input::Timer if self.kv.is_some() && !self.elector_due(i, local) => {
                return self.drain(i);
            }
            other => other,
        };
        let el = self.hosts[i].elector_mut().expect("running");
        if !self.frames_forged {
            match input {
                Input::Message(from, msg) => el.handle_message(local, from, msg),
                Input::Timer => el.handle_timeout(local),
                Input::PeerDead(peer, _) => el.handle_peer_dead(local, peer),
                Input::Replica(..) | Input::Forward(..) | Input::Client(_) => {
                    unreachable!("handled above")
                }
            }
        } else if let Err(why) = handle_catching_panics(el, local, input) {
            // A core that panics on a peer's frame is a crashed node; the
            // checkers judge the rest.
            let what = format!("{id:?} panicked on {why}");
            self.checker.fail(now, Check::CoreInvariant, what);
            self.crash(i);
            return;
        }
        self.drain(i);
    }

    /// Handles the node's output per the calling contract, then re-arms its timer.
    fn drain(&mut self, i: usize) {
        self.drain_elector(i);
        if self.hosts[i].kv.is_some() {
            self.drive_replica(i);
        }
        self.rearm(i);
    }

    /// Handles the elector's output per the calling contract (persist, then
    /// send, then events), and nothing else.
    fn drain_elector(&mut self, i: usize) {
        /// The simulator's side of the calling contract for host `i`.
        struct Io<'a> {
            sim: &'a mut Sim,
            i: usize,
            id: NodeId,
            now: u64,
            /// When the messages of the output being handled leave.
            departs: u64,
        }
        impl Driver for Io<'_> {
            type Node = dyn Protocol;
            fn node(&mut self) -> &mut Self::Node {
                self.sim.hosts[self.i].elector_mut().expect("running")
            }
            fn output(&mut self, out: &Output) {
                if self.sim.cfg.trace {
                    eprintln!(
                        "{:>12.3} {:?} -> persist {:?} (storage failing: {}) send {:?} events {:?}",
                        self.now as f64 / 1e6,
                        self.id,
                        out.persist,
                        self.sim.hosts[self.i].storage_failing,
                        out.messages,
                        out.events
                    );
                }
                let fsync = if out.persist.is_some() { self.sim.cfg.fsync_ns } else { 0 };
                self.departs = self.now + fsync;
            }
            fn persist(&mut self, hs: HardState) -> Result<(), WriteFailed> {
                let host = &mut self.sim.hosts[self.i];
                if host.storage_failing {
                    return Err(WriteFailed);
                }
                host.durable = hs;
                self.sim.checker.on_persist(self.now, self.i, self.id, hs);
                Ok(())
            }
            fn send(&mut self, to: NodeId, msg: Message) {
                self.sim.send(self.i, to, msg, self.departs);
            }
            fn event(&mut self, ev: Event) {
                self.sim.on_event(self.i, ev);
            }
        }

        let now = self.now;
        let local = self.hosts[i].local_now(now);
        let id = self.hosts[i].id;
        contract::drain(&mut Io { sim: self, i, id, now, departs: now }, local);
        let term = self.hosts[i].elector().expect("running").hard_state().term;
        self.checker.on_term(now, i, id, term);
    }

    fn rearm(&mut self, i: usize) {
        let now = self.now;
        let keeper = self.keeper_deadline(i);
        let groups = self.groups_deadline(i);
        let host = &mut self.hosts[i];
        let Some(el) = host.elector() else { return };
        let mut deadline = el.poll_timeout();
        if let Some(r) = host.kv.as_ref().and_then(|kv| kv.replica.as_ref()) {
            deadline = deadline.min(r.poll_timeout());
        }
        for at in [keeper, groups].into_iter().flatten() {
            deadline = deadline.min(at);
        }
        if deadline == Instant::MAX {
            host.timer_gen += 1;
            host.timer_at = None;
            return;
        }
        let at = host.clock.global_at(deadline).max(now);
        if host.timer_at == Some(at) {
            return;
        }
        host.timer_gen += 1;
        host.timer_at = Some(at);
        let gen = host.timer_gen;
        self.schedule(at, SimEvent::Timer { node: i, gen });
    }

    fn send(&mut self, from: usize, to: NodeId, msg: Message, departs_ns: u64) {
        self.stats.messages_sent += 1;
        if let Some(f) = self.forger.as_mut() {
            f.sniff(from, &msg);
        }
        let from_id = self.hosts[from].id;
        if let Some(term) = msg.vote_grant() {
            self.checker.on_vote_granted(self.now, from_id, term, to);
        }
        if let Some(term) = msg.heartbeat_term() {
            if let Some(log) = self.heartbeat_log.as_mut().filter(|l| l.len() < MAX_HEARTBEAT_LOG) {
                log.push(HeartbeatRecord { time_ns: self.now, from: from_id, term });
            }
        }
        let Some(to_idx) = self.index_of(to) else { return };
        let delays = self.net.transmit(&mut self.rng, from, to_idx);
        for &d in delays.as_slice() {
            let event = SimEvent::Deliver {
                from,
                to: to_idx,
                msg: Envelope::Elector(msg.clone()),
                sent_ns: self.now,
                departs_ns,
            };
            self.schedule(departs_ns + d, event);
        }
    }

    /// True if node index `from` lost its data since `sent_ns`: what it
    /// sent before came from a data directory that is no more, which its
    /// peers no longer accept (a real node names its directory at the
    /// peer handshake).
    fn sender_wiped(&mut self, from: usize, sent_ns: u64) -> bool {
        let wiped = self.hosts[from].wiped_within(sent_ns, self.now);
        if wiped {
            if let Some(m) = self.kv.as_mut().and_then(|k| k.members.as_mut()) {
                m.operator.stats.stale_directory_drops += 1;
            }
        }
        wiped
    }

    /// True if the connection from node index `from` to `to` would be
    /// refused at its handshake for the data directories: the configuration
    /// either one's log holds names the other with another directory than
    /// the one it has now (a wiped node is not the member it was; a real
    /// node checks it at the peer handshake, both ways), unless the other's
    /// configuration is newer (`Net::directory_mismatch`: it may have been
    /// added again under its id since).
    pub(super) fn identity_refused(&self, from: usize, to: usize) -> bool {
        let replica = |r: usize| self.hosts[r].kv.as_ref().and_then(|kv| kv.replica.as_ref());
        let names_another = |r: usize, x: usize| {
            let Some(rep) = replica(r) else { return false };
            let config = |r: &tenure_replica::Replica<_>| {
                let at = r.membership().at;
                tenure_core::ConfigId { token: at.token, index: at.index }
            };
            let newer = replica(x).is_some_and(|other| config(other) > config(rep));
            let x = &self.hosts[x];
            !newer
                && rep
                    .membership()
                    .members
                    .get(x.id)
                    .and_then(|m| m.directory)
                    .is_some_and(|d| d != x.directory)
        };
        names_another(to, from) || names_another(from, to)
    }

    fn index_of(&self, id: NodeId) -> Option<usize> {
        let i = usize::try_from(id.0).ok()?.checked_sub(1)?;
        (i < self.hosts.len()).then_some(i)
    }

    fn on_event(&mut self, i: usize, ev: Event) {
        if let (Event::LeaderChanged { leader, fencing_token, .. }, Some(kv)) =
            (&ev, self.hosts[i].kv.as_mut())
        {
            kv.views.push((*leader, *fencing_token));
        }
        if let Event::Halted { reason } = &ev {
            let what = format!("{:?} halted: {reason}", self.hosts[i].id);
            self.checker.fail(self.now, Check::CoreInvariant, what);
            return;
        }
        let Event::RoleChanged { role, term, .. } = ev else { return };
        match role {
            Role::Candidate => {
                self.stats.candidate_terms.insert(term.0);
            }
            Role::Leader => self.on_become_leader(i, term),
            Role::Follower | Role::PreCandidate => {}
        }
    }

    fn on_become_leader(&mut self, i: usize, term: Term) {
        let now = self.now;
        let id = self.hosts[i].id;
        let still_leading: Vec<(NodeId, Term)> = (0..self.hosts.len())
            .filter(|&j| j != i && self.hosts[j].is_leader_at(now))
            .map(|j| {
                let h = &self.hosts[j];
                (h.id, h.elector().expect("leading nodes run").hard_state().term)
            })
            .collect();
        let token = self.hosts[i].elector().and_then(|e| e.status().fencing_token).map(|t| t.0);
        self.checker.on_become_leader(now, id, term, token, &still_leading);
        for what in self.mistaken_votes(i, term) {
            self.checker.fail(now, Check::MistakenIdentity, what);
        }
        self.stats.leader_terms.insert(term.0);
        if self.leader_log.len() < MAX_LEADER_LOG {
            self.leader_log.push(LeaderRecord { time_ns: now, node: id, term });
        }
        if self.first_stable_seen && self.last_leader != Some(i) {
            self.stats.leader_changes += 1;
        }
        self.last_leader = Some(i);
        if let Some(p) = self.pending_failover.filter(|p| term > p.term) {
            self.stats.failovers_ns.push(now - p.since_ns);
            if p.spy.is_some_and(SpyReport::on_time) {
                self.stats.failovers_on_notice_ns.push(now - p.since_ns);
            }
            self.stats.failover_messages.push(self.stats.messages_sent - p.messages_at);
            self.stats.failover_elections.push(self.elections_started() - p.elections_at);
            self.pending_failover = None;
        }
    }

    // ---- Spies ----

    /// From now on, spies watch every crash and report it as `spec` says
    /// (see [`crate::spy`]). Their draws come from their own generator, so
    /// a run in which nothing crashes is the same run as without them.
    pub fn set_spies(&mut self, spec: SpySpec) {
        self.trace_fault(&format!("spies: {spec}"));
        self.spies = Some(Spies::new(spec, self.seed));
    }

    /// How the spies reported the latest crash (`None` without spies or crashes).
    pub fn last_spy_report(&self) -> Option<SpyReport> {
        self.last_spy_report
    }

    /// What the spies did so far, if they watch.
    pub fn spy_stats(&self) -> Option<crate::spy::SpyStats> {
        self.spies.as_ref().map(|s| s.stats)
    }

    /// A spy that lies: reports node `i`, alive, dead to every other node
    /// now (over the network, as a true report would go). Never done by the
    /// spies of a run ([`Sim::set_spies`]); it exists to show what the trust
    /// assumption buys: the checkers see the second leader a false notice
    /// elects while the first one's lease runs.
    pub fn lie_dead(&mut self, i: usize) {
        self.trace_fault(&format!("a spy lies: n{} is dead", i + 1));
        if self.spies.is_none() {
            self.spies = Some(Spies::new(SpySpec::RELIABLE, self.seed));
        }
        let incarnation = self.hosts[i].incarnation;
        self.spy_reports(i, incarnation);
    }

    /// Node `i` just crashed: its spy decides how to report it.
    fn spy_on_crash(&mut self, i: usize) {
        let et = dur_ns(self.cfg.election_timeout);
        let Some(spies) = self.spies.as_mut() else { return };
        let (report, after) = spies.on_crash(et);
        self.last_spy_report = Some(report);
        if let Some(p) = self.pending_failover.as_mut().filter(|p| p.node == i && p.spy.is_none()) {
            p.spy = Some(report);
        }
        // The incarnation that died: `Host::restart` bumps it.
        let incarnation = self.hosts[i].incarnation;
        self.trace_fault(&format!("spy of n{} reports it {report:?} after {after:?} ns", i + 1));
        for d in after {
            self.schedule(self.now + d, SimEvent::SpyReport { about: i, incarnation });
        }
    }

    /// A spy on node `about`'s host reports its incarnation `incarnation`
    /// dead: a notice to every other node over the links from `about`.
    fn spy_reports(&mut self, about: usize, incarnation: u64) {
        let Some(spies) = self.spies.as_mut() else { return };
        let mut notices = Vec::new();
        for to in (0..self.hosts.len()).filter(|&to| to != about) {
            for &d in self.net.transmit(spies.rng(), about, to).as_slice() {
                notices.push((self.now + d, to));
            }
        }
        for (at, to) in notices {
            self.schedule(at, SimEvent::Notice { about, incarnation, to });
        }
    }

    /// The driver's check of a death notice about `peer`'s incarnation
    /// `incarnation`: only one about its current incarnation reaches the core
    /// (a restarted node's old incarnation is dropped). Counted. The driver
    /// cannot tell a dead node from a live one: a spy that reported a live
    /// node's current incarnation would pass (see [`Sim::lie_dead`]).
    fn notice_is_current(&mut self, peer: NodeId, incarnation: u64) -> bool {
        let current = self.index_of(peer).is_some_and(|p| self.hosts[p].incarnation == incarnation);
        if let Some(s) = self.spies.as_mut() {
            s.stats.notices_arrived += 1;
            if current {
                s.stats.notices_delivered += 1;
            } else {
                s.stats.notices_stale += 1;
            }
        }
        current
    }

    // ---- The forger ----

    /// Starts a forger of `spec` (see [`crate::forger`]): from now on, at
    /// random times, it delivers frames to the nodes as if other voters had
    /// sent them. Restarting it keeps its counts.
    pub fn start_forger(&mut self, spec: &ForgerSpec) {
        self.trace_fault(&format!("forger starts: {spec}"));
        let (protocol, n, seed) = (self.cfg.protocol, self.hosts.len(), self.seed);
        let et = self.cfg.election_timeout;
        let forger =
            self.forger.get_or_insert_with(|| Forger::new(spec.clone(), protocol, n, et, seed));
        let first = forger.first_delay_ns();
        self.frames_forged = true;
        self.forger_gen += 1;
        let gen = self.forger_gen;
        self.schedule(self.now + first, SimEvent::ForgerBurst { gen });
    }

    /// Stops the forger: no frame is forged after now (frames already on
    /// their way, at most a few milliseconds, still arrive).
    pub fn stop_forger(&mut self) {
        if self.forger.is_some() {
            self.trace_fault("forger stops");
        }
        self.forger_gen += 1;
    }

    /// Delivers one forged frame to node index `to` a millisecond from now,
    /// as if voter `from` had sent it (for scripted attacks; see
    /// [`crate::forger`] for the random ones). Like the forger's, it reaches
    /// `to` whatever the partitions; and it turns on the same handling of a
    /// core that panics.
    pub fn forge(&mut self, to: usize, from: NodeId, msg: Message) {
        self.trace_fault(&format!("forge as {from:?} to n{}: {msg:?}", to + 1));
        self.frames_forged = true;
        let event = SimEvent::Forged { to, from, msg, from_bystander: false };
        self.schedule(self.now + NS_PER_MS, event);
    }

    /// The forger, if one was started.
    pub fn forger(&self) -> Option<&Forger> {
        self.forger.as_ref()
    }

    /// What the forger sees of every node now.
    fn forger_view(&self) -> Vec<NodeView> {
        let now = self.now;
        self.hosts
            .iter()
            .map(|h| {
                let local_now = h.local_at(now);
                match h.elector() {
                    Some(e) => {
                        let st = e.status();
                        NodeView {
                            id: h.id,
                            up: true,
                            term: st.term,
                            role: st.role,
                            leader: st.leader,
                            lsn: st.lsn,
                            local_now,
                        }
                    }
                    None => NodeView {
                        id: h.id,
                        up: false,
                        term: h.durable.term,
                        role: Role::Follower,
                        leader: None,
                        lsn: None,
                        local_now,
                    },
                }
            })
            .collect()
    }

    fn forger_burst(&mut self) {
        let view = self.forger_view();
        let Some(forger) = self.forger.as_mut() else { return };
        let (frames, gap) = forger.burst(self.now, &view);
        for f in frames {
            if self.cfg.trace {
                eprintln!(
                    "{:>12.3} FORGED as {:?} to n{}: {:?}",
                    self.now as f64 / 1e6,
                    f.from,
                    f.to + 1,
                    f.msg
                );
            }
            let event = SimEvent::Forged {
                to: f.to,
                from: f.from,
                msg: f.msg,
                from_bystander: f.from_bystander,
            };
            self.schedule(self.now + f.delay_ns, event);
        }
        let gen = self.forger_gen;
        self.schedule(self.now + gap, SimEvent::ForgerBurst { gen });
    }

    /// The forger reaches every node directly, whatever the partitions
    /// between nodes; a crashed node loses the frame, a paused one queues it.
    /// A frame for a bystander that has meanwhile become the destination's
    /// leader (or leads) is withheld, and so is one for a paused node (by
    /// the time it resumes, the bystander may lead).
    fn deliver_forged(&mut self, to: usize, from: NodeId, msg: Message, from_bystander: bool) {
        if from_bystander && (self.hosts[to].paused || self.speaks_for_a_leader(to, from)) {
            return;
        }
        self.arrive(to, Inbound::Elector(from, msg));
    }

    /// Hands `inbound` to node `to`: dropped while it is down, queued (up to
    /// [`MAX_PAUSED_INBOX`]) while it is paused, fed to it now otherwise.
    fn arrive(&mut self, to: usize, inbound: Inbound) {
        let host = &mut self.hosts[to];
        if !host.is_up() {
            return;
        }
        if host.paused {
            if host.inbox.len() < MAX_PAUSED_INBOX {
                host.inbox.push_back(inbound);
            }
            return;
        }
        self.input(to, inbound.into());
    }

    /// Whether `from` is in the leader role or is the leader node index
    /// `to` knows.
    fn speaks_for_a_leader(&self, to: usize, from: NodeId) -> bool {
        let leads = self
            .index_of(from)
            .and_then(|i| self.hosts[i].elector())
            .is_some_and(|e| e.status().role == Role::Leader);
        let followed = self.hosts[to].elector().is_some_and(|e| e.status().leader == Some(from));
        leads || followed
    }

    // ---- Observation ----

    /// Indices of running nodes that lead now by their own clocks.
    pub fn leaders(&self) -> Vec<usize> {
        (0..self.hosts.len()).filter(|&i| self.hosts[i].is_leader_at(self.now)).collect()
    }

    /// The stable leader, if there is one: exactly one node leads by its clock,
    /// it is not paused, and every running, unpaused node connected to it both
    /// ways names it as leader.
    pub fn stable_leader(&self) -> Option<usize> {
        let leaders = self.leaders();
        let [l] = leaders[..] else { return None };
        if self.hosts[l].paused {
            return None;
        }
        let lid = self.hosts[l].id;
        let electorate = self.hosts[l].elector().map(|e| e.electorate())?;
        // Only the members of the leader's configuration follow it (all
        // nodes, unless the run changes members).
        let agree = (0..self.hosts.len()).filter(|&y| y != l).all(|y| {
            let h = &self.hosts[y];
            if !electorate.is_member(h.id) {
                return true;
            }
            let connected = !self.net.is_blocked(l, y) && !self.net.is_blocked(y, l);
            match h.elector() {
                Some(e) if connected && !h.paused => e.status().leader == Some(lid),
                _ => true,
            }
        });
        agree.then_some(l)
    }

    /// Runs until there is a stable leader or `within` has passed; returns its
    /// index and the time it became stable. Leader changes count from the first success.
    pub fn wait_for_stable_leader(&mut self, within: Duration) -> Option<(usize, u64)> {
        let deadline = self.now + dur_ns(within);
        let t = self.run_until_cond(deadline, |s| s.stable_leader().is_some())?;
        let l = self.stable_leader().expect("condition held");
        if !self.first_stable_seen {
            self.first_stable_seen = true;
            self.last_leader = Some(l);
        }
        Some((l, t))
    }

    /// The role of node `i`, unless it is down.
    pub fn role_of(&self, i: usize) -> Option<Role> {
        self.hosts[i].elector().map(|e| e.status().role)
    }

    /// The highest term any running node is in.
    pub fn max_term(&self) -> Term {
        self.hosts
            .iter()
            .filter_map(|h| h.elector())
            .map(|e| e.hard_state().term)
            .max()
            .unwrap_or_default()
    }

    /// The term of node `i` (its durable term while crashed).
    pub fn term_of(&self, i: usize) -> Term {
        let h = &self.hosts[i];
        h.elector().map_or(h.durable.term, |e| e.hard_state().term)
    }

    /// Election rounds started so far, summed over nodes and incarnations.
    pub fn elections_started(&self) -> u64 {
        self.hosts.iter().map(|h| h.total_counters().elections_started).sum()
    }

    /// Finishes the run: fills in the counters-based statistics.
    pub fn finish(&mut self) -> RunStats {
        self.stats.elections = self.elections_started();
        if let Some(f) = &self.forger {
            self.stats.forged = f.sent.clone();
        }
        self.stats.spy = self.spy_stats();
        self.stats.sim_ns = self.now;
        self.stats.clone()
    }

    // ---- Bounds ----

    /// Largest round trip the network can impose now, fsync included.
    pub fn max_rtt_ns(&self) -> u64 {
        2 * (self.net.max_delay_ns() + self.cfg.fsync_ns)
    }

    fn bound_inputs(&self) -> BoundInputs<'_> {
        BoundInputs {
            protocol: self.cfg.protocol,
            cfg: &self.bound_cfg,
            max_rtt_ns: self.max_rtt_ns(),
        }
    }

    /// The liveness bound after healing, per protocol (see [`crate::bounds`]).
    pub fn liveness_bound(&self) -> Duration {
        bounds::liveness(self.bound_inputs())
    }

    /// The failover bound after a leader crash, per protocol (see [`crate::bounds`]).
    pub fn failover_bound(&self) -> Duration {
        bounds::failover(self.bound_inputs())
    }

    /// The failover bound after a leader crash that a spy reported on time
    /// (see [`crate::bounds::notice_failover`]).
    pub fn notice_failover_bound(&self) -> Duration {
        bounds::notice_failover(self.bound_inputs())
    }

    /// How long a stable leader must stay for the liveness check to pass.
    pub fn stability_window(&self) -> Duration {
        self.bound_cfg.election_timeout * 5
    }

    // ---- Faults ----

    pub(crate) fn trace_fault(&self, what: &str) {
        if self.cfg.trace {
            eprintln!("{:>12.3} FAULT {what}", self.now as f64 / 1e6);
        }
    }

    fn note_leader_failure(&mut self, i: usize) {
        if self.pending_failover.is_none() && self.hosts[i].is_leader_at(self.now) {
            let term = self.term_of(i);
            self.pending_failover = Some(PendingFailover {
                since_ns: self.now,
                messages_at: self.stats.messages_sent,
                elections_at: self.elections_started(),
                node: i,
                term,
                spy: None,
            });
        }
    }

    /// Crashes node `i` (no-op if it is down).
    pub fn crash(&mut self, i: usize) {
        if !self.hosts[i].is_up() {
            return;
        }
        self.trace_fault(&format!("crash n{}", i + 1));
        self.note_leader_failure(i);
        self.tear_log(i);
        self.hosts[i].crash(self.now);
        self.spy_on_crash(i);
    }

    /// Restarts node `i` from its durable state (no-op if it is up, or
    /// retired: removed and wiped, see [`crate::membership`]).
    pub fn restart(&mut self, i: usize) {
        if self.hosts[i].is_up() || self.hosts[i].retired {
            return;
        }
        self.trace_fault(&format!("restart n{}", i + 1));
        self.hosts[i].restart(self.now);
        let (id, term) = (self.hosts[i].id, self.hosts[i].durable.term);
        self.checker.on_restart(self.now, i, id, term);
        if self.hosts[i].kv.is_some() {
            self.rebuild_replica(i);
        }
        self.drain(i);
    }

    /// Freezes node `i`: it handles nothing until resumed.
    pub fn pause(&mut self, i: usize) {
        if !self.hosts[i].is_up() || self.hosts[i].paused {
            return;
        }
        self.trace_fault(&format!("pause n{}", i + 1));
        self.note_leader_failure(i);
        self.hosts[i].paused = true;
    }

    /// Resumes node `i`: it handles what queued up, with its now-later clock,
    /// then its timer.
    pub fn resume(&mut self, i: usize) {
        if !self.hosts[i].paused {
            return;
        }
        self.trace_fault(&format!("resume n{}", i + 1));
        self.hosts[i].paused = false;
        let inbox = std::mem::take(&mut self.hosts[i].inbox);
        for inbound in inbox {
            if !self.hosts[i].is_up() {
                // Its core panicked on an earlier one (see `input`), or it
                // crashed during a log write.
                break;
            }
            self.input(i, inbound.into());
        }
        self.rearm(i);
    }

    /// Cuts every link of node `i`.
    pub fn isolate(&mut self, i: usize) {
        self.trace_fault(&format!("isolate n{}", i + 1));
        self.note_leader_failure(i);
        self.net.isolate(i);
    }

    /// Cuts both directions between nodes `a` and `b`.
    pub fn cut_link(&mut self, a: usize, b: usize) {
        self.trace_fault(&format!("cut n{} <-> n{}", a + 1, b + 1));
        self.net.cut_link(a, b);
    }

    /// Cuts only the direction `from -> to`.
    pub fn cut_one_way(&mut self, from: usize, to: usize) {
        self.trace_fault(&format!("cut n{} -> n{}", from + 1, to + 1));
        self.net.set_blocked(from, to, true);
    }

    /// Sets the behaviour of every link.
    pub fn set_links(&mut self, link: LinkParams) {
        self.trace_fault(&format!("links {link:?}"));
        self.net.set_all_params(link);
    }

    /// Sets the behaviour of the directed link `from -> to`.
    pub fn set_link(&mut self, from: usize, to: usize, link: LinkParams) {
        self.trace_fault(&format!("link n{} -> n{} {link:?}", from + 1, to + 1));
        self.net.set_params(from, to, link);
    }

    /// Cuts every link into node `i` (it can still send).
    pub fn deafen(&mut self, i: usize) {
        self.trace_fault(&format!("deafen n{}", i + 1));
        self.note_leader_failure(i);
        self.net.deafen(i);
    }

    /// Splits the cluster into `side` and the rest.
    pub fn split(&mut self, side: &[usize]) {
        self.trace_fault(&format!("split {:?}", side.iter().map(|i| i + 1).collect::<Vec<_>>()));
        let quorum = self.hosts.len() / 2 + 1;
        for i in 0..self.hosts.len() {
            let mine = if side.contains(&i) { side.len() } else { self.hosts.len() - side.len() };
            if mine < quorum {
                self.note_leader_failure(i);
            }
        }
        self.net.split(side);
    }

    /// Removes every partition. A pending failover whose leader still leads is
    /// dropped: the leader never failed for good.
    pub fn heal_partitions(&mut self) {
        self.trace_fault("heal partitions");
        self.net.heal_partitions();
        if let Some(p) = self.pending_failover {
            if self.hosts[p.node].is_leader_at(self.now) {
                self.pending_failover = None;
            }
        }
    }

    /// Makes durable writes of node `i` fail (`true`) or work again (`false`).
    /// On recovery the driver writes the elector's current state and tells it.
    pub fn set_storage_failing(&mut self, i: usize, failing: bool) {
        let now = self.now;
        if self.hosts[i].storage_failing != failing {
            self.trace_fault(&format!("storage of n{} failing: {failing}", i + 1));
        }
        let host = &mut self.hosts[i];
        let was = host.storage_failing;
        host.storage_failing = failing;
        if was && !failing {
            let local = host.local_now(now);
            let id = host.id;
            let Some(el) = host.elector_mut() else { return };
            let hs = el.hard_state();
            el.handle_persist_recovered(local);
            host.durable = hs;
            self.checker.on_persist(now, i, id, hs);
            if self.hosts[i].kv.as_ref().is_some_and(|kv| kv.stalled) {
                self.rebuild_replica(i);
            }
            self.drain(i);
        }
    }

    /// Wipes node `i`'s durable store while it is down: a fault outside the
    /// model (a lost disk) that the checkers must notice when the node then
    /// forgets its term or votes. Used to test the checkers end to end.
    pub fn lose_durable_state(&mut self, i: usize) {
        self.trace_fault(&format!("durable state of n{} lost", i + 1));
        if !self.hosts[i].is_up() {
            self.hosts[i].durable = tenure_core::HardState::default();
        }
    }

    /// Heals everything: partitions, link faults, storage, crashes armed
    /// for the next log write; restarts crashed nodes and resumes paused ones.
    pub fn heal_all(&mut self) {
        self.settle_elections();
        self.settle_partitions();
        self.heal_partitions();
        self.set_links(self.cfg.link);
        for i in 0..self.hosts.len() {
            self.cancel_crash_at_write(i);
            self.set_storage_failing(i, false);
            self.restart(i);
            self.resume(i);
        }
    }
}

/// Hands `input` to `el`, turning a panic into an error that says what the
/// input was and why the core panicked.
fn handle_catching_panics(el: &mut dyn Protocol, now: Instant, input: Input) -> Result<(), String> {
    let what = match &input {
        Input::Message(from, m) => format!("{m:?} from {from:?}"),
        Input::Timer => "its timer".to_string(),
        Input::PeerDead(peer, _) => format!("a death notice about {peer:?}"),
        Input::Replica(..) | Input::Forward(..) | Input::Client(_) => {
            unreachable!("the elector's inputs only")
        }
    };
    let run = std::panic::AssertUnwindSafe(|| match input {
        Input::Message(from, msg) => el.handle_message(now, from, msg),
        Input::Timer => el.handle_timeout(now),
        Input::PeerDead(peer, _) => el.handle_peer_dead(now, peer),
        Input::Replica(..) | Input::Forward(..) | Input::Client(_) => {}
    });
    std::panic::catch_unwind(run).map_err(|payload| {
        let why = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".into());
        format!("{what}: {why}")
    })
}

/// A duration in nanoseconds, saturating.
pub fn dur_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_match_the_documented_values() {
        let sim = Sim::new(SimConfig::new(5), 0);
        // (2 * 1000 + 7 * 50) * 1.05 / 0.95 + 10 * 2 * (5 + 1) ms.
        assert_eq!(sim.liveness_bound().as_millis(), 2717);
        // (1000 + 3 * 50) * 1.05 / 0.95 + 4 * 2 * (5 + 1) ms.
        assert_eq!(sim.failover_bound().as_millis(), 1319);
    }

    #[test]
    fn events_run_in_time_then_sequence_order() {
        let mut sim = Sim::new(SimConfig::new(3), 1);
        let before = sim.now_ns();
        sim.run_for(Duration::from_secs(3));
        assert_eq!(sim.now_ns(), before + 3_000_000_000);
        // A cold start elects someone within the bound.
        assert!(!sim.leader_log.is_empty());
        let times: Vec<u64> = sim.leader_log.iter().map(|r| r.time_ns).collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn a_paused_node_handles_nothing_until_resumed() {
        let mut sim = Sim::new(SimConfig::new(3), 2);
        let (leader, _) = sim.wait_for_stable_leader(sim.liveness_bound()).expect("a leader");
        let f = (0..3).find(|&i| i != leader).expect("a follower");
        sim.pause(f);
        sim.run_for(Duration::from_millis(500));
        assert!(!sim.host(f).inbox.is_empty(), "heartbeats queue up while paused");
        sim.resume(f);
        assert!(sim.host(f).inbox.is_empty());
        sim.run_for(Duration::from_millis(200));
        assert_eq!(sim.stable_leader(), Some(leader));
    }

    #[test]
    fn a_crashed_node_restarts_from_its_durable_state() {
        let mut sim = Sim::new(SimConfig::new(3), 3);
        let (leader, _) = sim.wait_for_stable_leader(sim.liveness_bound()).expect("a leader");
        let term = sim.term_of(leader);
        sim.crash(leader);
        assert!(!sim.host(leader).is_up());
        assert_eq!(sim.term_of(leader), term, "the durable term survives the crash");
        sim.restart(leader);
        assert_eq!(sim.role_of(leader), Some(Role::Follower));
        assert_eq!(sim.term_of(leader), term);
    }

    #[test]
    fn storage_failures_drop_messages_and_recover() {
        let mut sim = Sim::new(SimConfig::new(3), 4);
        sim.wait_for_stable_leader(sim.liveness_bound()).expect("a leader");
        for i in 0..3 {
            sim.set_storage_failing(i, true);
        }
        let leader = sim.leaders()[0];
        sim.crash(leader);
        sim.run_for(Duration::from_secs(5));
        // Nobody can persist a vote, so nobody is elected.
        assert!(sim.leaders().is_empty());
        for i in 0..3 {
            sim.set_storage_failing(i, false);
        }
        assert!(sim.wait_for_stable_leader(sim.liveness_bound()).is_some());
        assert_eq!(sim.checker.violation_count(), 0, "{:?}", sim.checker.violations());
    }
}
