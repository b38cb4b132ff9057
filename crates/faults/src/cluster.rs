//! N `tenure server` processes, each launched with `ip netns exec` in its
//! own namespace and bound to its namespace address, plus the faults that
//! act on them. Dropping a [`Cluster`] kills every server (also on panic),
//! then removes the namespaces, the bridge and the data directories.

use crate::error::{Error, Result};
use crate::firewall;
use crate::net::Network;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tenure_launch::{address_list, random_secret, ApiToken, Proc, ServerArgs, Tls};

/// Environment variable naming the `tenure` binary to test.
pub const BIN_ENV: &str = "TENURE_BIN";
/// Environment variable naming the election protocol the servers run
/// (`raft`, `ranked` or `paxos`; default `raft`).
pub const PROTOCOL_ENV: &str = "TENURE_FAULT_PROTOCOL";
/// Environment variable that turns TLS off (`0`): by default the servers run
/// with mutual TLS and HTTPS, certificates made by `tenure cert` for the run.
pub const TLS_ENV: &str = "TENURE_FAULT_TLS";
/// The servers' cluster id.
const CLUSTER_ID: &str = "faults";

/// Whether the servers run with TLS: `$TENURE_FAULT_TLS`, default on.
pub fn tls() -> Result<bool> {
    match std::env::var(TLS_ENV).as_deref() {
        Err(_) | Ok("1") | Ok("on") => Ok(true),
        Ok("0") | Ok("off") => Ok(false),
        Ok(other) => Err(Error::Config(format!("{TLS_ENV}={other:?}: use 1 or 0"))),
    }
}

/// The election protocol under test: `$TENURE_FAULT_PROTOCOL`, else `raft`.
pub fn protocol() -> Result<String> {
    let name = std::env::var(PROTOCOL_ENV).unwrap_or_else(|_| "raft".to_string());
    match name.as_str() {
        "raft" | "ranked" | "paxos" => Ok(name),
        other => Err(Error::Config(format!(
            "{PROTOCOL_ENV}={other:?} is not a protocol: use raft, ranked or paxos"
        ))),
    }
}
/// Prefix of the temporary directory of a run (followed by the pid).
pub const TEMP_PREFIX: &str = "tenure-faults-";
/// Peer transport port inside every namespace.
pub const PEER_PORT: u16 = 7000;
/// HTTP API port inside every namespace.
pub const HTTP_PORT: u16 = 8000;
/// How long a killed server may take to be reaped.
const REAP_TIMEOUT: Duration = Duration::from_secs(5);
/// How often reaping polls.
const REAP_POLL: Duration = Duration::from_millis(5);

/// Heartbeat interval and election timeout given to every server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timings {
    /// `--heartbeat-ms`.
    pub heartbeat_ms: u64,
    /// `--election-timeout-ms`.
    pub election_timeout_ms: u64,
}

impl Timings {
    /// The election timeout as a duration.
    pub fn election_timeout(&self) -> Duration {
        Duration::from_millis(self.election_timeout_ms)
    }
}

/// Which of the spies (docs/SPIES.md) the servers run with, beyond
/// the next incarnation that every server has: who can report a leader's
/// death, and where a report goes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Spies {
    /// Only the next incarnation: servers started as every scenario but the
    /// spies' own starts them (no `--peer-http`).
    #[default]
    NextIncarnation,
    /// Every server also knows every node's HTTP API (`--peer-http`), where
    /// a supervisor or an operator sends death notices.
    PeerHttp,
    /// [`Spies::PeerHttp`], and every server runs as `tenure server
    /// --supervised`: a supervisor that runs the elector as its child and,
    /// when the child dies, sends every other node a death notice (with an
    /// `admin` token made for the run) and starts it again.
    Supervised,
}

