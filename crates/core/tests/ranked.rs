//! Interaction tests of the ranked protocol (seed 001's two-phase ELECT/VOTE
//! election): each test is a short story with its outcome asserted.
//!
//! The harness below is like `util::Cluster` but runs [`RankedElector`]s and
//! can give every node a drifting clock, jittered latency and failing storage.

use rand_core::RngCore;
use rand_pcg::Pcg64Mcg;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use tenure_core::{
    Config, Event, HardState, Instant, Lsn, Message, NodeId, Protocol, RankedElector,
    RankedMessage, Role, Term, TransferError,
};

const HEARTBEAT: Duration = Duration::from_millis(100);
const TIMEOUT: Duration = Duration::from_millis(1000);
/// The default `round_trip` (half a heartbeat).
const RTT: Duration = Duration::from_millis(50);
const LATENCY: Duration = Duration::from_millis(1);
/// Global time of the start of every run.
const START_NS: u64 = 1_000_000_000;

fn n(i: u64) -> NodeId {
    NodeId(i)
}

fn config(id: NodeId, size: u64) -> Config {
    Config::new(id, (1..=size).map(NodeId).collect(), HEARTBEAT, TIMEOUT)
}

struct InFlight {
    at: u64,
    seq: u64,
    from: NodeId,
    to: NodeId,
    msg: Message,
}

/// A small cluster in virtual (global) time. Node `id`'s clock reads
/// `g + (g - START) * ppm / 10^6` at global time `g`.
struct Cluster {
    now: u64,
    ids: Vec<NodeId>,
    nodes: BTreeMap<NodeId, RankedElector<Pcg64Mcg>>,
    durable: BTreeMap<NodeId, HardState>,
    down: BTreeSet<NodeId>,
    cut: BTreeSet<(NodeId, NodeId)>,
    storage_failing: BTreeSet<NodeId>,
    ppm: BTreeMap<NodeId, i64>,
    /// Extra one-way latency drawn per message, up to this many ns.
    jitter_ns: u64,
    rng: Pcg64Mcg,
    incarnation: u64,
    in_flight: Vec<InFlight>,
    seq: u64,
    /// Every event: (global ns, node, event).
    events: Vec<(u64, NodeId, Event)>,
    /// Every message sent: (global ns, from, to, message).
    sent: Vec<(u64, NodeId, NodeId, Message)>,
}

impl Cluster {
    fn new(size: u64) -> Self {
        Cluster::with_faults(size, 0, false)
    }

    /// Drifting clocks (within the configured 5%) and 0–4 ms of latency jitter
    /// when `drift`, all drawn from `seed`.
    fn with_faults(size: u64, seed: u64, drift: bool) -> Self {
        let ids: Vec<NodeId> = (1..=size).map(NodeId).collect();
        let mut rng = Pcg64Mcg::new(0x5EED_0000 ^ u128::from(seed));
        let drift_ppm = i64::from(config(n(1), size).clock_drift_ppm);
        let ppm = ids
            .iter()
            .map(|&i| {
                let p = if drift {
                    (rng.next_u64() % (2 * drift_ppm as u64 + 1)) as i64 - drift_ppm
                } else {
                    0
                };
                (i, p)
            })
            .collect();
        let mut c = Cluster {
            now: START_NS,
            ids: ids.clone(),
            nodes: BTreeMap::new(),
            durable: ids.iter().map(|&i| (i, HardState::default())).collect(),
            down: BTreeSet::new(),
            cut: BTreeSet::new(),
            storage_failing: BTreeSet::new(),
            ppm,
            jitter_ns: if drift { 4_000_000 } else { 0 },
            rng,
            incarnation: 0,
            in_flight: Vec::new(),
            seq: 0,
            events: Vec::new(),
            sent: Vec::new(),
        };
        for id in ids {
            c.boot(id);
        }
        c
    }

    fn local(&self, id: NodeId, g: u64) -> Instant {
        let ppm = self.ppm[&id];
        let elapsed = (g - START_NS) as i128;
        Instant::from_nanos((START_NS as i128 + elapsed + elapsed * ppm as i128 / 1_000_000) as u64)
    }

    fn global_at(&self, id: NodeId, local: Instant) -> u64 {
        if local == Instant::MAX {
            return u64::MAX;
        }
        let ppm = self.ppm[&id] as i128;
        let l = local.as_nanos() as i128 - START_NS as i128;
        let g = (l * 1_000_000 + (1_000_000 + ppm) - 1).div_euclid(1_000_000 + ppm);
        let mut g = (START_NS as i128 + g).max(START_NS as i128) as u64;
        // Rounding: the first global instant at which the local clock reads `local`.
        while self.local(id, g) < local {
            g += 1;
        }
        g
    }

    fn local_now(&self, id: NodeId) -> Instant {
        self.local(id, self.now)
    }

    fn boot(&mut self, id: NodeId) {
        let cfg = config(id, self.ids.len() as u64);
        self.incarnation += 1;
        let rng = Pcg64Mcg::new(0xC0FFEE ^ u128::from(id.0) ^ (u128::from(self.incarnation) << 64));
        let now = self.local_now(id);
        let node = RankedElector::new(cfg, self.durable[&id], rng, now);
        self.nodes.insert(id, node);
        self.drain(id);
    }

    fn node(&self, id: NodeId) -> &RankedElector<Pcg64Mcg> {
        &self.nodes[&id]
    }

    fn node_mut(&mut self, id: NodeId) -> &mut RankedElector<Pcg64Mcg> {
        self.nodes.get_mut(&id).expect("known node")
    }

