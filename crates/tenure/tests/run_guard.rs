//! The guard of `tenure run` (`tenure run-guard`) as a real process: it
//! sends SIGTERM at `deadline − grace` and SIGKILL at the deadline, on
//! `CLOCK_MONOTONIC`, unless a `deadline` line moved it on; a closed stdin
//! (its `tenure run` died) stops the command at once.

use nix::time::{clock_gettime, ClockId};
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `CLOCK_MONOTONIC` now plus `after`, in nanoseconds.
fn monotonic_in(after: Duration) -> u64 {
    let t = clock_gettime(ClockId::CLOCK_MONOTONIC).unwrap();
    t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64 + after.as_nanos() as u64
}

/// How late a process may be reaped after its SIGKILL on a busy machine.
const REAP_BOUND: Duration = Duration::from_millis(300);

/// Polls `file` until it holds `what`; when that was seen.
fn seen(file: &std::path::Path, what: &str, bound: Duration) -> Option<Instant> {
    let until = Instant::now() + bound;
    while Instant::now() < until {
        if std::fs::read_to_string(file).unwrap_or_default().contains(what) {
            return Some(Instant::now());
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    None
}

#[test]
fn sigterm_at_deadline_minus_grace_then_sigkill_at_the_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("signals");
    // Ignores SIGTERM (notes it), so only SIGKILL ends it.
    let script =
        format!("trap 'echo term >> {}' TERM; while :; do sleep 0.005; done", file.display());
    let start = Instant::now();
    let deadline = Duration::from_millis(800);
    let grace = Duration::from_millis(300);
    let mut guard = Command::new(env!("CARGO_BIN_EXE_tenure"))
        .args(["run-guard", "--grace-ms", "300", "--deadline-ns"])
        .arg(monotonic_in(deadline).to_string())
        .args(["--", "sh", "-c", &script])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let _stdin = guard.stdin.take();
    let term = seen(&file, "term", Duration::from_secs(5)).expect("SIGTERM came");
    let status = guard.wait().unwrap();
    let killed = start.elapsed();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.code(), Some(128 + 9), "{status:?}");
    let termed = term - start;
    // The trap runs after the 5 ms sleep it interrupts.
    assert!(termed >= deadline - grace - Duration::from_millis(10), "SIGTERM at {termed:?}");
    assert!(termed < deadline, "SIGTERM at {termed:?}");
    assert!(killed >= deadline - Duration::from_millis(10), "SIGKILL at {killed:?}");
    assert!(killed < deadline + REAP_BOUND, "reaped at {killed:?}");
    assert!(status.signal().is_none(), "the guard exits with the command's status");
}

#[test]
fn a_renewal_moves_the_deadline_and_a_closed_stdin_stops_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("signals");
    let script = format!(
        "trap 'echo term >> {}; exit 0' TERM; while :; do sleep 0.005; done",
        file.display()
    );
    let start = Instant::now();
    let mut guard = Command::new(env!("CARGO_BIN_EXE_tenure"))
        .args(["run-guard", "--grace-ms", "100", "--deadline-ns"])
        .arg(monotonic_in(Duration::from_millis(600)).to_string())
        .args(["--", "sh", "-c", &script])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = guard.stdin.take().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    writeln!(stdin, "deadline {}", monotonic_in(Duration::from_millis(1300))).unwrap();
    // Not stopped at the first deadline's SIGTERM (500 ms) nor at 1 s.
    assert!(seen(&file, "term", Duration::from_millis(800)).is_none(), "stopped too early");
    assert!(guard.try_wait().unwrap().is_none());
    let closed = Instant::now();
    drop(stdin);
    seen(&file, "term", Duration::from_secs(5)).expect("SIGTERM on a closed stdin");
    let status = guard.wait().unwrap();
    assert_eq!(status.code(), Some(0), "the command's own status after its trap");
    assert!(closed.elapsed() < Duration::from_millis(300), "{:?}", closed.elapsed());
    assert!(start.elapsed() < Duration::from_millis(1300));
}

#[test]
fn a_command_that_cannot_start_is_refused_before_campaigning() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data.txt");
    std::fs::write(&data, "not a program").unwrap();
    let data = data.to_str().unwrap().to_string();
    for (command, why) in [
        ("/nonexistent", "not found"),
        ("no-such-command-for-tenure", "not found in any directory of PATH"),
        (data.as_str(), "not executable"),
    ] {
        // No server listens on port 1: a campaign would fail on the
        // connection, after retrying; the check comes first.
        let start = Instant::now();
        let out = Command::new(env!("CARGO_BIN_EXE_tenure"))
            .args(["run", "--endpoints", "http://127.0.0.1:1", "--election", "job", "--"])
            .arg(command)
            .env_remove("TENURE_STORE")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{command}: {:?}", out.status);
        assert!(err.contains(&format!("cannot start {command}")) && err.contains(why), "{err}");
        assert!(!err.contains("session"), "no session was asked for: {err}");
        assert!(start.elapsed() < Duration::from_secs(2), "{:?}", start.elapsed());
    }
}

