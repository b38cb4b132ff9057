//! The rule every session's deadline follows, whichever the store: a
//! renewal's send time plus the TTL shrunk by the clock-drift bound (the
//! derivation is in [`crate::session`]'s documentation).

use std::time::Duration;
use tokio::time::Instant;

/// The clock-drift bound the deadline allows for, in parts per million:
/// the largest bound a tenure server accepts (`MAX_CLOCK_DRIFT_PPM`, 10%).
/// The client does not know the bound the servers were configured with
/// (5% by default), so it assumes the largest: with it the deadline is
/// `TTL × 0.9 / 1.1 ≈ 0.818 TTL` after a renewal's send time.
pub const DRIFT_PPM: u32 = tenure_core::config::MAX_CLOCK_DRIFT_PPM;

/// How much of a TTL a session is trusted after a renewal's send time:
/// `ttl (1 − ρ) / (1 + ρ)` with `ρ` = [`DRIFT_PPM`].
pub fn trusted_span(ttl: Duration) -> Duration {
    tenure_core::drift::shrink(ttl, DRIFT_PPM)
}

/// The deadline after a renewal sent at `sent` succeeded: before it, no
/// server can have ended the session (see [`crate::session`]).
pub fn deadline_after(sent: Instant, ttl: Duration) -> Instant {
    sent + trusted_span(ttl)
}

/// How often a session is renewed: every third of its TTL, so that two
/// renewals can fail before the deadline (at about 0.82 of the TTL).
pub fn renew_interval(ttl: Duration) -> Duration {
    ttl / 3
}
