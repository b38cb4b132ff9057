//! `tenure member list|add|remove|promote|replace`: the cluster's members
//! from the command line, a client of `/v1/members` (docs/MEMBERSHIP.md).
//!
//! A change goes to the leader: the endpoints in turn, following a "not
//! the leader" answer (409) to the leader it names
//! ([`tenure_client::members::change`]). While a refusal may pass (no
//! leader known, another change in progress, voters that did not answer
//! the leader lately: nothing changed) the change is asked again until
//! `--wait-ms`. A refusal (409, 404, 400) changes nothing and is printed
//! with the server's reason;
//! an unknown outcome (504, or a connection lost after the request was
//! sent) says to look at the members before asking again.
//!
//! `replace OLD NEW HOST:PORT` is three changes, each decided from the
//! members as they are when it runs: add NEW as a learner (unless it is a
//! member already, at that address), wait until the leader promoted it
//! (printing its lag), then remove OLD (unless it is gone). Run again after
//! a crash or a timeout, it continues where it stopped.

use crate::client::{connect, CACERT_ENV, DEFAULT_ENDPOINTS, ENDPOINTS_ENV};
use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use hyper::StatusCode;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use tenure::tokens::TokenArgs;
use tenure_api::{ErrorBody, MemberAddRequest, MemberBody, MembersBody, PromoteMode};
use tenure_client::members::{members, refusal, MemberChange};
use tenure_client::{Cluster, Error};
use tokio::time::Instant;

/// `tenure member --help` after the subcommands: examples and the exit statuses.
pub const MEMBER_HELP: &str = "\
Examples:
  tenure member list --endpoints 10.0.0.1:8001,10.0.0.2:8001 --cacert /etc/tenure/ca.pem
  tenure member add 4 10.0.0.4:7001 --token-file /etc/tenure/ops.token
  tenure member replace 3 6 10.0.0.6:7001

Exit status: 0 done; 1 error (no endpoint answered, no leader within --wait-ms, a refused \
token); 2 refused: the cluster said no (a duplicate id, address or directory, not a \
member, a learner that has not caught up; a change in progress or too few healthy voters after \
it, still so after --wait-ms) and nothing changed; 3 outcome unknown: leadership was lost mid-change (or the connection broke \
after the request was sent), the change may or may not happen: look with `tenure member list` \
before asking again; 4 (replace) the new node was not a voter within --wait-ms: run the same \
command again, it continues where it stopped; 64 a malformed argument (nothing was asked).";

/// Exit status of a refused change.
const REFUSED: u8 = 2;
/// Exit status of a change whose outcome is unknown.
const UNKNOWN: u8 = 3;
/// Exit status of a `replace` that timed out waiting for the promotion.
const NOT_YET: u8 = 4;
/// Pause between two looks at the members while waiting.
const POLL: Duration = Duration::from_millis(200);
/// How often `replace` prints its progress while it waits.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);
/// How many hex digits of a data-directory identity the table shows.
const DIRECTORY_DIGITS: usize = 8;

/// `tenure member`.
#[derive(Args, Debug)]
pub struct MemberArgs {
    #[command(subcommand)]
    command: MemberCommand,
}

#[derive(Subcommand, Debug)]
enum MemberCommand {
    /// Show the voters and learners: id, role, peer address, data directory, lag.
    #[command(after_help = LIST_HELP)]
    List(ListArgs),
    /// Add a node as a learner; the leader promotes it to voter once it has caught up.
    #[command(after_help = ADD_HELP)]
    Add(AddArgs),
    /// Remove a voter or a learner.
    #[command(after_help = REMOVE_HELP)]
    Remove(IdArgs),
    /// Make a learner a voter (one added with --manual-promote, once it has caught up).
    #[command(after_help = PROMOTE_HELP)]
    Promote(IdArgs),
    /// Replace a member by a new node: add it, wait until it votes, remove the old one.
    #[command(after_help = REPLACE_HELP)]
    Replace(ReplaceArgs),
}

const LIST_HELP: &str = "\
Example:
  $ tenure member list
  configuration 9@1 (committed), leader node 1, commit index 48 (as node 1 holds it)
   ID  ROLE     ADDRESS          DIRECTORY    LAG  AUTO-PROMOTE
    1  voter    10.0.0.1:7001    -              0  -
    2  voter    10.0.0.2:7001    -              0  -
    4  voter    10.0.0.4:7001    7d34bc30       0  -
    5  learner  10.0.0.5:7001    04720743      12  yes
