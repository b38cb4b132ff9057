//! The interface every election protocol offers to drivers (the tokio runtime,
//! the simulator, the model checker).

use crate::electorate::Electorate;
use crate::message::Message;
use crate::time::Instant;
use crate::types::{FencingToken, Lsn, NodeId, Role, Term};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The state a node must keep durable: written and fsynced before any message
/// produced together with it is sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct HardState {
    /// The current term.
    pub term: Term,
    /// The node voted for in `term`, if any.
    pub voted_for: Option<NodeId>,
}

/// Why a role or leader changed; carried by events for logs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// The node started.
    Startup,
    /// No leader was heard within the election timeout: pre-vote started.
    ElectionTimeout,
    /// A majority granted the pre-vote: the node campaigns.
    PreVoteWon,
    /// The pre-vote or vote round failed.
    RoundFailed,
    /// A majority voted for this node.
    ElectionWon,
    /// A message carried a higher term.
    HigherTerm,
    /// A heartbeat from the leader of the current term.
    LeaderHeartbeat,
    /// The leader did not hear from a majority within its lease (CheckQuorum).
    QuorumLost,
    /// The leader heard another node lead its own term. Votes are unique per
    /// term, so a voter voted twice (a compromised peer, or one whose state
    /// was rolled back) or the heartbeat was forged: the leader's majority
    /// may be the liar's, so it stops leading rather than lead beside the
    /// other.
    RivalLeader,
    /// The leader handed over leadership (transfer or graceful stop).
    Resigned,
    /// This node was named successor by the resigning leader.
    TransferRequested,
    /// A spy that knows reported the leader this node followed dead (see
    /// [`Protocol::handle_peer_dead`]): the node stands at once, as the
    /// best-ranked survivor, without waiting for the election timeout.
    PeerDead,
    /// The node stopped (graceful shutdown).
    Shutdown,
    /// Durable state could not be written.
    StorageFailed,
    /// An invariant broke and the node halted (see [`Event::Halted`]).
    InvariantViolated,
}

/// Something a driver or application may want to react to.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Event {
    /// This node's role changed.
    RoleChanged {
        /// The new role.
        role: Role,
        /// The node's term after the change.
        term: Term,
        /// Why.
        reason: Reason,
    },
    /// The leader this node knows of changed (to itself, another node, or none).
    LeaderChanged {
        /// The leader now known, if any.
        leader: Option<NodeId>,
        /// The term of that leader (or the node's term when there is none).
        term: Term,
        /// The leader's fencing token, when there is a leader.
        fencing_token: Option<FencingToken>,
    },
    /// The leader this node followed left office in `term` and said so (a
    /// leadership transfer or a graceful stop), naming `successor` if any.
    /// Only for logs and dashboards: it tells a handover from a leader that
    /// went silent.
    LeaderResigned {
        /// The leader that resigned.
        leader: NodeId,
        /// The term it led.
        term: Term,
        /// The node it asked to campaign at once.
        successor: Option<NodeId>,
    },
    /// The leader this node followed in `term` was reported dead by a spy
    /// that knows ([`Protocol::handle_peer_dead`]). Only for logs and
    /// dashboards: it tells a failover on a death notice from one on a
    /// timeout. A [`Event::LeaderChanged`] to no leader comes with it.
    LeaderDied {
        /// The leader reported dead.
        leader: NodeId,
        /// The term it led.
        term: Term,
    },
    /// An invariant that every protocol must keep broke (time went backwards,
    /// a term went back, a second vote in a term, a term led without being
    /// won, durable state changed without being persisted). The node halted
    /// before anything of the faulty step was persisted or sent: it ignores
    /// every later input, as if it had crashed. This is a bug (or, for time,
    /// a broken clock); the driver should report `reason` and stop.
    Halted {
        /// What broke, for the operator.
        reason: String,
    },
}

/// What one input produced. Handle it in field order: persist, then send, then events.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
#[must_use = "the output carries state to persist and messages to send"]
pub struct Output {
    /// State to write durably (with fsync) before sending any of `messages`.
    pub persist: Option<HardState>,
    /// Messages to send, as `(destination, message)`.
    pub messages: Vec<(NodeId, Message)>,
    /// Leadership events.
    pub events: Vec<Event>,
}

impl Output {
    /// True when there is nothing to do.
    pub fn is_empty(&self) -> bool {
        self.persist.is_none() && self.messages.is_empty() && self.events.is_empty()
    }
}

