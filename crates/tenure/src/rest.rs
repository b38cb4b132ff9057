//! A small JSON-over-HTTP(S) client for the tenure API, used by the CLI and the demo.
//!
//! Built on hyper directly: it is already in the tree through axum, and the
//! client needs only GET, POST and a streaming body for Server-Sent Events.
//! HTTPS goes through rustls (hyper-rustls), trusting only the cluster's CA
//! (`--cacert`), never the system's roots.
//!
//! A client made with a token sends it as `Authorization: Bearer` on every
//! request; a 401 or 403 answer becomes an [`AuthRefused`] error that says
//! what to do.

use crate::api::{ErrorBody, LeadershipBody, StatusBody};
use anyhow::{anyhow, bail, Context};
use futures_util::StreamExt;
use http_body_util::{BodyExt, BodyStream, Full};
use hyper::body::Bytes;
use hyper::{Method, Request, StatusCode, Uri};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::rt::TokioExecutor;
use serde::de::DeserializeOwned;
use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio_rustls::rustls;

/// How long one request may take before the endpoint counts as unreachable.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// Largest response body read; API answers are a few kilobytes.
const MAX_RESPONSE_BYTES: usize = 1024 * 1024;
/// Longest SSE line accepted before the stream is considered broken.
const MAX_SSE_LINE_BYTES: usize = 64 * 1024;

/// The connector of every client: TCP with TCP_NODELAY and a connect
/// timeout, TLS for `https://` URLs trusting `roots` only.
pub fn connector(roots: rustls::RootCertStore) -> HttpsConnector<HttpConnector> {
    let mut http = HttpConnector::new();
    http.set_nodelay(true);
    http.set_connect_timeout(Some(REQUEST_TIMEOUT));
    http.enforce_http(false);
    let tls = rustls::ClientConfig::builder_with_provider(tenure_node::tls::provider())
        .with_safe_default_protocol_versions()
        .expect("the ring provider supports the default TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .wrap_connector(http)
}

/// The CA certificates of `cacert` (none without a file: then only
/// `http://` endpoints work).
pub fn roots(cacert: Option<&Path>) -> anyhow::Result<rustls::RootCertStore> {
    match cacert {
        Some(path) => Ok(tenure_node::tls::read_roots(path)?),
        None => Ok(rustls::RootCertStore::empty()),
    }
}

/// How a [`Client`] reaches the API: the CA it trusts for HTTPS and the
/// bearer token it sends. The default is plain HTTP without a token.
#[derive(Clone, Copy, Debug, Default)]
pub struct ClientOptions<'a> {
    /// CA certificate(s) (PEM) trusted for `https://` endpoints, made by
    /// `tenure cert`; None: only `http://` endpoints work.
    pub cacert: Option<&'a Path>,
    /// Sent as `Authorization: Bearer` with every request; None: no token.
    pub token: Option<&'a str>,
}

/// A pooled HTTP(S) client (keep-alive, so fast polling reuses connections),
/// with the bearer token it sends, if any.
#[derive(Clone)]
pub struct Client {
    inner: HyperClient<HttpsConnector<HttpConnector>, Full<Bytes>>,
    https: bool,
    /// `Bearer <token>`, marked sensitive.
    authorization: Option<Arc<hyper::header::HeaderValue>>,
}

impl Default for Client {
    /// A client for `http://` endpoints only, without a token.
    fn default() -> Self {
        Client {
            inner: HyperClient::builder(TokioExecutor::new())
                .build(connector(rustls::RootCertStore::empty())),
            https: false,
            authorization: None,
        }
    }
}

/// The server refused the request's token (401) or its role (403).
#[derive(Debug)]
pub struct AuthRefused {
    /// The URL asked.
    pub url: String,
    /// 401 or 403.
    pub status: StatusCode,
    /// The server's message.
    pub message: String,
    /// Whether the request carried a token.
    pub had_token: bool,
}

impl fmt::Display for AuthRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let url = &self.url;
        match (self.status, self.had_token) {
            (StatusCode::UNAUTHORIZED, false) => write!(
                f,
                "{url}: the server wants a token: pass --token or --token-file, or set TENURE_TOKEN"
            ),
            (StatusCode::UNAUTHORIZED, true) => write!(
                f,
                "{url}: the server does not accept this token (HTTP 401: {})",
                self.message
            ),
            (status, _) => write!(f, "{url}: {} (HTTP {})", self.message, status.as_u16()),
        }
    }
}

impl std::error::Error for AuthRefused {}

