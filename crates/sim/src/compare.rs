//! `tenure sim compare`: every protocol through every scenario on the same
//! seeds, summarised in one table (text or Markdown).

use crate::params::Params;
use crate::scenario::{ForgerUse, WorkloadUse, SCENARIOS};
use crate::stats::{Aggregate, Percentiles};
use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::Duration;
use tenure_core::ProtocolKind;

/// Arguments of `tenure sim compare`.
#[derive(Debug, Clone, clap::Args)]
pub struct CompareArgs {
    /// Runs per scenario and protocol (seeds start-seed, start-seed + 1, ...).
    #[arg(long, default_value_t = 100)]
    pub seeds: u64,
    /// First seed; every protocol gets the same seeds.
    #[arg(long, default_value_t = 1)]
    pub start_seed: u64,
    /// Cluster size for scenarios that do not fix their own.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=15))]
    pub nodes: u64,
    /// Leader heartbeat interval, in milliseconds.
    #[arg(long, default_value_t = 100)]
    pub heartbeat_ms: u64,
    /// Election timeout, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    pub election_timeout_ms: u64,
    /// Print a Markdown table (for docs/protocols.md) instead of plain text.
    #[arg(long)]
    pub markdown: bool,
}

/// One scenario and protocol over every seed.
#[derive(Debug, Clone)]
pub struct Cell {
    /// The scenario's name.
    pub scenario: &'static str,
    /// The protocol.
    pub protocol: ProtocolKind,
    /// Cluster size used.
    pub nodes: usize,
    /// Why the protocol does not promise the outcome, if it does not.
    pub not_promised: Option<&'static str>,
    /// Runs with a failed (promised) expectation.
    pub failed_runs: u64,
    /// Runs that deviated from an outcome the protocol does not promise.
    pub deviating_runs: u64,
    /// Checker violations in all runs.
    pub violations: usize,
    /// Totals of the runs.
    pub agg: Aggregate,
}

impl Cell {
    /// Failover percentiles, in milliseconds of simulated time.
    pub fn failover(&self) -> Percentiles {
        Percentiles::of_ns(&self.agg.failovers_ns)
    }

    /// The verdict column: `ok`, the failed count, or the unpromised deviations.
    pub fn verdict(&self) -> String {
        let runs = self.agg.runs;
        if self.violations > 0 || self.failed_runs > 0 {
            format!("FAIL {}/{runs}", self.failed_runs.max(1))
        } else if self.not_promised.is_some() {
            format!("not promised ({} of {runs} deviate)", self.deviating_runs)
        } else {
            format!("ok {runs}/{runs}")
        }
    }
}

/// Runs `seeds` runs of every scenario for every protocol.
pub fn compare(args: &CompareArgs) -> Vec<Cell> {
    let mut cells = Vec::new();
    let measured = SCENARIOS
        .iter()
        .filter(|s| s.forger != ForgerUse::Always && s.workload != WorkloadUse::Always);
    for scenario in measured {
        for protocol in ProtocolKind::ALL {
            let mut params = Params::new(args.start_seed);
            params.nodes = args.nodes as usize;
            params.heartbeat = Duration::from_millis(args.heartbeat_ms);
            params.election_timeout = Duration::from_millis(args.election_timeout_ms);
            params.protocol = protocol;
            let mut cell = Cell {
                scenario: scenario.name,
                protocol,
                nodes: scenario.nodes(&params),
                not_promised: scenario.not_promised_by(protocol),
                failed_runs: 0,
                deviating_runs: 0,
                violations: 0,
                agg: Aggregate::default(),
            };
            for k in 0..args.seeds {
                params.seed = args.start_seed.wrapping_add(k);
                let report = scenario.run(&params);
                cell.agg.add(&report.stats);
                cell.violations += report.violation_count;
                cell.failed_runs += u64::from(!report.passed());
                cell.deviating_runs += u64::from(!report.observations.is_empty());
            }
            cells.push(cell);
        }
    }
    cells
}

const HEADER: [&str; 10] = [
    "scenario",
    "protocol",
    "outcome",
    "violations",
    "leader changes",
    "failover p50 / p99 ms",
    "rounds per failover",
    "one-round failovers",
    "split votes",
    "messages per failover",
];

