//! Local clusters of child processes on loopback, shared by `tenure demo` and
//! `tenure bench`: free-picked ports, temporary data directories, a CA and
//! node certificates made for the run (TLS unless asked otherwise), log files,
//! signals, bounded waits, and cleanup on drop.
//!
//! Every child runs in its own process group, so a Ctrl-C in the terminal
//! reaches only the parent, which then stops the children itself. A [`Proc`]
//! kills its child when dropped, and a [`TenureCluster`] removes its temporary
//! directory after its processes are dead: on success, on error, on Ctrl-C and
//! on panic.
//!
//! The servers admit one admin token, made at random for the cluster and
//! kept in its temporary directory (`api.token`, mode 600, named by
//! `api.toml`, which every server reads with `--config`); [`TenureCluster::client`]
//! sends it.

use crate::api::StatusBody;
use crate::rest::{Client, ClientOptions};
use anyhow::{anyhow, bail, Context};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use rand_core::{OsRng, RngCore};
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use tenure_core::{NodeId, ProtocolKind};
use tenure_node::tls::certgen::{self, CertRequest};
use tenure_node::TlsFiles;
use tokio::time::{sleep, Instant};

/// Lines of each process's log shown when a run fails.
pub const LOG_TAIL_LINES: usize = 15;
/// How often a process is checked while waiting for it to exit.
const EXIT_POLL: Duration = Duration::from_millis(1);

/// One child process with its log file; killed (and reaped) when dropped.
pub struct Proc {
    /// Name used in messages ("node 2", "etcd n2").
    pub name: String,
    /// The file its stdout and stderr are appended to.
    pub log: PathBuf,
    child: Option<Child>,
}

impl Proc {
    /// A process slot that is not running yet.
    pub fn new(name: String, log: PathBuf) -> Self {
        Proc { name, log, child: None }
    }

    /// Starts `command` in this slot, output appended to the log, stdin null,
    /// in its own process group.
    pub fn spawn(&mut self, mut command: Command) -> anyhow::Result<()> {
        if self.child.is_some() {
            bail!("{} is already running", self.name);
        }
        let log = File::options()
            .create(true)
            .append(true)
            .open(&self.log)
            .with_context(|| format!("cannot open {}", self.log.display()))?;
        let child = command
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            // Own process group: the terminal's Ctrl-C goes to the parent only,
            // which then stops the children itself.
            .process_group(0)
            .spawn()
            .with_context(|| format!("cannot start {}", self.name))?;
        self.child = Some(child);
        Ok(())
    }

    /// The child's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Sends `signal` to the child.
    pub fn signal(&self, signal: Signal) -> anyhow::Result<()> {
        let child = self.child.as_ref().ok_or_else(|| anyhow!("{} is not running", self.name))?;
        let pid = Pid::from_raw(i32::try_from(child.id())?);
        kill(pid, signal).with_context(|| format!("cannot send {signal} to {}", self.name))
    }

    /// Waits (bounded) for the child to exit; returns its exit status text.
    pub async fn wait_exit(&mut self, timeout: Duration) -> anyhow::Result<String> {
        let deadline = Instant::now() + timeout;
        let name = &self.name;
        let child = self.child.as_mut().ok_or_else(|| anyhow!("{name} is not running"))?;
        loop {
            if let Some(status) = child.try_wait()? {
                self.child = None;
                return Ok(status.to_string());
            }
            if Instant::now() > deadline {
                bail!("{name} did not exit within {timeout:?}");
            }
            sleep(EXIT_POLL).await;
        }
    }

