//! Where a caller's request goes, as a sans-IO state machine beside the
//! [`crate::Replica`]: proposed here by the ready leader (batched: group
//! commit), forwarded to the leader a follower knows of, or parked while no
//! leader is known; and the answers back, to this node's callers and to the
//! followers that forwarded. Inputs carry `now`; outputs are the frames to
//! send ([`Forward`]), the answers ([`Answer`], by the driver's
//! [`CallerId`]), the questions to hand to the leader's service
//! ([`Delivery`]) and counts. The router never calls the replica: the
//! driver proposes what [`Router::take_batch`] returns, starts the reads
//! [`Router::take_reads`] returns, and feeds back the results and the
//! replica's completions. The node's log task and the simulator drive the
//! same router.
//!
//! The frames travel on the peer connections: they may be lost or delayed,
//! never duplicated (a forwarded write received twice would be proposed
//! twice). A lost one ends by the timeouts: the caller of a write is told
//! the outcome is unknown, never that it failed.
//!
//! The driver's contract, after every input: (1) if [`Router::has_batch`],
//! read whether the replica leads ready ([`Router::take_batch`] with its
//! token), propose the commands and hand the results to
//! [`Router::batch_proposed`]; (2) start the reads of
//! [`Router::take_reads`] and hand each result to [`Router::read_started`];
//! (3) take the output: for each follower in [`RouterOutput::read_replies`]
//! send the replica's commit index first, then the replies, then the
//! forwards; answer the callers; deliver the asks.

mod errors;
mod forward;

/// Removes the entries of `map` for which `pred` holds and returns their
/// values in key order: what the router answers, it answers in an order
/// that depends on nothing but its inputs (a seed replays exactly).
fn take_where<K: Ord + Copy, V>(map: &mut BTreeMap<K, V>, pred: impl Fn(&V) -> bool) -> Vec<V> {
    let keys: Vec<K> = map.iter().filter(|(_, v)| pred(v)).map(|(k, _)| *k).collect();
    keys.into_iter().filter_map(|k| map.remove(&k)).collect()
}

#[cfg(test)]
mod tests;

pub use errors::{AskError, Committed, ReadFailure, WriteError};
pub use forward::{Forward, ForwardRefusal};

use crate::output::{Completion, ProposalError, ProposalId, ReadError, ReadId};
use crate::replica::{ProposeError, ReadStart};
use crate::{Index, Position};
use std::collections::BTreeMap;
use std::time::Duration;
use tenure_core::{FencingToken, Instant, NodeId};

/// The driver's name for one request of its callers: the router answers
/// by it ([`RouterOutput::answers`]).
pub type CallerId = u64;

/// Most requests the router holds at once (all kinds together); more are
/// refused as busy.
pub const MAX_WAITING: usize = 16 * 1024;

/// How often a node's driver calls [`Router::expire`] while the router
/// holds requests: each call looks at every request held, so not on every
/// input (the simulator did, and spent half of its time there with 10,000
/// sessions). A request ends at most this much after its bound.
pub const EXPIRY_CHECK_INTERVAL: Duration = Duration::from_millis(20);

/// The longest a request waits for its outcome once it was proposed or
/// forwarded; a write still open then is reported as
/// [`WriteError::Unknown`].
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a request waits for a leader before it fails: three election
/// timeouts (an election takes one or two), at least 1 s, at most 30 s.
pub fn no_leader_wait(election_timeout: Duration) -> Duration {
    (election_timeout * 3).clamp(Duration::from_secs(1), Duration::from_secs(30))
}

/// The router's timings and bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RouterConfig {
    /// This node.
    pub id: NodeId,
    /// How long a request waits for a leader ([`no_leader_wait`]).
    pub no_leader_wait: Duration,
    /// How long a request a leader sent back waits before it is sent again
    /// (a heartbeat: two nodes that each think the other leads do not
    /// bounce it between them).
    pub retry_after_refusal: Duration,
    /// [`REQUEST_TIMEOUT`], or shorter in tests.
    pub request_timeout: Duration,
    /// [`MAX_WAITING`], or smaller in tests.
    pub max_waiting: usize,
    /// The number the first forwarded request gets (the others count up
    /// from it). The leader answers a forwarded request by its number, and
    /// an answer may reach a later life of this node (queued for the link,
    /// or in the inbox of a paused leader): every life must number from
    /// its own place, or an answer of the previous life answers a request
    /// of this one. A node starts from a random number; the simulator from
    /// one per incarnation.
    pub first_id: u64,
}

