//! Changes of members on real processes in network namespaces, under load
//! (docs/MEMBERSHIP.md): every node of a live three-node cluster replaced,
//! one by one (SIGKILL, its data directory wiped, a new node of a new id
//! in a namespace of its own started with `--join`, `tenure member
//! replace OLD NEW HOST:PORT`), and replacements with a partition while
//! the change is under way (the joining node cut off while it is a
//! learner; the leader cut off as a removal reaches it). Meanwhile:
//!
//! - key-value clients write and read ([`crate::kv`]): five on four keys,
//!   whose history must be linearizable, and one that writes keys of its
//!   own once each, whose every acknowledged write must read back, after
//!   each step (a linearizable list) and at the end (linearizable reads, in
//!   the history);
//! - application elections ([`Background`]): three `tenure run` hand a
//!   fenced resource over and over, and its ledger must show no write
//!   behind the fence and one holder per token;
//! - the checker ([`crate::checker`]) polls every slot's status and watch:
//!   one leader per term, tokens that never go down, no stale leader; and
//!   from what it saw, the time without a leader is measured
//!   ([`crate::checker::State::leaderless`]).
//!
//! What a step may cost in time without a leader: under one election
//! timeout plus [`GAP_SLACK`] (measurement: a status poll every 15 ms and
//! the time an answer takes), except across a failover the step causes
//! itself (the leader's SIGKILL, or the leader cut off): that one gap may
//! last the bound every failover of this crate is held to,
//! [`heal_bound`] (two election timeouts and 500 ms: one timeout for the
//! followers to notice, up to one more of candidacy, the round trips,
//! scheduling on a shared machine) plus the same slack.

use crate::app_elections::{Background, APPS};
use crate::checker::{get_once, request_once, Api};
use crate::cluster::Cluster;
use crate::kv::{self, Causes, Clock, KvClient, Session, Spec, Tally, Values, Workload};
use crate::kv_scenarios::{final_values, missing};
use crate::scenarios::{heal_bound, Outcome, Run, FIRST_ELECTION_BOUND, TIMINGS};
use hyper::Method;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tenure_api::MembersBody;
use tenure_sim::workload::{key_name, value_bytes, Fate, KvInput, KvOutput, Record};
use tokio::task::JoinHandle;

/// The first members.
pub const FIRST: usize = 3;
/// Slots for the nodes that join: a replacement joins while the node it
/// replaces still holds its slot (killed, or still running), so three
/// slots more than the voters is plenty; a slot is used again once its
/// node is killed and wiped. With the [`APPS`] application hosts, nine
/// namespaces ([`crate::net::MAX_NODES`]).
pub const SPARE: usize = 3;
/// Slack over every bound on a time without a leader, for measuring it: the
/// checker polls each node every 15 ms, and a claim arrives a status
/// answer's time after it was made (tens of ms on a loaded machine).
pub const GAP_SLACK: Duration = Duration::from_millis(100);
/// How long a partition is held.
pub const PARTITION_HOLD: Duration = Duration::from_secs(2);
/// Environment variable: rounds of replacements (default 1: each of the
/// first three nodes replaced once; each further round replaces the
/// three voters again).
pub const ROUNDS_ENV: &str = "TENURE_FAULT_MEMBERSHIP_ROUNDS";
/// Most rounds.
pub const MAX_ROUNDS: usize = 100;
/// Environment variable: `1` fails the run when a `tenure run
/// --keep-trying` of the application elections exited on its own (by
/// default it is started again, as a supervisor would, and reported).
pub const STRICT_RUN_ENV: &str = "TENURE_FAULT_MEMBERSHIP_STRICT_RUN";
/// Environment variable: a directory where a failed run's logs are kept.
pub const LOGS_ENV: &str = "TENURE_FAULT_MEMBERSHIP_LOGS";
/// Bound on one round of a scenario, start and final checks included: the
/// scenario is dropped after it (every process and namespace with it).
/// One round takes 10 to 15 s in a debug build.
pub const ROUND_BOUND: Duration = Duration::from_secs(90);
/// Concurrent clients on the few keys of the linearizability check.
const CLIENTS: usize = 5;
/// Their keys.
const KEYS: usize = 4;
/// The first key the writer of keys of its own writes (once each).
const ONCE_FIRST_KEY: usize = 1000;
/// At most this many of those keys.
const MAX_ONCE_KEYS: usize = 100_000;
/// Pause of that writer after a write that was sent.
const ONCE_EVERY: Duration = Duration::from_millis(15);
/// Readers of the final reads, in parallel.
const FINAL_READERS: usize = 8;
/// The clients work this long before the first change.
const WARM_UP: Duration = Duration::from_secs(1);
/// Bound on a node joining: its process starting, reading the members, its
/// request to be added committed.
const JOIN_BOUND: Duration = Duration::from_secs(20);
/// Bound on a joined node being promoted (catching up, then three election
/// timeouts), and on a configuration being seen.
const PROMOTION_BOUND: Duration = Duration::from_secs(30);
/// How often the members are read while waiting.
const MEMBERS_POLL: Duration = Duration::from_millis(20);
/// Timeout of one `GET /v1/members`.
const MEMBERS_TIMEOUT: Duration = Duration::from_secs(2);
/// `--wait-ms` of `tenure member replace`.
const REPLACE_WAIT_MS: u64 = 30_000;
/// Bound on the answer to the removal sent to a leader just cut off (the
/// server answers 504 after 10 s at most: `CHANGE_TIMEOUT`).
const CUT_REMOVE_BOUND: Duration = Duration::from_secs(12);
/// Bound on one `tenure member` run (it is killed after).
const CLI_BOUND: Duration = Duration::from_secs(60);
/// A learner whose commit index has not moved for this long while the
/// leader counts it behind is stuck ([`Scene::stuck_learner`]): catching up
/// takes 1 to 2 s here.
const STUCK_AFTER: Duration = Duration::from_secs(10);
/// How often a learner's progress is read while it catches up.
const STUCK_POLL: Duration = Duration::from_millis(500);
/// Runs of one `tenure member` change before the step fails.
const TRIES: usize = 3;
/// Bound on reading back every acknowledged write.
const READ_BACK_BOUND: Duration = Duration::from_secs(20);

