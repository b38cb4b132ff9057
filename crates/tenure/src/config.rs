//! `tenure server` settings: command-line flags over a TOML file over defaults.

use crate::logging::LogFormat;
use crate::tokens;
use anyhow::{anyhow, bail, Context};
use clap::Args;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tenure_core::{NodeId, ProtocolKind};
use tenure_node::{NodeConfig, NodeConfigError, Security, TlsFiles};
use tenure_server::http::{ApiAuth, TokenSpec};
use tenure_server::join::record;

/// The voters when neither `--peers` nor the file names them: a local three-node cluster.
pub const DEFAULT_PEERS: &str = "1=127.0.0.1:7001,2=127.0.0.1:7002,3=127.0.0.1:7003";
/// The HTTP API of node N listens on this port plus N by default.
pub const DEFAULT_HTTP_PORT_BASE: u16 = 8000;
/// Default heartbeat interval.
pub const DEFAULT_HEARTBEAT_MS: u64 = 100;
/// Default election timeout.
pub const DEFAULT_ELECTION_TIMEOUT_MS: u64 = 1000;
/// Default cluster name; peers with another name are refused.
pub const DEFAULT_CLUSTER_ID: &str = "tenure";
/// Default parent of the per-node data directories.
pub const DEFAULT_DATA_ROOT: &str = "./tenure-data";

/// Flags of `tenure server`. Every flag overrides the same setting of `--config`.
#[derive(Args, Debug, Default)]
#[command(after_help = "\
Examples:
  tenure server --config /etc/tenure/node-1.toml
  tenure server --id 1 --insecure-no-tls --insecure-open-api   # and --id 2, --id 3: a local test cluster
  tenure server --config /etc/tenure/node-4.toml --join 10.0.0.1:8001,10.0.0.2:8001 \\
    --join-token-file /etc/tenure/ops.token

With certificates from `tenure cert --out certs --nodes 1,2,3`, nodes 1, 2 and 3 form a
local cluster with no flags but --id and their files (in three terminals; --insecure-open-api:
a local test without API tokens, anyone on this machine may steer it):
  tenure server --id 1 --tls-cert certs/node-1.pem --tls-key certs/node-1-key.pem \\
    --tls-ca certs/ca.pem --insecure-open-api     # and --id 2, --id 3 with their files

