//! Following one election's leadership through the store's changes: the
//! candidates as of a revision, updated change by change, and an event
//! whenever the leader after a revision differs from the one before it (a
//! new leader, a proclaim, or no leader at all).

use std::collections::BTreeMap;
use tenure_kv::{candidate_key, Candidate, Change, ChangeKind, Standing};

/// What an observer is told.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Observation {
    /// This candidate leads, as of `revision` (it took office, or
    /// proclaimed a new value then).
    Leader {
        /// The leader; its `create_revision` is the token.
        leader: Candidate,
        /// The revision of the change.
        revision: u64,
    },
    /// Nobody is a candidate any more, as of `revision`.
    NoLeader {
        /// The revision of the change.
        revision: u64,
    },
}

/// One election's candidates, kept up to date from changes.
#[derive(Clone, Debug, Default)]
pub struct Observed {
    /// By key.
    candidates: BTreeMap<String, Candidate>,
}

/// What identifies a leadership's state: its token and its last write.
fn identity(c: Option<&Candidate>) -> Option<(u64, u64)> {
    c.map(|c| (c.create_revision, c.mod_revision))
}

impl Observed {
    /// The election as `standing` holds it (keys by session).
    pub fn new(standing: Standing, name: &str) -> Observed {
        let candidates =
            standing.candidates.into_iter().map(|c| (candidate_key(name, c.session), c)).collect();
        Observed { candidates }
    }

    /// The leader now.
    pub fn leader(&self) -> Option<&Candidate> {
        self.candidates.values().min_by_key(|c| c.create_revision)
    }

    /// What an observer is told first, as of `revision`.
    pub fn now(&self, revision: u64) -> Observation {
        match self.leader() {
            Some(l) => Observation::Leader { leader: l.clone(), revision },
            None => Observation::NoLeader { revision },
        }
    }

    /// Applies `changes` (of this election's keys, in revision order,
    /// whole revisions) and returns what changed for observers: at most one
    /// observation per revision.
    pub fn apply(&mut self, changes: &[Change]) -> Vec<Observation> {
        let mut seen = Vec::new();
        let mut before = identity(self.leader());
        for (i, change) in changes.iter().enumerate() {
            match change.kind {
                ChangeKind::Put => {
                    if let Some(c) = Candidate::from_kv(&change.kv) {
                        self.candidates.insert(change.kv.key.clone(), c);
                    }
                }
                ChangeKind::Delete | ChangeKind::Revoked | ChangeKind::Expired => {
                    self.candidates.remove(&change.kv.key);
                }
            }
            let end_of_revision = changes.get(i + 1).is_none_or(|n| n.revision != change.revision);
            if !end_of_revision {
                continue;
            }
            let after = identity(self.leader());
            if after != before {
                seen.push(self.now(change.revision));
                before = after;
            }
        }
        seen
    }

    /// Starts again from `standing` at `revision` (the changes in between
    /// are no longer kept); what changed for observers, if anything.
    pub fn reset(&mut self, standing: Standing, name: &str, revision: u64) -> Option<Observation> {
        let before = identity(self.leader());
        *self = Observed::new(standing, name);
        (identity(self.leader()) != before).then(|| self.now(revision))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tenure_kv::{KeyValue, LeaseId};

    fn change(revision: u64, session: u64, created: u64, kind: ChangeKind, value: &str) -> Change {
        let kv = KeyValue {
            key: candidate_key("db", LeaseId(session)),
            value: value.into(),
            create_revision: created,
            mod_revision: revision,
            version: 1,
            lease: Some(LeaseId(session)),
        };
        Change { revision, kind, kv }
    }

    fn summary(o: &Observation) -> (u64, Option<(u64, String, u64)>) {
        match o {
            Observation::Leader { leader, revision } => (
                *revision,
                Some((
                    leader.session.0,
                    String::from_utf8(leader.value.clone()).unwrap(),
                    leader.create_revision,
                )),
            ),
            Observation::NoLeader { revision } => (*revision, None),
        }
    }

    #[test]
    fn every_leadership_change_and_proclaim_is_seen_and_nothing_else() {
        let mut o = Observed::default();
        assert_eq!(o.now(1), Observation::NoLeader { revision: 1 });
        let seen = o.apply(&[
            change(2, 1, 2, ChangeKind::Put, "a"),
            change(3, 2, 3, ChangeKind::Put, "b"), // behind: not a change of leader
            change(4, 1, 2, ChangeKind::Put, "a2"), // a proclaim
            change(5, 1, 2, ChangeKind::Delete, "a2"), // resigns: b leads
            change(6, 2, 3, ChangeKind::Revoked, "b"), // session ends: nobody
        ]);
        let seen: Vec<_> = seen.iter().map(summary).collect();
        assert_eq!(
            seen,
            [
                (2, Some((1, "a".to_string(), 2))),
                (4, Some((1, "a2".to_string(), 2))),
                (5, Some((2, "b".to_string(), 3))),
                (6, None),
            ]
        );
        // One revision that removes the leader and its successor's
        // predecessor at once is one observation.
        o.apply(&[change(7, 3, 7, ChangeKind::Put, "c"), change(8, 4, 8, ChangeKind::Put, "d")]);
        let seen = o.apply(&[
            change(9, 3, 7, ChangeKind::Expired, "c"),
            change(9, 5, 9, ChangeKind::Put, "e"),
        ]);
        assert_eq!(seen.iter().map(summary).collect::<Vec<_>>(), [(9, Some((4, "d".into(), 8)))]);
        let leader_only = Standing { candidates: vec![o.leader().unwrap().clone()] };
        assert!(o.reset(leader_only, "db", 10).is_none());
        assert_eq!(
            o.reset(Standing::default(), "db", 11),
            Some(Observation::NoLeader { revision: 11 })
        );
    }
}
