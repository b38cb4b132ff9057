//! Fuzz targets for what tenure reads from outside: the peer wire (frames,
//! the handshake, and the election messages behind it, fed to the core), the
//! state and lock files and the start decision made from them, the server's
//! config file, and the HTTP API's JSON bodies.
//!
//! Each target is a `run(&[u8])` that panics only on a bug: a panic in the
//! code under test, or a broken property the target checks. `src/bin/*` run
//! them under AFL++ (`cargo afl build --features afl`, see README.md), and
//! `tests/corpora.rs` replays every file of `corpus/<target>/` as an ordinary
//! test, so `cargo test` runs the seeds and every crash ever found.
#![warn(missing_docs)]

pub mod config_file;
pub mod http_json;
pub mod seeds;
pub mod state_file;
pub mod wire;

/// A target: runs one input, panics on a bug.
pub type Target = fn(&[u8]);

/// Every target by name; its corpus is `corpus/<name>/`.
pub const TARGETS: &[(&str, Target)] = &[
    ("wire", wire::run),
    ("state_file", state_file::run),
    ("config_file", config_file::run),
    ("http_json", http_json::run),
];
