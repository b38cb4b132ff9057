//! `tenure bench partitions`: how long partitions of a group
//! go without an owner when members come and go, with real processes.
//!
//! A local tenure cluster (`ClusterArgs`) and `--members` member processes
//! (the hidden `tenure bench-partitions-member`, `partitions_member`), each
//! a member of one group of `--partitions` partitions through the client's
//! `PartitionMember`, with a session of `--ttl-ms`. Each prints every
//! event with the wall clock in µs (the bench and the members share the
//! machine's clock). Once the assignment is balanced, each round runs
//! three stops, and after each a new member joins (back to `--members`):
//!
//! * **kill -9** of one member: its partitions' time without an owner runs
//!   from the kill to each new owner's `assigned` (goal: p99 ≤ TTL + 50 ms);
//! * **kill -9 with a supervisor's death notice**: the bench, as the
//!   member's supervisor, reaps it, then revokes its session
//!   (`DELETE /v1/sessions/{id}`) (goal: p99 ≤ 50 ms);
//! * **SIGTERM**: the member stops its work and leaves the group; from its
//!   `leaving` line to each new owner's `assigned` (goal: p99 ≤ 10 ms);
//! * **a join**: it must receive `floor(N/M)` or `ceil(N/M)` partitions,
//!   and nothing else may move; from the old owner's `stopped` (its work
//!   over, before its release) to the joiner's `assigned` (goal: p99 ≤
//!   10 ms).
//!
//! After each step the bench waits until every partition has exactly one
//! owner, balanced, and the cluster's view of the group (`GET
//! /v1/groups/{name}`) agrees with the members' lines. Fencing is checked
//! on the members' lines after every step: no two members work on a
//! partition at overlapping times, and its epochs rise; the bench fails at
//! once, with the evidence, if either is broken.
//!
//! With `--compare etcd`, the same member processes hold one etcd
//! election per partition instead (`partitions_etcd`).
//!
//! The goal for the leader's assignment (10,000 partitions × 100 members
//! in ≤ 10 ms) is measured by `cargo bench -p tenure-partitions` and only
//! cited.

use super::cluster_args::ClusterArgs;
use super::failover::wait_stable;
use super::partitions_fleet::{Fleet, Move};
use super::partitions_member::now_us;
use super::stats::{summarize, Summary};
use super::system::System;
use super::Goal;
use anyhow::{bail, Context};
use clap::Args;
use hyper::{Method, StatusCode};
use serde::Serialize;
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Duration;
use tenure_client::http::REQUEST_TIMEOUT;
use tenure_client::{Client, ClientOptions, Cluster, Retry};
use tokio::time::Instant;

pub use super::partitions_member::{run as member, MemberArgs, OpenStore};

/// Most partitions of a group.
const MAX_PARTITIONS: u32 = tenure_partitions::group::MAX_GROUP_PARTITIONS;
/// Most partitions one member can own: its session holds its member key
/// and its owner keys.
const MAX_PER_MEMBER: u32 = tenure_kv::MAX_KEYS_PER_LEASE as u32 - 1;
/// Most member processes: their assignment polls go to one node, which
/// holds at most 32 waits per client address (docs/API.md#groups).
const MAX_MEMBERS: usize = 30;
/// Most rounds.
const MAX_TRIALS: usize = 1_000;
/// How long the members may take to start and join.
const JOIN_BOUND: Duration = Duration::from_secs(20);
/// How long a balanced assignment may take beyond the TTL or the
/// stabilisation time.
const SETTLE_BOUND: Duration = Duration::from_secs(20);
/// Pause before the cluster's view is read again when it did not agree.
const SETTLE_RECHECK: Duration = Duration::from_millis(20);
/// The kill goal above the TTL, ms.
const GOAL_KILL_SLACK_MS: f64 = 50.0;
/// The death-notice goal, ms.
const GOAL_NOTICE_MS: f64 = 50.0;
/// The SIGTERM and join goal, ms.
const GOAL_MOVE_MS: f64 = 10.0;

