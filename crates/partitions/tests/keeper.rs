//! The keeper against a real `tenure_kv::Store`: members join and leave
//! through their sessions, owners release, leases expire, transactions go
//! stale, and after every applied command the store is checked: each owner
//! key is attached to a live member's session, and a partition's epoch (its
//! owner key's create revision) only grows.

use rand_core::RngCore;
use rand_pcg::Pcg64Mcg;
use std::collections::BTreeMap;
use std::time::Duration;
use tenure_core::Instant;
use tenure_kv::{Command, LeaseId, Response, Store};
use tenure_partitions::group::{group_prefix, member_key, owner_key, spec_key};
use tenure_partitions::{Group, GroupKeeper, GroupSpec, MemberSpec, Ownership};

const G: &str = "orders";

struct World {
    store: Store,
    keeper: GroupKeeper,
    now: Instant,
    /// Per partition, the last epoch seen and its owner.
    epochs: BTreeMap<u32, (u64, u64)>,
}

impl World {
    fn new(partitions: u32, stabilise_ms: u64) -> World {
        let mut w = World {
            store: Store::new(),
            keeper: GroupKeeper::new(),
            now: Instant::from_nanos(1_000_000_000),
            epochs: BTreeMap::new(),
        };
        let spec = GroupSpec { partitions, stabilise_ms };
        w.apply(&Command::Put {
            key: spec_key(G),
            value: serde_json::to_vec(&spec).unwrap(),
            if_mod_revision: None,
            lease: None,
        });
        w
    }

    fn apply(&mut self, c: &Command) -> Response {
        let r = self.store.execute(c);
        self.check();
        r
    }

    /// A member joins: a session, then its key on it.
    fn join(&mut self, spec: MemberSpec) -> u64 {
        let id = match self.apply(&Command::Grant { ttl_ms: 10_000, owner: None }) {
            Response::Granted { lease, .. } => lease.0,
            other => panic!("{other:?}"),
        };
        let value = serde_json::to_vec(&spec).unwrap();
        let key = member_key(G, id);
        self.apply(&Command::Put { key, value, if_mod_revision: None, lease: Some(LeaseId(id)) });
        id
    }

    /// The member's session ends (a crash: its keys go with it).
    fn expire(&mut self, id: u64) {
        self.apply(&Command::Expire { lease: LeaseId(id) });
    }

    /// Plans and applies everything planned; returns how many transactions
    /// succeeded.
    fn step(&mut self) -> usize {
        let plan = self.keeper.plan(self.now, &self.store);
        let mut ok = 0;
        for c in &plan.commands {
            if matches!(self.apply(c), Response::Txn { succeeded: true, .. }) {
                ok += 1;
            }
        }
        ok
    }

    /// Every owner releases what it was asked to (it stopped its work).
    fn release_all(&mut self) -> usize {
        let group = Group::read(&self.store, G).expect("the group");
        let mut released = 0;
        for (p, o) in &group.owners {
            if o.ownership.release {
                let key = owner_key(G, *p);
                let c = Command::Delete { key, if_mod_revision: Some(o.mod_revision) };
                assert!(matches!(self.apply(&c), Response::Delete { prev: Some(_), .. }));
                released += 1;
            }
        }
        released
    }

    /// Steps and releases until nothing changes.
    fn settle(&mut self) {
        for _ in 0..20 {
            let done = self.step() + self.release_all();
            if done == 0 {
                return;
            }
        }
        panic!("the group did not settle");
    }

    fn owned(&self) -> BTreeMap<u64, Vec<u32>> {
        let group = Group::read(&self.store, G).expect("the group");
        let mut by = BTreeMap::<u64, Vec<u32>>::new();
        for (p, o) in &group.owners {
            by.entry(o.ownership.member).or_default().push(*p);
        }
        by
    }

    fn epoch(&self, p: u32) -> Option<u64> {
        self.store.get(&owner_key(G, p)).map(|kv| kv.create_revision)
    }

    /// The store's invariants after every command.
    fn check(&mut self) {
        let Some(group) = Group::read(&self.store, G) else { return };
        assert!(group.unreadable.is_empty(), "{:?}", group.unreadable);
        for (p, o) in &group.owners {
            assert!(
                group.members.contains_key(&o.ownership.member),
                "partition {p} is owned by {:x}, not a member",
                o.ownership.member
            );
            let now = (o.epoch, o.ownership.member);
            let (epoch, owner) = self.epochs.insert(*p, now).unwrap_or((0, 0));
            assert!(o.epoch >= epoch, "partition {p}: epoch {} after {epoch}", o.epoch);
            assert!(
                o.epoch > epoch || o.ownership.member == owner,
                "partition {p} changed hands within epoch {epoch}: {owner:x} to {:x}",
                o.ownership.member
            );
        }
    }
}

fn counts(owned: &BTreeMap<u64, Vec<u32>>) -> Vec<usize> {
    let mut c: Vec<usize> = owned.values().map(Vec::len).collect();
    c.sort_unstable();
    c
}

