//! The sessions service: the lease keeper on the ready leader, its expiry
//! timer and the renewals it answers.
//!
//! One task ([`run`]) owns a [`LeaseKeeper`] (the sans-IO leader-side
//! session logic of `tenure-kv`, the same the simulator checks) and follows
//! this node's leadership of the log ([`Replicated::ready_leader`]):
//!
//! * **Start and stop.** When this node becomes the ready leader of token
//!   `T`, the clock starts from every lease of the store as applied then:
//!   a silent one with what is left of its TTL, any other with a fresh,
//!   full TTL (no session expires because tenure changed leader); when it stops being that leader, the clock stops.
//! * **Grants and ends.** The store has no event hook. After each applied
//!   advance the keeper looks at the lease ids above the highest it knows
//!   (`Store::last_lease`, ids only grow): `O(grants)` per advance. A lease
//!   that ended (revoked) stays on the clock until it comes due or is
//!   renewed, and is dropped then when the store no longer has it: `O(1)`
//!   each, never a scan of all leases ([`LeaseKeeper::applied`]).
//! * **Expiry.** A timer at the clock's next deadline; each lease
//!   [`LeaseKeeper::due`] returns (a chunk) is expired with one
//!   `Command::ExpireMany` proposed
//!   by [`Replicated::propose_as`] under `T` only (a later leader never
//!   commits an expiry decided on this one's clock), at most
//!   [`tenure_kv::MAX_EXPIRIES_IN_FLIGHT`] leases in flight; a proposal that failed while `T`
//!   still leads is retried ([`LeaseKeeper::retry`]).
//! * **Renewals** ([`SessionAsk::Renew`], or [`SessionAsk::RenewMany`] for
//!   the renewals a node gathered: a leader ask from any node), answered
//!   only under R1 (this node is the ready leader `T` the ask arrived
//!   under, and the lease is in its applied store), R2
//!   ([`Replicated::confirm_leader`] of `T` first, one check per ask begun
//!   after it arrived, at most [`MAX_RENEWALS_IN_FLIGHT`] leases waiting
//!   for checks) and R3 (the clock refuses a lease whose expiry was
//!   proposed), each lease on its own.
//! * **Checkpoints** (docs/ELECTIONS.md, "Deadlines across leader
//!   changes"): a timer at the keeper's next checkpoint; the leases gone
//!   silent, the lease time and the clears wanted go in one
//!   `Command::Checkpoint` proposed under `T`, one in flight at a time. A
//!   renewal of a silent lease (R4) is held, at most
//!   [`MAX_HELD_RENEWALS`] leases, until a checkpoint clearing it
//!   committed, then renewed and answered; held ones are answered busy if
//!   the checkpoint failed (the client asks again).

use super::protocol::{RenewAnswers, SessionAnswer, SessionAsk};
use crate::metrics::Metrics;
use std::collections::{BTreeSet, HashMap};
use std::time::Duration;
use tenure_core::{FencingToken, Instant as CoreInstant};
use tenure_kv::{Command, LeaseId, LeaseKeeper, RenewError, Store};
use tenure_node::replicated::Ask;
use tenure_node::{Committed, ReadFailure, Replicated, WriteError};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::{debug, info, warn};

/// Most renewals (leases) waiting for the leadership check (R2) at once;
/// more are answered [`SessionAnswer::Busy`]. Under a valid election lease
/// the check is immediate; without one it waits for a round of
/// acknowledgements. An ask of many renewals waits for one check.
pub const MAX_RENEWALS_IN_FLIGHT: usize = 4096;

/// Most renewals of silent leases held for a clearing checkpoint: what
/// eight checkpoints clear ([`tenure_kv::MAX_CHECKPOINT_LEASES`] each, one
/// after another, a commit round each), a few dozen bytes each. Clients
/// coming back together after half their TTL (a healed partition) are
/// cleared 4,096 per round; more at once are answered busy and ask again.
pub const MAX_HELD_RENEWALS: usize = 8 * tenure_kv::MAX_CHECKPOINT_LEASES;

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
        let checkpoint_timer = s.checkpoint_timer();
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
                Ok((token, ids, result)) => s.expiry_done(token, ids, result),
                Err(e) => warn!(error = %e, "an expiry proposal task failed"),
            },
            Some(done) = s.renewals.join_next_with_id() => match done {
                Ok((id, (ask, batch, result))) => {
                    s.check_ended(id);
                    s.renewal_confirmed(ask, batch, result)
                }
                Err(e) => {
                    s.check_ended(e.id());
                    warn!(error = %e, "a renewal task failed");
                }
            },
            Some(done) = s.checkpoints.join_next() => match done {
                Ok((token, clears, result)) => s.checkpoint_done(token, clears, result),
                Err(e) => {
                    s.checkpoint_failed_task();
                    warn!(error = %e, "a checkpoint proposal task failed");
                }
            },
            Some(ask) = asks.recv() => s.on_ask(ask),
            () = sleep_until(timer) => s.expire_due(),
            () = sleep_until(checkpoint_timer) => s.checkpoint(),
        }
    }
    s.keeper.follow();
}

