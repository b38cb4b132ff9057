//! `tenure partitions show NAME`: a group of partitions from the command
//! line (docs/PARTITIONS.md), a client of `GET /v1/groups/{name}`: its
//! members and what each owns, every partition's owner and epoch, and the
//! balance.

use crate::client::{connect, CACERT_ENV, DEFAULT_ENDPOINTS, ENDPOINTS_ENV};
use anyhow::Context;
use clap::{Args, Subcommand};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use tenure::tokens::TokenArgs;
use tenure_api::GroupBody;
use tenure_client::partitions::group;
use tenure_client::Cluster;

/// `tenure partitions`.
#[derive(Args, Debug)]
pub struct PartitionsArgs {
    #[command(subcommand)]
    command: PartitionsCommand,
}

#[derive(Subcommand, Debug)]
enum PartitionsCommand {
    /// Show a group: its members, every partition's owner and epoch, the balance.
    #[command(after_help = SHOW_HELP)]
    Show(ShowArgs),
}

const SHOW_HELP: &str = "\
Example:
  $ tenure partitions show shards
  group shards: 8 partitions, stabilise 2000 ms, 2 members, revision 57
  MEMBER            WEIGHT  ZONE  READY  OWNS
  0000000000000003       1  -     yes       4
  0000000000000005       1  -     yes       4
  PARTITION  OWNER             EPOCH  RELEASE
          0  0000000000000003     21  -
          1  0000000000000005     48  asked
  ...
  balance: 4 to 4 partitions per member (max - min = 0); 0 without an owner
A member is its session (16 hex digits); EPOCH is the grant's fencing token, larger at every \
grant of the partition; RELEASE `asked` when the leader asked the owner to give it up.

Exit status: 0 done; 1 error (no such group, no endpoint answered, a refused token).";

#[derive(Args, Debug)]
struct ShowArgs {
    /// The group's name.
    name: String,
    /// Print the answer of GET /v1/groups/{name} as JSON.
    #[arg(long)]
    json: bool,
    /// HTTP API endpoints of the nodes, comma-separated.
    #[arg(long, short = 'e', env = ENDPOINTS_ENV, value_name = "URL,...", default_value = DEFAULT_ENDPOINTS)]
    endpoints: String,
    /// The cluster's CA certificate (PEM, from `tenure cert`): endpoints without a scheme
    /// are then https://, and the servers' certificates are checked against it.
    #[arg(long, env = CACERT_ENV, value_name = "FILE")]
    cacert: Option<PathBuf>,
    /// A token of role read.
    #[command(flatten)]
    auth: TokenArgs,
}

/// Runs `tenure partitions`.
pub async fn run(args: PartitionsArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        PartitionsCommand::Show(a) => show(a).await,
    }
}

async fn show(args: ShowArgs) -> anyhow::Result<ExitCode> {
    let (client, endpoints) = connect(args.cacert.as_deref(), &args.auth, &args.endpoints)?;
    let cluster = Cluster::new(client.inner().clone(), endpoints)?;
    let g = group(&cluster, &args.name)
        .await
        .with_context(|| format!("reading group {}", args.name))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&g)?);
    } else {
        print!("{}", table(&g));
    }
    Ok(ExitCode::SUCCESS)
}

/// The group as the tables of `SHOW_HELP`.
fn table(g: &GroupBody) -> String {
    let mut out = String::new();
    let more = if g.more { " (first page)" } else { "" };
    let _ = writeln!(
        out,
        "group {}: {} partitions, stabilise {} ms, {} members{more}, revision {}",
        g.name,
        g.spec.partitions,
        g.spec.stabilise_ms,
        g.members.len(),
        g.revision
    );
    let _ = writeln!(
        out,
        "{:<16}  {:>6}  {:<4}  {:<5}  {:>4}",
        "MEMBER", "WEIGHT", "ZONE", "READY", "OWNS"
    );
    for m in &g.members {
        let zone = m.spec.zone.as_deref().unwrap_or("-");
        let ready = if m.spec.ready { "yes" } else { "no" };
        let _ = writeln!(
            out,
            "{:<16}  {:>6}  {zone:<4}  {ready:<5}  {:>4}",
            m.id, m.spec.weight, m.owned
        );
    }
    let _ = writeln!(out, "{:>9}  {:<16}  {:>5}  RELEASE", "PARTITION", "OWNER", "EPOCH");
    for o in &g.owners {
        let release = if o.release { "asked" } else { "-" };
        let _ = writeln!(out, "{:>9}  {:<16}  {:>5}  {release}", o.partition, o.member, o.epoch);
    }
    let mut counts: BTreeMap<&str, usize> =
        g.members.iter().filter(|m| m.spec.ready).map(|m| (m.id.as_str(), 0)).collect();
    for o in &g.owners {
        if let Some(c) = counts.get_mut(o.member.as_str()) {
            *c += 1;
        }
    }
    let unowned = (g.spec.partitions as usize).saturating_sub(g.owners.len());
    match (counts.values().min(), counts.values().max()) {
        (Some(lo), Some(hi)) => {
            let _ = writeln!(
                out,
                "balance: {lo} to {hi} partitions per ready member (max - min = {}); {unowned} without an owner",
                hi - lo
            );
        }
        _ => {
            let _ = writeln!(out, "no ready member; {unowned} partitions without an owner");
        }
    }
    if g.unreadable > 0 {
        let _ = writeln!(out, "{} keys of the group do not parse (a bug: report it)", g.unreadable);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tenure_api::{GroupMemberBody, GroupMemberSpecBody, GroupOwnerBody, GroupSpecBody};

    #[test]
    fn the_table_shows_members_owners_and_balance() {
        let member = |id: &str, owned| GroupMemberBody {
            id: id.into(),
            session: 3,
            spec: GroupMemberSpecBody {
                weight: 1,
                zone: None,
                ready: true,
                preferred: vec![],
                excluded: vec![],
            },
            joined_revision: 4,
            owned,
        };
        let owner = |partition, member: &str, epoch, release| GroupOwnerBody {
            partition,
            member: member.into(),
            session: 3,
            epoch,
            release,
        };
        let g = GroupBody {
            name: "shards".into(),
            spec: GroupSpecBody { partitions: 3, stabilise_ms: 2000 },
            members: vec![member("0000000000000003", 2), member("0000000000000005", 0)],
            more: false,
            owners: vec![
                owner(0, "0000000000000003", 21, false),
                owner(1, "0000000000000003", 22, true),
            ],
            unreadable: 0,
            revision: 57,
        };
        let t = table(&g);
        assert!(
            t.starts_with(
                "group shards: 3 partitions, stabilise 2000 ms, 2 members, revision 57\n"
            ),
            "{t}"
        );
        assert!(t.contains("        1  0000000000000003     22  asked"), "{t}");
        assert!(
            t.contains(
                "balance: 0 to 2 partitions per ready member (max - min = 2); 1 without an owner"
            ),
            "{t}"
        );
    }
}
