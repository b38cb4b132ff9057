//! The member process of `tenure bench partitions` (the hidden `tenure
//! bench-partitions-member`), and the lines it prints.
//!
//! * With `--endpoints`: a member of a tenure group of partitions through
//!   the client's [`PartitionMember`], as an application would be: it
//!   works on each assigned partition until its stop token is cancelled,
//!   releases a partition once the leader asked for it (after its work
//!   stopped), and on SIGTERM stops every partition's work, leaves the
//!   group and closes its session.
//! * With `--etcd`: the way it is done without groups: one election per
//!   partition (`<group>-p00000` ...), every member campaigning in every
//!   election with one session (one etcd lease, as Go's
//!   `concurrency.Session` shares one lease between its elections), through
//!   tenure's etcd store (the `Store` of `tenure elect --store etcd://`).
//!   A member owns the partitions whose elections it leads. On SIGTERM it
//!   closes its session (etcd revokes the lease and its keys).
//!
//! Every event is one line on stdout, headed by the wall clock
//! (CLOCK_REALTIME) in microseconds, which the bench, on the same machine,
//! compares with its own: see [`Line`]. The member exits when its parent
//! goes away (it polls its parent's pid), so that a bench killed with
//! SIGKILL leaves no member behind.

use anyhow::{bail, Context};
use clap::Args;
use std::collections::BTreeSet;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tenure_client::partitions::{Event, JoinOptions, PartitionMember};
use tenure_client::{
    parse_endpoints, Client, ClientOptions, Cluster, Election, Session, Store, TenureStore,
};
use tokio::signal::unix::{signal, SignalKind};
use tokio::task::JoinSet;

/// How often a member checks that its parent (the bench) still runs.
const PARENT_CHECK: Duration = Duration::from_millis(100);
/// Exit code of a member whose parent went away.
const EXIT_ORPHANED: i32 = 3;
/// Exit code of a member whose session was lost.
const EXIT_LOST: u8 = 2;
/// How often a release is sent before the member gives up on it (the
/// keeper then waits for the session's end).
const RELEASE_TRIES: usize = 20;
/// Pause between two tries of a release.
const RELEASE_RETRY: Duration = Duration::from_millis(100);
/// Most releases a member sends at once (each gives up to 63 partitions
/// back). Each request in flight takes an HTTP/1.1 connection of its own,
/// and a node serves at most 256: 16 each keeps 30 members (with their
/// long polls and keepalive streams) within one node's connections; a first
/// member asked to give back 900 of its 999 partitions at once sends 15.
const RELEASES_IN_FLIGHT: usize = 16;

/// Opens an etcd store from an `etcd://HOST:PORT,...` URL: the `tenure`
/// binary passes its own (`--store etcd://`), which this crate does not
/// build.
pub type OpenStore = fn(&str) -> anyhow::Result<Arc<dyn Store>>;

/// Flags of the hidden `tenure bench-partitions-member`.
#[derive(Args, Debug)]
pub struct MemberArgs {
    /// tenure's API endpoints: join the group (the token from TENURE_TOKEN).
    #[arg(long, value_name = "LIST", required_unless_present = "etcd", conflicts_with = "etcd")]
    endpoints: Option<String>,
    /// An etcd cluster (`etcd://HOST:PORT,...`): campaign in one election per partition.
    #[arg(long, value_name = "URL")]
    etcd: Option<String>,
    /// The CA of tenure's HTTPS.
    #[arg(long, env = tenure_client::CACERT_ENV, value_name = "FILE")]
    cacert: Option<PathBuf>,
    /// The group (tenure), or the elections' name prefix (etcd).
    #[arg(long, value_name = "NAME")]
    group: String,
    /// Partitions of the group.
    #[arg(long, value_name = "N")]
    partitions: u32,
    /// The session's TTL, in milliseconds.
    #[arg(long, value_name = "MS")]
    ttl_ms: u64,
    /// The group's stabilisation time, when this join creates it (tenure).
    #[arg(long, value_name = "MS")]
    stabilise_ms: Option<u64>,
    /// Most campaigns in flight at once (etcd).
    #[arg(long, default_value_t = 8, value_name = "N")]
    campaigns_in_flight: usize,
    /// The member's name (its candidate value in etcd).
    #[arg(long, value_name = "NAME")]
    name: String,
}

