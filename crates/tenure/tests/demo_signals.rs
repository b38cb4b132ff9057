//! `tenure demo` stopped from outside: its servers lead process groups of
//! their own (a terminal's Ctrl-C reaches only the demo, which stops them
//! in order), so nothing but the demo itself can stop them. SIGTERM stops
//! the demo and its servers and removes its directory; SIGKILL, which no
//! handler sees, still takes the servers with it (the kernel's
//! parent-death signal). `tenure bench` starts its servers the same way
//! (`tenure_launch::Proc`).

mod harness;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long the demo may take to start its three servers.
const START_BOUND: Duration = Duration::from_secs(60);
/// How long the servers may outlive the demo.
const STOP_BOUND: Duration = Duration::from_secs(10);

/// A demo process, killed (with whatever it left, its directory too) if
/// the test fails.
struct Demo {
    child: Child,
    servers: Vec<i32>,
    dir: Option<PathBuf>,
}

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        for &pid in &self.servers {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// `(pid, command line)` of the live children of `parent` (zombies are
/// dead: in a container nothing may reap an orphan's zombie).
fn children(parent: i32) -> Vec<(i32, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // pid (comm) state ppid ...: comm may hold spaces, so split after ')'.
        let Some((_, rest)) = stat.rsplit_once(')') else { continue };
        let mut fields = rest.split_whitespace();
        let (state, ppid) = (fields.next(), fields.next().and_then(|p| p.parse::<i32>().ok()));
        if ppid == Some(parent) && state != Some("Z") {
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            found.push((pid, cmdline));
        }
    }
    found
}

/// Whether `pid` is gone (or a zombie nobody reaps).
fn gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => {
            stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
        }
    }
}

/// Starts a demo and waits until its three servers run; returns it and
/// the directory they keep their data in.
fn start_demo() -> (Demo, PathBuf) {
    let child = Command::new(harness::exe())
        .args(["demo", "--duration", "120"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("tenure demo starts");
    let mut demo = Demo { child, servers: Vec::new(), dir: None };
    let since = Instant::now();
    loop {
        let servers: Vec<(i32, String)> = children(demo.child.id() as i32)
            .into_iter()
            .filter(|(_, cmd)| cmd.contains(" server "))
            .collect();
        if servers.len() == 3 {
            demo.servers = servers.iter().map(|(pid, _)| *pid).collect();
            let cmd = &servers[0].1;
            let dir = cmd
                .split_whitespace()
                .skip_while(|a| *a != "--data-dir")
                .nth(1)
                .map(PathBuf::from)
                .and_then(|d| {
                    d.ancestors()
                        .find(|a| a.parent() == Some(&std::env::temp_dir()))
                        .map(PathBuf::from)
                })
                .unwrap_or_else(|| panic!("no data directory in {cmd}"));
            demo.dir = Some(dir.clone());
            return (demo, dir);
        }
        if let Ok(Some(status)) = demo.child.try_wait() {
            panic!("the demo exited before its servers ran: {status}");
        }
        assert!(since.elapsed() < START_BOUND, "the demo's servers did not start: {servers:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until every server of `demo` is gone; panics naming the rest.
fn wait_servers_gone(demo: &Demo, after: &str) {
    let since = Instant::now();
    while !demo.servers.iter().all(|&p| gone(p)) {
        let left: Vec<i32> = demo.servers.iter().copied().filter(|&p| !gone(p)).collect();
        assert!(
            since.elapsed() < STOP_BOUND,
            "servers {left:?} still run {STOP_BOUND:?} after {after}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sigterm_stops_the_demo_its_servers_and_removes_its_directory() {
    let (mut demo, dir) = start_demo();
    assert!(dir.exists(), "{}", dir.display());
    kill(Pid::from_raw(demo.child.id() as i32), Signal::SIGTERM).unwrap();
    let since = Instant::now();
    let status = loop {
        if let Some(status) = demo.child.try_wait().unwrap() {
            break status;
        }
        assert!(since.elapsed() < STOP_BOUND, "the demo did not stop at SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(130), "{status:?}");
    wait_servers_gone(&demo, "the demo's SIGTERM");
    assert!(!dir.exists(), "the demo left {}", dir.display());
}

#[test]
fn sigkill_of_the_demo_takes_its_servers_with_it() {
    let (mut demo, dir) = start_demo();
    demo.child.kill().unwrap();
    let status = demo.child.wait().unwrap();
    assert_eq!(status.signal(), Some(9), "{status:?}");
    wait_servers_gone(&demo, "the demo's SIGKILL");
    // No handler ran: the directory is left (removed on drop here; by the
    // next demo otherwise: `tenure_launch::temp_dir` removes those of
    // processes that are gone).
    assert!(dir.exists(), "{}", dir.display());
}
