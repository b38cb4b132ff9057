//! What the leader measures of groups of partitions (docs/PARTITIONS.md,
//! "Observing a group"): per partition, when it became unowned and when it
//! was granted again (its spells without an owner); per group, the moves
//! (grants to a member other than the partition's previous owner), the
//! imbalance and the partitions without an owner now.
//!
//! [`GroupsStats`] is the sans-IO part: [`GroupsStats::observe`] looks at
//! the applied store and the time, and compares each group that changed
//! since its last look (from the store's change history; every group when
//! that history is no longer kept) with what it saw then. The groups
//! service calls it on the ready leader at every plan of the keeper, in
//! the same read as the keeper's (a burst of changes is looked at once,
//! [`crate::groups::LOOK_QUIET`]), so every state the keeper grants from
//! was seen: a partition's absence is seen before its grant. A spell is measured from the first
//! look that saw the owner key absent to the first that saw it again.
//!
//! [`GroupsWatch`] is that state shared by one node's groups service, its
//! HTTP API (`GET /v1/groups/{name}`) and its `/metrics`: the node's
//! [`crate::metrics::Metrics`] carries it to all three.
//!
//! **Memory.** Per partition of every group 32 bytes ([`PartitionStats`]):
//! at most [`MAX_GROUPS`] × [`MAX_GROUP_PARTITIONS`] = 10 million
//! partitions, 320 MB, next to the store's own owner keys (one per owned
//! partition, larger). A group's state goes when its spec does; all of it
//! goes when this node stops leading.
//!
//! **A new leader** starts its clocks when it begins to lead: a partition
//! without an owner then is counted from that moment (the store keeps no
//! time of its own, so a spell that began under an earlier leader is
//! under-counted), and its first grant is no move (its previous owner is
//! not known).

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard};
use tenure_api::{GroupStatsBody, PartitionStatsBody};
use tenure_core::FencingToken;
use tenure_kv::Store;
use tenure_partitions::group::{Group, GroupKeys, GROUPS_PREFIX, MAX_GROUP_PARTITIONS};
use tenure_partitions::keeper::MAX_GROUPS;
use tenure_partitions::MemberId;

/// Upper bounds of the histogram of spells without an owner, in seconds:
/// from a release granted again at once (milliseconds) to an owner whose
/// session had to expire, or a group waiting for members (minutes).
pub const UNOWNED_BUCKETS_S: [f64; 16] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

/// `unowned_since` of a partition that has an owner.
const OWNED: u64 = u64::MAX;

/// One partition as the leader last saw it: 32 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartitionStats {
    /// Its owner, or the last one seen (0: none seen yet; lease ids are
    /// positive).
    owner: MemberId,
    /// Since when it has been without an owner (milliseconds on the
    /// watcher's clock), or [`OWNED`].
    unowned_since: u64,
    /// Its ended spells in all, in milliseconds.
    total_ms: u64,
    /// Its last ended spell, in milliseconds (saturating at 49 days).
    last_ms: u32,
    /// Its ended spells (saturating).
    spells: u32,
}

const _: () = assert!(std::mem::size_of::<PartitionStats>() == 32);

impl PartitionStats {
    fn new(owner: Option<MemberId>, now_ms: u64) -> Self {
        PartitionStats {
            owner: owner.unwrap_or(0),
            unowned_since: if owner.is_some() { OWNED } else { now_ms },
            total_ms: 0,
            last_ms: 0,
            spells: 0,
        }
    }

    fn end_spell(&mut self, ms: u64) {
        self.total_ms = self.total_ms.saturating_add(ms);
        self.last_ms = u32::try_from(ms).unwrap_or(u32::MAX);
        self.spells = self.spells.saturating_add(1);
    }

    /// The current spell's length, if it has no owner.
    fn current_ms(&self, now_ms: u64) -> Option<u64> {
        (self.unowned_since != OWNED).then(|| now_ms.saturating_sub(self.unowned_since))
    }
}

