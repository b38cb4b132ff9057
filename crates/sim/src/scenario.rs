//! Named scenarios with asserted outcomes.
//!
//! Each scenario scripts a [`Sim`] and states its expectation in code: a
//! failed expectation is recorded (with what was seen) next to any checker
//! violation, and the run passes only with neither. The inputs are
//! [`Params`], the expectations [`Expect`], the outcome a [`Report`]; they
//! are re-exported here for callers that name them through this module.

pub use crate::expect::Expect;
use crate::expect::Standing;
pub use crate::params::Params;
pub use crate::report::Report;

use crate::expect::ms;
use crate::runner::{dur_ns, Sim};
use crate::vopr;
use rand::Rng;
use std::time::Duration;
use tenure_core::ProtocolKind;

/// A named scenario.
#[derive(Clone, Copy, Debug)]
pub struct Scenario {
    /// Name used by `--scenario`.
    pub name: &'static str,
    /// One line for `--scenario list`: the setup and the asserted outcome.
    pub description: &'static str,
    /// The cluster size when the scenario fixes it.
    pub fixed_nodes: Option<usize>,
    /// Protocols that do not promise the stated outcome, each with the reason.
    /// Checker violations fail every protocol; only the stated outcome is waived.
    pub not_promised: &'static [(ProtocolKind, &'static str)],
    /// Whether the scenario runs a forger ([`crate::forger`]).
    pub forger: ForgerUse,
    /// Whether the scenario runs the key-value workload ([`crate::workload`]).
    pub workload: WorkloadUse,
    /// Whether spies report crashed nodes dead ([`crate::spy`]).
    pub spies: SpyUse,
    run: fn(&Params) -> Report,
}

/// Whether a scenario runs spies that report crashed nodes dead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpyUse {
    /// Never: the scenario states outcomes of timeout-driven failovers.
    Never,
    /// As [`Params::spies`] says (`random`: in half of the seeds unless set;
    /// `kv`, `elect`: none unless set).
    Optional,
    /// Always (`spy`: faulty spies unless [`Params::spies`] says otherwise).
    Always,
}

/// Whether a scenario runs the key-value workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkloadUse {
    /// Never.
    Never,
    /// When [`Params::workload`] is set (`random --workload kv|elect`).
    Optional,
    /// Always, the scenario's workload unless [`Params::workload`] names
    /// one (`kv`, `elect`). `tenure sim compare`, which measures elections, leaves these out.
    Always,
}

/// Whether a scenario runs a forger.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ForgerUse {
    /// Never: the scenario states outcomes of benign faults only.
    Never,
    /// When [`Params::forger`] is set (`random`).
    Optional,
    /// Always, every attack unless [`Params::forger`] names some
    /// (`hostile`). `tenure sim compare`, which measures the protocols
    /// under benign faults, leaves these out.
    Always,
}

impl Scenario {
    /// Runs the scenario once. When `p.protocol` does not promise its outcome,
    /// deviations from it are reported as observations instead of failures.
    pub fn run(&self, p: &Params) -> Report {
        let mut report = (self.run)(p);
        if let Some(why) = self.not_promised_by(p.protocol) {
            report.not_promised = Some(why);
            report.observations = std::mem::take(&mut report.failures);
        }
        report
    }

    /// Why `protocol` does not promise this scenario's outcome, if it does not.
    pub fn not_promised_by(&self, protocol: ProtocolKind) -> Option<&'static str> {
        self.not_promised.iter().find(|(k, _)| *k == protocol).map(|&(_, why)| why)
    }

    /// The cluster size a run with `p` uses.
    pub fn nodes(&self, p: &Params) -> usize {
        self.fixed_nodes.unwrap_or(p.nodes)
    }
}

