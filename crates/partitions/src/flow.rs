//! Maximum flow (Dinic) and minimum-cost maximum flow (primal-dual) on the
//! small, compressed networks of the assignment.
//!
//! Costs are vectors compared lexicographically ([`Cost`]): the assignment's
//! objectives (balance, then remainders, then moves, then preferences, ...)
//! are strictly ranked, and a vector states that without scaling factors that
//! could overflow. Lexicographically ordered integer vectors form an ordered
//! group, so potentials and Dijkstra work on them as on numbers.
//!
//! Everything here is deterministic: edges are scanned in insertion order and
//! the heap breaks ties by node index.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Number of cost components (see `assign.rs` for their meaning).
pub(crate) const COST_LEN: usize = 7;
/// A lexicographically compared cost vector.
pub(crate) type Cost = [i64; COST_LEN];
/// The zero cost.
pub(crate) const ZERO: Cost = [0; COST_LEN];

fn add(a: &Cost, b: &Cost) -> Cost {
    let mut out = *a;
    for (o, x) in out.iter_mut().zip(b) {
        *o += x;
    }
    out
}

fn neg(a: &Cost) -> Cost {
    let mut out = *a;
    for o in &mut out {
        *o = -*o;
    }
    out
}

/// A directed network with residual capacities. Edge `e` and `e ^ 1` are a
/// forward edge and its reverse.
pub(crate) struct Network {
    adj: Vec<Vec<u32>>,
    to: Vec<u32>,
    cap: Vec<i128>,
    cost: Vec<Cost>,
}

impl Network {
    /// A network of `nodes` nodes and no edges.
    pub(crate) fn new(nodes: usize) -> Self {
        Network { adj: vec![Vec::new(); nodes], to: Vec::new(), cap: Vec::new(), cost: Vec::new() }
    }

    /// The number of nodes.
    pub(crate) fn nodes(&self) -> usize {
        self.adj.len()
    }

    /// Adds a node and returns it.
    pub(crate) fn add_node(&mut self) -> usize {
        self.adj.push(Vec::new());
        self.adj.len() - 1
    }

    /// Adds an edge `from -> to` and returns its index (for [`Network::flow`]).
    pub(crate) fn add_edge(&mut self, from: usize, to: usize, cap: i128, cost: Cost) -> usize {
        let e = self.to.len();
        self.to.push(to as u32);
        self.cap.push(cap);
        self.cost.push(cost);
        self.adj[from].push(e as u32);
        self.to.push(from as u32);
        self.cap.push(0);
        self.cost.push(neg(&cost));
        self.adj[to].push(e as u32 + 1);
        e
    }

    /// The flow on the forward edge `e`.
    pub(crate) fn flow(&self, e: usize) -> i128 {
        self.cap[e ^ 1]
    }

    /// Whether edge `e` (leaving `u`) has residual capacity and, when
    /// potentials are given, a reduced cost of zero.
    fn admissible(&self, e: usize, u: usize, pot: Option<&[Cost]>) -> bool {
        if self.cap[e] <= 0 {
            return false;
        }
        match pot {
            None => true,
            Some(p) => {
                let v = self.to[e] as usize;
                (0..COST_LEN).all(|k| self.cost[e][k] + p[u][k] == p[v][k])
            }
        }
    }

