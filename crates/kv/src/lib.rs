//! # tenure-kv: versioned key-value metadata
//!
//! The state machine tenure's leader replicates ([`Store`], a
//! [`tenure_replica::StateMachine`]). Keys are UTF-8 strings, values bytes.
//! Every change gets the next cluster-wide revision; a transaction's changes
//! share one. Every key carries the revision that created it
//! (`create_revision`), the one that last changed it (`mod_revision`) and how
//! many times it changed since it was created (`version`) — etcd's model, so
//! its users find their way.
//!
//! Writes are [`Command`]s, encoded with [`Command::encode`] and proposed
//! through the log; every node applies them in the same order and gets the
//! same [`Response`]. Reads ([`Store::get`], [`Store::range`]) and watches
//! ([`Store::changes_since`]) look at the local state: the caller decides
//! whether that is fresh enough (the replica's read index).
//!
//! Leases are the store's side of sessions: [`Command::Grant`] makes one
//! with a TTL, a put may attach its key to one, and [`Command::Revoke`] or
//! [`Command::Expire`] deletes every key attached to it at one revision.
//! The store keeps no time: the tenure leader decides when a lease expired
//! and proposes the expiry (docs/ELECTIONS.md); [`LeaseClock`] is that
//! leader's bookkeeping of deadlines, sans-IO.

#![warn(missing_docs)]

mod command;
mod election;
mod election_key;
mod lease;
mod lease_clock;
mod lease_keeper;
mod range_txn;
mod store;

pub use command::{
    check_key, Command, Compare, CompareOp, InvalidCommand, LeaseCheckpoint, Target, TxnOp,
    MAX_CHECKPOINT_LEASES, MAX_EXPIRIES_PER_COMMAND, MAX_KEY_BYTES, MAX_TXN_OPS, MAX_VALUE_BYTES,
};
pub use election::{
    campaign, campaign_outcome, candidate_count, check_caps, check_caps_in, proclaim,
    proclaim_outcome, resign, resign_outcome, summary, validate_name, validate_value, Candidate,
    ElectionError, Names, Outcome, Place, Standing, MAX_CANDIDACIES_PER_OWNER, MAX_CANDIDATES,
    MAX_ELECTIONS, MAX_VALUE,
};
pub use election_key::{
    candidate_key, parse_candidate_key, prefix, ELECTIONS_PREFIX, MAX_NAME_BYTES,
};
pub use lease::{
    Lease, LeaseEnd, LeaseId, Refusal, MAX_KEYS_PER_LEASE, MAX_LEASES, MAX_LEASES_PER_OWNER,
    MAX_TTL_MS, MIN_TTL_MS,
};
pub use lease_clock::{
    LeaseClock, RenewError, TrackError, CHECKPOINT_INTERVAL, EXPIRY_RETRY_DELAY,
    MAX_EXPIRIES_PER_CALL,
};
pub use lease_keeper::{LeaseKeeper, MARKS_CHECKED_PER_CHECKPOINT, MAX_EXPIRIES_IN_FLIGHT};
pub use range_txn::{
    RangeCompare, RangeOp, RangeOpResponse, RangeTxn, Span, MAX_TXN_DEPTH, MAX_TXN_READ_BYTES,
    MAX_TXN_TOTAL_OPS, MAX_TXN_VISITED_KEYS, READ_OVERHEAD,
};
pub use store::{
    Change, ChangeKind, Compacted, KeyRange, KeyValue, OpResponse, ReadError, Response, Store,
    EMPTY_REVISION, MAX_CHANGES_PER_REVISION, MAX_HISTORY, MAX_RANGE,
};
