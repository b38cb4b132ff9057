//! `tenure sim`: runs a scenario over a range of seeds and reports pass/fail per
//! run, the replay command of every failure, and statistics (text or `--json`).

use crate::checker::Violation;
use crate::forger::{
    ForgedCounts, ForgerSpec, Promise, DEFAULT_FORGED_FRAMES_PER_SECOND,
    MAX_FORGED_FRAMES_PER_SECOND,
};
use crate::membership::{MembershipSpec, MembershipStats};
use crate::params::Params;
use crate::report::Report;
use crate::scenario::{self, ForgerUse, Scenario, SpyUse, WorkloadUse, SCENARIOS};
use crate::spy::{SpyChoice, SpyStats};
use crate::stats::{Aggregate, ElectStats, PartitionsStats, Percentiles, WorkloadStats};
use crate::workload::WorkloadSpec;
use serde::Serialize;
use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Most sessions `--sessions` takes (each is an app process of the
/// simulator, a few hundred bytes).
const MAX_SIM_SESSIONS: u64 = 1_000_000;
/// Failure details kept in the JSON report; the count covers the rest.
const MAX_DETAILS: usize = 100;

/// Arguments of `tenure sim`.
#[derive(Debug, Clone, clap::Args)]
#[command(
    args_conflicts_with_subcommands = true,
    after_help = "\
Examples:
  tenure sim --seeds 2000 --scenario random
  tenure sim --nodes 3 --start-seed 1002 --scenario leader-crash --trace   # replay one seed
  tenure sim compare --seeds 20"
)]
pub struct SimArgs {
    /// `compare`: every protocol through every scenario, one table.
    #[command(subcommand)]
    pub command: Option<SimCommand>,
    /// Cluster size (scenarios that fix their size ignore it; `membership`:
    /// every node, a majority of them the first voters, the rest spares).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=15))]
    pub nodes: u64,
    /// Number of runs (seeds start-seed, start-seed + 1, ...).
    #[arg(long, default_value_t = 1)]
    pub seeds: u64,
    /// First seed; drawn from the wall clock when absent (and printed first).
    #[arg(long)]
    pub start_seed: Option<u64>,
    /// Scenario name, `random`, or `list` to print the scenarios.
    #[arg(long, default_value = "random")]
    pub scenario: String,
    /// Length of the main phase in simulated seconds (random faults, flaky
    /// network; `random`: 20 by default, 6 TTLs with `--workload sessions`).
    #[arg(long)]
    pub sim_seconds: Option<u64>,
    /// Leader heartbeat interval, in milliseconds.
    #[arg(long, default_value_t = 100)]
    pub heartbeat_ms: u64,
    /// Election timeout, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    pub election_timeout_ms: u64,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// Trace every input, output and fault to stderr (for replaying one seed).
    #[arg(long)]
    pub trace: bool,
    /// Election protocol: raft (the default), ranked (the ELECT/VOTE paper's two-phase
    /// ELECT/VOTE) or paxos (TRex's Paxos with low-ball polling).
    #[arg(long, default_value = "raft")]
    pub protocol: tenure_core::ProtocolKind,
    /// Forged frames, for `random` (off unless given) and `hostile` (all
    /// unless given): `all`, or a comma-separated list of max-term,
    /// rising-term, huge-echo, forged-resign, forged-transfer, forged-claim.
    #[arg(long, value_name = "ATTACKS")]
    pub forger: Option<ForgerSpec>,
    /// Forged frames per second of simulated time.
    #[arg(long, default_value_t = DEFAULT_FORGED_FRAMES_PER_SECOND,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_FORGED_FRAMES_PER_SECOND)))]
    pub forger_rate: u32,
    /// A client workload beside the elections, for `random` (off unless
    /// given; `kv` and `elect` run theirs always): `kv`, a replicated
    /// key-value store written and read by clients, its history checked
    /// for linearizability; `elect`, application sessions and named
    /// elections over that store (and one key-value client), checked for
    /// overlapping holders, fencing tokens and starved candidates;
    /// `sessions`, app processes that only hold sessions (`--sessions`),
    /// checked for sessions that expire while their holder trusts them or
    /// outlive their TTL by more than the stated bound;
    /// `partitions`, members with sessions sharing groups of partitions
    /// that the leader's keeper assigns (and one key-value client), checked
    /// for overlapping owners, epochs, coverage, balance and moves. The
    /// `membership` scenario changes members under any of them (kv unless
    /// given).
    #[arg(long, value_name = "WORKLOAD")]
    pub workload: Option<WorkloadSpec>,
    /// Spies that report crashed nodes dead (death notices), for `spy`
    /// (faulty unless given), `random` (faulty in half of the seeds unless
    /// given), `kv` and `elect` (off unless given): `reliable` (every crash
    /// reported on time), `faulty` (on time, late, twice or never, equally
    /// likely) or `off`.
    #[arg(long, value_name = "SPIES")]
    pub spies: Option<SpyChoice>,
    /// `--workload sessions` only: how many app processes hold a session
    /// each (default 1,000; `tenure sim --workload sessions --sessions
    /// 10000 --seeds 3` runs ten thousand).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=MAX_SIM_SESSIONS))]
    pub sessions: Option<u64>,
    /// `membership` only: wiped nodes stay down for good (by default most
    /// come back under their ids, as joining spares).
    #[arg(long)]
    pub no_rejoin: bool,
}

