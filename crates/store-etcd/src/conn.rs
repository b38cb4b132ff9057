//! One etcd client per endpoint, connected lazily, and the rule of
//! tenure-client's `Cluster`: ask the endpoint that answered last, move on
//! to the next after an error or a timeout.
//!
//! tonic's balanced channel over several endpoints does not fail over (a
//! killed member keeps failing every other call, and a stream open to it
//! stalls), hence one channel per endpoint, chosen here.

use crate::config::{connect_options, EtcdOptions};
use crate::error::{classify, timed_out};
use etcd_client::{Client, ConnectOptions};
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tenure_client::{Retry, StoreError};
use tokio::sync::OnceCell;

/// The endpoints of one etcd cluster and a client for each.
pub(crate) struct Endpoints {
    endpoints: Vec<String>,
    clients: Vec<OnceCell<Client>>,
    connect: ConnectOptions,
    /// The endpoint asked first: the last one that answered.
    current: AtomicUsize,
    /// The bound of each request.
    pub(crate) timeout: Duration,
}

impl std::fmt::Debug for Endpoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoints")
            .field("endpoints", &self.endpoints)
            .field("current", &self.current.load(Ordering::Relaxed))
            .finish()
    }
}

impl Endpoints {
    /// Checked endpoints (`https` if they are) and the store's options.
    pub(crate) fn new(
        endpoints: Vec<String>,
        https: bool,
        options: &EtcdOptions,
    ) -> Result<Endpoints, StoreError> {
        Ok(Endpoints {
            clients: endpoints.iter().map(|_| OnceCell::new()).collect(),
            endpoints,
            connect: connect_options(options, https)?,
            current: AtomicUsize::new(0),
            timeout: options.request_timeout,
        })
    }

    /// The endpoints, in the order given.
    pub(crate) fn list(&self) -> &[String] {
        &self.endpoints
    }

    /// The index of the endpoint asked first now.
    pub(crate) fn current(&self) -> usize {
        self.current.load(Ordering::Relaxed) % self.endpoints.len()
    }

    /// Endpoint `i` answered: ask it first from now on.
    pub(crate) fn answered(&self, i: usize) {
        self.current.store(i, Ordering::Relaxed);
    }

    /// Moves on to the endpoint after `i` (if `i` is still the current one).
    pub(crate) fn skip(&self, i: usize) {
        let n = self.endpoints.len();
        let _ = self.current.compare_exchange(i, (i + 1) % n, Ordering::Relaxed, Ordering::Relaxed);
        tracing::debug!(endpoint = %self.endpoints[i], "etcd: moving on to the next endpoint");
    }

    /// The client of endpoint `i`, connected on first use (with
    /// credentials, connecting authenticates: bounded by the timeout).
    pub(crate) async fn client(&self, i: usize) -> Result<Client, StoreError> {
        let endpoint = &self.endpoints[i];
        let connect = async {
            let c = Client::connect([endpoint.as_str()], Some(self.connect.clone()));
            match tokio::time::timeout(self.timeout, c).await {
                Ok(Ok(c)) => Ok(c),
                Ok(Err(e)) => Err(classify(endpoint, e)),
                Err(_) => Err(timed_out(endpoint, self.timeout)),
            }
        };
        self.clients[i].get_or_try_init(|| connect).await.cloned()
    }

    /// Runs `f` on the endpoints in turn, starting with the current one,
    /// each at most the request timeout, until one answers: every endpoint
    /// is asked at most once. A request that may have arrived without an
    /// answer is sent again only if `retry` is [`Retry::Idempotent`]; one
    /// a member refused to serve ([`StoreError::Unavailable`]) always is.
    /// Returns the answer with the endpoint's index, or the last error.
    pub(crate) async fn call<T, F, Fut>(
        &self,
        retry: Retry,
        mut f: F,
    ) -> Result<(usize, T), StoreError>
    where
        F: FnMut(Client) -> Fut,
        Fut: Future<Output = Result<T, etcd_client::Error>>,
    {
        let n = self.endpoints.len();
        let first = self.current();
        let mut last = None;
        for k in 0..n {
            let i = (first + k) % n;
            let endpoint = &self.endpoints[i];
            let answer = match self.client(i).await {
                Ok(client) => match tokio::time::timeout(self.timeout, f(client)).await {
                    Ok(Ok(v)) => {
                        self.answered(i);
                        return Ok((i, v));
                    }
                    Ok(Err(e)) => classify(endpoint, e),
                    Err(_) => timed_out(endpoint, self.timeout),
                },
                Err(e) => e,
            };
            let again = match &answer {
                StoreError::Unavailable { .. } => true,
                StoreError::NoAnswer { sent, .. } => !sent || retry == Retry::Idempotent,
                _ => false,
            };
            if answer.is_retryable() {
                self.skip(i);
            }
            if !again {
                return Err(answer);
            }
            tracing::debug!(%endpoint, error = %answer, "etcd: no answer; trying the next endpoint");
            last = Some(answer);
        }
        Err(last.unwrap_or_else(|| StoreError::Config("no etcd endpoint".into())))
    }
}
