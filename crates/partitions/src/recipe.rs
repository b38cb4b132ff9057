//! What a member asks of a group, as transactions on the store: join (or
//! update what it says about itself), leave, and release partitions.
//! Each function reads the group from a store (any node's applied state:
//! the transaction's comparisons make a stale read harmless) and returns
//! the [`Command`] to propose, or why the request is refused with nothing
//! changed. [`outcome`] reads the store's answer.
//!
//! The caller (the HTTP API, the simulator's members) checks that the
//! caller owns the session it names; these functions check everything
//! about the group.

use crate::group::{
    member_key, owner_key, spec_key, validate_group_name, Group, GroupError, GroupSpec, MemberSpec,
    Ownership,
};
use crate::keeper::{self, MAX_GROUPS};
use crate::model::MemberId;
use crate::txn::Txn;
use std::collections::{BTreeMap, BTreeSet};
use tenure_kv::{
    Command, Compare, CompareOp, LeaseId, Response, Store, Target, TxnOp, MAX_KEYS_PER_LEASE,
    MAX_TXN_OPS,
};

/// Why a member's request is refused (nothing changed).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RecipeError {
    /// A bad name, spec or member spec.
    #[error(transparent)]
    Invalid(#[from] GroupError),
    /// The group does not exist and the request did not say how many
    /// partitions it has.
    #[error("group {0} does not exist: the first member says how many partitions it has")]
    NoGroup(String),
    /// The group exists with another partition count.
    #[error("group {name} has {has} partitions, not {asked}")]
    OtherPartitions {
        /// The group.
        name: String,
        /// Its partition count.
        has: u32,
        /// The count asked for.
        asked: u32,
    },
    /// The session is not a member of the group.
    #[error("session {0:016x} is not a member of the group")]
    NotMember(MemberId),
    /// The member does not own the partition with that epoch (it was
    /// released or expired, or the epoch is an older grant's).
    #[error("session {member:016x} does not own partition {partition} at epoch {epoch}")]
    NotOwner {
        /// The member.
        member: MemberId,
        /// The partition.
        partition: u32,
        /// The epoch named.
        epoch: u64,
    },
    /// A release that names no grant.
    #[error("the release names no partition")]
    NoGrants,
    /// A release that names more grants than one transaction holds.
    #[error(
        "the release names {0} partitions; at most {MAX_RELEASE_PARTITIONS} are accepted at once"
    )]
    TooManyGrants(usize),
    /// A release that names a partition twice.
    #[error("the release names partition {0} twice")]
    DuplicateGrant(u32),
    /// The session does not exist.
    #[error("session {0:016x} does not exist (expired or revoked)")]
    NoSession(MemberId),
    /// The session holds as many keys as a session may.
    #[error("session {0:016x} holds {MAX_KEYS_PER_LEASE} keys, as many as a session may: it has no room to join")]
    SessionFull(MemberId),
    /// Creating the group would pass the limit on groups.
    #[error("there are {MAX_GROUPS} groups already, the most tenure keeps: join one of them")]
    TooManyGroups,
}

/// Joins group `name` as member `id` (its session's lease), or updates
/// what a member says about itself. `spec`: the group's, required when the
/// group does not exist yet (the first member creates it); when it exists,
/// a spec with another partition count is refused.
pub fn join(
    store: &Store,
    name: &str,
    spec: Option<&GroupSpec>,
    id: MemberId,
    member: &MemberSpec,
) -> Result<Command, RecipeError> {
    validate_group_name(name)?;
    if let Some(s) = spec {
        s.validate()?;
    }
    let Some(lease) = store.lease(LeaseId(id)) else {
        return Err(RecipeError::NoSession(id));
    };
    let key = member_key(name, id);
    if !lease.keys.contains(&key) && lease.keys.len() >= MAX_KEYS_PER_LEASE {
        return Err(RecipeError::SessionFull(id));
    }
    let value = serde_json::to_vec(member).expect("a member spec encodes");
    let put_member = TxnOp::Put { key: member_key(name, id), value, lease: Some(LeaseId(id)) };
    match store.get(&spec_key(name)) {
        Some(kv) => {
            let existing = Group::read(store, name).map(|g| g.spec);
            let Some(existing) = existing else {
                return Err(RecipeError::NoGroup(name.to_string()));
            };
            if let Some(s) = spec.filter(|s| s.partitions != existing.partitions) {
                return Err(RecipeError::OtherPartitions {
                    name: name.to_string(),
                    has: existing.partitions,
                    asked: s.partitions,
                });
            }
            member.validate(&existing)?;
            let compare = vec![Compare {
                key: spec_key(name),
                target: Target::ModRevision(kv.mod_revision),
                op: CompareOp::Equal,
            }];
            Ok(Command::Txn { compare, success: vec![put_member], failure: Vec::new() })
        }
        None => {
            let Some(spec) = spec else { return Err(RecipeError::NoGroup(name.to_string())) };
            if Group::names(store, MAX_GROUPS).len() >= MAX_GROUPS {
                return Err(RecipeError::TooManyGroups);
            }
            member.validate(spec)?;
            let value = serde_json::to_vec(spec).expect("a group spec encodes");
            let compare = vec![Compare {
                key: spec_key(name),
                target: Target::CreateRevision(0),
                op: CompareOp::Equal,
            }];
            let put_spec = TxnOp::Put { key: spec_key(name), value, lease: None };
            Ok(Command::Txn { compare, success: vec![put_spec, put_member], failure: Vec::new() })
        }
    }
}

