//! The leader's side of groups, sans-IO: from the applied store and `now`,
//! the transactions that move each group toward its assignment
//! (docs/PARTITIONS.md, "The keeper").
//!
//! For each group, [`GroupKeeper::plan`] reads the spec, the members and the
//! owners ([`Group::read`]), computes the target with [`crate::assign`] over
//! the eligible members (ready, and ready for the group's stabilisation time
//! on this leader's clock, or owning a partition already), and returns
//! transactions that
//!
//! * grant each unowned partition whose target is a member: create its owner
//!   key attached to the member's session, if the key is still absent and
//!   the member's key still the one read; and
//! * mark `release` on each owned partition whose target is another member
//!   (or none), naming that member (`to`), if the owner key is still the
//!   one read (the owner's release then hands the partition over in the
//!   same transaction: [`crate::recipe::release_many`]); and
//! * delete the owner key of a member that left (its member key is gone:
//!   a leaving member works on nothing, so this frees what a leave could
//!   not delete at once, or what was granted while it left), if the key
//!   is still that grant's and the member key still absent.
//!
//! A member's session holds at most [`tenure_kv::MAX_KEYS_PER_LEASE`]
//! keys: the target is fitted to the room each session has (partitions a
//! full member would take go to members with room), and a plan that left
//! a partition without an owner for lack of room is made again after
//! [`REPLAN_AFTER`]. A partition whose owner key cannot be read is granted
//! to nobody.
//!
//! Every transaction also compares the spec key, so a changed spec voids
//! it. A transaction whose comparisons fail changes nothing, and the next
//! plan starts from the newer state: each decision is a function of the
//! replicated state alone, and a new leader continues with no hand-over.
//! A transaction holds at most [`tenure_kv::MAX_TXN_OPS`] comparisons and
//! operations: a change that moves many partitions is several
//! transactions, each safe on its own.
//!
//! What stays the caller's: call [`GroupKeeper::plan`] only as the
//! replica's ready leader, after each apply (and at
//! [`Plan::next_check`]); propose its commands through this node's log;
//! call [`GroupKeeper::follow`] when it stops leading.

use crate::assign::assign;
use crate::group::{
    member_key, owner_key, spec_key, Group, GroupKeys, Ownership, StoredOwner, MAX_GROUP_PARTITIONS,
};
use crate::model::{Member, MemberId};
use crate::txn::Txn;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use tenure_core::Instant;
use tenure_kv::{Command, Compare, CompareOp, LeaseId, Store, Target, TxnOp};

/// Most groups the keeper looks after (the member recipes create no more).
pub const MAX_GROUPS: usize = 1_000;

/// How long the keeper waits for a planned transaction to show in the
/// store before it plans the same group again (a proposal lost with no
/// change of leader), and how often it looks again at a group left with
/// partitions it could not grant for lack of room on the members' sessions.
pub const REPLAN_AFTER: Duration = Duration::from_millis(500);

/// How long a group stays without members (and without owned partitions)
/// before the keeper deletes it: its name is free again, with any
/// partition count. A join in the instant of the deletion finds the group
/// gone at its next read and joins again.
pub const EMPTY_GROUP_GRACE: Duration = Duration::from_secs(60);

/// What the keeper wants done now.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Transactions to propose, in order.
    pub commands: Vec<Command>,
    /// When to plan again even if nothing is applied meanwhile (a member's
    /// stabilisation ends, or a planned transaction is overdue).
    pub next_check: Option<Instant>,
}

/// The store as [`GroupKeeper::plan_from`] needs it, copied by
/// [`GroupKeeper::look`].
#[derive(Clone, Debug)]
pub struct Look {
    /// The time of the look, which [`GroupKeeper::plan_from`] plans at.
    now: Instant,
    /// Every group's name.
    names: BTreeSet<String>,
    /// The groups to plan again: the fingerprint and the keys of each.
    changed: Vec<(u64, Arc<GroupKeys>)>,
    /// The earliest time an unchanged group asked to be planned again.
    next_check: Option<Instant>,
}

impl Look {
    /// The keys of the groups this look copied (to plan again), shared:
    /// another reader of the same store at the same moment (the leader's
    /// figures) takes them rather than copying the group again.
    pub fn copied(&self) -> Vec<Arc<GroupKeys>> {
        self.changed.iter().map(|(_, keys)| keys.clone()).collect()
    }
}

