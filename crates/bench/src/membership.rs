//! `tenure bench membership [--compare etcd]`: one node of a cluster
//! holding `--data-mib` of key-value data replaced by a new one while a
//! steady writer writes to the leader: the time from the add to the new
//! node voting in a committed configuration, the removal of the old one,
//! and the write latency before and during the change; with `--compare
//! etcd`, the same with etcd's learners (`etcdctl member add --learner`,
//! `member promote` retried until etcd takes it, `member remove`).
//!
//! The two systems run back to back on the same machine (tenure first),
//! each alone: its cluster is started, filled, measured and stopped before
//! the other's starts. The steps are in [`super::membership_flow`] (timed
//! alike for both) and [`super::membership_systems`].

use super::cluster_args::ClusterArgs;
use super::etcd::Etcd;
use super::failover::wait_stable;
use super::kv_load::{fill, Api, FILL_VALUE_BYTES};
use super::membership_flow::{replace_one, Latencies, Replacement, Timeline, POLL, WARMUP};
use super::membership_systems::{EtcdReplacement, TenureReplacement};
use super::steady_load::{SteadySpec, WindowReport, MAX_RATE};
use super::system::{keep_logs, System, Tenure};
use super::{plot, Goal, EXIT_INTERRUPTED};
use anyhow::{bail, Context};
use clap::Args;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Most MiB of data.
const MAX_DATA_MIB: u64 = 10_240;
/// Most writes in flight.
const MAX_IN_FLIGHT: usize = 1024;
/// Longest baseline window, s.
const MAX_BASELINE_SECONDS: u64 = 3600;
/// Longest fill of the store.
const FILL_BOUND: Duration = Duration::from_secs(900);
/// tenure promotes a caught-up learner once it has answered the leader for
/// this many election timeouts (`AUTO_PROMOTE_TIMEOUTS` of tenure-node's log
/// task, docs/MEMBERSHIP.md): stated in the report, not used to measure.
const TENURE_AUTO_PROMOTE_TIMEOUTS: u64 = 1;
/// etcd refuses changes of members (its strict reconfiguration check, on
/// by default) until every voter has been connected for 5 s
/// (`HealthInterval`): the add waits until this long after the members
/// first answered, so that a short run does not count etcd's start-up in
/// its add.
const ETCD_HEALTHY_AFTER: Duration = Duration::from_secs(6);
/// Slowest writes of the change printed per system (--json has more).
const SLOWEST_PRINTED: usize = 5;
/// The goal: tenure's time to voter at most this share of etcd's.
const GOAL_VOTER_RATIO: f64 = 0.5;
/// The goal: tenure's write p99 during the change at most this many times
/// the p99 before it.
const GOAL_P99_RATIO: f64 = 2.0;

/// Flags of `tenure bench membership`.
#[derive(Args, Debug)]
#[command(after_help = "\
Steps, each system in turn (tenure first, then etcd with --compare etcd), each cluster alone:
start a cluster, fill it with --data-mib of 60 KiB values, start the steady writer (2 s of
warm-up, then the --baseline-seconds window), add the new node as a learner and start it
(tenure: POST /v1/members, promoted by the leader once caught up and live for an election timeout;
etcd: `etcdctl member add --learner`, then `etcdctl member promote` run again until etcd takes
it), and once it votes remove the follower it replaces. The time to voter runs from the add's
request; the writes' latency runs from when each was due (open loop).

Example, the figures of docs/BENCHMARKS.md (about a minute on 2 cores, 100 MiB per cluster in
temporary directories):
  tenure bench membership --compare etcd --plot membership.svg
A quick look, tenure alone:
  tenure bench membership --data-mib 8 --baseline-seconds 3")]
pub struct MembershipArgs {
    #[command(flatten)]
    cluster: ClusterArgs,
    /// MiB of key-value data written before the change (values of 60 KiB).
    #[arg(long, default_value_t = 100, value_name = "MIB")]
    data_mib: u64,
    /// Writes per second of the steady writer, sent to the leader whatever
    /// the answers do (open loop).
    #[arg(long, default_value_t = 200, value_name = "N")]
    rate: u32,
    /// Most writes in flight at once; a write due while all are busy waits,
    /// and its wait counts in its latency.
    #[arg(long, default_value_t = 64, value_name = "N")]
    in_flight: usize,
    /// Bytes per value of the steady writer.
    #[arg(long, default_value_t = 128, value_name = "N")]
    value_bytes: usize,
    /// Distinct keys of the steady writer.
    #[arg(long, default_value_t = 1000, value_name = "N")]
    keys: usize,
    /// Length of the window measured before the change, s.
    #[arg(long, default_value_t = 10, value_name = "S")]
    baseline_seconds: u64,
    /// Write the CDF of the write latencies before and during the change
    /// (each system) to this SVG file.
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
    /// Copy every server's log into this directory before cleaning up.
    #[arg(long, value_name = "DIR")]
    keep_logs: Option<PathBuf>,
    /// Print the results as JSON on stdout.
    #[arg(long)]
    json: bool,
}