impl RouterConfig {
    /// The bounds of a node with these timings.
    pub fn new(id: NodeId, heartbeat_interval: Duration, election_timeout: Duration) -> Self {
        RouterConfig {
            id,
            no_leader_wait: no_leader_wait(election_timeout),
            retry_after_refusal: heartbeat_interval,
            request_timeout: REQUEST_TIMEOUT,
            max_waiting: MAX_WAITING,
            first_id: 0,
        }
    }
}

/// A request of this node's callers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Call {
    /// Write `command` through the leader.
    Propose(Vec<u8>),
    /// Write `command` only as the ready leader of this token: never
    /// forwarded nor held (the leader's own services).
    ProposeAs(FencingToken, Vec<u8>),
    /// A linearizable read: the index to serve it at, once applied here.
    Read,
    /// Confirm, as a read does, that this node still is the ready leader
    /// of this token.
    Confirm(FencingToken),
    /// A question for the service on the leader.
    Ask(Vec<u8>),
}

/// What a caller gets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// To [`Call::Propose`] and [`Call::ProposeAs`].
    Write(Result<Committed, WriteError>),
    /// To [`Call::Read`] and [`Call::Confirm`]: an index applied on this
    /// node, at which the read may be served.
    Read(Result<Index, ReadFailure>),
    /// To [`Call::Ask`], when the router answers it (a delivered question
    /// is answered by the service).
    Ask(Result<Vec<u8>, AskError>),
}

/// Who asked a question the service on this node (the ready leader) is to
/// answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AskFrom {
    /// A caller on this node.
    Local(CallerId),
    /// A follower, under its id for the request: the answer goes back as
    /// [`Forward::Answered`].
    Peer(NodeId, u64),
}

/// A question for the leader's service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    /// The question.
    pub request: Vec<u8>,
    /// The leadership it arrives under.
    pub token: FencingToken,
    /// Who asked.
    pub from: AskFrom,
}

/// Where a request would go now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// This node leads the log, ready: propose or read here.
    Here,
    /// Forward to this leader.
    Leader(NodeId),
    /// No leader to take it: park.
    Wait,
}

/// Who asked for a write or a read this node serves as leader.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Asker {
    /// A caller on this node.
    Local(CallerId),
    /// A caller on this node that only the leadership of this token may
    /// serve.
    Bound(CallerId, FencingToken),
    /// A follower, under its id for the request.
    Peer(NodeId, u64),
}

/// A request of this node's callers, not yet proposed or forwarded.
#[derive(Clone, Debug)]
enum Parked {
    Propose(CallerId, Vec<u8>),
    Read(CallerId),
    Ask(CallerId, Vec<u8>),
}

/// A request forwarded to the leader, waiting for its answer. Writes and
/// questions are kept: a leader that refuses one did nothing with it, and
/// it is sent again to the next.
#[derive(Clone, Debug)]
enum Forwarded {
    Propose(CallerId, Vec<u8>),
    Read(CallerId),
    Ask(CallerId, Vec<u8>),
}

/// What one input made the router do.
#[derive(Debug, Default)]
pub struct RouterOutput {
    /// Answers to this node's callers.
    pub answers: Vec<(CallerId, Answer)>,
    /// Frames for peers.
    pub forwards: Vec<(NodeId, Forward)>,
    /// Read indexes for followers: `(follower, its id, index)`. Send each
    /// follower the replica's commit index first (the follower serves the
    /// read once it applied that far), then these.
    pub read_replies: Vec<(NodeId, u64, Index)>,
    /// Questions for the service on this node, the ready leader.
    pub deliveries: Vec<Delivery>,
    /// Requests forwarded to a leader.
    pub forwarded: u64,
    /// Writes that ended with an unknown outcome.
    pub unknown: u64,
    /// Answers from peers that matched no request (dropped).
    pub dropped: u64,
}

