//! The seat: the leadership record every elector keeps the same way, and the
//! code around it.
//!
//! A protocol (raft, ranked, paxos) owns a [`Seat`] and implements [`Rules`]:
//! its own messages, timers and step-down. Everything else of [`Protocol`] —
//! the order of the checks on every input, events, durable state, status,
//! the leader lease, transfer and graceful stop, the stall grace and the
//! invariants — is written once, here.

use crate::config::Config;
use crate::electorate::Electorate;
use crate::handover;
use crate::message::Message;
use crate::protocol::{
    Counters, Event, HardState, Output, PeerStatus, Protocol, Reason, Status, TransferError,
};
use crate::time::Instant;
use crate::types::{FencingToken, Lsn, NodeId, Role, Term};
use std::hash::{Hash, Hasher};
use std::time::Duration;

/// A timer that fires more than one heartbeat interval after its deadline
/// means this node itself did not run (a scheduling stall, a paused VM): the
/// silence it measured tells nothing about its peers. A follower then listens
/// for this many more heartbeat intervals before polling, and a leader whose
/// lease ran out meanwhile tries for as long to renew it with fresh
/// heartbeats before it steps down. Once per stall, so a dead leader costs at
/// most this much more.
pub const STALL_GRACE_HEARTBEATS: u32 = 2;

/// How far above its own term a message's term may be. No correct peer is
/// this far ahead (four billion elections); the bound makes exhausting the
/// term space with forged frames (when peers are not authenticated) take
/// billions of them instead of one.
pub const MAX_TERM_STEP: u64 = 1 << 32;

/// A candidate that stands on a death notice asks a voter that refused it
/// for the dead leader's sake (a lease) again after this fraction of a
/// heartbeat interval, and then after as long again as its round has run:
/// that voter has most likely not had its own notice yet. A few re-asks per
/// round at most (the waits double), and none once every voter answered.
pub const NOTICE_REASK_DIVISOR: u32 = 10;

/// A follower's lease as a protocol keeps it: a promise to help elect no
/// one but its holder until it runs out.
pub(crate) trait FollowerLease: Copy {
    /// Whom it backs; None for the anonymous lease of a restart (a promise
    /// made before a crash, kept without knowing to whom).
    fn holder(&self) -> Option<NodeId>;

    /// When it ends, on this node's clock.
    fn until(&self) -> Instant;
}

/// How long `hold` (a support this node just gave a poll or pre-vote) still
/// binds it at `now`: zero if it is none, this node's own, or over.
pub(crate) fn hold_left<L: FollowerLease>(hold: Option<L>, me: NodeId, now: Instant) -> Duration {
    hold.filter(|h| h.holder() != Some(me) && now < h.until())
        .map_or(Duration::ZERO, |h| h.until().saturating_since(now))
}

/// Drops `lease` if `dead` holds it, and says whether it did: a death
/// notice about a node frees the promises made to it (a dead node cannot
/// take office, so waiting out its lease protects no one).
pub(crate) fn release_lease<L: FollowerLease>(lease: &mut Option<L>, dead: NodeId) -> bool {
    let held = lease.is_some_and(|l| l.holder() == Some(dead));
    if held {
        *lease = None;
    }
    held
}

/// Empties `kept` (one slot per voter index: a request that overtook the
/// resignation naming its sender) and returns the slot of `successor`, the
/// node a resignation just named, with its id: the others can no longer
/// be answered.
pub(crate) fn take_named<T: Copy>(
    kept: &mut [Option<T>],
    seat: &Seat,
    successor: Option<NodeId>,
) -> Option<(NodeId, T)> {
    let named = successor.and_then(|s| Some((s, kept.get(seat.index_of(s)?).copied().flatten()?)));
    kept.fill(None);
    named
}

/// The newest value that a majority of the voters has reached, this node
/// counting as having reached `own`: the `quorum`-th largest of `own` and
/// `others`. `None` while fewer than `quorum` values are known.
///
/// With the send times of the heartbeats each peer acknowledged, this is the
/// send time from which the leader's lease counts (`own` is then
/// [`Instant::MAX`]: a leader always backs itself); with acknowledged
/// heartbeat counters, the newest heartbeat a majority received.
pub fn majority_value<T: Ord + Copy>(
    own: T,
    others: impl IntoIterator<Item = Option<T>>,
    quorum: usize,
) -> Option<T> {
    let mut values: Vec<T> = others.into_iter().flatten().collect();
    values.push(own);
    values.sort_unstable_by(|a, b| b.cmp(a));
    values.get(quorum.checked_sub(1)?).copied()
}

/// The index space of an electorate as seen by `me`: the voters in order,
/// then the learners, the departing members, and `me` if it is none of them
/// (guests come after, [`Seat::admit_guest`]).
fn index_space(me: NodeId, electorate: &Electorate) -> Vec<NodeId> {
    let mut members: Vec<NodeId> = electorate
        .voters
        .iter()
        .chain(&electorate.learners)
        .chain(&electorate.departing)
        .copied()
        .collect();
    if !members.contains(&me) {
        members.push(me);
    }
    members
}

/// The per-node records `values`, indexed by `old`, moved to the indexes of
/// `new`: a node in both keeps its value, a new one gets `fill`.
pub(crate) fn remap<T: Clone>(old: &[NodeId], new: &[NodeId], values: &[T], fill: T) -> Vec<T> {
    new.iter()
        .map(|id| {
            old.iter()
                .position(|o| o == id)
                .and_then(|i| values.get(i).cloned())
                .unwrap_or_else(|| fill.clone())
        })
        .collect()
}

/// Most per-node records an elector keeps: every member of the largest
/// configuration, this node, and as many guests (nodes outside the
/// configuration that it hears from) again.
pub const MAX_SLOTS: usize = 2 * crate::electorate::MAX_MEMBERS + 2;

/// What a node records only to report it: per-peer contact times, event
/// counters and the time of its last input. No decision reads these, so
/// they are left out of an elector's equality and hash: two electors that
/// differ only here behave identically (the model checker relies on it).
#[derive(Clone, Debug, Default)]
pub(crate) struct Observed {
    /// Per member index: when a message from it last arrived.
    pub(crate) last_heard: Vec<Option<Instant>>,
    /// Event counters for metrics.
    pub(crate) counters: Counters,
    /// The `now` of the latest input (time must not go backwards).
    pub(crate) last_input: Instant,
}

