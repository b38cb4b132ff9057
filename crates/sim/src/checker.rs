//! Safety and liveness checkers. They observe the cluster from outside the
//! nodes — outputs (persisted states, sent messages, events), `status()`-level
//! facts and `is_leader` — never the electors' private fields.
//!
//! Checks:
//! 1. `one-leader-per-term`: at most one node ever becomes leader in a term;
//! 2. `one-vote-per-term`: a node never grants (or persists) votes for two
//!    candidates in one term, across restarts too;
//! 3. `monotonic-term`: a node's term never decreases, durable or in memory;
//! 4. `fencing`: fencing tokens strictly increase across successive leaders;
//! 5. `lease-overlap`: when a node becomes leader no other node still believes it
//!    leads by its own clock, and a node that handles an input while leading
//!    holds the highest leader term seen so far;
//! 6. `liveness`: after healing, a stable leader within the stated bound.
//!
//! Groups of partitions (`--workload partitions`) add five, made by
//! [`crate::partitions`] and its runner: `partition-overlap`,
//! `partition-epoch`, `partition-coverage`, `partition-balance` and
//! `partition-moves`.
//!
//! Changes of members (`--scenario membership`) add three checks, made by
//! [`crate::membership::MembershipChecks`] and reported here: `config-chain`,
//! `same-config-per-index` and `membership-convergence`.

use serde::Serialize;
use std::collections::HashMap;
use std::fmt;
use tenure_core::{HardState, NodeId, Term};

/// Violations kept in full per run; later ones are only counted.
pub const MAX_VIOLATIONS_KEPT: usize = 32;

/// Which property a violation breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Check {
    /// Two leaders in one term.
    OneLeaderPerTerm,
    /// Two votes in one term by one node.
    OneVotePerTerm,
    /// A term went backwards.
    MonotonicTerm,
    /// A fencing token did not increase.
    Fencing,
    /// Leaderships overlapped in time.
    LeaseOverlap,
    /// No stable leader within the bound after healing.
    Liveness,
    /// A node's core halted on one of its own invariants (`Event::Halted`).
    CoreInvariant,
    /// Key-value workload: a key's history has no linearization (an
    /// acknowledged write lost, a stale read, a value nobody wrote).
    Linearizability,
    /// Key-value workload: revisions in answers disagree or go back in real time.
    RevisionOrder,
    /// Key-value workload: two nodes applied different entries at one index.
    SameEntryPerIndex,
    /// Key-value workload: two nodes' stores differ at the same applied index.
    SameStatePerIndex,
    /// Key-value workload: a replica broke its own contract (applied out of
    /// order, cannot restart from its log, loops).
    ReplicaInvariant,
    /// Application elections: two holders of one name whose leaderships
    /// overlap on the global timeline.
    ElectionOverlap,
    /// Application elections: a holder's fencing token not above its
    /// predecessor's.
    ElectionToken,
    /// Application elections: after healing, a name with a live candidate
    /// and no holder.
    ElectionStarvation,
    /// Sessions: a lease expired later after its TTL than the bound of
    /// docs/ELECTIONS.md ("Deadlines across leader changes") allows.
    SessionOverrun,
    /// Sessions: an expiry committed while the session's holder still
    /// trusted it (its deadline, on its own clock, had not passed), or a
    /// renewal answered after the expiry committed gave its holder a
    /// deadline past that commit.
    SessionEarlyExpiry,
    /// Groups of partitions: two members working on one partition at
    /// overlapping moments of the global timeline.
    PartitionOverlap,
    /// Groups of partitions: an owner's epoch not above its predecessor's.
    PartitionEpoch,
    /// Groups of partitions: after healing, a partition of a group with a
    /// live ready member without one live ready owner.
    PartitionCoverage,
    /// Groups of partitions: after healing, a member (or a zone) owning
    /// fewer or more partitions than its share's floor and ceiling.
    PartitionBalance,
    /// Groups of partitions: a change of members after healing moved more
    /// partitions than the fewest it needed.
    PartitionMoves,
    /// Changes of members: a committed configuration that does not differ
    /// from the one before it in the log by exactly one change.
    ConfigChain,
    /// Changes of members: two nodes committed the same log index under
    /// different configurations (or one configuration entry with two
    /// contents).
    SameConfigPerIndex,
    /// Changes of members: after healing, no leader among the voters of
    /// the configuration in force, or a running member whose replica holds
    /// another configuration.
    MembershipConvergence,
    /// Changes of members: a leader elected with the vote of a node whose
    /// data was wiped since its configuration named it (the node that came
    /// back counted as the voter it was).
    MistakenIdentity,
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Check::OneLeaderPerTerm => "one-leader-per-term",
            Check::OneVotePerTerm => "one-vote-per-term",
            Check::MonotonicTerm => "monotonic-term",
            Check::Fencing => "fencing",
            Check::LeaseOverlap => "lease-overlap",
            Check::Liveness => "liveness",
            Check::CoreInvariant => "core-invariant",
            Check::Linearizability => "linearizability",
            Check::RevisionOrder => "revision-order",
            Check::SameEntryPerIndex => "same-entry-per-index",
            Check::SameStatePerIndex => "same-state-per-index",
            Check::ReplicaInvariant => "replica-invariant",
            Check::ElectionOverlap => "election-overlap",
            Check::ElectionToken => "election-token",
            Check::ElectionStarvation => "election-starvation",
            Check::SessionOverrun => "session-overrun",
            Check::SessionEarlyExpiry => "session-early-expiry",
            Check::PartitionOverlap => "partition-overlap",
            Check::PartitionEpoch => "partition-epoch",
            Check::PartitionCoverage => "partition-coverage",
            Check::PartitionBalance => "partition-balance",
            Check::PartitionMoves => "partition-moves",
            Check::ConfigChain => "config-chain",
            Check::SameConfigPerIndex => "same-config-per-index",
            Check::MembershipConvergence => "membership-convergence",
            Check::MistakenIdentity => "mistaken-identity",
        })
    }
}

