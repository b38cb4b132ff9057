//! The store: keys with their revisions, the cluster-wide revision, the
//! leases keys are attached to, and a bounded history of changes for
//! watches.

use crate::command::{
    check_owner, Command, Compare, CompareOp, InvalidCommand, LeaseCheckpoint, Target, TxnOp,
    MAX_TXN_OPS,
};
use crate::election_key::{parse_candidate_key, ELECTIONS_PREFIX};
use crate::lease::{
    Lease, LeaseEnd, LeaseId, Refusal, MAX_KEYS_PER_LEASE, MAX_LEASES, MAX_LEASES_PER_OWNER,
};
use crate::range_txn::RangeOpResponse;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use tenure_replica::{Position, StateMachine};

mod range_txn;

/// Changes kept for watches; older ones are compacted (a watch that asks for
/// them is told to read again).
pub const MAX_HISTORY: usize = 10_000;

/// Most keys one range returns.
pub const MAX_RANGE: usize = 10_000;

/// Most changes one revision holds: a transaction's branch, or the keys of
/// a lease that ends. A watch that reads changes in batches reads at least
/// this many, so that it never stops in the middle of a revision.
pub const MAX_CHANGES_PER_REVISION: usize =
    if MAX_TXN_OPS > MAX_KEYS_PER_LEASE { MAX_TXN_OPS } else { MAX_KEYS_PER_LEASE };

/// A key and its value, with its revisions and lease.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KeyValue {
    /// The key.
    pub key: String,
    /// The value.
    #[serde(with = "serde_bytes")]
    pub value: Vec<u8>,
    /// The revision that created the key (since it was last absent).
    pub create_revision: u64,
    /// The revision that last changed it.
    pub mod_revision: u64,
    /// Changes since it was created: 1 after the first put.
    pub version: u64,
    /// The lease the key is attached to, if any: the key is deleted when
    /// the lease is revoked or expires.
    pub lease: Option<LeaseId>,
}

/// What a change did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ChangeKind {
    /// The key was set.
    Put,
    /// The key was removed by a delete.
    Delete,
    /// The key was removed because its lease (`kv.lease`) was revoked.
    Revoked,
    /// The key was removed because its lease (`kv.lease`) expired.
    Expired,
}

impl ChangeKind {
    /// True if the key was removed, whatever the reason.
    pub fn is_removal(self) -> bool {
        !matches!(self, ChangeKind::Put)
    }
}

impl From<LeaseEnd> for ChangeKind {
    fn from(end: LeaseEnd) -> Self {
        match end {
            LeaseEnd::Revoked => ChangeKind::Revoked,
            LeaseEnd::Expired => ChangeKind::Expired,
        }
    }
}

/// One change of one key, as a watch reports it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Change {
    /// The revision of the change.
    pub revision: u64,
    /// Set or removed, and why.
    pub kind: ChangeKind,
    /// After a put, the key as it now is; after a removal, the key as it
    /// was (its lease included), with `mod_revision` the revision of the
    /// removal and version 0.
    pub kv: KeyValue,
    /// The key as it was before the change's revision (`None`: it was
    /// absent, or this put created it), whole: what a read at an earlier
    /// revision and a watch's previous key show. When a transaction changes
    /// a key twice (etcd lets a delete of every key from one on and a put
    /// of one of them share a branch), both changes show the key as it was
    /// before the transaction, as etcd's watch does (it reads the revision
    /// before), but a put that created the key shows none. Costs the history up to twice its values' bytes, still
    /// bounded by [`MAX_HISTORY`] changes.
    pub prev: Option<KeyValue>,
}

/// A watch asked for changes the store no longer keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[error("revisions up to {compacted} were compacted (the store is at {current}): read the keys again, then watch from {current} + 1")]
pub struct Compacted {
    /// Changes up to this revision are gone.
    pub compacted: u64,
    /// The store's revision.
    pub current: u64,
}

/// A range of keys, by the bytes of the keys (as etcd's ranges are: a
/// bound need not be UTF-8, though every key is).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyRange<'a> {
    /// Exactly this key.
    Key(&'a [u8]),
    /// Every key from this one on (etcd's range end `"\0"`).
    From(&'a [u8]),
    /// The keys from the first (included) to the second (excluded).
    Between(&'a [u8], &'a [u8]),
}

impl<'a> KeyRange<'a> {
    /// etcd's range of `key` to `end` (its `range_end`): `key` alone when
    /// `end` is empty, every key from `key` on when it is `"\0"`.
    pub fn of(key: &'a [u8], end: &'a [u8]) -> KeyRange<'a> {
        match end {
            [] => KeyRange::Key(key),
            [0] => KeyRange::From(key),
            end => KeyRange::Between(key, end),
        }
    }

    /// The first key the range may hold.
    pub fn start(&self) -> &'a [u8] {
        match self {
            KeyRange::Key(k) | KeyRange::From(k) | KeyRange::Between(k, _) => k,
        }
    }

    /// True if `key` is in the range.
    pub fn contains(&self, key: &[u8]) -> bool {
        key >= self.start() && !self.is_past(key)
    }

    /// True if `key` sorts after every key of the range.
    fn is_past(&self, key: &[u8]) -> bool {
        match self {
            KeyRange::Key(k) => key > *k,
            KeyRange::From(_) => false,
            KeyRange::Between(_, end) => key >= *end,
        }
    }
}

/// Why a read at a revision cannot be served.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    /// The revision is before the compacted one.
    #[error("revision {requested} was compacted (the store keeps revisions from {compacted} on)")]
    Compacted {
        /// The revision asked for.
        requested: u64,
        /// The compacted revision.
        compacted: u64,
    },
    /// The revision is after the store's.
    #[error("revision {requested} is in the future (the store is at {current})")]
    Future {
        /// The revision asked for.
        requested: u64,
        /// The store's revision.
        current: u64,
    },
}

/// The result of one transaction operation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OpResponse {
    /// A put, with the key as it was.
    Put {
        /// The previous key, if any.
        prev: Option<KeyValue>,
    },
    /// A delete, with the key as it was.
    Delete {
        /// The previous key, if any.
        prev: Option<KeyValue>,
    },
    /// A get.
    Get {
        /// The key, if present.
        kv: Option<KeyValue>,
    },
}

/// What a command did; the same on every node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    /// The key was set at `revision`.
    Put {
        /// The store's revision after the put.
        revision: u64,
        /// The key as it was.
        prev: Option<KeyValue>,
    },
    /// The key was removed (`prev` is `Some`) or was absent (`None`, nothing changed).
    Delete {
        /// The store's revision after the delete.
        revision: u64,
        /// The key as it was.
        prev: Option<KeyValue>,
    },
    /// A transaction.
    Txn {
        /// Whether the comparisons held (the success branch ran).
        succeeded: bool,
        /// The store's revision after it.
        revision: u64,
        /// One response per operation of the branch that ran.
        responses: Vec<OpResponse>,
    },
    /// A compare-and-set did not match: nothing changed.
    Conflict {
        /// The key's `mod_revision` (0: absent).
        mod_revision: u64,
        /// The store's revision.
        revision: u64,
    },
    /// The command broke a limit or was not a command: nothing changed.
    Invalid(InvalidCommand),
    /// A lease was granted (the revision does not move: no key changed).
    Granted {
        /// Its id.
        lease: LeaseId,
        /// Its TTL in milliseconds.
        ttl_ms: u64,
        /// The store's revision.
        revision: u64,
    },
    /// A lease was revoked or expired: its keys were deleted, all at
    /// `revision` (which moved only if there were any).
    LeaseEnded {
        /// The lease.
        lease: LeaseId,
        /// Revoked or expired.
        reason: LeaseEnd,
        /// The store's revision after it.
        revision: u64,
        /// How many keys were deleted.
        deleted: usize,
    },
    /// The command was refused because of what the store holds (an unknown
    /// lease, a lease limit): nothing changed.
    Refused(Refusal),
    /// etcd's transaction ([`Command::RangeTxn`]).
    RangeTxn {
        /// Whether the comparisons held (the success branch ran).
        succeeded: bool,
        /// The store's revision after it.
        revision: u64,
        /// One response per operation of the branch that ran.
        responses: Vec<RangeOpResponse>,
    },
    /// Leases expired by one [`crate::Command::ExpireMany`], each at a
    /// revision of its own if it had keys: those that existed, in order.
    LeasesExpired {
        /// The leases that ended (those already gone are left out).
        leases: Vec<LeaseId>,
        /// The store's revision after the last of them.
        revision: u64,
        /// How many keys were deleted in all.
        deleted: usize,
    },
    /// A [`crate::Command::Checkpoint`] applied (no revision spent).
    Checkpointed {
        /// The store's revision (unchanged).
        revision: u64,
        /// How many leases were marked silent (those that exist).
        marked: usize,
        /// How many marks were removed (of leases that were marked).
        cleared: usize,
    },
}

impl Response {
    /// The response as the log hands it to the proposer.
    pub fn encode(&self) -> Vec<u8> {
        postcard::to_allocvec(self).expect("a response always serializes")
    }

    /// A response from [`Response::encode`].
    pub fn decode(bytes: &[u8]) -> Result<Response, String> {
        postcard::from_bytes(bytes).map_err(|e| e.to_string())
    }
}

/// Whether a key (`None`: absent, with revisions and version 0 and no
/// value) compares with `target` as `op` says (a value comparison with an
/// absent key fails, whatever the operator).
fn compare_kv(kv: Option<&KeyValue>, target: &Target, op: CompareOp) -> bool {
    let ordering = match target {
        Target::ModRevision(r) => kv.map_or(0, |kv| kv.mod_revision).cmp(r),
        Target::CreateRevision(r) => kv.map_or(0, |kv| kv.create_revision).cmp(r),
        Target::Version(v) => kv.map_or(0, |kv| kv.version).cmp(v),
        Target::Lease(l) => kv.and_then(|kv| kv.lease).map_or(0, |l| l.0).cmp(l),
        Target::Value(v) => match kv {
            Some(kv) => kv.value.as_slice().cmp(v.as_slice()),
            None => return false,
        },
    };
    match op {
        CompareOp::Equal => ordering.is_eq(),
        CompareOp::NotEqual => ordering.is_ne(),
        CompareOp::Less => ordering.is_lt(),
        CompareOp::Greater => ordering.is_gt(),
    }
}

