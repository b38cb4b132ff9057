//! The node's configuration and its validation.

use crate::tls::{node_server_name, Security};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use tenure_core::{ConfigError, NodeId, ProtocolKind};

/// The longest cluster id accepted; it travels in every handshake and the state file.
pub const MAX_CLUSTER_ID_LEN: usize = 128;

/// Everything a node needs to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeConfig {
    /// This node's id; must appear in `peers` (unless `joining`).
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
    /// Mutual TLS on peer connections (the files are read and checked by
    /// [`crate::start`] before it binds), or, asked for explicitly, none.
    pub security: Security,
    /// True when `peers` holds only this node on purpose: a one-node cluster,
    /// which is its own majority. Without it such a configuration is refused
    /// ([`NodeConfigError::SingleVoter`]): a peer list cut short by a typo
    /// would elect a second leader beside the real cluster's.
    pub single_node: bool,
    /// Where the embedding service (tenure: its HTTP API) answers, HOST:PORT,
    /// advertised to the peers at every handshake
    /// ([`crate::wire::Frame::Hello`]); an unspecified IP means "this host, at
    /// this port" to the peers. `None`: nothing advertised.
    pub api_address: Option<String>,
    /// Where the node's etcd API answers (tenure: `--etcd-listen`),
    /// advertised as `api_address` is; the peers list it as this node's
    /// client URL (etcd's MemberList) and send member changes there.
    pub etcd_address: Option<String>,
    /// True for a node that joins a running cluster, which has added it as a
    /// learner (`tenure server --join`, `docs/MEMBERSHIP.md`): `peers` are
    /// the cluster's members it knows of, where to reach them, and it is not
    /// among them; it takes its configuration from the replicated log.
    pub joining: bool,
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
    /// With TLS, the cluster id is part of every node's name in its
    /// certificate (`node-<id>.<cluster id>`), so it must fit in a DNS name.
    #[error(
        "with TLS, the cluster id names nodes in certificates (node-<id>.<cluster id>), so it \
         must be a DNS name: letters, digits, '-' and '.' (got {0:?})"
    )]
    ClusterIdNotDnsName(String),
    /// The voters are this node alone, and a one-node cluster was not asked for.
    #[error(
        "the voters are node {0} alone: it would be its own majority and lead by itself, beside \
         any cluster it was meant to join. List every voter, or, for a one-node cluster on \
         purpose, set single_node"
    )]
    SingleVoter(NodeId),
    /// `single_node` is set but the voters are more than this node.
    #[error("single_node is set, but the voters are {0} nodes, not this node alone")]
    NotSingleVoter(usize),
    /// The advertised API address is empty or too long for a handshake.
    #[error("the API address must be 1 to {max} bytes long (got {0} bytes)", max = crate::wire::MAX_API_ADDRESS_LEN)]
    BadApiAddress(usize),
    /// The advertised etcd API address is empty or too long for a handshake.
    #[error("the etcd API address must be 1 to {max} bytes long (got {0} bytes)", max = crate::wire::MAX_API_ADDRESS_LEN)]
    BadEtcdAddress(usize),
}

impl NodeConfigError {
    /// The [`NodeConfig`] fields whose values cause this error, the likeliest
    /// fix first; a program that builds the configuration from its own
    /// settings maps them to the names its users know.
    pub fn fields(&self) -> &'static [&'static str] {
        match self {
            NodeConfigError::Election(e) => election_fields(e),
            NodeConfigError::BadClusterId(_) | NodeConfigError::ClusterIdNotDnsName(_) => {
                &["cluster_id"]
            }
            NodeConfigError::DuplicateAddress(..) => &["peers"],
            NodeConfigError::SingleVoter(_) => &["peers", "single_node"],
            NodeConfigError::NotSingleVoter(_) => &["single_node", "peers"],
            NodeConfigError::BadApiAddress(_) => &["api_address"],
            NodeConfigError::BadEtcdAddress(_) => &["etcd_listen"],
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
        ConfigError::ZeroId | ConfigError::IdTooLarge(_) => &["id", "peers"],
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
        if matches!(self.security, Security::MutualTls(_))
            && node_server_name(&self.cluster_id, self.id).is_none()
        {
            return Err(NodeConfigError::ClusterIdNotDnsName(self.cluster_id.clone()));
        }
        for (i, (a, addr_a)) in self.peers.iter().enumerate() {
            if let Some((b, _)) = self.peers[i + 1..].iter().find(|(_, addr_b)| addr_b == addr_a) {
                return Err(NodeConfigError::DuplicateAddress(*a, *b, *addr_a));
            }
        }
        if self.joining {
            // A learner of a running cluster: the log names the voters.
            self.core_config().validate_settings_for(self.protocol)?;
            return self.validate_advertised();
        }
        self.core_config().validate_for(self.protocol)?;
        let alone = self.peers.iter().all(|&(id, _)| id == self.id);
        if alone && !self.single_node {
            return Err(NodeConfigError::SingleVoter(self.id));
        }
        if !alone && self.single_node {
            return Err(NodeConfigError::NotSingleVoter(self.peers.len()));
        }
        self.validate_advertised()
    }

    /// The addresses advertised at every handshake fit in one.
    fn validate_advertised(&self) -> Result<(), NodeConfigError> {
        let bad = |a: &String| a.is_empty() || a.len() > crate::wire::MAX_API_ADDRESS_LEN;
        if let Some(a) = self.api_address.as_ref().filter(|a| bad(a)) {
            return Err(NodeConfigError::BadApiAddress(a.len()));
        }
        if let Some(a) = self.etcd_address.as_ref().filter(|a| bad(a)) {
            return Err(NodeConfigError::BadEtcdAddress(a.len()));
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
            security: Security::InsecureNoTls,
            single_node: false,
            api_address: None,
            etcd_address: None,
            joining: false,
        }
    }

    /// A voter set of this node alone starts only when asked for; asked for,
    /// only alone.
    #[test]
    fn a_lone_voter_needs_single_node() {
        let mut c = config();
        c.peers.truncate(1);
        let err = c.validate().unwrap_err();
        assert_eq!(err, NodeConfigError::SingleVoter(NodeId(1)));
        assert!(err.to_string().contains("single_node"), "{err}");
        assert_eq!(err.fields(), ["peers", "single_node"]);
        c.single_node = true;
        assert_eq!(c.validate(), Ok(()));
        let mut c = config();
        c.single_node = true;
        assert_eq!(c.validate(), Err(NodeConfigError::NotSingleVoter(3)));
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

        // Any cluster id without TLS; a DNS name with it.
        let mut c = config();
        c.cluster_id = "prod db!".into();
        assert_eq!(c.validate(), Ok(()));
        c.security = Security::MutualTls(crate::tls::TlsFiles {
            cert: "n.pem".into(),
            key: "n-key.pem".into(),
            ca: "ca.pem".into(),
        });
        let err = c.validate().unwrap_err();
        assert_eq!(err, NodeConfigError::ClusterIdNotDnsName("prod db!".into()));
        assert_eq!(err.fields(), ["cluster_id"]);
        c.cluster_id = "prod-db".into();
        assert_eq!(c.validate(), Ok(()));

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
