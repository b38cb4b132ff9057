//! Groups of partitions on the ready leader (docs/PARTITIONS.md): one task
//! runs [`GroupKeeper`], the sans-IO keeper of `tenure-partitions`, and
//! proposes what it plans.
//!
//! * **When it plans.** When this node becomes the ready leader of a token
//!   (the keeper starts afresh: members' stabilisation waits restart); after
//!   an applied advance that changed a key under `_tenure/groups/` (read
//!   from the store's change history since the revision it last looked at,
//!   `O(changes since)`, each change looked at once); at the keeper's
//!   [`Plan::next_check`] (a stabilisation that ends, a transaction overdue,
//!   a partition waiting for room on a session); and when its last
//!   proposals are done. A group whose keys did not change is not read
//!   again (the keeper compares fingerprints).
//! * **How it proposes.** Each transaction through
//!   [`Replicated::propose_as`] under the token it was planned under,
//!   never forwarded: a decision read from one leader's state is not
//!   committed by a later one (it would be harmless, its comparisons would
//!   fail, but it would be a wasted entry). At most
//!   [`MAX_PROPOSALS_IN_FLIGHT`]; it plans again only once they are done.
//! * **A change of leadership** drops the keeper's memory and the
//!   proposals in flight (they fail with `NotLeader` or commit, both
//!   harmless), so a new leadership plans at once.
//! * **What it measures** ([`stats`]): at each look (an apply that changed
//!   a group, each plan, in the keeper's own read) the leader's figures of
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
                    s.plan();
                }
            }
            Some(done) = s.proposals.join_next() => {
                match done {
                    Ok(result) => s.proposal_done(result),
                    Err(e) if e.is_cancelled() => {}
                    Err(e) => warn!(error = %e, "groups: a proposal task failed"),
                }
                if s.proposals.is_empty() {
                    s.plan();
                }
            }
            () = sleep_until(timer) => {
                s.next_check = None;
                s.plan();
            }
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
        let ((changed, copied, revision), _) = self.kv.read_stale(|s| {
            let changed = from <= s.revision()
                && s.changes_since(GROUPS_PREFIX, from, 1).map_or(true, |c| !c.is_empty());
            let copied = if changed { watch.copy(s) } else { None };
            if !changed {
                watch.unchanged(from, s.revision());
            }
            (changed, copied, s.revision())
        });
        // Parsed after letting go of the store, which the log waits for.
        if let Some(copied) = copied {
            watch.observe_copied(copied);
        }
        self.checked_through = revision;
        changed
    }

    fn plan(&mut self) {
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
        let ((copied, look, revision), _) =
            self.kv.read_stale(|s| (watch.copy(s), keeper.look(now, s), s.revision()));
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
        let at = self.next_check?;
        let since_base = Duration::from_nanos(at.as_nanos());
        Some(tokio::time::Instant::from_std(self.base + since_base))
    }
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}