/// Leaves group `name`: deletes member `id`'s key and the partitions it
/// owns, at one revision. The member must have stopped its work on all of
/// them first, and starts none after (a graceful leave: its partitions are
/// granted again at once, not at its session's end). A transaction holds at
/// most [`MAX_TXN_OPS`] operations: the owner keys beyond, and any granted
/// while the member left, the keeper deletes once the member key is gone.
/// [`leave_with`] also hands the partitions over.
pub fn leave(store: &Store, name: &str, id: MemberId) -> Result<Command, RecipeError> {
    leave_with(store, name, id, false).map(|l| l.command)
}

/// A leave as [`leave_with`] plans it: propose `command`, then each of
/// `then`, right behind it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leave {
    /// Deletes the member key, and hands over (or deletes) as many of its
    /// partitions as fit in one transaction. Its outcome is the leave's.
    pub command: Command,
    /// The handovers that did not fit: each changes nothing unless the
    /// member key is gone (should one overtake the leave, the keeper grants
    /// its partitions after), and each is safe alone.
    pub then: Vec<Command>,
}

/// [`leave`], and with `hand_over`, each partition the member owns goes at
/// the same revision to the member the keeper would grant it to once the
/// member is gone (deleted and created again on that member's session, as
/// a release's handover does), so the partitions are without an owner for
/// the leave's commit only, not for the keeper's grant after it.
///
/// The keeper's choice depends on which members are eligible, which a
/// store tells only for the members that own partitions (a ready member
/// that owns none may or may not have waited its stabilisation time on the
/// leader's clock). So the partitions are handed over only when every
/// other ready member owns one, and none is being asked back (a group
/// that is settling); otherwise this is the plain [`leave`], and the keeper
/// grants after it. What does not fit in the leave's transaction goes in
/// [`Leave::then`].
pub fn leave_with(
    store: &Store,
    name: &str,
    id: MemberId,
    hand_over: bool,
) -> Result<Leave, RecipeError> {
    validate_group_name(name)?;
    let group = Group::read(store, name).ok_or_else(|| RecipeError::NoGroup(name.to_string()))?;
    let Some(m) = group.members.get(&id) else { return Err(RecipeError::NotMember(id)) };
    let mine = member_key(name, id);
    let successors = if hand_over { successors(&group, id) } else { BTreeMap::new() };
    // The leave first; the transactions after it need the member key gone.
    let mut first = Txn::default();
    first.add(
        vec![(mine.clone(), Target::ModRevision(m.mod_revision))],
        vec![TxnOp::Delete { key: mine.clone() }],
    );
    let mut parts = vec![first];
    let spec = (spec_key(name), Target::ModRevision(group.spec_revision));
    let owned = group.owners.iter().filter(|(_, o)| o.ownership.member == id);
    for (p, o) in owned {
        let key = owner_key(name, *p);
        let (compare, ops) = match successors.get(p) {
            Some(&t) => {
                let to = member_key(name, t);
                let to_revision = Target::ModRevision(group.members[&t].mod_revision);
                let ownership = Ownership { member: t, release: false, to: None };
                let value = serde_json::to_vec(&ownership).expect("an ownership encodes");
                (
                    vec![
                        (key.clone(), Target::ModRevision(o.mod_revision)),
                        (to, to_revision),
                        spec.clone(),
                    ],
                    vec![
                        TxnOp::Delete { key: key.clone() },
                        TxnOp::Put { key, value, lease: Some(LeaseId(t)) },
                    ],
                )
            }
            None => {
                (vec![(key.clone(), Target::CreateRevision(o.epoch))], vec![TxnOp::Delete { key }])
            }
        };
        let last = parts.last_mut().expect("the leave");
        if last.fits(&compare, ops.len()) {
            last.add(compare, ops);
        } else if !successors.is_empty() {
            let gone = (mine.clone(), Target::CreateRevision(0));
            let mut next = Txn::default();
            next.add(vec![gone], Vec::new());
            next.add(compare, ops);
            parts.push(next);
        }
        // A plain leave leaves the rest to the keeper, as it always did.
    }
    // The comparisons make each transaction fail if a key it read changed.
    let mut commands = parts.into_iter().map(Txn::finish);
    let command = commands.next().expect("the leave");
    Ok(Leave { command, then: commands.collect() })
}

