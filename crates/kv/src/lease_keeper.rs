//! The leader's side of sessions around its [`LeaseClock`], read from the
//! applied [`Store`] (docs/ELECTIONS.md, "Sessions"): what the simulator and
//! the server both run, sans-IO.
//!
//! The store has no event hook, so the keeper looks at it: grants applied
//! since it last looked are the lease ids above the highest it knows, up to
//! [`Store::last_lease`] (ids come from a counter and are never reused), so
//! picking them up costs `O(new grants)`, never `O(all leases)`. A lease
//! that ended (revoked, or an expiry applied) is noticed when it matters: a
//! renewal of it is refused and it is forgotten, and when it comes due it
//! is dropped rather than proposed for expiry. The few expiries in flight
//! are checked on every [`LeaseKeeper::applied`] so that
//! [`LeaseKeeper::in_flight`] counts only those not applied yet.
//!
//! What stays the caller's (the keeper cannot see it):
//!
//! * **R1, first half**: call [`LeaseKeeper::lead`] only as the replica's
//!   *ready* leader (its no-op applied), with that leadership's token, and
//!   [`LeaseKeeper::follow`] as soon as it is not one any more; answer no
//!   renewal otherwise (the keeper refuses them while following).
//! * **R2**: call [`LeaseKeeper::renew`] only once the renewal may be
//!   answered as a linearizable read: while the elector's lease is valid,
//!   or after a read index confirmed the leadership for a round sent after
//!   the renewal arrived.
//! * Propose `Command::Expire` for each lease [`LeaseKeeper::due`] returns,
//!   through this node's log only (never forwarded: a follower must not
//!   expire on the word of a leader it no longer is), and give a proposal
//!   that failed while still leading back with [`LeaseKeeper::retry`].
//!
//! The keeper keeps R1's second half (the lease exists in the applied
//! store) and R3 (once due, never renewed again in this leadership).

use crate::command::LeaseCheckpoint;
use crate::lease::{LeaseId, MAX_LEASES};
use crate::lease_clock::{LeaseClock, RenewError, TrackError};
use crate::store::Store;
use std::collections::BTreeSet;
use std::time::Duration;
use tenure_core::Instant;

/// The leader's session logic: its [`LeaseClock`] kept in step with the
/// applied [`Store`]. See the module documentation for the rules it keeps
/// and those it leaves to the caller.
#[derive(Clone, Debug, Default)]
pub struct LeaseKeeper {
    clock: LeaseClock,
    /// The token of the leadership the clock runs for (`None`: following).
    token: Option<u64>,
    /// The highest lease id the clock looked at (every id up to it is
    /// tracked, or was gone when looked at).
    known: LeaseId,
    /// Leases returned by [`LeaseKeeper::due`] whose end was not yet seen in
    /// the store; at most the caller's cap on expiries in flight.
    expiring: BTreeSet<LeaseId>,
    /// Where [`LeaseKeeper::checkpoint`]'s look for ended silent leases
    /// goes on from (the lowest marked id at or above it).
    swept: LeaseId,
    /// No expiry is handed out before then: an expiry proposal failed
    /// ([`LeaseKeeper::retry`]), so the log is full or cannot be written,
    /// and the leases due behind it would fail the same way. (Handing them
    /// out chunk after chunk spun through every lease due: 50,000 leases
    /// due at one instant in the simulator, 780 failed proposals.)
    paused_until: Option<Instant>,
}

/// Most leases whose expiry is in flight at once, for every driver of a
/// keeper (the server's sessions service, the simulator's nodes): two
/// chunks of [`MAX_EXPIRIES_PER_CALL`](crate::MAX_EXPIRIES_PER_CALL), two
/// `ExpireMany` entries ([`LeaseKeeper::room_for_expiries`]). A mass
/// expiry (every client cut off) goes out in chunks behind which client
/// writes and renewals still get through, never as one burst of up to
/// `MAX_LEASES` expiries: at most 128 leases per commit round (a round of
/// 2 ms ends 64,000 a second).
pub const MAX_EXPIRIES_IN_FLIGHT: usize = 2 * crate::MAX_EXPIRIES_PER_CALL;

