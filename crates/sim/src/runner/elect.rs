//! The nodes' side of the application elections: each node's
//! [`tenure_kv::LeaseKeeper`] beside its replica, renewals and range reads
//! served as linearizable reads, expiries proposed by the ready leader.
//!
//! * As the replica's ready leader of token `T` (R1, first half), the
//!   keeper leads for `T` (when `T` is new: what is left of a silent
//!   lease's TTL, a fresh TTL for any other); as anything else it follows.
//!   It is brought in step before every use. As the ready leader it
//!   proposes the checkpoints its keeper takes (silent leases, the lease
//!   time, and the clears a renewal of a silent lease waits for: R4, the
//!   client asks again meanwhile), and the deadline ledger
//!   ([`crate::elect_deadlines`]) checks every expiry's first proposal.
//! * A renewal reaching a node that is not the ready leader is answered
//!   with the leader it knows (the client retries there: forwarding, as
//!   the key-value workload models it). At the ready leader it waits as a
//!   linearizable read does (R2: at once under a valid election lease of
//!   the token the replica leads, else after a confirmation round sent
//!   after it arrived), then the keeper answers it (R1's second half, R3).
//! * Expiries the keeper finds due are proposed on that replica only
//!   (never forwarded; refused if it no longer leads), a chunk as one
//!   `ExpireMany` entry, while another chunk fits under
//!   [`MAX_EXPIRIES_IN_FLIGHT`] (as the server's sessions service does);
//!   one that fails while the node still leads is given back to the keeper
//!   ([`LeaseKeeper::retry`]).
//! * Every expiry proposed, and every entry applied, goes to the ledger of
//!   stale expiries ([`crate::elect_stale`]), which counts those adopted by
//!   a later leadership and those lost, and tells the apps which expiries
//!   committed (the check that no session expired while its holder still
//!   trusted it).
//!
//! [`LeaseKeeper::retry`]: tenure_kv::LeaseKeeper::retry
//! [`MAX_EXPIRIES_IN_FLIGHT`]: tenure_kv::MAX_EXPIRIES_IN_FLIGHT

use super::{dur_ns, Sim};
use crate::checker::Check;
use crate::elect::ElectBug;
use crate::kvnode::ElectRead;
use crate::partitions::PartitionsBug;
use crate::workload::{ReplyBody, RequestBody, Tag, WorkloadSpec};
use tenure_core::{FencingToken, Instant, NodeId};
use tenure_kv::{Command, LeaseId, RenewError, Response, ELECTIONS_PREFIX};
use tenure_partitions::group::GROUPS_PREFIX;
use tenure_replica::{Completion, Position, ProposalError, ReadError, ReadStart};

impl Sim {
    fn elect_bug(&self) -> Option<ElectBug> {
        self.kv.as_ref()?.elect.as_ref()?.spec.planted
    }

    /// Whether app sessions run (application elections or groups of
    /// partitions): the lease keepers then answer renewals and expire.
    fn sessions_run(&self) -> bool {
        self.kv.as_ref().is_some_and(|k| k.elect.is_some() || k.parts.is_some())
    }

    /// Brings node `i`'s lease keeper in step with its replica: it leads
    /// for the token the replica leads while that replica is the ready
    /// leader, and follows otherwise.
    fn sync_keeper(&mut self, i: usize, local: Instant) {
        let now = self.now;
        let Some(kv) = self.hosts[i].kv.as_mut() else { return };
        let ready = kv.replica.as_ref().filter(|r| !kv.stalled && r.is_ready_leader());
        let Some(r) = ready else {
            kv.keeper.follow();
            return;
        };
        let Some(token) = r.status().leading else {
            kv.keeper.follow();
            return;
        };
        let store = &r.state_machine().store;
        let before = kv.keeper.token();
        if let Err(e) = kv.keeper.lead(local, token.0, store) {
            kv.keeper.follow();
            let what = format!("n{}'s lease keeper is out of step with its store: {e}", i + 1);
            self.checker.fail(now, Check::ReplicaInvariant, what);
        } else if before != Some(token.0) {
            if let Some(w) = self.kv.as_mut() {
                w.deadlines.leader_started(|id| store.silence(id).is_some());
            }
        }
    }

