//! # tenure-core: the sans-IO leader-election state machine
//!
//! The core of tenure decides, at every moment, which node of a cluster leads.
//! It performs no I/O: it reads no clock, opens no socket, spawns no thread and
//! uses no global randomness. Callers feed it inputs — peer messages, timer
//! expiries and commands, each with `now` — and drain its outputs: durable state
//! to persist, messages to send, leadership events, and the next deadline.
//!
//! * [`Protocol`] is the interface and states the calling contract;
//! * [`RaftElector`] implements the Raft-style election (BlazingMQ, Leader and Followers, Maelstrom's Raft):
//!   PreVote with leader stickiness, CheckQuorum with a drift-safe leader
//!   lease, ranked candidacy for split-vote-free failover, Leader Sequence
//!   Numbers and fencing tokens, leadership transfer and cession on stop;
//! * [`RankedElector`] implements the two-phase ELECT/VOTE election of "A Leader Election Algorithm" (2000)
//!   with deterministic vote ranking, made safe with durable votes and leases;
//! * [`PaxosElector`] implements TRex's Paxos leader election with
//!   low-ball polling that never disturbs a stable leader;
//! * [`Elector`] holds any of the three, chosen at run time by [`ProtocolKind`].
//!
//! The three share one leadership record (the crate's `seat` module): term
//! and vote, role and leader, heartbeats, the leader lease, the stall grace,
//! and the invariants checked after every input. A violated invariant halts
//! the node ([`Event::Halted`]) rather than risk a second leader.
//!
//! ```
//! use std::time::Duration;
//! use tenure_core::{Config, HardState, Instant, NodeId, Protocol, RaftElector};
//! let cfg = Config::new(NodeId(1), vec![NodeId(1)], Duration::from_millis(100), Duration::from_millis(1000));
//! cfg.validate().unwrap();
//! let rng = rand_pcg::Pcg64Mcg::new(7);
//! let mut node = RaftElector::new(cfg, HardState::default(), rng, Instant::ZERO);
//! let deadline = node.poll_timeout();
//! node.handle_timeout(deadline);
//! // A single-node cluster stands for election; its vote must be persisted
//! // (fsync) before anything else happens.
//! let out = node.take_output();
//! assert!(out.persist.is_some());
//! // The write succeeded (no `handle_persist_failed`): on its next timer the
//! // node counts its own vote and leads.
//! let now = node.poll_timeout();
//! node.handle_timeout(now);
//! assert!(node.is_leader(now));
//! ```

#![warn(missing_docs)]

pub mod config;
pub mod contract;
pub mod drift;
pub mod elector;
pub mod electorate;
pub mod failover;
mod handover;
pub mod kind;
pub mod message;
pub mod paxos;
pub mod protocol;
pub mod raft;
pub mod ranked;
mod seat;
#[cfg(feature = "testkit")]
pub mod testkit;
pub mod time;
pub mod types;

pub use config::{quorum, Config, ConfigError, MAX_NODE_ID, MAX_VOTERS};
pub use elector::Elector;
pub use electorate::{ConfigId, Electorate, Freshness};
pub use kind::{ProtocolKind, UnknownProtocol};
pub use message::Message;
pub use paxos::{PaxosElector, PaxosMessage};
pub use protocol::{
    Counters, Event, HardState, Output, PeerStatus, Protocol, Reason, Status, TransferError,
};
pub use raft::RaftElector;
pub use ranked::{RankedElector, RankedMessage};
pub use seat::{majority_value, MAX_TERM_STEP, NOTICE_REASK_DIVISOR, STALL_GRACE_HEARTBEATS};
pub use time::Instant;
pub use types::{BadDirectoryId, DirectoryId, FencingToken, Lsn, NodeId, Role, Term};
