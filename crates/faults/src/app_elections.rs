//! Application elections on real processes (in tenure and through etcd and ZooKeeper): three
//! `tenure run` processes, each on its own application host (a network
//! namespace of its own, see [`Cluster::start_with_hosts`]), take turns
//! leading one election held by a three-node tenure cluster, a three-member
//! etcd cluster or a three-server ZooKeeper ensemble ([`Held`]; who leads is
//! read the same way for all three, see [`crate::app_backend`]). Whoever
//! leads runs a command that writes
//! to a **fenced resource** every 5 ms, giving its fencing token. The
//! resource is a TCP server in the test process (the root namespace, which
//! no fault cuts off: a leader cut off from tenure still reaches it, the
//! dangerous case) and keeps a ledger of every write.
//!
//! The leader is made to go in every way it can, in turn: its command exits
//! (`tenure run` resigns at once), `tenure run` gets SIGTERM (it stops the
//! command, then resigns), SIGKILL (its guard stops the command; the session
//! expires on the tenure leader's clock), its guard alone gets SIGKILL (the
//! keeper in the command's group kills the group at once; `tenure run` waits
//! until it is gone, then resigns), SIGSTOP past its TTL (the guard stops
//! the command by the session's deadline), `tenure run`'s process group gets
//! SIGKILL (`tenure run` and its guard at once: the keeper kills the
//! command's group), its host is cut off from tenure (the guard stops the
//! command, with `tenure run` running but unable to renew), and `tenure run`
//! and its guard get SIGKILL by pid, one after the other.
//! Every few handovers the *tenure* leader is SIGKILLed while an
//! application leads: that leadership must not change. With an external
//! store, a store member is SIGKILLed or cut off from the other members
//! instead (the one the leader's client talks to, or the store's leader),
//! then restarted or healed: the leadership survives if the client fails
//! over within its deadline, or is handed over; the ledger judges either
//! way.
//!
//! What must hold, over every handover: no write reaches the resource with
//! a token below one it has already seen (the old leader's command stopped
//! before its successor's wrote) and one holder per token. A fault is
//! applied only to a leader whose command has written, with another
//! candidate waiting. How long each kind of handover took, and the smallest
//! gap the resource saw between the last write of one leader and the first
//! of the next, are reported.

use crate::app_backend::{connected_members, Backend, Held, Observer, STORE_READY_BOUND};
use crate::cluster::{Cluster, Timings};
use crate::scenarios::{heal_bound, Outcome, RESTART_MARGIN};
use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;
use std::collections::BTreeMap;
use std::fs::File;
use std::net::{Ipv4Addr, SocketAddr};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::net::TcpListener;

/// Tenure's own timings: fast, so that a tenure failover takes a few
/// hundred milliseconds, well inside an application session's TTL.
pub const TIMINGS: Timings = Timings { heartbeat_ms: 20, election_timeout_ms: 200 };
/// Tenure servers.
const NODES: usize = 3;
/// Application hosts, one `tenure run` on each.
pub const APPS: usize = 3;
/// The election the applications share.
const ELECTION: &str = "fenced-job";
/// The applications' session TTL, ms. A crashed leader is replaced about
/// this long after its last renewal.
pub const APP_TTL_MS: u64 = 1000;
/// SIGTERM to SIGKILL, ms (at most `0.818 × TTL − TTL/2` = 318 ms here).
const APP_GRACE_MS: u64 = 150;
/// Bound on a handover: the TTL, the expiry's commit, the waiter's wake-up
/// and the new command's start, on a loaded two-core machine running debug
/// builds.
const HANDOVER_MARGIN: Duration = Duration::from_secs(4);
/// Bound on the new leader's command reaching the resource, and on an
/// application becoming a waiting candidate again.
const STEP_BOUND: Duration = Duration::from_secs(10);
/// How often the election is polled.
const POLL: Duration = Duration::from_millis(10);
/// The *tenure* leader is SIGKILLed after every this many handovers (once
/// in the 13 handovers CI runs).
pub const TENURE_KILL_EVERY: usize = 12;
/// How long an application leadership is watched across a tenure failover:
/// two TTLs (the old tenure leader's expiry clock is gone, the new one
/// granted a fresh TTL, and the holder kept renewing through it).
const ACROSS_TENURE_FAILOVER: Duration = Duration::from_millis(2 * APP_TTL_MS);
/// The external stores' session TTL, ms: etcd grants whole seconds (and
/// sweeps expired leases every 500 ms), ZooKeeper negotiates it within
/// [minSessionTimeout, maxSessionTimeout] = [400, 60000] ms of the ensemble.
pub const EXTERNAL_TTL_MS: u64 = 2000;
/// What an external store adds to a handover beyond tenure's margin: etcd's
/// lease sweep (500 ms) and the election-timeout extension of a leader
/// change (500 ms); ZooKeeper's tick rounding (200 ms) and close commit.
const EXTERNAL_EXPIRY_SLACK: Duration = Duration::from_secs(1);
/// A store fault ([`StoreFault`], in turn) is applied to an external store
/// after every this many handovers (each of the four once in the 13
/// handovers CI runs).
pub const EXTERNAL_KILL_EVERY: usize = 3;
/// The longest line the resource accepts (`<token> <tag>\n`).
const MAX_LINE: u64 = 64;
/// Ledger anomalies kept in full (more are only counted).
const MAX_ANOMALIES: usize = 20;
/// Faults listed in a failure report.
const MAX_EVENTS_SHOWN: usize = 8;
/// Most handovers of one run.
pub const MAX_HANDOVERS: usize = 10_000;

