//! The accept loop: admits connections up to the cap, refuses the rest at
//! once, and closes gracefully on shutdown.

use super::conn;
use super::limits::{HttpLimits, MAX_REFUSALS, SHUTDOWN_GRACE};
use axum::Router;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tenure_node::RateLimitedLog;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;
use tokio::time::{sleep, timeout};
use tracing::warn;

/// Pause after a failed `accept` (e.g. out of file descriptors).
const ACCEPT_ERROR_BACKOFF: Duration = Duration::from_millis(50);

/// The reason a connection over the cap is counted under in the refusal log
/// (instead of a line each).
const OVER_CAP: &str = "503 too many connections";
/// The same, for one closed unanswered because [`MAX_REFUSALS`] are being answered.
const OVER_CAP_DROPPED: &str = "too many connections, closed unanswered";

/// Serves `app` on `listener` within `limits` until `shutdown` completes;
/// then stops accepting, lets requests in progress finish for at most
/// [`SHUTDOWN_GRACE`] and closes every connection. Connections over the cap
/// are counted in `rejections`.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: HttpLimits,
    rejections: Arc<RateLimitedLog>,
    shutdown: impl Future<Output = ()>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let refusals = Arc::new(Semaphore::new(MAX_REFUSALS));
    let (closing_tx, closing) = watch::channel(false);
    let mut conns = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, remote)) => match slots.clone().try_acquire_owned() {
                    Ok(slot) => {
                        let app = app.clone();
                        conns.spawn(conn::serve(stream, remote, app, limits, closing.clone(), slot));
                    }
                    Err(_) => match refusals.clone().try_acquire_owned() {
                        Ok(refusal) => {
                            rejections.record(OVER_CAP, Some(remote.ip()));
                            conns.spawn(conn::refuse(stream, limits, refusal));
                        }
                        Err(_) => rejections.record(OVER_CAP_DROPPED, Some(remote.ip())),
                    },
                },
                Err(e) => {
                    warn!(error = %e, "accepting an HTTP connection failed");
                    sleep(ACCEPT_ERROR_BACKOFF).await;
                }
            },
            Some(_) = conns.join_next() => {}
        }
    }
    drop(listener);
    let _ = closing_tx.send(true);
    let drain = async { while conns.join_next().await.is_some() {} };
    if timeout(SHUTDOWN_GRACE, drain).await.is_err() {
        warn!("HTTP connections still open after {SHUTDOWN_GRACE:?}; closing them");
    }
    conns.shutdown().await;
}
