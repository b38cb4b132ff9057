//! A minimal in-memory cluster for the core's interaction tests: fixed one-way
//! latency, virtual time, links that can be cut, crash and restart from the
//! persisted state. The full fault simulator lives in `tenure-sim`; this one
//! stays small so each test reads like a story.

#![allow(dead_code)]

use rand_pcg::Pcg64Mcg;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use tenure_core::{
    Config, Event, HardState, Instant, Message, NodeId, Protocol, RaftElector, Role, Term,
};

pub const HEARTBEAT: Duration = Duration::from_millis(100);
pub const TIMEOUT: Duration = Duration::from_millis(1000);
pub const LATENCY: Duration = Duration::from_millis(1);

pub fn n(i: u64) -> NodeId {
    NodeId(i)
}

struct InFlight {
    at: Instant,
    seq: u64,
    from: NodeId,
    to: NodeId,
    msg: Message,
}

pub struct Cluster {
    pub now: Instant,
    pub ids: Vec<NodeId>,
    pub nodes: BTreeMap<NodeId, RaftElector<Pcg64Mcg>>,
    pub durable: BTreeMap<NodeId, HardState>,
    pub down: BTreeSet<NodeId>,
    /// Cut directed links (from, to).
    pub cut: BTreeSet<(NodeId, NodeId)>,
    in_flight: Vec<InFlight>,
    seq: u64,
    /// Every event with the node and time it happened at.
    pub events: Vec<(Instant, NodeId, Event)>,
    /// Every message sent: (time, from, to, message).
    pub sent: Vec<(Instant, NodeId, NodeId, Message)>,
}

pub fn config(id: NodeId, size: u64) -> Config {
    Config::new(id, (1..=size).map(NodeId).collect(), HEARTBEAT, TIMEOUT)
}

impl Cluster {
    pub fn new(size: u64) -> Self {
        let ids: Vec<NodeId> = (1..=size).map(NodeId).collect();
        let mut c = Cluster {
            now: Instant::from_nanos(1_000_000_000),
            ids: ids.clone(),
            nodes: BTreeMap::new(),
            durable: ids.iter().map(|&i| (i, HardState::default())).collect(),
            down: BTreeSet::new(),
            cut: BTreeSet::new(),
            in_flight: Vec::new(),
            seq: 0,
            events: Vec::new(),
            sent: Vec::new(),
        };
        for id in ids {
            c.boot(id);
        }
        c
    }

    fn boot(&mut self, id: NodeId) {
        let cfg = config(id, self.ids.len() as u64);
        let rng = Pcg64Mcg::new(0xC0FFEE ^ u128::from(id.0));
        let node = RaftElector::new(cfg, self.durable[&id], rng, self.now);
        self.nodes.insert(id, node);
        self.drain(id);
    }

    pub fn node(&self, id: NodeId) -> &RaftElector<Pcg64Mcg> {
        &self.nodes[&id]
    }

    pub fn node_mut(&mut self, id: NodeId) -> &mut RaftElector<Pcg64Mcg> {
        self.nodes.get_mut(&id).expect("known node")
    }

    /// Persists, then sends, then records events — the calling contract.
    pub fn drain(&mut self, id: NodeId) {
        let out = self.nodes.get_mut(&id).expect("node").take_output();
        if let Some(hs) = out.persist {
            self.durable.insert(id, hs);
        }
        for (to, msg) in out.messages {
            self.sent.push((self.now, id, to, msg.clone()));
            self.seq += 1;
            self.in_flight.push(InFlight {
                at: self.now + LATENCY,
                seq: self.seq,
                from: id,
                to,
                msg,
            });
        }
        for e in out.events {
            self.events.push((self.now, id, e));
        }
    }

    pub fn crash(&mut self, id: NodeId) {
        self.down.insert(id);
        self.in_flight.retain(|m| m.to != id && m.from != id);
    }

