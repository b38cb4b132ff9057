//! The replica's rules as stories: commit through a majority, failover with
//! synchronisation, divergent logs, catch-up by entries and by snapshot, reads,
//! and randomized runs with crashes, partitions, loss and leader changes.

use crate::util::*;
use std::time::Duration;
use tenure_core::FencingToken;
use tenure_replica::{Index, Position, ReadStart, ReplicaMessage};

fn cmd(i: u64) -> Vec<u8> {
    format!("c{i}").into_bytes()
}

/// Node 1 elected in `c`, node 3 crashed, then `entries` commands
/// proposed one every tenth of a heartbeat: the leader's token and its
/// latest snapshot (node 3 is behind it if the leader compacted).
fn compacted_past_n3(c: &mut Cluster, entries: u64) -> (FencingToken, Position) {
    let ids = c.ids.clone();
    let token = c.elect(n(1), &ids);
    c.run_for(HEARTBEAT * 3);
    c.crash(n(3));
    for i in 0..entries {
        c.propose(n(1), vec![cmd(i)]);
        c.run_for(HEARTBEAT / 10);
    }
    c.run_for(HEARTBEAT * 2);
    (token, c.replica(n(1)).status().snapshot)
}

/// A cluster whose node 1 leads token 1, told to everyone, and is ready.
fn led(size: u64) -> Cluster {
    let mut c = Cluster::new(size, 1);
    let ids = c.ids.clone();
    c.elect(n(1), &ids);
    c.run_for(HEARTBEAT * 3);
    assert_eq!(c.ready_leader(), Some(n(1)), "the leader synchronised and committed its no-op");
    c
}

#[test]
fn a_leader_commits_through_a_majority_and_everyone_applies_in_order() {
    for size in [1, 3, 5] {
        let mut c = led(size);
        for i in 0..50 {
            assert_eq!(c.propose(n(1), vec![cmd(i)]), 1);
        }
        c.run_for(HEARTBEAT * 5);
        c.check_converged();
        let applied = c.applied_by(n(1));
        assert_eq!(applied.len(), 50, "{size} nodes");
        for id in c.ids.clone() {
            assert_eq!(c.applied_by(id), applied, "{size} nodes: {id:?} applied the same");
        }
        assert!(c.proposals.values().all(|(_, f)| matches!(f, Fate::Committed(_))));
    }
}

#[test]
fn a_batch_is_one_write_and_one_message_per_follower() {
    let mut c = led(3);
    let before = c.nodes[&n(2)].disk.entries.len();
    assert_eq!(c.propose(n(1), (0..10).map(cmd).collect()), 10);
    assert_eq!(c.nodes[&n(1)].disk.entries.len(), before + 10, "one write on the leader");
    c.run_for(HEARTBEAT / 2);
    assert_eq!(c.nodes[&n(2)].disk.entries.len(), before + 10, "one message to each follower");
    // Followers learn the commit with the next round.
    c.run_for(HEARTBEAT);
    c.check_converged();
}

/// The leader's own write is counted only once it is reported durable; a
/// commit needs a majority of durable copies, with or without the leader's.
#[test]
fn a_leader_commits_on_durable_copies_with_or_without_its_own() {
    let mut c = led(3);
    c.slow.insert(n(1));
    assert_eq!(c.propose(n(1), vec![cmd(1)]), 1);
    c.run_for(HEARTBEAT / 2);
    assert!(
        c.proposals.values().all(|(_, f)| matches!(f, Fate::Committed(_))),
        "both followers' copies commit it while the leader's is unreported"
    );
    // With one follower cut off, the leader's unreported copy does not count.
    c.isolate(n(3));
    assert_eq!(c.propose(n(1), vec![cmd(2)]), 1);
    c.run_for(HEARTBEAT * 3);
    let pending = |c: &Cluster| c.proposals.values().filter(|(_, f)| *f == Fate::Pending).count();
    assert_eq!(pending(&c), 1, "one follower's copy is not a majority");
    c.report_writes(n(1));
    c.run_for(HEARTBEAT);
    assert_eq!(pending(&c), 0, "the leader's copy, once durable, makes the majority");
}

