//! Death notices where no spy can be heard: the leader's host
//! goes down (its namespace cut off from every peer) and its elector is
//! SIGKILLed there. Whatever on that host knows of the death (the node's
//! next incarnation, a supervisor's notice) cannot reach the survivors, so
//! they must fail over through the election timeout, as without spies: no
//! sooner (no notice got through) and no later (the fallback still works).
//! When the network heals, what the host knew reaches them late and must
//! not disturb the leader they elected meanwhile.

use crate::checker::get_once;
use crate::cluster::Spies;
use crate::scenarios::{heal_bound, injection_failed, Outcome, Run, RESTART_MARGIN, TIMINGS};
use std::time::{Duration, Instant};

/// The counter of death notices a node gave its election core
/// (the core's `Counters::death_notices`), any spy.
const DEATH_NOTICES: &str = "tenure_death_notices_total";
/// Where the counter is read.
const METRICS_PATH: &str = "/metrics";
/// Where a node's own incarnation is read.
const STATUS_PATH: &str = "/v1/status";
/// Where a node records each change of leader with its cause.
const TIMELINE_PATH: &str = "/v1/timeline";
/// The timeline's cause of a change after the old leader went silent and
/// its host did not answer; a death notice makes it `crash`.
const SILENT_CAUSE: &str = "partition";
/// How long one read of a node's metrics or status may take.
const READ_TIMEOUT: Duration = Duration::from_secs(2);
/// How often a restarted node's status is polled for its new incarnation.
const RESTART_POLL: Duration = Duration::from_millis(20);
/// How long the leader's host stays cut off, from the cut: the failover
/// (within [`heal_bound`]), the elector's restart on the host
/// ([`RESTART_MARGIN`]), then time for the survivors to hold their leader.
pub const HOST_DOWN: Duration = Duration::from_secs(4);

/// Node `i`'s death-notice counter.
async fn death_notices(run: &Run, i: usize) -> Result<u64, String> {
    let api = run.cluster.api().map_err(|e| e.to_string())?;
    let addr = run.cluster.http_addr(i);
    let (code, body) = get_once(api, addr, METRICS_PATH, READ_TIMEOUT)
        .await
        .ok_or_else(|| run.fail(format!("n{}: no answer to GET {METRICS_PATH}", i + 1)))?;
    let value = body
        .lines()
        .find_map(|l| l.strip_prefix(DEATH_NOTICES)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse::<u64>().ok());
    match (code, value) {
        (200, Some(v)) => Ok(v),
        _ => Err(run.fail(format!(
            "n{}: GET {METRICS_PATH} answered {code} without a {DEATH_NOTICES} value",
            i + 1
        ))),
    }
}

/// Every node in `nodes`' death-notice counter, in order.
async fn all_death_notices(run: &Run, nodes: &[usize]) -> Result<Vec<u64>, String> {
    let mut counts = Vec::with_capacity(nodes.len());
    for &i in nodes {
        counts.push(death_notices(run, i).await?);
    }
    Ok(counts)
}

/// Node `i`'s own incarnation, if it answers its status.
async fn incarnation(run: &Run, i: usize) -> Option<u64> {
    let api = run.cluster.api().ok()?;
    let (code, body) =
        get_once(api, run.cluster.http_addr(i), STATUS_PATH, READ_TIMEOUT / 4).await?;
    let status: serde_json::Value = serde_json::from_str(&body).ok()?;
    (code == 200).then(|| status["incarnation"].as_u64()).flatten()
}

/// How node `i` recorded the change of leader to `term`: (cause, how long
/// it knew no leader or had not heard the old one, in ms).
async fn timeline_cause(run: &Run, i: usize, term: u64) -> Result<(String, Option<u64>), String> {
    let api = run.cluster.api().map_err(|e| e.to_string())?;
    let answer = get_once(api, run.cluster.http_addr(i), TIMELINE_PATH, READ_TIMEOUT).await;
    let body: Option<serde_json::Value> = answer
        .filter(|(code, _)| *code == 200)
        .and_then(|(_, body)| serde_json::from_str(&body).ok());
    let entries = body.as_ref().and_then(|b| b["entries"].as_array());
    let entry = entries.and_then(|es| es.iter().rev().find(|e| e["term"] == term));
    match entry.and_then(|e| Some((e["cause"].as_str()?.to_string(), e["no_leader_ms"].as_u64()))) {
        Some(cause) => Ok(cause),
        None => Err(run.fail(format!(
            "n{}: GET {TIMELINE_PATH} has no change to term {term}: {body:?}",
            i + 1
        ))),
    }
}