/// The service's state; only its task touches it.
struct Service {
    kv: Replicated<Store>,
    metrics: Metrics,
    ready: watch::Receiver<Option<FencingToken>>,
    /// The leadership the keeper runs for.
    leading: Option<FencingToken>,
    keeper: LeaseKeeper,
    /// The clock's origin on this process's monotonic clock.
    base: std::time::Instant,
    /// Expiry proposals: (under token, lease, outcome).
    expiries: JoinSet<(FencingToken, Vec<LeaseId>, Result<Committed, WriteError>)>,
    /// Renewals waiting for the leadership check: (the ask, its renewals,
    /// outcome).
    renewals: JoinSet<(Ask, Batch, Result<u64, ReadFailure>)>,
    /// The checkpoint proposal in flight (at most one): its token and the
    /// leases it clears.
    checkpoints: JoinSet<(FencingToken, Vec<LeaseId>, Result<Committed, WriteError>)>,
    /// Silent leases whose renewal is held: the next checkpoint clears them
    /// (a set: a renewal of a lease already wanted costs a lookup, not a
    /// scan of up to [`MAX_HELD_RENEWALS`]).
    clears_wanted: BTreeSet<LeaseId>,
    /// Renewal batches waiting for a clearing checkpoint (their silent
    /// leases unanswered).
    held: Vec<(Ask, Batch)>,
    /// The renewals `held` leaves unanswered, counted as batches are held
    /// (compared with [`MAX_HELD_RENEWALS`] at every batch).
    held_renewals: usize,
    /// The leases the checkpoint in flight clears.
    clearing: Vec<LeaseId>,
    /// Leases of `renewals` waiting for their check, at most
    /// [`MAX_RENEWALS_IN_FLIGHT`] in all: by task, so that a task that
    /// failed gives its count back too.
    waiting: HashMap<tokio::task::Id, usize>,
}

/// The renewals of one ask, waiting for one leadership check.
struct Batch {
    /// The leases, in the order asked.
    leases: Vec<LeaseId>,
    /// Each lease's answer when known before the check (`None`: renew it
    /// once the check passed).
    answers: Vec<Option<SessionAnswer>>,
    /// Asked as [`SessionAsk::RenewMany`] (answered with [`RenewAnswers`]),
    /// not as one [`SessionAsk::Renew`].
    many: bool,
}

impl Batch {
    /// Leases waiting for the check.
    fn waiting(&self) -> usize {
        self.answers.iter().filter(|a| a.is_none()).count()
    }
}

impl Service {
    fn new(kv: Replicated<Store>, metrics: Metrics) -> Self {
        let ready = kv.ready_leader();
        let mut s = Service {
            kv,
            metrics,
            ready,
            leading: None,
            keeper: LeaseKeeper::new(),
            base: std::time::Instant::now(),
            expiries: JoinSet::new(),
            renewals: JoinSet::new(),
            checkpoints: JoinSet::new(),
            clears_wanted: BTreeSet::new(),
            held: Vec::new(),
            held_renewals: 0,
            clearing: Vec::new(),
            waiting: HashMap::new(),
        };
        s.sync_leadership();
        s
    }

    fn now(&self) -> CoreInstant {
        CoreInstant::ZERO + self.base.elapsed()
    }

    /// Follows the ready-leader watch: starts the clock for a new
    /// leadership (what is left of a silent lease's TTL, a fresh, full TTL
    /// for any other), stops it when this
    /// node no longer leads.
    fn sync_leadership(&mut self) {
        let now_leading = *self.ready.borrow_and_update();
        if now_leading == self.leading {
            return;
        }
        if self.leading.is_some() {
            info!(token = ?self.leading, "sessions: no longer the ready leader; lease clock stopped");
        }
        self.keeper.follow();
        self.leading = None;
        // Renewals held under the leadership that ended (R1: answered only
        // under the token they arrived under).
        self.release_held(SessionAnswer::NotLeader);
        let Some(token) = now_leading else { return };
        let now = self.now();
        let keeper = &mut self.keeper;
        let (started, _) = self.kv.read_stale(|s| keeper.lead(now, token.0, s));
        match started {
            Ok(()) => {
                self.leading = Some(token);
                info!(
                    token = token.0,
                    leases = self.keeper.len(),
                    "sessions: ready leader; every lease gets a fresh TTL but silent ones"
                );
            }
            Err(e) => {
                self.keeper.follow();
                warn!(error = %e, "sessions: the lease clock cannot start");
            }
        }
    }

