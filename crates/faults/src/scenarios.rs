//! The fault scenarios. Each starts a fresh cluster in namespaces, runs the
//! checker for its whole length, injects its faults, and returns the
//! numbers it measured, or a failure message with the checker's violations
//! and the tail of every server log (which records each role change with
//! its reason and term).

use crate::checker::{Checker, State};
use crate::cluster::{Cluster, Spies, Timings};
use std::time::{Duration, Instant};

/// Timings of every scenario: short, to keep the suite fast, but with room
/// for scheduling delays on a shared two-core machine.
pub const TIMINGS: Timings = Timings { heartbeat_ms: 30, election_timeout_ms: 300 };
/// Bound on the first election, including process start-up.
pub const FIRST_ELECTION_BOUND: Duration = Duration::from_secs(15);
/// Margin over two election timeouts for failover and convergence after a
/// heal: the followers' timeout runs out within one election timeout of the
/// last heartbeat, ranked candidacy staggers by at most about another one,
/// pre-vote and vote take a round trip each; the rest absorbs scheduling on a
/// loaded machine and the transport's reconnect backoff (capped at
/// election_timeout / 4).
pub const BOUND_MARGIN: Duration = Duration::from_millis(500);
/// Extra allowance when a killed server has to start again (process start,
/// reading its state file) before it can agree.
pub const RESTART_MARGIN: Duration = Duration::from_secs(2);

/// Failover / convergence bound: 2 × election timeout + [`BOUND_MARGIN`]
/// (1100 ms with [`TIMINGS`]).
pub fn heal_bound(t: Timings) -> Duration {
    2 * t.election_timeout() + BOUND_MARGIN
}

/// The status endpoint.
const STATUS_PATH: &str = "/v1/status";
/// The lease-checked leadership endpoint.
const IS_LEADER_PATH: &str = "/v1/is-leader";
/// How long a probe of a paused node waits for its answer.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);
/// Time for a probe's connection to reach the paused node's socket.
const PROBE_CONNECT: Duration = Duration::from_millis(50);

/// How long a late agreement is still waited for, to report by how much
/// the bound was missed.
pub const LIVENESS_CAP: Duration = Duration::from_secs(20);

/// What a scenario measured, one line per fact.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Human-readable measurements.
    pub lines: Vec<String>,
}

impl Outcome {
    pub(crate) fn note(&mut self, line: String) {
        self.lines.push(line);
    }
}

