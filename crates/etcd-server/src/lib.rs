//! # tenure-etcd-server: etcd's v3 gRPC API over tenure's store
//!
//! One job: serve etcd's API on a listener of its own (`tenure server
//! --etcd-listen`), over the node's one replicated store, so that stock
//! etcd clients (etcdctl, clientv3, ...) work unchanged. Writes go through
//! the replicated log as the HTTP API's do ([`tenure_node::Replicated::propose`],
//! forwarded to the leader from a follower), linearizable reads through the
//! read index ([`tenure_node::Replicated::read`]), serializable reads from
//! the node's applied state: one store, one revision counter, whichever
//! API wrote.
//!
//! Served: `KV` (Range, Put, DeleteRange, Txn, Compact), `Watch`, `Lease`
//! (over tenure's sessions: [`lease`]), `Maintenance.Status`,
//! `Cluster.MemberList`, and etcd's `Election` ([`election`]) and `Lock`
//! ([`lock`]) services, which wait in line under a name ([`queue`]). Auth
//! answer Unimplemented with what tenure offers instead; so does every
//! etcd method the generated services do not know. What differs from etcd
//! and why: docs/ETCD.md.
//!
//! Access: with TLS (the node's certificate), a client certificate issued
//! by the cluster's CA is required (`etcdctl --cacert --cert --key`); a
//! call's role is its token's, or without one the role of the token its
//! certificate names (a node's certificate: an administrator's), see
//! [`auth`].

#![warn(missing_docs)]

pub mod auth;
mod cluster;
pub mod connections;
pub mod election;
pub mod errors;
pub mod forward;
mod gate;
mod kv;
pub mod lease;
pub mod lock;
mod maintenance;
pub mod queue;
pub mod range;
pub mod subject;
mod txn;
pub mod watch;

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tenure_etcd_api::etcdserverpb::{
    auth_server::AuthServer, cluster_server::ClusterServer, kv_server::KvServer,
    lease_server::LeaseServer, maintenance_server::MaintenanceServer, watch_server::WatchServer,
    ResponseHeader,
};
use tenure_etcd_api::v3electionpb::election_server::ElectionServer;
use tenure_etcd_api::v3lockpb::lock_server::LockServer;
use tenure_kv::Store;
use tenure_node::{NodeHandle, NodeId, Replicated, TlsFiles};
use tonic::transport::{Certificate, Identity, Server, ServerTlsConfig};
use tonic::{Request, Status};
use tracing::{info, warn};

/// The largest request accepted, in bytes: etcd's 1.5 MiB plus its 512
/// KiB of gRPC overhead. tenure's own limits on a key (1 KiB) and a value
/// (64 KiB) are checked after.
pub const MAX_REQUEST_BYTES: usize = 2 * 1024 * 1024;

/// Concurrent calls (HTTP/2 streams) on one connection; etcd's clients
/// multiplex every call of a client over one connection.
pub const MAX_STREAMS_PER_CONNECTION: u32 = 128;

/// How long a call may take before it is cut (tonic's answer: Cancelled,
/// "Timeout expired"); a write waits for a leader at most a few election
/// timeouts. Not the calls that wait for their turn ([`WAITING_CALLS`]):
/// those wait as long as their client lets them.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a client may take to finish its TLS handshake: a connection
/// that opens and sends nothing is closed after it, not held.
pub const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// How often a connection without traffic is asked for an HTTP/2 ping, and
/// how long its answer may take: a client that vanished without closing
/// (its host powered off, a dropped route) frees its connection.
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(30);
/// See [`KEEPALIVE_INTERVAL`].
pub const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(10);

/// The gRPC paths of the calls that wait as long as their client lets them
/// (bounded in number instead: [`queue::MAX_WAITING_CALLS`]). Observe is
/// a stream, whose start is not waited for.
pub const WAITING_CALLS: [&str; 2] = ["/v3electionpb.Election/Campaign", "/v3lockpb.Lock/Lock"];

