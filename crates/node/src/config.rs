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
///
/// The election settings (voters, heartbeat, election timeout, round trip and
/// what each protocol requires of them) are checked by the core alone
/// ([`tenure_core::Config::validate_for`]); this crate checks only what is its
/// own: the cluster id and the peer addresses. [`NodeConfigError::fields`]
/// names the [`NodeConfig`] fields to change.
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

impl NodeConfigError {
    /// The [`NodeConfig`] fields whose values cause this error, the likeliest
    /// fix first; a program that builds the configuration from its own
    /// settings maps them to the names its users know.
    pub fn fields(&self) -> &'static [&'static str] {
        match self {
            NodeConfigError::Election(e) => election_fields(e),
            NodeConfigError::BadClusterId(_) => &["cluster_id"],
            NodeConfigError::DuplicateAddress(..) => &["peers"],
        }
    }
}

/// The fields behind each election-settings error. The stagger and the drift
/// bound are derived by [`NodeConfig::core_config`] (from the heartbeat, and a
/// fixed 5%), so the heartbeat is what to change for the first.
fn election_fields(e: &ConfigError) -> &'static [&'static str] {
    match e {
        ConfigError::NoVoters
        | ConfigError::TooManyVoters(_)
        | ConfigError::DuplicateId(_)
        | ConfigError::SelfNotVoter(..) => &["peers", "id"],
        ConfigError::ZeroId => &["id", "peers"],
        ConfigError::ZeroHeartbeat | ConfigError::BadStagger(_) => &["heartbeat_interval"],
        ConfigError::TimeoutTooShort { .. } => &["election_timeout", "heartbeat_interval"],
        ConfigError::DriftTooLarge(_) => &[],
        ConfigError::BadRoundTrip(_) => &["round_trip", "heartbeat_interval"],
        ConfigError::Protocol { protocol: ProtocolKind::Paxos, .. } => {
            &["election_timeout", "round_trip", "peers", "protocol"]
        }
        ConfigError::Protocol { .. } => &["round_trip", "election_timeout", "protocol"],
    }
}

impl NodeConfig {
    /// Checks the configuration; returns the first problem found. The election
    /// settings are checked by the core ([`tenure_core::Config::validate_for`]),
    /// the cluster id and peer addresses here.
    pub fn validate(&self) -> Result<(), NodeConfigError> {
        if self.cluster_id.is_empty() || self.cluster_id.len() > MAX_CLUSTER_ID_LEN {
            return Err(NodeConfigError::BadClusterId(self.cluster_id.len()));
        }
        for (i, (a, addr_a)) in self.peers.iter().enumerate() {
            if let Some((b, _)) = self.peers[i + 1..].iter().find(|(_, addr_b)| addr_b == addr_a) {
                return Err(NodeConfigError::DuplicateAddress(*a, *b, *addr_a));
            }
        }
        self.core_config().validate_for(self.protocol)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> NodeConfig {
        NodeConfig {
            id: NodeId(1),
            cluster_id: "c".into(),
            listen: "127.0.0.1:7001".parse().unwrap(),
            peers: vec![
                (NodeId(1), "127.0.0.1:7001".parse().unwrap()),
                (NodeId(2), "127.0.0.1:7002".parse().unwrap()),
                (NodeId(3), "127.0.0.1:7003".parse().unwrap()),
            ],
            data_dir: "/nonexistent".into(),
            heartbeat_interval: Duration::from_millis(100),
            election_timeout: Duration::from_millis(1000),
            protocol: ProtocolKind::Raft,
            round_trip: None,
        }
    }

    #[test]
    fn a_valid_config_passes() {
        assert_eq!(config().validate(), Ok(()));
    }

    #[test]
    fn own_checks_name_their_field() {
        let mut c = config();
        c.cluster_id = String::new();
        assert_eq!(c.validate(), Err(NodeConfigError::BadClusterId(0)));
        assert_eq!(c.validate().unwrap_err().fields(), ["cluster_id"]);
        c.cluster_id = "x".repeat(MAX_CLUSTER_ID_LEN + 1);
        assert!(c.validate().unwrap_err().to_string().contains("1 to 128 bytes"));

        let mut c = config();
        c.peers[2].1 = c.peers[0].1;
        let err = c.validate().unwrap_err();
        assert_eq!(err, NodeConfigError::DuplicateAddress(NodeId(1), NodeId(3), c.peers[0].1));
        assert_eq!(err.fields(), ["peers"]);
    }

    /// Election settings are the core's to check: its error comes through
    /// unchanged, with the fields that set it.
    #[test]
    fn election_settings_are_checked_by_the_core() {
        let mut c = config();
        c.election_timeout = Duration::from_millis(200);
        let err = c.validate().unwrap_err();
        assert_eq!(err, NodeConfigError::Election(c.core_config().validate().unwrap_err()));
        assert!(err.to_string().contains("at least 4"), "{err}");
        assert_eq!(err.fields(), ["election_timeout", "heartbeat_interval"]);

        let mut c = config();
        c.round_trip = Some(Duration::from_millis(150));
        assert_eq!(c.validate().unwrap_err().fields(), ["round_trip", "heartbeat_interval"]);

        let mut c = config();
        c.peers.push((NodeId(2), "127.0.0.1:7004".parse().unwrap()));
        let err = c.validate().unwrap_err();
        assert_eq!(err, NodeConfigError::Election(ConfigError::DuplicateId(NodeId(2))));
        assert_eq!(err.fields()[0], "peers");

        let mut c = config();
        c.peers = (1..=16).map(|i| (NodeId(i), ([127, 0, 0, 1], 7000 + i as u16).into())).collect();
        let err = c.validate().unwrap_err();
        assert_eq!(err, NodeConfigError::Election(ConfigError::TooManyVoters(16)));
        assert_eq!(err.fields()[0], "peers");
    }
}
