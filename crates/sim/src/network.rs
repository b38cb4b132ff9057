//! The simulated network: per-link latency, loss, duplication and reordering,
//! and partitions (a blocked link drops what it carries, in flight too).
//!
//! Links are directed: `(from, to)` can be cut while `(to, from)` still works,
//! which models asymmetric partitions.

use rand::Rng;
use rand_pcg::Pcg64Mcg;

/// Nanoseconds in a millisecond.
pub const NS_PER_MS: u64 = 1_000_000;

/// The behaviour of one directed link.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkParams {
    /// Smallest one-way latency, in nanoseconds.
    pub latency_min_ns: u64,
    /// Largest one-way latency (before reordering delay), in nanoseconds.
    pub latency_max_ns: u64,
    /// Probability that a message is lost.
    pub loss: f64,
    /// Probability that a message is delivered twice.
    pub duplicate: f64,
    /// Probability that a message is held back by up to `reorder_max_ns` more,
    /// so that later messages overtake it.
    pub reorder: f64,
    /// Largest extra delay of a reordered message, in nanoseconds.
    pub reorder_max_ns: u64,
}

impl LinkParams {
    /// A healthy LAN link: 1–5 ms, nothing lost, duplicated or reordered beyond jitter.
    pub const HEALTHY: LinkParams = LinkParams {
        latency_min_ns: NS_PER_MS,
        latency_max_ns: 5 * NS_PER_MS,
        loss: 0.0,
        duplicate: 0.0,
        reorder: 0.0,
        reorder_max_ns: 0,
    };

    /// The largest delay this link can impose on a message.
    pub fn max_delay_ns(&self) -> u64 {
        self.latency_max_ns + if self.reorder > 0.0 { self.reorder_max_ns } else { 0 }
    }
}

/// All links of a cluster of `n` nodes, indexed `from * n + to`.
#[derive(Clone, Debug)]
pub struct Network {
    n: usize,
    params: Vec<LinkParams>,
    blocked: Vec<bool>,
}

impl Network {
    /// A fully connected network of `n` nodes with the given link behaviour.
    pub fn new(n: usize, params: LinkParams) -> Self {
        Network { n, params: vec![params; n * n], blocked: vec![false; n * n] }
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.n
    }

    /// True for a network with no nodes.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    fn idx(&self, from: usize, to: usize) -> usize {
        debug_assert!(from < self.n && to < self.n);
        from * self.n + to
    }

    /// True when messages from `from` to `to` are dropped.
    pub fn is_blocked(&self, from: usize, to: usize) -> bool {
        self.blocked[self.idx(from, to)]
    }

    /// Blocks or unblocks the directed link `from -> to`.
    pub fn set_blocked(&mut self, from: usize, to: usize, blocked: bool) {
        let i = self.idx(from, to);
        self.blocked[i] = blocked;
    }

    /// Cuts both directions between `a` and `b`.
    pub fn cut_link(&mut self, a: usize, b: usize) {
        self.set_blocked(a, b, true);
        self.set_blocked(b, a, true);
    }

    /// Cuts every link to and from `node`.
    pub fn isolate(&mut self, node: usize) {
        for other in (0..self.n).filter(|&o| o != node) {
            self.cut_link(node, other);
        }
    }

    /// Cuts every link into `node`: it can send but not receive.
    pub fn deafen(&mut self, node: usize) {
        for other in (0..self.n).filter(|&o| o != node) {
            self.set_blocked(other, node, true);
        }
    }

    /// Splits the cluster: nodes in `side` reach each other only, the rest likewise.
    pub fn split(&mut self, side: &[usize]) {
        for a in 0..self.n {
            for b in 0..self.n {
                if a != b && side.contains(&a) != side.contains(&b) {
                    self.set_blocked(a, b, true);
                }
            }
        }
    }

    /// Removes every partition.
    pub fn heal_partitions(&mut self) {
        self.blocked.iter_mut().for_each(|b| *b = false);
    }

    /// Sets the behaviour of every link.
    pub fn set_all_params(&mut self, params: LinkParams) {
        self.params.iter_mut().for_each(|p| *p = params);
    }

    /// Sets the behaviour of the directed link `from -> to`.
    pub fn set_params(&mut self, from: usize, to: usize, params: LinkParams) {
        let i = self.idx(from, to);
        self.params[i] = params;
    }

    /// The behaviour of the directed link `from -> to`.
    pub fn params(&self, from: usize, to: usize) -> LinkParams {
        self.params[self.idx(from, to)]
    }

    /// The largest delay any link can impose now.
    pub fn max_delay_ns(&self) -> u64 {
        self.params.iter().map(LinkParams::max_delay_ns).max().unwrap_or(0)
    }

    /// Decides the fate of one message sent on `from -> to`: the delays after
    /// which each copy arrives (none when lost or blocked, two when duplicated).
    pub fn transmit(&self, rng: &mut Pcg64Mcg, from: usize, to: usize) -> Delays {
        let mut out = Delays::default();
        if self.is_blocked(from, to) {
            return out;
        }
        let p = self.params(from, to);
        if p.loss > 0.0 && rng.gen_bool(p.loss) {
            return out;
        }
        let copies = if p.duplicate > 0.0 && rng.gen_bool(p.duplicate) { 2 } else { 1 };
        for _ in 0..copies {
            let mut d = rng.gen_range(p.latency_min_ns..=p.latency_max_ns.max(p.latency_min_ns));
            if p.reorder > 0.0 && p.reorder_max_ns > 0 && rng.gen_bool(p.reorder) {
                d += rng.gen_range(0..=p.reorder_max_ns);
            }
            out.push(d);
        }
        out
    }
}

/// The delays of the copies of one message: at most two (a duplicate).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Delays {
    len: usize,
    delays: [u64; 2],
}

impl Delays {
    fn push(&mut self, d: u64) {
        self.delays[self.len] = d;
        self.len += 1;
    }

    /// The delays, one per delivered copy.
    pub fn as_slice(&self) -> &[u64] {
        &self.delays[..self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_block_directions_independently() {
        let mut net = Network::new(3, LinkParams::HEALTHY);
        net.deafen(0);
        assert!(net.is_blocked(1, 0) && net.is_blocked(2, 0));
        assert!(!net.is_blocked(0, 1) && !net.is_blocked(0, 2));
        net.heal_partitions();
        net.split(&[0]);
        assert!(net.is_blocked(0, 1) && net.is_blocked(2, 0) && !net.is_blocked(1, 2));
        let mut rng = Pcg64Mcg::new(1);
        assert!(net.transmit(&mut rng, 0, 1).as_slice().is_empty());
        let d = net.transmit(&mut rng, 1, 2);
        assert_eq!(d.as_slice().len(), 1);
        assert!((NS_PER_MS..=5 * NS_PER_MS).contains(&d.as_slice()[0]));
    }

    #[test]
    fn loss_and_duplication_happen_at_their_rates() {
        let mut p = LinkParams::HEALTHY;
        p.loss = 0.2;
        p.duplicate = 0.1;
        let net = Network::new(2, p);
        let mut rng = Pcg64Mcg::new(9);
        let copies: usize =
            (0..10_000).map(|_| net.transmit(&mut rng, 0, 1).as_slice().len()).sum();
        // Expected 0.8 * 1.1 * 10_000 = 8_800 copies.
        assert!((8_400..9_200).contains(&copies), "{copies}");
    }
}