/// A broken property, with what is needed to replay it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// The run's seed.
    pub seed: u64,
    /// The property broken.
    pub check: Check,
    /// Global simulated time, in nanoseconds.
    pub time_ns: u64,
    /// What happened.
    pub description: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "seed {} at {:.3} ms: {}: {}",
            self.seed,
            self.time_ns as f64 / 1e6,
            self.check,
            self.description
        )
    }
}

/// The observing checker of one run.
#[derive(Debug)]
pub struct Checker {
    seed: u64,
    /// Term -> the node that became leader in it.
    leader_of_term: HashMap<u64, NodeId>,
    /// (voter, its identity, term) -> the candidate it voted for.
    votes: HashMap<(NodeId, u64, u64), NodeId>,
    /// Per node id: how many times its data was wiped (a wiped node that
    /// comes back is another voter, whose votes are its own).
    identity: HashMap<NodeId, u64>,
    /// Per node (index): the highest durable term written.
    durable_term: Vec<Term>,
    /// Per node: the highest term seen in memory during the current incarnation.
    live_term: Vec<Term>,
    /// The fencing token of the latest leader.
    last_token: Option<u64>,
    /// The highest term anyone became leader in.
    max_leader_term: Term,
    /// The highest term any node ever held, in memory or on disk.
    highest_term: Term,
    violations: Vec<Violation>,
    violation_count: usize,
}

impl Checker {
    /// A checker for `n` nodes of the run `seed`.
    pub fn new(seed: u64, n: usize) -> Self {
        Checker {
            seed,
            leader_of_term: HashMap::new(),
            votes: HashMap::new(),
            identity: HashMap::new(),
            durable_term: vec![Term(0); n],
            live_term: vec![Term(0); n],
            last_token: None,
            max_leader_term: Term(0),
            highest_term: Term(0),
            violations: Vec::new(),
            violation_count: 0,
        }
    }

    /// Records a violation.
    pub fn fail(&mut self, now_ns: u64, check: Check, description: String) {
        self.violation_count += 1;
        if self.violations.len() < MAX_VIOLATIONS_KEPT {
            self.violations.push(Violation {
                seed: self.seed,
                check,
                time_ns: now_ns,
                description,
            });
        }
    }

    /// The violations kept (see [`MAX_VIOLATIONS_KEPT`]).
    pub fn violations(&self) -> &[Violation] {
        &self.violations
    }

    /// How many violations were found, kept or not.
    pub fn violation_count(&self) -> usize {
        self.violation_count
    }

    /// The highest term in which a leader was elected.
    pub fn max_leader_term(&self) -> Term {
        self.max_leader_term
    }

    /// The highest term any node ever held, in memory or on disk.
    pub fn highest_term(&self) -> Term {
        self.highest_term
    }

    fn record_vote(
        &mut self,
        now_ns: u64,
        voter: NodeId,
        term: Term,
        candidate: NodeId,
        how: &str,
    ) {
        let identity = self.identity.get(&voter).copied().unwrap_or(0);
        match self.votes.insert((voter, identity, term.0), candidate) {
            Some(prev) if prev != candidate => self.fail(
                now_ns,
                Check::OneVotePerTerm,
                format!("{voter:?} voted for {prev:?} and then {candidate:?} ({how}) in {term:?}"),
            ),
            _ => {}
        }
    }