/// Counters for metrics and the simulator's statistics. They only grow.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Counters {
    /// Pre-vote rounds started.
    pub pre_votes_started: u64,
    /// Election rounds started (term bumps by this node's candidacy).
    pub elections_started: u64,
    /// Elections this node won.
    pub elections_won: u64,
    /// Heartbeats sent (one per destination).
    pub heartbeats_sent: u64,
    /// Heartbeats received and accepted.
    pub heartbeats_received: u64,
    /// Times this node stepped down because it lost its quorum.
    pub quorum_losses: u64,
    /// Messages ignored: unknown sender, stale LSN, or no longer relevant.
    pub messages_ignored: u64,
    /// Messages refused as impossible from a correct peer: a term above
    /// [`crate::Term::MAX_VALID`], an acknowledgement of something this node
    /// never sent, a resignation from a node that does not lead, a transfer
    /// nobody asked for. Each one points at a buggy or hostile peer.
    pub messages_refused: u64,
    /// Death notices accepted ([`Protocol::handle_peer_dead`] about a voter
    /// other than this node). Refused ones count in `messages_refused`.
    pub death_notices: u64,
}

/// A peer as seen by this node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerStatus {
    /// The peer.
    pub id: NodeId,
    /// When a message from the peer last arrived, if ever.
    pub last_heard: Option<Instant>,
}

/// A snapshot of a node's election state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    /// This node.
    pub id: NodeId,
    /// Its role.
    pub role: Role,
    /// Its term.
    pub term: Term,
    /// Whom it voted for in `term`.
    pub voted_for: Option<NodeId>,
    /// The leader it knows of (itself included).
    pub leader: Option<NodeId>,
    /// The known leader's fencing token.
    pub fencing_token: Option<FencingToken>,
    /// The last LSN this node issued (leader) or accepted (follower).
    pub lsn: Option<Lsn>,
    /// As leader: until when it may act as leader without fresh acknowledgements.
    pub lease_until: Option<Instant>,
    /// True while durable state cannot be written; the node then does not vote.
    pub storage_failed: bool,
    /// The other voters.
    pub peers: Vec<PeerStatus>,
}

/// Why a leadership transfer was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransferError {
    /// Only the leader can hand over leadership.
    #[error("this node is not the leader ({})", describe_leader(*.leader))]
    NotLeader {
        /// The leader this node knows of.
        leader: Option<NodeId>,
    },
    /// The target is not a voter.
    #[error("node {0} is not a voter of this cluster")]
    UnknownNode(NodeId),
    /// The target has not acknowledged the leader recently; it may be down.
    #[error(
        "node {0} has not acknowledged the leader within the election timeout; it may be down"
    )]
    TargetUnreachable(NodeId),
}

