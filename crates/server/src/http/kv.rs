//! The key-value store: `GET|PUT|DELETE /v1/kv/{key}`, `GET /v1/kv?prefix=P`
//! and `POST /v1/txn` (the watch is in [`super::kv_watch`]).
//!
//! Every write is checked against the store's limits before it is proposed
//! (a bad key or value gets 400 or 413 and nothing is written), then goes
//! through the replicated log from whichever node took the request (a
//! follower forwards it to the leader). Reads are linearizable unless the
//! caller asks `consistency=stale`. Values are bytes: a value that is UTF-8
//! travels as the string `value`, any other as `value_base64`. How the
//! log's failures are answered: [`super::store`].

use super::auth::Caller;
use super::budget::{json_answer, json_str_len, json_value_len, MAX_LIST_BYTES};
use super::error::ApiError;
use super::kv_body::{check_key, check_prefix, invalid, kv_body, txn_body, txn_command};
use super::owner::{leases_used, require_owner, Use};
use super::state::AppState;
use super::store::{body_error, propose, query_from, read, unexpected, Consistency};
use crate::elections::{is_reserved, RESERVED_PREFIX};
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response as HttpResponse;
use axum::{Extension, Json};
use serde::Deserialize;
use tenure_api::{KvDeleteBody, KvGetBody, KvListBody, KvPutBody, TxnBody, TxnRequest};
use tenure_kv::{Command, KeyValue, LeaseId, Response, Store, TxnOp, MAX_RANGE, MAX_VALUE_BYTES};

/// Largest `POST /v1/txn` body: four times the log's largest command (64
/// KiB), room for JSON quoting and base64 around a transaction at that
/// limit; the command built from it is checked against the log's limit
/// again (413). Bounds what one request can make the server buffer.
pub const MAX_TXN_BODY_BYTES: usize = 256 * 1024;

/// The shape of a transaction, for the error answer to a malformed one.
const TXN_SHAPE: &str = r#"{"compare": [{"key", "target", "op", "value"}], "success": [{"put": {"key", "value"}} | {"delete": {"key"}} | {"get": {"key"}}], "failure": [...]}"#;

/// The query of `GET /v1/kv/{key}`.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct ReadQuery {
    #[serde(default)]
    consistency: Consistency,
}

/// The query of `PUT` and `DELETE /v1/kv/{key}`. Unknown parameters are
/// refused: a misspelt `if_mod_revision` must not turn a compare-and-set
/// into a plain write.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct WriteQuery {
    if_mod_revision: Option<u64>,
}

/// The query of `PUT /v1/kv/{key}`: [`WriteQuery`]'s, and the session to
/// attach the key to.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct PutQuery {
    if_mod_revision: Option<u64>,
    lease: Option<u64>,
}

/// The query of `GET /v1/kv`.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    #[serde(default)]
    prefix: String,
    limit: Option<usize>,
    /// Continue after this key (excluded): the last key of the page before.
    after: Option<String>,
    #[serde(default)]
    consistency: Consistency,
}

/// `GET /v1/kv/{key}`: the key, or 404 (with the store's revision).
pub async fn get(
    State(st): State<AppState>,
    key: Result<Path<String>, PathRejection>,
    query: Result<Query<ReadQuery>, QueryRejection>,
) -> Result<Json<KvGetBody>, ApiError> {
    let key = key_from(key)?;
    let q = query_from(query, "consistency=stale")?;
    let (kv, revision) =
        read(&st, q.consistency, |s: &Store| (s.get(&key).cloned(), s.revision())).await?;
    match kv {
        Some(kv) => Ok(Json(KvGetBody { kv: kv_body(&kv), revision })),
        None => {
            let mut e = ApiError::new(StatusCode::NOT_FOUND, format!("no key {key:?}"));
            e.body.revision = Some(revision);
            Err(e)
        }
    }
}

