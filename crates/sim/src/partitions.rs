//! The partitions workload (`--workload partitions`): a few application
//! processes (not voters), the **members**, hold sessions in the replicated
//! store and share the partitions of one or two groups (docs/PARTITIONS.md),
//! under every fault of the run and faults of their own (crashes, pauses,
//! being cut off from tenure), with their checkers. The nodes' side, the
//! leader's `GroupKeeper`, is [`crate::runner`]'s (`runner/partitions.rs`).
//!
//! A member, as the client of docs/PARTITIONS.md would (its session,
//! requests and faults are those of every app, [`crate::app`]):
//!
//! * grants a session and joins its group (`tenure_partitions::recipe::join`,
//!   run by the node it asks on that node's applied store, as the API
//!   would), saying its weight, its zone and whether it is ready; it joins
//!   again to change them now and then (weights 1 to 3 and zones in half
//!   of the runs, equal weights in the other half; `ready` flips);
//! * learns what it owns by linearizable reads of the group's prefix: it
//!   **works on partition `P`** from the read that shows `owners/P` naming
//!   it (its epoch: the key's `create_revision`) while its session's
//!   deadline ([`crate::app`]) has not passed, until a read shows the key
//!   marked `release` (it stops, then deletes the key with
//!   `recipe::release_many`), shows it gone or another owner's, its deadline
//!   passes, its session is reported gone, it leaves (gracefully: it stops
//!   every partition, then `recipe::leave`), revokes its session (after
//!   stopping), or crashes (its partitions move when its session expires);
//! * deletes any owner key that names it while it is not a member (a join
//!   that landed after its leave), and leaves again if its member key is
//!   still there.
//!
//! The checkers, on the global (real) timeline ([`Partitions::check`]): no
//! two members own a partition at overlapping moments (`partition-overlap`),
//! and epochs strictly increase across successive owners of a partition
//! (`partition-epoch`). After healing, the runner requires every partition
//! of a group with a live ready member owned (`partition-coverage`), each
//! member's count within what the assignment guarantees for its weight
//! (`partition-balance`), and a membership change to move no more
//! partitions than the fewest it needs (`partition-moves`); the helpers
//! are [`Partitions::problems`] and [`Partitions::min_moves`].

use crate::app::{self, clashes, Apps, Clash, Ended, Fault, Out, Role, Span};
use crate::checker::Check;
pub use crate::partitions_spec::{group_name, PartitionsBug, PartitionsSpec};
use crate::stats::PartitionsStats;
use crate::workload::{Action, GroupCall, Reply, ReplyBody, RequestBody};
use rand::Rng;
use std::collections::{BTreeMap, BTreeSet};
use tenure_kv::{Command, KeyValue, LeaseId, OpResponse, Response};
use tenure_partitions::group::{group_prefix, member_key, GroupSpec, MemberSpec, Ownership};
use tenure_partitions::{assign, recipe, MemberId, RecipeError};

/// Chance, per operation, that a member leaves its group (gracefully).
const LEAVE_CHANCE: f64 = 0.004;
/// Chance, per operation, that a member changes what it says about itself.
const FLIP_CHANCE: f64 = 0.004;
/// Chance, per operation, that a member stops everything and revokes its
/// session (then grants a new one and joins again).
const REVOKE_CHANCE: f64 = 0.002;
/// A member that left stays out this many TTLs, in thousandths.
const OUT_MILLI_TTL: (u64, u64) = (250, 1_500);
/// The zones of the weighted runs (a member may also have none).
const ZONES: [&str; 2] = ["a", "b"];
/// The heaviest weight of the weighted runs.
const MAX_WEIGHT: u32 = 3;

/// One member's work on one partition, on the global timeline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holding {
    /// The group.
    pub group: usize,
    /// The partition.
    pub partition: u32,
    /// The member (app index).
    pub app: usize,
    /// Its session.
    pub session: LeaseId,
    /// The grant's epoch (its owner key's `create_revision`, as read).
    pub epoch: u64,
    /// When it began (global ns).
    pub start_ns: u64,
    /// When it stopped (global ns); `None` while it works.
    pub end_ns: Option<u64>,
    /// Why it stopped.
    pub why: &'static str,
}

/// What a member's operation is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Grant,
    Read,
    Join,
    Leave,
    /// Releases the member's `releasing` grants.
    Release,
    Revoke,
}