LAG is the committed entries a member lacks, as the leader sees it (`-` when the leader did \
not answer); DIRECTORY the first 8 hex digits of the data directory it was added with (`-` for \
the members of the first --peers list).

Exit status: 0 done; 1 error.";

const ADD_HELP: &str = "\
Example (the node's directory from its own `tenure status`, or started with --join instead):
  $ tenure member add 5 10.0.0.5:7001 --directory 0472074321bd4c0e9a2f6e1d05c3b7aa
  node 5 added as a learner at 10.0.0.5:7001 (configuration 9@1); the leader promotes it once \
it has caught up
The node must run (tenure server --join, or with --peers listing the cluster) to catch up.

Exit status: 0 done; 1 error; 2 refused (a change in progress, a duplicate id, address or \
directory: nothing changed); 3 outcome unknown.";

const REMOVE_HELP: &str = "\
Example:
  $ tenure member remove 2
  node 2 removed (configuration 10@1): voters 1,4,5; learners -
Removing the leader is allowed: it hands over once the change has committed. Stop the removed \
node's process afterwards.

Exit status: 0 done; 1 error; 2 refused (not a member, the last voter, too few healthy voters \
after it, a change in progress); 3 outcome unknown.";

const PROMOTE_HELP: &str = "\
Example:
  $ tenure member promote 5
  node 5 is a voter (configuration 11@1): voters 1,4,5; learners -

Exit status: 0 done; 1 error; 2 refused (not caught up yet, a voter already, not a member, a \
change in progress); 3 outcome unknown.";

const REPLACE_HELP: &str = "\
Example: node 3's disk died; node 6 takes its place (start node 6 with --join, before or after):
  $ tenure member replace 3 6 10.0.0.6:7001
  adding node 6 at 10.0.0.6:7001 as a learner
  waiting for node 6 to be promoted: a learner, 120 entries behind
  node 6 is a voter
  removing node 3
  node 3 is replaced by node 6 (configuration 14@2): voters 1,2,6; learners -
Each step looks at the members first, so the command can be run again after a crash or a \
timeout: it continues where it stopped.

Exit status: 0 done; 1 error; 2 refused; 3 outcome unknown; 4 node NEW was not a voter within \
--wait-ms (run the command again).";

/// Where the cluster is and how to reach it.
#[derive(Args, Debug)]
struct ClusterArgs {
    /// HTTP API endpoints of the nodes, comma-separated; changes go to the leader among them
    /// (or the one they name).
    #[arg(long, short = 'e', env = ENDPOINTS_ENV, value_name = "URL,...", default_value = DEFAULT_ENDPOINTS)]
    endpoints: String,
    /// The cluster's CA certificate (PEM, from `tenure cert`): endpoints without a scheme
    /// are then https://, and the servers' certificates are checked against it.
    #[arg(long, env = CACERT_ENV, value_name = "FILE")]
    cacert: Option<PathBuf>,
    /// How long to keep asking while no leader is known, another change is in progress or
    /// voters did not answer the leader lately (and, for replace, until the new node votes),
    /// in milliseconds [default: 5000; replace: 60000].
    #[arg(long, value_name = "MS")]
    wait_ms: Option<u64>,
    /// `list` needs a token of role read; changes role admin.
    #[command(flatten)]
    auth: TokenArgs,
}

#[derive(Args, Debug)]
struct ListArgs {
    /// Print the answer of GET /v1/members as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    cluster: ClusterArgs,
}

#[derive(Args, Debug)]
struct AddArgs {
    /// The node's id (1 to 65535), not a member's.
    #[arg(value_parser = crate::usage::node_id)]
    id: u64,
    /// Its peer address as the members dial it (HOST:PORT).
    #[arg(value_parser = crate::usage::peer_address)]
    address: String,
    /// Its data directory's identity (32 hex digits, `directory` of its `tenure status
    /// --json`): with it, the members refuse that id with any other directory (a wiped disk).
    #[arg(long, value_name = "HEX", value_parser = crate::usage::directory)]
    directory: Option<String>,
    /// Leave it a learner until `tenure member promote` (default: the leader promotes it once
    /// it has caught up and answered it for an election timeout).
    #[arg(long)]
    manual_promote: bool,
    #[command(flatten)]
    cluster: ClusterArgs,
}

#[derive(Args, Debug)]
struct IdArgs {
    /// The member's id.
    #[arg(value_parser = crate::usage::node_id)]
    id: u64,
    #[command(flatten)]
    cluster: ClusterArgs,
}

