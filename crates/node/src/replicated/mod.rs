//! The replicated log on a running node: the sans-IO replica
//! ([`tenure_replica::Replica`]) over a [`StateMachine`], driven beside the
//! elector by a task of its own, its log on disk ([`crate::log_store`]).
//!
//! [`start_replicated`] starts a node with it and returns a [`Replicated`]
//! handle. Any node takes any request:
//!
//! * **Writes** ([`Replicated::propose`]): the leader proposes the command;
//!   commands that arrive while the log task is busy writing are proposed
//!   together, as one log write with one `fdatasync` (group commit, at most
//!   [`MAX_BATCH`]). A follower forwards the command to the leader over the
//!   peer connection ([`crate::wire::Forward`]) and relays the answer.
//! * **Linearizable reads** ([`Replicated::read`]): the leader serves them
//!   from its applied state while its election lease holds, otherwise after
//!   one round of acknowledgements from a majority (the replica's read
//!   index). A follower asks the leader for that index, waits until it has
//!   applied as far, and answers from its own state: the leader is asked a
//!   question, not sent the read.
//! * **Stale reads** ([`Replicated::read_stale`]): the local state, with the
//!   index it was applied up to.
//!
//! * **Leader-only operations**, for a service of the application that runs
//!   on the leader only (a lease clock): [`Replicated::propose_as`] proposes
//!   only as the ready leader of one fencing token, never forwarded;
//!   [`Replicated::confirm_leader`] confirms, as a linearizable read does,
//!   that this node still is that leader; [`Replicated::ready_leader`]
//!   tells when this node becomes or stops being the ready leader; and
//!   [`Replicated::ask_leader`] routes a question to the leader's service
//!   (module [`ask`]), which takes them from [`Replicated::take_asks`].
//!
//! While no leader is known, a request waits for one, at most
//! [`no_leader_wait`] of the election timeout, then fails with
//! [`WriteError::NoLeader`] or [`ReadFailure::NoLeader`]: nothing was written.
//! A write whose entry was sent but whose leader lost office before it
//! committed fails with [`WriteError::Unknown`]: a later leader may still
//! commit it, so it is reported as neither done nor failed.
//!
//! If the log cannot be written, the replica stops taking part (nothing of
//! that output is sent), proposals waiting on this node get
//! [`WriteError::Unknown`], and the task reopens the log from disk with a
//! backoff (from [`crate::PERSIST_RETRY_MIN`] to [`crate::PERSIST_RETRY_MAX`]).
//!
//! A compaction (the replica's snapshot, and the journal restarted from it) is
//! written by the log store's own thread while appends go on
//! ([`crate::log_store`]). One that fails is logged and counted
//! ([`LogCounters::compactions`]) and loses nothing: the journal still holds
//! every entry, and the next compaction tries again.

pub mod ask;
pub mod handover;
mod pipeline;
mod replies;
mod task;

use crate::error::StartError;
use crate::log_store::CompactionStats;
use crate::node::{start_with_data, Node};
use crate::shared::Shared;
use crate::sync::lock;
use crate::NodeConfig;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tenure_core::{Electorate, FencingToken};
use tenure_replica::{
    Change, ChangeError, Index, Membership, Replica, ReplicaStatus, StateMachine,
};
use tokio::sync::{mpsc, oneshot, watch};
use tracing::{info, warn};

pub use ask::{Ask, ASK_QUEUE_CAPACITY, MAX_ASKS_IN_FLIGHT, MAX_ASK_LEN};
// The routing of requests (here, to the leader, or held) is the sans-IO
// router of `tenure-replica`; its answers are this crate's errors.
pub use tenure_replica::router::{
    no_leader_wait, AskError, Committed, ReadFailure, WriteError, MAX_WAITING, REQUEST_TIMEOUT,
};

/// Client requests queued for the log task before callers wait.
pub const REQUEST_QUEUE_CAPACITY: usize = 4096;
/// Replicated-log frames from peers queued for the log task; frames beyond
/// are dropped and counted (the leader resends what is unanswered).
pub const PEER_DATA_QUEUE_CAPACITY: usize = 4096;
/// Most commands proposed as one log write.
pub const MAX_BATCH: usize = 1024;
/// Counters of the log task.
#[derive(Debug, Default)]
pub struct LogCounters {
    /// Log writes (each one `fdatasync`).
    pub writes: AtomicU64,
    /// Commands proposed on this node as leader.
    pub proposed: AtomicU64,
    /// Requests forwarded to the leader.
    pub forwarded: AtomicU64,
    /// Writes that ended unknown.
    pub unknown: AtomicU64,
    /// Bytes of the last snapshot written.
    pub snapshot_bytes: AtomicU64,
    /// Log writes that failed.
    pub write_failures: AtomicU64,
    /// Compactions of the log, written in the background, and those that
    /// failed.
    pub compactions: Arc<CompactionStats>,
}