/// What a member knows of its group, beside its session ([`crate::app`]).
#[derive(Clone, Debug)]
struct Member {
    group: usize,
    /// What it says about itself (joins again when the store differs).
    want: MemberSpec,
    /// Wants to be a member (false: it left and is out).
    inside: bool,
    /// Has stopped everything and leaves.
    leaving: bool,
    /// Out until then (global ns); it joins again then.
    out_until: u64,
    /// Out until told otherwise (the runner's scripted change).
    held_out: bool,
    /// Its member key's spec at its last read (this session).
    joined: Option<MemberSpec>,
    /// The partitions it works on: partition -> its [`Holding`].
    working: BTreeMap<u32, usize>,
    /// Partitions it stopped and must delete the owner key of, with the
    /// epoch: a read showed them marked `release`, or naming it while it
    /// is no member.
    to_release: BTreeSet<(u32, u64)>,
    /// The grants of its release in flight (at most
    /// [`recipe::MAX_RELEASE_PARTITIONS`] of `to_release`, in one request,
    /// as the client's `release_all_later` sends them).
    releasing: Vec<(u32, u64)>,
}

impl Member {
    /// Forgets what it knew under its session (its work must have ended).
    fn forget_session(&mut self) {
        self.joined = None;
        self.to_release.clear();
        self.leaving = false;
    }
}

/// What a live, ready member says, for the checks after healing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiveMember {
    /// The app.
    pub app: usize,
    /// Its session.
    pub session: LeaseId,
    /// What it says about itself.
    pub spec: MemberSpec,
}

/// What is wrong with a group now, by the checks after healing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Problems {
    /// Partitions without one live ready owner.
    pub coverage: Vec<String>,
    /// Members or zones owning more or fewer than the assignment promises.
    pub balance: Vec<String>,
}

/// A membership change made after healing, whose moves are counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// App `.0` leaves its group.
    Leave(usize),
    /// App `.0` joins its group again (with the session it kept).
    Join(usize),
}

/// The members, their work on partitions and their counts.
#[derive(Clone, Debug)]
pub struct Partitions {
    /// What runs.
    pub spec: PartitionsSpec,
    /// Every holding, in the order they began.
    pub holdings: Vec<Holding>,
    /// Counts (the nodes add theirs: expiries, refused renewals, the
    /// keeper's transactions).
    pub stats: PartitionsStats,
    /// Global time the faults healed ([`Partitions::settle`]).
    pub settled_at: Option<u64>,
    /// Weights 1 to 3 and zones (else every member has weight 1, no zone).
    pub weighted: bool,
    apps: Apps<Kind>,
    members: Vec<Member>,
    trace: bool,
}

impl Partitions {
    /// The members of `spec` on `nodes` nodes, as clients `base..`;
    /// requests time out after `op_timeout_ns`; clocks drift within
    /// `drift_ppm`; `trace` prints every holding's start and end.
    pub fn new(
        spec: PartitionsSpec,
        base: usize,
        nodes: usize,
        op_timeout_ns: u64,
        drift_ppm: u32,
        seed: u64,
        trace: bool,
    ) -> Self {
        assert!(spec.groups() >= 1 && spec.members >= spec.groups(), "a member per group");
        let mut apps = Apps::new(
            spec.members,
            base,
            nodes,
            op_timeout_ns,
            spec.ttl_ns(),
            spec.trusted_ns(drift_ppm),
            drift_ppm,
            seed ^ 0x7061_7274_6974_696f,
        );
        let weighted = apps.rng.gen_bool(0.5);
        let mut members = Vec::with_capacity(spec.members);
        for m in 0..spec.members {
            let want = draw_spec(&mut apps, weighted, true);
            members.push(Member {
                group: m % spec.groups(),
                want,
                inside: true,
                leaving: false,
                out_until: 0,
                held_out: false,
                joined: None,
                working: BTreeMap::new(),
                to_release: BTreeSet::new(),
                releasing: Vec::new(),
            });
        }
        Partitions {
            spec,
            holdings: Vec::new(),
            stats: PartitionsStats { runs: 1, ..PartitionsStats::default() },
            settled_at: None,
            weighted,
            apps,
            members,
            trace,
        }
    }

    /// The member of client index `client`, if it is one.
    pub fn app_of(&self, client: usize) -> Option<usize> {
        self.apps.of(client)
    }

    /// How many members.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// True without members (never: [`Partitions::new`] requires one).
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The group of member `a`.
    pub fn group_of(&self, a: usize) -> usize {
        self.members[a].group
    }

    /// Starts every member within 100 ms of `now_ns`.
    pub fn start(&mut self, now_ns: u64) -> Vec<Action> {
        self.apps.start(now_ns)
    }

    /// The faults healed: from now on no member fault, leave, revocation
    /// or change of what members say, except that every member says it is
    /// ready; crashed members restart, paused or cut-off ones resume, and
    /// members out of their group join again.
    pub fn settle(&mut self, now_ns: u64) -> Vec<Action> {
        self.settled_at.get_or_insert(now_ns);
        for m in &mut self.members {
            m.want.ready = true;
            m.out_until = m.out_until.min(now_ns);
        }
        app::settle(self, now_ns)
    }

