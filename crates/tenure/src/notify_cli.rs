//! `tenure notify-dead`: tells the nodes that an incarnation of a node is
//! dead (`POST /v1/peers/{id}/dead` on every endpoint given), so that they
//! stop waiting for the election timeout when it was their leader.

use crate::client::{connect, CACERT_ENV, DEFAULT_ENDPOINTS, ENDPOINTS_ENV};
use crate::rest::{AuthRefused, Client};
use anyhow::{bail, Context};
use clap::{ArgGroup, Args};
use std::path::PathBuf;
use std::process::ExitCode;
use tenure::tokens::TokenArgs;
use tenure_api::DeadNoticeBody;
use tenure_node::storage::dead_incarnation;

/// `--help` after the flags: an example, the exit status, the trust it asks for,
/// and the systemd unit it is made for.
pub const NOTIFY_HELP: &str = "\
Example: node 2's process is dead (incarnation 7, as `tenure status --json` showed); tell nodes 1
and 3 (on node 2's host, --data-dir /var/lib/tenure/node-2 may replace --incarnation, see below):
  tenure notify-dead --node 2 --incarnation 7 --endpoints 10.0.0.1:8001,10.0.0.3:8003 \\
    --cacert /etc/tenure/ca.pem --token-file /etc/tenure/notify.token

Exit status: 0 when at least one node accepted the notice, 1 otherwise (each endpoint's answer \
is printed).

A node accepts a notice only about the node's current incarnation (the one its handshakes \
showed: `tenure status --json` lists each peer's); an older one is stale (nothing to do), a \
higher one was never seen. An accepted notice is believed: the nodes stop supporting that \
process at once and, if it led, elect another leader without waiting for the election \
timeout. Send it only when the process is certainly dead (its supervisor reaped it, systemd \
ran ExecStopPost after it exited, you killed it); if in doubt, kill it first, then notify.

With systemd, in the node's unit (ExecStopPost runs after the main process exited; --data-dir \
reads the incarnation the dead process took, and refuses while a process holds the directory's \
lock; the leading `-` keeps a failed notice from failing the unit):

  [Service]
  ExecStart=/usr/local/bin/tenure server --config /etc/tenure/node-2.toml
  ExecStopPost=-/usr/local/bin/tenure notify-dead --node 2 --data-dir /var/lib/tenure/node-2 \\
      --endpoints 10.0.0.1:8001,10.0.0.3:8003 --cacert /etc/tenure/ca.pem \\
      --token-file /etc/tenure/notify.token
  Restart=always";

/// Flags of `tenure notify-dead`.
#[derive(Args, Debug)]
#[command(group(ArgGroup::new("which").required(true).args(["incarnation", "data_dir"])))]
pub struct NotifyDeadArgs {
    /// The node whose process is dead.
    #[arg(long, value_name = "ID")]
    pub node: u64,
    /// The incarnation of the dead process (`tenure status --json` shows each peer's).
    #[arg(long, value_name = "N")]
    pub incarnation: Option<u64>,
    /// Read the incarnation from the dead node's data directory instead, on its host once its
    /// process exited (refused while a process holds the directory's lock).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// HTTP API endpoints of the nodes to tell, comma-separated (the other voters; every one
    /// is asked).
    #[arg(long, short = 'e', env = ENDPOINTS_ENV, value_name = "URL,...", default_value = DEFAULT_ENDPOINTS)]
    pub endpoints: String,
    /// The cluster's CA certificate (PEM, from `tenure cert`): endpoints without a scheme
    /// are then https://, and the servers' certificates are checked against it.
    #[arg(long, env = CACERT_ENV, value_name = "FILE")]
    pub cacert: Option<PathBuf>,
    /// The token needs role admin.
    #[command(flatten)]
    pub auth: TokenArgs,
}

/// What one endpoint answered.
pub(crate) enum Answered {
    /// It took the notice.
    Accepted(DeadNoticeBody),
    /// It answered with an error: final.
    Refused { status: u16, error: String, current: Option<u64> },
    /// No answer (or one that could not be read).
    Failed(anyhow::Error),
}

/// `tenure notify-dead`.
pub async fn run(args: NotifyDeadArgs) -> anyhow::Result<ExitCode> {
    if args.node == 0 {
        bail!("--node 0: node ids are positive integers");
    }
    let incarnation = incarnation(&args)?;
    let (client, endpoints) = connect(args.cacert.as_deref(), &args.auth, &args.endpoints)?;
    let asks = endpoints.iter().map(|e| ask(&client, e, args.node, incarnation));
    let answers = futures_util::future::join_all(asks).await;
    let mut accepted = 0;
    for (endpoint, answer) in endpoints.iter().zip(&answers) {
        match answer {
            Answered::Accepted(body) => {
                accepted += 1;
                let led = if body.was_leader {
                    "; it was that node's leader: it elects another now"
                } else {
                    ""
                };
                println!("{endpoint}  accepted{led}");
            }
            Answered::Refused { status, error, current } => {
                let current = current.map(|c| format!(" [current incarnation {c}]"));
                println!(
                    "{endpoint}  refused (HTTP {status}): {error}{}",
                    current.unwrap_or_default()
                );
            }
            Answered::Failed(e) => println!("{endpoint}  no answer: {e:#}"),
        }
    }
    if accepted > 0 {
        println!(
            "incarnation {incarnation} of node {}: {accepted} of {} nodes accepted the notice",
            args.node,
            endpoints.len()
        );
        return Ok(ExitCode::SUCCESS);
    }
    // Every node has the same tokens: a refused token is the caller's to fix.
    if let Some(Answered::Failed(e)) =
        answers.iter().find(|a| matches!(a, Answered::Failed(e) if e.is::<AuthRefused>()))
    {
        bail!("{e:#}");
    }
    eprintln!("incarnation {incarnation} of node {}: no node accepted the notice", args.node);
    Ok(ExitCode::FAILURE)
}

/// The incarnation of the flags: given, or read from the data directory.
fn incarnation(args: &NotifyDeadArgs) -> anyhow::Result<u64> {
    if let Some(n) = args.incarnation {
        if n == 0 {
            bail!("--incarnation 0: incarnations are positive integers");
        }
        return Ok(n);
    }
    let dir = args.data_dir.as_deref().context("give --incarnation N or --data-dir DIR")?;
    let dead = dead_incarnation(dir).with_context(|| format!("--data-dir {}", dir.display()))?;
    if dead.node_id.0 != args.node {
        bail!(
            "--data-dir {} belongs to node {} of cluster {:?}, not node {}",
            dir.display(),
            dead.node_id,
            dead.cluster_id,
            args.node
        );
    }
    Ok(dead.incarnation)
}

/// Sends the notice to one endpoint.
pub(crate) async fn ask(client: &Client, endpoint: &str, node: u64, incarnation: u64) -> Answered {
    let path = format!("/v1/peers/{node}/dead");
    let body = serde_json::json!({ "incarnation": incarnation });
    match client.post::<DeadNoticeBody>(endpoint, &path, &body).await {
        Ok(answer) => match answer.body {
            Ok(body) => Answered::Accepted(body),
            Err(e) => Answered::Refused {
                status: answer.status.as_u16(),
                error: e.error,
                current: e.current_incarnation,
            },
        },
        Err(e) => Answered::Failed(e),
    }
}