/// A client request for the log task.
/// Where a write's outcome goes.
pub(crate) type WriteReply = oneshot::Sender<Result<Committed, WriteError>>;

pub(crate) enum Request {
    Propose {
        command: Vec<u8>,
        reply: WriteReply,
    },
    /// Several commands, handed to the router one after the other.
    ProposeTogether {
        commands: Vec<(Vec<u8>, WriteReply)>,
    },
    ProposeAs {
        token: FencingToken,
        command: Vec<u8>,
        reply: WriteReply,
    },
    Read {
        reply: oneshot::Sender<Result<Index, ReadFailure>>,
    },
    Confirm {
        token: FencingToken,
        reply: oneshot::Sender<Result<Index, ReadFailure>>,
    },
    Ask {
        request: Vec<u8>,
        reply: oneshot::Sender<Result<Vec<u8>, AskError>>,
    },
    Change {
        change: Change,
        reply: oneshot::Sender<Result<Membership, ChangeFailure>>,
    },
}

/// Why a change of members did not happen, or may not have.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ChangeFailure {
    /// Refused with nothing written: this node does not lead, another
    /// change is in progress, the change itself is wrong, or it would
    /// leave too few healthy voters ([`ChangeError`] says which).
    #[error(transparent)]
    Refused(#[from] ChangeError),
    /// The entry was written, but the leadership was lost (or the node
    /// stopped) before it committed: a later leader may still commit it.
    /// Look at the members again before retrying.
    #[error(
        "the change was written but leadership was lost before it committed: its outcome is \
         unknown; look at the members before retrying"
    )]
    Unknown,
    /// The log failed otherwise.
    #[error("the change failed: {0}")]
    Failed(String),
    /// The node is stopping.
    #[error("the node is stopping")]
    Stopped,
}

/// What the log task and every [`Replicated`] handle share.
pub(crate) struct LogShared<S> {
    /// Inputs are fed only by the log task; handles lock it briefly to read.
    pub(crate) replica: Mutex<Replica<S>>,
    pub(crate) requests: mpsc::Sender<Request>,
    /// The index applied so far.
    pub(crate) applied: watch::Sender<Index>,
    /// The token this node is the ready leader of, if it is one.
    pub(crate) ready_leader: watch::Sender<Option<FencingToken>>,
    /// The queue to the leader's service for asks.
    pub(crate) asks: ask::AskDesk,
    pub(crate) node: Arc<Shared>,
    pub(crate) no_leader_wait: Duration,
    pub(crate) counters: LogCounters,
}

/// A handle to a node's replicated state machine. Cheap to clone.
pub struct Replicated<S> {
    log: Arc<LogShared<S>>,
}

impl<S> Clone for Replicated<S> {
    fn clone(&self) -> Self {
        Replicated { log: self.log.clone() }
    }
}

/// Starts a node (as [`crate::start`] does) that also runs a replicated
/// state machine `S`, its log in `<data_dir>/log`. With `listener`, the
/// node serves peers on it instead of binding `config.listen`.
///
/// The log is opened after the data directory is locked; a damaged log
/// ([`crate::log_store::LogStoreError::Damaged`]) stops the start with an
/// error naming the file and the offset, and the node is stopped again.
pub async fn start_replicated<S>(
    config: NodeConfig,
    listener: Option<std::net::TcpListener>,
) -> Result<(Node, Replicated<S>), StartError>
where
    S: StateMachine + Default + Send + 'static,
{
    let (peer_tx, peer_rx) = mpsc::channel(PEER_DATA_QUEUE_CAPACITY);
    let dir = config.data_dir.join("log");
    let mut node = start_with_data(config, listener, peer_tx).await?;
    let counters = LogCounters::default();
    let (store, replica) =
        match task::open(&node.handle().shared, &dir, counters.compactions.clone()) {
            Ok(opened) => opened,
            Err(e) => {
                node.shutdown().await;
                return Err(e);
            }
        };
    let shared = node.handle().shared;
    let (requests, requests_rx) = mpsc::channel(REQUEST_QUEUE_CAPACITY);
    let status = replica.status();
    info!(
        node = %shared.config.id,
        dir = %dir.display(),
        last = ?status.last,
        snapshot = ?status.snapshot,
        "replicated log opened"
    );
    let log = Arc::new(LogShared {
        replica: Mutex::new(replica),
        requests,
        applied: watch::Sender::new(status.applied),
        ready_leader: watch::Sender::new(None),
        asks: ask::AskDesk::new(),
        no_leader_wait: no_leader_wait(shared.config.election_timeout),
        node: shared,
        counters,
    });
    let task = task::LogTask::new(log.clone(), store, dir, requests_rx, peer_rx);
    node.log = Some(tokio::spawn(task.run()));
    Ok((node, Replicated { log }))
}

