//! The systems under test behind one interface, so the trials treat tenure and
//! etcd exactly alike: the same stability check, the same kill, the same
//! leader detection.

use super::fetch::{metric_value, Fetch};
use anyhow::{bail, Context};
use futures_util::future::join_all;
use hyper::Method;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tenure_client::http::{error_message, REQUEST_TIMEOUT};
use tenure_client::{Client, ClientOptions};
use tenure_launch::{address_list, LocalCluster, Proc, Settings};

/// Timeout of one `/metrics` scrape.
const METRICS_TIMEOUT: Duration = Duration::from_millis(500);
/// Timeout of the status read that finds a node's incarnation.
const STATUS_TIMEOUT: Duration = Duration::from_millis(500);

/// One node's view of leadership, in node indexes (0-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct View {
    /// The leader this node knows of.
    pub leader: Option<usize>,
    /// The node's term.
    pub term: u64,
    /// Whether this node says it is the leader.
    pub is_leader: bool,
}

/// Election rounds counted by a node (tenure's `/metrics`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rounds {
    /// `tenure_pre_votes_started_total`.
    pub pre_votes: u64,
    /// `tenure_elections_started_total`.
    pub elections: u64,
}

impl std::ops::Add for Rounds {
    type Output = Rounds;
    fn add(self, o: Rounds) -> Rounds {
        Rounds { pre_votes: self.pre_votes + o.pre_votes, elections: self.elections + o.elections }
    }
}

/// A local cluster the benchmark can observe and crash.
pub trait System {
    /// Short name for reports ("tenure", "etcd").
    fn name(&self) -> &'static str;
    /// Number of nodes.
    fn len(&self) -> usize;
    /// Node `i`'s view, or None when it does not answer within `timeout`.
    async fn view(&self, i: usize, timeout: Duration) -> Option<View>;
    /// Rounds node `i` has started since it started, when the system counts them.
    async fn rounds(&self, i: usize) -> Option<Rounds>;
    /// Starts node `i` (again, with its data).
    fn start(&mut self, i: usize) -> anyhow::Result<()>;
    /// Node `i`'s incarnation, when the system has death notices and the
    /// node answers.
    async fn incarnation(&self, _i: usize) -> Option<u64> {
        None
    }
    /// Tells every one of `to` that `incarnation` of node `dead` died.
    async fn report_dead(
        &self,
        _dead: usize,
        _incarnation: u64,
        _to: &[usize],
    ) -> anyhow::Result<()> {
        Ok(())
    }
    /// Node `i`'s process.
    fn proc(&mut self, i: usize) -> &mut Proc;
    /// The last lines of every node's log.
    fn log_tails(&self) -> String;
    /// Every node's log file.
    fn log_files(&self) -> Vec<PathBuf>;
}

/// Copies every log of `sys` into `dir` as `<system>-<file name>`.
pub fn keep_logs<S: System>(sys: &S, dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for log in sys.log_files() {
        let name = log.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let to = dir.join(format!("{}-{name}", sys.name()));
        std::fs::copy(&log, &to)
            .with_context(|| format!("cannot copy {} to {}", log.display(), to.display()))?;
    }
    Ok(())
}

/// A tenure cluster observed through `/v1/status` and `/metrics`.
pub struct Tenure {
    cluster: LocalCluster,
    endpoints: Vec<String>,
    /// The nodes' etcd gRPC URLs, when they serve etcd's API.
    etcd: Vec<String>,
    client: Client,
    fetch: Fetch,
}

/// What a [`Tenure`] cluster starts with beyond its nodes and timings.
#[derive(Debug, Default, Clone, Copy)]
struct Extras {
    /// One more node prepared, not started ([`Tenure::start_with_spare`]).
    spare: bool,
    /// Every node serves etcd's gRPC API ([`Tenure::start_serving_etcd`]).
    etcd: bool,
    /// Milliseconds added to each sync of the servers' logs (None: the
    /// bench's own environment decides).
    sync_delay_ms: Option<u64>,
}

impl Tenure {
    /// Starts `nodes` servers with the given timings (with mutual TLS and
    /// HTTPS unless `tls` is false).
    pub fn start_all(
        nodes: usize,
        heartbeat_ms: u64,
        election_timeout_ms: u64,
        protocol: tenure_core::ProtocolKind,
        tls: bool,
    ) -> anyhow::Result<Self> {
        Tenure::launch(nodes, Extras::default(), heartbeat_ms, election_timeout_ms, protocol, tls)
    }

