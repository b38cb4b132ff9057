//! The key-value workload inside the event loop: a replica beside every
//! elector, driven by the calling contract of `tenure_replica` (persist,
//! then send, then deliver), and the clients' requests and answers.
//!
//! * The replica learns the leader from the elector's
//!   `Event::LeaderChanged` (`set_leadership`), reads its lease (for the token it leads) from
//!   `is_leader(now)`, and shares the node's timer.
//! * Its log lives on a [`crate::disk::SimDisk`]: a write is pending until
//!   its fsync is done, and writes are synced in order, so the messages and
//!   answers of an output leave once every write before them is synced. A
//!   crash tears what is still pending at a record boundary (a random
//!   prefix survives) and drops every message and answer not yet left.
//!   The replica counts an output's write durable from its next input on
//!   (its calling contract): when the next output is handled, every
//!   earlier write is made durable, so a crash tears only writes no later
//!   input counted on (before, a single voter committed an entry at its
//!   next input, a crash then tore it, and it committed another one at the
//!   same index: `same-entry-per-index` with `--nodes 1`).
//! * A crash during a write (the `crash_at_next_write` fault) keeps a
//!   random prefix of that write's records, and nothing of its output
//!   leaves. A write while storage fails keeps a random prefix too; the
//!   replica stalls, and is rebuilt from its disk once storage works.
//! * Every output's applied entries and the store's state are checked as
//!   they happen ([`crate::kvcheck::ReplicaChecks`]), and, when members
//!   change, the configurations committed
//!   ([`crate::membership::MembershipChecks`]).
//! * **The electorate.** An output's `electorate` (the configuration the
//!   node's log holds changed, or its entry is known to be committed) goes
//!   to the elector (`Protocol::handle_electorate`) once the output's write
//!   is durable and before its messages leave: at once when nothing is
//!   syncing, else by an event at the time the write is synced, which
//!   comes before the messages, sent then, reach anyone. An output whose
//!   write failed or was cut by a crash hands nothing: the replica rebuilt
//!   from its disk hands its own electorate to the elector before the
//!   elector takes any other input (at start, after a restart, after a
//!   storage failure). An electorate equal to the elector's is not handed
//!   (nothing would change); so a run that changes no members hands none.

use super::{dur_ns, Envelope, Sim, SimEvent};
use crate::checker::Check;
use crate::disk::Record;
use crate::elect::Elections;
use crate::elect_deadlines::DeadlineLedger;
use crate::host::Inbound;
use crate::kvcheck::{check_history, digest, ReplicaChecks, MAX_SEARCH_STEPS};
use crate::kvnode::{KvHost, SimStore};
use crate::membership::{MembershipChecks, Operator};
use crate::network::NS_PER_MS;
use crate::partitions::Partitions;
use crate::stats::WorkloadStats;
use crate::workload::{
    key_name, Action, PlantedBug, Reply, ReplyBody, Request, RequestBody, Tag, Workload,
    WorkloadSpec, MAX_FINAL_READ_TRIES,
};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use tenure_core::{Electorate, Instant, NodeId};
use tenure_replica::router::{
    Answer, Call, Forward, Route, Router, RouterConfig, RouterOutput, WriteError,
};
use tenure_replica::{
    Completion, Config, Payload, Position, Replica, ReplicaMessage, Restored, StateMachine,
};

/// Outputs one replica input may produce before the driver calls it a loop.
const MAX_REPLICA_ROUNDS: usize = 16;
/// How long after the messages of its output left the planted
/// [`PlantedBug::ElectorateLate`] hands an electorate to the elector, in
/// election timeouts.
const LATE_ELECTORATE_TIMEOUTS: u64 = 1;
/// Heartbeat rounds the running replicas have, after the final reads and
/// beyond those needed to send what the furthest behind lacks, to apply
/// everything in their logs (a snapshot, a lost message or two).
const CONVERGENCE_SLACK_ROUNDS: u64 = 20;

/// What the workload's machinery counted in one run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KvStats {
    /// Replica messages handed to the network.
    pub replica_messages: u64,
    /// Routers' frames handed to the network (forwarded requests and their
    /// answers).
    pub forwards: u64,
    /// Crashes that tore a log write (records were still syncing).
    pub torn_writes: u64,
    /// Log writes that failed (storage failing): the replica stalled.
    pub failed_writes: u64,
    /// Replicas rebuilt from their disk after a storage failure.
    pub rebuilds: u64,
}

/// The workload's state in the simulator.
pub(crate) struct KvWorld {
    pub(crate) workload: Workload,
    /// The application elections, when they run.
    pub(crate) elect: Option<Elections>,
    /// The groups of partitions, when they run.
    pub(crate) parts: Option<Partitions>,
    pub(crate) checks: ReplicaChecks,
    pub(crate) stats: KvStats,
    /// The replicas' settings (for node 1; the id and the bootstrap voters
    /// are set per node).
    template: Config,
    rng: Pcg64Mcg,
    /// The changes of members, when they run.
    pub(crate) members: Option<Box<MembersWorld>>,
    /// Session deadlines across leader changes (sessions run).
    pub(crate) deadlines: DeadlineLedger,
}

/// The changes of members in the simulator: the driver of changes and the
/// checks of what the logs commit.
pub(crate) struct MembersWorld {
    pub(crate) operator: Operator,
    pub(crate) checks: MembershipChecks,
}

