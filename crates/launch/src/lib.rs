//! Local `tenure server` processes, launched one way for everyone who needs
//! them: `tenure demo`, `tenure bench`, the process tests and the network
//! fault tests.
//!
//! - [`proc`]: one child process with its log file, killed and reaped on
//!   drop; free loopback ports; temporary directories;
//! - [`server`]: the command line of one `tenure server` ([`ServerArgs`]);
//! - [`tokens`]: API token files and the config file that names them;
//! - [`certs`]: a cluster's CA and node certificates, made by `tenure cert`;
//! - [`cluster`]: a [`LocalCluster`] of servers on loopback, built from the
//!   above.
//!
//! Whatever this crate starts, it stops: a [`Proc`] kills its child when
//! dropped (also when a test panics), and a [`LocalCluster`] removes its
//! directory after its servers are dead.
#![warn(missing_docs)]

pub mod certs;
pub mod cluster;
pub mod error;
pub mod proc;
pub mod server;
pub mod tokens;

pub use certs::make_certs;
pub use cluster::{poll, LocalCluster, Settings};
pub use error::Error;
pub use proc::{free_ports, temp_dir, Proc, LOG_TAIL_LINES};
pub use server::{address_list, ServerArgs, Tls};
pub use tokens::{random_secret, write_api_config, ApiToken};
