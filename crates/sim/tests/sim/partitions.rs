//! Groups of partitions in the simulator: members with sessions share the
//! partitions of two groups that the ready leader's `GroupKeeper` assigns,
//! under every fault of the random run and faults of the members
//! themselves, with the partition checkers (no overlapping owners, epochs
//! increasing, every partition owned and the members balanced after
//! healing, no more moves than a change of members needs).
//!
//! Replay a failing seed with
//! `tenure sim --protocol P --nodes N --seeds 1 --start-seed SEED --scenario random
//! --workload partitions --sim-seconds S --trace` (the explanation prints it).

use crate::util;
use tenure_core::ProtocolKind;
use tenure_sim::checker::Check;
use tenure_sim::membership::MembershipSpec;
use tenure_sim::partitions::PartitionsBug;
use tenure_sim::scenario::{Params, Report};
use tenure_sim::stats::PartitionsStats;
use tenure_sim::workload::WorkloadSpec;

fn params(protocol: ProtocolKind, seed: u64, nodes: usize, sim_seconds: u64) -> Params {
    util::params(protocol, seed, nodes, sim_seconds, Some(WorkloadSpec::partitions()))
}

fn scenario_of(p: &Params) -> &'static str {
    match p.workload.as_ref().is_some_and(|w| w.membership.is_some()) {
        true => "membership",
        false => "random",
    }
}

fn run(p: &Params) -> Report {
    util::run(scenario_of(p), p)
}

fn explain(p: &Params, r: &Report) -> String {
    util::explain(scenario_of(p), "--workload partitions", p, r)
}

/// Runs seeds `seeds` of every protocol; every run must pass. Returns the
/// summed counts.
fn sweep(
    seeds: std::ops::RangeInclusive<u64>,
    nodes: &[usize],
    sim_seconds: u64,
) -> PartitionsStats {
    let mut total = PartitionsStats::default();
    for protocol in ProtocolKind::ALL {
        for seed in seeds.clone() {
            let p = params(protocol, seed, nodes[seed as usize % nodes.len()], sim_seconds);
            let r = run(&p);
            assert!(r.passed(), "{}", explain(&p, &r));
            total.add(r.stats.partitions.as_ref().expect("the partitions ran"));
        }
    }
    total
}

/// A light sweep for every test run: 30 seeds per protocol (90 runs),
/// short fault phases, 3 and 5 nodes. The sweeps of the docs run 2,000
/// seeds per protocol through `tenure sim`.
#[test]
fn every_protocol_keeps_partitions_safe_and_live_under_faults() {
    let t = sweep(1..=30, &[3, 5], 5);
    eprintln!("{t:?}");
    assert!(t.moves > 1_000 && t.releases > 500 && t.expiries > 50, "little got done: {t:?}");
    assert!(t.leaves > 0 && t.flips > 0 && t.revocations > 0 && t.joins > t.grants, "{t:?}");
    assert!(t.app_crashes > 0 && t.app_pauses > 0 && t.app_cutoffs > 0, "{t:?}");
    assert!(t.deadline_stops > 0 && t.sessions_lost > 0 && t.renewals_refused > 0, "{t:?}");
    assert!(t.keeper_voided > 0, "no keeper transaction ever found the group changed: {t:?}");
    assert!(t.weighted_runs > 0 && t.weighted_runs < t.runs, "{t:?}");
    // Every run came to rest and measured a leave and a join, each moving
    // exactly the fewest partitions it needed.
    assert_eq!(t.at_rest_runs, t.runs, "{t:?}");
    assert_eq!(t.changes_measured, 2 * t.runs, "{t:?}");
    assert_eq!(t.change_moves, t.change_min_moves, "{t:?}");
    assert_eq!((t.max_overlap_ns, t.unowned, t.unbalanced), (0, 0, 0));
}

/// The heavy sweep: `cargo test -p tenure-sim --release --test sim partitions:: -- --ignored`.
#[test]
#[ignore = "minutes; the CLI sweeps of the docs run 2,000 seeds per protocol"]
fn every_protocol_keeps_partitions_safe_and_live_heavy() {
    sweep(1..=1000, &[3, 5, 7], 20);
}

