//! The accept loop: admits every connection as unproven (closing the
//! oldest unproven one of the busiest address when their pool is full,
//! `admission.rs`), and closes gracefully on shutdown. With TLS, each
//! connection's handshake runs in its own task, bounded by the unproven
//! timeout.

use super::admission::{Admission, Standing, EVICTED};
use super::conn;
use super::limits::{HttpLimits, SHUTDOWN_GRACE};
use axum::Router;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tenure_node::RateLimitedLog;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
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

/// The reason for plain HTTP on the HTTPS port (answered 400).
const PLAIN_HTTP: &str = "400 plain HTTP on the HTTPS port";
/// The reason for a connection whose TLS handshake failed.
const TLS_FAILED: &str = "TLS handshake failed";
/// The reason for a connection without a TLS handshake within the header timeout.
const TLS_TIMEOUT: &str = "no TLS handshake in time";

/// Serves `app` on `listener` within `limits` (over TLS with `tls`) until
/// `shutdown` completes; then stops accepting, lets requests in progress
/// finish for at most [`SHUTDOWN_GRACE`] and closes every connection.
/// Unproven connections closed for newer ones, plain HTTP on an HTTPS port
/// and failed TLS handshakes are counted in `rejections`.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: HttpLimits,
    tls: Option<TlsAcceptor>,
    rejections: Arc<RateLimitedLog>,
    shutdown: impl Future<Output = ()>,
) {
    let admission = Admission::new(&limits);
    let (closing_tx, closing) = watch::channel(false);
    let mut conns = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, remote)) => {
                    let (standing, evicted) = admission.admit(remote.ip());
                    if let Some(addr) = evicted {
                        rejections.record(EVICTED, Some(addr));
                    }
                    let admitted = Admitted { remote, limits, tls: tls.clone(), standing };
                    let (app, closing) = (app.clone(), closing.clone());
                    conns.spawn(admitted.serve(stream, app, closing, rejections.clone()));
                }
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

/// An accepted connection and its standing (unproven until a request with
/// a token).
struct Admitted {
    remote: SocketAddr,
    limits: HttpLimits,
    tls: Option<TlsAcceptor>,
    standing: Arc<Standing>,
}

impl Admitted {
    /// Serves the connection (after the TLS handshake, with TLS; a failed
    /// one is counted in `rejections`) until it ends or, while unproven, is
    /// closed for a newer connection.
    async fn serve(
        self,
        stream: TcpStream,
        app: Router,
        closing: watch::Receiver<bool>,
        rejections: Arc<RateLimitedLog>,
    ) {
        let Admitted { remote, limits, tls, standing } = self;
        // Without it, Nagle holds a small write (an SSE event, a short
        // answer) until the client ACKs the one before, which a client
        // with nothing to send delays by up to 40 ms: the first change an
        // observe stream told after its first event came that late.
        let _ = stream.set_nodelay(true);
        let served = async {
            match tls {
                None => conn::serve(stream, remote, app, limits, closing, standing.clone()).await,
                Some(acceptor) => {
                    if let Some(tls) =
                        handshake(acceptor, stream, remote, limits, &rejections).await
                    {
                        conn::serve(tls, remote, app, limits, closing, standing.clone()).await;
                    }
                }
            }
        };
        tokio::select! {
            () = served => {}
            () = standing.evicted() => debug!(%remote, "unproven connection closed for a newer one"),
        }
    }
}

/// The server side of the TLS handshake, within the unproven timeout. A
/// client speaking plain HTTP gets a plain 400 that says to use https. A
/// connection that does not end in TLS is counted in `rejections`.
async fn handshake(
    acceptor: TlsAcceptor,
    mut stream: TcpStream,
    remote: SocketAddr,
    limits: HttpLimits,
    rejections: &RateLimitedLog,
) -> Option<tokio_rustls::server::TlsStream<TcpStream>> {
    let bound = limits.header_read_timeout.min(limits.unproven_timeout);
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
