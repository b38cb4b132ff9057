//! Handing leadership to a node that holds the log: for `POST /v1/transfer`,
//! etcd's MoveLeader, and a leader's graceful stop.
//!
//! The voters that hold a leader's entries refuse a candidate whose log
//! lacks them (every protocol's freshness rule). A successor named a few
//! milliseconds after an election, before the leader's no-op reached it,
//! would stand, be refused, and leave the cluster leaderless for an election
//! timeout: so the leader of the log first waits, bounded, until its
//! successor holds every entry it held when the handover was asked (Raft's
//! leadership transfer does the same), and a stopping leader names a voter
//! that holds them.

use super::Replicated;
use crate::NodeHandle;
use tenure_core::NodeId;
use tenure_replica::{ReplicaStatus, StateMachine};
use tokio::time::{Duration, Instant};
use tracing::info;

/// How often a handover looks again whether its target holds the log.
const CATCH_UP_POLL: Duration = Duration::from_millis(5);

/// Why a handover found no successor holding the log in time.
#[derive(Debug, PartialEq, Eq)]
pub enum Behind {
    /// The successor did not catch up.
    Lagging {
        /// The last index the successor holds.
        held: u64,
        /// The last index the leader held when its log was first seen
        /// ready to lead.
        wanted: u64,
        /// How long the handover waited.
        waited: Duration,
    },
    /// This node's log never took office (its no-op did not commit) while
    /// the elector led: no index to hand over was known.
    LogNotReady {
        /// How long the handover waited.
        waited: Duration,
    },
}

impl std::fmt::Display for Behind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Behind::Lagging { held, wanted, waited } => write!(
                f,
                "it holds the log up to index {held}, this leader up to {wanted}: it has not \
                 caught up within an election timeout ({} ms)",
                waited.as_millis()
            ),
            Behind::LogNotReady { waited } => write!(
                f,
                "this node's log did not take office within an election timeout ({} ms) of \
                 the election (its first entry of the term did not commit: are the other \
                 voters reachable?)",
                waited.as_millis()
            ),
        }
    }
}

/// What one look at the log of a node that may lead found.
enum Look {
    /// This node does not lead (any more).
    NotLeading,
    /// The log leads and committed its no-op; `wanted` is its last index
    /// when it was first seen so.
    Ready { log: ReplicaStatus, wanted: u64 },
    /// An election timeout passed since the first look.
    TimedOut { waited: Duration },
}

/// The looks of one handover: every [`CATCH_UP_POLL`] while this node leads,
/// for at most an election timeout. The first look is at once.
struct Looks<'a, S: StateMachine + Send + 'static> {
    node: &'a NodeHandle,
    kv: &'a Replicated<S>,
    waited: Duration,
    give_up: Instant,
    /// The last index when the log was first seen ready to lead.
    wanted: Option<u64>,
    first: bool,
}

impl<'a, S: StateMachine + Send + 'static> Looks<'a, S> {
    fn new(node: &'a NodeHandle, kv: &'a Replicated<S>) -> Self {
        let waited = node.timings().0.election_timeout;
        Looks { node, kv, waited, give_up: Instant::now() + waited, wanted: None, first: true }
    }

    /// The next look that finds something to act on: the log ready, this
    /// node no longer leading, or the time up.
    async fn next(&mut self) -> Look {
        loop {
            if !std::mem::take(&mut self.first) {
                if Instant::now() >= self.give_up {
                    return Look::TimedOut { waited: self.waited };
                }
                tokio::time::sleep(CATCH_UP_POLL).await;
            }
            if !self.node.is_leader() {
                return Look::NotLeading;
            }
            let log = self.kv.status();
            if log.ready_leader {
                let wanted = *self.wanted.get_or_insert(log.last.index);
                return Look::Ready { log, wanted };
            }
        }
    }
}

/// On the leader: waits, at most an election timeout, until `to` holds
/// every entry this node held when its log was first seen ready to lead
/// (a node that won its election a moment ago waits for its log to take
/// office and commit its no-op first). Returns at once where this node
/// does not lead or `to` is not one of its log's followers (the elector's
/// own checks answer those).
pub async fn wait_for_log<S: StateMachine + Send + 'static>(
    node: &NodeHandle,
    kv: &Replicated<S>,
    to: NodeId,
) -> Result<(), Behind> {
    let mut looks = Looks::new(node, kv);
    let mut last = None;
    loop {
        match looks.next().await {
            Look::NotLeading => return Ok(()),
            Look::Ready { log, wanted } => {
                let held = log.followers.iter().find(|(id, _)| *id == to).map(|&(_, i)| i);
                let Some(held) = held else { return Ok(()) };
                if held >= wanted {
                    return Ok(());
                }
                last = Some((held, wanted));
            }
            Look::TimedOut { waited } => {
                return Err(match last {
                    Some((held, wanted)) => Behind::Lagging { held, wanted, waited },
                    None => Behind::LogNotReady { waited },
                })
            }
        }
    }
}

/// Before a graceful stop: if this node leads, hands leadership to a voter
/// that holds every entry this node holds, waiting at most an election
/// timeout for one to. The log takes office a moment after the elector wins
/// and commits a no-op of its own: a stop that came in between waits for
/// that commit, so the successor holds the no-op too. Voters that hold more
/// come first; one the elector finds unreachable is passed over. Where none
/// is found, the stop goes on and the elector names the most responsive
/// voter itself.
pub async fn before_stop<S: StateMachine + Send + 'static>(node: &NodeHandle, kv: &Replicated<S>) {
    if node.is_leader() && kv.status().membership.members.voter_ids().all(|id| id == node.id()) {
        // The only voter: nobody to hand over to.
        return;
    }
    let mut looks = Looks::new(node, kv);
    // Voters the elector refused (unreachable): asked once.
    let mut refused = Vec::new();
    while let Look::Ready { log, wanted } = looks.next().await {
        let mut ready: Vec<(u64, NodeId)> = log
            .followers
            .iter()
            .filter(|&&(id, held)| held >= wanted && log.membership.members.is_voter(id))
            .filter(|(id, _)| !refused.contains(id))
            .map(|&(id, held)| (held, id))
            .collect();
        // The one that holds the most first: writes go on meanwhile, and a
        // voter that holds entries the successor lacks would refuse it.
        ready.sort_by(|a, b| b.cmp(a));
        for (held, to) in ready {
            refused.push(to);
            if node.transfer_leadership(to).await.is_ok() {
                info!(node = %node.id(), successor = %to, held, "stopping: handed leadership to a voter that holds the log");
                return;
            }
        }
    }
}
