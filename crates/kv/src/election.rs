//! The election recipe over the store, as pure functions (docs/ELECTIONS.md,
//! "Elections"): a candidate of election `name` for session `L` is the key
//! `_tenure/elections/<name>/<L as 16 hex digits>`, attached to `L`; the
//! leader is the candidate with the lowest `create_revision`, and its
//! fencing token is that revision (revisions only grow, so each new
//! leadership of a name gets a larger token). These functions build the
//! commands and read the answers; proposing and reading (linearizably) is
//! the caller's.

use crate::command::{Command, Compare, CompareOp, Target, TxnOp};
use crate::election_key::{
    after_name, candidate_key, check_name, parse_candidate_key, prefix, NameFault,
    ELECTIONS_PREFIX, MAX_NAME_BYTES,
};
use crate::lease::{LeaseId, Refusal};
use crate::store::{KeyValue, OpResponse, Response, Store};

/// Most elections with at least one candidate at once: four times
/// [`MAX_CANDIDACIES_PER_OWNER`], so that one application at its cap
/// leaves three quarters of them to the others. An election costs the
/// store its candidate keys and a counter.
pub const MAX_ELECTIONS: usize = 4 * MAX_CANDIDACIES_PER_OWNER;

/// Most candidacies (candidate keys, so elections stood in) attached to
/// the sessions of one owner (an API token) at once. Ten thousand: what
/// one application standing in an election per shard of a large fleet
/// needs, and ten sessions' worth of [`crate::MAX_KEYS_PER_LEASE`].
pub const MAX_CANDIDACIES_PER_OWNER: usize = 10_000;

/// Most candidates of one election.
pub const MAX_CANDIDATES: usize = 1_000;

/// Largest candidate value, in bytes.
pub const MAX_VALUE: usize = 4_096;

/// Why an election request is refused before anything is proposed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ElectionError {
    /// An empty name, or one over [`MAX_NAME_BYTES`].
    #[error(
        "an election name has at least 1 and at most {MAX_NAME_BYTES} characters of \
         A-Z a-z 0-9 . _ -; this one has {0}"
    )]
    NameLength(usize),
    /// A character outside `A-Z a-z 0-9 . _ -`.
    #[error("an election name has only the characters A-Z a-z 0-9 . _ -; found {0:?}")]
    NameCharacter(char),
    /// A value over [`MAX_VALUE`].
    #[error("a candidate value has at most {MAX_VALUE} bytes; this one has {0}")]
    ValueTooLarge(usize),
    /// [`MAX_CANDIDATES`] candidates already.
    #[error("election has {MAX_CANDIDATES} candidates, the most it accepts")]
    TooManyCandidates,
    /// [`MAX_ELECTIONS`] elections already, and this name would be a new one.
    #[error("{MAX_ELECTIONS} elections have candidates, the most accepted")]
    TooManyElections,
    /// The session's owner stands [`MAX_CANDIDACIES_PER_OWNER`] times already.
    #[error(
        "the token {0:?} stands in {MAX_CANDIDACIES_PER_OWNER} elections, the most one token \
         may: resign one first"
    )]
    TooManyOwnerCandidacies(String),
}

/// Checks an election name: 1 to [`MAX_NAME_BYTES`] of `A-Z a-z 0-9 . _ -`.
pub fn validate_name(name: &str) -> Result<(), ElectionError> {
    check_name(name).map_err(|fault| match fault {
        NameFault::Length(n) => ElectionError::NameLength(n),
        NameFault::Character(c) => ElectionError::NameCharacter(c),
    })
}

/// Checks a candidate value's size.
pub fn validate_value(value: &[u8]) -> Result<(), ElectionError> {
    if value.len() > MAX_VALUE {
        return Err(ElectionError::ValueTooLarge(value.len()));
    }
    Ok(())
}