/// One system's results.
#[derive(Debug, Serialize)]
struct SideReport {
    system: &'static str,
    /// Bytes of values in the store before the change.
    data_bytes: u64,
    /// How long the fill took, s.
    fill_seconds: f64,
    #[serde(flatten)]
    timeline: Timeline,
    /// Write p99 during the change over write p99 before it.
    p99_ratio: Option<f64>,
}

/// The whole run, as printed with --json.
#[derive(Debug, Serialize)]
struct MembershipReport {
    protocol: tenure_core::ProtocolKind,
    tls: bool,
    nodes: usize,
    heartbeat_ms: u64,
    election_timeout_ms: u64,
    /// How long tenure's leader waits, once a learner has caught up, before
    /// it promotes it.
    tenure_auto_promote_ms: u64,
    data_mib: u64,
    fill_value_bytes: usize,
    write_rate: u32,
    write_in_flight: usize,
    write_value_bytes: usize,
    write_keys: usize,
    baseline_seconds: u64,
    /// Pause between two looks at the new node, ms.
    poll_ms: u64,
    /// What was measured, in words.
    method: String,
    systems: Vec<SideReport>,
    /// tenure's time to voter over etcd's.
    voter_ratio: Option<f64>,
    goals: Vec<Goal>,
}

/// Runs `tenure bench membership`.
pub async fn run(args: MembershipArgs) -> anyhow::Result<ExitCode> {
    check(&args)?;
    let with_etcd = match args.cluster.with_etcd() {
        Ok(w) => w,
        Err(code) => return Ok(code),
    };
    if with_etcd && !super::elect::etcdctl_available() {
        bail!("--compare etcd needs `etcdctl` on the PATH: apt-get install etcd-client");
    }
    let measured = async {
        let mut sides = vec![tenure_side(&args).await?];
        if with_etcd {
            sides.push(etcd_side(&args).await?);
        }
        anyhow::Ok(sides)
    };
    // Dropping the sides' future on Ctrl-C stops every process they started.
    let sides = tokio::select! {
        r = measured => r?,
        _ = tokio::signal::ctrl_c() => {
            eprintln!("interrupted; the clusters are stopped");
            return Ok(ExitCode::from(EXIT_INTERRUPTED));
        }
    };
    let (reports, latencies): (Vec<SideReport>, Vec<Latencies>) = sides.into_iter().unzip();
    let report = report(&args, reports);
    if let Some(path) = &args.plot {
        write_plot(path, &args, &report, &latencies)?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_text(&report, args.plot.as_deref());
    }
    Ok(ExitCode::SUCCESS)
}

fn check(args: &MembershipArgs) -> anyhow::Result<()> {
    args.cluster.check()?;
    // The new node is a voter beside the old ones until the removal.
    if args.cluster.nodes >= tenure_core::MAX_VOTERS {
        bail!("--nodes must be below {}: the new node votes too", tenure_core::MAX_VOTERS);
    }
    if !(1..=MAX_DATA_MIB).contains(&args.data_mib) {
        bail!("--data-mib must be between 1 and {MAX_DATA_MIB}");
    }
    if !(1..=MAX_RATE).contains(&args.rate) {
        bail!("--rate must be between 1 and {MAX_RATE}");
    }
    if !(1..=MAX_IN_FLIGHT).contains(&args.in_flight) {
        bail!("--in-flight must be between 1 and {MAX_IN_FLIGHT}");
    }
    if !(1..=tenure_kv::MAX_VALUE_BYTES).contains(&args.value_bytes) {
        bail!("--value-bytes must be between 1 and {}", tenure_kv::MAX_VALUE_BYTES);
    }
    if args.keys == 0 {
        bail!("--keys must be at least 1");
    }
    if !(1..=MAX_BASELINE_SECONDS).contains(&args.baseline_seconds) {
        bail!("--baseline-seconds must be between 1 and {MAX_BASELINE_SECONDS}");
    }
    Ok(())
}