#[derive(Args, Debug)]
struct ReplaceArgs {
    /// The member to replace (it may be down: its process killed, its disk gone).
    #[arg(value_parser = crate::usage::node_id)]
    old: u64,
    /// The node that takes its place, a new id.
    #[arg(value_parser = crate::usage::node_id)]
    new: u64,
    /// The new node's peer address as the members dial it (HOST:PORT).
    #[arg(value_parser = crate::usage::peer_address)]
    address: String,
    /// The new node's data directory identity (32 hex digits), if it runs already.
    #[arg(long, value_name = "HEX", value_parser = crate::usage::directory)]
    directory: Option<String>,
    #[command(flatten)]
    cluster: ClusterArgs,
}

/// Why a change did not end in a new configuration.
enum Failure {
    /// Refused: nothing changed (409, 404; 400, a malformed request, exits
    /// as a usage error).
    Refused(StatusCode, ErrorBody),
    /// It may or may not happen.
    Unknown(String),
    /// Anything else: unreachable, no leader within the wait, a token.
    Error(anyhow::Error),
}

impl Failure {
    /// Prints it and returns the exit status.
    fn report(self) -> anyhow::Result<ExitCode> {
        match self {
            Failure::Refused(StatusCode::BAD_REQUEST, body) => Err(crate::usage::usage(format!(
                "the cluster refused the request as malformed (HTTP 400): {}",
                body.error
            ))),
            Failure::Refused(status, body) => {
                eprintln!("refused (HTTP {}): {}", status.as_u16(), body.error);
                Ok(ExitCode::from(REFUSED))
            }
            Failure::Unknown(why) => {
                eprintln!(
                    "outcome unknown: {why}; look at the members (`tenure member list`) before \
                     asking again"
                );
                Ok(ExitCode::from(UNKNOWN))
            }
            Failure::Error(e) => Err(e),
        }
    }

    /// Whether the server refused with `reason`.
    fn is(&self, reason: &str) -> bool {
        matches!(self, Failure::Refused(_, b) if b.reason.as_deref() == Some(reason))
    }
}

/// `tenure member`.
pub async fn run(args: MemberArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        MemberCommand::List(a) => list(a).await,
        MemberCommand::Add(a) => {
            let request = MemberAddRequest {
                id: a.id,
                address: a.address,
                directory: a.directory,
                promote: if a.manual_promote { PromoteMode::Manual } else { PromoteMode::Auto },
                // The node may start after it is added (etcd's order).
                probe: false,
            };
            let cluster = cluster(&a.cluster)?;
            single(&cluster, wait(&a.cluster, 5000), MemberChange::Add(request)).await
        }
        MemberCommand::Remove(a) => {
            let cluster = cluster(&a.cluster)?;
            single(&cluster, wait(&a.cluster, 5000), MemberChange::Remove(a.id)).await
        }
        MemberCommand::Promote(a) => {
            let cluster = cluster(&a.cluster)?;
            single(&cluster, wait(&a.cluster, 5000), MemberChange::Promote(a.id)).await
        }
        MemberCommand::Replace(a) => replace(a).await,
    }
}

/// The cluster of the flags.
fn cluster(args: &ClusterArgs) -> anyhow::Result<Cluster> {
    let (client, endpoints) = connect(args.cacert.as_deref(), &args.auth, &args.endpoints)?;
    Ok(Cluster::new(client.inner().clone(), endpoints)?)
}

/// `--wait-ms`, or `default` milliseconds.
fn wait(args: &ClusterArgs, default: u64) -> Duration {
    Duration::from_millis(args.wait_ms.unwrap_or(default))
}

/// `tenure member list`.
async fn list(args: ListArgs) -> anyhow::Result<ExitCode> {
    let cluster = cluster(&args.cluster)?;
    let m = members(&cluster).await.context("reading the members")?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&m)?);
    } else {
        print!("{}", table(&m));
    }
    Ok(ExitCode::SUCCESS)
}

/// One change, printed; its exit status.
async fn single(
    cluster: &Cluster,
    wait: Duration,
    change: MemberChange,
) -> anyhow::Result<ExitCode> {
    match ask(cluster, wait, &change).await {
        Ok(m) => {
            println!("{}", done(&change, &m));
            Ok(ExitCode::SUCCESS)
        }
        Err(f) => f.report(),
    }
}

