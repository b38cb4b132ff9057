//! What a write asks of the store, and the limits it must keep.

use crate::lease::{LeaseId, MAX_TTL_MS, MIN_TTL_MS};
use crate::range_txn::RangeTxn;
use serde::{Deserialize, Serialize, Serializer};

/// The longest key, in bytes.
pub const MAX_KEY_BYTES: usize = 1024;

/// The largest value, in bytes.
pub const MAX_VALUE_BYTES: usize = 64 * 1024;

/// Most comparisons, and most operations in each branch, of a transaction.
pub const MAX_TXN_OPS: usize = 128;

/// The longest owner of a lease, in bytes (API token names have at most 64).
pub const MAX_OWNER_BYTES: usize = 128;

/// A write to the store.
///
/// The encoding is stable: what a log written before leases existed holds
/// still decodes to the same command, and a put without a lease encodes as
/// it did then (the private `wire` module).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(from = "wire::Command")]
pub enum Command {
    /// Sets `key` to `value`; with `if_mod_revision`, only if the key's
    /// `mod_revision` is that (0: only if the key is absent). With `lease`,
    /// attaches the key to that lease (which must exist); without, detaches
    /// it from any lease it was attached to (etcd's rule).
    Put {
        /// The key.
        key: String,
        /// The new value.
        #[serde(with = "serde_bytes")]
        value: Vec<u8>,
        /// Compare-and-set on the key's `mod_revision`.
        if_mod_revision: Option<u64>,
        /// The lease the key is attached to from now on, if any.
        lease: Option<LeaseId>,
    },
    /// Removes `key`; with `if_mod_revision`, only if its `mod_revision` is that.
    Delete {
        /// The key.
        key: String,
        /// Compare-and-delete on the key's `mod_revision`.
        if_mod_revision: Option<u64>,
    },
    /// If every comparison holds, the `success` operations, else the
    /// `failure` ones, all at one revision.
    Txn {
        /// The comparisons, all of which must hold.
        compare: Vec<Compare>,
        /// Done when they all hold.
        success: Vec<TxnOp>,
        /// Done otherwise.
        failure: Vec<TxnOp>,
    },
    /// Grants a new lease with this TTL (from [`MIN_TTL_MS`] to
    /// [`MAX_TTL_MS`]), owned by `owner`; its id comes from the store's
    /// counter.
    Grant {
        /// The TTL in milliseconds.
        ttl_ms: u64,
        /// Who the lease belongs to (the name of the API token that asked
        /// for it: see [`crate::Lease::owner`]); `None`: the administrators
        /// (what every grant logged before owners existed decodes to). At
        /// most [`MAX_OWNER_BYTES`] bytes, no control character.
        owner: Option<String>,
    },
    /// Ends a lease at its holder's request: deletes every key attached to
    /// it at one revision, then forgets it.
    Revoke {
        /// The lease.
        lease: LeaseId,
    },
    /// Ends a lease whose TTL passed on the tenure leader's clock (only the
    /// leader proposes it): the same effect as [`Command::Revoke`], reported
    /// as an expiry.
    Expire {
        /// The lease.
        lease: LeaseId,
    },
    /// Removes every key from `from` (included) to `to` (excluded; empty:
    /// every key from `from` on), all at one revision, answered as a
    /// transaction that succeeded with one [`crate::OpResponse::Delete`]
    /// per key removed, in key order. Refused whole
    /// ([`crate::Refusal::RangeTooLarge`]) above
    /// [`crate::MAX_CHANGES_PER_REVISION`] keys. The bounds are bytes (etcd's
    /// range ends need not be UTF-8).
    DeleteRange {
        /// The first key (not empty).
        #[serde(with = "serde_bytes")]
        from: Vec<u8>,
        /// The end, excluded; empty: no end.
        #[serde(with = "serde_bytes")]
        to: Vec<u8>,
    },
    /// Forgets the change history up to `revision` (etcd's compaction):
    /// reads at an earlier revision and watches from one are refused from
    /// then on; the revision does not move. Refused at or before the
    /// compacted revision and after the store's. Answered as an empty
    /// transaction that succeeded: the store's [`crate::Response`] has no
    /// variant of its own for it, since the simulator's checker matches
    /// every variant (frozen while this was written).
    Compact {
        /// The revision compacted up to, included.
        revision: u64,
    },
    /// etcd's whole transaction: comparisons over ranges, range deletes,
    /// range reads that see the writes before them, nested transactions
    /// (see [`RangeTxn`]); answered as [`crate::Response::RangeTxn`].
    RangeTxn(RangeTxn),
    /// Ends several leases whose TTL passed on the leader's clock, in order,
    /// each as [`Command::Expire`] would (its keys deleted at a revision of
    /// its own; one already gone is skipped): one log entry for a chunk of
    /// expiries. Between 1 and [`MAX_EXPIRIES_PER_COMMAND`] leases, each
    /// named once. Answered as [`crate::Response::LeasesExpired`].
    ExpireMany {
        /// The leases.
        leases: Vec<LeaseId>,
    },
    /// The leader's record of the leases it saw go silent, so that a later
    /// leader keeps their remaining time instead of a fresh TTL
    /// (docs/ELECTIONS.md, "Deadlines across leader changes"). Spends no
    /// revision. Answered as [`crate::Response::Checkpointed`].
    Checkpoint(LeaseCheckpoint),
}