/// How the leading application is made to go.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Fault {
    /// Its command exits (a stop file it checks between writes).
    CommandExits,
    /// SIGTERM to `tenure run`.
    Sigterm,
    /// SIGKILL to `tenure run`.
    Sigkill,
    /// SIGKILL to `tenure run`'s guard (`tenure run-guard`) alone.
    GuardKill,
    /// SIGSTOP to `tenure run` until the successor leads.
    Pause,
    /// Its host cut off from every tenure server until the successor leads.
    Partition,
    /// SIGKILL to `tenure run`'s process group (`tenure run` and its guard:
    /// what a supervisor that kills the group does).
    GroupKill,
    /// SIGKILL to `tenure run`'s pid, then its guard's.
    BothKill,
}

/// The faults, in the order they are applied (then again): every one in
/// the 13 handovers CI runs.
const FAULTS: [Fault; 8] = [
    Fault::CommandExits,
    Fault::Sigterm,
    Fault::Sigkill,
    Fault::GuardKill,
    Fault::Pause,
    Fault::GroupKill,
    Fault::Partition,
    Fault::BothKill,
];

/// One token's tenancy as the resource saw it.
#[derive(Debug, Clone)]
pub(crate) struct Tenancy {
    pub(crate) holder: String,
    pub(crate) first: Instant,
    pub(crate) last: Instant,
    pub(crate) writes: u64,
}

/// The resource's record of every write (also one partition's, in
/// [`crate::partitions`]).
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    pub(crate) tenancies: BTreeMap<u64, Tenancy>,
    pub(crate) writes: u64,
    /// Writes whose token was below the highest seen (refused: a fence
    /// would), or that named a second holder for a token, or unreadable.
    pub(crate) anomalies: Vec<String>,
    pub(crate) anomaly_count: u64,
}

impl Ledger {
    fn anomaly(&mut self, what: String) {
        self.anomaly_count += 1;
        if self.anomalies.len() < MAX_ANOMALIES {
            self.anomalies.push(what);
        }
    }

    /// Records a write of `line` (`<token> <holder>`) at `at`.
    pub(crate) fn write(&mut self, line: &str, at: Instant) {
        let mut parts = line.split_whitespace();
        let (Some(token), Some(holder), None) = (parts.next(), parts.next(), parts.next()) else {
            return self.anomaly(format!("unreadable write {line:?}"));
        };
        let Ok(token) = token.parse::<u64>() else {
            return self.anomaly(format!("write without a token: {line:?}"));
        };
        self.writes += 1;
        let highest = self.tenancies.last_key_value().map(|(&t, _)| t);
        if highest.is_some_and(|h| token < h) {
            let h = highest.unwrap_or_default();
            let since = at.duration_since(self.tenancies[&h].first);
            return self.anomaly(format!(
                "{holder} wrote with token {token} {since:?} after token {h}'s first write"
            ));
        }
        match self.tenancies.get_mut(&token) {
            Some(t) if t.holder != holder => {
                let first = t.holder.clone();
                self.anomaly(format!("token {token} used by {first} and {holder}"));
            }
            Some(t) => {
                t.last = at;
                t.writes += 1;
            }
            None => {
                let holder = holder.to_string();
                self.tenancies.insert(token, Tenancy { holder, first: at, last: at, writes: 1 });
            }
        }
    }
}

/// What the fenced resource keeps of the lines it receives.
pub(crate) trait Record: Default + Send + 'static {
    /// Records `line` (without its newline), received at `at`.
    fn record(&mut self, line: &str, at: Instant);
}

impl Record for Ledger {
    fn record(&mut self, line: &str, at: Instant) {
        self.write(line, at);
    }
}

/// The fenced resource: a TCP server that records `<token> <holder>` lines
/// (the record `L` says what a line is).
pub(crate) struct Resource<L = Ledger> {
    pub(crate) addr: SocketAddr,
    ledger: Arc<Mutex<L>>,
    task: tokio::task::JoinHandle<()>,
}

impl<L: Record> Resource<L> {
    pub(crate) async fn start(ip: Ipv4Addr) -> Result<Self, String> {
        let listener = TcpListener::bind((ip, 0)).await.map_err(|e| format!("resource: {e}"))?;
        let addr = listener.local_addr().map_err(|e| format!("resource: {e}"))?;
        let ledger = Arc::new(Mutex::new(L::default()));
        let shared = ledger.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let ledger = shared.clone();
                tokio::spawn(async move {
                    let mut reader = BufReader::new(stream);
                    loop {
                        let mut line = String::new();
                        match (&mut reader).take(MAX_LINE).read_line(&mut line).await {
                            Ok(0) | Err(_) => return,
                            Ok(_) => lock(&ledger).record(line.trim_end(), Instant::now()),
                        }
                    }
                });
            }
        });
        Ok(Resource { addr, ledger, task })
    }

    pub(crate) fn ledger(&self) -> MutexGuard<'_, L> {
        lock(&self.ledger)
    }
}

impl<L> Drop for Resource<L> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn lock<L>(m: &Mutex<L>) -> MutexGuard<'_, L> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// One application: a `tenure run --keep-trying` on host `host` (also a
/// member of a group of partitions, in [`crate::partitions`]).
pub(crate) struct App {
    pub(crate) host: usize,
    pub(crate) tag: String,
    stop_file: PathBuf,
    log: PathBuf,
    child: Option<Child>,
}

impl App {
    pub(crate) fn new(host: usize, dir: &Path) -> Self {
        let tag = format!("app{}", host + 1);
        App {
            host,
            stop_file: dir.join(format!("{tag}.stop")),
            log: dir.join(format!("{tag}.log")),
            tag,
            child: None,
        }
    }

