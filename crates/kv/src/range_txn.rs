//! etcd's whole transaction, as one command ([`crate::Command::RangeTxn`]):
//! comparisons over ranges of keys, and branches of puts (with etcd's
//! `ignore_value` and `ignore_lease`), range deletes, range reads and
//! nested transactions, all at one revision. What tenure's own
//! [`crate::Command::Txn`] does on single keys, this does as etcd's
//! `apply.go` does it:
//!
//! * every comparison on the chosen path, nested ones included, is read
//!   before anything is written (etcd's `compareToPath`);
//! * then the checks, still before anything is written: leases exist, keys
//!   kept by `ignore_value`/`ignore_lease` exist, read revisions are neither
//!   compacted nor in the future, and tenure's bounds hold; a transaction
//!   that fails one changes nothing;
//! * then the operations in order: a range read sees the writes before it
//!   in the same transaction.
//!
//! The store's side is in `store/range_txn.rs`.

use crate::command::{check_key, check_value, CompareOp, InvalidCommand, Target, MAX_TXN_OPS};
use crate::lease::LeaseId;
use crate::store::KeyRange;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// How deep transactions nest, the outermost one counted: etcd sets no
/// bound but its request size; a tree this deep is already more than any
/// client recipe uses.
pub const MAX_TXN_DEPTH: usize = 8;

/// Most comparisons and operations in a whole transaction, nested ones
/// included (each part of each transaction also keeps
/// [`MAX_TXN_OPS`]): a bound on the work one command costs every node.
pub const MAX_TXN_TOTAL_OPS: usize = 4 * MAX_TXN_OPS;

/// Most keys one transaction that writes may visit, on every node:
/// comparisons, reads (counted in full) and deletes together. A transaction
/// that would visit more is refused whole ([`crate::Refusal::TooManyKeysVisited`]):
/// a bound on the time one command holds every node's apply loop.
pub const MAX_TXN_VISITED_KEYS: usize = 100_000;

/// Most bytes the reads of one transaction that writes return in all (keys,
/// values, and [`READ_OVERHEAD`] per key): the answer is built on every
/// node. A transaction whose reads would return more is refused whole
/// ([`crate::Refusal::ReadTooLarge`]).
pub const MAX_TXN_READ_BYTES: usize = 16 * 1024 * 1024;

/// Bytes counted per key read besides its key and value.
pub const READ_OVERHEAD: usize = 48;

/// Keys named as etcd names them: `key` alone when `end` is empty, every
/// key from `key` on when `end` is `"\0"`, else the keys from `key`
/// (included) to `end` (excluded). Bytes: a bound need not be UTF-8.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Span {
    /// The first key (not empty).
    #[serde(with = "serde_bytes")]
    pub key: Vec<u8>,
    /// The end, as etcd's `range_end`.
    #[serde(with = "serde_bytes")]
    pub end: Vec<u8>,
}

impl Span {
    /// The keys of the span.
    pub fn range(&self) -> KeyRange<'_> {
        KeyRange::of(&self.key, &self.end)
    }
}

/// A comparison over every key of a span, as etcd's: it holds if it holds
/// for each key present, or, when none is, for an absent key (a value
/// comparison with an absent key fails).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RangeCompare {
    /// The keys compared.
    pub span: Span,
    /// What is compared, and with what.
    pub target: Target,
    /// How.
    pub op: CompareOp,
}

/// One operation of a [`RangeTxn`] branch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RangeOp {
    /// Sets a key (etcd's Put).
    Put {
        /// The key.
        key: String,
        /// The value (empty with `ignore_value`).
        #[serde(with = "serde_bytes")]
        value: Vec<u8>,
        /// The lease the key is attached to from now on (`None`: none;
        /// always `None` with `ignore_lease`).
        lease: Option<LeaseId>,
        /// Keep the key's current value (the key must exist).
        ignore_value: bool,
        /// Keep the key's current lease (the key must exist).
        ignore_lease: bool,
    },
    /// Removes every key of the span.
    DeleteRange(Span),
    /// Reads the keys of the span, as of this point of the transaction
    /// (`revision` 0) or of an earlier revision.
    Range {
        /// The keys.
        span: Span,
        /// The revision read at; 0: now, this transaction's earlier
        /// writes included.
        revision: u64,
        /// Return only the first this many keys in key order (the count
        /// is still of all); `None`: all. The reader asks for what its
        /// options need (etcd's limit + 1 without sorting or filters).
        max_keys: Option<u64>,
    },
    /// A nested transaction (its comparisons are read with the outer
    /// ones, before anything is written).
    Txn(RangeTxn),
}

