//! Interaction tests in the spirit of etcd's `prevote_checkquorum` data-driven
//! tests: each one is a short story about PreVote, CheckQuorum, leases,
//! restarts and transfers, with the outcome asserted.

mod util;

use std::time::Duration;
use tenure_core::{HardState, Message, Protocol, Role, Term, TransferError};
use util::*;

fn elected(size: u64) -> (Cluster, tenure_core::NodeId) {
    let mut c = Cluster::new(size);
    c.run_for(TIMEOUT * 2);
    let l = c.leader();
    (c, l)
}

#[test]
fn cold_start_elects_the_first_voter_in_one_round() {
    let (c, leader) = elected(3);
    assert_eq!(leader, n(1), "the earliest voter stands first");
    assert_eq!(c.elections(), 1, "one election round, no split vote");
    for id in c.ids.clone() {
        assert_eq!(c.term(id), Term(1));
        assert_eq!(c.node(id).status().leader, Some(n(1)));
    }
}

#[test]
fn isolated_follower_does_not_inflate_its_term_or_disturb_on_heal() {
    // Seed 000's non-sticky leader: B isolated, then healed.
    let (mut c, leader) = elected(4);
    let b = n(2);
    c.isolate(b);
    c.run_for(TIMEOUT * 10);
    assert_eq!(c.term(b), Term(1), "pre-vote keeps the isolated node's term");
    assert!(matches!(c.role(b), Role::PreCandidate | Role::Follower));
    assert!(c.node(b).counters().pre_votes_started > 1, "it keeps polling");
    assert_eq!(c.node(b).counters().elections_started, 0, "but never campaigns");
    c.heal();
    c.run_for(TIMEOUT * 3);
    assert_eq!(c.leader(), leader);
    assert_eq!(c.leader_history().len(), 1, "no leader change");
    assert_eq!(c.node(b).status().leader, Some(leader));
}

#[test]
fn cut_link_between_leader_and_follower_causes_no_ping_pong() {
    // Seed 000's leader ping-pong: only the A-B link is cut.
    let (mut c, a) = elected(4);
    let b = n(2);
    c.cut_link(a, b);
    c.run_for(TIMEOUT * 10);
    assert_eq!(c.leader(), a);
    for id in c.ids.clone() {
        assert_eq!(c.term(id), Term(1), "no term inflation on {id:?}");
    }
    assert_eq!(c.leader_history().len(), 1);
}

#[test]
fn follower_in_lease_refuses_pre_vote_and_reports_remaining_lease() {
    let (mut c, leader) = elected(3);
    let follower = n(3);
    c.run_for(HEARTBEAT / 2);
    let before = c.sent.len();
    c.inject(n(2), follower, Message::PreVote { term: Term(2) });
    let reply = c.sent[before..].iter().find(|(_, from, to, _)| *from == follower && *to == n(2));
    match reply {
        Some((
            _,
            _,
            _,
            Message::PreVoteResponse { granted: false, lease_remaining_ms: Some(ms), .. },
        )) => {
            assert!(*ms > 0 && *ms <= TIMEOUT.as_millis() as u64);
        }
        other => panic!("expected a refusal with lease, got {other:?}"),
    }
    assert_eq!(c.node(follower).status().leader, Some(leader));
}

#[test]
fn vote_request_in_lease_is_ignored_without_adopting_the_term() {
    let (mut c, leader) = elected(3);
    let follower = n(3);
    c.inject(n(2), follower, Message::Vote { term: Term(5), transfer: false });
    assert_eq!(c.term(follower), Term(1), "sticky: the disruptive term is not adopted");
    assert_eq!(c.node(follower).status().voted_for, Some(leader));
}

#[test]
fn leader_that_loses_its_quorum_steps_down_within_its_lease() {
    let (mut c, leader) = elected(3);
    c.isolate(leader);
    let cut_at = c.now;
    let mut stepped_down_after = None;
    for _ in 0..2000 {
        c.run_for(Duration::from_millis(1));
        if !c.node(leader).is_leader(c.now) {
            stepped_down_after = Some(c.now.saturating_since(cut_at));
            break;
        }
    }
    let after = stepped_down_after.expect("the leader steps down");
    assert!(after <= TIMEOUT, "stepped down after {after:?}");
    c.run_for(TIMEOUT);
    assert_ne!(c.role(leader), Role::Leader);
    assert!(!c.node(leader).is_leader(c.now));
}

