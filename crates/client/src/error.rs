//! The errors of the client.

use hyper::StatusCode;
use std::fmt;

/// A boxed error from below (hyper, the TLS stack).
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Everything a call of this crate can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The server refused the token (401), or the call for the token's role
    /// or for a session another token owns (403). Never retried.
    #[error(transparent)]
    AuthRefused(#[from] AuthRefused),
    /// No answer came: the connection failed or the answer timed out.
    #[error(transparent)]
    NoAnswer(#[from] NoAnswer),
    /// The server answered with another error status.
    #[error(transparent)]
    Refused(#[from] Refused),
    /// A success answer whose body is not what the API documents.
    #[error("{url}: unexpected answer: {source}")]
    Decode {
        /// The URL asked.
        url: String,
        /// Why it did not decode.
        #[source]
        source: serde_json::Error,
    },
    /// An event stream broke or sent something that is not an event.
    #[error("{url}: {problem}")]
    Stream {
        /// The URL followed.
        url: String,
        /// What went wrong.
        problem: String,
    },
    /// A bad setting: an endpoint, the CA file, the token.
    #[error("{0}")]
    Config(String),
    /// A bad argument: an election name, a TTL, a value.
    #[error("{0}")]
    Invalid(String),
    /// The session ended (lost or closed) before or during the call.
    #[error("the session {id} ended: {reason}")]
    SessionEnded {
        /// The session.
        id: u64,
        /// Why.
        reason: Loss,
    },
    /// A store (etcd, ZooKeeper) failed the call; see [`crate::Store`].
    #[error(transparent)]
    Store(crate::store::StoreError),
}

impl From<crate::store::StoreError> for Error {
    /// Bad arguments and settings keep their kinds; the rest is
    /// [`Error::Store`].
    fn from(e: crate::store::StoreError) -> Self {
        use crate::store::StoreError;
        match e {
            StoreError::Invalid(m) => Error::Invalid(m),
            StoreError::Config(m) => Error::Config(m),
            e => Error::Store(e),
        }
    }
}

impl Error {
    /// [`From<StoreError>`], as a function for `map_err`.
    pub fn from_store(e: crate::store::StoreError) -> Self {
        Error::from(e)
    }

    /// The HTTP status of a [`Error::Refused`] answer.
    pub fn status(&self) -> Option<StatusCode> {
        match self {
            Error::Refused(r) => Some(r.status),
            Error::AuthRefused(a) => Some(a.status),
            _ => None,
        }
    }
}

/// The server refused the request's token (401), or the call (403): the
/// token's role is too low, or the session it names belongs to another
/// token. The message is the server's, which says which.
#[derive(Debug)]
pub struct AuthRefused {
    /// The URL asked.
    pub url: String,
    /// 401 or 403.
    pub status: StatusCode,
    /// The server's message.
    pub message: String,
    /// Whether the request carried a token.
    pub had_token: bool,
}

impl fmt::Display for AuthRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let url = &self.url;
        match (self.status, self.had_token) {
            (StatusCode::UNAUTHORIZED, false) => write!(
                f,
                "{url}: the server wants a token: pass --token or --token-file, or set TENURE_TOKEN"
            ),
            (StatusCode::UNAUTHORIZED, true) => write!(
                f,
                "{url}: the server does not accept this token (HTTP 401: {})",
                self.message
            ),
            (status, _) => write!(f, "{url}: {} (HTTP {})", self.message, status.as_u16()),
        }
    }
}

impl std::error::Error for AuthRefused {}

/// No answer came: the connection failed or the answer timed out.
#[derive(Debug, thiserror::Error)]
#[error("{url}: unreachable")]
pub struct NoAnswer {
    /// The URL asked.
    pub url: String,
    /// False if the connection failed before the request was sent (the
    /// server cannot have acted on it); true if it may have been received.
    pub sent: bool,
    /// Why.
    #[source]
    pub source: BoxError,
}

/// The server answered with an error status (other than 401 and 403).
#[derive(Debug, thiserror::Error)]
#[error("{url}: HTTP {status}: {message}")]
pub struct Refused {
    /// The URL asked.
    pub url: String,
    /// The status.
    pub status: StatusCode,
    /// The API's error message (`{"error": "..."}`), or the body as text.
    pub message: String,
    /// The whole body, for callers that read more fields of it.
    pub body: hyper::body::Bytes,
}

/// A message as an error source.
#[derive(Debug)]
pub(crate) struct Message(pub String);

impl fmt::Display for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Message {}

/// `e` and each of its sources, joined by ": ". A [`NoAnswer`] alone says
/// "unreachable"; its sources say whether the server was down, slow, or
/// answered something that is not HTTP or too long, for messages that are
/// not printed through `anyhow`'s `{:#}`.
pub fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(&format!(": {s}"));
        source = s.source();
    }
    text
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
    /// [`Session::close`] revoked it, or the session was dropped.
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
