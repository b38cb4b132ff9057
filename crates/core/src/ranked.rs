//! The two-phase ranked election of "A Leader Election Algorithm"
//! (2000), made safe with the durable state, leases and fencing rules of the
//! default protocol.
//!
//! Every node runs two state machines side by side, as the seed describes:
//!
//! * the ELECTOR, WATCHING (role [`Role::Follower`]) or VOTING (role
//!   [`Role::PreCandidate`]): when no `Lead` arrived for an election timeout it
//!   broadcasts `Elect` with its claim (the latest leader message it saw),
//!   collects the others' claims for `round_trip`, and sends one `Vote` to the
//!   best claim;
//! * the CANDIDATE, FOLLOWER or LEADER: it tallies the votes addressed to it and
//!   leads when more than half of the voters voted for it in one term.
//!
//! `docs/protocol-ranked.md` states every rule with its reason, the safety
//! argument, and each departure from the seed.
//!
//! # Durable state
//!
//! [`HardState::term`] is the highest term the node knows of: a leader's term
//! it followed, or the term of its last vote. [`HardState::voted_for`] is the
//! node its `Vote` in that term went to (itself when it took office in a term
//! it was elected in without having voted). A vote is always cast in a term
//! above every term the voter knows, and persisted before it is sent, so a node
//! votes at most once per term, across restarts too.

use crate::config::{Config, ConfigError};
use crate::drift;
use crate::electorate::Freshness;
use crate::kind::ProtocolKind;
pub use crate::message::ranked::RankedMessage;
use crate::message::Message;
use crate::protocol::{HardState, Reason};
use crate::seat::{majority_value, release_lease, remap, FollowerLease, Rules, Seat};
use crate::time::Instant;
use crate::types::{Lsn, NodeId, Role, Term};
use rand_core::RngCore;
use std::cmp::Reverse;
use std::time::Duration;

/// How many of its own recent `Elect` send times a node remembers. A `Vote`
/// counts only if it echoes one of them, so votes addressed to an earlier
/// incarnation of the node (before a restart) are never counted.
pub const MAX_REMEMBERED_ELECTS: usize = 8;

/// The longest a node may wait, once it is VOTING, before it votes: the
/// other electors' leases on the old leader may end up to
/// `stretch(T) - T` after its own, and their claims then need a round trip.
fn collection_window(cfg: &Config) -> Duration {
    drift::stretch(cfg.election_timeout, cfg.clock_drift_ppm).saturating_sub(cfg.election_timeout)
        + cfg.round_trip
}

/// Protocol-specific configuration checks: the claims of one election must be
/// collected and voted on while the lease a winner takes from them still runs,
/// i.e. `(stretch(T) - T) + 2 * round_trip < leader_lease`.
pub fn validate(cfg: &Config) -> Result<(), ConfigError> {
    let needed = collection_window(cfg) + cfg.round_trip;
    let lease = cfg.leader_lease();
    if needed >= lease {
        return Err(ConfigError::Protocol {
            protocol: ProtocolKind::Ranked,
            reason: format!(
                "an election collects claims for up to {needed:?} (two round trips of \
                 {:?} plus the clock-drift allowance), which must be shorter than the \
                 leader lease of {lease:?} (election timeout {:?}, drift {} ppm); \
                 lower round_trip or raise the election timeout",
                cfg.round_trip, cfg.election_timeout, cfg.clock_drift_ppm
            ),
        });
    }
    Ok(())
}

/// Whom a follower supports, and why. While a lease runs the node helps elect
/// nobody else (it votes for the holder only, or not at all).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Support {
    /// After a (re)start: promises made before the crash are forgotten, so the
    /// node helps elect nobody until the lease ends.
    Anonymous,
    /// The leader of `term`, whose `Lead` sent at `sent_at` (the leader's
    /// clock) this node accepted last (or, on a leader that stepped down with
    /// its lease still valid, itself, with `sent_at` 0).
    Leader { id: NodeId, term: Term, sent_at: u64 },
    /// The node this node voted for, at `voted_at` (own clock). `echo` is the
    /// newest send time (the candidate's clock) of a message of the candidate
    /// this node backed under its running leases: the `Elect` the vote answers,
    /// or a newer `Lead` it acknowledged before. Every lease the candidate may
    /// take from this node's support ends `leader_lease` after it.
    Vote { id: NodeId, voted_at: Instant, echo: u64 },
}

/// A lease: support given until `until` (this node's clock).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Lease {
    support: Support,
    until: Instant,
}

impl FollowerLease for Lease {
    fn holder(&self) -> Option<NodeId> {
        match self.support {
            Support::Anonymous => None,
            Support::Leader { id, .. } | Support::Vote { id, .. } => Some(id),
        }
    }

    fn until(&self) -> Instant {
        self.until
    }
}

/// A claim recorded on the voting slate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Claim {
    /// The claimant's term when it sent the claim.
    term: Term,
    /// The latest leader message it saw.
    lsn: Option<Lsn>,
    /// Its clock when it sent the claim (echoed by a vote).
    sent_at_nanos: u64,
    /// When the claim arrived (own clock).
    received: Instant,
    /// Set when a resigning leader named the claimant.
    transfer: Option<Term>,
    /// The resigned term the claimant said it succeeds, named to this node
    /// or not yet: a claim that overtook the resignation (they travel on
    /// different connections) becomes a transfer's when it arrives.
    asked_transfer: Option<Term>,
    /// When (own clock) the claimant said it would vote.
    votes_at: Instant,
    /// The configuration the claimant holds: a claim of an older one than
    /// this node's is never voted for (the freshness rule,
    /// [`crate::electorate`]).
    freshness: Freshness,
    /// The claimant's configuration removes it (see [`RankedMessage::Elect`]).
    leaving: bool,
    /// The claimant may stand: false for a node that only takes part (see
    /// [`RankedMessage::Elect`]), never voted for.
    stands: bool,
}

/// The VOTING state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Poll {
    /// When this node entered VOTING and broadcast its claim.
    started: Instant,
    /// When to look at the slate again (kept current by `try_vote`).
    next_check: Instant,
}

