//! TLS: mutual TLS between peers, and the server side of the HTTP API's TLS.
//!
//! # Identity
//!
//! Every node of a cluster holds a certificate and its key, signed by the
//! cluster's CA ([`TlsFiles`]). Node `N` of cluster `C` is named in its
//! certificate by the DNS subject alternative name `node-N.C`
//! ([`node_name`]); the certificate must allow both server and client
//! authentication (extended key usages `serverAuth` and `clientAuth`), since a
//! node both accepts and dials. `tenure cert` makes such certificates
//! ([`certgen`], feature `certgen`).
//!
//! # Peer connections
//!
//! * The dialer of peer `P` asks for the server name `node-P.C`: rustls checks
//!   that the acceptor's certificate chains to the CA and names `node-P.C`.
//! * The acceptor requires a client certificate that chains to the CA; after
//!   the TLS handshake, the dialer's [`crate::wire::Frame::Hello`] claims an
//!   id, and the connection is refused unless the certificate names exactly
//!   that node (`TlsIdentity::check_peer`). A node holding node 3's
//!   certificate cannot claim to be node 2.
//! * Peer connections speak TLS 1.3 only (both ends are tenure nodes).
//!
//! # Start-up checks
//!
//! [`TlsIdentity::load`] reads the three files and checks, before anything is
//! bound, that each holds what it should, that the key belongs to the
//! certificate, and that the certificate chains to the CA, is valid now,
//! names this node and allows both usages; every error names the file and
//! what is wrong.

#[cfg(feature = "certgen")]
pub mod certgen;

use rustls::client::danger::ServerCertVerifier;
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::{ParsedCertificate, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{CertificateError, ClientConfig, RootCertStore, ServerConfig};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tenure_core::NodeId;
use tokio_rustls::{TlsAcceptor, TlsConnector};

/// The certificate, key and CA files of a node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    /// PEM: this node's certificate (first), optionally followed by intermediates.
    pub cert: PathBuf,
    /// PEM: the certificate's private key (PKCS#8, SEC1 or PKCS#1).
    pub key: PathBuf,
    /// PEM: the cluster's CA certificate(s); peers and clients are checked against it.
    pub ca: PathBuf,
}

/// How a node's peer connections are secured.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Security {
    /// Mutual TLS with these files (see the module documentation).
    MutualTls(TlsFiles),
    /// No TLS: peer connections are neither encrypted nor authenticated, and
    /// any host that can reach the peer port can take part in elections under
    /// any configured id. For development on one machine only; the node logs a
    /// warning at start.
    InsecureNoTls,
}

/// The DNS name that identifies node `id` of `cluster_id` in certificates:
/// `node-<id>.<cluster_id>`.
pub fn node_name(cluster_id: &str, id: NodeId) -> String {
    format!("node-{}.{cluster_id}", id.0)
}

/// [`node_name`] as a TLS server name; `None` if the cluster id cannot be
/// part of a DNS name.
pub fn node_server_name(cluster_id: &str, id: NodeId) -> Option<ServerName<'static>> {
    ServerName::try_from(node_name(cluster_id, id)).ok()
}

/// Which of a node's files a problem is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileRole {
    /// The node's certificate (`tls_cert`).
    Certificate,
    /// The certificate's key (`tls_key`).
    Key,
    /// The CA certificate (`tls_ca`).
    Ca,
}

impl fmt::Display for FileRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FileRole::Certificate => "certificate file",
            FileRole::Key => "key file",
            FileRole::Ca => "CA file",
        })
    }
}

