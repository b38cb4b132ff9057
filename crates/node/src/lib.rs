//! # tenure-node: the tokio runtime for tenure
//!
//! This crate turns the sans-IO election core ([`tenure_core::Elector`]: the
//! protocol chosen by [`NodeConfig::protocol`])
//! into a running node: it reads the clock, owns the sockets, persists the
//! durable state, and offers an embedding API ([`start`], [`Node`],
//! [`NodeHandle`]) to applications and to the `tenure` server.
//!
//! ```no_run
//! # async fn demo(config: tenure_node::NodeConfig) -> Result<(), tenure_node::StartError> {
//! let node = tenure_node::start(config).await?;
//! let handle = node.handle();
//! let mut events = handle.events();
//! while let Ok(event) = events.recv().await {
//!     if let tenure_node::LeadershipEvent::BecameLeader { fencing_token, .. } = event {
//!         // Lead; check `handle.is_leader()` before each action and tag
//!         // writes with `fencing_token`.
//! #       let _ = fencing_token; break;
//!     }
//! }
//! node.shutdown().await; // cedes leadership first if leading
//! # Ok(()) }
//! ```
//!
//! ## Inside
//!
//! How the node works is described once, in `docs/ARCHITECTURE.md`: its
//! tasks (the driver, the only code that feeds the core; the [`transport`];
//! the [`replicated`] log's task, with [`start_replicated`]), the path of a
//! message from socket to core and back (handshake checks, [`wire`] frames,
//! persist before send, bounded send queues), and graceful shutdown
//! ([`Node::shutdown`]: a leader hands over first, within
//! [`SHUTDOWN_FLUSH_TIMEOUT`]).
//!
//! ## Durability contract
//!
//! The data directory holds `state` (term, vote, cluster id, node id,
//! protocol; see [`storage`]), `lock` (held with `flock` for the node's life,
//! with the record of the newest state the node acted on), `incarnation`
//! ([`storage::incarnation`], [`spy`]) and, with [`start_replicated`], `log`.
//! Every state change is made durable before any message produced with it
//! is sent; a failed write stops voting and leading and is retried from
//! [`PERSIST_RETRY_MIN`] to [`PERSIST_RETRY_MAX`]. A start that could make
//! the node vote twice in a term is refused with a [`StartError`] naming the
//! file and the way out ([`reset_state`]). The full contract, with what the
//! node can and cannot detect and why the reset is safe, is the section
//! "Durability contract" of `docs/ARCHITECTURE.md`.

#![warn(missing_docs)]

pub mod clock;
pub mod config;
mod driver;
pub mod error;
pub mod log_store;
pub mod metrics;
mod node;
pub mod ratelog;
pub mod replicated;
mod shared;
pub mod spy;
pub mod status;
pub mod storage;
mod sync;
pub mod timeline;
pub mod tls;
pub mod transport;
pub mod wire;

pub use config::{NodeConfig, NodeConfigError};
pub use driver::{PERSIST_RETRY_MAX, PERSIST_RETRY_MIN, SHUTDOWN_FLUSH_TIMEOUT};
pub use error::{Recovery, StartError, TransferError};
pub use node::{reset_state, start, start_with_listener, Node, NodeHandle};
pub use ratelog::RateLimitedLog;
pub use replicated::{
    start_replicated, ChangeFailure, Committed, ReadFailure, Replicated, WriteError,
};
pub use spy::{NoticeError, NoticeOutcome};
pub use status::{DriverLagStats, Leadership, LeadershipEvent, NodeMetrics, NodeStatus, PeerInfo};
pub use storage::ResetOutcome;
pub use tenure_core::{FencingToken, Lsn, NodeId, ProtocolKind, Role, Term};
pub use tls::{Security, TlsFiles};