    /// The driver wrote `hs` durably for node `idx`.
    pub fn on_persist(&mut self, now_ns: u64, idx: usize, id: NodeId, hs: HardState) {
        if hs.term < self.durable_term[idx] {
            self.fail(
                now_ns,
                Check::MonotonicTerm,
                format!("{id:?} persisted {:?} after {:?}", hs.term, self.durable_term[idx]),
            );
        }
        self.durable_term[idx] = self.durable_term[idx].max(hs.term);
        self.highest_term = self.highest_term.max(hs.term);
        if let Some(v) = hs.voted_for {
            self.record_vote(now_ns, id, hs.term, v, "persisted");
        }
    }

    /// Node `voter` sent a granted `VoteResponse` for `term` to `candidate`.
    pub fn on_vote_granted(&mut self, now_ns: u64, voter: NodeId, term: Term, candidate: NodeId) {
        self.record_vote(now_ns, voter, term, candidate, "granted message");
    }

    /// Node `idx` reports `term` in memory (after an input).
    pub fn on_term(&mut self, now_ns: u64, idx: usize, id: NodeId, term: Term) {
        if term < self.live_term[idx] {
            self.fail(
                now_ns,
                Check::MonotonicTerm,
                format!("{id:?} went from {:?} back to {term:?}", self.live_term[idx]),
            );
        }
        self.live_term[idx] = self.live_term[idx].max(term);
        self.highest_term = self.highest_term.max(term);
    }

    /// Node `idx` restarted from durable term `term`; it must not be below any
    /// term it wrote before.
    pub fn on_restart(&mut self, now_ns: u64, idx: usize, id: NodeId, term: Term) {
        if term < self.durable_term[idx] {
            self.fail(
                now_ns,
                Check::MonotonicTerm,
                format!(
                    "{id:?} restarted at {term:?} below its durable {:?}",
                    self.durable_term[idx]
                ),
            );
        }
        // Volatile terms that were never written may be lost with the crash.
        self.live_term[idx] = term;
    }

    /// The votes granted for `candidate` in `term`: each voter with the
    /// identity it had (how many times its data had been wiped), in order.
    pub fn votes_for(&self, term: Term, candidate: NodeId) -> Vec<(NodeId, u64)> {
        let mut v: Vec<(NodeId, u64)> = self
            .votes
            .iter()
            .filter(|(&(_, _, t), &c)| t == term.0 && c == candidate)
            .map(|(&(voter, identity, _), _)| (voter, identity))
            .collect();
        v.sort_unstable();
        v
    }

    /// Node `idx` (id `id`), down, lost its data for good (its disk was
    /// wiped): when it comes back it is a new node that remembers no term
    /// and no vote, so its terms start again from zero and its votes are
    /// counted apart from the old node's.
    pub fn on_wipe(&mut self, idx: usize, id: NodeId) {
        self.durable_term[idx] = Term(0);
        self.live_term[idx] = Term(0);
        *self.identity.entry(id).or_insert(0) += 1;
    }

    /// Node `id` became leader of `term` with `token`; `still_leading` lists the
    /// other nodes that believe they lead at this instant by their own clocks.
    pub fn on_become_leader(
        &mut self,
        now_ns: u64,
        id: NodeId,
        term: Term,
        token: Option<u64>,
        still_leading: &[(NodeId, Term)],
    ) {
        if let Some(prev) = self.leader_of_term.insert(term.0, id) {
            if prev != id {
                self.fail(
                    now_ns,
                    Check::OneLeaderPerTerm,
                    format!("{prev:?} and {id:?} both became leader in {term:?}"),
                );
            }
        }
        match token {
            None => {
                self.fail(now_ns, Check::Fencing, format!("{id:?} leads {term:?} without a token"))
            }
            Some(t) => {
                if let Some(last) = self.last_token.filter(|&last| t <= last) {
                    self.fail(
                        now_ns,
                        Check::Fencing,
                        format!("{id:?} took office with token {t}, not above the previous {last}"),
                    );
                }
                self.last_token = Some(t);
            }
        }
        for (other, other_term) in still_leading {
            self.fail(
                now_ns,
                Check::LeaseOverlap,
                format!(
                    "{id:?} became leader of {term:?} while {other:?} still leads {other_term:?} by its clock"
                ),
            );
        }
        self.max_leader_term = self.max_leader_term.max(term);
    }