    /// The calling contract: persist (or fail and tell), then send, then events.
    fn drain(&mut self, id: NodeId) {
        for _ in 0..4 {
            let out = self.nodes.get_mut(&id).expect("node").take_output();
            if out.is_empty() {
                return;
            }
            let failed = out.persist.is_some() && self.storage_failing.contains(&id);
            if let Some(hs) = out.persist.filter(|_| !failed) {
                self.durable.insert(id, hs);
            }
            if !failed {
                for (to, msg) in out.messages {
                    self.sent.push((self.now, id, to, msg.clone()));
                    self.seq += 1;
                    let jitter =
                        if self.jitter_ns > 0 { self.rng.next_u64() % self.jitter_ns } else { 0 };
                    let at = self.now + LATENCY.as_nanos() as u64 + jitter;
                    self.in_flight.push(InFlight { at, seq: self.seq, from: id, to, msg });
                }
            }
            for e in out.events {
                self.events.push((self.now, id, e));
            }
            if failed {
                let now = self.local_now(id);
                self.node_mut(id).handle_persist_failed(now);
            }
        }
    }

    fn crash(&mut self, id: NodeId) {
        self.down.insert(id);
        self.in_flight.retain(|m| m.to != id);
    }

    fn restart(&mut self, id: NodeId) {
        self.down.remove(&id);
        self.boot(id);
    }

    fn isolate(&mut self, id: NodeId) {
        for &o in &self.ids.clone() {
            if o != id {
                self.cut.insert((id, o));
                self.cut.insert((o, id));
            }
        }
    }

    fn deafen(&mut self, id: NodeId) {
        for &o in &self.ids.clone() {
            if o != id {
                self.cut.insert((o, id));
            }
        }
    }

    fn cut_link(&mut self, a: NodeId, b: NodeId) {
        self.cut.insert((a, b));
        self.cut.insert((b, a));
    }

    fn heal(&mut self) {
        self.cut.clear();
    }

    /// Delivers `msg` from `from` to `to` right now, bypassing the network.
    fn inject(&mut self, from: NodeId, to: NodeId, msg: RankedMessage) {
        let now = self.local_now(to);
        self.node_mut(to).handle_message(now, from, Message::Ranked(msg));
        self.drain(to);
    }

    fn inject_raw(&mut self, from: NodeId, to: NodeId, msg: Message) {
        let now = self.local_now(to);
        self.node_mut(to).handle_message(now, from, msg);
        self.drain(to);
    }

    fn run_for(&mut self, d: Duration) {
        let end = self.now + d.as_nanos() as u64;
        for _ in 0..2_000_000 {
            let next_msg = self.in_flight.iter().map(|m| (m.at, m.seq)).min();
            let next_timer = self
                .nodes
                .iter()
                .filter(|(id, _)| !self.down.contains(id))
                .map(|(&id, node)| (self.global_at(id, node.poll_timeout()).max(self.now), id))
                .min();
            let msg_at = next_msg.map_or(u64::MAX, |(at, _)| at);
            let timer_at = next_timer.map_or(u64::MAX, |(at, _)| at);
            let at = msg_at.min(timer_at);
            if at > end {
                self.now = end;
                return;
            }
            self.now = self.now.max(at);
            if msg_at <= timer_at {
                let (_, seq) = next_msg.expect("message");
                let pos = self.in_flight.iter().position(|m| m.seq == seq).expect("in flight");
                let m = self.in_flight.swap_remove(pos);
                if self.down.contains(&m.to) || self.cut.contains(&(m.from, m.to)) {
                    continue;
                }
                let now = self.local_now(m.to);
                self.node_mut(m.to).handle_message(now, m.from, m.msg);
                self.drain(m.to);
            } else {
                let (_, id) = next_timer.expect("timer");
                let now = self.local_now(id);
                if std::env::var("RANKED_DEBUG").is_ok() {
                    let nd = self.node(id);
                    eprintln!(
                        "{} timer {id:?} local {now:?} poll {:?} role {:?}",
                        self.now,
                        nd.poll_timeout(),
                        nd.status().role
                    );
                }
                self.node_mut(id).handle_timeout(now);
                self.drain(id);
            }
        }
        panic!("run_for did not reach its end: livelock in the harness");
    }

    fn leaders(&self) -> Vec<NodeId> {
        self.nodes
            .iter()
            .filter(|(id, nd)| !self.down.contains(id) && nd.is_leader(self.local_now(**id)))
            .map(|(&id, _)| id)
            .collect()
    }

    fn leader(&self) -> NodeId {
        let l = self.leaders();
        assert_eq!(l.len(), 1, "expected exactly one leader, got {l:?}");
        l[0]
    }

    /// Runs until some node other than `not` leads; returns it and the time it took.
    fn run_until_leader_other_than(
        &mut self,
        not: Option<NodeId>,
        max: Duration,
    ) -> (NodeId, Duration) {
        let start = self.now;
        while self.now - start < max.as_nanos() as u64 {
            self.run_for(Duration::from_millis(1));
            if let Some(&x) = self.leaders().iter().find(|&&x| Some(x) != not) {
                return (x, Duration::from_nanos(self.now - start));
            }
        }
        panic!("no new leader within {max:?}; leaders {:?}", self.leaders());
    }

    fn term(&self, id: NodeId) -> Term {
        self.node(id).status().term
    }

    fn role(&self, id: NodeId) -> Role {
        self.node(id).status().role
    }

    fn elections(&self) -> u64 {
        self.nodes.values().map(|nd| nd.counters().elections_started).sum()
    }

