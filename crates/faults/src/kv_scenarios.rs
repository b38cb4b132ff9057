//! The key-value store's scenarios on real servers (the proof in
//! processes): concurrent clients checked for linearizability through
//! partitions, SIGKILLs and pauses; SIGKILL of every node at once loses no
//! acknowledged write; a node whose data directory is wiped catches up.
//! Each returns what it did and measured, or a failure message with the
//! history's verdict, the fault timeline and the server logs.

use crate::kv::{self, Causes, Clock, KvClient, Session, Spec, Tally, Values, Workload};
use crate::scenarios::{heal_bound, Outcome, Run, FIRST_ELECTION_BOUND, RESTART_MARGIN, TIMINGS};
use rand_core::{RngCore, SeedableRng};
use rand_pcg::Pcg64;
use std::net::SocketAddr;
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tenure_sim::workload::{key_name, Fate, KvOutput, Record};

/// Nodes of every key-value scenario.
pub const NODES: usize = 3;
/// Concurrent clients of the linearizability run.
pub const CLIENTS: usize = 5;
/// Keys of the linearizability run: few, so that clients collide.
pub const KEYS: usize = 4;
/// Environment variable with the linearizability run's length in seconds.
pub const SECONDS_ENV: &str = "TENURE_FAULT_KV_SECONDS";
/// Its length unless told otherwise.
pub const DEFAULT_SECONDS: f64 = 20.0;
/// Clients work this long before the first fault.
const WARM_UP: Duration = Duration::from_secs(1);
/// A fault is held between these many milliseconds.
const HOLD_MS: (u64, u64) = (800, 2500);
/// Quiet time after a round converged, up to this many milliseconds.
const SETTLE_MS: u64 = 1000;
/// Bound on an acknowledged put (a fault-free cluster answers at once; the
/// bound covers an election).
const ACK_BOUND: Duration = Duration::from_secs(10);
/// Keys written and acknowledged before every node is killed.
pub const KILL_ALL_KEYS: usize = 60;
/// Keys written by clients still running when every node is killed.
pub const KILL_ALL_BUSY_KEYS: usize = 4;
/// Writers of the acknowledged keys, concurrently.
const WRITERS: usize = 6;
/// How long the clients write while the nodes die.
const BUSY_BEFORE_KILL: Duration = Duration::from_millis(500);
/// What the wiped-follower scenario writes.
#[derive(Debug, Clone, Copy)]
pub struct Wipe {
    /// Keys written before the follower is wiped.
    pub keys: usize,
    /// How many times each of them is written.
    pub times: usize,
    /// Concurrent writers.
    pub writers: usize,
    /// Keys written once while the follower is down.
    pub while_down: usize,
}

/// Catch-up by log entries: 40 keys, then 20 more while the follower is down.
pub const WIPE_ENTRIES: Wipe = Wipe { keys: 40, times: 1, writers: WRITERS, while_down: 20 };
/// Catch-up by snapshot: more writes than the replica's snapshot interval
/// (10,000 entries) before the wipe, so the leader's log no longer starts
/// at the first entry and the new node must install its snapshot.
pub const WIPE_SNAPSHOT: Wipe = Wipe { keys: 200, times: 51, writers: 40, while_down: 20 };
/// How long the wiped node may take to read every key locally.
pub const CATCH_UP_BOUND: Duration = Duration::from_secs(15);
/// How often the wiped node is asked.
const CATCH_UP_POLL: Duration = Duration::from_millis(50);
/// How long the negative control's clients run.
pub const CONTROL_RUN: Duration = Duration::from_secs(8);

/// The linearizability run's length: `$TENURE_FAULT_KV_SECONDS`, else
/// [`DEFAULT_SECONDS`].
pub fn seconds_from_env() -> Duration {
    let s = std::env::var(SECONDS_ENV)
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .unwrap_or(DEFAULT_SECONDS);
    Duration::from_secs_f64(s)
}

/// A fault of the linearizability run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KvFault {
    /// The leader is cut off from every peer (clients still reach it).
    IsolateLeader(usize),
    /// SIGKILL of the leader, restarted at the heal.
    KillLeader(usize),
    /// SIGSTOP of a node (any, the leader included), SIGCONT at the heal.
    Pause(usize),
}

