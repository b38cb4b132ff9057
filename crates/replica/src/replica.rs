//! The replica: a sans-IO state machine that replicates the leader's log and
//! applies committed entries. `docs/REPLICATION.md` states the rules and why
//! no committed entry is lost.

use crate::entry::{Entry, Index, Payload, Position};
use crate::log::Log;
use crate::machine::StateMachine;
use crate::membership::{Change, ChangeError, Identity, Members, Membership};
use crate::message::{ReplicaMessage, SnapshotChunk};
use crate::output::{Completion, LogOp, Output, ProposalError, ProposalId, ReadError, ReadId};
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;
use tenure_core::{DirectoryId, Electorate, FencingToken, Instant, NodeId};

/// Settings of one node's replica.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Config {
    /// This node.
    pub id: NodeId,
    /// This node's data directory's identity, when known: an entry of this
    /// node's id that names another directory does not name this node
    /// ([`crate::Identity`]).
    pub directory: Option<DirectoryId>,
    /// The bootstrap voters: the configuration until the log (or its
    /// snapshot) holds one of its own ([`crate::Membership`]). Every node of a
    /// cluster bootstraps with the same list.
    pub voters: Vec<NodeId>,
    /// Where this node reaches the members of the bootstrap list (`host:port`,
    /// its `--peers`): a configuration entry this node writes as leader names
    /// them with these addresses (the bootstrap list itself has none), so
    /// that a node that joins later learns where every member is from the
    /// log.
    pub addresses: Vec<(NodeId, String)>,
    /// A learner added to be promoted by the leader ([`crate::Member`]'s
    /// `auto_promote`) is, once it has answered the leader at every
    /// heartbeat for this long and held every entry committed a heartbeat
    /// earlier at two heartbeats in a row (`None`: never, every promotion
    /// is an operator's). See `docs/MEMBERSHIP.md`.
    pub auto_promote_after: Option<Duration>,
    /// A voter counts as healthy for a change of members (etcd's strict
    /// reconfiguration check) if it answered the leader within this long;
    /// [`HEALTHY_WITHIN`] heartbeats by default.
    pub healthy_within: Duration,
    /// How often the leader repeats what is unanswered (synchronisation,
    /// fetches, appends) and confirms its followers: the elector's heartbeat.
    pub heartbeat_interval: Duration,
    /// Most entries in one `Append`.
    pub max_append_entries: usize,
    /// Most command bytes in one `Append` (one entry is always sent).
    pub max_append_bytes: usize,
    /// Most entries the leader holds written but not yet committed; more
    /// proposals are refused until some commit (back-pressure).
    pub max_uncommitted: usize,
    /// Most reads waiting for a confirmation round on the leader.
    pub max_pending_reads: usize,
    /// The largest command accepted.
    pub max_command_bytes: usize,
    /// Take a snapshot and compact once this many entries were applied
    /// beyond the last snapshot...
    pub snapshot_every: u64,
    /// ...or once the entries held carry this many bytes of commands (and
    /// some were applied): memory and the journal stay bounded in bytes too.
    pub snapshot_every_bytes: u64,
    /// Bytes of a snapshot per message (and the largest piece accepted):
    /// a piece still leaves the connection it shares with the heartbeats
    /// within milliseconds.
    pub snapshot_chunk_bytes: usize,
    /// Most bytes the leader has sent a follower and not heard acknowledged
    /// while it catches up (entries, or snapshot pieces): the next batch
    /// goes out while earlier ones are on the wire and being written, so a
    /// follower far behind is not held to one batch per round trip and
    /// fsync (a 64 MiB snapshot in 2 MiB pieces took 32 round trips, 0.6 s
    /// of a replacement in `tenure bench membership`), and what waits in a
    /// peer's send queue stays bounded in bytes. At least one batch or piece
    /// is always in flight.
    pub max_in_flight_bytes: usize,
    /// The largest snapshot accepted from another node.
    pub max_snapshot_bytes: u64,
    /// Whether a leader tells followers of a new commit index at once, in
    /// an `Append` without entries, instead of with the next entries or
    /// heartbeat (on by default; see `notify_commit`).
    pub commit_notices: bool,
    /// A planted bug, for the model checker only (it must find what the
    /// bug breaks): a leader may change members before it has committed an
    /// entry of its own leadership. Never set elsewhere.
    pub planted_bug_ungated_changes: bool,
    /// A planted bug, for the simulator only: the replica keeps no fence
    /// ([`Replica::lead_fence`]), so a leader whose write failed, or that
    /// restarted, may lead under its token again. Never set elsewhere.
    pub planted_bug_no_lead_fence: bool,
}

impl Config {
    /// Defaults for everything but the cluster.
    pub fn new(id: NodeId, voters: Vec<NodeId>, heartbeat_interval: Duration) -> Self {
        Config {
            id,
            directory: None,
            voters,
            addresses: Vec::new(),
            auto_promote_after: None,
            healthy_within: heartbeat_interval * HEALTHY_WITHIN,
            heartbeat_interval,
            max_append_entries: 256,
            max_append_bytes: 256 * 1024,
            max_uncommitted: 4096,
            max_pending_reads: 4096,
            // Room for a key-value store's largest put: a 64 KiB value, a
            // key of up to 1 KiB and their encoding.
            max_command_bytes: 66 * 1024,
            snapshot_every: 10_000,
            snapshot_every_bytes: 64 * 1024 * 1024,
            snapshot_chunk_bytes: 2 * 1024 * 1024,
            max_in_flight_bytes: 8 * 1024 * 1024,
            max_snapshot_bytes: 1 << 30,
            commit_notices: true,
            planted_bug_ungated_changes: false,
            planted_bug_no_lead_fence: false,
        }
    }
}

/// What a node's durable log held when it (re)started.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Restored {
    /// The highest token promised.
    pub promised: FencingToken,
    /// The latest snapshot: the last entry it covers and the state machine's bytes.
    pub snapshot: Option<(Position, Vec<u8>)>,
    /// The entries after the snapshot, in order.
    pub entries: Vec<Entry>,
    /// The configuration in force at the snapshot's last entry; `None` for
    /// the bootstrap list (no snapshot, or one written before the log held a
    /// configuration).
    pub membership: Option<Membership>,
}

/// Why a replica could not start from what was restored.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RestoreError {
    /// The entries do not form a log after the snapshot.
    #[error("the log is not consecutive: {0}")]
    Gap(String),
    /// The state machine refused the snapshot.
    #[error("the snapshot cannot be restored: {0}")]
    Snapshot(String),
}

/// Why a proposal was not accepted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProposeError {
    /// This node does not lead, or not yet (it is synchronising).
    #[error(transparent)]
    NotLeader(#[from] ProposalError),
    /// The command is larger than [`Config::max_command_bytes`].
    #[error("the command has {size} bytes; at most {max} are accepted")]
    TooLarge {
        /// Its size.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// Too many entries wait for their commit ([`Config::max_uncommitted`]).
    #[error("too many writes in flight ({0}); retry shortly")]
    Busy(usize),
}

/// A read accepted by the leader.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadStart {
    /// Serve it now from the state applied up to this index (the lease holds).
    Now(Index),
    /// Wait for [`Completion::Read`] with this id.
    Pending(ReadId),
}

/// Per follower, as the leader sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
struct Peer {
    /// The next entry to send.
    next: Index,
    /// The follower's log equals the leader's up to here (durably).
    matched: Index,
    /// The newest heartbeat round it answered.
    acked_round: u64,
    /// Bytes of the leader's snapshot it holds, while one is in transfer.
    snapshot_received: Option<u64>,
    /// While a snapshot is in transfer: the end of the pieces sent.
    snapshot_sent: u64,
    /// While a snapshot is in transfer: when it last answered a piece of
    /// it (the leader keeps that snapshot meanwhile, see
    /// [`Replica::transfer_under_way`]).
    snapshot_heard: Option<Instant>,
    /// Batches of entries sent and not acknowledged: the last index of each
    /// and its bytes ([`Config::max_in_flight_bytes`]).
    in_flight: VecDeque<(Index, usize)>,
    /// The commit index last sent to it.
    sent_commit: Index,
    /// Since when it has held, at every heartbeat, every entry committed a
    /// heartbeat earlier (caught up, for a learner's promotion).
    caught_up_since: Option<Instant>,
    /// Since when it has answered the leader within
    /// [`Config::healthy_within`] at every heartbeat (a learner's
    /// stability, for its promotion).
    healthy_since: Option<Instant>,
    /// The last restart of its window after a refusal: the index it
    /// started from and the round it carried. Refusals of batches sent
    /// before it get one batch each, the window left as it is.
    resent: Option<(Index, u64)>,
}

impl Peer {
    fn in_flight_bytes(&self) -> usize {
        self.in_flight.iter().map(|&(_, b)| b).sum()
    }

    /// Whether another batch fits its window ([`MAX_IN_FLIGHT_BATCHES`]
    /// and `window` bytes).
    fn has_room(&self, window: usize) -> bool {
        self.in_flight.len() < MAX_IN_FLIGHT_BATCHES && self.in_flight_bytes() < window
    }

    /// Ends the transfer of a snapshot to it, if one is under way: it was
    /// installed, or is no longer due (the follower holds the log from the
    /// base on, or is sent entries), or was of an older snapshot. The next
    /// transfer starts from offset 0.
    fn end_snapshot(&mut self) {
        self.snapshot_received = None;
        self.snapshot_sent = 0;
        self.snapshot_heard = None;
    }
}

/// Most batches of entries a leader has sent one follower and not heard
/// acknowledged while it catches up (beside [`Config::max_in_flight_bytes`]):
/// batches of small entries stay far below the transport's queue of a peer.
pub const MAX_IN_FLIGHT_BATCHES: usize = 64;

/// Most snapshot pieces a leader has sent one follower beyond what it
/// acknowledged (beside [`Config::max_in_flight_bytes`]).
pub const MAX_IN_FLIGHT_PIECES: u64 = 4;

/// A voter is healthy for a change of members if it answered the leader
/// within this many heartbeat intervals.
pub const HEALTHY_WITHIN: u32 = 3;

