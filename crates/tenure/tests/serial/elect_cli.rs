//! `tenure elect` and `tenure run` against a cluster of real `tenure
//! server` processes (HTTPS, tokens): a resignation hands over at once, the
//! command of `tenure run` gets its election and token, a tenure failover
//! ends no application leadership, and a `tenure run` paused past its TTL
//! has its command stopped before the successor's starts.

use crate::harness::{serial, TestCluster};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStderr, ChildStdout, Command};

/// Fast timings so that tenure's own failover takes well under a second.
const HEARTBEAT_MS: u64 = 20;
const TIMEOUT_MS: u64 = 200;
/// Bound on a first election, including process start-up on a busy machine.
const START_BOUND: Duration = Duration::from_secs(10);
/// Bound on a CLI's step (being elected when no one else leads, exiting).
const STEP_BOUND: Duration = Duration::from_secs(10);
/// Bound on a handover after a graceful resignation: the resignation, the
/// waiter's wake-up and its print (milliseconds on an idle machine; the
/// tests share two cores with their servers).
const RESIGN_HANDOVER_BOUND: Duration = Duration::from_millis(1000);

/// A `tenure elect` or `tenure run` process with its output read line by line.
struct Cli {
    child: Child,
    out: Lines<BufReader<ChildStdout>>,
    err: Lines<BufReader<ChildStderr>>,
}

impl Cli {
    fn start(c: &TestCluster, args: &[&str]) -> Cli {
        let endpoints = (0..c.servers.len()).map(|i| c.endpoint(i)).collect::<Vec<_>>().join(",");
        // The cluster's flags right after the subcommand (`partitions`
        // has subcommands of its own): after `--` they would be the
        // command's.
        let head = if args[0] == "partitions" { 2 } else { 1 };
        let mut child = Command::new(crate::harness::exe())
            .args(&args[..head])
            .arg("--endpoints")
            .arg(endpoints)
            .arg("--cacert")
            .arg(c.ca())
            .arg("--token-file")
            .arg(c.token_file("admin"))
            .args(&args[head..])
            .env_remove("TENURE_TOKEN")
            .env_remove("TENURE_CACERT")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start the CLI");
        let out = BufReader::new(child.stdout.take().unwrap()).lines();
        let err = BufReader::new(child.stderr.take().unwrap()).lines();
        Cli { child, out, err }
    }

    fn pid(&self) -> Pid {
        Pid::from_raw(self.child.id().expect("running") as i32)
    }

    fn signal(&self, sig: Signal) {
        kill(self.pid(), sig).unwrap();
    }

    /// The next stdout line, within `bound`.
    async fn line(&mut self, bound: Duration) -> String {
        match tokio::time::timeout(bound, self.out.next_line()).await {
            Ok(Ok(Some(line))) => line,
            other => {
                panic!("no line within {bound:?}: {other:?}; stderr: {}", self.stderr_now().await)
            }
        }
    }

    /// The next stderr line containing `what`, within `bound`.
    async fn err_line(&mut self, what: &str, bound: Duration) -> String {
        let until = Instant::now() + bound;
        let mut skipped = Vec::new();
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, self.err.next_line()).await {
                Ok(Ok(Some(line))) if line.contains(what) => return line,
                Ok(Ok(Some(line))) => skipped.push(line),
                other => panic!(
                    "no stderr line with {what:?} within {bound:?}: {other:?}; before: {skipped:#?}"
                ),
            }
        }
    }

    /// Whatever stderr holds now (for failure messages).
    async fn stderr_now(&mut self) -> String {
        let mut text = String::new();
        while let Ok(Ok(Some(line))) =
            tokio::time::timeout(Duration::from_millis(50), self.err.next_line()).await
        {
            text.push_str(&line);
            text.push('\n');
        }
        text
    }

    async fn exit(&mut self, bound: Duration) -> ExitStatus {
        tokio::time::timeout(bound, self.child.wait()).await.expect("exits in time").unwrap()
    }

    /// The stdout line is not there within `bound`.
    async fn no_line(&mut self, bound: Duration) {
        if let Ok(line) = tokio::time::timeout(bound, self.out.next_line()).await {
            panic!("unexpected stdout: {line:?}");
        }
    }
}

/// The fencing token of an `elected NAME: fencing token T (session L)` line.
fn token_of(line: &str) -> u64 {
    let rest = line.split("fencing token ").nth(1).unwrap_or_else(|| panic!("{line}"));
    rest.split_whitespace().next().unwrap().parse().unwrap()
}

