//! The nodes' side of the groups of partitions ([`crate::partitions`]):
//! each node's `tenure_partitions::GroupKeeper`, run as the server runs it
//! (`crates/server/src/groups.rs`), the members' requests turned into
//! commands by the node they reach, and the checks after healing.
//!
//! * **In step with leadership.** As the replica's ready leader of token
//!   `T` the keeper plans for `T`; when the node stops being the ready
//!   leader of `T` it follows (`GroupKeeper::follow`: the members'
//!   stabilisation waits start afresh under the next leadership), as the
//!   lease keeper does in `runner/elect.rs`. A replica rebuilt or crashed
//!   forgets it all.
//! * **When it plans**: on becoming the ready leader, after an applied
//!   change of a key under `_tenure/groups/` (the store's change history
//!   since the revision of its last plan), at the keeper's `next_check`,
//!   and once its transactions in flight are all done; never while some
//!   are in flight.
//! * **How it proposes**: each transaction on this node's replica only
//!   (never forwarded: a decision read from one leader's state is not
//!   committed by a later one), at most [`MAX_GROUP_PROPOSALS_IN_FLIGHT`];
//!   the rest of a plan waits for the next one.
//! * **A member's request** (join, leave, release) may reach any node: the
//!   node runs the recipe on its applied store (a stale store is harmless:
//!   the transaction's comparisons fail, and the member reads and asks
//!   again) and routes the command as any write; a refusal is answered at
//!   once, with nothing proposed.

use super::{dur_ns, Sim};
use crate::app::{LATENCY_NS, POLL_NS};
use crate::checker::Check;
use crate::partitions::{group_name, Change, Partitions, PartitionsBug};
use crate::workload::{GroupCall, WorkloadSpec};
use tenure_core::Instant;
use tenure_kv::{Command, Response, Store, Target, TxnOp};
use tenure_partitions::group::{Ownership, GROUPS_PREFIX};
use tenure_partitions::keeper::REPLAN_AFTER;
use tenure_partitions::{recipe, GroupKeeper, Plan, RecipeError};
use tenure_replica::Completion;

/// Keeper transactions one leader has in flight at most (a plan holds one
/// per group with changes, more for a change of over 63 partitions).
pub const MAX_GROUP_PROPOSALS_IN_FLIGHT: usize = 8;

/// Moves a change of members after healing may make beyond the fewest it
/// needs (`partition-moves`): none. The keeper asks for exactly the moves
/// of the assignment, which are the fewest for the counts it must reach
/// (guarantee 5 of `tenure_partitions`), and the target stays the same
/// while the releases come in (an owner that gave a partition up owns
/// fewer, never more, than it did).
pub const MOVES_SLACK: u64 = 0;

impl Sim {
    /// The groups of partitions, when they run.
    pub fn partitions(&self) -> Option<&Partitions> {
        self.kv.as_ref()?.parts.as_ref()
    }

    fn partitions_mut(&mut self) -> Option<&mut Partitions> {
        self.kv.as_mut()?.parts.as_mut()
    }

    pub(super) fn partitions_run(&self) -> bool {
        self.partitions().is_some()
    }

    pub(super) fn partitions_bug(&self) -> Option<PartitionsBug> {
        self.partitions()?.spec.planted
    }

    /// The command node `i` makes of a member's request, from its applied
    /// store, and those to propose right behind it (a leave's handovers
    /// that did not fit in it): `None` when it has no replica (the request
    /// is redirected), a refusal when the recipe refuses. (A replica
    /// rebuilding after a failed write still has its applied store; its
    /// router holds the command as any write. Redirected instead, with the
    /// node's own name when its elector leads, a member asked the same node
    /// again and again: raft seed 42.)
    pub(super) fn group_command(
        &self,
        i: usize,
        call: &GroupCall,
    ) -> Option<Result<(Command, Vec<Command>), RecipeError>> {
        let kv = self.hosts[i].kv.as_ref()?;
        let store = &kv.replica.as_ref()?.state_machine().store;
        let commands = match call {
            GroupCall::Join { group, spec, member, me } => {
                recipe::join(store, group, Some(spec), *member, me).map(|c| (c, Vec::new()))
            }
            GroupCall::Leave { group, member } => {
                recipe::leave_with(store, group, *member, true).map(|l| (l.command, l.then))
            }
            GroupCall::Release { group, member, grants } => {
                recipe::release_many(store, group, *member, grants).map(|c| (c, Vec::new()))
            }
        };
        Some(match (commands, self.partitions_bug()) {
            (Ok((first, then)), Some(PartitionsBug::HandOverInPlace)) => {
                Ok((in_place(first), then.into_iter().map(in_place).collect()))
            }
            (commands, _) => commands,
        })
    }

