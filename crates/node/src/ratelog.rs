//! Rate-limited logging of refusals: a flood of rejected requests or
//! connections is counted, and logged as one summary line per interval
//! instead of a line each.
//!
//! A hostile or broken client can make a server refuse thousands of requests
//! a second (bad tokens, connections over a cap, peers of another cluster).
//! A log line for each would let it fill the disk and bury every other line.
//! A [`RateLimitedLog`] counts them by reason and by source address; a summary
//! line (a `WARN`) is written at most once per interval, when the interval
//! since the first uncounted refusal has passed, and once more by
//! [`RateLimitedLog::flush`] when the server stops. [`RateLimitedLog::run`]
//! writes the summary of a flood that has stopped without waiting for the
//! next refusal.
//!
//! ```
//! use std::net::{IpAddr, Ipv4Addr};
//! use std::time::Duration;
//! let log = tenure_node::RateLimitedLog::new("HTTP requests", Duration::from_secs(10));
//! let source = IpAddr::V4(Ipv4Addr::LOCALHOST);
//! for _ in 0..1000 {
//!     log.record("401 no token", Some(source)); // one line at most per 10 s
//! }
//! let summary = log.flush().expect("refusals were counted");
//! assert_eq!(summary.total, 1000);
//! ```

use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;
use tokio::time::Instant;
use tracing::warn;

/// The usual interval between two summary lines of one log.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(10);

/// Distinct reasons counted in one interval; refusals of further reasons are
/// counted under [`OTHER_REASON`]. Callers use a handful of fixed reasons.
pub const MAX_REASONS: usize = 16;

/// The reason under which refusals beyond [`MAX_REASONS`] distinct ones are counted.
pub const OTHER_REASON: &str = "other";

/// Distinct source addresses counted in one interval. A flood from more
/// addresses (spoofing is not possible over TCP, but a botnet is) is still
/// counted in the totals; the summary then says the addresses were at least
/// this many. Bounds the memory of a window to tens of kilobytes.
pub const MAX_SOURCES: usize = 1024;

/// What was counted in one interval, as logged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// What was refused ("HTTP requests", "peer connections").
    pub what: &'static str,
    /// From the first refusal counted to the summary.
    pub elapsed: Duration,
    /// Refusals counted.
    pub total: u64,
    /// Refusals by reason, most frequent first.
    pub reasons: Vec<(&'static str, u64)>,
    /// Distinct source addresses seen (at most [`MAX_SOURCES`]).
    pub sources: usize,
    /// True when more than [`MAX_SOURCES`] addresses were seen.
    pub sources_overflowed: bool,
    /// The address with the most refusals, and its count.
    pub top_source: Option<(IpAddr, u64)>,
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} refused in the last {:.1} s (",
            self.total,
            self.what,
            self.elapsed.as_secs_f64()
        )?;
        for (i, (reason, n)) in self.reasons.iter().enumerate() {
            let sep = if i == 0 { "" } else { ", " };
            write!(f, "{sep}{reason}: {n}")?;
        }
        write!(f, ")")?;
        let more = if self.sources_overflowed { "+" } else { "" };
        match self.top_source {
            Some((addr, n)) => write!(
                f,
                " from {}{more} address{}, most from {addr} ({n})",
                self.sources,
                if self.sources == 1 && more.is_empty() { "" } else { "es" }
            ),
            None => Ok(()),
        }
    }
}

