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
//!   (or none), if the owner key is still the one read.
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
use crate::group::{member_key, owner_key, spec_key, Group, Ownership, MAX_GROUP_PARTITIONS};
use crate::model::{Member, MemberId};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use tenure_core::Instant;
use tenure_kv::{Command, Compare, CompareOp, LeaseId, Store, Target, TxnOp, MAX_TXN_OPS};

/// Most groups the keeper looks after.
pub const MAX_GROUPS: usize = 1_000;

/// How long the keeper waits for a planned transaction to show in the
/// store before it plans the same group again (a proposal lost with no
/// change of leader).
pub const REPLAN_AFTER: Duration = Duration::from_millis(500);

/// What the keeper wants done now.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Transactions to propose, in order.
    pub commands: Vec<Command>,
    /// When to plan again even if nothing is applied meanwhile (a member's
    /// stabilisation ends, or a planned transaction is overdue).
    pub next_check: Option<Instant>,
}

/// What the keeper last did for a group.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Planned {
    /// The group's keys (and their revisions) when it planned.
    fingerprint: u64,
    /// The members that could receive partitions then.
    eligible: BTreeSet<MemberId>,
    /// When.
    at: Instant,
    /// Whether it proposed anything (if not, nothing is awaited).
    proposed: bool,
}

/// The leader's group logic. See the module documentation.
#[derive(Clone, Debug, Default)]
pub struct GroupKeeper {
    /// When this leader first saw each (group, member) ready and not yet
    /// eligible.
    ready_since: BTreeMap<(String, MemberId), Instant>,
    /// Per group, the last plan.
    planned: BTreeMap<String, Planned>,
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
    pub fn plan(&mut self, now: Instant, store: &Store) -> Plan {
        let mut plan = Plan::default();
        let names = Group::names(store, MAX_GROUPS);
        self.planned.retain(|name, _| names.contains(name));
        self.ready_since.retain(|(name, _), _| names.contains(name));
        for name in names {
            let Some(group) = Group::read(store, &name) else { continue };
            let fingerprint = fingerprint(&group);
            let due = self.stabilisation_due(now, &group);
            if let Some(at) = due {
                plan.next_check = earliest(plan.next_check, at);
            }
            let eligible: BTreeSet<MemberId> = group
                .members
                .keys()
                .copied()
                .filter(|&id| self.eligible(now, &group, id))
                .collect();
            let same = self
                .planned
                .get(&name)
                .filter(|p| p.fingerprint == fingerprint && p.eligible == eligible);
            if let Some(p) = same {
                let waited = now.saturating_since(p.at) >= REPLAN_AFTER;
                if !(p.proposed && waited) {
                    if p.proposed {
                        plan.next_check = earliest(plan.next_check, p.at + REPLAN_AFTER);
                    }
                    continue;
                }
            }
            let commands = self.decide(&group, &eligible);
            let proposed = !commands.is_empty();
            if proposed {
                plan.next_check = earliest(plan.next_check, now + REPLAN_AFTER);
            }
            plan.commands.extend(commands);
            self.planned.insert(name, Planned { fingerprint, eligible, at: now, proposed });
        }
        plan
    }

    /// Records when each ready member was first seen and returns when the
    /// next one becomes eligible, if one is waiting.
    fn stabilisation_due(&mut self, now: Instant, group: &Group) -> Option<Instant> {
        let wait = Duration::from_millis(group.spec.stabilise_ms);
        let mut next = None;
        self.ready_since.retain(|(name, id), _| {
            name != &group.name || group.members.get(id).is_some_and(|m| m.spec.ready)
        });
        for (id, m) in &group.members {
            if !m.spec.ready {
                continue;
            }
            let since = *self.ready_since.entry((group.name.clone(), *id)).or_insert(now);
            let owns = group.owners.values().any(|o| o.ownership.member == *id);
            if !owns && now < since + wait {
                next = earliest(next, since + wait);
            }
        }
        next
    }

