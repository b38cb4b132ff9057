//! Paxos leader election with low-ball polling (the TRex wiki's "Leader
//! Elections"), `protocol = "paxos"`.
//!
//! Every node is proposer, acceptor and learner. A node that stops hearing the
//! leader first polls the cluster with a low-ball `Prepare` (ballot zero), which
//! changes nothing anywhere, and reads the evidence in the answers: a higher
//! committed slot (strong evidence) or `quorum - 1` higher leader heartbeats
//! (weak evidence) mean a leader is at work and the node waits again. Only when
//! a majority answered, none shows a working leader and a majority is free to
//! promise does it issue a high `Prepare` with a ballot above every promise it
//! has seen, promising it to itself. With a majority of `PrepareAck`s it runs
//! phase 2 for a no-op at the next slot (`Accept`, majority of `AcceptAck`s)
//! and leads; its `Commit`, repeated every heartbeat interval with a growing
//! heartbeat counter, is both the learning message and the leader heartbeat.
//!
//! Leases (not in the seed, see `docs/protocol-paxos.md`) keep leadership
//! exclusive in time: an acceptor that promised, accepted or heard a Commit
//! refuses to promise or accept anyone else's ballot until its lease ends; the
//! leader leads only while a majority acknowledged a recent Commit.
//!
//! # Durable state
//! [`HardState::term`] is the highest ballot this node promised (its own
//! included) and [`HardState::voted_for`] the proposer of that ballot. A
//! ballot `(counter, node)` is encoded into one [`Term`] as
//! `counter * 65536 + id` ([`BALLOT_NODES`]), so that `Term` order is ballot
//! order and each ballot names exactly one proposer, whatever the
//! configuration of members (node ids are at most [`crate::MAX_NODE_ID`]).
//! Accepted and committed slots are volatile: they carry no user data, and
//! safety does not depend on them.

use crate::config::{Config, ConfigError, MAX_VOTERS};
use crate::drift;
use crate::electorate::Freshness;
use crate::kind::ProtocolKind;
pub use crate::message::paxos::{PaxosMessage, LOW_BALL};
use crate::message::Message;
use crate::protocol::{HardState, Reason};
use crate::seat::{hold_left, release_lease, remap, take_named, FollowerLease, Rules, Seat};
use crate::time::Instant;
use crate::types::{Lsn, NodeId, Role, Term};
use rand_core::RngCore;
use std::time::Duration;

/// Ballot numbers per counter value: a ballot is `counter * BALLOT_NODES +
/// id`, the proposer's node id, below it ([`crate::MAX_NODE_ID`]).
pub const BALLOT_NODES: u64 = crate::config::MAX_NODE_ID + 1;

/// The election cycle of the seed (poll, Prepare, Accept, Commit), in half
/// round trips: the election timeout must exceed 3.5 round trips.
pub const MIN_TIMEOUT_HALF_ROUND_TRIPS: u32 = 7;

/// The smallest timeout spread, in round trips (the seed's "max - min > 10 RTT"
/// for three nodes).
pub const MIN_SPREAD_ROUND_TRIPS: u32 = 10;

/// Timeout spread per node that may time out after a leader failure (all
/// voters but the failed leader), in round trips. With `m` such nodes and a
/// spread of `5 m` round trips, the first two timeouts fall more than 3.5
/// round trips apart with probability `(1 - 0.7 / m)^m`: 0.42 for three nodes
/// (the seed's figure), 0.46 for five, about 0.5 for any larger cluster.
pub const SPREAD_ROUND_TRIPS_PER_NODE: u32 = 5;

/// How long a poll waits for answers, in round trips.
pub const POLL_WINDOW_ROUND_TRIPS: u32 = 2;

/// After answering a poll as free, a node reports itself busy to other pollers
/// for this many round trips, giving the first poller time to send its Prepare.
pub const POLL_HOLD_ROUND_TRIPS: u32 = 2;

/// Fixed part of the wait before a node that failed a candidacy polls again,
/// in round trips (the seed's 3.5 round-trip cycle, rounded up); a random
/// share of the timeout spread is added.
pub const RETRY_ROUND_TRIPS: u32 = 4;

/// Protocol-specific configuration checks: an election timeout above 3.5
/// round trips (the seed's minimum:
/// a poll, a Prepare and an Accept with their fsyncs must fit in it, and a
/// leader's lease must outlast its own election).
pub fn validate(cfg: &Config) -> Result<(), ConfigError> {
    let fail =
        |reason: String| Err(ConfigError::Protocol { protocol: ProtocolKind::Paxos, reason });
    if cfg.voters.len() > MAX_VOTERS {
        return fail(format!("{} voters; at most {MAX_VOTERS} are supported", cfg.voters.len()));
    }
    if cfg.election_timeout * 2 <= cfg.round_trip * MIN_TIMEOUT_HALF_ROUND_TRIPS {
        return fail(format!(
            "the election timeout ({:?}) must exceed 3.5 round trips (3.5 x {:?} = {:?}, fsync \
             included): a poll, a Prepare and an Accept must fit in it",
            cfg.election_timeout,
            cfg.round_trip,
            cfg.round_trip * MIN_TIMEOUT_HALF_ROUND_TRIPS / 2
        ));
    }
    Ok(())
}

/// The random part of a follower's timeout: a node polls
/// `election_timeout + uniform(0, spread)` after the last Commit it received.
/// The spread is `max(10, 5 * (voters - 1))` round trips (see
/// [`SPREAD_ROUND_TRIPS_PER_NODE`]): 10 for three nodes, 20 for five.
pub fn timeout_spread(cfg: &Config) -> Duration {
    let others = u32::try_from(cfg.voters.len().saturating_sub(1)).unwrap_or(u32::MAX);
    let rtts = SPREAD_ROUND_TRIPS_PER_NODE.saturating_mul(others).max(MIN_SPREAD_ROUND_TRIPS);
    cfg.round_trip.saturating_mul(rtts)
}

/// How long an acceptor refuses other proposers after a promise, an accept or
/// a Commit: `election_timeout * (1 - rho) / (1 + rho)`. Shorter than the
/// election timeout by the drift bound, so it has ended on every clock when
/// any node's timeout (at least one election timeout) fires.
pub fn follower_lease(cfg: &Config) -> Duration {
    cfg.leader_lease()
}

/// How long a leader may lead after the send time of the Commits a majority
/// acknowledged: [`follower_lease`] shortened once more by the drift bound,
/// so it ends before any acknowledging acceptor's lease does.
pub fn leader_lease(cfg: &Config) -> Duration {
    drift::shrink(follower_lease(cfg), cfg.clock_drift_ppm)
}