impl Sim {
    /// Sets up the workload: a replica beside every elector. Clients start
    /// with [`Sim::start_workload`].
    pub(super) fn kv_init(&mut self, spec: WorkloadSpec) {
        let n = self.hosts.len();
        let mut rng = Pcg64Mcg::seed_from_u64(self.seed ^ 0x7265_706c_6963_6173);
        let voters = self.cfg.bootstrap();
        let mut template = Config::new(voters[0], voters.clone(), self.cfg.heartbeat);
        template.planted_bug_ungated_changes = spec.planted == Some(PlantedBug::UngatedChanges);
        template.planted_bug_no_lead_fence =
            spec.planted == Some(PlantedBug::LeadAgainAfterFailedWrite);
        // Small batches and frequent snapshots, so that catching up,
        // compaction and snapshot transfer all happen.
        template.max_append_entries = rng.gen_range(1..=16);
        template.snapshot_every = if rng.gen_bool(0.25) { 10_000 } else { rng.gen_range(4..=64) };
        // ...scaled with the sessions of the `sessions` workload: a snapshot
        // of N sessions costs O(N) to take and to send, and with 100,000 of
        // them a compaction every few entries had the simulator spend its
        // time serialising stores (a node's defaults: 256 and 10,000).
        let scale = spec.sessions_only().map_or(1, |e| e.apps / 1_000);
        if scale > 1 {
            template.max_append_entries = (template.max_append_entries * scale).min(256);
            template.snapshot_every = (template.snapshot_every * scale as u64).min(10_000);
        }
        template.snapshot_chunk_bytes = spec.snapshot_chunk_bytes;
        let et = dur_ns(self.cfg.election_timeout);
        let elect = spec.elect.clone().map(|e| {
            let drift = self.hosts[0].cfg.clock_drift_ppm;
            Elections::new(e, spec.clients, n, WorkloadSpec::op_timeout(et), drift, self.seed)
        });
        let parts = spec.partitions.clone().map(|p| {
            let drift = self.hosts[0].cfg.clock_drift_ppm;
            let base = spec.clients + spec.elect.as_ref().map_or(0, |e| e.apps);
            let op_timeout = WorkloadSpec::op_timeout(et);
            Partitions::new(p, base, n, op_timeout, drift, self.seed, self.cfg.trace)
        });
        let members = spec.membership.map(|m| {
            Box::new(MembersWorld {
                operator: Operator::new(m, self.seed, et),
                checks: MembershipChecks::new(n, &voters),
            })
        });
        let workload = Workload::new(spec, n, WorkloadSpec::op_timeout(et), self.seed);
        self.kv = Some(Box::new(KvWorld {
            workload,
            elect,
            parts,
            checks: ReplicaChecks::new(n),
            stats: KvStats::default(),
            template,
            rng,
            members,
            deadlines: DeadlineLedger::new(et, self.hosts[0].cfg.clock_drift_ppm),
        }));
        for i in 0..n {
            self.hosts[i].kv = Some(KvHost::default());
            self.rebuild_replica(i);
        }
    }

    /// The workload, when it runs.
    pub fn workload(&self) -> Option<&Workload> {
        self.kv.as_ref().map(|k| &k.workload)
    }

    /// What the workload's machinery counted.
    pub fn kv_stats(&self) -> Option<KvStats> {
        self.kv.as_ref().map(|k| k.stats)
    }

    /// The applied index of node `i`'s replica, if it runs.
    pub fn applied_index(&self, i: usize) -> Option<u64> {
        let r = self.hosts[i].kv.as_ref()?.replica.as_ref()?;
        Some(r.applied())
    }

    /// True when every running replica has applied its whole log and all
    /// of them are at the same entry.
    /// With changes of members, only the members of the newest committed
    /// configuration count (a removed node, a spare, is left alone).
    pub fn replicas_converged(&self) -> bool {
        let members = match self.membership_runs() {
            true => match self.committed_configuration() {
                Some(m) => Some(m.members),
                None => return false,
            },
            false => None,
        };
        let mut at = None;
        let counts = |id: NodeId| members.as_ref().is_none_or(|m| m.get(id).is_some());
        for h in self.hosts.iter().filter(|h| h.is_up() && counts(h.id)) {
            let Some(kv) = h.kv.as_ref() else { continue };
            let Some(r) = kv.replica.as_ref().filter(|_| !kv.stalled) else { return false };
            let st = r.status();
            if st.applied != st.last.index || at.is_some_and(|a| a != st.last) {
                return false;
            }
            at = Some(st.last);
        }
        true
    }

    /// How long the running replicas may take to converge from now: when no
    /// write comes, the leader sends a follower behind one batch of at most
    /// `max_append_entries` per heartbeat (not on each reply). A follower
    /// whose log diverged is sent back to the start of the divergent run,
    /// no further than its commit index, which after a restart is its
    /// snapshot's: so the lag is counted from the lowest snapshot, and the
    /// rounds doubled (a round whose reply comes late), plus
    /// [`CONVERGENCE_SLACK_ROUNDS`]; heartbeats stretch with drift.
    fn convergence_bound(&self) -> u64 {
        let status: Vec<_> = self
            .hosts
            .iter()
            .filter(|h| h.is_up())
            .filter_map(|h| h.kv.as_ref()?.replica.as_ref().map(|r| r.status()))
            .collect();
        let last = status.iter().map(|s| s.last.index).max().unwrap_or(0);
        let behind = status.iter().map(|s| s.snapshot.index).min().unwrap_or(last);
        let batch = self.kv.as_ref().map_or(1, |k| k.template.max_append_entries.max(1)) as u64;
        let rounds = 2 * (last - behind.min(last)).div_ceil(batch) + CONVERGENCE_SLACK_ROUNDS;
        let drift = u64::from(self.hosts[0].cfg.clock_drift_ppm);
        let stretch = |ns: u64| ns * (1_000_000 + drift) / (1_000_000 - drift);
        stretch(rounds * dur_ns(self.cfg.heartbeat)) + self.max_rtt_ns()
    }