    /// Pushes a maximum flow from `s` to `t` (Dinic), using only admissible
    /// edges, and returns its value.
    fn dinic(&mut self, s: usize, t: usize, pot: Option<&[Cost]>) -> i128 {
        const UNSEEN: u32 = u32::MAX;
        let n = self.adj.len();
        let mut total = 0;
        let mut level = vec![UNSEEN; n];
        let mut next_edge = vec![0usize; n];
        let mut queue: Vec<u32> = Vec::with_capacity(n);
        let mut path: Vec<u32> = Vec::new();
        loop {
            level.fill(UNSEEN);
            level[s] = 0;
            queue.clear();
            queue.push(s as u32);
            let mut head = 0;
            while head < queue.len() {
                let u = queue[head] as usize;
                head += 1;
                for &e in &self.adj[u] {
                    let v = self.to[e as usize] as usize;
                    if level[v] == UNSEEN && self.admissible(e as usize, u, pot) {
                        level[v] = level[u] + 1;
                        queue.push(v as u32);
                    }
                }
            }
            if level[t] == UNSEEN {
                return total;
            }
            next_edge.fill(0);
            // Blocking flow: one augmenting path per round, found by an
            // iterative depth-first search along the level graph.
            loop {
                path.clear();
                let mut u = s;
                let found = loop {
                    if u == t {
                        break true;
                    }
                    let mut advanced = false;
                    while next_edge[u] < self.adj[u].len() {
                        let e = self.adj[u][next_edge[u]] as usize;
                        let v = self.to[e] as usize;
                        if level[v] != UNSEEN
                            && level[v] == level[u] + 1
                            && self.admissible(e, u, pot)
                        {
                            path.push(e as u32);
                            u = v;
                            advanced = true;
                            break;
                        }
                        next_edge[u] += 1;
                    }
                    if !advanced {
                        // A dead end: never enter `u` again in this phase.
                        level[u] = UNSEEN;
                        match path.pop() {
                            None => break false,
                            Some(e) => {
                                u = self.to[e as usize ^ 1] as usize;
                                next_edge[u] += 1;
                            }
                        }
                    }
                };
                if !found {
                    break;
                }
                let pushed = path.iter().map(|&e| self.cap[e as usize]).min().unwrap_or(0);
                for &e in &path {
                    self.cap[e as usize] -= pushed;
                    self.cap[e as usize ^ 1] += pushed;
                }
                total += pushed;
            }
        }
    }

    /// Pushes a maximum flow from `s` to `t` and returns its value.
    pub(crate) fn max_flow(&mut self, s: usize, t: usize) -> i128 {
        self.dinic(s, t, None)
    }

    /// The nodes that can still reach `t` through edges with residual
    /// capacity. After a maximum flow, the others are the source side of the
    /// minimum cut with the largest source side.
    pub(crate) fn reaching(&self, t: usize) -> Vec<bool> {
        let mut seen = vec![false; self.adj.len()];
        seen[t] = true;
        let mut stack = vec![t];
        while let Some(v) = stack.pop() {
            for &e in &self.adj[v] {
                // `e` leaves `v`; its pair `e ^ 1` enters `v` from `w`.
                let w = self.to[e as usize] as usize;
                if !seen[w] && self.cap[e as usize ^ 1] > 0 {
                    seen[w] = true;
                    stack.push(w);
                }
            }
        }
        seen
    }

    /// Pushes a maximum flow of minimum (lexicographic) cost from `s` to `t`
    /// and returns its value. All edge costs must be non-negative.
    ///
    /// Primal-dual: Dijkstra on reduced costs finds the shortest distance,
    /// the potentials are raised by it, and a maximum flow along the edges of
    /// reduced cost zero pushes every shortest path at once; the distance
    /// strictly grows from one phase to the next.
    pub(crate) fn min_cost_max_flow(&mut self, s: usize, t: usize) -> i128 {
        let n = self.adj.len();
        let mut pot = vec![ZERO; n];
        let mut dist: Vec<Option<Cost>> = vec![None; n];
        let mut done = vec![false; n];
        let mut heap = BinaryHeap::new();
        let mut total = 0;
        loop {
            dist.fill(None);
            done.fill(false);
            heap.clear();
            dist[s] = Some(ZERO);
            heap.push(Reverse((ZERO, s as u32)));
            while let Some(Reverse((d, u))) = heap.pop() {
                let u = u as usize;
                if done[u] {
                    continue;
                }
                done[u] = true;
                if u == t {
                    break;
                }
                for &e in &self.adj[u] {
                    let e = e as usize;
                    if self.cap[e] <= 0 {
                        continue;
                    }
                    let v = self.to[e] as usize;
                    if done[v] {
                        continue;
                    }
                    let mut nd = d;
                    for k in 0..COST_LEN {
                        nd[k] += self.cost[e][k] + pot[u][k] - pot[v][k];
                    }
                    debug_assert!(nd >= d, "negative reduced cost");
                    if dist[v].is_none_or(|old| nd < old) {
                        dist[v] = Some(nd);
                        heap.push(Reverse((nd, v as u32)));
                    }
                }
            }
            let dt = match dist[t] {
                Some(dt) if done[t] => dt,
                _ => return total,
            };
            // Nodes not settled before `t` are at least as far as `t`:
            // raising them by `dt` keeps every reduced cost non-negative and
            // makes the shortest paths' edges exactly zero.
            for v in 0..n {
                let dv = if done[v] { dist[v].unwrap_or(dt) } else { dt };
                pot[v] = add(&pot[v], &dv);
            }
            total += self.dinic(s, t, Some(&pot));
        }
    }
}