/// A promise of an acceptor not to help anyone but `holder` until `until`.
/// `holder == None` is the anonymous lease a node starts with: it may have
/// granted a lease before it crashed and must keep it without remembering it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Lease {
    holder: Option<NodeId>,
    /// The ballot the lease was granted in (a promise, an accept or a Commit).
    ballot: Term,
    until: Instant,
}

impl FollowerLease for Lease {
    fn holder(&self) -> Option<NodeId> {
        self.holder
    }

    fn until(&self) -> Instant {
        self.until
    }
}

/// One node's answer to a poll.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct PollAnswer {
    promised: Term,
    committed: u64,
    heartbeat: Option<Lsn>,
    busy: Option<Duration>,
}

/// A low-ball poll in progress.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Poll {
    attempt: u64,
    deadline: Instant,
    /// Per member index.
    answers: Vec<Option<PollAnswer>>,
}

/// The phase of a candidacy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Phase {
    /// Waiting for promises.
    Prepare,
    /// Waiting for acceptances of the no-op at `slot`, sent at `sent_at`.
    Accept { slot: u64, sent_at: Instant },
}

/// A high Prepare (phase 1) and then phase 2 in progress.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Candidacy {
    attempt: u64,
    ballot: Term,
    started: Instant,
    /// The whole candidacy must end by then: `started + leader_lease`.
    deadline: Instant,
    phase: Phase,
    /// Per voter index: promised (`Some(true)`) or refused.
    promises: Vec<Option<bool>>,
    /// Per voter index: accepted (`Some(true)`) or refused.
    accepts: Vec<Option<bool>>,
    /// The highest committed or accepted slot reported by the promisers.
    max_slot: u64,
    /// Set for a candidacy started on a death notice about the leader: an
    /// acceptor that refuses for a lease has most likely not had its own
    /// notice yet, so it is asked again (`reask_at`) instead of counting as
    /// a refusal.
    after_notice: bool,
    /// Per voter index: when to send the Prepare again (see `after_notice`
    /// and `handover`).
    reask_at: Vec<Option<Instant>>,
    /// The resigned ballot this candidacy succeeds, for a handover: an
    /// acceptor that refuses for a lease has most likely not had the
    /// resignation yet, so it is asked again (`reask_at`), as after a
    /// death notice, instead of counting as a refusal.
    handover: Option<Term>,
}

/// What a node is doing towards an election.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Round {
    Poll(Poll),
    Candidacy(Candidacy),
}

/// How a poll ended.
enum PollOutcome {
    /// Strong or weak evidence of a working leader.
    Evidence,
    /// A majority is free to promise: issue a high Prepare.
    Elect,
    /// No free majority: poll again at the given time.
    Retry(Instant),
}

/// The Paxos elector. Construct it with [`PaxosElector::new`] and drive it
/// through the [`Protocol`](crate::Protocol) trait, whose documentation states the calling contract.
///
/// `R` is the caller's seeded random source (used for the timeout spread).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PaxosElector<R> {
    seat: Seat,
    rng: R,
    spread: Duration,
    lease: Option<Lease>,
    /// A lease granted before `lease` that may still run (see the raft
    /// elector's `prior_lease`): a Commit of another leader adds its lease, it
    /// does not end the earlier promise.
    prior_lease: Option<Lease>,
    /// The poller this node last answered as free, and until when it reports
    /// itself busy to other pollers (a liveness aid, not a lease).
    poll_hold: Option<Lease>,
    /// Follower: when to poll.
    election_deadline: Instant,
    round: Option<Round>,
    /// Number of the last poll or candidacy this node started.
    attempt: u64,
    /// The highest ballot heard of (promises reported by others included).
    highest_seen: Term,
    /// The highest slot known to be committed.
    committed: u64,
    /// The highest slot accepted.
    accepted_slot: u64,
    /// The newest heartbeat known, directly or from poll answers: weak
    /// evidence must beat it.
    hb_baseline: Option<Lsn>,
    /// Per voter index: a handover's Prepare from that voter refused for a
    /// lease because the resignation naming it had not arrived yet (they
    /// travel on different connections): answered again when it arrives
    /// (see [`EarlyHandover`]). One slot per voter: a Prepare from one
    /// cannot displace another's.
    early_handovers: Vec<Option<EarlyHandover>>,
}

/// A handover Prepare that came before the resignation naming its proposer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct EarlyHandover {
    ballot: Term,
    attempt: u64,
    /// The resigned ballot the proposer said it succeeds.
    handover: Term,
}

impl<R: RngCore + Send> PaxosElector<R> {
    /// A new elector starting as a follower from the durable `state` (all
    /// default for a fresh node), holding an anonymous lease of one election
    /// timeout. `cfg` must pass [`Config::validate_for`] for
    /// [`ProtocolKind::Paxos`].
    pub fn new(cfg: Config, state: HardState, rng: R, now: Instant) -> Self {
        debug_assert_eq!(cfg.validate_settings().and_then(|()| validate(&cfg)), Ok(()));
        let spread = timeout_spread(&cfg);
        let lease = Lease { holder: None, ballot: state.term, until: now + cfg.election_timeout };
        let lease_length = leader_lease(&cfg);
        let seat = Seat::new(cfg, state, lease_length, now);
        let slots = seat.slots();
        let mut elector = PaxosElector {
            seat,
            rng,
            spread,
            lease: Some(lease),
            prior_lease: None,
            poll_hold: None,
            election_deadline: Instant::MAX,
            round: None,
            attempt: 0,
            highest_seen: state.term,
            committed: 0,
            accepted_slot: 0,
            hb_baseline: None,
            early_handovers: vec![None; slots],
        };
        elector.election_deadline = now + elector.timeout();
        elector
    }

    // ---- Helpers ----

    /// The node that may propose `ballot` (none for the low ball).
    fn proposer_of(&self, ballot: Term) -> Option<NodeId> {
        if ballot == LOW_BALL {
            return None;
        }
        Some(NodeId(ballot.0 % BALLOT_NODES)).filter(|id| id.0 != 0)
    }

    /// The configuration this node holds, carried by its requests.
    fn freshness(&self) -> Freshness {
        self.seat.electorate.freshness()
    }

