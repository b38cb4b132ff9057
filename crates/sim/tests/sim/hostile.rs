//! The forger (robust to a malicious or buggy peer even when
//! authenticated): for every protocol and every attack, runs of the
//! `hostile` scenario — a healthy cluster receiving frames forged as other
//! voters', with faults at the leader — and of `random` with the forger on.
//! Every run must pass: every checker green, and what the attack promises
//! (`tenure_sim::forger::Promise`, documented in `tenure_sim::hostile`).
//!
//! The light sweeps here run in about 25 s of CPU in a debug build; the
//! heavy sweep (`cargo test -p tenure-sim --release --test sim --
//! --ignored every_attack_alone_keeps_its_promise_heavy`) runs the default
//! attack length on more seeds. The attacks seen against the real cluster
//! are also scripted frame by frame, each on its own.
//!
//! Under rising terms, ranked once elected the forged heartbeat's claimed
//! sender while a paused leader's lease still ran; the prior lease (a
//! heartbeat of another leader adds its lease beside a running one) closed
//! it, and
//! `a_forged_higher_term_heartbeat_does_not_elect_its_sender_under_a_live_lease`
//! pins it for every protocol.
//!
//! Before the core's hostile-peer rules (term ceiling, bounded echoes,
//! `Resign` and transfers honoured only from the leader and its named
//! successor), every attack but `rising-term` failed here: max-term frames
//! overflowed terms (a panic in debug builds, a halt in release ones) and
//! left the cluster leaderless for good; huge echoes let an isolated leader
//! lead on (`lease-overlap`); forged `Resign`s elected a second leader
//! while the first still led (`lease-overlap`); forged transfers deposed a
//! stable leader; forged Paxos poll answers overflowed slot numbers.

use crate::util;
use std::time::Duration;
use tenure_core::paxos::BALLOT_NODES;
use tenure_core::{Message, NodeId, PaxosMessage, ProtocolKind, RankedMessage, Term};
use tenure_sim::expect::{Expect, Standing};
use tenure_sim::forger::{Attack, ForgerSpec, DEFAULT_FORGED_FRAMES_PER_SECOND, FORGED_TERM_FLOOR};
use tenure_sim::runner::{Sim, SimConfig};
use tenure_sim::scenario::Params;

/// Seeds per protocol and attack in the light sweep.
const LIGHT_SEEDS: u64 = 200;
/// Length of the attack in the light sweep, in simulated seconds.
const LIGHT_ATTACK_SECONDS: u64 = 4;
/// Seeds per protocol and attack in the heavy sweep.
const HEAVY_SEEDS: u64 = 300;

fn params(protocol: ProtocolKind, spec: ForgerSpec, seed: u64, nodes: usize) -> Params {
    Params {
        protocol,
        nodes,
        forger: Some(spec),
        sim_seconds: Some(LIGHT_ATTACK_SECONDS),
        ..Params::new(seed)
    }
}

/// Runs `seeds` seeds of `name` with `spec` for `protocol`; panics with the
/// first failures and the command that replays each. Returns the forged
/// frames sent per attack, summed.
fn sweep(
    name: &str,
    protocol: ProtocolKind,
    spec: &ForgerSpec,
    seeds: u64,
    p0: &Params,
) -> Vec<u64> {
    let mut failed = Vec::new();
    let mut forged = vec![0; Attack::ALL.len()];
    for seed in 0..seeds {
        let p = Params { seed, protocol, forger: Some(spec.clone()), ..p0.clone() };
        let r = util::run(name, &p);
        for (i, a) in Attack::ALL.iter().enumerate() {
            forged[i] += r.stats.forged.of(*a);
        }
        if !r.passed() && failed.len() < 5 {
            failed.push(format!(
                "tenure sim --protocol {protocol} --nodes {} --seeds 1 --start-seed {seed} --scenario {name} \
                 --forger {spec}{}\n  failures: {:#?}\n  violations: {:#?}",
                p.nodes,
                p.sim_seconds.map(|s| format!(" --sim-seconds {s}")).unwrap_or_default(),
                r.failures,
                r.violations.iter().take(3).collect::<Vec<_>>()
            ));
        }
    }
    assert!(failed.is_empty(), "{protocol} {name} --forger {spec}:\n{}", failed.join("\n"));
    forged
}