/// A capacity larger than any flow of these networks.
pub(crate) const UNBOUNDED: i128 = i128::MAX / 4;

/// A segment tree of network nodes over a row of leaves (existing nodes):
/// an edge to (or from) one tree node reaches every leaf of its range, so a
/// range of `k` leaves costs `O(log k)` edges instead of `k`. Edges inside
/// the tree are unbounded and free. Any flow through the tree can be read
/// back as units reaching leaves under the node they entered the tree at:
/// a unit entering node `v` (from outside or from `v`'s parent) may go
/// anywhere below `v`.
pub(crate) struct SegmentTree {
    len: usize,
    /// Network node of each tree index (1 is the root; `2i`, `2i + 1` are
    /// the children of `i`); leaves are the given nodes.
    node: Vec<usize>,
    /// Internal nodes in pre-order (parents first), with their edges to
    /// their children (downward trees only).
    internal: Vec<(usize, [(usize, usize); 2])>,
}

impl SegmentTree {
    /// Builds the tree over `leaves`; edges point from parents to children
    /// if `downward`, else from children to parents.
    pub(crate) fn build(net: &mut Network, leaves: &[usize], downward: bool) -> Self {
        let mut tree = SegmentTree {
            len: leaves.len(),
            node: vec![usize::MAX; 4 * leaves.len().max(1)],
            internal: Vec::new(),
        };
        if !leaves.is_empty() {
            tree.grow(net, leaves, downward, 1, 0, leaves.len());
        }
        tree
    }

    fn grow(
        &mut self,
        net: &mut Network,
        leaves: &[usize],
        down: bool,
        i: usize,
        lo: usize,
        hi: usize,
    ) -> usize {
        if hi - lo == 1 {
            self.node[i] = leaves[lo];
            return leaves[lo];
        }
        let v = net.add_node();
        self.node[i] = v;
        let slot = self.internal.len();
        self.internal.push((v, [(0, 0); 2]));
        let mid = lo + (hi - lo) / 2;
        let left = self.grow(net, leaves, down, 2 * i, lo, mid);
        let right = self.grow(net, leaves, down, 2 * i + 1, mid, hi);
        for (k, child) in [left, right].into_iter().enumerate() {
            let e = if down {
                net.add_edge(v, child, UNBOUNDED, ZERO)
            } else {
                net.add_edge(child, v, UNBOUNDED, ZERO)
            };
            self.internal[slot].1[k] = (e, child);
        }
        v
    }

    /// Appends to `out` the tree nodes that together cover leaves `lo..hi`.
    pub(crate) fn cover(&self, lo: usize, hi: usize, out: &mut Vec<usize>) {
        if lo < hi {
            self.cover_in(1, 0, self.len, lo, hi, out);
        }
    }

    fn cover_in(&self, i: usize, l: usize, r: usize, lo: usize, hi: usize, out: &mut Vec<usize>) {
        if hi <= l || r <= lo {
            return;
        }
        if lo <= l && r <= hi {
            out.push(self.node[i]);
            return;
        }
        let mid = l + (r - l) / 2;
        self.cover_in(2 * i, l, mid, lo, hi, out);
        self.cover_in(2 * i + 1, mid, r, lo, hi, out);
    }

    /// Internal nodes, parents first, with their (edge, child) pairs.
    pub(crate) fn internal(&self) -> &[(usize, [(usize, usize); 2])] {
        &self.internal
    }
}