    /// The last `lines` lines of the log, headed by the name and path.
    pub fn log_tail(&self, lines: usize) -> String {
        let Ok(f) = File::open(&self.log) else { return String::new() };
        let all: Vec<String> = BufReader::new(f).lines().map_while(Result::ok).collect();
        let mut out = format!("--- {} ({}) ---\n", self.name, self.log.display());
        for l in &all[all.len().saturating_sub(lines)..] {
            out.push_str(l);
            out.push('\n');
        }
        out
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Distinct free loopback ports: all listeners are held until every port is picked.
pub fn free_ports(n: usize) -> anyhow::Result<Vec<u16>> {
    let listeners = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<Vec<_>, _>>()
        .context("cannot find free loopback ports")?;
    listeners.iter().map(|l| Ok(l.local_addr()?.port())).collect()
}

/// A temporary directory named `prefix` + random suffix.
pub fn temp_dir(prefix: &str) -> anyhow::Result<tempfile::TempDir> {
    tempfile::Builder::new().prefix(prefix).tempdir().context("cannot create a temporary directory")
}

/// One `tenure server` of a local cluster.
pub struct TenureServer {
    /// Node id (1-based, in peer-list order).
    pub id: u64,
    /// Port of the peer transport.
    pub peer_port: u16,
    /// Port of the HTTP API.
    pub http_port: u16,
    /// The node's data directory.
    pub data_dir: PathBuf,
    /// The process.
    pub proc: Proc,
}

/// How to run the servers of a [`TenureCluster`].
pub struct TenureSettings {
    /// Number of servers.
    pub nodes: usize,
    /// Heartbeat interval passed to the servers, in milliseconds.
    pub heartbeat_ms: u64,
    /// Election timeout passed to the servers, in milliseconds.
    pub election_timeout_ms: u64,
    /// Prefix of the temporary directory ("tenure-demo-").
    pub dir_prefix: &'static str,
    /// `--cluster-id` of the servers.
    pub cluster_id: &'static str,
    /// `--protocol` of the servers.
    pub protocol: ProtocolKind,
    /// Mutual TLS between the servers and HTTPS for their API, with a CA and
    /// certificates made in the temporary directory; `false`: `--insecure-no-tls`.
    pub tls: bool,
}

/// The file, in a cluster's directory, that holds its admin token.
pub const TOKEN_FILE: &str = "api.token";

/// A random admin token (32 bytes, hex) in `dir/api.token` (mode 600) and
/// the config file `dir/api.toml` that names it; returns the token and the
/// config file's path.
pub fn write_admin_token(dir: &Path) -> anyhow::Result<(String, PathBuf)> {
    let mut secret = [0u8; 32];
    OsRng.fill_bytes(&mut secret);
    let token: String = secret.iter().map(|b| format!("{b:02x}")).collect();
    let token_file = dir.join(TOKEN_FILE);
    File::options()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&token_file)
        .and_then(|mut f| f.write_all(token.as_bytes()))
        .with_context(|| format!("cannot write {}", token_file.display()))?;
    let config = dir.join("api.toml");
    let text = format!(
        "[[api_tokens]]\nname = \"local-admin\"\nrole = \"admin\"\ntoken_file = \"{TOKEN_FILE}\"\n"
    );
    std::fs::write(&config, text).with_context(|| format!("cannot write {}", config.display()))?;
    Ok((token, config))
}

/// Local `tenure server` processes (this executable); dropping it kills them
/// and removes their directories.
pub struct TenureCluster {
    exe: PathBuf,
    /// The servers' config file: the API token.
    config: PathBuf,
    /// The admin token every server accepts.
    token: String,
    peers: String,
    /// Every server's HTTP API as `ID=127.0.0.1:PORT,...` (`--peer-http`).
    peer_http: String,
    heartbeat_ms: u64,
    election_timeout_ms: u64,
    cluster_id: &'static str,
    protocol: ProtocolKind,
    /// Each server's TLS files, by index (empty without TLS).
    tls: Vec<TlsFiles>,
    /// The servers, in peer-list order.
    pub servers: Vec<TenureServer>,
    /// Data directories and logs. Declared last: dropped after the children are dead.
    pub dir: tempfile::TempDir,
}

impl TenureCluster {
    /// Picks ports and directories; starts nothing.
    pub fn new(settings: &TenureSettings) -> anyhow::Result<Self> {
        let exe = std::env::current_exe().context("cannot find the tenure executable")?;
        let dir = temp_dir(settings.dir_prefix)?;
        let (token, config) = write_admin_token(dir.path())?;
        let ports = free_ports(2 * settings.nodes)?;
        let servers: Vec<TenureServer> = (0..settings.nodes)
            .map(|i| {
                let id = i as u64 + 1;
                TenureServer {
                    id,
                    peer_port: ports[2 * i],
                    http_port: ports[2 * i + 1],
                    data_dir: dir.path().join(format!("node-{id}")),
                    proc: Proc::new(
                        format!("node {id}"),
                        dir.path().join(format!("node-{id}.log")),
                    ),
                }
            })
            .collect();
        let peers = servers
            .iter()
            .map(|s| format!("{}=127.0.0.1:{}", s.id, s.peer_port))
            .collect::<Vec<_>>()
            .join(",");
        let peer_http = servers
            .iter()
            .map(|s| format!("{}=127.0.0.1:{}", s.id, s.http_port))
            .collect::<Vec<_>>()
            .join(",");
        let tls = match settings.tls {
            true => {
                let ids = servers.iter().map(|s| NodeId(s.id));
                let request = CertRequest::new(settings.cluster_id, ids);
                let made = certgen::generate(&dir.path().join("certs"), &request)
                    .context("cannot make the cluster's certificates")?;
                made.nodes.into_iter().map(|(_, files)| files).collect()
            }
            false => Vec::new(),
        };
        Ok(TenureCluster {
            exe,
            config,
            token,
            peers,
            peer_http,
            heartbeat_ms: settings.heartbeat_ms,
            election_timeout_ms: settings.election_timeout_ms,
            cluster_id: settings.cluster_id,
            protocol: settings.protocol,
            tls,
            servers,
            dir,
        })
    }

