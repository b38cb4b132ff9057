//! `tenure partitions list` and `tenure partitions show NAME`: groups of
//! partitions from the command line (docs/PARTITIONS.md). `list` is a
//! client of `GET /v1/groups`; `show` of `GET /v1/groups/{name}`: its
//! members and what each owns, every partition's owner and epoch, the
//! balance, and what the leader measured: time without an owner per
//! partition, moves, imbalance.

use crate::client::{connect, CACERT_ENV, DEFAULT_ENDPOINTS, ENDPOINTS_ENV};
use anyhow::Context;
use clap::{Args, Subcommand};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use tenure::tokens::TokenArgs;
use tenure_api::{GroupBody, GroupListEntry, GroupOwnerBody, PartitionStatsBody};
use tenure_client::partitions::{group, groups};
use tenure_client::Cluster;

/// `tenure partitions`.
#[derive(Args, Debug)]
#[command(after_help = "\
Examples:
  tenure partitions list
  tenure partitions show shards --each
  tenure partitions show orders --json --endpoints 10.0.0.1:8001,10.0.0.2:8001 --cacert ca.pem")]
pub struct PartitionsArgs {
    #[command(subcommand)]
    command: PartitionsCommand,
}

#[derive(Subcommand, Debug)]
enum PartitionsCommand {
    /// List the groups: each one's partitions, members and owned partitions.
    #[command(after_help = LIST_HELP)]
    List(ListArgs),
    /// Show a group: its members, every partition's owner and epoch, the balance.
    #[command(after_help = SHOW_HELP)]
    Show(ShowArgs),
}

const LIST_HELP: &str = "\
Example:
  $ tenure partitions list
  GROUP   PARTITIONS  MEMBERS  OWNED
  orders          64        3     64
  shards           8        2      7

Exit status: 0 done (no groups is not an error); 1 error (no endpoint answered, a refused \
token).";

/// Groups asked for per request by `list` (the API's page limit).
const LIST_PAGE: usize = 100;

/// Most pages `list` reads.
const MAX_LIST_PAGES: usize = 100;

#[derive(Args, Debug)]
struct ListArgs {
    /// Print the groups as a JSON array (each as GET /v1/groups lists it).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    cluster: ClusterArgs,
}

const SHOW_HELP: &str = "\
Example:
  $ tenure partitions show shards
  group shards: 8 partitions, stabilise 2000 ms, 2 members, revision 57
  MEMBER            WEIGHT  ZONE  READY  OWNS
  0000000000000003       1  -     yes       4
  0000000000000005       1  -     yes       3
  PARTITION  OWNER             EPOCH  RELEASE  UNOWNED NOW  LAST SPELL  TOTAL UNOWNED  SPELLS
          0  0000000000000003     21  -        -                 12 ms          12 ms       1
          1  0000000000000005     48  asked    -                     -              -       0
          2  -                     -  -        1.2 s                 -          1.2 s       0
  ...
  balance: 3 to 4 partitions per ready member (max - min = 1); 1 without an owner
  leader node 2, watching for 3 min 12 s: 4 moves, imbalance 1 (by weight), 1 without an owner
A member is its session (16 hex digits); EPOCH is the grant's fencing token, larger at every \
grant of the partition; RELEASE `asked` when the leader asked the owner to give it up. The \
time without an owner is the leader's measure since it began to lead (docs/PARTITIONS.md, \
\"Observing a group\"): the current spell, the last that ended with a grant, all of them, and \
how many ended. Groups of more than 64 partitions show a row per run of partitions with the \
same owner (EPOCH the lowest and highest, the times the longest, TOTAL and SPELLS summed); \
--each shows a row per partition.

Exit status: 0 done; 1 error (no such group, no endpoint answered, a refused token).";

/// Partitions up to which `show` has a row per partition without `--each`.
const ROWS_EACH_UP_TO: u32 = 64;

#[derive(Args, Debug)]
struct ShowArgs {
    /// The group's name.
    name: String,
    /// Print the answer of GET /v1/groups/{name} as JSON.
    #[arg(long)]
    json: bool,
    /// A row per partition, however many (by default, groups of more than 64 partitions show a
    /// row per run of partitions with the same owner).
    #[arg(long)]
    each: bool,
    #[command(flatten)]
    cluster: ClusterArgs,
}

/// Where the cluster is and how to reach it (both subcommands).
#[derive(Args, Debug)]
struct ClusterArgs {
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

impl ClusterArgs {
    fn connect(&self) -> anyhow::Result<Cluster> {
        let (client, endpoints) = connect(self.cacert.as_deref(), &self.auth, &self.endpoints)?;
        Ok(Cluster::new(client.inner().clone(), endpoints)?)
    }
}

/// Runs `tenure partitions`.
pub async fn run(args: PartitionsArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        PartitionsCommand::List(a) => list(a).await,
        PartitionsCommand::Show(a) => show(a).await,
    }
}

async fn list(args: ListArgs) -> anyhow::Result<ExitCode> {
    let cluster = args.cluster.connect()?;
    let mut all: Vec<GroupListEntry> = Vec::new();
    // A cluster holds at most 1,000 groups (docs/PARTITIONS.md, "Limits"):
    // ten pages; the bound only stops a server that never says "no more".
    for _ in 0..MAX_LIST_PAGES {
        let after = all.last().map(|g| g.name.clone());
        let page =
            groups(&cluster, after.as_deref(), LIST_PAGE).await.context("listing the groups")?;
        all.extend(page.groups);
        if !page.more {
            break;
        }
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&all)?);
    } else {
        print!("{}", list_table(&all));
    }
    Ok(ExitCode::SUCCESS)
}

