//! What the application-election workload runs ([`crate::elect`]): its
//! size, its TTL and the drift margin its clients keep, and the bugs tests
//! plant in it.

/// Session TTL of the default workload, ms: two election timeouts of the
/// default timing, so a tenure failover usually (not always) fits in it.
pub const DEFAULT_TTL_MS: u64 = 2_000;
/// Election names of the default workload.
pub const DEFAULT_NAMES: usize = 2;
/// App clients of the default workload.
pub const DEFAULT_APPS: usize = 6;
/// A deliberate bug, for tests that show the election checkers can fail.
/// Never set by `tenure sim`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElectBug {
    /// The nodes answer a renewal of a lease whose expiry was proposed, or
    /// that no longer exists, as renewed (R3 and R1's second half broken).
    RenewEndedSessions,
    /// The clients ignore their deadline: they lead until they learn their
    /// session ended or a read shows them not first.
    IgnoreDeadline,
    /// The nodes report each candidate's `create_revision` modulo 8 (a
    /// token that wraps and is reused).
    WrappingTokens,
    /// The nodes never propose an expiry: a dead holder keeps its name.
    NoExpiries,
    /// The nodes never propose a lease checkpoint: every leader change
    /// gives every session a fresh TTL, as before checkpoints existed.
    NoCheckpoints,
    /// The nodes answer a renewal of a lease marked silent as renewed
    /// without renewing it (R4 broken: a later leader counts its silence
    /// from before the renewal).
    RenewSilent,
}

/// The application-election workload of a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElectSpec {
    /// App clients.
    pub apps: usize,
    /// Election names (`e0`, `e1`, ...); app `a` campaigns in name `a % names`.
    pub names: usize,
    /// Session TTL, ms.
    pub ttl_ms: u64,
    /// A deliberate bug (tests only).
    pub planted: Option<ElectBug>,
}

impl Default for ElectSpec {
    fn default() -> Self {
        ElectSpec {
            apps: DEFAULT_APPS,
            names: DEFAULT_NAMES,
            ttl_ms: DEFAULT_TTL_MS,
            planted: None,
        }
    }
}

impl ElectSpec {
    /// The session TTL, ns.
    pub fn ttl_ns(&self) -> u64 {
        self.ttl_ms * 1_000_000
    }

    /// The drift margin a client takes off the TTL, ns, for clocks whose
    /// rate is within `drift_ppm` of true time (the simulator's clock
    /// model, the core's `clock_drift_ppm`).
    ///
    /// Why it suffices: the client sends a renewal at global time `s`; the
    /// leader answers at `a ≥ s` and (R2) was still the leader after `s`,
    /// so it, or any later leader (which starts a fresh TTL when it becomes
    /// ready, after `s`, or the rest of a TTL whose silence began after
    /// `s`, counted on leaders' clocks), proposes the expiry no earlier than `TTL` on its
    /// own clock after `s`: no earlier than global `s + TTL/(1+δ)`. Only
    /// then can the key go and a successor be elected. The client stops
    /// trusting at `TTL − margin` on its own clock after `s`: at global
    /// `s + (TTL − margin)/(1−δ)` at the latest. With `margin =
    /// TTL·2δ/(1+δ)`, `(TTL − margin)/(1−δ) = TTL/(1+δ)`: the client stops
    /// no later than the earliest expiry. The margin is rounded up to the
    /// next nanosecond, plus one millisecond.
    pub fn margin_ns(&self, drift_ppm: u32) -> u64 {
        let (ttl, d) = (u128::from(self.ttl_ns()), u128::from(drift_ppm));
        let margin = (ttl * 2 * d).div_ceil(1_000_000 + d);
        u64::try_from(margin).unwrap_or(u64::MAX) + 1_000_000
    }

    /// What a client trusts of a session after sending a renewal, ns on its
    /// own clock: `TTL − margin`.
    pub fn trusted_ns(&self, drift_ppm: u32) -> u64 {
        self.ttl_ns().saturating_sub(self.margin_ns(drift_ppm))
    }
}
