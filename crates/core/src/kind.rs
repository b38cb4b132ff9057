//! The election protocols tenure offers, by name.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Which election protocol a node runs. Every node of a cluster must run the same one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProtocolKind {
    /// The Raft-style election with PreVote, CheckQuorum leases and ranked
    /// candidacy ([`crate::RaftElector`]); the default.
    #[default]
    Raft,
    /// The two-phase ELECT/VOTE election with deterministic vote ranking
    /// (the ELECT/VOTE paper, [`crate::RankedElector`]).
    Ranked,
    /// Paxos leader election with low-ball polling (TRex, [`crate::PaxosElector`]).
    Paxos,
}

impl ProtocolKind {
    /// Every protocol, the default first.
    pub const ALL: [ProtocolKind; 3] =
        [ProtocolKind::Raft, ProtocolKind::Ranked, ProtocolKind::Paxos];

    /// The name used in configuration files and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            ProtocolKind::Raft => "raft",
            ProtocolKind::Ranked => "ranked",
            ProtocolKind::Paxos => "paxos",
        }
    }
}

impl fmt::Display for ProtocolKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A protocol name that is not one of [`ProtocolKind::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown protocol {0:?}: expected one of \"raft\", \"ranked\" or \"paxos\"")]
pub struct UnknownProtocol(pub String);

impl FromStr for ProtocolKind {
    type Err = UnknownProtocol;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ProtocolKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| UnknownProtocol(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for k in ProtocolKind::ALL {
            assert_eq!(k.as_str().parse::<ProtocolKind>(), Ok(k));
        }
        let e = "zab".parse::<ProtocolKind>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown protocol \"zab\": expected one of \"raft\", \"ranked\" or \"paxos\""
        );
    }
}
