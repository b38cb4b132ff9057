//! Per-run statistics and their aggregate over many runs (the `--json` report).

use crate::forger::ForgedCounts;
use crate::membership::MembershipStats;
use crate::spy::SpyStats;
use serde::Serialize;
use std::collections::HashSet;

/// What one run measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunStats {
    /// Simulated time covered, in nanoseconds.
    pub sim_ns: u64,
    /// Messages handed to the network.
    pub messages_sent: u64,
    /// Election rounds started (sum of `Counters::elections_started`).
    pub elections: u64,
    /// Times the leading node changed after the first stable leader.
    pub leader_changes: u64,
    /// Terms in which some node became candidate.
    pub candidate_terms: HashSet<u64>,
    /// Terms in which some node became leader.
    pub leader_terms: HashSet<u64>,
    /// Failover durations: from the current leader's failure to the next leader, in ns.
    pub failovers_ns: Vec<u64>,
    /// Of those, the failovers after a leader crash that a spy reported on
    /// time (see [`crate::spy`]), in ns.
    pub failovers_on_notice_ns: Vec<u64>,
    /// What the spies did, when they watched.
    pub spy: Option<SpyStats>,
    /// Messages sent during each failover.
    pub failover_messages: Vec<u64>,
    /// Election rounds started during each failover (1 when the first round won).
    pub failover_elections: Vec<u64>,
    /// Stable leaderships that fell apart after healing, before the liveness bound.
    pub post_heal_flaps: u64,
    /// Frames the forger sent, per attack (all zero without a forger).
    pub forged: ForgedCounts,
    /// The key-value workload's figures, when it ran.
    pub workload: Option<WorkloadStats>,
    /// The application elections' figures, when they ran.
    pub elect: Option<ElectStats>,
    /// The changes of members' figures, when they ran.
    pub membership: Option<MembershipStats>,
    /// The groups of partitions' figures, when they ran.
    pub partitions: Option<PartitionsStats>,
}

/// What the groups of partitions did (`--workload partitions`; summed over
/// runs in an [`Aggregate`]).
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct PartitionsStats {
    /// Runs with groups of partitions.
    pub runs: u64,
    /// Runs whose members had weights and zones (the others: weight 1, no zone).
    pub weighted_runs: u64,
    /// Sessions granted.
    pub grants: u64,
    /// Renewals answered as renewed.
    pub renewals: u64,
    /// Renewals refused by the ready leader (the session does not exist or
    /// its expiry was proposed).
    pub renewals_refused: u64,
    /// Expiries proposed by a leader's lease keeper and applied.
    pub expiries: u64,
    /// Joins that took effect (first joins and changes of what a member says).
    pub joins: u64,
    /// Changes of what a member says (weight, zone, ready) it asked for.
    pub flips: u64,
    /// Graceful leaves that took effect.
    pub leaves: u64,
    /// Sessions revoked by their member.
    pub revocations: u64,
    /// Releases that took effect (a member deleted owner keys after
    /// stopping).
    pub releases: u64,
    /// Partitions those releases handed to the member the keeper asked them
    /// back for, in the same transaction.
    pub handovers: u64,
    /// Member keys a member found after its leave had taken effect (a join
    /// of its, held on the way, landed later) and left again.
    pub stray_members: u64,
    /// Partitions granted to a member while it was out of its group (on
    /// such a member key), released without being worked on.
    pub stray_grants: u64,
    /// Ownerships begun: a member starting work on a partition.
    pub holdings: u64,
    /// Ownerships of a partition by another session than its previous owner's.
    pub moves: u64,
    /// Members whose deadline passed while they worked.
    pub deadline_stops: u64,
    /// Sessions a member learnt were gone.
    pub sessions_lost: u64,
    /// Member crashes.
    pub app_crashes: u64,
    /// Member pauses.
    pub app_pauses: u64,
    /// Members cut off from every node for a while.
    pub app_cutoffs: u64,
    /// Plans the ready leaders' keepers made.
    pub keeper_plans: u64,
    /// Transactions the keepers proposed.
    pub keeper_transactions: u64,
    /// Of those, committed and applied with their comparisons holding.
    pub keeper_applied: u64,
    /// Of those, committed with a comparison failing (the group had
    /// changed since the plan): nothing changed.
    pub keeper_voided: u64,
    /// The longest overlap of two owners of a partition, ns (0 in a run that passes).
    pub max_overlap_ns: u64,
    /// Partitions without one live ready owner at a check after healing.
    pub unowned: u64,
    /// Members or zones outside their share at a check after healing.
    pub unbalanced: u64,
    /// Runs whose groups came to rest after healing, within the bound.
    pub at_rest_runs: u64,
    /// Membership changes after healing whose moves were counted.
    pub changes_measured: u64,
    /// Partitions moved by those changes.
    pub change_moves: u64,
    /// The fewest moves those changes needed (by the assignment).
    pub change_min_moves: u64,
    /// The most moves of one change beyond its fewest.
    pub max_excess_moves: u64,
    /// Each time a partition was without an owner after healing, ns.
    #[serde(skip)]
    pub without_owner_ns: Vec<u64>,
    /// From healing to the last change of owner before every group was at
    /// rest, per run that came to rest, ns.
    #[serde(skip)]
    pub at_rest_ns: Vec<u64>,
}

