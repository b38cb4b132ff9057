//! The CLI's and the demo's JSON-over-HTTP(S) client: the `tenure-client`
//! crate's [`tenure_client::Client`] with `anyhow` errors, plus the calls
//! that read this binary's API bodies (`/v1/status`, `/v1/watch`).
//!
//! Errors keep their concrete types inside the `anyhow::Error`
//! ([`AuthRefused`], [`NoAnswer`], [`Refused`]), so callers can tell them
//! apart with `downcast_ref`.

use anyhow::Context;
use hyper::{Method, StatusCode};
use serde::de::DeserializeOwned;
use std::path::Path;
use std::time::Duration;
use tenure_api::{ErrorBody, LeadershipBody, StatusBody};
use tokio_rustls::rustls;

pub use tenure_client::http::{parse_endpoints, RawAnswer, SseEvent, REQUEST_TIMEOUT};
pub use tenure_client::{AuthRefused, ClientOptions, NoAnswer, Refused};

/// The CA certificates of `cacert` (none without a file: then only
/// `http://` endpoints work), with the node's messages for a bad file.
pub fn roots(cacert: Option<&Path>) -> anyhow::Result<rustls::RootCertStore> {
    match cacert {
        Some(path) => Ok(tenure_node::tls::read_roots(path)?),
        None => Ok(rustls::RootCertStore::empty()),
    }
}

/// A library error as an `anyhow::Error` holding the concrete error type.
pub fn lift(e: impl Into<tenure_client::Error>) -> anyhow::Error {
    match e.into() {
        tenure_client::Error::AuthRefused(a) => a.into(),
        tenure_client::Error::NoAnswer(n) => n.into(),
        tenure_client::Error::Refused(r) => r.into(),
        other => other.into(),
    }
}

/// A pooled HTTP(S) client (keep-alive, so fast polling reuses connections),
/// with the bearer token it sends, if any.
#[derive(Clone, Default)]
pub struct Client {
    inner: tenure_client::Client,
}

/// An answer: its status and decoded body (or the API's error message).
pub struct Answer<T> {
    /// HTTP status.
    pub status: StatusCode,
    /// The body, when the status is a success.
    pub body: Result<T, ErrorBody>,
}

/// The API's error body in `bytes`, or the bytes as the message.
pub fn error_body(bytes: &[u8]) -> ErrorBody {
    serde_json::from_slice(bytes).unwrap_or_else(|_| ErrorBody {
        error: String::from_utf8_lossy(bytes).into_owned(),
        ..ErrorBody::default()
    })
}

impl Client {
    /// A client that trusts the CA certificate(s) of `options.cacert` for
    /// `https://` endpoints (the servers' TLS, made by `tenure cert`), or a
    /// plain HTTP client without one, and sends `options.token` as a bearer
    /// token with every request (None: no token).
    pub fn new(options: ClientOptions<'_>) -> anyhow::Result<Self> {
        let roots = match options.cacert {
            Some(path) => Some(roots(Some(path))?),
            None => None,
        };
        let inner = tenure_client::Client::with_roots(roots, options.token).map_err(lift)?;
        Ok(Client { inner })
    }

    /// The same client as the library's (for sessions and elections).
    pub fn from_library(inner: tenure_client::Client) -> Self {
        Client { inner }
    }

    /// The library's client (for sessions and elections).
    pub fn inner(&self) -> &tenure_client::Client {
        &self.inner
    }

    /// True if it can talk HTTPS (it was given a CA): endpoints without a
    /// scheme are then `https://`.
    pub fn https(&self) -> bool {
        self.inner.https()
    }

    /// [`tenure_client::Client::send`], its error lifted.
    pub async fn send(
        &self,
        method: Method,
        url: &str,
        body: Option<(&str, Vec<u8>)>,
        timeout: Duration,
    ) -> anyhow::Result<RawAnswer> {
        self.inner.send(method, url, body, timeout).await.map_err(lift)
    }

    async fn request<T: DeserializeOwned>(
        &self,
        method: Method,
        url: &str,
        body: Option<String>,
        timeout: Duration,
    ) -> anyhow::Result<Answer<T>> {
        let body = body.map(|b| ("application/json", b.into_bytes()));
        let RawAnswer { status, body: bytes, .. } = self.send(method, url, body, timeout).await?;
        let body = if status.is_success() {
            Ok(serde_json::from_slice(&bytes)
                .with_context(|| format!("{url}: unexpected answer"))?)
        } else {
            Err(error_body(&bytes))
        };
        Ok(Answer { status, body })
    }

    /// `POST endpoint + path` with a JSON body.
    pub async fn post<T: DeserializeOwned>(
        &self,
        endpoint: &str,
        path: &str,
        body: &serde_json::Value,
    ) -> anyhow::Result<Answer<T>> {
        self.request(
            Method::POST,
            &format!("{endpoint}{path}"),
            Some(body.to_string()),
            REQUEST_TIMEOUT,
        )
        .await
    }

    /// `GET /v1/status` with a caller-chosen timeout; any failure is an error.
    pub async fn status_within(
        &self,
        endpoint: &str,
        timeout: Duration,
    ) -> anyhow::Result<StatusBody> {
        self.inner.status_within(endpoint, timeout).await.map_err(lift)
    }

    /// `GET /v1/status`; any failure is an error.
    pub async fn status(&self, endpoint: &str) -> anyhow::Result<StatusBody> {
        self.status_within(endpoint, REQUEST_TIMEOUT).await
    }

    /// Follows `GET /v1/watch` and calls `on_event` for each leadership event
    /// until the stream ends (Ok) or fails (Err). `on_event` returns false to stop.
    pub async fn watch(
        &self,
        endpoint: &str,
        mut on_event: impl FnMut(LeadershipBody) -> bool,
    ) -> anyhow::Result<()> {
        let url = format!("{endpoint}/v1/watch");
        self.events(&url, None, |e| {
            let event: LeadershipBody = serde_json::from_str(&e.data)
                .with_context(|| format!("{url}: bad event {}", e.data))?;
            Ok(on_event(event))
        })
        .await
    }

    /// Follows the Server-Sent Events of `GET url` (with `Last-Event-ID`
    /// if given) and calls `on_event` for each event with data, until the
    /// stream ends (Ok) or fails (Err). `on_event` returns false to stop,
    /// or an error to fail. A refusal is an [`AuthRefused`]; another
    /// non-success answer a [`Refused`] with the API's error message.
    pub async fn events(
        &self,
        url: &str,
        last_event_id: Option<u64>,
        mut on_event: impl FnMut(SseEvent) -> anyhow::Result<bool>,
    ) -> anyhow::Result<()> {
        let mut stream = self.inner.event_stream(url, last_event_id).await.map_err(lift)?;
        while let Some(event) = stream.next().await.map_err(lift)? {
            if !on_event(event)? {
                return Ok(());
            }
        }
        Ok(())
    }
}
