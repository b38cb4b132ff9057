//! The flags of the clusters a benchmark starts, and starting them.

use crate::etcd;
use crate::failover::Timing;
use crate::system::Tenure;
use anyhow::bail;
use clap::Args;
use std::process::ExitCode;
use std::time::Duration;

/// Fewest nodes: with two, losing one leaves no majority to fail over to.
const MIN_NODES: usize = 3;
/// Exit code when `--compare etcd` is asked for and etcd is not installed.
const EXIT_NO_ETCD: u8 = 3;

/// The clusters a benchmark starts: shared by `tenure bench failover` and
/// `tenure bench kv`.
#[derive(Args, Debug)]
pub struct ClusterArgs {
    /// Nodes per cluster (at least 3).
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub(crate) nodes: usize,
    /// Heartbeat interval, in milliseconds (etcd: --heartbeat-interval).
    #[arg(long, default_value_t = 100, value_name = "MS")]
    pub(crate) heartbeat_ms: u64,
    /// Election timeout, in milliseconds (etcd: --election-timeout).
    #[arg(long, default_value_t = 1000, value_name = "MS")]
    pub(crate) election_timeout_ms: u64,
    /// Election protocol of the tenure servers: raft, ranked or paxos.
    #[arg(long, default_value = "raft", value_name = "NAME")]
    pub(crate) protocol: tenure_core::ProtocolKind,
    /// Also measure a local etcd cluster of as many members, with the same
    /// timings, the same way.
    #[arg(long, value_name = "SYSTEM", value_parser = ["etcd"])]
    pub(crate) compare: Option<String>,
    /// With --compare etcd: when etcd is not installed, warn and measure tenure
    /// alone instead of failing.
    #[arg(long)]
    pub(crate) allow_missing_etcd: bool,
    /// Run the tenure servers without TLS (by default: mutual TLS between them and
    /// HTTPS for their API, with certificates made for the run), to measure what
    /// TLS costs. etcd runs without TLS either way.
    #[arg(long)]
    pub(crate) insecure_no_tls: bool,
}

impl ClusterArgs {
    /// Refuses a cluster size that cannot fail over.
    pub(crate) fn check(&self) -> anyhow::Result<()> {
        if !(MIN_NODES..=tenure_core::MAX_VOTERS).contains(&self.nodes) {
            bail!("--nodes must be between {MIN_NODES} and {}", tenure_core::MAX_VOTERS);
        }
        Ok(())
    }

    /// Whether etcd runs too, or the exit code when it was asked for and is missing.
    pub(crate) fn with_etcd(&self) -> Result<bool, ExitCode> {
        etcd_wanted(self.compare.is_some(), self.allow_missing_etcd)
    }

    pub(crate) fn timing(&self) -> Timing {
        Timing {
            heartbeat: Duration::from_millis(self.heartbeat_ms),
            election_timeout: Duration::from_millis(self.election_timeout_ms),
        }
    }

    /// Starts the tenure cluster.
    pub(crate) fn start_tenure(&self) -> anyhow::Result<Tenure> {
        Tenure::start_all(
            self.nodes,
            self.heartbeat_ms,
            self.election_timeout_ms,
            self.protocol,
            !self.insecure_no_tls,
        )
    }

    /// Starts the etcd cluster.
    pub(crate) async fn start_etcd(&self, pre_vote: bool) -> anyhow::Result<etcd::Etcd> {
        let (hb, et) = (self.heartbeat_ms, self.election_timeout_ms);
        etcd::Etcd::start_all(self.nodes, hb, et, pre_vote, None).await
    }

    /// Starts the tenure cluster, its servers adding `delay_ms` to each
    /// sync of their logs.
    pub(crate) fn start_tenure_with_sync_delay(&self, delay_ms: u64) -> anyhow::Result<Tenure> {
        Tenure::start_with_sync_delay(
            self.nodes,
            self.heartbeat_ms,
            self.election_timeout_ms,
            self.protocol,
            !self.insecure_no_tls,
            delay_ms,
        )
    }

    /// Starts the etcd cluster, `strace` adding `delay_ms` to each of its
    /// members' syncs.
    pub(crate) async fn start_etcd_with_sync_delay(
        &self,
        delay_ms: u64,
    ) -> anyhow::Result<etcd::Etcd> {
        let (hb, et) = (self.heartbeat_ms, self.election_timeout_ms);
        etcd::Etcd::start_all(self.nodes, hb, et, false, Some(delay_ms)).await
    }
}

/// Whether etcd runs beside tenure: `Ok(false)` without `--compare etcd`, or
/// when etcd is missing and `--allow-missing-etcd` says to go on without it;
/// `Err(exit code)` when it is missing and wanted.
fn etcd_wanted(compare: bool, allow_missing_etcd: bool) -> Result<bool, ExitCode> {
    if !compare || etcd::available() {
        return Ok(compare);
    }
    if allow_missing_etcd {
        eprintln!(
            "warning: etcd is not on the PATH ({}); measuring tenure alone",
            etcd::INSTALL_HINT
        );
        Ok(false)
    } else {
        eprintln!(
            "error: --compare etcd needs the `etcd` binary on the PATH; install it with: {}\n\
             (or pass --allow-missing-etcd to measure tenure alone)",
            etcd::INSTALL_HINT
        );
        Err(ExitCode::from(EXIT_NO_ETCD))
    }
}