/// What a leader sends its followers leaves early, beside its own write,
/// once its leadership's promise is durable, and never overtakes a message
/// to the same peer that waits for a write: it builds on it. Here a new
/// leader's promise is still being written when both followers' promises
/// end the synchronisation: its no-op waits, and so does a heartbeat sent
/// once the promise (but not the no-op) is durable.
#[test]
fn an_early_append_never_overtakes_one_that_waits_for_a_write() {
    let mut c = Cluster::new(3, 1);
    let token = c.elect(n(1), &[n(2), n(3)]);
    let peers = |m: &[(tenure_core::NodeId, ReplicaMessage)]| {
        let mut to: Vec<_> = m.iter().map(|(t, _)| *t).collect();
        to.sort();
        to
    };
    let now = c.now;
    let r = c.nodes.get_mut(&n(1)).unwrap().replica.as_mut().unwrap();
    r.set_leadership(now, Some(n(1)), Some(token));
    let promise = r.take_output();
    assert!(!promise.write.is_empty(), "the promise is written");
    assert!(promise.early.is_empty(), "{promise:?}");
    assert_eq!(peers(&promise.messages), [n(2), n(3)], "asked to promise, after the write");
    // Both followers promise before the leader's own promise is durable.
    for from in [n(2), n(3)] {
        let reply =
            ReplicaMessage::SyncReply { token, last: Some(Position::ZERO), promised: token };
        r.handle_message(now, from, reply);
    }
    let noop = r.take_output();
    assert!(!noop.write.is_empty(), "the no-op is written: {noop:?}");
    assert!(noop.early.is_empty(), "nothing leaves before the promise is durable: {noop:?}");
    assert_eq!(peers(&noop.messages), [n(2), n(3)]);
    // The promise is durable, the no-op not yet: a heartbeat would build on
    // the no-op's append, which waits, so it waits too.
    r.handle_persisted(now, 1);
    let at = now + HEARTBEAT;
    r.handle_timeout(at);
    let beat = r.take_output();
    assert!(beat.early.is_empty(), "a heartbeat overtook a held append: {beat:?}");
    assert_eq!(peers(&beat.messages), [n(2), n(3)]);
    // Once every write is reported, heartbeats and new entries leave early.
    r.handle_persisted(at, r.unpersisted());
    let _ = r.take_output();
    let at = at + HEARTBEAT;
    r.handle_timeout(at);
    let beat = r.take_output();
    assert_eq!(peers(&beat.early), [n(2), n(3)], "{beat:?}");
    assert!(beat.messages.is_empty(), "{beat:?}");
}

/// The batches a follower's answer lets go leave beside the leader's write
/// too. Held behind it (under a steady load the leader's disk is always
/// busy), every batch to a follower waited for the leader's sync before
/// the follower's could begin: a write took three syncs, not two
/// (`tenure bench kv --sync-delays 8`: 2,737 writes/s, 3,705 early).
#[test]
fn the_batches_an_answer_lets_go_leave_beside_the_leaders_write() {
    let mut c = Cluster::with_config(3, 1, |cfg| cfg.max_append_entries = 1);
    let ids = c.ids.clone();
    let token = c.elect(n(1), &ids);
    c.run_for(HEARTBEAT * 3);
    let now = c.now;
    let r = c.nodes.get_mut(&n(1)).unwrap().replica.as_mut().unwrap();
    let last = r.status().last.index;
    r.propose(now, vec![cmd(1), cmd(2), cmd(3)]).into_iter().for_each(|p| assert!(p.is_ok()));
    let out = r.take_output();
    let (to, round) = match out.early.as_slice() {
        [(to, ReplicaMessage::Append { entries, round, .. }), ..] => {
            assert_eq!(entries.len(), 1, "one entry a batch");
            (*to, *round)
        }
        other => panic!("no early append: {other:?}"),
    };
    // The follower acknowledges the first entry while the leader's write
    // of all three is under way: the next two leave at once, early.
    let ack = ReplicaMessage::AppendReply { token, round, result: Ok(last + 1) };
    r.handle_message(now, to, ack);
    let next = r.take_output();
    let sent: Vec<Index> = next
        .early
        .iter()
        .filter(|(t, _)| *t == to)
        .flat_map(|(_, m)| match m {
            ReplicaMessage::Append { entries, .. } => entries.iter().map(|e| e.pos.index).collect(),
            _ => Vec::new(),
        })
        .collect();
    assert_eq!(sent, [last + 2, last + 3], "{next:?}");
    assert!(next.messages.iter().all(|(t, _)| *t != to), "held: {next:?}");
}

