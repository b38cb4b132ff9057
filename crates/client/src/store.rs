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
//! The existing [`crate::Session`] and [`crate::Election`] are unchanged;
//! [`TenureStore`] makes the same calls they make.

use crate::cluster::{Cluster, Retry};
use crate::election::{check_name, check_value, Campaign, Check, Election, Observed};
use crate::error::{BoxError, Error};
use crate::failover::{Timings, TIMINGS_TIMEOUT};
use crate::http::REQUEST_TIMEOUT;
use crate::session::{check_ttl, deadline_after};
use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use hyper::{Method, StatusCode};
use serde::Deserialize;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use tenure_api::{CampaignRequest, ResignRequest, SessionBody, SessionGrantRequest};
use tokio::time::Instant;

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

impl From<Error> for StoreError {
    fn from(e: Error) -> Self {
        match e {
            Error::NoAnswer(n) => {
                StoreError::NoAnswer { endpoint: n.url.clone(), sent: n.sent, source: Box::new(n) }
            }
            Error::Refused(r) if r.status == StatusCode::SERVICE_UNAVAILABLE => {
                StoreError::Unavailable { endpoint: r.url, message: r.message }
            }
            Error::Refused(r) if r.status == StatusCode::NOT_FOUND => {
                StoreError::Gone(format!("{}: {}", r.url, r.message))
            }
            Error::SessionEnded { .. } => StoreError::Gone(e.to_string()),
            Error::Invalid(m) => StoreError::Invalid(m),
            Error::Config(m) => StoreError::Config(m),
            Error::Store(e) => e,
            e @ (Error::AuthRefused(_)
            | Error::Refused(_)
            | Error::Decode { .. }
            | Error::Stream { .. }) => StoreError::Refused(e.to_string()),
        }
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
        crate::session::renew_interval(ttl)
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

/// tenure's named elections as a [`Store`], over the HTTP API
/// (docs/ELECTIONS.md), through a [`Cluster`]'s endpoints.
#[derive(Debug, Clone)]
pub struct TenureStore {
    cluster: Arc<Cluster>,
}

impl TenureStore {
    /// The store behind `cluster`.
    pub fn new(cluster: Arc<Cluster>) -> Self {
        TenureStore { cluster }
    }

    /// The cluster it talks to.
    pub fn cluster(&self) -> &Arc<Cluster> {
        &self.cluster
    }

    async fn renewal(
        &self,
        path: &str,
        body: Option<&serde_json::Value>,
        retry: Retry,
        asked: Option<SessionId>,
    ) -> Result<Renewal, StoreError> {
        let sent = Instant::now();
        let answer: SessionBody =
            self.cluster.json(Method::POST, path, body, REQUEST_TIMEOUT, retry).await?;
        if asked.is_some_and(|s| s.0 != answer.id) {
            return Err(StoreError::Refused(format!(
                "{path}: the answer is about session {}",
                answer.id
            )));
        }
        let ttl = Duration::from_millis(answer.ttl_ms);
        check_ttl(ttl).map_err(|e| StoreError::Refused(format!("{path}: granted {e}")))?;
        Ok(Renewal { session: SessionId(answer.id), sent, ttl })
    }

    /// A call whose 404 means "already gone", which is fine.
    async fn delete_like(
        &self,
        method: Method,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<(), StoreError> {
        let (url, answer) =
            self.cluster.call(method, path, body, REQUEST_TIMEOUT, Retry::Idempotent).await?;
        if answer.status == StatusCode::NOT_FOUND {
            return Ok(());
        }
        answer.json::<serde_json::Value>(&url)?;
        Ok(())
    }
}

/// The answer of a wait, as a [`Waited`] for `candidacy`.
fn waited(candidacy: &Candidacy, answer: Campaign) -> Result<Waited, StoreError> {
    match answer {
        Campaign { leader: true, token: Some(token), .. } if token == candidacy.token => {
            Ok(Waited::Leads { token })
        }
        Campaign { leader: true, token, .. } => Err(StoreError::Refused(format!(
            "election {}: the leading candidacy of session {} has token {token:?}, not its \
             creation revision {}",
            candidacy.election, candidacy.session, candidacy.token
        ))),
        Campaign { leader: false, ahead, .. } => Ok(Waited::Ahead { ahead: ahead as u64 }),
    }
}

/// The answer of a campaign, as a [`Candidacy`].
fn candidacy(session: SessionId, election: &str, c: Campaign) -> Result<Candidacy, StoreError> {
    if c.leader && c.token != Some(c.create_revision) {
        return Err(StoreError::Refused(format!(
            "election {election}: a leading campaign answered token {:?}, not its creation \
             revision {}",
            c.token, c.create_revision
        )));
    }
    Ok(Candidacy {
        session,
        election: election.to_string(),
        key: format!("{:016x}", session.0),
        token: c.create_revision,
        leader: c.leader,
    })
}

impl Store for TenureStore {
    fn kind(&self) -> StoreKind {
        StoreKind::Tenure
    }

    fn grant(&self, ttl: Duration) -> BoxFuture<'_, Result<Renewal, StoreError>> {
        Box::pin(async move {
            check_ttl(ttl)?;
            let body = serde_json::json!(SessionGrantRequest { ttl_ms: ttl.as_millis() as u64 });
            // Not resent after a request that may have arrived: that would
            // grant a second session.
            self.renewal("/v1/sessions", Some(&body), Retry::Once, None).await
        })
    }

    fn renew(&self, session: SessionId) -> BoxFuture<'_, Result<Renewal, StoreError>> {
        Box::pin(async move {
            let path = format!("/v1/sessions/{session}/keepalive");
            self.renewal(&path, None, Retry::Idempotent, Some(session)).await
        })
    }

    fn revoke(&self, session: SessionId) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async move {
            self.delete_like(Method::DELETE, &format!("/v1/sessions/{session}"), None).await
        })
    }

    fn campaign<'a>(
        &'a self,
        session: SessionId,
        election: &'a str,
        value: &'a str,
    ) -> BoxFuture<'a, Result<Candidacy, StoreError>> {
        Box::pin(async move {
            check_name(election)?;
            check_value(value)?;
            let body =
                serde_json::json!(CampaignRequest { session: session.0, value: value.to_string() });
            let path = format!("/v1/elections/{election}/campaign");
            // A second campaign of a session is refused (409): not resent
            // after a request that may have arrived.
            let answer: Campaign = self
                .cluster
                .json(Method::POST, &path, Some(&body), REQUEST_TIMEOUT, Retry::Once)
                .await?;
            candidacy(session, election, answer)
        })
    }

    fn wait<'a>(
        &'a self,
        candidacy: &'a Candidacy,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<Waited, StoreError>> {
        Box::pin(async move {
            let timeout = timeout.min(MAX_WAIT);
            let path = format!(
                "/v1/elections/{}/wait?session={}&timeout_ms={}",
                candidacy.election,
                candidacy.session,
                timeout.as_millis()
            );
            let answer: Campaign = self
                .cluster
                .json(Method::GET, &path, None, timeout + REQUEST_TIMEOUT, Retry::Idempotent)
                .await?;
            waited(candidacy, answer)
        })
    }

    fn resign<'a>(&'a self, candidacy: &'a Candidacy) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let body = serde_json::json!(ResignRequest { session: candidacy.session.0 });
            let path = format!("/v1/elections/{}/resign", candidacy.election);
            self.delete_like(Method::POST, &path, Some(&body)).await
        })
    }

    fn check<'a>(
        &'a self,
        election: &'a str,
        token: u64,
    ) -> BoxFuture<'a, Result<Check, StoreError>> {
        Box::pin(async move {
            check_name(election)?;
            let path = format!("/v1/elections/{election}/check?token={token}");
            Ok(self
                .cluster
                .json(Method::GET, &path, None, REQUEST_TIMEOUT, Retry::Idempotent)
                .await?)
        })
    }

    fn timings(&self) -> BoxFuture<'_, Result<Option<Timings>, StoreError>> {
        Box::pin(async move {
            #[derive(Deserialize)]
            struct WithTimings {
                #[serde(default)]
                timings: Option<Timings>,
            }
            let status: WithTimings = self
                .cluster
                .json(Method::GET, "/v1/status", None, TIMINGS_TIMEOUT, Retry::Idempotent)
                .await?;
            Ok(status.timings)
        })
    }

    fn observe(
        &self,
        election: &str,
    ) -> Result<BoxStream<'static, Result<Observed, StoreError>>, StoreError> {
        let observer = Election::new(self.cluster.clone(), election)?.observe();
        Ok(Box::pin(futures_util::stream::unfold(observer, |mut o| async move {
            let next = o.next().await.map_err(StoreError::from);
            Some((next, o))
        })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{NoAnswer, Refused};
    use crate::session::trusted_span;

    fn refused(status: StatusCode) -> Error {
        Error::Refused(Refused {
            url: "http://n1/x".into(),
            status,
            message: "m".into(),
            body: Default::default(),
        })
    }

    #[test]
    fn a_renewal_is_trusted_for_the_shrunk_ttl_after_its_send_time() {
        let sent = Instant::now();
        let ttl = Duration::from_secs(2);
        let r = Renewal { session: SessionId(1), sent, ttl };
        assert_eq!(r.deadline() - sent, trusted_span(ttl));
        assert!(r.deadline() - sent < ttl);
    }

    #[test]
    fn client_errors_are_classified_for_the_layer_above() {
        let gone = StoreError::from(refused(StatusCode::NOT_FOUND));
        assert!(matches!(gone, StoreError::Gone(_)), "{gone:?}");
        assert!(!gone.is_retryable());
        let busy = StoreError::from(refused(StatusCode::SERVICE_UNAVAILABLE));
        assert!(matches!(busy, StoreError::Unavailable { .. }), "{busy:?}");
        assert!(busy.is_retryable());
        let conflict = StoreError::from(refused(StatusCode::CONFLICT));
        assert!(matches!(conflict, StoreError::Refused(_)), "{conflict:?}");
        assert!(!conflict.is_retryable());
        let lost = StoreError::from(Error::NoAnswer(NoAnswer {
            url: "http://n2/y".into(),
            sent: true,
            source: "timed out".into(),
        }));
        assert!(matches!(lost, StoreError::NoAnswer { sent: true, .. }), "{lost:?}");
        assert!(lost.is_retryable());
        assert!(matches!(StoreError::from(Error::Invalid("x".into())), StoreError::Invalid(_)));
    }

    #[test]
    fn a_campaign_answer_becomes_a_candidacy_whose_token_is_its_creation_revision() {
        let ahead = Campaign {
            name: "jobs".into(),
            session: 1,
            create_revision: 12,
            leader: false,
            token: None,
            ahead: 2,
        };
        let c = candidacy(SessionId(0x2a), "jobs", ahead).unwrap();
        assert_eq!(c.key, "000000000000002a");
        assert_eq!((c.token, c.leader), (12, false));
        let leads = Campaign {
            name: "jobs".into(),
            session: 1,
            create_revision: 9,
            leader: true,
            token: Some(9),
            ahead: 0,
        };
        assert_eq!(candidacy(SessionId(1), "jobs", leads).unwrap().token, 9);
        // A leading answer whose token is not its revision breaks the
        // contract: refused rather than guessed.
        let odd = Campaign {
            name: "jobs".into(),
            session: 1,
            create_revision: 9,
            leader: true,
            token: Some(8),
            ahead: 0,
        };
        assert!(matches!(candidacy(SessionId(1), "jobs", odd), Err(StoreError::Refused(_))));
    }

    #[test]
    fn only_a_leadership_with_the_candidacys_own_token_is_taken() {
        let c = Candidacy {
            session: SessionId(3),
            election: "jobs".into(),
            key: format!("{:016x}", 3),
            token: 40,
            leader: false,
        };
        let leads = Campaign {
            name: "jobs".into(),
            session: 3,
            create_revision: 40,
            leader: true,
            token: Some(40),
            ahead: 0,
        };
        assert_eq!(waited(&c, leads).unwrap(), Waited::Leads { token: 40 });
        let other = Campaign {
            name: "jobs".into(),
            session: 3,
            create_revision: 40,
            leader: true,
            token: Some(41),
            ahead: 0,
        };
        assert!(matches!(waited(&c, other), Err(StoreError::Refused(_))));
        let none = Campaign {
            name: "jobs".into(),
            session: 3,
            create_revision: 40,
            leader: true,
            token: None,
            ahead: 0,
        };
        assert!(matches!(waited(&c, none), Err(StoreError::Refused(_))));
        let ahead = Campaign {
            name: "jobs".into(),
            session: 3,
            create_revision: 40,
            leader: false,
            token: None,
            ahead: 2,
        };
        assert_eq!(waited(&c, ahead).unwrap(), Waited::Ahead { ahead: 2 });
    }

    #[test]
    fn the_trait_is_object_safe_and_names_its_store() {
        let cluster = Cluster::new(crate::Client::default(), vec!["http://127.0.0.1:1".into()]);
        let store: Arc<dyn Store> = Arc::new(TenureStore::new(Arc::new(cluster.unwrap())));
        assert_eq!(store.kind(), StoreKind::Tenure);
        assert_eq!(store.kind().to_string(), "tenure");
        assert!(matches!(store.observe("bad name"), Err(StoreError::Invalid(_))));
    }
}
