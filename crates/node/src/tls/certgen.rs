//! Makes a CA, node certificates and client certificates for a cluster:
//! what `tenure cert` writes, and what the tests and the demo use.
//!
//! Files in the output directory:
//!
//! | file | what |
//! |---|---|
//! | `ca.pem`, `ca-key.pem` | the cluster's CA certificate and key (reused when present) |
//! | `node-<id>.pem`, `node-<id>-key.pem` | node `id`'s certificate and key |
//! | `client-<name>.pem`, `client-<name>-key.pem` | an application's certificate and key, for the etcd listener |
//!
//! Keys are written with mode 0600 and never overwritten. A node certificate
//! names the node (`node-<id>.<cluster id>`, see [`super::node_name`]) and
//! the extra hosts asked for (DNS names or IP addresses, for the HTTP API's
//! clients), and allows server and client authentication. A client
//! certificate allows client authentication only and names no host (its
//! subject is `client-<name>.<cluster id>`): it opens the connections that
//! ask for a certificate of the cluster's CA (the etcd listener), and a peer
//! port refuses it, as it names no node. Keys are ECDSA P-256.

use super::{node_name, node_server_name, TlsFiles, TlsIdentity};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use tenure_core::NodeId;
use time::{Duration, OffsetDateTime};

/// The CA certificate's file name.
pub const CA_CERT_FILE: &str = "ca.pem";
/// The CA key's file name.
pub const CA_KEY_FILE: &str = "ca-key.pem";
/// The common name of every CA made here; a reused CA is recognised by it.
pub const CA_COMMON_NAME: &str = "tenure cluster CA";
/// How long a CA is valid (ten years): node certificates are renewed, the CA
/// rarely.
pub const CA_VALID_DAYS: u32 = 3650;
/// How long node certificates are valid by default.
pub const DEFAULT_NODE_DAYS: u32 = 365;
/// The hosts every node certificate names by default, so that clients on the
/// same machine can reach the HTTP API over TLS.
pub const DEFAULT_HOSTS: &[&str] = &["localhost", "127.0.0.1", "::1"];
/// Certificates are valid from this long before they are made (clock skew
/// between machines).
const BACKDATE: Duration = Duration::hours(1);

/// Node `id`'s certificate file name.
pub fn node_cert_file(id: NodeId) -> String {
    format!("node-{}.pem", id.0)
}

/// Node `id`'s key file name.
pub fn node_key_file(id: NodeId) -> String {
    format!("node-{}-key.pem", id.0)
}

/// The certificate file name of the client `name`.
pub fn client_cert_file(name: &str) -> String {
    format!("client-{name}.pem")
}

/// The key file name of the client `name`.
pub fn client_key_file(name: &str) -> String {
    format!("client-{name}-key.pem")
}

/// The longest client certificate subject (`client-<name>.<cluster id>`),
/// as X.509 bounds a common name.
pub const MAX_CLIENT_SUBJECT: usize = 64;

/// What to make.
#[derive(Clone, Debug)]
pub struct CertRequest {
    /// The cluster's id (part of every node's name).
    pub cluster_id: String,
    /// The nodes to make certificates for.
    pub nodes: Vec<NodeId>,
    /// The clients (applications) to make certificates for, by name.
    pub clients: Vec<String>,
    /// Extra names in every node certificate: DNS names or IP addresses.
    pub hosts: Vec<String>,
    /// Validity of the node certificates, in days.
    pub days: u32,
}

impl CertRequest {
    /// Certificates for `nodes` of `cluster_id`, with [`DEFAULT_HOSTS`] and
    /// [`DEFAULT_NODE_DAYS`].
    pub fn new(cluster_id: &str, nodes: impl IntoIterator<Item = NodeId>) -> Self {
        CertRequest {
            cluster_id: cluster_id.into(),
            nodes: nodes.into_iter().collect(),
            clients: Vec::new(),
            hosts: DEFAULT_HOSTS.iter().map(|h| h.to_string()).collect(),
            days: DEFAULT_NODE_DAYS,
        }
    }
}

/// What was written.
#[derive(Clone, Debug)]
pub struct Generated {
    /// The CA certificate.
    pub ca: PathBuf,
    /// True if the CA was made now, false if an existing one was reused.
    pub ca_created: bool,
    /// Each node's files, in the order asked for.
    pub nodes: Vec<(NodeId, TlsFiles)>,
    /// Each client's files, in the order asked for.
    pub clients: Vec<(String, TlsFiles)>,
}

