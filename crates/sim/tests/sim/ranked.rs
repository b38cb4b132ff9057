//! The ranked protocol (`protocol = "ranked"`, the ELECT/VOTE paper) in the simulator:
//! pinned seeds that once failed, the named scenarios it promises, and the
//! measurement of the ELECT/VOTE paper's traffic promise (at most two election messages
//! per server per round trip).
//!
//! Replay a run with
//! `tenure sim --protocol ranked --seeds 1 --start-seed SEED --scenario NAME --trace`.

use crate::util;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use std::collections::BTreeMap;
use std::time::Duration;
use tenure_core::contract::{self, Driver, WriteFailed};
use tenure_core::{
    Event, HardState, Instant, Message, NodeId, Output, Protocol, ProtocolKind, RankedMessage, Role,
};
use tenure_sim::clock::NodeClock;
use tenure_sim::host::Host;
use tenure_sim::network::{LinkParams, Network, NS_PER_MS};
use tenure_sim::runner::SimConfig;
use tenure_sim::scenario::{Params, Report};

fn run(name: &str, seed: u64, nodes: usize) -> Report {
    let mut p = Params::new(seed);
    p.nodes = nodes;
    p.protocol = ProtocolKind::Ranked;
    util::run(name, &p)
}

fn assert_passes(name: &str, seeds: impl IntoIterator<Item = u64>, nodes: usize) {
    for seed in seeds {
        let r = run(name, seed, nodes);
        assert!(
            r.passed(),
            "{name}, {nodes} nodes, seed {seed}: failures {:#?}, violations {:#?}",
            r.failures,
            r.violations
        );
    }
}

/// `random` seeds (fault generator of commit 10905ac) that found liveness
/// failures while the protocol was written, each checked to fail without its fix:
/// * 740: electors whose leases on the old leader ended at different times
///   (one had been paused and handled the leader's last LEADs late) voted at
///   different times, each on the slate it had then, and split round after
///   round. Fixed by ELECT announcing when its sender votes: every elector
///   votes no earlier than every claimant it knows of.
/// * 1071, 1851, 579, 712: an elector gave up its poll just before the votes
///   it waited for were due, so the others lacked its vote. Fixed by keeping
///   the poll open until the announced vote times once a majority takes part.
/// * 726, 1640, 1871: convergence after healing, within the ranked bound.
#[test]
fn pinned_random_seeds_converge() {
    assert_passes("random", [740, 1071, 1851, 579, 712, 726, 1640, 1871], 5);
}

/// `random` seeds 1445 and 5140 at 3 nodes (fault generator of commit
/// 2e76d25), each checked to fail without the fix: no leader after healing. The three nodes polled about 300 ms apart, each when
/// the lease of its own last vote ended; a node bound by its vote ignored the
/// others' ELECTs, so every vote was cast in a round, and a term, of its own
/// (n2 for n1 in t10, n3 for itself in t10 after n1's t10 vote for it had
/// expired, n1 for n3 in t11, ...) and nobody ever held two votes of one
/// term. Fixed by releasing a vote lease when the candidate voted for claims
/// afresh a leader lease after the claim voted for: the voter joins that
/// round like any unbound elector, as the ELECT/VOTE paper's ELECTs synchronise servers.
/// Seed 5140 is the same pattern (n3 for n2, n1 for n3, n2 for itself, each
/// in a round of its own).
#[test]
fn pinned_three_node_random_seeds_converge() {
    assert_passes("random", [1445, 5140], 3);
}

/// `random` seed 3516 at 5 nodes with the key-value workload (fault
/// generator of commit fd71416), checked to fail without the fix: no stable
/// leader within the bound after healing. The first round after the heal
/// split (n5 missed n4's claim by 4 ms of its freshness window and did not
/// vote); n5 kept polling, and when n1 and n3 (bound until then by a lease
/// and a restart) polled 540 ms later, n5's claim was older than the half
/// election timeout they count claims from: each of the three saw only two
/// fresh claims, and n5's vote went to a round n1 and n3 never completed.
/// Fixed by a long poll claiming afresh when a new claim arrives, so the
/// slates of all current pollers hold one another's claims.
#[test]
fn pinned_random_seed_with_the_kv_workload_converges() {
    let mut p = Params::new(3516);
    p.nodes = 5;
    p.protocol = ProtocolKind::Ranked;
    p.workload = Some(tenure_sim::workload::WorkloadSpec::kv());
    let r = util::run("random", &p);
    assert!(r.passed(), "seed 3516: failures {:#?}, violations {:#?}", r.failures, r.violations);
}

#[test]
fn promised_named_scenarios_pass() {
    for name in [
        "non-sticky-leader",
        "leader-ping-pong",
        "one-link-failure",
        "leader-crash",
        "leader-pause",
        "cold-start",
        "rolling-restart",
        "minority-partition",
        "asymmetric-partition",
        "restart-amnesia",
    ] {
        assert_passes(name, 0..6, 5);
        assert_passes(name, 0..6, 3);
    }
}

