//! Clock-drift arithmetic: how long a span measured on one node's clock may
//! last on another's.
//!
//! Every clock runs at a rate within `1 ± rho` of real time, with `rho` given
//! in parts per million ([`crate::Config::clock_drift_ppm`]). A span `d` on
//! one clock is then between `d * (1 - rho) / (1 + rho)` and
//! `d * (1 + rho) / (1 - rho)` on any other. Leases use the short end (a
//! holder must stop before any promise it relies on ends); waits for another
//! node's lease use the long end.

use std::time::Duration;

/// Parts per million in one.
pub const PPM: u32 = 1_000_000;

/// `d` as short as it may look on another clock: `d * (1 - rho) / (1 + rho)`.
pub fn shrink(d: Duration, drift_ppm: u32) -> Duration {
    scale(d, PPM - drift_ppm.min(PPM), PPM + drift_ppm.min(PPM))
}

/// `d` as long as it may look on another clock: `d * (1 + rho) / (1 - rho)`.
/// A bound of 100% or more (`drift_ppm >= PPM`) stretches without limit.
pub fn stretch(d: Duration, drift_ppm: u32) -> Duration {
    if drift_ppm >= PPM {
        return Duration::MAX;
    }
    scale(d, PPM + drift_ppm, PPM - drift_ppm)
}

/// `d * num / den`, rounded down, saturating at `u64::MAX` nanoseconds.
fn scale(d: Duration, num: u32, den: u32) -> Duration {
    let nanos = d.as_nanos() * u128::from(num) / u128::from(den);
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn five_percent_either_way() {
        let second = Duration::from_secs(1);
        // 1000 ms * 0.95 / 1.05 and 1000 ms * 1.05 / 0.95.
        assert_eq!(shrink(second, 50_000), Duration::from_nanos(904_761_904));
        assert_eq!(stretch(second, 50_000), Duration::from_nanos(1_105_263_157));
    }

    #[test]
    fn no_drift_changes_nothing() {
        let d = Duration::from_millis(1234);
        assert_eq!(shrink(d, 0), d);
        assert_eq!(stretch(d, 0), d);
    }

    #[test]
    fn shrinking_then_stretching_never_exceeds_the_original() {
        for ppm in [1, 999, 50_000, 100_000] {
            for ms in [0, 1, 7, 1000, 86_400_000] {
                let d = Duration::from_millis(ms);
                assert!(stretch(shrink(d, ppm), ppm) <= d, "{ms} ms at {ppm} ppm");
                assert!(shrink(stretch(d, ppm), ppm) <= d, "{ms} ms at {ppm} ppm");
            }
        }
    }

    #[test]
    fn saturates_instead_of_overflowing() {
        assert_eq!(stretch(Duration::MAX, 100_000), Duration::from_nanos(u64::MAX));
        assert_eq!(stretch(Duration::from_secs(1), PPM), Duration::MAX);
        assert_eq!(shrink(Duration::from_secs(1), PPM), Duration::ZERO);
    }
}
