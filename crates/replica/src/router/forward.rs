//! The frames routers exchange over the peer connections: a request a
//! follower forwards to the leader, and the answer.

use crate::{Index, Position};
use serde::{Deserialize, Serialize};

/// A client request a follower forwards to the leader, and the answer. The
/// answer travels on the leader's own connection to the follower.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Forward {
    /// Follower -> leader: propose `command`.
    Propose {
        /// The follower's id for the request.
        id: u64,
        /// The command.
        #[serde(with = "serde_bytes")]
        command: Vec<u8>,
    },
    /// Leader -> follower: what became of a forwarded proposal.
    Proposed {
        /// The request's id.
        id: u64,
        /// Committed at a position with the state machine's result, or why not.
        result: Result<(Position, Vec<u8>), ForwardRefusal>,
    },
    /// Follower -> leader: "give me an index I may serve a linearizable read at".
    ReadIndex {
        /// The follower's id for the request.
        id: u64,
    },
    /// Leader -> follower: the read index, once the leader confirmed it leads.
    ReadIndexReply {
        /// The request's id.
        id: u64,
        /// Serve the read once the follower applied this index, or why not.
        result: Result<Index, ForwardRefusal>,
    },
    /// Follower -> leader: a question for the service that runs on the
    /// leader ([`super::Call::Ask`]); not a log
    /// entry. At most the ask size limit of the node bytes.
    Ask {
        /// The follower's id for the request.
        id: u64,
        /// The question, opaque to the node.
        #[serde(with = "serde_bytes")]
        request: Vec<u8>,
    },
    /// Leader -> follower: the service's answer to an ask, or why none.
    Answered {
        /// The request's id.
        id: u64,
        /// The answer, or why the leader did not deliver the question.
        result: Result<serde_bytes::ByteBuf, ForwardRefusal>,
    },
}

/// Why the leader did not carry out a forwarded request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ForwardRefusal {
    /// The node does not lead the log (or not yet): nothing was written, the
    /// follower may try the leader it learns of next.
    NotLeader,
    /// Too many writes wait for their commit: nothing was written.
    Busy,
    /// The command is over the size limit: nothing was written.
    TooLarge {
        /// Its size.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// The entry was written, but leadership was lost (or the log could not
    /// be written) before it committed: its outcome is unknown.
    Unknown,
    /// An ask reached a leader where no service takes asks (or it stopped,
    /// or dropped the question unanswered).
    NoService,
}
