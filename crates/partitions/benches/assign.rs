//! Timings of `assign` on 10,000 partitions and 100 members, and of the
//! keeper's look at such a group in a store.
//!
//! `cargo bench -p tenure-partitions` runs every scenario 200 times and
//! prints p50, p99 and max, then times a few inputs at the limits (one run
//! each). Run without `--bench` (as `cargo test --all-targets` does), each
//! scenario runs once and the limits are skipped, as a smoke test.
//!
//! The look: a node reads its store under the replica's lock, which its
//! log waits for. What the keeper holds it for (`GroupKeeper::look`, which
//! copies the group's keys) is timed beside what it then does without it
//! (`plan_from`: parse and decide), beside `Group::read`, which parses the
//! whole group where it lies, and beside `plan`, both in the store (what
//! the node held the lock for before it copied).

use std::hint::black_box;
use std::time::{Duration, Instant};

use tenure_core::Instant as CoreInstant;
use tenure_kv::{Command, LeaseId, Response, Store};
use tenure_partitions::group::{owner_key, GroupSpec, MemberSpec, Ownership};
use tenure_partitions::{assign, recipe, Group, GroupKeeper, Member, MemberId};

const PARTITIONS: u32 = 10_000;
const MEMBERS: u64 = 100;

struct Scenario {
    name: &'static str,
    members: Vec<Member>,
    current: Vec<Option<MemberId>>,
}

fn equal(count: u64) -> Vec<Member> {
    (1..=count).map(Member::new).collect()
}

fn weighted_zoned(count: u64) -> Vec<Member> {
    (1..=count)
        .map(|id| {
            Member::new(id)
                .with_weight(1 + (id % 4) as u32)
                .in_zone(["a", "b", "c"][(id % 3) as usize])
        })
        .collect()
}

fn owners(members: &[Member], current: &[Option<MemberId>]) -> Vec<Option<MemberId>> {
    assign(PARTITIONS, members, current).expect("valid input").owners
}

