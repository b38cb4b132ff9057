//! Randomized runs (seeded, reproducible) of campaigns, resigns, proclaims,
//! raw writes under the elections' prefix, revokes, expiries and snapshot
//! restores: after every step the store's election counts
//! ([`Store::candidates`], [`Store::elections`], and each owner's
//! [`Store::owner_leases`] and [`Store::owner_candidacies`]: what the caps
//! read) equal a full recount of its keys and leases, in the store that ran the commands and in
//! one restored from its snapshot along the way.

use rand_core::{RngCore, SeedableRng};
use rand_pcg::Pcg64Mcg;
use std::collections::BTreeMap;
use tenure_kv::{
    campaign, candidate_key, check_caps_in, parse_candidate_key, proclaim, resign, Command,
    LeaseId, Names, Response, Store, TxnOp, ELECTIONS_PREFIX,
};
use tenure_replica::StateMachine;

const SEEDS: u64 = 200;
const STEPS: usize = 400;
const NAMES: [&str; 5] = ["a", "db", "db-x", "db0", "e.1"];
/// The owners grants are made for (`None`: the administrators).
const OWNERS: [Option<&str>; 3] = [Some("app"), Some("other"), None];

fn below(rng: &mut Pcg64Mcg, n: u64) -> u64 {
    rng.next_u64() % n
}

fn pick<'a>(rng: &mut Pcg64Mcg, of: &[&'a str]) -> &'a str {
    of[below(rng, of.len() as u64) as usize]
}

/// A session near the ones granted: most exist, some ended, some never did.
fn session(rng: &mut Pcg64Mcg, store: &Store) -> LeaseId {
    LeaseId(1 + below(rng, store.last_lease().0 + 2))
}

/// A key under the elections' prefix: a candidate key most often, else one
/// that is not (no parse, wrong digits, a nested path, no name).
fn election_key(rng: &mut Pcg64Mcg, store: &Store) -> String {
    let name = pick(rng, &NAMES);
    match below(rng, 8) {
        0 => format!("{ELECTIONS_PREFIX}{name}/zz"),
        1 => format!("{ELECTIONS_PREFIX}{name}/{:016X}", 0xabc_u64),
        2 => format!("{ELECTIONS_PREFIX}{name}/x/{:016x}", 1),
        3 => format!("{ELECTIONS_PREFIX}{name}"),
        _ => candidate_key(name, session(rng, store)),
    }
}

fn maybe_lease(rng: &mut Pcg64Mcg, store: &Store) -> Option<LeaseId> {
    (below(rng, 3) > 0).then(|| session(rng, store))
}

fn command(rng: &mut Pcg64Mcg, store: &Store) -> Command {
    let name = pick(rng, &NAMES);
    match below(rng, 12) {
        0 | 1 => {
            let owner = OWNERS[below(rng, OWNERS.len() as u64) as usize];
            Command::Grant { ttl_ms: 1_000, owner: owner.map(str::to_string) }
        }
        2 | 3 => campaign(name, session(rng, store), b"v").expect("a valid campaign"),
        4 => {
            // Unguarded, guarded by the candidacy's token, or by a stale one.
            let s = session(rng, store);
            let token = store.get(&candidate_key(name, s)).map_or(0, |kv| kv.create_revision);
            match below(rng, 3) {
                0 => resign(name, s, None),
                1 => resign(name, s, Some(token)),
                _ => resign(name, s, Some(token.saturating_sub(1))),
            }
        }
        5 => {
            let s = session(rng, store);
            let token = store.get(&candidate_key(name, s)).map_or(0, |kv| kv.create_revision);
            proclaim(name, s, token + below(rng, 2), b"w").expect("a valid proclaim")
        }
        6 => Command::Revoke { lease: session(rng, store) },
        7 => Command::Expire { lease: session(rng, store) },
        8 => Command::Put {
            key: election_key(rng, store),
            value: vec![1],
            if_mod_revision: None,
            lease: maybe_lease(rng, store),
        },
        9 => Command::Delete { key: election_key(rng, store), if_mod_revision: None },
        _ => {
            // Several keys created and removed at one revision.
            let mut ops: Vec<TxnOp> = Vec::new();
            for _ in 0..below(rng, 5) {
                let key = election_key(rng, store);
                if ops.iter().any(|op| matches!(op, TxnOp::Put { key: k, .. } | TxnOp::Delete { key: k } if *k == key)) {
                    continue;
                }
                ops.push(if below(rng, 2) == 0 {
                    TxnOp::Delete { key }
                } else {
                    TxnOp::Put { key, value: vec![2], lease: maybe_lease(rng, store) }
                });
            }
            Command::Txn { compare: vec![], success: ops, failure: vec![] }
        }
    }
}

