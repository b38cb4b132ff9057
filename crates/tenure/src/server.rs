//! `tenure server`: runs one node and its HTTP API until SIGTERM or Ctrl-C.

use crate::config::ServerArgs;
use crate::http::{router, AppState};
use crate::logging;
use crate::metrics::Metrics;
use anyhow::Context;
use std::process::ExitCode;
use std::time::Duration;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;
use tracing::{info, warn};

/// How long open HTTP connections may take to finish once the node has stopped.
const HTTP_SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// Runs the server; returns when it has shut down.
pub async fn run(args: ServerArgs) -> anyhow::Result<ExitCode> {
    let settings = args.resolve()?;
    logging::init(settings.log_format);
    let config = settings.node;
    let id = config.id;

    // Bind the API first: a port clash is then reported before the node joins
    // the cluster and starts voting.
    let http_listener = tokio::net::TcpListener::bind(settings.http)
        .await
        .with_context(|| format!("cannot listen for HTTP on {}", settings.http))?;
    let http_addr = http_listener.local_addr()?;

    let peers = config.peers.iter().map(|(p, a)| format!("{p}={a}")).collect::<Vec<_>>().join(",");
    let data_dir = config.data_dir.clone();
    let node =
        tenure_node::start(config).await.with_context(|| format!("node {id} cannot start"))?;
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
    tokio::spawn(metrics.clone().track_failovers(handle.leadership()));

    let (stop_tx, stop_rx) = watch::channel(false);
    let app = router(AppState::new(handle.clone(), metrics, stop_rx.clone()));
    let mut http_stop = stop_rx.clone();
    let http = tokio::spawn(async move {
        axum::serve(http_listener, app)
            .with_graceful_shutdown(async move {
                let _ = http_stop.wait_for(|s| *s).await;
            })
            .await
    });

    let reason = tokio::select! {
        r = wait_for_stop() => r?,
        _ = handle.stop_requested() => "stop requested",
    };
    info!(node = %id, signal = reason, "shutting down: ceding leadership first");
    // Cede leadership while the API still answers, so clients can watch the handover.
    node.shutdown().await;
    let _ = stop_tx.send(true);
    match tokio::time::timeout(HTTP_SHUTDOWN_GRACE, http).await {
        Ok(Ok(Ok(()))) => {}
        Ok(Ok(Err(e))) => warn!(error = %e, "HTTP server error"),
        Ok(Err(e)) => warn!(error = %e, "HTTP server task failed"),
        Err(_) => warn!("HTTP connections still open after {HTTP_SHUTDOWN_GRACE:?}; closing"),
    }
    info!(node = %id, "stopped");
    Ok(ExitCode::SUCCESS)
}

/// Waits for SIGTERM or SIGINT (Ctrl-C); returns the signal's name.
async fn wait_for_stop() -> anyhow::Result<&'static str> {
    let mut term = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
    Ok(tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    })
}
