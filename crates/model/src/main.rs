//! Runs the exhaustive check of the election core and prints what it found.
//!
//! ```text
//! cargo run --release -p tenure-model -- --replica ...   (see src/replica_cli.rs)
//! cargo run --release -p tenure-model -- --membership ...   (see src/members_cli.rs)
//! cargo run --release -p tenure-model -- [--protocol raft|ranked|paxos|all]
//!     [--fresh | --elected | --contested | --spy | --ci] [--quick] [--steps N] [--leader-steps N]
//!     [--restarts N] [--kills N] [--transfers N] [--duplicates N] [--rng-period N] [--max-term N]
//!     [--depth N] [--unbounded-depth] [--durability faithful|forget-vote|forget-all]
//!     [--threads N] [--hunt]
//! ```
//! Without a start flag it runs two checks of the protocol (raft unless
//! `--protocol` says otherwise; `all` is each in turn): from the fresh
//! cluster within [`Bounds::deep`], then from an elected leader within
//! [`Bounds::reelection`], where re-elections happen. `--fresh`, `--elected`
//! and `--contested` (after [`contested_prefix`], within [`Bounds::deep`])
//! run one of them; only then may the bounds be changed: `--quick` resets
//! them to the tests' ([`Bounds::quick`], [`Bounds::elected`],
//! [`Bounds::contested`]; give it first, later flags adjust it), and the
//! others set one bound each (from an elected leader, `--steps` counts
//! from the elected state and `--leader-steps` is the old leader's).
//! `--spy` checks failover on death notices from an elected leader within
//! [`Bounds::spy`] (a node may die, a spy reports it to each other node).
//! `--ci` checks every protocol from an elected leader within
//! [`Bounds::reelection_ci`], then with a spy within [`Bounds::spy_ci`].
//! `--hunt` stops at the first safety violation.
//! Without a depth bound the search is depth-first (small memory), with one
//! breadth-first.
//!
//! The exit status is non-zero if any check violates a safety property, does
//! not complete, or (except with `--hunt`) misses one of its witnesses
//! ([`Start::witnesses`]: a leader from a fresh cluster; a leader in a later
//! term and a contested election from an elected leader; a leader elected on
//! death notices, no timer fired, with a spy).

mod members_cli;
mod replica_cli;

use std::error::Error;
use tenure_core::ProtocolKind;
use tenure_model::check::{
    check_reporting, contested_prefix, elected_model, elected_prefix, spy_model, spy_prefix,
    unreachable_by_design, CheckReport, Progress, Snapshot, Start,
};
use tenure_model::model::{LEADER_ON_NOTICE, REACHABILITY_PROPERTIES, SAFETY_PROPERTIES};
use tenure_model::{Bounds, Durability, ElectionModel};

/// What the command line asked for.
struct Args {
    protocols: Vec<ProtocolKind>,
    /// `None`: the default pair of checks (fresh, then elected).
    start: Option<Start>,
    ci: bool,
    bounds: BoundFlags,
    durability: Durability,
    threads: usize,
    hunt: bool,
}

/// The bound flags given, applied to each check's default bounds.
#[derive(Default)]
struct BoundFlags {
    quick: bool,
    steps: Option<u8>,
    leader_steps: Option<u8>,
    restarts: Option<u8>,
    kills: Option<u8>,
    transfers: Option<u8>,
    duplicates: Option<u8>,
    rng_period: Option<u8>,
    max_term: Option<u64>,
    depth: Option<Option<usize>>,
}

impl BoundFlags {
    fn any(&self) -> bool {
        self.quick
            || self.steps.is_some()
            || self.leader_steps.is_some()
            || self.restarts.is_some()
            || self.kills.is_some()
            || self.transfers.is_some()
            || self.duplicates.is_some()
            || self.rng_period.is_some()
            || self.max_term.is_some()
            || self.depth.is_some()
    }

    /// The bounds of a check of `protocol` from `start`, `ci` for the CI variant.
    fn bounds(&self, protocol: ProtocolKind, start: Start, ci: bool) -> Bounds {
        let mut b = match (start, self.quick) {
            (Start::Elected, _) if ci => Bounds::reelection_ci(protocol),
            (Start::Fresh, false) | (Start::Contested, false) => Bounds::deep(protocol),
            (Start::Fresh, true) => Bounds::quick(protocol),
            (Start::Contested, true) => Bounds::contested(protocol),
            (Start::Elected, false) => Bounds::reelection(protocol),
            (Start::Elected, true) => Bounds::elected(protocol),
            (Start::Spy, _) if ci => Bounds::spy_ci(protocol),
            (Start::Spy, false) => Bounds::spy(protocol),
            (Start::Spy, true) => Bounds::spy_quick(protocol),
        };
        b.clock_steps_per_node = self.steps.unwrap_or(b.clock_steps_per_node);
        b.leader_clock_steps = self.leader_steps.or(b.leader_clock_steps);
        b.restarts = self.restarts.unwrap_or(b.restarts);
        b.kills = self.kills.unwrap_or(b.kills);
        b.transfers = self.transfers.unwrap_or(b.transfers);
        b.duplicates = self.duplicates.unwrap_or(b.duplicates);
        b.rng_period = self.rng_period.unwrap_or(b.rng_period);
        b.max_term = self.max_term.unwrap_or(b.max_term);
        b.max_depth = self.depth.unwrap_or(b.max_depth);
        b
    }
}

