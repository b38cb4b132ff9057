//! The calling contract of [`Protocol`], applied in one place.
//!
//! After every input a driver drains the protocol's [`Output`] and handles it
//! in order: persist, then send, then deliver events; a failed write drops the
//! output's messages and is reported to the protocol before any other input. [`drain`] does
//! exactly that, repeatedly while the protocol produces more output, so that
//! the simulator, the model checker and the test kit cannot drift apart in how
//! they honour the contract. A [`Driver`] supplies the I/O: where state is
//! written, where messages go and who hears the events.
//!
//! ```
//! use std::time::Duration;
//! use tenure_core::contract::{self, Driver, WriteFailed};
//! use tenure_core::{Config, Event, HardState, Instant, Message, NodeId, RaftElector};
//!
//! /// A single node whose disk always works.
//! struct Solo {
//!     node: RaftElector<rand_pcg::Pcg64Mcg>,
//!     disk: HardState,
//!     events: Vec<Event>,
//! }
//!
//! impl Driver for Solo {
//!     type Node = RaftElector<rand_pcg::Pcg64Mcg>;
//!     fn node(&mut self) -> &mut Self::Node {
//!         &mut self.node
//!     }
//!     fn persist(&mut self, state: HardState) -> Result<(), WriteFailed> {
//!         self.disk = state;
//!         Ok(())
//!     }
//!     fn send(&mut self, _to: NodeId, _msg: Message) {}
//!     fn event(&mut self, event: Event) {
//!         self.events.push(event);
//!     }
//! }
//!
//! let cfg = Config::new(NodeId(1), vec![NodeId(1)], Duration::from_millis(100), Duration::from_millis(1000));
//! let node = RaftElector::new(cfg, HardState::default(), rand_pcg::Pcg64Mcg::new(7), Instant::ZERO);
//! let mut solo = Solo { node, disk: HardState::default(), events: Vec::new() };
//! for _ in 0..2 {
//!     let now = tenure_core::Protocol::poll_timeout(&solo.node);
//!     tenure_core::Protocol::handle_timeout(&mut solo.node, now);
//!     contract::drain(&mut solo, now);
//! }
//! assert_eq!(solo.disk.voted_for, Some(NodeId(1)));
//! ```

use crate::message::Message;
use crate::protocol::{Event, HardState, Output, Protocol};
use crate::time::Instant;
use crate::types::NodeId;

/// The most outputs [`drain`] handles in one call. A protocol produces a
/// further output after a drain only when told of a failed write, so two
/// rounds suffice; the bound keeps a misbehaving protocol from looping.
pub const MAX_OUTPUT_ROUNDS: usize = 8;

/// A write of durable state did not reach stable storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("durable state could not be written")]
pub struct WriteFailed;

/// The I/O side of the calling contract, as one driver performs it.
pub trait Driver {
    /// The protocol driven.
    type Node: Protocol + ?Sized;

    /// The protocol whose output is drained.
    fn node(&mut self) -> &mut Self::Node;

    /// Sees each output before any of it is handled: for traces, or to time
    /// the sends of an output that persisted (a simulated fsync). Does nothing
    /// unless overridden.
    fn output(&mut self, _output: &Output) {}

    /// Writes `state` durably (with fsync). An error drops the messages of
    /// the same output and is reported to the protocol.
    fn persist(&mut self, state: HardState) -> Result<(), WriteFailed>;

    /// Sends `msg` to `to`, best effort.
    fn send(&mut self, to: NodeId, msg: Message);

    /// Delivers a leadership event.
    fn event(&mut self, event: Event);
}

/// What one [`drain`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Drained {
    /// Non-empty outputs handled.
    pub outputs: usize,
    /// Writes that failed (each reported with [`Protocol::handle_persist_failed`]).
    pub failed_writes: usize,
}

/// Drains the driver's protocol by the calling contract, at `now` on the
/// node's clock. For each non-empty output: persist; send the messages
/// unless the write failed (they are dropped); deliver the events; and if the
/// write failed, call [`Protocol::handle_persist_failed`] before any other
/// input. Repeats while the protocol produces output (a failure report
/// produces some), at most [`MAX_OUTPUT_ROUNDS`] times.
///
/// The events of an output whose write failed are still delivered, before
/// the report, as the output stated them: drivers that look at the protocol
/// when an event arrives (the simulator's checkers read a new leader's
/// fencing token) see the state that produced the event.
pub fn drain<D: Driver + ?Sized>(driver: &mut D, now: Instant) -> Drained {
    let mut drained = Drained::default();
    for _ in 0..MAX_OUTPUT_ROUNDS {
        let out = driver.node().take_output();
        if out.is_empty() {
            break;
        }
        drained.outputs += 1;
        driver.output(&out);
        let written = match out.persist {
            Some(state) => driver.persist(state),
            None => Ok(()),
        };
        if written.is_ok() {
            for (to, msg) in out.messages {
                driver.send(to, msg);
            }
        }
        for event in out.events {
            driver.event(event);
        }
        if written.is_err() {
            drained.failed_writes += 1;
            driver.node().handle_persist_failed(now);
        }
    }
    drained
}