impl KvFault {
    fn draw(kind: u64, leader: usize, rng: &mut Pcg64) -> Self {
        match kind {
            0 => KvFault::IsolateLeader(leader),
            1 => KvFault::KillLeader(leader),
            _ => KvFault::Pause((rng.next_u64() % NODES as u64) as usize),
        }
    }
}

/// One injected fault on the history's clock.
#[derive(Debug)]
struct Round {
    fault: KvFault,
    injected_ns: u64,
    healed_ns: u64,
    /// The leader agreed on after the heal, and how long it took.
    after: (usize, u64, Duration),
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

impl std::fmt::Display for Round {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (l, term, took) = self.after;
        let node = |i: usize| i + 1;
        let what = match self.fault {
            KvFault::IsolateLeader(i) => format!("isolate leader n{}", node(i)),
            KvFault::KillLeader(i) => format!("SIGKILL leader n{} (restart at heal)", node(i)),
            KvFault::Pause(i) => format!("SIGSTOP n{}", node(i)),
        };
        write!(
            f,
            "{what} at {:.1} ms, healed at {:.1} ms; then n{} leads t{term}, agreed {took:?} after the heal",
            ms(self.injected_ns),
            ms(self.healed_ns),
            l + 1
        )
    }
}

/// Injects `fault`, holds it `hold`, heals it; the leader agreed on after.
async fn fault_round(
    run: &mut Run,
    fault: KvFault,
    hold: Duration,
    clock: &Clock,
) -> Result<Round, String> {
    let injected_ns = clock.now_ns();
    let c = &mut run.cluster;
    let injected = match fault {
        KvFault::IsolateLeader(i) => c.isolate(i),
        KvFault::KillLeader(i) => c.kill(i),
        KvFault::Pause(i) => c.pause(i),
    };
    injected.map_err(|e| run.fail(format!("injecting {fault:?}: {e}")))?;
    tokio::time::sleep(hold).await;
    let healed_at = Instant::now();
    let healed_ns = clock.now_ns();
    let c = &mut run.cluster;
    let healed = match fault {
        KvFault::IsolateLeader(_) => c.heal(),
        KvFault::KillLeader(i) => c.spawn(i),
        KvFault::Pause(i) => c.resume(i),
    };
    healed.map_err(|e| run.fail(format!("healing {fault:?}: {e}")))?;
    let restart = matches!(fault, KvFault::KillLeader(_));
    let bound = heal_bound(TIMINGS) + if restart { RESTART_MARGIN } else { Duration::ZERO };
    let all: Vec<usize> = (0..NODES).collect();
    let ((l, term), took) = run.agreement(&all, healed_at, bound).await?;
    Ok(Round { fault, injected_ns, healed_ns, after: (l, term, took) })
}

/// A failure of a key-value scenario: `what`, the fault timeline, and the
/// run's report (violations, view changes, logs).
fn kv_failure(run: &Run, what: &str, rounds: &[Round]) -> String {
    let timeline: Vec<String> = rounds.iter().map(|r| format!("  {r}")).collect();
    run.fail(format!("{what}\nfaults (history clock):\n{}", timeline.join("\n")))
}

