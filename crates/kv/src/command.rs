//! What a write asks of the store, and the limits it must keep.

use serde::{Deserialize, Serialize};

/// The longest key, in bytes.
pub const MAX_KEY_BYTES: usize = 1024;

/// The largest value, in bytes.
pub const MAX_VALUE_BYTES: usize = 64 * 1024;

/// Most comparisons, and most operations in each branch, of a transaction.
pub const MAX_TXN_OPS: usize = 128;

/// A write to the store.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    /// Sets `key` to `value`; with `if_mod_revision`, only if the key's
    /// `mod_revision` is that (0: only if the key is absent).
    Put {
        /// The key.
        key: String,
        /// The new value.
        #[serde(with = "serde_bytes")]
        value: Vec<u8>,
        /// Compare-and-set on the key's `mod_revision`.
        if_mod_revision: Option<u64>,
    },
    /// Removes `key`; with `if_mod_revision`, only if its `mod_revision` is that.
    Delete {
        /// The key.
        key: String,
        /// Compare-and-delete on the key's `mod_revision`.
        if_mod_revision: Option<u64>,
    },
    /// If every comparison holds, the `success` operations, else the
    /// `failure` ones, all at one revision.
    Txn {
        /// The comparisons, all of which must hold.
        compare: Vec<Compare>,
        /// Done when they all hold.
        success: Vec<TxnOp>,
        /// Done otherwise.
        failure: Vec<TxnOp>,
    },
}

/// A condition on one key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Compare {
    /// The key.
    pub key: String,
    /// What is compared, and with what.
    pub target: Target,
    /// How.
    pub op: CompareOp,
}

/// The property of a key a comparison reads, with the value it is compared
/// with. An absent key has revisions and version 0 and no value (a value
/// comparison with an absent key fails, whatever the operator).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Target {
    /// The key's `mod_revision`.
    ModRevision(u64),
    /// The key's `create_revision`.
    CreateRevision(u64),
    /// The key's `version`.
    Version(u64),
    /// The key's value.
    Value(#[serde(with = "serde_bytes")] Vec<u8>),
}

/// A comparison operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CompareOp {
    /// Equal.
    Equal,
    /// Not equal.
    NotEqual,
    /// The key's property is less than the given one.
    Less,
    /// The key's property is greater than the given one.
    Greater,
}

/// One operation of a transaction branch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TxnOp {
    /// Sets a key.
    Put {
        /// The key.
        key: String,
        /// The value.
        #[serde(with = "serde_bytes")]
        value: Vec<u8>,
    },
    /// Removes a key.
    Delete {
        /// The key.
        key: String,
    },
    /// Reads a key (as of the transaction's revision).
    Get {
        /// The key.
        key: String,
    },
}

/// Why a command is refused before it is proposed (and, deterministically,
/// if one reaches the store anyway).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum InvalidCommand {
    /// An empty key.
    #[error("the key is empty")]
    EmptyKey,
    /// A key over [`MAX_KEY_BYTES`].
    #[error("the key has {0} bytes; at most {MAX_KEY_BYTES} are accepted")]
    KeyTooLong(usize),
    /// A key with a control character.
    #[error("the key contains a control character")]
    ControlCharacter,
    /// A value over [`MAX_VALUE_BYTES`].
    #[error("the value has {0} bytes; at most {MAX_VALUE_BYTES} are accepted")]
    ValueTooLarge(usize),
    /// A transaction part over [`MAX_TXN_OPS`].
    #[error("the transaction has {0} comparisons or operations in one part; at most {MAX_TXN_OPS} are accepted")]
    TooManyOps(usize),
    /// A transaction that writes one key twice.
    #[error("the transaction writes key {0:?} twice in one branch")]
    DuplicateWrite(String),
    /// Bytes that are not a command.
    #[error("not a command: {0}")]
    Undecodable(String),
}

impl Command {
    /// The command as proposed to the log.
    pub fn encode(&self) -> Vec<u8> {
        postcard::to_allocvec(self).expect("a command always serializes")
    }

    /// A command from the log.
    pub fn decode(bytes: &[u8]) -> Result<Command, InvalidCommand> {
        postcard::from_bytes(bytes).map_err(|e| InvalidCommand::Undecodable(e.to_string()))
    }

