//! The launcher's errors.

use std::path::PathBuf;

/// What can go wrong while launching or driving local servers.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file or directory could not be made, opened or written.
    #[error("{what} {}: {source}", path.display())]
    File {
        /// What was being done ("cannot write").
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// Another operating-system call failed (ports, temporary directories, waits).
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The cause.
        source: std::io::Error,
    },
    /// A process could not be started.
    #[error("cannot start {name}: {source}")]
    Spawn {
        /// The process's name ("node 2").
        name: String,
        /// The cause.
        source: std::io::Error,
    },
    /// A signal could not be sent.
    #[error("cannot send {signal} to {name}: {source}")]
    Signal {
        /// The process's name.
        name: String,
        /// The signal.
        signal: nix::sys::signal::Signal,
        /// The cause.
        source: nix::errno::Errno,
    },
    /// The process is not running (never started, or already reaped).
    #[error("{0} is not running")]
    NotRunning(String),
    /// The process already runs in that slot.
    #[error("{0} is already running")]
    AlreadyRunning(String),
    /// The process did not exit in time.
    #[error("{name} did not exit within {timeout:?}")]
    Timeout {
        /// The process's name.
        name: String,
        /// How long it was given.
        timeout: std::time::Duration,
    },
    /// A command the launcher runs (`tenure cert`) failed.
    #[error("{command} failed: {output}")]
    Command {
        /// The command line.
        command: String,
        /// What it printed.
        output: String,
    },
    /// The API client could not be made.
    #[error(transparent)]
    Client(#[from] tenure_client::Error),
}

impl Error {
    /// An [`Error::Io`] about `what`.
    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
        let what = what.into();
        move |source| Error::Io { what, source }
    }

    /// An [`Error::File`]: `what` failed on `path`.
    pub(crate) fn file(
        what: &'static str,
        path: &std::path::Path,
    ) -> impl FnOnce(std::io::Error) -> Error {
        let path = path.to_path_buf();
        move |source| Error::File { what, path, source }
    }
}