    /// Node `id` is about to handle an input while leading (by its clock) in `term`.
    pub fn on_input_as_leader(&mut self, now_ns: u64, id: NodeId, term: Term) {
        if term < self.max_leader_term {
            self.fail(
                now_ns,
                Check::LeaseOverlap,
                format!(
                    "{id:?} acts as leader of {term:?} after a leader of {:?} was elected",
                    self.max_leader_term
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hs(term: u64, voted: Option<u64>) -> HardState {
        HardState { term: Term(term), voted_for: voted.map(NodeId) }
    }

    #[test]
    fn a_clean_history_passes() {
        let mut c = Checker::new(1, 3);
        c.on_persist(1, 0, NodeId(1), hs(1, Some(1)));
        c.on_vote_granted(2, NodeId(2), Term(1), NodeId(1));
        c.on_persist(2, 1, NodeId(2), hs(1, Some(1)));
        c.on_become_leader(3, NodeId(1), Term(1), Some(1), &[]);
        c.on_input_as_leader(4, NodeId(1), Term(1));
        c.on_become_leader(5, NodeId(2), Term(2), Some(2), &[]);
        assert_eq!(c.violation_count(), 0, "{:?}", c.violations());
    }

    #[test]
    fn two_leaders_in_a_term_are_caught() {
        let mut c = Checker::new(7, 3);
        c.on_become_leader(1, NodeId(1), Term(3), Some(3), &[]);
        c.on_become_leader(2, NodeId(2), Term(3), Some(3), &[]);
        let checks: Vec<Check> = c.violations().iter().map(|v| v.check).collect();
        assert!(checks.contains(&Check::OneLeaderPerTerm));
        // Same token twice also breaks fencing.
        assert!(checks.contains(&Check::Fencing));
        assert_eq!(c.violations()[0].seed, 7);
    }

    #[test]
    fn double_votes_are_caught_across_restarts() {
        let mut c = Checker::new(1, 3);
        c.on_persist(1, 1, NodeId(2), hs(4, Some(1)));
        c.on_restart(2, 1, NodeId(2), Term(4));
        c.on_vote_granted(3, NodeId(2), Term(4), NodeId(3));
        assert_eq!(c.violation_count(), 1);
        assert_eq!(c.violations()[0].check, Check::OneVotePerTerm);
    }

    #[test]
    fn decreasing_terms_are_caught() {
        let mut c = Checker::new(1, 2);
        c.on_persist(1, 0, NodeId(1), hs(5, None));
        c.on_restart(2, 0, NodeId(1), Term(4));
        c.on_term(3, 1, NodeId(2), Term(3));
        c.on_term(4, 1, NodeId(2), Term(2));
        assert_eq!(c.violation_count(), 2);
        assert!(c.violations().iter().all(|v| v.check == Check::MonotonicTerm));
    }

    #[test]
    fn overlapping_and_stale_leaders_are_caught() {
        let mut c = Checker::new(1, 3);
        c.on_become_leader(1, NodeId(1), Term(1), Some(1), &[]);
        c.on_become_leader(2, NodeId(2), Term(2), Some(2), &[(NodeId(1), Term(1))]);
        c.on_input_as_leader(3, NodeId(1), Term(1));
        assert_eq!(c.violation_count(), 2);
        assert!(c.violations().iter().all(|v| v.check == Check::LeaseOverlap));
    }

    #[test]
    fn a_wiped_node_starts_a_new_identity() {
        let mut c = Checker::new(1, 3);
        c.on_persist(1, 1, NodeId(2), hs(4, Some(1)));
        c.on_wipe(1, NodeId(2));
        c.on_restart(2, 1, NodeId(2), Term(0));
        c.on_vote_granted(3, NodeId(2), Term(4), NodeId(3));
        assert_eq!(c.violation_count(), 0, "{:?}", c.violations());
        // The new identity's own second vote in the term is caught.
        c.on_vote_granted(4, NodeId(2), Term(4), NodeId(1));
        assert_eq!(c.violation_count(), 1);
        assert_eq!(c.violations()[0].check, Check::OneVotePerTerm);
    }

    #[test]
    fn decreasing_tokens_are_caught() {
        let mut c = Checker::new(1, 3);
        c.on_become_leader(1, NodeId(1), Term(5), Some(5), &[]);
        c.on_become_leader(2, NodeId(2), Term(4), Some(4), &[]);
        assert_eq!(c.violation_count(), 1);
        assert_eq!(c.violations()[0].check, Check::Fencing);
    }
}