    /// Puts the leases granted since the last look on the clock, each
    /// with its TTL from now, and forgets expiries that were applied.
    fn learn_grants(&mut self) {
        if self.leading.is_none() {
            return;
        }
        let now = self.now();
        let keeper = &mut self.keeper;
        if let (Err(e), _) = self.kv.read_stale(|s| keeper.applied(now, s)) {
            debug!(error = %e, "sessions: a grant not put on the clock");
        }
    }

    /// When the expiry timer fires: the clock's next deadline, while there
    /// is room for another chunk of proposals.
    fn timer(&self) -> Option<tokio::time::Instant> {
        self.leading?;
        if !self.keeper.room_for_expiries() {
            return None;
        }
        let at = self.keeper.next_deadline()?;
        let since_base = Duration::from_nanos(at.as_nanos());
        Some(tokio::time::Instant::from_std(self.base + since_base))
    }

    /// Proposes the expiry of every lease due now (a chunk of at most
    /// [`MAX_EXPIRIES_PER_CALL`], one log entry), under this leadership
    /// only; a lease the store no longer holds is dropped.
    fn expire_due(&mut self) {
        self.sync_leadership();
        let Some(token) = self.leading else { return };
        let now = self.now();
        let keeper = &mut self.keeper;
        let (due, _) = self.kv.read_stale(|s| keeper.due(now, s));
        if due.is_empty() {
            return;
        }
        for _ in &due {
            self.metrics.session_expiry_proposed();
        }
        let kv = self.kv.clone();
        let command = Command::ExpireMany { leases: due.clone() }.encode();
        self.expiries.spawn(async move { (token, due, kv.propose_as(token, command).await) });
    }

    /// An expiry proposal ended: once applied the keeper forgets the lease
    /// (on its next look at the store); a failure while still leading, with
    /// the lease still there, is retried.
    fn expiry_done(
        &mut self,
        token: FencingToken,
        ids: Vec<LeaseId>,
        result: Result<Committed, WriteError>,
    ) {
        self.sync_leadership();
        if self.leading != Some(token) {
            return;
        }
        if let Err(e) = &result {
            let now = self.now();
            let there: Vec<LeaseId> = self
                .kv
                .read_stale(|s| ids.into_iter().filter(|&id| s.lease(id).is_some()).collect())
                .0;
            if !there.is_empty() {
                debug!(leases = there.len(), error = %e, "sessions: an expiry proposal failed; retrying");
                for id in there {
                    self.keeper.retry(now, id);
                }
                return;
            }
        }
        self.learn_grants();
    }

    /// A question from a node. Renewals wait for the leadership check
    /// first (R2); the rest is answered at once.
    fn on_ask(&mut self, ask: Ask) {
        self.sync_leadership();
        let Some(question) = SessionAsk::decode(ask.request()) else {
            return ask.answer(SessionAnswer::BadRequest.encode());
        };
        let (leases, many) = match question {
            SessionAsk::Remaining(id) => {
                let answer = match self.leading == Some(ask.token()) {
                    true => self.remaining(id),
                    false => SessionAnswer::NotLeader,
                };
                return ask.answer(answer.encode());
            }
            SessionAsk::Renew(id) => (vec![id], false),
            // Between 1 and MAX_RENEWALS_PER_ASK (`SessionAsk::decode`).
            SessionAsk::RenewMany(ids) => (ids, true),
        };
        let batch = Batch { answers: vec![None; leases.len()], leases, many };
        if self.leading != Some(ask.token()) {
            return self.answer(ask, batch, Some(SessionAnswer::NotLeader));
        }
        self.renew(ask, batch);
    }

    /// Where lease `id` stands before the leadership check (R1's second
    /// half and R3, as of the applied store, which holds it if `exists`):
    /// `None` when it may be renewed.
    fn precheck(&self, id: LeaseId, exists: bool) -> Option<SessionAnswer> {
        if !exists {
            return Some(SessionAnswer::NotFound);
        }
        // Every grant applied is on the clock now: a lease the store holds
        // that the keeper does not count as live is expiring.
        match self.keeper.remaining(self.now(), id) {
            Some(_) => None,
            None => Some(SessionAnswer::Expiring),
        }
    }

