//! Bounds, starting states and runs of the replica model.
//!
//! Two starting states: the fresh cluster ([`ReplicaStart::Fresh`]), and a
//! ready leader ([`ReplicaStart::Ready`]: `n1` leads token 1, every node was
//! told, its no-op is committed everywhere and nothing is in flight; the
//! greedy run [`ready_prefix`] gets there). The second spends no bound on
//! the first leadership's synchronisation, which every check from the fresh
//! cluster repeats in every interleaving, so it reaches more within the same
//! time: proposals, failover, fetching.

use super::{
    ReplicaAction, ReplicaBounds, ReplicaModel, ReplicaState, Views, CHANGE_COMMITS,
    READY_AFTER_CHANGE, REPLICA_SAFETY, REPLICA_WITNESSES, SNAPSHOT_INSTALLED,
};
use crate::check::{run_checker, Order, Progress, Report};
use stateright::{HasDiscoveries, Model};
use tenure_core::NodeId;
use tenure_replica::Change;

/// The outcome of one run of the replica model.
pub type ReplicaReport = Report<ReplicaState, ReplicaAction>;

impl Report<ReplicaState, ReplicaAction> {
    /// Safety properties with a counterexample.
    pub fn violated(&self) -> Vec<&'static str> {
        REPLICA_SAFETY.into_iter().filter(|p| self.discoveries.contains_key(p)).collect()
    }

    /// Witnesses this run did not reach: [`REPLICA_WITNESSES`], and
    /// [`SNAPSHOT_INSTALLED`] when `bounds` take snapshots.
    pub fn missed(&self, bounds: &ReplicaBounds) -> Vec<&'static str> {
        let snapshots = bounds.snapshot_every.map(|_| SNAPSHOT_INSTALLED);
        let changes = (bounds.changes > 0).then_some([CHANGE_COMMITS, READY_AFTER_CHANGE]);
        let required =
            REPLICA_WITNESSES.into_iter().chain(snapshots).chain(changes.into_iter().flatten());
        required.filter(|p| !self.discoveries.contains_key(p)).collect()
    }
}

/// The state a check starts from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplicaStart {
    /// No leadership named, every log empty.
    Fresh,
    /// `n1` is the ready leader of token 1 ([`ready_prefix`]).
    Ready,
    /// As [`ReplicaStart::Ready`], after which `n1` added [`super::SPARE`] as a
    /// learner, promoted it and committed a command, each step settled
    /// everywhere: four voters ([`four_voters_prefix`]). Needs two of
    /// [`ReplicaBounds::changes`] and one of [`ReplicaBounds::proposals`].
    FourVoters,
}

impl ReplicaBounds {
    /// The debug-profile tests' bounds from a ready leader: a second
    /// leadership, one proposal, one restart, no heartbeat.
    pub const QUICK: ReplicaBounds = ReplicaBounds {
        leaderships: 2,
        proposals: 1,
        clock_steps_per_node: 0,
        restarts: 1,
        duplicates: 0,
        snapshot_every: None,
        append_entries: None,
        max_depth: None,
        changes: 0,
    };

    /// The debug-profile tests' bounds from the fresh cluster: two
    /// leaderships and one proposal, nothing else.
    pub const FRESH_QUICK: ReplicaBounds = ReplicaBounds { restarts: 0, ..ReplicaBounds::QUICK };
}

/// One check of a suite: what it is called, where it starts, its bounds and
/// how leadership views may move.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicaCheck {
    /// A short name for reports.
    pub name: &'static str,
    /// The starting state.
    pub start: ReplicaStart,
    /// The bounds.
    pub bounds: ReplicaBounds,
    /// How views move.
    pub views: Views,
}

const fn ready(name: &'static str, bounds: ReplicaBounds) -> ReplicaCheck {
    ReplicaCheck { name, start: ReplicaStart::Ready, bounds, views: Views::Monotone }
}

const Q: ReplicaBounds = ReplicaBounds::QUICK;

