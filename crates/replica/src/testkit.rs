//! For tests and model checkers (feature `testkit`): a state machine that
//! records what it applies, so checks can compare what each node applied.

use crate::{Position, StateMachine};
use tenure_core::FencingToken;

/// A state machine that records every command applied with its
/// position, in order. Its snapshot is that record, so a node that installs
/// a snapshot still shows what was applied (and the checks can compare it).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Recorder {
    /// Every `(position, command)` applied (or restored), in log order.
    pub applied: Vec<(Position, Vec<u8>)>,
}

/// Bytes of one record in a [`Recorder`] snapshot: token, index, command length.
const RECORD_HEADER: usize = 24;

impl Recorder {
    /// The command applied at `pos`, if any (no-ops are not applied).
    pub fn command_at(&self, pos: Position) -> Option<&[u8]> {
        self.applied.iter().find(|(p, _)| *p == pos).map(|(_, c)| c.as_slice())
    }

    /// Decodes a snapshot made by [`StateMachine::snapshot`].
    pub fn decode(mut bytes: &[u8]) -> Result<Recorder, String> {
        let mut applied = Vec::new();
        while !bytes.is_empty() {
            if bytes.len() < RECORD_HEADER {
                return Err(format!("a record header of {} bytes", bytes.len()));
            }
            let word = |k: usize| {
                let mut w = [0; 8];
                w.copy_from_slice(&bytes[8 * k..8 * k + 8]);
                u64::from_le_bytes(w)
            };
            let pos = Position { token: FencingToken(word(0)), index: word(1) };
            let len = usize::try_from(word(2)).map_err(|e| e.to_string())?;
            let rest = &bytes[RECORD_HEADER..];
            if rest.len() < len {
                return Err(format!("a command of {len} bytes with {} left", rest.len()));
            }
            applied.push((pos, rest[..len].to_vec()));
            bytes = &rest[len..];
        }
        Ok(Recorder { applied })
    }
}

impl StateMachine for Recorder {
    fn apply(&mut self, pos: Position, command: &[u8]) -> Vec<u8> {
        self.applied.push((pos, command.to_vec()));
        pos.index.to_le_bytes().to_vec()
    }

    fn snapshot(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for (pos, command) in &self.applied {
            out.extend_from_slice(&pos.token.0.to_le_bytes());
            out.extend_from_slice(&pos.index.to_le_bytes());
            out.extend_from_slice(&(command.len() as u64).to_le_bytes());
            out.extend_from_slice(command);
        }
        out
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), String> {
        *self = Recorder::decode(snapshot)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(token: u64, index: u64) -> Position {
        Position { token: FencingToken(token), index }
    }

    #[test]
    fn snapshots_round_trip_and_truncated_ones_are_refused() {
        let mut r = Recorder::default();
        r.apply(pos(1, 2), b"a");
        r.apply(pos(2, 4), b"");
        assert_eq!(Recorder::decode(&r.snapshot()), Ok(r.clone()));
        assert!(Recorder::decode(&r.snapshot()[..30]).is_err());
        let mut other = Recorder::default();
        other.restore(&r.snapshot()).unwrap();
        assert_eq!(other, r);
        assert_eq!(other.command_at(pos(1, 2)), Some(&b"a"[..]));
    }
}