/// Every attack alone against every protocol, in `hostile`.
fn hostile_sweep(seeds: u64, light: bool) {
    for protocol in ProtocolKind::ALL {
        for attack in Attack::ALL {
            let spec = ForgerSpec::only(&[attack]);
            let mut p0 = params(protocol, spec.clone(), 0, 5);
            if !light {
                p0.sim_seconds = None;
            }
            let forged = sweep("hostile", protocol, &spec, seeds, &p0);
            let mine = forged[Attack::ALL.iter().position(|&a| a == attack).expect("listed")];
            assert!(mine > seeds, "{protocol} {attack}: only {mine} frames forged in {seeds} runs");
            assert_eq!(forged.iter().sum::<u64>(), mine, "{protocol}: only {attack} frames");
        }
    }
}

#[test]
fn every_attack_alone_keeps_its_promise() {
    hostile_sweep(LIGHT_SEEDS, true);
}

#[test]
#[ignore = "heavy: run with --release -- --ignored"]
fn every_attack_alone_keeps_its_promise_heavy() {
    hostile_sweep(HEAVY_SEEDS, false);
}

/// Every attack at once, in three-node clusters (a majority is two: a
/// single forged acknowledgement or vote weighs most there).
#[test]
fn all_attacks_at_once_in_three_node_clusters() {
    for protocol in ProtocolKind::ALL {
        let p0 = params(protocol, ForgerSpec::all(), 0, 3);
        let forged = sweep("hostile", protocol, &ForgerSpec::all(), LIGHT_SEEDS, &p0);
        assert!(forged.iter().all(|&f| f > 0), "{protocol}: some attack never ran: {forged:?}");
    }
}

/// The forger on top of the random faults: crashes, pauses, partitions,
/// lossy links, storage failures.
#[test]
fn the_forger_on_top_of_random_faults() {
    for protocol in ProtocolKind::ALL {
        let mut p0 = params(protocol, ForgerSpec::all(), 0, 5);
        p0.sim_seconds = Some(10);
        sweep("random", protocol, &ForgerSpec::all(), LIGHT_SEEDS / 2, &p0);
    }
}

/// The forger keeps to its rate: at most `frames_per_second` per simulated
/// second (plus one burst of one frame per node), and it is off unless asked for.
#[test]
fn the_forger_is_bounded_and_off_by_default() {
    let mut spec = ForgerSpec::all();
    spec.frames_per_second = 30;
    let p = params(ProtocolKind::Raft, spec, 7, 5);
    let r = util::run("hostile", &p);
    let seconds = r.stats.sim_ns as f64 / 1e9;
    let forged = r.stats.forged.total() as f64;
    assert!(forged > 0.0);
    assert!(forged <= 30.0 * seconds + 5.0, "{forged} frames in {seconds:.1} s");

    let default = util::run("random", &Params::new(7));
    assert_eq!(default.stats.forged.total(), 0, "random runs no forger unless asked");
    assert_eq!(DEFAULT_FORGED_FRAMES_PER_SECOND, ForgerSpec::all().frames_per_second);
}

// ---- The attacks seen against the real cluster, scripted ----

/// A cluster of five of `protocol` with a stable leader: (sim, leader, a follower).
fn settled(protocol: ProtocolKind, seed: u64) -> (Sim, usize, usize) {
    let mut cfg = SimConfig::new(5);
    cfg.protocol = protocol;
    let mut sim = Sim::new(cfg, seed);
    let bound = sim.liveness_bound();
    sim.wait_for_stable_leader(bound).expect("a leader");
    sim.run_for(bound);
    let l = sim.stable_leader().expect("still stable");
    (sim, l, (l + 1) % 5)
}

fn id(i: usize) -> NodeId {
    NodeId(i as u64 + 1)
}

