//! Leases in the store: grants, attaching and detaching keys, revocation and
//! expiry at one revision, refusals that change nothing, limits, and
//! snapshots.

use tenure_kv::{
    ChangeKind, Command, InvalidCommand, LeaseEnd, LeaseId, OpResponse, Refusal, Response, Store,
    TxnOp, MAX_KEYS_PER_LEASE, MAX_LEASES, MAX_TTL_MS, MIN_TTL_MS,
};
use tenure_replica::StateMachine;

fn grant(s: &mut Store, ttl_ms: u64) -> LeaseId {
    match s.execute(&Command::Grant { ttl_ms, owner: None }) {
        Response::Granted { lease, ttl_ms: t, .. } if t == ttl_ms => lease,
        other => panic!("a grant, got {other:?}"),
    }
}

fn put(key: &str, lease: Option<LeaseId>) -> Command {
    Command::Put { key: key.into(), value: b"v".to_vec(), if_mod_revision: None, lease }
}

fn txn_put(key: &str, lease: Option<LeaseId>) -> TxnOp {
    TxnOp::Put { key: key.into(), value: b"t".to_vec(), lease }
}

fn txn(success: Vec<TxnOp>) -> Command {
    Command::Txn { compare: vec![], success, failure: vec![] }
}

fn keys_of(s: &Store, lease: LeaseId) -> Vec<String> {
    s.lease(lease).expect("the lease exists").keys.iter().cloned().collect()
}

#[test]
fn grants_count_ids_up_and_leave_the_revision_alone() {
    let mut s = Store::new();
    s.execute(&put("a", None));
    assert_eq!(s.last_lease(), LeaseId(0));
    assert_eq!(
        s.execute(&Command::Grant { ttl_ms: 1_000, owner: None }),
        Response::Granted { lease: LeaseId(1), ttl_ms: 1_000, revision: 2 }
    );
    assert_eq!(grant(&mut s, MAX_TTL_MS), LeaseId(2));
    assert_eq!(s.revision(), 2, "a grant changes no key");
    let listed: Vec<(LeaseId, u64)> = s.leases().map(|l| (l.id, l.ttl_ms)).collect();
    assert_eq!(listed, [(LeaseId(1), 1_000), (LeaseId(2), MAX_TTL_MS)]);
    assert!(s.lease(LeaseId(1)).unwrap().keys.is_empty());
    assert!(s.lease(LeaseId(3)).is_none());
    assert_eq!(
        s.execute(&Command::Grant { ttl_ms: MIN_TTL_MS - 1, owner: None }),
        Response::Invalid(InvalidCommand::TtlOutOfRange(MIN_TTL_MS - 1))
    );
    assert_eq!(s.leases().len(), 2, "a refused grant makes no lease");
    assert_eq!(grant(&mut s, MIN_TTL_MS), LeaseId(3), "and uses no id");
}

#[test]
fn a_put_attaches_a_plain_put_or_a_delete_detaches_and_another_lease_takes_over() {
    let mut s = Store::new();
    let (l1, l2) = (grant(&mut s, 5_000), grant(&mut s, 5_000));
    s.execute(&put("a", Some(l1)));
    s.execute(&put("b", Some(l1)));
    assert_eq!(s.get("a").unwrap().lease, Some(l1));
    assert_eq!(keys_of(&s, l1), ["a", "b"]);
    // The previous key value carries its lease.
    let Response::Put { prev: Some(prev), .. } = s.execute(&put("a", Some(l2))) else {
        panic!("a put")
    };
    assert_eq!(prev.lease, Some(l1));
    assert_eq!((keys_of(&s, l1), keys_of(&s, l2)), (vec!["b".into()], vec!["a".into()]));
    // A put without a lease detaches (etcd's rule).
    s.execute(&put("a", None));
    assert_eq!(s.get("a").unwrap().lease, None);
    assert!(keys_of(&s, l2).is_empty());
    // A delete detaches; the key put again is not attached.
    s.execute(&Command::Delete { key: "b".into(), if_mod_revision: None });
    assert!(keys_of(&s, l1).is_empty());
    s.execute(&put("b", None));
    let revoked = s.execute(&Command::Revoke { lease: l1 });
    assert!(matches!(revoked, Response::LeaseEnded { deleted: 0, .. }), "{revoked:?}");
    assert!(s.get("b").is_some(), "a detached key outlives its old lease");
    // In a transaction: a put attaches, a delete detaches.
    s.execute(&txn(vec![txn_put("x", Some(l2)), txn_put("y", Some(l2))]));
    assert_eq!(keys_of(&s, l2), ["x", "y"]);
    s.execute(&txn(vec![TxnOp::Delete { key: "x".into() }, txn_put("y", None)]));
    assert!(keys_of(&s, l2).is_empty());
}