/// Serialises the scenarios of one test binary: they share the machine.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs scenario `name` as a test: one at a time (whatever
/// `--test-threads`), skipped visibly without network namespaces (a
/// failure with `TENURE_FAULTS_REQUIRE=1`), on a two-thread runtime; prints
/// what it measured, or panics with its failure message.
pub fn run_test<F: std::future::Future<Output = Result<Outcome, String>>>(
    name: &str,
    scenario: impl FnOnce() -> F,
) {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(s) = crate::skip::require_netns() {
        s.report(name);
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    match rt.block_on(scenario()) {
        Ok(outcome) => {
            for l in &outcome.lines {
                eprintln!("{name}: {l}");
            }
        }
        Err(msg) => panic!("{name} FAILED: {msg}"),
    }
}

/// A running cluster with its checker.
pub struct Run {
    /// The servers (dropped after the checker: field order).
    pub checker: Checker,
    /// The cluster.
    pub cluster: Cluster,
}

impl Run {
    /// Starts `n` servers with `timings` and the checker.
    pub async fn start(n: usize, timings: Timings) -> Result<Self, String> {
        Self::start_with_hosts(n, 0, timings).await
    }

    /// As [`Run::start`], with `hosts` application hosts
    /// ([`Cluster::start_with_hosts`]).
    pub async fn start_with_hosts(
        n: usize,
        hosts: usize,
        timings: Timings,
    ) -> Result<Self, String> {
        Self::start_with(n, hosts, timings, Spies::default()).await
    }

    /// As [`Run::start_with_hosts`], with the servers launched with `spies`
    /// ([`Cluster::start_with`]).
    pub async fn start_with(
        n: usize,
        hosts: usize,
        timings: Timings,
        spies: Spies,
    ) -> Result<Self, String> {
        let cluster = Cluster::start_with(n, hosts, timings, spies)
            .map_err(|e| format!("cluster start: {e}"))?;
        Self::watch(cluster)
    }

    /// A cluster of `first` members with `spare` slots where nodes can join
    /// later and `hosts` application hosts ([`Cluster::start_growable`]);
    /// the checker watches every slot from the start.
    pub async fn start_growable(
        first: usize,
        spare: usize,
        hosts: usize,
        timings: Timings,
    ) -> Result<Self, String> {
        let cluster = Cluster::start_growable(first, spare, hosts, timings)
            .map_err(|e| format!("cluster start: {e}"))?;
        Self::watch(cluster)
    }

    /// `cluster` with a checker of every node of it.
    fn watch(cluster: Cluster) -> Result<Self, String> {
        let ids = (0..cluster.len()).map(|i| cluster.id(i)).collect();
        let api = cluster.api().map_err(|e| format!("cluster start: {e}"))?;
        let checker = Checker::start(cluster.http_addrs(), ids, api);
        Ok(Run { checker, cluster })
    }

    pub(crate) fn t(&self) -> Timings {
        self.cluster.timings()
    }

    pub(crate) fn all(&self) -> Vec<usize> {
        (0..self.cluster.len()).collect()
    }

    /// A failure message: `what`, the violations, the observed view changes
    /// (last ones) and the server logs.
    pub fn fail(&self, what: impl std::fmt::Display) -> String {
        let state = self.checker.state();
        let changes: Vec<String> = state.log[state.log.len().saturating_sub(40)..]
            .iter()
            .map(|o| {
                format!(
                    "  node {} {:?}: {} t{} leader {:?}",
                    o.id, o.source, o.view.role, o.view.term, o.view.leader
                )
            })
            .collect();
        // The peer connections' TCP state (retransmits, backoff) in each
        // namespace: a stalled connection explains a slow heal.
        let sockets: String = (0..self.cluster.len()).map(|i| self.sockets(i)).collect();
        // Scheduling stalls on a loaded machine look like faults: say how loaded.
        let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        let pressure = std::fs::read_to_string("/proc/pressure/cpu").unwrap_or_default();
        let stalls = stall_summary(&state);
        format!(
            "{what}\nload average: {load}cpu pressure: {pressure}{stalls}\nviolations: {:?}\nlast observed view changes:\n{}\n{sockets}{}",
            state.violations,
            changes.join("\n"),
            self.cluster.logs()
        )
    }

    /// `ss -tin` of node `i`'s peer connections.
    pub fn sockets(&self, i: usize) -> String {
        let port = format!("{}", crate::cluster::PEER_PORT);
        let ss = crate::net::run(
            "ip",
            &[
                "netns",
                "exec",
                self.cluster.net().namespace(i),
                "ss",
                "-tinH",
                "sport",
                &format!("= :{port}"),
                "or",
                "dport",
                &format!("= :{port}"),
            ],
        )
        .unwrap_or_else(|e| e.to_string());
        format!("--- node {} sockets ---\n{ss}", i + 1)
    }

    /// Fails if the checker has seen any broken invariant.
    pub fn check_safety(&self) -> Result<(), String> {
        if self.checker.violations().is_empty() {
            Ok(())
        } else {
            Err(self.fail("safety violated"))
        }
    }

    /// Waits until every node in `among` answers (to requests sent after
    /// `since`) with the same leader and term, the leader itself included.
    pub async fn agreement(
        &self,
        among: &[usize],
        since: Instant,
        bound: Duration,
    ) -> Result<((usize, u64), Duration), String> {
        let nodes: Vec<usize> = among.iter().map(|&i| i + 1).collect();
        // Wait past the bound (up to LIVENESS_CAP) to report how late it was.
        let cap = bound.max(LIVENESS_CAP);
        match self.checker.wait_for(cap, |s| s.agreement(among, since)).await {
            Some(((id, term), _)) => {
                let took = since.elapsed();
                if took > bound {
                    return Err(self.fail(format!(
                        "nodes {nodes:?} agreed on n{id} t{term} only after {took:?}, bound {bound:?}"
                    )));
                }
                let idx = self.cluster.index(id).expect("a known id");
                Ok(((idx, term), took))
            }
            None => Err(self.fail(format!(
                "nodes {nodes:?} did not agree on one leader within {cap:?} (bound {bound:?})"
            ))),
        }
    }

    /// The first election: everybody agrees, then nothing moves for two
    /// election timeouts (so scenarios start from a settled cluster).
    pub async fn elected(&self) -> Result<(usize, u64), String> {
        let start = Instant::now();
        let ((l, term), _) = self.agreement(&self.all(), start, FIRST_ELECTION_BOUND).await?;
        let settle = Instant::now();
        tokio::time::sleep(2 * self.t().election_timeout()).await;
        let ((l2, term2), _) = self.agreement(&self.all(), settle, heal_bound(self.t())).await?;
        if (l2, term2) != (l, term) {
            return Err(self.fail(format!(
                "the first leader did not hold: n{} t{term} then n{} t{term2} (no fault injected)",
                l + 1,
                l2 + 1
            )));
        }
        Ok((l, term))
    }

    pub(crate) fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.checker.state()
    }

    /// Sleeps for `d`.
    pub async fn hold(&self, d: Duration) {
        tokio::time::sleep(d).await;
    }

    /// Polls and events so far, and the test process's stalls (for the report).
    pub fn traffic(&self) -> String {
        let s = self.state();
        format!(
            "{} status polls, {} watch events checked; {}",
            s.polls,
            s.events,
            stall_summary(&s)
        )
    }
}

