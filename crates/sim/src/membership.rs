//! Changes of members under faults (scenario `membership`, see
//! `docs/MEMBERSHIP.md`): spare nodes beside the bootstrap voters, a driver
//! of changes (the operator) that adds, promotes, removes and replaces
//! members on the ready leader's replica, and the checks of what the logs
//! commit.
//!
//! * **The cluster.** Of `--nodes N` nodes, the first
//!   [`initial_voters`]`(N)` (a majority of them) are the bootstrap voters;
//!   the others are spares: their electors are built with the bootstrap
//!   voters, which do not hold them, so they never stand until a
//!   configuration makes them voters.
//! * **The operator** ([`Operator`]) acts at random times on the ready
//!   leader, one change at a time (it waits until the last one committed):
//!   it adds a spare as a learner, promotes a learner (refused with
//!   `ChangeError::Behind` until it holds everything committed: it tries
//!   again later), removes a learner or a voter (never the last voter), or
//!   replaces a voter: adds a spare, promotes it, then removes the old
//!   voter. A removed node keeps running for a while (it must not disrupt
//!   anyone: pre-votes and leases stop it), then it is crashed for good and
//!   its disk wiped ([`crate::host::Host::wipe`]). Most wiped nodes come
//!   back later, empty, with a new data-directory identity: a spare again,
//!   which the operator may add as a new member (named by its new
//!   directory), never the old one.
//! * **Joining.** A node that comes back after a wipe is built as a node
//!   that joins: its elector's voters, and its replica's bootstrap list,
//!   are the bootstrap voters without itself, so that it neither stands nor
//!   counts as the voter it was until a configuration names it again. (With
//!   the full bootstrap list, a wiped bootstrap voter would stand as that
//!   voter with an empty log: the freshness rule refuses it once a change
//!   committed, but wiped bootstrap voters could elect one another.)
//! * **The glue** (`runner/kv.rs`): every replica output's electorate goes
//!   to the elector once the output's write is durable and before its
//!   messages leave, and a replica's electorate goes to its elector
//!   whenever the replica is (re)built.
//!
//! Checks ([`MembershipChecks`], beside the key-value checks):
//!
//! * `config-chain`: every committed configuration entry differs from the
//!   configuration before it in the committing node's log by exactly one
//!   change ([`single_change`]);
//! * `same-config-per-index`: every node that commits log index `i`
//!   commits it under the same configuration (the same entry, with the same
//!   members), snapshots and restarts included;
//! * `membership-convergence` (checked by the runner after healing): a
//!   stable leader that is a voter of the configuration in force, and every
//!   running member's replica holding that configuration.

use crate::checker::Check;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use tenure_core::NodeId;
use tenure_replica::{Change, LogOp, Member, Members, Membership, Payload, Position, Restored};

/// Share of the wiped nodes that come back (as spares).
const REJOIN_SHARE: f64 = 0.75;
/// Members (voters and learners) above which the operator rather shrinks.
const GROW_UNTIL: usize = 5;
/// Voters above which the operator removes voters more often.
const MANY_VOTERS: usize = 3;

/// What the changes of members of a run do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MembershipSpec {
    /// Wiped nodes come back under their ids, as joining spares (most of
    /// them; the operator may add them again). Off, a retired node stays
    /// down for good.
    pub rejoin: bool,
}

impl Default for MembershipSpec {
    /// Wiped nodes come back.
    fn default() -> Self {
        MembershipSpec { rejoin: true }
    }
}

/// The bootstrap voters of a run of `nodes` nodes with changes of members:
/// a majority of them (3 of 5, 2 of 3, 4 of 7); the rest are spares.
pub fn initial_voters(nodes: usize) -> usize {
    nodes - nodes.saturating_sub(1) / 2
}

/// The address a member is added with (unique per node id).
pub fn member_address(id: NodeId) -> String {
    format!("n{id}.sim:2380")
}