Config file (TOML; every key optional, unknown keys are errors):
  id = 1
  cluster_id = \"prod-db\"
  listen = \"0.0.0.0:7001\"
  http = \"0.0.0.0:8001\"
  peers = [\"1=10.0.0.1:7001\", \"2=10.0.0.2:7001\", \"3=10.0.0.3:7001\"]
  # join = [\"10.0.0.1:8001\", \"10.0.0.2:8001\"]  # instead of peers: join a running cluster
  # join_token_file = \"/etc/tenure/ops.token\"     # (--join and its flags, docs/MEMBERSHIP.md)
  # single_node = true     # only for a one-node cluster: peers lists this node alone
  # peer_http = [\"1=10.0.0.1:8001\", \"2=10.0.0.2:8001\"]  # their HTTP APIs, if not as advertised
  # etcd_listen = \"0.0.0.0:2379\"  # also serve etcd's v3 gRPC API (docs/ETCD.md)
  # etcd_require_token = true     # every etcd call needs an API token (etcdctl --user NAME:SECRET)
  data_dir = \"/var/lib/tenure\"
  heartbeat_ms = 100
  election_timeout_ms = 1000
  protocol = \"raft\"        # or \"ranked\" or \"paxos\"; the same on every node
  round_trip_ms = 50        # ranked and paxos only; default: half the heartbeat
  log_format = \"json\"
  tls_cert = \"/etc/tenure/node-1.pem\"      # made by `tenure cert`
  tls_key = \"/etc/tenure/node-1-key.pem\"
  tls_ca = \"/etc/tenure/ca.pem\"
  # insecure_no_tls = true   # instead of the three above: no TLS (development only)
  api_open_probes = true    # /healthz and /v1/is-leader without a token (load balancers)
  # store = \"tenure://10.0.0.1:8001,10.0.0.2:8001\"  # leadership from a store (--store and
  # election = \"tenure\"                               # its flags), instead of listen, peers,
  # ttl_ms = 10000                                    # data_dir and the election timing
  # advertise_http = \"10.0.1.5:8001\"
  # store_cacert = \"/etc/tenure/store-ca.pem\"
  # store_token_file = \"/etc/tenure/store.token\"   # tenure:// (store_user: etcd://)
  [[api_tokens]]            # who may call the HTTP API; one block per token, after the keys above
  name = \"ops\"
  role = \"admin\"            # admin: transfer (and all of write); write: kv writes (and all of read);
                            # read: status, leader, watch, metrics, kv reads and watches
  token_file = \"/etc/tenure/ops.token\"  # the secret, chmod 600; or token_sha256 = \"<hex>\"

Exit status: 0 after SIGTERM or Ctrl-C (a leader hands over first); 78 when the node was removed
from the cluster while it was away (--supervised and the systemd unit do not restart it); 64 a
usage error; 1 any other error.

Security: peer connections use mutual TLS and the HTTP API serves HTTPS, both with --tls-cert,
--tls-key and --tls-ca; `tenure cert --out certs --nodes 1,2,3` makes a CA and the node
certificates. API callers send a bearer token of api_tokens. Without the certificates the
server refuses to start (unless --insecure-no-tls), and without api_tokens too (unless
--insecure-open-api).

Leadership from a store (--store; docs/STORES.md, \"tenure server --store\"): no node of its own,
no peers or data directory. The servers campaign in one election of the store (--election,
default the cluster id) with the value {\"id\":N,\"http\":\"host:port\"} and serve /v1/status,
/v1/leader, /v1/is-leader, /v1/watch, /metrics and /healthz from it (term and fencing token are
the store's token); the key-value, session, election and transfer endpoints answer 404:
  tenure server --id 11 --http 127.0.0.1:8011 --tls-cert certs/node-11.pem \\
    --tls-key certs/node-11-key.pem --tls-ca certs/ca.pem --config tenure.toml \\
    --store tenure://10.0.0.1:8001,10.0.0.2:8001 --store-cacert store-ca.pem \\
    --store-token-file store.token --ttl-ms 10000
SIGTERM resigns first (the next server leads at once); a killed leader is replaced about one
--ttl-ms later.

Logs go to standard error; RUST_LOG (e.g. RUST_LOG=debug) changes the level.")]
pub struct ServerArgs {
    /// TOML file with the settings below (flags override it).
    #[arg(long, short = 'c', value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// This node's id, a positive integer unique in the cluster [required, from here or the file].
    #[arg(long, value_name = "N")]
    pub id: Option<u64>,
    /// Address for peer traffic [default: this node's entry in --peers].
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: Option<String>,
    /// Address of the HTTP API [default: 127.0.0.1:8000+id].
    #[arg(long, value_name = "ADDR:PORT")]
    pub http: Option<String>,
    /// The HTTP API addresses of the nodes as ID=HOST:PORT, comma-separated: the dashboard
    /// (GET /) and GET /v1/cluster read the other nodes' status through this node, and
    /// GET /v1/leader names the leader's. Needed only where the address a node advertises
    /// at the peer handshake (--advertise-http, else its --http) does not reach it
    /// [default: with the default --peers, 127.0.0.1:8000+id; otherwise the advertised ones].
    #[arg(long, value_name = "ID=HOST:PORT,...")]
    pub peer_http: Option<String>,
    /// Also serve etcd's v3 gRPC API (KV, leases, endpoint status, member list) on this
    /// address, over this node's store: stock etcd clients work unchanged, e.g.
    /// `--etcd-listen 127.0.0.1:2379`, then `etcdctl --endpoints https://127.0.0.1:2379
    /// --cacert certs/ca.pem --cert certs/node-1.pem --key certs/node-1-key.pem put k v`.
    /// With TLS it serves the node's certificate and requires a client certificate of the
    /// cluster's CA (docs/ETCD.md). The peers learn the address and list it in the member
    /// list (0.0.0.0 as the IP they reach this node at; a loopback address is not listed to
    /// other hosts); give every node one, since followers pass member changes on to the
    /// leader's [default: off].
    #[arg(long, value_name = "HOST:PORT")]
    pub etcd_listen: Option<String>,
    /// Every etcd call must carry an API token (`etcdctl --user NAME:SECRET`: a token's name
    /// and secret) and gets the token's role; without it, a call by client certificate alone
    /// has the role of the token the certificate names, a node's certificate an
    /// administrator's (docs/ETCD.md) [default: off].
    #[arg(long)]
    pub etcd_require_token: bool,
    /// All voters as ID=HOST:PORT, comma-separated, in preference order (earlier ones stand
    /// first when the leader fails); this node is added with --listen if absent
    /// [default: 1=127.0.0.1:7001,2=127.0.0.1:7002,3=127.0.0.1:7003].
    #[arg(long, value_name = "ID=HOST:PORT,...")]
    pub peers: Option<String>,
    /// The voters (--peers) are this node alone, on purpose: a one-node cluster, its own
    /// majority. Without it a peer list of this node alone is refused (a list cut short by
    /// a typo would make a second leader beside the real cluster's).
    #[arg(long)]
    pub single_node: bool,
    /// Directory for the node's durable state (term and vote) [default: ./tenure-data/node-<id>].
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// How often the leader sends heartbeats, in milliseconds [default: 100].
    #[arg(long, value_name = "N")]
    pub heartbeat_ms: Option<u64>,
    /// How long followers wait without hearing the leader before electing a new one,
    /// in milliseconds; at least 4 heartbeats [default: 1000].
    #[arg(long, value_name = "N")]
    pub election_timeout_ms: Option<u64>,
    /// Election protocol, the same on every node: raft (PreVote, leases, ranked candidacy),
    /// ranked (the two-phase ELECT/VOTE election of 2000) or paxos (Paxos with low-ball polling).
    /// Nodes refuse peers that run another; see docs/protocols.md [default: raft].
    #[arg(long, value_name = "NAME")]
    pub protocol: Option<ProtocolKind>,
    /// A generous bound on one message round trip including fsync, in milliseconds
    /// (ranked: how long claims are collected before voting; paxos: sizes the random
    /// timeout spread); at most one heartbeat [default: half the heartbeat].
    #[arg(long, value_name = "N")]
    pub round_trip_ms: Option<u64>,
    /// Cluster name; nodes refuse peers with another name [default: tenure].
    #[arg(long, value_name = "NAME")]
    pub cluster_id: Option<String>,
    /// Log format on standard error [default: text].
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub log_format: Option<LogFormat>,
    /// This node's certificate (PEM), signed by the cluster's CA and naming
    /// node-<id>.<cluster-id> (`tenure cert` makes one); for peers and the HTTP API.
    #[arg(long, value_name = "FILE")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, value_name = "FILE")]
    pub tls_key: Option<PathBuf>,
    /// The cluster's CA certificate (PEM): peers must present a certificate it signed.
    #[arg(long, value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
    /// Run without TLS: peer connections and the HTTP API are neither encrypted nor
    /// authenticated, and anyone who reaches the peer port can vote as any node.
    /// For development on one machine only.
    #[arg(long)]
    pub insecure_no_tls: bool,
    /// Serve the HTTP API without tokens: anyone who reaches it may transfer leadership.
    /// For a local test cluster only; otherwise configure api_tokens in the config file.
    #[arg(long)]
    pub insecure_open_api: bool,
    /// Start although the state file is missing, damaged, older than the node's own record of
    /// it (a restored backup) or of another protocol: write a new one from the lock file's
    /// record of the newest state this node acted on, never older. Use it once, after a start
    /// refused and said so; a consistent state is left alone. (No config-file key: it must not
    /// stay on.)
    #[arg(long)]
    pub reset_state: bool,
    /// With --reset-state, when no record is left (the start's error says so): start in term N
    /// with no vote. N must be above every term this node may have voted in: above the terms a
    /// majority of the other nodes report. Never needed: a node may instead be wiped and
    /// replaced by a new one (`tenure member replace OLD NEW HOST:PORT`, docs/OPERATIONS.md).
    #[arg(long, value_name = "N", requires = "reset_state")]
    pub reset_term: Option<u64>,
    /// Run the node as a child process and watch it: when it dies (crash, kill -9, OOM), tell
    /// the other nodes at once (POST /v1/peers/{id}/dead to their --peer-http addresses), so
    /// that they elect a new leader in milliseconds instead of after the election timeout;
    /// then start it again (at once after a run of 10 s or more, else after a pause growing
    /// from 100 ms to 10 s). SIGTERM and SIGINT are passed on to the node. See docs/SPIES.md.
    /// (No config-file key: the child reads the same file.)
    #[arg(long, conflicts_with_all = ["store", "reset_state"])]
    pub supervised: bool,
    /// With --supervised: file holding an API token of role admin, sent with the death
    /// notices (not needed with --insecure-open-api).
    #[arg(long, value_name = "FILE", requires = "supervised")]
    pub notify_token_file: Option<PathBuf>,
    /// Join a running cluster instead of naming its voters in --peers: the HTTP API endpoints
    /// of some of its nodes, comma-separated (https:// with --join-cacert, else --tls-ca). The
    /// node asks them for the members, starts as a learner that follows them, then asks the
    /// leader to add it with its id, its peer address (--advertise-peer, else --listen) and its
    /// data directory's identity; the leader adds it only once it reached it at that address,
    /// and promotes it to voter once it has caught up. If the
    /// cluster holds this id already with the same data directory, nothing is added; with
    /// another one (a wiped disk), the node stops and says so. It keeps the members it joined
    /// with in its data directory (joined.json): later starts need neither --join nor --peers,
    /// and a node added once is not added again (it may have been removed since).
    /// See docs/MEMBERSHIP.md.
    #[arg(long, value_name = "URL,...", conflicts_with_all = ["peers", "single_node"])]
    pub join: Option<String>,
    /// With --join: the CA certificate (PEM) of the cluster's HTTPS [default: --tls-ca].
    #[arg(long, value_name = "FILE")]
    pub join_cacert: Option<PathBuf>,
    /// With --join: file holding an API token of role admin of the cluster (chmod 600); not
    /// needed when its API is open (--insecure-open-api).
    #[arg(long, value_name = "FILE")]
    pub join_token_file: Option<PathBuf>,
    /// With --join: this node's peer address as the other members dial it; its certificate
    /// names the node as usual [default: --listen; required when that is 0.0.0.0 or ::].
    #[arg(long, value_name = "HOST:PORT")]
    pub advertise_peer: Option<String>,
    /// `--store` and its flags: leadership from a store instead.
    #[command(flatten)]
    pub store_mode: StoreArgs,
}

/// The flags of `tenure server --store`, each also a config-file key of the
/// same name (but `--store-token`: no secret in the file).
#[derive(Args, Debug, Default, Clone)]
pub struct StoreArgs {
    /// Take leadership from a store instead of tenure's own consensus:
    /// tenure://HOST:PORT,... (the HTTP API of a tenure cluster), etcd://HOST:PORT,... (an etcd
    /// cluster's client URLs) or zk://HOST:PORT,... (a ZooKeeper ensemble); docs/STORES.md,
    /// "tenure server --store". The server then runs no node of its own: no --peers, --listen,
    /// --data-dir or election timing.
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,
    /// The election in the store that the servers campaign in [default: the --cluster-id].
    #[arg(long, value_name = "NAME")]
    pub election: Option<String>,
    /// The TTL of this server's session in the store, in milliseconds (500 to 86400000): a
    /// killed leader is replaced about one TTL after its last renewal, and a leader cut off
    /// from the store gives up at TTL x 0.9/1.1. Renewals go every TTL/3, so a short TTL
    /// costs the store more requests. etcd rounds it up to whole seconds and its minimum,
    /// ZooKeeper into its session-timeout range [default: 10000, as `tenure elect`].
    #[arg(long, value_name = "N")]
    pub ttl_ms: Option<u64>,
    /// The address of this server's HTTP API that the other servers and clients can reach:
    /// a node tells its peers at the handshake (the dashboard and GET /v1/leader use it);
    /// with --store it is published in the candidate value [default: the --http address;
    /// with --store required when that is 0.0.0.0 or ::, without it the peers then use
    /// this node's IP in their --peers with the --http port].
    #[arg(long, value_name = "HOST:PORT")]
    pub advertise_http: Option<String>,
    /// The store's CA certificate (PEM): the tenure cluster's of --store tenure://, or the one
    /// that signed the etcd members' certificates; its endpoints are then https://. (This
    /// server's own certificate is --tls-cert.)
    #[arg(long, value_name = "FILE")]
    pub store_cacert: Option<PathBuf>,
    /// The bearer token (role write) for the tenure cluster of --store tenure://; others on
    /// this machine can see a flag in `ps`: prefer --store-token-file.
    #[arg(long, value_name = "TOKEN", conflicts_with = "store_token_file")]
    pub store_token: Option<String>,
    /// File holding the token of --store-token (chmod 600).
    #[arg(long, value_name = "FILE")]
    pub store_token_file: Option<PathBuf>,
    /// With --store etcd:// whose authentication is on: the etcd user, whose password is read
    /// from TENURE_STORE_PASSWORD.
    #[arg(long, value_name = "NAME")]
    pub store_user: Option<String>,
    /// With --store zk://: refuse a session the ensemble negotiates below this many
    /// milliseconds. Set it to 2 x syncLimit x tickTime of the ensemble when its
    /// minSessionTimeout was lowered below 2 ticks (docs/STORES.md, section 3.3: the
    /// deadline's argument needs renewals no closer than the followers' pings).
    #[arg(long, value_name = "N")]
    pub store_min_ttl_ms: Option<u64>,
}

/// The config file's contents; every key optional.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    id: Option<u64>,
    cluster_id: Option<String>,
    listen: Option<String>,
    http: Option<String>,
    peers: Option<Vec<String>>,
    peer_http: Option<Vec<String>>,
    etcd_listen: Option<String>,
    etcd_require_token: Option<bool>,
    single_node: Option<bool>,
    data_dir: Option<PathBuf>,
    heartbeat_ms: Option<u64>,
    election_timeout_ms: Option<u64>,
    protocol: Option<ProtocolKind>,
    round_trip_ms: Option<u64>,
    log_format: Option<LogFormat>,
    tls_cert: Option<PathBuf>,
    tls_key: Option<PathBuf>,
    tls_ca: Option<PathBuf>,
    insecure_no_tls: Option<bool>,
    api_tokens: Option<Vec<TokenSpec>>,
    api_open_probes: Option<bool>,
    insecure_open_api: Option<bool>,
    store: Option<String>,
    election: Option<String>,
    ttl_ms: Option<u64>,
    advertise_http: Option<String>,
    store_cacert: Option<PathBuf>,
    store_token_file: Option<PathBuf>,
    store_user: Option<String>,
    store_min_ttl_ms: Option<u64>,
    join: Option<Vec<String>>,
    join_cacert: Option<PathBuf>,
    join_token_file: Option<PathBuf>,
    advertise_peer: Option<String>,
}

impl StoreArgs {
    /// These flags over the config file's keys.
    fn over(&self, file: &FileConfig) -> StoreArgs {
        StoreArgs {
            store: self.store.clone().or(file.store.clone()),
            election: self.election.clone().or(file.election.clone()),
            ttl_ms: self.ttl_ms.or(file.ttl_ms),
            advertise_http: self.advertise_http.clone().or(file.advertise_http.clone()),
            store_cacert: self.store_cacert.clone().or(file.store_cacert.clone()),
            store_token: self.store_token.clone(),
            store_token_file: self.store_token_file.clone().or(file.store_token_file.clone()),
            store_user: self.store_user.clone().or(file.store_user.clone()),
            store_min_ttl_ms: self.store_min_ttl_ms.or(file.store_min_ttl_ms),
        }
    }

    /// An error when settings of `--store` are given without it.
    fn check_unused(&self) -> anyhow::Result<()> {
        let given: Vec<&str> = [
            ("--election", self.election.is_some()),
            ("--ttl-ms", self.ttl_ms.is_some()),
            ("--store-cacert", self.store_cacert.is_some()),
            ("--store-token", self.store_token.is_some()),
            ("--store-token-file", self.store_token_file.is_some()),
            ("--store-user", self.store_user.is_some()),
            ("--store-min-ttl-ms", self.store_min_ttl_ms.is_some()),
        ]
        .iter()
        .filter_map(|(flag, on)| on.then_some(*flag))
        .collect();
        if !given.is_empty() && self.store.is_none() {
            bail!(
                "{} (or the config-file keys of the same name) apply only with --store URL \
                 (`store` in the config file)",
                given.join(", ")
            );
        }
        Ok(())
    }
}

/// Everything `tenure server` needs, resolved and checked.
#[derive(Debug)]
pub struct ServerSettings {
    /// The node runtime's configuration.
    pub node: NodeConfig,
    /// Where the HTTP API listens.
    pub http: SocketAddr,
    /// Log output format.
    pub log_format: LogFormat,
    /// Who may call the HTTP API.
    pub api: ApiAuth,
    /// The HTTP API addresses (HOST:PORT) of the nodes known, this one included.
    pub http_addresses: BTreeMap<NodeId, String>,
    /// Where etcd's API listens (`--etcd-listen`), if anywhere.
    pub etcd_listen: Option<SocketAddr>,
    /// `--etcd-require-token`: every etcd call needs an API token.
    pub etcd_require_token: bool,
    /// `--join`: how to ask the cluster for its members and to add this
    /// node; `node.peers` holds only this node until
    /// [`ServerSettings::with_members`] gives them.
    pub join: Option<JoinSettings>,
}

/// How a node joins a running cluster (`--join`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinSettings {
    /// The cluster's HTTP API endpoints, comma-separated, as given.
    pub endpoints: String,
    /// The CA of the cluster's HTTPS: `--join-cacert`, else `--tls-ca`.
    pub cacert: Option<PathBuf>,
    /// The file holding an admin token of the cluster.
    pub token_file: Option<PathBuf>,
    /// This node's peer address as the others dial it.
    pub address: String,
}

impl ServerSettings {
    /// Gives a joining node the cluster's members (every voter but itself,
    /// and where to reach it), and checks the node's configuration again.
    pub fn with_members(&mut self, peers: Vec<(NodeId, SocketAddr)>) -> anyhow::Result<()> {
        self.node.peers = peers;
        self.node.joining = true;
        self.node.validate().map_err(explain)
    }
}

/// What a server with `--store` shares with a node, resolved and checked.
#[derive(Debug)]
pub struct StoreBase {
    /// This server's id.
    pub id: NodeId,
    /// Where its HTTP API listens.
    pub http: SocketAddr,
    /// Its cluster id (the default election, and the name in its certificate).
    pub cluster_id: String,
    /// Its certificate for HTTPS, or none.
    pub security: Security,
    /// Log output format.
    pub log_format: LogFormat,
    /// Who may call its API.
    pub api: ApiAuth,
    /// The store's settings: the flags over the config file's keys.
    pub store: StoreArgs,
}

impl ServerArgs {
    /// Whether `--store` (or `store` in the config file) was given.
    pub fn store_led(&self) -> anyhow::Result<bool> {
        Ok(self.store_mode.store.is_some() || self.file()?.store.is_some())
    }

    /// The settings of a server with `--store` that a node has too; the
    /// settings of tenure's own consensus (flags and config-file keys) are
    /// refused, naming them.
    pub fn resolve_store_base(&self) -> anyhow::Result<StoreBase> {
        let file = self.file()?;
        self.refuse_consensus_settings(&file)?;
        let id = self.id(&file)?;
        let cluster_id = self.cluster_id(&file);
        Ok(StoreBase {
            id,
            http: self.http(id, &file)?,
            security: self.security(id, &cluster_id, &file)?,
            cluster_id,
            log_format: self.log_format.or(file.log_format).unwrap_or_default(),
            api: self.api(&file)?,
            store: self.store_mode.over(&file),
        })
    }

    /// An error naming the settings of tenure's own consensus that are given
    /// with `--store`, as flags or config-file keys.
    fn refuse_consensus_settings(&self, file: &FileConfig) -> anyhow::Result<()> {
        // The node's settings (see `setting`): given as a flag, in the file.
        let node = [
            ("listen", self.listen.is_some(), file.listen.is_some()),
            ("peers", self.peers.is_some(), file.peers.is_some()),
            ("peer_http", self.peer_http.is_some(), file.peer_http.is_some()),
            ("etcd_listen", self.etcd_listen.is_some(), file.etcd_listen.is_some()),
            ("etcd_require_token", self.etcd_require_token, file.etcd_require_token.is_some()),
            ("single_node", self.single_node, file.single_node.is_some()),
            ("data_dir", self.data_dir.is_some(), file.data_dir.is_some()),
            ("heartbeat_interval", self.heartbeat_ms.is_some(), file.heartbeat_ms.is_some()),
            (
                "election_timeout",
                self.election_timeout_ms.is_some(),
                file.election_timeout_ms.is_some(),
            ),
            ("protocol", self.protocol.is_some(), file.protocol.is_some()),
            ("round_trip", self.round_trip_ms.is_some(), file.round_trip_ms.is_some()),
        ];
        let named = |f: &str| setting(f).expect("a setting of the node");
        let mut flags: Vec<&str> = node.iter().filter(|n| n.1).map(|n| named(n.0).0).collect();
        let mut keys: Vec<&str> = node.iter().filter(|n| n.2).map(|n| named(n.0).1).collect();
        flags.extend(self.join.is_some().then_some("--join"));
        keys.extend(file.join.is_some().then_some("join"));
        flags.extend(self.reset_state.then_some("--reset-state"));
        flags.extend(self.reset_term.is_some().then_some("--reset-term"));
        if flags.is_empty() && keys.is_empty() {
            return Ok(());
        }
        let mut what = Vec::new();
        if !flags.is_empty() {
            what.push(flags.join(", "));
        }
        if !keys.is_empty() {
            what.push(format!("the config file's {}", keys.join(", ")));
        }
        bail!(
            "--store: this server's leadership comes from the store, so it runs no consensus \
             node of its own and has no peers, data directory or election timing; remove {}",
            what.join(" and ")
        )
    }

    /// Merges flags, the config file (if any) and defaults into the node's
    /// configuration. The election settings are checked by the core
    /// ([`NodeConfig::validate`] passes them to it); an error names the flags
    /// and file keys to change.
    pub fn resolve(&self) -> anyhow::Result<ServerSettings> {
        let file = self.file()?;
        // A node that joined keeps its members in its data directory: it
        // restarts from them without --join or --peers.
        let named = self.join.is_some() || file.join.is_some();
        let named = named || self.peers.is_some() || file.peers.is_some();
        if !named {
            let id = self.id(&file)?;
            let data_dir = self.data_dir(id, &file);
            if let Some(record) = record::read(&data_dir, id, &self.cluster_id(&file))? {
                return self.resolve_from(file, Some(record.peers(&data_dir)?));
            }
        }
        self.resolve_from(file, None)
    }

    /// The config file's settings (none without `--config`).
    fn file(&self) -> anyhow::Result<FileConfig> {
        match &self.config {
            Some(path) => read_file(path),
            None => Ok(FileConfig::default()),
        }
    }

    /// [`ServerArgs::resolve`] with the config file already parsed (reads no
    /// file: the fuzz target's entry, with [`parse_file`]).
    pub fn resolve_with(&self, file: FileConfig) -> anyhow::Result<ServerSettings> {
        self.resolve_from(file, None)
    }

    /// [`ServerArgs::resolve_with`], the peers of a node that joined
    /// (`joined`, from its data directory) in place of `--peers`.
    fn resolve_from(
        &self,
        file: FileConfig,
        joined: Option<Vec<(NodeId, SocketAddr)>>,
    ) -> anyhow::Result<ServerSettings> {
        self.store_mode.over(&file).check_unused()?;
        self.check_join_flags(&file)?;
        let id = self.id(&file)?;
        let join_urls = self.join.clone().or(file.join.as_ref().map(|j| j.join(",")));
        let learner = join_urls.is_some() || joined.is_some();
        let (listen, peers) = match (&join_urls, joined) {
            (Some(_), _) => {
                let listen = self.joining_listen(&file)?;
                (listen, vec![(id, listen)])
            }
            (None, Some(peers)) => (self.joining_listen(&file)?, peers),
            (None, None) => self.listen_and_peers(id, &file)?,
        };
        let http = self.http(id, &file)?;
        let heartbeat_ms = self.heartbeat_ms.or(file.heartbeat_ms).unwrap_or(DEFAULT_HEARTBEAT_MS);
        let election_timeout_ms = self
            .election_timeout_ms
            .or(file.election_timeout_ms)
            .unwrap_or(DEFAULT_ELECTION_TIMEOUT_MS);
        let cluster_id = self.cluster_id(&file);
        let security = self.security(id, &cluster_id, &file)?;
        let single_node = self.single_node || file.single_node.unwrap_or(false);
        let advertise_http = self.store_mode.advertise_http.clone().or(file.advertise_http.clone());
        if let Some(a) = &advertise_http {
            let port_ok = a
                .rsplit_once(':')
                .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
            if !port_ok {
                bail!("--advertise-http (advertise_http): `{a}` is not HOST:PORT (for example 10.0.0.1:8001)");
            }
        }
        let join = match join_urls {
            Some(endpoints) => Some(JoinSettings {
                endpoints,
                cacert: self.join_cacert.clone().or(file.join_cacert.clone()).or(match &security {
                    Security::MutualTls(files) => Some(files.ca.clone()),
                    Security::InsecureNoTls => None,
                }),
                token_file: self.join_token_file.clone().or(file.join_token_file.clone()),
                address: self.advertised_peer(listen, &file)?,
            }),
            None => None,
        };
        let node = NodeConfig {
            id,
            cluster_id,
            listen,
            peers,
            data_dir: self.data_dir(id, &file),
            heartbeat_interval: Duration::from_millis(heartbeat_ms),
            election_timeout: Duration::from_millis(election_timeout_ms),
            protocol: self.protocol.or(file.protocol).unwrap_or_default(),
            round_trip: self.round_trip_ms.or(file.round_trip_ms).map(Duration::from_millis),
            security,
            single_node,
            api_address: advertise_http,
            // The etcd listener's address, once bound (tenure-server).
            etcd_address: None,
            joining: learner,
        };
        node.validate().map_err(explain)?;
        let log_format = self.log_format.or(file.log_format).unwrap_or_default();
        let api = self.api(&file)?;
        let http_addresses = self.http_addresses(&node, http, &file)?;
        let etcd_listen = match self.etcd_listen.as_ref().or(file.etcd_listen.as_ref()) {
            Some(a) => Some(resolve_addr(a).context("bad --etcd-listen (etcd_listen)")?),
            None => None,
        };
        let etcd_require_token = self.etcd_require_token || file.etcd_require_token == Some(true);
        if etcd_require_token && etcd_listen.is_none() {
            bail!(
                "--etcd-require-token (etcd_require_token) without --etcd-listen (etcd_listen): \
                 there is no etcd listener to require tokens on"
            );
        }
        if etcd_require_token && api.is_insecure_open() {
            bail!(
                "--etcd-require-token (etcd_require_token) with an API open to anyone \
                 (--insecure-open-api): there are no tokens to require; configure API tokens"
            );
        }
        Ok(ServerSettings {
            node,
            http,
            log_format,
            api,
            http_addresses,
            etcd_listen,
            etcd_require_token,
            join,
        })
    }

    /// The data directory: `--data-dir`, the file's, or the default.
    fn data_dir(&self, id: NodeId, file: &FileConfig) -> PathBuf {
        self.data_dir
            .clone()
            .or(file.data_dir.clone())
            .unwrap_or_else(|| Path::new(DEFAULT_DATA_ROOT).join(format!("node-{id}")))
    }

    /// An error for settings of `--join` given without it, or with
    /// `--peers` or `--single-node` (flags or config-file keys).
    fn check_join_flags(&self, file: &FileConfig) -> anyhow::Result<()> {
        let join = self.join.is_some() || file.join.is_some();
        let given: Vec<&str> = [
            ("--join-cacert", self.join_cacert.is_some() || file.join_cacert.is_some()),
            ("--join-token-file", self.join_token_file.is_some() || file.join_token_file.is_some()),
            ("--advertise-peer", self.advertise_peer.is_some() || file.advertise_peer.is_some()),
        ]
        .iter()
        .filter_map(|(flag, on)| on.then_some(*flag))
        .collect();
        if !join && !given.is_empty() {
            bail!(
                "{} (or the config-file keys of the same name) apply only with --join URL \
                 (`join` in the config file)",
                given.join(", ")
            );
        }
        if join && (self.peers.is_some() || file.peers.is_some()) {
            bail!(
                "--join (join) and --peers (peers) are both given: a node either names the \
                 voters of a new cluster (--peers) or joins a running one (--join), which tells \
                 it its members"
            );
        }
        if join && (self.single_node || file.single_node == Some(true)) {
            bail!("--join (join) and --single-node (single_node) are both given: choose one");
        }
        Ok(())
    }

    /// The peer listener's address of a node that joins: `--listen` (or
    /// the file's), which is then required.
    fn joining_listen(&self, file: &FileConfig) -> anyhow::Result<SocketAddr> {
        match self.listen.as_ref().or(file.listen.as_ref()) {
            Some(s) => resolve_addr(s).context("bad --listen"),
            None => bail!(
                "a node that joins a cluster (--join, or one that joined before) needs --listen \
                 ADDR:PORT (`listen` in the config file): where its peers reach it"
            ),
        }
    }

    /// The peer address a joining node asks to be added with:
    /// `--advertise-peer`, else `listen` unless it is an unspecified IP.
    fn advertised_peer(&self, listen: SocketAddr, file: &FileConfig) -> anyhow::Result<String> {
        if let Some(a) = self.advertise_peer.as_ref().or(file.advertise_peer.as_ref()) {
            let ok = a.rsplit_once(':').is_some_and(|(host, port)| {
                let ip = host.trim_start_matches('[').trim_end_matches(']');
                !host.is_empty()
                    && matches!(port.parse::<u16>(), Ok(p) if p > 0)
                    && !ip.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_unspecified())
            });
            if !ok {
                bail!(
                    "--advertise-peer (advertise_peer): `{a}` is not a HOST:PORT other nodes can \
                     dial (for example 10.0.0.4:7001)"
                );
            }
            return Ok(a.clone());
        }
        if listen.ip().is_unspecified() {
            bail!(
                "--listen {listen} is not an address the other nodes can dial: give \
                 --advertise-peer HOST:PORT (advertise_peer), the address they reach this node at"
            );
        }
        Ok(listen.to_string())
    }

    /// The cluster id, from `--cluster-id`, the file or the default.
    fn cluster_id(&self, file: &FileConfig) -> String {
        self.cluster_id
            .clone()
            .or(file.cluster_id.clone())
            .unwrap_or_else(|| DEFAULT_CLUSTER_ID.to_string())
    }

    /// Who may call the API: the file's tokens (found beside it), or none
    /// with `--insecure-open-api`.
    fn api(&self, file: &FileConfig) -> anyhow::Result<ApiAuth> {
        tokens::server_auth(
            file.api_tokens.as_deref(),
            self.config.as_deref().and_then(Path::parent).unwrap_or(Path::new(".")),
            file.api_open_probes,
            self.insecure_open_api || file.insecure_open_api.unwrap_or(false),
        )
    }

    /// This node's id, from `--id` or the file.
    fn id(&self, file: &FileConfig) -> anyhow::Result<NodeId> {
        let id = self.id.or(file.id).context(
            "no node id: give --id N (a positive integer) or `id = N` in the config file",
        )?;
        node_id(id).map_err(|e| anyhow!("{e}; change --id (`id` in the config file)"))
    }

    /// The peer listener's address and the voters, this node included: from
    /// `--listen`, or this node's entry in the peer list.
    fn listen_and_peers(
        &self,
        id: NodeId,
        file: &FileConfig,
    ) -> anyhow::Result<(SocketAddr, Vec<(NodeId, SocketAddr)>)> {
        let mut peers = match (&self.peers, &file.peers) {
            (Some(flag), _) => parse_peers(flag).context("bad --peers")?,
            (None, Some(list)) => {
                parse_peers(&list.join(",")).context("bad `peers` in the config file")?
            }
            (None, None) => parse_peers(DEFAULT_PEERS).expect("the default peers parse"),
        };
        let own = peers.iter().find(|(p, _)| *p == id).map(|&(_, addr)| addr);
        let listen = match (self.listen.as_ref().or(file.listen.as_ref()), own) {
            (Some(s), _) => resolve_addr(s).context("bad --listen")?,
            (None, Some(addr)) => addr,
            (None, None) => bail!(
                "node {id} is not in the peer list {}; add it there or give --listen ADDR:PORT",
                format_peers(&peers)
            ),
        };
        if own.is_none() {
            peers.push((id, listen));
        }
        Ok((listen, peers))
    }

    /// Mutual TLS with the three files, or no TLS when asked for explicitly;
    /// anything else is an error that says how to make certificates or opt out.
    fn security(
        &self,
        id: NodeId,
        cluster_id: &str,
        file: &FileConfig,
    ) -> anyhow::Result<Security> {
        let cert = self.tls_cert.clone().or(file.tls_cert.clone());
        let key = self.tls_key.clone().or(file.tls_key.clone());
        let ca = self.tls_ca.clone().or(file.tls_ca.clone());
        let insecure = self.insecure_no_tls || file.insecure_no_tls.unwrap_or(false);
        let given: Vec<&str> = [(&cert, "--tls-cert"), (&key, "--tls-key"), (&ca, "--tls-ca")]
            .iter()
            .filter_map(|(v, flag)| v.is_some().then_some(*flag))
            .collect();
        match (cert, key, ca) {
            (Some(cert), Some(key), Some(ca)) if !insecure => {
                Ok(Security::MutualTls(TlsFiles { cert, key, ca }))
            }
            (None, None, None) if insecure => Ok(Security::InsecureNoTls),
            _ if insecure => bail!(
                "--insecure-no-tls (insecure_no_tls) and {} are both given: choose TLS or none",
                given.join(", ")
            ),
            (None, None, None) => bail!(
                "no TLS certificate: peer connections and the HTTP API use mutual TLS. Make a CA \
                 and node certificates with `tenure cert --out certs --nodes 1,2,3 --cluster-id \
                 {cluster_id}` and start this node with --tls-cert certs/node-{id}.pem --tls-key \
                 certs/node-{id}-key.pem --tls-ca certs/ca.pem (config file: tls_cert, tls_key, \
                 tls_ca). For development on one machine only, --insecure-no-tls \
                 (insecure_no_tls = true) runs without TLS"
            ),
            _ => {
                let missing: Vec<&str> = ["--tls-cert", "--tls-key", "--tls-ca"]
                    .into_iter()
                    .filter(|f| !given.contains(f))
                    .collect();
                bail!(
                    "TLS needs --tls-cert, --tls-key and --tls-ca (tls_cert, tls_key, tls_ca in the \
                     config file); missing {}",
                    missing.join(" and ")
                )
            }
        }
    }

    /// The nodes' HTTP API addresses: `--peer-http` (or the file's
    /// `peer_http`), else the default local cluster's when the voters are
    /// the default ones; this node's own from `--http` unless listed.
    fn http_addresses(
        &self,
        node: &NodeConfig,
        http: SocketAddr,
        file: &FileConfig,
    ) -> anyhow::Result<BTreeMap<NodeId, String>> {
        let mut addresses = match (&self.peer_http, &file.peer_http) {
            (Some(flag), _) => parse_http_addresses(flag).context("bad --peer-http")?,
            (None, Some(list)) => parse_http_addresses(&list.join(","))
                .context("bad `peer_http` in the config file")?,
            (None, None) if self.peers.is_none() && file.peers.is_none() && !node.joining => node
                .peers
                .iter()
                .filter_map(|(id, _)| {
                    let port = DEFAULT_HTTP_PORT_BASE.checked_add(u16::try_from(id.0).ok()?)?;
                    Some((*id, format!("127.0.0.1:{port}")))
                })
                .collect(),
            (None, None) => BTreeMap::new(),
        };
        // A joining node's members come later: it may name any of them.
        let stranger = addresses.keys().find(|id| !node.peers.iter().any(|(p, _)| p == *id));
        if let Some(stranger) = stranger.filter(|_| !node.joining) {
            bail!(
                "--peer-http (peer_http) names node {stranger}, which is not a voter; the voters \
                 are {}",
                format_peers(&node.peers)
            );
        }
        if !http.ip().is_unspecified() {
            addresses.entry(node.id).or_insert_with(|| http.to_string());
        }
        Ok(addresses)
    }

    /// The HTTP API's address: `--http`, or 127.0.0.1 on port 8000 + id.
    fn http(&self, id: NodeId, file: &FileConfig) -> anyhow::Result<SocketAddr> {
        if let Some(s) = self.http.as_ref().or(file.http.as_ref()) {
            return resolve_addr(s).context("bad --http");
        }
        let port = u16::try_from(id.0)
            .ok()
            .and_then(|n| DEFAULT_HTTP_PORT_BASE.checked_add(n))
            .with_context(|| {
                format!("node id {id} is too large for the default HTTP port 8000+id; give --http ADDR:PORT")
            })?;
        Ok(SocketAddr::from(([127, 0, 0, 1], port)))
    }
}

/// The flag and the config-file key that set a [`NodeConfig`] field.
fn setting(field: &str) -> Option<(&'static str, &'static str)> {
    Some(match field {
        "id" => ("--id", "id"),
        "cluster_id" => ("--cluster-id", "cluster_id"),
        "listen" => ("--listen", "listen"),
        "peers" => ("--peers", "peers"),
        "peer_http" => ("--peer-http", "peer_http"),
        "etcd_listen" => ("--etcd-listen", "etcd_listen"),
        "etcd_require_token" => ("--etcd-require-token", "etcd_require_token"),
        "single_node" => ("--single-node", "single_node"),
        "api_address" => ("--advertise-http", "advertise_http"),
        "data_dir" => ("--data-dir", "data_dir"),
        "heartbeat_interval" => ("--heartbeat-ms", "heartbeat_ms"),
        "election_timeout" => ("--election-timeout-ms", "election_timeout_ms"),
        "protocol" => ("--protocol", "protocol"),
        "round_trip" => ("--round-trip-ms", "round_trip_ms"),
        _ => return None,
    })
}

/// A configuration error with the flags and file keys to change.
fn explain(e: NodeConfigError) -> anyhow::Error {
    if let NodeConfigError::SingleVoter(id) = e {
        return anyhow!(
            "the voters are node {id} alone (--peers lists no other node): it would be its own \
             majority and lead by itself, beside the cluster it may be meant to join. List every \
             voter in --peers, the same list on every node (`peers` in the config file), or, \
             for a one-node cluster on purpose, add --single-node (single_node = true in the \
             config file)"
        );
    }
    let settings: Vec<_> = e.fields().iter().filter_map(|f| setting(f)).collect();
    if settings.is_empty() {
        return anyhow!("invalid configuration: {e}");
    }
    let flags: Vec<_> = settings.iter().map(|(flag, _)| *flag).collect();
    let keys: Vec<_> = settings.iter().map(|(_, key)| *key).collect();
    anyhow!(
        "invalid configuration: {e}; change {} (in the config file: {})",
        flags.join(" or "),
        keys.join(", ")
    )
}

/// Reads and parses the TOML config file; unknown keys are errors naming the key.
fn read_file(path: &Path) -> anyhow::Result<FileConfig> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the config file {}", path.display()))?;
    parse_file(&text).with_context(|| format!("bad config file {}", path.display()))
}

