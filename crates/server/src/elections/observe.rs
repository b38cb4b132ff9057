//! Following one election's leadership through the store's changes: the
//! candidates as of a revision, updated change by change, and an event
//! whenever the leader after a revision differs from the one before it (a
//! new leader, a proclaim, or no leader at all).
//!
//! An observer that resumes after revision `N` needs the candidates as
//! they stood at `N`, which the store no longer holds: a [`Resume`]
//! rebuilds them from the store now and its change history after `N`, so
//! that the changes after `N` replay into exactly the observations an
//! observer that never left was told. It works in three steps, so that
//! little is done under the replica's lock: [`Resume::read`] copies the
//! candidates now and the election's changes since `N` without their
//! values (under the lock, at most [`MAX_RESUME_STEPS`] of 32 bytes);
//! [`Resume::rebuild`] undoes and replays them (outside it); and
//! [`Rebuilt::finish`] reads the few older values an observer will be
//! told (under the lock again, only when there are some).

use std::collections::{BTreeMap, BTreeSet};
use tenure_kv::{
    candidate_key, prefix, Candidate, Change, ChangeKind, Compacted, KeyValue, LeaseId, Standing,
    Store, MAX_HISTORY,
};

/// The most changes of one election a resumption copies under the
/// replica's lock, as [`Step`]s of 32 bytes each (no key, no value): at
/// most 320 KB. It is the whole history the store keeps
/// ([`MAX_HISTORY`]), so it never cuts a resumption short.
pub const MAX_RESUME_STEPS: usize = MAX_HISTORY;

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
    /// The keys in the queue's order (by `create_revision`): the first
    /// leads, found in O(log n).
    queue: BTreeSet<(u64, String)>,
    /// Keys whose value is not known (rebuilt by [`Resume::rebuild`]).
    unknown: BTreeSet<String>,
    /// The keys of [`Observed::unknown`] whose value an observation told
    /// (each before the key was written again).
    told_unknown: BTreeSet<String>,
}

/// What identifies a leadership's state: its token and its last write.
fn identity(c: Option<&Candidate>) -> Option<(u64, u64)> {
    c.map(|c| (c.create_revision, c.mod_revision))
}

impl Observed {
    /// The election as `standing` holds it (keys by session).
    pub fn new(standing: Standing, name: &str) -> Observed {
        let mut observed = Observed::default();
        for c in standing.candidates {
            observed.insert(candidate_key(name, c.session), c);
        }
        observed
    }

    fn insert(&mut self, key: String, c: Candidate) {
        let token = c.create_revision;
        if let Some(old) = self.candidates.insert(key.clone(), c) {
            self.queue.remove(&(old.create_revision, key.clone()));
        }
        self.queue.insert((token, key));
    }

    fn remove(&mut self, key: &str) {
        if let Some((key, old)) = self.candidates.remove_entry(key) {
            self.queue.remove(&(old.create_revision, key));
        }
    }

    /// The leader now.
    pub fn leader(&self) -> Option<&Candidate> {
        self.leader_key().map(|(_, c)| c)
    }

    fn leader_key(&self) -> Option<(&String, &Candidate)> {
        let (_, key) = self.queue.first()?;
        self.candidates.get_key_value(key)
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
                        self.insert(change.kv.key.clone(), c);
                    }
                }
                ChangeKind::Delete | ChangeKind::Revoked | ChangeKind::Expired => {
                    self.remove(&change.kv.key);
                }
            }
            self.unknown.remove(&change.kv.key);
            let end_of_revision = changes.get(i + 1).is_none_or(|n| n.revision != change.revision);
            if !end_of_revision {
                continue;
            }
            let after = identity(self.leader());
            if after != before {
                if let Some((key, _)) = self.leader_key() {
                    if self.unknown.contains(key) {
                        self.told_unknown.insert(key.clone());
                    }
                }
                seen.push(self.now(change.revision));
                before = after;
            }
        }
        seen
    }

    /// The candidates of `name` as they stood at `revision` (at most the
    /// store's), rebuilt from `store` now and its history after `revision`;
    /// [`Compacted`] when that history, or the write that set a value an
    /// observer resuming there would be told, is no longer kept. The
    /// [`Resume`] steps in one go (the server takes them apart, so as to
    /// hold the replica's lock only to read).
    pub fn at(store: &Store, name: &str, revision: u64) -> Result<Observed, Compacted> {
        Resume::read(store, name, revision)?.rebuild().finish(store)
    }
}

