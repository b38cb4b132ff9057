//! An in-memory cluster of replicas for the tests: a disk per node that
//! applies the log operations in order, a network with delay, loss and
//! reordering, crashes that keep only the disk, and an election oracle that
//! names leaders with increasing tokens (one leader per token, as the elector
//! guarantees) and tells each node at its own time.

#![allow(dead_code)]

use rand_core::RngCore;
use rand_pcg::Pcg64Mcg;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use tenure_core::{FencingToken, Instant, NodeId};
use tenure_replica::{
    Change, ChangeError, Completion, Config, Entry, LogOp, Membership, Output, Position,
    ProposalError, ProposalId, Replica, ReplicaMessage, Restored,
};

pub const HEARTBEAT: Duration = Duration::from_millis(10);

pub fn n(i: u64) -> NodeId {
    NodeId(i)
}

pub use tenure_replica::testkit::Recorder;

/// What a node's disk holds, built only from the log operations it was given.
#[derive(Clone, Debug, Default)]
pub struct Disk {
    pub promised: FencingToken,
    pub snapshot: Option<(Position, Vec<u8>)>,
    pub membership: Option<Membership>,
    pub entries: Vec<Entry>,
}

impl Disk {
    pub fn apply(&mut self, op: &LogOp) {
        match op {
            LogOp::Promise(t) => {
                assert!(*t >= self.promised, "a promise never goes back");
                self.promised = *t;
            }
            LogOp::TruncateAfter(i) => self.entries.retain(|e| e.pos.index <= *i),
            LogOp::Append(es) => {
                for e in es {
                    let last = self.last();
                    assert_eq!(e.pos.index, last.index + 1, "appends are consecutive");
                    self.entries.push(e.clone());
                }
            }
            LogOp::InstallSnapshot { last, membership, data } => {
                self.snapshot = Some((*last, data.clone()));
                self.membership = Some(membership.clone());
                self.entries.clear();
            }
            LogOp::Compact { last, membership, data } => {
                self.snapshot = Some((*last, data.clone()));
                self.membership = Some(membership.clone());
                self.entries.retain(|e| e.pos.index > last.index);
            }
        }
    }

    pub fn last(&self) -> Position {
        self.entries
            .last()
            .map(|e| e.pos)
            .or(self.snapshot.as_ref().map(|(p, _)| *p))
            .unwrap_or(Position::ZERO)
    }

    pub fn restored(&self) -> Restored {
        Restored {
            promised: self.promised,
            snapshot: self.snapshot.clone(),
            entries: self.entries.clone(),
            membership: self.membership.clone(),
        }
    }
}

struct InFlight {
    at: Instant,
    seq: u64,
    from: NodeId,
    to: NodeId,
    msg: ReplicaMessage,
}

pub struct Node {
    pub replica: Option<Replica<Recorder>>,
    pub disk: Disk,
    /// The elector's view this node was last told.
    pub view: Option<(NodeId, FencingToken)>,
    /// Commands of the current incarnation already recorded.
    pub seen: usize,
    /// How many times it started (proposal ids start over at each).
    pub incarnation: u64,
}

/// A proposal's fate as the client saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fate {
    Pending,
    Committed(Position),
    Unknown,
    Failed,
}

pub struct Cluster {
    pub now: Instant,
    pub ids: Vec<NodeId>,
    pub cfg: Config,
    pub nodes: BTreeMap<NodeId, Node>,
    pub rng: Pcg64Mcg,
    in_flight: Vec<InFlight>,
    seq: u64,
    pub cut: BTreeSet<(NodeId, NodeId)>,
    pub loss_percent: u64,
    pub max_delay_ms: u64,
    /// The token of the latest leadership named.
    pub token: u64,
    /// (node, incarnation, proposal id) -> (command, fate).
    pub proposals: BTreeMap<(NodeId, u64, ProposalId), (Vec<u8>, Fate)>,
    /// (node, incarnation, proposal id) -> fate, of changes of members.
    pub changes: BTreeMap<(NodeId, u64, ProposalId), Fate>,
    /// Every (node, position, command) applied, in order per node, across restarts.
    pub applied: Vec<(NodeId, Position, Vec<u8>)>,
    /// Every (node, position) applied, no-ops included.
    pub applied_positions: Vec<(NodeId, Position)>,
    /// Nodes whose writes are not reported durable until
    /// [`Cluster::report_writes`] (their disk is slow).
    pub slow: BTreeSet<NodeId>,
}

impl Cluster {
    pub fn new(size: u64, seed: u64) -> Cluster {
        Cluster::with_config(size, seed, |_| {})
    }

