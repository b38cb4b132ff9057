//! Raw HTTP(S) requests with a per-request timeout, for what the tenure API
//! client does not cover: `/metrics` text and etcd's JSON gateway.

use crate::rest::ClientOptions;
use anyhow::{anyhow, Context};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::header::HeaderValue;
use hyper::{Method, Request, StatusCode, Uri};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::rt::TokioExecutor;
use std::time::Duration;

/// Largest response body read (a status answer or a metrics page).
const MAX_BODY_BYTES: usize = 1024 * 1024;

/// A pooled keep-alive client: fast polling reuses its connections. It
/// sends a bearer token when given one.
#[derive(Clone)]
pub struct Fetch {
    inner: HyperClient<HttpsConnector<HttpConnector>, Full<Bytes>>,
    authorization: Option<HeaderValue>,
}

impl Fetch {
    /// A client for http:// and, trusting `options.cacert`, https:// URLs,
    /// sending `Authorization: Bearer <options.token>` (the tenure API's)
    /// when there is a token.
    pub fn new(options: ClientOptions<'_>) -> anyhow::Result<Self> {
        let connector = crate::rest::connector(crate::rest::roots(options.cacert)?);
        let authorization = options
            .token
            .map(|token| {
                let mut value = HeaderValue::try_from(format!("Bearer {token}"))
                    .map_err(|_| anyhow!("the token cannot be sent in an HTTP header"))?;
                value.set_sensitive(true);
                anyhow::Ok(value)
            })
            .transpose()?;
        Ok(Fetch {
            inner: HyperClient::builder(TokioExecutor::new()).build(connector),
            authorization,
        })
    }

    /// Sends one request and reads the whole answer, all within `timeout`.
    pub async fn send(
        &self,
        method: Method,
        url: &str,
        body: Option<&str>,
        timeout: Duration,
    ) -> anyhow::Result<(StatusCode, Bytes)> {
        let uri: Uri = url.parse().with_context(|| format!("bad URL {url}"))?;
        let mut req = Request::builder().method(method).uri(uri);
        if let Some(value) = &self.authorization {
            req = req.header(hyper::header::AUTHORIZATION, value.clone());
        }
        if body.is_some() {
            req = req.header(hyper::header::CONTENT_TYPE, "application/json");
        }
        let req = req.body(Full::new(Bytes::from(body.unwrap_or_default().to_string())))?;
        let fut = async {
            let resp = self.inner.request(req).await?;
            let status = resp.status();
            let limited = http_body_util::Limited::new(resp.into_body(), MAX_BODY_BYTES);
            let bytes = limited.collect().await.map_err(|e| anyhow!("reading: {e}"))?.to_bytes();
            anyhow::Ok((status, bytes))
        };
        tokio::time::timeout(timeout, fut)
            .await
            .map_err(|_| anyhow!("{url}: no answer within {timeout:?}"))?
            .with_context(|| format!("{url}: unreachable"))
    }

    /// `GET url` as text; non-2xx answers are errors.
    pub async fn get_text(&self, url: &str, timeout: Duration) -> anyhow::Result<String> {
        let (status, bytes) = self.send(Method::GET, url, None, timeout).await?;
        if !status.is_success() {
            anyhow::bail!("{url}: HTTP {status}");
        }
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }
}

/// The value of an unlabelled sample `name` in Prometheus text, if present.
pub fn metric_value(text: &str, name: &str) -> Option<f64> {
    text.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        let (n, v) = l.split_once(' ')?;
        (n == name).then(|| v.trim().parse().ok()).flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_values_are_read_by_exact_name() {
        let text = "# HELP tenure_elections_started Elections started\n\
                    # TYPE tenure_elections_started counter\n\
                    tenure_elections_started_total 3\n\
                    tenure_elections_started_total_x 9\n\
                    tenure_term 12\n";
        assert_eq!(metric_value(text, "tenure_elections_started_total"), Some(3.0));
        assert_eq!(metric_value(text, "tenure_term"), Some(12.0));
        assert_eq!(metric_value(text, "tenure_missing"), None);
    }
}