#[test]
fn revoking_deletes_every_attached_key_at_one_revision_and_watches_see_why() {
    let mut s = Store::new();
    let (mine, other) = (grant(&mut s, 5_000), grant(&mut s, 5_000));
    for k in ["e/1", "e/2", "f/1"] {
        s.execute(&put(k, Some(mine)));
    }
    s.execute(&put("e/3", Some(other)));
    s.execute(&put("plain", None));
    let before = s.revision();
    assert_eq!(
        s.execute(&Command::Revoke { lease: mine }),
        Response::LeaseEnded {
            lease: mine,
            reason: LeaseEnd::Revoked,
            revision: before + 1,
            deleted: 3
        }
    );
    assert_eq!(s.revision(), before + 1);
    for k in ["e/1", "e/2", "f/1"] {
        assert!(s.get(k).is_none(), "{k} is gone");
    }
    assert!(s.get("e/3").is_some() && s.get("plain").is_some(), "other keys stay");
    assert!(s.lease(mine).is_none(), "the lease is forgotten");
    let changes = s.changes_since("", before + 1, 100).unwrap();
    assert_eq!(changes.len(), 3);
    for c in &changes {
        assert_eq!((c.revision, c.kind, c.kv.lease), (before + 1, ChangeKind::Revoked, Some(mine)));
        assert_eq!((c.kv.mod_revision, c.kv.version), (before + 1, 0));
        assert!(c.kind.is_removal());
    }
    // A watch on a prefix sees only its keys, at that revision.
    let e = s.changes_since("e/", before + 1, 100).unwrap();
    assert_eq!(e.iter().map(|c| c.kv.key.as_str()).collect::<Vec<_>>(), ["e/1", "e/2"]);
    // Revoked again, or expired: not found, nothing changes.
    let after = s.clone();
    assert_eq!(
        s.execute(&Command::Revoke { lease: mine }),
        Response::Refused(Refusal::LeaseNotFound(mine))
    );
    assert_eq!(
        s.execute(&Command::Expire { lease: mine }),
        Response::Refused(Refusal::LeaseNotFound(mine))
    );
    assert_eq!(s, after);
}

#[test]
fn an_expiry_is_a_revocation_reported_as_an_expiry() {
    let mut s = Store::new();
    let l = grant(&mut s, 5_000);
    s.execute(&txn(vec![txn_put("a", Some(l)), txn_put("b", Some(l))]));
    assert_eq!(
        s.execute(&Command::Expire { lease: l }),
        Response::LeaseEnded { lease: l, reason: LeaseEnd::Expired, revision: 3, deleted: 2 }
    );
    let changes = s.changes_since("", 3, 10).unwrap();
    assert_eq!(changes.iter().map(|c| c.kind).collect::<Vec<_>>(), [ChangeKind::Expired; 2]);
    assert!(s.is_empty());
    // A lease without keys ends without a revision.
    let empty = grant(&mut s, 5_000);
    assert_eq!(
        s.execute(&Command::Expire { lease: empty }),
        Response::LeaseEnded { lease: empty, reason: LeaseEnd::Expired, revision: 3, deleted: 0 }
    );
}

