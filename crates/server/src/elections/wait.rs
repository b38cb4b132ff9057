//! Waiting for a candidacy to lead: sleep until the candidate ahead leaves
//! (or this one does), look again, repeat, until it leads, leaves, the
//! deadline passes or the server stops.

use super::hub::Hub;
use tenure_kv::{candidate_key, LeaseId, Place, Store};
use tenure_node::Replicated;
use tokio::sync::watch;
use tokio::time::Instant;

/// How a wait ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WaitEnd {
    /// The candidacy leads (`ahead` is 0), or still waits at the deadline.
    Standing(Place),
    /// The candidacy is gone: resigned, or its session ended.
    Gone,
    /// The server is stopping.
    Stopping,
}

/// Waits until `session`'s candidacy in `name` leads, at most until
/// `deadline`. The caller has made this node's state at least as fresh as
/// the call (a linearizable read index); every look after that is at this
/// node's applied state, which only moves forward.
pub async fn until_leading(
    hub: &Hub,
    kv: &Replicated<Store>,
    mut stopping: watch::Receiver<bool>,
    name: &str,
    session: LeaseId,
    deadline: Instant,
) -> WaitEnd {
    let own_key = candidate_key(name, session);
    loop {
        let Some(standing) = kv.read_stale(|s| Place::read(s, name, session)).0 else {
            return WaitEnd::Gone;
        };
        let Some((pred_key, pred_rev)) = standing.predecessor.clone() else {
            return WaitEnd::Standing(standing);
        };
        if Instant::now() >= deadline {
            return WaitEnd::Standing(standing);
        }
        let subscription = hub.subscribe(vec![own_key.clone(), pred_key.clone()]);
        // Still there once subscribed? A removal after this look wakes us.
        let own_rev = standing.own.create_revision;
        let unchanged = kv
            .read_stale(|s| {
                s.get(&own_key).is_some_and(|kv| kv.create_revision == own_rev)
                    && s.get(&pred_key).is_some_and(|kv| kv.create_revision == pred_rev)
            })
            .0;
        if !unchanged {
            continue;
        }
        tokio::select! {
            _ = subscription.woken() => {}
            _ = tokio::time::sleep_until(deadline) => {}
            _ = stopping.wait_for(|s| *s) => return WaitEnd::Stopping,
        }
    }
}
