//! One HTTP/1.1 connection, served by hyper, with the timeouts of
//! [`HttpLimits`] enforced by a watchdog.
//!
//! hyper's own `header_read_timeout` also runs while a keep-alive connection
//! waits for its next request, so it cannot tell a slow client from an idle
//! one. Here the socket, the request body and the response body report where
//! the connection is in its request cycle ([`Phase`]), each phase but the last
//! has its own deadline, and the watchdog drops the connection when one
//! passes.

use super::admission::Standing;
use super::limits::HttpLimits;
use axum::extract::ConnectInfo;
use axum::http::Request;
use axum::Router;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{watch, Notify};
use tokio::time::{sleep_until, Instant};
use tower::ServiceExt;
use tracing::debug;

/// Where a connection is in its request cycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Waiting for the first byte of the next request (keep-alive).
    Idle,
    /// Reading a request's headers: since the connection opened, or since the
    /// first byte of the request.
    Head,
    /// Reading a request's body.
    Body,
    /// The request is read; the handler runs or the answer is being written.
    /// No deadline: a `/v1/watch` stream may last for days.
    Busy,
}

/// The phase and when it began.
struct Cycle {
    phase: Phase,
    since: Instant,
}

/// What the watchdog, the socket and the bodies of one connection share.
struct ConnTimer {
    cycle: Mutex<Cycle>,
    /// Woken on every phase change, so the watchdog re-arms.
    changed: Notify,
    limits: HttpLimits,
    /// Unproven connections wait and send for a shorter time.
    standing: Arc<Standing>,
}

impl ConnTimer {
    fn new(limits: HttpLimits, standing: Arc<Standing>) -> Arc<Self> {
        Arc::new(ConnTimer {
            cycle: Mutex::new(Cycle { phase: Phase::Head, since: Instant::now() }),
            changed: Notify::new(),
            limits,
            standing,
        })
    }

    fn cycle(&self) -> MutexGuard<'_, Cycle> {
        // Plain values, each set in one step: a poisoned lock is still consistent.
        self.cycle.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Enters `to` (from any phase, or only from `from` when given).
    fn enter(&self, from: Option<Phase>, to: Phase) {
        {
            let mut cycle = self.cycle();
            if from.is_some_and(|f| f != cycle.phase) || cycle.phase == to {
                return;
            }
            *cycle = Cycle { phase: to, since: Instant::now() };
        }
        self.changed.notify_one();
    }

    /// When the current phase runs out, and which limit that is.
    fn deadline(&self) -> Option<(Instant, &'static str)> {
        let cycle = self.cycle();
        let (limit, what) = match cycle.phase {
            Phase::Idle => (self.limits.idle_timeout, "idle keep-alive"),
            Phase::Head => (self.limits.header_read_timeout, "header read"),
            Phase::Body => (self.limits.body_read_timeout, "body read"),
            Phase::Busy => return None,
        };
        let limit = match cycle.phase {
            Phase::Idle | Phase::Head if !self.standing.is_proven() => {
                limit.min(self.limits.unproven_timeout)
            }
            _ => limit,
        };
        Some((cycle.since + limit, what))
    }
}

/// A connection's byte stream: TCP, or TLS over TCP.
pub(super) trait Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static {}

impl<S: AsyncRead + AsyncWrite + Unpin + Send + 'static> Stream for S {}

/// Serves one admitted connection until it closes, a timeout passes, or the
/// server closes (`closing`: requests in progress finish, then it closes).
/// Its `standing` goes with each request (for the gate, which proves it).
pub(super) async fn serve(
    stream: impl Stream,
    remote: SocketAddr,
    app: Router,
    limits: HttpLimits,
    mut closing: watch::Receiver<bool>,
    standing: Arc<Standing>,
) {
    let timer = ConnTimer::new(limits, standing.clone());
    let io = TokioIo::new(TimedIo { stream, timer: timer.clone() });
    let service = {
        let timer = timer.clone();
        hyper::service::service_fn(move |req: Request<Incoming>| {
            // Called when hyper has read the request's headers.
            let done = req.body().is_end_stream();
            timer.enter(None, if done { Phase::Busy } else { Phase::Body });
            let mut req = req.map(|body| RequestBody { inner: body, timer: timer.clone() });
            // The client's address, for the per-client limits and the refusal log.
            req.extensions_mut().insert(ConnectInfo(remote));
            req.extensions_mut().insert(standing.clone());
            let answer = app.clone().oneshot(req);
            let timer = timer.clone();
            async move {
                let response = answer.await?;
                Ok::<_, Infallible>(response.map(|body| ResponseBody { inner: body, timer }))
            }
        })
    };
    // The watchdog below enforces the header timeout; hyper's would also cut
    // idle keep-alive connections at the header timeout.
    let conn = http1::Builder::new().header_read_timeout(None).serve_connection(io, service);
    tokio::pin!(conn);
    let mut shutting_down = false;
    loop {
        let deadline = timer.deadline();
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    debug!(%remote, error = %e, "HTTP connection ended with an error");
                }
                return;
            }
            () = timer.changed.notified() => {}
            () = sleep_until_some(deadline.map(|(at, _)| at)) => {
                // Still the same phase? (It may have changed as the timer fired.)
                if let Some((at, what)) = timer.deadline() {
                    if at <= Instant::now() {
                        debug!(%remote, limit = what, "HTTP connection closed: timeout");
                        return;
                    }
                }
            }
            _ = closing.wait_for(|c| *c), if !shutting_down => {
                shutting_down = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}

async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The socket: its first byte after an idle spell starts a request's headers.
struct TimedIo<S> {
    stream: S,
    timer: Arc<ConnTimer>,
}

impl<S: Stream> AsyncRead for TimedIo<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.timer.enter(Some(Phase::Idle), Phase::Head);
        }
        polled
    }
}

impl<S: Stream> AsyncWrite for TimedIo<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// A request's body: its end ends the body phase.
struct RequestBody {
    inner: Incoming,
    timer: Arc<ConnTimer>,
}

impl Body for RequestBody {
    type Data = <Incoming as Body>::Data;
    type Error = <Incoming as Body>::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None)) || self.inner.is_end_stream() {
            self.timer.enter(Some(Phase::Body), Phase::Busy);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A response's body: once hyper has written it and let it go, the
/// connection waits for its next request.
struct ResponseBody {
    inner: axum::body::Body,
    timer: Arc<ConnTimer>,
}

impl Body for ResponseBody {
    type Data = <axum::body::Body as Body>::Data;
    type Error = <axum::body::Body as Body>::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for ResponseBody {
    fn drop(&mut self) {
        // A body not read to its end keeps its deadline: the client is still
        // sending it while the answer went out.
        self.timer.enter(Some(Phase::Busy), Phase::Idle);
    }
}
