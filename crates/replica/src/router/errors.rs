//! What a caller of the router gets when its request did not (or may not
//! have) succeeded, and a committed write.

use super::ForwardRefusal;
use crate::Position;
use std::time::Duration;
use tenure_core::FencingToken;

/// A committed write: where its entry is in the log, and what the state
/// machine answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Committed {
    /// The entry's position; its token is the fencing token of the
    /// leadership that wrote it.
    pub position: Position,
    /// The state machine's result for the command.
    pub result: Vec<u8>,
}

impl Committed {
    /// The fencing token of the leadership that committed the write.
    pub fn fencing_token(&self) -> FencingToken {
        self.position.token
    }
}

/// Why a write did not commit, or may not have.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WriteError {
    /// No leader was known for the whole wait: nothing was written.
    #[error("no leader was known for {}ms (an election is under way or a majority is unreachable); nothing was written, retry", .waited.as_millis())]
    NoLeader {
        /// How long the request waited.
        waited: Duration,
    },
    /// The entry was sent, but its leader lost office (or could not write
    /// its log, or did not answer within [`super::REQUEST_TIMEOUT`]) before it
    /// committed. A later leader may still commit it.
    #[error("the outcome is unknown: {0}; the write may or may not have been applied (read the key to find out)")]
    Unknown(&'static str),
    /// The command is over the size limit: nothing was written.
    #[error("the command has {size} bytes; at most {max} are accepted")]
    TooLarge {
        /// Its size.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// Too many writes wait for their commit, or too many requests for a
    /// leader: nothing was written.
    #[error("too many writes in flight; nothing was written, retry shortly")]
    Busy,
    /// The node is stopping; nothing was written by this request.
    #[error("the node is stopping")]
    Stopped,
    /// a leader-bound proposal ([`super::Call::ProposeAs`]): this node is not the ready leader of the
    /// token asked for; nothing was written.
    #[error(
        "this node is not the ready leader of the fencing token asked for; nothing was written"
    )]
    NotLeader,
}

/// Why a linearizable read could not be served.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReadFailure {
    /// No leader was known for the whole wait.
    #[error("no leader was known for {}ms (an election is under way or a majority is unreachable); retry", .waited.as_millis())]
    NoLeader {
        /// How long the request waited.
        waited: Duration,
    },
    /// The leader did not confirm, or this node did not apply as far, within
    /// [`super::REQUEST_TIMEOUT`].
    #[error("no confirmed read index within {}ms", .0.as_millis())]
    Timeout(Duration),
    /// Too many requests wait: retry shortly.
    #[error("too many requests waiting; retry shortly")]
    Busy,
    /// The node is stopping.
    #[error("the node is stopping")]
    Stopped,
    /// A leadership check ([`super::Call::Confirm`]): this node is not (or no longer) the
    /// ready leader of the token asked for.
    #[error("this node is not the ready leader of the fencing token asked for")]
    NotLeader,
}

/// Why an ask got no answer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AskError {
    /// No leader was known for the whole wait: the question was not asked.
    #[error("no leader was known for {}ms (an election is under way or a majority is unreachable); retry", .waited.as_millis())]
    NoLeader {
        /// How long the request waited.
        waited: Duration,
    },
    /// The question (or its answer) is over the ask size limit.
    #[error("the ask has {size} bytes; at most {max} are accepted")]
    TooLarge {
        /// Its size.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// Too many asks wait on the leader (or on this node): retry shortly.
    #[error("too many requests waiting for the leader's service; retry shortly")]
    Busy,
    /// The leader runs no service for asks, or it dropped the question
    /// unanswered.
    #[error("the leader's service did not answer (not running, or it dropped the question)")]
    NoService,
    /// The leader did not answer within the request timeout.
    #[error("the leader did not answer within {}ms", .0.as_millis())]
    Timeout(Duration),
    /// The node is stopping.
    #[error("the node is stopping")]
    Stopped,
}

impl AskError {
    /// What a follower's asker gets for the leader's refusal.
    pub fn from_refusal(refusal: ForwardRefusal) -> AskError {
        match refusal {
            ForwardRefusal::Busy => AskError::Busy,
            ForwardRefusal::TooLarge { size, max } => AskError::TooLarge { size, max },
            // The leader refuses with `NotLeader` only before delivering;
            // the log task asks again instead of answering with it.
            ForwardRefusal::NotLeader | ForwardRefusal::Unknown | ForwardRefusal::NoService => {
                AskError::NoService
            }
        }
    }
}
