//! `tenure-model --replica`: the check of the replica's synchronisation rule
//! ([`tenure_model::replica`]).
//!
//! ```text
//! cargo run --release -p tenure-model -- --replica [--ci] [--threads N] [--hunt | --deep-hunt]
//!     [--driver faithful|send-before-persist|forget-promise|blind-sync|ungated-changes]
//!     [--fresh | --four-voters] [--forgotten-views] [--leaderships N] [--proposals N]
//!     [--steps N] [--restarts N] [--duplicates N] [--snapshot-every N] [--append-entries N]
//!     [--changes N] [--depth N]
//! ```
//! `--four-voters` starts from a ready leader whose cluster grew to four
//! voters by two changes of members (they count against `--changes`).
//! Without a bound flag it runs the suite [`DEEP_CHECKS`] (`--ci`:
//! [`CI_CHECKS`]). With one, it runs one check from a ready leader
//! (`--fresh`: from the fresh cluster) within [`ReplicaBounds::QUICK`] with
//! those bounds changed. The exit status is non-zero if a check violates a
//! safety property, does not complete, or (except with `--hunt`, which stops
//! at the first violation breadth-first, the shortest counterexample, and
//! `--deep-hunt`, depth-first, one found sooner) misses a witness.

use std::error::Error;
use std::time::Duration;
use tenure_model::check::{Progress, Snapshot};
use tenure_model::replica::check::{
    check_replica, hunt_replica_depth_first, ReplicaCheck, ReplicaReport, ReplicaStart, CI_CHECKS,
    DEEP_CHECKS,
};
use tenure_model::replica::{
    Driver, ReplicaBounds, Views, CHANGE_COMMITS, READY_AFTER_CHANGE, REPLICA_SAFETY,
    REPLICA_WITNESSES, SNAPSHOT_INSTALLED,
};

/// How often a running check reports its progress (on standard error).
pub const PROGRESS_EVERY: Duration = Duration::from_secs(30);

/// What the command line asked for.
struct Args {
    checks: Vec<ReplicaCheck>,
    driver: Driver,
    threads: usize,
    hunt: bool,
    deep_hunt: bool,
}

fn parse(args: impl Iterator<Item = String>) -> Result<Args, Box<dyn Error>> {
    let mut args = args.peekable();
    let (mut ci, mut fresh, mut forgotten, mut hunt) = (false, false, false, false);
    let (mut four, mut deep_hunt) = (false, false);
    let mut driver = Driver::Faithful;
    let mut threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut set: Vec<(String, u64)> = Vec::new();
    while let Some(flag) = args.next() {
        match flag.as_str() {
            "--ci" => ci = true,
            "--fresh" => fresh = true,
            "--four-voters" => four = true,
            "--forgotten-views" => forgotten = true,
            "--hunt" => hunt = true,
            "--deep-hunt" => (hunt, deep_hunt) = (true, true),
            _ => {
                let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
                match flag.as_str() {
                    "--threads" => threads = value.parse()?,
                    "--driver" => driver = parse_driver(&value)?,
                    _ => set.push((flag, value.parse()?)),
                }
            }
        }
    }
    let single = fresh || four || forgotten || !set.is_empty();
    if ci && single {
        return Err("--ci runs its own suite: leave out the bound flags".into());
    }
    let checks = match (ci, single) {
        (true, _) => CI_CHECKS.to_vec(),
        (false, false) => DEEP_CHECKS.to_vec(),
        (false, true) => vec![ReplicaCheck {
            name: "as given",
            start: match (fresh, four) {
                (true, true) => return Err("--fresh and --four-voters: choose one".into()),
                (true, false) => ReplicaStart::Fresh,
                (false, true) => ReplicaStart::FourVoters,
                (false, false) => ReplicaStart::Ready,
            },
            bounds: bounds_from(&set)?,
            views: if forgotten { Views::ForgottenOnRestart } else { Views::Monotone },
        }],
    };
    Ok(Args { checks, driver, threads, hunt, deep_hunt })
}

/// [`ReplicaBounds::QUICK`] with the bound flags applied.
fn bounds_from(set: &[(String, u64)]) -> Result<ReplicaBounds, Box<dyn Error>> {
    let mut bounds = ReplicaBounds::QUICK;
    for (flag, value) in set {
        let value = *value;
        let small = || u8::try_from(value).map_err(|_| format!("{flag}: at most 255"));
        match flag.as_str() {
            "--leaderships" => bounds.leaderships = small()?,
            "--proposals" => bounds.proposals = small()?,
            "--steps" => bounds.clock_steps_per_node = small()?,
            "--restarts" => bounds.restarts = small()?,
            "--duplicates" => bounds.duplicates = small()?,
            "--snapshot-every" => bounds.snapshot_every = Some(value),
            "--append-entries" => bounds.append_entries = Some(usize::try_from(value)?),
            "--depth" => bounds.max_depth = Some(usize::try_from(value)?),
            "--changes" => bounds.changes = small()?,
            other => return Err(format!("unknown flag {other:?}").into()),
        }
    }
    Ok(bounds)
}

