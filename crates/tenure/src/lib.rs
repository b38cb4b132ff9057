//! The settings of the `tenure` binary, as a library: `tenure server`'s flags
//! and TOML config file resolved into a node's settings ([`config`]), the
//! API tokens of the server and of the CLI clients ([`tokens`]), and the log
//! output ([`logging`]).
//!
//! The binary (`src/main.rs`) is the rest of the command line; the server it
//! runs is the `tenure-server` crate. This library exists so that the fuzz
//! targets parse config files with the code the binary runs.
#![warn(missing_docs)]

pub mod config;
pub mod logging;
pub mod tokens;
