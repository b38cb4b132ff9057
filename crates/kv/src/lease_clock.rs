//! The tenure leader's lease clock: when each lease's TTL runs out, on the
//! leader's monotonic clock (docs/ELECTIONS.md, "Sessions").
//!
//! The store keeps no time; the leader does, in memory, and proposes
//! [`Command::Expire`](crate::Command::Expire) through the log once a
//! lease's TTL has passed since its last renewal. [`LeaseClock`] is that
//! bookkeeping, sans-IO: no clock, timer, thread or I/O inside. The caller
//! passes its monotonic clock's [`Instant`] to every call, arms one timer at
//! [`LeaseClock::next_deadline`], and proposes what [`LeaseClock::due`]
//! returns.
//!
//! The rules it keeps:
//!
//! * **What is left of its TTL when a leadership starts.** A new leader
//!   does not know when its predecessor last renewed each lease, but it
//!   knows which ones went silent: a leader records, in a checkpoint
//!   through the log ([`LeaseClock::checkpoint`], `Command::Checkpoint`),
//!   every lease that went half its TTL without a renewal, with how long,
//!   and how far its own clock ran. [`LeaseClock::start`] gives a lease
//!   marked silent what is left of its TTL (its silence counted in the
//!   store's lease time, which stands still while no leader leads), and
//!   every other lease a fresh, full TTL: a live client renews every TTL/3
//!   and is never marked, and no session expires because tenure changed
//!   leader.
//! * **(R4) A silent lease is renewed only once its mark is cleared.**
//!   [`LeaseClock::renew`] refuses a marked lease ([`RenewError::Silent`])
//!   until a checkpoint that clears it committed
//!   ([`LeaseClock::cleared`]): otherwise a later leader would count its
//!   silence from before a renewal that was answered.
//! * **(R3) An expiry once proposed is never taken back by a renewal.**
//!   Once [`LeaseClock::due`] returned a lease, [`LeaseClock::renew`]
//!   refuses it for the rest of this leadership ([`RenewError::Expiring`]):
//!   the proposed `Expire` may commit even if this leader loses office, so
//!   a client must not be told its session goes on. Retrying a failed
//!   proposal ([`LeaseClock::retry`]) keeps that refusal.
//! * **(R1, its second half) Only a lease that exists is renewed.** The
//!   clock mirrors the store: it starts from [`Store::leases`], the caller
//!   reports every grant applied ([`LeaseClock::granted`]) and every
//!   revoke or expiry applied ([`LeaseClock::ended`]), and a lease it does
//!   not hold is refused ([`RenewError::NotFound`]).
//!
//! What stays the caller's: call [`LeaseClock::start`] only as a *ready*
//! leader (its no-op applied, R1), from the store as applied at that
//! moment; call [`LeaseClock::renew`] only once the renewal may be answered
//! (R2: the elector's lease is valid, or a read index confirmed the
//! leadership); call [`LeaseClock::stop`] as soon as it stops leading.
//! The argument that these rules keep a stale expiry from ending a session
//! a new leader renewed is in docs/ELECTIONS.md.
//!
//! Size: the clock holds one entry per lease of the store, so never more
//! than [`MAX_LEASES`]; a grant or start that would exceed that (the
//! caller out of step with the store) is refused with
//! [`TrackError::TooManyLeases`]. Each call costs `O(log n)` in the number
//! of leases ([`LeaseClock::due`]: per lease it returns): deadlines are
//! kept in order, never scanned.
//!
//! [`Store::leases`]: crate::Store::leases

use crate::command::{LeaseCheckpoint, MAX_CHECKPOINT_LEASES};
use crate::lease::{LeaseId, MAX_LEASES, MAX_TTL_MS};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use tenure_core::Instant;

/// Most leases one [`LeaseClock::due`] call returns. Each becomes an
/// `Expire` proposal, and a lease may hold up to
/// [`MAX_KEYS_PER_LEASE`](crate::MAX_KEYS_PER_LEASE) keys that its expiry
/// deletes. Without a bound, every lease lapsing at once (all clients cut
/// off from the leader: up to [`MAX_LEASES`], a million) would become one
/// burst of proposals ahead of every client write and renewal, larger than
/// the node's log batch (1,024 commands). With it, the caller proposes a
/// chunk per call and handles its other inputs in between; the rest stays
/// due ([`LeaseClock::next_deadline`] is then already past), so a mass
/// expiry is spread over `MAX_LEASES / 64` = 15,625 calls and no lease is
/// forgotten. Capping how many expiries are in flight at once is the
/// caller's choice, with [`LeaseClock::in_flight`].
pub const MAX_EXPIRIES_PER_CALL: usize = 64;

/// How long after a failed expiry proposal [`LeaseClock::retry`] makes
/// the lease due again. A proposal fails while the node still leads when
/// its queues are full (busy) or the log could not be written: a tenth of
/// a second lets them drain without spinning, and delays an expiry by a
/// fifth of the shortest TTL ([`MIN_TTL_MS`](crate::MIN_TTL_MS)) per
/// failure. Retries go on as long as the lease exists and the node leads:
/// a lease that is never expired would keep its election's leader forever.
pub const EXPIRY_RETRY_DELAY: Duration = Duration::from_millis(100);

