//! `GET /v1/status`: this node's view of the cluster.

use super::state::{AppState, ClusterLinks};
use crate::replication::replication;
use axum::extract::State;
use axum::Json;
use tenure_api::{LsnBody, PeerBody, StatusBody};
use tenure_node::NodeStatus;

/// The node's status as JSON.
pub async fn get(State(st): State<AppState>) -> Json<StatusBody> {
    Json(node_status(&st))
}

/// The status of the node behind `st`: its election state with the HTTP
/// addresses it knows and its replicated log.
pub(crate) fn node_status(st: &AppState) -> StatusBody {
    let mut body = status_body(&st.node.status());
    add_http_addresses(&mut body, &st.cluster);
    // A leader that joined is not in this node's --peers: its entry says.
    if body.leader_address.is_none() {
        let leader = body.leader.map(tenure_core::NodeId);
        body.leader_address = leader.and_then(|l| super::members::peer_address(st, l));
    }
    body.replication = Some(replication(&st.kv));
    body.timings = Some(timings(&st.node));
    let (membership, _) = st.kv.membership();
    let commit = body.replication.as_ref().map_or(0, |r| r.commit_index);
    body.membership = Some(super::members::membership_body(&membership, commit));
    body
}

/// Converts the node's status to its wire form.
pub fn status_body(s: &NodeStatus) -> StatusBody {
    StatusBody {
        id: s.id.0,
        incarnation: Some(s.incarnation),
        directory: Some(s.directory.to_string()),
        protocol: s.protocol.to_string(),
        role: s.role.as_str().to_string(),
        term: s.term.0,
        voted_for: s.voted_for.map(|n| n.0),
        leader: s.leader.map(|n| n.0),
        leader_address: s.leader_addr.map(|a| a.to_string()),
        fencing_token: s.fencing_token.map(|t| t.0),
        lsn: s.lsn.map(|l| LsnBody { term: l.term.0, counter: l.counter }),
        storage_failed: s.storage_failed,
        peers: s
            .peers
            .iter()
            .map(|p| PeerBody {
                id: p.id.0,
                address: p.addr.to_string(),
                connected: p.connected,
                last_heard_ms: p.last_heard_ms,
                rtt_ms: p.rtt_ms,
                // Until add_http_addresses: what the handshake advertised.
                http_address: p.api_address.clone(),
                incarnation: p.incarnation,
                directory: p.directory.map(|d| d.to_string()),
                handshake_error: p.handshake_error.clone(),
            })
            .collect(),
        http_address: None,
        leader_http_address: None,
        replication: None,
        cluster_id: Some(s.cluster_id.clone()),
        voters: Some(s.voters.iter().map(|v| v.0).collect()),
        timings: None,
        membership: None,
    }
}

/// The node's timings and the failover bound they give.
fn timings(node: &tenure_node::NodeHandle) -> tenure_api::TimingsBody {
    let (cfg, protocol) = node.timings();
    let ms = |d: std::time::Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    tenure_api::TimingsBody {
        heartbeat_ms: ms(cfg.heartbeat_interval),
        election_timeout_ms: ms(cfg.election_timeout),
        candidacy_stagger_ms: ms(cfg.candidacy_stagger),
        round_trip_ms: ms(cfg.round_trip),
        clock_drift_ppm: cfg.clock_drift_ppm,
        voters: cfg.voters.len() as u64,
        failover_bound_ms: ms(tenure_core::failover::failover_bound(&cfg, protocol)),
    }
}

/// Fills in the HTTP API addresses: those `cluster` was configured with
/// (`--peer-http`) first, else those the peers advertised at their
/// handshakes (already in `body.peers`).
pub(crate) fn add_http_addresses(body: &mut StatusBody, cluster: &ClusterLinks) {
    let known = |id: u64| cluster.http_address(tenure_core::NodeId(id));
    body.http_address = known(body.id);
    for p in &mut body.peers {
        p.http_address = known(p.id).or(p.http_address.take());
    }
    let learned = |id: u64| body.peers.iter().find(|p| p.id == id)?.http_address.clone();
    body.leader_http_address = body.leader.and_then(|l| known(l).or_else(|| learned(l)));
}
