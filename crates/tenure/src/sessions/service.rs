//! The sessions service: the lease clock on the ready leader, its expiry
//! timer and the renewals it answers.
//!
//! One task ([`run`]) owns a [`LeaseClock`] and follows this node's
//! leadership of the log ([`Replicated::ready_leader`]):
//!
//! * **Start and stop.** When this node becomes the ready leader of token
//!   `T`, the clock starts from every lease of the store as applied then,
//!   each with a fresh, full TTL (no session expires because tenure changed
//!   leader); when it stops being that leader, the clock stops.
//! * **Grants and ends.** The store has no event hook. After each applied
//!   advance the service looks at the lease ids above the highest it knows
//!   (`Store::last_lease`, ids only grow): `O(grants)` per advance. A lease
//!   that ended (revoked) stays on the clock until it comes due or is
//!   renewed, and is dropped then when the store no longer has it: `O(1)`
//!   each, never a scan of all leases.
//! * **Expiry.** A timer at the clock's next deadline; each lease
//!   [`LeaseClock::due`] returns is expired with `Command::Expire` proposed
//!   by [`Replicated::propose_as`] under `T` only (a later leader never
//!   commits an expiry decided on this one's clock), at most
//!   [`MAX_EXPIRIES_IN_FLIGHT`] in flight; a proposal that failed while `T`
//!   still leads is retried ([`LeaseClock::retry`]).
//! * **Renewals** ([`SessionAsk::Renew`], a leader ask from any node),
//!   answered only under R1 (this node is the ready leader `T` the ask
//!   arrived under, and the lease is in its applied store), R2
//!   ([`Replicated::confirm_leader`] of `T` first, at most
//!   [`MAX_RENEWALS_IN_FLIGHT`] waiting for it) and R3 (the clock refuses a
//!   lease whose expiry was proposed).

use super::protocol::{SessionAnswer, SessionAsk};
use crate::metrics::Metrics;
use std::time::Duration;
use tenure_core::{FencingToken, Instant as CoreInstant};
use tenure_kv::{Command, LeaseClock, LeaseId, RenewError, Store, MAX_EXPIRIES_PER_CALL};
use tenure_node::replicated::Ask;
use tenure_node::{Committed, ReadFailure, Replicated, WriteError};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::{debug, info, warn};

/// Most `Expire` proposals in flight at once. The clock hands out at most
/// [`MAX_EXPIRIES_PER_CALL`] (64) per call; the next call waits until that
/// many fit under this cap, so a mass expiry (every client cut off) goes
/// out in chunks behind which client writes and renewals still get
/// through, never as one burst of up to `MAX_LEASES` proposals.
pub const MAX_EXPIRIES_IN_FLIGHT: usize = 2 * MAX_EXPIRIES_PER_CALL;

/// Most renewals waiting for the leadership check (R2) at once; more are
/// answered [`SessionAnswer::Busy`]. Under a valid election lease the check
/// is immediate; without one it waits for a round of acknowledgements.
pub const MAX_RENEWALS_IN_FLIGHT: usize = 4096;

/// Runs the sessions service until `stop` becomes true: the lease clock
/// while this node is the ready leader, and the answers to the asks of
/// every node. Returns at once (with a warning) if the asks were already
/// taken.
pub async fn run(kv: Replicated<Store>, metrics: Metrics, mut stop: watch::Receiver<bool>) {
    let Some(mut asks) = kv.take_asks() else {
        warn!("the sessions service cannot start: the leader asks were taken already");
        return;
    };
    let mut s = Service::new(kv, metrics);
    let mut applied = s.kv.applied();
    loop {
        let timer = s.timer();
        // Not biased: a busy store (its applied index moving all the time)
        // must not starve the asks or the timer. Every handler first
        // follows the ready-leader watch itself.
        tokio::select! {
            _ = stop.wait_for(|&s| s) => break,
            Ok(()) = s.ready.changed() => s.sync_leadership(),
            Ok(()) = applied.changed() => {
                applied.borrow_and_update();
                s.learn_grants();
            }
            Some(done) = s.expiries.join_next() => match done {
                Ok((token, id, result)) => s.expiry_done(token, id, result),
                Err(e) => warn!(error = %e, "an expiry proposal task failed"),
            },
            Some(done) = s.renewals.join_next() => match done {
                Ok((ask, id, result)) => s.renewal_confirmed(ask, id, result),
                Err(e) => warn!(error = %e, "a renewal task failed"),
            },
            Some(ask) = asks.recv() => s.on_ask(ask),
            () = sleep_until(timer) => s.expire_due(),
        }
    }
    s.clock.stop();
}

