//! The accept loop: admits connections up to the cap, refuses the rest at
//! once, and closes gracefully on shutdown. With TLS, each connection's
//! handshake runs in its own task, bounded by the header read timeout.

use super::conn;
use super::limits::{HttpLimits, MAX_REFUSALS, SHUTDOWN_GRACE};
use axum::Router;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tenure_node::RateLimitedLog;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio::time::{sleep, timeout};
use tokio_rustls::TlsAcceptor;
use tracing::{debug, warn};

/// Pause after a failed `accept` (e.g. out of file descriptors).
const ACCEPT_ERROR_BACKOFF: Duration = Duration::from_millis(50);
/// The first byte of a TLS connection (a handshake record).
const TLS_HANDSHAKE_RECORD: u8 = 0x16;
/// The body of the answer to plain HTTP on the HTTPS port, so that
/// `curl http://...` says what to do instead of failing with a TLS error.
const PLAIN_HTTP_ERROR: &str =
    r#"{"error":"this server speaks HTTPS only: use https:// (and --cacert for its CA)"}"#;

/// The reason a connection over the cap is counted under in the refusal log
/// (instead of a line each).
const OVER_CAP: &str = "503 too many connections";
/// The same, for one closed unanswered because [`MAX_REFUSALS`] are being answered.
const OVER_CAP_DROPPED: &str = "too many connections, closed unanswered";
/// The reason for plain HTTP on the HTTPS port (answered 400).
const PLAIN_HTTP: &str = "400 plain HTTP on the HTTPS port";
/// The reason for a connection whose TLS handshake failed.
const TLS_FAILED: &str = "TLS handshake failed";
/// The reason for a connection without a TLS handshake within the header timeout.
const TLS_TIMEOUT: &str = "no TLS handshake in time";

/// Serves `app` on `listener` within `limits` (over TLS with `tls`) until
/// `shutdown` completes; then stops accepting, lets requests in progress
/// finish for at most [`SHUTDOWN_GRACE`] and closes every connection.
/// Connections over the cap, plain HTTP on an HTTPS port and failed TLS
/// handshakes are counted in `rejections`.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: HttpLimits,
    tls: Option<TlsAcceptor>,
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
                        let admitted = Admitted { remote, limits, tls: tls.clone(), permit: slot };
                        let (app, closing) = (app.clone(), closing.clone());
                        conns.spawn(admitted.serve(stream, app, closing, rejections.clone()));
                    }
                    Err(_) => match refusals.clone().try_acquire_owned() {
                        Ok(refusal) => {
                            rejections.record(OVER_CAP, Some(remote.ip()));
                            let admitted = Admitted { remote, limits, tls: tls.clone(), permit: refusal };
                            conns.spawn(admitted.refuse(stream, rejections.clone()));
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

/// An accepted connection holding a permit (a slot, or a refusal's).
struct Admitted {
    remote: SocketAddr,
    limits: HttpLimits,
    tls: Option<TlsAcceptor>,
    permit: OwnedSemaphorePermit,
}

impl Admitted {
    /// Serves the connection (after the TLS handshake, with TLS; a failed
    /// one is counted in `rejections`).
    async fn serve(
        self,
        stream: TcpStream,
        app: Router,
        closing: watch::Receiver<bool>,
        rejections: Arc<RateLimitedLog>,
    ) {
        let Admitted { remote, limits, tls, permit } = self;
        // Without it, Nagle holds a small write (an SSE event, a short
        // answer) until the client ACKs the one before, which a client
        // with nothing to send delays by up to 40 ms: the first change an
        // observe stream told after its first event came that late.
        let _ = stream.set_nodelay(true);
        match tls {
            None => conn::serve(stream, remote, app, limits, closing, permit).await,
            Some(acceptor) => {
                if let Some(tls) = handshake(acceptor, stream, remote, limits, &rejections).await {
                    conn::serve(tls, remote, app, limits, closing, permit).await;
                }
            }
        }
    }

    /// Refuses the connection with 503 (after the TLS handshake, with TLS).
    async fn refuse(self, stream: TcpStream, rejections: Arc<RateLimitedLog>) {
        let Admitted { remote, limits, tls, permit } = self;
        match tls {
            None => conn::refuse(stream, limits, permit).await,
            Some(acceptor) => {
                if let Some(tls) = handshake(acceptor, stream, remote, limits, &rejections).await {
                    conn::refuse(tls, limits, permit).await;
                }
            }
        }
    }
}

/// The server side of the TLS handshake, within the header read timeout. A
/// client speaking plain HTTP gets a plain 400 that says to use https. A
/// connection that does not end in TLS is counted in `rejections`.
async fn handshake(
    acceptor: TlsAcceptor,
    mut stream: TcpStream,
    remote: SocketAddr,
    limits: HttpLimits,
    rejections: &RateLimitedLog,
) -> Option<tokio_rustls::server::TlsStream<TcpStream>> {
    let bound = limits.header_read_timeout;
    let handshake = async {
        let mut first = [0u8; 1];
        if stream.peek(&mut first).await.ok()? == 0 {
            return None;
        }
        if first[0] != TLS_HANDSHAKE_RECORD {
            debug!(%remote, "plain HTTP on the HTTPS port: answered 400");
            rejections.record(PLAIN_HTTP, Some(remote.ip()));
            let answer = format!(
                "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n\
                 connection: close\r\ncontent-length: {}\r\n\r\n{PLAIN_HTTP_ERROR}",
                PLAIN_HTTP_ERROR.len()
            );
            let _ = stream.write_all(answer.as_bytes()).await;
            let _ = stream.shutdown().await;
            return None;
        }
        match acceptor.accept(stream).await {
            Ok(tls) => Some(tls),
            Err(e) => {
                debug!(%remote, error = %e, "HTTPS connection: the TLS handshake failed");
                rejections.record(TLS_FAILED, Some(remote.ip()));
                None
            }
        }
    };
    match timeout(bound, handshake).await {
        Ok(tls) => tls,
        Err(_) => {
            debug!(%remote, "HTTPS connection: no TLS handshake within {bound:?}");
            rejections.record(TLS_TIMEOUT, Some(remote.ip()));
            None
        }
    }
}