/// What one [`Command::Checkpoint`] records. The store keeps a lease time:
/// the sum of every `elapsed_ms` since it last had no silent lease, which
/// runs no faster than real time while a leader leads and stands still
/// while none does. A silent lease is kept with the lease time at which its
/// silence began; a later leader gives it what is left of its TTL from
/// there, not a fresh one.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseCheckpoint {
    /// How long the leader's clock ran since its previous checkpoint (its
    /// first: since it became the ready leader), in milliseconds, at most
    /// [`MAX_TTL_MS`]: added to the lease time.
    pub elapsed_ms: u64,
    /// Leases that went without a renewal, each with for how long on the
    /// leader's clock (milliseconds, at most [`MAX_TTL_MS`]): marked silent
    /// since the lease time minus that. One that does not exist is skipped.
    pub silent: Vec<(LeaseId, u64)>,
    /// Silent leases renewed since: their mark is removed. The leader
    /// answers such a renewal only once this committed.
    pub renewed: Vec<LeaseId>,
}

/// Most leases one [`Command::Checkpoint`] names, silent and renewed
/// together: a checkpoint entry stays under the replica's largest command
/// (`tenure_replica::replica::Config::max_command_bytes`, 66 KiB; a lease
/// costs at most 14 bytes: its id and its silence as variable-length
/// integers), and a mass silence (every client of a fleet cut off) is
/// recorded in `MAX_LEASES / 4,096` = 245 entries, two a second.
pub const MAX_CHECKPOINT_LEASES: usize = 4096;

/// Most leases one [`Command::ExpireMany`] ends: the leader's chunk of due
/// leases ([`crate::MAX_EXPIRIES_PER_CALL`]).
pub const MAX_EXPIRIES_PER_COMMAND: usize = crate::lease_clock::MAX_EXPIRIES_PER_CALL;

/// A condition on one key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Compare {
    /// The key.
    pub key: String,
    /// What is compared, and with what.
    pub target: Target,
    /// How.
    pub op: CompareOp,
}

/// The property of a key a comparison reads, with the value it is compared
/// with. An absent key has revisions and version 0 and no value (a value
/// comparison with an absent key fails, whatever the operator).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Target {
    /// The key's `mod_revision`.
    ModRevision(u64),
    /// The key's `create_revision`.
    CreateRevision(u64),
    /// The key's `version`.
    Version(u64),
    /// The key's value.
    Value(#[serde(with = "serde_bytes")] Vec<u8>),
    /// The id of the lease the key is attached to (0: none, or absent).
    Lease(u64),
}

/// A comparison operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CompareOp {
    /// Equal.
    Equal,
    /// Not equal.
    NotEqual,
    /// The key's property is less than the given one.
    Less,
    /// The key's property is greater than the given one.
    Greater,
}

/// One operation of a transaction branch (encoded stably, like [`Command`]).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(from = "wire::TxnOp")]
pub enum TxnOp {
    /// Sets a key, attaching it to `lease` or detaching it from any (as
    /// [`Command::Put`]).
    Put {
        /// The key.
        key: String,
        /// The value.
        #[serde(with = "serde_bytes")]
        value: Vec<u8>,
        /// The lease the key is attached to from now on, if any.
        lease: Option<LeaseId>,
    },
    /// Removes a key.
    Delete {
        /// The key.
        key: String,
    },
    /// Reads a key (as of the transaction's revision).
    Get {
        /// The key.
        key: String,
    },
}