async fn cluster() -> TestCluster {
    let c = TestCluster::start(3, HEARTBEAT_MS, TIMEOUT_MS);
    c.wait_agreement(&[0, 1, 2], START_BOUND).await;
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_resigns_and_the_waiting_candidate_leads_at_once() {
    let _serial = serial().await;
    let c = cluster().await;
    let mut observer = Cli::start(&c, &["elect", "--observe", "app"]);
    assert!(observer.line(STEP_BOUND).await.contains("no leader"));

    let mut a = Cli::start(&c, &["elect", "app", "--value", "a"]);
    let first = a.line(STEP_BOUND).await;
    assert!(first.starts_with("elected app: fencing token "), "{first}");
    let t1 = token_of(&first);
    let seen = observer.line(STEP_BOUND).await;
    assert!(
        seen.contains(&format!("leader  token {t1}")) && seen.contains("value \"a\""),
        "{seen}"
    );

    let mut b = Cli::start(&c, &["elect", "app", "--value", "b"]);
    b.err_line("campaigning in app", STEP_BOUND).await;
    b.no_line(Duration::from_millis(300)).await;

    let resigned = Instant::now();
    a.signal(Signal::SIGINT);
    let second = b.line(STEP_BOUND).await;
    let handover = resigned.elapsed();
    assert_eq!(a.exit(STEP_BOUND).await.code(), Some(0));
    let t2 = token_of(&second);
    assert!(t2 > t1, "tokens only grow: {t1} then {t2}");
    assert!(handover < RESIGN_HANDOVER_BOUND, "handover took {handover:?}");
    eprintln!("handover after Ctrl-C: {handover:?}");
    let seen = observer.line(STEP_BOUND).await;
    assert!(
        seen.contains(&format!("leader  token {t2}")) && seen.contains("value \"b\""),
        "{seen}"
    );

    b.signal(Signal::SIGTERM);
    assert_eq!(b.exit(STEP_BOUND).await.code(), Some(0));
    assert!(observer.line(STEP_BOUND).await.contains("no leader"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_gives_the_command_its_election_and_token_and_exits_with_its_status() {
    let _serial = serial().await;
    let c = cluster().await;
    let file = c.dir.path().join("env.txt");
    let script = format!(
        "echo \"$TENURE_ELECTION $TENURE_FENCING_TOKEN ${{TENURE_TOKEN:-none}}\" > {}; exit 7",
        file.display()
    );
    let mut run = Cli::start(&c, &["run", "--election", "job", "--", "sh", "-c", &script]);
    let leading = run.err_line("leading job with fencing token", STEP_BOUND).await;
    assert_eq!(run.exit(STEP_BOUND).await.code(), Some(7), "{leading}");
    let text = std::fs::read_to_string(&file).unwrap();
    let fields: Vec<&str> = text.split_whitespace().collect();
    assert_eq!(fields[0], "job");
    let token: u64 = fields[1].parse().unwrap();
    assert!(leading.contains(&format!("fencing token {token} ")), "{leading} vs {text}");
    assert_eq!(fields[2], "none", "the API token is not passed to the command");

    // It resigned when the command exited: the next candidate leads at once.
    let mut next = Cli::start(&c, &["elect", "job"]);
    let line = next.line(STEP_BOUND).await;
    assert!(token_of(&line) > token, "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_says_it_resigned_on_sigterm() {
    let _serial = serial().await;
    let c = cluster().await;
    let mut run = Cli::start(&c, &["run", "--election", "job", "--", "sleep", "30"]);
    run.err_line("leading job with fencing token", STEP_BOUND).await;
    run.signal(Signal::SIGTERM);
    let line = run.err_line("resigned job", STEP_BOUND).await;
    assert!(line.contains("sleep stopped with 143"), "{line}");
    assert_eq!(run.exit(STEP_BOUND).await.code(), Some(143));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenure_failover_ends_no_application_leadership() {
    let _serial = serial().await;
    let mut c = cluster().await;
    let ttl_ms = 2000;
    let ttl = ["--ttl-ms", "2000"];
    let mut a = Cli::start(&c, &[&["elect", "app", "--value", "a"][..], &ttl].concat());
    let t1 = token_of(&a.line(STEP_BOUND).await);
    let mut b = Cli::start(&c, &[&["elect", "app", "--value", "b"][..], &ttl].concat());
    b.err_line("campaigning in app", STEP_BOUND).await;

    let (leader, term) = c.wait_agreement(&[0, 1, 2], START_BOUND).await;
    c.crash(leader);
    let rest: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    c.wait_leader(&rest, term, Instant::now(), START_BOUND).await;
    // Three TTLs: the old tenure leader's expiry clock is gone, the new one
    // granted a fresh TTL, and the holder kept renewing through it.
    b.no_line(Duration::from_millis(3 * ttl_ms)).await;
    assert!(a.child.try_wait().unwrap().is_none(), "the holder kept its leadership");

    a.signal(Signal::SIGINT);
    assert_eq!(a.exit(STEP_BOUND).await.code(), Some(0));
    let t2 = token_of(&b.line(STEP_BOUND).await);
    assert!(t2 > t1);
}

/// A command that appends `<tag> <wall-clock ns>` to `log` every 5 ms and
/// ignores SIGTERM: only the SIGKILL at the deadline stops it.
fn writer(tag: &str, log: &Path) -> String {
    format!(
        "trap '' TERM; while :; do echo \"{tag} $(date +%s%N)\" >> {}; sleep 0.005; done",
        log.display()
    )
}

/// The timestamps of `tag`'s lines in `log`.
fn stamps(log: &Path, tag: &str) -> Vec<u128> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.strip_prefix(tag)?.trim().parse().ok())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_run_has_its_command_stopped_before_the_successor_starts() {
    let _serial = serial().await;
    let c = cluster().await;
    let log = c.dir.path().join("writes.log");
    let run = |tag: &str| {
        let args = ["run", "--election", "job", "--ttl-ms", "1500", "--grace-ms", "200", "--"];
        let script = writer(tag, &log);
        Cli::start(&c, &[&args[..], &["sh", "-c", &script]].concat())
    };
    let mut a = run("A");
    a.err_line("leading job", STEP_BOUND).await;
    let mut b = run("B");
    b.err_line("campaigning in job", STEP_BOUND).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!stamps(&log, "A").is_empty(), "A's command writes");

    // Pause `tenure run` A (not its guard, not its command) past its TTL:
    // the guard alone must SIGKILL the command by the deadline.
    let paused = Instant::now();
    a.signal(Signal::SIGSTOP);
    b.err_line("leading job", STEP_BOUND).await;
    let took = paused.elapsed();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (a_stamps, b_stamps) = (stamps(&log, "A"), stamps(&log, "B"));
    let last_a = *a_stamps.iter().max().unwrap();
    let first_b = *b_stamps.iter().min().expect("B's command writes");
    assert!(
        last_a < first_b,
        "A's command wrote at {last_a}, after B's first write at {first_b} ({} µs)",
        (last_a - first_b) / 1000
    );
    eprintln!(
        "successor leads {took:?} after the pause; A's last write {} ms before B's first",
        (first_b - last_a) / 1_000_000
    );

    // Resumed, A finds out and exits with the loss status.
    a.signal(Signal::SIGCONT);
    a.err_line("lost leadership of job", STEP_BOUND).await;
    assert_eq!(a.exit(STEP_BOUND).await.code(), Some(2));
    b.signal(Signal::SIGTERM);
    b.exit(STEP_BOUND).await;
}

/// The lines of a group's copies in `log`: (`start` or `stop`, partition,
/// fencing token, session), in the order they were written.
fn group_log(log: &Path) -> Vec<(String, u32, u64, u64)> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Some((
                f.first()?.to_string(),
                f.get(1)?.parse().ok()?,
                f.get(2)?.parse().ok()?,
                f.get(3)?.parse().ok()?,
            ))
        })
        .collect()
}

/// The partitions whose latest copy started and did not stop, by session.
fn live_copies(log: &Path) -> std::collections::BTreeMap<u32, (u64, u64)> {
    let mut live = std::collections::BTreeMap::new();
    for (what, p, token, session) in group_log(log) {
        match what.as_str() {
            "start" => {
                live.insert(p, (token, session));
            }
            _ => {
                if live.get(&p) == Some(&(token, session)) {
                    live.remove(&p);
                }
            }
        }
    }
    live
}

/// Checks that every start of a partition came after the stop of the copy
/// before it, with a higher fencing token.
fn no_overlap(log: &Path) {
    let mut holder: std::collections::BTreeMap<u32, (u64, u64)> = Default::default();
    let mut last_token: std::collections::BTreeMap<u32, u64> = Default::default();
    for (what, p, token, session) in group_log(log) {
        if what == "start" {
            assert!(
                !holder.contains_key(&p),
                "partition {p} started by {session} while {:?} ran",
                holder[&p]
            );
            assert!(
                token > last_token.get(&p).copied().unwrap_or(0),
                "partition {p}: token {token} not above the last"
            );
            last_token.insert(p, token);
            holder.insert(p, (token, session));
        } else if holder.get(&p) == Some(&(token, session)) {
            holder.remove(&p);
        }
    }
}

async fn eventually_copies(
    log: &Path,
    what: &str,
    bound: Duration,
    f: impl Fn(&std::collections::BTreeMap<u32, (u64, u64)>) -> bool,
) {
    let until = Instant::now() + bound;
    while !f(&live_copies(log)) {
        assert!(Instant::now() < until, "{what} within {bound:?}: {:?}", group_log(log));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_group_runs_a_copy_per_partition_and_hands_them_over_without_overlap() {
    let _serial = serial().await;
    let c = cluster().await;
    let log = c.dir.path().join("group.log");
    // Each copy says when it starts and when it stops (on SIGTERM, after
    // half a second of cleaning up: a partition released before its copy
    // stopped would be started elsewhere meanwhile).
    let script = format!(
        "echo \"start $TENURE_PARTITION $TENURE_FENCING_TOKEN $TENURE_SESSION $TENURE_GROUP\" >> {0}; \
         trap 'sleep 0.5; echo \"stop $TENURE_PARTITION $TENURE_FENCING_TOKEN $TENURE_SESSION\" >> {0}; exit 0' TERM; \
         while :; do sleep 0.02; done",
        log.display()
    );
    let flags = ["--group", "jobs", "--ttl-ms", "2000"];
    let a_flags = [
        &["run"][..],
        &flags,
        &["--partitions", "4", "--stabilise-ms", "0", "--", "sh", "-c", &script],
    ]
    .concat();
    let mut a = Cli::start(&c, &a_flags);
    eventually_copies(&log, "A runs all 4", STEP_BOUND, |l| l.len() == 4).await;
    let a_session = live_copies(&log).values().next().unwrap().1;
    assert!(std::fs::read_to_string(&log).unwrap().contains(" jobs\n"), "TENURE_GROUP");

    // B joins: two partitions move, each started by B only after A's copy stopped.
    let b_flags = [&["run"][..], &flags, &["--", "sh", "-c", &script]].concat();
    let mut b = Cli::start(&c, &b_flags);
    eventually_copies(&log, "B runs 2, A 2", STEP_BOUND, |l| {
        l.len() == 4 && l.values().filter(|(_, s)| *s == a_session).count() == 2
    })
    .await;
    no_overlap(&log);

    // What `tenure partitions` shows of it: one group, both members with 2
    // partitions each, every partition's owner and epoch as the copies got.
    let mut list = Cli::start(&c, &["partitions", "list"]);
    assert_eq!(
        list.line(STEP_BOUND).await.split_whitespace().collect::<Vec<_>>(),
        ["GROUP", "PARTITIONS", "MEMBERS", "OWNED"]
    );
    assert_eq!(
        list.line(STEP_BOUND).await.split_whitespace().collect::<Vec<_>>(),
        ["jobs", "4", "2", "4"]
    );
    assert_eq!(list.exit(STEP_BOUND).await.code(), Some(0));
    let mut show = Cli::start(&c, &["partitions", "show", "jobs"]);
    let mut shown = Vec::new();
    while let Ok(Ok(Some(line))) = tokio::time::timeout(STEP_BOUND, show.out.next_line()).await {
        shown.push(line);
    }
    assert_eq!(show.exit(STEP_BOUND).await.code(), Some(0));
    for (p, (epoch, session)) in live_copies(&log) {
        let row = format!("{p} {session:016x} {epoch}");
        assert!(
            shown.iter().any(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" ") == row),
            "no row {row:?} in {shown:#?}"
        );
    }
    let mut missing = Cli::start(&c, &["partitions", "show", "nosuch"]);
    assert!(missing.err_line("does not exist", STEP_BOUND).await.contains("nosuch"));
    assert_eq!(missing.exit(STEP_BOUND).await.code(), Some(1));

    // B's `tenure run` is paused past its TTL: its guards alone stop its
    // copies by the deadline, and A takes them over only after the session
    // expired. Resumed, B finds its membership lost and exits 2.
    b.signal(Signal::SIGSTOP);
    eventually_copies(&log, "A runs all 4 again", STEP_BOUND, |l| {
        l.len() == 4 && l.values().all(|(_, s)| *s == a_session)
    })
    .await;
    no_overlap(&log);
    b.signal(Signal::SIGCONT);
    b.err_line("lost membership of jobs", STEP_BOUND).await;
    assert_eq!(b.exit(STEP_BOUND).await.code(), Some(2));

    // A third member is SIGKILLed: its guards see their socket close and
    // stop its copies at once; the partitions move at its session's end.
    let mut c3 = Cli::start(&c, &b_flags);
    eventually_copies(&log, "C runs 2", STEP_BOUND, |l| {
        l.values().filter(|(_, s)| *s != a_session).count() == 2
    })
    .await;
    c3.signal(Signal::SIGKILL);
    let _ = c3.exit(STEP_BOUND).await;
    eventually_copies(&log, "A runs all 4 once more", STEP_BOUND, |l| {
        l.len() == 4 && l.values().all(|(_, s)| *s == a_session)
    })
    .await;
    no_overlap(&log);

    // Ctrl-C: A stops every copy, leaves the group and exits 0.
    a.signal(Signal::SIGINT);
    a.err_line("left group jobs", STEP_BOUND).await;
    assert_eq!(a.exit(STEP_BOUND).await.code(), Some(0));
    assert!(live_copies(&log).is_empty(), "copies still running: {:?}", live_copies(&log));
    no_overlap(&log);
}
