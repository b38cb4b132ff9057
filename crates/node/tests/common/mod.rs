//! Helpers shared by the integration tests: in-process clusters on 127.0.0.1.
#![allow(dead_code)] // each test binary uses a different subset

use futures_util::{SinkExt, StreamExt};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tempfile::TempDir;
use tenure_node::tls::certgen::{self, CertRequest};
use tenure_node::tls::TlsIdentity;
use tenure_node::wire::{self, Frame, WIRE_VERSION};
use tenure_node::{start_with_listener, Node, NodeConfig, NodeHandle, NodeId, Security};
use tokio::net::TcpStream;
use tokio_util::codec::{Framed, LengthDelimitedCodec};

/// Short timings so tests run fast.
pub const HEARTBEAT: Duration = Duration::from_millis(20);
pub const ELECTION_TIMEOUT: Duration = Duration::from_millis(200);
/// Upper bound for anything the tests wait on.
pub const PATIENCE: Duration = Duration::from_secs(10);

pub fn init_logs() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "tenure_node=info".into()),
        )
        .with_test_writer()
        .try_init();
}

/// A listener on a free loopback port.
pub fn bind() -> TcpListener {
    TcpListener::bind("127.0.0.1:0").unwrap()
}

/// A cluster whose nodes run in this process; addresses are bound up front so
/// every configuration knows every peer.
pub struct Cluster {
    pub configs: Vec<NodeConfig>,
    pub nodes: Vec<Option<Node>>,
    pub dir: TempDir,
}

/// The cluster id of the test clusters.
pub const CLUSTER: &str = "test";

/// Makes a CA and certificates for nodes 1..=n of [`CLUSTER`] in `dir/certs`.
pub fn make_certs(dir: &Path, n: u64) -> Vec<tenure_node::TlsFiles> {
    let out =
        certgen::generate(&dir.join("certs"), &CertRequest::new(CLUSTER, (1..=n).map(NodeId)))
            .expect("test certificates");
    out.nodes.into_iter().map(|(_, files)| files).collect()
}

/// Node `id`'s loaded identity, from its configuration's files.
pub fn identity(cfg: &NodeConfig) -> TlsIdentity {
    match &cfg.security {
        Security::MutualTls(files) => TlsIdentity::load(files, &cfg.cluster_id, cfg.id).unwrap(),
        Security::InsecureNoTls => panic!("node {} runs without TLS", cfg.id),
    }
}

/// A hand-driven peer connection over TLS.
pub type TlsConn = Framed<tokio_rustls::client::TlsStream<TcpStream>, LengthDelimitedCodec>;

/// Dials `target` with `as_identity`'s certificate (the TLS handshake only).
pub async fn dial_tls(as_identity: &TlsIdentity, target: &NodeConfig) -> std::io::Result<TlsConn> {
    let tcp = TcpStream::connect(target.listen).await?;
    tcp.set_nodelay(true)?;
    let name = as_identity.peer_server_name(target.id);
    let tls = as_identity.peer_connector().connect(name, tcp).await?;
    Ok(Framed::new(tls, wire::codec()))
}

/// The hello of node `from` to `target`, in `incarnation`: a live node's
/// own (another would be refused as a second process claiming its id).
pub fn hello_in(from: NodeId, target: &NodeConfig, incarnation: u64) -> Frame {
    match hello(from, target) {
        Frame::Hello {
            version,
            cluster_id,
            from,
            to,
            protocol,
            voters,
            api_address,
            directory,
            etcd_address,
            timings,
            ..
        } => Frame::Hello {
            version,
            cluster_id,
            from,
            to,
            protocol,
            incarnation,
            voters,
            api_address,
            directory,
            config: tenure_core::ConfigId::BOOTSTRAP,
            peer_address: None,
            etcd_address,
            timings,
        },
        other => other,
    }
}

/// The hello of node `from` to `target`.
pub fn hello(from: NodeId, target: &NodeConfig) -> Frame {
    Frame::Hello {
        version: WIRE_VERSION,
        cluster_id: target.cluster_id.clone(),
        from,
        to: target.id,
        protocol: target.protocol,
        incarnation: 1,
        voters: {
            let mut v: Vec<NodeId> = target.peers.iter().map(|&(id, _)| id).collect();
            v.sort_unstable();
            v
        },
        api_address: None,
        etcd_address: None,
        directory: tenure_core::DirectoryId(0xd0),
        config: tenure_core::ConfigId::BOOTSTRAP,
        peer_address: None,
        timings: wire::Timings::of(&target.core_config()),
    }
}

/// Sends `hello` on `conn` and returns the answer: `Ok(frame)`, or `Err`
/// with what ended the connection instead.
pub async fn handshake<S>(
    conn: &mut Framed<S, LengthDelimitedCodec>,
    hello: Frame,
) -> Result<Frame, String>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    conn.send(wire::encode(&hello)).await.map_err(|e| format!("send: {e}"))?;
    match tokio::time::timeout(PATIENCE, conn.next()).await {
        Err(_) => Err("no answer".into()),
        Ok(None) => Err("closed".into()),
        Ok(Some(Err(e))) => Err(format!("error: {e}")),
        Ok(Some(Ok(bytes))) => wire::decode(&bytes).map_err(|e| format!("bad frame: {e}")),
    }
}