/// The settings of a node that joins a running cluster: its elector and its
/// replica bootstrap with the cluster's voters without itself (see the
/// module documentation). Never empty: a lone bootstrap voter keeps itself.
pub fn joining_voters(bootstrap: &[NodeId], me: NodeId) -> Vec<NodeId> {
    let others: Vec<NodeId> = bootstrap.iter().copied().filter(|&v| v != me).collect();
    if others.is_empty() {
        bootstrap.to_vec()
    } else {
        others
    }
}

/// What one committed change did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ChangeKind {
    /// A learner was added.
    AddLearner,
    /// A learner became a voter.
    Promote,
    /// A learner left.
    RemoveLearner,
    /// A voter left.
    RemoveVoter,
}

/// The one change that turns `prev` into `next` (by the replica's own rules,
/// [`Members::after`]), if there is one. A leader fills in what it learned
/// of the members it keeps (the address of a bootstrap member, the data
/// directory of one its handshake showed): that is no change; altering what
/// `prev` knew is.
pub fn single_change(prev: &Members, next: &Members) -> Option<ChangeKind> {
    let mut prev = prev.clone();
    for m in prev.voters.iter_mut().chain(prev.learners.iter_mut()) {
        let Some(later) = next.get(m.id) else { continue };
        if m.address.is_empty() {
            m.address = later.address.clone();
        }
        if m.directory.is_none() {
            m.directory = later.directory;
        }
    }
    let prev = &prev;
    let added = next.learners.iter().filter(|m| prev.get(m.id).is_none());
    let candidates: Vec<Change> = added
        .map(|m| Change::AddLearner(m.clone()))
        .chain(prev.learners.iter().map(|m| Change::Promote(m.id)))
        .chain(prev.all().map(|m| Change::Remove(m.id)))
        .collect();
    candidates.into_iter().find(|c| prev.after(c).as_ref() == Ok(next)).map(|c| match c {
        Change::AddLearner(_) => ChangeKind::AddLearner,
        Change::Promote(_) => ChangeKind::Promote,
        Change::Remove(id) if prev.is_voter(id) => ChangeKind::RemoveVoter,
        Change::Remove(_) => ChangeKind::RemoveLearner,
    })
}

/// The configurations one node's log holds, by the index of their entry (a
/// snapshot's configuration at the index of the entry that named it), as
/// its writes made them. Before the first, the bootstrap list.
#[derive(Clone, Debug, Default)]
struct ConfigLog {
    entries: BTreeMap<u64, Membership>,
}

impl ConfigLog {
    /// The configurations of a log restored from disk.
    fn restored(r: &Restored) -> ConfigLog {
        let mut log = ConfigLog::default();
        if let Some(m) = &r.membership {
            log.hold(m);
        }
        for e in &r.entries {
            if let Payload::Members(members) = &e.payload {
                log.entries.insert(e.pos.index, Membership { at: e.pos, members: members.clone() });
            }
        }
        log
    }

    fn hold(&mut self, m: &Membership) {
        if m.at.index > 0 {
            self.entries.insert(m.at.index, m.clone());
        }
    }

    /// Follows one output's log operations.
    fn on_write(&mut self, ops: &[LogOp]) {
        for op in ops {
            match op {
                LogOp::Promise(_) => {}
                LogOp::TruncateAfter(i) => {
                    self.entries.split_off(&(i + 1));
                }
                LogOp::Append(entries) => {
                    let Some(first) = entries.first() else { continue };
                    // Appended right after the last entry: nothing from
                    // its index on is held any more.
                    self.entries.split_off(&first.pos.index);
                    for e in entries {
                        if let Payload::Members(members) = &e.payload {
                            let m = Membership { at: e.pos, members: members.clone() };
                            self.entries.insert(e.pos.index, m);
                        }
                    }
                }
                LogOp::InstallSnapshot { membership, .. } => {
                    self.entries.clear();
                    self.hold(membership);
                }
                // The entries after the snapshot stay; those it covers were
                // applied, and the configuration in force at its end is one
                // of them or the snapshot's.
                LogOp::Compact { membership, .. } => self.hold(membership),
            }
        }
    }