/// The candidates of each election, counted from the keys.
fn recount(store: &Store) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for kv in
        store.keys_from(ELECTIONS_PREFIX).take_while(|kv| kv.key.starts_with(ELECTIONS_PREFIX))
    {
        if let Some((name, _)) = parse_candidate_key(&kv.key) {
            *counts.entry(name.to_string()).or_insert(0) += 1;
        }
    }
    counts
}

fn assert_counts(store: &Store, context: &str) {
    let counts = recount(store);
    assert_eq!(store.elections(), counts.len(), "{context}: elections, {counts:?}");
    for name in NAMES {
        let want = counts.get(name).copied().unwrap_or(0);
        assert_eq!(store.candidates(name), want, "{context}: candidates of {name:?}");
    }
    assert_eq!(store.candidates("nobody"), 0, "{context}");
    // The listing names exactly the counted elections.
    assert_eq!(Names::new(store).collect::<Vec<_>>().len(), counts.len(), "{context}: names");
    // Each owner's leases and the candidate keys attached to them.
    let mut owners: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for lease in store.leases() {
        let Some(owner) = lease.owner.as_deref() else { continue };
        let held = owners.entry(owner).or_default();
        held.0 += 1;
        held.1 += lease.keys.iter().filter(|k| parse_candidate_key(k).is_some()).count();
    }
    for owner in OWNERS.into_iter().flatten().chain(["nobody"]) {
        let (leases, candidacies) = owners.get(owner).copied().unwrap_or_default();
        assert_eq!(store.owner_leases(owner), leases, "{context}: leases of {owner:?}");
        assert_eq!(
            store.owner_candidacies(owner),
            candidacies,
            "{context}: candidacies of {owner:?}"
        );
    }
}

fn restored(store: &Store) -> Store {
    let mut t = Store::new();
    t.restore(&store.snapshot()).expect("a store's own snapshot restores");
    t
}

#[test]
fn election_counts_equal_a_recount_after_every_step_and_restore() {
    let mut campaigns = 0;
    let mut ended_with_keys = 0;
    let mut peak = 0;
    let mut owned_candidacies = 0;
    for seed in 0..SEEDS {
        let mut rng = Pcg64Mcg::seed_from_u64(seed);
        let mut store = Store::new();
        // Restored from a snapshot at some step, then fed the same commands.
        let mut copy: Option<Store> = None;
        for step in 0..STEPS {
            let c = command(&mut rng, &store);
            let response = store.execute(&c);
            match &response {
                Response::Txn { succeeded: true, .. } if matches!(c, Command::Txn { .. }) => {
                    campaigns += 1
                }
                Response::LeaseEnded { deleted, .. } if *deleted > 0 => ended_with_keys += 1,
                _ => {}
            }
            if let Some(copy) = copy.as_mut() {
                assert_eq!(copy.execute(&c), response, "seed {seed} step {step}");
            }
            let context = format!("seed {seed} step {step} after {c:?}");
            assert_counts(&store, &context);
            peak = peak.max(store.elections());
            owned_candidacies = owned_candidacies.max(store.owner_candidacies("app"));
            if let Some(copy) = copy.as_ref() {
                assert_counts(copy, &format!("restored copy, {context}"));
            }
            if below(&mut rng, 40) == 0 {
                let t = restored(&store);
                assert_counts(&t, &format!("just restored, {context}"));
                assert_eq!(t.elections(), store.elections(), "{context}");
                // The caps read the same in the restored store.
                for name in NAMES {
                    let s = session(&mut rng, &store);
                    assert_eq!(
                        check_caps_in(&t, name, s),
                        check_caps_in(&store, name, s),
                        "{context}"
                    );
                }
                if below(&mut rng, 2) == 0 {
                    store = t;
                } else {
                    copy = Some(t);
                }
            }
        }
    }
    // The runs did what they are for: elections came and went, with their
    // sessions too.
    assert!(campaigns > 1_000, "{campaigns} successful transactions");
    assert!(ended_with_keys > 100, "{ended_with_keys} sessions ended with keys");
    assert_eq!(peak, NAMES.len(), "every name had candidates at some point");
    assert!(owned_candidacies > 1, "an owner stood in several elections at once");
}