/// The ranked elector. Construct it with [`RankedElector::new`] and drive it
/// through the [`Protocol`](crate::Protocol) trait, whose documentation states
/// the calling contract. Equality and hash leave out what is only reported
/// (counters, contact times), as for every elector.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RankedElector<R> {
    seat: Seat,
    /// Used only for a small jitter on poll retries.
    rng: R,
    lease: Option<Lease>,
    /// A lease granted before `lease` that may still run: a `Lead` of another
    /// leader (a higher term is no proof that the earlier leader's lease
    /// ended: a forged one is not) adds its lease, it does not end the
    /// earlier promise. While both run, this node votes for nobody but a
    /// holder of both.
    prior: Option<Lease>,
    /// Until when (own clock) another elector may still be bound by a lease
    /// this node's last lease came with (the same leader's, or the same vote
    /// round's): claims arriving before then may still outrank the ones held.
    quiet_until: Instant,
    /// WATCHING: when to start VOTING.
    election_deadline: Instant,
    poll: Option<Poll>,
    /// The voting slate: per member index, its latest claim.
    claims: Vec<Option<Claim>>,
    /// The tally board: per member index, the term of its vote for this node and
    /// the `Elect` send time it echoed.
    tally: Vec<Option<(Term, u64)>>,
    /// True between casting a vote for itself (or recording that it was
    /// elected in a term above its own) and the next input: the vote is not
    /// durable (and must not count) until the driver has written it.
    self_vote_pending: bool,
    /// The term in which this node stands: it voted for itself in it, or a vote
    /// for it in that term arrived. Counted once in `elections_started`.
    candidate_term: Option<Term>,
    /// As a candidate: when its candidacy is void, because a lease taken from
    /// the votes it may still get would already have run out.
    candidacy_until: Instant,
    /// After losing its quorum, a former leader polls every round trip until
    /// then, so that followers still bound to it re-elect it as soon as its
    /// acknowledgements flow again.
    rally_until: Instant,
    /// Send times of this incarnation's recent `Elect`s (at most
    /// [`MAX_REMEMBERED_ELECTS`]).
    my_elects: Vec<u64>,
    /// Set when a resigning leader of this term named this node successor.
    transfer: Option<Term>,
    /// Leader: per member index, the newest `Lead` counter it acknowledged.
    acked_counter: Vec<u64>,
}

impl<R: RngCore + Send> RankedElector<R> {
    /// A new elector, WATCHING, from the durable `state` (all-default for a
    /// fresh node). It holds an anonymous lease for one election timeout, since
    /// it may have supported someone before a crash. `cfg` must be valid (see
    /// [`Config::validate_for`]).
    pub fn new(cfg: Config, state: HardState, rng: R, now: Instant) -> Self {
        debug_assert_eq!(cfg.validate_settings().and_then(|()| validate(&cfg)), Ok(()));
        let t = cfg.election_timeout;
        let quiet_until = now + drift::stretch(t, cfg.clock_drift_ppm);
        let lease_length = cfg.leader_lease();
        let seat = Seat::new(cfg, state, lease_length, now);
        let n = seat.slots();
        RankedElector {
            seat,
            rng,
            lease: Some(Lease { support: Support::Anonymous, until: now + t }),
            prior: None,
            quiet_until,
            election_deadline: now + t,
            poll: None,
            claims: vec![None; n],
            tally: vec![None; n],
            self_vote_pending: false,
            candidate_term: None,
            candidacy_until: Instant::ZERO,
            rally_until: Instant::ZERO,
            my_elects: Vec::new(),
            transfer: None,
            acked_counter: vec![0; n],
        }
    }

    fn me(&self) -> usize {
        self.seat.me
    }

    fn stretch(&self, d: Duration) -> Duration {
        drift::stretch(d, self.seat.cfg.clock_drift_ppm)
    }

    /// A retry delay: half an election timeout plus a seeded jitter below a
    /// quarter of the round trip, so that failed polls do not stay in lockstep.
    /// A node that stands only to commit its own removal waits an election
    /// timeout more: the voters that stay poll first, and its claim, which
    /// those of an older configuration may rank first, does not draw their
    /// votes round after round from a staying voter that can win (ranked
    /// membership seed 5012).
    fn retry_delay(&mut self) -> Duration {
        let jitter_max = (self.seat.cfg.round_trip / 4).as_nanos().max(1) as u64;
        let jitter = Duration::from_nanos(self.rng.next_u64() % jitter_max);
        let leaving = !self.seat.electorate.is_voter(self.seat.cfg.id);
        let wait = if leaving { self.seat.cfg.election_timeout } else { Duration::ZERO };
        self.seat.cfg.election_timeout / 2 + wait + jitter
    }

    /// The lease, if it still runs at `now`.
    fn running_lease(&self, now: Instant) -> Option<Lease> {
        self.lease.filter(|l| now < l.until)
    }

    /// Moves to a higher term with no known leader; a leader or candidate steps down.
    fn adopt_term(&mut self, term: Term) {
        debug_assert!(term > self.seat.term);
        self.seat.term = term;
        self.seat.voted_for = None;
        self.seat.persist();
        self.tally.iter_mut().for_each(|v| {
            if v.is_some_and(|(t, _)| t < term) {
                *v = None;
            }
        });
        if self.seat.role == Role::Leader {
            self.step_down_from_leader();
        }
        if self.seat.role != Role::Follower {
            self.become_follower(Reason::HigherTerm);
        }
        self.seat.set_leader(None);
    }

    /// Sets the role from the state (for a non-leader): a candidate while its
    /// candidacy runs, VOTING while it polls, else a follower.
    fn settle_role(&mut self, now: Instant, reason: Reason) {
        if self.seat.role == Role::Leader {
            return;
        }
        if self.candidate_term.is_some_and(|t| t < self.seat.term) || now >= self.candidacy_until {
            self.candidate_term = None;
        }
        match self.candidate_term {
            Some(term) if self.seat.role != Role::Candidate => {
                // The event names the term the node stands in, which may be
                // above its own until it votes or takes office.
                self.seat.set_role_in(Role::Candidate, term, reason);
            }
            Some(_) => {}
            None if self.poll.is_some() => self.seat.set_role(Role::PreCandidate, reason),
            None => self.seat.set_role(Role::Follower, reason),
        }
    }

    /// Records that this node stands in `term` (counted once per term).
    fn stand(&mut self, now: Instant, term: Term, echo: u64) {
        let until = Instant::from_nanos(echo) + self.seat.cfg.leader_lease();
        if self.candidate_term != Some(term) {
            self.candidate_term = Some(term);
            self.candidacy_until = until;
            self.seat.counters().elections_started += 1;
        } else {
            self.candidacy_until = self.candidacy_until.max(until);
        }
        self.settle_role(now, Reason::PreVoteWon);
    }