/// Parses the config file's text.
pub fn parse_file(text: &str) -> Result<FileConfig, toml::de::Error> {
    toml::from_str(text)
}

/// A node id from its number. Ids are positive: 0 names no node, in a flag
/// or in the peer list.
fn node_id(n: u64) -> anyhow::Result<NodeId> {
    if n == 0 {
        bail!("node id 0 is not allowed: node ids are positive integers");
    }
    Ok(NodeId(n))
}

/// Parses `1=host:port,2=host:port,...` keeping the order. Only the syntax is
/// checked here; the list as a set of voters (no id twice, at most 15, this
/// node among them) is checked with the other election settings.
pub fn parse_peers(text: &str) -> anyhow::Result<Vec<(NodeId, SocketAddr)>> {
    let mut peers: Vec<(NodeId, SocketAddr)> = Vec::new();
    for (item, id, addr) in entries(text, "1=10.0.0.1:7001")? {
        let addr = resolve_addr(addr).with_context(|| format!("`{item}`"))?;
        peers.push((id, addr));
    }
    if peers.is_empty() {
        bail!("the peer list is empty; list the voters as ID=HOST:PORT,...");
    }
    Ok(peers)
}

/// Parses the HTTP addresses `1=host:port,2=host:port,...`. The host is
/// kept as written (a name stays a name, for the TLS check of the node's
/// certificate); the port must be a number.
pub fn parse_http_addresses(text: &str) -> anyhow::Result<BTreeMap<NodeId, String>> {
    let mut addresses = BTreeMap::new();
    for (item, id, addr) in entries(text, "1=10.0.0.1:8001")? {
        let port_ok = addr
            .rsplit_once(':')
            .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
        if !port_ok {
            bail!("`{item}`: `{addr}` is not HOST:PORT (for example 10.0.0.1:8001)");
        }
        if addresses.insert(id, addr.to_string()).is_some() {
            bail!("`{item}`: node {id} is listed twice");
        }
    }
    Ok(addresses)
}

