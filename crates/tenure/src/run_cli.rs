//! `tenure run --election NAME -- CMD ARGS…`: run a command only while
//! leading an election, and stop it before a successor can be elected.
//!
//! The command runs under a guard: a second `tenure` process (the hidden
//! `tenure run-guard`) that starts the command, knows the session's
//! deadline (on the machine's monotonic clock, `CLOCK_MONOTONIC`, which
//! every process shares) and stops the command on its own: SIGTERM at
//! `deadline − grace`, SIGKILL at the deadline, unless `tenure run` moved the
//! deadline on after a renewal. So a `tenure run` that is paused (SIGSTOP),
//! starved or killed cannot leave its command running past the deadline:
//! the guard does not depend on it. `tenure run` tells the guard each new
//! deadline, and "stop" when the cluster says the session is gone or on
//! Ctrl-C; the guard takes its closed stdin (its parent died) as "stop".
//! The guard's stdin is one end of a socket pair: it reports back on it
//! the command's process group (`group N`) and, before it exits normally,
//! the command's status (`exit N`). A guard that exits without that report
//! was killed: `tenure run` then SIGKILLs the group itself and resigns only
//! once none of it runs. The guard starts the command under a keeper
//! (`run_keeper`), which kills the group when the guard dies.

use crate::client::timestamp;
use crate::elect_cli::{
    campaign, grant, ttl_of, value_or_pid, ConnArgs, StopSignals, DEFAULT_TTL_MS, EXIT_LOST,
};
use crate::run_keeper::{check_command, kill_group_and_wait, status_code};
use anyhow::Context;
use clap::Args;
use nix::sys::signal::{killpg, Signal};
use nix::time::{clock_gettime, ClockId};
use nix::unistd::Pid;
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitCode, ExitStatus, Stdio};
use std::time::Duration;
use tenure_client::session::{renew_interval, trusted_span, SessionWatch, TIMER_SLACK};
use tenure_client::{Election, Session};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::process::Command;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;
use tokio::time::Instant;

/// The default grace between SIGTERM and SIGKILL, in milliseconds, when it
/// fits the TTL (else the largest that does: [`max_grace`]).
pub const DEFAULT_GRACE_MS: u64 = 2_000;
/// Pause before `--keep-trying` campaigns again after a term ended.
pub const KEEP_TRYING_PAUSE: Duration = Duration::from_millis(500);
/// Environment variable naming the election, in the command's environment.
pub const ELECTION_ENV: &str = "TENURE_ELECTION";
/// Environment variable holding the fencing token, in the command's environment.
pub const TOKEN_ENV: &str = "TENURE_FENCING_TOKEN";
/// Environment variable holding the session id, in the command's environment.
pub const SESSION_ENV: &str = "TENURE_SESSION";
/// A deadline handed to the guard is this much earlier than `tenure run`'s
/// own, for the microseconds lost converting between the two clocks' APIs.
const CLOCK_CONVERSION_SLACK: Duration = Duration::from_millis(1);
/// How long a guard may be late with the command's SIGKILL (a loaded
/// machine) before `tenure run` kills the guard, and the group with it.
const GUARD_LATE: Duration = Duration::from_millis(200);
/// How long the guard's last reports may take to arrive after its exit.
const REPORT_BOUND: Duration = Duration::from_secs(1);
/// How long the command's process group may take to die after its SIGKILL
/// (a process in an uninterruptible wait dies only when it wakes) before
/// `tenure run` gives up waiting and leaves the session to expire.
const GROUP_GONE_BOUND: Duration = Duration::from_secs(5);

/// What `tenure run --help` says after the flags.
pub const RUN_HELP: &str = "\
The command starts only once this process leads NAME, with TENURE_ELECTION (the name), \
TENURE_FENCING_TOKEN (larger than every earlier leader's: give it to whatever the command \
writes to) and TENURE_SESSION in its environment; it does not inherit TENURE_TOKEN, and its \
stdin is /dev/null.

Stopping before a successor: the session is renewed every TTL/3. Its deadline is the last \
successful renewal's send time + TTL x 0.9/1.1 (the 10% clock-drift bound); the cluster \
cannot elect a successor before it. If no renewal moved the deadline on, the command gets \
SIGTERM at deadline - grace and SIGKILL at the deadline, from a guard process that does this \
even if `tenure run` itself is paused or killed. The grace must leave half a renewal interval \
for the next renewal: grace <= TTL x 0.9/1.1 - TTL/2 (about 0.318 x TTL: 3181 ms for the \
default 10 s TTL); a larger --grace-ms is refused.