/// Concurrent clients put, compare-and-set and read [`KEYS`] keys through
/// random nodes of [`NODES`] for `duration`, while rounds of one fault each
/// (isolating the leader, SIGKILL of the leader, SIGSTOP of a node; each
/// kind in every three rounds, in a seeded order) are injected and healed.
/// Then every key is read, and the history must be linearizable.
pub async fn linearizable(duration: Duration, seed: u64) -> Result<Outcome, String> {
    let mut out = Outcome::default();
    let mut run = Run::start(NODES, TIMINGS).await?;
    let (mut leader, term) = run.elected().await?;
    let kv = Clients::new(&run)?;
    let clock = kv.clock;
    let all: Vec<usize> = (0..NODES).collect();
    let workload = kv.workload(&Spec {
        clients: CLIENTS,
        keys: 0..KEYS,
        first_client: 0,
        seed,
        stale_reads: false,
    });
    let started = Instant::now();
    tokio::time::sleep(WARM_UP).await;
    let mut rng = Pcg64::seed_from_u64(seed);
    let mut rounds: Vec<Round> = Vec::new();
    let mut kinds: Vec<u64> = Vec::new();
    while started.elapsed() < duration {
        if kinds.is_empty() {
            kinds = vec![0, 1, 2];
            let j = (rng.next_u64() % 3) as usize;
            kinds.swap(0, j);
            let j = 1 + (rng.next_u64() % 2) as usize;
            kinds.swap(1, j);
        }
        let fault = KvFault::draw(kinds.remove(0), leader, &mut rng);
        let hold = Duration::from_millis(HOLD_MS.0 + rng.next_u64() % (HOLD_MS.1 - HOLD_MS.0));
        let round = fault_round(&mut run, fault, hold, &clock)
            .await
            .map_err(|m| format!("round {} ({fault:?}), seed {seed}: {m}", rounds.len() + 1))?;
        leader = round.after.0;
        rounds.push(round);
        tokio::time::sleep(Duration::from_millis(rng.next_u64() % SETTLE_MS)).await;
    }
    let worked = started.elapsed();
    let mut history = workload.stop().await.map_err(|m| kv_failure(&run, &m, &rounds))?;
    let reader = &kv.sessions(CLIENTS, 1, &all)[0];
    let finals = reader.final_reads(0..KEYS).await.map_err(|m| kv_failure(&run, &m, &rounds))?;
    history.extend(finals);
    run.check_safety().map_err(|m| kv_failure(&run, &m, &rounds))?;
    let tally = Tally::of(&history);
    let checked = Instant::now();
    let verdict = kv::check_linearizable(&history, KEYS).map_err(|m| {
        kv_failure(
            &run,
            &format!("seed {seed}: the history is not linearizable ({tally}):\n{m}"),
            &rounds,
        )
    })?;
    let check_took = checked.elapsed();
    out.note(format!(
        "seed {seed}: {NODES} nodes (first leader n{} t{term}), {CLIENTS} clients on {KEYS} keys for {worked:?}",
        leader + 1
    ));
    for (i, r) in rounds.iter().enumerate() {
        out.note(format!("round {}: {r}", i + 1));
    }
    out.note(format!("history: {tally}"));
    out.note(kv.causes.to_string());
    out.note(format!(
        "linearizable: every key checked in {check_took:?} ({} search steps, at most {} on one key)",
        verdict.steps, verdict.max_steps
    ));
    out.note(run.traffic());
    enough_work(&run, &tally, &rounds)?;
    Ok(out)
}

/// A run whose clients got (almost) nothing done proves nothing.
fn enough_work(run: &Run, t: &Tally, rounds: &[Round]) -> Result<(), String> {
    const MIN_ACKED: usize = 100;
    const MIN_READS: usize = 100;
    if t.acked < MIN_ACKED || t.answered_reads < MIN_READS || rounds.is_empty() {
        return Err(kv_failure(
            run,
            &format!(
                "too little was tested: {} writes acknowledged (want {MIN_ACKED}), {} reads answered (want {MIN_READS}), {} fault rounds",
                t.acked,
                t.answered_reads,
                rounds.len()
            ),
            rounds,
        ));
    }
    Ok(())
}

/// Writes every key of `keys` `times` times, acknowledged, one session per
/// share of the keys (so each key has one writer, and its last
/// acknowledged write is its value); every try goes into `history`.
/// Returns the last acknowledged (key, value, revision) of each key.
async fn write_acknowledged(
    sessions: &[Session],
    keys: Range<usize>,
    times: usize,
    values: &Arc<Values>,
    history: &mut Vec<Record>,
) -> Result<Vec<(usize, u32, u64)>, String> {
    let mut tasks = Vec::new();
    for (w, session) in sessions.iter().enumerate() {
        let mine: Vec<usize> = keys.clone().filter(|k| k % sessions.len() == w).collect();
        let session = session.clone();
        let values = values.clone();
        tasks.push(tokio::spawn(async move {
            let mut h = Vec::new();
            let mut last = std::collections::BTreeMap::new();
            for _ in 0..times {
                for &key in &mine {
                    let ack = session.acknowledged_put(key, &values, &mut h, ACK_BOUND).await?;
                    last.insert(key, ack);
                }
            }
            Ok::<_, String>((last, h))
        }));
    }
    let mut acked = Vec::new();
    for t in tasks {
        let (last, h) = t.await.map_err(|e| format!("a writer task failed: {e}"))??;
        acked.extend(last.into_iter().map(|(key, (value, rev))| (key, value, rev)));
        history.extend(h);
    }
    acked.sort_unstable();
    Ok(acked)
}