    /// Whether a proposer whose log is as fresh as `freshness` is less fresh than this
    /// node's (the freshness rule, [`crate::electorate`]): refused.
    fn stale(&mut self, freshness: Freshness) -> bool {
        let stale = freshness < self.freshness();
        if stale {
            self.seat.counters().messages_ignored += 1;
        }
        stale
    }

    /// This node's smallest ballot above `above`, unless it would pass
    /// [`Term::MAX_VALID`].
    fn next_ballot(&self, above: Term) -> Option<Term> {
        let counter = (above.0 / BALLOT_NODES).checked_add(1)?;
        let ballot = counter.checked_mul(BALLOT_NODES)?.checked_add(self.seat.cfg.id.0)?;
        Some(Term(ballot)).filter(|b| b.is_valid())
    }

    /// Raises the promise to `ballot` (of `proposer`) and asks to persist it.
    fn promise(&mut self, ballot: Term, proposer: NodeId) {
        debug_assert!(ballot > self.seat.term);
        // A kept handover Prepare can be answered only on the resignation
        // of the ballot this node follows: one below `ballot` never will.
        for kept in &mut self.early_handovers {
            *kept = kept.filter(|e| e.handover >= ballot);
        }
        self.seat.term = ballot;
        self.seat.voted_for = Some(proposer);
        self.highest_seen = self.highest_seen.max(ballot);
        self.seat.persist();
        // A known leader belongs to a lower ballot: it is superseded.
        self.seat.set_leader(None);
    }

    /// Uniform in `[0, max)`.
    fn jitter(&mut self, max: Duration) -> Duration {
        let nanos = u64::try_from(max.as_nanos()).unwrap_or(u64::MAX);
        if nanos == 0 {
            return Duration::ZERO;
        }
        Duration::from_nanos(self.rng.next_u64() % nanos)
    }

    /// The seed's randomized timeout: `election_timeout + uniform(0, spread)`.
    fn timeout(&mut self) -> Duration {
        let spread = self.spread;
        self.seat.cfg.election_timeout + self.jitter(spread)
    }

    /// Wait after a failed candidacy: one election cycle plus a random share
    /// of the spread, so that dueling proposers separate.
    fn retry_delay(&mut self) -> Duration {
        let spread = self.spread;
        self.seat.cfg.round_trip * RETRY_ROUND_TRIPS + self.jitter(spread)
    }

    fn grant_lease(&mut self, now: Instant, holder: NodeId, ballot: Term) {
        self.lease = Some(Lease {
            holder: Some(holder),
            ballot,
            until: now + follower_lease(&self.seat.cfg),
        });
    }

    /// While this node must not promise or accept `proposer`'s ballot: for how
    /// long. It leads with a valid lease, or holds a running lease on another
    /// node. A handover Prepare passes a lease on the resigned leadership.
    fn lease_blocks(
        &self,
        now: Instant,
        proposer: NodeId,
        handover: Option<Term>,
    ) -> Option<Duration> {
        if self.seat.role == Role::Leader && now < self.seat.leader_lease_until {
            return Some(self.seat.leader_lease_until.saturating_since(now));
        }
        let blocks = |l: Option<Lease>| {
            l.filter(|l| {
                now < l.until
                    && l.holder != Some(proposer)
                    && !(l.holder.is_some() && handover == Some(l.ballot))
            })
            .map(|l| l.until.saturating_since(now))
        };
        blocks(self.lease).max(blocks(self.prior_lease))
    }

    /// Whether, and for how long, this node would refuse to promise `asker`
    /// now; `None` means free.
    fn busy_for(&self, now: Instant, asker: NodeId) -> Option<Duration> {
        if self.seat.storage_failed || !self.seat.grants() {
            return Some(self.seat.cfg.election_timeout);
        }
        if let Some(d) = self.lease_blocks(now, asker, None) {
            return Some(d);
        }
        if let Some(h) = self.poll_hold.filter(|h| h.holder != Some(asker) && now < h.until) {
            return Some(h.until.saturating_since(now));
        }
        match &self.round {
            Some(Round::Candidacy(c)) => Some(c.deadline.saturating_since(now)),
            Some(Round::Poll(p)) => {
                // Two simultaneous polls: the lower id wins, the other
                // yields (see `on_poll`).
                let asker_first = asker < self.seat.cfg.id;
                (!asker_first).then(|| p.deadline.saturating_since(now))
            }
            None => None,
        }
    }

    /// The newest heartbeat this node can vouch for: its own as leader, else
    /// the last one it received.
    fn my_heartbeat(&self) -> Option<Lsn> {
        if self.seat.role == Role::Leader {
            Some(Lsn { term: self.seat.term, counter: self.seat.lsn_counter })
        } else {
            self.seat.last_lsn
        }
    }

    /// Steps down if a leader's lease has run out. Called first on every input
    /// so that a leader resumed after a pause never acts on an expired lease.
    fn step_down_on_lost_lease(&mut self, now: Instant) {
        if self.seat.lease_lost(now) {
            let own = self.my_heartbeat();
            self.seat.last_lsn = own;
            self.hb_baseline = self.hb_baseline.max(own);
            self.become_follower(Reason::QuorumLost);
            self.seat.set_leader(None);
            // Poll again soon: acceptors whose lease on us still runs are free
            // for us, so if acknowledgements were merely late we are
            // re-elected at once instead of leaving the cluster leaderless.
            let rtt = self.seat.cfg.round_trip;
            self.election_deadline = now + self.jitter(rtt);
        }
    }

    // ---- Polling (low ball) ----

    fn start_poll(&mut self, now: Instant) {
        if self.seat.storage_failed || !self.seat.stands() {
            // A node that cannot persist cannot promise itself, and one that
            // may not stand (a learner, a removed node) must not: no
            // candidacy. An election timeout without a word from its
            // leader: it knows none (a removed node told its clients of a
            // leader dead for seconds).
            self.seat.set_leader(None);
            self.election_deadline = now + self.timeout();
            return;
        }
        if let Some(l) = self.lease.filter(|l| now < l.until) {
            // Defensive: never poll while our own lease on someone runs.
            self.election_deadline = l.until;
            return;
        }
        self.lease = None;
        self.seat.renew_stall_grace();
        if self.seat.others().next().is_none() {
            // The only voter: nobody to poll.
            self.start_candidacy(now, None, Reason::PreVoteWon);
            return;
        }
        self.seat.counters().pre_votes_started += 1;
        self.attempt += 1;
        let attempt = self.attempt;
        let deadline = now + self.seat.cfg.round_trip * POLL_WINDOW_ROUND_TRIPS;
        self.round =
            Some(Round::Poll(Poll { attempt, deadline, answers: vec![None; self.seat.slots()] }));
        self.seat.set_role(Role::PreCandidate, Reason::ElectionTimeout);
        let freshness = self.freshness();
        self.seat.broadcast(PaxosMessage::Prepare {
            ballot: LOW_BALL,
            attempt,
            handover: None,
            freshness,
        });
    }