fn parse_args() -> Result<Args, Box<dyn Error>> {
    let mut protocols = vec![ProtocolKind::Raft];
    let mut start = None;
    let mut ci = false;
    let mut bounds = BoundFlags::default();
    let mut durability = Durability::Faithful;
    let mut threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut hunt = false;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        match flag.as_str() {
            "--hunt" => hunt = true,
            "--unbounded-depth" => bounds.depth = Some(None),
            "--quick" => bounds.quick = true,
            "--fresh" => set_start(&mut start, Start::Fresh)?,
            "--contested" => set_start(&mut start, Start::Contested)?,
            "--elected" => set_start(&mut start, Start::Elected)?,
            "--spy" => set_start(&mut start, Start::Spy)?,
            "--ci" => {
                set_start(&mut start, Start::Elected)?;
                ci = true;
                protocols = ProtocolKind::ALL.to_vec();
            }
            _ => {
                let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
                match flag.as_str() {
                    "--protocol" if value == "all" => protocols = ProtocolKind::ALL.to_vec(),
                    "--protocol" => protocols = vec![value.parse()?],
                    "--steps" => bounds.steps = Some(value.parse()?),
                    "--leader-steps" => bounds.leader_steps = Some(value.parse()?),
                    "--restarts" => bounds.restarts = Some(value.parse()?),
                    "--kills" => bounds.kills = Some(value.parse()?),
                    "--transfers" => bounds.transfers = Some(value.parse()?),
                    "--duplicates" => bounds.duplicates = Some(value.parse()?),
                    "--max-term" => bounds.max_term = Some(value.parse()?),
                    "--threads" => threads = value.parse()?,
                    "--depth" => bounds.depth = Some(Some(value.parse()?)),
                    "--rng-period" => bounds.rng_period = Some(value.parse()?),
                    "--durability" => durability = parse_durability(&value)?,
                    other => return Err(format!("unknown flag {other:?}").into()),
                }
            }
        }
    }
    if bounds.any() && (start.is_none() || ci) {
        return Err(
            "bound flags change one check: add --fresh, --elected, --contested or --spy".into()
        );
    }
    if ci && protocols.len() != ProtocolKind::ALL.len() {
        return Err("--ci checks every protocol: leave out --protocol".into());
    }
    Ok(Args { protocols, start, ci, bounds, durability, threads, hunt })
}

/// Sets the start flag, which may be given once.
fn set_start(start: &mut Option<Start>, to: Start) -> Result<(), &'static str> {
    match start.replace(to) {
        Some(_) => Err("give at most one of --fresh, --elected, --contested, --spy, --ci"),
        None => Ok(()),
    }
}

fn parse_durability(value: &str) -> Result<Durability, Box<dyn Error>> {
    match value {
        "faithful" => Ok(Durability::Faithful),
        "forget-vote" => Ok(Durability::ForgetVote),
        "forget-all" => Ok(Durability::ForgetAll),
        other => Err(format!("unknown durability {other:?}").into()),
    }
}

/// One finished check, for the closing summary.
struct Outcome {
    what: String,
    report: CheckReport,
    /// Why the check failed; empty if it passed.
    failures: Vec<String>,
}

/// What `--help` prints.
const USAGE: &str = "\
Exhaustive model checking of tenure's election core, replica and changes of members.

Usage:
  tenure-model [--protocol raft|ranked|paxos|all] [--fresh | --elected | --contested | --spy | --ci]
      [--quick] [--steps N] [--leader-steps N] [--restarts N] [--kills N] [--transfers N]
      [--duplicates N] [--rng-period N] [--max-term N] [--depth N] [--unbounded-depth]
      [--durability faithful|forget-vote|forget-all] [--threads N] [--hunt]
  tenure-model --replica ...      the replication core (flags: crates/model/src/replica_cli.rs)
  tenure-model --membership ...   changes of members (flags: crates/model/src/members_cli.rs)

Without a start flag: from a fresh cluster, then from an elected leader. Bound flags need a
start flag. The exit status is non-zero on a safety violation, an incomplete check or a
missed witness.

Example (what CI runs):
  cargo run --release -p tenure-model -- --ci
";