    /// Nodes that became leader, in order, with their terms and global times.
    fn leader_history(&self) -> Vec<(u64, NodeId, Term)> {
        self.events
            .iter()
            .filter_map(|(at, id, e)| match e {
                Event::RoleChanged { role: Role::Leader, term, .. } => Some((*at, *id, *term)),
                _ => None,
            })
            .collect()
    }

    /// The ranked messages sent since index `from` of the log.
    fn ranked_sent(&self, from: usize) -> Vec<(u64, NodeId, NodeId, RankedMessage)> {
        self.sent[from..]
            .iter()
            .filter_map(|(at, f, t, m)| match m {
                Message::Ranked(r) => Some((*at, *f, *t, r.clone())),
                _ => None,
            })
            .collect()
    }

    fn votes_sent(&self, from: usize) -> Vec<(NodeId, NodeId, Term)> {
        self.ranked_sent(from)
            .into_iter()
            .filter_map(|(_, f, t, m)| match m {
                RankedMessage::Vote { term, .. } => Some((f, t, term)),
                _ => None,
            })
            .collect()
    }
}

fn elected(size: u64) -> (Cluster, NodeId) {
    let mut c = Cluster::new(size);
    c.run_for(TIMEOUT * 2);
    let l = c.leader();
    (c, l)
}

/// A cluster whose nodes cannot hear each other, past their start-up lease and
/// first polls, so that injected messages are the only thing that matters.
fn quiet(size: u64) -> Cluster {
    let mut c = Cluster::new(size);
    for id in c.ids.clone() {
        c.isolate(id);
    }
    c.run_for(TIMEOUT * 3);
    c
}

fn elect_msg(term: u64, claim: Option<(u64, u64)>, sent_at_nanos: u64) -> RankedMessage {
    RankedMessage::Elect {
        term: Term(term),
        claim: claim.map(|(t, c)| Lsn { term: Term(t), counter: c }),
        sent_at_nanos,
        transfer: None,
        vote_in_nanos: 0,
    }
}

/// Puts `voter` into VOTING with claims from `claimants` and lets its
/// collection window pass; returns the votes it sent.
fn poll_with_claims(
    c: &mut Cluster,
    voter: NodeId,
    claimants: &[(NodeId, Option<(u64, u64)>)],
) -> Vec<(NodeId, NodeId, Term)> {
    let before = c.sent.len();
    for &(from, claim) in claimants {
        c.inject(from, voter, elect_msg(0, claim, 42));
    }
    assert_eq!(c.role(voter), Role::PreCandidate, "an ELECT starts VOTING on an unbound node");
    c.run_for(RTT + Duration::from_millis(5));
    c.votes_sent(before).into_iter().filter(|&(f, _, _)| f == voter).collect()
}

// ---- Elections ----

#[test]
fn cold_start_elects_the_first_voter_in_one_round() {
    for size in [1, 3, 5] {
        let (c, leader) = elected(size);
        assert_eq!(leader, n(1), "ties go to the earliest voter");
        assert_eq!(c.elections(), 1, "{size} nodes: one candidacy, no split vote");
        for id in c.ids.clone() {
            assert_eq!(c.term(id), Term(1));
            assert_eq!(c.node(id).status().leader, Some(n(1)));
        }
    }
}

#[test]
fn cold_start_with_drifting_clocks_and_jitter_elects_once() {
    for seed in 0..50 {
        let mut c = Cluster::with_faults(5, seed, true);
        c.run_for(TIMEOUT * 2);
        assert_eq!(c.leader(), n(1), "seed {seed}");
        assert_eq!(c.elections(), 1, "seed {seed}: split vote");
        assert_eq!(c.leader_history().len(), 1, "seed {seed}");
    }
}

#[test]
fn leader_crash_fails_over_in_one_round_to_the_earliest_survivor() {
    for size in [3, 5, 7, 9] {
        let (mut c, old) = elected(size);
        let rounds_before = c.elections();
        c.run_for(HEARTBEAT / 3);
        c.crash(old);
        let (new, took) = c.run_until_leader_other_than(Some(old), TIMEOUT * 3);
        assert_eq!(c.elections() - rounds_before, 1, "{size} nodes: one round");
        assert_eq!(new, n(2), "every survivor saw the same last LEAD: ties to the earliest");
        // The timeout (after the last LEAD), the drift allowance, RTT, a vote and a LEAD.
        let bound = Duration::from_millis(1105) + RTT + LATENCY * 4;
        assert!(took <= bound, "{size} nodes: failover took {took:?}");
    }
}

#[test]
fn failover_with_drifting_clocks_takes_one_round() {
    let mut worst = Duration::ZERO;
    for seed in 0..40 {
        let mut c = Cluster::with_faults(5, seed, true);
        c.run_for(TIMEOUT * 2);
        let old = c.leader();
        c.run_for(HEARTBEAT * (seed % 7) as u32 / 7);
        let rounds = c.elections();
        c.crash(old);
        let (_, took) = c.run_until_leader_other_than(Some(old), TIMEOUT * 3);
        worst = worst.max(took);
        assert_eq!(c.elections() - rounds, 1, "seed {seed}: split vote");
    }
    // T stretched by drift twice, plus RTT and a few latencies.
    assert!(worst < Duration::from_millis(1320), "worst failover {worst:?}");
}

// ---- Seed 001's ranking and tally ----