/// Every scenario, `random` included.
pub const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "non-sticky-leader",
        description: "BlazingMQ: 4 nodes, isolate follower B for 5 election timeouts, heal: same leader, no term change",
        fixed_nodes: Some(4),
        not_promised: &[],
        forger: ForgerUse::Never,
        workload: WorkloadUse::Never,
        spies: SpyUse::Never,
        run: non_sticky_leader,
    },
    Scenario {
        name: "leader-ping-pong",
        description: "BlazingMQ: 4 nodes, cut only the link leader A <-> follower B: no leader change, no term inflation",
        fixed_nodes: Some(4),
        not_promised: &[],
        forger: ForgerUse::Never,
        workload: WorkloadUse::Never,
        spies: SpyUse::Never,
        run: leader_ping_pong,
    },
    Scenario {
        name: "one-link-failure",
        description: "TRex: 3 nodes, cut the link leader <-> one follower: no leader change",
        fixed_nodes: Some(3),
        not_promised: &[],
        forger: ForgerUse::Never,
        workload: WorkloadUse::Never,
        spies: SpyUse::Never,
        run: one_link_failure,
    },
    Scenario {
        name: "leader-crash",
        description: "crash the leader: exactly one new leader, one election round, within the failover bound",
        fixed_nodes: None,
        not_promised: &[],
        forger: ForgerUse::Never,
        workload: WorkloadUse::Never,
        spies: SpyUse::Never,
        run: leader_crash,
    },
    Scenario {
        name: "leader-pause",
        description: "freeze the leader past the election timeout, resume: it steps down before acting; no overlap",
        fixed_nodes: None,
        not_promised: &[],
        forger: ForgerUse::Never,
        workload: WorkloadUse::Never,
        spies: SpyUse::Never,
        run: leader_pause,
    },
    Scenario {
        name: "cold-start",
        description: "all nodes start together: the first term elects a stable leader within the bound; no split vote",
        fixed_nodes: None,
        not_promised: &[],
        forger: ForgerUse::Never,
        workload: WorkloadUse::Never,
        spies: SpyUse::Never,
        run: cold_start,
    },
    Scenario {
        name: "rolling-restart",
        description: "restart each node in turn, waiting for a leader between: only leader restarts change the leader",
        fixed_nodes: None,
        not_promised: &[],
        forger: ForgerUse::Never,
        workload: WorkloadUse::Never,
        spies: SpyUse::Never,
        run: rolling_restart,
    },
    Scenario {
        name: "minority-partition",
        description: "cut the leader and one follower off: the majority elects within the bound; after healing it stays",
        fixed_nodes: None,
        not_promised: &[],
        forger: ForgerUse::Never,
        workload: WorkloadUse::Never,
        spies: SpyUse::Never,
        run: minority_partition,
    },
    Scenario {
        name: "flaky-network",
        description: "20% loss, 5% duplication, 10% reordering on every link: no violation, at most one leader change",
        fixed_nodes: None,
        not_promised: &[],
        forger: ForgerUse::Never,
        workload: WorkloadUse::Never,
        spies: SpyUse::Never,
        run: flaky_network,
    },
    Scenario {
        name: "asymmetric-partition",
        description: "a follower, then the leader, can send but not receive: the follower changes nothing; the leader is replaced",
        fixed_nodes: None,
        not_promised: &[],
        forger: ForgerUse::Never,
        workload: WorkloadUse::Never,
        spies: SpyUse::Never,
        run: asymmetric_partition,
    },
    Scenario {
        name: "restart-amnesia",
        description: "the leader loses two followers; a third that backs it crashes and restarts at once: no overlap",
        fixed_nodes: Some(5),
        not_promised: &[],
        forger: ForgerUse::Never,
        workload: WorkloadUse::Never,
        spies: SpyUse::Never,
        run: restart_amnesia,
    },
    Scenario {
        name: "candidate-pause",
        description: "a candidate freezes right after asking for votes and resumes after others elected: it must not lead",
        fixed_nodes: Some(5),
        not_promised: &[(
            ProtocolKind::Ranked,
            "every elector votes at the same moment, so the majority's votes are usually in flight before the scenario sees a candidate, and the candidate wins before it can be paused; that a resumed candidate never takes office on stale votes is still checked (core test paused_candidate_does_not_take_office_on_late_votes)",
        )],
        forger: ForgerUse::Never,
        workload: WorkloadUse::Never,
        spies: SpyUse::Never,
        run: candidate_pause,
    },
    Scenario {
        name: "spy",
        description: "crash the leader four times with spies that report it dead (on time, late, twice or never, about a dead or a restarted incarnation): with an on-time notice a new leader in one round well under the election timeout, else within the failover bound; no extra leader from late or duplicated notices",
        fixed_nodes: None,
        not_promised: &[],
        forger: ForgerUse::Never,
        workload: WorkloadUse::Never,
        spies: SpyUse::Always,
        run: spy,
    },
    Scenario {
        name: "random",
        description: "VOPR: random faults (crash, pause, partitions, loss, drift, storage), then heal and require a stable leader",
        fixed_nodes: None,
        not_promised: &[],
        forger: ForgerUse::Optional,
        workload: WorkloadUse::Optional,
        spies: SpyUse::Optional,
        run: vopr::run,
    },
    Scenario {
        name: "hostile",
        description: "a forger sends frames as other voters (--forger: all or some attacks), faults at the leader; then it stops: checkers green, a stable leader within the bound, no forged term",
        fixed_nodes: None,
        not_promised: &[],
        forger: ForgerUse::Always,
        workload: WorkloadUse::Never,
        spies: SpyUse::Never,
        run: crate::hostile::run,
    },
    Scenario {
        name: "kv",
        description: "random faults plus crashes during log writes under a key-value workload (random --workload kv): linearizable history, no acknowledged write lost, the same entry and state at each index",
        fixed_nodes: None,
        not_promised: &[],
        forger: ForgerUse::Never,
        workload: WorkloadUse::Always,
        spies: SpyUse::Optional,
        run: vopr::run_kv,
    },
    Scenario {
        name: "elect",
        description: "random faults, app crashes, pauses and cut-offs under application elections (random --workload elect): no two holders of a name overlap, tokens increase, no starved candidate after healing",
        fixed_nodes: None,
        not_promised: &[],
        forger: ForgerUse::Never,
        workload: WorkloadUse::Always,
        spies: SpyUse::Optional,
        run: vopr::run_elect,
    },
    Scenario {
        name: "membership",
        description: "random faults under a key-value workload (or --workload elect or partitions) while members are added, promoted, removed and replaced, removed nodes wiped and brought back (--nodes: all nodes, a majority of them the first voters): linearizable history, one change per committed configuration, the same configuration at each committed index, convergence after healing",
        fixed_nodes: None,
        not_promised: &[],
        forger: ForgerUse::Never,
        workload: WorkloadUse::Always,
        spies: SpyUse::Optional,
        run: vopr::run_membership,
    },
];