    /// The configuration in force at `index` (`None`: the bootstrap list).
    fn in_force(&self, index: u64) -> Option<&Membership> {
        self.entries.range(..=index).next_back().map(|(_, m)| m)
    }

    /// The configuration before the entry at `index`.
    fn before(&self, index: u64) -> Option<&Membership> {
        self.entries.range(..index).next_back().map(|(_, m)| m)
    }
}

/// The checks of what the logs commit under changes of members, for one run
/// (see the module documentation).
#[derive(Debug)]
pub struct MembershipChecks {
    /// The bootstrap list every node of the cluster started with (a node
    /// that joins has its own, without itself: position zero is no entry,
    /// so its members are never compared).
    bootstrap: Members,
    /// Per node: the configurations its log holds.
    logs: Vec<ConfigLog>,
    /// Committed log index -> the position of the configuration in force
    /// there, and the node that committed it first.
    in_force_at: HashMap<u64, (Position, usize)>,
    /// Configuration entry -> its members, and the node that showed them first.
    members_of: HashMap<Position, (Members, usize)>,
    /// Every committed configuration entry and the change it made.
    committed: BTreeMap<Position, ChangeKind>,
}

impl MembershipChecks {
    /// Checks for `n` nodes that bootstrap with `bootstrap`.
    pub fn new(n: usize, bootstrap: &[NodeId]) -> Self {
        MembershipChecks {
            bootstrap: Members::bootstrap(bootstrap),
            logs: vec![ConfigLog::default(); n],
            in_force_at: HashMap::new(),
            members_of: HashMap::new(),
            committed: BTreeMap::new(),
        }
    }

    /// Node `node` (re)built its replica from `restored`, applied up to
    /// `applied` (its snapshot's last entry): committed under the
    /// configuration its log holds there.
    pub fn on_start(
        &mut self,
        node: usize,
        restored: &Restored,
        applied: u64,
    ) -> Vec<(Check, String)> {
        self.logs[node] = ConfigLog::restored(restored);
        let mut bad = Vec::new();
        if applied > 0 {
            let cfg = self.logs[node].in_force(applied).cloned();
            bad.extend(self.committed_under(node, applied, cfg.as_ref(), "after a restart"));
        }
        bad
    }

    /// Checks one output of node `node`: its log operations, then what it applied.
    pub fn on_output(
        &mut self,
        node: usize,
        write: &[LogOp],
        applied: &[Position],
    ) -> Vec<(Check, String)> {
        self.logs[node].on_write(write);
        let mut bad = Vec::new();
        for op in write {
            if let LogOp::InstallSnapshot { last, membership, .. }
            | LogOp::Compact { last, membership, .. } = op
            {
                let cfg = (membership.at.index > 0).then_some(membership);
                bad.extend(self.committed_under(node, last.index, cfg, "in a snapshot"));
            }
        }
        for &pos in applied {
            let cfg = self.logs[node].in_force(pos.index).cloned();
            bad.extend(self.committed_under(node, pos.index, cfg.as_ref(), "applied"));
            if let Some(m) = cfg.filter(|m| m.at == pos) {
                bad.extend(self.committed_entry(node, &m));
            }
        }
        bad
    }

    /// Node `node` committed log index `index` under `cfg` (`None`: the
    /// bootstrap list).
    fn committed_under(
        &mut self,
        node: usize,
        index: u64,
        cfg: Option<&Membership>,
        how: &str,
    ) -> Vec<(Check, String)> {
        let at = cfg.map_or(Position::ZERO, |m| m.at);
        let mut bad = Vec::new();
        let (first, by) = *self.in_force_at.entry(index).or_insert((at, node));
        if first != at {
            bad.push((
                Check::SameConfigPerIndex,
                format!(
                    "n{} committed index {index} ({how}) under the configuration of entry {at:?} \
                     where n{} committed it under that of entry {first:?}",
                    node + 1,
                    by + 1
                ),
            ));
        }
        if let Some(m) = cfg {
            let (first, by) = self.members_of.entry(m.at).or_insert((m.members.clone(), node));
            if *first != m.members {
                bad.push((
                    Check::SameConfigPerIndex,
                    format!(
                        "n{} holds the configuration entry {:?} as {} ({how}) where n{} holds it as {first}",
                        node + 1,
                        m.at,
                        m.members,
                        *by + 1
                    ),
                ));
            }
        }
        bad
    }