/// The log after a snapshot leaves beside the leader's write too, when the
/// follower says it holds the whole snapshot. Held, it kept every later
/// batch to that follower behind it (each moved the wait to the newest
/// write) for as long as one write followed another.
#[test]
fn the_log_after_a_snapshot_leaves_beside_the_leaders_write() {
    let mut c = Cluster::with_config(3, 1, |cfg| {
        cfg.snapshot_every = 20;
        cfg.snapshot_chunk_bytes = 16;
    });
    let (token, snapshot) = compacted_past_n3(&mut c, 40);
    assert!(snapshot.index >= 20, "the leader compacted ({snapshot:?})");
    // n3 comes back behind the compaction: a transfer begins, its answers
    // are lost.
    c.restart(n(3));
    c.tell(n(3), Some((n(1), token)));
    c.cut.insert((n(3), n(1)));
    c.run_for(HEARTBEAT * 2);
    let now = c.now;
    let r = c.nodes.get_mut(&n(1)).unwrap().replica.as_mut().unwrap();
    r.propose(now, vec![cmd(100)]).into_iter().for_each(|p| assert!(p.is_ok()));
    let first = r.take_output();
    assert!(!first.write.is_empty(), "a write under way");
    // n3 holds the whole snapshot (u64::MAX: all of it): the log after it
    // leaves at once.
    let all = ReplicaMessage::SnapshotReply { token, last: snapshot, received: u64::MAX };
    r.handle_message(now, n(3), all);
    let after = r.take_output();
    let to_n3 = |m: &[(tenure_core::NodeId, ReplicaMessage)]| {
        m.iter().any(|(t, m)| {
            *t == n(3) && matches!(m, ReplicaMessage::Append { entries, .. } if !entries.is_empty())
        })
    };
    assert!(to_n3(&after.early), "{after:?}");
    assert!(after.messages.is_empty(), "{after:?}");
}

#[test]
fn a_follower_does_not_accept_writes() {
    let mut c = led(3);
    assert_eq!(c.propose(n(2), vec![cmd(1)]), 0, "only the ready leader takes proposals");
}

#[test]
fn a_minority_commits_nothing() {
    let mut c = led(3);
    c.isolate(n(1));
    c.propose(n(1), vec![cmd(1)]);
    c.run_for(HEARTBEAT * 10);
    assert!(c.proposals.values().all(|(_, f)| *f == Fate::Pending));
    assert_eq!(c.replica(n(1)).status().commit, 1, "only the no-op");
}

#[test]
fn failover_keeps_every_committed_entry_and_reports_the_rest_as_unknown() {
    let mut c = led(3);
    for i in 0..20 {
        c.propose(n(1), vec![cmd(i)]);
    }
    c.run_for(HEARTBEAT * 3);
    // Entries only the old leader holds: written, never committed.
    c.isolate(n(1));
    for i in 20..25 {
        c.propose(n(1), vec![cmd(i)]);
    }
    c.run_for(HEARTBEAT);
    let t = c.elect(n(2), &[n(2), n(3)]);
    c.run_for(HEARTBEAT * 5);
    assert!(c.replica(n(2)).status().ready_leader);
    assert_eq!(c.replica(n(2)).status().leading, Some(t));
    c.propose(n(2), vec![cmd(100)]);
    c.run_for(HEARTBEAT * 3);
    // The old leader rejoins and learns of the new one.
    c.heal();
    c.tell(n(1), Some((n(2), t)));
    c.run_for(HEARTBEAT * 5);
    c.check_converged();
    for ((node, _, _), (cmd, fate)) in &c.proposals {
        let i: u64 = String::from_utf8_lossy(&cmd[1..]).parse().unwrap();
        match (node.0, i) {
            (1, 0..=19) | (2, _) => {
                assert!(matches!(fate, Fate::Committed(_)), "{cmd:?}: {fate:?}")
            }
            (1, _) => assert_eq!(*fate, Fate::Unknown, "{cmd:?}"),
            _ => unreachable!(),
        }
    }
    // The old leader's uncommitted entries are gone from every log.
    let applied = c.applied_by(n(1));
    assert_eq!(applied.len(), 21);
    assert!(applied.iter().all(|(_, c)| c != &cmd(20)));
}

