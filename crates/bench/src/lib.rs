//! `tenure bench`: the benchmarks of real `tenure server` processes, side by
//! side with etcd and ZooKeeper when asked. The `tenure` binary parses
//! [`BenchArgs`] and calls [`run`]; the figures live in docs/BENCHMARKS.md.
//!
//! - `failover`: one trial (stable leader, kill, detect, rejoin), the same
//!   for every system;
//! - `system`, `etcd` and `zookeeper`: the systems under test behind
//!   one interface (tenure's cluster is a `tenure_launch::LocalCluster`);
//! - `stats`: percentiles, CDFs, split-vote arithmetic;
//! - `plot`: the CDF chart; `soak`: the soak and its CPU burner;
//! - `fetch`: raw HTTP for `/metrics` and etcd's JSON gateway;
//! - `elect`: application-election handover with the stock CLIs;
//! - `kv`: the key-value benchmark, with its load generator
//!   (`kv_load`), its fault phases (`kv_faults`: failovers under
//!   load, a wiped node's catch-up) and its sweep of sync latencies
//!   (`kv_sync`);
//! - `membership`: one node of a cluster full of data replaced through
//!   the log under a steady writer (`steady_load`), the same steps timed
//!   alike (`membership_flow`) in tenure and etcd (`membership_systems`);
//! - `grpc`: etcd's v3 gRPC API under load, tenure's and etcd's;
//! - `partitions`: a group of partitions with real member processes
//!   (`partitions_member`, `partitions_fleet`): kill -9, death notices,
//!   SIGTERM and joins timed; one etcd election per partition beside it
//!   (`partitions_etcd`);
//! - `sessions`: many sessions granted, held and abandoned through etcd's
//!   gRPC API, tenure's and etcd's.
//!
//! Errors are `anyhow`'s: this crate is the body of a command, and each
//! error ends as a message to the person who ran it.

mod cluster_args;
mod elect;
mod elect_observe;
mod etcd;
mod failover;
mod fetch;
pub mod grpc;
pub mod kv;
mod kv_faults;
mod kv_load;
mod kv_sync;
pub mod membership;
mod membership_flow;
mod membership_systems;
pub mod partitions;
mod partitions_etcd;
mod partitions_fleet;
mod partitions_member;
mod plot;
pub mod sessions;
pub mod soak;
mod stats;
mod steady_load;
mod system;
mod zookeeper;

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use cluster_args::ClusterArgs;
use failover::{trial, Stop, Trial, DETECT_POLL};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use stats::{one_round_fraction, split_votes, summarize, Summary};
use std::path::PathBuf;
use std::process::ExitCode;
use system::{keep_logs, System, Tenure};

/// Most trials in one run (each takes a few election timeouts).
const MAX_TRIALS: usize = 10_000;
/// Exit code after Ctrl-C (128 + SIGINT), as shells report it.
const EXIT_INTERRUPTED: u8 = 130;
/// The failover goal above the election timeout: this many ms, or a tenth
/// of the timeout when that is less (1000 ms -> 1020 ms, 100 ms -> 110 ms).
const GOAL_SLACK_MS: f64 = 20.0;
/// The graceful-handover goal (p99), ms.
const GOAL_GRACEFUL_MS: f64 = 10.0;
/// The share of failovers that must take one election round.
const GOAL_ONE_ROUND: f64 = 0.99;
/// The death-notice goal: a killed leader whose death a spy reports is replaced
/// within this p99 (ms), at T = 1000 ms on loopback.
const GOAL_SPY_MS: f64 = 50.0;

/// Flags of `tenure bench`.
#[derive(Args, Debug)]
#[command(after_help = "\
Examples:
  tenure bench failover --compare etcd --trials 50
  tenure bench soak --minutes 5
  tenure bench kv --compare etcd")]
pub struct BenchArgs {
    #[command(subcommand)]
    command: BenchCommand,
}