impl PartialEq for Observed {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for Observed {}

impl Hash for Observed {
    fn hash<H: Hasher>(&self, _: &mut H) {}
}

/// The state every elector keeps: who it is, its durable term and vote, its
/// role and known leader, its heartbeats and their acknowledgements, the
/// leader lease, and the output of the current input.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Seat {
    /// The settings; `cfg.voters` is kept equal to the electorate's voters.
    pub(crate) cfg: Config,
    /// The configuration this node counts over (see [`Electorate`]).
    pub(crate) electorate: Electorate,
    /// The index space of every per-node record: the voters in preference
    /// order, then the learners, the departing members, and this node if it
    /// is none of them. An index below `cfg.voters.len()` is a voter's.
    pub(crate) members: Vec<NodeId>,
    /// This node's index in `members`.
    pub(crate) me: usize,
    // Durable.
    /// The term (for Paxos: the highest ballot promised).
    pub(crate) term: Term,
    /// The node voted for (promised to) in `term`.
    pub(crate) voted_for: Option<NodeId>,
    /// The durable state last handed out to be persisted.
    durable: HardState,
    // Volatile.
    pub(crate) role: Role,
    pub(crate) leader: Option<NodeId>,
    /// The term this node won an election in, while it is leader.
    won: Option<Term>,
    /// Leader: the counter of the last heartbeat.
    pub(crate) lsn_counter: u64,
    /// Follower: the last heartbeat accepted from a leader.
    pub(crate) last_lsn: Option<Lsn>,
    /// Leader: when the next heartbeat is due.
    pub(crate) next_heartbeat: Instant,
    /// Leader: the send time of its newest heartbeat; acknowledgements echo
    /// no later one.
    last_heartbeat_sent: Instant,
    /// Leader: per member index, the send time (own clock) of the newest
    /// heartbeat (or election message) that member acknowledged.
    pub(crate) acked_sent_at: Vec<Option<Instant>>,
    /// How long a leader may lead after the send time of the heartbeats a
    /// majority acknowledged.
    lease_length: Duration,
    /// Leader: until when it leads without fresh acknowledgements.
    pub(crate) leader_lease_until: Instant,
    /// Leader, after a stall outlived its lease: until when it tries to renew
    /// the lease with fresh heartbeats (it does not lead meanwhile).
    lease_renewal_until: Option<Instant>,
    /// Follower: the stall grace was used since it last heard its leader or polled.
    stall_grace_spent: bool,
    /// The last resignation this node honoured that named a successor: the
    /// term the leader resigned, and the successor. Only that successor's
    /// transfer request, for the next term, bypasses a lease.
    handover: Option<(Term, NodeId)>,
    /// The leader a death notice reported dead, and the term it led: its
    /// heartbeats of that term still in flight are ignored (a later
    /// incarnation of it leads only a higher term).
    dead_leader: Option<(NodeId, Term)>,
    /// True while durable state cannot be written.
    pub(crate) storage_failed: bool,
    /// Set by a graceful stop or a violated invariant: every input is ignored.
    pub(crate) stopped: bool,
    pub(crate) out: Output,
    pub(crate) observed: Observed,
}

impl Seat {
    /// A follower seat from the durable `state`, announcing its start. A
    /// leader's lease lasts `lease_length` after the acknowledged send times.
    pub(crate) fn new(cfg: Config, state: HardState, lease_length: Duration, now: Instant) -> Self {
        let electorate = Electorate::bootstrap(cfg.id, &cfg.voters);
        let members = index_space(cfg.id, &electorate);
        let n = members.len();
        let me =
            members.iter().position(|&v| v == cfg.id).expect("the index space holds this node");
        let mut seat = Seat {
            cfg,
            electorate,
            members,
            me,
            term: state.term,
            voted_for: state.voted_for,
            durable: state,
            role: Role::Follower,
            leader: None,
            won: None,
            lsn_counter: 0,
            last_lsn: None,
            next_heartbeat: Instant::MAX,
            last_heartbeat_sent: Instant::ZERO,
            acked_sent_at: vec![None; n],
            lease_length,
            leader_lease_until: Instant::ZERO,
            lease_renewal_until: None,
            stall_grace_spent: false,
            handover: None,
            dead_leader: None,
            storage_failed: false,
            stopped: false,
            out: Output::default(),
            observed: Observed {
                last_heard: vec![None; n],
                counters: Counters::default(),
                last_input: now,
            },
        };
        seat.out.events.push(Event::RoleChanged {
            role: Role::Follower,
            term: seat.term,
            reason: Reason::Startup,
        });
        seat
    }

    // ---- Who is who ----

    /// The index of member `id` (or of this node).
    pub(crate) fn index_of(&self, id: NodeId) -> Option<usize> {
        self.members.iter().position(|&v| v == id)
    }

    /// How many per-node records there are: the members, this node, and
    /// the guests.
    pub(crate) fn slots(&self) -> usize {
        self.members.len()
    }

    /// Gives node `id`, outside the configuration, a slot at the end of the
    /// index space (a guest: heard, counted for nothing) until the next
    /// electorate; `None` when the index space is full
    /// ([`MAX_SLOTS`]).
    pub(crate) fn admit_guest(&mut self, id: NodeId) -> Option<usize> {
        if self.members.len() >= MAX_SLOTS || id.0 == 0 {
            return None;
        }
        self.members.push(id);
        self.acked_sent_at.push(None);
        self.observed.last_heard.push(None);
        Some(self.members.len() - 1)
    }

    /// Whether index `i` is a voter's.
    pub(crate) fn is_voter_index(&self, i: usize) -> bool {
        i < self.cfg.voters.len()
    }

    /// Whether this node votes in its configuration.
    pub(crate) fn votes(&self) -> bool {
        self.is_voter_index(self.me)
    }

    /// Whether this node may stand for election (see [`Electorate::stands`]).
    pub(crate) fn stands(&self) -> bool {
        self.electorate.stands
    }

    /// Whether this node grants support (see [`Electorate::member`]).
    pub(crate) fn grants(&self) -> bool {
        self.electorate.member
    }

