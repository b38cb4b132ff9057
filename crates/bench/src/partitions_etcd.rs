//! `tenure bench partitions --compare etcd`: the way partitions are shared
//! without groups, on a local 3-member etcd: one election per partition,
//! every member campaigning in every election with one lease (Go's
//! `concurrency.Session` shares one lease between its elections), through
//! tenure's etcd store (the member processes' `--etcd` mode,
//! `partitions_member`), [`CAMPAIGNS_IN_FLIGHT`] campaigns at a time. A
//! member owns the partitions whose elections it leads.
//!
//! Each trial starts a fresh etcd cluster (see [`measure`]) and
//! `--members` members, all at once (a deployment), waits until every member campaigned in
//! every election and every election has a leader, then SIGKILLs the
//! member that owns the most partitions and times each of its partitions
//! from the kill to its new owner's `assigned` line. Then a new member
//! starts and campaigns everywhere: what it receives shows whether
//! anything rebalances. Then the members and the cluster are stopped.
//! Balance is the most partitions a member owns minus the fewest.

use super::cluster_args::ClusterArgs;
use super::failover::wait_stable;
use super::partitions::check_fencing;
use super::partitions_fleet::Fleet;
use super::stats::{summarize, Summary};
use super::system::System;
use serde::Serialize;
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::time::Duration;
use tokio::time::Instant;

/// How long the members may take to campaign everywhere and see a leader
/// of every election.
const CAMPAIGN_BOUND: Duration = Duration::from_secs(300);
/// How long re-owning may take beyond the TTL.
const REOWN_BOUND: Duration = Duration::from_secs(30);
/// How long the bench watches a joiner after it campaigned everywhere.
const JOINER_WATCH: Duration = Duration::from_secs(2);
/// Campaigns each member has in flight at once. With 64 each (and Go's
/// recipe would start all 1,000 at once), the burst of 10,000 campaigns and
/// their waits kept etcd (three members on the bench's 2-core machine) from
/// answering members' lease renewals before their sessions' deadlines in
/// most trials; with 8 each, every member campaigned in all 1,000 within
/// about 15 s and kept its session.
const CAMPAIGNS_IN_FLIGHT: usize = 8;

/// One trial on etcd.
#[derive(Debug, Serialize)]
pub(crate) struct EtcdTrial {
    /// From starting the members to every election led, ms.
    campaigned_ms: f64,
    /// Partitions per member before the kill.
    counts_before: Vec<usize>,
    /// The most minus the fewest, before.
    balance_before: usize,
    /// The member killed (the one owning the most).
    killed: String,
    /// What it owned.
    killed_owned: usize,
    /// Partitions that changed owner but were not the killed member's.
    others_moved: usize,
    /// Each of its partitions, from the kill to its new owner's `assigned`, ms.
    reown_ms: Vec<f64>,
    /// Partitions per surviving member after.
    counts_after: Vec<usize>,
    /// The most minus the fewest, after.
    balance_after: usize,
    /// What a member that joined then received (within the watch).
    joiner_received: usize,
}

/// The etcd side of the run.
#[derive(Debug, Serialize)]
pub(crate) struct EtcdReport {
    /// How the partitions are held there.
    how: String,
    partitions: u32,
    /// tenure's partitions, when etcd ran fewer elections per member.
    scaled_from: Option<u32>,
    members: usize,
    ttl_ms: u64,
    /// Re-owning times over every trial, ms.
    reown_ms: Option<Summary>,
    trials: Vec<EtcdTrial>,
    /// Trials left out because a member lost its session: etcd did not
    /// answer its renewals before its deadline (see [`CAMPAIGNS_IN_FLIGHT`]).
    failed: Vec<String>,
}

/// Runs `trials` trials of `members` members over `partitions` elections,
/// each on a fresh etcd cluster with `cluster`'s size and timings
/// (`tenure_partitions`: what tenure's group had).
///
/// A fresh cluster each: on a cluster that had held one trial's campaigns
/// (10,000 keys, their leases revoked at its end), the next trial's
/// members lost their sessions (their renewals unanswered before their
/// deadlines) while they campaigned; by hand, three rounds of 10 members
/// x 1,000 elections on one cluster: the first clean, the second with 7
/// of 10 sessions lost.
pub(crate) async fn measure(
    cluster: &ClusterArgs,
    partitions: u32,
    tenure_partitions: u32,
    members: usize,
    ttl_ms: u64,
    trials: usize,
) -> anyhow::Result<EtcdReport> {
    let mut out = Vec::new();
    let mut failed = Vec::new();
    for t in 0..trials {
        let etcd = cluster.start_etcd(false).await?;
        let nodes: Vec<usize> = (0..etcd.len()).collect();
        wait_stable(&etcd, &nodes, cluster.timing()).await?;
        let hosts: Vec<String> = nodes
            .iter()
            .map(|&i| etcd.client_url(i).trim_start_matches("http://").to_string())
            .collect();
        let url = format!("etcd://{}", hosts.join(","));
        let prefix = format!("bench-{}-t{t}", std::process::id());
        let (n, ttl) = (partitions.to_string(), ttl_ms.to_string());
        let in_flight = CAMPAIGNS_IN_FLIGHT.to_string();
        let args: Vec<OsString> = [
            "--etcd",
            url.as_str(),
            "--group",
            prefix.as_str(),
            "--partitions",
            n.as_str(),
            "--ttl-ms",
            ttl.as_str(),
            "--campaigns-in-flight",
            in_flight.as_str(),
        ]
        .map(OsString::from)
        .into();
        let mut fleet = Fleet::new(args, Vec::new(), partitions)?;
        match one(&mut fleet, members, ttl_ms).await {
            Ok(trial) => out.push(trial),
            // A measurement of etcd, not a failure of the bench: say so and
            // go on with fresh members.
            Err(_) if !fleet.lost.is_empty() => {
                let (name, why) = &fleet.lost[0];
                let note = format!("trial {t}: member {name} lost its session ({why})");
                eprintln!("etcd {note}; the trial is left out");
                failed.push(note);
            }
            Err(e) => {
                return Err(e.context(format!(
                    "etcd trial {t}; members' files in {}; etcd logs:\n{}",
                    fleet.dir().display(),
                    etcd.log_tails()
                )))
            }
        }
    }
    let all: Vec<f64> = out.iter().flat_map(|t| t.reown_ms.iter().copied()).collect();
    Ok(EtcdReport {
        how: "one etcd election per partition, every member campaigning in every one with one \
              lease, through tenure's etcd store (the Store of `tenure elect --store etcd://`)"
            .to_string(),
        partitions,
        scaled_from: (partitions != tenure_partitions).then_some(tenure_partitions),
        members,
        ttl_ms,
        reown_ms: summarize(&all),
        trials: out,
        failed,
    })
}

