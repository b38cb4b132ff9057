//! The log task: the only code that feeds inputs to the replica and carries
//! out its outputs (write and sync the log, then send, then answer). Where
//! each request goes (here, to the leader, or held) and what its caller is
//! answered is decided by the sans-IO [`Router`], which the simulator runs
//! too; this task keeps the `select!`, the blocking writes, the sending and
//! the replies.

use super::ask::AskReply;
use super::pipeline::{Pipeline, Release, Written};
use super::replies::{Replies, Reply};
use super::{bump, warn_open, ChangeFailure, LogShared, Request, MAX_BATCH};
use crate::driver::{PERSIST_RETRY_MAX, PERSIST_RETRY_MIN};
use crate::error::StartError;
use crate::log_store::{CompactionStats, LogStore};
use crate::shared::{Command, Shared};
use crate::status::Leadership;
use crate::sync::lock;
use crate::transport::{PeerData, Roster};
use crate::wire::{Forward, Frame};
use rand_core::{OsRng, RngCore};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tenure_core::{Electorate, FencingToken, Instant as CoreInstant, NodeId, Protocol};
use tenure_replica::router::{
    AskFrom, Call, Router, RouterConfig, RouterOutput, EXPIRY_CHECK_INTERVAL,
};
use tenure_replica::{
    Change, Completion, LogOp, Membership, Output, ProposalError, ProposalId, Replica,
    ReplicaMessage, StateMachine,
};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::{Instant, MissedTickBehavior};
use tracing::{error, info, trace, warn};

/// At most one line per this long about writes of the log that keep
/// failing after it was reopened.
const REPEATED_FAILURE_LOG: Duration = Duration::from_secs(10);

/// How many election timeouts a learner added to be promoted must have
/// answered the leader at every heartbeat (counted from its first answers,
/// its catch-up included) before the leader promotes it, once it also holds
/// every entry committed a heartbeat earlier at two heartbeats in a row:
/// the cluster's own measure of a live member (docs/MEMBERSHIP.md says why;
/// Consul's autopilot waits 10 s of health, etcd promotes by hand once a
/// learner holds 90 % of the leader's log).
pub const AUTO_PROMOTE_TIMEOUTS: u32 = 1;

/// How long the address of a new member may take to resolve (a host name).
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(2);

/// Most host names of members remembered once looked up (a cluster has at
/// most 30 members; forgotten all at once beyond).
const MAX_RESOLVED: usize = 64;

/// The answer to a change of members.
type ChangeReply = oneshot::Sender<Result<Membership, ChangeFailure>>;

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
    let mut cfg = tenure_replica::Config::new(c.id, voters, c.heartbeat_interval);
    cfg.directory = Some(node.net.directory);
    cfg.addresses = c.peers.iter().map(|&(id, addr)| (id, addr.to_string())).collect();
    // A learner added to be promoted is, once it has been live for an
    // election timeout and caught up (docs/MEMBERSHIP.md).
    cfg.auto_promote_after = Some(c.election_timeout * AUTO_PROMOTE_TIMEOUTS);
    // A voter that answered the leader within an election timeout is
    // healthy for a change (a loaded machine answers late, not never).
    cfg.healthy_within = c.election_timeout;
    let replica = Replica::new(cfg, restored, S::default())
        .map_err(|source| StartError::LogRestore { path: dir.to_path_buf(), source })?;
    Ok((Arc::new(store), replica))
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
    Written(Written),
}

/// What a node logs when the configuration its log holds does not name
/// it: it serves no one.
const NOT_A_MEMBER: &str = "this node is not a member of the cluster's configuration (removed, \
     or not added yet): it neither votes nor receives the log; stop it, or add it again \
     (tenure member add)";

