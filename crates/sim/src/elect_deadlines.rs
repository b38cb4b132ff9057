//! Session deadlines across leader changes (docs/ELECTIONS.md, "Deadlines
//! across leader changes"): no session outlives its TTL by more than the
//! stated bound. The other direction, that no live session expires early,
//! is the election checkers' (`election-overlap`): a session that ended
//! before its holder's deadline lets a successor lead beside it.
//!
//! The ledger follows each lease on the global timeline: when its deadline
//! was last set (its grant first applied, or a renewal answered), how many
//! leaderships started since, whether each new leader found it marked
//! silent, and how long no node was the ready leader. When an expiry of it
//! is first proposed, it checks
//!
//! ```text
//! proposed − (last set + TTL) ≤ slack + time without a ready leader
//!     + Σ over leaderships started: CHECKPOINT_INTERVAL + grace
//!                                   (+ TTL/2 if it was not marked silent)
//!     + queueing: the time since its deadline that the leader's expiries
//!       in flight were at their bound with more leases due, at most one
//!       commit round (QUEUE_ROUND_NS) per MAX_EXPIRIES_IN_FLIGHT leases
//!       proposed ahead of it since its deadline, and one round more
//! ```
//!
//! A new leader takes what is left of a silent lease's TTL from the
//! store's lease time, which misses only the time since the previous
//! leader's last checkpoint (at most the interval, plus the time that
//! leader could no longer commit: the grace); a lease not marked silent
//! went less than half its TTL without a renewal on the previous leader's
//! clock at its last checkpoint, and gets a fresh TTL. The slack covers
//! the clocks' drift over a TTL and the time a proposal waits behind
//! others. The queueing term is the price of the bound on expiries in
//! flight (`tenure_kv::MAX_EXPIRIES_IN_FLIGHT`): when more leases fall due
//! at once than a commit round ends, the last of them wait their turn. It
//! is capped by the leases actually expired ahead of it, so that a leader
//! whose expiries stop committing (the window stays full, nothing drains)
//! earns no allowance for the wait.

use std::collections::{HashMap, VecDeque};
use tenure_kv::LeaseId;

/// Slack of the check, ns, besides the drift: timer and apply delays.
const SLACK_NS: u64 = 50_000_000;

/// How far back the queueing history goes, ns: beyond any TTL the
/// simulator grants plus the bound.
const QUEUE_HISTORY_NS: u64 = 120_000_000_000;

/// The queueing allowed per `MAX_EXPIRIES_IN_FLIGHT` leases proposed ahead
/// of a lease, ns: a commit round of the simulated cluster with room to
/// spare (30,000 leases expiring at once took 10 ms a round).
const QUEUE_ROUND_NS: u64 = 50_000_000;

/// A lease, as the ledger follows it.
#[derive(Clone, Copy, Debug)]
struct Followed {
    /// Global ns its deadline was last set.
    set_ns: u64,
    /// Its TTL, ns.
    ttl_ns: u64,
    /// The allowance gathered since `set_ns` by leaderships that started,
    /// ns.
    allowance_ns: u64,
    /// The ledger's time without a leader when it was set.
    leaderless_ns: u64,
}

/// The ledger of session deadlines; see the module documentation.
#[derive(Clone, Debug, Default)]
pub struct DeadlineLedger {
    leases: HashMap<LeaseId, Followed>,
    /// The highest lease id seen granted.
    known: u64,
    /// Global ns without a ready leader so far.
    leaderless_ns: u64,
    /// The last sample: its time, and whether a node was the ready leader.
    sampled: Option<(u64, bool)>,
    /// Global ns so far during which the ready leader had leases due and
    /// no room for more expiries in flight.
    queued_ns: u64,
    /// Since when (global ns) the leader has been queueing, if it is.
    queueing_since: Option<u64>,
    /// When queueing started (true) or stopped, with `queued_ns` at that
    /// moment, oldest first (for the queueing after a given deadline);
    /// pruned past [`QUEUE_HISTORY_NS`].
    queue_marks: VecDeque<(u64, u64, bool)>,
    /// Leases proposed for expiry so far (each counted at every proposal).
    proposed: u64,
    /// After each proposal: its time and `proposed` then, oldest first;
    /// pruned past [`QUEUE_HISTORY_NS`] as `queue_marks`.
    proposed_marks: VecDeque<(u64, u64)>,
    /// Per leadership start, on top of the checkpoint interval: the time a
    /// leader may go on as the ready leader without committing (the
    /// election timeout).
    grace_ns: u64,
    /// The clocks' drift, ppm.
    drift_ppm: u32,
    /// Expiries checked.
    pub checked: u64,
    /// The largest overrun seen, ns, and its allowance.
    pub worst: Option<(u64, u64)>,
}

impl DeadlineLedger {
    /// A ledger for clocks within `drift_ppm`, with the election timeout
    /// as the grace of a leader change.
    pub fn new(grace_ns: u64, drift_ppm: u32) -> Self {
        DeadlineLedger { grace_ns, drift_ppm, ..Self::default() }
    }

