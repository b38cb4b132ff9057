//! The process-local monotonic clock handed to the election core.

use std::time::Duration;
use tenure_core::Instant;

/// Maps [`std::time::Instant`] onto the core's [`Instant`]: nanoseconds since
/// the moment the clock was created. Copies share the origin.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    origin: std::time::Instant,
}

impl Clock {
    /// A clock whose origin is now.
    pub fn new() -> Self {
        Clock { origin: std::time::Instant::now() }
    }

    /// The current time.
    pub fn now(&self) -> Instant {
        self.to_core(std::time::Instant::now())
    }

    /// A std instant on this clock.
    pub fn to_core(&self, t: std::time::Instant) -> Instant {
        let nanos = t.saturating_duration_since(self.origin).as_nanos();
        Instant::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    /// The std instant of a core deadline, or `None` for [`Instant::MAX`] (never).
    pub fn to_std(&self, t: Instant) -> Option<std::time::Instant> {
        if t == Instant::MAX {
            return None;
        }
        self.origin.checked_add(Duration::from_nanos(t.as_nanos()))
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_never_means_none() {
        let c = Clock::new();
        let now = c.now();
        let std = c.to_std(now).unwrap();
        assert_eq!(c.to_core(std), now);
        assert_eq!(c.to_std(Instant::MAX), None);
        assert!(c.now() >= now);
    }
}
