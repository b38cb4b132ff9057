//! One replacement, timed the same way for every system: a steady writer
//! for a baseline window, then the add of the new node as a learner, its
//! start, the wait until it votes in a committed configuration, and the
//! removal of the node it replaces; the writes split into the window before
//! the add and the window from the add to the removal's commit.

use super::fetch::Fetch;
use super::kv_load::Api;
use super::steady_load::{SlowWrite, SteadySpec, SteadyWriter, WindowReport};
use anyhow::{bail, Context};
use serde::Serialize;
use std::time::Duration;
use tokio::time::{sleep, Instant};

/// Pause between two looks at the new node (tenure: `GET /v1/members` on
/// the leader; etcd: `etcdctl member promote`, whose run takes longer).
pub(super) const POLL: Duration = Duration::from_millis(20);
/// How long the writer runs before the baseline window opens (its
/// connections and TLS sessions are made then), not measured.
pub(super) const WARMUP: Duration = Duration::from_secs(2);
/// Slow writes listed per window.
const SLOWEST: usize = 10;
/// Longest wait for the new node to vote: the catch-up of a large store on
/// a loaded machine, with room.
pub(super) const VOTER_BOUND: Duration = Duration::from_secs(300);

/// What one look at the new node found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Look {
    /// It is not a voter yet, and has not caught up as far as the look can tell.
    Behind,
    /// It holds every committed entry (tenure: lag 0 on the leader), not a voter yet.
    CaughtUp,
    /// It is a voter in a committed configuration.
    Voter,
    /// The look failed in a way that may pass (a timeout, a busy leader): why.
    Again(String),
}

/// How the replaced node and the cluster ended.
#[derive(Debug, Clone, Serialize)]
pub(super) struct Finish {
    /// The members at the end, as the system lists them.
    pub members: String,
    /// Bytes of the snapshot the new node installed (tenure), if known.
    pub snapshot_bytes: Option<u64>,
}

/// A running cluster ready for one of its nodes to be replaced: each
/// system's steps.
pub(super) trait Replacement {
    /// "tenure", "etcd".
    fn name(&self) -> &'static str;
    /// The leader's key-value API, where the writes go.
    fn api(&self) -> Api;
    /// The client of that API.
    fn fetch(&self) -> Fetch;
    /// What is replaced by what ("node 2 by node 4").
    fn describe(&self) -> String;
    /// Asks the cluster to add the new node as a learner; returns once the
    /// change is done.
    async fn add_learner(&mut self) -> anyhow::Result<()>;
    /// Starts the new node's process.
    fn start_new(&mut self) -> anyhow::Result<()>;
    /// One look at (or, for etcd, one promotion of) the new node.
    async fn look(&mut self) -> anyhow::Result<Look>;
    /// Removes the replaced node; returns once the change committed.
    async fn remove_old(&mut self) -> anyhow::Result<()>;
    /// Stops the removed node and checks the members: the new node votes,
    /// the old one is gone, no learner is left.
    async fn finish(&mut self) -> anyhow::Result<Finish>;
    /// The last lines of every node's log.
    fn log_tails(&self) -> String;
}

/// The timings of one replacement, s from the add's request.
#[derive(Debug, Clone, Serialize)]
pub(super) struct Timeline {
    /// What was replaced by what.
    pub replaced: String,
    /// The add's answer.
    pub added_s: f64,
    /// The new node first seen holding every committed entry (tenure only).
    pub caught_up_s: Option<f64>,
    /// The new node a voter in a committed configuration: the time to voter.
    pub voter_s: f64,
    /// Looks at the new node until then (etcd: `member promote` runs).
    pub looks: u32,
    /// The removal's request answered, committed.
    pub removed_s: f64,
    /// The removal alone, s.
    pub remove_s: f64,
    /// The writes due in the baseline window, before the add.
    pub before: WindowReport,
    /// The writes due from the add to the removal's commit.
    pub during: WindowReport,
    /// The slowest writes of the baseline window (due s after its start).
    pub slowest_before: Vec<SlowWrite>,
    /// The slowest writes from the add on (due s after the add): which step
    /// they waited on.
    pub slowest_during: Vec<SlowWrite>,
    /// How it ended.
    pub finish: Finish,
}

/// The latencies of the acknowledged writes of each window, for the plot.
pub(super) struct Latencies {
    /// Before the add, ms.
    pub before: Vec<f64>,
    /// From the add to the removal's commit, ms.
    pub during: Vec<f64>,
}

/// Writes steadily to `r`'s leader for [`WARMUP`] and then the `baseline`
/// window, then replaces the node.
pub(super) async fn replace_one<R: Replacement>(
    r: &mut R,
    load: SteadySpec,
    baseline: Duration,
) -> anyhow::Result<(Timeline, Latencies)> {
    let writer = SteadyWriter::start(r.fetch(), r.api(), load);
    // The writer's connections open during the warm-up, outside both windows.
    sleep(WARMUP).await;
    let began = Instant::now();
    sleep(baseline).await;
    let add = Instant::now();
    r.add_learner().await.context("adding the new node as a learner")?;
    let added = Instant::now();
    r.start_new().context("starting the new node")?;
    let (caught_up, voter, looks) = wait_voter(r).await?;
    let remove = Instant::now();
    r.remove_old().await.context("removing the replaced node")?;
    let removed = Instant::now();
    let recorded = writer.stop().await?;
    let finish = r.finish().await?;
    let since = |t: Instant| t.duration_since(add).as_secs_f64();
    let timeline = Timeline {
        replaced: r.describe(),
        added_s: since(added),
        caught_up_s: caught_up.map(since),
        voter_s: since(voter),
        looks,
        removed_s: since(removed),
        remove_s: removed.duration_since(remove).as_secs_f64(),
        before: recorded.window(began, add),
        during: recorded.window(add, removed),
        slowest_before: recorded.slowest(began, add, SLOWEST),
        slowest_during: recorded.slowest(add, removed, SLOWEST),
        finish,
    };
    let latencies = Latencies {
        before: recorded.latencies(began, add),
        during: recorded.latencies(add, removed),
    };
    Ok((timeline, latencies))
}

/// Looks at the new node every [`POLL`] until it votes (bounded by
/// [`VOTER_BOUND`]): when it was first seen caught up, when it voted, and
/// how many looks it took.
async fn wait_voter<R: Replacement>(r: &mut R) -> anyhow::Result<(Option<Instant>, Instant, u32)> {
    let started = Instant::now();
    let mut caught_up = None;
    let mut looks = 0u32;
    loop {
        looks += 1;
        let last = match r.look().await.context("looking at the new node")? {
            Look::Voter => return Ok((caught_up, Instant::now(), looks)),
            Look::CaughtUp => {
                caught_up.get_or_insert_with(Instant::now);
                "caught up, not a voter yet".to_string()
            }
            Look::Behind => "not caught up".to_string(),
            Look::Again(why) => why,
        };
        if started.elapsed() > VOTER_BOUND {
            bail!(
                "the new node is not a voter {VOTER_BOUND:?} after it started (last look: {last})"
            );
        }
        sleep(POLL).await;
    }
}