/// What the keeper last did for a group.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Planned {
    /// [`Group::fingerprint`] when it planned.
    fingerprint: u64,
    /// When to plan it again even if the fingerprint is the same.
    wake: Option<Instant>,
}

/// The leader's group logic. See the module documentation.
#[derive(Clone, Debug, Default)]
pub struct GroupKeeper {
    /// Per group, when this leader first saw each ready member.
    ready_since: BTreeMap<String, BTreeMap<MemberId, Instant>>,
    /// Per group, the last plan.
    planned: BTreeMap<String, Planned>,
    /// Since when each group without members nor owners was seen empty.
    empty_since: BTreeMap<String, Instant>,
}

impl GroupKeeper {
    /// A keeper with nothing seen.
    pub fn new() -> Self {
        Self::default()
    }

    /// Stops leading: forgets what it saw (a later leadership starts each
    /// member's stabilisation afresh: it may delay a join, never hasten it).
    pub fn follow(&mut self) {
        *self = Self::default();
    }

    /// The transactions that move every group toward its assignment now.
    /// A group whose keys did not change since its last plan is not read
    /// again (its fingerprint is computed without parsing a value) unless a
    /// time it asked for has come. [`GroupKeeper::look`], then
    /// [`GroupKeeper::plan_from`].
    pub fn plan(&mut self, now: Instant, store: &Store) -> Plan {
        let look = self.look(now, store);
        self.plan_from(look)
    }

    /// What [`GroupKeeper::plan_from`] decides from, copied out of `store`:
    /// the groups' names, and the keys of those to plan again (changed, or
    /// a time they asked for has come). Parses nothing: a node calls it
    /// under the replica's lock and plans after letting go.
    pub fn look(&self, now: Instant, store: &Store) -> Look {
        let names: BTreeSet<String> = Group::names(store, MAX_GROUPS).into_iter().collect();
        let mut look = Look { now, names: BTreeSet::new(), changed: Vec::new(), next_check: None };
        for name in &names {
            let fingerprint = Group::fingerprint(store, name);
            if let Some(p) = self.planned.get(name) {
                if p.fingerprint == fingerprint && p.wake.is_none_or(|w| now < w) {
                    look.next_check = p.wake.into_iter().chain(look.next_check).min();
                    continue;
                }
            }
            look.changed.push((fingerprint, Arc::new(GroupKeys::copy(store, name))));
        }
        look.names = names;
        look
    }

    /// The plan from what [`GroupKeeper::look`] copied, at the look's
    /// time. Give it the keeper's latest look, before anything else changes
    /// the keeper (a look taken before [`GroupKeeper::follow`] belongs to
    /// the leadership that ended).
    pub fn plan_from(&mut self, look: Look) -> Plan {
        let Look { now, names, changed, next_check } = look;
        let mut plan = Plan { commands: Vec::new(), next_check };
        self.planned.retain(|name, _| names.contains(name));
        self.ready_since.retain(|name, _| names.contains(name));
        self.empty_since.retain(|name, _| names.contains(name));
        for (fingerprint, keys) in changed {
            let Some(group) = keys.group() else {
                self.planned.insert(keys.name().to_string(), Planned { fingerprint, wake: None });
                continue;
            };
            let (eligible, due) = self.eligible(now, group);
            let (mut commands, starved) = decide(group, &eligible);
            let empty = self.empty_for(now, group);
            let gone_at = empty.map(|since| since + EMPTY_GROUP_GRACE);
            if gone_at.is_some_and(|at| now >= at) {
                commands.push(delete_group(group));
            }
            let retry = (starved || !commands.is_empty()).then(|| now + REPLAN_AFTER);
            let wake = [due, retry, gone_at].into_iter().flatten().min();
            if let Some(w) = wake {
                plan.next_check = earliest(plan.next_check, w);
            }
            plan.commands.extend(commands);
            self.planned.insert(group.name.clone(), Planned { fingerprint, wake });
        }
        plan
    }

    /// Since when `group` has had neither members nor owned partitions on
    /// this leader's watch, if it has none now.
    fn empty_for(&mut self, now: Instant, group: &Group) -> Option<Instant> {
        if !group.members.is_empty() || !group.owners.is_empty() || !group.blocked.is_empty() {
            self.empty_since.remove(&group.name);
            return None;
        }
        Some(*self.empty_since.entry(group.name.clone()).or_insert(now))
    }