/// How often, at most, a leader proposes a checkpoint of its silent leases
/// ([`LeaseClock::checkpoint`]), and how often while a lease is marked
/// silent (for its clock's progress, the lease time). It is what a leader
/// change can add to a silent lease's life on top of the time without a
/// leader: the time since the last checkpoint is not counted. Half a
/// second: a tenth of a 5 s TTL, and two small log entries a second while
/// some client is gone, none otherwise.
pub const CHECKPOINT_INTERVAL: Duration = Duration::from_millis(500);

/// Why a renewal was refused: the caller answers the client with it and
/// does not extend its session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum RenewError {
    /// The clock is not running: this node is not a ready leader.
    #[error("this node does not lead: lease renewals go to the ready leader")]
    NotLeader,
    /// The lease does not exist (never granted, or revoked or expired).
    #[error("lease {0} does not exist (never granted, or revoked or expired)")]
    NotFound(LeaseId),
    /// Its expiry was proposed (R3): the session is over.
    #[error("lease {0} expired: its expiry was proposed and cannot be taken back")]
    Expiring(LeaseId),
    /// It is marked silent (R4): the caller proposes a checkpoint that
    /// clears it ([`LeaseClock::checkpoint`]) and renews once it committed.
    #[error("lease {0} went silent: its renewal waits for a checkpoint that clears it")]
    Silent(LeaseId),
}

/// Why the clock refused to track a lease: the caller is out of step with
/// the store (which never grants an id twice nor holds more than
/// [`MAX_LEASES`] leases). Nothing changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum TrackError {
    /// The lease is already tracked.
    #[error("lease {0} is already on the lease clock: a lease id is granted once")]
    Duplicate(LeaseId),
    /// The clock already holds [`MAX_LEASES`] leases.
    #[error("the lease clock holds {MAX_LEASES} leases, as many as the store can")]
    TooManyLeases,
}

/// A tracked lease.
#[derive(Clone, Copy, Debug)]
struct Entry {
    /// Its TTL, as granted.
    ttl: Duration,
    /// Its key in the queue: the deadline of a live lease, the retry time
    /// of an expiring one that is queued again. (An expiring lease out of
    /// the queue keeps the value it had.)
    at: Instant,
    /// [`LeaseClock::due`] returned it: never renewed again (R3).
    expiring: bool,
    /// Marked silent: by a checkpoint of this leadership (proposed, whether
    /// or not it committed) or of an earlier one (in the store at start).
    /// Never renewed until cleared (R4).
    marked: bool,
    /// A checkpoint clearing its mark is in flight.
    clearing: bool,
}

impl Entry {
    /// When it goes silent: half its TTL after its last renewal.
    fn silent_at(&self) -> Instant {
        self.at - (self.ttl - self.ttl / 2)
    }
}

/// The leader's lease clock: each lease's deadline on the caller's
/// monotonic clock, in deadline order, sans-IO (the caller passes `now`).
///
/// It keeps two rules of docs/ELECTIONS.md: every lease gets a fresh, full
/// TTL when a leadership starts ([`LeaseClock::start`]), so a tenure
/// failover expires no session; and once [`LeaseClock::due`] returned a
/// lease, its expiry is proposed and [`LeaseClock::renew`] refuses it (R3).
/// The caller keeps R1 and R2: it starts the clock only as a ready leader,
/// renews only once the renewal may be answered (the elector's lease valid,
/// or a read index), and stops the clock as soon as it stops leading. It
/// reports every grant and lease end it applies, so the clock mirrors the
/// store and never holds more than [`MAX_LEASES`] leases.
#[derive(Clone, Debug, Default)]
pub struct LeaseClock {
    /// Whether this node is a ready leader ([`LeaseClock::start`] called,
    /// [`LeaseClock::stop`] not since).
    running: bool,
    /// Every lease of the store, while running.
    leases: BTreeMap<LeaseId, Entry>,
    /// `(at, id)` of every live lease and of every expiring lease waiting
    /// for another proposal; the first is the next thing due. An expiring
    /// lease whose proposal is in flight is not here.
    queue: BTreeSet<(Instant, LeaseId)>,
    /// `(silent_at, id)` of every live lease not marked silent: the first
    /// is the next to mark.
    silence: BTreeSet<(Instant, LeaseId)>,
    /// The tracked leases marked silent.
    marked: BTreeSet<LeaseId>,
    /// When the last checkpoint was taken (or the clock started): the next
    /// one's `elapsed_ms` counts from there.
    checkpointed: Instant,
    /// When the last checkpoint that was taken for marks or time alone
    /// (not for a clear) was taken: such checkpoints come at most every
    /// [`CHECKPOINT_INTERVAL`].
    paced: Instant,
    /// The last checkpoint was full ([`MAX_CHECKPOINT_LEASES`]) and more
    /// leases were already due to be marked: the next one marks at once,
    /// without waiting for the interval.
    behind: bool,
}

