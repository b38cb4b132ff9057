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
use tenure_replica::StateMachine;
use tokio::time::{Duration, Instant};
use tracing::info;

/// How often a handover looks again whether its target holds the log.
const CATCH_UP_POLL: Duration = Duration::from_millis(5);

/// A successor that did not catch up in time.
#[derive(Debug)]
pub struct Behind {
    /// The last index the successor holds.
    pub held: u64,
    /// The last index the leader held when the handover was asked.
    pub wanted: u64,
    /// How long the handover waited.
    pub waited: Duration,
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
    let (timings, _) = node.timings();
    let waited = timings.election_timeout;
    let give_up = Instant::now() + waited;
    let mut wanted = None;
    loop {
        if !node.is_leader() {
            return Ok(());
        }
        let log = kv.status();
        let held = log.followers.iter().find(|(id, _)| *id == to).map(|&(_, index)| index);
        if log.ready_leader {
            let wanted = *wanted.get_or_insert(log.last.index);
            let Some(held) = held else { return Ok(()) };
            if held >= wanted {
                return Ok(());
            }
        }
        if Instant::now() >= give_up {
            let wanted = wanted.unwrap_or(log.last.index);
            return Err(Behind { held: held.unwrap_or(0), wanted, waited });
        }
        tokio::time::sleep(CATCH_UP_POLL).await;
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
    let (timings, _) = node.timings();
    let give_up = Instant::now() + timings.election_timeout;
    // The last index when the log was first seen ready to lead.
    let mut wanted = None;
    // Voters the elector refused (unreachable): asked once.
    let mut refused = Vec::new();
    loop {
        if !node.is_leader() {
            return;
        }
        let log = kv.status();
        if log.membership.members.voter_ids().all(|id| id == node.id()) {
            // The only voter: nobody to hand over to.
            return;
        }
        if log.ready_leader {
            let wanted = *wanted.get_or_insert(log.last.index);
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
        if Instant::now() >= give_up {
            return;
        }
        tokio::time::sleep(CATCH_UP_POLL).await;
    }
}