    /// The command: connect to the resource, then write `<token> <tag>` every
    /// 5 ms until the stop file appears. The writing is done by a child of
    /// the shell (as a script's server would be), and both ignore SIGTERM:
    /// only a SIGKILL that reaches the whole command (at the deadline, or
    /// after the grace) stops it otherwise.
    fn script(&self, resource: SocketAddr) -> String {
        format!(
            "exec 3<>/dev/tcp/{}/{} || exit 111; trap '' TERM; \
             ( trap '' TERM; while [ ! -e {} ]; do echo \"$TENURE_FENCING_TOKEN {}\" >&3 \
             || exit 112; sleep 0.005; done ) & wait",
            resource.ip(),
            resource.port(),
            self.stop_file.display(),
            self.tag
        )
    }

    /// Starts `tenure run` on its host, reaching the store with `store`
    /// (the flags of [`Backend::client_args`]).
    fn spawn(
        &mut self,
        cluster: &Cluster,
        store: &[String],
        ttl_ms: u64,
        resource: SocketAddr,
    ) -> Result<(), String> {
        let (tag, script) = (self.tag.clone(), self.script(resource));
        let (ttl, grace) = (ttl_ms.to_string(), APP_GRACE_MS.to_string());
        let mut args: Vec<&str> = store.iter().map(String::as_str).collect();
        args.extend(["--election", ELECTION, "--value", &tag, "--keep-trying"]);
        args.extend(["--ttl-ms", &ttl, "--grace-ms", &grace, "--", "bash", "-c", &script]);
        self.spawn_run(cluster, &args)
    }

    /// Starts `tenure run ARGS` on its host, its output to its log.
    pub(crate) fn spawn_run(&mut self, cluster: &Cluster, args: &[&str]) -> Result<(), String> {
        let log = File::options()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(|e| format!("{}: {e}", self.log.display()))?;
        let err = log.try_clone().map_err(|e| format!("{}: {e}", self.log.display()))?;
        let mut command = cluster.host_command(self.host, cluster.binary());
        command
            .arg("run")
            .args(args)
            .env_remove("TENURE_TOKEN")
            .env_remove("TENURE_CACERT")
            .env_remove("TENURE_STORE")
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            // A group of its own (`ip netns exec` execs `tenure run`, so its
            // pid leads it), which [`Fault::GroupKill`] kills.
            .process_group(0);
        let child = command.spawn().map_err(|e| format!("start {}: {e}", self.tag))?;
        self.child = Some(child);
        Ok(())
    }

    pub(crate) fn signal(&self, sig: Signal) -> Result<(), String> {
        let child = self.child.as_ref().ok_or_else(|| format!("{} is not running", self.tag))?;
        kill(Pid::from_raw(child.id() as i32), sig).map_err(|e| format!("{sig} {}: {e}", self.tag))
    }

    pub(crate) fn pid(&self) -> Result<Pid, String> {
        let child = self.child.as_ref().ok_or_else(|| format!("{} is not running", self.tag))?;
        Ok(Pid::from_raw(child.id() as i32))
    }

    /// The guard: `tenure run`'s only child, while a term runs; `None`
    /// between terms (a leader the store still shows whose client already
    /// gave up its session, see [`Fenced::settled`]).
    fn guard(&self) -> Result<Option<Pid>, String> {
        let pid = self.pid()?.as_raw();
        let children = children_of(pid);
        match children[..] {
            [] => Ok(None),
            [guard] => Ok(Some(Pid::from_raw(guard))),
            _ => Err(format!("{} (pid {pid}) has children {children:?}, not one guard", self.tag)),
        }
    }

    /// Waits for `tenure run` to exit (it was told to).
    pub(crate) async fn reap(&mut self) -> Result<(), String> {
        let until = Instant::now() + STEP_BOUND;
        while let Some(child) = self.child.as_mut() {
            if child.try_wait().map_err(|e| e.to_string())?.is_some() {
                self.child = None;
                return Ok(());
            }
            if Instant::now() > until {
                return Err(format!("{} did not exit within {STEP_BOUND:?}", self.tag));
            }
            tokio::time::sleep(POLL).await;
        }
        Ok(())
    }

    pub(crate) fn tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        format!("--- {} ---\n{}\n", self.tag, lines[lines.len().saturating_sub(15)..].join("\n"))
    }

    /// The last line of its log.
    pub(crate) fn last_line(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines().last().unwrap_or_default().to_string()
    }

    /// Its exit status if `tenure run` has exited (then it is reaped).
    pub(crate) fn exited(&mut self) -> Result<Option<std::process::ExitStatus>, String> {
        let Some(child) = self.child.as_mut() else { return Ok(None) };
        let status = child.try_wait().map_err(|e| format!("{}: {e}", self.tag))?;
        if status.is_some() {
            self.child = None;
        }
        Ok(status)
    }
}

/// The pids whose parent is `ppid` (`/proc/PID/stat`'s fourth field).
fn children_of(ppid: i32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // `pid (comm) state ppid ...`: after comm's last `)`.
            let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
            rest.split_whitespace().nth(1).and_then(|p| p.parse::<i32>().ok()) == Some(ppid)
        })
        .collect()
}

impl Drop for App {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let pid = Pid::from_raw(child.id() as i32);
            let _ = kill(pid, Signal::SIGCONT);
            // `tenure run` and its guard (whose keeper then kills the command).
            let _ = killpg(pid, Signal::SIGKILL);
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The election as the observer and the store report it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Standing {
    /// (token, holder's tag) of the leader, if any.
    leader: Option<(u64, String)>,
    candidates: usize,
}

/// The UTC time of day, `HH:MM:SS.mmm`, as the applications' logs show it.
pub(crate) fn time_of_day() -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    let ms = now.map_or(0, |d| d.as_millis()) % 86_400_000;
    let (h, m, s) = (ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60);
    format!("{h:02}:{m:02}:{s:02}.{:03}", ms % 1000)
}

/// Milliseconds of `d`, one decimal.
pub(crate) fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e3)
}

