//! Groups of partitions on real processes: four `tenure run
//! --group` members, each on an application host of its own (a network
//! namespace, [`crate::cluster::Cluster::start_with_hosts`]), share the
//! [`PARTITIONS`] partitions of one group held by a three-node tenure
//! cluster. Every copy of the command (one per partition a member owns)
//! writes `<partition> <token> <member>/<session>` to a **fenced resource**
//! every 10 ms: the TCP server of [`crate::app_elections`] in the root
//! namespace, which no fault cuts off, keeping a [`Ledger`] per partition
//! ([`Shards`]).
//!
//! A member is made to go in each way of [`Fault`], in turn, while the
//! group is at rest (each member owns two partitions, every copy writes):
//! `tenure run` SIGKILLed (its guards stop its copies at once), SIGSTOPped
//! past its TTL (the guards stop them by the session's deadline), SIGTERMed
//! (it stops them and leaves), its host cut off from the cluster past its
//! TTL, and the tenure leader SIGKILLed with a member at once (the member's
//! session expires on the new leader's clock, whose keeper grants its
//! partitions). Each fault is held until the faulted member's partitions
//! were written by other members, then undone (the member started again,
//! SIGCONT, the host healed); the group must come back to rest with every
//! partition written after the undo, the faulted member owning its share
//! again.
//!
//! What must hold: per partition, no write with a token below one the
//! partition has seen (two copies' writes interleaved: an overlap), one
//! holder per token; the epochs the group's reads show never go back per
//! partition; the faulted member's copies stop writing by its session's
//! deadline; no copy writes once every member has left. And, so that the
//! test cannot pass without testing: each fault moved the faulted member's
//! partitions to others (handovers counted per kind, each more than 0), and
//! every partition was written after every undo.

use crate::app_backend::{Backend, Held};
use crate::app_elections::{ms, p50_max, time_of_day, App, Ledger, Record, Resource, TIMINGS};
use crate::checker::get_once;
use crate::membership::keep_logs;
use crate::scenarios::{heal_bound, Outcome, RESTART_MARGIN};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tenure_api::GroupBody;

/// Tenure servers.
const NODES: usize = 3;
/// Members, each a `tenure run --group` on an application host of its own.
pub const MEMBERS: usize = 4;
/// The group.
pub const GROUP: &str = "fenced-shards";
/// Its partitions: two per member at rest.
pub const PARTITIONS: u32 = 8;
/// The members' session TTL, ms.
pub const MEMBER_TTL_MS: u64 = 1000;
/// SIGTERM to SIGKILL of a copy, ms (the copies ignore SIGTERM).
const GRACE_MS: u64 = 150;
/// How often a copy writes, seconds (bash's `read -t`, no process forked).
const WRITE_EVERY_S: &str = "0.01";
/// Bound on the group coming to rest after the undo of a fault: a join, a
/// stabilisation of 0 ms, two releases (a grace each) and two grants.
const REST_BOUND: Duration = Duration::from_secs(15);
/// Bound on the first rest: four `tenure run` starting on a loaded machine.
const FIRST_REST_BOUND: Duration = Duration::from_secs(30);
/// Bound on the faulted member's partitions being written by others,
/// beyond its TTL: the expiry's commit, the keeper's grant, the long poll's
/// answer and the copy's start (a debug build on a loaded two-core machine).
const HANDOVER_MARGIN: Duration = Duration::from_secs(4);
/// How long after a fault the faulted member's copies may still be seen
/// writing beyond its TTL: the session's deadline is at most 0.82 TTL after
/// the last renewal sent before the fault; this covers the guard's and the
/// resource's scheduling on a loaded machine.
const DEADLINE_SLACK: Duration = Duration::from_millis(400);
/// How long the resource is watched for a write after every member exited.
const QUIET_AFTER_EXIT: Duration = Duration::from_millis(500);
/// How often the group is read while waiting.
const POLL: Duration = Duration::from_millis(50);
/// Timeout of one group read.
const READ_TIMEOUT: Duration = Duration::from_secs(2);
/// Set to a directory to keep the logs of a failed run (members, servers)
/// there.
pub const LOGS_ENV: &str = "TENURE_FAULT_PARTITION_LOGS";
/// Most rounds of one run.
pub const MAX_ROUNDS: usize = 100;
/// Faults listed in a failure report.
const EVENTS_SHOWN: usize = 12;
/// Unreadable lines kept in full.
const UNREADABLE_KEPT: usize = 5;

/// How a member is made to go.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Fault {
    /// SIGKILL to `tenure run`: its guards see it die and stop its copies at
    /// once; its partitions move when its session expires. Started again.
    Kill,
    /// SIGSTOP to `tenure run` until its partitions were written by others
    /// (past its TTL): its guards stop the copies by the deadline. Then
    /// SIGCONT: it finds its session lost and joins again (`--keep-trying`).
    Pause,
    /// SIGTERM to `tenure run`: it stops its copies, leaves the group (its
    /// partitions move at once) and exits 0. Started again.
    Sigterm,
    /// Its host cut off from every tenure server until its partitions were
    /// written by others (past its TTL; it still reaches the resource): the
    /// guards stop the copies by the deadline. Healed: it joins again.
    Isolate,
    /// SIGKILL to the tenure leader and to a member's `tenure run` at once:
    /// the member's session expires on the new leader's clock, and the new
    /// leader's keeper grants its partitions. Both started again.
    TenureLeaderKill,
}

