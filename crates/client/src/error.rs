//! The errors of the client.

use hyper::StatusCode;
use std::fmt;
pub use tenure_elect::BoxError;
use tenure_elect::{Loss, StoreError};

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
    Store(StoreError),
}

impl From<tenure_elect::Error> for Error {
    /// The election layer's errors, of the same kinds.
    fn from(e: tenure_elect::Error) -> Self {
        match e {
            tenure_elect::Error::Invalid(m) => Error::Invalid(m),
            tenure_elect::Error::Config(m) => Error::Config(m),
            tenure_elect::Error::SessionEnded { id, reason } => Error::SessionEnded { id, reason },
            tenure_elect::Error::Store(e) => Error::Store(e),
        }
    }
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

impl Error {
    /// [`From<StoreError>`], as a function for `map_err`.
    pub fn from_store(e: StoreError) -> Self {
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

impl NoAnswer {
    /// True if asking again cannot help: the endpoint's TLS does not fit
    /// this client's (a certificate of another CA than the client trusts,
    /// for another host name, or expired), or the endpoint is a node's
    /// peer port or etcd listener, not its API port. The source says which,
    /// and what to do.
    pub fn is_misconfigured(&self) -> bool {
        self.source.downcast_ref::<Misconfigured>().is_some()
    }
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
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Message(pub String);

/// Why a connection cannot succeed however often it is tried, said with
/// what to do ([`NoAnswer::is_misconfigured`]).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Misconfigured(pub String);

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
