//! One transaction being built by the keeper or a member's recipe: its
//! comparisons (each key once, all `Equal`) and its operations, each part
//! at most [`MAX_TXN_OPS`].

use std::collections::BTreeMap;
use tenure_kv::{Command, Compare, CompareOp, Target, TxnOp, MAX_TXN_OPS};

/// A transaction being built (see the module documentation).
#[derive(Debug, Default)]
pub(crate) struct Txn {
    compare: BTreeMap<String, Target>,
    success: Vec<TxnOp>,
}

impl Txn {
    /// Whether `compare` (those keys not compared yet) and `ops` more
    /// operations fit.
    pub(crate) fn fits(&self, compare: &[(String, Target)], ops: usize) -> bool {
        let new = compare.iter().filter(|(k, _)| !self.compare.contains_key(k)).count();
        self.compare.len() + new <= MAX_TXN_OPS && self.success.len() + ops <= MAX_TXN_OPS
    }

    /// Adds comparisons and operations (check [`Txn::fits`] first).
    pub(crate) fn add(&mut self, compare: Vec<(String, Target)>, ops: Vec<TxnOp>) {
        self.compare.extend(compare);
        self.success.extend(ops);
    }

    /// Whether it has no operation yet.
    pub(crate) fn is_empty(&self) -> bool {
        self.success.is_empty()
    }

    /// The transaction: the operations if every comparison holds, else
    /// nothing.
    pub(crate) fn finish(self) -> Command {
        let compare = self
            .compare
            .into_iter()
            .map(|(key, target)| Compare { key, target, op: CompareOp::Equal })
            .collect();
        Command::Txn { compare, success: self.success, failure: Vec::new() }
    }
}