/// How often and how long the test process was not scheduled.
fn stall_summary(s: &State) -> String {
    let longest = s.stalls.iter().map(|&(_, d)| d).max().unwrap_or_default();
    format!(
        "{} scheduling stalls of the test process over {:?} (longest {longest:?})",
        s.stalls.len(),
        crate::checker::STALL_REPORT
    )
}

pub(crate) fn injection_failed<E: std::fmt::Display>(run: &Run) -> impl FnOnce(E) -> String + '_ {
    move |err| run.fail(format!("fault injection failed: {err}"))
}

/// A fault on the link(s) of one follower of a settled cluster, which the
/// leader must ride out: zero leader changes, during the fault and after
/// it heals.
#[derive(Debug, Clone, Copy)]
enum FollowerFault {
    /// The follower loses every link, for this long (default: four election
    /// timeouts). Pre-vote: the isolated node never raises its term;
    /// stickiness: nobody follows it. So no term may move either.
    Isolate(Option<Duration>),
    /// Only the link between the leader and the follower is cut, both ways,
    /// for eight election timeouts; the follower still hears the others, who
    /// refuse its pre-votes while they hear the leader.
    CutFromLeader,
}

impl FollowerFault {
    fn duration(self, t: Timings) -> Duration {
        match self {
            FollowerFault::Isolate(d) => d.unwrap_or(4 * t.election_timeout()),
            FollowerFault::CutFromLeader => 8 * t.election_timeout(),
        }
    }

    fn inject(self, cluster: &Cluster, leader: usize, follower: usize) -> crate::Result<()> {
        match self {
            FollowerFault::Isolate(_) => cluster.isolate(follower),
            FollowerFault::CutFromLeader => cluster.cut(leader, follower),
        }
    }

    /// What was done, for the outcome.
    fn describe(self, leader: usize, follower: usize, held: Duration) -> String {
        match self {
            FollowerFault::Isolate(_) => {
                format!("isolated follower n{} for {held:?}", follower + 1)
            }
            FollowerFault::CutFromLeader => {
                format!("cut link n{}-n{} both ways for {held:?}", leader + 1, follower + 1)
            }
        }
    }

