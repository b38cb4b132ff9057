//! Stores that hold elections: the primitives an election needs from a
//! store, whichever it is (tenure's own named elections, etcd, ZooKeeper),
//! and tenure's implementation of them over its HTTP API.
//!
//! The [`Store`] trait is layer 1 of docs/STORES.md: each method is one
//! request or one bounded wait. It does not schedule renewals, compute
//! deadlines or stop work: the store-independent layer above does, once
//! for every store, from what [`Store::renew`] returns (its send time and
//! the TTL the store granted: [`Renewal::deadline`]).
//!
//! What every implementation promises:
//!
//! * [`Store::renew`] reads the monotonic clock just before the request
//!   leaves, and answers with the TTL the store granted in this answer;
//!   [`StoreError::Gone`] when the store says the session does not exist.
//! * [`Store::campaign`] answers with the candidacy's fencing token (its
//!   key's creation revision, or ZooKeeper's `czxid`) and is safe to retry
//!   only where the store's recipe makes it so.
//! * [`Store::wait`] waits on the candidacy's immediate predecessor only,
//!   returns [`Waited::Leads`] only after a fresh read proved that the
//!   candidacy still exists and is first, and [`StoreError::Gone`] when
//!   it no longer exists (never a leadership without a key: etcd-io/etcd#19597).
//! * [`Store::resign`] deletes the candidacy only if it is still this one,
//!   and a candidacy already gone is not an error.
//!
//! tenure's own store is `tenure_client::TenureStore` (over the HTTP API),
//! etcd's `tenure_store_etcd::EtcdStore`, ZooKeeper's
//! `tenure_store_zk::ZkStore`.

use crate::deadline::deadline_after;
use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use std::fmt;
use std::time::Duration;
use tokio::time::Instant;

/// A boxed error from below (a store's transport, its TLS stack).
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A node's elector timings as tenure reports them (the API's body; see
/// [`crate::failover`]).
pub type Timings = tenure_api::TimingsBody;

/// A leader of an election: its session, value and fencing token.
pub type Leader = tenure_api::ElectionLeaderBody;

/// The answer to a token check: whether the token asked is the current
/// leader's, the current leader's token, the revision it was read at.
pub type Check = tenure_api::TokenCheckBody;

/// One change an observer sees.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Observed {
    /// A new leader, or a new value of the leader (a proclaim).
    Leader {
        /// Its session.
        session: u64,
        /// Its value.
        value: String,
        /// Its fencing token.
        token: u64,
        /// The revision of the change.
        revision: u64,
    },
    /// The last candidate left.
    NoLeader {
        /// The revision of the change.
        revision: u64,
    },
    /// The changes after the last one reported, up to `current`, could not
    /// be told (the cluster no longer keeps them, or refused to resume
    /// after the last one: then `compacted` is its revision): the next
    /// observation is the state as of `current`, whether it changed or not.
    Missed {
        /// Changes up to this revision are no longer kept.
        compacted: u64,
        /// The revision of the state that follows.
        current: u64,
    },
}

impl Observed {
    /// The state without its revision: two events with the same one say
    /// the same (a stream started afresh repeats the current state).
    pub fn state(&self) -> Option<(Option<u64>, Option<&str>, Option<u64>)> {
        match self {
            Observed::Leader { session, value, token, .. } => {
                Some((Some(*session), Some(value), Some(*token)))
            }
            Observed::NoLeader { .. } => Some((None, None, None)),
            Observed::Missed { .. } => None,
        }
    }

    /// The revision of a state (not of [`Observed::Missed`]).
    pub fn revision(&self) -> Option<u64> {
        match self {
            Observed::Leader { revision, .. } | Observed::NoLeader { revision } => Some(*revision),
            Observed::Missed { .. } => None,
        }
    }
}

/// Whether a request may be sent again to another endpoint after it may
/// have reached the first one (no answer came, but it was sent).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retry {
    /// Reads, renewals, resignations: doing it twice does no harm.
    Idempotent,
    /// Grants and campaigns: only resent if the first endpoint surely did
    /// not receive it (the connection failed).
    Once,
}

