//! The member processes of `tenure bench partitions`, seen from the bench:
//! starting and stopping them, reading their lines, and the record of who
//! worked on which partition from when to when ([`Book`]), with the checks
//! of fencing (no two holders at overlapping times, epochs strictly rising
//! per partition) and the time each moved partition had no owner.
//!
//! Each member is a child process in a process group of its own (a Ctrl-C
//! in the terminal reaches only the bench, which stops them), killed when
//! dropped (`kill_on_drop`), and it exits by itself when the bench is gone
//! (see `partitions_member`).

use super::partitions_member::{now_us, Line, What};
use anyhow::{bail, Context};
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// Lines of a member's output kept for an error message.
const KEPT_LINES: usize = 20;
/// Lines of a member's stderr shown in an error message.
const STDERR_LINES: usize = 20;
/// How long a member stopped by the bench may take to exit.
const EXIT_BOUND: Duration = Duration::from_secs(10);

/// One stretch of work of one member on one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) struct Hold {
    /// The member (its index in the fleet).
    pub(crate) member: usize,
    /// The grant's epoch (fencing token).
    pub(crate) epoch: u64,
    /// Its `assigned` line's time, µs.
    pub(crate) start_us: i64,
    /// When its work stopped (its `stopped`, `leaving` or `lost` line, or
    /// its kill), µs; None while it works.
    pub(crate) end_us: Option<i64>,
    /// When the cluster accepted its release, µs (its `released` line).
    pub(crate) released_us: Option<i64>,
}

/// A partition that a member started working on, and the stretch before
/// it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Move {
    pub(crate) partition: u32,
    /// The member that worked on it before, if any did.
    pub(crate) from: Option<usize>,
    /// The member that works on it now.
    pub(crate) to: usize,
    /// From the end of the earlier work to the start of this one, ms (None
    /// for a first grant).
    pub(crate) gap_ms: Option<f64>,
    /// From the end of the earlier work to the cluster's acceptance of its
    /// release, ms (None when it was not released).
    pub(crate) release_ms: Option<f64>,
}

/// Who worked on which partition, from when to when.
#[derive(Debug)]
pub(crate) struct Book {
    /// Per partition, its holds in the order their lines arrived.
    holds: Vec<Vec<Hold>>,
}

impl Book {
    pub(crate) fn new(partitions: u32) -> Book {
        Book { holds: vec![Vec::new(); partitions as usize] }
    }

    fn partition(&mut self, p: u32) -> anyhow::Result<&mut Vec<Hold>> {
        let n = self.holds.len();
        self.holds.get_mut(p as usize).with_context(|| format!("partition {p} of {n}?"))
    }

    /// `member` works on `p` from `at`.
    pub(crate) fn assigned(
        &mut self,
        member: usize,
        p: u32,
        epoch: u64,
        at: i64,
    ) -> anyhow::Result<()> {
        let hold = Hold { member, epoch, start_us: at, end_us: None, released_us: None };
        self.partition(p)?.push(hold);
        Ok(())
    }

    /// `member`'s work on `p` at `epoch` stopped at `at` (if it was not
    /// over already).
    pub(crate) fn stopped(
        &mut self,
        member: usize,
        p: u32,
        epoch: u64,
        at: i64,
    ) -> anyhow::Result<()> {
        for h in self.partition(p)?.iter_mut() {
            if h.member == member && h.epoch == epoch && h.end_us.is_none() {
                h.end_us = Some(at.max(h.start_us));
            }
        }
        Ok(())
    }

    /// The cluster accepted `member`'s release of `p` at `epoch` at `at`.
    pub(crate) fn released(
        &mut self,
        member: usize,
        p: u32,
        epoch: u64,
        at: i64,
    ) -> anyhow::Result<()> {
        for h in self.partition(p)?.iter_mut() {
            if h.member == member && h.epoch == epoch {
                h.released_us = Some(at);
            }
        }
        Ok(())
    }

    /// Every work of `member` still going stopped at `at` (or at its
    /// start, for one that started later: a line printed between the time
    /// the bench took and its kill).
    pub(crate) fn end_all(&mut self, member: usize, at: i64) {
        for h in self.holds.iter_mut().flatten() {
            if h.member == member && h.end_us.is_none() {
                h.end_us = Some(at.max(h.start_us));
            }
        }
    }

    /// Partitions.
    pub(crate) fn len(&self) -> u32 {
        self.holds.len() as u32
    }

    /// Grants seen in all.
    pub(crate) fn grants(&self) -> usize {
        self.holds.iter().map(Vec::len).sum()
    }

