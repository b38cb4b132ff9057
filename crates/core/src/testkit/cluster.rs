//! The in-memory cluster.

use super::trace::{Handled, Input, Step};
use super::{Clock, Factory, Setup, START};
use crate::config::Config;
use crate::contract::{self, Driver, WriteFailed};
use crate::electorate::{ConfigId, Electorate};
use crate::message::Message;
use crate::protocol::{Event, HardState, Output, Protocol, Status, TransferError};
use crate::time::Instant;
use crate::types::{NodeId, Role, Term};
use rand_core::RngCore;
use rand_pcg::Pcg64Mcg;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// Inputs one [`Cluster::run_until`] may process; more means a livelock (a
/// timer that keeps firing at one instant, say).
pub const MAX_STEPS_PER_RUN: usize = 2_000_000;

/// Entries each record ([`Cluster::steps`], [`Cluster::sent`],
/// [`Cluster::events`]) may hold; a test that runs into it runs too long.
pub const MAX_RECORDS: usize = 2_000_000;

/// Whether a node takes steps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Liveness {
    /// It runs.
    Up,
    /// Frozen with its memory (a stopped process, a paused VM): no timer
    /// fires and messages that arrive are lost, as with a crash.
    Paused,
    /// Crashed: it restarts from its durable state only.
    Down,
}

/// A message sent, as recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sent {
    /// Global time it was sent.
    pub at: Instant,
    /// The sender.
    pub from: NodeId,
    /// The destination.
    pub to: NodeId,
    /// The message.
    pub msg: Message,
}

/// An event, as recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recorded {
    /// Global time it was delivered.
    pub at: Instant,
    /// The node it came from.
    pub node: NodeId,
    /// The event.
    pub event: Event,
}

/// A node taking office.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaderRecord {
    /// Global time it became leader.
    pub at: Instant,
    /// The node.
    pub node: NodeId,
    /// Its term.
    pub term: Term,
}

struct Host<P> {
    protocol: P,
    durable: HardState,
    clock: Clock,
    liveness: Liveness,
    storage_failing: bool,
    /// Elections started by the earlier incarnations.
    earlier_elections: u64,
    /// The configuration its log holds, given again at every boot; `None`:
    /// the bootstrap list of its `Config`.
    electorate: Option<Electorate>,
}

struct InFlight {
    from: NodeId,
    to: NodeId,
    msg: Message,
}

/// A cluster of `P`s in virtual time; see [the module](super).
///
/// Events are processed in global-time order; a message and a timer due at
/// the same instant: the message first; timers due together: the lowest id
/// first; messages due together: in the order sent.
pub struct Cluster<P> {
    now: Instant,
    setup: Setup,
    ids: Vec<NodeId>,
    hosts: BTreeMap<NodeId, Host<P>>,
    factory: Factory<P>,
    boots: u64,
    rng: Pcg64Mcg,
    cut: BTreeSet<(NodeId, NodeId)>,
    /// Keyed by (arrival, sequence number).
    in_flight: BTreeMap<(Instant, u64), InFlight>,
    seq: u64,
    steps: Vec<Step>,
    sent: Vec<Sent>,
    events: Vec<Recorded>,
}

impl<P: Protocol> Cluster<P> {
    /// Starts every node of `setup` at [`START`], built by `factory`.
    pub fn new(setup: Setup, factory: Factory<P>) -> Self {
        let ids = setup.ids();
        let rng = Pcg64Mcg::new(u128::from(setup.seed) << 1 | 1);
        let mut c = Cluster {
            now: START,
            ids: ids.clone(),
            hosts: BTreeMap::new(),
            factory,
            boots: 0,
            rng,
            cut: BTreeSet::new(),
            in_flight: BTreeMap::new(),
            seq: 0,
            steps: Vec::new(),
            sent: Vec::new(),
            events: Vec::new(),
            setup,
        };
        for id in ids {
            c.boot(id);
        }
        c
    }

    fn boot(&mut self, id: NodeId) {
        self.boots += 1;
        let cfg = self.setup.config(id);
        let clock = self.setup.clocks.get(&id).copied().unwrap_or_default();
        let local = clock.local(self.now);
        let (durable, storage_failing, earlier, electorate) = match self.hosts.get(&id) {
            Some(h) => (
                h.durable,
                h.storage_failing,
                h.earlier_elections + h.protocol.counters().elections_started,
                h.electorate.clone(),
            ),
            None => (HardState::default(), false, 0, None),
        };
        let protocol = (self.factory)(&cfg, durable, local, self.boots);
        let host = Host {
            protocol,
            durable,
            clock,
            liveness: Liveness::Up,
            storage_failing,
            earlier_elections: earlier,
            electorate: electorate.clone(),
        };
        self.hosts.insert(id, host);
        self.record_step(id, Input::Boot(self.boots));
        self.handle_output(id);
        if let Some(e) = electorate {
            // As a node does at start: the configuration its log holds.
            self.input(id, Input::Electorate(e.clone()), |p, now| p.handle_electorate(now, e));
        }
    }

