//! The replica model in the debug profile (the replica's debug assertions
//! on): the real `tenure_replica::Replica` keeps the synchronisation rule
//! within small bounds, every check reaches its witnesses (a commit, a later
//! leader ready after it, a fetch from the freshest node), and each planted
//! bug is caught with a counterexample. (The check from the fresh cluster,
//! larger, runs in the release profile: `tenure-model --replica --ci`.)

use stateright::Model;
use tenure_core::NodeId;
use tenure_model::replica::check::{check_replica, replica_model, ReplicaReport, ReplicaStart};
use tenure_model::replica::{
    Driver, ReplicaAction, ReplicaBounds, ReplicaModel, ReplicaState, Views,
    READY_LEADER_HOLDS_COMMITTED, SAME_ENTRY_AT_EACH_INDEX,
};
use tenure_replica::{Change, Payload, ReplicaMessage};

/// Checker threads for tests (the machine's two cores are shared).
const THREADS: usize = 1;

fn summary(report: &ReplicaReport, bounds: &ReplicaBounds) -> String {
    format!(
        "{} unique states, depth {}, {:.2?}, complete {}, violated {:?}, missed {:?}",
        report.unique_states,
        report.max_depth,
        report.elapsed,
        report.complete,
        report.violated(),
        report.missed(bounds)
    )
}

/// Checks every state from `start` within `bounds` and asserts that the
/// check is complete, safe and reaches every witness it must.
fn assert_safe(what: &str, start: ReplicaStart, bounds: ReplicaBounds, views: Views) {
    let model = replica_model(start, bounds, Driver::Faithful).expect("a model").with_views(views);
    let report = check_replica(model, THREADS, false, None);
    let summary = summary(&report, &bounds);
    println!("{what}: {summary}");
    assert!(report.complete, "{summary}");
    assert_eq!(report.violated(), Vec::<&str>::new(), "{summary}");
    assert_eq!(report.missed(&bounds), Vec::<&str>::new(), "{summary}");
}

/// Hunts for the first violation with `driver` and returns its report.
fn hunt(driver: Driver, bounds: ReplicaBounds, views: Views) -> ReplicaReport {
    let model = replica_model(ReplicaStart::Ready, bounds, driver).expect("a model");
    let report = check_replica(model.with_views(views), THREADS, true, None);
    println!("{driver:?}, {views:?}: {}", summary(&report, &bounds));
    report
}

#[test]
fn a_ready_leader_keeps_every_committed_entry_through_failover() {
    let bounds = ReplicaBounds::QUICK;
    assert_safe("from a ready leader", ReplicaStart::Ready, bounds, Views::Monotone);
}

#[test]
fn snapshots_keep_the_rule() {
    let bounds = ReplicaBounds { snapshot_every: Some(1), ..ReplicaBounds::QUICK };
    assert_safe("with a snapshot after every entry", ReplicaStart::Ready, bounds, Views::Monotone);
}

/// With leadership views that go back after a restart, only the durable
/// promise keeps a node from following an older leader: the faithful
/// replica stays safe.
#[test]
fn the_promise_alone_keeps_a_node_from_an_older_leader() {
    // Every state within 12 steps (the space without a depth bound is
    // millions of states: see `DEEP_CHECKS`).
    let bounds = ReplicaBounds { max_depth: Some(14), ..ReplicaBounds::QUICK };
    assert_safe(
        "views forgotten on restart",
        ReplicaStart::Ready,
        bounds,
        Views::ForgottenOnRestart,
    );
}

#[test]
fn sending_before_persisting_loses_a_committed_entry() {
    let report = hunt(Driver::SendBeforePersist, ReplicaBounds::QUICK, Views::Monotone);
    let path = report.discoveries.get(SAME_ENTRY_AT_EACH_INDEX).expect("a counterexample");
    println!("{path}");
    // A follower acknowledged an entry it had not made durable, crashed,
    // and helped a later leader commit something else at that index.
    let actions = path.clone().into_actions();
    assert!(actions.iter().any(|a| matches!(a, ReplicaAction::Restart(_))), "{actions:?}");
    assert!(path.last_state().ghost.diverged.is_some());
}