/// Where a leader is in taking office (see `docs/REPLICATION.md`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Phase {
    /// Waiting for a majority's promises and last positions.
    Syncing { answers: BTreeMap<NodeId, Position> },
    /// Fetching the freshest log from voter `from`, which ends at `until`.
    Fetching { from: NodeId, until: Position, asked_after: Index, deadline: Instant },
    /// Its no-op at `noop` is not committed yet.
    Replicating { noop: Index },
    /// Accepting writes and reads.
    Ready,
}

/// A read waiting for a confirmation round.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct PendingRead {
    id: ReadId,
    index: Index,
    round: u64,
}

/// The leader's state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Lead {
    token: FencingToken,
    phase: Phase,
    /// The configuration the last synchronisation counted a majority of: a
    /// fetched log that changes it means synchronising again.
    synced: Position,
    /// Every other member (voters and learners), by id.
    peers: BTreeMap<NodeId, Peer>,
    /// When each node last answered this leadership (a voter that answered
    /// within [`HEALTHY_WITHIN`] heartbeats counts as healthy for a change
    /// of members).
    heard: BTreeMap<NodeId, Instant>,
    /// Proposals written and not yet committed, by index.
    proposals: BTreeMap<Index, ProposalId>,
    reads: Vec<PendingRead>,
    round: u64,
    next_heartbeat: Instant,
    /// The commit index at the previous heartbeat: a member holding it is
    /// caught up within a heartbeat of writes.
    commit_a_round_ago: Index,
}

/// A snapshot being received, from the leader or (by a leader) from the
/// freshest follower.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Incoming {
    last: Position,
    membership: Membership,
    total: u64,
    data: Vec<u8>,
}

/// A snapshot of a replica's state, for status pages and metrics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaStatus {
    /// True while this node leads the log and accepts writes.
    pub ready_leader: bool,
    /// The token this node leads with, while it leads (ready or not).
    pub leading: Option<FencingToken>,
    /// The highest token promised.
    pub promised: FencingToken,
    /// The last entry in the log.
    pub last: Position,
    /// The highest index known to be committed.
    pub commit: Index,
    /// The highest index applied to the state machine.
    pub applied: Index,
    /// The last entry the latest snapshot covers.
    pub snapshot: Position,
    /// As leader: per other member, the last index it holds.
    pub followers: Vec<(NodeId, Index)>,
    /// The configuration in force.
    pub membership: Membership,
    /// Messages refused as impossible from a correct peer.
    pub refused: u64,
    /// Learners this node promoted as leader on its own.
    pub auto_promotions: u64,
}

/// A node's replica of the log, generic over its state machine. Drive it
/// with [`Replica::set_leadership`] (after every change of the elector's
/// known leader), [`Replica::handle_message`], [`Replica::handle_timeout`],
/// [`Replica::propose`] and [`Replica::read`]; after each, take the output
/// and handle it: persist `write` (fsync), then send, then deliver.
///
/// Equality and hashing (when the state machine has them) cover the whole
/// state: the model checker (`crates/model`) uses them as a state's identity.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Replica<S> {
    cfg: Config,
    sm: S,
    promised: FencingToken,
    log: Log,
    /// The latest snapshot, kept to send to followers far behind.
    snapshot: Option<(Position, Vec<u8>)>,
    /// The configuration in force when the last input began (to tell the
    /// driver of a change).
    reported: Position,
    /// The electorate last reported to the driver.
    reported_electorate: Electorate,
    /// The elector's view: the leader and its token.
    view: Option<(NodeId, FencingToken)>,
    lead: Option<Lead>,
    commit: Index,
    applied: Index,
    /// The log is durable up to here: the driver said so
    /// ([`Replica::handle_persisted`]).
    durable_last: Index,
    /// The promise is durable up to here.
    durable_promise: FencingToken,
    /// Outputs taken whose writes are not yet reported durable, oldest
    /// first: the output's number, the log's last index and the promise
    /// once each is.
    unpersisted: VecDeque<(u64, Index, FencingToken)>,
    /// The number of the last output taken with a write.
    taken: u64,
    /// Peers some message to which waits for a write not yet reported: the
    /// number of the output it waits for. A message may leave early (before
    /// this node's writes) only to a peer not named here, so that it never
    /// overtakes one sent before it (it would build on entries the peer
    /// does not hold yet, and be refused).
    held_for: BTreeMap<NodeId, u64>,
    incoming: Option<Incoming>,
    /// The log could not be written: the replica takes no part until rebuilt.
    stalled: bool,
    /// This replica never leads under this token or a lower one: the
    /// promise its disk held when it was built (its own leadership among
    /// them, whose entries may have left before they reached the disk), or
    /// one it led when a write failed ([`Replica::handle_persist_failed`]).
    lead_fence: FencingToken,
    next_id: u64,
    refused: u64,
    /// Learners this node promoted as leader on its own.
    auto_promotions: u64,
    /// The data directories of members this node knows (its own, its
    /// peers' from their handshakes), named in the configurations it
    /// writes as leader ([`Replica::note_directories`]).
    known_directories: BTreeMap<NodeId, DirectoryId>,
    out: Output,
}

impl<S: StateMachine> Replica<S> {
    /// A replica from what the durable log held, applying its snapshot (if
    /// any) to `sm`. It starts as a follower of nobody.
    pub fn new(cfg: Config, restored: Restored, mut sm: S) -> Result<Self, RestoreError> {
        let cfg_directory = cfg.directory.map(|d| (cfg.id, d));
        let base = restored.snapshot.as_ref().map_or(Position::ZERO, |(p, _)| *p);
        if let Some((_, data)) = &restored.snapshot {
            sm.restore(data).map_err(RestoreError::Snapshot)?;
        }
        let membership = restored.membership.unwrap_or_else(|| Membership::bootstrap(&cfg.voters));
        let log = Log::new(base, membership, restored.entries).map_err(RestoreError::Gap)?;
        let durable_last = log.last().index;
        let reported = log.membership().at;
        let mut replica = Replica {
            reported_electorate: Electorate::bootstrap(cfg.id, &[]),
            cfg,
            sm,
            promised: restored.promised,
            log,
            snapshot: restored.snapshot,
            reported,
            view: None,
            lead: None,
            commit: base.index,
            applied: base.index,
            durable_last,
            durable_promise: restored.promised,
            unpersisted: VecDeque::new(),
            taken: 0,
            held_for: BTreeMap::new(),
            incoming: None,
            stalled: false,
            // Whatever this node promised before, it may not lead under:
            // the leadership of another node, or its own, whose entries may
            // have left before they reached this disk.
            lead_fence: restored.promised,
            next_id: 1,
            refused: 0,
            auto_promotions: 0,
            known_directories: cfg_directory.into_iter().collect(),
            out: Output::default(),
        };
        replica.reported_electorate = replica.electorate();
        Ok(replica)
    }

    /// The state machine (read it for queries: everything up to
    /// [`ReplicaStatus::applied`] is in it).
    pub fn state_machine(&self) -> &S {
        &self.sm
    }

    /// Drains what the inputs produced. An output that carries a write is
    /// counted durable only once the driver says so
    /// ([`Replica::handle_persisted`]); until then the leader does not
    /// count its own copy toward a commit, nor its promise toward a
    /// synchronisation.
    pub fn take_output(&mut self) -> Output {
        if !self.out.write.is_empty() {
            self.taken += 1;
            self.unpersisted.push_back((self.taken, self.log.last().index, self.promised));
        }
        // The messages wait for the writes not yet reported (this output's
        // among them), the driver's contract.
        if let Some(&(waits_for, _, _)) = self.unpersisted.back() {
            for (to, _) in &self.out.messages {
                self.held_for.insert(*to, waits_for);
            }
        }
        std::mem::take(&mut self.out)
    }

    /// The writes of the `outputs` oldest outputs taken with a write and not
    /// yet reported are durable (writes are made durable in the order the
    /// outputs were taken). The driver may go on feeding inputs while a
    /// write is under way: what this node acknowledges waits in the
    /// output's messages, which leave only after its write, and the leader
    /// commits on a majority of durable copies, its own counted from here.
    pub fn handle_persisted(&mut self, now: Instant, outputs: usize) {
        if !self.start_input() {
            return;
        }
        let mut through = None;
        for _ in 0..outputs {
            let Some((n, last, promise)) = self.unpersisted.pop_front() else { break };
            self.durable_last = last;
            self.durable_promise = self.durable_promise.max(promise);
            through = Some(n);
        }
        if let Some(n) = through {
            self.held_for.retain(|_, waits_for| *waits_for > n);
        }
        self.finish_input(now);
    }

    /// How many outputs taken with a write are not yet reported durable.
    pub fn unpersisted(&self) -> usize {
        self.unpersisted.len()
    }

    /// When [`Replica::handle_timeout`] must next be called.
    pub fn poll_timeout(&self) -> Instant {
        if self.stalled {
            return Instant::MAX;
        }
        match &self.lead {
            Some(l) => match l.phase {
                Phase::Fetching { deadline, .. } => deadline.min(l.next_heartbeat),
                _ => l.next_heartbeat,
            },
            None => Instant::MAX,
        }
    }

    /// True when the next input may take long: the entries held are within
    /// one append (or one proposal batch) of a compaction's thresholds, so
    /// applying them may serialise a snapshot of the whole state, or a
    /// snapshot is being received, whose last piece restores the state
    /// machine from it. A driver that shares its thread with other work runs
    /// such an input where blocking is allowed; when this is false, no
    /// input that adds at most `max_append_entries` entries and
    /// `max_append_bytes` bytes compacts.
    pub fn may_block(&self) -> bool {
        let held = self.log.last().index.saturating_sub(self.log.base().index);
        let entries = held.saturating_add(self.cfg.max_append_entries as u64);
        let bytes = self.log.bytes().saturating_add(self.cfg.max_append_bytes as u64);
        entries >= self.cfg.snapshot_every
            || bytes >= self.cfg.snapshot_every_bytes
            || self.incoming.is_some()
    }

    /// The highest index applied to the state machine.
    pub fn applied(&self) -> Index {
        self.applied
    }

    /// The token this node leads the log with, ready or not yet.
    pub fn leading(&self) -> Option<FencingToken> {
        self.lead.as_ref().map(|l| l.token)
    }

    /// True while this node leads the log and accepts writes.
    pub fn is_ready_leader(&self) -> bool {
        self.lead.as_ref().is_some_and(|l| l.phase == Phase::Ready)
    }

