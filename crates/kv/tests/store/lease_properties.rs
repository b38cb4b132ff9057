//! Randomized runs of leases and keys (seeded, reproducible): applying the
//! same commands gives every store the same answers and state, a store
//! restored from a snapshot goes on exactly as the original, no key ever
//! names a lease that does not exist, and no lease id is granted twice.

use rand_core::{RngCore, SeedableRng};
use rand_pcg::Pcg64Mcg;
use std::collections::BTreeSet;
use tenure_kv::{
    ChangeKind, Command, LeaseId, Response, Store, TxnOp, MAX_KEYS_PER_LEASE, MAX_LEASES,
    MAX_TTL_MS, MIN_TTL_MS,
};
use tenure_replica::{Position, StateMachine};

const SEEDS: u64 = 200;
const STEPS: usize = 300;
const KEYS: u64 = 8;

fn below(rng: &mut Pcg64Mcg, n: u64) -> u64 {
    rng.next_u64() % n
}

fn key(rng: &mut Pcg64Mcg) -> String {
    format!("k{}", below(rng, KEYS))
}

/// A lease id near the ones granted: some exist, some ended, some never did.
fn lease_id(rng: &mut Pcg64Mcg, last: LeaseId) -> LeaseId {
    LeaseId(below(rng, last.0 + 3))
}

fn maybe_lease(rng: &mut Pcg64Mcg, last: LeaseId) -> Option<LeaseId> {
    (below(rng, 3) > 0).then(|| lease_id(rng, last))
}

fn txn_op(rng: &mut Pcg64Mcg, last: LeaseId, written: &mut BTreeSet<String>) -> TxnOp {
    let key = key(rng);
    // Each key is written once per branch (a duplicate is refused whole,
    // which other steps cover): a second write of a key becomes a read.
    if below(rng, 4) == 0 || !written.insert(key.clone()) {
        return TxnOp::Get { key };
    }
    if below(rng, 3) == 0 {
        TxnOp::Delete { key }
    } else {
        TxnOp::Put { key, value: vec![below(rng, 256) as u8], lease: maybe_lease(rng, last) }
    }
}

fn command(rng: &mut Pcg64Mcg, last: LeaseId) -> Command {
    match below(rng, 10) {
        0 | 1 => {
            let ttl_ms = match below(rng, 8) {
                0 => below(rng, MIN_TTL_MS),
                1 => MAX_TTL_MS + 1 + below(rng, 1000),
                _ => MIN_TTL_MS + below(rng, 10_000),
            };
            // Owned or not (the snapshot then has owners, or is the older image).
            let owner = match below(rng, 3) {
                0 => None,
                n => Some(format!("app-{n}")),
            };
            Command::Grant { ttl_ms, owner }
        }
        2 => Command::Revoke { lease: lease_id(rng, last) },
        3 => Command::Expire { lease: lease_id(rng, last) },
        4..=6 => Command::Put {
            key: key(rng),
            value: vec![below(rng, 256) as u8],
            if_mod_revision: (below(rng, 5) == 0).then(|| below(rng, 4)),
            lease: maybe_lease(rng, last),
        },
        7 => Command::Delete { key: key(rng), if_mod_revision: None },
        _ => {
            let n = below(rng, 5) as usize;
            let mut written = BTreeSet::new();
            let success = (0..n).map(|_| txn_op(rng, last, &mut written)).collect();
            let mut written = BTreeSet::new();
            let failure = (0..n).map(|_| txn_op(rng, last, &mut written)).collect();
            let compare = vec![tenure_kv::Compare {
                key: key(rng),
                target: tenure_kv::Target::Version(below(rng, 2)),
                op: tenure_kv::CompareOp::Equal,
            }];
            Command::Txn { compare, success, failure }
        }
    }
}

/// Every key's lease exists and holds it; every lease's keys exist and
/// name it; the limits hold.
fn check_attachments(s: &Store) -> Result<(), String> {
    let (keys, _) = s.range("", usize::MAX);
    for kv in &keys {
        if let Some(id) = kv.lease {
            let lease =
                s.lease(id).ok_or(format!("{:?} names lease {id}, which is gone", kv.key))?;
            if !lease.keys.contains(&kv.key) {
                return Err(format!("lease {id} does not list {:?}", kv.key));
            }
        }
    }
    if s.leases().len() > MAX_LEASES {
        return Err(format!("{} leases", s.leases().len()));
    }
    for lease in s.leases() {
        if lease.id.0 == 0 || lease.id > s.last_lease() {
            return Err(format!("lease {} beyond the counter {}", lease.id, s.last_lease()));
        }
        if lease.keys.len() > MAX_KEYS_PER_LEASE {
            return Err(format!("lease {} holds {} keys", lease.id, lease.keys.len()));
        }
        for k in &lease.keys {
            if s.get(k).and_then(|kv| kv.lease) != Some(lease.id) {
                return Err(format!("lease {} lists {k:?}, which does not name it", lease.id));
            }
        }
    }
    Ok(())
}

