//! etcd's errors as clients see them: a gRPC code and an exact message
//! (clients match on the text: etcd's `rpctypes`), and how tenure's log
//! and store failures map onto them.

use tenure_kv::{InvalidCommand, ReadError, Refusal};
use tenure_node::{ReadFailure, WriteError};
use tonic::{Code, Status};

/// An empty key (Range, Put, DeleteRange, a comparison).
pub const KEY_NOT_PROVIDED: &str = "etcdserver: key is not provided";
/// Put with `ignore_value`/`ignore_lease` on a missing key, or an empty
/// transaction operation.
pub const KEY_NOT_FOUND: &str = "etcdserver: key not found";
/// `ignore_value` together with a value.
pub const VALUE_PROVIDED: &str = "etcdserver: value is provided";
/// `ignore_lease` together with a lease.
pub const LEASE_PROVIDED: &str = "etcdserver: lease is provided";
/// More than [`tenure_kv::MAX_TXN_OPS`] comparisons or operations in one part.
pub const TOO_MANY_OPS: &str = "etcdserver: too many operations in txn request";
/// One key written twice in one branch.
pub const DUPLICATE_KEY: &str = "etcdserver: duplicate key given in txn request";
/// A revision before the compacted one.
pub const COMPACTED: &str = "etcdserver: mvcc: required revision has been compacted";
/// A revision after the store's.
pub const FUTURE_REV: &str = "etcdserver: mvcc: required revision is a future revision";
/// A lease (tenure session) that does not exist.
pub const LEASE_NOT_FOUND: &str = "etcdserver: requested lease not found";
/// A grant naming a lease id that exists.
pub const LEASE_EXISTS: &str = "etcdserver: lease already exists";
/// A grant over the longest TTL (etcd's 9,000,000,000 s; tenure's one day).
pub const LEASE_TTL_TOO_LARGE: &str = "etcdserver: too large lease TTL";
/// A grant naming an id of its own (tenure's come from the store's counter).
pub const LEASE_ID_CHOSEN: &str = "tenure: lease ids are chosen by tenure (from a counter, never \
     reused): grant with ID 0 and use the id answered (see docs/ETCD.md)";
/// `hasleader: true` while the node knows no leader, or a request that
/// found none in time.
pub const NO_LEADER: &str = "etcdserver: no leader";
/// A call only the leader takes (member changes, MoveLeader) sent to
/// another member.
pub const NOT_LEADER: &str = "etcdserver: not leader";
/// A request over a limit.
pub const REQUEST_TOO_LARGE: &str = "etcdserver: request is too large";
/// A write whose outcome is unknown: its leader lost office before it
/// committed (a later leader may still commit it).
pub const TIMEOUT_LEADER_FAIL: &str =
    "etcdserver: request timed out, possibly due to previous leader failure";
/// A read or write that did not finish in time.
pub const TIMEOUT: &str = "etcdserver: request timed out";
/// A request whose connection broke after it was sent: its outcome is
/// unknown.
pub const TIMEOUT_CONNECTION_LOST: &str =
    "etcdserver: request timed out, possibly due to connection lost";
/// The node is stopping.
pub const SERVER_STOPPED: &str = "etcdserver: server stopped";
/// Too many requests in flight.
pub const TOO_MANY_REQUESTS: &str = "etcdserver: too many requests";

/// A status with etcd's code for `message`.
pub fn status(code: Code, message: &str) -> Status {
    Status::new(code, message)
}

/// InvalidArgument with `message`.
pub fn invalid(message: &str) -> Status {
    Status::invalid_argument(message)
}

/// A command that breaks one of tenure's limits.
pub fn invalid_command(e: &InvalidCommand) -> Status {
    match e {
        InvalidCommand::EmptyKey => invalid(KEY_NOT_PROVIDED),
        InvalidCommand::TooManyOps(_) => invalid(TOO_MANY_OPS),
        InvalidCommand::DuplicateWrite(_) => invalid(DUPLICATE_KEY),
        InvalidCommand::KeyTooLong(_) | InvalidCommand::ValueTooLarge(_) => {
            invalid(REQUEST_TOO_LARGE)
        }
        other => invalid(&format!("tenure: {other}")),
    }
}

/// A write the store refused for what it holds.
pub fn refused(r: &Refusal) -> Status {
    match r {
        Refusal::LeaseNotFound(_) => Status::not_found(LEASE_NOT_FOUND),
        Refusal::Compacted { .. } => Status::out_of_range(COMPACTED),
        Refusal::FutureRevision { .. } => Status::out_of_range(FUTURE_REV),
        Refusal::KeyNotFound(_) => invalid(KEY_NOT_FOUND),
        Refusal::RangeTooLarge { .. }
        | Refusal::ReadTooLarge { .. }
        | Refusal::TooManyKeysVisited => Status::invalid_argument(format!("tenure: {r}")),
        other => Status::resource_exhausted(format!("tenure: {other}")),
    }
}

/// A read at a revision the store cannot serve.
pub fn read_error(e: &ReadError) -> Status {
    match e {
        ReadError::Compacted { .. } => Status::out_of_range(COMPACTED),
        ReadError::Future { .. } => Status::out_of_range(FUTURE_REV),
    }
}

/// A write the log did not commit (or may not have).
pub fn write_failure(e: &WriteError) -> Status {
    match e {
        WriteError::NoLeader { .. } | WriteError::NotLeader => Status::unavailable(NO_LEADER),
        WriteError::Busy => Status::resource_exhausted(TOO_MANY_REQUESTS),
        WriteError::Stopped => Status::unavailable(SERVER_STOPPED),
        WriteError::TooLarge { .. } => invalid(REQUEST_TOO_LARGE),
        WriteError::Unknown(_) => Status::unavailable(TIMEOUT_LEADER_FAIL),
    }
}

/// A linearizable read that could not be served.
pub fn read_failure(e: &ReadFailure) -> Status {
    match e {
        ReadFailure::NoLeader { .. } | ReadFailure::NotLeader => Status::unavailable(NO_LEADER),
        ReadFailure::Busy => Status::resource_exhausted(TOO_MANY_REQUESTS),
        ReadFailure::Stopped => Status::unavailable(SERVER_STOPPED),
        ReadFailure::Timeout(_) => Status::unavailable(TIMEOUT),
    }
}

/// A key that tenure cannot hold: not UTF-8.
pub fn not_utf8() -> Status {
    invalid("tenure: keys are UTF-8 text and this key is not (see docs/ETCD.md)")
}

/// A write to tenure's own keys.
pub fn reserved() -> Status {
    Status::permission_denied(
        "tenure: keys under _tenure/ belong to tenure's sessions and elections and are not \
         written through the KV API (a range delete must not cover them either)",
    )
}

/// A call tenure does not serve, and what to use instead.
pub fn unimplemented(what: &str) -> Status {
    Status::unimplemented(format!("tenure: {what} (see docs/ETCD.md)"))
}
