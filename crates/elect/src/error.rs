//! What the election layer fails with, and why a session ends.

pub use crate::store::BoxError;
use crate::store::StoreError;
use std::fmt;

/// Everything a session, an election or an elector can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A bad argument: an election name, a TTL, a value, a candidacy of
    /// another session.
    #[error("{0}")]
    Invalid(String),
    /// A bad setting of the store (an endpoint, credentials).
    #[error("{0}")]
    Config(String),
    /// The session ended (lost or closed) before or during the call.
    #[error("the session {id} ended: {reason}")]
    SessionEnded {
        /// The session.
        id: u64,
        /// Why.
        reason: Loss,
    },
    /// The store failed the call.
    #[error(transparent)]
    Store(StoreError),
}

impl From<StoreError> for Error {
    /// Bad arguments and settings keep their kinds; the rest is
    /// [`Error::Store`].
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Invalid(m) => Error::Invalid(m),
            StoreError::Config(m) => Error::Config(m),
            e => Error::Store(e),
        }
    }
}

impl From<Error> for StoreError {
    /// What a store implementation returns when a check of this crate
    /// (a name, a value, a TTL) refused its arguments.
    fn from(e: Error) -> Self {
        match e {
            Error::Invalid(m) => StoreError::Invalid(m),
            Error::Config(m) => StoreError::Config(m),
            e @ Error::SessionEnded { .. } => StoreError::Gone(e.to_string()),
            Error::Store(e) => e,
        }
    }
}

/// Why a session ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loss {
    /// No renewal succeeded before the deadline: the servers may end the
    /// session at any moment from now on.
    DeadlinePassed,
    /// The servers said the session does not exist (it expired there, or
    /// was revoked).
    Gone,
    /// [`crate::Session::close`] revoked it, or the session was dropped.
    Closed,
    /// The store's own signal said it can no longer be trusted
    /// ([`crate::Store::suspended`]: ZooKeeper's connection was lost).
    Suspended,
}

impl fmt::Display for Loss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Loss::DeadlinePassed => "no renewal succeeded before the session's deadline",
            Loss::Gone => "the cluster says the session no longer exists",
            Loss::Closed => "the session was closed",
            Loss::Suspended => "the store suspended the session (its connection was lost)",
        })
    }
}
