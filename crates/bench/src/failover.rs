//! One failover trial, identical for every [`System`]: wait for a stable
//! leader, kill it (SIGKILL, or SIGTERM for a graceful handover), measure the
//! time until a survivor reports itself leader of a newer term, then restart
//! the killed node and wait until it has rejoined.
//!
//! Leader detection polls every survivor concurrently, each on its own loop,
//! every [`DETECT_POLL`]; the first answer that shows a new leader ends the
//! measurement. The poll period and the request round trip are recorded, so
//! the report states the detector's own delay.

use super::system::{Rounds, System, View};
use anyhow::{bail, Context};
use futures_util::future::{join_all, select_all};
use nix::sys::signal::Signal;
use serde::Serialize;
use std::cell::Cell;
use std::time::Duration;
use tokio::time::{sleep, sleep_until, Instant};

/// Period of each survivor's poll loop while a failover is measured.
pub const DETECT_POLL: Duration = Duration::from_millis(1);
/// How much earlier than the period the poll loop asks to wake (tokio rounds up to 1 ms ticks).
const TIMER_TICK_SLACK: Duration = Duration::from_micros(900);
/// Per-request timeout while detecting: a survivor that does not answer this
/// quickly is asked again.
const DETECT_REQUEST_TIMEOUT: Duration = Duration::from_millis(250);
/// Period of the stability check.
const STABLE_POLL: Duration = Duration::from_millis(5);
/// Per-request timeout of the stability check.
const STABLE_REQUEST_TIMEOUT: Duration = Duration::from_millis(500);
/// Shortest settle time: how long every node must agree before a trial starts.
const MIN_SETTLE: Duration = Duration::from_millis(50);
/// Settle time in heartbeats (whichever of this and [`MIN_SETTLE`] is longer).
const SETTLE_HEARTBEATS: u32 = 3;
/// Extra time allowed for process start-up in every bound.
const STARTUP_ALLOWANCE: Duration = Duration::from_secs(10);
/// How long a signalled node may take to exit.
const EXIT_TIMEOUT: Duration = Duration::from_secs(5);

/// How the leader is stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Stop {
    /// SIGKILL: a crash.
    Kill,
    /// SIGTERM: a graceful stop (a tenure leader hands over first).
    Graceful,
    /// SIGKILL, then a supervisor's death notice: the bench waits for the
    /// process to exit (waitpid, polled every millisecond), as a supervisor
    /// does, and posts `/v1/peers/{id}/dead` with the incarnation the leader
    /// showed before to every survivor (docs/SPIES.md). Systems without
    /// death notices (etcd) are just killed.
    Spy,
    /// SIGKILL, then a restart at once and no notice: the restarted node's
    /// next incarnation tells the survivors in its handshakes (a restart by
    /// systemd or a supervisor). Systems without incarnations (etcd) are
    /// just killed, and restarted after the measurement as usual.
    Restart,
}

/// Timings of a run, shared by every trial.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// Heartbeat interval.
    pub heartbeat: Duration,
    /// Election timeout.
    pub election_timeout: Duration,
}

impl Timing {
    fn settle(&self) -> Duration {
        (self.heartbeat * SETTLE_HEARTBEATS).max(MIN_SETTLE)
    }

    /// Bound on one election or rejoin: several timeouts plus process start-up.
    fn bound(&self) -> Duration {
        self.election_timeout * 10 + STARTUP_ALLOWANCE
    }
}

/// What one trial measured.
#[derive(Debug, Clone, Serialize)]
pub struct Trial {
    /// Wall-clock time of the signal (RFC 3339), to find the trial in the logs.
    pub signalled_at: String,
    /// Time from the signal to the first survivor reporting itself leader, ms.
    pub failover_ms: f64,
    /// Node (1-based) that was stopped.
    pub stopped: usize,
    /// Node (1-based) that took over.
    pub new_leader: usize,
    /// Term of the stopped leader.
    pub term_before: u64,
    /// Term of the new leader when it was detected.
    pub term_after: u64,
    /// Elections started by the survivors during the failover (tenure only).
    pub elections: Option<u64>,
    /// Pre-vote rounds started by the survivors during the failover (tenure only).
    pub pre_votes: Option<u64>,
    /// Whether the term changed while the stopped node rejoined (a disruption).
    pub rejoin_disturbed: bool,
    /// Mean period of the survivors' poll loops during detection, ms.
    pub poll_period_ms: f64,
    /// Mean round trip of one detection request, ms.
    pub poll_rtt_ms: f64,
}