/// The scenario called `name`.
pub fn find(name: &str) -> Option<&'static Scenario> {
    SCENARIOS.iter().find(|s| s.name == name)
}

/// Runs a scenario on `sim`: waits for its first stable leader and, when
/// one comes, hands it to `then`; reports the run as `name`.
fn from_first_leader(
    name: &'static str,
    mut sim: Sim,
    then: impl FnOnce(&mut Sim, &mut Expect, usize),
) -> Report {
    let mut e = Expect::default();
    if let Some(l) = e.first_leader(&mut sim) {
        then(&mut sim, &mut e, l);
    }
    e.report(name, sim)
}

/// A follower of `leader`: the first other node.
fn follower_of(sim: &Sim, leader: usize) -> usize {
    (0..sim.len()).find(|&i| i != leader).expect("clusters here have at least two nodes")
}

/// After a fault that cut off the nodes in `old`: expects a stable leader
/// outside them within the liveness bound (`missing` words a miss, given the
/// bound in ms), then expects it to keep its office through three more
/// election timeouts of the fault and five after healing.
fn replacement_stays(
    sim: &mut Sim,
    e: &mut Expect,
    p: &Params,
    old: &[usize],
    missing: impl FnOnce(f64) -> String,
) {
    let bound = sim.liveness_bound();
    let deadline = sim.now_ns() + dur_ns(bound);
    let outside = |x: &usize| !old.contains(x);
    let got = sim.run_until_cond(deadline, |s| s.stable_leader().is_some_and(|x| outside(&x)));
    e.that(got.is_some(), || missing(ms(bound)));
    if let Some(new) = sim.stable_leader().filter(outside) {
        let standing = Standing::of(sim, new);
        sim.run_for(p.election_timeout * 3);
        sim.heal_partitions();
        sim.run_for(p.election_timeout * 5);
        standing.expect_unchanged(sim, e);
    }
}