    /// Member client `client`'s timer fired.
    pub fn on_wake(&mut self, client: usize, now_ns: u64) -> Vec<Action> {
        app::on_wake(self, client, now_ns)
    }

    /// An answer reached member client `reply.tag.client`.
    pub fn on_reply(&mut self, reply: Reply, now_ns: u64) -> Vec<Action> {
        app::on_reply(self, reply, now_ns)
    }

    fn obeys_deadline(&self) -> bool {
        self.spec.planted != Some(PartitionsBug::IgnoreDeadline)
    }

    /// Whether member `a` may start work now by its deadline.
    fn trusts_session(&self, a: usize, now_ns: u64) -> bool {
        !self.obeys_deadline() || self.apps.trusts(a, now_ns)
    }

    fn start_holding(&mut self, a: usize, partition: u32, epoch: u64, now_ns: u64) {
        let Some(session) = self.apps.proc(a).session else { return };
        let group = self.members[a].group;
        let prev =
            self.holdings.iter().rev().find(|h| h.group == group && h.partition == partition);
        if prev.is_some_and(|p| p.session != session) {
            self.stats.moves += 1;
        }
        self.stats.holdings += 1;
        self.members[a].working.insert(partition, self.holdings.len());
        if self.trace {
            let name = group_name(group);
            eprintln!(
                "{:>12.3} member{a} (session {}) works on {name}/{partition} at epoch {epoch}",
                ms(now_ns),
                session.0
            );
        }
        self.holdings.push(Holding {
            group,
            partition,
            app: a,
            session,
            epoch,
            start_ns: now_ns,
            end_ns: None,
            why: "",
        });
    }

    fn end_holding(&mut self, a: usize, partition: u32, at_ns: u64, why: &'static str) {
        let Some(h) = self.members[a].working.remove(&partition) else { return };
        let rec = &mut self.holdings[h];
        rec.end_ns = Some(at_ns.max(rec.start_ns));
        rec.why = why;
        if self.trace {
            let name = group_name(rec.group);
            eprintln!("{:>12.3} member{a} stops {name}/{partition}: {why}", ms(at_ns));
        }
    }

    fn stop_all(&mut self, a: usize, at_ns: u64, why: &'static str) {
        let working: Vec<u32> = self.members[a].working.keys().copied().collect();
        for p in working {
            self.end_holding(a, p, at_ns, why);
        }
    }

    /// Member `a` leaves: it stops every partition, then asks.
    fn leave(&mut self, a: usize, now_ns: u64) {
        self.stop_all(a, now_ns, "it left");
        self.members[a].leaving = true;
    }

    /// Member `a`'s leave took effect (`took`), or it was no member
    /// already.
    fn left(&mut self, a: usize, took: bool, now_ns: u64) {
        let gap = self.apps.milli_ttl(OUT_MILLI_TTL);
        // After healing a member that left (before) joins again at once.
        let gap = if self.settled_at.is_some() { 0 } else { gap };
        let m = &mut self.members[a];
        m.joined = None;
        // A member key back after its leave: a join that landed late.
        if took && !m.leaving {
            self.stats.stray_members += 1;
            if self.trace {
                eprintln!("{:>12.3} member{a} left again: its key was back", ms(now_ns));
            }
        }
        if m.leaving {
            self.stats.leaves += 1;
            m.leaving = false;
            m.inside = false;
            m.out_until = if m.held_out { u64::MAX } else { now_ns + gap };
        }
    }

