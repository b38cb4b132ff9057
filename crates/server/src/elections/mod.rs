//! Named elections for applications, over the replicated store
//! (docs/ELECTIONS.md): a candidate is the key
//! `_tenure/elections/<name>/<session as 16 hex digits>`, attached to its
//! session; the leader is the candidate with the lowest `create_revision`,
//! and that revision is its fencing token. Revisions are cluster-wide and
//! only grow, so each new leadership of a name has a larger token than
//! every earlier one, across restarts and tenure failovers.
//!
//! The recipe itself (names and keys, the caps, the campaign, resign and
//! proclaim transactions and how their answers read, the queue and where a
//! session stands) is `tenure_kv`'s (`crates/kv/src/election.rs`), the same
//! pure functions the simulator runs. Here is what only the server has:
//!
//! * [`hub`] and [`wait`]: waiting for leadership, woken only when the
//!   candidate ahead leaves (no herd).
//! * [`observe`]: the leadership of one name, followed change by change.
//!
//! The HTTP endpoints are in `crate::http` (module `elections`).

pub mod hub;
pub mod observe;
pub mod wait;

use std::time::Duration;
use tenure_kv::{Change, MAX_CHANGES_PER_REVISION};

/// Keys under this prefix belong to tenure itself: the key-value API
/// refuses to write them (only the election calls change them).
pub const RESERVED_PREFIX: &str = "_tenure/";

/// True if the key-value API must not write `key`.
pub fn is_reserved(key: &str) -> bool {
    key.starts_with(RESERVED_PREFIX)
}

/// The longest a `wait` long poll lasts.
pub const MAX_WAIT: Duration = Duration::from_secs(60);

/// How long a `wait` lasts without `timeout_ms`.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(30);

/// Most changes read from the store's history at once (by the waiters'
/// dispatcher and by each observer): twice the most one revision holds, so
/// that a full batch holds at least one whole revision.
pub const CHANGE_BATCH: usize = 2 * MAX_CHANGES_PER_REVISION;

/// Keeps the whole revisions of a batch of changes read from `next` on
/// (a batch of [`CHANGE_BATCH`] may end in the middle of its last
/// revision: that one is dropped, to be read again) and returns the
/// revision to read from next time.
pub fn whole_revisions(changes: &mut Vec<Change>, next: u64) -> u64 {
    let Some(last) = changes.last().map(|c| c.revision) else { return next };
    if changes.len() >= CHANGE_BATCH {
        changes.retain(|c| c.revision < last);
        last
    } else {
        last + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tenure_kv::{ChangeKind, KeyValue};

    #[test]
    fn a_full_batch_gives_back_its_incomplete_last_revision() {
        let change = |revision| Change {
            revision,
            kind: ChangeKind::Put,
            kv: KeyValue {
                key: "k".into(),
                value: vec![],
                create_revision: 1,
                mod_revision: revision,
                version: 1,
                lease: None,
            },
            prev: None,
        };
        let mut some = vec![change(3), change(4), change(4)];
        assert_eq!(whole_revisions(&mut some, 3), 5);
        assert_eq!(some.len(), 3, "not full: every change is kept");
        let mut full: Vec<Change> =
            (0..CHANGE_BATCH).map(|i| change(10 + (i / MAX_CHANGES_PER_REVISION) as u64)).collect();
        let last = full.last().unwrap().revision;
        assert_eq!(whole_revisions(&mut full, 10), last, "the last revision is read again");
        assert!(full.iter().all(|c| c.revision < last) && !full.is_empty());
        assert_eq!(whole_revisions(&mut Vec::new(), 7), 7);
    }

    #[test]
    fn only_keys_under_the_reserved_prefix_are_reserved() {
        assert!(is_reserved("_tenure/x") && !is_reserved("_tenur") && !is_reserved("app/_tenure/"));
    }
}
