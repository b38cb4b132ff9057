//! Interaction tests of the Paxos elector (seed 004): each one is a short
//! story about polls, ballots, promises, leases, restarts and transfers, with
//! the outcome asserted.

mod util;

use rand_pcg::Pcg64Mcg;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use tenure_core::paxos::{follower_lease, leader_lease, timeout_spread, LOW_BALL};
use tenure_core::{
    Config, ConfigError, Event, FencingToken, HardState, Instant, Lsn, Message, NodeId,
    PaxosElector, PaxosMessage, Protocol, ProtocolKind, Role, Term, TransferError,
};
use util::{config, n, HEARTBEAT, LATENCY, TIMEOUT};

type Node = PaxosElector<Pcg64Mcg>;

struct InFlight {
    at: Instant,
    seq: u64,
    from: NodeId,
    to: NodeId,
    msg: Message,
}

/// A small in-memory cluster of Paxos electors: fixed latency, cut links,
/// crash and restart from the persisted state, failing storage.
struct Cluster {
    now: Instant,
    ids: Vec<NodeId>,
    nodes: BTreeMap<NodeId, Node>,
    durable: BTreeMap<NodeId, HardState>,
    down: BTreeSet<NodeId>,
    cut: BTreeSet<(NodeId, NodeId)>,
    storage_failing: BTreeSet<NodeId>,
    in_flight: Vec<InFlight>,
    seq: u64,
    boots: u64,
    events: Vec<(Instant, NodeId, Event)>,
    sent: Vec<(Instant, NodeId, NodeId, Message)>,
}

impl Cluster {
    fn new(size: u64) -> Self {
        let ids: Vec<NodeId> = (1..=size).map(NodeId).collect();
        let mut c = Cluster {
            now: Instant::from_nanos(1_000_000_000),
            ids: ids.clone(),
            nodes: BTreeMap::new(),
            durable: ids.iter().map(|&i| (i, HardState::default())).collect(),
            down: BTreeSet::new(),
            cut: BTreeSet::new(),
            storage_failing: BTreeSet::new(),
            in_flight: Vec::new(),
            seq: 0,
            boots: 0,
            events: Vec::new(),
            sent: Vec::new(),
        };
        for id in ids {
            c.boot(id);
        }
        c
    }

    fn boot(&mut self, id: NodeId) {
        self.boots += 1;
        let cfg = config(id, self.ids.len() as u64);
        let rng = Pcg64Mcg::new(0x5EED ^ u128::from(id.0) ^ (u128::from(self.boots) << 64));
        let node = PaxosElector::new(cfg, self.durable[&id], rng, self.now);
        self.nodes.insert(id, node);
        self.drain(id);
    }

    fn node(&self, id: NodeId) -> &Node {
        &self.nodes[&id]
    }

    fn node_mut(&mut self, id: NodeId) -> &mut Node {
        self.nodes.get_mut(&id).expect("known node")
    }

    /// Persists, then sends, then records events — the calling contract.
    fn drain(&mut self, id: NodeId) {
        for _ in 0..4 {
            let out = self.node_mut(id).take_output();
            if out.is_empty() {
                return;
            }
            let mut ok = true;
            if let Some(hs) = out.persist {
                if self.storage_failing.contains(&id) {
                    ok = false;
                } else {
                    self.durable.insert(id, hs);
                }
            }
            if ok {
                for (to, msg) in out.messages {
                    self.sent.push((self.now, id, to, msg.clone()));
                    self.seq += 1;
                    let at = self.now + LATENCY;
                    self.in_flight.push(InFlight { at, seq: self.seq, from: id, to, msg });
                }
            }
            for e in out.events {
                self.events.push((self.now, id, e));
            }
            if !ok {
                let now = self.now;
                self.node_mut(id).handle_persist_failed(now);
            }
        }
    }

    fn crash(&mut self, id: NodeId) {
        self.down.insert(id);
        self.in_flight.retain(|m| m.to != id && m.from != id);
    }

    fn restart(&mut self, id: NodeId) {
        self.down.remove(&id);
        self.boot(id);
    }

