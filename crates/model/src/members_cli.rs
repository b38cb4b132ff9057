//! `tenure-model --membership`: changes of members interleaved with
//! elections ([`tenure_model::membership`]).
//!
//! ```text
//! cargo run --release -p tenure-model -- --membership [--ci] [--protocol raft|ranked|paxos|all]
//!     [--grow | --four-voters | --deposed] [--removable 1,2,3,4]
//!     [--driver faithful|ungated-changes|late-electorate|no-position]
//!     [--steps N] [--leader-steps N] [--restarts N] [--changes N] [--duplicates N]
//!     [--max-term N] [--depth N] [--unbounded-depth] [--threads N] [--hunt]
//! ```
//! Without `--ci`, one check per protocol from the start given (`--grow`,
//! the default: the bootstrap voters; `--four-voters`: `n4` added and
//! promoted; `--deposed`: from four voters, a deposed leader holding a
//! removal only it has, and a new leader, [`MemberStart::Deposed`]) within
//! [`Bounds::members`] to depth 12, changed by the bound flags (`--changes`
//! counts the start's), with every voter removable unless `--removable`
//! says. `--ci` runs [`CI_CHECKS`] for every protocol (with the `--driver`
//! given). The exit status is non-zero if a check violates a safety
//! property, does not complete, or (except with `--hunt`, which stops at the
//! first violation) misses a witness ([`MemberStart::witnesses`]; with
//! `--restarts`, a change committing and a node restarting in a changed
//! configuration instead).

use std::error::Error;
use tenure_core::{NodeId, ProtocolKind};
use tenure_model::check::{check_reporting, member_prefix, MemberStart, Progress, Snapshot};
use tenure_model::membership::{MemberDriver, MembershipSpec};
use tenure_model::model::{
    CHANGE_COMMITTED, REACHABILITY_PROPERTIES, RESTARTED_IN_NEW_CONFIG, SAFETY_PROPERTIES,
};
use tenure_model::{Bounds, ElectionModel};

/// One check of the CI suite.
#[derive(Clone, Copy, Debug)]
pub struct MemberCheck {
    /// What it is called in the summary.
    pub name: &'static str,
    /// Where it starts.
    pub start: MemberStart,
    /// Clock steps each node may take, the leader's none
    /// ([`Bounds::clock_steps_per_node`]; otherwise [`Bounds::members`]).
    pub steps: u8,
    /// Crash-and-restart actions ([`Bounds::restarts`]).
    pub restarts: u8,
    /// Its depth (stateright's).
    pub depth: usize,
}

/// The CI suite, for every protocol, every voter removable (see the crate
/// documentation's table): from the bootstrap voters, a change (`n4`
/// joins as a learner, or a voter is removed) and a failover, every state
/// within ten steps; the same with one crash and restart, every state
/// within eight steps (the election in a changed configuration is the
/// first check's: under ranked and Paxos it is nine and ten steps deep);
/// from a deposed leader holding its pending removal
/// ([`MemberStart::Deposed`]), the new leader's no-op, its own removal (a
/// sibling) and the deposed leader's return, each node one clock step,
/// every state within nine steps (Raft's counterexample without the gate
/// is nine steps long).
pub const CI_CHECKS: [MemberCheck; 3] = [
    MemberCheck { name: "grow", start: MemberStart::Grow, steps: 2, restarts: 0, depth: 12 },
    MemberCheck {
        name: "grow, restart",
        start: MemberStart::Grow,
        steps: 2,
        restarts: 1,
        depth: 10,
    },
    MemberCheck { name: "deposed", start: MemberStart::Deposed, steps: 1, restarts: 0, depth: 11 },
];

/// The witnesses a check must reach: its start's
/// ([`MemberStart::witnesses`]), or with restarts a change committing and
/// a node restarting in a changed configuration
/// ([`RESTARTED_IN_NEW_CONFIG`]).
fn witnesses(start: MemberStart, bounds: &Bounds) -> Vec<&'static str> {
    if bounds.restarts > 0 {
        vec![CHANGE_COMMITTED, RESTARTED_IN_NEW_CONFIG]
    } else {
        start.witnesses()
    }
}