/// What a lease's end did, seen in the changes at its revision.
fn check_lease_end(s: &Store, response: &Response, revision_before: u64) -> Result<(), String> {
    let Response::LeaseEnded { lease, reason, revision, deleted } = response else {
        return Ok(());
    };
    if *deleted == 0 {
        return (*revision == revision_before)
            .then_some(())
            .ok_or("a lease without keys moved the revision".to_string());
    }
    if *revision != revision_before + 1 {
        return Err(format!("{deleted} keys deleted over revisions {revision_before}..{revision}"));
    }
    let changes = s.changes_since("", *revision, usize::MAX).map_err(|e| e.to_string())?;
    let kind = ChangeKind::from(*reason);
    if changes.len() != *deleted
        || changes.iter().any(|c| c.revision != *revision || c.kind != kind)
        || changes.iter().any(|c| c.kv.lease != Some(*lease))
    {
        return Err(format!("lease {lease} ended with changes {changes:?}"));
    }
    Ok(())
}

/// What the runs did, so that the test shows it exercised the rules.
#[derive(Default, Debug)]
struct Seen {
    leased_puts: usize,
    ended_with_keys: usize,
    not_found: usize,
    restores: usize,
}

fn run(seed: u64, seen: &mut Seen) -> Result<(), String> {
    let mut rng = Pcg64Mcg::seed_from_u64(seed);
    let (mut a, mut b) = (Store::new(), Store::new());
    let mut restored: Option<Store> = None;
    let mut granted = BTreeSet::new();
    for step in 0..STEPS {
        let bytes = command(&mut rng, a.last_lease()).encode();
        let before = a.revision();
        let pos = Position::ZERO;
        let answer = a.apply(pos, &bytes);
        if b.apply(pos, &bytes) != answer || a != b {
            return Err(format!("step {step}: two stores differ after {bytes:?}"));
        }
        if let Some(c) = restored.as_mut() {
            if c.apply(pos, &bytes) != answer || c.snapshot() != a.snapshot() {
                return Err(format!("step {step}: the restored store differs after {bytes:?}"));
            }
        }
        let response = Response::decode(&answer)?;
        let command = Command::decode(&bytes).map_err(|e| e.to_string())?;
        match (&command, &response) {
            (Command::Put { lease: Some(_), .. }, Response::Put { .. }) => seen.leased_puts += 1,
            (_, Response::LeaseEnded { deleted: 1.., .. }) => seen.ended_with_keys += 1,
            (_, Response::Refused(tenure_kv::Refusal::LeaseNotFound(_))) => seen.not_found += 1,
            _ => {}
        }
        if let Response::Granted { lease, .. } = response {
            if !granted.insert(lease) {
                return Err(format!("step {step}: lease {lease} granted twice"));
            }
        }
        if a.revision() < before {
            return Err(format!("step {step}: the revision went back"));
        }
        check_attachments(&a).map_err(|e| format!("step {step}: {e}"))?;
        check_lease_end(&a, &response, before).map_err(|e| format!("step {step}: {e}"))?;
        if below(&mut rng, 50) == 0 {
            let mut c = Store::new();
            c.restore(&a.snapshot())?;
            check_attachments(&c).map_err(|e| format!("step {step}, restored: {e}"))?;
            restored = Some(c);
            seen.restores += 1;
        }
    }
    Ok(())
}

#[test]
fn leases_stay_consistent_and_deterministic_under_random_commands() {
    let mut seen = Seen::default();
    let failures: Vec<String> = (0..SEEDS)
        .filter_map(|seed| run(seed, &mut seen).err().map(|e| format!("seed {seed}: {e}")))
        .collect();
    assert!(failures.is_empty(), "{failures:#?}");
    let runs = SEEDS as usize;
    assert!(
        seen.leased_puts > 10 * runs
            && seen.ended_with_keys > 2 * runs
            && seen.not_found > 10 * runs
            && seen.restores > runs,
        "the runs did too little: {seen:?}"
    );
    eprintln!("{seen:?}");
}
