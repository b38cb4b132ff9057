//! A cluster of real `tenure server` processes on loopback, driven from the
//! outside through the HTTP API. The servers run with mutual TLS and HTTPS,
//! with certificates made by `tenure cert` in the cluster's directory, unless
//! a test turns TLS off. Dropping a [`TestCluster`] kills every child (also
//! when a test panics) and removes the data directories.
//!
//! The servers read `tenure.toml` in the cluster's directory: three API
//! tokens, [`ADMIN_TOKEN`] (role admin, in `admin.token`), [`READ_TOKEN`]
//! (role read, in `read.token`), [`APP_TOKEN`] (role write, named
//! `test-app`, in `app.token`) and [`OTHER_TOKEN`] (role write, named
//! `test-other`, in `other.token`: another application). [`TestCluster::request`] sends the admin token;
//! [`TestCluster::request_as`] any or none.

#![allow(dead_code)]

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::header::HeaderMap;
use hyper::{Method, Request};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use nix::sys::signal::Signal;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};
use tenure_launch::{address_list, ApiToken, Proc, ServerArgs, Tls};
use tokio_rustls::rustls;

/// Process tests share two cores; running them one at a time keeps their
/// timing assertions meaningful. (An async mutex: the guard is held across
/// awaits, and each test has its own runtime.)
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Takes the lock that runs process tests one at a time.
pub async fn serial() -> tokio::sync::MutexGuard<'static, ()> {
    SERIAL.lock().await
}

/// Per-request timeout: a node that does not answer this fast counts as down.
const REQUEST_TIMEOUT: Duration = Duration::from_millis(500);
/// How often the harness polls while waiting for a condition.
pub const POLL: Duration = Duration::from_millis(2);

/// The admin token the test servers accept (in `admin.token`).
pub const ADMIN_TOKEN: &str = "test-admin-4f1c9e2b7a6d0358";
/// The read token the test servers accept (in `read.token`).
pub const READ_TOKEN: &str = "test-read-93b5e07c1d2a4f68";

/// The write token the test servers accept (in `app.token`): an
/// application's.
pub const APP_TOKEN: &str = "test-app-5c08d1e96b3a72f4";

/// Another application's write token (in `other.token`).
pub const OTHER_TOKEN: &str = "test-other-b71e4a0c9d3f5286";

/// Writes the token files (mode 600) and `tenure.toml` naming them into
/// `dir`; returns the config file.
pub fn write_api_config(dir: &Path) -> PathBuf {
    let tokens = [
        ApiToken { name: "test-admin", role: "admin", file: "admin.token", secret: ADMIN_TOKEN },
        ApiToken { name: "test-read", role: "read", file: "read.token", secret: READ_TOKEN },
        ApiToken { name: "test-app", role: "write", file: "app.token", secret: APP_TOKEN },
        ApiToken { name: "test-other", role: "write", file: "other.token", secret: OTHER_TOKEN },
    ];
    tenure_launch::write_api_config(dir, "tenure.toml", &tokens).expect("the test tokens")
}

/// An answer: status, body as JSON (`Value::Null` when it is not JSON), body
/// text and headers.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub json: Value,
    pub text: String,
    pub headers: HeaderMap,
}

/// One HTTP/1.1 connection to a server's API ([`TestCluster::api_connection`]).
pub struct ApiConnection {
    send: hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    authority: String,
}

impl ApiConnection {
    /// Sends one request on this connection and waits at most `bound` for
    /// the whole answer; else says why there is none (no answer in time,
    /// or the connection's error and how long after sending it came).
    pub async fn request(
        &mut self,
        bound: Duration,
        token: Option<&str>,
        method: Method,
        path: &str,
        body: Option<(&str, &str)>,
    ) -> Result<Reply, String> {
        let req = Request::builder().method(method).uri(path).header("host", &self.authority);
        let req = api_request(req, token, body);
        let send = &mut self.send;
        let on_this_connection = |req| async move {
            send.ready().await?;
            send.send_request(req).await
        };
        answer_within(bound, on_this_connection, req).await
    }
}