    /// A status snapshot.
    pub fn status(&self) -> ReplicaStatus {
        ReplicaStatus {
            ready_leader: self.is_ready_leader(),
            leading: self.lead.as_ref().map(|l| l.token),
            promised: self.promised,
            last: self.log.last(),
            commit: self.commit,
            applied: self.applied,
            snapshot: self.log.base(),
            followers: self.lead.as_ref().map_or_else(Vec::new, |l| {
                l.peers.iter().map(|(&id, p)| (id, p.matched)).collect()
            }),
            membership: self.log.membership().clone(),
            refused: self.refused,
            auto_promotions: self.auto_promotions,
        }
    }

    // ---- Inputs ----

    /// The elector's known leader changed: `leader` of fencing token `token`
    /// (both `None` while there is no leader).
    pub fn set_leadership(
        &mut self,
        now: Instant,
        leader: Option<NodeId>,
        token: Option<FencingToken>,
    ) {
        if !self.start_input() {
            return;
        }
        let view = leader.zip(token);
        if view != self.view {
            self.view = view;
            self.step_down();
            if let Some((l, t)) = view.filter(|&(l, _)| l == self.cfg.id) {
                debug_assert_eq!(l, self.cfg.id);
                self.take_office(now, t);
            }
        }
        self.finish_input(now);
    }

    /// The configuration in force: the newest this node's log holds.
    pub fn membership(&self) -> &Membership {
        self.log.membership()
    }

    /// The configuration before the one in force, while the log holds the
    /// entry of the one in force (not when its snapshot carries it): its
    /// member that the change removed still takes part until the change
    /// commits.
    pub fn previous_membership(&self) -> Option<&Membership> {
        self.log.previous_membership()
    }

    /// Notes the data directories of members as this node knows them (its
    /// peers', from their handshakes): a configuration this node writes as
    /// leader names them for the members whose entries name none yet. Not
    /// an input: nothing is output.
    pub fn note_directories(&mut self, known: impl IntoIterator<Item = (NodeId, DirectoryId)>) {
        // What the handshakes show now, nothing older: a member removed and
        // added again under its id is another node.
        self.known_directories = known.into_iter().collect();
        if let Some(d) = self.cfg.directory {
            self.known_directories.insert(self.cfg.id, d);
        }
    }

    /// What this node's elector counts over now
    /// ([`Membership::electorate`]): give it to the elector at start, and
    /// again whenever an output carries a new one.
    pub fn electorate(&self) -> Electorate {
        let previous = self.log.previous_membership().map(|p| &p.members);
        let me = Identity { id: self.cfg.id, directory: self.cfg.directory };
        let mut e = self.log.membership().electorate(me, previous, self.commit);
        e.last_token = self.log.last().token;
        e
    }

    /// A message from node `from`. Leader messages are taken from the node
    /// the elector names; answers only from the members this node leads.
    pub fn handle_message(&mut self, now: Instant, from: NodeId, msg: ReplicaMessage) {
        if !self.start_input() {
            return;
        }
        if from == self.cfg.id {
            self.refused += 1;
        } else {
            self.on_message(now, from, msg);
        }
        self.finish_input(now);
    }

    /// The timer armed at [`Replica::poll_timeout`] fired.
    pub fn handle_timeout(&mut self, now: Instant) {
        if !self.start_input() {
            return;
        }
        let due = self.lead.as_ref().is_some_and(|l| now >= l.next_heartbeat);
        if due {
            self.heartbeat(now);
        }
        if let Some(Phase::Fetching { deadline, .. }) = self.lead.as_ref().map(|l| &l.phase) {
            if now >= *deadline {
                // The freshest node did not answer: synchronise again.
                self.start_sync(now);
            }
        }
        self.finish_input(now);
    }

    /// Proposes `commands` (a batch: one write, one message per follower).
    /// Each accepted command gets an id whose [`Completion::Proposal`] comes
    /// once it is committed and applied (or leadership is lost).
    pub fn propose(
        &mut self,
        now: Instant,
        commands: Vec<Vec<u8>>,
    ) -> Vec<Result<ProposalId, ProposeError>> {
        if !self.start_input() {
            let e = ProposeError::NotLeader(ProposalError::StorageFailed);
            return commands.iter().map(|_| Err(e.clone())).collect();
        }
        let results = commands.into_iter().map(|c| self.propose_one(c)).collect();
        // The new entries leave while this node writes them: a follower's
        // write runs beside the leader's, not after it.
        let mark = self.out.messages.len();
        self.send_appends(now, false);
        self.send_early_from(mark);
        self.finish_input(now);
        results
    }

    /// Proposes a change of members: one configuration entry, used by every
    /// node from the moment it holds it. Refused, with nothing changed, unless
    /// this node is a ready leader (it has committed an entry of its own
    /// leadership: a change appended before that could overlap with one of an
    /// earlier leader it has not seen), no other change is uncommitted, the
    /// change itself is valid ([`Members::after`]), a learner to promote holds
    /// everything committed, and a majority of the new configuration's voters
    /// answered lately (etcd's strict reconfiguration check). The id's
    /// [`Completion::Proposal`] comes once the entry commits.
    pub fn propose_change(
        &mut self,
        now: Instant,
        change: &Change,
    ) -> Result<ProposalId, ChangeError> {
        if !self.start_input() {
            return Err(ChangeError::NotLeader { leader: None });
        }
        let result = self.propose_change_entry(now, change);
        if result.is_ok() {
            self.send_appends(now, false);
        }
        self.finish_input(now);
        result
    }

    fn propose_change_entry(
        &mut self,
        now: Instant,
        change: &Change,
    ) -> Result<ProposalId, ChangeError> {
        let leader = self.known_leader();
        let ungated = self.cfg.planted_bug_ungated_changes;
        let Some(lead) = self.lead.as_ref().filter(|l| {
            l.phase == Phase::Ready || (ungated && matches!(l.phase, Phase::Replicating { .. }))
        }) else {
            return Err(ChangeError::NotLeader { leader });
        };
        let current = self.log.membership();
        if current.at.index > self.commit {
            return Err(ChangeError::Pending(format!("to {}", current.members)));
        }
        // The members of the bootstrap list get the addresses this node
        // knows them by (before the checks: a new member's address must not
        // be one of theirs).
        let mut base = current.members.clone();
        for m in base.voters.iter_mut().chain(base.learners.iter_mut()) {
            if m.address.is_empty() {
                if let Some((_, a)) = self.cfg.addresses.iter().find(|(id, _)| *id == m.id) {
                    m.address = a.clone();
                }
            }
        }
        // And every member's data directory this node knows (its peers'
        // from their handshakes), so that a node whose disk is wiped later
        // is refused as the member it was. Not for a member this change
        // adds: a directory known under its id is that of an earlier member
        // (removed, perhaps wiped), and the node added now is another one,
        // named by the change or by a later one.
        let mut next = base.after(change)?;
        for m in next.voters.iter_mut().chain(next.learners.iter_mut()) {
            if m.directory.is_none() && base.get(m.id).is_some() {
                m.directory = self.known_directories.get(&m.id).copied();
            }
        }
        if let Change::Promote(id) = change {
            // Within a heartbeat of writes: under a steady stream of them a
            // learner is always a few entries behind the newest commit.
            // A learner that never answered this leader holds nothing it
            // knows of.
            let wanted = lead.commit_a_round_ago.min(self.commit);
            if lead.peers.get(id).map_or(0, |p| p.matched) < wanted || !lead.heard.contains_key(id)
            {
                return Err(ChangeError::Behind(*id));
            }
        }
        let within = self.cfg.healthy_within;
        let healthy: Vec<NodeId> = next
            .voter_ids()
            .filter(|&v| {
                v == self.cfg.id
                    || lead.heard.get(&v).is_some_and(|&t| now.saturating_since(t) <= within)
            })
            .collect();
        // Adding a learner changes no voter: the check is for changes that
        // move the quorum.
        let moves_voters = !matches!(change, Change::AddLearner(_));
        if moves_voters && healthy.len() < next.quorum() {
            return Err(ChangeError::Unhealthy {
                healthy: healthy.len(),
                voters: next.voters.len(),
                quorum: next.quorum(),
                names: healthy.iter().map(|v| format!("node {v}")).collect::<Vec<_>>().join(", "),
            });
        }
        let token = lead.token;
        let pos = Position { token, index: self.log.last().index + 1 };
        let id = self.next_id;
        self.next_id += 1;
        let entry = Entry { pos, payload: Payload::Members(next) };
        self.log.push(entry.clone());
        match self.out.write.last_mut() {
            Some(LogOp::Append(batch)) => batch.push(entry),
            _ => self.write(LogOp::Append(vec![entry])),
        }
        if let Some(lead) = self.lead.as_mut() {
            lead.proposals.insert(pos.index, id);
        }
        self.refresh_peers(pos.index);
        Ok(id)
    }

    /// Starts a linearizable read. `lease` is the fencing token whose
    /// election lease is valid now, if any (the elector's `is_leader(now)`
    /// and its token). A lease of the token this replica leads serves the
    /// read at once; without one, or with a lease of another token (the
    /// elector moved on and the replica was not told yet), the read waits
    /// for a round of acknowledgements from a majority.
    pub fn read(
        &mut self,
        now: Instant,
        lease: Option<FencingToken>,
    ) -> Result<ReadStart, ReadError> {
        if !self.start_input() {
            return Err(ReadError::NotLeader { leader: None });
        }
        let result = self.start_read(now, lease);
        self.finish_input(now);
        result
    }

    /// A linearizable read served at once, without an input: the index to
    /// serve it at when this node is a ready leader of `lease` — the token
    /// whose election lease is valid now (the elector's `is_leader(now)`
    /// and its fencing token). A lease of another token (the elector moved
    /// on and the replica was not told yet) serves nothing.
    pub fn lease_read(&self, lease: Option<FencingToken>) -> Option<Index> {
        let lead = self.lead.as_ref().filter(|l| l.phase == Phase::Ready)?;
        (Some(lead.token) == lease).then_some(self.applied)
    }