The command runs in a process group of its own, led by a keeper process: SIGTERM and \
SIGKILL go to the whole group (a shell's children too), and when the command exits, \
whatever it left running in its group is SIGKILLed before the candidacy is resigned. \
A signal sent to that group (kill -USR2 -PGID) reaches the command; the keeper ignores it.

Deaths covered: whichever of tenure run, its guard, their process group or both pids is \
killed, by any signal, the command's whole group is stopped. The guard's death makes the \
keeper SIGKILL the group at once (PR_SET_PDEATHSIG); a tenure run that outlives its guard \
SIGKILLs the group too, waits until none of it runs, says so, then resigns and exits 1. The \
death of tenure run alone stops the group through the guard (SIGTERM, SIGKILL after the \
grace, by the deadline). A SIGSTOPped guard stops nothing: when a stop's SIGKILL is due \
(a loss, Ctrl-C), tenure run SIGKILLs the group, then the guard; the guard ignores Ctrl-Z \
(SIGTSTP). The keeper knows every deadline the guard took and SIGKILLs the group at the \
last one, so a guard SIGSTOPped while tenure run is killed or stopped too still has the \
group killed by the deadline (a guard stopped alone that long too: the command is killed, \
and tenure run learns it when the guard continues). Not covered: a process that \
leaves the group (setsid, a daemon's double fork): run the service in the foreground; every \
tenure process of the run (tenure run, guard, keeper) SIGKILLed at once, as `kill -9 \
$(pgrep tenure)` does: then only the command's first process dies (by PR_SET_PDEATHSIG), \
what it started runs on; a SIGSTOPped keeper with the guard stopped or gone: the group \
runs on until the keeper continues. A command that cannot start (not found, not \
executable) is refused before campaigning.

When the command exits, the candidacy is resigned at once and tenure run exits with the \
command's status (128+N if a signal N ended it). On Ctrl-C or SIGTERM, the command gets \
SIGTERM (SIGKILL after the grace), then tenure run resigns, says so, and exits with the \
command's status. \
On loss it exits 2, or with --keep-trying campaigns again, as it does after the command exits.

With --group NAME instead of --election: a member of a group of partitions, running one copy \
of the command per partition the leader assigns it, with TENURE_GROUP, TENURE_PARTITION and \
TENURE_FENCING_TOKEN (the grant's epoch), each under its own guard as above. A copy stops when \
the leader asks for its partition back (released once the copy's group is gone), at the \
deadline as above, and on Ctrl-C or SIGTERM (the member then leaves the group and exits 0); a \
copy that exits while its partition is still the member's starts again after 500 ms, doubling \
up to 30 s while copies keep ending within 10 s (the member keeps the partition). Example:
  $ tenure run --group shards --partitions 64 --stabilise-ms 5000 -- ./worker";

/// Flags of `tenure run`.
#[derive(Args, Debug)]
#[command(group = clap::ArgGroup::new("what").required(true).args(["election", "group"]))]
pub struct RunArgs {
    /// The election to lead while the command runs (1 to 128 characters of A-Z a-z 0-9 . _ -).
    #[arg(long, value_name = "NAME")]
    pub election: Option<String>,
    /// Instead of an election: a group of partitions to be a member of; one copy of the
    /// command runs per partition the leader assigns this member, with TENURE_GROUP,
    /// TENURE_PARTITION and TENURE_FENCING_TOKEN (the grant's epoch) in its environment,
    /// stopped before its partition can be granted elsewhere (docs/PARTITIONS.md).
    #[arg(long, value_name = "NAME", conflicts_with_all = ["election", "value"])]
    pub group: Option<String>,
    /// With --group: the group's partition count (1 to 10000), needed to create the group;
    /// when it exists, another count is refused.
    #[arg(long, value_name = "N")]
    pub partitions: Option<u32>,
    /// With --group: this member's weight (members own partitions in proportion).
    #[arg(long, value_name = "W", default_value_t = 1)]
    pub weight: u32,
    /// With --group: this member's zone (the members of a zone own the zone's share).
    #[arg(long, value_name = "Z")]
    pub zone: Option<String>,
    /// With --group, when it creates the group: how long a member is ready before it
    /// receives partitions, in milliseconds [default: 2000].
    #[arg(long, value_name = "MS")]
    pub stabilise_ms: Option<u64>,
    /// The value this candidate publishes while it leads [default: "pid <PID>"].
    #[arg(long, value_name = "V")]
    pub value: Option<String>,
    /// The session's TTL in milliseconds (500 to 86400000): a leader that crashed is
    /// replaced about this long after its last renewal. A store may grant another
    /// (etcd: whole seconds, at least 1.5 of its election timeouts; ZooKeeper: 2 to 20
    /// ticks); a line on standard error says so. To ride out a tenure failover:
    /// TTL x 0.9/1.1 - TTL/3 - grace >= failover bound (GET /v1/status; 1555 ms at the
    /// default timings) + 200 ms + 2 round trips; a warning says when it does not.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_TTL_MS)]
    pub ttl_ms: u64,
    /// Milliseconds between SIGTERM and SIGKILL when leadership is lost; at most
    /// TTL x 0.9/1.1 - TTL/2 (see below) [default: 2000, or that maximum if smaller].
    #[arg(long, value_name = "N")]
    pub grace_ms: Option<u64>,
    /// After a loss or after the command exits, campaign again (and run the command again
    /// when elected) instead of exiting.
    #[arg(long)]
    pub keep_trying: bool,
    #[command(flatten)]
    pub conn: ConnArgs,
    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD ARGS")]
    pub command: Vec<String>,
}

