//! Who waits for which candidate key to leave, and one task per server that
//! tells them: no herd.
//!
//! A waiter subscribes to the keys whose removal concerns it (its
//! predecessor's, and its own), then checks that they are still there, then
//! sleeps. The dispatcher follows the store's change history of the
//! election keys as this node applies it, and for each removed key wakes
//! only the subscriptions of that key. When the leader resigns, the one
//! candidate behind it is woken, not the queue; a proclaim (a put) wakes
//! nobody.
//!
//! No wake-up is lost: the dispatcher starts from the revision after the
//! store's when the first subscription is made, before that subscription's
//! check; a removal the check did not see was applied after it, at a later
//! revision, and the dispatcher reads it after the subscription exists.
//! If the dispatcher falls behind the history the store keeps (or the node
//! installs a snapshot), it wakes every subscription, and each waiter looks
//! again.

use super::{whole_revisions, CHANGE_BATCH};
use crate::metrics::Metrics;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use tenure_kv::{Change, Store, ELECTIONS_PREFIX};
use tenure_node::Replicated;
use tokio::sync::{watch, Notify};

/// The subscriptions of one server, and its dispatcher. Cheap to clone.
#[derive(Clone)]
pub struct Hub {
    inner: Arc<Inner>,
}

struct Inner {
    kv: Replicated<Store>,
    stopping: watch::Receiver<bool>,
    metrics: Metrics,
    subscriptions: Mutex<Subscriptions>,
}

#[derive(Default)]
struct Subscriptions {
    /// Per key, the subscriptions waiting for its removal.
    by_key: HashMap<String, Vec<(u64, Arc<Notify>)>>,
    next_id: u64,
    /// Whether the dispatcher was started (on the first subscription).
    started: bool,
}

/// A subscription to the removal of some keys; ends when dropped.
pub struct Subscription {
    inner: Arc<Inner>,
    id: u64,
    keys: Vec<String>,
    notify: Arc<Notify>,
}

fn lock(m: &Mutex<Subscriptions>) -> MutexGuard<'_, Subscriptions> {
    // Each update is complete under the lock: consistent when poisoned.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Hub {
    /// The hub of a server in front of `kv`; its dispatcher stops with the
    /// server (`stopping`).
    pub fn new(kv: Replicated<Store>, stopping: watch::Receiver<bool>, metrics: Metrics) -> Hub {
        let subscriptions = Mutex::new(Subscriptions::default());
        Hub { inner: Arc::new(Inner { kv, stopping, metrics, subscriptions }) }
    }

    /// Subscribes to the removal of `keys`. The caller checks, after this,
    /// that they are still there; then [`Subscription::woken`] returns once
    /// one of them was removed (at once if that already happened).
    pub fn subscribe(&self, keys: Vec<String>) -> Subscription {
        let mut subs = lock(&self.inner.subscriptions);
        if !subs.started {
            subs.started = true;
            // Read before the caller's check: every removal it misses is later.
            let next = self.inner.kv.read_stale(Store::revision).0 + 1;
            tokio::spawn(dispatch(self.inner.clone(), next));
        }
        subs.next_id += 1;
        let id = subs.next_id;
        let notify = Arc::new(Notify::new());
        for key in &keys {
            subs.by_key.entry(key.clone()).or_default().push((id, notify.clone()));
        }
        Subscription { inner: self.inner.clone(), id, keys, notify }
    }
}

impl Subscription {
    /// Returns once one of the keys was removed (since the subscription).
    pub async fn woken(&self) {
        self.notify.notified().await;
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut subs = lock(&self.inner.subscriptions);
        for key in &self.keys {
            if let Some(list) = subs.by_key.get_mut(key) {
                list.retain(|(id, _)| *id != self.id);
                if list.is_empty() {
                    subs.by_key.remove(key);
                }
            }
        }
    }
}

impl Subscriptions {
    /// Wakes the subscriptions of each removed key among `changes`; how many.
    fn wake_removed(&self, changes: &[Change]) -> u64 {
        let mut woken = 0;
        for change in changes.iter().filter(|c| c.kind.is_removal()) {
            for (_, notify) in self.by_key.get(&change.kv.key).into_iter().flatten() {
                notify.notify_one();
                woken += 1;
            }
        }
        woken
    }

    /// Wakes every subscription (the history they needed is gone); how many.
    fn wake_all(&self) -> u64 {
        let mut woken = 0;
        for (_, notify) in self.by_key.values().flatten() {
            notify.notify_one();
            woken += 1;
        }
        woken
    }
}

/// Follows the changes of the election keys from revision `next` on, until
/// the server stops.
async fn dispatch(inner: Arc<Inner>, mut next: u64) {
    let mut applied = inner.kv.applied();
    let mut stopping = inner.stopping.clone();
    while !*stopping.borrow() {
        // Seen before the read, so that an advance after it wakes the wait.
        applied.borrow_and_update();
        let read = inner.kv.read_stale(|s| s.changes_since(ELECTIONS_PREFIX, next, CHANGE_BATCH)).0;
        match read {
            Err(compacted) => {
                inner.metrics.election_wakeups(lock(&inner.subscriptions).wake_all());
                next = compacted.current + 1;
            }
            Ok(changes) if changes.is_empty() => {
                tokio::select! {
                    changed = applied.changed() => if changed.is_err() { return },
                    _ = stopping.wait_for(|s| *s) => return,
                }
            }
            Ok(mut changes) => {
                next = whole_revisions(&mut changes, next);
                let woken = lock(&inner.subscriptions).wake_removed(&changes);
                inner.metrics.election_wakeups(woken);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tenure_kv::{ChangeKind, KeyValue};

    fn change(key: &str, kind: ChangeKind) -> Change {
        let kv = KeyValue {
            key: key.into(),
            value: vec![],
            create_revision: 1,
            mod_revision: 2,
            version: 0,
            lease: None,
        };
        Change { revision: 2, kind, kv, prev: None }
    }

    #[test]
    fn a_removal_wakes_only_the_subscriptions_of_its_key() {
        let mut subs = Subscriptions::default();
        let mut add = |key: &str, id: u64| {
            let n = Arc::new(Notify::new());
            subs.by_key.entry(key.to_string()).or_default().push((id, n.clone()));
            n
        };
        let _a = add("k/1", 1);
        let _b = add("k/2", 2);
        let _c = add("k/3", 3);
        let both = add("k/2", 4);
        assert_eq!(subs.wake_removed(&[change("k/1", ChangeKind::Delete)]), 1);
        assert_eq!(
            subs.wake_removed(&[change("k/2", ChangeKind::Put)]),
            0,
            "a proclaim wakes nobody"
        );
        assert_eq!(subs.wake_removed(&[change("k/3", ChangeKind::Expired)]), 1);
        assert_eq!(subs.wake_removed(&[change("k/9", ChangeKind::Revoked)]), 0);
        assert_eq!(subs.wake_removed(&[change("k/2", ChangeKind::Revoked)]), 2);
        assert_eq!(subs.wake_all(), 4);
        // A wake-up before the wait is kept (a permit), not lost.
        let waited = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        waited.block_on(async {
            tokio::time::timeout(std::time::Duration::from_secs(1), both.notified())
                .await
                .expect("the permit was kept");
        });
    }
}
