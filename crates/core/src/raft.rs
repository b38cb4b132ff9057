//! The Raft-style elector: terms, PreVote with leader stickiness, CheckQuorum
//! with a drift-safe leader lease, ranked candidacy, LSNs and leadership transfer.
//!
//! See `docs/ALGORITHM.md` for the design and the reasons behind each rule.

use crate::config::Config;
use crate::drift;
use crate::electorate::Freshness;
use crate::message::Message;
use crate::protocol::{HardState, Reason};
use crate::seat::{hold_left, release_lease, remap, take_named, FollowerLease, Rules, Seat};
use crate::time::Instant;
use crate::types::{Lsn, NodeId, Role, Term};
use rand_core::RngCore;
use std::time::Duration;

/// A lease a follower holds on behalf of a node it supports: until `until`, it
/// helps elect nobody else (leader stickiness). `holder == None` is the lease a
/// node starts with after a (re)start: it may have granted a lease before it
/// crashed, and that promise must be kept although its memory of it is gone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Lease {
    holder: Option<NodeId>,
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

/// Whether a round asks hypothetically (pre-vote) or for real (vote).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum RoundKind {
    PreVote,
    Vote,
}

/// An election round in progress (pre-vote or vote).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Round {
    kind: RoundKind,
    /// The term asked for: `term + 1` for a pre-vote, `term` for a vote.
    term: Term,
    started: Instant,
    deadline: Instant,
    /// Per voter index: `Some(true)` granted, `Some(false)` refused.
    answers: Vec<Option<bool>>,
    /// Per voter index: the remaining lease its refusal reported, to time the
    /// retry (one entry per voter, so duplicated refusals count once).
    lease_waits: Vec<Option<Duration>>,
    /// Per voter index: when to ask again a voter whose lease on a (probably
    /// dead) leader was about to end when it refused.
    reask_at: Vec<Option<Instant>>,
    /// Set for a round started on a death notice about the leader: a voter
    /// that refuses for a lease has most likely not had its own notice yet,
    /// so it is asked again soon instead of counting as a refusal.
    after_notice: bool,
}

/// The Raft-style elector. Construct it with [`RaftElector::new`] and drive it
/// through the [`Protocol`](crate::Protocol) trait, whose documentation states the calling contract.
///
/// `R` is the caller's seeded random source (used only for a small jitter on
/// candidacy deadlines). With a `Clone + Hash + Eq` RNG the whole elector is
/// `Clone + Hash + Eq`, which lets a model checker treat it as a state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RaftElector<R = Box<dyn RngCore + Send>> {
    seat: Seat,
    rng: R,
    lease: Option<Lease>,
    /// A lease granted before `lease` that may still run: a heartbeat of
    /// another leader (a higher term is no proof that the earlier leader's
    /// lease ended: a forged one is not) adds its lease, it does not end the
    /// earlier promise.
    prior_lease: Option<Lease>,
    /// The pre-candidate this node last backed, and until when it backs no other.
    pre_vote_hold: Option<Lease>,
    /// How fresh that pre-candidate's log was: a fresher one is backed
    /// despite the hold.
    pre_vote_hold_freshness: Freshness,
    /// Follower: when to start a pre-vote.
    election_deadline: Instant,
    round: Option<Round>,
    /// Per voter index: the term of a transfer's vote request from that
    /// voter refused for a lease because the leader's resignation naming it
    /// had not arrived yet (they travel on different connections). Answered
    /// again when that resignation arrives, so the handover does not wait
    /// for the candidate's round to run out. One slot per voter: a request
    /// from one cannot displace another's.
    early_transfer_votes: Vec<Option<Term>>,
}