/// The service's state; only its task touches it.
struct Service {
    kv: Replicated<Store>,
    metrics: Metrics,
    ready: watch::Receiver<Option<FencingToken>>,
    /// The leadership the clock runs for.
    leading: Option<FencingToken>,
    clock: LeaseClock,
    /// The highest lease id the clock has seen granted.
    known: LeaseId,
    /// The clock's origin on this process's monotonic clock.
    base: std::time::Instant,
    /// Expiry proposals: (under token, lease, outcome).
    expiries: JoinSet<(FencingToken, LeaseId, Result<Committed, WriteError>)>,
    /// Renewals waiting for the leadership check: (the ask, lease, outcome).
    renewals: JoinSet<(Ask, LeaseId, Result<u64, ReadFailure>)>,
}

impl Service {
    fn new(kv: Replicated<Store>, metrics: Metrics) -> Self {
        let ready = kv.ready_leader();
        let mut s = Service {
            kv,
            metrics,
            ready,
            leading: None,
            clock: LeaseClock::new(),
            known: LeaseId(0),
            base: std::time::Instant::now(),
            expiries: JoinSet::new(),
            renewals: JoinSet::new(),
        };
        s.sync_leadership();
        s
    }

    fn now(&self) -> CoreInstant {
        CoreInstant::ZERO + self.base.elapsed()
    }

    /// Follows the ready-leader watch: starts the clock for a new
    /// leadership (a fresh, full TTL for every lease), stops it when this
    /// node no longer leads.
    fn sync_leadership(&mut self) {
        let now_leading = *self.ready.borrow_and_update();
        if now_leading == self.leading {
            return;
        }
        if self.leading.is_some() {
            info!(token = ?self.leading, "sessions: no longer the ready leader; lease clock stopped");
        }
        self.clock.stop();
        self.leading = None;
        let Some(token) = now_leading else { return };
        let ((leases, last), _) = self.kv.read_stale(|s| {
            let leases: Vec<(LeaseId, u64)> = s.leases().map(|l| (l.id, l.ttl_ms)).collect();
            (leases, s.last_lease())
        });
        let n = leases.len();
        let now = self.now();
        match self.clock.start(now, leases) {
            Ok(()) => {
                self.leading = Some(token);
                self.known = last;
                info!(
                    token = token.0,
                    leases = n,
                    "sessions: ready leader; every lease gets a fresh TTL"
                );
            }
            Err(e) => warn!(error = %e, "sessions: the lease clock cannot start"),
        }
    }

    /// Puts the leases granted since the last look on the clock, each
    /// with its TTL from now.
    fn learn_grants(&mut self) {
        if self.leading.is_none() {
            return;
        }
        let known = self.known;
        let ((last, granted), _) = self.kv.read_stale(|s| {
            let last = s.last_lease();
            let granted: Vec<(LeaseId, u64)> = (known.0 + 1..=last.0)
                .filter_map(|id| s.lease(LeaseId(id)).map(|l| (l.id, l.ttl_ms)))
                .collect();
            (last, granted)
        });
        self.known = last.max(known);
        let now = self.now();
        for (id, ttl_ms) in granted {
            if let Err(e) = self.clock.granted(now, id, ttl_ms) {
                debug!(error = %e, "sessions: a grant not put on the clock");
            }
        }
    }

    /// When the expiry timer fires: the clock's next deadline, while there
    /// is room for another chunk of proposals.
    fn timer(&self) -> Option<tokio::time::Instant> {
        self.leading?;
        if self.clock.in_flight() + MAX_EXPIRIES_PER_CALL > MAX_EXPIRIES_IN_FLIGHT {
            return None;
        }
        let at = self.clock.next_deadline()?;
        let since_base = Duration::from_nanos(at.as_nanos());
        Some(tokio::time::Instant::from_std(self.base + since_base))
    }

    /// Proposes the expiry of every lease due now (a chunk), under this
    /// leadership only; a lease the store no longer holds is dropped.
    fn expire_due(&mut self) {
        self.sync_leadership();
        let Some(token) = self.leading else { return };
        let now = self.now();
        let due = self.clock.due(now);
        let gone: Vec<bool> =
            self.kv.read_stale(|s| due.iter().map(|&id| s.lease(id).is_none()).collect()).0;
        for (id, gone) in due.into_iter().zip(gone) {
            if gone {
                self.clock.ended(id);
                continue;
            }
            self.metrics.session_expiry_proposed();
            let kv = self.kv.clone();
            let command = Command::Expire { lease: id }.encode();
            self.expiries.spawn(async move { (token, id, kv.propose_as(token, command).await) });
        }
    }

