//! `tenure run --group NAME -- CMD ARGS…`: be a member of a group of
//! partitions and run one copy of the command per partition the leader
//! assigns this member, each stopped before its partition can be granted
//! elsewhere (docs/PARTITIONS.md).
//!
//! Each copy runs under its own guard, exactly as `tenure run --election`'s
//! command does ([`crate::run_cli::lead`]): SIGTERM at the session's
//! deadline less the grace, SIGKILL at the deadline, from a guard that does
//! not depend on this process, with the command in a process group of its
//! own. A copy is stopped when the leader asks for its partition back (then
//! the partition is released, once the copy's whole group is gone), when
//! its partition's grant ends, at the session's deadline less the grace
//! without a renewal, and on Ctrl-C or SIGTERM (then the member leaves the
//! group, which grants its partitions to others at once).
//!
//! At most one copy of a partition runs at a time: a partition granted
//! again while its earlier copy still stops starts once that copy is gone.
//! A copy that ends while its partition is still this member's (it exited,
//! or could not start) starts again after a pause that doubles, from
//! [`KEEP_TRYING_PAUSE`] to [`MAX_RESTART_PAUSE`], while copies keep ending
//! within [`HEALTHY_RUN`]. Releases are sent beside the copies (their
//! deadlines keep being relayed) and sent again after an error.

use crate::client::timestamp;
use crate::elect_cli::{grant, ttl_of, StopSignals, EXIT_LOST};
use crate::run_cli::{grace_of, lead, RunArgs, Term, KEEP_TRYING_PAUSE, TOKEN_ENV};
use crate::run_keeper::check_command;
use anyhow::Context;
use futures_util::stream::{FuturesUnordered, StreamExt};
use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use tenure_client::partitions::{Event, JoinOptions, PartitionMember, Release};
use tenure_client::{CancellationToken, Session, Store, TenureStore};
use tokio::time::Instant;

/// Environment variable naming the group, in each copy's environment.
pub const GROUP_ENV: &str = "TENURE_GROUP";
/// Environment variable holding the partition, in each copy's environment.
pub const PARTITION_ENV: &str = "TENURE_PARTITION";
/// Longest pause before a copy that keeps ending starts again.
pub const MAX_RESTART_PAUSE: Duration = Duration::from_secs(30);
/// A copy that ran this long resets its partition's restart pause.
pub const HEALTHY_RUN: Duration = Duration::from_secs(10);

/// How a membership ended.
enum End {
    /// Ctrl-C or SIGTERM.
    Interrupted,
    /// The session was lost (every copy stopped).
    Lost(String),
    /// A guard died and its copy's process group may still run: neither
    /// leave nor close (the session expires by its TTL, its partitions with it).
    Abandoned,
}

/// Most releases sent at once: each holds a connection to a node while it
/// is sent (a node serves 256), and a member may give back hundreds at
/// once; the rest wait their turn.
const MAX_RELEASES_IN_FLIGHT: usize = 16;

/// What a copy returns: its partition, epoch, when it started and how it ended.
type Done = (u32, u64, Instant, anyhow::Result<Term>);

/// A running copy (it borrows the session).
type Copy<'a> = Pin<Box<dyn Future<Output = Done> + 'a>>;

/// A release being sent: the partition and its outcome.
type Sending = Pin<Box<dyn Future<Output = (Release, Result<(), tenure_client::Error>)>>>;

/// `tenure run --group`.
pub async fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let group = args.group.clone().context("--group or --election")?;
    if args.conn.store.is_some() {
        return Err(crate::usage::usage(
            "--group works with tenure's own cluster (--endpoints), not with --store",
        ));
    }
    let ttl = ttl_of(args.ttl_ms)?;
    let grace = grace_of(args.grace_ms, ttl)?;
    let cluster = args.conn.cluster()?;
    let store: Arc<dyn Store> = Arc::new(TenureStore::new(cluster.clone()));
    let mut signals = StopSignals::new()?;
    loop {
        check_command(&args.command[0])?;
        // Ctrl-C or SIGTERM before the member runs anything: nothing to stop.
        let session = tokio::select! {
            _ = signals.recv() => return Ok(ExitCode::SUCCESS),
            s = grant(&store, ttl) => s?,
        };
        let options = JoinOptions {
            partitions: args.partitions,
            stabilise_ms: args.stabilise_ms,
            weight: args.weight,
            zone: args.zone.clone(),
            stop_margin: Some(grace),
            ..JoinOptions::default()
        };
        let joined = tokio::select! {
            _ = signals.recv() => {
                let _ = session.close().await;
                return Ok(ExitCode::SUCCESS);
            }
            j = PartitionMember::join(cluster.clone(), &session, &group, options) => j,
        };
        let mut member = match joined {
            Ok(m) => m,
            // No answer; or the session ended before the join reached the
            // leader (404: its grant answered past its own deadline, so its
            // keepalive revoked it, as after a long network cut): a new
            // session may join. Other refusals are final.
            Err(e) if args.keep_trying && (!is_refusal(&e) || session_gone(&e, &session)) => {
                eprintln!("{}  joining group {group}: {e}; trying again", timestamp());
                let _ = session.close().await;
                if pause_or_stop(&mut signals).await {
                    return Ok(ExitCode::SUCCESS);
                }
                continue;
            }
            Err(e) => {
                let _ = session.close().await;
                return Err(anyhow::Error::new(e).context(format!("joining group {group}")));
            }
        };
        eprintln!("{}  joined group {group} as member {:016x}", timestamp(), session.id());
        let end = serve(&args, &group, &session, grace, &mut member, &mut signals).await;
        match end {
            End::Interrupted => {
                let left = member.leave().await;
                let _ = session.close().await;
                left.context("leaving the group (its partitions move when the session ends)")?;
                eprintln!("{}  left group {group}", timestamp());
                return Ok(ExitCode::SUCCESS);
            }
            End::Abandoned => {
                // Neither left nor closed: the session expires by its TTL.
                drop(session);
                return Ok(ExitCode::FAILURE);
            }
            End::Lost(why) => {
                eprintln!("{}  lost membership of {group}: {why}", timestamp());
                if !args.keep_trying {
                    return Ok(ExitCode::from(EXIT_LOST));
                }
            }
        }
        if pause_or_stop(&mut signals).await {
            return Ok(ExitCode::SUCCESS);
        }
    }
}