    /// The members of `group` that may receive partitions now: ready, and
    /// owning a partition it keeps or ready for the group's stabilisation
    /// time on this leader's clock; and when the next one waiting becomes
    /// eligible.
    fn eligible(&mut self, now: Instant, group: &Group) -> (BTreeSet<MemberId>, Option<Instant>) {
        let wait = Duration::from_millis(group.spec.stabilise_ms);
        let keeps: BTreeSet<MemberId> = group
            .owners
            .values()
            .filter(|o| !o.ownership.release)
            .map(|o| o.ownership.member)
            .collect();
        let since = self.ready_since.entry(group.name.clone()).or_default();
        since.retain(|id, _| group.members.get(id).is_some_and(|m| m.spec.ready));
        let mut eligible = BTreeSet::new();
        let mut due = None;
        for (id, m) in &group.members {
            if !m.spec.ready {
                continue;
            }
            let ready_at = *since.entry(*id).or_insert(now) + wait;
            if keeps.contains(id) || now >= ready_at {
                eligible.insert(*id);
            } else {
                due = earliest(due, ready_at);
            }
        }
        (eligible, due)
    }
}

/// The owner `group` should have for each partition (none: no member may
/// take it), over the `eligible` members, fitted to the room on their
/// sessions; and whether a partition was left without an owner for lack of
/// room. `None` when the assignment refuses its input: every member was
/// validated against the spec, so only a bug gets there.
pub(crate) fn target(
    group: &Group,
    eligible: &BTreeSet<MemberId>,
) -> Option<(Vec<Option<MemberId>>, bool)> {
    let n = group.spec.partitions;
    debug_assert!(n <= MAX_GROUP_PARTITIONS);
    let members: Vec<Member> =
        eligible.iter().map(|id| group.members[id].spec.member(*id)).collect();
    // A partition being released still has its owner until it is gone.
    let current: Vec<Option<MemberId>> = (0..n)
        .map(|p| {
            group.owners.get(&p).map(|o| o.ownership.member).filter(|id| eligible.contains(id))
        })
        .collect();
    let mut target = assign(n, &members, &current).ok()?.owners;
    let starved = fit_to_room(group, &members, &current, &mut target);
    Some((target, starved))
}

/// The transactions for one group, and whether a partition was left
/// without an owner for lack of room on the members' sessions.
fn decide(group: &Group, eligible: &BTreeSet<MemberId>) -> (Vec<Command>, bool) {
    let n = group.spec.partitions;
    // Leave the group as it is rather than guess (see `target`).
    let Some((target, starved)) = target(group, eligible) else { return (Vec::new(), false) };
    let mut room: BTreeMap<MemberId, usize> =
        group.members.values().map(|m| (m.id, m.room)).collect();
    let mut batch = Batch::new(group);
    for p in 0..n {
        let want = target[p as usize];
        match group.owners.get(&p) {
            Some(o) if !group.members.contains_key(&o.ownership.member) => {
                // Its member left: it works on nothing.
                let key = owner_key(&group.name, p);
                let member = member_key(&group.name, o.ownership.member);
                batch.push(
                    [
                        (key.clone(), Target::CreateRevision(o.epoch)),
                        (member, Target::CreateRevision(0)),
                    ],
                    TxnOp::Delete { key },
                );
            }
            Some(o) if want == Some(o.ownership.member) && !o.ownership.release => {}
            // Asked back already, for the member the target names now (none
            // when the target is its owner again: it may have stopped, so
            // the mark stays, and the keeper grants it again after).
            Some(o) if o.ownership.release && o.ownership.to == successor(want, o) => {}
            Some(o) => {
                // Asked back (or asked again, for the member the target
                // names now): the owner's release hands it to `to`.
                let key = owner_key(&group.name, p);
                let to = successor(want, o);
                let released = Ownership { release: true, to, ..o.ownership.clone() };
                let value = serde_json::to_vec(&released).expect("an ownership encodes");
                let lease = Some(LeaseId(o.ownership.member));
                batch.push(
                    [(key.clone(), Target::ModRevision(o.mod_revision))],
                    TxnOp::Put { key, value, lease },
                );
            }
            None if group.blocked.contains(&p) => {}
            None => {
                let Some(id) = want else { continue };
                let Some(left) = room.get_mut(&id).filter(|r| **r > 0) else { continue };
                *left -= 1;
                let member = &group.members[&id];
                let key = owner_key(&group.name, p);
                let ownership = Ownership { member: id, release: false, to: None };
                let value = serde_json::to_vec(&ownership).expect("an ownership encodes");
                batch.push(
                    [
                        (key.clone(), Target::CreateRevision(0)),
                        (member_key(&group.name, id), Target::ModRevision(member.mod_revision)),
                    ],
                    TxnOp::Put { key, value, lease: Some(LeaseId(id)) },
                );
            }
        }
    }
    (batch.finish(), starved)
}

