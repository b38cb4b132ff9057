//! The store: keys with their revisions, the cluster-wide revision, and a
//! bounded history of changes for watches.

use crate::command::{Command, Compare, CompareOp, InvalidCommand, Target, TxnOp};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use tenure_replica::{Position, StateMachine};

/// Changes kept for watches; older ones are compacted (a watch that asks for
/// them is told to read again).
pub const MAX_HISTORY: usize = 10_000;

/// Most keys one range returns.
pub const MAX_RANGE: usize = 10_000;

/// A key and its value, with its revisions.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KeyValue {
    /// The key.
    pub key: String,
    /// The value.
    #[serde(with = "serde_bytes")]
    pub value: Vec<u8>,
    /// The revision that created the key (since it was last absent).
    pub create_revision: u64,
    /// The revision that last changed it.
    pub mod_revision: u64,
    /// Changes since it was created: 1 after the first put.
    pub version: u64,
}

/// What a change did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ChangeKind {
    /// The key was set.
    Put,
    /// The key was removed.
    Delete,
}

/// One change of one key, as a watch reports it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Change {
    /// The revision of the change.
    pub revision: u64,
    /// Set or removed.
    pub kind: ChangeKind,
    /// After a put, the key as it now is; after a delete, the key as it was,
    /// with `mod_revision` the revision of the delete and version 0.
    pub kv: KeyValue,
}

/// A watch asked for changes the store no longer keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[error("revisions up to {compacted} were compacted (the store is at {current}): read the keys again, then watch from {current} + 1")]
pub struct Compacted {
    /// Changes up to this revision are gone.
    pub compacted: u64,
    /// The store's revision.
    pub current: u64,
}

/// The result of one transaction operation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OpResponse {
    /// A put, with the key as it was.
    Put {
        /// The previous key, if any.
        prev: Option<KeyValue>,
    },
    /// A delete, with the key as it was.
    Delete {
        /// The previous key, if any.
        prev: Option<KeyValue>,
    },
    /// A get.
    Get {
        /// The key, if present.
        kv: Option<KeyValue>,
    },
}

/// What a command did; the same on every node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    /// The key was set at `revision`.
    Put {
        /// The store's revision after the put.
        revision: u64,
        /// The key as it was.
        prev: Option<KeyValue>,
    },
    /// The key was removed (`prev` is `Some`) or was absent (`None`, nothing changed).
    Delete {
        /// The store's revision after the delete.
        revision: u64,
        /// The key as it was.
        prev: Option<KeyValue>,
    },
    /// A transaction.
    Txn {
        /// Whether the comparisons held (the success branch ran).
        succeeded: bool,
        /// The store's revision after it.
        revision: u64,
        /// One response per operation of the branch that ran.
        responses: Vec<OpResponse>,
    },
    /// A compare-and-set did not match: nothing changed.
    Conflict {
        /// The key's `mod_revision` (0: absent).
        mod_revision: u64,
        /// The store's revision.
        revision: u64,
    },
    /// The command broke a limit or was not a command: nothing changed.
    Invalid(InvalidCommand),
}

impl Response {
    /// The response as the log hands it to the proposer.
    pub fn encode(&self) -> Vec<u8> {
        postcard::to_allocvec(self).expect("a response always serializes")
    }

    /// A response from [`Response::encode`].
    pub fn decode(bytes: &[u8]) -> Result<Response, String> {
        postcard::from_bytes(bytes).map_err(|e| e.to_string())
    }
}

/// The store's durable image: its revision and keys (the change history is
/// not kept: after a restore, watches resume from the snapshot's revision).
#[derive(Serialize, Deserialize)]
struct Image {
    revision: u64,
    keys: Vec<KeyValue>,
}

/// Versioned key-value metadata, a [`StateMachine`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Store {
    revision: u64,
    keys: BTreeMap<String, KeyValue>,
    history: VecDeque<Change>,
    /// Changes up to this revision are no longer in `history`.
    compacted: u64,
}

impl Store {
    /// An empty store at revision 0.
    pub fn new() -> Self {
        Store::default()
    }

    /// The cluster-wide revision: that of the latest change.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// Keys held.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// True if no key is held.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The key, if present.
    pub fn get(&self, key: &str) -> Option<&KeyValue> {
        self.keys.get(key)
    }