    /// The other voters, in configuration order: those an election message
    /// asks.
    pub(crate) fn others(&self) -> impl Iterator<Item = NodeId> + '_ {
        let me = self.cfg.id;
        self.cfg.voters.iter().copied().filter(move |&v| v != me)
    }

    /// Every other member, learners included: those a leader's messages
    /// reach.
    pub(crate) fn followers(&self) -> impl Iterator<Item = NodeId> + '_ {
        let me = self.cfg.id;
        self.members.iter().copied().filter(move |&v| v != me)
    }

    /// Votes needed to win.
    pub(crate) fn quorum(&self) -> usize {
        self.cfg.quorum()
    }

    /// How many voters' entries of `answers` (per member index) are
    /// `Some(yes)`: only voters count, whatever else answered.
    pub(crate) fn count(&self, answers: &[Option<bool>], yes: bool) -> usize {
        answers
            .iter()
            .enumerate()
            .filter(|&(i, a)| self.is_voter_index(i) && *a == Some(yes))
            .count()
    }

    /// How many voters there are.
    pub(crate) fn voter_count(&self) -> usize {
        self.cfg.voters.len()
    }

    /// Takes `electorate` as the configuration to count over, and returns
    /// the index space it replaces: records of members that stay keep their
    /// values under their new index, new ones start empty, and the protocol
    /// moves its own per-node records with [`remap`].
    pub(crate) fn set_electorate(&mut self, electorate: Electorate) -> Vec<NodeId> {
        let members = index_space(self.cfg.id, &electorate);
        let old = std::mem::replace(&mut self.members, members);
        self.acked_sent_at = remap(&old, &self.members, &self.acked_sent_at, None);
        self.observed.last_heard = remap(&old, &self.members, &self.observed.last_heard, None);
        self.cfg.voters = electorate.voters.clone();
        self.me = self.index_of(self.cfg.id).expect("the index space holds this node");
        self.electorate = electorate;
        if self.handover.is_some_and(|(_, s)| !self.cfg.voters.contains(&s)) {
            self.handover = None;
        }
        if self.role == Role::Leader {
            self.recompute_leader_lease();
        }
        old
    }

    pub(crate) fn counters(&mut self) -> &mut Counters {
        &mut self.observed.counters
    }

    /// Counts a message refused as impossible from a correct peer.
    pub(crate) fn refused(&mut self) {
        self.observed.counters.messages_refused += 1;
    }

    /// The next term for a candidacy, unless it would pass [`Term::MAX_VALID`].
    pub(crate) fn next_term(&self) -> Option<Term> {
        self.term.checked_next()
    }

    // ---- Handover ----

    /// Takes a resignation of the leader of `term` from `from`, if it is to
    /// be honoured ([`Seat::accept_resignation`]): records the successor it
    /// names, reports it, and follows no leader. Says whether it was taken;
    /// the elector then releases what it promised `from` and stands or waits.
    pub(crate) fn take_resignation(
        &mut self,
        from: NodeId,
        term: Term,
        successor: Option<NodeId>,
    ) -> bool {
        if !self.accept_resignation(from, term) {
            return false;
        }
        self.note_handover(term, successor);
        self.note_resignation(from, term, successor);
        if self.leader == Some(from) {
            self.set_leader(None);
        }
        true
    }

    /// Whether a resignation of the leader of `term` from `from` is to be
    /// honoured: only from the leader this node follows in its current term.
    /// A refused one is counted.
    fn accept_resignation(&mut self, from: NodeId, term: Term) -> bool {
        let from_leader = term == self.term
            && self.leader == Some(from)
            && self.role != Role::Leader
            && from != self.cfg.id;
        if !from_leader {
            self.refused();
        }
        from_leader
    }

    /// Reports an honoured resignation of `term` by `leader` (see
    /// [`Event::LeaderResigned`]).
    fn note_resignation(&mut self, leader: NodeId, term: Term, successor: Option<NodeId>) {
        self.out.events.push(Event::LeaderResigned { leader, term, successor });
    }

    /// Records the successor an honoured resignation of `term` named (or,
    /// on the leader that resigns, the one it names).
    pub(crate) fn note_handover(&mut self, term: Term, successor: Option<NodeId>) {
        self.handover = successor.filter(|s| self.cfg.voters.contains(s)).map(|s| (term, s));
    }

    /// Whether `candidate` is the successor named by the resignation of the
    /// leader of `term` that this node honoured.
    pub(crate) fn named_successor(&self, term: Term, candidate: NodeId) -> bool {
        self.handover == Some((term, candidate))
    }

    // ---- Death notices ----

    /// Whether a death notice about `peer` can be taken: `peer` is a member
    /// other than this node. A refused one is counted.
    fn accept_notice(&mut self, peer: NodeId) -> bool {
        let ok = peer != self.cfg.id && self.index_of(peer).is_some();
        if ok {
            self.observed.counters.death_notices += 1;
        } else {
            self.refused();
        }
        ok
    }

    /// `peer`, reported dead by a death notice, is forgotten as this node's
    /// leader, and [`Event::LeaderDied`] reports it; its heartbeats of the
    /// term it led that are still in flight are ignored from now on (see
    /// [`Seat::sent_by_dead_leader`]). False, and nothing changes, if `peer` is
    /// not the leader this node follows.
    pub(crate) fn bury_leader(&mut self, peer: NodeId) -> bool {
        if self.leader != Some(peer) || self.role == Role::Leader {
            return false;
        }
        // Following `peer` means it leads this node's term: a later
        // incarnation of it, whose term was persisted at least this high
        // before it led, can lead only a higher one.
        self.dead_leader = Some((peer, self.term));
        self.out.events.push(Event::LeaderDied { leader: peer, term: self.term });
        self.set_leader(None);
        true
    }

    /// The leader of this node's current term that a death notice reported
    /// dead, if any.
    pub(crate) fn dead_leader_of_this_term(&self) -> Option<NodeId> {
        self.dead_leader.filter(|&(_, t)| t == self.term).map(|(id, _)| id)
    }

    /// True if a heartbeat of `term` from `from` was sent by a leader a
    /// death notice reported dead, before it died: it is ignored (counted).
    pub(crate) fn sent_by_dead_leader(&mut self, from: NodeId, term: Term) -> bool {
        let dead = self.dead_leader == Some((from, term));
        if dead {
            self.observed.counters.messages_ignored += 1;
        }
        dead
    }

    /// This node's rank among the voters in preference order with `dead`
    /// left out: 0 for the first.
    pub(crate) fn rank_without(&self, dead: NodeId) -> u32 {
        let rank = self
            .cfg
            .voters
            .iter()
            .filter(|&&v| v != dead)
            .position(|&v| v == self.cfg.id)
            .unwrap_or(0);
        u32::try_from(rank).unwrap_or(u32::MAX)
    }

    /// How long after a death notice about its leader `dead` this node
    /// stands: at once as the best-ranked survivor, else one candidacy
    /// stagger per rank plus `jitter_nanos` modulo a quarter of a stagger
    /// (so that the others stand only if it fails, one after the other).
    fn notice_delay(&self, dead: NodeId, jitter_nanos: u64) -> Duration {
        let rank = self.rank_without(dead);
        if rank == 0 {
            return Duration::ZERO;
        }
        let step = self.cfg.candidacy_stagger;
        let jitter_max = u64::try_from((step / 4).as_nanos()).unwrap_or(u64::MAX).max(1);
        step * rank + Duration::from_nanos(jitter_nanos % jitter_max)
    }

    /// When this node stands after a death notice about its leader `dead`:
    /// once `bound` (what its own promises still hold it to) has passed and
    /// then [`Seat::notice_delay`] (its rank among the survivors, with
    /// `jitter_nanos`). `None`: at once.
    pub(crate) fn stand_after_notice(
        &self,
        now: Instant,
        dead: NodeId,
        bound: Duration,
        jitter_nanos: u64,
    ) -> Option<Instant> {
        let at = now + bound + self.notice_delay(dead, jitter_nanos);
        (at > now).then_some(at)
    }

    /// When a candidate that stands on a death notice, in a round started at
    /// `started`, asks again a voter that refused it at `now` for a lease
    /// (see [`NOTICE_REASK_DIVISOR`]).
    pub(crate) fn notice_reask_at(&self, started: Instant, now: Instant) -> Instant {
        let first = self.cfg.heartbeat_interval / NOTICE_REASK_DIVISOR;
        now + first.max(now.saturating_since(started))
    }

    // ---- Output ----

    /// Queues `msg` for `to`.
    pub(crate) fn send(&mut self, to: NodeId, msg: impl Into<Message>) {
        self.out.messages.push((to, msg.into()));
    }

    /// Queues `msg` for every other voter (a request for support).
    pub(crate) fn broadcast(&mut self, msg: impl Into<Message>) {
        let msg = msg.into();
        let others: Vec<NodeId> = self.others().collect();
        for to in others {
            self.send(to, msg.clone());
        }
    }

    /// Queues `msg` for every other member, learners included (a leader's
    /// heartbeat or resignation).
    pub(crate) fn broadcast_members(&mut self, msg: impl Into<Message>) {
        let msg = msg.into();
        let followers: Vec<NodeId> = self.followers().collect();
        for to in followers {
            self.send(to, msg.clone());
        }
    }

    /// Asks the driver to persist the term and vote before this output's
    /// messages leave. Halts the node if the new state would take back a
    /// vote or a term (see [`Seat::finish_input`]).
    pub(crate) fn persist(&mut self) {
        let next = self.hard_state();
        let prev = self.durable;
        if next.term < prev.term {
            return self.halt(format!("the term went back from {} to {}", prev.term, next.term));
        }
        if next.term == prev.term && prev.voted_for.is_some() && next.voted_for != prev.voted_for {
            return self.halt(format!(
                "a second vote in term {}: {:?} after {:?}",
                next.term, next.voted_for, prev.voted_for
            ));
        }
        self.durable = next;
        self.out.persist = Some(next);
    }

    /// The term and vote as they must be on disk.
    pub(crate) fn hard_state(&self) -> HardState {
        HardState { term: self.term, voted_for: self.voted_for }
    }

    /// Sets the role, announcing a change.
    pub(crate) fn set_role(&mut self, role: Role, reason: Reason) {
        if self.role != role {
            self.role = role;
            self.lease_renewal_until = None;
            if role != Role::Leader {
                self.won = None;
            }
            self.out.events.push(Event::RoleChanged { role, term: self.term, reason });
        }
    }

    /// Announces the role `role` in `term` without changing `self.term` (a
    /// ranked candidate stands in a term above its own until it votes).
    pub(crate) fn set_role_in(&mut self, role: Role, term: Term, reason: Reason) {
        self.role = role;
        self.lease_renewal_until = None;
        self.won = None;
        self.out.events.push(Event::RoleChanged { role, term, reason });
    }

    /// Sets the known leader, announcing a change with its fencing token.
    pub(crate) fn set_leader(&mut self, leader: Option<NodeId>) {
        if self.leader != leader {
            self.leader = leader;
            self.out.events.push(Event::LeaderChanged {
                leader,
                term: self.term,
                fencing_token: leader.map(|_| FencingToken::for_term(self.term)),
            });
        }
    }

    // ---- Leading ----

    /// Takes office in the current term, backed by `backers` voters (this
    /// node included): the role, the leader and the heartbeat counter. The
    /// protocol then computes the lease and sends the first heartbeat.
    pub(crate) fn take_office(&mut self, backers: usize) {
        if backers < self.quorum() {
            return self.halt(format!(
                "leading term {} with {backers} of the {} votes needed",
                self.term,
                self.quorum()
            ));
        }
        self.observed.counters.elections_won += 1;
        self.lsn_counter = 0;
        self.set_role(Role::Leader, Reason::ElectionWon);
        self.won = Some(self.term);
        self.set_leader(Some(self.cfg.id));
    }

    /// Starts the next heartbeat: counts it, schedules the one after, and
    /// returns its counter and send time for the protocol's message.
    pub(crate) fn next_heartbeat_at(&mut self, now: Instant) -> (u64, u64) {
        self.lsn_counter = self.lsn_counter.saturating_add(1);
        self.observed.counters.heartbeats_sent += (self.members.len() - 1) as u64;
        self.next_heartbeat = now + self.cfg.heartbeat_interval;
        self.last_heartbeat_sent = now;
        (self.lsn_counter, now.as_nanos())
    }

    /// The leader's lease ends `lease_length` after the send time of the
    /// newest heartbeat acknowledged by a majority of the voters (counting
    /// itself if it votes: a leader that is committing its own removal
    /// counts only the others).
    pub(crate) fn recompute_leader_lease(&mut self) {
        let voters = self.voter_count();
        let values = self.acked_sent_at[..voters].iter().enumerate().map(|(i, s)| {
            if i == self.me {
                Some(Instant::MAX)
            } else {
                *s
            }
        });
        let mut values: Vec<Instant> = values.flatten().collect();
        values.sort_unstable_by(|a, b| b.cmp(a));
        let from = values.get(self.quorum() - 1).copied();
        self.leader_lease_until = match from {
            Some(Instant::MAX) => Instant::MAX,
            Some(sent) => sent + self.lease_length,
            None => Instant::ZERO,
        };
    }

    /// Records that member `i` acknowledged the heartbeat this leader sent at
    /// `sent`. An echo later than the newest heartbeat sent acknowledges
    /// nothing this node sent: it is refused (it would stretch the lease), and
    /// the answer is false.
    pub(crate) fn record_ack(&mut self, now: Instant, i: usize, sent: Instant) -> bool {
        if sent > self.last_heartbeat_sent {
            self.refused();
            return false;
        }
        if self.acked_sent_at[i].is_none_or(|s| s < sent) {
            self.acked_sent_at[i] = Some(sent);
            self.recompute_leader_lease();
            if now < self.leader_lease_until {
                self.lease_renewal_until = None;
            }
        }
        true
    }

    /// True if this node leads at `now`.
    pub(crate) fn is_leader(&self, now: Instant) -> bool {
        !self.stopped && self.role == Role::Leader && now < self.leader_lease_until
    }

    /// Whether a leader whose lease ran out at `now` must step down. A leader
    /// that was itself stalled (its heartbeat overdue by more than an
    /// interval) first gets [`STALL_GRACE_HEARTBEATS`] to renew the lease with
    /// fresh heartbeats: its followers were most likely stalled too, or simply
    /// did not hear from it. It does not lead meanwhile (`is_leader` needs a
    /// lease), and acknowledgements of fresh heartbeats re-establish the lease
    /// by the usual rule, which does not depend on having led without a break.
    pub(crate) fn lease_lost(&mut self, now: Instant) -> bool {
        if self.role != Role::Leader || now < self.leader_lease_until {
            if now < self.leader_lease_until {
                // Renewed, by acknowledgements or by a new electorate whose
                // voters acknowledged lately: no renewal is pending (its
                // deadline would otherwise stay the timer's, in the past).
                self.lease_renewal_until = None;
            }
            return false;
        }
        if self.lease_renewal_until.is_none() && self.stalled_past(self.next_heartbeat, now) {
            let grace = self.cfg.heartbeat_interval * STALL_GRACE_HEARTBEATS;
            self.lease_renewal_until = Some(now + grace);
            self.next_heartbeat = now;
            return false;
        }
        if self.lease_renewal_until.is_some_and(|until| now < until) {
            return false;
        }
        self.lease_renewal_until = None;
        self.observed.counters.quorum_losses += 1;
        true
    }

    /// When a leader's timer must next fire: its heartbeat or the end of its
    /// lease (or of the grace to renew it).
    pub(crate) fn leader_deadline(&self) -> Instant {
        self.next_heartbeat.min(self.lease_renewal_until.unwrap_or(self.leader_lease_until))
    }

    // ---- Following ----

    /// True if `deadline` was missed by more than a heartbeat interval: this
    /// node did not run in the meantime.
    fn stalled_past(&self, deadline: Instant, now: Instant) -> bool {
        now.saturating_since(deadline) > self.cfg.heartbeat_interval
    }

    /// Whether a follower whose election timer is `deadline` stands (polls,
    /// pre-votes) at `now`: once the deadline has passed, unless the node
    /// itself was stalled, whose measured silence says nothing about its
    /// leader: then `deadline` moves later instead, to give the leader's
    /// next heartbeat a chance (once per stall, see [`Seat::stall_grace`]).
    pub(crate) fn election_due(&mut self, deadline: &mut Instant, now: Instant) -> bool {
        if now < *deadline {
            return false;
        }
        match self.stall_grace(*deadline, now) {
            Some(later) => {
                *deadline = later;
                false
            }
            None => true,
        }
    }

    /// A follower's election timer fired at `now` for `deadline`. If the node
    /// itself was stalled, the silence it measured says nothing about its
    /// leader: returns the later deadline at which to poll instead (once per
    /// stall, see [`STALL_GRACE_HEARTBEATS`]).
    fn stall_grace(&mut self, deadline: Instant, now: Instant) -> Option<Instant> {
        if self.stall_grace_spent || !self.stalled_past(deadline, now) {
            return None;
        }
        self.stall_grace_spent = true;
        Some(now + self.cfg.heartbeat_interval * STALL_GRACE_HEARTBEATS)
    }

    /// True if a heartbeat `lsn` from `from` is not newer than the last one
    /// accepted from that leader (duplicated or reordered): it is ignored.
    pub(crate) fn stale_heartbeat(&mut self, from: NodeId, lsn: Lsn) -> bool {
        let stale = self.leader == Some(from) && self.last_lsn.is_some_and(|last| lsn <= last);
        if stale {
            self.observed.counters.messages_ignored += 1;
        }
        stale
    }

    /// Follows `from`, whose heartbeat `lsn` this node accepted (as a follower).
    pub(crate) fn follow(&mut self, from: NodeId, lsn: Lsn) {
        self.observed.counters.heartbeats_received += 1;
        self.last_lsn = Some(lsn);
        self.set_leader(Some(from));
        self.renew_stall_grace();
    }

    /// The node heard its leader or started polling: a later stall gets a grace again.
    pub(crate) fn renew_stall_grace(&mut self) {
        self.stall_grace_spent = false;
    }

    // ---- Reporting ----

    /// A snapshot of the election state.
    pub(crate) fn status(&self) -> Status {
        let leader = self.leader;
        let leading = self.role == Role::Leader;
        Status {
            id: self.cfg.id,
            role: self.role,
            term: self.term,
            voted_for: self.voted_for,
            leader,
            fencing_token: leader.map(|_| FencingToken::for_term(self.term)),
            lsn: if leading {
                Some(Lsn { term: self.term, counter: self.lsn_counter })
            } else {
                self.last_lsn
            },
            lease_until: leading.then_some(self.leader_lease_until),
            storage_failed: self.storage_failed,
            peers: self
                .members
                .iter()
                .enumerate()
                .filter(|&(i, _)| i != self.me)
                .map(|(i, &v)| PeerStatus { id: v, last_heard: self.observed.last_heard[i] })
                .collect(),
        }
    }

    // ---- Invariants ----

    /// Starts an input at `now`: false (and the node halts) if time went backwards.
    fn start_input(&mut self, now: Instant) -> bool {
        if now < self.observed.last_input {
            let last = self.observed.last_input;
            self.halt(format!("time went backwards, from {last:?} to {now:?}"));
            return false;
        }
        self.observed.last_input = now;
        true
    }

    /// Checks, after every input, what must hold whatever the protocol: the
    /// term and vote were handed out for persisting (so none is sent before
    /// it is durable, see [`Seat::persist`] for terms and votes never going
    /// back), and a leader leads only the term it won.
    fn finish_input(&mut self) {
        if self.stopped {
            return;
        }
        if self.hard_state() != self.durable {
            return self.halt(format!(
                "the durable state changed to {:?} without being persisted (last persisted {:?})",
                self.hard_state(),
                self.durable
            ));
        }
        if self.role == Role::Leader && self.won != Some(self.term) {
            self.halt(format!(
                "leading term {} after winning {:?}",
                self.term,
                self.won.map(|t| t.0)
            ));
        }
    }

    /// Stops the node for good because an invariant broke: nothing of the
    /// current output is persisted or sent, the node leads and votes no
    /// more, and [`Event::Halted`] says why. A halted node is a crashed node
    /// to its peers, which the protocols tolerate; a second leader or a
    /// second vote would not be.
    pub(crate) fn halt(&mut self, reason: String) {
        self.out.persist = None;
        self.out.messages.clear();
        self.stopped = true;
        self.set_role(Role::Follower, Reason::InvariantViolated);
        self.set_leader(None);
        self.out.events.push(Event::Halted { reason });
    }
}

