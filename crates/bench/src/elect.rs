//! `tenure bench elect`: how fast an application election hands over, timed
//! the way a user sees it, side by side with `etcdctl elect`.
//!
//! Each trial uses a fresh election name and two real candidate processes
//! of the stock CLI (`tenure elect NAME`, or `etcdctl elect NAME VALUE`):
//! the first is elected, the second joins the queue (the bench waits until
//! the store shows both candidates), then the first is stopped and the
//! clock runs from the signal until the second prints that it was elected.
//!
//! * **graceful**: SIGTERM; both CLIs resign on it. Goal: tenure's p99 at
//!   most half of etcd's.
//! * **crash** (tenure only): SIGKILL; nobody resigns, the session must
//!   expire on the tenure leader's clock. Goal: p99 at most the TTL plus
//!   50 ms. The crash trials kill at extra delays between 0 and half a TTL
//!   ([`kill_phase`]), so that the kills land all over the clients'
//!   renewal cycles. (`etcdctl elect` 3.4 has a fixed 60 s
//!   session TTL, so its figure is that TTL, not measured.)
//!
//! With `--store etcd` or `--store zk`, the election is held in a local
//! etcd cluster or ZooKeeper ensemble instead (docs/STORES.md): `tenure
//! elect --store URL` is measured side by side with the stock client of
//! that store, at the same TTL: `etcdctl elect` (graceful only: its 60 s
//! session TTL is fixed) and kazoo's Election recipe for ZooKeeper
//! (Python, `--python`; graceful and crash, its session timeout = the TTL).
//!
//! Then, on tenure, how long an `observe` stream takes to tell a change
//! (a proclaim, a handover, the last candidate leaving, a claim), on the
//! tenure leader and on a follower ([`super::elect_observe`]). Goal: p99
//! under 5 ms on loopback for both. A missed, extra or reordered event
//! fails the bench.

use super::elect_observe::{ObserveReport, MAX_OBSERVE_TRIALS, OBSERVE_GOAL_MS};
use super::etcd::Etcd;
use super::failover::wait_stable;
use super::fetch::Fetch;
use super::stats::{summarize, Summary};
use super::system::{System, Tenure};
use super::zookeeper::ZooKeeper;
use anyhow::{anyhow, bail, Context};
use base64::Engine;
use clap::Args;
use hyper::Method;
use serde::Serialize;
use std::path::PathBuf;
use std::process::{ExitCode, Stdio};
use std::time::Duration;
use tenure_client::ClientOptions;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// Most trials of one kind.
const MAX_TRIALS: usize = 1_000;
/// Untimed handovers of each contender before the measured ones.
const WARMUP_HANDOVERS: usize = 3;
/// Longest `--queued-ms`.
const MAX_QUEUED_MS: u64 = 60_000;
/// The longest a candidate may take to be elected (first) or queued (second).
const ELECTED_BOUND: Duration = Duration::from_secs(20);
/// How often the store is asked whether the second candidate is queued.
const QUEUE_POLL: Duration = Duration::from_millis(5);
/// Timeout of one such request.
const QUEUE_REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// Lines of a candidate's output kept for the error message when it fails.
const KEPT_LINES: usize = 20;
/// The crash goal above the TTL, ms.
const CRASH_SLACK_MS: f64 = 50.0;
/// etcdctl 3.4's session TTL (`concurrency.NewSession`'s default), which
/// `etcdctl elect` does not let one change.
const ETCDCTL_TTL_MS: f64 = 60_000.0;
/// kazoo's Election recipe as a candidate process (see the script).
const KAZOO_SCRIPT: &str = include_str!("kazoo_elect.py");
/// Environment variable naming the Python with kazoo (`--python`).
pub const PYTHON_ENV: &str = "TENURE_BENCH_PYTHON";
/// The znode under which kazoo's elections are held.
const KAZOO_ROOT: &str = "/bench-kazoo";

/// Where the benchmarked elections are held.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BenchStore {
    /// A local tenure cluster (and, with --compare etcd, `etcdctl elect` on etcd).
    Tenure,
    /// A local etcd cluster: `tenure elect --store etcd://` and `etcdctl elect`.
    Etcd,
    /// A local ZooKeeper ensemble: `tenure elect --store zk://` and kazoo's Election.
    Zk,
}

/// Flags of `tenure bench elect`.
#[derive(Args, Debug)]
#[command(after_help = "\
Examples:
  tenure bench elect --compare etcd
  tenure bench elect --store zk --python .venv/bin/python    # kazoo installed there
  tenure bench elect --queued-ms 300 --observe-trials 0 --json")]