/// Finds the `tenure` binary: `$TENURE_BIN`, else the newest of
/// `{$CARGO_TARGET_DIR,<workspace>/target}/{debug,release}/tenure`.
pub fn tenure_binary() -> Result<PathBuf> {
    if let Ok(path) = std::env::var(BIN_ENV) {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(Error::Binary(format!("{BIN_ENV}={} is not a file", path.display())))
        };
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut target_dirs = vec![workspace.join("target")];
    if let Ok(dir) = std::env::var("CARGO_TARGET_DIR") {
        target_dirs.insert(0, PathBuf::from(dir));
    }
    let candidates: Vec<PathBuf> = target_dirs
        .iter()
        .flat_map(|t| ["debug", "release"].map(|p| t.join(p).join("tenure")))
        .filter(|p| p.is_file())
        .collect();
    candidates.into_iter().max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok()).ok_or_else(
        || {
            Error::Binary(format!(
                "the `tenure` binary was not found: build it first with `cargo build -p tenure` \
                 (same CARGO_TARGET_DIR) or set {BIN_ENV}=/path/to/tenure"
            ))
        },
    )
}

/// One server: a slot with its namespace, started or not. The process is
/// behind a lock so that a cluster shared between tasks (a membership
/// scenario and the application elections that run on it) can be driven
/// through `&self`.
#[derive(Debug)]
struct Server {
    /// The node in this slot now: slot `i` starts with id `i + 1`; a node
    /// of another id may take a slot whose node was killed and wiped
    /// ([`Cluster::spawn_joining`]).
    id: AtomicU64,
    proc: Mutex<Proc>,
    paused: AtomicBool,
    /// Started with `--join` ([`Cluster::spawn_joining`]): it restarts from
    /// the members it recorded, without `--peers`.
    joined: AtomicBool,
}

impl Server {
    fn proc(&self) -> MutexGuard<'_, Proc> {
        self.proc.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn id(&self) -> u64 {
        self.id.load(Ordering::Relaxed)
    }
}

/// A node's process slot: named after it, logging to `dir/node-<id>.log`.
fn node_proc(dir: &Path, id: u64) -> Proc {
    Proc::in_parent_group(format!("node {id}"), dir.join(format!("node-{id}.log")))
}

/// The file of the `admin` token: a supervisor's death notices, a joining
/// node's request to be added, `tenure member`.
const ADMIN_TOKEN_FILE: &str = "admin.token";

/// Writes a random `read` API token to `dir/api.token` and a random `write`
/// token to `dir/kv.token` (mode 600), and the config file `dir/api.toml`
/// that names them; returns (read token, write token, config file). The
/// checker only reads, so it holds no more than the read token; the
/// key-value clients hold the write token (they cannot move leadership).
/// With `admin`, also an `admin` token in `dir/admin.token`: for the
/// servers' supervisors (death notices need it), for a node that joins
/// (it asks the leader to add it) and for `tenure member`; this process
/// only passes its file on.
fn write_tokens(dir: &Path, admin: bool) -> Result<(String, String, PathBuf)> {
    let (read, write, supervisor) = (random_secret(), random_secret(), random_secret());
    let mut tokens = vec![
        ApiToken { name: "faults-checker", role: "read", file: "api.token", secret: &read },
        ApiToken { name: "faults-kv", role: "write", file: "kv.token", secret: &write },
    ];
    if admin {
        let file = ADMIN_TOKEN_FILE;
        tokens.push(ApiToken {
            name: "faults-supervisor",
            role: "admin",
            file,
            secret: &supervisor,
        });
    }
    let config = tenure_launch::write_api_config(dir, "api.toml", &tokens)?;
    Ok((read, write, config))
}

/// A secret that `Debug` does not show.
struct Redacted(String);

impl std::fmt::Debug for Redacted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// A cluster of servers in namespaces.
#[derive(Debug)]
pub struct Cluster {
    /// Every slot: the first members, then the spare slots of nodes that
    /// may join later ([`Cluster::start_growable`]).
    servers: Vec<Server>,
    /// How many of the slots are the first members (`--peers`).
    first: usize,
    net: Network,
    timings: Timings,
    binary: PathBuf,
    peers: String,
    /// The directory of the CA and node certificates (None: no TLS).
    certs: Option<PathBuf>,
    /// The servers' config file (the API token).
    config: PathBuf,
    /// The `read` token the servers accept.
    token: Redacted,
    /// The `write` token the servers accept (key-value clients).
    kv_token: Redacted,
    /// The spies the servers run with.
    spies: Spies,
    // Last: removed after the servers are dead.
    dir: tempfile::TempDir,
}

