//! What a node that joined a cluster keeps in its data directory
//! ([`RECORD_FILE`]): the members it joined with, so that it restarts
//! without asking the cluster again (a cluster whose voters all joined must
//! restart even when none of them answers yet), and whether the cluster
//! added it, so that a restart never adds again a node that was removed
//! meanwhile.
//!
//! The members only say whom to dial first: once the node runs, its
//! replicated log's configuration names the members, and the transport
//! follows it.

use serde::{Deserialize, Serialize};
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use tenure_core::NodeId;

/// The record's file name in the data directory.
pub const RECORD_FILE: &str = "joined.json";

/// What the record holds.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct JoinRecord {
    /// The cluster the node joined.
    pub cluster_id: String,
    /// The node's id.
    pub id: u64,
    /// The voters it joined with, `ID=IP:PORT`.
    pub peers: Vec<String>,
    /// Whether the cluster added it (or held it already): a later start
    /// does not ask again.
    #[serde(default)]
    pub added: bool,
}

/// A record that cannot be read, written, or is another node's.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The file cannot be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a record.
    #[error(
        "{path} is not a record of the members this node joined with ({problem}); remove it and \
         start with --join URL"
    )]
    Bad {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// The record is another node's or another cluster's.
    #[error(
        "{path} is the record of node {id} of cluster {cluster:?}, not of this node: check \
         --data-dir, --id and --cluster-id"
    )]
    Other {
        /// The file.
        path: PathBuf,
        /// The node it names.
        id: u64,
        /// The cluster it names.
        cluster: String,
    },
}

impl JoinRecord {
    /// The record of node `id` of `cluster_id` joining with `peers`, not
    /// added yet.
    pub fn new(id: NodeId, cluster_id: &str, peers: &[(NodeId, SocketAddr)]) -> JoinRecord {
        JoinRecord {
            cluster_id: cluster_id.to_string(),
            id: id.0,
            peers: peers.iter().map(|(id, addr)| format!("{id}={addr}")).collect(),
            added: false,
        }
    }

    /// The members it names, and where to dial them.
    pub fn peers(&self, data_dir: &Path) -> Result<Vec<(NodeId, SocketAddr)>, RecordError> {
        let mut peers = Vec::new();
        for item in &self.peers {
            let parsed = item.split_once('=').and_then(|(id, addr)| {
                Some((NodeId(id.parse().ok().filter(|&n| n > 0)?), addr.parse().ok()?))
            });
            let Some(peer) = parsed else {
                return Err(RecordError::Bad {
                    path: data_dir.join(RECORD_FILE),
                    problem: format!("`{item}` is not ID=IP:PORT"),
                });
            };
            peers.push(peer);
        }
        Ok(peers)
    }
}

/// The record in `data_dir` of node `id` of `cluster_id`, if there is
/// one; an error for one that cannot be read or is another node's.
pub fn read(
    data_dir: &Path,
    id: NodeId,
    cluster_id: &str,
) -> Result<Option<JoinRecord>, RecordError> {
    let path = data_dir.join(RECORD_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(RecordError::Io { path, source }),
    };
    let record: JoinRecord = serde_json::from_str(&text)
        .map_err(|e| RecordError::Bad { path: path.clone(), problem: e.to_string() })?;
    if record.id != id.0 || record.cluster_id != cluster_id {
        return Err(RecordError::Other { path, id: record.id, cluster: record.cluster_id });
    }
    Ok(Some(record))
}

/// Writes `record` into `data_dir` (created if missing): to a temporary
/// file, synced, then renamed over the record.
pub fn write(data_dir: &Path, record: &JoinRecord) -> Result<(), RecordError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| RecordError::Io { path, source }
    };
    std::fs::create_dir_all(data_dir).map_err(io(data_dir))?;
    let path = data_dir.join(RECORD_FILE);
    let temporary = data_dir.join(format!("{RECORD_FILE}.tmp"));
    let text = serde_json::to_string_pretty(record).expect("a record is JSON");
    let mut f = std::fs::File::create(&temporary).map_err(io(&temporary))?;
    f.write_all(text.as_bytes()).and_then(|()| f.sync_all()).map_err(io(&temporary))?;
    std::fs::rename(&temporary, &path).map_err(io(&path))
}

/// Marks the record in `data_dir`, if any, as added.
pub fn mark_added(data_dir: &Path, id: NodeId, cluster_id: &str) -> Result<(), RecordError> {
    match read(data_dir, id, cluster_id)? {
        Some(record) if !record.added => write(data_dir, &JoinRecord { added: true, ..record }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_back_and_is_only_this_nodes() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("node-4");
        assert!(read(&data, NodeId(4), "c").unwrap().is_none(), "no record yet");
        let peers = vec![
            (NodeId(1), "127.0.0.1:7001".parse().unwrap()),
            (NodeId(2), "[::1]:7002".parse().unwrap()),
        ];
        write(&data, &JoinRecord::new(NodeId(4), "c", &peers)).unwrap();
        let record = read(&data, NodeId(4), "c").unwrap().unwrap();
        assert_eq!(record.peers(&data).unwrap(), peers);
        assert!(!record.added);
        mark_added(&data, NodeId(4), "c").unwrap();
        assert!(read(&data, NodeId(4), "c").unwrap().unwrap().added);
        let other = read(&data, NodeId(5), "c").unwrap_err().to_string();
        assert!(other.contains("not of this node"), "{other}");
        assert!(read(&data, NodeId(4), "d").is_err());
        std::fs::write(data.join(RECORD_FILE), "{").unwrap();
        let bad = read(&data, NodeId(4), "c").unwrap_err().to_string();
        assert!(bad.contains("start with --join"), "{bad}");
    }
}
