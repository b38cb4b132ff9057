//! What every handler does with the replicated store: propose a command,
//! read linearizably or from this node's state, and answer the log's and
//! the store's refusals with the same statuses everywhere.
//!
//! How the log's failures are answered ([`write_error`], [`read_error`]):
//!
//! | failure | status |
//! |---|---|
//! | no leader for the whole wait | 503, `Retry-After` about one election timeout |
//! | too many requests in flight | 503, `Retry-After: 1` |
//! | the node is stopping | 503, `Retry-After: 1` (ask another node) |
//! | the outcome of a write is unknown | 504, `"outcome": "unknown"`: never a failure |
//! | the command is over the log's size limit | 413 |
//! | a read found no confirmed read index in time | 504 |

use super::error::ApiError;
use super::kv_body::invalid;
use super::state::AppState;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::Query;
use axum::http::StatusCode;
use serde::Deserialize;
use std::time::{Duration, Instant};
use tenure_kv::{Command, Refusal, Response, Store};
use tenure_node::{Committed, ReadFailure, WriteError};

/// How a read is served.
#[derive(Deserialize, Debug, Clone, Copy, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Consistency {
    /// Sees every write committed before the read began (the default).
    #[default]
    Linearizable,
    /// This node's state as applied so far.
    Stale,
}

/// Checks `command`, proposes it, and returns the store's response and the
/// fencing token of the leadership that committed it; a compare-and-set
/// that did not match is a 409.
pub(crate) async fn propose(st: &AppState, command: &Command) -> Result<(Response, u64), ApiError> {
    command.validate().map_err(|e| invalid(&e))?;
    let started = Instant::now();
    let committed = st.kv.propose(command.encode()).await;
    committed_answer(st, started, committed)
}

/// [`propose`] for several commands, which reach the log together and are
/// written in one batch (unless it is full); each answered, in order. A
/// command that fails its checks fails alone.
pub(crate) async fn propose_together(
    st: &AppState,
    commands: &[Command],
) -> Vec<Result<(Response, u64), ApiError>> {
    let mut answers: Vec<Option<Result<(Response, u64), ApiError>>> = Vec::new();
    let mut valid = Vec::new();
    for command in commands {
        match command.validate() {
            Ok(()) => {
                valid.push(command.encode());
                answers.push(None);
            }
            Err(e) => answers.push(Some(Err(invalid(&e)))),
        }
    }
    let started = Instant::now();
    let mut committed = st.kv.propose_together(valid).await.into_iter();
    answers
        .into_iter()
        .map(|a| {
            a.unwrap_or_else(|| {
                let c = committed.next().expect("an answer for each command proposed");
                committed_answer(st, started, c)
            })
        })
        .collect()
}

/// The answer to a write proposed at `started`: the store's response and
/// the fencing token of the leadership that committed it, or the error.
fn committed_answer(
    st: &AppState,
    started: Instant,
    committed: Result<Committed, WriteError>,
) -> Result<(Response, u64), ApiError> {
    let committed = match committed {
        Ok(c) => c,
        Err(e) => {
            if matches!(e, WriteError::Unknown(_)) {
                st.metrics.kv_write_unknown();
            }
            return Err(write_error(&e));
        }
    };
    st.metrics.kv_write_committed(started.elapsed());
    let response = Response::decode(&committed.result).map_err(|e| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the write was applied, but its answer cannot be read: {e}"),
        )
    })?;
    match response {
        Response::Conflict { mod_revision, revision } => Err(conflict(mod_revision, revision)),
        Response::Invalid(e) => Err(invalid(&e)),
        Response::Refused(r) => Err(refused(&r)),
        r => Ok((r, committed.fencing_token().0)),
    }
}

/// A read as the caller asked: linearizable, or from this node's state.
pub(crate) async fn read<R>(
    st: &AppState,
    consistency: Consistency,
    f: impl FnOnce(&Store) -> R,
) -> Result<R, ApiError> {
    match consistency {
        Consistency::Stale => Ok(st.kv.read_stale(f).0),
        Consistency::Linearizable => {
            st.kv.read(f).await.map(|(r, _)| r).map_err(|e| read_error(&e))
        }
    }
}

/// The query, or 400 naming the parameters the endpoint takes.
pub(crate) fn query_from<T>(
    query: Result<Query<T>, QueryRejection>,
    takes: &str,
) -> Result<T, ApiError> {
    query.map(|Query(q)| q).map_err(|r| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("{}; this endpoint takes {takes}", r.body_text()),
        )
    })
}

/// A body the server would not read: 413 beyond `limit` bytes.
pub(crate) fn body_error(r: BytesRejection, limit: usize, what: &str) -> ApiError {
    match r.status() {
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the {what} is larger than {limit} bytes, the most accepted; nothing was written"
            ),
        ),
        status => ApiError::new(status, r.body_text()),
    }
}

/// 409: the compare-and-set did not match.
pub(crate) fn conflict(mod_revision: u64, revision: u64) -> ApiError {
    let now = match mod_revision {
        0 => "the key is absent".to_string(),
        r => format!("the key's mod_revision is {r}"),
    };
    let mut e = ApiError::new(
        StatusCode::CONFLICT,
        format!("compare-and-set failed: {now} (store revision {revision}); nothing was written"),
    );
    e.body.mod_revision = Some(mod_revision);
    e.body.revision = Some(revision);
    e
}