#[test]
fn vote_goes_to_the_latest_claim_then_to_the_earliest_voter() {
    let mut c = quiet(5);
    let voter = n(5);
    // n4 saw the latest leader message: it wins over earlier voters.
    let votes = poll_with_claims(
        &mut c,
        voter,
        &[(n(1), Some((1, 5))), (n(2), Some((1, 9))), (n(4), Some((2, 1)))],
    );
    assert_eq!(votes.len(), 1);
    assert_eq!(votes[0].1, n(4));

    let mut c = quiet(5);
    // A tie on (term, msg) goes to the earliest voter in the configuration.
    let votes = poll_with_claims(&mut c, voter, &[(n(3), Some((1, 9))), (n(2), Some((1, 9)))]);
    assert_eq!(votes.iter().map(|v| v.1).collect::<Vec<_>>(), vec![n(2)]);
}

#[test]
fn vote_term_is_above_every_term_the_voter_knows() {
    let mut c = quiet(3);
    let voter = n(3);
    let before = c.sent.len();
    c.inject(n(1), voter, elect_msg(6, None, 42));
    c.run_for(RTT + Duration::from_millis(5));
    let votes = c.votes_sent(before);
    assert_eq!(votes, vec![(voter, n(1), Term(7))]);
    assert_eq!(c.durable[&voter], HardState { term: Term(7), voted_for: Some(n(1)) });
}

#[test]
fn a_lone_elector_does_not_vote_or_raise_its_term() {
    // VOTING without claims from a majority changes nothing durable.
    let mut c = quiet(5);
    let x = n(3);
    assert!(c.node(x).counters().pre_votes_started >= 2, "it polled repeatedly");
    assert_eq!(c.term(x), Term(0));
    assert!(c.votes_sent(0).is_empty());
    // Two claims of five are not a majority either.
    c.inject(n(1), x, elect_msg(0, None, 42));
    c.run_for(TIMEOUT * 2);
    assert!(c.votes_sent(0).is_empty());
    assert_eq!(c.durable[&x], HardState::default());
}

#[test]
fn votes_of_different_terms_do_not_add_up() {
    let mut c = quiet(3);
    let cand = n(1);
    let before = c.sent.len();
    // Time never goes backwards for a node: move the cluster to its timer.
    let at = c.local_now(cand).max(c.node(cand).poll_timeout());
    c.now = c.global_at(cand, at);
    c.node_mut(cand).handle_timeout(at);
    c.drain(cand);
    let echo = c
        .ranked_sent(before)
        .iter()
        .find_map(|(_, f, _, m)| match m {
            RankedMessage::Elect { sent_at_nanos, .. } if *f == cand => Some(*sent_at_nanos),
            _ => None,
        })
        .expect("the candidate broadcast its claim");
    c.inject(n(2), cand, RankedMessage::Vote { term: Term(1), echo_sent_at_nanos: echo });
    c.inject(n(3), cand, RankedMessage::Vote { term: Term(2), echo_sent_at_nanos: echo });
    assert_ne!(c.role(cand), Role::Leader, "one vote in term 1 and one in term 2 are no majority");
    // A second identical vote is.
    c.inject(n(3), cand, RankedMessage::Vote { term: Term(1), echo_sent_at_nanos: echo });
    assert_eq!(c.role(cand), Role::Leader);
    assert_eq!(c.term(cand), Term(1));
    assert_eq!(c.durable[&cand].term, Term(1));
}

#[test]
fn votes_for_an_earlier_incarnation_are_not_counted() {
    let mut c = quiet(3);
    let cand = n(1);
    c.crash(cand);
    c.restart(cand);
    // Echoes of an ELECT this incarnation never sent.
    c.inject(n(2), cand, RankedMessage::Vote { term: Term(1), echo_sent_at_nanos: 42 });
    c.inject(n(3), cand, RankedMessage::Vote { term: Term(1), echo_sent_at_nanos: 42 });
    assert_ne!(c.role(cand), Role::Leader);
    assert!(c.node(cand).counters().messages_ignored >= 2);
}

#[test]
fn leader_that_receives_a_lead_that_is_not_obsolete_follows() {
    let (mut c, leader) = elected(3);
    let other = n(3);
    c.inject(other, leader, RankedMessage::Lead { term: Term(5), counter: 1, sent_at_nanos: 7 });
    assert_eq!(c.role(leader), Role::Follower);
    assert_eq!(c.node(leader).status().leader, Some(other));
    assert_eq!(c.term(leader), Term(5));
    // An obsolete LEAD is answered with the higher term and changes nothing.
    let before = c.sent.len();
    c.inject(n(2), leader, RankedMessage::Lead { term: Term(1), counter: 99, sent_at_nanos: 8 });
    let reply = c.ranked_sent(before).into_iter().map(|(_, _, _, m)| m).collect::<Vec<_>>();
    assert_eq!(
        reply,
        vec![RankedMessage::LeadAck {
            term: Term(5),
            ok: false,
            counter: 99,
            echo_sent_at_nanos: 8
        }]
    );
    assert_eq!(c.node(leader).status().leader, Some(other));
}

#[test]
fn leader_reasserts_itself_over_a_node_with_a_higher_term() {
    // The old leader is alive: its followers vote for it, in a term above the
    // rejoining node's.
    let (mut c, leader) = elected(3);
    let x = n(3);
    c.crash(x);
    c.durable.insert(x, HardState { term: Term(7), voted_for: None });
    c.restart(x);
    c.run_for(TIMEOUT * 3);
    assert_eq!(c.leader(), leader, "same leader");
    let t = c.term(leader);
    assert!(t > Term(7), "leader moved past the higher term, now {t:?}");
    for id in c.ids.clone() {
        assert_eq!(c.term(id), t);
        assert_eq!(c.node(id).status().leader, Some(leader));
    }
}

// ---- Durable state ----

