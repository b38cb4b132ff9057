//! The keeper of `tenure run`'s command (the hidden `tenure run-keeper`)
//! and the process-group checks `tenure run` makes before it resigns.
//!
//! `tenure run` (A) starts the guard (G, `tenure run-guard`), which keeps
//! the deadline; G starts the keeper (K) in a process group of its own, P,
//! and K starts the command (C) inside P. K is what makes a dead guard stop
//! the command: it asks the kernel for a signal when G dies
//! (`PR_SET_PDEATHSIG`), and then SIGKILLs its whole group, itself
//! included. So whichever of A, G, A's process group or both pids is
//! killed, by any signal, nothing of the command's group runs on: G alone
//! or G with A dead, K kills P at once; A alone, G sees its stdin close and
//! stops P (SIGTERM, SIGKILL after the grace, at the deadline at the
//! latest). G passes every deadline it takes on to K (K's stdin, a pipe),
//! and K SIGKILLs P at the last one it knows, so a G that is SIGSTOPped
//! while A is killed or stopped too cannot keep P past the deadline (a G
//! that cannot write, K stopped and the pipe full, leaves K an earlier
//! deadline, which is safe). C itself gets SIGKILL at K's death (its own
//! `PR_SET_PDEATHSIG`), so even when every tenure process of the run is
//! SIGKILLed at once (`kill -9 $(pgrep tenure)`), the command's first
//! process dies; what it started then runs on (out of reach, like a process
//! that leaves the group with `setsid` or a double fork).
//!
//! K is synchronous and single-threaded: `PR_SET_PDEATHSIG` fires when the
//! *thread* that forked a process exits, and K's only thread lives as long
//! as K. K survives the SIGTERM that a stop sends to P, and any signal an
//! operator sends to P for the command (it blocks every signal and takes
//! them with `sigtimedwait`, ignoring all but SIGCHLD and the guard's death,
//! SIGIO waking it for a deadline); the
//! command starts with an empty signal mask (set between fork and exec)
//! and default dispositions (K installs no handler), so it gets them.

use anyhow::Context;
use clap::Args;
use nix::errno::Errno;
use nix::sys::signal::{kill, killpg, SigSet, Signal};
use nix::unistd::{getpgrp, getppid, Pid};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, ExitCode, ExitStatus, Stdio};
use std::time::{Duration, Instant};
use tenure_client::session::TIMER_SLACK;

/// The signal K asks for at G's death.
const GUARD_DEATH_SIGNAL: Signal = Signal::SIGUSR1;
/// The exit status when the command is not found (as a shell's).
const EXIT_NOT_FOUND: u8 = 127;
/// The exit status when the command is not executable (as a shell's).
const EXIT_NOT_EXECUTABLE: u8 = 126;
/// How often [`wait_group_gone`] looks again.
const GROUP_POLL: Duration = Duration::from_millis(2);
/// The most bytes of deadlines read at once (many lines, if the keeper was
/// paused).
const INPUT_CHUNK: usize = 4096;

/// Flags of the hidden `tenure run-keeper`.
#[derive(Args, Debug)]
pub struct KeeperArgs {
    /// The guard's pid: K's parent, whose death kills the command's group.
    #[arg(long)]
    pub guard_pid: i32,
    /// The session's deadline, in CLOCK_MONOTONIC nanoseconds; later ones
    /// come on stdin (`deadline NS` lines) from the guard.
    #[arg(long)]
    pub deadline_ns: u64,
    /// The command.
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

/// The exit status of a process as a shell reports it: its code, or 128 +
/// the signal that ended it.
pub fn status_code(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(code), _) => code as u8,
        (None, Some(sig)) => 128u8.wrapping_add(sig as u8),
        (None, None) => 1,
    }
}

/// Kills this process's whole group (this process too): the guard is gone.
fn kill_own_group() -> ! {
    let _ = killpg(getpgrp(), Signal::SIGKILL);
    // Not reached: SIGKILL cannot be blocked.
    std::process::exit(i32::from(128 + 9_u8));
}