    /// Checks each lease of `batch`, then the leadership once for those
    /// that may be renewed (at most [`MAX_RENEWALS_IN_FLIGHT`] leases wait
    /// for checks; the others are answered [`SessionAnswer::Busy`]).
    fn renew(&mut self, ask: Ask, mut batch: Batch) {
        self.learn_grants();
        let leases = &batch.leases;
        let exist: Vec<bool> =
            self.kv.read_stale(|s| leases.iter().map(|&id| s.lease(id).is_some()).collect()).0;
        for (i, (&id, exists)) in batch.leases.iter().zip(exist).enumerate() {
            batch.answers[i] = self.precheck(id, exists);
        }
        let mut room = MAX_RENEWALS_IN_FLIGHT.saturating_sub(self.waiting.values().sum());
        for answer in batch.answers.iter_mut().filter(|a| a.is_none()) {
            match room.checked_sub(1) {
                Some(left) => room = left,
                None => *answer = Some(SessionAnswer::Busy),
            }
        }
        let waiting = batch.waiting();
        if waiting == 0 {
            return self.answer(ask, batch, None);
        }
        let kv = self.kv.clone();
        let token = ask.token();
        let task = self.renewals.spawn(async move {
            let confirmed = kv.confirm_leader(token).await;
            (ask, batch, confirmed)
        });
        self.waiting.insert(task.id(), waiting);
    }

    /// A leadership check's task ended (answered, or failed): its leases no
    /// longer wait.
    fn check_ended(&mut self, task: tokio::task::Id) {
        self.waiting.remove(&task);
    }

    /// The leadership check of a batch ended: renew each lease waiting for
    /// it (a full TTL from now) if this node still is the ready leader the
    /// ask arrived under, the lease still exists and its expiry was not
    /// proposed.
    fn renewal_confirmed(&mut self, ask: Ask, batch: Batch, confirmed: Result<u64, ReadFailure>) {
        self.sync_leadership();
        if confirmed.is_err() || self.leading != Some(ask.token()) {
            return self.answer(ask, batch, Some(SessionAnswer::NotLeader));
        }
        let mut batch = batch;
        let silent = self.renew_waiting(&mut batch);
        if silent.is_empty() {
            return self.answer(ask, batch, None);
        }
        // R4: held until a checkpoint clearing them committed.
        if self.held_renewals + silent.len() > MAX_HELD_RENEWALS {
            for a in batch.answers.iter_mut().filter(|a| a.is_none()) {
                *a = Some(SessionAnswer::Busy);
            }
            return self.answer(ask, batch, None);
        }
        self.clears_wanted.extend(silent);
        self.hold(ask, batch);
        self.checkpoint();
    }

    /// Renews each lease of `batch` without an answer yet (its leadership
    /// checked); returns the silent ones, left without one.
    fn renew_waiting(&mut self, batch: &mut Batch) -> Vec<LeaseId> {
        let now = self.now();
        let keeper = &mut self.keeper;
        let (leases, answers) = (&batch.leases, &mut batch.answers);
        let mut silent = Vec::new();
        self.kv.read_stale(|s| {
            for (answer, &id) in answers.iter_mut().zip(leases).filter(|(a, _)| a.is_none()) {
                *answer = match keeper.renew(now, id, s) {
                    Ok(ttl) => Some(SessionAnswer::Renewed { ttl_ms: ttl.as_millis() as u64 }),
                    Err(RenewError::NotFound(_)) => Some(SessionAnswer::NotFound),
                    Err(RenewError::Expiring(_)) => Some(SessionAnswer::Expiring),
                    Err(RenewError::NotLeader) => Some(SessionAnswer::NotLeader),
                    Err(RenewError::Silent(_)) => {
                        silent.push(id);
                        None
                    }
                };
            }
        });
        silent
    }

    /// When the keeper next has a checkpoint to take: now if clears are
    /// wanted; none while one is in flight or this node does not lead.
    fn checkpoint_timer(&self) -> Option<tokio::time::Instant> {
        self.leading?;
        if !self.checkpoints.is_empty() {
            return None;
        }
        let at = match self.clears_wanted.is_empty() {
            true => self.keeper.next_checkpoint()?,
            false => self.now(),
        };
        let since_base = Duration::from_nanos(at.as_nanos());
        Some(tokio::time::Instant::from_std(self.base + since_base))
    }

