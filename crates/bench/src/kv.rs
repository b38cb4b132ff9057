//! `tenure bench kv`: write and linearizable-read throughput and latency of a
//! local cluster's key-value store, side by side with etcd.
//!
//! Both systems get the same load from the same client: `--connections`
//! tasks, each with a keep-alive connection to the leader's HTTP API, send
//! one request after another for `--seconds`: first puts of
//! `--value-bytes`-byte values to `--keys` keys, then linearizable gets of
//! those keys. tenure is asked `PUT`/`GET /v1/kv/{key}`; etcd its JSON
//! gateway's `POST /v3/kv/put` and `/v3/kv/range` (linearizable by default),
//! as `wrk` was pointed at it for the etcd figures quoted in docs/BENCHMARKS.md. A warm-up of
//! `WARM_UP` (puts of every key) precedes the measured phases.

use super::failover::wait_stable;
use super::fetch::Fetch;
use super::kv_faults::{catch_up, failover_under_load, CatchUp, FailoverUnderLoad};
use super::kv_load::{run_load, Api, Load, LoadSpec, Tally};
use super::kv_sync;
use super::stats::{summarize, Summary};
use super::system::System;
use anyhow::bail;
use clap::Args;
use serde::Serialize;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tenure_client::ClientOptions;

/// Unmeasured writes before the measured phases.
pub(crate) const WARM_UP: Duration = Duration::from_secs(1);
/// Most connections (each one task of the load generator).
const MAX_CONNECTIONS: usize = 1024;
/// Longest phase.
const MAX_SECONDS: u64 = 3600;
/// etcd 3.4 as measured on this machine with wrk, 64 connections, 10 s,
/// 128-byte values (shared/ANCHORS.md): writes/s and p99 ms, reads/s and p99 ms.
const ANCHOR_ETCD: (f64, f64, f64, f64) = (4029.0, 32.1, 7333.0, 21.6);

/// Flags of `tenure bench kv`.
#[derive(Args, Debug)]
#[command(after_help = "Examples:\n  tenure bench kv --compare etcd\n  \
                  TENURE_FSYNC_DELAY_MS=4 tenure bench kv --compare etcd   # a slow disk for both\n  \
                  tenure bench kv --compare etcd --seconds 5 --sync-delays 0,1,2,4,8 --plot writes-sync.svg")]
pub struct KvArgs {
    #[command(flatten)]
    pub(crate) cluster: super::cluster_args::ClusterArgs,
    /// Concurrent connections to the leader, each sending one request at a time.
    #[arg(long, default_value_t = 64, value_name = "N")]
    pub(crate) connections: usize,
    /// Length of each measured phase (writes, then reads).
    #[arg(long, default_value_t = 10, value_name = "S")]
    pub(crate) seconds: u64,
    /// Bytes per value.
    #[arg(long, default_value_t = 128, value_name = "N")]
    pub(crate) value_bytes: usize,
    /// Distinct keys written and read.
    #[arg(long, default_value_t = 1000, value_name = "N")]
    pub(crate) keys: usize,
    /// Then kill the leader this many times while 16 clients write through
    /// every node, and report the failover times and what the writes saw.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub(crate) failovers: usize,
    /// Then write this many MiB of 60 KiB values, wipe a follower's data
    /// directory, restart it, and time its catch-up (the leader must stay).
    #[arg(long, default_value_t = 0, value_name = "MIB")]
    pub(crate) catch_up_mib: u64,
    /// Instead of the phases above, measure writes at each of these sync
    /// delays: milliseconds added to every sync of each node's log (tenure:
    /// `TENURE_FSYNC_DELAY_MS`; etcd: under `strace`), a fresh cluster of
    /// each system per delay. Example: --sync-delays 0,1,2,4,8
    #[arg(long, value_delimiter = ',', value_name = "MS,...")]
    pub(crate) sync_delays: Vec<u64>,
    /// With --sync-delays: draw writes/s against the sync's latency, one
    /// line per system, as an SVG.
    #[arg(long, value_name = "FILE.svg")]
    pub(crate) plot: Option<PathBuf>,
    /// Print the results as JSON on stdout.
    #[arg(long)]
    json: bool,
}

/// One measured phase.
#[derive(Debug, Serialize)]
pub(crate) struct PhaseReport {
    /// Requests answered 2xx.
    pub(crate) ops: u64,
    /// Requests that failed (non-2xx, timeout, connection error).
    pub(crate) errors: u64,
    /// Successful requests per second.
    pub(crate) per_second: f64,
    /// Latency of the successful requests, ms.
    pub(crate) latency_ms: Option<Summary>,
}

/// One system's results.
#[derive(Debug, Serialize)]
struct SystemReport {
    system: &'static str,
    writes: PhaseReport,
    reads: PhaseReport,
    /// Resident memory of the leader's process after the run, MiB (tenure only).
    leader_rss_mib: Option<f64>,
    /// With --failovers (tenure only).
    failover_under_load: Option<FailoverUnderLoad>,
    /// With --catch-up-mib (tenure only).
    catch_up: Option<CatchUp>,
}