/// A protocol's own rules, over the [`Seat`] it owns. Implementing this is
/// all a protocol does: the [`Protocol`] implementation for every `Rules` is
/// written once, below.
pub(crate) trait Rules {
    /// The protocol's peer message.
    type Msg;

    /// The seat.
    fn seat(&self) -> &Seat;
    /// The seat, mutably.
    fn seat_mut(&mut self) -> &mut Seat;

    /// This protocol's message inside `msg`, or `None` for another protocol's
    /// (a misconfigured peer: the message is ignored).
    fn own_message(msg: Message) -> Option<Self::Msg>;

    /// Whether `msg` could come from a correct peer, beyond its term (which
    /// the caller checked against [`Term::MAX_VALID`]); a message that could
    /// not is refused unread. By default every message could.
    fn well_formed(&self, _msg: &Self::Msg) -> bool {
        true
    }

    /// Called first on every input (messages and timers), before the handler:
    /// steps down a leader whose lease ran out (see [`Seat::lease_lost`]), so
    /// that a leader resumed after a pause never acts on an expired lease.
    fn check_lease(&mut self, now: Instant);

    /// Called first on every input; by default [`Rules::check_lease`].
    fn prepare_input(&mut self, now: Instant) {
        self.check_lease(now);
    }

    /// A message `msg` from member `from` (index `i`, not this node).
    fn on_message(&mut self, now: Instant, i: usize, from: NodeId, msg: Self::Msg);