/// Why a command is refused before it is proposed (and, deterministically,
/// if one reaches the store anyway).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum InvalidCommand {
    /// An empty key.
    #[error("the key is empty")]
    EmptyKey,
    /// A key over [`MAX_KEY_BYTES`].
    #[error("the key has {0} bytes; at most {MAX_KEY_BYTES} are accepted")]
    KeyTooLong(usize),
    /// A key with a control character.
    #[error("the key contains a control character")]
    ControlCharacter,
    /// A value over [`MAX_VALUE_BYTES`].
    #[error("the value has {0} bytes; at most {MAX_VALUE_BYTES} are accepted")]
    ValueTooLarge(usize),
    /// A transaction part over [`MAX_TXN_OPS`].
    #[error("the transaction has {0} comparisons or operations in one part; at most {MAX_TXN_OPS} are accepted")]
    TooManyOps(usize),
    /// A transaction that writes one key twice (a delete then a put of it,
    /// which creates it again, is the one pair allowed).
    #[error("the transaction writes key {0:?} twice in one branch")]
    DuplicateWrite(String),
    /// Bytes that are not a command.
    #[error("not a command: {0}")]
    Undecodable(String),
    /// A lease TTL outside [`MIN_TTL_MS`]..=[`MAX_TTL_MS`].
    #[error("a lease TTL of {0} ms; give {MIN_TTL_MS} to {MAX_TTL_MS} ms")]
    TtlOutOfRange(u64),
    /// A lease owner that is empty, over [`MAX_OWNER_BYTES`] or has a
    /// control character.
    #[error("a lease owner has 1 to {MAX_OWNER_BYTES} bytes and no control character")]
    BadOwner,
    /// Transactions nested deeper than [`crate::MAX_TXN_DEPTH`].
    #[error("the transactions nest {0} deep; at most {max} are accepted", max = crate::MAX_TXN_DEPTH)]
    TooDeep(usize),
    /// More than [`crate::MAX_TXN_TOTAL_OPS`] comparisons and operations in
    /// one transaction, nested ones included.
    #[error(
        "the transaction holds {0} comparisons and operations, nested ones included; at most {max} \
         are accepted",
        max = crate::MAX_TXN_TOTAL_OPS
    )]
    TooManyOpsInAll(usize),
    /// An expiry of no lease, of more than [`MAX_EXPIRIES_PER_COMMAND`], or
    /// naming one twice.
    #[error("an expiry names 1 to {MAX_EXPIRIES_PER_COMMAND} distinct leases, not {0}")]
    BadExpiries(usize),
    /// A checkpoint naming more than [`MAX_CHECKPOINT_LEASES`] leases, one
    /// twice, or a duration over [`MAX_TTL_MS`].
    #[error(
        "a lease checkpoint names at most {MAX_CHECKPOINT_LEASES} distinct leases, with \
         durations of at most {MAX_TTL_MS} ms"
    )]
    BadCheckpoint,
}

impl Command {
    /// The command as proposed to the log.
    pub fn encode(&self) -> Vec<u8> {
        postcard::to_allocvec(self).expect("a command always serializes")
    }

    /// A command from the log.
    pub fn decode(bytes: &[u8]) -> Result<Command, InvalidCommand> {
        postcard::from_bytes(bytes).map_err(|e| InvalidCommand::Undecodable(e.to_string()))
    }

    /// Checks the limits; the store refuses what fails them.
    pub fn validate(&self) -> Result<(), InvalidCommand> {
        match self {
            Command::Put { key, value, .. } => {
                check_key(key)?;
                check_value(value)
            }
            Command::Delete { key, .. } => check_key(key),
            Command::Txn { compare, success, failure } => {
                for part in [compare.len(), success.len(), failure.len()] {
                    if part > MAX_TXN_OPS {
                        return Err(InvalidCommand::TooManyOps(part));
                    }
                }
                for c in compare {
                    check_key(&c.key)?;
                    if let Target::Value(v) = &c.target {
                        check_value(v)?;
                    }
                }
                for branch in [success, failure] {
                    // Each key written once, but for a delete followed by a
                    // put: the key created again, with a new create revision
                    // (a partition handed from one owner to the next).
                    let mut written: std::collections::BTreeMap<&String, bool> =
                        std::collections::BTreeMap::new();
                    for op in branch {
                        match op {
                            TxnOp::Put { key, value, .. } => {
                                check_key(key)?;
                                check_value(value)?;
                                match written.insert(key, true) {
                                    None | Some(false) => {}
                                    Some(true) => {
                                        return Err(InvalidCommand::DuplicateWrite(key.clone()))
                                    }
                                }
                            }
                            TxnOp::Delete { key } => {
                                check_key(key)?;
                                if written.insert(key, false).is_some() {
                                    return Err(InvalidCommand::DuplicateWrite(key.clone()));
                                }
                            }
                            TxnOp::Get { key } => check_key(key)?,
                        }
                    }
                }
                Ok(())
            }
            Command::Grant { ttl_ms, owner } => {
                if !(MIN_TTL_MS..=MAX_TTL_MS).contains(ttl_ms) {
                    return Err(InvalidCommand::TtlOutOfRange(*ttl_ms));
                }
                owner.as_deref().map_or(Ok(()), check_owner)
            }
            Command::Revoke { .. } | Command::Expire { .. } | Command::Compact { .. } => Ok(()),
            Command::ExpireMany { leases } => {
                let distinct = leases.iter().collect::<std::collections::BTreeSet<_>>().len();
                if leases.is_empty()
                    || leases.len() > MAX_EXPIRIES_PER_COMMAND
                    || distinct != leases.len()
                {
                    return Err(InvalidCommand::BadExpiries(leases.len()));
                }
                Ok(())
            }
            Command::Checkpoint(c) => {
                let named = c.silent.len() + c.renewed.len();
                let ids = c.silent.iter().map(|(id, _)| id).chain(&c.renewed);
                let distinct = ids.collect::<std::collections::BTreeSet<_>>().len();
                let long = c.elapsed_ms > MAX_TTL_MS || c.silent.iter().any(|s| s.1 > MAX_TTL_MS);
                if named > MAX_CHECKPOINT_LEASES || distinct != named || long {
                    return Err(InvalidCommand::BadCheckpoint);
                }
                Ok(())
            }
            Command::RangeTxn(txn) => txn.validate(),
            Command::DeleteRange { from, to } => {
                if from.is_empty() {
                    return Err(InvalidCommand::EmptyKey);
                }
                for bound in [from, to] {
                    if bound.len() > MAX_KEY_BYTES {
                        return Err(InvalidCommand::KeyTooLong(bound.len()));
                    }
                }
                Ok(())
            }
        }
    }
}