#[test]
fn candidate_pause_never_breaks_safety() {
    // The scenario's script assumes the Raft timing (votes answer a request a
    // round trip after the candidacy starts); ranked voters vote at the same
    // instant, so the candidate is often elected before the pause. What must
    // hold in every run is safety: a resumed candidate never takes office
    // from votes its lease could not cover.
    for seed in 0..20 {
        let r = run("candidate-pause", seed, 5);
        assert_eq!(r.violation_count, 0, "seed {seed}: {:#?}", r.violations);
        // The scenario is marked as not promised by ranked: its deviations
        // are observations, and they are only this one.
        assert!(r.not_promised.is_some() && r.passed(), "seed {seed}: {:#?}", r.failures);
        assert!(
            r.observations.iter().all(|f| f.contains("round ended before the pause")),
            "seed {seed}: {:#?}",
            r.observations
        );
    }
}

#[test]
fn leader_crash_fails_over_in_one_round() {
    for seed in 0..10 {
        let r = run("leader-crash", seed, 5);
        assert!(r.passed(), "seed {seed}: {:#?}", r.failures);
        assert_eq!(r.stats.elections, 2, "seed {seed}: cold start plus one failover");
        assert_eq!(r.stats.split_votes(), 0, "seed {seed}");
    }
}

// ---- The ELECT/VOTE paper's traffic promise, counted on the simulator's parts ----

/// A minimal driver over the simulator's hosts, clocks and network that logs
/// every message sent (the runner keeps only counts).
struct Traffic {
    now: u64,
    hosts: Vec<Host>,
    net: Network,
    rng: Pcg64Mcg,
    /// Pending deliveries: (time, seq, from, to, message).
    pending: Vec<(u64, u64, usize, usize, Message)>,
    /// Per node: the global time its timer fires.
    timers: Vec<Option<u64>>,
    seq: u64,
    /// Every election message sent: (global ns, from, to, is ELECT).
    log: Vec<(u64, usize, usize, bool)>,
    leader_terms: usize,
}

/// Simulated fsync before a message of a persisting output leaves.
const FSYNC_NS: u64 = NS_PER_MS;

impl Traffic {
    fn new(nodes: usize, seed: u64) -> Self {
        let mut rng = Pcg64Mcg::seed_from_u64(seed);
        let sim = SimConfig::new(nodes);
        let drift = i64::from(sim.core_config(NodeId(1)).clock_drift_ppm);
        let hosts = (0..nodes)
            .map(|i| {
                let clock = NodeClock::new(
                    rng.gen_range(0..1_000_000_000_000),
                    rng.gen_range(-drift..=drift),
                );
                let cfg = sim.core_config(NodeId(i as u64 + 1));
                Host::new(ProtocolKind::Ranked, cfg, clock, seed, 0)
            })
            .collect();
        let mut t = Traffic {
            now: 0,
            hosts,
            net: Network::new(nodes, LinkParams::HEALTHY),
            rng,
            pending: Vec::new(),
            timers: vec![None; nodes],
            seq: 0,
            log: Vec::new(),
            leader_terms: 0,
        };
        for i in 0..nodes {
            t.drain(i);
        }
        t
    }

    /// Handles node `i`'s output by the calling contract, then rearms its timer.
    fn drain(&mut self, i: usize) {
        let now = self.now;
        if !self.hosts[i].is_up() {
            return;
        }
        let local = self.hosts[i].local_now(now);
        contract::drain(&mut Io { traffic: self, i, departs: now }, local);
        let deadline = self.hosts[i].elector().map(|e| e.poll_timeout());
        self.timers[i] = deadline
            .filter(|&d| d != Instant::MAX)
            .map(|d| self.hosts[i].clock.global_at(d).max(now));
    }

    fn run_until(&mut self, end: u64) {
        loop {
            let msg = self.pending.iter().enumerate().min_by_key(|(_, p)| (p.0, p.1));
            let timer = self.timers.iter().enumerate().filter_map(|(i, t)| t.map(|t| (t, i))).min();
            let msg_at = msg.map_or(u64::MAX, |(_, p)| p.0);
            let timer_at = timer.map_or(u64::MAX, |t| t.0);
            if msg_at.min(timer_at) > end {
                self.now = end;
                return;
            }
            if msg_at <= timer_at {
                let k = msg.expect("message").0;
                let (at, _, from, to, m) = self.pending.swap_remove(k);
                self.now = at;
                if !self.hosts[to].is_up() {
                    continue;
                }
                let local = self.hosts[to].local_now(at);
                let from = self.hosts[from].id;
                self.hosts[to].elector_mut().expect("up").handle_message(local, from, m);
                self.drain(to);
            } else {
                let (at, i) = timer.expect("timer");
                self.now = at;
                let local = self.hosts[i].local_now(at);
                self.hosts[i].elector_mut().expect("up").handle_timeout(local);
                self.drain(i);
            }
        }
    }