    /// The seat admitted a guest ([`Seat::admit_guest`]): one more node at
    /// the end of the index space; every per-node record of the protocol
    /// (rounds in progress included) takes one more empty slot.
    fn grow(&mut self);

    /// The seat took a new electorate ([`Seat::set_electorate`]) in place of
    /// the index space `old`: move the protocol's own per-node records
    /// ([`remap`]) and end a round whose majority was counted over the old
    /// voters (a candidacy is asked again under the new ones) if `recount`:
    /// false when only the log grew ([`Electorate::only_grew`]), whose
    /// counts stand (the index space may still have lost a guest).
    fn on_electorate(&mut self, now: Instant, old: &[NodeId], recount: bool);

    /// The timer fired.
    fn on_timeout(&mut self, now: Instant);

    /// Durable state could not be written (`storage_failed` is already set):
    /// leave leadership and candidacy.
    fn on_persist_failed(&mut self, now: Instant);

    /// A death notice about voter `peer` (not this node), see
    /// [`Protocol::handle_peer_dead`]: end every support this node gives
    /// `peer`, and if it was the leader ([`Seat::bury_leader`]) stand soon in
    /// rank order ([`Seat::notice_delay`]).
    fn on_peer_dead(&mut self, now: Instant, peer: NodeId);

    /// Steps down from leadership and tells everyone, naming `successor`.
    fn resign(&mut self, now: Instant, successor: Option<NodeId>);

