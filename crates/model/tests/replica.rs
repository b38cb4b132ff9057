//! The replica model in the debug profile (the replica's debug assertions
//! on): the real `tenure_replica::Replica` keeps the synchronisation rule
//! within small bounds, every check reaches its witnesses (a commit, a later
//! leader ready after it, a fetch from the freshest node), and each planted
//! bug is caught with a counterexample. (The check from the fresh cluster,
//! larger, runs in the release profile: `tenure-model --replica --ci`.)

use tenure_model::replica::check::{check_replica, replica_model, ReplicaReport, ReplicaStart};
use tenure_model::replica::{
    Driver, ReplicaAction, ReplicaBounds, Views, READY_LEADER_HOLDS_COMMITTED,
    SAME_ENTRY_AT_EACH_INDEX,
};

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
