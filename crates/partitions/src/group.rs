//! Where a group lives in tenure's key-value store, and how it is read
//! back (docs/PARTITIONS.md, "Built from sessions and keys"):
//!
//! * `_tenure/groups/NAME/spec`: the group's [`GroupSpec`] (JSON);
//! * `_tenure/groups/NAME/members/ID`: a member's [`MemberSpec`] (JSON),
//!   attached to its session's lease, whose id (16 hex digits) is `ID`;
//! * `_tenure/groups/NAME/owners/P`: the owner of partition `P` (8 hex
//!   digits), an [`Ownership`] (JSON) attached to the owner's lease. The
//!   key's `create_revision` is the grant's epoch, its fencing token.
//!
//! Values are JSON so that `etcdctl get --prefix _tenure/groups/` reads
//! them. [`Group::read`] parses what the store holds; a key it cannot
//! parse (which only a bug or a hand-made store can write: the key-value
//! APIs refuse writes under `_tenure/`) is reported, never guessed at.

use crate::model::{Member, MemberId, MAX_PARTITIONS};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::sync::OnceLock;
use tenure_kv::{KeyValue, LeaseId, Store, MAX_KEYS_PER_LEASE};

/// Where every group's keys live.
pub const GROUPS_PREFIX: &str = "_tenure/groups/";

/// Longest group name, in bytes (names are `A-Z a-z 0-9 . _ -`).
pub const MAX_GROUP_NAME_BYTES: usize = 128;

/// Most partitions of one group. Each owned partition is a key attached to
/// its owner's session, and a session holds at most
/// [`tenure_kv::MAX_KEYS_PER_LEASE`] keys, its member key included: one
/// member owns at most 999 partitions, and partitions beyond what the
/// members can hold wait without an owner (the keeper grants no more than a
/// session has room for).
pub const MAX_GROUP_PARTITIONS: u32 = 10_000;

/// Longest zone name, in bytes.
pub const MAX_ZONE_BYTES: usize = 64;

/// Largest weight a member may give itself.
pub const MAX_WEIGHT: u32 = 1_000;

/// The default stabilisation time: how long a member is ready before it
/// receives partitions.
pub const DEFAULT_STABILISE_MS: u64 = 2_000;

/// Longest stabilisation time a group may ask for.
pub const MAX_STABILISE_MS: u64 = 600_000;

const _: () = assert!(MAX_GROUP_PARTITIONS <= MAX_PARTITIONS);

/// A group: how many partitions, and how long a member must be ready
/// before it receives any.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupSpec {
    /// The partition count `N` (partitions `0..N`), 1 to
    /// [`MAX_GROUP_PARTITIONS`].
    pub partitions: u32,
    /// Milliseconds a member stays ready before it receives partitions (at
    /// most [`MAX_STABILISE_MS`]).
    #[serde(default = "default_stabilise_ms")]
    pub stabilise_ms: u64,
}

fn default_stabilise_ms() -> u64 {
    DEFAULT_STABILISE_MS
}

fn default_weight() -> u32 {
    1
}

fn default_ready() -> bool {
    true
}

/// What a member says about itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberSpec {
    /// Its weight, at least 1: members own partitions in proportion.
    #[serde(default = "default_weight")]
    pub weight: u32,
    /// Its zone, if any (at most [`MAX_ZONE_BYTES`]).
    #[serde(default)]
    pub zone: Option<String>,
    /// Whether it takes partitions now. A member that is not ready keeps
    /// none: the keeper asks it to release what it owns.
    #[serde(default = "default_ready")]
    pub ready: bool,
    /// Partitions it would rather own.
    #[serde(default)]
    pub preferred: BTreeSet<u32>,
    /// Partitions it must never own.
    #[serde(default)]
    pub excluded: BTreeSet<u32>,
}

impl Default for MemberSpec {
    fn default() -> Self {
        MemberSpec {
            weight: 1,
            zone: None,
            ready: true,
            preferred: BTreeSet::new(),
            excluded: BTreeSet::new(),
        }
    }
}