    pub fn with_config(size: u64, seed: u64, tweak: impl Fn(&mut Config)) -> Cluster {
        let ids: Vec<NodeId> = (1..=size).map(NodeId).collect();
        let mut cfg = Config::new(ids[0], ids.clone(), HEARTBEAT);
        tweak(&mut cfg);
        let mut c = Cluster {
            now: Instant::from_nanos(1_000_000_000),
            ids: ids.clone(),
            cfg,
            nodes: BTreeMap::new(),
            // Shifted: `Pcg64Mcg::new` sets the low bit, so seeds 2k and
            // 2k + 1 would share one stream.
            rng: Pcg64Mcg::new((0xABCD_0000 ^ u128::from(seed)) << 1),
            in_flight: Vec::new(),
            seq: 0,
            cut: BTreeSet::new(),
            loss_percent: 0,
            max_delay_ms: 1,
            token: 0,
            proposals: BTreeMap::new(),
            changes: BTreeMap::new(),
            applied: Vec::new(),
            applied_positions: Vec::new(),
            slow: BTreeSet::new(),
        };
        for id in ids {
            c.nodes.insert(
                id,
                Node { replica: None, disk: Disk::default(), view: None, seen: 0, incarnation: 0 },
            );
            c.boot(id);
        }
        c
    }

    fn config_of(&self, id: NodeId) -> Config {
        Config { id, ..self.cfg.clone() }
    }

    pub fn boot(&mut self, id: NodeId) {
        let cfg = self.config_of(id);
        let node = self.nodes.get_mut(&id).expect("known");
        let replica =
            Replica::new(cfg, node.disk.restored(), Recorder::default()).expect("restores");
        node.seen = replica.state_machine().applied.len();
        node.incarnation += 1;
        node.replica = Some(replica);
        node.view = None;
    }

    pub fn replica(&self, id: NodeId) -> &Replica<Recorder> {
        self.nodes[&id].replica.as_ref().expect("running")
    }

    pub fn replica_mut(&mut self, id: NodeId) -> &mut Replica<Recorder> {
        self.nodes.get_mut(&id).expect("known").replica.as_mut().expect("running")
    }

    pub fn up(&self, id: NodeId) -> bool {
        self.nodes[&id].replica.is_some()
    }

    /// Reports every write of `id` durable (a slow disk caught up).
    pub fn report_writes(&mut self, id: NodeId) {
        let now = self.now;
        let r = self.replica_mut(id);
        let n = r.unpersisted();
        r.handle_persisted(now, n);
        self.drain(id);
    }

    /// Persist, then send, then completions — the calling contract.
    pub fn drain(&mut self, id: NodeId) {
        loop {
            let out: Output = self.replica_mut(id).take_output();
            if out.is_empty() {
                return;
            }
            let node = self.nodes.get_mut(&id).expect("known");
            for op in &out.write {
                node.disk.apply(op);
            }
            if !out.write.is_empty() && !self.slow.contains(&id) {
                // Durable at once: the next round of this loop takes what
                // counting it produced.
                let now = self.now;
                let r = self.replica_mut(id);
                let n = r.unpersisted();
                r.handle_persisted(now, n);
            }
            // Early messages leave before the write; here the write is done
            // at once, so they go with the others.
            for (to, msg) in out.early.into_iter().chain(out.messages) {
                self.seq += 1;
                let delay = 1 + self.rng.next_u64() % self.max_delay_ms.max(1);
                self.in_flight.push(InFlight {
                    at: self.now + Duration::from_millis(delay),
                    seq: self.seq,
                    from: id,
                    to,
                    msg,
                });
            }
            // Record what the state machine applied since the last drain (a
            // snapshot installed in this output replaced its history: only
            // what came after it is new).
            let installed = out.write.iter().rev().find_map(|op| match op {
                LogOp::InstallSnapshot { last, .. } => Some(last.index),
                _ => None,
            });
            let seen = self.nodes[&id].seen;
            let applied = &self.replica(id).state_machine().applied;
            let new: Vec<(Position, Vec<u8>)> = match installed {
                Some(l) => applied.iter().filter(|(p, _)| p.index > l).cloned().collect(),
                None => applied[seen.min(applied.len())..].to_vec(),
            };
            let len = applied.len();
            self.nodes.get_mut(&id).expect("known").seen = len;
            for (p, cmd) in new {
                self.applied.push((id, p, cmd));
            }
            for p in &out.applied {
                self.applied_positions.push((id, *p));
            }
            for c in out.completions {
                if let Completion::Proposal { id: pid, result } = c {
                    let fate = match result {
                        Ok((pos, _)) => Fate::Committed(pos),
                        Err(ProposalError::Unknown) => Fate::Unknown,
                        Err(_) => Fate::Failed,
                    };
                    let key = (id, self.nodes[&id].incarnation, pid);
                    if let Some(p) = self.proposals.get_mut(&key) {
                        p.1 = fate;
                    } else if let Some(c) = self.changes.get_mut(&key) {
                        *c = fate;
                    }
                }
            }
        }
    }