/// The groups as `list` prints them.
fn list_table(groups: &[GroupListEntry]) -> String {
    if groups.is_empty() {
        return "no groups\n".to_string();
    }
    let width = groups.iter().map(|g| g.name.len()).max().unwrap_or(0).max("GROUP".len());
    let mut out = format!("{:<width$}  PARTITIONS  MEMBERS  OWNED\n", "GROUP");
    for g in groups {
        let partitions = g.spec.map_or("unreadable".to_string(), |s| s.partitions.to_string());
        let _ =
            writeln!(out, "{:<width$}  {partitions:>10}  {:>7}  {:>5}", g.name, g.members, g.owned);
    }
    out
}

async fn show(args: ShowArgs) -> anyhow::Result<ExitCode> {
    let cluster = args.cluster.connect()?;
    let g = group(&cluster, &args.name)
        .await
        .with_context(|| format!("reading group {}", args.name))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&g)?);
    } else {
        print!("{}", table(&g, args.each || g.spec.partitions <= ROWS_EACH_UP_TO));
    }
    Ok(ExitCode::SUCCESS)
}

/// One row of the map: a partition, or a run of partitions with the same
/// owner and release flag.
struct Row<'a> {
    first: u32,
    last: u32,
    owner: Option<&'a str>,
    /// Lowest and highest epoch.
    epochs: Option<(u64, u64)>,
    release: bool,
    /// The longest current spell without an owner.
    unowned_ms: Option<u64>,
    /// The longest last spell.
    last_ms: Option<u64>,
    total_ms: u64,
    spells: u64,
    /// Whether the leader's figures are known.
    measured: bool,
}

impl<'a> Row<'a> {
    fn new(p: u32, owner: Option<&'a GroupOwnerBody>, stats: Option<&PartitionStatsBody>) -> Self {
        Row {
            first: p,
            last: p,
            owner: owner.map(|o| o.member.as_str()),
            epochs: owner.map(|o| (o.epoch, o.epoch)),
            release: owner.is_some_and(|o| o.release),
            unowned_ms: stats.and_then(|s| s.unowned_ms),
            last_ms: stats.and_then(|s| s.last_unowned_ms),
            total_ms: stats.map_or(0, |s| s.total_unowned_ms),
            spells: stats.map_or(0, |s| u64::from(s.spells)),
            measured: false,
        }
    }

    /// Adds the next partition's row, if it has the same owner and flag.
    fn absorb(&mut self, next: &Row<'a>) -> bool {
        if next.first != self.last + 1 || next.owner != self.owner || next.release != self.release {
            return false;
        }
        self.last = next.first;
        self.epochs = match (self.epochs, next.epochs) {
            (Some((lo, hi)), Some((l, h))) => Some((lo.min(l), hi.max(h))),
            (a, b) => a.or(b),
        };
        self.unowned_ms = self.unowned_ms.max(next.unowned_ms);
        self.last_ms = self.last_ms.max(next.last_ms);
        self.total_ms += next.total_ms;
        self.spells += next.spells;
        true
    }