fn load(args: &MembershipArgs) -> SteadySpec {
    SteadySpec {
        rate: args.rate,
        in_flight: args.in_flight,
        value_bytes: args.value_bytes,
        keys: args.keys,
    }
}

/// tenure: a cluster with a spare node, filled, then the replacement.
async fn tenure_side(args: &MembershipArgs) -> anyhow::Result<(SideReport, Latencies)> {
    let c = &args.cluster;
    let tls = !c.insecure_no_tls;
    let tenure =
        Tenure::start_with_spare(c.nodes, c.heartbeat_ms, c.election_timeout_ms, c.protocol, tls)?;
    let nodes: Vec<usize> = (0..c.nodes).collect();
    let (leader, _) = wait_stable(&tenure, &nodes, c.timing()).await?;
    let api = Api::Tenure { base: tenure.endpoint(leader).to_string() };
    let (bytes, seconds) = fill_store(&tenure, tenure.fetch(), &api, args.data_mib).await?;
    let (leader, _) = wait_stable(&tenure, &nodes, c.timing()).await?;
    let mut r = TenureReplacement::new(tenure, c.nodes, leader)?;
    let outcome = replace_one(&mut r, load(args), baseline(args)).await;
    keep(args, r.system())?;
    side(&r, outcome, bytes, seconds)
}

/// etcd: a cluster, filled, then the replacement.
async fn etcd_side(args: &MembershipArgs) -> anyhow::Result<(SideReport, Latencies)> {
    let c = &args.cluster;
    let etcd = c.start_etcd(false).await?;
    let healthy = tokio::time::Instant::now() + ETCD_HEALTHY_AFTER;
    let nodes: Vec<usize> = (0..c.nodes).collect();
    let (leader, _) = wait_stable(&etcd, &nodes, c.timing()).await?;
    let api = Api::Etcd { base: etcd.client_url(leader) };
    let fetch = super::fetch::Fetch::new(tenure_client::ClientOptions::default())?;
    let (bytes, seconds) = fill_store(&etcd, &fetch, &api, args.data_mib).await?;
    let (leader, _) = wait_stable(&etcd, &nodes, c.timing()).await?;
    let mut r = EtcdReplacement::new(etcd, c.nodes, leader)?;
    // The baseline window runs first: the add comes after it.
    if let Some(writer_start) = healthy.checked_sub(baseline(args) + WARMUP) {
        tokio::time::sleep_until(writer_start).await;
    }
    let outcome = replace_one(&mut r, load(args), baseline(args)).await;
    keep::<Etcd>(args, r.system())?;
    side(&r, outcome, bytes, seconds)
}

fn baseline(args: &MembershipArgs) -> Duration {
    Duration::from_secs(args.baseline_seconds)
}

/// Writes `mib` MiB of values to `sys` through `api`, bounded by
/// [`FILL_BOUND`], then flushes the page cache (`sync`): the bytes
/// written and the seconds the writes took.
async fn fill_store<S: System>(
    sys: &S,
    fetch: &super::fetch::Fetch,
    api: &Api,
    mib: u64,
) -> anyhow::Result<(u64, f64)> {
    let started = Instant::now();
    let filled = tokio::time::timeout(FILL_BOUND, fill(fetch, api, mib * 1024 * 1024)).await;
    let logs = || format!("the servers' last lines:\n{}", sys.log_tails());
    match filled {
        Ok(Ok(bytes)) => {
            let seconds = started.elapsed().as_secs_f64();
            // The fill leaves every server's writes in the page cache; their
            // writeback would slow the fsyncs of the baseline window.
            tokio::task::spawn_blocking(nix::unistd::sync).await.context("sync(2)")?;
            Ok((bytes, seconds))
        }
        Ok(Err(e)) => Err(e.context(format!("{}: filling the store; {}", sys.name(), logs()))),
        Err(_) => bail!("{}: the fill took over {FILL_BOUND:?}; {}", sys.name(), logs()),
    }
}

/// Copies the logs of `sys` when --keep-logs asks.
fn keep<S: System>(args: &MembershipArgs, sys: &S) -> anyhow::Result<()> {
    match &args.keep_logs {
        Some(dir) => keep_logs(sys, dir),
        None => Ok(()),
    }
}