impl<R: RngCore + Send> RaftElector<R> {
    /// A new elector starting as a follower from the durable `state` (all-default
    /// for a fresh node). It waits an election timeout to discover a leader before
    /// polling for an election. `cfg` must be valid (see [`Config::validate`]).
    pub fn new(cfg: Config, state: HardState, rng: R, now: Instant) -> Self {
        debug_assert_eq!(cfg.validate_settings(), Ok(()));
        let lease = Some(Lease { holder: None, until: now + cfg.election_timeout });
        let lease_length = cfg.leader_lease();
        let seat = Seat::new(cfg, state, lease_length, now);
        let slots = seat.slots();
        let mut elector = RaftElector {
            seat,
            rng,
            lease,
            prior_lease: None,
            pre_vote_hold: None,
            pre_vote_hold_freshness: Freshness::BOOTSTRAP,
            election_deadline: Instant::MAX,
            round: None,
            early_transfer_votes: vec![None; slots],
        };
        elector.election_deadline = now + elector.seat.cfg.election_timeout + elector.stagger();
        elector
    }

    /// Delay before this node's candidacy: its position among the voters in
    /// preference order (skipping the leader it last knew, which has presumably
    /// failed) times the stagger, plus a small seeded jitter.
    fn stagger(&mut self) -> Duration {
        let skip = self.seat.leader;
        let rank = self
            .seat
            .cfg
            .voters
            .iter()
            .filter(|&&v| Some(v) != skip)
            .position(|&v| v == self.seat.cfg.id)
            .unwrap_or(0) as u32;
        let step = self.seat.cfg.candidacy_stagger;
        let jitter_max = (step / 4).as_nanos().max(1) as u64;
        step * rank + Duration::from_nanos(self.rng.next_u64() % jitter_max)
    }

    /// Moves to a higher term as a follower with no known leader.
    fn adopt_term(&mut self, term: Term) {
        debug_assert!(term > self.seat.term);
        // A kept transfer request for this term or an older one can no
        // longer be answered (its resignation would be of an older term).
        for kept in &mut self.early_transfer_votes {
            *kept = kept.filter(|&t| t > term);
        }
        self.seat.term = term;
        self.seat.voted_for = None;
        self.seat.last_lsn = None;
        self.seat.persist();
        if self.seat.role != Role::Follower {
            self.become_follower(Reason::HigherTerm);
        }
        self.seat.set_leader(None);
    }

    /// True while this node supports a leader (or a candidate it voted for) other
    /// than `candidate`, or leads itself with a valid lease.
    fn lease_blocks(&self, now: Instant, candidate: NodeId) -> Option<Duration> {
        if self.seat.role == Role::Leader && now < self.seat.leader_lease_until {
            return Some(self.seat.leader_lease_until.saturating_since(now));
        }
        let blocks = |l: Option<Lease>| {
            l.filter(|l| l.holder != Some(candidate) && now < l.until)
                .map(|l| l.until.saturating_since(now))
        };
        blocks(self.lease).max(blocks(self.prior_lease))
    }

    fn grant_lease(&mut self, now: Instant, holder: NodeId) {
        self.lease =
            Some(Lease { holder: Some(holder), until: now + self.seat.cfg.election_timeout });
    }

    /// The lease a leader's heartbeat earns (every acknowledged heartbeat
    /// must: the leader's lease counts on it). A running lease on another
    /// node, or the anonymous one, is kept beside it to its end.
    fn lease_from_heartbeat(&mut self, now: Instant, leader: NodeId) {
        if let Some(l) = self.lease.filter(|l| l.holder != Some(leader) && now < l.until) {
            if self.prior_lease.is_none_or(|p| p.until < l.until) {
                self.prior_lease = Some(l);
            }
        }
        self.grant_lease(now, leader);
    }

    /// Steps down a leader whose lease ran out (see [`Seat::lease_lost`]).
    fn step_down_on_lost_lease(&mut self, now: Instant) {
        if !self.seat.lease_lost(now) {
            return;
        }
        self.become_follower(Reason::QuorumLost);
        self.seat.set_leader(None);
        // Poll again soon: followers whose lease on us still runs grant our
        // pre-vote, so if acknowledgements were merely late (a partition that
        // just healed) we are re-elected at once instead of leaving the
        // cluster leaderless until their leases run out. If another leader
        // exists, the poll is refused and changes nothing.
        self.election_deadline = now + self.seat.cfg.candidacy_stagger;
    }