#[test]
fn members_share_the_partitions_and_a_dead_ones_are_granted_again_with_higher_epochs() {
    let mut w = World::new(10, 0);
    let ids: Vec<u64> = (0..3).map(|_| w.join(MemberSpec::default())).collect();
    assert_eq!(w.step(), 1, "one decision for the whole group");
    assert_eq!(counts(&w.owned()), [3, 3, 4]);
    let before: Vec<Option<u64>> = (0..10).map(|p| w.epoch(p)).collect();
    assert!(before.iter().all(Option::is_some));
    // Nothing changed: nothing to propose.
    assert!(w.keeper.plan(w.now, &w.store).commands.is_empty());
    // The third member dies: its partitions go with its session, and only
    // those are granted again, each with a higher epoch.
    let dead = w.owned()[&ids[2]].clone();
    w.expire(ids[2]);
    assert_eq!(w.step(), 1);
    let owned = w.owned();
    assert_eq!(counts(&owned), [5, 5]);
    for p in 0..10 {
        if dead.contains(&p) {
            assert!(w.epoch(p) > before[p as usize], "partition {p} moved without a new epoch");
        } else {
            assert_eq!(w.epoch(p), before[p as usize], "partition {p} moved needlessly");
        }
    }
}

#[test]
fn a_joining_member_waits_for_its_stabilisation_then_takes_its_share_from_released_partitions() {
    let mut w = World::new(12, 2_000);
    let a = w.join(MemberSpec::default());
    let b = w.join(MemberSpec::default());
    let plan = w.keeper.plan(w.now, &w.store);
    assert!(plan.commands.is_empty(), "ready members wait for their stabilisation");
    assert_eq!(plan.next_check, Some(w.now + Duration::from_secs(2)));
    w.now = w.now + Duration::from_secs(2);
    w.settle();
    assert_eq!(counts(&w.owned()), [6, 6]);
    let epochs: Vec<Option<u64>> = (0..12).map(|p| w.epoch(p)).collect();
    // A third member joins; before its stabilisation it gets nothing.
    w.now = w.now + Duration::from_secs(1);
    let c = w.join(MemberSpec::default());
    w.settle();
    assert!(!w.owned().contains_key(&c));
    w.now = w.now + Duration::from_secs(2);
    // The keeper asks the two owners to release 2 partitions each (no
    // more), and grants them to the newcomer once they are released.
    assert_eq!(w.step(), 1);
    let group = Group::read(&w.store, G).unwrap();
    let asked = group.owners.values().filter(|o| o.ownership.release).count();
    assert_eq!(asked, 4, "only the new balance's moves");
    assert!(!w.owned().contains_key(&c), "nothing granted before its release");
    w.settle();
    let owned = w.owned();
    assert_eq!(counts(&owned), [4, 4, 4]);
    let moved: Vec<u32> = (0..12).filter(|&p| w.epoch(p) != epochs[p as usize]).collect();
    assert_eq!(moved, owned[&c], "only the newcomer's partitions moved");
    assert!(owned[&a].len() == 4 && owned[&b].len() == 4);
}

#[test]
fn a_decision_made_on_an_older_state_changes_nothing() {
    let mut w = World::new(6, 0);
    let a = w.join(MemberSpec::default());
    let plan = w.keeper.plan(w.now, &w.store);
    assert_eq!(plan.commands.len(), 1);
    // Before the decision applies, its member leaves.
    w.expire(a);
    for c in &plan.commands {
        assert!(matches!(w.apply(c), Response::Txn { succeeded: false, .. }));
    }
    assert!(w.owned().is_empty());
    // The next plan sees the newer state: a new member takes everything.
    let b = w.join(MemberSpec::default());
    w.settle();
    assert_eq!(w.owned()[&b].len(), 6);
}

#[test]
fn a_member_that_is_not_ready_is_asked_to_release_everything() {
    let mut w = World::new(4, 0);
    let a = w.join(MemberSpec::default());
    let b = w.join(MemberSpec::default());
    w.settle();
    assert_eq!(counts(&w.owned()), [2, 2]);
    let spec = MemberSpec { ready: false, ..MemberSpec::default() };
    let value = serde_json::to_vec(&spec).unwrap();
    w.apply(&Command::Put {
        key: member_key(G, a),
        value,
        if_mod_revision: None,
        lease: Some(LeaseId(a)),
    });
    w.settle();
    assert_eq!(w.owned().keys().copied().collect::<Vec<_>>(), [b]);
    assert_eq!(w.owned()[&b].len(), 4);
}

#[test]
fn a_planned_transaction_that_never_applies_is_planned_again_after_a_while() {
    let mut w = World::new(4, 0);
    w.join(MemberSpec::default());
    let first = w.keeper.plan(w.now, &w.store);
    assert_eq!(first.commands.len(), 1);
    // Lost: never applied. The keeper does not repeat it at once...
    assert!(w.keeper.plan(w.now, &w.store).commands.is_empty());
    let again = first.next_check.expect("a time to look again");
    // ...but does once it is overdue.
    w.now = again;
    assert_eq!(w.keeper.plan(w.now, &w.store).commands, first.commands);
}

