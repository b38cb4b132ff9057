//! tenure's [`Store`] trait over ZooKeeper (docs/STORES.md §2.3).
//!
//! * A session is a ZooKeeper session: one `zookeeper_client::Client` per
//!   [`SessionId`], connected with `session_timeout = ttl`; the TTL granted
//!   is the timeout the ensemble negotiated.
//! * A renewal is a `sync`, which a follower forwards to the ensemble's
//!   leader; its [`Renewal::sent`] is the **previous** renewal's send time
//!   (see [`session`]'s notes: docs/STORES.md §3.3).
//! * [`Store::suspended`] resolves on `Disconnected`, `Expired`, `Closed`
//!   and `AuthFailed` (Curator's rule: suspended = not leader).
//! * A candidacy is an ephemeral sequential znode
//!   `<root>/<election>/c-<session id as 16 hex>-<sequence>`; its fencing
//!   token is the znode's `czxid` (never the sequence number).
//! * [`Store::wait`] watches the immediate predecessor only and returns
//!   [`Waited::Leads`] only after a read proved that the node exists, is
//!   owned by the session (`ephemeralOwner`) with the token as `czxid`, and
//!   was first in the list read just before (CURATOR-696, etcd-io/etcd#19597).
//!
//! Not proven safe yet: the deadline rule of [`session`] rests on an
//! argument about the order of the follower-to-leader messages that a
//! partition test must still confirm (docs/STORES.md §3.3).

mod election;
mod errors;
mod observe;
mod options;
mod queue;
pub mod session;

use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tenure_elect::election::{Check, Observed};
use tenure_elect::store::{Candidacy, Renewal, SessionId, Store, StoreError, StoreKind, Waited};
use tokio::time::Instant;
use zookeeper_client::{Client, SessionState};

use options::{check_root, check_servers};
pub use options::{
    parse_zk_url, ZkOptions, DEFAULT_READER_TIMEOUT, DEFAULT_REQUEST_TIMEOUT, DEFAULT_ROOT,
    MAX_ROOT_LEN, MAX_SERVERS,
};

/// A granted session: its client and the send time of its last renewal.
#[derive(Debug)]
struct Entry {
    client: Client,
    /// The send time of the last renewal (or of the grant) that succeeded.
    last_sent: tokio::sync::Mutex<Instant>,
    /// Set when the session is revoked: waits return, the client is dropped.
    revoked: tokio::sync::watch::Sender<bool>,
}

impl Entry {
    fn state(&self) -> SessionState {
        self.client.state()
    }
}

/// ZooKeeper as a [`Store`]. Its sessions live in this value: dropping it
/// closes them.
#[derive(Debug)]
pub struct ZkStore {
    servers: String,
    options: ZkOptions,
    sessions: Mutex<HashMap<SessionId, Arc<Entry>>>,
    reader: Arc<observe::Reader>,
}

impl ZkStore {
    /// A store over `servers` (`host:port` each, see [`parse_zk_url`]).
    /// Nothing is connected yet: each grant connects its session.
    pub fn new(servers: Vec<String>, options: ZkOptions) -> Result<ZkStore, StoreError> {
        check_servers(&servers)?;
        check_root(&options.root)?;
        if options.request_timeout.is_zero() || options.reader_timeout.is_zero() {
            return Err(StoreError::Config("ZooKeeper timeouts must not be zero".into()));
        }
        let servers = servers.join(",");
        let reader = Arc::new(observe::Reader::new(&servers, &options));
        Ok(ZkStore { servers, options, sessions: Mutex::new(HashMap::new()), reader })
    }

    /// The connect string (`host:port,host:port`).
    pub fn servers(&self) -> &str {
        &self.servers
    }

    /// The settings.
    pub fn options(&self) -> &ZkOptions {
        &self.options
    }

    /// The session's entry, or [`StoreError::Gone`] (forgotten when its
    /// client reached a terminal state).
    fn entry(&self, session: SessionId) -> Result<Arc<Entry>, StoreError> {
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        let entry = sessions.get(&session).cloned().ok_or_else(|| {
            StoreError::Gone(format!(
                "ZooKeeper session {:#x} is not open in this store (revoked, expired or \
                 never granted here)",
                session.0
            ))
        })?;
        let state = entry.state();
        if session::is_terminal(state) {
            sessions.remove(&session);
            return Err(StoreError::Gone(format!("ZooKeeper session {:#x} is {state}", session.0)));
        }
        Ok(entry)
    }
}

