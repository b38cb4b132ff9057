//! A steady writer for `tenure bench membership`: puts at a fixed rate to
//! one key-value API (open loop), each answer's latency timed from the
//! moment the write was due, so that a stall counts in full for every write
//! it held up (no coordinated omission), and split afterwards into windows
//! of the run.
//!
//! The writes go out at `rate` per second whatever the answers do, with at
//! most `in_flight` at once: a write due while every slot is busy waits for
//! one, and its wait is part of its latency.

use super::fetch::Fetch;
use super::kv_load::Api;
use super::stats::{summarize, Summary};
use anyhow::{bail, Context};
use hyper::StatusCode;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use tokio::time::{sleep_until, timeout, Instant};

/// The longest one write may take before it counts as failed.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How long stopping may take: the writes in flight end within their
/// timeout.
const STOP_BOUND: Duration = Duration::from_secs(30);
/// Most writes per second.
pub(super) const MAX_RATE: u32 = 10_000;

/// What the writer sends.
#[derive(Debug, Clone, Copy)]
pub(super) struct SteadySpec {
    /// Writes per second.
    pub rate: u32,
    /// Most writes in flight at once.
    pub in_flight: usize,
    /// Bytes per value.
    pub value_bytes: usize,
    /// Distinct keys, written in turn.
    pub keys: usize,
}

/// How a write ended.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Outcome {
    /// Acknowledged (2xx) after this many ms from when it was due.
    Ok(f64),
    /// 503: refused, nothing written.
    Refused,
    /// 504: the outcome is unknown.
    Unknown,
    /// Another status, a timeout or a connection error.
    Failed,
}

/// Every write the writer sent: when it was due, and how it ended.
#[derive(Debug, Default)]
pub(super) struct Recorded {
    writes: Vec<(Instant, Outcome)>,
}

/// The writes due within one window of the run.
#[derive(Debug, Clone, Copy, Serialize)]
pub(super) struct WindowReport {
    /// Length of the window, s.
    pub seconds: f64,
    /// Writes acknowledged.
    pub ok: u64,
    /// Writes refused (503).
    pub refused: u64,
    /// Writes whose outcome is unknown (504).
    pub unknown: u64,
    /// Other failures (timeouts, connection errors, other statuses).
    pub failed: u64,
    /// Latency of the acknowledged writes from when each was due, ms.
    pub latency_ms: Option<Summary>,
}

/// One slow write: when it was due and how long it took.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(super) struct SlowWrite {
    /// When it was due, s from the window's start.
    pub due_s: f64,
    /// Its latency from then, ms.
    pub ms: f64,
}

impl WindowReport {
    /// Writes that were not acknowledged.
    pub fn not_ok(&self) -> u64 {
        self.refused + self.unknown + self.failed
    }
}

impl Recorded {
    /// The writes due from `from` (inclusive) to `to` (exclusive).
    pub fn window(&self, from: Instant, to: Instant) -> WindowReport {
        let mut w = WindowReport {
            seconds: to.saturating_duration_since(from).as_secs_f64(),
            ok: 0,
            refused: 0,
            unknown: 0,
            failed: 0,
            latency_ms: None,
        };
        let mut ms = Vec::new();
        for (_, outcome) in self.writes.iter().filter(|(at, _)| (from..to).contains(at)) {
            match *outcome {
                Outcome::Ok(l) => ms.push(l),
                Outcome::Refused => w.refused += 1,
                Outcome::Unknown => w.unknown += 1,
                Outcome::Failed => w.failed += 1,
            }
        }
        w.ok = ms.len() as u64;
        w.latency_ms = summarize(&ms);
        w
    }

    /// The `n` slowest acknowledged writes due in a window, slowest first:
    /// when each was due, s after `from`, and its latency, ms.
    pub fn slowest(&self, from: Instant, to: Instant, n: usize) -> Vec<SlowWrite> {
        let mut slow: Vec<SlowWrite> = self
            .writes
            .iter()
            .filter(|(at, _)| (from..to).contains(at))
            .filter_map(|(at, o)| match o {
                Outcome::Ok(ms) => {
                    Some(SlowWrite { due_s: at.duration_since(from).as_secs_f64(), ms: *ms })
                }
                _ => None,
            })
            .collect();
        slow.sort_by(|a, b| b.ms.total_cmp(&a.ms));
        slow.truncate(n);
        slow
    }

    /// The latencies (ms) of the writes due in a window, acknowledged ones.
    pub fn latencies(&self, from: Instant, to: Instant) -> Vec<f64> {
        self.writes
            .iter()
            .filter(|(at, _)| (from..to).contains(at))
            .filter_map(|(_, o)| match o {
                Outcome::Ok(l) => Some(*l),
                _ => None,
            })
            .collect()
    }
}

