//! `tenure bench soak`: a healthy cluster while every core is kept busy by a
//! CPU burner (the hidden `tenure burn`, a child process), watched through
//! `/v1/watch` on every node; counts leader changes, which should be zero.

use super::failover::{wait_stable, Timing};
use super::fetch::metric_value;
use super::system::{keep_logs, System, Tenure};
use anyhow::{bail, Context};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tenure_api::LeadershipBody;
use tenure_launch::{temp_dir, Proc};
use tokio::sync::mpsc;
use tokio::time::{sleep, Instant};

/// Longest soak accepted, in minutes.
const MAX_MINUTES: f64 = 24.0 * 60.0;
/// Events buffered between the watch streams and the tally.
const EVENT_QUEUE: usize = 4096;
/// Pause before a broken watch stream is reopened.
const WATCH_RETRY: Duration = Duration::from_millis(20);
/// How often the progress bar is refreshed.
const PROGRESS_TICK: Duration = Duration::from_millis(500);
/// How often the burner checks that its parent is still alive.
const BURN_PARENT_CHECK: Duration = Duration::from_millis(500);
/// The burner exits by itself this long after the soak should have ended.
const BURN_GRACE_S: u64 = 60;
/// Timeout of a final `/metrics` scrape.
const METRICS_TIMEOUT: Duration = Duration::from_secs(2);
/// Most role-change log lines printed after a soak with leader changes.
const ROLE_CHANGE_LINES: usize = 60;
/// Exit code after Ctrl-C (128 + SIGINT).
const EXIT_INTERRUPTED: u8 = 130;

/// Flags of `tenure bench soak`.
#[derive(Args, Debug)]
#[command(after_help = "\
Examples:
  tenure bench soak --minutes 30 --keep-logs soak-logs
  tenure bench soak --minutes 2 --burn-threads 0    # the same cluster without CPU load")]
pub struct SoakArgs {
    /// How long to run, in minutes (fractions allowed).
    #[arg(long, default_value_t = 10.0, value_name = "M")]
    minutes: f64,
    /// Nodes in the cluster.
    #[arg(long, default_value_t = 3, value_name = "N")]
    nodes: usize,
    /// Heartbeat interval, in milliseconds.
    #[arg(long, default_value_t = 10, value_name = "MS")]
    heartbeat_ms: u64,
    /// Election timeout, in milliseconds.
    #[arg(long, default_value_t = 100, value_name = "MS")]
    election_timeout_ms: u64,
    /// Election protocol of the servers: raft, ranked or paxos.
    #[arg(long, default_value = "raft", value_name = "NAME")]
    protocol: tenure_core::ProtocolKind,
    /// Spinning threads of the CPU burner [default: one per core]; 0 runs without load.
    #[arg(long, value_name = "N")]
    burn_threads: Option<usize>,
    /// Copy every server's log into this directory before cleaning up.
    #[arg(long, value_name = "DIR")]
    keep_logs: Option<PathBuf>,
    /// Print the results as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// Run the servers without TLS (by default: mutual TLS and HTTPS, with
    /// certificates made for the run).
    #[arg(long)]
    insecure_no_tls: bool,
}

/// Flags of the hidden `tenure burn`.
#[derive(Args, Debug)]
pub struct BurnArgs {
    /// Spinning threads.
    #[arg(long)]
    threads: usize,
    /// Exit after this many seconds at the latest.
    #[arg(long)]
    max_seconds: u64,
}