pub struct ElectArgs {
    #[command(flatten)]
    cluster: super::cluster_args::ClusterArgs,
    /// Graceful handovers to measure (per system).
    #[arg(long, default_value_t = 20, value_name = "N")]
    trials: usize,
    /// Handovers after SIGKILL of the elected `tenure elect` (each waits out a TTL).
    #[arg(long, default_value_t = 5, value_name = "N")]
    crash_trials: usize,
    /// Session TTL of the `tenure elect` candidates, in milliseconds.
    #[arg(long, default_value_t = 2000, value_name = "MS")]
    ttl_ms: u64,
    /// How long the second candidate waits in the queue before the first is stopped, in
    /// milliseconds: 0 (the default) stops it as soon as the second is queued (a rolling
    /// restart: the new process queues, the old one leaves); a few hundred ms times a
    /// successor that has settled into its wait.
    #[arg(long, default_value_t = 0, value_name = "MS")]
    queued_ms: u64,
    /// Changes to an observed election (proclaims, handovers, the last
    /// candidate leaving, claims), each timed to its event at an observer
    /// on the leader and one on a follower (0: none).
    #[arg(long, default_value_t = 200, value_name = "N")]
    observe_trials: usize,
    /// Where the elections are held: tenure, etcd (a local etcd cluster, with the
    /// same timings; the TTL must be whole seconds of at least 1.5 election timeouts)
    /// or zk (a local ZooKeeper ensemble). Observe trials run on tenure only.
    #[arg(long, value_enum, default_value = "tenure")]
    store: BenchStore,
    /// The Python that runs kazoo's Election recipe for --store zk (needs `pip install
    /// kazoo`).
    #[arg(long, env = PYTHON_ENV, default_value = "python3", value_name = "PATH")]
    python: PathBuf,
    /// Print the results as JSON on stdout.
    #[arg(long)]
    json: bool,
}

/// How a candidate is stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Stop {
    /// SIGTERM: the CLI resigns.
    Graceful,
    /// SIGKILL: the session must expire.
    Crash,
}

/// One system's results.
#[derive(Debug, Serialize)]
struct SystemReport {
    system: String,
    /// Signal to the successor's "elected" line, ms.
    graceful_ms: Option<Summary>,
    crash_ms: Option<Summary>,
    /// Every trial's figure, in the order run (JSON only): where a tail
    /// comes from, and whether it comes in streaks.
    graceful_samples_ms: Vec<f64>,
    crash_samples_ms: Vec<f64>,
}

#[derive(Debug, Serialize)]
struct ElectReport {
    nodes: usize,
    protocol: tenure_core::ProtocolKind,
    tls: bool,
    ttl_ms: u64,
    /// How long the successor had been queued when its predecessor was stopped.
    queued_ms: u64,
    store: BenchStore,
    systems: Vec<SystemReport>,
    /// tenure's observe-event latencies (None with `--observe-trials 0`).
    observe: Option<ObserveReport>,
}

/// How to run one system's stock election CLI and read its store.
enum Cli {
    Tenure {
        endpoints: String,
        ca: Option<PathBuf>,
        token: String,
        ttl_ms: u64,
        api: String,
    },
    Etcd {
        endpoints: String,
        gateway: String,
    },
    /// `tenure elect --store URL` (etcd or ZooKeeper).
    Store {
        url: String,
        ttl_ms: u64,
    },
    /// kazoo's Election recipe (the script) on ZooKeeper.
    Kazoo {
        python: PathBuf,
        script: PathBuf,
        hosts: String,
        ttl_ms: u64,
    },
}

