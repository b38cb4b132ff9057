//! What a compaction of the key-value log costs, part by part: the store's
//! serialisation (the replica's `sm.snapshot()`, on the log task), then the
//! log store's snapshot file and journal swap (in the background), with
//! appends timed while it runs.
//!
//! `cargo run --release -p tenure-node --example snapshot_cost -- [KEYS] [ENTRIES]`
//! (defaults: 100,000 keys of 128 bytes, a journal of 10,000 entries). Run
//! with `RUST_LOG=tenure_node=debug` for the log store's own timings.

use std::time::Instant;
use tenure_kv::{Command, Store};
use tenure_node::log_store::LogStore;
use tenure_node::FencingToken;
use tenure_replica::{Entry, LogOp, Payload, Position, StateMachine};

fn put(i: usize) -> Vec<u8> {
    Command::Put {
        key: format!("bench/{i:08}"),
        value: vec![b'v'; 128],
        if_mod_revision: None,
        lease: None,
    }
    .encode()
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let mut args = std::env::args().skip(1).map(|a| a.parse::<usize>().expect("a number"));
    let keys = args.next().unwrap_or(100_000);
    let entries = args.next().unwrap_or(10_000);
    let token = FencingToken(1);
    let mut sm = Store::new();
    for i in 0..keys {
        sm.apply(Position { token, index: i as u64 + 1 }, &put(i));
    }
    for round in 0..3 {
        let t = Instant::now();
        let data = sm.snapshot();
        println!("round {round}: sm.snapshot(): {:.1} ms, {} bytes", ms(t), data.len());
    }
    let data = sm.snapshot();
    let dir = tempfile::tempdir_in(".").expect("a temporary directory");
    let (store, _, _) = LogStore::open(dir.path()).expect("open");
    store.write(vec![LogOp::Promise(token)]).expect("promise");
    let batch = 64;
    let mut next = 1u64;
    let append = |store: &LogStore, next: &mut u64, n: usize| {
        let es: Vec<Entry> = (0..n)
            .map(|k| {
                let e = Entry {
                    pos: Position { token, index: *next },
                    payload: Payload::Command(put(k)),
                };
                *next += 1;
                e
            })
            .collect();
        store.write(vec![LogOp::Append(es)]).expect("append");
    };
    let t = Instant::now();
    for _ in 0..entries / batch {
        append(&store, &mut next, batch);
    }
    println!(
        "{} appends of {batch} entries: {:.2} ms each",
        entries / batch,
        ms(t) / (entries / batch) as f64
    );
    let last = Position { token, index: next - 1 };
    let t = Instant::now();
    let membership = tenure_replica::Membership {
        at: Position::ZERO,
        members: tenure_replica::Members::bootstrap(&[tenure_core::NodeId(1)]),
    };
    store.write(vec![LogOp::Compact { last, membership, data }]).expect("compact");
    println!("LogStore::write(Compact): {:.1} ms", ms(t));
    // Appends while the compaction is written in the background.
    let (mut n, mut worst) = (0, 0.0f64);
    while store.compactions() + store.compaction_failures() == 0 {
        let a = Instant::now();
        append(&store, &mut next, batch);
        worst = worst.max(ms(a));
        n += 1;
    }
    println!(
        "compaction written in {:.1} ms; meanwhile {n} appends of {batch} entries, the slowest {worst:.2} ms",
        ms(t)
    );
    let t = Instant::now();
    append(&store, &mut next, batch);
    println!("next append: {:.2} ms", ms(t));
}
