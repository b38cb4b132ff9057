//! `tenure demo`: a local cluster of real `tenure server` processes, a crash of
//! the leader with the measured failover time, a rejoin, and graceful handovers.
//!
//! Every server is a child process of the demo in its own process group (so a
//! Ctrl-C in the terminal reaches only the demo, which then cleans up). The
//! `LocalCluster` guard (`tenure-launch`) kills the children and deletes their data directories
//! when it is dropped: on success, on error, on Ctrl-C and on panic.

use crate::rest::Client;
use anyhow::bail;
use anyhow::Context;
use clap::Args;
use nix::sys::signal::Signal;
use std::process::ExitCode;
use std::time::Duration;
use tenure_api::{StatusBody, TransferBody};
use tenure_launch::cluster::TOKEN_FILE;
use tenure_launch::{poll, LocalCluster, Settings};
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
/// Status exit code after Ctrl-C (128 + SIGINT), as shells report it.
const EXIT_INTERRUPTED: u8 = 130;

/// Flags of `tenure demo`.
#[derive(Args, Debug)]
#[command(after_help = "\
Examples:
  tenure demo
  tenure demo --nodes 5 --protocol paxos --duration 60")]
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
    /// Election protocol of the servers: raft, ranked or paxos.
    #[arg(long, default_value = "raft", value_name = "NAME")]
    pub protocol: tenure_core::ProtocolKind,
    /// Run the servers without TLS (by default the demo makes a CA and node
    /// certificates in its temporary directory and uses mutual TLS and HTTPS).
    #[arg(long)]
    pub insecure_no_tls: bool,
}