    /// After node `i`'s replica output was handled: brings its group
    /// keeper in step with its leadership and, as the ready leader, plans
    /// when a plan is due and proposes what it plans.
    pub(super) fn groups_step(&mut self, i: usize) {
        if !self.partitions_run() {
            return;
        }
        let bug = self.partitions_bug();
        let local = self.hosts[i].local_at(self.now);
        let (trace, id, now) = (self.cfg.trace, self.hosts[i].id, self.now);
        let Some(kv) = self.hosts[i].kv.as_mut() else { return };
        let Some(r) = kv.replica.as_ref() else { return };
        let ready = if !kv.stalled && r.is_ready_leader() { r.status().leading } else { None };
        if ready != kv.groups_token {
            kv.groups.follow();
            kv.groups_next_check = None;
            kv.groups_token = ready;
            kv.groups_due = ready.is_some();
        }
        if ready.is_none() || !kv.group_proposals.is_empty() {
            return;
        }
        let store = &r.state_machine().store;
        let from = kv.groups_planned_at + 1;
        let changed = from <= store.revision()
            && store.changes_since(GROUPS_PREFIX, from, 1).map_or(true, |c| !c.is_empty());
        let timer = kv.groups_next_check.is_some_and(|t| t <= local);
        if !(kv.groups_due || changed || timer) {
            return;
        }
        let Plan { commands, next_check } = plan(&mut kv.groups, local, store, bug);
        kv.groups_due = false;
        kv.groups_planned_at = store.revision();
        kv.groups_next_check = next_check;
        if trace && !commands.is_empty() {
            eprintln!("{:>12.3} {id:?} group keeper proposes {commands:?}", now as f64 / 1e6);
        }
        if let Some(p) = self.partitions_mut() {
            p.stats.keeper_plans += 1;
        }
        for command in commands.into_iter().take(MAX_GROUP_PROPOSALS_IN_FLIGHT) {
            let Some(kv) = self.hosts[i].kv.as_mut() else { return };
            let Some(r) = kv.replica.as_mut().filter(|_| !kv.stalled) else { return };
            let Some(Ok(id)) = r.propose(local, vec![command.encode()]).pop() else { break };
            kv.group_proposals.insert(id);
            if let Some(p) = self.partitions_mut() {
                p.stats.keeper_transactions += 1;
            }
            // Each proposal's write is handled before the replica's next
            // input, which counts it durable (a single voter commits it then).
            if !self.drain_replica(i) {
                return;
            }
        }
    }

    /// Handles a completion of node `i` that is a keeper transaction's;
    /// gives back any other.
    pub(super) fn group_complete(&mut self, i: usize, c: Completion) -> Option<Completion> {
        let Completion::Proposal { id, result } = c else { return Some(c) };
        let kv = self.hosts[i].kv.as_mut()?;
        if !kv.group_proposals.remove(&id) {
            return Some(Completion::Proposal { id, result });
        }
        // Planned again once they are all done (the server's rule).
        kv.groups_due |= kv.group_proposals.is_empty();
        let outcome = result.ok().and_then(|(_, bytes)| Response::decode(&bytes).ok());
        if let (Some(Response::Txn { succeeded, .. }), Some(p)) = (outcome, self.partitions_mut()) {
            p.stats.keeper_applied += u64::from(succeeded);
            p.stats.keeper_voided += u64::from(!succeeded);
        }
        None
    }

    /// When node `i`'s timer must fire for its group keeper: at once when a
    /// plan is due, else at the keeper's next check (only as the ready
    /// leader with nothing in flight: a completion makes the plan due).
    pub(super) fn groups_deadline(&self, i: usize) -> Option<Instant> {
        let kv = self.hosts[i].kv.as_ref()?;
        kv.groups_token?;
        if !kv.group_proposals.is_empty() {
            return None;
        }
        if kv.groups_due {
            return Some(Instant::ZERO);
        }
        kv.groups_next_check
    }

    /// The faults healed: the members' own faults end too.
    pub(super) fn settle_partitions(&mut self) {
        let now = self.now;
        let Some(p) = self.partitions_mut() else { return };
        let actions = p.settle(now);
        self.do_actions(actions);
    }

    /// A duration on a leader's or member's clock, stretched by the drift
    /// bound both ways.
    fn stretched(&self, ns: u64) -> u64 {
        let drift = u64::from(self.hosts[0].cfg.clock_drift_ppm);
        ns * (1_000_000 + drift) / (1_000_000 - drift)
    }

