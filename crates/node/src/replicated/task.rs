//! The log task: the only code that feeds inputs to the replica and carries
//! out its outputs (write and sync the log, then send, then answer).

use super::ask::{AskError, AskReply};
use super::waiters::{
    AskAnswer, Asker, Forwarded, Parked, ReadReply, Waiters, WriteReply, MAX_WAITING,
};
use super::{bump, warn_open, Committed, LogShared, ReadFailure, Request, WriteError, MAX_BATCH};
use crate::driver::{PERSIST_RETRY_MAX, PERSIST_RETRY_MIN};
use crate::error::StartError;
use crate::log_store::{CompactionStats, LogStore};
use crate::shared::Shared;
use crate::status::Leadership;
use crate::sync::lock;
use crate::transport::PeerData;
use crate::wire::{Forward, ForwardRefusal, Frame};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tenure_core::{FencingToken, Instant as CoreInstant, NodeId, Protocol};
use tenure_replica::{
    Completion, LogOp, Output, ProposalError, ProposeError, ReadError, ReadStart, Replica,
    StateMachine,
};
use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, MissedTickBehavior};
use tracing::{error, info, trace, warn};

/// How often the task looks for requests that waited too long, while it
/// holds any.
const EXPIRY_CHECK_INTERVAL: Duration = Duration::from_millis(20);

/// Opens the log in `dir` and builds a replica of `S` from it.
pub(super) fn open<S: StateMachine + Default>(
    node: &Shared,
    dir: &Path,
    compactions: Arc<CompactionStats>,
) -> Result<(Arc<LogStore>, Replica<S>), StartError> {
    let (store, restored, report) = LogStore::open_counted(dir, compactions)?;
    if let Some(bytes) = report.torn_tail {
        warn!(
            node = %node.config.id,
            file = %dir.join("journal").display(),
            bytes,
            "cut a torn write off the end of the log (it was never acknowledged)"
        );
    }
    let c = &node.config;
    let voters = c.peers.iter().map(|&(id, _)| id).collect();
    let cfg = tenure_replica::Config::new(c.id, voters, c.heartbeat_interval);
    let replica = Replica::new(cfg, restored, S::default())
        .map_err(|source| StartError::LogRestore { path: dir.to_path_buf(), source })?;
    Ok((Arc::new(store), replica))
}

/// Where a request of this node's callers goes now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route {
    /// This node leads the log: propose or read here.
    Here,
    /// Forward to the leader.
    Leader(NodeId),
    /// No leader to take it: wait.
    Wait,
}

/// The kinds of forwarded request, to match an answer with its request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Propose,
    Read,
    Ask,
}

/// What woke the log task up.
enum Wake {
    Stop,
    Leadership,
    Request(Request),
    Peer(NodeId, PeerData),
    Timer,
    Reopen,
    Expiry,
}

/// The log task's state.
pub(super) struct LogTask<S> {
    log: Arc<LogShared<S>>,
    store: Arc<LogStore>,
    dir: PathBuf,
    requests: mpsc::Receiver<Request>,
    peers: mpsc::Receiver<(NodeId, PeerData)>,
    leadership: watch::Receiver<Leadership>,
    stop: watch::Receiver<bool>,
    /// The leadership last told to the replica.
    view: (Option<NodeId>, Option<FencingToken>),
    /// The replica leads and takes writes (as of its last output).
    ready: bool,
    w: Waiters,
    /// Commands to propose together, with who asked.
    batch: Vec<(Asker<WriteReply>, Vec<u8>)>,
    /// The log could not be written: when to reopen it, and the backoff.
    rebuild: Option<(Instant, Duration)>,
    /// Read indexes to send to followers: (follower, its request id, index).
    read_replies: Vec<(NodeId, u64, u64)>,
}

