//! The `random` scenario, after TigerBeetle's VOPR: a safety phase of random
//! faults drawn from the run's seed, then healing and a liveness requirement.
//!
//! Faults: crashes (with immediate or delayed restart), pauses longer than the
//! election timeout, isolation, one-link and one-direction cuts, majority /
//! minority splits, deaf nodes, lossy / duplicating / reordering / slow links,
//! and storage failure windows, several of them aimed at the current leader.
//! Clocks drift within the core's bound throughout.
//!
//! Healing restores every link, restarts and resumes every node and ends
//! storage failures; in a quarter of the runs a random minority is then
//! crashed again, so only a majority is healed. The cluster must then show a
//! stable leader within [`Sim::liveness_bound`] and keep it (same node, same
//! term, nobody else elected) for [`Sim::stability_window`].
//!
//! With a forger ([`Params::forger`], `--forger`), forged frames arrive
//! throughout the fault phase too (see [`crate::forger`] and
//! [`crate::hostile`] for what each attack must show); the forger stops when
//! the faults heal, so the liveness requirement is unchanged.

use crate::checker::Check;
use crate::expect::Expect;
use crate::membership::MembershipSpec;
use crate::network::{LinkParams, NS_PER_MS};
use crate::params::Params;
use crate::report::Report;
use crate::runner::{dur_ns, Sim};
use crate::spy::SpySpec;
use crate::workload::WorkloadSpec;
use rand::seq::SliceRandom;
use rand::Rng;
use std::time::Duration;

/// Default length of the safety phase, in simulated seconds.
pub const DEFAULT_SAFETY_SECONDS: u64 = 20;
/// Default length of the safety phase of the `sessions` workload, in TTLs
/// of its sessions (at least [`DEFAULT_SAFETY_SECONDS`]): an app's faults
/// come 1 to 6 TTLs apart and a pause lasts up to 3, so in 20 s of 10 s
/// sessions the apps had their first faults only, and the heal resumed
/// every paused app before its session could expire (100,000 sessions:
/// not one expiry of a session its app still held, the early-expiry
/// check had nothing to check).
pub const SESSIONS_SAFETY_TTLS: u64 = 6;
/// Faults undone later at most at once (bounds the undo list).
const MAX_PENDING_UNDOS: usize = 64;
/// Largest one-way latency of a degraded link.
const MAX_FAULT_LATENCY_NS: u64 = 50 * NS_PER_MS;
/// Largest loss probability of a degraded link.
const MAX_FAULT_LOSS: f64 = 0.3;
/// Largest duplication probability of a degraded link.
const MAX_FAULT_DUPLICATION: f64 = 0.1;
/// Largest reordering probability of a degraded link.
const MAX_FAULT_REORDERING: f64 = 0.3;
/// Leaderships that may fall apart before the liveness bound passes (a
/// guard: far more than fit in the bound).
const MAX_POST_HEAL_FLAPS: u32 = 64;
/// Share of runs that heal only a majority: a random minority stays crashed.
const HEAL_MAJORITY_ONLY: f64 = 0.25;

/// Something to undo at a later time.
#[derive(Clone, Copy, Debug)]
enum Undo {
    Restart(usize),
    Resume(usize),
    StorageOk(usize),
    HealPartitions,
    HealLinks,
}

/// Runs one random (VOPR) run.
pub fn run(p: &Params) -> Report {
    run_named(p, "random")
}

/// Runs one random run with the key-value workload (the default one
/// unless `p` names one): scenario `kv`.
pub fn run_kv(p: &Params) -> Report {
    let mut p = p.clone();
    p.workload.get_or_insert_with(WorkloadSpec::kv);
    run_named(&p, "kv")
}

/// Runs one random run with the application elections (the default ones
/// unless `p` names a workload): scenario `elect`.
pub fn run_elect(p: &Params) -> Report {
    let mut p = p.clone();
    p.workload.get_or_insert_with(WorkloadSpec::elect);
    run_named(&p, "elect")
}

/// Runs one random run with changes of members (the key-value workload
/// unless `p` names one): scenario `membership` (see [`crate::membership`]).
pub fn run_membership(p: &Params) -> Report {
    let mut p = p.clone();
    let w = p.workload.get_or_insert_with(WorkloadSpec::kv);
    w.membership.get_or_insert_with(MembershipSpec::default);
    run_named(&p, "membership")
}

