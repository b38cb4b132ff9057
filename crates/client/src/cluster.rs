//! A client and the endpoints of one cluster: requests go to the endpoint
//! that answered last and move on to the next one when it does not answer.

use crate::error::Error;
use crate::http::{Client, RawAnswer};
use hyper::{Method, StatusCode};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
pub use tenure_elect::Retry;

/// A [`Client`] and the HTTP endpoints of the nodes of one cluster.
#[derive(Debug)]
pub struct Cluster {
    client: Client,
    endpoints: Vec<String>,
    /// The endpoint asked first: the last one that answered.
    current: AtomicUsize,
}

impl Cluster {
    /// `endpoints` as [`crate::parse_endpoints`] returns them (at least one).
    pub fn new(client: Client, endpoints: Vec<String>) -> Result<Cluster, Error> {
        if endpoints.is_empty() {
            return Err(Error::Config("no endpoints given".into()));
        }
        Ok(Cluster { client, endpoints, current: AtomicUsize::new(0) })
    }

    /// The client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The endpoints, in the order given.
    pub fn endpoints(&self) -> &[String] {
        &self.endpoints
    }

    /// The endpoint asked first now.
    pub fn current(&self) -> &str {
        &self.endpoints[self.current.load(Ordering::Relaxed) % self.endpoints.len()]
    }

    /// Moves on to the endpoint after `endpoint` (if it is still the current one).
    pub fn skip(&self, endpoint: &str) {
        let i = self.current.load(Ordering::Relaxed) % self.endpoints.len();
        if self.endpoints[i] == endpoint {
            let _ = self.current.compare_exchange(
                i,
                (i + 1) % self.endpoints.len(),
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
        }
    }

    /// Sends `method path` with an optional JSON body to the endpoints in
    /// turn, starting with the current one, each at most `timeout`, until
    /// one answers other than 503 (a node without a ready leader). Every
    /// endpoint is asked at most once. A request that may have been
    /// received without an answer is sent again only if `retry` is
    /// [`Retry::Idempotent`]. Returns the answer (any status but 503 while
    /// endpoints remain), else a 503 one endpoint answered (what a live
    /// node said, "no leader", tells more than a dead node's silence),
    /// else the last error.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&serde_json::Value>,
        timeout: Duration,
        retry: Retry,
    ) -> Result<(String, RawAnswer), Error> {
        let n = self.endpoints.len();
        let first = self.current.load(Ordering::Relaxed) % n;
        let mut last = None;
        let mut unavailable = None;
        for k in 0..n {
            let i = (first + k) % n;
            let url = format!("{}{path}", self.endpoints[i]);
            let body = body.map(|b| ("application/json", b.to_string().into_bytes()));
            match self.client.send(method.clone(), &url, body, timeout).await {
                Ok(a) if a.status == StatusCode::SERVICE_UNAVAILABLE && k + 1 < n => {
                    tracing::debug!(%url, "no ready leader behind this endpoint; trying the next");
                    unavailable = Some((url, a));
                }
                Ok(a) => {
                    self.current.store(i, Ordering::Relaxed);
                    return Ok((url, a));
                }
                Err(Error::NoAnswer(e)) if !e.sent || retry == Retry::Idempotent => {
                    tracing::debug!(%url, error = %e, "no answer; trying the next endpoint");
                    last = Some(Error::NoAnswer(e));
                }
                Err(e) => return Err(e),
            }
        }
        if let Some(answer) = unavailable {
            return Ok(answer);
        }
        Err(last.unwrap_or_else(|| Error::Config("no endpoint answered".into())))
    }

    /// [`Cluster::call`], then the body decoded as `T` if the status is a
    /// success, else a [`crate::Refused`] error.
    pub async fn json<T: serde::de::DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&serde_json::Value>,
        timeout: Duration,
        retry: Retry,
    ) -> Result<T, Error> {
        let (url, answer) = self.call(method, path, body, timeout, retry).await?;
        answer.json(&url)
    }
}