#[derive(Subcommand, Debug)]
enum BenchCommand {
    /// Kill the leader of a local cluster repeatedly and measure each failover.
    Failover(FailoverArgs),
    /// Run a healthy cluster under CPU load and count leader changes.
    Soak(soak::SoakArgs),
    /// Key-value throughput and latency: writes, then linearizable reads, at the leader.
    Kv(kv::KvArgs),
    /// Application-election handover: two `tenure elect` candidates, the elected
    /// one stopped (SIGTERM, then SIGKILL trials), timed until the other prints
    /// its election; with --compare etcd, the same with `etcdctl elect`.
    Elect(elect::ElectArgs),
    /// Replace one node of a cluster holding --data-mib of data through the log
    /// (add a learner, wait until it votes, remove the old node) under a steady
    /// writer: the time to the new voter and the write latency before and
    /// during; with --compare etcd, the same with etcd's learners.
    Membership(membership::MembershipArgs),
    /// etcd's v3 gRPC API under load, tenure's etcd listener (and etcd with
    /// --compare etcd) through one client: put, range (linearizable and
    /// serializable), txn-put, lease-keepalive.
    Grpc(grpc::GrpcArgs),
    /// Many sessions through etcd's gRPC API: granted, held (renewed every
    /// TTL/3 by default, over streams to every node, false expiries counted) and
    /// abandoned at once while a writer runs (expiries per second, write
    /// p99); with --compare etcd, the same with etcd.
    Sessions(sessions::SessionsArgs),
    /// A group of partitions with real member processes: each partition's time
    /// without an owner after a member's kill -9 (with and without a death notice), its
    /// SIGTERM and a join, fencing checked; with --compare etcd, one etcd election per
    /// partition.
    Partitions(partitions::PartitionsArgs),
}

/// Flags of `tenure bench failover`.
#[derive(Args, Debug)]
#[command(after_help = "\
Examples:
  tenure bench failover --compare etcd --plot failover.svg
  tenure bench failover --spy --trials 100
  tenure bench failover --graceful --protocol ranked --json")]
pub struct FailoverArgs {
    #[command(flatten)]
    cluster: ClusterArgs,
    /// Failovers to measure (per system).
    #[arg(long, default_value_t = 20, value_name = "N")]
    trials: usize,
    /// Stop the leader with SIGTERM (a graceful handover) instead of SIGKILL.
    #[arg(long, conflicts_with_all = ["spy", "restart"])]
    graceful: bool,
    /// SIGKILL the leader, then act as its supervisor: wait for the process to exit and send
    /// every survivor a death notice with its incarnation (POST /v1/peers/{id}/dead;
    /// docs/SPIES.md). etcd, beside it, is just killed.
    #[arg(long, conflicts_with = "restart")]
    spy: bool,
    /// SIGKILL the leader and start it again at once, with no notice: its next incarnation's
    /// handshake tells the survivors that the old one died (a restart by systemd or
    /// `tenure server --supervised`; docs/SPIES.md). etcd, beside it, is just killed.
    #[arg(long)]
    restart: bool,
    /// Start etcd with --pre-vote (off by default, as in etcd 3.4).
    #[arg(long)]
    etcd_pre_vote: bool,
    /// Write the latency CDF of each system to this SVG file.
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
    /// Copy every server's log into this directory before cleaning up
    /// (role changes with reason and term, to explain outliers).
    #[arg(long, value_name = "DIR")]
    keep_logs: Option<PathBuf>,
    /// Print the results as JSON on stdout.
    #[arg(long)]
    json: bool,
}

/// Runs `tenure bench`. A SIGINT or SIGTERM stops it: the benchmark is
/// dropped, and with it every cluster it started (their servers lead
/// process groups of their own, so a Ctrl-C in the terminal reaches only
/// this process; without this, they would outlive it).
pub async fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
    let bench = async move {
        match args.command {
            BenchCommand::Failover(a) => run_failover(a).await,
            BenchCommand::Soak(a) => soak::run(a).await,
            BenchCommand::Kv(a) => kv::run(a).await,
            BenchCommand::Elect(a) => elect::run(a).await,
            BenchCommand::Membership(a) => membership::run(a).await,
            BenchCommand::Grpc(a) => grpc::run(a).await,
            BenchCommand::Partitions(a) => partitions::run(a).await,
            BenchCommand::Sessions(a) => sessions::run(a).await,
        }
    };
    let (signal, code) = tokio::select! {
        result = bench => return result,
        _ = term.recv() => ("SIGTERM", 143),
        _ = int.recv() => ("SIGINT", 130),
    };
    eprintln!("{signal}: the benchmark stopped, and the clusters it started with it");
    Ok(ExitCode::from(code))
}