#[test]
fn a_new_leader_with_a_shorter_log_fetches_the_freshest_one() {
    let mut c = led(3);
    // n3 misses the last entries, which n1 and n2 commit.
    c.cut.insert((n(1), n(3)));
    for i in 0..10 {
        c.propose(n(1), vec![cmd(i)]);
    }
    c.run_for(HEARTBEAT * 3);
    assert!(c.proposals.values().all(|(_, f)| matches!(f, Fate::Committed(_))));
    c.crash(n(1));
    c.heal();
    // n3, behind, is elected: it must fetch n2's log before it writes.
    let t = c.elect(n(3), &[n(2), n(3)]);
    c.run_for(HEARTBEAT * 5);
    assert_eq!(c.ready_leader(), Some(n(3)));
    assert_eq!(c.replica(n(3)).status().leading, Some(t));
    let applied = c.applied_by(n(3));
    assert_eq!(applied.len(), 10, "every committed entry survived");
    c.restart(n(1));
    c.tell(n(1), Some((n(3), t)));
    c.run_for(HEARTBEAT * 5);
    c.check_converged();
}

/// Three nodes led by n1, snapshots taken every `snapshot_every` entries
/// and sent in pieces of `chunk` bytes; n3 crashed while the leader
/// committed 100 entries, one every fifth of a heartbeat.
fn n3_down_for_100_entries(snapshot_every: u64, chunk: usize) -> Cluster {
    let mut c = Cluster::with_config(3, 1, |cfg| {
        cfg.snapshot_every = snapshot_every;
        cfg.snapshot_chunk_bytes = chunk;
    });
    let ids = c.ids.clone();
    c.elect(n(1), &ids);
    c.run_for(HEARTBEAT * 3);
    c.crash(n(3));
    for i in 0..100 {
        c.propose(n(1), vec![cmd(i)]);
        c.run_for(HEARTBEAT / 5);
    }
    c
}

#[test]
fn a_follower_far_behind_catches_up_by_snapshot() {
    let mut c = n3_down_for_100_entries(20, 64);
    c.run_for(HEARTBEAT * 3);
    assert!(c.replica(n(1)).status().snapshot.index >= 80, "the leader compacted");
    c.restart(n(3));
    c.tell(n(3), Some((n(1), FencingToken(1))));
    c.run_for(HEARTBEAT * 40);
    c.check_converged();
    let s = c.replica(n(3)).status();
    assert_eq!(s.applied, c.replica(n(1)).status().commit);
    assert!(s.snapshot.index >= 80, "it installed the snapshot: {s:?}");
    assert_eq!(c.replica(n(3)).state_machine().applied, c.replica(n(1)).state_machine().applied);
}

/// A transfer that takes longer than the leader takes to apply
/// `snapshot_every` entries: the leader keeps the snapshot under way until
/// the follower has it (before, every compaction voided the transfer and
/// the follower never caught up).
#[test]
fn a_follower_receiving_a_snapshot_catches_up_while_writes_go_on() {
    let mut c = n3_down_for_100_entries(5, 16);
    c.restart(n(3));
    c.tell(n(3), Some((n(1), FencingToken(1))));
    for i in 100..400 {
        c.propose(n(1), vec![cmd(i)]);
        c.run_for(HEARTBEAT / 5);
    }
    let (s, leader) = (c.replica(n(3)).status(), c.replica(n(1)).status());
    assert!(s.snapshot.index >= 100, "it installed a snapshot: {s:?}");
    assert!(s.applied + 20 >= leader.commit, "it caught up: {s:?}, the leader {leader:?}");
    c.run_for(HEARTBEAT * 5);
    c.check_converged();
}

#[test]
fn a_restarted_cluster_keeps_its_log() {
    let mut c = led(3);
    for i in 0..10 {
        c.propose(n(1), vec![cmd(i)]);
    }
    c.run_for(HEARTBEAT * 3);
    for id in c.ids.clone() {
        c.crash(id);
        c.restart(id);
    }
    let ids = c.ids.clone();
    c.elect(n(2), &ids);
    c.run_for(HEARTBEAT * 5);
    assert_eq!(c.ready_leader(), Some(n(2)));
    c.check_converged();
    assert_eq!(c.applied_by(n(2)).len(), 10);
}