    fn read(&mut self, a: usize, kvs: &[KeyValue], now_ns: u64) {
        let Some(session) = self.apps.proc(a).session else { return };
        let group = group_name(self.members[a].group);
        let prefix = group_prefix(&group);
        let mine = member_key(&group, session.0);
        let mut joined = None;
        // Partition -> (epoch, marked release), of the keys naming it.
        let mut owned: BTreeMap<u32, (u64, bool)> = BTreeMap::new();
        for kv in kvs {
            if kv.key == mine {
                joined = serde_json::from_slice::<MemberSpec>(&kv.value).ok();
                continue;
            }
            let p = kv.key.strip_prefix(&prefix).and_then(|k| k.strip_prefix("owners/"));
            let Some(p) = p.and_then(parse_partition) else { continue };
            let Ok(o) = serde_json::from_slice::<Ownership>(&kv.value) else { continue };
            if o.member == session.0 {
                owned.insert(p, (kv.create_revision, o.release));
            }
        }
        self.members[a].joined = joined;
        let working: Vec<(u32, usize)> =
            self.members[a].working.iter().map(|(&p, &h)| (p, h)).collect();
        for (p, h) in working {
            if owned.get(&p).is_none_or(|&(e, _)| e != self.holdings[h].epoch) {
                self.end_holding(a, p, now_ns, "a read showed its key gone");
            }
        }
        let bug = self.spec.planted;
        let trusts = self.trusts_session(a, now_ns);
        for (&p, &(epoch, release)) in &owned {
            let m = &self.members[a];
            if release {
                if m.working.contains_key(&p) {
                    self.end_holding(a, p, now_ns, "its key showed release");
                }
                match bug {
                    Some(PartitionsBug::NoRelease) => {}
                    Some(PartitionsBug::ReleaseAll) => {
                        self.members[a].to_release.insert((p, epoch));
                        let all: Vec<(u32, usize)> =
                            self.members[a].working.iter().map(|(&p, &h)| (p, h)).collect();
                        for (q, h) in all {
                            let e = self.holdings[h].epoch;
                            self.end_holding(a, q, now_ns, "another of its keys showed release");
                            self.members[a].to_release.insert((q, e));
                        }
                    }
                    _ => {
                        self.members[a].to_release.insert((p, epoch));
                    }
                }
            } else if !m.inside {
                // Granted while it is no member: never worked on, given back.
                if self.members[a].to_release.insert((p, epoch)) {
                    self.stats.stray_grants += 1;
                }
            } else if !m.leaving && trusts && !m.working.contains_key(&p) {
                self.start_holding(a, p, epoch, now_ns);
            }
        }
        // Releases whose key is gone (or is another grant's) are done.
        self.members[a].to_release.retain(|(p, e)| owned.get(p).is_some_and(|o| o.0 == *e));
    }

    /// After healing (the runner's scripted change): member `a` leaves and
    /// stays out until [`Partitions::rejoin_now`].
    pub fn leave_now(&mut self, a: usize, now_ns: u64) -> Vec<Action> {
        self.members[a].held_out = true;
        self.leave(a, now_ns);
        self.apps.proc_mut(a).next_op_ns = now_ns;
        app::step(self, a, now_ns)
    }

    /// After [`Partitions::leave_now`]: member `a` joins again.
    pub fn rejoin_now(&mut self, a: usize, now_ns: u64) -> Vec<Action> {
        let m = &mut self.members[a];
        m.held_out = false;
        m.inside = true;
        self.apps.proc_mut(a).next_op_ns = now_ns;
        app::step(self, a, now_ns)
    }

    /// Whether member `a` is out of its group: its leave took effect.
    pub fn is_out(&self, a: usize) -> bool {
        let m = &self.members[a];
        !m.inside && !m.leaving
    }

    /// Picks one of `candidates` at random (none if it is empty).
    pub fn pick(&mut self, candidates: &[usize]) -> Option<usize> {
        (!candidates.is_empty()).then(|| candidates[self.apps.rng.gen_range(0..candidates.len())])
    }

    /// The members of group `g` that are live and ready now: running and
    /// not cut off, holding a session they trust, in the group (not
    /// leaving) and saying they are ready.
    pub fn live_ready(&self, g: usize, now_ns: u64) -> Vec<LiveMember> {
        (0..self.members.len())
            .filter(|&a| {
                let (m, p) = (&self.members[a], self.apps.proc(a));
                m.group == g
                    && p.running()
                    && now_ns >= p.cut_until
                    && m.inside
                    && !m.leaving
                    && m.want.ready
                    && self.apps.trusts(a, now_ns)
            })
            .filter_map(|a| {
                let session = self.apps.proc(a).session?;
                Some(LiveMember { app: a, session, spec: self.members[a].want.clone() })
            })
            .collect()
    }

    /// The members working on each partition of group `g` now.
    pub fn holders(&self, g: usize) -> Vec<Vec<usize>> {
        let mut holders = vec![Vec::new(); self.spec.partitions[g] as usize];
        for (a, m) in self.members.iter().enumerate().filter(|(_, m)| m.group == g) {
            for &p in m.working.keys() {
                holders[p as usize].push(a);
            }
        }
        holders
    }

    /// The members of group `g` that work on some partition now.
    pub fn working_members(&self, g: usize) -> Vec<usize> {
        (0..self.members.len())
            .filter(|&a| self.members[a].group == g && !self.members[a].working.is_empty())
            .collect()
    }

