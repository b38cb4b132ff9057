//! The `tenure` server as a library: a node of a cluster with its HTTP API,
//! started in-process with [`server::run`] on listeners the caller bound and
//! stopped by a future the caller completes.
//!
//! ```no_run
//! # async fn example(node: tenure_node::NodeConfig) -> Result<(), Box<dyn std::error::Error>> {
//! use tenure_server::http::{ApiAuth, ApiToken, Role};
//! let peers = std::net::TcpListener::bind(node.listen)?;
//! let http = std::net::TcpListener::bind("127.0.0.1:8001")?;
//! // Who may call the HTTP API; without tokens only /healthz and /v1/is-leader answer.
//! let secret = tenure_server::http::auth::read_token_file("/etc/tenure/ops.token".as_ref())?;
//! let api = ApiAuth::with_tokens(vec![ApiToken::new("ops", Role::Admin, &secret)?])?;
//! let config = tenure_server::server::ServerConfig { api, ..tenure_server::server::ServerConfig::new(node) };
//! // Runs until Ctrl-C; a leader hands over before the server stops.
//! let stop = async {
//!     let _ = tokio::signal::ctrl_c().await;
//! };
//! tenure_server::server::run(config, peers, http, stop).await?;
//! # Ok(()) }
//! ```
//!
//! The `tenure` binary adds the command line around it: settings from flags
//! and a TOML file, logging, the CLI clients, the demo, the benchmarks and the
//! simulator.
#![warn(missing_docs)]

pub mod elections;
mod etcd_auth;
pub mod groups;
pub mod http;
pub mod join;
pub mod metrics;
mod replication;
pub mod server;
pub mod sessions;
pub mod store_server;