/// The largest grace a TTL allows: the stop (at `deadline − grace`) may
/// begin no earlier than half a renewal interval after the next renewal is
/// due, so that one slow renewal does not stop the command:
/// `trusted_span(ttl) − ttl/3 − ttl/6`.
pub fn max_grace(ttl: Duration) -> Duration {
    max_grace_with(ttl, renew_interval(ttl), Duration::ZERO)
}

/// The largest grace for a store that renews every `interval` and whose
/// renewals prove an instant `lag` before their send
/// ([`tenure_client::Store::renewal_lag`]): the deadline after a renewal
/// sent at `s` is `s − lag + trusted_span(ttl)`, the next renewal is due at
/// `s + interval`, and the stop may begin half an interval after that.
pub fn max_grace_with(ttl: Duration, interval: Duration, lag: Duration) -> Duration {
    trusted_span(ttl).saturating_sub(lag + interval + interval / 2)
}

/// The grace of `--grace-ms` (checked) or the default, for a session of
/// `ttl` on tenure's store (renewed every TTL/3, no lag).
pub fn grace_of(grace_ms: Option<u64>, ttl: Duration) -> anyhow::Result<Duration> {
    grace_within(grace_ms, ttl, max_grace(ttl))
}

/// The grace of `--grace-ms` (checked against `max`) or the default.
fn grace_within(grace_ms: Option<u64>, ttl: Duration, max: Duration) -> anyhow::Result<Duration> {
    let Some(ms) = grace_ms else {
        return Ok(Duration::from_millis(DEFAULT_GRACE_MS).min(max));
    };
    let grace = Duration::from_millis(ms);
    if grace > max {
        return Err(crate::usage::usage(format!(
            "--grace-ms {ms} does not fit a TTL of {} ms: SIGKILL must come before the session's \
             deadline (at most {} ms after the last renewal's send time: TTL x 0.9/1.1) and \
             SIGTERM no earlier than half a renewal interval after the next renewal is due, so \
             the grace is at most {} ms; lower --grace-ms or raise --ttl-ms",
            ttl.as_millis(),
            trusted_span(ttl).as_millis(),
            max.as_millis()
        )));
    }
    Ok(grace)
}

/// `CLOCK_MONOTONIC` now, in nanoseconds.
fn monotonic_ns() -> anyhow::Result<u64> {
    let t = clock_gettime(ClockId::CLOCK_MONOTONIC).context("reading CLOCK_MONOTONIC")?;
    Ok(u64::try_from(t.tv_sec()).unwrap_or(0) * 1_000_000_000
        + u64::try_from(t.tv_nsec()).unwrap_or(0))
}

/// `at` (tokio's clock, which is `CLOCK_MONOTONIC` on Linux) as
/// `CLOCK_MONOTONIC` nanoseconds, a little early rather than late.
fn to_monotonic_ns(at: Instant) -> anyhow::Result<u64> {
    let left = at.saturating_duration_since(Instant::now()).saturating_sub(CLOCK_CONVERSION_SLACK);
    Ok(monotonic_ns()? + left.as_nanos() as u64)
}

/// `CLOCK_MONOTONIC` nanoseconds as a tokio instant, a little early rather than late.
fn from_monotonic_ns(ns: u64) -> anyhow::Result<Instant> {
    let now_ns = monotonic_ns()?;
    let now = Instant::now();
    let left =
        Duration::from_nanos(ns.saturating_sub(now_ns)).saturating_sub(CLOCK_CONVERSION_SLACK);
    Ok(now + left)
}

/// Refuses the flags of `--group` given with `--election`.
fn check_no_group_flags(args: &RunArgs) -> anyhow::Result<()> {
    let given = [
        ("--partitions", args.partitions.is_some()),
        ("--weight", args.weight != 1),
        ("--zone", args.zone.is_some()),
        ("--stabilise-ms", args.stabilise_ms.is_some()),
    ];
    if let Some((flag, _)) = given.iter().find(|(_, g)| *g) {
        return Err(crate::usage::usage(format!(
            "{flag} goes with --group (a group of partitions), not with --election"
        )));
    }
    Ok(())
}

