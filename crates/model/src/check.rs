//! Running the checker and summarising what it found.

use crate::membership::{Change, MembershipSpec};
use crate::model::{
    ElectionModel, CHANGE_COMMITTED, CONTESTED_TERM, LEADERS_IN_TWO_TERMS, LEADER_ELECTED,
    LEADER_IN_NEW_CONFIG, LEADER_ON_NOTICE, REACHABILITY_PROPERTIES, RIVAL_CANDIDATES,
    SAFETY_PROPERTIES, SIBLING_CONFIGS, SIBLING_STOOD,
};
use crate::network::Envelope;
use crate::{Action, Bounds, Durability, ElectionState};
use stateright::{Checker, HasDiscoveries, Model, Path};
use std::collections::BTreeMap;
use std::hash::Hash;
use std::time::{Duration, Instant};
use tenure_core::{NodeId, ProtocolKind, Role};

/// The outcome of one exhaustive run of a model whose states are `S` and
/// actions `A`.
#[derive(Debug)]
pub struct Report<S, A> {
    /// Distinct states explored (the checker's `unique_state_count`).
    pub unique_states: usize,
    /// States generated, repeats included.
    pub total_states: usize,
    /// Length of the longest path explored.
    pub max_depth: usize,
    /// Wall-clock time of the run.
    pub elapsed: Duration,
    /// True when every reachable state within the bounds was visited.
    pub complete: bool,
    /// Per property: a counterexample (safety) or an example (reachability).
    pub discoveries: BTreeMap<&'static str, Path<S, A>>,
}

/// The outcome of one exhaustive run of the election model.
pub type CheckReport = Report<ElectionState, Action>;

impl CheckReport {
    /// Safety properties with a counterexample.
    pub fn violated(&self) -> Vec<&'static str> {
        SAFETY_PROPERTIES.into_iter().filter(|p| self.discoveries.contains_key(p)).collect()
    }

    /// Reachability properties with no example.
    pub fn unreached(&self) -> Vec<&'static str> {
        REACHABILITY_PROPERTIES.into_iter().filter(|p| !self.discoveries.contains_key(p)).collect()
    }

    /// The witnesses of `start` ([`Start::witnesses`]) this run did not reach.
    pub fn missed(&self, protocol: ProtocolKind, start: Start) -> Vec<&'static str> {
        start
            .witnesses(protocol)
            .into_iter()
            .filter(|p| !self.discoveries.contains_key(p))
            .collect()
    }
}

/// The state an exploration starts from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Start {
    /// The fresh cluster: every node a follower in term 0.
    Fresh,
    /// A contested election ([`contested_prefix`]).
    Contested,
    /// An elected, settled leader ([`elected_model`]): what follows is re-election.
    Elected,
    /// An elected, settled leader, and a node may die with a spy reporting
    /// it ([`Bounds::spy`]): what follows is failover on death notices.
    Spy,
}

impl Start {
    /// The reachability properties (witnesses) a check from here must reach,
    /// or it checked less than it claims: a leader is elected from a fresh
    /// cluster or a contested election; from an elected leader, a leader is
    /// elected in a later term and an election is contested
    /// ([`contest`]: two candidates in one term, or at once under Paxos), so
    /// that safety is checked across a re-election and a split vote; with a
    /// spy, a leader elected on death notices with no timer fired since the
    /// death ([`LEADER_ON_NOTICE`]), so that safety is checked across the
    /// failover the notices drive.
    pub fn witnesses(self, protocol: ProtocolKind) -> Vec<&'static str> {
        match self {
            Start::Fresh | Start::Contested => vec![LEADER_ELECTED],
            Start::Elected => vec![LEADERS_IN_TWO_TERMS, contest(protocol)],
            Start::Spy => vec![LEADER_ON_NOTICE],
        }
    }
}

/// True if `protocol` never reaches the reachability property `property`
/// by design: a Paxos ballot names its one proposer, so two candidates never
/// stand in one ballot ([`CONTESTED_TERM`]).
pub fn unreachable_by_design(protocol: ProtocolKind, property: &str) -> bool {
    protocol == ProtocolKind::Paxos && property == CONTESTED_TERM
}

