//! Client of tenure's HTTP API for applications that elect a leader among
//! their own processes.
//!
//! * [`Client`]: JSON over HTTP(S) (rustls, trusting only the cluster's
//!   CA), bearer tokens, Server-Sent Events; [`Cluster`]: a client and the
//!   nodes' endpoints, trying the next endpoint when one does not answer.
//! * [`TenureStore`]: tenure's named elections as a [`Store`] of the
//!   election layer (`tenure-elect`, re-exported here: [`Session`],
//!   [`Election`], [`LeaderElector`], [`LeaderLatch`]), plus what only
//!   tenure has: proclaim, the whole queue, an [`Observer`] that resumes
//!   across nodes.
//! * [`members`]: the cluster's members, and changes of them sent to the
//!   leader.
//! * [`partitions`]: a member of a group of partitions
//!   ([`partitions::PartitionMember`]): the partitions the leader assigns
//!   it, each with its epoch and a cancellation token.
//!
//! ```no_run
//! # async fn example() -> Result<(), tenure_client::Error> {
//! use std::sync::Arc;
//! use std::time::Duration;
//! use tenure_client::{parse_endpoints, Client, ClientOptions, Cluster, Election, Session, TenureStore};
//! let client = Client::new(ClientOptions { cacert: None, token: Some("0123456789abcdef") })?;
//! let endpoints = parse_endpoints("127.0.0.1:8001,127.0.0.1:8002", client.https())?;
//! let store = TenureStore::shared(Arc::new(Cluster::new(client, endpoints)?));
//! let session = Session::start(store.clone(), Duration::from_secs(10)).await?;
//! let election = Election::new(store, "scheduler")?;
//! let candidacy = election.campaign(&session, "host-a").await?;
//! let token = election.wait_until_leader(&session, &candidacy).await?;
//! tokio::select! {
//!     loss = session.lost() => eprintln!("lost leadership: {loss}"),
//!     _ = async { /* work, fenced with `token` */ } => {}
//! }
//! election.resign(&candidacy).await?;
//! session.close().await?;
//! # let _ = token; Ok(()) }
//! ```
#![warn(missing_docs)]

pub mod cluster;
pub mod error;
pub mod http;
pub mod members;
pub mod observer;
pub mod partitions;
pub mod tenure_store;

/// The environment variable tenure's command-line clients (and the
/// processes `tenure bench` starts) read their API token from.
pub const TOKEN_ENV: &str = "TENURE_TOKEN";
/// The environment variable that names the CA certificate of the servers'
/// HTTPS for tenure's command-line clients (`--cacert`).
pub const CACERT_ENV: &str = "TENURE_CACERT";

pub use cluster::Cluster;
pub use error::{AuthRefused, Error, NoAnswer, Refused};
pub use http::{parse_endpoints, Client, ClientOptions, EventStream, RawAnswer, SseEvent};
pub use observer::Observer;
/// The election layer this client is a store of: sessions, the election
/// recipe, `LeaderElector`, `LeaderLatch`, the `Store` trait; re-exported
/// so that an application depends on this crate alone.
pub use tenure_elect::{
    self as elect, election, failover, session, store, CancellationToken, Candidacy, Check,
    Election, Ended, Leader, LeaderElector, LeaderLatch, Leading, Loss, Observed, Renewal, Retry,
    Session, SessionId, SessionWatch, Store, StoreError, StoreKind, Waited,
};
pub use tenure_store::{Campaign, Candidate, ElectionState, TenureStore};