    /// Steps down a leader that heard another node lead its own term (see
    /// [`Reason::RivalLeader`]): the frame is refused, and the node neither
    /// leads nor follows anyone until it hears a heartbeat again. Two leaders
    /// made by a voter that voted twice then last until they hear each other
    /// (a heartbeat), not for as long as the liar keeps them up; without TLS,
    /// a forged heartbeat can depose a leader this way, as a forged higher
    /// term already could.
    fn step_down_for_rival(&mut self, now: Instant) {
        self.seat.refused();
        self.become_follower(Reason::RivalLeader);
        self.seat.set_leader(None);
        self.election_deadline = now + self.seat.cfg.election_timeout + self.stagger();
    }

    // ---- Candidacy ----

    fn start_pre_vote(&mut self, now: Instant, reason: Reason) {
        let proposed = self.seat.next_term().filter(|_| self.seat.stands());
        let Some(proposed) = proposed.filter(|_| !self.seat.storage_failed) else {
            // A node that cannot persist, or whose term cannot grow, or that
            // may not stand (a learner, a removed node), cannot campaign: no
            // point in polling. An election timeout without a word from its
            // leader: it knows none (a removed node told its clients of a
            // leader dead for seconds).
            self.seat.set_leader(None);
            self.election_deadline = now + self.seat.cfg.election_timeout;
            return;
        };
        // A pre-candidate forgets its old leader and lease, so it can support
        // another pre-candidate (etcd #9586, #10355).
        self.lease = None;
        self.seat.renew_stall_grace();
        self.seat.set_leader(None);
        if self.seat.others().next().is_none() {
            // The only voter: nobody to ask.
            self.start_vote(now, false);
            return;
        }
        self.seat.counters().pre_votes_started += 1;
        let mut round = self.new_round(RoundKind::PreVote, proposed, now);
        round.after_notice = reason == Reason::PeerDead;
        self.round = Some(round);
        self.seat.set_role(Role::PreCandidate, reason);
        let freshness = self.freshness();
        self.seat.broadcast(Message::PreVote { term: proposed, freshness });
    }

    /// The configuration this node holds, carried by its requests.
    fn freshness(&self) -> Freshness {
        self.seat.electorate.freshness()
    }

    /// Whether a candidate whose log is as fresh as `freshness` is less fresh than
    /// this node's (the freshness rule, [`crate::electorate`]): refused.
    fn stale(&mut self, freshness: Freshness) -> bool {
        let stale = freshness < self.freshness();
        if stale {
            self.seat.counters().messages_ignored += 1;
        }
        stale
    }

    fn new_round(&self, kind: RoundKind, term: Term, now: Instant) -> Round {
        let slots = self.seat.slots();
        let mut answers = vec![None; slots];
        // Counts only if this node votes (see `Seat::count`).
        answers[self.seat.me] = Some(true);
        // A vote round must end while the lease it would start is still valid
        // (the lease counts from the round's start).
        // Pre-vote rounds change nothing, so a lost one is retried soon.
        let length = match kind {
            RoundKind::PreVote => self.seat.cfg.election_timeout / 2,
            RoundKind::Vote => self.seat.cfg.leader_lease(),
        };
        let reask_at = vec![None; slots];
        Round {
            kind,
            term,
            started: now,
            deadline: now + length,
            answers,
            lease_waits: vec![None; slots],
            reask_at,
            after_notice: false,
        }
    }

    fn start_vote(&mut self, now: Instant, transfer: bool) {
        let term = self.seat.next_term().filter(|_| self.seat.stands());
        let Some(term) = term.filter(|_| !self.seat.storage_failed) else {
            // A node that cannot persist, or whose term cannot grow, or that
            // may not stand, cannot stand.
            let reason =
                if self.seat.storage_failed { Reason::StorageFailed } else { Reason::RoundFailed };
            self.become_follower(reason);
            self.election_deadline = now + self.seat.cfg.election_timeout;
            return;
        };
        self.seat.counters().elections_started += 1;
        self.seat.term = term;
        self.seat.voted_for = Some(self.seat.cfg.id);
        self.seat.last_lsn = None;
        self.lease = None;
        self.seat.persist();
        self.seat.set_leader(None);
        self.round = Some(self.new_round(RoundKind::Vote, self.seat.term, now));
        self.seat.set_role(
            Role::Candidate,
            if transfer { Reason::TransferRequested } else { Reason::PreVoteWon },
        );
        let term = self.seat.term;
        let freshness = self.freshness();
        self.seat.broadcast(Message::Vote { term, transfer, freshness });
        // Our own vote counts only from the next input on: by then the driver
        // has either persisted it or reported the failure. (With peers, their
        // answers can only come after our request left, i.e. after the write.)
    }

