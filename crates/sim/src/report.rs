//! The outcome of one scenario run: failed expectations, observations,
//! checker violations and statistics.

use crate::checker::Violation;
use crate::stats::RunStats;

/// The outcome of one scenario run.
#[derive(Clone, Debug)]
pub struct Report {
    /// Scenario name.
    pub scenario: &'static str,
    /// The run's seed.
    pub seed: u64,
    /// Cluster size actually used.
    pub nodes: usize,
    /// Expectations that did not hold, each with what was seen.
    pub failures: Vec<String>,
    /// When the protocol under test does not promise the scenario's outcome:
    /// why not. Its deviations are then in `observations`, not `failures`.
    pub not_promised: Option<&'static str>,
    /// Deviations from the scenario's stated outcome that the protocol does
    /// not promise to avoid (reported, not failed).
    pub observations: Vec<String>,
    /// Checker violations kept.
    pub violations: Vec<Violation>,
    /// Checker violations found in all.
    pub violation_count: usize,
    /// Statistics of the run.
    pub stats: RunStats,
}

impl Report {
    /// True when every expectation held and no checker complained.
    pub fn passed(&self) -> bool {
        self.failures.is_empty() && self.violation_count == 0
    }
}