/// The maximal runs `lo..hi` of positions in `lo..hi` not in `excluded`
/// (sorted, all within the range).
pub(crate) fn runs(lo: usize, hi: usize, excluded: &[usize]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = lo;
    for &x in excluded {
        if start < x {
            out.push((start, x));
        }
        start = x + 1;
    }
    if start < hi {
        out.push((start, hi));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(x: i64) -> Cost {
        let mut out = ZERO;
        out[2] = x;
        out
    }

    #[test]
    fn segment_tree_covers_ranges() {
        let mut net = Network::new(5);
        let leaves: Vec<usize> = (0..5).collect();
        let tree = SegmentTree::build(&mut net, &leaves, true);
        assert_eq!(tree.internal().len(), 4);
        for lo in 0..5 {
            for hi in lo..=5 {
                let mut nodes = Vec::new();
                tree.cover(lo, hi, &mut nodes);
                // Leaves reachable from the cover, through tree edges.
                let mut reached = Vec::new();
                let mut stack = nodes.clone();
                while let Some(v) = stack.pop() {
                    if v < 5 {
                        reached.push(v);
                    }
                    for &(node, children) in tree.internal() {
                        if node == v {
                            stack.extend(children.iter().map(|&(_, c)| c));
                        }
                    }
                }
                reached.sort();
                assert_eq!(reached, (lo..hi).collect::<Vec<_>>(), "{lo}..{hi}");
                assert!(nodes.len() <= 2 * 3, "{lo}..{hi}: {nodes:?}");
            }
        }
        assert_eq!(runs(0, 6, &[0, 2, 3]), vec![(1, 2), (4, 6)]);
        assert_eq!(runs(2, 4, &[]), vec![(2, 4)]);
        assert_eq!(runs(2, 4, &[2, 3]), vec![]);
    }

    #[test]
    fn max_flow_and_min_cut() {
        // s -> a (3), s -> b (2), a -> b (1), a -> t (2), b -> t (3)
        let mut g = Network::new(4);
        let (s, a, b, t) = (0, 1, 2, 3);
        g.add_edge(s, a, 3, ZERO);
        g.add_edge(s, b, 2, ZERO);
        g.add_edge(a, b, 1, ZERO);
        g.add_edge(a, t, 2, ZERO);
        g.add_edge(b, t, 3, ZERO);
        assert_eq!(g.max_flow(s, t), 5);
        let r = g.reaching(t);
        assert!(!r[s]);
    }

    #[test]
    fn min_cost_prefers_cheap_paths_and_reroutes() {
        // Two units from s to t; the cheap middle path must be undone by a
        // reverse edge to let both units through at minimum total cost.
        let mut g = Network::new(4);
        let (s, a, b, t) = (0, 1, 2, 3);
        let sa = g.add_edge(s, a, 1, c(0));
        let sb = g.add_edge(s, b, 1, c(0));
        let ab = g.add_edge(a, b, 1, c(0));
        let at = g.add_edge(a, t, 1, c(5));
        let bt = g.add_edge(b, t, 1, c(1));
        assert_eq!(g.min_cost_max_flow(s, t), 2);
        assert_eq!((g.flow(sa), g.flow(sb), g.flow(ab), g.flow(at), g.flow(bt)), (1, 1, 0, 1, 1));
    }

    #[test]
    fn lexicographic_costs_rank_components() {
        // Via a costs [0,0,1,0,..]; via b costs [0,0,0,9,..]: the earlier
        // component decides, however large the later one.
        let mut g = Network::new(4);
        let (s, a, b, t) = (0, 1, 2, 3);
        g.add_edge(s, a, 1, ZERO);
        g.add_edge(s, b, 1, ZERO);
        let mut via_a = ZERO;
        via_a[2] = 1;
        let mut via_b = ZERO;
        via_b[3] = 9;
        let at = g.add_edge(a, t, 1, via_a);
        let bt = g.add_edge(b, t, 1, via_b);
        assert_eq!(g.min_cost_max_flow(s, t), 2);
        assert_eq!((g.flow(at), g.flow(bt)), (1, 1));
        // With room for one unit only, the cheaper one (via b) is taken.
        let mut g = Network::new(5);
        let (s, a, b, m, t) = (0, 1, 2, 3, 4);
        g.add_edge(s, m, 1, ZERO);
        let ma = g.add_edge(m, a, 1, via_a);
        let mb = g.add_edge(m, b, 1, via_b);
        g.add_edge(a, t, 1, ZERO);
        g.add_edge(b, t, 1, ZERO);
        assert_eq!(g.min_cost_max_flow(s, t), 1);
        assert_eq!((g.flow(ma), g.flow(mb)), (0, 1));
    }
}