/// Every node: the voters a removal may take unless `--removable` says.
const ALL: [NodeId; 4] = [NodeId(1), NodeId(2), NodeId(3), NodeId(4)];

struct Args {
    protocols: Vec<ProtocolKind>,
    ci: bool,
    start: MemberStart,
    removable: Vec<NodeId>,
    driver: MemberDriver,
    threads: usize,
    hunt: bool,
    set: Vec<(String, String)>,
}

fn parse(args: impl Iterator<Item = String>) -> Result<Args, Box<dyn Error>> {
    let mut a = Args {
        protocols: ProtocolKind::ALL.to_vec(),
        ci: false,
        start: MemberStart::Grow,
        removable: ALL.to_vec(),
        driver: MemberDriver::Faithful,
        threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        hunt: false,
        set: Vec::new(),
    };
    let mut args = args.peekable();
    while let Some(flag) = args.next() {
        match flag.as_str() {
            "--ci" => a.ci = true,
            "--grow" => a.start = MemberStart::Grow,
            "--four-voters" => a.start = MemberStart::FourVoters,
            "--deposed" => a.start = MemberStart::Deposed,
            "--hunt" => a.hunt = true,
            "--unbounded-depth" => a.set.push(("--depth".into(), "none".into())),
            _ => {
                let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
                match flag.as_str() {
                    "--protocol" if value == "all" => a.protocols = ProtocolKind::ALL.to_vec(),
                    "--protocol" => a.protocols = vec![value.parse()?],
                    "--threads" => a.threads = value.parse()?,
                    "--driver" => a.driver = parse_driver(&value)?,
                    "--removable" => {
                        a.removable = value
                            .split(',')
                            .map(|v| v.trim().parse().map(NodeId))
                            .collect::<Result<_, _>>()?
                    }
                    _ => a.set.push((flag, value)),
                }
            }
        }
    }
    if a.ci && (!a.set.is_empty() || a.removable != ALL) {
        return Err("--membership --ci runs its own suite: leave out the bound flags".into());
    }
    Ok(a)
}

fn parse_driver(value: &str) -> Result<MemberDriver, Box<dyn Error>> {
    match value {
        "faithful" => Ok(MemberDriver::Faithful),
        "ungated-changes" => Ok(MemberDriver::UngatedChanges),
        "late-electorate" => Ok(MemberDriver::LateElectorate),
        "no-position" => Ok(MemberDriver::NoPosition),
        other => Err(format!("unknown driver {other:?}").into()),
    }
}

fn bounds_of(
    protocol: ProtocolKind,
    check: &MemberCheck,
    set: &[(String, String)],
) -> Result<Bounds, Box<dyn Error>> {
    let mut b = Bounds::members(protocol, check.start.changes_in_prefix(), check.depth);
    b.clock_steps_per_node = check.steps;
    b.restarts = check.restarts;
    for (flag, value) in set {
        match flag.as_str() {
            "--steps" => b.clock_steps_per_node = value.parse()?,
            "--leader-steps" => b.leader_clock_steps = Some(value.parse()?),
            "--restarts" => b.restarts = value.parse()?,
            "--changes" => b.changes = value.parse()?,
            "--duplicates" => b.duplicates = value.parse()?,
            "--kills" => b.kills = value.parse()?,
            "--max-term" => b.max_term = value.parse()?,
            "--depth" if value == "none" => b.max_depth = None,
            "--depth" => b.max_depth = Some(value.parse()?),
            other => return Err(format!("unknown flag {other:?}").into()),
        }
    }
    Ok(b)
}

/// What `--membership --help` prints.
const USAGE: &str = "\
Changes of members (add a learner, promote, remove) interleaved with elections, restarts and
message loss, for every protocol.

Usage:
  tenure-model --membership [--ci] [--protocol raft|ranked|paxos|all]
      [--grow | --four-voters | --deposed] [--removable 1,2,3,4]
      [--driver faithful|ungated-changes|late-electorate|no-position]
      [--steps N] [--leader-steps N] [--restarts N] [--changes N] [--duplicates N]
      [--max-term N] [--depth N] [--unbounded-depth] [--threads N] [--hunt]

