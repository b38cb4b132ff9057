//! Servers started in the test process with `tenure_server::server::run`, on
//! `127.0.0.1:0` listeners, and a raw HTTP/1.1 client that sees exactly what
//! a socket sees (answers, closes, timing). The raw client speaks plain HTTP,
//! so the servers of the HTTP-limit tests run without TLS (the insecure
//! mode); [`start_cluster_with`] starts them with TLS.

#![allow(dead_code)]

use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::time::{Duration, Instant};
use tenure_core::{NodeId, ProtocolKind};
use tenure_node::tls::certgen::{self, CertRequest};
use tenure_node::{NodeConfig, Security};
use tenure_server::http::{ApiAuth, ApiToken, HttpLimits, Role};
use tenure_server::server::{self, ServerConfig, ServerError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The admin token of [`test_auth`].
pub const ADMIN_TOKEN: &str = "inproc-admin-51d0c7e2a9b4";
/// A read token of [`test_auth`].
pub const READ_TOKEN: &str = "inproc-read-8e3f6a1b2c07";
/// Another read token of [`test_auth`] (a second client).
pub const OTHER_READ_TOKEN: &str = "inproc-other-2b9d4e7f1a63";
/// The write token of [`test_auth`].
pub const WRITE_TOKEN: &str = "inproc-write-6c1e9a3f70d2";

/// The API access of the test servers: an admin token, two read tokens and
/// a write token.
pub fn test_auth() -> ApiAuth {
    ApiAuth::with_tokens(vec![
        ApiToken::new("admin", Role::Admin, ADMIN_TOKEN).unwrap(),
        ApiToken::new("reader", Role::Read, READ_TOKEN).unwrap(),
        ApiToken::new("other", Role::Read, OTHER_READ_TOKEN).unwrap(),
        ApiToken::new("writer", Role::Write, WRITE_TOKEN).unwrap(),
    ])
    .unwrap()
}

/// How long a test waits for any single answer.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

/// One server running in this process.
pub struct Server {
    pub id: u64,
    pub http: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), ServerError>>>,
    /// What it runs with, for [`Server::restart`].
    config: ServerConfig,
}

impl Server {
    /// Starts a stopped server again: the same data directory, the same
    /// peer and HTTP ports (bound again).
    pub fn restart(&mut self) {
        assert!(self.task.is_none(), "server {} still runs", self.id);
        let peer = TcpListener::bind(self.config.node.listen).expect("bind the peer port again");
        let http = TcpListener::bind(self.http).expect("bind the HTTP port again");
        let (stop, stopped) = oneshot::channel::<()>();
        self.stop = Some(stop);
        self.task = Some(tokio::spawn(server::run(self.config.clone(), peer, http, async {
            let _ = stopped.await;
        })));
    }