    /// The keys starting with `prefix`, in order, at most `limit` (and
    /// [`MAX_RANGE`]); the flag says whether more were left out.
    pub fn range(&self, prefix: &str, limit: usize) -> (Vec<KeyValue>, bool) {
        let limit = limit.min(MAX_RANGE);
        let mut matching = self
            .keys
            .range(prefix.to_string()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(_, kv)| kv.clone());
        let found: Vec<KeyValue> = matching.by_ref().take(limit).collect();
        let more = matching.next().is_some();
        (found, more)
    }

    /// The changes of keys starting with `prefix` from revision `from` on, at
    /// most `max`, or [`Compacted`] if some of them are no longer kept.
    pub fn changes_since(
        &self,
        prefix: &str,
        from: u64,
        max: usize,
    ) -> Result<Vec<Change>, Compacted> {
        if from <= self.compacted && from <= self.revision {
            return Err(Compacted { compacted: self.compacted, current: self.revision });
        }
        // The history is in revision order: skip to `from` by bisection
        // (a watch asks under the replica's lock, often near the end).
        let start = self.history.partition_point(|c| c.revision < from);
        Ok(self
            .history
            .range(start..)
            .filter(|c| c.kv.key.starts_with(prefix))
            .take(max)
            .cloned()
            .collect())
    }

    /// Runs a command: every node gets the same response and state.
    pub fn execute(&mut self, command: &Command) -> Response {
        if let Err(e) = command.validate() {
            return Response::Invalid(e);
        }
        match command {
            Command::Put { key, value, if_mod_revision } => {
                let current = self.mod_revision(key);
                if if_mod_revision.is_some_and(|r| r != current) {
                    return Response::Conflict { mod_revision: current, revision: self.revision };
                }
                let revision = self.revision + 1;
                let prev = self.put(key, value, revision);
                self.revision = revision;
                Response::Put { revision, prev }
            }
            Command::Delete { key, if_mod_revision } => {
                let current = self.mod_revision(key);
                if if_mod_revision.is_some_and(|r| r != current) {
                    return Response::Conflict { mod_revision: current, revision: self.revision };
                }
                if current == 0 {
                    return Response::Delete { revision: self.revision, prev: None };
                }
                let revision = self.revision + 1;
                let prev = self.delete(key, revision);
                self.revision = revision;
                Response::Delete { revision, prev }
            }
            Command::Txn { compare, success, failure } => {
                let succeeded = compare.iter().all(|c| self.holds(c));
                let ops = if succeeded { success } else { failure };
                let revision = self.revision + 1;
                let mut changed = false;
                let mut responses = Vec::with_capacity(ops.len());
                for op in ops {
                    responses.push(match op {
                        TxnOp::Put { key, value } => {
                            changed = true;
                            OpResponse::Put { prev: self.put(key, value, revision) }
                        }
                        TxnOp::Delete { key } => {
                            let prev = self.delete(key, revision);
                            changed |= prev.is_some();
                            OpResponse::Delete { prev }
                        }
                        TxnOp::Get { key } => OpResponse::Get { kv: self.keys.get(key).cloned() },
                    });
                }
                if changed {
                    self.revision = revision;
                }
                Response::Txn { succeeded, revision: self.revision, responses }
            }
        }
    }

    fn mod_revision(&self, key: &str) -> u64 {
        self.keys.get(key).map_or(0, |kv| kv.mod_revision)
    }

    /// Whether comparison `c` holds now.
    fn holds(&self, c: &Compare) -> bool {
        let kv = self.keys.get(&c.key);
        let ordering = match &c.target {
            Target::ModRevision(r) => kv.map_or(0, |kv| kv.mod_revision).cmp(r),
            Target::CreateRevision(r) => kv.map_or(0, |kv| kv.create_revision).cmp(r),
            Target::Version(v) => kv.map_or(0, |kv| kv.version).cmp(v),
            Target::Value(v) => match kv {
                Some(kv) => kv.value.as_slice().cmp(v.as_slice()),
                None => return false,
            },
        };
        match c.op {
            CompareOp::Equal => ordering.is_eq(),
            CompareOp::NotEqual => ordering.is_ne(),
            CompareOp::Less => ordering.is_lt(),
            CompareOp::Greater => ordering.is_gt(),
        }
    }

    fn put(&mut self, key: &str, value: &[u8], revision: u64) -> Option<KeyValue> {
        let prev = self.keys.get(key).cloned();
        let kv = KeyValue {
            key: key.to_string(),
            value: value.to_vec(),
            create_revision: prev.as_ref().map_or(revision, |p| p.create_revision),
            mod_revision: revision,
            version: prev.as_ref().map_or(1, |p| p.version + 1),
        };
        self.keys.insert(key.to_string(), kv.clone());
        self.record(Change { revision, kind: ChangeKind::Put, kv });
        prev
    }