/// The router: see the module docs.
#[derive(Debug)]
pub struct Router {
    cfg: RouterConfig,
    /// The elector's view: the leader, and its token.
    view: (Option<NodeId>, Option<FencingToken>),
    /// The token the replica is the ready leader of (its last output).
    ready: Option<FencingToken>,
    /// The log is being rebuilt after a failed write: nothing is routed.
    rebuilding: bool,
    /// Commands to propose together, with who asked and since when.
    batch: Vec<(Asker, Vec<u8>, Instant)>,
    /// The batch being proposed: who asked, in order.
    proposing: Vec<(Asker, Instant)>,
    /// Reads to start on the replica.
    to_read: Vec<(Asker, Instant)>,
    /// Accepted as leader, waiting for the commit.
    proposals: BTreeMap<ProposalId, (Asker, Instant)>,
    /// Accepted as leader, waiting for a confirmation round.
    reads: BTreeMap<ReadId, (Asker, Instant)>,
    /// Waiting for a leader: (request, began, not to be sent before).
    /// Ordered by (not before, arrival): `settle`, which runs after every
    /// input, takes the due ones from the front instead of scanning every
    /// parked request (with 100,000 sessions, some held back after a
    /// refusal, that scan was most of the simulator's time).
    parked: BTreeMap<(Instant, u64), (Parked, Instant)>,
    /// Arrivals counted for `parked`'s order.
    parked_seq: u64,
    /// Sent to the leader: by id, (the leader, the request, began).
    forwarded: BTreeMap<u64, (NodeId, Forwarded, Instant)>,
    /// Reads with a confirmed index, and writes the leader answered, waiting
    /// for this node to apply that far.
    /// Ordered by (index, arrival), so that `settle` takes the applied ones
    /// from the front.
    applying: BTreeMap<(Index, u64), (CallerId, Instant, Applying)>,
    /// Arrivals counted for `applying`'s order.
    applying_seq: u64,
    next_id: u64,
    out: RouterOutput,
}

/// What waits for this node to apply an index.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Applying {
    /// A read, served at the index.
    Read,
    /// A write the leader committed, answered with what it answered.
    Write(Committed),
}

impl Applying {
    /// The answer once this node applied `index`.
    fn answer(self, index: Index) -> Answer {
        match self {
            Applying::Read => Answer::Read(Ok(index)),
            Applying::Write(c) => Answer::Write(Ok(c)),
        }
    }

    /// The answer when this node did not apply it in time (or stops): a
    /// read fails with `e`; a write is still done (it committed), and
    /// answered so.
    fn late(self, e: ReadFailure) -> Answer {
        match self {
            Applying::Read => Answer::Read(Err(e)),
            Applying::Write(c) => Answer::Write(Ok(c)),
        }
    }
}

impl Router {
    /// A router that knows no leader yet.
    pub fn new(cfg: RouterConfig) -> Self {
        Router {
            cfg,
            view: (None, None),
            ready: None,
            rebuilding: false,
            batch: Vec::new(),
            proposing: Vec::new(),
            to_read: Vec::new(),
            proposals: BTreeMap::new(),
            reads: BTreeMap::new(),
            parked: BTreeMap::new(),
            parked_seq: 0,
            forwarded: BTreeMap::new(),
            applying: BTreeMap::new(),
            applying_seq: 0,
            next_id: cfg.first_id,
            out: RouterOutput::default(),
        }
    }

    /// Its bounds.
    pub fn config(&self) -> &RouterConfig {
        &self.cfg
    }

    /// How many requests it holds.
    pub fn held(&self) -> usize {
        self.proposals.len()
            + self.reads.len()
            + self.parked.len()
            + self.forwarded.len()
            + self.applying.len()
            + self.batch.len()
            + self.proposing.len()
            + self.to_read.len()
    }

    /// Where a request would go now.
    pub fn route(&self) -> Route {
        if self.rebuilding {
            Route::Wait
        } else if self.ready.is_some() {
            Route::Here
        } else {
            match self.view.0 {
                Some(l) if l != self.cfg.id => Route::Leader(l),
                _ => Route::Wait,
            }
        }
    }

    /// The token the replica is the ready leader of, as last told.
    pub fn ready(&self) -> Option<FencingToken> {
        self.ready
    }

    /// The replica leads ready under `token` (or not): from its last output.
    pub fn set_ready(&mut self, token: Option<FencingToken>) {
        self.ready = token;
    }

    /// The log is being rebuilt after a failed write (nothing is routed
    /// until it is done), or is writable again.
    pub fn set_rebuilding(&mut self, rebuilding: bool) {
        self.rebuilding = rebuilding;
        if rebuilding {
            self.ready = None;
        }
    }

    /// The elector's leadership changed: requests forwarded to a former
    /// leader end (writes unknown: the entry may be in its log) or are
    /// asked again (reads, questions).
    pub fn set_view(&mut self, leader: Option<NodeId>, token: Option<FencingToken>) {
        let old = self.view.0;
        self.view = (leader, token);
        if old.is_some() && old != leader {
            self.leader_gone(old);
        }
    }

    /// The elector's leadership as last told.
    pub fn view(&self) -> (Option<NodeId>, Option<FencingToken>) {
        self.view
    }