    /// The elector names `leader` with a new token; `told` nodes learn it now.
    pub fn elect(&mut self, leader: NodeId, told: &[NodeId]) -> FencingToken {
        self.token += 1;
        let t = FencingToken(self.token);
        for &id in told {
            self.tell(id, Some((leader, t)));
        }
        t
    }

    /// Tells `id` the elector's view.
    pub fn tell(&mut self, id: NodeId, view: Option<(NodeId, FencingToken)>) {
        if !self.up(id) {
            return;
        }
        let now = self.now;
        self.nodes.get_mut(&id).expect("known").view = view;
        self.replica_mut(id).set_leadership(now, view.map(|v| v.0), view.map(|v| v.1));
        self.drain(id);
    }

    pub fn propose(&mut self, id: NodeId, commands: Vec<Vec<u8>>) -> usize {
        let now = self.now;
        let results = self.replica_mut(id).propose(now, commands.clone());
        let mut accepted = 0;
        for (cmd, r) in commands.into_iter().zip(results) {
            if let Ok(pid) = r {
                let key = (id, self.nodes[&id].incarnation, pid);
                self.proposals.insert(key, (cmd, Fate::Pending));
                accepted += 1;
            }
        }
        self.drain(id);
        accepted
    }

    /// A node that was not in the bootstrap list, started with an empty
    /// log (as a node that joins: it learns the configuration from the log).
    pub fn add_node(&mut self, id: NodeId) {
        self.ids.push(id);
        self.nodes.insert(
            id,
            Node { replica: None, disk: Disk::default(), view: None, seen: 0, incarnation: 0 },
        );
        self.boot(id);
        if let Some((l, t)) = self.ready_leader().and_then(|l| self.nodes[&l].view) {
            self.tell(id, Some((l, t)));
        }
    }

    /// Proposes a change of members at `id`.
    pub fn change(&mut self, id: NodeId, change: &Change) -> Result<ProposalId, ChangeError> {
        let now = self.now;
        let r = self.replica_mut(id).propose_change(now, change);
        if let Ok(pid) = r {
            let key = (id, self.nodes[&id].incarnation, pid);
            self.changes.insert(key, Fate::Pending);
        }
        self.drain(id);
        r
    }

    /// A node picked at random.
    pub fn pick(&mut self) -> NodeId {
        self.ids[(self.rng.next_u64() % self.ids.len() as u64) as usize]
    }

    /// The elector names `leader`, told to itself and about two thirds of
    /// the others.
    pub fn elect_told_to_some(&mut self, leader: NodeId) {
        let ids = self.ids.clone();
        let mut told: Vec<_> =
            ids.into_iter().filter(|_| !self.rng.next_u64().is_multiple_of(3)).collect();
        if !told.contains(&leader) {
            told.push(leader);
        }
        self.elect(leader, &told);
    }

    /// One fault chosen by `roll` (0 to 15): a random node crashes or
    /// restarts (0-4), a random link is cut one way (5-9), every cut heals
    /// (10-12), messages are lost at a random rate below 30 % (13-15).
    pub fn random_fault(&mut self, roll: u64) {
        match roll {
            0..=4 => {
                let v = self.pick();
                if self.up(v) {
                    self.crash(v);
                } else {
                    self.restart(v);
                }
            }
            5..=9 => {
                let (a, b) = (self.pick(), self.pick());
                if a != b {
                    self.cut.insert((a, b));
                }
            }
            10..=12 => self.heal(),
            13..=15 => self.loss_percent = self.rng.next_u64() % 30,
            _ => {}
        }
    }

    /// One time in four, a random node learns the latest leadership (nodes
    /// learn it at their own pace).
    pub fn maybe_spread_view(&mut self) {
        if self.rng.next_u64().is_multiple_of(4) && self.token > 0 {
            let latest = self.ids.iter().filter_map(|&i| self.nodes[&i].view).max_by_key(|v| v.1);
            if let Some(v) = latest {
                let who = self.pick();
                self.tell(who, Some(v));
            }
        }
    }

    pub fn crash(&mut self, id: NodeId) {
        self.nodes.get_mut(&id).expect("known").replica = None;
        self.in_flight.retain(|m| m.to != id);
    }

    pub fn restart(&mut self, id: NodeId) {
        self.boot(id);
    }

    pub fn isolate(&mut self, id: NodeId) {
        for &o in &self.ids.clone() {
            if o != id {
                self.cut.insert((id, o));
                self.cut.insert((o, id));
            }
        }
    }

    pub fn heal(&mut self) {
        self.cut.clear();
    }