    /// Ends the workload and checks its history: clients finish what they
    /// are doing, client 0 reads every key, the running replicas must
    /// converge, then the history must be linearizable with consistent
    /// revisions. Violations go to the checker; the failed expectations
    /// (a final read without an answer, replicas that do not converge, a
    /// key whose linearizability is undecided) are returned.
    pub fn finish_workload(&mut self) -> Vec<String> {
        let mut failures = Vec::new();
        if self.kv.is_none() {
            return failures;
        }
        let op_timeout = WorkloadSpec::op_timeout(dur_ns(self.cfg.election_timeout));
        self.elect_liveness();
        self.partitions_liveness();
        self.stop_workload();
        let deadline = self.now + op_timeout + NS_PER_MS;
        self.run_until_cond(deadline, |s| s.workload().is_some_and(Workload::idle));
        self.begin_final_reads();
        let keys = self.workload().map_or(0, |w| w.spec.keys) as u64;
        let deadline = self.now + keys * u64::from(MAX_FINAL_READ_TRIES) * (op_timeout + NS_PER_MS);
        self.run_until_cond(deadline, |s| s.workload().is_some_and(Workload::final_reads_done));
        let missing = self.workload().map(Workload::final_reads_missing).unwrap_or_default();
        for &k in &missing {
            failures.push(format!("the final read of key {} got no answer", key_name(k)));
        }
        let within = self.convergence_bound();
        let converged = self.run_until_cond(self.now + within, Sim::replicas_converged);
        if converged.is_none() {
            let at: Vec<String> = (0..self.hosts.len())
                .filter_map(|i| {
                    let r = self.hosts[i].kv.as_ref()?.replica.as_ref()?;
                    let st = r.status();
                    Some(format!("n{}: applied {} of {:?}", i + 1, st.applied, st.last))
                })
                .collect();
            failures.push(format!(
                "the running replicas did not converge within {} ms of the final reads: {}",
                within / NS_PER_MS,
                at.join(", ")
            ));
        }
        self.check_membership_converged();
        self.stats.membership = self.membership_stats();
        let Some(world) = self.kv.as_ref() else { return failures };
        let w = &world.workload;
        let verdict = check_history(&w.history, w.spec.keys, MAX_SEARCH_STEPS);
        let counts = w.counts();
        let stats = WorkloadStats {
            runs: 1,
            ops: counts.ops,
            reads: counts.reads,
            acknowledged: counts.acknowledged,
            unknown: counts.unknown + counts.pending,
            not_executed: counts.not_executed,
            final_reads_missing: missing.len() as u64,
            undecided_runs: u64::from(!verdict.undecided.is_empty()),
            undecided_keys: verdict.undecided.len() as u64,
            search_steps: verdict.steps,
            max_search_steps: verdict.max_steps,
            replica_messages: world.stats.replica_messages,
            forwards: world.stats.forwards,
            torn_writes: world.stats.torn_writes,
            failed_writes: world.stats.failed_writes,
            rebuilds: world.stats.rebuilds,
        };
        for (check, what) in verdict.violations {
            self.checker.fail(self.now, check, what);
        }
        self.elect_check();
        self.partitions_check();
        failures.extend(verdict.undecided.into_iter().map(|u| format!("linearizability {u}")));
        self.stats.workload = Some(stats);
        failures
    }

    /// Starts the clients.
    pub fn start_workload(&mut self) {
        let now = self.now;
        let Some(kv) = self.kv.as_mut() else { return };
        let mut actions = kv.workload.start(now);
        if let Some(e) = kv.elect.as_mut() {
            actions.extend(e.start(now));
        }
        if let Some(p) = kv.parts.as_mut() {
            actions.extend(p.start(now));
        }
        self.do_actions(actions);
    }

    /// Clients start no new operation; those running finish.
    pub fn stop_workload(&mut self) {
        if let Some(kv) = self.kv.as_mut() {
            kv.workload.stop();
        }
    }

    /// Client 0 reads every key (after [`Sim::stop_workload`]).
    pub fn begin_final_reads(&mut self) {
        let now = self.now;
        let Some(kv) = self.kv.as_mut() else { return };
        let actions = kv.workload.begin_final_reads(now);
        self.do_actions(actions);
    }

    /// Node `i` crashes during its next log write: a prefix of the write's
    /// records reaches the disk, nothing of its output leaves.
    pub fn crash_at_next_write(&mut self, i: usize) {
        self.trace_fault(&format!("n{} crashes at its next log write", i + 1));
        let up = self.hosts[i].is_up();
        if let Some(kv) = self.hosts[i].kv.as_mut().filter(|_| up) {
            kv.crash_at_write = true;
        }
    }

    /// Cancels [`Sim::crash_at_next_write`] if the write has not come.
    pub fn cancel_crash_at_write(&mut self, i: usize) {
        if let Some(kv) = self.hosts[i].kv.as_mut() {
            kv.crash_at_write = false;
        }
    }

    pub(super) fn do_actions(&mut self, actions: Vec<Action>) {
        for a in actions {
            match a {
                Action::Send { node, req, delay_ns } => {
                    self.schedule(self.now + delay_ns, SimEvent::ToNode { node, req })
                }
                Action::Wake { client, at_ns, gen } => {
                    self.schedule(at_ns.max(self.now), SimEvent::ClientWake { client, gen })
                }
            }
        }
    }

    pub(super) fn client_wake(&mut self, client: usize, gen: u64) {
        let now = self.now;
        let Some(kv) = self.kv.as_mut() else { return };
        let actions = if let Some(e) = kv.elect.as_mut().filter(|e| e.app_of(client).is_some()) {
            e.on_wake(client, now)
        } else if let Some(p) = kv.parts.as_mut().filter(|p| p.app_of(client).is_some()) {
            p.on_wake(client, now)
        } else {
            kv.workload.on_wake(client, gen, now)
        };
        self.do_actions(actions);
    }

    pub(super) fn request_arrives(&mut self, node: usize, req: Request) {
        self.arrive(node, Inbound::Client(req));
    }