    /// A request of this node's callers.
    pub fn call(&mut self, now: Instant, caller: CallerId, call: Call) {
        if self.held() >= self.cfg.max_waiting {
            let answer = match call {
                Call::Propose(_) | Call::ProposeAs(..) => Answer::Write(Err(WriteError::Busy)),
                Call::Read | Call::Confirm(_) => Answer::Read(Err(ReadFailure::Busy)),
                Call::Ask(_) => Answer::Ask(Err(AskError::Busy)),
            };
            self.out.answers.push((caller, answer));
            return;
        }
        match call {
            Call::Propose(command) => self.route_write(now, caller, command, now),
            Call::ProposeAs(token, command) => {
                if self.route() == Route::Here && self.ready == Some(token) {
                    self.batch.push((Asker::Bound(caller, token), command, now));
                } else {
                    self.answer(caller, Answer::Write(Err(WriteError::NotLeader)));
                }
            }
            Call::Read => self.route_read(now, caller, now),
            Call::Confirm(token) => {
                if self.route() == Route::Here && self.ready == Some(token) {
                    self.to_read.push((Asker::Bound(caller, token), now));
                } else {
                    self.answer(caller, Answer::Read(Err(ReadFailure::NotLeader)));
                }
            }
            Call::Ask(request) => self.route_ask(now, caller, request, now),
        }
    }

    fn answer(&mut self, caller: CallerId, answer: Answer) {
        self.out.answers.push((caller, answer));
    }

    fn forward(&mut self, to: NodeId, frame: Forward) {
        self.out.forwards.push((to, frame));
    }

    fn next_id(&mut self) -> u64 {
        self.next_id = self.next_id.wrapping_add(1);
        self.next_id
    }

    fn route_write(&mut self, now: Instant, caller: CallerId, command: Vec<u8>, since: Instant) {
        match self.route() {
            Route::Here => self.batch.push((Asker::Local(caller), command, since)),
            Route::Leader(l) => {
                let id = self.next_id();
                self.forward(l, Forward::Propose { id, command: command.clone() });
                self.forwarded.insert(id, (l, Forwarded::Propose(caller, command), since));
                self.out.forwarded += 1;
            }
            Route::Wait => self.park(Parked::Propose(caller, command), since, now),
        }
    }

    fn route_read(&mut self, now: Instant, caller: CallerId, since: Instant) {
        match self.route() {
            Route::Here => self.to_read.push((Asker::Local(caller), since)),
            Route::Leader(l) => {
                let id = self.next_id();
                self.forward(l, Forward::ReadIndex { id });
                self.forwarded.insert(id, (l, Forwarded::Read(caller), since));
                self.out.forwarded += 1;
            }
            Route::Wait => self.park(Parked::Read(caller), since, now),
        }
    }

    fn route_ask(&mut self, now: Instant, caller: CallerId, request: Vec<u8>, since: Instant) {
        match (self.route(), self.ready) {
            (Route::Here, Some(token)) => {
                self.out.deliveries.push(Delivery { request, token, from: AskFrom::Local(caller) })
            }
            (Route::Leader(l), _) => {
                let id = self.next_id();
                self.forward(l, Forward::Ask { id, request: request.clone() });
                self.forwarded.insert(id, (l, Forwarded::Ask(caller, request), since));
                self.out.forwarded += 1;
            }
            _ => self.park(Parked::Ask(caller, request), since, now),
        }
    }

    /// Parks a request a leader sent back (it does not lead): sent again
    /// once [`RouterConfig::retry_after_refusal`] has passed.
    fn repark(&mut self, now: Instant, p: Parked, since: Instant) {
        let retry = now + self.cfg.retry_after_refusal;
        self.park(p, since, retry);
    }

    /// Answers `caller` with `what` once this node has applied `index`.
    fn wait_applied(&mut self, index: Index, caller: CallerId, since: Instant, what: Applying) {
        self.applying_seq += 1;
        self.applying.insert((index, self.applying_seq), (caller, since, what));
    }

    /// Holds `p` (waiting since `since`) until a leader is known, and not
    /// before `at`.
    fn park(&mut self, p: Parked, since: Instant, at: Instant) {
        self.parked_seq += 1;
        self.parked.insert((at, self.parked_seq), (p, since));
    }

    // ---- As leader ----

    /// Whether commands wait to be proposed.
    pub fn has_batch(&self) -> bool {
        !self.batch.is_empty()
    }