    /// Node `node` committed the configuration entry `m`: it must differ
    /// from the configuration before it in the node's log by one change.
    fn committed_entry(&mut self, node: usize, m: &Membership) -> Vec<(Check, String)> {
        let prev = self.logs[node].before(m.at.index).map_or(&self.bootstrap, |p| &p.members);
        match single_change(prev, &m.members) {
            Some(kind) => {
                self.committed.entry(m.at).or_insert(kind);
                Vec::new()
            }
            None => vec![(
                Check::ConfigChain,
                format!(
                    "n{} committed the configuration {} at {:?}, which is no single change from \
                     the one before it in its log, {prev}",
                    node + 1,
                    m.members,
                    m.at
                ),
            )],
        }
    }

    /// The newest configuration any node committed so far, as the checks
    /// saw it (the bootstrap list before the first): the truth, whatever
    /// the running replicas know of it.
    pub fn newest_committed(&self) -> Membership {
        self.committed
            .keys()
            .next_back()
            .and_then(|at| self.members_of.get(at).map(|(m, _)| (*at, m)))
            .map_or_else(
                || Membership { at: Position::ZERO, members: self.bootstrap.clone() },
                |(at, members)| Membership { at, members: members.clone() },
            )
    }

    /// How many committed changes of each kind the run saw.
    pub fn committed_counts(&self) -> BTreeMap<ChangeKind, u64> {
        let mut counts = BTreeMap::new();
        for kind in self.committed.values() {
            *counts.entry(*kind).or_insert(0) += 1;
        }
        counts
    }
}

/// A replacement in progress: `new` is added, then promoted, then `old`
/// removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Replace {
    /// The spare that takes the place.
    pub new: NodeId,
    /// The voter it replaces.
    pub old: NodeId,
}

/// Something the operator does at a later time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timed {
    /// A removed node, still running, is crashed for good and wiped.
    Retire(NodeId),
    /// A wiped node comes back, empty, as a spare.
    Rejoin(NodeId),
}

/// What the operator did and what the logs committed (summed over runs by
/// [`MembershipStats::add`]).
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq, Eq)]
pub struct MembershipStats {
    /// Runs with changes of members.
    pub runs: u64,
    /// Changes the ready leader accepted (appended).
    pub proposed: u64,
    /// Changes refused: the learner has not caught up (`Behind`).
    pub refused_behind: u64,
    /// Changes refused: too few voters of the new configuration answer
    /// (`Unhealthy`).
    pub refused_unhealthy: u64,
    /// Changes refused for another reason (no longer the ready leader,
    /// another change pending).
    pub refused_other: u64,
    /// Configuration entries committed (each one change).
    pub committed: u64,
    /// Of which learners added.
    pub learners_added: u64,
    /// Of which promotions.
    pub promotions: u64,
    /// Of which learners removed.
    pub learners_removed: u64,
    /// Of which voters removed.
    pub voters_removed: u64,
    /// Replacements completed (the new voter promoted, the old one removed).
    pub replacements: u64,
    /// Removed nodes crashed for good and wiped.
    pub retirements: u64,
    /// Wiped nodes that came back as spares.
    pub rejoins: u64,
    /// Messages dropped because their sender's data was wiped after it
    /// sent them (a directory that is no more).
    pub stale_directory_drops: u64,
    /// The most voters a configuration of the run had.
    pub max_voters: u64,
}