    fn leader(&self) -> Option<usize> {
        let leaders: Vec<usize> =
            (0..self.hosts.len()).filter(|&i| self.hosts[i].is_leader_at(self.now)).collect();
        (leaders.len() == 1).then(|| leaders[0])
    }

    fn crash(&mut self, i: usize) {
        self.hosts[i].crash(self.now);
        self.timers[i] = None;
        self.pending.retain(|p| p.3 != i);
    }

    fn restart(&mut self, i: usize) {
        self.hosts[i].restart(self.now);
        self.drain(i);
    }
}

/// [`Traffic`]'s side of the calling contract for node `i`: storage never
/// fails; the messages of an output that persisted leave after an fsync.
struct Io<'a> {
    traffic: &'a mut Traffic,
    i: usize,
    departs: u64,
}

impl Driver for Io<'_> {
    type Node = dyn Protocol;

    fn node(&mut self) -> &mut Self::Node {
        self.traffic.hosts[self.i].elector_mut().expect("up")
    }

    fn output(&mut self, out: &Output) {
        let fsync = if out.persist.is_some() { FSYNC_NS } else { 0 };
        self.departs = self.traffic.now + fsync;
    }

    fn persist(&mut self, hs: HardState) -> Result<(), WriteFailed> {
        self.traffic.hosts[self.i].durable = hs;
        Ok(())
    }

    fn send(&mut self, to: NodeId, msg: Message) {
        let (t, i) = (&mut *self.traffic, self.i);
        let to = to.0 as usize - 1;
        if let Message::Ranked(m) = &msg {
            if m.is_election_message() {
                t.log.push((t.now, i, to, matches!(m, RankedMessage::Elect { .. })));
            }
        }
        let delays = t.net.transmit(&mut t.rng, i, to);
        for &d in delays.as_slice() {
            t.seq += 1;
            t.pending.push((self.departs + d, t.seq, i, to, msg.clone()));
        }
    }

    fn event(&mut self, event: Event) {
        if matches!(event, Event::RoleChanged { role: Role::Leader, .. }) {
            self.traffic.leader_terms += 1;
        }
    }
}

/// The most election messages one server sent within any window of one
/// `round_trip`: counting each ELECT broadcast once (`per_server`), and
/// counting the messages to each single destination (`per_destination`).
fn max_per_window(log: &[(u64, usize, usize, bool)], rtt_ns: u64) -> (usize, usize) {
    let mut sends: BTreeMap<usize, Vec<u64>> = BTreeMap::new();
    let mut per_dest: BTreeMap<(usize, usize), Vec<u64>> = BTreeMap::new();
    let mut last_elect: BTreeMap<usize, u64> = BTreeMap::new();
    for &(at, from, to, elect) in log {
        per_dest.entry((from, to)).or_default().push(at);
        if !elect || last_elect.insert(from, at) != Some(at) {
            sends.entry(from).or_default().push(at);
        }
    }
    let window_max = |times: &Vec<u64>| {
        (0..times.len())
            .map(|i| times[i..].iter().take_while(|&&t| t < times[i] + rtt_ns).count())
            .max()
            .unwrap_or(0)
    };
    (
        sends.values().map(window_max).max().unwrap_or(0),
        per_dest.values().map(window_max).max().unwrap_or(0),
    )
}

#[test]
fn at_most_two_election_messages_per_server_per_round_trip() {
    let rtt_ns = SimConfig::new(3).core_config(NodeId(1)).round_trip.as_nanos() as u64;
    let (mut worst_server, mut worst_dest, mut elections) = (0, 0, 0);
    for seed in 0..100u64 {
        let nodes = [3, 5][seed as usize % 2];
        let mut t = Traffic::new(nodes, seed);
        let second = 1_000 * NS_PER_MS;
        t.run_until(3 * second);
        // Three leader crashes, each restarted two seconds later.
        for round in 0..3 {
            let Some(l) = t.leader() else { panic!("seed {seed}: no leader before crash {round}") };
            let at = t.now + t.rng.gen_range(0..100 * NS_PER_MS);
            t.run_until(at);
            t.crash(l);
            t.run_until(t.now + 2 * second);
            assert!(t.leader().is_some_and(|x| x != l), "seed {seed}: no failover");
            t.restart(l);
            t.run_until(t.now + second);
        }
        elections += t.leader_terms;
        let (s, d) = max_per_window(&t.log, rtt_ns);
        worst_server = worst_server.max(s);
        worst_dest = worst_dest.max(d);
    }
    println!(
        "ranked, simulator parts: {elections} elections over 100 seeds; at most {worst_server} \
         election sends (a broadcast counted once) per server and {worst_dest} messages per \
         destination within one round trip ({} ms)",
        Duration::from_nanos(rtt_ns).as_millis()
    );
    assert!(elections >= 400, "the runs elected {elections} leaders");
    assert!(worst_server >= 1, "the count saw the elections");
    assert!(worst_server <= 2, "a server sent {worst_server} election messages in one RTT");
    assert!(worst_dest <= 2, "a server sent {worst_dest} election messages to one node in one RTT");
}