/// The member the keeper would grant each of member `id`'s partitions to
/// once `id` is gone, when the store tells (see [`leave_with`]); empty when
/// it does not.
fn successors(group: &Group, id: MemberId) -> BTreeMap<u32, MemberId> {
    if !group.blocked.is_empty() || group.owners.values().any(|o| o.ownership.release) {
        return BTreeMap::new();
    }
    let owning: BTreeSet<MemberId> = group.owners.values().map(|o| o.ownership.member).collect();
    let mut eligible = BTreeSet::new();
    for (&other, m) in &group.members {
        if other == id || !m.spec.ready {
            continue;
        }
        if !owning.contains(&other) {
            return BTreeMap::new();
        }
        eligible.insert(other);
    }
    let Some((target, _)) = keeper::target(group, &eligible) else { return BTreeMap::new() };
    group
        .owners
        .iter()
        .filter(|(_, o)| o.ownership.member == id)
        .filter_map(|(&p, _)| Some((p, target.get(p as usize).copied().flatten()?)))
        .collect()
}

/// Most grants one release names ([`release_many`]): each costs at most two
/// comparisons of the transaction's [`MAX_TXN_OPS`], and a handover one
/// more for the group's spec.
pub const MAX_RELEASE_PARTITIONS: usize = (MAX_TXN_OPS - 1) / 2;

/// Releases partition `p` of group `name`, granted to member `id` at
/// `epoch`: the member has stopped its work on it.
pub fn release(
    store: &Store,
    name: &str,
    id: MemberId,
    p: u32,
    epoch: u64,
) -> Result<Command, RecipeError> {
    release_many(store, name, id, &[(p, epoch)])
}

/// How [`release_with`] reads the store it is given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReleaseRead {
    /// Every grant named must show as held, or the release is refused: for
    /// a store that may lag (a grant it does not show may be one it has not
    /// applied yet, which a release that left it out would never give
    /// back).
    pub all_held: bool,
    /// Hand each partition to the member the keeper asked it back for,
    /// when it can take it. Without, a plain release: its comparisons fail
    /// only if a grant is gone.
    pub hand_over: bool,
}

impl Default for ReleaseRead {
    /// What [`release_many`] does: grants not held are left out, and
    /// partitions are handed over.
    fn default() -> Self {
        ReleaseRead { all_held: false, hand_over: true }
    }
}

/// [`release_with`] the default [`ReleaseRead`].
pub fn release_many(
    store: &Store,
    name: &str,
    id: MemberId,
    grants: &[(u32, u64)],
) -> Result<Command, RecipeError> {
    release_with(store, name, id, grants, ReleaseRead::default())
}