/// How one term ended.
pub(crate) enum Term {
    /// The command exited with this status.
    Exited(u8),
    /// Leadership was lost (the command was stopped).
    Lost(String),
    /// Ctrl-C or SIGTERM: the command was stopped with this status.
    Interrupted(u8),
    /// The guard died (or was killed, late): `why`, and whether the
    /// command's whole process group is certainly gone.
    GuardDied { why: String, gone: bool },
}

/// `tenure run`.
pub async fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let Some(name) = args.election.clone() else {
        return crate::run_group::run(args).await;
    };
    check_no_group_flags(&args)?;
    tenure_client::election::check_name(&name).map_err(crate::usage::usage)?;
    let ttl = ttl_of(args.ttl_ms)?;
    let grace = grace_of(args.grace_ms, ttl)?;
    let value = value_or_pid(args.value.as_deref());
    tenure_client::election::check_value(&value)
        .map_err(|e| crate::usage::usage(format!("bad --value: {e}")))?;
    let store = args.conn.store()?;
    let grace_for = |t| grace_of(args.grace_ms, t).unwrap_or(grace);
    crate::elect_cli::warn_failover(&store, ttl, grace_for).await;
    let election = Election::new(store.clone(), &name)?;
    let mut signals = StopSignals::new()?;
    loop {
        // No leadership, no fencing token for a command that cannot start.
        check_command(&args.command[0])?;
        let session = grant(&store, ttl).await?;
        // The store may grant another TTL than the one asked (etcd rounds
        // up to whole seconds, ZooKeeper negotiates): the grace must fit it.
        let max = max_grace_with(session.ttl(), session.renew_interval(), session.renewal_lag());
        let grace = match grace_within(args.grace_ms, session.ttl(), max) {
            Ok(g) => g.min(grace),
            Err(e) => {
                let granted = session.ttl();
                let _ = session.close().await;
                return Err(e.context(format!(
                    "the store granted a TTL of {} ms (asked {} ms)",
                    granted.as_millis(),
                    ttl.as_millis()
                )));
            }
        };
        let (token, candidacy) = tokio::select! {
            _ = signals.recv() => {
                let _ = session.close().await;
                return Ok(ExitCode::SUCCESS);
            }
            t = campaign(&election, &session, &value) => match t {
                Ok(t) => t,
                Err(e) if args.keep_trying => {
                    eprintln!("{}  {e:#}; campaigning again", timestamp());
                    let _ = session.close().await;
                    tokio::time::sleep(KEEP_TRYING_PAUSE).await;
                    continue;
                }
                Err(e) => {
                    let _ = session.close().await;
                    return Err(e);
                }
            },
        };
        eprintln!(
            "{}  leading {} with fencing token {token} (session {}); starting {}",
            timestamp(),
            name,
            session.id(),
            args.command[0]
        );
        let deposed =
            async { format!("deposed ({})", election.deposed(&session, &candidacy).await) };
        let env = [(ELECTION_ENV, name.clone()), (TOKEN_ENV, token.to_string())];
        let term = lead(&args.command, &env, &session, grace, signals.recv(), deposed).await;
        if let Ok(Term::GuardDied { why, gone }) = &term {
            // Never read as the command's exit: someone killed the guard.
            eprintln!("{}  {why}", timestamp());
            if !*gone {
                // Neither resigned nor closed: the session expires by its
                // TTL, the group may die meanwhile.
                drop(session);
                return Ok(ExitCode::FAILURE);
            }
        }
        let resigned = election.resign(&candidacy).await;
        let _ = session.close().await;
        match term? {
            Term::GuardDied { .. } => {
                resigned.context("resigning")?;
                eprintln!("{}  resigned {name}", timestamp());
                return Ok(ExitCode::FAILURE);
            }
            Term::Interrupted(code) => {
                resigned.context("resigning")?;
                eprintln!(
                    "{}  resigned {} ({} stopped with {code})",
                    timestamp(),
                    name,
                    args.command[0]
                );
                return Ok(ExitCode::from(code));
            }
            Term::Exited(code) if !args.keep_trying => {
                resigned.context("resigning")?;
                return Ok(ExitCode::from(code));
            }
            Term::Exited(code) => {
                eprintln!(
                    "{}  {} exited with {code}; campaigning again",
                    timestamp(),
                    args.command[0]
                );
            }
            Term::Lost(why) => {
                eprintln!("{}  lost leadership of {name}: {why}", timestamp());
                if !args.keep_trying {
                    return Ok(ExitCode::from(EXIT_LOST));
                }
            }
        }
        tokio::time::sleep(KEEP_TRYING_PAUSE).await;
    }
}

/// What the guard told `tenure run` over their socket.
#[derive(Debug, Default, Clone, Copy)]
struct GuardReport {
    /// The command's process group (`group N`), once the keeper started.
    group: Option<Pid>,
    /// The command's exit status (`exit N`), sent before the guard exits
    /// normally; a guard that exits without it died.
    exit: Option<u8>,
}