/// Pauses [`KEEP_TRYING_PAUSE`] before the next try; true if Ctrl-C or
/// SIGTERM came meanwhile (between tries the member runs nothing).
async fn pause_or_stop(signals: &mut StopSignals) -> bool {
    tokio::select! {
        _ = signals.recv() => true,
        () = tokio::time::sleep(KEEP_TRYING_PAUSE) => false,
    }
}

/// Whether `e` is the cluster refusing the request (an answer, not its
/// absence).
fn is_refusal(e: &tenure_client::Error) -> bool {
    matches!(e, tenure_client::Error::Refused(_))
}

/// Whether a join refused with `e` was refused because `session` is gone:
/// a 404 for a session the client no longer trusts (ended, or past its
/// deadline: [`Session::ended`] counts both).
fn session_gone(e: &tenure_client::Error, session: &Session) -> bool {
    let not_found =
        matches!(e, tenure_client::Error::Refused(r) if r.status == hyper::StatusCode::NOT_FOUND);
    not_found && session.ended().is_some()
}

/// Sends release `r` (through `send`) if fewer than
/// [`MAX_RELEASES_IN_FLIGHT`] are on their way; else queues it, to be sent
/// as one of them finishes.
fn send_or_queue(
    sending: &mut FuturesUnordered<Sending>,
    queued: &mut VecDeque<Release>,
    r: Release,
    send: &impl Fn(Release, Option<Duration>) -> Sending,
) {
    if sending.len() < MAX_RELEASES_IN_FLIGHT {
        sending.push(send(r, None));
    } else {
        queued.push_back(r);
    }
}

/// A partition's copy, as `serve` tracks it.
struct Slot {
    /// The epoch of the copy that runs (or waits to start again), if any.
    running: Option<u64>,
    /// A grant to start once the running copy is gone.
    next: Option<(u64, CancellationToken)>,
    /// The leader asked the partition back: release it once no copy runs.
    release: bool,
    /// The pause before the copy starts again after it ended early.
    pause: Duration,
}

impl Default for Slot {
    fn default() -> Self {
        Slot { running: None, next: None, release: false, pause: KEEP_TRYING_PAUSE }
    }
}

