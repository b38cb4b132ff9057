//! The three changes of an election, each one transaction through the log,
//! so that none is ever half done:
//!
//! * **campaign**: if the candidate key is absent (`create_revision == 0`),
//!   create it attached to the session; otherwise nothing (a duplicate).
//!   The store refuses the whole command if the session does not exist.
//! * **resign**: if the key exists, delete it; otherwise nothing.
//! * **proclaim**: if the key's `create_revision` is still the one that
//!   led when the caller looked, put the new value with the same session.
//!   Revisions only grow, so no candidate can have joined ahead of a key
//!   that still has that `create_revision`: it still leads.

use super::names::candidate_key;
use tenure_kv::{Command, Compare, CompareOp, LeaseId, Target, TxnOp};

/// Joins `name`'s queue with `value`, unless `session` already did.
pub fn campaign(name: &str, session: LeaseId, value: Vec<u8>) -> Command {
    let key = candidate_key(name, session);
    Command::Txn {
        compare: vec![Compare {
            key: key.clone(),
            target: Target::CreateRevision(0),
            op: CompareOp::Equal,
        }],
        success: vec![TxnOp::Put { key: key.clone(), value, lease: Some(session) }],
        failure: vec![TxnOp::Get { key }],
    }
}

/// Leaves `name`'s queue, if `session` is in it.
pub fn resign(name: &str, session: LeaseId) -> Command {
    let key = candidate_key(name, session);
    Command::Txn {
        compare: vec![Compare {
            key: key.clone(),
            target: Target::CreateRevision(0),
            op: CompareOp::Greater,
        }],
        success: vec![TxnOp::Delete { key }],
        failure: vec![],
    }
}

/// Sets the value of `session`'s candidacy in `name`, if its key still has
/// `create_revision` `leading` (the leader's, when the caller looked).
pub fn proclaim(name: &str, session: LeaseId, leading: u64, value: Vec<u8>) -> Command {
    let key = candidate_key(name, session);
    Command::Txn {
        compare: vec![Compare {
            key: key.clone(),
            target: Target::CreateRevision(leading),
            op: CompareOp::Equal,
        }],
        success: vec![TxnOp::Put { key, value, lease: Some(session) }],
        failure: vec![],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elections::queue::Queue;
    use crate::elections::tests::grant;
    use tenure_kv::{Refusal, Response, Store};

    fn succeeded(r: &Response) -> bool {
        matches!(r, Response::Txn { succeeded: true, .. })
    }

    #[test]
    fn a_campaign_joins_once_and_only_with_a_live_session() {
        let mut s = Store::new();
        let a = grant(&mut s);
        let first = s.execute(&campaign("db", a, b"a".to_vec()));
        assert!(succeeded(&first), "{first:?}");
        let at = s.revision();
        let again = s.execute(&campaign("db", a, b"other".to_vec()));
        assert!(!succeeded(&again), "a duplicate: {again:?}");
        assert_eq!(s.revision(), at, "nothing written");
        assert_eq!(Queue::read(&s, "db").leader().unwrap().value, b"a");
        let unknown = s.execute(&campaign("db", LeaseId(77), vec![]));
        assert_eq!(unknown, Response::Refused(Refusal::LeaseNotFound(LeaseId(77))));
        assert_eq!(s.revision(), at);
    }

    #[test]
    fn resign_deletes_only_a_candidacy_that_exists() {
        let mut s = Store::new();
        let a = grant(&mut s);
        assert!(!succeeded(&s.execute(&resign("db", a))));
        assert_eq!(s.revision(), 0);
        s.execute(&campaign("db", a, vec![]));
        assert!(succeeded(&s.execute(&resign("db", a))));
        assert!(Queue::read(&s, "db").is_empty());
        assert_eq!(s.revision(), 2);
    }

    #[test]
    fn proclaim_keeps_the_token_and_needs_the_leadership_it_saw() {
        let mut s = Store::new();
        let (a, b) = (grant(&mut s), grant(&mut s));
        s.execute(&campaign("db", a, b"a1".to_vec()));
        s.execute(&campaign("db", b, b"b1".to_vec()));
        let token = Queue::read(&s, "db").leader().unwrap().create_revision;
        assert!(succeeded(&s.execute(&proclaim("db", a, token, b"a2".to_vec()))));
        let leader = Queue::read(&s, "db").leader().unwrap().clone();
        assert_eq!(
            (leader.session, leader.value, leader.create_revision),
            (a, b"a2".to_vec(), token)
        );
        assert_eq!(s.get(&candidate_key("db", a)).unwrap().lease, Some(a), "still attached");
        // A non-leader's key has another create_revision: nothing written.
        let at = s.revision();
        assert!(!succeeded(&s.execute(&proclaim("db", b, token, b"b2".to_vec()))));
        // The leader left and came back: it joined again, behind b.
        s.execute(&resign("db", a));
        s.execute(&campaign("db", a, b"a3".to_vec()));
        assert!(!succeeded(&s.execute(&proclaim("db", a, token, b"a4".to_vec()))));
        assert_eq!(Queue::read(&s, "db").leader().unwrap().session, b);
        assert_eq!(s.revision(), at + 2, "only the resign and the campaign wrote");
    }
}