    /// [`Tenure::start_all`], every node also serving etcd's v3 gRPC API
    /// (`--etcd-listen`, [`Tenure::etcd_urls`]).
    pub fn start_serving_etcd(
        nodes: usize,
        heartbeat_ms: u64,
        election_timeout_ms: u64,
        protocol: tenure_core::ProtocolKind,
        tls: bool,
    ) -> anyhow::Result<Self> {
        let extras = Extras { etcd: true, ..Extras::default() };
        Tenure::launch(nodes, extras, heartbeat_ms, election_timeout_ms, protocol, tls)
    }

    /// Starts `nodes` servers as [`Tenure::start_all`] does, and prepares
    /// node `nodes + 1` (index `nodes`: ports, certificates, a data
    /// directory) without starting it or naming it to the others. Started
    /// ([`System::start`]), it joins the running cluster: `--join` through
    /// the first `nodes` servers' APIs, with the cluster's admin token.
    pub fn start_with_spare(
        nodes: usize,
        heartbeat_ms: u64,
        election_timeout_ms: u64,
        protocol: tenure_core::ProtocolKind,
        tls: bool,
    ) -> anyhow::Result<Self> {
        let extras = Extras { spare: true, ..Extras::default() };
        Tenure::launch(nodes, extras, heartbeat_ms, election_timeout_ms, protocol, tls)
    }

    /// [`Tenure::start_all`], every server adding `delay_ms` to each sync
    /// of its log (`TENURE_FSYNC_DELAY_MS`: a slow disk).
    pub fn start_with_sync_delay(
        nodes: usize,
        heartbeat_ms: u64,
        election_timeout_ms: u64,
        protocol: tenure_core::ProtocolKind,
        tls: bool,
        delay_ms: u64,
    ) -> anyhow::Result<Self> {
        let extras = Extras { sync_delay_ms: Some(delay_ms), ..Extras::default() };
        Tenure::launch(nodes, extras, heartbeat_ms, election_timeout_ms, protocol, tls)
    }

    fn launch(
        nodes: usize,
        extras: Extras,
        heartbeat_ms: u64,
        election_timeout_ms: u64,
        protocol: tenure_core::ProtocolKind,
        tls: bool,
    ) -> anyhow::Result<Self> {
        let exe = std::env::current_exe().context("cannot find the tenure executable")?;
        let mut cluster = LocalCluster::new(&Settings {
            exe,
            nodes: nodes + usize::from(extras.spare),
            heartbeat_ms,
            election_timeout_ms,
            dir_prefix: "tenure-bench-",
            cluster_id: "tenure-bench",
            protocol: protocol.as_str().to_string(),
            tls,
        })?;
        if extras.spare {
            prepare_joiners(&mut cluster, nodes)?;
        }
        if let Some(ms) = extras.sync_delay_ms {
            cluster.set_env(crate::etcd::FSYNC_DELAY_ENV, &ms.to_string());
        }
        let etcd = if extras.etcd { cluster.serve_etcd()? } else { Vec::new() };
        for i in 0..nodes {
            cluster.start(i)?;
        }
        let endpoints = cluster.endpoints();
        let ca = cluster.ca();
        let options = ClientOptions { cacert: ca.as_deref(), token: Some(cluster.token()) };
        let (client, fetch) = (cluster.client()?, Fetch::new(options)?);
        Ok(Tenure { cluster, endpoints, etcd, client, fetch })
    }

    /// The nodes' etcd gRPC URLs (empty unless started by
    /// [`Tenure::start_serving_etcd`]).
    pub fn etcd_urls(&self) -> &[String] {
        &self.etcd
    }

    /// Node `i`'s certificate and key (with TLS): a client certificate of
    /// the cluster's CA, which the etcd listener asks for.
    pub fn tls_files(&self, i: usize) -> Option<(PathBuf, PathBuf)> {
        match &self.cluster.servers[i].args.tls {
            tenure_launch::server::Tls::Files { cert, key, .. } => {
                Some((cert.clone(), key.clone()))
            }
            tenure_launch::server::Tls::Off => None,
        }
    }

    /// An API client trusting the servers' CA, with the cluster's token.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Raw HTTP(S) (`/metrics`) trusting the servers' CA, with the cluster's token.
    pub fn fetch(&self) -> &Fetch {
        &self.fetch
    }

    /// Node `i`'s HTTP API.
    pub fn endpoint(&self, i: usize) -> &str {
        &self.endpoints[i]
    }

    /// The CA certificate the servers' API certificates chain to (None without TLS).
    pub fn ca(&self) -> Option<PathBuf> {
        self.cluster.ca()
    }

    /// The cluster's API token (admin).
    pub fn token(&self) -> &str {
        self.cluster.token()
    }

    /// Node `i`'s data directory.
    pub fn data_dir(&self, i: usize) -> &Path {
        &self.cluster.servers[i].args.data_dir
    }

    /// Node `i`'s id.
    pub fn id(&self, i: usize) -> u64 {
        self.cluster.servers[i].args.id
    }