    /// What is wrong with group `g` now: a member that runs and is out of
    /// the group or leaving it (unless the runner's scripted change holds it
    /// out), or in it without a session it trusts or without its member
    /// key as it wants it; if the group has a live ready member, a
    /// partition without exactly one owner, an owner that is not a live
    /// ready member; a member owning fewer than the floor or more than the
    /// ceiling of its share `n·w/W` (`W`: the live ready members' total
    /// weight), or a zone likewise (guarantees 2 and 3 of
    /// `tenure_partitions`: no exclusions, so one tier).
    pub fn problems(&self, g: usize, now_ns: u64) -> Problems {
        let mut out = Problems::default();
        let name = group_name(g);
        for (a, m) in self.members.iter().enumerate() {
            let p = self.apps.proc(a);
            if m.group != g || !p.running() || m.held_out {
                continue;
            }
            if !m.inside || m.leaving {
                out.coverage.push(format!("member{a} of {name} is out of the group or leaving it"));
            } else if p.session.is_none() || !self.apps.trusts(a, now_ns) {
                out.coverage.push(format!("member{a} of {name} runs without a session it trusts"));
            } else if m.joined.as_ref() != Some(&m.want) {
                out.coverage.push(format!("member{a} of {name} has not joined as {:?}", m.want));
            }
        }
        let live = self.live_ready(g, now_ns);
        if live.is_empty() {
            return out;
        }
        let n = u64::from(self.spec.partitions[g]);
        let mut count: BTreeMap<usize, u64> = BTreeMap::new();
        for (p, holders) in self.holders(g).iter().enumerate() {
            match holders[..] {
                [] => out.coverage.push(format!("{name}/{p} has no owner")),
                [a] if live.iter().any(|l| l.app == a) => *count.entry(a).or_default() += 1,
                [a] => out
                    .coverage
                    .push(format!("{name}/{p} is owned by member{a}, not live and ready")),
                _ => out.coverage.push(format!("{name}/{p} is owned by members {holders:?}")),
            }
        }
        let total: u64 = live.iter().map(|l| u64::from(l.spec.weight)).sum();
        let within = |owned: u64, w: u64| {
            let (floor, ceil) = (n * w / total, (n * w).div_ceil(total));
            (floor..=ceil).contains(&owned).then_some(()).ok_or((floor, ceil))
        };
        let mut zones: BTreeMap<Option<&str>, (u64, u64)> = BTreeMap::new();
        for l in &live {
            let (owned, w) = (count.get(&l.app).copied().unwrap_or(0), u64::from(l.spec.weight));
            let zone = zones.entry(l.spec.zone.as_deref()).or_default();
            zone.0 += owned;
            zone.1 += w;
            if let Err((floor, ceil)) = within(owned, w) {
                out.balance.push(format!(
                    "{name}: member{} (weight {w}) owns {owned}, not {floor} to {ceil} of {n} over weight {total}",
                    l.app
                ));
            }
        }
        for (zone, (owned, w)) in zones {
            if let Err((floor, ceil)) = within(owned, w) {
                out.balance.push(format!(
                    "{name}: zone {zone:?} (weight {w}) owns {owned}, not {floor} to {ceil} of {n}"
                ));
            }
        }
        out
    }

    /// The assignment's input for group `g` now: its live ready members and
    /// the owner of each partition (by the members' own view), as `change`
    /// leaves them (the member who leaves left out, the one who joins in).
    fn assignment_input(
        &self,
        g: usize,
        now_ns: u64,
        change: Option<Change>,
    ) -> (Vec<tenure_partitions::Member>, Vec<Option<MemberId>>) {
        let mut live = self.live_ready(g, now_ns);
        match change {
            Some(Change::Leave(x)) => live.retain(|l| l.app != x),
            Some(Change::Join(x)) => {
                if let (false, Some(session)) =
                    (live.iter().any(|l| l.app == x), self.apps.proc(x).session)
                {
                    live.push(LiveMember { app: x, session, spec: self.members[x].want.clone() });
                }
            }
            None => {}
        }
        let members = live.iter().map(|l| l.spec.member(l.session.0)).collect();
        let current = self
            .holders(g)
            .iter()
            .map(|h| match h[..] {
                [a] => self.apps.proc(a).session.map(|s| s.0),
                _ => None,
            })
            .collect();
        (members, current)
    }

    /// Whether group `g` is where the keeper would leave it: no problem,
    /// and the assignment from its current owners moves nothing.
    pub fn at_rest(&self, g: usize, now_ns: u64) -> bool {
        let p = self.problems(g, now_ns);
        if !p.coverage.is_empty() || !p.balance.is_empty() {
            return false;
        }
        let (members, current) = self.assignment_input(g, now_ns, None);
        assign(self.spec.partitions[g], &members, &current).is_ok_and(|a| a.moves.is_empty())
    }