    /// A range read or renewal reaches node `i` (its replica runs). The
    /// answer now, or `None` when it waits for a read round.
    pub(super) fn elect_request(
        &mut self,
        i: usize,
        local: Instant,
        tag: Tag,
        body: RequestBody,
        lease: Option<FencingToken>,
        known: Option<NodeId>,
    ) -> Option<ReplyBody> {
        let what = match body {
            RequestBody::Range { prefix } => ElectRead::Range(prefix),
            RequestBody::Renew { lease } => ElectRead::Renew(lease),
            RequestBody::Write(_) | RequestBody::Read { .. } | RequestBody::Group(_) => {
                return None
            }
        };
        let kv = self.hosts[i].kv.as_mut()?;
        let r = kv.replica.as_mut()?;
        match r.read(local, lease) {
            Ok(ReadStart::Now(_)) => Some(self.elect_answer(i, local, what, known)),
            Ok(ReadStart::Pending(id)) => {
                kv.elect_reads.insert(id, (tag, what));
                None
            }
            Err(ReadError::NotLeader { leader }) => Some(ReplyBody::Redirect(leader)),
        }
    }

    /// The answer of node `i` to `what`, its read round confirmed (or its
    /// lease valid).
    fn elect_answer(
        &mut self,
        i: usize,
        local: Instant,
        what: ElectRead,
        known: Option<NodeId>,
    ) -> ReplyBody {
        let bug = self.elect_bug();
        let wrapping_epochs = self.partitions_bug() == Some(PartitionsBug::WrappingEpochs);
        self.sync_keeper(i, local);
        let me = self.hosts[i].id;
        let Some(kv) = self.hosts[i].kv.as_mut() else { return ReplyBody::Redirect(known) };
        let Some(r) = kv.replica.as_ref() else { return ReplyBody::Redirect(known) };
        let store = &r.state_machine().store;
        match what {
            ElectRead::Range(prefix) => {
                let (mut kvs, _) = store.range(&prefix, tenure_kv::MAX_RANGE);
                if bug == Some(ElectBug::WrappingTokens) {
                    for kv in kvs.iter_mut().filter(|kv| kv.key.starts_with(ELECTIONS_PREFIX)) {
                        kv.create_revision %= 8;
                    }
                }
                if wrapping_epochs {
                    let owners = |k: &str| k.starts_with(GROUPS_PREFIX) && k.contains("/owners/");
                    for kv in kvs.iter_mut().filter(|kv| owners(&kv.key)) {
                        kv.create_revision %= 8;
                    }
                }
                ReplyBody::Range { kvs, revision: store.revision() }
            }
            ElectRead::Renew(id) => {
                let answer = kv.keeper.renew(local, id, store);
                match answer {
                    Ok(ttl) => {
                        if let Some(w) = self.kv.as_mut() {
                            w.deadlines.renewed(id, self.now);
                        }
                        ReplyBody::Renewed { ttl_ms: ttl.as_millis() as u64 }
                    }
                    Err(RenewError::Silent(_)) if bug == Some(ElectBug::RenewSilent) => {
                        let ttl_ms = store.lease(id).map_or(0, |l| l.ttl_ms);
                        if let Some(w) = self.kv.as_mut() {
                            w.deadlines.renewed(id, self.now);
                        }
                        ReplyBody::Renewed { ttl_ms }
                    }
                    // R4: the next checkpoint clears it; the client asks
                    // again here (as a busy answer makes tenure's client).
                    Err(RenewError::Silent(id)) => {
                        kv.clears_wanted.insert(id);
                        ReplyBody::Redirect(Some(me))
                    }
                    Err(RenewError::NotLeader) => ReplyBody::Redirect(known),
                    Err(RenewError::NotFound(_) | RenewError::Expiring(_))
                        if bug == Some(ElectBug::RenewEndedSessions) =>
                    {
                        ReplyBody::Renewed { ttl_ms: 0 }
                    }
                    Err(RenewError::NotFound(id) | RenewError::Expiring(id)) => {
                        if let Some(w) = self.kv.as_mut() {
                            if let Some(e) = w.elect.as_mut() {
                                e.stats.renewals_refused += 1;
                            }
                            if let Some(p) = w.parts.as_mut() {
                                p.stats.renewals_refused += 1;
                            }
                        }
                        ReplyBody::SessionGone(id)
                    }
                }
            }
        }
    }

