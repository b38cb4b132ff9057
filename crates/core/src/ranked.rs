//! SKELETON — to be replaced by the ranked protocol implementation.

use crate::config::{Config, ConfigError};
use crate::message::Message;
use crate::protocol::{Counters, HardState, Output, Protocol, Status, TransferError};
use crate::time::Instant;
use crate::types::{NodeId, Term};
use rand_core::RngCore;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Messages of the ranked protocol.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum RankedMessage {
    /// Placeholder.
    Placeholder {
        /// Term.
        term: Term,
    },
}

impl RankedMessage {
    /// The term (or encoded ballot) the message carries.
    pub fn term(&self) -> Term {
        match self {
            RankedMessage::Placeholder { term } => *term,
        }
    }
    /// A short name for logs and metrics.
    pub fn kind(&self) -> &'static str {
        "placeholder"
    }
    /// If this message, sent to its destination, grants it a vote (or promise)
    /// in a term: that term.
    pub fn vote_grant(&self) -> Option<Term> {
        None
    }
    /// If this is a leader's heartbeat: the leader's term.
    pub fn heartbeat_term(&self) -> Option<Term> {
        None
    }
}

/// Protocol-specific configuration checks.
pub fn validate(_cfg: &Config) -> Result<(), ConfigError> {
    Ok(())
}

/// The ranked elector.
#[derive(Clone, Debug)]
pub struct RankedElector<R> {
    cfg: Config,
    rng: R,
    counters: Counters,
}

impl<R: RngCore + Send> RankedElector<R> {
    /// A new elector.
    pub fn new(cfg: Config, _state: HardState, rng: R, _now: Instant) -> Self {
        RankedElector { cfg, rng, counters: Counters::default() }
    }
}

impl<R: RngCore + Send> Protocol for RankedElector<R> {
    fn handle_message(&mut self, _now: Instant, _from: NodeId, _msg: Message) {
        let _ = &mut self.rng;
        todo!()
    }
    fn handle_timeout(&mut self, _now: Instant) {
        todo!()
    }
    fn handle_persist_failed(&mut self, _now: Instant) {
        todo!()
    }
    fn handle_persist_recovered(&mut self, _now: Instant) {
        todo!()
    }
    fn transfer_leadership(&mut self, _now: Instant, _to: NodeId) -> Result<(), TransferError> {
        todo!()
    }
    fn shutdown(&mut self, _now: Instant) {
        todo!()
    }
    fn take_output(&mut self) -> Output {
        todo!()
    }
    fn poll_timeout(&self) -> Instant {
        todo!()
    }
    fn hard_state(&self) -> HardState {
        todo!()
    }
    fn status(&self) -> Status {
        todo!()
    }
    fn is_leader(&self, _now: Instant) -> bool {
        todo!()
    }
    fn counters(&self) -> &Counters {
        &self.counters
    }
    fn election_timeout(&self) -> Duration {
        self.cfg.election_timeout
    }
}