    /// The member working on `p` now, when exactly one is.
    pub(crate) fn holder(&self, p: u32) -> Option<Hold> {
        let mut open = self.holds.get(p as usize)?.iter().filter(|h| h.end_us.is_none());
        match (open.next(), open.next()) {
            (Some(h), None) => Some(*h),
            _ => None,
        }
    }

    /// Whether every partition has exactly one member working on it.
    pub(crate) fn fully_held(&self) -> bool {
        (0..self.len()).all(|p| self.holder(p).is_some())
    }

    /// Partitions each member works on now (members working on none left
    /// out).
    pub(crate) fn counts(&self) -> BTreeMap<usize, usize> {
        let mut counts = BTreeMap::new();
        for h in self.holds.iter().flatten().filter(|h| h.end_us.is_none()) {
            *counts.entry(h.member).or_insert(0) += 1;
        }
        counts
    }

    /// The partitions `member` works on now.
    pub(crate) fn held_by(&self, member: usize) -> Vec<u32> {
        (0..self.len())
            .filter(|&p| {
                self.holds[p as usize].iter().any(|h| h.member == member && h.end_us.is_none())
            })
            .collect()
    }

    /// Every partition's holds by start time.
    fn sorted(&self) -> impl Iterator<Item = (u32, Vec<Hold>)> + '_ {
        self.holds.iter().enumerate().map(|(p, holds)| {
            let mut holds = holds.clone();
            holds.sort_by_key(|h| (h.start_us, h.epoch));
            (p as u32, holds)
        })
    }

    /// Broken fencing: two members working on a partition at overlapping
    /// times, or an epoch that did not rise; empty when all is well.
    pub(crate) fn violations(&self, name: impl Fn(usize) -> String) -> Vec<String> {
        let mut out = Vec::new();
        for (p, holds) in self.sorted() {
            for pair in holds.windows(2) {
                let (a, b) = (pair[0], pair[1]);
                match a.end_us {
                    None => out.push(format!(
                        "partition {p}: {} (epoch {}) still worked on it when {} (epoch {}) started at {} µs",
                        name(a.member), a.epoch, name(b.member), b.epoch, b.start_us
                    )),
                    Some(end) if end > b.start_us => out.push(format!(
                        "partition {p}: {} (epoch {}) worked on it until {end} µs, {} µs after {} (epoch {}) started",
                        name(a.member), a.epoch, end - b.start_us, name(b.member), b.epoch
                    )),
                    Some(_) => {}
                }
                if b.epoch <= a.epoch {
                    out.push(format!(
                        "partition {p}: epoch {} of {} after epoch {} of {}: not rising",
                        b.epoch,
                        name(b.member),
                        a.epoch,
                        name(a.member)
                    ));
                }
            }
        }
        out
    }

    /// The works that started at or after `since` (µs), each with the one
    /// before it.
    pub(crate) fn moves_since(&self, since: i64) -> Vec<Move> {
        let mut out = Vec::new();
        for (p, holds) in self.sorted() {
            for (i, h) in holds.iter().enumerate().filter(|(_, h)| h.start_us >= since) {
                let before = i.checked_sub(1).map(|j| holds[j]);
                out.push(Move {
                    partition: p,
                    from: before.map(|b| b.member),
                    to: h.member,
                    gap_ms: before
                        .and_then(|b| b.end_us)
                        .map(|end| (h.start_us - end) as f64 / 1000.0),
                    release_ms: before
                        .and_then(|b| Some((b.released_us? - b.end_us?) as f64 / 1000.0)),
                });
            }
        }
        out
    }
}

/// One member process.
#[derive(Debug)]
pub(crate) struct Member {
    /// `m0`, `m1`, ...
    pub(crate) name: String,
    child: Option<Child>,
    /// Its session (lease) id, once it said it.
    pub(crate) session: Option<u64>,
    /// It joined the group (tenure) or campaigned in every election (etcd).
    pub(crate) ready: bool,
    /// When the bench stopped it (SIGTERM or SIGKILL): its exit is expected.
    stopped_at: Option<i64>,
    /// When the bench killed it.
    killed_at: Option<i64>,
    /// Its output ended.
    exited: bool,
    /// Its `leaving` and `left` lines' times, µs.
    pub(crate) leaving_at: Option<i64>,
    pub(crate) left_at: Option<i64>,
    /// Its last lines.
    recent: VecDeque<String>,
    /// Its stderr.
    log: PathBuf,
}