fn non_sticky_leader(p: &Params) -> Report {
    let sim = Sim::new(p.sim_config(4), p.seed);
    from_first_leader("non-sticky-leader", sim, |sim, e, l| {
        let standing = Standing::of(sim, l);
        let b = follower_of(sim, l);
        sim.isolate(b);
        sim.run_for(p.election_timeout * 5);
        sim.heal_partitions();
        sim.run_for(p.election_timeout * 5);
        standing.expect_unchanged(sim, e);
    })
}

fn leader_ping_pong(p: &Params) -> Report {
    cut_leader_link(p, 4, "leader-ping-pong")
}

fn one_link_failure(p: &Params) -> Report {
    cut_leader_link(p, 3, "one-link-failure")
}

/// BlazingMQ's and TRex's scenarios: cut only the link between the leader and one follower;
/// the leader must stay, with no term inflation, during the cut and after it heals.
fn cut_leader_link(p: &Params, nodes: usize, name: &'static str) -> Report {
    let sim = Sim::new(p.sim_config(nodes), p.seed);
    from_first_leader(name, sim, |sim, e, l| {
        let standing = Standing::of(sim, l);
        let b = follower_of(sim, l);
        sim.cut_link(l, b);
        sim.run_for(p.election_timeout * 10);
        // While cut, B cannot name the leader, so check the leader directly.
        e.that(sim.leaders() == vec![l], || format!("leaders while cut: {:?}", sim.leaders()));
        sim.heal_partitions();
        sim.run_for(p.election_timeout * 3);
        standing.expect_unchanged(sim, e);
    })
}

fn leader_crash(p: &Params) -> Report {
    let sim = Sim::new(p.sim_config(p.nodes), p.seed);
    from_first_leader("leader-crash", sim, |sim, e, l| {
        sim.run_for(p.election_timeout * 2);
        let (elections, log) = (sim.elections_started(), sim.leader_log.len());
        let t0 = sim.now_ns();
        sim.crash(l);
        let bound = sim.failover_bound();
        if let Some((nl, t)) = e.stable_leader(sim, bound, "of the crash") {
            e.that(nl != l, || "the crashed leader still leads".into());
            let took = Duration::from_nanos(t - t0);
            e.that(took <= bound, || format!("failover took {:.0} ms", ms(took)));
        }
        e.that(sim.elections_started() == elections + 1, || {
            format!("{} election rounds instead of one", sim.elections_started() - elections)
        });
        e.that(sim.leader_log.len() == log + 1, || {
            format!("new leaders: {:?}", &sim.leader_log[log..])
        });
        let stable = sim.stable_leader();
        sim.run_for(sim.stability_window());
        e.that(sim.stable_leader() == stable, || "the new leader did not stay".into());
    })
}

/// Leader crashes in the `spy` scenario.
pub const SPY_ROUNDS: u32 = 4;