/// The longest a single [`Store::wait`] may be asked to wait (tenure's
/// long-poll limit); longer timeouts are cut to it.
pub const MAX_WAIT: Duration = Duration::from_secs(60);

/// Which store an implementation talks to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreKind {
    /// tenure's own named elections (docs/ELECTIONS.md).
    Tenure,
    /// etcd's v3 API: a lease, a transaction on the key's creation
    /// revision, a watch on the predecessor.
    Etcd,
    /// ZooKeeper: an ephemeral sequential znode, a watch on the predecessor.
    ZooKeeper,
}

impl fmt::Display for StoreKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StoreKind::Tenure => "tenure",
            StoreKind::Etcd => "etcd",
            StoreKind::ZooKeeper => "zk",
        })
    }
}

/// A session's id in its store (tenure's session id, etcd's lease id,
/// ZooKeeper's session id; the last two are positive 64-bit integers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionId(pub u64);

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A grant or renewal that succeeded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Renewal {
    /// The session.
    pub session: SessionId,
    /// When the request was sent (read just before it left): the instant
    /// the deadline rests on. A store whose answer proves less returns an
    /// earlier one (docs/STORES.md §3.3: ZooKeeper, the previous renewal's).
    pub sent: Instant,
    /// The TTL the store granted in this answer (which may differ from
    /// the one asked: etcd raises it to its minimum, ZooKeeper negotiates).
    pub ttl: Duration,
}

impl Renewal {
    /// Until when the session is trusted after this renewal:
    /// `sent + ttl (1 − ρ)/(1 + ρ)` ([`deadline_after`]).
    pub fn deadline(&self) -> Instant {
        deadline_after(self.sent, self.ttl)
    }
}

/// A candidacy in an election: a key of the store owned by a session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidacy {
    /// The session that owns it.
    pub session: SessionId,
    /// The election.
    pub election: String,
    /// The store's name of the candidacy (tenure: the session id as 16 hex
    /// digits, the last part of its key; etcd: the key; ZooKeeper: the
    /// znode's path).
    pub key: String,
    /// The fencing token of its leadership: its key's creation revision
    /// (ZooKeeper: `czxid`). The first in the queue has the smallest.
    pub token: u64,
    /// Whether it led when the campaign was answered.
    pub leader: bool,
}

/// How a [`Store::wait`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Waited {
    /// The candidacy leads (proved by a fresh read), with this token.
    Leads {
        /// Its fencing token.
        token: u64,
    },
    /// The timeout came first; this many candidacies were ahead.
    Ahead {
        /// How many are ahead.
        ahead: u64,
    },
}

/// What a store call can fail with, classified for the layer above:
/// [`StoreError::Gone`] ends a session or candidacy, the retryable ones
/// ([`StoreError::is_retryable`]) are tried again while the deadline
/// allows, the others are final.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The store says the session or candidacy does not exist (expired,
    /// revoked, resigned, never created).
    #[error("{0}")]
    Gone(String),
    /// No answer came (connection failed or timed out).
    #[error("{endpoint}: no answer")]
    NoAnswer {
        /// Where it was sent.
        endpoint: String,
        /// False if the request surely did not reach the store.
        sent: bool,
        /// Why.
        #[source]
        source: BoxError,
    },
    /// The store answered but cannot serve now (no leader, no quorum).
    #[error("{endpoint}: unavailable: {message}")]
    Unavailable {
        /// Who answered.
        endpoint: String,
        /// What it said.
        message: String,
    },
    /// The store refused the request, or answered something the contract
    /// does not allow: not retried.
    #[error("{0}")]
    Refused(String),
    /// A bad argument (a name, a value, a TTL).
    #[error("{0}")]
    Invalid(String),
    /// A bad setting (an endpoint, credentials).
    #[error("{0}")]
    Config(String),
}

impl StoreError {
    /// Whether the same call may succeed if tried again.
    pub fn is_retryable(&self) -> bool {
        matches!(self, StoreError::NoAnswer { .. } | StoreError::Unavailable { .. })
    }
}

