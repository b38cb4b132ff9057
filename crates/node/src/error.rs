//! Errors of the embedding API.

use crate::config::NodeConfigError;
use std::net::SocketAddr;
use std::path::PathBuf;
use tenure_core::{HardState, NodeId, ProtocolKind};

/// Why a node could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The configuration is invalid.
    #[error("invalid configuration: {0}")]
    InvalidConfig(#[from] NodeConfigError),
    /// The TLS files cannot be used.
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
    /// The replicated log cannot be opened (damaged, or the file system refused).
    #[error(transparent)]
    Log(#[from] crate::log_store::LogStoreError),
    /// The replicated log's contents cannot be restored.
    #[error("the replicated log in {path} cannot be restored: {source}")]
    LogRestore {
        /// The log's directory.
        path: PathBuf,
        /// Why.
        source: tenure_replica::RestoreError,
    },
    /// The peer listener could not be bound.
    #[error("cannot listen for peers on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
    /// Another process (or another node in this process) uses the data directory.
    #[error(
        "the data directory is in use by another tenure process (lock file {path} is held); \
         stop that process or give this node its own --data-dir"
    )]
    DataDirLocked {
        /// The lock file.
        path: PathBuf,
    },
    /// The state file is damaged (both copies).
    #[error("the state file {path} is corrupted ({detail}); nothing was changed. {recovery}")]
    CorruptState {
        /// The state file.
        path: PathBuf,
        /// What is wrong with it.
        detail: String,
        /// The way out.
        recovery: Recovery,
    },
    /// The state file is missing from a data directory this node used before.
    #[error(
        "the state file {path} is missing, but the lock file {lock} shows that this data \
         directory was used before; nothing was changed. Starting afresh would forget this \
         node's term and vote, and it could then vote a second time in a term it already voted \
         in and help elect two leaders in one term. {recovery}"
    )]
    StateMissing {
        /// The state file.
        path: PathBuf,
        /// The lock file.
        lock: PathBuf,
        /// The way out.
        recovery: Recovery,
    },
    /// The state file holds an older state than the node recorded in its
    /// lock file before acting on it: a restored backup or a copy.
    #[error(
        "the state file {path} holds {}, not as new as {} that this node recorded in the lock file \
         {lock} before it sent a message; the state file was probably restored from a backup \
         or copied. Nothing was changed: starting from it could make the node vote a second \
         time in a term it already voted in. {}",
        show(found),
        show(recorded),
        Recovery::FromRecord { lock: lock.clone(), state: *recorded }
    )]
    StateRolledBack {
        /// The state file.
        path: PathBuf,
        /// The lock file.
        lock: PathBuf,
        /// What the state file holds.
        found: HardState,
        /// What the lock file records.
        recorded: HardState,
    },
    /// A data-directory path that must be a regular file is something else.
    #[error(
        "{path} is a {kind}, not a regular file; nothing was opened or changed. The data \
         directory's state and lock are regular files: remove it, or give the node another \
         --data-dir"
    )]
    NotAFile {
        /// The path.
        path: PathBuf,
        /// What it is ("FIFO", "directory", ...).
        kind: &'static str,
    },
    /// A reset was asked for that cannot be done safely.
    #[error("cannot reset the state: {reason}")]
    ResetImpossible {
        /// Why.
        reason: String,
    },
    /// The state file (or the lock file's record, or the incarnation file)
    /// belongs to another node or cluster. The fix it names: for this node's
    /// own directory under another cluster id, the cluster id (a fresh
    /// directory would forget the votes it cast); else `--data-dir`.
    #[error(
        "the file {path} belongs to node {found_node} of cluster {found_cluster:?}, \
         not node {expected_node} of cluster {expected_cluster:?}; nothing was changed. {}",
        foreign_state_fix(found_cluster, *found_node, *expected_node)
    )]
    ForeignState {
        /// The state file.
        path: PathBuf,
        /// The cluster id recorded in the file.
        found_cluster: String,
        /// The node id recorded in the file.
        found_node: NodeId,
        /// This node's cluster id.
        expected_cluster: String,
        /// This node's id.
        expected_node: NodeId,
    },
    /// The state file was written by a node running another election protocol.
    #[error(
        "the state file {path} was written by the {found} protocol, but this node is \
         configured for {configured}; nothing was changed. Terms and votes of one protocol \
         mean nothing to another: run the whole cluster with protocol = \"{found}\", or, to \
         switch protocols, stop every node and start each once with the new protocol and \
         --reset-state (a new state in a term above the old ones, with no vote)"
    )]
    ProtocolMismatch {
        /// The state file.
        path: PathBuf,
        /// The protocol recorded in the file.
        found: ProtocolKind,
        /// The protocol this node is configured with.
        configured: ProtocolKind,
    },
    /// The state file (or the lock file's record, or the incarnation file)
    /// was written by a newer, incompatible version of tenure.
    #[error(
        "the file {path} has format version {version}, which this build does not \
         support (it supports {supported}); run a newer tenure, nothing was changed"
    )]
    UnsupportedStateFormat {
        /// The state file.
        path: PathBuf,
        /// The version found.
        version: u32,
        /// The version this build writes.
        supported: u32,
    },
    /// The incarnation file is damaged (both copies): nothing tells which
    /// incarnation numbers the node used.
    #[error(
        "the incarnation file {path} is corrupted ({detail}); nothing was changed. This node \
         cannot tell which incarnation numbers it used, and must never use one twice (a true \
         notice that an earlier incarnation died would then stop the live one). Start it once \
         with `tenure server --reset-state` (embedded: tenure_node::reset_state): it takes a \
         new incarnation from the wall clock, above every number a count of starts reached"
    )]
    CorruptIncarnation {
        /// The incarnation file.
        path: PathBuf,
        /// What is wrong with it.
        detail: String,
    },
    /// A first incarnation is taken from the wall clock, and the clock reads
    /// an implausible time.
    #[error(
        "the incarnation file {path} is to be created from the wall clock, but the clock reads \
         {now_us} microseconds since the Unix epoch, outside 2020..2255; a number taken from \
         it could repeat one this node used. Set the system clock (NTP), then start again"
    )]
    IncarnationClock {
        /// The incarnation file.
        path: PathBuf,
        /// The clock's reading.
        now_us: u64,
    },
    /// A file operation in the data directory failed.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