/// The pids whose parent is `ppid`.
fn children_of(ppid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
        if rest.split_whitespace().nth(1).and_then(|p| p.parse().ok()) == Some(ppid) {
            out.push(pid);
        }
    }
    out
}

/// Whether `pid` runs (a zombie does not).
fn runs(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat.rsplit_once(')').and_then(|(_, r)| r.split_whitespace().next());
    state.is_some_and(|s| s != "Z")
}

/// What `tenure run --help` says is not covered, as it is: the guard and
/// the keeper SIGKILLed at once leave no one to kill the group, but the
/// command's first process dies with the keeper (`PR_SET_PDEATHSIG`); a
/// process it started runs on.
#[test]
fn with_guard_and_keeper_killed_at_once_the_commands_first_process_dies() {
    use nix::sys::signal::{kill, killpg, Signal};
    use nix::unistd::Pid;
    let mut guard = Command::new(env!("CARGO_BIN_EXE_tenure"))
        .args(["run-guard", "--grace-ms", "100", "--deadline-ns"])
        .arg(monotonic_in(Duration::from_secs(60)).to_string())
        .args(["--", "sh", "-c", "sleep 1000 & wait"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let _stdin = guard.stdin.take();
    // guard → keeper → sh → sleep.
    let until = Instant::now() + Duration::from_secs(10);
    let (keeper, shell, sleeper) = loop {
        let keeper = children_of(guard.id());
        let shell = keeper.iter().flat_map(|&k| children_of(k)).collect::<Vec<_>>();
        let sleeper = shell.iter().flat_map(|&s| children_of(s)).collect::<Vec<_>>();
        if let ([k], [s], [z]) = (&keeper[..], &shell[..], &sleeper[..]) {
            break (*k, *s, *z);
        }
        assert!(Instant::now() < until, "no guard → keeper → sh → sleep chain");
        std::thread::sleep(Duration::from_millis(5));
    };
    let comm = std::fs::read_to_string(format!("/proc/{keeper}/comm")).unwrap();
    assert_eq!(comm.trim(), "tenure", "the guard's child is the keeper");
    kill(Pid::from_raw(guard.id() as i32), Signal::SIGKILL).unwrap();
    kill(Pid::from_raw(keeper as i32), Signal::SIGKILL).unwrap();
    guard.wait().unwrap();
    let until = Instant::now() + Duration::from_secs(2);
    while runs(shell) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(5));
    }
    let shell_runs = runs(shell);
    // What the command started may run on (documented), or not: the keeper
    // may take the guard's death signal and kill its group before its own
    // SIGKILL lands, a race two kill(2) calls cannot win every time.
    eprintln!("the command's child {sleeper} runs on: {}", runs(sleeper));
    // Clean up what is documented to survive (the group is the keeper's).
    let _ = killpg(Pid::from_raw(keeper as i32), Signal::SIGKILL);
    assert!(!shell_runs, "the command's first process outlived its keeper");
}

