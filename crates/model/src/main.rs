//! Runs the exhaustive check of the election core and prints what it found.
//!
//! ```text
//! cargo run --release -p tenure-model -- [--quick] [--contested] [--steps N] [--restarts N]
//!     [--transfers N] [--duplicates N] [--rng-period N] [--max-term N] [--depth N]
//!     [--unbounded-depth] [--durability faithful|forget-vote|forget-all] [--threads N] [--hunt]
//!     [--protocol raft|ranked|paxos] [--elected]
//! ```
//! Defaults are the protocol's [`Bounds::deep`] from the fresh cluster with
//! faithful storage. `--quick` resets the bounds to the protocol's
//! [`Bounds::quick`] (give it first, later flags adjust it); `--contested`
//! starts after [`contested_prefix`]; `--elected` after [`elected_prefix`]
//! (with `--steps` counted beyond the prefix's clock steps);
//! `--hunt` stops at the first safety violation. Without a depth bound the
//! search is depth-first (small memory), with one breadth-first. The exit
//! status is non-zero if a safety property is violated, the exploration is
//! incomplete, or (except with `--hunt`) no leader is ever elected.

use std::error::Error;
use std::time::Duration;
use tenure_core::ProtocolKind;
use tenure_model::check::{
    check_reporting, contested_prefix, elected_model, elected_prefix, Progress, Snapshot,
};
use tenure_model::model::{LEADER_ELECTED, REACHABILITY_PROPERTIES, SAFETY_PROPERTIES};
use tenure_model::{Bounds, Durability, ElectionModel};

/// How often a running check reports its progress (on standard error).
const PROGRESS_EVERY: Duration = Duration::from_secs(30);

/// What the command line asked for.
struct Args {
    protocol: ProtocolKind,
    bounds: Bounds,
    durability: Durability,
    threads: usize,
    hunt: bool,
    start: Start,
}

/// The state the exploration starts from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Start {
    /// The fresh cluster.
    Fresh,
    /// After [`contested_prefix`].
    Contested,
    /// After [`elected_prefix`], with the clock steps counted from there.
    Elected,
}

fn parse_args() -> Result<Args, Box<dyn Error>> {
    // The protocol first: `--quick` and the default bounds depend on it.
    let raw: Vec<String> = std::env::args().skip(1).collect();
    let mut protocol = ProtocolKind::Raft;
    if let Some(i) = raw.iter().position(|a| a == "--protocol") {
        protocol = raw.get(i + 1).ok_or("--protocol needs a value")?.parse()?;
    }
    let mut bounds = Bounds::deep(protocol);
    let mut start = Start::Fresh;
    let mut durability = Durability::Faithful;
    let mut threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut hunt = false;
    let mut args = raw.into_iter();
    while let Some(flag) = args.next() {
        if flag == "--hunt" {
            hunt = true;
            continue;
        }
        if flag == "--unbounded-depth" {
            bounds.max_depth = None;
            continue;
        }
        if flag == "--contested" {
            start = Start::Contested;
            continue;
        }
        if flag == "--elected" {
            start = Start::Elected;
            continue;
        }
        if flag == "--quick" {
            bounds = Bounds::quick(protocol);
            continue;
        }
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--steps" => bounds.clock_steps_per_node = value.parse()?,
            "--leader-steps" => bounds.leader_clock_steps = Some(value.parse()?),
            "--restarts" => bounds.restarts = value.parse()?,
            "--transfers" => bounds.transfers = value.parse()?,
            "--duplicates" => bounds.duplicates = value.parse()?,
            "--max-term" => bounds.max_term = value.parse()?,
            "--threads" => threads = value.parse()?,
            "--depth" => bounds.max_depth = Some(value.parse()?),
            "--rng-period" => bounds.rng_period = value.parse()?,
            "--protocol" => {} // read above
            "--durability" => {
                durability = match value.as_str() {
                    "faithful" => Durability::Faithful,
                    "forget-vote" => Durability::ForgetVote,
                    "forget-all" => Durability::ForgetAll,
                    other => return Err(format!("unknown durability {other:?}").into()),
                }
            }
            other => return Err(format!("unknown flag {other:?}").into()),
        }
    }
    Ok(Args { protocol, bounds, durability, threads, hunt, start })
}

fn main() -> Result<(), Box<dyn Error>> {
    let Args { protocol, bounds, durability, threads, hunt: hunt_only, start } = parse_args()?;
    let from = match start {
        Start::Fresh => "from the fresh cluster",
        Start::Contested => "from a contested election",
        Start::Elected => "from an elected leader (clock steps counted from there)",
    };
    println!(
        "checking 3 {protocol} nodes {from}, {bounds:?}, storage {durability:?}, {threads} thread(s)"
    );
    let model = match start {
        Start::Fresh => ElectionModel::of(protocol, bounds, durability),
        Start::Contested => {
            let prefix = contested_prefix(protocol, bounds, threads)
                .ok_or("no contested election reachable")?;
            println!("contested election after {prefix:?}");
            ElectionModel::of(protocol, bounds, durability).starting_after(prefix)
        }
        Start::Elected => {
            let prefix = elected_prefix(protocol, bounds).ok_or("the greedy run elects nobody")?;
            println!("elected after {prefix:?}");
            elected_model(protocol, bounds, durability).ok_or("the greedy run elects nobody")?
        }
    };
    let mut report_progress = |s: Snapshot| {
        eprintln!(
            "  ... {} unique states ({} generated, max depth {}) after {:.0?}",
            s.unique_states, s.total_states, s.max_depth, s.elapsed
        );
    };
    let progress = Progress { every: PROGRESS_EVERY, report: &mut report_progress };
    let report = check_reporting(model, threads, hunt_only, progress);
    println!(
        "explored {} unique states ({} generated, max depth {}) in {:.2?}; complete: {}",
        report.unique_states,
        report.total_states,
        report.max_depth,
        report.elapsed,
        report.complete
    );
    for name in SAFETY_PROPERTIES {
        match report.discoveries.get(name) {
            None => println!("  always    {name}: holds"),
            Some(path) => {
                println!("  always    {name}: VIOLATED, counterexample:\n{path}");
                println!("  last state ghost: {:?}", path.last_state().ghost);
            }
        }
    }
    for name in REACHABILITY_PROPERTIES {
        match report.discoveries.get(name) {
            Some(path) => println!("  sometimes {name}: reached, example:\n{path}"),
            None => println!("  sometimes {name}: NOT reached"),
        }
    }
    if !report.violated().is_empty() {
        return Err("a safety property was violated (see above)".into());
    }
    if !report.complete {
        return Err("the exploration did not complete".into());
    }
    if !hunt_only && !report.discoveries.contains_key(LEADER_ELECTED) {
        return Err("no leader was ever elected: the check is vacuous".into());
    }
    Ok(())
}