    pub(super) fn reply_arrives(&mut self, from: usize, reply: Reply, sent: u64, departs: u64) {
        if self.hosts[from].crashed_within(sent, departs) {
            return;
        }
        let now = self.now;
        let Some(kv) = self.kv.as_mut() else { return };
        let client = reply.tag.client;
        let actions = if let Some(e) = kv.elect.as_mut().filter(|e| e.app_of(client).is_some()) {
            e.on_reply(reply, now)
        } else if let Some(p) = kv.parts.as_mut().filter(|p| p.app_of(client).is_some()) {
            p.on_reply(reply, now)
        } else {
            kv.workload.on_reply(reply, now)
        };
        self.do_actions(actions);
    }

    pub(super) fn deliver_replica(
        &mut self,
        from: usize,
        to: usize,
        msg: ReplicaMessage,
        sent_ns: u64,
        departs_ns: u64,
    ) {
        if self.net.is_blocked(from, to) || self.hosts[from].crashed_within(sent_ns, departs_ns) {
            return;
        }
        if self.sender_wiped(from, sent_ns) || self.identity_refused(from, to) {
            return;
        }
        let from_id = self.hosts[from].id;
        self.arrive(to, Inbound::Replica(from_id, msg));
    }

    /// True if node `i`'s elector timeout is due at `local`.
    pub(super) fn elector_due(&self, i: usize, local: Instant) -> bool {
        self.hosts[i].elector().is_some_and(|e| local >= e.poll_timeout())
    }

    /// Node `i` sends `msg` to `to`; it leaves at `departs_ns`.
    fn send_replica(&mut self, i: usize, to: NodeId, msg: ReplicaMessage, departs_ns: u64) {
        let Some(to_idx) = self.index_of(to) else { return };
        if let Some(kv) = self.kv.as_mut() {
            kv.stats.replica_messages += 1;
        }
        let delays = self.net.transmit(&mut self.rng, i, to_idx);
        for &d in delays.as_slice() {
            let msg = Envelope::Replica(msg.clone());
            let event =
                SimEvent::Deliver { from: i, to: to_idx, msg, sent_ns: self.now, departs_ns };
            self.schedule(departs_ns + d, event);
        }
    }

    /// Node `i` answers a client; the answer leaves at `departs_ns`.
    pub(super) fn answer(&mut self, i: usize, tag: Tag, body: ReplyBody, departs_ns: u64) {
        let Some(kv) = self.kv.as_mut() else { return };
        let delay = kv.rng.gen_range(NS_PER_MS..=5 * NS_PER_MS);
        let reply = Reply { tag, body };
        let event = SimEvent::ToClient { from: i, reply, sent_ns: self.now, departs_ns };
        self.schedule(departs_ns + delay, event);
    }

    /// When an output of node `i` without a write may leave: once every
    /// earlier write is synced.
    pub(super) fn departs(&self, i: usize) -> u64 {
        self.hosts[i].kv.as_ref().map_or(self.now, |kv| kv.synced_at.max(self.now))
    }

    /// A read's answer from node `i`'s store as it is now.
    fn read_answer(&self, i: usize, key: &str) -> ReplyBody {
        let store = self.hosts[i]
            .kv
            .as_ref()
            .and_then(|kv| kv.replica.as_ref())
            .map(|r| &r.state_machine().store);
        match store {
            Some(s) => ReplyBody::Read { kv: s.get(key).cloned(), revision: s.revision() },
            None => ReplyBody::Redirect(None),
        }
    }

    /// A client's request reaches node `i`: the key-value requests go
    /// through the node's router (proposed here, forwarded to the leader,
    /// or held), as on a running node; the application elections' requests
    /// are served by the replica directly.
    pub(super) fn client_request(&mut self, i: usize, local: Instant, req: Request) {
        let known = self.hosts[i].elector().and_then(|e| e.status().leader);
        // The lease serves reads only for the leadership the replica leads
        // (as on a real node, where the replica learns of a new one later).
        let lease = self.hosts[i]
            .elector()
            .and_then(|e| e.is_leader(local).then(|| e.status().fencing_token).flatten());
        let planted = self.kv.as_ref().and_then(|k| k.workload.spec.planted);
        let tag = req.tag;
        // A member's request: the recipe's command from this node's store,
        // then a write like any other (or refused at once); those after it
        // are proposed right behind it, and answer nobody.
        let mut then = Vec::new();
        let body = match req.body {
            RequestBody::Group(call) => match self.group_command(i, &call) {
                Some(Ok((command, after))) => {
                    then = after;
                    RequestBody::Write(command)
                }
                Some(Err(refused)) => {
                    let departs = self.departs(i);
                    return self.answer(i, tag, ReplyBody::GroupRefused(refused), departs);
                }
                None => RequestBody::Group(call),
            },
            body => body,
        };
        let Some(kv) = self.hosts[i].kv.as_mut() else { return };
        let (Some(r), Some(router)) = (kv.replica.as_mut(), kv.router.as_mut()) else {
            let departs = self.departs(i);
            return self.answer(i, tag, ReplyBody::Redirect(known), departs);
        };
        router.set_ready(ready_token(r, kv.stalled));
        let answer = match body {
            // No replica (see `group_command`).
            RequestBody::Group(_) => Some(ReplyBody::Redirect(known)),
            body @ (RequestBody::Range { .. } | RequestBody::Renew { .. }) => {
                if kv.stalled {
                    Some(ReplyBody::Redirect(known))
                } else {
                    self.elect_request(i, local, tag, body, lease, known)
                }
            }
            RequestBody::Write(cmd) => {
                let command = cmd.encode();
                let early = planted == Some(PlantedBug::EarlyForwardAck)
                    && matches!(router.route(), Route::Leader(_));
                kv.next_caller += 1;
                let caller = kv.next_caller;
                if early {
                    // The planted bug: acknowledged with what this node's
                    // own store would answer, before the leader commits it.
                    let mut scratch = r.state_machine().store.clone();
                    let position = Position { token: Default::default(), index: r.applied() + 1 };
                    router.call(local, caller, Call::Propose(command.clone()));
                    Some(ReplyBody::Done(scratch.apply(position, &command)))
                } else {
                    kv.callers.insert(caller, (tag, None));
                    router.call(local, caller, Call::Propose(command));
                    for c in then {
                        kv.next_caller += 1;
                        router.call(local, kv.next_caller, Call::Propose(c.encode()));
                    }
                    None
                }
            }
            RequestBody::Read { key } => {
                if planted == Some(PlantedBug::StaleFollowerReads) && !r.is_ready_leader() {
                    Some(self.read_answer(i, &key))
                } else {
                    kv.next_caller += 1;
                    let caller = kv.next_caller;
                    kv.callers.insert(caller, (tag, Some(key)));
                    router.call(local, caller, Call::Read);
                    None
                }
            }
        };
        if let Some(body) = answer {
            let departs = self.departs(i);
            self.answer(i, tag, body, departs);
        }
    }