/// `tenure run-keeper`: runs the command in this process's group and exits
/// with its status; kills the group when the guard dies.
pub fn keeper(args: KeeperArgs) -> ExitCode {
    let guard = Pid::from_raw(args.guard_pid);
    // Every signal blocked before anything else: a signal that comes early
    // waits for `sigwait` below, and one sent to the command's group (a
    // stop's SIGTERM, an operator's SIGUSR2, SIGQUIT, SIGTTIN...) is the
    // command's, not a reason for this process to die or stop. (SIGKILL
    // and SIGSTOP cannot be blocked.) The command does not inherit the mask.
    let waited = SigSet::all();
    if let Err(e) = waited.thread_block() {
        eprintln!("tenure run-keeper: cannot block signals: {e}");
        kill_own_group();
    }
    if let Err(e) = nix::sys::prctl::set_pdeathsig(GUARD_DEATH_SIGNAL) {
        eprintln!("tenure run-keeper: cannot ask for a signal at the guard's death: {e}");
        kill_own_group();
    }
    // The guard may have died before the request above: then no signal
    // comes, and this process has another parent already.
    if getppid() != guard {
        kill_own_group();
    }
    // A stop that came before the command started (the guard's SIGTERM to
    // the group, while this process was starting) would reach no one: then
    // the command is not started at all. (One that comes between this
    // check and the fork is lost: the SIGKILL after the grace stops it.)
    if let Some(sig) = stop_pending() {
        return ExitCode::from(128u8.wrapping_add(sig as u8));
    }
    // The deadlines from the guard wake this process (SIGIO, blocked and
    // taken below) and are read without blocking.
    if let Err(e) = watch_input() {
        eprintln!("tenure run-keeper: cannot watch the guard's deadlines: {e}");
        kill_own_group();
    }
    let mut deadline = Deadlines { last: args.deadline_ns, partial: Vec::new() };
    let me = Pid::this();
    let mut command = Command::new(&args.command[0]);
    command.args(&args.command[1..]).stdin(Stdio::null());
    // SAFETY: between fork and exec the closure makes only system calls
    // (sigprocmask, prctl, getppid), all async-signal-safe; it allocates
    // nothing and takes no lock.
    unsafe {
        command.pre_exec(move || {
            // The command starts with no signal blocked (the standard
            // library keeps the parent's mask).
            SigSet::empty().thread_set_mask()?;
            // The command's first process dies with this one, even when
            // nothing else is left to kill the group.
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
            if getppid() != me {
                return Err(std::io::Error::other("the keeper died"));
            }
            Ok(())
        });
    }
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            eprintln!("error: starting {}: {}", args.command[0], cannot_start(&e));
            let code = match e.kind() {
                std::io::ErrorKind::PermissionDenied => EXIT_NOT_EXECUTABLE,
                _ => EXIT_NOT_FOUND,
            };
            return ExitCode::from(code);
        }
    };
    loop {
        // The guard's deadline, and the SIGKILL at it when the guard did
        // not give it (stopped, starved, or killed with `tenure run` by
        // SIGSTOP and SIGKILL): the last deadline this process knows is
        // never later than the session's.
        if !deadline.read() {
            // The guard closed its end: it is gone.
            kill_own_group();
        }
        let left = deadline.kill_at().saturating_sub(monotonic_ns());
        if left == 0 {
            eprintln!(
                "tenure run-keeper: the session's deadline passed without a stop from the \
                 guard; killing the command's group"
            );
            kill_own_group();
        }
        match wait_signal(&waited, Duration::from_nanos(left)) {
            Ok(s) if s == Signal::SIGCHLD as i32 => match child.try_wait() {
                Ok(Some(status)) => return ExitCode::from(status_code(status)),
                Ok(None) => {}
                Err(e) => {
                    eprintln!("tenure run-keeper: waiting for {}: {e}", args.command[0]);
                    kill_own_group();
                }
            },
            // Sent by the kernel at the guard's death (or by someone else:
            // then the guard is still the parent).
            Ok(s) if s == GUARD_DEATH_SIGNAL as i32 => {
                if getppid() != guard {
                    kill_own_group();
                }
            }
            // Any other (SIGTERM, SIGINT, SIGHUP, SIGUSR2, a real-time
            // signal...): meant for the command, which gets them too; the
            // keeper stays to the end.
            Ok(_) => {}
            Err(e) => {
                eprintln!("tenure run-keeper: sigwait: {e}");
                kill_own_group();
            }
        }
    }
}

