//! The node's configuration and its validation.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use tenure_core::{ConfigError, NodeId, ProtocolKind};

/// The longest cluster id accepted; it travels in every handshake and the state file.
pub const MAX_CLUSTER_ID_LEN: usize = 128;

/// Everything a node needs to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeConfig {
    /// This node's id; must appear in `peers`.
    pub id: NodeId,
    /// The cluster's name. Peers with another cluster id are refused, and a data
    /// directory written for another cluster is not used.
    pub cluster_id: String,
    /// Address to bind the peer listener to (port 0 allowed).
    pub listen: SocketAddr,
    /// Every voter's peer address, this node's own included, in preference order.
    pub peers: Vec<(NodeId, SocketAddr)>,
    /// Directory holding the durable state and the lock file; created if missing.
    pub data_dir: PathBuf,
    /// How often a leader sends heartbeats.
    pub heartbeat_interval: Duration,
    /// How long followers wait for a silent leader before polling for an election.
    pub election_timeout: Duration,
    /// The election protocol; every node of the cluster must run the same one.
    pub protocol: ProtocolKind,
    /// A generous bound on one message round trip, fsync included
    /// ([`tenure_core::Config::round_trip`]); `None` for the default (half the
    /// heartbeat interval). Only the ranked and Paxos protocols use it.
    pub round_trip: Option<Duration>,
}

/// A node configuration that cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodeConfigError {
    /// The election settings are invalid.
    #[error(transparent)]
    Election(#[from] ConfigError),
    /// The cluster id is empty or too long.
    #[error("the cluster id must be 1 to {MAX_CLUSTER_ID_LEN} bytes long (got {0} bytes)")]
    BadClusterId(usize),
    /// Two peers share an address.
    #[error("peers {0} and {1} have the same address {2}")]
    DuplicateAddress(NodeId, NodeId, SocketAddr),
}

impl NodeConfig {
    /// Checks the configuration; returns the first problem found.
    pub fn validate(&self) -> Result<(), NodeConfigError> {
        if self.cluster_id.is_empty() || self.cluster_id.len() > MAX_CLUSTER_ID_LEN {
            return Err(NodeConfigError::BadClusterId(self.cluster_id.len()));
        }
        self.core_config().validate_for(self.protocol)?;
        for (i, (a, addr_a)) in self.peers.iter().enumerate() {
            if let Some((b, _)) = self.peers[i + 1..].iter().find(|(_, addr_b)| addr_b == addr_a) {
                return Err(NodeConfigError::DuplicateAddress(*a, *b, *addr_a));
            }
        }
        Ok(())
    }

    /// The election core's configuration derived from this one.
    pub fn core_config(&self) -> tenure_core::Config {
        let mut cfg = tenure_core::Config::new(
            self.id,
            self.peers.iter().map(|&(id, _)| id).collect(),
            self.heartbeat_interval,
            self.election_timeout,
        );
        if let Some(rtt) = self.round_trip {
            cfg.round_trip = rtt;
        }
        cfg
    }

    /// The address of peer `id`, if it is a voter.
    pub fn peer_addr(&self, id: NodeId) -> Option<SocketAddr> {
        self.peers.iter().find(|&&(p, _)| p == id).map(|&(_, a)| a)
    }
}