/// What a running exploration has done so far (see [`Progress`]).
#[derive(Clone, Copy, Debug)]
pub struct Snapshot {
    /// Distinct states visited so far.
    pub unique_states: usize,
    /// States generated so far, repeats included.
    pub total_states: usize,
    /// Length of the longest path so far.
    pub max_depth: usize,
    /// Time since the exploration started.
    pub elapsed: Duration,
}

/// Progress reports while an exploration runs: `report` is called every `every`.
pub struct Progress<'a> {
    /// How often to report.
    pub every: Duration,
    /// Called with what has been done so far.
    pub report: &'a mut dyn FnMut(Snapshot),
}

/// How often a running exploration looks whether its threads are done.
const POLL: Duration = Duration::from_millis(100);

/// Explores every state of `model` within its bounds, breadth-first, with
/// `threads` threads. Breadth-first search makes each counterexample a shortest one.
pub fn check(model: ElectionModel, threads: usize) -> CheckReport {
    explore(model, threads, None, Order::Breadth, None)
}

/// Like [`check`], but stops at the first safety violation: enough to show
/// that a planted bug is caught, and faster.
pub fn hunt(model: ElectionModel, threads: usize) -> CheckReport {
    search(model, threads, HasDiscoveries::AnyFailures)
}

/// Like [`check`], but stops as soon as `property` has a discovery (BFS: a
/// shortest path to it), e.g. to find a state worth exploring from.
pub fn reach(model: ElectionModel, threads: usize, property: &'static str) -> CheckReport {
    search(model, threads, HasDiscoveries::AnyOf([property].into_iter().collect()))
}

/// Like [`check`], but depth-first: memory holds only the current path and its
/// siblings besides the visited fingerprints, so much larger spaces fit. With
/// a depth bound a depth-first search may cut a state reached first by a long
/// path and skip it later when reached by a short one, so use it without
/// `max_depth` (the other bounds keep the space finite).
pub fn check_dfs(model: ElectionModel, threads: usize) -> CheckReport {
    explore(model, threads, None, Order::Depth, None)
}

/// [`check`] (with a depth bound) or [`check_dfs`] (without), or [`hunt`]
/// when `hunt_only`, reporting `progress` while it runs.
pub fn check_reporting(
    model: ElectionModel,
    threads: usize,
    hunt_only: bool,
    progress: Progress<'_>,
) -> CheckReport {
    let stop = hunt_only.then_some(HasDiscoveries::AnyFailures);
    let order =
        if hunt_only || model.bounds.max_depth.is_some() { Order::Breadth } else { Order::Depth };
    explore(model, threads, stop, order, Some(progress))
}

fn search(model: ElectionModel, threads: usize, stop: HasDiscoveries) -> CheckReport {
    explore(model, threads, Some(stop), Order::Breadth, None)
}

/// The order in which the checker visits states.
pub(crate) enum Order {
    Breadth,
    Depth,
}

/// Runs the checker on `model` within its bounds, stopping early on `stop`.
fn explore(
    model: ElectionModel,
    threads: usize,
    stop: Option<HasDiscoveries>,
    order: Order,
    progress: Option<Progress<'_>>,
) -> CheckReport {
    let depth = model.bounds.max_depth;
    run_checker(model, depth, threads, stop, order, progress)
}

/// Runs the checker on any model to `depth` (stateright's, `None`: no bound),
/// stopping early on `stop`, reporting `progress` meanwhile, and sums up.
pub(crate) fn run_checker<M>(
    model: M,
    depth: Option<usize>,
    threads: usize,
    stop: Option<HasDiscoveries>,
    order: Order,
    progress: Option<Progress<'_>>,
) -> Report<M::State, M::Action>
where
    M: Model + Send + Sync + 'static,
    M::State: Hash + Send + Sync + 'static,
{
    let start = Instant::now();
    let mut builder = model.checker().threads(threads);
    if let Some(stop) = stop {
        builder = builder.finish_when(stop);
    }
    if let Some(depth) = depth {
        builder = builder.target_max_depth(depth);
    }
    match order {
        Order::Breadth => finish(builder.spawn_bfs(), start, progress),
        Order::Depth => finish(builder.spawn_dfs(), start, progress),
    }
}