/// One event a member prints: `<µs since the epoch> <what> [fields]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Line {
    /// When, in µs of CLOCK_REALTIME.
    pub(crate) at_us: i64,
    /// What.
    pub(crate) what: What,
}

/// What a member's line says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum What {
    /// `session ID`: its session (lease) id, decimal.
    Session(u64),
    /// `joined`: the join was accepted (tenure).
    Joined,
    /// `campaigned N`: it is a candidate in all N elections (etcd).
    Campaigned(u32),
    /// `assigned P EPOCH`: it works on P from now on, fenced by EPOCH.
    Assigned(u32, u64),
    /// `stopped P EPOCH`: its work on P stopped (the stop token was cancelled).
    Stopped(u32, u64),
    /// `revoked P EPOCH RELEASE`: the leader asked P back (1) or its grant
    /// ended (0).
    Revoked(u32, u64, bool),
    /// `released P EPOCH`: the cluster accepted its release of P.
    Released(u32, u64),
    /// `leaving`: SIGTERM: every partition's work stops now.
    Leaving,
    /// `left`: it left the group (tenure) or closed its session (etcd).
    Left,
    /// `lost WHY`: its session was lost; every partition's work stopped.
    Lost(String),
    /// `error WHY`: something failed that it tries again.
    Error(String),
}

impl std::fmt::Display for Line {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ", self.at_us)?;
        match &self.what {
            What::Session(id) => write!(f, "session {id}"),
            What::Joined => write!(f, "joined"),
            What::Campaigned(n) => write!(f, "campaigned {n}"),
            What::Assigned(p, e) => write!(f, "assigned {p} {e}"),
            What::Stopped(p, e) => write!(f, "stopped {p} {e}"),
            What::Revoked(p, e, r) => write!(f, "revoked {p} {e} {}", u8::from(*r)),
            What::Released(p, e) => write!(f, "released {p} {e}"),
            What::Leaving => write!(f, "leaving"),
            What::Left => write!(f, "left"),
            What::Lost(why) => write!(f, "lost {}", why.replace('\n', " ")),
            What::Error(why) => write!(f, "error {}", why.replace('\n', " ")),
        }
    }
}

impl std::str::FromStr for Line {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> anyhow::Result<Line> {
        let mut words = s.split(' ');
        let at_us = words.next().unwrap_or_default().parse().context("no timestamp")?;
        let what = words.next().unwrap_or_default();
        let mut num =
            || -> anyhow::Result<u64> { Ok(words.next().context("a field is missing")?.parse()?) };
        let what = match what {
            "session" => What::Session(num()?),
            "joined" => What::Joined,
            "campaigned" => What::Campaigned(u32::try_from(num()?)?),
            "assigned" => What::Assigned(u32::try_from(num()?)?, num()?),
            "stopped" => What::Stopped(u32::try_from(num()?)?, num()?),
            "revoked" => What::Revoked(u32::try_from(num()?)?, num()?, num()? == 1),
            "released" => What::Released(u32::try_from(num()?)?, num()?),
            "leaving" => What::Leaving,
            "left" => What::Left,
            "lost" | "error" => {
                let rest = s.splitn(3, ' ').nth(2).unwrap_or_default().to_string();
                if what == "lost" {
                    What::Lost(rest)
                } else {
                    What::Error(rest)
                }
            }
            other => bail!("unknown event {other:?}"),
        };
        Ok(Line { at_us, what })
    }
}

/// Now, in µs of CLOCK_REALTIME.
pub(crate) fn now_us() -> i64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    i64::try_from(since.as_micros()).unwrap_or(i64::MAX)
}

/// Lines stamped and not yet written: see [`say`].
static HELD: Mutex<String> = Mutex::new(String::new());

/// Wakes [`write_held`] when [`HELD`] stops being empty.
static HELD_ADDED: tokio::sync::Notify = tokio::sync::Notify::const_new();

/// Prints `what`, stamped now. The lines a member says by the hundred
/// (a partition assigned, stopped, asked back, released) are held and
/// written together by [`write_held`] once the tasks that run now have had
/// their turn: one write, and one wake-up of the bench, for what one
/// assignment brings, rather than one per line (the bench reads the
/// stamps, so holding a line does not change what it measures). Any
/// other line is written at once, after those held. A closed stdout means
/// the bench is gone: exit.
fn say(what: What) {
    use std::fmt::Write as _;
    let held = matches!(
        what,
        What::Assigned(..) | What::Stopped(..) | What::Revoked(..) | What::Released(..)
    );
    let line = Line { at_us: now_us(), what };
    let mut lines = lock(&HELD);
    let was_empty = lines.is_empty();
    let _ = writeln!(lines, "{line}");
    if !held {
        write_out(&std::mem::take(&mut *lines));
    } else if was_empty {
        HELD_ADDED.notify_one();
    }
}