/// Why the TLS files cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file cannot be read.
    #[error("cannot read the {role} {path}: {error}")]
    Read {
        /// Which file.
        role: FileRole,
        /// Its path.
        path: PathBuf,
        /// The cause.
        error: std::io::Error,
    },
    /// A file holds nothing usable of what it should hold.
    #[error("the {role} {path} {problem}")]
    Content {
        /// Which file.
        role: FileRole,
        /// Its path.
        path: PathBuf,
        /// What is wrong, as the end of a sentence.
        problem: String,
    },
    /// The key does not belong to the certificate.
    #[error(
        "the key in {key} does not belong to the certificate in {cert}; give the key made \
         with that certificate"
    )]
    KeyMismatch {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
    },
    /// The certificate is not valid for this node (CA, validity, name, usage).
    #[error("the certificate {cert} cannot be used by {name} with the CA {ca}: {problem}")]
    Certificate {
        /// The certificate file.
        cert: PathBuf,
        /// The CA file.
        ca: PathBuf,
        /// This node's name ([`node_name`]).
        name: String,
        /// What is wrong.
        problem: String,
    },
    /// The cluster id cannot be part of a DNS name, so no certificate can name the node.
    #[error(
        "the cluster id {0:?} cannot be part of a DNS name (node-<id>.<cluster id> names a \
         node in its certificate); with TLS, use letters, digits, '-' and '.'"
    )]
    ClusterIdNotDnsName(String),
    /// rustls refused the configuration (should not happen with checked files).
    #[error("TLS configuration: {0}")]
    Config(String),
}

/// A node's loaded TLS material: what the transport and the HTTP API use.
pub struct TlsIdentity {
    cluster_id: String,
    name: String,
    peer_acceptor: TlsAcceptor,
    peer_connector: TlsConnector,
    https: Arc<ServerConfig>,
}

impl fmt::Debug for TlsIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsIdentity").field("name", &self.name).finish_non_exhaustive()
    }
}

/// The crypto provider used everywhere (ring).
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read(role: FileRole, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|error| TlsError::Read { role, path: path.into(), error })
}

fn content(role: FileRole, path: &Path, problem: impl Into<String>) -> TlsError {
    TlsError::Content { role, path: path.into(), problem: problem.into() }
}

/// Every certificate in a PEM file; at least one.
pub fn read_certs(role: FileRole, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read(role, path)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| content(role, path, format!("is not valid PEM: {e}")))?;
    if certs.is_empty() {
        return Err(content(
            role,
            path,
            "holds no certificate (expected PEM with -----BEGIN CERTIFICATE-----)",
        ));
    }
    Ok(certs)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let pem = read(FileRole::Key, path)?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => content(
            FileRole::Key,
            path,
            "holds no private key (expected PEM with -----BEGIN PRIVATE KEY-----, \
             -----BEGIN EC PRIVATE KEY----- or -----BEGIN RSA PRIVATE KEY-----)",
        ),
        e => content(FileRole::Key, path, format!("is not valid PEM: {e}")),
    })
}

/// The CA certificates of `path` as a root store.
pub fn read_roots(path: &Path) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in read_certs(FileRole::Ca, path)? {
        roots.add(cert).map_err(|e| {
            content(FileRole::Ca, path, format!("holds an unusable CA certificate: {e}"))
        })?;
    }
    Ok(roots)
}

