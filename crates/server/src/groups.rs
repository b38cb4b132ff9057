//! Groups of partitions on the ready leader (docs/PARTITIONS.md): one task
//! runs [`GroupKeeper`], the sans-IO keeper of `tenure-partitions`, and
//! proposes what it plans.
//!
//! * **When it plans.** When this node becomes the ready leader of a token
//!   (the keeper starts afresh: members' stabilisation waits restart); after
//!   an applied advance that changed a key under `_tenure/groups/` (read
//!   from the store's change history since the revision it last looked at,
//!   `O(changes since)`, each change looked at once) and when its last
//!   proposals are done, once the groups have been quiet for
//!   [`LOOK_QUIET`] (at most [`LOOK_MAX_DELAY`] after the first such
//!   change); and at the keeper's [`Plan::next_check`] (a stabilisation
//!   that ends, a transaction overdue, a partition waiting for room on a
//!   session). A group whose keys did not change is not read again (the
//!   keeper compares fingerprints).
//! * **How it proposes.** Each transaction through
//!   [`Replicated::propose_as`] under the token it was planned under,
//!   never forwarded: a decision read from one leader's state is not
//!   committed by a later one (it would be harmless, its comparisons would
//!   fail, but it would be a wasted entry). At most
//!   [`MAX_PROPOSALS_IN_FLIGHT`]; it plans again only once they are done.
//! * **A change of leadership** drops the keeper's memory and the
//!   proposals in flight (they fail with `NotLeader` or commit, both
//!   harmless), so a new leadership plans at once.
//! * **What it measures** ([`stats`]): at each plan, in the keeper's own
//!   read, the leader's figures of
//!   every group: spells without an owner, moves, imbalance; shared with
//!   `GET /v1/groups/{name}` and `/metrics`, and dropped with the
//!   leadership.

pub mod stats;

use crate::metrics::Metrics;
use stats::GroupsWatch;
use std::sync::Arc;
use std::time::Duration;
use tenure_core::{FencingToken, Instant as CoreInstant};
use tenure_kv::Store;
use tenure_node::{Committed, Replicated, WriteError};
use tenure_partitions::group::GROUPS_PREFIX;
use tenure_partitions::{GroupKeeper, Plan};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::{debug, info, warn};

/// Most keeper transactions proposed and not yet answered. A plan holds
/// one transaction per group with changes (more for a change that moves
/// over 63 partitions); the rest waits for the next plan.
pub const MAX_PROPOSALS_IN_FLIGHT: usize = 64;

/// How long the groups must be quiet (no change applied, no keeper
/// transaction answered) before the keeper looks at them after a change.
/// A join's burst (the keeper's marks commit; a member's poll answers, it
/// stops its work and releases, in a commit of its own, 2-4 commits in all
/// over a few milliseconds) then costs one look instead of one per commit:
/// each look copies and parses the whole group (0.4-1.4 ms for 1,000
/// partitions) on the leader, whose cores the releases wait for.
pub const LOOK_QUIET: Duration = Duration::from_millis(2);

/// The longest a change waits for the keeper's look, however busy the
/// groups stay: what a grant after an expiry or a death notice may gain in
/// delay.
pub const LOOK_MAX_DELAY: Duration = Duration::from_millis(10);

/// When the keeper looks after changes: [`LOOK_QUIET`] after the last,
/// at most [`LOOK_MAX_DELAY`] after the first not looked at yet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct LookTimer {
    /// The first change not looked at, and when the look is due.
    pending: Option<(tokio::time::Instant, tokio::time::Instant)>,
}

impl LookTimer {
    /// A change at `now`.
    fn changed(&mut self, now: tokio::time::Instant) {
        let first = self.pending.map_or(now, |(first, _)| first);
        self.pending = Some((first, (now + LOOK_QUIET).min(first + LOOK_MAX_DELAY)));
    }

    /// When the look is due, if a change waits for one.
    fn due(&self) -> Option<tokio::time::Instant> {
        self.pending.map(|(_, due)| due)
    }

    /// The look was taken.
    fn looked(&mut self) {
        self.pending = None;
    }
}

/// Runs the groups keeper until `stop` becomes true.
pub async fn run(kv: Replicated<Store>, metrics: Metrics, mut stop: watch::Receiver<bool>) {
    let mut s = Service {
        ready: kv.ready_leader(),
        watch: metrics.groups().clone(),
        kv,
        leading: None,
        keeper: GroupKeeper::new(),
        base: std::time::Instant::now(),
        checked_through: 0,
        next_check: None,
        look: LookTimer::default(),
        proposals: JoinSet::new(),
    };
    let mut applied = s.kv.applied();
    s.sync_leadership();
    loop {
        let timer = s.timer();
        tokio::select! {
            _ = stop.wait_for(|&s| s) => break,
            Ok(()) = s.ready.changed() => s.sync_leadership(),
            Ok(()) = applied.changed() => {
                applied.borrow_and_update();
                if s.groups_changed() {
                    s.look_soon();
                }
            }
            Some(done) = s.proposals.join_next() => {
                match done {
                    Ok(result) => s.proposal_done(result),
                    Err(e) if e.is_cancelled() => {}
                    Err(e) => warn!(error = %e, "groups: a proposal task failed"),
                }
                if s.proposals.is_empty() {
                    s.look_soon();
                }
            }
            () = sleep_until(timer) => s.plan(),
        }
    }
    s.proposals.abort_all();
}