/// etcd's transaction: if every comparison holds, the `success`
/// operations, else the `failure` ones, in order, at one revision.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RangeTxn {
    /// The comparisons, all of which must hold.
    pub compare: Vec<RangeCompare>,
    /// Done when they all hold.
    pub success: Vec<RangeOp>,
    /// Done otherwise.
    pub failure: Vec<RangeOp>,
}

/// What one [`RangeOp`] did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RangeOpResponse {
    /// A put, with the key as it was.
    Put {
        /// The previous key, if any.
        prev: Option<crate::KeyValue>,
    },
    /// A range delete, with the keys it removed, in key order.
    DeleteRange {
        /// The keys as they were.
        prev: Vec<crate::KeyValue>,
    },
    /// A range read.
    Range {
        /// The keys, in key order (at most the op's `max_keys`).
        kvs: Vec<crate::KeyValue>,
        /// How many keys the span held, all counted.
        count: u64,
    },
    /// A nested transaction.
    Txn {
        /// Whether its comparisons held.
        succeeded: bool,
        /// One response per operation of its branch that ran.
        responses: Vec<RangeOpResponse>,
    },
}

impl RangeOpResponse {
    /// True if the operation changed a key.
    pub fn changed(&self) -> bool {
        match self {
            RangeOpResponse::Put { .. } => true,
            RangeOpResponse::DeleteRange { prev } => !prev.is_empty(),
            RangeOpResponse::Range { .. } => false,
            RangeOpResponse::Txn { responses, .. } => responses.iter().any(Self::changed),
        }
    }
}

impl RangeTxn {
    /// Checks the limits and etcd's rules of a well-formed transaction:
    /// keys not empty, values bounded, [`MAX_TXN_OPS`] per part,
    /// [`MAX_TXN_DEPTH`], [`MAX_TXN_TOTAL_OPS`], and no key written twice
    /// on one path (a put over another put or a delete, nested
    /// transactions included; two deletes may overlap, and the two
    /// branches of one transaction may write the same key).
    pub fn validate(&self) -> Result<(), InvalidCommand> {
        let mut total = 0;
        self.check(1, &mut total)?;
        branch_writes(&self.success)?;
        branch_writes(&self.failure)?;
        Ok(())
    }

    fn check(&self, depth: usize, total: &mut usize) -> Result<(), InvalidCommand> {
        if depth > MAX_TXN_DEPTH {
            return Err(InvalidCommand::TooDeep(depth));
        }
        for part in [self.compare.len(), self.success.len(), self.failure.len()] {
            if part > MAX_TXN_OPS {
                return Err(InvalidCommand::TooManyOps(part));
            }
        }
        *total += self.compare.len() + self.success.len() + self.failure.len();
        if *total > MAX_TXN_TOTAL_OPS {
            return Err(InvalidCommand::TooManyOpsInAll(*total));
        }
        for c in &self.compare {
            check_span(&c.span)?;
            if let Target::Value(v) = &c.target {
                check_value(v)?;
            }
        }
        for op in self.success.iter().chain(&self.failure) {
            match op {
                RangeOp::Put { key, value, .. } => {
                    check_key(key)?;
                    check_value(value)?;
                }
                RangeOp::DeleteRange(span) | RangeOp::Range { span, .. } => check_span(span)?,
                RangeOp::Txn(nested) => nested.check(depth + 1, total)?,
            }
        }
        Ok(())
    }
}

/// The writes of a branch or transaction.
struct Writes<'a> {
    puts: BTreeSet<&'a str>,
    deletes: Vec<KeyRange<'a>>,
}

/// The writes of one branch: its own deletes, then its nested
/// transactions' writes, then its own puts, each put checked against what
/// came before (as etcd's `checkIntervals`).
fn branch_writes(ops: &[RangeOp]) -> Result<Writes<'_>, InvalidCommand> {
    // etcd reads a range end of "\0" here as the end "\0", not as "every
    // key from the first on": such a delete covers no put in this check.
    let mut deletes: Vec<KeyRange<'_>> = ops
        .iter()
        .filter_map(|op| match op {
            RangeOp::DeleteRange(span) if span.end != [0] => Some(span.range()),
            _ => None,
        })
        .collect();
    let mut puts = BTreeSet::new();
    let deleted =
        |deletes: &[KeyRange<'_>], key: &str| deletes.iter().any(|d| d.contains(key.as_bytes()));
    for op in ops {
        let RangeOp::Txn(nested) = op else { continue };
        let success = branch_writes(&nested.success)?;
        let failure = branch_writes(&nested.failure)?;
        for key in success.puts.iter().chain(failure.puts.difference(&success.puts)) {
            if !puts.insert(*key) || deleted(&deletes, key) {
                return Err(InvalidCommand::DuplicateWrite(key.to_string()));
            }
        }
        deletes.extend(success.deletes);
        deletes.extend(failure.deletes);
    }
    for op in ops {
        let RangeOp::Put { key, .. } = op else { continue };
        if !puts.insert(key.as_str()) || deleted(&deletes, key) {
            return Err(InvalidCommand::DuplicateWrite(key.clone()));
        }
    }
    Ok(Writes { puts, deletes })
}