/// Checks a key against the limits: 1 to [`MAX_KEY_BYTES`] bytes, no
/// control characters.
pub fn check_key(key: &str) -> Result<(), InvalidCommand> {
    if key.is_empty() {
        return Err(InvalidCommand::EmptyKey);
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(InvalidCommand::KeyTooLong(key.len()));
    }
    if key.chars().any(char::is_control) {
        return Err(InvalidCommand::ControlCharacter);
    }
    Ok(())
}

/// Checks a lease's owner against the limits.
pub(crate) fn check_owner(owner: &str) -> Result<(), InvalidCommand> {
    if owner.is_empty() || owner.len() > MAX_OWNER_BYTES || owner.chars().any(char::is_control) {
        return Err(InvalidCommand::BadOwner);
    }
    Ok(())
}

pub(crate) fn check_value(value: &[u8]) -> Result<(), InvalidCommand> {
    if value.len() > MAX_VALUE_BYTES {
        return Err(InvalidCommand::ValueTooLarge(value.len()));
    }
    Ok(())
}

impl Serialize for Command {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        wire::CommandRef::from(self).serialize(s)
    }
}

impl Serialize for TxnOp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        wire::TxnOpRef::from(self).serialize(s)
    }
}

/// The encoding of commands. postcard names an enum's variant by its place,
/// so a variant is never moved or changed: new ones go at the end. A put
/// without a lease is the put logs held before leases existed; a put with
/// one is a variant of its own. Likewise a grant without an owner is the
/// grant logs held before owners existed; a grant with one is
/// `OwnedGrant`.
mod wire {
    use super::{Compare, LeaseId, RangeTxn};
    use serde::{Deserialize, Serialize};

    /// A command as it is decoded.
    #[derive(Deserialize)]
    pub(super) enum Command {
        Put {
            key: String,
            #[serde(with = "serde_bytes")]
            value: Vec<u8>,
            if_mod_revision: Option<u64>,
        },
        Delete {
            key: String,
            if_mod_revision: Option<u64>,
        },
        Txn {
            compare: Vec<Compare>,
            success: Vec<super::TxnOp>,
            failure: Vec<super::TxnOp>,
        },
        Grant {
            ttl_ms: u64,
        },
        Revoke {
            lease: LeaseId,
        },
        Expire {
            lease: LeaseId,
        },
        LeasedPut {
            key: String,
            #[serde(with = "serde_bytes")]
            value: Vec<u8>,
            if_mod_revision: Option<u64>,
            lease: LeaseId,
        },
        OwnedGrant {
            ttl_ms: u64,
            owner: String,
        },
        DeleteRange {
            #[serde(with = "serde_bytes")]
            from: Vec<u8>,
            #[serde(with = "serde_bytes")]
            to: Vec<u8>,
        },
        Compact {
            revision: u64,
        },
        RangeTxn(RangeTxn),
        ExpireMany {
            leases: Vec<LeaseId>,
        },
        Checkpoint(super::LeaseCheckpoint),
    }