/// Normalises an endpoint: adds the scheme when missing (`https://` if
/// `https`, else `http://`), drops a trailing `/`.
pub fn normalize_endpoint(endpoint: &str, https: bool) -> anyhow::Result<String> {
    let e = endpoint.trim().trim_end_matches('/');
    if e.is_empty() {
        bail!("empty endpoint");
    }
    if e.starts_with("https://") && !https {
        bail!(
            "{e}: https needs the cluster's CA certificate to check the server's: give \
             --cacert FILE (or set TENURE_CACERT)"
        );
    }
    let e = if e.starts_with("http://") || e.starts_with("https://") {
        e.to_string()
    } else if https {
        format!("https://{e}")
    } else {
        format!("http://{e}")
    };
    e.parse::<Uri>().map_err(|err| anyhow!("{endpoint}: not a URL ({err})"))?;
    Ok(e)
}

/// Parses a comma-separated endpoint list (`https` as in [`normalize_endpoint`]).
pub fn parse_endpoints(list: &str, https: bool) -> anyhow::Result<Vec<String>> {
    let endpoints = list
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|e| normalize_endpoint(e, https))
        .collect::<anyhow::Result<Vec<_>>>()?;
    if endpoints.is_empty() {
        bail!("no endpoints given");
    }
    Ok(endpoints)
}

/// An answer: its status and decoded body (or the API's error message).
pub struct Answer<T> {
    /// HTTP status.
    pub status: StatusCode,
    /// The body, when the status is a success.
    pub body: Result<T, ErrorBody>,
}

/// An answer as it came.
pub struct RawAnswer {
    /// HTTP status.
    pub status: StatusCode,
    /// `Retry-After` in seconds, if the server sent one.
    pub retry_after: Option<u64>,
    /// The body.
    pub body: Bytes,
}