/// Writes the held lines, each time some are added, after letting every
/// task that is ready run first (on the member's one thread, those that
/// say more of the same burst).
async fn write_held() {
    loop {
        HELD_ADDED.notified().await;
        tokio::task::yield_now().await;
        let lines = std::mem::take(&mut *lock(&HELD));
        write_out(&lines);
    }
}

/// Writes `lines` to stdout; exits when the bench is gone.
fn write_out(lines: &str) {
    if lines.is_empty() {
        return;
    }
    let mut out = std::io::stdout().lock();
    if out.write_all(lines.as_bytes()).and_then(|()| out.flush()).is_err() {
        std::process::exit(EXIT_ORPHANED);
    }
}

/// The set behind `m`, even if a thread panicked holding it.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Exits the process once its parent is gone (reparented).
async fn exit_when_orphaned() {
    let parent = std::os::unix::process::parent_id();
    loop {
        tokio::time::sleep(PARENT_CHECK).await;
        if std::os::unix::process::parent_id() != parent {
            std::process::exit(EXIT_ORPHANED);
        }
    }
}

/// `tenure bench-partitions-member`; `open_etcd` opens the etcd store.
pub async fn run(args: MemberArgs, open_etcd: OpenStore) -> anyhow::Result<ExitCode> {
    tokio::spawn(exit_when_orphaned());
    tokio::spawn(write_held());
    let ttl = Duration::from_millis(args.ttl_ms);
    match (&args.endpoints, &args.etcd) {
        (Some(endpoints), None) => on_tenure(&args, endpoints, ttl).await,
        (None, Some(url)) => on_etcd(&args, open_etcd(url)?, ttl).await,
        _ => bail!("give --endpoints or --etcd"),
    }
}

/// A member of a tenure group.
async fn on_tenure(args: &MemberArgs, endpoints: &str, ttl: Duration) -> anyhow::Result<ExitCode> {
    let token = std::env::var(tenure_client::TOKEN_ENV).ok();
    let options = ClientOptions { cacert: args.cacert.as_deref(), token: token.as_deref() };
    let client = Client::new(options)?;
    let endpoints = parse_endpoints(endpoints, client.https())?;
    let cluster = Arc::new(Cluster::new(client, endpoints)?);
    let mut term = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    let session = Session::start(TenureStore::shared(cluster.clone()), ttl)
        .await
        .context("starting a session")?;
    say(What::Session(session.id()));
    let options = JoinOptions {
        partitions: Some(args.partitions),
        stabilise_ms: args.stabilise_ms,
        ..JoinOptions::default()
    };
    let mut member = PartitionMember::join(cluster, &session, &args.group, options)
        .await
        .with_context(|| format!("joining group {}", args.group))?;
    say(What::Joined);
    let releasing = Arc::new(tokio::sync::Semaphore::new(RELEASES_IN_FLIGHT));
    // Releases on their way: until one lands, every assignment the member
    // reads still shows the partition asked back, and the client, which
    // forgot it at `release_later`, tells it as a new `Revoked`.
    let sending: Arc<Mutex<BTreeSet<(u32, u64)>>> = Arc::default();
    // Only SIGTERM interrupts `next`: a dropped `next` drops its long poll
    // in flight, and with it the poll's connection. The partitions' work
    // and the releases run in tasks of their own.
    loop {
        let first = tokio::select! {
            _ = term.recv() => break,
            event = member.next() => event,
        };
        // One assignment often brings many events (a join asks ~100
        // partitions back from 9 members): those asked back go in one
        // release per member, one commit.
        let mut to_release = Vec::new();
        let mut event = Some(first);
        while let Some(e) = event.take() {
            match e {
                Ok(Event::Assigned { partition, epoch, stop }) => {
                    say(What::Assigned(partition, epoch));
                    // The work: none, but it ends when the token says so.
                    tokio::spawn(async move {
                        stop.cancelled().await;
                        say(What::Stopped(partition, epoch));
                    });
                }
                Ok(Event::Revoked { partition, epoch, release }) => {
                    if release && !lock(&sending).insert((partition, epoch)) {
                        // Its release is on its way: one is enough.
                    } else {
                        say(What::Revoked(partition, epoch, release));
                        // Its token is cancelled: the work has stopped.
                        if release {
                            to_release.push(partition);
                        }
                    }
                }
                Ok(Event::Lost { loss }) => {
                    say(What::Lost(loss.to_string()));
                    return Ok(ExitCode::from(EXIT_LOST));
                }
                Err(e) => say(What::Error(format!("assignment: {e}"))),
            }
            event = member.try_next().map(Ok);
        }
        for r in member.release_all_later(&to_release) {
            let (releasing, sending) = (releasing.clone(), sending.clone());
            tokio::spawn(async move {
                let Ok(_permit) = releasing.acquire().await else { return };
                let grants = r.grants();
                for _ in 0..RELEASE_TRIES {
                    match r.clone().send().await {
                        Ok(()) => {
                            for &(p, e) in &grants {
                                say(What::Released(p, e));
                            }
                            break;
                        }
                        Err(e) => say(What::Error(format!("release {grants:?}: {e}"))),
                    }
                    tokio::time::sleep(RELEASE_RETRY).await;
                }
                let mut sending = lock(&sending);
                for g in &grants {
                    sending.remove(g);
                }
            });
        }
    }
    // SIGTERM: stop every partition's work, then leave.
    say(What::Leaving);
    member.leave().await.context("leaving the group")?;
    say(What::Left);
    let _ = session.close().await;
    Ok(ExitCode::SUCCESS)
}