/// Checks the caps before a campaign: `candidates` of this name now,
/// `elections` with at least one candidate now. The counts are read before
/// proposing, so concurrent campaigns may overshoot a cap by as many as
/// race; the store's own caps (`MAX_KEYS_PER_LEASE`, `MAX_LEASES`) are
/// exact.
pub fn check_caps(candidates: usize, elections: usize) -> Result<(), ElectionError> {
    if candidates >= MAX_CANDIDATES {
        return Err(ElectionError::TooManyCandidates);
    }
    if candidates == 0 && elections >= MAX_ELECTIONS {
        return Err(ElectionError::TooManyElections);
    }
    Ok(())
}

/// Checks the caps of a campaign in `name` by `session` against `store`,
/// as [`check_caps`] does, and the cap of the session's owner
/// ([`MAX_CANDIDACIES_PER_OWNER`]), in O(1): the store counts candidates,
/// elections and each owner's candidacies as it applies changes
/// ([`Store::candidates`], [`Store::elections`],
/// [`Store::owner_candidacies`]), so nothing is scanned under the
/// replica's lock. Like [`check_caps`], read before proposing.
pub fn check_caps_in(store: &Store, name: &str, session: LeaseId) -> Result<(), ElectionError> {
    check_caps(store.candidates(name), store.elections())?;
    let owner = store.lease(session).and_then(|l| l.owner.as_deref());
    match owner {
        Some(owner) if store.owner_candidacies(owner) >= MAX_CANDIDACIES_PER_OWNER => {
            Err(ElectionError::TooManyOwnerCandidacies(owner.to_string()))
        }
        _ => Ok(()),
    }
}

/// The keys under `name`'s [`prefix`] in `store`, read in place.
fn keys_of<'a>(store: &'a Store, prefix: &'a str) -> impl Iterator<Item = &'a KeyValue> + 'a {
    store.keys_from(prefix).take_while(move |kv| kv.key.starts_with(prefix))
}

/// The campaign: creates the candidate key with `value`, attached to
/// `session`, only if it is absent (its `create_revision` is 0). The
/// failure branch reads the key, to tell a duplicate campaign apart. Read
/// the answer with [`campaign_outcome`].
pub fn campaign(name: &str, session: LeaseId, value: &[u8]) -> Result<Command, ElectionError> {
    validate_name(name)?;
    validate_value(value)?;
    let key = candidate_key(name, session);
    Ok(Command::Txn {
        compare: vec![Compare {
            key: key.clone(),
            target: Target::CreateRevision(0),
            op: CompareOp::Equal,
        }],
        success: vec![TxnOp::Put { key: key.clone(), value: value.to_vec(), lease: Some(session) }],
        failure: vec![TxnOp::Get { key }],
    })
}

/// How a campaign, resign or proclaim ended, read from the store's answer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Outcome {
    /// The session does not exist (never granted, revoked or expired).
    #[error("session {0} does not exist")]
    NoSession(LeaseId),
    /// A campaign: the session is already a candidate of this name, since
    /// this `create_revision`.
    #[error("the session is already a candidate, since revision {0}")]
    AlreadyCandidate(u64),
    /// A resign or proclaim: the session is not a candidate (resign) or
    /// does not lead with that token (proclaim).
    #[error("the session is not that candidate")]
    NotCandidate,
    /// Any other answer (a limit of the store, an invalid command).
    #[error("unexpected answer: {0}")]
    Other(String),
}

/// The `create_revision` of the new candidate key (what will be its
/// fencing token if it leads), or why the campaign did nothing.
pub fn campaign_outcome(response: &Response) -> Result<u64, Outcome> {
    match response {
        Response::Txn { succeeded: true, revision, .. } => Ok(*revision),
        Response::Txn { succeeded: false, responses, .. } => match responses.first() {
            Some(OpResponse::Get { kv: Some(kv) }) => {
                Err(Outcome::AlreadyCandidate(kv.create_revision))
            }
            other => Err(Outcome::Other(format!("{other:?}"))),
        },
        other => Err(other_outcome(other)),
    }
}