impl PartitionsStats {
    /// Adds another run's figures.
    pub fn add(&mut self, o: &PartitionsStats) {
        self.runs += o.runs;
        self.weighted_runs += o.weighted_runs;
        self.grants += o.grants;
        self.renewals += o.renewals;
        self.renewals_refused += o.renewals_refused;
        self.expiries += o.expiries;
        self.joins += o.joins;
        self.flips += o.flips;
        self.leaves += o.leaves;
        self.revocations += o.revocations;
        self.releases += o.releases;
        self.handovers += o.handovers;
        self.stray_members += o.stray_members;
        self.stray_grants += o.stray_grants;
        self.holdings += o.holdings;
        self.moves += o.moves;
        self.deadline_stops += o.deadline_stops;
        self.sessions_lost += o.sessions_lost;
        self.app_crashes += o.app_crashes;
        self.app_pauses += o.app_pauses;
        self.app_cutoffs += o.app_cutoffs;
        self.keeper_plans += o.keeper_plans;
        self.keeper_transactions += o.keeper_transactions;
        self.keeper_applied += o.keeper_applied;
        self.keeper_voided += o.keeper_voided;
        self.max_overlap_ns = self.max_overlap_ns.max(o.max_overlap_ns);
        self.unowned += o.unowned;
        self.unbalanced += o.unbalanced;
        self.at_rest_runs += o.at_rest_runs;
        self.changes_measured += o.changes_measured;
        self.change_moves += o.change_moves;
        self.change_min_moves += o.change_min_moves;
        self.max_excess_moves = self.max_excess_moves.max(o.max_excess_moves);
        self.without_owner_ns.extend_from_slice(&o.without_owner_ns);
        self.at_rest_ns.extend_from_slice(&o.at_rest_ns);
    }
}

/// What the application elections did (`--workload elect`; summed over
/// runs in an [`Aggregate`]).
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq, Eq)]
pub struct ElectStats {
    /// Runs with application elections.
    pub runs: u64,
    /// Leaderships begun (resumptions of the same one included).
    pub leaderships: u64,
    /// Leaderships of a name by another session than the one before.
    pub handovers: u64,
    /// Leaderships resumed by a renewal after the deadline had passed.
    pub resumed: u64,
    /// Sessions granted.
    pub grants: u64,
    /// Renewals answered as renewed.
    pub renewals: u64,
    /// Renewals refused by the ready leader: the session does not exist or
    /// its expiry was proposed.
    pub renewals_refused: u64,
    /// Expiries proposed by a leader's lease keeper and applied.
    pub expiries: u64,
    /// Expiries a leader proposed and a leadership of a later token
    /// committed: adopted in the new leader's synchronisation, after the
    /// proposer lost office (docs/ELECTIONS.md, the stale expiry).
    pub stale_expiries_adopted: u64,
    /// Expiries a leader proposed whose index was committed with another
    /// entry: lost with the old leader's log suffix.
    pub stale_expiries_lost: u64,
    /// Leaderships that ended because the holder's deadline passed.
    pub deadline_stops: u64,
    /// Sessions an app learnt were gone.
    pub sessions_lost: u64,
    /// Resignations.
    pub resignations: u64,
    /// Sessions revoked by their app.
    pub revocations: u64,
    /// App crashes.
    pub app_crashes: u64,
    /// App pauses.
    pub app_pauses: u64,
    /// Apps cut off from every node for a while.
    pub app_cutoffs: u64,
    /// The longest overlap of two holders of one name, ns (0 in a run that passes).
    pub max_overlap_ns: u64,
    /// Names with a live candidate and no holder at the liveness check.
    pub starved_names: u64,
    /// Lease checkpoints proposed by leaders.
    pub checkpoints: u64,
    /// Expiries checked against the bound on overruns (their first
    /// proposal).
    pub expiries_checked: u64,
    /// The largest overrun of a TTL seen, in thousandths of its bound (at
    /// most 1,000 in a run that passes).
    pub max_overrun_permille: u64,
    /// Expiries that committed while an app still held the session (it
    /// had not learnt it was gone), each checked against its holder's
    /// deadline (`session-early-expiry`).
    pub held_expiries: u64,
}