/// Waits until node `i` answers with an incarnation above `old`, at most
/// until `deadline`: the new incarnation, or None.
async fn next_incarnation(run: &Run, i: usize, old: u64, deadline: Instant) -> Option<u64> {
    loop {
        if let Some(n) = incarnation(run, i).await.filter(|&n| n > old) {
            return Some(n);
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(RESTART_POLL).await;
    }
}

/// Waits until every node in `nodes` counts more death notices than
/// `before`, at most `bound`: the last counts read.
async fn notices_rise(
    run: &Run,
    nodes: &[usize],
    before: &[u64],
    bound: Duration,
) -> Result<Vec<u64>, String> {
    let deadline = Instant::now() + bound;
    loop {
        let counts = all_death_notices(run, nodes).await?;
        if counts.iter().zip(before).all(|(now, was)| now > was) || Instant::now() >= deadline {
            return Ok(counts);
        }
        tokio::time::sleep(RESTART_POLL).await;
    }
}

/// What happened while the leader's host was down.
struct Down {
    /// When the cut began.
    at: Instant,
    /// How long after the cut the elector was SIGKILLed.
    kill_after: Duration,
    /// The first new leader: (id, term, seen how long after the cut).
    new_leader: (u64, u64, Duration),
    /// The leader the survivors agreed on: (index, term).
    agreed: (usize, u64),
    /// The restarted elector's incarnation, seen while the host was down.
    restarted: Option<u64>,
    /// The survivors' death-notice counters just before the heal.
    notices: Vec<u64>,
    /// The leaderships claimed from the survivors' agreement to the heal.
    held: Vec<(u64, u64)>,
    /// How each survivor's timeline recorded the change: (cause, no leader ms).
    causes: Vec<(String, Option<u64>)>,
}

/// Cuts leader `l` (of `term`, incarnation `old`) off from every peer,
/// SIGKILLs its elector and starts it again on its host; waits for the
/// survivors' failover and for the restart, and holds the cut for
/// [`HOST_DOWN`].
async fn host_down(run: &mut Run, l: usize, term: u64, old: u64) -> Result<Down, String> {
    let bound = heal_bound(run.t());
    let survivors: Vec<usize> = run.all().into_iter().filter(|&i| i != l).collect();
    let at = Instant::now();
    run.cluster.isolate(l).map_err(injection_failed(run))?;
    let kill_after = at.elapsed();
    run.cluster.kill_elector(l).map_err(injection_failed(run))?;
    if run.cluster.spies() != Spies::Supervised {
        // No supervisor on the host: restart the server as systemd would.
        run.cluster.spawn(l).map_err(injection_failed(run))?;
    }
    let new = run.checker.wait_for(bound, |s| s.first_new_leader(at, term)).await;
    let Some(((id, new_term, seen), _)) = new else {
        return Err(run.fail(format!("no new leader within {bound:?} of cutting off n{}", l + 1)));
    };
    let (agreed, _) = run.agreement(&survivors, at, bound).await?;
    let since_agreed = Instant::now();
    let restarted = next_incarnation(run, l, old, at + bound + RESTART_MARGIN).await;
    run.hold(HOST_DOWN.saturating_sub(at.elapsed())).await;
    let notices = all_death_notices(run, &survivors).await?;
    let held = run.state().leaderships_since(since_agreed);
    let mut causes = Vec::with_capacity(survivors.len());
    for &i in &survivors {
        causes.push(timeline_cause(run, i, agreed.1).await?);
    }
    Ok(Down {
        at,
        kill_after,
        new_leader: (id, new_term, seen - at),
        agreed,
        restarted,
        notices,
        held,
        causes,
    })
}

/// Fails unless the survivors of `down` failed over through the election
/// timeout, counted no notice while the host was down (`before`: their
/// counters before the cut), saw the restart and kept their leader.
fn check_down(run: &Run, down: &Down, before: &[u64], old: u64, l: usize) -> Result<(), String> {
    let t = run.t();
    // A notice that got through fails over in tens of milliseconds; the
    // timeout, in T less a heartbeat at the earliest. Half of T tells the two
    // apart with room for a loaded machine's late heartbeats.
    let floor = t.election_timeout() / 2;
    let failover = down.new_leader.2;
    if failover < floor {
        return Err(run.fail(format!(
            "the survivors failed over {failover:?} after the cut, sooner than half the \
             election timeout ({floor:?}): something told them"
        )));
    }
    if down.notices != before {
        return Err(run.fail(format!(
            "the survivors took death notices while the host was cut off: {DEATH_NOTICES} \
             {before:?} -> {:?}",
            down.notices
        )));
    }
    if down.causes.iter().any(|(cause, _)| cause != SILENT_CAUSE) {
        return Err(run.fail(format!(
            "a survivor's timeline does not call the change a silent leader ({SILENT_CAUSE}): {:?}",
            down.causes
        )));
    }
    if down.restarted.is_none() {
        return Err(run.fail(format!(
            "n{} showed no incarnation above {old} while its host was down",
            l + 1
        )));
    }
    let (l2, term2) = down.agreed;
    if down.held != vec![(run.cluster.id(l2), term2)] {
        return Err(run.fail(format!("leadership moved while the host was down: {:?}", down.held)));
    }
    Ok(())
}

/// `leader-host-down`: 3 servers with spies; the leader's namespace is cut
/// off from both peers and its elector SIGKILLed inside it, then started
/// again there (the host's restart: its next incarnation, which cannot be
/// heard either). A survivor must lead a newer term no sooner than half
/// the election timeout after the cut (no notice got
/// through) and within [`heal_bound`]; the survivors must count no death
/// notice while the host is down. After the heal the restarted node rejoins
/// as a follower of the new leader, the survivors learn of the death (their
/// counters rise: the check above could have failed), and the checker saw
/// no safety violation.
pub async fn leader_host_down() -> Result<Outcome, String> {
    let mut out = Outcome::default();
    let mut run = Run::start_with(3, 0, TIMINGS, Spies::Supervised).await?;
    let (t, bound) = (run.t(), heal_bound(run.t()));
    let (l, term) = run.elected().await?;
    let survivors: Vec<usize> = run.all().into_iter().filter(|&i| i != l).collect();
    let old = incarnation(&run, l)
        .await
        .ok_or_else(|| run.fail(format!("n{} shows no incarnation", l + 1)))?;
    let before = all_death_notices(&run, &survivors).await?;
    let down = host_down(&mut run, l, term, old).await?;
    let healed = Instant::now();
    run.cluster.heal().map_err(injection_failed(&run))?;
    let ((l3, term3), rejoin) = run.agreement(&run.all(), healed, bound).await?;
    let learned = notices_rise(&run, &survivors, &before, bound).await?;
    run.hold(3 * t.election_timeout()).await;
    run.check_safety()?;
    let changes = run.state().leaderships_since(healed);

    let (new_id, new_term, failover) = down.new_leader;
    out.note(format!(
        "3 nodes (--supervised), leader n{} t{term} incarnation {old}: host cut off from the \
         others, elector SIGKILLed {:?} later and started again there",
        l + 1,
        down.kill_after
    ));
    out.note(format!(
        "n{new_id} leads t{new_term} {failover:?} after the cut, {:?} after the kill \
         (election timeout {:?}, heartbeat {} ms, bound {bound:?})",
        failover.saturating_sub(down.kill_after),
        t.election_timeout(),
        t.heartbeat_ms
    ));
    out.note(format!(
        "while down ({HOST_DOWN:?}): restarted as incarnation {:?}; survivors' {DEATH_NOTICES} \
         {before:?} -> {:?}; leaderships since they agreed: {:?}; survivors' timelines \
         (cause, no_leader_ms): {:?}",
        down.restarted, down.notices, down.held, down.causes
    ));
    out.note(format!(
        "heal {:?} after the cut: all agree on n{} t{term3} {rejoin:?} later; leaderships \
         since: {changes:?}; survivors' {DEATH_NOTICES} then {learned:?}",
        healed - down.at,
        l3 + 1
    ));
    out.note(run.traffic());

    check_down(&run, &down, &before, old, l)?;
    let (l2, term2) = down.agreed;
    if (l3, term3) != (l2, term2) || changes != vec![(run.cluster.id(l2), term2)] {
        return Err(run.fail(format!(
            "the restarted node disturbed the leader: n{} t{term2} -> {changes:?}",
            l2 + 1
        )));
    }
    if learned.iter().zip(&before).any(|(now, was)| now <= was) {
        return Err(run.fail(format!(
            "{bound:?} after the heal a survivor still counted no death notice: \
             {DEATH_NOTICES} {before:?} -> {learned:?} (the next incarnation's handshake is one)"
        )));
    }
    Ok(out)
}
