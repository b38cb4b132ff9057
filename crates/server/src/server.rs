//! A tenure server in-process: a node of the cluster and its HTTP API, on
//! listeners the caller bound, until a shutdown future completes.
//!
//! `tenure server` binds the listeners from its settings and passes SIGTERM
//! and Ctrl-C as the shutdown; tests and embedders bind `127.0.0.1:0` and pass
//! any future (a oneshot receiver, say).

use crate::http::{self, router, ApiAuth, AppState, HttpLimits, REJECTION_LOG_INTERVAL};
use crate::join::{Join, JoinError};
use crate::metrics::Metrics;
use std::collections::BTreeMap;
use std::future::Future;
use std::net::TcpListener;
use std::sync::Arc;
use tenure_core::NodeId;
use tenure_kv::Store;
use tenure_node::{NodeConfig, RateLimitedLog, Security, StartError};
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;
use tracing::{info, warn};

/// What a server runs with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerConfig {
    /// The node: its id, cluster, peers, data directory and election settings.
    /// `node.listen` is not bound by [`run`]: the peer listener is passed in.
    pub node: NodeConfig,
    /// The HTTP server's connection cap and timeouts.
    pub http: HttpLimits,
    /// Who may call the API: its bearer tokens and roles.
    pub api: ApiAuth,
    /// The HTTP API addresses (HOST:PORT) of the nodes, this one included
    /// where known: `GET /v1/cluster` and the dashboard read the others'
    /// status there, `GET /v1/leader` names the leader's.
    pub http_addresses: BTreeMap<NodeId, String>,
    /// For a node that joins a running cluster (`node.joining`): how it
    /// asks the cluster to add it once it runs ([`crate::join`]); `None`
    /// for a member of the bootstrap list.
    pub join: Option<Join>,
    /// Where to serve etcd's v3 gRPC API over the node's store
    /// (`--etcd-listen`; [`tenure_etcd_server`]), if anywhere: bound before
    /// the node starts.
    pub etcd_listen: Option<std::net::SocketAddr>,
    /// Whether every etcd call but Authenticate must carry an API token
    /// (`--etcd-require-token`); otherwise a call without one is the client
    /// certificate's, an administrator's (docs/ETCD.md).
    pub etcd_require_token: bool,
}

impl ServerConfig {
    /// A server for `node` with the default HTTP limits and no API tokens:
    /// only the open probes (`/healthz`, `/v1/is-leader`) answer until
    /// [`ServerConfig::api`] is given tokens.
    pub fn new(node: NodeConfig) -> Self {
        ServerConfig {
            node,
            http: HttpLimits::default(),
            api: ApiAuth::default(),
            http_addresses: BTreeMap::new(),
            join: None,
            etcd_listen: None,
            etcd_require_token: false,
        }
    }
}