impl MembershipStats {
    /// Adds another run's figures.
    pub fn add(&mut self, o: &MembershipStats) {
        self.runs += o.runs;
        self.proposed += o.proposed;
        self.refused_behind += o.refused_behind;
        self.refused_unhealthy += o.refused_unhealthy;
        self.refused_other += o.refused_other;
        self.committed += o.committed;
        self.learners_added += o.learners_added;
        self.promotions += o.promotions;
        self.learners_removed += o.learners_removed;
        self.voters_removed += o.voters_removed;
        self.replacements += o.replacements;
        self.retirements += o.retirements;
        self.rejoins += o.rejoins;
        self.stale_directory_drops += o.stale_directory_drops;
        self.max_voters = self.max_voters.max(o.max_voters);
    }
}

/// The driver of changes: what to propose next, and when removed nodes are
/// retired and wiped nodes come back (see the module documentation). Plain
/// logic with its own random stream; the runner carries it out.
#[derive(Debug)]
pub struct Operator {
    spec: MembershipSpec,
    rng: Pcg64Mcg,
    election_timeout_ns: u64,
    next_tick_ns: u64,
    plan: Option<Replace>,
    /// The newest committed configuration seen.
    seen: Option<Membership>,
    /// Removed nodes still running, until retired.
    lingering: BTreeSet<NodeId>,
    timed: Vec<(u64, Timed)>,
    /// What it did (the committed counts are filled in at the end).
    pub stats: MembershipStats,
}

impl Operator {
    /// An operator of `spec` for the run `seed`, with the cluster's
    /// election timeout.
    pub fn new(spec: MembershipSpec, seed: u64, election_timeout_ns: u64) -> Self {
        Operator {
            spec,
            rng: Pcg64Mcg::seed_from_u64(seed ^ 0x6d65_6d62_6572_7321),
            election_timeout_ns,
            next_tick_ns: 0,
            plan: None,
            seen: None,
            lingering: BTreeSet::new(),
            timed: Vec::new(),
            stats: MembershipStats { runs: 1, ..MembershipStats::default() },
        }
    }

    /// When the operator next looks at the cluster.
    pub fn next_tick(&self) -> u64 {
        self.next_tick_ns
    }

    /// The operator looked at `now_ns`: its next look comes within an
    /// election timeout.
    pub fn ticked(&mut self, now_ns: u64) {
        let et = self.election_timeout_ns;
        self.next_tick_ns = now_ns + self.rng.gen_range(et / 50..=et);
    }

    /// The timed actions due by `now_ns`, in time order.
    pub fn due(&mut self, now_ns: u64) -> Vec<Timed> {
        self.timed.sort_by_key(|t| t.0);
        let n = self.timed.iter().take_while(|t| t.0 <= now_ns).count();
        self.timed.drain(..n).map(|t| t.1).collect()
    }

    /// True while `id` was removed and is not retired yet.
    pub fn is_lingering(&self, id: NodeId) -> bool {
        self.lingering.contains(&id)
    }

    /// The replacement in progress, if any.
    pub fn plan(&self) -> Option<Replace> {
        self.plan
    }

    /// The ready leader's log holds `committed`, committed: members that
    /// left since the last look keep running for a while, then are retired
    /// (the old voter of a replacement soon).
    pub fn observe(&mut self, now_ns: u64, newest: &Membership) {
        if self.seen.as_ref().is_some_and(|seen| newest.at < seen.at) {
            // A leader of an older token that does not know it was deposed
            // yet: the members its log names are no news (a member added
            // since would look removed, and be retired while it votes).
            return;
        }
        let committed = &newest.members;
        self.stats.max_voters = self.stats.max_voters.max(committed.voters.len() as u64);
        let et = self.election_timeout_ns;
        if let Some(seen) = self.seen.take() {
            for m in seen.members.all().filter(|m| committed.get(m.id).is_none()) {
                if !self.lingering.insert(m.id) {
                    continue;
                }
                let replaced = self.plan.is_some_and(|p| p.old == m.id);
                let linger = if replaced { et / 2 } else { 3 * et };
                let at = now_ns + self.rng.gen_range(0..=linger);
                self.timed.push((at, Timed::Retire(m.id)));
            }
        }
        if let Some(p) = self.plan.filter(|p| committed.get(p.old).is_none()) {
            if committed.is_voter(p.new) {
                self.stats.replacements += 1;
            }
            self.plan = None;
        }
        self.seen = Some(newest.clone());
    }