/// Waits for `checker`'s threads, reporting `progress` meanwhile, and sums up.
fn finish<M: Model>(
    mut checker: impl Checker<M>,
    start: Instant,
    progress: Option<Progress<'_>>,
) -> Report<M::State, M::Action> {
    let handles = checker.handles();
    if let Some(Progress { every, report }) = progress {
        let mut next = start + every;
        while !handles.iter().all(|h| h.is_finished()) {
            std::thread::sleep(POLL);
            if Instant::now() >= next {
                next += every;
                report(Snapshot {
                    unique_states: checker.unique_state_count(),
                    total_states: checker.state_count(),
                    max_depth: checker.max_depth(),
                    elapsed: start.elapsed(),
                });
            }
        }
    }
    for handle in handles {
        if let Err(panic) = handle.join() {
            std::panic::resume_unwind(panic);
        }
    }
    Report {
        unique_states: checker.unique_state_count(),
        total_states: checker.state_count(),
        max_depth: checker.max_depth(),
        elapsed: start.elapsed(),
        complete: checker.is_done(),
        discoveries: checker.discoveries().into_iter().collect(),
    }
}

/// A shortest path from the fresh cluster to a contested election (two
/// candidates in one term; under Paxos two candidates at once, see
/// [`contest`]), found by the checker on the faithful model with no
/// restarts, duplicates or transfers, within `bounds`' term and clock bounds.
///
/// Deep interleavings after such a state are where vote bugs live; exploring
/// from it keeps them within the debug-profile time budget, and because the
/// checker finds the prefix itself, it follows the core as the core changes.
pub fn contested_prefix(
    protocol: ProtocolKind,
    bounds: Bounds,
    threads: usize,
) -> Option<Vec<Action>> {
    let quiet = Bounds { restarts: 0, duplicates: 0, transfers: 0, max_depth: None, ..bounds };
    let model = ElectionModel::of(protocol, quiet, Durability::Faithful);
    let goal = contest(protocol);
    let report = reach(model, threads, goal);
    report.discoveries.get(goal).map(|path| path.clone().into_actions())
}

/// The reachability property that marks a contested election of `protocol`:
/// [`CONTESTED_TERM`], except under Paxos, where each ballot names its one
/// proposer and rival candidates ([`RIVAL_CANDIDATES`]) stand in different ballots.
pub fn contest(protocol: ProtocolKind) -> &'static str {
    match protocol {
        ProtocolKind::Paxos => RIVAL_CANDIDATES,
        ProtocolKind::Raft | ProtocolKind::Ranked => CONTESTED_TERM,
    }
}

/// Greedy steps [`elected_prefix`] takes at most before giving up.
pub const ELECTED_PREFIX_MAX_STEPS: usize = 200;

/// A deterministic run from the fresh cluster to the first state in which
/// some node has been elected and no message is in flight (the new leader's
/// first heartbeats are answered), on the faithful model with no restarts, duplicates or
/// transfers: while messages are in flight it delivers the first one (in the
/// network's order); when none is, it fires the timer of the node that has
/// taken the fewest clock steps (the lowest id among equals). `None` if that
/// does not end within [`ELECTED_PREFIX_MAX_STEPS`] steps or `bounds`'
/// term bound.
///
/// Some protocols need more steps to elect a first leader than a
/// breadth-first search from the fresh cluster can reach in the debug
/// profile (a Paxos election is a poll, a Prepare and an Accept with their
/// answers, after the start-up leases have run out). Exploring from the state
/// this prefix leads to checks everything that can happen once a leader
/// exists: failover, contested re-election, restarts, transfers. The prefix
/// itself is replayed by [`ElectionModel::starting_after`], which checks that
/// every step is enabled, so it is a real run of the core.
pub fn elected_prefix(protocol: ProtocolKind, bounds: Bounds) -> Option<Vec<Action>> {
    let quiet = Bounds {
        clock_steps_per_node: u8::MAX,
        restarts: 0,
        duplicates: 0,
        transfers: 0,
        max_depth: None,
        ..bounds
    };
    // Exact: the greedy run also delivers the messages nodes ignore, so that
    // it ends with nothing in flight.
    let model = ElectionModel::of(protocol, quiet, Durability::Faithful).exact();
    let mut state = model.init_states().remove(0);
    let mut prefix = Vec::new();
    // Until a leader is elected and every message in flight is delivered.
    while state.ghost.leaders.is_empty() || !state.network.is_empty() {
        if prefix.len() >= ELECTED_PREFIX_MAX_STEPS || !model.within_boundary(&state) {
            return None;
        }
        let mut enabled = Vec::new();
        model.actions(&state, &mut enabled);
        let delivery = enabled.iter().find(|a| matches!(a, Action::Deliver(_)));
        let timeout = || {
            enabled
                .iter()
                .filter_map(|a| match a {
                    Action::Timeout(id) => Some((state.nodes[index(*id)].clock_steps, *id)),
                    _ => None,
                })
                .min()
                .map(|(_, id)| Action::Timeout(id))
        };
        let action = match delivery {
            Some(action) => action.clone(),
            None => timeout()?,
        };
        state = model.next_state(&state, action.clone())?;
        prefix.push(action);
    }
    Some(prefix)
}

