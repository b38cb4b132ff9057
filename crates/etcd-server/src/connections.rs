//! The listener's connections, bounded: at most [`MAX_CONNECTIONS`] open at
//! once. A connection past the limit is closed as soon as it is accepted
//! (its client moves on to another endpoint, as etcd's clients do on a
//! reset), so a stranger who opens connections without end holds a bounded
//! number of the node's files, and the node's own (its log, its peers)
//! stay available. A failed accept (out of files, say) pauses accepting for
//! [`ACCEPT_PAUSE`] instead of trying again at once in a loop.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Duration, Instant, Sleep};
use tokio_stream::Stream;
use tonic::transport::server::{Connected, TcpConnectInfo};
use tracing::warn;

/// The most connections the etcd listener holds open at once: an etcd
/// client keeps one per endpoint it uses, so this is the number of client
/// processes a node serves.
pub const MAX_CONNECTIONS: usize = 1024;

/// How long accepting pauses after an accept fails.
pub const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// Refusals and failed accepts are logged at most this often.
const LOG_INTERVAL: Duration = Duration::from_secs(10);

/// The accepted connections of a listener, each holding one of `limit`
/// slots while it is open: a stream for tonic's `serve_with_incoming`.
pub(crate) struct Admitted {
    listener: TcpListener,
    slots: Arc<Semaphore>,
    limit: usize,
    pause: Option<Pin<Box<Sleep>>>,
    /// Connections closed at the limit since the last log line.
    refused: u64,
    logged: Option<Instant>,
}

impl Admitted {
    pub(crate) fn new(listener: TcpListener, limit: usize) -> Self {
        Admitted {
            listener,
            slots: Arc::new(Semaphore::new(limit)),
            limit,
            pause: None,
            refused: 0,
            logged: None,
        }
    }

    /// True once per [`LOG_INTERVAL`].
    fn may_log(&mut self) -> bool {
        let now = Instant::now();
        if self.logged.is_some_and(|at| now < at + LOG_INTERVAL) {
            return false;
        }
        self.logged = Some(now);
        true
    }
}

impl Stream for Admitted {
    type Item = Result<Connection, io::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            if let Some(pause) = this.pause.as_mut() {
                if pause.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                this.pause = None;
            }
            let (tcp, peer) = match this.listener.poll_accept(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(accepted)) => accepted,
                Poll::Ready(Err(e)) => {
                    if this.may_log() {
                        warn!(error = %e, "the etcd API failed to accept a connection; pausing");
                    }
                    this.pause = Some(Box::pin(tokio::time::sleep(ACCEPT_PAUSE)));
                    continue;
                }
            };
            match this.slots.clone().try_acquire_owned() {
                Ok(slot) => {
                    // Small answers (a lease keepalive) leave at once.
                    let _ = tcp.set_nodelay(true);
                    return Poll::Ready(Some(Ok(Connection { tcp, _slot: slot })));
                }
                Err(_) => {
                    drop(tcp);
                    this.refused += 1;
                    if this.may_log() {
                        warn!(
                            peer = %peer,
                            refused = this.refused,
                            limit = this.limit,
                            "the etcd API holds its most connections; closed new ones"
                        );
                        this.refused = 0;
                    }
                }
            }
        }
    }
}

/// An admitted connection: its slot is free again when it closes.
pub(crate) struct Connection {
    tcp: TcpStream,
    _slot: OwnedSemaphorePermit,
}

impl Connected for Connection {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        self.tcp.connect_info()
    }
}

impl AsyncRead for Connection {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_read(cx, buf)
    }
}

impl AsyncWrite for Connection {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;
    use tokio_stream::StreamExt;

    /// Reads until the server closes the connection, or times out.
    async fn closed_by_server(c: &mut TcpStream) -> bool {
        let mut b = [0u8; 1];
        matches!(
            tokio::time::timeout(Duration::from_secs(2), c.read(&mut b)).await,
            Ok(Ok(0)) | Ok(Err(_))
        )
    }

    #[tokio::test]
    async fn a_connection_past_the_limit_is_closed_and_a_freed_slot_admits_the_next() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut admitted = Admitted::new(listener, 2);
        let _a = TcpStream::connect(addr).await.unwrap();
        let first = admitted.next().await.unwrap().unwrap();
        let _b = TcpStream::connect(addr).await.unwrap();
        let _second = admitted.next().await.unwrap().unwrap();
        // The third is accepted and closed while the stream looks for one
        // it may admit.
        let mut c = TcpStream::connect(addr).await.unwrap();
        let waiting = tokio::time::timeout(Duration::from_millis(300), admitted.next()).await;
        assert!(waiting.is_err(), "no third connection admitted at the limit of 2");
        assert!(closed_by_server(&mut c).await, "the one past the limit is closed");
        drop(first);
        let _d = TcpStream::connect(addr).await.unwrap();
        let next = tokio::time::timeout(Duration::from_secs(2), admitted.next()).await;
        assert!(matches!(next, Ok(Some(Ok(_)))), "a closed connection frees its slot");
    }
}