    fn become_leader(&mut self, now: Instant, round: &Round) {
        self.round = None;
        // Voters that granted started their lease on us when they granted, which
        // is no earlier than the round started.
        for (i, a) in round.answers.iter().enumerate() {
            self.seat.acked_sent_at[i] = (*a == Some(true)).then_some(round.started);
        }
        let backers = self.seat.count(&round.answers, true);
        self.seat.take_office(backers);
        self.seat.recompute_leader_lease();
        self.broadcast_heartbeat(now);
    }

    fn broadcast_heartbeat(&mut self, now: Instant) {
        let (counter, sent_at_nanos) = self.seat.next_heartbeat_at(now);
        let term = self.seat.term;
        self.seat.broadcast_members(Message::Heartbeat { term, counter, sent_at_nanos });
    }

    /// Concludes the current round if its outcome is known.
    fn check_round(&mut self, now: Instant) {
        let Some(round) = self.round.as_ref() else { return };
        let granted = self.seat.count(&round.answers, true);
        let refused = self.seat.count(&round.answers, false);
        let quorum = self.seat.cfg.quorum();
        let n = self.seat.voter_count();
        if now >= round.deadline || n - refused < quorum {
            // Checked first: answers that arrive after the deadline (say, to a
            // candidate resumed from a pause) are stale and must not count.
            let round = self.round.take().expect("round present");
            self.round_failed(now, &round, granted);
        } else if granted >= quorum {
            let round = self.round.take().expect("round present");
            match round.kind {
                RoundKind::PreVote => self.start_vote(now, false),
                RoundKind::Vote => self.become_leader(now, &round),
            }
        }
    }

    fn round_failed(&mut self, now: Instant, round: &Round, granted: usize) {
        self.become_follower(Reason::RoundFailed);
        // Retry when enough of the refusers' leases have run out, else after a
        // stagger; never later than a full election timeout.
        let mut waits: Vec<Duration> = round.lease_waits.iter().flatten().copied().collect();
        waits.sort_unstable();
        let needed = self.seat.cfg.quorum().saturating_sub(granted);
        let lease_wait = waits.get(needed.saturating_sub(1)).copied().unwrap_or(Duration::ZERO);
        let wait = lease_wait.min(self.seat.cfg.election_timeout)
            + self.stagger()
            + self.seat.cfg.candidacy_stagger;
        self.election_deadline = now + wait;
    }

    // ---- Message handlers ----