/// The log task's state.
pub(super) struct LogTask<S> {
    log: Arc<LogShared<S>>,
    store: Arc<LogStore>,
    dir: PathBuf,
    requests: mpsc::Receiver<Request>,
    peers: mpsc::Receiver<(NodeId, PeerData)>,
    leadership: watch::Receiver<Leadership>,
    stop: watch::Receiver<bool>,
    router: Router,
    replies: Replies,
    /// The log could not be written: when to reopen it, and the backoff.
    rebuild: Option<(Instant, Duration)>,
    /// When the log was last reopened after a failed write: a write that
    /// fails again within [`PERSIST_RETRY_MAX`] of it is the same failure
    /// (a full disk reopens fine and fails at its first append), counted
    /// and logged at most once per [`REPEATED_FAILURE_LOG`].
    reopened: Option<Instant>,
    /// Such repeated failures not logged yet, and when the last line about
    /// them was.
    repeated_failures: (u64, Option<Instant>),
    /// Changes of members asked of this node, not taken yet.
    change_requests: Vec<(Change, ChangeReply)>,
    /// Changes of members proposed here, waiting for their commit.
    changes: BTreeMap<ProposalId, ChangeReply>,
    /// Members' host names already looked up (at most [`MAX_RESOLVED`]).
    resolved: BTreeMap<String, SocketAddr>,
    /// Log writes under way, and the outputs that wait for them.
    pipeline: Pipeline,
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
        let c = &log.node.config;
        let mut cfg = RouterConfig::new(c.id, c.heartbeat_interval, c.election_timeout);
        // Numbers of forwarded requests no earlier life of this node used.
        cfg.first_id = OsRng.next_u64();
        cfg.no_leader_wait = log.no_leader_wait;
        LogTask {
            log,
            store,
            dir,
            requests,
            peers,
            leadership,
            stop,
            router: Router::new(cfg),
            replies: Replies::default(),
            rebuild: None,
            reopened: None,
            repeated_failures: (0, None),
            change_requests: Vec::new(),
            changes: BTreeMap::new(),
            resolved: BTreeMap::new(),
            pipeline: Pipeline::default(),
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
        // Before anything else: the elector counts by the log's
        // configuration (its driver waits for it).
        self.announce(None, true).await;
        self.warn_if_removed_by_own_log();
        self.warn_if_peers_unused();
        self.on_leadership().await;
        let mut expiry = tokio::time::interval(EXPIRY_CHECK_INTERVAL);
        expiry.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            let deadline = lock(&self.log.replica).poll_timeout();
            let timer = sleep_until_core(&self.log.node, deadline);
            let rebuild_at = self.rebuild.map(|(at, _)| at);
            let pending = self.router.has_deadlines();
            // Too many outputs wait for the disk: it sets the pace.
            let open = !self.pipeline.is_full();
            let wake = tokio::select! {
                biased;
                _ = self.stop.wait_for(|&s| s) => Wake::Stop,
                written = self.pipeline.wait() => Wake::Written(written),
                Ok(()) = self.leadership.changed() => Wake::Leadership,
                Some(req) = self.requests.recv(), if open => Wake::Request(req),
                Some((from, data)) = self.peers.recv(), if open => Wake::Peer(from, data),
                _ = timer, if rebuild_at.is_none() => Wake::Timer,
                _ = sleep_until_opt(rebuild_at), if rebuild_at.is_some() => Wake::Reopen,
                _ = expiry.tick(), if pending => Wake::Expiry,
            };
            match wake {
                Wake::Stop => break,
                Wake::Leadership => self.on_leadership().await,
                Wake::Request(req) => {
                    self.on_request(req);
                    self.drain().await;
                }
                Wake::Peer(from, data) => {
                    let mut held = Vec::new();
                    self.on_peer_batched(from, data, &mut held).await;
                    self.drain_into(held).await;
                }
                Wake::Timer => self.input(move |r, now| r.handle_timeout(now)).await,
                Wake::Reopen => self.reopen().await,
                Wake::Expiry => {
                    let now = self.now();
                    self.router.expire(now);
                }
                Wake::Written(written) => self.on_written(written).await,
            }
            self.settle().await;
        }
        // The store closes once no write of it is under way.
        while self.pipeline.is_writing() {
            let _ = self.pipeline.wait().await;
        }
        self.close_store().await;
        for (_, reply) in std::mem::take(&mut self.changes) {
            let _ = reply.send(Err(ChangeFailure::Unknown));
        }
        warn_open(self.replies.len());
        self.router.stop();
        let out = self.router.take_output();
        self.carry_out(out).await;
    }

    /// Takes what else is queued, up to [`MAX_BATCH`] items, so that the
    /// commands among them are proposed as one write.
    async fn drain(&mut self) {
        self.drain_into(Vec::new()).await;
    }

    /// [`Self::drain`], after the replica messages in `held`: the replica
    /// messages queued one after another are handed to the replica as one
    /// input, so that what they append is written with one `fdatasync` and
    /// their answers leave together (a follower that catches up gets
    /// several batches at once), at most [`MAX_BATCH`] items or
    /// [`MAX_HELD_BYTES`] of them.
    async fn drain_into(&mut self, mut held: Vec<(NodeId, ReplicaMessage)>) {
        for _ in 0..MAX_BATCH {
            if held_bytes(&held) >= MAX_HELD_BYTES {
                break;
            }
            if let Ok(req) = self.requests.try_recv() {
                self.on_request(req);
            } else if let Ok((from, data)) = self.peers.try_recv() {
                self.on_peer_batched(from, data, &mut held).await;
            } else {
                break;
            }
        }
        self.replica_messages(held).await;
    }

    /// Holds a replica message for the batch; anything else is handled
    /// now, after the messages held before it.
    async fn on_peer_batched(
        &mut self,
        from: NodeId,
        data: PeerData,
        held: &mut Vec<(NodeId, ReplicaMessage)>,
    ) {
        match data {
            PeerData::Replica(msg) => {
                trace!(node = %self.me(), %from, ?msg, "replica message in");
                if self.rebuild.is_none() {
                    held.push((from, msg));
                }
            }
            other => {
                self.replica_messages(std::mem::take(held)).await;
                self.on_peer(from, other).await;
            }
        }
    }

    /// Hands `msgs` to the replica as one input (off the async workers when
    /// there are several: together they may append enough to compact, or
    /// hold a whole snapshot).
    async fn replica_messages(&mut self, msgs: Vec<(NodeId, ReplicaMessage)>) {
        if msgs.is_empty() || self.rebuild.is_some() {
            return;
        }
        let block = msgs.len() > 1;
        self.input_with(block, move |r, now| {
            for (from, msg) in msgs {
                r.handle_message(now, from, msg);
            }
        })
        .await;
    }

    /// After every wake-up, the router's contract: propose the batch, start
    /// the reads, route what waited for a leader, answer the reads applied
    /// far enough, and carry out what the router decided.
    async fn settle(&mut self) {
        // Twice: the requests that waited for a leader, routed by the first
        // pass's `settle`, are proposed or started by the second.
        for (change, reply) in std::mem::take(&mut self.change_requests) {
            self.change(change, reply).await;
        }
        for _ in 0..2 {
            self.flush_batch().await;
            self.start_reads().await;
            let applied = *self.log.applied.borrow();
            let now = self.now();
            self.router.settle(now, applied);
        }
        let out = self.router.take_output();
        self.carry_out(out).await;
    }

    /// Sends the router's frames and answers: followers' read indexes each
    /// after the commit index (the follower serves the read once it applied
    /// that far; on the same connection the commit index arrives first).
    async fn carry_out(&mut self, out: RouterOutput) {
        let RouterOutput {
            answers,
            forwards,
            read_replies,
            deliveries,
            forwarded,
            unknown,
            dropped,
        } = out;
        bump(&self.log.counters.forwarded, forwarded);
        bump(&self.log.counters.unknown, unknown);
        bump(&self.log.node.net.stats.data_dropped, dropped);
        if !read_replies.is_empty() {
            let mut to: Vec<NodeId> = read_replies.iter().map(|&(n, _, _)| n).collect();
            to.sort();
            to.dedup();
            for n in to {
                self.input(move |r, now| r.update_follower(now, n)).await;
            }
            for (n, id, index) in read_replies {
                self.send(n, Frame::Forward(Forward::ReadIndexReply { id, result: Ok(index) }));
            }
        }
        for (to, frame) in forwards {
            self.send(to, Frame::Forward(frame));
        }
        for (caller, answer) in answers {
            self.replies.answer(caller, answer);
        }
        for d in deliveries {
            let reply = match d.from {
                AskFrom::Local(caller) => match self.replies.take_ask(caller) {
                    Some(reply) => reply,
                    None => continue,
                },
                AskFrom::Peer(to, id) => AskReply::Peer { node: self.log.node.clone(), to, id },
            };
            self.log.asks.deliver(d.request, d.token, reply);
        }
    }

    // ---- Requests of this node's callers ----

    fn on_request(&mut self, req: Request) {
        let (call, reply) = match req {
            Request::Propose { command, reply } => (Call::Propose(command), Reply::Write(reply)),
            Request::ProposeTogether { commands } => {
                for (command, reply) in commands {
                    self.on_request(Request::Propose { command, reply });
                }
                return;
            }
            Request::ProposeAs { token, command, reply } => {
                (Call::ProposeAs(token, command), Reply::Write(reply))
            }
            Request::Read { reply } => (Call::Read, Reply::Read(reply)),
            Request::Confirm { token, reply } => (Call::Confirm(token), Reply::Read(reply)),
            Request::Ask { request, reply } => (Call::Ask(request), Reply::Ask(reply)),
            Request::Change { change, reply } => {
                // Taken by `settle`, after this wake-up's other requests.
                self.change_requests.push((change, reply));
                return;
            }
        };
        let caller = self.replies.add(reply);
        let now = self.now();
        self.router.call(now, caller, call);
    }

    /// Records whether the replica is a ready leader, and of which token,
    /// for the router and for [`super::Replicated::ready_leader`].
    fn set_ready(&mut self, token: Option<FencingToken>) {
        self.router.set_ready(token);
        self.log.ready_leader.send_if_modified(|t| std::mem::replace(t, token) != token);
    }

    // ---- As leader ----

    /// Proposes a change of members (the ready leader only, one at a time:
    /// [`Replica::propose_change`]); its caller is answered once it commits.
    async fn change(&mut self, change: Change, reply: ChangeReply) {
        if self.rebuild.is_some() {
            let _ =
                reply.send(Err(ChangeFailure::Refused(tenure_replica::ChangeError::NotLeader {
                    leader: None,
                })));
            return;
        }
        let now = self.now();
        // The members' data directories as the handshakes showed them: the
        // configuration names them (a wiped node is then refused as the
        // member it was).
        let known: Vec<(NodeId, tenure_core::DirectoryId)> =
            self.log.node.net.links().iter().filter_map(|l| Some((l.id, l.directory()?))).collect();
        let (result, out) = {
            let mut r = lock(&self.log.replica);
            r.note_directories(known);
            let result = r.propose_change(now, &change);
            (result, r.take_output())
        };
        match result {
            Ok(id) => {
                info!(node = %self.me(), %change, "proposed a change of members");
                self.changes.insert(id, reply);
            }
            Err(e) => {
                info!(node = %self.me(), %change, error = %e, "a change of members was refused");
                let _ = reply.send(Err(ChangeFailure::Refused(e)));
            }
        }
        self.process(out).await;
    }

    /// At start, a node whose log ends with its own removal (it ran through
    /// it: the leader that committed it, or a voter that applied it) says
    /// so, as [`LogTask::announce`] does for a node the configuration does
    /// not name: the departing voter of the last change is still counted a
    /// peer there, for a leader committing its own removal, which a node
    /// that just started is not.
    fn warn_if_removed_by_own_log(&self) {
        let r = lock(&self.log.replica);
        let (electorate, at) = (r.electorate(), r.membership().at);
        let me = self.me();
        if at != tenure_replica::Position::ZERO
            && !electorate.is_member(me)
            && electorate.departing.contains(&me)
        {
            warn!(node = %me, configuration = %electorate, "{NOT_A_MEMBER}");
        }
    }

    /// At start, a node whose log holds a configuration (the members are
    /// the log's since its first change) says so when its bootstrap list
    /// (`--peers`, `--single-node`) names other voters: that list is not
    /// used, and an operator who edited it to change the members must use
    /// `tenure member` instead. A joining node's list is only where to
    /// reach the cluster.
    fn warn_if_peers_unused(&self) {
        let config = &self.log.node.config;
        let r = lock(&self.log.replica);
        let membership = r.membership();
        if config.joining || membership.at == tenure_replica::Position::ZERO {
            return;
        }
        let mut listed: Vec<NodeId> = config.peers.iter().map(|&(id, _)| id).collect();
        listed.sort_unstable();
        let mut voters: Vec<NodeId> = membership.members.voters.iter().map(|m| m.id).collect();
        voters.sort_unstable();
        if listed != voters {
            let show = |ids: &[NodeId]| {
                ids.iter().map(|id| id.0.to_string()).collect::<Vec<_>>().join(",")
            };
            // Info, not a warning: the first nodes of a cluster that grew
            // keep their first list, rightly, and say this at every start.
            info!(
                node = %self.me(),
                "--peers (peers in the config file) lists voters {{{}}}, but this node's log \
                 holds configuration {:?} with voters {{{}}}: after the first start the log \
                 decides the members and the list is not used; change them with tenure member \
                 add|remove|replace (docs/MEMBERSHIP.md)",
                show(&listed),
                membership.at,
                show(&voters)
            );
        }
    }

    /// Gives the driver the configuration the log holds now (its elector
    /// counts by it; with `members_changed`, its transport dials the
    /// members), and waits until it took it: called before the output that
    /// changed it sends anything.
    async fn announce(&mut self, electorate: Option<Electorate>, members_changed: bool) {
        let (electorate, membership, previous) = {
            let r = lock(&self.log.replica);
            let e = electorate.unwrap_or_else(|| r.electorate());
            (e, r.membership().clone(), r.previous_membership().cloned())
        };
        let me = self.me();
        let gone = !electorate.is_member(me) && !electorate.departing.contains(&me);
        if gone && membership.at != tenure_replica::Position::ZERO && members_changed {
            // Once per change that leaves this node out: it serves no one now.
            warn!(node = %me, configuration = %electorate, "{NOT_A_MEMBER}");
        }
        let peers = if members_changed {
            // A departing voter stays a peer until the next change (it may
            // be the leader committing its own removal); a departing
            // learner does not: its links close, and when it dials again
            // the members tell it it was removed (it never received the
            // change, which the leader no longer sends it).
            let departing = previous.iter().flat_map(|p| {
                p.members
                    .all()
                    .filter(|m| electorate.departing.contains(&m.id) && p.members.is_voter(m.id))
            });
            let members: Vec<(NodeId, String)> = membership
                .members
                .all()
                .chain(departing)
                .filter(|m| m.id != me)
                .map(|m| (m.id, m.address.clone()))
                .collect();
            let mut peers = Vec::new();
            for (id, address) in members {
                match self.resolve(id, &address).await {
                    Some(addr) => peers.push((id, addr)),
                    None => warn!(
                        node = %me,
                        peer = %id,
                        %address,
                        "cannot resolve a member's address: it is not dialled until the next \
                         change of members or restart"
                    ),
                }
            }
            Some(peers)
        } else {
            None
        };
        let roster = Roster {
            config: electorate.id,
            voters: electorate.voters.clone(),
            learners: electorate.learners.clone(),
            directories: membership
                .members
                .all()
                .filter_map(|m| Some((m.id, m.directory?)))
                .collect(),
        };
        let (reply, done) = oneshot::channel();
        let cmd = Command::Electorate { electorate, roster, peers, reply };
        if self.log.node.commands.send(cmd).await.is_ok() {
            // The driver stopped if this fails: nothing more to wait for.
            let _ = done.await;
        }
    }

    /// Where to dial member `id`: `address` (an IP and port, or a host name
    /// and port, looked up once and remembered), or, for a member of the
    /// bootstrap list (no address in the log), the node's own `--peers`
    /// entry.
    async fn resolve(&mut self, id: NodeId, address: &str) -> Option<SocketAddr> {
        if address.is_empty() {
            return self.log.node.config.peer_addr(id);
        }
        if let Ok(addr) = address.parse() {
            return Some(addr);
        }
        if let Some(&addr) = self.resolved.get(address) {
            return Some(addr);
        }
        let lookup = tokio::net::lookup_host(address);
        let found = match tokio::time::timeout(RESOLVE_TIMEOUT, lookup).await {
            Ok(Ok(mut addrs)) => addrs.next(),
            _ => None,
        };
        if let Some(addr) = found {
            if self.resolved.len() >= MAX_RESOLVED {
                self.resolved.clear();
            }
            self.resolved.insert(address.to_string(), addr);
        }
        found
    }

    /// Proposes the router's batch as one input: one log write for all of
    /// it.
    async fn flush_batch(&mut self) {
        if !self.router.has_batch() {
            return;
        }
        let leading = {
            let r = lock(&self.log.replica);
            if r.is_ready_leader() {
                r.status().leading
            } else {
                None
            }
        };
        self.set_ready(leading);
        let now = self.now();
        let commands = self.router.take_batch(now, leading);
        if commands.is_empty() {
            return;
        }
        let n = commands.len() as u64;
        let log = self.log.clone();
        let ran = run_input(&self.log, false, move || {
            let mut r = lock(&log.replica);
            let results = r.propose(now, commands);
            (results, r.take_output())
        });
        // Not run: the runtime is stopping; the callers learn it when the
        // router stops.
        let Some((results, out)) = ran.await else { return };
        self.router.batch_proposed(now, results);
        bump(&self.log.counters.proposed, n);
        self.process(out).await;
    }

    /// Starts the reads the router routed here: at once while the election
    /// lease holds, else after a round of acknowledgements.
    async fn start_reads(&mut self) {
        let tickets = self.router.take_reads();
        if tickets.is_empty() {
            return;
        }
        let now = self.now();
        let lease = lease_token(&self.log.node);
        let out = {
            let mut r = lock(&self.log.replica);
            for ticket in tickets {
                let result = r.read(now, lease);
                self.router.read_started(now, ticket, result);
            }
            r.take_output()
        };
        self.process(out).await;
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
            PeerData::Forward(frame) => {
                let now = self.now();
                self.router.forward_in(now, from, frame);
            }
        }
    }

    // ---- The elector's leadership ----

    async fn on_leadership(&mut self) {
        let l = self.leadership.borrow_and_update().clone();
        let view = (l.leader, l.leader.and(l.fencing_token));
        if view == self.router.view() {
            return;
        }
        self.router.set_view(view.0, view.1);
        if self.rebuild.is_none() {
            self.input(move |r, now| r.set_leadership(now, view.0, view.1)).await;
        }
    }

    // ---- Carrying out outputs ----

    /// Feeds one input to the replica and carries out what it produced.
    async fn input(&mut self, f: impl FnOnce(&mut Replica<S>, CoreInstant) + Send + 'static) {
        self.input_with(false, f).await;
    }

    /// [`Self::input`], on a blocking thread if `block` (or if the replica
    /// says it may take long).
    async fn input_with(
        &mut self,
        block: bool,
        f: impl FnOnce(&mut Replica<S>, CoreInstant) + Send + 'static,
    ) {
        let now = self.now();
        let log = self.log.clone();
        let ran = run_input(&self.log, block, move || {
            let mut r = lock(&log.replica);
            f(&mut r, now);
            r.take_output()
        });
        // Not run: the runtime is stopping.
        let Some(out) = ran.await else { return };
        self.process(out).await;
    }

    /// Carries out an output: the write goes to the pipeline (it syncs while
    /// the task goes on); once it and every earlier write are durable, the
    /// elector gets a configuration the output changed, and only then its
    /// messages leave ([`Self::release`]). A leader's new entries leave at
    /// once, and the answers too (a commit rests on a majority's disks, a
    /// read on a majority's answers, neither on this node's write).
    async fn process(&mut self, out: Output) {
        let Output {
            early,
            write,
            messages,
            applied,
            completions,
            membership,
            electorate,
            give_up,
        } = out;
        if let Some(token) = give_up {
            self.give_up(token).await;
        }
        // A leader's new entries leave before its own write: the followers
        // write them while it does.
        for (to, msg) in early {
            self.send(to, Frame::Replica(msg));
        }
        self.note_write(&write);
        let release = Release { membership, electorate, messages };
        let syncs = &self.log.counters.writes;
        if let Some(release) = self.pipeline.push(write, release, &self.store, syncs) {
            self.release(release).await;
        }
        self.complete(completions);
        self.after_output(!applied.is_empty());
    }

    /// A write of the pipeline ended: the outputs that waited for it go, and
    /// the replica counts it; or it failed.
    async fn on_written(&mut self, written: Written) {
        let Written { outputs, result, released } = written;
        if let Err(e) = result {
            // Nothing that waited for the disk leaves (the pipeline
            // dropped it).
            self.write_failed(&e).await;
            return;
        }
        // The next writes sync while these outputs go.
        self.pipeline.start(&self.store, &self.log.counters.writes);
        for release in released {
            self.release(release).await;
        }
        self.input(move |r, now| r.handle_persisted(now, outputs)).await;
    }

    /// What waited for an output's write (and every earlier one): the
    /// configuration it changed, to the elector, then its messages.
    async fn release(&mut self, release: Release) {
        let Release { membership, electorate, messages } = release;
        if let Some(m) = &membership {
            info!(node = %self.me(), at = ?m.at, members = %m.members, "the log holds a new configuration");
        }
        if electorate.is_some() || membership.is_some() {
            self.announce(electorate, membership.is_some()).await;
        }
        for (to, msg) in messages {
            self.send(to, Frame::Replica(msg));
        }
    }

    /// After any output: whether this node is the ready leader, and how far
    /// it applied.
    fn after_output(&mut self, applied: bool) {
        let (ready, now_applied) = {
            let r = lock(&self.log.replica);
            let ready = if r.is_ready_leader() { r.status().leading } else { None };
            (ready, r.applied())
        };
        self.set_ready(ready);
        if applied || *self.log.applied.borrow() != now_applied {
            self.log.applied.send_replace(now_applied);
        }
    }

    /// Hands the replica's completions to the router, and answers the
    /// changes of members among them.
    fn complete(&mut self, completions: Vec<Completion>) {
        let now = self.now();
        for c in completions {
            if let Completion::Proposal { id, result } = &c {
                if let Some(reply) = self.changes.remove(id) {
                    let answer = match result {
                        Ok(_) => Ok(lock(&self.log.replica).membership().clone()),
                        Err(ProposalError::Unknown) => Err(ChangeFailure::Unknown),
                        Err(e) => Err(ChangeFailure::Failed(e.to_string())),
                    };
                    let _ = reply.send(answer);
                    continue;
                }
            }
            self.router.complete(now, c);
        }
    }

    /// Records the size of a snapshot among `ops`.
    fn note_write(&self, ops: &[LogOp]) {
        for op in ops {
            if let LogOp::Compact { data, .. } | LogOp::InstallSnapshot { data, .. } = op {
                self.log
                    .counters
                    .snapshot_bytes
                    .store(data.len() as u64, std::sync::atomic::Ordering::Relaxed);
            }
        }
    }

    /// The log could not be written: nothing that waited for the write is
    /// sent, the replica stops, and the log is reopened from disk after a
    /// backoff.
    async fn write_failed(&mut self, e: &std::io::Error) {
        bump(&self.log.counters.write_failures, 1);
        let again = self.reopened.is_some_and(|at| at.elapsed() < PERSIST_RETRY_MAX);
        if again {
            let me = self.me();
            let (count, logged) = &mut self.repeated_failures;
            *count += 1;
            if logged.is_none_or(|at| at.elapsed() >= REPEATED_FAILURE_LOG) {
                warn!(node = %me, dir = %self.dir.display(), error = %e, failures = *count, "the replicated log still cannot be written (it is reopened every {PERSIST_RETRY_MIN:?})");
                *count = 0;
                *logged = Some(Instant::now());
            }
        } else {
            self.repeated_failures = (0, None);
            error!(
                node = %self.me(),
                dir = %self.dir.display(),
                error = %e,
                retry_in = ?PERSIST_RETRY_MIN,
                "cannot write the replicated log: this node takes no part in it until it can"
            );
        }
        let more = {
            let mut r = lock(&self.log.replica);
            r.handle_persist_failed();
            r.take_output()
        };
        if let Some(token) = more.give_up {
            self.give_up(token).await;
        }
        // Commits learnt before the failure stand (a majority holds them).
        self.complete(more.completions);
        self.set_ready(None);
        self.router.set_rebuilding(true);
        self.rebuild = Some((Instant::now() + PERSIST_RETRY_MIN, PERSIST_RETRY_MIN));
    }

    /// The log will not lead under `token` (a write failed under it, or the
    /// replica's fence refused it): the elector must not hold on to it.
    async fn give_up(&self, token: FencingToken) {
        let _ = self.log.node.commands.send(Command::GiveUp { token }).await;
    }

    /// Reopens the log after a failed write and rebuilds the replica from it.
    async fn reopen(&mut self) {
        let Some((_, backoff)) = self.rebuild else { return };
        // The old store's compaction ends before the directory is reopened.
        self.close_store().await;
        match open::<S>(&self.log.node, &self.dir, self.log.counters.compactions.clone()) {
            Ok((store, mut replica)) => {
                self.store = store;
                {
                    let mut old = lock(&self.log.replica);
                    replica.set_lead_fence(old.lead_fence());
                    *old = replica;
                }
                self.rebuild = None;
                if self.reopened.is_none_or(|at| at.elapsed() >= PERSIST_RETRY_MAX) {
                    info!(node = %self.me(), dir = %self.dir.display(), "the replicated log is writable again: rejoining");
                }
                self.reopened = Some(Instant::now());
                self.router.set_rebuilding(false);
                self.announce(None, true).await;
                let view = self.router.view();
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
    block: bool,
    f: impl FnOnce() -> R + Send + 'static,
) -> Option<R> {
    if !block && !lock(&log.replica).may_block() {
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

/// Most bytes of replica messages handed to the replica as one input (a
/// few snapshot pieces, or many batches of entries).
const MAX_HELD_BYTES: usize = 16 * 1024 * 1024;

/// About how many bytes the replica messages `held` carry.
fn held_bytes(held: &[(NodeId, ReplicaMessage)]) -> usize {
    held.iter().map(|(_, m)| m.payload_bytes()).sum()
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