/// One system's results.
#[derive(Debug, Serialize)]
struct SystemReport {
    system: &'static str,
    failover_ms: Option<Summary>,
    /// Failovers decided in one election round (term + 1), 0..=1.
    one_round_fraction: Option<f64>,
    /// Rounds that produced no leader, over all failovers.
    split_votes: u64,
    /// Mean elections started per failover (tenure's counter; null for etcd).
    elections_per_failover: Option<f64>,
    /// Mean pre-vote rounds started per failover (tenure's counter; null for etcd).
    pre_votes_per_failover: Option<f64>,
    /// Rejoins during which the term changed.
    rejoins_disturbed: usize,
    /// Mean period of each survivor's poll loop, ms.
    poll_period_ms: f64,
    /// Mean round trip of one poll, ms.
    poll_rtt_ms: f64,
    trials: Vec<Trial>,
}

impl SystemReport {
    /// `rounds_by_elections`: count election rounds by the survivors' election
    /// counters instead of by term steps — for Paxos, whose terms are ballots
    /// (`counter * 16 + rank`) and jump by more than one per round.
    fn new(system: &'static str, trials: Vec<Trial>, rounds_by_elections: bool) -> Self {
        let ms: Vec<f64> = trials.iter().map(|t| t.failover_ms).collect();
        let rounds = |t: &Trial| match (rounds_by_elections, t.elections) {
            (true, Some(e)) => e,
            _ => t.term_after.saturating_sub(t.term_before),
        };
        let deltas: Vec<u64> = trials.iter().map(rounds).collect();
        let elections: Option<Vec<u64>> = trials.iter().map(|t| t.elections).collect();
        let pre_votes: Option<Vec<u64>> = trials.iter().map(|t| t.pre_votes).collect();
        let mean = |v: Option<Vec<u64>>| {
            v.filter(|v| !v.is_empty()).map(|v| v.iter().sum::<u64>() as f64 / v.len() as f64)
        };
        let n = trials.len().max(1) as f64;
        SystemReport {
            system,
            failover_ms: summarize(&ms),
            one_round_fraction: one_round_fraction(&deltas),
            split_votes: deltas.iter().map(|&d| split_votes(0, d)).sum(),
            elections_per_failover: mean(elections),
            pre_votes_per_failover: mean(pre_votes),
            rejoins_disturbed: trials.iter().filter(|t| t.rejoin_disturbed).count(),
            poll_period_ms: trials.iter().map(|t| t.poll_period_ms).sum::<f64>() / n,
            poll_rtt_ms: trials.iter().map(|t| t.poll_rtt_ms).sum::<f64>() / n,
            trials,
        }
    }
}

/// The whole run, as printed with --json.
#[derive(Debug, Serialize)]
struct FailoverReport {
    stop: Stop,
    /// The election protocol of the tenure servers.
    protocol: tenure_core::ProtocolKind,
    /// Whether the tenure servers ran with mutual TLS and HTTPS.
    tls: bool,
    nodes: usize,
    heartbeat_ms: u64,
    election_timeout_ms: u64,
    detector: String,
    systems: Vec<SystemReport>,
    goals: Vec<Goal>,
}

/// A stated goal and whether this run met it.
#[derive(Debug, Serialize)]
struct Goal {
    what: String,
    target: String,
    measured: String,
    met: bool,
}

fn goals(stop: Stop, timing_ms: (u64, u64), r: &SystemReport) -> Vec<Goal> {
    let Some(s) = r.failover_ms else { return Vec::new() };
    let mut out = Vec::new();
    match stop {
        Stop::Kill => {
            let t = timing_ms.1 as f64;
            let limit = t + GOAL_SLACK_MS.min(t / 10.0);
            out.push(Goal {
                what: format!("{} crash failover p99", r.system),
                target: format!("<= {limit:.0} ms"),
                measured: format!("{:.1} ms", s.p99),
                met: s.p99 <= limit,
            });
            if let Some(f) = r.one_round_fraction {
                out.push(Goal {
                    what: format!("{} failovers in one election round", r.system),
                    target: format!(">= {:.0}%", GOAL_ONE_ROUND * 100.0),
                    measured: format!("{:.1}%", f * 100.0),
                    met: f >= GOAL_ONE_ROUND,
                });
            }
        }
        Stop::Spy => out.push(Goal {
            what: format!("{} crash failover with a death notice p99", r.system),
            target: format!("< {GOAL_SPY_MS:.0} ms"),
            measured: format!("{:.1} ms", s.p99),
            met: s.p99 < GOAL_SPY_MS,
        }),
        // No figure is asked of it: a restart costs the process's start-up
        // plus the handshakes. The rejoin (no further election) is reported.
        Stop::Restart => {}
        Stop::Graceful => out.push(Goal {
            what: format!("{} graceful handover p99", r.system),
            target: format!("< {GOAL_GRACEFUL_MS:.0} ms"),
            measured: format!("{:.1} ms", s.p99),
            met: s.p99 < GOAL_GRACEFUL_MS,
        }),
    }
    out
}