    fn on_pre_vote(&mut self, now: Instant, from: NodeId, proposed: Term, freshness: Freshness) {
        let refuse = |me: &mut Self, lease: Option<Duration>| {
            let term = me.seat.term;
            me.seat.send(
                from,
                Message::PreVoteResponse {
                    term,
                    proposed,
                    granted: false,
                    lease_remaining_ms: lease.map(|d| d.as_millis().max(1) as u64),
                },
            );
        };
        if self.seat.storage_failed
            || proposed <= self.seat.term
            || self.stale(freshness)
            || !self.seat.grants()
        {
            return refuse(self, None);
        }
        if let Some(left) = self.lease_blocks(now, from) {
            return refuse(self, Some(left));
        }
        // A pre-candidate whose log is fresher than the one backed is backed
        // too: the one backed may be unable to win (those of the newer
        // configuration refuse it), and a hold renewed by its every retry
        // kept the one that can win from a majority (raft membership seed
        // 2609: a stale pre-candidate asked every 50 ms).
        let fresher = freshness > self.pre_vote_hold_freshness;
        if let Some(h) =
            self.pre_vote_hold.filter(|h| h.holder != Some(from) && now < h.until && !fresher)
        {
            // We just backed another pre-candidate: give it time to win before
            // backing a second one (two passing pre-votes cost an extra round).
            return refuse(self, Some(h.until.saturating_since(now)));
        }
        match self.seat.role {
            Role::Candidate => return refuse(self, None),
            Role::PreCandidate => {
                // The ELECT/VOTE paper's ranking: yield to a better-ranked pre-candidate, refuse a worse one.
                let (Some(mine), Some(theirs)) =
                    (self.seat.index_of(self.seat.cfg.id), self.seat.index_of(from))
                else {
                    return refuse(self, None);
                };
                // A pre-candidate holding a newer configuration ranks first
                // whatever its place: this node's own candidacy cannot win
                // where that configuration is known.
                if theirs > mine && freshness == self.freshness() {
                    return refuse(self, None);
                }
                self.become_follower(Reason::RoundFailed);
                self.election_deadline = now + self.seat.cfg.heartbeat_interval + self.stagger();
            }
            Role::Follower => {
                // Give the pre-candidate time to finish before standing ourselves.
                let hold = now + self.seat.cfg.heartbeat_interval + self.stagger();
                self.election_deadline = self.election_deadline.max(hold);
            }
            Role::Leader => return refuse(self, None),
        }
        // Only liveness depends on this hold, never safety: it is not a lease.
        self.pre_vote_hold =
            Some(Lease { holder: Some(from), until: now + self.seat.cfg.heartbeat_interval });
        self.pre_vote_hold_freshness = freshness;

        let term = self.seat.term;
        self.seat.send(
            from,
            Message::PreVoteResponse { term, proposed, granted: true, lease_remaining_ms: None },
        );
    }

    fn on_pre_vote_response(
        &mut self,
        now: Instant,
        from: NodeId,
        term: Term,
        proposed: Term,
        granted: bool,
        lease_ms: Option<u64>,
    ) {
        if !granted && term > self.seat.term {
            // The responder is ahead: catch up so that we are never stuck behind
            // (etcd #8243), then poll again from the new term.
            self.adopt_term(term);
            self.election_deadline = now + self.stagger() + self.seat.cfg.candidacy_stagger;
            return;
        }
        let Some(i) = self.seat.index_of(from) else { return };
        let reask = self.round.as_ref().map(|r| self.seat.notice_reask_at(r.started, now));
        let Some(round) = self.round.as_mut() else {
            self.seat.counters().messages_ignored += 1;
            return;
        };
        if round.kind != RoundKind::PreVote || round.term != proposed {
            self.seat.counters().messages_ignored += 1;
            return;
        }
        match lease_ms {
            Some(ms) if !granted => {
                // The voter still holds a lease. If it ends before this round
                // does, ask that voter again right then instead of letting the
                // round wait for its deadline (a dead leader never answers).
                let remaining =
                    drift::stretch(Duration::from_millis(ms), self.seat.cfg.clock_drift_ppm);
                let at = now + remaining + Duration::from_millis(1);
                if let Some(soon) = reask.filter(|_| round.after_notice) {
                    // Standing on a death notice: the voter's lease is most
                    // likely on the dead leader, and its own notice has not
                    // arrived yet. Ask again soon; its refusal is not final.
                    round.answers[i] = None;
                    round.lease_waits[i] = Some(remaining);
                    round.reask_at[i] = Some(at.min(soon));
                } else if at < round.deadline {
                    round.answers[i] = None;
                    round.reask_at[i] = Some(at);
                } else {
                    round.answers[i] = Some(false);
                    round.lease_waits[i] = Some(remaining);
                }
            }
            _ => round.answers[i] = Some(granted),
        }
        self.check_round(now);
    }

    /// Sends the pre-vote again to voters whose lease should now have ended.
    fn reask_pre_votes(&mut self, now: Instant) {
        let Some(round) = self.round.as_mut().filter(|r| r.kind == RoundKind::PreVote) else {
            return;
        };
        let term = round.term;
        let mut due = Vec::new();
        for (i, at) in round.reask_at.iter_mut().enumerate() {
            if at.is_some_and(|at| at <= now) {
                *at = None;
                due.push(self.seat.members[i]);
            }
        }
        let freshness = self.freshness();
        for to in due {
            self.seat.send(to, Message::PreVote { term, freshness });
        }
    }