    /// Whether the highest term must stay the leader's (checked for isolation).
    fn keeps_terms(self) -> bool {
        matches!(self, FollowerFault::Isolate(_))
    }
}

/// Settles a cluster of `n`, injects `fault` on one follower, holds it,
/// heals: the leader and its term must not change.
async fn follower_fault(n: usize, fault: FollowerFault) -> Result<Outcome, String> {
    let mut out = Outcome::default();
    let run = Run::start(n, TIMINGS).await?;
    let t = run.t();
    let (l, term) = run.elected().await?;
    let f = (0..n).rev().find(|&i| i != l).expect("n > 1");
    let mark = Instant::now();
    let held = fault.duration(t);
    fault.inject(&run.cluster, l, f).map_err(injection_failed(&run))?;
    run.hold(held).await;
    let healed = Instant::now();
    run.cluster.heal().map_err(injection_failed(&run))?;
    let ((l2, term2), took) = run.agreement(&run.all(), healed, heal_bound(t)).await?;
    run.hold(3 * t.election_timeout()).await;
    run.check_safety()?;
    let changes = run.state().leaderships_since(mark);
    let max_term = run.state().max_term_since(mark);
    out.note(format!(
        "{n} nodes, leader n{} t{term}; {}; after heal all agree in {took:?} (bound {:?})",
        l + 1,
        fault.describe(l, f, held),
        heal_bound(t)
    ));
    out.note(format!("leaderships seen since the fault: {changes:?}; highest term {max_term}"));
    out.note(run.traffic());
    if (l2, term2) != (l, term) || changes != vec![(run.cluster.id(l), term)] {
        return Err(run.fail(format!(
            "leader changed: n{} t{term} -> n{} t{term2}; leaderships {changes:?}",
            l + 1,
            l2 + 1
        )));
    }
    if fault.keeps_terms() && max_term != term {
        return Err(run.fail(format!("a term moved: {term} -> {max_term}")));
    }
    Ok(out)
}

/// Seed scenario `non-sticky-leader`: 4 nodes, isolate a follower, heal.
pub async fn non_sticky_leader() -> Result<Outcome, String> {
    follower_fault(4, FollowerFault::Isolate(None)).await
}

/// How long `long-isolation` cuts the follower off.
pub const LONG_ISOLATION: Duration = Duration::from_secs(10);

/// `non-sticky-leader` with a [`LONG_ISOLATION`]: the heal bound does not
/// depend on how long the partition lasted.
pub async fn long_isolation() -> Result<Outcome, String> {
    follower_fault(4, FollowerFault::Isolate(Some(LONG_ISOLATION))).await
}

/// Seed scenario `leader-ping-pong`: 4 nodes, cut only the leader–follower link.
pub async fn leader_ping_pong() -> Result<Outcome, String> {
    follower_fault(4, FollowerFault::CutFromLeader).await
}

/// Seed scenario `one-link-failure`: 3 nodes, cut the leader–follower link.
pub async fn one_link_failure() -> Result<Outcome, String> {
    follower_fault(3, FollowerFault::CutFromLeader).await
}

/// SIGKILL the leader of 3: a survivor leads within [`heal_bound`]; the
/// restarted node rejoins as a follower without disturbing the new leader.
pub async fn leader_crash() -> Result<Outcome, String> {
    let mut out = Outcome::default();
    let n = 3;
    let run = Run::start(n, TIMINGS).await?;
    let t = run.t();
    let (l, term) = run.elected().await?;
    let killed = Instant::now();
    run.cluster.kill(l).map_err(injection_failed(&run))?;
    let bound = heal_bound(t);
    let survivors: Vec<usize> = (0..n).filter(|&i| i != l).collect();
    let new = run.checker.wait_for(bound, |s| s.first_new_leader(killed, term)).await;
    let Some(((new_id, new_term, at), _)) = new else {
        return Err(run.fail(format!("no new leader within {bound:?} of SIGKILL of n{}", l + 1)));
    };
    let failover = at - killed;
    let ((l2, term2), _) = run.agreement(&survivors, killed, bound).await?;
    out.note(format!(
        "3 nodes, SIGKILL leader n{} (t{term}): n{new_id} leads t{new_term} after {failover:?} (bound {bound:?})",
        l + 1
    ));
    let restarted = Instant::now();
    run.cluster.spawn(l).map_err(injection_failed(&run))?;
    let ((l3, term3), rejoin) =
        run.agreement(&run.all(), restarted, bound + RESTART_MARGIN).await?;
    run.hold(3 * t.election_timeout()).await;
    run.check_safety()?;
    let changes = run.state().leaderships_since(restarted);
    out.note(format!(
        "restart n{}: all agree on n{} t{term3} {rejoin:?} after the restart; leaderships since: {changes:?}",
        l + 1,
        l3 + 1
    ));
    out.note(run.traffic());
    if (l3, term3) != (l2, term2) || changes != vec![(run.cluster.id(l2), term2)] {
        return Err(run.fail(format!(
            "the restarted node disturbed the leader: n{} t{term2} -> {changes:?}",
            l2 + 1
        )));
    }
    Ok(out)
}

