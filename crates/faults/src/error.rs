//! The library's error type.

/// What can go wrong while building or driving a test cluster.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An external command (`ip`, `nft`) failed.
    #[error("`{command}` failed: {detail}")]
    Command {
        /// The command line.
        command: String,
        /// Its stderr, or why it could not start.
        detail: String,
    },
    /// The `tenure` binary was not found.
    #[error("{0}")]
    Binary(String),
    /// A bad parameter.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// Filesystem or process I/O.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// Launching or signalling a server (tenure-launch).
    #[error(transparent)]
    Launch(#[from] tenure_launch::Error),
}

/// The library's result type.
pub type Result<T> = std::result::Result<T, Error>;
