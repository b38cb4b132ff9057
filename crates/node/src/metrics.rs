//! Leader-change bookkeeping for [`crate::NodeMetrics`].

use std::collections::VecDeque;
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

#[cfg(test)]
mod tests {
    use super::*;

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