/// A span's first key is a key (not empty, bounded); its end is bounded.
fn check_span(span: &Span) -> Result<(), InvalidCommand> {
    if span.key.is_empty() {
        return Err(InvalidCommand::EmptyKey);
    }
    for bound in [&span.key, &span.end] {
        if bound.len() > crate::MAX_KEY_BYTES {
            return Err(InvalidCommand::KeyTooLong(bound.len()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(key: &str) -> RangeOp {
        RangeOp::Put {
            key: key.into(),
            value: b"v".to_vec(),
            lease: None,
            ignore_value: false,
            ignore_lease: false,
        }
    }

    fn del(key: &str, end: &str) -> RangeOp {
        RangeOp::DeleteRange(Span { key: key.into(), end: end.into() })
    }

    fn txn(success: Vec<RangeOp>, failure: Vec<RangeOp>) -> RangeTxn {
        RangeTxn { compare: Vec::new(), success, failure }
    }

    #[test]
    fn a_key_written_twice_on_one_path_is_refused_as_etcd_refuses_it() {
        let dup = |t: RangeTxn| t.validate() == Err(InvalidCommand::DuplicateWrite("b".into()));
        // Two puts, a put inside a delete, a nested put under an outer
        // delete or put.
        assert!(dup(txn(vec![put("b"), put("b")], vec![])));
        assert!(dup(txn(vec![del("a", "c"), put("b")], vec![])));
        assert!(dup(txn(vec![put("b"), RangeOp::Txn(txn(vec![put("b")], vec![]))], vec![])));
        assert!(dup(txn(vec![del("a", "c"), RangeOp::Txn(txn(vec![], vec![put("b")]))], vec![])));
        // A nested delete over an outer put.
        assert!(dup(txn(vec![put("b"), RangeOp::Txn(txn(vec![del("b", "")], vec![]))], vec![])));
        // Allowed: overlapping deletes, the same key in both branches of a
        // transaction (only one runs), the same key in the two branches of
        // the outer one.
        assert_eq!(txn(vec![del("a", "c"), del("b", "")], vec![]).validate(), Ok(()));
        let both = RangeOp::Txn(txn(vec![put("b")], vec![put("b")]));
        assert_eq!(txn(vec![both], vec![]).validate(), Ok(()));
        assert_eq!(txn(vec![put("b")], vec![put("b")]).validate(), Ok(()));
        // As etcd: a delete of every key from one on is not seen here.
        assert_eq!(txn(vec![del("a", "\0"), put("b")], vec![]).validate(), Ok(()));
    }

    #[test]
    fn depth_and_size_are_bounded() {
        let mut t = txn(vec![put("k")], vec![]);
        for _ in 1..MAX_TXN_DEPTH {
            t = txn(vec![RangeOp::Txn(t)], vec![]);
        }
        assert_eq!(t.validate(), Ok(()));
        let deeper = txn(vec![RangeOp::Txn(t)], vec![]);
        assert_eq!(deeper.validate(), Err(InvalidCommand::TooDeep(MAX_TXN_DEPTH + 1)));
        let reads = |n: usize| {
            (0..n)
                .map(|i| RangeOp::Range {
                    span: Span { key: format!("k{i}").into(), end: Vec::new() },
                    revision: 0,
                    max_keys: None,
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(
            txn(reads(MAX_TXN_OPS + 1), vec![]).validate(),
            Err(InvalidCommand::TooManyOps(MAX_TXN_OPS + 1))
        );
        let wide = txn(
            (0..5).map(|_| RangeOp::Txn(txn(reads(MAX_TXN_OPS - 1), vec![]))).collect(),
            vec![],
        );
        assert!(matches!(wide.validate(), Err(InvalidCommand::TooManyOpsInAll(_))));
        let empty =
            RangeOp::Range { span: Span { key: vec![], end: vec![] }, revision: 0, max_keys: None };
        assert_eq!(txn(vec![empty], vec![]).validate(), Err(InvalidCommand::EmptyKey));
    }
}
