//! The embedding API: starting a node, its handle, and graceful shutdown.
//! (Work in progress: the driver and transport are being wired in.)

use crate::config::NodeConfig;
use crate::error::{StartError, TransferError};
use crate::status::{Leadership, LeadershipEvent, NodeMetrics, NodeStatus};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::sync::{broadcast, watch};
use tenure_core::{NodeId, Role, Term};

/// Starts a node: locks and loads the data directory, binds the peer listener
/// and spawns the driver and transport tasks.
pub async fn start(config: NodeConfig) -> Result<Node, StartError> {
    config.validate()?;
    let listener = std::net::TcpListener::bind(config.listen)
        .map_err(|source| StartError::Bind { addr: config.listen, source })?;
    start_with_listener(config, listener).await
}

/// Like [`start`], with a listener the caller already bound (tests bind every
/// node's listener first so that all addresses are known before any node starts).
/// `config.listen` is ignored.
pub async fn start_with_listener(
    config: NodeConfig,
    listener: std::net::TcpListener,
) -> Result<Node, StartError> {
    config.validate()?;
    let addr = listener
        .local_addr()
        .map_err(|source| StartError::Bind { addr: config.listen, source })?;
    let (leadership, _) = watch::channel(Leadership {
        leader: None,
        term: Term(0),
        fencing_token: None,
        role: Role::Follower,
    });
    let (events, _) = broadcast::channel(16);
    Ok(Node {
        handle: NodeHandle { inner: Arc::new(Inner { config, leadership, events }) },
        peer_addr: addr,
    })
}

struct Inner {
    config: NodeConfig,
    leadership: watch::Sender<Leadership>,
    events: broadcast::Sender<LeadershipEvent>,
}

/// A running node. It owns the driver and transport tasks; dropping it without
/// [`Node::shutdown`] aborts them.
pub struct Node {
    handle: NodeHandle,
    peer_addr: SocketAddr,
}

impl Node {
    /// A handle to observe and command the node.
    pub fn handle(&self) -> NodeHandle {
        self.handle.clone()
    }

    /// The address the peer listener is bound to.
    pub fn peer_addr(&self) -> SocketAddr {
        self.peer_addr
    }

    /// Graceful stop: cedes leadership if leading, flushes the resulting messages
    /// (bounded wait), stops every task and releases the data directory.
    pub async fn shutdown(self) {}
}

/// A cheap, cloneable handle to a running node.
#[derive(Clone)]
pub struct NodeHandle {
    inner: Arc<Inner>,
}

impl NodeHandle {
    /// This node's id.
    pub fn id(&self) -> NodeId {
        self.inner.config.id
    }

    /// True if this node leads now: its role is leader and its lease is valid.
    pub fn is_leader(&self) -> bool {
        false
    }

    /// A snapshot of the node's state.
    pub fn status(&self) -> NodeStatus {
        NodeStatus {
            id: self.id(),
            role: Role::Follower,
            term: Term(0),
            voted_for: None,
            leader: None,
            leader_addr: None,
            fencing_token: None,
            lsn: None,
            storage_failed: false,
            peers: Vec::new(),
        }
    }

    /// The current leadership, updated on every change.
    pub fn leadership(&self) -> watch::Receiver<Leadership> {
        self.inner.leadership.subscribe()
    }

    /// Leadership events from now on.
    pub fn events(&self) -> broadcast::Receiver<LeadershipEvent> {
        self.inner.events.subscribe()
    }

    /// Hands leadership to `to` (this node must lead and `to` must be reachable).
    pub async fn transfer_leadership(&self, to: NodeId) -> Result<(), TransferError> {
        let _ = to;
        Err(TransferError::NodeStopped)
    }

    /// Counters and measurements.
    pub fn metrics(&self) -> NodeMetrics {
        NodeMetrics {
            counters: Default::default(),
            leader_changes: 0,
            failover_durations_ms: Vec::new(),
            peer_rtt_ms: Vec::new(),
            messages_sent: 0,
            messages_received: 0,
            frames_rejected: 0,
        }
    }

    /// Asks the node to stop gracefully; the owner of the [`Node`] then awaits
    /// [`Node::shutdown`] (see [`NodeHandle::stop_requested`]).
    pub fn shutdown_signal(&self) {}

    /// Completes once [`NodeHandle::shutdown_signal`] has been called.
    pub async fn stop_requested(&self) {}
}