#[test]
fn no_overlap_between_old_leader_lease_and_new_leader() {
    // The old leader must stop leading before the majority elects another.
    let (mut c, old) = elected(5);
    c.isolate(old);
    let (new, _) = c.run_until_leader_other_than(Some(old), TIMEOUT * 4);
    assert_ne!(new, old);
    assert!(!c.node(old).is_leader(c.now), "old leader still believes it leads");
    let history = c.leader_history();
    let new_at = c
        .events
        .iter()
        .find(|(_, id, e)| {
            *id == new && matches!(e, tenure_core::Event::RoleChanged { role: Role::Leader, .. })
        })
        .map(|(t, _, _)| *t)
        .expect("new leader event");
    let old_down = c
        .events
        .iter()
        .find(|(_, id, e)| {
            *id == old && matches!(e, tenure_core::Event::RoleChanged { role: Role::Follower, .. })
        })
        .map(|(t, _, _)| *t)
        .expect("old leader stepped down");
    assert!(
        old_down < new_at,
        "old stepped down at {old_down:?}, new elected at {new_at:?}: {history:?}"
    );
}

#[test]
fn leader_crash_fails_over_in_one_round_near_the_floor() {
    for size in [3, 5, 7, 9] {
        let (mut c, old) = elected(size);
        let rounds_before = c.elections();
        c.run_for(HEARTBEAT / 3);
        c.crash(old);
        let (new, took) = c.run_until_leader_other_than(Some(old), TIMEOUT * 3);
        assert_ne!(new, old);
        assert_eq!(c.elections() - rounds_before, 1, "{size} nodes: one round");
        // Floor: the timeout minus the time since the last heartbeat, plus two round trips.
        assert!(took <= TIMEOUT + LATENCY * 8, "{size} nodes: failover took {took:?}");
        assert_eq!(new, if old == n(1) { n(2) } else { n(1) }, "the earliest survivor leads");
    }
}

#[test]
fn higher_term_node_does_not_get_stuck_and_leader_reasserts() {
    // etcd #8243: a node with a higher term rejoins a cluster whose leader has a
    // lower term. The "invalid heartbeat" reply tells the leader, which still
    // holds a quorum and re-establishes itself at a higher term.
    let (mut c, leader) = elected(3);
    let x = n(3);
    c.crash(x);
    c.durable.insert(x, HardState { term: Term(7), voted_for: None });
    c.restart(x);
    c.run_for(TIMEOUT * 3);
    assert_eq!(c.leader(), leader, "same leader, no flapping");
    let t = c.term(leader);
    assert!(t > Term(7), "leader moved past the higher term, now {t:?}");
    for id in c.ids.clone() {
        assert_eq!(c.term(id), t);
        assert_eq!(c.node(id).status().leader, Some(leader));
    }
}

/// A cluster whose nodes cannot hear each other, past their start-up lease, so
/// that injected messages are the only thing that happens.
fn quiet(size: u64) -> Cluster {
    let mut c = Cluster::new(size);
    for id in c.ids.clone() {
        c.isolate(id);
    }
    c.run_for(TIMEOUT + HEARTBEAT);
    c
}

#[test]
fn restart_keeps_the_vote_so_no_double_vote() {
    let mut c = quiet(3);
    let voter = n(3);
    c.inject(n(1), voter, Message::Vote { term: Term(1), transfer: false });
    assert_eq!(c.durable[&voter], HardState { term: Term(1), voted_for: Some(n(1)) });
    c.crash(voter);
    c.restart(voter);
    c.run_for(TIMEOUT + HEARTBEAT);
    let before = c.sent.len();
    c.inject(n(2), voter, Message::Vote { term: Term(1), transfer: true });
    let granted = c.sent[before..].iter().any(|(_, from, _, m)| {
        *from == voter && matches!(m, Message::VoteResponse { granted: true, .. })
    });
    assert!(!granted, "voted twice in term 1 after a restart");
    assert_eq!(c.node(voter).status().voted_for, Some(n(1)));
}

#[test]
fn vote_is_handed_out_for_persistence_with_the_response() {
    let mut c = quiet(3);
    let voter = n(2);
    let now = c.now;
    let node = c.node_mut(voter);
    node.handle_message(now, n(1), Message::Vote { term: Term(1), transfer: false });
    let out = node.take_output();
    assert_eq!(out.persist, Some(HardState { term: Term(1), voted_for: Some(n(1)) }));
    assert!(out
        .messages
        .iter()
        .any(|(_, m)| matches!(m, Message::VoteResponse { granted: true, .. })));
}