#[test]
fn reads_are_served_at_once_with_a_lease_and_after_a_round_without() {
    let mut c = led(3);
    c.propose(n(1), vec![cmd(1)]);
    c.run_for(HEARTBEAT * 2);
    let now = c.now;
    let status = c.replica(n(1)).status();
    let (applied, token) = (status.applied, status.leading.expect("n1 leads"));
    let r = c.nodes.get_mut(&n(1)).unwrap().replica.as_mut().unwrap().read(now, Some(token));
    assert_eq!(r, Ok(ReadStart::Now(applied)));
    let r = c.nodes.get_mut(&n(1)).unwrap().replica.as_mut().unwrap().read(now, None);
    assert!(matches!(r, Ok(ReadStart::Pending(_))), "{r:?}");
    // A lease of another token (a later election the replica was not told
    // of) is no lease for this leadership: the read needs a round.
    let later = FencingToken(token.0 + 1);
    let r = c.nodes.get_mut(&n(1)).unwrap().replica.as_mut().unwrap().read(now, Some(later));
    assert!(matches!(r, Ok(ReadStart::Pending(_))), "{r:?}");
    // Followers do not serve reads.
    let r = c.nodes.get_mut(&n(2)).unwrap().replica.as_mut().unwrap().read(now, Some(token));
    assert!(r.is_err());
    // A cut-off leader never confirms the round.
    c.isolate(n(1));
    c.run_for(HEARTBEAT * 5);
    let out = c.nodes.get_mut(&n(1)).unwrap().replica.as_mut().unwrap().take_output();
    assert!(out.completions.is_empty(), "{out:?}");
}

#[test]
fn messages_from_a_node_that_does_not_lead_change_nothing() {
    let mut c = led(3);
    c.propose(n(1), vec![cmd(1)]);
    c.run_for(HEARTBEAT * 2);
    let before = c.nodes[&n(3)].disk.entries.clone();
    let forged = tenure_replica::Entry {
        pos: Position { token: FencingToken(9), index: 2 },
        payload: tenure_replica::Payload::Command(b"forged".to_vec()),
    };
    let t9 = FencingToken(9);
    for msg in [
        ReplicaMessage::Sync { token: t9 },
        ReplicaMessage::Append {
            token: t9,
            prev: Position { token: FencingToken(1), index: 1 },
            entries: vec![forged.clone()],
            commit: 2,
            round: 1,
        },
        ReplicaMessage::Append {
            token: FencingToken(1),
            prev: Position { token: FencingToken(1), index: 1 },
            entries: vec![forged],
            commit: 2,
            round: 1,
        },
    ] {
        c.inject(n(2), n(3), msg);
    }
    assert_eq!(c.nodes[&n(3)].disk.entries, before);
    assert_eq!(c.nodes[&n(3)].disk.promised, FencingToken(1));
    // An acknowledgement of entries the leader never wrote is refused.
    let refused = c.replica(n(1)).status().refused;
    c.inject(
        n(2),
        n(1),
        ReplicaMessage::AppendReply { token: FencingToken(1), round: 0, result: Ok(1_000) },
    );
    assert_eq!(c.replica(n(1)).status().refused, refused + 1);
    c.run_for(HEARTBEAT * 3);
    c.check_converged();
}

/// Steps 1 ms at a time until `done` holds (at most `max` steps).
fn step_until(c: &mut Cluster, max: u32, done: impl Fn(&Cluster) -> bool) {
    for _ in 0..max {
        if done(c) {
            return;
        }
        c.run_for(Duration::from_millis(1));
    }
    assert!(done(c), "the condition never held");
}

fn cut_from(c: &mut Cluster, from: tenure_core::NodeId, to: &[tenure_core::NodeId]) {
    for &t in to {
        c.cut.insert((from, t));
    }
}