    /// As a ready leader: sends voter `to` what it lacks and the commit
    /// index now, rather than at the next heartbeat. A follower that serves
    /// a linearizable read at the leader's read index waits for that commit
    /// index; sent before the read index, it arrives first.
    pub fn update_follower(&mut self, now: Instant, to: NodeId) {
        if !self.start_input() {
            return;
        }
        let ready = self
            .lead
            .as_ref()
            .is_some_and(|l| l.phase == Phase::Ready && l.peers.contains_key(&to));
        if ready {
            // What a read index it answers waits for: early, as a commit
            // notice, when nothing sent before it is held.
            let mark = self.out.messages.len();
            self.send_to(now, to);
            self.send_early_from(mark);
        }
        self.finish_input(now);
    }

    /// The last write of the log failed: this replica stops taking part
    /// (nothing of that output but its [`Output::early`] messages was sent).
    /// Rebuild it from the durable log ([`Replica::new`]) once storage works
    /// again, and hand the rebuilt replica this one's
    /// [`Replica::lead_fence`]. Proposals written and not committed get
    /// [`ProposalError::Unknown`]: part of the write may have reached the
    /// disk.
    ///
    /// A leader's entries may have left early and reached followers while
    /// its own copy is lost: were it to lead under the same token again, it
    /// could write other entries at the same positions, and a follower
    /// holding the first ones would take them for the same (two logs that
    /// agree on a position would then differ before it). So a leader gives
    /// up its token here: the replica never leads under it again
    /// ([`Replica::lead_fence`]), and the driver tells its elector to step
    /// down ([`Output::give_up`] names the token), so that the
    /// cluster elects a leader of a later term rather than wait for a log
    /// leader that cannot come.
    pub fn handle_persist_failed(&mut self) {
        if let Some(token) = self.lead.as_ref().map(|l| l.token) {
            self.lead_fence = self.lead_fence.max(token);
            self.out.give_up = Some(token);
        }
        self.step_down();
        self.stalled = true;
    }

    /// The highest token this replica may not lead under: the promise its
    /// disk held when it was built, or a token it led when a write failed
    /// ([`Replica::handle_persist_failed`]). It never leads under this
    /// token or a lower one; the elector's leaderships of such a token are
    /// reported in [`Output::give_up`].
    pub fn lead_fence(&self) -> FencingToken {
        if self.cfg.planted_bug_no_lead_fence {
            return FencingToken(0);
        }
        self.lead_fence
    }

    /// Carries a replica's [`Replica::lead_fence`] over to its rebuilt
    /// successor: the rebuilt replica leads under no token up to `fence`
    /// (it only rises). Call it before the first
    /// [`Replica::set_leadership`].
    pub fn set_lead_fence(&mut self, fence: FencingToken) {
        self.lead_fence = self.lead_fence.max(fence);
    }

    // ---- Bookkeeping ----

    /// Every input starts here. False if the replica stalled.
    fn start_input(&mut self) -> bool {
        !self.stalled
    }

    /// Every input ends here: count what became durable, advance the commit.
    fn finish_input(&mut self, now: Instant) {
        if self.lead.as_ref().is_some_and(|l| matches!(l.phase, Phase::Syncing { .. })) {
            self.check_sync(now);
        }
        self.advance_commit(now);
        self.complete_reads();
        let membership = self.log.membership();
        if membership.at != self.reported {
            self.reported = membership.at;
            self.out.membership = Some(membership.clone());
        }
        let electorate = self.electorate();
        if electorate != self.reported_electorate {
            self.reported_electorate = electorate.clone();
            self.out.electorate = Some(electorate);
        }
    }

    fn write(&mut self, op: LogOp) {
        // Entries removed from the log are no longer what the disk holds
        // durably at their positions, nor what a write under way leaves
        // there: what is durable (or will be) stops before them.
        let kept = match &op {
            LogOp::TruncateAfter(index) => Some(*index),
            LogOp::InstallSnapshot { last, .. } => Some(last.index),
            _ => None,
        };
        if let Some(kept) = kept {
            self.durable_last = self.durable_last.min(kept);
            for (_, last, _) in &mut self.unpersisted {
                *last = (*last).min(kept);
            }
        }
        self.out.write.push(op);
    }

    fn send(&mut self, to: NodeId, msg: ReplicaMessage) {
        self.out.messages.push((to, msg));
    }

    fn members(&self) -> &Members {
        &self.log.membership().members
    }

    /// The other voters of the configuration in force.
    fn other_voters(&self) -> Vec<NodeId> {
        self.members().voter_ids().filter(|&v| v != self.cfg.id).collect()
    }

    /// The value a majority of the voters in force has reached: the
    /// quorum-th greatest of `own` (if this node votes) and the others'
    /// values (0 for one not heard of).
    fn majority_of<T: Ord + Copy + Default>(&self, own: T, value: impl Fn(NodeId) -> T) -> T {
        let members = self.members();
        let mut values: Vec<T> =
            members.voter_ids().map(|v| if v == self.cfg.id { own } else { value(v) }).collect();
        values.sort_unstable_by(|a, b| b.cmp(a));
        values.get(members.quorum() - 1).copied().unwrap_or_default()
    }

    /// Gives the leader a peer for every other member in force, keeping
    /// what it knows of those it had; a new one starts at `next`.
    fn refresh_peers(&mut self, next: Index) {
        let me = self.cfg.id;
        let ids: Vec<NodeId> = self.members().all().map(|m| m.id).filter(|&id| id != me).collect();
        let Some(lead) = self.lead.as_mut() else { return };
        lead.peers.retain(|id, _| ids.contains(id));
        for id in ids {
            lead.peers.entry(id).or_insert(Peer { next, ..Peer::default() });
        }
    }

    fn promise(&mut self, token: FencingToken) {
        if token > self.promised {
            self.promised = token;
            self.write(LogOp::Promise(token));
        }
    }

    fn known_leader(&self) -> Option<NodeId> {
        self.view.map(|(l, _)| l)
    }

    // ---- Leading ----

    /// Leaves the leader role, if held: proposals written and not committed
    /// may still commit under a later leader (unknown); reads fail.
    fn step_down(&mut self) {
        let Some(lead) = self.lead.take() else { return };
        for (_, id) in lead.proposals {
            let result = Err(ProposalError::Unknown);
            self.out.completions.push(Completion::Proposal { id, result });
        }
        for r in lead.reads {
            let result = Err(ReadError::NotLeader { leader: self.known_leader() });
            self.out.completions.push(Completion::Read { id: r.id, result });
        }
        self.incoming = None;
    }

    fn take_office(&mut self, now: Instant, token: FencingToken) {
        if token < self.promised {
            // A later leadership was promised already: this one cannot lead
            // the log (its elector will learn of the later term).
            return;
        }
        if token <= self.lead_fence() {
            // Promised before this replica was built, or given up after a
            // failed write (entries of it may have left that this log no
            // longer holds): its elector must step down.
            self.out.give_up = Some(token);
            return;
        }
        self.promise(token);
        self.lead = Some(Lead {
            token,
            phase: Phase::Syncing { answers: BTreeMap::new() },
            synced: self.log.membership().at,
            peers: BTreeMap::new(),
            heard: BTreeMap::new(),
            proposals: BTreeMap::new(),
            reads: Vec::new(),
            round: 0,
            next_heartbeat: now + self.cfg.heartbeat_interval,
            commit_a_round_ago: self.commit,
        });
        self.start_sync(now);
    }

    /// Asks every voter in force for its promise and last position.
    fn start_sync(&mut self, now: Instant) {
        let others = self.other_voters();
        let synced = self.log.membership().at;
        let Some(lead) = self.lead.as_mut() else { return };
        lead.phase = Phase::Syncing { answers: BTreeMap::new() };
        lead.synced = synced;
        lead.next_heartbeat = now + self.cfg.heartbeat_interval;
        let token = lead.token;
        for id in others {
            self.send(id, ReplicaMessage::Sync { token });
        }
    }

    /// Once a majority promised: replicate from here, or fetch the freshest log first.
    fn check_sync(&mut self, now: Instant) {
        let me = self.cfg.id;
        let members = self.log.membership().members.clone();
        let own = self.log.last();
        let durable_promise = self.durable_promise;
        let Some(lead) = self.lead.as_mut() else { return };
        let token = lead.token;
        let Phase::Syncing { answers } = &mut lead.phase else { return };
        // Only the voters in force count (this node's own log decides
        // which: a fetched log that changes them means synchronising again),
        // this node once its promise is durable.
        answers.retain(|id, _| members.is_voter(*id));
        let counted = answers.len() + usize::from(members.is_voter(me) && durable_promise >= token);
        if counted < members.quorum() {
            return;
        }
        // The freshest log, this node's own among them even when it does not
        // vote (so that each synchronisation only moves to a fresher log,
        // and ends); its own on a tie.
        let best = answers
            .iter()
            .map(|(&id, &p)| (p, false, id))
            .chain([(own, true, me)])
            .max()
            .map(|(p, _, id)| (p, id))
            .expect("this node's own log is a candidate");
        if best.1 == me {
            self.start_replicating(now);
        } else {
            let after = self.commit;
            lead.phase = Phase::Fetching {
                from: best.1,
                until: best.0,
                asked_after: after,
                deadline: now + self.cfg.heartbeat_interval * 4,
            };
            self.send(best.1, ReplicaMessage::Fetch { token, after, offset: 0 });
        }
    }

    /// Writes the no-op of this leadership and starts replicating, unless
    /// the log now holds another configuration than the one synchronised
    /// with: then a majority of that one must promise first.
    fn start_replicating(&mut self, now: Instant) {
        let last = self.log.last();
        let membership = self.log.membership().at;
        let Some(lead) = self.lead.as_mut() else { return };
        if lead.synced != membership {
            return self.start_sync(now);
        }
        let pos = Position { token: lead.token, index: last.index + 1 };
        let noop = Entry { pos, payload: Payload::Noop };
        lead.phase = Phase::Replicating { noop: pos.index };
        lead.peers.clear();
        self.refresh_peers(pos.index);
        self.log.push(noop.clone());
        self.write(LogOp::Append(vec![noop]));
        // A snapshot partly fetched from a fresher log that then fell
        // silent is of no use once this log is the one replicated: kept, it
        // held its bytes and made every input a blocking one until this
        // leadership ended.
        self.incoming = None;
        self.send_appends(now, true);
    }