fn main() -> Result<(), Box<dyn Error>> {
    if matches!(std::env::args().nth(1).as_deref(), Some("-h" | "--help")) {
        print!("{USAGE}");
        return Ok(());
    }
    if std::env::args().nth(1).as_deref() == Some("--replica") {
        return replica_cli::main(std::env::args().skip(2));
    }
    if std::env::args().nth(1).as_deref() == Some("--membership") {
        return members_cli::main(std::env::args().skip(2));
    }
    let args = parse_args()?;
    let starts = match args.start {
        // CI: re-election, then failover on death notices.
        Some(Start::Elected) if args.ci => vec![Start::Elected, Start::Spy],
        Some(start) => vec![start],
        None => vec![Start::Fresh, Start::Elected],
    };
    let mut outcomes = Vec::new();
    for &protocol in &args.protocols {
        for &start in &starts {
            outcomes.push(run(&args, protocol, start)?);
        }
    }
    let failed = outcomes.iter().filter(|o| !o.failures.is_empty()).count();
    if outcomes.len() > 1 || failed > 0 {
        println!("\nsummary:");
        for o in &outcomes {
            let r = &o.report;
            let verdict =
                if o.failures.is_empty() { "ok".to_string() } else { o.failures.join("; ") };
            println!(
                "  {}: {} unique states, depth {}, {:.1?}: {verdict}",
                o.what, r.unique_states, r.max_depth, r.elapsed
            );
        }
    }
    if failed > 0 {
        return Err(format!("{failed} of {} checks failed (see above)", outcomes.len()).into());
    }
    Ok(())
}

/// Runs the check of `protocol` from `start` and prints what it found.
fn run(args: &Args, protocol: ProtocolKind, start: Start) -> Result<Outcome, Box<dyn Error>> {
    let bounds = args.bounds.bounds(protocol, start, args.ci);
    let (durability, threads) = (args.durability, args.threads);
    let from = match start {
        Start::Fresh => "from the fresh cluster",
        Start::Contested => "from a contested election",
        Start::Elected => "from an elected leader (clock steps counted from there)",
        Start::Spy => "from an elected leader, a node may die and a spy report it",
    };
    println!(
        "\nchecking 3 {protocol} nodes {from}, {bounds:?}, storage {durability:?}, {threads} thread(s)"
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
        Start::Spy => {
            let prefix = spy_prefix(protocol, bounds).ok_or("the greedy run elects nobody")?;
            println!("elected, and a heartbeat round later, after {prefix:?}");
            spy_model(protocol, bounds, durability).ok_or("the greedy run elects nobody")?
        }
    };
    let mut report_progress = |s: Snapshot| {
        eprintln!(
            "  ... {} unique states ({} generated, max depth {}) after {:.0?}",
            s.unique_states, s.total_states, s.max_depth, s.elapsed
        );
    };
    let progress = Progress { every: replica_cli::PROGRESS_EVERY, report: &mut report_progress };
    let report = check_reporting(model, threads, args.hunt, progress);
    println!(
        "explored {} unique states ({} generated, max depth {}) in {:.2?}; complete: {}",
        report.unique_states,
        report.total_states,
        report.max_depth,
        report.elapsed,
        report.complete
    );
    print_properties(&report, protocol, start);
    let mut failures = Vec::new();
    let violated = report.violated();
    if !violated.is_empty() {
        failures.push(format!("VIOLATED: {}", violated.join(", ")));
    }
    if !report.complete {
        failures.push("INCOMPLETE".to_string());
    }
    let missed = report.missed(protocol, start);
    if !args.hunt && !missed.is_empty() {
        failures.push(format!("MISSED WITNESS: {}", missed.join(", ")));
    }
    let what = match (args.ci, start) {
        (true, Start::Spy) => format!("{protocol} ci spy"),
        (true, _) => format!("{protocol} ci"),
        (false, _) => format!("{protocol} {}", start_name(start)),
    };
    Ok(Outcome { what, report, failures })
}

fn start_name(start: Start) -> &'static str {
    match start {
        Start::Fresh => "fresh",
        Start::Contested => "contested",
        Start::Elected => "elected",
        Start::Spy => "spy",
    }
}

fn print_properties(report: &CheckReport, protocol: ProtocolKind, start: Start) {
    for name in SAFETY_PROPERTIES {
        match report.discoveries.get(name) {
            None => println!("  always    {name}: holds"),
            Some(path) => {
                println!("  always    {name}: VIOLATED, counterexample:\n{path}");
                println!("  last state ghost: {:?}", path.last_state().ghost);
            }
        }
    }
    let witnesses = start.witnesses(protocol);
    for name in REACHABILITY_PROPERTIES {
        let required = witnesses.contains(&name);
        match report.discoveries.get(name) {
            Some(path) => println!("  sometimes {name}: reached, example:\n{path}"),
            None if required => println!(
                "  sometimes {name}: NOT REACHED, but a check {} must reach it: \
                 it checked less than it claims",
                describe(start)
            ),
            None if unreachable_by_design(protocol, name) => {
                println!("  sometimes {name}: never, by design of {protocol}")
            }
            None if name == LEADER_ON_NOTICE && start != Start::Spy => {
                println!("  sometimes {name}: not reached; only a check with a spy (--spy) can")
            }
            None if matches!(start, Start::Elected | Start::Spy) => {
                println!("  sometimes {name}: not reached")
            }
            None => println!(
                "  sometimes {name}: not reached {}; the check from an elected leader \
                 (--elected) reaches it",
                describe(start)
            ),
        }
    }
}

fn describe(start: Start) -> &'static str {
    match start {
        Start::Fresh => "from the fresh cluster",
        Start::Contested => "from a contested election",
        Start::Elected => "from an elected leader",
        Start::Spy => "from an elected leader with a spy",
    }
}
