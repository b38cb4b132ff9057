//! One child process with its log file, killed and reaped when dropped; free
//! loopback ports; temporary directories.

use crate::error::Error;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Lines of each process's log shown when a run fails.
pub const LOG_TAIL_LINES: usize = 30;
/// How often a process is checked while waiting for it to exit.
const EXIT_POLL: Duration = Duration::from_millis(1);

/// One child process with its log file; killed (and reaped) when dropped.
#[derive(Debug)]
pub struct Proc {
    /// Name used in messages ("node 2", "etcd n2").
    pub name: String,
    /// The file its stdout and stderr are appended to.
    pub log: PathBuf,
    /// Whether the child leads a process group of its own.
    own_group: bool,
    child: Option<Child>,
}

/// The child gets SIGKILL when the parent dies, whatever killed it: a
/// child of its own process group is out of reach of the terminal's and a
/// test runner's signals, and the parent's drop guards do not run at a
/// SIGKILL. (Linux sends it when the thread that started the child ends:
/// `tenure demo` and `tenure bench` start their servers from the
/// runtime's threads, which live as long as the process.)
fn die_with_parent(command: &mut Command) {
    let parent = Pid::this();
    // SAFETY: between fork and exec the closure makes only system calls
    // (prctl, getppid), both async-signal-safe; it allocates nothing and
    // takes no lock.
    unsafe {
        command.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
            // The parent died before the prctl: no signal will come.
            if nix::unistd::getppid() != parent {
                return Err(std::io::Error::other("the parent died"));
            }
            Ok(())
        });
    }
}

impl Proc {
    /// A process slot that is not running yet. Its child will lead a process
    /// group of its own: the terminal's Ctrl-C then reaches only the parent,
    /// which stops the children itself (`tenure demo`, `tenure bench`).
    pub fn new(name: String, log: PathBuf) -> Self {
        Proc { name, log, own_group: true, child: None }
    }

    /// A slot whose child stays in the parent's process group: a Ctrl-C in
    /// the terminal (or a test runner killed with its group) reaches it too.
    /// For tests, whose drop guards do not run when the runner is killed.
    pub fn in_parent_group(name: String, log: PathBuf) -> Self {
        Proc { name, log, own_group: false, child: None }
    }

    /// Starts `command` in this slot, output appended to the log, stdin null.
    pub fn spawn(&mut self, mut command: Command) -> Result<(), Error> {
        if self.child.is_some() {
            return Err(Error::AlreadyRunning(self.name.clone()));
        }
        let log = File::options()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(Error::file("cannot open", &self.log))?;
        let err = log.try_clone().map_err(Error::file("cannot open", &self.log))?;
        command.stdin(Stdio::null()).stdout(log).stderr(err);
        if self.own_group {
            command.process_group(0);
            die_with_parent(&mut command);
        }
        let child =
            command.spawn().map_err(|source| Error::Spawn { name: self.name.clone(), source })?;
        self.child = Some(child);
        Ok(())
    }

    /// True while the child runs (or is stopped), until it is reaped.
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// The child's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Sends `signal` to the child.
    pub fn signal(&self, signal: Signal) -> Result<(), Error> {
        let pid = self.pid().ok_or_else(|| Error::NotRunning(self.name.clone()))?;
        let pid = Pid::from_raw(pid as i32);
        kill(pid, signal).map_err(|source| Error::Signal {
            name: self.name.clone(),
            signal,
            source,
        })
    }

    /// The child's exit status if it has exited (then the slot is free).
    pub fn try_wait(&mut self) -> Result<Option<ExitStatus>, Error> {
        let name = &self.name;
        let child = self.child.as_mut().ok_or_else(|| Error::NotRunning(name.clone()))?;
        let status = child.try_wait().map_err(Error::io(format!("cannot wait for {name}")))?;
        if status.is_some() {
            self.child = None;
        }
        Ok(status)
    }