    /// Whether member `id` of `group` may receive partitions now.
    fn eligible(&self, now: Instant, group: &Group, id: MemberId) -> bool {
        let Some(m) = group.members.get(&id) else { return false };
        if !m.spec.ready {
            return false;
        }
        if group.owners.values().any(|o| o.ownership.member == id && !o.ownership.release) {
            return true;
        }
        let wait = Duration::from_millis(group.spec.stabilise_ms);
        self.ready_since.get(&(group.name.clone(), id)).is_some_and(|&since| now >= since + wait)
    }

    /// The transactions for one group.
    fn decide(&self, group: &Group, eligible: &BTreeSet<MemberId>) -> Vec<Command> {
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
        let target = match assign(n, &members, &current) {
            Ok(a) => a.owners,
            // Every member was validated against the spec: only a bug gets
            // here. Leave the group as it is rather than guess.
            Err(_) => return Vec::new(),
        };
        let mut room: BTreeMap<MemberId, usize> =
            group.members.values().map(|m| (m.id, m.room)).collect();
        let mut batch = Batch::new(group);
        for p in 0..n {
            let want = target[p as usize];
            match group.owners.get(&p) {
                Some(o) if want == Some(o.ownership.member) || o.ownership.release => {}
                Some(o) => {
                    let key = owner_key(&group.name, p);
                    let released = Ownership { release: true, ..o.ownership.clone() };
                    let value = serde_json::to_vec(&released).expect("an ownership encodes");
                    let lease = Some(LeaseId(o.ownership.member));
                    batch.push(
                        [(key.clone(), Target::ModRevision(o.mod_revision))],
                        TxnOp::Put { key, value, lease },
                    );
                }
                None => {
                    let Some(id) = want else { continue };
                    let Some(left) = room.get_mut(&id).filter(|r| **r > 0) else { continue };
                    *left -= 1;
                    let member = &group.members[&id];
                    let key = owner_key(&group.name, p);
                    let ownership = Ownership { member: id, release: false };
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
        batch.finish()
    }
}

/// Transactions of at most [`MAX_TXN_OPS`] comparisons and operations,
/// each comparing the group's spec.
struct Batch {
    spec: (String, Target),
    compares: BTreeMap<String, Target>,
    ops: Vec<TxnOp>,
    done: Vec<Command>,
}

impl Batch {
    fn new(group: &Group) -> Batch {
        Batch {
            spec: (spec_key(&group.name), Target::ModRevision(group.spec_revision)),
            compares: BTreeMap::new(),
            ops: Vec::new(),
            done: Vec::new(),
        }
    }

    fn push<const K: usize>(&mut self, compares: [(String, Target); K], op: TxnOp) {
        let new = compares.iter().filter(|(k, _)| !self.compares.contains_key(k)).count();
        // One more comparison for the spec.
        if self.ops.len() + 1 > MAX_TXN_OPS || self.compares.len() + new + 1 > MAX_TXN_OPS {
            self.flush();
        }
        self.compares.extend(compares);
        self.ops.push(op);
    }

    fn flush(&mut self) {
        if self.ops.is_empty() {
            return;
        }
        let mut compare = vec![Compare {
            key: self.spec.0.clone(),
            target: self.spec.1.clone(),
            op: CompareOp::Equal,
        }];
        compare.extend(
            std::mem::take(&mut self.compares).into_iter().map(|(key, target)| Compare {
                key,
                target,
                op: CompareOp::Equal,
            }),
        );
        let success = std::mem::take(&mut self.ops);
        self.done.push(Command::Txn { compare, success, failure: Vec::new() });
    }

    fn finish(mut self) -> Vec<Command> {
        self.flush();
        self.done
    }
}

/// A digest of a group's keys and their revisions: unchanged exactly when
/// no key of the group was created, changed or deleted (up to a 64-bit
/// collision).
fn fingerprint(group: &Group) -> u64 {
    // FNV-1a over the revisions, in key order.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut mix = |x: u64| {
        for b in x.to_le_bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    mix(group.spec_revision);
    for m in group.members.values() {
        mix(m.id);
        mix(m.mod_revision);
    }
    mix(u64::MAX);
    for (p, o) in &group.owners {
        mix(u64::from(*p));
        mix(o.mod_revision);
    }
    mix(group.unreadable.len() as u64);
    h
}

fn earliest(a: Option<Instant>, b: Instant) -> Option<Instant> {
    Some(a.map_or(b, |a| a.min(b)))
}