/// SIGSTOP the leader of 3 for 4 election timeouts, then SIGCONT: a new
/// leader takes over while it sleeps; on waking it steps down and follows;
/// the checker sees no overlapping leadership and no decreasing token.
pub async fn leader_pause() -> Result<Outcome, String> {
    let mut out = Outcome::default();
    let n = 3;
    let run = Run::start(n, TIMINGS).await?;
    let t = run.t();
    let (l, term) = run.elected().await?;
    let bound = heal_bound(t);
    let paused = Instant::now();
    let pause = 4 * t.election_timeout();
    run.cluster.pause(l).map_err(injection_failed(&run))?;
    let new = run.checker.wait_for(bound, |s| s.first_new_leader(paused, term)).await;
    let Some(((new_id, new_term, at), _)) = new else {
        let _ = run.cluster.resume(l);
        return Err(run.fail(format!("no new leader within {bound:?} of SIGSTOP of n{}", l + 1)));
    };
    let failover = at - paused;
    let rest = pause.saturating_sub(paused.elapsed());
    run.hold(rest).await;
    // Requests that reach the stopped leader wait in its sockets and are
    // answered the moment it resumes: what does a client hear then?
    let addr = run.cluster.http_addr(l);
    let api = run.cluster.api().map_err(|e| e.to_string())?;
    let probes = [STATUS_PATH, IS_LEADER_PATH]
        .map(|path| tokio::spawn(crate::checker::get_once(api.clone(), addr, path, PROBE_TIMEOUT)));
    tokio::time::sleep(PROBE_CONNECT).await;
    let resumed = Instant::now();
    run.cluster.resume(l).map_err(injection_failed(&run))?;
    let mut answers = Vec::new();
    for (path, probe) in [STATUS_PATH, IS_LEADER_PATH].iter().zip(probes) {
        let answer = probe.await.ok().flatten();
        answers.push(format!("{path} -> {answer:?}"));
    }
    let probe_line = format!(
        "requests queued at the paused leader, answered on SIGCONT: {}",
        answers.join("; ")
    );
    let ((l2, term2), took) = run
        .agreement(&run.all(), resumed, bound)
        .await
        .map_err(|m| format!("{probe_line}\n{m}"))?;
    run.hold(3 * t.election_timeout()).await;
    run.check_safety().map_err(|m| format!("{probe_line}\n{m}"))?;
    if answers[1].contains("Some((200") {
        return Err(run.fail(format!("the paused leader's lease outlived the pause: {probe_line}")));
    }
    let changes = run.state().leaderships_since(paused);
    out.note(format!(
        "3 nodes, SIGSTOP leader n{} (t{term}) for {pause:?}: n{new_id} leads t{new_term} after {failover:?} (bound {bound:?})",
        l + 1
    ));
    out.note(format!(
        "SIGCONT: all agree on n{} t{term2} {took:?} later; leaderships since the pause: {changes:?}",
        l2 + 1
    ));
    out.note(probe_line);
    out.note(run.traffic());
    if l2 == l {
        return Err(run.fail("the paused leader came back as leader"));
    }
    let old_claim = run.state().claim(run.cluster.id(l), term);
    if old_claim.is_some_and(|c| c.last_sent >= resumed) {
        return Err(
            run.fail(format!("the old leader n{} still claimed term {term} after SIGCONT", l + 1))
        );
    }
    Ok(out)
}