    // ---- Reading ----

    /// Global time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// The voters, in preference order.
    pub fn ids(&self) -> &[NodeId] {
        &self.ids
    }

    /// The settings the cluster was built with.
    pub fn setup(&self) -> &Setup {
        &self.setup
    }

    /// Node `id`'s configuration.
    pub fn config(&self, id: NodeId) -> Config {
        self.setup.config(id)
    }

    fn host(&self, id: NodeId) -> &Host<P> {
        self.hosts.get(&id).unwrap_or_else(|| panic!("{id:?} is not a node of this cluster"))
    }

    fn host_mut(&mut self, id: NodeId) -> &mut Host<P> {
        self.hosts.get_mut(&id).unwrap_or_else(|| panic!("{id:?} is not a node of this cluster"))
    }

    /// Node `id`'s protocol (of its current incarnation, also while down).
    pub fn node(&self, id: NodeId) -> &P {
        &self.host(id).protocol
    }

    /// Node `id`'s protocol, to drive by hand. Whatever output an input given
    /// this way leaves behind is handled with the node's next input through
    /// the cluster, or by [`Cluster::drain`].
    pub fn node_mut(&mut self, id: NodeId) -> &mut P {
        &mut self.host_mut(id).protocol
    }

    /// What node `id`'s clock reads now.
    pub fn local_now(&self, id: NodeId) -> Instant {
        self.host(id).clock.local(self.now)
    }

    /// Node `id`'s durable state: the last write that succeeded.
    pub fn durable(&self, id: NodeId) -> HardState {
        self.host(id).durable
    }

    /// Whether node `id` runs.
    pub fn liveness(&self, id: NodeId) -> Liveness {
        self.host(id).liveness
    }

    /// Node `id`'s status.
    pub fn status(&self, id: NodeId) -> Status {
        self.node(id).status()
    }

    /// Node `id`'s term.
    pub fn term(&self, id: NodeId) -> Term {
        self.status(id).term
    }

    /// Node `id`'s role.
    pub fn role(&self, id: NodeId) -> Role {
        self.status(id).role
    }

    /// True if node `id` runs and leads by its own clock.
    pub fn is_leader(&self, id: NodeId) -> bool {
        let h = self.host(id);
        h.liveness == Liveness::Up && h.protocol.is_leader(h.clock.local(self.now))
    }

    /// The running nodes that lead by their own clocks.
    pub fn leaders(&self) -> Vec<NodeId> {
        self.ids.iter().copied().filter(|&id| self.is_leader(id)).collect()
    }

    /// The single leader.
    ///
    /// # Panics
    /// Unless exactly one node leads.
    pub fn leader(&self) -> NodeId {
        let l = self.leaders();
        assert_eq!(l.len(), 1, "expected exactly one leader at {:?}, got {l:?}", self.now);
        l[0]
    }

    /// Elections started (term bumps by candidacy) by every node, all
    /// incarnations included.
    pub fn elections(&self) -> u64 {
        self.hosts
            .values()
            .map(|h| h.earlier_elections + h.protocol.counters().elections_started)
            .sum()
    }

    /// Every input and its outputs, in order.
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// Every message sent, in order (those dropped by a failed write excluded).
    pub fn sent(&self) -> &[Sent] {
        &self.sent
    }

    /// Every event delivered, in order.
    pub fn events(&self) -> &[Recorded] {
        &self.events
    }

    /// The messages `from` sent to `to` since `sent()[since]`.
    pub fn sent_since(&self, since: usize, from: NodeId, to: NodeId) -> Vec<Message> {
        self.sent[since..]
            .iter()
            .filter(|s| s.from == from && s.to == to)
            .map(|s| s.msg.clone())
            .collect()
    }

    /// Nodes taking office, in order.
    pub fn leader_history(&self) -> Vec<LeaderRecord> {
        self.events
            .iter()
            .filter_map(|r| match r.event {
                Event::RoleChanged { role: Role::Leader, term, .. } => {
                    Some(LeaderRecord { at: r.at, node: r.node, term })
                }
                _ => None,
            })
            .collect()
    }