/// `PUT /v1/kv/{key}`: sets the key to the body; with `if_mod_revision`,
/// only if the key's `mod_revision` is that (0: only if absent), else 409;
/// with `lease`, only to a session of the caller's token (else 403).
pub async fn put(
    State(st): State<AppState>,
    Extension(caller): Extension<Caller>,
    key: Result<Path<String>, PathRejection>,
    query: Result<Query<PutQuery>, QueryRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<KvPutBody>, ApiError> {
    let key = key_from(key)?;
    let q = query_from(query, "if_mod_revision=R, lease=L")?;
    let value = body.map_err(|r| body_error(r, MAX_VALUE_BYTES, "value"))?;
    let command = Command::Put {
        key,
        value: value.to_vec(),
        if_mod_revision: q.if_mod_revision,
        lease: q.lease.map(LeaseId),
    };
    refuse_reserved(&command)?;
    require_owner(&st, &caller, &leases_used(&command), Use::Attach).await?;
    match propose(&st, &command).await? {
        (Response::Put { revision, .. }, fencing_token) => {
            Ok(Json(KvPutBody { revision, fencing_token }))
        }
        (other, _) => Err(unexpected(&other)),
    }
}

/// `DELETE /v1/kv/{key}`: removes the key (`deleted: false` if it was
/// absent); with `if_mod_revision`, only if its `mod_revision` is that.
pub async fn delete(
    State(st): State<AppState>,
    key: Result<Path<String>, PathRejection>,
    query: Result<Query<WriteQuery>, QueryRejection>,
) -> Result<Json<KvDeleteBody>, ApiError> {
    let key = key_from(key)?;
    let q = query_from(query, "if_mod_revision=R")?;
    let command = Command::Delete { key, if_mod_revision: q.if_mod_revision };
    refuse_reserved(&command)?;
    match propose(&st, &command).await? {
        (Response::Delete { revision, prev }, fencing_token) => {
            Ok(Json(KvDeleteBody { revision, deleted: prev.is_some(), fencing_token }))
        }
        (other, _) => Err(unexpected(&other)),
    }
}

/// `GET /v1/kv?prefix=P[&limit=N][&after=K]`: the keys starting with P, in
/// order, after K: a page of at most N keys and [`MAX_LIST_BYTES`] of JSON,
/// with `more: true` when keys are left (continue with `after=` the last).
pub async fn list(
    State(st): State<AppState>,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Result<HttpResponse, ApiError> {
    let q = query_from(query, "prefix=P, limit=N, after=K, consistency=stale")?;
    check_prefix(&q.prefix).map_err(|e| invalid(&e))?;
    let limit = match q.limit {
        None => MAX_RANGE,
        Some(n @ 1..=MAX_RANGE) => n,
        Some(n) => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                format!("limit={n}: give 1 to {MAX_RANGE} (the default)"),
            ))
        }
    };
    let permit = st.lists.permit().await?;
    let (prefix, after) = (q.prefix, q.after);
    let ((kvs, more), revision) = read(&st, q.consistency, |s: &Store| {
        (page(s, &prefix, after.as_deref(), limit), s.revision())
    })
    .await?;
    Ok(json_answer(permit, move || KvListBody {
        kvs: kvs.iter().map(kv_body).collect(),
        more,
        revision,
    })
    .await)
}

/// The keys starting with `prefix` after `after`, at most `limit` and
/// [`MAX_LIST_BYTES`] of JSON (one at least), copied; and whether more are
/// left. Only the page is copied: the walk stops at its end.
fn page(store: &Store, prefix: &str, after: Option<&str>, limit: usize) -> (Vec<KeyValue>, bool) {
    let start = match after {
        Some(after) if after > prefix => after,
        _ => prefix,
    };
    let mut found = Vec::new();
    let mut bytes = 0;
    for kv in store.keys_from(start) {
        if !kv.key.starts_with(prefix) {
            break;
        }
        if Some(kv.key.as_str()) == after {
            continue;
        }
        // The key and value as JSON strings, and the other fields.
        let size = json_str_len(kv.key.as_bytes()) + json_value_len(&kv.value) + 128;
        if found.len() == limit || (!found.is_empty() && bytes + size > MAX_LIST_BYTES) {
            return (found, true);
        }
        bytes += size;
        found.push(kv.clone());
    }
    (found, false)
}

