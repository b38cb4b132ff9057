//! Leading as an application: [`LeaderElector`] in the spirit of client-go's
//! `leaderelection` (callbacks with a leading context that is cancelled on
//! loss), and [`LeaderLatch`] in the spirit of Curator's (`has_leadership`,
//! `await_leadership`).

use crate::election::{Election, Leader, Observed};
use crate::error::Error;
use crate::session::{Loss, Session, SessionWatch};
use crate::store::{Candidacy, Store};
use futures_util::StreamExt;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// Pause before a [`LeaderLatch`] campaigns again after an attempt failed;
/// it doubles up to [`LATCH_RETRY_MAX`].
pub const LATCH_RETRY_MIN: Duration = Duration::from_millis(100);
/// Longest pause between a [`LeaderLatch`]'s attempts.
pub const LATCH_RETRY_MAX: Duration = Duration::from_secs(5);

/// What a leadership started with.
#[derive(Clone, Debug)]
pub struct Leading {
    /// The fencing token: larger than every earlier leadership's of this
    /// name. Give it to every resource the leader writes to.
    pub token: u64,
    /// The leading context: cancelled when the leadership ends, at the
    /// session's deadline at the latest (before any successor can be
    /// elected), or when the elector is stopped.
    pub cancel: CancellationToken,
    /// The session's deadline, as it moves on with each renewal.
    pub session: SessionWatch,
}

impl Leading {
    /// Whether the leadership still holds: not cancelled, and the
    /// session's deadline has not passed.
    pub fn is_valid(&self) -> bool {
        !self.cancel.is_cancelled()
            && self.session.ended().is_none()
            && tokio::time::Instant::now() < self.session.deadline()
    }
}

/// Why [`LeaderElector::run`] returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// The stop token was cancelled (after leading: it resigned).
    Stopped,
    /// The session ended (while leading: leadership was lost).
    Lost(Loss),
    /// While leading, a read showed another token (or none) leading: the
    /// candidacy's key was deleted by someone else
    /// ([`Election::deposed`]).
    Deposed,
}

impl fmt::Display for Ended {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ended::Stopped => f.write_str("stopped"),
            Ended::Lost(loss) => write!(f, "lost: {loss}"),
            Ended::Deposed => f.write_str("deposed: the candidacy's key was deleted"),
        }
    }
}

type StartedFn = dyn Fn(Leading) + Send + Sync;
type StoppedFn = dyn Fn(Ended) + Send + Sync;
type NewLeaderFn = dyn Fn(Option<Leader>) + Send + Sync;

/// Campaigns in one election and calls back as leadership comes and goes.
///
/// ```no_run
/// # async fn example(store: std::sync::Arc<dyn tenure_elect::Store>) -> Result<(), tenure_elect::Error> {
/// // `store`: tenure's cluster (`tenure_client::TenureStore`), etcd or ZooKeeper.
/// use tenure_elect::{LeaderElector, Leading};
/// use tokio_util::sync::CancellationToken;
/// let stop = CancellationToken::new();
/// let elector = LeaderElector::new(store, "scheduler", "host-a:9000")?
///     .on_started_leading(|Leading { token, cancel, .. }| {
///         tokio::spawn(async move {
///             // Work with `token` until `cancel` fires.
///             cancel.cancelled().await;
///         });
///     })
///     .on_stopped_leading(|why| eprintln!("stopped leading: {why}"))
///     .on_new_leader(|leader| eprintln!("leader now: {leader:?}"));
/// let ended = elector.run(stop).await?;
/// # Ok(()) }
/// ```
pub struct LeaderElector {
    election: Election,
    value: String,
    ttl: Duration,
    started: Option<Arc<StartedFn>>,
    stopped: Option<Arc<StoppedFn>>,
    new_leader: Option<Arc<NewLeaderFn>>,
    /// Whether the TTL was checked against the store's failover time.
    failover_checked: AtomicBool,
}

impl fmt::Debug for LeaderElector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaderElector")
            .field("election", &self.election.name())
            .field("ttl", &self.ttl)
            .finish()
    }
}

/// The session TTL of an elector unless [`LeaderElector::ttl`] says
/// otherwise: 10 s (etcd's `concurrency` sessions default to 60 s): a
/// crashed leader is replaced about 10 s later, at one renewal every 3.3 s.
pub const DEFAULT_TTL: Duration = Duration::from_secs(10);

impl LeaderElector {
    /// An elector for the election `name` of `store` (tenure, etcd,
    /// ZooKeeper), campaigning with `value`.
    pub fn new(store: Arc<dyn Store>, name: &str, value: &str) -> Result<Self, Error> {
        crate::election::check_value(value)?;
        Ok(LeaderElector {
            election: Election::new(store, name)?,
            value: value.to_string(),
            ttl: DEFAULT_TTL,
            started: None,
            stopped: None,
            new_leader: None,
            failover_checked: AtomicBool::new(false),
        })
    }