    /// The commands to propose now, as one input of the replica, given the
    /// token the replica is the ready leader of (`None`: it does not lead
    /// ready). Commands bound to another leadership are refused; if the
    /// replica does not lead, the batch is routed again (nothing was
    /// written). Hand the replica's results to [`Router::batch_proposed`].
    pub fn take_batch(&mut self, now: Instant, leading: Option<FencingToken>) -> Vec<Vec<u8>> {
        self.ready = leading;
        let batch = std::mem::take(&mut self.batch);
        let mut commands = Vec::with_capacity(batch.len());
        for (asker, command, since) in batch {
            match asker {
                Asker::Bound(caller, t) if leading != Some(t) => {
                    self.answer(caller, Answer::Write(Err(WriteError::NotLeader)))
                }
                _ if leading.is_none() => match asker {
                    Asker::Local(caller) => self.route_write(now, caller, command, since),
                    Asker::Peer(to, id) => {
                        let result = Err(ForwardRefusal::NotLeader);
                        self.forward(to, Forward::Proposed { id, result })
                    }
                    // Refused above: no leadership is its token.
                    Asker::Bound(..) => {}
                },
                _ => {
                    self.proposing.push((asker, since));
                    commands.push(command);
                }
            }
        }
        commands
    }

    /// The replica's answers to the commands [`Router::take_batch`]
    /// returned, in order.
    pub fn batch_proposed(&mut self, now: Instant, results: Vec<Result<ProposalId, ProposeError>>) {
        let proposing = std::mem::take(&mut self.proposing);
        for ((asker, since), result) in proposing.into_iter().zip(results) {
            match result {
                Ok(id) => {
                    self.proposals.insert(id, (asker, since));
                }
                Err(e) => self.refuse_write(now, asker, e, since),
            }
        }
    }

    /// Answers a command the replica refused: nothing was written.
    fn refuse_write(&mut self, now: Instant, asker: Asker, e: ProposeError, since: Instant) {
        let (local, refusal) = match e {
            ProposeError::NotLeader(_) => {
                let waited = now.saturating_since(since);
                (WriteError::NoLeader { waited }, ForwardRefusal::NotLeader)
            }
            ProposeError::TooLarge { size, max } => {
                (WriteError::TooLarge { size, max }, ForwardRefusal::TooLarge { size, max })
            }
            ProposeError::Busy(_) => (WriteError::Busy, ForwardRefusal::Busy),
        };
        match asker {
            Asker::Local(caller) => self.answer(caller, Answer::Write(Err(local))),
            Asker::Bound(caller, _) => {
                let e = if refusal == ForwardRefusal::NotLeader {
                    WriteError::NotLeader
                } else {
                    local
                };
                self.answer(caller, Answer::Write(Err(e)))
            }
            Asker::Peer(to, id) => self.forward(to, Forward::Proposed { id, result: Err(refusal) }),
        }
    }

    /// The reads to start on the replica now (its `read`, with the lease
    /// this node holds); hand each result to [`Router::read_started`] with
    /// the ticket.
    pub fn take_reads(&mut self) -> Vec<ReadTicket> {
        std::mem::take(&mut self.to_read)
            .into_iter()
            .map(|(asker, since)| ReadTicket { asker, since })
            .collect()
    }

    /// What the replica said to a read [`Router::take_reads`] returned.
    pub fn read_started(
        &mut self,
        now: Instant,
        ticket: ReadTicket,
        result: Result<ReadStart, ReadError>,
    ) {
        let ReadTicket { asker, since } = ticket;
        match result {
            Ok(ReadStart::Now(index)) => self.read_ready(asker, index, since),
            Ok(ReadStart::Pending(id)) => {
                self.reads.insert(id, (asker, since));
            }
            Err(ReadError::NotLeader { .. }) => self.read_refused(now, asker, since),
        }
    }

    /// A read this node could not confirm as leader: asked again of the
    /// next leader, or refused.
    fn read_refused(&mut self, now: Instant, asker: Asker, since: Instant) {
        match asker {
            Asker::Local(caller) => self.repark(now, Parked::Read(caller), since),
            Asker::Bound(caller, _) => {
                self.answer(caller, Answer::Read(Err(ReadFailure::NotLeader)))
            }
            Asker::Peer(to, id) => {
                let result = Err(ForwardRefusal::NotLeader);
                self.forward(to, Forward::ReadIndexReply { id, result })
            }
        }
    }

    fn read_ready(&mut self, asker: Asker, index: Index, since: Instant) {
        match asker {
            Asker::Local(caller) | Asker::Bound(caller, _) => {
                self.wait_applied(index, caller, since, Applying::Read)
            }
            Asker::Peer(to, id) => self.out.read_replies.push((to, id, index)),
        }
    }