    /// The row's cells, as the header names them.
    fn cells(&self) -> [String; 8] {
        let partitions = match self.first == self.last {
            true => self.first.to_string(),
            false => format!("{}-{}", self.first, self.last),
        };
        let epoch = match self.epochs {
            None => "-".to_string(),
            Some((lo, hi)) if lo == hi => lo.to_string(),
            Some((lo, hi)) => format!("{lo}-{hi}"),
        };
        let release = if self.release { "asked" } else { "-" };
        let unknown = || "?".to_string();
        let (now, last, total, spells) = if self.measured {
            let total = if self.total_ms > 0 || self.spells > 0 {
                duration(self.total_ms)
            } else {
                "-".to_string()
            };
            (
                self.unowned_ms.map_or("-".to_string(), duration),
                self.last_ms.map_or("-".to_string(), duration),
                total,
                self.spells.to_string(),
            )
        } else {
            (unknown(), unknown(), unknown(), unknown())
        };
        let owner = self.owner.unwrap_or("-").to_string();
        [partitions, owner, epoch, release.to_string(), now, last, total, spells]
    }
}

/// The map's header.
const MAP_HEADER: [&str; 8] = [
    "PARTITION",
    "OWNER",
    "EPOCH",
    "RELEASE",
    "UNOWNED NOW",
    "LAST SPELL",
    "TOTAL UNOWNED",
    "SPELLS",
];

/// The map's columns aligned left (the others right).
const MAP_LEFT: [bool; 8] = [false, true, false, true, false, false, false, false];