    /// Handles a completion of node `i` that belongs to the elections (an
    /// expiry, a range read or a renewal); gives back any other.
    pub(super) fn elect_complete(
        &mut self,
        i: usize,
        c: Completion,
        departs: u64,
    ) -> Option<Completion> {
        let local = self.hosts[i].local_at(self.now);
        let kv = self.hosts[i].kv.as_mut()?;
        match c {
            Completion::Proposal { id, result } => {
                if let Some(clears) = kv.checkpoints.remove(&id) {
                    match result {
                        Ok(_) => kv.keeper.cleared(&clears),
                        Err(_) => kv.keeper.clear_failed(&clears),
                    }
                    return None;
                }
                let Some(leases) = kv.expiries.remove(&id) else {
                    return Some(Completion::Proposal { id, result });
                };
                match result {
                    Ok((_, bytes)) => {
                        let ended = match Response::decode(&bytes) {
                            Ok(Response::LeasesExpired { leases, .. }) => leases.len() as u64,
                            _ => 0,
                        };
                        if let Some(w) = self.kv.as_mut() {
                            if let Some(e) = w.elect.as_mut() {
                                e.stats.expiries += ended;
                            }
                            if let Some(p) = w.parts.as_mut() {
                                p.stats.expiries += ended;
                            }
                        }
                    }
                    // Leadership lost: the keeper follows at its next sync.
                    Err(ProposalError::NotLeader { .. }) => {}
                    // It may still commit: due again later, still refused.
                    Err(ProposalError::Unknown | ProposalError::StorageFailed) => {
                        for lease in leases {
                            kv.keeper.retry(local, lease);
                        }
                    }
                }
                None
            }
            Completion::Read { id, result } => {
                let Some((tag, what)) = kv.elect_reads.remove(&id) else {
                    return Some(Completion::Read { id, result });
                };
                let body = match result {
                    Ok(_) => self.elect_answer(i, local, what, None),
                    Err(ReadError::NotLeader { leader }) => ReplyBody::Redirect(leader),
                };
                self.answer(i, tag, body, departs);
                None
            }
        }
    }

    /// After node `i`'s replica output was handled: as the ready leader,
    /// proposes the expiries its keeper finds due, within the bound.
    pub(super) fn elect_step(&mut self, i: usize) {
        if !self.sessions_run() {
            return;
        }
        let local = self.hosts[i].local_at(self.now);
        self.sync_keeper(i, local);
        self.follow_deadlines(i);
        if self.elect_bug() != Some(ElectBug::NoCheckpoints) {
            self.propose_checkpoint(i, local);
        }
        if self.elect_bug() == Some(ElectBug::NoExpiries) {
            return;
        }
        let Some(kv) = self.hosts[i].kv.as_mut() else { return };
        let Some(r) = kv.replica.as_mut() else { return };
        if kv.keeper.token().is_none() || kv.keeper.next_deadline().is_none_or(|d| d > local) {
            return;
        }
        if !kv.keeper.room_for_expiries() {
            return;
        }
        let leases = kv.keeper.due(local, &r.state_machine().store);
        if leases.is_empty() {
            return;
        }
        if kv.stalled {
            kv.keeper.follow();
            return;
        }
        // One log entry for the chunk, as the node's sessions service does.
        let cmd = Command::ExpireMany { leases: leases.clone() }.encode();
        match r.propose(local, vec![cmd]).pop() {
            Some(Ok(id)) => {
                if let Some(w) = self.kv.as_mut() {
                    for what in w.deadlines.expiry_proposed(&leases, self.now) {
                        self.checker.fail(self.now, Check::SessionOverrun, what);
                    }
                    if let Some(e) = w.elect.as_mut() {
                        e.stats.expiries_checked = w.deadlines.checked;
                        e.stats.max_overrun_permille = w.deadlines.worst_permille();
                    }
                }
                // The entry just appended: the last of the log.
                let pos = r.status().last;
                if let Some(e) = self.kv.as_mut().and_then(|k| k.elect.as_mut()) {
                    e.expiry_proposed(pos, &leases);
                }
                kv.expiries.insert(id, leases);
            }
            Some(Err(_)) | None if r.is_ready_leader() => {
                for lease in leases {
                    kv.keeper.retry(local, lease);
                }
            }
            Some(Err(_)) | None => kv.keeper.follow(),
        }
        self.drain_replica(i);
    }

