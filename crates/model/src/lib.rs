//! # tenure-model: exhaustive model checking of the election core
//!
//! [stateright](https://docs.rs/stateright/0.30) explores every reachable
//! state of a three-node cluster running the **real** election core — any of
//! its protocols ([`tenure_core::ProtocolKind`]: `--protocol raft|ranked|paxos`,
//! [`ElectionModel::of`]), not a re-implementation: each step of the model calls the core's
//! `handle_*` methods and processes its `Output` exactly as the `Protocol`
//! contract says. The model is a plain [`stateright::Model`] ([`ElectionModel`]).
//!
//! ## What is modelled
//! * **Nodes**: three voters `n1, n2, n3` (preference order), heartbeat 100 ms,
//!   election timeout 420 ms, the core's default stagger (50 ms), and a drift
//!   bound of zero (the clocks are unrelated anyway; this keeps every instant a
//!   whole millisecond, see [`elector`]).
//! * **Network** ([`network`]): a multiset of envelopes in flight. Any envelope
//!   may be delivered next (reordering); none has to be (loss); within a budget
//!   the network copies an envelope (duplication).
//! * **Persist, then send**: a step runs one input, applies `Output::persist` to
//!   the node's durable storage, then puts `Output::messages` in flight, all in
//!   that one step; a crash is a separate step, so it falls before or after the
//!   whole of it, never between the write and the sends.
//! * **Crash and restart** ([`Action::Restart`]): the node's elector is thrown
//!   away and a new one is built with `Elector::new` from the last persisted
//!   `HardState` (nothing else survives), at the node's current clock.
//! * **Time**: each node has its own clock, which moves only by its own steps:
//!   [`Action::Timeout`] jumps to `poll_timeout()` and calls `handle_timeout`;
//!   [`Action::Idle`] stops 1 ms short of it without an input, so that the
//!   next messages arrive after the leases the node granted have run out.
//!   Messages are handled at the receiver's current clock. Clocks of different
//!   nodes are unrelated, which covers any drift: safety of votes and terms must
//!   not depend on time, and here it cannot.
//! * **Leadership transfer** ([`Action::Transfer`]) within a budget.
//!
//! ## Properties (ghost records in [`model::Ghost`])
//! * always: at most one leader per term, over the whole history
//!   (every `(term, node)` that was ever in the leader role);
//! * always: at most one vote per node and term, across restarts (votes seen
//!   in persisted state, self-votes included, and grants on the wire as
//!   [`tenure_core::Message::vote_grant`] reports them: Raft's granting
//!   `VoteResponse`, ranked `VOTE`, Paxos promises);
//! * always: a node's term never decreases, across restarts;
//! * always: no debug assertion of the core fires (the core is called under
//!   `catch_unwind`; tests run it in the debug profile);
//! * sometimes: a leader is elected (the check is not vacuous); two candidates
//!   stand in one term; leaders are elected in two terms.
//!
//! ## What is abstracted, and why
//! * The elector's metric counters and `last_heard` times are left out of a
//!   state's identity ([`elector`]): they grow or change on every delivery and
//!   no decision reads them.
//! * The RNG ([`rng::ModelRng`]) cycles through a few fixed jitters: the
//!   jitter serves liveness only.
//! * No separate drop step: for safety, a message never delivered is a message
//!   lost. A crashed node is down for no time: a down node only takes no steps,
//!   which every interleaving already includes.
//! * Not modelled: storage failures (`handle_persist_failed`), graceful
//!   `shutdown`, configuration changes, and anything about lease *timing*
//!   (which the unrelated clocks deliberately give up).
//!
//! ## Bounds
//! [`Bounds`] limits terms (states with a term above `max_term` are not
//! explored), clock steps per node, restarts, transfers, duplicates and,
//! optionally, the search depth. [`Bounds::QUICK`] is used by the debug-profile
//! tests (depth-bounded breadth-first search, from the fresh cluster and from a
//! contested election the checker finds itself, [`check::contested_prefix`]);
//! [`Bounds::DEEP`] by the release binary (no depth bound: every interleaving).
//!
//! ## Results
//! No counterexample to any safety property has been found. Measured on the
//! shared 2-core machine, against the core as of commit `0c2abe6`:
//!
//! | run | unique states | depth | time |
//! | --- | ---: | ---: | ---: |
//! | `cargo run --release -p tenure-model` ([`Bounds::DEEP`], every interleaving) | 6,217,205 | 25 | 462 s (load ~8) |
//! | `... -- --quick --contested --transfers 1 --depth 8` (transfers reach a second term) | 1,092,205 | 8 | 17 s |
//! | test: fresh cluster, [`Bounds::QUICK`] | 157,336 | 8 | ~9 s debug |
//! | test: from a contested election | 102,146 | 6 | ~8 s debug |
//!
//! The planted bugs are caught (`tests/check.rs`): a restart that forgets the
//! vote gives a 3-step counterexample to one-vote-per-term after a contested
//! election (restart `n1`, its timer fires, `n2`'s vote request is granted:
//! `n1` voted for itself and for `n2` in term 1); a restart that forgets
//! everything gives a 5-step counterexample to terms-never-decrease. The
//! flags of the binary (see `src/main.rs`) explore other bounds.

#![warn(missing_docs)]

pub mod check;
pub mod elector;
pub mod model;
pub mod network;
pub mod rng;

pub use model::{Action, Bounds, Durability, ElectionModel, ElectionState};