/// `$TENURE_FAULT_MEMBERSHIP_ROUNDS`, else 1.
pub fn rounds_from_env() -> Result<usize, String> {
    match std::env::var(ROUNDS_ENV) {
        Err(_) => Ok(1),
        Ok(v) => match v.parse::<usize>() {
            Ok(n) if (1..=MAX_ROUNDS).contains(&n) => Ok(n),
            _ => Err(format!("{ROUNDS_ENV}={v:?}: a number of rounds, 1 to {MAX_ROUNDS}")),
        },
    }
}

/// Copies every log of the run's directory `dir` (servers, applications,
/// observer) into a new directory under `$env` ([`LOGS_ENV`] here,
/// [`crate::partitions::LOGS_ENV`] for groups), when set (the run's
/// directory is deleted with it): where, in words.
pub(crate) fn keep_logs(env: &str, dir: &std::path::Path) -> String {
    let Ok(to) = std::env::var(env) else { return String::new() };
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let to = std::path::Path::new(&to).join(name);
    let copy = || -> std::io::Result<usize> {
        std::fs::create_dir_all(&to)?;
        let mut n = 0;
        for e in std::fs::read_dir(dir)? {
            let path = e?.path();
            if path.extension().is_some_and(|x| x == "log") {
                std::fs::copy(&path, to.join(path.file_name().unwrap_or_default()))?;
                n += 1;
            }
        }
        Ok(n)
    };
    match copy() {
        Ok(n) => format!("\n{n} logs kept in {}", to.display()),
        Err(e) => format!("\nthe logs could not be kept in {}: {e}", to.display()),
    }
}

/// Whether [`STRICT_RUN_ENV`] is `1`.
fn strict_run() -> bool {
    std::env::var(STRICT_RUN_ENV).is_ok_and(|v| v == "1")
}

/// Runs `scenario` of `rounds` rounds within `rounds` × [`ROUND_BOUND`]; on
/// timeout it is dropped, and with it its processes and namespaces.
async fn bounded(
    rounds: usize,
    scenario: impl std::future::Future<Output = Result<Outcome, String>>,
) -> Result<Outcome, String> {
    let bound = ROUND_BOUND * rounds as u32;
    tokio::time::timeout(bound, scenario).await.unwrap_or_else(|_| {
        Err(format!(
            "the scenario did not end within {bound:?} (its steps so far are printed above)"
        ))
    })
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1e3)
}

/// A member change by `tenure member` (the run's admin token and CA), in
/// the root namespace, which reaches every node: its exit status and what
/// it printed. Killed if it outlives [`CLI_BOUND`] or the scenario.
async fn member_cli(cluster: &Cluster, args: &[String]) -> Result<(i32, String), String> {
    let token = cluster.admin_token_file().ok_or("the cluster has no admin token")?;
    let mut command = tokio::process::Command::new(cluster.binary());
    command.arg("member").args(args).arg("--token-file").arg(token);
    if let Some(ca) = cluster.ca_file() {
        command.arg("--cacert").arg(ca);
    }
    command
        .env_remove("TENURE_TOKEN")
        .env_remove("TENURE_CACERT")
        .env_remove("TENURE_ENDPOINTS")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let line = format!("tenure member {}", args.join(" "));
    let out = match tokio::time::timeout(CLI_BOUND, command.output()).await {
        Ok(Ok(out)) => out,
        Ok(Err(e)) => return Err(format!("{line}: {e}")),
        Err(_) => return Err(format!("{line} did not end within {CLI_BOUND:?}")),
    };
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    Ok((out.status.code().unwrap_or(-1), text.trim_end().to_string()))
}

/// The configuration as the leader holds it: the first of `among` that
/// answers as the leader.
async fn leader_members(
    api: &Api,
    cluster: &Cluster,
    among: &[usize],
) -> Result<MembersBody, String> {
    let mut last = String::from("nobody asked");
    for &i in among {
        let addr = cluster.http_addr(i);
        match get_once(api.clone(), addr, "/v1/members", MEMBERS_TIMEOUT).await {
            Some((200, body)) => match serde_json::from_str::<MembersBody>(&body) {
                Ok(m) if m.leader == Some(m.served_by) => return Ok(m),
                Ok(m) => last = format!("node {} names leader {:?}", m.served_by, m.leader),
                Err(e) => return Err(format!("GET /v1/members does not parse ({e}): {body}")),
            },
            Some((code, body)) => last = format!("node {}: {code} {body}", cluster.id(i)),
            None => last = format!("node {}: no answer", cluster.id(i)),
        }
    }
    Err(last)
}

/// The voters' ids, ascending.
fn voter_ids(m: &MembersBody) -> Vec<u64> {
    let mut ids: Vec<u64> = m.voters.iter().map(|v| v.id).collect();
    ids.sort_unstable();
    ids
}

/// The learners' ids, ascending.
fn learner_ids(m: &MembersBody) -> Vec<u64> {
    let mut ids: Vec<u64> = m.learners.iter().map(|v| v.id).collect();
    ids.sort_unstable();
    ids
}

/// What the writer of keys of its own ends with: its history, and the key
/// after the last it tried.
type OnceHistory = Result<(Vec<Record>, usize), String>;

/// One client that writes keys of its own, each once, one write at a time
/// through the nodes in turn, and keeps every write that was acknowledged.
struct OnceWriter {
    stop: Arc<AtomicBool>,
    acked: Arc<Mutex<Vec<(usize, u32, u64)>>>,
    task: Option<JoinHandle<OnceHistory>>,
}

impl OnceWriter {
    fn start(session: Session, values: Arc<Values>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let acked = Arc::new(Mutex::new(Vec::new()));
        let (s, a) = (stop.clone(), acked.clone());
        let task = tokio::spawn(async move {
            let mut history = Vec::new();
            let mut key = ONCE_FIRST_KEY;
            while !s.load(Ordering::Relaxed) && key < ONCE_FIRST_KEY + MAX_ONCE_KEYS {
                let value = values.next();
                let r = session.run(key, KvInput::Put { key, value }, false).await?;
                let pause = match &r.fate {
                    Fate::Returned { output: KvOutput::Written { revision }, .. } => {
                        lock(&a).push((key, value, *revision));
                        ONCE_EVERY
                    }
                    // Not sent, or refused before anything was done (no
                    // leader): the next node at once.
                    Fate::NotExecuted => Duration::from_millis(1),
                    _ => ONCE_EVERY,
                };
                history.push(r);
                key += 1;
                tokio::time::sleep(pause).await;
            }
            Ok((history, key))
        });
        OnceWriter { stop, acked, task: Some(task) }
    }