    /// After every event: whether some node is the ready leader, for the
    /// deadline ledger's time without one (a paused leader proposes
    /// nothing, so it does not count).
    pub(super) fn sample_leadership(&mut self) {
        if !self.sessions_run() {
            return;
        }
        let now = self.now;
        let leader = self.hosts.iter().find(|h| {
            !h.paused
                && h.kv.as_ref().is_some_and(|kv| {
                    !kv.stalled && kv.replica.as_ref().is_some_and(|r| r.is_ready_leader())
                })
        });
        // It has leases due and its expiries in flight are at their bound.
        let queueing = leader.is_some_and(|h| {
            h.kv.as_ref().is_some_and(|kv| {
                let k = &kv.keeper;
                k.token().is_some()
                    && !k.room_for_expiries()
                    && k.next_deadline().is_some_and(|d| d <= h.local_at(now))
            })
        });
        let leader = leader.is_some();
        if let Some(w) = self.kv.as_mut() {
            w.deadlines.sample(now, leader);
            w.deadlines.sample_queueing(now, queueing);
        }
    }

    /// The deadline ledger looks at node `i`'s store for new grants.
    fn follow_deadlines(&mut self, i: usize) {
        let now = self.now;
        let Some(w) = self.kv.as_mut() else { return };
        let Some(r) = self.hosts[i].kv.as_ref().and_then(|kv| kv.replica.as_ref()) else { return };
        let store = &r.state_machine().store;
        w.deadlines.granted(store.last_lease().0, now, |id| store.lease(id).map(|l| l.ttl_ms));
    }

    /// As the ready leader, node `i` proposes the lease checkpoint its
    /// keeper has to take (the silent leases, the clears wanted, the lease
    /// time), through its own log only.
    fn propose_checkpoint(&mut self, i: usize, local: Instant) {
        let Some(kv) = self.hosts[i].kv.as_mut() else { return };
        let Some(r) = kv.replica.as_mut() else { return };
        // One checkpoint in flight at most, as the server's sessions
        // service: the clears wanted meanwhile wait for the next one. (One
        // per renewal of a silent lease flooded the log with 83,726
        // checkpoints in two runs of 10,000 sessions, and expiries queued
        // behind them overran their bound 93 times.)
        if kv.keeper.token().is_none() || kv.stalled || !kv.checkpoints.is_empty() {
            return;
        }
        let wanted: Vec<LeaseId> = std::mem::take(&mut kv.clears_wanted).into_iter().collect();
        if wanted.is_empty() && kv.keeper.next_checkpoint().is_none_or(|at| at > local) {
            return;
        }
        let Some(c) = kv.keeper.checkpoint(local, &wanted, &r.state_machine().store) else {
            return;
        };
        let clears = c.renewed.clone();
        match r.propose(local, vec![Command::Checkpoint(c).encode()]).pop() {
            Some(Ok(id)) => {
                kv.checkpoints.insert(id, clears);
                if let Some(e) = self.kv.as_mut().and_then(|k| k.elect.as_mut()) {
                    e.stats.checkpoints += 1;
                }
            }
            _ => kv.keeper.clear_failed(&clears),
        }
        self.drain_replica(i);
    }

    /// Node `i` applied `batch` (one output of its replica): the stale
    /// expiries it decides are counted (and traced), and the expiries that
    /// commit are checked against their holders' deadlines.
    pub(super) fn elect_applied(&mut self, i: usize, batch: &[Position]) {
        let now = self.now;
        let Some(e) = self.kv.as_mut().and_then(|k| k.elect.as_mut()) else { return };
        let (stale, early) = e.entries_applied(batch, now);
        for stale in stale {
            if self.cfg.trace {
                let (now, id) = (now as f64 / 1e6, self.hosts[i].id);
                eprintln!("{now:>12.3} {id:?} stale expiry {stale:?}");
            }
        }
        for what in early {
            self.checker.fail(now, Check::SessionEarlyExpiry, what);
        }
    }