/// What the clients of a scenario share: the API (with the write token),
/// the nodes' addresses, the history's clock, the value ids handed out,
/// and the counts of why writes did not return.
struct Clients {
    api: crate::checker::Api,
    addrs: Vec<SocketAddr>,
    clock: Clock,
    values: Arc<Values>,
    causes: Arc<Causes>,
}

impl Clients {
    fn new(run: &Run) -> Result<Self, String> {
        Ok(Clients {
            api: run.cluster.kv_api().map_err(|e| run.fail(format!("kv api: {e}")))?,
            addrs: run.cluster.http_addrs(),
            clock: Clock::start(),
            values: Arc::new(Values::default()),
            causes: Arc::new(Causes::default()),
        })
    }

    /// `count` sessions numbered from `first` in the history, asking the
    /// nodes `nodes` (indexes).
    fn sessions(&self, first: usize, count: usize, nodes: &[usize]) -> Vec<Session> {
        (0..count)
            .map(|w| Session {
                client: KvClient::new(&self.api, kv::OP_TIMEOUT),
                addrs: nodes.iter().map(|&i| self.addrs[i]).collect(),
                who: first + w,
                clock: self.clock,
                causes: self.causes.clone(),
                stale_reads: false,
            })
            .collect()
    }

    /// Starts the clients of `spec` on every node.
    fn workload(&self, spec: &Spec) -> Workload {
        Workload::start(&self.api, &self.addrs, spec, self.clock, self.values.clone(), &self.causes)
    }
}

/// The final read of each key in `finals` (the answered one), by key.
pub(crate) fn final_values(
    finals: &[Record],
) -> std::collections::BTreeMap<usize, Option<(Vec<u8>, u64)>> {
    finals
        .iter()
        .filter_map(|r| match &r.fate {
            Fate::Returned { output: KvOutput::Read { kv, .. }, .. } => {
                Some((r.input.key(), kv.as_ref().map(|kv| (kv.value.clone(), kv.mod_revision))))
            }
            _ => None,
        })
        .collect()
}

/// The acknowledged writes that `read` (key -> value and mod_revision, as
/// read) does not show.
pub(crate) fn missing(
    acked: &[(usize, u32, u64)],
    read: &std::collections::BTreeMap<usize, Option<(Vec<u8>, u64)>>,
) -> Vec<String> {
    acked
        .iter()
        .filter_map(|&(key, value, rev)| {
            let want = (tenure_sim::workload::value_bytes(value), rev);
            match read.get(&key) {
                Some(Some(got)) if *got == want => None,
                got => Some(format!(
                    "{}: acknowledged v{value} at revision {rev}, read {}",
                    key_name(key),
                    match got {
                        None => "nothing (no answer)".to_string(),
                        Some(None) => "absent".to_string(),
                        Some(Some((v, r))) =>
                            format!("{:?} at revision {r}", String::from_utf8_lossy(v)),
                    }
                )),
            }
        })
        .collect()
}