/// Waits until every node of `nodes` answers, all name the same leader in the
/// same term, and that leader says it leads, continuously for the settle time.
/// Returns (leader index, term).
pub async fn wait_stable<S: System>(
    sys: &S,
    nodes: &[usize],
    timing: Timing,
) -> anyhow::Result<(usize, u64)> {
    let bound = timing.bound();
    let started = Instant::now();
    let mut agreed: Option<((usize, u64), Instant)> = None;
    loop {
        let views = join_all(nodes.iter().map(|&i| sys.view(i, STABLE_REQUEST_TIMEOUT))).await;
        let now = Instant::now();
        match agreement(nodes, &views) {
            Some(a) => match agreed {
                Some((prev, since)) if prev == a => {
                    if now - since >= timing.settle() {
                        return Ok(a);
                    }
                }
                _ => agreed = Some((a, now)),
            },
            None => agreed = None,
        }
        if started.elapsed() > bound {
            bail!(
                "{}: no stable leader among nodes {nodes:?} within {bound:?}: {views:?}",
                sys.name()
            );
        }
        sleep(STABLE_POLL).await;
    }
}

/// The (leader, term) all of `views` agree on, if they do and the leader,
/// one of `nodes`, says it leads.
fn agreement(nodes: &[usize], views: &[Option<View>]) -> Option<(usize, u64)> {
    let first = (*views.first()?)?;
    let leader = first.leader?;
    let all_agree = views
        .iter()
        .all(|v| matches!(v, Some(v) if v.leader == Some(leader) && v.term == first.term));
    let pos = nodes.iter().position(|&n| n == leader)?;
    (all_agree && views[pos]?.is_leader).then_some((leader, first.term))
}

/// Polls each of `survivors` on its own loop until one says it leads a term
/// above `after_term`. Returns (node, term, elapsed since `since`, mean poll
/// period, mean round trip).
async fn detect<S: System>(
    sys: &S,
    survivors: &[usize],
    after_term: u64,
    since: Instant,
    bound: Duration,
) -> anyhow::Result<(usize, u64, Duration, f64, f64)> {
    let polls = Cell::new(0u64);
    let rtt_total = Cell::new(Duration::ZERO);
    let loops = survivors.iter().map(|&i| {
        let (polls, rtt_total) = (&polls, &rtt_total);
        Box::pin(async move {
            loop {
                let sent = Instant::now();
                let v = sys.view(i, DETECT_REQUEST_TIMEOUT).await;
                let got = Instant::now();
                polls.set(polls.get() + 1);
                rtt_total.set(rtt_total.get() + (got - sent));
                if let Some(v) = v.filter(|v| v.is_leader && v.term > after_term) {
                    return (i, v.term, got);
                }
                // tokio timers fire on the next whole millisecond after the
                // deadline, so aim half a tick early to keep the period near DETECT_POLL.
                sleep_until(sent + DETECT_POLL.saturating_sub(TIMER_TICK_SLACK)).await;
            }
        })
    });
    let ((i, term, at), _, _) =
        tokio::time::timeout(bound, select_all(loops)).await.with_context(|| {
            format!("{}: no new leader after term {after_term} within {bound:?}", sys.name())
        })?;
    let elapsed = at - since;
    let n = polls.get().max(1) as f64;
    let period = elapsed.as_secs_f64() * 1000.0 * survivors.len() as f64 / n;
    let rtt = rtt_total.get().as_secs_f64() * 1000.0 / n;
    Ok((i, term, elapsed, period, rtt))
}

/// Sum of the survivors' round counters, when every one answers.
async fn rounds<S: System>(sys: &S, nodes: &[usize]) -> Option<Rounds> {
    let all: Option<Vec<Rounds>> =
        join_all(nodes.iter().map(|&i| sys.rounds(i))).await.into_iter().collect();
    all.map(|r| r.into_iter().fold(Rounds::default(), |a, b| a + b))
}