/// `POST /v1/txn`: comparisons, then the operations of one branch, at one
/// revision; puts with a `lease` only to sessions of the caller's token
/// (else 403).
pub async fn txn(
    State(st): State<AppState>,
    Extension(caller): Extension<Caller>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<TxnBody>, ApiError> {
    let body = body.map_err(|r| body_error(r, MAX_TXN_BODY_BYTES, "transaction"))?;
    let request = Json::<TxnRequest>::from_bytes(&body).map_err(|r| {
        ApiError::new(StatusCode::BAD_REQUEST, format!("{}; expected {TXN_SHAPE}", r.body_text()))
    })?;
    let command = txn_command(request.0)?;
    refuse_reserved(&command)?;
    require_owner(&st, &caller, &leases_used(&command), Use::Attach).await?;
    match propose(&st, &command).await? {
        (Response::Txn { succeeded, revision, responses }, fencing_token) => {
            Ok(Json(txn_body(succeeded, revision, fencing_token, &responses)))
        }
        (other, _) => Err(unexpected(&other)),
    }
}

/// 400 for a command of the key-value API that writes a key under
/// `_tenure/` (election candidates): only the election calls change those.
/// Reads and comparisons of them are fine.
pub(crate) fn refuse_reserved(command: &Command) -> Result<(), ApiError> {
    let written: Vec<&str> = match command {
        Command::Put { key, .. } | Command::Delete { key, .. } => vec![key],
        Command::Txn { success, failure, .. } => success
            .iter()
            .chain(failure)
            .filter_map(|op| match op {
                TxnOp::Put { key, .. } | TxnOp::Delete { key } => Some(key.as_str()),
                TxnOp::Get { .. } => None,
            })
            .collect(),
        // The HTTP API builds no range delete, compaction or etcd
        // transaction.
        Command::Grant { .. }
        | Command::Revoke { .. }
        | Command::Expire { .. }
        | Command::ExpireMany { .. }
        | Command::Checkpoint(_)
        | Command::DeleteRange { .. }
        | Command::Compact { .. }
        | Command::RangeTxn(_) => vec![],
    };
    match written.into_iter().find(|k| is_reserved(k)) {
        None => Ok(()),
        Some(key) => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!(
                "key {key:?} is under {RESERVED_PREFIX:?}, which only the election calls \
                 (/v1/elections/...) change; nothing was written"
            ),
        )),
    }
}