/// The value of an owner key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ownership {
    /// The owner: its session's lease id.
    pub member: MemberId,
    /// Set by the keeper when the partition is to move: the owner stops
    /// its work on it, then deletes the key.
    #[serde(default)]
    pub release: bool,
    /// With `release`: the member the keeper means the partition for. The
    /// owner's release hands it over at once (the key deleted and created
    /// again for it, at one revision: a higher epoch) if that member is
    /// still there, ready, willing and with room; otherwise the keeper
    /// grants it afterwards.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<MemberId>,
}

/// What is wrong with a group's name, spec or member spec.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GroupError {
    /// The name is empty or too long (its length in bytes).
    #[error("a group name has 1 to {MAX_GROUP_NAME_BYTES} bytes, not {0}")]
    NameLength(usize),
    /// The name holds a character outside `A-Z a-z 0-9 . _ -`.
    #[error("a group name is made of A-Z a-z 0-9 . _ -, not {0:?}")]
    NameCharacter(char),
    /// No partitions, or more than a group may have.
    #[error("a group has 1 to {MAX_GROUP_PARTITIONS} partitions, not {0}")]
    Partitions(u64),
    /// A stabilisation time above the limit.
    #[error("a group's stabilisation time is at most {MAX_STABILISE_MS} ms, not {0} ms")]
    Stabilise(u64),
    /// A weight of 0.
    #[error("a member's weight is at least 1 (0 would take no partition: say ready = false)")]
    ZeroWeight,
    /// A weight above [`MAX_WEIGHT`].
    #[error("a member's weight is at most {MAX_WEIGHT}, not {0}")]
    Weight(u32),
    /// A zone name too long or empty.
    #[error("a zone name has 1 to {MAX_ZONE_BYTES} bytes, not {0}")]
    ZoneLength(usize),
    /// A control character in a zone name (it would garble what shows it).
    #[error("a zone name holds no control character, not {0:?}")]
    ZoneCharacter(char),
    /// A preferred or excluded partition that the group does not have.
    #[error("partition {partition} is not one of the group's {partitions} (0 to {})", partitions - 1)]
    NoSuchPartition {
        /// The partition named.
        partition: u32,
        /// The group's partition count.
        partitions: u32,
    },
    /// A member excluding every partition could never own one.
    #[error("the member excludes all {0} partitions of the group: it could never own one")]
    ExcludesEverything(u32),
    /// A partition both preferred and excluded.
    #[error("partition {0} is both preferred and excluded")]
    PreferredAndExcluded(u32),
}

/// Checks a group name: 1 to [`MAX_GROUP_NAME_BYTES`] of `A-Z a-z 0-9 . _ -`.
pub fn validate_group_name(name: &str) -> Result<(), GroupError> {
    if name.is_empty() || name.len() > MAX_GROUP_NAME_BYTES {
        return Err(GroupError::NameLength(name.len()));
    }
    match name.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))) {
        Some(c) => Err(GroupError::NameCharacter(c)),
        None => Ok(()),
    }
}

impl GroupSpec {
    /// Checks the spec's limits.
    pub fn validate(&self) -> Result<(), GroupError> {
        if self.partitions == 0 || self.partitions > MAX_GROUP_PARTITIONS {
            return Err(GroupError::Partitions(self.partitions.into()));
        }
        if self.stabilise_ms > MAX_STABILISE_MS {
            return Err(GroupError::Stabilise(self.stabilise_ms));
        }
        Ok(())
    }
}

impl MemberSpec {
    /// Checks the member's spec against the group's.
    pub fn validate(&self, group: &GroupSpec) -> Result<(), GroupError> {
        if self.weight == 0 {
            return Err(GroupError::ZeroWeight);
        }
        if self.weight > MAX_WEIGHT {
            return Err(GroupError::Weight(self.weight));
        }
        if let Some(zone) = &self.zone {
            if zone.is_empty() || zone.len() > MAX_ZONE_BYTES {
                return Err(GroupError::ZoneLength(zone.len()));
            }
            if let Some(c) = zone.chars().find(|c| c.is_control()) {
                return Err(GroupError::ZoneCharacter(c));
            }
        }
        let n = group.partitions;
        let outside = self.preferred.iter().chain(&self.excluded).find(|&&p| p >= n);
        if let Some(&partition) = outside {
            return Err(GroupError::NoSuchPartition { partition, partitions: n });
        }
        if let Some(&p) = self.preferred.intersection(&self.excluded).next() {
            return Err(GroupError::PreferredAndExcluded(p));
        }
        if self.excluded.len() as u64 >= u64::from(n) {
            return Err(GroupError::ExcludesEverything(n));
        }
        Ok(())
    }