fn index(id: tenure_core::NodeId) -> usize {
    usize::try_from(id.0 - 1).expect("node ids are small")
}

/// The model of `protocol` started after [`elected_prefix`]
/// ([`ElectionModel::resuming_after`]): each node may take
/// `bounds.clock_steps_per_node` clock steps from the elected state, whatever
/// it took before (restarts, transfers and duplicates are all still
/// available, as the prefix uses none). `None` if the prefix elects nobody.
pub fn elected_model(
    protocol: ProtocolKind,
    bounds: Bounds,
    durability: Durability,
) -> Option<ElectionModel> {
    let prefix = elected_prefix(protocol, bounds)?;
    Some(ElectionModel::of(protocol, bounds, durability).resuming_after(prefix))
}

/// [`elected_prefix`], then heartbeat rounds, each after every follower's
/// clock has moved on ([`Action::Idle`]: to just before its election
/// timer), delivered to the end, until every follower's clock is past one
/// election timeout: the followers' start-up leases (the anonymous lease of
/// every protocol, one election timeout from the start) have then run out,
/// and each holds a lease on the leader from its newest heartbeat. A death
/// notice about that leader is then what releases them. (Right after
/// [`elected_prefix`] a follower whose clock never moved still holds its
/// start-up lease, which no notice releases: no failover could happen
/// without a timer.) `None` if no leader is elected or it does not settle
/// within [`SPY_PREFIX_ROUNDS`] rounds.
pub fn spy_prefix(protocol: ProtocolKind, bounds: Bounds) -> Option<Vec<Action>> {
    let mut prefix = elected_prefix(protocol, bounds)?;
    let quiet = Bounds {
        clock_steps_per_node: u8::MAX,
        restarts: 0,
        kills: 0,
        duplicates: 0,
        transfers: 0,
        max_depth: None,
        ..bounds
    };
    let model = ElectionModel::of(protocol, quiet, Durability::Faithful).exact();
    let mut state = model.clone().starting_after(prefix.clone()).init_states().remove(0);
    let leader = state.nodes.iter().position(|n| n.role == tenure_core::Role::Leader)?;
    let started = tenure_core::Instant::ZERO + crate::model::ELECTION_TIMEOUT;
    let settled =
        |s: &ElectionState| s.nodes.iter().enumerate().all(|(i, n)| i == leader || n.now > started);
    for _ in 0..SPY_PREFIX_ROUNDS {
        if settled(&state) {
            return Some(prefix);
        }
        let mut steps: Vec<Action> = Vec::new();
        for (i, node) in state.nodes.iter().enumerate() {
            let deadline = tenure_core::Protocol::poll_timeout(node.elector.as_ref());
            let idle = deadline - crate::model::IDLE_MARGIN > node.now;
            if i != leader && idle {
                steps.push(Action::Idle(tenure_core::NodeId(i as u64 + 1)));
            }
        }
        steps.push(Action::Timeout(tenure_core::NodeId(leader as u64 + 1)));
        for step in steps {
            state = model.next_state(&state, step.clone())?;
            prefix.push(step);
        }
        loop {
            let Some(env) = state.network.distinct().next().cloned() else { break };
            let step = Action::Deliver(env);
            state = model.next_state(&state, step.clone())?;
            prefix.push(step);
        }
        if state.nodes[leader].role != tenure_core::Role::Leader {
            return None;
        }
    }
    settled(&state).then_some(prefix)
}

/// Heartbeat rounds [`spy_prefix`] takes at most.
pub const SPY_PREFIX_ROUNDS: usize = 4;