/// A store that holds elections: grants sessions with a TTL, renews them
/// (telling when each renewal was sent), campaigns with a fencing token,
/// waits on the predecessor only, resigns, checks a token, observes.
/// Object safe: the store is chosen at run time (`Arc<dyn Store>`).
pub trait Store: Send + Sync + fmt::Debug {
    /// Which store this is.
    fn kind(&self) -> StoreKind;

    /// Grants a session of (about) `ttl`; the answer's TTL is the one
    /// granted, its send time the grant's.
    fn grant(&self, ttl: Duration) -> BoxFuture<'_, Result<Renewal, StoreError>>;

    /// Renews `session` once.
    fn renew(&self, session: SessionId) -> BoxFuture<'_, Result<Renewal, StoreError>>;

    /// Ends `session` now (its candidacies go with it); a session already
    /// gone is not an error.
    fn revoke(&self, session: SessionId) -> BoxFuture<'_, Result<(), StoreError>>;

    /// Joins `election`'s queue with `session` and `value`; returns at once.
    fn campaign<'a>(
        &'a self,
        session: SessionId,
        election: &'a str,
        value: &'a str,
    ) -> BoxFuture<'a, Result<Candidacy, StoreError>>;

    /// Waits until `candidacy` leads, at most `timeout` (cut to
    /// [`MAX_WAIT`]); [`StoreError::Gone`] if it no longer exists.
    fn wait<'a>(
        &'a self,
        candidacy: &'a Candidacy,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<Waited, StoreError>>;

    /// Leaves the queue (and leadership) if `candidacy` is still in it.
    fn resign<'a>(&'a self, candidacy: &'a Candidacy) -> BoxFuture<'a, Result<(), StoreError>>;

    /// Whether `token` is `election`'s current leader's (a linearizable read).
    fn check<'a>(
        &'a self,
        election: &'a str,
        token: u64,
    ) -> BoxFuture<'a, Result<Check, StoreError>>;

    /// How often a session of `ttl` is renewed: every third of the TTL by
    /// default, so that two renewals can fail before the deadline.
    fn renew_interval(&self, ttl: Duration) -> Duration {
        crate::deadline::renew_interval(ttl)
    }

    /// How long before a renewal's own send time the instant its answer
    /// proves lies ([`Renewal::sent`] is that much earlier): zero by
    /// default; one renewal interval for a store whose renewal proves only
    /// the previous one (ZooKeeper, docs/STORES.md §3.3). Whoever plans a
    /// stop before the deadline (`tenure run`'s grace) counts it.
    fn renewal_lag(&self, _ttl: Duration) -> Duration {
        Duration::ZERO
    }

    /// Resolves when the store's own signal says that `session` can no
    /// longer be trusted although its deadline has not come (ZooKeeper:
    /// the connection is `Disconnected`, `Expired` or `Closed`), with the
    /// reason. The default never resolves: tenure and etcd tell a loss
    /// only through renewals.
    fn suspended(&self, _session: SessionId) -> BoxFuture<'_, String> {
        Box::pin(std::future::pending())
    }

    /// The timings of the store's own leader elections, to check that a
    /// session's TTL rides out one failover ([`crate::failover`]): tenure
    /// reports them in `GET /v1/status`; None by default (etcd and
    /// ZooKeeper do not tell their clients their election timeouts).
    fn timings(&self) -> BoxFuture<'_, Result<Option<Timings>, StoreError>> {
        Box::pin(std::future::ready(Ok(None)))
    }

    /// `election`'s current state, then each change (see [`Observed`]).
    fn observe(
        &self,
        election: &str,
    ) -> Result<BoxStream<'static, Result<Observed, StoreError>>, StoreError>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deadline::trusted_span;

    #[test]
    fn a_renewal_is_trusted_for_the_shrunk_ttl_after_its_send_time() {
        let sent = Instant::now();
        let ttl = Duration::from_secs(2);
        let r = Renewal { session: SessionId(1), sent, ttl };
        assert_eq!(r.deadline() - sent, trusted_span(ttl));
        assert!(r.deadline() - sent < ttl);
    }
}