/// The faults, in turn: each once a round.
pub const FAULTS: [Fault; 5] =
    [Fault::Kill, Fault::Pause, Fault::Sigterm, Fault::Isolate, Fault::TenureLeaderKill];

/// The member a holder names: `app2` of `app2/17`.
fn tag_of(holder: &str) -> &str {
    holder.split_once('/').map_or(holder, |(tag, _)| tag)
}

/// The session a holder names: 17 of `app2/17`.
fn session_of(holder: &str) -> Option<u64> {
    holder.split_once('/')?.1.parse().ok()
}

/// The fenced resource's record: a [`Ledger`] per partition (no write
/// below a token that partition has seen, one holder per token), each
/// anomaly counted by kind.
#[derive(Debug, Default)]
pub(crate) struct Shards {
    partitions: BTreeMap<u32, Ledger>,
    /// Writes with a token below one their partition had seen: a copy wrote
    /// after a later grant's copy had (an overlap; a fence refuses them).
    behind_fence: u64,
    /// Writes naming a second holder for a partition's token.
    shared_tokens: u64,
    /// Lines that do not read `<partition> <token> <holder>`.
    unreadable: u64,
    unreadable_kept: Vec<String>,
    writes: u64,
}

impl Record for Shards {
    fn record(&mut self, line: &str, at: Instant) {
        let mut f = line.split_whitespace();
        let parsed = match (f.next(), f.next(), f.next(), f.next()) {
            (Some(p), Some(token), Some(holder), None) => p
                .parse::<u32>()
                .ok()
                .filter(|p| *p < PARTITIONS)
                .zip(token.parse::<u64>().ok())
                .map(|(p, token)| (p, token, holder)),
            _ => None,
        };
        let Some((p, token, holder)) = parsed else {
            self.unreadable += 1;
            if self.unreadable_kept.len() < UNREADABLE_KEPT {
                self.unreadable_kept.push(line.to_string());
            }
            return;
        };
        self.writes += 1;
        let ledger = self.partitions.entry(p).or_default();
        if ledger.tenancies.last_key_value().is_some_and(|(&h, _)| token < h) {
            self.behind_fence += 1;
        } else if ledger.tenancies.get(&token).is_some_and(|t| t.holder != holder) {
            self.shared_tokens += 1;
        }
        ledger.write(&format!("{token} {holder}"), at);
    }
}

/// A partition's grant as the resource saw it: (token, holder, first
/// write, last write).
type Seen<'a> = (u64, &'a str, Instant, Instant);

impl Shards {
    /// The latest grant of `p` that wrote.
    fn latest(&self, p: u32) -> Option<Seen<'_>> {
        let (&t, x) = self.partitions.get(&p)?.tenancies.last_key_value()?;
        Some((t, &x.holder, x.first, x.last))
    }

    /// The grant of `p` at `token`, if it wrote.
    fn at(&self, p: u32, token: u64) -> Option<Seen<'_>> {
        let x = self.partitions.get(&p)?.tenancies.get(&token)?;
        Some((token, &x.holder, x.first, x.last))
    }

    /// The first grant of `p` above `token` that wrote.
    fn after(&self, p: u32, token: u64) -> Option<Seen<'_>> {
        let (&t, x) = self.partitions.get(&p)?.tenancies.range(token + 1..).next()?;
        Some((t, &x.holder, x.first, x.last))
    }

    /// The partitions not written since `since`.
    fn unwritten_since(&self, since: Instant) -> Vec<u32> {
        (0..PARTITIONS)
            .filter(|&p| self.latest(p).is_none_or(|(_, _, _, last)| last < since))
            .collect()
    }

    /// Handovers whose new holder first wrote within `[from, to]`: a grant
    /// that wrote after a grant of another holder (member and session).
    fn handovers(&self, from: Instant, to: Instant) -> usize {
        let pairs = self.partitions.values().flat_map(|l| {
            let grants: Vec<_> = l.tenancies.values().collect();
            (1..grants.len()).map(move |i| (grants[i - 1].holder.clone(), grants[i].clone()))
        });
        pairs
            .filter(|(before, next)| *before != next.holder && (from..=to).contains(&next.first))
            .count()
    }

    /// Grants that wrote, all partitions together.
    fn grants(&self) -> usize {
        self.partitions.values().map(|l| l.tenancies.len()).sum()
    }

    /// Every anomaly, with its partition.
    fn anomalies(&self) -> Vec<String> {
        let by_partition = self.partitions.iter().flat_map(|(p, l)| {
            let more = l.anomaly_count.saturating_sub(l.anomalies.len() as u64);
            let counted = (more > 0).then(|| format!("partition {p}: {more} more"));
            l.anomalies.iter().map(move |a| format!("partition {p}: {a}")).chain(counted)
        });
        let unreadable = self.unreadable_kept.iter().map(|l| format!("unreadable line {l:?}"));
        by_partition.chain(unreadable).collect()
    }

    /// The number of anomalies of every kind.
    fn anomaly_count(&self) -> u64 {
        self.behind_fence + self.shared_tokens + self.unreadable
    }

    /// The last writes of every partition, for failure reports.
    fn summary(&self) -> String {
        let lines: Vec<String> = self
            .partitions
            .iter()
            .map(|(p, l)| {
                let last: Vec<String> = l
                    .tenancies
                    .iter()
                    .rev()
                    .take(4)
                    .map(|(t, x)| format!("{t}: {} ({} writes)", x.holder, x.writes))
                    .collect();
                format!("  partition {p}: {}", last.join(", "))
            })
            .collect();
        format!(
            "resource: {} writes, {} behind the fence, {} tokens shared, {} unreadable; anomalies \
             {:?}; latest grants (newest first):\n{}",
            self.writes,
            self.behind_fence,
            self.shared_tokens,
            self.unreadable,
            self.anomalies(),
            lines.join("\n")
        )
    }
}

