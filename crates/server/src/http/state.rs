//! What the handlers share, and the error answer every handler gives.

use super::auth::ApiAuth;
use super::watchers::Watchers;
use crate::elections::hub::Hub;
use crate::metrics::Metrics;
use std::collections::BTreeMap;
use std::sync::Arc;
use tenure_core::NodeId;
use tenure_kv::Store;
use tenure_node::{NodeHandle, RateLimitedLog, Replicated};
use tokio::sync::watch;
use tokio_rustls::rustls::RootCertStore;

/// What the handlers share.
#[derive(Clone)]
pub struct AppState {
    pub(crate) node: NodeHandle,
    /// The node's replicated key-value store.
    pub(crate) kv: Replicated<Store>,
    /// This node's renewals, gathered into asks to the leader.
    pub(crate) renewer: crate::sessions::Renewer,
    pub(crate) metrics: Metrics,
    /// Who may call which endpoint.
    pub(crate) auth: Arc<ApiAuth>,
    /// The open `GET /v1/watch`, `/v1/kv-watch` and election observe
    /// streams, in all, per address and per token.
    pub(crate) watchers: Watchers,
    /// Who waits for which candidate to leave (the elections' long polls).
    pub(crate) elections: Hub,
    /// The open election long polls, in all, per address and per token.
    pub(crate) waiters: Watchers,
    /// The open keepalive streams (`GET /v1/sessions/{id}/keepalive`), apart
    /// from the watch streams.
    pub(crate) keepalives: Watchers,
    /// The list answers being built or sent ([`super::budget`]).
    pub(crate) lists: super::budget::ListAnswers,
    /// Refused requests (auth, limits), logged as a summary per interval.
    pub(crate) rejections: Arc<RateLimitedLog>,
    /// Becomes true when the server stops, which ends the SSE streams so that
    /// the graceful HTTP shutdown does not wait for them forever.
    pub(crate) stopping: watch::Receiver<bool>,
    /// The nodes' HTTP API addresses (HOST:PORT), this one included where
    /// known, and the client that reads their status ([`super::cluster`]).
    pub(crate) cluster: Arc<ClusterLinks>,
}

/// How this node reaches the other nodes' HTTP APIs.
#[derive(Debug, Default)]
pub(crate) struct ClusterLinks {
    /// HOST:PORT by node.
    pub(crate) http_addresses: BTreeMap<NodeId, String>,
    /// HTTPS with the cluster's CA, or plain HTTP when the node runs without TLS.
    pub(crate) client: tenure_client::Client,
    /// The peer addresses of the node's own configuration (its `--peers`):
    /// where the members of the bootstrap list, which the log names without
    /// an address until the first change of members, are reached.
    pub(crate) peer_addresses: BTreeMap<NodeId, String>,
}

impl ClusterLinks {
    /// The HTTP address of `node`, if known.
    pub(crate) fn http_address(&self, node: NodeId) -> Option<String> {
        self.http_addresses.get(&node).cloned()
    }

    /// The peer address of `node` in this node's own configuration, if any.
    pub(crate) fn peer_address(&self, node: NodeId) -> Option<String> {
        self.peer_addresses.get(&node).cloned()
    }
}

impl AppState {
    /// State for a server in front of `node`, admitting callers by `auth` and
    /// counting refusals in `rejections`.
    pub fn new(
        node: NodeHandle,
        kv: Replicated<Store>,
        renewer: crate::sessions::Renewer,
        metrics: Metrics,
        auth: ApiAuth,
        rejections: Arc<RateLimitedLog>,
        stopping: watch::Receiver<bool>,
    ) -> Self {
        AppState {
            elections: Hub::new(kv.clone(), stopping.clone(), metrics.clone()),
            waiters: Watchers::new(super::watchers::WAITER_LIMITS),
            keepalives: Watchers::new(super::watchers::KEEPALIVE_STREAM_LIMITS),
            lists: super::budget::ListAnswers::default(),
            node,
            kv,
            renewer,
            metrics,
            auth: Arc::new(auth),
            watchers: Watchers::default(),
            rejections,
            stopping,
            cluster: Arc::default(),
        }
    }

    /// The same state, knowing the nodes' HTTP API addresses (HOST:PORT) and
    /// reading them over HTTPS with the CA certificates `roots` (None: plain
    /// HTTP, for a node without TLS).
    pub fn with_cluster(
        mut self,
        http_addresses: BTreeMap<NodeId, String>,
        roots: Option<RootCertStore>,
    ) -> Self {
        let client = tenure_client::Client::with_roots(roots, None)
            .expect("a client without a token is always valid");
        let peer_addresses = self.cluster.peer_addresses.clone();
        self.cluster = Arc::new(ClusterLinks { http_addresses, client, peer_addresses });
        self
    }

    /// The same state, knowing the peer addresses of the node's own
    /// configuration (`--peers`): `GET /v1/members` names the members of
    /// the bootstrap list by them until the log gives them addresses.
    pub fn with_peer_addresses(mut self, peers: &[(NodeId, std::net::SocketAddr)]) -> Self {
        let links = ClusterLinks {
            http_addresses: self.cluster.http_addresses.clone(),
            client: self.cluster.client.clone(),
            peer_addresses: peers.iter().map(|(id, a)| (*id, a.to_string())).collect(),
        };
        self.cluster = Arc::new(links);
        self
    }
}
