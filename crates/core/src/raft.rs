//! The Raft-style elector: terms, PreVote with leader stickiness, CheckQuorum
//! with a drift-safe leader lease, ranked candidacy, LSNs and leadership transfer.
//!
//! See `docs/ALGORITHM.md` for the design and the reasons behind each rule.

use crate::config::Config;
use crate::handover;
use crate::message::Message;
use crate::protocol::{
    Counters, Event, HardState, Output, PeerStatus, Protocol, Reason, Status, TransferError,
};
use crate::time::Instant;
use crate::types::{FencingToken, Lsn, NodeId, Role, Term};
use rand_core::RngCore;
use std::time::Duration;

/// A timer that fires more than one heartbeat interval after its deadline
/// means this node itself did not run (a scheduling stall, a paused VM): the
/// silence it measured tells nothing about its peers. A follower then listens
/// for this many more heartbeat intervals before polling, and a leader whose
/// lease ran out meanwhile tries for as long to renew it with fresh
/// heartbeats before it steps down. Once per stall, so a dead leader costs at
/// most this much more.
pub const STALL_GRACE_HEARTBEATS: u32 = 2;

/// A lease a follower holds on behalf of a node it supports: until `until`, it
/// helps elect nobody else (leader stickiness). `holder == None` is the lease a
/// node starts with after a (re)start: it may have granted a lease before it
/// crashed, and that promise must be kept although its memory of it is gone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Lease {
    holder: Option<NodeId>,
    until: Instant,
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
}

/// The Raft-style elector. Construct it with [`RaftElector::new`] and drive it
/// through the [`Protocol`] trait, whose documentation states the calling contract.
///
/// `R` is the caller's seeded random source (used only for a small jitter on
/// candidacy deadlines). With a `Clone + Hash + Eq` RNG the whole elector is
/// `Clone + Hash + Eq`, which lets a model checker treat it as a state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RaftElector<R = Box<dyn RngCore + Send>> {
    cfg: Config,
    rng: R,
    // Durable.
    term: Term,
    voted_for: Option<NodeId>,
    // Volatile.
    role: Role,
    leader: Option<NodeId>,
    lease: Option<Lease>,
    /// The pre-candidate this node last backed, and until when it backs no other.
    pre_vote_hold: Option<Lease>,
    /// Follower: when to start a pre-vote.
    election_deadline: Instant,
    round: Option<Round>,
    /// Leader: LSN counter of the last heartbeat broadcast.
    lsn_counter: u64,
    /// Follower: the last LSN accepted from the leader.
    last_lsn: Option<Lsn>,
    next_heartbeat: Instant,
    /// Leader: per voter index, the send time (own clock) of the newest heartbeat
    /// (or vote request) that voter acknowledged.
    acked_sent_at: Vec<Option<Instant>>,
    leader_lease_until: Instant,
    /// Leader, after a stall outlived its lease: until when it tries to renew
    /// the lease with fresh heartbeats (it does not lead meanwhile).
    lease_renewal_until: Option<Instant>,
    /// Follower: the stall grace was used since it last heard its leader or polled.
    stall_grace_spent: bool,
    last_heard: Vec<Option<Instant>>,
    storage_failed: bool,
    stopped: bool,
    out: Output,
    counters: Counters,
}

impl<R: RngCore + Send> RaftElector<R> {
    /// A new elector starting as a follower from the durable `state` (all-default
    /// for a fresh node). It waits an election timeout to discover a leader before
    /// polling for an election. `cfg` must be valid (see [`Config::validate`]).
    pub fn new(cfg: Config, state: HardState, rng: R, now: Instant) -> Self {
        debug_assert_eq!(cfg.validate(), Ok(()));
        let n = cfg.voters.len();
        let mut elector = RaftElector {
            term: state.term,
            voted_for: state.voted_for,
            role: Role::Follower,
            leader: None,
            lease: Some(Lease { holder: None, until: now + cfg.election_timeout }),
            pre_vote_hold: None,
            election_deadline: Instant::MAX,
            round: None,
            lsn_counter: 0,
            last_lsn: None,
            next_heartbeat: Instant::MAX,
            acked_sent_at: vec![None; n],
            leader_lease_until: Instant::ZERO,
            lease_renewal_until: None,
            stall_grace_spent: false,
            last_heard: vec![None; n],
            storage_failed: false,
            stopped: false,
            out: Output::default(),
            counters: Counters::default(),
            rng,
            cfg,
        };
        elector.election_deadline = now + elector.cfg.election_timeout + elector.stagger();
        elector.out.events.push(Event::RoleChanged {
            role: Role::Follower,
            term: elector.term,
            reason: Reason::Startup,
        });
        elector
    }

