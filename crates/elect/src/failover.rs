//! Riding out a failover of tenure's cluster: what a session's TTL (and
//! `tenure run`'s grace) must leave for it.
//!
//! A session renewed at `s` (send time) is trusted until
//! `s − lag + TTL × 0.9/1.1` ([`crate::session::deadline_after`]); work is
//! stopped `grace` before that. If the tenure leader crashes just before the
//! next renewal, due at `s + interval`, no renewal can succeed before the
//! successor is ready, up to the cluster's failover bound later, and the
//! renewal retried every [`RENEW_RETRY_PAUSE_MAX`] at most then needs a
//! pause and a forwarded round trip. So one failover is ridden out when
//!
//! ```text
//! TTL × 0.9/1.1 − lag − TTL/3 − grace ≥ failover bound + retry allowance
//! ```
//!
//! with the failover bound that `GET /v1/status` reports in `timings`
//! (`tenure_core::failover::failover_bound`: election timeout stretched by
//! the drift bound, the ranks' stagger, six round trips; 1555 ms at the
//! default heartbeat 100 ms and election timeout 1000 ms) and the retry
//! allowance [`retry_allowance`] (`RENEW_RETRY_PAUSE_MAX` + 2 round trips).
//!
//! etcd and ZooKeeper do not tell their clients their election timeouts:
//! their stores report no [`Timings`] and the check is not made.

use crate::session::{trusted_span, MAX_TTL, MIN_TTL};
pub use crate::session::{RENEW_RETRY_PAUSE, RENEW_RETRY_PAUSE_MAX};
use crate::store::Store;
use std::time::Duration;

/// How long reading the cluster's timings may take before the check is
/// skipped.
pub const TIMINGS_TIMEOUT: Duration = Duration::from_secs(1);

pub use crate::store::Timings;

/// The failover bound of `timings`.
pub fn failover_bound(timings: &Timings) -> Duration {
    Duration::from_millis(timings.failover_bound_ms)
}

/// What a renewal needs once the successor is ready under `timings`: the
/// longest retry pause and a round trip through a follower that forwards
/// it.
pub fn renewal_allowance(timings: &Timings) -> Duration {
    retry_allowance(Duration::from_millis(timings.round_trip_ms))
}

/// Failover bound plus renewal allowance: what must fit between the
/// renewal due next and the moment work is stopped.
pub fn needed(timings: &Timings) -> Duration {
    failover_bound(timings) + renewal_allowance(timings)
}

/// [`RENEW_RETRY_PAUSE_MAX`] plus two round trips.
pub fn retry_allowance(round_trip: Duration) -> Duration {
    RENEW_RETRY_PAUSE_MAX + round_trip * 2
}

/// How a session of `ttl` renewed every `interval`, whose renewals prove
/// an instant `lag` before their send time, and whose work stops `grace`
/// before its deadline is timed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The TTL.
    pub ttl: Duration,
    /// The renewal interval ([`Store::renew_interval`]).
    pub interval: Duration,
    /// The renewal lag ([`Store::renewal_lag`]).
    pub lag: Duration,
    /// How long before the deadline work is stopped (zero: at it).
    pub grace: Duration,
}

impl Plan {
    /// The time between the renewal due next and the moment work is
    /// stopped if none succeeds: `TTL × 0.9/1.1 − lag − interval − grace`.
    pub fn room(&self) -> Duration {
        trusted_span(self.ttl).saturating_sub(self.lag + self.interval + self.grace)
    }

    /// Whether one failover of a cluster with `timings` is ridden out.
    pub fn rides_out(&self, timings: &Timings) -> bool {
        self.room() >= needed(timings)
    }
}

/// The smallest TTL (rounded up to 100 ms) whose plan rides out one
/// failover of `timings`, with `plan(ttl)` the plan for a TTL; None if even
/// the longest TTL does not.
pub fn smallest_ttl(timings: &Timings, plan: impl Fn(Duration) -> Plan) -> Option<Duration> {
    let step = 100;
    let (mut lo, mut hi) = (MIN_TTL.as_millis() as u64 / step, MAX_TTL.as_millis() as u64 / step);
    if !plan(Duration::from_millis(hi * step)).rides_out(timings) {
        return None;
    }
    // The room grows with the TTL (the grace of `tenure run` grows slower):
    // the first TTL that rides out, by bisection.
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if plan(Duration::from_millis(mid * step)).rides_out(timings) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    Some(Duration::from_millis(lo * step))
}