/// One change of one election's key, without the key or the value: what a
/// resumption copies of the history under the replica's lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Step {
    revision: u64,
    kind: ChangeKind,
    /// The candidate key's session (its key, within the election).
    session: LeaseId,
    create_revision: u64,
}

/// A resumption after revision `after`, as read under the replica's lock.
#[derive(Debug)]
pub struct Resume {
    name: String,
    after: u64,
    /// The candidates now.
    now: Standing,
    /// The election's changes after `after`, in revision order.
    steps: Vec<Step>,
}

/// Where a candidate's value at the resumption point is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source {
    /// Its first write after the point removed it, at this revision: the
    /// removal reports the value.
    Removal(u64),
    /// Its first write after the point was a put (a proclaim): the value is
    /// that of its latest put at or before the point.
    LastPut,
}

/// The election at the resumption point, but the values an observer will
/// be told that only the history before the point holds.
#[derive(Debug)]
pub struct Rebuilt {
    then: Observed,
    after: u64,
    /// The keys whose value at `after` will be told, and where it is: at
    /// most one per candidate at `after`.
    needed: BTreeMap<String, Source>,
}

impl Resume {
    /// Copies what a resumption after `after` needs (under the replica's
    /// lock): the candidates now (as a fresh stream does) and the
    /// election's changes since, as [`MAX_RESUME_STEPS`] steps at most;
    /// [`Compacted`] if those changes are no longer kept.
    pub fn read(store: &Store, name: &str, after: u64) -> Result<Resume, Compacted> {
        let prefix = prefix(name);
        let kept = store.history_between(after + 1, store.revision())?;
        let steps = kept
            .filter(|c| c.kv.key.starts_with(&prefix))
            .filter_map(|c| {
                let (_, session) = tenure_kv::parse_candidate_key(&c.kv.key)?;
                Some(Step {
                    revision: c.revision,
                    kind: c.kind,
                    session,
                    create_revision: c.kv.create_revision,
                })
            })
            .take(MAX_RESUME_STEPS)
            .collect();
        Ok(Resume { name: name.to_string(), after, now: Standing::read(store, name), steps })
    }

    /// The revision resumed after.
    pub fn after(&self) -> u64 {
        self.after
    }

    /// Rebuilds the election as it stood at `after` (no lock needed).
    ///
    /// The changes after `after` are undone newest first: a key created
    /// after it was absent; a key removed or overwritten after it was
    /// there, with a value only the history holds. That value is needed
    /// only if the candidate comes to lead before it is written again (a
    /// waiting candidate whose predecessor leaves, then proclaims or
    /// leaves): a trial replay tells which, and [`Rebuilt::finish`] reads
    /// them. A candidate's `mod_revision` at `after` is only known to be
    /// at most `after`: that is all the observations compare (a later
    /// proclaim has a larger one).
    pub fn rebuild(self) -> Rebuilt {
        let Resume { name, after, now, steps } = self;
        let mut then = Observed::new(now, &name);
        for step in steps.iter().rev() {
            let key = candidate_key(&name, step.session);
            if step.kind == ChangeKind::Put && step.create_revision == step.revision {
                then.remove(&key);
                then.unknown.remove(&key);
            } else {
                let before = Candidate {
                    session: step.session,
                    value: Vec::new(),
                    create_revision: step.create_revision,
                    mod_revision: after,
                };
                then.insert(key.clone(), before);
                then.unknown.insert(key);
            }
        }
        let changes: Vec<Change> = steps
            .iter()
            .map(|s| Change {
                revision: s.revision,
                kind: s.kind,
                kv: KeyValue {
                    key: candidate_key(&name, s.session),
                    value: Vec::new(),
                    create_revision: s.create_revision,
                    mod_revision: s.revision,
                    version: 0,
                    lease: Some(s.session),
                },
                prev: None,
            })
            .collect();
        let mut trial = then.clone();
        trial.apply(&changes);
        // Each told key's first write after `after`: where its value is.
        let mut needed: BTreeMap<String, Option<Source>> =
            trial.told_unknown.into_iter().map(|k| (k, None)).collect();
        for c in &changes {
            if let Some(source @ None) = needed.get_mut(&c.kv.key) {
                *source = Some(match c.kind {
                    ChangeKind::Put => Source::LastPut,
                    _ => Source::Removal(c.revision),
                });
            }
        }
        let needed = needed.into_iter().map(|(k, s)| (k, s.unwrap_or(Source::LastPut))).collect();
        then.unknown.clear();
        Rebuilt { then, after, needed }
    }
}