/// The model of `protocol` started after [`spy_prefix`] (resuming: each
/// node's clock budget counts from there), for the check with deaths and
/// death notices ([`Start::Spy`], [`Bounds::spy`]). `None` if the prefix
/// elects nobody.
pub fn spy_model(
    protocol: ProtocolKind,
    bounds: Bounds,
    durability: Durability,
) -> Option<ElectionModel> {
    let prefix = spy_prefix(protocol, bounds)?;
    Some(ElectionModel::of(protocol, bounds, durability).resuming_after(prefix))
}

/// Where an exploration of changes of members starts
/// ([`member_prefix`]): a settled leader whose own-term gate passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemberStart {
    /// The bootstrap configuration (voters `n1, n2, n3`; the spare `n4` no
    /// member): the chain of changes adds `n4` as a learner, promotes it,
    /// and removes a voter.
    Grow,
    /// The cluster grown to four voters (`n4` added and promoted, both
    /// committed and held by every node): what is left of the chain is
    /// the removal of a voter.
    FourVoters,
    /// From four voters, a deposed leader and its pending removal
    /// ([`deposed_prefix`]): the leader appended the removal of a voter
    /// that only it holds, and the three others elected a new leader among
    /// themselves, which has written nothing yet. Any other removal the
    /// new leader appends is a sibling of the deposed leader's (two voters
    /// apart), and the deposed leader, which still believes it leads, may
    /// stand again with it: the start from which the runs that need
    /// siblings are a few steps deep.
    Deposed,
}

impl MemberStart {
    /// The witnesses a check of changes of members must reach, or it
    /// checked less than it claims: a change commits, and a leader is
    /// elected holding a configuration appended in the exploration (so
    /// that safety is checked across an election in a changed
    /// configuration).
    ///
    /// From [`MemberStart::Deposed`], besides these: two leaders
    /// append different changes to one configuration
    /// ([`SIBLING_CONFIGS`]), and a node stands for election holding the
    /// sibling that lost to a committed one ([`SIBLING_STOOD`]): the run
    /// that comparing configuration positions alone let through.
    pub fn witnesses(self) -> Vec<&'static str> {
        match self {
            MemberStart::Grow | MemberStart::FourVoters => {
                vec![CHANGE_COMMITTED, LEADER_IN_NEW_CONFIG]
            }
            MemberStart::Deposed => {
                vec![CHANGE_COMMITTED, LEADER_IN_NEW_CONFIG, SIBLING_CONFIGS, SIBLING_STOOD]
            }
        }
    }

    /// Configurations the prefix appends (committed everywhere, except the
    /// deposed leader's removal, which only it holds).
    pub fn changes_in_prefix(self) -> u8 {
        match self {
            MemberStart::Grow => 0,
            MemberStart::FourVoters => 2,
            MemberStart::Deposed => 3,
        }
    }
}

/// Greedy steps [`member_prefix`] takes at most before giving up.
pub const MEMBER_PREFIX_MAX_STEPS: usize = 400;