    fn on_vote(
        &mut self,
        now: Instant,
        from: NodeId,
        term: Term,
        asked_transfer: bool,
        freshness: Freshness,
    ) {
        // A transfer passes a lease only if the leader that resigned named
        // `from` to this node, for the term before this one.
        let transfer = asked_transfer
            && term.0.checked_sub(1).is_some_and(|t| self.seat.named_successor(Term(t), from));
        if self.seat.storage_failed || self.stale(freshness) || !self.seat.grants() {
            // A candidate of an older configuration is refused without
            // taking its term: it may be a removed node.
            let my = self.seat.term;
            return self.seat.send(from, Message::VoteResponse { term: my, granted: false });
        }
        if !transfer && self.lease_blocks(now, from).is_some() {
            let early = asked_transfer && term > self.seat.term;
            if let Some(i) = self.seat.index_of(from).filter(|_| early) {
                // Perhaps ahead of the resignation that names it.
                self.early_transfer_votes[i] = Some(term);
            }
            // Sticky leader: ignore a disruptive candidate without adopting its term.
            let my = self.seat.term;
            return self.seat.send(from, Message::VoteResponse { term: my, granted: false });
        }
        if term > self.seat.term {
            self.adopt_term(term);
        }
        let grant = term == self.seat.term
            && (self.seat.voted_for.is_none() || self.seat.voted_for == Some(from))
            && matches!(self.seat.role, Role::Follower | Role::PreCandidate);
        if grant {
            if self.seat.role == Role::PreCandidate {
                self.become_follower(Reason::HigherTerm);
            }
            self.seat.voted_for = Some(from);
            self.seat.persist();
            self.grant_lease(now, from);
            self.election_deadline = now + self.seat.cfg.election_timeout + self.stagger();
        }
        let my = self.seat.term;
        self.seat.send(from, Message::VoteResponse { term: my, granted: grant });
    }

    fn on_vote_response(&mut self, now: Instant, from: NodeId, term: Term, granted: bool) {
        if term > self.seat.term {
            self.adopt_term(term);
            self.election_deadline = now + self.seat.cfg.election_timeout + self.stagger();
            return;
        }
        let Some(i) = self.seat.index_of(from) else { return };
        match self.round.as_mut() {
            Some(r) if r.kind == RoundKind::Vote && r.term == term => {
                r.answers[i] = Some(granted);
                self.check_round(now);
            }
            _ => self.seat.counters().messages_ignored += 1,
        }
    }

    fn on_heartbeat(&mut self, now: Instant, from: NodeId, term: Term, counter: u64, sent_at: u64) {
        if self.seat.sent_by_dead_leader(from, term) {
            // Sent before its sender died (a death notice said so).
            return;
        }
        if term < self.seat.term {
            // "Invalid heartbeat": tell the stale leader about the newer term.
            let my = self.seat.term;
            return self.seat.send(
                from,
                Message::HeartbeatResponse { term: my, ok: false, echo_sent_at_nanos: sent_at },
            );
        }
        if term > self.seat.term {
            self.adopt_term(term);
        }
        if self.seat.role == Role::Leader {
            // Votes are unique per term: no correct cluster has two leaders
            // of one.
            return self.step_down_for_rival(now);
        }
        let lsn = Lsn { term, counter };
        if self.seat.stale_heartbeat(from, lsn) {
            return;
        }
        if self.seat.role != Role::Follower {
            self.become_follower(Reason::LeaderHeartbeat);
        }
        self.seat.follow(from, lsn);
        self.lease_from_heartbeat(now, from);
        self.election_deadline = now + self.seat.cfg.election_timeout + self.stagger();
        // The acknowledgement doubles as the unsolicited support of BlazingMQ when
        // this is the first heartbeat from a newly discovered leader.
        self.seat
            .send(from, Message::HeartbeatResponse { term, ok: true, echo_sent_at_nanos: sent_at });
    }