    /// The member as the assignment sees it.
    pub fn member(&self, id: MemberId) -> Member {
        let mut m = Member::new(id)
            .with_weight(self.weight)
            .preferring(self.preferred.iter().copied())
            .excluding(self.excluded.iter().copied());
        if let Some(zone) = &self.zone {
            m = m.in_zone(zone.clone());
        }
        m
    }
}

/// The prefix of every key of group `name` (ends with `/`).
pub fn group_prefix(name: &str) -> String {
    format!("{GROUPS_PREFIX}{name}/")
}

/// The key of group `name`'s spec.
pub fn spec_key(name: &str) -> String {
    format!("{GROUPS_PREFIX}{name}/spec")
}

/// The key of member `id` of group `name`.
pub fn member_key(name: &str, id: MemberId) -> String {
    format!("{GROUPS_PREFIX}{name}/members/{id:016x}")
}

/// The key of the owner of partition `p` of group `name`.
pub fn owner_key(name: &str, p: u32) -> String {
    format!("{GROUPS_PREFIX}{name}/owners/{p:08x}")
}

/// A member of a group as the store holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredMember {
    /// Its id (its session's lease id).
    pub id: MemberId,
    /// What it says about itself.
    pub spec: MemberSpec,
    /// Its key's `create_revision` (when it joined).
    pub create_revision: u64,
    /// Its key's `mod_revision`.
    pub mod_revision: u64,
    /// How many more keys its session may hold.
    pub room: usize,
}

/// An owned partition as the store holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredOwner {
    /// The owner key's value.
    pub ownership: Ownership,
    /// The grant's epoch (the key's `create_revision`).
    pub epoch: u64,
    /// The key's `mod_revision`.
    pub mod_revision: u64,
}

/// A key under a group's prefix that does not parse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unreadable {
    /// The key.
    pub key: String,
    /// Why.
    pub why: String,
}

/// A group's keys copied out of the store at one revision, to be read
/// ([`Group::parse`]) without holding it. A node reads its store under the
/// replica's lock, which the log waits for: parsing a group of 1,000
/// partitions there held the log up for 0.3-1.4 ms at every change of the
/// group; copying its keys takes a fraction of that.
#[derive(Clone, Debug)]
pub struct GroupKeys {
    /// The group's name.
    name: String,
    /// Its keys, in key order (the spec among them).
    kvs: Vec<KeyValue>,
    /// How many keys each member's session holds (`None`: the session is
    /// gone), for the members among `kvs`.
    used: BTreeMap<MemberId, Option<usize>>,
    /// Every key of the group was copied ([`GroupKeys::copy`]), not only
    /// some ([`GroupKeys::copy_some`]): only then are keys that do not
    /// parse reported.
    whole: bool,
    /// The keys parsed, once ([`GroupKeys::group`]).
    parsed: OnceLock<Option<Group>>,
}

impl GroupKeys {
    /// The group's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The group these keys hold ([`Group::parse`]), parsed at the first
    /// call only: the keeper and the leader's figures read one copy.
    pub fn group(&self) -> Option<&Group> {
        self.parsed.get_or_init(|| Group::parse(self)).as_ref()
    }

    /// Whether the group's spec key was copied (it exists): a group that
    /// [`Group::parse`] finds none of with a spec has one it cannot read.
    pub fn has_spec(&self) -> bool {
        let spec = spec_key(&self.name);
        self.kvs.iter().any(|kv| kv.key == spec)
    }

    /// Every key of group `name`.
    pub fn copy(store: &Store, name: &str) -> GroupKeys {
        let prefix = group_prefix(name);
        let kvs: Vec<KeyValue> = store
            .keys_from(&prefix)
            .take_while(|kv| kv.key.starts_with(&prefix))
            .cloned()
            .collect();
        let members = prefix + "members/";
        let ids = kvs.iter().filter_map(|kv| parse_hex(kv.key.strip_prefix(&members)?, 16));
        let used = sessions_used(store, ids);
        GroupKeys::new(name, kvs, used, true)
    }