/// A deterministic run, on the model with changes of members under
/// `spec`, from the bootstrap to a settled leader of `start`: a leader is
/// elected as in [`elected_prefix`] (deliveries first, then the timer of
/// the node with the fewest clock steps), writes its no-op and replicates
/// its log to every node that follows it; for [`MemberStart::FourVoters`]
/// it then appends the two changes that make `n4` a voter, each
/// replicated to every member (its heartbeats reach `n4` once `n4` is a
/// learner) and committed. Then heartbeat rounds, each after every
/// follower's clock moved on, until every node's clock is past one
/// election timeout (the start-up leases ran out, as in [`spy_prefix`]).
/// The driver's own steps ([`Action::Tell`]) are taken as soon as they
/// are enabled. `None` if that does not end within
/// [`MEMBER_PREFIX_MAX_STEPS`] steps or the leader is lost.
pub fn member_prefix(
    protocol: ProtocolKind,
    bounds: Bounds,
    spec: &MembershipSpec,
    start: MemberStart,
) -> Option<Vec<Action>> {
    if start == MemberStart::Deposed {
        return deposed_prefix(protocol, bounds, spec);
    }
    let quiet = Bounds {
        clock_steps_per_node: u8::MAX,
        leader_clock_steps: None,
        restarts: 0,
        kills: 0,
        duplicates: 0,
        transfers: 0,
        changes: start.changes_in_prefix(),
        max_depth: None,
        ..bounds
    };
    let model = ElectionModel::with_members(protocol, quiet, spec.clone()).exact();
    let mut state = model.init_states().remove(0);
    let mut prefix = Vec::new();
    let started = tenure_core::Instant::ZERO + crate::model::ELECTION_TIMEOUT;
    let mut settling = false;
    loop {
        if prefix.len() >= MEMBER_PREFIX_MAX_STEPS || !model.within_boundary(&state) {
            return None;
        }
        let mut enabled = Vec::new();
        model.actions(&state, &mut enabled);
        let first = |pick: &dyn Fn(&Action) -> bool| enabled.iter().find(|a| pick(a)).cloned();
        let leader = state.nodes.iter().position(|n| n.role == tenure_core::Role::Leader);
        let changes_done = state.members.as_ref().map_or(0, |m| m.changes);
        let log_done = !enabled.iter().any(|a| {
            matches!(a, Action::Sync { .. } | Action::WriteNoop(_) | Action::Replicate { .. })
        }) && leader.is_some_and(|l| {
            let m = state.members.as_ref().expect("with members");
            let token = state.nodes[l].follows.map(|(_, t)| t);
            let led = token.and_then(|t| m.leadership(t));
            led.is_some_and(|led| led.gate_passed())
                && state.ghost.committed.contains_key(&m.logs[l].config_id())
        });
        let action = if let Some(a) = first(&|a| matches!(a, Action::Tell(_))) {
            a
        } else if let Some(a) = first(&|a| matches!(a, Action::Deliver(_))) {
            a
        } else if let Some(a) = first(&|a| {
            matches!(a, Action::Sync { .. } | Action::WriteNoop(_) | Action::Replicate { .. })
        }) {
            a
        } else if let Some(a) = first(&|a| matches!(a, Action::Append { .. }))
            .filter(|_| log_done && changes_done < start.changes_in_prefix())
        {
            a
        } else if let Some(l) = leader {
            let members_told = state.nodes.iter().enumerate().all(|(i, n)| {
                let m = state.members.as_ref().expect("with members");
                let member = m.logs[l].members();
                let id = tenure_core::NodeId(i as u64 + 1);
                let is_member = member.is_voter(id) || member.learners.contains(&id);
                i == l || !is_member || n.follows == state.nodes[l].follows
            });
            let done = log_done && changes_done == start.changes_in_prefix() && members_told;
            let settled = state.nodes.iter().enumerate().all(|(i, n)| i == l || n.now > started);
            if done && settled && state.network.is_empty() {
                return Some(prefix);
            }
            settling |= done;
            if settling {
                // A heartbeat round after every follower's clock moved on.
                let mut round: Vec<Action> = Vec::new();
                for (i, node) in state.nodes.iter().enumerate() {
                    let deadline = tenure_core::Protocol::poll_timeout(node.elector.as_ref());
                    let idle = deadline - crate::model::IDLE_MARGIN > node.now;
                    let id = tenure_core::NodeId(i as u64 + 1);
                    if i != l && node.now <= started {
                        // A node that is no member does not stand: its
                        // timer only moves its clock.
                        round.push(if idle { Action::Idle(id) } else { Action::Timeout(id) });
                    }
                }
                for step in round {
                    state = model.next_state(&state, step.clone())?;
                    prefix.push(step);
                }
            }
            Action::Timeout(tenure_core::NodeId(l as u64 + 1))
        } else {
            enabled
                .iter()
                .filter_map(|a| match a {
                    Action::Timeout(id) => Some((state.nodes[index(*id)].clock_steps, *id)),
                    _ => None,
                })
                .min()
                .map(|(_, id)| Action::Timeout(id))?
        };
        state = model.next_state(&state, action.clone())?;
        prefix.push(action);
    }
}

/// Greedy steps [`deposed_prefix`] takes at most after the start from four
/// voters.
pub const DEPOSED_PREFIX_MAX_STEPS: usize = 200;