    /// When node `i`'s timer must fire for its lease keeper: its next
    /// deadline, unless no more expiries fit in flight (an applied one
    /// makes room, and [`Sim::elect_step`] runs after every output).
    pub(super) fn keeper_deadline(&self, i: usize) -> Option<Instant> {
        if self.elect_bug() == Some(ElectBug::NoExpiries) {
            return None;
        }
        let keeper = &self.hosts[i].kv.as_ref()?.keeper;
        let expiry = keeper.room_for_expiries().then(|| keeper.next_deadline()).flatten();
        let in_flight = !self.hosts[i].kv.as_ref()?.checkpoints.is_empty();
        let checkpoint = match self.elect_bug() {
            Some(ElectBug::NoCheckpoints) => None,
            // Its answer proposes the next one.
            _ if in_flight => None,
            _ => keeper.next_checkpoint(),
        };
        expiry.into_iter().chain(checkpoint).min()
    }

    /// The faults healed: the apps' own faults end too.
    pub(super) fn settle_elections(&mut self) {
        let now = self.now;
        let Some(e) = self.kv.as_mut().and_then(|k| k.elect.as_mut()) else { return };
        let actions = e.settle(now);
        self.do_actions(actions);
    }

    /// How long after healing every name with a live candidate must have a
    /// holder: the protocol's liveness bound (a ready tenure leader), a TTL
    /// stretched by the drift bound both ways (the dead holder's session
    /// expires on the new leader's clock), two request timeouts (the
    /// expiry commits, a waiter's poll and read, or a restarted app's grant
    /// and campaign behind it), and for each node that cannot serve (see
    /// [`Sim::unserving_nodes`]) a request timeout, the longest pause
    /// between two requests and a round trip: an app walks its nodes in
    /// turn, as tenure's client walks its endpoints, and waits a request
    /// timeout at each such node before it tries the next.
    pub fn election_liveness_bound(&self) -> u64 {
        let Some(e) = self.kv.as_ref().and_then(|k| k.elect.as_ref()) else { return 0 };
        let drift = u64::from(self.hosts[0].cfg.clock_drift_ppm);
        let ttl = e.spec.ttl_ns() * (1_000_000 + drift) / (1_000_000 - drift);
        let op_timeout = WorkloadSpec::op_timeout(dur_ns(self.cfg.election_timeout));
        let hop = op_timeout + crate::elect::POLL_NS.1 + 2 * crate::elect::LATENCY_NS.1;
        let walk = self.unserving_nodes() as u64;
        dur_ns(self.liveness_bound()) + ttl + 2 * op_timeout + walk * hop
    }

    /// Nodes that answer no request after healing: down (a node retired for
    /// good stays down), or up but no member of the newest committed
    /// configuration (a wiped node back as a spare knows no leader and
    /// holds what it gets). Without member changes every node serves.
    pub fn unserving_nodes(&self) -> usize {
        let members = self.committed_configuration().map(|m| {
            m.members.voter_ids().chain(m.members.learners.iter().map(|l| l.id)).collect::<Vec<_>>()
        });
        self.hosts
            .iter()
            .filter(|h| !h.is_up() || members.as_ref().is_some_and(|m| !m.contains(&h.id)))
            .count()
    }

    /// Runs until the election liveness bound after healing and checks that
    /// every name with a live candidate has a holder then.
    pub(super) fn elect_liveness(&mut self) {
        let bound = self.election_liveness_bound();
        let Some(e) = self.kv.as_ref().and_then(|k| k.elect.as_ref()) else { return };
        let Some(healed) = e.settled_at else { return };
        self.run_until(healed + bound);
        let Some(e) = self.kv.as_mut().and_then(|k| k.elect.as_mut()) else { return };
        let starved = e.names_without_holder();
        e.stats.starved_names += starved.len() as u64;
        for n in starved {
            let what = format!(
                "{}: a live candidate and no holder {:.0} ms after healing",
                crate::elect::election_name(n),
                bound as f64 / 1e6
            );
            self.checker.fail(self.now, Check::ElectionStarvation, what);
        }
    }

    /// Checks every leadership of the run (no overlap, tokens increasing)
    /// and files the counts.
    pub(super) fn elect_check(&mut self) {
        let now = self.now;
        let Some(e) = self.kv.as_mut().and_then(|k| k.elect.as_mut()) else { return };
        let violations = e.check(now);
        self.stats.elect = Some(e.stats);
        for (check, what) in violations {
            self.checker.fail(now, check, what);
        }
    }

    /// The application elections, when they run.
    pub fn elections(&self) -> Option<&crate::elect::Elections> {
        self.kv.as_ref()?.elect.as_ref()
    }
}