    fn propose_one(&mut self, command: Vec<u8>) -> Result<ProposalId, ProposeError> {
        let leader = self.known_leader();
        let Some(lead) = self.lead.as_mut().filter(|l| l.phase == Phase::Ready) else {
            return Err(ProposalError::NotLeader { leader }.into());
        };
        if command.len() > self.cfg.max_command_bytes {
            return Err(ProposeError::TooLarge {
                size: command.len(),
                max: self.cfg.max_command_bytes,
            });
        }
        if lead.proposals.len() >= self.cfg.max_uncommitted {
            return Err(ProposeError::Busy(lead.proposals.len()));
        }
        let pos = Position { token: lead.token, index: self.log.last().index + 1 };
        let id = self.next_id;
        self.next_id += 1;
        lead.proposals.insert(pos.index, id);
        let entry = Entry { pos, payload: Payload::Command(command) };
        self.log.push(entry.clone());
        match self.out.write.last_mut() {
            Some(LogOp::Append(batch)) => batch.push(entry),
            _ => self.write(LogOp::Append(vec![entry])),
        }
        Ok(id)
    }

    /// Sends each follower what it lacks: all of them (`all`, a heartbeat
    /// or read round: a follower whose window is full gets a confirmation
    /// only, see [`Replica::send_to`]) or only those that lack the new
    /// entries and have room in their window.
    fn send_appends(&mut self, now: Instant, all: bool) {
        let last = self.log.last().index;
        let window = self.cfg.max_in_flight_bytes;
        let Some(lead) = self.lead.as_ref() else { return };
        if !matches!(lead.phase, Phase::Replicating { .. } | Phase::Ready) {
            return;
        }
        let lacks =
            |p: &Peer| p.next <= last && p.snapshot_received.is_none() && p.has_room(window);
        let due: Vec<NodeId> =
            lead.peers.iter().filter(|(_, p)| all || lacks(p)).map(|(&id, _)| id).collect();
        // Entries, heartbeats and the commit index rest on nothing this
        // node has yet to write: they leave early, beside its write.
        let mark = self.out.messages.len();
        for id in due {
            self.send_to(now, id);
        }
        self.send_early_from(mark);
    }

    /// Sends member `to` what it lacks while its window has room
    /// ([`Config::max_in_flight_bytes`]): one batch of entries or snapshot
    /// piece at least, more while it catches up.
    fn send_window(&mut self, now: Instant, to: NodeId) {
        for _ in 0..MAX_IN_FLIGHT_BATCHES {
            if !self.send_to(now, to) {
                break;
            }
        }
    }

    /// Sends member `to` its next entries (or snapshot piece), advancing its
    /// next index optimistically. True if more is due and the window
    /// ([`Config::max_in_flight_bytes`]) has room for it.
    fn send_to(&mut self, _now: Instant, to: NodeId) -> bool {
        let base = self.log.base();
        let last = self.log.last().index;
        let commit = self.commit;
        let window = self.cfg.max_in_flight_bytes as u64;
        // Snapshot pieces: as many as fit the window, and at most
        // MAX_IN_FLIGHT_PIECES of them.
        let piece_window =
            window.min(self.cfg.snapshot_chunk_bytes as u64 * MAX_IN_FLIGHT_PIECES).max(1);
        let total = self.snapshot.as_ref().map_or(0, |(_, d)| d.len() as u64);
        let Some(lead) = self.lead.as_mut() else { return false };
        let token = lead.token;
        let round = lead.round;
        let Some(peer) = lead.peers.get_mut(&to) else { return false };
        if peer.next <= base.index {
            let received = *peer.snapshot_received.get_or_insert(0);
            let offset = peer.snapshot_sent.max(received);
            let started = peer.snapshot_sent > 0 || offset > 0;
            if started && (offset >= total || offset - received >= piece_window) {
                // All of it sent, or the window is full: the answers send more.
                return false;
            }
            let Some(chunk) = self.snapshot_chunk(offset) else { return false };
            let end = offset + (chunk.data.len() as u64).max(1);
            if let Some(peer) = self.lead.as_mut().and_then(|l| l.peers.get_mut(&to)) {
                peer.snapshot_sent = end;
            }
            self.send(to, ReplicaMessage::InstallSnapshot { token, chunk });
            return end < total && end - received < piece_window;
        }
        if peer.next <= last && !peer.has_room(window as usize) {
            // The window is full: a read or heartbeat round's confirmation
            // only, after the last entry it acknowledged (or the base), with
            // no entry and no advance. Its answer acknowledges nothing new
            // and sends nothing more; the batches under way, or the next
            // heartbeat, carry the entries.
            let at = peer.matched.max(base.index);
            let prev = Position {
                index: at,
                token: self.log.token_at(at).expect("held: at or after the base"),
            };
            let entries = Vec::new();
            self.send(to, ReplicaMessage::Append { token, prev, entries, commit, round });
            return false;
        }
        // It gets entries: a snapshot transfer begun while it was behind the
        // base is over (it caught up through entries already on their way).
        peer.end_snapshot();
        let (prev, entries) = self
            .log
            .batch_from(peer.next, self.cfg.max_append_entries, self.cfg.max_append_bytes)
            .expect("held: at or after the base");
        if let Some(e) = entries.last() {
            let bytes: usize = entries.iter().map(|e| e.payload.size().max(1)).sum();
            peer.in_flight.push_back((e.pos.index, bytes));
        }
        peer.next += entries.len() as u64;
        peer.sent_commit = commit;
        let more = !entries.is_empty()
            && peer.next <= last
            && (peer.in_flight_bytes() as u64) < window
            && peer.in_flight.len() < MAX_IN_FLIGHT_BATCHES;
        self.send(to, ReplicaMessage::Append { token, prev, entries, commit, round });
        more
    }

    /// Sends member `to` one batch of entries from `from`, as a resend:
    /// its next index and window stay as they are. Nothing if `from` is
    /// past the log or its predecessor is compacted (the next heartbeat
    /// sends what it lacks).
    fn send_batch_from(&mut self, to: NodeId, from: Index) {
        let Some(lead) = self.lead.as_ref() else { return };
        if from > self.log.last().index {
            return;
        }
        let (token, round) = (lead.token, lead.round);
        let Some((prev, entries)) =
            self.log.batch_from(from, self.cfg.max_append_entries, self.cfg.max_append_bytes)
        else {
            return;
        };
        let commit = self.commit;
        self.send(to, ReplicaMessage::Append { token, prev, entries, commit, round });
    }

    /// Tells every follower that holds the whole log, and was sent an older
    /// commit index, the new one at once, in an `Append` without entries
    /// (Raft's leaders do the same: etcd broadcasts on every commit). A
    /// follower otherwise learns of a commit with the next entries or
    /// heartbeat, up to a heartbeat interval later, and its reads, watches and
    /// an application election's waiter see the change that much later.
    /// Followers that lack entries get the commit index with them.
    fn notify_commit(&mut self, now: Instant) {
        let last = self.log.last().index;
        let commit = self.commit;
        let Some(lead) = self.lead.as_ref() else { return };
        if !self.cfg.commit_notices
            || !matches!(lead.phase, Phase::Replicating { .. } | Phase::Ready)
        {
            return;
        }
        let due: Vec<NodeId> = lead
            .peers
            .iter()
            .filter(|(_, p)| {
                p.next > last && p.snapshot_received.is_none() && p.sent_commit < commit
            })
            .map(|(&id, _)| id)
            .collect();
        // A notice carries no entry, only a commit index that a majority's
        // disks back: it need not wait for this node's writes, and leaves
        // before the answers of this input (a follower that forwarded a
        // write applies it before it relays the leader's answer: the same
        // connection carries the notice first).
        let mark = self.out.messages.len();
        for id in due {
            self.send_to(now, id);
        }
        self.send_early_from(mark);
    }

    /// Makes the messages from `mark` on early ([`Output::early`]: they
    /// leave before this node's writes end), each one whose peer has no
    /// message before it still waiting: one held behind a write
    /// (`held_for`) or one of this output. The others stay in order.
    fn send_early_from(&mut self, mark: usize) {
        // Nothing leaves early before this leadership's promise is durable
        // (a majority's promises may end the synchronisation first): a
        // leader that crashed then would come back without it, and its
        // fence against leading the token again rests on the promise its
        // disk holds ([`Replica::lead_fence`]).
        if self.lead.as_ref().is_none_or(|l| self.durable_promise < l.token) {
            return;
        }
        let later = self.out.messages.split_off(mark);
        for (to, msg) in later {
            let waits =
                self.held_for.contains_key(&to) || self.out.messages.iter().any(|(t, _)| *t == to);
            if waits {
                self.out.messages.push((to, msg));
            } else {
                self.out.early.push((to, msg));
            }
        }
    }

    /// The piece of the latest snapshot from `offset`.
    fn snapshot_chunk(&self, offset: u64) -> Option<SnapshotChunk> {
        let (last, data) = self.snapshot.as_ref()?;
        let start = usize::try_from(offset).ok()?.min(data.len());
        let end = start.saturating_add(self.cfg.snapshot_chunk_bytes).min(data.len());
        Some(SnapshotChunk {
            last: *last,
            total: data.len() as u64,
            offset,
            data: data[start..end].to_vec(),
            membership: self.log.membership_at(last.index).clone(),
        })
    }

    /// The periodic round: repeat what is unanswered, confirm followers.
    fn heartbeat(&mut self, now: Instant) {
        let others = self.other_voters();
        let Some(lead) = self.lead.as_mut() else { return };
        lead.next_heartbeat = now + self.cfg.heartbeat_interval;
        lead.round += 1;
        let token = lead.token;
        match &lead.phase {
            Phase::Syncing { answers } => {
                let missing: Vec<NodeId> =
                    others.into_iter().filter(|id| !answers.contains_key(id)).collect();
                for id in missing {
                    self.send(id, ReplicaMessage::Sync { token });
                }
            }
            Phase::Fetching { from, asked_after, .. } => {
                let (from, after) = (*from, *asked_after);
                let offset = self.incoming.as_ref().map_or(0, |inc| inc.data.len() as u64);
                self.send(from, ReplicaMessage::Fetch { token, after, offset });
            }
            Phase::Replicating { .. } | Phase::Ready => {
                // Everything unacknowledged is sent again from the last match.
                let wanted = lead.commit_a_round_ago;
                let healthy_within = self.cfg.healthy_within;
                for (id, p) in lead.peers.iter_mut() {
                    match p.snapshot_received {
                        None => p.next = p.matched + 1,
                        // The pieces not acknowledged are sent again.
                        Some(received) => p.snapshot_sent = received,
                    }
                    p.in_flight.clear();
                    let heard = lead.heard.get(id);
                    if p.matched < wanted || heard.is_none() {
                        p.caught_up_since = None;
                    } else if p.caught_up_since.is_none() {
                        p.caught_up_since = Some(now);
                    }
                    if heard.is_some_and(|&at| now.saturating_since(at) <= healthy_within) {
                        p.healthy_since.get_or_insert(now);
                    } else {
                        p.healthy_since = None;
                    }
                }
                lead.commit_a_round_ago = self.commit;
                self.send_appends(now, true);
                self.auto_promote(now);
            }
        }
    }