    /// When node `id` first changed to `role` at or after global time `since`.
    pub fn first_role_change(&self, id: NodeId, role: Role, since: Instant) -> Option<Instant> {
        self.events
            .iter()
            .filter(|r| r.node == id && r.at >= since)
            .find(|r| matches!(r.event, Event::RoleChanged { role: x, .. } if x == role))
            .map(|r| r.at)
    }

    // ---- Time ----

    /// Advances global time by `d`, processing every message and timer due.
    pub fn run_for(&mut self, d: Duration) {
        self.run_until(self.now + d);
    }

    /// Advances global time to `end`, processing every message and timer due.
    ///
    /// # Panics
    /// After [`MAX_STEPS_PER_RUN`] inputs (a livelock).
    pub fn run_until(&mut self, end: Instant) {
        for _ in 0..MAX_STEPS_PER_RUN {
            let msg_at = self.in_flight.keys().next().map_or(Instant::MAX, |k| k.0);
            let timer = self.next_timer();
            let timer_at = timer.map_or(Instant::MAX, |t| t.0);
            let at = msg_at.min(timer_at);
            if at > end {
                self.now = self.now.max(end);
                return;
            }
            self.now = self.now.max(at);
            if msg_at <= timer_at {
                let (_, m) = self.in_flight.pop_first().expect("a message is due");
                self.deliver(m);
            } else if let Some((_, id)) = timer {
                self.timeout(id);
            }
        }
        panic!("run_until did not reach {end:?} within {MAX_STEPS_PER_RUN} steps: a livelock");
    }

    /// Runs in steps of a millisecond until a node other than `not` leads;
    /// returns it and the time that took.
    ///
    /// # Panics
    /// If none does within `max`.
    pub fn run_until_leader_other_than(
        &mut self,
        not: Option<NodeId>,
        max: Duration,
    ) -> (NodeId, Duration) {
        let start = self.now;
        while self.now.saturating_since(start) < max {
            self.run_for(Duration::from_millis(1));
            if let Some(&x) = self.leaders().iter().find(|&&x| Some(x) != not) {
                return (x, self.now.saturating_since(start));
            }
        }
        panic!("no new leader within {max:?}; leaders {:?}", self.leaders());
    }

    /// The global time at which node `id`'s timer fires, if it runs and has one.
    pub fn timer(&self, id: NodeId) -> Option<Instant> {
        let h = self.host(id);
        let deadline = h.protocol.poll_timeout();
        let armed = h.liveness == Liveness::Up && deadline != Instant::MAX;
        armed.then(|| h.clock.global_at(deadline).max(self.now))
    }

    /// The earliest timer of a running node: (global time, node).
    fn next_timer(&self) -> Option<(Instant, NodeId)> {
        self.ids.iter().filter_map(|&id| self.timer(id).map(|at| (at, id))).min()
    }

    fn deliver(&mut self, m: InFlight) {
        let up = self.hosts.get(&m.to).is_some_and(|h| h.liveness == Liveness::Up);
        if !up || self.cut.contains(&(m.from, m.to)) {
            return;
        }
        self.message(m.from, m.to, m.msg, false);
    }

    fn message(&mut self, from: NodeId, to: NodeId, msg: Message, injected: bool) {
        let now = self.local_now(to);
        self.record_step(to, Input::Message { from, msg: msg.clone(), injected });
        self.node_mut(to).handle_message(now, from, msg);
        self.handle_output(to);
    }

    // ---- Inputs ----

    /// Fires node `id`'s timer now (late is fine, early is harmless).
    pub fn timeout(&mut self, id: NodeId) {
        self.input(id, Input::Timeout, |p, now| p.handle_timeout(now));
    }

    /// Delivers `msg` from `from` to `to` now, bypassing the network.
    ///
    /// # Panics
    /// If `to` does not run.
    pub fn inject(&mut self, from: NodeId, to: NodeId, msg: Message) {
        assert_eq!(self.liveness(to), Liveness::Up, "inject into {to:?}, which does not run");
        self.message(from, to, msg, true);
    }

    /// Asks node `from` to hand leadership to `to`.
    pub fn transfer(&mut self, from: NodeId, to: NodeId) -> Result<(), TransferError> {
        let now = self.local_now(from);
        let result = self.node_mut(from).transfer_leadership(now, to);
        self.record_step(from, Input::Transfer { to, result: result.clone() });
        self.handle_output(from);
        result
    }

