//! Sessions: a lease on the cluster, kept alive by renewals, with a local
//! deadline before which no successor can be granted anything it held.
//!
//! # The deadline
//!
//! The tenure leader answers a renewal with a full TTL counted, on its own
//! clock, from when it answered, which is after the client sent it; a new
//! tenure leader grants every session a fresh TTL from when it became
//! ready, which is also after every renewal an earlier leader answered, or
//! for a session recorded silent what was left of its TTL, a silence that
//! began after its last answered renewal (docs/ELECTIONS.md, "Deadlines
//! across leader changes"). So the session cannot expire on the servers before
//! `TTL` has passed on the server's clock since the send time of the last
//! renewal that succeeded. Measured on the client's monotonic clock, that
//! span may look shorter by the clocks' rate difference: with every clock
//! within `1 ± ρ` of real time, a span `T` on one clock is at least
//! `T (1 − ρ) / (1 + ρ)` on another. The client therefore trusts its
//! session until
//!
//! ```text
//! deadline = last successful renewal's send time + TTL (1 − ρ) / (1 + ρ)
//! ```
//!
//! with `ρ` = [`DRIFT_PPM`], and [`Session::lost`] fires there at the
//! latest. See [`deadline_after`].
//!
//! The same rule holds for every [`Store`] (docs/STORES.md §3): a session
//! renews through its store, which says when each renewal was sent (the
//! instant its answer proves the store counted from) and which TTL it
//! granted; the deadline is computed here, once for all stores.
//!
//! # Ownership
//!
//! On a tenure cluster with API tokens, a session belongs to the token
//! that granted it (docs/SECURITY.md, "Sessions belong to a token"): only
//! that token, or an admin token, may renew, revoke, campaign, resign or
//! proclaim with it, or attach keys to it. Another token's call is refused
//! with 403 and does nothing; tenure's store returns it as
//! [`StoreError::Refused`], whose message names the session, its owner and
//! the caller's token (renewals refused so fail until the session's
//! deadline, when it is lost). One token holds at most a quarter of the
//! cluster's sessions at once (429 beyond).

pub use crate::deadline::{deadline_after, renew_interval, trusted_span, DRIFT_PPM};
use crate::error::Error;
pub use crate::error::Loss;
use crate::store::{SessionId, Store, StoreError};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Shortest TTL the servers grant (`MIN_TTL_MS` of the store).
pub const MIN_TTL: Duration = Duration::from_millis(500);
/// Longest TTL the servers grant (`MAX_TTL_MS` of the store: one day).
pub const MAX_TTL: Duration = Duration::from_millis(86_400_000);
/// Shortest pause before a failed renewal is tried again; it doubles after
/// each failure up to [`RENEW_RETRY_PAUSE_MAX`], and never runs past the
/// session's deadline.
pub const RENEW_RETRY_PAUSE: Duration = Duration::from_millis(25);
/// Longest pause between two tries of a failed renewal.
pub const RENEW_RETRY_PAUSE_MAX: Duration = Duration::from_millis(200);
/// tokio's timers fire up to a millisecond after the instant asked (they
/// round up to their 1 ms tick), and the thread that runs the woken task
/// may start a little later still: [`SessionWatch::stale`] (and so
/// [`Session::lost`]) asks this much earlier, so that it returns before
/// the deadline on a machine that is not starved. (A longer stall is a
/// pause, which no timer can cover: see the fencing token.)
pub const TIMER_SLACK: Duration = Duration::from_millis(5);
/// How long one renewal may take before it counts as failed (and is tried
/// again, within the deadline).
pub const RENEW_TIMEOUT: Duration = Duration::from_secs(2);
/// The longest a revoke may take: past a session's TTL it has ended by
/// itself, so a revoke waits at most that long (as etcd's `Session.Close`
/// does), and never longer than this, however long the TTL: a cluster
/// that answers no revoke in 10 s (five request timeouts of tenure's
/// client) is not answering.
const REVOKE_TIMEOUT_MAX: Duration = Duration::from_secs(10);

/// Checks that `ttl` is within what the servers grant.
pub fn check_ttl(ttl: Duration) -> Result<(), Error> {
    if ttl < MIN_TTL || ttl > MAX_TTL {
        return Err(Error::Invalid(format!(
            "a session's TTL must be between {} ms and {} ms, not {} ms",
            MIN_TTL.as_millis(),
            MAX_TTL.as_millis(),
            ttl.as_millis()
        )));
    }
    Ok(())
}