/// The `ID=VALUE` items of a comma-separated list: each item, its node id
/// and its value (trimmed); `example` shows the form in the error.
fn entries<'t>(text: &'t str, example: &str) -> anyhow::Result<Vec<(&'t str, NodeId, &'t str)>> {
    let mut out = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let Some((id, value)) = item.split_once('=') else {
            bail!("`{item}` is not of the form ID=HOST:PORT (for example {example})");
        };
        let id: u64 = id.trim().parse().map_err(|_| {
            anyhow::anyhow!("`{item}`: the node id `{id}` is not a positive integer")
        })?;
        let id = node_id(id).with_context(|| format!("`{item}`"))?;
        out.push((item, id, value.trim()));
    }
    Ok(out)
}

/// Turns `HOST:PORT` (an IP address or a host name) into a socket address.
fn resolve_addr(text: &str) -> anyhow::Result<SocketAddr> {
    if let Ok(addr) = text.parse() {
        return Ok(addr);
    }
    if !text.contains(':') {
        bail!("`{text}` has no port: write HOST:PORT, for example 127.0.0.1:7001");
    }
    text.to_socket_addrs()
        .with_context(|| format!("cannot resolve `{text}` (expected HOST:PORT)"))?
        .next()
        .with_context(|| format!("`{text}` resolves to no address"))
}

