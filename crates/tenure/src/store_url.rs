//! `--store URL`: the store that holds an election, for `tenure elect`,
//! `tenure run` and the embedding API (docs/STORES.md).
//!
//! * `tenure://HOST:PORT,…`: tenure's own named elections (the default,
//!   through `--endpoints`);
//! * `etcd://HOST:PORT,…`: an etcd cluster's v3 API;
//! * `zk://HOST:PORT,…`: a ZooKeeper ensemble.

use crate::client::connect;
use anyhow::{bail, Context};
use std::fmt;
use std::path::Path;
use std::sync::Arc;
use tenure::tokens::TokenArgs;
use tenure_client::{Cluster, Store, TenureStore};

/// Environment variable that sets `--store`.
pub const STORE_ENV: &str = "TENURE_STORE";
/// Environment variable that sets `--store-cacert`.
pub const STORE_CACERT_ENV: &str = "TENURE_STORE_CACERT";
/// Environment variable that sets `--store-user`.
pub const STORE_USER_ENV: &str = "TENURE_STORE_USER";
/// Environment variable holding the password of `--store-user` (never a
/// flag: a command line is visible to every user of the machine).
#[cfg_attr(not(feature = "stores"), allow(dead_code))]
pub const STORE_PASSWORD_ENV: &str = "TENURE_STORE_PASSWORD";

/// Environment variable that sets `--store-min-ttl-ms`.
pub const STORE_MIN_TTL_ENV: &str = "TENURE_STORE_MIN_TTL_MS";

/// How to reach an external store besides its hosts: etcd's TLS and users,
/// ZooKeeper's lower bound on sessions.
#[derive(Clone, Debug, Default)]
pub struct StoreAuth {
    /// The CA that signed the etcd members' certificates (https).
    pub cacert: Option<std::path::PathBuf>,
    /// An etcd user, with the password from [`STORE_PASSWORD_ENV`].
    pub user: Option<String>,
    /// ZooKeeper: sessions negotiated below this are refused
    /// (`ZkOptions::min_ttl`, docs/STORES.md §3.3).
    pub zk_min_ttl: Option<std::time::Duration>,
}

/// The store `url` names, reached with `auth` (`tenure://` is not opened
/// here: it needs the tenure cluster's client settings).
#[cfg(feature = "stores")]
pub fn open_external(
    url: &StoreUrl,
    auth: &StoreAuth,
) -> anyhow::Result<std::sync::Arc<dyn tenure_client::Store>> {
    let only_etcd = |what: &str| format!("{what} is for etcd stores only; {url} is not one");
    match url {
        StoreUrl::Etcd(hosts) => {
            if auth.zk_min_ttl.is_some() {
                bail!("--store-min-ttl-ms is for ZooKeeper stores only; {url} is not one");
            }
            let user = match &auth.user {
                None => None,
                Some(name) => {
                    let password = std::env::var(STORE_PASSWORD_ENV).with_context(|| {
                        format!("--store-user {name}: set its password in {STORE_PASSWORD_ENV}")
                    })?;
                    Some((name.clone(), password))
                }
            };
            let options = tenure_store_etcd::EtcdOptions {
                cacert: auth.cacert.clone(),
                user,
                ..Default::default()
            };
            let list = format!("etcd://{}", hosts.join(","));
            Ok(std::sync::Arc::new(tenure_store_etcd::EtcdStore::from_url(&list, options)?))
        }
        StoreUrl::ZooKeeper(hosts) => {
            if auth.cacert.is_some() {
                bail!(only_etcd("--store-cacert"));
            }
            if auth.user.is_some() {
                bail!(only_etcd("--store-user"));
            }
            let mut options = tenure_store_zk::ZkOptions::default();
            if let Some(min) = auth.zk_min_ttl {
                options.min_ttl = min;
            }
            Ok(std::sync::Arc::new(tenure_store_zk::ZkStore::new(hosts.clone(), options)?))
        }
        StoreUrl::Tenure(_) => bail!("{url}: tenure's store is opened with the cluster's client"),
    }
}

/// Without the `stores` feature, etcd and ZooKeeper cannot be reached.
#[cfg(not(feature = "stores"))]
pub fn open_external(
    url: &StoreUrl,
    _auth: &StoreAuth,
) -> anyhow::Result<std::sync::Arc<dyn tenure_client::Store>> {
    bail!("{url}: this build has no etcd or ZooKeeper stores (build with the `stores` feature)")
}

/// A parsed `--store`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreUrl {
    /// tenure's nodes (HTTP API endpoints, as `--endpoints` takes them).
    Tenure(Vec<String>),
    /// etcd members, `host:port` each.
    Etcd(Vec<String>),
    /// ZooKeeper servers, `host:port` each.
    ZooKeeper(Vec<String>),
}

