//! The questions a node asks the sessions service on the leader, and its
//! answers: JSON in a leader ask ([`tenure_node::replicated::ask`]).

use serde::{Deserialize, Serialize};
use tenure_kv::{LeaseId, Store};
use tenure_node::replicated::AskError;
use tenure_node::Replicated;

/// A question for the leader's sessions service.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionAsk {
    /// Renew the lease: a full TTL from when the leader answers.
    Renew(LeaseId),
    /// How long the lease has left on the leader's clock.
    Remaining(LeaseId),
}

/// The leader's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionAnswer {
    /// Renewed: the lease lives `ttl_ms` from when the leader answered.
    Renewed {
        /// The lease's TTL.
        ttl_ms: u64,
    },
    /// The lease's time left on the leader's clock.
    Remaining {
        /// Milliseconds until its expiry is proposed, if not renewed.
        remaining_ms: u64,
        /// The lease's TTL.
        ttl_ms: u64,
    },
    /// The lease does not exist (never granted, revoked or expired).
    NotFound,
    /// Its expiry was proposed (R3): it will not be renewed.
    Expiring,
    /// The node that got the question is not (or no longer) the ready
    /// leader, or could not confirm it leads (R2): ask again.
    NotLeader,
    /// Too many renewals wait for their confirmation: ask again shortly.
    Busy,
    /// The question could not be read.
    BadRequest,
}

impl SessionAsk {
    /// The question as bytes.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a question always serializes")
    }

    /// Reads a question.
    pub fn decode(bytes: &[u8]) -> Option<SessionAsk> {
        serde_json::from_slice(bytes).ok()
    }
}

impl SessionAnswer {
    /// The answer as bytes.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("an answer always serializes")
    }
}

/// Why a question got no answer from the sessions service.
#[derive(Debug, thiserror::Error)]
pub enum SessionAskError {
    /// The node could not deliver it, or the leader did not answer.
    #[error(transparent)]
    Ask(#[from] AskError),
    /// The leader's answer could not be read (a node of another build).
    #[error("the leader's answer could not be read: {0}")]
    Malformed(String),
}

/// Asks the sessions service on the leader (from any node).
pub async fn ask(
    kv: &Replicated<Store>,
    question: SessionAsk,
) -> Result<SessionAnswer, SessionAskError> {
    let bytes = kv.ask_leader(question.encode()).await?;
    serde_json::from_slice(&bytes).map_err(|e| SessionAskError::Malformed(e.to_string()))
}

/// The leader's remaining time of `lease` on its clock, `None` when no
/// leader answered (none is ready, or it does not know the lease).
pub async fn remaining_ms(kv: &Replicated<Store>, lease: LeaseId) -> Option<u64> {
    match ask(kv, SessionAsk::Remaining(lease)).await {
        Ok(SessionAnswer::Remaining { remaining_ms, .. }) => Some(remaining_ms),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn questions_and_answers_round_trip_and_garbage_is_refused() {
        for q in [SessionAsk::Renew(LeaseId(3)), SessionAsk::Remaining(LeaseId(u64::MAX))] {
            assert_eq!(SessionAsk::decode(&q.encode()), Some(q));
        }
        assert_eq!(SessionAsk::decode(b"{\"renew\":-1}"), None);
        assert_eq!(SessionAsk::decode(b"\xff"), None);
        let a = SessionAnswer::Remaining { remaining_ms: 5, ttl_ms: 500 };
        assert_eq!(serde_json::from_slice::<SessionAnswer>(&a.encode()).unwrap(), a);
    }
}
