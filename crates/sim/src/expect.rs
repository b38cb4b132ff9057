//! The expected outcomes of a scenario: each expectation that does not hold
//! is recorded with what was seen, and ends up in the run's [`Report`].

use crate::forger::FORGED_TERM_FLOOR;
use crate::report::Report;
use crate::runner::Sim;
use std::time::Duration;
use tenure_core::Term;

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

    /// The failures recorded so far.
    pub fn failures(&self) -> &[String] {
        &self.failures
    }

    /// Records the failures of `other`, each prefixed with `context`.
    pub fn absorb(&mut self, other: Expect, context: &str) {
        self.failures.extend(other.failures.into_iter().map(|f| format!("{context}: {f}")));
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

    /// Crashes the stable `leader` and expects another stable leader: within
    /// the failover bound ([`Sim::failover_bound`]), or, when a spy reported
    /// the crash on time, within the bound of a failover on a death notice
    /// ([`Sim::notice_failover_bound`]), well under the election timeout,
    /// and after one candidacy (the best-ranked survivor stands; nobody
    /// else). `context` names the crash in failures. Returns the new leader
    /// and how long the failover took.
    pub fn failover_after_crash(
        &mut self,
        sim: &mut Sim,
        leader: usize,
        context: &str,
    ) -> Option<(usize, Duration)> {
        let (elections, t0) = (sim.elections_started(), sim.now_ns());
        sim.crash(leader);
        let spy = sim.last_spy_report().filter(|r| r.on_time());
        let (bound, how) = match spy {
            Some(r) => (sim.notice_failover_bound(), format!("a spy reported it {r:?}")),
            None => (sim.failover_bound(), "no spy reported it on time".to_string()),
        };
        let after = format!("of {context} ({how})");
        let (new, t) = self.stable_leader(sim, bound, &after)?;
        let took = Duration::from_nanos(t - t0);
        self.that(new != leader, || format!("{context}: the crashed leader still leads"));
        self.that(took <= bound, || {
            format!(
                "{context}: failover took {:.0} ms, bound {:.0} ms ({how})",
                ms(took),
                ms(bound)
            )
        });
        if spy.is_some() {
            let rounds = sim.elections_started() - elections;
            self.that(rounds == 1, || {
                format!("{context}: {rounds} candidacies after an on-time death notice, not one")
            });
        }
        Some((new, took))
    }

    /// Expects the first stable leader of a cold start within the liveness bound.
    pub fn first_leader(&mut self, sim: &mut Sim) -> Option<usize> {
        let bound = sim.liveness_bound();
        self.stable_leader(sim, bound, "of a cold start").map(|(l, _)| l)
    }

    /// Expects that no node ever held a term at or above
    /// [`FORGED_TERM_FLOOR`]: only a forger's max-term frames carry such
    /// terms, and the core must refuse them.
    pub fn no_forged_term(&mut self, sim: &Sim) {
        let highest = sim.checker.highest_term();
        self.that(highest.0 < FORGED_TERM_FLOOR, || {
            format!(
                "a node reached the forged term {highest:?} (max-term frames must never move a term); terms now {:?}",
                (0..sim.len()).map(|i| sim.term_of(i).0).collect::<Vec<_>>()
            )
        });
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

/// A leader's standing at one moment: its term, the election rounds started
/// and the leaders elected so far. A leader that keeps its office leaves all
/// of them as they are.
pub struct Standing {
    leader: usize,
    term: Term,
    elections: u64,
    log_len: usize,
}

impl Standing {
    /// The standing of `leader` now.
    pub fn of(sim: &Sim, leader: usize) -> Self {
        Standing {
            leader,
            term: sim.term_of(leader),
            elections: sim.elections_started(),
            log_len: sim.leader_log.len(),
        }
    }

    /// Expects the leader to still lead, in its term, with no election since
    /// and no term above its own anywhere.
    pub fn expect_unchanged(&self, sim: &Sim, e: &mut Expect) {
        let Standing { leader, term, elections, log_len } = *self;
        e.that(sim.stable_leader() == Some(leader), || {
            format!(
                "expected n{} to remain the stable leader, found {:?}",
                leader + 1,
                sim.stable_leader().map(|l| l + 1)
            )
        });
        e.that(sim.max_term() == term, || {
            format!("terms inflated from {term:?} to {:?}", sim.max_term())
        });
        e.that(sim.elections_started() == elections, || {
            format!("{} election rounds started", sim.elections_started() - elections)
        });
        e.that(sim.leader_log.len() == log_len, || {
            format!("new leaders elected: {:?}", &sim.leader_log[log_len..])
        });
    }
}

/// `d` in milliseconds, for messages.
pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