/// Releases, at one revision, each grant `(partition, epoch)` of `grants`
/// that member `id` of group `name` still holds (every one of them, or
/// none, with [`ReleaseRead::all_held`]): the member has stopped
/// its work on all of them. A grant it no longer holds (released already,
/// ended with its session, or an older epoch) is left out; when none is
/// left the release is refused with the first of them. At most
/// [`MAX_RELEASE_PARTITIONS`] grants, each partition once.
///
/// With [`ReleaseRead::hand_over`], a partition the keeper asked back for
/// another member (`to`) is handed to it in the same transaction, if that member is still there, ready,
/// does not exclude it and has room on its session: its key deleted and
/// created again, attached to the new owner's session, so the new grant's
/// epoch is this transaction's revision. The handover compares the owner
/// key's `mod_revision` (the `to` read is the keeper's latest), the new
/// owner's member key and the group's spec, as the keeper's own grant
/// would; a comparison that fails voids the whole release, and the caller
/// reads again.
pub fn release_with(
    store: &Store,
    name: &str,
    id: MemberId,
    grants: &[(u32, u64)],
    read: ReleaseRead,
) -> Result<Command, RecipeError> {
    validate_group_name(name)?;
    let Some(&(first, first_epoch)) = grants.first() else {
        return Err(RecipeError::NoGrants);
    };
    if grants.len() > MAX_RELEASE_PARTITIONS {
        return Err(RecipeError::TooManyGrants(grants.len()));
    }
    let mut named = std::collections::BTreeSet::new();
    if let Some(&(p, _)) = grants.iter().find(|(p, _)| !named.insert(*p)) {
        return Err(RecipeError::DuplicateGrant(p));
    }
    // Only the keys it touches: a group may hold thousands.
    let named = || grants.iter().map(|(p, _)| *p);
    let owners = Group::read_some(store, name, named(), [])
        .ok_or_else(|| RecipeError::NoGroup(name.to_string()))?;
    let successors = owners.owners.values().filter_map(|o| o.ownership.to);
    let group = Group::read_some(store, name, named(), successors)
        .ok_or_else(|| RecipeError::NoGroup(name.to_string()))?;
    let mut compare = Vec::new();
    let mut success = Vec::new();
    // Successors' member keys compared, and the room each has left.
    let mut room: std::collections::BTreeMap<MemberId, usize> = Default::default();
    for &(p, epoch) in grants {
        let held = group.owners.get(&p).filter(|o| o.ownership.member == id && o.epoch == epoch);
        let Some(o) = held else {
            if read.all_held {
                return Err(RecipeError::NotOwner { member: id, partition: p, epoch });
            }
            continue;
        };
        let key = owner_key(name, p);
        let to = o.ownership.to.filter(|_| o.ownership.release && read.hand_over).and_then(|t| {
            let m = group.members.get(&t).filter(|m| {
                t != id && m.spec.ready && !m.spec.excluded.contains(&p) && m.room > 0
            })?;
            let left = room.entry(t).or_insert_with(|| {
                compare.push(Compare {
                    key: member_key(name, t),
                    target: Target::ModRevision(m.mod_revision),
                    op: CompareOp::Equal,
                });
                m.room
            });
            (*left > 0).then(|| {
                *left -= 1;
                t
            })
        });
        match to {
            Some(t) => {
                compare.push(Compare {
                    key: key.clone(),
                    target: Target::ModRevision(o.mod_revision),
                    op: CompareOp::Equal,
                });
                let ownership = Ownership { member: t, release: false, to: None };
                let value = serde_json::to_vec(&ownership).expect("an ownership encodes");
                success.push(TxnOp::Delete { key: key.clone() });
                success.push(TxnOp::Put { key, value, lease: Some(LeaseId(t)) });
            }
            None => {
                compare.push(Compare {
                    key: key.clone(),
                    target: Target::CreateRevision(epoch),
                    op: CompareOp::Equal,
                });
                compare.push(Compare {
                    key: key.clone(),
                    target: Target::Lease(id),
                    op: CompareOp::Equal,
                });
                success.push(TxnOp::Delete { key });
            }
        }
    }
    if success.is_empty() {
        return Err(RecipeError::NotOwner { member: id, partition: first, epoch: first_epoch });
    }
    if !room.is_empty() {
        compare.push(Compare {
            key: spec_key(name),
            target: Target::ModRevision(group.spec_revision),
            op: CompareOp::Equal,
        });
    }
    Ok(Command::Txn { compare, success, failure: Vec::new() })
}