/// Flags of `tenure bench partitions`.
#[derive(Args, Debug)]
#[command(after_help = "\
Examples:
  tenure bench partitions
  tenure bench partitions --partitions 64 --members 4 --trials 1 --json
  tenure bench partitions --compare etcd --etcd-partitions 100 --etcd-trials 1")]
pub struct PartitionsArgs {
    #[command(flatten)]
    cluster: ClusterArgs,
    /// Partitions of the group (and elections per member with --compare etcd).
    #[arg(long, default_value_t = 1000, value_name = "N")]
    partitions: u32,
    /// Member processes.
    #[arg(long, default_value_t = 10, value_name = "N")]
    members: usize,
    /// The members' session TTL, in milliseconds.
    #[arg(long, default_value_t = 2000, value_name = "MS")]
    ttl_ms: u64,
    /// The group's stabilisation time: a member receives partitions once it has
    /// been ready this long.
    #[arg(long, default_value_t = 2000, value_name = "MS")]
    stabilise_ms: u64,
    /// Rounds; each SIGKILLs a member, SIGKILLs one with a death notice, SIGTERMs
    /// one, and starts a new member after each stop (a join).
    #[arg(long, default_value_t = 3, value_name = "N")]
    trials: usize,
    /// With --compare etcd: kills on etcd, each with 10 fresh members [default: --trials].
    #[arg(long, value_name = "N")]
    etcd_trials: Option<usize>,
    /// With --compare etcd: elections per etcd member [default: --partitions].
    #[arg(long, value_name = "N")]
    etcd_partitions: Option<u32>,
    /// Print the results as JSON on stdout.
    #[arg(long)]
    json: bool,
}

/// How a member is stopped, or joined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Step {
    /// SIGKILL: its session expires after the TTL.
    Kill,
    /// SIGKILL, then its supervisor (the bench) revokes its session.
    KillWithNotice,
    /// SIGTERM: it stops its work and leaves.
    Leave,
    /// A new member joins.
    Join,
}

impl Step {
    fn label(self) -> &'static str {
        match self {
            Step::Kill => "kill -9",
            Step::KillWithNotice => "kill -9 + death notice",
            Step::Leave => "SIGTERM (leave)",
            Step::Join => "join",
        }
    }
}

/// One step of one round.
#[derive(Debug, Serialize)]
struct Trial {
    /// The member stopped, or the one that joined.
    member: String,
    /// Partitions that changed owner for it: the stopped member's, or those
    /// the joiner received.
    moved: usize,
    /// Partitions that changed owner otherwise (should be none).
    others_moved: usize,
    /// For a join: what the joiner received.
    received: Option<usize>,
    /// The least and the most partitions a member owned afterwards.
    min_after: usize,
    max_after: usize,
    /// Each moved partition's time without an owner, ms.
    gaps_ms: Vec<f64>,
    /// How long the stop's own request took, ms: for a join, each old
    /// owner's release, from its work's stop to the cluster's answer; for
    /// SIGTERM, the leave, from the `leaving` line to the answer; with a
    /// death notice, the reap and the revoke, from the kill to the answer.
    acks_ms: Vec<f64>,
    /// From the stop (or the start of the joiner) to the balanced
    /// assignment, ms.
    settled_ms: f64,
}

/// A step's trials.
#[derive(Debug, Serialize)]
struct StepReport {
    step: Step,
    /// Every moved partition's time without an owner, over all trials, ms.
    gap_ms: Option<Summary>,
    /// The stop's own requests (see `Trial::acks_ms`), over all trials, ms.
    ack_ms: Option<Summary>,
    trials: Vec<Trial>,
}

/// The fencing check over the whole run.
#[derive(Debug, Serialize)]
struct Fencing {
    /// Grants the members worked under.
    grants: usize,
    /// Overlaps and epochs that did not rise (the run fails on any).
    violations: Vec<String>,
}