/// The store's durable image: its revision and keys (the change history is
/// not kept: after a restore, watches resume from the snapshot's revision).
/// It is the image of the store before leases existed, byte for byte: once
/// a lease was granted, a [`LeaseImage`] follows it.
#[derive(Serialize, Deserialize)]
struct Image {
    revision: u64,
    keys: Vec<ImageKey>,
}

/// The [`Image`] as it is written: borrowed from the store, so a snapshot
/// copies each value once, into the snapshot itself. The same fields in
/// the same order, so the same bytes.
#[derive(Serialize)]
struct ImageRef<'a> {
    revision: u64,
    #[serde(serialize_with = "keys_in_order")]
    keys: &'a BTreeMap<String, KeyValue>,
}

/// A key of an [`ImageRef`], as an [`ImageKey`] is written.
#[derive(Serialize)]
struct ImageKeyRef<'a> {
    key: &'a str,
    #[serde(with = "serde_bytes")]
    value: &'a [u8],
    create_revision: u64,
    mod_revision: u64,
    version: u64,
}

/// The keys as a sequence of [`ImageKeyRef`]s, in key order.
fn keys_in_order<S: serde::Serializer>(
    keys: &&BTreeMap<String, KeyValue>,
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_seq(keys.values().map(|kv| ImageKeyRef {
        key: &kv.key,
        value: &kv.value,
        create_revision: kv.create_revision,
        mod_revision: kv.mod_revision,
        version: kv.version,
    }))
}

/// A key in the [`Image`] (its lease is in the [`LeaseImage`]).
#[derive(Serialize, Deserialize)]
struct ImageKey {
    key: String,
    #[serde(with = "serde_bytes")]
    value: Vec<u8>,
    create_revision: u64,
    mod_revision: u64,
    version: u64,
}

/// Bytes of an image key besides its key and value: five varints of at most
/// ten bytes (lengths and revisions).
const IMAGE_KEY_OVERHEAD: usize = 50;

/// The format of the [`LeaseImage`]: leases without owners, byte for byte
/// what was written before owners existed. A store none of whose leases has
/// an owner still writes it.
const LEASE_IMAGE_FORMAT: u8 = 1;

/// The format of the [`OwnedLeaseImage`], written once a lease has an owner.
const OWNED_LEASE_IMAGE_FORMAT: u8 = 2;

/// The leases, after the [`Image`] once a lease was ever granted. A
/// snapshot without it (taken before leases existed, or by a store that
/// never granted one) restores with no lease and the counter at 0.
#[derive(Serialize, Deserialize)]
struct LeaseImage {
    /// [`LEASE_IMAGE_FORMAT`].
    format: u8,
    /// The last lease id granted.
    last_lease: u64,
    /// The leases, by id.
    leases: Vec<ImageLease>,
}

/// A lease in the [`LeaseImage`].
#[derive(Serialize, Deserialize)]
struct ImageLease {
    id: LeaseId,
    ttl_ms: u64,
    keys: Vec<String>,
}

/// The leases with their owners: the [`LeaseImage`] with
/// [`OWNED_LEASE_IMAGE_FORMAT`] and an owner per lease.
#[derive(Serialize, Deserialize)]
struct OwnedLeaseImage {
    /// [`OWNED_LEASE_IMAGE_FORMAT`].
    format: u8,
    /// The last lease id granted.
    last_lease: u64,
    /// The leases, by id.
    leases: Vec<OwnedImageLease>,
}

/// A lease in the [`OwnedLeaseImage`].
#[derive(Serialize, Deserialize)]
struct OwnedImageLease {
    id: LeaseId,
    ttl_ms: u64,
    keys: Vec<String>,
    owner: Option<String>,
}

/// The lease time never goes beyond 2^62 ms (146 million years): it and
/// every silence start fit an `i64`.
const MAX_LEASE_TIME_MS: u64 = 1 << 62;

/// The format byte of the [`SilenceImage`].
const SILENCE_IMAGE_FORMAT: u8 = 4;

/// The silent leases ([`crate::Command::Checkpoint`]), after the leases and
/// before the numbering, only while a lease is marked silent: a store
/// without one writes the image it wrote before checkpoints existed. An
/// earlier build refuses an image with it (a section format it does not
/// know) instead of giving those leases a fresh TTL.
#[derive(Serialize, Deserialize)]
struct SilenceImage {
    /// [`SILENCE_IMAGE_FORMAT`].
    format: u8,
    /// The store's lease time, in milliseconds.
    lease_time_ms: u64,
    /// Each silent lease with the lease time its silence began at (before
    /// 0 if it began before the lease time was last 0).
    silent: Vec<(LeaseId, i64)>,
}

/// The format byte of the [`NumberingImage`].
const NUMBERING_IMAGE_FORMAT: u8 = 3;

/// The last section of an image, from the build on which an empty store is
/// at [`EMPTY_REVISION`] (1): says how its revisions are numbered. An image
/// without it was written by an earlier build, whose empty store was at
/// revision 0: every revision in it is one lower than a replay of the same
/// log numbers today, and restoring raises each by one, so that a node
/// that restores such a snapshot and one that replays its log from the
/// start agree on every revision. An earlier build refuses an image with
/// it (an unknown lease format, or bytes after the leases) instead of
/// numbering it wrong.
#[derive(Serialize, Deserialize)]
struct NumberingImage {
    /// [`NUMBERING_IMAGE_FORMAT`].
    format: u8,
    /// The revision of an empty store: [`EMPTY_REVISION`].
    empty_revision: u64,
}

/// The revision of an empty store, as etcd's: its first write is revision
/// 2. Clients count on it: clientv3's election and mutex recipes wait for
/// the keys created before their own with `max_create_revision` = their
/// key's revision - 1, where 0 means "no bound"; with a store that started
/// at 0, two campaigners of a first election each waited for the other.
pub const EMPTY_REVISION: u64 = 1;

/// Versioned key-value metadata with leases, a [`StateMachine`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Store {
    revision: u64,
    keys: BTreeMap<String, KeyValue>,
    history: VecDeque<Change>,
    /// Changes up to this revision are no longer in `history`.
    compacted: u64,
    /// The leases, by id; a key's `lease` names one of them.
    leases: BTreeMap<LeaseId, Lease>,
    /// The last lease id granted (0: none yet); ids are never reused.
    last_lease: u64,
    /// The lease time ([`crate::LeaseCheckpoint`]): milliseconds of
    /// leaders' clocks recorded by checkpoints since the store last had no
    /// silent lease (back to 0 then).
    lease_time_ms: u64,
    /// The leases marked silent, each with the lease time its silence began
    /// at (negative: before the lease time was last 0); only leases of
    /// `leases`.
    silent: BTreeMap<LeaseId, i64>,
    /// How many candidate keys (keys [`parse_candidate_key`] reads) each
    /// election name has, only names with at least one: kept as keys are
    /// created and removed, so an election's caps are read without
    /// scanning (a campaign costs the same with 0 or 10,000 elections).
    /// Derived from `keys`, never written to an image: rebuilt when one is
    /// restored.
    candidates: HashMap<String, usize>,
    /// Per owner, how many leases it holds and how many candidate keys are
    /// attached to them (only owners with a lease): kept on apply, so the
    /// per-token caps are read in O(1). Derived from `leases`, rebuilt when
    /// an image is restored.
    owners: HashMap<String, OwnerCounts>,
}

/// What one owner holds: [`Store::owner_leases`], [`Store::owner_candidacies`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct OwnerCounts {
    leases: usize,
    candidacies: usize,
}

impl Default for Store {
    fn default() -> Self {
        Store {
            revision: EMPTY_REVISION,
            keys: BTreeMap::new(),
            history: VecDeque::new(),
            compacted: 0,
            leases: BTreeMap::new(),
            last_lease: 0,
            lease_time_ms: 0,
            silent: BTreeMap::new(),
            candidates: HashMap::new(),
            owners: HashMap::new(),
        }
    }
}

impl Store {
    /// An empty store at [`EMPTY_REVISION`].
    pub fn new() -> Self {
        Store::default()
    }

    /// The cluster-wide revision: that of the latest change.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// Changes up to this revision are no longer kept (0: all are).
    pub fn compacted(&self) -> u64 {
        self.compacted
    }

    /// Keys held.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// True if no key is held.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The key, if present.
    pub fn get(&self, key: &str) -> Option<&KeyValue> {
        self.keys.get(key)
    }

    /// The lease, with its TTL and attached keys, if it exists.
    pub fn lease(&self, id: LeaseId) -> Option<&Lease> {
        self.leases.get(&id)
    }

    /// Every lease, by id (what the tenure leader's lease clock starts
    /// from when it takes office).
    pub fn leases(&self) -> impl ExactSizeIterator<Item = &Lease> {
        self.leases.values()
    }

    /// The leases whose id is above `after`, by id: the page of a listing
    /// that continues after `after`.
    pub fn leases_after(&self, after: LeaseId) -> impl Iterator<Item = &Lease> {
        use std::ops::Bound;
        self.leases.range((Bound::Excluded(after), Bound::Unbounded)).map(|(_, lease)| lease)
    }

    /// The last lease id granted (0: none yet). The next grant gets the
    /// one after it.
    pub fn last_lease(&self) -> LeaseId {
        LeaseId(self.last_lease)
    }

    /// How many candidates election `name` has (candidate keys, as
    /// [`parse_candidate_key`] reads them), in O(1): counted as keys are
    /// created and removed, not by scanning.
    pub fn candidates(&self, name: &str) -> usize {
        self.candidates.get(name).copied().unwrap_or(0)
    }

    /// How many elections have at least one candidate, in O(1).
    pub fn elections(&self) -> usize {
        self.candidates.len()
    }

    /// How many leases `owner` holds, in O(1).
    pub fn owner_leases(&self, owner: &str) -> usize {
        self.owners.get(owner).map_or(0, |c| c.leases)
    }