    /// Concludes the poll if its outcome is known (or its window closed).
    fn check_poll(&mut self, now: Instant) {
        let Some(Round::Poll(poll)) = &self.round else { return };
        let quorum = self.seat.cfg.quorum();
        let n = self.seat.voter_count();
        let voters = poll.answers[..n].iter();
        let answers: Vec<PollAnswer> =
            voters.enumerate().filter(|&(i, _)| i != self.seat.me).flat_map(|(_, a)| *a).collect();
        let own = usize::from(self.seat.votes());
        let strong = answers.iter().any(|a| a.committed > self.committed);
        let higher = answers.iter().filter(|a| a.heartbeat > self.hb_baseline).count();
        let weak = quorum >= 2 && higher >= quorum - 1;
        let free = own + answers.iter().filter(|a| a.busy.is_none()).count();
        let all = answers.len() + own == n;
        let expired = now >= poll.deadline;
        let outcome = if strong || weak {
            PollOutcome::Evidence
        } else if free >= quorum {
            PollOutcome::Elect
        } else if all || expired {
            // Wait until enough busy nodes are free, if that can ever make a
            // majority; else (too few answers) a full timeout.
            let mut waits: Vec<Duration> = answers
                .iter()
                .filter_map(|a| a.busy)
                .map(|d| drift::stretch(d, self.seat.cfg.clock_drift_ppm))
                .collect();
            waits.sort_unstable();
            let needed = quorum - free;
            match waits.get(needed - 1) {
                Some(&w) => {
                    let w = w.min(self.seat.cfg.election_timeout) + Duration::from_millis(1);
                    let rtt = self.seat.cfg.round_trip;
                    PollOutcome::Retry(now + w + self.jitter(rtt))
                }
                None => PollOutcome::Retry(now + self.timeout()),
            }
        } else {
            return;
        };
        // Learn from every answer whatever the outcome: the committed slot
        // (the seed's retransmission of committed values) and the newest
        // heartbeat, so that the next poll needs fresh evidence.
        for a in &answers {
            self.committed = self.committed.max(a.committed);
            self.hb_baseline = self.hb_baseline.max(a.heartbeat);
            self.highest_seen = self.highest_seen.max(a.promised);
        }
        self.round = None;
        match outcome {
            PollOutcome::Evidence => {
                self.become_follower(Reason::RoundFailed);
                if self.hb_baseline.is_some_and(|h| h.term > self.seat.term) {
                    // A newer leader than the one we knew is at work.
                    self.seat.set_leader(None);
                }
                self.election_deadline = now + self.timeout();
            }
            PollOutcome::Elect => self.start_candidacy(now, None, Reason::PreVoteWon),
            PollOutcome::Retry(at) => {
                self.become_follower(Reason::RoundFailed);
                self.seat.set_leader(None);
                self.election_deadline = at;
            }
        }
    }

    fn on_poll(&mut self, now: Instant, from: NodeId, attempt: u64, freshness: Freshness) {
        // A poller whose log is older than ours could not win our promise
        // (`on_prepare` refuses it as stale): it is told we are busy for an
        // election timeout and given no hold, so that it neither wins the
        // poll on our answer nor keeps the acceptors it holds from a
        // fresher node that can win (Raft's PreVote refuses such a
        // candidate too).
        let busy = if freshness < self.freshness() {
            Some(self.seat.cfg.election_timeout)
        } else {
            self.busy_for(now, from)
        };
        if busy.is_none() {
            if self.seat.role == Role::PreCandidate {
                // A lower-ranked poller asked while we poll too: yield to it.
                self.become_follower(Reason::RoundFailed);
            }
            let hold = self.seat.cfg.round_trip * POLL_HOLD_ROUND_TRIPS;
            self.poll_hold =
                Some(Lease { holder: Some(from), ballot: LOW_BALL, until: now + hold });
            // Give the poller time to win before polling ourselves.
            let rtt = self.seat.cfg.round_trip;
            let not_before = now + hold + self.jitter(rtt);
            self.election_deadline = self.election_deadline.max(not_before);
        }
        let msg = PaxosMessage::PrepareNack {
            ballot: LOW_BALL,
            attempt,
            promised: self.seat.term,
            committed: self.committed,
            heartbeat: self.my_heartbeat(),
            busy_ms: busy.map(ceil_ms),
        };
        self.seat.send(from, msg);
    }

    // ---- Candidacy (high ballot) ----

    /// Issues a high Prepare; `reason` says why (a poll that found a free
    /// majority, a handover, a death notice about the leader).
    fn start_candidacy(&mut self, now: Instant, handover: Option<Term>, reason: Reason) {
        let above = self.seat.term.max(self.highest_seen);
        let ballot = self.next_ballot(above).filter(|_| self.seat.stands());
        let Some(ballot) = ballot.filter(|_| !self.seat.storage_failed) else {
            // A node that cannot persist, or has no valid ballot left, or
            // that may not stand, cannot stand.
            let reason =
                if self.seat.storage_failed { Reason::StorageFailed } else { Reason::RoundFailed };
            self.become_follower(reason);
            self.election_deadline = now + self.timeout();
            return;
        };
        self.seat.counters().elections_started += 1;
        self.seat.next_heartbeat = Instant::MAX;
        self.promise(ballot, self.seat.cfg.id);
        self.lease = None;
        self.poll_hold = None;
        self.seat.set_leader(None);
        self.attempt += 1;
        let n = self.seat.slots();
        let mut promises = vec![None; n];
        // Our own promise counts from the next input on (by then the driver
        // has persisted it or reported the failure), and only if this node
        // votes (see `Seat::count`).
        promises[self.seat.me] = Some(true);
        self.round = Some(Round::Candidacy(Candidacy {
            attempt: self.attempt,
            ballot,
            started: now,
            deadline: now + leader_lease(&self.seat.cfg),
            phase: Phase::Prepare,
            promises,
            accepts: vec![None; n],
            max_slot: self.committed.max(self.accepted_slot),
            after_notice: reason == Reason::PeerDead,
            reask_at: vec![None; n],
            handover,
        }));
        self.seat.set_role(Role::Candidate, reason);
        let attempt = self.attempt;
        let freshness = self.freshness();
        self.seat.broadcast(PaxosMessage::Prepare { ballot, attempt, handover, freshness });
    }