/// The whole run, as printed with --json.
#[derive(Debug, Serialize)]
struct PartitionsReport {
    nodes: usize,
    /// The node that led when the members started (index from 0; every
    /// member asks node 0 first).
    leader: usize,
    protocol: tenure_core::ProtocolKind,
    tls: bool,
    heartbeat_ms: u64,
    election_timeout_ms: u64,
    partitions: u32,
    members: usize,
    ttl_ms: u64,
    stabilise_ms: u64,
    /// From starting the members to the first balanced assignment, ms.
    first_assignment_ms: f64,
    steps: Vec<StepReport>,
    fencing: Fencing,
    /// Releases the cluster accepted.
    releases: usize,
    /// Failures the members retried (`error` lines).
    member_errors: Vec<(String, String)>,
    /// The same kind of kills with one etcd election per partition.
    etcd: Option<super::partitions_etcd::EtcdReport>,
    goals: Vec<Goal>,
    /// Goals measured elsewhere.
    cited: Vec<String>,
}

/// `tenure bench partitions`.
pub async fn run(args: PartitionsArgs) -> anyhow::Result<ExitCode> {
    args.cluster.check()?;
    check(&args)?;
    let with_etcd = match args.cluster.with_etcd() {
        Ok(w) => w,
        Err(code) => return Ok(code),
    };
    if with_etcd && !args.ttl_ms.is_multiple_of(1000) {
        bail!("--compare etcd: etcd grants TTLs in whole seconds; give --ttl-ms in thousands");
    }
    let mut report = on_tenure(&args).await?;
    if with_etcd {
        let etcd = super::partitions_etcd::measure(
            &args.cluster,
            args.etcd_partitions.unwrap_or(args.partitions),
            args.partitions,
            args.members,
            args.ttl_ms,
            args.etcd_trials.unwrap_or(args.trials),
        )
        .await
        .context("etcd")?;
        report.etcd = Some(etcd);
    }
    report.goals = goals(&report);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_text(&report);
    }
    Ok(ExitCode::SUCCESS)
}

/// Refuses flags the group or the cluster cannot hold.
fn check(args: &PartitionsArgs) -> anyhow::Result<()> {
    if !(1..=MAX_PARTITIONS).contains(&args.partitions) {
        bail!("--partitions must be between 1 and {MAX_PARTITIONS}");
    }
    if !(2..=MAX_MEMBERS).contains(&args.members) {
        bail!("--members must be between 2 and {MAX_MEMBERS}");
    }
    // After a stop, the others share every partition.
    let after_stop = args.partitions.div_ceil(args.members as u32 - 1);
    if after_stop > MAX_PER_MEMBER {
        bail!(
            "--partitions {} over {} members leaves {after_stop} to a member after a stop; a \
             member owns at most {MAX_PER_MEMBER}",
            args.partitions,
            args.members - 1
        );
    }
    if !(tenure_kv::MIN_TTL_MS..=tenure_kv::MAX_TTL_MS).contains(&args.ttl_ms) {
        bail!("--ttl-ms must be between {} and {}", tenure_kv::MIN_TTL_MS, tenure_kv::MAX_TTL_MS);
    }
    if args.stabilise_ms > 600_000 {
        bail!("--stabilise-ms must be at most 600000");
    }
    if !(1..=MAX_TRIALS).contains(&args.trials) || args.etcd_trials.unwrap_or(1) > MAX_TRIALS {
        bail!("--trials must be between 1 and {MAX_TRIALS}, --etcd-trials at most {MAX_TRIALS}");
    }
    if args.etcd_partitions.is_some_and(|n| !(1..=MAX_PARTITIONS).contains(&n)) {
        bail!("--etcd-partitions must be between 1 and {MAX_PARTITIONS}");
    }
    Ok(())
}