    /// An expiry proposal ended: the lease leaves the clock once the store
    /// no longer holds it; a failure while still leading is retried.
    fn expiry_done(
        &mut self,
        token: FencingToken,
        id: LeaseId,
        result: Result<Committed, WriteError>,
    ) {
        self.sync_leadership();
        if self.leading != Some(token) {
            return;
        }
        if let Err(e) = &result {
            debug!(lease = id.0, error = %e, "sessions: an expiry proposal failed; retrying");
        }
        let gone = self.kv.read_stale(|s| s.lease(id).is_none()).0;
        if gone {
            self.clock.ended(id);
        } else {
            self.clock.retry(self.now(), id);
        }
    }

    /// A question from a node. Renewals wait for the leadership check
    /// first (R2); the rest is answered at once.
    fn on_ask(&mut self, ask: Ask) {
        self.sync_leadership();
        let Some(question) = SessionAsk::decode(ask.request()) else {
            return ask.answer(SessionAnswer::BadRequest.encode());
        };
        if self.leading != Some(ask.token()) {
            if matches!(question, SessionAsk::Renew(_)) {
                self.refused();
            }
            return ask.answer(SessionAnswer::NotLeader.encode());
        }
        match question {
            SessionAsk::Renew(id) => self.renew(ask, id),
            SessionAsk::Remaining(id) => {
                let answer = self.remaining(id);
                ask.answer(answer.encode())
            }
        }
    }

    /// R1's second half, now: the lease is in the applied store. A lease
    /// the store dropped leaves the clock; one it granted since the last
    /// look goes on it.
    fn exists(&mut self, id: LeaseId) -> bool {
        let exists = self.kv.read_stale(|s| s.lease(id).is_some()).0;
        if !exists {
            self.clock.ended(id);
        } else if self.clock.deadline(id).is_none() && !self.clock.is_expiring(id) {
            self.learn_grants();
        }
        exists
    }

    fn renew(&mut self, ask: Ask, id: LeaseId) {
        let answer = if !self.exists(id) {
            SessionAnswer::NotFound
        } else if self.clock.is_expiring(id) {
            SessionAnswer::Expiring
        } else if self.renewals.len() >= MAX_RENEWALS_IN_FLIGHT {
            SessionAnswer::Busy
        } else {
            let kv = self.kv.clone();
            let token = ask.token();
            self.renewals.spawn(async move {
                let confirmed = kv.confirm_leader(token).await;
                (ask, id, confirmed)
            });
            return;
        };
        self.refused();
        ask.answer(answer.encode());
    }

    /// The leadership check of a renewal ended: renew (a full TTL from now)
    /// if this node still is the ready leader it arrived under, the lease
    /// still exists and its expiry was not proposed.
    fn renewal_confirmed(&mut self, ask: Ask, id: LeaseId, confirmed: Result<u64, ReadFailure>) {
        self.sync_leadership();
        let answer = if confirmed.is_err() || self.leading != Some(ask.token()) {
            SessionAnswer::NotLeader
        } else if !self.exists(id) {
            SessionAnswer::NotFound
        } else {
            match self.clock.renew(self.now(), id) {
                Ok(ttl) => SessionAnswer::Renewed { ttl_ms: ttl.as_millis() as u64 },
                Err(RenewError::NotFound(_)) => SessionAnswer::NotFound,
                Err(RenewError::Expiring(_)) => SessionAnswer::Expiring,
                Err(RenewError::NotLeader) => SessionAnswer::NotLeader,
            }
        };
        if matches!(answer, SessionAnswer::Renewed { .. }) {
            self.metrics.session_renewed();
        } else {
            self.refused();
        }
        ask.answer(answer.encode());
    }

    fn remaining(&mut self, id: LeaseId) -> SessionAnswer {
        if !self.exists(id) {
            return SessionAnswer::NotFound;
        }
        if self.clock.is_expiring(id) {
            return SessionAnswer::Expiring;
        }
        let ttl_ms = self.kv.read_stale(|s| s.lease(id).map(|l| l.ttl_ms)).0;
        match (self.clock.deadline(id), ttl_ms) {
            (Some(at), Some(ttl_ms)) => {
                let remaining_ms = at.saturating_since(self.now()).as_millis() as u64;
                SessionAnswer::Remaining { remaining_ms, ttl_ms }
            }
            _ => SessionAnswer::NotFound,
        }
    }

    fn refused(&self) {
        self.metrics.session_renewal_refused();
    }
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}