/// One system's report from its replacement's outcome (a failure carries
/// the servers' last log lines).
fn side<R: Replacement>(
    r: &R,
    outcome: anyhow::Result<(Timeline, Latencies)>,
    data_bytes: u64,
    fill_seconds: f64,
) -> anyhow::Result<(SideReport, Latencies)> {
    let (timeline, latencies) = outcome.map_err(|e| {
        e.context(format!(
            "{}: the replacement failed; the servers' last lines:\n{}",
            r.name(),
            r.log_tails()
        ))
    })?;
    let p99 = |w: &WindowReport| w.latency_ms.map(|l| l.p99);
    let p99_ratio = match (p99(&timeline.during), p99(&timeline.before)) {
        (Some(d), Some(b)) if b > 0.0 => Some(d / b),
        _ => None,
    };
    let report = SideReport { system: r.name(), data_bytes, fill_seconds, timeline, p99_ratio };
    Ok((report, latencies))
}

fn report(args: &MembershipArgs, systems: Vec<SideReport>) -> MembershipReport {
    let find = |name: &str| systems.iter().find(|s| s.system == name);
    let voter_ratio = match (find("tenure"), find("etcd")) {
        (Some(t), Some(e)) if e.timeline.voter_s > 0.0 => {
            Some(t.timeline.voter_s / e.timeline.voter_s)
        }
        _ => None,
    };
    let goals = find("tenure").map(|t| goals(t, voter_ratio, find("etcd"))).unwrap_or_default();
    let c = &args.cluster;
    MembershipReport {
        protocol: c.protocol,
        tls: !c.insecure_no_tls,
        nodes: c.nodes,
        heartbeat_ms: c.heartbeat_ms,
        election_timeout_ms: c.election_timeout_ms,
        tenure_auto_promote_ms: c.election_timeout_ms * TENURE_AUTO_PROMOTE_TIMEOUTS,
        data_mib: args.data_mib,
        fill_value_bytes: FILL_VALUE_BYTES,
        write_rate: args.rate,
        write_in_flight: args.in_flight,
        write_value_bytes: args.value_bytes,
        write_keys: args.keys,
        baseline_seconds: args.baseline_seconds,
        poll_ms: POLL.as_millis() as u64,
        method: METHOD.to_string(),
        systems,
        voter_ratio,
        goals,
    }
}

/// What is measured, in words (the report's `method`).
const METHOD: &str = "tenure then etcd, back to back on this machine, each cluster alone; \
    the clock starts at the add: tenure POST /v1/members (a learner promoted by the leader) \
    before the new node starts with --join, etcd `etcdctl member add --learner` before the new \
    member starts with --initial-cluster-state existing; time to voter: until tenure's leader \
    answers GET /v1/members with the new node a voter in a committed configuration, or until \
    `etcdctl member promote` succeeds (run again while etcd answers that the learner is not in \
    sync: its catch-up); then the old node (a follower) is removed (DELETE /v1/members/{id}, \
    `etcdctl member remove`), answered once committed. Writes: to the leader at a fixed rate, \
    latency from when each was due; before = the baseline window, during = from the add to the \
    removal's answer";

fn goals(t: &SideReport, voter_ratio: Option<f64>, etcd: Option<&SideReport>) -> Vec<Goal> {
    let mut out = Vec::new();
    if let (Some(ratio), Some(e)) = (voter_ratio, etcd) {
        out.push(Goal {
            what: "tenure time from the add to the new voter".into(),
            target: format!("<= {GOAL_VOTER_RATIO}x etcd's"),
            measured: format!(
                "{ratio:.2}x ({:.2} s vs {:.2} s)",
                t.timeline.voter_s, e.timeline.voter_s
            ),
            met: ratio <= GOAL_VOTER_RATIO,
        });
    }
    let p99 = |w: &WindowReport| w.latency_ms.map_or(f64::NAN, |l| l.p99);
    if let Some(ratio) = t.p99_ratio {
        out.push(Goal {
            what: "tenure write p99 during the change".into(),
            target: format!("<= {GOAL_P99_RATIO}x the p99 before"),
            measured: format!(
                "{ratio:.2}x ({:.2} ms vs {:.2} ms)",
                p99(&t.timeline.during),
                p99(&t.timeline.before)
            ),
            met: ratio <= GOAL_P99_RATIO,
        });
    }
    out
}

/// The CDF of each system's write latencies before and during the change.
fn write_plot(
    path: &Path,
    args: &MembershipArgs,
    report: &MembershipReport,
    latencies: &[Latencies],
) -> anyhow::Result<()> {
    let title = format!(
        "writes ({}/s) while one node of {} holding {} MiB is replaced",
        args.rate, args.cluster.nodes, args.data_mib
    );
    let series: Vec<(String, Vec<f64>)> = report
        .systems
        .iter()
        .zip(latencies)
        .flat_map(|(s, l)| {
            [
                (format!("{} before", s.system), l.before.clone()),
                (format!("{} during", s.system), l.during.clone()),
            ]
        })
        .collect();
    let axes = plot::Axes {
        x: "write latency from when it was due (ms)",
        y: "fraction of writes",
        samples: "writes",
        log_x: true,
    };
    plot::write_cdf(path, &title, axes, &series).context("writing the plot")
}

