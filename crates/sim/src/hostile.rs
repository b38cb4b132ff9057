//! The `hostile` scenario: a healthy cluster under a forger (see
//! [`crate::forger`]) — frames delivered as if other voters had sent them —
//! with the leader now and then cut off, paused or a node crashed, so that
//! frames that fooled a node show up in the checkers. Then the forger stops,
//! everything heals, and the cluster must converge.
//!
//! Run it with `tenure sim --scenario hostile [--forger ATTACKS]` (every
//! attack unless `--forger` names some). `--scenario random --forger
//! ATTACKS` adds the same forger to the random faults instead.
//!
//! # What the checkers must show
//!
//! Under every attack, while it runs and after: every safety checker stays
//! green — one leader per term, one vote per term, monotonic terms,
//! fencing, lease overlap, core invariants (a core that panics on a forged
//! frame counts as a `core-invariant` violation, and the node crashes).
//!
//! Liveness under continuous forgery is not promised in general. The
//! attacks split by what a stranger can win without authentication
//! ([`Promise`]):
//!
//! * **Refused** — `max-term`, `huge-echo`, `forged-resign`. The core
//!   refuses these frames: terms above `2^63 - 1`, echoes above the newest
//!   heartbeat sent, a `Resign` from anyone but the leader a node follows in
//!   its current term. They must change nothing: while they arrive, the
//!   cluster recovers from every fault within the usual liveness bound
//!   ([`Sim::liveness_bound`]) and a stable leader keeps its office (no
//!   election, no new leader, no higher term anywhere) through every quiet
//!   stretch.
//! * **Leader kept** — `forged-transfer`, `forged-claim`. A transfer from
//!   anyone but the successor the leader named is refused, and followers'
//!   leases refuse a stranger's candidacy, so a stable leader keeps its
//!   office while they arrive. But to a node that is electing, a forged
//!   candidacy or claim looks like a real one (a claim with a huge LSN wins
//!   the ranking; a vote request is a vote request), so an election may be
//!   held up while they arrive. The scenario therefore pauses the forger
//!   until the cluster has settled (within the liveness bound, as it must
//!   once a forger stops), then resumes it: the stable leader must keep its
//!   office through the quiet stretch.
//! * **Safety only while they run** — `rising-term`. A heartbeat in a term
//!   above everyone's is how a real new leader announces itself; without
//!   authentication a stranger's looks the same, so every node follows a
//!   leader that does not exist for as long as the frames come (that is
//!   what TLS is for). Only the checkers must stay green meanwhile. One gap
//!   remains, in ranked: the forged heartbeat moves every follower's lease
//!   to its claimed sender X, so if the real leader missed it (it was
//!   paused) and X stands (it was cut off from the leader), X gets their
//!   votes at once and leads while the old leader's lease still runs
//!   (`lease-overlap`; 10 of 2000 seeds of `random --forger all`, and the
//!   ignored test in `tests/sim/hostile.rs` that scripts it). Raft and Paxos
//!   keep it: X hears the followers' acknowledgements of the forged
//!   heartbeat, adopts their term and waits an election timeout.
//!
//! Once the forger stops — for every attack, rising terms included, whose
//! forged leader is then just a crashed one — everything heals and the
//! cluster must converge as after any fault: a stable leader within the
//! liveness bound that stays for the stability window. And no node may ever
//! have held a term at or above [`crate::forger::FORGED_TERM_FLOOR`]: only
//! max-term frames carry such terms, and they must never move a term.

use crate::expect::{Expect, Standing};
use crate::forger::{ForgerSpec, Promise};
use crate::params::Params;
use crate::report::Report;
use crate::runner::{dur_ns, Sim};
use crate::vopr;
use rand::Rng;
use std::time::Duration;

/// Default length of the attack, in simulated seconds.
pub const DEFAULT_ATTACK_SECONDS: u64 = 20;

/// Runs one `hostile` run: a first leader, the attack with occasional
/// faults, then the forger stops, everything heals and the cluster must
/// converge (see the module documentation).
pub fn run(p: &Params) -> Report {
    let spec = p.forger.clone().unwrap_or_else(ForgerSpec::all);
    let mut sim = Sim::new(p.sim_config(p.nodes), p.seed);
    let mut e = Expect::default();
    e.first_leader(&mut sim);
    let attack = Duration::from_secs(p.sim_seconds.unwrap_or(DEFAULT_ATTACK_SECONDS));
    let end = sim.now_ns() + dur_ns(attack);
    sim.start_forger(&spec);
    attack_phase(&mut sim, &mut e, p, &spec, end);
    sim.stop_forger();
    vopr::liveness_phase(&mut sim);
    e.no_forged_term(&sim);
    e.report("hostile", sim)
}