#[test]
fn one_vote_per_term_across_restarts() {
    let mut c = quiet(3);
    let voter = n(3);
    let votes = poll_with_claims(&mut c, voter, &[(n(1), None), (n(2), None)]);
    assert_eq!(votes, vec![(voter, n(1), Term(1))]);
    assert_eq!(c.durable[&voter], HardState { term: Term(1), voted_for: Some(n(1)) });
    // Restart: the vote is remembered, and the anonymous lease keeps it out of
    // elections for a while.
    c.crash(voter);
    c.restart(voter);
    let before = c.sent.len();
    c.inject(n(2), voter, elect_msg(0, Some((0, 9)), 43));
    c.run_for(RTT * 2);
    assert!(c.votes_sent(before).is_empty(), "voted during its start-up lease");
    // Later it votes again, but never in term 1.
    c.run_for(TIMEOUT * 2);
    c.inject(n(2), voter, elect_msg(0, Some((0, 9)), 44));
    c.inject(n(1), voter, elect_msg(0, None, 45));
    c.run_for(TIMEOUT);
    let votes = c.votes_sent(before);
    assert!(!votes.is_empty(), "it votes again after its lease");
    assert!(votes.iter().all(|v| v.2 > Term(1)), "{votes:?}");
}

#[test]
fn vote_is_handed_out_for_persistence_with_the_message() {
    let mut c = quiet(3);
    let voter = n(2);
    c.inject(n(1), voter, elect_msg(0, None, 42));
    c.inject(n(3), voter, elect_msg(0, None, 42));
    c.run_for(RTT - LATENCY);
    let at = c.node(voter).poll_timeout();
    let node = c.node_mut(voter);
    node.handle_timeout(at);
    let out = node.take_output();
    assert_eq!(out.persist, Some(HardState { term: Term(1), voted_for: Some(n(1)) }));
    assert!(out.messages.iter().any(|(to, m)| *to == n(1)
        && matches!(m, Message::Ranked(RankedMessage::Vote { term: Term(1), .. }))));
}

#[test]
fn node_that_cannot_persist_does_not_vote_or_stand() {
    let mut c = Cluster::new(3);
    let voter = n(2);
    c.storage_failing.insert(voter);
    let now = c.local_now(voter);
    c.node_mut(voter).handle_persist_failed(now);
    c.run_for(TIMEOUT * 4);
    assert!(c.votes_sent(0).iter().all(|v| v.0 != voter), "a node without storage voted");
    assert_eq!(c.node(voter).counters().elections_started, 0);
    assert!(c.node(voter).status().storage_failed);
    // The others still elect n1 (n3 and n1 are a majority).
    assert_eq!(c.leader(), n(1));
}

#[test]
fn a_failed_write_of_a_self_vote_cancels_the_candidacy() {
    let mut c = Cluster::new(1);
    let me = n(1);
    c.storage_failing.insert(me);
    c.run_for(TIMEOUT * 3);
    assert!(c.leader_history().is_empty(), "led on a vote that was never written");
    assert_eq!(c.durable[&me], HardState::default());
    c.storage_failing.clear();
    let now = c.local_now(me);
    c.node_mut(me).handle_persist_recovered(now);
    c.run_for(TIMEOUT * 3);
    assert_eq!(c.leader(), me);
}

// ---- Leases ----

#[test]
fn cut_link_between_leader_and_follower_changes_nothing() {
    // Seed 000's ping-pong: the cut-off follower polls, but the others are
    // bound to the live leader, so it never collects a majority of claims.
    let (mut c, a) = elected(4);
    let b = n(2);
    c.cut_link(a, b);
    c.run_for(TIMEOUT * 10);
    assert_eq!(c.leader(), a);
    assert!(c.node(b).counters().pre_votes_started > 2, "b keeps polling");
    for id in c.ids.clone() {
        assert_eq!(c.term(id), Term(1), "no term inflation on {id:?}");
    }
    assert_eq!(c.elections(), 1);
    c.heal();
    c.run_for(TIMEOUT);
    assert_eq!(c.node(b).status().leader, Some(a));
    assert_eq!(c.leader_history().len(), 1);
}

#[test]
fn a_fresh_claim_of_the_candidate_voted_for_releases_the_vote_lease() {
    // Seed 001: "ELECT messages that start a round provoke messages from
    // servers whose timers have not yet expired. This tends to synchronize the
    // servers." A vote binds the voter to its candidate for an election
    // timeout; once the candidate claims afresh a leader lease after the claim
    // voted for, no lease it could take from that vote still runs, so the
    // voter is free, joins the new round and ranks the full slate (seed 1445
    // of the simulator: otherwise nodes that voted at different times vote in
    // rounds, and terms, of their own forever).
    let lease = config(n(1), 3).leader_lease();
    let lease_ns = lease.as_nanos() as u64;
    let mut c = quiet(3);
    let (cand, other, voter) = (n(1), n(2), n(3));
    let first = 5_000_000_000;
    let start = c.sent.len();
    c.inject(cand, voter, elect_msg(0, Some((1, 5)), first));
    c.run_for(RTT + Duration::from_millis(5));
    assert_eq!(c.votes_sent(start), vec![(voter, cand, Term(1))]);
    assert_eq!(c.role(voter), Role::Follower);

    // While the vote may still elect the candidate, the voter stays bound:
    // another claimant's ELECT does not pull it in, nor does a claim of the
    // candidate younger than a lease after the one voted for (a rally, a
    // retry, a duplicate).
    c.run_for(RTT * 2);
    let before = c.sent.len();
    c.inject(other, voter, elect_msg(1, Some((1, 9)), 42));
    assert_eq!(c.role(voter), Role::Follower, "bound to its candidate");
    c.inject(cand, voter, elect_msg(0, Some((1, 5)), first + lease_ns - 1));
    assert_eq!(c.role(voter), Role::Follower, "that vote may still elect the candidate");
    c.run_for(RTT * 2);
    assert!(c.votes_sent(before).is_empty());

    // The candidate's claim a lease later releases it: it joins the round
    // and votes by the ranking, here for the better claim of `other`, in a
    // term above every term on its slate.
    c.inject(cand, voter, elect_msg(0, Some((1, 5)), first + lease_ns));
    assert_eq!(c.role(voter), Role::PreCandidate, "joined the candidate's round");
    c.run_for(RTT + Duration::from_millis(5));
    let votes = c.votes_sent(before);
    assert_eq!(votes, vec![(voter, other, Term(2))]);
    assert_eq!(c.durable[&voter], HardState { term: Term(2), voted_for: Some(other) });
}

