//! A small JSON-over-HTTP(S) client for the tenure API.
//!
//! Built on hyper directly: the client needs only a few verbs, bounded
//! answers and a streaming body for Server-Sent Events. HTTPS goes through
//! rustls (hyper-rustls), trusting only the cluster's CA (`cacert`), never
//! the system's roots.
//!
//! A client made with a token sends it as `Authorization: Bearer` on every
//! request; a 401 or 403 answer becomes an [`AuthRefused`] error that says
//! what to do.

use crate::error::{AuthRefused, BoxError, Error, Message, Misconfigured, NoAnswer, Refused};
use futures_util::StreamExt;
use http_body_util::{BodyExt, BodyStream, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, StatusCode, Uri};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::rt::TokioExecutor;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use serde::de::DeserializeOwned;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// How long one request may take before the endpoint counts as unreachable.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// Largest response body read: API answers are a few kilobytes, but a page
/// of a list answer may hold up to 4 MiB of JSON (the server's
/// `MAX_LIST_BYTES`), with room.
const MAX_RESPONSE_BYTES: usize = 8 * 1024 * 1024;
/// Longest SSE line accepted before the stream is considered broken.
const MAX_SSE_LINE_BYTES: usize = 64 * 1024;

/// The connector of every client: TCP with TCP_NODELAY and a connect
/// timeout, TLS for `https://` URLs trusting `roots` only, without a client
/// certificate: a server that asks for one is remembered in `asked`.
fn connector(
    roots: rustls::RootCertStore,
    asked: Arc<CertificateAsked>,
) -> HttpsConnector<HttpConnector> {
    let mut http = HttpConnector::new();
    http.set_nodelay(true);
    http.set_connect_timeout(Some(REQUEST_TIMEOUT));
    http.enforce_http(false);
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("the ring provider supports the default TLS versions")
    .with_root_certificates(roots)
    .with_client_cert_resolver(asked);
    hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .wrap_connector(http)
}

/// The client's answer to a server that asks for a client certificate: it
/// has none, and remembers that it was asked. In TLS 1.3 the server judges
/// the client's (empty) certificate after the client has finished its
/// handshake, so its refusal (an alert) may arrive after the connection was
/// handed to HTTP and be lost with it: a request during which a server
/// asked (the count rose) is then how the client knows it knocked on a
/// node's peer port. Counted, not a flag: a hang-up of another request,
/// on a connection that asked nothing, is no peer port's. (Requests made
/// at once on one client may see each other's asks: the CLI makes one at
/// a time.)
#[derive(Debug, Default)]
struct CertificateAsked(std::sync::atomic::AtomicU64);

