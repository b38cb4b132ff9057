//! # tenure-node: the tokio runtime for tenure (module docs to follow)

#![warn(missing_docs)]

pub mod config;
pub mod error;
pub mod node;
pub mod status;

pub use config::{NodeConfig, NodeConfigError};
pub use error::{StartError, TransferError};
pub use node::{start, start_with_listener, Node, NodeHandle};
pub use status::{Leadership, LeadershipEvent, NodeMetrics, NodeStatus, PeerInfo};
pub use tenure_core::{FencingToken, Lsn, NodeId, Role, Term};
