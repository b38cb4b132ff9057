//! Where an inbound connection hands what it received: election messages to
//! the driver, replicated-log frames to the log task.

use super::net::WireStats;
use crate::spy::DeathNotice;
use crate::wire::Forward;
use std::sync::atomic::Ordering;
use tenure_core::{Message, NodeId};
use tenure_replica::ReplicaMessage;
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;
use tracing::debug;

/// A replicated-log frame from a peer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PeerData {
    /// A replication message.
    Replica(ReplicaMessage),
    /// A forwarded request or its answer.
    Forward(Forward),
}

/// The channels inbound connections feed.
#[derive(Clone, Debug)]
pub struct Inbound {
    /// Election messages, to the driver: a full channel makes the reader wait
    /// (back-pressure onto the peer's connection).
    pub election: mpsc::Sender<(NodeId, Message)>,
    /// Replicated-log frames, to the log task; `None` when the node runs no
    /// replicated log (the frames are dropped).
    pub data: Option<mpsc::Sender<(NodeId, PeerData)>>,
    /// Death notices of the next-incarnation spy, to the driver (from the
    /// acceptor and the dialers both): a handshake showed a peer's higher
    /// incarnation. Sent before the connection's first frame is read.
    pub deaths: mpsc::Sender<DeathNotice>,
}

impl Inbound {
    /// Hands a replicated-log frame on without waiting: a log task too far
    /// behind loses it (counted), rather than holding up the election
    /// messages behind it on the same connection. The leader resends what is
    /// unanswered at its next heartbeat.
    pub(super) fn data(&self, stats: &WireStats, from: NodeId, data: PeerData) {
        stats.data_received.fetch_add(1, Ordering::Relaxed);
        let Some(tx) = &self.data else {
            stats.data_dropped.fetch_add(1, Ordering::Relaxed);
            debug!(peer = %from, "a replicated-log frame arrived, but this node runs no log");
            return;
        };
        match tx.try_send((from, data)) {
            Ok(()) | Err(TrySendError::Closed(_)) => {}
            Err(TrySendError::Full(_)) => {
                stats.data_dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}