impl Cluster {
    /// Builds the network for `n` nodes and starts every server.
    pub fn start(n: usize, timings: Timings) -> Result<Self> {
        Self::start_with_hosts(n, 0, timings)
    }

    /// As [`Cluster::start`], with `hosts` more namespaces on the same
    /// bridge where no server runs: application hosts, whose processes
    /// ([`Cluster::host_command`]) reach the servers over the network and can
    /// be cut off from them ([`Cluster::cut_host`]).
    pub fn start_with_hosts(n: usize, hosts: usize, timings: Timings) -> Result<Self> {
        Self::start_with(n, hosts, timings, Spies::default())
    }

    /// As [`Cluster::start_with_hosts`], with the servers launched with
    /// `spies`.
    pub fn start_with(n: usize, hosts: usize, timings: Timings, spies: Spies) -> Result<Self> {
        let cluster = Self::prepare(n, 0, hosts, timings, spies)?;
        for i in 0..n {
            cluster.spawn(i)?;
        }
        Ok(cluster)
    }

    /// A cluster that can grow: `first` members started with `--peers`
    /// naming them, and `spare` more slots (ids `first + 1` on, each with a
    /// namespace and address of its own, on the same bridge) where nothing
    /// runs until [`Cluster::spawn_joining`] starts a node there that joins
    /// the running cluster; then `hosts` application hosts. Every slot's
    /// API is in [`Cluster::http_addrs`] and [`Cluster::endpoints`] (a slot
    /// where nothing runs refuses connections at once), and faults that
    /// name "every peer" name the spare slots too.
    pub fn start_growable(
        first: usize,
        spare: usize,
        hosts: usize,
        timings: Timings,
    ) -> Result<Self> {
        let cluster = Self::prepare(first, spare, hosts, timings, Spies::default())?;
        for i in 0..first {
            cluster.spawn(i)?;
        }
        Ok(cluster)
    }

    /// As [`Cluster::start_with_hosts`], without starting any server: the
    /// `n` node namespaces are free for other servers (an external store's
    /// members, [`crate::stores`]), and [`Cluster::cut_host`] still cuts an
    /// application host off from all of them.
    pub fn network_only(n: usize, hosts: usize, timings: Timings) -> Result<Self> {
        Self::prepare(n, 0, hosts, timings, Spies::default())
    }

    /// The network, directory, certificates and tokens of a cluster of `n`
    /// first members and `spare` slots.
    fn prepare(
        n: usize,
        spare: usize,
        hosts: usize,
        timings: Timings,
        spies: Spies,
    ) -> Result<Self> {
        let binary = tenure_binary()?;
        let slots = n + spare;
        let net = Network::create(slots + hosts)?;
        for i in 0..slots + hosts {
            firewall::install(&net, i)?;
        }
        // Named by this process's id: the directories of runs whose
        // process is gone (a test killed by a timeout runs no Drop) are
        // removed first.
        let dir = tenure_launch::temp_dir(TEMP_PREFIX)?;
        let servers = (0..slots)
            .map(|i| Server {
                id: AtomicU64::new(i as u64 + 1),
                proc: Mutex::new(node_proc(dir.path(), i as u64 + 1)),
                paused: AtomicBool::new(false),
                joined: AtomicBool::new(false),
            })
            .collect();
        let peers = address_list(
            (0..n).map(|i| (i as u64 + 1, format!("{}:{PEER_PORT}", net.node_addr(i)))),
        );
        let certs = match tls()? {
            true => Some(make_certs(&binary, dir.path(), &net, n)?),
            false => None,
        };
        let admin = spies == Spies::Supervised || spare > 0;
        let (token, kv_token, config) = write_tokens(dir.path(), admin)?;
        let (token, kv_token) = (Redacted(token), Redacted(kv_token));
        Ok(Cluster {
            servers,
            first: n,
            net,
            timings,
            binary,
            peers,
            certs,
            config,
            token,
            kv_token,
            spies,
            dir,
        })
    }

    /// The API token (role `read`) every server accepts.
    pub fn token(&self) -> &str {
        &self.token.0
    }