    /// Every group at rest ([`Partitions::at_rest`]).
    pub fn all_at_rest(&self, now_ns: u64) -> bool {
        (0..self.spec.groups()).all(|g| self.at_rest(g, now_ns))
    }

    /// The fewest partitions of group `g` that `change` must move from now
    /// (`tenure_partitions::assign`'s moves, which are the minimum for the
    /// counts it must reach: guarantee 5).
    pub fn min_moves(&self, g: usize, now_ns: u64, change: Change) -> Option<u64> {
        let (members, current) = self.assignment_input(g, now_ns, Some(change));
        let a = assign(self.spec.partitions[g], &members, &current).ok()?;
        Some(a.moves.len() as u64)
    }

    /// Grants seen by the members of group `g` since holding `from` (the
    /// length of [`Partitions::holdings`] then): the (partition, epoch)
    /// pairs not worked on before, the partitions that changed hands.
    pub fn grants_since(&self, g: usize, from: usize) -> u64 {
        let grants = |holdings: &[Holding]| -> BTreeSet<(u32, u64)> {
            holdings.iter().filter(|h| h.group == g).map(|h| (h.partition, h.epoch)).collect()
        };
        let before = grants(&self.holdings[..from]);
        grants(&self.holdings[from..]).difference(&before).count() as u64
    }

    /// The last moment, at most `now_ns`, a member started or stopped work
    /// on a partition (`None` if none ever did).
    pub fn last_change(&self, now_ns: u64) -> Option<u64> {
        self.holdings
            .iter()
            .flat_map(|h| [Some(h.start_ns), h.end_ns])
            .flatten()
            .filter(|&t| t <= now_ns)
            .max()
    }

    /// Closes the holdings still open at `now_ns` (at the deadline if it
    /// passed) and checks them all: no overlap between owners of a
    /// partition, epochs strictly increasing across owners. Returns the
    /// violations; fills in the stats (the time each partition spent
    /// without an owner after healing).
    pub fn check(&mut self, now_ns: u64) -> Vec<(Check, String)> {
        for a in 0..self.members.len() {
            self.check_deadline(a, now_ns);
            self.stop_all(a, now_ns, "the run ended");
        }
        let healed = self.settled_at.unwrap_or(u64::MAX);
        let mut violations = Vec::new();
        let mut by_partition: BTreeMap<(usize, u32), Vec<&Holding>> = BTreeMap::new();
        for h in &self.holdings {
            by_partition.entry((h.group, h.partition)).or_default().push(h);
        }
        for ((g, p), mut held) in by_partition {
            held.sort_by_key(|h| h.start_ns);
            let name = format!("{}/{p}", group_name(g));
            // The time it was without an owner after healing, each time.
            let mut covered_until = 0;
            for h in &held {
                if h.start_ns > covered_until.max(healed) {
                    self.stats.without_owner_ns.push(h.start_ns - covered_until.max(healed));
                }
                covered_until = covered_until.max(h.end_ns.unwrap_or(now_ns));
            }
            let spans: Vec<Span> = held
                .iter()
                .map(|h| Span {
                    session: h.session,
                    token: h.epoch,
                    start_ns: h.start_ns,
                    end_ns: h.end_ns,
                })
                .collect();
            for clash in clashes(&spans, now_ns) {
                violations.push(match clash {
                    Clash::Overlap { earlier, later, earlier_end_ns, overlap_ns } => {
                        let (p, l) = (held[earlier], held[later]);
                        self.stats.max_overlap_ns = self.stats.max_overlap_ns.max(overlap_ns);
                        (
                            Check::PartitionOverlap,
                            format!(
                                "{name}: member{} (session {}, epoch {}) worked from {:.3} ms while member{} (session {}, epoch {}) worked {:.3}..{:.3} ms ({}): {:.3} ms of overlap",
                                l.app, l.session, l.epoch, ms(l.start_ns),
                                p.app, p.session, p.epoch, ms(p.start_ns), ms(earlier_end_ns), p.why, ms(overlap_ns)
                            ),
                        )
                    }
                    Clash::Token { earlier, later } => {
                        let (p, l) = (held[earlier], held[later]);
                        (
                            Check::PartitionEpoch,
                            format!(
                                "{name}: member{} (session {}) worked at epoch {} from {:.3} ms after member{} (session {}) worked at epoch {}",
                                l.app, l.session, l.epoch, ms(l.start_ns), p.app, p.session, p.epoch
                            ),
                        )
                    }
                });
            }
        }
        violations
    }
}

impl Role for Partitions {
    type Kind = Kind;

    fn apps(&self) -> &Apps<Kind> {
        &self.apps
    }

