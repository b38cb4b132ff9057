//! Errors of the embedding API.

use crate::config::NodeConfigError;
use std::net::SocketAddr;
use std::path::PathBuf;
use tenure_core::{NodeId, ProtocolKind};

/// Why a node could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The configuration is invalid.
    #[error("invalid configuration: {0}")]
    InvalidConfig(#[from] NodeConfigError),
    /// The TLS files cannot be used.
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
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
    /// The state file is damaged.
    #[error(
        "the state file {path} is corrupted ({detail}); nothing was changed. Restore it from \
         backup or, if this node's vote may be discarded safely (a majority of the other \
         nodes is healthy), move it away: mv {path} {path}.corrupt"
    )]
    CorruptState {
        /// The state file.
        path: PathBuf,
        /// What is wrong with it.
        detail: String,
    },
    /// The state file belongs to another node or cluster.
    #[error(
        "the state file {path} belongs to node {found_node} of cluster {found_cluster:?}, \
         not node {expected_node} of cluster {expected_cluster:?}; nothing was changed. Point \
         --data-dir at this node's own directory, or, if that state is no longer needed, \
         move it away: mv {path} {path}.foreign"
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
         switch protocols, stop every node and move every node's state away \
         (mv {path} {path}.{found}) before starting them all with the new protocol"
    )]
    ProtocolMismatch {
        /// The state file.
        path: PathBuf,
        /// The protocol recorded in the file.
        found: ProtocolKind,
        /// The protocol this node is configured with.
        configured: ProtocolKind,
    },
    /// The state file was written by a newer, incompatible version of tenure.
    #[error(
        "the state file {path} has format version {version}, which this build does not \
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
    /// A file operation in the data directory failed.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
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
