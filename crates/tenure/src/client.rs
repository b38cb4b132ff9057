//! `tenure status`, `tenure watch` and `tenure transfer`: CLI clients of the HTTP API.

use crate::rest::{parse_endpoints, AuthRefused, Client, ClientOptions};
use anyhow::{bail, Context};
use clap::Args;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, SystemTime};
use tenure::tokens::TokenArgs;
use tenure_api::{ConfigPositionBody, LeadershipBody, StatusBody, TransferBody};
use tokio::time::Instant;

/// The HTTP APIs of the default local three-node cluster (https with
/// `--cacert`, else http).
pub const DEFAULT_ENDPOINTS: &str = "127.0.0.1:8001,127.0.0.1:8002,127.0.0.1:8003";
pub use tenure_client::CACERT_ENV;
/// Environment variable read when `--endpoints` is not given.
pub const ENDPOINTS_ENV: &str = "TENURE_ENDPOINTS";
/// Pause before `watch` tries the next endpoint after losing one; doubles up to the max.
const WATCH_BACKOFF_MIN: Duration = Duration::from_millis(100);
/// Longest pause between reconnection attempts of `watch`.
const WATCH_BACKOFF_MAX: Duration = Duration::from_secs(2);
/// How often `transfer` checks whether the new leader took over.
const TRANSFER_POLL: Duration = Duration::from_millis(5);

/// `tenure status`'s exit code when the endpoints answer but disagree: two
/// leaders, or another cluster id or voter set (see [`disagreements`]), or
/// a node cannot talk to a peer that refused its handshake.
pub const STATUS_DISAGREE_EXIT: u8 = 2;

/// Flags of `tenure status`.
#[derive(Args, Debug)]
#[command(after_help = "\
Examples:
  tenure status
  tenure status --endpoints https://10.0.0.1:8001,https://10.0.0.2:8001,https://10.0.0.3:8001 \\
    --cacert /etc/tenure/ca.pem --token-file ~/.tenure/read.token --json

Exit status: 0 when an endpoint answered and the answers agree; 1 when none answered; 2 when
they disagree: two nodes report leading, the endpoints report another cluster id or voter set,
or a node cannot talk to a peer that refused its handshake (another cluster id, protocol,
election timings or voter set); each is a line on standard error, starting with
\"tenure status:\".")]
pub struct StatusArgs {
    /// HTTP API endpoints of the nodes, comma-separated.
    #[arg(long, short = 'e', env = ENDPOINTS_ENV, value_name = "URL,...", default_value = DEFAULT_ENDPOINTS)]
    pub endpoints: String,
    /// The cluster's CA certificate (PEM, from `tenure cert`): endpoints without a scheme
    /// are then https://, and the servers' certificates are checked against it.
    #[arg(long, env = CACERT_ENV, value_name = "FILE")]
    pub cacert: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub auth: TokenArgs,
}

/// Flags of `tenure watch`.
#[derive(Args, Debug)]
#[command(after_help = "\
Examples:
  tenure watch
  tenure watch --endpoints 10.0.0.1:8001,10.0.0.2:8001 --cacert /etc/tenure/ca.pem --count 3")]
pub struct WatchArgs {
    /// HTTP API endpoints of the nodes, comma-separated; the first that answers is followed.
    #[arg(long, short = 'e', env = ENDPOINTS_ENV, value_name = "URL,...", default_value = DEFAULT_ENDPOINTS)]
    pub endpoints: String,
    /// The cluster's CA certificate (PEM, from `tenure cert`): endpoints without a scheme
    /// are then https://, and the servers' certificates are checked against it.
    #[arg(long, env = CACERT_ENV, value_name = "FILE")]
    pub cacert: Option<PathBuf>,
    /// Exit after printing this many changes (the current state counts as one) [default: never].
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,
    #[command(flatten)]
    pub auth: TokenArgs,
}

/// Flags of `tenure transfer`.
#[derive(Args, Debug)]
#[command(after_help = "\
Example: hand leadership to node 2 (the token needs role admin):
  tenure transfer --to 2 --cacert certs/ca.pem --token-file certs/admin.token")]