fn run_named(p: &Params, name: &'static str) -> Report {
    let mut cfg = p.sim_config(p.nodes);
    // Fsync from instant to 5 ms, drawn from the seed like everything else.
    cfg.fsync_ns = p.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) % (5 * NS_PER_MS);
    let mut sim = Sim::new(cfg, p.seed);
    // Spies report crashes (crate::spy): in half of the `random` seeds unless
    // --spies says otherwise; with the workloads only when it says so.
    let seeded = (name == "random" && crate::spy::seeded(p.seed)).then_some(SpySpec::FAULTY);
    if let Some(spec) = p.spies.or(seeded) {
        sim.set_spies(spec);
    }
    sim.start_workload();
    let mut e = Expect::default();
    e.first_leader(&mut sim);
    let end = sim.now_ns()
        + dur_ns(Duration::from_secs(p.sim_seconds.unwrap_or_else(|| safety_seconds(p))));
    if let Some(spec) = &p.forger {
        sim.start_forger(spec);
    }
    safety_phase(&mut sim, p, end);
    if p.forger.is_some() {
        sim.stop_forger();
    }
    liveness_phase(&mut sim);
    if p.forger.is_some() {
        e.no_forged_term(&sim);
    }
    for f in sim.finish_workload() {
        e.fail(f);
    }
    e.report(name, sim)
}

/// The safety phase's default length for `p`'s workload.
fn safety_seconds(p: &Params) -> u64 {
    let sessions = p.workload.as_ref().and_then(WorkloadSpec::sessions_only);
    sessions.map_or(DEFAULT_SAFETY_SECONDS, |e| {
        (SESSIONS_SAFETY_TTLS * e.ttl_ms / 1000).max(DEFAULT_SAFETY_SECONDS)
    })
}

fn safety_phase(sim: &mut Sim, p: &Params, end_ns: u64) {
    let et = dur_ns(p.election_timeout);
    let mut undos: Vec<(u64, Undo)> = Vec::new();
    while sim.now_ns() < end_ns {
        let gap = sim.rng().gen_range(10 * NS_PER_MS..=2 * et);
        let next = (sim.now_ns() + gap).min(end_ns);
        // Undo what is due on the way, in time order.
        undos.sort_by_key(|u| u.0);
        while let Some(&(t, undo)) = undos.first().filter(|u| u.0 <= next) {
            advance(sim, t);
            apply_undo(sim, undo);
            undos.remove(0);
        }
        advance(sim, next);
        if sim.now_ns() >= end_ns {
            break;
        }
        if let Some((u, after)) = inject_fault(sim, p) {
            if undos.len() < MAX_PENDING_UNDOS {
                undos.push((sim.now_ns() + after, u));
            } else {
                apply_undo(sim, u);
            }
        }
    }
}

/// Runs `sim` until `t_ns`; when the run changes members, the operator
/// looks at the cluster on the way, at its own times.
fn advance(sim: &mut Sim, t_ns: u64) {
    while let Some(tick) = sim.next_operator_tick().filter(|&k| k <= t_ns) {
        sim.run_until(tick);
        sim.operate();
    }
    sim.run_until(t_ns);
}

fn apply_undo(sim: &mut Sim, undo: Undo) {
    match undo {
        Undo::Restart(i) => {
            sim.cancel_crash_at_write(i);
            sim.restart(i)
        }
        Undo::Resume(i) => sim.resume(i),
        Undo::StorageOk(i) => sim.set_storage_failing(i, false),
        Undo::HealPartitions => sim.heal_partitions(),
        Undo::HealLinks => {
            let link = sim.cfg.link;
            sim.set_links(link);
        }
    }
}

/// Picks a node: the current leader when `leader` and there is one, else any.
fn pick(sim: &mut Sim, leader: bool) -> usize {
    let leaders = sim.leaders();
    if leader {
        if let Some(&l) = leaders.first() {
            return l;
        }
    }
    let n = sim.len();
    sim.rng().gen_range(0..n)
}

/// Injects one random fault; returns how to undo it and after how long.
fn inject_fault(sim: &mut Sim, p: &Params) -> Option<(Undo, u64)> {
    let et = dur_ns(p.election_timeout);
    let undo = inject(sim, p)?;
    let after = match undo {
        // Pauses mostly outlast the election timeout.
        Undo::Resume(_) => sim.rng().gen_range(et / 2..=3 * et),
        _ => sim.rng().gen_range(0..=3 * et),
    };
    Some((undo, after))
}