    /// Checks the limits; the store refuses what fails them.
    pub fn validate(&self) -> Result<(), InvalidCommand> {
        match self {
            Command::Put { key, value, .. } => {
                check_key(key)?;
                check_value(value)
            }
            Command::Delete { key, .. } => check_key(key),
            Command::Txn { compare, success, failure } => {
                for part in [compare.len(), success.len(), failure.len()] {
                    if part > MAX_TXN_OPS {
                        return Err(InvalidCommand::TooManyOps(part));
                    }
                }
                for c in compare {
                    check_key(&c.key)?;
                    if let Target::Value(v) = &c.target {
                        check_value(v)?;
                    }
                }
                for branch in [success, failure] {
                    let mut written = std::collections::BTreeSet::new();
                    for op in branch {
                        match op {
                            TxnOp::Put { key, value } => {
                                check_key(key)?;
                                check_value(value)?;
                                if !written.insert(key) {
                                    return Err(InvalidCommand::DuplicateWrite(key.clone()));
                                }
                            }
                            TxnOp::Delete { key } => {
                                check_key(key)?;
                                if !written.insert(key) {
                                    return Err(InvalidCommand::DuplicateWrite(key.clone()));
                                }
                            }
                            TxnOp::Get { key } => check_key(key)?,
                        }
                    }
                }
                Ok(())
            }
        }
    }
}

/// Checks a key against the limits.
pub(crate) fn check_key(key: &str) -> Result<(), InvalidCommand> {
    if key.is_empty() {
        return Err(InvalidCommand::EmptyKey);
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(InvalidCommand::KeyTooLong(key.len()));
    }
    if key.chars().any(char::is_control) {
        return Err(InvalidCommand::ControlCharacter);
    }
    Ok(())
}

fn check_value(value: &[u8]) -> Result<(), InvalidCommand> {
    if value.len() > MAX_VALUE_BYTES {
        return Err(InvalidCommand::ValueTooLarge(value.len()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_round_trip_and_garbage_is_refused() {
        let c = Command::Txn {
            compare: vec![Compare {
                key: "a".into(),
                target: Target::ModRevision(3),
                op: CompareOp::Equal,
            }],
            success: vec![TxnOp::Put { key: "a".into(), value: b"x".to_vec() }],
            failure: vec![TxnOp::Get { key: "a".into() }],
        };
        assert_eq!(Command::decode(&c.encode()), Ok(c));
        assert!(matches!(Command::decode(&[0xff; 3]), Err(InvalidCommand::Undecodable(_))));
        assert!(matches!(Command::decode(&[]), Err(InvalidCommand::Undecodable(_))));
    }

    #[test]
    fn limits_are_checked_with_clear_reasons() {
        let put = |key: &str, len: usize| Command::Put {
            key: key.into(),
            value: vec![0; len],
            if_mod_revision: None,
        };
        assert_eq!(put("", 1).validate(), Err(InvalidCommand::EmptyKey));
        assert_eq!(put("k", MAX_VALUE_BYTES).validate(), Ok(()));
        assert_eq!(
            put("k", MAX_VALUE_BYTES + 1).validate(),
            Err(InvalidCommand::ValueTooLarge(MAX_VALUE_BYTES + 1))
        );
        let long = "k".repeat(MAX_KEY_BYTES + 1);
        assert_eq!(put(&long, 1).validate(), Err(InvalidCommand::KeyTooLong(MAX_KEY_BYTES + 1)));
        assert_eq!(put("a\nb", 1).validate(), Err(InvalidCommand::ControlCharacter));
        let twice = Command::Txn {
            compare: vec![],
            success: vec![
                TxnOp::Put { key: "a".into(), value: vec![] },
                TxnOp::Delete { key: "a".into() },
            ],
            failure: vec![],
        };
        assert_eq!(twice.validate(), Err(InvalidCommand::DuplicateWrite("a".into())));
        let many = Command::Txn {
            compare: vec![],
            success: (0..=MAX_TXN_OPS).map(|i| TxnOp::Get { key: format!("k{i}") }).collect(),
            failure: vec![],
        };
        assert_eq!(many.validate(), Err(InvalidCommand::TooManyOps(MAX_TXN_OPS + 1)));
        assert!(InvalidCommand::KeyTooLong(2000).to_string().contains("at most 1024"));
    }
}
