//! Standing in line under a name: what the Election and Lock services
//! share (etcd's `clientv3/concurrency` recipes, which etcd's own Election
//! and Lock servers run on the member, done here over the same KV paths).
//!
//! A candidate (a campaigner, a locker) is the key `name/<lease in hex>`,
//! created attached to its lease by a transaction that keeps it when it
//! already stands ([`join`]). Candidates are served in the order of their
//! keys' create revisions: one whose predecessors (the keys under `name/`
//! created before it) are all gone leads, or holds the lock
//! ([`wait_turn`]).
//!
//! The wait reads this member's applied store at every advance of its
//! applied index (as the Watch service does), and confirms with a
//! linearizable read before it answers. It ends with an error as soon as
//! the candidate's own key is gone (its lease ended, or someone deleted
//! it), and when the listener stops; when the client goes away, tonic
//! drops the call and with it the wait. A candidate that did not get its
//! turn is withdrawn ([`Withdrawal`]: its key deleted if it is still the
//! same key), as etcd's recipes do when their wait fails.
//! [`MAX_WAITING_CALLS`] bounds how many calls wait at once on a member.

use crate::auth::Caller;
use crate::errors::{LEASE_NOT_FOUND, SERVER_STOPPED};
use crate::range::{key_range, prefix_end};
use crate::Shared;
use std::sync::Arc;
use std::time::Duration;
use tenure_etcd_api::etcdserverpb::compare::{CompareResult, CompareTarget, TargetUnion};
use tenure_etcd_api::etcdserverpb::request_op::Request as Op;
use tenure_etcd_api::etcdserverpb::response_op::Response as OpAnswer;
use tenure_etcd_api::etcdserverpb::{
    Compare, DeleteRangeRequest, PutRequest, RangeRequest, RequestOp, ResponseHeader, TxnRequest,
};
use tenure_kv::{LeaseId, Store};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tonic::{Code, Status};
use tracing::debug;

/// Calls that may wait at once on one member: Campaign and Lock until
/// their turn, Observe streams for the next leader. One more is refused
/// with ResourceExhausted.
pub const MAX_WAITING_CALLS: usize = 1024;

/// How long the withdrawal of a candidate whose call ended without its
/// turn may take (it runs after the call, on its own).
pub const WITHDRAW_BOUND: Duration = Duration::from_secs(10);

/// Pause before the wait reads again when the read confirming its turn
/// found no leader.
const CONFIRM_RETRY: Duration = Duration::from_millis(100);

/// The slots of one kind of waiting call of one member.
pub(crate) struct WaitSlots {
    slots: Arc<Semaphore>,
    /// The calls, for the refusal: "Campaign and Lock", "Observe".
    calls: &'static str,
}

impl WaitSlots {
    pub(crate) fn new(calls: &'static str) -> Self {
        WaitSlots { slots: Arc::new(Semaphore::new(MAX_WAITING_CALLS)), calls }
    }

    /// A slot for one waiting call (held until dropped), or
    /// ResourceExhausted when [`MAX_WAITING_CALLS`] are waiting.
    pub(crate) fn take(&self) -> Result<OwnedSemaphorePermit, Status> {
        self.slots.clone().try_acquire_owned().map_err(|_| {
            Status::resource_exhausted(format!(
                "tenure: this member already serves {MAX_WAITING_CALLS} waiting {} calls, its \
                 most; try again later or through another member",
                self.calls
            ))
        })
    }
}

/// etcd's lease of a candidate: a positive id. 0 (no lease) and negative
/// ids are refused with etcd's "lease not found" text.
pub(crate) fn candidate_lease(lease: i64) -> Result<i64, Status> {
    if lease <= 0 {
        return Err(Status::unknown(LEASE_NOT_FOUND));
    }
    Ok(lease)
}

/// The candidate key of `lease` in the line `name`: `name/<lease in lowercase hex>`.
pub(crate) fn candidate_key(name: &[u8], lease: i64) -> Vec<u8> {
    let mut key = line(name);
    key.extend(format!("{lease:x}").bytes());
    key
}