/// A running writer; dropping it stops it (the writes in flight are left
/// to end on their own).
pub(super) struct SteadyWriter {
    stop: Arc<AtomicBool>,
    task: Option<JoinHandle<Recorded>>,
}

impl SteadyWriter {
    /// Starts writing to `api` now.
    pub fn start(fetch: Fetch, api: Api, spec: SteadySpec) -> SteadyWriter {
        let stop = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn(write(fetch, api, spec, stop.clone()));
        SteadyWriter { stop, task: Some(task) }
    }

    /// Stops sending, waits (bounded) for the writes in flight, and returns
    /// every write.
    pub async fn stop(mut self) -> anyhow::Result<Recorded> {
        self.stop.store(true, Ordering::Relaxed);
        let Some(task) = self.task.take() else { bail!("the writer was stopped already") };
        timeout(STOP_BOUND, task)
            .await
            .with_context(|| format!("the writes in flight did not end within {STOP_BOUND:?}"))?
            .context("the writer failed")
    }
}

impl Drop for SteadyWriter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// The writer's loop: one write due every `1 / rate` s from now until
/// `stop`, then the writes in flight awaited.
async fn write(fetch: Fetch, api: Api, spec: SteadySpec, stop: Arc<AtomicBool>) -> Recorded {
    let recorded = Arc::new(Mutex::new(Recorded::default()));
    let value: Arc<str> = "v".repeat(spec.value_bytes).into();
    let in_flight = spec.in_flight.clamp(1, Semaphore::MAX_PERMITS);
    let slots = Arc::new(Semaphore::new(in_flight));
    let started = Instant::now();
    for n in 0u64.. {
        let due = started + Duration::from_secs_f64(n as f64 / f64::from(spec.rate.max(1)));
        sleep_until(due).await;
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let Ok(slot) = slots.clone().acquire_owned().await else { break };
        let (fetch, recorded) = (fetch.clone(), recorded.clone());
        let key = format!("steady-{:07}", n % spec.keys.max(1) as u64);
        let (method, url, body) = api.put(&key, &value);
        tokio::spawn(async move {
            let outcome = match fetch.send(method, &url, Some(&body), REQUEST_TIMEOUT).await {
                Ok((s, _)) if s.is_success() => Outcome::Ok(due.elapsed().as_secs_f64() * 1e3),
                Ok((StatusCode::SERVICE_UNAVAILABLE, _)) => Outcome::Refused,
                Ok((StatusCode::GATEWAY_TIMEOUT, _)) => Outcome::Unknown,
                Ok(_) | Err(_) => Outcome::Failed,
            };
            if let Ok(mut r) = recorded.lock() {
                r.writes.push((due, outcome));
            }
            drop(slot);
        });
    }
    // Every slot free again: every write sent has ended.
    let u32_slots = u32::try_from(in_flight).unwrap_or(u32::MAX);
    let _all = slots.acquire_many(u32_slots).await;
    let mut r = recorded.lock().map(|mut r| std::mem::take(&mut *r)).unwrap_or_default();
    r.writes.sort_by_key(|(at, _)| *at);
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_count_the_writes_due_in_them() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let r = Recorded {
            writes: vec![
                (at(0), Outcome::Ok(2.0)),
                (at(10), Outcome::Ok(4.0)),
                (at(20), Outcome::Refused),
                (at(30), Outcome::Ok(100.0)),
                (at(40), Outcome::Unknown),
                (at(50), Outcome::Failed),
            ],
        };
        let before = r.window(at(0), at(20));
        assert_eq!((before.ok, before.not_ok()), (2, 0));
        assert_eq!(before.latency_ms.unwrap().max, 4.0);
        assert!((before.seconds - 0.02).abs() < 1e-9);
        let during = r.window(at(20), at(60));
        assert_eq!((during.ok, during.refused, during.unknown, during.failed), (1, 1, 1, 1));
        assert_eq!(during.latency_ms.unwrap().p99, 100.0);
        assert_eq!(r.latencies(at(0), at(60)), vec![2.0, 4.0, 100.0]);
        let slow = r.slowest(at(10), at(60), 2);
        assert_eq!(
            slow,
            vec![SlowWrite { due_s: 0.02, ms: 100.0 }, SlowWrite { due_s: 0.0, ms: 4.0 }]
        );
        let empty = r.window(at(60), at(70));
        assert_eq!((empty.ok, empty.latency_ms), (0, None));
    }
}