async fn run_failover(args: FailoverArgs) -> anyhow::Result<ExitCode> {
    args.cluster.check()?;
    if !(1..=MAX_TRIALS).contains(&args.trials) {
        bail!("--trials must be between 1 and {MAX_TRIALS}");
    }
    let with_etcd = match args.cluster.with_etcd() {
        Ok(with_etcd) => with_etcd,
        Err(code) => return Ok(code),
    };
    let stop = match (args.graceful, args.spy, args.restart) {
        (true, _, _) => Stop::Graceful,
        (false, true, _) => Stop::Spy,
        (false, false, true) => Stop::Restart,
        (false, false, false) => Stop::Kill,
    };

    // Both clusters run for the whole run, so interleaved trials see the same machine.
    let mut tenure = args.cluster.start_tenure()?;
    let mut etcd = match with_etcd {
        true => Some(args.cluster.start_etcd(args.etcd_pre_vote).await?),
        false => None,
    };
    let Some(outcome) = measure(&args, stop, &mut tenure, etcd.as_mut()).await else {
        return Ok(ExitCode::from(EXIT_INTERRUPTED));
    };
    if let Some(dir) = &args.keep_logs {
        keep_logs(&tenure, dir)?;
        if let Some(e) = &etcd {
            keep_logs(e, dir)?;
        }
    }
    drop(etcd);
    drop(tenure);
    let (tenure_trials, etcd_trials) = outcome?;

    let report = failover_report(&args, stop, tenure_trials, etcd_trials);
    if let Some(path) = &args.plot {
        write_plot(path, &args, &report)?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_text(&report, args.plot.as_deref());
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs the trials, tenure's and etcd's interleaved, with a progress bar:
/// each system's trials (etcd's only when it runs), or `None` on Ctrl-C.
async fn measure(
    args: &FailoverArgs,
    stop: Stop,
    tenure: &mut Tenure,
    mut etcd: Option<&mut etcd::Etcd>,
) -> Option<anyhow::Result<(Vec<Trial>, Option<Vec<Trial>>)>> {
    let timing = args.cluster.timing();
    let systems = if etcd.is_some() { 2 } else { 1 };
    let bar = ProgressBar::new((args.trials * systems) as u64);
    bar.set_style(
        ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_prefix("failover trials");

    let mut tenure_trials = Vec::new();
    let mut etcd_trials = etcd.as_ref().map(|_| Vec::new());
    let measured = async {
        for _ in 0..args.trials {
            let t = trial(tenure, stop, timing).await.map_err(|e| with_logs(e, tenure))?;
            bar.set_message(format!("tenure {:.0} ms", t.failover_ms));
            bar.inc(1);
            tenure_trials.push(t);
            if let (Some(e), Some(trials)) = (etcd.as_deref_mut(), etcd_trials.as_mut()) {
                let t = trial(e, stop, timing).await.map_err(|err| with_logs(err, e))?;
                bar.set_message(format!("etcd {:.0} ms", t.failover_ms));
                bar.inc(1);
                trials.push(t);
            }
        }
        anyhow::Ok(())
    };
    let outcome = tokio::select! {
        r = measured => r,
        _ = tokio::signal::ctrl_c() => {
            bar.abandon_with_message("interrupted; stopping the clusters");
            return None;
        }
    };
    bar.finish_and_clear();
    Some(outcome.map(|()| (tenure_trials, etcd_trials)))
}

/// The run's report; `etcd_trials` when etcd ran.
fn failover_report(
    args: &FailoverArgs,
    stop: Stop,
    tenure_trials: Vec<Trial>,
    etcd_trials: Option<Vec<Trial>>,
) -> FailoverReport {
    let by_elections = args.cluster.protocol == tenure_core::ProtocolKind::Paxos;
    let mut reports = vec![SystemReport::new("tenure", tenure_trials, by_elections)];
    if let Some(trials) = etcd_trials {
        reports.push(SystemReport::new("etcd", trials, false));
    }
    // The goals are stated for the default protocol; the others are
    // compared in docs/protocols.md instead.
    let goals = if args.cluster.protocol == tenure_core::ProtocolKind::Raft {
        goals(stop, (args.cluster.heartbeat_ms, args.cluster.election_timeout_ms), &reports[0])
    } else {
        Vec::new()
    };
    FailoverReport {
        stop,
        protocol: args.cluster.protocol,
        tls: !args.cluster.insecure_no_tls,
        nodes: args.cluster.nodes,
        heartbeat_ms: args.cluster.heartbeat_ms,
        election_timeout_ms: args.cluster.election_timeout_ms,
        detector: format!(
            "every survivor polled on its own loop every {} ms (tenure GET /v1/status, etcd POST /v3/maintenance/status); \
             the first survivor that reports itself leader of a newer term ends the measurement",
            DETECT_POLL.as_millis()
        ),
        systems: reports,
        goals,
    }
}

/// Writes the latency CDF of every system to `path`.
fn write_plot(
    path: &std::path::Path,
    args: &FailoverArgs,
    report: &FailoverReport,
) -> anyhow::Result<()> {
    let title = format!(
        "{} failover, {} nodes, heartbeat {} ms / election timeout {} ms",
        if args.graceful { "SIGTERM" } else { "SIGKILL" },
        args.cluster.nodes,
        args.cluster.heartbeat_ms,
        args.cluster.election_timeout_ms
    );
    let series: Vec<(String, Vec<f64>)> = report
        .systems
        .iter()
        .map(|s| (s.system.to_string(), s.trials.iter().map(|t| t.failover_ms).collect()))
        .collect();
    plot::write_cdf(path, &title, plot::FAILOVER_AXES, &series)
}

fn with_logs<S: System>(e: anyhow::Error, sys: &S) -> anyhow::Error {
    e.context(format!("{} trial failed; server logs:\n{}", sys.name(), sys.log_tails()))
}

fn print_text(r: &FailoverReport, plot: Option<&std::path::Path>) {
    println!(
        "{} failover, {} nodes, heartbeat {} ms, election timeout {} ms, tenure protocol {}, {}",
        match r.stop {
            Stop::Kill => "SIGKILL",
            Stop::Graceful => "SIGTERM (graceful)",
            Stop::Spy => "SIGKILL and a supervisor's death notice",
            Stop::Restart => "SIGKILL and a restart at once (the next incarnation's notice)",
        },
        r.nodes,
        r.heartbeat_ms,
        r.election_timeout_ms,
        r.protocol,
        if r.tls { "TLS" } else { "no TLS" }
    );
    println!("detector: {}", r.detector);
    println!(
        "{:<8} {:>6} {:>9} {:>9} {:>9} {:>9} {:>11} {:>11} {:>9} {:>8} {:>9} {:>15}",
        "SYSTEM",
        "TRIALS",
        "P50 MS",
        "P90 MS",
        "P99 MS",
        "MAX MS",
        "ONE-ROUND",
        "SPLIT VOTES",
        "ELECT/FO",
        "PREV/FO",
        "REJOIN!",
        "POLL PERIOD/RTT"
    );
    for s in &r.systems {
        let Some(m) = s.failover_ms else { continue };
        println!(
            "{:<8} {:>6} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>10.1}% {:>11} {:>9} {:>8} {:>9} {:>15}",
            s.system,
            m.count,
            m.p50,
            m.p90,
            m.p99,
            m.max,
            s.one_round_fraction.unwrap_or(0.0) * 100.0,
            s.split_votes,
            s.elections_per_failover.map_or("-".to_string(), |e| format!("{e:.2}")),
            s.pre_votes_per_failover.map_or("-".to_string(), |e| format!("{e:.2}")),
            s.rejoins_disturbed,
            format!("{:.2}/{:.2} ms", s.poll_period_ms, s.poll_rtt_ms)
        );
    }
    if let [t, e] = &r.systems[..] {
        if let (Some(t), Some(e)) = (t.failover_ms, e.failover_ms) {
            println!(
                "etcd / tenure: p50 {:.2}x, p99 {:.2}x, max {:.2}x",
                e.p50 / t.p50,
                e.p99 / t.p99,
                e.max / t.max
            );
        }
    }
    for g in &r.goals {
        println!(
            "goal: {} {} — measured {} — {}",
            g.what,
            g.target,
            g.measured,
            if g.met { "MET" } else { "MISSED" }
        );
    }
    if let Some(p) = plot {
        println!("CDF written to {}", p.display());
    }
}
