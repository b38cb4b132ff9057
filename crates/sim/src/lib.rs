//! # tenure-sim: deterministic simulation of tenure's election core
//!
//! Runs many nodes of a real tenure elector (any [`tenure_core::ProtocolKind`]) in one thread on
//! virtual time. One `u64` seed fixes everything random — clocks, network
//! latency, loss, duplication, reordering and the fault schedule — so a failing
//! run replays exactly. Checkers watch from outside the nodes.
//!
//! * [`runner::Sim`]: the event loop and the scripted faults;
//! * [`scenario`]: named scenarios with asserted outcomes; [`vopr`]: the
//!   random (VOPR-style) run;
//! * [`forger`]: a stranger that forges frames as other voters (the fault
//!   of a malicious or buggy peer); [`hostile`]: the scenario built on it,
//!   and what each attack must show;
//! * [`params`], [`expect`], [`report`]: a run's inputs, its expected
//!   outcomes, and what it found;
//! * [`checker`]: the safety and liveness properties;
//! * [`spy`]: spies that report crashed nodes dead (death notices), and
//!   fail as real ones can;
//! * [`cli`]: `tenure sim`;
//! * [`compare`]: `tenure sim compare`, every protocol through every scenario;
//! * the key-value workload (`--workload kv`, scenario `kv`): a real
//!   replica (`tenure-replica`) over the real store (`tenure-kv`) beside
//!   every elector, its log on a simulated disk with torn writes
//!   ([`disk`], [`kvnode`]), clients recording a history ([`workload`]),
//!   and its checkers ([`kvcheck`], [`linearizability`]);
//! * the application elections (`--workload elect`, scenario `elect`):
//!   sessions and named elections of app clients over that store, the
//!   nodes' lease keepers, and their checkers ([`elect`]), and what
//!   became of the stale expiries ([`elect_stale`]);
//! * the groups of partitions (`--workload partitions`): members with
//!   sessions sharing the partitions of a group, the ready leader's
//!   `GroupKeeper` (`tenure-partitions`), and their checkers
//!   ([`partitions`]);
//! * the changes of members (scenario `membership`): spare nodes, a driver
//!   that adds, promotes, removes and replaces members under every fault,
//!   the electorate handed from each replica to its elector, and the
//!   checks of the configurations the logs commit ([`membership`]).
#![warn(missing_docs)]

pub mod app;
pub mod bounds;
pub mod checker;
pub mod cli;
pub mod clock;
pub mod compare;
pub mod disk;
pub mod elect;
pub mod elect_deadlines;
pub mod elect_spec;
pub mod elect_stale;
pub mod expect;
pub mod forger;
pub mod host;
pub mod hostile;
pub mod kvcheck;
pub mod kvnode;
pub mod linearizability;
pub mod membership;
pub mod network;
pub mod params;
pub mod partitions;
pub mod partitions_spec;
pub mod report;
pub mod runner;
pub mod scenario;
pub mod spy;
pub mod stats;
pub mod vopr;
pub mod workload;