#[test]
fn a_late_claim_does_not_release_a_voter_from_a_newer_lead() {
    // A follower acknowledged its leader's LEAD sent at `lead`, then a claim
    // the leader sent earlier arrives (reordered) and the follower, bound to
    // it, votes for it. The leader's lease from that acknowledgement runs
    // until a leader lease after `lead`, so only a claim sent after that frees
    // the follower, not one a lease after the stale claim.
    let lease_ns = config(n(1), 3).leader_lease().as_nanos() as u64;
    let mut c = quiet(3);
    let (leader, voter) = (n(1), n(3));
    let (stale, lead) = (5_000_000_000, 5_500_000_000);
    c.inject(leader, voter, RankedMessage::Lead { term: Term(1), counter: 1, sent_at_nanos: lead });
    assert_eq!(c.node(voter).status().leader, Some(leader));
    let before = c.sent.len();
    c.inject(leader, voter, elect_msg(1, Some((1, 1)), stale));
    assert_eq!(c.votes_sent(before), vec![(voter, leader, Term(2))], "bound: votes at once");

    c.run_for(RTT * 2);
    c.inject(leader, voter, elect_msg(2, Some((1, 1)), stale + lease_ns));
    assert_eq!(c.role(voter), Role::Follower, "the lease from the LEAD may still run");
    c.inject(leader, voter, elect_msg(2, Some((1, 1)), lead + lease_ns));
    assert_eq!(c.role(voter), Role::PreCandidate, "released, it joins the round");
}

#[test]
fn isolated_leader_steps_down_before_another_is_elected() {
    let (mut c, old) = elected(5);
    c.isolate(old);
    let (new, _) = c.run_until_leader_other_than(Some(old), TIMEOUT * 4);
    assert!(!c.node(old).is_leader(c.local_now(old)));
    let new_at = c.leader_history().iter().find(|r| r.1 == new).expect("elected").0;
    let old_down = c
        .events
        .iter()
        .find(|(_, id, e)| {
            *id == old && matches!(e, Event::RoleChanged { role: Role::Follower, .. })
        })
        .map(|e| e.0)
        .expect("the old leader stepped down");
    assert!(old_down < new_at, "old stepped down at {old_down}, new elected at {new_at}");
    assert!(c.term(new) > Term(1));
    assert!(c.node(old).counters().quorum_losses >= 1);
    // Healed, it follows the new leader; the fencing token went up.
    c.heal();
    c.run_for(TIMEOUT);
    assert_eq!(c.node(old).status().leader, Some(new));
    assert!(
        c.node(old).status().fencing_token > Some(tenure_core::FencingToken::for_term(Term(1)))
    );
}

#[test]
fn restarted_follower_keeps_the_lease_it_may_have_granted() {
    // Leader 1 relies on 2's acknowledgements; 3 cannot hear 1. If 2 restarted
    // without a lease, 3's ELECT would draw it into a vote while 1 leads.
    let (mut c, leader) = elected(3);
    assert_eq!(leader, n(1));
    c.cut_link(n(1), n(3));
    c.run_for(HEARTBEAT * 3);
    c.crash(n(2));
    c.restart(n(2));
    let before = c.sent.len();
    c.inject(n(3), n(2), elect_msg(5, Some((1, 99)), 42));
    c.run_for(RTT * 2);
    assert!(c.votes_sent(before).iter().all(|v| v.0 != n(2)), "the restarted node voted");
    assert_eq!(c.role(n(2)), Role::Follower);
    assert!(c.node(n(1)).is_leader(c.local_now(n(1))));
    assert_eq!(c.term(n(2)), Term(1));
}

#[test]
fn follower_bound_to_a_live_leader_ignores_other_claimants() {
    let (mut c, _leader) = elected(3);
    let f = n(3);
    let before = c.sent.len();
    c.inject(n(2), f, elect_msg(3, Some((1, 999)), 42));
    c.run_for(RTT * 2);
    assert_eq!(c.role(f), Role::Follower);
    assert!(c.votes_sent(before).is_empty());
    assert_eq!(c.term(f), Term(1), "the claimant's term is not adopted");
}

#[test]
fn deaf_leader_is_replaced() {
    // It can still send: its followers back it once more (they are bound to
    // it), then rank its stale claim below theirs.
    let (mut c, old) = elected(5);
    c.deafen(old);
    let (new, took) = c.run_until_leader_other_than(Some(old), TIMEOUT * 4);
    assert_ne!(new, old);
    assert!(took < TIMEOUT * 3, "took {took:?}");
    c.heal();
    c.run_for(TIMEOUT * 2);
    assert_eq!(c.leader(), new);
}

