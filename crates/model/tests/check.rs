//! The exhaustive checks, in the debug profile: the real core satisfies every
//! safety property within the test bounds, and each planted storage bug is
//! caught with a counterexample.

use std::sync::OnceLock;
use tenure_core::{ProtocolKind, Term};
use tenure_model::check::{check, contested_prefix, hunt, CheckReport};
use tenure_model::model::{LEADER_ELECTED, ONE_VOTE_PER_TERM, TERMS_NEVER_DECREASE};
use tenure_model::{Action, Bounds, Durability, ElectionModel};

/// Checker threads for tests (the machine's two cores are shared).
const THREADS: usize = 1;

/// Depth explored from a contested election (the initial state counts as 1).
const CONTESTED_DEPTH: usize = 6;

fn summary(report: &CheckReport) -> String {
    format!(
        "{} unique states, depth {}, {:.2?}, complete {}, violated {:?}, unreached {:?}",
        report.unique_states,
        report.max_depth,
        report.elapsed,
        report.complete,
        report.violated(),
        report.unreached()
    )
}

/// The model started from a contested election the checker finds itself.
/// Both contested tests share one search for the prefix.
fn contested_model(protocol: ProtocolKind, durability: Durability) -> ElectionModel {
    static PREFIX: [OnceLock<Vec<Action>>; 3] = [OnceLock::new(), OnceLock::new(), OnceLock::new()];
    let slot = ProtocolKind::ALL.iter().position(|&k| k == protocol).expect("a protocol");
    let prefix = PREFIX[slot]
        .get_or_init(|| {
            contested_prefix(protocol, Bounds::QUICK, THREADS).expect("a contested election")
        })
        .clone();
    let bounds = Bounds { max_depth: Some(CONTESTED_DEPTH), ..Bounds::QUICK };
    ElectionModel::of(protocol, bounds, durability).starting_after(prefix)
}

/// The checks every protocol must pass, as one module per protocol.
macro_rules! protocol_checks {
    ($module:ident, $protocol:expr) => {
        mod $module {
            use super::*;

            #[test]
            fn fresh_cluster_is_safe_and_elects() {
                super::fresh_cluster_is_safe_and_elects($protocol);
            }

            #[test]
            fn contested_election_is_safe_and_elects() {
                super::contested_election_is_safe_and_elects($protocol);
            }

            #[test]
            fn a_vote_lost_on_restart_is_caught() {
                super::a_vote_lost_on_restart_is_caught($protocol);
            }

            #[test]
            fn a_term_lost_on_restart_is_caught() {
                super::a_term_lost_on_restart_is_caught($protocol);
            }
        }
    };
}

protocol_checks!(raft, ProtocolKind::Raft);
protocol_checks!(ranked, ProtocolKind::Ranked);
protocol_checks!(paxos, ProtocolKind::Paxos);

fn fresh_cluster_is_safe_and_elects(protocol: ProtocolKind) {
    let report = check(ElectionModel::of(protocol, Bounds::QUICK, Durability::Faithful), THREADS);
    println!("{protocol}: fresh cluster: {}", summary(&report));
    assert!(report.complete, "{}", summary(&report));
    assert!(report.violated().is_empty(), "{}", summary(&report));
    assert!(report.discoveries.contains_key(LEADER_ELECTED), "{}", summary(&report));
}

fn contested_election_is_safe_and_elects(protocol: ProtocolKind) {
    let report = check(contested_model(protocol, Durability::Faithful), THREADS);
    println!("{protocol}: contested election: {}", summary(&report));
    assert!(report.complete, "{}", summary(&report));
    assert!(report.violated().is_empty(), "{}", summary(&report));
    assert!(report.discoveries.contains_key(LEADER_ELECTED), "{}", summary(&report));
}

fn a_vote_lost_on_restart_is_caught(protocol: ProtocolKind) {
    let report = hunt(contested_model(protocol, Durability::ForgetVote), THREADS);
    println!("{protocol}: forgotten vote: {}", summary(&report));
    let path = report.discoveries.get(ONE_VOTE_PER_TERM).unwrap_or_else(|| {
        panic!("no counterexample to {ONE_VOTE_PER_TERM:?}: {}", summary(&report))
    });
    println!("{path}");
    // The counterexample goes through a restart, and ends with one voter
    // having granted two candidates in the same term.
    let actions = path.clone().into_actions();
    assert!(actions.iter().any(|a| matches!(a, Action::Restart(_))), "{actions:?}");
    let votes = &path.last_state().ghost.votes;
    let doubled = votes.iter().any(|&(voter, term, cand)| {
        votes.iter().any(|&(v, t, c)| v == voter && t == term && c != cand)
    });
    assert!(doubled, "{votes:?}");
    // The same bounds with faithful storage have no counterexample (see
    // `contested_election_is_safe_and_elects`), so the restart's storage is to blame.
}

fn a_term_lost_on_restart_is_caught(protocol: ProtocolKind) {
    let report = hunt(ElectionModel::of(protocol, Bounds::QUICK, Durability::ForgetAll), THREADS);
    println!("{protocol}: forgotten state: {}", summary(&report));
    let path = report.discoveries.get(TERMS_NEVER_DECREASE).unwrap_or_else(|| {
        panic!("no counterexample to {TERMS_NEVER_DECREASE:?}: {}", summary(&report))
    });
    println!("{path}");
    let (node, highest, now) =
        path.last_state().ghost.term_regressed.expect("the regression is recorded");
    assert!(now < highest, "{node:?}: {highest:?} -> {now:?}");
    assert_eq!(path.clone().into_actions().last(), Some(&Action::Restart(node)));
    assert!(highest >= Term(1));
}
