//! The changes of members inside the event loop (see [`crate::membership`]):
//! the operator's look at the cluster and its proposals on the ready
//! leader, removed nodes retired (crashed for good, wiped) and wiped nodes
//! brought back as spares, and the convergence check after healing.

use super::Sim;
use crate::checker::Check;
use crate::host::directory_of;
use crate::membership::{joining_voters, member_address, ChangeKind, MembershipStats, Timed};
use crate::workload::PlantedBug;
use tenure_core::{Config, Electorate, NodeId, Term};
use tenure_replica::{Change, ChangeError, Completion, Member, Members, Membership};

impl Sim {
    /// True when the run changes members.
    pub fn membership_runs(&self) -> bool {
        self.kv.as_ref().is_some_and(|k| k.members.is_some())
    }

    /// When the operator next looks at the cluster, if the run changes members.
    pub fn next_operator_tick(&self) -> Option<u64> {
        Some(self.kv.as_ref()?.members.as_ref()?.operator.next_tick())
    }

    /// The operator looks at the cluster now: it retires the removed nodes
    /// whose time came and brings back wiped ones, then, on the ready
    /// leader, once the last change has committed, proposes the next one
    /// (if it chooses one).
    pub fn operate(&mut self) {
        let now = self.now;
        let Some(m) = self.kv.as_mut().and_then(|k| k.members.as_mut()) else { return };
        m.operator.ticked(now);
        for t in m.operator.due(now) {
            match t {
                Timed::Retire(id) => self.retire(id),
                Timed::Rejoin(id) => self.rejoin(id),
            }
        }
        let Some(l) = self.change_leader() else { return };
        let Some(r) = self.hosts[l].kv.as_ref().and_then(|kv| kv.replica.as_ref()) else { return };
        let st = r.status();
        if st.membership.at.index > st.commit {
            // One change at a time: the last one has not committed.
            return;
        }
        if let Some(m) = self.kv.as_mut().and_then(|k| k.members.as_mut()) {
            m.operator.observe(now, &st.membership);
        }
        let committed = st.membership.members;
        // After the look: a member that just left is no spare.
        let spares = self.spares(&committed);
        let Some(m) = self.kv.as_mut().and_then(|k| k.members.as_mut()) else { return };
        let Some(change) = m.operator.choose(&committed, &spares) else { return };
        let result = self.propose_change(l, &change).map(|_| ());
        if let Some(m) = self.kv.as_mut().and_then(|k| k.members.as_mut()) {
            m.operator.proposed(&result);
        }
    }

    /// The node the operator proposes to: the ready leader of the log (of
    /// the highest token, should a deposed one not know yet), running and
    /// not paused. With the planted [`PlantedBug::UngatedChanges`], a
    /// leader that has not committed its first entry yet is preferred.
    fn change_leader(&self) -> Option<usize> {
        let ungated = self.kv.as_ref().and_then(|k| k.workload.spec.planted)
            == Some(PlantedBug::UngatedChanges);
        (0..self.hosts.len())
            .filter(|&i| self.hosts[i].is_up() && !self.hosts[i].paused)
            .filter_map(|i| {
                let kv = self.hosts[i].kv.as_ref().filter(|kv| !kv.stalled)?;
                let r = kv.replica.as_ref()?;
                let token = r.leading()?;
                let early = !r.is_ready_leader();
                (ungated || !early).then_some((early, token, i))
            })
            .max()
            .map(|(_, _, i)| i)
    }

    /// The running nodes that may join: neither members of `committed`,
    /// nor removed and waiting to be retired, nor retired.
    fn spares(&self, committed: &Members) -> Vec<Member> {
        let Some(op) = self.kv.as_ref().and_then(|k| k.members.as_ref()).map(|m| &m.operator)
        else {
            return Vec::new();
        };
        self.hosts
            .iter()
            .filter(|h| h.is_up() && !h.retired && committed.get(h.id).is_none())
            .filter(|h| !op.is_lingering(h.id))
            .map(|h| Member {
                id: h.id,
                address: member_address(h.id),
                directory: Some(h.directory),
                auto_promote: false,
            })
            .collect()
    }