    /// Bookkeeping when leaving the leader role: the claim becomes the latest
    /// message a majority acknowledged, and the other electors' leases on this
    /// node may run until its last `Lead` plus a stretched election timeout.
    fn step_down_from_leader(&mut self) {
        self.seat.last_lsn =
            Some(Lsn { term: self.seat.term, counter: self.majority_acked_counter() });
        let last_sent = self.seat.next_heartbeat - self.seat.cfg.heartbeat_interval;
        let quiet = last_sent + self.stretch(self.seat.cfg.election_timeout);
        self.quiet_until = self.quiet_until.max(quiet);
        self.seat.next_heartbeat = Instant::MAX;
    }

    /// The newest `Lead` counter acknowledged by a majority of the voters
    /// (this node included if it votes).
    fn majority_acked_counter(&self) -> u64 {
        let me = self.me();
        let voters = self.seat.voter_count();
        let others = self.acked_counter[..voters].iter().enumerate().filter(|&(i, _)| i != me);
        let counters = others.map(|(_, &c)| Some(c));
        if self.seat.votes() {
            majority_value(self.seat.lsn_counter, counters, self.seat.quorum()).unwrap_or(0)
        } else {
            let mut values: Vec<u64> = counters.flatten().collect();
            values.sort_unstable_by(|a, b| b.cmp(a));
            values.get(self.seat.quorum() - 1).copied().unwrap_or(0)
        }
    }

    /// The votes of voters in `term` on the tally board.
    fn votes_in(&self, term: Term) -> usize {
        let voters = self.seat.voter_count();
        self.tally[..voters].iter().flatten().filter(|&&(t, _)| t == term).count()
    }

    /// Steps down a leader whose lease ran out.
    fn step_down_on_lost_lease(&mut self, now: Instant) {
        if self.seat.lease_lost(now) {
            self.step_down_from_leader();
            self.become_follower(Reason::QuorumLost);
            self.seat.set_leader(None);
            // Poll at once, and every round trip while our followers may still
            // be bound to us: they join our poll and vote for us, so late
            // acknowledgements (a partition that just healed) cost one round,
            // not an election timeout.
            self.election_deadline = now;
            self.rally_until = now + self.seat.cfg.election_timeout;
        }
    }

    // ---- ELECTOR ----

    /// Enters VOTING: broadcasts this node's claim and starts collecting others'.
    fn start_poll(&mut self, now: Instant, reason: Reason) {
        if self.seat.storage_failed || !self.seat.grants() {
            // A node that cannot persist cannot vote, nor one that does not
            // belong to its configuration: no point in polling. An election
            // timeout without a word from its leader: it knows none (a
            // removed node told its clients of a leader dead for seconds).
            self.seat.set_leader(None);
            self.election_deadline = now + self.seat.cfg.election_timeout;
            return;
        }
        if !self.seat.stands() {
            // A node that may not stand (a learner, a removed node) votes
            // without a claim of its own: a configuration it does not hold
            // yet may count it as a voter, and its candidate needs its vote
            // (raft and Paxos answer a request whatever the node's
            // standing; here voting is the poll's). It says that it takes
            // part, so that those voters count it (ranked membership seed
            // 9202: a learner of an older configuration, a voter of the
            // newer one, voted for one of the two others up, which counted
            // it, while the other never did and never voted).
            self.seat.set_leader(None);
            let me = self.me();
            self.claims[me] = None;
            self.poll = Some(Poll { started: now, next_check: now });
            self.settle_role(now, reason);
            let vote_in = self.own_vote_delay(now);
            self.seat.broadcast(RankedMessage::Elect {
                term: self.seat.term,
                claim: self.seat.last_lsn,
                sent_at_nanos: now.as_nanos(),
                transfer: None,
                vote_in_nanos: u64::try_from(vote_in.as_nanos()).unwrap_or(u64::MAX),
                freshness: self.seat.electorate.freshness(),
                leaving: false,
                stands: false,
            });
            self.try_vote(now);
            return;
        }
        self.seat.counters().pre_votes_started += 1;
        self.seat.renew_stall_grace();
        self.seat.set_leader(None);
        let sent_at_nanos = now.as_nanos();
        let me = self.me();
        let transfer = self.transfer;
        let vote_in = self.own_vote_delay(now);
        let leaving = !self.seat.electorate.is_voter(self.seat.cfg.id);
        self.claims[me] = Some(Claim {
            term: self.seat.term,
            lsn: self.seat.last_lsn,
            sent_at_nanos,
            received: now,
            transfer,
            asked_transfer: transfer,
            votes_at: now + vote_in,
            freshness: self.seat.electorate.freshness(),
            leaving,
            stands: true,
        });
        if self.my_elects.len() >= MAX_REMEMBERED_ELECTS {
            self.my_elects.remove(0);
        }
        self.my_elects.push(sent_at_nanos);
        self.poll = Some(Poll { started: now, next_check: now });
        self.settle_role(now, reason);
        let term = self.seat.term;
        let claim = self.seat.last_lsn;
        let vote_in_nanos = u64::try_from(vote_in.as_nanos()).unwrap_or(u64::MAX);
        let freshness = self.seat.electorate.freshness();
        let elect = RankedMessage::Elect {
            term,
            claim,
            sent_at_nanos,
            transfer,
            vote_in_nanos,
            freshness,
            leaving,
            stands: true,
        };
        // Also to the claimants of a newer configuration that this one does
        // not count (a learner here, or a guest: a node added after this
        // node's configuration): that one may count this node as a voter and
        // needs this claim to see a majority take part (ranked membership
        // seed 1583: a voter of the newer configuration missing the
        // snapshot that holds it never reached the rejoined voter there, and
        // each of the two waited for the third).
        let newer: Vec<NodeId> = self
            .fresh_claims()
            .filter(|&(i, c)| {
                i != me && !self.seat.is_voter_index(i) && c.freshness.config > freshness.config
            })
            .map(|(i, _)| self.seat.members[i])
            .collect();
        self.seat.broadcast(elect.clone());
        for to in newer {
            self.seat.send(to, elect.clone());
        }
        self.try_vote(now);
    }

    /// How long after entering VOTING at `now` this node would vote for an
    /// unforced choice: the ELECT/VOTE paper's RTT, after the leases that may still bind
    /// other electors have ended (see `quiet_until`).
    fn own_vote_delay(&self, now: Instant) -> Duration {
        if now < self.rally_until {
            return self.seat.cfg.round_trip;
        }
        self.quiet_until.max(now).saturating_since(now) + self.seat.cfg.round_trip
    }