impl Cli {
    fn command(&self, name: &str, value: &str) -> anyhow::Result<Command> {
        let mut cmd = match self {
            Cli::Tenure { endpoints, ca, token, ttl_ms, .. } => {
                let exe = std::env::current_exe().context("cannot find the tenure binary")?;
                let mut cmd = Command::new(exe);
                cmd.args(["elect", name, "--value", value, "--endpoints", endpoints])
                    .arg(format!("--ttl-ms={ttl_ms}"))
                    .env(tenure_client::TOKEN_ENV, token);
                match ca {
                    Some(ca) => cmd.env(tenure_client::CACERT_ENV, ca),
                    None => cmd.env_remove(tenure_client::CACERT_ENV),
                };
                cmd
            }
            Cli::Etcd { endpoints, .. } => {
                let mut cmd = Command::new("etcdctl");
                cmd.arg(format!("--endpoints={endpoints}")).args(["elect", name, value]);
                cmd.env("ETCDCTL_API", "3");
                cmd
            }
            Cli::Store { url, ttl_ms } => {
                let exe = std::env::current_exe().context("cannot find the tenure binary")?;
                let mut cmd = Command::new(exe);
                cmd.args(["elect", name, "--value", value, "--store", url])
                    .arg(format!("--ttl-ms={ttl_ms}"));
                cmd
            }
            Cli::Kazoo { python, script, hosts, ttl_ms } => {
                let mut cmd = Command::new(python);
                cmd.arg(script)
                    .args(["--hosts", hosts, "--value", value])
                    .arg(format!("--timeout={}", *ttl_ms as f64 / 1000.0))
                    .arg(format!("--path={KAZOO_ROOT}/{name}"));
                cmd
            }
        };
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
        Ok(cmd)
    }

    /// Whether `line` of a candidate's output says it was elected.
    fn elected(&self, name: &str, line: &str) -> bool {
        match self {
            // "elected NAME: fencing token T (session S)"
            Cli::Tenure { .. } => line.starts_with(&format!("elected {name}:")),
            // etcdctl prints the leader key, "NAME/<lease id>", then the value.
            Cli::Etcd { .. } => line.starts_with(&format!("{name}/")),
            Cli::Store { .. } => line.starts_with(&format!("elected {name}:")),
            Cli::Kazoo { .. } => line == format!("elected {KAZOO_ROOT}/{name}"),
        }
    }

    /// Whether `line` of a candidate's output says it joined the queue, for
    /// the CLIs that say so (the others are asked through the store).
    fn queued(&self, name: &str, line: &str) -> Option<bool> {
        match self {
            // "<time>  campaigning in NAME as session ..."
            Cli::Store { .. } => Some(line.contains(&format!("campaigning in {name} as"))),
            Cli::Kazoo { .. } => Some(line == format!("queued {KAZOO_ROOT}/{name}")),
            Cli::Tenure { .. } | Cli::Etcd { .. } => None,
        }
    }

    /// How many candidates the store holds for `name`.
    async fn candidates(&self, fetch: &Fetch, name: &str) -> anyhow::Result<usize> {
        match self {
            Cli::Tenure { api, .. } => {
                let url = format!("{api}/v1/elections/{name}");
                let (status, body) =
                    fetch.send(Method::GET, &url, None, QUEUE_REQUEST_TIMEOUT).await?;
                if status == hyper::StatusCode::NOT_FOUND {
                    return Ok(0);
                }
                if !status.is_success() {
                    bail!("{url}: HTTP {status}");
                }
                let v: serde_json::Value = serde_json::from_slice(&body)?;
                let list = v["candidates"]
                    .as_array()
                    .ok_or_else(|| anyhow!("{url}: no candidates in {v}"))?;
                Ok(list.len())
            }
            Cli::Etcd { gateway, .. } => {
                let b64 = |s: &[u8]| base64::engine::general_purpose::STANDARD.encode(s);
                let prefix = format!("{name}/");
                let mut end = prefix.clone().into_bytes();
                *end.last_mut().expect("not empty") += 1;
                let body = serde_json::json!({
                    "key": b64(prefix.as_bytes()),
                    "range_end": b64(&end),
                    "count_only": true,
                })
                .to_string();
                let url = format!("{gateway}/v3/kv/range");
                let (status, answer) =
                    fetch.send(Method::POST, &url, Some(&body), QUEUE_REQUEST_TIMEOUT).await?;
                if !status.is_success() {
                    bail!("{url}: HTTP {status}");
                }
                let v: serde_json::Value = serde_json::from_slice(&answer)?;
                // The gateway writes int64 as strings, and leaves out zeros.
                Ok(v["count"].as_str().and_then(|c| c.parse().ok()).unwrap_or(0))
            }
            Cli::Store { .. } | Cli::Kazoo { .. } => {
                bail!("the candidates of {name} are told by the candidates' own output")
            }
        }
    }
}

/// A candidate process and its output lines, each with when it arrived.
struct Candidate {
    child: Child,
    lines: mpsc::UnboundedReceiver<(Instant, String)>,
    seen: Vec<String>,
}