/// One group as the leader last saw it.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupStats {
    partitions: Vec<PartitionStats>,
    /// When the leader began to watch it.
    since_ms: u64,
    moves: u64,
    imbalance: f64,
    unowned: u32,
}

impl GroupStats {
    /// Grants to a member other than the partition's previous owner.
    pub fn moves(&self) -> u64 {
        self.moves
    }

    /// The imbalance (`tenure_api::GroupStatsBody::imbalance`).
    pub fn imbalance(&self) -> f64 {
        self.imbalance
    }

    /// Partitions without an owner at the last look.
    pub fn unowned(&self) -> u32 {
        self.unowned
    }

    /// The group's figures at `now_ms`, as the API gives them.
    pub fn body(&self, node: u64, now_ms: u64) -> GroupStatsBody {
        let partitions = self
            .partitions
            .iter()
            .enumerate()
            .filter(|(_, p)| p.spells > 0 || p.unowned_since != OWNED)
            .map(|(i, p)| {
                let current = p.current_ms(now_ms);
                PartitionStatsBody {
                    partition: i as u32,
                    unowned_ms: current,
                    last_unowned_ms: (p.spells > 0).then_some(u64::from(p.last_ms)),
                    total_unowned_ms: p.total_ms.saturating_add(current.unwrap_or(0)),
                    spells: p.spells,
                }
            })
            .collect();
        GroupStatsBody {
            node,
            watched_ms: now_ms.saturating_sub(self.since_ms),
            moves: self.moves,
            imbalance: self.imbalance,
            unowned: self.unowned,
            partitions,
        }
    }
}

/// The groups one look compares, copied out of the store
/// ([`GroupsStats::copy`]).
#[derive(Clone, Debug)]
pub struct Copied {
    /// The store's revision.
    revision: u64,
    /// When every group is looked at (the first look, or the changes since
    /// the last are no longer kept): their names; the others are forgotten.
    every: Option<Vec<String>>,
    /// The keys of each group looked at.
    groups: Vec<Arc<GroupKeys>>,
}

impl Copied {
    /// Parses every group copied ([`GroupKeys::group`]), so that a later
    /// look at them parses nothing.
    pub fn parse(&self) {
        for keys in &self.groups {
            keys.group();
        }
    }
}

/// What one look saw end.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observed {
    /// The spells without an owner that ended (a grant), in milliseconds.
    pub spells_ms: Vec<u64>,
    /// Grants to a member other than the partition's previous owner.
    pub moves: u64,
}

/// The leader's figures of every group. See the module documentation.
#[derive(Clone, Debug, Default)]
pub struct GroupsStats {
    groups: BTreeMap<String, GroupStats>,
    /// The store's revision at the last look; `None` before the first.
    through: Option<u64>,
}

impl GroupsStats {
    /// Nothing seen yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes note that no key of any group changed from revision `from`
    /// through `revision`: if the last look was at `from - 1` or later,
    /// the next look starts after `revision`. (Without it, a busy store's
    /// other writes would push the last look out of the kept history, and
    /// the next look would read every group.)
    pub fn unchanged(&mut self, from: u64, revision: u64) {
        if let Some(t) = self.through {
            if t + 1 >= from && t < revision {
                self.through = Some(revision);
            }
        }
    }

    /// Group `name` as last seen.
    pub fn group(&self, name: &str) -> Option<&GroupStats> {
        self.groups.get(name)
    }

    /// Every group as last seen, by name.
    pub fn groups(&self) -> impl Iterator<Item = (&String, &GroupStats)> {
        self.groups.iter()
    }

