//! [`EtcdStore`]: the [`Store`] primitives over etcd's `Lease*`, `Txn`,
//! `Range` and `Watch` RPCs (docs/STORES.md §2.2). Never etcd's election
//! service: its campaign has etcd-io/etcd#19597.

use crate::config::{check_endpoints, check_prefix, parse_url, EtcdOptions};
use crate::conn::Endpoints;
use crate::error::odd;
use crate::inner::{
    first_created, header_revision, lease_id, token_of, txn_get, whole_seconds, Inner,
};
use crate::keepalive::KeepAlives;
use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use std::sync::Arc;
use std::time::Duration;
use tenure_elect::election::{check_name, check_value};
use tenure_elect::session::check_ttl;
use tenure_elect::{
    Candidacy, Check, Observed, Renewal, Retry, SessionId, Store, StoreError, StoreKind, Waited,
};
use tenure_etcd_api::etcdserverpb::compare::{CompareResult, CompareTarget, TargetUnion};
use tenure_etcd_api::etcdserverpb::request_op::Request;
use tenure_etcd_api::etcdserverpb::{
    Compare, DeleteRangeRequest, LeaseGrantRequest, LeaseRevokeRequest, PutRequest, RangeRequest,
    RequestOp, TxnRequest,
};
use tokio::time::Instant;

/// Elections held in etcd, as a [`Store`]: a session is a lease, a
/// candidacy the key `<prefix>/<election>/<lease id as 16 hex digits>`
/// attached to it, its fencing token the key's creation revision.
///
/// Cheap to clone (the clients and keepalive streams are shared).
#[derive(Clone, Debug)]
pub struct EtcdStore {
    pub(crate) inner: Arc<Inner>,
}

impl EtcdStore {
    /// A store over `endpoints` (`http://host:port` or `https://host:port`,
    /// one scheme for all; see [`crate::parse_url`]), checked here. Nothing
    /// is connected until the first call: each endpoint gets its own client
    /// on first use.
    pub fn new(endpoints: Vec<String>, options: EtcdOptions) -> Result<EtcdStore, StoreError> {
        let https = check_endpoints(&endpoints)?;
        check_prefix(&options.prefix)?;
        if options.request_timeout.is_zero() || options.probe_after.is_zero() {
            return Err(StoreError::Config(
                "the etcd request timeout and probe interval must not be zero".into(),
            ));
        }
        let endpoints = Endpoints::new(endpoints, https, &options)?;
        let inner = Inner {
            endpoints,
            keepalives: KeepAlives::default(),
            prefix: options.prefix,
            probe_after: options.probe_after,
        };
        Ok(EtcdStore { inner: Arc::new(inner) })
    }

    /// A store over the endpoints of the store URL `etcd://h1:p1,h2:p2`
    /// (https if `options.cacert` is given).
    pub fn from_url(url: &str, options: EtcdOptions) -> Result<EtcdStore, StoreError> {
        let endpoints = parse_url(url, options.cacert.is_some())?;
        EtcdStore::new(endpoints, options)
    }

    /// The endpoints, in the order given.
    pub fn endpoints(&self) -> &[String] {
        self.inner.endpoints.list()
    }

    /// The key of `session`'s candidacy in `election`.
    pub fn key(&self, election: &str, session: SessionId) -> String {
        self.inner.key(election, session)
    }
}

impl EtcdStore {
    async fn do_grant(&self, ttl: Duration) -> Result<Renewal, StoreError> {
        check_ttl(ttl)?;
        let secs = whole_seconds(ttl);
        let mut sent = Instant::now();
        // Not resent after a request that may have arrived: that would
        // grant a second lease (the first expires unused).
        let (i, answer) = self
            .inner
            .endpoints
            .call(Retry::Once, |c| {
                sent = Instant::now();
                let request = LeaseGrantRequest { ttl: secs, id: 0 };
                async move { Ok(c.lease().lease_grant(request).await?.into_inner()) }
            })
            .await?;
        let endpoint = &self.inner.endpoints.list()[i];
        if !answer.error.is_empty() {
            return Err(StoreError::Refused(format!("{endpoint}: {}", answer.error)));
        }
        let (id, granted) = (u64::try_from(answer.id), u64::try_from(answer.ttl));
        match (id, granted) {
            // A TTL outside what a session may have (one day at most)
            // is an answer no etcd gives: refused, not trusted.
            (Ok(id), Ok(granted)) if id > 0 && check_ttl(Duration::from_secs(granted)).is_ok() => {
                Ok(Renewal { session: SessionId(id), sent, ttl: Duration::from_secs(granted) })
            }
            _ => {
                Err(odd(endpoint, &format!("lease {} granted with TTL {}", answer.id, answer.ttl)))
            }
        }
    }