/// What CI runs (`tenure-model --replica --ci`): eight small checks, each
/// of which must be safe and reach every witness, a minute in all.
pub const CI_CHECKS: [ReplicaCheck; 8] = [
    ready("failover and a restart", Q),
    ready(
        "three leaderships, entries one by one",
        ReplicaBounds { leaderships: 3, restarts: 0, append_entries: Some(1), ..Q },
    ),
    ready("heartbeats", ReplicaBounds { clock_steps_per_node: 1, restarts: 0, ..Q }),
    ready("two proposals", ReplicaBounds { proposals: 2, restarts: 0, ..Q }),
    ready("a snapshot after every entry", ReplicaBounds { snapshot_every: Some(1), ..Q }),
    ReplicaCheck {
        name: "from the fresh cluster",
        start: ReplicaStart::Fresh,
        bounds: ReplicaBounds::FRESH_QUICK,
        views: Views::Monotone,
    },
    ReplicaCheck {
        name: "a change of members and a failover, four voters",
        start: ReplicaStart::FourVoters,
        bounds: ReplicaBounds { changes: 3, restarts: 0, ..Q },
        views: Views::Monotone,
    },
    ReplicaCheck {
        name: "views forgotten on restart, 14 steps",
        start: ReplicaStart::Ready,
        bounds: ReplicaBounds { max_depth: Some(16), ..Q },
        views: Views::ForgottenOnRestart,
    },
];

/// The release binary's default (`tenure-model --replica`): larger bounds,
/// tens of minutes in all.
pub const DEEP_CHECKS: [ReplicaCheck; 6] = [
    ready("three leaderships and a restart", ReplicaBounds { leaderships: 3, ..Q }),
    ready(
        "three leaderships and a duplicate",
        ReplicaBounds { leaderships: 3, restarts: 0, duplicates: 1, ..Q },
    ),
    ready("two proposals and a restart", ReplicaBounds { proposals: 2, ..Q }),
    ready("heartbeats and a restart", ReplicaBounds { clock_steps_per_node: 1, ..Q }),
    ready(
        "three leaderships, a snapshot after every entry",
        ReplicaBounds { leaderships: 3, restarts: 0, snapshot_every: Some(1), ..Q },
    ),
    ReplicaCheck {
        name: "views forgotten on restart",
        start: ReplicaStart::Ready,
        bounds: Q,
        views: Views::ForgottenOnRestart,
    },
];

/// Greedy steps [`ready_prefix`] takes at most.
pub const READY_PREFIX_MAX_STEPS: usize = 100;

/// A deterministic run from the fresh cluster to `n1` being the ready leader
/// of token 1 with nothing in flight: `n1` is elected and told first, then
/// `n2` and `n3`; then, while a replica asks to be called at once it is
/// (the lowest id first), else the first message in flight is delivered.
/// `None` if that does not end within [`READY_PREFIX_MAX_STEPS`] or the bounds
/// allow no leadership.
pub fn ready_prefix(bounds: ReplicaBounds) -> Option<Vec<ReplicaAction>> {
    if bounds.leaderships == 0 {
        return None;
    }
    let unbounded = ReplicaBounds { restarts: 0, duplicates: 0, max_depth: None, ..bounds };
    let model = ReplicaModel::new(unbounded, super::Driver::Faithful).exact();
    let mut state = model.init_states().remove(0);
    let mut prefix = vec![ReplicaAction::Elect(NodeId(1))];
    prefix.extend((1..=3).map(|n| ReplicaAction::Tell { node: NodeId(n), token: 1 }));
    for action in &prefix {
        state = model.next_state(&state, action.clone())?;
    }
    loop {
        let settled = state.network.is_empty()
            && state.nodes.iter().all(|n| n.replica.poll_timeout() > n.now);
        if state.nodes[0].ready.is_some() && settled {
            return Some(prefix);
        }
        if prefix.len() >= READY_PREFIX_MAX_STEPS {
            return None;
        }
        let mut enabled = Vec::new();
        model.actions(&state, &mut enabled);
        let kick = enabled.iter().find(|a| matches!(a, ReplicaAction::Kick(_)));
        let delivery = || enabled.iter().find(|a| matches!(a, ReplicaAction::Deliver(_)));
        let action = kick.or_else(delivery)?.clone();
        state = model.next_state(&state, action.clone())?;
        prefix.push(action);
    }
}