    /// Group `name`'s spec, the owner keys of `partitions` and the member
    /// keys of `members` (those that exist).
    pub fn copy_some(
        store: &Store,
        name: &str,
        partitions: impl IntoIterator<Item = u32>,
        members: impl IntoIterator<Item = MemberId>,
    ) -> GroupKeys {
        let owner_keys = partitions.into_iter().map(|p| owner_key(name, p));
        GroupKeys::copy_named(store, name, owner_keys, members.into_iter().collect())
    }

    /// Group `name`'s spec, member `id`'s key and the owner keys on its
    /// session (at most the keys a session holds, not the group's every
    /// partition): what [`Group::read_member_view`] reads.
    pub fn copy_member_view(store: &Store, name: &str, id: MemberId) -> GroupKeys {
        let owners = group_prefix(name) + "owners/";
        // The session's keys are in order: its owner keys of this group are
        // one run of them, looked up as they are (no key rebuilt).
        let from = (Bound::Included(owners.as_str()), Bound::Unbounded);
        let owned = store
            .lease(LeaseId(id))
            .into_iter()
            .flat_map(|l| l.keys.range::<str, _>(from))
            .take_while(|k| k.starts_with(&owners));
        GroupKeys::copy_named(store, name, owned, vec![id])
    }

    /// Group `name`'s spec, the owner keys named and the member keys of
    /// `members` (those that exist).
    fn copy_named(
        store: &Store,
        name: &str,
        owner_keys: impl IntoIterator<Item = impl AsRef<str>>,
        members: Vec<MemberId>,
    ) -> GroupKeys {
        let mut kvs: Vec<KeyValue> = store.get(&spec_key(name)).cloned().into_iter().collect();
        kvs.extend(owner_keys.into_iter().filter_map(|k| store.get(k.as_ref()).cloned()));
        kvs.extend(members.iter().filter_map(|&id| store.get(&member_key(name, id)).cloned()));
        let used = sessions_used(store, members);
        GroupKeys::new(name, kvs, used, false)
    }

    fn new(
        name: &str,
        kvs: Vec<KeyValue>,
        used: BTreeMap<MemberId, Option<usize>>,
        whole: bool,
    ) -> GroupKeys {
        GroupKeys { name: name.to_string(), kvs, used, whole, parsed: OnceLock::new() }
    }
}

/// How many keys each of `ids`' sessions holds (`None`: gone).
fn sessions_used(
    store: &Store,
    ids: impl IntoIterator<Item = MemberId>,
) -> BTreeMap<MemberId, Option<usize>> {
    ids.into_iter().map(|id| (id, store.lease(LeaseId(id)).map(|l| l.keys.len()))).collect()
}

/// One group as read from the store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    /// Its name.
    pub name: String,
    /// Its spec, and the spec key's `mod_revision`.
    pub spec: GroupSpec,
    /// The spec key's `mod_revision`.
    pub spec_revision: u64,
    /// Its members by id.
    pub members: BTreeMap<MemberId, StoredMember>,
    /// Its owned partitions by partition.
    pub owners: BTreeMap<u32, StoredOwner>,
    /// Keys that did not parse (left alone).
    pub unreadable: Vec<Unreadable>,
    /// Partitions whose owner key did not parse: nobody is granted them
    /// while that key stays (it may name a live owner).
    pub blocked: std::collections::BTreeSet<u32>,
}

impl Group {
    /// Reads group `name` from `store`; `None` if it has no spec, or an
    /// unreadable one (then the keeper leaves the group alone).
    pub fn read(store: &Store, name: &str) -> Option<Group> {
        Group::parse(&GroupKeys::copy(store, name))
    }