    /// Number of nodes: every slot, spare slots included.
    pub fn len(&self) -> usize {
        self.servers.len()
    }

    /// The first members' indexes (those of `--peers`): every slot but the
    /// spare ones of [`Cluster::start_growable`].
    pub fn first_members(&self) -> Vec<usize> {
        (0..self.first).collect()
    }

    /// True when there is no node (never).
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// The timings every server runs with.
    pub fn timings(&self) -> Timings {
        self.timings
    }

    /// The network.
    pub fn net(&self) -> &Network {
        &self.net
    }

    /// The node id of index `i`.
    pub fn id(&self, i: usize) -> u64 {
        self.servers[i].id()
    }

    /// The index of node id `id`.
    pub fn index(&self, id: u64) -> Option<usize> {
        self.servers.iter().position(|s| s.id() == id)
    }

    /// Where node `i`'s HTTP API listens (its namespace address).
    pub fn http_addr(&self, i: usize) -> SocketAddr {
        SocketAddr::from((self.net.node_addr(i), HTTP_PORT))
    }

    /// Every node's HTTP API address.
    pub fn http_addrs(&self) -> Vec<SocketAddr> {
        (0..self.len()).map(|i| self.http_addr(i)).collect()
    }

    /// How the checker reaches the servers' API: HTTPS trusting the run's CA,
    /// or plain HTTP without TLS; either with the read token.
    pub fn api(&self) -> Result<crate::checker::Api> {
        match &self.certs {
            Some(dir) => crate::checker::Api::https(&dir.join("ca.pem"), self.token()),
            None => Ok(crate::checker::Api::http(self.token())),
        }
    }

    /// The servers' API with the `admin` token (growable and supervised
    /// clusters only): for a change of members sent by this process.
    pub fn admin_api(&self) -> Result<crate::checker::Api> {
        let file = self
            .admin_token_file()
            .ok_or_else(|| Error::Config("this cluster has no admin token".into()))?;
        let token = std::fs::read_to_string(file)?;
        let token = token.trim();
        match &self.certs {
            Some(dir) => crate::checker::Api::https(&dir.join("ca.pem"), token),
            None => Ok(crate::checker::Api::http(token)),
        }
    }

    /// How the key-value clients reach the servers' API: as [`Cluster::api`],
    /// with the `write` token.
    pub fn kv_api(&self) -> Result<crate::checker::Api> {
        match &self.certs {
            Some(dir) => crate::checker::Api::https(&dir.join("ca.pem"), &self.kv_token.0),
            None => Ok(crate::checker::Api::http(&self.kv_token.0)),
        }
    }

    /// True while server `i` runs (possibly paused).
    pub fn is_running(&self, i: usize) -> bool {
        self.servers[i].proc().is_running()
    }

    /// True while server `i` is stopped by SIGSTOP.
    pub fn is_paused(&self, i: usize) -> bool {
        self.servers[i].paused.load(Ordering::Relaxed)
    }

    /// Starts (or restarts) server `i` in its namespace; output is appended
    /// to its log file. A first member starts with `--peers`; a node that
    /// joined restarts from the members it recorded (no `--peers`, no
    /// `--join`); a spare slot that never joined is an error.
    pub fn spawn(&self, i: usize) -> Result<()> {
        let joined = self.servers[i].joined.load(Ordering::Relaxed);
        if i >= self.first && !joined {
            return Err(Error::Config(format!(
                "slot {} is a spare one: start a node there with spawn_joining",
                i + 1
            )));
        }
        let peers = if joined { String::new() } else { self.peers.clone() };
        self.launch(i, self.server_args(i, peers, None)?, &[])
    }