    /// Proposes `change` on node `i`'s replica (`Replica::propose_change`)
    /// and handles its output.
    pub fn propose_change(&mut self, i: usize, change: &Change) -> Result<u64, ChangeError> {
        let now = self.now;
        let trace = self.cfg.trace;
        // The directories the leader knows: those of the nodes up now (a
        // real node knows its peers' from their handshakes).
        let known: Vec<(NodeId, tenure_core::DirectoryId)> =
            self.hosts.iter().filter(|h| h.is_up()).map(|h| (h.id, h.directory)).collect();
        let host = &mut self.hosts[i];
        let id = host.id;
        let local = host.local_now(now);
        let r = host.kv.as_mut().filter(|kv| !kv.stalled).and_then(|kv| kv.replica.as_mut());
        let Some(r) = r else { return Err(ChangeError::NotLeader { leader: None }) };
        r.note_directories(known);
        let result = r.propose_change(local, change);
        if let (Ok(p), Some(kv)) = (&result, host.kv.as_mut()) {
            kv.changes.insert(*p, change.clone());
        }
        if trace {
            eprintln!(
                "{:>12.3} {id:?} local {local:?} <- change {change}: {result:?}",
                now as f64 / 1e6
            );
        }
        // The output first (the change's entry, durable before the replica
        // takes another input), then on as after any input.
        if self.drain_replica(i) && !self.hosts[i].paused {
            self.drive_replica(i);
            self.rearm(i);
        }
        result
    }

    /// A completion of node `i` that answers a change it proposed is
    /// consumed (what committed is read from the logs); any other is given
    /// back.
    pub(super) fn change_complete(&mut self, i: usize, c: Completion) -> Option<Completion> {
        let kv = self.hosts[i].kv.as_mut()?;
        match c {
            Completion::Proposal { id, result } if kv.changes.contains_key(&id) => {
                let change = kv.changes.remove(&id);
                if self.cfg.trace {
                    let now = self.now as f64 / 1e6;
                    let node = self.hosts[i].id;
                    eprintln!("{now:>12.3} {node:?} change {change:?}: {result:?}");
                }
                None
            }
            other => Some(other),
        }
    }

    /// Node `id`, removed, is crashed for good and its disk wiped: it stays
    /// down until it joins again ([`Sim::rejoin`]).
    pub fn retire(&mut self, id: NodeId) {
        let Some(i) = self.index_of(id) else { return };
        self.trace_fault(&format!("retire n{} (removed): crashed for good, disk wiped", i + 1));
        self.crash(i);
        let joining = self.joining_config(id);
        self.hosts[i].wipe(self.now, joining);
        self.checker.on_wipe(i, id);
        let now = self.now;
        if let Some(m) = self.kv.as_mut().and_then(|k| k.members.as_mut()) {
            m.operator.retired(now, id);
        }
    }

    /// Node `id`, retired, comes back with an empty disk and a new
    /// data-directory identity, as a node that joins: a spare until a
    /// configuration names it again.
    pub fn rejoin(&mut self, id: NodeId) {
        let Some(i) = self.index_of(id).filter(|&i| self.hosts[i].retired) else { return };
        self.trace_fault(&format!("n{} joins again, directory {}", i + 1, self.hosts[i].directory));
        self.hosts[i].retired = false;
        self.restart(i);
        if let Some(m) = self.kv.as_mut().and_then(|k| k.members.as_mut()) {
            m.operator.stats.rejoins += 1;
        }
    }

    /// The elector settings of node `id` joining the cluster: the bootstrap
    /// voters without itself.
    fn joining_config(&self, id: NodeId) -> Config {
        let voters = joining_voters(&self.cfg.bootstrap(), id);
        Config { voters, ..self.cfg.core_config(id) }
    }

    /// The newest configuration committed in the run (what the checks saw
    /// committed on any node, the bootstrap list before the first change),
    /// if the run changes members: the members the running replicas must
    /// converge on, and the voters a majority of which healing keeps up.
    /// (What the running replicas know committed may be older: a node's
    /// commit index starts from its snapshot after a restart, and healing
    /// that kept a majority of such a stale list up could keep the only
    /// voter of the newest configuration down.)
    pub fn committed_configuration(&self) -> Option<Membership> {
        Some(self.kv.as_ref()?.members.as_ref()?.checks.newest_committed())
    }