    fn index_of(&self, id: NodeId) -> Option<usize> {
        self.cfg.voters.iter().position(|&v| v == id)
    }

    fn others(&self) -> impl Iterator<Item = NodeId> + '_ {
        let me = self.cfg.id;
        self.cfg.voters.iter().copied().filter(move |&v| v != me)
    }

    fn send(&mut self, to: NodeId, msg: Message) {
        self.out.messages.push((to, msg));
    }

    fn broadcast(&mut self, msg: Message) {
        let others: Vec<NodeId> = self.others().collect();
        for to in others {
            self.send(to, msg.clone());
        }
    }

    fn persist(&mut self) {
        self.out.persist = Some(HardState { term: self.term, voted_for: self.voted_for });
    }

    /// Delay before this node's candidacy: its position among the voters in
    /// preference order (skipping the leader it last knew, which has presumably
    /// failed) times the stagger, plus a small seeded jitter.
    fn stagger(&mut self) -> Duration {
        let skip = self.leader;
        let rank = self
            .cfg
            .voters
            .iter()
            .filter(|&&v| Some(v) != skip)
            .position(|&v| v == self.cfg.id)
            .unwrap_or(0) as u32;
        let step = self.cfg.candidacy_stagger;
        let jitter_max = (step / 4).as_nanos().max(1) as u64;
        step * rank + Duration::from_nanos(self.rng.next_u64() % jitter_max)
    }

    fn set_role(&mut self, role: Role, reason: Reason) {
        if self.role != role {
            self.role = role;
            self.lease_renewal_until = None;
            self.out.events.push(Event::RoleChanged { role, term: self.term, reason });
        }
    }

    fn set_leader(&mut self, leader: Option<NodeId>) {
        if self.leader != leader {
            self.leader = leader;
            self.out.events.push(Event::LeaderChanged {
                leader,
                term: self.term,
                fencing_token: leader.map(|_| FencingToken::for_term(self.term)),
            });
        }
    }

    /// Moves to a higher term as a follower with no known leader.
    fn adopt_term(&mut self, term: Term) {
        debug_assert!(term > self.term);
        self.term = term;
        self.voted_for = None;
        self.last_lsn = None;
        self.persist();
        if self.role != Role::Follower {
            self.become_follower(Reason::HigherTerm);
        }
        self.set_leader(None);
    }

    fn become_follower(&mut self, reason: Reason) {
        self.round = None;
        self.next_heartbeat = Instant::MAX;
        self.set_role(Role::Follower, reason);
    }

    /// True while this node supports a leader (or a candidate it voted for) other
    /// than `candidate`, or leads itself with a valid lease.
    fn lease_blocks(&self, now: Instant, candidate: NodeId) -> Option<Duration> {
        if self.role == Role::Leader && now < self.leader_lease_until {
            return Some(self.leader_lease_until.saturating_since(now));
        }
        match self.lease {
            Some(l) if l.holder != Some(candidate) && now < l.until => {
                Some(l.until.saturating_since(now))
            }
            _ => None,
        }
    }

    fn grant_lease(&mut self, now: Instant, holder: NodeId) {
        self.lease = Some(Lease { holder: Some(holder), until: now + self.cfg.election_timeout });
    }

    /// Steps down if a leader's lease has run out. Called first on every input so
    /// that a leader resumed after a pause never acts on an expired lease.
    /// True if `deadline` was missed by more than a heartbeat interval: this
    /// node did not run in the meantime.
    fn stalled_past(&self, deadline: Instant, now: Instant) -> bool {
        now.saturating_since(deadline) > self.cfg.heartbeat_interval
    }

    fn check_lease(&mut self, now: Instant) {
        if self.role == Role::Leader && now >= self.leader_lease_until {
            // The lease ran out while this node was stalled (its heartbeat is
            // overdue by more than an interval): its followers were most
            // likely stalled too, or simply did not hear from it. It stops
            // leading (`is_leader` is false without a lease) but keeps trying
            // to renew the lease for a short grace: acknowledgements of fresh
            // heartbeats re-establish it by the usual lease rule, which does
            // not depend on having led without a break. Otherwise it steps down.
            if self.lease_renewal_until.is_none() && self.stalled_past(self.next_heartbeat, now) {
                let grace = self.cfg.heartbeat_interval * STALL_GRACE_HEARTBEATS;
                self.lease_renewal_until = Some(now + grace);
                self.next_heartbeat = now;
                return;
            }
            if self.lease_renewal_until.is_some_and(|until| now < until) {
                return;
            }
            self.lease_renewal_until = None;
            self.counters.quorum_losses += 1;
            self.become_follower(Reason::QuorumLost);
            self.set_leader(None);
            // Poll again soon: followers whose lease on us still runs grant our
            // pre-vote, so if acknowledgements were merely late (a partition that
            // just healed) we are re-elected at once instead of leaving the
            // cluster leaderless until their leases run out. If another leader
            // exists, the poll is refused and changes nothing.
            self.election_deadline = now + self.cfg.candidacy_stagger;
        }
    }

    // ---- Candidacy ----

    fn start_pre_vote(&mut self, now: Instant) {
        if self.storage_failed {
            self.election_deadline = now + self.cfg.election_timeout;
            return;
        }
        // A pre-candidate forgets its old leader and lease, so it can support
        // another pre-candidate (etcd #9586, #10355).
        self.lease = None;
        self.stall_grace_spent = false;
        self.set_leader(None);
        if self.cfg.voters.len() == 1 {
            self.start_vote(now, false);
            return;
        }
        self.counters.pre_votes_started += 1;
        let proposed = self.term.next();
        self.round = Some(self.new_round(RoundKind::PreVote, proposed, now));
        self.set_role(Role::PreCandidate, Reason::ElectionTimeout);
        self.broadcast(Message::PreVote { term: proposed });
    }

    fn new_round(&self, kind: RoundKind, term: Term, now: Instant) -> Round {
        let mut answers = vec![None; self.cfg.voters.len()];
        if let Some(i) = self.index_of(self.cfg.id) {
            answers[i] = Some(true);
        }
        // A vote round must end while the lease it would start is still valid
        // (the lease counts from the round's start).
        // Pre-vote rounds change nothing, so a lost one is retried soon.
        let length = match kind {
            RoundKind::PreVote => self.cfg.election_timeout / 2,
            RoundKind::Vote => self.cfg.leader_lease(),
        };
        let reask_at = vec![None; self.cfg.voters.len()];
        Round {
            kind,
            term,
            started: now,
            deadline: now + length,
            answers,
            lease_waits: vec![None; self.cfg.voters.len()],
            reask_at,
        }
    }

    fn start_vote(&mut self, now: Instant, transfer: bool) {
        if self.storage_failed {
            self.become_follower(Reason::StorageFailed);
            self.election_deadline = now + self.cfg.election_timeout;
            return;
        }
        self.counters.elections_started += 1;
        self.term = self.term.next();
        self.voted_for = Some(self.cfg.id);
        self.last_lsn = None;
        self.lease = None;
        self.persist();
        self.set_leader(None);
        self.round = Some(self.new_round(RoundKind::Vote, self.term, now));
        self.set_role(
            Role::Candidate,
            if transfer { Reason::TransferRequested } else { Reason::PreVoteWon },
        );
        let term = self.term;
        self.broadcast(Message::Vote { term, transfer });
        // Our own vote counts only from the next input on: by then the driver
        // has either persisted it or reported the failure. (With peers, their
        // answers can only come after our request left, i.e. after the write.)
    }

    fn become_leader(&mut self, now: Instant, round: &Round) {
        self.counters.elections_won += 1;
        self.round = None;
        // Voters that granted started their lease on us when they granted, which
        // is no earlier than the round started.
        for (i, a) in round.answers.iter().enumerate() {
            self.acked_sent_at[i] = (*a == Some(true)).then_some(round.started);
        }
        self.lsn_counter = 0;
        self.set_role(Role::Leader, Reason::ElectionWon);
        self.set_leader(Some(self.cfg.id));
        self.recompute_leader_lease();
        self.broadcast_heartbeat(now);
    }

    fn broadcast_heartbeat(&mut self, now: Instant) {
        self.lsn_counter += 1;
        let msg = Message::Heartbeat {
            term: self.term,
            counter: self.lsn_counter,
            sent_at_nanos: now.as_nanos(),
        };
        self.counters.heartbeats_sent += (self.cfg.voters.len() - 1) as u64;
        self.broadcast(msg);
        self.next_heartbeat = now + self.cfg.heartbeat_interval;
    }

    /// The leader's lease ends `leader_lease` after the send time of the newest
    /// heartbeat acknowledged by a majority (counting itself).
    fn recompute_leader_lease(&mut self) {
        let me = self.index_of(self.cfg.id);
        let mut sent: Vec<Instant> = self
            .acked_sent_at
            .iter()
            .enumerate()
            .filter(|&(i, _)| Some(i) != me)
            .filter_map(|(_, s)| *s)
            .collect();
        let needed = self.cfg.quorum() - 1;
        if needed == 0 {
            self.leader_lease_until = Instant::MAX;
            return;
        }
        sent.sort_unstable_by(|a, b| b.cmp(a));
        self.leader_lease_until = match sent.get(needed - 1) {
            Some(&s) => s + self.cfg.leader_lease(),
            None => Instant::ZERO,
        };
    }

    /// Concludes the current round if its outcome is known.
    fn check_round(&mut self, now: Instant) {
        let Some(round) = self.round.as_ref() else { return };
        let granted = round.answers.iter().filter(|a| **a == Some(true)).count();
        let refused = round.answers.iter().filter(|a| **a == Some(false)).count();
        let quorum = self.cfg.quorum();
        let n = self.cfg.voters.len();
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
        let needed = self.cfg.quorum().saturating_sub(granted);
        let lease_wait = waits.get(needed.saturating_sub(1)).copied().unwrap_or(Duration::ZERO);
        let wait =
            lease_wait.min(self.cfg.election_timeout) + self.stagger() + self.cfg.candidacy_stagger;
        self.election_deadline = now + wait;
    }

    // ---- Message handlers ----

    fn on_pre_vote(&mut self, now: Instant, from: NodeId, proposed: Term) {
        let refuse = |me: &mut Self, lease: Option<Duration>| {
            let term = me.term;
            me.send(
                from,
                Message::PreVoteResponse {
                    term,
                    proposed,
                    granted: false,
                    lease_remaining_ms: lease.map(|d| d.as_millis().max(1) as u64),
                },
            );
        };
        if self.storage_failed || proposed <= self.term {
            return refuse(self, None);
        }
        if let Some(left) = self.lease_blocks(now, from) {
            return refuse(self, Some(left));
        }
        if let Some(h) = self.pre_vote_hold.filter(|h| h.holder != Some(from) && now < h.until) {
            // We just backed another pre-candidate: give it time to win before
            // backing a second one (two passing pre-votes cost an extra round).
            return refuse(self, Some(h.until.saturating_since(now)));
        }
        match self.role {
            Role::Candidate => return refuse(self, None),
            Role::PreCandidate => {
                // Seed 001's ranking: yield to a better-ranked pre-candidate, refuse a worse one.
                let (Some(mine), Some(theirs)) = (self.index_of(self.cfg.id), self.index_of(from))
                else {
                    return refuse(self, None);
                };
                if theirs > mine {
                    return refuse(self, None);
                }
                self.become_follower(Reason::RoundFailed);
                self.election_deadline = now + self.cfg.heartbeat_interval + self.stagger();
            }
            Role::Follower => {
                // Give the pre-candidate time to finish before standing ourselves.
                let hold = now + self.cfg.heartbeat_interval + self.stagger();
                self.election_deadline = self.election_deadline.max(hold);
            }
            Role::Leader => return refuse(self, None),
        }
        // Only liveness depends on this hold, never safety: it is not a lease.
        self.pre_vote_hold =
            Some(Lease { holder: Some(from), until: now + self.cfg.heartbeat_interval });

        let term = self.term;
        self.send(
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
        if !granted && term > self.term {
            // The responder is ahead: catch up so that we are never stuck behind
            // (etcd #8243), then poll again from the new term.
            self.adopt_term(term);
            self.election_deadline = now + self.stagger() + self.cfg.candidacy_stagger;
            return;
        }
        let Some(i) = self.index_of(from) else { return };
        let Some(round) = self.round.as_mut() else {
            self.counters.messages_ignored += 1;
            return;
        };
        if round.kind != RoundKind::PreVote || round.term != proposed {
            self.counters.messages_ignored += 1;
            return;
        }
        match lease_ms {
            Some(ms) if !granted => {
                // The voter still holds a lease. If it ends before this round
                // does, ask that voter again right then instead of letting the
                // round wait for its deadline (a dead leader never answers).
                let remaining =
                    stretch_for_drift(Duration::from_millis(ms), self.cfg.clock_drift_ppm);
                let at = now + remaining + Duration::from_millis(1);
                if at < round.deadline {
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
                due.push(self.cfg.voters[i]);
            }
        }
        for to in due {
            self.send(to, Message::PreVote { term });
        }
    }

    fn on_vote(&mut self, now: Instant, from: NodeId, term: Term, transfer: bool) {
        if self.storage_failed {
            let my = self.term;
            return self.send(from, Message::VoteResponse { term: my, granted: false });
        }
        if !transfer && self.lease_blocks(now, from).is_some() {
            // Sticky leader: ignore a disruptive candidate without adopting its term.
            let my = self.term;
            return self.send(from, Message::VoteResponse { term: my, granted: false });
        }
        if term > self.term {
            self.adopt_term(term);
        }
        let grant = term == self.term
            && (self.voted_for.is_none() || self.voted_for == Some(from))
            && matches!(self.role, Role::Follower | Role::PreCandidate);
        if grant {
            if self.role == Role::PreCandidate {
                self.become_follower(Reason::HigherTerm);
            }
            self.voted_for = Some(from);
            self.persist();
            self.grant_lease(now, from);
            self.election_deadline = now + self.cfg.election_timeout + self.stagger();
        }
        let my = self.term;
        self.send(from, Message::VoteResponse { term: my, granted: grant });
    }

    fn on_vote_response(&mut self, now: Instant, from: NodeId, term: Term, granted: bool) {
        if term > self.term {
            self.adopt_term(term);
            self.election_deadline = now + self.cfg.election_timeout + self.stagger();
            return;
        }
        let Some(i) = self.index_of(from) else { return };
        match self.round.as_mut() {
            Some(r) if r.kind == RoundKind::Vote && r.term == term => {
                r.answers[i] = Some(granted);
                self.check_round(now);
            }
            _ => self.counters.messages_ignored += 1,
        }
    }

    fn on_heartbeat(&mut self, now: Instant, from: NodeId, term: Term, counter: u64, sent_at: u64) {
        if term < self.term {
            // "Invalid heartbeat": tell the stale leader about the newer term.
            let my = self.term;
            return self.send(
                from,
                Message::HeartbeatResponse { term: my, ok: false, echo_sent_at_nanos: sent_at },
            );
        }
        if term > self.term {
            self.adopt_term(term);
        }
        if self.role == Role::Leader {
            // Two leaders in one term cannot happen: votes are unique per term.
            debug_assert!(
                false,
                "{:?} got a heartbeat from {from:?} in its own term {term:?}",
                self.cfg.id
            );
            self.counters.messages_ignored += 1;
            return;
        }
        let lsn = Lsn { term, counter };
        if self.leader == Some(from) && self.last_lsn.is_some_and(|last| lsn <= last) {
            // Duplicated or reordered: not newer than what we accepted.
            self.counters.messages_ignored += 1;
            return;
        }
        if self.role != Role::Follower {
            self.become_follower(Reason::LeaderHeartbeat);
        }
        self.counters.heartbeats_received += 1;
        self.last_lsn = Some(lsn);
        self.set_leader(Some(from));
        self.grant_lease(now, from);
        self.election_deadline = now + self.cfg.election_timeout + self.stagger();
        self.stall_grace_spent = false;
        // The acknowledgement doubles as the unsolicited support of seed 000 when
        // this is the first heartbeat from a newly discovered leader.
        self.send(from, Message::HeartbeatResponse { term, ok: true, echo_sent_at_nanos: sent_at });
    }

    fn on_heartbeat_response(
        &mut self,
        now: Instant,
        from: NodeId,
        term: Term,
        ok: bool,
        echo: u64,
    ) {
        if term > self.term {
            let had_quorum = self.role == Role::Leader && now < self.leader_lease_until;
            self.adopt_term(term);
            if had_quorum && !self.storage_failed {
                // A majority still supports us, so nobody else can win this term:
                // re-establish leadership at a higher term at once instead of
                // leaving the cluster leaderless for an election timeout.
                self.start_vote(now, false);
            } else {
                self.election_deadline = now + self.cfg.election_timeout + self.stagger();
            }
            return;
        }
        if !ok || term < self.term || self.role != Role::Leader {
            self.counters.messages_ignored += 1;
            return;
        }
        let Some(i) = self.index_of(from) else { return };
        let sent = Instant::from_nanos(echo);
        if self.acked_sent_at[i].is_none_or(|s| s < sent) {
            self.acked_sent_at[i] = Some(sent);
            self.recompute_leader_lease();
            if now < self.leader_lease_until {
                self.lease_renewal_until = None;
            }
        }
    }

    fn on_resign(&mut self, now: Instant, from: NodeId, term: Term, successor: Option<NodeId>) {
        if term < self.term {
            self.counters.messages_ignored += 1;
            return;
        }
        if term > self.term {
            self.adopt_term(term);
        }
        if self.role == Role::Leader {
            self.counters.messages_ignored += 1;
            return;
        }
        if self.lease.is_some_and(|l| l.holder == Some(from)) {
            self.lease = None;
        }
        if self.leader == Some(from) {
            self.set_leader(None);
        }
        if successor == Some(self.cfg.id) {
            self.start_vote(now, true);
        } else {
            // Fallback if the successor fails: stand soon, in rank order.
            self.election_deadline = now + self.cfg.heartbeat_interval + self.stagger();
        }
    }

    fn resign(&mut self, now: Instant, successor: Option<NodeId>) {
        self.become_follower(Reason::Resigned);
        self.set_leader(None);
        let term = self.term;
        self.broadcast(Message::Resign { term, successor });
        // Support the successor: do not stand ourselves before it could win.
        if let Some(s) = successor {
            self.grant_lease(now, s);
        }
        self.election_deadline = now + self.cfg.election_timeout + self.stagger();
    }

    /// The follower that acknowledged most recently, preferring earlier voters on ties.
    fn best_successor(&self, now: Instant) -> Option<NodeId> {
        handover::best_successor(&self.cfg, &self.acked_sent_at, now)
    }
}

impl<R: RngCore + Send> Protocol for RaftElector<R> {
    fn handle_message(&mut self, now: Instant, from: NodeId, msg: Message) {
        if self.stopped {
            return;
        }
        let Some(i) = self.index_of(from).filter(|_| from != self.cfg.id) else {
            self.counters.messages_ignored += 1;
            return;
        };
        self.check_lease(now);
        self.last_heard[i] = Some(now);
        match msg {
            Message::PreVote { term } => self.on_pre_vote(now, from, term),
            Message::PreVoteResponse { term, proposed, granted, lease_remaining_ms } => {
                self.on_pre_vote_response(now, from, term, proposed, granted, lease_remaining_ms)
            }
            Message::Vote { term, transfer } => self.on_vote(now, from, term, transfer),
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
            // Another protocol's message: a misconfigured peer.
            Message::Ranked(_) | Message::Paxos(_) => self.counters.messages_ignored += 1,
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        if self.stopped {
            return;
        }
        self.check_lease(now);
        match self.role {
            Role::Leader => {
                if now >= self.next_heartbeat {
                    self.broadcast_heartbeat(now);
                }
            }
            Role::Follower => {
                if now >= self.election_deadline {
                    if !self.stall_grace_spent && self.stalled_past(self.election_deadline, now) {
                        // This node was not running: give the leader's next
                        // heartbeat a chance before polling (see STALL_GRACE_HEARTBEATS).
                        self.stall_grace_spent = true;
                        self.election_deadline =
                            now + self.cfg.heartbeat_interval * STALL_GRACE_HEARTBEATS;
                    } else {
                        self.start_pre_vote(now);
                    }
                }
            }
            Role::PreCandidate | Role::Candidate => {
                self.reask_pre_votes(now);
                self.check_round(now);
            }
        }
    }

    fn handle_persist_failed(&mut self, now: Instant) {
        self.storage_failed = true;
        if self.role != Role::Follower {
            if self.role == Role::Leader {
                self.set_leader(None);
            }
            self.become_follower(Reason::StorageFailed);
            self.election_deadline = now + self.cfg.election_timeout + self.stagger();
        }
    }

    fn handle_persist_recovered(&mut self, _now: Instant) {
        self.storage_failed = false;
    }

    fn transfer_leadership(&mut self, now: Instant, to: NodeId) -> Result<(), TransferError> {
        self.check_lease(now);
        let leading = self.role == Role::Leader;
        if handover::check_transfer(&self.cfg, leading, self.leader, &self.acked_sent_at, now, to)?
        {
            self.resign(now, Some(to));
        }
        Ok(())
    }

    fn shutdown(&mut self, now: Instant) {
        if self.stopped {
            return;
        }
        self.check_lease(now);
        if self.role == Role::Leader {
            let successor = self.best_successor(now);
            self.resign(now, successor);
        }
        self.become_follower(Reason::Shutdown);
        self.set_leader(None);
        self.stopped = true;
    }

    fn take_output(&mut self) -> Output {
        std::mem::take(&mut self.out)
    }

    fn poll_timeout(&self) -> Instant {
        if self.stopped {
            return Instant::MAX;
        }
        match self.role {
            Role::Leader => {
                self.next_heartbeat.min(self.lease_renewal_until.unwrap_or(self.leader_lease_until))
            }
            Role::Follower => self.election_deadline,
            Role::PreCandidate | Role::Candidate => {
                self.round.as_ref().map_or(self.election_deadline, |r| {
                    if r.answers.iter().filter(|a| **a == Some(true)).count() >= self.cfg.quorum() {
                        // Already decided (a single-node cluster): conclude at once.
                        return r.started;
                    }
                    r.reask_at.iter().flatten().fold(r.deadline, |a, &b| a.min(b))
                })
            }
        }
    }

    fn hard_state(&self) -> HardState {
        HardState { term: self.term, voted_for: self.voted_for }
    }

    fn status(&self) -> Status {
        let leader = self.leader;
        Status {
            id: self.cfg.id,
            role: self.role,
            term: self.term,
            voted_for: self.voted_for,
            leader,
            fencing_token: leader.map(|_| FencingToken::for_term(self.term)),
            lsn: if self.role == Role::Leader {
                Some(Lsn { term: self.term, counter: self.lsn_counter })
            } else {
                self.last_lsn
            },
            lease_until: (self.role == Role::Leader).then_some(self.leader_lease_until),
            storage_failed: self.storage_failed,
            peers: self
                .cfg
                .voters
                .iter()
                .enumerate()
                .filter(|&(_, &v)| v != self.cfg.id)
                .map(|(i, &v)| PeerStatus { id: v, last_heard: self.last_heard[i] })
                .collect(),
        }
    }

    fn is_leader(&self, now: Instant) -> bool {
        !self.stopped && self.role == Role::Leader && now < self.leader_lease_until
    }

    fn counters(&self) -> &Counters {
        &self.counters
    }

    fn election_timeout(&self) -> Duration {
        self.cfg.election_timeout
    }
}

/// `d` measured on another node's clock, as it may look on ours: at most
/// `(1 + rho) / (1 - rho)` longer.
fn stretch_for_drift(d: Duration, drift_ppm: u32) -> Duration {
    let ppm = u128::from(drift_ppm);
    let nanos = d.as_nanos() * (1_000_000 + ppm) / (1_000_000 - ppm);
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}