/// Most silent leases [`LeaseKeeper::checkpoint`] looks up in the store per
/// call, going on from where the last call stopped: a million leases gone
/// silent (every client cut off) cost each checkpoint a thousand lookups,
/// not a million. A revoked lease found late only keeps the lease time
/// ticking a little longer, which makes no deadline earlier.
pub const MARKS_CHECKED_PER_CHECKPOINT: usize = 1024;

impl LeaseKeeper {
    /// A keeper that does not lead.
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts (or keeps) leading: called when this node is the replica's
    /// ready leader with leadership token `token`, with its applied store.
    /// For a new token the clock restarts from every lease of the store:
    /// one a checkpoint marked silent with what is left of its TTL
    /// ([`Store::silence`]), any other with a fresh full TTL from `now` (a
    /// tenure failover expires no session); for the token it already leads with, it only picks up new
    /// grants, as [`LeaseKeeper::applied`], so the caller may call it on
    /// every step.
    pub fn lead(&mut self, now: Instant, token: u64, store: &Store) -> Result<(), TrackError> {
        if self.token == Some(token) {
            return self.applied(now, store);
        }
        self.follow();
        let leases = store.leases().map(|l| (l.id, l.ttl_ms, store.silence(l.id)));
        self.clock.start(now, leases)?;
        self.token = Some(token);
        self.known = store.last_lease();
        Ok(())
    }

    /// Stops leading: forgets every lease (a later leadership starts afresh).
    pub fn follow(&mut self) {
        self.clock.stop();
        self.token = None;
        self.known = LeaseId(0);
        self.expiring.clear();
        self.paused_until = None;
    }

    /// The token of the leadership the keeper runs for, if it leads.
    pub fn token(&self) -> Option<u64> {
        self.token
    }

    /// Picks up what was applied since the keeper last looked: every lease
    /// granted since gets the deadline `now + ttl` (a grant granted and
    /// ended in between is skipped), and expiries in flight whose lease is
    /// gone (applied) are forgotten. Does nothing while following.
    ///
    /// A clock that is full of leases the store already ended (many grants
    /// and revokes within one TTL) is swept once, `O(leases)`, before a new
    /// grant is refused as [`TrackError::TooManyLeases`].
    pub fn applied(&mut self, now: Instant, store: &Store) -> Result<(), TrackError> {
        if self.token.is_none() {
            return Ok(());
        }
        let clock = &mut self.clock;
        self.expiring.retain(|&id| held(clock, store, id));
        let last = store.last_lease();
        while self.known < last {
            let id = LeaseId(self.known.0 + 1);
            if let Some(lease) = store.lease(id) {
                if self.clock.len() >= MAX_LEASES {
                    self.sweep(store);
                }
                self.clock.granted(now, id, lease.ttl_ms)?;
            }
            self.known = id;
        }
        Ok(())
    }

    /// Forgets every tracked lease the store no longer holds.
    fn sweep(&mut self, store: &Store) {
        let gone: Vec<LeaseId> = self.clock.ids().filter(|id| store.lease(*id).is_none()).collect();
        for id in gone {
            self.clock.ended(id);
        }
    }

    /// Answers a renewal of `id` (R1's second half and R3; the caller kept
    /// R1's first half and R2): the TTL granted from `now`, or why not. It
    /// first picks up what was applied, as [`LeaseKeeper::applied`].
    /// A lease the applied store does not hold is [`RenewError::NotFound`]
    /// and forgotten; one whose expiry was proposed is
    /// [`RenewError::Expiring`]; while following, [`RenewError::NotLeader`].
    pub fn renew(
        &mut self,
        now: Instant,
        id: LeaseId,
        store: &Store,
    ) -> Result<Duration, RenewError> {
        if self.token.is_none() {
            return Err(RenewError::NotLeader);
        }
        if store.lease(id).is_none() {
            self.clock.ended(id);
            self.expiring.remove(&id);
            return Err(RenewError::NotFound(id));
        }
        // Pick up what was applied since the keeper last looked (the lease
        // may have been granted since): O(new grants + expiries in flight).
        self.applied(now, store).map_err(|_| RenewError::NotFound(id))?;
        self.clock.renew(now, id)
    }