/// A client configuration that trusts the CA certificates in `ca` (for HTTPS
/// clients of the API: the CLI, tests, benchmarks).
pub fn https_client_config(ca: &Path) -> Result<ClientConfig, TlsError> {
    let roots = read_roots(ca)?;
    Ok(ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// The cluster id a certificate names node `id` of, if it names that node
/// of another cluster: the `<cluster>` of a DNS name `node-<id>.<cluster>`
/// among its subject alternative names (DER `dNSName`: tag 0x82, a
/// one-byte length, the name). A scan, not a parse: enough for a hint.
pub fn named_cluster(cert_der: &[u8], id: NodeId) -> Option<String> {
    let prefix = format!("node-{}.", id.0);
    let bytes = cert_der;
    (0..bytes.len().saturating_sub(1)).find_map(|i| {
        let len = usize::from(*bytes.get(i + 1)?);
        if bytes[i] != 0x82 || len >= 0x80 {
            return None;
        }
        let name = std::str::from_utf8(bytes.get(i + 2..i + 2 + len)?).ok()?;
        let cluster = name.strip_prefix(&prefix)?;
        let dns = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '.';
        (!cluster.is_empty() && cluster.chars().all(dns)).then(|| cluster.to_string())
    })
}

/// What a certificate error means, in words an operator can act on.
pub fn explain(e: &rustls::Error) -> String {
    use CertificateError as C;
    match e {
        rustls::Error::InvalidCertificate(c) => match c {
            C::UnknownIssuer => "it is not signed by the cluster's CA (tls_ca)".into(),
            C::BadSignature => {
                "it is not signed by the cluster's CA (tls_ca): its signature does not verify \
                 (signed by another CA of the same name?)"
                    .into()
            }
            C::Expired | C::ExpiredContext { .. } => "it has expired; make a new one".into(),
            C::NotValidYet | C::NotValidYetContext { .. } => {
                "it is not valid yet (check the clock)".into()
            }
            C::NotValidForName | C::NotValidForNameContext { .. } => {
                "it does not name the node it is presented for".into()
            }
            C::InvalidPurpose | C::InvalidPurposeContext { .. } => {
                "it does not allow both server and client authentication".into()
            }
            other => format!("{other:?}"),
        },
        rustls::Error::AlertReceived(alert) => {
            format!("the peer refused our certificate or TLS settings (alert {alert:?})")
        }
        rustls::Error::InvalidMessage(_) => "the peer does not speak TLS".into(),
        other => other.to_string(),
    }
}

/// The rustls error inside an I/O error, if it is one.
fn rustls_error(e: &std::io::Error) -> Option<&rustls::Error> {
    e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>())
}

/// True if the I/O error is a TLS failure (a refused certificate, an alert,
/// garbage instead of TLS), not a plain network error.
pub fn is_tls_error(e: &std::io::Error) -> bool {
    rustls_error(e).is_some()
}

/// A TLS failure on a connection, explained: unwraps a rustls error from an
/// I/O error.
pub fn explain_io(e: &std::io::Error) -> String {
    match rustls_error(e) {
        Some(tls) => explain(tls),
        None if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            "the peer closed the connection during the TLS handshake (does it run without TLS, \
             or refuse our certificate?)"
                .into()
        }
        None => e.to_string(),
    }
}

impl TlsIdentity {
    /// Reads and checks the files of node `id` of `cluster_id` (see the
    /// module documentation for what is checked).
    pub fn load(files: &TlsFiles, cluster_id: &str, id: NodeId) -> Result<Self, TlsError> {
        let name = node_name(cluster_id, id);
        let server_name = node_server_name(cluster_id, id)
            .ok_or_else(|| TlsError::ClusterIdNotDnsName(cluster_id.into()))?;
        let roots = Arc::new(read_roots(&files.ca)?);
        let chain = read_certs(FileRole::Certificate, &files.cert)?;
        let key = read_key(&files.key)?;
        let provider = provider();
        CertifiedKey::from_der(chain.clone(), key.clone_key(), &provider).map_err(|e| match e {
            rustls::Error::InconsistentKeys(_) => {
                TlsError::KeyMismatch { cert: files.cert.clone(), key: files.key.clone() }
            }
            e => content(FileRole::Key, &files.key, format!("holds an unusable key: {e}")),
        })?;
        let certificate_error = |problem: String| TlsError::Certificate {
            cert: files.cert.clone(),
            ca: files.ca.clone(),
            name: name.clone(),
            problem,
        };
        let server_verifier =
            WebPkiServerVerifier::builder_with_provider(roots.clone(), provider.clone())
                .build()
                .map_err(|e| TlsError::Config(e.to_string()))?;
        let client_verifier =
            WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone())
                .build()
                .map_err(|e| TlsError::Config(e.to_string()))?;
        let (end_entity, intermediates) =
            chain.split_first().expect("read_certs returns one or more");
        let now = UnixTime::now();
        server_verifier
            .verify_server_cert(end_entity, intermediates, &server_name, &[], now)
            .map_err(|e| match e {
                rustls::Error::InvalidCertificate(
                    CertificateError::NotValidForName
                    | CertificateError::NotValidForNameContext { .. },
                ) => certificate_error(match named_cluster(end_entity, id) {
                    // Made for this node of another cluster id: the id given
                    // to this node is what is likelier wrong.
                    Some(other) => format!(
                        "it names node-{}.{other} (node {} of cluster {other:?}), not {name}: \
                         if this node belongs to cluster {other:?}, start it with --cluster-id \
                         {other} (cluster_id in the config file; every node of a cluster and \
                         `tenure cert` take the same one); only for a node of cluster \
                         {cluster_id:?}, make its certificate with `tenure cert --nodes {} \
                         --cluster-id {cluster_id}`",
                        id.0, id.0, id.0
                    ),
                    None => format!(
                        "it does not name {name} (node {} of cluster {cluster_id:?}); make one \
                         with `tenure cert --nodes {} --cluster-id {cluster_id}`",
                        id.0, id.0
                    ),
                }),
                e => certificate_error(explain(&e)),
            })?;
        client_verifier
            .verify_client_cert(end_entity, intermediates, now)
            .map_err(|e| certificate_error(explain(&e)))?;