#[test]
fn an_entry_of_an_earlier_leadership_commits_only_with_one_of_the_current() {
    // Raft's figure 8, with synchronisation instead of a vote rule: the
    // leader of token 3 re-replicates entry A (token 1) to a majority, but
    // must not count it as committed until an entry of its own token is on a
    // majority too, because the node holding the no-op of token 2 may still
    // be chosen as the freshest log and replace A.
    let (s1, s2, s3, s4, s5) = (n(1), n(2), n(3), n(4), n(5));
    let mut c = Cluster::with_config(5, 7, |cfg| cfg.max_append_entries = 1);
    let all = c.ids.clone();
    c.elect(s1, &all);
    c.run_for(HEARTBEAT * 3);
    // Token 1: A reaches S1 and S2 only.
    cut_from(&mut c, s1, &[s3, s4, s5]);
    c.propose(s1, vec![b"A".to_vec()]);
    c.run_for(HEARTBEAT * 2);
    c.crash(s1);
    // Token 2: S5 synchronises with S3 and S4, writes its no-op, and is cut off.
    c.heal();
    c.elect(s5, &[s3, s4, s5]);
    step_until(&mut c, 50, |c| c.replica(s5).status().last.index == 2);
    cut_from(&mut c, s5, &[s1, s2, s3, s4]);
    c.run_for(HEARTBEAT);
    c.crash(s5);
    c.heal();
    // Token 3: S1 is back and leads S2 and S3; A reaches S3, its no-op does not.
    c.restart(s1);
    c.elect(s1, &[s1, s2, s3]);
    cut_from(&mut c, s1, &[s4, s5]);
    step_until(&mut c, 200, |c| c.nodes[&s3].disk.last().index >= 2);
    cut_from(&mut c, s1, &[s3]);
    c.run_for(HEARTBEAT * 3);
    assert!(c.replica(s1).status().commit < 2, "A is on a majority but not committed");
    c.crash(s1);
    c.crash(s2);
    c.heal();
    // Token 4: S5, whose last entry (token 2) is the freshest of S3, S4, S5, leads.
    c.restart(s5);
    c.elect(s5, &[s3, s4, s5]);
    c.run_for(HEARTBEAT * 5);
    assert!(c.replica(s5).status().ready_leader);
    c.check_safety();
    // A was replaced by token 2's no-op, so it must never have been reported committed.
    let at_2 = c.nodes[&s3].disk.entries.iter().find(|e| e.pos.index == 2).map(|e| e.pos);
    assert_eq!(at_2, Some(Position { token: FencingToken(2), index: 2 }));
    let a = c.proposals.values().find(|(cmd, _)| cmd == b"A").expect("proposed");
    assert!(!matches!(a.1, Fate::Committed(_)), "{:?}", a.1);
}

/// Random faults: leader changes (told to random subsets), crashes and
/// restarts, partitions, loss and delay; then heal, one stable leader, and
/// everything must converge with no committed entry lost.
fn random_run(seed: u64, size: u64) {
    use rand_core::RngCore;
    let mut c = Cluster::with_config(size, seed, |cfg| {
        cfg.snapshot_every = 15;
        cfg.snapshot_chunk_bytes = 48;
        cfg.max_append_entries = 1 + (seed % 3) as usize;
    });
    c.max_delay_ms = 8;
    let ids = c.ids.clone();
    let mut next_cmd = 0u64;
    for _step in 0..200 {
        let r = c.rng.next_u64() % 100;
        match r {
            0..=39 => {
                if let Some(l) = c.ready_leader() {
                    let k = 1 + c.rng.next_u64() % 3;
                    let cmds = (0..k).map(|j| cmd(next_cmd + j)).collect();
                    next_cmd += k;
                    c.propose(l, cmds);
                }
            }
            40..=54 => {
                let l = c.pick();
                if c.up(l) {
                    c.elect_told_to_some(l);
                }
            }
            55..=70 => c.random_fault(r - 55),
            _ => {}
        }
        c.maybe_spread_view();
        let pause = Duration::from_millis(1 + c.rng.next_u64() % 20);
        c.run_for(pause);
        c.check_safety();
    }
    // Heal: everyone up, no loss, one leader told to all.
    c.heal();
    c.loss_percent = 0;
    for &id in &ids {
        if !c.up(id) {
            c.restart(id);
        }
    }
    let leader = ids[(seed % size) as usize];
    c.elect(leader, &ids);
    c.run_for(HEARTBEAT * 60);
    assert_eq!(c.ready_leader(), Some(leader), "seed {seed}: a leader takes office after healing");
    c.propose(leader, vec![b"final".to_vec()]);
    c.run_for(HEARTBEAT * 60);
    c.check_converged();
    assert!(
        c.proposals.values().any(|(cmd, f)| cmd == b"final" && matches!(f, Fate::Committed(_))),
        "seed {seed}: the healed cluster commits"
    );
}

#[test]
fn random_faults_lose_no_committed_entry() {
    for seed in 0..200 {
        for size in [3, 5] {
            let run = std::panic::catch_unwind(|| random_run(seed, size));
            assert!(run.is_ok(), "seed {seed}, {size} nodes");
        }
    }
}