pub struct TransferArgs {
    /// The node to hand leadership to.
    #[arg(long, value_name = "N", value_parser = crate::usage::node_id)]
    pub to: u64,
    /// HTTP API endpoints of the nodes, comma-separated; the leader is found among them.
    #[arg(long, short = 'e', env = ENDPOINTS_ENV, value_name = "URL,...", default_value = DEFAULT_ENDPOINTS)]
    pub endpoints: String,
    /// The cluster's CA certificate (PEM, from `tenure cert`): endpoints without a scheme
    /// are then https://, and the servers' certificates are checked against it.
    #[arg(long, env = CACERT_ENV, value_name = "FILE")]
    pub cacert: Option<PathBuf>,
    /// How long to wait for the new leader to take over, in milliseconds.
    #[arg(long, value_name = "N", default_value_t = 5000)]
    pub wait_ms: u64,
    /// The token needs role admin.
    #[command(flatten)]
    pub auth: TokenArgs,
}

/// One endpoint's answer, as printed by `status --json`.
#[derive(Serialize)]
struct Row {
    endpoint: String,
    status: Option<StatusBody>,
    error: Option<String>,
    /// The innermost cause of `error`, short enough for the table.
    #[serde(skip)]
    cause: Option<String>,
    /// Whether the endpoint refused the token (401/403) rather than not answering.
    #[serde(skip)]
    refused: bool,
}

/// Asks every endpoint for its status, concurrently.
async fn query_all(client: &Client, endpoints: &[String]) -> Vec<Row> {
    let queries = endpoints.iter().map(|e| async move {
        match client.status(e).await {
            Ok(s) => Row {
                endpoint: e.clone(),
                status: Some(s),
                error: None,
                cause: None,
                refused: false,
            },
            Err(err) => Row {
                endpoint: e.clone(),
                status: None,
                error: Some(format!("{err:#}")),
                cause: Some(err.root_cause().to_string()),
                refused: err.downcast_ref::<AuthRefused>().is_some(),
            },
        }
    });
    futures_util::future::join_all(queries).await
}

/// The client of a command (trusting `cacert`, sending the token of `auth`)
/// and its endpoints (https:// by default when there is a CA).
pub(crate) fn connect(
    cacert: Option<&Path>,
    auth: &TokenArgs,
    endpoints: &str,
) -> anyhow::Result<(Client, Vec<String>)> {
    let token = auth.token()?;
    let client = Client::new(ClientOptions { cacert, token: token.as_deref() })?;
    let endpoints = parse_endpoints(endpoints, client.https())?;
    Ok((client, endpoints))
}

/// `tenure status`.
pub async fn status(args: StatusArgs) -> anyhow::Result<ExitCode> {
    let (client, endpoints) = connect(args.cacert.as_deref(), &args.auth, &args.endpoints)?;
    let rows = query_all(&client, &endpoints).await;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        print!("{}", table(&rows));
    }
    let answered: Vec<(&str, &StatusBody)> =
        rows.iter().filter_map(|r| Some((r.endpoint.as_str(), r.status.as_ref()?))).collect();
    let (refused, stale) = handshake_errors(&answered);
    for line in refused.iter().chain(&stale) {
        eprintln!("tenure status: {line}");
    }
    let disagree = disagreements(&answered);
    for line in &disagree {
        eprintln!("tenure status: {line}");
    }
    Ok(if answered.is_empty() {
        ExitCode::FAILURE
    } else if !disagree.is_empty() || !refused.is_empty() {
        ExitCode::from(STATUS_DISAGREE_EXIT)
    } else {
        ExitCode::SUCCESS
    })
}