/// The refusals counted since the last summary.
#[derive(Default)]
struct Window {
    /// When the first of them was counted; None while there are none.
    started: Option<Instant>,
    total: u64,
    reasons: Vec<(&'static str, u64)>,
    sources: HashMap<IpAddr, u64>,
    sources_overflowed: bool,
}

impl Window {
    fn count(&mut self, now: Instant, reason: &'static str, source: Option<IpAddr>) {
        self.started.get_or_insert(now);
        self.total += 1;
        let reason = if self.reasons.len() >= MAX_REASONS
            && !self.reasons.iter().any(|(r, _)| *r == reason)
        {
            OTHER_REASON
        } else {
            reason
        };
        match self.reasons.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, n)) => *n += 1,
            None => self.reasons.push((reason, 1)),
        }
        if let Some(addr) = source {
            let room = self.sources.len() < MAX_SOURCES;
            match self.sources.get_mut(&addr) {
                Some(n) => *n += 1,
                None if room => {
                    self.sources.insert(addr, 1);
                }
                None => self.sources_overflowed = true,
            }
        }
    }

    /// Ends the window: its summary, if it counted anything.
    fn take(&mut self, what: &'static str, now: Instant) -> Option<Summary> {
        let started = self.started?;
        let w = std::mem::take(self);
        let mut reasons = w.reasons;
        reasons.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let top_source =
            w.sources.iter().max_by_key(|&(addr, n)| (*n, *addr)).map(|(a, n)| (*a, *n));
        Some(Summary {
            what,
            elapsed: now.saturating_duration_since(started),
            total: w.total,
            reasons,
            sources: w.sources.len(),
            sources_overflowed: w.sources_overflowed,
            top_source,
        })
    }

    fn due(&self, now: Instant, interval: Duration) -> bool {
        self.started.is_some_and(|s| now.saturating_duration_since(s) >= interval)
    }
}

/// Counts refusals and logs a summary line at most once per interval; shared
/// by every connection of a server (the counts are under a short mutex).
pub struct RateLimitedLog {
    what: &'static str,
    interval: Duration,
    window: Mutex<Window>,
}

impl fmt::Debug for RateLimitedLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitedLog")
            .field("what", &self.what)
            .field("interval", &self.interval)
            .finish_non_exhaustive()
    }
}

impl RateLimitedLog {
    /// A log of refused `what` ("HTTP requests") with a summary at most every
    /// `interval` ([`DEFAULT_INTERVAL`] is the usual).
    pub fn new(what: &'static str, interval: Duration) -> Self {
        RateLimitedLog { what, interval, window: Mutex::new(Window::default()) }
    }