fn row(c: &Cell) -> [String; 10] {
    let f = c.failover();
    let (failover, rounds, one_round, messages) = if f.samples == 0 {
        ("-".to_string(), "-".to_string(), "-".to_string(), "-".to_string())
    } else {
        (
            format!("{:.0} / {:.0}", f.p50, f.p99),
            format!("{:.2}", c.agg.elections_per_failover()),
            format!("{:.1}%", 100.0 * c.agg.one_round_failovers()),
            format!("{:.1}", c.agg.messages_per_failover()),
        )
    };
    [
        format!("{} ({} nodes)", c.scenario, c.nodes),
        c.protocol.to_string(),
        c.verdict(),
        c.violations.to_string(),
        c.agg.leader_changes.to_string(),
        failover,
        rounds,
        one_round,
        c.agg.split_votes.to_string(),
        messages,
    ]
}

/// The table as Markdown.
pub fn markdown(cells: &[Cell]) -> String {
    let mut out = format!("| {} |\n", HEADER.join(" | "));
    out.push_str(&format!("|{}\n", "---|".repeat(HEADER.len())));
    for c in cells {
        let _ = writeln!(out, "| {} |", row(c).join(" | "));
    }
    out
}

/// The table as aligned plain text.
pub fn text(cells: &[Cell]) -> String {
    let rows: Vec<[String; 10]> = cells.iter().map(row).collect();
    let mut widths: Vec<usize> = HEADER.iter().map(|h| h.len()).collect();
    for r in &rows {
        for (w, cell) in widths.iter_mut().zip(r) {
            *w = (*w).max(cell.len());
        }
    }
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> =
            cells.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        padded.join("  ").trim_end().to_string() + "\n"
    };
    let mut out = line(HEADER.to_vec());
    for r in &rows {
        out.push_str(&line(r.iter().map(String::as_str).collect()));
    }
    out
}

/// Runs `tenure sim compare` and returns the exit code: non-zero if any
/// protocol broke a safety property or a promised outcome.
pub fn run(args: &CompareArgs) -> ExitCode {
    if let Err(e) = check_timing(args) {
        eprintln!("invalid timing: {e}");
        return ExitCode::from(2);
    }
    let cells = compare(args);
    let heading = format!(
        "{} seeds per cell (start seed {}), heartbeat {} ms, election timeout {} ms; \
         failover times are simulated, from the leader's failure to the next leader",
        args.seeds, args.start_seed, args.heartbeat_ms, args.election_timeout_ms
    );
    if args.markdown {
        println!("{heading}.\n\n{}", markdown(&cells));
    } else {
        println!("{heading}\n\n{}", text(&cells));
    }
    let failed = cells.iter().any(|c| c.violations > 0 || c.failed_runs > 0);
    if failed {
        eprintln!("some protocol broke a safety property or a promised outcome (FAIL rows)");
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn check_timing(args: &CompareArgs) -> Result<(), tenure_core::ConfigError> {
    let mut params = Params::new(args.start_seed);
    params.heartbeat = Duration::from_millis(args.heartbeat_ms);
    params.election_timeout = Duration::from_millis(args.election_timeout_ms);
    for protocol in ProtocolKind::ALL {
        params.protocol = protocol;
        params
            .sim_config(args.nodes as usize)
            .core_config(tenure_core::NodeId(1))
            .validate_for(protocol)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_have_one_row_per_cell_and_aligned_columns() {
        let args = CompareArgs {
            seeds: 1,
            start_seed: 3,
            nodes: 3,
            heartbeat_ms: 100,
            election_timeout_ms: 1000,
            markdown: true,
        };
        // Only the Raft cells: the table code is what is under test here.
        let cells: Vec<Cell> =
            compare(&args).into_iter().filter(|c| c.protocol == ProtocolKind::Raft).collect();
        // Every scenario but those that always run a forger or a workload
        // (hostile, kv, elect, membership).
        let benign = SCENARIOS
            .iter()
            .filter(|s| s.forger != ForgerUse::Always && s.workload != WorkloadUse::Always)
            .count();
        assert_eq!(benign, SCENARIOS.len() - 4);
        assert_eq!(cells.len(), benign);
        let md = markdown(&cells);
        assert_eq!(md.lines().count(), 2 + benign);
        assert!(md.lines().all(|l| l.matches('|').count() == HEADER.len() + 1), "{md}");
        let crash = cells.iter().find(|c| c.scenario == "leader-crash").expect("row");
        assert_eq!(crash.verdict(), "ok 1/1");
        assert_eq!(crash.failover().samples, 1);
        let txt = text(&cells);
        assert_eq!(txt.lines().count(), 1 + benign);
    }
}
