//! Elections for applications, on any store that holds them: tenure's own
//! cluster (`tenure_client::TenureStore`), etcd (`tenure-store-etcd`) or
//! ZooKeeper (`tenure-store-zk`). No HTTP here: a store is a [`Store`].
//!
//! * [`Store`]: the primitives an election needs from a store, each one
//!   request or one bounded wait (layer 1 of docs/STORES.md).
//! * [`Session`]: a lease with a TTL, renewed every TTL/3, with a local
//!   *deadline* (last successful renewal's send time + TTL shrunk by the
//!   clock-drift bound, [`session::deadline_after`]) before which no
//!   successor can be granted anything the session held.
//! * [`Election`]: campaign, wait to lead (raced against the session's
//!   loss), resign, check a fencing token, observe every change: the one
//!   election API, whichever the store (layer 2).
//! * [`LeaderElector`] (callbacks with a leading context cancelled at the
//!   deadline at the latest, like client-go's `leaderelection`) and
//!   [`LeaderLatch`] (`has_leadership`, `await_leadership`, like Curator's).
//! * [`failover`]: whether a session's TTL rides out one failover of the
//!   cluster behind the store.

#![warn(missing_docs)]

pub mod deadline;
pub mod election;
pub mod elector;
pub mod error;
pub mod failover;
pub mod session;
pub mod store;

pub use election::{Check, Election, Leader, Observed};
pub use elector::{Ended, LeaderElector, LeaderLatch, Leading};
pub use error::{BoxError, Error, Loss};
pub use session::{Session, SessionWatch};
pub use store::{Candidacy, Renewal, Retry, SessionId, Store, StoreError, StoreKind, Waited};
/// The leading context's type (tokio-util's), re-exported so that callers
/// need not depend on the same tokio-util version.
pub use tokio_util::sync::CancellationToken;