    /// Becomes a follower (ends any round), announcing why.
    fn become_follower(&mut self, reason: Reason);

    /// When the timer must next fire (the node is not stopped).
    fn deadline(&self) -> Instant;
}

/// A leader resigns, naming the most responsive follower as its successor
/// (a shutdown, a leadership the log gave up); anyone else: nothing.
fn cede<P: Rules>(p: &mut P, now: Instant) {
    let seat = p.seat();
    if seat.role != Role::Leader {
        return;
    }
    let successor = handover::best_successor(&seat.cfg, &seat.acked_sent_at, now);
    let seat = p.seat_mut();
    seat.note_handover(seat.term, successor);
    p.resign(now, successor);
}

impl<P: Rules + Send> Protocol for P {
    fn handle_message(&mut self, now: Instant, from: NodeId, msg: Message) {
        if self.seat().stopped || !self.seat_mut().start_input(now) {
            return;
        }
        let seat = self.seat();
        let i = match seat.index_of(from) {
            Some(i) if i == seat.me => {
                self.seat_mut().counters().messages_ignored += 1;
                return;
            }
            Some(i) => i,
            // A node outside this node's configuration: one added by a
            // change this node's log does not hold yet (it lags behind, or
            // it just joined), perhaps the leader. It is heard as a guest:
            // it counts for nothing, but a leader among them is followed,
            // so that this node receives the log that names it.
            None => match self.seat_mut().admit_guest(from) {
                Some(i) => {
                    self.grow();
                    i
                }
                None => {
                    self.seat_mut().counters().messages_ignored += 1;
                    return;
                }
            },
        };
        let term = msg.term();
        if !term.is_valid() || term.0 > self.seat().term.0.saturating_add(MAX_TERM_STEP) {
            // Nothing a correct peer sends: refused before anything reads it.
            self.seat_mut().refused();
            return;
        }
        let Some(msg) = P::own_message(msg) else {
            self.seat_mut().counters().messages_ignored += 1;
            return;
        };
        if !self.well_formed(&msg) {
            self.seat_mut().refused();
            return;
        }
        self.prepare_input(now);
        self.seat_mut().observed.last_heard[i] = Some(now);
        self.on_message(now, i, from, msg);
        self.seat_mut().finish_input();
    }

