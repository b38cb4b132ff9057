//! The requests the log task holds, each with when it began: proposals and
//! reads this node accepted as leader (its own, or a follower's), requests
//! waiting for a leader, requests forwarded to the leader, and reads waiting
//! until this node applied as far as their index.

use super::ask::AskError;
use super::{Committed, ReadFailure, WriteError, REQUEST_TIMEOUT};
use std::collections::{HashMap, VecDeque};
use std::time::Duration;
use tenure_core::{FencingToken, NodeId};
use tenure_replica::{Index, ProposalId, ReadId};
use tokio::sync::oneshot;
use tokio::time::Instant;

/// Most requests the log task holds at once (all kinds together); more are
/// refused as busy.
pub const MAX_WAITING: usize = 16 * 1024;

/// Where a write's outcome goes.
pub(crate) type WriteReply = oneshot::Sender<Result<Committed, WriteError>>;
/// Where a read index goes.
pub(crate) type ReadReply = oneshot::Sender<Result<Index, ReadFailure>>;
/// Where the answer to an ask of this node's caller goes.
pub(crate) type AskAnswer = oneshot::Sender<Result<Vec<u8>, AskError>>;

/// Who asked: a caller on this node, a caller on this node that only the
/// leadership of one token may serve (never forwarded nor held for another
/// leader: refused as not leader instead), or a follower (its id for the
/// request).
pub(crate) enum Asker<R> {
    Local(R),
    Bound(R, FencingToken),
    Peer(NodeId, u64),
}

impl<R> Asker<R> {
    /// The reply of a caller on this node.
    pub(crate) fn into_reply(self) -> Option<R> {
        match self {
            Asker::Local(r) | Asker::Bound(r, _) => Some(r),
            Asker::Peer(..) => None,
        }
    }
}

/// A request of this node's callers, not yet proposed or forwarded.
pub(crate) enum Parked {
    Propose { command: Vec<u8>, reply: WriteReply },
    Read { reply: ReadReply },
    Ask { request: Vec<u8>, reply: AskAnswer },
}

/// A request forwarded to the leader, waiting for its answer.
pub(crate) enum Forwarded {
    /// The command is kept: a leader that refuses it wrote nothing, and it
    /// is sent again to the next.
    Propose(WriteReply, Vec<u8>),
    Read(ReadReply),
    /// The question is kept: a leader that refuses it did not deliver it.
    Ask(AskAnswer, Vec<u8>),
}

/// Everything the log task holds.
#[derive(Default)]
pub(crate) struct Waiters {
    /// Accepted as leader, waiting for the commit.
    pub(crate) proposals: HashMap<ProposalId, (Asker<WriteReply>, Instant)>,
    /// Accepted as leader, waiting for a confirmation round.
    pub(crate) reads: HashMap<ReadId, (Asker<ReadReply>, Instant)>,
    /// Waiting for a leader: (request, began, not to be retried before).
    pub(crate) parked: VecDeque<(Parked, Instant, Instant)>,
    /// Sent to the leader: by id, (the leader, the request, began).
    pub(crate) forwarded: HashMap<u64, (NodeId, Forwarded, Instant)>,
    /// Reads with a confirmed index, waiting for this node to apply it.
    pub(crate) applying: Vec<(Index, ReadReply, Instant)>,
    next_id: u64,
}

impl Waiters {
    /// How many requests are held.
    pub(crate) fn len(&self) -> usize {
        self.proposals.len()
            + self.reads.len()
            + self.parked.len()
            + self.forwarded.len()
            + self.applying.len()
    }