impl fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (scheme, hosts) = match self {
            StoreUrl::Tenure(h) => ("tenure", h),
            StoreUrl::Etcd(h) => ("etcd", h),
            StoreUrl::ZooKeeper(h) => ("zk", h),
        };
        write!(f, "{scheme}://{}", hosts.join(","))
    }
}

/// Parses `--store`: a scheme and a comma-separated list of `host:port`.
pub fn parse(url: &str) -> anyhow::Result<StoreUrl> {
    let Some((scheme, rest)) = url.split_once("://") else {
        bail!("--store {url:?}: expected tenure://, etcd:// or zk:// followed by HOST:PORT,...");
    };
    let hosts = rest
        .split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map(|h| host_port(h).with_context(|| format!("--store {url:?}")))
        .collect::<anyhow::Result<Vec<_>>>()?;
    if hosts.is_empty() {
        bail!("--store {url:?}: no HOST:PORT given");
    }
    match scheme {
        "tenure" => Ok(StoreUrl::Tenure(hosts)),
        "etcd" => Ok(StoreUrl::Etcd(hosts)),
        "zk" | "zookeeper" => Ok(StoreUrl::ZooKeeper(hosts)),
        other => bail!("--store {url:?}: unknown store {other:?}: use tenure://, etcd:// or zk://"),
    }
}

/// The tenure cluster at `endpoints` (as `--endpoints` takes them), trusting
/// the CA in `cacert` and sending the token of `auth`.
pub fn tenure_cluster(
    cacert: Option<&Path>,
    auth: &TokenArgs,
    endpoints: &str,
) -> anyhow::Result<Arc<Cluster>> {
    let (client, endpoints) = connect(cacert, auth, endpoints)?;
    Ok(Arc::new(Cluster::new(client.inner().clone(), endpoints)?))
}

/// Opens the store `url` names: for `tenure://`, a client of that cluster's
/// HTTP API trusting `cacert` and sending the token of `tokens`; for
/// `etcd://` and `zk://`, [`open_external`] with `auth`. `tenure elect`,
/// `tenure run` and `tenure server --store` all open their store here.
pub fn open(
    url: &StoreUrl,
    cacert: Option<&Path>,
    tokens: &TokenArgs,
    auth: &StoreAuth,
) -> anyhow::Result<Arc<dyn Store>> {
    match url {
        StoreUrl::Tenure(hosts) => {
            if auth.user.is_some() || auth.zk_min_ttl.is_some() {
                bail!("--store-user and --store-min-ttl-ms are for etcd and ZooKeeper stores");
            }
            Ok(Arc::new(TenureStore::new(tenure_cluster(cacert, tokens, &hosts.join(","))?)))
        }
        external => open_external(external, auth),
    }
}

/// Checks one `host:port` (a name or an address; IPv6 in brackets).
pub fn host_port(h: &str) -> anyhow::Result<String> {
    let Some((host, port)) = h.rsplit_once(':') else {
        bail!("{h:?} has no port: write HOST:PORT");
    };
    if host.is_empty() || host.contains('/') || host.contains('@') {
        bail!("{h:?}: bad host {host:?} (write HOST:PORT, without a path or credentials)");
    }
    match port.parse::<u16>() {
        Ok(p) if p > 0 => Ok(h.to_string()),
        _ => bail!("{h:?}: bad port {port:?} (1 to 65535)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_scheme_names_its_store_and_keeps_the_hosts_in_order() {
        let hosts = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            parse("etcd://127.0.0.1:2379, 10.0.0.2:2379").unwrap(),
            StoreUrl::Etcd(hosts(&["127.0.0.1:2379", "10.0.0.2:2379"]))
        );
        assert_eq!(parse("zk://zk1:2181").unwrap(), StoreUrl::ZooKeeper(hosts(&["zk1:2181"])));
        assert_eq!(parse("zookeeper://[::1]:2181").unwrap().to_string(), "zk://[::1]:2181");
        assert_eq!(parse("tenure://a:8001,b:8002").unwrap().to_string(), "tenure://a:8001,b:8002");
    }

    #[test]
    fn bad_urls_say_what_is_wrong() {
        for (url, says) in [
            ("127.0.0.1:2379", "expected tenure://"),
            ("consul://h:1", "unknown store \"consul\""),
            ("etcd://", "no HOST:PORT"),
            ("etcd://h", "has no port"),
            ("etcd://h:0", "bad port"),
            ("etcd://h:99999", "bad port"),
            ("zk://u:p@h:2181", "without a path or credentials"),
            ("etcd://h:2379/x", "bad port"),
        ] {
            let err = format!("{:#}", parse(url).unwrap_err());
            assert!(err.contains(says), "{url}: {err}");
        }
    }
}
