//! The `random` scenario, after TigerBeetle's VOPR: a safety phase of random
//! faults drawn from the run's seed, then healing and a liveness requirement.
//!
//! Faults: crashes (with immediate or delayed restart), pauses longer than the
//! election timeout, isolation, one-link and one-direction cuts, majority /
//! minority splits, deaf nodes, lossy / duplicating / reordering / slow links,
//! and storage failure windows, several of them aimed at the current leader.
//! Clocks drift within the core's bound throughout.

use crate::checker::Check;
use crate::network::{LinkParams, NS_PER_MS};
use crate::runner::{dur_ns, Sim};
use crate::scenario::{Expect, Params, Report};
use rand::seq::SliceRandom;
use rand::Rng;
use std::time::Duration;

/// Default length of the safety phase, in simulated seconds.
pub const DEFAULT_SAFETY_SECONDS: u64 = 20;
/// Faults undone later at most at once (bounds the undo list).
const MAX_PENDING_UNDOS: usize = 64;

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
    let mut cfg = p.sim_config(p.nodes);
    // Fsync from instant to 5 ms, drawn from the seed like everything else.
    cfg.fsync_ns = p.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) % (5 * NS_PER_MS);
    let mut sim = Sim::new(cfg, p.seed);
    let mut e = Expect::default();
    let bound = sim.liveness_bound();
    if sim.wait_for_stable_leader(bound).is_none() {
        e.fail(format!(
            "no stable leader within {:.0} ms of a cold start",
            bound.as_secs_f64() * 1e3
        ));
    }
    let end =
        sim.now_ns() + dur_ns(Duration::from_secs(p.sim_seconds.unwrap_or(DEFAULT_SAFETY_SECONDS)));
    safety_phase(&mut sim, p, end);
    liveness_phase(&mut sim);
    e.report("random", sim)
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
            sim.run_until(t);
            apply_undo(sim, undo);
            undos.remove(0);
        }
        sim.run_until(next);
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

fn apply_undo(sim: &mut Sim, undo: Undo) {
    match undo {
        Undo::Restart(i) => sim.restart(i),
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

fn inject(sim: &mut Sim, p: &Params) -> Option<Undo> {
    let n = sim.len();
    let kind = sim.rng().gen_range(0..14);
    let at_leader = sim.rng().gen_bool(0.5);
    match kind {
        0 | 1 => {
            let i = pick(sim, at_leader);
            sim.crash(i);
            // Sometimes restart at once: volatile state lost, durable state kept.
            if sim.rng().gen_bool(0.3) {
                sim.restart(i);
                None
            } else {
                Some(Undo::Restart(i))
            }
        }
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
            let a = pick(sim, at_leader);
            let b = (a + sim.rng().gen_range(1..n.max(2))) % n;
            if a != b {
                sim.cut_link(a, b);
            }
            Some(Undo::HealPartitions)
        }
        7 => {
            let a = pick(sim, at_leader);
            let b = (a + sim.rng().gen_range(1..n.max(2))) % n;
            if a != b {
                if sim.rng().gen_bool(0.5) {
                    sim.cut_one_way(a, b);
                } else {
                    sim.cut_one_way(b, a);
                }
            }
            Some(Undo::HealPartitions)
        }
        8 => {
            let mut order: Vec<usize> = (0..n).collect();
            order.shuffle(sim.rng());
            let size = sim.rng().gen_range(1..=n.max(2) / 2);
            sim.split(&order[..size.min(n)]);
            Some(Undo::HealPartitions)
        }
        9 => {
            let i = pick(sim, at_leader);
            sim.deafen(i);
            Some(Undo::HealPartitions)
        }
        10 | 11 => {
            let rng = sim.rng();
            let latency_max_ns = rng.gen_range(NS_PER_MS..=50 * NS_PER_MS);
            let link = LinkParams {
                latency_min_ns: NS_PER_MS / 2,
                latency_max_ns,
                loss: rng.gen_range(0.0..0.3),
                duplicate: rng.gen_range(0.0..0.1),
                reorder: rng.gen_range(0.0..0.3),
                reorder_max_ns: rng.gen_range(0..=dur_ns(p.heartbeat) * 2),
            };
            sim.set_links(link);
            Some(Undo::HealLinks)
        }
        12 => {
            let i = pick(sim, at_leader);
            sim.set_storage_failing(i, true);
            Some(Undo::StorageOk(i))
        }
        _ => {
            sim.heal_partitions();
            None
        }
    }
}

/// Heals everything, then requires a stable leader within the bound that stays
/// for the stability window (same node, same term, nobody else elected).
fn liveness_phase(sim: &mut Sim) {
    sim.heal_all();
    let healed_at = sim.now_ns();
    let bound = sim.liveness_bound();
    let Some((l, _)) = sim.wait_for_stable_leader(bound) else {
        let desc = format!(
            "no stable leader within {:.0} ms of healing (leaders {:?}, terms {:?})",
            bound.as_secs_f64() * 1e3,
            sim.leaders().iter().map(|i| i + 1).collect::<Vec<_>>(),
            (0..sim.len()).map(|i| sim.term_of(i).0).collect::<Vec<_>>()
        );
        sim.checker.fail(sim.now_ns(), Check::Liveness, desc);
        return;
    };
    let term = sim.term_of(l);
    let log = sim.leader_log.len();
    sim.run_for(sim.stability_window());
    let stayed =
        sim.stable_leader() == Some(l) && sim.term_of(l) == term && sim.leader_log.len() == log;
    if !stayed {
        let desc = format!(
            "the leader n{} (term {term:?}) stable {:.0} ms after healing did not stay: now {:?}, new leaders {:?}",
            l + 1,
            (sim.now_ns() - healed_at) as f64 / 1e6,
            sim.stable_leader().map(|x| x + 1),
            &sim.leader_log[log..]
        );
        sim.checker.fail(sim.now_ns(), Check::Liveness, desc);
    }
}
