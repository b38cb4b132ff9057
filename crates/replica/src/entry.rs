//! Log entries and their positions.

use crate::membership::Members;
use serde::{Deserialize, Serialize};
use std::fmt;
use tenure_core::FencingToken;

/// An entry's place in the log: 1 for the first entry, 0 before it.
pub type Index = u64;

/// An entry's identity: the fencing token of the leadership that wrote it, and
/// its index. Ordered by token, then index: of two logs, the one whose last
/// position is greater is the fresher (see `docs/REPLICATION.md`).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
pub struct Position {
    /// The fencing token of the leadership that wrote the entry.
    pub token: FencingToken,
    /// The entry's index.
    pub index: Index,
}

impl Position {
    /// The position before the first entry.
    pub const ZERO: Position = Position { token: FencingToken(0), index: 0 };
}

impl fmt::Debug for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.index, self.token.0)
    }
}

/// What an entry asks of the state machine.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Payload {
    /// Nothing: the entry a new leader writes to commit what it inherited.
    Noop,
    /// A command for the state machine, opaque to the log.
    Command(#[serde(with = "serde_bytes")] Vec<u8>),
    /// A new configuration: who votes and who learns from here on. Every
    /// node uses it from the moment it holds the entry (`docs/MEMBERSHIP.md`).
    Members(Members),
}

impl Payload {
    /// The bytes the entry takes in a batch (the command's length).
    pub fn size(&self) -> usize {
        match self {
            Payload::Noop => 0,
            Payload::Command(c) => c.len(),
            Payload::Members(m) => m.all().map(|m| 24 + m.address.len()).sum(),
        }
    }
}

/// One log entry.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Entry {
    /// Where it is and who wrote it.
    pub pos: Position,
    /// What it carries.
    pub payload: Payload,
}