    /// Claims that count for the current poll: those recorded since half an
    /// election timeout before it started (claims that arrived while this
    /// node was still bound to the old leader belong to the same election).
    fn fresh_claims(&self) -> impl Iterator<Item = (usize, Claim)> + '_ {
        let since =
            self.poll.map_or(Instant::MAX, |p| p.started - self.seat.cfg.election_timeout / 2);
        self.claims
            .iter()
            .enumerate()
            .filter_map(move |(i, c)| c.filter(|c| c.received >= since).map(|c| (i, c)))
    }

    /// The fresh claims this node may vote for: of claimants that stand, of
    /// a configuration no older than its own (the freshness rule,
    /// [`crate::electorate`]).
    fn eligible_claims(&self) -> impl Iterator<Item = (usize, Claim)> + '_ {
        let mine = self.seat.electorate.freshness();
        self.fresh_claims().filter(move |(_, c)| c.stands && c.freshness >= mine)
    }

    /// The claim this node must vote for, if it is bound: the holder of its
    /// running lease (the old leader, still alive), else a claimant a
    /// resigning leader named. `Err(())` when a running lease forbids voting
    /// for anyone whose claim is here.
    fn forced_choice(&self, now: Instant) -> Result<Option<usize>, ()> {
        if let Some(lease) = self.running_lease(now) {
            let held = lease.holder().and_then(|h| self.seat.index_of(h));
            let prior = self.prior.filter(|p| now < p.until);
            return match held {
                Some(_) if prior.is_some_and(|p| p.holder() != lease.holder()) => Err(()),
                Some(i) if self.eligible_claims().any(|(j, _)| j == i) => Ok(Some(i)),
                _ => Err(()),
            };
        }
        Ok(self.eligible_claims().find(|(_, c)| c.transfer.is_some()).map(|(i, _)| i))
    }

    /// Per voter index: whether it takes part in `poll`: its fresh claim is
    /// on the slate, or it voted for this node's claim of this poll (it
    /// ranked that claim first; a `Lead` of the old leader that was still
    /// on its way may have cleared its own claim from this node's slate).
    fn participants(&self, poll: Poll) -> Vec<bool> {
        let mut taking_part = vec![false; self.seat.slots()];
        for (i, _) in self.fresh_claims() {
            taking_part[i] = true;
        }
        // A vote for a claim of an earlier poll of this node counts too, if
        // its term is not below ours: a voter that takes part without a
        // claim (a learner of an older configuration) votes on its own
        // timer, and a rallying former leader polls again every round trip,
        // so that vote may never echo the poll that runs when it arrives.
        let mine = poll.started.as_nanos();
        let term = self.seat.term;
        for (i, v) in self.tally.iter().enumerate() {
            if v.is_some_and(|(t, echo)| {
                echo == mine || (t >= term && self.my_elects.contains(&echo))
            }) {
                taking_part[i] = true;
            }
        }
        taking_part
    }

    /// True when a death notice reported this term's leader dead and every
    /// other voter takes part in `poll` ([`RankedElector::participants`]):
    /// no claim that could change the ranking can still come (the dead
    /// leader sends none), so waiting for the collection window would only
    /// delay the vote. Every other elector ranks the same slate once it is
    /// complete there too.
    fn slate_complete_but_the_dead(&self, poll: Poll) -> bool {
        let Some(dead) = self.seat.dead_leader_of_this_term().and_then(|d| self.seat.index_of(d))
        else {
            return false;
        };
        let mut taking_part = self.participants(poll);
        taking_part[dead] = true;
        taking_part[..self.seat.voter_count()].iter().all(|&p| p)
    }

    /// How many voters take part in `poll`.
    fn voters_taking_part(&self, poll: Poll) -> usize {
        let voters = self.seat.voter_count();
        self.participants(poll)[..voters].iter().filter(|&&p| p).count()
    }

    /// The best claim by the ELECT/VOTE paper's ranking: a named successor
    /// first, then the newest configuration (a claimant of an older one
    /// cannot win where the newer one is known), the latest `(term, msg)`,
    /// then a claimant its own configuration keeps (one that stands only to
    /// commit its own removal ranks after the voters that hold the same log:
    /// voters of an older configuration rank it by its place there, often
    /// first, and split their votes with those of the newer one, which do
    /// not count it), ties to the earliest voter in the configuration.
    fn best_claim(&self) -> Option<usize> {
        self.eligible_claims()
            .max_by_key(|&(i, c)| {
                (c.transfer.is_some(), c.freshness, c.lsn, !c.leaving, Reverse(i))
            })
            .map(|(i, _)| i)
    }

    /// VOTING: votes once the slate is complete enough, or gives up.
    fn try_vote(&mut self, now: Instant) {
        let Some(poll) = self.poll else { return };
        if self.self_vote_pending {
            // Elected (our vote for ourselves is being written): no other
            // vote of ours may follow it.
            return;
        }
        if self.seat.storage_failed {
            self.become_follower(Reason::StorageFailed);
            self.election_deadline = now + self.seat.cfg.election_timeout;
            return;
        }
        let forced = self.forced_choice(now);
        // The ELECT/VOTE paper: collect claims for RTT, and also until the others' leases
        // have surely ended and their claims arrived (every claimant announces
        // when it will vote), so that every voter ranks the same slate. A vote
        // the ranking cannot change (for the lease holder or a named
        // successor) goes out at once.
        let vote_at = match forced {
            Ok(Some(_)) => poll.started,
            _ if self.slate_complete_but_the_dead(poll) => poll.started,
            _ => self.fresh_claims().map(|(_, c)| c.votes_at).fold(poll.started, Instant::max),
        };
        // A majority of this node's voters take part; or a claimant holds a
        // configuration written after this node's, which counts its votes
        // over voters this node does not know yet (a learner that missed
        // its own promotion, with the other voters of its older
        // configuration down, would otherwise never vote for the one
        // candidate that needs it).
        let mine = self.seat.electorate.freshness().config;
        let newer = self.eligible_claims().any(|(_, c)| c.freshness.config > mine);
        let majority = newer || self.voters_taking_part(poll) >= self.seat.cfg.quorum();
        let rallying = poll.started < self.rally_until;
        let mut give_up_at = if rallying {
            poll.started + self.seat.cfg.round_trip
        } else {
            poll.started.max(self.quiet_until)
                + self.seat.cfg.round_trip
                + self.seat.cfg.election_timeout / 2
        };
        if majority {
            give_up_at = give_up_at.max(vote_at + self.seat.cfg.round_trip);
        }
        if now >= give_up_at {
            // No majority took part (or our lease never let us vote): nothing
            // durable changed; poll again later (a rallying former leader
            // after one round trip).
            self.poll = None;
            self.settle_role(now, Reason::RoundFailed);
            self.election_deadline = if now < self.rally_until {
                poll.started + self.seat.cfg.round_trip
            } else {
                now + self.retry_delay()
            };
            return;
        }
        let mut next_check = if now < vote_at { vote_at } else { give_up_at };
        if let Some(l) = self.running_lease(now) {
            if forced.is_err() {
                next_check = next_check.min(l.until.max(vote_at));
            }
        }
        self.poll = Some(Poll { next_check, ..poll });
        if now < vote_at {
            return;
        }
        // Vote only when a majority takes part: an elector cut off from the
        // others never raises its term, so it cannot disturb the leader later.
        if !majority {
            return;
        }
        if now + self.seat.cfg.round_trip * 2 >= poll.started + self.seat.cfg.leader_lease() {
            // Our claim is too old: a lease taken from votes that echo it
            // would end before they arrived. Claim afresh.
            self.poll = None;
            self.settle_role(now, Reason::RoundFailed);
            self.election_deadline = now;
            return;
        }
        let choice = match forced {
            Err(()) => return,
            Ok(Some(i)) => i,
            Ok(None) => match self.best_claim() {
                Some(i) => i,
                None => return,
            },
        };
        self.cast_vote(now, choice);
    }

    /// Sends the ELECT/VOTE paper's VOTE: persisted first, in a term above every term this
    /// node knows (its own and the claimants'), so it never votes twice in a term.
    fn cast_vote(&mut self, now: Instant, i: usize) {
        let claim = self.claims[i].expect("the chosen claim is on the slate");
        let known = self.fresh_claims().map(|(_, c)| c.term).fold(self.seat.term, Term::max);
        let Some(term) = known.checked_next() else {
            // No valid term is left above the claims: no vote.
            self.poll = None;
            self.settle_role(now, Reason::RoundFailed);
            self.election_deadline = now + self.seat.cfg.election_timeout;
            return;
        };
        let target = self.seat.members[i];
        self.seat.term = term;
        self.seat.voted_for = Some(target);
        self.seat.persist();
        self.tally.iter_mut().for_each(|v| {
            if v.is_some_and(|(t, _)| t < term) {
                *v = None;
            }
        });
        let t = self.seat.cfg.election_timeout;
        // The newest message of the target this node has backed: its claim,
        // or (a late, reordered claim) a newer `Lead` or claim it backed under
        // the lease that runs now.
        let backed =
            match self.running_lease(now).map(|l| l.support) {
                Some(
                    Support::Leader { id, sent_at, .. } | Support::Vote { id, echo: sent_at, .. },
                ) if id == target => sent_at,
                _ => 0,
            };
        let echo = claim.sent_at_nanos.max(backed);
        let support = Support::Vote { id: target, voted_at: now, echo };
        self.lease = Some(Lease { support, until: now + t });
        self.quiet_until = self.quiet_until.max(now + self.stretch(t));
        self.election_deadline = now + t;
        self.poll = None;
        self.transfer = None;
        self.rally_until = Instant::ZERO;
        if target == self.seat.cfg.id {
            self.tally[i] = Some((term, claim.sent_at_nanos));
            self.self_vote_pending = true;
            self.stand(now, term, claim.sent_at_nanos);
        } else {
            self.seat.send(
                target,
                RankedMessage::Vote { term, echo_sent_at_nanos: claim.sent_at_nanos },
            );
            self.settle_role(now, Reason::RoundFailed);
        }
    }

    // ---- CANDIDATE ----

    /// Takes office if more than half of the voters voted for this node in one
    /// term, not below its own, and the lease those votes give still runs.
    fn check_tally(&mut self, now: Instant) {
        if self.seat.role == Role::Leader || self.seat.storage_failed || self.self_vote_pending {
            return;
        }
        let quorum = self.seat.cfg.quorum();
        let mut terms: Vec<Term> =
            self.tally.iter().flatten().map(|&(t, _)| t).filter(|&t| t >= self.seat.term).collect();
        terms.sort_unstable_by(|a, b| b.cmp(a));
        terms.dedup();
        let me = self.me();
        // Our own vote went to ourselves in a term below the others': it may
        // go to ourselves again in theirs, where we never voted (every term
        // we voted in is at most ours). A voter that takes part without a
        // claim of its own (one that may not stand) shows no term before it
        // votes, so its vote can land a term above ours at every round.
        let own = (me < self.seat.voter_count() && self.seat.voted_for == Some(self.seat.cfg.id))
            .then_some(self.tally[me])
            .flatten();
        for term in terms {
            let moved = own.filter(|&(t, _)| t < term && term > self.seat.term);
            let votes = self.votes_in(term) + usize::from(moved.is_some());
            if votes < quorum {
                continue;
            }
            for (i, v) in self.tally.iter().enumerate() {
                self.seat.acked_sent_at[i] = v
                    .filter(|&(t, _)| t == term && i != me)
                    .map(|(_, echo)| Instant::from_nanos(echo));
            }
            self.seat.recompute_leader_lease();
            if self.seat.leader_lease_until <= now {
                // The voters' leases on us have run out: these votes are spent.
                continue;
            }
            if term > self.seat.term {
                // Elected in a term above ours: record it (and that our own
                // support went to ourselves), and take office on the next
                // input, once the driver has written it: leadership is never
                // announced with a write that may still fail.
                self.seat.term = term;
                self.seat.voted_for = Some(self.seat.cfg.id);
                self.seat.persist();
                if let Some((_, echo)) = moved {
                    self.tally[me] = Some((term, echo));
                }
                self.self_vote_pending = true;
                return;
            }
            self.become_leader(now, votes);
            return;
        }
    }

    fn become_leader(&mut self, now: Instant, votes: usize) {
        self.poll = None;
        self.tally.iter_mut().for_each(|v| *v = None);
        self.claims.iter_mut().for_each(|c| *c = None);
        self.lease = None;
        self.transfer = None;
        self.candidate_term = None;
        self.rally_until = Instant::ZERO;
        self.acked_counter.iter_mut().for_each(|c| *c = 0);
        self.seat.take_office(votes);
        self.broadcast_lead(now);
    }

    fn broadcast_lead(&mut self, now: Instant) {
        let (counter, sent_at_nanos) = self.seat.next_heartbeat_at(now);
        let term = self.seat.term;
        self.seat.broadcast_members(RankedMessage::Lead { term, counter, sent_at_nanos });
    }

    // ---- Message handlers ----

    fn on_elect(&mut self, now: Instant, i: usize, from: NodeId, claim: Claim) {
        // The ELECT/VOTE paper: "rcv ELECT: record claim" (in every state).
        let transfer = claim.transfer;
        let sent_at = claim.sent_at_nanos;
        let stale_claim = claim.freshness < self.seat.electorate.freshness();
        self.claims[i] = Some(claim);
        if self.seat.role == Role::Leader {
            // A leader with a valid lease stays; the poller finds no majority.
            return;
        }
        if let Some(t) = transfer {
            // The leader of term `t` resigned before naming the sender.
            if matches!(self.lease.map(|l| l.support), Some(Support::Leader { term, .. }) if term == t)
            {
                self.lease = None;
                self.seat.set_leader(None);
            }
            if matches!(self.prior.map(|l| l.support), Some(Support::Leader { term, .. }) if term == t)
            {
                self.prior = None;
            }
        }
        if let Some(poll) = self.poll {
            if self.claim_outdated(now, poll) {
                // The sender counts claims from T/2 before its poll only:
                // ours would not count there. Claim afresh, so that both
                // slates hold both claims.
                self.start_poll(now, Reason::ElectionTimeout);
            } else {
                self.try_vote(now);
            }
            return;
        }
        if self.seat.storage_failed {
            return;
        }
        if let Some(Support::Vote { id, voted_at, echo }) =
            self.running_lease(now).map(|l| l.support)
        {
            if id == from && self.vote_lease_spent(now, voted_at, echo, sent_at) {
                // The candidate we voted for claims afresh after any lease it
                // could take from our vote: we are free, and so are the others
                // that voted in that round (they get this claim too).
                self.lease = None;
                self.quiet_until = self.quiet_until.min(now);
            }
        }
        // WATCHING: the ELECT/VOTE paper enters VOTING on any ELECT ("this tends to
        // synchronize the servers"). Here only if no lease binds this node, or
        // the ELECT comes from the leader it follows (a leader re-establishing
        // itself in a higher term).
        //
        // A node that stands only to commit its own removal does not join
        // the poll of a claimant staler than itself: it would never vote for
        // that claimant, and its own claim on the stale slate draws a vote
        // of the older configuration away from the voters that stay, which
        // need it (ranked membership seed 1631: the stale voter voted for
        // the leaving node round after round, which the staying voter never
        // backs, while the staying voter's own claim, bound by its vote for
        // itself, always came a little later). Its own polls, which the
        // others join, still let it win where only it can.
        let leaving = !self.seat.electorate.is_voter(self.seat.cfg.id);
        let join = match self.running_lease(now).map(|l| l.support) {
            _ if leaving && stale_claim => false,
            None => true,
            Some(Support::Leader { id, .. }) => id == from,
            Some(Support::Vote { .. } | Support::Anonymous) => false,
        };
        if join {
            self.start_poll(now, Reason::ElectionTimeout);
        }
    }

    /// Whether this node's claim for `poll` is too old to count on the slate of
    /// a node that starts polling at `now`: every elector counts only claims
    /// it recorded since `T/2` before its own poll began (see `fresh_claims`).
    /// A node that has polled that long (its slate lacked a majority, or its
    /// vote waits for others' announced vote times) would otherwise stay
    /// invisible to the new poller, and each would wait for a majority that
    /// the other one completes.
    fn claim_outdated(&self, now: Instant, poll: Poll) -> bool {
        now >= poll.started + self.seat.cfg.election_timeout / 2
    }

    /// Whether the `Elect` a candidate sent at `sent_at` releases a node that
    /// voted for it at `voted_at`, having backed its messages up to `echo`
    /// (both send times on the candidate's clock, see [`Support::Vote`]).
    ///
    /// The vote lease keeps the voter from helping elect anyone else while
    /// the candidate may lead on the strength of its support: every lease the
    /// candidate takes from that support ends `leader_lease` after `echo`, on
    /// the candidate's own clock. A claim the candidate sent at least that long
    /// after `echo` shows that every such lease had ended when it was sent, and
    /// the votes echoing claims that old can no longer make it lead either; so
    /// the voter is free. It then joins the candidate's new round like any
    /// unbound elector and ranks the full slate. Without this, electors whose
    /// vote leases end at different times vote in rounds of their own, in ever
    /// different terms, and nobody holds a majority of one term. Not within a
    /// round trip of the vote (the ELECT/VOTE paper: two election messages per server per
    /// round trip).
    fn vote_lease_spent(&self, now: Instant, voted_at: Instant, echo: u64, sent_at: u64) -> bool {
        let lease = u64::try_from(self.seat.cfg.leader_lease().as_nanos()).unwrap_or(u64::MAX);
        sent_at.saturating_sub(echo) >= lease && now > voted_at + self.seat.cfg.round_trip
    }

    fn on_vote(&mut self, now: Instant, i: usize, term: Term, echo: u64) {
        if term < self.seat.term
            || !self.my_elects.contains(&echo)
            || self.seat.role == Role::Leader
            || !self.seat.stands()
        {
            self.seat.counters().messages_ignored += 1;
            return;
        }
        self.tally[i] = Some((term, echo));
        // The CANDIDATE machine: a vote for us makes us stand in its term.
        self.stand(now, term, echo);
        self.check_tally(now);
        if self.poll.is_some() && self.seat.role != Role::Leader {
            // Still VOTING: the voter now takes part in the poll (see
            // `participants`), which may let our own vote go out.
            self.try_vote(now);
        }
    }

    fn on_lead(&mut self, now: Instant, from: NodeId, term: Term, counter: u64, sent_at: u64) {
        if self.seat.sent_by_dead_leader(from, term) {
            // Sent before its sender died (a death notice said so).
            return;
        }
        if term < self.seat.term {
            // Obsolete: tell the stale leader about the higher term.
            let my = self.seat.term;
            return self.seat.send(
                from,
                RankedMessage::LeadAck {
                    term: my,
                    ok: false,
                    counter,
                    echo_sent_at_nanos: sent_at,
                },
            );
        }
        if term > self.seat.term {
            self.adopt_term(term);
        }
        if self.seat.role == Role::Leader {
            // Votes are unique per term: no correct cluster has two leaders
            // of one. Step down (see `Reason::RivalLeader`): the node neither
            // leads nor follows anyone until it hears a `Lead` again.
            self.seat.refused();
            self.step_down_from_leader();
            self.become_follower(Reason::RivalLeader);
            self.seat.set_leader(None);
            self.election_deadline = now + self.seat.cfg.election_timeout;
            return;
        }
        let lsn = Lsn { term, counter };
        if self.seat.stale_heartbeat(from, lsn) {
            return;
        }
        if self.seat.role != Role::Follower {
            self.become_follower(Reason::LeaderHeartbeat);
        }
        self.seat.follow(from, lsn);
        let t = self.seat.cfg.election_timeout;
        // A running lease on another node (or the anonymous one) is kept
        // beside the new one to its end (see `prior`).
        if let Some(l) = self.running_lease(now).filter(|l| l.holder() != Some(from)) {
            if self.prior.is_none_or(|p| p.until < l.until) {
                self.prior = Some(l);
            }
        }
        let support = Support::Leader { id: from, term, sent_at };
        self.lease = Some(Lease { support, until: now + t });
        self.quiet_until = self.quiet_until.max(now + self.stretch(t));
        self.election_deadline = now + t;
        // The ELECT/VOTE paper: "rcv LEAD: clear the tally board"; a leader exists, so the
        // slate is cleared too, but for the claims of electors that had
        // already seen this LEAD (or a later one) when they claimed: they
        // poll for a reason this LEAD does not answer (a death notice about
        // this leader that has not reached this node yet, whose LEAD was
        // still on its way), and their claim must stay on the slate.
        self.tally.iter_mut().for_each(|v| *v = None);
        self.claims.iter_mut().for_each(|c| {
            if c.is_some_and(|c| c.lsn < Some(lsn)) {
                *c = None;
            }
        });
        self.transfer = None;
        self.seat.send(
            from,
            RankedMessage::LeadAck { term, ok: true, counter, echo_sent_at_nanos: sent_at },
        );
    }

    fn on_lead_ack(
        &mut self,
        now: Instant,
        i: usize,
        term: Term,
        ok: bool,
        counter: u64,
        echo: u64,
    ) {
        if term > self.seat.term && self.seat.role == Role::Leader && i >= self.seat.voter_count() {
            // A leader takes a higher term from its voters only: a member
            // its configuration removes still gets its `Lead`s, and one that
            // missed its removal may have raised its term among the old
            // voters (see the paxos elector's `on_commit_ack`).
            self.seat.counters().messages_ignored += 1;
            return;
        }
        if term > self.seat.term {
            let lease = (self.seat.role == Role::Leader && now < self.seat.leader_lease_until)
                .then_some(self.seat.leader_lease_until);
            let old = self.seat.term;
            self.adopt_term(term);
            if let Some(until) = lease.filter(|_| !self.seat.storage_failed) {
                // A majority still follows us, so nobody else can be elected
                // before our lease ends: stand again at once, above the higher
                // term. Our followers join and vote for us (their lease holder),
                // and so do we.
                let me = self.seat.cfg.id;
                let support = Support::Leader { id: me, term: old, sent_at: 0 };
                self.lease = Some(Lease { support, until });
                self.start_poll(now, Reason::HigherTerm);
            }
            return;
        }
        if !ok || term < self.seat.term || self.seat.role != Role::Leader {
            self.seat.counters().messages_ignored += 1;
            return;
        }
        if counter > self.seat.lsn_counter {
            // Acknowledges a `Lead` this node never sent.
            self.seat.refused();
            return;
        }
        if self.seat.record_ack(now, i, Instant::from_nanos(echo)) {
            self.acked_counter[i] = self.acked_counter[i].max(counter);
        }
    }

    fn on_resign(&mut self, now: Instant, from: NodeId, term: Term, successor: Option<NodeId>) {
        if !self.seat.take_resignation(from, term, successor) {
            return;
        }
        if matches!(self.lease.map(|l| l.support), Some(Support::Leader { id, .. }) if id == from) {
            // The leader released everyone it led: no need to wait for other
            // followers' leases on it before voting.
            self.lease = None;
            self.quiet_until = now;
        }
        if matches!(self.prior.map(|l| l.support), Some(Support::Leader { id, .. }) if id == from) {
            self.prior = None;
        }
        if successor == Some(self.seat.cfg.id) {
            self.transfer = Some(term);
            self.start_poll(now, Reason::TransferRequested);
            return;
        }
        if self.poll.is_none() {
            // Fallback if the successor fails: poll after a heartbeat.
            self.election_deadline = now + self.seat.cfg.heartbeat_interval;
        }
        // The successor's claim came first: take it again as a transfer's,
        // as if it had come after (the same steps, now that the resignation
        // named it).
        let Some((from, i)) = successor.and_then(|s| Some((s, self.seat.index_of(s)?))) else {
            return;
        };
        if let Some(claim) =
            self.claims[i].filter(|c| c.transfer.is_none() && c.asked_transfer == Some(term))
        {
            self.on_elect(now, i, from, Claim { transfer: Some(term), ..claim });
        }
    }
}