    /// The TTL of its sessions (default [`DEFAULT_TTL`]).
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// Called when it starts leading, with the token and the leading
    /// context. Called on the elector's task: spawn the work, do not block.
    pub fn on_started_leading(mut self, f: impl Fn(Leading) + Send + Sync + 'static) -> Self {
        self.started = Some(Arc::new(f));
        self
    }

    /// Called when a leadership ends, after its context was cancelled.
    pub fn on_stopped_leading(mut self, f: impl Fn(Ended) + Send + Sync + 'static) -> Self {
        self.stopped = Some(Arc::new(f));
        self
    }

    /// Called with every change of the election's leader (its value and
    /// token), and None when no one leads, while [`LeaderElector::run`] runs.
    pub fn on_new_leader(mut self, f: impl Fn(Option<Leader>) + Send + Sync + 'static) -> Self {
        self.new_leader = Some(Arc::new(f));
        self
    }

    /// The election.
    pub fn election(&self) -> &Election {
        &self.election
    }

    /// One term: grants a session, campaigns, waits to lead, leads until
    /// the session ends or `stop` is cancelled, then resigns and closes
    /// the session. Returns why it ended; errors are failures to reach the
    /// cluster or refusals before leading. Call it again to campaign again.
    pub async fn run(&self, stop: CancellationToken) -> Result<Ended, Error> {
        let observing = CancellationToken::new();
        let _stop_observing = observing.clone().drop_guard();
        if let Some(f) = self.new_leader.clone() {
            let mut observer = self.election.observe()?;
            let observing = observing.clone();
            tokio::spawn(async move {
                let mut changes = LeaderChanges::default();
                loop {
                    let next = tokio::select! {
                        _ = observing.cancelled() => return,
                        n = observer.next() => n,
                    };
                    match next {
                        Some(Ok(observed)) => {
                            if let Some(leader) = changes.update(observed) {
                                f(leader);
                            }
                        }
                        Some(Err(e)) => {
                            tracing::warn!(error = %e, "observing the election failed");
                            return;
                        }
                        None => return,
                    }
                }
            });
        }
        let session = Session::start(self.election.store().clone(), self.ttl).await?;
        if !self.failover_checked.swap(true, Ordering::Relaxed) {
            // Once per elector, in the background: a TTL too short to ride
            // out a failover of tenure's cluster is said, not refused.
            let store = self.election.store().clone();
            let ttl = session.ttl();
            tokio::spawn(async move {
                let plan = |ttl| crate::failover::Plan {
                    ttl,
                    interval: store.renew_interval(ttl),
                    lag: store.renewal_lag(ttl),
                    grace: Duration::ZERO,
                };
                if let Some(w) = crate::failover::warning(&*store, ttl, plan).await {
                    tracing::warn!("{w}");
                }
            });
        }
        let (token, candidacy) = tokio::select! {
            _ = stop.cancelled() => {
                let _ = session.close().await;
                return Ok(Ended::Stopped);
            }
            t = self.campaign_and_wait(&session) => match t {
                Ok(t) => t,
                Err(Error::SessionEnded { reason, .. }) => return Ok(Ended::Lost(reason)),
                Err(e) => {
                    let _ = session.close().await;
                    return Err(e);
                }
            },
        };
        let cancel = CancellationToken::new();
        if let Some(f) = &self.started {
            f(Leading { token, cancel: cancel.clone(), session: session.watch() });
        }
        let ended = tokio::select! {
            _ = stop.cancelled() => Ended::Stopped,
            loss = session.lost() => Ended::Lost(loss),
            why = self.election.deposed(&session, &candidacy) => {
                tracing::warn!(election = %self.election.name(), %why, "deposed");
                Ended::Deposed
            }
        };
        cancel.cancel();
        if ended == Ended::Stopped {
            if let Err(e) = self.election.resign(&candidacy).await {
                tracing::debug!(error = %e, "resigning failed; closing the session ends it too");
            }
        }
        let _ = session.close().await;
        if let Some(f) = &self.stopped {
            f(ended);
        }
        Ok(ended)
    }

    /// Campaigns and waits until it leads: the token and the candidacy.
    async fn campaign_and_wait(&self, session: &Session) -> Result<(u64, Candidacy), Error> {
        let candidacy = self.election.campaign(session, &self.value).await?;
        let token = match candidacy.leader {
            true => candidacy.token,
            false => self.election.wait_until_leader(session, &candidacy).await?,
        };
        Ok((token, candidacy))
    }
}