fn format_peers(peers: &[(NodeId, SocketAddr)]) -> String {
    peers.iter().map(|(id, addr)| format!("{id}={addr}")).collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn args(id: u64) -> ServerArgs {
        ServerArgs {
            id: Some(id),
            insecure_no_tls: true,
            insecure_open_api: true,
            ..ServerArgs::default()
        }
    }

    #[test]
    fn defaults_make_a_local_three_node_cluster() {
        let s = args(2).resolve().unwrap();
        assert_eq!(s.node.id, NodeId(2));
        assert_eq!(s.node.listen, "127.0.0.1:7002".parse().unwrap());
        assert_eq!(s.http, "127.0.0.1:8002".parse().unwrap());
        assert_eq!(s.node.peers.len(), 3);
        assert_eq!(s.node.data_dir, Path::new("./tenure-data/node-2"));
        assert_eq!(s.node.heartbeat_interval, Duration::from_millis(100));
        assert_eq!(s.node.election_timeout, Duration::from_millis(1000));
        assert_eq!(s.node.cluster_id, "tenure");
        assert_eq!(s.log_format, LogFormat::Text);
    }

    #[test]
    fn http_addresses_come_from_peer_http_or_the_local_defaults() {
        let s = args(2).resolve().unwrap();
        let local: Vec<(u64, &str)> =
            s.http_addresses.iter().map(|(id, a)| (id.0, a.as_str())).collect();
        assert_eq!(local, [(1, "127.0.0.1:8001"), (2, "127.0.0.1:8002"), (3, "127.0.0.1:8003")]);
        // Voters of one's own: only this node's, unless --peer-http names them.
        let mut a = args(2);
        a.peers = Some("1=10.0.0.1:7001,2=10.0.0.2:7001,3=10.0.0.3:7001".into());
        a.listen = Some("127.0.0.1:7002".into());
        a.http = Some("10.0.0.2:9000".into());
        let own: Vec<u64> = a.resolve().unwrap().http_addresses.keys().map(|id| id.0).collect();
        assert_eq!(own, [2]);
        a.peer_http = Some("1=db1.example:8001, 3=10.0.0.3:8001".into());
        let s = a.resolve().unwrap();
        assert_eq!(s.http_addresses[&NodeId(1)], "db1.example:8001", "names stay names");
        assert_eq!(s.http_addresses[&NodeId(2)], "10.0.0.2:9000");
        for (bad, says) in [
            ("4=10.0.0.4:8001", "not a voter"),
            ("1=10.0.0.1", "not HOST:PORT"),
            ("1=:8001", "not HOST:PORT"),
            ("1=10.0.0.1:8001,1=10.0.0.1:8002", "listed twice"),
            ("x=10.0.0.1:8001", "not a positive integer"),
            ("10.0.0.1:8001", "ID=HOST:PORT"),
        ] {
            a.peer_http = Some(bad.into());
            let err = format!("{:#}", a.resolve().unwrap_err());
            assert!(err.contains(says) && err.contains("--peer-http"), "{bad}: {err}");
        }
    }

    #[test]
    fn own_id_absent_from_peers_is_added_with_listen() {
        let mut a = args(4);
        a.peers = Some("1=127.0.0.1:7001,2=127.0.0.1:7002,3=127.0.0.1:7003".into());
        let err = a.resolve().unwrap_err().to_string();
        assert!(err.contains("--listen"), "{err}");
        a.listen = Some("127.0.0.1:7004".into());
        let s = a.resolve().unwrap();
        let ids: Vec<u64> = s.node.peers.iter().map(|(id, _)| id.0).collect();
        assert_eq!(ids, vec![1, 2, 3, 4]);
        assert_eq!(s.node.peers[3].1, "127.0.0.1:7004".parse().unwrap());
    }

    #[test]
    fn peer_order_is_kept() {
        let mut a = args(1);
        a.peers = Some("3=127.0.0.1:1,1=127.0.0.1:2,2=127.0.0.1:3".into());
        let s = a.resolve().unwrap();
        let ids: Vec<u64> = s.node.peers.iter().map(|(id, _)| id.0).collect();
        assert_eq!(ids, vec![3, 1, 2]);
        assert_eq!(s.node.listen, "127.0.0.1:2".parse().unwrap());
    }

    #[test]
    fn bad_peer_syntax_is_explained() {
        for (text, expect) in [
            ("1:127.0.0.1:7001", "ID=HOST:PORT"),
            ("x=127.0.0.1:7001", "not a positive integer"),
            ("0=127.0.0.1:7001", "positive integers"),
            ("1=127.0.0.1", "no port"),
            ("", "empty"),
        ] {
            let err = format!("{:#}", parse_peers(text).unwrap_err());
            assert!(err.contains(expect), "{text}: {err}");
        }
    }

    #[test]
    fn zero_or_missing_id_is_refused() {
        let err = args(0).resolve().unwrap_err().to_string();
        assert!(err.contains("positive") && err.contains("--id"), "{err}");
        let err = ServerArgs::default().resolve().unwrap_err().to_string();
        assert!(err.contains("--id"), "{err}");
    }

    #[test]
    fn file_settings_apply_and_flags_override_them() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        writeln!(
            f,
            "id = 2\ncluster_id = \"prod\"\npeers = [\"1=127.0.0.1:9001\", \"2=127.0.0.1:9002\", \"3=127.0.0.1:9003\"]\nheartbeat_ms = 50\nelection_timeout_ms = 500\nlog_format = \"json\"\nhttp = \"127.0.0.1:9102\"\ninsecure_no_tls = true\ninsecure_open_api = true"
        )
        .unwrap();
        let mut a = ServerArgs { config: Some(f.path().to_path_buf()), ..ServerArgs::default() };
        let s = a.resolve().unwrap();
        assert_eq!(s.node.id, NodeId(2));
        assert_eq!(s.node.cluster_id, "prod");
        assert_eq!(s.node.listen, "127.0.0.1:9002".parse().unwrap());
        assert_eq!(s.node.heartbeat_interval, Duration::from_millis(50));
        assert_eq!(s.log_format, LogFormat::Json);
        assert_eq!(s.http, "127.0.0.1:9102".parse().unwrap());
        a.heartbeat_ms = Some(20);
        a.cluster_id = Some("other".into());
        let s = a.resolve().unwrap();
        assert_eq!(s.node.heartbeat_interval, Duration::from_millis(20));
        assert_eq!(s.node.cluster_id, "other");
    }

    #[test]
    fn tls_needs_three_files_or_an_explicit_opt_out() {
        let mut a = ServerArgs { id: Some(2), insecure_open_api: true, ..ServerArgs::default() };
        let err = refused(&a);
        assert!(err.contains("no TLS certificate") && err.contains("tenure cert"), "{err}");
        assert!(err.contains("certs/node-2.pem") && err.contains("--insecure-no-tls"), "{err}");

        a.tls_cert = Some("n.pem".into());
        let err = refused(&a);
        assert!(err.contains("missing --tls-key and --tls-ca"), "{err}");
        a.tls_key = Some("n-key.pem".into());
        a.tls_ca = Some("ca.pem".into());
        let s = a.resolve().unwrap();
        let files = TlsFiles { cert: "n.pem".into(), key: "n-key.pem".into(), ca: "ca.pem".into() };
        assert_eq!(s.node.security, Security::MutualTls(files));

        a.insecure_no_tls = true;
        let err = refused(&a);
        assert!(err.contains("choose TLS or none"), "{err}");
        assert_eq!(args(1).resolve().unwrap().node.security, Security::InsecureNoTls);

        // With TLS the cluster id names nodes in certificates.
        let mut a = ServerArgs { insecure_no_tls: false, ..a };
        a.cluster_id = Some("prod db".into());
        let err = refused(&a);
        assert!(err.contains("must be a DNS name") && err.contains("--cluster-id"), "{err}");
    }

    #[test]
    fn tls_files_come_from_the_config_file_too() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        writeln!(
            f,
            "id = 1\ntls_cert = \"c.pem\"\ntls_key = \"k.pem\"\ntls_ca = \"ca.pem\"\ninsecure_open_api = true"
        )
        .unwrap();
        let a = ServerArgs { config: Some(f.path().to_path_buf()), ..ServerArgs::default() };
        let files = TlsFiles { cert: "c.pem".into(), key: "k.pem".into(), ca: "ca.pem".into() };
        assert_eq!(a.resolve().unwrap().node.security, Security::MutualTls(files));
    }

    #[test]
    fn api_tokens_come_from_the_file_and_are_required() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("ops.token");
        std::fs::write(&token, "0123456789abcdef0123\n").unwrap();
        std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
        let config = dir.path().join("tenure.toml");
        std::fs::write(
            &config,
            "id = 1\ninsecure_no_tls = true\napi_open_probes = false\n\
             [[api_tokens]]\nname = \"ops\"\nrole = \"admin\"\ntoken_file = \"ops.token\"\n",
        )
        .unwrap();
        let a = ServerArgs { config: Some(config.clone()), ..ServerArgs::default() };
        let s = a.resolve().unwrap();
        assert_eq!(s.api.tokens().len(), 1);
        assert!(!s.api.probes_open());
        assert!(!format!("{s:?}").contains("0123456789abcdef0123"), "settings show no secret");

        let err =
            refused(&ServerArgs { id: Some(1), insecure_no_tls: true, ..ServerArgs::default() });
        assert!(
            err.contains("no tokens configured") && err.contains("--insecure-open-api"),
            "{err}"
        );
        std::fs::write(
            &config,
            "id = 1\ninsecure_no_tls = true\n[[api_tokens]]\nname = \"ops\"\nrole = \"root\"\n",
        )
        .unwrap();
        let err = refused(&a);
        assert!(
            err.contains("unknown variant `root`, expected one of `read`, `write`, `admin`"),
            "{err}"
        );
    }

    #[test]
    fn the_config_example_of_the_help_parses() {
        use clap::Args;
        let help = ServerArgs::augment_args(clap::Command::new("server"))
            .get_after_help()
            .expect("an after-help")
            .to_string();
        let example: String = help
            .lines()
            .skip_while(|l| !l.starts_with("Config file"))
            .skip(1)
            .take_while(|l| !l.trim().is_empty())
            .map(|l| format!("{}\n", l.trim_start()))
            .collect();
        let file: FileConfig =
            toml::from_str(&example).unwrap_or_else(|e| panic!("{e}\n{example}"));
        assert_eq!(file.api_tokens.map(|t| t.len()), Some(1), "{example}");
        assert_eq!(file.api_open_probes, Some(true), "{example}");
    }

    #[test]
    fn unknown_file_keys_are_named() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        writeln!(f, "id = 1\nheartbeat = 100").unwrap();
        let a = ServerArgs { config: Some(f.path().to_path_buf()), ..ServerArgs::default() };
        let err = format!("{:#}", a.resolve().unwrap_err());
        assert!(err.contains("unknown field `heartbeat`"), "{err}");
    }

    /// The resolved settings' error, in full.
    fn refused(a: &ServerArgs) -> String {
        format!("{:#}", a.resolve().expect_err("the settings must be refused"))
    }

    /// Election settings are checked by the core; the message names the flags
    /// and file keys that set them.
    #[test]
    fn election_settings_errors_name_the_flags() {
        let mut a = args(1);
        a.heartbeat_ms = Some(100);
        a.election_timeout_ms = Some(200);
        let err = refused(&a);
        assert!(err.contains("at least 4 heartbeat intervals"), "{err}");
        assert!(err.contains("--election-timeout-ms or --heartbeat-ms"), "{err}");
        assert!(err.contains("election_timeout_ms, heartbeat_ms"), "{err}");

        let mut a = args(1);
        a.heartbeat_ms = Some(0);
        let err = refused(&a);
        assert!(err.contains("heartbeat interval must be positive"), "{err}");
        assert!(err.contains("change --heartbeat-ms"), "{err}");

        let mut a = args(1);
        a.round_trip_ms = Some(150);
        let err = refused(&a);
        assert!(err.contains("round-trip bound"), "{err}");
        assert!(err.contains("change --round-trip-ms"), "{err}");
    }

    #[test]
    fn the_voter_list_is_checked_by_the_core() {
        let mut a = args(1);
        a.peers = Some("1=127.0.0.1:1,2=127.0.0.1:2,1=127.0.0.1:3".into());
        let err = refused(&a);
        assert!(err.contains("node id 1 is listed more than once"), "{err}");
        assert!(err.contains("change --peers"), "{err}");

        let many: Vec<String> = (1..=16).map(|i| format!("{i}=127.0.0.1:{}", 7000 + i)).collect();
        a.peers = Some(many.join(","));
        let err = refused(&a);
        assert!(err.contains("16 voters; at most 15"), "{err}");
        assert!(err.contains("change --peers"), "{err}");
    }

    #[test]
    fn the_node_checks_cluster_id_and_addresses() {
        let mut a = args(1);
        a.cluster_id = Some(String::new());
        let err = refused(&a);
        assert!(err.contains("cluster id must be 1 to 128 bytes"), "{err}");
        assert!(err.contains("change --cluster-id"), "{err}");

        let mut a = args(1);
        a.peers = Some("1=127.0.0.1:7001,2=127.0.0.1:7001".into());
        let err = refused(&a);
        assert!(err.contains("the same address 127.0.0.1:7001"), "{err}");
        assert!(err.contains("change --peers"), "{err}");
    }

    /// A peer list of this node alone is refused, naming --single-node;
    /// with it, it runs; --single-node with other voters is refused.
    #[test]
    fn a_lone_voter_needs_single_node() {
        let mut a = args(2);
        a.peers = Some("2=127.0.0.1:7002".into());
        let err = refused(&a);
        assert!(err.contains("the voters are node 2 alone"), "{err}");
        assert!(err.contains("add --single-node (single_node = true"), "{err}");
        a.single_node = true;
        let s = a.resolve_with(FileConfig::default()).expect("a one-node cluster on purpose");
        assert!(s.node.single_node);
        let file = parse_file("single_node = true\npeers = [\"2=127.0.0.1:7002\"]").unwrap();
        let mut b = args(2);
        b.single_node = false;
        assert!(b.resolve_with(file).unwrap().node.single_node);
        let mut c = args(2);
        c.single_node = true;
        let err = refused(&c);
        assert!(err.contains("single_node is set") && err.contains("--single-node"), "{err}");
    }

    /// --join: no --peers, --listen required, the advertised peer address
    /// from --listen or --advertise-peer, the CA from --tls-ca by default;
    /// its flags only with it.
    #[test]
    fn join_takes_its_members_from_the_cluster() {
        let mut a = args(4);
        a.join = Some("127.0.0.1:8001,127.0.0.1:8002".into());
        let err = refused(&a);
        assert!(err.contains("needs --listen"), "{err}");
        a.listen = Some("127.0.0.1:7004".into());
        let s = a.resolve_with(FileConfig::default()).unwrap();
        assert!(s.node.joining);
        let join = s.join.clone().expect("join settings");
        assert_eq!(join.address, "127.0.0.1:7004");
        assert_eq!(join.endpoints, "127.0.0.1:8001,127.0.0.1:8002");
        assert_eq!(join.cacert, None, "no TLS, no CA");
        let mut s = s;
        s.with_members(vec![(NodeId(1), "127.0.0.1:7001".parse().unwrap())]).unwrap();
        assert_eq!(s.node.peers.len(), 1);

        a.peers = Some("1=127.0.0.1:7001".into());
        assert!(refused(&a).contains("--join (join) and --peers (peers) are both given"));
        a.peers = None;
        a.listen = Some("0.0.0.0:7004".into());
        assert!(refused(&a).contains("--advertise-peer"));
        a.advertise_peer = Some("db4.example:7004".into());
        assert_eq!(
            a.resolve_with(FileConfig::default()).unwrap().join.unwrap().address,
            "db4.example:7004"
        );
        a.advertise_peer = Some("0.0.0.0:7004".into());
        assert!(refused(&a).contains("not a HOST:PORT other nodes can dial"));
        a.advertise_peer = None;
        a.listen = Some("127.0.0.1:7004".into());
        // The other nodes' HTTP addresses may be named before they are known.
        a.peer_http = Some("1=127.0.0.1:8001".into());
        assert!(a.resolve_with(FileConfig::default()).is_ok());

        let mut b = args(4);
        b.join_token_file = Some("admin.token".into());
        assert!(refused(&b).contains("apply only with --join"));
        let file = parse_file(
            "join = [\"10.0.0.1:8001\"]\nlisten = \"10.0.0.4:7001\"\njoin_cacert = \"ca.pem\"",
        )
        .unwrap();
        let s = args(4).resolve_with(file).unwrap();
        let join = s.join.unwrap();
        assert_eq!(
            (join.endpoints.as_str(), join.cacert),
            ("10.0.0.1:8001", Some("ca.pem".into()))
        );
    }

    /// A node that joined restarts from the members it recorded, without
    /// --join or --peers.
    #[test]
    fn a_joined_node_restarts_from_its_record() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = args(4);
        a.data_dir = Some(dir.path().join("node-4"));
        a.listen = Some("127.0.0.1:7004".into());
        let peers = vec![(NodeId(1), "127.0.0.1:7001".parse().unwrap())];
        let joined = record::JoinRecord::new(NodeId(4), "tenure", &peers);
        record::write(&dir.path().join("node-4"), &joined).unwrap();
        let s = a.resolve().unwrap();
        assert!(s.node.joining && s.join.is_none());
        assert_eq!(s.node.peers, peers);
        assert_eq!(s.http_addresses.keys().copied().collect::<Vec<_>>(), [NodeId(4)]);
        // --peers given: the record is not read.
        a.peers = Some("1=127.0.0.1:7001,2=127.0.0.1:7002,4=127.0.0.1:7004".into());
        let s = a.resolve().unwrap();
        assert!(!s.node.joining && s.node.peers.len() == 3);
    }

    /// --advertise-http applies to a node too (what it tells its peers at
    /// the handshake), and must be HOST:PORT.
    #[test]
    fn advertise_http_is_told_to_the_peers() {
        let mut a = args(1);
        a.store_mode.advertise_http = Some("db1.example:8001".into());
        let s = a.resolve_with(FileConfig::default()).unwrap();
        assert_eq!(s.node.api_address.as_deref(), Some("db1.example:8001"));
        a.store_mode.advertise_http = Some("db1.example".into());
        let err = refused(&a);
        assert!(err.contains("--advertise-http") && err.contains("not HOST:PORT"), "{err}");
    }
}