    /// Waits (bounded) for the child to exit, on an async runtime.
    pub async fn wait_exit(&mut self, timeout: Duration) -> Result<ExitStatus, Error> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.try_wait()? {
                return Ok(status);
            }
            if Instant::now() > deadline {
                return Err(Error::Timeout { name: self.name.clone(), timeout });
            }
            tokio::time::sleep(EXIT_POLL).await;
        }
    }

    /// Waits (bounded) for the child to exit, blocking the thread.
    pub fn wait_exit_blocking(&mut self, timeout: Duration) -> Result<ExitStatus, Error> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.try_wait()? {
                return Ok(status);
            }
            if Instant::now() > deadline {
                return Err(Error::Timeout { name: self.name.clone(), timeout });
            }
            std::thread::sleep(EXIT_POLL);
        }
    }

    /// SIGKILLs the child (a stopped one too) and reaps it; nothing if it
    /// is not running.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            // A stopped process dies of SIGKILL too; SIGCONT first anyway so
            // that nothing lingers half-stopped if the kill is refused.
            let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGCONT);
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The whole log (empty if it cannot be read).
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The last `lines` lines of the log, headed by the name and path.
    pub fn log_tail(&self, lines: usize) -> String {
        let all: Vec<String> = match File::open(&self.log) {
            Ok(f) => BufReader::new(f).lines().map_while(Result::ok).collect(),
            Err(_) => Vec::new(),
        };
        let mut out = format!("--- {} ({}) ---\n", self.name, self.log.display());
        for l in &all[all.len().saturating_sub(lines)..] {
            out.push_str(l);
            out.push('\n');
        }
        out
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Distinct free loopback ports: all listeners are held until every port is picked.
pub fn free_ports(n: usize) -> Result<Vec<u16>, Error> {
    let listeners = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<Vec<_>, _>>()
        .map_err(Error::io("cannot find free loopback ports"))?;
    listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect::<Result<_, _>>()
        .map_err(Error::io("cannot find free loopback ports"))
}

/// A temporary directory named `prefix`, this process's id, `-` and a
/// random suffix, removed on drop. A process killed by SIGKILL (or a test
/// killed by a timeout) runs no drop and leaves its directory, with the
/// CA key and the API token the demo keeps there: so first the directories
/// of the same prefix whose process is gone are removed.
pub fn temp_dir(prefix: &str) -> Result<tempfile::TempDir, Error> {
    remove_stale_temp_dirs(&std::env::temp_dir(), prefix);
    tempfile::Builder::new()
        .prefix(&format!("{prefix}{}-", std::process::id()))
        .tempdir()
        .map_err(Error::io("cannot create a temporary directory"))
}

/// Removes the directories in `parent` named `prefix`, a process id and
/// `-`, whose process is gone (a directory of another name, or of a live
/// process, is left alone).
pub fn remove_stale_temp_dirs(parent: &Path, prefix: &str) {
    let Ok(entries) = std::fs::read_dir(parent) else { return };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(prefix) else { continue };
        let Some((pid, _)) = rest.split_once('-') else { continue };
        let Ok(pid) = pid.parse::<u32>() else { continue };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The directory of a process that is gone is removed at the next
    /// `temp_dir` of its prefix; a live process's, and others, stay.
    #[test]
    fn a_dead_process_s_temporary_directory_is_removed_at_the_next() {
        let parent = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let prefix = "tenure-stale-test-";
        let name = |pid: u32| parent.path().join(format!("{prefix}{pid}-abc"));
        for dir in [name(dead), name(std::process::id()), parent.path().join("other-1-x")] {
            std::fs::create_dir(&dir).unwrap();
            std::fs::write(dir.join("api.token"), "secret").unwrap();
        }
        remove_stale_temp_dirs(parent.path(), prefix);
        assert!(!name(dead).exists(), "a dead process's directory stays");
        assert!(name(std::process::id()).exists() && parent.path().join("other-1-x").exists());
        let dir = temp_dir(prefix).unwrap();
        let shown = dir.path().file_name().unwrap().to_string_lossy().into_owned();
        assert!(shown.starts_with(&format!("{prefix}{}-", std::process::id())), "{shown}");
    }

    #[test]
    fn free_ports_are_distinct() {
        let mut ports = free_ports(8).unwrap();
        ports.sort_unstable();
        ports.dedup();
        assert_eq!(ports.len(), 8);
    }

    #[tokio::test]
    async fn a_proc_is_killed_on_drop_and_reports_its_exit() {
        let dir = temp_dir("tenure-proc-test-").unwrap();
        let mut p = Proc::new("sleeper".into(), dir.path().join("sleeper.log"));
        let mut c = Command::new("sleep");
        c.arg("30");
        p.spawn(c).unwrap();
        assert!(matches!(p.spawn(Command::new("true")), Err(Error::AlreadyRunning(_))));
        p.signal(Signal::SIGTERM).unwrap();
        let status = p.wait_exit(Duration::from_secs(5)).await.unwrap();
        assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(15));
        assert!(!p.is_running(), "an exited child leaves its slot free");
        assert!(matches!(p.signal(Signal::SIGTERM), Err(Error::NotRunning(_))));

        let mut c = Command::new("sleep");
        c.arg("30");
        p.spawn(c).unwrap();
        let pid = Pid::from_raw(p.pid().unwrap() as i32);
        p.signal(Signal::SIGSTOP).unwrap();
        drop(p);
        // The (stopped) child is killed and reaped on drop, so its pid no longer exists.
        assert!(kill(pid, None).is_err());
    }

    #[test]
    fn a_blocking_wait_gives_up_at_its_bound_and_the_log_tail_is_the_last_lines() {
        let dir = temp_dir("tenure-proc-test-").unwrap();
        let mut p = Proc::in_parent_group("talker".into(), dir.path().join("talker.log"));
        let mut c = Command::new("sh");
        c.args(["-c", "seq 1 100; exec sleep 30"]);
        p.spawn(c).unwrap();
        let err = p.wait_exit_blocking(Duration::from_millis(50)).unwrap_err();
        assert!(matches!(err, Error::Timeout { .. }), "{err}");
        let since = Instant::now();
        while !p.log_text().contains("100\n") && since.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(EXIT_POLL);
        }
        let tail = p.log_tail(3);
        assert!(tail.ends_with("98\n99\n100\n"), "{tail}");
        p.kill();
        assert!(!p.is_running());
    }
}