    /// How many candidate keys are attached to `owner`'s leases (its
    /// candidacies, in as many elections at most), in O(1).
    pub fn owner_candidacies(&self, owner: &str) -> usize {
        self.owners.get(owner).map_or(0, |c| c.candidacies)
    }

    /// The keys starting with `prefix`, in order, at most `limit` (and
    /// [`MAX_RANGE`]); the flag says whether more were left out.
    pub fn range(&self, prefix: &str, limit: usize) -> (Vec<KeyValue>, bool) {
        let limit = limit.min(MAX_RANGE);
        let mut matching = self
            .keys
            .range(prefix.to_string()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(_, kv)| kv.clone());
        let found: Vec<KeyValue> = matching.by_ref().take(limit).collect();
        let more = matching.next().is_some();
        (found, more)
    }

    /// The keys from `start` on (`start` included), in order, borrowed: for
    /// a caller that scans or skips through the keys without copying them
    /// (it stops where its prefix ends).
    pub fn keys_from<'a>(&'a self, start: &str) -> impl Iterator<Item = &'a KeyValue> + 'a {
        use std::ops::Bound;
        self.keys.range::<str, _>((Bound::Included(start), Bound::Unbounded)).map(|(_, kv)| kv)
    }

    /// The changes of keys starting with `prefix` from revision `from` on, at
    /// most `max`, or [`Compacted`] if some of them are no longer kept.
    pub fn changes_since(
        &self,
        prefix: &str,
        from: u64,
        max: usize,
    ) -> Result<Vec<Change>, Compacted> {
        if from <= self.compacted && from <= self.revision {
            return Err(Compacted { compacted: self.compacted, current: self.revision });
        }
        // The history is in revision order: skip to `from` by bisection
        // (a watch asks under the replica's lock, often near the end).
        let start = self.history.partition_point(|c| c.revision < from);
        Ok(self
            .history
            .range(start..)
            .filter(|c| c.kv.key.starts_with(prefix))
            .take(max)
            .cloned()
            .collect())
    }

    /// The kept changes (of every key) from revision `from` through
    /// `through`, borrowed and in revision order, both ends found by
    /// bisection: for a caller that scans a stretch of the history under the
    /// replica's lock, either way, without copying it. [`Compacted`] if some
    /// of them are no longer kept.
    pub fn history_between(
        &self,
        from: u64,
        through: u64,
    ) -> Result<std::collections::vec_deque::Iter<'_, Change>, Compacted> {
        if from <= self.compacted && from <= self.revision.min(through) {
            return Err(Compacted { compacted: self.compacted, current: self.revision });
        }
        let start = self.history.partition_point(|c| c.revision < from);
        let end = self.history.partition_point(|c| c.revision <= through).max(start);
        Ok(self.history.range(start..end))
    }

    /// Runs a command: every node gets the same response and state.
    pub fn execute(&mut self, command: &Command) -> Response {
        if let Err(e) = command.validate() {
            return Response::Invalid(e);
        }
        match command {
            Command::Put { key, value, if_mod_revision, lease } => {
                let current = self.mod_revision(key);
                if if_mod_revision.is_some_and(|r| r != current) {
                    return Response::Conflict { mod_revision: current, revision: self.revision };
                }
                if let Err(refusal) = self.check_attach([(key.as_str(), *lease)]) {
                    return Response::Refused(refusal);
                }
                let revision = self.revision + 1;
                let prev = self.put(key, value, *lease, revision);
                self.revision = revision;
                Response::Put { revision, prev }
            }
            Command::Delete { key, if_mod_revision } => {
                let current = self.mod_revision(key);
                if if_mod_revision.is_some_and(|r| r != current) {
                    return Response::Conflict { mod_revision: current, revision: self.revision };
                }
                if current == 0 {
                    return Response::Delete { revision: self.revision, prev: None };
                }
                let revision = self.revision + 1;
                let prev = self.delete(key, revision, ChangeKind::Delete);
                self.revision = revision;
                Response::Delete { revision, prev }
            }
            Command::Txn { compare, success, failure } => self.txn(compare, success, failure),
            Command::Grant { ttl_ms, owner } => self.grant(*ttl_ms, owner.as_deref()),
            Command::Revoke { lease } => self.end_lease(*lease, LeaseEnd::Revoked),
            Command::Expire { lease } => self.end_lease(*lease, LeaseEnd::Expired),
            Command::ExpireMany { leases } => {
                let (mut ended, mut deleted) = (Vec::new(), 0);
                for &lease in leases {
                    if let Response::LeaseEnded { deleted: d, .. } =
                        self.end_lease(lease, LeaseEnd::Expired)
                    {
                        ended.push(lease);
                        deleted += d;
                    }
                }
                Response::LeasesExpired { leases: ended, revision: self.revision, deleted }
            }
            Command::DeleteRange { from, to } => self.delete_range(from, to),
            Command::Compact { revision } => self.compact(*revision),
            Command::RangeTxn(txn) => self.range_txn(txn),
            Command::Checkpoint(c) => self.checkpoint(c),
        }
    }

    /// Applies a lease checkpoint: the lease time moves on by its
    /// `elapsed_ms`, renewed leases lose their mark, silent ones (that
    /// exist) get one; with no silent lease left the lease time is 0 again.
    fn checkpoint(&mut self, c: &LeaseCheckpoint) -> Response {
        // Capped far beyond any real run (2^62 ms), so that it and every
        // silence start fit an i64.
        self.lease_time_ms = (self.lease_time_ms + c.elapsed_ms).min(MAX_LEASE_TIME_MS);
        let cleared = c.renewed.iter().filter(|id| self.silent.remove(id).is_some()).count();
        let mut marked = 0;
        for &(id, silent_ms) in &c.silent {
            if self.leases.contains_key(&id) {
                // Both at most a day (`Command::validate`): no overflow.
                let since = self.lease_time_ms as i64 - silent_ms as i64;
                self.silent.insert(id, since);
                marked += 1;
            }
        }
        if self.silent.is_empty() {
            self.lease_time_ms = 0;
        }
        Response::Checkpointed { revision: self.revision, marked, cleared }
    }

    /// How long lease `id` has been silent in lease time, if a checkpoint
    /// marked it silent ([`crate::Command::Checkpoint`]): what a new
    /// leader's clock takes off its TTL.
    pub fn silence(&self, id: LeaseId) -> Option<u64> {
        self.silent.get(&id).map(|&since| (self.lease_time_ms as i64 - since) as u64)
    }

    /// How many leases are marked silent.
    pub fn silent_leases(&self) -> usize {
        self.silent.len()
    }

    /// Deletes every key of the range at one revision; refused whole if
    /// the range holds more than [`MAX_CHANGES_PER_REVISION`] keys.
    fn delete_range(&mut self, from: &[u8], to: &[u8]) -> Response {
        let range = if to.is_empty() { KeyRange::From(from) } else { KeyRange::Between(from, to) };
        let keys: Vec<String> = self.keys_in(&range).map(|kv| kv.key.clone()).collect();
        if keys.len() > MAX_CHANGES_PER_REVISION {
            return Response::Refused(Refusal::RangeTooLarge { keys: keys.len() });
        }
        let revision = self.revision + 1;
        let responses: Vec<OpResponse> = keys
            .iter()
            .map(|k| OpResponse::Delete { prev: self.delete(k, revision, ChangeKind::Delete) })
            .collect();
        if !responses.is_empty() {
            self.revision = revision;
        }
        Response::Txn { succeeded: true, revision: self.revision, responses }
    }

    /// Forgets the changes up to `revision` (reads at an earlier revision
    /// and watches from one are refused from now on). The revision does
    /// not move. Answered as an empty transaction that succeeded (see
    /// [`Command::Compact`]).
    fn compact(&mut self, revision: u64) -> Response {
        if revision > self.revision {
            return Response::Refused(Refusal::FutureRevision {
                requested: revision,
                current: self.revision,
            });
        }
        if revision <= self.compacted {
            return Response::Refused(Refusal::Compacted {
                requested: revision,
                compacted: self.compacted,
            });
        }
        while self.history.front().is_some_and(|c| c.revision <= revision) {
            self.history.pop_front();
        }
        self.compacted = revision;
        Response::Txn { succeeded: true, revision: self.revision, responses: Vec::new() }
    }

    /// The keys of `range` now, in order, borrowed.
    fn keys_in<'a>(&'a self, range: &KeyRange<'a>) -> impl Iterator<Item = &'a KeyValue> + 'a {
        let start = range.start();
        // The longest UTF-8 prefix of the start sorts at or before it:
        // every key of the range is at or after it.
        let floor = match std::str::from_utf8(start) {
            Ok(s) => s,
            Err(e) => std::str::from_utf8(&start[..e.valid_up_to()]).unwrap_or_default(),
        };
        let range = *range;
        self.keys_from(floor)
            .skip_while(move |kv| kv.key.as_bytes() < start)
            .take_while(move |kv| !range.is_past(kv.key.as_bytes()))
    }

    /// The keys of `range` as they were at `revision` (0: now), in key
    /// order, borrowed from the store and its history: [`ReadError`] if
    /// that revision is compacted or not reached yet. Costs the keys of
    /// the range now plus the changes after `revision`.
    pub fn range_at<'a>(
        &'a self,
        range: &KeyRange<'a>,
        revision: u64,
    ) -> Result<Vec<&'a KeyValue>, ReadError> {
        if revision > self.revision {
            return Err(ReadError::Future { requested: revision, current: self.revision });
        }
        if revision == 0 || revision == self.revision {
            return Ok(self.keys_in(range).collect());
        }
        if revision < self.compacted {
            return Err(ReadError::Compacted { requested: revision, compacted: self.compacted });
        }
        let mut at: BTreeMap<&str, Option<&KeyValue>> =
            self.keys_in(range).map(|kv| (kv.key.as_str(), Some(kv))).collect();
        // From the newest change back to the first after `revision`: the
        // last one seen of a key is its first after, and its `prev` is the
        // key as it was then.
        for change in self.history.iter().rev().take_while(|c| c.revision > revision) {
            if range.contains(change.kv.key.as_bytes()) {
                at.insert(change.kv.key.as_str(), change.prev.as_ref());
            }
        }
        Ok(at.into_values().flatten().collect())
    }

    /// The branch the comparisons choose, at one revision; refused whole if
    /// one of its puts names a lease that does not exist or is full.
    fn txn(&mut self, compare: &[Compare], success: &[TxnOp], failure: &[TxnOp]) -> Response {
        let succeeded = compare.iter().all(|c| self.holds(c));
        let ops = if succeeded { success } else { failure };
        // Each key's last write (a key deleted and put again ends put).
        let writes: BTreeMap<&str, Option<LeaseId>> = ops
            .iter()
            .filter_map(|op| match op {
                TxnOp::Put { key, lease, .. } => Some((key.as_str(), *lease)),
                TxnOp::Delete { key } => Some((key.as_str(), None)),
                TxnOp::Get { .. } => None,
            })
            .collect();
        if let Err(refusal) = self.check_attach(writes) {
            return Response::Refused(refusal);
        }
        let revision = self.revision + 1;
        let mut changed = false;
        let mut responses = Vec::with_capacity(ops.len());
        for op in ops {
            responses.push(match op {
                TxnOp::Put { key, value, lease } => {
                    changed = true;
                    OpResponse::Put { prev: self.put(key, value, *lease, revision) }
                }
                TxnOp::Delete { key } => {
                    let prev = self.delete(key, revision, ChangeKind::Delete);
                    changed |= prev.is_some();
                    OpResponse::Delete { prev }
                }
                TxnOp::Get { key } => OpResponse::Get { kv: self.keys.get(key).cloned() },
            });
        }
        if changed {
            self.revision = revision;
        }
        Response::Txn { succeeded, revision: self.revision, responses }
    }

    /// Whether writes that leave each key attached to the given lease (or
    /// to none; each key once) may be done: every named lease exists and
    /// none would hold more than [`MAX_KEYS_PER_LEASE`] keys.
    fn check_attach<'k>(
        &self,
        writes: impl IntoIterator<Item = (&'k str, Option<LeaseId>)>,
    ) -> Result<(), Refusal> {
        let mut gained: BTreeMap<LeaseId, usize> = BTreeMap::new();
        let mut lost: BTreeMap<LeaseId, usize> = BTreeMap::new();
        for (key, lease) in writes {
            if let Some(id) = lease {
                if !self.leases.contains_key(&id) {
                    return Err(Refusal::LeaseNotFound(id));
                }
            }
            let old = self.keys.get(key).and_then(|kv| kv.lease);
            if old == lease {
                continue;
            }
            if let Some(id) = old {
                *lost.entry(id).or_default() += 1;
            }
            if let Some(id) = lease {
                *gained.entry(id).or_default() += 1;
            }
        }
        for (id, gain) in gained {
            let held = self.leases.get(&id).map_or(0, |l| l.keys.len());
            let keys = held + gain - lost.get(&id).copied().unwrap_or(0);
            if keys > MAX_KEYS_PER_LEASE {
                return Err(Refusal::TooManyKeys { lease: id, keys });
            }
        }
        Ok(())
    }

    fn grant(&mut self, ttl_ms: u64, owner: Option<&str>) -> Response {
        if self.leases.len() >= MAX_LEASES {
            return Response::Refused(Refusal::TooManyLeases);
        }
        if let Some(owner) = owner {
            if self.owner_leases(owner) >= MAX_LEASES_PER_OWNER {
                return Response::Refused(Refusal::TooManyOwnerLeases(owner.to_string()));
            }
        }
        let Some(next) = self.last_lease.checked_add(1) else {
            return Response::Refused(Refusal::LeaseIdsExhausted);
        };
        self.last_lease = next;
        let id = LeaseId(next);
        let owner = owner.map(str::to_string);
        if let Some(owner) = &owner {
            self.owners.entry(owner.clone()).or_default().leases += 1;
        }
        self.leases.insert(id, Lease { id, ttl_ms, keys: BTreeSet::new(), owner });
        Response::Granted { lease: id, ttl_ms, revision: self.revision }
    }

    /// Deletes every key attached to the lease at one new revision (if it
    /// has any), then forgets the lease.
    fn end_lease(&mut self, id: LeaseId, reason: LeaseEnd) -> Response {
        let Some(lease) = self.leases.remove(&id) else {
            return Response::Refused(Refusal::LeaseNotFound(id));
        };
        if self.silent.remove(&id).is_some() && self.silent.is_empty() {
            self.lease_time_ms = 0;
        }
        if let Some(owner) = &lease.owner {
            let candidacies = lease.keys.iter().filter(|k| parse_candidate_key(k).is_some());
            let candidacies = candidacies.count();
            if let Some(counts) = self.owners.get_mut(owner) {
                counts.leases -= 1;
                counts.candidacies -= candidacies;
                if counts.leases == 0 {
                    self.owners.remove(owner);
                }
            }
        }
        let deleted = lease.keys.len();
        if deleted > 0 {
            let revision = self.revision + 1;
            for key in &lease.keys {
                self.delete(key, revision, reason.into());
            }
            self.revision = revision;
        }
        Response::LeaseEnded { lease: id, reason, revision: self.revision, deleted }
    }

    fn mod_revision(&self, key: &str) -> u64 {
        self.keys.get(key).map_or(0, |kv| kv.mod_revision)
    }

    /// Whether comparison `c` holds now.
    fn holds(&self, c: &Compare) -> bool {
        compare_kv(self.keys.get(&c.key), &c.target, c.op)
    }

    /// Sets the key, attached to `lease` (which exists: checked before) or
    /// to none.
    fn put(
        &mut self,
        key: &str,
        value: &[u8],
        lease: Option<LeaseId>,
        revision: u64,
    ) -> Option<KeyValue> {
        let prev = self.keys.get(key).cloned();
        let old_lease = prev.as_ref().and_then(|p| p.lease);
        if old_lease != lease {
            self.detach(key, old_lease);
            if let Some(l) = lease.and_then(|id| self.leases.get_mut(&id)) {
                l.keys.insert(key.to_string());
                if let Some(owner) = &l.owner {
                    if parse_candidate_key(key).is_some() {
                        if let Some(counts) = self.owners.get_mut(owner) {
                            counts.candidacies += 1;
                        }
                    }
                }
            }
        }
        if prev.is_none() {
            self.count_candidate(key, true);
        }
        let kv = KeyValue {
            key: key.to_string(),
            value: value.to_vec(),
            create_revision: prev.as_ref().map_or(revision, |p| p.create_revision),
            mod_revision: revision,
            version: prev.as_ref().map_or(1, |p| p.version + 1),
            lease,
        };
        self.keys.insert(key.to_string(), kv.clone());
        // A put that creates the key shows no previous key, as etcd's watch
        // (even after a delete of the key in the same transaction).
        let before = if prev.is_none() { None } else { self.before(key, revision, &prev) };
        self.record(Change { revision, kind: ChangeKind::Put, kv, prev: before });
        prev
    }

    /// The key as it was before `revision` (a watch's previous key, as
    /// etcd reads it: at the revision before): `now`, unless an earlier
    /// change of the same transaction already changed it.
    fn before(&self, key: &str, revision: u64, now: &Option<KeyValue>) -> Option<KeyValue> {
        let same = self.history.iter().rev().take_while(|c| c.revision == revision);
        match same.filter(|c| c.kv.key == key).last() {
            Some(earlier) => earlier.prev.clone(),
            None => now.clone(),
        }
    }

    /// Removes the key (and its attachment), recording the change as `kind`.
    fn delete(&mut self, key: &str, revision: u64, kind: ChangeKind) -> Option<KeyValue> {
        let prev = self.keys.remove(key)?;
        self.detach(key, prev.lease);
        self.count_candidate(key, false);
        let kv = KeyValue { mod_revision: revision, version: 0, ..prev.clone() };
        let before = self.before(key, revision, &Some(prev.clone()));
        self.record(Change { revision, kind, kv, prev: before });
        Some(prev)
    }

    /// Takes the key off the lease's keys (a lease being ended is already
    /// gone).
    fn detach(&mut self, key: &str, lease: Option<LeaseId>) {
        if let Some(l) = lease.and_then(|id| self.leases.get_mut(&id)) {
            if l.keys.remove(key) && parse_candidate_key(key).is_some() {
                if let Some(counts) = l.owner.as_ref().and_then(|o| self.owners.get_mut(o)) {
                    counts.candidacies -= 1;
                }
            }
        }
    }

    /// Counts a key that was just created (`created`) or removed, if it is
    /// a candidate key.
    fn count_candidate(&mut self, key: &str, created: bool) {
        let Some((name, _)) = parse_candidate_key(key) else { return };
        if created {
            *self.candidates.entry(name.to_string()).or_default() += 1;
        } else if let Some(n) = self.candidates.get_mut(name) {
            *n -= 1;
            if *n == 0 {
                self.candidates.remove(name);
            }
        }
    }

    fn record(&mut self, change: Change) {
        self.history.push_back(change);
        while self.history.len() > MAX_HISTORY {
            if let Some(old) = self.history.pop_front() {
                self.compacted = old.revision;
            }
        }
    }

    /// The image: that of a store without leases, then the leases once one
    /// was ever granted.
    fn image(&self) -> Vec<u8> {
        // Room for every key and value and a few varints each: written once,
        // not grown (and copied) by doubling.
        let size: usize =
            self.keys.values().map(|kv| kv.key.len() + kv.value.len() + IMAGE_KEY_OVERHEAD).sum();
        let image = ImageRef { revision: self.revision, keys: &self.keys };
        let mut bytes = postcard::to_extend(&image, Vec::with_capacity(size + IMAGE_KEY_OVERHEAD))
            .expect("an image always serializes");
        let keys = |l: &Lease| l.keys.iter().cloned().collect();
        if self.leases.values().any(|l| l.owner.is_some()) {
            let leases = OwnedLeaseImage {
                format: OWNED_LEASE_IMAGE_FORMAT,
                last_lease: self.last_lease,
                leases: self
                    .leases
                    .values()
                    .map(|l| OwnedImageLease {
                        id: l.id,
                        ttl_ms: l.ttl_ms,
                        keys: keys(l),
                        owner: l.owner.clone(),
                    })
                    .collect(),
            };
            bytes = postcard::to_extend(&leases, bytes).expect("a lease image always serializes");
        } else if self.last_lease > 0 {
            let leases = LeaseImage {
                format: LEASE_IMAGE_FORMAT,
                last_lease: self.last_lease,
                leases: self
                    .leases
                    .values()
                    .map(|l| ImageLease { id: l.id, ttl_ms: l.ttl_ms, keys: keys(l) })
                    .collect(),
            };
            bytes = postcard::to_extend(&leases, bytes).expect("a lease image always serializes");
        }
        if !self.silent.is_empty() {
            let silence = SilenceImage {
                format: SILENCE_IMAGE_FORMAT,
                lease_time_ms: self.lease_time_ms,
                silent: self.silent.iter().map(|(&id, &since)| (id, since)).collect(),
            };
            bytes =
                postcard::to_extend(&silence, bytes).expect("a silence image always serializes");
        }
        let numbering =
            NumberingImage { format: NUMBERING_IMAGE_FORMAT, empty_revision: EMPTY_REVISION };
        postcard::to_extend(&numbering, bytes).expect("a numbering section always serializes")
    }

    /// The store an image describes, checked for consistency.
    fn from_image(bytes: &[u8]) -> Result<Store, String> {
        let (image, rest) = postcard::take_from_bytes::<Image>(bytes).map_err(|e| e.to_string())?;
        let mut keys = BTreeMap::new();
        for k in image.keys {
            if k.mod_revision > image.revision || k.create_revision > k.mod_revision {
                return Err(format!("key {:?} has revisions beyond the store's", k.key));
            }
            let kv = KeyValue {
                key: k.key,
                value: k.value,
                create_revision: k.create_revision,
                mod_revision: k.mod_revision,
                version: k.version,
                lease: None,
            };
            keys.insert(kv.key.clone(), kv);
        }
        let mut store = Store {
            revision: image.revision,
            keys,
            history: VecDeque::new(),
            compacted: image.revision,
            leases: BTreeMap::new(),
            last_lease: 0,
            lease_time_ms: 0,
            silent: BTreeMap::new(),
            candidates: HashMap::new(),
            owners: HashMap::new(),
        };
        let rest = match rest.first() {
            Some(&(LEASE_IMAGE_FORMAT | OWNED_LEASE_IMAGE_FORMAT)) => store.restore_leases(rest)?,
            _ => rest,
        };
        let rest = match rest.first() {
            Some(&SILENCE_IMAGE_FORMAT) => store.restore_silence(rest)?,
            _ => rest,
        };
        match rest {
            [] => store.renumber_from_zero()?,
            [NUMBERING_IMAGE_FORMAT, ..] => {
                let numbering = match postcard::take_from_bytes::<NumberingImage>(rest) {
                    Ok((numbering, [])) => numbering,
                    Ok((_, extra)) => {
                        return Err(format!("{} bytes after the numbering", extra.len()))
                    }
                    Err(e) => return Err(format!("the numbering: {e}")),
                };
                if numbering.empty_revision != EMPTY_REVISION {
                    return Err(format!(
                        "revisions numbered from {}, this build numbers from {EMPTY_REVISION}",
                        numbering.empty_revision
                    ));
                }
            }
            [format, ..] => return Err(format!("image section format {format} is not known")),
        }
        // The counts are the keys' and the leases': rebuilt, never read
        // from the image.
        store.candidates = count_candidates(&store.keys);
        store.owners = count_owners(&store.leases);
        Ok(store)
    }

    /// Reads the [`SilenceImage`] (its first byte, the format), checks that
    /// every silent lease exists, once, and returns the bytes after it.
    fn restore_silence<'b>(&mut self, bytes: &'b [u8]) -> Result<&'b [u8], String> {
        let (image, rest) = postcard::take_from_bytes::<SilenceImage>(bytes)
            .map_err(|e| format!("the silent leases: {e}"))?;
        if image.lease_time_ms > MAX_LEASE_TIME_MS {
            return Err("the lease time is beyond its cap".into());
        }
        for (id, since) in image.silent {
            if !self.leases.contains_key(&id) {
                return Err(format!("silent lease {id} is not in the store"));
            }
            if since > image.lease_time_ms as i64 || since < -(crate::MAX_TTL_MS as i64) {
                return Err(format!("silent lease {id} is silent since after the lease time or more than a day before"));
            }
            if self.silent.insert(id, since).is_some() {
                return Err(format!("silent lease {id} is in the image twice"));
            }
        }
        if self.silent.is_empty() {
            return Err("a silence section without a silent lease".into());
        }
        self.lease_time_ms = image.lease_time_ms;
        Ok(rest)
    }

    /// An image of a build whose empty store was at revision 0 (see
    /// [`NumberingImage`]): every revision one higher.
    /// An image at the last revision there is cannot be raised: refused.
    fn renumber_from_zero(&mut self) -> Result<(), String> {
        // Every key's revisions are at most the store's (checked on
        // reading), so theirs cannot overflow once the store's does not.
        self.revision = self
            .revision
            .checked_add(1)
            .ok_or("an image of an earlier build at the last revision there is")?;
        self.compacted = self.revision;
        for kv in self.keys.values_mut() {
            kv.create_revision += 1;
            kv.mod_revision += 1;
        }
        Ok(())
    }

    /// Reads the [`LeaseImage`] (or [`OwnedLeaseImage`], by its first
    /// byte, the format), attaches its keys and returns the bytes after it.
    fn restore_leases<'b>(&mut self, bytes: &'b [u8]) -> Result<&'b [u8], String> {
        fn section<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<(T, &[u8]), String> {
            postcard::take_from_bytes(bytes).map_err(|e| format!("the leases: {e}"))
        }
        let (last_lease, leases, rest) = match bytes.first() {
            Some(&OWNED_LEASE_IMAGE_FORMAT) => {
                let (image, rest): (OwnedLeaseImage, _) = section(bytes)?;
                (image.last_lease, image.leases, rest)
            }
            _ => {
                let (image, rest): (LeaseImage, _) = section(bytes)?;
                if image.format != LEASE_IMAGE_FORMAT {
                    return Err(format!("lease image format {} is not known", image.format));
                }
                let leases = image
                    .leases
                    .into_iter()
                    .map(|l| OwnedImageLease {
                        id: l.id,
                        ttl_ms: l.ttl_ms,
                        keys: l.keys,
                        owner: None,
                    })
                    .collect();
                (image.last_lease, leases, rest)
            }
        };
        self.last_lease = last_lease;
        let image = OwnedLeaseImage { format: OWNED_LEASE_IMAGE_FORMAT, last_lease, leases };
        for l in image.leases {
            if l.id.0 == 0 || l.id.0 > image.last_lease {
                return Err(format!("lease {} is beyond the last granted", l.id));
            }
            let mut attached = BTreeSet::new();
            for key in l.keys {
                let kv = self.keys.get_mut(&key).ok_or_else(|| {
                    format!("lease {} holds key {key:?}, which is not in the store", l.id)
                })?;
                if kv.lease.is_some() {
                    return Err(format!("key {key:?} is attached to two leases"));
                }
                kv.lease = Some(l.id);
                attached.insert(key);
            }
            if l.owner.as_deref().is_some_and(|o| check_owner(o).is_err()) {
                return Err(format!("lease {} has an invalid owner", l.id));
            }
            let lease = Lease { id: l.id, ttl_ms: l.ttl_ms, keys: attached, owner: l.owner };
            if self.leases.insert(l.id, lease).is_some() {
                return Err(format!("lease {} is in the image twice", l.id));
            }
        }
        Ok(rest)
    }
}

