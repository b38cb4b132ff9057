//! Raw HTTP(S) requests with a per-request timeout, for what the tenure API
//! client's JSON calls do not cover: `/metrics` text and etcd's JSON
//! gateway. The same client underneath (tenure-client's), raw answers.

use anyhow::anyhow;
use hyper::body::Bytes;
use hyper::{Method, StatusCode};
use std::time::Duration;
use tenure_client::ClientOptions;

/// A pooled keep-alive client: fast polling reuses its connections. It
/// sends a bearer token when given one.
#[derive(Clone)]
pub struct Fetch {
    inner: tenure_client::Client,
}

impl Fetch {
    /// A client for http:// and, trusting `options.cacert`, https:// URLs,
    /// sending `Authorization: Bearer <options.token>` (the tenure API's)
    /// when there is a token.
    pub fn new(options: ClientOptions<'_>) -> anyhow::Result<Self> {
        Ok(Fetch { inner: tenure_client::Client::new(options)? })
    }

    /// Sends one request and reads the whole answer, all within `timeout`.
    pub async fn send(
        &self,
        method: Method,
        url: &str,
        body: Option<&str>,
        timeout: Duration,
    ) -> anyhow::Result<(StatusCode, Bytes)> {
        let body = body.map(|b| ("application/json", b.as_bytes().to_vec()));
        let answer = self.inner.send(method, url, body, timeout).await?;
        Ok((answer.status, answer.body))
    }

    /// `GET url` as text; non-2xx answers are errors.
    pub async fn get_text(&self, url: &str, timeout: Duration) -> anyhow::Result<String> {
        let (status, bytes) = self.send(Method::GET, url, None, timeout).await?;
        if !status.is_success() {
            return Err(anyhow!("{url}: HTTP {status}"));
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