    /// Reads a group from its keys as [`GroupKeys::copy`] or
    /// [`GroupKeys::copy_some`] took them out of the store; `None` if it
    /// has no spec, or an unreadable one.
    pub fn parse(keys: &GroupKeys) -> Option<Group> {
        let prefix = group_prefix(&keys.name);
        let spec_kv = keys.kvs.iter().find(|kv| kv.key[prefix.len()..] == *"spec")?;
        let spec: GroupSpec = serde_json::from_slice(&spec_kv.value).ok()?;
        spec.validate().ok()?;
        let mut group = Group {
            name: keys.name.clone(),
            spec,
            spec_revision: spec_kv.mod_revision,
            members: BTreeMap::new(),
            owners: BTreeMap::new(),
            unreadable: Vec::new(),
            blocked: BTreeSet::new(),
        };
        for kv in &keys.kvs {
            let rest = &kv.key[prefix.len()..];
            let outcome = if let Some(id) = rest.strip_prefix("members/") {
                group.read_member(keys, id, kv)
            } else if let Some(p) = rest.strip_prefix("owners/") {
                let read = group.read_owner(p, kv);
                if read.is_err() && keys.whole {
                    if let Some(p) = parse_hex(p, 8).and_then(|p| u32::try_from(p).ok()) {
                        group.blocked.insert(p);
                    }
                }
                read
            } else if rest == "spec" {
                Ok(())
            } else {
                Err("not a key a group has".to_string())
            };
            match outcome {
                Err(why) if keys.whole => {
                    group.unreadable.push(Unreadable { key: kv.key.clone(), why });
                }
                _ => {}
            }
        }
        Some(group)
    }

    /// Group `name` with only the owners of `partitions` and the members
    /// `members` read (the others left out, and nothing in `unreadable` or
    /// `blocked`): for a request that touches a few keys of a large group.
    /// `None` as [`Group::read`].
    pub fn read_some(
        store: &Store,
        name: &str,
        partitions: impl IntoIterator<Item = u32>,
        members: impl IntoIterator<Item = MemberId>,
    ) -> Option<Group> {
        Group::parse(&GroupKeys::copy_some(store, name, partitions, members))
    }

    /// Group `name` with only the owner keys on member `id`'s session (at
    /// most the keys a session holds, not the group's every partition) and
    /// its member key. `None` as [`Group::read`].
    pub fn read_member_view(store: &Store, name: &str, id: MemberId) -> Option<Group> {
        Group::parse(&GroupKeys::copy_member_view(store, name, id))
    }

    fn read_member(&mut self, keys: &GroupKeys, id: &str, kv: &KeyValue) -> Result<(), String> {
        let id = parse_hex(id, 16).ok_or("a member id is 16 hex digits")?;
        if kv.lease != Some(LeaseId(id)) {
            return Err(format!("member {id:016x} is not attached to its own session"));
        }
        let spec: MemberSpec = serde_json::from_slice(&kv.value).map_err(|e| e.to_string())?;
        spec.validate(&self.spec).map_err(|e| e.to_string())?;
        let used = keys.used.get(&id).copied().flatten().unwrap_or(MAX_KEYS_PER_LEASE);
        let member = StoredMember {
            id,
            spec,
            create_revision: kv.create_revision,
            mod_revision: kv.mod_revision,
            room: MAX_KEYS_PER_LEASE.saturating_sub(used),
        };
        self.members.insert(id, member);
        Ok(())
    }

    fn read_owner(&mut self, p: &str, kv: &KeyValue) -> Result<(), String> {
        let p = parse_hex(p, 8).ok_or("a partition is 8 hex digits")?;
        let p = u32::try_from(p).map_err(|_| "a partition beyond u32")?;
        if p >= self.spec.partitions {
            return Err(format!("partition {p} is beyond the group's {}", self.spec.partitions));
        }
        let ownership: Ownership = serde_json::from_slice(&kv.value).map_err(|e| e.to_string())?;
        if kv.lease != Some(LeaseId(ownership.member)) {
            return Err(format!("the owner of partition {p} is not attached to its session"));
        }
        let owner =
            StoredOwner { ownership, epoch: kv.create_revision, mod_revision: kv.mod_revision };
        self.owners.insert(p, owner);
        Ok(())
    }

