//! Receiving from a watch stream without stalling on a member that
//! vanished: after a quiet spell the member is asked for a progress report
//! (etcd 3.4's `WatchProgressRequest`), and a report that does not come
//! within the request timeout ends the stream with
//! [`StoreError::NoAnswer`] (HTTP/2 keepalive would notice too, later).

use crate::error::{classify, timed_out};
use etcd_client::{WatchResponse, WatchStream};
use std::time::Duration;
use tenure_client::StoreError;
use tokio::time::Instant;

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