/// The epochs the group's reads showed: per partition they must never go
/// back (every grant creates its key at a later revision).
#[derive(Debug, Default)]
pub(crate) struct Epochs {
    highest: BTreeMap<u32, u64>,
    reads: u64,
    regressions: Vec<String>,
}

impl Epochs {
    fn observe(&mut self, g: &GroupBody) {
        self.reads += 1;
        for o in &g.owners {
            let highest = self.highest.entry(o.partition).or_default();
            if o.epoch < *highest {
                self.regressions.push(format!(
                    "partition {}: epoch {} read (revision {}) after epoch {highest}",
                    o.partition, o.epoch, g.revision
                ));
            }
            *highest = (*highest).max(o.epoch);
        }
    }
}

/// The group at rest: each partition's grant (epoch and holder).
type Rest = BTreeMap<u32, (u64, String)>;

/// What one fault did.
#[derive(Debug, Clone)]
struct Measured {
    /// The faulted member's partitions written by others after the fault.
    moved: usize,
    /// From the fault to the last of them written by its new holder.
    took: Duration,
    /// The smallest gap between a moved partition's last write by the
    /// faulted member and the first by its new holder.
    gap: Duration,
    /// From the fault to the faulted member's last write.
    stopped: Duration,
    /// Handovers from the undo to the next rest (the member given its share).
    back: usize,
    /// From the undo to the next rest.
    to_rest: Duration,
    /// Partitions of other members that changed hands before the faulted
    /// member's were all written by others.
    others_moved: usize,
    /// How long tenure took to agree on a new leader (its leader's SIGKILL).
    failover: Option<Duration>,
}

/// The scenario's state. Field order is drop order: the members go before
/// the resource and the cluster.
struct Group {
    members: Vec<App>,
    /// The faults applied so far, with their UTC time of day.
    events: Vec<String>,
    resource: Resource<Shards>,
    epochs: Epochs,
    /// The member a fault acts on (its exit is not a failure).
    under_fault: Option<usize>,
    /// With [`Copies::Escaping`]: the file of the escaped writers' pids.
    escaped: Option<PathBuf>,
    backend: Backend,
}

impl Drop for Group {
    /// SIGKILLs the writers that escaped their copies ([`Copies::Escaping`]):
    /// those of the pids recorded that are still a copy of this group's.
    fn drop(&mut self) {
        let Some(file) = &self.escaped else { return };
        let pids = std::fs::read_to_string(file).unwrap_or_default();
        for pid in pids.lines().filter_map(|p| p.trim().parse::<i32>().ok()) {
            let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            let ours = format!("{}={GROUP}", "TENURE_GROUP");
            if environ.split(|&b| b == 0).any(|v| v == ours.as_bytes()) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
        }
    }
}

/// What the copies of the command are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Copies {
    /// The writer is a child of the copy's shell, in the copy's process
    /// group, which its guard stops.
    Guarded,
    /// The planted bug: the writer leaves the copy's process group
    /// (`setsid`), which no guard can stop (`tenure run --help`: not
    /// covered), and keeps writing after its partition moved. Its pid is
    /// recorded, and it is SIGKILLed when the scenario ends.
    Escaping,
}

/// The command of each copy: connect to the resource, then write
/// `<partition> <token> <tag>/<session>` every 10 ms. The writing is done
/// by a child of the shell, and both ignore SIGTERM: only the SIGKILL of the
/// copy's whole group (after the grace, or at the deadline) stops it. With
/// `escaped`, the writer leaves the group (`setsid`) and its pid is appended
/// to that file.
fn script(resource: SocketAddr, tag: &str, escaped: Option<&Path>) -> String {
    let writer = format!(
        "trap '' TERM; exec 4<> <(:); while :; do \
         echo \"$TENURE_PARTITION $TENURE_FENCING_TOKEN {tag}/$TENURE_SESSION\" >&3 || exit 112; \
         read -t {WRITE_EVERY_S} -u 4; done"
    );
    let start = match escaped {
        None => format!("( {writer} ) &"),
        Some(pids) => {
            let quoted = writer.replace('\'', "'\\''");
            format!("setsid bash -c '{quoted}' & echo $! >> {};", pids.display())
        }
    };
    format!(
        "exec 3<>/dev/tcp/{}/{} || exit 111; trap '' TERM; {start} wait",
        resource.ip(),
        resource.port()
    )
}

