//! The steps of a replacement in each system ([`Replacement`]).
//!
//! - tenure: `POST /v1/members` (a learner the leader promotes on its own)
//!   before the new node starts with `--join`; `GET /v1/members` on the
//!   leader until the node votes in a committed configuration; `DELETE
//!   /v1/members/{id}`, answered once committed. A change refused for a
//!   reason that passes (no leader yet, another change in progress, voters
//!   not heard lately) is asked again, bounded.
//! - etcd: `etcdctl member add NAME --learner`, the member started with
//!   `--initial-cluster-state existing`, `etcdctl member promote ID` until
//!   etcd takes it (it refuses a learner that is not in sync with the
//!   leader), `etcdctl member remove ID`. Every `etcdctl` run is bounded
//!   and killed if the bench stops first.

use super::etcd::Etcd;
use super::fetch::{metric_value, Fetch};
use super::kv_load::Api;
use super::membership_flow::{Finish, Look, Replacement};
use super::system::{System, Tenure};
use anyhow::{anyhow, bail, Context};
use nix::sys::signal::Signal;
use std::process::Stdio;
use std::time::Duration;
use tenure_api::{MemberAddRequest, MembersBody, PromoteMode};
use tenure_client::members::{change, members, refusal, MemberChange};
use tenure_client::{ClientOptions, Cluster};
use tokio::time::{sleep, timeout, Instant};

/// Longest time a change may be asked again while refused for a reason
/// that passes.
const CHANGE_BOUND: Duration = Duration::from_secs(60);
/// Pause before asking a refused change again.
const CHANGE_RETRY: Duration = Duration::from_millis(100);
/// How long a removed node may take to exit.
const EXIT_BOUND: Duration = Duration::from_secs(10);
/// Timeout of one metrics scrape.
const METRICS_TIMEOUT: Duration = Duration::from_secs(5);
/// etcdctl's own `--command-timeout`.
const ETCDCTL_COMMAND_TIMEOUT_S: u64 = 10;
/// Longest one `etcdctl` run may take before it is killed.
const ETCDCTL_BOUND: Duration = Duration::from_secs(20);
/// etcd's refusal of a learner that is not in sync with the leader
/// (`ErrLearnerNotReady`): the catch-up is not over.
const ETCD_NOT_IN_SYNC: &str = "in sync with leader";
/// etcd's refusals that pass: strict reconfiguration checks (the members
/// not all connected yet), a busy or changing leader, a timed-out request.
const ETCD_PASSING: [&str; 6] = [
    "unhealthy cluster",
    "not enough started members",
    "leader changed",
    "no leader",
    "timed out",
    "deadline exceeded",
];

/// A tenure cluster of `nodes` and its spare (node `nodes + 1`).
pub(super) struct TenureReplacement {
    tenure: Tenure,
    /// The leader first, then the other first nodes.
    cluster: Cluster,
    leader: usize,
    old: usize,
    new: usize,
    voters: Vec<u64>,
}

impl TenureReplacement {
    /// Replaces the first follower of `leader` among the first `nodes` by
    /// the spare (index `nodes`).
    pub fn new(tenure: Tenure, nodes: usize, leader: usize) -> anyhow::Result<Self> {
        let old = (0..nodes).find(|&i| i != leader).context("no follower to replace")?;
        let order = std::iter::once(leader).chain((0..nodes).filter(|&i| i != leader));
        let endpoints = order.map(|i| tenure.endpoint(i).to_string()).collect();
        let cluster = Cluster::new(tenure.client().clone(), endpoints)?;
        let voters = (0..nodes).filter(|&i| i != old).chain([nodes]).map(|i| tenure.id(i));
        let mut voters: Vec<u64> = voters.collect();
        voters.sort_unstable();
        Ok(TenureReplacement { tenure, cluster, leader, old, new: nodes, voters })
    }

    /// The cluster, to keep its logs.
    pub fn system(&self) -> &Tenure {
        &self.tenure
    }