/// The live view: prints a line whenever any node's role, term or leader changes.
async fn live_view(client: Client, endpoints: Vec<String>, started: Instant) {
    let mut last = String::new();
    loop {
        let statuses = poll(client.inner(), &endpoints, Duration::from_millis(200)).await;
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
        let statuses = poll(client.inner(), endpoints, FAST_POLL_TIMEOUT).await;
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
    let exe = std::env::current_exe().context("cannot find the tenure executable")?;
    // Caught before the servers start: they lead process groups of their
    // own and would outlive a demo that either ended unhandled.
    let mut signals = crate::elect_cli::StopSignals::new()?;
    let mut cluster = LocalCluster::new(&Settings {
        exe,
        nodes: args.nodes,
        heartbeat_ms: args.heartbeat_ms,
        election_timeout_ms: args.election_timeout_ms,
        dir_prefix: "tenure-demo-",
        cluster_id: "tenure-demo",
        protocol: args.protocol.as_str().to_string(),
        tls: !args.insecure_no_tls,
    })?;
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
                _ = signals.recv() => {
                    println!("==> interrupted; stopping the servers");
                    Ok(ExitCode::from(EXIT_INTERRUPTED))
                }
            }
        }
        None => tokio::select! {
            r = script => r.map(|()| ExitCode::SUCCESS),
            _ = signals.recv() => {
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
async fn script(
    cluster: &mut LocalCluster,
    args: &DemoArgs,
    started: Instant,
) -> anyhow::Result<()> {
    let mut demo = Demo::new(cluster, args)?;
    demo.start_servers(args)?;
    let live = tokio::spawn(live_view(demo.client.clone(), demo.endpoints.clone(), started));
    let _stop_live = AbortOnDrop(live);

    let (leader, first) = demo.first_election(started).await?;
    sleep(STEADY_PAUSE).await;
    let (new_leader, new, failover) = demo.crash_leader(leader, &first).await?;
    sleep(STEADY_PAUSE).await;
    let now_term = demo.rejoin(leader, new_leader, &new).await?;
    sleep(STEADY_PAUSE).await;
    let (taken, handover) = demo.transfer_back(leader, new_leader, &new, now_term).await?;
    sleep(STEADY_PAUSE).await;
    let graceful = demo.graceful_stop(leader, &taken).await?;
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

/// The cluster of the demo and what every act of its script needs.
struct Demo<'a> {
    cluster: &'a mut LocalCluster,
    client: Client,
    /// Every node's API endpoint, by index.
    endpoints: Vec<String>,
    /// The configured election timeout, in milliseconds.
    election_timeout_ms: u64,
    /// Generous bound for one election: several timeouts plus process start-up.
    election_bound: Duration,
}

impl<'a> Demo<'a> {
    fn new(cluster: &'a mut LocalCluster, args: &DemoArgs) -> anyhow::Result<Self> {
        let endpoints = (0..cluster.servers.len()).map(|i| cluster.endpoint(i)).collect();
        let timeout = Duration::from_millis(args.election_timeout_ms);
        Ok(Demo {
            client: Client::from_library(cluster.client()?),
            cluster,
            endpoints,
            election_timeout_ms: args.election_timeout_ms,
            election_bound: timeout * 5 + STARTUP_TIMEOUT,
        })
    }

    /// Every node but `i`, and their endpoints.
    fn others(&self, i: usize) -> (Vec<usize>, Vec<String>) {
        let others: Vec<usize> = (0..self.endpoints.len()).filter(|&j| j != i).collect();
        let endpoints = others.iter().map(|&j| self.endpoints[j].clone()).collect();
        (others, endpoints)
    }

    /// Starts every server.
    fn start_servers(&mut self, args: &DemoArgs) -> anyhow::Result<()> {
        println!(
            "==> starting {} tenure servers (heartbeat {} ms, election timeout {} ms) in {}",
            self.endpoints.len(),
            args.heartbeat_ms,
            args.election_timeout_ms,
            self.cluster.dir.path().display()
        );
        match self.cluster.ca() {
            Some(ca) => println!(
                "    mutual TLS between the servers, HTTPS for their API; certificates made by \
                 `tenure cert` in {}",
                ca.parent().unwrap_or(&ca).display()
            ),
            None => println!("    WITHOUT TLS (--insecure-no-tls)"),
        }
        for (i, endpoint) in self.endpoints.iter().enumerate() {
            self.cluster.start(i)?;
            println!(
                "    node {}: peers on 127.0.0.1:{}, API on {endpoint}",
                i + 1,
                self.cluster.servers[i].peer_port,
            );
        }
        // One line to paste into another shell, for every client command
        // (`tenure status`, `kv`, `elect`, `member`, ...).
        let ca = self.cluster.ca().map(|ca| format!(" TENURE_CACERT={}", ca.display()));
        println!(
            "    clients in another shell: export TENURE_ENDPOINTS={}{} TENURE_TOKEN=$(cat {})",
            self.endpoints.join(","),
            ca.unwrap_or_default(),
            self.cluster.dir.path().join(TOKEN_FILE).display()
        );
        let dashboard = format!("{}/", self.endpoints[0]);
        match self.cluster.ca() {
            Some(ca) => println!(
                "==> dashboard of node 1: {dashboard} (every node serves one; the certificate \
                 is this demo's own CA, {}: let the browser accept it, then paste the API \
                 token; --duration 300 keeps the cluster up to watch)",
                ca.display()
            ),
            None => println!(
                "==> dashboard of node 1: {dashboard} (every node serves one; paste the API \
                 token; --duration 300 keeps the cluster up to watch)"
            ),
        }
        Ok(())
    }

    /// Act 1: the first election: (leader index, its status).
    async fn first_election(&self, started: Instant) -> anyhow::Result<(usize, StatusBody)> {
        let (leader, status, took) =
            wait_for_new_leader(&self.client, &self.endpoints, 0, started, self.election_bound)
                .await?;
        println!(
            "==> node {} elected leader of term {} ({} ms after start)",
            status.id,
            status.term,
            took.as_millis()
        );
        Ok((leader, status))
    }

    /// Act 2: SIGKILL the leader: (new leader index, its status, failover time).
    async fn crash_leader(
        &mut self,
        leader: usize,
        status: &StatusBody,
    ) -> anyhow::Result<(usize, StatusBody, Duration)> {
        let (survivors, survivor_endpoints) = self.others(leader);
        println!("==> SIGKILL node {} (the leader)", leader + 1);
        let killed_at = Instant::now();
        self.cluster.signal(leader, Signal::SIGKILL)?;
        let (j, new, failover) = wait_for_new_leader(
            &self.client,
            &survivor_endpoints,
            status.term,
            killed_at,
            self.election_bound,
        )
        .await?;
        self.cluster.wait_exit(leader, EXIT_TIMEOUT).await?;
        println!(
            "==> FAILOVER: node {} leads term {}, {} ms after the crash \
             (followers wait one election timeout, {} ms, after the last heartbeat they heard)",
            new.id,
            new.term,
            failover.as_millis(),
            self.election_timeout_ms
        );
        Ok((survivors[j], new, failover))
    }

    /// Act 3: restart the crashed node: it must rejoin as a follower without an
    /// election. Returns the leader's term afterwards.
    async fn rejoin(
        &mut self,
        leader: usize,
        new_leader: usize,
        new: &StatusBody,
    ) -> anyhow::Result<u64> {
        println!("==> restarting node {}", leader + 1);
        let restarted_at = Instant::now();
        self.cluster.start(leader)?;
        let rejoined = loop {
            let status = self.client.status_within(&self.endpoints[leader], FAST_POLL_TIMEOUT);
            if let Ok(s) = status.await {
                if s.role == "follower" && s.leader == Some(new.id) {
                    break s;
                }
            }
            if restarted_at.elapsed() > self.election_bound {
                bail!("node {} did not rejoin within {:?}", leader + 1, self.election_bound);
            }
            sleep(LIVE_POLL / 5).await;
        };
        let now_leader = self.client.status(&self.endpoints[new_leader]).await?;
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
        Ok(now_leader.term)
    }

    /// Act 4: planned handover with POST /v1/transfer, from `new_leader` back to
    /// the restarted node: (its status as leader, handover time).
    async fn transfer_back(
        &self,
        leader: usize,
        new_leader: usize,
        new: &StatusBody,
        term: u64,
    ) -> anyhow::Result<(StatusBody, Duration)> {
        let target = self.cluster.servers[leader].args.id;
        println!("==> POST /v1/transfer {{\"to\": {target}}} to node {}", new.id);
        let asked_at = Instant::now();
        self.request_transfer(&self.endpoints[new_leader], target).await?;
        let (_, taken, handover) = wait_for_new_leader(
            &self.client,
            &self.endpoints[leader..=leader],
            term,
            asked_at,
            self.election_bound,
        )
        .await?;
        println!(
            "==> TRANSFER: node {} leads term {}, {} ms after the request",
            taken.id,
            taken.term,
            handover.as_millis()
        );
        Ok((taken, handover))
    }

    /// Asks the leader at `endpoint` to hand over to node `target`, retrying
    /// while the target has not yet acknowledged the leader (HTTP 409).
    async fn request_transfer(&self, endpoint: &str, target: u64) -> anyhow::Result<()> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let answer = self
                .client
                .post::<TransferBody>(
                    endpoint,
                    "/v1/transfer",
                    &serde_json::json!({ "to": target }),
                )
                .await?;
            match answer.body {
                Ok(_) => return Ok(()),
                Err(_) if attempt < TRANSFER_ATTEMPTS && answer.status.as_u16() == 409 => {
                    sleep(LIVE_POLL).await;
                }
                Err(e) => bail!("transfer refused (HTTP {}): {}", answer.status, e.error),
            }
        }
    }

    /// Act 5: graceful stop of the leader at `leader`: it cedes leadership before
    /// exiting. Returns the handover time.
    async fn graceful_stop(
        &mut self,
        leader: usize,
        taken: &StatusBody,
    ) -> anyhow::Result<Duration> {
        let (_, other_endpoints) = self.others(leader);
        println!("==> SIGTERM node {} (the leader): graceful stop", taken.id);
        let term_at = Instant::now();
        self.cluster.signal(leader, Signal::SIGTERM)?;
        let (_, next, graceful) = wait_for_new_leader(
            &self.client,
            &other_endpoints,
            taken.term,
            term_at,
            self.election_bound,
        )
        .await?;
        let exit = self.cluster.wait_exit(leader, EXIT_TIMEOUT).await?;
        println!(
            "==> GRACEFUL STOP: node {} leads term {}, {} ms after SIGTERM \
             (no election timeout waited); node {} exited ({exit})",
            next.id,
            next.term,
            graceful.as_millis(),
            taken.id
        );
        Ok(graceful)
    }
}

/// Aborts a background task when dropped (the live view ends with the script).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
