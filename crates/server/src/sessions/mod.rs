//! Sessions' renewals and expiry: the tenure leader's lease clock, run
//! beside the HTTP API (docs/ELECTIONS.md, "Sessions").
//!
//! A session is a lease in the replicated store; its grant and revoke are
//! ordinary log entries (`crates/server/src/http/sessions.rs`). What this
//! module adds runs on the ready leader only, in memory ([`service`]):
//!
//! * the lease keeper ([`tenure_kv::LeaseKeeper`], the sans-IO logic the
//!   simulator checks, around `tenure_kv::LeaseClock`), started when this
//!   node becomes the ready leader (a silent lease with what is left of its
//!   TTL, any other with a fresh, full one), and stopped when it stops
//!   being one;
//! * the checkpoints, which record the leases gone silent through the log
//!   (`Command::Checkpoint`), so that a successor keeps their deadlines;
//! * the expiry timer, which proposes `Command::ExpireMany` for the leases
//!   whose TTL passed without a renewal (a chunk of up to 64 in one log
//!   entry), bound to the leadership that decided it
//!   (`Replicated::propose_as`: never forwarded to a later leader), at most
//!   [`tenure_kv::MAX_EXPIRIES_IN_FLIGHT`] leases at once;
//! * renewals, which any node receives (`POST /v1/sessions/{id}/keepalive`,
//!   keepalive streams, etcd's Lease service: [`etcd`]) and sends to the
//!   leader as leader asks ([`protocol`]), gathered many to an ask
//!   ([`renewer`]), answered only under R1–R3 of docs/ELECTIONS.md.

pub mod etcd;
pub mod protocol;
pub mod renewer;
pub mod service;

pub use etcd::EtcdSessionClock;
pub use protocol::{
    ask, remaining_ms, RenewAnswers, SessionAnswer, SessionAsk, SessionAskError,
    MAX_RENEWALS_PER_ASK,
};
pub use renewer::{Renewer, MAX_QUEUED_RENEWALS, RENEWAL_ASKS_IN_FLIGHT};
pub use service::{run, MAX_RENEWALS_IN_FLIGHT};