/// Crashes the leader [`SPY_ROUNDS`] times with spies watching (faulty ones
/// unless [`Params::spies`] says otherwise, see [`crate::spy`]). Each crash
/// is reported on time, late, twice or never: on time, the survivors must
/// elect a new leader in one round within the bound of a failover on a
/// death notice (well under the election timeout); otherwise within the
/// usual failover bound. The old leader restarts at a random time, before
/// or after a late notice about its dead incarnation (which its peers'
/// drivers then drop). Late and duplicated notices must elect nobody more:
/// exactly one new leader per crash, and the last one stays.
///
/// Each crash comes two election timeouts after the cluster started or the
/// old leader restarted: a node that (re)started holds an anonymous lease
/// for one election timeout (it may have backed a leader before), which no
/// notice releases, so a crash within it fails over only when it ends.
fn spy(p: &Params) -> Report {
    let mut sim = Sim::new(p.sim_config(p.nodes), p.seed);
    if let Some(spec) = p.spies.or(Some(crate::spy::SpySpec::FAULTY)) {
        sim.set_spies(spec);
    }
    from_first_leader("spy", sim, |sim, e, _| {
        for round in 1..=SPY_ROUNDS {
            // Any phase of the heartbeats, late notices of the last round
            // possibly still on their way.
            let gap = sim.rng().gen_range(0..=dur_ns(p.heartbeat) * 3);
            sim.run_for(p.election_timeout * 2 + Duration::from_nanos(gap));
            let Some(l) = sim.stable_leader() else {
                e.fail(format!("round {round}: no stable leader to crash"));
                return;
            };
            let log = sim.leader_log.len();
            let context = format!("crashing the leader n{} (round {round})", l + 1);
            if e.failover_after_crash(sim, l, &context).is_none() {
                return;
            }
            // The old leader comes back, sooner or later than a late notice.
            let back = sim.rng().gen_range(0..=dur_ns(p.election_timeout) * 3);
            sim.run_for(Duration::from_nanos(back));
            sim.restart(l);
            e.that(sim.leader_log.len() == log + 1, || {
                format!("round {round}: new leaders {:?}, not one", &sim.leader_log[log..])
            });
        }
        let bound = sim.liveness_bound();
        let Some((stable, _)) = e.stable_leader(sim, bound, "after the last restart") else {
            return;
        };
        let log = sim.leader_log.len();
        sim.run_for(sim.stability_window());
        e.that(sim.stable_leader() == Some(stable) && sim.leader_log.len() == log, || {
            format!("the last leader did not stay: {:?}", &sim.leader_log[log..])
        });
    })
}

fn leader_pause(p: &Params) -> Report {
    let mut sim = Sim::new(p.sim_config(p.nodes), p.seed);
    sim.log_heartbeats();
    from_first_leader("leader-pause", sim, |sim, e, l| {
        let old_term = sim.term_of(l);
        let log = sim.leader_log.len();
        sim.pause(l);
        sim.run_for(p.election_timeout * 3);
        let replaced = sim.leader_log[log..].iter().any(|r| r.node.0 != l as u64 + 1);
        e.that(replaced, || "nobody replaced the paused leader".into());
        let resumed_at = sim.now_ns();
        sim.resume(l);
        e.that(!sim.host(l).is_leader_at(sim.now_ns()), || "the resumed leader still leads".into());
        sim.run_for(p.election_timeout * 3);
        let stale = sim
            .heartbeat_log
            .as_ref()
            .map(|h| {
                h.iter()
                    .filter(|r| {
                        r.time_ns >= resumed_at && r.from.0 == l as u64 + 1 && r.term == old_term
                    })
                    .count()
            })
            .unwrap_or(0);
        e.that(stale == 0, || {
            format!("the resumed leader sent {stale} heartbeats of its old term")
        });
        let now_leader = sim.stable_leader();
        e.that(now_leader.is_some_and(|n| n != l), || {
            format!("final stable leader {:?}", now_leader.map(|n| n + 1))
        });
    })
}

fn cold_start(p: &Params) -> Report {
    let sim = Sim::new(p.sim_config(p.nodes), p.seed);
    from_first_leader("cold-start", sim, |sim, e, _| {
        // The first term elects the leader. Two nodes may both stand in it:
        // clock drift (up to 5% of the election timeout either way) can exceed
        // the candidacy stagger, so ranks do not always hold; that costs a
        // second candidacy in the same term but no extra term. Raft and
        // ranked number the first round's term 1; a Paxos ballot is
        // `counter * BALLOT_NODES + id`, and every first ballot has counter 1.
        let first_round = match p.protocol {
            ProtocolKind::Raft | ProtocolKind::Ranked => 1..2,
            ProtocolKind::Paxos => {
                tenure_core::paxos::BALLOT_NODES..2 * tenure_core::paxos::BALLOT_NODES
            }
        };
        e.that(first_round.contains(&sim.max_term().0), || {
            format!("the cold start reached {:?}, beyond the first round", sim.max_term())
        });
        e.that(sim.elections_started() <= 2, || format!("{} candidacies", sim.elections_started()));
        e.that(sim.stats.split_votes() == 0, || "a split vote".into());
        let stable = sim.stable_leader();
        sim.run_for(sim.stability_window());
        e.that(sim.stable_leader() == stable && sim.leader_log.len() == 1, || {
            format!("the first leader did not stay: {:?}", sim.leader_log)
        });
    })
}