    /// The interval between summaries.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    fn window(&self) -> MutexGuard<'_, Window> {
        // Counters only, each update complete under the lock: a poisoned lock
        // still holds consistent counts.
        self.window.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts one refusal for `reason` (a short fixed text such as
    /// "401 no token") from `source`; logs the summary of the previous
    /// interval first when it is due.
    pub fn record(&self, reason: &'static str, source: Option<IpAddr>) {
        self.record_at(Instant::now(), reason, source);
    }

    /// [`record`](Self::record) at a given time; returns the summary it
    /// logged, if one was due.
    pub fn record_at(
        &self,
        now: Instant,
        reason: &'static str,
        source: Option<IpAddr>,
    ) -> Option<Summary> {
        let mut window = self.window();
        let due = if window.due(now, self.interval) { window.take(self.what, now) } else { None };
        window.count(now, reason, source);
        drop(window);
        due.inspect(emit)
    }

    /// Logs the summary if the interval since its first refusal has passed
    /// (what [`run`](Self::run) calls); returns it.
    pub fn flush_due_at(&self, now: Instant) -> Option<Summary> {
        let mut window = self.window();
        let due = if window.due(now, self.interval) { window.take(self.what, now) } else { None };
        drop(window);
        due.inspect(emit)
    }

    /// Logs whatever was counted since the last summary, due or not (at
    /// shutdown); returns it.
    pub fn flush(&self) -> Option<Summary> {
        let summary = self.window().take(self.what, Instant::now());
        summary.inspect(emit)
    }

    /// Logs due summaries as the intervals pass, so that the end of a flood is
    /// reported without waiting for the next refusal. Runs until dropped
    /// (spawn it beside the server, abort it with the server).
    pub async fn run(&self) {
        loop {
            tokio::time::sleep(self.interval).await;
            self.flush_due_at(Instant::now());
        }
    }
}

fn emit(summary: &Summary) {
    warn!(
        refused = summary.total,
        interval_ms = u64::try_from(summary.elapsed.as_millis()).unwrap_or(u64::MAX),
        "{summary}"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn ip(last: u8) -> Option<IpAddr> {
        Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, last)))
    }

    #[test]
    fn a_flood_gives_one_summary_per_interval_with_every_refusal_counted() {
        let interval = Duration::from_secs(1);
        let log = RateLimitedLog::new("HTTP requests", interval);
        let t0 = Instant::now();
        let mut summaries = Vec::new();
        // 10 000 refusals over 5 s: one every 0.5 ms.
        for i in 0..10_000u64 {
            let now = t0 + Duration::from_micros(500 * i);
            let reason = if i % 10 == 0 { "401 bad token" } else { "401 no token" };
            summaries.extend(log.record_at(now, reason, ip((i % 3) as u8)));
            summaries.extend(log.flush_due_at(now));
        }
        // Windows of at least an interval each: at most 5 s / 1 s of them.
        assert!(summaries.len() <= 5, "{} summaries: {summaries:?}", summaries.len());
        assert!(summaries.len() >= 4, "{} summaries: {summaries:?}", summaries.len());
        for s in &summaries {
            assert!(s.elapsed >= interval, "{s}");
            assert_eq!(s.sources, 3);
            assert_eq!(s.reasons[0].0, "401 no token", "most frequent first: {s}");
        }
        let last = log.flush().expect("the last window is pending");
        let counted: u64 = summaries.iter().chain([&last]).map(|s| s.total).sum();
        assert_eq!(counted, 10_000, "every refusal is in exactly one summary");
        let bad: u64 = summaries
            .iter()
            .chain([&last])
            .flat_map(|s| &s.reasons)
            .filter(|(r, _)| *r == "401 bad token")
            .map(|(_, n)| n)
            .sum();
        assert_eq!(bad, 1_000);
        assert_eq!(log.flush(), None, "nothing is counted twice");
    }

    #[test]
    fn a_quiet_log_says_nothing_and_a_lone_refusal_waits_for_its_interval() {
        let log = RateLimitedLog::new("peer connections", Duration::from_secs(10));
        let t0 = Instant::now();
        assert_eq!(log.flush_due_at(t0 + Duration::from_secs(60)), None);
        assert_eq!(log.record_at(t0, "wrong cluster", ip(1)), None);
        assert_eq!(log.flush_due_at(t0 + Duration::from_secs(9)), None);
        let s = log.flush_due_at(t0 + Duration::from_secs(10)).expect("due");
        assert_eq!((s.total, s.top_source), (1, Some((ip(1).unwrap(), 1))));
        assert_eq!(
            s.to_string(),
            "1 peer connections refused in the last 10.0 s (wrong cluster: 1) \
             from 1 address, most from 10.0.0.1 (1)"
        );
        assert_eq!(log.flush(), None);
    }

    #[test]
    fn the_refusal_after_a_due_window_starts_the_next_one() {
        let log = RateLimitedLog::new("HTTP requests", Duration::from_secs(1));
        let t0 = Instant::now();
        log.record_at(t0, "a", None);
        log.record_at(t0 + Duration::from_millis(100), "a", None);
        let s = log.record_at(t0 + Duration::from_secs(2), "b", None).expect("the first is due");
        assert_eq!((s.total, s.reasons.clone()), (2, vec![("a", 2)]));
        assert_eq!((s.sources, s.top_source), (0, None));
        let s = log.flush().expect("the second window");
        assert_eq!((s.total, s.reasons), (1, vec![("b", 1)]));
    }

    #[test]
    fn reasons_and_sources_are_bounded() {
        const REASONS: [&str; 20] = [
            "r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10", "r11", "r12", "r13",
            "r14", "r15", "r16", "r17", "r18", "r19",
        ];
        let log = RateLimitedLog::new("HTTP requests", Duration::from_secs(1));
        let t0 = Instant::now();
        for (i, reason) in REASONS.iter().enumerate() {
            log.record_at(t0, reason, None);
            log.record_at(t0, reason, None);
            assert!(i < MAX_REASONS || log.window().reasons.len() == MAX_REASONS + 1);
        }
        for i in 0..(MAX_SOURCES as u32 + 10) {
            let addr = IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i));
            log.record_at(t0, "r0", Some(addr));
        }
        let s = log.flush().unwrap();
        assert_eq!(s.total, 40 + MAX_SOURCES as u64 + 10);
        assert_eq!(s.reasons.len(), MAX_REASONS + 1, "{s}");
        assert!(s.reasons.contains(&(OTHER_REASON, 8)), "{s}");
        assert_eq!((s.sources, s.sources_overflowed), (MAX_SOURCES, true));
        assert!(s.to_string().contains("from 1024+ addresses"), "{s}");
    }
}
