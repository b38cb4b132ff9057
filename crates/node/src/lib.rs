//! # tenure-node: the tokio runtime for tenure (module docs to follow)

#![warn(missing_docs)]

pub mod clock;
pub mod config;
mod driver;
pub mod error;
pub mod metrics;
mod node;
pub mod status;
pub mod storage;
pub mod transport;
pub mod wire;

pub use config::{NodeConfig, NodeConfigError};
pub use driver::{PERSIST_RETRY_MAX, PERSIST_RETRY_MIN, SHUTDOWN_FLUSH_TIMEOUT};
pub use error::{StartError, TransferError};
pub use node::{start, start_with_listener, Node, NodeHandle};
pub use status::{Leadership, LeadershipEvent, NodeMetrics, NodeStatus, PeerInfo};
pub use tenure_core::{FencingToken, Lsn, NodeId, Role, Term};