/// A latch on an election: campaigns in the background, again after every
/// loss, until closed; says whether it leads now.
#[derive(Debug)]
pub struct LeaderLatch {
    state: watch::Receiver<Option<Leading>>,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl LeaderLatch {
    /// Starts campaigning in `name` of `store` (tenure, etcd, ZooKeeper)
    /// with `value` and sessions of `ttl`.
    pub fn start(
        store: Arc<dyn Store>,
        name: &str,
        value: &str,
        ttl: Duration,
    ) -> Result<LeaderLatch, Error> {
        crate::session::check_ttl(ttl)?;
        let (tx, rx) = watch::channel(None);
        let tx = Arc::new(tx);
        let (on_start, on_stop) = (tx.clone(), tx.clone());
        let elector = LeaderElector::new(store, name, value)?
            .ttl(ttl)
            .on_started_leading(move |leading| {
                on_start.send_replace(Some(leading));
            })
            .on_stopped_leading(move |_| {
                on_stop.send_replace(None);
            });
        let stop = CancellationToken::new();
        let task = tokio::spawn(latch_loop(elector, stop.clone()));
        Ok(LeaderLatch { state: rx, stop, task })
    }

    /// Whether it leads now: elected, and the session's deadline has not
    /// passed.
    pub fn has_leadership(&self) -> bool {
        self.state.borrow().as_ref().is_some_and(Leading::is_valid)
    }

    /// The leadership now: its token and context.
    pub fn leadership(&self) -> Option<Leading> {
        self.state.borrow().clone().filter(Leading::is_valid)
    }

    /// Waits until it leads, at most `timeout`; whether it does.
    pub async fn await_leadership(&self, timeout: Duration) -> bool {
        let mut state = self.state.clone();
        let leading = async {
            loop {
                if self.has_leadership() {
                    return;
                }
                if state.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        };
        tokio::time::timeout(timeout, leading).await.is_ok()
    }

    /// Stops campaigning: resigns if it leads, closes its session.
    pub async fn close(self) {
        self.stop.cancel();
        let _ = self.task.await;
    }
}

async fn latch_loop(elector: LeaderElector, stop: CancellationToken) {
    let mut pause = LATCH_RETRY_MIN;
    while !stop.is_cancelled() {
        match elector.run(stop.clone()).await {
            Ok(Ended::Stopped) => return,
            Ok(ended @ (Ended::Lost(_) | Ended::Deposed)) => {
                tracing::info!(election = %elector.election.name(), %ended, "campaigning again");
                // Not at once: a store whose connection flaps would be
                // asked for a session in a tight loop.
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(LATCH_RETRY_MIN) => {}
                }
                pause = LATCH_RETRY_MIN;
            }
            Err(e) => {
                tracing::warn!(election = %elector.election.name(), error = %e, "campaign failed");
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(pause) => {}
                }
                pause = (pause * 2).min(LATCH_RETRY_MAX);
            }
        }
    }
}

/// The changes of leader passed on to `on_new_leader`: after a `Missed`,
/// the state that follows is passed on only if it differs from the last.
#[derive(Debug, Default)]
struct LeaderChanges {
    /// The leader last passed on (`Some(None)`: no leader).
    told: Option<Option<Leader>>,
}

impl LeaderChanges {
    /// What to pass on for `observed`, if anything.
    fn update(&mut self, observed: Observed) -> Option<Option<Leader>> {
        let leader = match observed {
            Observed::Leader { session, value, token, .. } => {
                Some(Leader { session, value, token })
            }
            Observed::NoLeader { .. } => None,
            // The state follows.
            Observed::Missed { .. } => return None,
        };
        if self.told.as_ref() == Some(&leader) {
            return None;
        }
        self.told = Some(leader.clone());
        Some(leader)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leader_is_passed_on_once_even_after_a_gap() {
        let mut c = LeaderChanges::default();
        let at = |session, revision| Observed::Leader {
            session,
            value: "v".into(),
            token: session,
            revision,
        };
        let missed = || Observed::Missed { compacted: 1, current: 2 };
        let passed = |l: Option<Option<Leader>>| l.map(|l| l.map(|l| l.session));
        assert_eq!(passed(c.update(at(1, 1))), Some(Some(1)));
        assert_eq!(passed(c.update(missed())), None);
        assert_eq!(passed(c.update(at(1, 9))), None, "the same leader after a gap");
        assert_eq!(passed(c.update(at(2, 10))), Some(Some(2)));
        assert_eq!(passed(c.update(Observed::NoLeader { revision: 11 })), Some(None));
        assert_eq!(passed(c.update(missed())), None);
        assert_eq!(passed(c.update(Observed::NoLeader { revision: 20 })), None);
        assert_eq!(passed(c.update(at(3, 21))), Some(Some(3)));
    }
}