    /// The writes acknowledged so far: (key, value, revision).
    fn acked(&self) -> Vec<(usize, u32, u64)> {
        lock(&self.acked).clone()
    }

    /// Stops; its history, and the keys it tried (from [`ONCE_FIRST_KEY`]).
    async fn stop(mut self) -> Result<(Vec<Record>, std::ops::Range<usize>), String> {
        self.stop.store(true, Ordering::Relaxed);
        let task = self.task.take().ok_or("stopped already")?;
        let (history, end) = task.await.map_err(|e| format!("the writer failed: {e}"))??;
        Ok((history, ONCE_FIRST_KEY..end))
    }
}

impl Drop for OnceWriter {
    fn drop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The key-value side: the busy clients, the writer of keys of its own,
/// and what they share. Every client asks every slot (one where nothing
/// runs refuses the connection at once: not executed).
struct Writes {
    api: Api,
    addrs: Vec<SocketAddr>,
    clock: Clock,
    causes: Arc<Causes>,
    busy: Option<Workload>,
    once: Option<OnceWriter>,
}

impl Writes {
    fn start(run: &Run) -> Result<Self, String> {
        let api = run.cluster.kv_api().map_err(|e| run.fail(format!("kv api: {e}")))?;
        let addrs = run.cluster.http_addrs();
        let clock = Clock::start();
        let values = Arc::new(Values::default());
        let causes = Arc::new(Causes::default());
        let spec =
            Spec { clients: CLIENTS, keys: 0..KEYS, first_client: 0, seed: 1, stale_reads: false };
        let busy = Workload::start(&api, &addrs, &spec, clock, values.clone(), &causes);
        let writer = Session {
            client: KvClient::new(&api, kv::OP_TIMEOUT),
            addrs: addrs.clone(),
            who: CLIENTS,
            clock,
            causes: causes.clone(),
            stale_reads: false,
        };
        let once = OnceWriter::start(writer, values);
        Ok(Writes { api, addrs, clock, causes, busy: Some(busy), once: Some(once) })
    }