/// What a member's reader sends.
#[derive(Debug)]
enum Msg {
    Line(String),
    Eof,
}

/// The member processes of one run.
pub(crate) struct Fleet {
    exe: PathBuf,
    /// The arguments every member gets (after the subcommand).
    args: Vec<OsString>,
    envs: Vec<(&'static str, OsString)>,
    pub(crate) members: Vec<Member>,
    tx: mpsc::UnboundedSender<(usize, Msg)>,
    rx: mpsc::UnboundedReceiver<(usize, Msg)>,
    pub(crate) book: Book,
    /// `error` lines the members printed (retried failures), by member.
    pub(crate) errors: Vec<(String, String)>,
    /// Releases the cluster accepted.
    pub(crate) releases: usize,
    /// Members whose session was lost (the bench fails when one is), with why.
    pub(crate) lost: Vec<(String, String)>,
    // Declared last: the members' stderr files, removed after they are gone.
    dir: tempfile::TempDir,
}

/// The hidden subcommand that runs a member.
pub(crate) const MEMBER_COMMAND: &str = "bench-partitions-member";

impl Fleet {
    /// A fleet of members of `partitions` partitions, each started as
    /// `tenure bench-partitions-member ARGS --name mN` with `envs`.
    pub(crate) fn new(
        args: Vec<OsString>,
        envs: Vec<(&'static str, OsString)>,
        partitions: u32,
    ) -> anyhow::Result<Fleet> {
        let exe = std::env::current_exe().context("cannot find the tenure executable")?;
        let dir = tenure_launch::temp_dir("tenure-bench-partitions-")?;
        let (tx, rx) = mpsc::unbounded_channel();
        Ok(Fleet {
            exe,
            args,
            envs,
            members: Vec::new(),
            tx,
            rx,
            book: Book::new(partitions),
            errors: Vec::new(),
            releases: 0,
            lost: Vec::new(),
            dir,
        })
    }

    /// Starts one more member; its index.
    pub(crate) fn spawn(&mut self) -> anyhow::Result<usize> {
        let i = self.members.len();
        let name = format!("m{i}");
        let log = self.dir.path().join(format!("{name}.log"));
        let stderr = std::fs::File::create(&log)
            .with_context(|| format!("cannot create {}", log.display()))?;
        let mut cmd = Command::new(&self.exe);
        cmd.arg(MEMBER_COMMAND).args(&self.args).arg("--name").arg(&name);
        // Only what the bench says: not the bench's own CA or token.
        cmd.env_remove(tenure_client::CACERT_ENV).env_remove(tenure_client::TOKEN_ENV);
        for (k, v) in &self.envs {
            cmd.env(k, v);
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .process_group(0)
            .kill_on_drop(true);
        let mut child = cmd.spawn().with_context(|| format!("cannot start member {name}"))?;
        let stdout = child.stdout.take().context("stdout is piped")?;
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if tx.send((i, Msg::Line(line))).is_err() {
                    return;
                }
            }
            let _ = tx.send((i, Msg::Eof));
        });
        self.members.push(Member {
            name,
            child: Some(child),
            session: None,
            ready: false,
            stopped_at: None,
            killed_at: None,
            exited: false,
            leaving_at: None,
            left_at: None,
            recent: VecDeque::new(),
            log,
        });
        Ok(i)
    }

    /// The members that run and were not stopped by the bench.
    pub(crate) fn running(&self) -> Vec<usize> {
        (0..self.members.len())
            .filter(|&i| self.members[i].stopped_at.is_none() && !self.members[i].exited)
            .collect()
    }

    /// The running members that are ready (joined, or campaigned everywhere).
    pub(crate) fn live(&self) -> Vec<usize> {
        self.running().into_iter().filter(|&i| self.members[i].ready).collect()
    }

    /// Member `i`'s name.
    pub(crate) fn name(&self, i: usize) -> String {
        self.members.get(i).map_or_else(|| format!("m{i}?"), |m| m.name.clone())
    }

    /// Partitions each of `members` works on now (0 for those with none).
    pub(crate) fn counts_of(&self, members: &[usize]) -> Vec<usize> {
        let counts = self.book.counts();
        members.iter().map(|m| counts.get(m).copied().unwrap_or(0)).collect()
    }

    /// Whether every partition is worked on by exactly one live member,
    /// and each live member works on `floor(N/M)` or `ceil(N/M)` of them.
    pub(crate) fn balanced(&self) -> bool {
        let live = self.live();
        if live.is_empty() || !self.book.fully_held() {
            return false;
        }
        let counts = self.book.counts();
        if counts.keys().any(|m| !live.contains(m)) {
            return false;
        }
        let (n, m) = (self.book.len() as usize, live.len());
        let (floor, ceil) = (n / m, n.div_ceil(m));
        self.counts_of(&live).iter().all(|c| (floor..=ceil).contains(c))
    }