    /// Whether some node is the ready leader at `now_ns`: the time without
    /// one is counted between samples.
    pub fn sample(&mut self, now_ns: u64, leader: bool) {
        if let Some((at, false)) = self.sampled {
            self.leaderless_ns += now_ns.saturating_sub(at);
        }
        self.sampled = Some((now_ns, leader));
    }

    /// Whether the ready leader has leases due and no room to propose more
    /// expiries at `now_ns` (its expiries in flight are at their bound).
    pub fn sample_queueing(&mut self, now_ns: u64, queueing: bool) {
        match (self.queueing_since, queueing) {
            (None, true) => {
                self.queueing_since = Some(now_ns);
                self.queue_marks.push_back((now_ns, self.queued_ns, true));
            }
            (Some(since), false) => {
                self.queued_ns += now_ns.saturating_sub(since);
                self.queueing_since = None;
                self.queue_marks.push_back((now_ns, self.queued_ns, false));
            }
            _ => {}
        }
        // The newest mark past the history stays, as the baseline.
        while self.queue_marks.get(1).is_some_and(|&(t, _, _)| t + QUEUE_HISTORY_NS < now_ns) {
            self.queue_marks.pop_front();
        }
    }

    /// Time spent queueing (see [`DeadlineLedger::sample_queueing`]) by
    /// global ns `t`, at most now (0 before the history kept).
    fn queued_by(&self, t: u64) -> u64 {
        let i = self.queue_marks.partition_point(|&(at, _, _)| at <= t);
        match i.checked_sub(1).map(|i| self.queue_marks[i]) {
            // Before the first mark: queueing ended there if it stopped there.
            None => match self.queue_marks.front() {
                Some(&(at, total, false)) => total.saturating_sub(at - t),
                Some(&(_, total, true)) => total,
                None => 0,
            },
            Some((at, total, started)) => total + if started { t - at } else { 0 },
        }
    }

    /// Leases proposed for expiry by global ns `t` (before the proposals
    /// at `t` itself).
    fn proposed_before(&self, t: u64) -> u64 {
        let i = self.proposed_marks.partition_point(|&(at, _)| at < t);
        i.checked_sub(1).map_or(0, |i| self.proposed_marks[i].1)
    }

    /// Leases up to `last` (a store's last lease id) were granted: those
    /// not seen yet are followed from `now_ns`, their TTL from `ttl_ms`.
    pub fn granted(&mut self, last: u64, now_ns: u64, ttl_ms: impl Fn(LeaseId) -> Option<u64>) {
        while self.known < last {
            self.known += 1;
            let id = LeaseId(self.known);
            if let Some(ttl) = ttl_ms(id) {
                self.set(id, ttl * 1_000_000, now_ns);
            }
        }
    }

    fn set(&mut self, id: LeaseId, ttl_ns: u64, now_ns: u64) {
        let f =
            Followed { set_ns: now_ns, ttl_ns, allowance_ns: 0, leaderless_ns: self.leaderless_ns };
        self.leases.insert(id, f);
    }

    /// A renewal of `id` was answered at `now_ns`.
    pub fn renewed(&mut self, id: LeaseId, now_ns: u64) {
        if let Some(f) = self.leases.get(&id).copied() {
            self.set(id, f.ttl_ns, now_ns);
        }
    }

    /// A leadership started: `silent(id)` says whether its store marked
    /// lease `id` silent.
    pub fn leader_started(&mut self, silent: impl Fn(LeaseId) -> bool) {
        let step = crate::runner::dur_ns(tenure_kv::CHECKPOINT_INTERVAL) + self.grace_ns;
        for (&id, f) in self.leases.iter_mut() {
            let fresh = if silent(id) { 0 } else { f.ttl_ns / 2 };
            f.allowance_ns += step + fresh;
        }
    }

    /// The largest overrun seen, in thousandths of its bound.
    pub fn worst_permille(&self) -> u64 {
        self.worst.map_or(0, |(o, a)| o.saturating_mul(1_000) / a.max(1))
    }