    /// A command as it is encoded (borrowed: a transaction is not copied).
    /// The same variants in the same order as [`Command`].
    #[derive(Serialize)]
    pub(super) enum CommandRef<'a> {
        Put {
            key: &'a str,
            #[serde(with = "serde_bytes")]
            value: &'a [u8],
            if_mod_revision: Option<u64>,
        },
        Delete {
            key: &'a str,
            if_mod_revision: Option<u64>,
        },
        Txn {
            compare: &'a [Compare],
            success: &'a [super::TxnOp],
            failure: &'a [super::TxnOp],
        },
        Grant {
            ttl_ms: u64,
        },
        Revoke {
            lease: LeaseId,
        },
        Expire {
            lease: LeaseId,
        },
        LeasedPut {
            key: &'a str,
            #[serde(with = "serde_bytes")]
            value: &'a [u8],
            if_mod_revision: Option<u64>,
            lease: LeaseId,
        },
        OwnedGrant {
            ttl_ms: u64,
            owner: &'a str,
        },
        DeleteRange {
            #[serde(with = "serde_bytes")]
            from: &'a [u8],
            #[serde(with = "serde_bytes")]
            to: &'a [u8],
        },
        Compact {
            revision: u64,
        },
        RangeTxn(&'a RangeTxn),
        ExpireMany {
            leases: &'a [LeaseId],
        },
        Checkpoint(&'a super::LeaseCheckpoint),
    }

    /// A transaction operation as it is decoded.
    #[derive(Deserialize)]
    pub(super) enum TxnOp {
        Put {
            key: String,
            #[serde(with = "serde_bytes")]
            value: Vec<u8>,
        },
        Delete {
            key: String,
        },
        Get {
            key: String,
        },
        LeasedPut {
            key: String,
            #[serde(with = "serde_bytes")]
            value: Vec<u8>,
            lease: LeaseId,
        },
    }

    /// A transaction operation as it is encoded, in [`TxnOp`]'s order.
    #[derive(Serialize)]
    pub(super) enum TxnOpRef<'a> {
        Put {
            key: &'a str,
            #[serde(with = "serde_bytes")]
            value: &'a [u8],
        },
        Delete {
            key: &'a str,
        },
        Get {
            key: &'a str,
        },
        LeasedPut {
            key: &'a str,
            #[serde(with = "serde_bytes")]
            value: &'a [u8],
            lease: LeaseId,
        },
    }

    impl From<Command> for super::Command {
        fn from(c: Command) -> Self {
            match c {
                Command::Put { key, value, if_mod_revision } => {
                    super::Command::Put { key, value, if_mod_revision, lease: None }
                }
                Command::LeasedPut { key, value, if_mod_revision, lease } => {
                    super::Command::Put { key, value, if_mod_revision, lease: Some(lease) }
                }
                Command::Delete { key, if_mod_revision } => {
                    super::Command::Delete { key, if_mod_revision }
                }
                Command::Txn { compare, success, failure } => {
                    super::Command::Txn { compare, success, failure }
                }
                Command::Grant { ttl_ms } => super::Command::Grant { ttl_ms, owner: None },
                Command::OwnedGrant { ttl_ms, owner } => {
                    super::Command::Grant { ttl_ms, owner: Some(owner) }
                }
                Command::Revoke { lease } => super::Command::Revoke { lease },
                Command::Expire { lease } => super::Command::Expire { lease },
                Command::DeleteRange { from, to } => super::Command::DeleteRange { from, to },
                Command::Compact { revision } => super::Command::Compact { revision },
                Command::RangeTxn(txn) => super::Command::RangeTxn(txn),
                Command::ExpireMany { leases } => super::Command::ExpireMany { leases },
                Command::Checkpoint(c) => super::Command::Checkpoint(c),
            }
        }
    }