/// What the keepalive task publishes.
#[derive(Clone, Copy, Debug)]
struct State {
    /// Until when the session is trusted.
    deadline: Instant,
    /// Set once it ended.
    ended: Option<Loss>,
}

/// A session: a lease on a store with a TTL, renewed in the background
/// every TTL/3 (for tenure's store: against any endpoint, the next one when
/// one fails) until it is closed, dropped or lost. Candidacies in elections
/// belong to a session and end with it.
#[derive(Debug)]
pub struct Session {
    store: Arc<dyn Store>,
    id: SessionId,
    ttl: Duration,
    state: watch::Receiver<State>,
    /// Stops the keepalive task.
    stop: CancellationToken,
}

impl Session {
    /// Grants a session of about `ttl` (500 ms to one day) on `store` and
    /// starts renewing it. The store may grant another TTL (etcd rounds up
    /// to whole seconds, ZooKeeper negotiates): [`Session::ttl`] is the one
    /// granted. Needs a tokio runtime.
    pub async fn start(store: Arc<dyn Store>, ttl: Duration) -> Result<Session, Error> {
        check_ttl(ttl)?;
        let granted = store.grant(ttl).await.map_err(Error::from)?;
        let state = State { deadline: granted.deadline(), ended: None };
        let (tx, rx) = watch::channel(state);
        let stop = CancellationToken::new();
        let id = granted.session;
        if granted.ttl != ttl {
            // etcd takes whole seconds (the etcd store rounds up) and
            // raises a lease to 1.5 of its election timeouts (2 s by
            // default); ZooKeeper keeps a session within 2 to 20 of its
            // ticks. The user chose the TTL for its failover time, so say so.
            tracing::warn!(
                session = %id,
                asked = ?ttl,
                granted = ?granted.ttl,
                "the store granted another session TTL than asked for: a holder that dies \
                 is replaced about the granted TTL after its last renewal"
            );
        }
        tokio::spawn(keepalive(store.clone(), id, granted.ttl, granted.sent, tx, stop.clone()));
        Ok(Session { store, id, ttl: granted.ttl, state: rx, stop })
    }

    /// Its id in its store.
    pub fn id(&self) -> u64 {
        self.id.0
    }

    /// Its id in its store, typed.
    pub fn session_id(&self) -> SessionId {
        self.id
    }

    /// Its TTL, as the store granted it.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// The store it lives on.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// How often it is renewed ([`Store::renew_interval`]).
    pub fn renew_interval(&self) -> Duration {
        self.store.renew_interval(self.ttl)
    }

    /// How far before a renewal's send time its deadline rests
    /// ([`Store::renewal_lag`]): after a renewal sent at `s`, the deadline
    /// is `s − lag + TTL (1 − ρ)/(1 + ρ)`.
    pub fn renewal_lag(&self) -> Duration {
        self.store.renewal_lag(self.ttl)
    }

    /// Until when it is trusted now (moves on with each renewal).
    pub fn deadline(&self) -> Instant {
        self.state.borrow().deadline
    }

    /// Why it ended, if it did (a deadline that passed counts as soon as
    /// it passed, even before the keepalive task noticed).
    pub fn ended(&self) -> Option<Loss> {
        let s = *self.state.borrow();
        s.ended.or((Instant::now() >= s.deadline).then_some(Loss::DeadlinePassed))
    }

    /// A new receiver of the session's deadline and end, for a task that
    /// must not borrow the session (see [`SessionWatch`]).
    pub fn watch(&self) -> SessionWatch {
        SessionWatch { state: self.state.clone() }
    }

    /// Returns when the session ended, at its deadline at the latest.
    pub async fn lost(&self) -> Loss {
        self.watch().stale(Duration::ZERO).await
    }

    /// Stops renewing and revokes the session on the cluster: its
    /// candidacies end at once and successors are woken. A session that
    /// no longer exists there is not an error. Waits for the cluster's
    /// answer up to the session's TTL, 10 s at most (after the TTL the
    /// session ends by itself anyway).
    pub async fn close(self) -> Result<(), Error> {
        self.stop.cancel();
        revoke(&*self.store, self.id, self.ttl).await.map_err(Error::from)
    }
}

impl Drop for Session {
    /// Stops renewing (the cluster ends the session after its TTL); call
    /// [`Session::close`] to end it at once.
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// A session's deadline and end, watchable without the session.
#[derive(Clone, Debug)]
pub struct SessionWatch {
    state: watch::Receiver<State>,
}

impl SessionWatch {
    /// Until when the session is trusted now.
    pub fn deadline(&self) -> Instant {
        self.state.borrow().deadline
    }