#[test]
fn paused_candidate_does_not_take_office_on_late_votes() {
    let mut c = quiet(3);
    let cand = n(1);
    c.inject(n(2), cand, elect_msg(0, None, 42));
    c.inject(n(3), cand, elect_msg(0, None, 42));
    c.run_for(RTT + LATENCY);
    assert_eq!(c.role(cand), Role::Candidate, "it voted for itself");
    let echo = c.ranked_sent(0).iter().rev().find_map(|(_, f, _, m)| match m {
        RankedMessage::Elect { sent_at_nanos, .. } if *f == cand => Some(*sent_at_nanos),
        _ => None,
    });
    // Frozen past its candidacy: a lease from these votes would have ended.
    c.crash(cand);
    c.run_for(TIMEOUT);
    c.down.remove(&cand);
    let echo = echo.expect("claim sent");
    c.inject(n(2), cand, RankedMessage::Vote { term: Term(1), echo_sent_at_nanos: echo });
    assert_ne!(c.role(cand), Role::Leader);
    assert!(c.leader_history().is_empty());
}

// ---- Transfer and shutdown ----

#[test]
fn transfer_hands_leadership_to_the_named_node_without_a_timeout() {
    let (mut c, leader) = elected(5);
    let target = n(4);
    let now = c.local_now(leader);
    c.node_mut(leader).transfer_leadership(now, target).expect("transfer accepted");
    c.drain(leader);
    assert!(!c.node(leader).is_leader(c.local_now(leader)), "the old leader steps down at once");
    let (new, took) = c.run_until_leader_other_than(Some(leader), TIMEOUT);
    assert_eq!(new, target);
    assert!(took < HEARTBEAT, "transfer took {took:?}");
    c.run_for(TIMEOUT * 2);
    assert_eq!(c.leader(), target, "and it sticks");
}

#[test]
fn transfer_is_refused_with_clear_reasons() {
    let (mut c, leader) = elected(3);
    let now = c.local_now(leader);
    assert_eq!(
        c.node_mut(n(2)).transfer_leadership(now, n(3)),
        Err(TransferError::NotLeader { leader: Some(leader) })
    );
    assert_eq!(
        c.node_mut(leader).transfer_leadership(now, n(42)),
        Err(TransferError::UnknownNode(n(42)))
    );
    c.crash(n(3));
    c.run_for(TIMEOUT * 2);
    let now = c.local_now(leader);
    assert_eq!(
        c.node_mut(leader).transfer_leadership(now, n(3)),
        Err(TransferError::TargetUnreachable(n(3)))
    );
    assert_eq!(c.leader(), leader, "refusals change nothing");
}

#[test]
fn transfer_works_even_if_the_resign_message_is_lost() {
    // Followers that missed the Resign learn of it from the successor's ELECT.
    let (mut c, leader) = elected(3);
    let target = n(3);
    c.cut.insert((leader, n(2)));
    let now = c.local_now(leader);
    c.node_mut(leader).transfer_leadership(now, target).expect("accepted");
    c.drain(leader);
    c.run_for(LATENCY * 2);
    c.heal();
    let (new, took) = c.run_until_leader_other_than(Some(leader), TIMEOUT);
    assert_eq!(new, target);
    assert!(took < HEARTBEAT, "transfer took {took:?}");
}

#[test]
fn graceful_shutdown_cedes_leadership_quickly() {
    let (mut c, leader) = elected(3);
    let now = c.local_now(leader);
    c.node_mut(leader).shutdown(now);
    c.drain(leader);
    assert!(!c.node(leader).is_leader(now));
    c.run_for(LATENCY * 2);
    c.crash(leader);
    let (new, took) = c.run_until_leader_other_than(Some(leader), TIMEOUT);
    assert_ne!(new, leader);
    assert!(took < HEARTBEAT, "handover took {took:?}");
}

#[test]
fn cession_falls_back_when_the_successor_is_dead() {
    let (mut c, leader) = elected(3);
    let now = c.local_now(leader);
    c.node_mut(leader).transfer_leadership(now, n(2)).expect("accepted");
    c.crash(n(2));
    c.drain(leader);
    let start = c.sent.len();
    let (new, took) = c.run_until_leader_other_than(Some(n(2)), TIMEOUT * 3);
    if std::env::var("RANKED_DEBUG").is_ok() {
        for m in c.ranked_sent(start) {
            if !matches!(m.3, RankedMessage::Lead { .. } | RankedMessage::LeadAck { .. }) {
                eprintln!("{m:?}");
            }
        }
        for e in &c.events {
            eprintln!("{e:?}");
        }
    }
    assert!(new == n(1) || new == n(3));
    assert!(took < TIMEOUT * 2, "fallback took {took:?}");
}

// ---- Misc ----

#[test]
fn messages_of_other_protocols_are_ignored() {
    let (mut c, leader) = elected(3);
    let f = n(2);
    let ignored = c.node(f).counters().messages_ignored;
    let before = c.sent.len();
    c.inject_raw(n(3), f, Message::PreVote { term: Term(9) });
    c.inject_raw(n(3), f, Message::Vote { term: Term(9), transfer: true });
    c.inject_raw(n(3), f, Message::Heartbeat { term: Term(9), counter: 1, sent_at_nanos: 1 });
    assert_eq!(c.node(f).counters().messages_ignored, ignored + 3);
    assert!(c.sent[before..].is_empty());
    assert_eq!(c.term(f), Term(1));
    assert_eq!(c.node(f).status().leader, Some(leader));
    // So are messages from strangers.
    c.inject(n(77), f, elect_msg(9, None, 1));
    assert_eq!(c.node(f).counters().messages_ignored, ignored + 4);
}

