//! Interaction tests of the Paxos elector's own rules (TRex): each one is
//! a short story about polls, ballots, promises, leases and restarts, with
//! the outcome asserted. The properties it shares with the other protocols
//! are tested in shared.rs; the tests on a lone elector drive it by hand.

use rand_pcg::Pcg64Mcg;
use std::time::Duration;
use tenure_core::paxos::{follower_lease, timeout_spread, BALLOT_NODES, LOW_BALL};
use tenure_core::testkit::{n, Cluster, Setup, HEARTBEAT, LATENCY, TIMEOUT};
use tenure_core::{
    Config, ConfigError, Elector, HardState, Instant, Lsn, Message, NodeId, PaxosElector,
    PaxosMessage, Protocol, ProtocolKind, Role, Term,
};

type C = Cluster<Elector<Pcg64Mcg>>;
type Node = PaxosElector<Pcg64Mcg>;

/// Delivers the Paxos message `msg` from `from` to `to` now.
fn inject(c: &mut C, from: NodeId, to: NodeId, msg: PaxosMessage) {
    c.inject(from, to, Message::Paxos(msg));
}

/// The Paxos messages `from` sent to `to` since `sent()[since]`.
fn paxos_sent(c: &C, since: usize, from: NodeId, to: NodeId) -> Vec<PaxosMessage> {
    c.sent_since(since, from, to)
        .into_iter()
        .filter_map(|m| match m {
            Message::Paxos(p) => Some(p),
            _ => None,
        })
        .collect()
}

fn proposer(ballot: Term) -> NodeId {
    NodeId(ballot.0 % BALLOT_NODES)
}

fn elected(size: u64) -> (C, NodeId) {
    let mut c = Cluster::of(ProtocolKind::Paxos, size);
    c.run_for(TIMEOUT * 3);
    let l = c.leader();
    (c, l)
}

fn spread(size: u64) -> Duration {
    timeout_spread(&Setup::new(size).config(n(1)))
}