fn rolling_restart(p: &Params) -> Report {
    let sim = Sim::new(p.sim_config(p.nodes), p.seed);
    from_first_leader("rolling-restart", sim, |sim, e, _| {
        for i in 0..sim.len() {
            let was_leader = sim.stable_leader() == Some(i);
            let log = sim.leader_log.len();
            sim.crash(i);
            sim.run_for(p.heartbeat * 2);
            sim.restart(i);
            let bound = sim.liveness_bound();
            e.stable_leader(sim, bound, &format!("after restarting n{}", i + 1));
            sim.run_for(p.election_timeout * 2);
            let new = sim.leader_log.len() - log;
            let allowed = usize::from(was_leader);
            e.that(new == allowed, || {
                format!(
                    "restarting n{} (leader: {was_leader}) elected {new} leaders: {:?}",
                    i + 1,
                    &sim.leader_log[log..]
                )
            });
        }
    })
}

fn minority_partition(p: &Params) -> Report {
    let sim = Sim::new(p.sim_config(p.nodes.max(3)), p.seed);
    from_first_leader("minority-partition", sim, |sim, e, l| {
        let n = sim.len();
        let minority: Vec<usize> =
            std::iter::once(l).chain((0..n).filter(|&i| i != l).take((n - 1) / 2 - 1)).collect();
        sim.split(&minority);
        replacement_stays(sim, e, p, &minority, |bound_ms| {
            format!("the majority elected no stable leader within {bound_ms:.0} ms")
        });
    })
}

fn flaky_network(p: &Params) -> Report {
    let sim = Sim::new(p.sim_config(p.nodes), p.seed);
    from_first_leader("flaky-network", sim, |sim, e, _| {
        let mut link = sim.cfg.link;
        link.loss = 0.2;
        link.duplicate = 0.05;
        link.reorder = 0.1;
        link.reorder_max_ns = dur_ns(p.heartbeat);
        sim.set_links(link);
        sim.run_for(Duration::from_secs(p.sim_seconds.unwrap_or(60)));
        sim.heal_all();
        let bound = sim.liveness_bound();
        e.stable_leader(sim, bound, "of healing");
        e.that(sim.stats.leader_changes <= 1, || {
            format!("{} leader changes under loss", sim.stats.leader_changes)
        });
    })
}

fn asymmetric_partition(p: &Params) -> Report {
    let sim = Sim::new(p.sim_config(p.nodes.max(3)), p.seed);
    from_first_leader("asymmetric-partition", sim, |sim, e, l| {
        // A deaf follower: its pre-votes are refused, nothing changes.
        let standing = Standing::of(sim, l);
        let f = follower_of(sim, l);
        sim.deafen(f);
        sim.run_for(p.election_timeout * 5);
        sim.heal_partitions();
        sim.run_for(p.election_timeout * 3);
        standing.expect_unchanged(sim, e);
        // A deaf leader: it loses its lease and the others elect a new leader.
        sim.deafen(l);
        replacement_stays(sim, e, p, &[l], |bound_ms| {
            format!("no new stable leader within {bound_ms:.0} ms of deafening the leader")
        });
    })
}

/// Crash-restart rounds in `restart-amnesia`.
const AMNESIA_ROUNDS: u32 = 10;

