//! Leader asks: a question for a service that runs only on the ready
//! leader, answered from its memory, not a log entry (the application's
//! lease clock answers renewals this way). [`Replicated::ask_leader`] routes
//! a question as a proposal is routed: delivered on the ready leader, sent
//! over the peer connection from a follower ([`Forward::Ask`], answered
//! with [`Forward::Answered`]), held while no leader is known.
//!
//! The leader hands each question to the application as an [`Ask`] on the
//! receiver [`Replicated::take_asks`] returns (taken once). Bounds: a
//! question or an answer has at most [`MAX_ASK_LEN`] bytes, at most
//! [`ASK_QUEUE_CAPACITY`] wait for the service, and at most
//! [`MAX_ASKS_IN_FLIGHT`] are delivered and not yet answered on a node;
//! beyond those the asker is refused ([`AskError::Busy`]) at once.
//!
//! [`Replicated::ask_leader`]: super::Replicated::ask_leader
//! [`Replicated::take_asks`]: super::Replicated::take_asks
//! [`Forward::Ask`]: crate::wire::Forward::Ask
//! [`Forward::Answered`]: crate::wire::Forward::Answered

use super::AskError;
use crate::shared::Shared;
use crate::sync::lock;
use crate::wire::{Forward, ForwardRefusal, Frame};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tenure_core::{FencingToken, NodeId};
use tokio::sync::{mpsc, oneshot};

/// The largest question (and answer) an ask carries, in bytes: a leader
/// service answers from memory, with a few fields, not with data.
pub const MAX_ASK_LEN: usize = 64 * 1024;
/// Asks delivered on the leader and not yet taken by its service; more
/// are refused as busy.
pub const ASK_QUEUE_CAPACITY: usize = 1024;
/// Asks delivered on a node and not yet answered (queued, or held by the
/// service); more are refused as busy. Each holds at most two
/// [`MAX_ASK_LEN`] buffers.
pub const MAX_ASKS_IN_FLIGHT: usize = 4096;

/// Where the answer to an ask goes: a caller on the leader, or a follower
/// that forwarded it (the answer goes out on the peer connection).
pub(crate) enum AskReply {
    Local(oneshot::Sender<Result<Vec<u8>, AskError>>),
    Peer { node: Arc<Shared>, to: NodeId, id: u64 },
}

impl AskReply {
    pub(crate) fn send(self, result: Result<Vec<u8>, ForwardRefusal>) {
        match self {
            AskReply::Local(reply) => {
                let _ = reply.send(result.map_err(AskError::from_refusal));
            }
            AskReply::Peer { node, to, id } => {
                let result = result.map(serde_bytes::ByteBuf::from);
                let frame = Frame::Forward(Forward::Answered { id, result });
                if let Some(link) = node.net.link(to) {
                    if link.enqueue_data(frame) {
                        node.net.stats.data_dropped.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }
    }
}

/// A question delivered to the leader's service. Answer it with
/// [`Ask::answer`]; dropped unanswered, the asker is told no service
/// answered ([`AskError::NoService`]).
pub struct Ask {
    request: Vec<u8>,
    token: FencingToken,
    reply: Option<AskReply>,
    _slot: Slot,
}

impl std::fmt::Debug for Ask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ask").field("len", &self.request.len()).field("token", &self.token).finish()
    }
}

impl Ask {
    /// The question, as the asker sent it (at most [`MAX_ASK_LEN`] bytes).
    pub fn request(&self) -> &[u8] {
        &self.request
    }

    /// The leadership the question arrived under: this node was the ready
    /// leader of this token when it was delivered. The service checks that
    /// it still is before it answers from leader-only state.
    pub fn token(&self) -> FencingToken {
        self.token
    }

    /// Sends the answer to the asker. An answer over [`MAX_ASK_LEN`] is
    /// not sent: the asker gets [`AskError::TooLarge`].
    pub fn answer(mut self, answer: Vec<u8>) {
        let result = if answer.len() > MAX_ASK_LEN {
            Err(ForwardRefusal::TooLarge { size: answer.len(), max: MAX_ASK_LEN })
        } else {
            Ok(answer)
        };
        if let Some(reply) = self.reply.take() {
            reply.send(result);
        }
    }
}

impl Drop for Ask {
    fn drop(&mut self) {
        if let Some(reply) = self.reply.take() {
            reply.send(Err(ForwardRefusal::NoService));
        }
    }
}

/// One of [`MAX_ASKS_IN_FLIGHT`], given back when the ask is dropped.
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The leader's side: the queue to the service.
pub(crate) struct AskDesk {
    tx: mpsc::Sender<Ask>,
    rx: Mutex<Option<mpsc::Receiver<Ask>>>,
    taken: AtomicBool,
    in_flight: Arc<AtomicUsize>,
}

impl AskDesk {
    pub(crate) fn new() -> Self {
        let (tx, rx) = mpsc::channel(ASK_QUEUE_CAPACITY);
        AskDesk {
            tx,
            rx: Mutex::new(Some(rx)),
            taken: AtomicBool::new(false),
            in_flight: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// The receiver of delivered asks, once.
    pub(crate) fn take(&self) -> Option<mpsc::Receiver<Ask>> {
        let rx = lock(&self.rx).take();
        if rx.is_some() {
            self.taken.store(true, Ordering::Release);
        }
        rx
    }

    /// Hands a question to the service, as the leader of `token`, or
    /// answers the asker why not: no service, or too many asks.
    pub(crate) fn deliver(&self, request: Vec<u8>, token: FencingToken, reply: AskReply) {
        if request.len() > MAX_ASK_LEN {
            let size = request.len();
            return reply.send(Err(ForwardRefusal::TooLarge { size, max: MAX_ASK_LEN }));
        }
        if !self.taken.load(Ordering::Acquire) || self.tx.is_closed() {
            return reply.send(Err(ForwardRefusal::NoService));
        }
        if self.in_flight.fetch_add(1, Ordering::AcqRel) >= MAX_ASKS_IN_FLIGHT {
            self.in_flight.fetch_sub(1, Ordering::AcqRel);
            return reply.send(Err(ForwardRefusal::Busy));
        }
        let slot = Slot(self.in_flight.clone());
        let ask = Ask { request, token, reply: Some(reply), _slot: slot };
        match self.tx.try_send(ask) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(mut ask)) => {
                if let Some(reply) = ask.reply.take() {
                    reply.send(Err(ForwardRefusal::Busy));
                }
            }
            // Dropped: its `Drop` tells the asker no service answered.
            Err(mpsc::error::TrySendError::Closed(_)) => {}
        }
    }
}