    /// As a ready leader with no change in progress: promotes the first
    /// learner added for it ([`crate::Member`]'s `auto_promote`) that has
    /// answered at every heartbeat for [`Config::auto_promote_after`] and
    /// held everything committed at two heartbeats in a row, if the change
    /// passes every check of [`Replica::propose_change`] (health among
    /// them; a refused one is tried again at a later heartbeat).
    fn auto_promote(&mut self, now: Instant) {
        let Some(after) = self.cfg.auto_promote_after else { return };
        let Some(lead) = self.lead.as_ref().filter(|l| l.phase == Phase::Ready) else { return };
        if self.log.membership().at.index > self.commit {
            return;
        }
        // Stable: it answered at every heartbeat for `after` (counted from
        // its first answers, so the time it took to catch up counts);
        // caught up: it held every entry committed a heartbeat earlier at
        // this heartbeat and the one before (it keeps pace with the writes).
        let ready = self.log.membership().members.learners.iter().find(|m| {
            m.auto_promote
                && lead.peers.get(&m.id).is_some_and(|p| {
                    let stable =
                        p.healthy_since.is_some_and(|since| now.saturating_since(since) >= after);
                    let caught_up = p.caught_up_since.is_some_and(|since| now > since);
                    stable && caught_up
                })
        });
        let Some(id) = ready.map(|m| m.id) else { return };
        if let Ok(proposal) = self.propose_change_entry(now, &Change::Promote(id)) {
            // Nobody waits for it: its completion is not reported.
            if let Some(lead) = self.lead.as_mut() {
                lead.proposals.retain(|_, p| *p != proposal);
            }
            self.auto_promotions += 1;
            self.send_appends(now, false);
        }
    }

    /// Commits what a majority of the voters in force holds durably,
    /// counting only entries of this leadership's token, and applies it. A
    /// leader that is no voter once the configuration that says so has
    /// committed stops leading the log.
    fn advance_commit(&mut self, now: Instant) {
        if let Some(lead) = self.lead.as_ref() {
            if matches!(lead.phase, Phase::Replicating { .. } | Phase::Ready) {
                let peers = &lead.peers;
                let c =
                    self.majority_of(self.durable_last, |v| peers.get(&v).map_or(0, |p| p.matched));
                if c > self.commit && self.log.token_at(c) == Some(lead.token) {
                    self.commit = c;
                    self.notify_commit(now);
                }
            }
        }
        self.apply(now);
        let membership = self.log.membership();
        if self.lead.is_some()
            && membership.at.index <= self.commit
            && !membership.members.is_voter(self.cfg.id)
        {
            self.step_down();
        }
    }

    /// Applies every committed entry not yet applied, in order.
    fn apply(&mut self, now: Instant) {
        while self.applied < self.commit {
            let Some(entry) = self.log.get(self.applied + 1) else { break };
            let pos = entry.pos;
            let result = match &entry.payload {
                Payload::Noop | Payload::Members(_) => Vec::new(),
                Payload::Command(c) => self.sm.apply(pos, c),
            };
            self.applied = pos.index;
            self.out.applied.push(pos);
            if let Some(lead) = self.lead.as_mut() {
                if let Some(id) = lead.proposals.remove(&pos.index) {
                    let result = Ok((pos, result));
                    self.out.completions.push(Completion::Proposal { id, result });
                }
                if lead.phase == (Phase::Replicating { noop: pos.index }) {
                    lead.phase = Phase::Ready;
                    // What a learner must hold to be promoted starts here:
                    // the commit index this leader took office with may be
                    // far behind (a restarted node's starts at its
                    // snapshot), and a learner that held nothing passed
                    // for caught up until the next heartbeat (raft
                    // membership seed 8727: an empty voter promoted).
                    lead.commit_a_round_ago = lead.commit_a_round_ago.max(pos.index);
                }
            }
        }
        self.maybe_compact(now);
    }

    /// Takes a snapshot once enough was applied beyond the last one, unless
    /// a follower is receiving the current one ([`Self::transfer_under_way`])
    /// and the entries held are below twice the bytes that compact.
    fn maybe_compact(&mut self, now: Instant) {
        let applied_beyond = self.applied.saturating_sub(self.log.base().index);
        let by_count = applied_beyond >= self.cfg.snapshot_every;
        let by_bytes = applied_beyond > 0 && self.log.bytes() >= self.cfg.snapshot_every_bytes;
        if !(by_count || by_bytes) {
            return;
        }
        let hard = self.log.bytes() >= self.cfg.snapshot_every_bytes.saturating_mul(2);
        if !hard && self.transfer_under_way(now) {
            return;
        }
        let last = Position {
            index: self.applied,
            token: self.log.token_at(self.applied).expect("applied entries are held"),
        };
        let data = self.sm.snapshot();
        let membership = self.log.membership_at(last.index).clone();
        self.log.compact(last);
        self.snapshot = Some((last, data.clone()));
        self.write(LogOp::Compact { last, membership, data });
    }

    /// Whether, as leader, it sends a follower the current snapshot and that
    /// follower answered a piece of it within [`Config::healthy_within`].
    /// A new snapshot would void that transfer (pieces are always of the
    /// latest one): a follower whose transfer takes longer than the leader
    /// takes to apply `snapshot_every` entries never caught up (the
    /// simulator's 100,000 sessions: two of five followers stuck for the
    /// whole run, and the cluster without a majority whenever a third
    /// stopped). So compaction waits for it, up to twice
    /// [`Config::snapshot_every_bytes`] of entries held; a follower that
    /// stops answering no longer holds it back.
    fn transfer_under_way(&self, now: Instant) -> bool {
        let Some(lead) = self.lead.as_ref() else { return false };
        let within = self.cfg.healthy_within;
        lead.peers.values().any(|p| {
            p.snapshot_received.is_some()
                && p.snapshot_heard.is_some_and(|t| now.saturating_since(t) <= within)
        })
    }

    // ---- Reads ----

    fn start_read(
        &mut self,
        now: Instant,
        lease: Option<FencingToken>,
    ) -> Result<ReadStart, ReadError> {
        let leader = self.known_leader();
        let max = self.cfg.max_pending_reads;
        let Some(lead) = self.lead.as_mut().filter(|l| l.phase == Phase::Ready) else {
            return Err(ReadError::NotLeader { leader });
        };
        if lease == Some(lead.token) {
            return Ok(ReadStart::Now(self.applied));
        }
        if lead.reads.len() >= max {
            return Err(ReadError::NotLeader { leader });
        }
        lead.round += 1;
        let id = self.next_id;
        self.next_id += 1;
        lead.reads.push(PendingRead { id, index: self.commit, round: lead.round });
        self.send_appends(now, true);
        Ok(ReadStart::Pending(id))
    }

    /// Serves the reads whose round a majority confirmed.
    fn complete_reads(&mut self) {
        let applied = self.applied;
        let Some(lead) = self.lead.as_ref() else { return };
        let confirmed =
            self.majority_of(u64::MAX, |v| lead.peers.get(&v).map_or(0, |p| p.acked_round));
        let Some(lead) = self.lead.as_mut() else { return };
        let mut done = Vec::new();
        lead.reads.retain(|r| {
            let ready = r.round <= confirmed && applied >= r.index;
            if ready {
                done.push(*r);
            }
            !ready
        });
        for r in done {
            self.out.completions.push(Completion::Read { id: r.id, result: Ok(r.index) });
        }
    }

    // ---- Messages ----

    fn on_message(&mut self, now: Instant, from: NodeId, msg: ReplicaMessage) {
        let token = msg.token();
        let from_leader = self.view == Some((from, token));
        let i = from;
        match msg {
            ReplicaMessage::Sync { .. } if from_leader => self.on_sync(i, token),
            ReplicaMessage::Append { prev, entries, commit, round, .. } if from_leader => {
                self.on_append(now, i, token, prev, entries, commit, round)
            }
            ReplicaMessage::InstallSnapshot { chunk, .. } if from_leader => {
                self.on_install(now, i, token, chunk)
            }
            ReplicaMessage::Fetch { after, offset, .. } if from_leader => {
                self.on_fetch(i, token, after, offset)
            }
            ReplicaMessage::Sync { .. }
            | ReplicaMessage::Append { .. }
            | ReplicaMessage::InstallSnapshot { .. }
            | ReplicaMessage::Fetch { .. } => {
                // Not from the leader the elector knows for that token: a
                // message of an old leadership, or one this node has not
                // heard of yet (the leader repeats it), or forged.
            }
            ReplicaMessage::SyncReply { last, .. } => self.on_sync_reply(now, i, token, last),
            ReplicaMessage::AppendReply { round, result, .. } => {
                // The batches an answer sends leave early, beside this
                // node's write: held behind it (the disk is busy under a
                // steady load), every batch to the follower waited for
                // the leader's sync before the follower's began, and a
                // write took three syncs instead of two.
                let mark = self.out.messages.len();
                self.on_append_reply(now, i, token, round, result);
                self.send_early_from(mark);
            }
            ReplicaMessage::SnapshotReply { last, received, .. } => {
                // Snapshot pieces hold committed state, and the log after
                // the snapshot is what any batch holds: early too. (Held,
                // the batch after a snapshot kept every later batch to that
                // follower held behind it, for as long as writes followed
                // each other.)
                let mark = self.out.messages.len();
                self.on_snapshot_reply(now, i, token, last, received);
                self.send_early_from(mark);
            }
            ReplicaMessage::FetchReply { after, entries, snapshot, last, .. } => {
                self.on_fetch_reply(now, i, token, after, entries, snapshot, last)
            }
        }
    }