    /// Advances or concludes the candidacy if its outcome is known.
    fn check_candidacy(&mut self, now: Instant) {
        let quorum = self.seat.cfg.quorum();
        let n = self.seat.voter_count();
        let me = self.seat.me;
        let voters =
            |a: &[Option<bool>], yes: bool| a[..n].iter().filter(|&&x| x == Some(yes)).count();
        let Some(Round::Candidacy(c)) = self.round.as_mut() else { return };
        if now >= c.deadline {
            // Checked first: answers that arrive after the deadline (say, to a
            // candidate resumed from a pause) are stale and must not count.
            return self.candidacy_failed(now);
        }
        if c.phase == Phase::Prepare {
            let granted = voters(&c.promises, true);
            let refused = voters(&c.promises, false);
            if n - refused < quorum {
                return self.candidacy_failed(now);
            }
            if granted < quorum {
                return;
            }
            // Phase 2: a no-op at the next slot, accepted by ourselves first.
            let slot = c.max_slot.saturating_add(1);
            c.phase = Phase::Accept { slot, sent_at: now };
            // Promises are no longer asked for.
            c.reask_at.iter_mut().for_each(|r| *r = None);
            c.accepts[me] = Some(true);
            let ballot = c.ballot;
            self.accepted_slot = self.accepted_slot.max(slot);
            let freshness = self.seat.electorate.freshness();
            self.seat.broadcast(PaxosMessage::Accept { ballot, slot, freshness });
        }
        let Some(Round::Candidacy(c)) = self.round.as_ref() else { return };
        let granted = voters(&c.accepts, true);
        let refused = voters(&c.accepts, false);
        if n - refused < quorum {
            self.candidacy_failed(now);
        } else if granted >= quorum {
            self.become_leader(now);
        }
    }

    fn candidacy_failed(&mut self, now: Instant) {
        self.become_follower(Reason::RoundFailed);
        self.election_deadline = now + self.retry_delay();
    }

    fn become_leader(&mut self, now: Instant) {
        let Some(Round::Candidacy(c)) = self.round.take() else { return };
        let Phase::Accept { slot, sent_at } = c.phase else { return };
        // Acceptors took a lease on us when they promised (after `started`)
        // or accepted (after `sent_at`).
        for i in 0..self.seat.slots() {
            self.seat.acked_sent_at[i] = if c.accepts[i] == Some(true) {
                Some(sent_at)
            } else if c.promises[i] == Some(true) && c.accepts[i].is_none() {
                Some(c.started)
            } else {
                None
            };
        }
        self.seat.recompute_leader_lease();
        if now >= self.seat.leader_lease_until {
            self.candidacy_failed(now);
            return;
        }
        self.committed = self.committed.max(slot);
        let backers = self.seat.count(&c.accepts, true);
        self.seat.take_office(backers);
        self.broadcast_commit(now);
    }

    fn broadcast_commit(&mut self, now: Instant) {
        let (heartbeat, sent_at_nanos) = self.seat.next_heartbeat_at(now);
        let ballot = self.seat.term;
        let slot = self.committed;
        self.seat.broadcast_members(PaxosMessage::Commit {
            ballot,
            slot,
            heartbeat,
            sent_at_nanos,
        });
    }

    // ---- Acceptor ----

    fn on_prepare(
        &mut self,
        now: Instant,
        from: NodeId,
        ballot: Term,
        attempt: u64,
        handover: Option<Term>,
        freshness: Freshness,
    ) {
        if self.proposer_of(ballot) != Some(from) {
            self.seat.counters().messages_ignored += 1;
            return;
        }
        // A handover passes a lease only if the leader of that ballot, on
        // resigning, named `from` to this node.
        let asked = handover;
        let handover = handover.filter(|&b| self.seat.named_successor(b, from));
        self.highest_seen = self.highest_seen.max(ballot);
        let fresh = ballot > self.seat.term;
        let repeat = ballot == self.seat.term && self.seat.voted_for == Some(from);
        let busy = if self.seat.storage_failed {
            Some(Some(self.seat.cfg.election_timeout))
        } else if (!fresh && !repeat) || self.stale(freshness) || !self.seat.grants() {
            Some(None)
        } else {
            let blocked = self.lease_blocks(now, from, handover);
            if let (Some(_), Some(h), None, Some(i)) =
                (blocked, asked, handover, self.seat.index_of(from))
            {
                // Perhaps ahead of the resignation that names it.
                self.early_handovers[i] = Some(EarlyHandover { ballot, attempt, handover: h });
            }
            blocked.map(Some)
        };
        if let Some(busy) = busy {
            let msg = PaxosMessage::PrepareNack {
                ballot,
                attempt,
                promised: self.seat.term,
                committed: self.committed,
                heartbeat: self.my_heartbeat(),
                busy_ms: busy.map(ceil_ms),
            };
            return self.seat.send(from, msg);
        }
        if fresh {
            self.promise(ballot, from);
        }
        if self.seat.role != Role::Follower {
            // A poll or a candidacy of ours is superseded by the promise.
            self.become_follower(Reason::HigherTerm);
        }
        self.grant_lease(now, from, ballot);
        self.poll_hold = None;
        self.election_deadline = now + self.timeout();
        let msg = PaxosMessage::PrepareAck {
            ballot,
            attempt,
            committed: self.committed,
            accepted_slot: self.accepted_slot,
        };
        self.seat.send(from, msg);
    }

    fn on_accept(
        &mut self,
        now: Instant,
        from: NodeId,
        ballot: Term,
        slot: u64,
        freshness: Freshness,
    ) {
        if self.proposer_of(ballot) != Some(from) {
            self.seat.counters().messages_ignored += 1;
            return;
        }
        self.highest_seen = self.highest_seen.max(ballot);
        if ballot < self.seat.term
            || self.seat.storage_failed
            || self.stale(freshness)
            || !self.seat.grants()
            || self.lease_blocks(now, from, None).is_some()
        {
            let promised = self.seat.term;
            return self.seat.send(from, PaxosMessage::AcceptNack { ballot, promised });
        }
        if ballot > self.seat.term {
            self.promise(ballot, from);
        }
        if self.seat.role != Role::Follower {
            self.become_follower(Reason::HigherTerm);
        }
        self.accepted_slot = self.accepted_slot.max(slot);
        self.grant_lease(now, from, ballot);
        self.poll_hold = None;
        self.election_deadline = now + self.timeout();
        self.seat.send(from, PaxosMessage::AcceptAck { ballot, slot });
    }