    /// The CA of the servers' certificates (None without TLS).
    pub fn ca(&self) -> Option<&Path> {
        self.tls.first().map(|f| f.ca.as_path())
    }

    /// An API client of the servers (trusting their CA) with the cluster's admin token.
    pub fn client(&self) -> anyhow::Result<Client> {
        Client::new(ClientOptions { cacert: self.ca(), token: Some(&self.token) })
    }

    /// The admin token every server accepts.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The HTTP API of server `i` (https with TLS).
    pub fn endpoint(&self, i: usize) -> String {
        let scheme = if self.tls.is_empty() { "http" } else { "https" };
        format!("{scheme}://127.0.0.1:{}", self.servers[i].http_port)
    }

    /// Every server's HTTP API, in order.
    pub fn endpoints(&self) -> Vec<String> {
        (0..self.servers.len()).map(|i| self.endpoint(i)).collect()
    }

    /// Starts server `i` (again); its output goes to its log file.
    pub fn start(&mut self, i: usize) -> anyhow::Result<()> {
        let s = &self.servers[i];
        let mut command = Command::new(&self.exe);
        command
            .arg("server")
            .arg("--config")
            .arg(&self.config)
            .args(["--id", &s.id.to_string()])
            .args(["--listen", &format!("127.0.0.1:{}", s.peer_port)])
            .args(["--http", &format!("127.0.0.1:{}", s.http_port)])
            .args(["--peers", &self.peers])
            .args(["--peer-http", &self.peer_http])
            .arg("--data-dir")
            .arg(&s.data_dir)
            .args(["--heartbeat-ms", &self.heartbeat_ms.to_string()])
            .args(["--election-timeout-ms", &self.election_timeout_ms.to_string()])
            .args(["--cluster-id", self.cluster_id])
            .args(["--protocol", self.protocol.as_str()]);
        if self.servers.len() == 1 {
            // A one-node cluster, asked for: its own majority.
            command.arg("--single-node");
        }
        match self.tls.get(i) {
            Some(files) => {
                command.arg("--tls-cert").arg(&files.cert);
                command.arg("--tls-key").arg(&files.key);
                command.arg("--tls-ca").arg(&files.ca);
            }
            None => {
                command.arg("--insecure-no-tls");
            }
        }
        self.servers[i].proc.spawn(command)
    }

    /// Sends `signal` to server `i`.
    pub fn signal(&mut self, i: usize, signal: Signal) -> anyhow::Result<()> {
        self.servers[i].proc.signal(signal)
    }

    /// Waits (bounded) for server `i` to exit; returns its exit status text.
    pub async fn wait_exit(&mut self, i: usize, timeout: Duration) -> anyhow::Result<String> {
        self.servers[i].proc.wait_exit(timeout).await
    }

    /// The last lines of every server's log, for error reports.
    pub fn log_tails(&self) -> String {
        self.servers.iter().map(|s| s.proc.log_tail(LOG_TAIL_LINES)).collect()
    }
}

/// Statuses of the given servers (None for those that do not answer), polled concurrently.
pub async fn poll(
    client: &Client,
    endpoints: &[String],
    timeout: Duration,
) -> Vec<Option<StatusBody>> {
    futures_util::future::join_all(
        endpoints.iter().map(|e| async move { client.status_within(e, timeout).await.ok() }),
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_ports_are_distinct() {
        let mut ports = free_ports(8).unwrap();
        ports.sort_unstable();
        ports.dedup();
        assert_eq!(ports.len(), 8);
    }

    #[tokio::test]
    async fn a_proc_is_killed_on_drop_and_reports_its_exit() {
        let dir = temp_dir("tenure-proc-test-").unwrap();
        let mut p = Proc::new("sleeper".into(), dir.path().join("sleeper.log"));
        let mut c = Command::new("sleep");
        c.arg("30");
        p.spawn(c).unwrap();
        assert!(p.spawn(Command::new("true")).is_err(), "a running slot cannot be reused");
        p.signal(Signal::SIGTERM).unwrap();
        let status = p.wait_exit(Duration::from_secs(5)).await.unwrap();
        assert!(status.contains("SIGTERM") || status.contains("15"), "{status}");
        assert!(p.child.is_none(), "an exited child leaves its slot free");

        let mut c = Command::new("sleep");
        c.arg("30");
        p.spawn(c).unwrap();
        let pid = Pid::from_raw(p.child.as_ref().unwrap().id() as i32);
        drop(p);
        // The child is reaped on drop, so its pid no longer exists.
        assert!(kill(pid, None).is_err());
    }
}
