//! Election configuration and its validation.

use crate::drift;
use crate::kind::ProtocolKind;
use crate::types::NodeId;
use std::collections::HashSet;
use std::time::Duration;

/// The largest cluster the core accepts. Elections are all-to-all, so the
/// message cost grows with the square of the cluster size.
pub const MAX_VOTERS: usize = 15;

/// The largest node id: ids are 1 to 65,535, so that a Paxos ballot can
/// name its proposer by id in any configuration of members.
pub const MAX_NODE_ID: u64 = 65_535;

/// The largest clock-drift bound accepted: 10%.
pub const MAX_CLOCK_DRIFT_PPM: u32 = 100_000;

/// The election timeout must be at least this many heartbeat intervals, so that
/// a few lost heartbeats never look like a dead leader.
pub const MIN_TIMEOUT_TO_HEARTBEAT_RATIO: u32 = 4;

/// Settings of one node's elector.
///
/// Every node of a cluster must use the same `voters` list (in the same order),
/// `heartbeat_interval`, `election_timeout` and `clock_drift_ppm`. The quorum is
/// always a majority of `voters`; it is not configurable.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Config {
    /// This node.
    pub id: NodeId,
    /// Every voting member, this node included, in preference order: when the
    /// leader fails, the earliest surviving voter in this list stands first
    /// (the ELECT/VOTE paper's "ties to the smallest id, earliest in the config file").
    pub voters: Vec<NodeId>,
    /// How often a leader sends heartbeats.
    pub heartbeat_interval: Duration,
    /// How long a follower tolerates silence from its leader before it polls for
    /// an election; also the length of a follower's lease on its leader and the
    /// base of the leader's own lease.
    pub election_timeout: Duration,
    /// Delay between successive voters' candidacies (see [`Config::voters`]).
    /// Defaults to half the heartbeat interval.
    pub candidacy_stagger: Duration,
    /// Bound on the relative rate error of any node's clock, in parts per million.
    /// A leader shortens its lease so that it stops leading before any majority
    /// could elect another leader while clocks drift within this bound.
    pub clock_drift_ppm: u32,
    /// A generous bound on one message round trip, fsync of the answer included
    /// (the ELECT/VOTE paper's RTT). The ranked protocol collects claims for this long
    /// before it votes; the Paxos protocol sizes its timeout spread from it.
    /// The Raft protocol does not use it. Defaults to half the heartbeat interval.
    pub round_trip: Duration,
}

/// A configuration that cannot work, with the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The voter list is empty.
    #[error("the cluster has no voters: list at least one node id")]
    NoVoters,
    /// Too many voters.
    #[error("the cluster has {0} voters; at most {MAX_VOTERS} are supported")]
    TooManyVoters(usize),
    /// Node id 0 is reserved.
    #[error("node id 0 is not allowed: node ids are positive integers")]
    ZeroId,
    /// A node id above [`MAX_NODE_ID`].
    #[error("node id {0} is too large: node ids are 1 to {MAX_NODE_ID}")]
    IdTooLarge(NodeId),
    /// A node id appears twice.
    #[error("node id {0} is listed more than once among the voters")]
    DuplicateId(NodeId),
    /// This node is not a voter.
    #[error("this node's id {0} is not among the voters {1:?}")]
    SelfNotVoter(NodeId, Vec<NodeId>),
    /// Zero heartbeat interval.
    #[error("the heartbeat interval must be positive")]
    ZeroHeartbeat,
    /// The timeout is too close to the heartbeat interval.
    #[error(
        "the election timeout ({timeout:?}) must be at least {MIN_TIMEOUT_TO_HEARTBEAT_RATIO} \
         heartbeat intervals ({heartbeat:?}); try an election timeout of 10 heartbeats"
    )]
    TimeoutTooShort {
        /// The heartbeat interval given.
        heartbeat: Duration,
        /// The election timeout given.
        timeout: Duration,
    },
    /// Stagger out of range.
    #[error("the candidacy stagger ({0:?}) must be positive and below the heartbeat interval")]
    BadStagger(Duration),
    /// Drift bound out of range.
    #[error("the clock drift bound {0} ppm is above the maximum of {MAX_CLOCK_DRIFT_PPM} ppm")]
    DriftTooLarge(u32),
    /// Round-trip bound out of range.
    #[error("the round-trip bound ({0:?}) must be positive and at most the heartbeat interval")]
    BadRoundTrip(Duration),
    /// A protocol-specific requirement is not met.
    #[error("{protocol} protocol: {reason}")]
    Protocol {
        /// The protocol whose requirement failed.
        protocol: ProtocolKind,
        /// What is required, with the values given.
        reason: String,
    },
}

impl Config {
    /// A configuration with the default stagger (half a heartbeat) and drift bound (5%).
    pub fn new(
        id: NodeId,
        voters: Vec<NodeId>,
        heartbeat_interval: Duration,
        election_timeout: Duration,
    ) -> Self {
        Config {
            id,
            voters,
            heartbeat_interval,
            election_timeout,
            candidacy_stagger: heartbeat_interval / 2,
            clock_drift_ppm: 50_000,
            round_trip: heartbeat_interval / 2,
        }
    }