/// What `--replica --help` prints.
const USAGE: &str = "\
The replica's synchronisation rule: leaderships, proposals, restarts, snapshots and changes of
members, every interleaving within the bounds.

Usage:
  tenure-model --replica [--ci] [--threads N] [--hunt | --deep-hunt]
      [--driver faithful|send-before-persist|forget-promise|blind-sync|ungated-changes]
      [--fresh | --four-voters] [--forgotten-views] [--leaderships N] [--proposals N]
      [--steps N] [--restarts N] [--duplicates N] [--snapshot-every N] [--append-entries N]
      [--changes N] [--depth N]

Without a bound flag: the deep suite (--ci: the CI suite). With one: one check from a ready
leader (--fresh: from the fresh cluster) with those bounds. A planted driver bug (--driver)
must be caught. The exit status is non-zero on a safety violation, an incomplete check or a
missed witness.

Example (what CI runs):
  cargo run --release -p tenure-model -- --replica --ci
";

/// Runs the checks the command line asks for (`args` without `--replica`).
pub fn main(args: impl Iterator<Item = String>) -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = args.collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        print!("{USAGE}");
        return Ok(());
    }
    let args = parse(args.into_iter())?;
    let mut outcomes = Vec::new();
    for check in &args.checks {
        let (report, failures) = run(&args, check)?;
        outcomes.push((check.name, report, failures));
    }
    println!("\nsummary (driver {:?}):", args.driver);
    for (name, r, failures) in &outcomes {
        let verdict = if failures.is_empty() { "ok".to_string() } else { failures.join("; ") };
        println!(
            "  {name}: {} unique states, depth {}, {:.1?}: {verdict}",
            r.unique_states, r.max_depth, r.elapsed
        );
    }
    let failed = outcomes.iter().filter(|(_, _, f)| !f.is_empty()).count();
    if failed > 0 {
        return Err(format!("{failed} of {} replica checks failed", outcomes.len()).into());
    }
    Ok(())
}

/// Runs one check and prints what it found; returns why it failed, if it did.
fn run(args: &Args, check: &ReplicaCheck) -> Result<(ReplicaReport, Vec<String>), Box<dyn Error>> {
    let ReplicaCheck { name, start, bounds, views } = check;
    println!(
        "\nchecking replicas, {name}: from {start:?}, {bounds:?}, views {views:?}, \
         driver {:?}, {} thread(s)",
        args.driver, args.threads
    );
    let model = check.model(args.driver).ok_or("no ready leader reachable")?;
    let mut report_progress = |s: Snapshot| {
        eprintln!(
            "  ... {} unique states ({} generated, max depth {}) after {:.0?}",
            s.unique_states, s.total_states, s.max_depth, s.elapsed
        );
    };
    let progress = Progress { every: PROGRESS_EVERY, report: &mut report_progress };
    let report = if args.deep_hunt {
        hunt_replica_depth_first(model, args.threads, Some(progress))
    } else {
        check_replica(model, args.threads, args.hunt, Some(progress))
    };
    println!(
        "explored {} unique states ({} generated, max depth {}) in {:.2?}; complete: {}",
        report.unique_states,
        report.total_states,
        report.max_depth,
        report.elapsed,
        report.complete
    );
    for name in REPLICA_SAFETY {
        match report.discoveries.get(name) {
            None => println!("  always    {name}: holds"),
            Some(path) => {
                println!("  always    {name}: VIOLATED, counterexample:\n{path}");
                println!("  last state ghost: {:?}", path.last_state().ghost);
            }
        }
    }
    let missed = report.missed(bounds);
    let optional = [SNAPSHOT_INSTALLED, CHANGE_COMMITS, READY_AFTER_CHANGE];
    for name in REPLICA_WITNESSES.into_iter().chain(optional) {
        match report.discoveries.get(name) {
            Some(path) => println!("  sometimes {name}: reached, example:\n{path}"),
            None if missed.contains(&name) => {
                println!("  sometimes {name}: NOT REACHED: the check checked less than it claims")
            }
            None => println!("  sometimes {name}: not reached"),
        }
    }
    let mut failures = Vec::new();
    if !report.violated().is_empty() {
        failures.push(format!("VIOLATED: {}", report.violated().join(", ")));
    }
    if !report.complete {
        failures.push("INCOMPLETE".to_string());
    }
    if !args.hunt && !missed.is_empty() {
        failures.push(format!("MISSED WITNESS: {}", missed.join(", ")));
    }
    Ok((report, failures))
}

fn parse_driver(value: &str) -> Result<Driver, Box<dyn Error>> {
    match value {
        "faithful" => Ok(Driver::Faithful),
        "send-before-persist" => Ok(Driver::SendBeforePersist),
        "forget-promise" => Ok(Driver::ForgetPromise),
        "blind-sync" => Ok(Driver::BlindSync),
        "ungated-changes" => Ok(Driver::UngatedChanges),
        other => Err(format!("unknown driver {other:?}").into()),
    }
}
