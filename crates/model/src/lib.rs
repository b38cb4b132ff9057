//! # tenure-model: exhaustive model checking of the election core
//!
//! (and of the replica's synchronisation rule: see [The replica
//! model](#the-replica-model) and [`replica`])
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
//!   whole millisecond, see [`model::IDLE_MARGIN`]).
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
//! * **Death and death notices** within a budget
//!   ([`Bounds::kills`]): [`Action::Kill`] takes a node down (it takes no
//!   steps and nothing is delivered to it; what it sent before stays in
//!   flight) until [`Action::Revive`] starts it again from its durable
//!   state as a new incarnation. A spy reports each death to every other
//!   node ([`Action::Notify`], [`model::Notice`]), in any order, late or
//!   never (a notice need not be delivered); the driver gives a notice to the
//!   core ([`tenure_core::Protocol::handle_peer_dead`]) only if it names the
//!   dead node's current incarnation, and drops one about a node that came
//!   back since. Spies never report a live node: that is the trust
//!   assumption, not something the model explores.
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
//! * sometimes (witnesses that the check reaches what it claims): a leader is
//!   elected; two candidates stand in one term (above every term of the
//!   starting state); two nodes are candidates at once; leaders are elected
//!   in two terms; a leader is elected on death notices with no timer fired
//!   ([`model::LEADER_ON_NOTICE`]: only a notice can make a node stand then).
//!   Each kind of check must reach its witnesses
//!   ([`check::Start::witnesses`]), or it fails: a leader from a fresh
//!   cluster or a contested election; from an elected leader, a leader in a
//!   later term and a contested election ([`check::contest`]: two candidates
//!   in one term; under Paxos, whose ballots each name one proposer, two
//!   candidates at once); with deaths ([`check::Start::Spy`], `--spy`), a
//!   leader on death notices (the same check with spies that never speak,
//!   [`ElectionModel::silent_spies`], does not reach it: a test says so).
//!
//! ## What is abstracted, and why
//! * A state's identity is the core's own `Eq + Hash` of each elector
//!   ([`elector`]), which leaves out what is only reported: the metric
//!   counters and `last_heard` times (they change on every delivery and no
//!   decision reads them) and the time of the last input (read only to halt
//!   on time going backwards, which the model's clocks never do). This gives
//!   the same state counts as the former identity (a hash of the `Debug`
//!   text with those sections cut out), three to eight times faster.
//! * A delivery that the receiver ignores (its decision state is unchanged
//!   and it persists, sends and reports nothing) is not a step: its
//!   successor differs from its predecessor only by one envelope fewer in
//!   flight. A state with more envelopes in flight can do everything a state
//!   with fewer can, step for step (it may simply never deliver them), and no
//!   property or bound reads the network, so that successor adds no
//!   behaviour, and whatever it could reach its predecessor reaches too. This
//!   cuts the states by two to four times.
//! * The RNG ([`rng::ModelRng`]) cycles through a few fixed jitters: the
//!   jitter serves liveness only.
//! * No separate drop step: for safety, a message never delivered is a message
//!   lost. A crashed node is down for no time: a down node only takes no steps,
//!   which every interleaving already includes.
//! * Not modelled: storage failures (`handle_persist_failed`), graceful
//!   `shutdown`, configuration changes (but see [Changes of members](#changes-of-members)), a timer that fires late (a stalled
//!   node: [`Action::Timeout`] fires exactly at the deadline, so the core's
//!   stall grace is never exercised), and anything about lease *timing*
//!   (which the unrelated clocks deliberately give up).
//!
//! Symmetry reduction is not used: node ids are not interchangeable here
//! (the voter order ranks candidacies and Paxos ballots encode the rank).
//!
//! ## Bounds, per protocol
//! [`Bounds`] limits terms (states with a term above `max_term` are not
//! explored), clock steps per node (from an elected leader, counted from the
//! elected state, with the old leader's apart: [`Bounds::leader_clock_steps`]),
//! restarts, transfers, duplicates and, optionally, the search depth
//! (stateright's: every state within `max_depth - 2` steps is checked, see
//! [`Bounds::max_depth`]). The protocols need different bounds to reach an
//! election from a fresh cluster ([`Bounds::quick`], [`Bounds::contested`],
//! [`Bounds::deep`]):
//!
//! * **raft** ([`Bounds::QUICK`], [`Bounds::DEEP`]): a leader is elected at
//!   depth 8 from the fresh cluster with two clock steps per node.
//! * **ranked** ([`Bounds::RANKED_QUICK`], [`Bounds::RANKED_DEEP`]): an
//!   election is a poll, a wait and a vote round after the start-up leases
//!   ran out; one clock step per node never elects, two elect at depth 10.
//! * **paxos** ([`Bounds::PAXOS_QUICK`], [`Bounds::PAXOS_DEEP`]): a poll, a
//!   Prepare and an Accept round; one clock step per node elects at depth 10.
//!   Terms are ballots (`counter * 65536 + id`), so `max_term` is
//!   [`model::PAXOS_MAX_TERM`]: three
//!   ballot counters.
//!
//! A fresh cluster elects once: within those bounds no second election and
//! no contested one happens. Re-election is checked from an elected, settled
//! leader ([`check::elected_model`]: a deterministic greedy run from the
//! fresh cluster, replayed step by step) within [`Bounds::reelection`]:
//! every interleaving of up to ten steps in which each follower takes up to
//! three clock steps, the old leader one (one more heartbeat round, or one
//! late timer), any node may crash and restart once, and terms may rise two
//! above the leader's. Every protocol reaches both re-election witnesses
//! there, by failover; shortest, raft's contested term takes nine steps,
//! ranked's eight (with a restart) and Paxos's rival candidates seven.
//! Without a depth bound these spaces did not close within 10 minutes
//! (raft with the old leader silent: 18 million states and counting), so the
//! re-election check is breadth-first to [`model::REELECTION_DEPTH`], the
//! deepest whose frontier fits in 16 GB. CI runs it to
//! [`model::REELECTION_CI_DEPTH`] ([`Bounds::reelection_ci`], `--ci`).
//!
//! Death notices are checked from an elected leader a few heartbeat rounds
//! on ([`check::spy_prefix`]: every follower's start-up lease has run out on
//! its own clock, so a notice is what releases it) within [`Bounds::spy`]:
//! two deaths, each follower one clock step, the old leader none, every
//! state within ten steps; CI within [`Bounds::spy_ci`] (eight steps).
//!
//! The debug-profile tests (`tests/check.rs`) run six checks per protocol,
//! each of which must hold every safety property and reach its witnesses:
//! from the fresh cluster; from a contested election the checker finds itself
//! ([`check::contested_prefix`]); from an elected leader ([`Bounds::elected`],
//! smaller than [`Bounds::reelection`] but reaching both re-election
//! witnesses); with a death and its notices ([`Bounds::spy_quick`]); and the
//! two planted storage bugs.
//!
//! ## Results
//! No counterexample to any safety property has been found. The states,
//! depth, time and memory of each check, with the command that measured
//! them, are in `docs/VERIFICATION.md` ("The model checker"). The CI checks
//! are [`Bounds::reelection_ci`] and [`Bounds::spy_ci`]; the deep ones
//! [`Bounds::DEEP`], [`Bounds::RANKED_DEEP`], [`Bounds::PAXOS_DEEP`],
//! [`Bounds::reelection`] and [`Bounds::spy`]; depth is stateright's (see
//! [`Bounds::max_depth`]).
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
//! binary (see `src/main.rs`: `--protocol`, `--fresh`, `--elected`,
//! `--contested`, `--spy`, `--ci`, `--kills`, `--quick`, `--steps`, `--leader-steps`, ...)
//! explore other bounds.
//!
//! ## Changes of members
//! [`membership`] adds the spare `n4` and an abstract replicated log to
//! this model (`tenure-model --membership`, [`ElectionModel::with_members`]):
//! each node's log holds configurations with the token that wrote them,
//! leaders synchronise, write a no-op, replicate and commit by Raft's
//! own-token rule, append one change at a time behind the own-term gate
//! (add `n4` as a learner, promote it, remove any voter), and the driver
//! hands each elector its log's [`tenure_core::Electorate`] before the
//! node's copy counts (on restart too). Elections, restarts and message
//! loss (a message never delivered) interleave with the changes. Always:
//! at most one leader per term, every leader took office holding every
//! configuration committed under a lower token (Raft's leader
//! completeness: under the token of the leadership that committed it;
//! [`model::LEADER_HOLDS_COMMITTED_CONFIGS`], the freshness rule's claim),
//! and committed configurations form a chain; sometimes: a change commits,
//! a leader is elected holding a changed configuration, a node restarts
//! holding one, two leaders append different changes to one configuration
//! (siblings), and a node stands holding the sibling that lost to a
//! committed one. Why abstract, and not the real replica: the replica is
//! checked on its own ([`replica`], electors taken as given), and running
//! both would multiply two state spaces; what the electors read of the log
//! (which configuration, where written, the token of its last entry,
//! committed or not) is all that is kept.
//!
//! Three starts ([`check::MemberStart`]): from the bootstrap voters
//! (`--grow`, the default); from four voters (`--four-voters`); and from a
//! deposed leader (`--deposed`, [`check::deposed_prefix`]): of four voters,
//! the leader appended a removal that only it holds, and the three others
//! elected a new leader among themselves, whose heartbeats to the deposed
//! one are in flight (every other message to it was lost). There the
//! sibling runs (two removals appended at one index by two leaders, two
//! voters apart) are a few steps deep, within the CI bounds. Measured on
//! the shared 2-core machine (load 10 to 14), release, 2 threads,
//! 2026-11-25 (`/usr/bin/time -v`; the time is the checker's own, per
//! protocol):
//!
//! | check | command | unique states (raft; ranked; paxos) | depth (steps) | time |
//! |---|---|---:|---:|---:|
//! | CI: from the bootstrap voters, a change and a failover (old leader silent, each follower two clock steps) | `tenure-model --membership --ci` (first check) | 211,567; 27,355; 321,099 | 12 (≤ 10) | 3.8 s; 0.6 s; 4.9 s |
//! | CI: the same with one crash and restart | second check | 250,466; 141,502; 329,063 | 10 (≤ 8) | 7.6 s; 2.4 s; 4.5 s |
//! | CI: from a deposed leader, each node one clock step | third check | 439,684; 201,974; 292,085 | 11 (≤ 9) | 19.0 s; 4.5 s; 8.6 s |
//! | CI in all | `cargo run --release -p tenure-model -- --membership --ci --threads 2` | safe, every witness reached | | 67 s wall at load 10 (34 s user, 6 s system), 0.97 GB |
//! | planted: the own-term gate dropped | `... --membership --ci --driver ungated-changes` (third check) | raft: a counterexample of 9 steps (1,029,331 states); ranked, paxos: none within these bounds (451,991; 685,466) | 11 (≤ 9) | raft 57 s (152 s wall for the whole suite at load 14, 64 s user, 2.5 GB) |
//! | planted: elector told after the ack | `--membership --hunt --driver late-electorate` | counterexamples of 8 (raft), 9 (ranked), 10 (paxos) steps | | 9 s wall in all |
//! | planted: position withheld | `... --driver no-position` | 8, 9, 10 steps | | 10 s wall in all |
//!
//! **Sibling configurations.** Found stage by stage under Raft
//! (`tests/membership.rs`, `find_sibling_configurations`, 25 steps from
//! four voters, before the deposed start existed): two leaders whose gates
//! passed append *different* removals at one index ("remove n4" by `n2`,
//! uncommitted; "remove n2" by `n1`, committed by `n1` and `n4`); `n3`
//! holds the parent configuration and `n1`'s no-op. When the freshness
//! rule compared configuration positions only, `n3` voted for `n2` (its
//! sibling is newer than `n3`'s parent), and `n2` led with `n2, n3`, a
//! majority of its sibling disjoint from `n1, n4`: two leaders at once, and
//! a leader without a committed configuration. The electors now compare
//! the token of the log's last entry first ([`tenure_core::Freshness`]),
//! as Raft's up-to-date check does: `n3` refuses `n2`. The run is replayed
//! and refused (`sibling_configurations_elect_a_leader_without_a_committed_one`),
//! and from the deposed start the checker reaches both sibling witnesses
//! with the faithful driver and finds no violation.
//!
//! **The gate dropped** (`--driver ungated-changes`, Raft's single-server
//! change bug of 2015) is found as its own counterexample from the deposed
//! start under Raft, 9 steps: the new leader `n3` (term 2) writes its
//! no-op, appends "remove n1" before the no-op committed and replicates it
//! to `n4`, where it commits (voters `n2, n3, n4`); the deposed `n2`, whose
//! removal of `n4` left voters `n1, n2, n3`, is elected in term 3 by `n1`,
//! which holds no entry of token 2: two leaders at once, of terms 2 and 3,
//! and `n2` lacks the committed removal. With the gate, the no-op commits
//! on three of the four voters first, so `n1` or `n2` holds token 2 and
//! refuses. Tests: `raft_deposed_leader_returns_without_the_gate` (a
//! guided search, debug profile); the checker itself within the CI bounds,
//! `the_checker_catches_ungated_changes` (ignored, release, about 20 s); and
//! `deposed_leader_returns_only_without_the_gate` (ignored, release, 220 s):
//! wider searches of the deposed leader's return, which end without a
//! violation under every protocol with the gate (720,468; 215,319; 415,944
//! states) and find one without it under Raft (9 steps) and Paxos (11, past
//! the CI depth); under ranked none (280,738 states, and 763,715 from the
//! ungated commit itself): a ranked vote needs the claims of a majority of
//! the voter's own configuration, and a complete slate holds a claim of
//! the new leader's token.
//!
//! ## The replica model
//! [`replica`] checks the replication core the same way: three real
//! `tenure_replica::Replica`s, leadership named directly (one leader per
//! fencing token, as the electors checked here guarantee), proposals,
//! heartbeats, crash and restart from what the writes made durable, and the
//! network above. It checks `docs/REPLICATION.md`'s synchronisation rule: no
//! two nodes apply different entries at an index, and every ready leader
//! holds every entry committed under a lower token. `tenure-model --replica`
//! runs its deep suite, `--replica --ci` the CI suite (seven checks, about
//! 30 s); `tests/replica.rs` runs small checks in the debug profile and three
//! planted bugs that it catches. Bounds, figures and what it leaves out are
//! in the module's documentation.

#![warn(missing_docs)]

pub mod check;
pub mod elector;
pub mod membership;
pub mod model;
pub mod network;
pub mod replica;
pub mod rng;

pub use model::{Action, Bounds, Durability, ElectionModel, ElectionState};