impl Candidate {
    fn spawn(mut cmd: Command) -> anyhow::Result<Self> {
        let mut child = cmd.spawn().context("cannot start the candidate")?;
        let (tx, lines) = mpsc::unbounded_channel();
        let out = child.stdout.take().expect("stdout is piped");
        let err = child.stderr.take().expect("stderr is piped");
        for stream in [Box::new(out) as Box<dyn tokio::io::AsyncRead + Send + Unpin>, Box::new(err)]
        {
            let tx = tx.clone();
            tokio::spawn(async move {
                let mut lines = BufReader::new(stream).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    if tx.send((Instant::now(), line)).is_err() {
                        break;
                    }
                }
            });
        }
        Ok(Candidate { child, lines, seen: Vec::new() })
    }

    /// When the first line `elected` accepts arrived, within `bound`.
    async fn wait_for(
        &mut self,
        elected: impl Fn(&str) -> bool,
        bound: Duration,
    ) -> anyhow::Result<Instant> {
        let deadline = Instant::now() + bound;
        loop {
            match tokio::time::timeout_at(deadline, self.lines.recv()).await {
                Ok(Some((at, line))) => {
                    if elected(&line) {
                        return Ok(at);
                    }
                    if self.seen.len() < KEPT_LINES {
                        self.seen.push(line);
                    }
                }
                Ok(None) => bail!("the candidate exited; its output:\n{}", self.seen.join("\n")),
                Err(_) => bail!(
                    "the candidate was not elected within {bound:?}; its output:\n{}",
                    self.seen.join("\n")
                ),
            }
        }
    }

    fn signal(&self, sig: nix::sys::signal::Signal) -> anyhow::Result<()> {
        let pid = self.child.id().ok_or_else(|| anyhow!("the candidate already exited"))?;
        let pid = nix::unistd::Pid::from_raw(i32::try_from(pid).context("pid")?);
        nix::sys::signal::kill(pid, sig).context("cannot signal the candidate")
    }
}

/// One handover: the first candidate elected, the second queued (for
/// `queued` more), the first stopped; the time from the signal to the
/// second's "elected", ms.
async fn handover(
    cli: &Cli,
    fetch: &Fetch,
    name: &str,
    stop: Stop,
    queued: Duration,
) -> anyhow::Result<f64> {
    let mut first = Candidate::spawn(cli.command(name, "first")?)?;
    first.wait_for(|l| cli.elected(name, l), ELECTED_BOUND).await.context("first candidate")?;
    let mut second = Candidate::spawn(cli.command(name, "second")?)?;
    if cli.queued(name, "").is_some() {
        let queued = |l: &str| cli.queued(name, l) == Some(true);
        second.wait_for(queued, ELECTED_BOUND).await.context("second candidate, queueing")?;
    } else {
        let queued_by = Instant::now() + ELECTED_BOUND;
        while cli.candidates(fetch, name).await? < 2 {
            if Instant::now() > queued_by {
                bail!("the second candidate was not queued within {ELECTED_BOUND:?}");
            }
            tokio::time::sleep(QUEUE_POLL).await;
        }
    }
    tokio::time::sleep(queued).await;
    let signal = match stop {
        Stop::Graceful => nix::sys::signal::Signal::SIGTERM,
        Stop::Crash => nix::sys::signal::Signal::SIGKILL,
    };
    let started = Instant::now();
    first.signal(signal)?;
    let elected = second
        .wait_for(|l| cli.elected(name, l), ELECTED_BOUND)
        .await
        .context("second candidate")?;
    let ms = elected.saturating_duration_since(started).as_secs_f64() * 1000.0;
    second.signal(nix::sys::signal::Signal::SIGTERM)?;
    let _ = tokio::time::timeout(ELECTED_BOUND, second.child.wait()).await;
    let _ = tokio::time::timeout(ELECTED_BOUND, first.child.wait()).await;
    Ok(ms)
}