    /// The leases to expire now (earliest deadline first, at most
    /// [`MAX_EXPIRIES_PER_CALL`](crate::MAX_EXPIRIES_PER_CALL) of them
    /// considered per call): each is marked expiring, never renewed again
    /// (R3), and the caller proposes `Command::Expire` for it. A lease that
    /// came due but already ended in the store is dropped, not returned.
    pub fn due(&mut self, now: Instant, store: &Store) -> Vec<LeaseId> {
        if self.paused_until.is_some_and(|until| now < until) {
            return Vec::new();
        }
        let mut due = self.clock.due(now);
        due.retain(|&id| held(&mut self.clock, store, id));
        self.expiring.extend(due.iter().copied());
        due
    }

    /// The checkpoint to propose now, if any, clearing the marks of the
    /// `renewed` leases that are silent: see [`LeaseClock::checkpoint`].
    /// Propose it through this node's log only, under the token it leads
    /// with, and report a clearing one's outcome with
    /// [`LeaseKeeper::cleared`] or [`LeaseKeeper::clear_failed`].
    ///
    /// Leases the store no longer has (revoked: the clock learns of an end
    /// only when it matters) are forgotten first, so that a session closed
    /// normally is never marked silent nor keeps the lease time ticking:
    /// those this checkpoint would mark, and of those marked before, up to
    /// [`MARKS_CHECKED_PER_CHECKPOINT`] per call, in turn.
    pub fn checkpoint(
        &mut self,
        now: Instant,
        renewed: &[LeaseId],
        store: &Store,
    ) -> Option<LeaseCheckpoint> {
        // Marked ones first (so neither a clear nor the tick is for a
        // lease gone), then those this checkpoint would mark.
        let marked: Vec<LeaseId> =
            self.clock.silent_ids_from(self.swept).take(MARKS_CHECKED_PER_CHECKPOINT).collect();
        self.swept = match marked.last() {
            Some(last) if marked.len() == MARKS_CHECKED_PER_CHECKPOINT => LeaseId(last.0 + 1),
            _ => LeaseId(0),
        };
        for id in marked {
            held(&mut self.clock, store, id);
        }
        let mut c = self.clock.checkpoint(now, renewed)?;
        c.silent.retain(|&(id, _)| held(&mut self.clock, store, id));
        let tick = self.clock.silent_count() > 0;
        (tick || !c.silent.is_empty() || !c.renewed.is_empty()).then_some(c)
    }

    /// A checkpoint clearing `ids` committed: they may be renewed again.
    pub fn cleared(&mut self, ids: &[LeaseId]) {
        self.clock.cleared(ids);
    }

    /// A checkpoint clearing `ids` failed: they stay silent.
    pub fn clear_failed(&mut self, ids: &[LeaseId]) {
        self.clock.clear_failed(ids);
    }

    /// When [`LeaseKeeper::checkpoint`] next has something to say without a
    /// renewal ([`LeaseClock::next_checkpoint`]).
    pub fn next_checkpoint(&self) -> Option<Instant> {
        self.clock.next_checkpoint()
    }

    /// Whether the lease is marked silent: a renewal waits for a checkpoint
    /// that clears it.
    pub fn is_silent(&self, id: LeaseId) -> bool {
        self.clock.is_silent(id)
    }

    /// Gives back a lease whose expiry proposal failed while this node still
    /// leads: due again [`EXPIRY_RETRY_DELAY`](crate::EXPIRY_RETRY_DELAY)
    /// after `now`, still refused to renewals, and no other expiry is
    /// handed out before then either. Returns whether it was queued.
    pub fn retry(&mut self, now: Instant, id: LeaseId) -> bool {
        self.paused_until = Some(now + crate::EXPIRY_RETRY_DELAY);
        let queued = self.clock.retry(now, id);
        if queued {
            self.expiring.remove(&id);
        }
        queued
    }

    /// When [`LeaseKeeper::due`] next may have something (already past if
    /// it has now), for the caller's timer; `None` when nothing is queued.
    pub fn next_deadline(&self) -> Option<Instant> {
        let at = self.clock.next_deadline()?;
        Some(self.paused_until.map_or(at, |until| at.max(until)))
    }

    /// How long lease `id` has left on this leader's clock (zero if its
    /// deadline passed and it is not yet due), `None` if the keeper does
    /// not track it as live (following, unknown, ended or expiring).
    pub fn remaining(&self, now: Instant, id: LeaseId) -> Option<Duration> {
        self.clock.deadline(id).map(|at| at.saturating_since(now))
    }