    /// Proposes the checkpoint the keeper has to take now, if any and none
    /// is in flight, under the token this node leads with.
    fn checkpoint(&mut self) {
        self.sync_leadership();
        let Some(token) = self.leading else { return };
        if !self.checkpoints.is_empty() {
            return;
        }
        let wanted: Vec<LeaseId> = std::mem::take(&mut self.clears_wanted).into_iter().collect();
        let now = self.now();
        let keeper = &mut self.keeper;
        let Some(c) = self.kv.read_stale(|s| keeper.checkpoint(now, &wanted, s)).0 else {
            return;
        };
        let clears = c.renewed.clone();
        self.clearing.clone_from(&clears);
        let kv = self.kv.clone();
        let command = Command::Checkpoint(c).encode();
        self.checkpoints.spawn(async move { (token, clears, kv.propose_as(token, command).await) });
    }

    /// A checkpoint's proposal ended: its clears count if it committed, and
    /// the held renewals are tried again (the ones still silent wait for
    /// the next checkpoint, proposed at once).
    fn checkpoint_done(
        &mut self,
        token: FencingToken,
        clears: Vec<LeaseId>,
        result: Result<Committed, WriteError>,
    ) {
        self.clearing.clear();
        self.sync_leadership();
        if self.leading != Some(token) {
            return;
        }
        match &result {
            Ok(_) => self.keeper.cleared(&clears),
            Err(e) => {
                debug!(leases = clears.len(), error = %e, "sessions: a checkpoint failed");
                self.keeper.clear_failed(&clears);
                return self.release_held(SessionAnswer::Busy);
            }
        }
        self.held_renewals = 0;
        for (ask, mut batch) in std::mem::take(&mut self.held) {
            let silent = self.renew_waiting(&mut batch);
            if silent.is_empty() {
                self.answer(ask, batch, None);
                continue;
            }
            self.clears_wanted.extend(silent);
            self.hold(ask, batch);
        }
        self.checkpoint();
    }

    /// The checkpoint task itself failed (it panicked): nothing it cleared
    /// counts; held renewals are answered busy.
    fn checkpoint_failed_task(&mut self) {
        let clears = std::mem::take(&mut self.clearing);
        self.keeper.clear_failed(&clears);
        self.release_held(SessionAnswer::Busy);
    }

    /// Holds `batch` (its silent leases unanswered) for a clearing
    /// checkpoint.
    fn hold(&mut self, ask: Ask, batch: Batch) {
        self.held_renewals += batch.waiting();
        self.held.push((ask, batch));
    }

    /// Answers every held renewal's silent leases with `answer`.
    fn release_held(&mut self, answer: SessionAnswer) {
        self.clears_wanted.clear();
        self.held_renewals = 0;
        for (ask, mut batch) in std::mem::take(&mut self.held) {
            for a in batch.answers.iter_mut().filter(|a| a.is_none()) {
                *a = Some(answer);
            }
            self.answer(ask, batch, None);
        }
    }

    /// Answers `batch`'s ask: `all` for every lease, or each lease's own
    /// answer; counts the renewals and refusals.
    fn answer(&self, ask: Ask, batch: Batch, all: Option<SessionAnswer>) {
        let answers: Vec<SessionAnswer> = match all {
            Some(a) => vec![a; batch.leases.len()],
            None => batch.answers.iter().map(|a| a.unwrap_or(SessionAnswer::NotLeader)).collect(),
        };
        self.metrics.session_renewal_ask();
        for a in &answers {
            match a {
                SessionAnswer::Renewed { .. } => self.metrics.session_renewed(),
                _ => self.refused(),
            }
        }
        let bytes = match (batch.many, all) {
            (true, Some(a)) => RenewAnswers::All(a).encode(),
            (true, None) => RenewAnswers::Each(answers).encode(),
            (false, _) => answers[0].encode(),
        };
        ask.answer(bytes)
    }

    fn remaining(&mut self, id: LeaseId) -> SessionAnswer {
        self.learn_grants();
        let exists = self.kv.read_stale(|s| s.lease(id).is_some()).0;
        if let Some(answer) = self.precheck(id, exists) {
            return answer;
        }
        let ttl_ms = self.kv.read_stale(|s| s.lease(id).map(|l| l.ttl_ms)).0;
        match (self.keeper.remaining(self.now(), id), ttl_ms) {
            (Some(left), Some(ttl_ms)) => {
                SessionAnswer::Remaining { remaining_ms: left.as_millis() as u64, ttl_ms }
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