/// What a change that committed did, in a line.
fn done(change: &MemberChange, m: &MembersBody) -> String {
    let what = match change {
        MemberChange::Add(r) if r.promote == PromoteMode::Auto => format!(
            "node {} added as a learner at {} (configuration {}); the leader promotes it once \
             it has caught up",
            r.id, r.address, m.config
        ),
        MemberChange::Add(r) => format!(
            "node {} added as a learner at {} (configuration {}); promote it with `tenure \
             member promote {}` once it has caught up",
            r.id, r.address, m.config, r.id
        ),
        MemberChange::Promote(id) => format!("node {id} is a voter (configuration {})", m.config),
        MemberChange::Remove(id) => format!("node {id} removed (configuration {})", m.config),
    };
    match change {
        MemberChange::Add(_) => what,
        _ => format!("{what}: {}", roster(m)),
    }
}

/// `voters 1,2,3; learners 4`.
fn roster(m: &MembersBody) -> String {
    let ids = |ms: &[MemberBody]| match ms.is_empty() {
        true => "-".to_string(),
        false => ms.iter().map(|m| m.id.to_string()).collect::<Vec<_>>().join(","),
    };
    format!("voters {}; learners {}", ids(&m.voters), ids(&m.learners))
}

/// Asks for `change`, again while a refusal may pass (nothing changed):
/// no leader is known (503), another change is in progress (an automatic
/// promotion), or voters did not answer the leader lately (a loaded
/// cluster), until `wait` has passed.
async fn ask(
    cluster: &Cluster,
    wait: Duration,
    change: &MemberChange,
) -> Result<MembersBody, Failure> {
    let deadline = Instant::now() + wait;
    loop {
        let failure = match tenure_client::members::change(cluster, change).await {
            Ok(m) => return Ok(m),
            Err(e) => classify(e),
        };
        let again = match &failure {
            Failure::Refused(status, _) => *status == StatusCode::SERVICE_UNAVAILABLE,
            _ => false,
        } || failure.is("in_progress")
            || failure.is("unhealthy");
        if !again || Instant::now() >= deadline {
            return Err(match failure {
                Failure::Refused(StatusCode::SERVICE_UNAVAILABLE, body) => Failure::Error(
                    anyhow::anyhow!("{change}: {} (for {} ms)", body.error, wait.as_millis()),
                ),
                f => f,
            });
        }
        tokio::time::sleep(POLL).await;
    }
}

/// A client error as a [`Failure`].
fn classify(e: Error) -> Failure {
    if let Some((status, body)) = refusal(&e) {
        if status == StatusCode::GATEWAY_TIMEOUT || body.outcome.as_deref() == Some("unknown") {
            return Failure::Unknown(body.error);
        }
        return Failure::Refused(status, body);
    }
    match e {
        Error::NoAnswer(n) if n.sent => {
            Failure::Unknown(format!("{}: the connection broke after the request was sent", n.url))
        }
        e => Failure::Error(crate::rest::lift(e)),
    }
}

/// The members table, headed by the configuration's position.
fn table(m: &MembersBody) -> String {
    let leader = m.leader.map_or("no leader known".to_string(), |l| format!("leader node {l}"));
    let committed = if m.committed { "committed" } else { "NOT COMMITTED yet" };
    let mut out = format!(
        "configuration {} ({committed}), {leader}, commit index {} (as node {} holds it)\n",
        m.config, m.commit_index, m.served_by
    );
    let width = m.voters.iter().chain(&m.learners).map(|x| x.address.len()).max().unwrap_or(7);
    let width = width.max(7);
    out.push_str(&format!(
        "{:>5}  {:<7}  {:<width$}  {:<9}  {:>5}  {}\n",
        "ID", "ROLE", "ADDRESS", "DIRECTORY", "LAG", "AUTO-PROMOTE"
    ));
    let rows =
        m.voters.iter().map(|x| (x, "voter")).chain(m.learners.iter().map(|x| (x, "learner")));
    for (x, role) in rows {
        let directory =
            x.directory.as_deref().map_or("-", |d| d.get(..DIRECTORY_DIGITS).unwrap_or(d));
        let lag = x.lag_entries.map_or("-".to_string(), |l| l.to_string());
        let auto = match role {
            "learner" if x.auto_promote => "yes",
            "learner" => "no",
            _ => "-",
        };
        out.push_str(&format!(
            "{:>5}  {:<7}  {:<width$}  {:<9}  {:>5}  {}\n",
            x.id, role, x.address, directory, lag, auto
        ));
    }
    out
}