/// A ready leader's new entries leave before its own write is durable
/// (`Output::early`): the followers write while it writes. Nothing else
/// of the output leaves early, and the leader's own copy counts toward a
/// commit only once its write is reported durable.
#[test]
fn a_leaders_new_entries_leave_while_it_writes_them() {
    let mut c = led(3);
    let now = c.now;
    let leader = c.nodes.get_mut(&n(1)).unwrap().replica.as_mut().unwrap();
    let commit = leader.status().commit;
    let ids = leader.propose(now, vec![cmd(1), cmd(2)]);
    assert!(ids.iter().all(Result::is_ok));
    let out = leader.take_output();
    assert_eq!(out.write.len(), 1, "one write: {out:?}");
    let mut to: Vec<_> = out
        .early
        .iter()
        .map(|(to, m)| {
            let ReplicaMessage::Append { entries, .. } = m else { panic!("not an append: {m:?}") };
            assert_eq!(entries.len(), 2, "the new entries: {m:?}");
            *to
        })
        .collect();
    to.sort();
    assert_eq!(to, vec![n(2), n(3)], "one append per follower, early");
    assert!(
        !out.messages.iter().any(|(_, m)| matches!(m, ReplicaMessage::Append { .. })),
        "no append waits for the write: {out:?}"
    );
    assert_eq!(leader.status().commit, commit, "nothing commits before the write is durable");
}

/// A replica built from its disk never leads under a token it promised
/// before: its own leadership's entries may have left before they reached
/// the disk. (Electors never lead a term again after a restart; the
/// replica does not rely on it.)
#[test]
fn a_replica_built_from_its_disk_never_leads_under_a_token_it_promised() {
    let mut c = led(3);
    let token = FencingToken(c.token);
    // The leader crashes and restarts (its elector would stand in a later
    // term): told of its old leadership again, it does not lead it.
    c.crash(n(1));
    c.restart(n(1));
    assert_eq!(c.replica(n(1)).lead_fence(), token, "the durable promise");
    c.tell(n(1), Some((n(1), token)));
    assert_eq!(c.replica(n(1)).status().leading, None);
    let ids = c.ids.clone();
    c.elect(n(1), &ids);
    c.run_for(HEARTBEAT * 3);
    assert_eq!(c.ready_leader(), Some(n(1)), "a later token leads");
}

/// A leader whose write fails after its entries left early gives its token
/// up: a follower may hold entries at positions its log has lost, and
/// leading under that token again could write others there. The replica
/// rebuilt from the disk never leads under it (the fence is carried over),
/// and leads again under a later one, keeping every committed entry.
#[test]
fn a_leader_whose_write_failed_never_leads_under_its_token_again() {
    let mut c = led(3);
    let token = FencingToken(c.token);
    let now = c.now;
    let leader = c.nodes.get_mut(&n(1)).unwrap().replica.as_mut().unwrap();
    let ids = leader.propose(now, vec![cmd(7)]);
    assert!(ids[0].is_ok());
    let out = leader.take_output();
    // The append reaches node 2; the leader's write fails.
    let (_, append) =
        out.early.iter().find(|(to, _)| *to == n(2)).expect("an early append").clone();
    leader.handle_persist_failed();
    assert_eq!(leader.lead_fence(), token);
    let fence = leader.lead_fence();
    let out = leader.take_output();
    assert_eq!(out.give_up, Some(token), "the elector must step down");
    c.inject(n(1), n(2), append);
    assert_eq!(c.nodes[&n(2)].disk.last().token, token, "node 2 holds the lost entry");

    // Rebuilt from its disk, which lacks the entry: the fence holds, and
    // the leadership is reported given up again.
    c.boot(n(1));
    let rebuilt = c.nodes.get_mut(&n(1)).unwrap().replica.as_mut().unwrap();
    rebuilt.set_lead_fence(fence);
    rebuilt.set_leadership(c.now, Some(n(1)), Some(token));
    let out = rebuilt.take_output();
    assert_eq!(out.give_up, Some(token), "{out:?}");
    c.run_for(HEARTBEAT * 3);
    assert_eq!(c.replica(n(1)).status().leading, None, "no leadership under the token given up");
    assert_eq!(c.propose(n(1), vec![cmd(8)]), 0);

    // A later leadership works, and the stores agree.
    let ids = c.ids.clone();
    c.elect(n(1), &ids);
    c.run_for(HEARTBEAT * 3);
    assert_eq!(c.ready_leader(), Some(n(1)));
    assert_eq!(c.propose(n(1), vec![cmd(9)]), 1);
    c.run_for(HEARTBEAT * 5);
    c.check_safety();
    c.check_converged();
}