    /// Expiries returned by [`LeaseKeeper::due`], not given back by
    /// [`LeaseKeeper::retry`], whose lease the store held when last looked at
    /// ([`LeaseKeeper::applied`]): the count to cap expiries in flight with.
    pub fn in_flight(&self) -> usize {
        self.expiring.len()
    }

    /// Whether another chunk of expiries ([`LeaseKeeper::due`], up to
    /// [`MAX_EXPIRIES_PER_CALL`](crate::MAX_EXPIRIES_PER_CALL)) fits under
    /// [`MAX_EXPIRIES_IN_FLIGHT`]: ask before each call.
    pub fn room_for_expiries(&self) -> bool {
        self.in_flight() + crate::MAX_EXPIRIES_PER_CALL <= MAX_EXPIRIES_IN_FLIGHT
    }

    /// How many leases the clock tracks (live and expiring).
    pub fn len(&self) -> usize {
        self.clock.len()
    }

    /// Whether the clock tracks no lease.
    pub fn is_empty(&self) -> bool {
        self.clock.is_empty()
    }
}

/// Whether the store still holds lease `id`; if not, the clock forgets it
/// (the clock learns of a lease's end only when the lease matters).
fn held(clock: &mut LeaseClock, store: &Store, id: LeaseId) -> bool {
    let live = store.lease(id).is_some();
    if !live {
        clock.ended(id);
    }
    live
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::Command;
    use crate::store::Response;

    const MS: Duration = Duration::from_millis(1);

    fn at(ms: u64) -> Instant {
        Instant::ZERO + MS * ms as u32
    }

    fn grant(store: &mut Store, ttl_ms: u64) -> LeaseId {
        match store.execute(&Command::Grant { ttl_ms, owner: None }) {
            Response::Granted { lease, .. } => lease,
            other => panic!("grant refused: {other:?}"),
        }
    }

    fn revoke(store: &mut Store, lease: LeaseId) {
        assert!(matches!(store.execute(&Command::Revoke { lease }), Response::LeaseEnded { .. }));
    }

    #[test]
    fn following_refuses_renewals_and_expires_nothing() {
        let mut store = Store::new();
        let l = grant(&mut store, 1_000);
        let mut keeper = LeaseKeeper::new();
        keeper.applied(at(0), &store).unwrap();
        assert_eq!(keeper.renew(at(0), l, &store), Err(RenewError::NotLeader));
        assert!(keeper.due(at(1_000_000), &store).is_empty());
        assert_eq!(keeper.token(), None);
    }

    #[test]
    fn lead_gives_every_lease_a_fresh_ttl_and_is_idempotent_per_token() {
        let mut store = Store::new();
        let a = grant(&mut store, 1_000);
        let mut keeper = LeaseKeeper::new();
        keeper.lead(at(5_000), 7, &store).unwrap();
        assert_eq!(keeper.remaining(at(5_000), a), Some(MS * 1_000));
        // The same token again: nothing restarts.
        keeper.lead(at(5_600), 7, &store).unwrap();
        assert_eq!(keeper.remaining(at(5_600), a), Some(MS * 400));
        // A new leadership: fresh again.
        keeper.lead(at(5_600), 9, &store).unwrap();
        assert_eq!(keeper.remaining(at(5_600), a), Some(MS * 1_000));
        assert_eq!(keeper.token(), Some(9));
    }

    #[test]
    fn applied_picks_up_grants_since_and_skips_those_already_ended() {
        let mut store = Store::new();
        let mut keeper = LeaseKeeper::new();
        keeper.lead(at(0), 1, &store).unwrap();
        let a = grant(&mut store, 600);
        let b = grant(&mut store, 800);
        revoke(&mut store, b);
        keeper.applied(at(100), &store).unwrap();
        assert_eq!(keeper.len(), 1);
        assert_eq!(keeper.remaining(at(100), a), Some(MS * 600));
        assert_eq!(keeper.remaining(at(100), b), None);
    }

    #[test]
    fn renew_picks_up_a_grant_it_has_not_looked_at_yet() {
        let mut store = Store::new();
        let mut keeper = LeaseKeeper::new();
        keeper.lead(at(0), 1, &store).unwrap();
        let a = grant(&mut store, 600);
        assert_eq!(keeper.renew(at(50), a, &store), Ok(MS * 600));
        assert_eq!(keeper.remaining(at(50), a), Some(MS * 600));
    }

    #[test]
    fn a_lease_gone_from_the_store_is_refused_and_forgotten() {
        let mut store = Store::new();
        let a = grant(&mut store, 600);
        let mut keeper = LeaseKeeper::new();
        keeper.lead(at(0), 1, &store).unwrap();
        revoke(&mut store, a);
        assert_eq!(keeper.renew(at(10), a, &store), Err(RenewError::NotFound(a)));
        assert!(keeper.is_empty());
        assert_eq!(
            keeper.renew(at(10), LeaseId(99), &store),
            Err(RenewError::NotFound(LeaseId(99)))
        );
    }

    #[test]
    fn a_failed_expiry_pauses_every_expiry_for_the_retry_delay() {
        let mut store = Store::new();
        let leases: Vec<LeaseId> = (0..200).map(|_| grant(&mut store, 500)).collect();
        let mut keeper = LeaseKeeper::new();
        keeper.lead(at(0), 1, &store).unwrap();
        let first = keeper.due(at(500), &store);
        assert_eq!(first.len(), crate::MAX_EXPIRIES_PER_CALL);
        // Its proposal failed (the log is full): the other 136 leases due
        // wait too, instead of failing chunk after chunk at once.
        for &id in &first {
            keeper.retry(at(500), id);
        }
        assert!(keeper.due(at(500), &store).is_empty());
        assert!(keeper.due(at(599), &store).is_empty());
        assert_eq!(keeper.next_deadline(), Some(at(600)));
        let again = keeper.due(at(600), &store);
        assert_eq!(again.len(), crate::MAX_EXPIRIES_PER_CALL);
        assert_eq!(&again[..], &leases[first.len()..2 * first.len()], "in deadline order");
    }

    #[test]
    fn due_drops_ended_leases_and_once_due_a_lease_is_never_renewed() {
        let mut store = Store::new();
        let a = grant(&mut store, 500);
        let b = grant(&mut store, 500);
        let mut keeper = LeaseKeeper::new();
        keeper.lead(at(0), 1, &store).unwrap();
        revoke(&mut store, a);
        assert_eq!(keeper.due(at(500), &store), vec![b]);
        assert_eq!(keeper.renew(at(501), b, &store), Err(RenewError::Expiring(b)));
        assert_eq!(keeper.in_flight(), 1);
        assert!(keeper.retry(at(501), b));
        assert_eq!(keeper.in_flight(), 0, "given back: not in flight");
        assert_eq!(keeper.due(at(601), &store), vec![b]);
        assert_eq!(keeper.in_flight(), 1);
        assert_eq!(keeper.renew(at(602), b, &store), Err(RenewError::Expiring(b)));
        assert!(
            store.execute(&Command::Expire { lease: b })
                != Response::Refused(crate::Refusal::LeaseNotFound(b))
        );
        keeper.applied(at(503), &store).unwrap();
        assert_eq!(keeper.in_flight(), 0, "the applied expiry is no longer in flight");
        assert!(keeper.due(at(10_000), &store).is_empty(), "an ended lease is never proposed");
        assert!(keeper.is_empty());
    }

    #[test]
    fn follow_forgets_and_a_new_leadership_does_not_remember_expiries() {
        let mut store = Store::new();
        let a = grant(&mut store, 500);
        let mut keeper = LeaseKeeper::new();
        keeper.lead(at(0), 1, &store).unwrap();
        assert_eq!(keeper.due(at(500), &store), vec![a]);
        keeper.follow();
        assert_eq!(keeper.renew(at(600), a, &store), Err(RenewError::NotLeader));
        assert_eq!(keeper.next_deadline(), None);
        keeper.lead(at(700), 2, &store).unwrap();
        assert_eq!(keeper.renew(at(800), a, &store), Ok(MS * 500));
        assert_eq!(keeper.next_deadline(), Some(at(1_300)));
    }

    #[test]
    fn a_clock_full_of_ended_leases_is_swept_before_refusing_a_grant() {
        let mut store = Store::new();
        let mut keeper = LeaseKeeper::new();
        keeper.lead(at(0), 1, &store).unwrap();
        for _ in 0..MAX_LEASES {
            grant(&mut store, 1_000);
        }
        keeper.applied(at(1), &store).unwrap();
        assert_eq!(keeper.len(), MAX_LEASES);
        for n in 1..=MAX_LEASES as u64 {
            revoke(&mut store, LeaseId(n));
        }
        let fresh = grant(&mut store, 1_000);
        keeper.applied(at(2), &store).unwrap();
        assert_eq!(keeper.len(), 1);
        assert_eq!(keeper.renew(at(3), fresh, &store), Ok(MS * 1_000));
    }

    #[test]
    fn a_revoked_lease_is_never_marked_silent_nor_keeps_time_ticking() {
        let mut store = Store::new();
        let (a, b) = (grant(&mut store, 60_000), grant(&mut store, 60_000));
        let mut keeper = LeaseKeeper::new();
        keeper.lead(at(0), 1, &store).unwrap();
        revoke(&mut store, a);
        // Both went silent at 30 s; only b is marked.
        let c = keeper.checkpoint(at(30_000), &[], &store).unwrap();
        assert_eq!(c.silent, vec![(b, 30_000)]);
        assert!(!keeper.is_silent(a) && keeper.is_silent(b));
        // b revoked too: nothing left to tick for.
        revoke(&mut store, b);
        assert_eq!(keeper.checkpoint(at(31_000), &[], &store), None);
        assert_eq!(keeper.next_checkpoint(), None);
    }

    #[test]
    fn ended_silent_leases_are_looked_up_a_bounded_number_per_checkpoint() {
        let mut store = Store::new();
        let n = 3 * MARKS_CHECKED_PER_CHECKPOINT;
        let ids: Vec<LeaseId> = (0..n).map(|_| grant(&mut store, 60_000)).collect();
        let mut keeper = LeaseKeeper::new();
        keeper.lead(at(0), 1, &store).unwrap();
        let c = keeper.checkpoint(at(30_000), &[], &store).unwrap();
        assert_eq!(c.silent.len(), n);
        for &id in &ids {
            revoke(&mut store, id);
        }
        // Each checkpoint forgets at most its share of the ended ones, in
        // turn; while some are left, the lease time ticks on.
        for round in 1..=3 {
            let c = keeper.checkpoint(at(30_000 + 500 * round), &[], &store);
            let left = n - round as usize * MARKS_CHECKED_PER_CHECKPOINT;
            assert_eq!(keeper.clock.silent_count(), left, "round {round}");
            assert_eq!(c.is_some(), left > 0, "round {round}: {c:?}");
        }
        assert_eq!(keeper.next_checkpoint(), None);
    }

    /// A leader's checkpoints applied to the store, as the log would.
    fn apply(store: &mut Store, c: Option<LeaseCheckpoint>) {
        if let Some(c) = c {
            let r = store.execute(&Command::Checkpoint(c));
            assert!(matches!(r, Response::Checkpointed { .. }), "{r:?}");
        }
    }

    #[test]
    fn a_new_leader_keeps_what_is_left_of_an_abandoned_lease_and_renews_a_live_one_fully() {
        // Leader 1 from 0 s; lease a is abandoned at once, lease b renewed
        // every 3 s; TTL 10 s. Leader 1 checkpoints every half second.
        let mut store = Store::new();
        let (a, b) = (grant(&mut store, 10_000), grant(&mut store, 10_000));
        let mut one = LeaseKeeper::new();
        one.lead(at(0), 1, &store).unwrap();
        for t in (500..=8_000).step_by(500) {
            if t % 3_000 == 0 {
                one.renew(at(t), b, &store).unwrap();
            }
            let c = one.checkpoint(at(t), &[], &store);
            apply(&mut store, c);
        }
        assert!(store.silence(a).is_some() && store.silence(b).is_none());
        // Leader 1 dies at 8 s; leader 2 is ready 1.2 s later.
        let mut two = LeaseKeeper::new();
        two.lead(at(9_200), 2, &store).unwrap();
        // a: 8 s of its TTL counted, 2 s left from 9.2 s (not 10 s).
        assert_eq!(two.remaining(at(9_200), a), Some(MS * 2_000));
        // b: never silent, a fresh TTL.
        assert_eq!(two.remaining(at(9_200), b), Some(MS * 10_000));
        assert_eq!(two.due(at(11_200), &store), vec![a]);
    }
}
