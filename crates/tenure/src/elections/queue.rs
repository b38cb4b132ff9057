//! An election's queue as the store holds it: its candidates in the order
//! they joined (their keys' `create_revision`), the first of them leading.
//! Read from a state of the store, under the replica's lock: pure
//! functions of a [`Store`].

use super::names::{after_name, candidate_key, name_prefix, parse_key, ELECTIONS_PREFIX};
use tenure_kv::{KeyValue, LeaseId, Store};

/// One candidate of an election.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// Its session.
    pub session: LeaseId,
    /// Its value (set by the campaign, changed by a proclaim).
    pub value: Vec<u8>,
    /// When it joined: its key's `create_revision`, the fencing token of
    /// its leadership once it leads.
    pub create_revision: u64,
    /// The revision of its last campaign or proclaim.
    pub mod_revision: u64,
}

impl Candidate {
    /// The candidate a key holds, if the key is a candidate key.
    pub fn from_kv(kv: &KeyValue) -> Option<Candidate> {
        let (_, session) = parse_key(&kv.key)?;
        Some(Candidate {
            session,
            value: kv.value.clone(),
            create_revision: kv.create_revision,
            mod_revision: kv.mod_revision,
        })
    }
}

/// The candidates of one election, in the order they joined.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Queue {
    /// Sorted by `create_revision` (distinct: one key per revision here).
    candidates: Vec<Candidate>,
}

impl Queue {
    /// The queue of `name` in `store`.
    pub fn read(store: &Store, name: &str) -> Queue {
        let prefix = name_prefix(name);
        let candidates = store
            .keys_from(&prefix)
            .take_while(|kv| kv.key.starts_with(&prefix))
            .filter_map(Candidate::from_kv)
            .collect();
        Queue::new(candidates)
    }

    /// A queue of these candidates, in any order.
    pub fn new(mut candidates: Vec<Candidate>) -> Queue {
        candidates.sort_by_key(|c| c.create_revision);
        Queue { candidates }
    }

    /// The leader: the candidate that joined first.
    pub fn leader(&self) -> Option<&Candidate> {
        self.candidates.first()
    }

    /// Every candidate, the leader first.
    pub fn candidates(&self) -> &[Candidate] {
        &self.candidates
    }

    /// How many candidates there are.
    pub fn len(&self) -> usize {
        self.candidates.len()
    }

    /// True if nobody is a candidate.
    pub fn is_empty(&self) -> bool {
        self.candidates.is_empty()
    }

    /// Where `session` stands: its candidacy and how many are ahead of it.
    pub fn position(&self, session: LeaseId) -> Option<(&Candidate, usize)> {
        self.candidates.iter().enumerate().find(|(_, c)| c.session == session).map(|(i, c)| (c, i))
    }

    /// The candidate just ahead of `session`'s: the one whose leaving it
    /// waits for (none if it leads or is not a candidate).
    pub fn predecessor(&self, session: LeaseId) -> Option<&Candidate> {
        let (_, ahead) = self.position(session)?;
        ahead.checked_sub(1).map(|i| &self.candidates[i])
    }
}

/// Where one session stands in an election, read without copying the queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Standing {
    /// Its candidacy.
    pub own: Candidate,
    /// How many candidates joined before it (0: it leads).
    pub ahead: usize,
    /// The key and `create_revision` of the candidate just ahead of it.
    pub predecessor: Option<(String, u64)>,
}

impl Standing {
    /// Where `session` stands in `name`, if it is a candidate.
    pub fn read(store: &Store, name: &str, session: LeaseId) -> Option<Standing> {
        let own = store.get(&candidate_key(name, session)).and_then(Candidate::from_kv)?;
        let prefix = name_prefix(name);
        let mut ahead = 0;
        let mut predecessor: Option<&KeyValue> = None;
        for kv in store.keys_from(&prefix).take_while(|kv| kv.key.starts_with(&prefix)) {
            if kv.create_revision < own.create_revision {
                ahead += 1;
                if predecessor.is_none_or(|p| p.create_revision < kv.create_revision) {
                    predecessor = Some(kv);
                }
            }
        }
        let predecessor = predecessor.map(|p| (p.key.clone(), p.create_revision));
        Some(Standing { own, ahead, predecessor })
    }
}

/// An election's leader and how many candidates it has, read without
/// copying the queue.
pub fn summary(store: &Store, name: &str) -> (Option<Candidate>, usize) {
    let prefix = name_prefix(name);
    let mut count = 0;
    let mut first: Option<&KeyValue> = None;
    for kv in store.keys_from(&prefix).take_while(|kv| kv.key.starts_with(&prefix)) {
        count += 1;
        if first.is_none_or(|f| kv.create_revision < f.create_revision) {
            first = Some(kv);
        }
    }
    (first.and_then(Candidate::from_kv), count)
}