/// Runs one trial on a cluster whose nodes are all running.
pub async fn trial<S: System>(sys: &mut S, stop: Stop, timing: Timing) -> anyhow::Result<Trial> {
    let all: Vec<usize> = (0..sys.len()).collect();
    let (leader, term_before) = wait_stable(sys, &all, timing).await?;
    let survivors: Vec<usize> = all.iter().copied().filter(|&i| i != leader).collect();
    let rounds_before = rounds(sys, &survivors).await;

    let signal = match stop {
        Stop::Kill | Stop::Spy | Stop::Restart => Signal::SIGKILL,
        Stop::Graceful => Signal::SIGTERM,
    };
    let incarnation = match stop {
        Stop::Spy | Stop::Restart => sys.incarnation(leader).await,
        Stop::Kill | Stop::Graceful => None,
    };
    // A system that keeps no incarnation (etcd) is only killed.
    let restart_at_once = matches!((stop, incarnation), (Stop::Restart, Some(_)));
    let signalled_at = humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string();
    let since = Instant::now();
    sys.proc(leader).signal(signal)?;
    let (new_leader, term_after, took, period, rtt) = match (stop, incarnation) {
        (Stop::Restart, Some(_)) => {
            // systemd or a supervisor: a new process once the old one is reaped.
            sys.proc(leader).wait_exit(EXIT_TIMEOUT).await?;
            sys.start(leader)?;
            detect(sys, &survivors, term_before, since, timing.bound()).await?
        }
        (Stop::Spy, Some(incarnation)) => {
            // The supervisor: it knows once the process is reaped.
            sys.proc(leader).wait_exit(EXIT_TIMEOUT).await?;
            sys.report_dead(leader, incarnation, &survivors).await?;
            detect(sys, &survivors, term_before, since, timing.bound()).await?
        }
        _ => {
            let found = detect(sys, &survivors, term_before, since, timing.bound()).await?;
            sys.proc(leader).wait_exit(EXIT_TIMEOUT).await?;
            found
        }
    };

    // Let the survivors settle before reading counters: a late extra round counts too.
    let (_, term_settled) = wait_stable(sys, &survivors, timing).await?;
    let rounds_after = rounds(sys, &survivors).await;
    let delta = rounds_before.zip(rounds_after);

    if !restart_at_once {
        sys.start(leader)?;
    }
    let (_, term_rejoined) = wait_stable(sys, &all, timing).await?;
    Ok(Trial {
        signalled_at,
        failover_ms: took.as_secs_f64() * 1000.0,
        stopped: leader + 1,
        new_leader: new_leader + 1,
        term_before,
        term_after,
        elections: delta.map(|(b, a)| a.elections.saturating_sub(b.elections)),
        pre_votes: delta.map(|(b, a)| a.pre_votes.saturating_sub(b.pre_votes)),
        rejoin_disturbed: term_rejoined != term_settled,
        poll_period_ms: period,
        poll_rtt_ms: rtt,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(leader: Option<usize>, term: u64, is_leader: bool) -> Option<View> {
        Some(View { leader, term, is_leader })
    }

    #[test]
    fn agreement_needs_every_node_and_a_self_declared_leader() {
        let nodes = [0, 1, 2];
        let ok = [v(Some(1), 3, false), v(Some(1), 3, true), v(Some(1), 3, false)];
        assert_eq!(agreement(&nodes, &ok), Some((1, 3)));
        let silent = [v(Some(1), 3, false), v(Some(1), 3, true), None];
        assert_eq!(agreement(&nodes, &silent), None);
        let terms = [v(Some(1), 3, false), v(Some(1), 3, true), v(Some(1), 4, false)];
        assert_eq!(agreement(&nodes, &terms), None);
        let not_leading = [v(Some(1), 3, false), v(Some(1), 3, false), v(Some(1), 3, false)];
        assert_eq!(agreement(&nodes, &not_leading), None);
        // The named leader is not among the nodes asked (it was just killed).
        assert_eq!(agreement(&[0, 2], &[v(Some(1), 3, false), v(Some(1), 3, false)]), None);
        assert_eq!(agreement(&[0, 2], &[v(Some(2), 4, false), v(Some(2), 4, true)]), Some((2, 4)));
    }
}