impl<S: StateMachine + Send + 'static> Replicated<S> {
    /// Proposes `command` and waits until it is committed and applied on
    /// this node (forwarded to the leader from a follower), or fails.
    pub async fn propose(&self, command: Vec<u8>) -> Result<Committed, WriteError> {
        let (reply, answer) = oneshot::channel();
        self.send(Request::Propose { command, reply }).await.map_err(|()| WriteError::Stopped)?;
        answer.await.unwrap_or(Err(WriteError::Stopped))
    }

    /// Proposes `commands` in one request, so that they reach the log (or
    /// the leader, from a follower) together, in order, and are written in
    /// one batch unless the batch is full; waits for each as
    /// [`Replicated::propose`] does, and answers each.
    pub async fn propose_together(
        &self,
        commands: Vec<Vec<u8>>,
    ) -> Vec<Result<Committed, WriteError>> {
        let (commands, answers): (Vec<_>, Vec<_>) = commands
            .into_iter()
            .map(|command| {
                let (reply, answer) = oneshot::channel();
                ((command, reply), answer)
            })
            .unzip();
        let sent = self.send(Request::ProposeTogether { commands }).await;
        let mut results = Vec::with_capacity(answers.len());
        for answer in answers {
            let result = match sent {
                Ok(()) => answer.await.unwrap_or(Err(WriteError::Stopped)),
                Err(()) => Err(WriteError::Stopped),
            };
            results.push(result);
        }
        results
    }

    /// Proposes `command` only if this node is the ready leader of `token`
    /// when the command is proposed: never forwarded, never held for a
    /// leader. Otherwise it fails with [`WriteError::NotLeader`] and nothing
    /// is written. A decision taken under one leadership (an expiry on the
    /// leader's clock) must not be committed by a later one.
    pub async fn propose_as(
        &self,
        token: FencingToken,
        command: Vec<u8>,
    ) -> Result<Committed, WriteError> {
        let (reply, answer) = oneshot::channel();
        self.send(Request::ProposeAs { token, command, reply })
            .await
            .map_err(|()| WriteError::Stopped)?;
        answer.await.unwrap_or(Err(WriteError::Stopped))
    }

    /// Confirms that this node is the ready leader of `token` as a
    /// linearizable read does: at once while its election lease is valid,
    /// else once a majority acknowledged a round sent after this call. Never
    /// asks another node: anything else fails with [`ReadFailure::NotLeader`].
    /// Returns the read index, applied on this node when this returns.
    pub async fn confirm_leader(&self, token: FencingToken) -> Result<Index, ReadFailure> {
        if task::lease_token(&self.log.node) == Some(token) {
            if let Some(index) = lock(&self.log.replica).lease_read(Some(token)) {
                return Ok(index);
            }
        }
        let (reply, answer) = oneshot::channel();
        self.send(Request::Confirm { token, reply }).await.map_err(|()| ReadFailure::Stopped)?;
        answer.await.unwrap_or(Err(ReadFailure::Stopped))
    }

    /// The token this node is the ready leader of (its no-op applied: it
    /// takes writes), `None` while it is not; the receiver sees every
    /// change, as the log task sees it.
    pub fn ready_leader(&self) -> watch::Receiver<Option<FencingToken>> {
        self.log.ready_leader.subscribe()
    }

    /// Asks the service on the ready leader (see [`ask`]) and returns its
    /// answer: delivered here when this node is the ready leader, else
    /// forwarded to the leader; while no leader is known it waits at most
    /// [`Replicated::no_leader_wait`], then fails with
    /// [`AskError::NoLeader`]. A question sent to a leader that lost office
    /// before it answered is asked again of the next one: a service must
    /// answer a question asked twice as it would once.
    pub async fn ask_leader(&self, request: Vec<u8>) -> Result<Vec<u8>, AskError> {
        if request.len() > MAX_ASK_LEN {
            return Err(AskError::TooLarge { size: request.len(), max: MAX_ASK_LEN });
        }
        let (reply, answer) = oneshot::channel();
        self.send(Request::Ask { request, reply }).await.map_err(|()| AskError::Stopped)?;
        // The log task bounds a forwarded or held ask; one delivered here is
        // the service's to answer, bounded here.
        let bound = self.log.no_leader_wait + REQUEST_TIMEOUT;
        match tokio::time::timeout(bound, answer).await {
            Ok(answer) => answer.unwrap_or(Err(AskError::Stopped)),
            Err(_) => Err(AskError::Timeout(bound)),
        }
    }

    /// The asks delivered to this node while it is the ready leader, for
    /// the application's service; `Some` once (the first call), `None`
    /// after. Until it is taken, asks are refused ([`AskError::NoService`]).
    pub fn take_asks(&self) -> Option<mpsc::Receiver<Ask>> {
        self.log.asks.take()
    }

    /// An index at which a linearizable read may be served: the leader
    /// confirmed it led when the read began, and this node has applied at
    /// least as far when this returns.
    pub async fn read_index(&self) -> Result<Index, ReadFailure> {
        // The leader under a valid lease answers at once, without the task.
        let lease = task::lease_token(&self.log.node);
        if let Some(index) = lease.and_then(|t| lock(&self.log.replica).lease_read(Some(t))) {
            return Ok(index);
        }
        let (reply, answer) = oneshot::channel();
        self.send(Request::Read { reply }).await.map_err(|()| ReadFailure::Stopped)?;
        answer.await.unwrap_or(Err(ReadFailure::Stopped))
    }

    /// A linearizable read: `f` sees a state that includes every write
    /// committed before this call began. Returns what `f` returned and the
    /// index the state was applied up to.
    pub async fn read<R>(&self, f: impl FnOnce(&S) -> R) -> Result<(R, Index), ReadFailure> {
        self.read_index().await?;
        Ok(self.read_stale(f))
    }

    /// A read of this node's state as applied so far (possibly stale).
    pub fn read_stale<R>(&self, f: impl FnOnce(&S) -> R) -> (R, Index) {
        let r = lock(&self.log.replica);
        (f(r.state_machine()), r.applied())
    }

    /// The index applied so far; the receiver sees every advance.
    pub fn applied(&self) -> watch::Receiver<Index> {
        self.log.applied.subscribe()
    }

    /// The replica's state: log, commit, applied, snapshot, followers.
    pub fn status(&self) -> ReplicaStatus {
        lock(&self.log.replica).status()
    }

    /// The configuration of members this node's log holds now (committed
    /// or not), and what its elector counts by.
    pub fn membership(&self) -> (Membership, Electorate) {
        let r = lock(&self.log.replica);
        (r.membership().clone(), r.electorate())
    }

    /// Changes the members, one change at a time (`docs/MEMBERSHIP.md`):
    /// only on the ready leader (anywhere else it is refused with
    /// [`ChangeError::NotLeader`] naming the leader, and nothing written:
    /// send it there), only once the change before it committed, and only
    /// if a majority of the new configuration's voters answered the leader
    /// lately. Returns the configuration once the change committed.
    pub async fn change_members(&self, change: Change) -> Result<Membership, ChangeFailure> {
        let (reply, answer) = oneshot::channel();
        self.send(Request::Change { change, reply }).await.map_err(|()| ChangeFailure::Stopped)?;
        answer.await.unwrap_or(Err(ChangeFailure::Stopped))
    }

    /// The log task's counters.
    pub fn counters(&self) -> &LogCounters {
        &self.log.counters
    }

    /// How long a request waits for a leader before it fails.
    pub fn no_leader_wait(&self) -> Duration {
        self.log.no_leader_wait
    }

    async fn send(&self, req: Request) -> Result<(), ()> {
        if *self.log.node.stop.borrow() {
            return Err(());
        }
        self.log.requests.send(req).await.map_err(|_| ())
    }
}

/// Counts `n` with relaxed ordering (counters only).
pub(crate) fn bump(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

/// Logs that the log task stopped with requests still open.
pub(crate) fn warn_open(open: usize) {
    if open > 0 {
        warn!(open, "the replicated log stopped with requests open: they end as stopped");
    }
}