/// Why certificates could not be made.
#[derive(Debug, thiserror::Error)]
pub enum CertGenError {
    /// The request cannot be served.
    #[error("{0}")]
    Invalid(String),
    /// A file exists and is not overwritten.
    #[error("{0} exists; remove it or choose another output directory")]
    Exists(PathBuf),
    /// A file operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The existing CA cannot be used.
    #[error("cannot use the CA in {dir}: {problem}")]
    Ca {
        /// The directory holding it.
        dir: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// Generating a key or a certificate failed.
    #[error("generating a certificate failed: {0}")]
    Generate(#[from] rcgen::Error),
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> CertGenError + '_ {
    move |source| CertGenError::Io { path: path.into(), source }
}

/// The CA's parameters; the same every time, so an existing CA can sign
/// again from its key alone.
fn ca_params(days: u32) -> CertificateParams {
    let mut params = CertificateParams::default();
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, CA_COMMON_NAME);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let now = OffsetDateTime::now_utc();
    params.not_before = now - BACKDATE;
    params.not_after = now + Duration::days(days.into());
    params
}

/// Writes `contents` to a new file `path` with `mode`; an existing file is an error.
fn write_new(path: &Path, contents: &str, mode: u32) -> Result<(), CertGenError> {
    let mut f = OpenOptions::new().write(true).create_new(true).mode(mode).open(path).map_err(
        |e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => CertGenError::Exists(path.into()),
            _ => CertGenError::Io { path: path.into(), source: e },
        },
    )?;
    f.write_all(contents.as_bytes()).and_then(|()| f.sync_all()).map_err(io_error(path))
}

/// The CA of `dir`: the existing one, or a new one written there. Returns its
/// issuer and whether it was made now.
fn ca(dir: &Path) -> Result<(Issuer<'static, KeyPair>, bool), CertGenError> {
    let (cert, key) = (dir.join(CA_CERT_FILE), dir.join(CA_KEY_FILE));
    match (cert.exists(), key.exists()) {
        (true, true) => {
            let pem = std::fs::read_to_string(&key).map_err(io_error(&key))?;
            let key_pair = KeyPair::from_pem(&pem).map_err(|e| CertGenError::Ca {
                dir: dir.into(),
                problem: format!("{} is not a usable key: {e}", key.display()),
            })?;
            Ok((Issuer::new(ca_params(CA_VALID_DAYS), key_pair), false))
        }
        (false, false) => {
            let key_pair = KeyPair::generate()?;
            let params = ca_params(CA_VALID_DAYS);
            let cert_pem = params.self_signed(&key_pair)?.pem();
            write_new(&key, &key_pair.serialize_pem(), 0o600)?;
            write_new(&cert, &cert_pem, 0o644)?;
            Ok((Issuer::new(params, key_pair), true))
        }
        (true, false) | (false, true) => Err(CertGenError::Ca {
            dir: dir.into(),
            problem: format!(
                "only one of {CA_CERT_FILE} and {CA_KEY_FILE} is there; a CA needs both (or \
                 neither, to make a new one)"
            ),
        }),
    }
}

/// The parameters of node `id`'s certificate.
fn node_params(req: &CertRequest, id: NodeId) -> Result<CertificateParams, CertGenError> {
    let name = node_name(&req.cluster_id, id);
    let mut names = vec![name.clone()];
    names.extend(req.hosts.iter().filter(|h| **h != name).cloned());
    let mut params = CertificateParams::new(names).map_err(|e| {
        CertGenError::Invalid(format!("a host name is not a DNS name or an IP address: {e}"))
    })?;
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages =
        vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
    params.use_authority_key_identifier_extension = true;
    let now = OffsetDateTime::now_utc();
    params.not_before = now - BACKDATE;
    params.not_after = now + Duration::days(req.days.into());
    Ok(params)
}

/// The subject (common name) of the client `name`'s certificate.
fn client_subject(req: &CertRequest, name: &str) -> String {
    format!("client-{name}.{}", req.cluster_id)
}

/// The parameters of the certificate of the client `name`.
fn client_params(req: &CertRequest, name: &str) -> CertificateParams {
    let mut params = CertificateParams::default();
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, client_subject(req, name));
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    params.use_authority_key_identifier_extension = true;
    let now = OffsetDateTime::now_utc();
    params.not_before = now - BACKDATE;
    params.not_after = now + Duration::days(req.days.into());
    params
}