impl LeaseClock {
    /// A stopped clock (this node does not lead).
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts the clock when this node becomes a ready leader, from every
    /// lease of its applied store (`(id, ttl_ms, silence)`, with
    /// `Store::silence`): a lease marked silent gets the deadline `now +
    /// ttl - silence` (at once if its TTL is spent) and stays marked (R4);
    /// any other gets `now + ttl`, a fresh full TTL. Whatever the clock held
    /// before is forgotten, as by [`LeaseClock::stop`]: call it once per
    /// leadership.
    ///
    /// A lease listed twice or more than [`MAX_LEASES`] leases (not what a
    /// store lists) is refused, and the clock stays stopped.
    pub fn start(
        &mut self,
        now: Instant,
        leases: impl IntoIterator<Item = (LeaseId, u64, Option<u64>)>,
    ) -> Result<(), TrackError> {
        self.stop();
        self.running = true;
        self.checkpointed = now;
        self.paced = now;
        for (id, ttl_ms, silence) in leases {
            if let Err(e) = self.track(now, id, ttl_ms, silence) {
                self.stop();
                return Err(e);
            }
        }
        Ok(())
    }

    /// Stops the clock when this node stops leading (or when an expiry
    /// proposal failed because it does not lead any more): it forgets every
    /// lease. A later [`LeaseClock::start`] rebuilds it from the store.
    pub fn stop(&mut self) {
        self.running = false;
        self.leases.clear();
        self.queue.clear();
        self.silence.clear();
        self.marked.clear();
        self.behind = false;
    }

    /// Whether the clock runs (this node is a ready leader).
    pub fn is_running(&self) -> bool {
        self.running
    }

    /// Tracks a lease whose grant was just applied, with the deadline
    /// `now + ttl`. On a stopped clock it does nothing, so the caller may
    /// report every grant it applies, leader or not.
    pub fn granted(&mut self, now: Instant, id: LeaseId, ttl_ms: u64) -> Result<(), TrackError> {
        if !self.running {
            return Ok(());
        }
        self.track(now, id, ttl_ms, None)
    }

    /// Tracks a lease: silent for `silence` ms of its TTL already (marked),
    /// or not.
    fn track(
        &mut self,
        now: Instant,
        id: LeaseId,
        ttl_ms: u64,
        silence: Option<u64>,
    ) -> Result<(), TrackError> {
        if self.leases.contains_key(&id) {
            return Err(TrackError::Duplicate(id));
        }
        if self.leases.len() >= MAX_LEASES {
            return Err(TrackError::TooManyLeases);
        }
        let ttl = Duration::from_millis(ttl_ms);
        let left = Duration::from_millis(ttl_ms.saturating_sub(silence.unwrap_or(0)));
        let marked = silence.is_some();
        let entry = Entry { ttl, at: now + left, expiring: false, marked, clearing: false };
        self.leases.insert(id, entry);
        self.queue.insert((entry.at, id));
        if marked {
            self.marked.insert(id);
        } else {
            self.silence.insert((entry.silent_at(), id));
        }
        Ok(())
    }

    /// Forgets a lease whose revoke or expiry was just applied (whoever
    /// proposed it). It does nothing for a lease the clock does not hold,
    /// or on a stopped clock, so the caller may report every lease end it
    /// applies.
    pub fn ended(&mut self, id: LeaseId) {
        if let Some(entry) = self.leases.remove(&id) {
            self.queue.remove(&(entry.at, id));
            self.silence.remove(&(entry.silent_at(), id));
            self.marked.remove(&id);
        }
    }

    /// Renews a lease: its deadline becomes `now + ttl` (never earlier than
    /// it was). Returns the TTL granted from `now`, what the answer tells
    /// the client. Refused when the clock is stopped, when the lease does
    /// not exist, once its expiry was proposed (R3), and while it is
    /// marked silent (R4).
    pub fn renew(&mut self, now: Instant, id: LeaseId) -> Result<Duration, RenewError> {
        if !self.running {
            return Err(RenewError::NotLeader);
        }
        let entry = self.leases.get_mut(&id).ok_or(RenewError::NotFound(id))?;
        if entry.expiring {
            return Err(RenewError::Expiring(id));
        }
        if entry.marked {
            return Err(RenewError::Silent(id));
        }
        let at = entry.at.max(now + entry.ttl);
        self.queue.remove(&(entry.at, id));
        self.silence.remove(&(entry.silent_at(), id));
        entry.at = at;
        self.queue.insert((at, id));
        self.silence.insert((entry.silent_at(), id));
        Ok(entry.ttl)
    }