/// Draws one fault and injects it; returns its undo, if it has one.
/// Half the node and link faults aim at the current leader.
fn inject(sim: &mut Sim, p: &Params) -> Option<Undo> {
    // With the workload, two more kinds: crashes during a log write.
    let kinds = if p.workload.is_some() { 16 } else { 14 };
    let kind = sim.rng().gen_range(0..kinds);
    let at_leader = sim.rng().gen_bool(0.5);
    match kind {
        0 | 1 => crash(sim, at_leader),
        2 | 3 => {
            let i = pick(sim, at_leader);
            sim.pause(i);
            Some(Undo::Resume(i))
        }
        4 | 5 => {
            let i = pick(sim, at_leader);
            sim.isolate(i);
            Some(Undo::HealPartitions)
        }
        6 => {
            let (a, b) = pick_pair(sim, at_leader);
            if a != b {
                sim.cut_link(a, b);
            }
            Some(Undo::HealPartitions)
        }
        7 => cut_one_way(sim, at_leader),
        8 => split(sim),
        9 => {
            let i = pick(sim, at_leader);
            sim.deafen(i);
            Some(Undo::HealPartitions)
        }
        10 => {
            let link = random_link(sim, p);
            sim.set_links(link);
            Some(Undo::HealLinks)
        }
        11 => {
            // One directed link gets its own latency distribution and faults.
            let (from, to) = pick_pair(sim, at_leader);
            let link = random_link(sim, p);
            sim.set_link(from, to, link);
            Some(Undo::HealLinks)
        }
        12 => {
            let i = pick(sim, at_leader);
            sim.set_storage_failing(i, true);
            Some(Undo::StorageOk(i))
        }
        14 | 15 => {
            let i = pick(sim, at_leader);
            sim.crash_at_next_write(i);
            Some(Undo::Restart(i))
        }
        _ => {
            sim.heal_partitions();
            None
        }
    }
}

/// Picks a node as [`pick`] does, then another one (the same one only in a
/// cluster of one).
fn pick_pair(sim: &mut Sim, leader: bool) -> (usize, usize) {
    let n = sim.len();
    let a = pick(sim, leader);
    let b = (a + sim.rng().gen_range(1..n.max(2))) % n;
    (a, b)
}

/// Crashes a node; sometimes restarts it at once (volatile state lost,
/// durable state kept), else leaves the restart for later.
fn crash(sim: &mut Sim, at_leader: bool) -> Option<Undo> {
    let i = pick(sim, at_leader);
    sim.crash(i);
    if sim.rng().gen_bool(0.3) {
        sim.restart(i);
        None
    } else {
        Some(Undo::Restart(i))
    }
}

/// Cuts one direction of the link between two nodes.
fn cut_one_way(sim: &mut Sim, at_leader: bool) -> Option<Undo> {
    let (a, b) = pick_pair(sim, at_leader);
    if a != b {
        if sim.rng().gen_bool(0.5) {
            sim.cut_one_way(a, b);
        } else {
            sim.cut_one_way(b, a);
        }
    }
    Some(Undo::HealPartitions)
}

/// Splits off a random group of at most half the nodes.
fn split(sim: &mut Sim) -> Option<Undo> {
    let n = sim.len();
    let mut order: Vec<usize> = (0..n).collect();
    order.shuffle(sim.rng());
    let size = sim.rng().gen_range(1..=n.max(2) / 2);
    sim.split(&order[..size.min(n)]);
    Some(Undo::HealPartitions)
}

/// A degraded link: slower, lossy, duplicating and reordering, each to a random degree.
fn random_link(sim: &mut Sim, p: &Params) -> LinkParams {
    let rng = sim.rng();
    LinkParams {
        latency_min_ns: NS_PER_MS / 2,
        latency_max_ns: rng.gen_range(NS_PER_MS..=MAX_FAULT_LATENCY_NS),
        loss: rng.gen_range(0.0..MAX_FAULT_LOSS),
        duplicate: rng.gen_range(0.0..MAX_FAULT_DUPLICATION),
        reorder: rng.gen_range(0.0..MAX_FAULT_REORDERING),
        reorder_max_ns: rng.gen_range(0..=dur_ns(p.heartbeat) * 2),
    }
}

