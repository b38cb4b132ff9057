//! The systems under test behind one interface, so the trials treat tenure and
//! etcd exactly alike: the same stability check, the same kill, the same
//! leader detection.

use super::fetch::{metric_value, Fetch};
use crate::local_cluster::{Proc, TenureCluster, TenureSettings};
use crate::rest::Client;
use std::time::Duration;

/// Timeout of one `/metrics` scrape.
const METRICS_TIMEOUT: Duration = Duration::from_millis(500);

/// One node's view of leadership, in node indexes (0-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct View {
    /// The leader this node knows of.
    pub leader: Option<usize>,
    /// The node's term.
    pub term: u64,
    /// Whether this node says it is the leader.
    pub is_leader: bool,
}

/// A local cluster the benchmark can observe and crash.
pub trait System {
    /// Short name for reports ("tenure", "etcd").
    fn name(&self) -> &'static str;
    /// Number of nodes.
    fn len(&self) -> usize;
    /// Node `i`'s view, or None when it does not answer within `timeout`.
    async fn view(&self, i: usize, timeout: Duration) -> Option<View>;
    /// Elections node `i` has started since it started, when the system counts them.
    async fn elections(&self, i: usize) -> Option<u64>;
    /// Starts node `i` (again, with its data).
    fn start(&mut self, i: usize) -> anyhow::Result<()>;
    /// Node `i`'s process.
    fn proc(&mut self, i: usize) -> &mut Proc;
    /// The last lines of every node's log.
    fn log_tails(&self) -> String;
}

/// A tenure cluster observed through `/v1/status` and `/metrics`.
pub struct Tenure {
    cluster: TenureCluster,
    endpoints: Vec<String>,
    client: Client,
    fetch: Fetch,
}

impl Tenure {
    /// Starts `nodes` servers with the given timings.
    pub fn start_all(
        nodes: usize,
        heartbeat_ms: u64,
        election_timeout_ms: u64,
    ) -> anyhow::Result<Self> {
        let mut cluster = TenureCluster::new(&TenureSettings {
            nodes,
            heartbeat_ms,
            election_timeout_ms,
            dir_prefix: "tenure-bench-",
            cluster_id: "tenure-bench",
        })?;
        for i in 0..nodes {
            cluster.start(i)?;
        }
        let endpoints = cluster.endpoints();
        Ok(Tenure { cluster, endpoints, client: Client::default(), fetch: Fetch::default() })
    }

    /// Node `i`'s HTTP API.
    pub fn endpoint(&self, i: usize) -> &str {
        &self.endpoints[i]
    }

    /// Node `i`'s counter `name` from `/metrics`.
    pub async fn counter(&self, i: usize, name: &str) -> Option<u64> {
        let text = self
            .fetch
            .get_text(&format!("{}/metrics", self.endpoints[i]), METRICS_TIMEOUT)
            .await
            .ok()?;
        metric_value(&text, name).map(|v| v as u64)
    }
}

impl System for Tenure {
    fn name(&self) -> &'static str {
        "tenure"
    }

    fn len(&self) -> usize {
        self.endpoints.len()
    }

    async fn view(&self, i: usize, timeout: Duration) -> Option<View> {
        let s = self.client.status_within(&self.endpoints[i], timeout).await.ok()?;
        Some(View {
            leader: s.leader.and_then(|id| usize::try_from(id).ok()?.checked_sub(1)),
            term: s.term,
            is_leader: s.role == "leader",
        })
    }

    async fn elections(&self, i: usize) -> Option<u64> {
        self.counter(i, "tenure_elections_started_total").await
    }

    fn start(&mut self, i: usize) -> anyhow::Result<()> {
        self.cluster.start(i)
    }

    fn proc(&mut self, i: usize) -> &mut Proc {
        &mut self.cluster.servers[i].proc
    }

    fn log_tails(&self) -> String {
        self.cluster.log_tails()
    }
}