impl Rebuilt {
    /// True if no value needs reading from the history ([`Rebuilt::finish`]
    /// would not look at the store).
    pub fn is_complete(&self) -> bool {
        self.needed.is_empty()
    }

    /// The election at the resumption point, when
    /// [`Rebuilt::is_complete`] (no value is left to read; else the ones
    /// missing are empty).
    pub fn finish_complete(self) -> Observed {
        self.then
    }

    /// Reads the values an observer will be told from the history (under
    /// the replica's lock, when not [`Rebuilt::is_complete`]): each from
    /// the removal that reports it, or from the key's latest put at or
    /// before the resumption point, in one scan back from the point that
    /// stops at the oldest such key's creation. [`Compacted`] when one of
    /// them is no longer kept.
    pub fn finish(self, store: &Store) -> Result<Observed, Compacted> {
        let Rebuilt { mut then, after, needed } = self;
        let gone = || Compacted { compacted: store.compacted(), current: store.revision() };
        let mut wanted = BTreeSet::new();
        for (key, source) in &needed {
            let value = match source {
                Source::Removal(revision) => store
                    .history_between(*revision, *revision)?
                    .find(|c| &c.kv.key == key)
                    .map(|c| c.kv.value.clone())
                    .ok_or_else(gone)?,
                Source::LastPut => {
                    wanted.insert(key.as_str());
                    continue;
                }
            };
            if let Some(c) = then.candidates.get_mut(key) {
                c.value = value;
            }
        }
        let oldest = wanted.iter().filter_map(|k| then.candidates.get(*k));
        let oldest = oldest.map(|c| c.create_revision).min().unwrap_or(after);
        let kept = store.history_between(store.compacted() + 1, after)?;
        for change in kept.rev().take_while(|c| c.revision >= oldest) {
            if wanted.is_empty() {
                break;
            }
            if change.kind != ChangeKind::Put || !wanted.remove(change.kv.key.as_str()) {
                continue;
            }
            if let Some(c) = then.candidates.get_mut(&change.kv.key) {
                c.value.clone_from(&change.kv.value);
                c.mod_revision = change.revision;
            }
        }
        if !wanted.is_empty() {
            return Err(gone());
        }
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
        Change { revision, kind, kv, prev: None }
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
    fn random_history(seed: u64, commands: usize) -> (Store, Vec<Observation>, Queues) {
        use tenure_kv::{campaign, proclaim, resign, Command, Response};
        let mut rng = Rng(seed | 1);
        let mut store = Store::default();
        let mut sessions = Vec::new();
        let mut observed = Observed::default();
        let mut told = Vec::new();
        let mut queues = Queues::new();
        for i in 0..commands {
            let before = store.revision();
            let name = if rng.below(4) == 0 { "other" } else { "db" };
            let value = format!("v{i}").into_bytes();
            let pick = |rng: &mut Rng, s: &Vec<LeaseId>| s[rng.below(s.len() as u64) as usize];
            let command = match rng.below(8) {
                _ if sessions.is_empty() => Command::Grant { ttl_ms: 10_000, owner: None },
                0 => Command::Grant { ttl_ms: 10_000, owner: None },
                1 | 2 => campaign(name, pick(&mut rng, &sessions), &value).unwrap(),
                3 => {
                    // The leader's proclaim, when there is one.
                    let Some(l) = Standing::read(&store, name).leader().cloned() else { continue };
                    proclaim(name, l.session, l.create_revision, &value).unwrap()
                }
                4 => resign(name, pick(&mut rng, &sessions), None),
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
            queues.insert(store.revision(), queue_of(&observed));
        }
        (store, told, queues)
    }

    /// The queue an observer holds (sessions and tokens), by revision.
    type Queues = BTreeMap<u64, Vec<(u64, u64)>>;

    fn queue_of(o: &Observed) -> Vec<(u64, u64)> {
        o.queue.iter().map(|(token, key)| (o.candidates[key].session.0, *token)).collect()
    }

    #[test]
    fn an_observer_resumed_after_any_revision_is_told_exactly_what_it_missed() {
        for seed in 1..=20 {
            let (store, told, queues) = random_history(seed, 300);
            assert!(told.len() > 10, "seed {seed}: too few observations to mean much");
            for after in 0..=store.revision() {
                let mut resumed = Observed::at(&store, "db", after)
                    .unwrap_or_else(|e| panic!("seed {seed}, after {after}: {e}"));
                // The queue as it stood then, as an observer that stayed held it.
                let then = queues.range(..=after).next_back().map(|(_, q)| q.clone());
                assert_eq!(queue_of(&resumed), then.unwrap_or_default(), "seed {seed}, {after}");
                let rest = store.changes_since(&prefix("db"), after + 1, MAX_HISTORY).unwrap();
                // What an observer is sent: the leader's session, value and
                // token, and the revision (a rebuilt candidate's
                // `mod_revision` is only known to be at most `after`).
                let missed: Vec<_> =
                    told.iter().filter(|o| revision_of(o) > after).map(summary).collect();
                let replayed: Vec<_> = resumed.apply(&rest).iter().map(summary).collect();
                assert_eq!(replayed, missed, "seed {seed}, after {after}");
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
        let grant = |store: &mut Store| match store
            .execute(&Command::Grant { ttl_ms: 10_000, owner: None })
        {
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
        store.execute(&tenure_kv::resign("db", a, None));
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

    fn grant(store: &mut Store) -> LeaseId {
        match store.execute(&tenure_kv::Command::Grant { ttl_ms: 10_000, owner: None }) {
            tenure_kv::Response::Granted { lease, .. } => lease,
            other => panic!("{other:?}"),
        }
    }

    fn filler(store: &mut Store, writes: usize) {
        for i in 0..writes {
            let key = format!("k{}", i % 10);
            let put =
                tenure_kv::Command::Put { key, value: vec![], if_mod_revision: None, lease: None };
            store.execute(&put);
        }
    }

    #[test]
    fn only_the_values_an_observer_is_told_are_read_from_the_history() {
        use tenure_kv::{campaign, proclaim, resign};
        let mut store = Store::default();
        let (l, w) = (grant(&mut store), grant(&mut store));
        store.execute(&campaign("db", l, b"l").unwrap());
        let l_token = store.revision();
        // L's campaign leaves the history; W's, later, is kept.
        filler(&mut store, MAX_HISTORY);
        store.execute(&campaign("db", w, b"w").unwrap());
        let w_token = store.revision();
        let resume_at = store.revision();
        // L proclaims (its older value is never told: the proclaim's is),
        // resigns (W leads with its value at `resume_at`), W proclaims.
        store.execute(&proclaim("db", l, l_token, b"l2").unwrap());
        store.execute(&resign("db", l, None));
        store.execute(&proclaim("db", w, w_token, b"w2").unwrap());
        let mut resumed = Observed::at(&store, "db", resume_at)
            .unwrap_or_else(|e| panic!("L's older value is not needed: {e}"));
        let rest = store.changes_since(&prefix("db"), resume_at + 1, MAX_HISTORY).unwrap();
        let told: Vec<_> = resumed.apply(&rest).iter().map(summary).collect();
        let r = resume_at;
        assert_eq!(
            told,
            [
                (r + 1, Some((l.0, "l2".to_string(), l_token))),
                (r + 2, Some((w.0, "w".to_string(), w_token))),
                (r + 3, Some((w.0, "w2".to_string(), w_token))),
            ]
        );
        // W's value told at r + 2 is read from its campaign, the one value
        // looked up; the steps copied are the three changes since.
        let resume = Resume::read(&store, "db", resume_at).unwrap();
        assert_eq!(resume.steps.len(), 3);
        let rebuilt = resume.rebuild();
        let needed: Vec<_> = rebuilt.needed.iter().map(|(k, s)| (k.clone(), *s)).collect();
        assert_eq!(needed, [(candidate_key("db", w), Source::LastPut)]);
    }

    #[test]
    fn a_value_a_removal_reports_is_read_from_the_removal() {
        use tenure_kv::{campaign, resign};
        let mut store = Store::default();
        let (a, b, c) = (grant(&mut store), grant(&mut store), grant(&mut store));
        store.execute(&campaign("db", a, b"a").unwrap());
        store.execute(&campaign("db", b, b"b").unwrap());
        store.execute(&campaign("db", c, b"c").unwrap());
        // Every campaign leaves the history.
        filler(&mut store, MAX_HISTORY);
        let resume_at = store.revision();
        store.execute(&resign("db", a, None)); // B leads, with its value at `resume_at`
        store.execute(&resign("db", b, None)); // which only this removal reports
        let rebuilt = Resume::read(&store, "db", resume_at).unwrap().rebuild();
        assert_eq!(
            rebuilt.needed.values().copied().collect::<Vec<_>>(),
            [Source::Removal(resume_at + 2)]
        );
        let mut resumed = rebuilt.finish(&store).unwrap();
        let rest = store.changes_since(&prefix("db"), resume_at + 1, MAX_HISTORY).unwrap();
        let told: Vec<_> = resumed.apply(&rest).iter().map(|o| summary(o).1.unwrap().1).collect();
        assert_eq!(told, ["b", "c"]);
    }

    /// How long a resumption of a big election takes, by step (run with
    /// `cargo test -p tenure-server --lib observe::tests::resume_cost --
    /// --ignored --nocapture`): 1,000 candidates, and 9,000 proclaims
    /// since the point, by the leader and then by each successor in turn.
    #[test]
    #[ignore = "a measurement"]
    fn resume_cost() {
        use std::time::Instant;
        use tenure_kv::{campaign, proclaim, resign, Standing};
        let mut store = Store::default();
        let value = vec![b'x'; 4_000];
        let mut sessions = Vec::new();
        for _ in 0..1_000 {
            let s = grant(&mut store);
            store.execute(&campaign("db", s, &value).unwrap());
            sessions.push(s);
        }
        let resume_at = store.revision();
        for i in 0..9_000 {
            let l = Standing::read(&store, "db").leader().cloned().unwrap();
            if i % 10 == 9 {
                store.execute(&resign("db", l.session, None));
            } else {
                store.execute(&proclaim("db", l.session, l.create_revision, &value).unwrap());
            }
        }
        let started = Instant::now();
        let resume = Resume::read(&store, "db", resume_at).unwrap();
        let read = started.elapsed();
        let rebuilt = resume.rebuild();
        let rebuild = started.elapsed() - read;
        let needed = rebuilt.needed.len();
        let before_finish = started.elapsed();
        let resumed = rebuilt.finish(&store).unwrap();
        let finish = started.elapsed() - before_finish;
        assert_eq!(resumed.candidates.len(), 1_000);
        println!(
            "resume of 1,000 candidates after 9,000 changes: read (locked) {read:?}, \
             rebuild (unlocked) {rebuild:?}, finish (locked, {needed} values) {finish:?}"
        );
    }
}
