//! The router's decisions, one input at a time.

use super::*;

const ME: NodeId = NodeId(2);
const LEADER: NodeId = NodeId(1);

fn at(ms: u64) -> Instant {
    Instant::from_nanos(ms * 1_000_000)
}

fn token(n: u64) -> FencingToken {
    FencingToken(n)
}

fn router() -> Router {
    let mut cfg = RouterConfig::new(ME, Duration::from_millis(100), Duration::from_secs(1));
    cfg.max_waiting = 4;
    Router::new(cfg)
}

fn committed(index: u64) -> Result<(Position, Vec<u8>), ForwardRefusal> {
    Ok((Position { token: token(1), index }, b"done".to_vec()))
}

#[test]
fn a_follower_forwards_a_write_and_answers_with_the_leaders_answer() {
    let mut r = router();
    r.set_view(Some(LEADER), Some(token(1)));
    assert_eq!(r.route(), Route::Leader(LEADER));
    r.call(at(0), 7, Call::Propose(b"put".to_vec()));
    let out = r.take_output();
    assert_eq!(out.forwarded, 1);
    let [(to, Forward::Propose { id, command })] = out.forwards.as_slice() else {
        panic!("{out:?}")
    };
    assert_eq!((*to, command.as_slice()), (LEADER, &b"put"[..]));
    assert!(out.answers.is_empty(), "no answer before the leader's");
    r.forward_in(at(5), LEADER, Forward::Proposed { id: *id, result: committed(9) });
    // Not before this node applied it: the caller's next read here sees it.
    r.settle(at(5), 8);
    assert!(r.take_output().answers.is_empty(), "answered before it was applied here");
    r.settle(at(6), 9);
    let out = r.take_output();
    let [(7, Answer::Write(Ok(c)))] = out.answers.as_slice() else { panic!("{out:?}") };
    assert_eq!((c.position.index, c.result.as_slice()), (9, &b"done"[..]));
    assert_eq!(r.held(), 0);
}

#[test]
fn a_committed_write_not_applied_in_time_is_still_answered_done() {
    let mut r = router();
    r.set_view(Some(LEADER), Some(token(1)));
    r.call(at(0), 7, Call::Propose(b"put".to_vec()));
    let Forward::Propose { id, .. } = r.take_output().forwards[0].1.clone() else { panic!() };
    r.forward_in(at(5), LEADER, Forward::Proposed { id, result: committed(9) });
    r.expire(at(60_000));
    let out = r.take_output();
    let [(7, Answer::Write(Ok(c)))] = out.answers.as_slice() else { panic!("{out:?}") };
    assert_eq!(c.position.index, 9, "it committed: done, whatever this node applied");
    assert_eq!(r.held(), 0);
}

#[test]
fn an_answer_from_another_node_or_of_another_kind_is_dropped() {
    let mut r = router();
    r.set_view(Some(LEADER), Some(token(1)));
    r.call(at(0), 7, Call::Propose(b"put".to_vec()));
    let Forward::Propose { id, .. } = r.take_output().forwards[0].1.clone() else { panic!() };
    r.forward_in(at(1), NodeId(3), Forward::Proposed { id, result: committed(9) });
    r.forward_in(at(1), LEADER, Forward::ReadIndexReply { id, result: Ok(3) });
    let out = r.take_output();
    assert_eq!((out.dropped, out.answers.len()), (2, 0));
    assert_eq!(r.held(), 1);
}

#[test]
fn a_write_whose_leader_lost_office_ends_unknown_and_a_read_is_asked_again() {
    let mut r = router();
    r.set_view(Some(LEADER), Some(token(1)));
    r.call(at(0), 7, Call::Propose(b"put".to_vec()));
    r.call(at(0), 8, Call::Read);
    r.take_output();
    r.set_view(Some(NodeId(3)), Some(token(2)));
    let out = r.take_output();
    assert_eq!(out.unknown, 1);
    assert!(matches!(out.answers.as_slice(), [(7, Answer::Write(Err(WriteError::Unknown(_))))]));
    // The read waits for a leader again and goes to the new one.
    r.settle(at(1), 0);
    let out = r.take_output();
    assert!(matches!(out.forwards.as_slice(), [(NodeId(3), Forward::ReadIndex { .. })]), "{out:?}");
}