    /// Starts node `id`, new to the cluster, in slot `i` (a spare one, or
    /// one whose node is stopped and wiped: its namespace and address are
    /// reused, the old node's data directory is gone) with `--join`
    /// through the APIs of the nodes `via`, the run's `admin` token
    /// (`--join-token-file`) and a certificate made for it now with the
    /// run's CA (`tenure cert`, naming its namespace address), as
    /// docs/OPERATIONS.md adds a node. Later [`Cluster::spawn`]s restart it
    /// from the members it recorded. Whoever watches slot `i` must be told
    /// it holds `id` now ([`crate::checker::Checker::renamed`]).
    pub fn spawn_joining(&self, i: usize, id: u64, via: &[usize]) -> Result<()> {
        let s = &self.servers[i];
        if s.id() != id {
            if self.is_running(i) || self.data_dir(i).exists() {
                return Err(Error::Config(format!(
                    "slot {} holds node {}, running or with data: kill and wipe it first",
                    i + 1,
                    s.id()
                )));
            }
            if self.index(id).is_some() {
                return Err(Error::Config(format!("node {id} has a slot already")));
            }
            s.id.store(id, Ordering::Relaxed);
            *s.proc() = node_proc(self.dir.path(), id);
            s.joined.store(false, Ordering::Relaxed);
        }
        if let Some(certs) = &self.certs {
            if !certs.join(format!("node-{id}.pem")).exists() {
                let host = self.net.node_addr(i).to_string();
                tenure_launch::make_certs(&self.binary, certs, &[id], CLUSTER_ID, Some(&host))?;
            }
        }
        let scheme = if self.certs.is_some() { "https" } else { "http" };
        let join: Vec<String> =
            via.iter().map(|&j| format!("{scheme}://{}", self.http_addr(j))).collect();
        let args = self.server_args(i, String::new(), Some(join.join(",")))?;
        let token = self.dir.path().join(ADMIN_TOKEN_FILE);
        let extra = [OsString::from("--join-token-file"), token.into_os_string()];
        self.launch(i, args, &extra)?;
        self.servers[i].joined.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// The command line of server `i` with `peers` and `join`.
    fn server_args(&self, i: usize, peers: String, join: Option<String>) -> Result<ServerArgs> {
        let id = self.servers[i].id();
        let addr = self.net.node_addr(i);
        Ok(ServerArgs {
            config: self.config.clone(),
            id,
            listen: format!("{addr}:{PEER_PORT}"),
            http: format!("{addr}:{HTTP_PORT}"),
            peers,
            peer_http: (self.spies != Spies::NextIncarnation).then(|| self.peer_http()),
            join,
            data_dir: self.data_dir(i),
            heartbeat_ms: self.timings.heartbeat_ms,
            election_timeout_ms: self.timings.election_timeout_ms,
            cluster_id: CLUSTER_ID.to_string(),
            protocol: protocol()?,
            tls: self.tls(id),
            single_node: false,
            etcd_listen: None,
        })
    }

    /// Runs `args` and then `extra` as server `i`, in its namespace.
    fn launch(&self, i: usize, args: ServerArgs, extra: &[OsString]) -> Result<()> {
        // `ip netns exec` execs the server in place (no fork), so the child's
        // pid is the server's and signals reach it directly.
        let mut command = Command::new("ip");
        command.args(["netns", "exec", self.net.namespace(i)]).arg(&self.binary);
        command.args(args.args()).args(extra);
        if self.spies == Spies::Supervised {
            command.arg("--supervised").arg("--notify-token-file");
            command.arg(self.dir.path().join(ADMIN_TOKEN_FILE));
        }
        self.servers[i].proc().spawn(command)?;
        self.servers[i].paused.store(false, Ordering::Relaxed);
        Ok(())
    }

    /// Every node's HTTP API as `--peer-http` takes it: `ID=HOST:PORT,...`.
    fn peer_http(&self) -> String {
        address_list((0..self.len()).map(|i| (self.id(i), self.http_addr(i).to_string())))
    }

    /// The spies the servers run with.
    pub fn spies(&self) -> Spies {
        self.spies
    }

    /// The TLS files of node `id`.
    fn tls(&self, id: u64) -> Tls {
        match &self.certs {
            Some(dir) => Tls::Files {
                cert: dir.join(format!("node-{id}.pem")),
                key: dir.join(format!("node-{id}-key.pem")),
                ca: dir.join("ca.pem"),
            },
            None => Tls::Off,
        }
    }

    fn signal(&self, i: usize, sig: Signal) -> Result<()> {
        Ok(self.servers[i].proc().signal(sig)?)
    }

    /// SIGKILLs server `i` and reaps it; a supervised server's elector
    /// too, and waits for it to die.
    pub fn kill(&self, i: usize) -> Result<()> {
        let electors = match self.spies {
            Spies::Supervised => children(self.pid(i)?),
            _ => Vec::new(),
        };
        self.signal(i, Signal::SIGKILL)?;
        for &pid in &electors {
            let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
        }
        self.reap(i)?;
        for pid in electors {
            wait_until(|| !alive_unreaped(pid), &format!("node {}'s elector {pid} dead", i + 1))?;
        }
        Ok(())
    }

    /// The pid of server `i`'s process (a supervised server's supervisor).
    fn pid(&self, i: usize) -> Result<u32> {
        let pid = self.servers[i].proc().pid();
        pid.ok_or_else(|| Error::Config(format!("node {} is not running", i + 1)))
    }

    /// The pid of node `i`'s elector: the server's process, or a supervised
    /// server's one child.
    pub fn elector_pid(&self, i: usize) -> Result<u32> {
        let pid = self.pid(i)?;
        if self.spies != Spies::Supervised {
            return Ok(pid);
        }
        match children(pid)[..] {
            [elector] => Ok(elector),
            ref other => Err(Error::Config(format!(
                "node {}'s supervisor {pid} has children {other:?}, not one elector",
                i + 1
            ))),
        }
    }

    /// SIGKILLs node `i`'s elector and waits until it is reaped: by this
    /// process, or by a supervised server's supervisor (which then does
    /// what it does on a death: notices, a restart). Returns its pid.
    pub fn kill_elector(&self, i: usize) -> Result<u32> {
        let pid = self.elector_pid(i)?;
        if self.spies != Spies::Supervised {
            self.kill(i)?;
            return Ok(pid);
        }
        kill(Pid::from_raw(pid as i32), Signal::SIGKILL)
            .map_err(|e| Error::Io(std::io::Error::from_raw_os_error(e as i32)))?;
        let supervisor = self.pid(i)?;
        wait_until(
            || !children(supervisor).contains(&pid),
            &format!("node {}'s elector {pid} reaped by its supervisor", i + 1),
        )?;
        Ok(pid)
    }

    /// SIGKILLs every running server, all signals sent before any is
    /// reaped (so none outlives another by more than the signal loop), then
    /// reaps them.
    pub fn kill_all(&self) -> Result<()> {
        let running: Vec<usize> = (0..self.len()).filter(|&i| self.is_running(i)).collect();
        for &i in &running {
            self.signal(i, Signal::SIGKILL)?;
        }
        for &i in &running {
            self.reap(i)?;
        }
        Ok(())
    }

    /// Waits for killed server `i` to exit.
    fn reap(&self, i: usize) -> Result<()> {
        self.servers[i].paused.store(false, Ordering::Relaxed);
        self.servers[i].proc().wait_exit_blocking(REAP_TIMEOUT)?;
        Ok(())
    }

    /// Server `i`'s data directory (state file, log, snapshot).
    pub fn data_dir(&self, i: usize) -> PathBuf {
        self.dir.path().join(format!("node-{}", self.servers[i].id()))
    }

    /// Deletes the data directory of stopped server `i` (its state file and
    /// log); its certificate and the config stay. It starts again as a
    /// brand-new node.
    pub fn wipe(&self, i: usize) -> Result<()> {
        if self.is_running(i) {
            return Err(Error::Config(format!("node {} runs: stop it before wiping", i + 1)));
        }
        std::fs::remove_dir_all(self.data_dir(i))?;
        Ok(())
    }

    /// SIGSTOPs server `i`.
    pub fn pause(&self, i: usize) -> Result<()> {
        self.signal(i, Signal::SIGSTOP)?;
        self.servers[i].paused.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// SIGCONTs server `i`.
    pub fn resume(&self, i: usize) -> Result<()> {
        self.signal(i, Signal::SIGCONT)?;
        self.servers[i].paused.store(false, Ordering::Relaxed);
        Ok(())
    }

    fn others(&self, i: usize) -> Vec<usize> {
        (0..self.len()).filter(|&j| j != i).collect()
    }

    /// Cuts the link between `a` and `b` both ways (rules in `a`'s namespace).
    pub fn cut(&self, a: usize, b: usize) -> Result<()> {
        firewall::drop_input_from(&self.net, a, &[b])?;
        firewall::drop_output_to(&self.net, a, &[b])
    }

    /// Drops only what `from` sends to `to` (rule in `from`'s output hook).
    pub fn cut_one_way(&self, from: usize, to: usize) -> Result<()> {
        firewall::drop_output_to(&self.net, from, &[to])
    }

    /// Cuts `i` off from every peer, both ways. The checker still reaches it.
    pub fn isolate(&self, i: usize) -> Result<()> {
        let others = self.others(i);
        firewall::drop_input_from(&self.net, i, &others)?;
        firewall::drop_output_to(&self.net, i, &others)
    }

    /// Splits `group` from the rest: members still reach each other.
    pub fn partition(&self, group: &[usize]) -> Result<()> {
        let rest: Vec<usize> = (0..self.len()).filter(|j| !group.contains(j)).collect();
        for &i in group {
            firewall::drop_input_from(&self.net, i, &rest)?;
            firewall::drop_output_to(&self.net, i, &rest)?;
        }
        Ok(())
    }

    /// Node `i` loses `percent`% of its packets to and from every peer.
    pub fn lose(&self, i: usize, percent: u32) -> Result<()> {
        firewall::lose(&self.net, i, &self.others(i), percent)
    }

    /// Removes node `i`'s network faults (the rules in its namespace: those
    /// of [`Cluster::isolate`], [`Cluster::cut`] from `i`, ...), and no
    /// other's: an application host cut off at the same time stays cut off.
    pub fn heal_node(&self, i: usize) -> Result<()> {
        firewall::heal(&self.net, i)
    }

    /// Removes every network fault (of the application hosts too).
    pub fn heal(&self) -> Result<()> {
        for i in 0..self.net.len() {
            firewall::heal(&self.net, i)?;
        }
        Ok(())
    }

    /// The namespace index of application host `h`.
    fn host_index(&self, h: usize) -> usize {
        assert!(self.len() + h < self.net.len(), "application host {h} was not created");
        self.len() + h
    }

    /// A command that runs `program` in application host `h`'s namespace
    /// (`ip netns exec` execs in place: the child's pid is the program's).
    pub fn host_command(&self, h: usize, program: &Path) -> Command {
        let mut command = Command::new("ip");
        command.args(["netns", "exec", self.net.namespace(self.host_index(h))]).arg(program);
        command
    }

    /// Application host `h`'s namespace.
    pub fn host_namespace(&self, h: usize) -> &str {
        self.net.namespace(self.host_index(h))
    }

    /// Cuts application host `h` off from every server, both ways; it still
    /// reaches the root namespace (the bridge's host address).
    pub fn cut_host(&self, h: usize) -> Result<()> {
        let (i, servers): (usize, Vec<usize>) = (self.host_index(h), (0..self.len()).collect());
        firewall::drop_input_from(&self.net, i, &servers)?;
        firewall::drop_output_to(&self.net, i, &servers)
    }

    /// Removes application host `h`'s network faults.
    pub fn heal_host(&self, h: usize) -> Result<()> {
        firewall::heal(&self.net, self.host_index(h))
    }

    /// The `tenure` binary the servers run.
    pub fn binary(&self) -> &Path {
        &self.binary
    }

    /// Every server's API endpoint as a CLI's `--endpoints` takes it.
    pub fn endpoints(&self) -> String {
        self.endpoints_of(&(0..self.len()).collect::<Vec<_>>())
    }

    /// The run's CA certificate, when the servers run with TLS.
    pub fn ca_file(&self) -> Option<PathBuf> {
        self.certs.as_ref().map(|d| d.join("ca.pem"))
    }

    /// The file holding the `write` token (mode 600), for a CLI's `--token-file`.
    pub fn write_token_file(&self) -> PathBuf {
        self.dir.path().join("kv.token")
    }

    /// The file holding the `admin` token (mode 600), for `tenure member
    /// --token-file`; made for supervised and growable clusters only.
    pub fn admin_token_file(&self) -> Option<PathBuf> {
        let file = self.dir.path().join(ADMIN_TOKEN_FILE);
        file.is_file().then_some(file)
    }

    /// The API endpoints of the nodes `among`, comma-separated, as a CLI's
    /// `--endpoints` takes them.
    pub fn endpoints_of(&self, among: &[usize]) -> String {
        let scheme = if self.certs.is_some() { "https" } else { "http" };
        let urls: Vec<String> =
            among.iter().map(|&i| format!("{scheme}://{}", self.http_addr(i))).collect();
        urls.join(",")
    }

    /// Node `i`'s peer address (`--listen`), as the members dial it.
    pub fn peer_addr(&self, i: usize) -> SocketAddr {
        SocketAddr::from((self.net.node_addr(i), PEER_PORT))
    }

    /// The last lines of the log of every server that was ever started,
    /// for failure reports.
    pub fn logs(&self) -> String {
        let started = self.servers.iter().map(|s| s.proc()).filter(|p| p.log.exists());
        started.map(|p| p.log_tail(tenure_launch::LOG_TAIL_LINES)).collect()
    }

    /// The whole log of node `i`.
    pub fn log(&self, i: usize) -> String {
        self.servers[i].proc().log_text()
    }

    /// The run's temporary directory (data directories and logs).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

/// The children of process `pid`, forked by any of its threads (from
/// `/proc/<pid>/task/<tid>/children`); none if it is gone.
fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Vec::new() };
    let lists = tasks.flatten().map(|t| std::fs::read_to_string(t.path().join("children")));
    let mut pids: Vec<u32> = lists
        .flat_map(|l| {
            let l = l.unwrap_or_default();
            l.split_whitespace().filter_map(|p| p.parse().ok()).collect::<Vec<u32>>()
        })
        .collect();
    pids.sort_unstable();
    pids.dedup();
    pids
}

/// True while process `pid` runs or is stopped: it exists and is not a
/// zombie (dead, waiting for a parent that may never reap it).
fn alive_unreaped(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
    // `pid (comm) S ...`: the state follows the last parenthesis.
    let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next());
    !matches!(state, None | Some('Z') | Some('X'))
}

