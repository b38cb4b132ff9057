//! `tenure demo`: a local cluster of real `tenure server` processes, a crash of
//! the leader with the measured failover time, a rejoin, and graceful handovers.
//!
//! Every server is a child process of the demo in its own process group (so a
//! Ctrl-C in the terminal reaches only the demo, which then cleans up). The
//! [`Cluster`] guard kills the children and deletes their data directories
//! when it is dropped: on success, on error, on Ctrl-C and on panic.

use crate::api::{StatusBody, TransferBody};
use crate::rest::Client;
use anyhow::{anyhow, bail, Context};
use clap::Args;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::Duration;
use tokio::time::{sleep, Instant};

/// Fewest nodes: with two, losing one leaves no majority to fail over to.
const MIN_NODES: usize = 3;
/// How often survivors are polled while a failover is measured.
const FAILOVER_POLL: Duration = Duration::from_millis(2);
/// Per-request timeout while polling fast: a node that does not answer this
/// quickly is treated as not (yet) reporting a leader.
const FAST_POLL_TIMEOUT: Duration = Duration::from_millis(250);
/// How often the live view polls every node.
const LIVE_POLL: Duration = Duration::from_millis(50);
/// How long a started server may take before its API answers.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a SIGTERMed server may take to exit before it is killed.
const EXIT_TIMEOUT: Duration = Duration::from_secs(5);
/// Pause between the acts of the demo, so the live view shows a steady state.
const STEADY_PAUSE: Duration = Duration::from_millis(1500);
/// Attempts at a transfer refused because the target has not yet acknowledged the leader.
const TRANSFER_ATTEMPTS: u32 = 20;
/// Lines of each server's log shown when the demo fails.
const LOG_TAIL_LINES: usize = 15;
/// Status exit code after Ctrl-C (128 + SIGINT), as shells report it.
const EXIT_INTERRUPTED: u8 = 130;

/// Flags of `tenure demo`.
#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Number of servers to start (at least 3; at most 15).
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub nodes: usize,
    /// Run for exactly this many seconds, then clean up and exit 0 (the live view
    /// keeps running after the script) [default: exit when the script ends].
    #[arg(long, value_name = "S")]
    pub duration: Option<u64>,
    /// Heartbeat interval passed to the servers, in milliseconds.
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub heartbeat_ms: u64,
    /// Election timeout passed to the servers, in milliseconds.
    #[arg(long, default_value_t = 1000, value_name = "N")]
    pub election_timeout_ms: u64,
}

/// One server of the demo cluster.
struct Server {
    id: u64,
    peer_port: u16,
    http_port: u16,
    data_dir: PathBuf,
    log: PathBuf,
    child: Option<Child>,
}

/// The demo's servers; dropping it kills them and removes their directories.
struct Cluster {
    exe: PathBuf,
    peers: String,
    heartbeat_ms: u64,
    election_timeout_ms: u64,
    servers: Vec<Server>,
    // Declared last: dropped after the children are dead.
    dir: tempfile::TempDir,
}

impl Cluster {
    fn new(args: &DemoArgs) -> anyhow::Result<Self> {
        let exe = std::env::current_exe().context("cannot find the tenure executable")?;
        let dir = tempfile::Builder::new()
            .prefix("tenure-demo-")
            .tempdir()
            .context("cannot create a temporary directory")?;
        let ports = free_ports(2 * args.nodes)?;
        let servers: Vec<Server> = (0..args.nodes)
            .map(|i| {
                let id = i as u64 + 1;
                Server {
                    id,
                    peer_port: ports[2 * i],
                    http_port: ports[2 * i + 1],
                    data_dir: dir.path().join(format!("node-{id}")),
                    log: dir.path().join(format!("node-{id}.log")),
                    child: None,
                }
            })
            .collect();
        let peers = servers
            .iter()
            .map(|s| format!("{}=127.0.0.1:{}", s.id, s.peer_port))
            .collect::<Vec<_>>()
            .join(",");
        Ok(Cluster {
            exe,
            peers,
            heartbeat_ms: args.heartbeat_ms,
            election_timeout_ms: args.election_timeout_ms,
            servers,
            dir,
        })
    }

    fn endpoint(&self, i: usize) -> String {
        format!("http://127.0.0.1:{}", self.servers[i].http_port)
    }