    /// Asks for `c` until it commits, or fails: refused for good, or still
    /// refused for a reason that passes after [`CHANGE_BOUND`].
    async fn change(&self, c: MemberChange) -> anyhow::Result<MembersBody> {
        let started = Instant::now();
        loop {
            let e = match change(&self.cluster, &c).await {
                Ok(m) => return Ok(m),
                Err(e) => e,
            };
            let passes = refusal(&e).is_some_and(|(status, body)| {
                status == hyper::StatusCode::SERVICE_UNAVAILABLE
                    || matches!(body.reason.as_deref(), Some("in_progress" | "unhealthy"))
            });
            if !passes || started.elapsed() > CHANGE_BOUND {
                return Err(anyhow!(e).context(format!("tenure: {c}")));
            }
            sleep(CHANGE_RETRY).await;
        }
    }
}

impl Replacement for TenureReplacement {
    fn name(&self) -> &'static str {
        "tenure"
    }

    fn api(&self) -> Api {
        Api::Tenure { base: self.tenure.endpoint(self.leader).to_string() }
    }

    fn fetch(&self) -> Fetch {
        self.tenure.fetch().clone()
    }

    fn describe(&self) -> String {
        let (old, new) = (self.tenure.id(self.old), self.tenure.id(self.new));
        format!("node {old} (a follower) by node {new}")
    }

    async fn add_learner(&mut self) -> anyhow::Result<()> {
        let add = MemberAddRequest {
            id: self.tenure.id(self.new),
            address: self.tenure.peer_address(self.new).to_string(),
            directory: None,
            promote: PromoteMode::Auto,
            probe: false,
        };
        self.change(MemberChange::Add(add)).await.map(drop)
    }

    fn start_new(&mut self) -> anyhow::Result<()> {
        self.tenure.start(self.new)
    }

    async fn look(&mut self) -> anyhow::Result<Look> {
        let m = match members(&self.cluster).await {
            Ok(m) => m,
            Err(e @ tenure_client::Error::AuthRefused(_)) => return Err(e.into()),
            Err(e) => return Ok(Look::Again(e.to_string())),
        };
        if m.leader != Some(m.served_by) {
            return Ok(Look::Again(format!("node {} answered, not the leader", m.served_by)));
        }
        Ok(match m.get(self.tenure.id(self.new)) {
            Some((_, true)) if m.committed => Look::Voter,
            Some((member, false)) if member.lag_entries == Some(0) => Look::CaughtUp,
            _ => Look::Behind,
        })
    }

    async fn remove_old(&mut self) -> anyhow::Result<()> {
        self.change(MemberChange::Remove(self.tenure.id(self.old))).await.map(drop)
    }

    async fn finish(&mut self) -> anyhow::Result<Finish> {
        let old = self.tenure.proc(self.old);
        if old.signal(Signal::SIGTERM).is_ok() && old.wait_exit(EXIT_BOUND).await.is_err() {
            eprintln!("warning: tenure: the removed node did not exit within {EXIT_BOUND:?}");
            old.kill();
        }
        let m = members(&self.cluster).await.context("tenure: reading the members at the end")?;
        let mut voters: Vec<u64> = m.voters.iter().map(|v| v.id).collect();
        voters.sort_unstable();
        let listed = format!("voters {voters:?}, learners {}", m.learners.len());
        if voters != self.voters || !m.learners.is_empty() || !m.committed {
            bail!("tenure: the members at the end are {listed}, not voters {:?}", self.voters);
        }
        let url = format!("{}/metrics", self.tenure.endpoint(self.new));
        let text = self.tenure.fetch().get_text(&url, METRICS_TIMEOUT).await?;
        let snapshot = metric_value(&text, "tenure_log_snapshot_bytes").map(|b| b as u64);
        Ok(Finish { members: listed, snapshot_bytes: snapshot })
    }

    fn log_tails(&self) -> String {
        self.tenure.log_tails()
    }
}

/// An etcd cluster and the member that replaces one of its followers.
pub(super) struct EtcdReplacement {
    etcd: Etcd,
    fetch: Fetch,
    leader: usize,
    old: usize,
    new: usize,
}

