//! Leases: the store's side of sessions. A lease has an id (from a counter,
//! never reused) and a TTL, and keys attached to it; revoking or expiring
//! it deletes them at one revision. When a lease expires is not the store's
//! business: the tenure leader keeps time and proposes the expiry through
//! the log (docs/ELECTIONS.md, "Sessions").

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt;

/// The shortest lease TTL, in milliseconds. A client renews a few times per
/// TTL and stops trusting its session a drift margin before the TTL ends;
/// below half a second the renewal round trip, scheduling jitter and that
/// margin leave too little of the TTL to be useful, and the leader's expiry
/// bookkeeping would wake more than a few times a second per lease.
pub const MIN_TTL_MS: u64 = 500;

/// The longest lease TTL, in milliseconds: one day (Consul's cap too). A
/// session whose holder vanished without revoking it is reclaimed within a
/// day at worst; a longer-lived holder renews.
pub const MAX_TTL_MS: u64 = 24 * 60 * 60 * 1000;

/// Most leases the store holds at once: a fleet's worth of sessions. A
/// lease costs the leader about 400 bytes of resident memory (measured:
/// docs/ELECTIONS.md, "Limits"), so a million cost it about 400 MiB; a
/// snapshot about 30 bytes each plus its keys.
pub const MAX_LEASES: usize = 1_000_000;

/// Most leases one owner (an API token) holds at once: a quarter of
/// [`MAX_LEASES`], so that one application, or a leaked token, leaves at
/// least three quarters of the sessions to the others. Leases without an
/// owner (the administrators') are counted only in [`MAX_LEASES`].
pub const MAX_LEASES_PER_OWNER: usize = MAX_LEASES / 4;

/// Most keys attached to one lease. Revoking or expiring a lease deletes
/// them all at one revision: at most this many changes in one entry's
/// apply, a tenth of the watch history ([`crate::MAX_HISTORY`]).
pub const MAX_KEYS_PER_LEASE: usize = 1_000;

/// A lease's id: granted from a counter starting at 1, never reused (0 is
/// never a lease).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct LeaseId(pub u64);

impl fmt::Display for LeaseId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A lease as the store holds it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Lease {
    /// Its id.
    pub id: LeaseId,
    /// Its TTL in milliseconds, as granted.
    pub ttl_ms: u64,
    /// The keys attached to it, in order.
    pub keys: BTreeSet<String>,
    /// Who it belongs to: the name of the API token that granted it, or
    /// `None` for the administrators (a grant without a token, and every
    /// lease granted before owners existed). The store only keeps it; the
    /// server decides who may use the lease (docs/SECURITY.md).
    pub owner: Option<String>,
}

/// Why a lease ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LeaseEnd {
    /// Its holder (or an operator) revoked it.
    Revoked,
    /// The tenure leader saw its TTL pass without a renewal.
    Expired,
}

impl fmt::Display for LeaseEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LeaseEnd::Revoked => "revoked",
            LeaseEnd::Expired => "expired",
        })
    }
}

/// Why the store refused a well-formed command, because of what it holds:
/// nothing changed. (A command that breaks a limit on its own is
/// [`crate::InvalidCommand`].)
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum Refusal {
    /// The lease was never granted, or was revoked or expired.
    #[error("lease {0} does not exist (never granted, or revoked or expired)")]
    LeaseNotFound(LeaseId),
    /// A grant while [`MAX_LEASES`] leases exist.
    #[error("the store holds {MAX_LEASES} leases, the most it accepts: revoke one first")]
    TooManyLeases,
    /// A grant for an owner that holds [`MAX_LEASES_PER_OWNER`] leases.
    #[error(
        "the token {0:?} holds {MAX_LEASES_PER_OWNER} sessions, the most one token may: \
         revoke one first"
    )]
    TooManyOwnerLeases(String),
    /// Attaching would put more than [`MAX_KEYS_PER_LEASE`] keys on a lease.
    #[error("lease {lease} would hold {keys} keys; at most {MAX_KEYS_PER_LEASE} are accepted")]
    TooManyKeys {
        /// The lease.
        lease: LeaseId,
        /// The keys it would hold.
        keys: usize,
    },
    /// Every lease id was used (2^64 grants: not reachable in practice, but
    /// an id is never reused, so the store says so rather than wrap).
    #[error("every lease id was granted once; ids are never reused")]
    LeaseIdsExhausted,
    /// A range delete of more keys than one revision holds
    /// ([`crate::MAX_CHANGES_PER_REVISION`]).
    #[error(
        "the range holds {keys} keys; one delete removes at most {} (delete it in parts)",
        crate::MAX_CHANGES_PER_REVISION
    )]
    RangeTooLarge {
        /// The keys in the range.
        keys: usize,
    },
    /// A compaction at or before the compacted revision.
    #[error("revision {requested} is already compacted (up to {compacted})")]
    Compacted {
        /// The revision asked for.
        requested: u64,
        /// The compacted revision.
        compacted: u64,
    },
    /// A compaction after the store's revision.
    #[error("revision {requested} is in the future (the store is at {current})")]
    FutureRevision {
        /// The revision asked for.
        requested: u64,
        /// The store's revision.
        current: u64,
    },
    /// A put keeping the value or lease (`ignore_value`, `ignore_lease`) of
    /// a key that does not exist.
    #[error("key {0:?} does not exist, so its value or lease cannot be kept")]
    KeyNotFound(String),
    /// The reads of a transaction that writes would return more than
    /// [`crate::MAX_TXN_READ_BYTES`].
    #[error(
        "the reads of this transaction would return {bytes} bytes; those of a transaction that \
         writes return at most {max} in all (give limits, or read in a transaction of its own)",
        max = crate::MAX_TXN_READ_BYTES
    )]
    ReadTooLarge {
        /// The bytes they would return (counted up to the first read over
        /// the bound).
        bytes: usize,
    },
    /// A transaction that writes would visit more than
    /// [`crate::MAX_TXN_VISITED_KEYS`] keys.
    #[error(
        "this transaction would visit more than {max} keys (comparisons, reads and deletes \
         together); compare and read smaller ranges, or read in a transaction of its own",
        max = crate::MAX_TXN_VISITED_KEYS
    )]
    TooManyKeysVisited,
}