    fn handle_timeout(&mut self, now: Instant) {
        if self.seat().stopped || !self.seat_mut().start_input(now) {
            return;
        }
        self.prepare_input(now);
        self.on_timeout(now);
        self.seat_mut().finish_input();
    }

    fn handle_electorate(&mut self, now: Instant, electorate: Electorate) {
        if self.seat().stopped || !self.seat_mut().start_input(now) {
            return;
        }
        if let Err(why) = electorate.check() {
            // The driver passes what the log holds, and the log checks every
            // change: this is a bug, and counting over it could elect two
            // leaders.
            return self.seat_mut().halt(format!("an impossible configuration: {why}"));
        }
        self.prepare_input(now);
        let written_in = Term(electorate.last_token.0);
        if written_in > self.seat().term && written_in.is_valid() {
            // The log holds an entry of a leadership of a later term than
            // any this node knows (it was away, or its directory is new):
            // it moves to that term, so that a term it stands in, and the
            // fencing token it would lead with, is above every token the
            // log already holds.
            if self.seat().role != Role::Follower {
                self.become_follower(Reason::HigherTerm);
            }
            let seat = self.seat_mut();
            seat.term = written_in;
            seat.voted_for = None;
            seat.last_lsn = None;
            seat.persist();
            seat.set_leader(None);
        }
        if electorate != self.seat().electorate {
            let recount = !self.seat().electorate.only_grew(&electorate);
            let old = self.seat_mut().set_electorate(electorate);
            self.on_electorate(now, &old, recount);
            let seat = self.seat();
            if seat.role == Role::Leader && !seat.stands() {
                // Its removal committed: hand over to the most responsive
                // voter left.
                let successor = handover::best_successor(&seat.cfg, &seat.acked_sent_at, now);
                let seat = self.seat_mut();
                seat.note_handover(seat.term, successor);
                self.resign(now, successor);
            }
        }
        self.seat_mut().finish_input();
    }

    fn electorate(&self) -> &Electorate {
        &self.seat().electorate
    }

    fn handle_peer_dead(&mut self, now: Instant, peer: NodeId) {
        if self.seat().stopped || !self.seat_mut().start_input(now) {
            return;
        }
        if !self.seat_mut().accept_notice(peer) {
            return;
        }
        self.prepare_input(now);
        self.on_peer_dead(now, peer);
        self.seat_mut().finish_input();
    }

    fn handle_persist_failed(&mut self, now: Instant) {
        self.seat_mut().storage_failed = true;
        self.on_persist_failed(now);
    }

    fn handle_persist_recovered(&mut self, _now: Instant) {
        self.seat_mut().storage_failed = false;
    }

    fn transfer_leadership(&mut self, now: Instant, to: NodeId) -> Result<(), TransferError> {
        self.check_lease(now);
        let seat = self.seat();
        let leading = seat.role == Role::Leader;
        if handover::check_transfer(&seat.cfg, leading, seat.leader, &seat.acked_sent_at, now, to)?
        {
            let seat = self.seat_mut();
            seat.note_handover(seat.term, Some(to));
            self.resign(now, Some(to));
        }
        Ok(())
    }

    fn give_up_leadership(&mut self, now: Instant, token: FencingToken) {
        if self.seat().stopped {
            return;
        }
        self.check_lease(now);
        if FencingToken::for_term(self.seat().term) == token {
            cede(self, now);
        }
    }

    fn shutdown(&mut self, now: Instant) {
        if self.seat().stopped {
            return;
        }
        self.check_lease(now);
        cede(self, now);
        self.become_follower(Reason::Shutdown);
        let seat = self.seat_mut();
        seat.set_leader(None);
        seat.stopped = true;
    }

    fn take_output(&mut self) -> Output {
        std::mem::take(&mut self.seat_mut().out)
    }

    fn poll_timeout(&self) -> Instant {
        if self.seat().stopped {
            return Instant::MAX;
        }
        self.deadline()
    }

    fn hard_state(&self) -> HardState {
        self.seat().hard_state()
    }

    fn status(&self) -> Status {
        self.seat().status()
    }

    fn is_leader(&self, now: Instant) -> bool {
        self.seat().is_leader(now)
    }

    fn counters(&self) -> &Counters {
        &self.seat().observed.counters
    }

    fn election_timeout(&self) -> Duration {
        self.seat().cfg.election_timeout
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn majority_value_is_the_quorum_th_newest() {
        // (own, others, quorum, expected)
        type Row<'a> = (u64, &'a [Option<u64>], usize, Option<u64>);
        let table: [Row; 10] = [
            // A single voter: its own value.
            (9, &[], 1, Some(9)),
            // Three voters, quorum two: the newest peer value.
            (9, &[Some(3), Some(5)], 2, Some(5)),
            (9, &[Some(5), None], 2, Some(5)),
            (9, &[None, None], 2, None),
            // Five voters, quorum three: the second newest peer value.
            (9, &[Some(1), Some(4), Some(2), Some(3)], 3, Some(3)),
            (9, &[Some(1), None, None, Some(3)], 3, Some(1)),
            (9, &[None, None, None, Some(3)], 3, None),
            // Equal values count once each.
            (9, &[Some(4), Some(4), Some(1), None], 3, Some(4)),
            // A peer ahead of this node does not count twice.
            (2, &[Some(7), Some(1)], 2, Some(2)),
            // Quorum zero never happens; it answers nothing rather than panic.
            (9, &[Some(1)], 0, None),
        ];
        for (own, others, quorum, expected) in table {
            assert_eq!(
                majority_value(own, others.iter().copied(), quorum),
                expected,
                "own {own}, others {others:?}, quorum {quorum}"
            );
        }
    }

