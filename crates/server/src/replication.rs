//! The replicated log's figures as this node holds it: one function for
//! `/v1/status` and for the log gauges of `/metrics`, so both show the same.

use tenure_api::{FollowerBody, ReplicationBody};
use tenure_kv::Store;
use tenure_node::Replicated;

/// The replicated log as this node holds it, with each follower's lag (on
/// the leader): what `/v1/status` shows and the log gauges of `/metrics`
/// export.
pub(crate) fn replication(kv: &Replicated<Store>) -> ReplicationBody {
    let s = kv.status();
    ReplicationBody {
        last_index: s.last.index,
        commit_index: s.commit,
        applied_index: s.applied,
        revision: kv.read_stale(Store::revision).0,
        followers: s
            .followers
            .iter()
            .map(|(id, index)| FollowerBody {
                id: id.0,
                match_index: *index,
                lag_entries: s.last.index.saturating_sub(*index),
            })
            .collect(),
    }
}
