//! Pure arithmetic of the benchmark: percentiles, CDFs, and how many election
//! rounds a failover took.

use serde::Serialize;

/// Nearest-rank percentile of `sorted` (ascending): the smallest sample with at
/// least `p` percent of the samples at or below it. None when empty.
///
/// With 20 samples, p99 is the largest: a conservative reading for small runs.
pub fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// Summary of a set of latencies, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Summary {
    /// Number of samples.
    pub count: usize,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile (nearest rank).
    pub p99: f64,
    /// Largest sample.
    pub max: f64,
    /// Smallest sample.
    pub min: f64,
    /// Arithmetic mean.
    pub mean: f64,
}

/// Summarises `samples` (any order); None when empty.
pub fn summarize(samples: &[f64]) -> Option<Summary> {
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    Some(Summary {
        count: s.len(),
        p50: percentile(&s, 50.0)?,
        p90: percentile(&s, 90.0)?,
        p99: percentile(&s, 99.0)?,
        max: *s.last()?,
        min: *s.first()?,
        mean: s.iter().sum::<f64>() / s.len() as f64,
    })
}

/// The empirical CDF of `samples` as a step function's corners: for each
/// sample in ascending order, (value, fraction of samples at or below it).
pub fn cdf(samples: &[f64]) -> Vec<(f64, f64)> {
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len() as f64;
    s.iter().enumerate().map(|(i, &v)| (v, (i + 1) as f64 / n)).collect()
}

/// Rounds that did not produce a leader in one failover: each round takes a
/// new term, and the round that succeeds takes exactly one, so every term
/// beyond the first is a split (or otherwise failed) vote. A failover that
/// somehow did not raise the term has none.
pub fn split_votes(term_before: u64, term_after: u64) -> u64 {
    term_after.saturating_sub(term_before).saturating_sub(1)
}

/// Fraction of failovers (0..=1) decided in one election round, by term delta.
pub fn one_round_fraction(term_deltas: &[u64]) -> Option<f64> {
    if term_deltas.is_empty() {
        return None;
    }
    let one = term_deltas.iter().filter(|&&d| d == 1).count();
    Some(one as f64 / term_deltas.len() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let s: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!(percentile(&s, 50.0), Some(10.0));
        assert_eq!(percentile(&s, 90.0), Some(18.0));
        assert_eq!(percentile(&s, 99.0), Some(20.0), "p99 of 20 samples is the largest");
        assert_eq!(percentile(&s, 0.0), Some(1.0));
        assert_eq!(percentile(&[7.0], 50.0), Some(7.0));
        assert_eq!(percentile(&[], 50.0), None);
        let hundred: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&hundred, 99.0), Some(99.0));
    }

    #[test]
    fn summary_of_unsorted_samples() {
        let s = summarize(&[30.0, 10.0, 20.0, 40.0]).unwrap();
        assert_eq!((s.count, s.min, s.p50, s.max, s.mean), (4, 10.0, 20.0, 40.0, 25.0));
        assert_eq!(s.p99, 40.0);
        assert!(summarize(&[]).is_none());
    }

    #[test]
    fn cdf_rises_to_one() {
        let c = cdf(&[3.0, 1.0, 2.0, 2.0]);
        assert_eq!(c, vec![(1.0, 0.25), (2.0, 0.5), (2.0, 0.75), (3.0, 1.0)]);
        assert!(cdf(&[]).is_empty());
    }

    #[test]
    fn split_vote_arithmetic() {
        assert_eq!(split_votes(4, 5), 0, "one round, one term");
        assert_eq!(split_votes(4, 7), 2, "two rounds failed before the third won");
        assert_eq!(split_votes(4, 4), 0, "no new term (e.g. a handover seen late)");
        assert_eq!(one_round_fraction(&[1, 1, 2, 1]), Some(0.75));
        assert_eq!(one_round_fraction(&[]), None);
    }
}
