//! The expected outcomes of a scenario: each expectation that does not hold
//! is recorded with what was seen, and ends up in the run's [`Report`].

use crate::report::Report;
use crate::runner::Sim;
use std::time::Duration;

/// Collects failed expectations.
#[derive(Debug, Default)]
pub struct Expect {
    failures: Vec<String>,
}

impl Expect {
    /// Records `what` unless `ok`.
    pub fn that(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            self.failures.push(what());
        }
    }

    /// Records a failure.
    pub fn fail(&mut self, what: String) {
        self.failures.push(what);
    }

    /// Runs `sim` until a stable leader appears, for at most `bound`, and
    /// expects one: (leader, when it became stable). A miss is recorded as
    /// "no stable leader within `bound` `after`" (`after` says since when).
    pub fn stable_leader(
        &mut self,
        sim: &mut Sim,
        bound: Duration,
        after: &str,
    ) -> Option<(usize, u64)> {
        let got = sim.wait_for_stable_leader(bound);
        self.that(got.is_some(), || format!("no stable leader within {:.0} ms {after}", ms(bound)));
        got
    }

    /// Expects the first stable leader of a cold start within the liveness bound.
    pub fn first_leader(&mut self, sim: &mut Sim) -> Option<usize> {
        let bound = sim.liveness_bound();
        self.stable_leader(sim, bound, "of a cold start").map(|(l, _)| l)
    }

    /// Builds the report of a finished run.
    pub fn report(self, scenario: &'static str, mut sim: Sim) -> Report {
        let stats = sim.finish();
        Report {
            scenario,
            seed: sim.seed,
            nodes: sim.len(),
            failures: self.failures,
            not_promised: None,
            observations: Vec::new(),
            violations: sim.checker.violations().to_vec(),
            violation_count: sim.checker.violation_count(),
            stats,
        }
    }
}

/// `d` in milliseconds, for messages.
pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