#[test]
fn a_write_a_leader_refuses_as_not_leader_waits_a_heartbeat_then_goes_again() {
    let mut r = router();
    r.set_view(Some(LEADER), Some(token(1)));
    r.call(at(0), 7, Call::Propose(b"put".to_vec()));
    let Forward::Propose { id, .. } = r.take_output().forwards[0].1.clone() else { panic!() };
    r.forward_in(at(10), LEADER, Forward::Proposed { id, result: Err(ForwardRefusal::NotLeader) });
    r.settle(at(50), 0);
    assert!(r.take_output().forwards.is_empty(), "not within the heartbeat");
    r.settle(at(110), 0);
    let out = r.take_output();
    assert!(matches!(out.forwards.as_slice(), [(LEADER, Forward::Propose { .. })]), "{out:?}");
}

#[test]
fn without_a_leader_requests_wait_then_fail_with_nothing_written() {
    let mut r = router();
    assert_eq!(r.route(), Route::Wait);
    r.call(at(0), 7, Call::Propose(b"put".to_vec()));
    r.call(at(0), 8, Call::Read);
    r.call(at(0), 9, Call::Ask(b"q".to_vec()));
    r.expire(at(2_999));
    assert!(r.take_output().answers.is_empty());
    r.expire(at(3_000));
    let out = r.take_output();
    let waited = Duration::from_secs(3);
    assert!(out.answers.contains(&(7, Answer::Write(Err(WriteError::NoLeader { waited })))));
    assert!(out.answers.contains(&(8, Answer::Read(Err(ReadFailure::NoLeader { waited })))));
    assert!(out.answers.contains(&(9, Answer::Ask(Err(AskError::NoLeader { waited })))));
    assert_eq!(r.held(), 0);
}

#[test]
fn beyond_its_bound_a_request_is_refused_as_busy() {
    let mut r = router();
    for caller in 0..4 {
        r.call(at(0), caller, Call::Propose(vec![]));
    }
    r.call(at(0), 4, Call::Read);
    let out = r.take_output();
    assert_eq!(out.answers, vec![(4, Answer::Read(Err(ReadFailure::Busy)))]);
    // A follower's forward beyond the bound is sent back, not held.
    r.set_ready(Some(token(1)));
    r.forward_in(at(0), NodeId(3), Forward::Propose { id: 1, command: vec![] });
    let out = r.take_output();
    assert!(matches!(
        out.forwards.as_slice(),
        [(NodeId(3), Forward::Proposed { id: 1, result: Err(ForwardRefusal::NotLeader) })]
    ));
}

#[test]
fn the_ready_leader_batches_its_own_and_followers_writes_and_answers_at_commit() {
    let mut r = router();
    r.set_view(Some(ME), Some(token(1)));
    r.set_ready(Some(token(1)));
    r.call(at(0), 7, Call::Propose(b"a".to_vec()));
    r.forward_in(at(0), NodeId(3), Forward::Propose { id: 40, command: b"b".to_vec() });
    assert!(r.has_batch());
    let commands = r.take_batch(at(1), Some(token(1)));
    assert_eq!(commands, vec![b"a".to_vec(), b"b".to_vec()]);
    r.batch_proposed(at(1), vec![Ok(1), Ok(2)]);
    assert!(r.take_output().answers.is_empty(), "nothing before the commit");
    let done = |id, index| Completion::Proposal {
        id,
        result: Ok((Position { token: token(1), index }, b"ok".to_vec())),
    };
    r.complete(at(2), done(1, 5));
    r.complete(at(2), done(2, 6));
    let out = r.take_output();
    assert!(matches!(out.answers.as_slice(), [(7, Answer::Write(Ok(_)))]));
    assert!(matches!(
        out.forwards.as_slice(),
        [(NodeId(3), Forward::Proposed { id: 40, result: Ok(_) })]
    ));
}

