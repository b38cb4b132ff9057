//! The load generator of `tenure bench kv`: tasks, one keep-alive
//! connection each, sending puts or linearizable gets back to back to
//! tenure's `/v1/kv` or etcd's JSON gateway, and what they saw; and
//! [`fill`], which writes a store full of large values before a catch-up
//! is measured.

use super::fetch::Fetch;
use anyhow::{bail, Context};
use base64::Engine;
use hyper::{Method, StatusCode};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The longest one request may take before it counts as an error.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Pause of a connection after a request could not be sent (node down).
const ERROR_BACKOFF: Duration = Duration::from_millis(10);
/// Step between the keys one task sends (a prime, so the tasks spread over
/// the keys).
const KEY_STRIDE: usize = 7919;
/// Bytes per value when filling a store (a tenure command must stay under
/// the log's 64 KiB limit with its key).
pub(super) const FILL_VALUE_BYTES: usize = 60 * 1024;
/// Writers filling a store.
const FILL_WRITERS: u64 = 8;

/// The requests of one system.
#[derive(Clone)]
pub(super) enum Api {
    /// tenure's `/v1/kv` at `base`.
    Tenure { base: String },
    /// etcd's JSON gateway at `base`.
    Etcd { base: String },
}

impl Api {
    pub(super) fn put(&self, key: &str, value: &str) -> (Method, String, String) {
        match self {
            Api::Tenure { base } => (Method::PUT, format!("{base}/v1/kv/{key}"), value.to_string()),
            Api::Etcd { base } => {
                let b64 = base64::engine::general_purpose::STANDARD;
                let body = serde_json::json!({"key": b64.encode(key), "value": b64.encode(value)});
                (Method::POST, format!("{base}/v3/kv/put"), body.to_string())
            }
        }
    }

    pub(super) fn get(&self, key: &str) -> (Method, String, String) {
        match self {
            Api::Tenure { base } => (Method::GET, format!("{base}/v1/kv/{key}"), String::new()),
            Api::Etcd { base } => {
                let b64 = base64::engine::general_purpose::STANDARD;
                let body = serde_json::json!({"key": b64.encode(key)});
                (Method::POST, format!("{base}/v3/kv/range"), body.to_string())
            }
        }
    }
}

/// The load of a phase.
#[derive(Clone, Copy)]
pub(super) enum Load {
    /// Puts.
    Writes,
    /// Linearizable gets.
    Reads,
}

/// What a load generator runs.
#[derive(Clone, Copy)]
pub(super) struct LoadSpec {
    /// Concurrent connections (tasks).
    pub connections: usize,
    /// Distinct keys.
    pub keys: usize,
    /// Writes or reads.
    pub load: Load,
}

/// What a load generator saw.
#[derive(Debug, Default)]
pub(super) struct Tally {
    /// Latency of the successful requests, ms (sorted once done).
    pub latencies_ms: Vec<f64>,
    /// 503: refused, nothing done (no leader within the server's bound).
    pub refused: u64,
    /// 504: a write's outcome is unknown.
    pub unknown: u64,
    /// Anything else: other statuses, timeouts, connection errors.
    pub errors: u64,
    /// How long it ran, s.
    pub seconds: f64,
}

/// `spec.connections` tasks (spread over `apis`, one connection each)
/// sending requests back to back until `stop` is set.
pub(super) async fn run_load(
    fetch: &Fetch,
    apis: &[Api],
    value: &Arc<str>,
    spec: LoadSpec,
    stop: &Arc<AtomicBool>,
) -> Tally {
    let started = Instant::now();
    let tasks: Vec<_> = (0..spec.connections)
        .map(|task| {
            let (fetch, api, value) =
                (fetch.clone(), apis[task % apis.len()].clone(), value.clone());
            let stop = stop.clone();
            tokio::spawn(async move {
                let mut t = Tally::default();
                let mut n = task;
                while !stop.load(Ordering::Relaxed) {
                    let key = format!("bench-{:07}", n % spec.keys);
                    n += KEY_STRIDE;
                    let (method, url, body) = match spec.load {
                        Load::Writes => api.put(&key, &value),
                        Load::Reads => api.get(&key),
                    };
                    let body = (!body.is_empty()).then_some(body.as_str());
                    let sent = Instant::now();
                    match fetch.send(method, &url, body, REQUEST_TIMEOUT).await {
                        Ok((s, _)) if s.is_success() || s == StatusCode::NOT_FOUND => {
                            t.latencies_ms.push(sent.elapsed().as_secs_f64() * 1e3)
                        }
                        Ok((StatusCode::SERVICE_UNAVAILABLE, _)) => t.refused += 1,
                        Ok((StatusCode::GATEWAY_TIMEOUT, _)) => t.unknown += 1,
                        Ok(_) => t.errors += 1,
                        Err(_) => {
                            // A node that is down: do not spin on it.
                            t.errors += 1;
                            tokio::time::sleep(ERROR_BACKOFF).await;
                        }
                    }
                }
                t
            })
        })
        .collect();
    let mut all = Tally::default();
    for t in futures_util::future::join_all(tasks).await.into_iter().flatten() {
        all.latencies_ms.extend(t.latencies_ms);
        all.refused += t.refused;
        all.unknown += t.unknown;
        all.errors += t.errors;
    }
    all.seconds = started.elapsed().as_secs_f64();
    all.latencies_ms.sort_by(f64::total_cmp);
    all
}

/// Writes at least `bytes` of [`FILL_VALUE_BYTES`]-byte values (keys
/// `fill-NNNNNNN`) through `api`, [`FILL_WRITERS`] at a time, each write
/// bounded by [`REQUEST_TIMEOUT`]; any write that fails fails the fill.
/// Returns the bytes of values written.
pub(super) async fn fill(fetch: &Fetch, api: &Api, bytes: u64) -> anyhow::Result<u64> {
    let keys = bytes.div_ceil(FILL_VALUE_BYTES as u64);
    let value: Arc<str> = "f".repeat(FILL_VALUE_BYTES).into();
    let writers = (0..FILL_WRITERS).map(|w| {
        let (fetch, value, api) = (fetch.clone(), value.clone(), api.clone());
        tokio::spawn(async move {
            let mut k = w;
            while k < keys {
                let (method, url, body) = api.put(&format!("fill-{k:07}"), &value);
                let (status, answer) =
                    fetch.send(method, &url, Some(&body), REQUEST_TIMEOUT).await?;
                if !status.is_success() {
                    let answer = String::from_utf8_lossy(&answer);
                    bail!("filling the store: {url} answered {status}: {answer}");
                }
                k += FILL_WRITERS;
            }
            anyhow::Ok(())
        })
    });
    for w in futures_util::future::join_all(writers).await {
        w.context("a writer failed")??;
    }
    Ok(keys * FILL_VALUE_BYTES as u64)
}