#[test]
fn node_that_cannot_persist_does_not_vote() {
    let mut c = Cluster::new(3);
    let voter = n(2);
    let now = c.now;
    c.node_mut(voter).handle_persist_failed(now);
    let before = c.sent.len();
    c.inject(n(1), voter, Message::Vote { term: Term(1), transfer: false });
    assert!(c.sent[before..]
        .iter()
        .all(|(_, _, _, m)| !matches!(m, Message::VoteResponse { granted: true, .. })));
    assert!(c.node(voter).status().storage_failed);
    // Nor does it stand for election.
    c.run_for(TIMEOUT * 3);
    assert_ne!(c.leaders(), vec![voter]);
    assert_eq!(c.node(voter).counters().elections_started, 0);
}

#[test]
fn stale_leader_heartbeat_gets_an_invalid_heartbeat_reply() {
    let (mut c, leader) = elected(3);
    let f = n(3);
    let before = c.sent.len();
    c.inject(leader, f, Message::Heartbeat { term: Term(0), counter: 99, sent_at_nanos: 5 });
    let reply =
        c.sent[before..].iter().find(|(_, from, _, _)| *from == f).map(|(_, _, _, m)| m.clone());
    assert_eq!(
        reply,
        Some(Message::HeartbeatResponse { term: Term(1), ok: false, echo_sent_at_nanos: 5 })
    );
}

#[test]
fn duplicated_or_reordered_heartbeats_are_dropped_by_lsn() {
    let (mut c, leader) = elected(3);
    let f = n(3);
    c.run_for(HEARTBEAT * 3);
    let lsn = c.node(f).status().lsn.expect("follower saw heartbeats");
    let ignored = c.node(f).counters().messages_ignored;
    let before = c.sent.len();
    c.inject(
        leader,
        f,
        Message::Heartbeat { term: lsn.term, counter: lsn.counter - 1, sent_at_nanos: 1 },
    );
    assert_eq!(c.node(f).counters().messages_ignored, ignored + 1);
    assert!(c.sent[before..].is_empty(), "no ack for a stale LSN");
    assert_eq!(c.node(f).status().lsn, Some(lsn));
}

#[test]
fn fencing_tokens_increase_across_leaders() {
    let (mut c, first) = elected(3);
    let t1 = c.node(first).status().fencing_token.expect("token");
    c.crash(first);
    let (second, _) = c.run_until_leader_other_than(Some(first), TIMEOUT * 3);
    let t2 = c.node(second).status().fencing_token.expect("token");
    assert!(t2 > t1);
    c.restart(first);
    c.run_for(TIMEOUT * 2);
    assert_eq!(c.node(first).status().fencing_token, Some(t2), "rejoined node sees the new token");
}

#[test]
fn transfer_hands_leadership_to_the_named_node_without_a_timeout() {
    let (mut c, leader) = elected(5);
    let target = n(4);
    let now = c.now;
    c.node_mut(leader).transfer_leadership(now, target).expect("transfer accepted");
    c.drain(leader);
    assert!(!c.node(leader).is_leader(c.now), "the old leader steps down at once");
    let (new, took) = c.run_until_leader_other_than(Some(leader), TIMEOUT);
    assert_eq!(new, target);
    assert!(took < HEARTBEAT, "transfer took {took:?}");
    c.run_for(TIMEOUT * 2);
    assert_eq!(c.leader(), target, "and it sticks");
}

#[test]
fn transfer_is_refused_with_clear_reasons() {
    let (mut c, leader) = elected(3);
    let now = c.now;
    let follower = n(2);
    assert_eq!(
        c.node_mut(follower).transfer_leadership(now, n(3)),
        Err(TransferError::NotLeader { leader: Some(leader) })
    );
    assert_eq!(
        c.node_mut(leader).transfer_leadership(now, tenure_core::NodeId(42)),
        Err(TransferError::UnknownNode(tenure_core::NodeId(42)))
    );
    c.crash(n(3));
    c.run_for(TIMEOUT * 2);
    let now = c.now;
    assert_eq!(
        c.node_mut(leader).transfer_leadership(now, n(3)),
        Err(TransferError::TargetUnreachable(n(3)))
    );
    assert_eq!(c.leader(), leader, "refusals change nothing");
}

#[test]
fn graceful_shutdown_cedes_leadership_quickly() {
    let (mut c, leader) = elected(3);
    let now = c.now;
    c.node_mut(leader).shutdown(now);
    c.drain(leader);
    c.run_for(LATENCY * 2);
    c.crash(leader);
    let (new, took) = c.run_until_leader_other_than(Some(leader), TIMEOUT);
    assert_ne!(new, leader);
    assert!(took < HEARTBEAT, "handover took {took:?}");
}