/// [`KILL_ALL_KEYS`] keys written and acknowledged, clients still writing
/// [`KILL_ALL_BUSY_KEYS`] others, then SIGKILL of every node at once and a
/// restart: every acknowledged write reads back (linearizably) with its
/// revision, and the whole history, the writes in flight at the kill
/// included, is linearizable.
pub async fn kill_all() -> Result<Outcome, String> {
    let mut out = Outcome::default();
    let run = Run::start(NODES, TIMINGS).await?;
    let (l, term) = run.elected().await?;
    let kv = Clients::new(&run)?;
    let all: Vec<usize> = (0..NODES).collect();
    let mut history = Vec::new();
    let wrote = Instant::now();
    let writers = kv.sessions(0, WRITERS, &all);
    let acked = write_acknowledged(&writers, 0..KILL_ALL_KEYS, 1, &kv.values, &mut history)
        .await
        .map_err(|m| run.fail(m))?;
    let write_took = wrote.elapsed();
    let busy = KILL_ALL_KEYS..KILL_ALL_KEYS + KILL_ALL_BUSY_KEYS;
    let workload = kv.workload(&Spec {
        clients: CLIENTS,
        keys: busy.clone(),
        first_client: WRITERS,
        seed: 1,
        stale_reads: false,
    });
    tokio::time::sleep(BUSY_BEFORE_KILL).await;
    let killed_ns = kv.clock.now_ns();
    run.cluster.kill_all().map_err(|e| run.fail(format!("SIGKILL of every node: {e}")))?;
    let busy_history = workload.stop().await.map_err(|m| run.fail(m))?;
    let busy_tally = Tally::of(&busy_history);
    history.extend(busy_history);
    let restarted = Instant::now();
    for i in 0..NODES {
        run.cluster.spawn(i).map_err(|e| run.fail(format!("restart n{}: {e}", i + 1)))?;
    }
    let ((l2, term2), elected_in) = run.agreement(&all, restarted, FIRST_ELECTION_BOUND).await?;
    let reader = &kv.sessions(WRITERS + CLIENTS, 1, &all)[0];
    let finals = reader.final_reads(0..busy.end).await.map_err(|m| run.fail(m))?;
    let lost = missing(&acked, &final_values(&finals));
    history.extend(finals);
    run.check_safety()?;
    if !lost.is_empty() {
        return Err(run.fail(format!(
            "{} of {} acknowledged writes lost or changed after SIGKILL of every node:\n  {}",
            lost.len(),
            acked.len(),
            lost.join("\n  ")
        )));
    }
    let tally = Tally::of(&history);
    let verdict = kv::check_linearizable(&history, busy.end)
        .map_err(|m| run.fail(format!("the history is not linearizable ({tally}):\n{m}")))?;
    out.note(format!(
        "{NODES} nodes, leader n{} t{term}: {} keys written and acknowledged by {WRITERS} writers in {write_took:?}",
        l + 1,
        acked.len()
    ));
    out.note(format!(
        "SIGKILL of every node at {:.1} ms with {CLIENTS} clients busy on {} more keys ({busy_tally})",
        ms(killed_ns),
        busy.len()
    ));
    out.note(format!(
        "restart: all agree on n{} t{term2} {elected_in:?} after it; every acknowledged write reads back with its revision",
        l2 + 1
    ));
    out.note(format!(
        "history: {tally}; {}; linearizable ({} search steps)",
        kv.causes, verdict.steps
    ));
    out.note(run.traffic());
    Ok(out)
}

/// What node `addr` serves with `consistency=stale`: how many of `acked`
/// it shows as acknowledged, and the first it does not (key, what it said).
async fn stale_matches(
    client: &KvClient,
    addr: SocketAddr,
    acked: &[(usize, u32, u64)],
) -> Result<(usize, Option<String>), String> {
    for (n, &(key, value, rev)) in acked.iter().enumerate() {
        let answer = client.get(addr, &key_name(key), true).await;
        // A stale read is not linearizable: it stays out of the history,
        // but its answer must be one the API allows.
        let fate = kv::read_fate(&answer, 0).map_err(|e| format!("stale read at {addr}: {e}"))?;
        let shown = match fate {
            Fate::Returned { output: KvOutput::Read { kv: Some(kv), .. }, .. } => {
                Some((kv.value, kv.mod_revision))
            }
            _ => None,
        };
        if shown != Some((tenure_sim::workload::value_bytes(value), rev)) {
            return Ok((n, Some(format!("{}: {}", key_name(key), answer.short()))));
        }
    }
    Ok((acked.len(), None))
}

/// Polls node `i` with `consistency=stale` reads until it shows every write
/// of `acked`, at most [`CATCH_UP_BOUND`]; how long that took.
async fn caught_up(
    run: &Run,
    kv: &Clients,
    i: usize,
    acked: &[(usize, u32, u64)],
) -> Result<Duration, String> {
    let started = Instant::now();
    let client = KvClient::new(&kv.api, kv::OP_TIMEOUT);
    loop {
        let (shown, first_missing) =
            stale_matches(&client, kv.addrs[i], acked).await.map_err(|m| run.fail(m))?;
        if shown == acked.len() {
            return Ok(started.elapsed());
        }
        if started.elapsed() > CATCH_UP_BOUND {
            return Err(run.fail(format!(
                "the wiped node n{} served {shown} of {} acknowledged keys with consistency=stale {CATCH_UP_BOUND:?} after its restart; first missing {first_missing:?}",
                i + 1,
                acked.len(),
            )));
        }
        tokio::time::sleep(CATCH_UP_POLL).await;
    }
}