impl<S: StateMachine + Default + Send + 'static> LogTask<S> {
    pub(super) fn new(
        log: Arc<LogShared<S>>,
        store: Arc<LogStore>,
        dir: PathBuf,
        requests: mpsc::Receiver<Request>,
        peers: mpsc::Receiver<(NodeId, PeerData)>,
    ) -> Self {
        let leadership = log.node.leadership.subscribe();
        let stop = log.node.stop.subscribe();
        LogTask {
            log,
            store,
            dir,
            requests,
            peers,
            leadership,
            stop,
            view: (None, None),
            ready: false,
            w: Waiters::default(),
            batch: Vec::new(),
            rebuild: None,
            read_replies: Vec::new(),
        }
    }

    fn me(&self) -> NodeId {
        self.log.node.config.id
    }

    fn now(&self) -> CoreInstant {
        self.log.node.clock.now()
    }

    /// Runs until the node stops.
    pub(super) async fn run(mut self) {
        self.on_leadership().await;
        let mut expiry = tokio::time::interval(EXPIRY_CHECK_INTERVAL);
        expiry.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            let deadline = lock(&self.log.replica).poll_timeout();
            let timer = sleep_until_core(&self.log.node, deadline);
            let rebuild_at = self.rebuild.map(|(at, _)| at);
            let pending = !self.w.is_empty();
            let wake = tokio::select! {
                biased;
                _ = self.stop.wait_for(|&s| s) => Wake::Stop,
                Ok(()) = self.leadership.changed() => Wake::Leadership,
                Some(req) = self.requests.recv() => Wake::Request(req),
                Some((from, data)) = self.peers.recv() => Wake::Peer(from, data),
                _ = timer, if rebuild_at.is_none() => Wake::Timer,
                _ = sleep_until_opt(rebuild_at), if rebuild_at.is_some() => Wake::Reopen,
                _ = expiry.tick(), if pending => Wake::Expiry,
            };
            match wake {
                Wake::Stop => break,
                Wake::Leadership => self.on_leadership().await,
                Wake::Request(req) => {
                    self.on_request(req).await;
                    self.drain().await;
                }
                Wake::Peer(from, data) => {
                    self.on_peer(from, data).await;
                    self.drain().await;
                }
                Wake::Timer => self.input(move |r, now| r.handle_timeout(now)).await,
                Wake::Reopen => self.reopen().await,
                Wake::Expiry => self.w.expire(Instant::now(), self.log.no_leader_wait),
            }
            self.flush_batch().await;
            self.settle().await;
        }
        self.close_store().await;
        warn_open(self.w.len() + self.batch.len());
        for (asker, _) in self.batch.drain(..) {
            if let Some(reply) = asker.into_reply() {
                let _ = reply.send(Err(WriteError::Stopped));
            }
        }
        self.w.stop();
    }

    /// Takes what else is queued, up to [`MAX_BATCH`] items, so that the
    /// commands among them are proposed as one write.
    async fn drain(&mut self) {
        for _ in 0..MAX_BATCH {
            if let Ok(req) = self.requests.try_recv() {
                self.on_request(req).await;
            } else if let Ok((from, data)) = self.peers.try_recv() {
                self.on_peer(from, data).await;
            } else {
                return;
            }
        }
    }

    /// After every wake-up: answers reads applied far enough, and sends
    /// requests that waited for a leader to the one there is now.
    async fn settle(&mut self) {
        self.send_read_replies().await;
        let applied = *self.log.applied.borrow();
        self.w.applied(applied);
        if self.w.parked.is_empty() || self.route() == Route::Wait {
            return;
        }
        let now = Instant::now();
        let (due, later): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.w.parked).into_iter().partition(|(_, _, at)| *at <= now);
        self.w.parked = later.into();
        for (p, since, _) in due {
            match p {
                Parked::Propose { command, reply } => self.route_write(command, reply, since),
                Parked::Read { reply } => self.route_read(reply, since).await,
                Parked::Ask { request, reply } => self.route_ask(request, reply, since),
            }
        }
        self.flush_batch().await;
    }

    /// Sends followers their read indexes, each after the commit index (the
    /// follower serves the read once it applied that far; on the same
    /// connection the commit index arrives first).
    async fn send_read_replies(&mut self) {
        if self.read_replies.is_empty() {
            return;
        }
        let replies = std::mem::take(&mut self.read_replies);
        let mut to: Vec<NodeId> = replies.iter().map(|&(n, _, _)| n).collect();
        to.sort();
        to.dedup();
        for n in to {
            self.input(move |r, now| r.update_follower(now, n)).await;
        }
        for (n, id, index) in replies {
            self.send(n, Frame::Forward(Forward::ReadIndexReply { id, result: Ok(index) }));
        }
    }

    fn route(&self) -> Route {
        if self.rebuild.is_some() {
            Route::Wait
        } else if self.ready {
            Route::Here
        } else {
            match self.view.0 {
                Some(l) if l != self.me() => Route::Leader(l),
                _ => Route::Wait,
            }
        }
    }

    // ---- Requests of this node's callers ----

    async fn on_request(&mut self, req: Request) {
        let since = Instant::now();
        if self.w.len() + self.batch.len() >= MAX_WAITING {
            match req {
                Request::Propose { reply, .. } | Request::ProposeAs { reply, .. } => {
                    let _ = reply.send(Err(WriteError::Busy));
                }
                Request::Read { reply } | Request::Confirm { reply, .. } => {
                    let _ = reply.send(Err(ReadFailure::Busy));
                }
                Request::Ask { reply, .. } => {
                    let _ = reply.send(Err(AskError::Busy));
                }
            }
            return;
        }
        match req {
            Request::Propose { command, reply } => self.route_write(command, reply, since),
            Request::ProposeAs { token, command, reply } => {
                if self.route() == Route::Here && self.ready_token() == Some(token) {
                    self.batch.push((Asker::Bound(reply, token), command));
                } else {
                    let _ = reply.send(Err(WriteError::NotLeader));
                }
            }
            Request::Read { reply } => self.route_read(reply, since).await,
            Request::Confirm { token, reply } => {
                if self.route() == Route::Here && self.ready_token() == Some(token) {
                    self.start_read(Asker::Bound(reply, token), since).await;
                } else {
                    let _ = reply.send(Err(ReadFailure::NotLeader));
                }
            }
            Request::Ask { request, reply } => self.route_ask(request, reply, since),
        }
    }

    /// The token this node is the ready leader of, as of the replica's last
    /// output.
    fn ready_token(&self) -> Option<FencingToken> {
        *self.log.ready_leader.borrow()
    }

    /// Records whether the replica is a ready leader, and of which token,
    /// for the router and for [`super::Replicated::ready_leader`].
    fn set_ready(&mut self, token: Option<FencingToken>) {
        self.ready = token.is_some();
        self.log.ready_leader.send_if_modified(|t| std::mem::replace(t, token) != token);
    }

    /// A question for the leader's service: delivered here as the ready
    /// leader, forwarded to the leader, or held until one is known.
    fn route_ask(&mut self, request: Vec<u8>, reply: AskAnswer, since: Instant) {
        match (self.route(), self.ready_token()) {
            (Route::Here, Some(token)) => {
                self.log.asks.deliver(request, token, AskReply::Local(reply))
            }
            (Route::Leader(l), _) => {
                let id = self.w.next_id();
                self.send(l, Frame::Forward(Forward::Ask { id, request: request.clone() }));
                self.w.forwarded.insert(id, (l, Forwarded::Ask(reply, request), since));
                bump(&self.log.counters.forwarded, 1);
            }
            _ => self.w.parked.push_back((Parked::Ask { request, reply }, since, since)),
        }
    }

    fn route_write(&mut self, command: Vec<u8>, reply: WriteReply, since: Instant) {
        match self.route() {
            Route::Here => self.batch.push((Asker::Local(reply), command)),
            Route::Leader(l) => {
                let id = self.w.next_id();
                self.send(l, Frame::Forward(Forward::Propose { id, command: command.clone() }));
                self.w.forwarded.insert(id, (l, Forwarded::Propose(reply, command), since));
                bump(&self.log.counters.forwarded, 1);
            }
            Route::Wait => {
                self.w.parked.push_back((Parked::Propose { command, reply }, since, since))
            }
        }
    }

    async fn route_read(&mut self, reply: ReadReply, since: Instant) {
        match self.route() {
            Route::Here => self.start_read(Asker::Local(reply), since).await,
            Route::Leader(l) => {
                let id = self.w.next_id();
                self.send(l, Frame::Forward(Forward::ReadIndex { id }));
                self.w.forwarded.insert(id, (l, Forwarded::Read(reply), since));
                bump(&self.log.counters.forwarded, 1);
            }
            Route::Wait => self.w.parked.push_back((Parked::Read { reply }, since, since)),
        }
    }

    /// Parks a request the leader sent back (it no longer leads): it is
    /// retried once a heartbeat has passed, so that two nodes that each
    /// think the other leads do not bounce it between them.
    fn repark(&mut self, p: Parked, since: Instant) {
        let retry = Instant::now() + self.log.node.config.heartbeat_interval;
        self.w.parked.push_back((p, since, retry));
    }

    // ---- As leader ----

    /// Proposes the batch as one input: one log write for all of it. If
    /// the replica stopped leading since the batch was routed here, the
    /// batch is routed again (nothing was written).
    async fn flush_batch(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        let mut batch = std::mem::take(&mut self.batch);
        let since = Instant::now();
        let leading = {
            let r = lock(&self.log.replica);
            if r.is_ready_leader() {
                r.status().leading
            } else {
                None
            }
        };
        // Commands bound to another leadership than the one proposing now
        // are refused: nothing of them is written.
        for (asker, _) in
            batch.extract_if(.., |(a, _)| matches!(a, Asker::Bound(_, t) if leading != Some(*t)))
        {
            if let Some(reply) = asker.into_reply() {
                let _ = reply.send(Err(WriteError::NotLeader));
            }
        }
        if leading.is_none() {
            self.set_ready(None);
            for (asker, command) in batch {
                match asker {
                    Asker::Local(reply) => self.route_write(command, reply, since),
                    // Refused above.
                    Asker::Bound(..) => {}
                    Asker::Peer(to, id) => {
                        let result = Err(ForwardRefusal::NotLeader);
                        self.send(to, Frame::Forward(Forward::Proposed { id, result }))
                    }
                }
            }
            return;
        }
        if batch.is_empty() {
            return;
        }
        let (askers, commands): (Vec<_>, Vec<_>) = batch.into_iter().unzip();
        let n = commands.len() as u64;
        let now = self.now();
        let log = self.log.clone();
        let ran = run_input(&self.log, move || {
            let mut r = lock(&log.replica);
            let results = r.propose(now, commands);
            (results, r.take_output())
        });
        // Not run: the runtime is stopping; the askers learn it when dropped.
        let Some((results, out)) = ran.await else { return };
        for (asker, result) in askers.into_iter().zip(results) {
            match result {
                Ok(id) => {
                    self.w.proposals.insert(id, (asker, since));
                }
                Err(e) => self.refuse_write(asker, e, since),
            }
        }
        bump(&self.log.counters.proposed, n);
        self.process(out).await;
    }

    /// Answers a command the replica refused: nothing was written.
    fn refuse_write(&mut self, asker: Asker<WriteReply>, e: ProposeError, since: Instant) {
        let (mut local, refusal) = match e {
            ProposeError::NotLeader(_) => {
                let waited = Instant::now().saturating_duration_since(since);
                (WriteError::NoLeader { waited }, ForwardRefusal::NotLeader)
            }
            ProposeError::TooLarge { size, max } => {
                (WriteError::TooLarge { size, max }, ForwardRefusal::TooLarge { size, max })
            }
            ProposeError::Busy(_) => (WriteError::Busy, ForwardRefusal::Busy),
        };
        if matches!(asker, Asker::Bound(..)) && refusal == ForwardRefusal::NotLeader {
            local = WriteError::NotLeader;
        }
        match asker {
            Asker::Local(reply) | Asker::Bound(reply, _) => {
                let _ = reply.send(Err(local));
            }
            Asker::Peer(to, id) => {
                self.send(to, Frame::Forward(Forward::Proposed { id, result: Err(refusal) }))
            }
        }
    }

    /// Starts a read on this node as leader: at once while the election
    /// lease holds, else after a round of acknowledgements.
    async fn start_read(&mut self, asker: Asker<ReadReply>, since: Instant) {
        let now = self.now();
        let lease = lease_token(&self.log.node);
        let (result, out) = {
            let mut r = lock(&self.log.replica);
            let result = r.read(now, lease);
            (result, r.take_output())
        };
        match (result, asker) {
            (Ok(ReadStart::Now(index)), asker) => self.read_ready(asker, index, since),
            (Ok(ReadStart::Pending(id)), asker) => {
                self.w.reads.insert(id, (asker, since));
            }
            (Err(ReadError::NotLeader { .. }), Asker::Local(reply)) => {
                self.repark(Parked::Read { reply }, since)
            }
            (Err(ReadError::NotLeader { .. }), Asker::Bound(reply, _)) => {
                let _ = reply.send(Err(ReadFailure::NotLeader));
            }
            (Err(ReadError::NotLeader { .. }), Asker::Peer(to, id)) => {
                let result = Err(ForwardRefusal::NotLeader);
                self.send(to, Frame::Forward(Forward::ReadIndexReply { id, result }))
            }
        }
        self.process(out).await;
    }

    fn read_ready(&mut self, asker: Asker<ReadReply>, index: u64, since: Instant) {
        match asker {
            Asker::Local(reply) | Asker::Bound(reply, _) => {
                self.w.applying.push((index, reply, since))
            }
            // Answered in `settle`, after the commit index went out.
            Asker::Peer(to, id) => self.read_replies.push((to, id, index)),
        }
    }

    // ---- Peers ----

    async fn on_peer(&mut self, from: NodeId, data: PeerData) {
        match data {
            PeerData::Replica(msg) => {
                trace!(node = %self.me(), %from, ?msg, "replica message in");
                if self.rebuild.is_none() {
                    self.input(move |r, now| r.handle_message(now, from, msg)).await
                }
            }
            PeerData::Forward(Forward::Propose { id, command }) => {
                if self.route() == Route::Here && self.w.len() < MAX_WAITING {
                    self.batch.push((Asker::Peer(from, id), command));
                } else {
                    let result = Err(ForwardRefusal::NotLeader);
                    self.send(from, Frame::Forward(Forward::Proposed { id, result }));
                }
            }
            PeerData::Forward(Forward::ReadIndex { id }) => {
                if self.route() == Route::Here && self.w.len() < MAX_WAITING {
                    self.start_read(Asker::Peer(from, id), Instant::now()).await;
                } else {
                    let result = Err(ForwardRefusal::NotLeader);
                    self.send(from, Frame::Forward(Forward::ReadIndexReply { id, result }));
                }
            }
            PeerData::Forward(Forward::Ask { id, request }) => {
                let reply = AskReply::Peer { node: self.log.node.clone(), to: from, id };
                match (self.route(), self.ready_token()) {
                    (Route::Here, Some(token)) => self.log.asks.deliver(request, token, reply),
                    _ => reply.send(Err(ForwardRefusal::NotLeader)),
                }
            }
            PeerData::Forward(Forward::Answered { id, result }) => {
                self.answered(from, id, result.map(|b| b.into_vec()))
            }
            PeerData::Forward(Forward::Proposed { id, result }) => self.proposed(from, id, result),
            PeerData::Forward(Forward::ReadIndexReply { id, result }) => {
                self.read_index_reply(from, id, result)
            }
        }
    }

    /// The leader's answer to a write this node forwarded.
    fn proposed(
        &mut self,
        from: NodeId,
        id: u64,
        result: Result<(tenure_replica::Position, Vec<u8>), ForwardRefusal>,
    ) {
        let Some((_, Forwarded::Propose(reply, command), since)) =
            self.take_forwarded(from, id, Kind::Propose)
        else {
            return;
        };
        let answer = match result {
            Ok((position, result)) => Ok(Committed { position, result }),
            Err(ForwardRefusal::NotLeader) => {
                // Nothing was written (it does not lead yet, or no more):
                // send it again once a leader takes it.
                return self.repark(Parked::Propose { command, reply }, since);
            }
            Err(ForwardRefusal::Busy) => Err(WriteError::Busy),
            Err(ForwardRefusal::TooLarge { size, max }) => Err(WriteError::TooLarge { size, max }),
            // `NoService` answers only an ask: from a correct leader, never.
            Err(ForwardRefusal::Unknown | ForwardRefusal::NoService) => {
                bump(&self.log.counters.unknown, 1);
                Err(WriteError::Unknown("the leader lost office before the commit"))
            }
        };
        let _ = reply.send(answer);
    }

    /// The leader's answer to a read index this node asked for.
    fn read_index_reply(&mut self, from: NodeId, id: u64, result: Result<u64, ForwardRefusal>) {
        let Some((_, Forwarded::Read(reply), since)) = self.take_forwarded(from, id, Kind::Read)
        else {
            return;
        };
        match result {
            Ok(index) => self.w.applying.push((index, reply, since)),
            Err(_) => self.repark(Parked::Read { reply }, since),
        }
    }

    /// The leader's answer to an ask this node forwarded.
    fn answered(&mut self, from: NodeId, id: u64, result: Result<Vec<u8>, ForwardRefusal>) {
        let Some((_, Forwarded::Ask(reply, request), since)) =
            self.take_forwarded(from, id, Kind::Ask)
        else {
            return;
        };
        match result {
            Ok(answer) => {
                let _ = reply.send(Ok(answer));
            }
            // Not delivered: it does not lead (yet, or any more).
            Err(ForwardRefusal::NotLeader) => self.repark(Parked::Ask { request, reply }, since),
            Err(refusal) => {
                let _ = reply.send(Err(AskError::from_refusal(refusal)));
            }
        }
    }

    /// The forwarded request `id`, if `from` is the node it went to and it
    /// is of the kind expected; anything else is ignored (and counted).
    fn take_forwarded(
        &mut self,
        from: NodeId,
        id: u64,
        kind: Kind,
    ) -> Option<(NodeId, Forwarded, Instant)> {
        let ok = self.w.forwarded.get(&id).is_some_and(|(to, f, _)| {
            let is = match f {
                Forwarded::Propose(..) => Kind::Propose,
                Forwarded::Read(_) => Kind::Read,
                Forwarded::Ask(..) => Kind::Ask,
            };
            *to == from && is == kind
        });
        if !ok {
            bump(&self.log.node.net.stats.data_dropped, 1);
            return None;
        }
        self.w.forwarded.remove(&id)
    }

    // ---- The elector's leadership ----

    async fn on_leadership(&mut self) {
        let l = self.leadership.borrow_and_update().clone();
        let view = (l.leader, l.leader.and(l.fencing_token));
        if view == self.view {
            return;
        }
        let old = self.view.0;
        self.view = view;
        if old.is_some() && old != view.0 {
            self.leader_gone(old);
        }
        if self.rebuild.is_none() {
            self.input(move |r, now| r.set_leadership(now, view.0, view.1)).await;
        }
    }

    /// The requests forwarded to `old`, which no longer leads: writes end
    /// unknown (the entry may be in its log), reads are asked again.
    fn leader_gone(&mut self, old: Option<NodeId>) {
        let gone: Vec<u64> = self
            .w
            .forwarded
            .iter()
            .filter(|(_, (to, _, _))| Some(*to) == old)
            .map(|(&id, _)| id)
            .collect();
        for id in gone {
            match self.w.forwarded.remove(&id) {
                Some((_, Forwarded::Propose(reply, _), _)) => {
                    bump(&self.log.counters.unknown, 1);
                    let _ = reply.send(Err(WriteError::Unknown(
                        "the leader it was sent to lost office before answering",
                    )));
                }
                Some((_, Forwarded::Read(reply), since)) => {
                    self.w.parked.push_back((Parked::Read { reply }, since, since))
                }
                // Asked again of the next leader (`ask_leader` says so).
                Some((_, Forwarded::Ask(reply, request), since)) => {
                    self.w.parked.push_back((Parked::Ask { request, reply }, since, since))
                }
                None => {}
            }
        }
    }

    // ---- Carrying out outputs ----

    /// Feeds one input to the replica and carries out what it produced.
    async fn input(&mut self, f: impl FnOnce(&mut Replica<S>, CoreInstant) + Send + 'static) {
        let now = self.now();
        let log = self.log.clone();
        let ran = run_input(&self.log, move || {
            let mut r = lock(&log.replica);
            f(&mut r, now);
            r.take_output()
        });
        // Not run: the runtime is stopping.
        let Some(out) = ran.await else { return };
        self.process(out).await;
    }

    /// Write and sync the log first; only then send; then answer.
    async fn process(&mut self, out: Output) {
        let Output { write, messages, applied, completions } = out;
        if !write.is_empty() {
            if let Err(e) = self.write(write).await {
                self.write_failed(&e, completions).await;
                return;
            }
        }
        for (to, msg) in messages {
            self.send(to, Frame::Replica(msg));
        }
        for c in completions {
            self.complete(c);
        }
        let (ready, now_applied) = {
            let r = lock(&self.log.replica);
            let ready = if r.is_ready_leader() { r.status().leading } else { None };
            (ready, r.applied())
        };
        self.set_ready(ready);
        if !applied.is_empty() || *self.log.applied.borrow() != now_applied {
            self.log.applied.send_replace(now_applied);
        }
    }

    async fn write(&self, ops: Vec<LogOp>) -> std::io::Result<()> {
        for op in &ops {
            if let LogOp::Compact { data, .. } | LogOp::InstallSnapshot { data, .. } = op {
                self.log
                    .counters
                    .snapshot_bytes
                    .store(data.len() as u64, std::sync::atomic::Ordering::Relaxed);
            }
        }
        let store = self.store.clone();
        bump(&self.log.counters.writes, 1);
        // fsync blocks: keep it off the async workers. (A compaction among
        // the ops is written in the background, by the store's own thread.)
        tokio::task::spawn_blocking(move || store.write(ops))
            .await
            .unwrap_or_else(|e| Err(std::io::Error::other(e)))
    }

    /// The log could not be written: nothing of the output is sent, the
    /// replica stops, and the log is reopened from disk after a backoff.
    async fn write_failed(&mut self, e: &std::io::Error, completions: Vec<Completion>) {
        bump(&self.log.counters.write_failures, 1);
        error!(
            node = %self.me(),
            dir = %self.dir.display(),
            error = %e,
            retry_in = ?PERSIST_RETRY_MIN,
            "cannot write the replicated log: this node takes no part in it until it can"
        );
        let more = {
            let mut r = lock(&self.log.replica);
            r.handle_persist_failed();
            r.take_output()
        };
        // Commits learnt before the failure stand (a majority holds them).
        for c in completions.into_iter().chain(more.completions) {
            self.complete(c);
        }
        self.set_ready(None);
        self.rebuild = Some((Instant::now() + PERSIST_RETRY_MIN, PERSIST_RETRY_MIN));
    }

    /// Reopens the log after a failed write and rebuilds the replica from it.
    async fn reopen(&mut self) {
        let Some((_, backoff)) = self.rebuild else { return };
        // The old store's compaction ends before the directory is reopened.
        self.close_store().await;
        match open::<S>(&self.log.node, &self.dir, self.log.counters.compactions.clone()) {
            Ok((store, replica)) => {
                info!(node = %self.me(), dir = %self.dir.display(), "the replicated log is writable again: rejoining");
                self.store = store;
                *lock(&self.log.replica) = replica;
                self.rebuild = None;
                let view = self.view;
                self.input(move |r, now| r.set_leadership(now, view.0, view.1)).await;
            }
            Err(e) => {
                let backoff = (backoff * 2).min(PERSIST_RETRY_MAX);
                warn!(node = %self.me(), error = %e, retry_in = ?backoff, "the replicated log still cannot be opened");
                self.rebuild = Some((Instant::now() + backoff, backoff));
            }
        }
    }

    /// Stops the store's compaction thread, once a compaction it is writing
    /// has ended (off the async workers: that may take a while).
    async fn close_store(&self) {
        let store = self.store.clone();
        if let Err(e) = tokio::task::spawn_blocking(move || store.close()).await {
            error!(node = %self.me(), error = %e, "cannot close the replicated log");
        }
    }

    fn complete(&mut self, c: Completion) {
        match c {
            Completion::Proposal { id, result } => {
                let Some((asker, _)) = self.w.proposals.remove(&id) else { return };
                let result = result.map_err(|e| match e {
                    ProposalError::NotLeader { .. }
                    | ProposalError::Unknown
                    | ProposalError::StorageFailed => ForwardRefusal::Unknown,
                });
                if result.is_err() {
                    bump(&self.log.counters.unknown, 1);
                }
                match asker {
                    Asker::Local(reply) | Asker::Bound(reply, _) => {
                        let _ = reply.send(
                            result
                                .map(|(position, result)| Committed { position, result })
                                .map_err(|_| {
                                    WriteError::Unknown("the leader lost office before the commit")
                                }),
                        );
                    }
                    Asker::Peer(to, id) => {
                        self.send(to, Frame::Forward(Forward::Proposed { id, result }))
                    }
                }
            }
            Completion::Read { id, result } => {
                let Some((asker, since)) = self.w.reads.remove(&id) else { return };
                match (result, asker) {
                    (Ok(index), asker) => self.read_ready(asker, index, since),
                    (Err(_), Asker::Local(reply)) => self.repark(Parked::Read { reply }, since),
                    (Err(_), Asker::Bound(reply, _)) => {
                        let _ = reply.send(Err(ReadFailure::NotLeader));
                    }
                    (Err(_), Asker::Peer(to, id)) => {
                        let result = Err(ForwardRefusal::NotLeader);
                        self.send(to, Frame::Forward(Forward::ReadIndexReply { id, result }))
                    }
                }
            }
        }
    }

    fn send(&self, to: NodeId, frame: Frame) {
        trace!(node = %self.me(), %to, ?frame, "replicated-log frame out");
        if let Some(link) = self.log.node.net.link(to) {
            if link.enqueue_data(frame) {
                bump(&self.log.node.net.stats.data_dropped, 1);
            }
        }
    }
}