/// `tenure member replace OLD NEW HOST:PORT`.
async fn replace(a: ReplaceArgs) -> anyhow::Result<ExitCode> {
    if a.old == a.new {
        bail!(
            "OLD and NEW are both node {}: a replacement takes a new id. To bring node {} back \
             with a new data directory, remove it (`tenure member remove {}`) and start it again \
             with --join",
            a.old,
            a.old,
            a.old
        );
    }
    let cluster = cluster(&a.cluster)?;
    let wait = wait(&a.cluster, 60_000);
    let started = Instant::now();
    let deadline = started + wait;
    let mut told = started - PROGRESS_EVERY;
    let mut first = true;
    loop {
        let m = members(&cluster).await.context("reading the members")?;
        let (old, new) = (m.get(a.old).is_some(), m.get(a.new));
        if std::mem::take(&mut first) {
            if let Some(refusal) = refuse_at_start(a.old, a.new, old, new.map(|(_, voter)| voter)) {
                eprintln!("refused: {refusal}; nothing changed");
                return Ok(ExitCode::from(REFUSED));
            }
            if !old && new.is_some_and(|(_, voter)| voter) {
                println!(
                    "node {} is a voter and node {} is not a member (configuration {}): nothing \
                     to do (an earlier run of this command finished?): {}",
                    a.new,
                    a.old,
                    m.config,
                    roster(&m)
                );
                return Ok(ExitCode::SUCCESS);
            }
        }
        match new {
            None if !old => bail!(
                "node {} is not a member (and node {} is not either): nothing to replace; see \
                 `tenure member list`",
                a.old,
                a.new
            ),
            None => {
                println!("adding node {} at {} as a learner", a.new, a.address);
                let add = MemberChange::Add(MemberAddRequest {
                    id: a.new,
                    address: a.address.clone(),
                    directory: a.directory.clone(),
                    promote: PromoteMode::Auto,
                    probe: false,
                });
                if let Err(f) = step(&cluster, deadline, &add).await {
                    return f.report();
                }
            }
            Some((n, _)) if n.address != a.address => bail!(
                "node {} is a member already, at {}, not at {}: replace with another id, or \
                 remove it first",
                a.new,
                n.address,
                a.address
            ),
            Some((n, _)) if directory_differs(n, a.directory.as_deref()) => bail!(
                "node {} is a member already, added with data directory {}, not {}",
                a.new,
                n.directory.as_deref().unwrap_or("-"),
                a.directory.as_deref().unwrap_or("-")
            ),
            Some((n, false)) => {
                if Instant::now() >= deadline {
                    eprintln!(
                        "node {} is not a voter after {} ms (a learner, {}): run the same \
                         command again to continue",
                        a.new,
                        wait.as_millis(),
                        behind(n)
                    );
                    return Ok(ExitCode::from(NOT_YET));
                }
                if told.elapsed() >= PROGRESS_EVERY {
                    println!("waiting for node {} to be promoted: a learner, {}", a.new, behind(n));
                    told = Instant::now();
                }
                if !n.auto_promote && n.lag_entries == Some(0) {
                    // Added to be promoted by hand: this command promotes it.
                    match step(&cluster, deadline, &MemberChange::Promote(a.new)).await {
                        Err(f) if !f.is("behind") => return f.report(),
                        _ => {}
                    }
                }
                tokio::time::sleep(POLL).await;
            }
            Some((_, true)) if old => {
                println!("node {} is a voter; removing node {}", a.new, a.old);
                match step(&cluster, deadline, &MemberChange::Remove(a.old)).await {
                    Err(f) if !f.is("not_member") => return f.report(),
                    _ => {}
                }
            }
            Some((_, true)) => {
                println!(
                    "node {} is replaced by node {} (configuration {}): {}",
                    a.old,
                    a.new,
                    m.config,
                    roster(&m)
                );
                return Ok(ExitCode::SUCCESS);
            }
        }
    }
}

/// Why `replace OLD_ID NEW_ID` refuses to begin, when it does: what the
/// members were at its first look (`old`: whether OLD is a member; `new`:
/// NEW's place, a voter or not). It removes OLD only after a promotion of NEW it waited
/// for, so a NEW that is a voter already beside OLD (a typo, or another
/// node's replacement) is not taken for an earlier run that stopped in the
/// milliseconds between the promotion and the removal: that run is finished
/// by hand. A NEW that is a learner beside no OLD cannot come from a run of
/// this command either.
fn refuse_at_start(old_id: u64, new_id: u64, old: bool, new: Option<bool>) -> Option<String> {
    match (old, new) {
        (true, Some(true)) => Some(format!(
            "node {new} is a voter already, beside node {old}: `replace` removes node {old} \
             only once it has seen node {new} promoted, so that the number of voters never \
             drops. If an earlier `tenure member replace {old} {new}` stopped right after the \
             promotion, finish it with `tenure member remove {old}`; otherwise check both ids \
             (`tenure member list`)",
            old = old_id,
            new = new_id
        )),
        (false, Some(false)) => Some(format!(
            "node {old} is not a member: nothing to replace (node {new} is a learner; \
             `tenure member promote {new}` makes it a voter); see `tenure member list`",
            old = old_id,
            new = new_id
        )),
        _ => None,
    }
}