impl Store for ZkStore {
    fn kind(&self) -> StoreKind {
        StoreKind::ZooKeeper
    }

    fn grant(&self, ttl: Duration) -> BoxFuture<'_, Result<Renewal, StoreError>> {
        Box::pin(self.grant_session(ttl))
    }

    fn renew(&self, session: SessionId) -> BoxFuture<'_, Result<Renewal, StoreError>> {
        Box::pin(self.renew_session(session))
    }

    fn revoke(&self, session: SessionId) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(self.revoke_session(session))
    }

    fn campaign<'a>(
        &'a self,
        session: SessionId,
        election: &'a str,
        value: &'a str,
    ) -> BoxFuture<'a, Result<Candidacy, StoreError>> {
        Box::pin(self.campaign_in(session, election, value))
    }

    fn wait<'a>(
        &'a self,
        candidacy: &'a Candidacy,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<Waited, StoreError>> {
        Box::pin(self.wait_for(candidacy, timeout))
    }

    fn resign<'a>(&'a self, candidacy: &'a Candidacy) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.resign_from(candidacy))
    }

    fn check<'a>(
        &'a self,
        election: &'a str,
        token: u64,
    ) -> BoxFuture<'a, Result<Check, StoreError>> {
        Box::pin(self.check_token(election, token))
    }

    fn renew_interval(&self, ttl: Duration) -> Duration {
        ttl / session::RENEWALS_PER_TTL
    }

    fn renewal_lag(&self, ttl: Duration) -> Duration {
        // Each renewal proves only the previous one (session.rs).
        self.renew_interval(ttl)
    }

    fn suspended(&self, session: SessionId) -> BoxFuture<'_, String> {
        Box::pin(self.suspension(session))
    }

    fn observe(
        &self,
        election: &str,
    ) -> Result<BoxStream<'static, Result<Observed, StoreError>>, StoreError> {
        tenure_elect::election::check_name(election)?;
        let dir = queue::election_dir(&self.options.root, election);
        Ok(observe::stream(self.reader.clone(), dir))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zk_urls_give_their_servers_and_bad_ones_a_config_error() {
        assert_eq!(parse_zk_url("zk://h1:2181,h2:2182").unwrap(), vec!["h1:2181", "h2:2182"]);
        assert_eq!(parse_zk_url("zk://[::1]:2181/").unwrap(), vec!["[::1]:2181"]);
        for bad in [
            "http://h:1",
            "zk://",
            "zk://h",
            "zk://h:0",
            "zk://h:99999",
            "zk://h:1,",
            "zk://h:1/chroot",
            "zk://::1:2181",
            "zk://h h:1",
        ] {
            let e = parse_zk_url(bad).unwrap_err();
            assert!(matches!(e, StoreError::Config(_)), "{bad}: {e:?}");
            assert!(e.to_string().contains(bad), "{bad}: {e}");
        }
    }

    #[test]
    fn the_store_refuses_bad_roots_and_empty_server_lists() {
        let ok = || vec!["127.0.0.1:2181".to_string()];
        assert!(ZkStore::new(ok(), ZkOptions::default()).is_ok());
        assert!(matches!(ZkStore::new(vec![], ZkOptions::default()), Err(StoreError::Config(_))));
        for root in ["", "/", "rel", "/a/", "/a//b", "/a/../b", "/zookeeper/x"] {
            let options = ZkOptions { root: root.into(), ..ZkOptions::default() };
            let e = ZkStore::new(ok(), options).unwrap_err();
            assert!(matches!(e, StoreError::Config(_)), "{root:?}: {e:?}");
        }
        let zero = ZkOptions { request_timeout: Duration::ZERO, ..ZkOptions::default() };
        assert!(matches!(ZkStore::new(ok(), zero), Err(StoreError::Config(_))));
    }

    #[test]
    fn the_store_is_a_zookeeper_store_and_checks_names_before_connecting() {
        let store = ZkStore::new(vec!["127.0.0.1:1".into()], ZkOptions::default()).unwrap();
        assert_eq!(store.kind(), StoreKind::ZooKeeper);
        assert!(matches!(store.observe("bad name"), Err(StoreError::Invalid(_))));
        let gone = store.entry(SessionId(7)).unwrap_err();
        assert!(matches!(gone, StoreError::Gone(_)), "{gone:?}");
    }
}