    fn apps_mut(&mut self) -> &mut Apps<Kind> {
        &mut self.apps
    }

    /// Stops member `a`'s work once its deadline passed on its clock.
    fn check_deadline(&mut self, a: usize, now_ns: u64) {
        if !self.obeys_deadline() || self.members[a].working.is_empty() {
            return;
        }
        if let Some(at) = self.apps.lapsed(a, now_ns) {
            self.stats.deadline_stops += 1;
            self.stop_all(a, at, "its deadline passed");
        }
    }

    fn faulted(&mut self, a: usize, fault: Fault, now_ns: u64) {
        match fault {
            Fault::Crash => {
                self.stats.app_crashes += 1;
                self.stop_all(a, now_ns, "it crashed");
                let m = &mut self.members[a];
                m.forget_session();
                // A restarted process wants in again.
                m.inside = !m.held_out;
            }
            Fault::Pause => self.stats.app_pauses += 1,
            Fault::CutOff => self.stats.app_cutoffs += 1,
        }
    }

    /// The next operation of member `a`.
    fn next_op(&mut self, a: usize, now_ns: u64) -> Kind {
        if self.apps.proc(a).session.is_none() {
            return Kind::Grant;
        }
        let settled = self.settled_at.is_some();
        let m = &self.members[a];
        if m.leaving || (!m.inside && m.joined.is_some()) {
            return Kind::Leave;
        }
        if !m.to_release.is_empty() {
            let m = &mut self.members[a];
            m.releasing =
                m.to_release.iter().take(recipe::MAX_RELEASE_PARTITIONS).copied().collect();
            return Kind::Release;
        }
        if m.inside && m.joined.as_ref() != Some(&m.want) {
            return Kind::Join;
        }
        if !settled && m.inside && self.apps.rng.gen_bool(LEAVE_CHANCE) {
            self.leave(a, now_ns);
            return Kind::Leave;
        }
        if !settled && m.inside && self.apps.rng.gen_bool(FLIP_CHANCE) {
            self.stats.flips += 1;
            let ready = self.members[a].want.ready;
            if self.weighted && self.apps.rng.gen_bool(0.5) {
                self.members[a].want = draw_spec(&mut self.apps, true, ready);
            } else {
                self.members[a].want.ready = !ready;
            }
            return Kind::Join;
        }
        if !settled && self.apps.rng.gen_bool(REVOKE_CHANCE) {
            self.stats.revocations += 1;
            self.stop_all(a, now_ns, "it revoked its session");
            self.members[a].forget_session();
            self.apps.proc_mut(a).forget_session();
            return Kind::Revoke;
        }
        let m = &mut self.members[a];
        if !m.inside && !m.held_out && now_ns >= m.out_until {
            m.inside = true;
            return Kind::Join;
        }
        Kind::Read
    }

    /// What operation `out` of member `a` asks.
    fn body(&self, a: usize, out: Out<Kind>) -> RequestBody {
        let m = &self.members[a];
        let group = group_name(m.group);
        let session = out.session.unwrap_or_default();
        let member = session.0;
        match out.kind {
            Kind::Grant => {
                RequestBody::Write(Command::Grant { ttl_ms: self.spec.ttl_ms, owner: None })
            }
            Kind::Read => RequestBody::Range { prefix: group_prefix(&group) },
            Kind::Join => RequestBody::Group(GroupCall::Join {
                group,
                spec: GroupSpec {
                    partitions: self.spec.partitions[m.group],
                    stabilise_ms: self.spec.stabilise_ms,
                },
                member,
                me: m.want.clone(),
            }),
            Kind::Leave => RequestBody::Group(GroupCall::Leave { group, member }),
            Kind::Release => RequestBody::Group(GroupCall::Release {
                group,
                member,
                grants: m.releasing.clone(),
            }),
            Kind::Revoke => RequestBody::Write(Command::Revoke { lease: session }),
        }
    }

    fn watches_deadline(&self, a: usize) -> bool {
        self.obeys_deadline() && !self.members[a].working.is_empty()
    }

