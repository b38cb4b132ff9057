//! The store's settings: endpoints, key prefix, TLS, credentials, and the
//! parser of `etcd://host:port,host:port` store URLs.

use crate::error::EtcdError;
use std::path::PathBuf;
use std::time::Duration;
use tenure_elect::StoreError;

/// The key prefix under which elections live unless told otherwise.
pub const DEFAULT_PREFIX: &str = "/tenure/elections";
/// How long one request (or one stream's answer) may take before the
/// endpoint counts as not answering and the next one is tried.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a watch stream may stay quiet before the member is asked for
/// a progress report (which must come within the request timeout).
pub const PROBE_AFTER: Duration = Duration::from_secs(5);
/// The scheme of a store URL naming etcd endpoints (`etcd://h1:p1,h2:p2`).
pub const URL_SCHEME: &str = "etcd://";
/// The most endpoints a store accepts (etcd clusters have 3, 5 or 7 members).
pub const MAX_ENDPOINTS: usize = 16;
/// HTTP/2 keepalive pings, only while a stream is open: etcd closes the
/// connection of a client that pings more often than its
/// `--grpc-keepalive-min-time` (5 s by default).
const H2_KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);
/// How long an HTTP/2 ping may stay unanswered before the connection is dropped.
const H2_KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(5);

/// How an [`crate::EtcdStore`] talks to etcd.
#[derive(Clone)]
pub struct EtcdOptions {
    /// The key prefix of every election (no trailing `/`): election `E`'s
    /// candidacies are the keys `<prefix>/E/<lease id as 16 hex digits>`.
    pub prefix: String,
    /// The PEM file of the CA that signed the members' certificates; needed
    /// for `https://` endpoints (no system roots are trusted), refused with
    /// `http://` ones.
    pub cacert: Option<PathBuf>,
    /// A user name and password (etcd's authentication), if enabled
    /// (`Debug` shows the name only).
    pub user: Option<(String, String)>,
    /// The bound of each request ([`REQUEST_TIMEOUT`] by default).
    pub request_timeout: Duration,
    /// How long a watch stream (a wait's, an observer's) may stay quiet
    /// before its member is asked for a progress report ([`PROBE_AFTER`]
    /// by default): a member that vanished is noticed within this plus
    /// the request timeout.
    pub probe_after: Duration,
}

impl std::fmt::Debug for EtcdOptions {
    /// Everything but the password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdOptions")
            .field("prefix", &self.prefix)
            .field("cacert", &self.cacert)
            .field("user", &self.user.as_ref().map(|(name, _)| name))
            .field("request_timeout", &self.request_timeout)
            .field("probe_after", &self.probe_after)
            .finish()
    }
}

impl Default for EtcdOptions {
    fn default() -> Self {
        EtcdOptions {
            prefix: DEFAULT_PREFIX.to_string(),
            cacert: None,
            user: None,
            request_timeout: REQUEST_TIMEOUT,
            probe_after: PROBE_AFTER,
        }
    }
}

/// Parses the endpoint list of a store URL, `etcd://h1:p1,h2:p2` (the
/// scheme may be left out): `http://h:p` each, or `https://h:p` if `https`.
pub fn parse_url(url: &str, https: bool) -> Result<Vec<String>, StoreError> {
    let list = url.strip_prefix(URL_SCHEME).unwrap_or(url);
    if list.contains("://") {
        return Err(StoreError::Config(format!(
            "{url}: an etcd store URL is {URL_SCHEME}host:port[,host:port...]"
        )));
    }
    let scheme = if https { "https://" } else { "http://" };
    let endpoints = list
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(|e| format!("{scheme}{e}"))
        .collect::<Vec<_>>();
    check_endpoints(&endpoints)?;
    Ok(endpoints)
}

/// Checks endpoints: 1 to [`MAX_ENDPOINTS`] of `http://host:port` or
/// `https://host:port` (one scheme for all), without a path; returns
/// whether they are https.
pub fn check_endpoints(endpoints: &[String]) -> Result<bool, StoreError> {
    if endpoints.is_empty() {
        return Err(StoreError::Config("no etcd endpoints given".into()));
    }
    if endpoints.len() > MAX_ENDPOINTS {
        return Err(StoreError::Config(format!(
            "{} etcd endpoints given, at most {MAX_ENDPOINTS} are accepted",
            endpoints.len()
        )));
    }
    let https = endpoints[0].starts_with("https://");
    for e in endpoints {
        let rest = match (e.strip_prefix("http://"), e.strip_prefix("https://")) {
            (Some(rest), _) if !https => rest,
            (_, Some(rest)) if https => rest,
            _ => {
                return Err(StoreError::Config(format!(
                    "etcd endpoint {e:?}: expected {}://host:port like the first one",
                    if https { "https" } else { "http" }
                )))
            }
        };
        check_host_port(e, rest)?;
    }
    Ok(https)
}

/// Checks the `host:port` part of endpoint `e`.
fn check_host_port(e: &str, rest: &str) -> Result<(), StoreError> {
    let bad = |why: &str| StoreError::Config(format!("etcd endpoint {e:?}: {why}"));
    let (host, port) = rest.rsplit_once(':').ok_or_else(|| bad("no port (host:port)"))?;
    if host.is_empty() || host.contains(['/', '?', '#', '@', ' ']) {
        return Err(bad("bad host"));
    }
    match port.parse::<u16>() {
        Ok(p) if p > 0 => Ok(()),
        _ => Err(bad("the port must be a number from 1 to 65535")),
    }
}