/// `tenure bench elect`.
pub async fn run(args: ElectArgs) -> anyhow::Result<ExitCode> {
    args.cluster.check()?;
    if args.trials > MAX_TRIALS || args.crash_trials > MAX_TRIALS {
        bail!("--trials and --crash-trials must be at most {MAX_TRIALS}");
    }
    if args.observe_trials > MAX_OBSERVE_TRIALS {
        bail!("--observe-trials must be at most {MAX_OBSERVE_TRIALS}");
    }
    if args.queued_ms > MAX_QUEUED_MS {
        bail!("--queued-ms must be at most {MAX_QUEUED_MS}");
    }
    if !(tenure_kv::MIN_TTL_MS..=tenure_kv::MAX_TTL_MS).contains(&args.ttl_ms) {
        bail!("--ttl-ms must be between {} and {}", tenure_kv::MIN_TTL_MS, tenure_kv::MAX_TTL_MS);
    }
    let (systems, observe) = match args.store {
        BenchStore::Tenure => match on_tenure(&args).await? {
            Ok(measured) => measured,
            Err(code) => return Ok(code),
        },
        BenchStore::Etcd => (on_etcd(&args).await?, None),
        BenchStore::Zk => (on_zookeeper(&args).await?, None),
    };
    let report = ElectReport {
        nodes: args.cluster.nodes,
        protocol: args.cluster.protocol,
        tls: !args.cluster.insecure_no_tls,
        ttl_ms: args.ttl_ms,
        queued_ms: args.queued_ms,
        store: args.store,
        systems,
        observe,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report);
    }
    Ok(ExitCode::SUCCESS)
}

/// One system's election CLI as measured: its name in the report and
/// whether it is killed too (a stock client with a fixed, long TTL is not).
struct Contender<'a> {
    cli: &'a Cli,
    system: &'a str,
    crash: bool,
}