    /// A router's frame from node `from` reaches node `i`.
    pub(super) fn forward_in(&mut self, i: usize, local: Instant, from: NodeId, frame: Forward) {
        if let Some(router) = self.hosts[i].kv.as_mut().and_then(|kv| kv.router.as_mut()) {
            router.forward_in(local, from, frame);
        }
    }

    /// A router's frame from node `from` arrives at node `to`.
    pub(super) fn deliver_forward(
        &mut self,
        from: usize,
        to: usize,
        frame: Forward,
        sent_ns: u64,
        departs_ns: u64,
    ) {
        if self.net.is_blocked(from, to) || self.hosts[from].crashed_within(sent_ns, departs_ns) {
            return;
        }
        if self.sender_wiped(from, sent_ns) || self.identity_refused(from, to) {
            return;
        }
        let from_id = self.hosts[from].id;
        self.arrive(to, Inbound::Forward(from_id, frame));
    }

    /// Node `i` sends a router's frame to `to`; it leaves at `departs_ns`.
    /// The frames travel on the peer connection, as on a running node: a
    /// frame may be lost (a connection that breaks loses what it had not
    /// written), delayed or overtaken, never duplicated (TCP does not, and
    /// the router relies on it: a forwarded write received twice would be
    /// proposed twice).
    fn send_forward(&mut self, i: usize, to: NodeId, frame: Forward, departs_ns: u64) {
        let Some(to_idx) = self.index_of(to) else { return };
        if let Some(kv) = self.kv.as_mut() {
            kv.stats.forwards += 1;
        }
        let delays = self.net.transmit(&mut self.rng, i, to_idx);
        if let Some(&d) = delays.as_slice().first() {
            let msg = Envelope::Forward(frame);
            let event =
                SimEvent::Deliver { from: i, to: to_idx, msg, sent_ns: self.now, departs_ns };
            self.schedule(departs_ns + d, event);
        }
    }

    /// Node `i`'s router by its contract (as the node's log task drives
    /// it): the batch proposed, the reads started, the held requests routed,
    /// then its frames sent and its callers answered.
    pub(super) fn drive_router(&mut self, i: usize) {
        let local = self.hosts[i].local_now(self.now);
        let lease = self.hosts[i]
            .elector()
            .and_then(|e| e.is_leader(local).then(|| e.status().fencing_token).flatten());
        for _ in 0..2 {
            let Some(kv) = self.hosts[i].kv.as_mut() else { return };
            let stalled = kv.stalled;
            let (Some(r), Some(router)) = (kv.replica.as_mut(), kv.router.as_mut()) else {
                return;
            };
            router.set_ready(ready_token(r, stalled));
            let mut proposed = false;
            if !stalled && router.has_batch() {
                let leading = if r.is_ready_leader() { r.status().leading } else { None };
                let commands = router.take_batch(local, leading);
                if !commands.is_empty() {
                    let results = r.propose(local, commands);
                    router.batch_proposed(local, results);
                    proposed = true;
                }
            }
            // The batch's write is handled before the replica's next input,
            // which counts it durable (a single voter commits it then).
            if proposed && !self.drain_replica(i) {
                return;
            }
            let Some(kv) = self.hosts[i].kv.as_mut() else { return };
            let stalled = kv.stalled;
            let (Some(r), Some(router)) = (kv.replica.as_mut(), kv.router.as_mut()) else {
                return;
            };
            if !stalled {
                for ticket in router.take_reads() {
                    let result = r.read(local, lease);
                    router.read_started(local, ticket, result);
                }
            }
            router.settle(local, r.applied());
            if !self.drain_replica(i) {
                return;
            }
        }
        let Some(kv) = self.hosts[i].kv.as_mut() else { return };
        let Some(router) = kv.router.as_mut() else { return };
        let due = |at: Instant| local >= at + tenure_replica::router::EXPIRY_CHECK_INTERVAL;
        if kv.router_expired_at.is_none_or(due) {
            router.expire(local);
            kv.router_expired_at = Some(local);
        }
        let out = router.take_output();
        self.router_output(i, local, out);
    }