/// Waits at most `within` for a signal of `set` (blocked) and takes it: its
/// number (real-time signals included, which `SigSet::wait` cannot name: it
/// panics on them), or 0 when `within` passed or a wait was interrupted.
fn wait_signal(set: &SigSet, within: Duration) -> Result<i32, Errno> {
    let timeout = nix::libc::timespec {
        tv_sec: within.as_secs().min(i64::MAX as u64) as nix::libc::time_t,
        tv_nsec: within.subsec_nanos() as nix::libc::c_long,
    };
    // SAFETY: every pointer is valid for the call: a sigset_t owned by
    // `set`, no siginfo, a timespec on this stack.
    let res = unsafe { nix::libc::sigtimedwait(set.as_ref(), std::ptr::null_mut(), &timeout) };
    match Errno::result(res) {
        Ok(signal) => Ok(signal),
        Err(Errno::EAGAIN | Errno::EINTR) => Ok(0),
        Err(e) => Err(e),
    }
}

/// `CLOCK_MONOTONIC` now, in nanoseconds (0 if it cannot be read: then
/// every deadline is in the future, and the guard's timers stop the command).
fn monotonic_ns() -> u64 {
    match nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC) {
        Ok(t) => {
            u64::try_from(t.tv_sec()).unwrap_or(0) * 1_000_000_000
                + u64::try_from(t.tv_nsec()).unwrap_or(0)
        }
        Err(_) => 0,
    }
}

/// Makes stdin (the guard's deadlines) non-blocking, and asks for SIGIO
/// (blocked, taken by [`wait_signal`]) when something comes on it.
fn watch_input() -> Result<(), Errno> {
    use nix::libc::{fcntl, F_GETFL, F_SETFL, F_SETOWN, O_ASYNC, O_NONBLOCK, STDIN_FILENO};
    // SAFETY: fcntl on this process's stdin, with integer arguments.
    unsafe {
        Errno::result(fcntl(STDIN_FILENO, F_SETOWN, Pid::this().as_raw()))?;
        let flags = Errno::result(fcntl(STDIN_FILENO, F_GETFL))?;
        Errno::result(fcntl(STDIN_FILENO, F_SETFL, flags | O_NONBLOCK | O_ASYNC))?;
    }
    Ok(())
}

/// The last deadline the guard told (CLOCK_MONOTONIC nanoseconds).
struct Deadlines {
    last: u64,
    /// An incomplete line.
    partial: Vec<u8>,
}

impl Deadlines {
    /// Reads every `deadline NS` line waiting on stdin; false when the guard
    /// closed its end (it exited). A line that does not parse moves nothing.
    fn read(&mut self) -> bool {
        let mut buf = [0u8; INPUT_CHUNK];
        loop {
            match nix::unistd::read(nix::libc::STDIN_FILENO, &mut buf) {
                Ok(0) => return false,
                Ok(n) => {
                    self.partial.extend_from_slice(&buf[..n]);
                    while let Some(end) = self.partial.iter().position(|&b| b == b'\n') {
                        let line: Vec<u8> = self.partial.drain(..=end).collect();
                        let ns = std::str::from_utf8(&line)
                            .ok()
                            .and_then(|l| l.trim().strip_prefix("deadline "))
                            .and_then(|n| n.parse::<u64>().ok());
                        if let Some(ns) = ns {
                            self.last = self.last.max(ns);
                        }
                    }
                    // A line is a few dozen bytes: more is not a deadline.
                    if self.partial.len() > INPUT_CHUNK {
                        self.partial.clear();
                    }
                }
                Err(Errno::EINTR) => {}
                // EAGAIN: nothing more now; any other error: keep the last.
                Err(_) => return true,
            }
        }
    }

    /// When the group is SIGKILLed if no later deadline comes: the timers'
    /// slack before the deadline, as the guard's own SIGKILL.
    fn kill_at(&self) -> u64 {
        self.last.saturating_sub(TIMER_SLACK.as_nanos() as u64)
    }
}

/// A stop signal (SIGTERM, SIGINT, SIGHUP) pending for this process, as
/// `/proc/self/status` shows it (`SigPnd`: this thread's, `ShdPnd`: the
/// process's, where a group's signal waits).
fn stop_pending() -> Option<Signal> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let pending = status
        .lines()
        .filter_map(|l| l.strip_prefix("SigPnd:").or_else(|| l.strip_prefix("ShdPnd:")))
        .filter_map(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .fold(0, |a, b| a | b);
    [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP]
        .into_iter()
        .find(|&s| pending & (1 << (s as u32 - 1)) != 0)
}

/// Why a command cannot start, in words.
fn cannot_start(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "not found".into(),
        std::io::ErrorKind::PermissionDenied => "not executable (permission denied)".into(),
        _ => e.to_string(),
    }
}