/// The leader's chunk of expiries in one entry: each lease as its own
/// `Expire` would end it (its keys at a revision of its own, none for a
/// lease without keys), one already gone skipped; a list that is empty,
/// too long or names a lease twice is refused whole.
#[test]
fn many_expiries_in_one_command_end_each_lease_as_its_own_would() {
    let mut s = Store::new();
    let (a, empty, b, gone) =
        (grant(&mut s, 5_000), grant(&mut s, 5_000), grant(&mut s, 5_000), grant(&mut s, 5_000));
    s.execute(&txn(vec![txn_put("a1", Some(a)), txn_put("a2", Some(a))]));
    s.execute(&put("b1", Some(b)));
    s.execute(&Command::Revoke { lease: gone });
    assert_eq!(s.revision(), 3);
    let mut one_by_one = s.clone();
    let before = s.clone();
    for bad in [vec![], vec![a, a], vec![LeaseId(7); tenure_kv::MAX_EXPIRIES_PER_COMMAND + 1]] {
        let n = bad.len();
        assert_eq!(
            s.execute(&Command::ExpireMany { leases: bad }),
            Response::Invalid(InvalidCommand::BadExpiries(n))
        );
        assert_eq!(s, before, "a refused list changes nothing");
    }
    assert_eq!(
        s.execute(&Command::ExpireMany { leases: vec![a, empty, gone, b] }),
        Response::LeasesExpired { leases: vec![a, empty, b], revision: 5, deleted: 3 }
    );
    for lease in [a, empty, gone, b] {
        one_by_one.execute(&Command::Expire { lease });
    }
    assert_eq!(s, one_by_one, "the same store as four expiries in a row");
    let changes = s.changes_since("", 4, 10).unwrap();
    let at: Vec<(String, u64)> = changes.iter().map(|c| (c.kv.key.clone(), c.revision)).collect();
    assert_eq!(at, [("a1".into(), 4), ("a2".into(), 4), ("b1".into(), 5)]);
    assert!(changes.iter().all(|c| c.kind == ChangeKind::Expired));
    // It survives the log's encoding.
    let c = Command::ExpireMany { leases: vec![a, b] };
    assert_eq!(Command::decode(&c.encode()), Ok(c));
}

#[test]
fn an_unknown_lease_fails_the_whole_command_and_changes_nothing() {
    let mut s = Store::new();
    let l = grant(&mut s, 5_000);
    s.execute(&put("a", None));
    let gone = grant(&mut s, 5_000);
    s.execute(&Command::Revoke { lease: gone });
    let before = s.clone();
    for unknown in [LeaseId(0), gone, LeaseId(99)] {
        assert_eq!(
            s.execute(&put("a", Some(unknown))),
            Response::Refused(Refusal::LeaseNotFound(unknown))
        );
        // The first operations were fine; the last names the unknown lease.
        let t = txn(vec![
            txn_put("b", Some(l)),
            TxnOp::Delete { key: "a".into() },
            txn_put("c", Some(unknown)),
        ]);
        assert_eq!(s.execute(&t), Response::Refused(Refusal::LeaseNotFound(unknown)));
        assert_eq!(s, before, "nothing changed, not even the history");
    }
    // Only the branch that runs counts.
    let t = Command::Txn {
        compare: vec![],
        success: vec![txn_put("b", Some(l))],
        failure: vec![txn_put("b", Some(LeaseId(99)))],
    };
    assert!(matches!(s.execute(&t), Response::Txn { succeeded: true, .. }));
    // A compare-and-set that fails is a conflict before the lease is looked at.
    let cas = Command::Put {
        key: "a".into(),
        value: vec![],
        if_mod_revision: Some(77),
        lease: Some(LeaseId(99)),
    };
    assert!(matches!(s.execute(&cas), Response::Conflict { .. }));
}

#[test]
fn the_lease_count_is_bounded_and_ids_are_never_reused() {
    let mut s = Store::new();
    for i in 1..=MAX_LEASES as u64 {
        assert_eq!(grant(&mut s, 5_000), LeaseId(i));
    }
    let before = s.clone();
    assert_eq!(
        s.execute(&Command::Grant { ttl_ms: 5_000, owner: None }),
        Response::Refused(Refusal::TooManyLeases)
    );
    assert_eq!(s, before);
    s.execute(&Command::Revoke { lease: LeaseId(MAX_LEASES as u64) });
    assert_eq!(grant(&mut s, 5_000), LeaseId(MAX_LEASES as u64 + 1), "a new id, not the freed one");
}