/// No answer came: the connection failed or the answer timed out.
#[derive(Debug, thiserror::Error)]
#[error("{url}: unreachable")]
pub struct NoAnswer {
    /// The URL asked.
    pub url: String,
    /// False if the connection failed before the request was sent (the
    /// server cannot have acted on it); true if it may have been received.
    pub sent: bool,
    /// Why.
    #[source]
    pub source: anyhow::Error,
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
        let roots = roots(options.cacert)?;
        let authorization = options
            .token
            .map(|t| {
                let mut value = hyper::header::HeaderValue::try_from(format!("Bearer {t}"))
                    .map_err(|_| anyhow!("the token cannot be sent in an HTTP header"))?;
                value.set_sensitive(true);
                anyhow::Ok(Arc::new(value))
            })
            .transpose()?;
        Ok(Client {
            inner: HyperClient::builder(TokioExecutor::new()).build(connector(roots)),
            https: options.cacert.is_some(),
            authorization,
        })
    }

    /// True if it can talk HTTPS (it was given a CA): endpoints without a
    /// scheme are then `https://`.
    pub fn https(&self) -> bool {
        self.https
    }

    /// A request to `uri` with the token, if any.
    fn builder(&self, method: Method, uri: Uri) -> hyper::http::request::Builder {
        let req = Request::builder().method(method).uri(uri);
        match &self.authorization {
            Some(value) => req.header(hyper::header::AUTHORIZATION, value.as_ref().clone()),
            None => req,
        }
    }

    /// The error for a refused request: [`AuthRefused`] for 401 and 403.
    fn refusal(&self, url: &str, status: StatusCode, body: &[u8]) -> Option<AuthRefused> {
        if status != StatusCode::UNAUTHORIZED && status != StatusCode::FORBIDDEN {
            return None;
        }
        let message = serde_json::from_slice::<ErrorBody>(body)
            .map(|e| e.error)
            .unwrap_or_else(|_| String::from_utf8_lossy(body).into_owned());
        Some(AuthRefused {
            url: url.to_string(),
            status,
            message,
            had_token: self.authorization.is_some(),
        })
    }

    /// Sends `method url` with `body` (its content type and bytes) and
    /// reads the whole answer, at most `timeout`. Errors: [`AuthRefused`]
    /// for 401 and 403, [`NoAnswer`] when no answer came (saying whether
    /// the request may have reached the server).
    pub async fn send(
        &self,
        method: Method,
        url: &str,
        body: Option<(&str, Vec<u8>)>,
        timeout: Duration,
    ) -> anyhow::Result<RawAnswer> {
        let uri: Uri = url.parse().with_context(|| format!("bad URL {url}"))?;
        let mut req = self.builder(method, uri);
        let bytes = match body {
            Some((content_type, bytes)) => {
                req = req.header(hyper::header::CONTENT_TYPE, content_type);
                Bytes::from(bytes)
            }
            None => Bytes::new(),
        };
        let req = req.body(Full::new(bytes))?;
        let no_answer =
            |sent: bool, source: anyhow::Error| NoAnswer { url: url.to_string(), sent, source };
        let fut = async {
            let resp = self.inner.request(req).await.map_err(|e| {
                let sent = !e.is_connect();
                no_answer(sent, e.into())
            })?;
            let status = resp.status();
            let retry_after = resp
                .headers()
                .get(hyper::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok()?.trim().parse().ok());
            let limited = http_body_util::Limited::new(resp.into_body(), MAX_RESPONSE_BYTES);
            let bytes = limited
                .collect()
                .await
                .map_err(|e| no_answer(true, anyhow!("reading the answer: {e}")))?
                .to_bytes();
            Ok::<_, NoAnswer>(RawAnswer { status, retry_after, body: bytes })
        };
        let answer = tokio::time::timeout(timeout, fut)
            .await
            .map_err(|_| no_answer(true, anyhow!("no answer within {timeout:?}")))??;
        if let Some(refused) = self.refusal(url, answer.status, &answer.body) {
            return Err(refused.into());
        }
        Ok(answer)
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
        let a = self.request(Method::GET, &format!("{endpoint}/v1/status"), None, timeout).await?;
        a.body.map_err(|e| anyhow!("{endpoint}: HTTP {}: {}", a.status, e.error))
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
    /// non-success answer a [`Refused`] with the API's error body.
    pub async fn events(
        &self,
        url: &str,
        last_event_id: Option<u64>,
        mut on_event: impl FnMut(SseEvent) -> anyhow::Result<bool>,
    ) -> anyhow::Result<()> {
        let mut req = self.builder(Method::GET, url.parse::<Uri>()?);
        if let Some(id) = last_event_id {
            req = req.header("last-event-id", id.to_string());
        }
        let req = req.body(Full::new(Bytes::new()))?;
        let resp = tokio::time::timeout(REQUEST_TIMEOUT, self.inner.request(req))
            .await
            .map_err(|_| anyhow!("{url}: no answer within {REQUEST_TIMEOUT:?}"))?
            .with_context(|| format!("{url}: unreachable"))?;
        let status = resp.status();
        if !status.is_success() {
            let limited = http_body_util::Limited::new(resp.into_body(), MAX_RESPONSE_BYTES);
            let read = tokio::time::timeout(REQUEST_TIMEOUT, limited.collect()).await;
            let bytes = match read {
                Ok(Ok(collected)) => collected.to_bytes(),
                _ => Bytes::new(),
            };
            if let Some(refused) = self.refusal(url, status, &bytes) {
                return Err(refused.into());
            }
            return Err(Refused { url: url.to_string(), status, body: error_body(&bytes) }.into());
        }
        let mut body = BodyStream::new(resp.into_body());
        let mut line = Vec::new();
        let mut event = SseEvent::default();
        while let Some(frame) = body.next().await {
            let frame = frame.with_context(|| format!("{url}: stream broken"))?;
            let Ok(chunk) = frame.into_data() else {
                continue;
            };
            for &b in chunk.iter() {
                if b != b'\n' {
                    line.push(b);
                    if line.len() > MAX_SSE_LINE_BYTES {
                        bail!("{url}: SSE line longer than {MAX_SSE_LINE_BYTES} bytes");
                    }
                    continue;
                }
                let text = String::from_utf8_lossy(&line).trim_end_matches('\r').to_string();
                line.clear();
                if let Some(d) = text.strip_prefix("data:") {
                    event.data.push_str(d.trim_start());
                } else if let Some(name) = text.strip_prefix("event:") {
                    event.event = name.trim().to_string();
                } else if let Some(id) = text.strip_prefix("id:") {
                    event.id = Some(id.trim().to_string());
                } else if text.is_empty() {
                    // A blank line ends an event; one without data is a keep-alive.
                    let done = std::mem::take(&mut event);
                    if !done.data.is_empty() && !on_event(done)? {
                        return Ok(());
                    }
                }
            }
        }
        Ok(())
    }
}

/// One Server-Sent Event.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// Its name (`event:`), empty if none.
    pub event: String,
    /// Its id (`id:`), if it has one.
    pub id: Option<String>,
    /// Its data.
    pub data: String,
}

/// The server answered with an error status (other than 401 and 403).
#[derive(Debug, thiserror::Error)]
#[error("{url}: HTTP {status}: {}", body.error)]
pub struct Refused {
    /// The URL asked.
    pub url: String,
    /// The status.
    pub status: StatusCode,
    /// The API's error body.
    pub body: ErrorBody,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_normalised() {
        assert_eq!(
            parse_endpoints("127.0.0.1:8001, http://127.0.0.1:8002/", false).unwrap(),
            vec!["http://127.0.0.1:8001", "http://127.0.0.1:8002"]
        );
        assert_eq!(
            parse_endpoints("127.0.0.1:8001,https://h:2,http://h:3", true).unwrap(),
            vec!["https://127.0.0.1:8001", "https://h:2", "http://h:3"]
        );
        let err = parse_endpoints("https://x:1", false).unwrap_err().to_string();
        assert!(err.contains("--cacert"), "{err}");
        assert!(parse_endpoints(" , ", true).is_err());
    }
}
