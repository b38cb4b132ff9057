//! Rate-limited logging of refused peer connections.
//!
//! A stranger can open connections as fast as the kernel accepts them; a WARN
//! line for each would fill the disk (3 MB in 5 s when this was written). So
//! refusals are logged one by one only [`REJECT_LOG_BURST`] times per
//! [`REJECT_LOG_INTERVAL`] — enough to see a misconfiguration and its reason
//! — and the rest are counted and logged as one summary line per interval
//! (with the last reason and address). Every refusal is still counted in
//! `frames_rejected`.

use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tracing::warn;

/// The window over which refusals are limited and summarised.
pub const REJECT_LOG_INTERVAL: Duration = Duration::from_secs(10);
/// Refusals logged one by one per window.
pub const REJECT_LOG_BURST: u32 = 5;

/// What to do with one refusal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Log it.
    Log,
    /// Log it, and say that the next ones will be summarised.
    LogLast,
    /// Count it for the summary.
    Suppress,
}

/// Refusals not logged one by one during a window.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Summary {
    /// How many.
    pub refused: u64,
    /// How long the window lasted.
    pub over: Duration,
    /// The last one's address.
    pub last_remote: SocketAddr,
    /// The last one's reason.
    pub last_reason: String,
}

impl Summary {
    pub(crate) fn log(&self) {
        warn!(
            refused = self.refused,
            over = ?self.over,
            last_remote = %self.last_remote,
            last_reason = %self.last_reason,
            "refused more peer connections than were logged (summary)"
        );
    }
}

/// The current window.
#[derive(Debug, Default)]
pub(crate) struct RejectLog {
    /// When the window began (its first refusal); `None`: no window open.
    started: Option<Instant>,
    /// Refusals logged one by one in it.
    logged: u32,
    /// Refusals counted in it, and the last of them.
    suppressed: u64,
    last: Option<(SocketAddr, String)>,
}

impl RejectLog {
    /// Records a refusal at `now`: the summary of a window that ended (if it
    /// held suppressed refusals), and what to do with this one.
    pub(crate) fn record(
        &mut self,
        now: Instant,
        remote: SocketAddr,
        reason: &str,
    ) -> (Option<Summary>, Verdict) {
        let summary = self.flush(now, false);
        let started = *self.started.get_or_insert(now);
        debug_assert!(now >= started);
        if self.logged < REJECT_LOG_BURST {
            self.logged += 1;
            let verdict =
                if self.logged == REJECT_LOG_BURST { Verdict::LogLast } else { Verdict::Log };
            return (summary, verdict);
        }
        self.suppressed += 1;
        self.last = Some((remote, reason.to_string()));
        (summary, Verdict::Suppress)
    }

    /// Closes the window if it has run out at `now` (or at once with
    /// `at_once`); returns its summary if it held suppressed refusals.
    pub(crate) fn flush(&mut self, now: Instant, at_once: bool) -> Option<Summary> {
        let started = self.started?;
        let over = now.saturating_duration_since(started);
        if !at_once && over < REJECT_LOG_INTERVAL {
            return None;
        }
        let refused = std::mem::take(&mut self.suppressed);
        let last = self.last.take();
        *self = RejectLog::default();
        let (last_remote, last_reason) = last?;
        (refused > 0).then_some(Summary { refused, over, last_remote, last_reason })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr() -> SocketAddr {
        "127.0.0.1:9".parse().unwrap()
    }

    #[test]
    fn a_burst_is_logged_then_counted_then_summarised_once_per_window() {
        let mut log = RejectLog::default();
        let t0 = Instant::now();
        let verdicts: Vec<Verdict> =
            (0..1000).map(|i| log.record(t0 + Duration::from_millis(i), addr(), "x").1).collect();
        let logged = verdicts.iter().filter(|v| **v != Verdict::Suppress).count();
        assert_eq!(logged, REJECT_LOG_BURST as usize);
        assert_eq!(verdicts[REJECT_LOG_BURST as usize - 1], Verdict::LogLast);
        // Not yet: the window is still open.
        assert_eq!(log.flush(t0 + Duration::from_secs(1), false), None);
        // The next refusal after the window closes brings the summary and is logged.
        let (summary, verdict) = log.record(t0 + REJECT_LOG_INTERVAL, addr(), "last");
        let summary = summary.expect("a summary of the suppressed refusals");
        assert_eq!(summary.refused, 1000 - u64::from(REJECT_LOG_BURST));
        assert_eq!(summary.last_reason, "x");
        assert_eq!(verdict, Verdict::Log);
    }

    #[test]
    fn a_quiet_window_needs_no_summary_and_flush_at_once_empties_it() {
        let mut log = RejectLog::default();
        let t0 = Instant::now();
        log.record(t0, addr(), "a");
        assert_eq!(log.flush(t0 + REJECT_LOG_INTERVAL, false), None);
        for _ in 0..=REJECT_LOG_BURST {
            log.record(t0 + REJECT_LOG_INTERVAL, addr(), "b");
        }
        let s = log.flush(t0 + REJECT_LOG_INTERVAL, true).expect("one suppressed");
        assert_eq!((s.refused, s.last_reason.as_str()), (1, "b"));
        assert_eq!(log.flush(t0 + REJECT_LOG_INTERVAL * 3, true), None);
    }
}