/// The command runs in a process group of its own, which an operator may
/// signal (`kill -USR2 -PGID`: reload, rotate logs, dump threads; a
/// real-time signal): the keeper, a member of that group, must not die of
/// a signal meant for the command (its death SIGKILLs the command and
/// stops the run).
#[test]
fn a_signal_to_the_commands_group_reaches_the_command_and_stops_nothing() {
    use nix::libc;
    use nix::sys::signal::{killpg, Signal};
    use nix::unistd::Pid;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("signals");
    // (the signal, its name for bash's trap)
    let signals = [
        (libc::SIGUSR2, "USR2".to_string()),
        (libc::SIGQUIT, "QUIT".to_string()),
        (libc::SIGALRM, "ALRM".to_string()),
        (libc::SIGRTMIN() + 1, "RTMIN+1".to_string()),
    ];
    let traps: String = signals
        .iter()
        .map(|(_, name)| format!("trap 'echo {name} >> {}' {name}; ", file.display()))
        .collect();
    let script = format!("{traps}while :; do sleep 0.005; done");
    let mut command = Command::new(env!("CARGO_BIN_EXE_tenure"));
    command
        .args(["run-guard", "--grace-ms", "100", "--deadline-ns"])
        .arg(monotonic_in(Duration::from_secs(60)).to_string())
        .args(["--", "bash", "-c", &script])
        .stdin(Stdio::piped());
    // A test run from a background job of a shell without job control
    // inherits SIGINT and SIGQUIT ignored (bash does that), dispositions
    // pass on through exec, and bash cannot trap a signal ignored when it
    // started: the chain gets default dispositions for the signals sent.
    let numbers: Vec<i32> = signals.iter().map(|(n, _)| *n).collect();
    // SAFETY: only sigaction, which is async-signal-safe, between fork and exec.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut command, move || {
            for &n in &numbers {
                libc::signal(n, libc::SIG_DFL);
            }
            Ok(())
        });
    }
    let mut guard = command.spawn().unwrap();
    let stdin = guard.stdin.take();
    let until = Instant::now() + Duration::from_secs(10);
    let (keeper, shell) = loop {
        let keeper = children_of(guard.id());
        let shell = keeper.iter().flat_map(|&k| children_of(k)).collect::<Vec<_>>();
        if let ([k], [s]) = (&keeper[..], &shell[..]) {
            break (*k, *s);
        }
        assert!(Instant::now() < until, "no guard → keeper → bash chain");
        std::thread::sleep(Duration::from_millis(5));
    };
    // The shell's traps are set once it loops: give it time.
    std::thread::sleep(Duration::from_millis(300));
    let group = Pid::from_raw(keeper as i32);
    for (signal, name) in &signals {
        // SAFETY: a plain system call.
        assert_eq!(unsafe { libc::killpg(keeper as i32, *signal) }, 0, "{name}");
        let got = seen(&file, name, Duration::from_secs(5));
        std::thread::sleep(Duration::from_millis(100));
        let (guard_ran, keeper_runs, shell_runs) =
            (guard.try_wait().unwrap(), runs(keeper), runs(shell));
        if guard_ran.is_some() || !shell_runs {
            let _ = killpg(group, Signal::SIGKILL);
        }
        assert!(got.is_some(), "the command did not get {name}");
        assert!(
            guard_ran.is_none() && keeper_runs && shell_runs,
            "{name} to the command's group: guard exit {guard_ran:?}, keeper runs {keeper_runs}, \
             command runs {shell_runs}"
        );
    }
    drop(stdin);
    let status = guard.wait().unwrap();
    assert_eq!(status.code(), Some(128 + 15), "stopped by the closed stdin: {status:?}");
}

/// The guard SIGSTOPped, then its `tenure run` killed (or stopped too):
/// no one would stop the command, and the successor leads after the TTL.
/// The keeper knows every deadline the guard took and SIGKILLs the group
/// at the last one.
#[test]
fn with_the_guard_stopped_the_keeper_kills_the_group_at_the_deadline() {
    use nix::sys::signal::{kill, killpg, Signal};
    use nix::unistd::Pid;
    let start = Instant::now();
    let deadline = Duration::from_millis(1500);
    let mut guard = Command::new(env!("CARGO_BIN_EXE_tenure"))
        .args(["run-guard", "--grace-ms", "300", "--deadline-ns"])
        .arg(monotonic_in(deadline).to_string())
        .args(["--", "sh", "-c", "trap '' TERM; sleep 1000 & while :; do sleep 0.005; done"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = guard.stdin.take().unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    let keeper = loop {
        if let [k] = children_of(guard.id())[..] {
            if !children_of(k).is_empty() {
                break k;
            }
        }
        assert!(Instant::now() < until, "no guard → keeper → sh chain");
        std::thread::sleep(Duration::from_millis(5));
    };
    // A renewal the guard passes on: the keeper keeps to the later deadline.
    let later = Duration::from_millis(2500);
    writeln!(stdin, "deadline {}", monotonic_in(later - start.elapsed())).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let guard_pid = Pid::from_raw(guard.id() as i32);
    kill(guard_pid, Signal::SIGSTOP).unwrap();
    drop(stdin);
    let group = Pid::from_raw(keeper as i32);
    // The live processes of the command's group (the sleep's parent may
    // die first: it is then init's child, still in the group).
    let live = || {
        let mut n = 0;
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
            if rest.split_whitespace().nth(2).and_then(|g| g.parse().ok()) == Some(keeper)
                && runs(pid)
            {
                n += 1;
            }
        }
        n
    };
    let gone_by = loop {
        if live() == 0 {
            break Some(start.elapsed());
        }
        if start.elapsed() > later + Duration::from_secs(3) {
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let _ = killpg(group, Signal::SIGKILL);
    kill(guard_pid, Signal::SIGCONT).unwrap();
    guard.wait().unwrap();
    let gone_by = gone_by.expect("the command's group outlived the deadline by 3 s");
    assert!(
        gone_by >= later - Duration::from_millis(20),
        "killed before the deadline: {gone_by:?}"
    );
    assert!(gone_by < later + REAP_BOUND, "killed at {gone_by:?}, the deadline at {later:?}");
}
