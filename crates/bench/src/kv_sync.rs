//! `tenure bench kv --sync-delays`: writes a second against the disk's
//! sync latency. For each delay, a fresh cluster of each system whose
//! every log sync takes that much longer (tenure's servers through
//! `TENURE_FSYNC_DELAY_MS`, etcd's members under `strace`), the same
//! writers as the key-value benchmark's write phase, and the ratio. The
//! disk's own `fdatasync` latency is measured first, so the chart's x axis
//! is the sync a write pays, not only the delay added to it.

use super::failover::wait_stable;
use super::fetch::Fetch;
use super::kv::{phase, KvArgs, PhaseReport, WARM_UP};
use super::kv_load::{Api, Load};
use super::plot;
use anyhow::{bail, Context};
use serde::Serialize;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tenure_client::ClientOptions;

/// Most delays in one sweep (each costs a fresh cluster of each system).
pub(crate) const MAX_DELAYS: usize = 16;
/// Largest delay, ms (`tenure-node`'s limit on `TENURE_FSYNC_DELAY_MS`).
pub(crate) const MAX_DELAY_MS: u64 = 1000;
/// Syncs timed to measure the disk, each after a 4 KiB append.
const DISK_PROBES: usize = 200;
/// Bytes appended before each probe's sync (a batch of small entries).
const PROBE_BYTES: usize = 4096;

/// One system at one delay.
#[derive(Debug, Serialize)]
pub(crate) struct SyncPoint {
    system: &'static str,
    /// Milliseconds added to each sync.
    delay_ms: u64,
    /// What one sync costs: the disk's median `fdatasync` plus the delay.
    sync_ms: f64,
    writes: PhaseReport,
}

/// The sweep's results.
#[derive(Debug, Serialize)]
pub(crate) struct SyncSweep {
    /// The disk's own `fdatasync` after a 4 KiB append, ms: p50 and p99
    /// of `DISK_PROBES`, in the directory the clusters' data lives in.
    disk_sync_p50_ms: f64,
    disk_sync_p99_ms: f64,
    points: Vec<SyncPoint>,
}

/// Refuses delays the servers would refuse, and flags the sweep does not
/// combine with.
pub(crate) fn check(args: &KvArgs) -> anyhow::Result<()> {
    if args.sync_delays.is_empty() {
        if args.plot.is_some() {
            bail!("--plot draws the --sync-delays sweep: give the delays too (e.g. --sync-delays 0,2,4,8)");
        }
        return Ok(());
    }
    if args.sync_delays.len() > MAX_DELAYS {
        bail!("--sync-delays: at most {MAX_DELAYS} delays");
    }
    if let Some(d) = args.sync_delays.iter().find(|&&d| d > MAX_DELAY_MS) {
        bail!("--sync-delays: {d} ms is more than the servers accept ({MAX_DELAY_MS} ms)");
    }
    if args.failovers > 0 || args.catch_up_mib > 0 {
        bail!("--sync-delays measures writes only: run --failovers and --catch-up-mib without it");
    }
    Ok(())
}

/// Runs the sweep: per delay, tenure then (with `--compare etcd`) etcd.
pub(crate) async fn sweep(args: &KvArgs, with_etcd: bool) -> anyhow::Result<SyncSweep> {
    let (disk_sync_p50_ms, disk_sync_p99_ms) = disk_sync_ms()?;
    let timing = args.cluster.timing();
    let nodes: Vec<usize> = (0..args.cluster.nodes).collect();
    let mut points = Vec::new();
    for &delay_ms in &args.sync_delays {
        let sync_ms = disk_sync_p50_ms + delay_ms as f64;
        {
            let tenure = args.cluster.start_tenure_with_sync_delay(delay_ms)?;
            let (leader, _) = wait_stable(&tenure, &nodes, timing).await?;
            let api = Api::Tenure { base: tenure.endpoint(leader).to_string() };
            let writes = writes("tenure", args, tenure.fetch(), &api).await?;
            points.push(SyncPoint { system: "tenure", delay_ms, sync_ms, writes });
        }
        if with_etcd {
            let etcd = args.cluster.start_etcd_with_sync_delay(delay_ms).await?;
            let (leader, _) = wait_stable(&etcd, &nodes, timing).await?;
            let api = Api::Etcd { base: etcd.client_url(leader) };
            let fetch = Fetch::new(ClientOptions::default())?;
            let writes = writes("etcd", args, &fetch, &api).await?;
            points.push(SyncPoint { system: "etcd", delay_ms, sync_ms, writes });
        }
        eprintln!("sync delay {delay_ms} ms measured");
    }
    Ok(SyncSweep { disk_sync_p50_ms, disk_sync_p99_ms, points })
}

/// The warm-up, then the measured write phase.
async fn writes(
    system: &str,
    args: &KvArgs,
    fetch: &Fetch,
    api: &Api,
) -> anyhow::Result<PhaseReport> {
    let value: Arc<str> = "v".repeat(args.value_bytes).into();
    let warm = phase(args, fetch, api, &value, Load::Writes, WARM_UP).await;
    if warm.ops == 0 {
        bail!("{system}: no write succeeded during the warm-up ({} errors)", warm.errors);
    }
    let d = Duration::from_secs(args.seconds);
    Ok(phase(args, fetch, api, &value, Load::Writes, d).await)
}