/// What each owner holds among `leases`, counted by a scan (once, when an
/// image is restored).
fn count_owners(leases: &BTreeMap<LeaseId, Lease>) -> HashMap<String, OwnerCounts> {
    let mut counts: HashMap<String, OwnerCounts> = HashMap::new();
    for lease in leases.values() {
        let Some(owner) = &lease.owner else { continue };
        let c = counts.entry(owner.clone()).or_default();
        c.leases += 1;
        c.candidacies += lease.keys.iter().filter(|k| parse_candidate_key(k).is_some()).count();
    }
    counts
}

/// The candidates of each election among `keys`, counted by a scan of the
/// elections' prefix (once, when an image is restored).
fn count_candidates(keys: &BTreeMap<String, KeyValue>) -> HashMap<String, usize> {
    let prefix = ELECTIONS_PREFIX;
    let mut counts: HashMap<String, usize> = HashMap::new();
    let from = (std::ops::Bound::Included(prefix), std::ops::Bound::Unbounded);
    let under = keys.range::<str, _>(from).take_while(|(k, _)| k.starts_with(prefix));
    for (name, _) in under.filter_map(|(k, _)| parse_candidate_key(k)) {
        match counts.get_mut(name) {
            Some(n) => *n += 1,
            None => {
                counts.insert(name.to_string(), 1);
            }
        }
    }
    counts
}