#[test]
fn cession_falls_back_when_the_successor_is_dead() {
    let (mut c, leader) = elected(3);
    let now = c.now;
    c.node_mut(leader).transfer_leadership(now, n(2)).expect("accepted");
    c.crash(n(2));
    c.drain(leader);
    let (new, took) = c.run_until_leader_other_than(Some(n(2)), TIMEOUT * 3);
    assert!(new == n(1) || new == n(3));
    assert!(took < TIMEOUT * 2, "fallback took {took:?}");
}

#[test]
fn paused_leader_steps_down_before_acting_on_resume() {
    let (mut c, leader) = elected(3);
    // Freeze the leader: it gets no input while the others move on.
    c.crash(leader);
    let (new, _) = c.run_until_leader_other_than(Some(leader), TIMEOUT * 3);
    c.down.remove(&leader); // resume with its old in-memory state
    assert!(!c.node(leader).is_leader(c.now), "its lease ran out during the pause");
    let now = c.now;
    c.node_mut(leader).handle_timeout(now);
    c.drain(leader);
    // It was stalled, so it may try to renew its lease with fresh heartbeats,
    // but without a lease it does not lead; the others answer with their newer
    // term and it steps down.
    assert!(!c.node(leader).is_leader(now));
    c.run_for(HEARTBEAT * tenure_core::STALL_GRACE_HEARTBEATS);
    assert_eq!(c.role(leader), Role::Follower);
    c.run_for(TIMEOUT);
    assert_eq!(c.leader(), new);
}

#[test]
fn a_stall_of_the_whole_cluster_changes_no_leader() {
    // Every process stops longer than the election timeout at once (a paused
    // VM, a host-wide scheduling stall), then all resume together: every
    // timer fires late. Nobody heard anybody, so nobody should change
    // anything: followers give the leader a heartbeat's chance, and the
    // leader renews its lease instead of stepping down.
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
    // Resumed: the leader's lease ran out during the stall.
    assert!(c.leaders().is_empty());
    c.run_for(HEARTBEAT * 3);
    assert_eq!(c.leader(), leader, "the same leader leads again");
    c.run_for(TIMEOUT * 3);
    assert_eq!(c.leader(), leader);
    assert_eq!(c.term(leader), term, "no election happened");
    assert_eq!(c.leader_history().len(), history);
}

#[test]
fn pre_candidate_forgets_its_old_leader_so_elections_succeed() {
    // etcd #9586/#10355: followers remembering a dead leader must not block the election.
    let (mut c, leader) = elected(3);
    c.crash(leader);
    c.run_until_leader_other_than(Some(leader), TIMEOUT * 3);
    for id in c.ids.clone().into_iter().filter(|&i| i != leader) {
        assert_ne!(c.node(id).status().leader, Some(leader));
    }
}

#[test]
fn minority_partition_keeps_the_majority_leader() {
    let (mut c, leader) = elected(5);
    let minority = if leader == n(1) { [n(4), n(5)] } else { [n(1), n(2)] };
    for &m in &minority {
        c.isolate(m);
    }
    c.run_for(TIMEOUT * 5);
    assert_eq!(c.leader(), leader);
    c.heal();
    c.run_for(TIMEOUT * 3);
    assert_eq!(c.leader(), leader);
    assert_eq!(c.leader_history().len(), 1);
}

#[test]
fn single_node_cluster_leads_alone() {
    let mut c = Cluster::new(1);
    c.run_for(TIMEOUT * 3);
    assert_eq!(c.leader(), n(1));
    assert_eq!(c.elections(), 1);
}

#[test]
fn restarted_follower_keeps_the_lease_it_may_have_granted() {
    // Leader 1 relies on follower 2's acknowledgements; 3 cannot hear 1. If 2
    // crashed and restarted with no memory of its lease, 3 could be elected with
    // 2's vote while 1 still believes it leads.
    let (mut c, leader) = elected(3);
    assert_eq!(leader, n(1));
    c.cut_link(n(1), n(3));
    c.run_for(HEARTBEAT * 3);
    c.crash(n(2));
    c.restart(n(2));
    let before = c.sent.len();
    let t = c.term(n(3)).next();
    c.inject(n(3), n(2), Message::PreVote { term: t });
    c.inject(n(3), n(2), Message::Vote { term: t, transfer: false });
    let granted = c.sent[before..].iter().any(|(_, from, _, m)| {
        *from == n(2)
            && matches!(
                m,
                Message::PreVoteResponse { granted: true, .. }
                    | Message::VoteResponse { granted: true, .. }
            )
    });
    assert!(!granted, "the restarted node helped elect 3 while 1 still leads");
    assert!(c.node(n(1)).is_leader(c.now));
    assert_eq!(c.term(n(2)), Term(1), "and it did not adopt the disruptive term");
}

