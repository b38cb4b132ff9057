//! The randomized run: rounds of one or two random faults (SIGKILL,
//! SIGSTOP, a cut link, a one-way cut, an isolated node, random loss) held
//! for a random time, then everything healed (restart, SIGCONT, rules
//! flushed) and the cluster must agree on one leader within the bound.
//! The checker runs throughout. A seed makes the schedule reproducible (the
//! cluster's own timing is not).

use crate::cluster::Timings;
use crate::scenarios::{heal_bound, Run, RESTART_MARGIN, TIMINGS};
use rand_core::{RngCore, SeedableRng};
use rand_pcg::Pcg64;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Environment variable with the test's run length in minutes (fractions allowed).
pub const MINUTES_ENV: &str = "TENURE_FAULT_MINUTES";
/// Nodes in a randomized run unless told otherwise.
pub const DEFAULT_NODES: usize = 5;
/// Most faults injected at once in one round.
const MAX_FAULTS_PER_ROUND: u64 = 2;
/// Random loss is drawn from this range of percentages.
const LOSS_PERCENT: (u64, u64) = (10, 60);
/// A fault is held between these multiples of the election timeout (in tenths).
const HOLD_TENTHS: (u64, u64) = (5, 40);
/// Quiet time after a round converged, up to this many election timeouts.
const SETTLE_MAX_TIMEOUTS: u32 = 2;

/// One fault of a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// SIGKILL node i (restarted at heal).
    Kill(usize),
    /// SIGSTOP node i (SIGCONT at heal).
    Pause(usize),
    /// Cut the link a–b both ways.
    Cut(usize, usize),
    /// Drop what a sends to b.
    CutOneWay(usize, usize),
    /// Cut node i from every peer.
    Isolate(usize),
    /// Node i loses this percentage of its peer packets each way.
    Loss(usize, u32),
}

impl Fault {
    fn name(&self) -> &'static str {
        match self {
            Fault::Kill(_) => "kill",
            Fault::Pause(_) => "pause",
            Fault::Cut(..) => "cut",
            Fault::CutOneWay(..) => "cut-one-way",
            Fault::Isolate(_) => "isolate",
            Fault::Loss(..) => "loss",
        }
    }
}

/// What a randomized run measured.
#[derive(Debug, Default)]
pub struct RandomReport {
    /// Rounds completed.
    pub rounds: usize,
    /// Faults injected, by kind.
    pub faults: BTreeMap<&'static str, usize>,
    /// Time from heal to agreement, per round.
    pub convergence: Vec<Duration>,
    /// Distinct leaderships seen.
    pub leaderships: usize,
    /// Polls and events checked.
    pub traffic: String,
}

impl RandomReport {
    /// A one-paragraph summary.
    pub fn summary(&self) -> String {
        let max = self.convergence.iter().max().copied().unwrap_or_default();
        let mean = if self.convergence.is_empty() {
            Duration::ZERO
        } else {
            self.convergence.iter().sum::<Duration>() / self.convergence.len() as u32
        };
        format!(
            "{} rounds, faults {:?}; convergence after heal: mean {mean:?}, max {max:?}; {} distinct leaderships; {}",
            self.rounds, self.faults, self.leaderships, self.traffic
        )
    }
}

fn below(rng: &mut Pcg64, n: u64) -> u64 {
    rng.next_u64() % n
}

fn pick_fault(rng: &mut Pcg64, n: usize, busy: &[usize]) -> Option<Fault> {
    let free: Vec<usize> = (0..n).filter(|i| !busy.contains(i)).collect();
    if free.len() < 2 {
        return None;
    }
    let a = free[below(rng, free.len() as u64) as usize];
    let others: Vec<usize> = (0..n).filter(|&j| j != a).collect();
    let b = others[below(rng, others.len() as u64) as usize];
    let loss = LOSS_PERCENT.0 + below(rng, LOSS_PERCENT.1 - LOSS_PERCENT.0 + 1);
    Some(match below(rng, 6) {
        0 => Fault::Kill(a),
        1 => Fault::Pause(a),
        2 => Fault::Cut(a, b),
        3 => Fault::CutOneWay(a, b),
        4 => Fault::Isolate(a),
        _ => Fault::Loss(a, loss as u32),
    })
}

