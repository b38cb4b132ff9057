//! The real elector as a model-checker state.
//!
//! The core's [`tenure_core::Elector`] is `Clone + Eq + Hash` with an
//! `Eq + Hash` RNG ([`ModelRng`]), and its equality and hash are its decision
//! state: they leave out only what the core records to report it (the seat's
//! `Observed`: the metric counters, the per-peer `last_heard` times and the
//! time of the last input). The model uses them as they are, so a state's
//! identity is exact: two electors are one state only if every field a
//! decision reads is equal.
//!
//! Why leaving those fields out is sound here:
//! * the counters (`messages_ignored` grows each time a stale or duplicated
//!   message is delivered) and `last_heard` are read by no decision; with
//!   them in the identity, every redelivery would be a new state and the
//!   exploration would not close;
//! * `last_input` is read by one check only: an input whose `now` is earlier
//!   halts the node (time went backwards). In the model a node's clock never
//!   goes back and every input runs at the node's current clock
//!   ([`crate::model::Node::now`], part of the state), which is at least the
//!   `last_input` of any elector it holds (a restarted elector starts at it),
//!   so that check passes in every merged state alike.
//!
//! The output buffer (`Output`) is part of the equality; the model drains it
//! at the end of every step, so it is empty in every state.

use crate::rng::ModelRng;

/// The elector of one modelled node: the core's, of any protocol, driven by
/// the model's hashable RNG.
pub type Elector = tenure_core::Elector<ModelRng>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::hash_map::DefaultHasher;
    use std::hash::{Hash, Hasher};
    use std::time::Duration;
    use tenure_core::{Config, HardState, Instant, Message, NodeId, Protocol, ProtocolKind, Term};

    fn config() -> Config {
        let voters = vec![NodeId(1), NodeId(2), NodeId(3)];
        Config::new(NodeId(1), voters, Duration::from_millis(100), Duration::from_millis(420))
    }

    fn hash_of(e: &Elector) -> u64 {
        let mut hasher = DefaultHasher::new();
        e.hash(&mut hasher);
        hasher.finish()
    }

    #[test]
    fn what_is_only_reported_does_not_change_identity_but_state_does() {
        for kind in ProtocolKind::ALL {
            let mut base =
                Elector::new(kind, config(), HardState::default(), ModelRng::new(1), Instant::ZERO);
            let _ = base.take_output();
            // A message from a past term is ignored: only what is reported
            // changes (`messages_ignored`, `last_heard`, the last input time).
            let stale = Message::VoteResponse { term: Term(0), granted: false };
            let mut once = base.clone();
            once.handle_message(Instant::ZERO + Duration::from_millis(1), NodeId(2), stale.clone());
            let _ = once.take_output();
            let mut twice = once.clone();
            twice.handle_message(Instant::ZERO + Duration::from_millis(2), NodeId(3), stale);
            let _ = twice.take_output();
            assert_ne!(once.counters(), twice.counters(), "{kind}: the core counts the delivery");
            assert_ne!(format!("{once:?}"), format!("{twice:?}"), "{kind}: the input time differs");
            assert_eq!(once, twice, "{kind}: equality leaves what is reported out");
            assert_eq!(hash_of(&once), hash_of(&twice), "{kind}: so does the hash");

            let mut later = once.clone();
            later.handle_timeout(later.poll_timeout());
            let _ = later.take_output();
            assert_ne!(once, later, "{kind}: a timeout changes the decision state");
        }
    }
}