#[test]
fn a_large_change_is_several_bounded_transactions() {
    let mut w = World::new(500, 0);
    let ids: Vec<u64> = (0..2).map(|_| w.join(MemberSpec::default())).collect();
    let plan = w.keeper.plan(w.now, &w.store);
    assert!(plan.commands.len() > 1);
    for c in &plan.commands {
        let Command::Txn { compare, success, .. } = c else { panic!("{c:?}") };
        assert!(compare.len() <= tenure_kv::MAX_TXN_OPS && success.len() <= tenure_kv::MAX_TXN_OPS);
        assert!(matches!(w.apply(c), Response::Txn { succeeded: true, .. }));
    }
    assert_eq!(counts(&w.owned()), [250, 250]);
    assert!(ids.iter().all(|id| w.owned().contains_key(id)));
}

#[test]
fn owner_values_read_back_as_json() {
    let mut w = World::new(1, 0);
    let a = w.join(MemberSpec::default());
    w.settle();
    let kv = w.store.get(&owner_key(G, 0)).expect("owned");
    let o: Ownership = serde_json::from_slice(&kv.value).unwrap();
    assert_eq!(o, Ownership { member: a, release: false });
    assert_eq!(kv.lease, Some(LeaseId(a)));
    assert!(w.store.range(&group_prefix(G), 10).0.len() == 3);
}

/// Random joins, deaths, readiness flips and releases (some late), with the
/// store checked after every command; after the churn, everyone releases
/// promptly and the group settles balanced with every partition owned.
#[test]
fn random_churn_keeps_every_owner_a_member_and_settles_balanced() {
    for seed in 0..200u64 {
        let mut rng = Pcg64Mcg::new(u128::from(seed) + 1);
        let partitions = 1 + (rng.next_u32() % 40);
        let mut w = World::new(partitions, 0);
        let mut live: Vec<u64> = Vec::new();
        for _ in 0..40 {
            match rng.next_u32() % 6 {
                0 | 1 => live.push(w.join(MemberSpec::default())),
                2 if !live.is_empty() => {
                    let i = rng.next_u32() as usize % live.len();
                    w.expire(live.swap_remove(i));
                }
                3 => {
                    w.release_all();
                }
                _ => {
                    w.step();
                }
            }
            w.now = w.now + Duration::from_millis(u64::from(rng.next_u32() % 300));
        }
        w.now = w.now + Duration::from_secs(1);
        w.settle();
        let owned = w.owned();
        let total: usize = owned.values().map(Vec::len).sum();
        if live.is_empty() {
            assert_eq!(total, 0, "seed {seed}");
            continue;
        }
        assert_eq!(total, partitions as usize, "seed {seed}: every partition owned");
        let c = counts(&owned);
        let (lo, hi) = (c.first().copied().unwrap_or(0), c.last().copied().unwrap_or(0));
        let lo = if owned.len() < live.len() { 0 } else { lo };
        assert!(hi - lo <= 1, "seed {seed}: counts {c:?} over {} members", live.len());
    }
}

/// The check above, shown failing: a partition handed from one member to
/// another without its key being deleted (a keeper that skipped the
/// release) keeps its epoch, and is caught.
#[test]
#[should_panic(expected = "changed hands within epoch")]
fn the_check_catches_a_partition_that_changes_hands_without_a_release() {
    let mut w = World::new(2, 0);
    let a = w.join(MemberSpec::default());
    let b = w.join(MemberSpec::default());
    w.settle();
    let p = w.owned()[&a][0];
    let value = serde_json::to_vec(&Ownership { member: b, release: false }).unwrap();
    w.apply(&Command::Put {
        key: owner_key(G, p),
        value,
        if_mod_revision: None,
        lease: Some(LeaseId(b)),
    });
}

/// And an owner key on a session that is no member of the group.
#[test]
#[should_panic(expected = "not a member")]
fn the_check_catches_an_owner_that_is_not_a_member() {
    let mut w = World::new(2, 0);
    w.join(MemberSpec::default());
    let stranger = match w.apply(&Command::Grant { ttl_ms: 10_000, owner: None }) {
        Response::Granted { lease, .. } => lease.0,
        other => panic!("{other:?}"),
    };
    let value = serde_json::to_vec(&Ownership { member: stranger, release: false }).unwrap();
    let lease = Some(LeaseId(stranger));
    w.apply(&Command::Put { key: owner_key(G, 0), value, if_mod_revision: None, lease });
}

/// A lone member of a group larger than a session can hold owns what its
/// session has room for; the rest waits, and goes to the next member.
#[test]
fn partitions_beyond_a_sessions_room_wait_for_another_member() {
    let mut w = World::new(1_200, 0);
    let a = w.join(MemberSpec::default());
    w.settle();
    assert_eq!(w.owned()[&a].len(), tenure_kv::MAX_KEYS_PER_LEASE - 1);
    let b = w.join(MemberSpec::default());
    w.settle();
    assert_eq!(counts(&w.owned()), [600, 600]);
    assert!(w.owned().contains_key(&b));
}