    /// The leader's token must be at least the promise; a higher one is promised.
    fn accept_leader_token(&mut self, token: FencingToken) -> bool {
        if token < self.promised {
            return false;
        }
        self.promise(token);
        true
    }

    fn on_sync(&mut self, i: NodeId, token: FencingToken) {
        let last = self.accept_leader_token(token).then(|| self.log.last());
        let promised = self.promised;
        self.send(i, ReplicaMessage::SyncReply { token, last, promised });
    }

    #[allow(clippy::too_many_arguments)]
    fn on_append(
        &mut self,
        now: Instant,
        i: NodeId,
        token: FencingToken,
        prev: Position,
        entries: Vec<Entry>,
        commit: Index,
        round: u64,
    ) {
        if !self.accept_leader_token(token) {
            return;
        }
        let result = self.append_after(prev, entries);
        if let Ok(matched) = result {
            self.commit = self.commit.max(commit.min(matched));
            self.drop_covered_snapshot(matched);
            self.apply(now);
        }
        self.send(i, ReplicaMessage::AppendReply { token, round, result });
    }

    /// Drops a snapshot partly received whose last entry this node's log
    /// holds (it equals the leader's up to `matched`) or knows committed.
    /// It adds nothing (installed, it would only compact the log), and no
    /// leader goes on with it: the leader that sent it sends entries once
    /// this node holds the log from its base on (a transfer begun while it
    /// lagged, then overtaken by batches already on their way), and a
    /// transfer starts from offset 0, which replaces it. Kept, it held up
    /// to the snapshot's size in memory until the next transfer, and
    /// [`Replica::may_block`] said true for every input. A later piece of
    /// it still on its way is answered as after a restart (0 bytes held),
    /// or as installed once this node knows it committed; the leader that
    /// ended the transfer ignores either. Entries that stop short of its
    /// last entry (batches sent before the transfer began) leave it: the
    /// transfer goes on.
    fn drop_covered_snapshot(&mut self, matched: Index) {
        let held = matched.max(self.commit);
        if self.incoming.as_ref().is_some_and(|inc| inc.last.index <= held) {
            self.incoming = None;
        }
    }

    /// Appends `entries` after `prev` if this log holds it; returns the index
    /// up to which the log now equals the leader's, or where to resume.
    fn append_after(&mut self, prev: Position, entries: Vec<Entry>) -> Result<Index, Index> {
        let base = self.log.base();
        // Entries a snapshot covers are committed: they are the leader's.
        let (prev, entries) = if prev.index < base.index {
            let skip = usize::try_from(base.index - prev.index).unwrap_or(usize::MAX);
            if entries.len() < skip {
                return Ok(base.index);
            }
            (base, entries[skip..].to_vec())
        } else {
            (prev, entries)
        };
        if !self.log.holds(prev) {
            return Err(self.resume_hint(prev));
        }
        if !consecutive(prev, &entries) {
            self.refused += 1;
            return Err(self.log.last().index.min(prev.index) + 1);
        }
        let matched = prev.index + entries.len() as u64;
        let mut new = Vec::new();
        for e in entries {
            match self.log.token_at(e.pos.index) {
                Some(t) if t == e.pos.token => {}
                Some(_) => {
                    if e.pos.index <= self.commit {
                        // A committed entry never changes: not from a correct leader.
                        self.refused += 1;
                        return Err(self.commit + 1);
                    }
                    self.log.truncate_after(e.pos.index - 1);
                    self.write(LogOp::TruncateAfter(e.pos.index - 1));
                    self.log.push(e.clone());
                    new.push(e);
                }
                None => {
                    self.log.push(e.clone());
                    new.push(e);
                }
            }
        }
        if !new.is_empty() {
            self.write(LogOp::Append(new));
        }
        Ok(matched)
    }

    /// Where the leader should resume when this log lacks `prev`: after its
    /// last entry if it is shorter, else at the start of the conflicting
    /// token's run (one round trip per divergent leadership, not per entry).
    fn resume_hint(&self, prev: Position) -> Index {
        let last = self.log.last();
        if last.index < prev.index {
            return last.index + 1;
        }
        let conflict = self.log.token_at(prev.index);
        let mut i = prev.index;
        while i > self.log.base().index + 1 && self.log.token_at(i - 1) == conflict {
            i -= 1;
        }
        i.max(self.commit + 1)
    }

    fn on_install(&mut self, now: Instant, i: NodeId, token: FencingToken, chunk: SnapshotChunk) {
        if !self.accept_leader_token(token) {
            return;
        }
        let last = chunk.last;
        let received = self.receive_snapshot(now, chunk);
        if let Some(received) = received {
            self.send(i, ReplicaMessage::SnapshotReply { token, last, received });
        }
    }

    /// Adds a snapshot piece; installs the snapshot once whole. Returns the
    /// bytes held, or `None` for a piece refused.
    fn receive_snapshot(&mut self, now: Instant, chunk: SnapshotChunk) -> Option<u64> {
        if chunk.total > self.cfg.max_snapshot_bytes
            || chunk.data.len() > self.cfg.snapshot_chunk_bytes
        {
            self.refused += 1;
            return None;
        }
        if chunk.last.index <= self.commit {
            // Already beyond it: nothing to install.
            return Some(chunk.total);
        }
        if chunk.offset == 0 {
            self.incoming = Some(Incoming {
                last: chunk.last,
                membership: chunk.membership.clone(),
                total: chunk.total,
                data: Vec::with_capacity(usize::try_from(chunk.total).unwrap_or(0).min(1 << 20)),
            });
        }
        let Some(inc) = self.incoming.as_mut() else {
            // A later piece of a transfer this node does not hold (it
            // restarted midway): ask for the whole snapshot again.
            return Some(0);
        };
        if inc.last != chunk.last || inc.total != chunk.total || inc.membership != chunk.membership
        {
            return Some(0);
        }
        if chunk.offset == inc.data.len() as u64 {
            inc.data.extend_from_slice(&chunk.data);
        }
        let held = inc.data.len() as u64;
        if held < inc.total {
            return Some(held);
        }
        let Incoming { last, data, membership, .. } = self.incoming.take()?;
        if let Err(_why) = self.sm.restore(&data) {
            self.refused += 1;
            return Some(0);
        }
        self.commit = last.index;
        self.applied = last.index;
        self.snapshot = Some((last, data.clone()));
        if self.log.holds(last) {
            // The log already holds the snapshot's last entry, so the entries
            // after it are the same history, committed ones among them (this
            // node may have acknowledged them before it restarted and forgot
            // its commit index): keep them, as Raft does.
            self.log.compact(last);
            self.write(LogOp::Compact { last, membership, data });
        } else {
            self.log.reset(last, membership.clone());
            self.write(LogOp::InstallSnapshot { last, membership, data });
        }
        self.apply(now);
        Some(held)
    }

    fn on_fetch(&mut self, i: NodeId, token: FencingToken, after: Index, offset: u64) {
        let last = self.log.last();
        let (entries, snapshot) = if after >= self.log.base().index {
            let entries =
                self.log.slice(after + 1, self.cfg.max_append_entries, self.cfg.max_append_bytes);
            (entries, None)
        } else {
            (Vec::new(), self.snapshot_chunk(offset))
        };
        self.send(i, ReplicaMessage::FetchReply { token, after, entries, snapshot, last });
    }

    // ---- Answers, on the leader ----

    fn lead_of(&mut self, token: FencingToken) -> Option<&mut Lead> {
        self.lead.as_mut().filter(|l| l.token == token)
    }

    fn on_sync_reply(
        &mut self,
        now: Instant,
        i: NodeId,
        token: FencingToken,
        last: Option<Position>,
    ) {
        let Some(lead) = self.lead_of(token) else { return };
        lead.heard.insert(i, now);
        if let (Phase::Syncing { answers }, Some(last)) = (&mut lead.phase, last) {
            answers.insert(i, last);
        }
    }

    fn on_append_reply(
        &mut self,
        now: Instant,
        i: NodeId,
        token: FencingToken,
        round: u64,
        result: Result<Index, Index>,
    ) {
        let last = self.log.last().index;
        let base = self.log.base().index;
        let window = self.cfg.max_in_flight_bytes;
        let Some(lead) = self.lead_of(token) else { return };
        if round > lead.round {
            // Echoes a round this leader never sent.
            self.refused += 1;
            return;
        }
        lead.heard.insert(i, now);
        let Some(peer) = lead.peers.get_mut(&i) else {
            // Not a member this leader replicates to (any more).
            return;
        };
        peer.acked_round = peer.acked_round.max(round);
        match result {
            Ok(matched) if matched <= last => {
                peer.matched = peer.matched.max(matched);
                peer.next = peer.next.max(matched + 1);
                if peer.next > base {
                    // It holds the log from the base on: no snapshot is
                    // due (one begun while it lagged ends here). Left
                    // marked, it kept the window shut: one batch per
                    // heartbeat, nine entries a round with 100,000
                    // simulated sessions, and no commit without it.
                    peer.end_snapshot();
                }
                while peer.in_flight.front().is_some_and(|&(end, _)| end <= peer.matched) {
                    peer.in_flight.pop_front();
                }
                // Catching up: the next batches go on the answer, not at the
                // next heartbeat, while the window has room. (An answer
                // that acknowledges nothing new, a duplicate, sends nothing
                // into a full window: each would add a batch for good, and
                // a lossy link that duplicates made thousands.)
                let room = peer.has_room(window);
                if peer.next <= last && peer.snapshot_received.is_none() && room {
                    self.send_window(now, i);
                }
            }
            // Claims entries this leader never wrote.
            Ok(_) => self.refused += 1,
            Err(hint) => {
                // Every batch of the window behind a lost or reordered one
                // is refused: the window restarts from there once, not
                // once per refusal (each restart sent a window of its own,
                // and under loss and reordering their number grew without
                // bound: the simulator's event queue overflowed with
                // 10,000 sessions, 614,000 appends in flight among five
                // nodes). A refusal of a batch sent before the last restart
                // (an older round), or the same refusal again in its round,
                // is answered with one batch from the hint, the window left
                // as it is: one batch for one refused, so the batches on
                // the way never grow, and a lost restart is made up for
                // without waiting for the next heartbeat.
                let from = hint.clamp(peer.matched + 1, last + 1);
                let stale = |(at, r): (Index, u64)| round < r || (round == r && at == from);
                if peer.resent.is_some_and(stale) {
                    self.send_batch_from(i, from);
                    return;
                }
                if hint <= peer.matched {
                    // It no longer holds entries it acknowledged (it asks
                    // for one it matched): its disk was replaced or wiped
                    // (see "A lost disk" in docs/REPLICATION.md). Send it
                    // the log from where it ends; the commit index never
                    // goes back.
                    peer.matched = hint.saturating_sub(1);
                }
                let next = hint.clamp(peer.matched + 1, last + 1);
                peer.resent = Some((next, lead.round));
                peer.next = next;
                peer.in_flight.clear();
                self.send_to(now, i);
            }
        }
    }

