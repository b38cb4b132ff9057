//! A tiny deterministic random source whose whole state is part of the model state.

use rand_core::{impls, RngCore};

/// The step between successive values of [`ModelRng`]: one millisecond, in
/// nanoseconds. The core uses the value modulo its jitter bound (a quarter of
/// the candidacy stagger, 12.5 ms here), so periods up to 12 give distinct jitters.
const RNG_STEP_NANOS: u64 = 1_000_000;

/// A deterministic RNG with a tiny, hashable state: it yields
/// `0, 1 ms, 2 ms, ..., (period - 1) ms` in nanoseconds, then starts over.
///
/// The model checker treats each elector as a value (`Clone + Eq + Hash`), RNG
/// included; a real PRNG would make every draw a new state. The core draws
/// only for the jitter on candidacy deadlines, which serves liveness (breaking
/// ties), not the safety of votes and terms, so a short cycle loses nothing
/// the properties depend on. A period of 1 (always 0) is the cheapest; a
/// longer period lets successive deadlines of a node differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ModelRng {
    /// Index of the next value.
    position: u8,
    /// Number of distinct values; at least 1.
    period: u8,
}

impl ModelRng {
    /// A generator cycling through `period` values (a period of 0 is taken as 1).
    pub fn new(period: u8) -> Self {
        ModelRng { position: 0, period: period.max(1) }
    }
}

impl RngCore for ModelRng {
    fn next_u32(&mut self) -> u32 {
        // Truncation is intended: the low half of the cycling value.
        self.next_u64() as u32
    }

    fn next_u64(&mut self) -> u64 {
        let value = u64::from(self.position) * RNG_STEP_NANOS;
        self.position = (self.position + 1) % self.period;
        value
    }

    fn fill_bytes(&mut self, dest: &mut [u8]) {
        impls::fill_bytes_via_next(self, dest)
    }

    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand_core::Error> {
        self.fill_bytes(dest);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cycles_through_its_values() {
        let mut rng = ModelRng::new(2);
        let drawn: Vec<u64> = (0..4).map(|_| rng.next_u64()).collect();
        assert_eq!(drawn, vec![0, 1_000_000, 0, 1_000_000]);
        assert_eq!(rng, ModelRng::new(2));
        let mut constant = ModelRng::new(0);
        assert_eq!((constant.next_u64(), constant.next_u64()), (0, 0));
    }
}