/// Subcommands of `tenure sim`.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum SimCommand {
    /// Run every protocol through every scenario on the same seeds and print one
    /// table: outcome, violations, leader changes, failover p50/p99, election
    /// rounds and messages per failover, split votes.
    #[command(after_help = "\
Examples:
  tenure sim compare
  tenure sim compare --seeds 1000 --nodes 3 --markdown")]
    Compare(crate::compare::CompareArgs),
}

/// The `--json` report.
#[derive(Debug, Serialize)]
struct JsonReport {
    protocol: tenure_core::ProtocolKind,
    start_seed: u64,
    scenario: String,
    nodes: usize,
    runs: u64,
    passed: u64,
    failed: u64,
    violations: Details<Violation>,
    failed_expectations: Details<String>,
    /// Why the protocol does not promise the scenario's outcome, if it does not.
    not_promised: Option<&'static str>,
    /// Deviations from an outcome the protocol does not promise.
    observations: Details<String>,
    elections_per_failover: f64,
    one_round_failovers: f64,
    leader_changes: u64,
    elections: u64,
    split_votes: u64,
    failover_ms: Percentiles,
    /// Failovers after a leader crash that a spy reported on time.
    failover_on_notice_ms: Percentiles,
    messages_per_failover: f64,
    post_heal_flaps: u64,
    /// What the forger did, when one ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    forger: Option<ForgerReport>,
    /// What the key-value workload did, when it ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    workload: Option<WorkloadStats>,
    /// What the application elections did, when they ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    app_elections: Option<ElectStats>,
    /// What the changes of members did, when they ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    membership: Option<MembershipStats>,
    /// What the groups of partitions did, when they ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    partitions: Option<PartitionsReport>,
    /// What the spies did, when they watched.
    #[serde(skip_serializing_if = "Option::is_none")]
    spies: Option<SpyStats>,
    sim_seconds: f64,
    wall_seconds: f64,
    sim_seconds_per_wall_second: f64,
    replay: Vec<String>,
}

/// The groups of partitions' part of the `--json` report.
#[derive(Debug, Serialize)]
struct PartitionsReport {
    #[serde(flatten)]
    counts: PartitionsStats,
    /// Each time a partition was without an owner after healing.
    without_owner_ms: Percentiles,
    /// From healing to the last change of owner before every group was at
    /// rest (runs that came to rest).
    at_rest_after_healing_ms: Percentiles,
}

impl PartitionsReport {
    fn new(counts: &PartitionsStats) -> Self {
        PartitionsReport {
            without_owner_ms: Percentiles::of_ns(&counts.without_owner_ns),
            at_rest_after_healing_ms: Percentiles::of_ns(&counts.at_rest_ns),
            counts: counts.clone(),
        }
    }
}

/// The forger's part of the `--json` report.
#[derive(Debug, Serialize)]
struct ForgerReport {
    attacks: String,
    frames_per_second: u32,
    forged_frames: u64,
    /// Per attack: frames sent, and what the core promises under it.
    per_attack: BTreeMap<&'static str, AttackReport>,
}

