//! A tenure server in-process: a node of the cluster and its HTTP API, on
//! listeners the caller bound, until a shutdown future completes.
//!
//! `tenure server` binds the listeners from its settings and passes SIGTERM
//! and Ctrl-C as the shutdown; tests and embedders bind `127.0.0.1:0` and pass
//! any future (a oneshot receiver, say).

use crate::http::{self, router, AppState, HttpLimits};
use crate::metrics::Metrics;
use std::future::Future;
use std::net::TcpListener;
use tenure_core::NodeId;
use tenure_node::{NodeConfig, StartError};
use tokio::sync::watch;
use tracing::{info, warn};

/// What a server runs with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerConfig {
    /// The node: its id, cluster, peers, data directory and election settings.
    /// `node.listen` is not bound by [`run`]: the peer listener is passed in.
    pub node: NodeConfig,
    /// The HTTP server's connection cap and timeouts.
    pub http: HttpLimits,
}

impl ServerConfig {
    /// A server for `node` with the default HTTP limits.
    pub fn new(node: NodeConfig) -> Self {
        ServerConfig { node, http: HttpLimits::default() }
    }
}

/// Why a server could not run.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The HTTP listener could not be handed to the async runtime.
    #[error("the HTTP listener cannot be used")]
    HttpListener(#[source] std::io::Error),
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

/// Runs a node on `peer_listener` and its HTTP API on `http_listener` until
/// `shutdown` completes or the node is asked to stop; then the node cedes
/// leadership if it leads (while the API still answers, so clients can watch
/// the handover), stops, and the HTTP server closes its connections.
pub async fn run(
    config: ServerConfig,
    peer_listener: TcpListener,
    http_listener: TcpListener,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServerError> {
    let ServerConfig { node: node_config, http: limits } = config;
    let http_listener = async_listener(http_listener).map_err(ServerError::HttpListener)?;
    let http_addr = http_listener.local_addr().map_err(ServerError::HttpListener)?;
    let id = node_config.id;
    let peers =
        node_config.peers.iter().map(|(p, a)| format!("{p}={a}")).collect::<Vec<_>>().join(",");
    let data_dir = node_config.data_dir.clone();
    let node = tenure_node::start_with_listener(node_config, peer_listener)
        .await
        .map_err(|source| ServerError::Node { id, source })?;
    let handle = node.handle();
    info!(
        node = %id,
        peer_addr = %node.peer_addr(),
        http = %http_addr,
        peers = %peers,
        data_dir = %data_dir.display(),
        "tenure node started"
    );

    let metrics = Metrics::default();
    let failovers = tokio::spawn(metrics.clone().track_failovers(handle.leadership()));
    let (stopping_tx, stopping) = watch::channel(false);
    let app = router(AppState::new(handle.clone(), metrics, stopping.clone()));
    let mut http_stop = stopping;
    let http = tokio::spawn(http::serve(http_listener, app, limits, async move {
        let _ = http_stop.wait_for(|s| *s).await;
    }));

    let reason = tokio::select! {
        () = shutdown => "shutdown signal",
        () = handle.stop_requested() => "stop requested",
    };
    info!(node = %id, reason, "shutting down: ceding leadership first");
    node.shutdown().await;
    let _ = stopping_tx.send(true);
    if let Err(e) = http.await {
        warn!(error = %e, "the HTTP server task failed");
    }
    failovers.abort();
    info!(node = %id, "stopped");
    Ok(())
}

/// A bound std listener as a tokio one.
fn async_listener(listener: TcpListener) -> std::io::Result<tokio::net::TcpListener> {
    listener.set_nonblocking(true)?;
    tokio::net::TcpListener::from_std(listener)
}
