//! Following one election's leadership through the store's changes: the
//! candidates as of a revision, updated change by change, and an event
//! whenever the leader after a revision differs from the one before it (a
//! new leader, a proclaim, or no leader at all).
//!
//! An observer that resumes after revision `N` needs the candidates as
//! they stood at `N`, which the store no longer holds: [`Observed::at`]
//! rebuilds them from the store now and its change history after `N`, so
//! that the changes after `N` replay into exactly the observations an
//! observer that never left was told.

use std::collections::{BTreeMap, BTreeSet};
use tenure_kv::{
    candidate_key, prefix, Candidate, Change, ChangeKind, Compacted, Standing, Store, MAX_HISTORY,
};

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
    /// Keys whose value is not known (rebuilt by [`Observed::at`]): each
    /// is overwritten before it could be told.
    unknown: BTreeSet<String>,
    /// Set when an observation told a value that was not known.
    told_unknown: bool,
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
        Observed { candidates, ..Observed::default() }
    }

    /// The leader now.
    pub fn leader(&self) -> Option<&Candidate> {
        self.leader_key().map(|(_, c)| c)
    }

    fn leader_key(&self) -> Option<(&String, &Candidate)> {
        self.candidates.iter().min_by_key(|(_, c)| c.create_revision)
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
            self.unknown.remove(&change.kv.key);
            let end_of_revision = changes.get(i + 1).is_none_or(|n| n.revision != change.revision);
            if !end_of_revision {
                continue;
            }
            let after = identity(self.leader());
            if after != before {
                let leader = self.leader_key().map(|(k, _)| k);
                self.told_unknown |= leader.is_some_and(|k| self.unknown.contains(k));
                seen.push(self.now(change.revision));
                before = after;
            }
        }
        seen
    }

    /// The candidates of `name` as they stood at `revision` (at most the
    /// store's), rebuilt from `store` now and its history after `revision`;
    /// [`Compacted`] when that history, or the write that set a value an
    /// observer resuming there would be told, is no longer kept.
    ///
    /// The history after `revision` is undone newest first: a key created
    /// after it was absent; a key removed after it was there, with the
    /// value the removal reports; a key overwritten (a proclaim) after it
    /// was there with a value only an older change holds. That value is
    /// needed only if the candidate comes to lead before it is overwritten
    /// (a waiting candidate whose predecessor leaves, then proclaims); a
    /// trial replay tells, and then it is read from the history before
    /// `revision`. A candidate's `mod_revision` at `revision` is only known
    /// to be at most `revision` unless read there: that is all the
    /// observations compare (a later proclaim has a larger one).
    pub fn at(store: &Store, name: &str, revision: u64) -> Result<Observed, Compacted> {
        let prefix = prefix(name);
        let mut then = Observed::new(Standing::read(store, name), name);
        // The history holds at most MAX_HISTORY changes: this is all of it.
        let later = store.changes_since(&prefix, revision + 1, MAX_HISTORY)?;
        for change in later.iter().rev() {
            let key = &change.kv.key;
            let Some(mut before) = Candidate::from_kv(&change.kv) else { continue };
            before.mod_revision = revision;
            match change.kind {
                ChangeKind::Put if change.kv.create_revision == change.revision => {
                    then.candidates.remove(key);
                    then.unknown.remove(key);
                }
                ChangeKind::Put => {
                    then.candidates.insert(key.clone(), before);
                    then.unknown.insert(key.clone());
                }
                ChangeKind::Delete | ChangeKind::Revoked | ChangeKind::Expired => {
                    then.candidates.insert(key.clone(), before);
                    then.unknown.remove(key);
                }
            }
        }
        let mut trial = then.clone();
        trial.apply(&later);
        if !trial.told_unknown {
            return Ok(then);
        }
        let oldest = then.unknown.iter().filter_map(|k| then.candidates.get(k));
        let oldest = oldest.map(|c| c.create_revision).min().unwrap_or(revision);
        let earlier = store.changes_since(&prefix, oldest, MAX_HISTORY)?;
        for change in earlier.iter().take_while(|c| c.revision <= revision) {
            let key = &change.kv.key;
            if change.kind != ChangeKind::Put || !then.unknown.contains(key) {
                continue;
            }
            if let Some(c) = then.candidates.get_mut(key) {
                c.value.clone_from(&change.kv.value);
                c.mod_revision = change.revision;
            }
        }
        // Each such key was created at or after `oldest`, and the history
        // from `oldest` on is kept, so its value was read.
        then.unknown.clear();
        Ok(then)
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
    }

    /// A small deterministic generator (xorshift), for the command mix.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }
    }

    /// Random campaigns, proclaims, resignations, session ends and writes
    /// of other keys, in `name` and another election, on a store; returns
    /// it (its history complete) with every observation an observer of
    /// `name` that never left was told, after the first.
    fn random_history(seed: u64, commands: usize) -> (Store, Vec<Observation>) {
        use tenure_kv::{campaign, proclaim, resign, Command, Response};
        let mut rng = Rng(seed | 1);
        let mut store = Store::default();
        let mut sessions = Vec::new();
        let mut observed = Observed::default();
        let mut told = Vec::new();
        for i in 0..commands {
            let before = store.revision();
            let name = if rng.below(4) == 0 { "other" } else { "db" };
            let value = format!("v{i}").into_bytes();
            let pick = |rng: &mut Rng, s: &Vec<LeaseId>| s[rng.below(s.len() as u64) as usize];
            let command = match rng.below(8) {
                _ if sessions.is_empty() => Command::Grant { ttl_ms: 10_000 },
                0 => Command::Grant { ttl_ms: 10_000 },
                1 | 2 => campaign(name, pick(&mut rng, &sessions), &value).unwrap(),
                3 => {
                    // The leader's proclaim, when there is one.
                    let Some(l) = Standing::read(&store, name).leader().cloned() else { continue };
                    proclaim(name, l.session, l.create_revision, &value).unwrap()
                }
                4 => resign(name, pick(&mut rng, &sessions)),
                5 => Command::Revoke { lease: pick(&mut rng, &sessions) },
                6 => Command::Expire { lease: pick(&mut rng, &sessions) },
                _ => Command::Put {
                    key: format!("app/{}", rng.below(3)),
                    value,
                    if_mod_revision: None,
                    lease: None,
                },
            };
            if let Response::Granted { lease, .. } = store.execute(&command) {
                sessions.push(lease);
            }
            let changes = store.changes_since(&prefix("db"), before + 1, MAX_HISTORY).unwrap();
            told.extend(observed.apply(&changes));
        }
        (store, told)
    }

    #[test]
    fn an_observer_resumed_after_any_revision_is_told_exactly_what_it_missed() {
        for seed in 1..=20 {
            let (store, told) = random_history(seed, 300);
            assert!(told.len() > 10, "seed {seed}: too few observations to mean much");
            for after in 0..=store.revision() {
                let mut resumed = Observed::at(&store, "db", after)
                    .unwrap_or_else(|e| panic!("seed {seed}, after {after}: {e}"));
                let rest = store.changes_since(&prefix("db"), after + 1, MAX_HISTORY).unwrap();
                // What an observer is sent: the leader's session, value and
                // token, and the revision (a rebuilt candidate's
                // `mod_revision` is only known to be at most `after`).
                let missed: Vec<_> =
                    told.iter().filter(|o| revision_of(o) > after).map(summary).collect();
                let replayed: Vec<_> = resumed.apply(&rest).iter().map(summary).collect();
                assert_eq!(replayed, missed, "seed {seed}, after {after}");
                assert!(!resumed.told_unknown, "seed {seed}, after {after}");
            }
        }
    }

    fn revision_of(o: &Observation) -> u64 {
        match o {
            Observation::Leader { revision, .. } | Observation::NoLeader { revision } => *revision,
        }
    }

    #[test]
    fn a_resumption_needing_changes_no_longer_kept_is_compacted() {
        use tenure_kv::{campaign, proclaim, Command, Response};
        let mut store = Store::default();
        let grant = |store: &mut Store| match store.execute(&Command::Grant { ttl_ms: 10_000 }) {
            Response::Granted { lease, .. } => lease,
            other => panic!("{other:?}"),
        };
        let (a, b) = (grant(&mut store), grant(&mut store));
        store.execute(&campaign("db", a, b"a").unwrap());
        store.execute(&campaign("db", b, b"b").unwrap());
        let b_joined = store.revision();
        // Enough other writes that B's campaign leaves the history.
        for i in 0..MAX_HISTORY {
            let key = format!("k{}", i % 10);
            store.execute(&Command::Put { key, value: vec![], if_mod_revision: None, lease: None });
        }
        let resume_at = store.revision();
        assert!(Observed::at(&store, "db", resume_at).is_ok(), "nothing changed since");
        // A resigns (B leads with the value of its campaign), then B proclaims:
        // B's value at `resume_at` is in its campaign only, compacted.
        store.execute(&tenure_kv::resign("db", a));
        let token = Standing::read(&store, "db").leader().unwrap().create_revision;
        assert_eq!(token, b_joined);
        store.execute(&proclaim("db", b, token, b"b2").unwrap());
        let err = Observed::at(&store, "db", resume_at).unwrap_err();
        assert_eq!(err.current, store.revision());
        assert!(Observed::at(&store, "db", b_joined - 1).is_err(), "before the history kept");
        // Once B leads, its older value is never told: a resumption from
        // then on needs nothing older.
        assert!(Observed::at(&store, "db", store.revision() - 1).is_ok());
    }
}