/// The warning for a plan that cannot ride out one failover of the cluster
/// behind `store` (None when it can, or when the store reports no timings:
/// etcd, ZooKeeper, a tenure server of an earlier build, no answer within
/// [`TIMINGS_TIMEOUT`]). `plan(ttl)` gives the plan for a TTL, to name the
/// smallest TTL that rides it out.
pub async fn warning(
    store: &dyn Store,
    ttl: Duration,
    plan: impl Fn(Duration) -> Plan,
) -> Option<String> {
    let timings = match tokio::time::timeout(TIMINGS_TIMEOUT, store.timings()).await {
        Ok(Ok(Some(t))) => t,
        Ok(Ok(None)) => return None,
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "the cluster's timings could not be read; not checked");
            return None;
        }
        Err(_) => {
            tracing::debug!("the cluster's timings did not come in time; not checked");
            return None;
        }
    };
    describe(&timings, ttl, plan)
}

/// The warning for `plan(ttl)` against `timings`, None if it rides out.
pub fn describe(
    timings: &Timings,
    ttl: Duration,
    plan: impl Fn(Duration) -> Plan,
) -> Option<String> {
    let p = plan(ttl);
    if p.rides_out(timings) {
        return None;
    }
    let smallest = match smallest_ttl(timings, &plan) {
        Some(t) => format!("{} ms", t.as_millis()),
        None => "none".into(),
    };
    Some(format!(
        "a TTL of {} ms{} cannot ride out a failover of the tenure cluster: with heartbeat {} ms \
         and election timeout {} ms a failover takes up to {} ms, plus {} ms to renew, but only \
         {} ms separate the next renewal from the stop (TTL x 0.9/1.1 - TTL/3{} must be at \
         least {} ms); the leadership would be given up during a tenure failover. The smallest \
         TTL that rides one out here is {smallest}",
        ttl.as_millis(),
        if p.grace.is_zero() {
            String::new()
        } else {
            format!(" with a grace of {} ms", p.grace.as_millis())
        },
        timings.heartbeat_ms,
        timings.election_timeout_ms,
        timings.failover_bound_ms,
        renewal_allowance(timings).as_millis(),
        p.room().as_millis(),
        if p.grace.is_zero() { "" } else { " - grace" },
        needed(timings).as_millis(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default timings: heartbeat 100 ms, election timeout 1000 ms.
    fn defaults() -> Timings {
        Timings {
            heartbeat_ms: 100,
            election_timeout_ms: 1000,
            candidacy_stagger_ms: 50,
            round_trip_ms: 50,
            clock_drift_ppm: 50_000,
            voters: 3,
            failover_bound_ms: 1555,
        }
    }

    fn elect(ttl: Duration) -> Plan {
        Plan { ttl, interval: ttl / 3, lag: Duration::ZERO, grace: Duration::ZERO }
    }

    /// `tenure run`'s default grace: 2 s, or the largest that fits.
    fn run(ttl: Duration) -> Plan {
        let max = trusted_span(ttl).saturating_sub(ttl / 3 + ttl / 6);
        Plan { grace: Duration::from_millis(2000).min(max), ..elect(ttl) }
    }

    #[test]
    fn the_issues_ttl_of_three_seconds_cannot_ride_out_a_default_failover() {
        let t = defaults();
        assert_eq!(needed(&t), Duration::from_millis(1855));
        // TTL 3 s, grace 954 ms: 2454 - 1000 - 954 = 500 ms of room.
        let p = run(Duration::from_millis(3000));
        assert_eq!(p.room().as_millis(), 500);
        assert!(!p.rides_out(&t));
        let w = describe(&t, p.ttl, run).unwrap();
        assert!(
            w.contains("TTL of 3000 ms with a grace of 954 ms") && w.contains("8000 ms"),
            "{w}"
        );
        // The smallest TTLs: 8 s for `tenure run`, 3.9 s for `tenure elect`.
        assert_eq!(smallest_ttl(&t, run), Some(Duration::from_millis(8000)));
        assert!(run(Duration::from_millis(8000)).rides_out(&t));
        assert!(!run(Duration::from_millis(7900)).rides_out(&t));
        assert_eq!(smallest_ttl(&t, elect), Some(Duration::from_millis(3900)));
        assert!(describe(&t, Duration::from_millis(10_000), run).is_none());
    }

    #[test]
    fn a_grace_too_large_for_every_ttl_has_no_smallest_ttl() {
        let t = defaults();
        let plan = |ttl: Duration| Plan { grace: MAX_TTL, ..elect(ttl) };
        assert_eq!(smallest_ttl(&t, plan), None);
        assert!(describe(&t, Duration::from_secs(10), plan).unwrap().ends_with("here is none"));
    }
}