/// Checks that `program` can be started, as `execvp` would look for it:
/// a path (it holds a `/`) must be an executable file; a bare name must be
/// one in a directory of `PATH`. The error names the program and why.
pub fn check_command(program: &str) -> anyhow::Result<()> {
    use std::path::Path;
    if program.is_empty() {
        anyhow::bail!("the command is empty");
    }
    if program.contains('/') {
        return executable(Path::new(program)).with_context(|| format!("cannot start {program}"));
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/bin:/usr/bin".into());
    let mut refused = None;
    for dir in std::env::split_paths(&path) {
        let dir = if dir.as_os_str().is_empty() { Path::new(".").to_path_buf() } else { dir };
        let candidate = dir.join(program);
        match executable(&candidate) {
            Ok(()) => return Ok(()),
            Err(e) if candidate.exists() => refused = Some(format!("{}: {e}", candidate.display())),
            Err(_) => {}
        }
    }
    match refused {
        Some(why) => anyhow::bail!("cannot start {program}: {why}"),
        None => anyhow::bail!(
            "cannot start {program}: not found in any directory of PATH ({})",
            path.to_string_lossy()
        ),
    }
}

/// An executable regular file (what the kernel would `execve`).
fn executable(path: &std::path::Path) -> anyhow::Result<()> {
    use nix::unistd::{access, AccessFlags};
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => anyhow::anyhow!("not found"),
        _ => anyhow::anyhow!("{e}"),
    })?;
    if meta.is_dir() {
        anyhow::bail!("a directory, not an executable file");
    }
    if !meta.is_file() {
        anyhow::bail!("not a regular file");
    }
    access(path, AccessFlags::X_OK).map_err(|e| match e {
        Errno::EACCES => anyhow::anyhow!("not executable (no execute permission)"),
        e => anyhow::anyhow!("not executable: {e}"),
    })
}

/// Whether a process of group `pgid` still runs (zombies, already dead and
/// waiting to be reaped, do not count).
pub fn group_alive(pgid: Pid) -> bool {
    if kill(Pid::from_raw(-pgid.as_raw()), None) == Err(Errno::ESRCH) {
        return false;
    }
    let Ok(entries) = std::fs::read_dir("/proc") else { return true };
    entries.flatten().any(|entry| {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<i32>().ok()) else { return false };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
        // `pid (comm) state ppid pgrp ...`; comm may hold anything, so read
        // after its last `)`.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else { return false };
        let mut fields = rest.split_whitespace();
        let state = fields.next().unwrap_or("Z");
        let pgrp = fields.nth(1).and_then(|f| f.parse::<i32>().ok());
        pgrp == Some(pgid.as_raw()) && state != "Z" && state != "X"
    })
}

/// SIGKILLs group `pgid` and waits until none of it runs, at most `bound`:
/// whether it is gone.
pub fn kill_group_and_wait(pgid: Pid, bound: Duration) -> bool {
    let until = Instant::now() + bound;
    loop {
        let _ = killpg(pgid, Signal::SIGKILL);
        if !group_alive(pgid) {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        std::thread::sleep(GROUP_POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_that_cannot_start_is_named_with_the_reason() {
        let err = format!("{:#}", check_command("/nonexistent").unwrap_err());
        assert!(err.contains("/nonexistent") && err.contains("not found"), "{err}");
        let err = format!("{:#}", check_command("/tmp").unwrap_err());
        assert!(err.contains("directory"), "{err}");
        let err = format!("{:#}", check_command("no-such-tenure-command-x").unwrap_err());
        assert!(err.contains("no-such-tenure-command-x") && err.contains("PATH"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("data");
        std::fs::write(&file, "x").unwrap();
        // Root may run any file with an execute bit, but none is set here.
        let err = format!("{:#}", check_command(file.to_str().unwrap()).unwrap_err());
        assert!(err.contains("not executable"), "{err}");
        assert!(check_command("sh").is_ok());
        assert!(check_command("/bin/sh").is_ok());
        assert!(check_command("").is_err());
    }

    #[test]
    fn exit_statuses_are_reported_as_a_shell_does() {
        assert_eq!(status_code(ExitStatus::from_raw(3 << 8)), 3);
        assert_eq!(status_code(ExitStatus::from_raw(9)), 137);
        assert_eq!(status_code(ExitStatus::from_raw(15)), 143);
    }
}
