//! How long one leader failover may take, from the leader's crash to a
//! successor that serves requests: what a client of the cluster must ride
//! out (docs/ELECTIONS.md, "Riding out a tenure failover").
//!
//! The bound adds, for a cluster whose other voters are healthy:
//!
//! * detection: a follower stands `election_timeout` after the last
//!   heartbeat it received (before the crash), on a clock that may run
//!   slow: `stretch(T)`;
//! * the ranks ahead of the survivor that stands: `voters × stagger` (the
//!   raft and ranked protocols; one stagger per rank plus a jitter below a
//!   quarter of one), or the random spread of paxos' timeouts;
//! * the election's messages (pre-vote and vote, the ranked protocol's
//!   claims, paxos' poll, prepare and accept) and the successor's
//!   synchronisation and no-op, with their fsyncs:
//!   [`ELECTION_ROUND_TRIPS`] + [`READY_ROUND_TRIPS`] round trips.
//!
//! It is an estimate with margins for planning TTLs (a liveness matter: a
//! session that cannot ride a failover ends safely, at its deadline), not a
//! promise a lost message or a second crash keeps.

use crate::config::Config;
use crate::drift;
use crate::kind::ProtocolKind;
use std::time::Duration;

/// Round trips of an election once a survivor stands: pre-vote and vote
/// (raft), the claims' collection and the vote (ranked), the poll, prepare
/// and accept (paxos), each with an fsync.
pub const ELECTION_ROUND_TRIPS: u32 = 4;
/// Round trips from winning to serving: the synchronisation of the log and
/// the no-op's commit (docs/REPLICATION.md), each with an fsync.
pub const READY_ROUND_TRIPS: u32 = 2;

/// The longest one failover of a cluster configured with `cfg` running
/// `protocol` is expected to take: crash to a ready successor.
pub fn failover_bound(cfg: &Config, protocol: ProtocolKind) -> Duration {
    let voters = u32::try_from(cfg.voters.len()).unwrap_or(u32::MAX);
    let ranks = match protocol {
        ProtocolKind::Raft | ProtocolKind::Ranked => cfg.candidacy_stagger.saturating_mul(voters),
        ProtocolKind::Paxos => crate::paxos::timeout_spread(cfg),
    };
    drift::stretch(cfg.election_timeout, cfg.clock_drift_ppm)
        .saturating_add(ranks)
        .saturating_add(cfg.round_trip.saturating_mul(ELECTION_ROUND_TRIPS + READY_ROUND_TRIPS))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::NodeId;

    fn cfg(hb: u64, t: u64) -> Config {
        Config::new(
            NodeId(1),
            vec![NodeId(1), NodeId(2), NodeId(3)],
            Duration::from_millis(hb),
            Duration::from_millis(t),
        )
    }

    #[test]
    fn the_default_timings_give_about_one_and_a_half_seconds() {
        // stretch(1000 ms, 5%) = 1105 ms, 3 x 50 ms of stagger, 6 x 50 ms.
        let c = cfg(100, 1000);
        assert_eq!(failover_bound(&c, ProtocolKind::Raft).as_millis(), 1555);
        assert_eq!(failover_bound(&c, ProtocolKind::Ranked).as_millis(), 1555);
        // Paxos: a spread of 10 round trips instead of the ranks.
        assert_eq!(failover_bound(&c, ProtocolKind::Paxos).as_millis(), 1905);
        // The measured SIGKILL failovers (docs/protocols.md, p99 at these
        // timings: raft 1007, ranked 1156, paxos 1359 ms) are below it.
        assert!(failover_bound(&cfg(30, 300), ProtocolKind::Raft) < Duration::from_millis(600));
    }
}