impl StateMachine for Store {
    fn apply(&mut self, _pos: Position, command: &[u8]) -> Vec<u8> {
        let response = match Command::decode(command) {
            Ok(c) => self.execute(&c),
            Err(e) => Response::Invalid(e),
        };
        response.encode()
    }

    fn snapshot(&self) -> Vec<u8> {
        self.image()
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), String> {
        *self = Store::from_image(snapshot)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(key: &str, value: &str) -> Command {
        Command::Put { key: key.into(), value: value.into(), if_mod_revision: None, lease: None }
    }

    fn cas(key: &str, value: &str, rev: u64) -> Command {
        Command::Put {
            key: key.into(),
            value: value.into(),
            if_mod_revision: Some(rev),
            lease: None,
        }
    }

    #[test]
    fn revisions_and_versions_follow_etcds_model() {
        let mut s = Store::new();
        assert_eq!(s.execute(&put("a", "1")), Response::Put { revision: 2, prev: None });
        assert_eq!(s.execute(&put("b", "1")), Response::Put { revision: 3, prev: None });
        let Response::Put { revision: 4, prev: Some(prev) } = s.execute(&put("a", "2")) else {
            panic!("a put")
        };
        assert_eq!((prev.mod_revision, prev.version), (2, 1));
        let a = s.get("a").unwrap();
        assert_eq!((a.create_revision, a.mod_revision, a.version), (2, 4, 2));
        // A delete bumps the revision; deleting nothing does not.
        assert!(matches!(
            s.execute(&Command::Delete { key: "a".into(), if_mod_revision: None }),
            Response::Delete { revision: 5, prev: Some(_) }
        ));
        assert_eq!(
            s.execute(&Command::Delete { key: "a".into(), if_mod_revision: None }),
            Response::Delete { revision: 5, prev: None }
        );
        // Created again: a new create revision, version 1.
        s.execute(&put("a", "3"));
        let a = s.get("a").unwrap();
        assert_eq!((a.create_revision, a.mod_revision, a.version), (6, 6, 1));
    }

    #[test]
    fn compare_and_set_on_the_mod_revision() {
        let mut s = Store::new();
        assert_eq!(s.execute(&cas("k", "x", 0)), Response::Put { revision: 2, prev: None });
        assert_eq!(
            s.execute(&cas("k", "y", 0)),
            Response::Conflict { mod_revision: 2, revision: 2 },
            "0 means absent"
        );
        assert!(matches!(s.execute(&cas("k", "y", 2)), Response::Put { revision: 3, .. }));
        assert_eq!(
            s.execute(&cas("k", "z", 2)),
            Response::Conflict { mod_revision: 3, revision: 3 }
        );
        assert_eq!(s.get("k").unwrap().value, b"y");
    }

    #[test]
    fn a_transaction_runs_one_branch_at_one_revision() {
        let mut s = Store::new();
        s.execute(&put("lock", "a"));
        let txn = |expected: u64| Command::Txn {
            compare: vec![Compare {
                key: "lock".into(),
                target: Target::ModRevision(expected),
                op: CompareOp::Equal,
            }],
            success: vec![
                TxnOp::Put { key: "lock".into(), value: b"b".to_vec(), lease: None },
                TxnOp::Put { key: "owner".into(), value: b"b".to_vec(), lease: None },
                TxnOp::Get { key: "owner".into() },
            ],
            failure: vec![TxnOp::Get { key: "lock".into() }],
        };
        let Response::Txn { succeeded: true, revision: 3, responses } = s.execute(&txn(2)) else {
            panic!("the success branch")
        };
        assert_eq!(responses.len(), 3);
        assert_eq!(s.get("lock").unwrap().mod_revision, 3);
        assert_eq!(s.get("owner").unwrap().mod_revision, 3, "one revision for the whole branch");
        let Response::Txn { succeeded: false, revision: 3, responses } = s.execute(&txn(2)) else {
            panic!("the failure branch")
        };
        assert!(matches!(&responses[0], OpResponse::Get { kv: Some(kv) } if kv.value == b"b"));
        // Comparisons on an absent key.
        let absent = |target, op| Command::Txn {
            compare: vec![Compare { key: "none".into(), target, op }],
            success: vec![],
            failure: vec![],
        };
        let succeeded = |s: &mut Store, c: Command| {
            matches!(s.execute(&c), Response::Txn { succeeded: true, .. })
        };
        assert!(succeeded(&mut s, absent(Target::Version(0), CompareOp::Equal)));
        assert!(succeeded(&mut s, absent(Target::CreateRevision(1), CompareOp::Less)));
        assert!(!succeeded(&mut s, absent(Target::Value(vec![]), CompareOp::NotEqual)));
    }

    #[test]
    fn ranges_by_prefix_are_ordered_and_bounded() {
        let mut s = Store::new();
        for k in ["a/2", "a/1", "b/1", "a/3", "a"] {
            s.execute(&put(k, "v"));
        }
        let (kvs, more) = s.range("a/", 10);
        assert_eq!(kvs.iter().map(|kv| kv.key.as_str()).collect::<Vec<_>>(), ["a/1", "a/2", "a/3"]);
        assert!(!more);
        let (kvs, more) = s.range("a", 2);
        assert_eq!(kvs.len(), 2);
        assert!(more);
        assert_eq!(s.range("", 100).0.len(), 5);
    }

    #[test]
    fn keys_from_a_start_key_are_borrowed_in_order() {
        let mut s = Store::new();
        for k in ["a/2", "a/1", "b/1", "a/3", "a"] {
            s.execute(&put(k, "v"));
        }
        let keys = |start: &str| s.keys_from(start).map(|kv| kv.key.clone()).collect::<Vec<_>>();
        assert_eq!(keys("a/2"), ["a/2", "a/3", "b/1"], "the start included");
        assert_eq!(keys("a/25"), ["a/3", "b/1"]);
        assert_eq!(keys(""), ["a", "a/1", "a/2", "a/3", "b/1"]);
        assert!(keys("c").is_empty());
    }

    #[test]
    fn watches_resume_from_a_revision_until_it_is_compacted() {
        let mut s = Store::new();
        for i in 0..10 {
            s.execute(&put(&format!("k{}", i % 3), &i.to_string()));
        }
        let all = s.changes_since("", 2, 100).unwrap();
        assert_eq!(all.len(), 10);
        assert!(all.windows(2).all(|w| w[0].revision < w[1].revision));
        let k0 = s.changes_since("k0", 6, 100).unwrap();
        assert_eq!(k0.iter().map(|c| c.revision).collect::<Vec<_>>(), [8, 11]);
        assert!(s.changes_since("", 12, 100).unwrap().is_empty(), "the future: nothing yet");
        for i in 0..MAX_HISTORY {
            s.execute(&put("x", &i.to_string()));
        }
        let err = s.changes_since("", 5, 100).unwrap_err();
        assert_eq!(err.current, s.revision());
        assert!(err.compacted >= 10);
        assert!(s.changes_since("", err.compacted + 1, 100).is_ok());
    }

    #[test]
    fn a_stretch_of_the_history_is_borrowed_either_way() {
        let mut s = Store::new();
        for i in 0..30 {
            s.execute(&put(&format!("k{i}"), "v"));
        }
        let revisions = |from, through| -> Vec<u64> {
            s.history_between(from, through).unwrap().map(|c| c.revision).collect()
        };
        assert_eq!(revisions(5, 8), [5, 6, 7, 8]);
        let back: Vec<u64> = s.history_between(5, 8).unwrap().rev().map(|c| c.revision).collect();
        assert_eq!(back, [8, 7, 6, 5]);
        assert!(revisions(9, 8).is_empty() && revisions(32, 40).is_empty());
        assert_eq!(s.compacted(), 0);
        let image = s.snapshot();
        let mut t = Store::new();
        t.restore(&image).unwrap();
        assert_eq!(t.compacted(), 31);
        let err = t.history_between(5, 8).unwrap_err();
        assert_eq!((err.compacted, err.current), (31, 31));
        assert_eq!(t.history_between(32, 40).unwrap().count(), 0, "none after the store's");
    }

    #[test]
    fn snapshots_restore_the_keys_and_revision_and_reject_garbage() {
        let mut s = Store::new();
        for i in 0..20 {
            s.execute(&put(&format!("k{i}"), "v"));
        }
        let image = s.snapshot();
        let mut t = Store::new();
        t.restore(&image).unwrap();
        assert_eq!(t.revision(), 21);
        assert_eq!(t.range("", 100), s.range("", 100));
        assert!(t.changes_since("", 5, 10).is_err(), "the history starts at the snapshot");
        assert!(t.changes_since("", 22, 10).is_ok());
        let before = t.clone();
        assert!(t.restore(&[1, 2, 3]).is_err());
        assert_eq!(t, before, "a bad snapshot changes nothing");
    }

    #[test]
    fn every_node_gets_the_same_answer_even_for_garbage() {
        let mut s = Store::new();
        let r = s.apply(Position::ZERO, &[0xff, 0xff]);
        assert!(matches!(Response::decode(&r).unwrap(), Response::Invalid(_)));
        let too_big = put("k", &"x".repeat(crate::MAX_VALUE_BYTES + 1)).encode();
        let r = s.apply(Position::ZERO, &too_big);
        assert!(matches!(
            Response::decode(&r).unwrap(),
            Response::Invalid(InvalidCommand::ValueTooLarge(_))
        ));
        assert_eq!(s.revision(), EMPTY_REVISION, "nothing changed");
    }

    /// The image as it was before leases, with serde's derived encoding:
    /// what snapshots taken then hold.
    #[derive(Serialize)]
    struct LegacyImage {
        revision: u64,
        keys: Vec<LegacyKey>,
    }

    #[derive(Serialize)]
    struct LegacyKey {
        key: String,
        value: Vec<u8>,
        create_revision: u64,
        mod_revision: u64,
        version: u64,
    }

    /// The keys' section of `s`'s image: all an image held before leases.
    fn keys_image(s: &Store) -> Vec<u8> {
        postcard::to_allocvec(&ImageRef { revision: s.revision, keys: &s.keys }).unwrap()
    }

    /// `bytes` with the numbering section this build writes last.
    fn numbered(bytes: Vec<u8>) -> Vec<u8> {
        let numbering =
            NumberingImage { format: NUMBERING_IMAGE_FORMAT, empty_revision: EMPTY_REVISION };
        postcard::to_extend(&numbering, bytes).unwrap()
    }

    /// The image an earlier build (empty store at revision 0) wrote for the
    /// keys of `s`: every revision one lower, no numbering section.
    fn earlier_build_image(s: &Store) -> Vec<u8> {
        let legacy = LegacyImage {
            revision: s.revision - 1,
            keys: s
                .keys
                .values()
                .map(|kv| LegacyKey {
                    key: kv.key.clone(),
                    value: kv.value.clone(),
                    create_revision: kv.create_revision - 1,
                    mod_revision: kv.mod_revision - 1,
                    version: kv.version,
                })
                .collect(),
        };
        postcard::to_allocvec(&legacy).unwrap()
    }

    #[test]
    fn a_store_without_leases_writes_the_old_image_then_its_numbering() {
        let mut s = Store::new();
        s.execute(&put("a", "1"));
        s.execute(&put("b", "2"));
        s.execute(&put("a", "3"));
        let legacy = LegacyImage {
            revision: 4,
            keys: ["a", "b"]
                .iter()
                .map(|k| {
                    let kv = s.get(k).unwrap();
                    LegacyKey {
                        key: kv.key.clone(),
                        value: kv.value.clone(),
                        create_revision: kv.create_revision,
                        mod_revision: kv.mod_revision,
                        version: kv.version,
                    }
                })
                .collect(),
        };
        let image = numbered(postcard::to_allocvec(&legacy).unwrap());
        assert_eq!(s.snapshot(), image);
        let mut t = Store::new();
        t.restore(&image).unwrap();
        assert_eq!(t.range("", 10), s.range("", 10));
        assert_eq!(t.revision(), 4);
        assert_eq!((t.leases().len(), t.last_lease()), (0, LeaseId(0)));
    }

    #[test]
    fn an_image_of_an_earlier_build_restores_as_a_replay_of_its_log_numbers() {
        // An earlier build numbered an empty store 0: the same three writes
        // were revisions 1 to 3. Restored here, each is one higher, as on a
        // node of this build that replays the log from its first entry.
        let mut s = Store::new();
        s.execute(&put("a", "1"));
        s.execute(&put("b", "2"));
        s.execute(&put("a", "3"));
        let mut t = Store::new();
        t.restore(&earlier_build_image(&s)).unwrap();
        assert_eq!(t.revision(), s.revision());
        assert_eq!(t.range("", 10), s.range("", 10), "create and mod revisions too");
        assert_eq!(t.snapshot(), s.snapshot(), "and written back in this build's numbering");
        // An image at the last revision there is cannot be raised.
        let last =
            postcard::to_allocvec(&LegacyImage { revision: u64::MAX, keys: vec![] }).unwrap();
        assert!(Store::new().restore(&last).unwrap_err().contains("last revision"));
        // An empty store of an earlier build (revision 0) is an empty one here.
        let mut e = Store::new();
        e.restore(&earlier_build_image(&Store::new())).unwrap();
        assert_eq!(e.revision(), EMPTY_REVISION);
        // With leases (owned), the same.
        let mut s = Store::new();
        let lease = match s.execute(&Command::Grant { ttl_ms: 1_000, owner: Some("app".into()) }) {
            Response::Granted { lease, .. } => lease,
            other => panic!("{other:?}"),
        };
        s.execute(&Command::Put {
            key: "k".into(),
            value: vec![],
            if_mod_revision: None,
            lease: Some(lease),
        });
        let section = OwnedLeaseImage {
            format: OWNED_LEASE_IMAGE_FORMAT,
            last_lease: lease.0,
            leases: vec![OwnedImageLease {
                id: lease,
                ttl_ms: 1_000,
                keys: vec!["k".into()],
                owner: Some("app".into()),
            }],
        };
        let old = postcard::to_extend(&section, earlier_build_image(&s)).unwrap();
        let mut t = Store::new();
        t.restore(&old).unwrap();
        assert_eq!(t.snapshot(), s.snapshot());
        // A numbering this build does not know is refused.
        let other = NumberingImage { format: NUMBERING_IMAGE_FORMAT, empty_revision: 0 };
        let bytes = postcard::to_extend(&other, keys_image(&s)).unwrap();
        let before = t.clone();
        assert!(t.restore(&bytes).unwrap_err().contains("numbered from 0"));
        assert_eq!(t, before);
    }

    fn with_leases(keys: &[&str], leases: Vec<ImageLease>, last_lease: u64) -> Vec<u8> {
        let mut s = Store::new();
        for k in keys {
            s.execute(&put(k, "v"));
        }
        let section = LeaseImage { format: LEASE_IMAGE_FORMAT, last_lease, leases };
        numbered(postcard::to_extend(&section, keys_image(&s)).unwrap())
    }

    fn lease(id: u64, keys: &[&str]) -> ImageLease {
        ImageLease {
            id: LeaseId(id),
            ttl_ms: 1_000,
            keys: keys.iter().map(|k| k.to_string()).collect(),
        }
    }

    #[test]
    fn owners_survive_a_snapshot_and_an_image_without_them_is_the_administrators() {
        let grant = |s: &mut Store, owner: Option<&str>| {
            let c = Command::Grant { ttl_ms: 1_000, owner: owner.map(str::to_string) };
            match s.execute(&c) {
                Response::Granted { lease, .. } => lease,
                other => panic!("{other:?}"),
            }
        };
        // No owner: the image is the one written before owners existed
        // (format 1), and it restores with no owner.
        let mut s = Store::new();
        let admin = grant(&mut s, None);
        let old = with_leases(&[], vec![lease(admin.0, &[])], admin.0);
        assert_eq!(s.snapshot(), old, "format 1, byte for byte");
        let mut t = Store::new();
        t.restore(&old).unwrap();
        assert_eq!(t.lease(admin).unwrap().owner, None);
        // An owner: format 2, every owner kept.
        let app = grant(&mut s, Some("app"));
        s.execute(&Command::Put {
            key: "k".into(),
            value: vec![],
            if_mod_revision: None,
            lease: Some(app),
        });
        let image = s.snapshot();
        let keys = keys_image(&s);
        assert_eq!(image[keys.len()], OWNED_LEASE_IMAGE_FORMAT, "after the keys, the format");
        t.restore(&image).unwrap();
        assert_eq!(t.snapshot(), image);
        assert_eq!(t.lease(app).unwrap().owner.as_deref(), Some("app"));
        assert_eq!(t.lease(admin).unwrap().owner, None);
        assert_eq!(t.get("k").unwrap().lease, Some(app));
        // A bad owner in an image is refused.
        let bad = OwnedLeaseImage {
            format: OWNED_LEASE_IMAGE_FORMAT,
            last_lease: 1,
            leases: vec![OwnedImageLease {
                id: LeaseId(1),
                ttl_ms: 1_000,
                keys: vec![],
                owner: Some("a\u{7}".into()),
            }],
        };
        let bytes = numbered(postcard::to_extend(&bad, keys_image(&Store::new())).unwrap());
        assert!(t.restore(&bytes).unwrap_err().contains("invalid owner"));
    }

    #[test]
    fn an_inconsistent_lease_image_is_refused_and_changes_nothing() {
        let good = with_leases(&["a", "b"], vec![lease(1, &["a"]), lease(3, &["b"])], 3);
        let mut t = Store::new();
        t.restore(&good).unwrap();
        assert_eq!(t.get("b").unwrap().lease, Some(LeaseId(3)));
        let bad = [
            (with_leases(&["a"], vec![lease(1, &["b"])], 1), "not in the store"),
            (with_leases(&["a"], vec![lease(1, &["a"]), lease(2, &["a"])], 2), "two leases"),
            (with_leases(&["a"], vec![lease(2, &[])], 1), "beyond the last granted"),
            (with_leases(&["a"], vec![lease(0, &[])], 1), "beyond the last granted"),
            (with_leases(&["a"], vec![lease(1, &[]), lease(1, &[])], 1), "twice"),
            ([good.as_slice(), &[0]].concat(), "1 bytes after the numbering"),
            ([keys_image(&t).as_slice(), &[LEASE_IMAGE_FORMAT, 0xff, 0xff]].concat(), "the leases"),
        ];
        for (bytes, why) in bad {
            let before = t.clone();
            let err = t.restore(&bytes).unwrap_err();
            assert!(err.contains(why), "{err:?} should say {why:?}");
            assert_eq!(t, before);
        }
        let mut other_format = with_leases(&[], vec![], 1);
        // format, last lease, no lease; then the numbering (format, 1)
        let at = other_format.len() - 5;
        other_format[at] = 9;
        assert!(t.restore(&other_format).unwrap_err().contains("format 9 is not known"));
    }

    fn checkpoint(elapsed_ms: u64, silent: &[(u64, u64)], renewed: &[u64]) -> Command {
        Command::Checkpoint(LeaseCheckpoint {
            elapsed_ms,
            silent: silent.iter().map(|&(id, ms)| (LeaseId(id), ms)).collect(),
            renewed: renewed.iter().copied().map(LeaseId).collect(),
        })
    }

    fn granted(s: &mut Store, ttl_ms: u64) -> LeaseId {
        match s.execute(&Command::Grant { ttl_ms, owner: None }) {
            Response::Granted { lease, .. } => lease,
            other => panic!("grant refused: {other:?}"),
        }
    }

    #[test]
    fn checkpoints_keep_silences_in_lease_time_and_spend_no_revision() {
        let mut s = Store::new();
        let (a, b) = (granted(&mut s, 10_000), granted(&mut s, 10_000));
        s.execute(&put("k", "v"));
        let revision = s.revision();
        // a went silent 5 s ago; an unknown lease is skipped.
        let r = s.execute(&checkpoint(3_000, &[(a.0, 5_000), (99, 1)], &[]));
        assert_eq!(r, Response::Checkpointed { revision, marked: 1, cleared: 0 });
        assert_eq!(s.silence(a), Some(5_000));
        assert_eq!(s.silence(b), None);
        // The lease time moves on with each checkpoint, not while none comes.
        s.execute(&checkpoint(500, &[(b.0, 6_000)], &[]));
        assert_eq!((s.silence(a), s.silence(b)), (Some(5_500), Some(6_000)));
        assert_eq!(s.revision(), revision, "no revision spent");
        // A renewal clears the mark; the last one gone, the lease time is 0.
        let r = s.execute(&checkpoint(0, &[], &[a.0, 42]));
        assert_eq!(r, Response::Checkpointed { revision, marked: 0, cleared: 1 });
        assert_eq!(s.silence(a), None);
        assert!(matches!(s.execute(&Command::Revoke { lease: b }), Response::LeaseEnded { .. }));
        assert_eq!((s.silence(b), s.silent_leases(), s.lease_time_ms), (None, 0, 0));
        // A silence longer than the lease time is kept whole.
        s.execute(&checkpoint(100, &[(a.0, 7_000)], &[]));
        assert_eq!(s.silence(a), Some(7_000));
    }

    #[test]
    fn a_bad_checkpoint_is_refused_whole() {
        let mut s = Store::new();
        let a = granted(&mut s, 10_000);
        let before = s.clone();
        let day = crate::MAX_TTL_MS;
        for bad in [
            checkpoint(day + 1, &[], &[]),
            checkpoint(0, &[(a.0, day + 1)], &[]),
            checkpoint(0, &[(a.0, 1), (a.0, 2)], &[]),
            checkpoint(0, &[(a.0, 1)], &[a.0]),
            checkpoint(0, &[], &[5; 2]),
            checkpoint(0, &[], &(1..=crate::MAX_CHECKPOINT_LEASES as u64 + 1).collect::<Vec<_>>()),
        ] {
            assert_eq!(s.execute(&bad), Response::Invalid(InvalidCommand::BadCheckpoint));
            assert_eq!(s, before);
        }
        let all: Vec<u64> = (1..=crate::MAX_CHECKPOINT_LEASES as u64).collect();
        assert!(matches!(s.execute(&checkpoint(day, &[], &all)), Response::Checkpointed { .. }));
    }

    #[test]
    fn silences_survive_a_snapshot_and_a_store_without_them_writes_what_it_wrote() {
        let mut s = Store::new();
        let (a, b) = (granted(&mut s, 10_000), granted(&mut s, 10_000));
        let without = s.snapshot();
        s.execute(&checkpoint(2_000, &[(a.0, 1_500)], &[]));
        let with = s.snapshot();
        let mut t = Store::new();
        t.restore(&with).unwrap();
        assert_eq!(
            (t.lease_time_ms, &t.silent, &t.leases),
            (s.lease_time_ms, &s.silent, &s.leases)
        );
        assert_eq!(t.silence(a), Some(1_500));
        s.execute(&checkpoint(0, &[], &[a.0]));
        assert_eq!(s.snapshot(), without, "no silent lease: the image of before");
        // A silent lease the store lacks, or a silence after the lease time.
        let keys = keys_image(&Store::new());
        let leases = LeaseImage {
            format: LEASE_IMAGE_FORMAT,
            last_lease: 2,
            leases: vec![lease(1, &[]), lease(2, &[])],
        };
        let numbering =
            NumberingImage { format: NUMBERING_IMAGE_FORMAT, empty_revision: EMPTY_REVISION };
        let image = |silent: Vec<(LeaseId, i64)>| {
            let silence = SilenceImage { format: SILENCE_IMAGE_FORMAT, lease_time_ms: 10, silent };
            let bytes = postcard::to_extend(&leases, keys.clone()).unwrap();
            let bytes = postcard::to_extend(&silence, bytes).unwrap();
            postcard::to_extend(&numbering, bytes).unwrap()
        };
        let mut u = Store::new();
        u.restore(&image(vec![(b, 4)])).unwrap();
        assert_eq!(u.silence(b), Some(6));
        for (silent, why) in [
            (vec![(LeaseId(3), 1)], "not in the store"),
            (vec![(a, 11)], "after the lease time"),
            (vec![(a, -(crate::MAX_TTL_MS as i64) - 1)], "more than a day before"),
            (vec![(a, 1), (a, 2)], "twice"),
            (vec![], "without a silent lease"),
        ] {
            let before = u.clone();
            let err = u.restore(&image(silent)).unwrap_err();
            assert!(err.contains(why), "{err:?} should say {why:?}");
            assert_eq!(u, before);
        }
    }
}

#[cfg(test)]
mod range_tests {
    use super::*;

