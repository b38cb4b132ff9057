//! Client of tenure's HTTP API for applications that elect a leader among
//! their own processes.
//!
//! * [`Client`]: JSON over HTTP(S) (rustls, trusting only the cluster's
//!   CA), bearer tokens, Server-Sent Events; [`Cluster`]: a client and the
//!   nodes' endpoints, trying the next endpoint when one does not answer.
//! * [`Session`]: a lease with a TTL, renewed every TTL/3, with a local
//!   *deadline* (last successful renewal's send time + TTL shrunk by the
//!   clock-drift bound, [`session::deadline_after`]) before which no
//!   successor can be granted anything the session held.
//! * [`Election`]: campaign, wait to lead, resign, proclaim, the leader,
//!   observe every change (including "no leader"), check a fencing token.
//! * [`LeaderElector`] (callbacks with a leading context cancelled at the
//!   deadline at the latest, like client-go's `leaderelection`) and
//!   [`LeaderLatch`] (`has_leadership`, `await_leadership`, like Curator's).
//! * [`Store`]: the primitives an election needs from a store (tenure,
//!   and later etcd and ZooKeeper: docs/STORES.md), with [`TenureStore`].
//!
//! ```no_run
//! # async fn example() -> Result<(), tenure_client::Error> {
//! use std::sync::Arc;
//! use std::time::Duration;
//! use tenure_client::{parse_endpoints, Client, ClientOptions, Cluster, Election, Session};
//! let client = Client::new(ClientOptions { cacert: None, token: Some("0123456789abcdef") })?;
//! let endpoints = parse_endpoints("127.0.0.1:8001,127.0.0.1:8002", client.https())?;
//! let cluster = Arc::new(Cluster::new(client, endpoints)?);
//! let session = Session::grant(cluster.clone(), Duration::from_secs(10)).await?;
//! let election = Election::new(cluster, "scheduler")?;
//! election.campaign(&session, "host-a").await?;
//! let token = election.wait_until_leader(&session).await?;
//! tokio::select! {
//!     loss = session.lost() => eprintln!("lost leadership: {loss}"),
//!     _ = async { /* work, fenced with `token` */ } => {}
//! }
//! election.resign(&session).await?;
//! session.close().await?;
//! # let _ = token; Ok(()) }
//! ```
#![warn(missing_docs)]

pub mod cluster;
pub mod election;
pub mod elector;
pub mod error;
pub mod failover;
pub mod http;
pub mod session;
pub mod store;
pub mod store_election;

pub use cluster::{Cluster, Retry};
pub use election::{Campaign, Check, Election, ElectionState, Leader, Observed, Observer};
pub use elector::{Ended, LeaderElector, LeaderLatch, Leading};
pub use error::{AuthRefused, Error, NoAnswer, Refused};
pub use http::{parse_endpoints, Client, ClientOptions, EventStream, RawAnswer, SseEvent};
pub use session::{Loss, Session, SessionWatch};
pub use store::{Candidacy, Renewal, SessionId, Store, StoreError, StoreKind, TenureStore, Waited};
pub use store_election::StoreElection;
/// The leading context's type (tokio-util's), re-exported so that callers
/// need not depend on the same tokio-util version.
pub use tokio_util::sync::CancellationToken;
