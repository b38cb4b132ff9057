//! etcd's whole transaction in the store ([`Command::RangeTxn`]): the
//! comparisons of the chosen path read before any write, reads that see
//! the writes before them, range deletes, `ignore_value`/`ignore_lease`,
//! and refusals that change nothing. Byte-for-byte agreement with a real
//! etcd is checked by crates/tenure/tests/serial/etcd_parity.rs.

use tenure_kv::{
    ChangeKind, Command, CompareOp, KeyValue, LeaseId, RangeCompare, RangeOp, RangeOpResponse,
    RangeTxn, Refusal, Response, Span, Store, Target, MAX_CHANGES_PER_REVISION, MAX_TXN_READ_BYTES,
    MAX_TXN_VISITED_KEYS, READ_OVERHEAD,
};

fn span(key: &str, end: &str) -> Span {
    Span { key: key.into(), end: end.into() }
}

fn put(key: &str, value: &str) -> RangeOp {
    RangeOp::Put {
        key: key.into(),
        value: value.into(),
        lease: None,
        ignore_value: false,
        ignore_lease: false,
    }
}

fn read(key: &str, end: &str) -> RangeOp {
    RangeOp::Range { span: span(key, end), revision: 0, max_keys: None }
}

fn run(s: &mut Store, compare: Vec<RangeCompare>, success: Vec<RangeOp>) -> Response {
    s.execute(&Command::RangeTxn(RangeTxn { compare, success, failure: vec![read("a", "")] }))
}

fn plain_put(s: &mut Store, key: &str, value: &str) {
    let put =
        Command::Put { key: key.into(), value: value.into(), if_mod_revision: None, lease: None };
    assert!(matches!(s.execute(&put), Response::Put { .. }));
}

fn keys(kvs: &[KeyValue]) -> Vec<(&str, &[u8], u64)> {
    kvs.iter().map(|kv| (kv.key.as_str(), kv.value.as_slice(), kv.mod_revision)).collect()
}

#[test]
fn reads_see_the_writes_before_them_and_everything_shares_one_revision() {
    let mut s = Store::new();
    plain_put(&mut s, "p/1", "old");
    plain_put(&mut s, "p/2", "old");
    let before = s.revision();
    let answer = run(
        &mut s,
        vec![],
        vec![
            read("p/", "p0"),
            RangeOp::DeleteRange(span("p/", "p0")),
            put("q", "new"),
            read("p/", "r"),
        ],
    );
    let Response::RangeTxn { succeeded: true, revision, responses } = answer else {
        panic!("{answer:?}")
    };
    assert_eq!(revision, before + 1);
    let [RangeOpResponse::Range { kvs: first, count: 2 }, RangeOpResponse::DeleteRange { prev }, RangeOpResponse::Put { prev: None }, RangeOpResponse::Range { kvs: last, count: 1 }] =
        responses.as_slice()
    else {
        panic!("{responses:?}")
    };
    assert_eq!(keys(first), [("p/1", b"old".as_slice(), 2), ("p/2", b"old".as_slice(), 3)]);
    assert_eq!(keys(prev), keys(first));
    assert_eq!(keys(last), [("q", b"new".as_slice(), revision)]);
    // Three changes, one revision, in the order they were made.
    let changes = s.changes_since("", revision, 10).unwrap();
    let kinds: Vec<_> = changes.iter().map(|c| (c.kv.key.as_str(), c.kind, c.revision)).collect();
    assert_eq!(
        kinds,
        [
            ("p/1", ChangeKind::Delete, revision),
            ("p/2", ChangeKind::Delete, revision),
            ("q", ChangeKind::Put, revision)
        ]
    );
}

#[test]
fn nested_comparisons_are_read_before_any_write() {
    let mut s = Store::new();
    // "a" is absent before the transaction: the nested comparison (version
    // of "a" is 0) holds although the outer branch puts "a" first.
    let absent =
        RangeCompare { span: span("a", ""), target: Target::Version(0), op: CompareOp::Equal };
    let nested = RangeTxn {
        compare: vec![absent.clone()],
        success: vec![put("b", "then")],
        failure: vec![put("b", "else")],
    };
    let answer = run(&mut s, vec![absent], vec![put("a", "1"), RangeOp::Txn(nested)]);
    let Response::RangeTxn { succeeded: true, responses, .. } = answer else {
        panic!("{answer:?}")
    };
    assert!(matches!(responses[1], RangeOpResponse::Txn { succeeded: true, .. }));
    assert_eq!(s.get("b").unwrap().value, b"then");
}

