//! [`Elector`]: any of tenure's protocols behind one concrete type.

use crate::config::{Config, ConfigError};
use crate::electorate::Electorate;
use crate::kind::ProtocolKind;
use crate::message::Message;
use crate::paxos::PaxosElector;
use crate::protocol::{Counters, HardState, Output, Protocol, Status, TransferError};
use crate::raft::RaftElector;
use crate::ranked::RankedElector;
use crate::time::Instant;
use crate::types::NodeId;
use rand_core::RngCore;
use std::time::Duration;

/// One of the election protocols, chosen at run time by [`ProtocolKind`].
///
/// Drivers that pick the protocol from configuration hold an `Elector`; it is
/// `Clone + Debug` like the protocols themselves, and `Eq + Hash` with an
/// `Eq + Hash` RNG, leaving out what is only reported (counters, contact
/// times): the model checker uses that as a state's identity.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
// One elector per node, built once and never moved on a hot path: boxing the
// variants to even out their sizes would buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum Elector<R> {
    /// [`ProtocolKind::Raft`].
    Raft(RaftElector<R>),
    /// [`ProtocolKind::Ranked`].
    Ranked(RankedElector<R>),
    /// [`ProtocolKind::Paxos`].
    Paxos(PaxosElector<R>),
}

impl Config {
    /// [`Config::validate`] plus the requirements of protocol `kind`.
    pub fn validate_for(&self, kind: ProtocolKind) -> Result<(), ConfigError> {
        self.validate()?;
        self.validate_protocol(kind)
    }

    /// [`Config::validate_settings`] plus the requirements of protocol
    /// `kind`: for a node that joins a running cluster.
    pub fn validate_settings_for(&self, kind: ProtocolKind) -> Result<(), ConfigError> {
        self.validate_settings()?;
        self.validate_protocol(kind)
    }

    fn validate_protocol(&self, kind: ProtocolKind) -> Result<(), ConfigError> {
        match kind {
            ProtocolKind::Raft => Ok(()),
            ProtocolKind::Ranked => crate::ranked::validate(self),
            ProtocolKind::Paxos => crate::paxos::validate(self),
        }
    }
}

impl<R: RngCore + Send> Elector<R> {
    /// A new elector of protocol `kind`, from the durable `state`. `cfg` must
    /// pass [`Config::validate_for`] for `kind`.
    pub fn new(kind: ProtocolKind, cfg: Config, state: HardState, rng: R, now: Instant) -> Self {
        match kind {
            ProtocolKind::Raft => Elector::Raft(RaftElector::new(cfg, state, rng, now)),
            ProtocolKind::Ranked => Elector::Ranked(RankedElector::new(cfg, state, rng, now)),
            ProtocolKind::Paxos => Elector::Paxos(PaxosElector::new(cfg, state, rng, now)),
        }
    }

    /// Which protocol this is.
    pub fn kind(&self) -> ProtocolKind {
        match self {
            Elector::Raft(_) => ProtocolKind::Raft,
            Elector::Ranked(_) => ProtocolKind::Ranked,
            Elector::Paxos(_) => ProtocolKind::Paxos,
        }
    }

    fn inner(&self) -> &dyn Protocol {
        match self {
            Elector::Raft(e) => e,
            Elector::Ranked(e) => e,
            Elector::Paxos(e) => e,
        }
    }

    fn inner_mut(&mut self) -> &mut dyn Protocol {
        match self {
            Elector::Raft(e) => e,
            Elector::Ranked(e) => e,
            Elector::Paxos(e) => e,
        }
    }
}

impl<R: RngCore + Send> Protocol for Elector<R> {
    fn handle_message(&mut self, now: Instant, from: NodeId, msg: Message) {
        self.inner_mut().handle_message(now, from, msg)
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.inner_mut().handle_timeout(now)
    }
    fn handle_persist_failed(&mut self, now: Instant) {
        self.inner_mut().handle_persist_failed(now)
    }
    fn handle_persist_recovered(&mut self, now: Instant) {
        self.inner_mut().handle_persist_recovered(now)
    }
    fn handle_peer_dead(&mut self, now: Instant, peer: NodeId) {
        self.inner_mut().handle_peer_dead(now, peer)
    }
    fn handle_electorate(&mut self, now: Instant, electorate: Electorate) {
        self.inner_mut().handle_electorate(now, electorate)
    }
    fn electorate(&self) -> &Electorate {
        self.inner().electorate()
    }
    fn transfer_leadership(&mut self, now: Instant, to: NodeId) -> Result<(), TransferError> {
        self.inner_mut().transfer_leadership(now, to)
    }
    fn give_up_leadership(&mut self, now: Instant, token: crate::FencingToken) {
        self.inner_mut().give_up_leadership(now, token)
    }
    fn shutdown(&mut self, now: Instant) {
        self.inner_mut().shutdown(now)
    }
    fn take_output(&mut self) -> Output {
        self.inner_mut().take_output()
    }
    fn poll_timeout(&self) -> Instant {
        self.inner().poll_timeout()
    }
    fn hard_state(&self) -> HardState {
        self.inner().hard_state()
    }
    fn status(&self) -> Status {
        self.inner().status()
    }
    fn is_leader(&self, now: Instant) -> bool {
        self.inner().is_leader(now)
    }
    fn counters(&self) -> &Counters {
        self.inner().counters()
    }
    fn election_timeout(&self) -> Duration {
        self.inner().election_timeout()
    }
}