/// A write the store refused for what it holds: 404 for a session that
/// does not exist, 429 for a session limit (too many sessions, too many
/// keys on one), 409 otherwise; nothing written.
pub(crate) fn refused(r: &Refusal) -> ApiError {
    let status = match r {
        Refusal::LeaseNotFound(_) => StatusCode::NOT_FOUND,
        Refusal::TooManyLeases | Refusal::TooManyOwnerLeases(_) | Refusal::TooManyKeys { .. } => {
            StatusCode::TOO_MANY_REQUESTS
        }
        Refusal::LeaseIdsExhausted
        | Refusal::KeyNotFound(_)
        | Refusal::ReadTooLarge { .. }
        | Refusal::TooManyKeysVisited
        | Refusal::RangeTooLarge { .. }
        | Refusal::Compacted { .. }
        | Refusal::FutureRevision { .. } => StatusCode::CONFLICT,
    };
    ApiError::new(status, format!("{r}; nothing was written"))
}

/// A response of another kind than the command's: a bug, said so.
pub(crate) fn unexpected(r: &Response) -> ApiError {
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        format!("unexpected answer of the store: {r:?}"),
    )
}

/// `Retry-After` after waiting `waited` for a leader: the wait is three
/// election timeouts, a retry after about one has a fair chance; at least 1 s.
pub(crate) fn no_leader_retry(waited: Duration) -> u64 {
    (waited.as_millis() as u64).div_ceil(3000).max(1)
}

/// The answer to a write the log did not commit (or may not have).
pub fn write_error(e: &WriteError) -> ApiError {
    match e {
        WriteError::NoLeader { waited } => {
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string())
                .retry_after(no_leader_retry(*waited))
        }
        // `NotLeader` answers only a leader-bound proposal (`propose_as`).
        WriteError::Busy | WriteError::Stopped | WriteError::NotLeader => {
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string()).retry_after(1)
        }
        WriteError::TooLarge { .. } => {
            ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, format!("{e}; nothing was written"))
        }
        WriteError::Unknown(_) => {
            let mut err = ApiError::new(StatusCode::GATEWAY_TIMEOUT, e.to_string());
            err.body.outcome = Some("unknown".to_string());
            err
        }
    }
}

/// The answer to a linearizable read that could not be served.
pub fn read_error(e: &ReadFailure) -> ApiError {
    match e {
        ReadFailure::NoLeader { waited } => {
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string())
                .retry_after(no_leader_retry(*waited))
        }
        // `NotLeader` answers only a leadership check (`confirm_leader`).
        ReadFailure::Busy | ReadFailure::Stopped | ReadFailure::NotLeader => {
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string()).retry_after(1)
        }
        ReadFailure::Timeout(_) => ApiError::new(
            StatusCode::GATEWAY_TIMEOUT,
            format!("{e}; retry, or read with consistency=stale"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_failures_map_to_statuses_and_unknown_is_never_a_failure() {
        let no_leader = write_error(&WriteError::NoLeader { waited: Duration::from_secs(3) });
        assert_eq!(
            (no_leader.status, no_leader.retry_after),
            (StatusCode::SERVICE_UNAVAILABLE, Some(1))
        );
        let long = write_error(&WriteError::NoLeader { waited: Duration::from_millis(9001) });
        assert_eq!(long.retry_after, Some(4), "about one election timeout, rounded up");
        let short = read_error(&ReadFailure::NoLeader { waited: Duration::from_millis(10) });
        assert_eq!((short.status, short.retry_after), (StatusCode::SERVICE_UNAVAILABLE, Some(1)));
        for e in [WriteError::Busy, WriteError::Stopped] {
            let a = write_error(&e);
            assert_eq!(
                (a.status, a.retry_after),
                (StatusCode::SERVICE_UNAVAILABLE, Some(1)),
                "{e}"
            );
        }
        let unknown = write_error(&WriteError::Unknown("the leader lost office"));
        assert_eq!(unknown.status, StatusCode::GATEWAY_TIMEOUT);
        assert_eq!(unknown.body.outcome.as_deref(), Some("unknown"));
        assert!(unknown.body.error.contains("may or may not"), "{}", unknown.body.error);
        assert!(!unknown.body.error.contains("nothing was written"));
        let big = write_error(&WriteError::TooLarge { size: 70_000, max: 65_536 });
        assert_eq!(big.status, StatusCode::PAYLOAD_TOO_LARGE);
        assert!(big.body.error.contains("at most 65536"), "{}", big.body.error);
        let timeout = read_error(&ReadFailure::Timeout(Duration::from_secs(10)));
        assert_eq!((timeout.status, timeout.retry_after), (StatusCode::GATEWAY_TIMEOUT, None));
        for e in [ReadFailure::Busy, ReadFailure::Stopped] {
            assert_eq!(read_error(&e).status, StatusCode::SERVICE_UNAVAILABLE, "{e}");
        }
    }

    #[test]
    fn a_conflict_names_the_current_revisions() {
        let c = conflict(7, 9);
        assert_eq!(c.status, StatusCode::CONFLICT);
        assert_eq!((c.body.mod_revision, c.body.revision), (Some(7), Some(9)));
        assert!(c.body.error.contains("mod_revision is 7"), "{}", c.body.error);
        assert!(conflict(0, 9).body.error.contains("absent"));
        let json = serde_json::to_value(&c.body).unwrap();
        assert_eq!(json["mod_revision"], 7);
        assert!(json.get("outcome").is_none() && json.get("leader").is_none(), "{json}");
    }
}
