//! The real elector as a model-checker state, with its observational fields
//! left out of its identity.
//!
//! The core's electors do not offer `Eq + Hash` that leave out their metric
//! [`tenure_core::Counters`] and the per-peer `last_heard` times that only
//! `status()` reports. `messages_ignored` grows each time a stale or duplicated
//! message is delivered, so with counters in the state, every redelivery of a
//! stale message would be a new state and the exploration would not close;
//! `last_heard` changes on every delivery and would multiply the states. No
//! decision of the core reads either, so two electors that differ only there
//! behave identically and are one state here.
//!
//! The core offers no comparison without those fields, so the identity used
//! here is a hash of the elector's `Debug` text with the two sections cut out.
//! `Debug` shows every field, but instants only to the microsecond. Every
//! instant in the model is a whole millisecond (see
//! [`crate::model::CLOCK_DRIFT_PPM`]), so no two different electors share a
//! text; [`Elector::new`] checks that and panics otherwise, rather than let
//! the checker merge different states silently.

use crate::rng::ModelRng;
use std::hash::{DefaultHasher, Hash, Hasher};
use tenure_core::Elector as CoreElector;

/// The `Debug` sections, as `(opening, closing character)` in the order the
/// fields are declared, that no decision of the core reads: the metric counters
/// and the per-peer `last_heard` times (shown only by `status()`).
const OBSERVATIONAL: [(&str, char); 2] = [("last_heard: [", ']'), ("counters: Counters {", '}')];

/// A core [`CoreElector`] (any protocol) whose equality and hash ignore its
/// metric counters and per-peer `last_heard` times.
#[derive(Clone, Debug)]
pub struct Elector {
    inner: CoreElector<ModelRng>,
    /// Hash of the elector's `Debug` text without the counters.
    identity: u64,
}

impl Elector {
    /// Wraps `inner`, computing its identity.
    ///
    /// # Panics
    /// If an instant in the elector is not a whole millisecond: its `Debug`
    /// text would then not tell it apart from a nearby instant.
    pub fn new(inner: CoreElector<ModelRng>) -> Self {
        let debug = format!("{inner:?}");
        if let Some(bad) = instant_not_whole_ms(&debug) {
            panic!("the model needs whole-millisecond instants, found {bad} in {debug}");
        }
        let identity = identity_of(&debug);
        Elector { inner, identity }
    }

    /// The wrapped elector.
    pub fn inner(&self) -> &CoreElector<ModelRng> {
        &self.inner
    }
}

/// The first `Instant(..)` in `debug` that is neither "never" nor a whole
/// number of milliseconds (`Instant(123.000ms)`), if any.
fn instant_not_whole_ms(debug: &str) -> Option<&str> {
    debug.match_indices("Instant(").find_map(|(start, _)| {
        let len = debug[start..].find(')').map_or(debug.len() - start, |e| e + 1);
        let shown = &debug[start..start + len];
        let whole = shown == "Instant(never)" || shown.ends_with(".000ms)");
        (!whole).then_some(shown)
    })
}

/// Hashes `debug` with the observational sections ([`OBSERVATIONAL`]) removed.
/// `DefaultHasher::new()` has fixed keys, so the identity is the same in every
/// run (the checker replays paths by recomputing fingerprints).
fn identity_of(debug: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    let mut rest = debug;
    for (opening, closing) in OBSERVATIONAL {
        let Some(start) = rest.find(opening) else {
            // Keep the exploration sound if the core's Debug output changes:
            // the section would then merely inflate the state count.
            continue;
        };
        // Neither section nests its closing character, so the first one closes it.
        let end = rest[start..].find(closing).map_or(rest.len(), |e| start + e + 1);
        rest[..start].hash(&mut hasher);
        rest = &rest[end..];
    }
    rest.hash(&mut hasher);
    hasher.finish()
}

impl PartialEq for Elector {
    fn eq(&self, other: &Self) -> bool {
        self.identity == other.identity
    }
}

impl Eq for Elector {}

impl Hash for Elector {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.identity.hash(state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tenure_core::{
        Config, HardState, Instant, Message, NodeId, Protocol, ProtocolKind, RaftElector, Term,
    };

    fn config() -> Config {
        let voters = vec![NodeId(1), NodeId(2), NodeId(3)];
        Config::new(NodeId(1), voters, Duration::from_millis(100), Duration::from_millis(420))
    }

    fn elector() -> RaftElector<ModelRng> {
        let mut e =
            RaftElector::new(config(), HardState::default(), ModelRng::new(1), Instant::ZERO);
        let _ = e.take_output();
        e
    }

    #[test]
    fn the_debug_text_has_the_observational_sections_in_order() {
        for kind in ProtocolKind::ALL {
            let e = CoreElector::new(
                kind,
                config(),
                HardState::default(),
                ModelRng::new(1),
                Instant::ZERO,
            );
            let debug = format!("{e:?}");
            let positions: Vec<usize> = OBSERVATIONAL
                .iter()
                .map(|(o, _)| debug.find(o).unwrap_or_else(|| panic!("{kind}: no {o} in {debug}")))
                .collect();
            assert!(positions.windows(2).all(|w| w[0] < w[1]), "{kind}: {debug}");
        }
    }

    #[test]
    fn only_whole_millisecond_instants_pass() {
        assert_eq!(instant_not_whole_ms("a: Instant(420.000ms), b: Instant(never)"), None);
        assert_eq!(
            instant_not_whole_ms("a: Instant(420.000ms), b: Instant(110.526ms)"),
            Some("Instant(110.526ms)")
        );
    }

    #[test]
    fn counters_do_not_change_identity_but_state_does() {
        let base = elector();
        // A stale vote response is ignored: only `messages_ignored` changes
        // (plus `last_heard`, which is the same `now` both times).
        let stale = Message::VoteResponse { term: Term(0), granted: false };
        let mut once = base.clone();
        once.handle_message(Instant::ZERO, NodeId(2), stale.clone());
        let _ = once.take_output();
        let mut twice = once.clone();
        twice.handle_message(Instant::ZERO, NodeId(2), stale);
        let _ = twice.take_output();
        assert_ne!(once.counters(), twice.counters(), "the core counts the second delivery");
        assert_eq!(once, twice, "the core's own equality leaves counters out");
        let wrap = |e: RaftElector<ModelRng>| Elector::new(CoreElector::Raft(e));
        assert_eq!(wrap(once.clone()), wrap(twice));

        let mut later = once.clone();
        later.handle_timeout(later.poll_timeout());
        let _ = later.take_output();
        assert_ne!(wrap(once), wrap(later));
    }
}