/// A member campaigning in one etcd election per partition.
async fn on_etcd(
    args: &MemberArgs,
    store: Arc<dyn Store>,
    ttl: Duration,
) -> anyhow::Result<ExitCode> {
    let mut term = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    let session = Arc::new(Session::start(store.clone(), ttl).await.context("starting a session")?);
    say(What::Session(session.id()));
    let gate = Arc::new(tokio::sync::Semaphore::new(args.campaigns_in_flight.max(1)));
    let campaigned = Arc::new(AtomicUsize::new(0));
    let n = args.partitions;
    let mut elections = JoinSet::new();
    for p in 0..n {
        let election = Election::new(store.clone(), &format!("{}-p{p:05}", args.group))?;
        let (session, gate, campaigned) = (session.clone(), gate.clone(), campaigned.clone());
        let value = args.name.clone();
        elections.spawn(async move {
            let candidacy = {
                let _permit = gate.acquire().await?;
                election.campaign(&session, &value).await?
            };
            if campaigned.fetch_add(1, Ordering::SeqCst) + 1 == n as usize {
                say(What::Campaigned(n));
            }
            let token = election.wait_until_leader(&session, &candidacy).await?;
            say(What::Assigned(p, token));
            // It leads until its session ends: nothing more to do here.
            anyhow::Ok(())
        });
    }
    let outcome = loop {
        tokio::select! {
            _ = term.recv() => break Ok(()),
            loss = session.lost() => break Err(loss),
            Some(done) = elections.join_next() => match done {
                Ok(Ok(())) => {}
                Ok(Err(e)) => say(What::Error(format!("election: {e:#}"))),
                Err(e) => say(What::Error(format!("election task: {e}"))),
            },
        }
    };
    if let Err(loss) = outcome {
        say(What::Lost(loss.to_string()));
        return Ok(ExitCode::from(EXIT_LOST));
    }
    say(What::Leaving);
    elections.shutdown().await;
    if let Ok(session) = Arc::try_unwrap(session) {
        session.close().await.context("closing the session")?;
    }
    say(What::Left);
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_reads_back_as_printed() {
        let all = [
            What::Session(42),
            What::Joined,
            What::Campaigned(1000),
            What::Assigned(7, 91),
            What::Stopped(7, 91),
            What::Revoked(7, 91, true),
            What::Revoked(8, 92, false),
            What::Released(7, 91),
            What::Leaving,
            What::Left,
            What::Lost("the session expired".into()),
            What::Error("release 3: no answer".into()),
        ];
        for what in all {
            let line = Line { at_us: 1_764_000_000_123_456, what };
            let text = line.to_string();
            assert_eq!(text.parse::<Line>().unwrap(), line, "{text}");
        }
        assert!("12 teleported 3".parse::<Line>().is_err());
        assert!("x assigned 1 2".parse::<Line>().is_err());
        assert!("12 assigned 1".parse::<Line>().is_err());
    }
}