/// What the answers of the endpoints (`(endpoint, status)`) say that cannot
/// all be true of one healthy cluster, a sentence each: two nodes that both
/// report leading (the same fencing token from two leaders breaks fencing),
/// one node id answering in two incarnations at once (a duplicate node id),
/// and endpoints that report another cluster id or another voter set.
pub fn disagreements(answered: &[(&str, &StatusBody)]) -> Vec<String> {
    let mut out = Vec::new();
    let mut leaders: Vec<&StatusBody> =
        answered.iter().map(|(_, s)| *s).filter(|s| s.role == "leader").collect();
    leaders.sort_by_key(|s| s.id);
    leaders.dedup_by_key(|s| s.id);
    if leaders.len() > 1 {
        let each: Vec<String> = leaders
            .iter()
            .map(|s| {
                format!("node {} (term {}, fencing token {})", s.id, s.term, opt(s.fencing_token))
            })
            .collect();
        let tokens: Vec<Option<u64>> = leaders.iter().map(|s| s.fencing_token).collect();
        let same = tokens.windows(2).any(|w| w[0].is_some() && w[0] == w[1]);
        out.push(format!(
            "TWO LEADERS: {} all report leading{}; one cluster has one leader: check each \
             node's --peers and --cluster-id (the lines below say which differ)",
            each.join(", "),
            if same { ", with the same fencing token" } else { "" }
        ));
    }
    for (i, (e1, s1)) in answered.iter().enumerate() {
        if let Some((e2, s2)) = answered[i + 1..].iter().find(|(_, s2)| {
            s2.id == s1.id && s2.incarnation.is_some() && s2.incarnation != s1.incarnation
        }) {
            out.push(format!(
                "node {} answers at {e1} (incarnation {}) and at {e2} (incarnation {}): two \
                 processes run with node id {}; give each node its own --id",
                s1.id,
                opt(s1.incarnation),
                opt(s2.incarnation),
                s1.id
            ));
        }
    }
    let all: Vec<&StatusBody> = answered.iter().map(|(_, s)| *s).collect();
    out.extend(differ(&all, "cluster id (--cluster-id)", &|s| {
        s.cluster_id.as_ref().map(|c| format!("in cluster {c:?}"))
    }));
    // Nodes holding different configurations are a change of members on
    // its way, not a disagreement: only those that hold the same one (the
    // bootstrap lists of --peers, position 0@0, among them) must agree.
    let position = |s: &StatusBody| s.membership.as_ref().map(|m| m.config);
    let mut positions: Vec<Option<ConfigPositionBody>> = Vec::new();
    for s in &all {
        if !positions.contains(&position(s)) {
            positions.push(position(s));
        }
    }
    for p in positions {
        let same: Vec<&StatusBody> = all.iter().copied().filter(|s| position(s) == p).collect();
        out.extend(differ(&same, "voters (the ids of --peers)", &|s| {
            let ids: Vec<String> = s.voters.as_ref()?.iter().map(u64::to_string).collect();
            Some(format!("counts voters {{{}}}", ids.join(",")))
        }));
    }
    out
}

/// A line naming which of `nodes` report which value of `what` (as `of`
/// words it), if they do not all report the same.
fn differ(
    nodes: &[&StatusBody],
    what: &str,
    of: &dyn Fn(&StatusBody) -> Option<String>,
) -> Option<String> {
    let mut seen: Vec<(String, Vec<String>)> = Vec::new();
    for s in nodes {
        let Some(v) = of(s) else { continue };
        match seen.iter_mut().find(|(x, _)| *x == v) {
            Some((_, ids)) => ids.push(s.id.to_string()),
            None => seen.push((v, vec![s.id.to_string()])),
        }
    }
    (seen.len() > 1).then(|| {
        let each: Vec<String> =
            seen.iter().map(|(v, ids)| format!("node {} {v}", ids.join(", node "))).collect();
        format!("the endpoints disagree on the {what}: {}", each.join("; "))
    })
}

/// The peers whose last handshake with an answering node failed, and why,
/// a line each: first those it is not connected to (a refusal that keeps
/// them apart: another cluster id, protocol, timings or voter set, a
/// duplicate id), then those connected since (the refusal was of another
/// connection, an impostor's or an earlier one).
fn handshake_errors(answered: &[(&str, &StatusBody)]) -> (Vec<String>, Vec<String>) {
    let mut apart = Vec::new();
    let mut connected = Vec::new();
    for (_, s) in answered {
        for p in &s.peers {
            let Some(e) = p.handshake_error.as_ref() else { continue };
            if p.connected {
                connected.push(format!(
                    "node {} (connected to node {} now) had a handshake refused: {e}",
                    s.id, p.id
                ));
            } else {
                apart.push(format!("node {} cannot talk to node {}: {e}", s.id, p.id));
            }
        }
    }
    (apart, connected)
}