    /// How long after healing every group must be at rest (every partition
    /// of a group with a live ready member owned, every member within its
    /// share): the protocol's liveness bound (a ready tenure leader); a TTL
    /// stretched by the drift (the sessions of members that crashed expire
    /// on the new leader's clock, and their partitions with them); the
    /// stabilisation time, stretched (a member that restarted, or any
    /// member not owning yet under a new leader, waits it); three request
    /// timeouts (a restarted member's grant and join; an owner's release
    /// after the keeper marked it); two polls (the owner sees the mark, the
    /// new owner its grant); the keeper's wait before it plans a lost
    /// transaction again; and for each node that serves no request a
    /// request timeout, a poll and a round trip (a member walks its nodes
    /// in turn: [`Sim::unserving_nodes`]).
    pub fn partitions_bound(&self) -> u64 {
        let Some(p) = self.partitions() else { return 0 };
        let op_timeout = WorkloadSpec::op_timeout(dur_ns(self.cfg.election_timeout));
        let hop = op_timeout + POLL_NS.1 + 2 * LATENCY_NS.1;
        let walk = self.unserving_nodes() as u64;
        dur_ns(self.liveness_bound())
            + self.stretched(p.spec.ttl_ns())
            + self.change_bound()
            + walk * hop
    }

    /// How long a change of members may take to come to rest once the
    /// cluster is healthy: the stabilisation time (stretched), three
    /// request timeouts (the join or leave, a release, a spare), two polls
    /// and the keeper's wait before planning a lost transaction again.
    pub fn change_bound(&self) -> u64 {
        let Some(p) = self.partitions() else { return 0 };
        let op_timeout = WorkloadSpec::op_timeout(dur_ns(self.cfg.election_timeout));
        self.stretched(p.spec.stabilise_ms * 1_000_000)
            + 3 * op_timeout
            + 2 * POLL_NS.1
            + dur_ns(REPLAN_AFTER)
    }

    /// Reports what is wrong with every group now (`partition-coverage`,
    /// `partition-balance`), each problem after `when`; true if nothing is.
    fn judge_partitions(&mut self, when: &str) -> bool {
        let now = self.now;
        let Some(p) = self.partitions_mut() else { return true };
        let mut found = Vec::new();
        for g in 0..p.spec.groups() {
            let problems = p.problems(g, now);
            p.stats.unowned += problems.coverage.len() as u64;
            p.stats.unbalanced += problems.balance.len() as u64;
            found.extend(problems.coverage.into_iter().map(|w| (Check::PartitionCoverage, w)));
            found.extend(problems.balance.into_iter().map(|w| (Check::PartitionBalance, w)));
        }
        let clean = found.is_empty();
        for (check, what) in found {
            self.checker.fail(now, check, format!("{when}: {what}"));
        }
        clean
    }

    /// After healing: runs until every group is at rest, at most
    /// [`Sim::partitions_bound`], and checks it then; then a member leaves
    /// and joins again, and each change must come to rest within
    /// [`Sim::change_bound`] moving at most [`MOVES_SLACK`] partitions more
    /// than the fewest it needs.
    pub(super) fn partitions_liveness(&mut self) {
        let bound = self.partitions_bound();
        let Some(healed) = self.partitions().and_then(|p| p.settled_at) else { return };
        let rest = self.run_until_cond(healed + bound, |s| {
            s.partitions().is_some_and(|p| p.all_at_rest(s.now))
        });
        let when = format!("{:.0} ms after healing", (self.now - healed) as f64 / 1e6);
        if !self.judge_partitions(&when) {
            return;
        }
        let Some(at) = rest else { return };
        let Some(p) = self.partitions_mut() else { return };
        p.stats.at_rest_runs += 1;
        // At rest since the last change of owner (the liveness phase before
        // this one may have outlasted it).
        let since = p.last_change(at).unwrap_or(healed).max(healed);
        p.stats.at_rest_ns.push(since - healed);
        // A member that works, in a group where another one does too.
        let candidates: Vec<usize> = (0..p.spec.groups())
            .filter(|&g| p.live_ready(g, at).len() >= 2)
            .flat_map(|g| p.working_members(g))
            .collect();
        let Some(x) = p.pick(&candidates) else { return };
        if self.measure_change(Change::Leave(x)) {
            self.measure_change(Change::Join(x));
        }
    }