/// The leader heartbeat of `protocol` from node index `from` in the largest
/// term (ballot of its rank) there is.
fn max_heartbeat(protocol: ProtocolKind, from: usize) -> Message {
    let (term, counter, sent_at_nanos) = (Term(u64::MAX), 1, u64::MAX / 2);
    match protocol {
        ProtocolKind::Raft => Message::Heartbeat { term, counter, sent_at_nanos },
        ProtocolKind::Ranked => RankedMessage::Lead { term, counter, sent_at_nanos }.into(),
        ProtocolKind::Paxos => {
            let ballot = Term(u64::MAX - (BALLOT_NODES - 1) + from as u64 + 1);
            PaxosMessage::Commit { ballot, slot: 1, heartbeat: counter, sent_at_nanos }.into()
        }
    }
}

fn expect_kept(sim: &Sim, standing: &Standing, what: &str) {
    let mut e = Expect::default();
    standing.expect_unchanged(sim, &mut e);
    e.no_forged_term(sim);
    let failed = e.failures();
    assert!(
        failed.is_empty() && sim.checker.violation_count() == 0,
        "{what}: {failed:?} {:?}",
        sim.checker.violations()
    );
}

/// One forged heartbeat with term 2^64 - 1, from a follower to every other
/// node, left the real cluster leaderless for good. Now nothing changes.
#[test]
fn one_forged_max_term_heartbeat_changes_nothing() {
    for protocol in ProtocolKind::ALL {
        let (mut sim, l, f) = settled(protocol, 11);
        let standing = Standing::of(&sim, l);
        for to in (0..5).filter(|&i| i != f) {
            sim.forge(to, id(f), max_heartbeat(protocol, f));
        }
        sim.run_for(Duration::from_secs(5));
        expect_kept(&sim, &standing, &format!("{protocol}"));
        assert!(sim.checker.highest_term().0 < FORGED_TERM_FLOOR);
    }
}

/// One forged acknowledgement with a huge echo kept a leader answering
/// is-leader with no live majority. Now a leader cut off from everyone
/// loses its lease on time (and the others elect without overlap).
#[test]
fn forged_huge_echoes_do_not_keep_an_isolated_leader_leading() {
    for protocol in ProtocolKind::ALL {
        let (mut sim, l, _) = settled(protocol, 12);
        let term = sim.term_of(l);
        for from in (0..5).filter(|&i| i != l) {
            let echo_sent_at_nanos = u64::MAX;
            let msg = match protocol {
                ProtocolKind::Raft => {
                    Message::HeartbeatResponse { term, ok: true, echo_sent_at_nanos }
                }
                ProtocolKind::Ranked => {
                    RankedMessage::LeadAck { term, ok: true, counter: u64::MAX, echo_sent_at_nanos }
                        .into()
                }
                ProtocolKind::Paxos => PaxosMessage::CommitAck {
                    ballot: term,
                    ok: true,
                    promised: term,
                    echo_sent_at_nanos,
                }
                .into(),
            };
            sim.forge(l, id(from), msg);
        }
        sim.run_for(Duration::from_millis(10));
        sim.isolate(l);
        sim.run_for(sim.stability_window());
        assert!(
            !sim.host(l).is_leader_at(sim.now_ns()),
            "{protocol}: the isolated leader still leads"
        );
        assert!(sim.leaders().iter().any(|&x| x != l), "{protocol}: nobody replaced it");
        assert_eq!(sim.checker.violation_count(), 0, "{protocol}: {:?}", sim.checker.violations());
    }
}