fn other_outcome(response: &Response) -> Outcome {
    match response {
        Response::Refused(Refusal::LeaseNotFound(id)) => Outcome::NoSession(*id),
        other => Outcome::Other(format!("{other:?}")),
    }
}

/// Resigning: deletes the candidate key (the session lives on). With
/// `token`, the candidacy's `create_revision`, only that candidacy: a
/// resignation that reaches the log late (held by a follower's router while
/// no leader was known, or sent again after a lost answer) then cannot end
/// a later candidacy of the same session, which campaigned again in
/// between; without, whatever candidacy the session holds. Read the answer
/// with [`resign_outcome`].
pub fn resign(name: &str, session: LeaseId, token: Option<u64>) -> Command {
    let key = candidate_key(name, session);
    match token {
        None => Command::Delete { key, if_mod_revision: None },
        Some(token) => Command::Txn {
            compare: vec![Compare {
                key: key.clone(),
                target: Target::CreateRevision(token),
                op: CompareOp::Equal,
            }],
            success: vec![TxnOp::Delete { key }],
            failure: vec![],
        },
    }
}

/// The revision of the resignation, or [`Outcome::NotCandidate`] (no
/// candidacy, or another one than the token named).
pub fn resign_outcome(response: &Response) -> Result<u64, Outcome> {
    match response {
        Response::Delete { revision, prev: Some(_) } => Ok(*revision),
        Response::Delete { prev: None, .. } => Err(Outcome::NotCandidate),
        Response::Txn { succeeded: true, revision, .. } => Ok(*revision),
        Response::Txn { succeeded: false, .. } => Err(Outcome::NotCandidate),
        other => Err(other_outcome(other)),
    }
}

/// Proclaiming: a new value for the leader, without a new election: a put
/// with the same lease, only if the key's `create_revision` is still
/// `token` (the leadership that decided to proclaim). The caller has
/// checked that this candidate leads; the guard makes sure the key was not
/// resigned and re-created in between. Read the answer with
/// [`proclaim_outcome`].
pub fn proclaim(
    name: &str,
    session: LeaseId,
    token: u64,
    value: &[u8],
) -> Result<Command, ElectionError> {
    validate_name(name)?;
    validate_value(value)?;
    let key = candidate_key(name, session);
    Ok(Command::Txn {
        compare: vec![Compare {
            key: key.clone(),
            target: Target::CreateRevision(token),
            op: CompareOp::Equal,
        }],
        success: vec![TxnOp::Put { key, value: value.to_vec(), lease: Some(session) }],
        failure: vec![],
    })
}

/// The revision of the proclamation, or [`Outcome::NotCandidate`].
pub fn proclaim_outcome(response: &Response) -> Result<u64, Outcome> {
    match response {
        Response::Txn { succeeded: true, revision, .. } => Ok(*revision),
        Response::Txn { succeeded: false, .. } => Err(Outcome::NotCandidate),
        other => Err(other_outcome(other)),
    }
}

/// A candidate of an election.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// Its session.
    pub session: LeaseId,
    /// Its value.
    pub value: Vec<u8>,
    /// Its key's `create_revision`: its place in the queue, and its fencing
    /// token when it leads.
    pub create_revision: u64,
    /// The revision of its last campaign or proclaim.
    pub mod_revision: u64,
}

impl Candidate {
    /// The candidate a key holds, if the key is a candidate key (of any
    /// election).
    pub fn from_kv(kv: &KeyValue) -> Option<Candidate> {
        let (_, session) = parse_candidate_key(&kv.key)?;
        Some(Candidate {
            session,
            value: kv.value.clone(),
            create_revision: kv.create_revision,
            mod_revision: kv.mod_revision,
        })
    }
}

/// An election as a read of its prefix shows it: candidates in queue
/// order, lowest `create_revision` first (the leader).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Standing {
    /// Every candidate, the leader first.
    pub candidates: Vec<Candidate>,
}

