//! The sessions service as etcd's Lease service sees it
//! ([`tenure_etcd_server::lease::SessionClock`]): the same leader asks as
//! `POST /v1/sessions/{id}/keepalive` (renewals) and `GET /v1/sessions/{id}`
//! (time left), from any node.

use super::protocol::{ask, SessionAnswer, SessionAsk};
use tenure_etcd_server::lease::{ClockAnswer, ClockFuture, SessionClock};
use tenure_kv::{LeaseId, Store};
use tenure_node::Replicated;

/// The leader's lease clock, asked through the node's replicated store.
pub struct EtcdSessionClock(pub Replicated<Store>);

impl EtcdSessionClock {
    async fn ask(&self, question: SessionAsk) -> ClockAnswer {
        match ask(&self.0, question).await {
            Ok(SessionAnswer::Renewed { ttl_ms }) => ClockAnswer::Renewed { ttl_ms },
            Ok(SessionAnswer::Remaining { remaining_ms, ttl_ms }) => {
                ClockAnswer::Remaining { remaining_ms, ttl_ms }
            }
            Ok(SessionAnswer::NotFound) => ClockAnswer::NotFound,
            Ok(SessionAnswer::Expiring) => ClockAnswer::Expiring,
            Ok(other @ (SessionAnswer::NotLeader | SessionAnswer::Busy)) => {
                ClockAnswer::Unavailable(format!("the leader answered {other:?}"))
            }
            Ok(SessionAnswer::BadRequest) => {
                ClockAnswer::Unavailable("the leader could not read the question".into())
            }
            Err(e) => ClockAnswer::Unavailable(e.to_string()),
        }
    }
}

impl SessionClock for EtcdSessionClock {
    fn renew(&self, lease: LeaseId) -> ClockFuture<'_> {
        Box::pin(self.ask(SessionAsk::Renew(lease)))
    }

    fn remaining(&self, lease: LeaseId) -> ClockFuture<'_> {
        Box::pin(self.ask(SessionAsk::Remaining(lease)))
    }
}