/// What the store's answer to a recipe's command says: `Some(revision)`
/// when it took effect, `None` when the group changed between the read and
/// the write (read again and retry).
pub fn outcome(response: &Response) -> Option<u64> {
    match response {
        Response::Txn { succeeded: true, revision, .. } => Some(*revision),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store_with_session() -> (Store, MemberId) {
        let mut store = Store::new();
        let id = session(&mut store);
        (store, id)
    }

    /// A new session on `store`.
    fn session(store: &mut Store) -> MemberId {
        let Response::Granted { lease, .. } =
            store.execute(&Command::Grant { ttl_ms: 5_000, owner: None })
        else {
            panic!("no grant")
        };
        lease.0
    }

    /// Applies what a new keeper plans at time 1 (the partitions granted).
    fn grant_all(store: &mut Store) {
        let mut keeper = crate::GroupKeeper::new();
        for c in keeper.plan(tenure_core::Instant::from_nanos(1), store).commands {
            store.execute(&c);
        }
    }

    fn run(
        store: &mut Store,
        recipe: impl FnOnce(&Store) -> Result<Command, RecipeError>,
    ) -> Option<u64> {
        let c = recipe(store).expect("a command");
        outcome(&store.execute(&c))
    }

    #[test]
    fn the_first_member_creates_the_group_and_a_later_one_must_agree() {
        let (mut store, a) = store_with_session();
        let m = MemberSpec::default();
        let spec = GroupSpec { partitions: 8, stabilise_ms: 0 };
        assert_eq!(join(&store, "g", None, a, &m), Err(RecipeError::NoGroup("g".into())));
        assert!(run(&mut store, |s| join(s, "g", Some(&spec), a, &m)).is_some());
        let other = GroupSpec { partitions: 9, stabilise_ms: 0 };
        let e = join(&store, "g", Some(&other), a, &m).unwrap_err();
        assert_eq!(e.to_string(), "group g has 8 partitions, not 9");
        // Without a spec, or with the same count: joined (again).
        assert!(run(&mut store, |s| join(s, "g", None, a, &m)).is_some());
        assert!(run(&mut store, |s| join(s, "g", Some(&spec), a, &m)).is_some());
        assert_eq!(Group::read(&store, "g").unwrap().members.len(), 1);
    }

    #[test]
    fn bad_requests_are_refused_before_anything_is_proposed() {
        let (store, a) = store_with_session();
        let m = MemberSpec::default();
        let huge = GroupSpec { partitions: 1_000_000_000, stabilise_ms: 0 };
        assert_eq!(
            join(&store, "g", Some(&huge), a, &m),
            Err(RecipeError::Invalid(GroupError::Partitions(1_000_000_000)))
        );
        let spec = GroupSpec { partitions: 2, stabilise_ms: 0 };
        let zero = MemberSpec { weight: 0, ..MemberSpec::default() };
        assert_eq!(
            join(&store, "g", Some(&spec), a, &zero),
            Err(RecipeError::Invalid(GroupError::ZeroWeight))
        );
        let all = MemberSpec { excluded: [0, 1].into(), ..MemberSpec::default() };
        assert!(join(&store, "g", Some(&spec), a, &all).is_err());
        assert_eq!(join(&store, "g", Some(&spec), 77, &m), Err(RecipeError::NoSession(77)));
        assert!(join(&store, "a/b", Some(&spec), a, &m).is_err());
    }

    #[test]
    fn a_release_names_the_epoch_of_the_grant_it_gives_up() {
        let (mut store, a) = store_with_session();
        let spec = GroupSpec { partitions: 1, stabilise_ms: 0 };
        run(&mut store, |s| join(s, "g", Some(&spec), a, &MemberSpec::default()));
        grant_all(&mut store);
        let epoch = store.get(&owner_key("g", 0)).expect("granted").create_revision;
        let stale = release(&store, "g", a, 0, epoch - 1).unwrap_err();
        assert_eq!(
            stale.to_string(),
            format!("session {a:016x} does not own partition 0 at epoch {}", epoch - 1)
        );
        assert!(release(&store, "g", a + 1, 0, epoch).is_err());
        assert!(release(&store, "g", a, 1, epoch).is_err());
        assert!(run(&mut store, |s| release(s, "g", a, 0, epoch)).is_some());
        assert!(store.get(&owner_key("g", 0)).is_none());
        // Released twice: refused, nothing changed.
        assert!(release(&store, "g", a, 0, epoch).is_err());
    }

    #[test]
    fn a_release_of_many_gives_up_those_still_held_at_one_revision() {
        let (mut store, a) = store_with_session();
        let spec = GroupSpec { partitions: 4, stabilise_ms: 0 };
        run(&mut store, |s| join(s, "g", Some(&spec), a, &MemberSpec::default()));
        grant_all(&mut store);
        let epoch = |s: &Store, p| s.get(&owner_key("g", p)).expect("granted").create_revision;
        let e: Vec<u64> = (0..4).map(|p| epoch(&store, p)).collect();
        // Bad requests: refused before the group is read.
        assert_eq!(release_many(&store, "g", a, &[]), Err(RecipeError::NoGrants));
        assert_eq!(
            release_many(&store, "g", a, &[(1, e[1]), (2, e[2]), (1, e[1])]),
            Err(RecipeError::DuplicateGrant(1))
        );
        let too_many: Vec<(u32, u64)> =
            (0..=MAX_RELEASE_PARTITIONS as u32).map(|p| (p, 1)).collect();
        assert_eq!(
            release_many(&store, "g", a, &too_many),
            Err(RecipeError::TooManyGrants(MAX_RELEASE_PARTITIONS + 1))
        );
        // Partition 0 released alone first; then 0 (gone), 1 at an old
        // epoch, 2 and 3: only 2 and 3 go, at one revision.
        assert!(run(&mut store, |s| release(s, "g", a, 0, e[0])).is_some());
        let before = store.revision();
        let grants = [(0, e[0]), (1, e[1] - 1), (2, e[2]), (3, e[3])];
        assert_eq!(run(&mut store, |s| release_many(s, "g", a, &grants)), Some(before + 1));
        let owners = Group::read(&store, "g").unwrap().owners;
        assert_eq!(owners.keys().copied().collect::<Vec<_>>(), vec![1]);
        // Nothing named is held any more: refused with the first.
        assert_eq!(
            release_many(&store, "g", a, &[(2, e[2]), (3, e[3])]),
            Err(RecipeError::NotOwner { member: a, partition: 2, epoch: e[2] })
        );
    }

    #[test]
    fn a_release_hands_the_partition_to_the_member_it_was_asked_back_for() {
        let (mut store, a) = store_with_session();
        let b = session(&mut store);
        let spec = GroupSpec { partitions: 4, stabilise_ms: 0 };
        run(&mut store, |s| join(s, "g", Some(&spec), a, &MemberSpec::default()));
        let mut keeper = crate::GroupKeeper::new();
        let mut plan = |store: &mut Store, at: u64| {
            for c in keeper.plan(tenure_core::Instant::from_nanos(at), store).commands {
                store.execute(&c);
            }
        };
        plan(&mut store, 1);
        // b joins: the keeper asks two back from a, for b.
        run(&mut store, |s| join(s, "g", Some(&spec), b, &MemberSpec::default()));
        plan(&mut store, 2);
        let g = Group::read(&store, "g").unwrap();
        let asked: Vec<(u32, u64)> = g
            .owners
            .iter()
            .filter(|(_, o)| o.ownership.release)
            .map(|(p, o)| (*p, o.epoch))
            .collect();
        assert_eq!(asked.len(), 2);
        assert!(g
            .owners
            .values()
            .filter(|o| o.ownership.release)
            .all(|o| o.ownership.to == Some(b)));
        // A release read before the keeper marked it again (for nobody:
        // b not ready) is void; read again, it is a plain release.
        let stale = release_many(&store, "g", a, &asked[..1]).unwrap();
        let not_ready = MemberSpec { ready: false, ..MemberSpec::default() };
        run(&mut store, |s| join(s, "g", Some(&spec), b, &not_ready));
        plan(&mut store, 3);
        assert_eq!(outcome(&store.execute(&stale)), None, "the handover read an older b");
        // The target is a again: the marks stay (a may have stopped) but
        // name nobody, so no release hands them to b.
        let g = Group::read(&store, "g").unwrap();
        let marked: Vec<_> = g.owners.values().filter(|o| o.ownership.release).collect();
        assert_eq!(marked.len(), 2);
        assert!(marked.iter().all(|o| o.ownership.to.is_none()), "{marked:?}");
        // Read again: b is not ready, so a plain release.
        assert!(run(&mut store, |s| release_many(s, "g", a, &asked[..1])).is_some());
        assert!(store.get(&owner_key("g", asked[0].0)).is_none(), "released to nobody");
        // b ready again: the keeper grants it the released one and asks
        // for one more back for b; a's release hands it over at once, at
        // the release's revision, on b's session.
        run(&mut store, |s| join(s, "g", Some(&spec), b, &MemberSpec::default()));
        plan(&mut store, 4);
        let g = Group::read(&store, "g").unwrap();
        let for_b: Vec<(u32, u64)> = g
            .owners
            .iter()
            .filter(|(_, o)| o.ownership.release && o.ownership.to == Some(b))
            .map(|(p, o)| (*p, o.epoch))
            .collect();
        assert_eq!(for_b.len(), 1, "{g:?}");
        // A store that may lag must show every grant: one it does not (the
        // one released above) refuses the whole release.
        let lagging = ReleaseRead { all_held: true, hand_over: true };
        let with_gone = [for_b[0], asked[0]];
        assert_eq!(
            release_with(&store, "g", a, &with_gone, lagging),
            Err(RecipeError::NotOwner { member: a, partition: asked[0].0, epoch: asked[0].1 })
        );
        // Without the handover, a plain release (not built on the mark).
        let plain = ReleaseRead { all_held: false, hand_over: false };
        let Command::Txn { success, .. } = release_with(&store, "g", a, &for_b, plain).unwrap()
        else {
            panic!("a transaction")
        };
        assert!(matches!(&success[..], [TxnOp::Delete { .. }]), "{success:?}");
        let revision = run(&mut store, |s| release_many(s, "g", a, &for_b)).unwrap();
        let kv = store.get(&owner_key("g", for_b[0].0)).expect("handed over");
        assert_eq!((kv.create_revision, kv.lease), (revision, Some(LeaseId(b))));
        assert!(kv.create_revision > for_b[0].1);
        let g = Group::read(&store, "g").unwrap();
        let owned = |m| g.owners.values().filter(|o| o.ownership.member == m).count();
        assert_eq!((owned(a), owned(b)), (2, 2));
        assert!(g.owners.values().all(|o| !o.ownership.release));
        // Nothing left for the keeper to do.
        assert!(keeper.plan(tenure_core::Instant::from_nanos(5), &store).commands.is_empty());
    }

    #[test]
    fn a_member_view_reads_the_owner_keys_on_its_session_alone() {
        let (mut store, a) = store_with_session();
        let b = session(&mut store);
        let spec = GroupSpec { partitions: 4, stabilise_ms: 0 };
        run(&mut store, |s| join(s, "g", Some(&spec), a, &MemberSpec::default()));
        grant_all(&mut store);
        // A key of b's under the group's owners, by a hand that is not the
        // keeper's (a partition beyond the group, uppercase hex): ignored.
        for key in
            [owner_key("g", 9), format!("{}owners/0000000A", crate::group::group_prefix("g"))]
        {
            let put = TxnOp::Put { key, value: b"{}".to_vec(), lease: Some(LeaseId(b)) };
            store.execute(&Command::Txn { compare: vec![], success: vec![put], failure: vec![] });
        }
        let full = Group::read(&store, "g").unwrap();
        let view = Group::read_member_view(&store, "g", a).unwrap();
        assert_eq!(view.owners, full.owners);
        assert_eq!(view.members.keys().collect::<Vec<_>>(), vec![&a]);
        let other = Group::read_member_view(&store, "g", b).unwrap();
        assert!(other.owners.is_empty() && other.members.is_empty(), "{other:?}");
        assert!(Group::read_member_view(&store, "h", a).is_none());
    }

    #[test]
    fn a_leave_deletes_the_member_and_what_it_owns_at_one_revision() {
        let (mut store, a) = store_with_session();
        let spec = GroupSpec { partitions: 3, stabilise_ms: 0 };
        run(&mut store, |s| join(s, "g", Some(&spec), a, &MemberSpec::default()));
        grant_all(&mut store);
        assert_eq!(Group::read(&store, "g").unwrap().owners.len(), 3);
        let before = store.revision();
        assert_eq!(run(&mut store, |s| leave(s, "g", a)), Some(before + 1));
        let g = Group::read(&store, "g").unwrap();
        assert!(g.members.is_empty() && g.owners.is_empty());
        assert_eq!(leave(&store, "g", a), Err(RecipeError::NotMember(a)));
    }
}
