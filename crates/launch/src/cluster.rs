//! A cluster of `tenure server` processes on loopback: free-picked ports,
//! a temporary directory (data directories, logs, certificates, the admin
//! token), TLS unless asked otherwise, and cleanup on drop.
//!
//! The servers admit one admin token, made at random for the cluster and
//! kept in its directory ([`TOKEN_FILE`], mode 600, named by `api.toml`,
//! which every server reads with `--config`); [`LocalCluster::client`]
//! sends it.

use crate::error::Error;
use crate::proc::{free_ports, temp_dir, Proc, LOG_TAIL_LINES};
use crate::server::{address_list, ServerArgs, Tls};
use crate::tokens::{random_secret, write_api_config, ApiToken};
use nix::sys::signal::Signal;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::time::Duration;
use tenure_api::StatusBody;

/// The file, in a cluster's directory, that holds its admin token.
pub const TOKEN_FILE: &str = "api.token";

/// How to run the servers of a [`LocalCluster`].
#[derive(Debug, Clone)]
pub struct Settings {
    /// The `tenure` executable to run (`std::env::current_exe()` for the
    /// binary itself; `env!("CARGO_BIN_EXE_tenure")` in its tests).
    pub exe: PathBuf,
    /// Number of servers.
    pub nodes: usize,
    /// `--heartbeat-ms`.
    pub heartbeat_ms: u64,
    /// `--election-timeout-ms`.
    pub election_timeout_ms: u64,
    /// Prefix of the temporary directory ("tenure-demo-").
    pub dir_prefix: &'static str,
    /// `--cluster-id`.
    pub cluster_id: &'static str,
    /// `--protocol` (`raft`, `ranked` or `paxos`).
    pub protocol: String,
    /// Mutual TLS between the servers and HTTPS for their API, with a CA and
    /// certificates made in the temporary directory; `false`: `--insecure-no-tls`.
    pub tls: bool,
}

/// One server of a [`LocalCluster`].
#[derive(Debug)]
pub struct Server {
    /// Its command line.
    pub args: ServerArgs,
    /// Port of the peer transport.
    pub peer_port: u16,
    /// Port of the HTTP API.
    pub http_port: u16,
    /// The process.
    pub proc: Proc,
}

/// Local `tenure server` processes; dropping it kills them and removes
/// their directory.
#[derive(Debug)]
pub struct LocalCluster {
    exe: PathBuf,
    /// The admin token every server accepts.
    token: String,
    /// Whether the servers run with TLS.
    tls: bool,
    /// Environment variables set for every server started from now on
    /// ([`LocalCluster::set_env`]).
    env: Vec<(String, String)>,
    /// The servers, in peer-list order (node `i + 1` at index `i`).
    pub servers: Vec<Server>,
    /// Data directories and logs. Declared last: dropped after the children are dead.
    pub dir: tempfile::TempDir,
}

impl LocalCluster {
    /// Picks ports, makes the directory, the token and the certificates;
    /// starts nothing.
    pub fn new(settings: &Settings) -> Result<Self, Error> {
        let dir = temp_dir(settings.dir_prefix)?;
        let token = random_secret();
        let admin =
            ApiToken { name: "local-admin", role: "admin", file: TOKEN_FILE, secret: &token };
        let config = write_api_config(dir.path(), "api.toml", &[admin])?;
        let ports = free_ports(2 * settings.nodes)?;
        let ids: Vec<u64> = (1..=settings.nodes as u64).collect();
        let addr = |port: u16| format!("127.0.0.1:{port}");
        let peers = address_list(ids.iter().map(|&id| (id, addr(ports[2 * id as usize - 2]))));
        let peer_http = address_list(ids.iter().map(|&id| (id, addr(ports[2 * id as usize - 1]))));
        let certs = dir.path().join("certs");
        if settings.tls {
            make_certs_for(settings, &certs, &ids)?;
        }
        let servers = ids
            .iter()
            .map(|&id| {
                let (peer_port, http_port) =
                    (ports[2 * id as usize - 2], ports[2 * id as usize - 1]);
                let tls = match settings.tls {
                    true => Tls::Files {
                        cert: certs.join(format!("node-{id}.pem")),
                        key: certs.join(format!("node-{id}-key.pem")),
                        ca: certs.join("ca.pem"),
                    },
                    false => Tls::Off,
                };
                let args = ServerArgs {
                    config: config.clone(),
                    id,
                    listen: addr(peer_port),
                    http: addr(http_port),
                    peers: peers.clone(),
                    peer_http: Some(peer_http.clone()),
                    join: None,
                    data_dir: dir.path().join(format!("node-{id}")),
                    heartbeat_ms: settings.heartbeat_ms,
                    election_timeout_ms: settings.election_timeout_ms,
                    cluster_id: settings.cluster_id.to_string(),
                    protocol: settings.protocol.clone(),
                    tls,
                    single_node: settings.nodes == 1,
                    etcd_listen: None,
                };
                let proc =
                    Proc::new(format!("node {id}"), dir.path().join(format!("node-{id}.log")));
                Server { args, peer_port, http_port, proc }
            })
            .collect();
        Ok(LocalCluster {
            exe: settings.exe.clone(),
            token,
            tls: settings.tls,
            env: Vec::new(),
            servers,
            dir,
        })
    }