    fn put(s: &mut Store, key: &str, value: &str) {
        let c = Command::Put {
            key: key.into(),
            value: value.into(),
            if_mod_revision: None,
            lease: None,
        };
        assert!(matches!(s.execute(&c), Response::Put { .. }));
    }

    fn keys_at(s: &Store, range: KeyRange<'_>, rev: u64) -> Vec<(String, String, u64)> {
        s.range_at(&range, rev)
            .unwrap()
            .into_iter()
            .map(|kv| (kv.key.clone(), String::from_utf8(kv.value.clone()).unwrap(), kv.version))
            .collect()
    }

    #[test]
    fn reads_at_past_revisions_see_the_keys_as_they_were() {
        let mut s = Store::new();
        put(&mut s, "a", "1"); // 2 (the empty store is at 1)
        put(&mut s, "b", "1"); // 3
        put(&mut s, "a", "2"); // 4
        s.execute(&Command::Delete { key: "b".into(), if_mod_revision: None }); // 5
        put(&mut s, "c", "1"); // 6
        let all = KeyRange::From(b"a");
        assert_eq!(keys_at(&s, all, 1), []);
        assert_eq!(keys_at(&s, all, 2), [("a".into(), "1".into(), 1)]);
        assert_eq!(keys_at(&s, all, 3), [("a".into(), "1".into(), 1), ("b".into(), "1".into(), 1)]);
        assert_eq!(keys_at(&s, all, 4), [("a".into(), "2".into(), 2), ("b".into(), "1".into(), 1)]);
        assert_eq!(keys_at(&s, all, 5), [("a".into(), "2".into(), 2)]);
        assert_eq!(keys_at(&s, all, 0).len(), 2);
        assert_eq!(keys_at(&s, KeyRange::Key(b"b"), 3).len(), 1);
        assert_eq!(keys_at(&s, KeyRange::Between(b"b", b"c"), 6).len(), 0);
        assert_eq!(keys_at(&s, KeyRange::Between(b"a", b"c"), 4).len(), 2);
        // A bound that is not UTF-8 is a bound all the same.
        assert_eq!(keys_at(&s, KeyRange::Between(b"a\xff", b"c\xff"), 6).len(), 1);
        assert_eq!(s.range_at(&all, 7), Err(ReadError::Future { requested: 7, current: 6 }));
    }

