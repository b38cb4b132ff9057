//! The sessions service as etcd's Lease service sees it
//! ([`tenure_etcd_server::lease::SessionClock`]): the same leader asks as
//! `POST /v1/sessions/{id}/keepalive` (renewals, through the node's
//! [`Renewer`]) and `GET /v1/sessions/{id}` (time left), from any node.

use super::protocol::{ask, SessionAnswer, SessionAsk, SessionAskError};
use super::renewer::Renewer;
use tenure_etcd_server::lease::{ClockAnswer, ClockFuture, SessionClock};
use tenure_kv::{LeaseId, Store};
use tenure_node::Replicated;

/// The leader's lease clock, asked through the node's replicated store;
/// renewals through the node's [`Renewer`].
pub struct EtcdSessionClock {
    /// The node's replicated store.
    pub kv: Replicated<Store>,
    /// The node's renewals, gathered into asks to the leader.
    pub renewer: Renewer,
}

/// The clock's answer to the leader's.
fn clock_answer(answer: Result<SessionAnswer, SessionAskError>) -> ClockAnswer {
    match answer {
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

impl SessionClock for EtcdSessionClock {
    fn renew(&self, lease: LeaseId) -> ClockFuture<'_> {
        Box::pin(async move { clock_answer(self.renewer.renew(lease).await) })
    }

    fn remaining(&self, lease: LeaseId) -> ClockFuture<'_> {
        Box::pin(async move { clock_answer(ask(&self.kv, SessionAsk::Remaining(lease)).await) })
    }
}