impl<R: RngCore + Send> Rules for RankedElector<R> {
    type Msg = RankedMessage;

    fn seat(&self) -> &Seat {
        &self.seat
    }

    fn seat_mut(&mut self) -> &mut Seat {
        &mut self.seat
    }

    fn own_message(msg: Message) -> Option<RankedMessage> {
        match msg {
            Message::Ranked(msg) => Some(msg),
            _ => None,
        }
    }

    fn well_formed(&self, msg: &RankedMessage) -> bool {
        match msg {
            // A claim is a leader message the claimant saw: never from a term
            // above the claimant's own.
            RankedMessage::Elect { term, claim, .. } => claim.is_none_or(|c| c.term <= *term),
            _ => true,
        }
    }

    fn check_lease(&mut self, now: Instant) {
        self.step_down_on_lost_lease(now);
    }

    fn prepare_input(&mut self, now: Instant) {
        self.check_lease(now);
        // Any input after a self-vote comes after the driver wrote it: the
        // vote counts now, before the input can lead elsewhere.
        if std::mem::take(&mut self.self_vote_pending) {
            self.check_tally(now);
        }
    }

    fn on_message(&mut self, now: Instant, i: usize, from: NodeId, msg: RankedMessage) {
        match msg {
            RankedMessage::Elect {
                term,
                claim,
                sent_at_nanos,
                transfer,
                vote_in_nanos,
                freshness,
                leaving,
                stands,
            } => {
                // The announced vote delay is capped at the longest a correct
                // elector announces.
                let cap = collection_window(&self.seat.cfg) + self.seat.cfg.round_trip;
                // A claim ranks as a named successor's only if the leader that
                // resigned named the claimant to this node.
                let asked_transfer = transfer;
                let transfer = transfer.filter(|&t| self.seat.named_successor(t, from));
                let votes_at = now + Duration::from_nanos(vote_in_nanos).min(cap);
                let claim = Claim {
                    term,
                    lsn: claim,
                    sent_at_nanos,
                    received: now,
                    transfer,
                    asked_transfer,
                    votes_at,
                    freshness,
                    leaving,
                    stands,
                };
                self.on_elect(now, i, from, claim)
            }
            RankedMessage::Vote { term, echo_sent_at_nanos } => {
                self.on_vote(now, i, term, echo_sent_at_nanos)
            }
            RankedMessage::Lead { term, counter, sent_at_nanos } => {
                self.on_lead(now, from, term, counter, sent_at_nanos)
            }
            RankedMessage::LeadAck { term, ok, counter, echo_sent_at_nanos } => {
                self.on_lead_ack(now, i, term, ok, counter, echo_sent_at_nanos)
            }
            RankedMessage::Resign { term, successor } => self.on_resign(now, from, term, successor),
        }
    }