/// How many candidates `name` has, counting no further than `cap` (the
/// count stops there: enough to refuse a campaign).
pub fn candidate_count(store: &Store, name: &str, cap: usize) -> usize {
    let prefix = name_prefix(name);
    store.keys_from(&prefix).take_while(|kv| kv.key.starts_with(&prefix)).take(cap).count()
}

/// The names that have at least one candidate, in order, from the first
/// name after `after` (None: from the first), visiting each name once by
/// skipping over its candidates' keys.
pub struct Names<'a> {
    store: &'a Store,
    next: String,
}

impl<'a> Names<'a> {
    /// The names of `store`, in order.
    pub fn new(store: &'a Store) -> Names<'a> {
        Names { store, next: ELECTIONS_PREFIX.to_string() }
    }
}

impl Iterator for Names<'_> {
    type Item = String;

    fn next(&mut self) -> Option<String> {
        let kv = self
            .store
            .keys_from(&self.next)
            .find(|kv| !kv.key.starts_with(ELECTIONS_PREFIX) || parse_key(&kv.key).is_some())?;
        let (name, _) = parse_key(&kv.key)?;
        let name = name.to_string();
        self.next = after_name(&name);
        Some(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elections::tests::grant;
    use tenure_kv::{Command, Response};

    fn join(s: &mut Store, name: &str, session: LeaseId, value: &str) {
        let put = Command::Put {
            key: candidate_key(name, session),
            value: value.into(),
            if_mod_revision: Some(0),
            lease: Some(session),
        };
        assert!(matches!(s.execute(&put), Response::Put { .. }));
    }

    #[test]
    fn the_first_to_join_leads_and_each_waits_for_the_one_ahead() {
        let mut s = Store::new();
        let (a, b, c) = (grant(&mut s), grant(&mut s), grant(&mut s));
        // Joined in the order c, a, b: the session ids do not decide.
        join(&mut s, "db", c, "c");
        join(&mut s, "db", a, "a");
        join(&mut s, "db", b, "b");
        join(&mut s, "db-other", a, "x");
        let q = Queue::read(&s, "db");
        assert_eq!(q.len(), 3);
        let leader = q.leader().unwrap();
        assert_eq!((leader.session, leader.value.as_slice()), (c, &b"c"[..]));
        assert_eq!(q.position(b).map(|(_, n)| n), Some(2));
        assert_eq!(q.predecessor(b).map(|p| p.session), Some(a));
        assert_eq!(q.predecessor(a).map(|p| p.session), Some(c));
        assert_eq!(q.predecessor(c), None, "the leader waits for nobody");
        let standing = Standing::read(&s, "db", b).unwrap();
        assert_eq!((standing.own.session, standing.ahead), (b, 2));
        assert_eq!(
            standing.predecessor,
            Some((candidate_key("db", a), q.candidates()[1].create_revision))
        );
        let leading = Standing::read(&s, "db", c).unwrap();
        assert_eq!((leading.ahead, leading.predecessor), (0, None));
        assert_eq!(Standing::read(&s, "db", LeaseId(99)), None);
        assert_eq!(q.position(LeaseId(99)), None);
        // The leader leaves: the next in line leads.
        s.execute(&Command::Revoke { lease: c });
        let q = Queue::read(&s, "db");
        assert_eq!(q.leader().map(|l| l.session), Some(a));
        assert_eq!(candidate_count(&s, "db", 10), 2);
        let (leader, count) = summary(&s, "db");
        assert_eq!((leader.map(|l| l.session), count), (Some(a), 2));
        assert_eq!(summary(&s, "none"), (None, 0));
        assert_eq!(candidate_count(&s, "db", 1), 1, "the count stops at the cap");
        assert!(Queue::read(&s, "d").is_empty());
    }

    #[test]
    fn names_are_listed_once_each_in_order() {
        let mut s = Store::new();
        let (a, b) = (grant(&mut s), grant(&mut s));
        for name in ["db", "db-x", "db0", "a"] {
            join(&mut s, name, a, "v");
            join(&mut s, name, b, "v");
        }
        s.execute(&Command::Put {
            key: "_tenure/elections/not-a-candidate".into(),
            value: vec![],
            if_mod_revision: None,
            lease: None,
        });
        s.execute(&Command::Put {
            key: "zzz".into(),
            value: vec![],
            if_mod_revision: None,
            lease: None,
        });
        let names: Vec<String> = Names::new(&s).collect();
        assert_eq!(names, ["a", "db-x", "db", "db0"]);
        assert_eq!(Names::new(&Store::new()).count(), 0);
    }
}
