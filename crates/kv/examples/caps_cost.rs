//! What a campaign's cap check costs under the replica's lock, with 0 and
//! with 10,000 elections (docs/ELECTIONS.md, "Limits"):
//!
//! ```text
//! cargo run --release -p tenure-kv --example caps_cost
//! ```
//!
//! (An empty map answers without hashing: the first line is the cheapest.)
//! For each store it times [`check_caps_in`] for a new name (the case that
//! used to count every election name) and, for comparison, that former
//! count: a scan of the names ([`Names`]).

use std::hint::black_box;
use std::time::{Duration, Instant};
use tenure_kv::{
    campaign, check_caps_in, Command, LeaseId, Names, Response, Store, MAX_ELECTIONS,
    MAX_KEYS_PER_LEASE,
};

/// Checks timed per store, for the O(1) check.
const CHECKS: u32 = 1_000_000;

/// Scans timed per store, for the former count (milliseconds each at 10,000).
const SCANS: u32 = 50;

/// A store with `elections` elections of one candidate each, the sessions
/// holding as many candidacies as they may.
fn store_with(elections: usize) -> Store {
    let mut store = Store::new();
    let mut session = LeaseId(0);
    for i in 0..elections {
        if i % (MAX_KEYS_PER_LEASE - 1) == 0 {
            session = match store.execute(&Command::Grant { ttl_ms: 60_000, owner: None }) {
                Response::Granted { lease, .. } => lease,
                other => panic!("a grant: {other:?}"),
            };
        }
        let name = format!("election-{i:05}");
        let c = campaign(&name, session, b"host:1").expect("a valid campaign");
        assert!(matches!(store.execute(&c), Response::Txn { succeeded: true, .. }));
    }
    assert_eq!(store.elections(), elections);
    store
}

fn per_call(total: Duration, calls: u32) -> f64 {
    total.as_nanos() as f64 / f64::from(calls)
}

fn main() {
    for elections in [0, 1, 100, 1_000, MAX_ELECTIONS - 1] {
        let store = store_with(elections);
        let started = Instant::now();
        for _ in 0..CHECKS {
            black_box(check_caps_in(black_box(&store), black_box("a-new-one"), LeaseId(1)).is_ok());
        }
        let check = per_call(started.elapsed(), CHECKS);
        let started = Instant::now();
        for _ in 0..SCANS {
            black_box(Names::new(black_box(&store)).take(MAX_ELECTIONS).count());
        }
        let scan = per_call(started.elapsed(), SCANS);
        println!(
            "{elections:>5} elections: check_caps_in {check:>6.1} ns; the former scan of the \
             names {:>10.1} µs",
            scan / 1_000.0
        );
    }
}