    /// A request of member `a` ended.
    fn ended(&mut self, a: usize, ended: Ended<Kind>, now_ns: u64) {
        let (out, body, current) = match ended {
            Ended::Renewed => {
                self.stats.renewals += 1;
                return;
            }
            Ended::SessionGone => {
                self.stats.sessions_lost += 1;
                self.stop_all(a, now_ns, "its session was reported gone");
                self.members[a].forget_session();
                return;
            }
            Ended::Nothing => return,
            Ended::Op { out, body, current } => (out, body, current),
        };
        let took = |body: &[u8]| Response::decode(body).ok().and_then(|r| recipe::outcome(&r));
        match (out.kind, body) {
            (Kind::Grant, Some(ReplyBody::Done(bytes))) => {
                if let Ok(Response::Granted { lease, .. }) = Response::decode(&bytes) {
                    self.stats.grants += 1;
                    if self.apps.granted(a, lease, out.sent_local, now_ns) {
                        self.members[a].forget_session();
                    }
                }
            }
            (Kind::Join, Some(ReplyBody::Done(bytes))) if current && took(&bytes).is_some() => {
                self.stats.joins += 1;
                let m = &mut self.members[a];
                m.joined = Some(m.want.clone());
            }
            (Kind::Leave, Some(ReplyBody::Done(bytes))) if current && took(&bytes).is_some() => {
                self.left(a, true, now_ns)
            }
            (
                Kind::Leave,
                Some(ReplyBody::GroupRefused(RecipeError::NotMember(_) | RecipeError::NoGroup(_))),
            ) if current => self.left(a, false, now_ns),
            (Kind::Release, Some(body)) if current => {
                if let ReplyBody::Done(bytes) = &body {
                    if let Ok(Response::Txn { succeeded: true, responses, .. }) =
                        Response::decode(bytes)
                    {
                        self.stats.releases += 1;
                        // A put in a release is a partition handed over.
                        self.stats.handovers += responses
                            .iter()
                            .filter(|r| matches!(r, OpResponse::Put { .. }))
                            .count() as u64;
                    }
                }
                // Definite either way: the next read shows the keys still
                // there.
                let m = &mut self.members[a];
                for g in std::mem::take(&mut m.releasing) {
                    m.to_release.remove(&g);
                }
            }
            (Kind::Read, Some(ReplyBody::Range { kvs, .. })) if current => {
                self.read(a, &kvs, now_ns)
            }
            _ => {}
        }
    }
}

/// A member's spec: weight 1 and no zone unless `weighted`.
fn draw_spec(apps: &mut Apps<Kind>, weighted: bool, ready: bool) -> MemberSpec {
    if !weighted {
        return MemberSpec { ready, ..MemberSpec::default() };
    }
    let weight = apps.rng.gen_range(1..=MAX_WEIGHT);
    let zone = match apps.rng.gen_range(0..=ZONES.len()) {
        0 => None,
        z => Some(ZONES[z - 1].to_string()),
    };
    MemberSpec { weight, zone, ready, ..MemberSpec::default() }
}

/// A partition's 8 hex digits, as `owner_key` writes them.
fn parse_partition(s: &str) -> Option<u32> {
    if s.len() != 8 || !s.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()) {
        return None;
    }
    u32::from_str_radix(s, 16).ok()
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;
    use tenure_partitions::group::owner_key;

    fn holding(p: u32, app: usize, epoch: u64, start: u64, end: u64) -> Holding {
        Holding {
            group: 0,
            partition: p,
            app,
            session: LeaseId(app as u64 + 1),
            epoch,
            start_ns: start,
            end_ns: Some(end),
            why: "test",
        }
    }

    fn checked(holdings: Vec<Holding>) -> Vec<Check> {
        let mut w = Partitions::new(PartitionsSpec::default(), 0, 3, 1, 0, 1, false);
        w.holdings = holdings;
        w.check(1_000).into_iter().map(|(c, _)| c).collect()
    }

    #[test]
    fn the_checker_sees_overlaps_and_epochs_that_go_back() {
        assert!(checked(vec![holding(0, 0, 5, 0, 10), holding(0, 1, 7, 10, 20)]).is_empty());
        // Other partitions do not overlap each other.
        assert!(checked(vec![holding(0, 0, 5, 0, 10), holding(1, 1, 7, 5, 20)]).is_empty());
        assert_eq!(
            checked(vec![holding(0, 0, 5, 0, 10), holding(0, 1, 7, 9, 20)]),
            vec![Check::PartitionOverlap]
        );
        assert_eq!(
            checked(vec![holding(0, 0, 7, 0, 10), holding(0, 1, 7, 10, 20)]),
            vec![Check::PartitionEpoch]
        );
        // The same grant worked on again (after a lapsed deadline) is fine.
        assert!(checked(vec![holding(0, 0, 7, 0, 10), holding(0, 0, 7, 15, 20)]).is_empty());
    }

    #[test]
    fn partitions_parse_as_owner_keys_write_them() {
        let key = owner_key("g0", 11);
        let p = key.strip_prefix(&group_prefix("g0")).and_then(|k| k.strip_prefix("owners/"));
        assert_eq!(p.and_then(parse_partition), Some(11));
        assert_eq!(parse_partition("0000000B"), None);
        assert_eq!(parse_partition("b"), None);
    }
}