    /// A completion of the replica's output.
    pub fn complete(&mut self, now: Instant, c: Completion) {
        match c {
            Completion::Proposal { id, result } => {
                let Some((asker, _)) = self.proposals.remove(&id) else { return };
                let result = result.map_err(|e| match e {
                    ProposalError::NotLeader { .. }
                    | ProposalError::Unknown
                    | ProposalError::StorageFailed => ForwardRefusal::Unknown,
                });
                if result.is_err() {
                    self.out.unknown += 1;
                }
                match asker {
                    Asker::Local(caller) | Asker::Bound(caller, _) => {
                        let answer = result
                            .map(|(position, result)| Committed { position, result })
                            .map_err(|_| {
                                WriteError::Unknown("the leader lost office before the commit")
                            });
                        self.answer(caller, Answer::Write(answer))
                    }
                    Asker::Peer(to, id) => self.forward(to, Forward::Proposed { id, result }),
                }
            }
            Completion::Read { id, result } => {
                let Some((asker, since)) = self.reads.remove(&id) else { return };
                match result {
                    Ok(index) => self.read_ready(asker, index, since),
                    Err(_) => self.read_refused(now, asker, since),
                }
            }
        }
    }

    // ---- Peers ----

    /// A forwarded request or answer from peer `from`.
    pub fn forward_in(&mut self, now: Instant, from: NodeId, frame: Forward) {
        let room = self.held() < self.cfg.max_waiting;
        match frame {
            Forward::Propose { id, command } => {
                if self.route() == Route::Here && room {
                    self.batch.push((Asker::Peer(from, id), command, now));
                } else {
                    let result = Err(ForwardRefusal::NotLeader);
                    self.forward(from, Forward::Proposed { id, result });
                }
            }
            Forward::ReadIndex { id } => {
                if self.route() == Route::Here && room {
                    self.to_read.push((Asker::Peer(from, id), now));
                } else {
                    let result = Err(ForwardRefusal::NotLeader);
                    self.forward(from, Forward::ReadIndexReply { id, result });
                }
            }
            Forward::Ask { id, request } => match (self.route(), self.ready) {
                (Route::Here, Some(token)) => self.out.deliveries.push(Delivery {
                    request,
                    token,
                    from: AskFrom::Peer(from, id),
                }),
                _ => {
                    let result = Err(ForwardRefusal::NotLeader);
                    self.forward(from, Forward::Answered { id, result });
                }
            },
            Forward::Proposed { id, result } => self.proposed(now, from, id, result),
            Forward::ReadIndexReply { id, result } => self.read_index_reply(now, from, id, result),
            Forward::Answered { id, result } => {
                self.answered(now, from, id, result.map(|b| b.into_vec()))
            }
        }
    }

    /// The leader's answer to a write this node forwarded.
    fn proposed(
        &mut self,
        now: Instant,
        from: NodeId,
        id: u64,
        result: Result<(Position, Vec<u8>), ForwardRefusal>,
    ) {
        let Some((Forwarded::Propose(caller, command), since)) =
            self.take_forwarded(from, id, Kind::Propose)
        else {
            return;
        };
        let answer = match result {
            // Answered once this node applied it: the caller's next request
            // here, a stale read included, sees it (as etcd's member answers
            // once it applied). The leader's commit notice usually arrives
            // first on the same connection; one that lags behind is waited
            // for.
            Ok((position, result)) => {
                let done = Applying::Write(Committed { position, result });
                self.wait_applied(position.index, caller, since, done);
                return;
            }
            // Nothing was written (it does not lead yet, or no more): sent
            // again once a leader takes it.
            Err(ForwardRefusal::NotLeader) => {
                return self.repark(now, Parked::Propose(caller, command), since);
            }
            Err(ForwardRefusal::Busy) => Err(WriteError::Busy),
            Err(ForwardRefusal::TooLarge { size, max }) => Err(WriteError::TooLarge { size, max }),
            // `NoService` answers only an ask: from a correct leader, never.
            Err(ForwardRefusal::Unknown | ForwardRefusal::NoService) => {
                self.out.unknown += 1;
                Err(WriteError::Unknown("the leader lost office before the commit"))
            }
        };
        self.answer(caller, Answer::Write(answer));
    }

    /// The leader's answer to a read index this node asked for.
    fn read_index_reply(
        &mut self,
        now: Instant,
        from: NodeId,
        id: u64,
        result: Result<Index, ForwardRefusal>,
    ) {
        let Some((Forwarded::Read(caller), since)) = self.take_forwarded(from, id, Kind::Read)
        else {
            return;
        };
        match result {
            Ok(index) => self.wait_applied(index, caller, since, Applying::Read),
            Err(_) => self.repark(now, Parked::Read(caller), since),
        }
    }