#[test]
fn a_batch_the_replica_no_longer_leads_is_routed_again_and_bound_writes_refused() {
    let mut r = router();
    r.set_view(Some(ME), Some(token(1)));
    r.set_ready(Some(token(1)));
    r.call(at(0), 7, Call::Propose(b"a".to_vec()));
    r.call(at(0), 8, Call::ProposeAs(token(1), b"b".to_vec()));
    r.forward_in(at(0), NodeId(3), Forward::Propose { id: 40, command: b"c".to_vec() });
    // The replica stopped leading before the batch went in.
    r.set_view(Some(LEADER), Some(token(2)));
    assert!(r.take_batch(at(1), None).is_empty());
    let out = r.take_output();
    assert!(out.answers.contains(&(8, Answer::Write(Err(WriteError::NotLeader)))));
    assert!(out.forwards.iter().any(|(to, f)| *to == NodeId(3)
        && matches!(f, Forward::Proposed { id: 40, result: Err(ForwardRefusal::NotLeader) })));
    assert!(out
        .forwards
        .iter()
        .any(|(to, f)| *to == LEADER
            && matches!(f, Forward::Propose { command, .. } if command == b"a")));
}

#[test]
fn a_follower_serves_a_read_once_it_applied_the_leaders_index() {
    let mut r = router();
    r.set_view(Some(LEADER), Some(token(1)));
    r.call(at(0), 7, Call::Read);
    let Forward::ReadIndex { id } = r.take_output().forwards[0].1.clone() else { panic!() };
    r.forward_in(at(3), LEADER, Forward::ReadIndexReply { id, result: Ok(12) });
    r.settle(at(3), 11);
    assert!(r.take_output().answers.is_empty(), "not applied as far yet");
    r.settle(at(4), 12);
    assert_eq!(r.take_output().answers, vec![(7, Answer::Read(Ok(12)))]);
}

#[test]
fn the_leader_answers_a_followers_read_index_after_its_confirmation() {
    let mut r = router();
    r.set_view(Some(ME), Some(token(1)));
    r.set_ready(Some(token(1)));
    r.forward_in(at(0), NodeId(3), Forward::ReadIndex { id: 5 });
    let mut tickets = r.take_reads();
    assert_eq!(tickets.len(), 1);
    let ticket = tickets.pop().expect("one read");
    r.read_started(at(0), ticket, Ok(ReadStart::Pending(1)));
    assert!(r.take_output().read_replies.is_empty());
    r.complete(at(1), Completion::Read { id: 1, result: Ok(20) });
    assert_eq!(r.take_output().read_replies, vec![(NodeId(3), 5, 20)]);
}

#[test]
fn questions_are_delivered_on_the_ready_leader_and_forwarded_elsewhere() {
    let mut r = router();
    r.set_view(Some(ME), Some(token(3)));
    r.set_ready(Some(token(3)));
    r.call(at(0), 7, Call::Ask(b"q".to_vec()));
    r.forward_in(at(0), NodeId(3), Forward::Ask { id: 2, request: b"r".to_vec() });
    let out = r.take_output();
    assert_eq!(
        out.deliveries,
        vec![
            Delivery { request: b"q".to_vec(), token: token(3), from: AskFrom::Local(7) },
            Delivery { request: b"r".to_vec(), token: token(3), from: AskFrom::Peer(NodeId(3), 2) },
        ]
    );
    let mut f = router();
    f.set_view(Some(LEADER), Some(token(3)));
    f.call(at(0), 7, Call::Ask(b"q".to_vec()));
    assert!(matches!(f.take_output().forwards.as_slice(), [(LEADER, Forward::Ask { .. })]));
}

#[test]
fn a_rebuilding_log_routes_nothing_and_stop_answers_everyone() {
    let mut r = router();
    r.set_view(Some(LEADER), Some(token(1)));
    r.set_rebuilding(true);
    assert_eq!(r.route(), Route::Wait);
    r.call(at(0), 7, Call::Propose(b"a".to_vec()));
    assert!(r.take_output().forwards.is_empty());
    r.set_rebuilding(false);
    r.call(at(0), 8, Call::Propose(b"b".to_vec()));
    r.stop();
    let out = r.take_output();
    assert!(out.answers.contains(&(7, Answer::Write(Err(WriteError::Stopped)))));
    assert!(matches!(
        out.answers.iter().find(|(c, _)| *c == 8),
        Some((8, Answer::Write(Err(WriteError::Unknown(_)))))
    ));
    assert_eq!(r.held(), 0);
}