/// Runs `f`, an input of the replica. One that may take long (the replica
/// says so: it may serialise a snapshot of the whole state, a second or
/// more for a store of hundreds of MiB, or restore one) runs on a blocking
/// thread, so that the transport (pings, election messages) and the HTTP
/// API never wait behind it on the async workers: without that, followers
/// that compacted a 190 MiB store at the same moment went silent for a
/// second and their leader lost its quorum. The others run here (a hop to
/// another thread costs more than they take). `None` if the runtime stopped
/// before it ran `f`.
async fn run_input<S: StateMachine, R: Send + 'static>(
    log: &LogShared<S>,
    f: impl FnOnce() -> R + Send + 'static,
) -> Option<R> {
    if !lock(&log.replica).may_block() {
        return Some(f());
    }
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => Some(r),
        Err(e) => match e.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            Err(_) => None,
        },
    }
}

/// The fencing token of this node's leadership while its election lease
/// holds now (a read may be served at once under it).
pub(super) fn lease_token(node: &Shared) -> Option<FencingToken> {
    let core = lock(&node.core);
    core.is_leader(node.clock.now()).then(|| core.status().fencing_token).flatten()
}

async fn sleep_until_core(shared: &Shared, deadline: CoreInstant) {
    match shared.clock.to_std(deadline) {
        Some(t) => tokio::time::sleep_until(t.into()).await,
        None => std::future::pending().await,
    }
}

async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}