    /// Checks that the configuration can work, this node among the voters;
    /// returns the first problem found.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_settings()?;
        if !self.voters.contains(&self.id) {
            return Err(ConfigError::SelfNotVoter(self.id, self.voters.clone()));
        }
        Ok(())
    }

    /// [`Config::validate`] without requiring this node among the voters:
    /// for a node that joins a running cluster, which is no voter of its
    /// configuration (its electorate then says whether it stands, see
    /// [`crate::Electorate`]).
    pub fn validate_settings(&self) -> Result<(), ConfigError> {
        if self.voters.is_empty() {
            return Err(ConfigError::NoVoters);
        }
        if self.voters.len() > MAX_VOTERS {
            return Err(ConfigError::TooManyVoters(self.voters.len()));
        }
        let mut seen = HashSet::new();
        for &v in &self.voters {
            if v.0 == 0 {
                return Err(ConfigError::ZeroId);
            }
            if v.0 > MAX_NODE_ID {
                return Err(ConfigError::IdTooLarge(v));
            }
            if !seen.insert(v) {
                return Err(ConfigError::DuplicateId(v));
            }
        }
        if self.id.0 == 0 {
            return Err(ConfigError::ZeroId);
        }
        if self.id.0 > MAX_NODE_ID {
            return Err(ConfigError::IdTooLarge(self.id));
        }
        if self.heartbeat_interval.is_zero() {
            return Err(ConfigError::ZeroHeartbeat);
        }
        if self.election_timeout < self.heartbeat_interval * MIN_TIMEOUT_TO_HEARTBEAT_RATIO {
            return Err(ConfigError::TimeoutTooShort {
                heartbeat: self.heartbeat_interval,
                timeout: self.election_timeout,
            });
        }
        if self.candidacy_stagger.is_zero() || self.candidacy_stagger >= self.heartbeat_interval {
            return Err(ConfigError::BadStagger(self.candidacy_stagger));
        }
        if self.clock_drift_ppm > MAX_CLOCK_DRIFT_PPM {
            return Err(ConfigError::DriftTooLarge(self.clock_drift_ppm));
        }
        if self.round_trip.is_zero() || self.round_trip > self.heartbeat_interval {
            return Err(ConfigError::BadRoundTrip(self.round_trip));
        }
        Ok(())
    }

    /// Votes needed to win: a majority of all voters.
    pub fn quorum(&self) -> usize {
        quorum(self.voters.len())
    }

    /// How long a leader may keep leading after the send time of the heartbeats a
    /// majority acknowledged: `election_timeout * (1 - rho) / (1 + rho)`.
    ///
    /// A follower refuses to help elect anyone else for `election_timeout` of its
    /// own clock after receiving a heartbeat; with rates within `1 ± rho` of real
    /// time, that is at least `election_timeout / (1 + rho)` of real time, and the
    /// leader's clock measures that span as at least this value.
    pub fn leader_lease(&self) -> Duration {
        drift::shrink(self.election_timeout, self.clock_drift_ppm)
    }
}

/// The majority of `n` voters.
pub fn quorum(n: usize) -> usize {
    n / 2 + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> Config {
        Config::new(
            NodeId(1),
            vec![NodeId(1), NodeId(2), NodeId(3)],
            Duration::from_millis(100),
            Duration::from_millis(1000),
        )
    }

    #[test]
    fn quorum_is_a_majority() {
        let table = [(1, 1), (2, 2), (3, 2), (4, 3), (5, 3), (6, 4), (7, 4), (9, 5), (15, 8)];
        for (n, q) in table {
            assert_eq!(quorum(n), q, "quorum of {n}");
            // Any two quorums intersect.
            assert!(2 * q > n);
        }
    }

    #[test]
    fn default_config_is_valid() {
        assert_eq!(cfg().validate(), Ok(()));
    }

    #[test]
    fn rejects_bad_configs() {
        let mut c = cfg();
        c.voters.push(NodeId(2));
        assert_eq!(c.validate(), Err(ConfigError::DuplicateId(NodeId(2))));

        let mut c = cfg();
        c.id = NodeId(7);
        assert!(matches!(c.validate(), Err(ConfigError::SelfNotVoter(..))));

        let mut c = cfg();
        c.voters = vec![];
        assert_eq!(c.validate(), Err(ConfigError::NoVoters));

        let mut c = cfg();
        c.voters = (1..=16).map(NodeId).collect();
        assert_eq!(c.validate(), Err(ConfigError::TooManyVoters(16)));

        let mut c = cfg();
        c.voters.push(NodeId(0));
        assert_eq!(c.validate(), Err(ConfigError::ZeroId));

        let mut c = cfg();
        c.election_timeout = Duration::from_millis(300);
        assert!(matches!(c.validate(), Err(ConfigError::TimeoutTooShort { .. })));

        let mut c = cfg();
        c.heartbeat_interval = Duration::ZERO;
        assert_eq!(c.validate(), Err(ConfigError::ZeroHeartbeat));

        let mut c = cfg();
        c.candidacy_stagger = Duration::from_millis(100);
        assert!(matches!(c.validate(), Err(ConfigError::BadStagger(_))));

        let mut c = cfg();
        c.clock_drift_ppm = 200_000;
        assert_eq!(c.validate(), Err(ConfigError::DriftTooLarge(200_000)));
    }

    #[test]
    fn nine_voters_are_fine() {
        let mut c = cfg();
        c.voters = (1..=9).map(NodeId).collect();
        assert_eq!(c.validate(), Ok(()));
        assert_eq!(c.quorum(), 5);
    }

    #[test]
    fn leader_lease_accounts_for_drift() {
        let c = cfg();
        // 1000 ms * 0.95 / 1.05
        assert_eq!(c.leader_lease().as_millis(), 904);
        let mut c = cfg();
        c.clock_drift_ppm = 0;
        assert_eq!(c.leader_lease(), c.election_timeout);
    }
}
