//! Leadership handover rules every protocol shares: when a transfer may
//! happen, and whom a stopping leader names as its successor. Both read the
//! leader's record of when each voter last acknowledged it (`acked_sent_at`:
//! per voter index, the send time of the newest acknowledged heartbeat).

use crate::config::Config;
use crate::protocol::TransferError;
use crate::time::Instant;
use crate::types::NodeId;

/// Checks a request to hand leadership to `to`. `Ok(true)`: resign in favour
/// of `to`; `Ok(false)`: `to` is this node, nothing to do.
pub(crate) fn check_transfer(
    cfg: &Config,
    leading: bool,
    leader: Option<NodeId>,
    acked_sent_at: &[Option<Instant>],
    now: Instant,
    to: NodeId,
) -> Result<bool, TransferError> {
    if !leading {
        return Err(TransferError::NotLeader { leader });
    }
    let Some(i) = cfg.voters.iter().position(|&v| v == to) else {
        return Err(TransferError::UnknownNode(to));
    };
    if to == cfg.id {
        return Ok(false);
    }
    if acked_sent_at[i].is_none_or(|s| s + cfg.election_timeout < now) {
        return Err(TransferError::TargetUnreachable(to));
    }
    Ok(true)
}

/// The most responsive follower: the one whose acknowledgement is the newest,
/// if any acknowledged within the election timeout.
pub(crate) fn best_successor(
    cfg: &Config,
    acked_sent_at: &[Option<Instant>],
    now: Instant,
) -> Option<NodeId> {
    let fresh = now - cfg.election_timeout;
    let mut best: Option<(Instant, NodeId)> = None;
    for (i, &v) in cfg.voters.iter().enumerate() {
        if v == cfg.id {
            continue;
        }
        if let Some(s) = acked_sent_at[i].filter(|&s| s >= fresh) {
            if best.is_none_or(|(b, _)| s > b) {
                best = Some((s, v));
            }
        }
    }
    best.map(|(_, v)| v)
}