    fn on_heartbeat_response(
        &mut self,
        now: Instant,
        from: NodeId,
        term: Term,
        ok: bool,
        echo: u64,
    ) {
        let voter = self.seat.electorate.is_voter(from);
        if term > self.seat.term && self.seat.role == Role::Leader && !voter {
            // A leader takes a higher term from its voters only: a member
            // its configuration removes still gets its heartbeats, and one
            // that missed its removal may have raised its term among the old
            // voters (see the paxos elector's `on_commit_ack`).
            self.seat.counters().messages_ignored += 1;
            return;
        }
        if term > self.seat.term {
            let had_quorum = self.seat.role == Role::Leader && now < self.seat.leader_lease_until;
            self.adopt_term(term);
            if had_quorum && !self.seat.storage_failed {
                // A majority still supports us, so nobody else can win this term:
                // re-establish leadership at a higher term at once instead of
                // leaving the cluster leaderless for an election timeout.
                self.start_vote(now, false);
            } else {
                self.election_deadline = now + self.seat.cfg.election_timeout + self.stagger();
            }
            return;
        }
        if !ok || term < self.seat.term || self.seat.role != Role::Leader {
            self.seat.counters().messages_ignored += 1;
            return;
        }
        let Some(i) = self.seat.index_of(from) else { return };
        self.seat.record_ack(now, i, Instant::from_nanos(echo));
    }

    fn on_resign(&mut self, now: Instant, from: NodeId, term: Term, successor: Option<NodeId>) {
        if !self.seat.take_resignation(from, term, successor) {
            return;
        }
        release_lease(&mut self.lease, from);
        release_lease(&mut self.prior_lease, from);
        // Whatever the resignation says, the kept requests were for the
        // term after it or are stale: the named successor's is taken.
        let named = take_named(&mut self.early_transfer_votes, &self.seat, successor);
        let freshness = self.freshness();
        if successor == Some(self.seat.cfg.id) {
            self.start_vote(now, true);
        } else {
            // Fallback if the successor fails: stand soon, in rank order.
            self.election_deadline = now + self.seat.cfg.heartbeat_interval + self.stagger();
            if let Some((candidate, asked)) =
                named.filter(|&(_, t)| t.0.checked_sub(1) == Some(term.0))
            {
                // The successor's vote request came first: answer it now, as
                // if it had come after (the same checks, now that the
                // resignation named it).
                // The kept request's configuration was checked when it came;
                // the one it holds now is at least as new as this node's.
                self.on_vote(now, candidate, asked, true, freshness);
            }
        }
    }
}

impl<R: RngCore + Send> Rules for RaftElector<R> {
    type Msg = Message;

    fn seat(&self) -> &Seat {
        &self.seat
    }

    fn seat_mut(&mut self) -> &mut Seat {
        &mut self.seat
    }

    fn own_message(msg: Message) -> Option<Message> {
        match msg {
            // Another protocol's message: a misconfigured peer.
            Message::Ranked(_) | Message::Paxos(_) => None,
            msg => Some(msg),
        }
    }

    fn check_lease(&mut self, now: Instant) {
        self.step_down_on_lost_lease(now);
    }

    fn on_message(&mut self, now: Instant, _i: usize, from: NodeId, msg: Message) {
        match msg {
            Message::PreVote { term, freshness } => self.on_pre_vote(now, from, term, freshness),
            Message::PreVoteResponse { term, proposed, granted, lease_remaining_ms } => {
                self.on_pre_vote_response(now, from, term, proposed, granted, lease_remaining_ms)
            }
            Message::Vote { term, transfer, freshness } => {
                self.on_vote(now, from, term, transfer, freshness)
            }
            Message::VoteResponse { term, granted } => {
                self.on_vote_response(now, from, term, granted)
            }
            Message::Heartbeat { term, counter, sent_at_nanos } => {
                self.on_heartbeat(now, from, term, counter, sent_at_nanos)
            }
            Message::HeartbeatResponse { term, ok, echo_sent_at_nanos } => {
                self.on_heartbeat_response(now, from, term, ok, echo_sent_at_nanos)
            }
            Message::Resign { term, successor } => self.on_resign(now, from, term, successor),
            Message::Ranked(_) | Message::Paxos(_) => {
                unreachable!("own_message lets only raft messages through")
            }
        }
    }