    /// Delivers `msg` from `from` to `to` right now.
    /// Messages on their way from `from` to `to` that carry entries.
    pub fn appends_in_flight(&self, from: NodeId, to: NodeId) -> usize {
        let carries = |m: &ReplicaMessage| matches!(m, ReplicaMessage::Append { entries, .. } if !entries.is_empty());
        self.in_flight.iter().filter(|m| m.from == from && m.to == to && carries(&m.msg)).count()
    }

    pub fn inject(&mut self, from: NodeId, to: NodeId, msg: ReplicaMessage) {
        let now = self.now;
        self.replica_mut(to).handle_message(now, from, msg);
        self.drain(to);
    }

    pub fn run_for(&mut self, d: Duration) {
        let end = self.now + d;
        for _ in 0..10_000_000 {
            let next_msg = self.in_flight.iter().map(|m| (m.at, m.seq)).min();
            let next_timer = self
                .nodes
                .iter()
                .filter_map(|(&id, n)| n.replica.as_ref().map(|r| (r.poll_timeout(), id)))
                .min();
            let msg_at = next_msg.map_or(Instant::MAX, |m| m.0);
            let timer_at = next_timer.map_or(Instant::MAX, |t| t.0);
            let at = msg_at.min(timer_at);
            if at > end {
                self.now = end;
                return;
            }
            self.now = self.now.max(at);
            let now = self.now;
            if msg_at <= timer_at {
                let (_, seq) = next_msg.expect("a message");
                let k = self.in_flight.iter().position(|m| m.seq == seq).expect("in flight");
                let m = self.in_flight.swap_remove(k);
                let lost = self.loss_percent > 0 && self.rng.next_u64() % 100 < self.loss_percent;
                if !self.up(m.to) || self.cut.contains(&(m.from, m.to)) || lost {
                    continue;
                }
                self.replica_mut(m.to).handle_message(now, m.from, m.msg);
                self.drain(m.to);
            } else {
                let (_, id) = next_timer.expect("a timer");
                self.replica_mut(id).handle_timeout(now);
                self.drain(id);
            }
        }
        panic!("run_for did not reach its end");
    }

    /// Per node, the sequence of (position, command) applied by its current
    /// incarnation's state machine.
    pub fn applied_by(&self, id: NodeId) -> Vec<(Position, Vec<u8>)> {
        self.replica(id).state_machine().applied.clone()
    }

    /// The safety checks: every node applied the same command at each index
    /// (across incarnations too), and every committed proposal is applied at
    /// its position by every node that applied that far.
    pub fn check_safety(&self) {
        let mut entry_at: BTreeMap<u64, (Position, NodeId)> = BTreeMap::new();
        for (id, p) in &self.applied_positions {
            let (q, other) = *entry_at.entry(p.index).or_insert((*p, *id));
            assert_eq!(q, *p, "index {}: {id:?} applied {p:?}, {other:?} applied {q:?}", p.index);
        }
        let mut at: BTreeMap<u64, (Position, Vec<u8>, NodeId)> = BTreeMap::new();
        for (id, p, cmd) in &self.applied {
            match at.get(&p.index) {
                Some((q, c, other)) => assert!(
                    q == p && c == cmd,
                    "index {}: {id:?} applied {p:?} {cmd:?}, {other:?} applied {q:?} {c:?}",
                    p.index
                ),
                None => {
                    at.insert(p.index, (*p, cmd.clone(), *id));
                }
            }
        }
        for ((node, _, pid), (cmd, fate)) in &self.proposals {
            if let Fate::Committed(pos) = fate {
                let (p, c, _) = at.get(&pos.index).unwrap_or_else(|| {
                    panic!("{node:?} proposal {pid} committed at {pos:?} but nobody applied it")
                });
                assert!(p == pos && c == cmd, "{node:?} proposal {pid} at {pos:?}: applied {p:?}");
            }
        }
    }

    /// After healing: every running node applied the same sequence, which
    /// holds every committed proposal.
    pub fn check_converged(&self) {
        let running: Vec<NodeId> = self.ids.iter().copied().filter(|&i| self.up(i)).collect();
        let commit = running.iter().map(|&i| self.replica(i).status().commit).max().unwrap_or(0);
        for &id in &running {
            let s = self.replica(id).status();
            assert_eq!(s.applied, commit, "{id:?} applied {} of {commit}", s.applied);
        }
        self.check_safety();
        for ((node, _, pid), (_, fate)) in &self.proposals {
            if let Fate::Committed(pos) = fate {
                assert!(pos.index <= commit, "{node:?} {pid}: committed beyond the cluster");
            }
        }
    }

    pub fn ready_leader(&self) -> Option<NodeId> {
        self.ids.iter().copied().find(|&i| self.up(i) && self.replica(i).status().ready_leader)
    }
}