    /// True when nothing is held.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A fresh id for a forwarded request.
    pub(crate) fn next_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// Ends what waited too long: parked requests after `no_leader_wait`,
    /// the rest after [`REQUEST_TIMEOUT`]. Followers' requests are dropped
    /// silently: the follower times them out on its side.
    pub(crate) fn expire(&mut self, now: Instant, no_leader_wait: Duration) {
        let late = |since: Instant, bound: Duration| now.saturating_duration_since(since) >= bound;
        for (_, (asker, _)) in self.proposals.extract_if(|_, (_, s)| late(*s, REQUEST_TIMEOUT)) {
            if let Some(reply) = asker.into_reply() {
                let _ =
                    reply.send(Err(WriteError::Unknown("no commit within the request timeout")));
            }
        }
        for (_, (asker, _)) in self.reads.extract_if(|_, (_, s)| late(*s, REQUEST_TIMEOUT)) {
            if let Some(reply) = asker.into_reply() {
                let _ = reply.send(Err(ReadFailure::Timeout(REQUEST_TIMEOUT)));
            }
        }
        let (keep, gone): (VecDeque<_>, VecDeque<_>) = std::mem::take(&mut self.parked)
            .into_iter()
            .partition(|(_, s, _)| !late(*s, no_leader_wait));
        self.parked = keep;
        for (p, since, _) in gone {
            let waited = now.saturating_duration_since(since);
            match p {
                Parked::Propose { reply, .. } => {
                    let _ = reply.send(Err(WriteError::NoLeader { waited }));
                }
                Parked::Read { reply } => {
                    let _ = reply.send(Err(ReadFailure::NoLeader { waited }));
                }
                Parked::Ask { reply, .. } => {
                    let _ = reply.send(Err(AskError::NoLeader { waited }));
                }
            }
        }
        for (_, (_, f, _)) in self.forwarded.extract_if(|_, (_, _, s)| late(*s, REQUEST_TIMEOUT)) {
            match f {
                Forwarded::Propose(reply, _) => {
                    let _ =
                        reply.send(Err(WriteError::Unknown("the leader did not answer in time")));
                }
                Forwarded::Read(reply) => {
                    let _ = reply.send(Err(ReadFailure::Timeout(REQUEST_TIMEOUT)));
                }
                Forwarded::Ask(reply, _) => {
                    let _ = reply.send(Err(AskError::Timeout(REQUEST_TIMEOUT)));
                }
            }
        }
        for (_, reply, _) in self.applying.extract_if(.., |(_, _, s)| late(*s, REQUEST_TIMEOUT)) {
            let _ = reply.send(Err(ReadFailure::Timeout(REQUEST_TIMEOUT)));
        }
    }

    /// Answers the reads whose index is applied.
    pub(crate) fn applied(&mut self, applied: Index) {
        if self.applying.iter().all(|(i, _, _)| *i > applied) {
            return;
        }
        let (done, keep): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.applying).into_iter().partition(|(i, _, _)| *i <= applied);
        self.applying = keep;
        for (index, reply, _) in done {
            let _ = reply.send(Ok(index));
        }
    }

    /// Ends everything: the node stops. A write that may have been written
    /// ends unknown; the rest were never written and end stopped.
    pub(crate) fn stop(&mut self) {
        for (_, (asker, _)) in self.proposals.drain() {
            if let Some(reply) = asker.into_reply() {
                let _ = reply.send(Err(WriteError::Unknown("the node stopped before the commit")));
            }
        }
        for (_, (asker, _)) in self.reads.drain() {
            if let Some(reply) = asker.into_reply() {
                let _ = reply.send(Err(ReadFailure::Stopped));
            }
        }
        for (p, _, _) in self.parked.drain(..) {
            match p {
                Parked::Propose { reply, .. } => {
                    let _ = reply.send(Err(WriteError::Stopped));
                }
                Parked::Read { reply } => {
                    let _ = reply.send(Err(ReadFailure::Stopped));
                }
                Parked::Ask { reply, .. } => {
                    let _ = reply.send(Err(AskError::Stopped));
                }
            }
        }
        for (_, (_, f, _)) in self.forwarded.drain() {
            match f {
                Forwarded::Propose(reply, _) => {
                    let _ =
                        reply.send(Err(WriteError::Unknown("the node stopped before the answer")));
                }
                Forwarded::Read(reply) => {
                    let _ = reply.send(Err(ReadFailure::Stopped));
                }
                Forwarded::Ask(reply, _) => {
                    let _ = reply.send(Err(AskError::Stopped));
                }
            }
        }
        for (_, reply, _) in self.applying.drain(..) {
            let _ = reply.send(Err(ReadFailure::Stopped));
        }
    }
}