/// A request of the API: `token` as a bearer token, `body` as (content
/// type, text).
fn api_request(
    mut req: hyper::http::request::Builder,
    token: Option<&str>,
    body: Option<(&str, &str)>,
) -> Request<Full<Bytes>> {
    if let Some(token) = token {
        req = req.header("authorization", format!("Bearer {token}"));
    }
    let mut payload = Bytes::new();
    if let Some((content_type, text)) = body {
        req = req.header("content-type", content_type);
        payload = Bytes::from(text.to_string());
    }
    req.body(Full::new(payload)).unwrap()
}

/// Sends `req` with `send` and reads the whole answer within `bound`; else
/// says why there is none: no answer in time, or the connection's error and
/// how long after sending it came.
async fn answer_within<F, Fut, E>(
    bound: Duration,
    send: F,
    req: Request<Full<Bytes>>,
) -> Result<Reply, String>
where
    F: FnOnce(Request<Full<Bytes>>) -> Fut,
    Fut: std::future::Future<Output = Result<hyper::Response<hyper::body::Incoming>, E>>,
    E: std::fmt::Debug,
{
    let sent = Instant::now();
    let failed = |e: &dyn std::fmt::Debug| format!("failed after {:?}: {e:?}", sent.elapsed());
    let fut = async {
        let resp = send(req).await.map_err(|e| failed(&e))?;
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let bytes = resp.into_body().collect().await.map_err(|e| failed(&e))?.to_bytes();
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let json = serde_json::from_str(&text).unwrap_or(Value::Null);
        Ok(Reply { status, json, text, headers })
    };
    tokio::time::timeout(bound, fut)
        .await
        .unwrap_or_else(|_| Err(format!("no answer in {bound:?}")))
}

/// The `tenure` binary under test: the one cargo built, or
/// `$TENURE_TEST_EXE` (for a target directory that several worktrees
/// share, whose `tenure` is whichever was built last).
pub fn exe() -> &'static str {
    static EXE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    EXE.get_or_init(|| {
        std::env::var("TENURE_TEST_EXE")
            .unwrap_or_else(|_| env!("CARGO_BIN_EXE_tenure").to_string())
    })
}

/// One server process.
pub struct TestServer {
    pub id: u64,
    pub peer_port: u16,
    pub http_port: u16,
    pub data_dir: PathBuf,
    pub log: PathBuf,
    pub cluster_id: String,
    /// The election protocol (`--protocol`).
    pub protocol: String,
    /// Mutual TLS and HTTPS (false: `--insecure-no-tls`).
    pub tls: bool,
    /// Its own `--peers`, instead of the cluster's (a typo's test).
    pub peers: Option<String>,
    /// `--join` with these endpoints instead of `--peers` (a node that joins
    /// a running cluster).
    pub join: Option<String>,
    /// The process (in the test's process group: a killed test runner takes it along).
    pub proc: Proc,
}

impl TestServer {
    fn new(id: u64, ports: [u16; 2], data_dir: PathBuf, log: PathBuf) -> Self {
        TestServer {
            id,
            peer_port: ports[0],
            http_port: ports[1],
            data_dir,
            proc: Proc::in_parent_group(format!("node {id}"), log.clone()),
            log,
            cluster_id: CLUSTER.to_string(),
            protocol: "raft".to_string(),
            tls: true,
            peers: None,
            join: None,
        }
    }
}

/// N servers with free ports and temporary data directories.
pub struct TestCluster {
    pub servers: Vec<TestServer>,
    pub peers: String,
    /// Every node's HTTP API address (`--peer-http`: what `/v1/cluster` reads);
    /// empty: no `--peer-http` (the nodes learn the addresses at their handshakes).
    pub peer_http: String,
    pub heartbeat_ms: u64,
    pub election_timeout_ms: u64,
    /// The servers' config file (the API tokens).
    pub config: PathBuf,
    /// Extra environment of the servers (e.g. `RUST_LOG`).
    pub env: Vec<(String, String)>,
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    // Last: removed after the children are dead.
    pub dir: tempfile::TempDir,
}

/// The name the servers' HTTPS certificates are checked against: 127.0.0.1.
pub fn api_name() -> rustls::pki_types::ServerName<'static> {
    rustls::pki_types::ServerName::from(std::net::IpAddr::from(std::net::Ipv4Addr::LOCALHOST))
}

/// The cluster id of the test clusters.
pub const CLUSTER: &str = "test";