/// The prefix of the candidates of `name`: `name/`.
pub(crate) fn line(name: &[u8]) -> Vec<u8> {
    let mut prefix = name.to_vec();
    prefix.push(b'/');
    prefix
}

/// An error of the KV calls under Election and Lock as etcd's clients get
/// it: etcd runs its recipes through a client that keeps an error's text
/// and drops its code, so they arrive as Unknown with etcd's text. Errors
/// that say "try again" (no leader, stopping, busy) keep their code here,
/// so that clients retry.
pub(crate) fn as_etcd(status: Status) -> Status {
    match status.code() {
        Code::Unavailable
        | Code::ResourceExhausted
        | Code::DeadlineExceeded
        | Code::Cancelled
        | Code::Internal => status,
        _ => Status::unknown(status.message()),
    }
}

/// The comparison "`key` was created at `rev`" (0: does not exist).
pub(crate) fn created_at(key: &[u8], rev: i64) -> Compare {
    Compare {
        result: CompareResult::Equal as i32,
        target: CompareTarget::Create as i32,
        key: key.to_vec(),
        range_end: Vec::new(),
        target_union: Some(TargetUnion::CreateRevision(rev)),
    }
}

/// A put of `key` attached to `lease`.
pub(crate) fn put(key: &[u8], value: &[u8], lease: i64) -> RequestOp {
    let put = PutRequest { key: key.to_vec(), value: value.to_vec(), lease, ..Default::default() };
    RequestOp { request: Some(Op::RequestPut(put)) }
}

/// A delete of `key`.
pub(crate) fn delete(key: &[u8]) -> RequestOp {
    let delete = DeleteRangeRequest { key: key.to_vec(), ..Default::default() };
    RequestOp { request: Some(Op::RequestDeleteRange(delete)) }
}

/// `op` on `key` if it still is the key created at `rev`: whether it
/// was, and the header.
pub(crate) async fn if_created_at(
    shared: &Shared,
    key: &[u8],
    rev: i64,
    op: RequestOp,
) -> Result<(bool, ResponseHeader), Status> {
    let t = TxnRequest { compare: vec![created_at(key, rev)], success: vec![op], failure: vec![] };
    // The recipe's own transaction: its call was admitted, its lease checked.
    let answer = crate::txn::txn(shared, &Caller::certificate(), t).await.map_err(as_etcd)?;
    Ok((answer.succeeded, answer.header.unwrap_or_default()))
}

/// A candidate's place in line.
pub(crate) struct Place {
    /// Its key's create revision: its rank, and its fencing token.
    pub(crate) rev: i64,
    /// The header of the transaction that made (or found) the key.
    pub(crate) header: ResponseHeader,
    /// The value of the key when it already stood (the same lease joined
    /// before); `None` when it was created now.
    pub(crate) standing: Option<Vec<u8>>,
}

/// Puts `key` (with `value`, attached to `lease`) unless it exists, as
/// clientv3 does: `If(CreateRevision(key) == 0) Then(Put) Else(Get)`.
pub(crate) async fn join(
    shared: &Shared,
    key: &[u8],
    lease: i64,
    value: &[u8],
) -> Result<Place, Status> {
    let get = RangeRequest { key: key.to_vec(), ..Default::default() };
    let t = TxnRequest {
        compare: vec![created_at(key, 0)],
        success: vec![put(key, value, lease)],
        failure: vec![RequestOp { request: Some(Op::RequestRange(get)) }],
    };
    // The recipe's own transaction: its call was admitted, its lease checked.
    let answer = crate::txn::txn(shared, &Caller::certificate(), t).await.map_err(as_etcd)?;
    let header = answer.header.unwrap_or_default();
    if answer.succeeded {
        return Ok(Place { rev: header.revision, header, standing: None });
    }
    let found = answer.responses.into_iter().next().and_then(|r| match r.response {
        Some(OpAnswer::ResponseRange(range)) => range.kvs.into_iter().next(),
        _ => None,
    });
    // The comparison failed, so the key stood at that revision.
    let kv = found.ok_or_else(|| Status::internal("tenure: a standing key was not read"))?;
    Ok(Place { rev: kv.create_revision, header, standing: Some(kv.value) })
}