    fn on_timeout(&mut self, now: Instant) {
        match self.seat.role {
            Role::Leader => {
                if now >= self.seat.next_heartbeat {
                    self.broadcast_lead(now);
                }
            }
            Role::Follower => {
                if self.seat.election_due(&mut self.election_deadline, now) {
                    self.start_poll(now, Reason::ElectionTimeout);
                }
            }
            Role::PreCandidate => self.try_vote(now),
            Role::Candidate => {
                self.check_tally(now);
                if self.poll.is_some() {
                    self.try_vote(now);
                } else if now >= self.election_deadline {
                    self.start_poll(now, Reason::ElectionTimeout);
                }
                self.settle_role(now, Reason::RoundFailed);
            }
        }
    }

    fn on_persist_failed(&mut self, now: Instant) {
        // A vote for ourselves that was not written must not count.
        if self.self_vote_pending {
            let me = self.me();
            self.tally[me] = None;
            self.self_vote_pending = false;
            self.candidate_term = None;
        }
        if self.seat.role != Role::Follower {
            if self.seat.role == Role::Leader {
                self.step_down_from_leader();
                self.seat.set_leader(None);
            }
            self.become_follower(Reason::StorageFailed);
            self.election_deadline = now + self.seat.cfg.election_timeout;
        }
    }