    /// Carries out what node `i`'s router decided.
    fn router_output(&mut self, i: usize, local: Instant, out: RouterOutput) {
        let RouterOutput { answers, forwards, read_replies, .. } = out;
        if !read_replies.is_empty() {
            // The commit index first: the follower serves the read once it
            // applied that far.
            let mut to: Vec<NodeId> = read_replies.iter().map(|&(n, _, _)| n).collect();
            to.sort();
            to.dedup();
            for n in to {
                let r = self.hosts[i].kv.as_mut().and_then(|kv| kv.replica.as_mut());
                if let Some(r) = r {
                    r.update_follower(local, n);
                }
                if !self.drain_replica(i) {
                    return;
                }
            }
        }
        let departs = self.departs(i);
        for (n, id, index) in read_replies {
            self.send_forward(i, n, Forward::ReadIndexReply { id, result: Ok(index) }, departs);
        }
        for (to, frame) in forwards {
            self.send_forward(i, to, frame, departs);
        }
        for (caller, answer) in answers {
            let Some(kv) = self.hosts[i].kv.as_mut() else { return };
            let Some((tag, key)) = kv.callers.remove(&caller) else { continue };
            let body = match (answer, key) {
                (Answer::Write(Ok(c)), _) => ReplyBody::Done(c.result),
                (Answer::Write(Err(WriteError::Unknown(_))), _) => ReplyBody::Unknown,
                (Answer::Read(Ok(_)), Some(key)) => self.read_answer(i, &key),
                // Not carried out: the client tries again.
                _ => ReplyBody::Redirect(None),
            };
            self.answer(i, tag, body, departs);
        }
    }

    /// A replica message reaches node `i`.
    pub(super) fn replica_message(
        &mut self,
        i: usize,
        local: Instant,
        from: NodeId,
        msg: ReplicaMessage,
    ) {
        if let Some(r) = self.hosts[i].kv.as_mut().and_then(|kv| kv.replica.as_mut()) {
            r.handle_message(local, from, msg);
        }
    }

    /// After node `i`'s elector was drained: tells the replica of the
    /// leaderships the elector announced, fires its timer if due, and
    /// handles its output.
    ///
    /// An electorate handed to the elector on the way may make it announce
    /// another leadership (a leader whose removal committed resigns): the
    /// replica is then driven again, a bounded number of times.
    pub(super) fn drive_replica(&mut self, i: usize) {
        for _ in 0..MAX_REPLICA_ROUNDS {
            if !self.drive_replica_once(i) {
                return;
            }
            if self.hosts[i].kv.as_ref().is_none_or(|kv| kv.views.is_empty()) {
                return;
            }
        }
    }

    /// One pass of [`Sim::drive_replica`]; false if the node crashed.
    fn drive_replica_once(&mut self, i: usize) -> bool {
        let local = self.hosts[i].local_now(self.now);
        let views = self.hosts[i].kv.as_mut().map(|kv| std::mem::take(&mut kv.views));
        for (leader, token) in views.unwrap_or_default() {
            let Some(kv) = self.hosts[i].kv.as_mut() else { return false };
            kv.view = (leader, token);
            if let Some(router) = kv.router.as_mut() {
                router.set_view(leader, token);
            }
            if let Some(r) = kv.replica.as_mut() {
                r.set_leadership(local, leader, token);
            }
            if !self.drain_replica(i) {
                return false;
            }
        }
        for _ in 0..MAX_REPLICA_ROUNDS {
            let r = self.hosts[i].kv.as_mut().and_then(|kv| kv.replica.as_mut());
            let Some(r) = r.filter(|r| r.poll_timeout() <= local) else { break };
            r.handle_timeout(local);
            if !self.drain_replica(i) {
                return false;
            }
        }
        if !self.drain_replica(i) {
            return false;
        }
        self.check_state(i);
        self.elect_step(i);
        self.drive_router(i);
        self.groups_step(i);
        self.hosts[i].is_up()
    }

    /// Compares node `i`'s store with any other store at the same applied
    /// index (once per index it reaches).
    fn check_state(&mut self, i: usize) {
        let Some(r) = self.hosts[i].kv.as_ref().and_then(|kv| kv.replica.as_ref()) else {
            return;
        };
        let index = r.applied();
        let Some(kv) = self.kv.as_mut() else { return };
        if !kv.checks.state_due(i, index) {
            return;
        }
        let d = digest(&r.state_machine().store);
        if let Some((check, what)) = kv.checks.on_state(i, index, d) {
            self.checker.fail(self.now, check, what);
        }
    }

