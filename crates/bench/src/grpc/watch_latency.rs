//! etcd's `benchmark watch-latency`: watchers of one key, spread over one
//! watch stream per connection, and one writer putting the key at a fixed
//! rate; each event's latency runs from the moment its put was sent to the
//! moment a watcher received it.

use super::{Summary, CALL_TIMEOUT};
use crate::stats::summarize;
use anyhow::Context;
use serde::Serialize;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tenure_etcd_api::etcdserverpb::kv_client::KvClient;
use tenure_etcd_api::etcdserverpb::watch_client::WatchClient;
use tenure_etcd_api::etcdserverpb::watch_request::RequestUnion;
use tenure_etcd_api::etcdserverpb::{PutRequest, WatchCreateRequest, WatchRequest};
use tonic::transport::Channel;

/// The key every watcher watches.
const KEY: &[u8] = b"bench-watched";

/// How long the events of the last puts may take once the writer stopped.
const DRAIN_BOUND: Duration = Duration::from_secs(5);

/// The results.
#[derive(Debug, Serialize)]
pub(super) struct WatchLatencyReport {
    /// Watchers, over this many streams.
    pub watchers: usize,
    pub streams: usize,
    /// Puts sent, per second.
    pub put_rate: u64,
    pub puts: usize,
    /// Events expected (puts × watchers) but not received.
    pub missing: usize,
    /// From a put's sending to an event's arrival, ms.
    pub latency_ms: Option<Summary>,
}

/// `watchers` watchers over `channels` (a stream each), puts at `rate`
/// per second for `seconds`.
pub(super) async fn watch_latency(
    channels: &[Channel],
    watchers: usize,
    rate: u64,
    seconds: u64,
) -> anyhow::Result<WatchLatencyReport> {
    let sent: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let received: Arc<Mutex<Vec<f64>>> = Arc::default();
    let mut streams = Vec::new();
    for (s, channel) in channels.iter().enumerate() {
        let here = watchers / channels.len() + usize::from(s < watchers % channels.len());
        if here == 0 {
            continue;
        }
        // The creates go with the call: etcd (grpc-go) sends the stream's
        // headers with its first answer, and the call returns once they
        // came.
        let (tx, rx) = tokio::sync::mpsc::channel(here);
        for _ in 0..here {
            let create = WatchCreateRequest { key: KEY.to_vec(), ..Default::default() };
            let request = WatchRequest { request_union: Some(RequestUnion::CreateRequest(create)) };
            tx.send(request).await.context("creating a watch")?;
        }
        let mut client = WatchClient::new(channel.clone());
        let call = client.watch(tokio_stream::wrappers::ReceiverStream::new(rx));
        let mut stream = tokio::time::timeout(CALL_TIMEOUT, call)
            .await
            .context("no answer to a watch")?
            .context("opening a watch stream")?
            .into_inner();
        let mut created = 0;
        while created < here {
            let answer = tokio::time::timeout(CALL_TIMEOUT, stream.message()).await;
            let answer = answer.context("no answer to a watch create")??.context("stream ended")?;
            created += usize::from(answer.created);
        }
        let (sent, received) = (sent.clone(), received.clone());
        streams.push(tokio::spawn(async move {
            let _keep_open = tx;
            while let Ok(Some(answer)) = stream.message().await {
                let now = Instant::now();
                for event in answer.events {
                    let Some(kv) = event.kv else { continue };
                    let index = std::str::from_utf8(&kv.value).ok().and_then(|v| v.parse().ok());
                    let at = index.and_then(|i: usize| sent.lock().ok()?.get(i).copied());
                    if let (Some(at), Ok(mut received)) = (at, received.lock()) {
                        received.push(now.duration_since(at).as_secs_f64() * 1e3);
                    }
                }
            }
        }));
    }
    let mut kv = KvClient::new(channels[0].clone());
    let every = Duration::from_secs_f64(1.0 / rate as f64);
    let started = Instant::now();
    let mut puts = 0;
    while started.elapsed() < Duration::from_secs(seconds) {
        let tick = started + every * puts as u32;
        tokio::time::sleep_until(tick.into()).await;
        sent.lock().map_err(|_| anyhow::anyhow!("poisoned"))?.push(Instant::now());
        let put = PutRequest {
            key: KEY.to_vec(),
            value: puts.to_string().into_bytes(),
            ..Default::default()
        };
        tokio::time::timeout(CALL_TIMEOUT, kv.put(put))
            .await
            .context("a put of the watched key timed out")?
            .context("a put of the watched key")?;
        puts += 1;
    }
    let expected = puts * watchers;
    let drained = Instant::now() + DRAIN_BOUND;
    let count = || received.lock().map_or(0, |r| r.len());
    while count() < expected && Instant::now() < drained {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for stream in streams {
        stream.abort();
    }
    let latencies = received.lock().map_err(|_| anyhow::anyhow!("poisoned"))?.clone();
    Ok(WatchLatencyReport {
        watchers,
        streams: channels.len().min(watchers),
        put_rate: rate,
        puts,
        missing: expected.saturating_sub(latencies.len()),
        latency_ms: summarize(&latencies),
    })
}