/// Checks a key prefix: starts with `/`, no trailing `/`, printable ASCII.
pub fn check_prefix(prefix: &str) -> Result<(), StoreError> {
    let printable = prefix.bytes().all(|b| b.is_ascii_graphic());
    if !prefix.starts_with('/') || prefix.ends_with('/') || prefix.len() < 2 || !printable {
        return Err(StoreError::Config(format!(
            "etcd key prefix {prefix:?}: must start with '/', not end with '/', and be printable \
             ASCII without spaces"
        )));
    }
    Ok(())
}

/// How every per-endpoint channel is made, and the credentials to log in with.
#[derive(Clone)]
pub(crate) struct ConnectOptions {
    /// The CA to trust (https endpoints).
    tls: Option<tonic::transport::ClientTlsConfig>,
    /// A user name and password.
    pub(crate) user: Option<(String, String)>,
    /// The bound of a TCP (and TLS) connection's making.
    connect_timeout: Duration,
}

impl std::fmt::Debug for ConnectOptions {
    /// Everything but the password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectOptions")
            .field("tls", &self.tls.is_some())
            .field("user", &self.user.as_ref().map(|(name, _)| name))
            .field("connect_timeout", &self.connect_timeout)
            .finish()
    }
}

impl ConnectOptions {
    /// The channel settings of `url`: HTTP/2 keepalives while a stream is
    /// open, the connect timeout, and TLS with the CA for `https://`.
    pub(crate) fn endpoint(&self, url: &str) -> Result<tonic::transport::Endpoint, EtcdError> {
        let bad = |e: &dyn std::fmt::Display| EtcdError::InvalidArgs(format!("{url}: {e}"));
        let mut endpoint = tonic::transport::Endpoint::from_shared(url.to_string())
            .map_err(|e| bad(&e))?
            .http2_keep_alive_interval(H2_KEEPALIVE_INTERVAL)
            .keep_alive_timeout(H2_KEEPALIVE_TIMEOUT)
            .keep_alive_while_idle(false)
            .connect_timeout(self.connect_timeout);
        if let Some(tls) = &self.tls {
            endpoint = endpoint.tls_config(tls.clone()).map_err(|e| bad(&e))?;
        }
        Ok(endpoint)
    }
}

/// The connect options of every per-endpoint client.
pub(crate) fn connect_options(
    options: &EtcdOptions,
    https: bool,
) -> Result<ConnectOptions, StoreError> {
    let mut c = ConnectOptions {
        tls: None,
        user: options.user.clone(),
        connect_timeout: options.request_timeout,
    };
    match (&options.cacert, https) {
        (Some(path), true) => {
            let pem = std::fs::read(path).map_err(|e| {
                StoreError::Config(format!("CA file {}: cannot be read: {e}", path.display()))
            })?;
            if !String::from_utf8_lossy(&pem).contains("-----BEGIN CERTIFICATE-----") {
                return Err(StoreError::Config(format!(
                    "CA file {}: holds no PEM certificate",
                    path.display()
                )));
            }
            let ca = tonic::transport::Certificate::from_pem(pem);
            c.tls = Some(tonic::transport::ClientTlsConfig::new().ca_certificate(ca));
        }
        (None, true) => {
            return Err(StoreError::Config(
                "https etcd endpoints need the CA certificate that signed the members' (cacert)"
                    .into(),
            ))
        }
        (Some(path), false) => {
            return Err(StoreError::Config(format!(
                "CA file {} given but the etcd endpoints are http://",
                path.display()
            )))
        }
        (None, false) => {}
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_urls_become_endpoints() {
        let eps = parse_url("etcd://10.0.0.1:2379, h2:2380,", false).unwrap();
        assert_eq!(eps, ["http://10.0.0.1:2379", "http://h2:2380"]);
        assert_eq!(parse_url("h:1", true).unwrap(), ["https://h:1"]);
        assert_eq!(parse_url("etcd://[::1]:2379", false).unwrap(), ["http://[::1]:2379"]);
        for bad in ["etcd://", "etcd://h", "etcd://h:0", "etcd://h:x", "zk://h:1", "etcd://a/b:1"] {
            let e = parse_url(bad, false).unwrap_err();
            assert!(matches!(e, StoreError::Config(_)), "{bad}: {e:?}");
        }
    }

    #[test]
    fn endpoints_are_checked() {
        let ok = |v: &[&str]| check_endpoints(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert!(!ok(&["http://a:1", "http://b:2"]).unwrap());
        assert!(ok(&["https://a:1"]).unwrap());
        let mixed = ok(&["http://a:1", "https://b:2"]).unwrap_err().to_string();
        assert!(mixed.contains("like the first one"), "{mixed}");
        assert!(ok(&[]).unwrap_err().to_string().contains("no etcd endpoints"));
        assert!(ok(&["a:1"]).is_err());
        let many = vec!["http://a:1"; MAX_ENDPOINTS + 1];
        assert!(ok(&many).unwrap_err().to_string().contains("at most"));
    }

    #[test]
    fn prefixes_and_tls_settings_are_checked() {
        assert!(check_prefix("/tenure/elections").is_ok());
        for bad in ["", "/", "x", "/a/", "/a b"] {
            assert!(check_prefix(bad).is_err(), "{bad}");
        }
        let https_without_ca = connect_options(&EtcdOptions::default(), true).unwrap_err();
        assert!(https_without_ca.to_string().contains("CA certificate"));
        let opts = EtcdOptions { cacert: Some("/nonexistent.pem".into()), ..Default::default() };
        assert!(connect_options(&opts, false).unwrap_err().to_string().contains("http://"));
        assert!(connect_options(&opts, true).unwrap_err().to_string().contains("cannot be read"));
    }
}