/// The key of the path (percent-decoded by the router), checked.
fn key_from(key: Result<Path<String>, PathRejection>) -> Result<String, ApiError> {
    let Path(key) = key.map_err(|r| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("{}; a key is UTF-8, percent-encoded in the path", r.body_text()),
        )
    })?;
    check_key(&key).map_err(|e| invalid(&e))?;
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store_of(keys: &[(&str, Vec<u8>)]) -> Store {
        let mut s = Store::new();
        for (key, value) in keys {
            let put = Command::Put {
                key: (*key).into(),
                value: value.clone(),
                if_mod_revision: None,
                lease: None,
            };
            assert!(matches!(s.execute(&put), Response::Put { .. }));
        }
        s
    }

    /// Every page of `prefix`, following `more` with `after`.
    fn pages(s: &Store, prefix: &str, limit: usize) -> Vec<Vec<String>> {
        let (mut out, mut after) = (Vec::new(), None::<String>);
        loop {
            let (kvs, more) = page(s, prefix, after.as_deref(), limit);
            after = kvs.last().map(|kv| kv.key.clone());
            out.push(kvs.into_iter().map(|kv| kv.key).collect());
            if !more {
                return out;
            }
        }
    }

    #[test]
    fn pages_cover_a_prefix_once_in_order_within_the_byte_budget() {
        // 100 values of 64 KiB of control bytes: 384 KiB of JSON each, so a
        // page of 4 MiB holds 10 of them; keys outside the prefix around.
        let big = vec![1u8; MAX_VALUE_BYTES];
        let mut keys: Vec<(String, Vec<u8>)> =
            (0..100).map(|i| (format!("big/{i:03}"), big.clone())).collect();
        keys.push(("bif".into(), b"x".to_vec()));
        keys.push(("bih".into(), b"x".to_vec()));
        let refs: Vec<(&str, Vec<u8>)> =
            keys.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
        let s = store_of(&refs);
        let by_bytes = pages(&s, "big/", MAX_RANGE);
        let per_entry = json_value_len(&big) + 128 + 7;
        assert!(by_bytes.len() > 1, "one page of {} MiB", (100 * per_entry) >> 20);
        for p in &by_bytes[..by_bytes.len() - 1] {
            assert_eq!(p.len(), MAX_LIST_BYTES / per_entry, "a full page: {p:?}");
        }
        let all: Vec<String> = by_bytes.concat();
        let expected: Vec<String> = (0..100).map(|i| format!("big/{i:03}")).collect();
        assert_eq!(all, expected, "every key once, in order");
        // The count limit too, and `after` beyond the end: an empty last page.
        assert_eq!(pages(&s, "big/", 7).concat(), expected);
        assert_eq!(page(&s, "big/", Some("big/999"), 10), (vec![], false));
        // `after` before the prefix starts at the prefix.
        assert_eq!(page(&s, "big/", Some("a"), 1).0[0].key, "big/000");
    }

    #[test]
    fn a_value_over_the_budget_alone_still_makes_a_page() {
        // A budget smaller than one entry cannot happen with the store's
        // limits (384 KiB < 4 MiB), but a page always holds one entry.
        let s = store_of(&[("k", vec![0u8; MAX_VALUE_BYTES]), ("l", b"v".to_vec())]);
        let (kvs, more) = page(&s, "", None, 1);
        assert_eq!((kvs.len(), more), (1, true));
        assert_eq!(pages(&s, "", MAX_RANGE).concat(), ["k", "l"]);
    }

    #[test]
    fn writes_under_the_reserved_prefix_are_refused_and_reads_are_not() {
        let put = |key: &str| Command::Put {
            key: key.into(),
            value: vec![],
            if_mod_revision: None,
            lease: None,
        };
        let e = refuse_reserved(&put("_tenure/elections/db/0000000000000001")).unwrap_err();
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
        assert!(e.body.error.contains("only the election calls"), "{}", e.body.error);
        assert!(refuse_reserved(&put("app/_tenure/x")).is_ok());
        let delete = Command::Delete { key: "_tenure/x".into(), if_mod_revision: None };
        assert!(refuse_reserved(&delete).is_err());
        let txn = |op: TxnOp| Command::Txn {
            compare: vec![tenure_kv::Compare {
                key: "_tenure/elections/db/0000000000000001".into(),
                target: tenure_kv::Target::CreateRevision(0),
                op: tenure_kv::CompareOp::Greater,
            }],
            success: vec![TxnOp::Get { key: "a".into() }],
            failure: vec![op],
        };
        assert!(refuse_reserved(&txn(TxnOp::Get { key: "_tenure/x".into() })).is_ok());
        assert!(refuse_reserved(&txn(TxnOp::Delete { key: "_tenure/x".into() })).is_err());
        let put_op = TxnOp::Put { key: "_tenure/y".into(), value: vec![], lease: None };
        assert!(refuse_reserved(&txn(put_op)).is_err());
    }
}