/// The etcd version `Maintenance.Status` reports: the etcd API tenure
/// follows (3.4, the version Debian ships and the tests run), with tenure's
/// version as build metadata.
pub const VERSION: &str = concat!("3.4.23+tenure.", env!("CARGO_PKG_VERSION"));

/// What the services need of the node.
#[derive(Clone)]
pub struct Context {
    /// The node (its leadership, id and cluster).
    pub node: NodeHandle,
    /// The node's replicated store, shared with the HTTP API.
    pub kv: Replicated<Store>,
    /// The peer addresses of the node's own configuration (`--peers`): the
    /// members of the bootstrap list, which the log names without one.
    pub peer_addresses: BTreeMap<NodeId, String>,
    /// Whether the node's peers and this listener speak TLS (the URLs'
    /// scheme).
    pub tls: bool,
    /// The leader's lease clock (tenure's sessions service), for the Lease
    /// service's renewals and time left.
    pub sessions: Arc<dyn lease::SessionClock>,
    /// Who may call what: tenure's API tokens as etcd's users.
    pub auth: auth::Auth,
}

/// Why the etcd listener cannot serve.
#[derive(Debug, thiserror::Error)]
pub enum EtcdServeError {
    /// A TLS file cannot be read.
    #[error("cannot read {path} for the etcd listener")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The listener cannot be used.
    #[error("the etcd listener cannot be used")]
    Listener(#[source] std::io::Error),
    /// The gRPC server failed.
    #[error("the etcd gRPC server failed")]
    Transport(#[source] tonic::transport::Error),
}

/// The shared part of the services.
pub(crate) struct Shared {
    pub(crate) ctx: Context,
    /// etcd's cluster id: a hash of tenure's cluster id (FNV-1a, stable).
    pub(crate) cluster_id: u64,
    /// tenure's cluster id, which the node certificates name.
    pub(crate) cluster_name: String,
    /// TLS to the leader's etcd API ([`forward`]); `None` without TLS.
    pub(crate) forward_tls: Option<tonic::transport::ClientTlsConfig>,
    pub(crate) member_id: u64,
    /// This listener's client URL.
    pub(crate) client_url: String,
    /// True once the server stops: long-lived streams end then (the
    /// server's graceful shutdown waits for every open stream).
    pub(crate) stopping: tokio::sync::watch::Receiver<bool>,
    /// The slots of the calls waiting for their turn (Campaign, Lock).
    pub(crate) waiting: queue::WaitSlots,
    /// The slots of the Observe streams: their own, so that readers
    /// cannot take those of the candidates.
    pub(crate) observing: queue::WaitSlots,
}

impl Shared {
    /// A header at `revision`, with the node's term.
    pub(crate) fn header(&self, revision: u64) -> ResponseHeader {
        let term = self.ctx.node.leadership().borrow().term.0;
        ResponseHeader {
            cluster_id: self.cluster_id,
            member_id: self.member_id,
            revision: revision as i64,
            raft_term: term,
        }
    }

    /// etcd's require-leader check: a request with the metadata
    /// `hasleader: true` fails with "etcdserver: no leader" (Unavailable)
    /// while the node knows no leader.
    pub(crate) fn check_leader<T>(&self, request: &Request<T>) -> Result<(), Status> {
        let wants = request.metadata().get("hasleader").is_some_and(|v| v == "true");
        if wants && self.ctx.node.leadership().borrow().leader.is_none() {
            return Err(Status::unavailable(errors::NO_LEADER));
        }
        Ok(())
    }
}

/// FNV-1a of `s`: etcd's cluster id is a number, tenure's a name.
fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
}

/// Serves etcd's API on `listener` until `shutdown` completes: with TLS
/// (`tls`: the node's certificate, and client certificates of its CA
/// required), or plain when the node runs without TLS.
pub async fn serve(
    ctx: Context,
    listener: std::net::TcpListener,
    tls: Option<&TlsFiles>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), EtcdServeError> {
    listener.set_nonblocking(true).map_err(EtcdServeError::Listener)?;
    let listener = tokio::net::TcpListener::from_std(listener).map_err(EtcdServeError::Listener)?;
    let addr: SocketAddr = listener.local_addr().map_err(EtcdServeError::Listener)?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    let status = ctx.node.status();
    // The node's certificate, key and CA: the listener's TLS, and the
    // client's of the changes passed on to the leader.
    let pems = match tls {
        Some(files) => {
            let read = |path: &PathBuf| {
                std::fs::read(path)
                    .map_err(|source| EtcdServeError::Read { path: path.clone(), source })
            };
            Some((read(&files.cert)?, read(&files.key)?, read(&files.ca)?))
        }
        None => None,
    };
    let (stop, stopping) = tokio::sync::watch::channel(false);
    let shutdown = async move {
        shutdown.await;
        let _ = stop.send(true);
    };
    let shared = Arc::new(Shared {
        cluster_id: fnv1a(&status.cluster_id),
        cluster_name: status.cluster_id.clone(),
        forward_tls: pems.as_ref().map(|(cert, key, ca)| forward::client_tls(ca, cert, key)),
        member_id: status.id.0,
        client_url: format!("{scheme}://{addr}"),
        ctx,
        stopping,
        waiting: queue::WaitSlots::new("Campaign and Lock"),
        observing: queue::WaitSlots::new("Observe"),
    });
    let mut server = Server::builder()
        .max_concurrent_streams(MAX_STREAMS_PER_CONNECTION)
        .http2_keepalive_interval(Some(KEEPALIVE_INTERVAL))
        .http2_keepalive_timeout(Some(KEEPALIVE_TIMEOUT))
        .layer(tower_layer::layer_fn({
            let auth = Arc::new(shared.ctx.auth.clone());
            let subjects = Arc::new(subject::Subjects::default());
            move |inner| gate::Gate { auth: auth.clone(), subjects: subjects.clone(), inner }
        }));
    match &pems {
        Some((cert, key, ca)) => {
            let config = ServerTlsConfig::new()
                .identity(Identity::from_pem(cert, key))
                .client_ca_root(Certificate::from_pem(ca))
                .timeout(TLS_HANDSHAKE_TIMEOUT);
            server = server.tls_config(config).map_err(EtcdServeError::Transport)?;
        }
        None => warn!(
            etcd = %addr,
            "INSECURE: the etcd API runs without TLS (insecure_no_tls): anyone who reaches it \
             reads and writes the store"
        ),
    }
    info!(etcd = %addr, tls = tls.is_some(), "serving etcd's v3 API");
    let kv =
        KvServer::new(kv::KvService(shared.clone())).max_decoding_message_size(MAX_REQUEST_BYTES);
    let maintenance = MaintenanceServer::new(maintenance::MaintenanceService(shared.clone()));
    let cluster = ClusterServer::new(cluster::ClusterService(shared.clone()));
    let incoming = connections::Admitted::new(listener, connections::MAX_CONNECTIONS);
    // Watch streams never end by themselves: they are ended when the
    // listener stops (`Shared::stopping`), so that its graceful shutdown
    // does not wait for them.
    let watch = WatchServer::new(watch::WatchService::new(shared.clone(), shared.stopping.clone()));
    // gRPC's health service, as etcd registers it: the server is SERVING
    // while it listens (a probe's Check; Watch is refused by the gate).
    let (_health, health) = tonic_health::server::health_reporter();
    server
        .add_service(health)
        .add_service(kv)
        .add_service(maintenance)
        .add_service(cluster)
        .add_service(watch)
        .add_service(LeaseServer::new(lease::LeaseService::new(shared.clone())))
        .add_service(AuthServer::new(maintenance::AuthService(shared.clone())))
        .add_service(ElectionServer::new(election::ElectionService(shared.clone())))
        .add_service(LockServer::new(lock::LockService(shared.clone())))
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await
        .map_err(EtcdServeError::Transport)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_cluster_id_hash_is_stable() {
        assert_eq!(super::fnv1a(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(super::fnv1a("a"), 0xaf63_dc4c_8601_ec8c);
    }
}
