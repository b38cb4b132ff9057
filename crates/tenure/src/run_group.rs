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
//! group, which grants its partitions to others at once). A copy that
//! exits on its own while its partition is still this member's is started
//! again after a pause.

use crate::client::timestamp;
use crate::elect_cli::{grant, ttl_of, StopSignals, EXIT_LOST};
use crate::run_cli::{grace_of, lead, RunArgs, Term, KEEP_TRYING_PAUSE, TOKEN_ENV};
use crate::run_keeper::check_command;
use anyhow::{bail, Context};
use futures_util::stream::{FuturesUnordered, StreamExt};
use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::Arc;
use tenure_client::partitions::{Event, JoinOptions, PartitionMember};
use tenure_client::{CancellationToken, Session, Store, TenureStore};

/// Environment variable naming the group, in each copy's environment.
pub const GROUP_ENV: &str = "TENURE_GROUP";
/// Environment variable holding the partition, in each copy's environment.
pub const PARTITION_ENV: &str = "TENURE_PARTITION";

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

/// What a copy returns: its partition, epoch and how it ended.
type Done = (u32, u64, anyhow::Result<Term>);

/// A running copy (it borrows the session).
type Copy<'a> = Pin<Box<dyn Future<Output = Done> + 'a>>;

/// `tenure run --group`.
pub async fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let group = args.group.clone().context("--group or --election")?;
    if args.conn.store.is_some() {
        bail!("--group works with tenure's own cluster (--endpoints), not with --store");
    }
    let ttl = ttl_of(args.ttl_ms)?;
    let grace = grace_of(args.grace_ms, ttl)?;
    let cluster = args.conn.cluster()?;
    let store: Arc<dyn Store> = Arc::new(TenureStore::new(cluster.clone()));
    let mut signals = StopSignals::new()?;
    loop {
        check_command(&args.command[0])?;
        let session = grant(&store, ttl).await?;
        let options = JoinOptions {
            partitions: args.partitions,
            stabilise_ms: args.stabilise_ms,
            weight: args.weight,
            zone: args.zone.clone(),
            stop_margin: Some(grace),
            ..JoinOptions::default()
        };
        let joined = PartitionMember::join(cluster.clone(), &session, &group, options).await;
        let mut member = match joined {
            Ok(m) => m,
            Err(e) => {
                let _ = session.close().await;
                return Err(anyhow::Error::new(e).context(format!("joining group {group}")));
            }
        };
        eprintln!("{}  joined group {group} as member {:016x}", timestamp(), session.id());
        let end = serve(&args, &group, &session, grace, &mut member, &mut signals).await?;
        match end {
            End::Interrupted => {
                member.leave().await.context("leaving the group")?;
                let _ = session.close().await;
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
        tokio::time::sleep(KEEP_TRYING_PAUSE).await;
    }
}

/// Runs the copies until the membership ends; every copy has stopped when
/// it returns.
async fn serve(
    args: &RunArgs,
    group: &str,
    session: &Session,
    grace: std::time::Duration,
    member: &mut PartitionMember,
    signals: &mut StopSignals,
) -> anyhow::Result<End> {
    let interrupt = CancellationToken::new();
    let mut copies: FuturesUnordered<Copy<'_>> = FuturesUnordered::new();
    // Partitions whose copy runs (or waits to start again), and those the
    // leader asked back whose copy has not stopped yet.
    let mut running = BTreeSet::new();
    let mut to_release = BTreeSet::new();
    let mut abandoned = false;
    let interrupted = &interrupt;
    let start = |p: u32, epoch: u64, stop: CancellationToken, pause: bool| -> Copy<'_> {
        let env = [
            (GROUP_ENV, group.to_string()),
            (PARTITION_ENV, p.to_string()),
            (TOKEN_ENV, epoch.to_string()),
        ];
        Box::pin(async move {
            if pause {
                tokio::select! {
                    () = tokio::time::sleep(KEEP_TRYING_PAUSE) => {}
                    () = stop.cancelled() => return (p, epoch, Ok(Term::Lost("revoked".into()))),
                    () = interrupted.cancelled() => return (p, epoch, Ok(Term::Interrupted(0))),
                }
            }
            let deposed = async {
                stop.cancelled().await;
                format!("partition {p} revoked")
            };
            let term =
                lead(&args.command, &env, session, grace, interrupted.cancelled(), deposed).await;
            (p, epoch, term)
        })
    };
    let end = loop {
        tokio::select! {
            () = signals.recv() => break End::Interrupted,
            event = member.next() => match event.context("following the assignment")? {
                Event::Assigned { partition, epoch, stop } => {
                    eprintln!("{}  partition {partition} assigned (fencing token {epoch}); starting {}", timestamp(), args.command[0]);
                    running.insert(partition);
                    copies.push(start(partition, epoch, stop, false));
                }
                Event::Revoked { partition, release, .. } => {
                    if release && running.contains(&partition) {
                        to_release.insert(partition);
                    } else if release {
                        member.release(partition).await.context("releasing")?;
                    }
                }
                Event::Lost { loss } => break End::Lost(loss.to_string()),
            },
            Some((p, epoch, term)) = copies.next() => {
                running.remove(&p);
                let owned = member.owned().contains(&(p, epoch)) && !to_release.contains(&p);
                match term {
                    Ok(Term::GuardDied { why, gone }) => {
                        eprintln!("{}  partition {p}: {why}", timestamp());
                        if !gone {
                            abandoned = true;
                            break End::Abandoned;
                        }
                        to_release.insert(p);
                    }
                    Ok(Term::Exited(code)) if owned => {
                        eprintln!("{}  partition {p}: {} exited with {code}; starting it again", timestamp(), args.command[0]);
                        if let Some(stop) = member.stop_token(p) {
                            running.insert(p);
                            copies.push(start(p, epoch, stop, true));
                        }
                    }
                    Ok(Term::Lost(why)) => eprintln!("{}  partition {p} stopped: {why}", timestamp()),
                    Ok(_) => {}
                    Err(e) => {
                        eprintln!("{}  partition {p}: {e:#}; giving it back", timestamp());
                        to_release.insert(p);
                    }
                }
                if to_release.remove(&p) {
                    member.release(p).await.context("releasing")?;
                    eprintln!("{}  partition {p} released", timestamp());
                }
            }
        }
    };
    // Stop every copy (a lost session's tokens are cancelled already).
    interrupt.cancel();
    while let Some(done) = copies.next().await {
        if let (p, _, Ok(Term::GuardDied { why, gone })) = done {
            eprintln!("{}  partition {p}: {why}", timestamp());
            abandoned |= !gone;
        }
    }
    Ok(if abandoned { End::Abandoned } else { end })
}
