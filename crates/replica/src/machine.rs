//! The state machine every node applies committed entries to.

use crate::entry::Position;

/// A deterministic state machine: the same commands in the same order give the
/// same state and the same results on every node. It is owned by the replica,
/// which applies each committed command exactly once, in log order.
pub trait StateMachine {
    /// Applies the command of the committed entry at `pos` and returns its
    /// result (handed to the proposer, if it is waiting on this node).
    /// A command the machine cannot decode must still be applied
    /// deterministically: return an error result, do not panic.
    fn apply(&mut self, pos: Position, command: &[u8]) -> Vec<u8>;

    /// A snapshot of the whole state (everything applied so far).
    fn snapshot(&self) -> Vec<u8>;

    /// Replaces the whole state with a snapshot made by [`StateMachine::snapshot`]
    /// (on any node). An error leaves the state unchanged.
    fn restore(&mut self, snapshot: &[u8]) -> Result<(), String>;
}