impl EtcdReplacement {
    /// Replaces the first follower of `leader` among the first `nodes`
    /// members by a new member (prepared here, not started).
    pub fn new(mut etcd: Etcd, nodes: usize, leader: usize) -> anyhow::Result<Self> {
        let old = (0..nodes).find(|&i| i != leader).context("no follower to replace")?;
        let new = etcd.new_member()?;
        let fetch = Fetch::new(ClientOptions::default())?;
        Ok(EtcdReplacement { etcd, fetch, leader, old, new })
    }

    /// The cluster, to keep its logs.
    pub fn system(&self) -> &Etcd {
        &self.etcd
    }

    fn id(&self, i: usize) -> anyhow::Result<u64> {
        self.etcd.member_id(i).with_context(|| format!("etcd member {} has no id yet", i + 1))
    }

    /// `etcdctl --endpoints=LEADER args...`.
    async fn etcdctl(&self, args: &[&str]) -> anyhow::Result<Result<String, String>> {
        etcdctl(&self.etcd.client_url(self.leader), args).await
    }

    /// Runs `args` until etcd takes it, while it refuses for a reason that
    /// passes (bounded by [`CHANGE_BOUND`]).
    async fn etcdctl_retrying(&self, args: &[&str]) -> anyhow::Result<String> {
        let started = Instant::now();
        loop {
            match self.etcdctl(args).await? {
                Ok(out) => return Ok(out),
                Err(e) if passes(&e) && started.elapsed() < CHANGE_BOUND => {}
                Err(e) => bail!("etcdctl {}: {e}", args.join(" ")),
            }
            sleep(CHANGE_RETRY).await;
        }
    }
}

impl Replacement for EtcdReplacement {
    fn name(&self) -> &'static str {
        "etcd"
    }

    fn api(&self) -> Api {
        Api::Etcd { base: self.etcd.client_url(self.leader) }
    }

    fn fetch(&self) -> Fetch {
        self.fetch.clone()
    }

    fn describe(&self) -> String {
        let (old, new) = (self.etcd.member_name(self.old), self.etcd.member_name(self.new));
        format!("member {old} (a follower) by {new}")
    }

    async fn add_learner(&mut self) -> anyhow::Result<()> {
        let name = self.etcd.member_name(self.new).to_string();
        let peer = format!("--peer-urls={}", self.etcd.peer_url(self.new));
        let out = self
            .etcdctl_retrying(&["member", "add", &name, "--learner", &peer, "-w", "json"])
            .await?;
        let id = added_id(&out)?;
        self.etcd.set_member_id(self.new, id)
    }

    fn start_new(&mut self) -> anyhow::Result<()> {
        self.etcd.start(self.new)
    }

    async fn look(&mut self) -> anyhow::Result<Look> {
        let id = format!("{:x}", self.id(self.new)?);
        Ok(match self.etcdctl(&["member", "promote", &id]).await? {
            Ok(_) => Look::Voter,
            Err(e) if e.contains(ETCD_NOT_IN_SYNC) => Look::Behind,
            Err(e) if passes(&e) => Look::Again(e),
            Err(e) => bail!("etcdctl member promote {id}: {e}"),
        })
    }

    async fn remove_old(&mut self) -> anyhow::Result<()> {
        let id = format!("{:x}", self.id(self.old)?);
        self.etcdctl_retrying(&["member", "remove", &id]).await.map(drop)
    }

    async fn finish(&mut self) -> anyhow::Result<Finish> {
        // A removed etcd member stops on its own.
        let old = self.etcd.proc(self.old);
        if old.wait_exit(EXIT_BOUND).await.is_err() {
            old.kill();
        }
        let out = match self.etcdctl(&["member", "list", "-w", "json"]).await? {
            Ok(out) => out,
            Err(e) => bail!("etcdctl member list: {e}"),
        };
        let (mut ids, learners) = listed_members(&out)?;
        ids.sort_unstable();
        let mut want: Vec<u64> = (0..=self.new)
            .filter(|&i| i != self.old)
            .map(|i| self.id(i))
            .collect::<anyhow::Result<_>>()?;
        want.sort_unstable();
        let listed = format!("{} members, {learners} learners", ids.len());
        if ids != want || learners > 0 {
            bail!("etcd: the members at the end are {ids:x?} ({learners} learners), not {want:x?}");
        }
        Ok(Finish { members: listed, snapshot_bytes: None })
    }

    fn log_tails(&self) -> String {
        self.etcd.log_tails()
    }
}