struct Service {
    kv: Replicated<Store>,
    ready: watch::Receiver<Option<FencingToken>>,
    /// The leadership the keeper plans for.
    leading: Option<FencingToken>,
    keeper: GroupKeeper,
    /// What the leader measures, shared with the API and the metrics.
    watch: Arc<GroupsWatch>,
    /// The keeper's clock's origin on this process's monotonic clock.
    base: std::time::Instant,
    /// The store's revision up to which changes were looked at.
    checked_through: u64,
    /// When the keeper asked to plan again.
    next_check: Option<CoreInstant>,
    /// When to look at the groups that changed.
    look: LookTimer,
    proposals: JoinSet<Result<Committed, WriteError>>,
}

impl Service {
    fn now(&self) -> CoreInstant {
        CoreInstant::ZERO + self.base.elapsed()
    }

    fn sync_leadership(&mut self) {
        if self.follow_leadership() {
            if let Some(token) = self.leading {
                info!(token = token.0, "groups: ready leader; the keeper starts");
                self.plan();
            }
        }
    }

    /// Reads the ready-leader watch; on a change, starts the keeper afresh
    /// and drops the proposals of the leadership before. Returns whether it
    /// changed.
    fn follow_leadership(&mut self) -> bool {
        let now_leading = *self.ready.borrow_and_update();
        if now_leading == self.leading {
            return false;
        }
        self.keeper.follow();
        self.watch.follow(now_leading);
        self.next_check = None;
        self.proposals.abort_all();
        self.leading = now_leading;
        true
    }

    /// Whether a key under `_tenure/groups/` changed since the revision last
    /// looked at (a compacted history counts as a change).
    fn groups_changed(&mut self) -> bool {
        if self.leading.is_none() {
            return false;
        }
        let from = self.checked_through + 1;
        let watch = &self.watch;
        let ((changed, revision), _) = self.kv.read_stale(|s| {
            let changed = from <= s.revision()
                && s.changes_since(GROUPS_PREFIX, from, 1).map_or(true, |c| !c.is_empty());
            if !changed {
                watch.unchanged(from, s.revision());
            }
            (changed, s.revision())
        });
        self.checked_through = revision;
        changed
    }

    /// Asks for a look (the figures, then a plan) once the groups have been
    /// quiet for [`LOOK_QUIET`], at most [`LOOK_MAX_DELAY`] after the first
    /// change not looked at.
    fn look_soon(&mut self) {
        self.look.changed(tokio::time::Instant::now());
    }

    fn plan(&mut self) {
        self.look.looked();
        self.next_check = None;
        self.follow_leadership();
        let Some(token) = self.leading else { return };
        if !self.proposals.is_empty() {
            // Planned again when they are done.
            return;
        }
        let now = self.now();
        let (keeper, watch) = (&self.keeper, &self.watch);
        // Only copied under the store's lock, which the log waits for:
        // parsing a group of 1,000 partitions there held it up for
        // 0.3-1.4 ms at every change.
        let ((copied, look, revision), _) = self.kv.read_stale(|s| {
            let look = keeper.look(now, s);
            // One copy of a changed group for both.
            (watch.copy_reusing(s, &look.copied()), look, s.revision())
        });
        // Every state the keeper grants from is looked at first.
        if let Some(copied) = copied {
            watch.observe_copied(copied);
        }
        let Plan { commands, next_check } = self.keeper.plan_from(look);
        self.checked_through = revision;
        self.next_check = next_check;
        if !commands.is_empty() {
            debug!(transactions = commands.len(), revision, "groups: proposing the keeper's plan");
        }
        for command in commands.into_iter().take(MAX_PROPOSALS_IN_FLIGHT) {
            let kv = self.kv.clone();
            let bytes = command.encode();
            self.proposals.spawn(async move { kv.propose_as(token, bytes).await });
        }
    }

    fn proposal_done(&mut self, result: Result<Committed, WriteError>) {
        match result {
            Ok(_) => {}
            Err(WriteError::NotLeader) => {
                debug!("groups: a keeper transaction was not proposed: no longer the leader")
            }
            Err(e) => warn!(error = %e, "groups: a keeper transaction failed; planned again"),
        }
    }

    fn timer(&self) -> Option<tokio::time::Instant> {
        self.leading?;
        let check = self.next_check.map(|at| {
            let since_base = Duration::from_nanos(at.as_nanos());
            tokio::time::Instant::from_std(self.base + since_base)
        });
        check.into_iter().chain(self.look.due()).min()
    }
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_look_waits_for_quiet_but_never_past_its_bound() {
        let t0 = tokio::time::Instant::now();
        let ms = Duration::from_millis;
        let mut timer = LookTimer::default();
        assert_eq!(timer.due(), None, "nothing changed");
        timer.changed(t0);
        assert_eq!(timer.due(), Some(t0 + LOOK_QUIET));
        // Each change in the quiet time moves the look...
        timer.changed(t0 + ms(1));
        assert_eq!(timer.due(), Some(t0 + ms(1) + LOOK_QUIET));
        // ... up to its bound from the first change.
        for at in (2..30).map(ms) {
            timer.changed(t0 + at);
        }
        assert_eq!(timer.due(), Some(t0 + LOOK_MAX_DELAY));
        // A look starts the count afresh.
        timer.looked();
        assert_eq!(timer.due(), None);
        timer.changed(t0 + ms(40));
        assert_eq!(timer.due(), Some(t0 + ms(40) + LOOK_QUIET));
    }
}