#[test]
fn a_leader_that_skips_the_synchronisation_loses_a_committed_entry() {
    let report = hunt(Driver::BlindSync, ReplicaBounds::QUICK, Views::Monotone);
    let path = report.discoveries.get(READY_LEADER_HOLDS_COMMITTED).expect("a counterexample");
    println!("{path}");
    // No crash is needed: the new leader never learnt of the committed entry.
    let actions = path.clone().into_actions();
    assert!(!actions.iter().any(|a| matches!(a, ReplicaAction::Restart(_))), "{actions:?}");
}

/// A lost promise is harmless while views only move forward (every promise
/// is of the token the node's view names, so the view refuses what the
/// promise would), and is caught once views can go back.
#[test]
fn a_promise_lost_on_restart_is_caught_when_views_go_back() {
    let bounds = ReplicaBounds::QUICK;
    let monotone = hunt(Driver::ForgetPromise, bounds, Views::Monotone);
    assert!(monotone.complete, "{}", summary(&monotone, &bounds));
    assert_eq!(monotone.violated(), Vec::<&str>::new(), "{}", summary(&monotone, &bounds));
    let forgotten = hunt(Driver::ForgetPromise, bounds, Views::ForgottenOnRestart);
    let path = forgotten.discoveries.get(SAME_ENTRY_AT_EACH_INDEX).expect("a counterexample");
    println!("{path}");
    let actions = path.clone().into_actions();
    assert!(actions.iter().any(|a| matches!(a, ReplicaAction::Restart(_))), "{actions:?}");
}

/// Which action a scripted step takes.
type Pick = Box<dyn Fn(&ReplicaAction) -> bool>;

/// The model's state after `steps` chosen by predicates: each step takes the
/// first enabled action it accepts (then every `Kick` enabled, as the
/// runtime calls a replica at once when it asks). Panics, naming the step,
/// if none is enabled.
fn run_script(model: &ReplicaModel, steps: &[(&str, Pick)]) -> (ReplicaState, Vec<ReplicaAction>) {
    let mut state = model.init_states().remove(0);
    let mut taken = Vec::new();
    let mut take = |state: &mut ReplicaState, pick: &dyn Fn(&ReplicaAction) -> bool| -> bool {
        let mut enabled = Vec::new();
        model.actions(state, &mut enabled);
        for a in enabled.into_iter().filter(|a| pick(a)) {
            if let Some(next) = model.next_state(state, a.clone()) {
                *state = next;
                taken.push(a);
                return true;
            }
        }
        false
    };
    for (what, pick) in steps {
        assert!(take(&mut state, pick.as_ref()), "step {what:?} is not enabled");
        while take(&mut state, &|a| matches!(a, ReplicaAction::Kick(_))) {}
    }
    (state, taken)
}

fn deliver(from: u64, to: u64, kind: &'static str) -> impl Fn(&ReplicaAction) -> bool {
    move |a| {
        matches!(a, ReplicaAction::Deliver(e)
            if e.from == NodeId(from) && e.to == NodeId(to) && e.msg.kind() == kind)
    }
}

/// A delivery of an `Append` from `from` to `to` whose first entry's payload
/// passes `first`.
fn append_carrying(
    from: u64,
    to: u64,
    first: impl Fn(&Payload) -> bool,
) -> impl Fn(&ReplicaAction) -> bool {
    move |a| match a {
        ReplicaAction::Deliver(e) if e.from == NodeId(from) && e.to == NodeId(to) => {
            matches!(&e.msg, ReplicaMessage::Append { entries, .. }
                if entries.first().is_some_and(|e| first(&e.payload)))
        }
        _ => false,
    }
}