    /// Handles node `i`'s replica output by the calling contract. False if
    /// the node crashed (during a log write).
    pub(super) fn drain_replica(&mut self, i: usize) -> bool {
        let now = self.now;
        for _ in 0..MAX_REPLICA_ROUNDS {
            let Some(kv) = self.hosts[i].kv.as_mut() else { return true };
            let Some(r) = kv.replica.as_mut() else { return true };
            let out = r.take_output();
            if out.is_empty() {
                return true;
            }
            if self.cfg.trace {
                eprintln!(
                    "{:>12.3} {:?} replica -> write {:?} send {:?} applied {:?} completions {:?}",
                    now as f64 / 1e6,
                    self.hosts[i].id,
                    out.write,
                    out.messages,
                    out.applied,
                    out.completions
                );
            }
            if let Some(world) = self.kv.as_mut() {
                let mut bad = world.checks.on_output(i, &out.write, &out.applied);
                if let Some(m) = world.members.as_mut() {
                    bad.extend(m.checks.on_output(i, &out.write, &out.applied));
                }
                for (check, what) in bad {
                    self.checker.fail(now, check, what);
                }
            }
            self.elect_applied(i, &out.applied);
            if let Some(token) = out.give_up {
                // The log will not lead under this token: the elector gives
                // it up (the node's log task sends it `Command::GiveUp`).
                if world_planted(self) != Some(PlantedBug::LeadAgainAfterFailedWrite) {
                    let local = self.hosts[i].local_now(now);
                    if let Some(el) = self.hosts[i].elector_mut() {
                        el.give_up_leadership(local, token);
                    }
                    self.drain_elector(i);
                    if !self.hosts[i].is_up() {
                        return false;
                    }
                }
            }
            // A leader's new entries leave before its own write begins.
            for (to, msg) in out.early {
                self.send_replica(i, to, msg, now);
            }
            let records = Record::of(&out.write);
            let Some(world) = self.kv.as_mut() else { return true };
            let host = &mut self.hosts[i];
            let failing = host.storage_failing;
            let local = host.local_now(now);
            let Some(kv) = host.kv.as_mut() else { return true };
            // The node goes on while its writes sync: the replica counts
            // one durable when it hears so (`SimEvent::Persisted`).
            kv.disk.settle(now);
            let mut written = true;
            let departs = if records.is_empty() {
                kv.synced_at.max(now)
            } else if kv.crash_at_write {
                // The node crashes while this write is under way.
                kv.disk.write(now + 1, records);
                self.crash(i);
                return false;
            } else if failing {
                // Part of it may have reached the disk; nothing leaves.
                let keep = world.rng.gen_range(0..=records.len());
                kv.disk.write(now + self.cfg.fsync_ns, records[..keep].to_vec());
                world.stats.failed_writes += 1;
                written = false;
                now
            } else {
                let at = (now + self.cfg.fsync_ns).max(kv.synced_at);
                kv.synced_at = at;
                kv.disk.write(at, records);
                let epoch = kv.electorate_epoch;
                if world.workload.spec.planted == Some(PlantedBug::CountUnsyncedCopy) {
                    if let Some(r) = kv.replica.as_mut() {
                        r.handle_persisted(local, 1);
                    }
                }
                self.schedule(at, SimEvent::Persisted { node: i, epoch });
                at
            };
            if written {
                if let Some(e) = out.electorate {
                    // Durable at `departs`: to the elector before the
                    // messages leave.
                    self.pass_electorate(i, e, departs);
                    if !self.hosts[i].is_up() {
                        return false;
                    }
                }
                for (to, msg) in out.messages {
                    self.send_replica(i, to, msg, departs);
                }
            }
            // Answers need not wait for this node's write: a commit rests on
            // a majority's durable copies, a read on a majority's answers.
            for c in out.completions {
                self.complete(i, c, now);
            }
            if !written {
                let kv = self.hosts[i].kv.as_mut().expect("checked above");
                kv.stalled = true;
                if let Some(r) = kv.replica.as_mut() {
                    r.handle_persist_failed();
                }
                if let Some(router) = kv.router.as_mut() {
                    router.set_rebuilding(true);
                }
            }
        }
        let id = self.hosts[i].id;
        self.checker.fail(
            now,
            Check::ReplicaInvariant,
            format!("{id:?}'s replica kept producing output ({MAX_REPLICA_ROUNDS} rounds)"),
        );
        true
    }

    /// Hands a completion of node `i`'s replica to the application
    /// elections, or else to its router.
    fn complete(&mut self, i: usize, c: Completion, departs: u64) {
        let Some(c) = self.change_complete(i, c) else { return };
        let Some(c) = self.elect_complete(i, c, departs) else { return };
        let Some(c) = self.group_complete(i, c) else { return };
        let local = self.hosts[i].local_at(self.now);
        if let Some(router) = self.hosts[i].kv.as_mut().and_then(|kv| kv.router.as_mut()) {
            router.complete(local, c);
        }
    }

    /// Node `i` crashes now: of its log records still syncing, a random
    /// prefix reaches the disk.
    pub(super) fn tear_log(&mut self, i: usize) {
        let now = self.now;
        let (Some(kv), Some(world)) = (self.hosts[i].kv.as_mut(), self.kv.as_mut()) else {
            return;
        };
        let unsynced = kv.disk.unsynced_records(now);
        if unsynced > 0 {
            world.stats.torn_writes += 1;
        }
        let keep = world.rng.gen_range(0..=unsynced);
        kv.disk.crash(now, keep);
        world.checks.on_crash(i);
        if self.cfg.trace && unsynced > 0 {
            eprintln!(
                "{:>12.3} FAULT n{} log torn: {keep} of {unsynced} unsynced records kept",
                now as f64 / 1e6,
                i + 1
            );
        }
    }

    /// An output of node `i`'s replica carried `e`; its write is durable at
    /// `durable_ns` (now or later), when `e` goes to the elector, before
    /// the output's messages leave (unless a planted bug hands it late, or
    /// never).
    fn pass_electorate(&mut self, i: usize, e: Electorate, durable_ns: u64) {
        let at = match world_planted(self) {
            Some(PlantedBug::ElectorateNever) => return,
            Some(PlantedBug::ElectorateLate) => {
                // After the messages left: they arrive within the longest
                // delay of the network.
                let et = dur_ns(self.cfg.election_timeout);
                durable_ns + self.net.max_delay_ns() + LATE_ELECTORATE_TIMEOUTS * et
            }
            _ => durable_ns,
        };
        let Some(kv) = self.hosts[i].kv.as_mut() else { return };
        kv.electorate_seq += 1;
        let (epoch, seq) = (kv.electorate_epoch, kv.electorate_seq);
        if at <= self.now {
            self.electorate_due(i, epoch, seq, e);
        } else {
            self.schedule(at, SimEvent::Electorate { node: i, epoch, seq, electorate: e });
        }
    }

    /// An electorate of node `i`'s replica is due at the elector: handed
    /// unless the replica was rebuilt since (`epoch`) or a newer one was
    /// handed already (`seq`). True if it was handed.
    fn electorate_due(&mut self, i: usize, epoch: u64, seq: u64, e: Electorate) -> bool {
        if !self.hosts[i].is_up() {
            return false;
        }
        let Some(kv) = self.hosts[i].kv.as_mut() else { return false };
        if kv.electorate_epoch != epoch || seq <= kv.electorate_handed {
            return false;
        }
        kv.electorate_handed = seq;
        self.hand_electorate(i, e)
    }

    /// The event of an electorate whose write became durable: handed, then
    /// the node's replica and timer go on as after any input (a paused
    /// node's resume does that: the output's handling had begun before the
    /// pause, as its messages, already on their way, show).
    pub(super) fn electorate_arrives(&mut self, i: usize, epoch: u64, seq: u64, e: Electorate) {
        if self.electorate_due(i, epoch, seq, e) && !self.hosts[i].paused {
            self.drive_replica(i);
            self.rearm(i);
        }
    }