    /// Reads every key through one of `live` (a linearizable list): each
    /// write of the writer acknowledged before must be there, with its
    /// value and revision. How many there were.
    async fn read_back(&self, live: &[usize]) -> Result<usize, String> {
        let acked = self.once.as_ref().map(OnceWriter::acked).unwrap_or_default();
        let client = KvClient::new(&self.api, kv::OP_TIMEOUT);
        let started = Instant::now();
        let mut why = Vec::new();
        let listed = 'read: loop {
            for &i in live {
                match client.list(self.addrs[i], "k").await {
                    Ok(listed) => break 'read listed,
                    Err(e) => why.push(format!("{}: {e}", self.addrs[i])),
                }
            }
            if started.elapsed() > READ_BACK_BOUND {
                return Err(format!(
                    "no node listed the keys within {READ_BACK_BOUND:?}: {}",
                    why[why.len().saturating_sub(6)..].join("; ")
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let lost: Vec<String> = acked
            .iter()
            .filter(|&&(key, value, rev)| {
                listed.get(&key_name(key)) != Some(&(value_bytes(value), rev))
            })
            .map(|&(key, value, rev)| {
                let got = listed.get(&key_name(key));
                format!(
                    "{}: v{value} at revision {rev} acknowledged, listed {got:?}",
                    key_name(key)
                )
            })
            .collect();
        if !lost.is_empty() {
            return Err(format!(
                "{} of {} acknowledged writes are not read back:\n  {}",
                lost.len(),
                acked.len(),
                lost.join("\n  ")
            ));
        }
        Ok(acked.len())
    }

    /// Stops the clients; reads every key once more, linearizably, through
    /// `live` (in parallel); every acknowledged write of the writer must be
    /// there. The whole history, the final reads included, and its keys.
    async fn finish(&mut self, live: &[usize]) -> Result<(Vec<Record>, usize, usize), String> {
        let busy = self.busy.take().ok_or("finished already")?;
        let mut history = busy.stop().await?;
        let once = self.once.take().ok_or("finished already")?;
        let acked = once.acked();
        let (once_history, tried) = once.stop().await?;
        history.extend(once_history);
        let keys: Vec<usize> = (0..KEYS).chain(tried.clone()).collect();
        let addrs: Vec<SocketAddr> = live.iter().map(|&i| self.addrs[i]).collect();
        let mut readers = Vec::new();
        for r in 0..FINAL_READERS {
            let session = Session {
                client: KvClient::new(&self.api, kv::OP_TIMEOUT),
                addrs: addrs.clone(),
                who: CLIENTS + 1 + r,
                clock: self.clock,
                causes: self.causes.clone(),
                stale_reads: false,
            };
            let mine: Vec<usize> = keys.iter().copied().skip(r).step_by(FINAL_READERS).collect();
            readers.push(tokio::spawn(async move {
                let mut h = Vec::new();
                for key in mine {
                    h.extend(session.final_reads(key..key + 1).await?);
                }
                Ok::<_, String>(h)
            }));
        }
        let mut finals = Vec::new();
        for r in readers {
            finals.extend(r.await.map_err(|e| format!("a final reader failed: {e}"))??);
        }
        let lost = missing(&acked, &final_values(&finals));
        if !lost.is_empty() {
            return Err(format!(
                "{} of {} acknowledged writes lost at the end:\n  {}",
                lost.len(),
                acked.len(),
                lost.join("\n  ")
            ));
        }
        history.extend(finals);
        history.sort_by_key(|r| r.call_ns);
        Ok((history, tried.end, acked.len()))
    }
}

/// What a step measured.
struct Step {
    what: String,
    /// When it began, from the scenario's start.
    at: Duration,
    took: Duration,
    /// The longest time without a leader, and the bound it was held to.
    longest: (Duration, Duration),
    /// The failover the step caused, if any: the gap across it, and how long
    /// after the leader's SIGKILL or cut the first new leader was seen.
    failover: Option<(Duration, Duration)>,
    /// Leaderships seen during the step: (leader id, term).
    leaderships: Vec<(u64, u64)>,
    /// The writer's acknowledged writes so far, all read back.
    read_back: usize,
    /// The rest, in words.
    notes: Vec<String>,
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (at {}, took {}): ", self.what, ms(self.at), ms(self.took))?;
        match self.failover {
            Some((gap, first)) => write!(
                f,
                "failover: a new leader {} after the fault, {} without a leader (bound {}); \
                 otherwise longest without a leader {} (bound {})",
                ms(first),
                ms(gap),
                ms(heal_bound(TIMINGS) + GAP_SLACK),
                ms(self.longest.0),
                ms(self.longest.1)
            )?,
            None => write!(
                f,
                "longest without a leader {} (bound {})",
                ms(self.longest.0),
                ms(self.longest.1)
            )?,
        }
        write!(
            f,
            "; leaderships {:?}; {} acknowledged writes read back",
            self.leaderships, self.read_back
        )?;
        for n in &self.notes {
            write!(f, "; {n}")?;
        }
        Ok(())
    }
}

/// The running scenario. Field order is drop order: the applications
/// before the clients, the clients before the servers.
struct Scene {
    elections: Option<Background>,
    writes: Writes,
    run: Arc<Run>,
    api: Api,
    /// The voters' slots.
    voters: Vec<usize>,
    /// Slots where nothing runs: never used, or killed and wiped.
    free: VecDeque<usize>,
    /// Slots never used (their node takes the slot's own id).
    unused: Vec<bool>,
    /// The next new id for a slot used again.
    next_id: u64,
    began: Instant,
    steps: Vec<Step>,
}

impl Scene {
    async fn start() -> Result<Self, String> {
        let run = Run::start_growable(FIRST, SPARE, APPS, TIMINGS).await?;
        let first = run.cluster.first_members();
        run.agreement(&first, Instant::now(), FIRST_ELECTION_BOUND).await?;
        let api = run.cluster.api().map_err(|e| run.fail(e))?;
        let writes = Writes::start(&run)?;
        let run = Arc::new(run);
        let elections = Background::start(run.clone()).await?;
        let slots = run.cluster.len();
        let scene = Scene {
            elections: Some(elections),
            writes,
            api,
            voters: first.clone(),
            free: (FIRST..slots).collect(),
            unused: (0..slots).map(|i| i >= FIRST).collect(),
            next_id: slots as u64 + 1,
            began: Instant::now(),
            steps: Vec::new(),
            run,
        };
        tokio::time::sleep(WARM_UP).await;
        Ok(scene)
    }

    fn c(&self) -> &Cluster {
        &self.run.cluster
    }

    fn id(&self, i: usize) -> u64 {
        self.c().id(i)
    }

    /// A failure: `what`, the steps so far, and the run's report.
    fn fail(&self, what: impl std::fmt::Display) -> String {
        let steps: Vec<String> = self.steps.iter().map(|s| format!("  {s}")).collect();
        let kept = keep_logs(LOGS_ENV, self.c().dir());
        self.run.fail(format!("{what}\nsteps done:\n{}{kept}", steps.join("\n")))
    }

    /// Fails at once if the application elections stopped on their own.
    async fn elections_running(&mut self) -> Result<(), String> {
        if self.elections.as_ref().is_some_and(Background::failed) {
            let e = self.elections.take().ok_or("no elections")?;
            let why = match e.finish().await {
                Err(e) => e,
                Ok(_) => "they ended without being told".to_string(),
            };
            return Err(self.fail(format!("the application elections stopped: {why}")));
        }
        Ok(())
    }

    /// The leader all `among` agree on now (index, term).
    async fn leader(&self, among: &[usize]) -> Result<(usize, u64), String> {
        let bound = heal_bound(TIMINGS);
        Ok(self.run.agreement(among, Instant::now(), bound).await?.0)
    }

    /// The members as the leader among `among` holds them, once `done`
    /// holds of them (committed), within `bound`.
    async fn members_when(
        &self,
        among: &[usize],
        bound: Duration,
        what: &str,
        done: impl Fn(&MembersBody) -> bool,
    ) -> Result<MembersBody, String> {
        let started = Instant::now();
        loop {
            let last = match leader_members(&self.api, self.c(), among).await {
                Ok(m) if m.committed && done(&m) => return Ok(m),
                Ok(m) => format!(
                    "configuration {} (committed: {}) voters {:?} learners {:?}",
                    m.config,
                    m.committed,
                    voter_ids(&m),
                    learner_ids(&m)
                ),
                Err(e) => e,
            };
            if started.elapsed() > bound {
                return Err(self.fail(format!("{what}: not within {bound:?}; last: {last}")));
            }
            tokio::time::sleep(MEMBERS_POLL).await;
        }
    }

    /// A slot for a new node and the node's id: a spare slot never used
    /// (its own id), else one whose node was killed and wiped (a new id).
    /// Whoever watches the slot is told.
    fn take_slot(&mut self) -> Result<(usize, u64), String> {
        let slot = self.free.pop_front().ok_or_else(|| self.fail("no free slot"))?;
        let id = if self.unused[slot] {
            self.unused[slot] = false;
            self.id(slot)
        } else {
            self.next_id += 1;
            self.next_id - 1
        };
        self.run.checker.renamed(slot, id);
        Ok((slot, id))
    }

    /// Starts node `id` in slot `new` joining through `via`, and waits
    /// until the cluster added it (polled every [`MEMBERS_POLL`]): the
    /// members then, and how long it took.
    async fn join(
        &self,
        new: usize,
        id: u64,
        via: &[usize],
    ) -> Result<(MembersBody, Duration), String> {
        let started = Instant::now();
        self.c()
            .spawn_joining(new, id, via)
            .map_err(|e| self.fail(format!("start node {id} with --join: {e}")))?;
        let what = format!("node {id} added by its --join");
        let m = self.members_when(via, JOIN_BOUND, &what, |m| m.get(id).is_some()).await?;
        Ok((m, started.elapsed()))
    }

    /// `tenure member replace OLD NEW` through `via` until it is done
    /// (exit 0); an unknown outcome (3) or no promotion in time (4) is run
    /// again, as the CLI says to. What each run said.
    async fn replace(
        &self,
        old_id: u64,
        new: usize,
        new_id: u64,
        via: &[usize],
    ) -> Result<Vec<String>, String> {
        let args: Vec<String> = [
            "replace".to_string(),
            old_id.to_string(),
            new_id.to_string(),
            self.c().peer_addr(new).to_string(),
            "-e".into(),
            self.c().endpoints_of(via),
            "--wait-ms".into(),
            REPLACE_WAIT_MS.to_string(),
        ]
        .into();
        let mut said = Vec::new();
        for _ in 0..TRIES {
            let started = Instant::now();
            let cli = tokio::select! {
                cli = member_cli(self.c(), &args) => cli,
                stuck = self.stuck_learner(new, new_id, via) => {
                    return Err(self.fail(stuck))
                }
            };
            let (code, text) = cli.map_err(|e| self.fail(e))?;
            said.push(format!("replace exit {code} after {}", ms(started.elapsed())));
            match code {
                0 if text.contains(&format!("node {old_id} is replaced by node {new_id}")) => {
                    return Ok(said)
                }
                3 | 4 => continue,
                _ => {
                    return Err(self.fail(format!(
                        "tenure member replace {old_id} {new_id}: exit {code}: {text}"
                    )))
                }
            }
        }
        Err(self.fail(format!(
            "tenure member replace {old_id} {new_id}: not done in {TRIES} runs: {said:?}"
        )))
    }

    /// Watches learner `id` in slot `new` while it catches up: returns (a
    /// finding, in words) once its commit index has not moved for
    /// [`STUCK_AFTER`] while the leader (among `via`) counts it behind;
    /// never returns while it progresses or is caught up.
    async fn stuck_learner(&self, new: usize, id: u64, via: &[usize]) -> String {
        let addr = self.c().http_addr(new);
        let mut last: Option<(u64, Instant)> = None;
        loop {
            tokio::time::sleep(STUCK_POLL).await;
            let own = match get_once(self.api.clone(), addr, "/v1/members", MEMBERS_TIMEOUT).await {
                Some((200, body)) => serde_json::from_str::<MembersBody>(&body).ok(),
                _ => None,
            };
            let Some(own) = own else { continue };
            let Ok(leader) = leader_members(&self.api, self.c(), via).await else { continue };
            let lag = leader.get(id).and_then(|(m, _)| m.lag_entries).unwrap_or(0);
            let since = match last {
                Some((commit, since)) if commit == own.commit_index => since,
                _ => Instant::now(),
            };
            last = Some((own.commit_index, since));
            if lag == 0 || since.elapsed() < STUCK_AFTER {
                continue;
            }
            let match_index = leader.get(id).and_then(|(m, _)| m.match_index);
            let names_leader = own.get(leader.served_by).is_some();
            return format!(
                "DEFECT: learner node {id} (slot {}, {}) stopped catching up: its commit index \
                 {} has not moved for {}; it holds configuration {} (voters {:?}, learners \
                 {:?}), which {} the leader, node {}; the leader holds configuration {} \
                 (voters {:?}, learners {:?}), commit index {}, and counts node {id} at match \
                 index {match_index:?}, {lag} entries behind",
                new + 1,
                self.c().peer_addr(new),
                own.commit_index,
                ms(since.elapsed()),
                own.config,
                voter_ids(&own),
                learner_ids(&own),
                if names_leader { "names" } else { "does not name" },
                leader.served_by,
                leader.config,
                voter_ids(&leader),
                learner_ids(&leader),
                leader.commit_index,
            );
        }
    }

    /// Judges the time without a leader between `began` and now, and makes
    /// the step's record: every gap under an election timeout plus
    /// [`GAP_SLACK`], except the one across `failover` (the instant the
    /// leader was killed or cut off), held to [`heal_bound`] plus the slack.
    fn judge(
        &self,
        what: String,
        began: Instant,
        failover: Option<(Instant, Duration)>,
        read_back: usize,
        notes: Vec<String>,
    ) -> Result<Step, String> {
        let ended = Instant::now();
        let (gaps, leaderships) = {
            let s = self.run.checker.state();
            (s.leaderless(began, ended), s.leaderships_since(began))
        };
        let quiet = TIMINGS.election_timeout() + GAP_SLACK;
        let across = heal_bound(TIMINGS) + GAP_SLACK;
        // The longest gap that ends after the fault and starts before a
        // failover must have happened (gaps are longest first).
        let failover_gap = failover.and_then(|(at, _)| {
            gaps.iter().position(|&(s, l)| s + l > at && s <= at + heal_bound(TIMINGS))
        });
        let mut longest = Duration::ZERO;
        for (k, &(start, len)) in gaps.iter().enumerate() {
            let bound = if Some(k) == failover_gap { across } else { quiet };
            if len > bound {
                return Err(self.fail(format!(
                    "{what}: {} without a leader from {} into the step (bound {}); all gaps \
                     (from the step's start, length): {:?}; leaderships {leaderships:?}",
                    ms(len),
                    ms(start.saturating_duration_since(began)),
                    ms(bound),
                    gaps.iter()
                        .map(|&(s, l)| (ms(s.saturating_duration_since(began)), ms(l)))
                        .collect::<Vec<_>>()
                )));
            }
            if Some(k) != failover_gap {
                longest = longest.max(len);
            }
        }
        let failover = failover.map(|(_, first)| {
            let gap = failover_gap.map_or(Duration::ZERO, |k| gaps[k].1);
            (gap, first)
        });
        Ok(Step {
            what,
            at: began.saturating_duration_since(self.began),
            took: ended - began,
            longest: (longest, quiet),
            failover,
            leaderships,
            read_back,
            notes,
        })
    }

    /// How long after `at` a leader of a term above `term` was first seen,
    /// within [`heal_bound`].
    async fn new_leader_after(
        &self,
        at: Instant,
        term: u64,
        what: &str,
    ) -> Result<Duration, String> {
        let bound = heal_bound(TIMINGS);
        let seen = self.run.checker.wait_for(bound, |s| s.first_new_leader(at, term)).await;
        match seen {
            Some(((_, _, when), _)) => Ok(when.saturating_duration_since(at)),
            None => Err(self.fail(format!("no new leader within {bound:?} of {what}"))),
        }
    }

    /// SIGKILL of the node in slot `old`, its data directory deleted; a new
    /// node joins; `tenure member replace` puts it in the old one's place.
    async fn replace_killed(&mut self, old: usize) -> Result<(), String> {
        self.elections_running().await?;
        let began = Instant::now();
        let (leader, term) = self.leader(&self.voters).await?;
        let old_id = self.id(old);
        let was_leader = leader == old;
        let killed = Instant::now();
        let c = self.c();
        c.kill(old).map_err(|e| self.fail(format!("SIGKILL node {old_id}: {e}")))?;
        c.wipe(old).map_err(|e| self.fail(format!("wipe node {old_id}: {e}")))?;
        let rest: Vec<usize> = self.voters.iter().copied().filter(|&i| i != old).collect();
        let mut notes = Vec::new();
        let failover = match was_leader {
            true => {
                let first = self.new_leader_after(killed, term, "the leader's SIGKILL").await?;
                self.run.agreement(&rest, killed, heal_bound(TIMINGS)).await?;
                Some((killed, first))
            }
            false => None,
        };
        let (new, new_id) = self.take_slot()?;
        let (added, joined_in) = self.join(new, new_id, &rest).await?;
        let role = if added.get(new_id).is_some_and(|(_, v)| v) { "a voter" } else { "a learner" };
        notes.push(format!(
            "node {new_id} added by its --join {} after its start, {role}",
            ms(joined_in)
        ));
        notes.extend(self.replace(old_id, new, new_id, &rest).await?);
        let now: Vec<usize> = rest.iter().copied().chain([new]).collect();
        let mut want: Vec<u64> = now.iter().map(|&i| self.id(i)).collect();
        want.sort_unstable();
        let what = format!("voters {want:?}");
        self.members_when(&now, PROMOTION_BOUND, &what, |m| {
            voter_ids(m) == want && m.learners.is_empty()
        })
        .await?;
        self.leader(&now).await?;
        let read_back = self.writes.read_back(&now).await.map_err(|e| self.fail(e))?;
        let who = if was_leader { format!("leader t{term}") } else { "a follower".into() };
        let what = format!("replace node {old_id} ({who}, SIGKILL, wiped) by node {new_id}");
        let step = self.judge(what, began, failover, read_back, notes)?;
        self.voters = now;
        self.free.push_back(old);
        self.done(step);
        Ok(())
    }

    /// A follower killed and wiped; the node that replaces it is cut off
    /// from every other node as soon as the cluster added it (a learner,
    /// catching up) and for [`PARTITION_HOLD`], while `tenure member
    /// replace` waits for its promotion: it must not be promoted while cut
    /// off; after the heal it catches up, is promoted, and the replacement
    /// completes. The leader must not change.
    async fn replace_cutting_the_joiner(&mut self) -> Result<(), String> {
        self.elections_running().await?;
        let began = Instant::now();
        let (leader, term) = self.leader(&self.voters).await?;
        let old = *self.voters.iter().find(|&&i| i != leader).ok_or("no follower")?;
        let old_id = self.id(old);
        let c = self.c();
        c.kill(old).map_err(|e| self.fail(format!("SIGKILL node {old_id}: {e}")))?;
        c.wipe(old).map_err(|e| self.fail(format!("wipe node {old_id}: {e}")))?;
        let rest: Vec<usize> = self.voters.iter().copied().filter(|&i| i != old).collect();
        let (new, new_id) = self.take_slot()?;
        let (added, joined_in) = self.join(new, new_id, &rest).await?;
        if added.get(new_id).is_some_and(|(_, voter)| voter) {
            return Err(self.fail(format!(
                "node {new_id} was promoted before it could be cut off as a learner \
                 (the members were read every {MEMBERS_POLL:?})"
            )));
        }
        let cut = Instant::now();
        self.c().isolate(new).map_err(|e| self.fail(format!("cut off node {new_id}: {e}")))?;
        let args: Vec<String> = [
            "replace".to_string(),
            old_id.to_string(),
            new_id.to_string(),
            self.c().peer_addr(new).to_string(),
            "-e".into(),
            self.c().endpoints_of(&rest),
            "--wait-ms".into(),
            REPLACE_WAIT_MS.to_string(),
        ]
        .into();
        let heal = async {
            tokio::time::sleep_until((cut + PARTITION_HOLD).into()).await;
            let before = leader_members(&self.api, self.c(), &rest).await;
            let healed = self.c().heal_node(new);
            (before, healed, Instant::now())
        };
        let (cli, (before, healed, healed_at)) = tokio::join!(member_cli(self.c(), &args), heal);
        healed.map_err(|e| self.fail(format!("heal node {new_id}: {e}")))?;
        let before = before.map_err(|e| self.fail(format!("the members before the heal: {e}")))?;
        if before.get(new_id).is_none_or(|(_, voter)| voter) {
            return Err(self.fail(format!(
                "node {new_id}, cut off as a learner, was promoted (or removed) while cut off: \
                 voters {:?}, learners {:?}",
                voter_ids(&before),
                learner_ids(&before)
            )));
        }
        let (code, text) = cli.map_err(|e| self.fail(e))?;
        let mut notes = vec![
            format!("node {new_id} added by its --join {} after its start", ms(joined_in)),
            format!("node {new_id} cut off {} (still a learner at the heal)", ms(healed_at - cut)),
            format!("replace (run during the cut) exit {code} {} after the cut", ms(cut.elapsed())),
        ];
        if code != 0 {
            // 3 or 4: the CLI says to run it again; it continues.
            notes.extend(self.replace(old_id, new, new_id, &rest).await?);
        } else if !text.contains(&format!("node {old_id} is replaced by node {new_id}")) {
            return Err(self.fail(format!("replace exit 0 without saying so: {text}")));
        }
        let now: Vec<usize> = rest.iter().copied().chain([new]).collect();
        let mut want: Vec<u64> = now.iter().map(|&i| self.id(i)).collect();
        want.sort_unstable();
        let what = format!("voters {want:?}");
        self.members_when(&now, PROMOTION_BOUND, &what, |m| {
            voter_ids(m) == want && m.learners.is_empty()
        })
        .await?;
        let (l2, term2) = self.leader(&now).await?;
        notes.push(format!(
            "leader node {} t{term2} (was node {} t{term})",
            self.id(l2),
            self.id(leader)
        ));
        let read_back = self.writes.read_back(&now).await.map_err(|e| self.fail(e))?;
        let what = format!(
            "replace follower node {old_id} (SIGKILL, wiped) by node {new_id}, node {new_id} cut \
             off as a learner for {PARTITION_HOLD:?}"
        );
        let step = self.judge(what, began, None, read_back, notes)?;
        self.voters = now;
        self.free.push_back(old);
        self.done(step);
        Ok(())
    }

    /// A live follower replaced: a new node joins and is promoted (four
    /// voters); then the leader is cut off from every other node and at
    /// once (before its lease can run out) the removal of a follower,
    /// `DELETE /v1/members/{id}`, is sent to it alone: the change reaches a
    /// leader that can no longer commit it. Held [`PARTITION_HOLD`],
    /// healed. The answer must not be 200 (a change committed by a node cut
    /// off from every other); a refusal (nothing changed) must leave the
    /// follower a member; a 504 (outcome unknown) may go either way. Then
    /// `tenure member remove` is asked again through the other nodes until
    /// it completes; the removed follower is stopped.
    async fn replace_cutting_the_leader(&mut self) -> Result<(), String> {
        self.elections_running().await?;
        let began = Instant::now();
        let (new, new_id) = self.take_slot()?;
        let (_, joined_in) = self.join(new, new_id, &self.voters.clone()).await?;
        let four: Vec<usize> = self.voters.iter().copied().chain([new]).collect();
        let promoted = Instant::now();
        let what = format!("node {new_id} promoted");
        self.members_when(&four, PROMOTION_BOUND, &what, |m| m.get(new_id).is_some_and(|(_, v)| v))
            .await?;
        let promoted_in = promoted.elapsed();
        let (leader, term) = self.leader(&four).await?;
        let leader_id = self.id(leader);
        // A follower of the three before (never the new node).
        let old = *self.voters.iter().find(|&&i| i != leader).ok_or("no follower")?;
        let old_id = self.id(old);
        let admin = self.c().admin_api().map_err(|e| self.fail(format!("admin API: {e}")))?;
        let addr = self.c().http_addr(leader);
        let path = format!("/v1/members/{old_id}");
        let cut = Instant::now();
        self.c()
            .isolate(leader)
            .map_err(|e| self.fail(format!("cut off node {leader_id}: {e}")))?;
        let ask = async {
            let sent = cut.elapsed();
            let answer = request_once(admin, Method::DELETE, addr, &path, CUT_REMOVE_BOUND).await;
            (answer, sent, cut.elapsed())
        };
        let heal = async {
            tokio::time::sleep_until((cut + PARTITION_HOLD).into()).await;
            (self.c().heal_node(leader), Instant::now())
        };
        let ((answer, sent, answered), (healed, healed_at)) = tokio::join!(ask, heal);
        healed.map_err(|e| self.fail(format!("heal node {leader_id}: {e}")))?;
        let first = self.new_leader_after(cut, term, "the leader's cut").await?;
        let (code, body) = answer.unwrap_or((0, "no answer".into()));
        if code == 200 {
            return Err(self.fail(format!(
                "DEFECT: node {leader_id}, cut off from every other node {} before `DELETE \
                 /v1/members/{old_id}` was sent to it, answered 200 (committed) {} after the \
                 cut: {body}",
                ms(sent),
                ms(answered)
            )));
        }
        let unknown = code == 504;
        let outcome = match code {
            504 => "outcome unknown (written, leadership lost before it committed)",
            503 => "refused, no leader (nothing changed)",
            409 => "refused (nothing changed)",
            0 => "no answer",
            _ => "unexpected",
        };
        if !matches!(code, 409 | 503 | 504) {
            return Err(self.fail(format!(
                "`DELETE /v1/members/{old_id}` sent to node {leader_id} {} after it was cut off: \
                 {outcome} {code} after {}: {body}",
                ms(sent),
                ms(answered)
            )));
        }
        let mut notes = vec![
            format!("node {new_id} added by its --join {} after its start", ms(joined_in)),
            format!("promoted {} later", ms(promoted_in)),
            format!(
                "leader node {leader_id} cut off for {}; `DELETE /v1/members/{old_id}` sent to \
                 it alone {} after the cut: {code} after {}, {outcome}",
                ms(healed_at - cut),
                ms(sent),
                ms(answered)
            ),
        ];
        let rest: Vec<usize> = four.iter().copied().filter(|&i| i != old).collect();
        let mut want: Vec<u64> = rest.iter().map(|&i| self.id(i)).collect();
        want.sort_unstable();
        let m = self
            .members_when(&four, PROMOTION_BOUND, "the members after the heal", |_| true)
            .await?;
        if !unknown && m.get(old_id).is_none() {
            return Err(self.fail(format!(
                "DEFECT: node {leader_id}, cut off, refused `DELETE /v1/members/{old_id}` ({code}, \
                 nothing changed) and node {old_id} is not a member after the heal: voters {:?}, \
                 learners {:?}",
                voter_ids(&m),
                learner_ids(&m)
            )));
        }
        notes.push(format!(
            "after the heal node {old_id} is {}",
            if m.get(old_id).is_some() { "still a member" } else { "removed" }
        ));
        if m.get(old_id).is_some() {
            let again: Vec<String> = [
                "remove".to_string(),
                old_id.to_string(),
                "-e".into(),
                self.c().endpoints_of(&rest),
            ]
            .into();
            let mut done = false;
            for _ in 0..TRIES {
                let (code, text) = member_cli(self.c(), &again).await.map_err(|e| self.fail(e))?;
                notes.push(format!("asked again: exit {code}"));
                if code == 0 || text.contains("not a member") {
                    done = true;
                    break;
                }
            }
            if !done {
                return Err(self
                    .fail(format!("`tenure member remove {old_id}` never completed: {notes:?}")));
            }
        }
        let what = format!("voters {want:?}");
        self.members_when(&rest, PROMOTION_BOUND, &what, |m| {
            voter_ids(m) == want && m.learners.is_empty()
        })
        .await?;
        let c = self.c();
        c.kill(old).map_err(|e| self.fail(format!("stop removed node {old_id}: {e}")))?;
        c.wipe(old).map_err(|e| self.fail(format!("wipe node {old_id}: {e}")))?;
        let (l2, term2) = self.leader(&rest).await?;
        notes.push(format!("then node {} leads t{term2}", self.id(l2)));
        let read_back = self.writes.read_back(&rest).await.map_err(|e| self.fail(e))?;
        let what = format!(
            "replace live follower node {old_id} by node {new_id}, leader node {leader_id} (t{term}) \
             cut off as the removal reached it"
        );
        let step = self.judge(what, began, Some((cut, first)), read_back, notes)?;
        self.voters = rest;
        self.free.push_back(old);
        self.done(step);
        Ok(())
    }

    /// Records a step done, and prints it at once (a run that fails or
    /// times out later shows how far it went).
    fn done(&mut self, step: Step) {
        eprintln!("  step {} done: {step}", self.steps.len() + 1);
        self.steps.push(step);
    }

    /// Which of `nodes` (voters) to replace next: the leader when `leader`
    /// (or no follower is left among them), else a follower.
    async fn next_of(&self, nodes: &[usize], leader: bool) -> Result<usize, String> {
        let (l, _) = self.leader(&self.voters).await?;
        let follower = nodes.iter().copied().find(|&i| i != l);
        match (leader && nodes.contains(&l), follower) {
            (false, Some(f)) => Ok(f),
            _ => Ok(l),
        }
    }

    /// Stops the elections and the clients, reads everything back, checks
    /// the ledger, the history and the checker; what was measured.
    async fn finish(mut self, title: String) -> Result<Outcome, String> {
        let elections = self.elections.take().ok_or("no elections")?;
        let elections = elections.finish().await.map_err(|e| self.fail(e))?;
        if strict_run() && !elections.exits.is_empty() {
            return Err(self.fail(format!(
                "{STRICT_RUN_ENV}: `tenure run --keep-trying` exited on its own {} times (it \
                 should have campaigned again): {}",
                elections.exits.len(),
                elections.exits.join("; ")
            )));
        }
        let voters = self.voters.clone();
        let (history, keys, acked) = self.writes.finish(&voters).await.map_err(|e| self.fail(e))?;
        self.run.check_safety().map_err(|e| self.fail(e))?;
        let tally = Tally::of(&history);
        let checked = Instant::now();
        let verdict = kv::check_linearizable(&history, keys)
            .map_err(|e| self.fail(format!("the history is not linearizable ({tally}):\n{e}")))?;
        let check_took = checked.elapsed();
        const MIN_ACKED: usize = 100;
        if tally.acked < MIN_ACKED || tally.answered_reads < MIN_ACKED || acked == 0 {
            return Err(self.fail(format!(
                "too little was tested: {} writes acknowledged, {} reads answered (want \
                 {MIN_ACKED} each), {acked} of the writer's keys acknowledged",
                tally.acked, tally.answered_reads
            )));
        }
        let mut out = Outcome::default();
        out.note(title);
        let ids: Vec<u64> = voters.iter().map(|&i| self.id(i)).collect();
        out.note(format!(
            "timings: heartbeat {} ms, election timeout {} ms; slack {} over each bound on the \
             time without a leader (the checker polls every node's /v1/status every 15 ms and \
             follows its /v1/watch); final voters {ids:?}",
            TIMINGS.heartbeat_ms,
            TIMINGS.election_timeout_ms,
            ms(GAP_SLACK)
        ));
        for (k, s) in self.steps.iter().enumerate() {
            out.note(format!("step {}: {s}", k + 1));
        }
        out.note(format!(
            "key-value: {tally}; {}; the writer's {acked} acknowledged writes (keys of its own, \
             once each) all read back after every step and at the end",
            self.writes.causes
        ));
        out.note(format!(
            "linearizable: {keys} keys checked in {check_took:?} ({} search steps, at most {} on \
             one key)",
            verdict.steps, verdict.max_steps
        ));
        for l in &elections.outcome.lines {
            out.note(format!("application elections: {l}"));
        }
        out.note(self.run.traffic());
        let quiet = self.steps.iter().map(|s| s.longest.0).max().unwrap_or_default();
        let failovers: Vec<(Duration, Duration)> =
            self.steps.iter().filter_map(|s| s.failover).collect();
        let gap = failovers.iter().map(|f| f.0).max();
        let first = failovers.iter().map(|f| f.1).max();
        out.note(format!(
            "FIGURES: {} steps; longest time without a leader outside a failover {} (bound {}); \
             failovers {}: longest gap {}, new leader at most {} after the fault (bound {}); \
             kv writes acknowledged {} (+ {} conflicts, {} unknown), reads answered {}, {} \
             operations checked linearizable, the writer's {acked} acknowledged writes all read \
             back; application handovers {}, {} fenced writes judged, 0 overlaps, `tenure run` \
             exits on its own {}",
            self.steps.len(),
            ms(quiet),
            ms(TIMINGS.election_timeout() + GAP_SLACK),
            failovers.len(),
            gap.map_or("-".into(), ms),
            first.map_or("-".into(), ms),
            ms(heal_bound(TIMINGS) + GAP_SLACK),
            tally.acked,
            tally.conflicts,
            tally.unknown,
            tally.answered_reads,
            tally.ops,
            elections.handovers,
            elections.writes,
            elections.exits.len()
        ));
        Ok(out)
    }
}

/// Replaces every node of a live three-node cluster, one by one, `rounds`
/// times: the leader first (its SIGKILL is a failover), then a follower
/// (the leader must stay), then the last one (the leader again, when the
/// first failover elected it);
/// each SIGKILLed and wiped, its replacement started with `--join` in a
/// namespace of its own, `tenure member replace` run; while the key-value
/// clients and the application elections go on.
pub async fn replace_every_node(rounds: usize) -> Result<Outcome, String> {
    bounded(rounds, replace_every_node_unbounded(rounds)).await
}

async fn replace_every_node_unbounded(rounds: usize) -> Result<Outcome, String> {
    let mut scene = Scene::start().await?;
    for _ in 0..rounds {
        let mut left = scene.voters.clone();
        for k in 0..left.len() {
            let old = scene.next_of(&left, k == 0).await?;
            left.retain(|&i| i != old);
            scene.replace_killed(old).await?;
        }
    }
    let title = format!(
        "{rounds} round(s): each of the {FIRST} voters SIGKILLed, its data directory wiped, \
         replaced by a new node (--join, tenure member replace): the leader first, then a \
         follower, then whoever is left"
    );
    scene.finish(title).await
}

/// Replacements with a partition while the change is under way, `rounds`
/// times: a killed follower's replacement cut off while it is a learner;
/// then a live follower replaced with the leader cut off as the removal
/// reaches it.
pub async fn partition_during_changes(rounds: usize) -> Result<Outcome, String> {
    bounded(rounds, partition_during_changes_unbounded(rounds)).await
}

async fn partition_during_changes_unbounded(rounds: usize) -> Result<Outcome, String> {
    let mut scene = Scene::start().await?;
    for _ in 0..rounds {
        scene.replace_cutting_the_joiner().await?;
        scene.replace_cutting_the_leader().await?;
    }
    let title = format!(
        "{rounds} round(s): a killed follower replaced with its replacement cut off while a \
         learner; a live follower replaced with the leader cut off as the removal reached it"
    );
    scene.finish(title).await
}
