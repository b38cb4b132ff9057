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
//! * A state's identity is the core's own `Eq + Hash` of each elector
//!   ([`elector`]), which leaves out what is only reported: the metric
//!   counters and `last_heard` times (they change on every delivery and no
//!   decision reads them) and the time of the last input (read only to halt
//!   on time going backwards, which the model's clocks never do).
//! * The RNG ([`rng::ModelRng`]) cycles through a few fixed jitters: the
//!   jitter serves liveness only.
//! * No separate drop step: for safety, a message never delivered is a message
//!   lost. A crashed node is down for no time: a down node only takes no steps,
//!   which every interleaving already includes.
//! * Not modelled: storage failures (`handle_persist_failed`), graceful
//!   `shutdown`, configuration changes, and anything about lease *timing*
//!   (which the unrelated clocks deliberately give up).
//!
//! ## Bounds, per protocol
//! [`Bounds`] limits terms (states with a term above `max_term` are not
//! explored), clock steps per node, restarts, transfers, duplicates and,
//! optionally, the search depth. The protocols need different bounds to reach
//! an election, so each has its own ([`Bounds::quick`], [`Bounds::contested`],
//! [`Bounds::elected`], [`Bounds::deep`]):
//!
//! * **raft** ([`Bounds::QUICK`], [`Bounds::DEEP`]): a leader is elected at
//!   depth 8 from the fresh cluster with two clock steps per node.
//! * **ranked** ([`Bounds::RANKED_QUICK`], [`Bounds::RANKED_DEEP`]): an
//!   election is a poll, a wait and a vote round after the start-up leases
//!   ran out; one clock step per node never elects, two elect at depth 10.
//! * **paxos** ([`Bounds::PAXOS_QUICK`], [`Bounds::PAXOS_DEEP`]): a poll, a
//!   Prepare and an Accept round; one clock step per node elects at depth 10.
//!   Terms are ballots (`counter * 16 + rank`), so `max_term` is 63: three
//!   ballot counters. Each ballot names one proposer, so two candidates never
//!   stand in one term; a contested Paxos election is two candidates at once
//!   ([`model::RIVAL_CANDIDATES`], see [`check::contest`]).
//!
//! The debug-profile tests (`tests/check.rs`) run five checks per protocol,
//! each of which must both hold every safety property and reach an election:
//! from the fresh cluster; from a contested election the checker finds itself
//! ([`check::contested_prefix`]); from an elected, settled leader
//! ([`check::elected_prefix`], a deterministic greedy run replayed step by
//! step; the exploration from there must elect leaders in two terms: by
//! failover for raft and ranked, by a transfer for Paxos); and the two
//! planted storage bugs. The release binary runs [`Bounds::deep`] with no
//! depth bound (every interleaving).
//!
//! ## Results
//! No counterexample to any safety property has been found. Measured on the
//! shared 2-core machine, one thread:
//!
//! | run | unique states | depth | time |
//! | --- | ---: | ---: | ---: |
//! | `cargo run --release -p tenure-model` (raft, [`Bounds::DEEP`], every interleaving; core `0c2abe6`) | 6,217,205 | 25 | 462 s (load ~8) |
//! | `... -- --quick --contested --transfers 1 --depth 8` (raft; transfers reach a second term) | 1,092,205 | 8 | 17 s |
//! | `cargo run --release -p tenure-model -- --protocol ranked --threads 1` ([`Bounds::RANKED_DEEP`], every interleaving; core `e502b3b`) | 4,634,890 (16,854,257 generated) | 32 | 296 s (load ~3) |
//! | `... -- --protocol paxos --threads 1 --depth 16` ([`Bounds::PAXOS_DEEP`] to depth 16, breadth-first; unbounded, it did not finish in 15 min) | 4,962,708 (17,940,165 generated) | 16 | 147 s, 11.5 GB |
//! | test: raft, fresh cluster, [`Bounds::QUICK`] | 157,336 | 8 | ~9 s debug |
//! | test: raft, from a contested election | 102,146 | 6 | ~8 s debug |
//! | test: ranked, fresh cluster, [`Bounds::RANKED_QUICK`] | 61,909 | 10 | ~13 s debug |
//! | test: ranked, from an elected leader | 18,251 | 8 | ~4 s debug |
//! | test: paxos, fresh cluster, [`Bounds::PAXOS_QUICK`] | 38,702 | 10 | ~3 s debug |
//! | test: paxos, from a contested election | 30,310 | 6 | ~4 s debug |
//! | test: paxos, from an elected leader (a transfer) | 57,897 | 8 | ~5 s debug |
//!
//! The planted bugs (`tests/check.rs`): under raft, a restart that forgets
//! the vote gives a 3-step counterexample to one-vote-per-term after a
//! contested election (restart `n1`, its timer fires, `n2`'s vote request is
//! granted: `n1` voted for itself and for `n2` in term 1). Ranked and Paxos
//! never read `voted_for` to decide a vote (ranked votes only in terms above
//! its durable term; a Paxos ballot names its one proposer), so a forgotten
//! vote cannot give a double vote there; their test checks instead that it
//! stays safe. A restart that forgets everything gives a counterexample to
//! terms-never-decrease under every protocol (raft: 5 steps from the fresh
//! cluster; ranked and Paxos: from an elected leader). The flags of the
//! binary (see `src/main.rs`: `--protocol`, `--quick`, `--contested`,
//! `--elected`, ...) explore other bounds.

#![warn(missing_docs)]

pub mod check;
pub mod elector;
pub mod model;
pub mod network;
pub mod rng;

pub use model::{Action, Bounds, Durability, ElectionModel, ElectionState};