/// The start [`MemberStart::Deposed`]: [`member_prefix`] to a settled
/// leader `l` of four voters, then `l` appends the removal of the last
/// voter of [`MembershipSpec::removable`] other than itself (`n4`, or `n3`
/// if `l` is `n4`), and a deterministic run in which `l` takes no step and
/// no message to or from it is delivered: the other nodes' messages are
/// delivered first (in the network's order), else the timer of the one
/// with the fewest clock steps fires, until one of them leads a higher
/// term and the other two follow it with nothing left in flight among the
/// three (while a leader waits for that, its timer fires: a heartbeat
/// round). What was sent to `l` stays in flight. `None` if `spec` removes
/// no other voter, or that does not end within [`DEPOSED_PREFIX_MAX_STEPS`]
/// steps.
pub fn deposed_prefix(
    protocol: ProtocolKind,
    bounds: Bounds,
    spec: &MembershipSpec,
) -> Option<Vec<Action>> {
    let mut prefix = member_prefix(protocol, bounds, spec, MemberStart::FourVoters)?;
    let quiet = Bounds {
        clock_steps_per_node: u8::MAX,
        leader_clock_steps: None,
        restarts: 0,
        kills: 0,
        duplicates: 0,
        transfers: 0,
        changes: MemberStart::Deposed.changes_in_prefix(),
        max_depth: None,
        ..bounds
    };
    let model = ElectionModel::with_members(protocol, quiet, spec.clone()).exact();
    let mut state = model.clone().starting_after(prefix.clone()).init_states().remove(0);
    let l = state.nodes.iter().position(|n| n.role == Role::Leader)?;
    let old = NodeId(l as u64 + 1);
    let voters = state.members.as_ref()?.logs[l].members().voters;
    let x = spec.removable.iter().rev().copied().find(|&v| v != old && voters.contains(&v))?;
    let step = |state: &mut ElectionState, prefix: &mut Vec<Action>, action: Action| {
        *state = model.next_state(state, action.clone())?;
        prefix.push(action);
        Some(())
    };
    step(&mut state, &mut prefix, Action::Append { leader: old, change: Change::Remove(x) })?;
    let others = |id: NodeId| id != old;
    // Another node leads, and every node but `l` follows it.
    let new_leader = |s: &ElectionState| {
        (0..s.nodes.len())
            .find(|&i| i != l && s.nodes[i].role == Role::Leader && s.nodes[i].follows.is_some())
    };
    let settled = |s: &ElectionState| {
        new_leader(s).is_some_and(|m| {
            (0..s.nodes.len()).all(|i| i == l || s.nodes[i].follows == s.nodes[m].follows)
        })
    };
    let greedy = |mut state: ElectionState, mut prefix: Vec<Action>| {
        for _ in 0..DEPOSED_PREFIX_MAX_STEPS {
            let mut enabled = Vec::new();
            model.actions(&state, &mut enabled);
            let action = enabled.iter().find(|a| match a {
                Action::Tell(id) => others(*id),
                Action::Deliver(e) => others(e.from) && others(e.to),
                _ => false,
            });
            if let Some(action) = action {
                step(&mut state, &mut prefix, action.clone())?;
                continue;
            }
            if let Some(m) = new_leader(&state) {
                if settled(&state) {
                    lose_all_but_news(&model, &mut state, &mut prefix, l, m)?;
                    return Some((state, prefix));
                }
                step(&mut state, &mut prefix, Action::Timeout(NodeId(m as u64 + 1)))?;
                continue;
            }
            let timer = enabled
                .iter()
                .filter_map(|a| match a {
                    Action::Timeout(id) if others(*id) => {
                        Some((state.nodes[index(*id)].clock_steps, *id))
                    }
                    _ => None,
                })
                .min()
                .map(|(_, id)| Action::Timeout(id))?;
            step(&mut state, &mut prefix, timer)?;
        }
        None
    };
    if let Some((_, prefix)) = greedy(state.clone(), prefix.clone()) {
        return Some(prefix);
    }
    // The greedy run splits the vote for ever (ranked: each of the three
    // needs the other two): the shortest run among the three to a leader,
    // then greedy again.
    let keep = |_: &ElectionState, a: &Action| match a {
        Action::Timeout(id) | Action::Idle(id) | Action::Tell(id) => others(*id),
        Action::Deliver(e) => others(e.from) && others(e.to),
        _ => false,
    };
    let goal = |s: &ElectionState| new_leader(s).is_some();
    // Two clock steps each from here, as in the exploration.
    let bounded = Bounds { clock_steps_per_node: 2, leader_clock_steps: Some(0), ..quiet };
    let search =
        ElectionModel::with_members(protocol, bounded, spec.clone()).resuming_after(prefix.clone());
    let from = search.init_states().remove(0);
    let Search::Found(run) = shortest_run(&search, &from, keep, goal, DEPOSED_SEARCH_LIMIT) else {
        return None;
    };
    for action in run {
        step(&mut state, &mut prefix, action)?;
    }
    greedy(state, prefix).map(|(_, prefix)| prefix)
}