/// What a look at the store says about a candidate.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    /// No predecessor is left: its turn.
    Turn,
    /// Some predecessor stands.
    Behind,
    /// Its key is gone, or is another key (created again).
    Gone,
}

/// Looks at `store` for the candidate `key` created at `rev` in the line
/// `prefix`.
fn look(store: &Store, prefix: &[u8], key: &[u8], rev: i64) -> Seen {
    let mine = std::str::from_utf8(key).ok().and_then(|k| store.get(k));
    if mine.is_none_or(|kv| kv.create_revision as i64 != rev) {
        return Seen::Gone;
    }
    let end = prefix_end(prefix);
    let line = store.range_at(&key_range(prefix, &end), 0).unwrap_or_default();
    match line.iter().any(|kv| (kv.create_revision as i64) < rev) {
        true => Seen::Behind,
        false => Seen::Turn,
    }
}

/// A candidate's turn: the header of the read that saw it, and whether
/// it had to wait for it.
pub(crate) struct Turn {
    pub(crate) header: ResponseHeader,
    pub(crate) waited: bool,
}

/// Waits until every key under `prefix` created before `rev` is gone,
/// while `key` still is the key created at `rev` (attached to `lease`).
/// If the key goes first: etcd's "lease not found" when its lease ended,
/// else `gone` (Unknown, as etcd's recipes' errors arrive). Ends with
/// "server stopped" when the listener stops.
pub(crate) async fn wait_turn(
    shared: &Shared,
    prefix: &[u8],
    key: &[u8],
    rev: i64,
    lease: i64,
    gone: &str,
) -> Result<Turn, Status> {
    let mut applied = shared.ctx.kv.applied();
    let mut stopping = shared.stopping.clone();
    let mut waited = false;
    let lost = |shared: &Shared| {
        let lives = shared.ctx.kv.read_stale(|s| s.lease(LeaseId(lease as u64)).is_some()).0;
        Status::unknown(if lives { gone } else { LEASE_NOT_FOUND })
    };
    loop {
        // Marks the index seen before the look: an advance after it wakes
        // the wait below.
        applied.borrow_and_update();
        let mut pause = None;
        match shared.ctx.kv.read_stale(|s| look(s, prefix, key, rev)).0 {
            Seen::Gone => return Err(lost(shared)),
            Seen::Behind => waited = true,
            // Confirmed by a linearizable read: the key still stands now.
            Seen::Turn => {
                match shared.read(false, |s| (look(s, prefix, key, rev), s.revision())).await {
                    Ok((Seen::Turn, revision)) => {
                        return Ok(Turn { header: shared.header(revision), waited })
                    }
                    Ok((Seen::Gone, _)) => return Err(lost(shared)),
                    Ok((Seen::Behind, _)) => waited = true,
                    Err(e) if e.code() == Code::Unavailable => {
                        debug!(error = %e.message(), "the read confirming a turn failed; again");
                        pause = Some(CONFIRM_RETRY);
                    }
                    Err(e) => return Err(as_etcd(e)),
                }
            }
        }
        tokio::select! {
            changed = applied.changed() => {
                if changed.is_err() {
                    return Err(Status::unavailable(SERVER_STOPPED));
                }
            }
            () = sleep(pause) => {}
            _ = stopping.wait_for(|s| *s) => return Err(Status::unavailable(SERVER_STOPPED)),
        }
    }
}

/// Sleeps `pause`; never wakes without one.
async fn sleep(pause: Option<Duration>) {
    match pause {
        Some(p) => tokio::time::sleep(p).await,
        None => std::future::pending().await,
    }
}