/// "p50 X ms, max Y ms" of `times` (none: "-").
pub(crate) fn p50_max(times: &[Duration]) -> String {
    let mut t = times.to_vec();
    t.sort();
    match (t.get(t.len() / 2), t.last()) {
        (Some(p50), Some(max)) => format!("p50 {} ms, max {} ms", ms(*p50), ms(*max)),
        _ => "-".into(),
    }
}

/// One kind of handover: how long the successor took to lead, and the gap
/// the resource saw between the old leader's last write and the next
/// leader's first.
fn summary(kind: Fault, times: &[Duration], gaps: &[Duration]) -> String {
    let gap = gaps.iter().min().map_or("-".to_string(), |g| ms(*g));
    if times.is_empty() {
        return format!("{kind:?}: none");
    }
    format!(
        "{kind:?}: {} handovers, successor leads after {}; smallest gap between the two \
         leaders' writes {gap} ms",
        times.len(),
        p50_max(times)
    )
}

/// The scenario's state. Field order is drop order: the applications and
/// the observer go before the store and its network.
struct Fenced {
    apps: Vec<App>,
    /// The faults applied so far, with their UTC time of day (the last are
    /// shown on failure, to read next to the applications' logs).
    events: Vec<String>,
    observer: Observer,
    resource: Resource,
    profile: Profile,
    /// Whether a `tenure run` that exits on its own is started again (the
    /// background elections, [`Background`]), as a supervisor would; else
    /// it is a failure (no successor, no waiter, in time).
    supervised: bool,
    /// The application a handover is acting on (not started again while
    /// the fault lasts: the handover does that itself).
    under_fault: Option<usize>,
    /// Each start again of a `tenure run` that exited on its own: when, who,
    /// its exit status and its last line.
    restarts: Vec<String>,
    backend: Backend,
}

impl Fenced {
    fn fail(&self, what: impl std::fmt::Display) -> String {
        let ledger = self.resource.ledger();
        let recent: Vec<String> = ledger
            .tenancies
            .iter()
            .rev()
            .take(6)
            .map(|(t, x)| format!("  token {t}: {} ({} writes)", x.holder, x.writes))
            .collect();
        let apps: String = self.apps.iter().map(App::tail).collect();
        let events = &self.events[self.events.len().saturating_sub(MAX_EVENTS_SHOWN)..];
        let what = format!(
            "{what}\nledger: {} writes, anomalies {:?}; last tenancies:\n{}\nlast faults:\n{}\n\
             {apps}{}",
            ledger.writes,
            ledger.anomalies,
            recent.join("\n"),
            events.join("\n"),
            self.observer.report()
        );
        drop(ledger);
        self.backend.fail(what)
    }

    /// Records `what` with the time of day.
    fn event(&mut self, what: String) {
        self.events.push(format!("  {}  {what}", time_of_day()));
    }

    fn app(&self, tag: &str) -> Result<usize, String> {
        self.apps.iter().position(|a| a.tag == tag).ok_or_else(|| format!("unknown holder {tag}"))
    }

    /// Starts (again) application `h`.
    fn spawn(&mut self, h: usize) -> Result<(), String> {
        let args = self.backend.client_args();
        let (ttl, addr) = (self.profile.ttl_ms, self.resource.addr);
        self.apps[h].spawn(self.backend.cluster(), &args, ttl, addr)
    }

    /// The leader the observer saw last (first, if supervised, starting
    /// again any application that exited on its own).
    fn leader(&mut self) -> Result<Option<(u64, String)>, String> {
        if self.supervised {
            self.restart_exited()?;
        }
        self.observer.leader().map_err(|e| self.backend.fail(e))
    }

    /// Starts again every `tenure run` that exited on its own (one a fault
    /// is acting on excepted), and records why it exited.
    fn restart_exited(&mut self) -> Result<(), String> {
        for h in 0..APPS {
            if self.under_fault == Some(h) {
                continue;
            }
            if let Some(status) = self.apps[h].exited()? {
                let what = format!(
                    "{} exited on its own ({status}): {}",
                    self.apps[h].tag,
                    self.apps[h].last_line()
                );
                self.event(format!("{what}; started again"));
                self.restarts.push(format!("{}  {what}", time_of_day()));
                self.spawn(h)?;
            }
        }
        Ok(())
    }

