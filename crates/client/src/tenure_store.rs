//! tenure's named elections as a [`Store`], over the HTTP API
//! (docs/ELECTIONS.md), through a [`Cluster`]'s endpoints; and what only
//! tenure's elections have: proclaim, the full queue, an observer that
//! resumes across nodes.

use crate::cluster::Cluster;
use crate::error::Error;
use crate::http::REQUEST_TIMEOUT;
use crate::observer::Observer;
use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use hyper::{Method, StatusCode};
use serde::Deserialize;
use std::sync::Arc;
use std::time::Duration;
use tenure_api::{
    CampaignRequest, ProclaimBody, ProclaimRequest, ResignRequest, SessionBody, SessionGrantRequest,
};
use tenure_elect::election::{check_name, check_value};
use tenure_elect::failover::{Timings, TIMINGS_TIMEOUT};
use tenure_elect::session::check_ttl;
use tenure_elect::store::MAX_WAIT;
use tenure_elect::{
    Candidacy, Check, Leader, Observed, Renewal, Retry, SessionId, Store, StoreError, StoreKind,
    Waited,
};
use tokio::time::Instant;

/// The answer to a campaign, and to each long poll of a wait: where the
/// candidacy stands (the API's body).
pub type Campaign = tenure_api::CandidacyBody;

/// A candidate of an election: its session, value and place in the queue.
pub type Candidate = tenure_api::ElectionCandidateBody;

/// An election's leader and candidates, and the revision they were read at.
pub type ElectionState = tenure_api::ElectionBody;

/// An HTTP error as the layer above classifies it.
impl From<Error> for StoreError {
    fn from(e: Error) -> Self {
        match e {
            Error::NoAnswer(n) => {
                StoreError::NoAnswer { endpoint: n.url.clone(), sent: n.sent, source: Box::new(n) }
            }
            Error::Refused(r) if r.status == StatusCode::SERVICE_UNAVAILABLE => {
                StoreError::Unavailable { endpoint: r.url, message: r.message }
            }
            // The server's own "outcome unknown" (a write it proposed did
            // not commit in time, at a failover): as a request whose answer
            // was lost.
            Error::Refused(r) if r.status == StatusCode::GATEWAY_TIMEOUT => {
                StoreError::NoAnswer { endpoint: r.url.clone(), sent: true, source: Box::new(r) }
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

    /// The store behind `cluster`, as sessions, elections and electors
    /// take it: `Session::start(TenureStore::shared(cluster), ttl)`.
    pub fn shared(cluster: Arc<Cluster>) -> Arc<dyn Store> {
        Arc::new(TenureStore::new(cluster))
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

impl TenureStore {
    /// Changes the value of `session`'s leadership of `election` without a
    /// new election; returns its token. Refused (409) if `session` does not
    /// lead.
    pub async fn proclaim(
        &self,
        session: SessionId,
        election: &str,
        value: &str,
    ) -> Result<u64, Error> {
        check_name(election)?;
        check_value(value)?;
        let body =
            serde_json::json!(ProclaimRequest { session: session.0, value: value.to_string() });
        let path = format!("/v1/elections/{election}/proclaim");
        let answer: ProclaimBody = self
            .cluster
            .json(Method::POST, &path, Some(&body), REQUEST_TIMEOUT, Retry::Idempotent)
            .await?;
        Ok(answer.token)
    }

    /// The leader and every candidate of `election` now.
    pub async fn state(&self, election: &str) -> Result<ElectionState, Error> {
        check_name(election)?;
        let path = format!("/v1/elections/{election}");
        self.cluster.json(Method::GET, &path, None, REQUEST_TIMEOUT, Retry::Idempotent).await
    }

    /// The leader of `election` now, if any.
    pub async fn leader(&self, election: &str) -> Result<Option<Leader>, Error> {
        Ok(self.state(election).await?.leader)
    }

    /// Follows `election`'s changes: the current state first, then every
    /// change, including "no leader", across nodes and reconnections
    /// ([`Observer::next`]). [`Store::observe`] is the same as a stream.
    pub fn observer(&self, election: &str) -> Result<Observer, Error> {
        check_name(election)?;
        Ok(Observer::new(self.cluster.clone(), election))
    }
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
            // The token guards it: a retry that lands late ends this
            // candidacy or nothing, never a later one of the session.
            let request =
                ResignRequest { session: candidacy.session.0, token: Some(candidacy.token) };
            let body = serde_json::json!(request);
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
        let observer = self.observer(election)?;
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
        let unknown = StoreError::from(refused(StatusCode::GATEWAY_TIMEOUT));
        assert!(matches!(unknown, StoreError::NoAnswer { sent: true, .. }), "{unknown:?}");
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