#[derive(Debug, Serialize)]
struct AttackReport {
    frames: u64,
    promise: Promise,
}

impl ForgerReport {
    fn new(spec: &ForgerSpec, counts: &ForgedCounts) -> Self {
        ForgerReport {
            attacks: spec.to_string(),
            frames_per_second: spec.frames_per_second,
            forged_frames: counts.total(),
            per_attack: spec
                .attacks
                .iter()
                .map(|&a| (a.name(), AttackReport { frames: counts.of(a), promise: a.promise() }))
                .collect(),
        }
    }
}

#[derive(Debug, Serialize)]
struct Details<T> {
    count: usize,
    details: Vec<T>,
}

impl<T> Default for Details<T> {
    fn default() -> Self {
        Details { count: 0, details: Vec::new() }
    }
}

/// Runs `tenure sim` and returns the process exit code.
pub fn run(args: SimArgs) -> ExitCode {
    if let Some(SimCommand::Compare(compare)) = &args.command {
        return crate::compare::run(compare);
    }
    if args.scenario == "list" {
        for s in SCENARIOS {
            println!("{:<22} {}", s.name, s.description);
        }
        return ExitCode::SUCCESS;
    }
    let Some(scenario) = scenario::find(&args.scenario) else {
        let names: Vec<&str> = SCENARIOS.iter().map(|s| s.name).collect();
        eprintln!(
            "unknown scenario {:?}; try one of: {}, or list",
            args.scenario,
            names.join(", ")
        );
        return ExitCode::from(2);
    };
    let start_seed = args.start_seed.unwrap_or_else(|| {
        SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
    });
    if args.json {
        eprintln!("start seed: {start_seed}");
    } else {
        println!("start seed: {start_seed}");
    }
    let mut params = Params::new(start_seed);
    params.nodes = args.nodes as usize;
    params.heartbeat = Duration::from_millis(args.heartbeat_ms);
    params.election_timeout = Duration::from_millis(args.election_timeout_ms);
    params.sim_seconds = args.sim_seconds;
    params.trace = args.trace;
    params.protocol = args.protocol;
    params.forger = match forger_for(&args, scenario) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    params.workload = match workload_for(&args, scenario) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    if args.no_rejoin {
        if scenario.name != "membership" {
            eprintln!("--no-rejoin goes with the membership scenario");
            return ExitCode::from(2);
        }
        let w = params.workload.get_or_insert_with(WorkloadSpec::kv);
        w.membership = Some(MembershipSpec { rejoin: false });
    }
    params.spies = match spies_for(&args, scenario) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let check = params.sim_config(scenario.nodes(&params));
    if let Err(e) = check.core_config(tenure_core::NodeId(1)).validate_for(args.protocol) {
        eprintln!("invalid timing: {e}");
        return ExitCode::from(2);
    }

    let out = run_seeds(&args, scenario, &mut params, start_seed);
    if args.json {
        match serde_json::to_string_pretty(&out) {
            Ok(s) => println!("{s}"),
            Err(e) => {
                eprintln!("cannot encode the report: {e}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        print_summary(&out);
    }
    if out.failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The forger a run of `scenario` gets from `args`, or why it cannot have one.
fn forger_for(args: &SimArgs, scenario: &Scenario) -> Result<Option<ForgerSpec>, String> {
    let spec = match (scenario.forger, &args.forger) {
        (ForgerUse::Never, Some(_)) => {
            return Err(format!(
                "scenario {} runs no forger; --forger goes with random or hostile",
                scenario.name
            ))
        }
        (ForgerUse::Never, None) | (ForgerUse::Optional, None) => return Ok(None),
        (ForgerUse::Optional | ForgerUse::Always, Some(spec)) => spec.clone(),
        (ForgerUse::Always, None) => ForgerSpec::all(),
    };
    Ok(Some(ForgerSpec { frames_per_second: args.forger_rate, ..spec }))
}

/// The workload a run of `scenario` gets from `args`, or why it cannot have one.
fn workload_for(args: &SimArgs, scenario: &Scenario) -> Result<Option<WorkloadSpec>, String> {
    let sessions_named = args.workload.as_ref().is_some_and(|w| w.to_string() == "sessions");
    if args.sessions.is_some() && !sessions_named {
        return Err("--sessions goes with --workload sessions".into());
    }
    let spec = match (scenario.workload, &args.workload) {
        (WorkloadUse::Never, Some(_)) => {
            return Err(format!(
                "scenario {} runs no workload; --workload goes with random (or use kv or elect)",
                scenario.name
            ))
        }
        (WorkloadUse::Never | WorkloadUse::Optional, None) => return Ok(None),
        (_, Some(spec)) => spec.clone(),
        (WorkloadUse::Always, None) if scenario.name == "elect" => WorkloadSpec::elect(),
        (WorkloadUse::Always, None) => WorkloadSpec::kv(),
    };
    let spec = match args.sessions {
        Some(n) => WorkloadSpec::sessions(n as usize),
        None => spec,
    };
    if args.forger.is_some() {
        return Err("the forger and the key-value workload do not run together: the \
                    forger's rising-term frames name leaders that do not exist, which the \
                    replica trusts as the elector's word"
            .into());
    }
    Ok(Some(spec))
}

/// The spies a run of `scenario` gets from `args`, or why it cannot have them.
fn spies_for(args: &SimArgs, scenario: &Scenario) -> Result<SpyChoice, String> {
    match (scenario.spies, args.spies) {
        (SpyUse::Never, Some(SpyChoice::On(_))) => Err(format!(
            "scenario {} runs no spies; --spies goes with spy, random, kv or elect",
            scenario.name
        )),
        (_, choice) => Ok(choice.unwrap_or_default()),
    }
}

/// Runs `args.seeds` runs of `scenario` from `start_seed`, printing one line per
/// run unless `--json`, and gathers the report.
fn run_seeds(
    args: &SimArgs,
    scenario: &Scenario,
    params: &mut Params,
    start_seed: u64,
) -> JsonReport {
    let mut agg = Aggregate::default();
    let mut violations = Details::default();
    let mut failed_expectations = Details::default();
    let mut observations = Details::default();
    let mut replay = Vec::new();
    let mut failed = 0;
    let wall = std::time::Instant::now();
    for k in 0..args.seeds {
        params.seed = start_seed.wrapping_add(k);
        let report = scenario.run(params);
        agg.add(&report.stats);
        violations.count += report.violation_count;
        failed_expectations.count += report.failures.len();
        for v in &report.violations {
            if violations.details.len() < MAX_DETAILS {
                violations.details.push(v.clone());
            }
        }
        for f in &report.failures {
            if failed_expectations.details.len() < MAX_DETAILS {
                failed_expectations.details.push(format!("seed {}: {f}", report.seed));
            }
        }
        observations.count += report.observations.len();
        for o in &report.observations {
            if observations.details.len() < MAX_DETAILS {
                observations.details.push(format!("seed {}: {o}", report.seed));
            }
        }
        let cmd = replay_command(args, &report);
        if !args.json {
            print_run(&report, &cmd);
        }
        if !report.passed() {
            failed += 1;
            if replay.len() < MAX_DETAILS {
                replay.push(cmd);
            }
        }
    }
    let wall_s = wall.elapsed().as_secs_f64();
    let sim_s = agg.sim_ns as f64 / 1e9;
    JsonReport {
        protocol: args.protocol,
        start_seed,
        scenario: scenario.name.to_string(),
        nodes: scenario.nodes(params),
        runs: agg.runs,
        passed: agg.runs - failed,
        failed,
        violations,
        failed_expectations,
        not_promised: scenario.not_promised_by(args.protocol),
        observations,
        elections_per_failover: agg.elections_per_failover(),
        one_round_failovers: agg.one_round_failovers(),
        leader_changes: agg.leader_changes,
        elections: agg.elections,
        split_votes: agg.split_votes,
        failover_ms: Percentiles::of_ns(&agg.failovers_ns),
        failover_on_notice_ms: Percentiles::of_ns(&agg.failovers_on_notice_ns),
        messages_per_failover: agg.messages_per_failover(),
        post_heal_flaps: agg.post_heal_flaps,
        forger: params.forger.as_ref().map(|spec| ForgerReport::new(spec, &agg.forged)),
        workload: agg.workload.clone(),
        app_elections: agg.elect,
        membership: agg.membership,
        partitions: agg.partitions.as_ref().map(PartitionsReport::new),
        spies: agg.spy,
        sim_seconds: sim_s,
        wall_seconds: wall_s,
        sim_seconds_per_wall_second: if wall_s > 0.0 { sim_s / wall_s } else { 0.0 },
        replay,
    }
}

/// The application elections' line of the summary.
fn print_elections(e: &ElectStats) {
    println!(
        "elections: {} leaderships ({} handovers, {} resumed by a renewal), {} sessions granted, \
         {} renewals ({} refused), {} expiries (stale ones: {} adopted by a new leader, {} lost), \
         {} deadline stops, {} sessions lost, \
         {} resignations, {} revocations; app faults: {} crashes, {} pauses, {} cut-offs; \
         max overlap {} ns, {} starved names; {} lease checkpoints, {} expiries checked, \
         largest overrun {}‰ of its bound; {} expiries of sessions still held checked against \
         their holders' deadlines",
        e.leaderships,
        e.handovers,
        e.resumed,
        e.grants,
        e.renewals,
        e.renewals_refused,
        e.expiries,
        e.stale_expiries_adopted,
        e.stale_expiries_lost,
        e.deadline_stops,
        e.sessions_lost,
        e.resignations,
        e.revocations,
        e.app_crashes,
        e.app_pauses,
        e.app_cutoffs,
        e.max_overlap_ns,
        e.starved_names,
        e.checkpoints,
        e.expiries_checked,
        e.max_overrun_permille,
        e.held_expiries
    );
}

/// The groups of partitions' lines of the summary.
fn print_partitions(r: &PartitionsReport) {
    let p = &r.counts;
    println!(
        "partitions in {} runs ({} with weights and zones): {} sessions granted, {} renewals \
         ({} refused), {} expiries, {} deadline stops, {} sessions lost; {} joins ({} changes \
         of spec), {} leaves, {} revocations; {} ownerships, {} moves, {} releases ({} partitions \
         handed over in them); keeper: {} \
         plans, {} transactions ({} applied, {} voided); member faults: {} crashes, {} pauses, \
         {} cut-offs; max overlap {} ns; member keys back after a leave (a late join) {}, \
         partitions granted on them {}",
        p.runs,
        p.weighted_runs,
        p.grants,
        p.renewals,
        p.renewals_refused,
        p.expiries,
        p.deadline_stops,
        p.sessions_lost,
        p.joins,
        p.flips,
        p.leaves,
        p.revocations,
        p.holdings,
        p.moves,
        p.releases,
        p.handovers,
        p.keeper_plans,
        p.keeper_transactions,
        p.keeper_applied,
        p.keeper_voided,
        p.app_crashes,
        p.app_pauses,
        p.app_cutoffs,
        p.max_overlap_ns,
        p.stray_members,
        p.stray_grants
    );
    let (gap, rest) = (&r.without_owner_ms, &r.at_rest_after_healing_ms);
    println!(
        "partitions after healing: {} of {} runs at rest (last move p50 {:.0} ms, p99 {:.0} ms), \
         {} partitions without an owner and {} members or zones off their share at the checks; \
         time without owner p50 {:.0} ms p99 {:.0} ms max {:.0} ms ({} samples); {} changes of \
         members measured: {} moves, the fewest {}, at most {} beyond",
        p.at_rest_runs,
        p.runs,
        rest.p50,
        rest.p99,
        p.unowned,
        p.unbalanced,
        gap.p50,
        gap.p99,
        gap.max,
        gap.samples,
        p.changes_measured,
        p.change_moves,
        p.change_min_moves,
        p.max_excess_moves
    );
}

/// The changes of members' line of the summary.
fn print_membership(m: &MembershipStats) {
    println!(
        "membership in {} runs: {} changes proposed, refused {} behind, {} unhealthy, {} other; \
         {} committed: {} learners added, {} promotions, {} learners removed, {} voters removed; \
         {} replacements, {} nodes retired (wiped), {} joined again; \
         {} messages from wiped directories dropped; at most {} voters",
        m.runs,
        m.proposed,
        m.refused_behind,
        m.refused_unhealthy,
        m.refused_other,
        m.committed,
        m.learners_added,
        m.promotions,
        m.learners_removed,
        m.voters_removed,
        m.replacements,
        m.retirements,
        m.rejoins,
        m.stale_directory_drops,
        m.max_voters
    );
}

/// The spies' line of the summary.
fn print_spies(s: &SpyStats, fast: &Percentiles) {
    println!(
        "spies in {} runs: crashes reported {} on time, {} late, {} twice, {} never; \
         {} notices arrived, {} given to a core, {} stale (dropped: the node had restarted); \
         failover after an on-time notice p50 {:.0} ms p99 {:.0} ms max {:.0} ms ({} samples)",
        s.runs,
        s.on_time,
        s.late,
        s.duplicated,
        s.lost,
        s.notices_arrived,
        s.notices_delivered,
        s.notices_stale,
        fast.p50,
        fast.p99,
        fast.max,
        fast.samples
    );
}

/// The exact command that replays one run.
fn replay_command(args: &SimArgs, r: &Report) -> String {
    let mut cmd = format!(
        "tenure sim --protocol {} --nodes {} --seeds 1 --start-seed {} --scenario {} --heartbeat-ms {} --election-timeout-ms {}",
        args.protocol, r.nodes, r.seed, r.scenario, args.heartbeat_ms, args.election_timeout_ms
    );
    if let Some(s) = args.sim_seconds {
        cmd.push_str(&format!(" --sim-seconds {s}"));
    }
    if let Some(f) = &args.forger {
        cmd.push_str(&format!(" --forger {f}"));
    }
    if args.forger_rate != DEFAULT_FORGED_FRAMES_PER_SECOND {
        cmd.push_str(&format!(" --forger-rate {}", args.forger_rate));
    }
    if let Some(w) = &args.workload {
        cmd.push_str(&format!(" --workload {w}"));
    }
    if let Some(n) = args.sessions {
        cmd.push_str(&format!(" --sessions {n}"));
    }
    if args.no_rejoin {
        cmd.push_str(" --no-rejoin");
    }
    if let Some(s) = &args.spies {
        cmd.push_str(&format!(" --spies {s}"));
    }
    cmd
}

fn print_run(r: &Report, cmd: &str) {
    let verdict = if r.passed() { "PASS" } else { "FAIL" };
    println!(
        "seed {} {}: {verdict} ({:.1} s simulated, {} elections, {} leader changes, {} split votes)",
        r.seed,
        r.scenario,
        r.stats.sim_ns as f64 / 1e9,
        r.stats.elections,
        r.stats.leader_changes,
        r.stats.split_votes()
    );
    for f in &r.failures {
        println!("  expectation failed: {f}");
    }
    for o in &r.observations {
        println!("  observed (not promised by this protocol): {o}");
    }
    for v in &r.violations {
        println!("  violation: {v}");
    }
    if r.violation_count > r.violations.len() {
        println!("  ... {} more violations", r.violation_count - r.violations.len());
    }
    if !r.passed() {
        println!("  replay: {cmd}");
    }
}

fn print_summary(o: &JsonReport) {
    println!(
        "{} runs of {}: {} passed, {} failed; {} violations, {} failed expectations",
        o.runs, o.scenario, o.passed, o.failed, o.violations.count, o.failed_expectations.count
    );
    println!(
        "elections {}, leader changes {}, split votes {}, failover p50 {:.0} ms p99 {:.0} ms max {:.0} ms ({} samples), {:.1} messages per failover",
        o.elections,
        o.leader_changes,
        o.split_votes,
        o.failover_ms.p50,
        o.failover_ms.p99,
        o.failover_ms.max,
        o.failover_ms.samples,
        o.messages_per_failover
    );
    println!(
        "{:.2} election rounds per failover, {:.1}% of failovers in one round",
        o.elections_per_failover,
        100.0 * o.one_round_failovers
    );
    if let Some(why) = o.not_promised {
        println!(
            "the {} protocol does not promise this scenario's outcome ({why}); {} deviations observed",
            o.protocol, o.observations.count
        );
    }
    println!("stable leaderships lost after healing, within the bound: {}", o.post_heal_flaps);
    if let Some(f) = &o.forger {
        let per: Vec<String> = f
            .per_attack
            .iter()
            .map(|(name, a)| format!("{name} {} ({})", a.frames, a.promise.describe()))
            .collect();
        println!(
            "forger ({}, at most {} frames/s): {} forged frames: {}",
            f.attacks,
            f.frames_per_second,
            f.forged_frames,
            per.join(", ")
        );
    }
    if let Some(w) = &o.workload {
        println!(
            "workload: {} operations ({} reads): {} acknowledged, {} unknown, {} not executed; \
             {} final reads without an answer; linearizability undecided in {} runs ({} keys); \
             {} torn log writes, {} failed log writes; {} forwarded requests and answers",
            w.ops,
            w.reads,
            w.acknowledged,
            w.unknown,
            w.not_executed,
            w.final_reads_missing,
            w.undecided_runs,
            w.undecided_keys,
            w.torn_writes,
            w.failed_writes,
            w.forwards
        );
    }
    if let Some(e) = &o.app_elections {
        print_elections(e);
    }
    if let Some(m) = &o.membership {
        print_membership(m);
    }
    if let Some(p) = &o.partitions {
        print_partitions(p);
    }
    if let Some(s) = &o.spies {
        print_spies(s, &o.failover_on_notice_ms);
    }
    println!(
        "{:.0} simulated seconds in {:.2} wall seconds: {:.0} simulated seconds per wall second",
        o.sim_seconds, o.wall_seconds, o.sim_seconds_per_wall_second
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        sim: SimArgs,
    }

    fn args(line: &str) -> SimArgs {
        Cli::parse_from(std::iter::once("sim").chain(line.split_whitespace())).sim
    }

    #[test]
    fn the_json_report_has_the_promised_fields() {
        let a = args("--seeds 3 --start-seed 10 --scenario leader-crash --json");
        let scenario = scenario::find(&a.scenario).expect("exists");
        let mut params = Params::new(10);
        let out = run_seeds(&a, scenario, &mut params, 10);
        assert_eq!((out.runs, out.failed, out.violations.count), (3, 0, 0));
        // One failover per run, each one election round.
        assert_eq!(out.failover_ms.samples, 3);
        assert_eq!(out.elections, 6);
        let json: serde_json::Value = serde_json::to_value(&out).expect("serializable");
        for key in [
            "runs",
            "violations",
            "leader_changes",
            "elections",
            "split_votes",
            "failover_ms",
            "messages_per_failover",
            "sim_seconds_per_wall_second",
        ] {
            assert!(json.get(key).is_some(), "missing {key}");
        }
        assert!(json["failover_ms"]["p99"].as_f64().is_some_and(|p| p > 0.0));
        assert!(json["violations"]["details"].is_array());
    }

    #[test]
    fn the_forger_goes_with_random_and_hostile_only() {
        let find = |a: &SimArgs| scenario::find(&a.scenario).expect("exists");
        let a = args("--scenario random");
        assert_eq!(forger_for(&a, find(&a)), Ok(None), "off by default");
        let a = args("--scenario hostile");
        assert_eq!(forger_for(&a, find(&a)), Ok(Some(ForgerSpec::all())), "hostile: every attack");
        let a = args("--scenario random --forger huge-echo,max-term --forger-rate 20");
        let spec = forger_for(&a, find(&a)).expect("accepted").expect("a forger");
        assert_eq!(spec.to_string(), "max-term,huge-echo");
        assert_eq!(spec.frames_per_second, 20);
        let a = args("--scenario leader-crash --forger all");
        assert!(forger_for(&a, find(&a)).unwrap_err().contains("random or hostile"));
        let bad = Cli::try_parse_from(["sim", "--forger", "max-term,typo"]).err().expect("refused");
        assert!(bad.to_string().contains("typo"), "{bad}");
        let fast = Cli::try_parse_from(["sim", "--forger", "all", "--forger-rate", "201"]);
        assert!(fast.is_err(), "at most MAX_FORGED_FRAMES_PER_SECOND");
    }

    #[test]
    fn hostile_runs_report_the_forger_and_replay_it() {
        let a = args(
            "--seeds 2 --start-seed 3 --scenario hostile --forger forged-resign --sim-seconds 3",
        );
        let scenario = scenario::find(&a.scenario).expect("exists");
        let mut params = Params::new(3);
        params.sim_seconds = a.sim_seconds;
        params.forger = forger_for(&a, scenario).expect("accepted");
        let out = run_seeds(&a, scenario, &mut params, 3);
        let json: serde_json::Value = serde_json::to_value(&out).expect("serializable");
        assert_eq!(json["forger"]["attacks"], "forged-resign");
        assert!(json["forger"]["forged_frames"].as_u64().is_some_and(|n| n > 0));
        assert_eq!(json["forger"]["per_attack"]["forged-resign"]["promise"], "refused");
        let r = scenario.run(&params);
        assert!(replay_command(&a, &r).ends_with(
            "--scenario hostile --heartbeat-ms 100 \
             --election-timeout-ms 1000 --sim-seconds 3 --forger forged-resign"
        ));
        // Without a forger the report has no forger field (outputs unchanged).
        let a = args("--seeds 1 --start-seed 3 --scenario random --json");
        let out = run_seeds(&a, scenario::find("random").expect("exists"), &mut Params::new(3), 3);
        let json: serde_json::Value = serde_json::to_value(&out).expect("serializable");
        assert!(json.get("forger").is_none());
    }

    #[test]
    fn the_sessions_workload_takes_its_count_and_replays_with_it() {
        let random = scenario::find("random").expect("random exists");
        let refused = workload_for(&args("--sessions 10"), random);
        assert!(refused.is_err_and(|e| e.contains("--workload sessions")));
        let refused = workload_for(&args("--workload elect --sessions 10"), random);
        assert!(refused.is_err());
        let a = args("--workload sessions --sessions 50 --sim-seconds 2 --seeds 1 --start-seed 4");
        let spec = workload_for(&a, random).expect("accepted").expect("a workload");
        let elect = spec.elect.as_ref().expect("sessions are app processes");
        assert_eq!((elect.apps, elect.names, spec.to_string().as_str()), (50, 0, "sessions"));
        let mut params = Params::new(4);
        params.sim_seconds = a.sim_seconds;
        params.workload = Some(spec);
        let r = random.run(&params);
        assert!(r.passed(), "{:?} {:?}", r.failures, r.violations);
        assert!(r.stats.elect.is_some_and(|e| e.grants >= 50 && e.leaderships == 0));
        let replay = replay_command(&a, &r);
        assert!(replay.ends_with("--sim-seconds 2 --workload sessions --sessions 50"), "{replay}");
    }

    #[test]
    fn the_partitions_workload_reports_its_figures_and_replays() {
        let a = args("--seeds 2 --start-seed 3 --workload partitions --sim-seconds 3 --json");
        let scenario = scenario::find(&a.scenario).expect("exists");
        let mut params = Params::new(3);
        params.sim_seconds = a.sim_seconds;
        params.workload = workload_for(&a, scenario).expect("accepted");
        let out = run_seeds(&a, scenario, &mut params, 3);
        assert_eq!((out.runs, out.failed), (2, 0), "{:?}", out.violations.details);
        let json: serde_json::Value = serde_json::to_value(&out).expect("serializable");
        let p = &json["partitions"];
        assert_eq!(p["runs"], 2);
        assert!(p["holdings"].as_u64().is_some_and(|n| n > 0), "{p}");
        assert!(p["without_owner_ms"]["samples"].as_u64().is_some_and(|n| n > 0), "{p}");
        assert!(p.get("without_owner_ns").is_none(), "the samples are summarised");
        let r = scenario.run(&params);
        assert!(replay_command(&a, &r).ends_with("--sim-seconds 3 --workload partitions"));
    }

    #[test]
    fn replay_commands_name_the_seed_and_settings() {
        let a = args(
            "--seeds 1 --start-seed 5 --heartbeat-ms 50 --election-timeout-ms 500 --sim-seconds 7",
        );
        let r = scenario::find("random").expect("exists").run(&Params {
            heartbeat: Duration::from_millis(50),
            election_timeout: Duration::from_millis(500),
            sim_seconds: Some(7),
            ..Params::new(5)
        });
        assert_eq!(
            replay_command(&a, &r),
            "tenure sim --protocol raft --nodes 5 --seeds 1 --start-seed 5 --scenario random --heartbeat-ms 50 \
             --election-timeout-ms 500 --sim-seconds 7"
        );
    }
}