    /// Waits until the observer saw a leader for which `want` holds, within
    /// `bound`: `Ok` with how long it took, `Err` with the last leader seen.
    async fn leader_until(
        &mut self,
        bound: Duration,
        want: impl Fn(&(u64, String)) -> bool,
    ) -> Result<Result<((u64, String), Duration), Option<(u64, String)>>, String> {
        let start = Instant::now();
        loop {
            let leader = self.leader()?;
            if let Some(l) = leader.as_ref().filter(|l| want(l)) {
                return Ok(Ok((l.clone(), start.elapsed())));
            }
            if start.elapsed() > bound {
                return Ok(Err(leader));
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Waits until someone leads, its command has written, and another
    /// candidate waits behind it; returns (token, holder index). A leader
    /// whose command never writes is allowed while the leadership moves on:
    /// a client that gave up its session (no renewal in time, on a loaded
    /// machine) still leads in the store's view until the session expires.
    async fn settled(&mut self) -> Result<(u64, usize), String> {
        let start = Instant::now();
        let mut last = None;
        loop {
            let anomalies = self.resource.ledger().anomaly_count;
            if anomalies > 0 {
                return Err(self.fail(format!("the fenced resource saw {anomalies} anomalies")));
            }
            let leader = self.leader()?;
            if let Some((token, tag)) = &leader {
                if self.resource.ledger().tenancies.contains_key(token) {
                    let candidates = self.backend.candidates(ELECTION).await.unwrap_or(0);
                    if candidates >= 2 {
                        return Ok((*token, self.app(tag)?));
                    }
                    last = Some(Standing { leader: leader.clone(), candidates });
                }
            }
            if start.elapsed() > STEP_BOUND {
                return Err(self.fail(format!(
                    "no leader that wrote with a waiter behind it within {STEP_BOUND:?}: \
                     leader {leader:?}, last full reading {last:?}"
                )));
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Makes holder `h` (leading with `token`) go by `fault`, then undoes
    /// the fault; returns the fault applied and how long until a successor
    /// led.
    async fn hand_over(
        &mut self,
        fault: Fault,
        token: u64,
        h: usize,
    ) -> Result<(Fault, Duration), String> {
        self.event(format!("{fault:?} of {} (token {token})", self.apps[h].tag));
        self.under_fault = Some(h);
        let guard = match fault {
            Fault::GuardKill | Fault::BothKill => self.apps[h].guard().map_err(|e| self.fail(e))?,
            _ => None,
        };
        let fault = match (fault, guard) {
            (Fault::GuardKill | Fault::BothKill, None) => {
                // Its term ended already (the store has yet to see it):
                // there is no guard to kill, `tenure run` is killed instead.
                self.event(format!("  {} has no guard now: Sigkill instead", self.apps[h].tag));
                Fault::Sigkill
            }
            _ => fault,
        };
        let cluster = self.backend.cluster();
        match fault {
            Fault::CommandExits => File::create(&self.apps[h].stop_file)
                .map(drop)
                .map_err(|e| format!("stop file: {e}"))?,
            Fault::Sigterm => self.apps[h].signal(Signal::SIGTERM)?,
            Fault::Sigkill => self.apps[h].signal(Signal::SIGKILL)?,
            Fault::GuardKill => {
                let guard = guard.ok_or("no guard")?;
                kill(guard, Signal::SIGKILL).map_err(|e| format!("SIGKILL guard {guard}: {e}"))?
            }
            Fault::GroupKill => {
                let group = self.apps[h].pid()?;
                killpg(group, Signal::SIGKILL).map_err(|e| format!("SIGKILL -{group}: {e}"))?
            }
            Fault::BothKill => {
                let guard = guard.ok_or("no guard")?;
                self.apps[h].signal(Signal::SIGKILL)?;
                kill(guard, Signal::SIGKILL).map_err(|e| format!("SIGKILL guard {guard}: {e}"))?
            }
            Fault::Pause => self.apps[h].signal(Signal::SIGSTOP)?,
            Fault::Partition => cluster.cut_host(self.apps[h].host).map_err(|e| e.to_string())?,
        }
        let bound = Duration::from_millis(self.profile.ttl_ms) + self.profile.handover_margin;
        let moved = self.leader_until(bound, |(t, _)| *t > token).await?;
        // Undo the fault before judging, so that a failure leaves the
        // application able to come back.
        match fault {
            Fault::CommandExits => {
                std::fs::remove_file(&self.apps[h].stop_file).map_err(|e| e.to_string())?
            }
            Fault::Sigterm
            | Fault::Sigkill
            | Fault::GuardKill
            | Fault::GroupKill
            | Fault::BothKill => {
                self.apps[h].reap().await.map_err(|e| self.fail(e))?;
                self.spawn(h)?;
            }
            Fault::Pause => self.apps[h].signal(Signal::SIGCONT)?,
            Fault::Partition => {
                let host = self.apps[h].host;
                self.backend.cluster().heal_host(host).map_err(|e| e.to_string())?
            }
        }
        self.under_fault = None;
        match moved {
            Ok((_, took)) => Ok((fault, took)),
            Err(last) => Err(self.fail(format!(
                "{fault:?} of {} (token {token}): no successor within {bound:?}; last seen {last:?}",
                self.apps[h].tag
            ))),
        }
    }

    /// SIGKILLs the tenure leader while application `holder` leads with
    /// `token`; the application leadership must not change. Restarts the
    /// node. Returns how long tenure took to elect a new leader.
    async fn kill_tenure_leader(&mut self, token: u64, holder: usize) -> Result<Duration, String> {
        let Backend::Tenure { run, .. } = &mut self.backend else {
            return Err("not a tenure store".into());
        };
        let all: Vec<usize> = (0..NODES).collect();
        let ((l, term), _) = run.agreement(&all, Instant::now(), heal_bound(TIMINGS)).await?;
        let killed = Instant::now();
        run.cluster.kill(l).map_err(|e| format!("SIGKILL n{}: {e}", l + 1))?;
        let rest: Vec<usize> = all.iter().copied().filter(|&i| i != l).collect();
        let ((_, term2), took) = run.agreement(&rest, killed, heal_bound(TIMINGS)).await?;
        if term2 <= term {
            return Err(self.fail(format!("tenure kept term {term} after its leader's SIGKILL")));
        }
        tokio::time::sleep(ACROSS_TENURE_FAILOVER).await;
        let now = self.leader()?;
        if now.as_ref().map(|(t, _)| *t) != Some(token) {
            return Err(self.fail(format!(
                "the tenure leader's SIGKILL changed the application leadership of {} \
                 (token {token}): now {now:?}",
                self.apps[holder].tag
            )));
        }
        self.kept_writing(token, holder, killed + ACROSS_TENURE_FAILOVER / 2)?;
        let Backend::Tenure { run, .. } = &mut self.backend else { unreachable!() };
        run.cluster.spawn(l).map_err(|e| format!("restart n{}: {e}", l + 1))?;
        let back = Instant::now();
        run.agreement(&all, back, heal_bound(TIMINGS) + RESTART_MARGIN).await?;
        Ok(took)
    }

    /// Fails unless `holder`'s command wrote with `token` after `since`.
    fn kept_writing(&self, token: u64, holder: usize, since: Instant) -> Result<(), String> {
        let last_write = self.resource.ledger().tenancies.get(&token).map(|t| t.last);
        if last_write.is_none_or(|w| w <= since) {
            return Err(self.fail(format!(
                "{}'s command stopped writing across the store failover",
                self.apps[holder].tag
            )));
        }
        Ok(())
    }
}

/// The timings of the application election on each store.
#[derive(Debug, Clone, Copy)]
struct Profile {
    /// The applications' `--ttl-ms`.
    ttl_ms: u64,
    /// A handover's bound beyond the TTL.
    handover_margin: Duration,
    /// A store member is SIGKILLed (tenure: its leader) or cut off (external
    /// stores) after every this many handovers.
    kill_every: usize,
}

impl Profile {
    fn of(held: Held) -> Profile {
        match held {
            Held::Tenure => Profile {
                ttl_ms: APP_TTL_MS,
                handover_margin: HANDOVER_MARGIN,
                kill_every: TENURE_KILL_EVERY,
            },
            // etcd expires leases on a 500 ms sweep, and a leader change
            // extends every lease by an election timeout (docs/STORES.md
            // §3.2); ZooKeeper rounds expiry up to a tick and commits the
            // session's close (§3.3).
            Held::External(_) => Profile {
                ttl_ms: EXTERNAL_TTL_MS,
                handover_margin: HANDOVER_MARGIN + EXTERNAL_EXPIRY_SLACK,
                kill_every: EXTERNAL_KILL_EVERY,
            },
        }
    }

    fn ttl(&self) -> Duration {
        Duration::from_millis(self.ttl_ms)
    }
}

/// What is done to an external store's member while an application leads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StoreFault {
    /// SIGKILL of the member the holder's client is connected to.
    KillEndpoint,
    /// SIGKILL of the store's own leader.
    KillLeader,
    /// The member the holder's client is connected to cut off from the
    /// other members (the client still reaches it): docs/STORES.md §3.2's
    /// deposed etcd leader, §3.3's follower that lost its leader.
    IsolateEndpoint,
    /// The store's own leader cut off from the other members.
    IsolateLeader,
}

/// The store faults, in turn.
const STORE_FAULTS: [StoreFault; 4] = [
    StoreFault::KillEndpoint,
    StoreFault::KillLeader,
    StoreFault::IsolateEndpoint,
    StoreFault::IsolateLeader,
];

impl Fenced {
    /// The member `fault` acts on while `holder` leads, and what it is
    /// (the holder's endpoint, the store's leader, or both); a member in
    /// turn when the wanted one cannot be told.
    async fn store_target(&self, fault: StoreFault, holder: usize, k: usize) -> (usize, String) {
        let Backend::External { store, cluster } = &self.backend else { unreachable!() };
        let linked = connected_members(cluster, store, self.apps[holder].host).first().copied();
        let leader = store.leader().await;
        let member = match fault {
            StoreFault::KillEndpoint | StoreFault::IsolateEndpoint => linked,
            StoreFault::KillLeader | StoreFault::IsolateLeader => leader,
        };
        let Some(m) = member else { return (k % store.len(), "a member".into()) };
        let role = match (Some(m) == linked, Some(m) == leader) {
            (true, true) => "the holder's endpoint, the store's leader",
            (true, false) => "the holder's endpoint, a follower",
            (false, true) => "the store's leader, not the holder's endpoint",
            (false, false) => "a follower",
        };
        (m, role.into())
    }

    /// Applies store fault number `k` (in turn) to a member of the external
    /// store while application `holder` leads with `token`, and undoes it
    /// once the application leadership either survived (the holder's
    /// command kept writing with `token` two TTLs later) or was handed over
    /// (the ledger judges that handover like any other). Returns a line
    /// saying which happened.
    async fn store_fault(&mut self, token: u64, holder: usize, k: usize) -> Result<String, String> {
        let fault = STORE_FAULTS[k % STORE_FAULTS.len()];
        let (member, role) = self.store_target(fault, holder, k).await;
        let Backend::External { store, cluster } = &mut self.backend else { unreachable!() };
        let at = Instant::now();
        match fault {
            StoreFault::KillEndpoint | StoreFault::KillLeader => store.kill(member)?,
            StoreFault::IsolateEndpoint | StoreFault::IsolateLeader => {
                cluster.isolate(member).map_err(|e| e.to_string())?
            }
        }
        let what = format!("{fault:?}: member {} ({role})", member + 1);
        self.event(what.clone());
        let outcome = self.survived_or_handed_over(token, holder, at).await;
        // The fault lasts two TTLs at least, whatever happened sooner: a
        // deposed or leaderless member goes through all its steps meanwhile.
        tokio::time::sleep_until((at + 2 * self.profile.ttl()).into()).await;
        let Backend::External { store, cluster } = &mut self.backend else { unreachable!() };
        match fault {
            StoreFault::KillEndpoint | StoreFault::KillLeader => store.spawn(member)?,
            StoreFault::IsolateEndpoint | StoreFault::IsolateLeader => {
                cluster.heal().map_err(|e| e.to_string())?
            }
        }
        let outcome = outcome.map_err(|e| self.fail(format!("after {what}: {e}")))?;
        let Backend::External { store, .. } = &self.backend else { unreachable!() };
        let all: Vec<usize> = (0..store.len()).collect();
        let back = store.ready(&all, STORE_READY_BOUND).await.map_err(|e| self.fail(e))?;
        Ok(format!(
            "{what} while {} led: {outcome}; every member ready {} ms after the undo",
            self.apps[holder].tag,
            ms(back)
        ))
    }

    /// After a store fault at `at`: whether the leadership of `holder`
    /// (`token`) survived two TTLs with its command writing, or was handed
    /// over within the handover bound after that; in words.
    async fn survived_or_handed_over(
        &mut self,
        token: u64,
        holder: usize,
        at: Instant,
    ) -> Result<String, String> {
        let across = 2 * self.profile.ttl();
        let bound = self.profile.ttl() + self.profile.handover_margin;
        let changed = self.leader_until(across, |(t, _)| *t != token).await?;
        if changed.is_err() && self.kept_writing(token, holder, at + across / 2).is_ok() {
            return Ok("the application leadership survived, its command kept writing".into());
        }
        match self.leader_until(bound, |(t, _)| *t > token).await? {
            Ok(_) => Ok(format!(
                "the application leadership was handed over (the successor seen {} ms after \
                 the fault)",
                ms(at.elapsed())
            )),
            Err(last) => Err(format!(
                "token {token}: neither kept nor handed over within {bound:?}; last seen {last:?}"
            )),
        }
    }
}

/// Runs `handovers` handovers (the faults in turn) of an election held by
/// tenure's own cluster, and checks the ledger and tenure's checker.
pub async fn fenced_handovers(handovers: usize) -> Result<Outcome, String> {
    fenced_handovers_on(Held::Tenure, handovers).await
}

/// Starts the store, the fenced resource, the observer and the
/// applications.
async fn start(held: Held) -> Result<Fenced, String> {
    let backend = Backend::start(held, NODES, APPS, TIMINGS).await?;
    start_on(backend, Profile::of(held)).await
}

/// Starts the fenced resource, the observer and the applications (on
/// `backend`'s application hosts).
async fn start_on(backend: Backend, profile: Profile) -> Result<Fenced, String> {
    let resource = Resource::start(backend.cluster().net().host_addr()).await?;
    let dir = backend.cluster().dir().to_path_buf();
    let observer = Observer::start(&backend, ELECTION, &dir).map_err(|e| backend.fail(e))?;
    let apps = (0..APPS).map(|h| App::new(h, &dir)).collect();
    let mut f = Fenced {
        apps,
        events: Vec::new(),
        observer,
        resource,
        profile,
        supervised: false,
        under_fault: None,
        restarts: Vec::new(),
        backend,
    };
    let start = Instant::now();
    while !f.observer.started() {
        f.leader()?;
        if start.elapsed() > STEP_BOUND {
            return Err(f.fail(format!("the observer printed nothing within {STEP_BOUND:?}")));
        }
        tokio::time::sleep(POLL).await;
    }
    for h in 0..APPS {
        f.spawn(h)?;
    }
    Ok(f)
}

/// Runs `handovers` handovers (the faults in turn) of an election held by
/// `held`, and checks the ledger (and, for tenure, tenure's checker).
pub async fn fenced_handovers_on(held: Held, handovers: usize) -> Result<Outcome, String> {
    if handovers == 0 || handovers > MAX_HANDOVERS {
        return Err(format!("1 to {MAX_HANDOVERS} handovers, not {handovers}"));
    }
    let mut f = start(held).await?;
    let mut times: BTreeMap<Fault, Vec<Duration>> = BTreeMap::new();
    // (fault, the token of the leader it ended).
    let mut ended = Vec::new();
    let mut store_kills = Vec::new();
    for k in 0..handovers {
        let (mut token, mut h) = f.settled().await?;
        let every = f.profile.kill_every;
        if k > 0 && k % every == 0 {
            store_kills.push(match held {
                Held::Tenure => StoreKill::Tenure(f.kill_tenure_leader(token, h).await?),
                Held::External(_) => {
                    StoreKill::External(f.store_fault(token, h, k / every - 1).await?)
                }
            });
            // A kill may have handed the leadership over: settle again.
            (token, h) = f.settled().await?;
        }
        let fault = FAULTS[k % FAULTS.len()];
        let (fault, took) = f.hand_over(fault, token, h).await?;
        times.entry(fault).or_default().push(took);
        ended.push((fault, token));
    }
    f.settled().await?;
    for app in &mut f.apps {
        app.signal(Signal::SIGTERM)?;
    }
    for h in 0..APPS {
        f.apps[h].reap().await.map_err(|e| f.fail(e))?;
    }
    f.backend.check_safety()?;
    let what =
        format!("{handovers} handovers of {ELECTION} held in {} ({NODES} members)", held.name());
    report(&f, what, &times, &ended, &store_kills)
}

/// Application elections that run beside another scenario on its tenure
/// cluster ([`crate::membership`]): three `tenure run` on the cluster's
/// application hosts, reaching it through every slot's API, hand over the
/// fenced resource again and again (the leader made to go by each fault of
/// [`FAULTS`] in turn; never a fault of tenure's own nodes: that is the
/// other scenario's) until [`Background::finish`]. The ledger judges every
/// write, as in [`fenced_handovers`]. The applications run as under a
/// supervisor: a `tenure run` that exits on its own is started again, and
/// each such exit is reported with its last line (a session grant whose
/// outcome is unknown, when a tenure leader loses office as it commits it,
/// ends `tenure run --keep-trying`: crates/faults/README.md).
pub struct Background {
    stop: Arc<AtomicBool>,
    task: Option<tokio::task::JoinHandle<Result<Finished, String>>>,
}

/// What the background elections measured ([`Background::finish`]).
pub struct Finished {
    /// What was measured, in words.
    pub outcome: Outcome,
    /// Handovers of the fenced resource (each judged by the ledger).
    pub handovers: usize,
    /// Writes to the fenced resource, all judged.
    pub writes: u64,
    /// Times a `tenure run --keep-trying` exited on its own and was
    /// started again, with its last line.
    pub exits: Vec<String>,
}

/// Bound on the background elections stopping: a settling and a handover
/// under way, the final settling and the applications' exits.
const BACKGROUND_STOP_BOUND: Duration = Duration::from_secs(60);

impl Background {
    /// Starts the resource, the observer and the applications of an
    /// election held by `run`'s cluster (it must have
    /// [`APPS`] application hosts), and the handovers.
    pub async fn start(run: Arc<crate::scenarios::Run>) -> Result<Self, String> {
        let mut f = start_on(Backend::shared(run)?, Profile::of(Held::Tenure)).await?;
        f.supervised = true;
        let stop = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn(f.hand_over_until(stop.clone()));
        Ok(Background { stop, task: Some(task) })
    }

    /// Whether the handovers ended already: a failure (the ledger saw an
    /// anomaly, a handover did not happen); [`Background::finish`] says
    /// which.
    pub fn failed(&self) -> bool {
        self.task.as_ref().is_none_or(|t| t.is_finished())
    }

    /// Stops the handovers once the current one is done, lets the last
    /// leader settle, stops the applications, and checks the ledger: what
    /// was measured, or what went wrong.
    pub async fn finish(mut self) -> Result<Finished, String> {
        self.stop.store(true, Ordering::Relaxed);
        let task = self.task.take().ok_or("the elections were finished already")?;
        match tokio::time::timeout(BACKGROUND_STOP_BOUND, task).await {
            Ok(Ok(result)) => result,
            Ok(Err(e)) => Err(format!("the application elections' task failed: {e}")),
            Err(_) => Err(format!(
                "the application elections did not stop within {BACKGROUND_STOP_BOUND:?}"
            )),
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        // Its applications and observer die with the task's future.
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

impl Fenced {
    /// Hands over (the faults in turn) until `stop`, then settles, stops
    /// the applications and reports.
    async fn hand_over_until(mut self, stop: Arc<AtomicBool>) -> Result<Finished, String> {
        let began = Instant::now();
        let mut times: BTreeMap<Fault, Vec<Duration>> = BTreeMap::new();
        let mut ended = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            let (token, h) = self.settled().await?;
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let fault = FAULTS[ended.len() % FAULTS.len()];
            let (fault, took) = self.hand_over(fault, token, h).await?;
            times.entry(fault).or_default().push(took);
            ended.push((fault, token));
        }
        self.settled().await?;
        for app in &mut self.apps {
            app.signal(Signal::SIGTERM)?;
        }
        for h in 0..APPS {
            self.apps[h].reap().await.map_err(|e| self.fail(e))?;
        }
        let what = format!(
            "{} handovers in {:?} of {ELECTION} held in tenure while its members changed",
            ended.len(),
            began.elapsed()
        );
        let mut outcome = report(&self, what, &times, &ended, &[])?;
        outcome.note(match self.restarts.len() {
            0 => "no `tenure run` exited on its own".to_string(),
            n => format!(
                "`tenure run --keep-trying` exited on its own {n} times, started again (a \
                 supervisor's work: `--keep-trying` does not campaign again after a session \
                 grant that failed, e.g. a 504 whose outcome is unknown at a tenure failover): {}",
                self.restarts.join("; ")
            ),
        });
        let writes = self.resource.ledger().writes;
        Ok(Finished { outcome, handovers: ended.len(), writes, exits: self.restarts.clone() })
    }
}

/// What a store member's SIGKILL did.
enum StoreKill {
    /// tenure: how long tenure took to elect its new leader (the
    /// application leadership must not change).
    Tenure(Duration),
    /// An external store: what happened, in words.
    External(String),
}

/// Checks the ledger once more and states what was measured.
fn report(
    f: &Fenced,
    what: String,
    times: &BTreeMap<Fault, Vec<Duration>>,
    ended: &[(Fault, u64)],
    store_kills: &[StoreKill],
) -> Result<Outcome, String> {
    let ledger = f.resource.ledger();
    let (anomalies, count) = (ledger.anomalies.clone(), ledger.anomaly_count);
    let gap_after = |token: u64| {
        let (_, next) = ledger.tenancies.range(token + 1..).next()?;
        Some(next.first.saturating_duration_since(ledger.tenancies.get(&token)?.last))
    };
    let mut gaps: BTreeMap<Fault, Vec<Duration>> = BTreeMap::new();
    for &(fault, token) in ended {
        gaps.entry(fault).or_default().extend(gap_after(token));
    }
    let (writes, leaderships) = (ledger.writes, ledger.tenancies.len());
    drop(ledger);
    if count > 0 {
        return Err(f.fail(format!("the fenced resource saw {count} anomalies: {anomalies:?}")));
    }
    let mut out = Outcome::default();
    out.note(format!(
        "{what} among {APPS} `tenure run` on their own hosts (TTL {} ms, grace {APP_GRACE_MS} ms)",
        f.profile.ttl_ms
    ));
    for (kind, t) in times {
        out.note(summary(*kind, t, gaps.get(kind).map_or(&[], Vec::as_slice)));
    }
    out.note(format!(
        "fenced resource: {writes} writes by {leaderships} leaderships, none behind the fence, \
         one holder per token"
    ));
    let tenure: Vec<String> = store_kills
        .iter()
        .filter_map(|k| if let StoreKill::Tenure(d) = k { Some(ms(*d)) } else { None })
        .collect();
    if !tenure.is_empty() {
        out.note(format!(
            "{} SIGKILLs of the tenure leader (new tenure leader after {} ms): no application \
             leadership changed, the holder's command kept writing",
            tenure.len(),
            tenure.join(", ")
        ));
    }
    for k in store_kills {
        if let StoreKill::External(line) = k {
            out.note(line.clone());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ledger_refuses_a_token_behind_the_fence_and_a_second_holder() {
        let t0 = Instant::now();
        let mut l = Ledger::default();
        l.write("5 app1", t0);
        l.write("5 app1", t0);
        l.write("7 app2", t0);
        assert_eq!(l.anomaly_count, 0);
        l.write("5 app1", t0);
        l.write("7 app3", t0);
        l.write("garbage", t0);
        l.write(" app1", t0);
        assert_eq!(l.anomaly_count, 4, "{:?}", l.anomalies);
        assert_eq!(l.tenancies[&5].writes, 2);
        assert_eq!(l.tenancies[&7].holder, "app2");
    }
}