    /// The voters of the newest configuration committed in the run: `None`
    /// unless the run changes members (every node votes then).
    pub fn converging_voters(&self) -> Option<Vec<NodeId>> {
        let m = self.committed_configuration()?;
        Some(m.members.voter_ids().collect())
    }

    /// The voter lists of every configuration that may be in force: the
    /// newest committed one and each newer one a running node's log holds
    /// (appended, not committed: it may still commit, and the nodes that
    /// hold it count by it). `None` unless the run changes members.
    pub fn configurations_in_play(&self) -> Option<Vec<Vec<NodeId>>> {
        let committed = self.committed_configuration()?;
        let mut out = vec![committed.members.voter_ids().collect::<Vec<_>>()];
        for h in self.hosts.iter().filter(|h| h.is_up()) {
            let Some(r) = h.kv.as_ref().filter(|kv| !kv.stalled).and_then(|kv| kv.replica.as_ref())
            else {
                continue;
            };
            let m = r.membership();
            if m.at > committed.at {
                let voters: Vec<NodeId> = m.members.voter_ids().collect();
                if !out.contains(&voters) {
                    out.push(voters);
                }
            }
        }
        Some(out)
    }

    /// After healing and the final reads (see [`Sim::finish_workload`]):
    /// a stable leader that is a voter of the configuration its log holds,
    /// committed, and every running member's replica holding it. A
    /// violation otherwise.
    pub(super) fn check_membership_converged(&mut self) {
        if !self.membership_runs() {
            return;
        }
        match self.membership_divergence() {
            None => {}
            Some(what) => self.checker.fail(self.now, Check::MembershipConvergence, what),
        }
    }

    /// What keeps the cluster from having converged on one configuration,
    /// if anything.
    fn membership_divergence(&self) -> Option<String> {
        let Some(l) = self.stable_leader() else {
            return Some(format!(
                "no stable leader after healing and the final reads (leaders {:?}){}",
                self.leaders().iter().map(|i| i + 1).collect::<Vec<_>>(),
                self.unfollowed()
            ));
        };
        let lid = self.hosts[l].id;
        let Some(r) = self.hosts[l].kv.as_ref().and_then(|kv| kv.replica.as_ref()) else {
            return Some(format!("the leader n{} runs no replica", l + 1));
        };
        let st = r.status();
        let m: &Membership = &st.membership;
        if !m.members.is_voter(lid) {
            return Some(format!("the leader n{} is no voter of {}", l + 1, m.members));
        }
        if m.at.index > st.commit {
            return Some(format!(
                "the leader n{}'s configuration {} at {:?} is not committed (commit {})",
                l + 1,
                m.members,
                m.at,
                st.commit
            ));
        }
        let differ: Vec<String> = self
            .hosts
            .iter()
            .filter(|h| h.is_up() && m.members.get(h.id).is_some())
            .filter_map(|h| {
                let theirs = h.kv.as_ref()?.replica.as_ref().map(|r| r.membership().clone());
                match theirs {
                    Some(t) if t == *m => None,
                    Some(t) => Some(format!("{} holds {} at {:?}", h.id, t.members, t.at)),
                    None => Some(format!("{} runs no replica", h.id)),
                }
            })
            .collect();
        (!differ.is_empty()).then(|| {
            format!(
                "the members did not converge on the leader n{}'s {} at {:?}: {}",
                l + 1,
                m.members,
                m.at,
                differ.join(", ")
            )
        })
    }