    fn on_snapshot_reply(
        &mut self,
        now: Instant,
        i: NodeId,
        token: FencingToken,
        last: Position,
        received: u64,
    ) {
        let current = self.snapshot.as_ref().map(|(p, d)| (*p, d.len() as u64));
        let Some(lead) = self.lead_of(token) else { return };
        lead.heard.insert(i, now);
        let Some(peer) = lead.peers.get_mut(&i) else { return };
        let Some((snap, total)) = current.filter(|&(p, _)| p == last) else {
            // A reply about an older snapshot: start over with the current one.
            peer.end_snapshot();
            return;
        };
        if peer.snapshot_received.is_none() {
            return;
        }
        peer.snapshot_heard = Some(now);
        if received >= total {
            peer.end_snapshot();
            peer.in_flight.clear();
            peer.matched = peer.matched.max(snap.index);
            peer.next = snap.index + 1;
            self.send_window(now, i);
        } else {
            // What it holds (less than before if it restarted the
            // transfer). A piece refused after a lost one is sent again
            // from here at the next heartbeat: resending on every answer
            // that does not advance would answer each duplicate with a
            // window of duplicates.
            peer.snapshot_received = Some(received);
            self.send_window(now, i);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn on_fetch_reply(
        &mut self,
        now: Instant,
        i: NodeId,
        token: FencingToken,
        after: Index,
        entries: Vec<Entry>,
        snapshot: Option<SnapshotChunk>,
        last: Position,
    ) {
        let Some(lead) = self.lead_of(token) else { return };
        let Phase::Fetching { from, until, asked_after, .. } = lead.phase else { return };
        if from != i || after != asked_after || last < until {
            return;
        }
        if let Some(chunk) = snapshot {
            let received = self.receive_snapshot(now, chunk);
            let offset = if self.incoming.is_some() { received.unwrap_or(0) } else { 0 };
            let after = self.commit;
            self.set_fetch(now, after);
            self.send(i, ReplicaMessage::Fetch { token, after, offset });
            return;
        }
        let Some(token_after) = self.log.token_at(after) else { return };
        let prev = Position { token: token_after, index: after };
        if entries.is_empty() && !self.log.holds(until) {
            self.refused += 1;
            return;
        }
        // Merge the freshest log into this one: an entry of its own that
        // conflicts with it is removed (it cannot be committed, the freshest
        // log holds every committed entry), a matching one is kept. Nothing is
        // removed before its replacement arrived, so a fetch cut short leaves
        // a prefix of the freshest log, never less.
        let Ok(matched) = self.append_after(prev, entries) else {
            self.refused += 1;
            return;
        };
        if self.log.holds(until) {
            // Entries beyond the freshest log's end are stale too.
            if self.log.last().index > until.index {
                self.log.truncate_after(until.index);
                self.write(LogOp::TruncateAfter(until.index));
            }
            self.start_replicating(now);
        } else {
            let after = matched;
            self.set_fetch(now, after);
            self.send(i, ReplicaMessage::Fetch { token, after, offset: 0 });
        }
    }

    fn set_fetch(&mut self, now: Instant, after: Index) {
        let deadline = now + self.cfg.heartbeat_interval * 4;
        if let Some(Lead { phase: Phase::Fetching { asked_after, deadline: d, .. }, .. }) =
            self.lead.as_mut()
        {
            *asked_after = after;
            *d = deadline;
        }
    }
}

/// True if `entries` follow `prev` with consecutive indexes and tokens that
/// never go down.
fn consecutive(prev: Position, entries: &[Entry]) -> bool {
    let mut at = prev;
    for e in entries {
        if e.pos.index != at.index + 1 || e.pos.token < at.token {
            return false;
        }
        at = e.pos;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::Recorder;

    const LEADER: NodeId = NodeId(1);
    const TOKEN: FencingToken = FencingToken(1);

    /// Node 2 of three, following node 1 under token 1, with snapshot
    /// pieces of 16 bytes.
    fn follower() -> Replica<Recorder> {
        let voters = vec![NodeId(1), NodeId(2), NodeId(3)];
        let mut cfg = Config::new(NodeId(2), voters, Duration::from_millis(10));
        cfg.snapshot_chunk_bytes = 16;
        let mut r = Replica::new(cfg, Restored::default(), Recorder::default()).unwrap();
        r.set_leadership(Instant::ZERO, Some(LEADER), Some(TOKEN));
        r
    }

    /// The piece from `offset` of a 64-byte snapshot up to `last`.
    fn piece(r: &Replica<Recorder>, last: Index, offset: u64) -> ReplicaMessage {
        let chunk = SnapshotChunk {
            last: Position { token: TOKEN, index: last },
            total: 64,
            offset,
            data: vec![0; 16],
            membership: r.membership().clone(),
        };
        ReplicaMessage::InstallSnapshot { token: TOKEN, chunk }
    }

    /// The leader's entries `from..=to` (of token 1), after `from - 1`.
    fn append(from: Index, to: Index) -> ReplicaMessage {
        let prev = match from {
            1 => Position::ZERO,
            _ => Position { token: TOKEN, index: from - 1 },
        };
        let entries = (from..=to)
            .map(|index| Entry {
                pos: Position { token: TOKEN, index },
                payload: Payload::Command(vec![1]),
            })
            .collect();
        ReplicaMessage::Append { token: TOKEN, prev, entries, commit: 0, round: 0 }
    }

    /// A leader that fetched part of a snapshot from a fresher log, whose
    /// holder then fell silent, synchronises again and replicates its own
    /// log: the partial snapshot is dropped.
    #[test]
    fn a_leader_that_replicates_its_own_log_drops_a_snapshot_partly_fetched() {
        let voters = vec![NodeId(1), NodeId(2), NodeId(3)];
        let heartbeat = Duration::from_millis(10);
        let mut cfg = Config::new(NodeId(1), voters, heartbeat);
        cfg.snapshot_chunk_bytes = 16;
        let mut r = Replica::new(cfg, Restored::default(), Recorder::default()).unwrap();
        let mut now = Instant::ZERO;
        r.set_leadership(now, Some(NodeId(1)), Some(TOKEN));
        let _ = r.take_output();
        r.handle_persisted(now, r.unpersisted());
        // Node 2 holds a fresher log (of an earlier token): the leader
        // fetches it, and gets the first piece of its snapshot.
        let fresher = Position { token: FencingToken(0), index: 50 };
        let reply =
            |last| ReplicaMessage::SyncReply { token: TOKEN, last: Some(last), promised: TOKEN };
        r.handle_message(now, NodeId(2), reply(fresher));
        r.handle_message(now, NodeId(3), reply(Position::ZERO));
        let chunk = SnapshotChunk {
            last: fresher,
            total: 64,
            offset: 0,
            data: vec![0; 16],
            membership: r.membership().clone(),
        };
        let piece = ReplicaMessage::FetchReply {
            token: TOKEN,
            after: 0,
            entries: Vec::new(),
            snapshot: Some(chunk),
            last: fresher,
        };
        r.handle_message(now, NodeId(2), piece);
        assert!(r.incoming.is_some(), "the first piece is held");
        let _ = r.take_output();
        // Node 2 falls silent: past the fetch's deadline the leader
        // synchronises again, and node 3's promise with its own makes a
        // majority whose freshest log is its own.
        now = now + heartbeat * 5;
        r.handle_timeout(now);
        let _ = r.take_output();
        r.handle_message(now, NodeId(3), reply(Position::ZERO));
        assert_eq!(r.status().last.index, 1, "it replicates its own log, from its no-op");
        assert!(r.incoming.is_none(), "the partial snapshot is dropped");
        assert!(!r.may_block());
    }

    /// A follower sent the first piece of a snapshot up to 5 whose leader
    /// then sends it entries instead (the follower caught up past the
    /// leader's base through batches already on their way, and the leader
    /// abandons the transfer): once its log holds entry 5, the partial
    /// snapshot is dropped. Kept, it held up to the snapshot's size until
    /// another transfer, and `may_block` said true for every input.
    #[test]
    fn a_partial_snapshot_is_dropped_once_the_log_holds_its_last_entry() {
        let mut r = follower();
        r.handle_message(Instant::ZERO, LEADER, piece(&r, 5, 0));
        assert!(r.incoming.is_some(), "the first piece is held");
        assert!(r.may_block(), "the last piece would restore the state machine");
        r.handle_message(Instant::ZERO, LEADER, append(1, 6));
        assert_eq!(r.status().last.index, 6);
        assert!(r.incoming.is_none(), "the log holds the snapshot's last entry: it is dropped");
        assert!(!r.may_block());
    }

    /// Entries that stop short of the snapshot's last entry (batches sent
    /// before the transfer began) leave the transfer as it is: its next
    /// piece is taken.
    #[test]
    fn a_partial_snapshot_is_kept_while_the_log_is_short_of_its_last_entry() {
        let mut r = follower();
        r.handle_message(Instant::ZERO, LEADER, piece(&r, 5, 0));
        r.handle_message(Instant::ZERO, LEADER, append(1, 4));
        assert_eq!(r.status().last.index, 4);
        r.handle_message(Instant::ZERO, LEADER, piece(&r, 5, 16));
        assert_eq!(r.incoming.as_ref().map(|inc| inc.data.len()), Some(32));
    }
}