    /// Starts server `i` (again); its output goes to its log file.
    fn start(&mut self, i: usize) -> anyhow::Result<()> {
        let s = &self.servers[i];
        let log = File::options()
            .create(true)
            .append(true)
            .open(&s.log)
            .with_context(|| format!("cannot open {}", s.log.display()))?;
        let child = Command::new(&self.exe)
            .arg("server")
            .args(["--id", &s.id.to_string()])
            .args(["--listen", &format!("127.0.0.1:{}", s.peer_port)])
            .args(["--http", &format!("127.0.0.1:{}", s.http_port)])
            .args(["--peers", &self.peers])
            .arg("--data-dir")
            .arg(&s.data_dir)
            .args(["--heartbeat-ms", &self.heartbeat_ms.to_string()])
            .args(["--election-timeout-ms", &self.election_timeout_ms.to_string()])
            .args(["--cluster-id", "tenure-demo"])
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            // Own process group: the terminal's Ctrl-C goes to the demo only,
            // which then stops the servers itself.
            .process_group(0)
            .spawn()
            .context("cannot start a tenure server")?;
        self.servers[i].child = Some(child);
        Ok(())
    }

    /// Sends `signal` to server `i`.
    fn signal(&mut self, i: usize, signal: Signal) -> anyhow::Result<()> {
        let child = self.servers[i]
            .child
            .as_ref()
            .ok_or_else(|| anyhow!("node {} is not running", self.servers[i].id))?;
        let pid = Pid::from_raw(i32::try_from(child.id())?);
        kill(pid, signal).with_context(|| format!("cannot send {signal} to node {}", i + 1))
    }

    /// Waits (bounded) for server `i` to exit; returns its exit status text.
    async fn wait_exit(&mut self, i: usize, timeout: Duration) -> anyhow::Result<String> {
        let deadline = Instant::now() + timeout;
        let id = self.servers[i].id;
        let child =
            self.servers[i].child.as_mut().ok_or_else(|| anyhow!("node {id} is not running"))?;
        loop {
            if let Some(status) = child.try_wait()? {
                self.servers[i].child = None;
                return Ok(status.to_string());
            }
            if Instant::now() > deadline {
                bail!("node {id} did not exit within {timeout:?}");
            }
            sleep(Duration::from_millis(5)).await;
        }
    }