#[test]
fn a_comparison_over_a_range_holds_for_every_key_or_for_an_absent_one() {
    let mut s = Store::new();
    plain_put(&mut s, "p/1", "x");
    plain_put(&mut s, "p/2", "y");
    let cmp = |key: &str, end: &str, target, op| RangeCompare { span: span(key, end), target, op };
    let holds = |s: &mut Store, c: RangeCompare| match run(s, vec![c], vec![]) {
        Response::RangeTxn { succeeded, .. } => succeeded,
        other => panic!("{other:?}"),
    };
    assert!(holds(&mut s, cmp("p/", "p0", Target::Version(1), CompareOp::Equal)));
    assert!(!holds(&mut s, cmp("p/", "p0", Target::Value(b"x".to_vec()), CompareOp::Equal)));
    assert!(holds(&mut s, cmp("p/", "p0", Target::Value(b"z".to_vec()), CompareOp::Less)));
    // No key in the range: compared as an absent key; a value never holds.
    assert!(holds(&mut s, cmp("q/", "q0", Target::CreateRevision(0), CompareOp::Equal)));
    assert!(!holds(&mut s, cmp("q/", "q0", Target::Value(vec![]), CompareOp::NotEqual)));
    // From "p/2" on ("\0"): only p/2.
    assert!(holds(&mut s, cmp("p/2", "\0", Target::Value(b"y".to_vec()), CompareOp::Equal)));
}

#[test]
fn ignore_value_and_ignore_lease_keep_what_the_key_has() {
    let mut s = Store::new();
    let Response::Granted { lease, .. } = s.execute(&Command::Grant { ttl_ms: 5_000, owner: None })
    else {
        panic!()
    };
    let leased = Command::Put {
        key: "k".into(),
        value: b"kept".to_vec(),
        if_mod_revision: None,
        lease: Some(lease),
    };
    s.execute(&leased);
    let keep = |ignore_value, ignore_lease, value: &str| RangeOp::Put {
        key: "k".into(),
        value: value.into(),
        lease: None,
        ignore_value,
        ignore_lease,
    };
    run(&mut s, vec![], vec![keep(true, false, "")]);
    let kv = s.get("k").unwrap();
    assert_eq!((kv.value.as_slice(), kv.lease, kv.version), (b"kept".as_slice(), None, 2));
    s.execute(&leased);
    run(&mut s, vec![], vec![keep(false, true, "new")]);
    let kv = s.get("k").unwrap();
    assert_eq!((kv.value.as_slice(), kv.lease), (b"new".as_slice(), Some(lease)));
    // A key that is absent: refused, nothing written (not even the put
    // before it).
    let revision = s.revision();
    let missing = RangeOp::Put {
        key: "absent".into(),
        value: vec![],
        lease: None,
        ignore_value: true,
        ignore_lease: false,
    };
    assert_eq!(
        run(&mut s, vec![], vec![put("x", "1"), missing]),
        Response::Refused(Refusal::KeyNotFound("absent".into()))
    );
    // Present before, deleted by the transaction before the put: refused
    // too (etcd 3.4 panics on it).
    let keep_deleted = RangeOp::Put {
        key: "k".into(),
        value: vec![],
        lease: None,
        ignore_value: true,
        ignore_lease: false,
    };
    assert_eq!(
        run(&mut s, vec![], vec![RangeOp::DeleteRange(span("j", "\0")), keep_deleted]),
        Response::Refused(Refusal::KeyNotFound("k".into()))
    );
    assert!(s.get("k").is_some());
    let unknown = RangeOp::Put {
        key: "y".into(),
        value: vec![],
        lease: Some(LeaseId(99)),
        ignore_value: false,
        ignore_lease: false,
    };
    assert_eq!(
        run(&mut s, vec![], vec![put("x", "1"), unknown]),
        Response::Refused(Refusal::LeaseNotFound(LeaseId(99)))
    );
    assert_eq!((s.revision(), s.get("x")), (revision, None));
}

