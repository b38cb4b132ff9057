//! The settings of a [`crate::ZkStore`] and the checks of its server list
//! and root.

use std::time::Duration;
use tenure_elect::store::StoreError;

/// The default parent of every election's directory.
pub const DEFAULT_ROOT: &str = "/tenure/elections";
/// The default bound on each request (one ZooKeeper call, or a connect).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// The default session timeout of the store's own reader session, the one
/// [`Store::check`](tenure_elect::store::Store::check) and
/// [`Store::observe`](tenure_elect::store::Store::observe) use.
pub const DEFAULT_READER_TIMEOUT: Duration = Duration::from_secs(10);
/// The most servers a store accepts.
pub const MAX_SERVERS: usize = 64;
/// The longest root path accepted, in bytes.
pub const MAX_ROOT_LEN: usize = 512;

/// The settings of a [`ZkStore`](crate::ZkStore).
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
pub(crate) fn check_servers(servers: &[String]) -> Result<(), StoreError> {
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
pub(crate) fn check_root(root: &str) -> Result<(), StoreError> {
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