impl ElectStats {
    /// Adds another run's figures.
    pub fn add(&mut self, o: &ElectStats) {
        self.runs += o.runs;
        self.leaderships += o.leaderships;
        self.handovers += o.handovers;
        self.resumed += o.resumed;
        self.grants += o.grants;
        self.renewals += o.renewals;
        self.renewals_refused += o.renewals_refused;
        self.expiries += o.expiries;
        self.stale_expiries_adopted += o.stale_expiries_adopted;
        self.stale_expiries_lost += o.stale_expiries_lost;
        self.deadline_stops += o.deadline_stops;
        self.sessions_lost += o.sessions_lost;
        self.resignations += o.resignations;
        self.revocations += o.revocations;
        self.app_crashes += o.app_crashes;
        self.app_pauses += o.app_pauses;
        self.app_cutoffs += o.app_cutoffs;
        self.max_overlap_ns = self.max_overlap_ns.max(o.max_overlap_ns);
        self.starved_names += o.starved_names;
        self.checkpoints += o.checkpoints;
        self.expiries_checked += o.expiries_checked;
        self.max_overrun_permille = self.max_overrun_permille.max(o.max_overrun_permille);
        self.held_expiries += o.held_expiries;
    }
}

/// What the key-value workload did and what its checks took (summed over
/// runs in an [`Aggregate`]).
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct WorkloadStats {
    /// Runs with the workload.
    pub runs: u64,
    /// Operations invoked.
    pub ops: u64,
    /// Of which reads (linearizable, or a transaction that only gets).
    pub reads: u64,
    /// Operations answered.
    pub acknowledged: u64,
    /// Operations whose outcome is unknown (no answer, or leadership lost
    /// after the write was accepted).
    pub unknown: u64,
    /// Operations no node accepted (they did not take effect).
    pub not_executed: u64,
    /// Keys whose final read after healing got no answer.
    pub final_reads_missing: u64,
    /// Runs in which the linearizability of some key was undecided (these
    /// runs fail).
    pub undecided_runs: u64,
    /// Keys whose linearizability was undecided.
    pub undecided_keys: u64,
    /// Linearizability search steps.
    pub search_steps: u64,
    /// The most search steps one key took.
    pub max_search_steps: u64,
    /// Replica messages sent.
    pub replica_messages: u64,
    /// Routers' frames sent: requests followers forwarded to the leader,
    /// and the answers.
    pub forwards: u64,
    /// Crashes that tore a log write.
    pub torn_writes: u64,
    /// Log writes that failed (storage failures).
    pub failed_writes: u64,
    /// Replicas rebuilt from disk after a storage failure.
    pub rebuilds: u64,
}

impl WorkloadStats {
    /// Adds another run's figures.
    pub fn add(&mut self, o: &WorkloadStats) {
        self.runs += o.runs;
        self.ops += o.ops;
        self.reads += o.reads;
        self.acknowledged += o.acknowledged;
        self.unknown += o.unknown;
        self.not_executed += o.not_executed;
        self.final_reads_missing += o.final_reads_missing;
        self.undecided_runs += o.undecided_runs;
        self.undecided_keys += o.undecided_keys;
        self.search_steps += o.search_steps;
        self.max_search_steps = self.max_search_steps.max(o.max_search_steps);
        self.replica_messages += o.replica_messages;
        self.forwards += o.forwards;
        self.torn_writes += o.torn_writes;
        self.failed_writes += o.failed_writes;
        self.rebuilds += o.rebuilds;
    }
}

impl RunStats {
    /// Terms in which somebody stood but nobody won.
    pub fn split_votes(&self) -> u64 {
        self.candidate_terms.difference(&self.leader_terms).count() as u64
    }
}

/// Percentiles of failover times, in milliseconds.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Percentiles {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
    /// Number of samples.
    pub samples: usize,
}