/// One trial with a fresh fleet.
async fn one(fleet: &mut Fleet, members: usize, ttl_ms: u64) -> anyhow::Result<EtcdTrial> {
    let started = Instant::now();
    for _ in 0..members {
        fleet.spawn()?;
    }
    let all_led = |f: &Fleet| f.live().len() == members && f.book.fully_held();
    fleet.wait_for(CAMPAIGN_BOUND, "every election led", all_led).await?;
    let campaigned_ms = started.elapsed().as_secs_f64() * 1000.0;
    let live = fleet.live();
    let counts_before = fleet.counts_of(&live);
    let most = counts_before.iter().copied().max().unwrap_or(0);
    let victim = live[counts_before.iter().position(|&c| c == most).unwrap_or(0)];
    let held: BTreeSet<u32> = fleet.book.held_by(victim).into_iter().collect();
    let since = fleet.kill(victim)?;
    let bound = Duration::from_millis(ttl_ms) + REOWN_BOUND;
    fleet
        .wait_for(bound, "the killed member's partitions led again", |f| f.book.fully_held())
        .await?;
    check_fencing(fleet)?;
    let moves = fleet.book.moves_since(since);
    let reown_ms: Vec<f64> =
        moves.iter().filter(|m| held.contains(&m.partition)).filter_map(|m| m.gap_ms).collect();
    let others_moved = moves.iter().filter(|m| !held.contains(&m.partition)).count();
    let survivors = fleet.live();
    let counts_after = fleet.counts_of(&survivors);

    let joiner = fleet.spawn()?;
    fleet.wait_for(CAMPAIGN_BOUND, "the joiner campaigned", |f| f.members[joiner].ready).await?;
    fleet.pump(JOINER_WATCH).await?;
    let joiner_received = fleet.book.held_by(joiner).len();

    check_fencing(fleet)?;
    let spread = |c: &[usize]| c.iter().max().unwrap_or(&0) - c.iter().min().unwrap_or(&0);
    Ok(EtcdTrial {
        campaigned_ms,
        balance_before: spread(&counts_before),
        counts_before,
        killed: fleet.name(victim),
        killed_owned: held.len(),
        others_moved,
        reown_ms,
        balance_after: spread(&counts_after),
        counts_after,
        joiner_received,
    })
}

/// The etcd lines of the text report.
pub(crate) fn print_text(r: &EtcdReport) {
    println!(
        "etcd 3.4, {} partitions, {} member processes, TTL {} ms: {}",
        r.partitions, r.members, r.ttl_ms, r.how
    );
    if let Some(n) = r.scaled_from {
        println!(
            "etcd: {} elections per member, not {n} as tenure's group (--etcd-partitions)",
            r.partitions
        );
    }
    println!(
        "{:<5} {:>10} {:>16} {:>6} {:>5} {:>22} {:>16} {:>6}",
        "TRIAL",
        "ALL LED MS",
        "BALANCE BEFORE",
        "KILLED",
        "OWNED",
        "RE-OWN P50/P99/MAX MS",
        "BALANCE AFTER",
        "JOINER"
    );
    for (t, x) in r.trials.iter().enumerate() {
        let s = summarize(&x.reown_ms);
        let s = s.map_or("-".to_string(), |s| format!("{:.0}/{:.0}/{:.0}", s.p50, s.p99, s.max));
        let range = |c: &[usize]| {
            format!("{}-{}", c.iter().min().unwrap_or(&0), c.iter().max().unwrap_or(&0))
        };
        println!(
            "{:<5} {:>10.0} {:>16} {:>6} {:>5} {:>22} {:>16} {:>6}",
            t,
            x.campaigned_ms,
            format!("{} ({})", x.balance_before, range(&x.counts_before)),
            x.killed,
            x.killed_owned,
            s,
            format!("{} ({})", x.balance_after, range(&x.counts_after)),
            x.joiner_received
        );
    }
    for f in &r.failed {
        println!("etcd {f}: left out");
    }
    if let Some(s) = r.reown_ms {
        println!(
            "etcd: the killed member's partitions re-owned min {:.0} ms, p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms \
             ({} partitions); BALANCE: most minus fewest partitions per member (fewest-most); \
             JOINER: what a new member received",
            s.min, s.p50, s.p99, s.max, s.count
        );
    }
}