    fn on_peer_dead(&mut self, now: Instant, peer: NodeId) {
        let backed = release_lease(&mut self.lease, peer);
        release_lease(&mut self.prior, peer);
        if backed {
            // The electors bound with this node by the same lease (the
            // leader's, or the vote round's) are told too: no need to wait
            // for their leases before voting. A promise made before that
            // lease, still running, binds this node again.
            self.lease = self.prior.take().filter(|p| now < p.until);
            self.quiet_until = now;
        }
        let was_leader = self.seat.bury_leader(peer);
        let candidate = backed && self.seat.leader.is_none() && self.seat.voted_for == Some(peer);
        if self.poll.is_some() {
            // Already VOTING: the released lease may let the vote go out.
            self.try_vote(now);
            return;
        }
        if self.seat.role != Role::Follower || !(was_leader || candidate) {
            return;
        }
        // Every elector polls at once (the ELECT/VOTE paper's ranking of the claims,
        // which all of them collect, elects the best-ranked survivor), unless
        // a lease on another node still binds this one.
        match self.running_lease(now) {
            None => self.start_poll(now, Reason::PeerDead),
            Some(l) => self.election_deadline = self.election_deadline.min(l.until),
        }
    }

    /// Steps down and tells everyone, naming `successor` if any.
    fn resign(&mut self, now: Instant, successor: Option<NodeId>) {
        self.step_down_from_leader();
        self.become_follower(Reason::Resigned);
        self.seat.set_leader(None);
        let term = self.seat.term;
        self.seat.broadcast_members(RankedMessage::Resign { term, successor });
        self.election_deadline = now + self.seat.cfg.election_timeout;
    }

