//! The time bounds each protocol promises, against which the simulator checks
//! liveness (after healing) and failover (after a leader crash).
//!
//! Every bound is computed from the nodes' configuration, the drift bound and
//! the largest round trip the simulated network can impose. Each protocol
//! states its own bounds here, with the reasoning next to the formula.

use std::time::Duration;
use tenure_core::{drift, Config, ProtocolKind};

/// What a bound is computed from.
#[derive(Clone, Copy, Debug)]
pub struct BoundInputs<'a> {
    /// The protocol the cluster runs.
    pub protocol: ProtocolKind,
    /// The configuration every node shares (but its `id`).
    pub cfg: &'a Config,
    /// The largest round trip the network can impose now, fsync included, in nanoseconds.
    pub max_rtt_ns: u64,
}

impl BoundInputs<'_> {
    /// `local_ns` of one node's clock, as the longest real time it can take when
    /// compared with another node's clock: `local * (1 + rho) / (1 - rho)`.
    pub fn drift_factor(&self, local_ns: u128) -> u64 {
        let local = Duration::from_nanos(u64::try_from(local_ns).unwrap_or(u64::MAX));
        let real = drift::stretch(local, self.cfg.clock_drift_ppm);
        u64::try_from(real.as_nanos()).unwrap_or(u64::MAX)
    }
}

/// The liveness bound: after the network heals and every node runs, a stable
/// leader must exist within this long.
pub fn liveness(b: BoundInputs<'_>) -> Duration {
    match b.protocol {
        ProtocolKind::Raft => raft_liveness(b),
        ProtocolKind::Ranked => ranked_liveness(b),
        ProtocolKind::Paxos => paxos_liveness(b),
    }
}

/// The failover bound: after the leader of a healthy cluster crashes, a new
/// stable leader must exist within this long.
pub fn failover(b: BoundInputs<'_>) -> Duration {
    match b.protocol {
        ProtocolKind::Raft => raft_failover(b),
        ProtocolKind::Ranked => ranked_failover(b),
        ProtocolKind::Paxos => paxos_failover(b),
    }
}

/// The failover bound after a leader crash that a spy reported on time
/// (see [`crate::spy`]), the same for every protocol:
/// `1 ms + max_delay + (3 * heartbeat / NOTICE_REASK_DIVISOR) * (1 + rho) / (1 - rho)
/// + 3 * max_rtt`, where `max_delay` is half of `max_rtt`.
///
/// Why: the spy reports within a millisecond and its notice reaches every
/// survivor within one network delay. The best-ranked survivor stands on
/// its notice at once (raft: a pre-vote; Paxos: a Prepare, the poll
/// skipped); under ranked every survivor polls on its notice and votes as
/// soon as the claims of all survivors are in. A survivor whose notice
/// comes after the candidate's request refuses it for its lease on the dead
/// leader; the candidate asks again a tenth of a heartbeat later, then
/// after as long again as its round has run, so at most three tenths of a
/// heartbeat (local time) after the last notice arrived. Then two exchanges
/// (pre-vote and vote; ELECT and VOTE; Prepare and Accept) and the new
/// leader's first heartbeat, which makes it stable: at most three round
/// trips, fsync included. It does not depend on the election timeout.
pub fn notice_failover(b: BoundInputs<'_>) -> Duration {
    let reask = u128::from(3 * u64::try_from(b.cfg.heartbeat_interval.as_nanos()).unwrap_or(0))
        / u128::from(tenure_core::NOTICE_REASK_DIVISOR);
    let delay = b.max_rtt_ns / 2;
    Duration::from_nanos(1_000_000 + delay + b.drift_factor(reask) + 3 * b.max_rtt_ns)
}

/// Raft: `(2 * election_timeout + (voters + 2) * stagger) * (1 + rho) / (1 - rho)
/// + 10 * max_rtt`.
///
/// Why: a follower's lease on a failed leader and its election deadline both
/// end within one election timeout (plus its rank's stagger) of local time; a
/// first pre-vote can be refused by leases that still run, and the retry comes
/// at most one more election timeout plus two staggers later. Local durations
/// stretch by up to `(1 + rho) / (1 - rho)` in real time between two drifting
/// clocks, and each of the (pre-vote, vote, heartbeat, acknowledgement)
/// exchanges of up to two rounds costs a round trip.
fn raft_liveness(b: BoundInputs<'_>) -> Duration {
    let c = b.cfg;
    let local = 2 * c.election_timeout.as_nanos()
        + (c.voters.len() as u128 + 2) * c.candidacy_stagger.as_nanos();
    Duration::from_nanos(b.drift_factor(local) + 10 * b.max_rtt_ns)
}

/// Raft: `(election_timeout + 3 * stagger) * (1 + rho) / (1 - rho) + 4 * max_rtt`.
///
/// The first-ranked survivor stands one election timeout after the last
/// heartbeat (plus at most three staggers, when a drifting follower's lease
/// makes it retry), and the pre-vote and vote each take a round trip.
fn raft_failover(b: BoundInputs<'_>) -> Duration {
    let c = b.cfg;
    let local = c.election_timeout.as_nanos() + 3 * c.candidacy_stagger.as_nanos();
    Duration::from_nanos(b.drift_factor(local) + 4 * b.max_rtt_ns)
}