    fn on_commit(
        &mut self,
        now: Instant,
        from: NodeId,
        ballot: Term,
        slot: u64,
        heartbeat: u64,
        sent_at: u64,
    ) {
        if self.proposer_of(ballot) != Some(from) {
            self.seat.counters().messages_ignored += 1;
            return;
        }
        if self.seat.sent_by_dead_leader(from, ballot) {
            // Sent before its sender died (a death notice said so).
            return;
        }
        if ballot < self.seat.term {
            // A deposed leader: tell it about the higher promise.
            let promised = self.seat.term;
            let msg = PaxosMessage::CommitAck {
                ballot,
                ok: false,
                promised,
                echo_sent_at_nanos: sent_at,
            };
            return self.seat.send(from, msg);
        }
        if self.seat.is_leader(now) {
            // A higher ballot cannot lead while our lease runs (leases and
            // ballots both exclude it); ignore rather than follow. A leader
            // still renewing its lease after a stall follows it (below).
            self.seat.counters().messages_ignored += 1;
            return;
        }
        let lsn = Lsn { term: ballot, counter: heartbeat };
        if self.seat.stale_heartbeat(from, lsn) {
            return;
        }
        if ballot > self.seat.term {
            self.promise(ballot, from);
        }
        if self.seat.role != Role::Follower {
            self.become_follower(Reason::LeaderHeartbeat);
        }
        self.committed = self.committed.max(slot);
        self.hb_baseline = self.hb_baseline.max(Some(lsn));
        self.seat.follow(from, lsn);
        // A running lease on another node is kept beside the new one to its
        // end: a Commit of a higher ballot is no proof that the earlier
        // leader's lease ended (a forged one is not).
        if let Some(l) = self.lease.filter(|l| l.holder != Some(from) && now < l.until) {
            if self.prior_lease.is_none_or(|p| p.until < l.until) {
                self.prior_lease = Some(l);
            }
        }
        self.grant_lease(now, from, ballot);
        self.poll_hold = None;
        self.election_deadline = now + self.timeout();
        let msg = PaxosMessage::CommitAck {
            ballot,
            ok: true,
            promised: ballot,
            echo_sent_at_nanos: sent_at,
        };
        self.seat.send(from, msg);
    }

    // ---- Proposer: answers ----

    #[allow(clippy::too_many_arguments)]
    fn on_prepare_nack(
        &mut self,
        now: Instant,
        i: usize,
        ballot: Term,
        attempt: u64,
        promised: Term,
        committed: u64,
        heartbeat: Option<Lsn>,
        busy_ms: Option<u64>,
    ) {
        self.highest_seen = self.highest_seen.max(promised);
        match self.round.as_mut() {
            Some(Round::Poll(p)) if ballot == LOW_BALL && p.attempt == attempt => {
                let busy = busy_ms.map(Duration::from_millis);
                p.answers[i] = Some(PollAnswer { promised, committed, heartbeat, busy });
                self.check_poll(now);
            }
            Some(Round::Candidacy(c))
                if c.ballot == ballot && c.attempt == attempt && c.phase == Phase::Prepare =>
            {
                let not_final = c.after_notice || c.handover.is_some();
                match busy_ms.filter(|_| not_final && promised <= ballot) {
                    Some(ms) => {
                        // Standing on a death notice or a handover: the
                        // acceptor's lease is most likely on the dead or
                        // resigned leader, and its notice or the resignation
                        // has not arrived yet. Ask again soon (or when its
                        // lease ends, if sooner); its refusal is not final.
                        let busy = drift::stretch(
                            Duration::from_millis(ms),
                            self.seat.cfg.clock_drift_ppm,
                        );
                        let lease_end = now + busy + Duration::from_millis(1);
                        let soon = self.seat.notice_reask_at(c.started, now);
                        c.promises[i] = None;
                        c.reask_at[i] = Some(lease_end.min(soon));
                    }
                    None => c.promises[i] = Some(false),
                }
                self.check_candidacy(now);
            }
            _ => self.seat.counters().messages_ignored += 1,
        }
    }

    /// Sends the Prepare again to the acceptors due to be asked again (see
    /// `Candidacy::after_notice` and `Candidacy::handover`).
    fn reask_prepares(&mut self, now: Instant) {
        let Some(Round::Candidacy(c)) = self.round.as_mut() else { return };
        if c.phase != Phase::Prepare {
            return;
        }
        let (ballot, attempt, handover) = (c.ballot, c.attempt, c.handover);
        let mut due = Vec::new();
        for (i, at) in c.reask_at.iter_mut().enumerate() {
            if at.is_some_and(|at| at <= now) {
                *at = None;
                due.push(self.seat.members[i]);
            }
        }
        let freshness = self.freshness();
        for to in due {
            self.seat.send(to, PaxosMessage::Prepare { ballot, attempt, handover, freshness });
        }
    }

    fn on_prepare_ack(
        &mut self,
        now: Instant,
        i: usize,
        ballot: Term,
        attempt: u64,
        committed: u64,
        accepted_slot: u64,
    ) {
        match self.round.as_mut() {
            Some(Round::Candidacy(c))
                if c.ballot == ballot && c.attempt == attempt && c.phase == Phase::Prepare =>
            {
                c.promises[i] = Some(true);
                c.max_slot = c.max_slot.max(committed).max(accepted_slot);
                self.committed = self.committed.max(committed);
                self.check_candidacy(now);
            }
            _ => self.seat.counters().messages_ignored += 1,
        }
    }

    fn on_accept_answer(&mut self, now: Instant, i: usize, ballot: Term, slot: Option<u64>) {
        match self.round.as_mut() {
            Some(Round::Candidacy(c)) if c.ballot == ballot => match (c.phase, slot) {
                (Phase::Accept { slot: mine, .. }, Some(s)) if s == mine => {
                    c.accepts[i] = Some(true);
                    self.check_candidacy(now);
                }
                (Phase::Accept { .. }, None) => {
                    c.accepts[i] = Some(false);
                    self.check_candidacy(now);
                }
                _ => self.seat.counters().messages_ignored += 1,
            },
            _ => self.seat.counters().messages_ignored += 1,
        }
    }