    /// Looks at `store` at `now_ms` (a monotonic clock in milliseconds):
    /// every group whose keys changed since the last look (every group at
    /// the first look, or when the changes since are no longer kept) is
    /// compared with what was seen of it. Returns the spells that ended and
    /// the moves seen. [`GroupsStats::copy`], then
    /// [`GroupsStats::observe_copied`].
    pub fn observe(&mut self, now_ms: u64, store: &Store) -> Observed {
        match self.copy(store) {
            Some(copied) => self.observe_copied(now_ms, copied),
            None => Observed::default(),
        }
    }

    /// The keys of the groups that changed since the last look, copied out
    /// of `store` (nothing parsed: a node copies under the replica's lock
    /// and compares after letting go); `None` when no group can have
    /// changed.
    pub fn copy(&self, store: &Store) -> Option<Copied> {
        self.copy_reusing(store, &[])
    }

    /// [`GroupsStats::copy`], taking the keys of a group from `have` where
    /// it holds them (copied from the same `store` at the same revision)
    /// rather than copying them again.
    pub fn copy_reusing(&self, store: &Store, have: &[Arc<GroupKeys>]) -> Option<Copied> {
        let revision = store.revision();
        let changed: Option<BTreeSet<String>> = match self.through {
            None => None,
            Some(through) if through >= revision => return None,
            Some(through) => store.history_between(through + 1, revision).ok().map(|changes| {
                changes.filter_map(|c| group_of(&c.kv.key)).map(str::to_string).collect()
            }),
        };
        let (every, names) = match changed {
            Some(names) => (false, names.into_iter().collect()),
            None => (true, Group::names(store, MAX_GROUPS)),
        };
        let groups = names
            .iter()
            .map(|name| match have.iter().find(|k| k.name() == name) {
                Some(keys) => keys.clone(),
                None => Arc::new(GroupKeys::copy(store, name)),
            })
            .collect();
        Some(Copied { revision, every: every.then_some(names), groups })
    }

    /// Compares the groups `copied` holds with what was seen of them. A
    /// copy older than the last look changes nothing, nor does one of only
    /// some groups when nothing was seen yet (it was copied for figures
    /// since forgotten).
    pub fn observe_copied(&mut self, now_ms: u64, copied: Copied) -> Observed {
        let mut seen = Observed::default();
        let stale = match self.through {
            Some(t) => t >= copied.revision,
            None => copied.every.is_none(),
        };
        if stale {
            return seen;
        }
        self.through = Some(copied.revision);
        if let Some(names) = copied.every {
            let kept: BTreeSet<&String> = names.iter().collect();
            self.groups.retain(|name, _| kept.contains(name));
        }
        for keys in &copied.groups {
            self.look(now_ms, keys.name(), keys.group(), &mut seen);
        }
        seen
    }

    /// Compares group `name`, as parsed (`None`: gone, or unreadable),
    /// with what was seen of it.
    fn look(&mut self, now_ms: u64, name: &str, group: Option<&Group>, seen: &mut Observed) {
        let Some(group) = group else {
            self.groups.remove(name);
            return;
        };
        let n = group.spec.partitions.min(MAX_GROUP_PARTITIONS) as usize;
        let owner = |p: usize| group.owners.get(&(p as u32)).map(|o| o.ownership.member);
        match self.groups.get_mut(name) {
            Some(stats) if stats.partitions.len() == n => {
                for (p, ps) in stats.partitions.iter_mut().enumerate() {
                    let moved = compare(ps, owner(p), now_ms, seen);
                    stats.moves += moved;
                    seen.moves += moved;
                }
            }
            // New, or created again with another count: watched afresh.
            _ => {
                let partitions = (0..n).map(|p| PartitionStats::new(owner(p), now_ms)).collect();
                let fresh = GroupStats {
                    partitions,
                    since_ms: now_ms,
                    moves: 0,
                    imbalance: 0.0,
                    unowned: 0,
                };
                self.groups.insert(name.to_string(), fresh);
            }
        }
        let stats = self.groups.get_mut(name).expect("seen just now");
        stats.unowned = (n - group.owners.len().min(n)) as u32;
        stats.imbalance = imbalance(group);
    }
}