    /// The leader's answer to a question this node forwarded.
    fn answered(
        &mut self,
        now: Instant,
        from: NodeId,
        id: u64,
        result: Result<Vec<u8>, ForwardRefusal>,
    ) {
        let Some((Forwarded::Ask(caller, request), since)) =
            self.take_forwarded(from, id, Kind::Ask)
        else {
            return;
        };
        match result {
            Ok(answer) => self.answer(caller, Answer::Ask(Ok(answer))),
            // Not delivered: it does not lead (yet, or any more).
            Err(ForwardRefusal::NotLeader) => self.repark(now, Parked::Ask(caller, request), since),
            Err(refusal) => self.answer(caller, Answer::Ask(Err(AskError::from_refusal(refusal)))),
        }
    }
    /// The forwarded request `id` with when it began, if `from` is the node
    /// it went to and it is of the kind expected; anything else is dropped
    /// (and counted).
    fn take_forwarded(
        &mut self,
        from: NodeId,
        id: u64,
        kind: Kind,
    ) -> Option<(Forwarded, Instant)> {
        let ok = self.forwarded.get(&id).is_some_and(|(to, f, _)| {
            let is = match f {
                Forwarded::Propose(..) => Kind::Propose,
                Forwarded::Read(_) => Kind::Read,
                Forwarded::Ask(..) => Kind::Ask,
            };
            *to == from && is == kind
        });
        if !ok {
            self.out.dropped += 1;
            return None;
        }
        self.forwarded.remove(&id).map(|(_, f, since)| (f, since))
    }

    /// The requests forwarded to `old`, which no longer leads: writes end
    /// unknown (the entry may be in its log), reads and questions are
    /// asked again of the next leader.
    fn leader_gone(&mut self, old: Option<NodeId>) {
        let gone: Vec<u64> = self
            .forwarded
            .iter()
            .filter(|(_, (to, _, _))| Some(*to) == old)
            .map(|(&id, _)| id)
            .collect();
        for id in gone {
            match self.forwarded.remove(&id) {
                Some((_, Forwarded::Propose(caller, _), _)) => {
                    self.out.unknown += 1;
                    let e = WriteError::Unknown(
                        "the leader it was sent to lost office before answering",
                    );
                    self.answer(caller, Answer::Write(Err(e)));
                }
                Some((_, Forwarded::Read(caller), since)) => {
                    self.park(Parked::Read(caller), since, since)
                }
                Some((_, Forwarded::Ask(caller, request), since)) => {
                    self.park(Parked::Ask(caller, request), since, since)
                }
                None => {}
            }
        }
    }

    // ---- Time ----

    /// After every input: answers the reads applied far enough (`applied`:
    /// what this node applied), and routes the requests that waited for a
    /// leader to the one there is now.
    pub fn settle(&mut self, now: Instant, applied: Index) {
        while let Some(entry) = self.applying.first_entry() {
            let index = entry.key().0;
            if index > applied {
                break;
            }
            let (caller, _, what) = entry.remove();
            self.answer(caller, what.answer(index));
        }
        let due_now = self.parked.first_key_value().is_some_and(|((at, _), _)| *at <= now);
        if !due_now || self.route() == Route::Wait {
            return;
        }
        let mut due = Vec::new();
        while let Some(entry) = self.parked.first_entry() {
            if entry.key().0 > now {
                break;
            }
            due.push(entry.remove());
        }
        for (p, since) in due {
            match p {
                Parked::Propose(caller, command) => self.route_write(now, caller, command, since),
                Parked::Read(caller) => self.route_read(now, caller, since),
                Parked::Ask(caller, request) => self.route_ask(now, caller, request, since),
            }
        }
    }

    /// When [`Router::expire`] has something to end, if it holds anything
    /// that can time out.
    pub fn has_deadlines(&self) -> bool {
        !(self.proposals.is_empty()
            && self.reads.is_empty()
            && self.parked.is_empty()
            && self.forwarded.is_empty()
            && self.applying.is_empty())
    }