impl Percentiles {
    /// Nearest-rank percentiles of `values_ns`, reported in milliseconds.
    pub fn of_ns(values_ns: &[u64]) -> Self {
        if values_ns.is_empty() {
            return Percentiles::default();
        }
        let mut v = values_ns.to_vec();
        v.sort_unstable();
        let rank = |p: f64| {
            let i = ((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
            v[i] as f64 / 1e6
        };
        Percentiles { p50: rank(0.50), p99: rank(0.99), max: rank(1.0), samples: v.len() }
    }
}

/// Totals over many runs.
#[derive(Clone, Debug, Default)]
pub struct Aggregate {
    /// Runs done.
    pub runs: u64,
    /// Simulated nanoseconds summed over runs.
    pub sim_ns: u64,
    /// Messages summed over runs.
    pub messages_sent: u64,
    /// Elections summed over runs.
    pub elections: u64,
    /// Leader changes summed over runs.
    pub leader_changes: u64,
    /// Split votes summed over runs.
    pub split_votes: u64,
    /// Every failover sample.
    pub failovers_ns: Vec<u64>,
    /// Every failover sample after an on-time death notice.
    pub failovers_on_notice_ns: Vec<u64>,
    /// What the spies did, summed over the runs that had them.
    pub spy: Option<SpyStats>,
    /// Messages of every failover sample.
    pub failover_messages: Vec<u64>,
    /// Election rounds of every failover sample.
    pub failover_elections: Vec<u64>,
    /// Post-heal flaps summed over runs.
    pub post_heal_flaps: u64,
    /// Forged frames summed over runs.
    pub forged: ForgedCounts,
    /// The key-value workload's figures summed over runs, when it ran.
    pub workload: Option<WorkloadStats>,
    /// The application elections' figures summed over runs, when they ran.
    pub elect: Option<ElectStats>,
    /// The changes of members' figures summed over runs, when they ran.
    pub membership: Option<MembershipStats>,
    /// The groups of partitions' figures summed over runs, when they ran.
    pub partitions: Option<PartitionsStats>,
}

impl Aggregate {
    /// Adds one run.
    pub fn add(&mut self, s: &RunStats) {
        self.runs += 1;
        self.sim_ns += s.sim_ns;
        self.messages_sent += s.messages_sent;
        self.elections += s.elections;
        self.leader_changes += s.leader_changes;
        self.split_votes += s.split_votes();
        self.failovers_ns.extend_from_slice(&s.failovers_ns);
        self.failovers_on_notice_ns.extend_from_slice(&s.failovers_on_notice_ns);
        if let Some(spy) = &s.spy {
            self.spy.get_or_insert_with(SpyStats::default).add(spy);
        }
        self.failover_messages.extend_from_slice(&s.failover_messages);
        self.failover_elections.extend_from_slice(&s.failover_elections);
        self.post_heal_flaps += s.post_heal_flaps;
        self.forged.add(&s.forged);
        if let Some(w) = &s.workload {
            self.workload.get_or_insert_with(WorkloadStats::default).add(w);
        }
        if let Some(e) = &s.elect {
            self.elect.get_or_insert_with(ElectStats::default).add(e);
        }
        if let Some(m) = &s.membership {
            self.membership.get_or_insert_with(MembershipStats::default).add(m);
        }
        if let Some(p) = &s.partitions {
            self.partitions.get_or_insert_with(PartitionsStats::default).add(p);
        }
    }

    /// Mean election rounds per failover (0 without failovers).
    pub fn elections_per_failover(&self) -> f64 {
        mean(&self.failover_elections)
    }

    /// Share of failovers settled by their first election round (0 without failovers).
    pub fn one_round_failovers(&self) -> f64 {
        if self.failover_elections.is_empty() {
            return 0.0;
        }
        let one = self.failover_elections.iter().filter(|&&n| n <= 1).count();
        one as f64 / self.failover_elections.len() as f64
    }

    /// Mean messages per failover (0 without failovers).
    pub fn messages_per_failover(&self) -> f64 {
        mean(&self.failover_messages)
    }
}

fn mean(v: &[u64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.iter().sum::<u64>() as f64 / v.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_nearest_rank() {
        let ms: Vec<u64> = (1..=100).map(|i| i * 1_000_000).collect();
        let p = Percentiles::of_ns(&ms);
        assert_eq!((p.p50, p.p99, p.max, p.samples), (50.0, 99.0, 100.0, 100));
        assert_eq!(Percentiles::of_ns(&[]), Percentiles::default());
    }

    #[test]
    fn split_votes_are_terms_without_a_leader() {
        let mut s = RunStats::default();
        s.candidate_terms.extend([1, 2, 3]);
        s.leader_terms.extend([1, 3]);
        assert_eq!(s.split_votes(), 1);
    }
}