    impl<'a> From<&'a super::Command> for CommandRef<'a> {
        fn from(c: &'a super::Command) -> Self {
            match c {
                super::Command::Put { key, value, if_mod_revision, lease: None } => {
                    CommandRef::Put { key, value, if_mod_revision: *if_mod_revision }
                }
                super::Command::Put { key, value, if_mod_revision, lease: Some(lease) } => {
                    CommandRef::LeasedPut {
                        key,
                        value,
                        if_mod_revision: *if_mod_revision,
                        lease: *lease,
                    }
                }
                super::Command::Delete { key, if_mod_revision } => {
                    CommandRef::Delete { key, if_mod_revision: *if_mod_revision }
                }
                super::Command::Txn { compare, success, failure } => {
                    CommandRef::Txn { compare, success, failure }
                }
                super::Command::Grant { ttl_ms, owner: None } => {
                    CommandRef::Grant { ttl_ms: *ttl_ms }
                }
                super::Command::Grant { ttl_ms, owner: Some(owner) } => {
                    CommandRef::OwnedGrant { ttl_ms: *ttl_ms, owner }
                }
                super::Command::Revoke { lease } => CommandRef::Revoke { lease: *lease },
                super::Command::Expire { lease } => CommandRef::Expire { lease: *lease },
                super::Command::DeleteRange { from, to } => CommandRef::DeleteRange { from, to },
                super::Command::Compact { revision } => CommandRef::Compact { revision: *revision },
                super::Command::RangeTxn(txn) => CommandRef::RangeTxn(txn),
                super::Command::ExpireMany { leases } => CommandRef::ExpireMany { leases },
                super::Command::Checkpoint(c) => CommandRef::Checkpoint(c),
            }
        }
    }

    impl From<TxnOp> for super::TxnOp {
        fn from(op: TxnOp) -> Self {
            match op {
                TxnOp::Put { key, value } => super::TxnOp::Put { key, value, lease: None },
                TxnOp::LeasedPut { key, value, lease } => {
                    super::TxnOp::Put { key, value, lease: Some(lease) }
                }
                TxnOp::Delete { key } => super::TxnOp::Delete { key },
                TxnOp::Get { key } => super::TxnOp::Get { key },
            }
        }
    }

    impl<'a> From<&'a super::TxnOp> for TxnOpRef<'a> {
        fn from(op: &'a super::TxnOp) -> Self {
            match op {
                super::TxnOp::Put { key, value, lease: None } => TxnOpRef::Put { key, value },
                super::TxnOp::Put { key, value, lease: Some(lease) } => {
                    TxnOpRef::LeasedPut { key, value, lease: *lease }
                }
                super::TxnOp::Delete { key } => TxnOpRef::Delete { key },
                super::TxnOp::Get { key } => TxnOpRef::Get { key },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_largest_checkpoint_fits_in_one_log_command() {
        // The replica's default cap on one command.
        let one = tenure_core::NodeId(1);
        let cap = tenure_replica::replica::Config::new(
            one,
            vec![one],
            std::time::Duration::from_millis(100),
        )
        .max_command_bytes;
        let most = LeaseId(u64::MAX);
        let c = LeaseCheckpoint {
            elapsed_ms: MAX_TTL_MS,
            silent: vec![(most, MAX_TTL_MS); MAX_CHECKPOINT_LEASES],
            renewed: Vec::new(),
        };
        let bytes = Command::Checkpoint(c).encode().len();
        assert!(bytes <= cap, "{bytes} bytes, over the log's {cap}");
        let c = LeaseCheckpoint {
            elapsed_ms: MAX_TTL_MS,
            silent: Vec::new(),
            renewed: vec![most; MAX_CHECKPOINT_LEASES],
        };
        assert!(Command::Checkpoint(c).encode().len() <= cap);
    }

    #[test]
    fn commands_round_trip_and_garbage_is_refused() {
        let c = Command::Txn {
            compare: vec![Compare {
                key: "a".into(),
                target: Target::ModRevision(3),
                op: CompareOp::Equal,
            }],
            success: vec![TxnOp::Put { key: "a".into(), value: b"x".to_vec(), lease: None }],
            failure: vec![TxnOp::Get { key: "a".into() }],
        };
        assert_eq!(Command::decode(&c.encode()), Ok(c));
        assert!(matches!(Command::decode(&[0xff; 3]), Err(InvalidCommand::Undecodable(_))));
        assert!(matches!(Command::decode(&[]), Err(InvalidCommand::Undecodable(_))));
    }

    #[test]
    fn limits_are_checked_with_clear_reasons() {
        let put = |key: &str, len: usize| Command::Put {
            key: key.into(),
            value: vec![0; len],
            if_mod_revision: None,
            lease: None,
        };
        assert_eq!(put("", 1).validate(), Err(InvalidCommand::EmptyKey));
        assert_eq!(put("k", MAX_VALUE_BYTES).validate(), Ok(()));
        assert_eq!(
            put("k", MAX_VALUE_BYTES + 1).validate(),
            Err(InvalidCommand::ValueTooLarge(MAX_VALUE_BYTES + 1))
        );
        let long = "k".repeat(MAX_KEY_BYTES + 1);
        assert_eq!(put(&long, 1).validate(), Err(InvalidCommand::KeyTooLong(MAX_KEY_BYTES + 1)));
        assert_eq!(put("a\nb", 1).validate(), Err(InvalidCommand::ControlCharacter));
        let twice = Command::Txn {
            compare: vec![],
            success: vec![
                TxnOp::Put { key: "a".into(), value: vec![], lease: None },
                TxnOp::Delete { key: "a".into() },
            ],
            failure: vec![],
        };
        assert_eq!(twice.validate(), Err(InvalidCommand::DuplicateWrite("a".into())));
        // A delete then a put creates the key again: allowed, once.
        let put_a = TxnOp::Put { key: "a".into(), value: vec![], lease: None };
        let del_a = TxnOp::Delete { key: "a".into() };
        let txn = |success: Vec<TxnOp>| Command::Txn { compare: vec![], success, failure: vec![] };
        assert_eq!(txn(vec![del_a.clone(), put_a.clone()]).validate(), Ok(()));
        for refused in [
            vec![put_a.clone(), put_a.clone()],
            vec![del_a.clone(), del_a.clone()],
            vec![del_a.clone(), put_a.clone(), put_a.clone()],
            vec![del_a.clone(), put_a.clone(), del_a.clone()],
        ] {
            assert_eq!(
                txn(refused.clone()).validate(),
                Err(InvalidCommand::DuplicateWrite("a".into())),
                "{refused:?}"
            );
        }
        let many = Command::Txn {
            compare: vec![],
            success: (0..=MAX_TXN_OPS).map(|i| TxnOp::Get { key: format!("k{i}") }).collect(),
            failure: vec![],
        };
        assert_eq!(many.validate(), Err(InvalidCommand::TooManyOps(MAX_TXN_OPS + 1)));
        assert!(InvalidCommand::KeyTooLong(2000).to_string().contains("at most 1024"));
    }

    /// The commands as they were before leases, with serde's derived
    /// encoding: what logs written then hold.
    mod legacy {
        use super::Compare;
        use serde::Serialize;

        #[derive(Serialize)]
        pub enum Command {
            Put { key: String, value: Vec<u8>, if_mod_revision: Option<u64> },
            Delete { key: String, if_mod_revision: Option<u64> },
            Txn { compare: Vec<Compare>, success: Vec<TxnOp>, failure: Vec<TxnOp> },
        }

        #[derive(Serialize)]
        pub enum TxnOp {
            Put { key: String, value: Vec<u8> },
            Delete { key: String },
            Get { key: String },
        }
    }

    #[test]
    fn commands_without_leases_encode_as_before_leases_existed() {
        let compare = vec![Compare {
            key: "c".into(),
            target: Target::Value(vec![7; 300]),
            op: CompareOp::Less,
        }];
        let pairs = [
            (
                Command::Put {
                    key: "k".into(),
                    value: b"v".to_vec(),
                    if_mod_revision: None,
                    lease: None,
                },
                legacy::Command::Put {
                    key: "k".into(),
                    value: b"v".to_vec(),
                    if_mod_revision: None,
                },
            ),
            (
                Command::Put {
                    key: "ключ".into(),
                    value: vec![0; 200],
                    if_mod_revision: Some(300),
                    lease: None,
                },
                legacy::Command::Put {
                    key: "ключ".into(),
                    value: vec![0; 200],
                    if_mod_revision: Some(300),
                },
            ),
            (
                Command::Delete { key: "d".into(), if_mod_revision: Some(1) },
                legacy::Command::Delete { key: "d".into(), if_mod_revision: Some(1) },
            ),
            (
                Command::Txn {
                    compare: compare.clone(),
                    success: vec![
                        TxnOp::Put { key: "a".into(), value: vec![1, 2], lease: None },
                        TxnOp::Delete { key: "b".into() },
                    ],
                    failure: vec![TxnOp::Get { key: "a".into() }],
                },
                legacy::Command::Txn {
                    compare,
                    success: vec![
                        legacy::TxnOp::Put { key: "a".into(), value: vec![1, 2] },
                        legacy::TxnOp::Delete { key: "b".into() },
                    ],
                    failure: vec![legacy::TxnOp::Get { key: "a".into() }],
                },
            ),
        ];
        for (now, before) in pairs {
            let old = postcard::to_allocvec(&before).unwrap();
            assert_eq!(now.encode(), old, "{now:?}");
            assert_eq!(Command::decode(&old), Ok(now));
        }
        // Pinned bytes: variant 0, key, value, no compare-and-set.
        let put = Command::Put {
            key: "k".into(),
            value: b"v".to_vec(),
            if_mod_revision: None,
            lease: None,
        };
        assert_eq!(put.encode(), [0, 1, b'k', 1, b'v', 0]);
    }

    #[test]
    fn lease_commands_and_leased_puts_round_trip() {
        let commands = [
            Command::Grant { ttl_ms: 5_000, owner: None },
            Command::Grant { ttl_ms: 5_000, owner: Some("app-1".into()) },
            Command::Revoke { lease: LeaseId(7) },
            Command::Expire { lease: LeaseId(u64::MAX) },
            Command::Put {
                key: "k".into(),
                value: b"v".to_vec(),
                if_mod_revision: Some(0),
                lease: Some(LeaseId(3)),
            },
            Command::Txn {
                compare: vec![],
                success: vec![
                    TxnOp::Put { key: "a".into(), value: vec![], lease: Some(LeaseId(1)) },
                    TxnOp::Put { key: "b".into(), value: vec![], lease: None },
                ],
                failure: vec![TxnOp::Put {
                    key: "a".into(),
                    value: vec![],
                    lease: Some(LeaseId(2)),
                }],
            },
        ];
        for c in commands {
            assert_eq!(Command::decode(&c.encode()), Ok(c.clone()), "{c:?}");
        }
        // A leased put is not mistaken for a plain one.
        let leased = Command::Put {
            key: "k".into(),
            value: vec![],
            if_mod_revision: None,
            lease: Some(LeaseId(1)),
        };
        let plain =
            Command::Put { key: "k".into(), value: vec![], if_mod_revision: None, lease: None };
        assert_ne!(leased.encode(), plain.encode());
    }

    #[test]
    fn lease_ttls_are_bounded() {
        let grant = |ttl_ms| Command::Grant { ttl_ms, owner: None }.validate();
        assert_eq!(grant(MIN_TTL_MS), Ok(()));
        assert_eq!(grant(MAX_TTL_MS), Ok(()));
        assert_eq!(grant(MIN_TTL_MS - 1), Err(InvalidCommand::TtlOutOfRange(MIN_TTL_MS - 1)));
        assert_eq!(grant(MAX_TTL_MS + 1), Err(InvalidCommand::TtlOutOfRange(MAX_TTL_MS + 1)));
        assert_eq!(grant(0), Err(InvalidCommand::TtlOutOfRange(0)));
        assert!(InvalidCommand::TtlOutOfRange(1).to_string().contains("500 to 86400000 ms"));
        let owned = |owner: &str| Command::Grant { ttl_ms: 1_000, owner: Some(owner.into()) };
        assert_eq!(owned("app").validate(), Ok(()));
        assert_eq!(owned(&"a".repeat(MAX_OWNER_BYTES)).validate(), Ok(()));
        for bad in [String::new(), "a".repeat(MAX_OWNER_BYTES + 1), "a\nb".into()] {
            assert_eq!(owned(&bad).validate(), Err(InvalidCommand::BadOwner), "{bad:?}");
        }
    }

    /// The grant as logs held it before owners existed (variant 3 of the
    /// leases' encoding).
    mod before_owners {
        use super::LeaseId;
        use serde::Serialize;

        /// The variants before the grant hold its place (never built).
        #[derive(Serialize)]
        #[allow(dead_code)]
        pub enum Command {
            Put { key: String, value: Vec<u8>, if_mod_revision: Option<u64> },
            Delete { key: String, if_mod_revision: Option<u64> },
            Txn { compare: Vec<()>, success: Vec<()>, failure: Vec<()> },
            Grant { ttl_ms: u64 },
            Revoke { lease: LeaseId },
        }
    }

    #[test]
    fn a_grant_logged_before_owners_decodes_as_the_administrators_and_encodes_as_before() {
        let old = postcard::to_allocvec(&before_owners::Command::Grant { ttl_ms: 5_000 }).unwrap();
        // Pinned bytes: variant 3, the TTL as a varint.
        assert_eq!(old, [3, 0x88, 0x27]);
        let now = Command::Grant { ttl_ms: 5_000, owner: None };
        assert_eq!(Command::decode(&old), Ok(now.clone()));
        assert_eq!(now.encode(), old, "a grant without an owner is written as before");
        let revoke = postcard::to_allocvec(&before_owners::Command::Revoke { lease: LeaseId(4) });
        assert_eq!(Command::decode(&revoke.unwrap()), Ok(Command::Revoke { lease: LeaseId(4) }));
        // An owned grant is a variant of its own (the 8th), never read as an
        // ownerless one.
        let owned = Command::Grant { ttl_ms: 5_000, owner: Some("app".into()) };
        let bytes = owned.encode();
        assert_eq!(bytes, [7, 0x88, 0x27, 3, b'a', b'p', b'p']);
        assert_eq!(Command::decode(&bytes), Ok(owned));
    }
}
