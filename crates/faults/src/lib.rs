//! Fault tests of real `tenure server` processes, each in its own network
//! namespace joined to a bridge: SIGKILL/restart, SIGSTOP/SIGCONT, link
//! cuts (both ways or one way), isolation, random loss (nftables rules
//! inside the namespaces), healing — checked from outside through every
//! node's `/v1/status` and `/v1/watch` while they run.
//!
//! Needs root, `ip netns` and `nft`; otherwise [`skip::require_netns`]
//! says why and the tests skip visibly.
#![warn(missing_docs)]

pub mod app_backend;
pub mod app_elections;
pub mod checker;
pub mod cluster;
pub mod error;
pub mod firewall;
pub mod kv;
pub mod kv_scenarios;
pub mod membership;
pub mod net;
pub mod partitions;
pub mod random;
pub mod scenarios;
pub mod skip;
pub mod spy_scenarios;
pub mod stores;

pub use error::{Error, Result};
