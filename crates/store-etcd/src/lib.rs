//! Elections held in etcd (v3 API, 3.4 or later) behind tenure-elect's
//! [`Store`](tenure_elect::Store) trait (docs/STORES.md §2.2).
//!
//! * A session is an etcd lease: [`EtcdStore`] grants it with the TTL
//!   rounded up to whole seconds (etcd raises it to its own minimum:
//!   the answer's TTL is the one reported), and renews it with one request
//!   of its own on a `LeaseKeepAlive` stream kept open per session, so the
//!   send time of every renewal is known.
//! * A candidacy is the key `<prefix>/<election>/<lease id as 16 hex
//!   digits>`, put with the lease by one transaction that creates it only
//!   if it does not exist (a retried campaign finds its own key: no second
//!   key). Its fencing token is its creation revision; the first-created
//!   key of the election leads.
//! * A wait watches the immediate predecessor and its own key only, and
//!   answers `Leads` only after one transaction of reads proved that its
//!   key still exists with its token and lease and that no key was created
//!   before it. Its own key's deletion ends the wait with
//!   [`StoreError::Gone`](tenure_elect::StoreError::Gone): never the
//!   phantom leadership of etcd-io/etcd#19597 (etcd's own election service
//!   is never used). A read or a watch that no member answers in time
//!   (the raft leader stopped, the others electing) is tried again, every
//!   50 ms, until the wait's own timeout; past it the read's error is
//!   returned.
//! * `check` is one linearizable range read of the election's
//!   first-created key: every field of [`tenure_elect::Check`] is filled
//!   (`current`, the leader's `token`, the `revision` read at).
//! * `observe` reads the election's keys at one revision (the first
//!   observation carries that revision), then follows a watch on its
//!   prefix: each later observation carries the revision of the change.
//!   Only changes of the leader or of its value are reported; a watch the
//!   cluster can no longer resume (compacted) gives
//!   [`Observed::Missed`](tenure_elect::Observed::Missed), then the state.
//!   The session of a leader is its key's lease (0 for a key without one).
//! * Each endpoint has its own client; calls go to the endpoint that
//!   answered last and move on after an error or a timeout, each bounded
//!   by [`EtcdOptions::request_timeout`]. Only idempotent calls are sent
//!   again after they may have arrived.
//!
//! ```no_run
//! # async fn example() -> Result<(), tenure_elect::StoreError> {
//! use std::time::Duration;
//! use tenure_elect::{Store, Waited};
//! use tenure_store_etcd::{EtcdOptions, EtcdStore};
//! let store = EtcdStore::from_url("etcd://10.0.0.1:2379,10.0.0.2:2379", EtcdOptions::default())?;
//! let session = store.grant(Duration::from_secs(5)).await?;
//! let candidacy = store.campaign(session.session, "scheduler", "host-a").await?;
//! if let Waited::Leads { token } = store.wait(&candidacy, Duration::from_secs(30)).await? {
//!     // lead, fenced with `token`, until the session's deadline
//!     # let _ = token;
//! }
//! store.resign(&candidacy).await?;
//! store.revoke(session.session).await?;
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

mod config;
mod conn;
mod error;
mod inner;
mod keepalive;
mod observe;
mod store;
mod wait;
mod watch;

pub use config::{
    check_endpoints, check_prefix, parse_url, EtcdOptions, DEFAULT_PREFIX, MAX_ENDPOINTS,
    PROBE_AFTER, REQUEST_TIMEOUT, URL_SCHEME,
};
pub use keepalive::MAX_KEEPALIVE_STREAMS;
pub use observe::MAX_OBSERVED_KEYS;
pub use store::EtcdStore;
pub use wait::MAX_AHEAD_COUNTED;