    /// A log write of node `i` is durable: its replica hears so, unless it
    /// was rebuilt since (`epoch`). A paused node's replica hears it now
    /// and what that produces waits in it until the node resumes.
    pub(super) fn persisted(&mut self, i: usize, epoch: u64) {
        if !self.hosts[i].is_up() {
            return;
        }
        if world_planted(self) == Some(PlantedBug::CountUnsyncedCopy) {
            return; // Reported when issued.
        }
        let local = self.hosts[i].local_now(self.now);
        let Some(kv) = self.hosts[i].kv.as_mut() else { return };
        if kv.electorate_epoch != epoch {
            return;
        }
        let Some(r) = kv.replica.as_mut() else { return };
        r.handle_persisted(local, 1);
        if !self.hosts[i].paused {
            self.drive_replica(i);
            self.rearm(i);
        }
    }

    /// Hands `e` to node `i`'s elector and handles the elector's output.
    /// Nothing is handed when the elector counts over `e` already. True if
    /// it was handed.
    pub(super) fn hand_electorate(&mut self, i: usize, e: Electorate) -> bool {
        let now = self.now;
        let host = &mut self.hosts[i];
        let id = host.id;
        let local = host.local_now(now);
        let Some(el) = host.elector_mut() else { return false };
        if *el.electorate() == e {
            return false;
        }
        if el.is_leader(local) {
            let term = el.hard_state().term;
            self.checker.on_input_as_leader(now, id, term);
        }
        if self.cfg.trace {
            eprintln!("{:>12.3} {id:?} local {local:?} <- electorate {e}", now as f64 / 1e6);
        }
        let Some(el) = self.hosts[i].elector_mut() else { return false };
        el.handle_electorate(local, e);
        self.drain_elector(i);
        true
    }

    /// Builds node `i`'s replica from its disk (at start, after a restart,
    /// or once storage works again after a failed write).
    pub(super) fn rebuild_replica(&mut self, i: usize) {
        let id = self.hosts[i].id;
        let incarnation = self.hosts[i].incarnation;
        let directory = Some(self.hosts[i].directory);
        // A node that joins bootstraps with the voters its elector has.
        let voters = self.hosts[i].cfg.voters.clone();
        let (Some(world), Some(kv)) = (self.kv.as_mut(), self.hosts[i].kv.as_mut()) else {
            return;
        };
        let cfg = Config { id, voters, directory, ..world.template.clone() };
        let mut router_cfg = RouterConfig::new(id, self.cfg.heartbeat, self.cfg.election_timeout);
        // Each life numbers its forwarded requests from its own place (as a
        // node's random start): an answer of an earlier life's request
        // cannot answer this one's.
        router_cfg.first_id = incarnation << 40;
        let store = SimStore::new(id, world.workload.spec.planted);
        let rebuilt_after_failure = kv.stalled;
        if kv.stalled {
            world.stats.rebuilds += 1;
        }
        kv.stalled = false;
        let router = kv.router.get_or_insert_with(|| Router::new(router_cfg));
        router.set_rebuilding(false);
        kv.forget_leadership();
        let restored = log_store_replay(kv.disk.image().restored(), world.workload.spec.planted);
        kv.electorate_epoch += 1;
        kv.electorate_handed = kv.electorate_seq;
        // A replica rebuilt after a failed write (not after a crash: that
        // forgets everything) keeps its predecessor's fence.
        let fence = match (&kv.replica, rebuilt_after_failure) {
            (Some(old), true) => old.lead_fence(),
            _ => tenure_core::FencingToken(0),
        };
        match Replica::new(cfg, restored.clone(), store) {
            Ok(mut r) => {
                r.set_lead_fence(fence);
                world.checks.on_start(i, r.applied());
                let mut bad = Vec::new();
                if let Some(m) = world.members.as_mut() {
                    bad = m.checks.on_start(i, &restored, r.applied());
                }
                let electorate = r.electorate();
                kv.replica = Some(r);
                // Tell the new replica the elector's current view.
                let view = kv.view;
                if view != (None, None) {
                    kv.views.push(view);
                }
                for (check, what) in bad {
                    self.checker.fail(self.now, check, what);
                }
                // Before the elector takes any other input.
                if world_planted(self) != Some(PlantedBug::ElectorateNever) {
                    self.hand_electorate(i, electorate);
                }
                self.check_state(i);
            }
            Err(e) => {
                kv.replica = None;
                let what = format!("n{} cannot start its replica from its log: {e}", i + 1);
                self.checker.fail(self.now, Check::ReplicaInvariant, what);
            }
        }
    }
}

/// The planted bug of the run, if any.
fn world_planted(sim: &Sim) -> Option<PlantedBug> {
    sim.kv.as_ref().and_then(|k| k.workload.spec.planted)
}

/// What the log store gives back at a (re)start: the disk's image, unless a
/// planted bug of the log store changes it.
fn log_store_replay(mut restored: Restored, planted: Option<PlantedBug>) -> Restored {
    match planted {
        Some(PlantedBug::SnapshotForgetsMembers) if restored.snapshot.is_some() => {
            restored.membership = None;
        }
        Some(PlantedBug::ReplayDropsMembers) => {
            for e in &mut restored.entries {
                if matches!(e.payload, Payload::Members(_)) {
                    e.payload = Payload::Noop;
                }
            }
        }
        _ => {}
    }
    restored
}

/// The token the replica leads ready under, as the router is told after
/// every output (none while its log is being rebuilt).
fn ready_token(r: &Replica<SimStore>, stalled: bool) -> Option<tenure_core::FencingToken> {
    if stalled || !r.is_ready_leader() {
        None
    } else {
        r.status().leading
    }
}
