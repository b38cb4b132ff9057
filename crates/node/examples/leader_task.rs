//! Runs a task only while this node leads, and prints the fencing token it
//! holds. Start one process per node:
//!
//! ```text
//! cargo run -- cert --out /tmp/tenure-certs --nodes 1,2,3 --cluster-id demo
//! export TENURE_PEERS=1=127.0.0.1:7101,2=127.0.0.1:7102,3=127.0.0.1:7103 TENURE_TLS_DIR=/tmp/tenure-certs
//! cargo run -p tenure-node --example leader_task -- --id 1 --data-dir /tmp/tenure-1
//! cargo run -p tenure-node --example leader_task -- --id 2 --data-dir /tmp/tenure-2
//! cargo run -p tenure-node --example leader_task -- --id 3 --data-dir /tmp/tenure-3
//! ```
//!
//! Every flag can also come from the environment: `TENURE_ID`, `TENURE_PEERS`,
//! `TENURE_DATA_DIR`, `TENURE_CLUSTER`, `TENURE_LISTEN`, `TENURE_HEARTBEAT_MS`,
//! `TENURE_ELECTION_TIMEOUT_MS`, `TENURE_PROTOCOL` (raft, ranked or paxos),
//! `TENURE_TLS_DIR` (the output of `tenure cert`: `node-<id>.pem`,
//! `node-<id>-key.pem`, `ca.pem`). Without a TLS directory, `--insecure-no-tls`
//! runs without TLS (one machine, development only). Stop a node with Ctrl-C:
//! if it leads, it hands leadership over before exiting.

use std::error::Error;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use tenure_node::{FencingToken, LeadershipEvent, NodeConfig, NodeHandle, NodeId, Security};
use tokio::sync::broadcast::error::RecvError;
use tokio::task::JoinHandle;

type Result<T> = std::result::Result<T, Box<dyn Error>>;

/// How often the leader's task does a unit of work.
const WORK_INTERVAL: Duration = Duration::from_millis(500);

/// `--name value` from the command line, else `TENURE_<NAME>` from the environment.
fn setting(args: &[String], name: &str) -> Option<String> {
    let flag = format!("--{name}");
    args.windows(2)
        .find(|w| w[0] == flag)
        .map(|w| w[1].clone())
        .or_else(|| std::env::var(format!("TENURE_{}", name.to_uppercase().replace('-', "_"))).ok())
}

fn required(args: &[String], name: &str) -> Result<String> {
    setting(args, name).ok_or_else(|| {
        format!("missing --{name} (or TENURE_{})", name.to_uppercase().replace('-', "_")).into()
    })
}

/// Parses `1=127.0.0.1:7101,2=127.0.0.1:7102`.
fn parse_peers(s: &str) -> Result<Vec<(NodeId, SocketAddr)>> {
    s.split(',')
        .map(|p| {
            let (id, addr) =
                p.split_once('=').ok_or_else(|| format!("peer {p:?} is not ID=HOST:PORT"))?;
            Ok((NodeId(id.trim().parse()?), addr.trim().parse()?))
        })
        .collect()
}

/// Mutual TLS with the files `tenure cert` wrote to `--tls-dir`, or none
/// with `--insecure-no-tls`.
fn security(args: &[String], id: NodeId) -> Result<Security> {
    match setting(args, "tls-dir") {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            Ok(Security::MutualTls(tenure_node::TlsFiles {
                cert: dir.join(format!("node-{}.pem", id.0)),
                key: dir.join(format!("node-{}-key.pem", id.0)),
                ca: dir.join("ca.pem"),
            }))
        }
        None if args.iter().any(|a| a == "--insecure-no-tls") => Ok(Security::InsecureNoTls),
        None => Err("give --tls-dir DIR (made by `tenure cert`) or --insecure-no-tls".into()),
    }
}

fn config() -> Result<NodeConfig> {
    let args: Vec<String> = std::env::args().collect();
    let id = NodeId(required(&args, "id")?.parse()?);
    let peers = parse_peers(&required(&args, "peers")?)?;
    let listen = match setting(&args, "listen") {
        Some(a) => a.parse()?,
        None => peers
            .iter()
            .find(|(p, _)| *p == id)
            .map(|&(_, a)| a)
            .ok_or("this node's id is not among --peers")?,
    };
    let ms = |name: &str, default: u64| -> Result<Duration> {
        Ok(Duration::from_millis(
            setting(&args, name).map(|v| v.parse()).transpose()?.unwrap_or(default),
        ))
    };
    Ok(NodeConfig {
        id,
        cluster_id: setting(&args, "cluster").unwrap_or_else(|| "demo".into()),
        listen,
        peers,
        data_dir: PathBuf::from(required(&args, "data-dir")?),
        heartbeat_interval: ms("heartbeat-ms", 100)?,
        election_timeout: ms("election-timeout-ms", 1000)?,
        protocol: setting(&args, "protocol").map(|p| p.parse()).transpose()?.unwrap_or_default(),
        round_trip: None,
        security: security(&args, id)?,
        single_node: false,
        api_address: None,
        etcd_address: None,
        joining: false,
    })
}

/// The work done only by the leader. It re-checks its lease before each unit
/// of work and tags the work with its fencing token, so storage can refuse a
/// deposed leader's late writes.
async fn leader_work(node: NodeHandle, token: FencingToken) {
    let mut unit = 0u64;
    loop {
        if !node.is_leader() {
            println!("lease ended: pausing work");
            return;
        }
        unit += 1;
        println!("[leader, fencing token {token}] unit of work #{unit}");
        tokio::time::sleep(WORK_INTERVAL).await;
    }
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match run().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "tenure_node=info".into()),
        )
        .init();
    let node = tenure_node::start(config()?).await?;
    let handle = node.handle();
    let mut events = handle.events();
    let mut task: Option<JoinHandle<()>> = None;
    let stop = |task: &mut Option<JoinHandle<()>>| {
        if let Some(t) = task.take() {
            t.abort();
            println!("stopped the leader task");
        }
    };
    loop {
        tokio::select! {
            event = events.recv() => match event {
                Ok(LeadershipEvent::BecameLeader { term, fencing_token }) => {
                    println!("became leader of term {term}; fencing token {fencing_token}");
                    stop(&mut task);
                    task = Some(tokio::spawn(leader_work(handle.clone(), fencing_token)));
                }
                Ok(LeadershipEvent::LostLeadership { term }) => {
                    println!("lost leadership of term {term}");
                    stop(&mut task);
                }
                Ok(LeadershipEvent::LeaderObserved { leader, term, fencing_token }) => {
                    println!("node {leader} leads term {term} (fencing token {fencing_token})");
                }
                Ok(LeadershipEvent::NoLeader { term }) => println!("no leader in term {term}"),
                Err(RecvError::Lagged(_)) => {
                    // Missed events: fall back to the current state.
                    if !handle.is_leader() {
                        stop(&mut task);
                    }
                }
                Err(RecvError::Closed) => break,
            },
            _ = tokio::signal::ctrl_c() => break,
            _ = handle.stop_requested() => break,
        }
    }
    stop(&mut task);
    node.shutdown().await;
    Ok(())
}