    /// Makes `change`, runs until every group is at rest again (at most
    /// [`Sim::change_bound`]), checks the groups and counts the moves of
    /// the member's group against the fewest. True if it came to rest.
    fn measure_change(&mut self, change: Change) -> bool {
        let now = self.now;
        let bound = self.change_bound();
        let Some(p) = self.partitions_mut() else { return false };
        let (Change::Leave(x) | Change::Join(x)) = change;
        let g = p.group_of(x);
        let Some(fewest) = p.min_moves(g, now, change) else { return false };
        let from = p.holdings.len();
        let actions = match change {
            Change::Leave(x) => p.leave_now(x, now),
            Change::Join(x) => p.rejoin_now(x, now),
        };
        self.trace_fault(&format!(
            "member{x} of {} {change:?}: the fewest moves {fewest}",
            group_name(g)
        ));
        self.do_actions(actions);
        // A member that left has had its answer (it is out).
        let rest = self.run_until_cond(now + bound, |s| {
            let out = |p: &Partitions| matches!(change, Change::Join(_)) || p.is_out(x);
            s.partitions().is_some_and(|p| out(p) && p.all_at_rest(s.now))
        });
        let what = match change {
            Change::Leave(_) => "left",
            Change::Join(_) => "joined again",
        };
        let when = format!(
            "{:.0} ms after member{x} of {} {what}",
            (self.now - now) as f64 / 1e6,
            group_name(g)
        );
        let clean = self.judge_partitions(&when);
        let Some(p) = self.partitions_mut() else { return false };
        let moved = p.grants_since(g, from);
        let trace = format!("{when}: {moved} partitions moved, the fewest is {fewest}");
        self.trace_fault(&trace);
        let Some(p) = self.partitions_mut() else { return false };
        p.stats.changes_measured += 1;
        p.stats.change_moves += moved;
        p.stats.change_min_moves += fewest;
        p.stats.max_excess_moves = p.stats.max_excess_moves.max(moved.saturating_sub(fewest));
        if moved > fewest + MOVES_SLACK {
            let what = format!(
                "{when}: {moved} partitions of {} changed hands, the fewest is {fewest} (slack {MOVES_SLACK})",
                group_name(g)
            );
            self.checker.fail(self.now, Check::PartitionMoves, what);
        }
        clean && rest.is_some()
    }

    /// Checks every holding of the run (no overlap, epochs increasing) and
    /// files the counts.
    pub(super) fn partitions_check(&mut self) {
        let now = self.now;
        let Some(p) = self.partitions_mut() else { return };
        let violations = p.check(now);
        p.stats.weighted_runs = u64::from(p.weighted);
        self.stats.partitions = Some(p.stats.clone());
        for (check, what) in violations {
            self.checker.fail(now, check, what);
        }
    }
}

/// The keeper's plan from `store` at `now`, unless a planted bug changes it.
fn plan(keeper: &mut GroupKeeper, now: Instant, store: &Store, bug: Option<PartitionsBug>) -> Plan {
    match bug {
        Some(PartitionsBug::GrantOverOwner) => {
            // It plans as if every key marked `release` were gone, and
            // grants without comparing the owner key's absence.
            let mut view = store.clone();
            let marked: Vec<String> = store
                .keys_from(GROUPS_PREFIX)
                .take_while(|kv| kv.key.starts_with(GROUPS_PREFIX))
                .filter(|kv| kv.key.contains("/owners/"))
                .filter(|kv| {
                    serde_json::from_slice::<Ownership>(&kv.value).is_ok_and(|o| o.release)
                })
                .map(|kv| kv.key.clone())
                .collect();
            for key in marked {
                view.execute(&Command::Delete { key, if_mod_revision: None });
            }
            let mut plan = keeper.plan(now, &view);
            for c in &mut plan.commands {
                if let Command::Txn { compare, .. } = c {
                    compare.retain(|c| {
                        !(c.key.contains("/owners/") && c.target == Target::CreateRevision(0))
                    });
                }
            }
            plan
        }
        Some(PartitionsBug::NeverBalance) => {
            let mut plan = keeper.plan(now, store);
            for c in &mut plan.commands {
                if let Command::Txn { success, .. } = c {
                    success.retain(|op| !marks_release(op));
                }
            }
            plan.commands
                .retain(|c| !matches!(c, Command::Txn { success, .. } if success.is_empty()));
            plan
        }
        _ => keeper.plan(now, store),
    }
}

/// Whether `op` marks an owner key `release`.
fn marks_release(op: &TxnOp) -> bool {
    let TxnOp::Put { value, .. } = op else { return false };
    serde_json::from_slice::<Ownership>(value).is_ok_and(|o| o.release)
}

/// The planted `HandOverInPlace`: each key a transaction puts again is
/// not deleted first (the partition changes hands under its old epoch).
fn in_place(command: Command) -> Command {
    let Command::Txn { compare, success, failure } = command else { return command };
    let put: Vec<String> = success
        .iter()
        .filter_map(|op| match op {
            TxnOp::Put { key, .. } => Some(key.clone()),
            _ => None,
        })
        .collect();
    let success = success
        .into_iter()
        .filter(|op| !matches!(op, TxnOp::Delete { key } if put.contains(key)))
        .collect();
    Command::Txn { compare, success, failure }
}