    /// Why the session ended, if the keepalive task said so (a deadline
    /// that passed is [`SessionWatch::deadline`]'s to tell).
    pub fn ended(&self) -> Option<Loss> {
        self.state.borrow().ended
    }

    /// Returns at the next change: a renewal moved the deadline, or the
    /// session ended. Never returns once the session is gone.
    pub async fn changed(&mut self) {
        if self.state.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// Returns when the session ended or when `margin` before its deadline
    /// has come without a renewal moving it: the moment to start stopping
    /// work that must be over by the deadline (`margin` zero: the deadline
    /// itself). A session that ended returns at once.
    pub async fn stale(&mut self, margin: Duration) -> Loss {
        loop {
            let s = *self.state.borrow_and_update();
            if let Some(loss) = s.ended {
                return loss;
            }
            let at = s.deadline.checked_sub(margin + TIMER_SLACK).unwrap_or(s.deadline);
            tokio::select! {
                _ = tokio::time::sleep_until(at) => {
                    let now = *self.state.borrow();
                    if now.ended.is_none() && now.deadline == s.deadline {
                        return Loss::DeadlinePassed;
                    }
                }
                changed = self.state.changed() => {
                    if changed.is_err() {
                        // The keepalive task is gone: no renewal can move
                        // the deadline any more.
                        let s = *self.state.borrow();
                        if let Some(loss) = s.ended {
                            return loss;
                        }
                        tokio::time::sleep_until(at).await;
                        return Loss::DeadlinePassed;
                    }
                }
            }
        }
    }
}

/// Revokes `id`, a session of `ttl`, within that TTL (at most
/// [`REVOKE_TIMEOUT_MAX`]).
async fn revoke(store: &dyn Store, id: SessionId, ttl: Duration) -> Result<(), StoreError> {
    let bound = ttl.min(REVOKE_TIMEOUT_MAX);
    match tokio::time::timeout(bound, store.revoke(id)).await {
        Ok(revoked) => revoked,
        Err(_) => Err(StoreError::NoAnswer {
            endpoint: store.kind().to_string(),
            sent: true,
            source: format!("revoking took over {} ms", bound.as_millis()).into(),
        }),
    }
}

/// Renews session `id` every [`Store::renew_interval`] (TTL/3 by default)
/// from the last successful renewal's send time; publishes each new deadline, and the loss (the deadline passed,
/// the store said the session is gone, or its own loss signal fired).
async fn keepalive(
    store: Arc<dyn Store>,
    id: SessionId,
    ttl: Duration,
    mut last_sent: Instant,
    tx: watch::Sender<State>,
    stop: CancellationToken,
) {
    let end = |loss: Loss| {
        tx.send_modify(|s| {
            if s.ended.is_none() {
                s.ended = Some(loss);
            }
        })
    };
    let suspended = store.suspended(id);
    tokio::pin!(suspended);
    let loss = loop {
        tokio::select! {
            _ = stop.cancelled() => return end(Loss::Closed),
            why = &mut suspended => break suspension(id, why),
            _ = tokio::time::sleep_until(last_sent + store.renew_interval(ttl)) => {}
        }
        let renewed = tokio::select! {
            _ = stop.cancelled() => return end(Loss::Closed),
            why = &mut suspended => break suspension(id, why),
            r = renew(&*store, id, &tx) => r,
        };
        match renewed {
            Ok(sent) => last_sent = sent,
            Err(loss) => break loss,
        }
    };
    end(loss);
    if loss != Loss::Gone {
        // Best effort: a successor need not wait for the expiry. But never
        // before the deadline: the holder's work may run until then (`tenure
        // run`'s guard stops its command by the deadline at the latest, a
        // grace after SIGTERM), and a loss the store signals (ZooKeeper's
        // Disconnected) comes earlier; a revoke at once would let a successor
        // lead while the old holder still works. `close` revokes at once: its
        // caller has stopped the work.
        let deadline = tx.borrow().deadline;
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep_until(deadline) => {}
        }
        let _ = revoke(&*store, id, ttl).await;
    }
}

/// The loss of a session the store suspended.
fn suspension(id: SessionId, why: String) -> Loss {
    tracing::warn!(session = %id, %why, "the store suspended the session");
    Loss::Suspended
}

/// Renews until one renewal succeeds (its own send time) or the session is
/// lost; each new deadline is published. A renewal that failed (every
/// endpoint refused or did not answer: a tenure failover) is tried again
/// after [`RENEW_RETRY_PAUSE`], doubling up to [`RENEW_RETRY_PAUSE_MAX`],
/// until the new leader answers or the deadline passes: not at the next
/// renewal interval.
async fn renew(
    store: &dyn Store,
    id: SessionId,
    tx: &watch::Sender<State>,
) -> Result<Instant, Loss> {
    let mut pause = RENEW_RETRY_PAUSE;
    loop {
        let deadline = tx.borrow().deadline;
        let sent = Instant::now();
        if sent >= deadline {
            tracing::warn!(session = %id, "no renewal succeeded before the deadline");
            return Err(Loss::DeadlinePassed);
        }
        let timeout = (deadline - sent).min(RENEW_TIMEOUT);
        match tokio::time::timeout(timeout, store.renew(id)).await {
            Ok(Ok(renewal)) if renewal.session == id && renewal.sent <= Instant::now() => {
                let next = renewal.deadline();
                tx.send_modify(|s| s.deadline = s.deadline.max(next));
                return Ok(sent);
            }
            Ok(Ok(renewal)) => {
                tracing::warn!(session = %id, ?renewal, "a renewal about another session or from the future");
            }
            Ok(Err(StoreError::Gone(why))) => {
                tracing::warn!(session = %id, %why, "the store says the session is gone");
                return Err(Loss::Gone);
            }
            Ok(Err(e)) => tracing::debug!(session = %id, error = %e, "renewal failed"),
            Err(_) => tracing::debug!(session = %id, "renewal timed out"),
        }
        let left = deadline.saturating_duration_since(Instant::now());
        tokio::time::sleep(pause.min(left)).await;
        pause = (pause * 2).min(RENEW_RETRY_PAUSE_MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deadline_is_the_ttl_shrunk_by_the_largest_drift_bound() {
        assert_eq!(DRIFT_PPM, 100_000);
        // 10 s × 0.9 / 1.1 = 8.1818… s.
        assert_eq!(trusted_span(Duration::from_secs(10)), Duration::from_nanos(8_181_818_181));
        let sent = Instant::now();
        let ttl = Duration::from_millis(1000);
        let d = deadline_after(sent, ttl);
        assert_eq!(d - sent, Duration::from_nanos(818_181_818));
        // Measured on a clock up to 10% slow, the span still ends before a
        // server clock up to 10% fast counts the whole TTL.
        let client_real_max = (d - sent).as_secs_f64() / 0.9;
        let server_real_min = ttl.as_secs_f64() / 1.1;
        assert!(client_real_max <= server_real_min + 1e-9, "{client_real_max} {server_real_min}");
    }

    #[test]
    fn two_renewals_fit_before_the_deadline() {
        for ms in [500, 1000, 10_000, 86_400_000] {
            let ttl = Duration::from_millis(ms);
            assert!(2 * renew_interval(ttl) < trusted_span(ttl), "{ms}");
        }
    }

    #[test]
    fn ttls_outside_the_servers_range_are_refused() {
        assert!(check_ttl(Duration::from_millis(499)).is_err());
        assert!(check_ttl(Duration::from_millis(500)).is_ok());
        assert!(check_ttl(Duration::from_millis(86_400_000)).is_ok());
        let err = check_ttl(Duration::from_millis(86_400_001)).unwrap_err().to_string();
        assert!(err.contains("between 500 ms and 86400000 ms"), "{err}");
    }

    #[tokio::test(start_paused = true)]
    async fn stale_fires_margin_before_the_deadline_unless_a_renewal_moves_it() {
        let start = Instant::now();
        let ttl = Duration::from_secs(10);
        let (tx, rx) = watch::channel(State { deadline: deadline_after(start, ttl), ended: None });
        let mut w = SessionWatch { state: rx };
        let margin = Duration::from_secs(1);
        // A renewal sent at 3 s succeeds at 3.1 s: the deadline moves on.
        let renew = async {
            tokio::time::sleep(Duration::from_millis(3100)).await;
            tx.send_modify(|s| s.deadline = deadline_after(start + Duration::from_secs(3), ttl));
        };
        let (loss, ()) = tokio::join!(w.stale(margin), renew);
        assert_eq!(loss, Loss::DeadlinePassed);
        let fired = Instant::now() - start;
        let due = Duration::from_secs(3) + trusted_span(ttl) - margin;
        assert!(fired <= due && fired + TIMER_SLACK >= due, "{fired:?} {due:?}");
        // An end reported by the keepalive task is returned at once.
        tx.send_modify(|s| s.ended = Some(Loss::Gone));
        assert_eq!(w.stale(margin).await, Loss::Gone);
    }
}