impl Group {
    fn fail(&self, what: impl std::fmt::Display) -> String {
        let summary = self.resource.ledger().summary();
        let members: String = self.members.iter().map(App::tail).collect();
        let events = &self.events[self.events.len().saturating_sub(EVENTS_SHOWN)..];
        let kept = keep_logs(LOGS_ENV, self.backend.cluster().dir());
        self.backend.fail(format!(
            "{what}\n{summary}\nepochs read: {} reads, regressions {:?}\nlast faults:\n{}\n{members}{kept}",
            self.epochs.reads,
            self.epochs.regressions,
            events.join("\n")
        ))
    }

    /// Records `what` with the time of day.
    fn event(&mut self, what: String) {
        self.events.push(format!("  {}  {what}", time_of_day()));
    }

    /// Starts (again) member `m`: `tenure run --group` with `--keep-trying`.
    fn spawn(&mut self, m: usize) -> Result<(), String> {
        let store = self.backend.client_args();
        let script = script(self.resource.addr, &self.members[m].tag, self.escaped.as_deref());
        let (n, ttl, grace) =
            (PARTITIONS.to_string(), MEMBER_TTL_MS.to_string(), GRACE_MS.to_string());
        let mut args: Vec<&str> = store.iter().map(String::as_str).collect();
        args.extend(["--group", GROUP, "--partitions", &n, "--stabilise-ms", "0", "--keep-trying"]);
        args.extend(["--ttl-ms", &ttl, "--grace-ms", &grace, "--", "bash", "-c", &script]);
        let cluster = self.backend.cluster();
        self.members[m].spawn_run(cluster, &args)
    }

    /// Fails if a member exited that no fault acts on (`--keep-trying`
    /// keeps a member running through every fault).
    fn check_running(&mut self) -> Result<(), String> {
        for m in 0..MEMBERS {
            if self.under_fault == Some(m) {
                continue;
            }
            if let Some(status) = self.members[m].exited()? {
                let (tag, last) = (self.members[m].tag.clone(), self.members[m].last_line());
                let after = self.events.last().map_or("", |e| e.trim());
                return Err(self
                    .fail(format!("{tag} exited on its own ({status}) after [{after}]: {last}")));
            }
        }
        Ok(())
    }

    /// Reads the group (from the first node that answers), and checks its
    /// epochs against the earlier reads'.
    async fn group(&mut self) -> Option<GroupBody> {
        let Backend::Tenure { api, nodes, .. } = &self.backend else { return None };
        let path = format!("/v1/groups/{GROUP}");
        for &addr in nodes {
            let Some((200, body)) = get_once(api.clone(), addr, &path, READ_TIMEOUT).await else {
                continue;
            };
            let Ok(g) = serde_json::from_str::<GroupBody>(&body) else { continue };
            self.epochs.observe(&g);
            return Some(g);
        }
        None
    }

    /// Fails on the first anomaly the resource saw.
    fn check_resource(&self) -> Result<(), String> {
        let shards = self.resource.ledger();
        if shards.anomaly_count() == 0 {
            return Ok(());
        }
        let what = format!(
            "the fenced resource saw {} writes behind the fence (overlaps), {} tokens with two \
             holders, {} unreadable lines",
            shards.behind_fence, shards.shared_tokens, shards.unreadable
        );
        drop(shards);
        Err(self.fail(what))
    }

    /// Whether `g` is at rest with every partition written since `since`:
    /// the grants, or why not.
    fn at_rest(&self, g: &GroupBody, since: Instant) -> Result<Rest, String> {
        if g.members.len() != MEMBERS {
            return Err(format!("{} members", g.members.len()));
        }
        let shards = self.resource.ledger();
        let unwritten = shards.unwritten_since(since);
        if !unwritten.is_empty() {
            return Err(format!("partitions {unwritten:?} not written since the undo"));
        }
        let mut rest = Rest::new();
        for p in 0..PARTITIONS {
            let Some(o) = g.owners.iter().find(|o| o.partition == p) else {
                return Err(format!("partition {p} has no owner"));
            };
            if o.release {
                return Err(format!("partition {p} is being released by {}", o.member));
            }
            let Some((token, holder, _, _)) = shards.latest(p) else {
                return Err(format!("partition {p} was never written"));
            };
            if token != o.epoch || session_of(holder) != Some(o.session) {
                return Err(format!(
                    "partition {p} granted to session {} at epoch {}, last written with token \
                     {token} by {holder}",
                    o.session, o.epoch
                ));
            }
            rest.insert(p, (token, holder.to_string()));
        }
        let mut per_member: BTreeMap<&str, usize> = BTreeMap::new();
        for (_, holder) in rest.values() {
            *per_member.entry(tag_of(holder)).or_default() += 1;
        }
        let share = PARTITIONS as usize / MEMBERS;
        if per_member.len() != MEMBERS || per_member.values().any(|&n| n != share) {
            return Err(format!("not {share} partitions per member: {per_member:?}"));
        }
        Ok(rest)
    }