/// The whole run, as printed with --json.
#[derive(Debug, Serialize)]
struct KvReport {
    protocol: tenure_core::ProtocolKind,
    tls: bool,
    nodes: usize,
    connections: usize,
    seconds: u64,
    value_bytes: usize,
    keys: usize,
    heartbeat_ms: u64,
    election_timeout_ms: u64,
    systems: Vec<SystemReport>,
}

/// Runs `tenure bench kv`.
pub async fn run(args: KvArgs) -> anyhow::Result<ExitCode> {
    check(&args)?;
    let with_etcd = match args.cluster.with_etcd() {
        Ok(w) => w,
        Err(code) => return Ok(code),
    };
    if !args.sync_delays.is_empty() {
        let sweep = kv_sync::sweep(&args, with_etcd).await?;
        if let Some(path) = &args.plot {
            kv_sync::write_plot(path, &args, &sweep)?;
        }
        match args.json {
            true => println!("{}", serde_json::to_string_pretty(&sweep)?),
            false => kv_sync::print(&sweep, args.plot.as_deref()),
        }
        return Ok(ExitCode::SUCCESS);
    }
    let timing = args.cluster.timing();
    let nodes: Vec<usize> = (0..args.cluster.nodes).collect();
    let mut systems = Vec::new();
    {
        let tenure = args.cluster.start_tenure()?;
        let (leader, _) = wait_stable(&tenure, &nodes, timing).await?;
        let api = Api::Tenure { base: tenure.endpoint(leader).to_string() };
        let mut report = measure("tenure", &args, tenure.fetch().clone(), api).await?;
        let mut tenure = tenure;
        report.leader_rss_mib = tenure.proc(leader).pid().and_then(rss_mib);
        if args.failovers > 0 {
            let f = failover_under_load(&mut tenure, args.failovers, timing, args.keys).await?;
            report.failover_under_load = Some(f);
        }
        if args.catch_up_mib > 0 {
            report.catch_up = Some(catch_up(&mut tenure, args.catch_up_mib, timing).await?);
        }
        systems.push(report);
    }
    if with_etcd {
        let etcd = args.cluster.start_etcd(false).await?;
        let (leader, _) = wait_stable(&etcd, &nodes, timing).await?;
        let api = Api::Etcd { base: etcd.client_url(leader) };
        let fetch = Fetch::new(ClientOptions::default())?;
        systems.push(measure("etcd", &args, fetch, api).await?);
    }
    let report = KvReport {
        protocol: args.cluster.protocol,
        tls: !args.cluster.insecure_no_tls,
        nodes: args.cluster.nodes,
        connections: args.connections,
        seconds: args.seconds,
        value_bytes: args.value_bytes,
        keys: args.keys,
        heartbeat_ms: args.cluster.heartbeat_ms,
        election_timeout_ms: args.cluster.election_timeout_ms,
        systems,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report);
    }
    Ok(ExitCode::SUCCESS)
}

fn check(args: &KvArgs) -> anyhow::Result<()> {
    args.cluster.check()?;
    if !(1..=MAX_CONNECTIONS).contains(&args.connections) {
        bail!("--connections must be between 1 and {MAX_CONNECTIONS}");
    }
    if !(1..=MAX_SECONDS).contains(&args.seconds) {
        bail!("--seconds must be between 1 and {MAX_SECONDS}");
    }
    if !(1..=tenure_kv::MAX_VALUE_BYTES).contains(&args.value_bytes) {
        bail!("--value-bytes must be between 1 and {}", tenure_kv::MAX_VALUE_BYTES);
    }
    if args.keys == 0 {
        bail!("--keys must be at least 1");
    }
    kv_sync::check(args)
}

/// The warm-up, then the measured writes and reads.
async fn measure(
    system: &'static str,
    args: &KvArgs,
    fetch: Fetch,
    api: Api,
) -> anyhow::Result<SystemReport> {
    let value: Arc<str> = "v".repeat(args.value_bytes).into();
    let warm = phase(args, &fetch, &api, &value, Load::Writes, WARM_UP).await;
    if warm.ops == 0 {
        bail!("{system}: no write succeeded during the warm-up ({} errors)", warm.errors);
    }
    let d = Duration::from_secs(args.seconds);
    let writes = phase(args, &fetch, &api, &value, Load::Writes, d).await;
    let reads = phase(args, &fetch, &api, &value, Load::Reads, d).await;
    Ok(SystemReport {
        system,
        writes,
        reads,
        leader_rss_mib: None,
        failover_under_load: None,
        catch_up: None,
    })
}

