//! The callers the log task answers: each request of this node's callers
//! gets a [`CallerId`] for the router, and its reply channel waits here
//! until the router answers it.

use super::ask::AskReply;
use super::{AskError, Committed, ReadFailure, WriteError};
use std::collections::HashMap;
use tenure_replica::router::{Answer, CallerId};
use tenure_replica::Index;
use tokio::sync::oneshot;
use tracing::error;

/// Where a caller's answer goes.
pub(crate) enum Reply {
    Write(oneshot::Sender<Result<Committed, WriteError>>),
    Read(oneshot::Sender<Result<Index, ReadFailure>>),
    Ask(oneshot::Sender<Result<Vec<u8>, AskError>>),
}

/// The reply channels of the requests the router holds.
#[derive(Default)]
pub(crate) struct Replies {
    waiting: HashMap<CallerId, Reply>,
    next: CallerId,
}

impl Replies {
    /// Keeps `reply` under a fresh id.
    pub(crate) fn add(&mut self, reply: Reply) -> CallerId {
        self.next += 1;
        self.waiting.insert(self.next, reply);
        self.next
    }

    /// Sends the router's answer to its caller (one that went away is
    /// skipped). An answer of another kind than the request is a bug of
    /// the router: the caller learns the node stopped serving it.
    pub(crate) fn answer(&mut self, caller: CallerId, answer: Answer) {
        let Some(reply) = self.waiting.remove(&caller) else { return };
        match (reply, answer) {
            (Reply::Write(tx), Answer::Write(a)) => {
                let _ = tx.send(a);
            }
            (Reply::Read(tx), Answer::Read(a)) => {
                let _ = tx.send(a);
            }
            (Reply::Ask(tx), Answer::Ask(a)) => {
                let _ = tx.send(a);
            }
            // The router answers a request with its own kind: never here.
            (_, answer) => error!(?answer, "the router answered a request with another kind"),
        }
    }

    /// The reply of a question delivered to the service on this node: the
    /// service answers it.
    pub(crate) fn take_ask(&mut self, caller: CallerId) -> Option<AskReply> {
        match self.waiting.remove(&caller) {
            Some(Reply::Ask(tx)) => Some(AskReply::Local(tx)),
            Some(other) => {
                self.waiting.insert(caller, other);
                None
            }
            None => None,
        }
    }

    /// How many callers wait.
    pub(crate) fn len(&self) -> usize {
        self.waiting.len()
    }
}