fn opt(v: Option<u64>) -> String {
    v.map_or_else(|| "-".to_string(), |v| v.to_string())
}

/// How many hex digits of a data-directory identity the table shows (the
/// JSON output has all 32).
const DIRECTORY_DIGITS: usize = 8;

/// The status table, one row per endpoint. `MEMBER` is the node's place in
/// the configuration its own log holds (voter, learner, or `-` when it is
/// not in it), `CONFIG` that configuration's position (`index@token`, `*`
/// while this node has not seen it commit), `LAG` the committed entries it
/// lacks as the leader among the rows sees it. The incarnation and the data
/// directory's identity come last: the incarnation is a wall-clock reading
/// in microseconds at the node's first start, counted up by one at each
/// restart (crates/node/src/storage/incarnation.rs), so 16 digits wide; the
/// identity is shown by its first [`DIRECTORY_DIGITS`] hex digits.
fn table(rows: &[Row]) -> String {
    let width = rows.iter().map(|r| r.endpoint.len()).max().unwrap_or(8).max(8);
    let mut out = format!(
        "{:<width$}  {:>3}  {:<8}  {:<13}  {:>5}  {:>6}  {:>7}  {:>5}  {:<7}  {:>8}  {:>5}  \
         {:>16}  {}\n",
        "ENDPOINT",
        "ID",
        "PROTOCOL",
        "ROLE",
        "TERM",
        "LEADER",
        "FENCING",
        "PEERS",
        "MEMBER",
        "CONFIG",
        "LAG",
        "INCARNATION",
        "DIRECTORY"
    );
    let leader = rows.iter().filter_map(|r| r.status.as_ref()).find(|s| s.role == "leader");
    for r in rows {
        match &r.status {
            Some(s) => out.push_str(&format!(
                "{:<width$}  {:>3}  {:<8}  {:<13}  {:>5}  {:>6}  {:>7}  {:>5}  {:<7}  {:>8}  \
                 {:>5}  {:>16}  {}\n",
                r.endpoint,
                s.id,
                s.protocol,
                s.role,
                s.term,
                opt(s.leader),
                opt(s.fencing_token),
                format!("{}/{}", s.connected_peers(), s.peers.len()),
                member_kind(s),
                s.membership.as_ref().map_or("-".to_string(), |m| {
                    format!("{}{}", m.config, if m.committed { "" } else { "*" })
                }),
                opt(lag(leader, s)),
                opt(s.incarnation),
                s.directory.as_deref().map_or("-", |d| d.get(..DIRECTORY_DIGITS).unwrap_or(d)),
            )),
            None => out.push_str(&format!(
                "{:<width$}  {} ({})\n",
                r.endpoint,
                if r.refused { "refused" } else { "unreachable" },
                r.cause.as_deref().unwrap_or("")
            )),
        }
    }
    out
}

/// What node `s` is in the configuration its own log holds.
fn member_kind(s: &StatusBody) -> &'static str {
    match &s.membership {
        Some(m) if m.voters.contains(&s.id) => "voter",
        Some(m) if m.learners.contains(&s.id) => "learner",
        Some(_) => "-",
        None => "?",
    }
}

/// The committed entries node `s` lacks, as `leader` sees it (0 for the
/// leader itself); None without a leader's view of it.
fn lag(leader: Option<&StatusBody>, s: &StatusBody) -> Option<u64> {
    let log = leader?.replication.as_ref()?;
    if leader?.id == s.id {
        return Some(0);
    }
    let matched = log.followers.iter().find(|f| f.id == s.id)?.match_index;
    Some(log.commit_index.saturating_sub(matched))
}

/// Wall-clock time for output lines, to the millisecond, UTC.
pub fn timestamp() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