/// Why a server could not run.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The HTTP listener could not be handed to the async runtime.
    #[error("the HTTP listener cannot be used")]
    HttpListener(#[source] std::io::Error),
    /// The node's own threads could not be started.
    #[error("cannot start the node's threads")]
    NodeRuntime(#[source] std::io::Error),
    /// The etcd listener (`--etcd-listen`) could not be bound.
    #[error("cannot listen for etcd's API on {address}")]
    EtcdListener {
        /// The address.
        address: std::net::SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The node could not join the cluster (`--join`); it stopped again.
    #[error("node {id} cannot join the cluster")]
    Join {
        /// The node's id.
        id: NodeId,
        /// Why.
        #[source]
        source: JoinError,
    },
    /// A majority of the node's voters told it that it was removed from the
    /// cluster while it was away; it stopped.
    #[error(transparent)]
    Removed(tenure_node::transport::Removal),
    /// The node did not start (invalid configuration, data directory, state file).
    #[error("node {id} cannot start")]
    Node {
        /// The node's id.
        id: NodeId,
        /// Why.
        #[source]
        source: StartError,
    },
}

/// Runs a node on `peer_listener` and its HTTP API on `http_listener` (HTTPS
/// with the node's certificate, unless the node runs without TLS) until
/// `shutdown` completes or the node is asked to stop; then the node cedes
/// leadership if it leads (while the API still answers, so clients can watch
/// the handover), stops, and the HTTP server closes its connections.
pub async fn run(
    config: ServerConfig,
    peer_listener: TcpListener,
    http_listener: TcpListener,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServerError> {
    let ServerConfig {
        node: mut node_config,
        http: limits,
        api,
        http_addresses,
        join,
        etcd_listen,
        etcd_require_token,
    } = config;
    let http_listener = async_listener(http_listener).map_err(ServerError::HttpListener)?;
    let etcd_listener = match etcd_listen {
        Some(address) => {
            let failed = |source| ServerError::EtcdListener { address, source };
            let listener = TcpListener::bind(address).map_err(failed)?;
            // Told to the peers at every handshake, as the API address
            // below: they list it in etcd's MemberList and send it the
            // member changes asked of them.
            node_config.etcd_address = Some(listener.local_addr().map_err(failed)?.to_string());
            Some(listener)
        }
        None => None,
    };
    let etcd_tls = match &node_config.security {
        Security::MutualTls(files) => Some(files.clone()),
        Security::InsecureNoTls => None,
    };
    let http_addr = http_listener.local_addr().map_err(ServerError::HttpListener)?;
    // Told to the peers at every handshake; an unspecified IP (0.0.0.0:8001)
    // as it is: each peer puts in the IP it dials this node at.
    node_config.api_address.get_or_insert_with(|| http_addr.to_string());
    let id = node_config.id;
    let peers =
        node_config.peers.iter().map(|(p, a)| format!("{p}={a}")).collect::<Vec<_>>().join(",");
    let data_dir = node_config.data_dir.clone();
    let own_peers = node_config.peers.clone();
    let cluster_id = node_config.cluster_id.clone();
    let peer_roots = match &node_config.security {
        Security::MutualTls(files) => Some(
            tenure_node::tls::read_roots(&files.ca)
                .map_err(|source| ServerError::Node { id, source: source.into() })?,
        ),
        Security::InsecureNoTls => None,
    };
    raise_open_file_limit(id, &limits, etcd_listener.is_some());
    let node_runtime = NodeRuntime::new().map_err(ServerError::NodeRuntime)?;
    let started = node_runtime
        .spawn(tenure_node::start_replicated::<Store>(node_config, Some(peer_listener)));
    let (node, kv) = match started.await {
        Ok(started) => started.map_err(|source| ServerError::Node { id, source })?,
        Err(e) => return Err(ServerError::NodeRuntime(std::io::Error::other(e.to_string()))),
    };
    let handle = node.handle();
    // HTTPS with the node's own certificate; plain HTTP only in the insecure mode.
    let tls = node.tls().map(|t| TlsAcceptor::from(t.https_server_config()));
    if tls.is_none() {
        warn!(
            node = %id,
            http = %http_addr,
            "INSECURE: the HTTP API runs without TLS (insecure_no_tls); anyone who reaches it \
             reads plain text. Use this on a development machine only"
        );
    }
    info!(
        node = %id,
        peer_addr = %node.peer_addr(),
        http = %http_addr,
        https = tls.is_some(),
        peers = %peers,
        data_dir = %data_dir.display(),
        "tenure node started"
    );

    log_api_access(&api);

    let metrics = Metrics::default();
    let failovers = tokio::spawn(metrics.clone().track_node_failovers(handle.clone()));
    let rejections = Arc::new(RateLimitedLog::new("HTTP requests", REJECTION_LOG_INTERVAL));
    let rejection_summaries = tokio::spawn({
        let rejections = rejections.clone();
        async move { rejections.run().await }
    });
    let (stopping_tx, stopping) = watch::channel(false);
    // The lease clock of sessions, on the ready leader; renewals from every node.
    let sessions =
        tokio::spawn(crate::sessions::run(kv.clone(), metrics.clone(), stopping.clone()));
    // The groups keeper, on the ready leader.
    let groups = tokio::spawn(crate::groups::run(kv.clone(), metrics.clone(), stopping.clone()));
    let joining = join.map(|j| {
        let (dir, cluster) = (data_dir.clone(), cluster_id.clone());
        tokio::spawn(crate::join::run(j, handle.clone(), kv.clone(), dir, cluster))
    });
    let stop_joining = joining.as_ref().map(|task| task.abort_handle());
    // This node's renewals, gathered into asks to the leader.
    let renewer = crate::sessions::Renewer::start(kv.clone());
    let etcd = etcd_listener.map(|listener| {
        let ctx = tenure_etcd_server::Context {
            node: handle.clone(),
            kv: kv.clone(),
            peer_addresses: own_peers.iter().map(|(id, a)| (*id, a.to_string())).collect(),
            tls: etcd_tls.is_some(),
            sessions: Arc::new(crate::sessions::EtcdSessionClock {
                kv: kv.clone(),
                renewer: renewer.clone(),
            }),
            auth: crate::etcd_auth::etcd_auth(&api, etcd_require_token, &cluster_id),
        };
        let mut stop = stopping.clone();
        tokio::spawn(async move {
            let shutdown = async move {
                let _ = stop.wait_for(|s| *s).await;
            };
            if let Err(e) =
                tenure_etcd_server::serve(ctx, listener, etcd_tls.as_ref(), shutdown).await
            {
                tracing::error!(error = %e, source = ?std::error::Error::source(&e), "the etcd API stopped");
            }
        })
    });
    let log = kv.clone();
    let state = AppState::new(
        handle.clone(),
        kv,
        renewer,
        metrics,
        api,
        rejections.clone(),
        stopping.clone(),
    )
    .with_cluster(http_addresses, peer_roots)
    .with_peer_addresses(&own_peers);
    let app = router(state);
    let mut http_stop = stopping;
    let serving = http::serve(http_listener, app, limits, tls, rejections.clone(), async move {
        let _ = http_stop.wait_for(|s| *s).await;
    });
    let http = tokio::spawn(serving);

    let (reason, refused, removed) = tokio::select! {
        () = shutdown => ("shutdown signal", None, None),
        () = handle.stop_requested() => ("stop requested", None, None),
        refused = join_refused(joining) => ("the cluster did not add this node", Some(refused), None),
        removal = handle.removed() => {
            tracing::error!(error = %removal, "removed from the cluster: stopping");
            ("removed from the cluster", None, Some(removal))
        }
    };
    if let Some(task) = stop_joining {
        task.abort();
    }
    info!(node = %id, reason, "shutting down: ceding leadership first");
    tenure_node::replicated::handover::before_stop(&handle, &log).await;
    node.shutdown().await;
    let _ = stopping_tx.send(true);
    if let Err(e) = http.await {
        warn!(error = %e, "the HTTP server task failed");
    }
    if let Some(etcd) = etcd {
        if let Err(e) = etcd.await {
            warn!(error = %e, "the etcd API task failed");
        }
    }
    failovers.abort();
    sessions.abort();
    groups.abort();
    rejection_summaries.abort();
    rejections.flush();
    info!(node = %id, "stopped");
    match (refused, removed) {
        (Some(source), _) => Err(ServerError::Join { id, source }),
        (None, Some(removal)) => Err(ServerError::Removed(removal)),
        (None, None) => Ok(()),
    }
}

/// Completes with the reason the join task gave up, if it does; never
/// while it runs, once it succeeded, or without one.
async fn join_refused(task: Option<tokio::task::JoinHandle<Result<(), JoinError>>>) -> JoinError {
    if let Some(task) = task {
        if let Ok(Err(e)) = task.await {
            tracing::error!(error = %e, "the cluster did not add this node: stopping");
            return e;
        }
    }
    std::future::pending().await
}

/// Says at start who may call the API (token names and roles, never values).
pub(crate) fn log_api_access(api: &ApiAuth) {
    let probes = if api.probes_open() { "open to anyone" } else { "need a read token" };
    if api.is_insecure_open() {
        warn!(
            "the HTTP API is open to anyone, transfer included (insecure open API): \
             for local tests only; configure api_tokens instead"
        );
    } else if api.tokens().is_empty() {
        warn!(probes, "no API tokens: every endpoint but the open probes answers 401");
    } else {
        let tokens =
            api.tokens().iter().map(|t| format!("{} ({})", t.name(), t.role())).collect::<Vec<_>>();
        info!(tokens = %tokens.join(", "), probes, "HTTP API tokens loaded");
    }
}

/// Worker threads of the node's own runtime: the election driver, the peer
/// transport and the replicated log's task. Two, so that a log task busy
/// applying or a peer's TLS handshake never holds the driver up.
pub const NODE_WORKER_THREADS: usize = 2;

/// The node's own tokio runtime. The election driver must wake on time
/// (heartbeats, acknowledgements, persisting a vote) whatever the API's
/// clients ask: on the API's runtime, one slow handler holding a worker
/// thread delayed it past an election timeout. Here no request handler
/// ever runs on its threads; the kernel shares the cores between them and
/// the API's threads. Dropped by shutting down in the background, which is
/// allowed inside the API's runtime (a plain drop there panics).
struct NodeRuntime {
    handle: tokio::runtime::Handle,
    /// Taken only on drop.
    runtime: Option<tokio::runtime::Runtime>,
}

impl NodeRuntime {
    fn new() -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(NODE_WORKER_THREADS)
            .thread_name("tenure-node")
            .enable_all()
            .build()?;
        Ok(NodeRuntime { handle: runtime.handle().clone(), runtime: Some(runtime) })
    }

    /// Runs `task` on the node's threads; everything it spawns stays there.
    fn spawn<F>(&self, task: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.handle.spawn(task)
    }
}

impl Drop for NodeRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// A bound std listener as a tokio one.
fn async_listener(listener: TcpListener) -> std::io::Result<tokio::net::TcpListener> {
    listener.set_nonblocking(true)?;
    tokio::net::TcpListener::from_std(listener)
}

/// Open files the server needs beside its HTTP connections: the peer
/// transport (a connection per peer and the inbound handshakes), the log's
/// and the state's files, the listeners, and room for the runtime.
const OTHER_OPEN_FILES: u64 = 128;

/// Raises the soft limit of open files to the hard one (as Go's runtime
/// does; the usual soft limit of 1,024 is below what the HTTP pools and the
/// etcd listener may hold), and warns when it is still below what they
/// need: the server then fails to accept at the limit, and strangers'
/// connections could hold files the proven ones need.
fn raise_open_file_limit(id: NodeId, limits: &HttpLimits, etcd: bool) {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let etcd_connections = if etcd { tenure_etcd_server::connections::MAX_CONNECTIONS } else { 0 };
    let needed =
        (limits.max_connections + limits.max_unproven + etcd_connections) as u64 + OTHER_OPEN_FILES;
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else { return };
    let soft = if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        hard
    } else {
        soft
    };
    if soft < needed {
        warn!(
            node = %id,
            open_files = soft,
            needed,
            "the limit of open files is below what the HTTP connection pools and the etcd \
             listener may hold; raise it \
             (ulimit -n, or LimitNOFILE= in the systemd unit)"
        );
    }
}
