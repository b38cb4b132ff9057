//! What every clone of an [`crate::EtcdStore`] shares, and the helpers
//! of its requests: key names, lease ids, answers' revisions.

use crate::conn::Endpoints;
use crate::error::odd;
use crate::keepalive::KeepAlives;
use etcd_client::{
    GetOptions, GetResponse, KeyValue, SortOrder, SortTarget, TxnOpResponse, TxnResponse,
};
use std::time::Duration;
use tenure_client::election::check_name;
use tenure_client::{Candidacy, SessionId, StoreError};

/// What every clone of a store shares.
#[derive(Debug)]
pub(crate) struct Inner {
    /// The endpoints and their clients.
    pub(crate) endpoints: Endpoints,
    /// The sessions' keepalive streams.
    pub(crate) keepalives: KeepAlives,
    /// [`crate::EtcdOptions::prefix`].
    pub(crate) prefix: String,
    /// [`crate::EtcdOptions::probe_after`].
    pub(crate) probe_after: Duration,
}

impl Inner {
    /// The prefix of `election`'s keys, with its trailing `/`.
    pub(crate) fn election_prefix(&self, election: &str) -> String {
        format!("{}/{election}/", self.prefix)
    }

    /// The key of `session`'s candidacy in `election`.
    pub(crate) fn key(&self, election: &str, session: SessionId) -> String {
        format!("{}{:016x}", self.election_prefix(election), session.0)
    }

    /// The candidacy's key, checked against its session and election.
    pub(crate) fn checked_key(&self, c: &Candidacy) -> Result<String, StoreError> {
        check_name(&c.election)?;
        lease_id(c.session)?;
        let key = self.key(&c.election, c.session);
        if c.key != key || c.token < 2 {
            return Err(StoreError::Invalid(format!(
                "not a candidacy of this etcd store: key {:?} token {} (expected key {key:?})",
                c.key, c.token
            )));
        }
        Ok(key)
    }
}

/// The lease id of `session` (etcd's ids are positive 64-bit integers).
pub(crate) fn lease_id(session: SessionId) -> Result<i64, StoreError> {
    match i64::try_from(session.0) {
        Ok(id) if id > 0 => Ok(id),
        _ => Err(StoreError::Invalid(format!("{session} is not an etcd lease id"))),
    }
}

/// `ttl` in whole seconds, rounded up (so that the TTL granted is never
/// shorter than the one asked because of the rounding).
pub(crate) fn whole_seconds(ttl: Duration) -> i64 {
    let secs = ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0);
    i64::try_from(secs).unwrap_or(i64::MAX)
}

/// The revision an answer was read at.
pub(crate) fn header_revision(
    endpoint: &str,
    header: Option<&etcd_client::ResponseHeader>,
) -> Result<u64, StoreError> {
    header
        .and_then(|h| u64::try_from(h.revision()).ok())
        .ok_or_else(|| odd(endpoint, "no header revision"))
}

/// The range answer of operation `i` of a txn's answer.
pub(crate) fn txn_get(
    endpoint: &str,
    answer: &TxnResponse,
    i: usize,
) -> Result<GetResponse, StoreError> {
    match answer.op_responses().into_iter().nth(i) {
        Some(TxnOpResponse::Get(g)) => Ok(g),
        _ => Err(odd(endpoint, &format!("txn operation {i} is not a range"))),
    }
}

/// Options of a range read of the first-created key of a prefix.
pub(crate) fn first_created() -> GetOptions {
    GetOptions::new()
        .with_prefix()
        .with_sort(SortTarget::Create, SortOrder::Ascend)
        .with_limit(1)
        .with_keys_only()
}

/// A key's creation revision as a token.
pub(crate) fn token_of(kv: &KeyValue) -> u64 {
    u64::try_from(kv.create_revision()).unwrap_or(0)
}