    /// A digest of group `name`'s keys as the store holds them (each key,
    /// its revisions, and for a member the room left on its session),
    /// computed without parsing any value: unchanged exactly when nothing
    /// the keeper decides from changed (up to a 64-bit collision).
    pub fn fingerprint(store: &Store, name: &str) -> u64 {
        // FNV-1a.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let mut mix = |bytes: &[u8]| {
            for &b in bytes {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0100_0000_01b3);
            }
        };
        let prefix = group_prefix(name);
        for kv in store.keys_from(&prefix).take_while(|kv| kv.key.starts_with(&prefix)) {
            mix(kv.key.as_bytes());
            mix(&kv.create_revision.to_le_bytes());
            mix(&kv.mod_revision.to_le_bytes());
            if let Some(id) = kv.key[prefix.len()..].strip_prefix("members/") {
                let used = parse_hex(id, 16)
                    .and_then(|id| store.lease(LeaseId(id)))
                    .map_or(0, |l| l.keys.len());
                mix(&used.to_le_bytes());
            }
        }
        h
    }

    /// The names of every group in `store`, in order (at most `limit`).
    pub fn names(store: &Store, limit: usize) -> Vec<String> {
        Group::names_after(store, None, limit)
    }

    /// The names of the groups in `store` after `after` (excluded), in
    /// order (at most `limit`): a page of [`Group::names`].
    pub fn names_after(store: &Store, after: Option<&str>, limit: usize) -> Vec<String> {
        let mut names = Vec::new();
        let mut from = match after {
            // Past every key of that group: '/' + 1 is '0'.
            Some(name) => format!("{GROUPS_PREFIX}{name}0"),
            None => GROUPS_PREFIX.to_string(),
        };
        while names.len() < limit {
            let Some(kv) = store.keys_from(&from).next() else { break };
            let Some(rest) = kv.key.strip_prefix(GROUPS_PREFIX) else { break };
            let Some((name, _)) = rest.split_once('/') else {
                // A key right under the prefix, not a group's: skip it.
                from = format!("{}\u{0}", kv.key);
                continue;
            };
            names.push(name.to_string());
            // Past every key of this group: '/' + 1 is '0'.
            from = format!("{GROUPS_PREFIX}{name}0");
        }
        names
    }
}

fn parse_hex(s: &str, digits: usize) -> Option<u64> {
    if s.len() != digits || !s.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()) {
        return None;
    }
    u64::from_str_radix(s, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_like_election_names() {
        assert!(validate_group_name("orders-v2.eu_1").is_ok());
        assert_eq!(validate_group_name(""), Err(GroupError::NameLength(0)));
        assert_eq!(validate_group_name("a/b"), Err(GroupError::NameCharacter('/')));
        assert!(validate_group_name(&"x".repeat(129)).is_err());
    }

    #[test]
    fn bad_specs_are_refused_with_the_reason() {
        let spec = |partitions| GroupSpec { partitions, stabilise_ms: 0 };
        assert_eq!(spec(0).validate(), Err(GroupError::Partitions(0)));
        assert_eq!(spec(1_000_000_000).validate(), Err(GroupError::Partitions(1_000_000_000)));
        assert!(spec(MAX_GROUP_PARTITIONS).validate().is_ok());
        let g = spec(4);
        let m = |f: fn(&mut MemberSpec)| {
            let mut m = MemberSpec::default();
            f(&mut m);
            m.validate(&g)
        };
        assert_eq!(m(|m| m.weight = 0), Err(GroupError::ZeroWeight));
        assert_eq!(m(|m| m.weight = u32::MAX), Err(GroupError::Weight(u32::MAX)));
        assert_eq!(m(|m| m.excluded = [0, 1, 2, 3].into()), Err(GroupError::ExcludesEverything(4)));
        assert_eq!(
            m(|m| m.preferred = [4].into()),
            Err(GroupError::NoSuchPartition { partition: 4, partitions: 4 })
        );
        assert_eq!(
            m(|m| {
                m.preferred = [1].into();
                m.excluded = [1].into();
            }),
            Err(GroupError::PreferredAndExcluded(1))
        );
        assert!(m(|m| m.zone = Some(String::new())).is_err());
        assert_eq!(
            m(|m| m.zone = Some("eu\u{1b}[2J".into())),
            Err(GroupError::ZoneCharacter('\u{1b}'))
        );
        let text = GroupError::NoSuchPartition { partition: 9, partitions: 4 }.to_string();
        assert_eq!(text, "partition 9 is not one of the group's 4 (0 to 3)");
    }

    #[test]
    fn a_member_spec_defaults_to_a_ready_member_of_weight_one() {
        let m: MemberSpec = serde_json::from_slice(b"{}").unwrap();
        assert_eq!(m, MemberSpec::default());
        let g: GroupSpec = serde_json::from_slice(br#"{"partitions": 8}"#).unwrap();
        assert_eq!(g.stabilise_ms, DEFAULT_STABILISE_MS);
    }
}