    /// Node `i`'s peer address (`--listen`, HOST:PORT).
    pub fn peer_address(&self, i: usize) -> &str {
        &self.cluster.servers[i].args.listen
    }
}

/// The config file of a node that joins (`join.toml` in the cluster's
/// directory): the cluster's, with `join_token_file` naming the admin token.
const JOIN_CONFIG: &str = "join.toml";

/// Makes the servers of `cluster` from index `first` on nodes that join the
/// first `first` ones: `--join` with their APIs instead of `--peers`, and
/// [`JOIN_CONFIG`]. The first ones name only each other (`--peers`,
/// `--peer-http`: a node named there is a voter of the first configuration).
fn prepare_joiners(cluster: &mut LocalCluster, first: usize) -> anyhow::Result<()> {
    let members = &cluster.servers[..first];
    let peers = address_list(members.iter().map(|s| (s.args.id, s.args.listen.clone())));
    let peer_http = address_list(members.iter().map(|s| (s.args.id, s.args.http.clone())));
    let join = cluster.endpoints()[..first].join(",");
    let base = &cluster.servers[0].args.config;
    let text =
        std::fs::read_to_string(base).with_context(|| format!("cannot read {}", base.display()))?;
    let token = cluster.token_file();
    let token = token.to_str().context("the token file's path is not UTF-8")?;
    // Top-level keys come before the `[[api_tokens]]` tables.
    let text = format!("join_token_file = {}\n{text}", serde_json::to_string(token)?);
    let config = cluster.dir.path().join(JOIN_CONFIG);
    std::fs::write(&config, text).with_context(|| format!("cannot write {}", config.display()))?;
    for (i, server) in cluster.servers.iter_mut().enumerate() {
        server.args.peer_http = Some(peer_http.clone());
        if i < first {
            server.args.peers = peers.clone();
        } else {
            server.args.join = Some(join.clone());
            server.args.config = config.clone();
        }
    }
    Ok(())
}

impl System for Tenure {
    fn name(&self) -> &'static str {
        "tenure"
    }

    fn len(&self) -> usize {
        self.endpoints.len()
    }

    async fn view(&self, i: usize, timeout: Duration) -> Option<View> {
        let s = self.client.status_within(&self.endpoints[i], timeout).await.ok()?;
        Some(View {
            leader: s.leader.and_then(|id| usize::try_from(id).ok()?.checked_sub(1)),
            term: s.term,
            is_leader: s.role == "leader",
        })
    }

    async fn rounds(&self, i: usize) -> Option<Rounds> {
        let url = format!("{}/metrics", self.endpoints[i]);
        let text = self.fetch.get_text(&url, METRICS_TIMEOUT).await.ok()?;
        Some(Rounds {
            pre_votes: metric_value(&text, "tenure_pre_votes_started_total")? as u64,
            elections: metric_value(&text, "tenure_elections_started_total")? as u64,
        })
    }

    fn start(&mut self, i: usize) -> anyhow::Result<()> {
        Ok(self.cluster.start(i)?)
    }

    async fn incarnation(&self, i: usize) -> Option<u64> {
        self.client.status_within(&self.endpoints[i], STATUS_TIMEOUT).await.ok()?.incarnation
    }

    async fn report_dead(&self, dead: usize, incarnation: u64, to: &[usize]) -> anyhow::Result<()> {
        let path = format!("/v1/peers/{}/dead", dead + 1);
        let body = serde_json::json!({ "incarnation": incarnation });
        let answers = join_all(to.iter().map(|&i| {
            let body = Some(("application/json", body.to_string().into_bytes()));
            let url = format!("{}{path}", self.endpoints[i]);
            async move { self.client.send(Method::POST, &url, body, REQUEST_TIMEOUT).await }
        }))
        .await;
        let mut accepted = 0;
        for (i, a) in to.iter().zip(answers) {
            match a {
                Ok(a) if a.status.is_success() => accepted += 1,
                Ok(a) => eprintln!(
                    "node {}: death notice refused: HTTP {}: {}",
                    i + 1,
                    a.status,
                    error_message(&a.body)
                ),
                Err(e) => eprintln!("node {}: death notice not delivered: {e:#}", i + 1),
            }
        }
        if accepted == 0 {
            bail!("no survivor accepted the death notice of node {} ({incarnation})", dead + 1);
        }
        Ok(())
    }

    fn proc(&mut self, i: usize) -> &mut Proc {
        &mut self.cluster.servers[i].proc
    }

    fn log_tails(&self) -> String {
        self.cluster.log_tails()
    }

    fn log_files(&self) -> Vec<PathBuf> {
        self.cluster.servers.iter().map(|s| s.proc.log.clone()).collect()
    }
}