    #[test]
    fn lease_counts_from_the_majority_acknowledged_send_time() {
        let cfg = Config::new(
            NodeId(1),
            vec![NodeId(1), NodeId(2), NodeId(3)],
            Duration::from_millis(100),
            Duration::from_millis(1000),
        );
        let lease = Duration::from_millis(900);
        let mut seat = Seat::new(cfg, HardState::default(), lease, Instant::ZERO);
        seat.recompute_leader_lease();
        assert_eq!(seat.leader_lease_until, Instant::ZERO, "no acknowledgement: no lease");
        let at = |ms: u64| Instant::from_nanos(ms * 1_000_000);
        seat.next_heartbeat_at(at(40));
        assert!(seat.record_ack(at(50), 1, at(40)));
        assert_eq!(seat.leader_lease_until, at(940));
        assert!(seat.record_ack(at(60), 1, at(30)));
        assert_eq!(seat.leader_lease_until, at(940), "an older acknowledgement changes nothing");
        seat.next_heartbeat_at(at(60));
        assert!(seat.record_ack(at(70), 2, at(60)));
        assert_eq!(seat.leader_lease_until, at(960));
        // An echo of nothing sent (later than the newest heartbeat) is refused.
        assert!(!seat.record_ack(at(71), 1, at(61)));
        assert!(!seat.record_ack(at(71), 2, Instant::MAX));
        assert_eq!(seat.leader_lease_until, at(960));
        assert_eq!(seat.observed.counters.messages_refused, 2);
    }

    #[test]
    fn a_single_voter_leads_without_acknowledgements() {
        let cfg = Config::new(
            NodeId(4),
            vec![NodeId(4)],
            Duration::from_millis(100),
            Duration::from_millis(1000),
        );
        let mut seat =
            Seat::new(cfg, HardState::default(), Duration::from_millis(900), Instant::ZERO);
        seat.recompute_leader_lease();
        assert_eq!(seat.leader_lease_until, Instant::MAX);
    }

    fn three_node_seat() -> Seat {
        let cfg = Config::new(
            NodeId(1),
            vec![NodeId(1), NodeId(2), NodeId(3)],
            Duration::from_millis(100),
            Duration::from_millis(1000),
        );
        let state = HardState { term: Term(5), voted_for: Some(NodeId(2)) };
        let mut seat = Seat::new(cfg, state, Duration::from_millis(900), Instant::ZERO);
        let _ = std::mem::take(&mut seat.out);
        seat
    }

    fn halted(seat: &Seat) -> Option<&str> {
        seat.out.events.iter().find_map(|e| match e {
            Event::Halted { reason } => Some(reason.as_str()),
            _ => None,
        })
    }

    #[test]
    fn a_term_going_back_halts_before_anything_is_written_or_sent() {
        let mut seat = three_node_seat();
        seat.broadcast(Message::PreVote { term: Term(6), freshness: crate::Freshness::BOOTSTRAP });
        seat.term = Term(4);
        seat.persist();
        assert!(seat.stopped);
        assert_eq!(seat.out.persist, None);
        assert!(seat.out.messages.is_empty(), "{:?}", seat.out.messages);
        assert!(halted(&seat).is_some_and(|r| r.contains("from 5 to 4")), "{:?}", seat.out);
    }

    #[test]
    fn a_second_vote_in_a_term_halts() {
        let mut seat = three_node_seat();
        seat.voted_for = Some(NodeId(3));
        seat.persist();
        assert!(seat.stopped);
        assert!(halted(&seat).is_some_and(|r| r.contains("second vote in term 5")));
        // The same vote again, or a vote in a higher term, is fine.
        let mut seat = three_node_seat();
        seat.persist();
        seat.term = Term(6);
        seat.voted_for = None;
        seat.persist();
        seat.voted_for = Some(NodeId(3));
        seat.persist();
        assert!(!seat.stopped, "{:?}", seat.out.events);
        assert_eq!(seat.out.persist, Some(HardState { term: Term(6), voted_for: Some(NodeId(3)) }));
    }

    #[test]
    fn a_state_change_that_was_not_persisted_halts() {
        let mut seat = three_node_seat();
        seat.term = Term(6);
        seat.finish_input();
        assert!(seat.stopped);
        assert!(halted(&seat).is_some_and(|r| r.contains("without being persisted")));
    }

    #[test]
    fn leading_a_term_not_won_halts() {
        let mut seat = three_node_seat();
        seat.take_office(1);
        assert!(seat.stopped, "one vote of three is no majority");
        let mut seat = three_node_seat();
        seat.take_office(2);
        seat.finish_input();
        assert!(!seat.stopped);
        assert_eq!(seat.role, Role::Leader);
        // The term moves on under a leader that does not step down.
        seat.term = Term(6);
        seat.voted_for = None;
        seat.persist();
        seat.finish_input();
        assert!(seat.stopped);
        assert!(halted(&seat).is_some_and(|r| r.contains("leading term 6 after winning Some(5)")));
        assert_eq!(seat.role, Role::Follower);
        assert_eq!(seat.leader, None);
    }

    #[test]
    fn time_going_backwards_halts_an_elector_for_good() {
        use crate::raft::RaftElector;
        let cfg = Config::new(
            NodeId(1),
            vec![NodeId(1), NodeId(2), NodeId(3)],
            Duration::from_millis(100),
            Duration::from_millis(1000),
        );
        let at = |ms: u64| Instant::from_nanos(ms * 1_000_000);
        let mut e = RaftElector::new(cfg, HardState::default(), rand_pcg::Pcg64Mcg::new(1), at(10));
        e.handle_timeout(at(20));
        let _ = e.take_output();
        e.handle_message(
            at(15),
            NodeId(2),
            Message::PreVote { term: Term(1), freshness: crate::Freshness::BOOTSTRAP },
        );
        let out = e.take_output();
        assert!(out.messages.is_empty());
        assert!(out.events.iter().any(
            |e| matches!(e, Event::Halted { reason } if reason.contains("time went backwards"))
        ));
        assert_eq!(e.poll_timeout(), Instant::MAX);
        // Nothing moves it again.
        e.handle_timeout(at(5000));
        e.handle_message(
            at(5001),
            NodeId(2),
            Message::Vote {
                term: Term(1),
                transfer: false,
                freshness: crate::Freshness::BOOTSTRAP,
            },
        );
        assert!(e.take_output().is_empty());
        assert!(!e.is_leader(at(5002)));
    }
}