fn print_text(r: &MembershipReport, plot: Option<&Path>) {
    println!(
        "replace one follower of a {}-node cluster holding {} MiB ({} KiB values); writes: {}/s of \
         {}-byte values to the leader (at most {} in flight), latency from when each was due; \
         baseline {} s; heartbeat {} ms, election timeout {} ms (tenure promotes a learner \
         caught up at two heartbeats in a row that answered for {} ms); tenure {}, TLS {}",
        r.nodes,
        r.data_mib,
        r.fill_value_bytes / 1024,
        r.write_rate,
        r.write_value_bytes,
        r.write_in_flight,
        r.baseline_seconds,
        r.heartbeat_ms,
        r.election_timeout_ms,
        r.tenure_auto_promote_ms,
        r.protocol,
        if r.tls { "on" } else { "off" }
    );
    println!("method: {}", r.method);
    print_timelines(r);
    print_windows(r);
    for s in &r.systems {
        let snapshot = match s.timeline.finish.snapshot_bytes {
            None => String::new(),
            Some(0) => "; the new node caught up from the log (no snapshot)".to_string(),
            Some(b) => format!("; the new node's snapshot {:.1} MiB", b as f64 / 1048576.0),
        };
        println!(
            "{}: replaced {}; filled in {:.1} s; at the end {}{snapshot}",
            s.system, s.timeline.replaced, s.fill_seconds, s.timeline.finish.members
        );
    }
    if let Some(x) = r.voter_ratio {
        println!("time to voter, tenure / etcd: {x:.2}x");
    }
    for g in &r.goals {
        let met = if g.met { "MET" } else { "NOT met" };
        println!("goal: {} {} — measured {} — {met}", g.what, g.target, g.measured);
    }
    if let Some(p) = plot {
        println!("CDF written to {}", p.display());
    }
}

fn print_timelines(r: &MembershipReport) {
    println!(
        "{:<7} {:>8} {:>12} {:>8} {:>6} {:>9} {:>8}",
        "SYSTEM", "ADDED S", "CAUGHT UP S", "VOTER S", "LOOKS", "REMOVE S", "TOTAL S"
    );
    for s in &r.systems {
        let t = &s.timeline;
        let caught_up = t.caught_up_s.map_or("-".to_string(), |c| format!("{c:.3}"));
        println!(
            "{:<7} {:>8.3} {:>12} {:>8.3} {:>6} {:>9.3} {:>8.3}",
            s.system, t.added_s, caught_up, t.voter_s, t.looks, t.remove_s, t.removed_s
        );
    }
}

fn print_windows(r: &MembershipReport) {
    println!(
        "{:<7} {:<7} {:>7} {:>8} {:>8} {:>8} {:>9} {:>9}",
        "SYSTEM", "WINDOW", "SECONDS", "WRITES", "NOT OK", "P50 MS", "P99 MS", "MAX MS"
    );
    for s in &r.systems {
        for (name, w) in [("before", &s.timeline.before), ("during", &s.timeline.during)] {
            let (p50, p99, max) =
                w.latency_ms.map_or((f64::NAN, f64::NAN, f64::NAN), |l| (l.p50, l.p99, l.max));
            println!(
                "{:<7} {:<7} {:>7.1} {:>8} {:>8} {:>8.2} {:>9.2} {:>9.2}",
                s.system,
                name,
                w.seconds,
                w.ok,
                w.not_ok(),
                p50,
                p99,
                max
            );
        }
        if let Some(x) = s.p99_ratio {
            println!("{:<7} write p99 during / before: {x:.2}x", s.system);
        }
        let t = &s.timeline;
        for (window, slow) in [("before", &t.slowest_before), ("during", &t.slowest_during)] {
            let slowest: Vec<String> = slow
                .iter()
                .take(SLOWEST_PRINTED)
                .map(|w| format!("{:.1} ms at +{:.2} s", w.ms, w.due_s))
                .collect();
            if !slowest.is_empty() {
                println!(
                    "{:<7} slowest writes {window} (due after the window opened): {}",
                    s.system,
                    slowest.join(", ")
                );
            }
        }
    }
}
