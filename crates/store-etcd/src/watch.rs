//! Receiving from a watch stream without stalling on a member that
//! vanished: after a quiet spell the member is asked for a progress report
//! (etcd 3.4's `WatchProgressRequest`), and a report that does not come
//! within the request timeout ends the stream with
//! [`StoreError::NoAnswer`] (HTTP/2 keepalive would notice too, later).

use crate::conn::{requests, Client, STREAM_REQUESTS};
use crate::error::{classify, timed_out, EtcdError};
use crate::inner::prefix_end;
use std::time::Duration;
use tenure_elect::StoreError;
use tenure_etcd_api::etcdserverpb::watch_create_request::FilterType;
use tenure_etcd_api::etcdserverpb::watch_request::RequestUnion;
use tenure_etcd_api::etcdserverpb::{
    WatchCreateRequest, WatchProgressRequest, WatchRequest, WatchResponse,
};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// A watch stream: its request side (more watches, progress requests) and
/// its answers.
pub(crate) struct WatchStream {
    sender: mpsc::Sender<WatchRequest>,
    answers: tonic::Streaming<WatchResponse>,
}

/// The creation of a watch of `key` (of every key under it if `prefix`,
/// the range end computed as etcd does) from `start` on (inclusive),
/// without puts if `no_put`.
pub(crate) fn create(key: &[u8], prefix: bool, start: i64, no_put: bool) -> WatchCreateRequest {
    WatchCreateRequest {
        key: key.to_vec(),
        range_end: if prefix { prefix_end(key) } else { Vec::new() },
        start_revision: start,
        filters: if no_put { vec![FilterType::Noput.into()] } else { Vec::new() },
        ..Default::default()
    }
}

impl WatchStream {
    /// Opens a watch stream on `client` with the watch `first` (the
    /// stream is open once the member answered its headers).
    pub(crate) async fn open(
        client: &Client,
        first: WatchCreateRequest,
    ) -> Result<WatchStream, EtcdError> {
        client
            .run(|c| {
                let first = first.clone();
                async move {
                    let (sender, rx) = mpsc::channel(STREAM_REQUESTS);
                    let request =
                        WatchRequest { request_union: Some(RequestUnion::CreateRequest(first)) };
                    sender.send(request).await.map_err(closed)?;
                    let answers = c.watch().watch(requests(rx)).await?.into_inner();
                    Ok(WatchStream { sender, answers })
                }
            })
            .await
    }

    /// Adds the watch `create` to the stream.
    pub(crate) async fn watch(&mut self, create: WatchCreateRequest) -> Result<(), EtcdError> {
        let request = WatchRequest { request_union: Some(RequestUnion::CreateRequest(create)) };
        self.sender.send(request).await.map_err(closed)
    }

    /// Asks for a progress report.
    async fn request_progress(&mut self) -> Result<(), EtcdError> {
        let progress = RequestUnion::ProgressRequest(WatchProgressRequest {});
        self.sender.send(WatchRequest { request_union: Some(progress) }).await.map_err(closed)
    }

    /// The next answer, None when the stream ended.
    async fn message(&mut self) -> Result<Option<WatchResponse>, EtcdError> {
        Ok(self.answers.message().await?)
    }
}

/// The error of a watch request that could not be queued: the stream is gone.
fn closed<T>(e: mpsc::error::SendError<T>) -> EtcdError {
    EtcdError::WatchError(e.to_string())
}

/// The next message of `stream` (from `endpoint`), or None when `until`
/// came first. A progress report is asked for after `quiet` without a
/// message; its answer (or any message) must come within `timeout`.
pub(crate) async fn next_message(
    stream: &mut WatchStream,
    endpoint: &str,
    quiet: Duration,
    timeout: Duration,
    until: Instant,
) -> Result<Option<WatchResponse>, StoreError> {
    let mut probing = false;
    loop {
        let spell = if probing { timeout } else { quiet };
        let wake = (Instant::now() + spell).min(until);
        match tokio::time::timeout_at(wake, stream.message()).await {
            Ok(Ok(Some(message))) => return Ok(Some(message)),
            Ok(Ok(None)) => {
                return Err(StoreError::NoAnswer {
                    endpoint: endpoint.to_string(),
                    sent: true,
                    source: "the watch stream ended".into(),
                })
            }
            Ok(Err(e)) => return Err(classify(endpoint, e)),
            Err(_) if Instant::now() >= until => return Ok(None),
            Err(_) if !probing => {
                stream.request_progress().await.map_err(|e| classify(endpoint, e))?;
                probing = true;
            }
            Err(_) => return Err(timed_out(endpoint, spell)),
        }
    }
}