--ci runs the CI suite for every protocol; otherwise one check per protocol from the start
given (--grow by default) to depth 12. A planted driver bug (--driver) must be caught. The
exit status is non-zero on a safety violation, an incomplete check or a missed witness.

Example (what CI runs):
  cargo run --release -p tenure-model -- --membership --ci
";

/// Runs `tenure-model --membership` with the arguments after that flag.
pub fn main(args: impl Iterator<Item = String>) -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = args.collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        print!("{USAGE}");
        return Ok(());
    }
    let a = parse(args.into_iter())?;
    let checks: Vec<MemberCheck> = if a.ci {
        CI_CHECKS.to_vec()
    } else {
        let steps = Bounds::members(ProtocolKind::Raft, 0, 0).clock_steps_per_node;
        vec![MemberCheck { name: "as given", start: a.start, steps, restarts: 0, depth: 12 }]
    };
    let mut lines = Vec::new();
    let mut failed = 0;
    for &protocol in &a.protocols {
        for check in &checks {
            let spec = MembershipSpec { driver: a.driver, removable: a.removable.clone() };
            let bounds = bounds_of(protocol, check, &a.set)?;
            println!(
                "\nchecking {protocol} with changes of members from {:?}, removable {:?}, \
                 driver {:?}, {bounds:?}, {} thread(s)",
                check.start, spec.removable, spec.driver, a.threads
            );
            let prefix = member_prefix(protocol, bounds, &spec, check.start)
                .ok_or("the greedy run reaches no settled leader")?;
            println!("settled leader after {} steps: {prefix:?}", prefix.len());
            let model = ElectionModel::with_members(protocol, bounds, spec).resuming_after(prefix);
            let start = stateright::Model::init_states(&model).remove(0);
            println!("in flight at the start: {:?}", start.network);
            let mut report_progress = |s: Snapshot| {
                eprintln!(
                    "  ... {} unique states ({} generated, max depth {}) after {:.0?}",
                    s.unique_states, s.total_states, s.max_depth, s.elapsed
                );
            };
            let progress = Progress {
                every: crate::replica_cli::PROGRESS_EVERY,
                report: &mut report_progress,
            };
            let report = check_reporting(model, a.threads, a.hunt, progress);
            println!(
                "explored {} unique states ({} generated, max depth {}) in {:.2?}; complete: {}",
                report.unique_states,
                report.total_states,
                report.max_depth,
                report.elapsed,
                report.complete
            );
            let mut failures = Vec::new();
            for name in SAFETY_PROPERTIES {
                match report.discoveries.get(name) {
                    None => println!("  always    {name}: holds"),
                    Some(path) => {
                        println!(
                            "  always    {name}: VIOLATED, counterexample of {} steps:\n{path}",
                            path.clone().into_actions().len()
                        );
                        println!("  last state ghost: {:?}", path.last_state().ghost);
                        failures.push(format!("VIOLATED: {name}"));
                    }
                }
            }
            let witnesses = witnesses(check.start, &bounds);
            for name in REACHABILITY_PROPERTIES {
                match report.discoveries.get(name) {
                    Some(path) if witnesses.contains(&name) => {
                        println!("  sometimes {name}: reached, example:\n{path}")
                    }
                    Some(_) => println!("  sometimes {name}: reached"),
                    None if witnesses.contains(&name) => {
                        println!(
                            "  sometimes {name}: NOT REACHED: the check claims more than it did"
                        );
                        if !a.hunt {
                            failures.push(format!("MISSED WITNESS: {name}"));
                        }
                    }
                    None => println!("  sometimes {name}: not reached"),
                }
            }
            if !report.complete {
                failures.push("INCOMPLETE".into());
            }
            let verdict = if failures.is_empty() { "ok".to_string() } else { failures.join("; ") };
            failed += usize::from(!failures.is_empty());
            lines.push(format!(
                "  {protocol} {}: {} unique states, depth {}, {:.1?}: {verdict}",
                check.name, report.unique_states, report.max_depth, report.elapsed
            ));
        }
    }
    println!("\nsummary:");
    for line in &lines {
        println!("{line}");
    }
    if failed > 0 {
        return Err(format!("{failed} of {} checks failed (see above)", lines.len()).into());
    }
    Ok(())
}