    /// Node `id` was retired at `now_ns`: most come back later.
    pub fn retired(&mut self, now_ns: u64, id: NodeId) {
        self.lingering.remove(&id);
        self.stats.retirements += 1;
        if self.spec.rejoin && self.rng.gen_bool(REJOIN_SHARE) {
            let et = self.election_timeout_ns;
            let at = now_ns + self.rng.gen_range(et / 2..=4 * et);
            self.timed.push((at, Timed::Rejoin(id)));
        }
    }

    /// The next change to propose to a leader whose log holds `committed`
    /// (and no change pending), with `spares` running and free to join.
    pub fn choose(&mut self, committed: &Members, spares: &[Member]) -> Option<Change> {
        if let Some(p) = self.plan {
            if let Some(c) = plan_step(p, committed, spares) {
                return Some(c);
            }
            self.plan = None;
        }
        let voters = committed.voters.len();
        let learners = committed.learners.len();
        let members = voters + learners;
        let grow = members < GROW_UNTIL;
        let weights = [
            // Add a spare as a learner.
            if spares.is_empty() {
                0
            } else if grow {
                3
            } else {
                1
            },
            // Promote a learner.
            if learners > 0 { 3 } else { 0 },
            // Remove a learner.
            u32::from(learners > 0),
            // Remove a voter.
            if voters <= 1 {
                0
            } else if voters > MANY_VOTERS {
                3
            } else {
                1
            },
            // Replace a voter.
            if spares.is_empty() || voters == 0 { 0 } else { 2 },
            // Nothing this time.
            2,
        ];
        let total: u32 = weights.iter().sum();
        let mut pick = self.rng.gen_range(0..total);
        let choice = weights.iter().position(|&w| {
            if pick < w {
                true
            } else {
                pick -= w;
                false
            }
        })?;
        match choice {
            0 => Some(Change::AddLearner(self.any(spares)?.clone())),
            1 => Some(Change::Promote(self.any(&committed.learners)?.id)),
            2 => Some(Change::Remove(self.any(&committed.learners)?.id)),
            3 => Some(Change::Remove(self.any(&committed.voters)?.id)),
            4 => {
                let new = self.any(spares)?.clone();
                let old = self.any(&committed.voters)?.id;
                self.plan = Some(Replace { new: new.id, old });
                Some(Change::AddLearner(new))
            }
            _ => None,
        }
    }

    fn any<'a, T>(&mut self, of: &'a [T]) -> Option<&'a T> {
        (!of.is_empty()).then(|| &of[self.rng.gen_range(0..of.len())])
    }

    /// Counts what the leader said to a proposal.
    pub fn proposed(&mut self, result: &Result<(), tenure_replica::ChangeError>) {
        use tenure_replica::ChangeError;
        match result {
            Ok(()) => self.stats.proposed += 1,
            Err(ChangeError::Behind(_)) => self.stats.refused_behind += 1,
            Err(ChangeError::Unhealthy { .. }) => self.stats.refused_unhealthy += 1,
            Err(_) => self.stats.refused_other += 1,
        }
    }
}

