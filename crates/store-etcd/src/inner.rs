//! What every clone of an [`crate::EtcdStore`] shares, and the helpers
//! of its requests: key names, lease ids, answers' revisions.

use crate::conn::Endpoints;
use crate::error::odd;
use crate::keepalive::KeepAlives;
use std::time::Duration;
use tenure_elect::election::check_name;
use tenure_elect::{Candidacy, SessionId, StoreError};
use tenure_etcd_api::etcdserverpb::range_request::{SortOrder, SortTarget};
use tenure_etcd_api::etcdserverpb::response_op::Response;
use tenure_etcd_api::etcdserverpb::{RangeRequest, RangeResponse, ResponseHeader, TxnResponse};
use tenure_etcd_api::mvccpb::KeyValue;

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
    header: Option<&ResponseHeader>,
) -> Result<u64, StoreError> {
    header
        .and_then(|h| u64::try_from(h.revision).ok())
        .ok_or_else(|| odd(endpoint, "no header revision"))
}

/// The range answer of operation `i` of a txn's answer.
pub(crate) fn txn_get<'a>(
    endpoint: &str,
    answer: &'a TxnResponse,
    i: usize,
) -> Result<&'a RangeResponse, StoreError> {
    match answer.responses.get(i).and_then(|r| r.response.as_ref()) {
        Some(Response::ResponseRange(g)) => Ok(g),
        _ => Err(odd(endpoint, &format!("txn operation {i} is not a range"))),
    }
}

/// etcd's end of a prefix's range (shared with tenure's etcd server).
pub(crate) use tenure_etcd_api::prefix_end;

/// A read of the keys under `prefix`, oldest first.
pub(crate) fn prefix_by_creation(prefix: &str) -> RangeRequest {
    RangeRequest {
        key: prefix.as_bytes().to_vec(),
        range_end: prefix_end(prefix.as_bytes()),
        sort_order: SortOrder::Ascend.into(),
        sort_target: SortTarget::Create.into(),
        ..Default::default()
    }
}

/// A read of the first-created key under `prefix` (keys only).
pub(crate) fn first_created(prefix: &str) -> RangeRequest {
    RangeRequest { limit: 1, keys_only: true, ..prefix_by_creation(prefix) }
}

/// A key's creation revision as a token.
pub(crate) fn token_of(kv: &KeyValue) -> u64 {
    u64::try_from(kv.create_revision).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_created_key_is_read_by_its_prefix_range() {
        let first = first_created("/p/e/");
        assert_eq!((first.limit, first.keys_only, &first.range_end[..]), (1, true, &b"/p/e0"[..]));
    }
}