    /// The last lines of every server's log, for error reports.
    fn log_tails(&self) -> String {
        let mut out = String::new();
        for s in &self.servers {
            let Ok(f) = File::open(&s.log) else { continue };
            let lines: Vec<String> = BufReader::new(f).lines().map_while(Result::ok).collect();
            out.push_str(&format!("--- node {} ({}) ---\n", s.id, s.log.display()));
            for l in &lines[lines.len().saturating_sub(LOG_TAIL_LINES)..] {
                out.push_str(l);
                out.push('\n');
            }
        }
        out
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for s in &mut self.servers {
            if let Some(mut child) = s.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        // `dir` (a TempDir) is removed after this, with every data directory and log.
        let _ = self.dir.path();
    }
}

/// Distinct free loopback ports: all listeners are held until every port is picked.
fn free_ports(n: usize) -> anyhow::Result<Vec<u16>> {
    let listeners = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<Vec<_>, _>>()
        .context("cannot find free loopback ports")?;
    listeners.iter().map(|l| Ok(l.local_addr()?.port())).collect()
}

/// Statuses of the given servers (None for those that do not answer), polled concurrently.
async fn poll(client: &Client, endpoints: &[String], timeout: Duration) -> Vec<Option<StatusBody>> {
    futures_util::future::join_all(
        endpoints.iter().map(|e| async move { client.status_within(e, timeout).await.ok() }),
    )
    .await
}

/// The live view: prints a line whenever any node's role, term or leader changes.
async fn live_view(client: Client, endpoints: Vec<String>, started: Instant) {
    let mut last = String::new();
    loop {
        let statuses = poll(&client, &endpoints, Duration::from_millis(200)).await;
        let leader =
            statuses.iter().flatten().filter(|s| s.role == "leader").max_by_key(|s| s.term);
        let headline = match leader {
            Some(l) => format!("leader n{} term {}", l.id, l.term),
            None => "no leader".to_string(),
        };
        let nodes: Vec<String> = statuses
            .iter()
            .enumerate()
            .map(|(i, s)| match s {
                Some(s) => format!("{:<19}", format!("n{} {} t{}", i + 1, s.role, s.term)),
                None => format!("{:<19}", format!("n{} down", i + 1)),
            })
            .collect();
        let view = format!("{headline:<18} | {}", nodes.join(" | "));
        let view = view.trim_end().to_string();
        if view != last {
            println!("  [{:>6.2}s] {view}", started.elapsed().as_secs_f64());
            last = view;
        }
        sleep(LIVE_POLL).await;
    }
}

/// Polls `endpoints` every [`FAILOVER_POLL`] until one reports itself leader of a
/// term above `after_term`; returns (index into endpoints, status, elapsed).
async fn wait_for_new_leader(
    client: &Client,
    endpoints: &[String],
    after_term: u64,
    since: Instant,
    bound: Duration,
) -> anyhow::Result<(usize, StatusBody, Duration)> {
    loop {
        let statuses = poll(client, endpoints, FAST_POLL_TIMEOUT).await;
        let found = statuses.into_iter().enumerate().find_map(|(i, s)| {
            s.filter(|s| s.role == "leader" && s.term > after_term).map(|s| (i, s))
        });
        if let Some((i, s)) = found {
            return Ok((i, s, since.elapsed()));
        }
        if since.elapsed() > bound {
            bail!("no new leader after term {after_term} within {bound:?}");
        }
        sleep(FAILOVER_POLL).await;
    }
}

/// Runs `tenure demo`.
pub async fn run(args: DemoArgs) -> anyhow::Result<ExitCode> {
    if !(MIN_NODES..=tenure_core::MAX_VOTERS).contains(&args.nodes) {
        bail!("--nodes must be between {MIN_NODES} and {}", tenure_core::MAX_VOTERS);
    }
    let mut cluster = Cluster::new(&args)?;
    let started = Instant::now();
    let script = script(&mut cluster, &args, started);
    let outcome = match args.duration {
        Some(s) => {
            let limit = Duration::from_secs(s);
            tokio::select! {
                r = async {
                    script.await?;
                    let left = limit.saturating_sub(started.elapsed());
                    println!("==> script done; live view until the {s} s duration is up");
                    sleep(left).await;
                    anyhow::Ok(())
                } => r.map(|()| ExitCode::SUCCESS),
                _ = sleep(limit) => {
                    println!("==> {s} s duration reached; stopping");
                    Ok(ExitCode::SUCCESS)
                }
                _ = tokio::signal::ctrl_c() => {
                    println!("==> interrupted; stopping the servers");
                    Ok(ExitCode::from(EXIT_INTERRUPTED))
                }
            }
        }
        None => tokio::select! {
            r = script => r.map(|()| ExitCode::SUCCESS),
            _ = tokio::signal::ctrl_c() => {
                println!("==> interrupted; stopping the servers");
                Ok(ExitCode::from(EXIT_INTERRUPTED))
            }
        },
    };
    if let Err(e) = &outcome {
        eprintln!("demo failed: {e:#}\nserver logs:\n{}", cluster.log_tails());
    }
    println!("==> cleaning up: stopping servers, removing {}", cluster.dir.path().display());
    drop(cluster);
    outcome
}

/// The demo proper: election, crash failover, rejoin, transfer, graceful stop.
async fn script(cluster: &mut Cluster, args: &DemoArgs, started: Instant) -> anyhow::Result<()> {
    let client = Client::default();
    let n = cluster.servers.len();
    let endpoints: Vec<String> = (0..n).map(|i| cluster.endpoint(i)).collect();
    let timeout = Duration::from_millis(args.election_timeout_ms);
    // Generous bound for one election: several timeouts plus process start-up.
    let election_bound = timeout * 5 + STARTUP_TIMEOUT;

    println!(
        "==> starting {n} tenure servers (heartbeat {} ms, election timeout {} ms) in {}",
        args.heartbeat_ms,
        args.election_timeout_ms,
        cluster.dir.path().display()
    );
    for (i, endpoint) in endpoints.iter().enumerate() {
        cluster.start(i)?;
        println!(
            "    node {}: peers on 127.0.0.1:{}, API on {endpoint}",
            i + 1,
            cluster.servers[i].peer_port,
        );
    }
    let live = tokio::spawn(live_view(client.clone(), endpoints.clone(), started));
    let _stop_live = AbortOnDrop(live);

    // 1. First election.
    let (leader, status, took) =
        wait_for_new_leader(&client, &endpoints, 0, started, election_bound).await?;
    println!(
        "==> node {} elected leader of term {} ({} ms after start)",
        status.id,
        status.term,
        took.as_millis()
    );
    sleep(STEADY_PAUSE).await;

    // 2. Crash the leader.
    let old_term = status.term;
    let survivors: Vec<usize> = (0..n).filter(|&i| i != leader).collect();
    let survivor_endpoints: Vec<String> = survivors.iter().map(|&i| endpoints[i].clone()).collect();
    println!("==> SIGKILL node {} (the leader)", leader + 1);
    let killed_at = Instant::now();
    cluster.signal(leader, Signal::SIGKILL)?;
    let (j, new, failover) =
        wait_for_new_leader(&client, &survivor_endpoints, old_term, killed_at, election_bound)
            .await?;
    cluster.wait_exit(leader, EXIT_TIMEOUT).await?;
    let new_leader = survivors[j];
    println!(
        "==> FAILOVER: node {} leads term {}, {} ms after the crash \
         (followers wait one election timeout, {} ms, after the last heartbeat they heard)",
        new.id,
        new.term,
        failover.as_millis(),
        args.election_timeout_ms
    );
    sleep(STEADY_PAUSE).await;

    // 3. Restart the crashed node: it must rejoin as a follower without an election.
    println!("==> restarting node {}", leader + 1);
    let restarted_at = Instant::now();
    cluster.start(leader)?;
    let rejoined = loop {
        if let Ok(s) = client.status_within(&endpoints[leader], FAST_POLL_TIMEOUT).await {
            if s.role == "follower" && s.leader == Some(new.id) {
                break s;
            }
        }
        if restarted_at.elapsed() > election_bound {
            bail!("node {} did not rejoin within {election_bound:?}", leader + 1);
        }
        sleep(LIVE_POLL / 5).await;
    };
    let now_leader = client.status(&endpoints[new_leader]).await?;
    let undisturbed = now_leader.role == "leader" && now_leader.term == new.term;
    println!(
        "==> node {} rejoined as a follower of node {} in {} ms; leader {} (term {} -> {})",
        rejoined.id,
        new.id,
        restarted_at.elapsed().as_millis(),
        if undisturbed { "undisturbed" } else { "DISTURBED" },
        new.term,
        now_leader.term
    );
    sleep(STEADY_PAUSE).await;

    // 4. Planned handover with POST /v1/transfer, back to the restarted node.
    let target = cluster.servers[leader].id;
    println!("==> POST /v1/transfer {{\"to\": {target}}} to node {}", new.id);
    let asked_at = Instant::now();
    let mut attempt = 0;
    loop {
        attempt += 1;
        let answer = client
            .post::<TransferBody>(
                &endpoints[new_leader],
                "/v1/transfer",
                &serde_json::json!({ "to": target }),
            )
            .await?;
        match answer.body {
            Ok(_) => break,
            Err(e) if attempt < TRANSFER_ATTEMPTS && answer.status.as_u16() == 409 => {
                // The target may not have acknowledged the leader yet; retry shortly.
                let _ = e;
                sleep(LIVE_POLL).await;
            }
            Err(e) => bail!("transfer refused (HTTP {}): {}", answer.status, e.error),
        }
    }
    let (_, taken, handover) = wait_for_new_leader(
        &client,
        &endpoints[leader..=leader],
        now_leader.term,
        asked_at,
        election_bound,
    )
    .await?;
    println!(
        "==> TRANSFER: node {} leads term {}, {} ms after the request",
        taken.id,
        taken.term,
        handover.as_millis()
    );
    sleep(STEADY_PAUSE).await;

    // 5. Graceful stop of the leader: it cedes leadership before exiting.
    let others: Vec<usize> = (0..n).filter(|&i| i != leader).collect();
    let other_endpoints: Vec<String> = others.iter().map(|&i| endpoints[i].clone()).collect();
    println!("==> SIGTERM node {} (the leader): graceful stop", taken.id);
    let term_at = Instant::now();
    cluster.signal(leader, Signal::SIGTERM)?;
    let (_, next, graceful) =
        wait_for_new_leader(&client, &other_endpoints, taken.term, term_at, election_bound).await?;
    let exit = cluster.wait_exit(leader, EXIT_TIMEOUT).await?;
    println!(
        "==> GRACEFUL STOP: node {} leads term {}, {} ms after SIGTERM \
         (no election timeout waited); node {} exited ({exit})",
        next.id,
        next.term,
        graceful.as_millis(),
        taken.id
    );
    sleep(STEADY_PAUSE / 3).await;
    println!(
        "==> summary: crash failover {} ms, transfer {} ms, graceful stop {} ms \
         (election timeout {} ms)",
        failover.as_millis(),
        handover.as_millis(),
        graceful.as_millis(),
        args.election_timeout_ms
    );
    Ok(())
}

/// Aborts a background task when dropped (the live view ends with the script).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