    fn on_commit_ack(
        &mut self,
        now: Instant,
        i: usize,
        ballot: Term,
        ok: bool,
        promised: Term,
        echo: u64,
    ) {
        self.highest_seen = self.highest_seen.max(promised);
        if self.seat.role != Role::Leader || ballot != self.seat.term {
            self.seat.counters().messages_ignored += 1;
            return;
        }
        if !ok {
            // Only a voter's promise counts: a member the configuration
            // removes still gets our heartbeats until the next one, and one
            // that missed its removal, counting over its old voters, may
            // promise itself ever higher ballots (paxos membership seed
            // 6527: the leader re-established itself above every one).
            let voter = i < self.seat.voter_count();
            if voter
                && promised > self.seat.term
                && !self.seat.storage_failed
                && self.seat.is_leader(now)
            {
                // An acceptor promised a higher ballot (a candidacy that could
                // not win while our lease runs). A majority still backs us, so
                // re-establish leadership above it at once; skipping the poll
                // is safe, polls only serve liveness. (A leader renewing its
                // lease after a stall has no such majority: it lets the
                // renewal run out instead.)
                self.start_candidacy(now, None, Reason::PreVoteWon);
            } else {
                self.seat.counters().messages_ignored += 1;
            }
            return;
        }
        self.seat.record_ack(now, i, Instant::from_nanos(echo));
    }

    // ---- Transfer and stop ----

    fn on_resign(&mut self, now: Instant, from: NodeId, ballot: Term, successor: Option<NodeId>) {
        if !self.seat.take_resignation(from, ballot, successor) {
            return;
        }
        release_lease(&mut self.lease, from);
        release_lease(&mut self.prior_lease, from);
        // Whatever the resignation says, the kept Prepares were for its
        // succession or are stale: the named successor's is taken.
        let named = take_named(&mut self.early_handovers, &self.seat, successor);
        if successor == Some(self.seat.cfg.id) {
            self.start_candidacy(now, Some(ballot), Reason::TransferRequested);
        } else {
            // Fallback if the successor fails: poll after one election cycle.
            self.election_deadline = now + self.retry_delay();
            if let Some((from, e)) = named.filter(|(_, e)| e.handover == ballot) {
                // The successor's Prepare came first: answer it now, as if
                // it had come after (the same checks, now that the
                // resignation named it; its configuration was checked when
                // it came).
                let freshness = self.freshness();
                self.on_prepare(now, from, e.ballot, e.attempt, Some(e.handover), freshness);
            }
        }
    }
}

/// Milliseconds, rounded up, at least one.
fn ceil_ms(d: Duration) -> u64 {
    let ms = d.as_nanos().div_ceil(1_000_000).max(1);
    u64::try_from(ms).unwrap_or(u64::MAX)
}

impl<R: RngCore + Send> Rules for PaxosElector<R> {
    type Msg = PaxosMessage;

    fn seat(&self) -> &Seat {
        &self.seat
    }

    fn seat_mut(&mut self) -> &mut Seat {
        &mut self.seat
    }

    fn own_message(msg: Message) -> Option<PaxosMessage> {
        match msg {
            Message::Paxos(msg) => Some(msg),
            _ => None,
        }
    }

    fn well_formed(&self, msg: &PaxosMessage) -> bool {
        match msg {
            // The heartbeat an acceptor vouches for is of a ballot it promised.
            PaxosMessage::PrepareNack { promised, heartbeat, .. } => {
                heartbeat.is_none_or(|h| h.term <= *promised)
            }
            _ => true,
        }
    }

    fn check_lease(&mut self, now: Instant) {
        self.step_down_on_lost_lease(now);
    }

    fn on_message(&mut self, now: Instant, i: usize, from: NodeId, msg: PaxosMessage) {
        match msg {
            PaxosMessage::Prepare { ballot, attempt, freshness, .. } if ballot == LOW_BALL => {
                self.on_poll(now, from, attempt, freshness)
            }
            PaxosMessage::Prepare { ballot, attempt, handover, freshness } => {
                self.on_prepare(now, from, ballot, attempt, handover, freshness)
            }
            PaxosMessage::PrepareAck { ballot, attempt, committed, accepted_slot } => {
                self.on_prepare_ack(now, i, ballot, attempt, committed, accepted_slot)
            }
            PaxosMessage::PrepareNack {
                ballot,
                attempt,
                promised,
                committed,
                heartbeat,
                busy_ms,
            } => self
                .on_prepare_nack(now, i, ballot, attempt, promised, committed, heartbeat, busy_ms),
            PaxosMessage::Accept { ballot, slot, freshness } => {
                self.on_accept(now, from, ballot, slot, freshness)
            }
            PaxosMessage::AcceptAck { ballot, slot } => {
                self.on_accept_answer(now, i, ballot, Some(slot))
            }
            PaxosMessage::AcceptNack { ballot, promised } => {
                self.highest_seen = self.highest_seen.max(promised);
                self.on_accept_answer(now, i, ballot, None)
            }
            PaxosMessage::Commit { ballot, slot, heartbeat, sent_at_nanos } => {
                self.on_commit(now, from, ballot, slot, heartbeat, sent_at_nanos)
            }
            PaxosMessage::CommitAck { ballot, ok, promised, echo_sent_at_nanos } => {
                self.on_commit_ack(now, i, ballot, ok, promised, echo_sent_at_nanos)
            }
            PaxosMessage::Resign { ballot, successor } => {
                self.on_resign(now, from, ballot, successor)
            }
        }
    }

    fn on_timeout(&mut self, now: Instant) {
        match self.seat.role {
            Role::Leader => {
                if now >= self.seat.next_heartbeat {
                    self.broadcast_commit(now);
                }
            }
            Role::Follower => {
                if self.seat.election_due(&mut self.election_deadline, now) {
                    self.start_poll(now);
                }
            }
            Role::PreCandidate => self.check_poll(now),
            Role::Candidate => {
                self.reask_prepares(now);
                self.check_candidacy(now);
            }
        }
    }

    fn on_persist_failed(&mut self, now: Instant) {
        if self.seat.role != Role::Follower {
            if self.seat.role == Role::Leader {
                self.seat.set_leader(None);
            }
            self.become_follower(Reason::StorageFailed);
            self.election_deadline = now + self.timeout();
        }
    }