/// The indices of the voters: every node, unless the run changes members;
/// then the voters of the newest configuration a replica knows committed.
fn voter_indices(sim: &Sim) -> Vec<usize> {
    match sim.converging_voters() {
        None => (0..sim.len()).collect(),
        Some(voters) => (0..sim.len()).filter(|&i| voters.contains(&sim.host(i).id)).collect(),
    }
}

/// Heals everything, then requires convergence: by `healed + liveness_bound`
/// a stable leader must appear that then stays — same node, same term, still
/// stable, nobody else elected — for the stability window. A leadership that
/// falls apart before the bound has passed is tolerated (and counted in
/// `post_heal_flaps`); one that falls apart later is a violation.
pub(crate) fn liveness_phase(sim: &mut Sim) {
    sim.heal_all();
    if sim.rng().gen_bool(HEAL_MAJORITY_ONLY) {
        // Heal only a majority: a random minority of the voters stays down.
        // With changes of members, a minority of every configuration that
        // may be in force: a configuration appended and not committed
        // binds the nodes that hold it, and one that removes a voter cannot
        // commit, nor be abandoned, while a majority of its own voters is
        // down, even if the committed one has a majority up (as in Raft;
        // docs/MEMBERSHIP.md, "who stands").
        let mut order = voter_indices(sim);
        let n = order.len();
        if n > 0 {
            let down = sim.rng().gen_range(0..=(n - 1) / 2);
            order.shuffle(sim.rng());
            let configs = sim.configurations_in_play().unwrap_or_default();
            let mut kept_down: Vec<usize> = Vec::new();
            for &i in &order {
                if kept_down.len() == down {
                    break;
                }
                let id = sim.host(i).id;
                let minority_everywhere = configs.iter().all(|voters| {
                    let down_here = kept_down
                        .iter()
                        .chain(std::iter::once(&i))
                        .filter(|&&x| voters.contains(&sim.host(x).id))
                        .count();
                    !voters.contains(&id) || 2 * down_here < voters.len()
                });
                if minority_everywhere {
                    kept_down.push(i);
                }
            }
            sim.trace_fault(&format!(
                "heal only a majority of the voters {:?}: {} stay down {:?}",
                order.iter().map(|i| i + 1).collect::<Vec<_>>(),
                kept_down.len(),
                kept_down.iter().map(|i| i + 1).collect::<Vec<_>>()
            ));
            for &i in &kept_down {
                sim.crash(i);
            }
        }
    }
    let healed_at = sim.now_ns();
    let bound = sim.liveness_bound();
    let deadline = healed_at + dur_ns(bound);
    let window = dur_ns(sim.stability_window());
    // Each flap elects someone or ends a lease; the bound limits how many fit.
    for _ in 0..MAX_POST_HEAL_FLAPS {
        let remaining = Duration::from_nanos(deadline.saturating_sub(sim.now_ns()));
        let Some((l, since)) = sim.wait_for_stable_leader(remaining) else {
            let desc = format!(
                "no stable leader within {:.0} ms of healing (leaders {:?}, terms {:?}){}",
                bound.as_secs_f64() * 1e3,
                sim.leaders().iter().map(|i| i + 1).collect::<Vec<_>>(),
                (0..sim.len()).map(|i| sim.term_of(i).0).collect::<Vec<_>>(),
                if sim.membership_runs() { sim.unfollowed() } else { String::new() }
            );
            sim.checker.fail(sim.now_ns(), Check::Liveness, desc);
            return;
        };
        let term = sim.term_of(l);
        let log = sim.leader_log.len();
        let broke = sim.run_until_cond(since + window, |s| {
            s.stable_leader() != Some(l) || s.term_of(l) != term || s.leader_log.len() != log
        });
        let Some(broke_at) = broke else { return };
        sim.stats.post_heal_flaps += 1;
        if broke_at > deadline {
            let desc = format!(
                "the leader n{} (term {term:?}), stable {:.0} ms after healing, lost it {:.0} ms after healing \
                 (bound {:.0} ms): now {:?}, new leaders {:?}",
                l + 1,
                (since - healed_at) as f64 / 1e6,
                (broke_at - healed_at) as f64 / 1e6,
                bound.as_secs_f64() * 1e3,
                sim.stable_leader().map(|x| x + 1),
                &sim.leader_log[log..]
            );
            sim.checker.fail(sim.now_ns(), Check::Liveness, desc);
            return;
        }
    }
    sim.checker.fail(
        sim.now_ns(),
        Check::Liveness,
        "leadership kept flapping after healing".into(),
    );
}