/// [`ready_prefix`], then `n1` adds [`super::SPARE`] as a learner,
/// promotes it and proposes a command, and after each step the run settles
/// the same greedy way (the spare is told of token 1 first). `None` if that
/// cannot be reached (fewer than two changes or no proposal allowed, or it
/// does not settle).
pub fn four_voters_prefix(bounds: ReplicaBounds) -> Option<Vec<ReplicaAction>> {
    if bounds.changes < 2 || bounds.proposals < 1 {
        return None;
    }
    let mut prefix = ready_prefix(bounds)?;
    let unbounded = ReplicaBounds { restarts: 0, duplicates: 0, max_depth: None, ..bounds };
    let model = ReplicaModel::new(unbounded, super::Driver::Faithful).exact();
    let mut state = model.init_states().remove(0);
    for action in &prefix {
        state = model.next_state(&state, action.clone())?;
    }
    let steps = [
        ReplicaAction::Tell { node: super::SPARE, token: 1 },
        ReplicaAction::Change { node: NodeId(1), change: Change::AddLearner(super::spare()) },
        ReplicaAction::Change { node: NodeId(1), change: Change::Promote(super::SPARE) },
        ReplicaAction::Propose(NodeId(1)),
    ];
    for step in steps {
        state = model.next_state(&state, step.clone())?;
        prefix.push(step);
        settle(&model, &mut state, &mut prefix)?;
    }
    Some(prefix)
}

/// Takes the greedy steps of [`ready_prefix`] until nothing is in flight and
/// no replica asks to be called.
fn settle(
    model: &ReplicaModel,
    state: &mut ReplicaState,
    prefix: &mut Vec<ReplicaAction>,
) -> Option<()> {
    for _ in 0..READY_PREFIX_MAX_STEPS {
        let settled = state.network.is_empty()
            && state.nodes.iter().all(|n| n.replica.poll_timeout() > n.now);
        if settled {
            return Some(());
        }
        let mut enabled = Vec::new();
        model.actions(state, &mut enabled);
        let kick = enabled.iter().find(|a| matches!(a, ReplicaAction::Kick(_)));
        let delivery = || enabled.iter().find(|a| matches!(a, ReplicaAction::Deliver(_)));
        let action = kick.or_else(delivery)?.clone();
        *state = model.next_state(state, action.clone())?;
        prefix.push(action);
    }
    None
}

impl ReplicaCheck {
    /// Its model, with `driver`. `None` if the ready leader cannot be reached.
    pub fn model(&self, driver: super::Driver) -> Option<ReplicaModel> {
        Some(replica_model(self.start, self.bounds, driver)?.with_views(self.views))
    }
}

/// The model within `bounds` from `start`, with `driver`. `None` if the
/// ready leader cannot be reached.
pub fn replica_model(
    start: ReplicaStart,
    bounds: ReplicaBounds,
    driver: super::Driver,
) -> Option<ReplicaModel> {
    let model = ReplicaModel::new(bounds, driver);
    match start {
        ReplicaStart::Fresh => Some(model),
        ReplicaStart::Ready => Some(model.starting_after(ready_prefix(bounds)?)),
        ReplicaStart::FourVoters => Some(model.starting_after(four_voters_prefix(bounds)?)),
    }
}

/// Explores `model` depth-first until the first safety violation: not the
/// shortest counterexample, but one deep in the bounds is reached long before
/// a breadth-first hunt gets there (`--deep-hunt`).
pub fn hunt_replica_depth_first(
    model: ReplicaModel,
    threads: usize,
    progress: Option<Progress<'_>>,
) -> ReplicaReport {
    let depth = model.bounds.max_depth;
    run_checker(model, depth, threads, Some(HasDiscoveries::AnyFailures), Order::Depth, progress)
}

/// Explores every state of `model` within its bounds: depth-first without a
/// depth bound (small memory), breadth-first with one; with `hunt_only`,
/// breadth-first until the first safety violation (a shortest counterexample).
pub fn check_replica(
    model: ReplicaModel,
    threads: usize,
    hunt_only: bool,
    progress: Option<Progress<'_>>,
) -> ReplicaReport {
    let depth = model.bounds.max_depth;
    let stop = hunt_only.then_some(HasDiscoveries::AnyFailures);
    let order = if hunt_only || depth.is_some() { Order::Breadth } else { Order::Depth };
    run_checker(model, depth, threads, stop, order, progress)
}