/// Until `end_ns`, in turns: one fault, held for half an election timeout
/// to three and undone — the leader cut off (four times in ten), the leader
/// paused (three), a node crashed (two) or none — then a quiet stretch of
/// one to three election timeouts, whose expectations depend on `spec`'s
/// promise (see [`quiet_stretch`]).
fn attack_phase(sim: &mut Sim, e: &mut Expect, p: &Params, spec: &ForgerSpec, end_ns: u64) {
    let et = dur_ns(p.election_timeout);
    while sim.now_ns() < end_ns {
        let hold = Duration::from_nanos(sim.rng().gen_range(et / 2..=3 * et));
        let leader = sim.leaders().first().copied();
        match (sim.rng().gen_range(0..10), leader) {
            (0..=3, Some(l)) => {
                sim.isolate(l);
                sim.run_for(hold);
                sim.heal_partitions();
            }
            (4..=6, Some(l)) => {
                sim.pause(l);
                sim.run_for(hold);
                sim.resume(l);
            }
            (7..=8, _) => {
                let n = sim.len();
                let i = sim.rng().gen_range(0..n);
                sim.crash(i);
                sim.run_for(hold);
                sim.restart(i);
            }
            _ => {}
        }
        let quiet = sim.rng().gen_range(et..=3 * et);
        quiet_stretch(sim, e, spec, quiet);
    }
}

/// A stretch of `quiet_ns` without faults while forged frames arrive.
///
/// * [`Promise::Refused`]: the frames change nothing, so with the forger
///   running the cluster settles as after any healed fault — a stable
///   leader within the liveness bound, and once the bound has passed a
///   stable leader — which then keeps its office through the stretch: no
///   election, no new leader, no higher term anywhere.
/// * [`Promise::LeaderKept`]: the frames may hold up an election, so the
///   forger pauses while the cluster settles (as it must once the forger
///   stops); then it resumes, and the stable leader keeps its office
///   through the stretch.
/// * [`Promise::SafetyWhileRunning`]: nothing beyond the checkers.
fn quiet_stretch(sim: &mut Sim, e: &mut Expect, spec: &ForgerSpec, quiet_ns: u64) {
    let promise = spec.promise();
    let quiet = Duration::from_nanos(quiet_ns);
    let context = match promise {
        Promise::SafetyWhileRunning => return sim.run_for(quiet),
        Promise::LeaderKept => {
            sim.stop_forger();
            "once the forger stopped"
        }
        Promise::Refused => "under refused frames",
    };
    let Some(l) = settle(sim, e, context) else {
        if promise == Promise::LeaderKept {
            sim.start_forger(spec);
        }
        return sim.run_for(quiet);
    };
    if promise == Promise::LeaderKept {
        sim.start_forger(spec);
    }
    let standing = Standing::of(sim, l);
    let from = sim.now_ns() as f64 / 1e6;
    sim.run_for(quiet);
    let mut kept = Expect::default();
    standing.expect_unchanged(sim, &mut kept);
    let to = sim.now_ns() as f64 / 1e6;
    e.absorb(kept, &format!("forged frames ({}) from {from:.0} to {to:.0} ms", promise.describe()));
}

/// Expects the cluster to settle as after a healed fault: a stable leader
/// within the liveness bound, and one still when the bound has passed (a
/// leadership may fall apart before it, as after any healing); returns it.
/// `context` says what the forger is doing meanwhile.
fn settle(sim: &mut Sim, e: &mut Expect, context: &str) -> Option<usize> {
    let bound = sim.liveness_bound();
    let settled_by = sim.now_ns() + dur_ns(bound);
    let at = |sim: &Sim| sim.now_ns() as f64 / 1e6;
    let Some((first, _)) = sim.wait_for_stable_leader(bound) else {
        e.fail(format!(
            "{context}, no stable leader within {:.0} ms (at {:.0} ms): terms {:?}",
            bound.as_secs_f64() * 1e3,
            at(sim),
            (0..sim.len()).map(|i| sim.term_of(i).0).collect::<Vec<_>>()
        ));
        return None;
    };
    sim.run_until(settled_by);
    let l = sim.stable_leader();
    e.that(l.is_some(), || {
        format!(
            "{context}, the stable leader n{} fell apart and none was stable at the liveness bound ({:.0} ms)",
            first + 1,
            at(sim)
        )
    });
    l
}
