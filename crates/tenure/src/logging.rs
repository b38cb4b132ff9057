//! Log output for the server: readable text by default, JSON lines for machines.

use clap::ValueEnum;
use serde::Deserialize;
use std::io::IsTerminal;
use tracing_subscriber::EnvFilter;

/// How log lines are written to standard error.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// One human-readable line per event.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// The filter without `RUST_LOG`: info, but for rustls's warning that a
/// client sent an IP address as the TLS server name (which TLS forbids):
/// gRPC's C core (python-etcd3, grpc-java's netty on some versions) does it
/// on every connection to an address, rustls ignores the name, and a line
/// per connection buried the node's own.
pub const DEFAULT_FILTER: &str = "info,rustls::msgs::handshake=error";

/// Installs the global subscriber. `RUST_LOG` overrides the default filter
/// ([`DEFAULT_FILTER`]).
pub fn init(format: LogFormat) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // A log line that cannot be written (a full disk under a redirected
        // stderr, a file size limit) is dropped. By default the subscriber
        // reports it with `eprintln!`, which panics when stderr fails: the
        // task that logged (the replicated log's, reporting that very
        // failure) died, and the node stopped serving.
        .log_internal_errors(false)
        // Colours only for people at a terminal, not in log files.
        .with_ansi(std::io::stderr().is_terminal());
    // `try_init` so that a second call (never expected) is not a panic.
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}