/// The groups of partitions under changes of tenure's own members (nodes
/// added, promoted, removed, replaced, wiped and brought back): a few
/// seeds per protocol.
#[test]
fn partitions_stay_safe_and_live_while_tenure_changes_members() {
    for protocol in ProtocolKind::ALL {
        for seed in 1..=4 {
            let mut p = params(protocol, seed, 5, 10);
            if let Some(w) = p.workload.as_mut() {
                w.membership = Some(MembershipSpec::default());
            }
            let r = run(&p);
            assert!(r.passed(), "{}", explain(&p, &r));
        }
    }
}

/// A seed replays exactly, with the members' sessions and the keepers'
/// plans too: two runs of one seed in one process count the same
/// messages, ownerships, moves and gaps.
#[test]
fn a_partitions_seed_replays_exactly() {
    for protocol in ProtocolKind::ALL {
        for seed in [5, 17] {
            let p = params(protocol, seed, 5, 5);
            let (a, b) = (run(&p), run(&p));
            let moves = a.stats.partitions.as_ref().map_or(0, |s| s.moves);
            assert!(moves > 0, "{protocol} seed {seed}: nothing moved");
            assert_eq!(a.stats, b.stats, "{protocol} seed {seed}: two runs differ");
            assert_eq!(a.violation_count, b.violation_count, "{protocol} seed {seed}");
        }
    }
}

/// Seeds of the planted bugs' runs (raft, 5 nodes, [`PLANTED_SECONDS`] of
/// faults).
const PLANTED_SEEDS: std::ops::RangeInclusive<u64> = 1..=8;

/// Simulated seconds of the planted bugs' runs.
const PLANTED_SECONDS: u64 = 10;

/// The faithful code passes every planted bug's seed, run for `seconds`
/// (checked once per test process and length).
fn faithful_seeds_pass(seconds: u64) {
    static PASSED: std::sync::Mutex<Vec<u64>> = std::sync::Mutex::new(Vec::new());
    let mut passed = PASSED.lock().unwrap_or_else(|e| e.into_inner());
    if passed.contains(&seconds) {
        return;
    }
    for seed in PLANTED_SEEDS {
        let p = params(ProtocolKind::Raft, seed, 5, seconds);
        let r = run(&p);
        assert!(r.passed(), "{}", explain(&p, &r));
    }
    passed.push(seconds);
}

/// Runs the planted bug's seeds with `bug`; returns, per check, how many
/// runs it caught the bug in.
fn caught(bug: PartitionsBug) -> impl Fn(Check) -> usize {
    caught_in(bug, PLANTED_SECONDS)
}

/// [`caught`] with runs of `seconds`.
fn caught_in(bug: PartitionsBug, seconds: u64) -> impl Fn(Check) -> usize {
    faithful_seeds_pass(seconds);
    let runs: Vec<Vec<Check>> = PLANTED_SEEDS
        .map(|seed| {
            let mut p = params(ProtocolKind::Raft, seed, 5, seconds);
            if let Some(s) = p.workload.as_mut().and_then(|w| w.partitions.as_mut()) {
                s.planted = Some(bug);
            }
            run(&p).violations.iter().map(|v| v.check).collect()
        })
        .collect();
    move |check| runs.iter().filter(|checks| checks.contains(&check)).count()
}

/// `partition-overlap`: a member that works past its deadline (cut off,
/// it cannot learn that its session expired and its partitions moved).
/// It needs a member cut off while it owns partitions and a move of them:
/// with 20 s of faults, 6 of 8 runs when this was written (2 of 8 in 10 s,
/// since members give back all they are asked for in one release).
#[test]
fn a_member_that_ignores_its_deadline_is_caught() {
    assert!(caught_in(PartitionsBug::IgnoreDeadline, 20)(Check::PartitionOverlap) >= 3);
}

/// `partition-overlap` and `partition-epoch`: a keeper that grants a
/// partition while the owner key is still there, marked `release`, before
/// the owner stopped and deleted it (8 of 8).
#[test]
fn a_keeper_that_hands_over_without_the_release_is_caught() {
    let caught = caught(PartitionsBug::GrantOverOwner);
    assert!(caught(Check::PartitionOverlap) >= 3);
    assert!(caught(Check::PartitionEpoch) >= 3);
}

