//! A cluster of real `tenure server` processes on loopback, driven from the
//! outside through the HTTP API. Dropping a [`TestCluster`] kills every child
//! (also when a test panics) and removes the data directories.

#![allow(dead_code)]

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Method, Request};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::Value;
use std::fs::File;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

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

/// The `tenure` binary under test.
pub fn exe() -> &'static str {
    env!("CARGO_BIN_EXE_tenure")
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
    child: Option<Child>,
}

/// N servers with free ports and temporary data directories.
pub struct TestCluster {
    pub servers: Vec<TestServer>,
    pub peers: String,
    pub heartbeat_ms: u64,
    pub election_timeout_ms: u64,
    client: Client<HttpConnector, Full<Bytes>>,
    // Last: removed after the children are dead.
    pub dir: tempfile::TempDir,
}

/// Distinct free loopback ports (all listeners held until every port is picked).
pub fn free_ports(n: usize) -> Vec<u16> {
    let listeners: Vec<_> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port"))
        .collect();
    listeners.iter().map(|l| l.local_addr().unwrap().port()).collect()
}

impl TestCluster {
    /// Prepares `n` servers without starting them.
    pub fn new(n: usize, heartbeat_ms: u64, election_timeout_ms: u64) -> Self {
        let dir = tempfile::Builder::new().prefix("tenure-test-").tempdir().unwrap();
        let ports = free_ports(2 * n);
        let servers: Vec<TestServer> = (0..n)
            .map(|i| {
                let id = i as u64 + 1;
                TestServer {
                    id,
                    peer_port: ports[2 * i],
                    http_port: ports[2 * i + 1],
                    data_dir: dir.path().join(format!("node-{id}")),
                    log: dir.path().join(format!("node-{id}.log")),
                    cluster_id: "test".to_string(),
                    protocol: "raft".to_string(),
                    child: None,
                }
            })
            .collect();
        let peers = servers
            .iter()
            .map(|s| format!("{}=127.0.0.1:{}", s.id, s.peer_port))
            .collect::<Vec<_>>()
            .join(",");
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        TestCluster {
            servers,
            peers,
            heartbeat_ms,
            election_timeout_ms,
            client: Client::builder(TokioExecutor::new()).build(connector),
            dir,
        }
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
        let log = File::options().create(true).append(true).open(&s.log).unwrap();
        let child = Command::new(exe())
            .arg("server")
            .args(["--id", &s.id.to_string()])
            .args(["--listen", &format!("127.0.0.1:{}", s.peer_port)])
            .args(["--http", &format!("127.0.0.1:{}", s.http_port)])
            .args(["--peers", &self.peers])
            .arg("--data-dir")
            .arg(&s.data_dir)
            .args(["--heartbeat-ms", &self.heartbeat_ms.to_string()])
            .args(["--election-timeout-ms", &self.election_timeout_ms.to_string()])
            .args(["--cluster-id", &s.cluster_id])
            .args(["--protocol", &s.protocol])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start tenure server");
        self.servers[i].child = Some(child);
    }

    /// Sends `sig` to server `i`.
    pub fn signal(&mut self, i: usize, sig: Signal) {
        let child = self.servers[i].child.as_ref().expect("server is running");
        kill(Pid::from_raw(child.id() as i32), sig).unwrap();
    }

    /// Waits for server `i` to exit, at most `bound`.
    pub fn wait_exit(&mut self, i: usize, bound: Duration) -> ExitStatus {
        let deadline = Instant::now() + bound;
        let child = self.servers[i].child.as_mut().expect("server is running");
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                self.servers[i].child = None;
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "node {} did not exit within {bound:?}\n{}",
                i + 1,
                self.logs()
            );
            std::thread::sleep(POLL);
        }
    }

    /// Kills server `i` with SIGKILL and reaps it.
    pub fn crash(&mut self, i: usize) {
        self.signal(i, Signal::SIGKILL);
        self.wait_exit(i, Duration::from_secs(5));
    }

    pub fn endpoint(&self, i: usize) -> String {
        format!("http://127.0.0.1:{}", self.servers[i].http_port)
    }

    /// Every server's log, for failure messages.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        for s in &self.servers {
            let text = std::fs::read_to_string(&s.log).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            out.push_str(&format!("--- node {} ---\n", s.id));
            for l in &lines[lines.len().saturating_sub(30)..] {
                out.push_str(l);
                out.push('\n');
            }
        }
        out
    }

    /// Sends a request; returns the status code and the body parsed as JSON
    /// (`Value::Null` when it is not JSON), or None if the node does not answer.
    pub async fn request(
        &self,
        i: usize,
        method: Method,
        path: &str,
        body: Option<(&str, &str)>,
    ) -> Option<(u16, Value, String)> {
        let mut req = Request::builder().method(method).uri(format!("{}{path}", self.endpoint(i)));
        let mut payload = Bytes::new();
        if let Some((content_type, text)) = body {
            req = req.header("content-type", content_type);
            payload = Bytes::from(text.to_string());
        }
        let req = req.body(Full::new(payload)).unwrap();
        let fut = async {
            let resp = self.client.request(req).await.ok()?;
            let status = resp.status().as_u16();
            let bytes = resp.into_body().collect().await.ok()?.to_bytes();
            let text = String::from_utf8_lossy(&bytes).into_owned();
            let json = serde_json::from_str(&text).unwrap_or(Value::Null);
            Some((status, json, text))
        };
        tokio::time::timeout(REQUEST_TIMEOUT, fut).await.ok()?
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

impl Drop for TestCluster {
    fn drop(&mut self) {
        for s in &mut self.servers {
            if let Some(mut child) = s.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}