    fn on_peer_dead(&mut self, now: Instant, peer: NodeId) {
        let backed = release_lease(&mut self.lease, peer);
        release_lease(&mut self.prior_lease, peer);
        release_lease(&mut self.poll_hold, peer);
        let was_leader = self.seat.bury_leader(peer);
        if was_leader && self.seat.role == Role::PreCandidate {
            // A poll (on a timeout) for the dead leader's succession: the
            // notice orders the succession by rank instead, and a poll that
            // goes on would race the best-ranked survivor's Prepare.
            self.become_follower(Reason::PeerDead);
        }
        // The proposer this node promised to can no longer take office either.
        let candidate = backed && self.seat.leader.is_none() && self.seat.voted_for == Some(peer);
        if self.seat.role != Role::Follower || !(was_leader || candidate) {
            return;
        }
        // Stand in rank order (the preference order of the voters), after
        // any lease this node still holds on another node (or the anonymous
        // one of a restart) and any poller it just answered as free. The
        // poll is skipped: it serves liveness only, and the leader is known
        // to be dead.
        let me = self.seat.cfg.id;
        let bound = self.lease_blocks(now, me, None).unwrap_or(Duration::ZERO);
        let bound = bound.max(hold_left(self.poll_hold, me, now));
        let jitter = self.rng.next_u64();
        match self.seat.stand_after_notice(now, peer, bound, jitter) {
            None => self.start_candidacy(now, None, Reason::PeerDead),
            Some(at) => self.election_deadline = self.election_deadline.min(at),
        }
    }

    fn resign(&mut self, now: Instant, successor: Option<NodeId>) {
        let ballot = self.seat.term;
        let own = self.my_heartbeat();
        self.seat.last_lsn = own;
        self.hb_baseline = self.hb_baseline.max(own);
        self.become_follower(Reason::Resigned);
        self.seat.set_leader(None);
        self.seat.broadcast_members(PaxosMessage::Resign { ballot, successor });
        // Back the successor: help nobody else before it could win.
        if let Some(s) = successor {
            self.grant_lease(now, s, ballot);
        }
        self.election_deadline = now + self.timeout();
    }

    fn grow(&mut self) {
        self.early_handovers.push(None);
        match self.round.as_mut() {
            Some(Round::Poll(p)) => p.answers.push(None),
            Some(Round::Candidacy(c)) => {
                c.promises.push(None);
                c.accepts.push(None);
                c.reask_at.push(None);
            }
            None => {}
        }
    }

    fn on_electorate(&mut self, now: Instant, old: &[NodeId], recount: bool) {
        self.early_handovers = remap(old, &self.seat.members, &self.early_handovers, None);
        if recount && self.round.is_some() {
            // Its answers were counted over the old voters: ask again.
            self.become_follower(Reason::RoundFailed);
            self.election_deadline = now + self.retry_delay();
        }
    }

    fn become_follower(&mut self, reason: Reason) {
        self.round = None;
        self.seat.next_heartbeat = Instant::MAX;
        self.seat.set_role(Role::Follower, reason);
    }

    fn deadline(&self) -> Instant {
        match (&self.seat.role, &self.round) {
            (Role::Leader, _) => self.seat.leader_deadline(),
            (Role::PreCandidate, Some(Round::Poll(p))) => p.deadline,
            (Role::Candidate, Some(Round::Candidacy(c))) => {
                let quorum = self.seat.cfg.quorum();
                let votes = match c.phase {
                    Phase::Prepare => &c.promises,
                    Phase::Accept { .. } => &c.accepts,
                };
                if self.seat.count(votes, true) >= quorum {
                    // Already decided (a single-node cluster): conclude at once.
                    return c.started;
                }
                if c.phase != Phase::Prepare {
                    return c.deadline;
                }
                c.reask_at.iter().flatten().fold(c.deadline, |a, &b| a.min(b))
            }
            _ => self.election_deadline,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(n: u64) -> Config {
        Config::new(
            NodeId(1),
            (1..=n).map(NodeId).collect(),
            Duration::from_millis(100),
            Duration::from_millis(1000),
        )
    }

    #[test]
    fn ballots_order_by_counter_then_id_and_name_their_proposer() {
        let c = cfg(3);
        let e =
            PaxosElector::new(c, HardState::default(), rand_pcg::Pcg64Mcg::new(1), Instant::ZERO);
        let b = e.next_ballot(LOW_BALL).expect("valid");
        assert_eq!(b, Term(BALLOT_NODES + 1), "counter 1, node 1");
        assert_eq!(e.proposer_of(b), Some(NodeId(1)));
        assert_eq!(e.proposer_of(Term(BALLOT_NODES + 3)), Some(NodeId(3)));
        assert_eq!(e.proposer_of(Term(2 * BALLOT_NODES)), None, "node id 0 proposes nothing");
        assert_eq!(e.proposer_of(LOW_BALL), None);
        // Above node 3's first ballot node 1 goes to counter 2.
        assert_eq!(e.next_ballot(Term(BALLOT_NODES + 3)), Some(Term(2 * BALLOT_NODES + 1)));
        assert!(e.next_ballot(Term(32)) > Some(Term(32)));
        // No ballot above the highest valid term.
        assert_eq!(e.next_ballot(Term::MAX_VALID), None);
        assert_eq!(e.next_ballot(Term(u64::MAX)), None);
    }

    #[test]
    fn spread_follows_the_seed_and_grows_with_the_cluster() {
        let rtt = Duration::from_millis(50);
        assert_eq!(timeout_spread(&cfg(3)), rtt * 10);
        assert_eq!(timeout_spread(&cfg(2)), rtt * 10);
        assert_eq!(timeout_spread(&cfg(5)), rtt * 20);
        assert_eq!(timeout_spread(&cfg(15)), rtt * 70);
    }

    #[test]
    fn validate_rejects_a_timeout_within_three_and_a_half_round_trips() {
        let mut c = cfg(3);
        assert_eq!(validate(&c), Ok(()));
        c.round_trip = Duration::from_millis(100);
        c.election_timeout = Duration::from_millis(350);
        c.heartbeat_interval = Duration::from_millis(100);
        let e = validate(&c).unwrap_err();
        let text = e.to_string();
        assert!(text.starts_with("paxos protocol: the election timeout (350ms)"), "{text}");
        assert!(text.contains("3.5 x 100ms = 350ms"), "{text}");
        c.election_timeout = Duration::from_millis(351);
        assert_eq!(validate(&c), Ok(()));
    }

    #[test]
    fn leases_shrink_by_the_drift_bound_twice() {
        let c = cfg(3);
        // 1000 ms * 0.95 / 1.05 = 904.76 ms, then * 0.95 / 1.05 again.
        assert_eq!(follower_lease(&c).as_millis(), 904);
        assert_eq!(leader_lease(&c).as_millis(), 818);
    }
}