    /// Waits until the group is at rest ([`Group::at_rest`]) within `bound`.
    async fn rest(&mut self, since: Instant, bound: Duration) -> Result<Rest, String> {
        let start = Instant::now();
        let mut why = "no answer".to_string();
        loop {
            self.check_running()?;
            self.check_resource()?;
            if let Some(g) = self.group().await {
                match self.at_rest(&g, since) {
                    Ok(rest) => return Ok(rest),
                    Err(e) => why = e,
                }
            }
            if start.elapsed() > bound {
                return Err(self.fail(format!("the group was not at rest within {bound:?}: {why}")));
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// The tenure cluster.
    fn run(&self) -> &crate::scenarios::Run {
        match &self.backend {
            Backend::Tenure { run, .. } => run.as_ref(),
            Backend::External { .. } => unreachable!("groups are tenure's own"),
        }
    }

    /// Waits until every partition of `mine` (partition, epoch) was written
    /// by a later grant; fails if one of them is the faulted member's.
    async fn moved(
        &mut self,
        mine: &[(u32, u64)],
        tag: &str,
        bound: Duration,
    ) -> Result<(), String> {
        let start = Instant::now();
        loop {
            self.check_running()?;
            self.check_resource()?;
            let waiting: Vec<u32> = {
                let shards = self.resource.ledger();
                if let Some((p, h)) = mine.iter().find_map(|&(p, e)| {
                    let (_, h, _, _) = shards.after(p, e)?;
                    (tag_of(h) == tag).then(|| (p, h.to_string()))
                }) {
                    drop(shards);
                    return Err(self.fail(format!("partition {p} was granted to {h}, under fault")));
                }
                mine.iter()
                    .filter(|&&(p, e)| shards.after(p, e).is_none())
                    .map(|&(p, _)| p)
                    .collect()
            };
            if waiting.is_empty() {
                return Ok(());
            }
            if start.elapsed() > bound {
                return Err(self.fail(format!(
                    "{tag}'s partitions {waiting:?} not written by another member within {bound:?}"
                )));
            }
            // The reads check the epochs meanwhile.
            let _ = self.group().await;
            tokio::time::sleep(POLL).await;
        }
    }

    /// Applies `fault` to member `m` while the group is at `rest`, waits
    /// until its partitions were written by others, undoes the fault, and
    /// waits for the next rest with every partition written after the undo.
    async fn fault(
        &mut self,
        fault: Fault,
        m: usize,
        rest: &Rest,
    ) -> Result<(Measured, Rest), String> {
        let tag = self.members[m].tag.clone();
        let mine: Vec<(u32, u64)> = rest
            .iter()
            .filter(|(_, (_, h))| tag_of(h) == tag)
            .map(|(&p, &(e, _))| (p, e))
            .collect();
        let all: Vec<usize> = (0..NODES).collect();
        let leader = match fault {
            Fault::TenureLeaderKill => {
                Some(self.run().agreement(&all, Instant::now(), heal_bound(TIMINGS)).await?)
            }
            _ => None,
        };
        self.event(format!("{fault:?} of {tag} (partitions {mine:?})"));
        self.under_fault = Some(m);
        let at = Instant::now();
        match fault {
            Fault::Kill => self.members[m].signal(Signal::SIGKILL)?,
            Fault::Pause => self.members[m].signal(Signal::SIGSTOP)?,
            Fault::Sigterm => self.members[m].signal(Signal::SIGTERM)?,
            Fault::Isolate => {
                let host = self.members[m].host;
                self.backend.cluster().cut_host(host).map_err(|e| e.to_string())?
            }
            Fault::TenureLeaderKill => {
                let ((l, _), _) = leader.ok_or("no tenure leader")?;
                self.members[m].signal(Signal::SIGKILL)?;
                self.run().cluster.kill(l).map_err(|e| format!("SIGKILL n{}: {e}", l + 1))?;
            }
        }
        let mut failover = None;
        if let Some(((l, term), _)) = leader {
            let rest_of: Vec<usize> = all.iter().copied().filter(|&i| i != l).collect();
            let ((_, term2), took) =
                self.run().agreement(&rest_of, at, heal_bound(TIMINGS)).await?;
            if term2 <= term {
                return Err(
                    self.fail(format!("tenure kept term {term} after its leader's SIGKILL"))
                );
            }
            self.event(format!("  tenure: n{} killed, a new leader in term {term2}", l + 1));
            failover = Some(took);
        }
        let bound = Duration::from_millis(MEMBER_TTL_MS) + HANDOVER_MARGIN + heal_bound(TIMINGS);
        let outcome = self.moved(&mine, &tag, bound).await;
        let moved_at = Instant::now();
        // Undo the fault before judging, so that a failure leaves the
        // member able to come back.
        match fault {
            Fault::Kill | Fault::TenureLeaderKill => self.members[m].reap().await?,
            Fault::Pause => self.members[m].signal(Signal::SIGCONT)?,
            Fault::Sigterm => {
                let status = self.exit_of(m).await?;
                if !status.success() {
                    return Err(self.fail(format!("{tag} exited with {status} on SIGTERM, not 0")));
                }
            }
            Fault::Isolate => {
                let host = self.members[m].host;
                self.backend.cluster().heal_host(host).map_err(|e| e.to_string())?
            }
        }
        outcome?;
        if let Some(((l, _), _)) = leader {
            self.run().cluster.spawn(l).map_err(|e| format!("restart n{}: {e}", l + 1))?;
            let back = Instant::now();
            self.run().agreement(&all, back, heal_bound(TIMINGS) + RESTART_MARGIN).await?;
        }
        if matches!(fault, Fault::Kill | Fault::Sigterm | Fault::TenureLeaderKill) {
            self.spawn(m)?;
        }
        self.under_fault = None;
        let undone = Instant::now();
        self.event(format!("  {fault:?} of {tag} undone"));
        let measured = self.measure(&mine, &tag, rest, at, moved_at)?;
        let next = self.rest(undone, REST_BOUND).await?;
        let back = self.resource.ledger().handovers(undone, Instant::now());
        let to_rest = undone.elapsed();
        Ok((Measured { back, to_rest, failover, ..measured }, next))
    }

    /// What the fault at `at` did to `mine`, once all were written by
    /// others (seen at `moved_at`); fails if the faulted member's copies
    /// wrote past its session's deadline.
    fn measure(
        &self,
        mine: &[(u32, u64)],
        tag: &str,
        rest: &Rest,
        at: Instant,
        moved_at: Instant,
    ) -> Result<Measured, String> {
        let shards = self.resource.ledger();
        let (mut took, mut gap, mut stopped) = (Duration::ZERO, Duration::MAX, Duration::ZERO);
        for &(p, e) in mine {
            let (Some((_, _, _, last)), Some((_, _, first, _))) =
                (shards.at(p, e), shards.after(p, e))
            else {
                return Err(format!("partition {p}: no writes around the fault"));
            };
            took = took.max(first.saturating_duration_since(at));
            gap = gap.min(first.saturating_duration_since(last));
            stopped = stopped.max(last.saturating_duration_since(at));
        }
        let others_moved = rest
            .iter()
            .filter(|(p, (e, h))| {
                tag_of(h) != tag && shards.after(**p, *e).is_some_and(|(_, _, f, _)| f <= moved_at)
            })
            .count();
        drop(shards);
        let deadline = Duration::from_millis(MEMBER_TTL_MS) + DEADLINE_SLACK;
        if stopped > deadline {
            return Err(self.fail(format!(
                "{tag}'s copies wrote {} ms after the fault, past its session's deadline (TTL \
                 {MEMBER_TTL_MS} ms + {} ms)",
                ms(stopped),
                ms(DEADLINE_SLACK)
            )));
        }
        let moved = mine.len();
        Ok(Measured {
            moved,
            took,
            gap,
            stopped,
            back: 0,
            to_rest: Duration::ZERO,
            others_moved,
            failover: None,
        })
    }

    /// Waits for member `m` to exit (it was told to): its status.
    async fn exit_of(&mut self, m: usize) -> Result<std::process::ExitStatus, String> {
        let until = Instant::now() + REST_BOUND;
        loop {
            if let Some(status) = self.members[m].exited()? {
                return Ok(status);
            }
            if Instant::now() > until {
                let tag = &self.members[m].tag;
                return Err(self.fail(format!("{tag} did not exit within {REST_BOUND:?}")));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// SIGTERMs every member: each stops its copies, leaves and exits 0;
    /// then no write may reach the resource, and the group is left without
    /// members and owners.
    async fn stop_all(&mut self) -> Result<(), String> {
        for m in &self.members {
            m.signal(Signal::SIGTERM)?;
        }
        for m in 0..MEMBERS {
            let status = self.exit_of(m).await?;
            if !status.success() {
                let tag = &self.members[m].tag;
                return Err(self.fail(format!("{tag} exited with {status} on SIGTERM, not 0")));
            }
        }
        let writes = self.resource.ledger().writes;
        tokio::time::sleep(QUIET_AFTER_EXIT).await;
        let later = self.resource.ledger().writes - writes;
        if later > 0 {
            return Err(self.fail(format!("{later} writes after every member exited")));
        }
        let start = Instant::now();
        loop {
            let left = self.group().await.map(|g| (g.members.len(), g.owners.len()));
            if left == Some((0, 0)) {
                return Ok(());
            }
            if start.elapsed() > REST_BOUND {
                return Err(self.fail(format!(
                    "(members, owners) {left:?} within {REST_BOUND:?} of every member's leave"
                )));
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

impl Group {
    /// Starts the cluster, the resource and the members, whose copies are
    /// `copies`, and waits for the first rest.
    async fn start(copies: Copies) -> Result<(Group, Rest), String> {
        let backend = Backend::start(Held::Tenure, NODES, MEMBERS, TIMINGS).await?;
        let resource = Resource::<Shards>::start(backend.cluster().net().host_addr()).await?;
        let dir = backend.cluster().dir().to_path_buf();
        let members = (0..MEMBERS).map(|h| App::new(h, &dir)).collect();
        let escaped = (copies == Copies::Escaping).then(|| dir.join("escaped.pids"));
        let mut g = Group {
            members,
            events: Vec::new(),
            resource,
            epochs: Epochs::default(),
            under_fault: None,
            escaped,
            backend,
        };
        for m in 0..MEMBERS {
            g.spawn(m)?;
        }
        let rest = g.rest(Instant::now(), FIRST_REST_BOUND).await?;
        Ok((g, rest))
    }
}

/// The negative control: copies whose writer escapes its guard
/// ([`Copies::Escaping`]). Their partitions move (as members join, or when
/// one leaves on SIGTERM) while they keep writing: the resource must see
/// writes behind the fence. `Ok` with what was caught; `Err` if nothing was,
/// or if the scenario failed otherwise.
pub async fn escaping_copies_are_caught() -> Result<Outcome, String> {
    let caught = match Group::start(Copies::Escaping).await {
        Err(e) => e,
        Ok((mut g, rest)) => match g.fault(Fault::Sigterm, 0, &rest).await {
            Err(e) => e,
            Ok(_) => return Err(g.fail("copies that escaped their guards went unnoticed")),
        },
    };
    let first = caught.lines().next().unwrap_or_default();
    if !first.starts_with("the fenced resource saw") || first.contains("saw 0 writes behind") {
        return Err(format!("not the overlap expected: {caught}"));
    }
    let mut out = Outcome::default();
    out.note(format!("caught, as it must be: {first}"));
    Ok(out)
}

/// Runs `rounds` rounds of every fault of [`FAULTS`] (the faulted member
/// in turn) on a group of [`PARTITIONS`] partitions and [`MEMBERS`]
/// members, and checks the resource, the epochs and tenure's checker.
pub async fn fenced_partitions(rounds: usize) -> Result<Outcome, String> {
    if rounds == 0 || rounds > MAX_ROUNDS {
        return Err(format!("1 to {MAX_ROUNDS} rounds, not {rounds}"));
    }
    let began = Instant::now();
    let (mut g, mut rest) = Group::start(Copies::Guarded).await?;
    let first_rest = began.elapsed();
    let mut by_kind: BTreeMap<Fault, Vec<Measured>> = BTreeMap::new();
    for round in 0..rounds {
        for (k, &fault) in FAULTS.iter().enumerate() {
            let m = (round * FAULTS.len() + k) % MEMBERS;
            let (measured, next) = g.fault(fault, m, &rest).await?;
            by_kind.entry(fault).or_default().push(measured);
            rest = next;
        }
    }
    g.stop_all().await?;
    g.backend.check_safety()?;
    g.check_resource()?;
    if !g.epochs.regressions.is_empty() {
        return Err(g.fail(format!("the group's epochs went back: {:?}", g.epochs.regressions)));
    }
    report(&g, rounds, first_rest, &by_kind, began)
}

/// Fails unless each kind of fault moved partitions; states what was
/// measured.
fn report(
    g: &Group,
    rounds: usize,
    first_rest: Duration,
    by_kind: &BTreeMap<Fault, Vec<Measured>>,
    began: Instant,
) -> Result<Outcome, String> {
    let shards = g.resource.ledger();
    let mut out = Outcome::default();
    out.note(format!(
        "{rounds} rounds of {} faults on group {GROUP} ({PARTITIONS} partitions) among {MEMBERS} \
         `tenure run --group` on their own hosts (TTL {MEMBER_TTL_MS} ms, grace {GRACE_MS} ms), \
         {NODES} tenure nodes; first rest after {} ms; {:.1} s in all",
        FAULTS.len(),
        ms(first_rest),
        began.elapsed().as_secs_f64()
    ));
    for (kind, all) in by_kind {
        let moved: usize = all.iter().map(|m| m.moved).sum();
        if moved == 0 {
            drop(shards);
            return Err(g.fail(format!("{kind:?} moved no partition")));
        }
        let series = |f: fn(&Measured) -> Duration| all.iter().map(f).collect::<Vec<_>>();
        let gap = all.iter().map(|m| m.gap).min().unwrap_or_default();
        let back: usize = all.iter().map(|m| m.back).sum();
        let others: usize = all.iter().map(|m| m.others_moved).sum();
        let failovers: Vec<String> = all.iter().filter_map(|m| m.failover.map(ms)).collect();
        let failover = if failovers.is_empty() {
            String::new()
        } else {
            format!("; new tenure leader after {} ms", failovers.join(", "))
        };
        out.note(format!(
            "{kind:?}: {} faults, {moved} partitions handed over to other members (written by \
             them {}), smallest gap between the two holders' writes {} ms; the faulted \
             member's copies last wrote {} after the fault; {others} partitions of other \
             members changed hands meanwhile; {back} handovers back on the undo, at rest {} \
             after it{failover}",
            all.len(),
            p50_max(&series(|m| m.took)),
            ms(gap),
            p50_max(&series(|m| m.stopped)),
            p50_max(&series(|m| m.to_rest)),
        ));
    }
    out.note(format!(
        "fenced resource: {} writes by {} grants ({} handovers in all), 0 behind the fence \
         (overlaps), 0 tokens with two holders; {} group reads, 0 epoch regressions; no write \
         after every member left",
        shards.writes,
        shards.grants(),
        shards.handovers(began, Instant::now()),
        g.epochs.reads
    ));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fed(lines: &[(&str, Instant)]) -> Shards {
        let mut s = Shards::default();
        for (l, at) in lines {
            s.record(l, *at);
        }
        s
    }

    #[test]
    fn a_clean_history_of_handovers_passes_and_is_counted() {
        let t0 = Instant::now();
        let t = |ms: u64| t0 + Duration::from_millis(ms);
        let s = fed(&[
            ("0 5 app1/10", t(0)),
            ("1 6 app1/10", t(1)),
            ("0 5 app1/10", t(10)),
            // Partition 0 moves to app2, partition 1 stays; a lower token in
            // another partition is no regression.
            ("0 9 app2/11", t(20)),
            ("1 6 app1/10", t(21)),
            ("0 9 app2/11", t(30)),
            // app1 comes back with a new session: another holder.
            ("0 12 app1/13", t(40)),
        ]);
        assert_eq!(s.anomaly_count(), 0, "{:?}", s.anomalies());
        assert_eq!((s.writes, s.grants()), (7, 4));
        assert_eq!(s.handovers(t(0), t(100)), 2);
        assert_eq!(s.handovers(t(25), t(100)), 1);
        assert_eq!(s.latest(0).map(|(t, h, _, _)| (t, h)), Some((12, "app1/13")));
        assert_eq!(s.after(0, 5).map(|(t, _, _, _)| t), Some(9));
        assert_eq!(s.unwritten_since(t(25)), (1..PARTITIONS).collect::<Vec<_>>());
        assert_eq!((tag_of("app1/13"), session_of("app1/13")), ("app1", Some(13)));
    }

    /// The planted bugs: a copy that writes after the next grant's copy
    /// wrote (an overlap), a token given to two holders, garbage.
    #[test]
    fn the_checker_catches_an_overlap_a_shared_token_and_garbage() {
        let t0 = Instant::now();
        let overlapping = fed(&[
            ("3 10 app1/1", t0),
            ("3 12 app2/2", t0),
            ("3 10 app1/1", t0), // the old copy still writes
        ]);
        assert_eq!(overlapping.behind_fence, 1);
        assert_eq!(overlapping.anomaly_count(), 1);
        assert!(overlapping.anomalies()[0].starts_with("partition 3: app1/1 wrote with token 10"));

        let shared = fed(&[("3 12 app2/2", t0), ("3 12 app3/3", t0)]);
        assert_eq!((shared.shared_tokens, shared.anomaly_count()), (1, 1));
        assert!(shared.anomalies()[0].contains("token 12 used by app2/2 and app3/3"));

        let garbage = fed(&[("3 12", t0), ("x 1 app1/1", t0), ("8 1 app1/1", t0), ("", t0)]);
        assert_eq!((garbage.unreadable, garbage.writes), (4, 0));
        assert_eq!(garbage.anomalies().len(), 4);
    }

    fn read(revision: u64, owners: &[(u32, u64)]) -> GroupBody {
        let owners: Vec<_> = owners
            .iter()
            .map(|&(p, e)| {
                serde_json::json!({"partition": p, "member": "0000000000000001", "session": 1,
                                   "epoch": e, "release": false})
            })
            .collect();
        serde_json::from_value(serde_json::json!({
            "name": GROUP, "spec": {"partitions": PARTITIONS, "stabilise_ms": 0},
            "members": [], "more": false, "owners": owners, "unreadable": 0, "revision": revision
        }))
        .expect("a group body")
    }

    #[test]
    fn an_epoch_read_lower_than_an_earlier_read_is_a_regression() {
        let mut e = Epochs::default();
        e.observe(&read(10, &[(0, 5), (1, 7)]));
        e.observe(&read(11, &[(0, 9)])); // 1 unowned: no regression
        e.observe(&read(12, &[(0, 9), (1, 11)]));
        assert!(e.regressions.is_empty(), "{:?}", e.regressions);
        e.observe(&read(13, &[(0, 5), (1, 11)]));
        assert_eq!(e.reads, 4);
        assert_eq!(e.regressions, ["partition 0: epoch 5 read (revision 13) after epoch 9"]);
    }
}