/// How to get past a state that cannot be started from, without the node
/// voting twice in one term.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recovery {
    /// The lock file records the newest state the node acted on: a reset
    /// starts from it.
    FromRecord {
        /// The lock file.
        lock: PathBuf,
        /// The state it records.
        state: HardState,
    },
    /// Nothing records the node's votes: a reset needs a term above every
    /// term it may have voted in, which only the other nodes can tell.
    NeedsTerm {
        /// The lock file.
        lock: PathBuf,
        /// Why its record cannot be used.
        why: String,
    },
}

impl std::fmt::Display for Recovery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Recovery::FromRecord { lock, state } => write!(
                f,
                "The lock file {} records the newest state this node acted on ({}): start it \
                 once with `tenure server --reset-state` (embedded: tenure_node::reset_state) \
                 to write a new state file from that record",
                lock.display(),
                show(state)
            ),
            Recovery::NeedsTerm { lock, why } => write!(
                f,
                "The lock file {} holds no usable record of this node's term and vote ({why}), \
                 so nothing tells in which terms it voted. Read the term of the other nodes \
                 (`tenure status`; at least a majority of the other nodes must answer) and \
                 start this one once with `tenure server --reset-state --reset-term N`, N \
                 above every term they report: it then votes only in terms from N on",
                lock.display()
            ),
        }
    }
}

/// A term and vote, for messages.
fn show(state: &HardState) -> String {
    match state.voted_for {
        Some(v) => format!("term {}, voted for node {v}", state.term),
        None => format!("term {}, no vote", state.term),
    }
}

/// Why a leadership transfer did not happen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransferError {
    /// The election core refused it.
    #[error(transparent)]
    Refused(#[from] tenure_core::TransferError),
    /// The node is stopping or stopped.
    #[error("the node is stopped")]
    NodeStopped,
}

/// What to change when a data directory belongs to `found_node` of
/// `found_cluster` and this node is `expected_node`.
fn foreign_state_fix(found_cluster: &str, found_node: NodeId, expected_node: NodeId) -> String {
    if found_node == expected_node {
        format!(
            "If this node is node {found_node} of cluster {found_cluster:?}, start it with \
             --cluster-id {found_cluster} (cluster_id in the config file; the same on every \
             node); starting it afresh in another directory would forget the votes it cast. \
             Only if node {found_node} left cluster {found_cluster:?} for good may its whole \
             directory be moved away"
        )
    } else {
        format!(
            "Point --data-dir at this node's own directory (if node {found_node} left cluster \
             {found_cluster:?} for good, its whole directory may be moved away)"
        )
    }
}