impl Standing {
    /// Reads the candidates of `name` from a range of its [`prefix`]
    /// (other keys are ignored).
    pub fn from_range<'a>(name: &str, kvs: impl IntoIterator<Item = &'a KeyValue>) -> Standing {
        let mut candidates: Vec<Candidate> = kvs
            .into_iter()
            .filter(|kv| parse_candidate_key(&kv.key).is_some_and(|(n, _)| n == name))
            .filter_map(Candidate::from_kv)
            .collect();
        candidates.sort_by_key(|c| c.create_revision);
        Standing { candidates }
    }

    /// The candidates of `name` in `store`, read in place (no range is
    /// copied, and no range limit applies: [`MAX_CANDIDATES`] bounds it).
    pub fn read(store: &Store, name: &str) -> Standing {
        let prefix = prefix(name);
        Standing::from_range(name, keys_of(store, &prefix))
    }

    /// The leader, if any candidate.
    pub fn leader(&self) -> Option<&Candidate> {
        self.candidates.first()
    }

    /// How many candidates are ahead of `session` (0: it leads), or `None`
    /// if it is not a candidate.
    pub fn position(&self, session: LeaseId) -> Option<usize> {
        self.candidates.iter().position(|c| c.session == session)
    }

    /// The candidate just ahead of `session` (the one whose leaving a waiter
    /// waits for: no herd), `None` if it leads or is not a candidate.
    pub fn predecessor(&self, session: LeaseId) -> Option<&Candidate> {
        let at = self.position(session)?;
        at.checked_sub(1).map(|p| &self.candidates[p])
    }
}

/// Where one session stands in an election, read in place without copying
/// the queue (for a server that answers it under a lock).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Place {
    /// Its candidacy.
    pub own: Candidate,
    /// How many candidates joined before it (0: it leads).
    pub ahead: usize,
    /// The key and `create_revision` of the candidate just ahead of it
    /// (the one whose leaving it waits for).
    pub predecessor: Option<(String, u64)>,
}

impl Place {
    /// Where `session` stands in `name`, if it is a candidate.
    pub fn read(store: &Store, name: &str, session: LeaseId) -> Option<Place> {
        let own = store.get(&candidate_key(name, session)).and_then(Candidate::from_kv)?;
        let prefix = prefix(name);
        let mut ahead = 0;
        let mut predecessor: Option<&KeyValue> = None;
        for kv in keys_of(store, &prefix).filter(|kv| kv.create_revision < own.create_revision) {
            ahead += 1;
            if predecessor.is_none_or(|p| p.create_revision < kv.create_revision) {
                predecessor = Some(kv);
            }
        }
        let predecessor = predecessor.map(|p| (p.key.clone(), p.create_revision));
        Some(Place { own, ahead, predecessor })
    }
}

/// An election's leader and how many candidates it has, read in place.
pub fn summary(store: &Store, name: &str) -> (Option<Candidate>, usize) {
    let prefix = prefix(name);
    let mut count = 0;
    let mut first: Option<&KeyValue> = None;
    for kv in keys_of(store, &prefix) {
        count += 1;
        if first.is_none_or(|f| kv.create_revision < f.create_revision) {
            first = Some(kv);
        }
    }
    (first.and_then(Candidate::from_kv), count)
}

/// How many candidates `name` has, in O(1) ([`Store::candidates`]).
pub fn candidate_count(store: &Store, name: &str) -> usize {
    store.candidates(name)
}

/// The names that have at least one candidate, in order, each visited once
/// by skipping over its candidates' keys.
pub struct Names<'a> {
    store: &'a Store,
    next: String,
}