#[test]
fn duplicated_or_reordered_leads_are_dropped_by_lsn() {
    let (mut c, leader) = elected(3);
    let f = n(3);
    c.run_for(HEARTBEAT * 3);
    let lsn = c.node(f).status().lsn.expect("follower saw LEADs");
    let ignored = c.node(f).counters().messages_ignored;
    let before = c.sent.len();
    c.inject(
        leader,
        f,
        RankedMessage::Lead { term: lsn.term, counter: lsn.counter - 1, sent_at_nanos: 1 },
    );
    assert_eq!(c.node(f).counters().messages_ignored, ignored + 1);
    assert!(c.sent[before..].is_empty(), "no ack for a stale LSN");
}

#[test]
fn leader_whose_lease_lapses_just_before_late_acks_is_re_elected_at_once() {
    let (mut c, leader) = elected(3);
    let lsn = c.node(leader).status().lsn;
    while c.node(leader).status().lsn == lsn {
        c.run_for(Duration::from_millis(1));
    }
    c.run_for(LATENCY * 3);
    c.isolate(leader);
    c.run_for(TIMEOUT * 92 / 100);
    assert!(!c.node(leader).is_leader(c.local_now(leader)), "the lease has lapsed");
    c.heal();
    let mut leaderless = Duration::ZERO;
    for _ in 0..(3 * TIMEOUT.as_millis()) {
        c.run_for(Duration::from_millis(1));
        if c.leaders().is_empty() {
            leaderless += Duration::from_millis(1);
        }
    }
    assert_eq!(c.leader(), leader, "no leader change");
    assert!(leaderless < HEARTBEAT, "leaderless for {leaderless:?} after the heal");
}

// ---- Seed 001's traffic promise ----

/// The most election messages (ELECT broadcasts and VOTEs, a broadcast
/// counted once) one server sent within any window of one RTT, and the most
/// it sent to any one destination within such a window.
fn max_election_messages_per_rtt(c: &Cluster, from: usize) -> (usize, usize) {
    let mut sends: BTreeMap<NodeId, Vec<(u64, Option<NodeId>)>> = BTreeMap::new();
    let mut last_elect: BTreeMap<NodeId, u64> = BTreeMap::new();
    let mut per_dest: BTreeMap<(NodeId, NodeId), Vec<u64>> = BTreeMap::new();
    for (at, f, t, m) in c.ranked_sent(from) {
        if !m.is_election_message() {
            continue;
        }
        per_dest.entry((f, t)).or_default().push(at);
        match m {
            // One broadcast = the ELECT copies a node sends at one instant.
            RankedMessage::Elect { .. } => {
                if last_elect.insert(f, at) != Some(at) {
                    sends.entry(f).or_default().push((at, None));
                }
            }
            _ => sends.entry(f).or_default().push((at, Some(t))),
        }
    }
    let rtt = RTT.as_nanos() as u64;
    let window_max = |times: &[u64]| {
        (0..times.len())
            .map(|i| times[i..].iter().take_while(|&&t| t < times[i] + rtt).count())
            .max()
            .unwrap_or(0)
    };
    let per_server = sends
        .values()
        .map(|v| window_max(&v.iter().map(|s| s.0).collect::<Vec<_>>()))
        .max()
        .unwrap_or(0);
    let per_destination = per_dest.values().map(|v| window_max(v)).max().unwrap_or(0);
    (per_server, per_destination)
}

#[test]
fn each_server_sends_at_most_two_election_messages_per_rtt() {
    let mut worst = (0, 0);
    let mut elections = 0;
    for seed in 0..60 {
        let size = [3, 5, 7][seed as usize % 3];
        let mut c = Cluster::with_faults(size, seed, true);
        // Cold start, then three leader crashes (each restarted later).
        c.run_for(TIMEOUT * 2);
        for _ in 0..3 {
            let old = c.leader();
            c.run_for(HEARTBEAT * (seed % 5) as u32 / 5);
            c.crash(old);
            c.run_until_leader_other_than(Some(old), TIMEOUT * 3);
            c.restart(old);
            c.run_for(TIMEOUT * 2);
        }
        elections += c.leader_history().len();
        let m = max_election_messages_per_rtt(&c, 0);
        worst = (worst.0.max(m.0), worst.1.max(m.1));
    }
    println!(
        "ranked: at most {} election sends per server and {} per destination within one RTT \
         ({elections} elections)",
        worst.0, worst.1
    );
    assert!(worst.0 <= 2, "a server sent {} election messages within one RTT", worst.0);
    assert!(worst.1 <= 2, "a server sent {} election messages to one node within one RTT", worst.1);
    assert!(worst.0 >= 1 && elections > 60, "the measure saw the elections");
}

#[test]
fn a_stall_of_the_whole_cluster_changes_no_leader() {
    // Every node stops longer than the election timeout at once, then all
    // resume together: followers give the leader the stall grace, and the
    // leader renews its lease with fresh `Lead`s instead of stepping down.
    let (mut c, leader) = elected(3);
    let term = c.term(leader);
    let history = c.leader_history().len();
    for id in c.ids.clone() {
        c.crash(id);
    }
    c.run_for(TIMEOUT * 2);
    for id in c.ids.clone() {
        c.down.remove(&id);
    }
    assert!(c.leaders().is_empty(), "the lease ran out during the stall");
    c.run_for(HEARTBEAT * 3);
    assert_eq!(c.leader(), leader, "the same leader leads again");
    c.run_for(TIMEOUT * 3);
    assert_eq!(c.leader(), leader);
    assert_eq!(c.term(leader), term, "no election happened");
    assert_eq!(c.leader_history().len(), history);
}