/// Reads the guard's reports until it closes its end (it exited).
async fn read_reports(from: OwnedReadHalf, into: watch::Sender<GuardReport>) {
    let mut lines = BufReader::new(from).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        if let Some(n) = line.strip_prefix("group ").and_then(|n| n.parse::<i32>().ok()) {
            into.send_modify(|r| r.group = Some(Pid::from_raw(n)));
        } else if let Some(n) = line.strip_prefix("exit ").and_then(|n| n.parse::<u8>().ok()) {
            into.send_modify(|r| r.exit = Some(n));
        }
    }
}

/// After the guard exited with `status` (or was killed by this process):
/// SIGKILLs the command's group and waits until none of it runs, so that
/// the leadership is resigned only after the command is certainly gone.
async fn guard_died(status: Option<ExitStatus>, report: GuardReport) -> Term {
    let how = match status {
        Some(s) => match (s.signal(), s.code()) {
            (Some(sig), _) => format!("the guard died (signal {sig})"),
            (None, Some(code)) => format!("the guard exited with {code} without a report"),
            (None, None) => "the guard died".to_string(),
        },
        None => format!(
            "the guard did not exit within {GUARD_LATE:?} after the command's SIGKILL was due \
             (stopped?); killed the guard"
        ),
    };
    let Some(group) = report.group else {
        return Term::GuardDied {
            why: format!(
                "{how} before it told the command's process group (its keeper kills the \
                 group at the guard's death); not resigning: the session expires by its TTL"
            ),
            gone: false,
        };
    };
    let gone = tokio::task::spawn_blocking(move || kill_group_and_wait(group, GROUP_GONE_BOUND))
        .await
        .unwrap_or(false);
    let why = if gone {
        format!("{how}; the command's process group ({group}) was killed")
    } else {
        format!(
            "{how}; the command's process group ({group}) still runs {GROUP_GONE_BOUND:?} \
             after its SIGKILL; not resigning: the session expires by its TTL"
        )
    };
    Term::GuardDied { why, gone }
}