/// What is wrong with a client name, if anything: lowercase letters,
/// digits and inner '-', not ending in `-key` (its certificate file would
/// be the key file of another name), its subject within
/// [`MAX_CLIENT_SUBJECT`].
fn client_name_problem(req: &CertRequest, name: &str) -> Option<String> {
    let ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
    let subject = client_subject(req, name);
    if name.is_empty() {
        Some("a client name cannot be empty".into())
    } else if !name.chars().all(ok) || name.starts_with('-') || name.ends_with('-') {
        Some(format!(
            "the client name {name:?} is not allowed: use lowercase letters, digits and '-' \
             (not first or last), e.g. billing-api"
        ))
    } else if let Some(other) = name.strip_suffix("-key") {
        Some(format!(
            "the client name {name:?} is not allowed: client-{name}.pem would be the key file of \
             client {other:?}; choose a name that does not end in -key"
        ))
    } else if subject.len() > MAX_CLIENT_SUBJECT {
        Some(format!(
            "the client name {name:?} is too long: its certificate's subject {subject} has {} \
             characters, at most {MAX_CLIENT_SUBJECT}",
            subject.len()
        ))
    } else {
        None
    }
}

/// Checks a client's files as the etcd listener will: a certificate for
/// client authentication that chains to the CA of `files.ca`.
fn check_client(files: &TlsFiles) -> Result<(), String> {
    let roots = super::read_roots(&files.ca).map_err(|e| e.to_string())?;
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        roots.into(),
        super::provider(),
    )
    .build()
    .map_err(|e| e.to_string())?;
    let chain =
        super::read_certs(super::FileRole::Certificate, &files.cert).map_err(|e| e.to_string())?;
    let (end_entity, intermediates) = chain.split_first().expect("read_certs returns one or more");
    verifier
        .verify_client_cert(end_entity, intermediates, rustls::pki_types::UnixTime::now())
        .map(|_| ())
        .map_err(|e| super::explain(&e))
}

fn check(req: &CertRequest) -> Result<(), CertGenError> {
    if req.nodes.is_empty() && req.clients.is_empty() {
        return Err(CertGenError::Invalid("no nodes or clients to make certificates for".into()));
    }
    if let Some(problem) = req.clients.iter().find_map(|n| client_name_problem(req, n)) {
        return Err(CertGenError::Invalid(problem));
    }
    for (i, name) in req.clients.iter().enumerate() {
        if req.clients[..i].contains(name) {
            return Err(CertGenError::Invalid(format!("the client {name:?} is named twice")));
        }
    }
    if let Some(id) = req.nodes.iter().find(|id| id.0 == 0) {
        return Err(CertGenError::Invalid(format!(
            "node id {id} is not allowed: ids are positive"
        )));
    }
    if node_server_name(&req.cluster_id, NodeId(1)).is_none() {
        return Err(CertGenError::Invalid(format!(
            "the cluster id {:?} cannot be part of a DNS name; use letters, digits, '-' and '.'",
            req.cluster_id
        )));
    }
    if req.days == 0 {
        return Err(CertGenError::Invalid("certificates must be valid for at least a day".into()));
    }
    Ok(())
}

/// A node certificate of `dir` (`node-<id>.pem`) made for another cluster
/// than `cluster_id`: its file name and that cluster. A directory holds one
/// cluster's files: a forgotten `--cluster-id` would otherwise sign a node
/// of the default cluster beside them, found out only when it starts.
fn other_cluster(dir: &Path, cluster_id: &str) -> Option<(String, String)> {
    let entries = std::fs::read_dir(dir).ok()?;
    entries.flatten().find_map(|entry| {
        let file = entry.file_name().into_string().ok()?;
        let id = file.strip_prefix("node-")?.strip_suffix(".pem")?.parse().ok()?;
        let certs = super::read_certs(super::FileRole::Certificate, &entry.path()).ok()?;
        let named = super::named_cluster(certs.first()?, NodeId(id))?;
        (named != cluster_id).then_some((file, named))
    })
}