/// A restarted node has lost the lease it held on the leader (volatile state).
/// The leader `L` is cut from `C` and `D`, which keep polling; `A` and `B` back
/// `L` and keep its lease alive. `A` crashes and restarts at once, several
/// times: until `L`'s next heartbeat reaches it, it holds no lease, and if it
/// then helps `C` or `D` win, their leadership overlaps `L`'s lease.
fn restart_amnesia(p: &Params) -> Report {
    let sim = Sim::new(p.sim_config(5), p.seed);
    from_first_leader("restart-amnesia", sim, |sim, e, l| {
        let others: Vec<usize> = (0..5).filter(|&i| i != l).collect();
        let (a, c, d) = (others[0], others[2], others[3]);
        sim.cut_link(l, c);
        sim.cut_link(l, d);
        sim.run_for(p.election_timeout * 3);
        e.that(sim.leaders() == vec![l], || {
            format!("leaders with two followers cut: {:?}", sim.leaders())
        });
        for _ in 0..AMNESIA_ROUNDS {
            // A random gap, so that restarts fall at every phase of the pollers' retries.
            let gap =
                sim.rng().gen_range(dur_ns(p.election_timeout)..=dur_ns(p.election_timeout * 2));
            sim.run_for(Duration::from_nanos(gap));
            sim.crash(a);
            sim.restart(a);
        }
        sim.heal_partitions();
        let bound = sim.liveness_bound();
        e.stable_leader(sim, bound, "of healing");
    })
}

/// Delay of the vote answers held back in `candidate-pause`.
const SLOW_ANSWER_NS: u64 = 200 * crate::network::NS_PER_MS;

/// A candidate holds one granted vote short of a majority and is frozen; the
/// remaining grants, slowed down on their links, arrive while it is frozen and
/// queue up. After the voters' leases on it run out, the others elect a leader
/// in a higher term. When the candidate resumes, its round has long expired:
/// the first queued grant completes its majority but must not make it leader
/// (its fencing token would be below the new leader's).
fn candidate_pause(p: &Params) -> Report {
    // Five nodes: after the crash, the candidate needs two of three live voters.
    let sim = Sim::new(p.sim_config(5), p.seed);
    from_first_leader("candidate-pause", sim, |sim, e, l| {
        sim.crash(l);
        let n = sim.len();
        let deadline = sim.now_ns() + dur_ns(sim.liveness_bound());
        let is_candidate = |s: &Sim, i: usize| s.role_of(i) == Some(tenure_core::Role::Candidate);
        sim.run_until_cond(deadline, |s| (0..n).any(|i| is_candidate(s, i)));
        let candidate = (0..n).find(|&i| is_candidate(sim, i));
        e.that(candidate.is_some(), || "nobody stood after the leader crashed".into());
        if let Some(c) = candidate {
            // One live voter answers at once; the rest answer slowly.
            let voters: Vec<usize> = (0..n).filter(|&i| i != c && i != l).collect();
            let slow = crate::network::LinkParams {
                latency_min_ns: SLOW_ANSWER_NS,
                latency_max_ns: SLOW_ANSWER_NS,
                ..sim.cfg.link
            };
            for &v in &voters[1..] {
                sim.set_link(v, c, slow);
            }
            sim.run_for(Duration::from_nanos(SLOW_ANSWER_NS / 4));
            e.that(is_candidate(sim, c), || "the candidate's round ended before the pause".into());
            sim.pause(c);
            let link = sim.cfg.link;
            sim.set_links(link);
            let log = sim.leader_log.len();
            sim.run_for(p.election_timeout * 4);
            let replaced = sim.leader_log[log..].iter().any(|r| r.node.0 != c as u64 + 1);
            e.that(replaced, || "nobody else was elected while the candidate was frozen".into());
            e.that(!sim.host(c).inbox.is_empty(), || {
                "no answers queued up for the frozen candidate".into()
            });
            let resumed_at = sim.now_ns();
            sim.resume(c);
            sim.run_for(p.election_timeout * 2);
            let late: Vec<_> = sim
                .leader_log
                .iter()
                .filter(|r| r.time_ns >= resumed_at && r.node.0 == c as u64 + 1)
                .collect();
            e.that(late.is_empty(), || {
                format!("the resumed candidate took office from its expired round: {late:?}")
            });
        }
    })
}