impl CertificateAsked {
    /// How many times a server asked so far.
    fn times(&self) -> u64 {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl rustls::client::ResolvesClientCert for CertificateAsked {
    fn resolve(
        &self,
        _acceptable_issuers: &[&[u8]],
        _schemes: &[rustls::SignatureScheme],
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        None
    }

    fn has_certs(&self) -> bool {
        false
    }
}

/// The CA certificates of the PEM file `cacert` (none without a file: then
/// only `http://` endpoints work).
pub fn roots(cacert: Option<&Path>) -> Result<rustls::RootCertStore, Error> {
    let mut roots = rustls::RootCertStore::empty();
    let Some(path) = cacert else {
        return Ok(roots);
    };
    let bad = |problem: String| Error::Config(format!("CA file {}: {problem}", path.display()));
    let pem = std::fs::read(path).map_err(|e| bad(format!("cannot be read: {e}")))?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(format!("is not valid PEM: {e}")))?;
    if certs.is_empty() {
        return Err(bad("holds no certificate".into()));
    }
    for cert in certs {
        roots.add(cert).map_err(|e| bad(format!("holds an unusable CA certificate: {e}")))?;
    }
    Ok(roots)
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
/// with the bearer token it sends, if any. Cheap to clone.
#[derive(Clone)]
pub struct Client {
    inner: HyperClient<HttpsConnector<HttpConnector>, Full<Bytes>>,
    https: bool,
    /// Set once a server asked this client for a client certificate.
    asked: Arc<CertificateAsked>,
    /// `Bearer <token>`, marked sensitive.
    authorization: Option<Arc<hyper::header::HeaderValue>>,
}

impl Default for Client {
    /// A client for `http://` endpoints only, without a token.
    fn default() -> Self {
        Client::with_roots(None, None).expect("no token cannot be a bad header")
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("https", &self.https)
            .field("token", &self.authorization.is_some())
            .finish()
    }
}

/// Normalises an endpoint: adds the scheme when missing (`https://` if
/// `https`, else `http://`), drops a trailing `/`.
pub fn normalize_endpoint(endpoint: &str, https: bool) -> Result<String, Error> {
    let e = endpoint.trim().trim_end_matches('/');
    if e.is_empty() {
        return Err(Error::Config("empty endpoint".into()));
    }
    if e.starts_with("https://") && !https {
        return Err(Error::Config(format!(
            "{e}: https needs the cluster's CA certificate to check the server's: give \
             --cacert FILE (or set TENURE_CACERT)"
        )));
    }
    let e = if e.starts_with("http://") || e.starts_with("https://") {
        e.to_string()
    } else if https {
        format!("https://{e}")
    } else {
        format!("http://{e}")
    };
    e.parse::<Uri>().map_err(|err| Error::Config(format!("{endpoint}: not a URL ({err})")))?;
    Ok(e)
}

/// Parses a comma-separated endpoint list (`https` as in [`normalize_endpoint`]).
pub fn parse_endpoints(list: &str, https: bool) -> Result<Vec<String>, Error> {
    let endpoints = list
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|e| normalize_endpoint(e, https))
        .collect::<Result<Vec<_>, _>>()?;
    if endpoints.is_empty() {
        return Err(Error::Config("no endpoints given".into()));
    }
    Ok(endpoints)
}

/// An answer as it came.
#[derive(Debug)]
pub struct RawAnswer {
    /// HTTP status.
    pub status: StatusCode,
    /// `Retry-After` in seconds, if the server sent one.
    pub retry_after: Option<u64>,
    /// The body.
    pub body: Bytes,
}

impl RawAnswer {
    /// The body decoded as `T` if the status is a success, else a
    /// [`Refused`] error with the API's message.
    pub fn json<T: DeserializeOwned>(self, url: &str) -> Result<T, Error> {
        if !self.status.is_success() {
            return Err(refused(url, self.status, self.body).into());
        }
        serde_json::from_slice(&self.body)
            .map_err(|source| Error::Decode { url: url.to_string(), source })
    }
}

/// The message of the API's error body `{"error": "..."}`, or the body as text.
pub fn error_message(body: &[u8]) -> String {
    serde_json::from_slice::<tenure_api::ErrorBody>(body)
        .map(|e| e.error)
        .unwrap_or_else(|_| String::from_utf8_lossy(body).into_owned())
}

fn refused(url: &str, status: StatusCode, body: Bytes) -> Refused {
    Refused { url: url.to_string(), status, message: error_message(&body), body }
}

fn no_answer(url: &str, sent: bool, source: impl Into<BoxError>) -> NoAnswer {
    NoAnswer { url: url.to_string(), sent, source: source.into() }
}

/// A request to `url` that got no answer: sent or not, and why; a TLS
/// failure says what it means for a client of the API ([`explain_tls`]).
/// `asked`: a server asked this client for a certificate during this
/// request, so a connection it closed without an answer is the refusal of
/// a peer port whose alert was lost ([`CertificateAsked`]). A failure no
/// retry mends is never `sent`: the server refused the connection, so no
/// HTTP request of it reached the server's application.
fn request_failed(url: &str, e: hyper_util::client::legacy::Error, asked: bool) -> NoAnswer {
    let sent = !e.is_connect();
    let tls = causes(&e).find_map(|c| c.downcast_ref::<rustls::Error>());
    match tls {
        Some(tls) if tls_hint(tls).is_some() => {
            no_answer(url, false, Misconfigured(explain_tls(tls)))
        }
        Some(tls) => no_answer(url, sent, Message(explain_tls(tls))),
        None if asked && url.starts_with("https://") && causes(&e).any(hung_up) => no_answer(
            url,
            false,
            Misconfigured(format!(
                "{WANTS_A_CERTIFICATE} (it asked for a client certificate, then closed the connection)"
            )),
        ),
        None => no_answer(url, sent, e),
    }
}

/// Every error of `e`'s chain, `e` first, each I/O error followed by its
/// payload: hyper-rustls carries a TLS error as the payload of an I/O error
/// (itself another's payload), which `source()` skips.
fn causes<'a>(
    e: &'a (dyn std::error::Error + 'static),
) -> impl Iterator<Item = &'a (dyn std::error::Error + 'static)> {
    std::iter::successors(Some(e), |err| match err.downcast_ref::<std::io::Error>() {
        Some(io) => io.get_ref().map(|p| p as &(dyn std::error::Error + 'static)),
        None => err.source(),
    })
}

/// True if `e` says the server closed the connection without an answer:
/// before the request could be sent (hyper's "connection was not ready"),
/// during it, or without TLS's close_notify.
fn hung_up(e: &(dyn std::error::Error + 'static)) -> bool {
    use std::io::ErrorKind;
    let hyper = e.downcast_ref::<hyper::Error>();
    let io = e.downcast_ref::<std::io::Error>().map(|io| io.kind());
    hyper.is_some_and(|h| h.is_canceled() || h.is_incomplete_message())
        || matches!(
            io,
            Some(ErrorKind::UnexpectedEof | ErrorKind::ConnectionReset | ErrorKind::BrokenPipe)
        )
}

/// What to do when an endpoint asks for a client certificate: a node's peer
/// port, or its etcd listener (which asks for one of the cluster's CA too).
const WANTS_A_CERTIFICATE: &str =
    "the server wants a client certificate: this is a node's peer port \
                         (--listen) or etcd listener (--etcd-listen), not its API port (--http)";

/// A TLS failure of a client of the API, said with what to do: the
/// certificate is of another CA than `--cacert`'s, names another host, has
/// expired; or the port is a peer port, which asks for a client
/// certificate. Others as rustls says them.
pub fn explain_tls(e: &rustls::Error) -> String {
    match tls_hint(e) {
        Some(hint) => format!("{hint} (TLS: {e})"),
        None => format!("TLS: {e}"),
    }
}

/// What to do about a TLS failure that trying again cannot mend (a
/// certificate that does not fit, a peer port); None for others.
fn tls_hint(e: &rustls::Error) -> Option<&'static str> {
    use rustls::{AlertDescription, CertificateError as C, Error as E};
    let hint = match e {
        E::InvalidCertificate(C::BadSignature | C::UnknownIssuer) => {
            "the server's certificate is not signed by the CA of --cacert (TENURE_CACERT): give \
             this cluster's ca.pem (made by `tenure cert` with the servers' certificates)"
        }
        E::InvalidCertificate(C::NotValidForName | C::NotValidForNameContext { .. }) => {
            "the server's certificate does not name this endpoint's host: use a name or an IP \
             address its certificate was made for (`tenure cert --hosts`)"
        }
        E::InvalidCertificate(C::Expired | C::ExpiredContext { .. }) => {
            "the server's certificate has expired: make new ones (`tenure cert`)"
        }
        E::AlertReceived(AlertDescription::CertificateRequired) => WANTS_A_CERTIFICATE,
        _ => return None,
    };
    Some(hint)
}

impl Client {
    /// A client that trusts the CA certificate(s) of `options.cacert` for
    /// `https://` endpoints (the servers' TLS, made by `tenure cert`), or a
    /// plain HTTP client without one, and sends `options.token` as a bearer
    /// token with every request (None: no token).
    pub fn new(options: ClientOptions<'_>) -> Result<Self, Error> {
        let roots = match options.cacert {
            Some(path) => Some(roots(Some(path))?),
            None => None,
        };
        Client::with_roots(roots, options.token)
    }

    /// A client trusting `roots` for `https://` endpoints (None: plain HTTP
    /// only), sending `token` as a bearer token (None: no token).
    pub fn with_roots(
        roots: Option<rustls::RootCertStore>,
        token: Option<&str>,
    ) -> Result<Self, Error> {
        let authorization = token
            .map(|t| {
                let mut value = hyper::header::HeaderValue::try_from(format!("Bearer {t}"))
                    .map_err(|_| {
                        Error::Config("the token cannot be sent in an HTTP header".into())
                    })?;
                value.set_sensitive(true);
                Ok::<_, Error>(Arc::new(value))
            })
            .transpose()?;
        let https = roots.is_some();
        let roots = roots.unwrap_or_else(rustls::RootCertStore::empty);
        let asked = Arc::new(CertificateAsked::default());
        Ok(Client {
            inner: HyperClient::builder(TokioExecutor::new())
                .build(connector(roots, asked.clone())),
            https,
            asked,
            authorization,
        })
    }

    /// True if it can talk HTTPS (it was given a CA): endpoints without a
    /// scheme are then `https://`.
    pub fn https(&self) -> bool {
        self.https
    }

    /// The same client (its connection pool shared) sending `authorization`
    /// as the `Authorization` header instead of its own token (None: none).
    /// A server that asks its peers on a caller's behalf passes the caller's.
    pub fn with_authorization(&self, authorization: Option<hyper::header::HeaderValue>) -> Self {
        let authorization = authorization.map(|mut v| {
            v.set_sensitive(true);
            Arc::new(v)
        });
        Client {
            inner: self.inner.clone(),
            https: self.https,
            asked: self.asked.clone(),
            authorization,
        }
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
    fn auth_refusal(&self, url: &str, status: StatusCode, body: &[u8]) -> Option<AuthRefused> {
        if status != StatusCode::UNAUTHORIZED && status != StatusCode::FORBIDDEN {
            return None;
        }
        Some(AuthRefused {
            url: url.to_string(),
            status,
            message: error_message(body),
            had_token: self.authorization.is_some(),
        })
    }

    fn parse_url(url: &str) -> Result<Uri, Error> {
        url.parse().map_err(|e| Error::Config(format!("bad URL {url}: {e}")))
    }

    /// Sends `method url` with `body` (its content type and bytes) and
    /// reads the whole answer, at most `timeout`. Errors: [`AuthRefused`]
    /// for 401 and 403, [`NoAnswer`] when no answer came (saying whether
    /// the request may have reached the server); other statuses are
    /// answers.
    pub async fn send(
        &self,
        method: Method,
        url: &str,
        body: Option<(&str, Vec<u8>)>,
        timeout: Duration,
    ) -> Result<RawAnswer, Error> {
        let mut req = self.builder(method, Self::parse_url(url)?);
        let bytes = match body {
            Some((content_type, bytes)) => {
                req = req.header(hyper::header::CONTENT_TYPE, content_type);
                Bytes::from(bytes)
            }
            None => Bytes::new(),
        };
        let req = req.body(Full::new(bytes)).map_err(|e| Error::Config(format!("{url}: {e}")))?;
        let asked_before = self.asked.times();
        let fut = async {
            let resp = self
                .inner
                .request(req)
                .await
                .map_err(|e| request_failed(url, e, self.asked.times() > asked_before))?;
            let status = resp.status();
            let retry_after = resp
                .headers()
                .get(hyper::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok()?.trim().parse().ok());
            let limited = http_body_util::Limited::new(resp.into_body(), MAX_RESPONSE_BYTES);
            let bytes = limited
                .collect()
                .await
                .map_err(|e| no_answer(url, true, Message(format!("reading the answer: {e}"))))?
                .to_bytes();
            Ok::<_, NoAnswer>(RawAnswer { status, retry_after, body: bytes })
        };
        let answer = tokio::time::timeout(timeout, fut).await.map_err(|_| {
            no_answer(url, true, Message(format!("no answer within {timeout:?}")))
        })??;
        if let Some(refused) = self.auth_refusal(url, answer.status, &answer.body) {
            return Err(refused.into());
        }
        Ok(answer)
    }

    /// `method url` with an optional JSON body; the answer decoded as `T`
    /// on success, a [`Refused`] error otherwise.
    pub async fn json<T: DeserializeOwned>(
        &self,
        method: Method,
        url: &str,
        body: Option<&serde_json::Value>,
        timeout: Duration,
    ) -> Result<T, Error> {
        let body = body.map(|b| ("application/json", b.to_string().into_bytes()));
        self.send(method, url, body, timeout).await?.json(url)
    }

    /// `GET endpoint/v1/status`, waiting at most `timeout`: the node's
    /// view of the cluster.
    pub async fn status_within(
        &self,
        endpoint: &str,
        timeout: Duration,
    ) -> Result<tenure_api::StatusBody, Error> {
        self.json(Method::GET, &format!("{endpoint}/v1/status"), None, timeout).await
    }

    /// Opens the Server-Sent Events of `GET url` (with `Last-Event-ID` if
    /// given). A refusal is an [`AuthRefused`]; another non-success answer
    /// a [`Refused`].
    pub async fn event_stream(
        &self,
        url: &str,
        last_event_id: Option<u64>,
    ) -> Result<EventStream, Error> {
        let mut req = self.builder(Method::GET, Self::parse_url(url)?);
        if let Some(id) = last_event_id {
            req = req.header("last-event-id", id.to_string());
        }
        let req =
            req.body(Full::new(Bytes::new())).map_err(|e| Error::Config(format!("{url}: {e}")))?;
        let asked_before = self.asked.times();
        let resp = tokio::time::timeout(REQUEST_TIMEOUT, self.inner.request(req))
            .await
            .map_err(|_| {
                no_answer(url, true, Message(format!("no answer within {REQUEST_TIMEOUT:?}")))
            })?
            .map_err(|e| request_failed(url, e, self.asked.times() > asked_before))?;
        let status = resp.status();
        if !status.is_success() {
            let limited = http_body_util::Limited::new(resp.into_body(), MAX_RESPONSE_BYTES);
            let read = tokio::time::timeout(REQUEST_TIMEOUT, limited.collect()).await;
            let bytes = match read {
                Ok(Ok(collected)) => collected.to_bytes(),
                _ => Bytes::new(),
            };
            if let Some(refused) = self.auth_refusal(url, status, &bytes) {
                return Err(refused.into());
            }
            return Err(refused(url, status, bytes).into());
        }
        Ok(EventStream {
            url: url.to_string(),
            body: BodyStream::new(resp.into_body()),
            buffer: Vec::new(),
            line: Vec::new(),
        })
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

/// An open Server-Sent Events stream, read event by event.
pub struct EventStream {
    url: String,
    body: BodyStream<Incoming>,
    /// Bytes received and not yet split into lines.
    buffer: Vec<u8>,
    /// The line being read.
    line: Vec<u8>,
}

impl std::fmt::Debug for EventStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventStream").field("url", &self.url).finish()
    }
}

impl EventStream {
    /// The URL followed.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The next event with data (keep-alives are skipped); None when the
    /// stream ended.
    pub async fn next(&mut self) -> Result<Option<SseEvent>, Error> {
        let mut event = SseEvent::default();
        loop {
            while !self.buffer.is_empty() {
                let Some(newline) = self.buffer.iter().position(|&b| b == b'\n') else {
                    self.line.extend_from_slice(&self.buffer);
                    self.buffer.clear();
                    break;
                };
                self.line.extend_from_slice(&self.buffer[..newline]);
                self.buffer.drain(..=newline);
                let text = String::from_utf8_lossy(&self.line).trim_end_matches('\r').to_string();
                self.line.clear();
                if let Some(d) = text.strip_prefix("data:") {
                    event.data.push_str(d.trim_start());
                } else if let Some(name) = text.strip_prefix("event:") {
                    event.event = name.trim().to_string();
                } else if let Some(id) = text.strip_prefix("id:") {
                    event.id = Some(id.trim().to_string());
                } else if text.is_empty() {
                    // A blank line ends an event; one without data is a keep-alive.
                    let done = std::mem::take(&mut event);
                    if !done.data.is_empty() {
                        return Ok(Some(done));
                    }
                }
            }
            if self.line.len() > MAX_SSE_LINE_BYTES {
                return Err(Error::Stream {
                    url: self.url.clone(),
                    problem: format!("SSE line longer than {MAX_SSE_LINE_BYTES} bytes"),
                });
            }
            let Some(frame) = self.body.next().await else {
                return Ok(None);
            };
            let frame = frame.map_err(|e| Error::Stream {
                url: self.url.clone(),
                problem: format!("stream broken: {e}"),
            })?;
            if let Ok(chunk) = frame.into_data() {
                self.buffer.extend_from_slice(&chunk);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A TLS failure, as hyper-rustls reports it (an I/O error carrying
    /// the rustls error, under the client's error), is found and said
    /// with what to do.
    #[test]
    fn tls_failures_say_what_to_do() {
        use rustls::{AlertDescription, CertificateError};
        let refused = std::io::Error::other("refused");
        assert!(causes(&refused).all(|c| c.downcast_ref::<rustls::Error>().is_none()));
        let io = std::io::Error::other(rustls::Error::InvalidCertificate(
            CertificateError::BadSignature,
        ));
        // As hyper's client holds its connector's error: an I/O error
        // holding the one of TLS, boxed, as a source.
        let boxed: BoxError = Box::new(std::io::Error::other(io));
        #[derive(Debug, thiserror::Error)]
        #[error("client error (Connect)")]
        struct Client(#[source] BoxError);
        let client = Client(boxed);
        let found = causes(&client)
            .find_map(|c| c.downcast_ref::<rustls::Error>())
            .expect("the payload is found");
        let said = explain_tls(found);
        assert!(said.contains("not signed by the CA of --cacert") && said.contains("BadSignature"));
        let said =
            explain_tls(&rustls::Error::AlertReceived(AlertDescription::CertificateRequired));
        assert!(said.contains("peer port (--listen) or etcd listener"), "{said}");
        assert!(said.contains("not its API port (--http)"), "{said}");
        let said =
            explain_tls(&rustls::Error::InvalidCertificate(CertificateError::NotValidForName));
        assert!(said.contains("--hosts"), "{said}");
        assert!(explain_tls(&rustls::Error::HandshakeNotComplete).starts_with("TLS: "));
    }

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

    #[test]
    fn error_messages_come_from_the_api_body_or_the_text() {
        assert_eq!(
            error_message(br#"{"error":"no such session","revision":3}"#),
            "no such session"
        );
        assert_eq!(error_message(b"plain"), "plain");
    }
}
