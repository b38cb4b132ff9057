//! An in-memory cluster for tests, the simulator and embedders (cargo feature
//! `testkit`).
//!
//! [`Cluster`] drives any [`Protocol`] by the calling contract
//! ([`crate::contract::drain`]) in virtual time: a one-way latency (with
//! optional jitter), a clock per node with its own rate and offset, links
//! that can be cut one way or both, nodes that crash and restart from their
//! durable state, pause and resume, or lose their storage. It records every
//! input and output ([`Step`]), every message sent and every event, and
//! renders them as stable text ([`Show`]) for the data-driven scripts of
//! [`script`].
//!
//! ```
//! use tenure_core::testkit::{n, Cluster, TIMEOUT};
//! use tenure_core::ProtocolKind;
//!
//! let mut c = Cluster::of(ProtocolKind::Raft, 3);
//! c.run_for(TIMEOUT * 2);
//! assert_eq!(c.leader(), n(1));
//! c.crash(n(1));
//! let (next, _took) = c.run_until_leader_other_than(Some(n(1)), TIMEOUT * 3);
//! assert_eq!(next, n(2));
//! ```

mod clock;
mod cluster;
pub mod script;
mod trace;

pub use clock::{Clock, START};
pub use cluster::{
    Cluster, LeaderRecord, Liveness, Recorded, Sent, MAX_RECORDS, MAX_STEPS_PER_RUN,
};
pub use trace::{dump, fmt_time, render, Handled, Input, RoleChanges, Show, Step};

use crate::config::Config;
use crate::elector::Elector;
use crate::kind::ProtocolKind;
use crate::protocol::{HardState, Protocol};
use crate::time::Instant;
use crate::types::NodeId;
use rand_core::RngCore;
use rand_pcg::Pcg64Mcg;
use std::collections::BTreeMap;
use std::time::Duration;

/// The default heartbeat interval.
pub const HEARTBEAT: Duration = Duration::from_millis(100);
/// The default election timeout.
pub const TIMEOUT: Duration = Duration::from_millis(1000);
/// The default one-way latency of every link.
pub const LATENCY: Duration = Duration::from_millis(1);
/// The default seed of the nodes' and the network's generators.
pub const DEFAULT_SEED: u64 = 0xC0FFEE;
/// The largest clock offset [`Setup::random_clocks`] draws.
pub const MAX_RANDOM_OFFSET: Duration = Duration::from_secs(1000);

/// Node `i`.
pub fn n(i: u64) -> NodeId {
    NodeId(i)
}

/// The settings of a cluster before it starts.
#[derive(Clone, Debug)]
pub struct Setup {
    /// Voters `n1..=n(size)`, in that preference order.
    pub size: u64,
    /// Heartbeat interval of every node.
    pub heartbeat: Duration,
    /// Election timeout of every node.
    pub election_timeout: Duration,
    /// One-way latency of every link.
    pub latency: Duration,
    /// Extra latency drawn uniformly below this for each message (zero: none).
    pub jitter: Duration,
    /// Seed of the network's generator and, for [`Setup::elector`], the nodes'.
    pub seed: u64,
    /// Clocks that are not perfect; every other node's is [`Clock::PERFECT`].
    pub clocks: BTreeMap<NodeId, Clock>,
}

/// Builds a node's protocol: from its configuration, its durable state, its
/// clock's reading and the cluster-wide boot count (1 for the first node
/// booted; seeds a per-incarnation generator).
pub type Factory<P> = Box<dyn FnMut(&Config, HardState, Instant, u64) -> P>;

impl Setup {
    /// `size` voters with the default timing, perfect clocks and no jitter.
    pub fn new(size: u64) -> Self {
        Setup {
            size,
            heartbeat: HEARTBEAT,
            election_timeout: TIMEOUT,
            latency: LATENCY,
            jitter: Duration::ZERO,
            seed: DEFAULT_SEED,
            clocks: BTreeMap::new(),
        }
    }

    /// The voters.
    pub fn ids(&self) -> Vec<NodeId> {
        (1..=self.size).map(NodeId).collect()
    }

    /// Node `id`'s configuration (the defaults of [`Config::new`] otherwise).
    pub fn config(&self, id: NodeId) -> Config {
        Config::new(id, self.ids(), self.heartbeat, self.election_timeout)
    }

    /// Sets the seed.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Sets the one-way latency.
    pub fn latency(mut self, latency: Duration) -> Self {
        self.latency = latency;
        self
    }

    /// Sets the latency jitter.
    pub fn jitter(mut self, jitter: Duration) -> Self {
        self.jitter = jitter;
        self
    }

    /// Gives node `id` `clock`.
    pub fn clock(mut self, id: NodeId, clock: Clock) -> Self {
        self.clocks.insert(id, clock);
        self
    }

    /// Gives every node a clock drawn from `seed`: a rate within the
    /// configured drift bound and an offset below [`MAX_RANDOM_OFFSET`].
    pub fn random_clocks(mut self, seed: u64) -> Self {
        // `Pcg64Mcg::new` sets the state's low bit: shifted, seeds 2k and
        // 2k + 1 give different clocks.
        let mut rng = Pcg64Mcg::new((0x5EED_0000 ^ u128::from(seed)) << 1);
        let bound = u64::from(self.config(n(1)).clock_drift_ppm);
        for id in self.ids() {
            let rate_ppm = (rng.next_u64() % (2 * bound + 1)) as i64 - bound as i64;
            let offset_ns = rng.next_u64() % MAX_RANDOM_OFFSET.as_nanos() as u64;
            self.clocks.insert(id, Clock { rate_ppm, offset: Duration::from_nanos(offset_ns) });
        }
        self
    }

    /// The cluster, each node's protocol built by `factory`.
    pub fn build<P: Protocol>(
        self,
        factory: impl FnMut(&Config, HardState, Instant, u64) -> P + 'static,
    ) -> Cluster<P> {
        Cluster::new(self, Box::new(factory))
    }

    /// A cluster of [`Elector`]s running `kind`. Node `id` of boot `b` gets
    /// the generator `Pcg64Mcg::new((seed ^ id ^ (b << 64)) << 1)` (shifted:
    /// `new` sets the state's low bit, so unshifted ids 2 and 3 would share
    /// one stream).
    pub fn elector(self, kind: ProtocolKind) -> Cluster<Elector<Pcg64Mcg>> {
        let seed = u128::from(self.seed);
        self.build(move |cfg, state, now, boot| {
            let rng = Pcg64Mcg::new((seed ^ u128::from(cfg.id.0) ^ (u128::from(boot) << 64)) << 1);
            Elector::new(kind, cfg.clone(), state, rng, now)
        })
    }
}

impl Cluster<Elector<Pcg64Mcg>> {
    /// `size` nodes running `kind` with the default [`Setup`].
    pub fn of(kind: ProtocolKind, size: u64) -> Self {
        Setup::new(size).elector(kind)
    }
}