/// The p50 and p99 of `DISK_PROBES` `fdatasync`s, each after a 4 KiB
/// append to a file in the temporary directory (where the clusters' data
/// directories are made), ms.
fn disk_sync_ms() -> anyhow::Result<(f64, f64)> {
    let dir = tenure_launch::temp_dir("tenure-bench-disk-")?;
    let path = dir.path().join("probe");
    let mut file =
        std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?;
    let block = vec![0x5a_u8; PROBE_BYTES];
    let mut ms = Vec::with_capacity(DISK_PROBES);
    for _ in 0..DISK_PROBES {
        file.write_all(&block).context("writing the disk probe")?;
        let start = Instant::now();
        file.sync_data().context("syncing the disk probe")?;
        ms.push(start.elapsed().as_secs_f64() * 1e3);
    }
    ms.sort_by(f64::total_cmp);
    let at = |q: f64| ms[((ms.len() - 1) as f64 * q).round() as usize];
    Ok((at(0.5), at(0.99)))
}

/// Prints the sweep: one row per delay, each system's writes and p99, and
/// tenure's ratio to etcd; then the two goals where measured.
pub(crate) fn print(s: &SyncSweep, plot: Option<&Path>) {
    println!(
        "disk: fdatasync after a 4 KiB append p50 {:.2} ms, p99 {:.2} ms",
        s.disk_sync_p50_ms, s.disk_sync_p99_ms
    );
    println!(
        "{:>9} {:>8} {:>12} {:>15} {:>10} {:>15} {:>8}",
        "delay ms", "sync ms", "tenure w/s", "p50 / p99 ms", "etcd w/s", "p50 / p99 ms", "ratio"
    );
    let at = |system: &str, delay: u64| {
        s.points.iter().find(|p| p.system == system && p.delay_ms == delay)
    };
    let cell = |p: Option<&SyncPoint>| match p {
        Some(p) => {
            let (p50, p99) = p.writes.latency_ms.map_or((f64::NAN, f64::NAN), |l| (l.p50, l.p99));
            (format!("{:.0}", p.writes.per_second), format!("{p50:.2} / {p99:.2}"))
        }
        None => ("-".into(), "-".into()),
    };
    for delay in delays(s) {
        let (t, e) = (at("tenure", delay), at("etcd", delay));
        let ratio = match (t, e) {
            (Some(t), Some(e)) => format!("{:.2}x", t.writes.per_second / e.writes.per_second),
            _ => "-".into(),
        };
        let sync = t.or(e).map_or(f64::NAN, |p| p.sync_ms);
        let ((tw, tl), (ew, el)) = (cell(t), cell(e));
        println!("{delay:>9} {sync:>8.2} {tw:>12} {tl:>15} {ew:>10} {el:>15} {ratio:>8}");
    }
    for (delay, want, what) in [(0, 3.0, "fast disk"), (4, 2.5, "4 ms added")] {
        let (Some(t), Some(e)) = (at("tenure", delay), at("etcd", delay)) else { continue };
        let x = t.writes.per_second / e.writes.per_second;
        let p99 = |p: &SyncPoint| p.writes.latency_ms.map_or(f64::NAN, |l| l.p99);
        let met = x >= want && p99(t) <= p99(e);
        println!(
            "goal writes >= {want}x etcd, p99 <= etcd's ({what}): {} ({x:.2}x; p99 {:.2} vs {:.2} ms)",
            if met { "met" } else { "NOT met" },
            p99(t),
            p99(e)
        );
    }
    if let Some(p) = plot {
        println!("plot: {}", p.display());
    }
}

/// The delays measured, in the order given.
fn delays(s: &SyncSweep) -> Vec<u64> {
    let mut d: Vec<u64> = Vec::new();
    for p in &s.points {
        if !d.contains(&p.delay_ms) {
            d.push(p.delay_ms);
        }
    }
    d
}

/// Draws writes a second against the sync latency, one line per system;
/// a delay at which some writes failed is marked with a cross.
pub(crate) fn write_plot(path: &Path, args: &KvArgs, s: &SyncSweep) -> anyhow::Result<()> {
    let mut series = plot::series_by_name(
        s.points.iter().map(|p| (p.system, (p.sync_ms, p.writes.per_second, p.writes.errors > 0))),
    );
    for (_, points) in &mut series {
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    let title = format!(
        "{} nodes, {} writers, {}-byte values: writes/s against the sync's latency",
        args.cluster.nodes, args.connections, args.value_bytes
    );
    let axes = plot::XyAxes {
        x: "one sync of the log (ms): the disk's fdatasync p50 + the delay added",
        y: "acknowledged writes/s",
        log_y: false,
        failed: "some writes failed",
    };
    plot::write_xy(path, &title, axes, &series).context("writing the plot")
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        kv: KvArgs,
    }

    fn checked(args: &[&str]) -> anyhow::Result<()> {
        let cli = Cli::try_parse_from(std::iter::once("kv").chain(args.iter().copied()))?;
        check(&cli.kv)
    }

    #[test]
    fn a_sweep_refuses_what_it_cannot_measure_with_the_reason() {
        checked(&[]).unwrap();
        checked(&["--sync-delays", "0,2,4,8", "--plot", "w.svg"]).unwrap();
        for (args, says) in [
            (&["--plot", "w.svg"][..], "give the delays too"),
            (&["--sync-delays", "0,1001"][..], "1001 ms is more than the servers accept"),
            (&["--sync-delays", "4", "--failovers", "2"][..], "measures writes only"),
            (&["--sync-delays", "4", "--catch-up-mib", "10"][..], "measures writes only"),
        ] {
            let e = checked(args).expect_err("refused").to_string();
            assert!(e.contains(says), "{args:?}: {e}");
        }
        let many: Vec<String> = (0..=MAX_DELAYS as u64).map(|d| d.to_string()).collect();
        let e = checked(&["--sync-delays", &many.join(",")]).expect_err("refused").to_string();
        assert!(e.contains("at most 16 delays"), "{e}");
        let e = checked(&["--sync-delays", "4,fast"]).expect_err("refused").to_string();
        assert!(e.contains("fast"), "{e}");
    }
}