/// The trials of `contenders` on one store, interleaved (each trial stops
/// each contender's leader in turn), after [`WARMUP_HANDOVERS`] untimed
/// ones each: the store's warm-up (a fresh JVM's first ZooKeeper requests
/// are several times slower) and any drift of the machine fall on every
/// contender alike, not on whichever is measured first.
async fn measure(
    contenders: &[Contender<'_>],
    fetch: &Fetch,
    args: &ElectArgs,
) -> anyhow::Result<Vec<SystemReport>> {
    let queued = Duration::from_millis(args.queued_ms);
    let pid = std::process::id();
    let warmups = if args.trials + args.crash_trials == 0 { 0 } else { WARMUP_HANDOVERS };
    for t in 0..warmups {
        for (i, c) in contenders.iter().enumerate() {
            let name = format!("bench-{pid}-warmup-{i}-{t}");
            handover(c.cli, fetch, &name, Stop::Graceful, queued)
                .await
                .with_context(|| format!("{}, warm-up {t}", c.system))?;
        }
    }
    // Per contender: the graceful samples, then the crash samples.
    let mut samples = vec![[Vec::new(), Vec::new()]; contenders.len()];
    let runs = [(Stop::Graceful, args.trials), (Stop::Crash, args.crash_trials)];
    for (run, (stop, n)) in runs.into_iter().enumerate() {
        for t in 0..n {
            // Each trial starts with the next contender: no one always goes first.
            for k in 0..contenders.len() {
                let i = (t + k) % contenders.len();
                let c = &contenders[i];
                if stop == Stop::Crash && !c.crash {
                    continue;
                }
                let name = format!("bench-{pid}-{stop:?}-{i}-{t}").to_lowercase();
                let queued = match stop {
                    Stop::Graceful => queued,
                    Stop::Crash => queued + kill_phase(t, args.ttl_ms),
                };
                let ms = handover(c.cli, fetch, &name, stop, queued)
                    .await
                    .with_context(|| format!("{}, {stop:?} trial {t}", c.system))?;
                samples[i][run].push(ms);
            }
        }
    }
    Ok(contenders
        .iter()
        .zip(samples)
        .map(|(c, [graceful, crash])| SystemReport {
            system: c.system.to_string(),
            graceful_ms: summarize(&graceful),
            crash_ms: summarize(&crash),
            graceful_samples_ms: graceful,
            crash_samples_ms: crash,
        })
        .collect())
}

/// How much later than `--queued-ms` crash trial `t` kills the leader:
/// between 0 and half a TTL, in golden-ratio order (`t` times the golden
/// ratio, modulo 1), so that any run of trials covers that range evenly
/// and the kills fall all over each client's touch cycle. tenure's client
/// touches its ZooKeeper session at least every `0.15 T` (a `sync` every
/// `T/4`, the library's ping after `0.15 T` idle), kazoo pings `T/3` less
/// a random 10–400 ms after its last send (so its phase is partly random
/// already), etcd keepalives go every `T/3`. The store counts the TTL from
/// the last touch it heard of, so a kill at the same point of every cycle
/// would measure one point of the distribution, a different one per
/// client. Trial `t` has the same extra wait for every contender.
fn kill_phase(t: usize, ttl_ms: u64) -> Duration {
    const GOLDEN: f64 = 0.618_033_988_749_895;
    let fraction = (t as f64 * GOLDEN).fract();
    Duration::from_secs_f64(fraction * ttl_ms as f64 / 2000.0)
}

/// Elections in tenure (and `etcdctl elect` with --compare etcd); the
/// observe trials. The exit code when etcd was asked for and is missing.
type Measured = (Vec<SystemReport>, Option<ObserveReport>);
async fn on_tenure(args: &ElectArgs) -> anyhow::Result<Result<Measured, ExitCode>> {
    let with_etcd = match args.cluster.with_etcd() {
        Ok(w) => w,
        Err(code) => return Ok(Err(code)),
    };
    if with_etcd && which_etcdctl().is_none() {
        bail!("--compare etcd needs `etcdctl` on the PATH: apt-get install etcd-client");
    }
    let timing = args.cluster.timing();
    let nodes: Vec<usize> = (0..args.cluster.nodes).collect();
    let mut systems = Vec::new();
    let mut observe = None;
    {
        let tenure = args.cluster.start_tenure()?;
        wait_stable(&tenure, &nodes, timing).await?;
        let cli = tenure_cli(&tenure, args.ttl_ms);
        let tenure_elect = Contender { cli: &cli, system: "tenure", crash: true };
        systems.extend(measure(&[tenure_elect], tenure.fetch(), args).await?);
        if args.observe_trials > 0 {
            let (leader, _) = wait_stable(&tenure, &nodes, timing).await?;
            let follower = (leader + 1) % tenure.len();
            let report =
                super::elect_observe::measure(&tenure, leader, follower, args.observe_trials)
                    .await
                    .context("tenure, observe trials")?;
            observe = Some(report);
        }
    }
    if with_etcd {
        let etcd = args.cluster.start_etcd(false).await?;
        let (leader, _) = wait_stable(&etcd, &nodes, timing).await?;
        let cli = etcd_cli(&etcd, leader);
        let fetch = Fetch::new(ClientOptions::default())?;
        let etcdctl = Contender { cli: &cli, system: "etcd", crash: false };
        systems.extend(measure(&[etcdctl], &fetch, args).await?);
    }
    Ok(Ok((systems, observe)))
}

/// `tenure elect --store etcd://` and `etcdctl elect` on one local etcd.
async fn on_etcd(args: &ElectArgs) -> anyhow::Result<Vec<SystemReport>> {
    if !super::etcd::available() || which_etcdctl().is_none() {
        bail!("--store etcd needs etcd and etcdctl: {}", super::etcd::INSTALL_HINT);
    }
    if !args.ttl_ms.is_multiple_of(1000) {
        bail!("--store etcd: etcd grants TTLs in whole seconds; give --ttl-ms in thousands");
    }
    let nodes: Vec<usize> = (0..args.cluster.nodes).collect();
    let etcd = args.cluster.start_etcd(false).await?;
    let (leader, _) = wait_stable(&etcd, &nodes, args.cluster.timing()).await?;
    let hosts: Vec<String> = (0..etcd.len())
        .map(|i| etcd.client_url(i).trim_start_matches("http://").to_string())
        .collect();
    let ours = Cli::Store { url: format!("etcd://{}", hosts.join(",")), ttl_ms: args.ttl_ms };
    let fetch = Fetch::new(ClientOptions::default())?;
    let stock = etcd_cli(&etcd, leader);
    let contenders = [
        Contender { cli: &ours, system: "tenure elect (etcd)", crash: true },
        Contender { cli: &stock, system: "etcdctl elect", crash: false },
    ];
    measure(&contenders, &fetch, args).await
}

/// `tenure elect --store zk://` and kazoo's Election on one local ensemble.
async fn on_zookeeper(args: &ElectArgs) -> anyhow::Result<Vec<SystemReport>> {
    let has_kazoo = std::process::Command::new(&args.python)
        .args(["-c", "import kazoo"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_kazoo {
        bail!(
            "--store zk compares with kazoo's Election recipe: {} cannot import kazoo; install \
             it (python3 -m venv /opt/tenure-bench-venv && /opt/tenure-bench-venv/bin/pip \
             install kazoo) and pass --python /opt/tenure-bench-venv/bin/python (or set {PYTHON_ENV})",
            args.python.display()
        );
    }
    let zk = ZooKeeper::start(args.cluster.nodes).await?;
    let dir = tenure_launch::temp_dir("tenure-bench-kazoo-")?;
    let script = dir.path().join("kazoo_elect.py");
    std::fs::write(&script, KAZOO_SCRIPT).context("writing the kazoo script")?;
    let ours = Cli::Store { url: format!("zk://{}", zk.hosts()), ttl_ms: args.ttl_ms };
    let fetch = Fetch::new(ClientOptions::default())?;
    let stock =
        Cli::Kazoo { python: args.python.clone(), script, hosts: zk.hosts(), ttl_ms: args.ttl_ms };
    let contenders = [
        Contender { cli: &ours, system: "tenure elect (zk)", crash: true },
        Contender { cli: &stock, system: "kazoo Election", crash: true },
    ];
    measure(&contenders, &fetch, args).await.with_context(|| zk.log_tails())
}

fn tenure_cli(tenure: &Tenure, ttl_ms: u64) -> Cli {
    let endpoints: Vec<&str> = (0..tenure.len()).map(|i| tenure.endpoint(i)).collect();
    Cli::Tenure {
        endpoints: endpoints.join(","),
        ca: tenure.ca(),
        token: tenure.token().to_string(),
        ttl_ms,
        api: tenure.endpoint(0).to_string(),
    }
}

fn etcd_cli(etcd: &Etcd, leader: usize) -> Cli {
    let endpoints: Vec<String> = (0..etcd.len()).map(|i| etcd.client_url(i)).collect();
    Cli::Etcd { endpoints: endpoints.join(","), gateway: etcd.client_url(leader) }
}

/// Whether `etcdctl` is on the PATH.
pub(super) fn etcdctl_available() -> bool {
    which_etcdctl().is_some()
}

fn which_etcdctl() -> Option<()> {
    std::process::Command::new("etcdctl")
        .arg("version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|_| ())
}

/// etcd's lessor looks for expired leases every 500 ms (hard-coded in
/// 3.4): a lease can outlive its TTL by that much before its keys go.
const ETCD_EXPIRY_SWEEP_MS: f64 = 500.0;

fn print_report(r: &ElectReport) {
    let stock_ttl = match r.store {
        BenchStore::Tenure | BenchStore::Etcd => {
            format!("etcdctl elect: {} s, fixed", ETCDCTL_TTL_MS / 1000.0)
        }
        BenchStore::Zk => "kazoo: the same, as its session timeout".to_string(),
    };
    // The tenure cluster's protocol and TLS matter only when it holds the election.
    let store = match r.store {
        BenchStore::Tenure => {
            format!("tenure, {} protocol, TLS {}", r.protocol, if r.tls { "on" } else { "off" })
        }
        BenchStore::Etcd => "etcd".to_string(),
        BenchStore::Zk => format!("ZooKeeper, tick {} ms", super::zookeeper::TICK_MS),
    };
    println!(
        "{} nodes, store {store}, session TTL {} ms ({stock_ttl}), successor queued {} ms \
         before the stop (a SIGKILL up to TTL/2 later, spread)",
        r.nodes, r.ttl_ms, r.queued_ms,
    );
    println!(
        "{:<20} {:<9} {:>6} {:>9} {:>9} {:>9} {:>9}",
        "system", "stop", "n", "min ms", "p50 ms", "p99 ms", "max ms"
    );
    for s in &r.systems {
        for (stop, summary) in [("SIGTERM", s.graceful_ms), ("SIGKILL", s.crash_ms)] {
            if let Some(x) = summary {
                println!(
                    "{:<20} {:<9} {:>6} {:>9.1} {:>9.1} {:>9.1} {:>9.1}",
                    s.system, stop, x.count, x.min, x.p50, x.p99, x.max
                );
            }
        }
    }
    print_goals(r);
    if let Some(o) = &r.observe {
        print_observe(o);
    }
}

/// The goals: the first system is tenure's client, the second the
/// stock client it is compared with.
fn print_goals(r: &ElectReport) {
    let goal = |what: &str, met: bool, detail: String| {
        println!("goal {what}: {} ({detail})", if met { "met" } else { "NOT met" })
    };
    let Some(ours) = r.systems.first() else { return };
    let stock = r.systems.get(1);
    if let (Some(tg), Some(sg)) = (ours.graceful_ms, stock.and_then(|s| s.graceful_ms)) {
        let ratio = tg.p99 / sg.p99;
        goal(
            &format!("graceful handover p99 <= 0.5x {}'s", stock.map_or("", |s| &s.system)),
            ratio <= 0.5,
            format!("{:.1} vs {:.1} ms, {ratio:.2}x", tg.p99, sg.p99),
        );
    }
    if let Some(c) = ours.crash_ms {
        let bound = r.ttl_ms as f64 + CRASH_SLACK_MS;
        goal(
            "handover after SIGKILL p99 <= TTL + 50 ms",
            c.p99 <= bound,
            format!("{:.1} vs {bound:.0} ms", c.p99),
        );
        if r.store == BenchStore::Etcd {
            let bound = bound + ETCD_EXPIRY_SWEEP_MS;
            goal(
                "(restated for etcd's 500 ms expiry sweep) p99 <= TTL + 550 ms",
                c.p99 <= bound,
                format!("{:.1} vs {bound:.0} ms", c.p99),
            );
        }
        if r.store == BenchStore::Zk {
            // The leader rounds a session's expiry up to the next tick and
            // hears of a follower's clients' touches with its pings, every
            // half tick.
            let store_ms = 1.5 * super::zookeeper::TICK_MS as f64;
            let bound = bound + store_ms;
            goal(
                &format!(
                    "(restated for ZooKeeper's {} ms tick buckets) p99 <= TTL + {:.0} ms",
                    super::zookeeper::TICK_MS,
                    store_ms + CRASH_SLACK_MS
                ),
                c.p99 <= bound,
                format!("{:.1} vs {bound:.0} ms", c.p99),
            );
        }
        if let Some(sc) = stock.and_then(|s| s.crash_ms) {
            println!(
                "after SIGKILL, {} p99 {:.1} ms vs {} p99 {:.1} ms",
                ours.system,
                c.p99,
                stock.map_or("", |s| &s.system),
                sc.p99
            );
        }
    }
}

fn print_observe(o: &ObserveReport) {
    println!(
        "observe events of {} changes (proclaim, handover, last candidate leaving, claim), \
         from the change's request sent to the event:",
        o.changes
    );
    println!(
        "{:<9} {:>5} {:>6} {:>9} {:>9} {:>9}",
        "observer", "node", "n", "p50 ms", "p99 ms", "max ms"
    );
    let rows =
        [("leader", o.leader_node, o.leader_ms), ("follower", o.follower_node, o.follower_ms)];
    // The answer to the change's request, for comparison: the commit.
    let answer = ("(answer)", o.leader_node, o.answer_ms);
    for (role, node, summary) in rows.into_iter().chain([answer]) {
        if let Some(x) = summary {
            println!(
                "{role:<9} {node:>5} {:>6} {:>9.2} {:>9.2} {:>9.2}",
                x.count, x.p50, x.p99, x.max
            );
        }
    }
    println!("the same events, from the change's answer (the commit as its writer sees it):");
    let after = [
        ("leader", o.leader_node, o.leader_after_commit_ms),
        ("follower", o.follower_node, o.follower_after_commit_ms),
    ];
    for (role, node, summary) in after {
        if let Some(x) = summary {
            println!(
                "{role:<9} {node:>5} {:>6} {:>9.2} {:>9.2} {:>9.2}",
                x.count, x.p50, x.p99, x.max
            );
        }
    }
    // The goal is judged on the observe path's own latency (after the
    // commit); the latency from the request, commit included, is shown too.
    for ((role, _, from_commit), (_, _, from_request)) in after.iter().zip(rows.iter()) {
        if let (Some(x), Some(y)) = (from_commit, from_request) {
            let met = x.p99 < OBSERVE_GOAL_MS;
            println!(
                "goal observe-event latency p99 < {OBSERVE_GOAL_MS:.0} ms after the commit \
                 ({role}'s observer): {} ({:.2} ms; {:.2} ms from the request, commit included)",
                if met { "met" } else { "NOT met" },
                x.p99,
                y.p99
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kill_phases_spread_over_half_a_ttl() {
        let ttl_ms = 2000;
        let mut phases: Vec<f64> =
            (0..20).map(|t| kill_phase(t, ttl_ms).as_secs_f64() * 1000.0).collect();
        assert_eq!(phases[0], 0.0);
        assert!(phases.iter().all(|&p| (0.0..1000.0).contains(&p)), "{phases:?}");
        phases.sort_by(f64::total_cmp);
        // No stretch of the cycle is left out: every gap, the last to the
        // end included, is under a tenth of it.
        let mut ends = phases.windows(2).map(|w| w[1] - w[0]).chain([1000.0 - phases[19]]);
        assert!(ends.all(|gap| gap < 100.0), "{phases:?}");
    }
}