/// The member a partition owned as `o` is asked back for when the target
/// names `want`: none when that is its owner.
fn successor(want: Option<MemberId>, o: &StoredOwner) -> Option<MemberId> {
    want.filter(|w| *w != o.ownership.member)
}

/// Deletes an empty group's spec, if it is still the one read.
fn delete_group(group: &Group) -> Command {
    let key = spec_key(&group.name);
    let compare = vec![Compare {
        key: key.clone(),
        target: Target::ModRevision(group.spec_revision),
        op: CompareOp::Equal,
    }];
    Command::Txn { compare, success: vec![TxnOp::Delete { key }], failure: Vec::new() }
}

/// Moves the partitions the target gives a member beyond the room its
/// session has (the partitions it already holds, plus the keys it may
/// still attach) to members with room, each to the one with the fewest
/// partitions per unit of weight that does not exclude it (ties to the
/// lowest id). Returns whether a partition was left without a target for
/// lack of room anywhere.
fn fit_to_room(
    group: &Group,
    members: &[Member],
    current: &[Option<MemberId>],
    target: &mut [Option<MemberId>],
) -> bool {
    let mut count: BTreeMap<MemberId, usize> = members.iter().map(|m| (m.id, 0)).collect();
    for id in target.iter().flatten() {
        *count.entry(*id).or_default() += 1;
    }
    // Room for new grants: what the session may still attach.
    let mut room: BTreeMap<MemberId, usize> =
        members.iter().map(|m| (m.id, group.members[&m.id].room)).collect();
    let mut excess = Vec::new();
    for (p, want) in target.iter().enumerate() {
        let Some(id) = *want else { continue };
        if current[p] == Some(id) {
            continue;
        }
        let r = room.get_mut(&id).expect("a target is a member");
        if *r > 0 {
            *r -= 1;
        } else {
            excess.push(p);
        }
    }
    let mut starved = false;
    for p in excess {
        let from = target[p].expect("an excess partition has a target");
        *count.get_mut(&from).expect("counted") -= 1;
        let to = members
            .iter()
            .filter(|m| room[&m.id] > 0 && !m.excluded.contains(&(p as u32)))
            .min_by(|a, b| {
                // count_a / weight_a against count_b / weight_b.
                let l = count[&a.id] as u128 * u128::from(b.weight);
                let r = count[&b.id] as u128 * u128::from(a.weight);
                l.cmp(&r).then(a.id.cmp(&b.id))
            })
            .map(|m| m.id);
        target[p] = to;
        match to {
            Some(id) => {
                *count.get_mut(&id).expect("counted") += 1;
                *room.get_mut(&id).expect("a member") -= 1;
            }
            None => starved = true,
        }
    }
    starved
}

/// Transactions of at most [`tenure_kv::MAX_TXN_OPS`] comparisons and operations,
/// each comparing the group's spec.
struct Batch {
    spec: (String, Target),
    txn: Txn,
    done: Vec<Command>,
}

impl Batch {
    fn new(group: &Group) -> Batch {
        Batch {
            spec: (spec_key(&group.name), Target::ModRevision(group.spec_revision)),
            txn: Txn::default(),
            done: Vec::new(),
        }
    }

    fn push<const K: usize>(&mut self, compares: [(String, Target); K], op: TxnOp) {
        let mut compares = compares.to_vec();
        compares.push(self.spec.clone());
        if !self.txn.fits(&compares, 1) {
            self.flush();
        }
        self.txn.add(compares, vec![op]);
    }

    fn flush(&mut self) {
        if !self.txn.is_empty() {
            self.done.push(std::mem::take(&mut self.txn).finish());
        }
    }

    fn finish(mut self) -> Vec<Command> {
        self.flush();
        self.done
    }
}

fn earliest(a: Option<Instant>, b: Instant) -> Option<Instant> {
    Some(a.map_or(b, |a| a.min(b)))
}