    /// Fires the shutdown signal.
    pub fn signal_stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }

    /// Fires the shutdown signal and waits for `run` to return, at most `bound`.
    pub async fn stop(&mut self, bound: Duration) -> Result<(), ServerError> {
        self.signal_stop();
        let task = self.task.take().expect("the server runs");
        tokio::time::timeout(bound, task)
            .await
            .unwrap_or_else(|_| panic!("server {} did not stop within {bound:?}", self.id))
            .expect("the server task does not panic")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

fn bind() -> TcpListener {
    TcpListener::bind("127.0.0.1:0").expect("bind a loopback port")
}

/// Starts `n` servers forming one cluster, data directories under `dir`,
/// without TLS, admitting the tokens of [`test_auth`].
pub fn start_cluster(
    n: u64,
    heartbeat: Duration,
    election_timeout: Duration,
    limits: HttpLimits,
    dir: &Path,
) -> Vec<Server> {
    start_cluster_with(n, heartbeat, election_timeout, limits, test_auth(), dir, false)
}

/// [`start_cluster`] with the API access `api`; with `tls`, mutual TLS
/// between the servers and HTTPS for the API, with certificates made in
/// `dir/certs` (CA: `dir/certs/ca.pem`).
pub fn start_cluster_with(
    n: u64,
    heartbeat: Duration,
    election_timeout: Duration,
    limits: HttpLimits,
    api: ApiAuth,
    dir: &Path,
    tls: bool,
) -> Vec<Server> {
    let files = match tls {
        true => {
            certgen::generate(
                &dir.join("certs"),
                &CertRequest::new("in-process", (1..=n).map(NodeId)),
            )
            .expect("test certificates")
            .nodes
        }
        false => Vec::new(),
    };
    let peer_listeners: Vec<TcpListener> = (0..n).map(|_| bind()).collect();
    let peers: Vec<(NodeId, SocketAddr)> =
        (1..=n).map(NodeId).zip(peer_listeners.iter().map(|l| l.local_addr().unwrap())).collect();
    peer_listeners
        .into_iter()
        .zip(&peers)
        .map(|(peer_listener, &(id, listen))| {
            let node = NodeConfig {
                id,
                cluster_id: "in-process".into(),
                listen,
                peers: peers.clone(),
                data_dir: dir.join(format!("node-{id}")),
                heartbeat_interval: heartbeat,
                election_timeout,
                protocol: ProtocolKind::Raft,
                round_trip: None,
                security: match files.iter().find(|(i, _)| *i == id) {
                    Some((_, f)) => Security::MutualTls(f.clone()),
                    None => Security::InsecureNoTls,
                },
                single_node: n == 1,
                api_address: None,
                etcd_address: None,
                joining: false,
            };
            let http_listener = bind();
            let http = http_listener.local_addr().unwrap();
            let (stop, stopped) = oneshot::channel::<()>();
            let config = ServerConfig { http: limits, api: api.clone(), ..ServerConfig::new(node) };
            let task =
                tokio::spawn(server::run(config.clone(), peer_listener, http_listener, async {
                    let _ = stopped.await;
                }));
            Server { id: id.0, http, stop: Some(stop), task: Some(task), config }
        })
        .collect()
}

/// A one-node cluster (it elects itself) with the given HTTP limits, without TLS.
pub fn start_solo(limits: HttpLimits, dir: &Path) -> Server {
    start_solo_with(limits, test_auth(), dir)
}

/// A one-node cluster with the given HTTP limits and API access, without TLS.
pub fn start_solo_with(limits: HttpLimits, api: ApiAuth, dir: &Path) -> Server {
    let heartbeat = Duration::from_millis(20);
    start_cluster_with(1, heartbeat, heartbeat * 10, limits, api, dir, false).pop().unwrap()
}

/// An answer as read off the socket.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    /// Header lines, lower-cased names: `("allow", "GET, HEAD")`.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// A request: `GET /path` with the admin token, keep-alive.
pub fn get(path: &str) -> String {
    get_as(path, Some(ADMIN_TOKEN))
}

/// A request: `GET /path` with `token` (or none), keep-alive.
pub fn get_as(path: &str, token: Option<&str>) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: test\r\n{}\r\n", authorization(token))
}

/// The `Authorization` header line for `token`, or nothing.
pub fn authorization(token: Option<&str>) -> String {
    token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default()
}

/// Sends `request` on `conn` and reads one answer (headers and a
/// Content-Length body). `None` if the connection closed first.
pub async fn exchange<S>(conn: &mut S, request: &str) -> Option<Answer>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    conn.write_all(request.as_bytes()).await.ok()?;
    tokio::time::timeout(ANSWER_TIMEOUT, read_answer(conn)).await.expect("an answer in time")
}

/// Reads one answer off `conn`.
pub async fn read_answer<S: tokio::io::AsyncRead + Unpin>(conn: &mut S) -> Option<Answer> {
    let mut buf = Vec::new();
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let mut chunk = [0u8; 4096];
        let n = conn.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let len: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end..].to_vec();
    while body.len() < len {
        let mut chunk = [0u8; 4096];
        let n = conn.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some(Answer { status, headers, body: String::from_utf8_lossy(&body).into_owned() })
}