/// Whether member `n` was added with another data directory than `given`.
fn directory_differs(n: &MemberBody, given: Option<&str>) -> bool {
    match (n.directory.as_deref(), given) {
        (Some(theirs), Some(given)) => !theirs.eq_ignore_ascii_case(given),
        _ => false,
    }
}

/// How far behind member `n` is, in words.
fn behind(n: &MemberBody) -> String {
    match n.lag_entries {
        Some(0) => "caught up (the leader promotes it once it has kept up for two heartbeats and answered for an election timeout)".into(),
        Some(l) => format!("{l} entries behind"),
        None => "its lag unknown (the leader did not answer)".into(),
    }
}

/// One change of `replace`, asked until `deadline` while it may pass.
async fn step(cluster: &Cluster, deadline: Instant, change: &MemberChange) -> Result<(), Failure> {
    let wait = deadline.saturating_duration_since(Instant::now());
    ask(cluster, wait, change).await.map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tenure_api::ConfigPositionBody;

    fn member(id: u64, lag: Option<u64>, auto: bool, directory: Option<&str>) -> MemberBody {
        MemberBody {
            id,
            address: format!("10.0.0.{id}:7001"),
            directory: directory.map(str::to_string),
            auto_promote: auto,
            http_address: None,
            match_index: lag.map(|l| 48 - l),
            lag_entries: lag,
        }
    }

    #[test]
    fn the_table_shows_each_member_once_with_its_role_directory_and_lag() {
        let m = MembersBody {
            served_by: 1,
            leader: Some(1),
            leader_http_address: None,
            config: ConfigPositionBody { index: 9, token: 1 },
            committed: true,
            commit_index: 48,
            voters: vec![
                member(1, Some(0), false, None),
                member(4, Some(0), false, Some(&"7d34bc30".repeat(4))),
            ],
            learners: vec![
                member(5, Some(12), true, Some(&"04720743".repeat(4))),
                member(6, None, false, None),
            ],
        };
        let text = table(&m);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "configuration 9@1 (committed), leader node 1, commit index 48 (as node 1 holds it)"
        );
        assert_eq!(lines[1], "   ID  ROLE     ADDRESS        DIRECTORY    LAG  AUTO-PROMOTE");
        assert_eq!(lines[2], "    1  voter    10.0.0.1:7001  -              0  -");
        assert_eq!(lines[3], "    4  voter    10.0.0.4:7001  7d34bc30       0  -");
        assert_eq!(lines[4], "    5  learner  10.0.0.5:7001  04720743      12  yes");
        assert_eq!(lines[5], "    6  learner  10.0.0.6:7001  -              -  no");
        assert_eq!(roster(&m), "voters 1,4; learners 5,6");
        assert!(directory_differs(&m.voters[1], Some(&"0".repeat(32))));
        assert!(!directory_differs(&m.voters[1], Some(&"7D34BC30".repeat(4))));
        assert!(!directory_differs(&m.voters[0], Some(&"0".repeat(32))), "none recorded");
    }

    #[test]
    fn replace_begins_only_where_its_own_steps_could_have_left_the_members() {
        // NEW a voter beside OLD: a typo, not a run that stopped.
        let typo = refuse_at_start(4, 6, true, Some(true)).expect("refused");
        assert!(typo.contains("tenure member remove 4"), "{typo}");
        // NEW a learner and no OLD: nothing to replace.
        let gone = refuse_at_start(4, 6, false, Some(false)).expect("refused");
        assert!(gone.contains("node 4 is not a member"), "{gone}");
        // Where a run begins or stopped: NEW absent or a learner beside
        // OLD, or a voter with OLD removed (nothing to do).
        for (old, new) in [(true, None), (true, Some(false)), (false, Some(true)), (false, None)] {
            assert_eq!(refuse_at_start(4, 6, old, new), None, "{old} {new:?}");
        }
    }
}