/// Raft's single-server change bug (Ongaro, 2015), in the replica: a new
/// leader that changes members before it has committed an entry of its own
/// leadership. Four voters 1-4, `n1` leads token 1. `n1` appends "remove 3"
/// and nobody receives it. `n2` leads token 2 (with 3 and 4), appends its
/// no-op and at once "remove 4", and commits both with `n3`: voters 1-3,
/// two of them. `n1`, whose log names voters 1, 2 and 4, is electable (`n4`
/// holds no newer configuration) and leads token 3 with `n4`: two of those
/// three. It commits its own log, "remove 3" at the index where `n2`
/// committed its no-op. With the gate (the faithful replica), `n2` cannot
/// append its change before its no-op commits, and the run stops there.
#[test]
fn a_change_before_the_new_leaders_first_commit_loses_a_committed_entry() {
    let bounds = ReplicaBounds { changes: 4, leaderships: 3, restarts: 0, ..ReplicaBounds::QUICK };
    let remove = |node: u64, id: u64| {
        move |a: &ReplicaAction| {
            matches!(a, ReplicaAction::Change { node: n, change: Change::Remove(r) }
                if *n == NodeId(node) && *r == NodeId(id))
        }
    };
    let elect = |id: u64| move |a: &ReplicaAction| *a == ReplicaAction::Elect(NodeId(id));
    let tell = |node: u64, token: u64| {
        move |a: &ReplicaAction| *a == ReplicaAction::Tell { node: NodeId(node), token }
    };
    let steps: Vec<(&str, Pick)> = vec![
        ("n1 appends remove 3", Box::new(remove(1, 3))),
        ("n2 is elected", Box::new(elect(2))),
        ("n2 is told", Box::new(tell(2, 2))),
        ("n3 is told", Box::new(tell(3, 2))),
        ("n4 is told", Box::new(tell(4, 2))),
        ("n3 promises", Box::new(deliver(2, 3, "sync"))),
        ("n4 promises", Box::new(deliver(2, 4, "sync"))),
        ("n2 hears n3", Box::new(deliver(3, 2, "sync_reply"))),
        ("n2 hears n4", Box::new(deliver(4, 2, "sync_reply"))),
        ("n2 appends remove 4 before its no-op commits", Box::new(remove(2, 4))),
        ("n3 takes n2's no-op", Box::new(append_carrying(2, 3, |p| *p == Payload::Noop))),
        ("n2 hears n3", Box::new(deliver(3, 2, "append_reply"))),
        (
            "n3 takes n2's change",
            Box::new(append_carrying(2, 3, |p| matches!(p, Payload::Members(_)))),
        ),
        ("n2 hears n3 again", Box::new(deliver(3, 2, "append_reply"))),
        ("n1 is elected", Box::new(elect(1))),
        ("n1 is told", Box::new(tell(1, 3))),
        ("n4 is told", Box::new(tell(4, 3))),
        ("n4 promises", Box::new(deliver(1, 4, "sync"))),
        ("n1 hears n4", Box::new(deliver(4, 1, "sync_reply"))),
        ("n4 takes n1's entries", Box::new(deliver(1, 4, "append"))),
        ("n1 hears n4 lacks its entry", Box::new(deliver(4, 1, "append_reply"))),
        ("n4 takes n1's entries", Box::new(deliver(1, 4, "append"))),
        ("n1 hears n4", Box::new(deliver(4, 1, "append_reply"))),
    ];
    let ungated = replica_model(ReplicaStart::FourVoters, bounds, Driver::UngatedChanges)
        .expect("a model")
        .exact();
    let (state, taken) = run_script(&ungated, &steps);
    println!("{} steps after the four voters' prefix: {taken:?}", taken.len());
    let diverged = state.ghost.diverged.as_deref().expect("two entries applied at one index");
    println!("{diverged}");

    // The faithful replica refuses n2's change while its no-op is uncommitted.
    let faithful =
        replica_model(ReplicaStart::FourVoters, bounds, Driver::Faithful).expect("a model").exact();
    let before_change = steps.iter().position(|(w, _)| w.contains("remove 4")).expect("the step");
    let (state, _) = run_script(&faithful, &steps[..before_change]);
    let mut enabled = Vec::new();
    faithful.actions(&state, &mut enabled);
    let change = enabled.into_iter().find(remove(2, 4)).expect("offered to the leader");
    assert!(faithful.next_state(&state, change).is_none(), "the gate refuses it");
}

/// Changes of members with a failover, from four voters (a learner added and
/// promoted): a further change (removing any member, the leader included)
/// and a second leadership, within the electors' freshness check.
#[test]
fn changes_of_members_keep_the_rule() {
    let bounds = ReplicaBounds { changes: 3, restarts: 0, ..ReplicaBounds::QUICK };
    assert_safe("a change and a failover", ReplicaStart::FourVoters, bounds, Views::Monotone);
}