/// One request on a fresh connection.
pub async fn request(addr: SocketAddr, request: &str) -> Option<Answer> {
    let mut conn = TcpStream::connect(addr).await.ok()?;
    exchange(&mut conn, request).await
}

/// `method path` with `token` and `body` on a fresh connection, closed
/// after the answer.
pub async fn call_as(
    addr: SocketAddr,
    token: &str,
    method: &str,
    path: &str,
    body: &str,
) -> Answer {
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: test\r\n{}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        authorization(Some(token)),
        body.len()
    );
    request(addr, &head).await.unwrap_or_else(|| panic!("{method} {path}: no answer"))
}

/// `GET /v1/status` as JSON, if the server answers 200.
pub async fn status(addr: SocketAddr) -> Option<serde_json::Value> {
    let answer = request(addr, &get("/v1/status")).await?;
    (answer.status == 200).then(|| serde_json::from_str(&answer.body).unwrap())
}

/// Waits until the server closes `conn` (a read sees the end or a reset);
/// returns the bytes it sent before closing. Panics after `bound`.
pub async fn wait_closed(conn: &mut TcpStream, bound: Duration) -> Vec<u8> {
    let mut got = Vec::new();
    let closed = tokio::time::timeout(bound, async {
        let mut chunk = [0u8; 4096];
        loop {
            match conn.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&chunk[..n]),
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "the server kept the connection open for {bound:?}");
    got
}

/// Polls until `f` returns `Some`, at most `bound`.
pub async fn eventually<T, F, Fut>(what: &str, bound: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let since = Instant::now();
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(since.elapsed() < bound, "{what}: not within {bound:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Connects, writes `first`, then the pieces of `then` one per `every` (and
/// nothing more once they run out) until the server closes the connection;
/// returns the time from the first write to the close and what the server
/// sent. Panics if the connection is still open after `bound`.
pub async fn trickle_until_closed(
    addr: SocketAddr,
    first: &[u8],
    then: impl Iterator<Item = Vec<u8>>,
    every: Duration,
    bound: Duration,
) -> (Duration, Vec<u8>) {
    let mut conn = TcpStream::connect(addr).await.unwrap();
    let (mut rd, mut wr) = conn.split();
    let since = Instant::now();
    wr.write_all(first).await.unwrap();
    let trickle = async {
        for piece in then {
            tokio::time::sleep(every).await;
            if wr.write_all(&piece).await.is_err() {
                break; // closed: the reader sees it
            }
        }
        std::future::pending::<()>().await;
    };
    let mut got = Vec::new();
    let closed = async {
        let mut chunk = [0u8; 1024];
        while let Ok(n @ 1..) = rd.read(&mut chunk).await {
            got.extend_from_slice(&chunk[..n]);
        }
    };
    tokio::select! {
        () = trickle => unreachable!("the trickle never ends"),
        () = closed => {}
        () = tokio::time::sleep(bound) => panic!("the server kept a trickling client for {bound:?}"),
    }
    (since.elapsed(), got)
}

/// Bound on a first election of an in-process cluster, on a busy machine.
pub const AGREEMENT_BOUND: Duration = Duration::from_secs(10);

/// Waits until every server agrees on one leader; its index.
pub async fn agreement(servers: &[Server]) -> usize {
    eventually("every server agrees on one leader", AGREEMENT_BOUND, || async {
        let mut views = Vec::new();
        for s in servers {
            views.push(status(s.http).await?);
        }
        let leader = views[0]["leader"].as_u64()?;
        let agree = views.iter().all(|v| v["leader"] == leader);
        let i = servers.iter().position(|s| s.id == leader)?;
        (agree && views[i]["role"] == "leader").then_some(i)
    })
    .await
}