/// A candidate that has not got its turn yet: when dropped armed (the
/// call failed, or its client went away and tonic dropped it), its key is
/// deleted if it still is the key created at its revision, in a task of
/// its own bounded by [`WITHDRAW_BOUND`].
pub(crate) struct Withdrawal {
    shared: Arc<Shared>,
    key: Vec<u8>,
    rev: i64,
    armed: bool,
}

impl Withdrawal {
    pub(crate) fn new(shared: Arc<Shared>, key: Vec<u8>, rev: i64) -> Self {
        Withdrawal { shared, key, rev, armed: true }
    }

    /// The candidate got its turn: its key stays.
    pub(crate) fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for Withdrawal {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let (shared, key, rev) = (self.shared.clone(), std::mem::take(&mut self.key), self.rev);
        runtime.spawn(async move {
            let withdrawn = tokio::time::timeout(
                WITHDRAW_BOUND,
                if_created_at(&shared, &key, rev, delete(&key)),
            )
            .await;
            let key = String::from_utf8_lossy(&key);
            match withdrawn {
                Ok(Ok((deleted, _))) => debug!(%key, rev, deleted, "a waiting candidate withdrawn"),
                Ok(Err(e)) => debug!(%key, rev, error = %e.message(), "a withdrawal failed"),
                Err(_) => debug!(%key, rev, "a withdrawal timed out"),
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tenure_kv::Command;

    fn put(s: &mut Store, key: &str) {
        let command =
            Command::Put { key: key.into(), value: Vec::new(), if_mod_revision: None, lease: None };
        s.execute(&command);
    }

    #[test]
    fn a_member_refuses_the_waiting_call_past_its_limit_until_one_ends() {
        let slots = WaitSlots::new("Campaign and Lock");
        let mut held: Vec<_> = (0..MAX_WAITING_CALLS).map(|_| slots.take().unwrap()).collect();
        let refused = slots.take().unwrap_err();
        assert_eq!(refused.code(), Code::ResourceExhausted, "a code clients retry on");
        assert!(
            refused.message().contains("1024 waiting Campaign and Lock"),
            "{}",
            refused.message()
        );
        held.pop();
        let _again = slots.take().expect("a slot frees when its call ends");
        assert!(slots.take().is_err());
    }

    #[test]
    fn candidate_keys_are_the_name_a_slash_and_the_lease_in_lowercase_hex() {
        assert_eq!(candidate_key(b"e", 0x694d7c5e2d1d5a0b), b"e/694d7c5e2d1d5a0b");
        assert_eq!(candidate_key(b"", 255), b"/ff");
        assert_eq!(candidate_lease(7).unwrap(), 7);
        for bad in [0, -1] {
            let e = candidate_lease(bad).unwrap_err();
            assert_eq!((e.code(), e.message()), (Code::Unknown, LEASE_NOT_FOUND));
        }
    }

    #[test]
    fn a_candidate_waits_for_every_key_of_its_line_created_before_it() {
        let mut s = Store::new();
        // An empty store is at revision 1 (as etcd's): the first put is 2.
        put(&mut s, "e/1"); // 2
        put(&mut s, "e0"); // 3: not in the line (after "e/" in order, outside the prefix)
        put(&mut s, "e/3"); // 4
        put(&mut s, "f/0"); // 5: another line
        assert_eq!(look(&s, b"e/", b"e/1", 2), Seen::Turn);
        assert_eq!(look(&s, b"e/", b"e/3", 4), Seen::Behind);
        assert_eq!(look(&s, b"e/", b"e/3", 3), Seen::Gone, "another incarnation of the key");
        assert_eq!(look(&s, b"e/", b"e/9", 9), Seen::Gone);
        s.execute(&Command::Delete { key: "e/1".into(), if_mod_revision: None });
        assert_eq!(look(&s, b"e/", b"e/3", 4), Seen::Turn);
        assert_eq!(look(&s, b"f/", b"f/0", 5), Seen::Turn);
    }
}