/// The end of [`deposed_prefix`]: every message to the deposed leader
/// (node `l`) is lost ([`Action::Lose`]: it was cut off during the
/// election), but the new leader's (node `m`) heartbeats of its own term:
/// the news, which the exploration may deliver at any time, or never.
fn lose_all_but_news(
    model: &ElectionModel,
    state: &mut ElectionState,
    prefix: &mut Vec<Action>,
    l: usize,
    m: usize,
) -> Option<()> {
    let (old, new) = (NodeId(l as u64 + 1), NodeId(m as u64 + 1));
    let term = tenure_core::Protocol::hard_state(state.nodes[m].elector.as_ref()).term;
    let news = |e: &Envelope| e.from == new && e.msg.heartbeat_term() == Some(term);
    let lost: Vec<Envelope> =
        state.network.distinct().filter(|e| e.to == old && !news(e)).cloned().collect();
    for env in lost {
        for _ in 0..state.network.count(&env) {
            *state = model.next_state(state, Action::Lose(env.clone()))?;
            prefix.push(Action::Lose(env.clone()));
        }
    }
    Some(())
}

/// States [`deposed_prefix`]'s search for a new leader visits at most.
pub const DEPOSED_SEARCH_LIMIT: usize = 500_000;

/// What [`shortest_run`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Search {
    /// A shortest run to the goal, as the actions from the start.
    Found(Vec<Action>),
    /// Every state reachable through the kept actions (within the model's
    /// boundary) was visited, this many, and none is a goal.
    Exhausted(usize),
    /// The limit of states was reached first: nothing is known.
    Limit,
}

/// Breadth-first from `start` on `model`, through the enabled actions
/// that `keep` allows, to the first state in which `goal` holds (checked
/// on every state, the start's too; states outside the model's boundary
/// are checked, not expanded), visiting at most `limit` states.
pub fn shortest_run(
    model: &ElectionModel,
    start: &ElectionState,
    keep: impl Fn(&ElectionState, &Action) -> bool,
    goal: impl Fn(&ElectionState) -> bool,
    limit: usize,
) -> Search {
    use std::collections::{HashSet, VecDeque};
    use std::hash::{BuildHasher, RandomState};
    let hasher = RandomState::new();
    let mut seen: HashSet<u64> = HashSet::from([hasher.hash_one(start)]);
    // Every state visited, with its parent's place and the action from it.
    let mut visited: Vec<(ElectionState, usize, Option<Action>)> = vec![(start.clone(), 0, None)];
    let mut queue = VecDeque::from([0usize]);
    while let Some(at) = queue.pop_front() {
        let state = &visited[at].0;
        if goal(state) {
            let mut run = Vec::new();
            let mut cur = at;
            while let (_, parent, Some(action)) = &visited[cur] {
                run.push(action.clone());
                cur = *parent;
            }
            run.reverse();
            return Search::Found(run);
        }
        if !model.within_boundary(state) {
            continue;
        }
        let mut actions = Vec::new();
        model.actions(state, &mut actions);
        let mut next = Vec::new();
        for action in actions.into_iter().filter(|a| keep(state, a)) {
            if let Some(s) = model.next_state(state, action.clone()) {
                if seen.insert(hasher.hash_one(&s)) {
                    next.push((s, at, Some(action)));
                }
            }
        }
        for n in next {
            if visited.len() >= limit {
                return Search::Limit;
            }
            visited.push(n);
            queue.push_back(visited.len() - 1);
        }
    }
    Search::Exhausted(visited.len())
}

/// The model with changes of members of `protocol` under `spec`, started
/// after [`member_prefix`] (resuming: each node's clock budget counts from
/// there, the leader's is [`Bounds::leader_clock_steps`]), with `bounds`
/// (its [`Bounds::changes`] counts the prefix's too). `None` if the prefix
/// elects nobody.
pub fn member_model(
    protocol: ProtocolKind,
    bounds: Bounds,
    spec: MembershipSpec,
    start: MemberStart,
) -> Option<ElectionModel> {
    let prefix = member_prefix(protocol, bounds, &spec, start)?;
    Some(ElectionModel::with_members(protocol, bounds, spec).resuming_after(prefix))
}