/// 5 nodes; 2 are cut off from the other 3 (with the leader among the 2,
/// or not): the majority has exactly one leader within [`heal_bound`], the
/// minority none after its lease ends; after healing all 5 converge.
pub async fn minority_partition(with_leader: bool) -> Result<Outcome, String> {
    let mut out = Outcome::default();
    let n = 5;
    let run = Run::start(n, TIMINGS).await?;
    let t = run.t();
    let bound = heal_bound(t);
    let (l, term) = run.elected().await?;
    let followers: Vec<usize> = (0..n).filter(|&i| i != l).collect();
    let minority: Vec<usize> =
        if with_leader { vec![l, followers[0]] } else { vec![followers[0], followers[1]] };
    let majority: Vec<usize> = (0..n).filter(|i| !minority.contains(i)).collect();
    let cut = Instant::now();
    run.cluster.partition(&minority).map_err(injection_failed(&run))?;
    let ((ml, mterm), took) = run.agreement(&majority, cut, bound).await?;
    // Hold the partition: the majority's leadership must not move, and the
    // minority must have no leader once the old lease has run out.
    let agreed = Instant::now();
    run.hold(4 * t.election_timeout()).await;
    let majority_changes = run.state().leaderships_since(agreed);
    let minority_claims: Vec<usize> = {
        let s = run.state();
        minority
            .iter()
            .copied()
            .filter(|&i| s.latest[i].as_ref().is_some_and(|o| o.view.role == "leader"))
            .collect()
    };
    // The majority leader's connections just before the heal: a connection
    // to the minority in TCP retransmission backoff recovers only at its
    // next retransmission, whatever the heal time.
    let leader_sockets = run.sockets(ml);
    let healed = Instant::now();
    run.cluster.heal().map_err(injection_failed(&run))?;
    let ((fl, fterm), heal_took) = run.agreement(&run.all(), healed, bound).await.map_err(|m| {
        format!("majority leader's sockets just before the heal:\n{leader_sockets}\n{m}")
    })?;
    run.hold(2 * t.election_timeout()).await;
    run.check_safety()?;
    out.note(format!(
        "5 nodes, leader n{} t{term}; partition {{{}}} | {{{}}}: majority agrees on n{} t{mterm} after {took:?} (bound {bound:?})",
        l + 1,
        minority.iter().map(|i| format!("n{}", i + 1)).collect::<Vec<_>>().join(","),
        majority.iter().map(|i| format!("n{}", i + 1)).collect::<Vec<_>>().join(","),
        ml + 1
    ));
    out.note(format!(
        "held {:?}: leaderships seen {majority_changes:?}; minority nodes claiming leadership at the end: {minority_claims:?}",
        4 * t.election_timeout()
    ));
    out.note(format!("after heal: all agree on n{} t{fterm} in {heal_took:?}", fl + 1));
    out.note(run.traffic());
    if !majority.contains(&ml) {
        return Err(run.fail("the majority follows a node it cannot reach"));
    }
    if with_leader == (ml == l) {
        return Err(run.fail(format!(
            "with_leader={with_leader} but the majority's leader is n{} (old n{})",
            ml + 1,
            l + 1
        )));
    }
    if majority_changes != vec![(run.cluster.id(ml), mterm)] {
        return Err(run.fail(format!("leadership moved while partitioned: {majority_changes:?}")));
    }
    if !minority_claims.is_empty() {
        return Err(run.fail(format!(
            "minority node(s) {:?} still claim leadership {:?} into the partition",
            minority_claims.iter().map(|i| i + 1).collect::<Vec<_>>(),
            4 * t.election_timeout()
        )));
    }
    Ok(out)
}