    /// SIGKILLs member `i`; the time just before, µs (its work stops there).
    pub(crate) fn kill(&mut self, i: usize) -> anyhow::Result<i64> {
        let m = &mut self.members[i];
        let child = m.child.as_mut().with_context(|| format!("{} is not running", m.name))?;
        let at = now_us();
        child.start_kill().with_context(|| format!("cannot kill {}", m.name))?;
        m.stopped_at = Some(at);
        m.killed_at = Some(at);
        self.book.end_all(i, at);
        Ok(at)
    }

    /// SIGTERMs member `i`; the time just before, µs.
    pub(crate) fn terminate(&mut self, i: usize) -> anyhow::Result<i64> {
        let m = &mut self.members[i];
        let pid = m.child.as_ref().and_then(Child::id);
        let pid = pid.with_context(|| format!("{} is not running", m.name))?;
        let pid = nix::unistd::Pid::from_raw(i32::try_from(pid).context("pid")?);
        let at = now_us();
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM)
            .with_context(|| format!("cannot signal {}", m.name))?;
        m.stopped_at = Some(at);
        Ok(at)
    }

    /// Waits for member `i` to exit (as its supervisor would) and reaps
    /// it; its exit status.
    pub(crate) async fn reap(&mut self, i: usize) -> anyhow::Result<std::process::ExitStatus> {
        let m = &mut self.members[i];
        let child = m.child.as_mut().with_context(|| format!("{} is not running", m.name))?;
        let status = tokio::time::timeout(EXIT_BOUND, child.wait())
            .await
            .with_context(|| format!("{} did not exit within {EXIT_BOUND:?}", m.name))?
            .with_context(|| format!("cannot wait for {}", m.name))?;
        m.child = None;
        Ok(status)
    }

    /// Reads the members' lines until `done` holds (checked before each
    /// wait), for at most `bound`; `what` names the wait in the error.
    pub(crate) async fn wait_for(
        &mut self,
        bound: Duration,
        what: &str,
        done: impl Fn(&Fleet) -> bool,
    ) -> anyhow::Result<()> {
        let deadline = Instant::now() + bound;
        while !done(self) {
            match tokio::time::timeout_at(deadline, self.rx.recv()).await {
                Ok(Some((i, msg))) => self.apply(i, msg)?,
                Ok(None) => bail!("every member's output closed"),
                Err(_) => bail!("{what}: not within {bound:?}\n{}", self.state()),
            }
            // Whatever else arrived meanwhile, before judging.
            while let Ok((i, msg)) = self.rx.try_recv() {
                self.apply(i, msg)?;
            }
        }
        Ok(())
    }

    /// Reads the members' lines for `span`.
    pub(crate) async fn pump(&mut self, span: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + span;
        while let Ok(received) = tokio::time::timeout_at(deadline, self.rx.recv()).await {
            match received {
                Some((i, msg)) => self.apply(i, msg)?,
                None => bail!("every member's output closed"),
            }
        }
        Ok(())
    }

    /// Whether member `i`'s output ended.
    pub(crate) fn exited(&self, i: usize) -> bool {
        self.members[i].exited
    }

    fn apply(&mut self, i: usize, msg: Msg) -> anyhow::Result<()> {
        let text = match msg {
            Msg::Eof => {
                let m = &mut self.members[i];
                m.exited = true;
                let at = m.killed_at.unwrap_or_else(now_us);
                let expected = m.stopped_at.is_some();
                self.book.end_all(i, at);
                if !expected {
                    bail!("member {} exited by itself\n{}", self.name(i), self.tail(i));
                }
                return Ok(());
            }
            Msg::Line(text) => text,
        };
        let recent = &mut self.members[i].recent;
        if recent.len() == KEPT_LINES {
            recent.pop_front();
        }
        recent.push_back(text.clone());
        let line: Line = match text.parse() {
            Ok(line) => line,
            Err(e) => bail!("member {}: cannot read {text:?}: {e}\n{}", self.name(i), self.tail(i)),
        };
        let at = line.at_us;
        match line.what {
            What::Session(id) => self.members[i].session = Some(id),
            What::Joined | What::Campaigned(_) => self.members[i].ready = true,
            What::Assigned(p, epoch) => self.book.assigned(i, p, epoch, at)?,
            What::Stopped(p, epoch) => self.book.stopped(i, p, epoch, at)?,
            What::Revoked(..) => {}
            What::Released(p, epoch) => {
                self.releases += 1;
                self.book.released(i, p, epoch, at)?;
            }
            What::Leaving => {
                self.members[i].leaving_at = Some(at);
                self.book.end_all(i, at);
            }
            What::Left => self.members[i].left_at = Some(at),
            What::Lost(why) => {
                self.book.end_all(i, at);
                if self.members[i].stopped_at.is_none() {
                    self.lost.push((self.name(i), why.clone()));
                    bail!("member {} lost its session: {why}\n{}", self.name(i), self.tail(i));
                }
            }
            What::Error(why) => self.errors.push((self.name(i), why)),
        }
        Ok(())
    }

    /// Member `i`'s last lines and stderr, for an error message.
    pub(crate) fn tail(&self, i: usize) -> String {
        let m = &self.members[i];
        let stderr = std::fs::read_to_string(&m.log).unwrap_or_default();
        let stderr: Vec<&str> = stderr.lines().collect();
        let stderr = &stderr[stderr.len().saturating_sub(STDERR_LINES)..];
        format!(
            "--- {} stdout (last lines) ---\n{}\n--- {} stderr ({}) ---\n{}",
            m.name,
            m.recent.iter().cloned().collect::<Vec<_>>().join("\n"),
            m.name,
            m.log.display(),
            stderr.join("\n")
        )
    }

    /// What the fleet looks like now, for an error message.
    pub(crate) fn state(&self) -> String {
        let counts = self.book.counts();
        let unheld = (0..self.book.len()).filter(|&p| self.book.holder(p).is_none()).count();
        let mut out = format!("partitions without exactly one holder: {unheld}\n");
        for (i, m) in self.members.iter().enumerate() {
            out.push_str(&format!(
                "{}: session {:?}, ready {}, stopped {}, exited {}, works on {}\n",
                m.name,
                m.session,
                m.ready,
                m.stopped_at.is_some(),
                m.exited,
                counts.get(&i).copied().unwrap_or(0)
            ));
        }
        if let Some(&i) = self.running().first() {
            out.push_str(&self.tail(i));
        }
        out
    }

    /// The members' stderr files' directory.
    pub(crate) fn dir(&self) -> &Path {
        self.dir.path()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_book_finds_overlaps_falling_epochs_and_gaps() {
        let mut b = Book::new(2);
        b.assigned(0, 0, 10, 1_000).unwrap();
        b.assigned(0, 1, 11, 1_000).unwrap();
        b.stopped(0, 0, 10, 5_000).unwrap();
        b.assigned(1, 0, 12, 7_000).unwrap();
        assert!(b.violations(|m| format!("m{m}")).is_empty());
        assert_eq!(b.counts(), BTreeMap::from([(0, 1), (1, 1)]));
        assert!(b.fully_held());
        let moves = b.moves_since(6_000);
        assert_eq!(moves.len(), 1);
        assert_eq!((moves[0].from, moves[0].to, moves[0].gap_ms), (Some(0), 1, Some(2.0)));

        // Partition 1: m1 starts while m0 still works on it.
        b.assigned(1, 1, 13, 8_000).unwrap();
        assert!(!b.fully_held());
        let v = b.violations(|m| format!("m{m}"));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].contains("still worked on it"), "{v:?}");
        // m0 stopped after m1 started: still an overlap, by 500 µs.
        b.stopped(0, 1, 11, 8_500).unwrap();
        let v = b.violations(|m| format!("m{m}"));
        assert!(v[0].contains("500 µs after"), "{v:?}");

        // An epoch that does not rise.
        let mut b = Book::new(1);
        b.assigned(0, 0, 10, 1_000).unwrap();
        b.end_all(0, 2_000);
        b.assigned(1, 0, 9, 3_000).unwrap();
        let v = b.violations(|m| format!("m{m}"));
        assert!(v.len() == 1 && v[0].contains("not rising"), "{v:?}");
        assert_eq!(b.held_by(1), vec![0]);
        assert_eq!(b.grants(), 2);
    }

    #[test]
    fn a_kill_taken_before_a_late_line_never_ends_a_hold_before_it_starts() {
        let mut b = Book::new(1);
        b.assigned(0, 0, 10, 2_000).unwrap();
        b.end_all(0, 1_500);
        assert_eq!(b.holds[0][0].end_us, Some(2_000));
    }
}