#[test]
fn the_keys_of_a_lease_are_bounded_counting_what_a_transaction_moves() {
    let mut s = Store::new();
    let (l, other) = (grant(&mut s, 5_000), grant(&mut s, 5_000));
    for i in 0..MAX_KEYS_PER_LEASE {
        assert!(matches!(s.execute(&put(&format!("k{i:04}"), Some(l))), Response::Put { .. }));
    }
    s.execute(&put("free", Some(other)));
    let before = s.clone();
    let full = Response::Refused(Refusal::TooManyKeys { lease: l, keys: MAX_KEYS_PER_LEASE + 1 });
    assert_eq!(s.execute(&put("one-more", Some(l))), full);
    assert_eq!(s.execute(&put("free", Some(l))), full, "moving a key onto it counts too");
    assert_eq!(s, before);
    // Putting a key it holds again is no new key.
    assert!(matches!(s.execute(&put("k0000", Some(l))), Response::Put { .. }));
    // A transaction that takes one key off and puts another on keeps the count.
    let swap = txn(vec![
        TxnOp::Delete { key: "k0001".into() },
        txn_put("k0002", None),
        txn_put("n1", Some(l)),
        txn_put("n2", Some(l)),
    ]);
    assert!(matches!(s.execute(&swap), Response::Txn { succeeded: true, .. }));
    assert_eq!(s.lease(l).unwrap().keys.len(), MAX_KEYS_PER_LEASE);
    // Revoking it deletes them all at one revision.
    let revision = s.revision() + 1;
    assert_eq!(
        s.execute(&Command::Revoke { lease: l }),
        Response::LeaseEnded {
            lease: l,
            reason: LeaseEnd::Revoked,
            revision,
            deleted: MAX_KEYS_PER_LEASE
        }
    );
    let changes = s.changes_since("", revision, usize::MAX).unwrap();
    assert_eq!(changes.len(), MAX_KEYS_PER_LEASE);
    assert!(changes.iter().all(|c| c.revision == revision));
}

#[test]
fn snapshots_keep_leases_attachments_and_the_id_counter() {
    let mut s = Store::new();
    let (a, b, c) = (grant(&mut s, 1_000), grant(&mut s, 2_000), grant(&mut s, 3_000));
    s.execute(&put("x/1", Some(a)));
    s.execute(&put("x/2", Some(a)));
    s.execute(&put("y", Some(b)));
    s.execute(&put("z", None));
    s.execute(&Command::Revoke { lease: c });
    let mut t = Store::new();
    t.restore(&s.snapshot()).unwrap();
    assert_eq!(t.range("", 100), s.range("", 100));
    assert_eq!(t.leases().cloned().collect::<Vec<_>>(), s.leases().cloned().collect::<Vec<_>>());
    assert_eq!(t.last_lease(), c);
    assert_eq!(t.snapshot(), s.snapshot(), "the same state, the same image");
    // The restored store goes on as the original would.
    for store in [&mut s, &mut t] {
        assert_eq!(grant(store, 4_000), LeaseId(4), "the revoked id 3 is not granted again");
        assert!(matches!(
            store.execute(&Command::Revoke { lease: a }),
            Response::LeaseEnded { deleted: 2, .. }
        ));
    }
    assert_eq!(t.range("", 100), s.range("", 100));
    assert_eq!(t.snapshot(), s.snapshot());
}

#[test]
fn the_counter_survives_a_snapshot_without_leases() {
    let mut s = Store::new();
    let l = grant(&mut s, 1_000);
    s.execute(&Command::Revoke { lease: l });
    assert_eq!(s.leases().len(), 0);
    let mut t = Store::new();
    t.restore(&s.snapshot()).unwrap();
    assert_eq!(grant(&mut t, 1_000), LeaseId(2));
}

#[test]
fn a_get_in_a_transaction_shows_the_lease() {
    let mut s = Store::new();
    let l = grant(&mut s, 1_000);
    let Response::Txn { responses, .. } =
        s.execute(&txn(vec![txn_put("a", Some(l)), TxnOp::Get { key: "a".into() }]))
    else {
        panic!("a transaction")
    };
    assert!(matches!(&responses[1], OpResponse::Get { kv: Some(kv) } if kv.lease == Some(l)));
}
