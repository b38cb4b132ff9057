//! Bookkeeping for [`crate::NodeMetrics`]: leader changes, and how late the
//! election driver wakes.

use std::collections::VecDeque;
use std::time::Duration;
use tenure_core::{Instant, NodeId};

/// Failovers remembered for metrics (oldest dropped first).
pub const FAILOVER_HISTORY: usize = 32;

/// Follows the known leader and measures failovers: the time from losing a
/// leader (no leader known) to knowing the next one.
#[derive(Debug, Default)]
pub struct LeaderTracker {
    leader: Option<NodeId>,
    lost_at: Option<Instant>,
    /// Times the known leader changed.
    pub changes: u64,
    failovers_ms: VecDeque<f64>,
}

impl LeaderTracker {
    /// Records that the known leader is `leader` at `now`.
    pub fn observe(&mut self, leader: Option<NodeId>, now: Instant) {
        if leader == self.leader {
            return;
        }
        self.changes += 1;
        match (self.leader, leader) {
            (Some(_), None) => self.lost_at = Some(now),
            (_, Some(_)) => {
                if let Some(lost) = self.lost_at.take() {
                    if self.failovers_ms.len() == FAILOVER_HISTORY {
                        self.failovers_ms.pop_front();
                    }
                    self.failovers_ms.push_back(now.saturating_since(lost).as_secs_f64() * 1e3);
                }
            }
            (None, None) => {}
        }
        self.leader = leader;
    }

    /// Recent failover durations in milliseconds, oldest first.
    pub fn failovers_ms(&self) -> Vec<f64> {
        self.failovers_ms.iter().copied().collect()
    }
}

/// The window of [`DriverLag::recent_max`]: the largest lateness of the
/// last one to two windows. Ten seconds covers an election timeout many
/// times over and lets a monitor polling every few seconds see every stall.
pub const LAG_WINDOW: Duration = Duration::from_secs(10);

/// Lateness thresholds counted by [`DriverLag`], in milliseconds: a
/// heartbeat interval is tens of milliseconds, an election timeout hundreds.
pub const LAG_THRESHOLDS_MS: [u64; 4] = [10, 50, 100, 250];

/// How late the election driver wakes for its timer: the time from a
/// deadline of the election core to the driver taking it. A driver that
/// shares its threads with slow work wakes late, and a leader that wakes
/// later than an election timeout loses office; so this is the measure of
/// starvation (`tenure_driver_lag_*` metrics).
#[derive(Debug, Default)]
pub struct DriverLag {
    max: Duration,
    /// `(window number, largest lateness in it)` for the current window and
    /// the one before.
    windows: [(u64, Duration); 2],
    wakes: u64,
    late: [u64; LAG_THRESHOLDS_MS.len()],
}

impl DriverLag {
    /// Records a wake `late` after its deadline, at `now`.
    pub fn record(&mut self, now: Instant, late: Duration) {
        self.max = self.max.max(late);
        self.wakes += 1;
        for (count, ms) in self.late.iter_mut().zip(LAG_THRESHOLDS_MS) {
            if late > Duration::from_millis(ms) {
                *count += 1;
            }
        }
        let window = Self::window(now);
        if self.windows[0].0 != window {
            self.windows = [(window, Duration::ZERO), self.windows[0]];
        }
        self.windows[0].1 = self.windows[0].1.max(late);
    }

    fn window(now: Instant) -> u64 {
        now.as_nanos() / u64::try_from(LAG_WINDOW.as_nanos()).unwrap_or(u64::MAX)
    }

    /// The largest lateness since the node started.
    pub fn max(&self) -> Duration {
        self.max
    }

    /// The largest lateness in the last one to two [`LAG_WINDOW`]s before
    /// `now` (zero when the driver did not wake for its timer then).
    pub fn recent_max(&self, now: Instant) -> Duration {
        let window = Self::window(now);
        self.windows
            .iter()
            .filter(|(w, _)| *w == window || *w + 1 == window)
            .map(|(_, late)| *late)
            .max()
            .unwrap_or_default()
    }

    /// Timer wakes recorded.
    pub fn wakes(&self) -> u64 {
        self.wakes
    }

    /// For each of [`LAG_THRESHOLDS_MS`], the wakes later than it.
    pub fn late_wakes(&self) -> Vec<(u64, u64)> {
        LAG_THRESHOLDS_MS.iter().copied().zip(self.late).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lag_keeps_the_largest_overall_and_recently() {
        let mut lag = DriverLag::default();
        let at = |s: u64| Instant::from_nanos(s * 1_000_000_000);
        lag.record(at(1), Duration::from_millis(300));
        lag.record(at(2), Duration::from_millis(20));
        assert_eq!(lag.recent_max(at(3)), Duration::from_millis(300));
        assert_eq!(lag.late_wakes(), vec![(10, 2), (50, 1), (100, 1), (250, 1)]);
        // Next window: the one before still counts.
        lag.record(at(12), Duration::from_millis(5));
        assert_eq!(lag.recent_max(at(12)), Duration::from_millis(300));
        // Two windows on, the stall is history; only the overall max keeps it.
        lag.record(at(21), Duration::from_millis(7));
        assert_eq!(lag.recent_max(at(21)), Duration::from_millis(7));
        assert_eq!(lag.recent_max(at(45)), Duration::ZERO);
        assert_eq!(lag.max(), Duration::from_millis(300));
        assert_eq!(lag.wakes(), 4);
    }

    fn ms(n: u64) -> Instant {
        Instant::from_nanos(n * 1_000_000)
    }

    #[test]
    fn measures_gaps_between_leaders_only() {
        let mut t = LeaderTracker::default();
        t.observe(Some(NodeId(1)), ms(100)); // first election: not a failover
        t.observe(None, ms(200));
        t.observe(Some(NodeId(2)), ms(230));
        t.observe(Some(NodeId(2)), ms(240)); // no change
        t.observe(Some(NodeId(3)), ms(300)); // direct switch: no gap seen
        assert_eq!(t.changes, 4);
        assert_eq!(t.failovers_ms(), vec![30.0]);
    }

    #[test]
    fn history_is_bounded() {
        let mut t = LeaderTracker::default();
        for i in 0..(FAILOVER_HISTORY as u64 + 10) {
            t.observe(Some(NodeId(1)), ms(10 * i));
            t.observe(None, ms(10 * i + 1));
        }
        assert_eq!(t.failovers_ms().len(), FAILOVER_HISTORY);
    }
}