    /// Has every server (started from now on) serve etcd's v3 gRPC API on
    /// a free port of its own; their URLs, in order (https with TLS: the
    /// servers then ask for a client certificate of their CA).
    pub fn serve_etcd(&mut self) -> Result<Vec<String>, Error> {
        let ports = free_ports(self.servers.len())?;
        let scheme = if self.tls { "https" } else { "http" };
        let mut urls = Vec::new();
        for (server, port) in self.servers.iter_mut().zip(ports) {
            server.args.etcd_listen = Some(format!("127.0.0.1:{port}"));
            urls.push(format!("{scheme}://127.0.0.1:{port}"));
        }
        Ok(urls)
    }

    /// The CA of the servers' certificates (None without TLS).
    pub fn ca(&self) -> Option<PathBuf> {
        self.tls.then(|| self.dir.path().join("certs/ca.pem"))
    }

    /// An API client of the servers (trusting their CA) with the cluster's admin token.
    pub fn client(&self) -> Result<tenure_client::Client, Error> {
        let ca = self.ca();
        let options =
            tenure_client::ClientOptions { cacert: ca.as_deref(), token: Some(&self.token) };
        Ok(tenure_client::Client::new(options)?)
    }

    /// The admin token every server accepts.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The file that holds the admin token.
    pub fn token_file(&self) -> PathBuf {
        self.dir.path().join(TOKEN_FILE)
    }

    /// The HTTP API of server `i` (https with TLS).
    pub fn endpoint(&self, i: usize) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}", self.servers[i].http_port)
    }

    /// Every server's HTTP API, in order.
    pub fn endpoints(&self) -> Vec<String> {
        (0..self.servers.len()).map(|i| self.endpoint(i)).collect()
    }

    /// Sets `key` to `value` in the environment of every server started
    /// from now on (a knob such as the slow-disk emulation's
    /// `TENURE_FSYNC_DELAY_MS`), replacing an earlier value of `key`.
    pub fn set_env(&mut self, key: &str, value: &str) {
        self.env.retain(|(k, _)| k != key);
        self.env.push((key.to_string(), value.to_string()));
    }

    /// Starts server `i` (again); its output goes to its log file.
    pub fn start(&mut self, i: usize) -> Result<(), Error> {
        let mut command = Command::new(&self.exe);
        command.args(self.servers[i].args.args());
        command.envs(self.env.iter().map(|(k, v)| (k, v)));
        self.servers[i].proc.spawn(command)
    }

    /// Sends `signal` to server `i`.
    pub fn signal(&mut self, i: usize, signal: Signal) -> Result<(), Error> {
        self.servers[i].proc.signal(signal)
    }

    /// Waits (bounded) for server `i` to exit.
    pub async fn wait_exit(&mut self, i: usize, timeout: Duration) -> Result<ExitStatus, Error> {
        self.servers[i].proc.wait_exit(timeout).await
    }

    /// The last lines of every server's log, for error reports.
    pub fn log_tails(&self) -> String {
        self.servers.iter().map(|s| s.proc.log_tail(LOG_TAIL_LINES)).collect()
    }
}

/// The certificates of `settings`' nodes in `dir`.
fn make_certs_for(settings: &Settings, dir: &Path, ids: &[u64]) -> Result<(), Error> {
    crate::certs::make_certs(&settings.exe, dir, ids, settings.cluster_id, None)
}

/// Statuses of the given servers (None for those that do not answer), polled concurrently.
pub async fn poll(
    client: &tenure_client::Client,
    endpoints: &[String],
    timeout: Duration,
) -> Vec<Option<StatusBody>> {
    futures_util::future::join_all(
        endpoints.iter().map(|e| async move { client.status_within(e, timeout).await.ok() }),
    )
    .await
}