    /// The checkpoint to propose now (`Command::Checkpoint`), if any:
    ///
    /// * the marks of `renewed` leases (marked, not already being cleared:
    ///   the others are left out) cleared, at once;
    /// * once [`CHECKPOINT_INTERVAL`] passed since the last one, every live
    ///   lease that went half its TTL without a renewal marked silent, with
    ///   for how long (earliest first, the checkpoint holding at most
    ///   [`MAX_CHECKPOINT_LEASES`] leases: the rest stays due, and is
    ///   marked by the next checkpoint without waiting for the interval);
    /// * the time since the last checkpoint, also alone, once the interval
    ///   passed while a lease is marked (a lease time that moves on).
    ///
    /// What it returns counts as proposed: marks hold from now whether or
    /// not it commits (a failed checkpoint only loses time, which makes a
    /// later leader's deadlines later, never earlier). Report a clearing
    /// checkpoint's outcome with [`LeaseClock::cleared`] or
    /// [`LeaseClock::clear_failed`]. `None` on a stopped clock.
    pub fn checkpoint(&mut self, now: Instant, renewed: &[LeaseId]) -> Option<LeaseCheckpoint> {
        if !self.running {
            return None;
        }
        let mut c = LeaseCheckpoint::default();
        for &id in renewed.iter().take(MAX_CHECKPOINT_LEASES) {
            if let Some(e) = self.leases.get_mut(&id).filter(|e| e.marked && !e.clearing) {
                e.clearing = true;
                c.renewed.push(id);
            }
        }
        // Marks go in every checkpoint written (a clear's too, so that
        // clients coming back often cannot hold marks off); alone, at most
        // every interval.
        let interval_passed = now >= self.paced + CHECKPOINT_INTERVAL;
        let may_mark = interval_passed || !c.renewed.is_empty() || self.behind;
        while may_mark && c.silent.len() + c.renewed.len() < MAX_CHECKPOINT_LEASES {
            let Some(&(silent_at, id)) = self.silence.first().filter(|(at, _)| *at <= now) else {
                break;
            };
            self.silence.pop_first();
            let Some(entry) = self.leases.get_mut(&id) else { continue };
            entry.marked = true;
            self.marked.insert(id);
            // Since its last renewal: half its TTL before `silent_at`.
            let since = silent_at - entry.ttl / 2;
            let silent_ms = now.saturating_since(since).as_millis().min(MAX_TTL_MS as u128);
            c.silent.push((id, silent_ms as u64));
        }
        self.behind = c.silent.len() + c.renewed.len() >= MAX_CHECKPOINT_LEASES
            && self.silence.first().is_some_and(|(at, _)| *at <= now);
        let tick = interval_passed && !self.marked.is_empty();
        if c.silent.is_empty() && c.renewed.is_empty() && !tick {
            return None;
        }
        if c.renewed.is_empty() {
            self.paced = now;
        }
        // Whole milliseconds, the rest carried to the next one; at most a
        // day (then the rest is dropped: time lost, never gained).
        let elapsed = now.saturating_since(self.checkpointed).as_millis();
        if elapsed > MAX_TTL_MS as u128 {
            c.elapsed_ms = MAX_TTL_MS;
            self.checkpointed = now;
        } else {
            c.elapsed_ms = elapsed as u64;
            self.checkpointed = self.checkpointed + Duration::from_millis(c.elapsed_ms);
        }
        Some(c)
    }

    /// A checkpoint clearing these leases committed: they are no longer
    /// marked silent and may be renewed (R4). Those not being cleared (or
    /// gone) are left as they are.
    pub fn cleared(&mut self, ids: &[LeaseId]) {
        for id in ids {
            let Some(e) = self.leases.get_mut(id).filter(|e| e.clearing) else { continue };
            e.clearing = false;
            e.marked = false;
            self.marked.remove(id);
            if !e.expiring {
                self.silence.insert((e.silent_at(), *id));
            }
        }
    }

    /// A checkpoint clearing these leases failed (or its outcome is
    /// unknown): they stay marked silent, and a later checkpoint may clear
    /// them.
    pub fn clear_failed(&mut self, ids: &[LeaseId]) {
        for id in ids {
            if let Some(e) = self.leases.get_mut(id) {
                e.clearing = false;
            }
        }
    }

    /// When [`LeaseClock::checkpoint`] next has something to say without a
    /// renewal: once the interval passed, if a lease is marked (the lease
    /// time moves on) or has gone silent. `None` on a stopped clock or
    /// when no lease is tracked.
    pub fn next_checkpoint(&self) -> Option<Instant> {
        if !self.running {
            return None;
        }
        if self.behind {
            return Some(self.paced.min(self.checkpointed));
        }
        let next = self.paced + CHECKPOINT_INTERVAL;
        if !self.marked.is_empty() {
            return Some(next);
        }
        self.silence.first().map(|&(at, _)| at.max(next))
    }

    /// Whether the lease is marked silent (R4: not renewed until cleared).
    pub fn is_silent(&self, id: LeaseId) -> bool {
        self.leases.get(&id).is_some_and(|e| e.marked)
    }

    /// How many tracked leases are marked silent.
    pub fn silent_count(&self) -> usize {
        self.marked.len()
    }