    fn grow(&mut self) {
        self.claims.push(None);
        self.tally.push(None);
        self.acked_counter.push(0);
    }

    fn on_electorate(&mut self, now: Instant, old: &[NodeId], recount: bool) {
        let members = &self.seat.members;
        self.claims = remap(old, members, &self.claims, None);
        self.tally = remap(old, members, &self.tally, None);
        self.acked_counter = remap(old, members, &self.acked_counter, 0);
        if recount
            && self.seat.role != Role::Leader
            && (self.poll.is_some() || self.candidate_term.is_some())
        {
            // Its claims and votes were counted over the old voters: claim
            // again. A self-vote already taken counts no more either.
            let me = self.me();
            self.tally.iter_mut().for_each(|v| *v = None);
            self.claims[me] = None;
            self.self_vote_pending = false;
            self.become_follower(Reason::RoundFailed);
            self.election_deadline = now + self.retry_delay();
        }
    }

    fn become_follower(&mut self, reason: Reason) {
        self.poll = None;
        self.candidate_term = None;
        self.seat.next_heartbeat = Instant::MAX;
        self.seat.set_role(Role::Follower, reason);
    }

    fn deadline(&self) -> Instant {
        match self.seat.role {
            Role::Leader => self.seat.leader_deadline(),
            Role::Follower => self.election_deadline,
            Role::PreCandidate => self.poll.map_or(self.election_deadline, |p| p.next_check),
            Role::Candidate => {
                if self.self_vote_pending && self.votes_in(self.seat.term) >= self.seat.quorum() {
                    // Already decided (a single-node cluster, or elected in a
                    // term above its own): conclude once written.
                    return Instant::ZERO;
                }
                let next = self.poll.map_or(self.election_deadline, |p| p.next_check);
                self.candidacy_until.min(next)
            }
        }
    }
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
    fn default_config_is_valid() {
        assert_eq!(cfg().validate_for(ProtocolKind::Ranked), Ok(()));
    }

    #[test]
    fn a_round_trip_too_long_for_the_lease_is_rejected() {
        let mut c = cfg();
        // Bypasses the general check (round trip at most one heartbeat) to
        // reach the ranked one: 2 * 400 ms + 105 ms is not below 905 ms.
        c.round_trip = Duration::from_millis(400);
        let err = validate(&c).unwrap_err();
        assert!(matches!(err, ConfigError::Protocol { protocol: ProtocolKind::Ranked, .. }));
        assert!(err.to_string().contains("400ms"), "{err}");
        c.round_trip = Duration::from_millis(350);
        assert_eq!(validate(&c), Ok(()));
    }
}