#[test]
fn reads_at_a_past_revision_see_the_past_and_bad_revisions_refuse_the_whole_transaction() {
    let mut s = Store::new();
    plain_put(&mut s, "k", "1");
    let first = s.revision();
    plain_put(&mut s, "k", "2");
    let at = |revision| RangeOp::Range { span: span("k", ""), revision, max_keys: None };
    // Even at the revision just before the transaction, a past read does
    // not see the transaction's own put.
    let now = s.revision();
    let answer = run(&mut s, vec![], vec![put("k", "3"), at(first), at(now)]);
    let Response::RangeTxn { responses, .. } = answer else { panic!("{answer:?}") };
    let values: Vec<_> = responses[1..]
        .iter()
        .map(|r| match r {
            RangeOpResponse::Range { kvs, .. } => kvs[0].value.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(values, [b"1".to_vec(), b"2".to_vec()]);
    let revision = s.revision();
    assert_eq!(
        run(&mut s, vec![], vec![put("x", "1"), at(revision + 1)]),
        Response::Refused(Refusal::FutureRevision { requested: revision + 1, current: revision })
    );
    s.execute(&Command::Compact { revision: revision - 1 });
    assert_eq!(
        run(&mut s, vec![], vec![put("x", "1"), at(first)]),
        Response::Refused(Refusal::Compacted { requested: first, compacted: revision - 1 })
    );
    assert_eq!((s.revision(), s.get("x")), (revision, None));
}

fn puts(prefix: &str, n: usize) -> Vec<RangeOp> {
    (0..n).map(|i| put(&format!("{prefix}{i:05}"), "v")).collect()
}

#[test]
fn the_changes_of_a_transaction_are_bounded_counting_keys_it_puts_then_deletes() {
    let mut s = Store::new();
    for i in 0..400 {
        plain_put(&mut s, &format!("a/{i:05}"), "v");
    }
    // 384 new keys, then a delete of every key from "a/" on (which etcd's
    // duplicate check does not see): 384 + 784 changes in one revision.
    let nested = |prefix: &str| {
        RangeOp::Txn(RangeTxn { compare: vec![], success: puts(prefix, 128), failure: vec![] })
    };
    let ops =
        vec![nested("a/x"), nested("a/y"), nested("a/z"), RangeOp::DeleteRange(span("a/", "\0"))];
    let revision = s.revision();
    assert_eq!(
        run(&mut s, vec![], ops),
        Response::Refused(Refusal::RangeTooLarge { keys: 384 + 784 })
    );
    assert_eq!((s.revision(), s.len()), (revision, 400));
    const { assert!(MAX_CHANGES_PER_REVISION < 384 + 784) };
    // Overlapping deletes count each key once.
    let twice =
        vec![RangeOp::DeleteRange(span("a/", "\0")), RangeOp::DeleteRange(span("a/", "a0"))];
    let Response::RangeTxn { responses, .. } = run(&mut s, vec![], twice) else { panic!() };
    let removed: Vec<usize> = responses
        .iter()
        .map(|r| match r {
            RangeOpResponse::DeleteRange { prev } => prev.len(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(removed, [400, 0]);
}

#[test]
fn the_reads_of_a_transaction_are_bounded_in_all_and_one_over_changes_nothing() {
    let mut s = Store::new();
    let kib = "v".repeat(1024);
    for i in 0..200 {
        plain_put(&mut s, &format!("p/{i:05}"), &kib);
    }
    // 127 reads of about 210 kB each: each alone is small, all together
    // over the bound.
    let reads: Vec<RangeOp> = (0..127).map(|_| read("p/", "p0")).collect();
    let per_read = 200 * (7 + 1024 + READ_OVERHEAD);
    assert!(per_read * 127 > MAX_TXN_READ_BYTES && per_read < MAX_TXN_READ_BYTES);
    let revision = s.revision();
    let mut ops = vec![put("x", "1")];
    ops.extend(reads);
    let answer = run(&mut s, vec![], ops);
    assert!(matches!(answer, Response::Refused(Refusal::ReadTooLarge { .. })), "{answer:?}");
    assert_eq!((s.revision(), s.get("x")), (revision, None));
    // With a limit, the same reads: the first key of each, all counted.
    let first = || RangeOp::Range { span: span("p/", "p0"), revision: 0, max_keys: Some(1) };
    let mut ops = vec![put("x", "1")];
    ops.extend((0..127).map(|_| first()));
    let Response::RangeTxn { responses, .. } = run(&mut s, vec![], ops) else { panic!() };
    let RangeOpResponse::Range { kvs, count } = &responses[1] else { panic!("{responses:?}") };
    assert_eq!((kvs.len(), *count), (1, 200));
}

#[test]
fn a_transaction_that_would_visit_too_many_keys_is_refused() {
    let mut s = Store::new();
    for i in 0..=MAX_TXN_VISITED_KEYS {
        plain_put(&mut s, &format!("k/{i:06}"), "");
    }
    // Every key's version is below 2: the comparison visits them all.
    let all =
        RangeCompare { span: span("k/", "k0"), target: Target::Version(2), op: CompareOp::Less };
    assert_eq!(
        run(&mut s, vec![all], vec![put("x", "1")]),
        Response::Refused(Refusal::TooManyKeysVisited)
    );
    assert_eq!(s.get("x"), None);
}