    fn on_timeout(&mut self, now: Instant) {
        match self.seat.role {
            Role::Leader => {
                if now >= self.seat.next_heartbeat {
                    self.broadcast_heartbeat(now);
                }
            }
            Role::Follower => {
                if self.seat.election_due(&mut self.election_deadline, now) {
                    self.start_pre_vote(now, Reason::ElectionTimeout);
                }
            }
            Role::PreCandidate | Role::Candidate => {
                self.reask_pre_votes(now);
                self.check_round(now);
            }
        }
    }

    fn on_persist_failed(&mut self, now: Instant) {
        if self.seat.role != Role::Follower {
            if self.seat.role == Role::Leader {
                self.seat.set_leader(None);
            }
            self.become_follower(Reason::StorageFailed);
            self.election_deadline = now + self.seat.cfg.election_timeout + self.stagger();
        }
    }

    fn on_peer_dead(&mut self, now: Instant, peer: NodeId) {
        let backed = release_lease(&mut self.lease, peer);
        release_lease(&mut self.prior_lease, peer);
        release_lease(&mut self.pre_vote_hold, peer);
        let was_leader = self.seat.bury_leader(peer);
        // The candidate this node voted for can no longer take office either.
        let candidate = backed && self.seat.leader.is_none() && self.seat.voted_for == Some(peer);
        if self.seat.role != Role::Follower || !(was_leader || candidate) {
            return;
        }
        // Stand in rank order, after any lease this node still holds on
        // another node (or the anonymous one of a restart) and any
        // pre-candidate it just backed: those still bind it.
        let me = self.seat.cfg.id;
        let bound = self.lease_blocks(now, me).unwrap_or(Duration::ZERO);
        let bound = bound.max(hold_left(self.pre_vote_hold, me, now));
        let jitter = self.rng.next_u64();
        match self.seat.stand_after_notice(now, peer, bound, jitter) {
            None => self.start_pre_vote(now, Reason::PeerDead),
            Some(at) => self.election_deadline = self.election_deadline.min(at),
        }
    }

    fn resign(&mut self, now: Instant, successor: Option<NodeId>) {
        self.become_follower(Reason::Resigned);
        self.seat.set_leader(None);
        let term = self.seat.term;
        self.seat.broadcast_members(Message::Resign { term, successor });
        // Support the successor: do not stand ourselves before it could win.
        if let Some(s) = successor {
            self.grant_lease(now, s);
        }
        self.election_deadline = now + self.seat.cfg.election_timeout + self.stagger();
    }

    fn grow(&mut self) {
        self.early_transfer_votes.push(None);
        if let Some(r) = self.round.as_mut() {
            r.answers.push(None);
            r.lease_waits.push(None);
            r.reask_at.push(None);
        }
    }

    fn on_electorate(&mut self, now: Instant, old: &[NodeId], recount: bool) {
        self.early_transfer_votes =
            remap(old, &self.seat.members, &self.early_transfer_votes, None);
        if recount && self.round.is_some() {
            // Its answers were counted over the old voters: ask again.
            self.become_follower(Reason::RoundFailed);
            self.election_deadline = now + self.stagger() + self.seat.cfg.candidacy_stagger;
        }
    }

    fn become_follower(&mut self, reason: Reason) {
        self.round = None;
        self.seat.next_heartbeat = Instant::MAX;
        self.seat.set_role(Role::Follower, reason);
    }

    fn deadline(&self) -> Instant {
        match self.seat.role {
            Role::Leader => self.seat.leader_deadline(),
            Role::Follower => self.election_deadline,
            Role::PreCandidate | Role::Candidate => {
                self.round.as_ref().map_or(self.election_deadline, |r| {
                    if self.seat.count(&r.answers, true) >= self.seat.quorum() {
                        // Already decided (a single-node cluster): conclude at once.
                        return r.started;
                    }
                    r.reask_at.iter().flatten().fold(r.deadline, |a, &b| a.min(b))
                })
            }
        }
    }
}