/// Runs the copies until the membership ends; every copy has stopped when
/// it returns.
async fn serve(
    args: &RunArgs,
    group: &str,
    session: &Session,
    grace: Duration,
    member: &mut PartitionMember,
    signals: &mut StopSignals,
) -> End {
    let interrupt = CancellationToken::new();
    let interrupted = &interrupt;
    let mut copies: FuturesUnordered<Copy<'_>> = FuturesUnordered::new();
    let mut sending: FuturesUnordered<Sending> = FuturesUnordered::new();
    // Releases beyond MAX_RELEASES_IN_FLIGHT, sent as others finish.
    let mut queued: VecDeque<Release> = VecDeque::new();
    let mut slots: BTreeMap<u32, Slot> = BTreeMap::new();
    let mut abandoned = false;
    let start = |p: u32,
                 epoch: u64,
                 stop: CancellationToken,
                 pause: Option<Duration>|
     -> Copy<'_> {
        let env = [
            (GROUP_ENV, group.to_string()),
            (PARTITION_ENV, p.to_string()),
            (TOKEN_ENV, epoch.to_string()),
        ];
        Box::pin(async move {
            if let Some(pause) = pause {
                tokio::select! {
                    () = tokio::time::sleep(pause) => {}
                    () = stop.cancelled() => return (p, epoch, Instant::now(), Ok(Term::Lost("revoked".into()))),
                    () = interrupted.cancelled() => return (p, epoch, Instant::now(), Ok(Term::Interrupted(0))),
                }
            }
            let started = Instant::now();
            if stop.is_cancelled() || interrupted.is_cancelled() {
                return (p, epoch, started, Ok(Term::Lost("stopped before it started".into())));
            }
            let deposed = async {
                stop.cancelled().await;
                format!("partition {p} revoked")
            };
            let term =
                lead(&args.command, &env, session, grace, interrupted.cancelled(), deposed).await;
            (p, epoch, started, term)
        })
    };
    let send = |r: Release, pause: Option<Duration>| -> Sending {
        Box::pin(async move {
            if let Some(pause) = pause {
                tokio::time::sleep(pause).await;
            }
            let sent = r.clone().send().await;
            (r, sent)
        })
    };
    let end = loop {
        tokio::select! {
            () = signals.recv() => break End::Interrupted,
            event = member.next() => match event {
                Err(e) => eprintln!("{}  following the assignment: {e}", timestamp()),
                Ok(Event::Assigned { partition: p, epoch, stop }) => {
                    let slot = slots.entry(p).or_default();
                    slot.release = false;
                    if slot.running.is_some() {
                        // The earlier copy is still stopping.
                        slot.next = Some((epoch, stop));
                    } else {
                        eprintln!("{}  partition {p} assigned (fencing token {epoch}); starting {}", timestamp(), args.command[0]);
                        slot.running = Some(epoch);
                        copies.push(start(p, epoch, stop, None));
                    }
                }
                Ok(Event::Revoked { partition: p, epoch, release }) => {
                    let slot = slots.entry(p).or_default();
                    if slot.next.as_ref().is_some_and(|(e, _)| *e == epoch) {
                        // Granted while the earlier copy stopped: never started.
                        slot.next = None;
                    }
                    if release && slot.running.is_some() {
                        slot.release = true;
                    } else if release {
                        if let Some(r) = member.release_later(p) {
                            send_or_queue(&mut sending, &mut queued, r, &send);
                        }
                    }
                }
                Ok(Event::Lost { loss }) => break End::Lost(loss.to_string()),
            },
            Some((p, epoch, started, term)) = copies.next() => {
                let slot = slots.entry(p).or_default();
                if slot.running == Some(epoch) {
                    slot.running = None;
                }
                let still_mine = member.stop_token(p).filter(|_| member.owned().contains(&(p, epoch)));
                let restart = match term {
                    Ok(Term::GuardDied { why, gone }) => {
                        eprintln!("{}  partition {p}: {why}", timestamp());
                        if !gone {
                            abandoned = true;
                            break End::Abandoned;
                        }
                        true
                    }
                    Ok(Term::Exited(code)) => {
                        eprintln!("{}  partition {p}: {} exited with {code}", timestamp(), args.command[0]);
                        true
                    }
                    Ok(Term::Lost(why)) => {
                        eprintln!("{}  partition {p} stopped: {why}", timestamp());
                        true
                    }
                    Ok(Term::Interrupted(_)) => false,
                    Err(e) => {
                        eprintln!("{}  partition {p}: {e:#}", timestamp());
                        true
                    }
                };
                if let Some((next_epoch, stop)) = slot.next.take() {
                    slot.running = Some(next_epoch);
                    copies.push(start(p, next_epoch, stop, None));
                } else if slot.release {
                    slot.release = false;
                    if let Some(r) = member.release_later(p) {
                        send_or_queue(&mut sending, &mut queued, r, &send);
                        eprintln!("{}  partition {p} stopped; releasing it", timestamp());
                    }
                } else if let (true, Some(stop)) = (restart, still_mine) {
                    // Still this member's: start it again, after a pause
                    // that grows while copies keep ending early.
                    slot.pause = if started.elapsed() >= HEALTHY_RUN {
                        KEEP_TRYING_PAUSE
                    } else {
                        (slot.pause * 2).min(MAX_RESTART_PAUSE)
                    };
                    eprintln!("{}  partition {p}: starting it again in {:?}", timestamp(), slot.pause);
                    slot.running = Some(epoch);
                    copies.push(start(p, epoch, stop, Some(slot.pause)));
                }
            }
            Some((r, sent)) = sending.next() => {
                if let Err(e) = sent {
                    eprintln!("{}  releasing partition {}: {e}; sending it again", timestamp(), listed(&r.grants()));
                    sending.push(send(r, Some(KEEP_TRYING_PAUSE)));
                } else {
                    eprintln!("{}  partition {} released", timestamp(), listed(&r.grants()));
                    if let Some(next) = queued.pop_front() {
                        sending.push(send(next, None));
                    }
                }
            }
        }
    };
    // Stop every copy (a lost session's tokens are cancelled already).
    interrupt.cancel();
    while let Some((p, _, _, term)) = copies.next().await {
        if let Ok(Term::GuardDied { why, gone }) = term {
            eprintln!("{}  partition {p}: {why}", timestamp());
            abandoned |= !gone;
        }
    }
    if abandoned {
        End::Abandoned
    } else {
        end
    }
}

/// The partitions of grants as `3` or `3, 4, 7`.
fn listed(grants: &[(u32, u64)]) -> String {
    grants.iter().map(|(p, _)| p.to_string()).collect::<Vec<_>>().join(", ")
}