/// The size of server `i`'s snapshot file (`<data dir>/log/snapshot`), if
/// it has one.
fn snapshot_bytes(run: &Run, i: usize) -> Option<u64> {
    let path = run.cluster.data_dir(i).join("log").join("snapshot");
    std::fs::metadata(path).ok().map(|m| m.len())
}

/// Fails unless leader `l` of `term` is the only leadership seen since
/// `mark`, no node reported a higher term, and all agree on it now.
async fn leader_held(
    run: &Run,
    mark: Instant,
    l: usize,
    term: u64,
    what: &str,
) -> Result<String, String> {
    let all: Vec<usize> = (0..NODES).collect();
    let ((l2, term2), _) = run.agreement(&all, Instant::now(), heal_bound(TIMINGS)).await?;
    let changes = run.checker.state().leaderships_since(mark);
    let max_term = run.checker.state().max_term_since(mark);
    if (l2, term2) != (l, term) || changes != vec![(run.cluster.id(l), term)] || max_term != term {
        return Err(run.fail(format!(
            "the leader changed {what}: n{} t{term} -> n{} t{term2}; leaderships {changes:?}; highest term {max_term}",
            l + 1,
            l2 + 1
        )));
    }
    Ok(format!(
        "leaderships since the kill: {changes:?}; highest term {max_term} (the leader's own)"
    ))
}

/// Reads keys `0..keys` linearizably with `reader` into `history`; fails
/// unless every write of `acked` is seen (`what` says where the reads went),
/// the checker saw no violation and the history is linearizable. The
/// history's tally and the search's verdict.
async fn read_back(
    run: &Run,
    reader: &Session,
    keys: usize,
    acked: &[(usize, u32, u64)],
    history: &mut Vec<Record>,
    what: &str,
) -> Result<(Tally, tenure_sim::kvcheck::HistoryVerdict), String> {
    let finals = reader.final_reads(0..keys).await.map_err(|m| run.fail(m))?;
    let lost = missing(acked, &final_values(&finals));
    history.extend(finals);
    run.check_safety()?;
    if !lost.is_empty() {
        return Err(run.fail(format!(
            "linearizable reads {what} miss acknowledged writes:\n  {}",
            lost.join("\n  ")
        )));
    }
    let tally = Tally::of(history);
    let verdict = kv::check_linearizable(history, keys)
        .map_err(|m| run.fail(format!("the history is not linearizable ({tally}):\n{m}")))?;
    Ok((tally, verdict))
}