/// Runs `command` under a guard, with `env` added to its environment,
/// while `session` lasts; stops it when `deposed` returns (with why) or
/// `interrupt` does (Ctrl-C); how it ended.
pub(crate) async fn lead(
    command: &[String],
    env: &[(&str, String)],
    session: &Session,
    grace: Duration,
    interrupt: impl std::future::Future<Output = ()>,
    deposed: impl std::future::Future<Output = String>,
) -> anyhow::Result<Term> {
    tokio::pin!(deposed);
    tokio::pin!(interrupt);
    // Nothing starts that would have to stop at once: a session that ended,
    // or whose stop point (deadline - grace) passed without a renewal.
    if let Some(loss) = session.ended() {
        return Ok(Term::Lost(format!("{loss}; not started")));
    }
    if session.deadline().checked_sub(grace + TIMER_SLACK).is_none_or(|at| Instant::now() >= at) {
        return Ok(Term::Lost("no renewal by deadline - grace; not started".into()));
    }
    // Watch before reading the first deadline: no renewal falls in between.
    let mut deadlines = session.watch();
    let mut stale = session.watch();
    let exe = std::env::current_exe().context("finding the tenure binary for the guard")?;
    // One socket both ways, as the guard's stdin: deadlines and `stop` to
    // it, its reports back; its end closes when it exits, whatever killed it.
    let (ours, theirs) = UnixStream::pair().context("a socket pair for the guard")?;
    ours.set_nonblocking(true).context("a socket pair for the guard")?;
    let (from_guard, mut control) =
        tokio::net::UnixStream::from_std(ours).context("a socket pair for the guard")?.into_split();
    let (report_tx, reports) = watch::channel(GuardReport::default());
    let reader = tokio::spawn(read_reports(from_guard, report_tx));
    // Spawned from the thread that runs `tenure run`'s main future (the
    // runtime's `block_on`), which lives as long as the process.
    let mut guard = Command::new(exe)
        .arg("run-guard")
        .arg("--grace-ms")
        .arg(grace.as_millis().to_string())
        .arg("--deadline-ns")
        .arg(to_monotonic_ns(session.deadline())?.to_string())
        .arg("--")
        .args(command)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .env(SESSION_ENV, session.id().to_string())
        .env_remove(tenure::tokens::TOKEN_ENV)
        .stdin(Stdio::from(OwnedFd::from(theirs)))
        .kill_on_drop(false)
        .spawn()
        .with_context(|| format!("starting the guard of {}", command[0]))?;
    // Every report, once the guard's end is closed (at its exit).
    let final_report = |reader: tokio::task::JoinHandle<()>| {
        let reports = reports.clone();
        async move {
            let _ = tokio::time::timeout(REPORT_BOUND, reader).await;
            *reports.borrow()
        }
    };
    let ended = tokio::select! {
        status = guard.wait() => {
            let status = status.context("waiting for the guard")?;
            let report = final_report(reader).await;
            let Some(code) = report.exit else {
                return Ok(guard_died(Some(status), report).await);
            };
            // A guard that stopped the command on its own (this process was
            // paused, or its timer won the race with this one's) ended a
            // lost term.
            let stop_point = session.deadline().checked_sub(grace + TIMER_SLACK);
            let stopping = stop_point.is_some_and(|at| Instant::now() >= at);
            match session.ended() {
                Some(loss) => return Ok(Term::Lost(format!("{loss}; the command was stopped"))),
                None if stopping => {
                    return Ok(Term::Lost("no renewal succeeded by deadline - grace; the command was stopped".into()))
                }
                None => return Ok(Term::Exited(code)),
            }
        }
        _ = relay_deadlines(&mut deadlines, &mut control) => unreachable!("relays until cancelled"),
        loss = stale.stale(grace) => Err(loss.to_string()),
        why = &mut deposed => Err(why),
        () = &mut interrupt => Ok(()),
    };
    // Stop the command: the guard sends SIGTERM now and SIGKILL after the
    // grace, at the deadline at the latest (it takes no later deadline now).
    let kill_due = (Instant::now() + grace).min(session.deadline());
    tell_stop(&mut control, kill_due).await;
    drop(control);
    let status = match tokio::time::timeout_at(kill_due, guard.wait()).await {
        Ok(status) => status.context("waiting for the guard")?,
        Err(_) => match guard.try_wait() {
            Ok(Some(status)) => status,
            _ => {
                // The SIGKILL is due: sent from here too, for a guard that is
                // stopped (SIGSTOP) or starved. While the guard lives, its
                // keeper leads the group, so the group id is not reused.
                let group = reports.borrow().group;
                if let Some(group) = group {
                    let _ = killpg(group, Signal::SIGKILL);
                }
                match tokio::time::timeout(GUARD_LATE, guard.wait()).await {
                    Ok(status) => status.context("waiting for the guard")?,
                    Err(_) if matches!(guard.try_wait(), Ok(Some(_))) => {
                        guard.wait().await.context("waiting for the guard")?
                    }
                    Err(_) => {
                        // A guard that does not exit (stopped, hung) is killed
                        // (its keeper then kills the group, and so does this
                        // process).
                        let _ = guard.start_kill();
                        let _ = tokio::time::timeout(REPORT_BOUND, guard.wait()).await;
                        let report = final_report(reader).await;
                        return Ok(guard_died(None, report).await);
                    }
                }
            }
        },
    };
    let report = final_report(reader).await;
    let Some(code) = report.exit else {
        return Ok(guard_died(Some(status), report).await);
    };
    Ok(match ended {
        Ok(()) => Term::Interrupted(code),
        Err(why) => Term::Lost(why),
    })
}

/// Tells the guard to stop the command, waiting at most until `until` (when
/// the SIGKILL is due): a guard that is stopped (SIGSTOP) reads nothing, and
/// once its socket is full of deadlines (a few hundred renewals) the write
/// would wait for it forever, and the SIGKILL would never come.
async fn tell_stop<W: tokio::io::AsyncWrite + Unpin>(control: &mut W, until: Instant) {
    let _ = tokio::time::timeout_at(until, control.write_all(b"stop\n")).await;
}