    /// The tracked leases marked silent, in id order.
    pub fn silent_ids(&self) -> impl Iterator<Item = LeaseId> + '_ {
        self.marked.iter().copied()
    }

    /// The tracked leases marked silent from `from` on, in id order.
    pub fn silent_ids_from(&self, from: LeaseId) -> impl Iterator<Item = LeaseId> + '_ {
        self.marked.range(from..).copied()
    }

    /// The leases to expire now, earliest deadline first, at most
    /// [`MAX_EXPIRIES_PER_CALL`]: those whose deadline is at or before
    /// `now`, with a lease given back by [`LeaseClock::retry`] once its
    /// retry time came. Each is marked expiring (R3: never renewed again);
    /// the caller proposes `Command::Expire` for each. Empty on a stopped
    /// clock.
    pub fn due(&mut self, now: Instant) -> Vec<LeaseId> {
        let mut due = Vec::new();
        while due.len() < MAX_EXPIRIES_PER_CALL {
            match self.queue.first() {
                Some(&(at, id)) if at <= now => {
                    self.queue.pop_first();
                    if let Some(entry) = self.leases.get_mut(&id) {
                        entry.expiring = true;
                        self.silence.remove(&(entry.silent_at(), id));
                    }
                    due.push(id);
                }
                _ => break,
            }
        }
        due
    }

    /// When [`LeaseClock::due`] next has something to return (already past
    /// if it has now), for the caller's timer; `None` when nothing is
    /// queued (a stopped clock, no leases, or every expiry in flight).
    pub fn next_deadline(&self) -> Option<Instant> {
        self.queue.first().map(|&(at, _)| at)
    }

    /// Gives back a lease whose expiry proposal failed while this node
    /// still leads (busy, or the log could not be written): it is due again
    /// [`EXPIRY_RETRY_DELAY`] after `now`, and stays refused to renewals
    /// (R3; a proposal whose outcome is unknown may still commit). If the
    /// node lost leadership, call [`LeaseClock::stop`] instead. Returns
    /// whether it was queued again: `false` for a lease that is not
    /// expiring, already queued again, or gone.
    pub fn retry(&mut self, now: Instant, id: LeaseId) -> bool {
        let Some(entry) = self.leases.get_mut(&id) else {
            return false;
        };
        if !entry.expiring || self.queue.contains(&(entry.at, id)) {
            return false;
        }
        entry.at = now + EXPIRY_RETRY_DELAY;
        self.queue.insert((entry.at, id));
        true
    }

    /// The deadline of a live lease (`None` if it is not tracked or its
    /// expiry was proposed).
    pub fn deadline(&self, id: LeaseId) -> Option<Instant> {
        self.leases.get(&id).filter(|e| !e.expiring).map(|e| e.at)
    }

    /// Whether the lease's expiry was proposed (and it did not end yet).
    pub fn is_expiring(&self, id: LeaseId) -> bool {
        self.leases.get(&id).is_some_and(|e| e.expiring)
    }

    /// Every lease the clock tracks, in id order (live and expiring).
    pub fn ids(&self) -> impl Iterator<Item = LeaseId> + '_ {
        self.leases.keys().copied()
    }

    /// How many leases the clock tracks (every lease of the store while it
    /// runs, expiring ones included).
    pub fn len(&self) -> usize {
        self.leases.len()
    }

    /// Whether the clock tracks no lease.
    pub fn is_empty(&self) -> bool {
        self.leases.is_empty()
    }

    /// How many expiries are in flight: returned by [`LeaseClock::due`],
    /// not yet ended, nor queued again by [`LeaseClock::retry`].
    pub fn in_flight(&self) -> usize {
        self.leases.len() - self.queue.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);
    const NS: Duration = Duration::from_nanos(1);

    fn at(ms: u64) -> Instant {
        Instant::ZERO + MS * ms as u32
    }

    fn id(n: u64) -> LeaseId {
        LeaseId(n)
    }

    /// A clock started at `now` with leases 1.. of the given TTLs.
    fn started(now: Instant, ttls: &[u64]) -> LeaseClock {
        let mut clock = LeaseClock::new();
        let leases = ttls.iter().enumerate().map(|(i, &ttl)| (id(i as u64 + 1), ttl, None));
        clock.start(now, leases).unwrap();
        clock
    }

    #[test]
    fn start_gives_every_lease_a_fresh_full_ttl() {
        let clock = started(at(10_000), &[500, 2_000]);
        assert!(clock.is_running());
        assert_eq!(clock.len(), 2);
        assert_eq!(clock.deadline(id(1)), Some(at(10_500)));
        assert_eq!(clock.deadline(id(2)), Some(at(12_000)));
        assert_eq!(clock.next_deadline(), Some(at(10_500)));
        assert_eq!(clock.in_flight(), 0);
    }

    #[test]
    fn a_stopped_clock_renews_nothing_expires_nothing_and_ignores_grants() {
        let mut clock = LeaseClock::new();
        assert_eq!(clock.renew(at(0), id(1)), Err(RenewError::NotLeader));
        assert_eq!(clock.granted(at(0), id(1), 500), Ok(()));
        assert!(clock.is_empty());
        assert_eq!(clock.due(at(1_000_000)), Vec::<LeaseId>::new());
        assert_eq!(clock.next_deadline(), None);
    }

    #[test]
    fn renew_extends_the_deadline_by_the_ttl_from_now() {
        let mut clock = started(at(0), &[1_000]);
        assert_eq!(clock.renew(at(400), id(1)), Ok(MS * 1_000));
        assert_eq!(clock.deadline(id(1)), Some(at(1_400)));
        assert_eq!(clock.next_deadline(), Some(at(1_400)));
        assert_eq!(clock.due(at(1_000)), Vec::<LeaseId>::new());
        // A `now` that went back does not pull the deadline in.
        assert_eq!(clock.renew(at(300), id(1)), Ok(MS * 1_000));
        assert_eq!(clock.deadline(id(1)), Some(at(1_400)));
    }

    #[test]
    fn a_lease_is_due_exactly_when_its_deadline_comes() {
        let mut clock = started(at(0), &[500, 700]);
        assert_eq!(clock.due(at(500) - NS), Vec::<LeaseId>::new());
        assert_eq!(clock.due(at(500)), vec![id(1)]);
        assert_eq!(clock.due(at(500)), Vec::<LeaseId>::new(), "returned once");
        assert_eq!(clock.next_deadline(), Some(at(700)));
        assert_eq!(clock.due(at(10_000)), vec![id(2)]);
        assert_eq!(clock.next_deadline(), None);
        assert_eq!(clock.in_flight(), 2);
    }

    #[test]
    fn due_returns_the_earliest_deadlines_first() {
        let mut clock = started(at(0), &[900, 500, 700]);
        assert_eq!(clock.due(at(1_000)), vec![id(2), id(3), id(1)]);
    }

    #[test]
    fn once_due_a_lease_cannot_be_renewed() {
        let mut clock = started(at(0), &[500]);
        assert_eq!(clock.due(at(500)), vec![id(1)]);
        assert!(clock.is_expiring(id(1)));
        assert_eq!(clock.deadline(id(1)), None);
        assert_eq!(clock.renew(at(501), id(1)), Err(RenewError::Expiring(id(1))));
        // Not even after a failed proposal was given back.
        assert!(clock.retry(at(501), id(1)));
        assert_eq!(clock.renew(at(502), id(1)), Err(RenewError::Expiring(id(1))));
    }

    #[test]
    fn an_overdue_lease_not_yet_returned_by_due_can_still_be_renewed() {
        let mut clock = started(at(0), &[500]);
        assert_eq!(clock.renew(at(600), id(1)), Ok(MS * 500));
        assert_eq!(clock.due(at(600)), Vec::<LeaseId>::new());
        assert_eq!(clock.deadline(id(1)), Some(at(1_100)));
    }

    #[test]
    fn ended_leases_vanish_whether_live_or_expiring() {
        let mut clock = started(at(0), &[500, 1_000]);
        assert_eq!(clock.due(at(500)), vec![id(1)]);
        clock.ended(id(1));
        clock.ended(id(2));
        clock.ended(id(3)); // never tracked: nothing happens
        assert!(clock.is_empty());
        assert_eq!(clock.in_flight(), 0);
        assert_eq!(clock.next_deadline(), None);
        assert_eq!(clock.renew(at(600), id(2)), Err(RenewError::NotFound(id(2))));
        assert_eq!(clock.due(at(5_000)), Vec::<LeaseId>::new());
        assert!(!clock.retry(at(600), id(1)));
    }

    #[test]
    fn stop_forgets_everything_and_start_rebuilds_with_fresh_ttls() {
        let mut clock = started(at(0), &[500, 1_000]);
        assert_eq!(clock.due(at(500)), vec![id(1)]);
        clock.stop();
        assert!(!clock.is_running() && clock.is_empty());
        assert_eq!(clock.next_deadline(), None);
        assert_eq!(clock.renew(at(600), id(2)), Err(RenewError::NotLeader));
        assert_eq!(clock.due(at(5_000)), Vec::<LeaseId>::new());
        // A new leadership: lease 1's expiry (proposed before) is forgotten,
        // as the argument allows; both get a fresh TTL.
        clock.start(at(7_000), [(id(1), 500, None), (id(2), 1_000, None)]).unwrap();
        assert_eq!(clock.deadline(id(1)), Some(at(7_500)));
        assert_eq!(clock.renew(at(7_100), id(1)), Ok(MS * 500));
    }

    #[test]
    fn start_replaces_what_the_clock_held() {
        let mut clock = started(at(0), &[500, 1_000]);
        clock.start(at(100), [(id(3), 800, None)]).unwrap();
        assert_eq!(clock.len(), 1);
        assert_eq!(clock.deadline(id(3)), Some(at(900)));
        assert_eq!(clock.renew(at(100), id(1)), Err(RenewError::NotFound(id(1))));
    }

    #[test]
    fn granted_after_start_counts_from_its_grant() {
        let mut clock = started(at(0), &[1_000]);
        clock.granted(at(300), id(2), 500).unwrap();
        assert_eq!(clock.deadline(id(2)), Some(at(800)));
        assert_eq!(clock.next_deadline(), Some(at(800)));
        assert_eq!(clock.due(at(800)), vec![id(2)]);
        assert_eq!(clock.granted(at(900), id(1), 500), Err(TrackError::Duplicate(id(1))));
        assert_eq!(clock.deadline(id(1)), Some(at(1_000)), "a refused grant changes nothing");
    }

    #[test]
    fn the_clock_holds_at_most_max_leases() {
        let mut clock = LeaseClock::new();
        let all = (1..=MAX_LEASES as u64).map(|n| (id(n), 500, None));
        clock.start(at(0), all).unwrap();
        let next = id(MAX_LEASES as u64 + 1);
        assert_eq!(clock.granted(at(1), next, 500), Err(TrackError::TooManyLeases));
        assert_eq!(clock.len(), MAX_LEASES);

        let too_many = (1..=MAX_LEASES as u64 + 1).map(|n| (id(n), 500, None));
        assert_eq!(clock.start(at(0), too_many), Err(TrackError::TooManyLeases));
        assert!(!clock.is_running() && clock.is_empty(), "a refused start stays stopped");
        let twice = [(id(1), 500, None), (id(1), 600, None)];
        assert_eq!(clock.start(at(0), twice), Err(TrackError::Duplicate(id(1))));
        assert!(!clock.is_running() && clock.is_empty());
    }

    #[test]
    fn due_returns_at_most_the_bound_per_call_and_keeps_the_rest() {
        let n = 2 * MAX_EXPIRIES_PER_CALL + 5;
        let mut clock = started(at(0), &vec![500; n]);
        let first = clock.due(at(500));
        assert_eq!(first.len(), MAX_EXPIRIES_PER_CALL);
        assert_eq!(first, (1..=MAX_EXPIRIES_PER_CALL as u64).map(id).collect::<Vec<_>>());
        assert_eq!(clock.next_deadline(), Some(at(500)), "the rest is still due");
        assert_eq!(clock.due(at(500)).len(), MAX_EXPIRIES_PER_CALL);
        assert_eq!(clock.due(at(500)).len(), 5);
        assert_eq!(clock.due(at(500)), Vec::<LeaseId>::new());
        assert_eq!(clock.in_flight(), n);
    }

    #[test]
    fn retry_makes_a_failed_expiry_due_again_after_the_delay() {
        let mut clock = started(at(0), &[500, 5_000]);
        assert!(!clock.retry(at(100), id(1)), "a live lease is not retried");
        assert_eq!(clock.due(at(600)), vec![id(1)]);
        assert_eq!(clock.in_flight(), 1);
        assert!(clock.retry(at(600), id(1)));
        assert!(!clock.retry(at(600), id(1)), "already queued again");
        assert_eq!(clock.in_flight(), 0);
        let again = at(600) + EXPIRY_RETRY_DELAY;
        assert_eq!(clock.next_deadline(), Some(again));
        assert_eq!(clock.due(again - NS), Vec::<LeaseId>::new());
        assert_eq!(clock.due(again), vec![id(1)]);
        assert!(clock.is_expiring(id(1)));
    }

    fn marks(c: &LeaseCheckpoint) -> Vec<(LeaseId, u64)> {
        c.silent.clone()
    }

    #[test]
    fn a_lease_silent_for_half_its_ttl_is_marked_and_renewed_only_once_cleared() {
        let mut clock = started(at(0), &[10_000, 10_000]);
        assert_eq!(clock.next_checkpoint(), Some(at(5_000)), "half the TTL");
        assert_eq!(clock.renew(at(2_000), id(2)), Ok(MS * 10_000));
        assert_eq!(clock.checkpoint(at(4_999), &[]), None, "nothing silent yet");
        let c = clock.checkpoint(at(5_200), &[]).expect("lease 1 went silent");
        assert_eq!((c.elapsed_ms, marks(&c), c.renewed.len()), (5_200, vec![(id(1), 5_200)], 0));
        assert!(clock.is_silent(id(1)) && !clock.is_silent(id(2)));
        assert_eq!(clock.deadline(id(1)), Some(at(10_000)), "marking moves no deadline");
        // R4: refused until a checkpoint clearing it committed.
        assert_eq!(clock.renew(at(5_300), id(1)), Err(RenewError::Silent(id(1))));
        let c = clock.checkpoint(at(5_300), &[id(1), id(2)]).expect("a clear at once");
        assert_eq!((c.elapsed_ms, c.renewed.clone(), c.silent.len()), (100, vec![id(1)], 0));
        assert_eq!(clock.checkpoint(at(5_301), &[id(1)]), None, "already being cleared");
        assert_eq!(clock.renew(at(5_400), id(1)), Err(RenewError::Silent(id(1))));
        clock.cleared(&[id(1)]);
        assert!(!clock.is_silent(id(1)));
        assert_eq!(clock.renew(at(5_400), id(1)), Ok(MS * 10_000));
        assert_eq!(clock.deadline(id(1)), Some(at(15_400)));
        // Lease 2 (renewed at 2 s) goes silent at 7 s.
        assert_eq!(clock.next_checkpoint(), Some(at(7_000)));
    }

    #[test]
    fn a_failed_clear_leaves_the_mark_and_a_later_checkpoint_clears_it() {
        let mut clock = started(at(0), &[1_000]);
        assert!(clock.checkpoint(at(600), &[]).is_some());
        assert!(clock.checkpoint(at(650), &[id(1)]).is_some());
        clock.clear_failed(&[id(1)]);
        assert_eq!(clock.renew(at(700), id(1)), Err(RenewError::Silent(id(1))));
        let again = clock.checkpoint(at(700), &[id(1)]).unwrap();
        assert_eq!(again.renewed, vec![id(1)]);
        clock.cleared(&[id(1)]);
        assert_eq!(clock.renew(at(700), id(1)), Ok(MS * 1_000));
    }

    #[test]
    fn marks_come_at_most_every_interval_and_time_ticks_while_a_lease_is_marked() {
        let mut clock = started(at(0), &[1_000, 1_400]);
        let c = clock.checkpoint(at(500), &[]).unwrap();
        assert_eq!(marks(&c), vec![(id(1), 500)]);
        // Lease 2 went silent at 700 ms, but the interval has not passed.
        assert_eq!(clock.checkpoint(at(800), &[]), None);
        assert_eq!(clock.next_checkpoint(), Some(at(500) + CHECKPOINT_INTERVAL));
        let c = clock.checkpoint(at(1_000), &[]).unwrap();
        assert_eq!((c.elapsed_ms, marks(&c)), (500, vec![(id(2), 1_000)]));
        // Nothing new: the lease time still moves on while a lease is marked.
        let c = clock.checkpoint(at(1_500), &[]).unwrap();
        assert_eq!((c.elapsed_ms, c.silent.len(), c.renewed.len()), (500, 0, 0));
        // Both gone: no more checkpoints.
        clock.ended(id(1));
        clock.ended(id(2));
        assert_eq!((clock.silent_count(), clock.next_checkpoint()), (0, None));
        assert_eq!(clock.checkpoint(at(9_000), &[]), None);
    }

    #[test]
    fn elapsed_time_is_whole_milliseconds_carried_and_at_most_a_day() {
        let mut clock = started(at(0), &[1_000]);
        let c = clock.checkpoint(at(500) + MS / 2, &[]).unwrap();
        assert_eq!(c.elapsed_ms, 500);
        let c = clock.checkpoint(at(1_001), &[]).unwrap();
        assert_eq!(c.elapsed_ms, 501, "the half millisecond carried");
        let mut clock = started(at(0), &[MAX_TTL_MS]);
        let late = at(0) + Duration::from_millis(3 * MAX_TTL_MS);
        let c = clock.checkpoint(late, &[]).unwrap();
        assert_eq!(c.elapsed_ms, MAX_TTL_MS, "time lost, never gained");
    }

    #[test]
    fn start_gives_a_silent_lease_what_is_left_of_its_ttl_and_keeps_it_marked() {
        let mut clock = LeaseClock::new();
        let leases = [(id(1), 10_000, Some(4_000)), (id(2), 10_000, None), (id(3), 500, Some(900))];
        clock.start(at(1_000), leases).unwrap();
        assert_eq!(clock.deadline(id(1)), Some(at(7_000)));
        assert_eq!(clock.deadline(id(2)), Some(at(11_000)));
        assert_eq!(clock.deadline(id(3)), Some(at(1_000)), "its TTL spent: due at once");
        assert_eq!(clock.silent_count(), 2);
        assert_eq!(clock.renew(at(1_000), id(1)), Err(RenewError::Silent(id(1))));
        assert_eq!(clock.due(at(1_000)), vec![id(3)]);
        clock.ended(id(3));
        assert_eq!(clock.silent_count(), 1);
        // The lease time ticks from the start of this leadership.
        assert_eq!(clock.checkpoint(at(1_499), &[]), None);
        assert_eq!(clock.checkpoint(at(1_500), &[]).unwrap().elapsed_ms, 500);
    }

    #[test]
    fn a_backlog_of_silent_leases_is_marked_a_checkpoint_after_another() {
        // More leases go silent at once than one checkpoint holds (every
        // holder cut off): the next checkpoint is due at once, not an
        // interval later, until the backlog is marked. (At 100,000
        // simulated sessions a backlog marked 4,096 per interval let a
        // leader change give unmarked, long silent leases a fresh TTL,
        // beyond the stated bound.)
        let n = MAX_CHECKPOINT_LEASES + 100;
        let mut clock = started(at(0), &vec![1_000; n]);
        assert_eq!(clock.next_checkpoint(), Some(at(500)));
        let first = clock.checkpoint(at(500), &[]).unwrap();
        assert_eq!(first.silent.len(), MAX_CHECKPOINT_LEASES);
        assert_eq!(clock.next_checkpoint(), Some(at(500)), "due at once: more are silent");
        let second = clock.checkpoint(at(510), &[]).unwrap();
        assert_eq!(second.silent.len(), 100);
        assert_eq!(second.elapsed_ms, 10);
        assert_eq!(clock.silent_count(), n);
        assert_eq!(clock.next_checkpoint(), Some(at(1_010)), "paced again");
        assert_eq!(clock.checkpoint(at(600), &[]), None);
    }

    #[test]
    fn clients_coming_back_often_do_not_hold_marks_off() {
        // Lease 2's holder comes back after going silent (a clear each
        // time); lease 1 is abandoned. Its mark rides with the first clear
        // after it went silent, and a clear does not push back the pace.
        let mut clock = started(at(0), &[1_600, 1_000]);
        assert_eq!(marks(&clock.checkpoint(at(500), &[]).unwrap()), vec![(id(2), 500)]);
        let c = clock.checkpoint(at(900), &[id(2)]).unwrap();
        assert_eq!((c.renewed.clone(), marks(&c)), (vec![id(2)], vec![(id(1), 900)]));
        clock.cleared(&[id(2)]);
        clock.renew(at(900), id(2)).unwrap();
        assert_eq!(clock.next_checkpoint(), Some(at(1_000)), "paced from 500 ms, not 900");
        assert_eq!(clock.checkpoint(at(1_000), &[]).unwrap().elapsed_ms, 100);
    }
}