    #[test]
    fn compaction_refuses_older_reads_and_moves_no_revision() {
        let mut s = Store::new();
        for v in ["1", "2", "3"] {
            put(&mut s, "k", v);
        }
        let ok = s.execute(&Command::Compact { revision: 3 });
        assert_eq!(ok, Response::Txn { succeeded: true, revision: 4, responses: vec![] });
        assert_eq!(s.compacted(), 3);
        assert_eq!(keys_at(&s, KeyRange::Key(b"k"), 3), [("k".into(), "2".into(), 2)]);
        assert_eq!(
            s.range_at(&KeyRange::Key(b"k"), 2),
            Err(ReadError::Compacted { requested: 2, compacted: 3 })
        );
        assert_eq!(
            s.execute(&Command::Compact { revision: 3 }),
            Response::Refused(Refusal::Compacted { requested: 3, compacted: 3 })
        );
        assert_eq!(
            s.execute(&Command::Compact { revision: 5 }),
            Response::Refused(Refusal::FutureRevision { requested: 5, current: 4 })
        );
        assert!(s.changes_since("", 3, 10).is_err());
        assert_eq!(s.changes_since("", 4, 10).unwrap().len(), 1);
        let c = Command::Compact { revision: 9 };
        assert_eq!(Command::decode(&c.encode()), Ok(c));
    }