    /// Why the one node that leads by its clock (if one does) is not a
    /// stable leader: the running members of its configuration that do
    /// not follow it, each with the configuration its elector counts over
    /// (one that does not name the leader means the member does not hear
    /// it).
    /// With no node leading, what every running node's elector counts over.
    pub fn unfollowed(&self) -> String {
        if self.leaders().is_empty() {
            let all: Vec<String> = self
                .hosts
                .iter()
                .filter_map(|h| {
                    let e = h.elector()?.electorate();
                    let stands = if e.stands { "stands" } else { "does not stand" };
                    Some(format!("{} counts over {e} ({stands})", h.id))
                })
                .collect();
            return format!("; electorates: {}", all.join("; "));
        }
        let [l] = self.leaders()[..] else { return String::new() };
        let lid = self.hosts[l].id;
        let Some(e) = self.hosts[l].elector().map(|e| e.electorate()) else {
            return String::new();
        };
        let stray: Vec<String> = self
            .hosts
            .iter()
            .filter(|h| e.is_member(h.id) && h.id != lid)
            .filter_map(|h| {
                let theirs = h.elector()?;
                (theirs.status().leader != Some(lid)).then(|| {
                    let hears = if theirs.electorate().is_member(lid) {
                        "names the leader"
                    } else {
                        "does not name the leader, whose messages it ignores"
                    };
                    format!("{} counts over {} ({hears})", h.id, theirs.electorate())
                })
            })
            .collect();
        if stray.is_empty() {
            String::new()
        } else {
            format!("; not following n{}: {}", l + 1, stray.join("; "))
        }
    }

    /// What node `i`'s replica says its elector counts over (the
    /// configuration its log holds), if the replica runs.
    pub fn replica_electorate(&self, i: usize) -> Option<Electorate> {
        let kv = self.hosts[i].kv.as_ref().filter(|kv| !kv.stalled)?;
        kv.replica.as_ref().map(|r| r.electorate())
    }

    /// What made node `i` leader of `term` under another node's identity:
    /// itself, or a vote of a node, whose data was wiped since the
    /// configuration its log holds named it as a voter: the node that came
    /// back counted as the voter it was (what the identity of a data
    /// directory is for, `docs/MEMBERSHIP.md`). A bootstrap member, named
    /// without a directory, is the node's first directory.
    pub(super) fn mistaken_votes(&self, i: usize, term: Term) -> Vec<String> {
        if !self.membership_runs() {
            return Vec::new();
        }
        let lid = self.hosts[i].id;
        let Some(r) = self.hosts[i].kv.as_ref().and_then(|kv| kv.replica.as_ref()) else {
            return Vec::new();
        };
        let m = r.membership();
        let mut out = Vec::new();
        let own = (lid, self.hosts[i].wipes.len() as u64);
        let votes = self.checker.votes_for(term, lid).into_iter().filter(|v| v.0 != lid);
        for (voter, identity) in std::iter::once(own).chain(votes) {
            let Some(member) = m.members.voters.iter().find(|v| v.id == voter) else {
                continue;
            };
            let named = match member.directory {
                None => Some(0),
                Some(d) => self.index_of(voter).and_then(|x| {
                    let wipes = self.hosts[x].wipes.len() as u64;
                    (0..=wipes).find(|&k| directory_of(self.seed, voter, k) == d)
                }),
            };
            if named != Some(identity) {
                let how = if voter == lid {
                    "on its own standing".to_string()
                } else {
                    format!("with the vote of {voter}")
                };
                out.push(format!(
                    "{lid} took office in {term:?} {how}: {voter}, its data wiped {identity} \
                     times, counted as the voter its log's configuration {} at {:?} names ({})",
                    m.members,
                    m.at,
                    member.directory.map_or("the bootstrap list's".into(), |d| d.to_string())
                ));
            }
        }
        out
    }

    /// The changes of members' figures of the run, if it changes members:
    /// the operator's, with the committed changes counted from the logs.
    pub fn membership_stats(&self) -> Option<MembershipStats> {
        let m = self.kv.as_ref()?.members.as_ref()?;
        let mut s = m.operator.stats;
        let counts = m.checks.committed_counts();
        let of = |k| counts.get(&k).copied().unwrap_or(0);
        s.learners_added = of(ChangeKind::AddLearner);
        s.promotions = of(ChangeKind::Promote);
        s.learners_removed = of(ChangeKind::RemoveLearner);
        s.voters_removed = of(ChangeKind::RemoveVoter);
        s.committed = counts.values().sum();
        Some(s)
    }
}