    async fn do_revoke(&self, session: SessionId) -> Result<(), StoreError> {
        let id = lease_id(session)?;
        self.inner.keepalives.forget(session);
        let revoked = self.inner.endpoints.call(Retry::Idempotent, |c| async move {
            Ok(c.lease().lease_revoke(LeaseRevokeRequest { id }).await?.into_inner())
        });
        match revoked.await {
            Ok(_) | Err(StoreError::Gone(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn do_campaign(
        &self,
        session: SessionId,
        election: &str,
        value: &str,
    ) -> Result<Candidacy, StoreError> {
        check_name(election)?;
        check_value(value)?;
        let id = lease_id(session)?;
        let key = self.inner.key(election, session);
        let prefix = self.inner.election_prefix(election);
        let put = PutRequest {
            key: key.as_bytes().to_vec(),
            value: value.as_bytes().to_vec(),
            lease: id,
            ..Default::default()
        };
        let own = RangeRequest { key: key.as_bytes().to_vec(), ..Default::default() };
        let txn = TxnRequest {
            compare: vec![created_at(&key, 0)],
            success: vec![
                op(Request::RequestPut(put)),
                op(Request::RequestRange(first_created(&prefix))),
            ],
            failure: vec![
                op(Request::RequestRange(own)),
                op(Request::RequestRange(first_created(&prefix))),
            ],
        };
        // Idempotent: the key is named by the lease, so a retry after a
        // lost answer finds the key its first attempt made.
        let (i, answer) = self
            .inner
            .endpoints
            .call(Retry::Idempotent, |c| {
                let txn = txn.clone();
                async move { Ok(c.kv().txn(txn).await?.into_inner()) }
            })
            .await?;
        let endpoint = &self.inner.endpoints.list()[i];
        let token = if answer.succeeded {
            header_revision(endpoint, answer.header.as_ref())?
        } else {
            let existing = txn_get(endpoint, &answer, 0)?;
            match existing.kvs.first() {
                Some(kv) if kv.lease == id => token_of(kv),
                Some(kv) => {
                    return Err(StoreError::Refused(format!(
                        "{endpoint}: key {key} exists with lease {:016x}, not {id:016x}",
                        kv.lease
                    )))
                }
                None => return Err(odd(endpoint, "the campaign's key neither created nor found")),
            }
        };
        let first = txn_get(endpoint, &answer, 1)?;
        let leader = first.kvs.first().map(token_of) == Some(token);
        Ok(Candidacy { session, election: election.to_string(), key, token, leader })
    }

    async fn do_resign(&self, c: &Candidacy) -> Result<(), StoreError> {
        let key = self.inner.checked_key(c)?;
        let token = i64::try_from(c.token)
            .map_err(|_| StoreError::Invalid(format!("token {} out of range", c.token)))?;
        let delete = DeleteRangeRequest { key: key.as_bytes().to_vec(), ..Default::default() };
        let txn = TxnRequest {
            compare: vec![created_at(&key, token)],
            success: vec![op(Request::RequestDeleteRange(delete))],
            failure: vec![],
        };
        // Guarded by the token: a retry deletes nothing more, and a key
        // already gone (or made again by a later campaign) is left alone.
        self.inner
            .endpoints
            .call(Retry::Idempotent, |c| {
                let txn = txn.clone();
                async move { Ok(c.kv().txn(txn).await?.into_inner()) }
            })
            .await?;
        Ok(())
    }

    async fn do_check(&self, election: &str, token: u64) -> Result<Check, StoreError> {
        check_name(election)?;
        let prefix = self.inner.election_prefix(election);
        let (i, answer) = self
            .inner
            .endpoints
            .call(Retry::Idempotent, |c| {
                let read = first_created(&prefix);
                async move { Ok(c.kv().range(read).await?.into_inner()) }
            })
            .await?;
        let endpoint = &self.inner.endpoints.list()[i];
        let revision = header_revision(endpoint, answer.header.as_ref())?;
        let leader = answer.kvs.first().map(token_of);
        Ok(Check { current: leader == Some(token), token: leader, revision })
    }
}

/// The compare "`key` was created at revision `revision`" (0: the key does not exist).
fn created_at(key: &str, revision: i64) -> Compare {
    Compare {
        result: CompareResult::Equal.into(),
        target: CompareTarget::Create.into(),
        key: key.as_bytes().to_vec(),
        target_union: Some(TargetUnion::CreateRevision(revision)),
        range_end: Vec::new(),
    }
}

/// One operation of a transaction.
fn op(request: Request) -> RequestOp {
    RequestOp { request: Some(request) }
}

impl Store for EtcdStore {
    fn kind(&self) -> StoreKind {
        StoreKind::Etcd
    }

    fn grant(&self, ttl: Duration) -> BoxFuture<'_, Result<Renewal, StoreError>> {
        Box::pin(self.do_grant(ttl))
    }

    fn renew(&self, session: SessionId) -> BoxFuture<'_, Result<Renewal, StoreError>> {
        Box::pin(async move {
            let id = lease_id(session)?;
            self.inner.keepalives.renew(&self.inner.endpoints, session, id).await
        })
    }

    fn revoke(&self, session: SessionId) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(self.do_revoke(session))
    }

    fn campaign<'a>(
        &'a self,
        session: SessionId,
        election: &'a str,
        value: &'a str,
    ) -> BoxFuture<'a, Result<Candidacy, StoreError>> {
        Box::pin(self.do_campaign(session, election, value))
    }

    fn wait<'a>(
        &'a self,
        candidacy: &'a Candidacy,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<Waited, StoreError>> {
        Box::pin(crate::wait::wait(&self.inner, candidacy, timeout))
    }

    fn resign<'a>(&'a self, candidacy: &'a Candidacy) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.do_resign(candidacy))
    }

    fn check<'a>(
        &'a self,
        election: &'a str,
        token: u64,
    ) -> BoxFuture<'a, Result<Check, StoreError>> {
        Box::pin(self.do_check(election, token))
    }

    fn observe(
        &self,
        election: &str,
    ) -> Result<BoxStream<'static, Result<Observed, StoreError>>, StoreError> {
        check_name(election)?;
        Ok(crate::observe::observe(self.inner.clone(), election))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttls_round_up_to_whole_seconds() {
        assert_eq!(whole_seconds(Duration::from_millis(1500)), 2);
        assert_eq!(whole_seconds(Duration::from_secs(2)), 2);
        assert_eq!(whole_seconds(Duration::from_millis(500)), 1);
    }

    #[test]
    fn keys_are_named_by_lease_and_candidacies_checked() {
        let store = EtcdStore::new(vec!["http://127.0.0.1:1".into()], EtcdOptions::default())
            .expect("a valid store");
        assert_eq!(store.kind(), StoreKind::Etcd);
        let key = store.key("jobs", SessionId(0x2a));
        assert_eq!(key, "/tenure/elections/jobs/000000000000002a");
        let c = |key: &str, token| Candidacy {
            session: SessionId(0x2a),
            election: "jobs".into(),
            key: key.into(),
            token,
            leader: false,
        };
        assert!(store.inner.checked_key(&c(&key, 7)).is_ok());
        assert!(matches!(
            store.inner.checked_key(&c("/x/jobs/2a", 7)),
            Err(StoreError::Invalid(_))
        ));
        assert!(matches!(store.inner.checked_key(&c(&key, 1)), Err(StoreError::Invalid(_))));
        assert!(lease_id(SessionId(0)).is_err());
        assert!(lease_id(SessionId(u64::MAX)).is_err());
        assert!(matches!(store.observe("a/b"), Err(StoreError::Invalid(_))));
        let bad = EtcdOptions { prefix: "nope".into(), ..Default::default() };
        assert!(matches!(
            EtcdStore::new(vec!["http://h:1".into()], bad),
            Err(StoreError::Config(_))
        ));
    }
}
