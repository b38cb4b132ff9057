//! `tenure run` killed in each way a process dies : its
//! guard alone, `tenure run` alone, their process group, or both pids, all
//! by SIGKILL, and a guard SIGSTOPped before `tenure run` is told to stop,
//! while a second candidate waits. The command (a shell whose
//! writer subshell ignores SIGTERM, as a script's server would) appends
//! `<tag> <wall-clock ns>` to a resource log every 5 ms: no line of the old
//! leader may follow the successor's first, and the old command's whole
//! process group must be gone by then.

mod harness;

use harness::{serial, TestCluster};
use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;
use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const HEARTBEAT_MS: u64 = 20;
const TIMEOUT_MS: u64 = 200;
/// The candidates' session TTL and grace.
const TTL_MS: u64 = 1500;
const GRACE_MS: u64 = 200;
/// Bound on a first election, process start-up included, on a busy machine.
const START_BOUND: Duration = Duration::from_secs(10);
/// Bound on one step (being elected, a first write, an exit).
const STEP_BOUND: Duration = Duration::from_secs(10);
/// Bound on a successor's first write after the leader's death: the TTL
/// and a loaded machine's margin.
const HANDOVER_BOUND: Duration = Duration::from_millis(TTL_MS + 8_000);
/// Poll period of the files.
const POLL: Duration = Duration::from_millis(5);

/// One `tenure run` candidate, in a process group of its own (so that the
/// test can kill that group without killing itself); killed with its
/// command's group on drop.
struct Candidate {
    tag: String,
    child: Child,
    err: PathBuf,
    pid_file: PathBuf,
    /// The command's process group, once read.
    group: Option<Pid>,
}

impl Candidate {
    fn start(c: &TestCluster, tag: &str, log: &Path) -> Candidate {
        let endpoints = (0..c.servers.len()).map(|i| c.endpoint(i)).collect::<Vec<_>>().join(",");
        let err = c.dir.path().join(format!("{tag}.err"));
        let pid_file = c.dir.path().join(format!("{tag}.pid"));
        let script = format!(
            "echo $$ > {pid}; trap '' TERM; ( trap '' TERM; while :; do \
             echo \"{tag} $(date +%s%N)\" >> {log}; sleep 0.005; done ) & wait",
            pid = pid_file.display(),
            log = log.display()
        );
        let child = Command::new(harness::exe())
            .arg("run")
            .args(["--endpoints", &endpoints])
            .arg("--cacert")
            .arg(c.ca())
            .arg("--token-file")
            .arg(c.token_file("admin"))
            .args(["--election", "job", "--value", tag])
            .args(["--ttl-ms", &TTL_MS.to_string(), "--grace-ms", &GRACE_MS.to_string()])
            .args(["--", "bash", "-c", &script])
            .env_remove("TENURE_TOKEN")
            .env_remove("TENURE_CACERT")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(&err).unwrap())
            .process_group(0)
            .spawn()
            .expect("start tenure run");
        Candidate { tag: tag.into(), child, err, pid_file, group: None }
    }

    fn pid(&self) -> Pid {
        Pid::from_raw(self.child.id() as i32)
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.err).unwrap_or_default()
    }

    /// Waits until stderr holds `what`.
    fn wait_err(&self, what: &str, bound: Duration) {
        let until = Instant::now() + bound;
        while !self.stderr().contains(what) {
            assert!(
                Instant::now() < until,
                "{}: no {what:?} within {bound:?}: {}",
                self.tag,
                self.stderr()
            );
            std::thread::sleep(POLL);
        }
    }

    /// The guard: `tenure run`'s only child.
    fn guard(&self) -> Pid {
        let guards = processes().into_iter().filter(|p| p.ppid == self.pid().as_raw());
        let guards: Vec<Proc> = guards.collect();
        assert_eq!(guards.len(), 1, "{}: children {guards:?}", self.tag);
        Pid::from_raw(guards[0].pid)
    }

    /// Reads the command's process group (the command wrote its pid).
    fn read_group(&mut self) -> Pid {
        let until = Instant::now() + STEP_BOUND;
        let pid: i32 = loop {
            let text = std::fs::read_to_string(&self.pid_file).unwrap_or_default();
            if let Ok(pid) = text.trim().parse() {
                break pid;
            }
            assert!(Instant::now() < until, "{}: the command wrote no pid", self.tag);
            std::thread::sleep(POLL);
        };
        let me = processes().into_iter().find(|p| p.pid == pid).expect("the command runs");
        assert_ne!(me.pgrp, self.pid().as_raw(), "the command is not in tenure run's group");
        self.group = Some(Pid::from_raw(me.pgrp));
        Pid::from_raw(me.pgrp)
    }

    fn exit_code(&mut self, bound: Duration) -> Option<i32> {
        let until = Instant::now() + bound;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            assert!(Instant::now() < until, "{} did not exit: {}", self.tag, self.stderr());
            std::thread::sleep(POLL);
        }
    }
}