/// The tenure part of the run: the cluster, the members, the rounds.
async fn on_tenure(args: &PartitionsArgs) -> anyhow::Result<PartitionsReport> {
    let tenure = args.cluster.start_tenure()?;
    let nodes: Vec<usize> = (0..tenure.len()).collect();
    let (leader, _) = wait_stable(&tenure, &nodes, args.cluster.timing()).await?;
    let endpoints: Vec<String> = nodes.iter().map(|&i| tenure.endpoint(i).to_string()).collect();
    let ca = tenure.ca();
    let client = Client::new(ClientOptions { cacert: ca.as_deref(), token: Some(tenure.token()) })?;
    let cluster = Cluster::new(client, endpoints.clone())?;
    let group = format!("bench-{}", std::process::id());
    let (list, n) = (endpoints.join(","), args.partitions.to_string());
    let (ttl, stabilise) = (args.ttl_ms.to_string(), args.stabilise_ms.to_string());
    let mut member_args: Vec<OsString> = [
        "--endpoints",
        list.as_str(),
        "--group",
        group.as_str(),
        "--partitions",
        n.as_str(),
        "--ttl-ms",
        ttl.as_str(),
        "--stabilise-ms",
        stabilise.as_str(),
    ]
    .map(OsString::from)
    .into();
    if let Some(ca) = &ca {
        member_args.extend([OsString::from("--cacert"), ca.clone().into()]);
    }
    let envs = vec![(tenure_client::TOKEN_ENV, OsString::from(tenure.token()))];
    let mut fleet = Fleet::new(member_args, envs, args.partitions)?;
    let run = Run { args, cluster: &cluster, group: &group };
    let measured = run.rounds(&mut fleet).await;
    let measured = measured.map_err(|e| {
        e.context(format!(
            "members' files in {}; server logs:\n{}",
            fleet.dir().display(),
            tenure.log_tails()
        ))
    })?;
    let (first_assignment_ms, steps) = measured;
    let fencing = Fencing { grants: fleet.book.grants(), violations: Vec::new() };
    Ok(PartitionsReport {
        nodes: args.cluster.nodes,
        leader,
        protocol: args.cluster.protocol,
        tls: !args.cluster.insecure_no_tls,
        heartbeat_ms: args.cluster.heartbeat_ms,
        election_timeout_ms: args.cluster.election_timeout_ms,
        partitions: args.partitions,
        members: args.members,
        ttl_ms: args.ttl_ms,
        stabilise_ms: args.stabilise_ms,
        first_assignment_ms,
        steps,
        fencing,
        releases: fleet.releases,
        member_errors: std::mem::take(&mut fleet.errors),
        etcd: None,
        goals: Vec::new(),
        cited: vec!["the leader's new assignment of 10,000 partitions x 100 members <= 10 ms: \
             `cargo bench -p tenure-partitions` (docs/BENCHMARKS.md, \"Assigning partitions\")"
            .to_string()],
    })
}

/// What the rounds share.
struct Run<'a> {
    args: &'a PartitionsArgs,
    cluster: &'a Cluster,
    group: &'a str,
}