/// Runs `tenure cert` with `args`; panics with its output if it fails.
pub fn tenure_cert(args: &[&str]) {
    let out = Command::new(exe()).arg("cert").args(args).output().expect("run tenure cert");
    assert!(
        out.status.success(),
        "tenure cert {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// An HTTP(S) client trusting the CA in `ca`.
pub fn https_client(ca: &Path) -> Client<HttpsConnector<HttpConnector>, Full<Bytes>> {
    let roots = tenure_node::tls::read_roots(ca).expect("the test CA");
    let tls = rustls::ClientConfig::builder_with_provider(tenure_node::tls::provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let mut http = HttpConnector::new();
    http.set_nodelay(true);
    http.enforce_http(false);
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .wrap_connector(http);
    Client::builder(TokioExecutor::new()).build(connector)
}

/// A raw TLS connection to a server's HTTPS API.
pub type HttpsStream = tokio_rustls::client::TlsStream<tokio::net::TcpStream>;

/// Distinct free loopback ports (all listeners held until every port is picked).
pub fn free_ports(n: usize) -> Vec<u16> {
    tenure_launch::free_ports(n).expect("free loopback ports")
}

/// `n` free loopback ports that none of `c`'s servers was given: the
/// kernel may hand out again a port [`free_ports`] let go of, and `c`'s
/// servers bind theirs only when they start.
pub fn ports_besides(c: &TestCluster, n: usize) -> Vec<u16> {
    let taken: Vec<u16> = c.servers.iter().flat_map(|s| [s.peer_port, s.http_port]).collect();
    loop {
        let ports = free_ports(n);
        if ports.iter().all(|p| !taken.contains(p)) {
            return ports;
        }
    }
}

impl TestCluster {
    /// Prepares `n` servers without starting them.
    pub fn new(n: usize, heartbeat_ms: u64, election_timeout_ms: u64) -> Self {
        let dir = tempfile::Builder::new().prefix("tenure-test-").tempdir().unwrap();
        let ports = free_ports(2 * n);
        let servers: Vec<TestServer> = (0..n)
            .map(|i| {
                let id = i as u64 + 1;
                let (data_dir, log) = (
                    dir.path().join(format!("node-{id}")),
                    dir.path().join(format!("node-{id}.log")),
                );
                TestServer::new(id, [ports[2 * i], ports[2 * i + 1]], data_dir, log)
            })
            .collect();
        let addr = |port: u16| format!("127.0.0.1:{port}");
        let peers = address_list(servers.iter().map(|s| (s.id, addr(s.peer_port))));
        let peer_http = address_list(servers.iter().map(|s| (s.id, addr(s.http_port))));
        let ids: Vec<u64> = servers.iter().map(|s| s.id).collect();
        let certs = dir.path().join("certs");
        tenure_launch::make_certs(Path::new(exe()), &certs, &ids, CLUSTER, None)
            .expect("the test certificates");
        TestCluster {
            servers,
            peers,
            peer_http,
            heartbeat_ms,
            election_timeout_ms,
            config: write_api_config(dir.path()),
            env: Vec::new(),
            client: https_client(&certs.join("ca.pem")),
            dir,
        }
    }

    /// Adds a server (not started) that claims node `id` with ports and a
    /// data directory of its own, and the cluster's `--peers`: a second
    /// process of one node id (a duplicate id). Returns its index.
    pub fn add_duplicate(&mut self, id: u64) -> usize {
        let i = self.servers.len();
        let ports = free_ports(2);
        let first = self.servers.iter().find(|s| s.id == id).expect("a server of that id");
        let (data_dir, log) = (
            self.dir.path().join(format!("node-{id}-duplicate-{i}")),
            self.dir.path().join(format!("node-{id}-duplicate-{i}.log")),
        );
        let s = TestServer {
            cluster_id: first.cluster_id.clone(),
            protocol: first.protocol.clone(),
            tls: first.tls,
            peers: Some(self.peers.clone()),
            ..TestServer::new(id, [ports[0], ports[1]], data_dir, log)
        };
        self.servers.push(s);
        i
    }

    /// The CA of every server's certificate.
    pub fn ca(&self) -> PathBuf {
        self.dir.path().join("certs/ca.pem")
    }

    /// Server `i`'s certificate and key, for its cluster id: made by
    /// `tenure cert` with the cluster's CA when the cluster id is not the
    /// cluster's (an intruder's).
    fn tls_files(&self, i: usize) -> (PathBuf, PathBuf) {
        let s = &self.servers[i];
        let dir = match s.cluster_id.as_str() {
            CLUSTER => self.dir.path().join("certs"),
            other => self.dir.path().join(format!("certs-{other}")),
        };
        let cert = dir.join(format!("node-{}.pem", s.id));
        if !cert.exists() {
            std::fs::create_dir_all(&dir).unwrap();
            for f in ["ca.pem", "ca-key.pem"] {
                std::fs::copy(self.dir.path().join("certs").join(f), dir.join(f)).unwrap();
            }
            tenure_launch::make_certs(Path::new(exe()), &dir, &[s.id], &s.cluster_id, None)
                .expect("an intruder's certificate");
        }
        (cert, dir.join(format!("node-{}-key.pem", s.id)))
    }

    /// Prepares and starts `n` servers.
    pub fn start(n: usize, heartbeat_ms: u64, election_timeout_ms: u64) -> Self {
        Self::start_with_protocol("raft", n, heartbeat_ms, election_timeout_ms)
    }

    /// Prepares and starts `n` servers running election protocol `protocol`.
    pub fn start_with_protocol(
        protocol: &str,
        n: usize,
        heartbeat_ms: u64,
        election_timeout_ms: u64,
    ) -> Self {
        let mut c = Self::new(n, heartbeat_ms, election_timeout_ms);
        for i in 0..n {
            c.servers[i].protocol = protocol.to_string();
            c.spawn(i);
        }
        c
    }

    /// Starts (or restarts) server `i`; output is appended to its log file.
    pub fn spawn(&mut self, i: usize) {
        self.spawn_with(i, &[]);
    }

    /// Like [`TestCluster::spawn`], with `extra` flags after the usual ones.
    pub fn spawn_with(&mut self, i: usize, extra: &[&str]) {
        let s = &self.servers[i];
        let tls = match s.tls {
            true => {
                let (cert, key) = self.tls_files(i);
                Tls::Files { cert, key, ca: self.ca() }
            }
            false => Tls::Off,
        };
        let args = ServerArgs {
            config: self.config.clone(),
            id: s.id,
            listen: format!("127.0.0.1:{}", s.peer_port),
            http: format!("127.0.0.1:{}", s.http_port),
            peers: s.peers.clone().unwrap_or_else(|| self.peers.clone()),
            peer_http: (!self.peer_http.is_empty()).then(|| self.peer_http.clone()),
            join: s.join.clone(),
            data_dir: s.data_dir.clone(),
            heartbeat_ms: self.heartbeat_ms,
            election_timeout_ms: self.election_timeout_ms,
            cluster_id: s.cluster_id.clone(),
            protocol: s.protocol.clone(),
            tls,
            single_node: self.servers.len() == 1,
            etcd_listen: None,
        };
        let mut command = Command::new(exe());
        command.args(args.args()).envs(self.env.iter().map(|(k, v)| (k, v))).args(extra);
        self.servers[i].proc.spawn(command).expect("start tenure server");
    }

    /// Sends `sig` to server `i`.
    pub fn signal(&mut self, i: usize, sig: Signal) {
        self.servers[i].proc.signal(sig).unwrap();
    }

    /// Waits for server `i` to exit, at most `bound`.
    pub fn wait_exit(&mut self, i: usize, bound: Duration) -> ExitStatus {
        match self.servers[i].proc.wait_exit_blocking(bound) {
            Ok(status) => status,
            Err(e) => panic!("{e}\n{}", self.logs()),
        }
    }

    /// Server `i`'s process id, while it runs.
    pub fn pid(&self, i: usize) -> Option<u32> {
        self.servers[i].proc.pid()
    }

    /// Server `i`'s resident set size in KiB (`VmRSS` of `/proc/<pid>/status`).
    pub fn rss_kib(&self, i: usize) -> u64 {
        let pid = self.pid(i).unwrap_or_else(|| panic!("node {} is not running", i + 1));
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .unwrap_or_else(|e| panic!("/proc/{pid}/status: {e}"));
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("no VmRSS in /proc/{pid}/status:\n{status}"))
    }

    /// Kills server `i` with SIGKILL and reaps it.
    pub fn crash(&mut self, i: usize) {
        self.signal(i, Signal::SIGKILL);
        self.wait_exit(i, Duration::from_secs(5));
    }

    pub fn endpoint(&self, i: usize) -> String {
        let scheme = if self.servers[i].tls { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}", self.servers[i].http_port)
    }

    /// Every server's log, for failure messages.
    pub fn logs(&self) -> String {
        self.servers.iter().map(|s| s.proc.log_tail(tenure_launch::LOG_TAIL_LINES)).collect()
    }

    /// A raw connection to server `i`'s HTTPS API (TLS done, the cluster's
    /// CA trusted), for tests that must see the socket.
    pub async fn connect_https(&self, i: usize) -> HttpsStream {
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", self.servers[i].http_port))
            .await
            .expect("connect to the API");
        self.tls_connector().connect(api_name(), tcp).await.expect("a TLS handshake with the API")
    }

    /// One HTTP/1.1 connection of its own to server `i`'s API, outside the
    /// shared client's pool: a test that means "N connections" holds N of
    /// these, and what it measures is the server, not the pool's choices.
    pub async fn api_connection(&self, i: usize) -> ApiConnection {
        let stream = self.connect_https(i).await;
        let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .expect("an HTTP/1.1 handshake with the API");
        tokio::spawn(async move {
            // Ends with the connection; an error is what the next request sees.
            let _ = conn.await;
        });
        ApiConnection { send, authority: format!("127.0.0.1:{}", self.servers[i].http_port) }
    }

    /// A TLS connector that trusts the cluster's CA, for raw connections
    /// (with [`api_name`]).
    pub fn tls_connector(&self) -> tokio_rustls::TlsConnector {
        let roots = tenure_node::tls::read_roots(&self.ca()).expect("the test CA");
        let config = rustls::ClientConfig::builder_with_provider(tenure_node::tls::provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
    }

    /// The file holding [`ADMIN_TOKEN`] or [`READ_TOKEN`] ("admin" or "read").
    pub fn token_file(&self, role: &str) -> PathBuf {
        self.dir.path().join(format!("{role}.token"))
    }

    /// Sends a request with the admin token; returns the status code and the
    /// body parsed as JSON (`Value::Null` when it is not JSON), or None if the
    /// node does not answer.
    pub async fn request(
        &self,
        i: usize,
        method: Method,
        path: &str,
        body: Option<(&str, &str)>,
    ) -> Option<(u16, Value, String)> {
        let r = self.request_as(i, Some(ADMIN_TOKEN), method, path, body).await?;
        Some((r.status, r.json, r.text))
    }

    /// Sends a request with `token` as a bearer token (or none); None if the
    /// node does not answer within the harness's 500 ms.
    pub async fn request_as(
        &self,
        i: usize,
        token: Option<&str>,
        method: Method,
        path: &str,
        body: Option<(&str, &str)>,
    ) -> Option<Reply> {
        self.request_within(REQUEST_TIMEOUT, i, token, method, path, body).await
    }

    /// Like [`TestCluster::request_as`], waiting at most `bound` for the answer.
    pub async fn request_within(
        &self,
        bound: Duration,
        i: usize,
        token: Option<&str>,
        method: Method,
        path: &str,
        body: Option<(&str, &str)>,
    ) -> Option<Reply> {
        let uri = format!("{}{path}", self.endpoint(i));
        let req = api_request(Request::builder().method(method).uri(uri), token, body);
        answer_within(bound, |req| self.client.request(req), req).await.ok()
    }

    /// `GET /v1/status` of server `i`, if it answers.
    pub async fn status(&self, i: usize) -> Option<Value> {
        match self.request(i, Method::GET, "/v1/status", None).await {
            Some((200, v, _)) => Some(v),
            _ => None,
        }
    }

    /// Polls `among` until one reports itself leader of a term above
    /// `after_term`; returns (index, term, time waited). Panics after `bound`.
    pub async fn wait_leader(
        &self,
        among: &[usize],
        after_term: u64,
        since: Instant,
        bound: Duration,
    ) -> (usize, u64, Duration) {
        loop {
            for &i in among {
                if let Some(s) = self.status(i).await {
                    let term = s["term"].as_u64().unwrap();
                    if s["role"] == "leader" && term > after_term {
                        return (i, term, since.elapsed());
                    }
                }
            }
            assert!(
                since.elapsed() < bound,
                "no leader after term {after_term} among {among:?} within {bound:?}\n{}",
                self.logs()
            );
            tokio::time::sleep(POLL).await;
        }
    }

    /// Waits until every server in `among` agrees on one leader and term;
    /// returns (leader index, term).
    pub async fn wait_agreement(&self, among: &[usize], bound: Duration) -> (usize, u64) {
        let since = Instant::now();
        loop {
            let mut views = Vec::new();
            for &i in among {
                views.push(self.status(i).await);
            }
            let agreed = views.iter().all(|v| {
                v.as_ref().is_some_and(|v| {
                    !v["leader"].is_null()
                        && v["leader"] == views[0].as_ref().unwrap()["leader"]
                        && v["term"] == views[0].as_ref().unwrap()["term"]
                })
            });
            if agreed {
                let v = views[0].as_ref().unwrap();
                let leader_id = v["leader"].as_u64().unwrap();
                let leader = self.servers.iter().position(|s| s.id == leader_id).unwrap();
                // The leader itself must say so too.
                let ls = views[among.iter().position(|&i| i == leader).unwrap()].as_ref().unwrap();
                if ls["role"] == "leader" {
                    return (leader, v["term"].as_u64().unwrap());
                }
            }
            assert!(
                since.elapsed() < bound,
                "servers {among:?} did not agree on a leader within {bound:?}: {views:?}\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// A cluster of three with etcd listeners (`--etcd-listen`, heartbeat 50 ms,
/// election timeout 500 ms), and how etcdctl reaches each node: its URL and
/// its TLS flags (`--cacert`, `--cert`, `--key`: the node's certificate).
pub fn etcd_cluster() -> (TestCluster, Vec<(String, Vec<std::ffi::OsString>)>) {
    etcd_cluster_with(&[])
}

/// [`etcd_cluster`], each server also given `extra` flags.
pub fn etcd_cluster_with(extra: &[&str]) -> (TestCluster, Vec<(String, Vec<std::ffi::OsString>)>) {
    etcd_cluster_timed(50, 500, extra)
}

/// [`etcd_cluster_with`], with this heartbeat and election timeout.
pub fn etcd_cluster_timed(
    heartbeat_ms: u64,
    election_timeout_ms: u64,
    extra: &[&str],
) -> (TestCluster, Vec<(String, Vec<std::ffi::OsString>)>) {
    let mut c = TestCluster::new(3, heartbeat_ms, election_timeout_ms);
    let ports = ports_besides(&c, 3);
    let certs = c.dir.path().join("certs");
    let mut endpoints = Vec::new();
    for (i, port) in ports.iter().enumerate() {
        let listen = format!("127.0.0.1:{port}");
        let mut flags = vec!["--etcd-listen", listen.as_str()];
        flags.extend_from_slice(extra);
        c.spawn_with(i, &flags);
        let id = i + 1;
        let tls = [
            ("--cacert", "ca.pem".to_string()),
            ("--cert", format!("node-{id}.pem")),
            ("--key", format!("node-{id}-key.pem")),
        ]
        .into_iter()
        .flat_map(|(flag, file)| {
            [std::ffi::OsString::from(flag), certs.join(file).into_os_string()]
        })
        .collect();
        endpoints.push((format!("https://{listen}"), tls));
    }
    (c, endpoints)
}

/// A gRPC channel to an etcd listener at `url`, with the TLS flags of
/// [`etcd_cluster`] (none: plain, as a test etcd serves).
pub async fn etcd_channel(url: &str, tls: &[std::ffi::OsString]) -> tonic::transport::Channel {
    use tonic::transport::{Certificate, ClientTlsConfig, Identity};
    let mut endpoint = tonic::transport::Endpoint::from_shared(url.to_string()).unwrap();
    if !tls.is_empty() {
        let file = |flag: &str| {
            let at = tls.iter().position(|a| a == flag).unwrap();
            std::fs::read(&tls[at + 1]).unwrap()
        };
        let config = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(file("--cacert")))
            .identity(Identity::from_pem(file("--cert"), file("--key")))
            .domain_name("127.0.0.1");
        endpoint = endpoint.tls_config(config).unwrap();
    }
    endpoint.connect().await.expect("a gRPC connection")
}