    /// Ends what waited too long at `now`: parked requests after
    /// [`RouterConfig::no_leader_wait`], the rest after
    /// [`RouterConfig::request_timeout`]. Followers' requests are dropped
    /// silently: the follower times them out on its side.
    pub fn expire(&mut self, now: Instant) {
        let timeout = self.cfg.request_timeout;
        let wait = self.cfg.no_leader_wait;
        let late = |since: Instant, bound: Duration| now.saturating_since(since) >= bound;
        let mut answers = Vec::new();
        for (asker, _) in take_where(&mut self.proposals, |(_, s)| late(*s, timeout)) {
            if let Asker::Local(c) | Asker::Bound(c, _) = asker {
                let e = WriteError::Unknown("no commit within the request timeout");
                answers.push((c, Answer::Write(Err(e))));
            }
        }
        for (asker, _) in take_where(&mut self.reads, |(_, s)| late(*s, timeout)) {
            if let Asker::Local(c) | Asker::Bound(c, _) = asker {
                answers.push((c, Answer::Read(Err(ReadFailure::Timeout(timeout)))));
            }
        }
        for (p, since) in take_where(&mut self.parked, |(_, s)| late(*s, wait)) {
            let waited = now.saturating_since(since);
            answers.push(match p {
                Parked::Propose(c, _) => (c, Answer::Write(Err(WriteError::NoLeader { waited }))),
                Parked::Read(c) => (c, Answer::Read(Err(ReadFailure::NoLeader { waited }))),
                Parked::Ask(c, _) => (c, Answer::Ask(Err(AskError::NoLeader { waited }))),
            });
        }
        for (_, f, _) in take_where(&mut self.forwarded, |(_, _, s)| late(*s, timeout)) {
            answers.push(match f {
                Forwarded::Propose(c, _) => {
                    let e = WriteError::Unknown("the leader did not answer in time");
                    (c, Answer::Write(Err(e)))
                }
                Forwarded::Read(c) => (c, Answer::Read(Err(ReadFailure::Timeout(timeout)))),
                Forwarded::Ask(c, _) => (c, Answer::Ask(Err(AskError::Timeout(timeout)))),
            });
        }
        for (c, _, what) in take_where(&mut self.applying, |(_, s, _)| late(*s, timeout)) {
            answers.push((c, what.late(ReadFailure::Timeout(timeout))));
        }
        self.out.answers.extend(answers);
    }

    /// Ends everything: the node stops. A write that may have been written
    /// ends unknown; the rest were never written and end stopped.
    pub fn stop(&mut self) {
        let stopped_write = |c| (c, Answer::Write(Err(WriteError::Stopped)));
        let mut answers = Vec::new();
        for (asker, _, _) in self.batch.drain(..) {
            if let Asker::Local(c) | Asker::Bound(c, _) = asker {
                answers.push(stopped_write(c));
            }
        }
        for (asker, _) in
            self.proposing.drain(..).chain(std::mem::take(&mut self.proposals).into_values())
        {
            if let Asker::Local(c) | Asker::Bound(c, _) = asker {
                let e = WriteError::Unknown("the node stopped before the commit");
                answers.push((c, Answer::Write(Err(e))));
            }
        }
        for (asker, _) in
            self.to_read.drain(..).chain(std::mem::take(&mut self.reads).into_values())
        {
            if let Asker::Local(c) | Asker::Bound(c, _) = asker {
                answers.push((c, Answer::Read(Err(ReadFailure::Stopped))));
            }
        }
        for (p, _) in std::mem::take(&mut self.parked).into_values() {
            answers.push(match p {
                Parked::Propose(c, _) => stopped_write(c),
                Parked::Read(c) => (c, Answer::Read(Err(ReadFailure::Stopped))),
                Parked::Ask(c, _) => (c, Answer::Ask(Err(AskError::Stopped))),
            });
        }
        for (_, f, _) in std::mem::take(&mut self.forwarded).into_values() {
            answers.push(match f {
                Forwarded::Propose(c, _) => {
                    let e = WriteError::Unknown("the node stopped before the answer");
                    (c, Answer::Write(Err(e)))
                }
                Forwarded::Read(c) => (c, Answer::Read(Err(ReadFailure::Stopped))),
                Forwarded::Ask(c, _) => (c, Answer::Ask(Err(AskError::Stopped))),
            });
        }
        for (c, _, what) in std::mem::take(&mut self.applying).into_values() {
            answers.push((c, what.late(ReadFailure::Stopped)));
        }
        self.out.answers.extend(answers);
    }

    /// What the inputs since the last call made the router do.
    pub fn take_output(&mut self) -> RouterOutput {
        std::mem::take(&mut self.out)
    }
}

/// A read [`Router::take_reads`] asks the driver to start.
#[derive(Debug)]
pub struct ReadTicket {
    asker: Asker,
    since: Instant,
}

/// The kinds of forwarded request, to match an answer with its request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Propose,
    Read,
    Ask,
}