/// Writes the map: the header and the rows, each column as wide as its
/// widest cell.
fn write_map(out: &mut String, rows: &[Row<'_>]) {
    let cells: Vec<[String; 8]> = rows.iter().map(Row::cells).collect();
    let mut widths = MAP_HEADER.map(str::len);
    for row in &cells {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut line = |row: [&str; 8]| {
        let cells: Vec<String> = row
            .iter()
            .zip(widths)
            .zip(MAP_LEFT)
            .map(|((c, w), left)| if left { format!("{c:<w$}") } else { format!("{c:>w$}") })
            .collect();
        let _ = writeln!(out, "{}", cells.join("  ").trim_end());
    };
    line(MAP_HEADER);
    for row in &cells {
        line(row.each_ref().map(String::as_str));
    }
}

/// A duration for people: ms below a second, then seconds, minutes, hours.
fn duration(ms: u64) -> String {
    match ms {
        0..=999 => format!("{ms} ms"),
        1_000..=59_999 => format!("{}.{} s", ms / 1000, ms % 1000 / 100),
        60_000..=3_599_999 => format!("{} min {} s", ms / 60_000, ms % 60_000 / 1000),
        _ => format!("{} h {} min", ms / 3_600_000, ms % 3_600_000 / 60_000),
    }
}

/// The map: a row per partition (`each`), or per run of partitions with
/// the same owner.
fn rows(g: &GroupBody, each: bool) -> Vec<Row<'_>> {
    let owners: BTreeMap<u32, &GroupOwnerBody> =
        g.owners.iter().map(|o| (o.partition, o)).collect();
    let stats: BTreeMap<u32, &PartitionStatsBody> =
        g.stats.iter().flat_map(|s| s.partitions.iter().map(|p| (p.partition, p))).collect();
    let mut rows: Vec<Row<'_>> = Vec::new();
    for p in 0..g.spec.partitions {
        let mut row = Row::new(p, owners.get(&p).copied(), stats.get(&p).copied());
        row.measured = g.stats.is_some();
        if !each {
            if let Some(prev) = rows.last_mut() {
                if prev.absorb(&row) {
                    continue;
                }
            }
        }
        rows.push(row);
    }
    rows
}

/// The group as the tables of `SHOW_HELP`.
fn table(g: &GroupBody, each: bool) -> String {
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
    write_map(&mut out, &rows(g, each));
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
    match (&g.stats, &g.stats_error) {
        (Some(s), _) => {
            let _ = writeln!(
                out,
                "leader node {}, watching for {}: {} moves, imbalance {} (by weight), {} without \
                 an owner",
                s.node,
                duration(s.watched_ms),
                s.moves,
                s.imbalance,
                s.unowned
            );
        }
        (None, why) => {
            let why = why.as_deref().unwrap_or("the server does not measure groups");
            let _ = writeln!(out, "the leader's figures (?) are missing: {why}");
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
    use tenure_api::{GroupMemberBody, GroupMemberSpecBody, GroupSpecBody, GroupStatsBody};

    #[test]
    fn list_has_a_row_per_group() {
        let entry = |name: &str, partitions: Option<u32>, members, owned| GroupListEntry {
            name: name.into(),
            spec: partitions.map(|partitions| GroupSpecBody { partitions, stabilise_ms: 0 }),
            members,
            owned,
        };
        assert_eq!(list_table(&[]), "no groups\n");
        let groups = [entry("orders", Some(64), 3, 64), entry("x", None, 0, 0)];
        assert_eq!(
            list_table(&groups),
            "GROUP   PARTITIONS  MEMBERS  OWNED\n\
             orders          64        3     64\n\
             x       unreadable        0      0\n"
        );
    }

    fn member(id: &str, owned: usize) -> GroupMemberBody {
        GroupMemberBody {
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
        }
    }

    fn owner(partition: u32, member: &str, epoch: u64, release: bool) -> GroupOwnerBody {
        GroupOwnerBody { partition, member: member.into(), session: 3, epoch, release }
    }

    fn stats(
        partition: u32,
        now: Option<u64>,
        last: Option<u64>,
        total: u64,
        spells: u32,
    ) -> PartitionStatsBody {
        PartitionStatsBody {
            partition,
            unowned_ms: now,
            last_unowned_ms: last,
            total_unowned_ms: total,
            spells,
        }
    }

    fn body(
        partitions: u32,
        owners: Vec<GroupOwnerBody>,
        stats: Option<GroupStatsBody>,
    ) -> GroupBody {
        GroupBody {
            name: "shards".into(),
            spec: GroupSpecBody { partitions, stabilise_ms: 2000 },
            members: vec![member("0000000000000003", 2), member("0000000000000005", 0)],
            more: false,
            owners,
            unreadable: 0,
            revision: 57,
            stats_error: stats.is_none().then(|| "no leader is known".to_string()),
            stats,
        }
    }

    #[test]
    fn the_table_shows_members_owners_balance_and_the_leaders_figures() {
        let g = body(
            3,
            vec![owner(0, "0000000000000003", 21, false), owner(1, "0000000000000003", 22, true)],
            Some(GroupStatsBody {
                node: 2,
                watched_ms: 192_000,
                moves: 4,
                imbalance: 2.0,
                unowned: 1,
                partitions: vec![
                    stats(0, None, Some(12), 12, 1),
                    stats(2, Some(1_200), None, 1_200, 0),
                ],
            }),
        );
        let t = table(&g, true);
        assert!(
            t.starts_with(
                "group shards: 3 partitions, stabilise 2000 ms, 2 members, revision 57\n"
            ),
            "{t}"
        );
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(
            lines[4],
            "PARTITION  OWNER             EPOCH  RELEASE  UNOWNED NOW  LAST SPELL  TOTAL UNOWNED  SPELLS"
        );
        assert_eq!(
            lines[5],
            "        0  0000000000000003     21  -                  -       12 ms          12 ms       1"
        );
        assert_eq!(
            lines[6],
            "        1  0000000000000003     22  asked              -           -              -       0"
        );
        assert_eq!(
            lines[7],
            "        2  -                     -  -              1.2 s           -          1.2 s       0"
        );
        assert!(
            t.contains(
                "balance: 0 to 2 partitions per ready member (max - min = 2); 1 without an owner"
            ),
            "{t}"
        );
        assert!(
            t.contains(
                "leader node 2, watching for 3 min 12 s: 4 moves, imbalance 2 (by weight), 1 \
                 without an owner"
            ),
            "{t}"
        );
    }

    #[test]
    fn large_groups_show_runs_of_one_owner_and_missing_figures_say_why() {
        let mut owners: Vec<GroupOwnerBody> =
            (0..50).map(|p| owner(p, "0000000000000003", 100 + u64::from(p), false)).collect();
        owners.extend((60..100).map(|p| owner(p, "0000000000000005", 200 + u64::from(p), false)));
        let g = body(100, owners, None);
        let t = table(&g, false);
        let lines: Vec<&str> = t.lines().skip(5).take(3).collect();
        assert_eq!(
            lines,
            [
                "     0-49  0000000000000003  100-149  -                  ?           ?              ?       ?",
                "    50-59  -                       -  -                  ?           ?              ?       ?",
                "    60-99  0000000000000005  260-299  -                  ?           ?              ?       ?",
            ],
            "{t}"
        );
        assert!(t.contains("the leader's figures (?) are missing: no leader is known"), "{t}");
        assert_eq!(table(&g, true).lines().count(), t.lines().count() + 97, "a row each");
        assert_eq!(duration(59_999), "59.9 s");
        assert_eq!(duration(3_725_000), "1 h 2 min");
    }
}