    /// Tells node `to` that node `dead` is dead, as a spy that knows would
    /// (a death notice, [`Protocol::handle_peer_dead`]), now. Nothing happens
    /// if `to` does not run (a notice to a crashed or paused node is lost).
    pub fn notify_dead(&mut self, to: NodeId, dead: NodeId) {
        if self.liveness(to) != Liveness::Up {
            return;
        }
        self.input(to, Input::PeerDead { peer: dead }, |p, now| p.handle_peer_dead(now, dead));
    }

    /// Tells every running node but `dead` that `dead` is dead (see
    /// [`Cluster::notify_dead`]): a spy reporting to every peer at once.
    pub fn notify_dead_all(&mut self, dead: NodeId) {
        for to in self.ids.clone() {
            if to != dead {
                self.notify_dead(to, dead);
            }
        }
    }

    /// Gives node `id` the configuration its log now holds (kept across its
    /// restarts), as its driver would: [`Protocol::handle_electorate`]. A
    /// node that does not run gets it at its next boot.
    pub fn set_electorate(&mut self, id: NodeId, electorate: Electorate) {
        self.host_mut(id).electorate = Some(electorate.clone());
        if self.liveness(id) == Liveness::Up {
            self.input(id, Input::Electorate(electorate.clone()), |p, now| {
                p.handle_electorate(now, electorate)
            });
        }
    }

    /// Gives every node (running or not) the configuration of `voters` and
    /// `learners` written at `id`, removing `departing`, `committed` or not:
    /// each stands if it votes, or if it departs and the change is not
    /// committed.
    pub fn set_electorate_all(
        &mut self,
        id: ConfigId,
        voters: &[NodeId],
        learners: &[NodeId],
        departing: &[NodeId],
        committed: bool,
    ) {
        for node in self.ids.clone() {
            let stands = voters.contains(&node) || (departing.contains(&node) && !committed);
            let member =
                voters.contains(&node) || learners.contains(&node) || departing.contains(&node);
            let e = Electorate {
                id,
                last_token: id.token,
                voters: voters.to_vec(),
                learners: learners.to_vec(),
                departing: departing.to_vec(),
                stands,
                member,
            };
            self.set_electorate(node, e);
        }
    }

    /// Tells node `id` that its replicated log gave up the leadership of
    /// `token` ([`Protocol::give_up_leadership`]).
    pub fn give_up(&mut self, id: NodeId, token: crate::FencingToken) {
        self.input(id, Input::GiveUp(token), |p, now| p.give_up_leadership(now, token));
    }

    /// Stops node `id` gracefully (a leader cedes); it ignores later inputs.
    pub fn shutdown(&mut self, id: NodeId) {
        self.input(id, Input::Shutdown, |p, now| p.shutdown(now));
    }

    /// Tells node `id` that durable state could not be written (as a driver
    /// whose disk failed outside a write would).
    pub fn tell_persist_failed(&mut self, id: NodeId) {
        self.input(id, Input::PersistFailed, |p, now| p.handle_persist_failed(now));
    }

    fn input(&mut self, id: NodeId, input: Input, f: impl FnOnce(&mut P, Instant)) {
        let now = self.local_now(id);
        self.record_step(id, input);
        f(self.node_mut(id), now);
        self.handle_output(id);
    }

    /// Handles whatever output node `id` holds, by the calling contract
    /// (after inputs given through [`Cluster::node_mut`]).
    pub fn drain(&mut self, id: NodeId) {
        self.record_step(id, Input::Direct);
        self.handle_output(id);
    }

    fn handle_output(&mut self, id: NodeId) {
        let now = self.local_now(id);
        contract::drain(&mut Io { cluster: self, id }, now);
    }

    // ---- Faults ----

    /// Node `id` crashes: it loses its memory and the messages on their way to it.
    pub fn crash(&mut self, id: NodeId) {
        self.host_mut(id).liveness = Liveness::Down;
        self.in_flight.retain(|_, m| m.to != id);
        self.record_step(id, Input::Crash);
    }

    /// Node `id` starts again from its durable state (crashing first if it runs).
    pub fn restart(&mut self, id: NodeId) {
        if self.liveness(id) != Liveness::Down {
            self.crash(id);
        }
        self.boot(id);
    }

    /// Replaces what node `id`'s storage holds (what its next restart loads):
    /// for stories of nodes that come back with another state.
    pub fn set_durable(&mut self, id: NodeId, state: HardState) {
        self.host_mut(id).durable = state;
    }

    /// Node `id` stops taking steps but keeps its memory; see [`Liveness::Paused`].
    pub fn pause(&mut self, id: NodeId) {
        self.host_mut(id).liveness = Liveness::Paused;
        self.record_step(id, Input::Pause);
    }