    pub fn restart(&mut self, id: NodeId) {
        self.down.remove(&id);
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

    pub fn cut_link(&mut self, a: NodeId, b: NodeId) {
        self.cut.insert((a, b));
        self.cut.insert((b, a));
    }

    pub fn heal(&mut self) {
        self.cut.clear();
    }

    /// Delivers `msg` from `from` to `to` right now, bypassing the network.
    pub fn inject(&mut self, from: NodeId, to: NodeId, msg: Message) {
        let now = self.now;
        self.node_mut(to).handle_message(now, from, msg);
        self.drain(to);
    }

    /// Advances virtual time by `d`, processing every message and timer in order.
    pub fn run_for(&mut self, d: Duration) {
        let end = self.now + d;
        // Bounded: at most this many steps per call.
        for _ in 0..1_000_000 {
            let next_msg = self.in_flight.iter().map(|m| (m.at, m.seq)).min();
            let next_timer = self
                .nodes
                .iter()
                .filter(|(id, _)| !self.down.contains(id))
                .map(|(&id, node)| (node.poll_timeout(), id))
                .min();
            let msg_at = next_msg.map(|(at, _)| at).unwrap_or(Instant::MAX);
            let timer_at = next_timer.map(|(at, _)| at).unwrap_or(Instant::MAX);
            let at = msg_at.min(timer_at);
            if at > end {
                self.now = end;
                return;
            }
            self.now = self.now.max(at);
            if msg_at <= timer_at {
                let (_, seq) = next_msg.expect("message");
                let pos = self.in_flight.iter().position(|m| m.seq == seq).expect("in flight");
                let m = self.in_flight.swap_remove(pos);
                if self.down.contains(&m.to) || self.cut.contains(&(m.from, m.to)) {
                    continue;
                }
                let now = self.now;
                self.node_mut(m.to).handle_message(now, m.from, m.msg);
                self.drain(m.to);
            } else {
                let (_, id) = next_timer.expect("timer");
                let now = self.now;
                self.node_mut(id).handle_timeout(now);
                self.drain(id);
            }
        }
        panic!("run_for did not reach its end: livelock in the harness");
    }

    /// Nodes that are up and believe they lead at `now`.
    pub fn leaders(&self) -> Vec<NodeId> {
        self.nodes
            .iter()
            .filter(|(id, n)| !self.down.contains(id) && n.is_leader(self.now))
            .map(|(&id, _)| id)
            .collect()
    }

    /// The single leader, panicking otherwise.
    pub fn leader(&self) -> NodeId {
        let l = self.leaders();
        assert_eq!(l.len(), 1, "expected exactly one leader, got {l:?}");
        l[0]
    }

    /// Runs until some node other than `not` leads; returns it and the time it took.
    pub fn run_until_leader_other_than(
        &mut self,
        not: Option<NodeId>,
        max: Duration,
    ) -> (NodeId, Duration) {
        let start = self.now;
        let step = Duration::from_millis(1);
        while self.now.saturating_since(start) < max {
            self.run_for(step);
            let l = self.leaders();
            if let Some(&x) = l.iter().find(|&&x| Some(x) != not) {
                return (x, self.now.saturating_since(start));
            }
        }
        panic!("no new leader within {max:?}; leaders {:?}", self.leaders());
    }

    pub fn term(&self, id: NodeId) -> Term {
        self.node(id).status().term
    }

    pub fn role(&self, id: NodeId) -> Role {
        self.node(id).status().role
    }

    /// Total election rounds (term bumps by candidacy) across the cluster.
    pub fn elections(&self) -> u64 {
        self.nodes.values().map(|n| n.counters().elections_started).sum()
    }

    /// Nodes that became leader, in order, with their terms.
    pub fn leader_history(&self) -> Vec<(NodeId, Term)> {
        self.events
            .iter()
            .filter_map(|(_, id, e)| match e {
                Event::RoleChanged { role: Role::Leader, term, .. } => Some((*id, *term)),
                _ => None,
            })
            .collect()
    }
}