/// `partition-epoch`: epochs that wrap (an owner key's `create_revision`
/// reported modulo 8), so a later owner has a lower or equal epoch (4 of
/// 8).
#[test]
fn an_epoch_that_wraps_is_caught() {
    assert!(caught(PartitionsBug::WrappingEpochs)(Check::PartitionEpoch) >= 3);
}

/// `partition-coverage`: members that stop on `release` but never delete
/// the key: the partition is granted to nobody while they live (8 of 8).
#[test]
fn a_member_that_never_releases_is_caught() {
    assert!(caught(PartitionsBug::NoRelease)(Check::PartitionCoverage) >= 3);
}

/// `partition-balance`: a keeper that only grants what nobody owns: a
/// member that joins a group whose partitions are all owned gets none (8
/// of 8).
#[test]
fn a_keeper_that_never_balances_is_caught() {
    assert!(caught(PartitionsBug::NeverBalance)(Check::PartitionBalance) >= 3);
}

/// `partition-moves`: a member asked to release one partition that
/// releases all of them: a join moves more than it needs (8 of 8).
#[test]
fn a_member_that_releases_everything_is_caught() {
    assert!(caught(PartitionsBug::ReleaseAll)(Check::PartitionMoves) >= 3);
}

/// `partition-epoch`: a release that hands a partition over by putting
/// the owner key in place instead of deleting and creating it again: the
/// new owner works under the old owner's epoch (8 of 8).
#[test]
fn a_handover_that_keeps_the_epoch_is_caught() {
    assert!(caught(PartitionsBug::HandOverInPlace)(Check::PartitionEpoch) >= 3);
}

/// The bounds the docs state (crates/sim/README.md), with the defaults: 5
/// nodes, 1–5 ms links, 1 ms fsync, 5% drift.
#[test]
fn the_bounds_are_the_documented_ones() {
    let mut cfg = tenure_sim::runner::SimConfig::new(5);
    cfg.workload = Some(WorkloadSpec::partitions());
    let sim = tenure_sim::runner::Sim::new(cfg, 1);
    // 500 ms of stabilisation stretched, three 2 s request timeouts, two
    // 80 ms polls and the keeper's 500 ms.
    assert_eq!(sim.change_bound() / 1_000_000, 7_212);
    // The liveness bound (2,717 ms), a 2 s TTL stretched, the above.
    assert_eq!(sim.partitions_bound() / 1_000_000, 12_140);
}

/// Ranked seed 3035 (5 nodes, the default 20 s), found by a 10,000-seed
/// sweep: a member whose leave took effect just after healing stayed out
/// for its drawn 0.25 to 1.5 TTLs, and the groups counted as at rest
/// without it (the check looked only at members in their group); it came
/// back during the measured join of another member, and that join moved
/// 6 partitions where 4 were needed (`partition-moves`). The workload's
/// fault, not tenure's: a member that leaves after healing now joins
/// again at once, and a member out of its group or leaving it keeps the
/// group from rest (`partition-coverage` if it still is at the bound).
#[test]
fn a_member_out_of_its_group_after_healing_keeps_it_from_rest() {
    let mut p = params(ProtocolKind::Ranked, 3035, 5, 20);
    p.sim_seconds = None;
    let r = run(&p);
    assert!(r.passed(), "{}", explain(&p, &r));
}

/// Ranked seed 130 of the `membership` scenario (5 nodes, its default
/// length), found by a 200-seed sweep: the cluster shrank to one voter,
/// which a fault paused for 1.4 s; a session due in the pause expired
/// when it resumed, 1,162 ms after its TTL. The deadline ledger counted
/// the time without a leader from the first event after the pause, 0.5 s
/// late, and reported a bound of 1,150 ms: the check's accounting, not
/// the lease clock (a paused sole voter expires nothing). Faults a
/// scenario applies between events are now sampled when applied.
#[test]
fn a_sole_voter_paused_past_a_sessions_ttl_is_time_without_a_leader() {
    let mut p = params(ProtocolKind::Ranked, 130, 5, 20);
    p.sim_seconds = None;
    if let Some(w) = p.workload.as_mut() {
        w.membership = Some(MembershipSpec::default());
    }
    let r = run(&p);
    assert!(r.passed(), "{}", explain(&p, &r));
}