/// 3 nodes: `w.keys` keys written `w.times` times each (acknowledged); a
/// follower is killed and its data directory deleted (its certificate and
/// config stay); `w.while_down` more keys acknowledged while it is down; it
/// restarts as a brand-new node and must serve every key's last
/// acknowledged write with `consistency=stale` within [`CATCH_UP_BOUND`],
/// while the leader and its term stay the same; then every key is read
/// linearizably through it. With [`WIPE_SNAPSHOT`] the leader must have a
/// snapshot before the restart (so the node catches up from it).
pub async fn wiped_follower(w: Wipe) -> Result<Outcome, String> {
    let mut out = Outcome::default();
    let run = Run::start(NODES, TIMINGS).await?;
    let (l, term) = run.elected().await?;
    let kv = Clients::new(&run)?;
    let all: Vec<usize> = (0..NODES).collect();
    let mut history = Vec::new();
    let (first, more) = (0..w.keys, w.keys..w.keys + w.while_down);
    let wrote = Instant::now();
    let writers = kv.sessions(0, w.writers, &all);
    let mut acked = write_acknowledged(&writers, first, w.times, &kv.values, &mut history)
        .await
        .map_err(|m| run.fail(m))?;
    let write_took = wrote.elapsed();
    let f = (0..NODES).rev().find(|&i| i != l).expect("3 nodes");
    let mark = Instant::now();
    run.cluster.kill(f).map_err(|e| run.fail(format!("SIGKILL n{}: {e}", f + 1)))?;
    run.cluster.wipe(f).map_err(|e| run.fail(format!("wipe n{}: {e}", f + 1)))?;
    let live: Vec<usize> = all.iter().copied().filter(|&i| i != f).collect();
    let writers = kv.sessions(w.writers, w.writers, &live);
    let while_down = write_acknowledged(&writers, more.clone(), 1, &kv.values, &mut history)
        .await
        .map_err(|m| run.fail(m))?;
    acked.extend(while_down);
    let leader_snapshot = snapshot_bytes(&run, l);
    if w.times * w.keys > 10_000 && leader_snapshot.is_none() {
        return Err(run.fail(format!(
            "after {} writes the leader n{} has no snapshot",
            w.times * w.keys,
            l + 1
        )));
    }
    run.cluster.spawn(f).map_err(|e| run.fail(format!("restart n{}: {e}", f + 1)))?;
    let took = caught_up(&run, &kv, f, &acked).await?;
    run.hold(3 * TIMINGS.election_timeout()).await;
    let held =
        leader_held(&run, mark, l, term, "while the follower was wiped and caught up").await?;
    let reader = &kv.sessions(2 * w.writers, 1, &[f])[0];
    let what = format!("through the wiped node n{}", f + 1);
    let (tally, verdict) = read_back(&run, reader, more.end, &acked, &mut history, &what).await?;
    out.note(format!(
        "{NODES} nodes, leader n{} t{term}: {} keys x {} writes acknowledged by {} writers in {write_took:?}; SIGKILL of follower n{f1}, its data directory deleted; {} more keys acknowledged while it was down; leader's snapshot file: {leader_snapshot:?} bytes",
        l + 1,
        w.keys,
        w.times,
        w.writers,
        w.while_down,
        f1 = f + 1
    ));
    out.note(format!(
        "n{} restarted empty: served the last acknowledged write of all {} keys with consistency=stale {took:?} after its restart (bound {CATCH_UP_BOUND:?}); its snapshot file now: {:?} bytes; linearizable reads through it see every one",
        f + 1,
        acked.len(),
        snapshot_bytes(&run, f)
    ));
    out.note(held);
    out.note(format!("history: {tally}; linearizable ({} search steps)", verdict.steps));
    out.note(run.traffic());
    Ok(out)
}

/// The negative control: the clients of [`linearizable`] for
/// [`CONTROL_RUN`], but reading with `consistency=stale` — a follower
/// answers from what it has applied, which lags the leader's commits (one
/// follower is cut off from the leader for half the run, so that it lags
/// by seconds, not by a round trip), so the history is not linearizable and the check must find a violation
/// (no verdict is not enough). A check that passed this would pass
/// anything the real runs recorded.
pub async fn stale_reads_are_caught() -> Result<Outcome, String> {
    let mut out = Outcome::default();
    let run = Run::start(NODES, TIMINGS).await?;
    let (l, term) = run.elected().await?;
    let kv = Clients::new(&run)?;
    let spec =
        Spec { clients: CLIENTS, keys: 0..KEYS, first_client: 0, seed: 1, stale_reads: true };
    let workload = kv.workload(&spec);
    // Without help a follower lags its leader by a millisecond or two, and
    // a run may show no read old enough to be caught: cut one follower off
    // from the leader for the middle half of the run, so that what it
    // serves is seconds old while the other two commit.
    let lagging = (l + 1) % NODES;
    tokio::time::sleep(CONTROL_RUN / 4).await;
    run.cluster.cut(l, lagging).map_err(|e| run.fail(format!("cutting n{}: {e}", lagging + 1)))?;
    tokio::time::sleep(CONTROL_RUN / 2).await;
    run.cluster.heal().map_err(|e| run.fail(format!("healing: {e}")))?;
    tokio::time::sleep(CONTROL_RUN / 4).await;
    let history = workload.stop().await.map_err(|m| run.fail(m))?;
    let tally = Tally::of(&history);
    let verdict =
        tenure_sim::kvcheck::check_history(&history, KEYS, tenure_sim::kvcheck::MAX_SEARCH_STEPS);
    out.note(format!(
        "{NODES} nodes, leader n{} t{term}, follower n{} cut off from it for the middle {:?}; {CLIENTS} clients reading with consistency=stale for {CONTROL_RUN:?}: {tally}",
        l + 1,
        lagging + 1,
        CONTROL_RUN / 2
    ));
    let Some((check, what)) = verdict.violations.first() else {
        return Err(run.fail(format!(
            "negative control: {} stale reads and the check found no violation (undecided: {:?})",
            tally.answered_reads, verdict.undecided
        )));
    };
    out.note(format!(
        "caught, as it must be: {} violations; the first: {check:?}: {}",
        verdict.violations.len(),
        what.chars().take(600).collect::<String>()
    ));
    Ok(out)
}