    /// Expiries of `ids` were proposed at `now_ns`: each lease is checked
    /// once, at its first. Returns what broke the bound.
    pub fn expiry_proposed(&mut self, ids: &[LeaseId], now_ns: u64) -> Vec<String> {
        let mut broken = Vec::new();
        for id in ids {
            let Some(f) = self.leases.remove(id) else { continue };
            self.checked += 1;
            let deadline = f.set_ns + f.ttl_ns;
            let overrun = now_ns.saturating_sub(deadline);
            let drift = f.ttl_ns * 2 * u64::from(self.drift_ppm) / 1_000_000;
            let leaderless = self.leaderless_ns - f.leaderless_ns;
            let waited = self.queued_by(now_ns).saturating_sub(self.queued_by(deadline));
            let ahead = self.proposed.saturating_sub(self.proposed_before(deadline));
            let rounds = ahead.div_ceil(tenure_kv::MAX_EXPIRIES_IN_FLIGHT as u64) + 1;
            let queued = waited.min(rounds * QUEUE_ROUND_NS);
            let allowance = SLACK_NS + drift + leaderless + f.allowance_ns + queued;
            let ratio = |o: u64, a: u64| u128::from(o) * 1_000_000 / u128::from(a.max(1));
            if self.worst.is_none_or(|(o, a)| ratio(overrun, allowance) > ratio(o, a)) {
                self.worst = Some((overrun, allowance));
            }
            if overrun > allowance {
                broken.push(format!(
                    "lease {id} expired {:.1} ms after its TTL ({:.1} ms from its last renewal or \
                     grant), beyond the bound of {:.1} ms ({:.1} ms without a leader, {:.1} ms \
                     queued behind other expiries)",
                    overrun as f64 / 1e6,
                    (now_ns - f.set_ns) as f64 / 1e6,
                    allowance as f64 / 1e6,
                    leaderless as f64 / 1e6,
                    queued as f64 / 1e6,
                ));
            }
        }
        self.proposed += ids.len() as u64;
        self.proposed_marks.push_back((now_ns, self.proposed));
        while self.proposed_marks.get(1).is_some_and(|&(t, _)| t + QUEUE_HISTORY_NS < now_ns) {
            self.proposed_marks.pop_front();
        }
        broken
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn an_overrun_is_allowed_only_for_leader_changes_and_time_without_a_leader() {
        let mut l = DeadlineLedger::new(1_000 * MS, 0);
        l.granted(2, 0, |_| Some(2_000));
        // Lease 1 expires on time; lease 2 100 ms late with no leader change.
        assert!(l.expiry_proposed(&[LeaseId(1)], 2_000 * MS).is_empty());
        assert_eq!(l.expiry_proposed(&[LeaseId(2)], 2_100 * MS).len(), 1);
        assert_eq!(l.checked, 2);
        // Lease 3: 300 ms without a leader, then a leader that found it
        // silent: 300 + 500 + 1,000 ms allowed, besides the slack.
        l.granted(3, 3_000 * MS, |_| Some(2_000));
        l.sample(3_100 * MS, false);
        l.sample(3_400 * MS, true);
        l.leader_started(|_| true);
        assert!(l.expiry_proposed(&[LeaseId(3)], 6_800 * MS).is_empty());
        l.granted(4, 7_000 * MS, |_| Some(2_000));
        l.leader_started(|_| true);
        assert_eq!(l.expiry_proposed(&[LeaseId(4)], 10_600 * MS).len(), 1);
        // Not silent: half the TTL more.
        l.granted(5, 11_000 * MS, |_| Some(2_000));
        l.leader_started(|_| false);
        assert!(l.expiry_proposed(&[LeaseId(5)], 15_500 * MS).is_empty());
        // A renewal sets the deadline again and forgets the allowance.
        l.granted(6, 20_000 * MS, |_| Some(2_000));
        l.leader_started(|_| false);
        l.renewed(LeaseId(6), 21_000 * MS);
        assert_eq!(l.expiry_proposed(&[LeaseId(6)], 23_200 * MS).len(), 1);
        assert!(l.expiry_proposed(&[LeaseId(6)], 99_000 * MS).is_empty(), "checked once");
    }

    #[test]
    fn queueing_is_allowed_only_after_the_deadline_and_behind_other_expiries() {
        let mut l = DeadlineLedger::new(1_000 * MS, 0);
        l.granted(400, 0, |_| Some(2_000));
        // Queueing for 400 ms before the deadlines does not count.
        l.sample_queueing(1_000 * MS, true);
        l.sample_queueing(1_400 * MS, false);
        // From the deadline on, the window is full while 384 leases go in
        // chunks of 64 every 10 ms.
        l.sample_queueing(2_000 * MS, true);
        for k in 0..6u64 {
            let ids: Vec<LeaseId> = (k * 64 + 1..=k * 64 + 64).map(LeaseId).collect();
            let broken = l.expiry_proposed(&ids, (2_010 + 10 * k) * MS);
            assert!(broken.is_empty(), "{broken:?}");
        }
        // Lease 385, 150 ms late behind 384 others: its 150 ms of queueing
        // allowed (3 rounds of 128 and one more, 200 ms, cap it), with the
        // slack.
        assert!(l.expiry_proposed(&[LeaseId(385)], 2_150 * MS).is_empty());
        // A leader whose window stays full while nothing drains: lease 386
        // waits 3 s with nothing proposed since lease 385 (the 385 ahead
        // of it and one more: 5 rounds, 250 ms, not 3 s).
        let broken = l.expiry_proposed(&[LeaseId(386)], 5_000 * MS);
        assert_eq!(broken.len(), 1, "{broken:?}");
        // Before its deadline only: lease 387's deadline is after the
        // window emptied; 60 ms late is beyond the slack.
        l.sample_queueing(5_000 * MS, false);
        l.granted(401, 6_000 * MS, |_| Some(2_000));
        assert_eq!(l.expiry_proposed(&[LeaseId(401)], 8_060 * MS).len(), 1);
    }
}