    #[test]
    fn a_range_delete_removes_its_keys_at_one_revision_within_the_bound() {
        let mut s = Store::new();
        for k in ["p/a", "p/b", "q"] {
            put(&mut s, k, "v");
        }
        let del = Command::DeleteRange { from: b"p/".to_vec(), to: b"p0".to_vec() };
        assert_eq!(Command::decode(&del.encode()), Ok(del.clone()));
        match s.execute(&del) {
            Response::Txn { succeeded: true, revision: 5, responses } => {
                assert_eq!(responses.len(), 2);
                assert!(
                    matches!(&responses[0], OpResponse::Delete { prev: Some(kv) } if kv.key == "p/a")
                );
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(s.len(), 1);
        // Nothing in range: nothing changes, not even the revision.
        assert_eq!(
            s.execute(&del),
            Response::Txn { succeeded: true, revision: 5, responses: vec![] }
        );
        for i in 0..=MAX_CHANGES_PER_REVISION {
            put(&mut s, &format!("r/{i:05}"), "v");
        }
        let big = Command::DeleteRange { from: b"r/".to_vec(), to: vec![] };
        assert!(matches!(s.execute(&big), Response::Refused(Refusal::RangeTooLarge { .. })));
        assert_eq!(s.len(), MAX_CHANGES_PER_REVISION + 2);
        let empty = Command::DeleteRange { from: vec![], to: vec![] };
        assert_eq!(s.execute(&empty), Response::Invalid(InvalidCommand::EmptyKey));
    }

    #[test]
    fn a_key_deleted_and_put_in_one_transaction_is_created_again_on_its_new_lease() {
        let mut s = Store::new();
        let lease = |s: &mut Store| match s.execute(&Command::Grant { ttl_ms: 5_000, owner: None })
        {
            Response::Granted { lease, .. } => lease,
            other => panic!("{other:?}"),
        };
        let (a, b) = (lease(&mut s), lease(&mut s));
        let first = Command::Txn {
            compare: vec![],
            success: vec![TxnOp::Put { key: "o".into(), value: b"a".to_vec(), lease: Some(a) }],
            failure: vec![],
        };
        s.execute(&first);
        let born = s.get("o").unwrap().create_revision;
        let handoff = Command::Txn {
            compare: vec![],
            success: vec![
                TxnOp::Delete { key: "o".into() },
                TxnOp::Put { key: "o".into(), value: b"b".to_vec(), lease: Some(b) },
            ],
            failure: vec![],
        };
        assert_eq!(handoff.validate(), Ok(()));
        let Response::Txn { succeeded: true, revision, .. } = s.execute(&handoff) else {
            panic!("the handoff applies")
        };
        let o = s.get("o").unwrap();
        assert_eq!((o.create_revision, o.mod_revision, o.version), (revision, revision, 1));
        assert!(o.create_revision > born);
        assert_eq!(o.lease, Some(b));
        // The key left the first lease: revoking it deletes nothing.
        s.execute(&Command::Revoke { lease: a });
        assert_eq!(s.get("o").map(|kv| kv.value.clone()), Some(b"b".to_vec()));
        // Watchers see the delete and the creation at one revision.
        let changes = s.changes_since("o", revision, 10).unwrap();
        assert_eq!(changes.len(), 2, "{changes:?}");
    }
}
