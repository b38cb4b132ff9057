//! # tenure-replica: the leader's log
//!
//! The elector (`tenure-core`) decides who leads; the replica gives the leader
//! its job. It replicates a log of commands, each entry tagged with the fencing
//! token of the leadership that wrote it, commits an entry once a majority
//! holds it durably, and applies committed entries in order to a deterministic
//! [`StateMachine`] on every node.
//!
//! Like the elector it performs no I/O: the caller feeds it the elector's view
//! of the leader ([`Replica::set_leadership`]), peer messages, timer expiries,
//! proposals and reads, each with `now`, and drains an [`Output`]: a ready
//! leader's new entries for its followers, which leave first
//! ([`Output::early`]), log changes to make durable (fsync) *before* the other
//! messages of the same output are sent, then those messages, then what was
//! applied and completed.
//!
//! A new leader takes office in two steps before it accepts a write: it
//! collects promises and last positions from a majority and takes the freshest
//! log among them, then commits a no-op entry of its own. The rules, and the
//! argument that no committed entry is ever lost, are in `docs/REPLICATION.md`.

#![warn(missing_docs)]

pub mod entry;
mod log;
pub mod machine;
pub mod membership;
pub mod message;
pub mod output;
pub mod replica;
pub mod router;
#[cfg(feature = "testkit")]
pub mod testkit;

pub use entry::{Entry, Index, Payload, Position};
pub use machine::StateMachine;
pub use membership::{
    address_problem, Change, ChangeError, Identity, Member, Members, Membership, MAX_ADDRESS_LEN,
};
pub use message::{ReplicaMessage, SnapshotChunk};
pub use output::{Completion, LogOp, Output, ProposalError, ProposalId, ReadError, ReadId};
pub use replica::{
    Config, ProposeError, ReadStart, Replica, ReplicaStatus, RestoreError, Restored,
    MAX_IN_FLIGHT_BATCHES,
};
