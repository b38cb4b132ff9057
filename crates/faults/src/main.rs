//! `tenure-faults`: run the fault scenarios or a randomized fault run
//! against real `tenure server` processes in network namespaces (root only).

use anyhow::{bail, Context};
use clap::{Parser, Subcommand};
use std::time::Duration;
use tenure_faults::{kv_scenarios, random, scenarios, skip, spy_scenarios};

#[derive(Parser)]
#[command(about = "Fault tests of tenure servers in network namespaces")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Random faults (kill, pause, cuts, isolation, loss) for a bounded time.
    Random {
        /// Run length in minutes (fractions allowed).
        #[arg(long, default_value_t = 2.0)]
        minutes: f64,
        /// Seed of the fault schedule; random when absent (printed first).
        #[arg(long)]
        seed: Option<u64>,
        /// Number of servers.
        #[arg(long, default_value_t = random::DEFAULT_NODES)]
        nodes: usize,
    },
    /// One named scenario: non-sticky-leader, leader-ping-pong,
    /// one-link-failure, leader-crash, leader-host-down, leader-pause,
    /// minority-partition-with-leader, minority-partition-without-leader,
    /// long-isolation; the key-value store's kv-linearizable (20 s, seed 1;
    /// TENURE_FAULT_KV_SECONDS, TENURE_FAULT_SEED), kv-kill-all,
    /// kv-wiped-follower, kv-wiped-follower-snapshot, kv-stale-reads-caught.
    Scenario {
        /// The scenario's name.
        name: String,
    },
}

/// Runs `work` until it ends or Ctrl-C: either way its cluster is dropped,
/// so the namespaces, bridge, rules, servers and directories are removed.
async fn interruptible<T>(
    work: impl std::future::Future<Output = Result<T, String>>,
) -> Result<T, String> {
    tokio::select! {
        r = work => r,
        _ = tokio::signal::ctrl_c() => Err("interrupted (Ctrl-C); cleaned up".to_string()),
    }
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if let Some(s) = skip::require_netns() {
        bail!("cannot run here: {}", s.reason);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("tokio runtime")?;
    match cli.command {
        Cmd::Random { minutes, seed, nodes } => {
            let seed = seed.unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos() as u64)
                    .unwrap_or(0)
            });
            println!("seed: {seed}");
            if !(minutes.is_finite() && minutes >= 0.0) {
                bail!("--minutes must be a non-negative number");
            }
            let duration = Duration::from_secs_f64(minutes * 60.0);
            let report = rt
                .block_on(interruptible(random::random_run(nodes, duration, seed, |line| {
                    println!("{line}")
                })))
                .map_err(|msg| anyhow::anyhow!("FAILED (seed {seed}): {msg}"))?;
            println!("PASSED (seed {seed}): {}", report.summary());
        }
        Cmd::Scenario { name } => {
            let outcome = rt.block_on(interruptible(async {
                match name.as_str() {
                    "non-sticky-leader" => scenarios::non_sticky_leader().await,
                    "long-isolation" => scenarios::long_isolation().await,
                    "leader-ping-pong" => scenarios::leader_ping_pong().await,
                    "one-link-failure" => scenarios::one_link_failure().await,
                    "leader-crash" => scenarios::leader_crash().await,
                    "leader-host-down" => spy_scenarios::leader_host_down().await,
                    "leader-pause" => scenarios::leader_pause().await,
                    "minority-partition-with-leader" => scenarios::minority_partition(true).await,
                    "minority-partition-without-leader" => {
                        scenarios::minority_partition(false).await
                    }
                    "kv-linearizable" => {
                        let seed = std::env::var("TENURE_FAULT_SEED")
                            .ok()
                            .and_then(|s| s.parse().ok())
                            .unwrap_or(1);
                        kv_scenarios::linearizable(kv_scenarios::seconds_from_env(), seed).await
                    }
                    "kv-kill-all" => kv_scenarios::kill_all().await,
                    "kv-wiped-follower" => {
                        kv_scenarios::wiped_follower(kv_scenarios::WIPE_ENTRIES).await
                    }
                    "kv-wiped-follower-snapshot" => {
                        kv_scenarios::wiped_follower(kv_scenarios::WIPE_SNAPSHOT).await
                    }
                    "kv-stale-reads-caught" => kv_scenarios::stale_reads_are_caught().await,
                    other => Err(format!("unknown scenario {other:?}")),
                }
            }));
            match outcome {
                Ok(o) => {
                    for l in o.lines {
                        println!("{l}");
                    }
                    println!("PASSED: {name}");
                }
                Err(msg) => bail!("FAILED: {name}: {msg}"),
            }
        }
    }
    Ok(())
}