    fn delete(&mut self, key: &str, revision: u64) -> Option<KeyValue> {
        let prev = self.keys.remove(key)?;
        let kv = KeyValue { mod_revision: revision, version: 0, ..prev.clone() };
        self.record(Change { revision, kind: ChangeKind::Delete, kv });
        Some(prev)
    }

    fn record(&mut self, change: Change) {
        self.history.push_back(change);
        while self.history.len() > MAX_HISTORY {
            if let Some(old) = self.history.pop_front() {
                self.compacted = old.revision;
            }
        }
    }
}

impl StateMachine for Store {
    fn apply(&mut self, _pos: Position, command: &[u8]) -> Vec<u8> {
        let response = match Command::decode(command) {
            Ok(c) => self.execute(&c),
            Err(e) => Response::Invalid(e),
        };
        response.encode()
    }

    fn snapshot(&self) -> Vec<u8> {
        let image = Image { revision: self.revision, keys: self.keys.values().cloned().collect() };
        postcard::to_allocvec(&image).expect("an image always serializes")
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), String> {
        let image: Image = postcard::from_bytes(snapshot).map_err(|e| e.to_string())?;
        let mut keys = BTreeMap::new();
        for kv in image.keys {
            if kv.mod_revision > image.revision || kv.create_revision > kv.mod_revision {
                return Err(format!("key {:?} has revisions beyond the store's", kv.key));
            }
            keys.insert(kv.key.clone(), kv);
        }
        *self = Store {
            revision: image.revision,
            keys,
            history: VecDeque::new(),
            compacted: image.revision,
        };
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(key: &str, value: &str) -> Command {
        Command::Put { key: key.into(), value: value.into(), if_mod_revision: None }
    }

    fn cas(key: &str, value: &str, rev: u64) -> Command {
        Command::Put { key: key.into(), value: value.into(), if_mod_revision: Some(rev) }
    }

    #[test]
    fn revisions_and_versions_follow_etcds_model() {
        let mut s = Store::new();
        assert_eq!(s.execute(&put("a", "1")), Response::Put { revision: 1, prev: None });
        assert_eq!(s.execute(&put("b", "1")), Response::Put { revision: 2, prev: None });
        let Response::Put { revision: 3, prev: Some(prev) } = s.execute(&put("a", "2")) else {
            panic!("a put")
        };
        assert_eq!((prev.mod_revision, prev.version), (1, 1));
        let a = s.get("a").unwrap();
        assert_eq!((a.create_revision, a.mod_revision, a.version), (1, 3, 2));
        // A delete bumps the revision; deleting nothing does not.
        assert!(matches!(
            s.execute(&Command::Delete { key: "a".into(), if_mod_revision: None }),
            Response::Delete { revision: 4, prev: Some(_) }
        ));
        assert_eq!(
            s.execute(&Command::Delete { key: "a".into(), if_mod_revision: None }),
            Response::Delete { revision: 4, prev: None }
        );
        // Created again: a new create revision, version 1.
        s.execute(&put("a", "3"));
        let a = s.get("a").unwrap();
        assert_eq!((a.create_revision, a.mod_revision, a.version), (5, 5, 1));
    }

    #[test]
    fn compare_and_set_on_the_mod_revision() {
        let mut s = Store::new();
        assert_eq!(s.execute(&cas("k", "x", 0)), Response::Put { revision: 1, prev: None });
        assert_eq!(
            s.execute(&cas("k", "y", 0)),
            Response::Conflict { mod_revision: 1, revision: 1 },
            "0 means absent"
        );
        assert!(matches!(s.execute(&cas("k", "y", 1)), Response::Put { revision: 2, .. }));
        assert_eq!(
            s.execute(&cas("k", "z", 1)),
            Response::Conflict { mod_revision: 2, revision: 2 }
        );
        assert_eq!(s.get("k").unwrap().value, b"y");
    }

    #[test]
    fn a_transaction_runs_one_branch_at_one_revision() {
        let mut s = Store::new();
        s.execute(&put("lock", "a"));
        let txn = |expected: u64| Command::Txn {
            compare: vec![Compare {
                key: "lock".into(),
                target: Target::ModRevision(expected),
                op: CompareOp::Equal,
            }],
            success: vec![
                TxnOp::Put { key: "lock".into(), value: b"b".to_vec() },
                TxnOp::Put { key: "owner".into(), value: b"b".to_vec() },
                TxnOp::Get { key: "owner".into() },
            ],
            failure: vec![TxnOp::Get { key: "lock".into() }],
        };
        let Response::Txn { succeeded: true, revision: 2, responses } = s.execute(&txn(1)) else {
            panic!("the success branch")
        };
        assert_eq!(responses.len(), 3);
        assert_eq!(s.get("lock").unwrap().mod_revision, 2);
        assert_eq!(s.get("owner").unwrap().mod_revision, 2, "one revision for the whole branch");
        let Response::Txn { succeeded: false, revision: 2, responses } = s.execute(&txn(1)) else {
            panic!("the failure branch")
        };
        assert!(matches!(&responses[0], OpResponse::Get { kv: Some(kv) } if kv.value == b"b"));
        // Comparisons on an absent key.
        let absent = |target, op| Command::Txn {
            compare: vec![Compare { key: "none".into(), target, op }],
            success: vec![],
            failure: vec![],
        };
        let succeeded = |s: &mut Store, c: Command| {
            matches!(s.execute(&c), Response::Txn { succeeded: true, .. })
        };
        assert!(succeeded(&mut s, absent(Target::Version(0), CompareOp::Equal)));
        assert!(succeeded(&mut s, absent(Target::CreateRevision(1), CompareOp::Less)));
        assert!(!succeeded(&mut s, absent(Target::Value(vec![]), CompareOp::NotEqual)));
    }

    #[test]
    fn ranges_by_prefix_are_ordered_and_bounded() {
        let mut s = Store::new();
        for k in ["a/2", "a/1", "b/1", "a/3", "a"] {
            s.execute(&put(k, "v"));
        }
        let (kvs, more) = s.range("a/", 10);
        assert_eq!(kvs.iter().map(|kv| kv.key.as_str()).collect::<Vec<_>>(), ["a/1", "a/2", "a/3"]);
        assert!(!more);
        let (kvs, more) = s.range("a", 2);
        assert_eq!(kvs.len(), 2);
        assert!(more);
        assert_eq!(s.range("", 100).0.len(), 5);
    }

    #[test]
    fn watches_resume_from_a_revision_until_it_is_compacted() {
        let mut s = Store::new();
        for i in 0..10 {
            s.execute(&put(&format!("k{}", i % 3), &i.to_string()));
        }
        let all = s.changes_since("", 1, 100).unwrap();
        assert_eq!(all.len(), 10);
        assert!(all.windows(2).all(|w| w[0].revision < w[1].revision));
        let k0 = s.changes_since("k0", 5, 100).unwrap();
        assert_eq!(k0.iter().map(|c| c.revision).collect::<Vec<_>>(), [7, 10]);
        assert!(s.changes_since("", 11, 100).unwrap().is_empty(), "the future: nothing yet");
        for i in 0..MAX_HISTORY {
            s.execute(&put("x", &i.to_string()));
        }
        let err = s.changes_since("", 5, 100).unwrap_err();
        assert_eq!(err.current, s.revision());
        assert!(err.compacted >= 10);
        assert!(s.changes_since("", err.compacted + 1, 100).is_ok());
    }

    #[test]
    fn snapshots_restore_the_keys_and_revision_and_reject_garbage() {
        let mut s = Store::new();
        for i in 0..20 {
            s.execute(&put(&format!("k{i}"), "v"));
        }
        let image = s.snapshot();
        let mut t = Store::new();
        t.restore(&image).unwrap();
        assert_eq!(t.revision(), 20);
        assert_eq!(t.range("", 100), s.range("", 100));
        assert!(t.changes_since("", 5, 10).is_err(), "the history starts at the snapshot");
        assert!(t.changes_since("", 21, 10).is_ok());
        let before = t.clone();
        assert!(t.restore(&[1, 2, 3]).is_err());
        assert_eq!(t, before, "a bad snapshot changes nothing");
    }

    #[test]
    fn every_node_gets_the_same_answer_even_for_garbage() {
        let mut s = Store::new();
        let r = s.apply(Position::ZERO, &[0xff, 0xff]);
        assert!(matches!(Response::decode(&r).unwrap(), Response::Invalid(_)));
        let too_big = put("k", &"x".repeat(crate::MAX_VALUE_BYTES + 1)).encode();
        let r = s.apply(Position::ZERO, &too_big);
        assert!(matches!(
            Response::decode(&r).unwrap(),
            Response::Invalid(InvalidCommand::ValueTooLarge(_))
        ));
        assert_eq!(s.revision(), 0, "nothing changed");
    }
}
