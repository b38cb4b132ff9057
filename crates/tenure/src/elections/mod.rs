//! Named elections for applications, over the replicated store
//! (docs/ELECTIONS.md): a candidate is the key
//! `_tenure/elections/<name>/<session as 16 hex digits>`, attached to its
//! session; the leader is the candidate with the lowest `create_revision`,
//! and that revision is its fencing token. Revisions are cluster-wide and
//! only grow, so each new leadership of a name has a larger token than
//! every earlier one, across restarts and tenure failovers.
//!
//! * [`names`]: names and keys.
//! * [`queue`]: the queue, its leader and where a session stands, read
//!   from a state of the store; the caps ([`check_campaign`]).
//! * [`commands`]: campaign, resign and proclaim, each one transaction.
//! * [`hub`] and [`wait`]: waiting for leadership, woken only when the
//!   candidate ahead leaves (no herd).
//! * [`observe`]: the leadership of one name, followed change by change.
//!
//! The HTTP endpoints are in `crate::http` (module `elections`).

pub mod commands;
pub mod hub;
pub mod names;
pub mod observe;
pub mod queue;
pub mod wait;

use queue::{candidate_count, Names};
use std::time::Duration;
use tenure_kv::{Change, Store, MAX_CHANGES_PER_REVISION};

pub use names::{check_name, is_reserved, NameError, ELECTIONS_PREFIX, MAX_NAME_CHARS};

/// Most election names with at least one candidate. A campaign that would
/// open one more is refused (429). Ten per session at the store's
/// `MAX_LEASES` would be 100,000; issue 12's scale test asks for 100, and
/// listing every election stays a bounded read.
pub const MAX_ELECTIONS: usize = 10_000;

/// Most candidates of one name (429 beyond): as many as one session may
/// hold keys (`MAX_KEYS_PER_LEASE`), and a queue the leader-change
/// computation reads whole (a thousand keys, under the replica's lock).
pub const MAX_CANDIDATES: usize = 1_000;

/// The largest candidate value, in bytes (400 beyond): an address or a
/// small description, not data (the store's own limit is 64 KiB per value).
pub const MAX_CANDIDATE_VALUE_BYTES: usize = 4_096;

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

/// Why a campaign is refused before anything is proposed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CampaignRefusal {
    /// A malformed name.
    #[error(transparent)]
    Name(#[from] NameError),
    /// A value over [`MAX_CANDIDATE_VALUE_BYTES`].
    #[error("the value has {0} bytes; at most {MAX_CANDIDATE_VALUE_BYTES} are accepted")]
    ValueTooLarge(usize),
    /// The name has [`MAX_CANDIDATES`] candidates.
    #[error("election {0:?} has {MAX_CANDIDATES} candidates, the most accepted")]
    TooManyCandidates(String),
    /// [`MAX_ELECTIONS`] names have candidates, and this would be one more.
    #[error(
        "{MAX_ELECTIONS} elections have candidates, the most accepted; {0:?} would be one more"
    )]
    TooManyElections(String),
}

impl CampaignRefusal {
    /// True for a cap that others reaching may lift (429), false for bad input (400).
    pub fn is_cap(&self) -> bool {
        matches!(self, CampaignRefusal::TooManyCandidates(_) | CampaignRefusal::TooManyElections(_))
    }
}

/// The checks of a campaign that need no store: the name and the value.
pub fn check_input(name: &str, value: &[u8]) -> Result<(), CampaignRefusal> {
    check_name(name)?;
    if value.len() > MAX_CANDIDATE_VALUE_BYTES {
        return Err(CampaignRefusal::ValueTooLarge(value.len()));
    }
    Ok(())
}

/// The caps of a campaign in `name`, against `store`. Checked on the node
/// that takes the campaign, before proposing: campaigns in flight at once
/// may pass together and go over a cap by as many (the store does not know
/// elections, so the transaction cannot count).
pub fn check_campaign(store: &Store, name: &str) -> Result<(), CampaignRefusal> {
    match candidate_count(store, name, MAX_CANDIDATES) {
        MAX_CANDIDATES => Err(CampaignRefusal::TooManyCandidates(name.to_string())),
        0 if Names::new(store).take(MAX_ELECTIONS).count() == MAX_ELECTIONS => {
            Err(CampaignRefusal::TooManyElections(name.to_string()))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use tenure_kv::{ChangeKind, Command, KeyValue, LeaseId, Response};

    /// A new lease in `s`.
    pub(crate) fn grant(s: &mut Store) -> LeaseId {
        match s.execute(&Command::Grant { ttl_ms: 1_000 }) {
            Response::Granted { lease, .. } => lease,
            other => panic!("{other:?}"),
        }
    }

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
    fn caps_refuse_before_anything_is_written() {
        assert_eq!(check_input("db", &[0; MAX_CANDIDATE_VALUE_BYTES]), Ok(()));
        assert_eq!(
            check_input("db", &[0; MAX_CANDIDATE_VALUE_BYTES + 1]),
            Err(CampaignRefusal::ValueTooLarge(MAX_CANDIDATE_VALUE_BYTES + 1))
        );
        assert!(matches!(check_input("a b", b""), Err(CampaignRefusal::Name(_))));
        let mut s = Store::new();
        let sessions: Vec<LeaseId> = (0..MAX_CANDIDATES).map(|_| grant(&mut s)).collect();
        for (i, &session) in sessions.iter().enumerate() {
            assert_eq!(check_campaign(&s, "db"), Ok(()), "candidate {i}");
            s.execute(&commands::campaign("db", session, vec![]));
        }
        let full = check_campaign(&s, "db").unwrap_err();
        assert!(full.is_cap() && full.to_string().contains("1000 candidates"), "{full}");
        // Names: each session campaigns in up to its key limit.
        let per_session = tenure_kv::MAX_KEYS_PER_LEASE - 1;
        for i in 0..MAX_ELECTIONS - 1 {
            let session = sessions[1 + i / per_session];
            let done = s.execute(&commands::campaign(&format!("n{i}"), session, vec![]));
            assert!(matches!(done, Response::Txn { succeeded: true, .. }), "{done:?}");
        }
        assert_eq!(Names::new(&s).count(), MAX_ELECTIONS, "db and the others");
        let over = check_campaign(&s, "new").unwrap_err();
        assert!(over.is_cap() && over.to_string().contains("\"new\" would be one more"), "{over}");
        assert_eq!(check_campaign(&s, "n7"), Ok(()), "an election that exists takes more");
    }
}