/// The next step of replacement `p` on `committed`, or `None` when it is
/// done or can no longer go on (its new node was removed, or never joined
/// and is gone).
fn plan_step(p: Replace, committed: &Members, spares: &[Member]) -> Option<Change> {
    if committed.get(p.new).is_none() {
        return spares.iter().find(|m| m.id == p.new).map(|m| Change::AddLearner(m.clone()));
    }
    if committed.is_learner(p.new) {
        return Some(Change::Promote(p.new));
    }
    (committed.get(p.old).is_some()).then_some(Change::Remove(p.old))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tenure_core::{DirectoryId, FencingToken};
    use tenure_replica::Entry;

    fn member(id: u64) -> Member {
        Member {
            id: NodeId(id),
            address: member_address(NodeId(id)),
            directory: Some(DirectoryId(u128::from(id))),
            auto_promote: false,
        }
    }

    fn pos(token: u64, index: u64) -> Position {
        Position { token: FencingToken(token), index }
    }

    #[test]
    fn sizes_and_joiners() {
        assert_eq!((initial_voters(5), initial_voters(3), initial_voters(7)), (3, 2, 4));
        assert_eq!((initial_voters(1), initial_voters(2), initial_voters(4)), (1, 2, 3));
        let boot = [NodeId(1), NodeId(2), NodeId(3)];
        assert_eq!(joining_voters(&boot, NodeId(4)), boot);
        assert_eq!(joining_voters(&boot, NodeId(2)), [NodeId(1), NodeId(3)]);
        assert_eq!(joining_voters(&[NodeId(1)], NodeId(1)), [NodeId(1)]);
    }

    #[test]
    fn one_change_is_recognised_and_two_are_not() {
        let boot = Members::bootstrap(&[NodeId(1), NodeId(2), NodeId(3)]);
        let add = boot.after(&Change::AddLearner(member(4))).unwrap();
        assert_eq!(single_change(&boot, &add), Some(ChangeKind::AddLearner));
        let promoted = add.after(&Change::Promote(NodeId(4))).unwrap();
        assert_eq!(single_change(&add, &promoted), Some(ChangeKind::Promote));
        let removed = promoted.after(&Change::Remove(NodeId(1))).unwrap();
        assert_eq!(single_change(&promoted, &removed), Some(ChangeKind::RemoveVoter));
        let dropped = add.after(&Change::Remove(NodeId(4))).unwrap();
        assert_eq!(single_change(&add, &dropped), Some(ChangeKind::RemoveLearner));
        assert_eq!(single_change(&boot, &promoted), None, "two changes");
        assert_eq!(single_change(&boot, &removed), None, "three changes");
        assert_eq!(single_change(&boot, &boot), None, "no change");
        // The same node with another directory is another member.
        let mut other = add.clone();
        other.learners[0].directory = Some(DirectoryId(99));
        assert_eq!(single_change(&add, &other), None);
        // A leader that learned a bootstrap member's directory and address
        // names them in the change it writes: still one change...
        let mut pinned = boot.after(&Change::AddLearner(member(4))).unwrap();
        pinned.voters[0].directory = Some(DirectoryId(7));
        pinned.voters[0].address = "n1.sim:2380".into();
        assert_eq!(single_change(&boot, &pinned), Some(ChangeKind::AddLearner));
        // ...but one that alters a directory its log already named is not.
        let mut moved = pinned.after(&Change::Promote(NodeId(4))).unwrap();
        moved.voters[0].directory = Some(DirectoryId(8));
        assert_eq!(single_change(&pinned, &moved), None);
    }

    fn members_entry(p: Position, m: &Members) -> Entry {
        Entry { pos: p, payload: Payload::Members(m.clone()) }
    }

    #[test]
    fn the_chain_check_fails_on_a_skipped_change() {
        let boot = Members::bootstrap(&[NodeId(1), NodeId(2), NodeId(3)]);
        let add = boot.after(&Change::AddLearner(member(4))).unwrap();
        let promoted = add.after(&Change::Promote(NodeId(4))).unwrap();
        let mut c = MembershipChecks::new(4, &[NodeId(1), NodeId(2), NodeId(3)]);
        let write = [LogOp::Append(vec![
            members_entry(pos(1, 1), &add),
            members_entry(pos(1, 2), &promoted),
        ])];
        assert!(c.on_output(0, &write, &[pos(1, 1), pos(1, 2)]).is_empty());
        // Node 2's log lost the first entry (read back as a no-op).
        let write = [LogOp::Append(vec![
            Entry { pos: pos(1, 1), payload: Payload::Noop },
            members_entry(pos(1, 2), &promoted),
        ])];
        let bad = c.on_output(1, &write, &[pos(1, 1), pos(1, 2)]);
        let checks: Vec<Check> = bad.iter().map(|b| b.0).collect();
        assert!(checks.contains(&Check::ConfigChain), "{bad:?}");
        assert!(checks.contains(&Check::SameConfigPerIndex), "{bad:?}");
        assert_eq!(c.committed_counts().values().sum::<u64>(), 2);
    }

    #[test]
    fn two_configurations_at_one_index_are_caught_through_snapshots_too() {
        let boot = Members::bootstrap(&[NodeId(1), NodeId(2), NodeId(3)]);
        let add = boot.after(&Change::AddLearner(member(4))).unwrap();
        let mut c = MembershipChecks::new(3, &[NodeId(1), NodeId(2), NodeId(3)]);
        let write = [LogOp::Append(vec![
            members_entry(pos(1, 1), &add),
            Entry { pos: pos(1, 2), payload: Payload::Noop },
        ])];
        assert!(c.on_output(0, &write, &[pos(1, 1), pos(1, 2)]).is_empty());
        // A snapshot up to 2 that says the bootstrap list was in force.
        let snap = LogOp::InstallSnapshot {
            last: pos(1, 2),
            membership: Membership::bootstrap(&[NodeId(1), NodeId(2), NodeId(3)]),
            data: Vec::new(),
        };
        let bad = c.on_output(1, &[snap], &[]);
        assert_eq!(bad.len(), 1, "{bad:?}");
        assert_eq!(bad[0].0, Check::SameConfigPerIndex);
        // A restart from a log whose entry 1 holds other members.
        let restored = Restored {
            entries: vec![members_entry(
                pos(1, 1),
                &boot.after(&Change::AddLearner(member(5))).unwrap(),
            )],
            ..Restored::default()
        };
        let bad = c.on_start(2, &restored, 0);
        assert!(bad.is_empty(), "nothing committed yet");
        let bad = c.on_output(2, &[], &[pos(1, 1)]);
        assert_eq!(bad.len(), 1, "{bad:?}");
        assert!(bad[0].1.contains("holds the configuration entry"), "{}", bad[0].1);
    }

    #[test]
    fn the_operator_replaces_a_voter_in_three_changes_and_retires_it() {
        let mut op = Operator::new(MembershipSpec::default(), 3, 1_000_000_000);
        let boot = Members::bootstrap(&[NodeId(1), NodeId(2), NodeId(3)]);
        let at = |index| Membership { at: pos(1, index), members: Members::default() };
        let seen = |index, members: &Members| Membership { members: members.clone(), ..at(index) };
        op.observe(0, &seen(0, &boot));
        op.plan = Some(Replace { new: NodeId(4), old: NodeId(2) });
        let spares = [member(4)];
        let c = op.choose(&boot, &spares).expect("a change");
        assert_eq!(c, Change::AddLearner(member(4)));
        let m = boot.after(&c).unwrap();
        op.observe(1, &seen(1, &m));
        let c = op.choose(&m, &[]).expect("a change");
        assert_eq!(c, Change::Promote(NodeId(4)));
        let m = m.after(&c).unwrap();
        op.observe(2, &seen(2, &m));
        let c = op.choose(&m, &[]).expect("a change");
        assert_eq!(c, Change::Remove(NodeId(2)));
        let stale = m.clone();
        let m = m.after(&c).unwrap();
        op.observe(3, &seen(3, &m));
        // A deposed leader's older view afterwards changes nothing.
        op.observe(4, &seen(1, &boot));
        op.observe(5, &seen(2, &stale));
        assert!(!op.is_lingering(NodeId(4)), "the new voter is not taken for removed");
        assert_eq!(op.stats.replacements, 1);
        assert!(op.plan().is_none() && op.is_lingering(NodeId(2)));
        // Retired within half an election timeout.
        assert_eq!(op.due(3 + 500_000_000), vec![Timed::Retire(NodeId(2))]);
    }
}