        let tls13 = &[&rustls::version::TLS13];
        let peer_server = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(tls13)
            .and_then(|b| {
                b.with_client_cert_verifier(client_verifier)
                    .with_single_cert(chain.clone(), key.clone_key())
            })
            .map_err(|e| TlsError::Config(e.to_string()))?;
        let peer_client = ClientConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(tls13)
            .map_err(|e| TlsError::Config(e.to_string()))?
            .with_root_certificates(roots)
            .with_client_auth_cert(chain.clone(), key.clone_key())
            .map_err(|e| TlsError::Config(e.to_string()))?;
        let https = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .and_then(|b| b.with_no_client_auth().with_single_cert(chain, key))
            .map_err(|e| TlsError::Config(e.to_string()))?;
        Ok(TlsIdentity {
            cluster_id: cluster_id.into(),
            name,
            peer_acceptor: TlsAcceptor::from(Arc::new(peer_server)),
            peer_connector: TlsConnector::from(Arc::new(peer_client)),
            https: Arc::new(https),
        })
    }

    /// This node's name in certificates ([`node_name`]).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The server configuration for the HTTP API: the node's certificate,
    /// no client certificates asked for.
    pub fn https_server_config(&self) -> Arc<ServerConfig> {
        self.https.clone()
    }

    /// Accepts peers' TLS connections (client certificate required). Public
    /// for tools and tests that speak the peer protocol by hand.
    pub fn peer_acceptor(&self) -> &TlsAcceptor {
        &self.peer_acceptor
    }

    /// Dials peers with our certificate (TLS 1.3, the peer's certificate
    /// checked against the CA and [`TlsIdentity::peer_server_name`]).
    pub fn peer_connector(&self) -> &TlsConnector {
        &self.peer_connector
    }

    /// The server name peer `id` must present.
    pub fn peer_server_name(&self, id: NodeId) -> ServerName<'static> {
        node_server_name(&self.cluster_id, id)
            .expect("checked at load: the cluster id is a DNS name")
    }

    /// Checks that the client certificate of an accepted connection names
    /// node `claimed`; the reason to refuse the connection otherwise.
    pub(crate) fn check_peer(
        &self,
        certs: Option<&[CertificateDer<'_>]>,
        claimed: NodeId,
    ) -> Result<(), String> {
        let end_entity = certs
            .and_then(|c| c.first())
            .ok_or_else(|| format!("node {claimed} presented no certificate"))?;
        let parsed = ParsedCertificate::try_from(end_entity).map_err(|e| {
            format!("the certificate of the peer claiming node {claimed} is unreadable: {e}")
        })?;
        rustls::client::verify_server_name(&parsed, &self.peer_server_name(claimed)).map_err(|_| {
            format!(
                "the peer claims to be node {claimed}, but its certificate does not name {}",
                node_name(&self.cluster_id, claimed)
            )
        })
    }
}