    fn isolate(&mut self, id: NodeId) {
        for o in self.ids.clone() {
            if o != id {
                self.cut_link(id, o);
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
    fn inject(&mut self, from: NodeId, to: NodeId, msg: PaxosMessage) {
        let now = self.now;
        self.node_mut(to).handle_message(now, from, Message::Paxos(msg));
        self.drain(to);
    }

    /// Messages `from` sent to `to` since index `since` of the send log.
    fn sent_since(&self, since: usize, from: NodeId, to: NodeId) -> Vec<PaxosMessage> {
        self.sent[since..]
            .iter()
            .filter(|(_, f, t, _)| *f == from && *t == to)
            .filter_map(|(_, _, _, m)| match m {
                Message::Paxos(p) => Some(p.clone()),
                _ => None,
            })
            .collect()
    }

    fn run_for(&mut self, d: Duration) {
        let end = self.now + d;
        for _ in 0..1_000_000 {
            let next_msg = self.in_flight.iter().map(|m| (m.at, m.seq)).min();
            let next_timer = self
                .nodes
                .iter()
                .filter(|(id, _)| !self.down.contains(id))
                .map(|(&id, node)| (node.poll_timeout(), id))
                .min();
            let msg_at = next_msg.map_or(Instant::MAX, |(at, _)| at);
            let timer_at = next_timer.map_or(Instant::MAX, |(at, _)| at);
            let at = msg_at.min(timer_at);
            if at > end {
                self.now = end;
                return;
            }
            self.now = self.now.max(at);
            let now = self.now;
            if msg_at <= timer_at {
                let (_, seq) = next_msg.expect("message");
                let pos = self.in_flight.iter().position(|m| m.seq == seq).expect("in flight");
                let m = self.in_flight.swap_remove(pos);
                if self.down.contains(&m.to) || self.cut.contains(&(m.from, m.to)) {
                    continue;
                }
                self.node_mut(m.to).handle_message(now, m.from, m.msg);
                self.drain(m.to);
            } else {
                let (_, id) = next_timer.expect("timer");
                self.node_mut(id).handle_timeout(now);
                self.drain(id);
            }
        }
        panic!("run_for did not reach its end: livelock in the harness");
    }

    fn leaders(&self) -> Vec<NodeId> {
        self.nodes
            .iter()
            .filter(|(id, e)| !self.down.contains(id) && e.is_leader(self.now))
            .map(|(&id, _)| id)
            .collect()
    }

    fn leader(&self) -> NodeId {
        let l = self.leaders();
        assert_eq!(l.len(), 1, "expected exactly one leader, got {l:?}");
        l[0]
    }

    fn run_until_leader_other_than(
        &mut self,
        not: Option<NodeId>,
        max: Duration,
    ) -> (NodeId, Duration) {
        let start = self.now;
        while self.now.saturating_since(start) < max {
            self.run_for(Duration::from_millis(1));
            if let Some(&x) = self.leaders().iter().find(|&&x| Some(x) != not) {
                return (x, self.now.saturating_since(start));
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
        self.nodes.values().map(|e| e.counters().elections_started).sum()
    }

    fn polls(&self, id: NodeId) -> u64 {
        self.node(id).counters().pre_votes_started
    }

    fn leader_history(&self) -> Vec<(NodeId, Term)> {
        self.events
            .iter()
            .filter_map(|(_, id, e)| match e {
                Event::RoleChanged { role: Role::Leader, term, .. } => Some((*id, *term)),
                _ => None,
            })
            .collect()
    }
}

/// The proposer encoded in a ballot of a cluster whose ids are 1..=n.
fn proposer(ballot: Term) -> NodeId {
    NodeId(ballot.0 % 16 + 1)
}

fn elected(size: u64) -> (Cluster, NodeId) {
    let mut c = Cluster::new(size);
    c.run_for(TIMEOUT * 3);
    let l = c.leader();
    (c, l)
}

fn spread(size: u64) -> Duration {
    timeout_spread(&config(n(1), size))
}

/// A lone elector (node 2 of `size`) driven by hand.
fn lone(size: u64) -> (Node, Instant) {
    let now = Instant::from_nanos(1_000_000_000);
    let mut e = PaxosElector::new(config(n(2), size), HardState::default(), Pcg64Mcg::new(9), now);
    let _ = e.take_output();
    (e, now)
}

/// Fires `e`'s timer until it polls; returns the poll's attempt number and the time.
fn poll_now(e: &mut Node) -> (u64, Instant) {
    let at = e.poll_timeout();
    e.handle_timeout(at);
    let out = e.take_output();
    assert_eq!(out.persist, None, "a poll persists nothing");
    let attempts: Vec<u64> = out
        .messages
        .iter()
        .filter_map(|(_, m)| match m {
            Message::Paxos(PaxosMessage::Prepare { ballot, attempt, .. }) => {
                assert_eq!(*ballot, LOW_BALL, "a timed-out node polls with the low ball first");
                Some(*attempt)
            }
            _ => None,
        })
        .collect();
    assert!(!attempts.is_empty(), "the node polled: {:?}", out.messages);
    assert_eq!(e.status().role, Role::PreCandidate);
    (attempts[0], at)
}

fn poll_answer(attempt: u64, committed: u64, heartbeat: Option<Lsn>) -> Message {
    Message::Paxos(PaxosMessage::PrepareNack {
        ballot: LOW_BALL,
        attempt,
        promised: Term(0),
        committed,
        heartbeat,
        busy_ms: None,
    })
}

fn sent_prepare(out: &tenure_core::Output) -> Option<Term> {
    out.messages.iter().find_map(|(_, m)| match m {
        Message::Paxos(PaxosMessage::Prepare { ballot, .. }) if *ballot != LOW_BALL => {
            Some(*ballot)
        }
        _ => None,
    })
}

// ---- Election ----

#[test]
fn cold_start_elects_one_leader_whose_ballot_names_it() {
    let (c, leader) = elected(3);
    let hs = c.durable[&leader];
    assert_eq!(proposer(hs.term), leader, "the winning ballot encodes its proposer");
    assert_eq!(hs.voted_for, Some(leader), "the self-promise is durable");
    for id in c.ids.clone() {
        let s = c.node(id).status();
        assert_eq!(s.leader, Some(leader), "{id:?} follows the leader");
        assert_eq!(s.term, hs.term, "{id:?} promised the winning ballot");
        assert_eq!(s.fencing_token, Some(FencingToken::for_term(hs.term)));
    }
    assert_eq!(c.leader_history().len(), 1);
    assert!(c.elections() <= 2, "{} candidacies", c.elections());
}

#[test]
fn the_first_poll_comes_between_one_timeout_and_timeout_plus_spread() {
    for size in [3u64, 5] {
        let (mut c, old) = elected(size);
        c.run_for(HEARTBEAT / 3);
        let last_commit = c
            .sent
            .iter()
            .rev()
            .find(|(_, f, _, m)| {
                *f == old && matches!(m, Message::Paxos(PaxosMessage::Commit { .. }))
            })
            .map(|(t, ..)| *t)
            .expect("the leader sent Commits");
        c.crash(old);
        let since = c.sent.len();
        c.run_until_leader_other_than(Some(old), TIMEOUT * 4);
        let first_poll = c.sent[since..]
            .iter()
            .find(|(.., m)| {
                matches!(m, Message::Paxos(PaxosMessage::Prepare { ballot, .. }) if *ballot == LOW_BALL)
            })
            .map(|(t, ..)| *t)
            .expect("a survivor polled");
        let after = first_poll.saturating_since(last_commit);
        assert!(after >= TIMEOUT, "{size} nodes: polled {after:?} after the last Commit");
        assert!(
            after <= TIMEOUT + spread(size) + LATENCY * 2,
            "{size} nodes: polled after {after:?}"
        );
    }
}

#[test]
fn leader_crash_fails_over_with_one_candidacy() {
    for size in [3u64, 5, 7] {
        let (mut c, old) = elected(size);
        let before = c.elections();
        c.crash(old);
        let (new, took) = c.run_until_leader_other_than(Some(old), TIMEOUT * 4);
        assert_ne!(new, old);
        assert_eq!(c.elections(), before + 1, "{size} nodes: one high Prepare");
        assert!(took <= TIMEOUT + spread(size) + HEARTBEAT, "{size} nodes: failover took {took:?}");
        assert!(c.term(new) > c.durable[&old].term, "the new ballot is higher");
    }
}

#[test]
fn fencing_tokens_increase_across_leaders() {
    let (mut c, first) = elected(3);
    c.crash(first);
    let (second, _) = c.run_until_leader_other_than(Some(first), TIMEOUT * 4);
    c.restart(first);
    c.run_for(TIMEOUT);
    c.crash(second);
    c.run_until_leader_other_than(Some(second), TIMEOUT * 4);
    let history = c.leader_history();
    assert_eq!(history.len(), 3, "{history:?}");
    assert!(history.windows(2).all(|w| w[0].1 < w[1].1), "ballots increase: {history:?}");
    let tokens: Vec<FencingToken> = c
        .events
        .iter()
        .filter_map(|(_, id, e)| match e {
            Event::LeaderChanged { leader: Some(l), fencing_token: Some(t), .. } if l == id => {
                Some(*t)
            }
            _ => None,
        })
        .collect();
    let expected: Vec<FencingToken> =
        history.iter().map(|&(_, t)| FencingToken::for_term(t)).collect();
    assert_eq!(tokens, expected, "each leader's token is its winning ballot");
}

#[test]
fn single_node_cluster_leads_alone_after_its_promise_is_saved() {
    let cfg = config(n(1), 1);
    let mut e = PaxosElector::new(cfg, HardState::default(), Pcg64Mcg::new(1), Instant::ZERO);
    let _ = e.take_output();
    let t = e.poll_timeout();
    e.handle_timeout(t);
    let out = e.take_output();
    let hs = out.persist.expect("the self-promise is persisted first");
    assert_eq!(hs.voted_for, Some(n(1)));
    assert!(!e.is_leader(t), "not before the promise is durable");
    let t2 = e.poll_timeout();
    assert!(t2 <= t, "concludes at once");
    e.handle_timeout(t);
    assert!(e.is_leader(t));
    assert_eq!(e.status().term, hs.term);
}

// ---- Promises and durable state ----

#[test]
fn an_acceptor_promises_once_per_ballot_and_persists_before_answering() {
    let (mut e, now) = lone(3);
    // Node 3's ballot (rank 2, counter 1) = 18.
    let b = Term(18);
    e.handle_message(
        now,
        n(3),
        Message::Paxos(PaxosMessage::Prepare { ballot: b, attempt: 1, handover: None }),
    );
    let out = e.take_output();
    // The anonymous lease of a fresh start blocks it first.
    assert_eq!(out.persist, None);
    assert!(matches!(
        out.messages[..],
        [(_, Message::Paxos(PaxosMessage::PrepareNack { busy_ms: Some(_), .. }))]
    ));
    let later = now + TIMEOUT;
    e.handle_message(
        later,
        n(3),
        Message::Paxos(PaxosMessage::Prepare { ballot: b, attempt: 1, handover: None }),
    );
    let out = e.take_output();
    assert_eq!(out.persist, Some(HardState { term: b, voted_for: Some(n(3)) }));
    assert!(
        matches!(out.messages[..], [(_, Message::Paxos(PaxosMessage::PrepareAck { ballot, .. }))] if ballot == b)
    );
    assert_eq!(out.messages[0].1.vote_grant(), Some(b));
    // A lower ballot from node 1 is refused, with the promise it lost to.
    e.handle_message(
        later,
        n(1),
        Message::Paxos(PaxosMessage::Prepare { ballot: Term(16), attempt: 1, handover: None }),
    );
    let out = e.take_output();
    assert_eq!(out.persist, None);
    assert!(matches!(
        out.messages[..],
        [(_, Message::Paxos(PaxosMessage::PrepareNack { promised, .. }))] if promised == b
    ));
    // A ballot that does not name its sender is ignored.
    let ignored = e.counters().messages_ignored;
    e.handle_message(
        later,
        n(1),
        Message::Paxos(PaxosMessage::Prepare { ballot: Term(34), attempt: 1, handover: None }),
    );
    assert!(e.take_output().messages.is_empty());
    assert_eq!(e.counters().messages_ignored, ignored + 1);
    assert_eq!(e.hard_state(), HardState { term: b, voted_for: Some(n(3)) });
}

#[test]
fn node_that_cannot_persist_does_not_promise() {
    let (mut c, leader) = elected(3);
    let f = c.ids.iter().copied().find(|&i| i != leader).expect("a follower");
    c.storage_failing.insert(f);
    // A self-promise that cannot be written: the node steps back at once.
    c.crash(leader);
    c.run_for(TIMEOUT * 4);
    let since = c.sent.len();
    let hs_before = c.durable[&f];
    c.run_for(TIMEOUT * 4);
    let acks: Vec<_> = c.sent[since..]
        .iter()
        .filter(|(_, from, ..)| *from == f)
        .filter(|(.., m)| m.vote_grant().is_some())
        .collect();
    assert!(acks.is_empty(), "a node with failing storage promised: {acks:?}");
    assert_eq!(c.durable[&f], hs_before, "nothing was written");
    assert!(c.node(f).status().storage_failed);
    assert_ne!(c.role(f), Role::Leader);
    // Once storage works again it promises and the two survivors elect.
    c.storage_failing.remove(&f);
    let now = c.now;
    c.node_mut(f).handle_persist_recovered(now);
    c.run_until_leader_other_than(Some(leader), TIMEOUT * 6);
}

#[test]
fn a_failed_write_of_a_promise_sends_nothing() {
    let (mut e, now) = lone(3);
    let later = now + TIMEOUT;
    e.handle_message(
        later,
        n(3),
        Message::Paxos(PaxosMessage::Prepare { ballot: Term(18), attempt: 1, handover: None }),
    );
    let out = e.take_output();
    assert!(out.persist.is_some());
    // The driver could not write it: it drops the PrepareAck and reports.
    e.handle_persist_failed(later);
    assert!(e.status().storage_failed);
    // Asked again, the node refuses: its promise is not durable.
    e.handle_message(
        later,
        n(3),
        Message::Paxos(PaxosMessage::Prepare { ballot: Term(18), attempt: 2, handover: None }),
    );
    let out = e.take_output();
    assert!(out.messages.iter().all(|(_, m)| m.vote_grant().is_none()), "{out:?}");
}

#[test]
fn restart_keeps_the_promise_and_an_anonymous_lease() {
    let (mut c, leader) = elected(3);
    let f = c.ids.iter().copied().find(|&i| i != leader).expect("a follower");
    let other = c.ids.iter().copied().find(|&i| i != leader && i != f).expect("another");
    let promised = c.durable[&f];
    let promised_term = promised.term;
    assert_eq!(promised.voted_for, Some(leader));
    c.crash(f);
    c.restart(f);
    assert_eq!(c.node(f).hard_state(), promised, "the promise survives the restart");
    // Right after the restart, a higher Prepare from the other follower is
    // refused: the node may have granted a lease it no longer remembers.
    let ballot = Term((promised.term.0 / 16 + 1) * 16 + (other.0 - 1));
    let since = c.sent.len();
    c.inject(other, f, PaxosMessage::Prepare { ballot, attempt: 7, handover: None });
    let answer = c.sent_since(since, f, other);
    assert!(
        matches!(answer[..], [PaxosMessage::PrepareNack { busy_ms: Some(ms), .. }] if ms > 0),
        "{answer:?}"
    );
    assert_eq!(c.term(f), promised.term, "the refused ballot is not adopted");
    // A ballot below the durable promise is refused after the anonymous lease
    // too (counter 0 of a node of rank > 0: below every real ballot).
    c.run_for(TIMEOUT);
    let x = c.ids.iter().copied().find(|&i| i != f && i.0 > 1).expect("a node of rank > 0");
    let since = c.sent.len();
    c.inject(x, f, PaxosMessage::Prepare { ballot: Term(x.0 - 1), attempt: 8, handover: None });
    let answer = c.sent_since(since, f, x);
    assert!(
        matches!(answer[..], [PaxosMessage::PrepareNack { promised, .. }] if promised >= promised_term),
        "{answer:?}"
    );
}

// ---- Leader lease, stickiness, stale leaders ----

#[test]
fn follower_in_lease_refuses_a_high_prepare_without_adopting_it() {
    let (mut c, leader) = elected(3);
    let f = c.ids.iter().copied().find(|&i| i != leader).expect("a follower");
    let other = c.ids.iter().copied().find(|&i| i != leader && i != f).expect("another");
    let before = c.term(f);
    let ballot = Term((before.0 / 16 + 5) * 16 + (other.0 - 1));
    let since = c.sent.len();
    c.inject(other, f, PaxosMessage::Prepare { ballot, attempt: 1, handover: None });
    let answer = c.sent_since(since, f, other);
    match &answer[..] {
        [PaxosMessage::PrepareNack { busy_ms: Some(ms), promised, .. }] => {
            assert!(*ms > 0 && *ms <= follower_lease(&config(f, 3)).as_millis() as u64 + 1);
            assert_eq!(*promised, before);
        }
        other => panic!("expected a busy refusal, got {other:?}"),
    }
    assert_eq!(c.term(f), before, "sticky: the disruptive ballot is not promised");
    assert_eq!(c.node(f).status().leader, Some(leader));
    // Nor is an Accept of it.
    let since = c.sent.len();
    c.inject(other, f, PaxosMessage::Accept { ballot, slot: 99 });
    assert!(matches!(c.sent_since(since, f, other)[..], [PaxosMessage::AcceptNack { .. }]));
    assert_eq!(c.term(f), before);
}

#[test]
fn leader_that_loses_its_quorum_steps_down_within_its_lease() {
    let (mut c, leader) = elected(3);
    c.isolate(leader);
    let cut_at = c.now;
    let mut after = None;
    for _ in 0..2000 {
        c.run_for(Duration::from_millis(1));
        if !c.node(leader).is_leader(c.now) {
            after = Some(c.now.saturating_since(cut_at));
            break;
        }
    }
    let after = after.expect("the leader steps down");
    assert!(after <= leader_lease(&config(leader, 3)) + HEARTBEAT, "after {after:?}");
    c.run_for(TIMEOUT);
    assert_ne!(c.role(leader), Role::Leader);
    assert_eq!(c.node(leader).counters().quorum_losses, 1);
}

#[test]
fn no_overlap_between_old_leader_and_new_leader() {
    let (mut c, old) = elected(5);
    c.isolate(old);
    let (new, _) = c.run_until_leader_other_than(Some(old), TIMEOUT * 5);
    let elected_at = c
        .events
        .iter()
        .rev()
        .find(|(_, id, e)| *id == new && matches!(e, Event::RoleChanged { role: Role::Leader, .. }))
        .map(|(t, ..)| *t)
        .expect("event");
    let stepped_down_at = c
        .events
        .iter()
        .find(|(_, id, e)| {
            *id == old && matches!(e, Event::RoleChanged { role: Role::Follower, .. })
        })
        .map(|(t, ..)| *t)
        .expect("the old leader stepped down");
    assert!(stepped_down_at < elected_at);
    assert!(c.term(new) > c.term(old));
}

#[test]
fn stale_leader_commit_is_refused_and_the_stale_leader_learns_the_promise() {
    let (mut c, leader) = elected(3);
    let f = c.ids.iter().copied().find(|&i| i != leader).expect("a follower");
    let ballot = c.term(leader);
    // A ballot of counter 0 from some node other than `f`: below any real one.
    let x = c.ids.iter().copied().find(|&i| i != f && i.0 > 1).expect("a node of rank > 0");
    let stale = Term(x.0 - 1);
    assert!(stale < ballot && proposer(stale) == x);
    let since = c.sent.len();
    c.inject(
        proposer(stale),
        f,
        PaxosMessage::Commit { ballot: stale, slot: 1, heartbeat: 50, sent_at_nanos: 1 },
    );
    let answer = c.sent_since(since, f, proposer(stale));
    assert!(
        matches!(answer[..], [PaxosMessage::CommitAck { ok: false, promised, .. }] if promised == ballot),
        "{answer:?}"
    );
    assert_eq!(c.node(f).status().leader, Some(leader), "the stale Commit changed nothing");
}

#[test]
fn duplicated_or_reordered_commits_are_dropped_by_heartbeat_counter() {
    let (mut c, leader) = elected(3);
    let f = c.ids.iter().copied().find(|&i| i != leader).expect("a follower");
    let lsn = c.node(f).status().lsn.expect("a heartbeat was received");
    assert_eq!(lsn.term, c.term(leader));
    let ignored = c.node(f).counters().messages_ignored;
    let since = c.sent.len();
    c.inject(
        leader,
        f,
        PaxosMessage::Commit {
            ballot: lsn.term,
            slot: 1,
            heartbeat: lsn.counter,
            sent_at_nanos: 1,
        },
    );
    assert!(c.sent_since(since, f, leader).is_empty(), "not acknowledged");
    assert_eq!(c.node(f).counters().messages_ignored, ignored + 1);
}

#[test]
fn paused_leader_steps_down_before_acting_on_resume() {
    let (mut c, leader) = elected(3);
    // Freeze the leader: it gets no input while the others move on.
    c.crash(leader);
    let (new, _) = c.run_until_leader_other_than(Some(leader), TIMEOUT * 4);
    c.run_for(TIMEOUT);
    c.down.remove(&leader); // resume with its old in-memory state
    let now = c.now;
    assert!(!c.node(leader).is_leader(now), "its lease ran out while frozen");
    c.node_mut(leader).handle_timeout(now);
    c.drain(leader);
    // It was stalled, so it may try to renew its lease with fresh Commits,
    // but without a lease it does not lead; the acceptors answer with their
    // higher promise, the renewal fails and it steps down.
    assert!(!c.node(leader).is_leader(now));
    c.run_for(HEARTBEAT * tenure_core::STALL_GRACE_HEARTBEATS);
    assert_ne!(c.role(leader), Role::Leader);
    c.run_for(TIMEOUT);
    assert_eq!(c.leader(), new);
}

#[test]
fn candidate_resumed_after_its_deadline_ignores_late_promises() {
    let (mut e, now) = lone(3);
    let (attempt, at) = poll_now(&mut e);
    e.handle_message(at, n(3), poll_answer(attempt, 0, None));
    let out = e.take_output();
    let ballot = sent_prepare(&out).expect("free majority: a high Prepare");
    assert_eq!(e.status().role, Role::Candidate);
    // Frozen past its deadline, then the promise arrives.
    let late = at + TIMEOUT;
    e.handle_message(
        late,
        n(3),
        Message::Paxos(PaxosMessage::PrepareAck {
            ballot,
            attempt: attempt + 1,
            committed: 0,
            accepted_slot: 0,
        }),
    );
    let out = e.take_output();
    assert!(!e.is_leader(late));
    assert!(out
        .messages
        .iter()
        .all(|(_, m)| !matches!(m, Message::Paxos(PaxosMessage::Accept { .. }))));
    assert_ne!(e.status().role, Role::Leader);
    let _ = now;
}

#[test]
fn leader_told_of_a_higher_promise_reestablishes_itself_above_it() {
    let (mut c, leader) = elected(3);
    let f = c.ids.iter().copied().find(|&i| i != leader).expect("a follower");
    let other = c.ids.iter().copied().find(|&i| i != leader && i != f).expect("another");
    let ballot = c.term(leader);
    // `f` promised a candidacy of `other` that could not win (forced here).
    let higher = Term((ballot.0 / 16 + 3) * 16 + (other.0 - 1));
    c.inject(
        f,
        leader,
        PaxosMessage::CommitAck { ballot, ok: false, promised: higher, echo_sent_at_nanos: 1 },
    );
    assert_eq!(c.role(leader), Role::Candidate, "re-prepares at once");
    c.run_for(HEARTBEAT);
    assert_eq!(c.leader(), leader);
    assert!(c.term(leader) > higher);
    assert_eq!(c.leader_history().iter().filter(|(id, _)| *id != leader).count(), 0);
}

// ---- Transfer and stop ----

#[test]
fn transfer_hands_leadership_to_the_named_node_without_a_timeout() {
    let (mut c, leader) = elected(3);
    let target = c.ids.iter().copied().find(|&i| i != leader).expect("a follower");
    let polls = c.polls(target);
    let now = c.now;
    c.node_mut(leader).transfer_leadership(now, target).expect("transfer accepted");
    c.drain(leader);
    assert!(!c.node(leader).is_leader(c.now), "the old leader stepped down at once");
    let (new, took) = c.run_until_leader_other_than(Some(leader), TIMEOUT);
    assert_eq!(new, target);
    assert!(took < HEARTBEAT, "transfer took {took:?}");
    assert_eq!(c.polls(target), polls, "the successor skipped the poll");
}

#[test]
fn transfer_is_refused_with_clear_reasons() {
    let (mut c, leader) = elected(3);
    let f = c.ids.iter().copied().find(|&i| i != leader).expect("a follower");
    let now = c.now;
    assert_eq!(
        c.node_mut(f).transfer_leadership(now, leader),
        Err(TransferError::NotLeader { leader: Some(leader) })
    );
    assert_eq!(
        c.node_mut(leader).transfer_leadership(now, n(9)),
        Err(TransferError::UnknownNode(n(9)))
    );
    c.isolate(f);
    c.run_for(TIMEOUT + HEARTBEAT);
    let now = c.now;
    assert_eq!(
        c.node_mut(leader).transfer_leadership(now, f),
        Err(TransferError::TargetUnreachable(f))
    );
}

#[test]
fn graceful_shutdown_cedes_leadership_quickly() {
    let (mut c, leader) = elected(3);
    let now = c.now;
    c.node_mut(leader).shutdown(now);
    c.drain(leader);
    assert!(!c.node(leader).is_leader(now));
    let (_, took) = c.run_until_leader_other_than(Some(leader), TIMEOUT);
    assert!(took < HEARTBEAT, "cession took {took:?}");
    // The stopped node ignores everything afterwards.
    let before = c.node(leader).poll_timeout();
    assert_eq!(before, Instant::MAX);
}

#[test]
fn cession_falls_back_when_the_successor_is_dead() {
    let (mut c, leader) = elected(3);
    let target = c.ids.iter().copied().find(|&i| i != leader).expect("a follower");
    let now = c.now;
    c.node_mut(leader).transfer_leadership(now, target).expect("accepted");
    c.crash(target);
    c.drain(leader);
    let (new, took) = c.run_until_leader_other_than(Some(leader), TIMEOUT * 4);
    assert_ne!(new, target);
    assert!(took < TIMEOUT + spread(3), "fallback took {took:?}");
}

#[test]
fn a_stale_resign_does_not_let_its_successor_override_a_newer_lease() {
    // Leader of ballot `b` resigned naming `s`; by the time the Resign
    // arrives, another leader holds the acceptors' leases: the handover must
    // not override those.
    let (mut c, leader) = elected(3);
    let f = c.ids.iter().copied().find(|&i| i != leader).expect("a follower");
    let other = c.ids.iter().copied().find(|&i| i != leader && i != f).expect("another");
    let current = c.term(leader);
    let stale_handover = Term(current.0 - 16);
    let ballot = Term((current.0 / 16 + 1) * 16 + (other.0 - 1));
    let since = c.sent.len();
    c.inject(
        other,
        f,
        PaxosMessage::Prepare { ballot, attempt: 1, handover: Some(stale_handover) },
    );
    assert!(matches!(
        c.sent_since(since, f, other)[..],
        [PaxosMessage::PrepareNack { busy_ms: Some(_), .. }]
    ));
    // The same handover naming the current leadership passes.
    let since = c.sent.len();
    c.inject(other, f, PaxosMessage::Prepare { ballot, attempt: 2, handover: Some(current) });
    assert!(matches!(c.sent_since(since, f, other)[..], [PaxosMessage::PrepareAck { .. }]));
}

// ---- Foreign messages ----

#[test]
fn messages_of_other_protocols_are_ignored() {
    let (mut c, leader) = elected(3);
    let f = c.ids.iter().copied().find(|&i| i != leader).expect("a follower");
    let before = c.node(f).counters().messages_ignored;
    let term_before = c.term(f);
    let foreign = [
        Message::PreVote { term: Term(99) },
        Message::Vote { term: Term(99), transfer: true },
        Message::Heartbeat { term: Term(99), counter: 1, sent_at_nanos: 0 },
        Message::Resign { term: Term(99), successor: Some(f) },
    ];
    let since = c.sent.len();
    for m in foreign {
        let now = c.now;
        c.node_mut(f).handle_message(now, leader, m);
        c.drain(f);
    }
    assert_eq!(c.node(f).counters().messages_ignored, before + 4);
    assert!(c.sent[since..].iter().all(|(_, from, ..)| *from != f), "answered a foreign message");
    assert_eq!(c.term(f), term_before);
    assert_eq!(c.role(f), Role::Follower);
}

// ---- Seed 004: low-ball polling and evidence ----

#[test]
fn a_low_ball_poll_changes_no_durable_state_anywhere() {
    let (mut c, leader) = elected(3);
    let f = c.ids.iter().copied().find(|&i| i != leader).expect("a follower");
    let durable = c.durable.clone();
    let since = c.sent.len();
    c.inject(f, leader, PaxosMessage::Prepare { ballot: LOW_BALL, attempt: 1, handover: None });
    let other = c.ids.iter().copied().find(|&i| i != leader && i != f).expect("another");
    c.inject(f, other, PaxosMessage::Prepare { ballot: LOW_BALL, attempt: 1, handover: None });
    assert_eq!(c.durable, durable);
    for to in [leader, other] {
        let answer = c.sent_since(since, to, f);
        match &answer[..] {
            [PaxosMessage::PrepareNack { ballot, committed, heartbeat, busy_ms, .. }] => {
                assert_eq!(*ballot, LOW_BALL);
                assert!(*committed >= 1, "the new leader's no-op is committed");
                assert_eq!(heartbeat.map(|h| h.term), Some(c.term(leader)));
                assert!(busy_ms.is_some(), "busy: it backs a live leader");
            }
            other => panic!("expected a PrepareNack, got {other:?}"),
        }
        assert!(answer.iter().all(|m| m.vote_grant().is_none()));
    }
}

#[test]
fn strong_evidence_a_higher_committed_slot_stops_the_high_prepare() {
    let (mut e, _) = lone(3);
    let (attempt, at) = poll_now(&mut e);
    // One answer suffices: a slot beyond the one we know was committed.
    e.handle_message(at, n(3), poll_answer(attempt, 5, None));
    let out = e.take_output();
    assert_eq!(sent_prepare(&out), None, "no high Prepare on strong evidence");
    assert_eq!(out.persist, None);
    assert_eq!(e.status().role, Role::Follower);
    assert_eq!(e.counters().elections_started, 0);
    assert!(e.poll_timeout() >= at + TIMEOUT, "the timeout was reset");
    // It learned slot 5: the same answer on the next poll is no evidence.
    let (attempt, at) = poll_now(&mut e);
    e.handle_message(at, n(3), poll_answer(attempt, 5, None));
    assert!(sent_prepare(&e.take_output()).is_some(), "no new evidence: it stands");
}

#[test]
fn weak_evidence_needs_quorum_minus_one_higher_heartbeats() {
    let hb = |counter| Some(Lsn { term: Term(16), counter });
    // Three nodes: one higher heartbeat (quorum - 1 = 1) is evidence.
    let (mut e, _) = lone(3);
    let (attempt, at) = poll_now(&mut e);
    e.handle_message(at, n(3), poll_answer(attempt, 0, hb(7)));
    assert_eq!(sent_prepare(&e.take_output()), None);
    assert_eq!(e.status().role, Role::Follower);
    assert_eq!(e.counters().elections_started, 0);
    // Next poll: the same heartbeat is no longer higher than what it learned.
    let (attempt, at) = poll_now(&mut e);
    e.handle_message(at, n(3), poll_answer(attempt, 0, hb(7)));
    assert!(sent_prepare(&e.take_output()).is_some());

    // Five nodes: quorum - 1 = 2 higher heartbeats are needed.
    let (mut e, _) = lone(5);
    let (attempt, at) = poll_now(&mut e);
    e.handle_message(at, n(3), poll_answer(attempt, 0, hb(7)));
    e.handle_message(at, n(4), poll_answer(attempt, 0, hb(8)));
    assert_eq!(sent_prepare(&e.take_output()), None, "two higher heartbeats: evidence");
    assert_eq!(e.counters().elections_started, 0);
    let (mut e, _) = lone(5);
    let (attempt, at) = poll_now(&mut e);
    e.handle_message(at, n(3), poll_answer(attempt, 0, hb(7)));
    assert!(sent_prepare(&e.take_output()).is_none(), "one answer of five: undecided");
    e.handle_message(at, n(4), poll_answer(attempt, 0, None));
    assert!(
        sent_prepare(&e.take_output()).is_some(),
        "one higher heartbeat of five is no evidence, and three of five are free"
    );
}

#[test]
fn no_high_prepare_without_a_majority_of_answers() {
    let (mut e, _) = lone(5);
    let (attempt, at) = poll_now(&mut e);
    e.handle_message(at, n(3), poll_answer(attempt, 0, None));
    let window_end = e.poll_timeout();
    e.handle_timeout(window_end);
    let out = e.take_output();
    assert_eq!(sent_prepare(&out), None, "two of five: no high Prepare");
    assert_eq!(out.persist, None);
    assert_eq!(e.status().role, Role::Follower);
    assert_eq!(e.counters().elections_started, 0);
    assert_eq!(e.status().term, Term(0));
}

#[test]
fn a_busy_majority_delays_the_high_prepare_until_it_is_free() {
    let (mut e, _) = lone(3);
    let (attempt, at) = poll_now(&mut e);
    let busy = Message::Paxos(PaxosMessage::PrepareNack {
        ballot: LOW_BALL,
        attempt,
        promised: Term(0),
        committed: 0,
        heartbeat: None,
        busy_ms: Some(300),
    });
    e.handle_message(at, n(3), busy.clone());
    e.handle_message(at, n(1), busy);
    let out = e.take_output();
    assert_eq!(sent_prepare(&out), None);
    let next = e.poll_timeout();
    assert!(next > at + Duration::from_millis(300), "waits for the lease: {next:?}");
    assert!(next < at + TIMEOUT, "but not a whole timeout");
}

#[test]
fn one_link_failure_never_changes_the_leader() {
    // Seed 004's scenario: three nodes, the link leader <-> one follower cut.
    let (mut c, a) = elected(3);
    let b = c.ids.iter().copied().find(|&i| i != a).expect("a follower");
    let terms: Vec<Term> = c.ids.iter().map(|&i| c.term(i)).collect();
    let elections = c.elections();
    c.cut_link(a, b);
    c.run_for(TIMEOUT * 20);
    assert_eq!(c.leader(), a);
    assert!(c.polls(b) >= 5, "b keeps polling: {}", c.polls(b));
    assert_eq!(c.elections(), elections, "but never issues a high Prepare");
    let now: Vec<Term> = c.ids.iter().map(|&i| c.term(i)).collect();
    assert_eq!(now, terms, "no ballot moved");
    c.heal();
    c.run_for(TIMEOUT * 2);
    assert_eq!(c.leader(), a);
    assert_eq!(c.node(b).status().leader, Some(a));
    assert_eq!(c.leader_history().len(), 1, "zero leader changes");
}

#[test]
fn cut_link_in_four_nodes_causes_no_ping_pong() {
    // Seed 000's leader ping-pong, which seed 004 names as Paxos' weakness.
    let (mut c, a) = elected(4);
    let b = c.ids.iter().copied().find(|&i| i != a).expect("a follower");
    let elections = c.elections();
    c.cut_link(a, b);
    c.run_for(TIMEOUT * 20);
    assert_eq!(c.leader(), a);
    assert!(c.polls(b) >= 5);
    assert_eq!(c.elections(), elections);
    assert_eq!(c.leader_history().len(), 1);
}

#[test]
fn isolated_follower_polls_without_raising_its_promise() {
    let (mut c, a) = elected(4);
    let b = c.ids.iter().copied().find(|&i| i != a).expect("a follower");
    let before = c.term(b);
    c.isolate(b);
    c.run_for(TIMEOUT * 10);
    assert_eq!(c.term(b), before);
    assert!(c.polls(b) > 1);
    assert_eq!(c.node(b).counters().elections_started, 0);
    c.heal();
    c.run_for(TIMEOUT * 2);
    assert_eq!(c.leader(), a);
    assert_eq!(c.leader_history().len(), 1);
}

#[test]
fn simultaneous_polls_resolve_to_one_candidacy() {
    // Both survivors of three time out at the same instant.
    let (mut c, a) = elected(3);
    c.crash(a);
    let survivors: Vec<NodeId> = c.ids.iter().copied().filter(|&i| i != a).collect();
    c.run_for(HEARTBEAT);
    // Both stall past their deadlines and resume together: both give the
    // dead leader the stall grace, which ends for both at the same instant.
    let late = survivors.iter().map(|&i| c.node(i).poll_timeout()).max().expect("two");
    let resumed = late + HEARTBEAT + Duration::from_millis(1);
    c.now = resumed;
    for &id in &survivors {
        c.node_mut(id).handle_timeout(resumed);
        c.drain(id);
        assert_eq!(c.role(id), Role::Follower, "the stall grace");
    }
    let at = resumed + HEARTBEAT * tenure_core::STALL_GRACE_HEARTBEATS;
    c.now = at;
    for &id in &survivors {
        assert_eq!(c.node(id).poll_timeout(), at);
        c.node_mut(id).handle_timeout(at);
        c.drain(id);
        assert_eq!(c.role(id), Role::PreCandidate);
    }
    let before = c.elections();
    let (new, took) = c.run_until_leader_other_than(Some(a), TIMEOUT * 3);
    assert_eq!(new, survivors[0], "the lower-ranked poller wins");
    // Without yielding, both would refuse each other and retry after the poll window.
    assert!(took < config(a, 3).round_trip, "resolved at once, took {took:?}");
    assert_eq!(c.elections(), before + 1, "the other yielded: one high Prepare");
}

#[test]
fn config_validation_names_the_values() {
    let mut cfg: Config = config(n(1), 3);
    assert_eq!(cfg.validate_for(ProtocolKind::Paxos), Ok(()));
    // `Config::validate` already implies the bound today (timeout >= 4
    // heartbeats >= 4 round trips); the Paxos check states it on its own.
    cfg.round_trip = Duration::from_millis(100);
    cfg.election_timeout = Duration::from_millis(350);
    match tenure_core::paxos::validate(&cfg) {
        Err(ConfigError::Protocol { protocol: ProtocolKind::Paxos, reason }) => {
            assert!(reason.contains("350ms") && reason.contains("3.5 x 100ms"), "{reason}");
        }
        other => panic!("expected a paxos error, got {other:?}"),
    }
    let mut big = config(n(1), 15);
    assert_eq!(big.validate_for(ProtocolKind::Paxos), Ok(()));
    big.voters.push(n(16));
    assert!(tenure_core::paxos::validate(&big).is_err(), "ranks must fit in a ballot");
}

#[test]
fn a_stall_of_the_whole_cluster_changes_no_leader() {
    // Every node stops longer than the election timeout at once, then all
    // resume together: followers give the leader the stall grace, and the
    // leader renews its lease with fresh Commits instead of stepping down.
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