/// Ranked: `(2 * (stretch(T) + rtt_cfg) + T / 2 + 2 * rtt_cfg) * (1 + rho) / (1 - rho)
/// + 10 * max_rtt`.
///
/// Why: a round (from the start of an elector's lease to its vote) is
/// `stretch(T) + rtt_cfg` of local time: the lease (`election_timeout`), the
/// wait for the other electors' leases, which end at most
/// `stretch(T) = T * (1 + rho) / (1 - rho)` after the same start, and seed
/// 001's collection window (`round_trip`). After healing, every elector is
/// bound by a lease of at most one election timeout (on a leader, on the node
/// it voted for, or the anonymous one after a restart); its poll then votes
/// within one round.
/// Electors whose slates differed (claims delayed by the faults just healed)
/// may split that round; their votes bind them for another election timeout,
/// after which every slate is complete and the second round elects: each
/// elector polls again one election timeout after its vote, and that claim
/// (sent more than a leader lease after the one voted for) frees the electors
/// still bound by their votes for it, so they join its round instead of
/// voting in rounds, and terms, of their own; an elector still polling from
/// the first round claims afresh when that round's claims arrive, so it is
/// on every slate of the second. A poll
/// without a majority gives up after `T / 2` plus a round trip and retries,
/// and a leader that learns of a higher term polls again at once (two more
/// configured round trips). Local durations stretch by up to
/// `(1 + rho) / (1 - rho)` in real time, and each of the exchanges (ELECT,
/// VOTE, LEAD, acknowledgement) of two rounds costs a network round trip.
fn ranked_liveness(b: BoundInputs<'_>) -> Duration {
    let c = b.cfg;
    let local =
        2 * ranked_round(c) + c.election_timeout.as_nanos() / 2 + 2 * c.round_trip.as_nanos();
    Duration::from_nanos(b.drift_factor(local) + 10 * b.max_rtt_ns)
}

/// Ranked: `(stretch(T) + rtt_cfg) * (1 + rho) / (1 - rho) + 2 * max_rtt`.
///
/// Every survivor's lease on the crashed leader started when it received the
/// leader's last LEAD (at most one network delay after the crash); every
/// survivor votes one round (`stretch(T) + rtt_cfg`, see the liveness bound)
/// after that on its own clock (the claimants announce their vote times, so
/// all wait for the latest), all with the same slate, so the first round
/// elects. The votes (with their fsync) and
/// the new leader's first LEAD each cost one more network delay.
fn ranked_failover(b: BoundInputs<'_>) -> Duration {
    Duration::from_nanos(b.drift_factor(ranked_round(b.cfg)) + 2 * b.max_rtt_ns)
}

/// One ranked round, in nanoseconds of local time: `stretch(T) + rtt_cfg`,
/// where `stretch(T) = T * (1 + rho) / (1 - rho)`.
fn ranked_round(c: &Config) -> u128 {
    drift::stretch(c.election_timeout, c.clock_drift_ppm).as_nanos() + c.round_trip.as_nanos()
}

/// Paxos: `(2 * (election_timeout + spread) + spread + 11 * round_trip)
/// * (1 + rho) / (1 - rho) + 10 * max_rtt`, where `spread` is
/// [`tenure_core::paxos::timeout_spread`] and `round_trip` the configured bound.
///
/// Why: no node's poll deadline is ever set more than `election_timeout +
/// spread` ahead, so every node polls within that long of the heal. A first
/// poll may still find evidence (a node that missed the last Commits or the
/// last leader's slot); it then learns the newest heartbeat and slot from every
/// answer, so its next poll, at most `election_timeout + spread` later, finds
/// none unless a leader is at work. By then the leases and holds of the faulty
/// period have run out (none lasts an election timeout), so a majority is free:
/// the poll (window `2 * round_trip`), possibly one wait for a poll hold
/// (`2 * round_trip` plus `round_trip` of jitter) and one duel with another
/// proposer, after which the loser retries within `4 * round_trip + spread`
/// and finds the winner's lease. Local durations stretch by up to
/// `(1 + rho) / (1 - rho)` between drifting clocks, and the polls, Prepares,
/// Accepts and Commits of two attempts cost up to ten network round trips.
fn paxos_liveness(b: BoundInputs<'_>) -> Duration {
    let c = b.cfg;
    let spread = tenure_core::paxos::timeout_spread(c).as_nanos();
    let local =
        2 * (c.election_timeout.as_nanos() + spread) + spread + 11 * c.round_trip.as_nanos();
    Duration::from_nanos(b.drift_factor(local) + 10 * b.max_rtt_ns)
}

/// Paxos: `(election_timeout + spread + 3 * round_trip) * (1 + rho) / (1 - rho)
/// + 5 * max_rtt`.
///
/// Every survivor polls within `election_timeout + spread` of its last Commit.
/// The first one's poll finds no evidence (the survivors heard the same last
/// Commits) and, as follower leases are shorter than the timeout by the drift
/// bound, a free majority. If a follower's lease still runs by a few
/// milliseconds (heartbeat arrival skew) or another poller holds the
/// followers, the poller waits out its window (`2 * round_trip`, the dead
/// leader never answers) and polls again within `round_trip`. Then the poll,
/// Prepare (with fsync) and Accept each take a round trip, and the first Commit
/// half of one; one more round trip covers the poll that had to be repeated.
fn paxos_failover(b: BoundInputs<'_>) -> Duration {
    let c = b.cfg;
    let spread = tenure_core::paxos::timeout_spread(c).as_nanos();
    let local = c.election_timeout.as_nanos() + spread + 3 * c.round_trip.as_nanos();
    Duration::from_nanos(b.drift_factor(local) + 5 * b.max_rtt_ns)
}
