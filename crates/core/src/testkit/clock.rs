//! A node's clock: global (virtual, true) time mapped to what the node reads.

use crate::time::Instant;
use std::time::Duration;

/// The global time at which every cluster starts (an arbitrary origin, away
/// from zero so that nothing relies on `Instant::ZERO`).
pub const START: Instant = Instant::from_nanos(1_000_000_000);

/// Parts per million in one.
const PPM: i128 = 1_000_000;

/// A node's clock. At global time `g` it reads
/// `START + offset + (g - START) * (1 + rate_ppm / 10^6)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Clock {
    /// How much faster (positive) or slower (negative) than global time it
    /// runs, in parts per million. Must be above -10^6.
    pub rate_ppm: i64,
    /// What it reads ahead of global time at the start.
    pub offset: Duration,
}

impl Clock {
    /// Reads global time exactly.
    pub const PERFECT: Clock = Clock { rate_ppm: 0, offset: Duration::ZERO };

    /// A clock running `rate_ppm` fast (negative: slow), without offset.
    pub const fn drifting(rate_ppm: i64) -> Clock {
        Clock { rate_ppm, offset: Duration::ZERO }
    }

    fn offset_ns(&self) -> i128 {
        self.offset.as_nanos() as i128
    }

    /// What the clock reads at global time `global` (not before [`START`]).
    pub fn local(&self, global: Instant) -> Instant {
        let elapsed = global.as_nanos() as i128 - START.as_nanos() as i128;
        let local = START.as_nanos() as i128
            + self.offset_ns()
            + elapsed
            + elapsed * i128::from(self.rate_ppm) / PPM;
        Instant::from_nanos(u64::try_from(local).unwrap_or(0))
    }

    /// The first global instant at which the clock reads `local` or later
    /// ([`Instant::MAX`] stays `MAX`; a reading from before [`START`] is `START`).
    pub fn global_at(&self, local: Instant) -> Instant {
        if local == Instant::MAX {
            return Instant::MAX;
        }
        let since = local.as_nanos() as i128 - START.as_nanos() as i128 - self.offset_ns();
        if since <= 0 {
            return START;
        }
        let rate = PPM + i128::from(self.rate_ppm);
        let elapsed = (since * PPM + rate - 1).div_euclid(rate);
        let mut g = START.as_nanos().saturating_add(u64::try_from(elapsed).unwrap_or(u64::MAX));
        // Integer rounding in `local`: step to the first instant that reads `local`.
        while self.local(Instant::from_nanos(g)) < local {
            g += 1;
        }
        while g > START.as_nanos() && self.local(Instant::from_nanos(g - 1)) >= local {
            g -= 1;
        }
        Instant::from_nanos(g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perfect_clock_reads_global_time() {
        let g = START + Duration::from_millis(1234);
        assert_eq!(Clock::PERFECT.local(g), g);
        assert_eq!(Clock::PERFECT.global_at(g), g);
    }

    #[test]
    fn global_at_inverts_local() {
        for rate_ppm in [-50_000, -1, 0, 7, 49_999] {
            let clock = Clock { rate_ppm, offset: Duration::from_nanos(123_456_789) };
            for ms in [0, 1, 999, 123_457] {
                let g = START + Duration::from_millis(ms) + Duration::from_nanos(17);
                let l = clock.local(g);
                let back = clock.global_at(l);
                assert!(back <= g, "{rate_ppm} ppm, {ms} ms: {back:?} after {g:?}");
                assert_eq!(clock.local(back), l, "{rate_ppm} ppm, {ms} ms");
                if back > START {
                    assert!(clock.local(back - Duration::from_nanos(1)) < l);
                }
            }
        }
    }

    #[test]
    fn a_fast_clock_gains() {
        let clock = Clock::drifting(50_000);
        let g = START + Duration::from_secs(10);
        assert_eq!(clock.local(g), START + Duration::from_millis(10_500));
    }
}