/// Updates one partition from its owner now; returns 1 for a move.
fn compare(
    ps: &mut PartitionStats,
    now: Option<MemberId>,
    now_ms: u64,
    seen: &mut Observed,
) -> u64 {
    let moved = |ps: &PartitionStats, m: MemberId| u64::from(ps.owner != 0 && ps.owner != m);
    match (ps.unowned_since, now) {
        (OWNED, Some(m)) if m == ps.owner => 0,
        // Granted again between two looks (only a grant that this leader's
        // keeper did not plan can be: a proposal of an earlier leadership):
        // a spell too short to be seen.
        (OWNED, Some(m)) => {
            let moves = moved(ps, m);
            ps.end_spell(0);
            seen.spells_ms.push(0);
            ps.owner = m;
            moves
        }
        (OWNED, None) => {
            ps.unowned_since = now_ms;
            0
        }
        (since, Some(m)) => {
            let ms = now_ms.saturating_sub(since);
            let moves = moved(ps, m);
            ps.end_spell(ms);
            seen.spells_ms.push(ms);
            ps.owner = m;
            ps.unowned_since = OWNED;
            moves
        }
        (_, None) => 0,
    }
}

/// The imbalance of `group` (`tenure_api::GroupStatsBody::imbalance`),
/// rounded to thousandths.
pub fn imbalance(group: &Group) -> f64 {
    let mut owned: BTreeMap<MemberId, (u64, u64)> = group
        .members
        .values()
        .filter(|m| m.spec.ready)
        .map(|m| (m.id, (0, u64::from(m.spec.weight))))
        .collect();
    for o in group.owners.values() {
        if let Some((count, _)) = owned.get_mut(&o.ownership.member) {
            *count += 1;
        }
    }
    let total: u64 = owned.values().map(|(c, _)| c).sum();
    let weight: u64 = owned.values().map(|(_, w)| w).sum();
    if weight == 0 {
        return 0.0;
    }
    let off = owned.values().map(|&(c, w)| c as f64 - (total * w) as f64 / weight as f64);
    let (lo, hi) = off.fold((f64::MAX, f64::MIN), |(lo, hi), d| (lo.min(d), hi.max(d)));
    ((hi - lo) * 1000.0).round() / 1000.0
}

/// The group a key under [`GROUPS_PREFIX`] belongs to.
fn group_of(key: &str) -> Option<&str> {
    key.strip_prefix(GROUPS_PREFIX)?.split_once('/').map(|(name, _)| name)
}

/// One node's [`GroupsStats`], shared by its groups service (which alone
/// looks while it leads), its HTTP API and its `/metrics`, with the
/// cumulative metrics of every leadership of this process.
#[derive(Debug)]
pub struct GroupsWatch {
    state: Mutex<Watched>,
    /// Spells without an owner that ended, while this process led.
    unowned_seconds: Histogram,
    /// Moves seen while this process led.
    moves: Counter,
    /// The watcher's clock's origin.
    base: std::time::Instant,
}

#[derive(Debug, Default)]
struct Watched {
    /// The leadership the figures are of (`None`: not leading; none kept).
    leading: Option<FencingToken>,
    stats: GroupsStats,
}

impl Default for GroupsWatch {
    fn default() -> Self {
        GroupsWatch {
            state: Mutex::default(),
            unowned_seconds: Histogram::new(UNOWNED_BUCKETS_S),
            moves: Counter::default(),
            base: std::time::Instant::now(),
        }
    }
}

