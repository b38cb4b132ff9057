//! The inputs of one scenario run: seed, cluster size, timings, protocol.

use crate::forger::ForgerSpec;
use crate::runner::SimConfig;
use crate::spy::SpyChoice;
use crate::workload::WorkloadSpec;
use std::time::Duration;
use tenure_core::ProtocolKind;

/// Inputs of one scenario run.
#[derive(Clone, Debug)]
pub struct Params {
    /// The run's seed.
    pub seed: u64,
    /// Cluster size, for scenarios whose size is not fixed.
    pub nodes: usize,
    /// Heartbeat interval.
    pub heartbeat: Duration,
    /// Election timeout.
    pub election_timeout: Duration,
    /// Length of the main phase (random faults, flaky network), if overridden.
    pub sim_seconds: Option<u64>,
    /// Trace every input and output to stderr.
    pub trace: bool,
    /// The election protocol under test.
    pub protocol: ProtocolKind,
    /// The forger, for scenarios that take one (`random`: off unless set;
    /// `hostile`: every attack unless set).
    pub forger: Option<ForgerSpec>,
    /// The key-value workload, for scenarios that take one (`random`: off
    /// unless set; `kv`: the default workload unless set).
    pub workload: Option<WorkloadSpec>,
    /// The spies that report crashed nodes dead, for scenarios that take
    /// them (`spy`: faulty ones by default; `random`: faulty ones in half
    /// of the seeds by default; `kv`, `elect`: none unless set).
    pub spies: SpyChoice,
}

impl Params {
    /// Defaults: 5 nodes, 100 ms heartbeats, 1 s election timeout.
    pub fn new(seed: u64) -> Self {
        Params {
            seed,
            nodes: 5,
            heartbeat: Duration::from_millis(100),
            election_timeout: Duration::from_millis(1000),
            sim_seconds: None,
            trace: false,
            protocol: ProtocolKind::Raft,
            forger: None,
            workload: None,
            spies: SpyChoice::Default,
        }
    }

    /// The simulator configuration for `nodes` nodes (with changes of
    /// members, a majority of them are the bootstrap voters, the rest
    /// spares: [`crate::membership::initial_voters`]).
    pub fn sim_config(&self, nodes: usize) -> SimConfig {
        let mut c = SimConfig::new(nodes);
        c.heartbeat = self.heartbeat;
        c.election_timeout = self.election_timeout;
        c.trace = self.trace;
        c.protocol = self.protocol;
        c.workload = self.workload.clone();
        if self.workload.as_ref().is_some_and(|w| w.membership.is_some()) {
            c.voters = crate::membership::initial_voters(nodes);
        }
        c
    }
}
