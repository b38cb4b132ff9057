//! The key-value benchmark's fault phases (tenure only): crash failover
//! while clients write, and a node whose data directory is wiped catching up
//! on a large store.

use super::failover::{trial, wait_stable, Stop, Timing};
use super::fetch::metric_value;
use super::kv_load::{fill, run_load, Api, Load, LoadSpec};
use super::stats::{summarize, Summary};
use super::system::{System, Tenure};
use anyhow::{bail, Context};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Connections writing during the failovers, spread over every node.
const FAILOVER_LOAD_CONNECTIONS: usize = 16;
/// How long a wiped node may take to catch up before the run fails.
const CATCH_UP_BOUND: Duration = Duration::from_secs(300);
/// How often the catch-up is polled.
const CATCH_UP_POLL: Duration = Duration::from_millis(50);
/// Timeout of one metrics scrape.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Crash failovers measured while clients write.
#[derive(Debug, Serialize)]
pub struct FailoverUnderLoad {
    /// Leader SIGKILL -> a new leader every survivor agrees on, ms.
    pub failover_ms: Option<Summary>,
    /// Writes acknowledged during the trials.
    pub writes_ok: u64,
    /// Writes refused with nothing done (503: no leader within the bound).
    pub writes_refused: u64,
    /// Writes whose outcome is unknown (504: the leader died mid-way).
    pub writes_unknown: u64,
    /// Other failures (connection refused by the killed node, timeouts).
    pub writes_failed: u64,
}

/// Kills the leader `trials` times while `FAILOVER_LOAD_CONNECTIONS`
/// clients write through every node.
pub async fn failover_under_load(
    tenure: &mut Tenure,
    trials: usize,
    timing: Timing,
    keys: usize,
) -> anyhow::Result<FailoverUnderLoad> {
    let apis: Vec<Api> =
        (0..tenure.len()).map(|i| Api::Tenure { base: tenure.endpoint(i).to_string() }).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let load = {
        let (fetch, stop) = (tenure.fetch().clone(), stop.clone());
        let value: Arc<str> = "v".repeat(128).into();
        let spec = LoadSpec { connections: FAILOVER_LOAD_CONNECTIONS, keys, load: Load::Writes };
        tokio::spawn(async move { run_load(&fetch, &apis, &value, spec, &stop).await })
    };
    let mut ms = Vec::new();
    let mut failure = None;
    for _ in 0..trials {
        match trial(tenure, Stop::Kill, timing).await {
            Ok(t) => ms.push(t.failover_ms),
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let tally = load.await.context("the load generator failed")?;
    if let Some(e) = failure {
        return Err(e);
    }
    ms.sort_by(f64::total_cmp);
    Ok(FailoverUnderLoad {
        failover_ms: summarize(&ms),
        writes_ok: tally.latencies_ms.len() as u64,
        writes_refused: tally.refused,
        writes_unknown: tally.unknown,
        writes_failed: tally.errors,
    })
}

/// A wiped node catching up.
#[derive(Debug, Serialize)]
pub struct CatchUp {
    /// Bytes of values written before the wipe.
    pub bytes_written: u64,
    /// Size of the snapshot the caught-up node installed (0: it caught up
    /// by entries alone).
    pub snapshot_bytes: u64,
    /// From the wiped node's restart to its applied index reaching the
    /// leader's, s.
    pub seconds: f64,
    /// True if the leader or its term changed meanwhile.
    pub leader_changed: bool,
}

/// Fills the store with `mb` MiB, wipes a follower's data directory,
/// restarts it and times its catch-up, watching that the leader stays.
pub async fn catch_up(tenure: &mut Tenure, mb: u64, timing: Timing) -> anyhow::Result<CatchUp> {
    let all: Vec<usize> = (0..tenure.len()).collect();
    let (leader, term) = wait_stable(tenure, &all, timing).await?;
    let api = Api::Tenure { base: tenure.endpoint(leader).to_string() };
    let bytes_written = match fill(tenure.fetch(), &api, mb * 1024 * 1024).await {
        Ok(b) => b,
        Err(e) => {
            return Err(e.context(format!("the servers' last lines:\n{}", tenure.log_tails())))
        }
    };
    let follower = (leader + 1) % tenure.len();
    tenure.proc(follower).signal(nix::sys::signal::Signal::SIGKILL)?;
    tenure.proc(follower).wait_exit(Duration::from_secs(10)).await?;
    let dir = tenure.data_dir(follower).to_path_buf();
    std::fs::remove_dir_all(&dir).with_context(|| format!("cannot remove {}", dir.display()))?;
    let target = applied(tenure, leader).await?;
    let started = Instant::now();
    tenure.start(follower)?;
    loop {
        if applied(tenure, follower).await.is_ok_and(|a| a >= target) {
            break;
        }
        if started.elapsed() > CATCH_UP_BOUND {
            bail!("node {} did not catch up within {CATCH_UP_BOUND:?}", follower + 1);
        }
        tokio::time::sleep(CATCH_UP_POLL).await;
    }
    let seconds = started.elapsed().as_secs_f64();
    let snapshot_bytes = metric(tenure, follower, "tenure_log_snapshot_bytes").await? as u64;
    let (now_leader, now_term) = wait_stable(tenure, &all, timing).await?;
    Ok(CatchUp {
        bytes_written,
        snapshot_bytes,
        seconds,
        leader_changed: (now_leader, now_term) != (leader, term),
    })
}

async fn applied(tenure: &Tenure, i: usize) -> anyhow::Result<u64> {
    Ok(metric(tenure, i, "tenure_log_applied_index").await? as u64)
}

async fn metric(tenure: &Tenure, i: usize, name: &str) -> anyhow::Result<f64> {
    let url = format!("{}/metrics", tenure.endpoint(i));
    let text = tenure.fetch().get_text(&url, REQUEST_TIMEOUT).await?;
    metric_value(&text, name).with_context(|| format!("{url} has no {name}"))
}
