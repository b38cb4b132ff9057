//! The members a node joined a cluster with (`tenure server --join`), kept
//! in its data directory ([`RECORD_FILE`]) so that it restarts without
//! asking the cluster again, with or without `--join`: a cluster whose
//! voters all joined must restart even when none of them answers yet.
//!
//! The record only says whom to dial first: once the node runs, its
//! replicated log's configuration names the members, and the transport
//! follows it.

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::Path;
use tenure_core::NodeId;

/// The record's file name in the data directory.
pub const RECORD_FILE: &str = "joined.json";

/// What the record holds.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
struct Record {
    /// The cluster the node joined.
    cluster_id: String,
    /// The node's id.
    id: u64,
    /// The voters it joined with, `ID=IP:PORT`.
    peers: Vec<String>,
}

/// The members node `id` of cluster `cluster_id` joined with, if its data
/// directory `data_dir` holds a record of them; an error for a record that
/// cannot be read or is another node's.
pub fn read(
    data_dir: &Path,
    id: NodeId,
    cluster_id: &str,
) -> anyhow::Result<Option<Vec<(NodeId, SocketAddr)>>> {
    let path = data_dir.join(RECORD_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let record: Record = serde_json::from_str(&text).with_context(|| {
        format!(
            "{} is not a record of the members this node joined with; \
                                  remove it and start with --join URL",
            path.display()
        )
    })?;
    if record.id != id.0 || record.cluster_id != cluster_id {
        bail!(
            "{} is the record of node {} of cluster {:?}, not of node {id} of cluster \
             {cluster_id:?}: check --data-dir, --id and --cluster-id",
            path.display(),
            record.id,
            record.cluster_id
        );
    }
    let mut peers = Vec::new();
    for item in &record.peers {
        let parsed = item.split_once('=').and_then(|(id, addr)| {
            Some((NodeId(id.parse().ok().filter(|&n| n > 0)?), addr.parse().ok()?))
        });
        match parsed {
            Some(peer) => peers.push(peer),
            None => bail!("{}: `{item}` is not ID=IP:PORT", path.display()),
        }
    }
    Ok(Some(peers))
}

/// Records in `data_dir` (created if missing) that node `id` of
/// `cluster_id` joined with `peers`: written to a temporary file, synced,
/// then renamed over the record.
pub fn write(
    data_dir: &Path,
    id: NodeId,
    cluster_id: &str,
    peers: &[(NodeId, SocketAddr)],
) -> anyhow::Result<()> {
    use std::io::Write;
    std::fs::create_dir_all(data_dir)
        .with_context(|| format!("cannot create the data directory {}", data_dir.display()))?;
    let record = Record {
        cluster_id: cluster_id.to_string(),
        id: id.0,
        peers: peers.iter().map(|(id, addr)| format!("{id}={addr}")).collect(),
    };
    let path = data_dir.join(RECORD_FILE);
    let temporary = data_dir.join(format!("{RECORD_FILE}.tmp"));
    let text = serde_json::to_string_pretty(&record).context("the record as JSON")?;
    let mut f = std::fs::File::create(&temporary)
        .with_context(|| format!("cannot write {}", temporary.display()))?;
    f.write_all(text.as_bytes())
        .and_then(|()| f.sync_all())
        .with_context(|| format!("cannot write {}", temporary.display()))?;
    std::fs::rename(&temporary, &path)
        .with_context(|| format!("cannot rename {} to {}", temporary.display(), path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_back_and_is_only_this_nodes() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("node-4");
        assert_eq!(read(&data, NodeId(4), "c").unwrap(), None, "no record yet");
        let peers = vec![
            (NodeId(1), "127.0.0.1:7001".parse().unwrap()),
            (NodeId(2), "[::1]:7002".parse().unwrap()),
        ];
        write(&data, NodeId(4), "c", &peers).unwrap();
        assert_eq!(read(&data, NodeId(4), "c").unwrap(), Some(peers));
        let other = read(&data, NodeId(5), "c").unwrap_err().to_string();
        assert!(other.contains("not of node 5"), "{other}");
        assert!(read(&data, NodeId(4), "d").is_err());
        std::fs::write(data.join(RECORD_FILE), "{").unwrap();
        let bad = format!("{:#}", read(&data, NodeId(4), "c").unwrap_err());
        assert!(bad.contains("start with --join"), "{bad}");
    }
}