impl GroupsWatch {
    fn lock(&self) -> MutexGuard<'_, Watched> {
        // A panic under the lock leaves figures, not invariants: go on.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Milliseconds on the watcher's clock.
    pub fn now_ms(&self) -> u64 {
        u64::try_from(self.base.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Starts measuring afresh for `leading` (the groups service, at each
    /// change of its leadership; `None`: it no longer leads, nothing is
    /// kept).
    pub fn follow(&self, leading: Option<FencingToken>) {
        let mut w = self.lock();
        if w.leading != leading {
            *w = Watched { leading, stats: GroupsStats::new() };
        }
    }

    /// The leadership measured for, if any.
    pub fn leading(&self) -> Option<FencingToken> {
        self.lock().leading
    }

    /// Looks at `store` now, if measuring for a leadership (see
    /// [`GroupsStats::observe`]); counts what ended in the metrics.
    pub fn observe(&self, store: &Store) {
        if let Some(copied) = self.copy(store) {
            self.observe_copied(copied);
        }
    }

    /// [`GroupsStats::copy`], if measuring for a leadership: a look's
    /// first half, under the store's lock.
    pub fn copy(&self, store: &Store) -> Option<Copied> {
        self.copy_reusing(store, &[])
    }

    /// [`GroupsStats::copy_reusing`], if measuring for a leadership.
    pub fn copy_reusing(&self, store: &Store, have: &[Arc<GroupKeys>]) -> Option<Copied> {
        let w = self.lock();
        w.leading?;
        w.stats.copy_reusing(store, have)
    }

    /// [`GroupsStats::observe_copied`], if still measuring: a look's
    /// second half, after letting go of the store. The copy is parsed
    /// before the figures are locked (a look under the store's lock may be
    /// waiting for them), and the time read once they are; counts what
    /// ended in the metrics.
    pub fn observe_copied(&self, copied: Copied) {
        copied.parse();
        let mut w = self.lock();
        if w.leading.is_none() {
            return;
        }
        let seen = w.stats.observe_copied(self.now_ms(), copied);
        drop(w);
        for ms in seen.spells_ms {
            self.unowned_seconds.observe(ms as f64 / 1000.0);
        }
        self.moves.inc_by(seen.moves);
    }

    /// See [`GroupsStats::unchanged`] (nothing while not measuring).
    pub fn unchanged(&self, from: u64, revision: u64) {
        let mut w = self.lock();
        if w.leading.is_some() {
            w.stats.unchanged(from, revision);
        }
    }

    /// Group `name`'s figures as the API gives them, as of the last look
    /// ([`GroupsWatch::observe`], or a copy observed); `None` when not
    /// measuring for a leadership or the group is not known.
    pub fn group_body(&self, node: u64, name: &str) -> Option<GroupStatsBody> {
        let w = self.lock();
        w.leading?;
        w.stats.group(name).map(|g| g.body(node, self.now_ms()))
    }

    /// Registers the metrics: the histogram and the counter always (what
    /// this process measured while it led), the per-group gauges only
    /// while it measures for a leadership.
    pub fn register(&self, r: &mut Registry) {
        r.register(
            "partitions_unowned_seconds",
            "Spells without an owner of the partitions of every group, from the leader's first \
             look that saw the owner key absent to the first that saw it granted, measured while \
             this node led (a spell that began under an earlier leader counts from this one's start)",
            self.unowned_seconds.clone(),
        );
        r.register(
            "partitions_moves",
            "Partitions granted to a member other than their previous owner, seen while this node \
             led",
            self.moves.clone(),
        );
        // The gauge families are always listed (a scrape sees the same
        // families on every node); their samples only while leading.
        let w = self.lock();
        let unowned = Family::<Vec<(String, String)>, Gauge>::default();
        let imbalance = Family::<Vec<(String, String)>, Gauge<f64, AtomicU64>>::default();
        let groups = if w.leading.is_some() { Some(w.stats.groups()) } else { None };
        for (name, g) in groups.into_iter().flatten() {
            let label = vec![("group".to_string(), name.clone())];
            unowned.get_or_create(&label).set(i64::from(g.unowned()));
            imbalance.get_or_create(&label).set(g.imbalance());
        }
        drop(w);
        r.register(
            "partitions_unowned",
            "On the leader: partitions of each group without an owner now",
            unowned,
        );
        r.register(
            "partitions_imbalance",
            "On the leader: how far each group's ready members' partition counts are from their \
             weighted shares (max - min of owned - share; with equal weights max - min count)",
            imbalance,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tenure_kv::{Command, Response};
    use tenure_partitions::group::{owner_key, GroupSpec, MemberSpec, Ownership};
    use tenure_partitions::recipe;

    /// A store with group `g` of `n` partitions and no stabilisation.
    struct Fixture {
        s: Store,
    }

    impl Fixture {
        fn new(n: u32) -> (Fixture, u64) {
            let mut f = Fixture { s: Store::new() };
            let a = f.member(Some(n), MemberSpec::default());
            (f, a)
        }

        fn session(&mut self) -> u64 {
            match self.s.execute(&Command::Grant { ttl_ms: 60_000, owner: None }) {
                Response::Granted { lease, .. } => lease.0,
                r => panic!("{r:?}"),
            }
        }

        /// A new member of `g` (creating it with `n` partitions).
        fn member(&mut self, n: Option<u32>, spec: MemberSpec) -> u64 {
            let id = self.session();
            let group = n.map(|partitions| GroupSpec { partitions, stabilise_ms: 0 });
            let c = recipe::join(&self.s, "g", group.as_ref(), id, &spec).unwrap();
            assert!(recipe::outcome(&self.s.execute(&c)).is_some());
            id
        }

        fn grant(&mut self, p: u32, member: u64) {
            let value =
                serde_json::to_vec(&Ownership { member, release: false, to: None }).unwrap();
            let put = Command::Put {
                key: owner_key("g", p),
                value,
                if_mod_revision: None,
                lease: Some(tenure_kv::LeaseId(member)),
            };
            assert!(matches!(self.s.execute(&put), Response::Put { .. }));
        }

        fn drop_owner(&mut self, p: u32) {
            let delete = Command::Delete { key: owner_key("g", p), if_mod_revision: None };
            self.s.execute(&delete);
        }
    }

    #[test]
    fn a_copy_older_than_the_last_look_or_of_some_groups_before_any_look_changes_nothing() {
        let (mut f, a) = Fixture::new(2);
        let mut stats = GroupsStats::new();
        f.grant(0, a);
        stats.observe(0, &f.s);
        f.drop_owner(0);
        f.grant(0, a);
        let old = stats.copy(&f.s).expect("group g changed");
        f.drop_owner(0);
        // A later look sees partition 0 without an owner since t=10 ...
        stats.observe(10, &f.s);
        f.grant(0, a);
        // ... and the older copy, which shows it owned, is no grant.
        assert_eq!(stats.observe_copied(20, old), Observed::default());
        assert_eq!(stats.group("g").unwrap().unowned(), 2);
        assert_eq!(stats.observe(30, &f.s), Observed { spells_ms: vec![20], moves: 0 });
        // Figures forgotten (a new leadership): only a copy of every group counts.
        let some = stats.copy(&f.s);
        let mut fresh = GroupsStats::new();
        f.grant(1, a);
        let partial = stats.copy(&f.s).expect("group g changed");
        assert_eq!(fresh.observe_copied(40, partial), Observed::default());
        assert!(fresh.group("g").is_none());
        assert!(some.is_none(), "nothing changed since the last look");
        let every = fresh.copy(&f.s).expect("the first look copies every group");
        fresh.observe_copied(50, every);
        assert_eq!(fresh.group("g").unwrap().unowned(), 0);
    }

    #[test]
    fn a_spell_is_measured_from_the_look_that_saw_the_owner_gone_to_the_one_that_saw_a_grant() {
        let (mut f, a) = Fixture::new(2);
        let mut stats = GroupsStats::new();
        f.grant(0, a);
        // First look at t=100: partition 1 has no owner since then.
        assert_eq!(stats.observe(100, &f.s), Observed::default());
        let g = stats.group("g").unwrap();
        assert_eq!(g.unowned(), 1);
        let body = g.body(7, 150);
        assert_eq!((body.node, body.watched_ms, body.unowned), (7, 50, 1));
        assert_eq!(
            body.partitions,
            [PartitionStatsBody {
                partition: 1,
                unowned_ms: Some(50),
                last_unowned_ms: None,
                total_unowned_ms: 50,
                spells: 0,
            }]
        );
        // Granted at t=400: a spell of 300 ms; the first grant is no move.
        f.grant(1, a);
        let seen = stats.observe(400, &f.s);
        assert_eq!(seen, Observed { spells_ms: vec![300], moves: 0 });
        // Partition 0 loses its owner at 500, is granted again at 520.
        f.drop_owner(0);
        assert_eq!(stats.observe(500, &f.s), Observed::default());
        // A look with nothing new changes nothing.
        assert_eq!(stats.observe(510, &f.s), Observed::default());
        f.grant(0, a);
        assert_eq!(stats.observe(520, &f.s), Observed { spells_ms: vec![20], moves: 0 });
        let body = stats.group("g").unwrap().body(7, 600);
        let ended = |partition, ms| PartitionStatsBody {
            partition,
            unowned_ms: None,
            last_unowned_ms: Some(ms),
            total_unowned_ms: ms,
            spells: 1,
        };
        assert_eq!(body.partitions, [ended(0, 20), ended(1, 300)]);
        assert_eq!(body.unowned, 0);
    }

    #[test]
    fn a_span_without_group_changes_moves_the_last_look_on() {
        let (mut f, _) = Fixture::new(2);
        let mut stats = GroupsStats::new();
        stats.unchanged(1, 5);
        assert_eq!(stats.through, None, "no look yet: the first reads every group");
        stats.observe(100, &f.s);
        let looked = f.s.revision();
        let put = |k: &str| Command::Put {
            key: k.to_string(),
            value: vec![1],
            if_mod_revision: None,
            lease: None,
        };
        f.s.execute(&put("other"));
        let now = f.s.revision();
        // A gap between the last look and `from`: unknown changes, kept.
        stats.unchanged(looked + 2, now);
        assert_eq!(stats.through, Some(looked));
        stats.unchanged(looked + 1, now);
        assert_eq!(stats.through, Some(now));
        assert_eq!(stats.observe(200, &f.s), Observed::default());
    }

    #[test]
    fn moves_are_counted_only_when_the_owner_changes() {
        let (mut f, a) = Fixture::new(3);
        let b = f.member(None, MemberSpec::default());
        let mut stats = GroupsStats::new();
        stats.observe(0, &f.s);
        // First grants: no moves.
        for p in 0..3 {
            f.grant(p, a);
        }
        assert_eq!(stats.observe(10, &f.s).moves, 0);
        // Released and granted to A again: a spell, no move.
        f.drop_owner(0);
        stats.observe(20, &f.s);
        f.grant(0, a);
        assert_eq!(stats.observe(30, &f.s), Observed { spells_ms: vec![10], moves: 0 });
        // Released and granted to B: a move.
        f.drop_owner(1);
        stats.observe(40, &f.s);
        f.grant(1, b);
        assert_eq!(stats.observe(45, &f.s), Observed { spells_ms: vec![5], moves: 1 });
        // Deleted and granted to B between two looks: a move and a spell too
        // short to be seen.
        f.drop_owner(2);
        f.grant(2, b);
        assert_eq!(stats.observe(50, &f.s), Observed { spells_ms: vec![0], moves: 1 });
        assert_eq!(stats.group("g").unwrap().moves(), 2);
    }

    #[test]
    fn the_history_finds_the_changed_groups_and_a_deleted_group_is_forgotten() {
        let (mut f, a) = Fixture::new(2);
        let mut stats = GroupsStats::new();
        stats.observe(0, &f.s);
        assert!(stats.group("g").is_some());
        // Another key changes: the group is not read again (its stats stay).
        let put =
            Command::Put { key: "x".into(), value: vec![], if_mod_revision: None, lease: None };
        f.s.execute(&put);
        assert_eq!(stats.observe(5, &f.s), Observed::default());
        f.grant(0, a);
        stats.observe(10, &f.s);
        assert_eq!(stats.group("g").unwrap().unowned(), 1);
        // Its member's session ends: owner and member keys go.
        f.s.execute(&Command::Revoke { lease: tenure_kv::LeaseId(a) });
        stats.observe(20, &f.s);
        assert_eq!(stats.group("g").unwrap().unowned(), 2);
        let spec = Command::Delete { key: "_tenure/groups/g/spec".into(), if_mod_revision: None };
        f.s.execute(&spec);
        stats.observe(30, &f.s);
        assert!(stats.group("g").is_none(), "a deleted group's state goes");
    }

    #[test]
    fn imbalance_is_the_spread_around_the_weighted_shares() {
        let (mut f, a) = Fixture::new(6);
        let b = f.member(None, MemberSpec { weight: 2, ..MemberSpec::default() });
        // Not ready: it does not count.
        f.member(None, MemberSpec { ready: false, ..MemberSpec::default() });
        let nothing = imbalance(&Group::read(&f.s, "g").unwrap());
        assert_eq!(nothing, 0.0, "nothing owned: both at their share, 0");
        // A (weight 1) owns 2 and B (weight 2) owns 4: at their shares.
        for p in 0..2 {
            f.grant(p, a);
        }
        for p in 2..6 {
            f.grant(p, b);
        }
        assert_eq!(imbalance(&Group::read(&f.s, "g").unwrap()), 0.0);
        // A owns 4, B 2: shares 2 and 4, off by +2 and -2.
        f.drop_owner(2);
        f.drop_owner(3);
        f.grant(2, a);
        f.grant(3, a);
        assert_eq!(imbalance(&Group::read(&f.s, "g").unwrap()), 4.0);
        // Equal weights: max - min count (2 and 1 of 3).
        let (mut f, a) = Fixture::new(3);
        let c = f.member(None, MemberSpec::default());
        f.grant(0, a);
        f.grant(1, a);
        f.grant(2, c);
        assert_eq!(imbalance(&Group::read(&f.s, "g").unwrap()), 1.0);
    }

    #[test]
    fn a_watch_measures_only_for_a_leadership_and_starts_afresh() {
        let (mut f, a) = Fixture::new(2);
        let w = GroupsWatch::default();
        w.observe(&f.s);
        assert_eq!(w.group_body(1, "g"), None, "not leading: nothing measured");
        w.follow(Some(FencingToken(3)));
        assert_eq!(w.group_body(1, "g"), None, "not looked at yet");
        w.observe(&f.s);
        let body = w.group_body(1, "g").unwrap();
        assert_eq!(body.unowned, 2);
        f.grant(0, a);
        f.grant(1, a);
        w.observe(&f.s);
        let mut r = Registry::default();
        w.register(&mut r);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &r).unwrap();
        assert!(text.contains("partitions_unowned_seconds_count 2"), "{text}");
        assert!(text.contains("partitions_unowned{group=\"g\"} 0"), "{text}");
        assert!(text.contains("partitions_imbalance{group=\"g\"} 0.0"), "{text}");
        w.follow(None);
        assert_eq!(w.group_body(1, "g"), None);
        let mut r = Registry::default();
        w.register(&mut r);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &r).unwrap();
        assert!(text.contains("partitions_unowned_seconds_count 2"), "cumulative: {text}");
        assert!(!text.contains("partitions_imbalance{"), "no gauges on a follower: {text}");
    }
}