/// Whether an etcd refusal may pass if asked again.
fn passes(error: &str) -> bool {
    ETCD_PASSING.iter().any(|p| error.contains(p))
}

/// `etcdctl --endpoints=ENDPOINT args...`, bounded by [`ETCDCTL_BOUND`]:
/// `Ok(stdout)` when it succeeded, `Err(what it said)` when etcd refused.
async fn etcdctl(endpoint: &str, args: &[&str]) -> anyhow::Result<Result<String, String>> {
    let mut c = tokio::process::Command::new("etcdctl");
    c.arg(format!("--endpoints={endpoint}"))
        .arg(format!("--command-timeout={ETCDCTL_COMMAND_TIMEOUT_S}s"))
        .args(args)
        .env("ETCDCTL_API", "3")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let out = timeout(ETCDCTL_BOUND, c.output())
        .await
        .map_err(|_| anyhow!("etcdctl {} took over {ETCDCTL_BOUND:?}", args.join(" ")))?
        .context("cannot run etcdctl (apt-get install etcd-client)")?;
    if out.status.success() {
        return Ok(Ok(String::from_utf8_lossy(&out.stdout).into_owned()));
    }
    // etcdctl logs its retries as JSON lines, then says `Error: ...`.
    let stderr = String::from_utf8_lossy(&out.stderr);
    let said = stderr.lines().rev().find(|l| l.starts_with("Error:")).unwrap_or(stderr.trim());
    Ok(Err(format!("{said} ({})", out.status)))
}

/// The new member's id in `etcdctl member add -w json`'s answer.
fn added_id(json: &str) -> anyhow::Result<u64> {
    let v: serde_json::Value = serde_json::from_str(json)
        .with_context(|| format!("etcdctl member add printed no JSON: {json}"))?;
    v["member"]["ID"].as_u64().with_context(|| format!("etcdctl member add: no member.ID: {json}"))
}

/// The member ids and the number of learners in `etcdctl member list -w
/// json`'s answer.
fn listed_members(json: &str) -> anyhow::Result<(Vec<u64>, usize)> {
    let v: serde_json::Value = serde_json::from_str(json)
        .with_context(|| format!("etcdctl member list printed no JSON: {json}"))?;
    let members = v["members"].as_array().context("etcdctl member list: no members")?;
    let ids = members
        .iter()
        .map(|m| m["ID"].as_u64().context("etcdctl member list: a member without an ID"))
        .collect::<anyhow::Result<Vec<u64>>>()?;
    let learners = members.iter().filter(|m| m["isLearner"] == true).count();
    Ok((ids, learners))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etcdctl_json_answers_are_read() {
        // Captured from etcdctl 3.4.23.
        let add = r#"{"header":{"cluster_id":15118495548433857066,"member_id":13668033151171901709,"raft_term":2},"member":{"ID":9840192726027201260,"peerURLs":["http://127.0.0.1:23802"],"isLearner":true},"members":[{"ID":9840192726027201260,"peerURLs":["http://127.0.0.1:23802"],"isLearner":true},{"ID":13668033151171901709,"name":"n1","peerURLs":["http://127.0.0.1:23801"],"clientURLs":["http://127.0.0.1:23791"]}]}"#;
        assert_eq!(added_id(add).unwrap(), 9840192726027201260);
        assert_eq!(
            listed_members(add).unwrap(),
            (vec![9840192726027201260, 13668033151171901709], 1)
        );
        assert!(added_id("Member added").is_err());
    }

    #[test]
    fn only_refusals_that_pass_are_asked_again() {
        let not_ready =
            "Error: etcdserver: can only promote a learner member which is in sync with leader";
        assert!(not_ready.contains(ETCD_NOT_IN_SYNC) && !passes(not_ready));
        assert!(passes("Error: etcdserver: unhealthy cluster"));
        assert!(passes("Error: context deadline exceeded"));
        assert!(!passes("Error: etcdserver: member not found"));
    }
}