/// `tenure watch`.
pub async fn watch(args: WatchArgs) -> anyhow::Result<ExitCode> {
    let (client, endpoints) = connect(args.cacert.as_deref(), &args.auth, &args.endpoints)?;
    let mut last: Option<(Option<u64>, u64)> = None;
    let mut printed: u64 = 0;
    let mut backoff = WATCH_BACKOFF_MIN;
    let limit = args.count.unwrap_or(u64::MAX);
    // Round-robin over the endpoints: follow one until its stream ends, then the next.
    for endpoint in endpoints.iter().cycle() {
        let mut on_event = |ev: LeadershipBody| {
            let key = (ev.leader, ev.term);
            if last != Some(key) {
                last = Some(key);
                printed += 1;
                let who = match ev.leader {
                    Some(id) => format!("leader {id}"),
                    None => "no leader".to_string(),
                };
                println!(
                    "{}  {who:<10}  term {:<4}  fencing {:<4}  (via {endpoint}, a {})",
                    timestamp(),
                    ev.term,
                    opt(ev.fencing_token),
                    ev.role
                );
            }
            printed < limit
        };
        let followed = tokio::select! {
            r = client.watch(endpoint, &mut on_event) => r,
            _ = tokio::signal::ctrl_c() => return Ok(ExitCode::SUCCESS),
        };
        if printed >= limit {
            return Ok(ExitCode::SUCCESS);
        }
        match followed {
            Ok(()) => eprintln!("{}  {endpoint}: stream ended; switching", timestamp()),
            // Every node has the same tokens: the next one would refuse too.
            Err(e) if e.downcast_ref::<AuthRefused>().is_some() => return Err(e),
            Err(e) => eprintln!("{}  {e:#}; trying the next endpoint", timestamp()),
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(WATCH_BACKOFF_MAX);
    }
    Ok(ExitCode::SUCCESS)
}

/// The leader that a node among `rows` names (none of them leads): its
/// endpoint, from the HTTP address that node knows, and its status; an
/// error that says what to do when no node names one, or the leader's
/// address is not known or it does not answer as leader.
async fn follow_named_leader(
    client: &Client,
    rows: &[Row],
) -> anyhow::Result<(String, StatusBody)> {
    let asked = rows.iter().map(|r| r.endpoint.as_str()).collect::<Vec<_>>().join(",");
    let Some((via, named)) =
        rows.iter().find_map(|r| r.status.as_ref().filter(|s| s.leader.is_some()).map(|s| (r, s)))
    else {
        bail!("no leader among {asked}, and none of them knows one; check `tenure status --endpoints {asked}`");
    };
    let id = named.leader.unwrap_or_default();
    let Some(address) = named.leader_http_address.as_deref() else {
        bail!(
            "{} (node {}) follows node {id}, whose HTTP API address it does not know: give node              {id}'s endpoint in --endpoints (or TENURE_ENDPOINTS)",
            via.endpoint,
            named.id
        );
    };
    let endpoint = tenure_client::http::normalize_endpoint(address, client.https())?;
    match client.status(&endpoint).await {
        Ok(s) if s.role == "leader" => Ok((endpoint, s)),
        Ok(s) => bail!(
            "{} (node {}) names node {id} as leader, but {endpoint} (node {}) answers as {};              the leadership is changing: try again",
            via.endpoint,
            named.id,
            s.id,
            s.role
        ),
        Err(e) => Err(e.context(format!(
            "{} (node {}) names node {id} as leader, at {endpoint}",
            via.endpoint, named.id
        ))),
    }
}

/// `tenure transfer`.
pub async fn transfer(args: TransferArgs) -> anyhow::Result<ExitCode> {
    let (client, endpoints) = connect(args.cacert.as_deref(), &args.auth, &args.endpoints)?;
    let mut endpoints = endpoints;
    let rows = query_all(&client, &endpoints).await;
    let found = rows.iter().find_map(|r| {
        r.status.as_ref().filter(|s| s.role == "leader").map(|s| (r.endpoint.clone(), s.clone()))
    });
    let (leader_endpoint, leader) = match found {
        Some(found) => found,
        None => {
            if let Some(refused) = rows.iter().find(|r| r.refused) {
                bail!("{}", refused.cause.as_deref().unwrap_or("the token was refused"));
            }
            // A follower among the endpoints names the leader: follow it.
            let found = follow_named_leader(&client, &rows).await?;
            endpoints.push(found.0.clone());
            found
        }
    };
    if leader.id == args.to {
        println!("node {} already leads (term {})", leader.id, leader.term);
        return Ok(ExitCode::SUCCESS);
    }
    let started = Instant::now();
    let answer = client
        .post::<TransferBody>(
            &leader_endpoint,
            "/v1/transfer",
            &serde_json::json!({ "to": args.to }),
        )
        .await
        .context("asking the leader to transfer")?;
    if let Err(e) = answer.body {
        bail!("node {} refused (HTTP {}): {}", leader.id, answer.status, e.error);
    }
    // Wait until some endpoint reports the target as leader of a newer term.
    let deadline = started + Duration::from_millis(args.wait_ms);
    while Instant::now() < deadline {
        for r in query_all(&client, &endpoints).await {
            if let Some(s) = r.status {
                // The target says it leads, or a node follows it in a newer
                // term (the target need not be among the endpoints).
                let leads = (s.id == args.to && s.role == "leader")
                    || (s.leader == Some(args.to) && s.role != "leader");
                if leads && s.term > leader.term {
                    println!(
                        "leadership moved from node {} (term {}) to node {} (term {}) in {} ms",
                        leader.id,
                        leader.term,
                        args.to,
                        s.term,
                        started.elapsed().as_millis()
                    );
                    return Ok(ExitCode::SUCCESS);
                }
            }
        }
        tokio::time::sleep(TRANSFER_POLL).await;
    }
    bail!(
        "node {} accepted the transfer, but node {} was not seen leading within {} ms",
        leader.id,
        args.to,
        args.wait_ms
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A row of node `id` at `endpoint` with `incarnation`.
    fn answered(endpoint: &str, id: u64, incarnation: Option<u64>) -> Row {
        let status = StatusBody {
            id,
            incarnation,
            directory: incarnation.map(|i| format!("{:032x}", u128::from(i) << 64)),
            protocol: "raft".into(),
            role: if id == 1 { "leader" } else { "follower" }.into(),
            term: 7,
            voted_for: Some(1),
            leader: Some(1),
            leader_address: None,
            fencing_token: Some(7),
            lsn: None,
            storage_failed: false,
            peers: Vec::new(),
            http_address: None,
            leader_http_address: None,
            replication: None,
            cluster_id: None,
            voters: None,
            timings: None,
            membership: None,
        };
        Row {
            endpoint: endpoint.into(),
            status: Some(status),
            error: None,
            cause: None,
            refused: false,
        }
    }

    /// Two leaders, another cluster id or voter set, and one id in two
    /// incarnations are each a line; a healthy cluster is none.
    #[test]
    fn disagreements_are_named_and_a_healthy_cluster_has_none() {
        let node = |id: u64, role: &str, voters: &[u64], inc: u64| {
            let mut r = answered("e", id, Some(inc));
            let s = r.status.as_mut().unwrap();
            s.role = role.into();
            s.cluster_id = Some("c".into());
            s.voters = Some(voters.to_vec());
            r.status.unwrap()
        };
        let healthy = [
            node(1, "leader", &[1, 2, 3], 10),
            node(2, "follower", &[1, 2, 3], 20),
            node(3, "follower", &[1, 2, 3], 30),
        ];
        let rows: Vec<(&str, &StatusBody)> = healthy.iter().map(|s| ("e", s)).collect();
        assert!(disagreements(&rows).is_empty(), "{:?}", disagreements(&rows));

        let typo = [
            node(1, "leader", &[1, 2, 3], 10),
            node(2, "leader", &[2], 20),
            node(3, "follower", &[1, 2, 3], 30),
        ];
        let rows: Vec<(&str, &StatusBody)> = typo.iter().map(|s| ("e", s)).collect();
        let lines = disagreements(&rows);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[0].starts_with("TWO LEADERS: node 1 (term 7, fencing token 7), node 2 (term 7, fencing token 7) all report leading, with the same fencing token"), "{lines:?}");
        assert_eq!(
            lines[1],
            "the endpoints disagree on the voters (the ids of --peers): node 1, node 3 counts \
             voters {1,2,3}; node 2 counts voters {2}"
        );

        let mut other = node(3, "follower", &[1, 2, 3], 30);
        other.cluster_id = Some("d".into());
        let twice = node(2, "follower", &[1, 2, 3], 21);
        let rows: Vec<(&str, &StatusBody)> =
            vec![("a", &healthy[0]), ("b", &healthy[1]), ("c", &twice), ("d", &other)];
        let lines = disagreements(&rows);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[0].contains("node 2 answers at b (incarnation 20) and at c (incarnation 21)"));
        assert!(lines[1].contains("cluster id") && lines[1].contains("node 3 in cluster \"d\""));

        // A change of members on its way: node 3 holds the new configuration
        // (4 voters), the others the one before it. No disagreement; two
        // nodes of one configuration that count differently are one.
        let at = |mut s: StatusBody, index: u64, voters: &[u64]| {
            s.membership = Some(tenure_api::MembershipBody {
                config: ConfigPositionBody { index, token: 1 },
                committed: true,
                voters: voters.to_vec(),
                learners: Vec::new(),
            });
            s.voters = Some(voters.to_vec());
            s
        };
        let changing = [
            at(node(1, "leader", &[], 10), 5, &[1, 2, 3]),
            at(node(2, "follower", &[], 20), 5, &[1, 2, 3]),
            at(node(3, "follower", &[], 30), 7, &[1, 2, 3, 4]),
        ];
        let rows: Vec<(&str, &StatusBody)> = changing.iter().map(|s| ("e", s)).collect();
        assert!(disagreements(&rows).is_empty(), "{:?}", disagreements(&rows));
        let broken = [changing[0].clone(), at(node(2, "follower", &[], 20), 5, &[1, 2])];
        let rows: Vec<(&str, &StatusBody)> = broken.iter().map(|s| ("e", s)).collect();
        assert_eq!(disagreements(&rows).len(), 1, "{:?}", disagreements(&rows));
    }

    #[test]
    fn the_table_shows_each_nodes_place_in_the_configuration_and_its_lag() {
        let mut rows = [
            answered("https://127.0.0.1:8001", 1, Some(1_735_689_600_123_456)),
            answered("https://127.0.0.1:8004", 4, Some(1_735_689_600_987_001)),
            answered("https://127.0.0.1:8005", 5, Some(1_735_689_600_987_002)),
        ];
        for r in &mut rows {
            let s = r.status.as_mut().unwrap();
            s.membership = Some(tenure_api::MembershipBody {
                config: ConfigPositionBody { index: 9, token: 2 },
                committed: s.id != 5,
                voters: vec![1, 2, 4],
                learners: vec![5],
            });
        }
        rows[0].status.as_mut().unwrap().replication = Some(tenure_api::ReplicationBody {
            last_index: 50,
            commit_index: 48,
            applied_index: 48,
            revision: 30,
            followers: vec![tenure_api::FollowerBody { id: 5, match_index: 36, lag_entries: 14 }],
        });
        let text = table(&rows);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].contains("  PEERS  MEMBER     CONFIG    LAG  "), "{text}");
        assert!(lines[1].contains("  voter         9@2      0  "), "{text}");
        assert!(lines[2].contains("  voter         9@2      -  "), "{text}");
        assert!(lines[3].contains("  learner      9@2*     12  "), "{text}");
    }

    #[test]
    fn the_table_shows_each_nodes_incarnation_and_directory_in_their_own_columns() {
        let rows = [
            answered("https://127.0.0.1:8001", 1, Some(1_735_689_600_123_456)),
            answered("https://127.0.0.1:8002", 2, Some(1_735_689_600_987_001)),
            // A server that keeps no incarnation (store-led, or older).
            answered("https://127.0.0.1:8003", 3, None),
        ];
        let text = table(&rows);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(lines[0].ends_with("INCARNATION  DIRECTORY"), "{text}");
        assert!(lines[1].ends_with("  1735689600123456  00062a99"), "{text}");
        assert!(lines[2].ends_with("  1735689600987001  00062a99"), "{text}");
        assert!(lines[3].ends_with("  -  -"), "{text}");
        // The incarnation is one column: it ends at the same place on every line.
        let end = |l: &str| l.rfind("  ").expect("columns");
        assert!(lines.iter().all(|l| end(l) == end(lines[0])), "{text}");
    }
}