/// A leader-election protocol as a deterministic, sans-IO state machine.
///
/// # Calling contract
/// * Inputs are the `handle_*` methods (death notices included:
///   [`Protocol::handle_peer_dead`]), [`Protocol::transfer_leadership`] and
///   [`Protocol::shutdown`]. Each takes `now` from the caller's monotonic clock;
///   `now` must never go backwards between calls.
/// * After every input, call [`Protocol::take_output`] and process it in order:
///   1. if `persist` is `Some`, write it durably (fsync) — if that fails, drop
///      the `messages` of this output and call [`Protocol::handle_persist_failed`]
///      before any other input (the events may still be delivered: none of them
///      announces a leadership that depends on the failed write);
///   2. send `messages` (best effort: the protocol tolerates loss,
///      duplication and reordering);
///   3. deliver `events`.
/// * Then (re)arm a single timer at [`Protocol::poll_timeout`] and call
///   [`Protocol::handle_timeout`] when it fires (late is fine, early is harmless).
/// * Randomness comes only from the RNG given at construction.
///
/// On restart, construct the protocol from the last persisted [`HardState`].
pub trait Protocol: Send {
    /// A message from peer `from` arrived.
    fn handle_message(&mut self, now: Instant, from: NodeId, msg: Message);
    /// The timer armed from [`Protocol::poll_timeout`] fired.
    fn handle_timeout(&mut self, now: Instant);
    /// Durable state could not be written: the node stops voting and leading
    /// until [`Protocol::handle_persist_recovered`].
    fn handle_persist_failed(&mut self, now: Instant);
    /// Durable state (the latest [`Protocol::hard_state`]) was written again.
    fn handle_persist_recovered(&mut self, now: Instant);
    /// A death notice: a spy that knows (the peer's supervisor after
    /// `waitpid`, its next incarnation holding the data directory's lock, an
    /// authenticated operator) says that `peer`'s current incarnation is dead
    /// and will send nothing more, except messages already in flight.
    ///
    /// The driver must pass a notice only after checking that it came from
    /// an authenticated spy and that it names the incarnation of `peer` it
    /// knows from the peer's handshake (a notice about an earlier
    /// incarnation is dropped). Never infer a notice from silence or from a
    /// closed connection: a notice about a live leader lets a second leader
    /// be elected while its lease runs.
    ///
    /// What it does, in every protocol:
    /// * a notice about this node, or about a node that is not a voter, is
    ///   refused (counted in [`Counters::messages_refused`]);
    /// * every support this node gives `peer` ends at once: the lease it
    ///   holds on it as leader (or as the candidate it voted for, or
    ///   promised to), and any hold that keeps it from backing another
    ///   candidate for `peer`'s sake;
    /// * if `peer` is the leader this node follows, the leader becomes none
    ///   ([`Event::LeaderDied`], [`Event::LeaderChanged`]), heartbeats of
    ///   `peer`'s term still in flight are ignored (a later incarnation leads
    ///   only a higher term), and the node stands soon in rank order: the
    ///   best-ranked voter other than `peer` at once
    ///   ([`Reason::PeerDead`]), the next one a candidacy stagger later, and
    ///   so on (a node that still holds a lease on another node waits for
    ///   it first). Under the ranked protocol every elector polls at once,
    ///   as its ranking of claims already elects the best-ranked one;
    /// * otherwise (a follower died, or the leader was already replaced)
    ///   leadership is unchanged.
    ///
    /// Nothing is persisted, and every rule on votes, terms and leases
    /// still applies: a notice only removes the wait for a lease that a dead
    /// process can no longer use. Duplicated notices change nothing more.
    ///
    /// Safety: `peer` leads only while a majority acknowledges it; if the
    /// notice is true it can acknowledge, ask or send nothing new, so
    /// releasing this node's lease on it cannot make two leaders, and what
    /// it sent before its death carries a term no higher than its own. A
    /// false notice (a spy that guesses) would allow two leaders for up to
    /// one lease, which is why only knowing, authenticated spies may call it.
    fn handle_peer_dead(&mut self, now: Instant, peer: NodeId);
    /// The configuration this node's log holds changed (see
    /// [`crate::electorate`]): count majorities over its voters from now on,
    /// send a leader's messages to every member, and stand only as
    /// [`Electorate::stands`] allows. Give it before the node acknowledges
    /// the entry that holds it to anyone, and at start, before the first
    /// timer (an elector starts with the bootstrap list of its `Config`).
    ///
    /// Records of members that stay are kept; a round in progress ends (it
    /// is asked again under the new voters); a leader keeps leading and
    /// counts its lease over the new voters, except one whose removal
    /// committed (`stands` false), which resigns in favour of the most
    /// responsive voter left. An impossible configuration (no voters, an id
    /// twice) halts the node ([`Event::Halted`]). A log whose last entry was
    /// written under a fencing token above this node's term moves the node
    /// to that term (persisted): a node whose disk is new, or that was away,
    /// never stands in a term, nor leads with a token, below one its log
    /// holds. Give it again whenever the token of the log's last entry
    /// grows (a new leadership's first entry), before acknowledging it.
    fn handle_electorate(&mut self, now: Instant, electorate: Electorate);
    /// The configuration this node counts over.
    fn electorate(&self) -> &Electorate;
    /// Hands leadership to `to`. The leader steps down at once and `to` campaigns
    /// without waiting for a timeout.
    fn transfer_leadership(&mut self, now: Instant, to: NodeId) -> Result<(), TransferError>;
    /// This node's replicated log gave up the leadership of fencing token
    /// `token`: a log write failed after entries of it may have left early
    /// (`tenure_replica::Replica::handle_persist_failed`), and the log never
    /// leads under it again. If this node still leads under `token`, it
    /// resigns, naming the most responsive follower as a shutdown does, so
    /// that a later term elects a leader whose log works. It keeps voting
    /// and may stand again in a later term. Anything else: no effect.
    fn give_up_leadership(&mut self, now: Instant, token: FencingToken);
    /// Graceful stop: a leader cedes leadership to the most responsive follower.
    /// The node ignores every later input.
    fn shutdown(&mut self, now: Instant);
    /// Drains what the last inputs produced.
    fn take_output(&mut self) -> Output;
    /// When [`Protocol::handle_timeout`] must next be called.
    fn poll_timeout(&self) -> Instant;
    /// The current durable state (what the last `persist` asked for).
    fn hard_state(&self) -> HardState;
    /// A snapshot of the election state.
    fn status(&self) -> Status;
    /// True if this node leads at `now`: its role is leader and its lease, which
    /// ends before any other node could be elected, has not run out.
    fn is_leader(&self, now: Instant) -> bool;
    /// Event counters.
    fn counters(&self) -> &Counters;
    /// The election timeout this protocol uses (for drivers' and checkers' bounds).
    fn election_timeout(&self) -> Duration;
}

fn describe_leader(leader: Option<NodeId>) -> String {
    match leader {
        Some(id) => format!("the leader is node {id}"),
        None => "no leader is known".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transfer_errors_read_well() {
        let e = TransferError::NotLeader { leader: Some(NodeId(3)) };
        assert_eq!(e.to_string(), "this node is not the leader (the leader is node 3)");
        let e = TransferError::NotLeader { leader: None };
        assert_eq!(e.to_string(), "this node is not the leader (no leader is known)");
    }
}
