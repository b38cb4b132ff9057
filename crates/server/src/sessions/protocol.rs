//! The questions a node asks the sessions service on the leader, and its
//! answers: JSON in a leader ask ([`tenure_node::replicated::ask`]).

use serde::{Deserialize, Serialize};
use tenure_kv::{LeaseId, Store};
use tenure_node::replicated::AskError;
use tenure_node::Replicated;

/// Most leases one [`SessionAsk::RenewMany`] names: its question (at most
/// 21 bytes of JSON a lease) and its answer (at most 32) stay well under
/// the node's ask size limit.
pub const MAX_RENEWALS_PER_ASK: usize = 1024;

/// A question for the leader's sessions service.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionAsk {
    /// Renew the lease: a full TTL from when the leader answers.
    Renew(LeaseId),
    /// How long the lease has left on the leader's clock.
    Remaining(LeaseId),
    /// Renew each of these leases (1 to [`MAX_RENEWALS_PER_ASK`]), after
    /// one leadership check: answered with [`RenewAnswers::Each`], in the
    /// same order, or one answer for all ([`RenewAnswers::All`]). A node's
    /// renewals travel this way ([`super::renewer`]); builds before it
    /// answer [`SessionAnswer::BadRequest`].
    RenewMany(Vec<LeaseId>),
}

/// The leader's answer to [`SessionAsk::RenewMany`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RenewAnswers {
    /// One answer per lease, in the order asked.
    Each(Vec<SessionAnswer>),
    /// The same answer for every lease (the node is not the leader, or the
    /// question could not be read).
    All(SessionAnswer),
}

impl RenewAnswers {
    /// The answers as bytes.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("answers always serialize")
    }

    /// Reads the answers.
    pub fn decode(bytes: &[u8]) -> Result<RenewAnswers, SessionAskError> {
        serde_json::from_slice(bytes).map_err(|e| SessionAskError::Malformed(e.to_string()))
    }
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

    /// Reads a question; `None` for one that does not parse, or a renewal
    /// of many that names none or more than [`MAX_RENEWALS_PER_ASK`].
    pub fn decode(bytes: &[u8]) -> Option<SessionAsk> {
        let question: SessionAsk = serde_json::from_slice(bytes).ok()?;
        match &question {
            SessionAsk::RenewMany(ids) if !(1..=MAX_RENEWALS_PER_ASK).contains(&ids.len()) => None,
            _ => Some(question),
        }
    }
}

impl SessionAnswer {
    /// The answer as bytes.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("an answer always serializes")
    }
}

/// Why a question got no answer from the sessions service.
#[derive(Clone, Debug, thiserror::Error)]
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
        for q in [
            SessionAsk::Renew(LeaseId(3)),
            SessionAsk::Remaining(LeaseId(u64::MAX)),
            SessionAsk::RenewMany(vec![LeaseId(1), LeaseId(u64::MAX)]),
        ] {
            assert_eq!(SessionAsk::decode(&q.encode()), Some(q));
        }
        for a in [
            RenewAnswers::Each(vec![SessionAnswer::Renewed { ttl_ms: 5 }, SessionAnswer::NotFound]),
            RenewAnswers::All(SessionAnswer::NotLeader),
        ] {
            assert_eq!(RenewAnswers::decode(&a.encode()).unwrap(), a);
        }
        // What a build before RenewMany answers reads as one answer for all.
        let old = SessionAnswer::BadRequest.encode();
        assert_eq!(
            RenewAnswers::decode(&old).unwrap(),
            RenewAnswers::All(SessionAnswer::BadRequest)
        );
        assert!(RenewAnswers::decode(b"[\"renewed\"]").is_err());
        assert_eq!(SessionAsk::decode(b"{\"renew\":-1}"), None);
        assert_eq!(SessionAsk::decode(b"\xff"), None);
        let a = SessionAnswer::Remaining { remaining_ms: 5, ttl_ms: 500 };
        assert_eq!(serde_json::from_slice::<SessionAnswer>(&a.encode()).unwrap(), a);
    }

    #[test]
    fn a_renewal_of_no_lease_or_of_too_many_is_refused() {
        assert_eq!(SessionAsk::decode(br#"{"renew_many":[]}"#), None);
        let most = SessionAsk::RenewMany(vec![LeaseId(1); MAX_RENEWALS_PER_ASK]);
        assert_eq!(SessionAsk::decode(&most.encode()), Some(most));
        let over = SessionAsk::RenewMany(vec![LeaseId(1); MAX_RENEWALS_PER_ASK + 1]);
        assert_eq!(SessionAsk::decode(&over.encode()), None);
        assert_eq!(SessionAsk::decode(br#"{"renew_many":[-1]}"#), None);
        assert_eq!(SessionAsk::decode(br#"{"renew_many":7}"#), None);
    }

    #[test]
    fn the_largest_renewal_of_many_and_its_answer_fit_in_an_ask() {
        let q = SessionAsk::RenewMany(vec![LeaseId(u64::MAX); MAX_RENEWALS_PER_ASK]);
        let longest = SessionAnswer::Renewed { ttl_ms: tenure_kv::MAX_TTL_MS };
        let a = RenewAnswers::Each(vec![longest; MAX_RENEWALS_PER_ASK]);
        for len in [q.encode().len(), a.encode().len()] {
            assert!(len <= tenure_node::replicated::MAX_ASK_LEN, "{len} bytes");
        }
    }
}