/// A follower far behind, over a link that loses and reorders messages,
/// has a bounded number of batches on their way to it. Every batch behind
/// a lost one is refused the same way; the leader used to resend once per
/// refusal, each resend starting a window of its own, and answered every
/// acknowledgement with at least one more batch even into a full window,
/// so that the batches in flight grew without bound (the simulator's event
/// queue overflowed with 10,000 sessions: 614,000 appends in flight among
/// five nodes).
#[test]
fn a_lossy_link_to_a_lagging_follower_carries_a_bounded_number_of_batches() {
    let mut c = Cluster::with_config(3, 7, |cfg| cfg.max_append_entries = 2);
    let ids = c.ids.clone();
    c.elect(n(1), &ids);
    c.run_for(HEARTBEAT * 3);
    assert_eq!(c.ready_leader(), Some(n(1)));
    c.max_delay_ms = 20;
    c.cut.insert((n(1), n(3)));
    c.cut.insert((n(3), n(1)));
    for i in 0..3_000 {
        c.propose(n(1), vec![cmd(i)]);
        c.run_for(Duration::from_micros(200));
    }
    c.run_for(HEARTBEAT * 2);
    c.heal();
    c.loss_percent = 20;
    // Each heartbeat, and each restart after a new gap, starts the window
    // again while batches sent within the last 20 ms are still on the
    // wire, and each refused batch is answered with one more: 500 to
    // 1,075 batches with this seed, steady (the bound leaves a fifth more);
    // without the rules, more than this bound within the first second, and
    // growing (2,174 before the run was stopped).
    let bound = 20 * tenure_replica::MAX_IN_FLIGHT_BATCHES;
    let mut most = 0;
    for _ in 0..2_000 {
        c.run_for(Duration::from_millis(1));
        most = most.max(c.appends_in_flight(n(1), n(3)));
        if most > bound {
            break;
        }
    }
    assert!(most <= bound, "{most} batches in flight to the lagging follower (bound {bound})");
    // It catches up (in 1.5 s with this seed: the reordering costs
    // refusals and resends).
    c.loss_percent = 0;
    c.run_for(HEARTBEAT * 400);
    c.check_converged();
    c.check_safety();
}

/// A follower the leader began to send a snapshot (it lagged behind a
/// compaction) that then acknowledges the log past the snapshot's start
/// (the answer to a batch sent before, late) gets the log at full speed
/// again. The leader used to keep it marked as receiving a snapshot: no
/// batch on an answer, one per heartbeat, so that with 100,000 simulated
/// sessions it took nine entries a round and the cluster could not commit
/// without it.
#[test]
fn a_follower_that_caught_up_past_an_abandoned_snapshot_gets_the_log_at_full_speed() {
    let mut c = Cluster::with_config(3, 1, |cfg| {
        cfg.snapshot_every = 40;
        cfg.max_append_entries = 2;
    });
    let (token, snapshot) = compacted_past_n3(&mut c, 100);
    let base = snapshot.index;
    assert!(base >= 80, "the leader compacted ({base})");
    // n3 comes back: the leader sends it the snapshot (one piece), and
    // n3's answers are lost.
    c.restart(n(3));
    c.tell(n(3), Some((n(1), token)));
    c.cut.insert((n(3), n(1)));
    c.run_for(HEARTBEAT * 3);
    assert_eq!(c.replica(n(3)).status().snapshot.index, base, "n3 installed the snapshot");
    // A late answer to a batch: n3 holds the log up to the base.
    let reply = ReplicaMessage::AppendReply { token, round: 0, result: Ok(base) };
    c.inject(n(3), n(1), reply);
    // (No more pieces leave for n3; the answers still on their way are lost.)
    c.run_for(HEARTBEAT / 5);
    c.heal();
    // New entries (fewer than compact the log again, which would send a
    // snapshot afresh), as fast as n2 takes them: n3 keeps up within a few
    // batches (it got two entries a heartbeat).
    for i in 100..115 {
        c.propose(n(1), vec![cmd(i)]);
        c.run_for(Duration::from_millis(1));
    }
    c.run_for(HEARTBEAT / 2);
    let last = c.replica(n(1)).status().last.index;
    let held = c.replica(n(3)).status().last.index;
    assert!(last - held <= 2, "n3 holds {held} of {last}");
    c.run_for(HEARTBEAT * 3);
    c.check_converged();
}