/// One phase: `--connections` tasks sending requests back to back to the
/// leader for `d`.
pub(crate) async fn phase(
    args: &KvArgs,
    fetch: &Fetch,
    api: &Api,
    value: &Arc<str>,
    load: Load,
    d: Duration,
) -> PhaseReport {
    let stop = Arc::new(AtomicBool::new(false));
    let timer = {
        let stop = stop.clone();
        tokio::spawn(async move {
            tokio::time::sleep(d).await;
            stop.store(true, Ordering::Relaxed);
        })
    };
    let spec = LoadSpec { connections: args.connections, keys: args.keys, load };
    let tally = run_load(fetch, std::slice::from_ref(api), value, spec, &stop).await;
    let _ = timer.await;
    tally.report()
}

impl Tally {
    fn report(&self) -> PhaseReport {
        PhaseReport {
            ops: self.latencies_ms.len() as u64,
            errors: self.refused + self.unknown + self.errors,
            per_second: self.latencies_ms.len() as f64 / self.seconds,
            latency_ms: summarize(&self.latencies_ms),
        }
    }
}

/// Resident memory of process `pid`, MiB (Linux `/proc`).
pub(crate) fn rss_mib(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb / 1024.0)
}

fn print_report(r: &KvReport) {
    println!(
        "{} nodes, {} connections to the leader, {} s per phase, {}-byte values, {} keys; tenure: {} protocol, TLS {}",
        r.nodes,
        r.connections,
        r.seconds,
        r.value_bytes,
        r.keys,
        r.protocol,
        if r.tls { "on" } else { "off" }
    );
    println!(
        "{:<8} {:>10} {:>9} {:>9} {:>7} {:>10} {:>9} {:>9} {:>7}",
        "system", "writes/s", "p50 ms", "p99 ms", "errors", "reads/s", "p50 ms", "p99 ms", "errors"
    );
    for s in &r.systems {
        let p = |x: &PhaseReport| {
            let (p50, p99) = x.latency_ms.map_or((f64::NAN, f64::NAN), |l| (l.p50, l.p99));
            format!("{:>10.0} {:>9.2} {:>9.2} {:>7}", x.per_second, p50, p99, x.errors)
        };
        println!("{:<8} {} {}", s.system, p(&s.writes), p(&s.reads));
    }
    let tenure = r.systems.iter().find(|s| s.system == "tenure");
    let etcd = r.systems.iter().find(|s| s.system == "etcd");
    if let Some(t) = tenure {
        if let Some(rss) = t.leader_rss_mib {
            println!("tenure leader RSS after the run: {rss:.1} MiB");
        }
        print_faults(t, r);
        let (ew, ew99, er, _) = match etcd {
            Some(e) => (
                e.writes.per_second,
                e.writes.latency_ms.map_or(f64::NAN, |l| l.p99),
                e.reads.per_second,
                0.0,
            ),
            None => {
                println!("(etcd not measured in this run: goals against shared/ANCHORS.md's etcd figures)");
                ANCHOR_ETCD
            }
        };
        let t99 = t.writes.latency_ms.map_or(f64::NAN, |l| l.p99);
        let goal = |what: &str, met: bool, detail: String| {
            println!("goal {what}: {} ({detail})", if met { "met" } else { "NOT met" })
        };
        let wx = t.writes.per_second / ew;
        goal("writes >= 2x etcd", wx >= 2.0, format!("{wx:.2}x"));
        goal("write p99 <= etcd's", t99 <= ew99, format!("{t99:.2} vs {ew99:.2} ms"));
        let rx = t.reads.per_second / er;
        goal("linearizable reads >= 5x etcd", rx >= 5.0, format!("{rx:.2}x"));
    }
}

fn print_faults(t: &SystemReport, r: &KvReport) {
    let goal_ms = r.election_timeout_ms as f64 + 50.0;
    if let Some(f) = &t.failover_under_load {
        let (p50, p99) = f.failover_ms.map_or((f64::NAN, f64::NAN), |s| (s.p50, s.p99));
        println!(
            "crash failover under write load: p50 {p50:.1} ms, p99 {p99:.1} ms; writes ok {}, refused (503) {}, unknown (504) {}, failed {}",
            f.writes_ok, f.writes_refused, f.writes_unknown, f.writes_failed
        );
        let met = p99 <= goal_ms;
        println!(
            "goal crash failover under write load p99 <= T + 50 ms: {} ({p99:.1} vs {goal_ms:.0} ms)",
            if met { "met" } else { "NOT met" }
        );
    }
    if let Some(c) = &t.catch_up {
        println!(
            "wiped node caught up on {:.1} MiB in {:.2} s (snapshot installed: {:.1} MiB); leader {}",
            c.bytes_written as f64 / 1048576.0,
            c.seconds,
            c.snapshot_bytes as f64 / 1048576.0,
            if c.leader_changed { "CHANGED" } else { "unchanged" }
        );
    }
}