    /// Node `id` takes steps again, with the memory it had when paused. Its
    /// timer, if due, fires at the next run.
    pub fn resume(&mut self, id: NodeId) {
        let host = self.host_mut(id);
        assert_eq!(host.liveness, Liveness::Paused, "resume {id:?}, which is not paused");
        host.liveness = Liveness::Up;
        self.record_step(id, Input::Resume);
    }

    /// Every write of node `id` fails from now on; it learns so at its next
    /// write (or from [`Cluster::tell_persist_failed`]).
    pub fn fail_storage(&mut self, id: NodeId) {
        self.host_mut(id).storage_failing = true;
        self.record_step(id, Input::StorageFailing);
    }

    /// Node `id`'s storage works again: its current durable state is written
    /// and the node is told.
    pub fn recover_storage(&mut self, id: NodeId) {
        let host = self.host_mut(id);
        host.storage_failing = false;
        host.durable = host.protocol.hard_state();
        self.input(id, Input::PersistRecovered, |p, now| p.handle_persist_recovered(now));
    }

    /// Messages from `from` to `to` are lost from now on.
    pub fn cut_one_way(&mut self, from: NodeId, to: NodeId) {
        self.cut.insert((from, to));
    }

    /// Messages between `a` and `b` are lost from now on, both ways.
    pub fn cut(&mut self, a: NodeId, b: NodeId) {
        self.cut_one_way(a, b);
        self.cut_one_way(b, a);
    }

    /// Node `id` can neither send nor receive.
    pub fn isolate(&mut self, id: NodeId) {
        for o in self.ids.clone() {
            if o != id {
                self.cut(id, o);
            }
        }
    }

    /// Node `id` can send but hears nobody.
    pub fn deafen(&mut self, id: NodeId) {
        for o in self.ids.clone() {
            if o != id {
                self.cut_one_way(o, id);
            }
        }
    }

    /// Restores the link between `a` and `b`, both ways.
    pub fn heal_link(&mut self, a: NodeId, b: NodeId) {
        self.cut.remove(&(a, b));
        self.cut.remove(&(b, a));
    }

    /// Restores every link.
    pub fn heal(&mut self) {
        self.cut.clear();
    }

    // ---- Recording ----

    fn record_step(&mut self, node: NodeId, input: Input) {
        assert!(
            self.steps.len() < MAX_RECORDS,
            "the trace holds {MAX_RECORDS} steps: too long a test"
        );
        self.steps.push(Step { at: self.now, node, input, outputs: Vec::new() });
    }

    fn send(&mut self, from: NodeId, to: NodeId, msg: Message) {
        assert!(self.sent.len() < MAX_RECORDS, "{MAX_RECORDS} messages sent: too long a test");
        self.sent.push(Sent { at: self.now, from, to, msg: msg.clone() });
        let jitter = self.setup.jitter.as_nanos() as u64;
        let extra = if jitter > 0 { self.rng.next_u64() % jitter } else { 0 };
        let at = self.now + self.setup.latency + Duration::from_nanos(extra);
        self.seq += 1;
        self.in_flight.insert((at, self.seq), InFlight { from, to, msg });
    }
}

/// The cluster's side of the calling contract for one node.
struct Io<'a, P> {
    cluster: &'a mut Cluster<P>,
    id: NodeId,
}

impl<P: Protocol> Io<'_, P> {
    fn handled(&mut self) -> &mut Handled {
        let step = self.cluster.steps.last_mut().expect("an input was recorded");
        step.outputs.last_mut().expect("an output is being handled")
    }
}

impl<P: Protocol> Driver for Io<'_, P> {
    type Node = P;

    fn node(&mut self) -> &mut P {
        self.cluster.node_mut(self.id)
    }

    fn output(&mut self, output: &Output) {
        let id = self.id;
        let step = self.cluster.steps.last_mut().expect("an input was recorded");
        debug_assert_eq!(step.node, id, "outputs belong to the last input");
        step.outputs.push(Handled { output: output.clone(), write_failed: false });
    }

    fn persist(&mut self, state: HardState) -> Result<(), WriteFailed> {
        let host = self.cluster.host_mut(self.id);
        if host.storage_failing {
            self.handled().write_failed = true;
            return Err(WriteFailed);
        }
        host.durable = state;
        Ok(())
    }

    fn send(&mut self, to: NodeId, msg: Message) {
        self.cluster.send(self.id, to, msg);
    }

    fn event(&mut self, event: Event) {
        let c = &mut *self.cluster;
        assert!(c.events.len() < MAX_RECORDS, "{MAX_RECORDS} events: too long a test");
        c.events.push(Recorded { at: c.now, node: self.id, event });
    }
}