impl Run<'_> {
    /// Starts the members, waits for the first balanced assignment, runs
    /// the rounds: the first assignment's time, ms, and every step's trials.
    async fn rounds(&self, fleet: &mut Fleet) -> anyhow::Result<(f64, Vec<StepReport>)> {
        let started = Instant::now();
        for _ in 0..self.args.members {
            fleet.spawn()?;
        }
        let members = self.args.members;
        fleet.wait_for(JOIN_BOUND, "every member joined", |f| f.live().len() == members).await?;
        self.settle(fleet, self.stabilise() + SETTLE_BOUND).await?;
        let first_ms = started.elapsed().as_secs_f64() * 1000.0;
        check_fencing(fleet)?;

        let order = [Step::Kill, Step::KillWithNotice, Step::Leave, Step::Join];
        let mut trials: Vec<Vec<Trial>> = order.iter().map(|_| Vec::new()).collect();
        let mut next_victim = 0;
        for _ in 0..self.args.trials {
            for (k, step) in order[..3].iter().enumerate() {
                let live = fleet.live();
                let victim = live[next_victim % live.len()];
                next_victim += 1;
                let trial = self
                    .stop(fleet, victim, *step)
                    .await
                    .with_context(|| format!("{} of {}", step.label(), fleet.name(victim)))?;
                trials[k].push(trial);
                let trial = self.join(fleet).await.context("a join")?;
                trials[3].push(trial);
            }
        }
        let steps = order
            .into_iter()
            .zip(trials)
            .map(|(step, trials)| {
                let all: Vec<f64> = trials.iter().flat_map(|t| t.gaps_ms.iter().copied()).collect();
                let acks: Vec<f64> =
                    trials.iter().flat_map(|t| t.acks_ms.iter().copied()).collect();
                StepReport { step, gap_ms: summarize(&all), ack_ms: summarize(&acks), trials }
            })
            .collect();
        Ok((first_ms, steps))
    }

    fn stabilise(&self) -> Duration {
        Duration::from_millis(self.args.stabilise_ms)
    }

    /// Stops `victim` as `step` says and waits until its partitions have
    /// new owners, balanced.
    async fn stop(&self, fleet: &mut Fleet, victim: usize, step: Step) -> anyhow::Result<Trial> {
        let held = fleet.book.held_by(victim);
        let session = fleet.members[victim].session.context("no session")?;
        let started = Instant::now();
        let mut acks_ms = Vec::new();
        let since = match step {
            Step::Kill => fleet.kill(victim)?,
            Step::KillWithNotice => {
                let at = fleet.kill(victim)?;
                // The supervisor: it saw the process exit, then revokes.
                fleet.reap(victim).await?;
                revoke(self.cluster, session).await?;
                acks_ms.push((now_us() - at) as f64 / 1000.0);
                at
            }
            Step::Leave => fleet.terminate(victim)?,
            Step::Join => bail!("a join stops nobody"),
        };
        let bound = Duration::from_millis(self.args.ttl_ms) + SETTLE_BOUND;
        self.settle(fleet, bound).await?;
        let settled_ms = started.elapsed().as_secs_f64() * 1000.0;
        if step == Step::Leave {
            fleet.wait_for(SETTLE_BOUND, "the member exited", |f| f.exited(victim)).await?;
            let status = fleet.reap(victim).await?;
            if !status.success() {
                bail!(
                    "{} ended with {status} after SIGTERM\n{}",
                    fleet.name(victim),
                    fleet.tail(victim)
                );
            }
            let m = &fleet.members[victim];
            if let (Some(leaving), Some(left)) = (m.leaving_at, m.left_at) {
                acks_ms.push((left - leaving) as f64 / 1000.0);
            }
        }
        check_fencing(fleet)?;
        let moves = fleet.book.moves_since(since);
        // Its partitions, each moved once, from it; any other move is one
        // too many.
        let (mine, others): (Vec<&Move>, Vec<&Move>) =
            moves.iter().partition(|m| held.contains(&m.partition) && m.from == Some(victim));
        let moved: BTreeSet<u32> = mine.iter().map(|m| m.partition).collect();
        if moved.len() != held.len() {
            bail!("{} of {}'s {} partitions moved", moved.len(), fleet.name(victim), held.len());
        }
        let mut trial = self.trial(fleet, victim, &mine, others.len(), None, settled_ms);
        trial.acks_ms = acks_ms;
        Ok(trial)
    }

    /// Starts a new member and waits until it received its share.
    async fn join(&self, fleet: &mut Fleet) -> anyhow::Result<Trial> {
        let since = now_us();
        let started = Instant::now();
        let joiner = fleet.spawn()?;
        fleet.wait_for(JOIN_BOUND, "the new member joined", |f| f.members[joiner].ready).await?;
        self.settle(fleet, self.stabilise() + SETTLE_BOUND).await?;
        let settled_ms = started.elapsed().as_secs_f64() * 1000.0;
        check_fencing(fleet)?;
        let moves = fleet.book.moves_since(since);
        let (mine, others): (Vec<&Move>, Vec<&Move>) = moves.iter().partition(|m| m.to == joiner);
        let received = fleet.book.held_by(joiner).len();
        let mut trial = self.trial(fleet, joiner, &mine, others.len(), Some(received), settled_ms);
        trial.acks_ms = mine.iter().filter_map(|m| m.release_ms).collect();
        Ok(trial)
    }

    fn trial(
        &self,
        fleet: &Fleet,
        member: usize,
        moved: &[&Move],
        others_moved: usize,
        received: Option<usize>,
        settled_ms: f64,
    ) -> Trial {
        let counts = fleet.counts_of(&fleet.live());
        Trial {
            member: fleet.name(member),
            moved: moved.len(),
            others_moved,
            received,
            min_after: counts.iter().copied().min().unwrap_or(0),
            max_after: counts.iter().copied().max().unwrap_or(0),
            gaps_ms: moved.iter().filter_map(|m| m.gap_ms).collect(),
            acks_ms: Vec::new(),
            settled_ms,
        }
    }

    /// Waits until every partition has one live owner, balanced, and the
    /// cluster's view of the group agrees.
    async fn settle(&self, fleet: &mut Fleet, bound: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + bound;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            fleet.wait_for(left, "a balanced assignment", Fleet::balanced).await?;
            let view = self.agrees(fleet).await?;
            if view.is_none() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!("the cluster's view of the group does not agree with the members': {view:?}");
            }
            fleet.pump(SETTLE_RECHECK).await?;
        }
    }

    /// None when the cluster's group has the live members and their
    /// partitions at their epochs, none asked back; else what differs.
    async fn agrees(&self, fleet: &Fleet) -> anyhow::Result<Option<String>> {
        let g = match tenure_client::partitions::group(self.cluster, self.group).await {
            Ok(g) => g,
            // Read again until the deadline (a node at its connection cap
            // answers 503).
            Err(e) => return Ok(Some(format!("reading the group: {e}"))),
        };
        let live = fleet.live();
        let sessions: BTreeSet<u64> =
            live.iter().filter_map(|&i| fleet.members[i].session).collect();
        let members: BTreeSet<u64> = g.members.iter().map(|m| m.session).collect();
        if g.more || members != sessions {
            return Ok(Some(format!("members {members:?}, live {sessions:?}")));
        }
        if g.owners.len() != fleet.book.len() as usize {
            return Ok(Some(format!("{} owners", g.owners.len())));
        }
        for o in &g.owners {
            let hold = fleet.book.holder(o.partition);
            let ours = hold.and_then(|h| Some((fleet.members[h.member].session?, h.epoch)));
            if o.release || ours != Some((o.session, o.epoch)) {
                return Ok(Some(format!(
                    "partition {}: cluster {o:?}, members {ours:?}",
                    o.partition
                )));
            }
        }
        Ok(None)
    }
}

