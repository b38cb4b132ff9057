//! The model's network: a multiset of envelopes in flight.
//!
//! Any envelope in flight may be delivered next (reordering), none ever has to
//! be (loss: for safety, a message that is never delivered is the same as one
//! that was dropped, so there is no separate drop step), and the model may copy
//! an envelope in flight within a budget (duplication).
//!
//! Why not the usual "duplicating set" that never consumes envelopes: the core
//! must then stay finite under unbounded redelivery, and it does not. A
//! pre-candidate appends the lease of every refusal it receives to its round
//! (`Round::lease_waits`), duplicates included, so redelivering one refusal
//! makes a new state every time and the exploration never ends. A bounded
//! number of duplicates keeps every behaviour with that many copies.

use std::cmp::Ordering;
use std::sync::Arc;
use tenure_core::{Message, NodeId};

/// A message in flight from one node to another.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Envelope {
    /// The sender (the transport authenticates it, so the core trusts it).
    pub from: NodeId,
    /// The receiver.
    pub to: NodeId,
    /// The payload.
    pub msg: Message,
}

impl Envelope {
    fn key(&self) -> (NodeId, NodeId, &Message) {
        (self.from, self.to, &self.msg)
    }
}

impl Ord for Envelope {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}

impl PartialOrd for Envelope {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// The envelopes in flight, as a sorted multiset (equal networks hash equally).
/// Each envelope is shared by every state it is in flight in. The election
/// model's envelopes carry the core's [`Message`]; the replica model's carry
/// replica messages ([`crate::replica::ReplicaEnvelope`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Network<E = Envelope> {
    /// Sorted; equal envelopes are adjacent.
    in_flight: Vec<Arc<E>>,
}

impl<E> Default for Network<E> {
    fn default() -> Self {
        Network { in_flight: Vec::new() }
    }
}

impl<E: Ord> Network<E> {
    /// An empty network.
    pub fn new() -> Self {
        Network::default()
    }

    /// Puts an envelope in flight.
    pub fn send(&mut self, env: E) {
        let at = self.in_flight.partition_point(|e| **e <= env);
        self.in_flight.insert(at, Arc::new(env));
    }

    /// Removes one copy of `env`; false if none was in flight.
    pub fn take(&mut self, env: &E) -> bool {
        match self.in_flight.binary_search_by(|e| e.as_ref().cmp(env)) {
            Ok(at) => {
                self.in_flight.remove(at);
                true
            }
            Err(_) => false,
        }
    }

    /// How many copies of `env` are in flight.
    pub fn count(&self, env: &E) -> usize {
        self.in_flight.iter().filter(|e| e.as_ref() == env).count()
    }

    /// The distinct envelopes in flight, in order.
    pub fn distinct(&self) -> impl Iterator<Item = &E> {
        self.in_flight
            .iter()
            .enumerate()
            .filter(|&(i, e)| i == 0 || self.in_flight[i - 1] != *e)
            .map(|(_, e)| e.as_ref())
    }

    /// Keeps only the envelopes for which `keep` is true.
    pub fn retain(&mut self, mut keep: impl FnMut(&E) -> bool) {
        self.in_flight.retain(|e| keep(e));
    }

    /// How many envelopes are in flight, copies included.
    pub fn len(&self) -> usize {
        self.in_flight.len()
    }

    /// True when nothing is in flight.
    pub fn is_empty(&self) -> bool {
        self.in_flight.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tenure_core::Term;

    #[test]
    fn order_agrees_with_equality() {
        let a = Envelope {
            from: NodeId(1),
            to: NodeId(2),
            msg: Message::PreVoteResponse {
                term: Term(1),
                proposed: Term(2),
                granted: false,
                lease_remaining_ms: Some(5),
            },
        };
        let mut b = a.clone();
        assert_eq!(a.cmp(&b), Ordering::Equal);
        b.msg = Message::PreVoteResponse {
            term: Term(1),
            proposed: Term(2),
            granted: false,
            lease_remaining_ms: None,
        };
        assert_ne!(a.cmp(&b), Ordering::Equal);
        let mut net = Network::new();
        net.send(a.clone());
        net.send(b.clone());
        net.send(a.clone());
        assert_eq!(net.len(), 3);
        assert_eq!(net.distinct().count(), 2);
        assert_eq!((net.count(&a), net.count(&b)), (2, 1));
        assert!(net.take(&a));
        assert!(net.take(&a));
        assert!(!net.take(&a));
        assert_eq!(net.distinct().cloned().collect::<Vec<_>>(), vec![b]);
    }
}