/// Forged `Resign`s (and the transfer votes they trigger) deposed a live
/// leader. Now a `Resign` from a follower naming a successor, and a transfer
/// vote nobody asked for, change nothing.
#[test]
fn a_forged_resign_and_transfer_depose_no_leader() {
    for protocol in ProtocolKind::ALL {
        let (mut sim, l, f) = settled(protocol, 13);
        let standing = Standing::of(&sim, l);
        let s = (f + 1) % 5;
        let s = if s == l { (s + 1) % 5 } else { s };
        let term = sim.term_of(s);
        for to in (0..5).filter(|&i| i != f) {
            let msg = match protocol {
                ProtocolKind::Raft => Message::Resign { term, successor: Some(id(s)) },
                ProtocolKind::Ranked => {
                    RankedMessage::Resign { term, successor: Some(id(s)) }.into()
                }
                ProtocolKind::Paxos => {
                    let ballot = Term((term.0 / BALLOT_NODES + 1) * BALLOT_NODES + f as u64 + 1);
                    PaxosMessage::Resign { ballot, successor: Some(id(s)) }.into()
                }
            };
            sim.forge(to, id(f), msg);
        }
        for to in (0..5).filter(|&i| i != s) {
            let msg = match protocol {
                ProtocolKind::Raft => Message::Vote {
                    term: Term(term.0 + 1),
                    transfer: true,
                    freshness: tenure_core::Freshness::BOOTSTRAP,
                },
                ProtocolKind::Ranked => {
                    let t = sim.term_of(to);
                    RankedMessage::Elect {
                        term: t,
                        claim: None,
                        sent_at_nanos: 1,
                        transfer: Some(t),
                        vote_in_nanos: 0,
                        freshness: tenure_core::Freshness::BOOTSTRAP,
                        leaving: false,
                        stands: true,
                    }
                    .into()
                }
                ProtocolKind::Paxos => {
                    let ballot = Term((term.0 / BALLOT_NODES + 1) * BALLOT_NODES + s as u64 + 1);
                    PaxosMessage::Prepare {
                        ballot,
                        attempt: 1,
                        handover: Some(sim.term_of(to)),
                        freshness: tenure_core::Freshness::BOOTSTRAP,
                    }
                    .into()
                }
            };
            sim.forge(to, id(s), msg);
        }
        sim.run_for(Duration::from_secs(5));
        expect_kept(&sim, &standing, &format!("{protocol}"));
    }
}

/// Rising terms promise safety while they run. A forged heartbeat from
/// voter X in a term above everyone's moves every follower's lease to X; if
/// the real leader L missed it (paused, its frames queued) and X stands for
/// election (here X is cut off from L), X must still not take office while
/// L leads by its lease. Before the prior lease, ranked did not keep it:
/// X's next claim got the votes of every follower bound to it at once, and X
/// led while L's lease ran (`lease-overlap` in every seed; 10 of 2000 ranked
/// `random --forger all` seeds, e.g. 1533). Now a follower keeps L's lease
/// beside X's and refuses X until it has run out.
#[test]
fn a_forged_higher_term_heartbeat_does_not_elect_its_sender_under_a_live_lease() {
    for protocol in ProtocolKind::ALL {
        for seed in 0..20 {
            let (mut sim, l, x) = settled(protocol, seed);
            sim.cut_link(l, x);
            sim.run_for(Duration::from_millis(1200));
            sim.pause(l);
            let max = sim.max_term();
            let term = match protocol {
                ProtocolKind::Paxos => {
                    Term((max.0 / BALLOT_NODES + 1) * BALLOT_NODES + x as u64 + 1)
                }
                ProtocolKind::Raft | ProtocolKind::Ranked => Term(max.0 + 1),
            };
            let sent_at_nanos = sim.host(x).local_at(sim.now_ns()).as_nanos();
            let msg: Message = match protocol {
                ProtocolKind::Raft => Message::Heartbeat { term, counter: 1, sent_at_nanos },
                ProtocolKind::Ranked => {
                    RankedMessage::Lead { term, counter: 1, sent_at_nanos }.into()
                }
                ProtocolKind::Paxos => {
                    PaxosMessage::Commit { ballot: term, slot: 1, heartbeat: 1, sent_at_nanos }
                        .into()
                }
            };
            for to in (0..5).filter(|&i| i != x) {
                sim.forge(to, id(x), msg.clone());
            }
            sim.run_for(Duration::from_secs(3));
            sim.resume(l);
            sim.run_for(Duration::from_secs(3));
            assert_eq!(
                sim.checker.violation_count(),
                0,
                "{protocol} seed {seed}: {:?}",
                sim.checker.violations()
            );
        }
    }
}