/// Revokes `session`, as a supervisor that saw its process exit.
async fn revoke(cluster: &Cluster, session: u64) -> anyhow::Result<()> {
    let path = format!("/v1/sessions/{session}");
    let (url, answer) =
        cluster.call(Method::DELETE, &path, None, REQUEST_TIMEOUT, Retry::Idempotent).await?;
    if !answer.status.is_success() && answer.status != StatusCode::NOT_FOUND {
        bail!("{url}: HTTP {}", answer.status);
    }
    Ok(())
}

/// Fails, with every broken rule, if two members ever worked on one
/// partition at overlapping times or an epoch did not rise.
pub(crate) fn check_fencing(fleet: &Fleet) -> anyhow::Result<()> {
    let violations = fleet.book.violations(|m| fleet.name(m));
    if violations.is_empty() {
        return Ok(());
    }
    bail!(
        "FENCING BROKEN: {} violation(s) on the members' own lines:\n{}",
        violations.len(),
        violations.join("\n")
    )
}

fn step(r: &PartitionsReport, s: Step) -> Option<&StepReport> {
    r.steps.iter().find(|x| x.step == s)
}

fn goals(r: &PartitionsReport) -> Vec<Goal> {
    let mut out = Vec::new();
    let mut p99 = |s: Step, limit: f64, what: &str| {
        if let Some(g) = step(r, s).and_then(|x| x.gap_ms) {
            out.push(Goal {
                what: format!("{what}: each partition without an owner p99"),
                target: format!("<= {limit:.0} ms"),
                measured: format!("{:.1} ms ({} partitions)", g.p99, g.count),
                met: g.p99 <= limit,
            });
        }
    };
    p99(Step::Kill, r.ttl_ms as f64 + GOAL_KILL_SLACK_MS, "kill -9 of a member");
    p99(Step::KillWithNotice, GOAL_NOTICE_MS, "kill -9 with a supervisor's death notice");
    p99(Step::Leave, GOAL_MOVE_MS, "graceful leave (SIGTERM)");
    p99(Step::Join, GOAL_MOVE_MS, "a member joins");
    if let Some(join) = step(r, Step::Join) {
        let (n, m) = (r.partitions as usize, r.members);
        let (floor, ceil) = (n / m, n.div_ceil(m));
        let fair =
            join.trials.iter().filter(|t| t.received.is_some_and(|k| (floor..=ceil).contains(&k)));
        let still = join.trials.iter().filter(|t| t.others_moved == 0);
        let (fair, still, all) = (fair.count(), still.count(), join.trials.len());
        out.push(Goal {
            what: "a joiner receives floor(N/M) or ceil(N/M), nothing else moves".to_string(),
            target: format!("{floor}..={ceil} and 0 other moves, every join"),
            measured: format!(
                "{fair} of {all} joins received their share, {still} of {all} moved nothing else"
            ),
            met: fair == all && still == all,
        });
    }
    out
}