impl<'a> Names<'a> {
    /// The election names of `store`, in order.
    pub fn new(store: &'a Store) -> Names<'a> {
        Names { store, next: ELECTIONS_PREFIX.to_string() }
    }

    /// The election names of `store` after `name` (excluded), in order: the
    /// page of a listing that continues after `name`.
    pub fn after(store: &'a Store, name: &str) -> Names<'a> {
        Names { store, next: after_name(name) }
    }
}

impl Iterator for Names<'_> {
    type Item = String;

    fn next(&mut self) -> Option<String> {
        let kv = self.store.keys_from(&self.next).find(|kv| {
            !kv.key.starts_with(ELECTIONS_PREFIX) || parse_candidate_key(&kv.key).is_some()
        })?;
        let (name, _) = parse_candidate_key(&kv.key)?;
        let name = name.to_string();
        self.next = after_name(&name);
        Some(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;
    use crate::MAX_RANGE;

    fn grant(store: &mut Store) -> LeaseId {
        match store.execute(&Command::Grant { ttl_ms: 1_000, owner: None }) {
            Response::Granted { lease, .. } => lease,
            other => panic!("{other:?}"),
        }
    }

    fn standing(store: &Store, name: &str) -> Standing {
        let (kvs, _) = store.range(&prefix(name), MAX_RANGE);
        Standing::from_range(name, &kvs)
    }

    #[test]
    fn names_are_checked() {
        assert!(validate_name("a").is_ok());
        assert!(validate_name("svc-1.primary_db").is_ok());
        assert!(validate_name(&"x".repeat(128)).is_ok());
        assert_eq!(validate_name(""), Err(ElectionError::NameLength(0)));
        assert_eq!(validate_name(&"x".repeat(129)), Err(ElectionError::NameLength(129)));
        let long = ElectionError::NameLength(129).to_string();
        assert!(long.contains("at most 128") && long.contains("A-Z a-z 0-9 . _ -"), "{long}");
        assert_eq!(validate_name("a/b"), Err(ElectionError::NameCharacter('/')));
        assert_eq!(validate_name("a b"), Err(ElectionError::NameCharacter(' ')));
        assert_eq!(validate_name("é"), Err(ElectionError::NameCharacter('é')));
        assert!(campaign("a/b", LeaseId(1), b"").is_err());
        let big = vec![0; MAX_VALUE + 1];
        assert_eq!(
            campaign("a", LeaseId(1), &big),
            Err(ElectionError::ValueTooLarge(MAX_VALUE + 1))
        );
        assert!(campaign("a", LeaseId(1), &big[..MAX_VALUE]).is_ok());
    }

    #[test]
    fn keys_round_trip_and_prefixes_do_not_overlap() {
        let key = candidate_key("db", LeaseId(0x2a));
        assert_eq!(key, "_tenure/elections/db/000000000000002a");
        assert!(key.starts_with(&prefix("db")));
        assert!(!candidate_key("db2", LeaseId(1)).starts_with(&prefix("db")));
        assert_eq!(parse_candidate_key(&key), Some(("db", LeaseId(0x2a))));
        assert_eq!(parse_candidate_key("_tenure/elections/db/2a"), None);
        assert_eq!(parse_candidate_key("_tenure/elections/db/000000000000002A"), None);
        assert_eq!(parse_candidate_key("other/db/000000000000002a"), None);
    }

    #[test]
    fn caps_are_checked() {
        assert!(check_caps(0, 0).is_ok());
        assert_eq!(check_caps(MAX_CANDIDATES, 1), Err(ElectionError::TooManyCandidates));
        assert_eq!(check_caps(0, MAX_ELECTIONS), Err(ElectionError::TooManyElections));
        assert!(check_caps(5, MAX_ELECTIONS).is_ok(), "an existing election may grow");
    }

    #[test]
    fn a_resignation_guarded_by_its_token_ends_that_candidacy_only() {
        let mut store = Store::new();
        let (a, b) = (grant(&mut store), grant(&mut store));
        let t1 = campaign_outcome(&store.execute(&campaign("e", a, b"A").unwrap())).unwrap();
        campaign_outcome(&store.execute(&campaign("e", b, b"B").unwrap())).unwrap();
        let late = resign("e", a, Some(t1));
        assert!(resign_outcome(&store.execute(&late)).is_ok());
        // a campaigns again; the first resignation arrives a second time
        // (a retry, or held by a router): it ends nothing.
        let t2 = campaign_outcome(&store.execute(&campaign("e", a, b"A").unwrap())).unwrap();
        let revision = store.revision();
        assert_eq!(resign_outcome(&store.execute(&late)), Err(Outcome::NotCandidate));
        assert_eq!(store.revision(), revision, "a refused resignation writes nothing");
        assert_eq!(standing(&store, "e").position(a), Some(1));
        // Unguarded, the same late arrival would have ended the new candidacy.
        let mut unguarded = store.clone();
        assert!(resign_outcome(&unguarded.execute(&resign("e", a, None))).is_ok());
        assert_eq!(standing(&unguarded, "e").position(a), None);
        // Its own token ends it.
        assert!(resign_outcome(&store.execute(&resign("e", a, Some(t2)))).is_ok());
        assert_eq!(standing(&store, "e").position(a), None);
    }

    #[test]
    fn the_lowest_create_revision_leads_and_resigning_hands_over_in_order() {
        let mut store = Store::new();
        let (a, b, c) = (grant(&mut store), grant(&mut store), grant(&mut store));
        // Campaign in the order b, a, c: the queue follows revisions, not ids.
        let tb = campaign_outcome(&store.execute(&campaign("e", b, b"B").unwrap())).unwrap();
        let ta = campaign_outcome(&store.execute(&campaign("e", a, b"A").unwrap())).unwrap();
        let tc = campaign_outcome(&store.execute(&campaign("e", c, b"C").unwrap())).unwrap();
        assert!(tb < ta && ta < tc);
        let s = standing(&store, "e");
        assert_eq!(s.leader().map(|l| (l.session, l.create_revision)), Some((b, tb)));
        assert_eq!((s.position(b), s.position(a), s.position(c)), (Some(0), Some(1), Some(2)));
        assert_eq!(s.predecessor(c).map(|p| p.session), Some(a));
        assert_eq!(s.predecessor(b), None);
        assert_eq!(s.position(LeaseId(99)), None);

        assert!(resign_outcome(&store.execute(&resign("e", b, None))).is_ok());
        assert_eq!(
            resign_outcome(&store.execute(&resign("e", b, None))),
            Err(Outcome::NotCandidate)
        );
        let s = standing(&store, "e");
        assert_eq!(s.leader().map(|l| (l.session, l.create_revision)), Some((a, ta)));
        // b campaigns again: at the back, with a larger token than anyone's.
        let tb2 = campaign_outcome(&store.execute(&campaign("e", b, b"B").unwrap())).unwrap();
        assert!(tb2 > tc);
        assert_eq!(standing(&store, "e").position(b), Some(2));
    }

    #[test]
    fn a_duplicate_or_sessionless_campaign_changes_nothing() {
        let mut store = Store::new();
        let a = grant(&mut store);
        let t = campaign_outcome(&store.execute(&campaign("e", a, b"1").unwrap())).unwrap();
        let rev = store.revision();
        let dup = store.execute(&campaign("e", a, b"2").unwrap());
        assert_eq!(campaign_outcome(&dup), Err(Outcome::AlreadyCandidate(t)));
        let ghost = store.execute(&campaign("e", LeaseId(77), b"x").unwrap());
        assert_eq!(campaign_outcome(&ghost), Err(Outcome::NoSession(LeaseId(77))));
        assert_eq!(store.revision(), rev);
        assert_eq!(standing(&store, "e").candidates[0].value, b"1");
    }

    #[test]
    fn ending_the_session_removes_its_candidacies_and_the_next_leads() {
        let mut store = Store::new();
        let (a, b) = (grant(&mut store), grant(&mut store));
        for name in ["x", "y"] {
            store.execute(&campaign(name, a, b"a").unwrap());
            store.execute(&campaign(name, b, b"b").unwrap());
        }
        store.execute(&Command::Expire { lease: a });
        for name in ["x", "y"] {
            let s = standing(&store, name);
            assert_eq!(s.candidates.len(), 1);
            assert_eq!(s.leader().unwrap().session, b);
        }
    }

    #[test]
    fn proclaim_changes_the_value_only_for_the_same_leadership() {
        let mut store = Store::new();
        let a = grant(&mut store);
        let t = campaign_outcome(&store.execute(&campaign("e", a, b"v1").unwrap())).unwrap();
        let r = proclaim_outcome(&store.execute(&proclaim("e", a, t, b"v2").unwrap())).unwrap();
        assert!(r > t);
        let s = standing(&store, "e");
        assert_eq!(
            (s.candidates[0].value.as_slice(), s.candidates[0].create_revision),
            (&b"v2"[..], t)
        );
        assert_eq!(store.get(&candidate_key("e", a)).unwrap().lease, Some(a), "still attached");
        let c = Standing::read(&store, "e").candidates[0].clone();
        assert_eq!((c.create_revision, c.mod_revision), (t, r), "a proclaim moves mod_revision");
        assert_eq!(Candidate::from_kv(store.get(&candidate_key("e", a)).unwrap()), Some(c));
        // Resigned and back: the old token no longer proclaims.
        store.execute(&resign("e", a, None));
        store.execute(&campaign("e", a, b"v3").unwrap());
        let stale = store.execute(&proclaim("e", a, t, b"v4").unwrap());
        assert_eq!(proclaim_outcome(&stale), Err(Outcome::NotCandidate));
        assert_eq!(standing(&store, "e").candidates[0].value, b"v3");
    }

    #[test]
    fn read_in_place_agrees_with_a_range_and_each_waits_for_the_one_ahead() {
        let mut store = Store::new();
        let (a, b, c) = (grant(&mut store), grant(&mut store), grant(&mut store));
        // Joined in the order c, a, b: the session ids do not decide.
        for (session, value) in [(c, "c"), (a, "a"), (b, "b")] {
            store.execute(&campaign("db", session, value.as_bytes()).unwrap());
        }
        store.execute(&campaign("db-other", a, b"x").unwrap());
        let s = Standing::read(&store, "db");
        assert_eq!(s, standing(&store, "db"));
        assert_eq!(s.candidates.len(), 3);
        let leader = s.leader().unwrap();
        assert_eq!((leader.session, leader.value.as_slice()), (c, &b"c"[..]));
        let place = Place::read(&store, "db", b).unwrap();
        assert_eq!((place.own.session, place.ahead), (b, 2));
        assert_eq!(
            place.predecessor,
            Some((candidate_key("db", a), s.candidates[1].create_revision))
        );
        let leading = Place::read(&store, "db", c).unwrap();
        assert_eq!((leading.ahead, leading.predecessor), (0, None));
        assert_eq!(Place::read(&store, "db", LeaseId(99)), None);
        // The leader leaves: the next in line leads.
        store.execute(&Command::Revoke { lease: c });
        assert_eq!(Standing::read(&store, "db").leader().map(|l| l.session), Some(a));
        assert_eq!(candidate_count(&store, "db"), 2);
        assert_eq!(candidate_count(&store, "db-other"), 1);
        assert_eq!(store.elections(), 2);
        let (leader, count) = summary(&store, "db");
        assert_eq!((leader.map(|l| l.session), count), (Some(a), 2));
        assert_eq!(summary(&store, "none"), (None, 0));
        assert!(Standing::read(&store, "d").candidates.is_empty());
    }

    #[test]
    fn names_are_listed_once_each_in_order() {
        let mut store = Store::new();
        let (a, b) = (grant(&mut store), grant(&mut store));
        for name in ["db", "db-x", "db0", "a"] {
            store.execute(&campaign(name, a, b"v").unwrap());
            store.execute(&campaign(name, b, b"v").unwrap());
        }
        for key in ["_tenure/elections/not-a-candidate", "zzz"] {
            let put =
                Command::Put { key: key.into(), value: vec![], if_mod_revision: None, lease: None };
            store.execute(&put);
        }
        let names: Vec<String> = Names::new(&store).collect();
        assert_eq!(names, ["a", "db-x", "db", "db0"]);
        assert_eq!(Names::new(&Store::new()).count(), 0);
    }

    #[test]
    fn caps_are_checked_against_the_store() {
        let mut store = Store::new();
        let sessions: Vec<LeaseId> = (0..MAX_CANDIDATES).map(|_| grant(&mut store)).collect();
        for (i, &session) in sessions.iter().enumerate() {
            assert_eq!(check_caps_in(&store, "db", session), Ok(()), "candidate {i}");
            store.execute(&campaign("db", session, b"").unwrap());
        }
        let s0 = sessions[0];
        assert_eq!(check_caps_in(&store, "db", s0), Err(ElectionError::TooManyCandidates));
        // Names: each session campaigns in up to its key limit.
        let per_session = crate::MAX_KEYS_PER_LEASE - 1;
        for i in 0..MAX_ELECTIONS - 1 {
            let session = sessions[1 + i / per_session];
            let done = store.execute(&campaign(&format!("n{i}"), session, b"").unwrap());
            assert!(campaign_outcome(&done).is_ok(), "{done:?}");
        }
        assert_eq!(Names::new(&store).count(), MAX_ELECTIONS, "db and the others");
        assert_eq!(check_caps_in(&store, "new", s0), Err(ElectionError::TooManyElections));
        assert_eq!(check_caps_in(&store, "n7", s0), Ok(()), "an election that exists takes more");
    }

    fn grant_for(store: &mut Store, owner: &str) -> Response {
        store.execute(&Command::Grant { ttl_ms: 1_000, owner: Some(owner.into()) })
    }

    #[test]
    fn one_owner_takes_at_most_its_share_of_sessions_and_candidacies() {
        let mut store = Store::new();
        let mut app = Vec::new();
        for _ in 0..crate::MAX_LEASES_PER_OWNER {
            match grant_for(&mut store, "app") {
                Response::Granted { lease, .. } => app.push(lease),
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(
            grant_for(&mut store, "app"),
            Response::Refused(Refusal::TooManyOwnerLeases("app".into()))
        );
        let other = match grant_for(&mut store, "other") {
            Response::Granted { lease, .. } => lease,
            refused => panic!("another token is not locked out: {refused:?}"),
        };
        // The app's sessions stand in new elections up to its cap, ...
        let per_session = crate::MAX_KEYS_PER_LEASE;
        for i in 0..crate::MAX_CANDIDACIES_PER_OWNER {
            let session = app[i / per_session];
            assert_eq!(check_caps_in(&store, &format!("e{i}"), session), Ok(()), "{i}");
            let done = store.execute(&campaign(&format!("e{i}"), session, b"").unwrap());
            assert!(campaign_outcome(&done).is_ok(), "{done:?}");
        }
        assert_eq!(store.owner_candidacies("app"), crate::MAX_CANDIDACIES_PER_OWNER);
        let next = app[crate::MAX_CANDIDACIES_PER_OWNER / per_session + 1];
        assert_eq!(
            check_caps_in(&store, "e-more", next),
            Err(ElectionError::TooManyOwnerCandidacies("app".into()))
        );
        // ... and the other token still campaigns.
        assert_eq!(check_caps_in(&store, "e-more", other), Ok(()));
        // Revoking one of the app's sessions gives back its candidacies.
        store.execute(&Command::Revoke { lease: app[0] });
        assert_eq!(store.owner_candidacies("app"), crate::MAX_CANDIDACIES_PER_OWNER - per_session);
        assert_eq!(store.owner_leases("app"), crate::MAX_LEASES_PER_OWNER - 1);
        assert_eq!(check_caps_in(&store, "e-more", next), Ok(()));
    }
}