/// Runs random rounds on `nodes` servers for `duration` with `seed`;
/// `progress` gets one line per round. Fails on any safety violation or a
/// round that does not converge within the bound.
pub async fn random_run(
    nodes: usize,
    duration: Duration,
    seed: u64,
    mut progress: impl FnMut(&str),
) -> Result<RandomReport, String> {
    let timings: Timings = TIMINGS;
    let mut rng = Pcg64::seed_from_u64(seed);
    let mut run = Run::start(nodes, timings).await?;
    let start = Instant::now();
    run.elected().await?;
    let mut report = RandomReport::default();
    while start.elapsed() < duration {
        let count = 1 + below(&mut rng, MAX_FAULTS_PER_ROUND);
        let mut faults = Vec::new();
        let mut busy = Vec::new();
        for _ in 0..count {
            if let Some(f) = pick_fault(&mut rng, nodes, &busy) {
                if let Fault::Kill(i) | Fault::Pause(i) | Fault::Isolate(i) = f {
                    busy.push(i);
                }
                faults.push(f);
            }
        }
        let hold = timings.election_timeout()
            * (HOLD_TENTHS.0 + below(&mut rng, HOLD_TENTHS.1 - HOLD_TENTHS.0)) as u32
            / 10;
        let mut restarted = false;
        for f in &faults {
            *report.faults.entry(f.name()).or_default() += 1;
            let c = &mut run.cluster;
            let r = match *f {
                Fault::Kill(i) => {
                    restarted = true;
                    c.kill(i)
                }
                Fault::Pause(i) => c.pause(i),
                Fault::Cut(a, b) => c.cut(a, b),
                Fault::CutOneWay(a, b) => c.cut_one_way(a, b),
                Fault::Isolate(i) => c.isolate(i),
                Fault::Loss(i, p) => c.lose(i, p),
            };
            r.map_err(|err| run.fail(format!("injecting {f:?}: {err}")))?;
        }
        tokio::time::sleep(hold).await;
        // Heal everything.
        run.cluster.heal().map_err(|err| run.fail(format!("heal: {err}")))?;
        for i in 0..nodes {
            if run.cluster.is_paused(i) {
                run.cluster.resume(i).map_err(|err| run.fail(format!("SIGCONT: {err}")))?;
            }
            if !run.cluster.is_running(i) {
                run.cluster.spawn(i).map_err(|err| run.fail(format!("restart: {err}")))?;
            }
        }
        let healed = Instant::now();
        let bound = heal_bound(timings) + if restarted { RESTART_MARGIN } else { Duration::ZERO };
        let all: Vec<usize> = (0..nodes).collect();
        let ((l, term), took) = run.agreement(&all, healed, bound).await.map_err(|msg| {
            format!("round {} ({faults:?} for {hold:?}), seed {seed}: {msg}", report.rounds + 1)
        })?;
        run.check_safety().map_err(|msg| {
            format!("round {} ({faults:?}), seed {seed}: {msg}", report.rounds + 1)
        })?;
        report.rounds += 1;
        report.convergence.push(took);
        progress(&format!(
            "round {:>3}: {faults:?} for {hold:?} -> n{} t{term}, agreed {took:?} after heal",
            report.rounds,
            l + 1
        ));
        let settle = timings.election_timeout() * SETTLE_MAX_TIMEOUTS;
        tokio::time::sleep(settle.mul_f64(below(&mut rng, 100) as f64 / 100.0)).await;
    }
    run.check_safety()?;
    report.leaderships = run.checker.state().leaderships_since(start).len();
    report.traffic = run.traffic();
    Ok(report)
}

/// The test's run length: `$TENURE_FAULT_MINUTES`, else `default`.
pub fn minutes_from_env(default: f64) -> Duration {
    let minutes = std::env::var(MINUTES_ENV)
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|m| m.is_finite() && *m >= 0.0)
        .unwrap_or(default);
    Duration::from_secs_f64(minutes * 60.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schedule_is_reproducible_and_spares_a_quorum() {
        let draw = |seed| {
            let mut rng = Pcg64::seed_from_u64(seed);
            let mut busy = Vec::new();
            let mut out = Vec::new();
            for _ in 0..20 {
                if let Some(f) = pick_fault(&mut rng, 5, &busy) {
                    if let Fault::Kill(i) | Fault::Pause(i) | Fault::Isolate(i) = f {
                        busy.push(i);
                    }
                    out.push(f);
                }
            }
            (out, busy)
        };
        let (a, busy) = draw(7);
        assert_eq!(a, draw(7).0);
        assert_ne!(a, draw(8).0);
        assert!(busy.len() <= 4, "at least two nodes stay free of process faults");
    }
}