/// Sets the soft file size limit of process `pid` (`prlimit --fsize=N:`):
/// `"1"` makes every write past a file's first byte fail with EFBIG (the
/// server ignores SIGXFSZ), `"unlimited"` lifts it (the hard limit stays
/// unlimited, so lifting needs no privilege beyond the first call's).
fn set_file_size_limit(pid: u32, limit: &str) -> Result<(), String> {
    let status = std::process::Command::new("prlimit")
        .args(["--pid", &pid.to_string(), &format!("--fsize={limit}:")])
        .status()
        .map_err(|e| format!("prlimit: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("prlimit --pid {pid} --fsize={limit}: {status}"))
    }
}

/// 3 nodes under writes through every node; the leader's log writes start
/// failing (its file size limit lowered to one byte: every append fails,
/// and so do its state file's writes and its own log lines, as on a full
/// disk). Its entries may
/// have left before its own write (docs/REPLICATION.md): it must give its
/// leadership up, and another node must lead within [`heal_bound`] of the
/// next write, whose clients go on. Then the limit is lifted: the node
/// reopens its log and catches up. Every acknowledged write is read back
/// linearizably, and the history is linearizable.
pub async fn leader_write_fails() -> Result<Outcome, String> {
    let mut out = Outcome::default();
    let run = Run::start(NODES, TIMINGS).await?;
    let (l, term) = run.elected().await?;
    let kv = Clients::new(&run)?;
    let all: Vec<usize> = (0..NODES).collect();
    let mut history = Vec::new();
    let writers = kv.sessions(0, WRITERS, &all);
    let mut acked = write_acknowledged(&writers, 0..40, 1, &kv.values, &mut history)
        .await
        .map_err(|m| run.fail(m))?;
    let pid = run.cluster.elector_pid(l).map_err(|e| run.fail(format!("n{} pid: {e}", l + 1)))?;
    set_file_size_limit(pid, "1").map_err(|m| run.fail(m))?;
    let mark = Instant::now();
    let writers = kv.sessions(WRITERS, WRITERS, &all);
    let while_failing = write_acknowledged(&writers, 40..80, 1, &kv.values, &mut history).await;
    let took = mark.elapsed();
    let lifted = set_file_size_limit(pid, "unlimited");
    acked.extend(while_failing.map_err(|m| run.fail(m))?);
    lifted.map_err(|m| run.fail(m))?;
    let changes = run.checker.state().leaderships_since(mark);
    let others: Vec<(u64, u64)> = changes.iter().copied().filter(|&(_, t)| t > term).collect();
    let Some(&(new_id, new_term)) = others.first() else {
        return Err(run.fail(format!(
            "the leader n{} t{term} whose log writes failed kept its leadership: leaderships since {changes:?}",
            l + 1
        )));
    };
    let caught = caught_up(&run, &kv, l, &acked).await?;
    let (_, agreed) = run.agreement(&all, Instant::now(), heal_bound(TIMINGS)).await?;
    let reader = &kv.sessions(2 * WRITERS, 1, &[l])[0];
    let what = format!("after n{}'s log writes failed", l + 1);
    let (tally, verdict) = read_back(&run, reader, 80, &acked, &mut history, &what).await?;
    out.note(format!(
        "{NODES} nodes, leader n{} t{term}; its file size limit set to 1 byte (its log appends fail): 40 keys acknowledged through every node in {took:?}; leaderships since: {changes:?} (n{new_id} t{new_term} first after it)",
        l + 1
    ));
    out.note(format!(
        "limit lifted: n{} served every acknowledged write with consistency=stale after {caught:?}; all agreed after {agreed:?}",
        l + 1
    ));
    out.note(format!("history: {tally}; linearizable ({} search steps)", verdict.steps));
    out.note(run.traffic());
    Ok(out)
}
