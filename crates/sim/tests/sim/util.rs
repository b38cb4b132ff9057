//! What the files share: a run's parameters, a run of a named scenario,
//! and a failed run's story with the command that replays it.

use tenure_core::ProtocolKind;
use tenure_sim::scenario::{self, Params, Report};
use tenure_sim::workload::WorkloadSpec;

/// `protocol` on `nodes` nodes from `seed`, for `sim_seconds` simulated
/// seconds, with `workload` (`None`: the scenario's own, if any).
pub fn params(
    protocol: ProtocolKind,
    seed: u64,
    nodes: usize,
    sim_seconds: u64,
    workload: Option<WorkloadSpec>,
) -> Params {
    Params { protocol, nodes, sim_seconds: Some(sim_seconds), workload, ..Params::new(seed) }
}

/// Runs `p` through the scenario named `name`.
pub fn run(name: &str, p: &Params) -> Report {
    scenario::find(name).unwrap_or_else(|| panic!("scenario {name} exists")).run(p)
}

/// The failures and violations of `r`, a run of `p` through the scenario
/// `name`, and the `tenure sim` command that replays it; `flags` are what
/// the replay needs besides (`--workload partitions`), or "".
pub fn explain(name: &str, flags: &str, p: &Params, r: &Report) -> String {
    let mut replay = format!(
        "tenure sim --protocol {} --nodes {} --seeds 1 --start-seed {} --scenario {name}",
        p.protocol, p.nodes, p.seed
    );
    for flag in
        [flags.to_string(), p.sim_seconds.map(|s| format!("--sim-seconds {s}")).unwrap_or_default()]
    {
        if !flag.is_empty() {
            replay = format!("{replay} {flag}");
        }
    }
    format!(
        "{} seed {} ({} nodes): failures {:#?}, violations {:#?}; replay: {replay} --trace",
        p.protocol, p.seed, p.nodes, r.failures, r.violations
    )
}