/// A lone elector (node 2 of `size`) driven by hand.
fn lone(size: u64) -> (Node, Instant) {
    let now = Instant::from_nanos(1_000_000_000);
    let mut e = PaxosElector::new(
        Setup::new(size).config(n(2)),
        HardState::default(),
        Pcg64Mcg::new(9),
        now,
    );
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
        // An acceptor that heard a leader's Commit promised that ballot.
        promised: heartbeat.map_or(Term(0), |h| h.term),
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
fn the_first_poll_comes_between_one_timeout_and_timeout_plus_spread() {
    for size in [3u64, 5] {
        let (mut c, old) = elected(size);
        c.run_for(HEARTBEAT / 3);
        let last_commit = c
            .sent()
            .iter()
            .rev()
            .find(|s| s.from == old && matches!(s.msg, Message::Paxos(PaxosMessage::Commit { .. })))
            .map(|s| s.at)
            .expect("the leader sent Commits");
        c.crash(old);
        let since = c.sent().len();
        c.run_until_leader_other_than(Some(old), TIMEOUT * 4);
        let first_poll = c.sent()[since..]
            .iter()
            .find(|s| {
                matches!(s.msg, Message::Paxos(PaxosMessage::Prepare { ballot, .. }) if ballot == LOW_BALL)
            })
            .map(|s| s.at)
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
fn single_node_cluster_leads_alone_after_its_promise_is_saved() {
    let cfg = Setup::new(1).config(n(1));
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
    // Node 3's ballot (counter 1) = 65536 + 3.
    let b = Term(BALLOT_NODES + 3);
    e.handle_message(
        now,
        n(3),
        Message::Paxos(PaxosMessage::Prepare {
            ballot: b,
            attempt: 1,
            handover: None,
            freshness: tenure_core::Freshness::BOOTSTRAP,
        }),
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
        Message::Paxos(PaxosMessage::Prepare {
            ballot: b,
            attempt: 1,
            handover: None,
            freshness: tenure_core::Freshness::BOOTSTRAP,
        }),
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
        Message::Paxos(PaxosMessage::Prepare {
            ballot: Term(BALLOT_NODES + 1),
            attempt: 1,
            handover: None,
            freshness: tenure_core::Freshness::BOOTSTRAP,
        }),
    );
    let out = e.take_output();
    assert_eq!(out.persist, None);
    assert!(matches!(
        out.messages[..],
        [(_, Message::Paxos(PaxosMessage::PrepareNack { promised, .. }))] if promised == b
    ));
    // A ballot that does not name its sender (node 2's, from node 1) is ignored.
    let ignored = e.counters().messages_ignored;
    e.handle_message(
        later,
        n(1),
        Message::Paxos(PaxosMessage::Prepare {
            ballot: Term(2 * BALLOT_NODES + 2),
            attempt: 1,
            handover: None,
            freshness: tenure_core::Freshness::BOOTSTRAP,
        }),
    );
    assert!(e.take_output().messages.is_empty());
    assert_eq!(e.counters().messages_ignored, ignored + 1);
    assert_eq!(e.hard_state(), HardState { term: b, voted_for: Some(n(3)) });
}

#[test]
fn a_failed_write_of_a_promise_sends_nothing() {
    let (mut e, now) = lone(3);
    let later = now + TIMEOUT;
    e.handle_message(
        later,
        n(3),
        Message::Paxos(PaxosMessage::Prepare {
            ballot: Term(BALLOT_NODES + 3),
            attempt: 1,
            handover: None,
            freshness: tenure_core::Freshness::BOOTSTRAP,
        }),
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
        Message::Paxos(PaxosMessage::Prepare {
            ballot: Term(BALLOT_NODES + 3),
            attempt: 2,
            handover: None,
            freshness: tenure_core::Freshness::BOOTSTRAP,
        }),
    );
    let out = e.take_output();
    assert!(out.messages.iter().all(|(_, m)| m.vote_grant().is_none()), "{out:?}");
}

#[test]
fn restart_keeps_the_promise_and_an_anonymous_lease() {
    let (mut c, leader) = elected(3);
    let f = c.ids().iter().copied().find(|&i| i != leader).expect("a follower");
    let other = c.ids().iter().copied().find(|&i| i != leader && i != f).expect("another");
    let promised = c.durable(f);
    let promised_term = promised.term;
    assert_eq!(promised.voted_for, Some(leader));
    c.crash(f);
    c.restart(f);
    assert_eq!(c.node(f).hard_state(), promised, "the promise survives the restart");
    // Right after the restart, a higher Prepare from the other follower is
    // refused: the node may have granted a lease it no longer remembers.
    let ballot = Term((promised.term.0 / BALLOT_NODES + 1) * BALLOT_NODES + other.0);
    let since = c.sent().len();
    inject(
        &mut c,
        other,
        f,
        PaxosMessage::Prepare {
            ballot,
            attempt: 7,
            handover: None,
            freshness: tenure_core::Freshness::BOOTSTRAP,
        },
    );
    let answer = paxos_sent(&c, since, f, other);
    assert!(
        matches!(answer[..], [PaxosMessage::PrepareNack { busy_ms: Some(ms), .. }] if ms > 0),
        "{answer:?}"
    );
    assert_eq!(c.term(f), promised.term, "the refused ballot is not adopted");
    // A ballot below the durable promise is refused after the anonymous lease
    // too (counter 0 of another node: below every real ballot).
    c.run_for(TIMEOUT);
    let x = c.ids().iter().copied().find(|&i| i != f).expect("another node");
    let since = c.sent().len();
    inject(
        &mut c,
        x,
        f,
        PaxosMessage::Prepare {
            ballot: Term(x.0),
            attempt: 8,
            handover: None,
            freshness: tenure_core::Freshness::BOOTSTRAP,
        },
    );
    let answer = paxos_sent(&c, since, f, x);
    assert!(
        matches!(answer[..], [PaxosMessage::PrepareNack { promised, .. }] if promised >= promised_term),
        "{answer:?}"
    );
}

// ---- Leader lease, stickiness, stale leaders ----

#[test]
fn follower_in_lease_refuses_a_high_prepare_without_adopting_it() {
    let (mut c, leader) = elected(3);
    let f = c.ids().iter().copied().find(|&i| i != leader).expect("a follower");
    let other = c.ids().iter().copied().find(|&i| i != leader && i != f).expect("another");
    let before = c.term(f);
    let ballot = Term((before.0 / BALLOT_NODES + 5) * BALLOT_NODES + other.0);
    let since = c.sent().len();
    inject(
        &mut c,
        other,
        f,
        PaxosMessage::Prepare {
            ballot,
            attempt: 1,
            handover: None,
            freshness: tenure_core::Freshness::BOOTSTRAP,
        },
    );
    let answer = paxos_sent(&c, since, f, other);
    match &answer[..] {
        [PaxosMessage::PrepareNack { busy_ms: Some(ms), promised, .. }] => {
            assert!(
                *ms > 0 && *ms <= follower_lease(&Setup::new(3).config(f)).as_millis() as u64 + 1
            );
            assert_eq!(*promised, before);
        }
        other => panic!("expected a busy refusal, got {other:?}"),
    }
    assert_eq!(c.term(f), before, "sticky: the disruptive ballot is not promised");
    assert_eq!(c.status(f).leader, Some(leader));
    // Nor is an Accept of it.
    let since = c.sent().len();
    inject(
        &mut c,
        other,
        f,
        PaxosMessage::Accept { ballot, slot: 99, freshness: tenure_core::Freshness::BOOTSTRAP },
    );
    assert!(matches!(paxos_sent(&c, since, f, other)[..], [PaxosMessage::AcceptNack { .. }]));
    assert_eq!(c.term(f), before);
}

#[test]
fn stale_leader_commit_is_refused_and_the_stale_leader_learns_the_promise() {
    let (mut c, leader) = elected(3);
    let f = c.ids().iter().copied().find(|&i| i != leader).expect("a follower");
    let ballot = c.term(leader);
    // A ballot of counter 0 from some node other than `f`: below any real one.
    let x = c.ids().iter().copied().find(|&i| i != f).expect("another node");
    let stale = Term(x.0);
    assert!(stale < ballot && proposer(stale) == x);
    let since = c.sent().len();
    inject(
        &mut c,
        proposer(stale),
        f,
        PaxosMessage::Commit { ballot: stale, slot: 1, heartbeat: 50, sent_at_nanos: 1 },
    );
    let answer = paxos_sent(&c, since, f, proposer(stale));
    assert!(
        matches!(answer[..], [PaxosMessage::CommitAck { ok: false, promised, .. }] if promised == ballot),
        "{answer:?}"
    );
    assert_eq!(c.status(f).leader, Some(leader), "the stale Commit changed nothing");
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
    let f = c.ids().iter().copied().find(|&i| i != leader).expect("a follower");
    let other = c.ids().iter().copied().find(|&i| i != leader && i != f).expect("another");
    let ballot = c.term(leader);
    // `f` promised a candidacy of `other` that could not win (forced here).
    let higher = Term((ballot.0 / BALLOT_NODES + 3) * BALLOT_NODES + other.0);
    inject(
        &mut c,
        f,
        leader,
        PaxosMessage::CommitAck { ballot, ok: false, promised: higher, echo_sent_at_nanos: 1 },
    );
    assert_eq!(c.role(leader), Role::Candidate, "re-prepares at once");
    c.run_for(HEARTBEAT);
    assert_eq!(c.leader(), leader);
    assert!(c.term(leader) > higher);
    assert_eq!(c.leader_history().iter().filter(|r| r.node != leader).count(), 0);
}

// ---- Transfer and stop ----

#[test]
fn a_stale_resign_does_not_let_its_successor_override_a_newer_lease() {
    // Leader of ballot `b` resigned naming `s`; by the time the Resign
    // arrives, another leader holds the acceptors' leases: the handover must
    // not override those.
    let (mut c, leader) = elected(3);
    let f = c.ids().iter().copied().find(|&i| i != leader).expect("a follower");
    let other = c.ids().iter().copied().find(|&i| i != leader && i != f).expect("another");
    let current = c.term(leader);
    let stale_handover = Term(current.0 - BALLOT_NODES);
    let ballot = Term((current.0 / BALLOT_NODES + 1) * BALLOT_NODES + other.0);
    let since = c.sent().len();
    inject(
        &mut c,
        other,
        f,
        PaxosMessage::Prepare {
            ballot,
            attempt: 1,
            handover: Some(stale_handover),
            freshness: tenure_core::Freshness::BOOTSTRAP,
        },
    );
    assert!(matches!(
        paxos_sent(&c, since, f, other)[..],
        [PaxosMessage::PrepareNack { busy_ms: Some(_), .. }]
    ));
    // A handover naming the current leadership that its leader never
    // announced to this acceptor does not pass either (a forged transfer).
    let since = c.sent().len();
    inject(
        &mut c,
        other,
        f,
        PaxosMessage::Prepare {
            ballot,
            attempt: 2,
            handover: Some(current),
            freshness: tenure_core::Freshness::BOOTSTRAP,
        },
    );
    assert!(matches!(
        paxos_sent(&c, since, f, other)[..],
        [PaxosMessage::PrepareNack { busy_ms: Some(_), .. }]
    ));
    // Once the leader resigns naming `other`, its Prepare passes.
    let resign = PaxosMessage::Resign { ballot: current, successor: Some(other) };
    inject(&mut c, leader, f, resign);
    let since = c.sent().len();
    inject(
        &mut c,
        other,
        f,
        PaxosMessage::Prepare {
            ballot,
            attempt: 3,
            handover: Some(current),
            freshness: tenure_core::Freshness::BOOTSTRAP,
        },
    );
    assert!(matches!(paxos_sent(&c, since, f, other)[..], [PaxosMessage::PrepareAck { .. }]));
}

// ---- TRex: low-ball polling and evidence ----

#[test]
fn a_low_ball_poll_changes_no_durable_state_anywhere() {
    let (mut c, leader) = elected(3);
    let f = c.ids().iter().copied().find(|&i| i != leader).expect("a follower");
    let durable: Vec<HardState> = c.ids().iter().map(|&i| c.durable(i)).collect();
    let since = c.sent().len();
    inject(
        &mut c,
        f,
        leader,
        PaxosMessage::Prepare {
            ballot: LOW_BALL,
            attempt: 1,
            handover: None,
            freshness: tenure_core::Freshness::BOOTSTRAP,
        },
    );
    let other = c.ids().iter().copied().find(|&i| i != leader && i != f).expect("another");
    inject(
        &mut c,
        f,
        other,
        PaxosMessage::Prepare {
            ballot: LOW_BALL,
            attempt: 1,
            handover: None,
            freshness: tenure_core::Freshness::BOOTSTRAP,
        },
    );
    let now: Vec<HardState> = c.ids().iter().map(|&i| c.durable(i)).collect();
    assert_eq!(now, durable);
    for to in [leader, other] {
        let answer = paxos_sent(&c, since, to, f);
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
fn a_poller_with_an_older_log_is_answered_busy_and_holds_no_one() {
    // Node 2 holds an entry of token 3 in configuration 3@2; node 1 polls
    // with a log that ends at token 2 (it stands only to commit its own
    // removal, say). Node 2 would refuse its Prepare as stale, so it answers
    // the poll busy for an election timeout and takes no hold for it: node
    // 3, as fresh as node 2, finds it free at once (membership seed 2524 of
    // `--workload elect`: the stale poller won polls on such answers and
    // held the voter the freshest one needed, round after round).
    let (mut e, start) = lone(3);
    let config = tenure_core::ConfigId { token: tenure_core::FencingToken(3), index: 2 };
    let fresh = tenure_core::Freshness { last_token: tenure_core::FencingToken(3), config };
    let stale = tenure_core::Freshness { last_token: tenure_core::FencingToken(2), config };
    e.handle_electorate(
        start,
        tenure_core::Electorate {
            id: config,
            last_token: tenure_core::FencingToken(3),
            voters: vec![n(1), n(2), n(3)],
            learners: vec![],
            departing: vec![],
            stands: true,
            member: true,
        },
    );
    let _ = e.take_output();
    // Past the anonymous lease a fresh node starts with.
    let now = start + TIMEOUT * 2;
    let poll = |freshness| {
        Message::Paxos(PaxosMessage::Prepare {
            ballot: LOW_BALL,
            attempt: 1,
            handover: None,
            freshness,
        })
    };
    let busy = |out: tenure_core::Output, to: NodeId| {
        out.messages.iter().find_map(|(t, m)| match m {
            Message::Paxos(PaxosMessage::PrepareNack { busy_ms, .. }) if *t == to => Some(*busy_ms),
            _ => None,
        })
    };
    e.handle_message(now, n(1), poll(stale));
    let ms = busy(e.take_output(), n(1)).expect("node 2 answered node 1");
    assert_eq!(ms, Some(TIMEOUT.as_millis() as u64), "a stale poller is told to wait a timeout");
    e.handle_message(now, n(3), poll(fresh));
    assert_eq!(busy(e.take_output(), n(3)), Some(None), "no hold for the stale poller");
    // Node 2 now holds itself for node 3; node 1 is refused still.
    e.handle_message(now, n(1), poll(stale));
    assert!(busy(e.take_output(), n(1)).expect("answered").is_some());
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
    let hb = |counter| Some(Lsn { term: Term(BALLOT_NODES + 1), counter });
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
fn simultaneous_polls_resolve_to_one_candidacy() {
    // Both survivors of three time out at the same instant.
    let (mut c, a) = elected(3);
    c.crash(a);
    let survivors: Vec<NodeId> = c.ids().iter().copied().filter(|&i| i != a).collect();
    c.run_for(HEARTBEAT);
    // Both stall past their deadlines and resume together: both give the
    // dead leader the stall grace, which ends for both at the same instant.
    let late = survivors.iter().map(|&i| c.timer(i).expect("armed")).max().expect("two");
    let resumed = late + HEARTBEAT + Duration::from_millis(1);
    let at = resumed + HEARTBEAT * tenure_core::STALL_GRACE_HEARTBEATS;
    for (until, role) in [(resumed, Role::Follower), (at, Role::PreCandidate)] {
        for &id in &survivors {
            c.pause(id);
        }
        c.run_until(until);
        for &id in &survivors {
            c.resume(id);
        }
        for &id in &survivors {
            c.timeout(id);
            assert_eq!(c.role(id), role, "at {until:?}");
            if role == Role::Follower {
                assert_eq!(c.timer(id), Some(at), "the grace ends at the same instant for both");
            }
        }
    }
    let before = c.elections();
    let (new, took) = c.run_until_leader_other_than(Some(a), TIMEOUT * 3);
    assert_eq!(new, survivors[0], "the lower-ranked poller wins");
    // Without yielding, both would refuse each other and retry after the poll window.
    assert!(took < Setup::new(3).config(a).round_trip, "resolved at once, took {took:?}");
    assert_eq!(c.elections(), before + 1, "the other yielded: one high Prepare");
}

#[test]
fn config_validation_names_the_values() {
    let mut cfg: Config = Setup::new(3).config(n(1));
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
    let mut big = Setup::new(15).config(n(1));
    assert_eq!(big.validate_for(ProtocolKind::Paxos), Ok(()));
    big.voters.push(n(16));
    assert!(tenure_core::paxos::validate(&big).is_err(), "ranks must fit in a ballot");
}

/// Found by the simulator (`spy` seed 2183 of paxos, 7 nodes): a late death
/// notice about the leader reached the survivors while one of them, not the
/// best-ranked, was polling on its timeout. The best-ranked one stood on its
/// notice at once, the poller prepared a higher ballot on its poll's answers,
/// and the two candidacies failed each other (a duel, past the failover
/// bound). A poller that gets the notice now drops its poll and leaves the
/// succession to the rank order: one candidacy.
#[test]
fn a_poller_told_of_the_leaders_death_leaves_the_succession_to_the_rank_order() {
    let mut checked = 0;
    for seed in 0..30 {
        let mut c = Setup::new(5).seed(seed).elector(ProtocolKind::Paxos);
        c.run_for(TIMEOUT * 3);
        let old = c.leader();
        c.crash(old);
        let survivors: Vec<NodeId> = c.ids().iter().copied().filter(|&id| id != old).collect();
        let deadline = c.now() + TIMEOUT * 4;
        let poller = loop {
            c.run_for(Duration::from_millis(1));
            if let Some(&p) = survivors.iter().find(|&&s| c.role(s) == Role::PreCandidate) {
                break p;
            }
            assert!(c.now() < deadline, "seed {seed}: nobody polled");
        };
        if poller == survivors[0] {
            continue;
        }
        checked += 1;
        let rounds = c.elections();
        c.notify_dead_all(old);
        assert_eq!(c.role(poller), Role::Follower, "seed {seed}: the poll is dropped");
        let (new, took) = c.run_until_leader_other_than(Some(old), TIMEOUT * 4);
        assert_eq!(new, survivors[0], "seed {seed}");
        assert_eq!(c.elections() - rounds, 1, "seed {seed}: one candidacy, no duel");
        assert!(took < HEARTBEAT / 10, "seed {seed}: failover took {took:?}");
    }
    assert!(checked >= 10, "only {checked} seeds had a poller other than the best-ranked survivor");
}