impl Cluster {
    /// Configurations for `n` nodes (ids 1..=n) of [`CLUSTER`] with mutual
    /// TLS (certificates in the directory), and their listeners.
    pub fn configure(
        n: u64,
        heartbeat: Duration,
        timeout: Duration,
    ) -> (Vec<NodeConfig>, Vec<TcpListener>, TempDir) {
        Cluster::configure_with(n, heartbeat, timeout, true)
    }

    /// Like [`Cluster::configure`]; without TLS (the insecure mode) unless `tls`.
    pub fn configure_with(
        n: u64,
        heartbeat: Duration,
        timeout: Duration,
        tls: bool,
    ) -> (Vec<NodeConfig>, Vec<TcpListener>, TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let files = if tls { make_certs(dir.path(), n) } else { Vec::new() };
        let listeners: Vec<TcpListener> = (0..n).map(|_| bind()).collect();
        let peers: Vec<(NodeId, SocketAddr)> = listeners
            .iter()
            .enumerate()
            .map(|(i, l)| (NodeId(i as u64 + 1), l.local_addr().unwrap()))
            .collect();
        let configs = peers
            .iter()
            .map(|&(id, addr)| NodeConfig {
                id,
                cluster_id: CLUSTER.into(),
                listen: addr,
                peers: peers.clone(),
                data_dir: dir.path().join(format!("node{}", id.0)),
                heartbeat_interval: heartbeat,
                election_timeout: timeout,
                protocol: tenure_core::ProtocolKind::Raft,
                round_trip: None,
                security: match files.get(id.0 as usize - 1) {
                    Some(f) => Security::MutualTls(f.clone()),
                    None => Security::InsecureNoTls,
                },
                single_node: n == 1,
                api_address: None,
                etcd_address: None,
                joining: false,
            })
            .collect();
        (configs, listeners, dir)
    }

    pub async fn start(n: u64) -> Cluster {
        Cluster::start_with(n, HEARTBEAT, ELECTION_TIMEOUT).await
    }

    pub async fn start_with(n: u64, heartbeat: Duration, timeout: Duration) -> Cluster {
        Cluster::start_configured(Cluster::configure(n, heartbeat, timeout)).await
    }

    /// A cluster without TLS (the insecure mode).
    pub async fn start_insecure(n: u64) -> Cluster {
        Cluster::start_configured(Cluster::configure_with(n, HEARTBEAT, ELECTION_TIMEOUT, false))
            .await
    }

    /// Starts every node of a configured cluster.
    pub async fn start_configured(
        (configs, listeners, dir): (Vec<NodeConfig>, Vec<TcpListener>, TempDir),
    ) -> Cluster {
        init_logs();
        let mut nodes = Vec::new();
        for (cfg, l) in configs.iter().zip(listeners) {
            nodes.push(Some(start_with_listener(cfg.clone(), l).await.unwrap()));
        }
        Cluster { configs, nodes, dir }
    }

    pub fn handle(&self, i: usize) -> NodeHandle {
        self.nodes[i].as_ref().expect("node running").handle()
    }

    pub fn running(&self) -> Vec<NodeHandle> {
        self.nodes.iter().flatten().map(|n| n.handle()).collect()
    }

    pub fn index_of(&self, id: NodeId) -> usize {
        self.configs.iter().position(|c| c.id == id).unwrap()
    }

    pub fn data_dir(&self, i: usize) -> PathBuf {
        self.configs[i].data_dir.clone()
    }

    /// Waits until exactly one running node leads and every running node
    /// knows it, in the same term; returns its id.
    pub async fn stable_leader(&self) -> NodeId {
        let handles = self.running();
        wait_for("a leader all running nodes agree on", || {
            let leaders: Vec<NodeId> =
                handles.iter().filter(|h| h.is_leader()).map(|h| h.id()).collect();
            let [leader] = leaders[..] else { return None };
            let term = handles.iter().find(|h| h.id() == leader)?.status().term;
            handles
                .iter()
                .all(|h| {
                    let s = h.status();
                    s.leader == Some(leader) && s.term == term
                })
                .then_some(leader)
        })
        .await
    }

    pub async fn stop(&mut self, i: usize) {
        if let Some(n) = self.nodes[i].take() {
            n.shutdown().await;
        }
    }

    pub async fn stop_all(&mut self) {
        for i in 0..self.nodes.len() {
            self.stop(i).await;
        }
    }

    /// Restarts node `i` on its old address and data directory.
    pub async fn restart(&mut self, i: usize) {
        let cfg = self.configs[i].clone();
        let l = TcpListener::bind(cfg.listen).unwrap();
        self.nodes[i] = Some(start_with_listener(cfg, l).await.unwrap());
    }
}

/// Polls `f` every few milliseconds until it returns `Some`, at most [`PATIENCE`].
pub async fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < PATIENCE, "timed out after {PATIENCE:?} waiting for {what}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}
