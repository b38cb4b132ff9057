//! Simulated node clocks: each node reads `offset + rate * global` where the
//! rate error stays within the configured drift bound.
//!
//! Rates are integers in parts per million so that every run is exactly
//! reproducible (no floating point in the time path).

use tenure_core::Instant;

/// Parts per million in one.
const PPM: i128 = 1_000_000;

/// One node's local clock as a function of global (simulated real) time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeClock {
    /// Local reading at global time zero, in nanoseconds.
    pub offset_ns: u64,
    /// Rate error in parts per million: the clock advances `1 + rate_ppm / 1e6`
    /// local nanoseconds per global nanosecond. Must be above `-1_000_000`.
    pub rate_ppm: i64,
}

impl NodeClock {
    /// A perfect clock with no offset.
    pub const PERFECT: NodeClock = NodeClock { offset_ns: 0, rate_ppm: 0 };

    /// A clock; `rate_ppm` must keep the rate positive.
    pub fn new(offset_ns: u64, rate_ppm: i64) -> Self {
        assert!(i128::from(rate_ppm) > -PPM, "a clock rate must stay positive");
        NodeClock { offset_ns, rate_ppm }
    }

    /// The local reading at global time `global_ns`.
    pub fn local(&self, global_ns: u64) -> Instant {
        let g = i128::from(global_ns);
        let local = i128::from(self.offset_ns) + g + g * i128::from(self.rate_ppm) / PPM;
        Instant::from_nanos(u64::try_from(local.max(0)).unwrap_or(u64::MAX))
    }

    /// The earliest global time at which the local clock reads at least `local`.
    /// Used to arm timers: a timer set for a local deadline fires then.
    pub fn global_at(&self, local: Instant) -> u64 {
        if local == Instant::MAX {
            return u64::MAX;
        }
        let l = i128::from(local.as_nanos()) - i128::from(self.offset_ns);
        if l <= 0 {
            return 0;
        }
        let rate = PPM + i128::from(self.rate_ppm);
        // Integer rounding in `local` can leave the estimate off by a few
        // nanoseconds; walk to the exact earliest instant.
        let mut g = u64::try_from((l * PPM + rate - 1) / rate).unwrap_or(u64::MAX);
        while self.local(g) < local {
            g += 1;
        }
        while g > 0 && self.local(g - 1) >= local {
            g -= 1;
        }
        g
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_and_global_agree() {
        for &(offset, ppm) in &[(0u64, 0i64), (12_345, 50_000), (999_999_999, -50_000), (7, -1)] {
            let c = NodeClock::new(offset, ppm);
            for g in [0u64, 1, 999, 1_000_000, 123_456_789_012] {
                let l = c.local(g);
                let back = c.global_at(l);
                assert!(back <= g, "global_at must find the earliest instant");
                assert!(c.local(back) >= l);
            }
        }
    }

    #[test]
    fn drift_changes_elapsed_time() {
        let fast = NodeClock::new(0, 50_000);
        let slow = NodeClock::new(0, -50_000);
        let g = 1_000_000_000;
        assert_eq!(fast.local(g).as_nanos(), 1_050_000_000);
        assert_eq!(slow.local(g).as_nanos(), 950_000_000);
    }
}