fn scenarios() -> Vec<Scenario> {
    let none = vec![None; PARTITIONS as usize];
    let balanced = owners(&equal(MEMBERS), &none);
    let weighted = owners(&weighted_zoned(MEMBERS), &none);
    // Each member prefers 20 partitions and excludes 20 others, spread out.
    let picky: Vec<Member> = (1..=MEMBERS)
        .map(|id| {
            let p = |k: u64| ((id * 97 + k * 1_009) % u64::from(PARTITIONS)) as u32;
            Member::new(id).preferring((0..20).map(p)).excluding((20..40).map(p))
        })
        .collect();
    let picky_owners = owners(&picky, &none);
    vec![
        Scenario {
            name: "initial (100 equal members)",
            members: equal(MEMBERS),
            current: none.clone(),
        },
        Scenario {
            name: "one leaves (99 remain)",
            members: equal(MEMBERS - 1),
            current: balanced.clone(),
        },
        Scenario {
            name: "one joins (101)",
            members: equal(MEMBERS + 1),
            current: balanced.clone(),
        },
        Scenario {
            name: "unchanged (fixpoint)",
            members: equal(MEMBERS),
            current: balanced.clone(),
        },
        Scenario {
            name: "weighted + 3 zones, initial",
            members: weighted_zoned(MEMBERS),
            current: none.clone(),
        },
        Scenario {
            name: "weighted + 3 zones, from equal",
            members: weighted_zoned(MEMBERS),
            current: balanced.clone(),
        },
        Scenario {
            name: "weighted + 3 zones, one leaves",
            members: weighted_zoned(MEMBERS)[1..].to_vec(),
            current: weighted.clone(),
        },
        Scenario {
            name: "20 prefs + 20 excl each, initial",
            members: picky.clone(),
            current: none,
        },
        Scenario {
            name: "20 prefs + 20 excl each, one leaves",
            members: picky[1..].to_vec(),
            current: picky_owners,
        },
    ]
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

/// One run of a few large or awkward inputs: the initial assignment, then
/// the reshuffle after the first member leaves.
fn limits() {
    let restricted = |id: u64, partitions: u32, lo: u32, len: u32| {
        Member::new(id).excluding((0..partitions).filter(move |p| *p < lo || *p >= lo + len))
    };
    let cases: Vec<(&str, u32, Vec<Member>)> = vec![
        ("100,000 partitions, 10,000 equal members", 100_000, equal(10_000)),
        ("99,999 partitions, 10,000 weighted zoned", 99_999, weighted_zoned(10_000)),
        (
            "100,000 p., 10,000 m. excluding 1 each",
            100_000,
            (1..=10_000).map(|i| Member::new(i).excluding([i as u32 * 7])).collect(),
        ),
        (
            "10,000 p., 200 m., half on 50 each",
            10_000,
            (0..200u64)
                .map(|i| {
                    if i % 2 == 0 {
                        restricted(i, 10_000, i as u32 * 50, 50)
                    } else {
                        Member::new(i)
                    }
                })
                .collect(),
        ),
        (
            "3,000 p., 2,000 m. in pairs on 3 each",
            3_000,
            (0..2_000u64).map(|i| restricted(i, 3_000, (i / 2) as u32 * 3, 3)).collect(),
        ),
    ];
    println!();
    println!("at the limits, one run each (initial, then one leaves):");
    for (name, partitions, members) in cases {
        let start = Instant::now();
        let first = assign(partitions, &members, &vec![None; partitions as usize]).expect("valid");
        let initial = start.elapsed();
        let start = Instant::now();
        let second = assign(partitions, &members[1..], &first.owners).expect("valid");
        let leave = start.elapsed();
        println!(
            "{name:<42} {initial:>10.2?} {leave:>10.2?} {:>7} moves, {} tiers",
            second.moves.len(),
            second.tiers.len()
        );
    }
}

/// A store holding group `g` of [`PARTITIONS`] partitions, owned evenly
/// by [`MEMBERS`] members.
fn group_store() -> Store {
    let mut s = Store::new();
    let spec = GroupSpec { partitions: PARTITIONS, stabilise_ms: 0 };
    let mut ids = Vec::new();
    for i in 0..MEMBERS {
        let Response::Granted { lease, .. } =
            s.execute(&Command::Grant { ttl_ms: 60_000, owner: None })
        else {
            panic!("a grant")
        };
        let c = recipe::join(&s, "g", (i == 0).then_some(&spec), lease.0, &MemberSpec::default());
        assert!(recipe::outcome(&s.execute(&c.expect("a join"))).is_some());
        ids.push(lease.0);
    }
    for p in 0..PARTITIONS {
        let member = ids[p as usize % ids.len()];
        let value = serde_json::to_vec(&Ownership { member, release: false, to: None }).unwrap();
        let put = Command::Put {
            key: owner_key("g", p),
            value,
            if_mod_revision: None,
            lease: Some(LeaseId(member)),
        };
        assert!(matches!(s.execute(&put), Response::Put { .. }));
    }
    s
}

/// The keeper's look at a changed group: under the lock, then after.
fn look(runs: usize) {
    let store = group_store();
    let now = CoreInstant::ZERO;
    let (mut held, mut after, mut read, mut whole) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        // A fresh keeper has planned nothing: the group counts as changed.
        let mut keeper = GroupKeeper::new();
        let start = Instant::now();
        let look = keeper.look(now, black_box(&store));
        held.push(start.elapsed());
        let start = Instant::now();
        let plan = keeper.plan_from(look);
        after.push(start.elapsed());
        assert!(plan.commands.is_empty(), "the group is balanced");
        let start = Instant::now();
        black_box(Group::read(black_box(&store), "g"));
        read.push(start.elapsed());
        let start = Instant::now();
        black_box(GroupKeeper::new().plan(now, black_box(&store)));
        whole.push(start.elapsed());
    }
    println!();
    println!("the keeper's look at a changed group of {PARTITIONS} partitions, {MEMBERS} members:");
    for (name, mut times) in [
        ("look: the store held (copy)", held),
        ("plan_from: after (parse, decide)", after),
        ("Group::read (parse in the store)", read),
        ("plan: look and plan_from in the store", whole),
    ] {
        times.sort();
        println!(
            "{name:<38} {:>10.2?} {:>10.2?} {:>10.2?}",
            percentile(&times, 0.5),
            percentile(&times, 0.99),
            times[times.len() - 1]
        );
    }
}

fn main() {
    let benching = std::env::args().any(|a| a == "--bench");
    let runs = if benching { 200 } else { 1 };
    println!("assign: {PARTITIONS} partitions, {MEMBERS} members, {runs} runs per scenario");
    println!("{:<38} {:>10} {:>10} {:>10} {:>7}", "scenario", "p50", "p99", "max", "moves");
    for s in scenarios() {
        let mut times = Vec::with_capacity(runs);
        let mut moves = 0;
        for _ in 0..runs {
            let start = Instant::now();
            let out =
                assign(PARTITIONS, black_box(&s.members), black_box(&s.current)).expect("valid");
            times.push(start.elapsed());
            moves = black_box(out).moves.len();
        }
        times.sort();
        println!(
            "{:<38} {:>10.2?} {:>10.2?} {:>10.2?} {:>7}",
            s.name,
            percentile(&times, 0.5),
            percentile(&times, 0.99),
            times[times.len() - 1],
            moves
        );
    }
    look(runs.min(50));
    if benching {
        limits();
    }
}