#[test]
fn candidate_resumed_after_its_round_deadline_ignores_late_votes() {
    let mut c = quiet(3);
    let cand = n(1);
    let t = c.term(cand).next();
    c.inject(
        n(2),
        cand,
        Message::PreVoteResponse {
            term: c.term(n(2)),
            proposed: t,
            granted: true,
            lease_remaining_ms: None,
        },
    );
    assert_eq!(c.role(cand), Role::Candidate);
    // Freeze the candidate past its round deadline.
    c.crash(cand);
    c.run_for(TIMEOUT * 2);
    c.down.remove(&cand);
    c.inject(n(2), cand, Message::VoteResponse { term: t, granted: true });
    assert_ne!(c.role(cand), Role::Leader);
    assert!(
        c.leader_history().is_empty(),
        "declared leadership on a stale round: {:?}",
        c.leader_history()
    );
}

#[test]
fn leader_whose_lease_lapses_just_before_late_acks_is_re_elected_at_once() {
    let (mut c, leader) = elected(3);
    // Align on a heartbeat: wait for the next one and its acknowledgements.
    let lsn = c.node(leader).status().lsn;
    while c.node(leader).status().lsn == lsn {
        c.run_for(Duration::from_millis(1));
    }
    c.run_for(LATENCY * 3);
    // Cut it off for longer than its lease (0.905 T after that heartbeat) but
    // heal while the followers' lease on it (T) still runs.
    c.isolate(leader);
    c.run_for(TIMEOUT * 92 / 100);
    assert!(!c.node(leader).is_leader(c.now), "the lease has lapsed");
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

#[test]
fn pre_candidate_asks_again_when_a_refusing_lease_ends() {
    // 3 nodes, the leader is dead: the pre-candidate's only possible second vote
    // is a follower whose lease on the dead leader ends a few ms later. The
    // pre-candidate must not wait for the dead leader's answer until its round
    // deadline.
    let mut c = quiet(3);
    let (cand, other) = (n(2), n(3));
    c.crash(n(1));
    c.run_for(TIMEOUT);
    // Make `cand` a pre-candidate now.
    let now = c.now;
    c.node_mut(cand).handle_timeout(now);
    c.drain(cand);
    assert_eq!(c.role(cand), Role::PreCandidate);
    let t = c.term(cand).next();
    c.inject(
        other,
        cand,
        Message::PreVoteResponse {
            term: c.term(other),
            proposed: t,
            granted: false,
            lease_remaining_ms: Some(20),
        },
    );
    assert_eq!(c.role(cand), Role::PreCandidate, "a lease that ends soon does not fail the round");
    let before = c.sent.len();
    c.heal();
    c.cut_link(n(1), cand);
    c.cut_link(n(1), other);
    c.run_for(Duration::from_millis(30));
    let reasked = c.sent[before..].iter().any(|(_, from, to, m)| {
        *from == cand && *to == other && matches!(m, Message::PreVote { .. })
    });
    assert!(reasked, "asked the refusing voter again when its lease ended");
    c.run_for(Duration::from_millis(20));
    assert_eq!(c.leader(), cand, "and won without waiting for the round deadline");
}

#[test]
fn single_node_never_announces_leadership_in_an_unsaved_term() {
    let mut c = Cluster::new(1);
    let me = n(1);
    let at = c.node(me).poll_timeout();
    c.now = at;
    c.node_mut(me).handle_timeout(at);
    let out = c.node_mut(me).take_output();
    assert_eq!(out.persist.map(|h| h.term), Some(Term(1)));
    assert!(!out
        .events
        .iter()
        .any(|e| matches!(e, tenure_core::Event::RoleChanged { role: Role::Leader, .. })));
    // The write fails: the candidacy is cancelled, nothing was announced.
    c.node_mut(me).handle_persist_failed(at);
    let next = c.node(me).poll_timeout();
    c.node_mut(me).handle_timeout(next.max(at));
    let out = c.node_mut(me).take_output();
    assert!(!out
        .events
        .iter()
        .any(|e| matches!(e, tenure_core::Event::RoleChanged { role: Role::Leader, .. })));
    assert!(!c.node(me).is_leader(next.max(at)));
    // Once storage works, it leads.
    c.node_mut(me).handle_persist_recovered(at);
    c.run_for(TIMEOUT * 3);
    assert_eq!(c.leader(), me);
}
