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

/// The default parent of every election's directory.
pub const DEFAULT_ROOT: &str = "/tenure/elections";
/// The default bound on each request (one ZooKeeper call, or a connect).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// The default session timeout of the store's own reader session, the one
/// [`Store::check`] and [`Store::observe`] use.
pub const DEFAULT_READER_TIMEOUT: Duration = Duration::from_secs(10);
/// The most servers a store accepts.
pub const MAX_SERVERS: usize = 64;
/// The longest root path accepted, in bytes.
pub const MAX_ROOT_LEN: usize = 512;

/// The settings of a [`ZkStore`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZkOptions {
    /// The persistent znode under which each election has its directory
    /// (created when missing); absolute, without a trailing `/`.
    pub root: String,
    /// The shortest session timeout the store accepts from the ensemble: a
    /// grant whose negotiated timeout is shorter is refused (and its session
    /// closed). Set it to `2 × syncLimit × tickTime` of the ensemble, which
    /// the client cannot read by default (the `conf` four-letter word is
    /// not whitelisted): the fallback rule of docs/STORES.md §3.3. Zero
    /// accepts whatever the ensemble grants.
    pub min_ttl: Duration,
    /// The bound on each request.
    pub request_timeout: Duration,
    /// The session timeout of the reader session of `check` and `observe`.
    pub reader_timeout: Duration,
}

impl Default for ZkOptions {
    fn default() -> Self {
        ZkOptions {
            root: DEFAULT_ROOT.to_string(),
            min_ttl: Duration::ZERO,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            reader_timeout: DEFAULT_READER_TIMEOUT,
        }
    }
}

/// Parses the server list of a `zk://host:port,host:port` URL into
/// `host:port` strings (IPv6 hosts in brackets: `[::1]:2181`). A path
/// (ZooKeeper's chroot) is refused: the root is [`ZkOptions::root`].
pub fn parse_zk_url(url: &str) -> Result<Vec<String>, StoreError> {
    let bad = |why: &str| StoreError::Config(format!("bad ZooKeeper URL {url:?}: {why}"));
    let rest = url.strip_prefix("zk://").ok_or_else(|| bad("it must start with zk://"))?;
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.contains('/') {
        return Err(bad("a path is not allowed (the elections' root is an option)"));
    }
    let servers: Vec<String> = rest.split(',').map(str::to_string).collect();
    check_servers(&servers).map_err(|e| bad(&e.to_string()))?;
    Ok(servers)
}

/// Checks a server list: 1 to [`MAX_SERVERS`] `host:port` entries.
fn check_servers(servers: &[String]) -> Result<(), StoreError> {
    if servers.is_empty() || servers.len() > MAX_SERVERS {
        return Err(StoreError::Config(format!(
            "1 to {MAX_SERVERS} ZooKeeper servers are needed, not {}",
            servers.len()
        )));
    }
    for s in servers {
        let (host, port) = s
            .rsplit_once(':')
            .ok_or_else(|| StoreError::Config(format!("server {s:?}: expected host:port")))?;
        let host_ok = match host.strip_prefix('[') {
            Some(v6) => v6.strip_suffix(']').is_some_and(|h| {
                !h.is_empty() && h.chars().all(|c| c.is_ascii_hexdigit() || matches!(c, ':' | '.'))
            }),
            None => {
                !host.is_empty()
                    && host
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
            }
        };
        if !host_ok {
            return Err(StoreError::Config(format!("server {s:?}: bad host {host:?}")));
        }
        match port.parse::<u16>() {
            Ok(p) if p > 0 => {}
            _ => return Err(StoreError::Config(format!("server {s:?}: bad port {port:?}"))),
        }
    }
    Ok(())
}

/// Checks the root: absolute, no empty, `.` or `..` segment, no trailing `/`.
fn check_root(root: &str) -> Result<(), StoreError> {
    let bad = |why: &str| StoreError::Config(format!("bad ZooKeeper root {root:?}: {why}"));
    if root.len() > MAX_ROOT_LEN {
        return Err(bad(&format!("longer than {MAX_ROOT_LEN} bytes")));
    }
    let rest = root.strip_prefix('/').ok_or_else(|| bad("it must start with /"))?;
    if rest.is_empty() {
        return Err(bad("it must not be / itself"));
    }
    for seg in rest.split('/') {
        if seg.is_empty() || seg == "." || seg == ".." || seg.chars().any(|c| c.is_control()) {
            return Err(bad("empty, . or .. segments, or control characters"));
        }
    }
    if rest == "zookeeper" || rest.starts_with("zookeeper/") {
        return Err(bad("/zookeeper is ZooKeeper's own"));
    }
    Ok(())
}

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