fn print_text(r: &PartitionsReport) {
    println!(
        "partitions: {} partitions, {} member processes, session TTL {} ms, stabilisation {} ms; \
         tenure {} nodes (node {} leading; the members ask node 0 first), {}, {}, heartbeat {} \
         ms, election timeout {} ms",
        r.partitions,
        r.members,
        r.ttl_ms,
        r.stabilise_ms,
        r.nodes,
        r.leader,
        r.protocol,
        if r.tls { "TLS" } else { "no TLS" },
        r.heartbeat_ms,
        r.election_timeout_ms
    );
    println!(
        "first balanced assignment {:.0} ms after starting the members (the stabilisation included)",
        r.first_assignment_ms
    );
    println!(
        "{:<24} {:>6} {:>6} {:>6} {:>8} {:>8} {:>8} {:>8} {:>13} {:>8} {:>8}",
        "STEP",
        "TRIALS",
        "MOVED",
        "OTHERS",
        "P50 MS",
        "P90 MS",
        "P99 MS",
        "MAX MS",
        "ACK P50/P99",
        "MIN-MAX",
        "SETTLED"
    );
    for s in &r.steps {
        let moved: usize = s.trials.iter().map(|t| t.moved).sum();
        let others: usize = s.trials.iter().map(|t| t.others_moved).sum();
        let min = s.trials.iter().map(|t| t.min_after).min().unwrap_or(0);
        let max = s.trials.iter().map(|t| t.max_after).max().unwrap_or(0);
        let settled = s.trials.iter().map(|t| t.settled_ms).fold(0.0, f64::max);
        let f = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
        let ack = s.ack_ms.map_or("-".to_string(), |a| format!("{:.1}/{:.1}", a.p50, a.p99));
        println!(
            "{:<24} {:>6} {:>6} {:>6} {:>8} {:>8} {:>8} {:>8} {:>13} {:>8} {:>8.0}",
            s.step.label(),
            s.trials.len(),
            moved,
            others,
            f(s.gap_ms.map(|g| g.p50)),
            f(s.gap_ms.map(|g| g.p90)),
            f(s.gap_ms.map(|g| g.p99)),
            f(s.gap_ms.map(|g| g.max)),
            ack,
            format!("{min}-{max}"),
            settled
        );
    }
    println!(
        "(P50..MAX: each moved partition's time without an owner; MOVED: partitions that changed \
         owner over all trials; OTHERS: those that should not have; ACK: the stop's own request, \
         ms: the kill, reap and revoke (death notice), the leave (SIGTERM), each release (join); \
         MIN-MAX: partitions per member afterwards; SETTLED: the slowest trial to a balanced \
         assignment, ms)"
    );
    if let Some(join) = step(r, Step::Join) {
        let received: Vec<String> =
            join.trials.iter().filter_map(|t| t.received).map(|k| k.to_string()).collect();
        println!("joiners received: {}", received.join(", "));
    }
    println!(
        "fencing: {} grants worked under, {} violations (no two members at once on a partition, \
         epochs rising); {} releases; {} retried member errors",
        r.fencing.grants,
        r.fencing.violations.len(),
        r.releases,
        r.member_errors.len()
    );
    if let Some(e) = &r.etcd {
        super::partitions_etcd::print_text(e);
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
    for c in &r.cited {
        println!("goal (measured elsewhere): {c}");
    }
}