impl Drop for Candidate {
    fn drop(&mut self) {
        let _ = killpg(self.pid(), Signal::SIGKILL);
        if let Some(group) = self.group {
            let _ = killpg(group, Signal::SIGKILL);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A process as /proc tells it.
#[derive(Debug, Clone)]
struct Proc {
    pid: i32,
    ppid: i32,
    pgrp: i32,
    state: String,
}

/// Every process now.
fn processes() -> Vec<Proc> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        let Some((_, rest)) = stat.rsplit_once(')') else { continue };
        let f: Vec<&str> = rest.split_whitespace().collect();
        out.push(Proc {
            pid,
            state: f[0].to_string(),
            ppid: f[1].parse().unwrap(),
            pgrp: f[2].parse().unwrap(),
        });
    }
    out
}

/// The live (not zombie) processes of group `pgid`.
fn live_in_group(pgid: Pid) -> Vec<Proc> {
    processes().into_iter().filter(|p| p.pgrp == pgid.as_raw() && p.state != "Z").collect()
}

/// The timestamps of `tag`'s lines in `log`.
fn stamps(log: &Path, tag: &str) -> Vec<u128> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.strip_prefix(tag)?.trim().parse().ok())
        .collect()
}

/// Waits until `tag` wrote to `log`.
fn wait_writes(log: &Path, tag: &str, bound: Duration) -> Duration {
    let start = Instant::now();
    while stamps(log, tag).is_empty() {
        assert!(start.elapsed() < bound, "{tag} wrote nothing within {bound:?}");
        std::thread::sleep(POLL);
    }
    start.elapsed()
}

/// How the leader is killed.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Death {
    GuardAlone,
    RunAlone,
    RunsGroup,
    BothPids,
    /// The guard SIGSTOPped, then `tenure run` told to stop (SIGTERM): the
    /// guard cannot stop the command, `tenure run` must.
    GuardStopped,
}

async fn killed(death: Death) {
    let _serial = serial().await;
    let c = TestCluster::start(3, HEARTBEAT_MS, TIMEOUT_MS);
    c.wait_agreement(&[0, 1, 2], START_BOUND).await;
    let log = c.dir.path().join("resource.log");
    let mut a = Candidate::start(&c, "A", &log);
    a.wait_err("leading job", START_BOUND);
    wait_writes(&log, "A", STEP_BOUND);
    let group = a.read_group();
    let guard = a.guard();
    let mut b = Candidate::start(&c, "B", &log);
    b.wait_err("campaigning in job", STEP_BOUND);

    match death {
        Death::GuardAlone => kill(guard, Signal::SIGKILL).unwrap(),
        Death::RunAlone => kill(a.pid(), Signal::SIGKILL).unwrap(),
        Death::RunsGroup => killpg(a.pid(), Signal::SIGKILL).unwrap(),
        Death::BothPids => {
            kill(a.pid(), Signal::SIGKILL).unwrap();
            kill(guard, Signal::SIGKILL).unwrap();
        }
        Death::GuardStopped => {
            kill(guard, Signal::SIGSTOP).unwrap();
            kill(a.pid(), Signal::SIGTERM).unwrap();
        }
    }
    let took = wait_writes(&log, "B", HANDOVER_BOUND);
    // At the successor's first write: nothing of the old command runs.
    let left = live_in_group(group);
    b.read_group();
    // And nothing of it wrote after the successor's first line (a little
    // later, for a line on its way).
    std::thread::sleep(Duration::from_millis(200));
    let (a_stamps, b_stamps) = (stamps(&log, "A"), stamps(&log, "B"));
    let last_a = *a_stamps.iter().max().unwrap();
    let first_b = *b_stamps.iter().min().unwrap();
    let after = a_stamps.iter().filter(|&&t| t > first_b).count();
    assert!(
        last_a < first_b && left.is_empty(),
        "{death:?}: {after} lines by the old token after the successor's first line; the old \
         command's group at the successor's first write: {left:?}"
    );
    eprintln!(
        "{death:?}: the successor wrote {took:?} after the kill; the old command's last write \
         {} ms before its first",
        (first_b - last_a) / 1_000_000
    );
    if death == Death::GuardAlone {
        // `tenure run` says what happened, resigned (the successor leads at
        // once, not after the TTL) and exits non-zero.
        assert_ne!(a.exit_code(STEP_BOUND), Some(0), "{}", a.stderr());
        let text = a.stderr();
        assert!(text.contains("the guard died (signal 9); the command's process group"), "{text}");
        assert!(took < Duration::from_millis(TTL_MS), "a resignation hands over at once: {took:?}");
    }
    if death == Death::GuardStopped {
        // The grace, the guard's lateness, the group's death, the
        // resignation: well under the TTL.
        assert_ne!(a.exit_code(STEP_BOUND), Some(0), "{}", a.stderr());
        let text = a.stderr();
        assert!(text.contains("the guard did not exit") && text.contains("was killed"), "{text}");
        assert!(took < Duration::from_millis(TTL_MS), "{took:?}");
    }
    kill(b.pid(), Signal::SIGTERM).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_guard_stops_the_commands_group_and_resigns() {
    killed(Death::GuardAlone).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_run_has_its_commands_group_stopped_by_the_guard() {
    killed(Death::RunAlone).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_process_group_of_run_and_guard_stops_the_commands_group() {
    killed(Death::RunsGroup).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_run_and_guard_pids_stop_the_commands_group() {
    killed(Death::BothPids).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_guard_does_not_keep_the_command_running_after_a_stop() {
    killed(Death::GuardStopped).await;
}