/// Polls `done` until it holds, at most [`REAP_TIMEOUT`]; `what` names it
/// in the error.
fn wait_until(mut done: impl FnMut() -> bool, what: &str) -> Result<()> {
    let deadline = Instant::now() + REAP_TIMEOUT;
    while !done() {
        if Instant::now() > deadline {
            return Err(Error::Config(format!("{what}: not within {REAP_TIMEOUT:?}")));
        }
        std::thread::sleep(REAP_POLL);
    }
    Ok(())
}

/// Makes the run's CA and node certificates with `tenure cert` in
/// `dir/certs`; each names every node's namespace address, where the checker
/// reaches its API.
fn make_certs(binary: &Path, dir: &Path, net: &Network, n: usize) -> Result<PathBuf> {
    let certs = dir.join("certs");
    let ids: Vec<u64> = (1..=n as u64).collect();
    let hosts = (0..n).map(|i| net.node_addr(i).to_string()).collect::<Vec<_>>().join(",");
    tenure_launch::make_certs(binary, &certs, &ids, CLUSTER_ID, Some(&hosts))?;
    Ok(certs)
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // Every server first (a stopped one too: `Proc` sends SIGCONT, then
        // SIGKILL, and reaps it); then `net` (namespaces, bridge, rules) and
        // `dir` drop, in field order.
        for s in &self.servers {
            s.proc().kill();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_is_listed_until_reaped_and_is_dead_once_killed() {
        let mut sleeper = Command::new("sleep").arg("30").spawn().expect("sleep runs");
        let pid = sleeper.id();
        assert!(children(std::process::id()).contains(&pid));
        assert!(alive_unreaped(pid));
        kill(Pid::from_raw(pid as i32), Signal::SIGKILL).expect("a signal to our child");
        wait_until(|| !alive_unreaped(pid), "the killed child dead").expect("it dies");
        assert!(children(std::process::id()).contains(&pid), "a zombie is still a child");
        sleeper.wait().expect("reaped");
        assert!(!children(std::process::id()).contains(&pid));
        assert!(!alive_unreaped(pid));
    }
}