/// `tenure burn`: spins `threads` threads at normal priority until
/// `max_seconds` pass or its parent goes away.
pub fn burn(args: BurnArgs) -> ExitCode {
    let parent = std::os::unix::process::parent_id();
    for _ in 0..args.threads {
        std::thread::spawn(|| {
            let mut x = 0u64;
            loop {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
        });
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(args.max_seconds);
    // Reparented (the bench died without cleaning up) or out of time: stop.
    while std::os::unix::process::parent_id() == parent && std::time::Instant::now() < deadline {
        std::thread::sleep(BURN_PARENT_CHECK);
    }
    ExitCode::SUCCESS
}

/// The soak's findings.
#[derive(Debug, Default, Serialize, PartialEq)]
pub struct Tally {
    /// Changes of (leader, term) after the first leader seen.
    pub leader_changes: u64,
    /// First term seen with a leader.
    pub first_term: Option<u64>,
    /// Last term seen.
    pub last_term: u64,
    /// Longest time no node said it leads, ms.
    pub longest_leaderless_ms: f64,
    /// Leadership events received.
    pub events: u64,
    /// Events lost because the queue was full.
    pub dropped_events: u64,
}

/// Folds each node's latest watch event into the tally.
struct Tracker {
    latest: Vec<Option<LeadershipBody>>,
    current: Option<(u64, u64)>,
    leaderless_since: Option<Instant>,
    tally: Tally,
}

impl Tracker {
    fn new(nodes: usize) -> Self {
        Tracker {
            latest: vec![None; nodes],
            current: None,
            leaderless_since: None,
            tally: Tally::default(),
        }
    }

    /// The leader of the highest term among nodes that say they lead.
    fn claimed(&self) -> Option<(u64, u64)> {
        self.latest
            .iter()
            .enumerate()
            .filter_map(|(i, e)| {
                e.as_ref().filter(|e| e.role == "leader").map(|e| (i as u64 + 1, e.term))
            })
            .max_by_key(|&(_, term)| term)
    }

    fn observe(&mut self, node: usize, event: LeadershipBody, at: Instant) {
        self.tally.events += 1;
        self.tally.last_term = self.tally.last_term.max(event.term);
        self.latest[node] = Some(event);
        match self.claimed() {
            Some(c) => {
                if let Some(since) = self.leaderless_since.take() {
                    let gap = (at - since).as_secs_f64() * 1000.0;
                    self.tally.longest_leaderless_ms = self.tally.longest_leaderless_ms.max(gap);
                }
                if self.current.is_some_and(|cur| cur != c) {
                    self.tally.leader_changes += 1;
                }
                self.tally.first_term.get_or_insert(c.1);
                self.current = Some(c);
            }
            None => {
                if self.current.is_some() && self.leaderless_since.is_none() {
                    self.leaderless_since = Some(at);
                }
            }
        }
    }
}

/// The soak's report.
#[derive(Debug, Serialize)]
struct SoakReport {
    minutes: f64,
    nodes: usize,
    heartbeat_ms: u64,
    election_timeout_ms: u64,
    burn_threads: usize,
    tally: Tally,
    /// Sum over nodes of `tenure_leader_changes_total` gained during the soak.
    metric_leader_changes: Option<u64>,
    /// Sum over nodes of `tenure_elections_started_total` gained during the soak.
    metric_elections: Option<u64>,
}

async fn counter_sum(tenure: &Tenure, nodes: usize, name: &str) -> Option<u64> {
    let mut sum = 0;
    for i in 0..nodes {
        let text = tenure
            .fetch()
            .get_text(&format!("{}/metrics", tenure.endpoint(i)), METRICS_TIMEOUT)
            .await
            .ok()?;
        sum += metric_value(&text, name)? as u64;
    }
    Some(sum)
}

/// The cluster's leader-change and election counters, summed over nodes.
#[derive(Debug, Clone, Copy)]
struct Counters {
    leader_changes: Option<u64>,
    elections: Option<u64>,
}

impl Counters {
    async fn scrape(tenure: &Tenure, nodes: usize) -> Self {
        Counters {
            leader_changes: counter_sum(tenure, nodes, "tenure_leader_changes_total").await,
            elections: counter_sum(tenure, nodes, "tenure_elections_started_total").await,
        }
    }

    /// What each counter gained since `before` (when both were read).
    fn since(self, before: Counters) -> Counters {
        let gained = |b: Option<u64>, a: Option<u64>| b.zip(a).map(|(b, a)| a.saturating_sub(b));
        Counters {
            leader_changes: gained(before.leader_changes, self.leader_changes),
            elections: gained(before.elections, self.elections),
        }
    }
}

/// Runs `tenure bench soak`.
pub async fn run(args: SoakArgs) -> anyhow::Result<ExitCode> {
    if !(args.minutes > 0.0 && args.minutes <= MAX_MINUTES) {
        bail!("--minutes must be above 0 and at most {MAX_MINUTES}");
    }
    let threads = match args.burn_threads {
        Some(n) => n,
        None => std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
    };
    let duration = Duration::from_secs_f64(args.minutes * 60.0);
    let timing = Timing {
        heartbeat: Duration::from_millis(args.heartbeat_ms),
        election_timeout: Duration::from_millis(args.election_timeout_ms),
    };
    let tenure = Tenure::start_all(
        args.nodes,
        args.heartbeat_ms,
        args.election_timeout_ms,
        args.protocol,
        !args.insecure_no_tls,
    )?;
    let all: Vec<usize> = (0..args.nodes).collect();
    wait_stable(&tenure, &all, timing).await.context("the cluster did not elect a leader")?;
    let before = Counters::scrape(&tenure, args.nodes).await;

    // The burner: a child process, killed on drop like the servers.
    let burn_dir = temp_dir("tenure-bench-burn-")?;
    let mut burner = Proc::new("cpu burner".into(), burn_dir.path().join("burn.log"));
    if threads > 0 {
        let mut c = Command::new(std::env::current_exe()?);
        c.arg("burn")
            .args(["--threads", &threads.to_string()])
            .args(["--max-seconds", &(duration.as_secs() + BURN_GRACE_S).to_string()]);
        burner.spawn(c)?;
    }
    let watch = Watch::start(&tenure, args.nodes);
    let tracker = watch_for(watch.events, args.nodes, duration).await;
    drop(burner);
    drop(watch.tasks);
    let Some(tracker) = tracker else {
        eprintln!("interrupted; stopping the cluster");
        return Ok(ExitCode::from(EXIT_INTERRUPTED));
    };
    let gained = Counters::scrape(&tenure, args.nodes).await.since(before);
    let mut tally = tracker.tally;
    tally.dropped_events = watch.dropped.load(Ordering::Relaxed);
    let report = SoakReport {
        minutes: args.minutes,
        nodes: args.nodes,
        heartbeat_ms: args.heartbeat_ms,
        election_timeout_ms: args.election_timeout_ms,
        burn_threads: threads,
        tally,
        metric_leader_changes: gained.leader_changes,
        metric_elections: gained.elections,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_text(&report, &tenure);
    }
    if let Some(dir) = &args.keep_logs {
        keep_logs(&tenure, dir)?;
    }
    drop(tenure);
    Ok(ExitCode::SUCCESS)
}

/// One `/v1/watch` follower per node, feeding one queue.
struct Watch {
    /// (node index, event, when it arrived).
    events: mpsc::Receiver<(usize, LeadershipBody, Instant)>,
    /// Events lost because the queue was full.
    dropped: Arc<AtomicU64>,
    /// The followers (stopped when dropped).
    tasks: Vec<AbortOnDrop>,
}

impl Watch {
    /// Follows every node's watch stream, reopening a broken one after
    /// [`WATCH_RETRY`].
    fn start(tenure: &Tenure, nodes: usize) -> Self {
        let (tx, events) = mpsc::channel(EVENT_QUEUE);
        let dropped = Arc::new(AtomicU64::new(0));
        let mut tasks = Vec::new();
        for i in 0..nodes {
            let (tx, endpoint, dropped) =
                (tx.clone(), tenure.endpoint(i).to_string(), dropped.clone());
            let client = tenure.client().clone();
            tasks.push(AbortOnDrop(tokio::spawn(async move {
                let url = format!("{endpoint}/v1/watch");
                loop {
                    if let Ok(mut stream) = client.event_stream(&url, None).await {
                        while let Ok(Some(e)) = stream.next().await {
                            let Ok(event) = serde_json::from_str::<LeadershipBody>(&e.data) else {
                                continue;
                            };
                            if tx.try_send((i, event, Instant::now())).is_err() {
                                dropped.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                    sleep(WATCH_RETRY).await;
                }
            })));
        }
        Watch { events, dropped, tasks }
    }
}

/// Tallies `events` for `duration` with a progress bar; `None` on Ctrl-C.
async fn watch_for(
    mut events: mpsc::Receiver<(usize, LeadershipBody, Instant)>,
    nodes: usize,
    duration: Duration,
) -> Option<Tracker> {
    let bar = ProgressBar::new(duration.as_secs().max(1));
    bar.set_style(
        ProgressStyle::with_template("soak [{bar:30}] {pos}/{len} s {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    let mut tracker = Tracker::new(nodes);
    let started = Instant::now();
    let end = started + duration;
    let mut tick = tokio::time::interval(PROGRESS_TICK);
    let interrupted = loop {
        tokio::select! {
            Some((i, e, at)) = events.recv() => tracker.observe(i, e, at),
            _ = tick.tick() => {
                bar.set_position(started.elapsed().as_secs());
                bar.set_message(format!(
                    "leader changes {}, term {}, longest gap {:.0} ms",
                    tracker.tally.leader_changes, tracker.tally.last_term, tracker.tally.longest_leaderless_ms
                ));
            }
            _ = tokio::time::sleep_until(end) => break false,
            _ = tokio::signal::ctrl_c() => break true,
        }
    };
    bar.finish_and_clear();
    (!interrupted).then_some(tracker)
}

/// The soak's findings as text, with the servers' role changes when the
/// leader changed.
fn print_text(report: &SoakReport, tenure: &Tenure) {
    let t = &report.tally;
    println!(
        "soak: {} min, {} nodes, heartbeat {} ms, election timeout {} ms, {} burner threads",
        report.minutes,
        report.nodes,
        report.heartbeat_ms,
        report.election_timeout_ms,
        report.burn_threads
    );
    println!(
        "leader changes {} (goal 0: {}), terms {}..{}, longest leaderless gap {:.1} ms, \
         {} events ({} dropped); /metrics: leader changes seen {:?} (summed over nodes), elections started {:?}",
        t.leader_changes,
        if t.leader_changes == 0 { "MET" } else { "MISSED" },
        t.first_term.unwrap_or(0),
        t.last_term,
        t.longest_leaderless_ms,
        t.events,
        t.dropped_events,
        report.metric_leader_changes,
        report.metric_elections
    );
    if t.leader_changes > 0 {
        println!("role changes after the first election (from the server logs):");
        for line in role_changes(tenure) {
            println!("  {line}");
        }
    }
}

/// Every server's "role changed" / "leader changed" log lines after the
/// first term, in time order (log lines start with an RFC 3339 timestamp).
fn role_changes(tenure: &Tenure) -> Vec<String> {
    let mut lines: Vec<String> = tenure
        .log_files()
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .flat_map(|text| text.lines().map(str::to_string).collect::<Vec<_>>())
        .filter(|l| {
            (l.contains("role changed") || l.contains("leader changed"))
                && !l.contains("term=0")
                && !l.contains("term=1 ")
                && !l.ends_with("term=1")
        })
        .collect();
    lines.sort();
    lines.truncate(ROLE_CHANGE_LINES);
    lines
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(leader: Option<u64>, term: u64, role: &str) -> LeadershipBody {
        LeadershipBody { leader, term, fencing_token: leader.map(|_| term), role: role.into() }
    }

    #[test]
    fn a_stable_leader_is_no_change_and_a_failover_is_one_with_its_gap() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let mut t = Tracker::new(3);
        t.observe(0, ev(Some(1), 2, "leader"), ms(0));
        t.observe(1, ev(Some(1), 2, "follower"), ms(1));
        t.observe(2, ev(Some(1), 2, "follower"), ms(1));
        // Repeated views of the same leader are not changes.
        t.observe(1, ev(Some(1), 2, "follower"), ms(5));
        assert_eq!(t.tally.leader_changes, 0);
        // Node 1 loses leadership; 40 ms later node 2 leads term 3.
        t.observe(0, ev(None, 2, "follower"), ms(100));
        t.observe(1, ev(None, 3, "candidate"), ms(120));
        t.observe(1, ev(Some(2), 3, "leader"), ms(140));
        assert_eq!(t.tally.leader_changes, 1);
        assert_eq!(t.tally.first_term, Some(2));
        assert_eq!(t.tally.last_term, 3);
        assert!((t.tally.longest_leaderless_ms - 40.0).abs() < 1e-9);
        // A deposed leader that still says it leads a lower term does not hide the new one.
        t.observe(0, ev(Some(1), 2, "leader"), ms(150));
        assert_eq!(t.tally.leader_changes, 1);
    }
}