/// Tells the guard the deadline now and every new one; never returns.
async fn relay_deadlines(deadlines: &mut SessionWatch, control: &mut OwnedWriteHalf) {
    let mut last = None;
    loop {
        let now = Some(deadlines.deadline());
        if now > last {
            last = now;
            if let Some(Ok(ns)) = now.map(to_monotonic_ns) {
                if control.write_all(format!("deadline {ns}\n").as_bytes()).await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        }
        deadlines.changed().await;
    }
}

/// Flags of the hidden `tenure run-guard`.
#[derive(Args, Debug)]
pub struct GuardArgs {
    /// Milliseconds between SIGTERM and SIGKILL.
    #[arg(long)]
    pub grace_ms: u64,
    /// The first deadline, in CLOCK_MONOTONIC nanoseconds.
    #[arg(long)]
    pub deadline_ns: u64,
    /// The command.
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

/// Sends a report line to `tenure run` (over stdin, when it is the socket
/// `tenure run` made; a pipe's read end refuses the write, which is fine:
/// no one listens).
fn report(line: &str) {
    let Ok(fd) = std::io::stdin().as_fd().try_clone_to_owned() else { return };
    let _ = std::fs::File::from(fd).write_all(format!("{line}\n").as_bytes());
}

/// Exits the guard normally, with the command's status, told first.
fn exit_with(code: u8) -> anyhow::Result<ExitCode> {
    report(&format!("exit {code}"));
    Ok(ExitCode::from(code))
}

/// `tenure run-guard`: runs the command (under the keeper, in a process
/// group of its own) and stops it at the deadline (SIGTERM at
/// deadline − grace, SIGKILL at the deadline) unless stdin moves the
/// deadline on (`deadline NS` lines); `stop`, a closed stdin, SIGINT or
/// SIGTERM stop it at once. Reports `group N` and `exit N` on stdin when it
/// is a socket. Exits with the command's status.
pub async fn guard(args: GuardArgs) -> anyhow::Result<ExitCode> {
    let grace = Duration::from_millis(args.grace_ms);
    let mut deadline = from_monotonic_ns(args.deadline_ns)?;
    // Ctrl-Z (SIGTSTP to the terminal's foreground group: `tenure run` and
    // this guard, not the command's group) must not stop the deadline's
    // enforcement: caught, and ignored.
    let _tstp = signal(SignalKind::from_raw(nix::libc::SIGTSTP)).context("catching SIGTSTP")?;
    let exe = std::env::current_exe().context("finding the tenure binary for the keeper")?;
    // The keeper leads a process group of its own and runs the command in
    // it, so that a stop reaches whatever the command started too (a
    // shell's children, a pipeline), and it kills that group when this
    // process dies (see `run_keeper`). Spawned before the first `.await`,
    // from the thread of `block_on`, which lives as long as the process
    // (`PR_SET_PDEATHSIG` follows the forking thread).
    // The keeper also gets every deadline this guard takes, on a pipe (its
    // stdin), and SIGKILLs the group at the last one if this guard did not
    // stop it by then (stopped, starved). Written without blocking: a full
    // pipe (a stopped keeper) leaves it an earlier deadline, which is safe.
    let (keeper_in, to_keeper) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
        .context("a pipe for the keeper's deadlines")?;
    nix::fcntl::fcntl(
        to_keeper.as_raw_fd(),
        nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
    )
    .context("a pipe for the keeper's deadlines")?;
    let mut child = Command::new(exe)
        .arg("run-keeper")
        .arg("--guard-pid")
        .arg(std::process::id().to_string())
        .arg("--deadline-ns")
        .arg(args.deadline_ns.to_string())
        .arg("--")
        .args(&args.command)
        .stdin(Stdio::from(keeper_in))
        .process_group(0)
        .spawn()
        .with_context(|| format!("starting the keeper of {}", args.command[0]))?;
    // The group's id is the keeper's pid (known until it is reaped).
    let pgid = child.id().map(|pid| Pid::from_raw(pid as i32));
    if let Some(pgid) = pgid {
        report(&format!("group {pgid}"));
    }
    let mut signals = StopSignals::new()?;
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut open = true;
    // When SIGKILL is due, once stopping.
    let mut kill_at: Option<Instant> = None;
    loop {
        let term_at = deadline.checked_sub(grace + TIMER_SLACK).unwrap_or(deadline);
        let stop = tokio::select! {
            status = child.wait() => {
                // The keeper is gone (with the command's status, or killed):
                // nothing the command started may outlive it (its
                // leadership is resigned next).
                kill_group(pgid, Signal::SIGKILL);
                return exit_with(status_code(status.context("waiting for the command")?));
            }
            line = lines.next_line(), if open => match line {
                Ok(Some(line)) => match line.strip_prefix("deadline ").map(str::parse::<u64>) {
                    Some(Ok(ns)) => {
                        if kill_at.is_none() {
                            deadline = deadline.max(from_monotonic_ns(ns)?);
                            // One short write, atomic on a pipe: all or
                            // nothing (a full pipe).
                            let _ = nix::unistd::write(&to_keeper, format!("deadline {ns}\n").as_bytes());
                        }
                        false
                    }
                    _ => true,
                },
                _ => {
                    open = false;
                    true
                }
            },
            _ = tokio::time::sleep_until(term_at), if kill_at.is_none() => true,
            _ = sleep_until_opt(kill_at) => {
                kill_group(pgid, Signal::SIGKILL);
                let status = child.wait().await.context("waiting for the command")?;
                return exit_with(status_code(status));
            }
            _ = signals.recv() => true,
        };
        if stop && kill_at.is_none() {
            kill_group(pgid, Signal::SIGTERM);
            let at =
                (Instant::now() + grace).min(deadline.checked_sub(TIMER_SLACK).unwrap_or(deadline));
            kill_at = Some(at);
        }
    }
}

async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Sends `signal` to every process of the command's group (none left: a
/// no-op). A process that left the group (`setsid`, a daemon's double fork)
/// is out of reach: run such a command in the foreground.
fn kill_group(pgid: Option<Pid>, signal: Signal) {
    if let Some(pgid) = pgid {
        let _ = killpg(pgid, signal);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grace_must_fit_between_the_next_renewal_and_the_deadline() {
        let ttl = Duration::from_secs(10);
        // 8181.8 ms - 3333.3 ms - 1666.6 ms.
        assert_eq!(max_grace(ttl).as_millis(), 3181);
        assert_eq!(grace_of(None, ttl).unwrap(), Duration::from_millis(DEFAULT_GRACE_MS));
        assert_eq!(grace_of(Some(3181), ttl).unwrap(), Duration::from_millis(3181));
        let err = grace_of(Some(3200), ttl).unwrap_err().to_string();
        assert!(err.contains("at most 3181 ms") && err.contains("--ttl-ms"), "{err}");
        // A short TTL lowers the default to what fits.
        let short = Duration::from_millis(1000);
        assert_eq!(grace_of(None, short).unwrap(), max_grace(short));
        assert_eq!(max_grace(short).as_millis(), 318);
        assert!(grace_of(Some(0), short).is_ok());
    }

    #[test]
    fn sigterm_and_sigkill_both_come_before_the_deadline() {
        for ms in [500, 1000, 10_000, 60_000] {
            let ttl = Duration::from_millis(ms);
            let grace = max_grace(ttl);
            // After a renewal sent at 0: the next is due at ttl/3; SIGTERM at
            // span - grace leaves it ttl/6, SIGKILL comes at the span.
            let term = trusted_span(ttl) - grace;
            assert!(term >= renew_interval(ttl) + renew_interval(ttl) / 2, "{ms}");
            assert!(term + grace <= trusted_span(ttl));
        }
    }

    #[derive(clap::Parser)]
    struct Wrap {
        #[command(flatten)]
        run: RunArgs,
    }

    #[test]
    fn the_command_comes_after_the_double_dash_and_is_required() {
        use clap::Parser;
        let w = Wrap::try_parse_from([
            "t",
            "--election",
            "j",
            "--keep-trying",
            "--",
            "sh",
            "-c",
            "x --y",
        ])
        .unwrap();
        assert_eq!(w.run.command, ["sh", "-c", "x --y"]);
        assert!(w.run.keep_trying && w.run.grace_ms.is_none());
        assert_eq!(
            (w.run.ttl_ms, w.run.conn.endpoints.as_str()),
            (10_000, crate::client::DEFAULT_ENDPOINTS)
        );
        // Flags after `--` are the command's, not tenure's.
        let w =
            Wrap::try_parse_from(["t", "--election", "j", "--", "cmd", "--ttl-ms", "1"]).unwrap();
        assert_eq!((w.run.ttl_ms, w.run.command.len()), (10_000, 3));
        assert!(Wrap::try_parse_from(["t", "--election", "j"]).is_err(), "no command");
        assert!(Wrap::try_parse_from(["t", "--", "cmd"]).is_err(), "no election");
        let both = Wrap::try_parse_from(["t", "--election", "j", "--group", "g", "--", "cmd"]);
        assert!(both.is_err(), "an election and a group");
        let g = Wrap::try_parse_from(["t", "--group", "g", "--partitions", "8", "--", "cmd"]);
        assert_eq!(g.unwrap().run.partitions, Some(8));
        let stray = Wrap::try_parse_from(["t", "--election", "j", "--partitions", "8", "--", "c"]);
        let e = check_no_group_flags(&stray.unwrap().run).unwrap_err().to_string();
        assert_eq!(
            e,
            "--partitions goes with --group (a group of partitions), not with --election"
        );
    }

    #[tokio::test]
    async fn a_stop_for_a_guard_that_reads_nothing_gives_up_when_the_sigkill_is_due() {
        // A stopped guard's socket, full of the deadlines it did not read.
        let (ours, _theirs) = tokio::net::UnixStream::pair().unwrap();
        let (_, mut control) = ours.into_split();
        let line = [b'd'; 64];
        while tokio::time::timeout(Duration::from_millis(50), control.write_all(&line))
            .await
            .is_ok()
        {}
        let due = Instant::now() + Duration::from_millis(100);
        let told = tokio::time::timeout(Duration::from_secs(5), tell_stop(&mut control, due)).await;
        assert!(told.is_ok(), "still writing 5 s after the SIGKILL was due");
        assert!(Instant::now() >= due, "gave up before the SIGKILL was due");
    }

    #[test]
    fn deadlines_cross_the_process_boundary_early_rather_than_late() {
        let at = Instant::now() + Duration::from_secs(5);
        let back = from_monotonic_ns(to_monotonic_ns(at).unwrap()).unwrap();
        assert!(back <= at, "{back:?} {at:?}");
        assert!(at - back < Duration::from_millis(50), "{:?}", at - back);
    }
}