/// Makes the CA (unless `dir` holds one) and a certificate and key for every
/// node of `req` in `dir` (created if missing). Each node's files are checked
/// as a node would check them at start.
pub fn generate(dir: &Path, req: &CertRequest) -> Result<Generated, CertGenError> {
    check(req)?;
    std::fs::create_dir_all(dir).map_err(io_error(dir))?;
    let node_files = req.nodes.iter().flat_map(|id| [node_cert_file(*id), node_key_file(*id)]);
    let client_files = req.clients.iter().flat_map(|n| [client_cert_file(n), client_key_file(n)]);
    for file in node_files.chain(client_files) {
        let path = dir.join(file);
        if path.exists() {
            return Err(CertGenError::Exists(path));
        }
    }
    if let Some((file, other)) = other_cluster(dir, &req.cluster_id) {
        return Err(CertGenError::Invalid(format!(
            "{} holds node certificates of cluster {other:?} ({file} among them), not of \
             {:?}: give --cluster-id {other} to add nodes to that cluster, or another \
             directory for another cluster",
            dir.display(),
            req.cluster_id
        )));
    }
    let (issuer, ca_created) = ca(dir)?;
    let ca = dir.join(CA_CERT_FILE);
    let issue = |params: CertificateParams, cert: String, key: String| {
        let key_pair = KeyPair::generate()?;
        let signed = params.signed_by(&key_pair, &issuer)?;
        let files = TlsFiles { cert: dir.join(cert), key: dir.join(key), ca: ca.clone() };
        write_new(&files.key, &key_pair.serialize_pem(), 0o600)?;
        write_new(&files.cert, &signed.pem(), 0o644)?;
        Ok::<_, CertGenError>(files)
    };
    let mut nodes = Vec::new();
    for &id in &req.nodes {
        let files = issue(node_params(req, id)?, node_cert_file(id), node_key_file(id))?;
        if let Err(e) = TlsIdentity::load(&files, &req.cluster_id, id) {
            // Unusable (say, a CA not made here): leave nothing half-made behind.
            let _ = std::fs::remove_file(&files.cert);
            let _ = std::fs::remove_file(&files.key);
            return Err(CertGenError::Ca { dir: dir.into(), problem: e.to_string() });
        }
        nodes.push((id, files));
    }
    let mut clients = Vec::new();
    for name in &req.clients {
        let files = issue(client_params(req, name), client_cert_file(name), client_key_file(name))?;
        if let Err(problem) = check_client(&files) {
            // A CA whose certificate is not its key's (or not made here):
            // leave nothing half-made behind.
            let _ = std::fs::remove_file(&files.cert);
            let _ = std::fs::remove_file(&files.key);
            return Err(CertGenError::Ca { dir: dir.into(), problem });
        }
        clients.push((name.clone(), files));
    }
    Ok(Generated { ca, ca_created, nodes, clients })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn ids(list: &[u64]) -> Vec<NodeId> {
        list.iter().copied().map(NodeId).collect()
    }

    #[test]
    fn makes_a_ca_and_node_files_that_load() {
        let dir = tempfile::tempdir().unwrap();
        let out = generate(dir.path(), &CertRequest::new("test", ids(&[1, 2, 3]))).unwrap();
        assert!(out.ca_created);
        assert_eq!(out.nodes.len(), 3);
        for (id, files) in &out.nodes {
            let mode = std::fs::metadata(&files.key).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "key of node {id}");
            let ca_key = dir.path().join(CA_KEY_FILE);
            assert_eq!(std::fs::metadata(ca_key).unwrap().permissions().mode() & 0o777, 0o600);
            TlsIdentity::load(files, "test", *id).unwrap();
            // Another node's id, or another cluster, is refused.
            let other = NodeId(id.0 % 3 + 1);
            let err = TlsIdentity::load(files, "test", other).unwrap_err().to_string();
            assert!(err.contains(&format!("does not name node-{}.test", other.0)), "{err}");
            assert!(TlsIdentity::load(files, "prod", *id).is_err());
        }
    }

    #[test]
    fn an_existing_ca_signs_more_nodes_and_nothing_is_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        generate(dir.path(), &CertRequest::new("test", ids(&[1]))).unwrap();
        let ca_before = std::fs::read(dir.path().join(CA_CERT_FILE)).unwrap();
        let out = generate(dir.path(), &CertRequest::new("test", ids(&[2]))).unwrap();
        assert!(!out.ca_created);
        assert_eq!(std::fs::read(dir.path().join(CA_CERT_FILE)).unwrap(), ca_before);
        TlsIdentity::load(&out.nodes[0].1, "test", NodeId(2)).unwrap();
        let err = generate(dir.path(), &CertRequest::new("test", ids(&[2]))).unwrap_err();
        assert!(matches!(err, CertGenError::Exists(_)), "{err}");
    }

    #[test]
    fn a_directory_of_another_cluster_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        generate(dir.path(), &CertRequest::new("prod", ids(&[1, 2]))).unwrap();
        let err = generate(dir.path(), &CertRequest::new("tenure", ids(&[3]))).unwrap_err();
        let said = err.to_string();
        assert!(said.contains("cluster \"prod\"") && said.contains("--cluster-id prod"), "{said}");
        assert!(!dir.path().join(node_cert_file(NodeId(3))).exists());
        // What is no node certificate of another cluster does not stand in
        // the way: a file of that name that is not PEM, one that is empty.
        std::fs::write(dir.path().join("node-9.pem"), b"\0\xffnot a certificate").unwrap();
        std::fs::write(dir.path().join("node-8.pem"), b"").unwrap();
        generate(dir.path(), &CertRequest::new("prod", ids(&[3]))).unwrap();
    }

    #[test]
    fn a_client_certificate_opens_no_peer_port() {
        let dir = tempfile::tempdir().unwrap();
        let mut req = CertRequest::new("test", ids(&[1]));
        req.clients = vec!["billing-api".into()];
        let out = generate(dir.path(), &req).unwrap();
        let (name, files) = &out.clients[0];
        assert_eq!(name, "billing-api");
        assert_eq!(files.cert, dir.path().join("client-billing-api.pem"));
        let mode = std::fs::metadata(&files.key).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        // Signed by the cluster's CA, for client authentication only, and
        // naming no node: a node that loaded it, or a peer it is shown to,
        // refuses it.
        let node = TlsIdentity::load(&out.nodes[0].1, "test", NodeId(1)).unwrap();
        let der = super::super::read_certs(super::super::FileRole::Certificate, &files.cert)
            .unwrap()
            .remove(0);
        let refused = node.check_peer(Some(&[der]), NodeId(1)).unwrap_err();
        assert!(refused.contains("does not name node-1.test"), "{refused}");
        let err = TlsIdentity::load(files, "test", NodeId(1)).unwrap_err().to_string();
        assert!(err.contains("node-1.test"), "{err}");
        // Clients alone, later, with the same CA; nothing is overwritten.
        let mut more = CertRequest::new("test", ids(&[]));
        more.clients = vec!["web".into()];
        let again = generate(dir.path(), &more).unwrap();
        assert!(!again.ca_created && again.nodes.is_empty() && again.clients.len() == 1);
        let err = generate(dir.path(), &more).unwrap_err();
        assert!(matches!(err, CertGenError::Exists(_)), "{err}");
    }

    #[test]
    fn a_ca_certificate_that_is_not_its_keys_makes_no_client() {
        let dir = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir().unwrap();
        generate(dir.path(), &CertRequest::new("test", ids(&[1]))).unwrap();
        generate(other.path(), &CertRequest::new("test", ids(&[1]))).unwrap();
        std::fs::copy(other.path().join(CA_CERT_FILE), dir.path().join(CA_CERT_FILE)).unwrap();
        let mut req = CertRequest::new("test", ids(&[]));
        req.clients = vec!["web".into()];
        let err = generate(dir.path(), &req).unwrap_err().to_string();
        assert!(err.contains("not signed by the cluster's CA"), "{err}");
        assert!(!dir.path().join(client_cert_file("web")).exists());
        assert!(!dir.path().join(client_key_file("web")).exists());
    }

    #[test]
    fn bad_client_names_are_explained_and_nothing_is_made() {
        for (name, said) in [
            ("", "cannot be empty"),
            ("Web", "lowercase"),
            ("a/b", "lowercase"),
            ("-x", "not first or last"),
            ("a-key", "key file of client \"a\""),
            (&"x".repeat(53)[..], "at most 64"),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let mut req = CertRequest::new("test", ids(&[]));
            req.clients = vec![name.to_string()];
            let err = generate(dir.path(), &req).unwrap_err().to_string();
            assert!(err.contains(said), "{name:?}: {err}");
            assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "{name:?}");
        }
        let dir = tempfile::tempdir().unwrap();
        let mut req = CertRequest::new("test", ids(&[]));
        req.clients = vec!["a".into(), "a".into()];
        let err = generate(dir.path(), &req).unwrap_err().to_string();
        assert!(err.contains("named twice"), "{err}");
    }

    #[test]
    fn bad_requests_are_explained() {
        let dir = tempfile::tempdir().unwrap();
        let err = generate(dir.path(), &CertRequest::new("bad id!", ids(&[1]))).unwrap_err();
        assert!(err.to_string().contains("DNS name"), "{err}");
        let err = generate(dir.path(), &CertRequest::new("c", ids(&[]))).unwrap_err();
        assert!(err.to_string().contains("no nodes or clients"), "{err}");
        std::fs::write(dir.path().join(CA_CERT_FILE), "x").unwrap();
        let err = generate(dir.path(), &CertRequest::new("c", ids(&[1]))).unwrap_err();
        assert!(err.to_string().contains("only one of"), "{err}");
    }
}
