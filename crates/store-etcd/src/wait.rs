//! Waiting to lead without a herd, and without etcd-io/etcd#19597: each
//! round reads, in one transaction (one revision), the immediate
//! predecessor and our own key; leads only if our key is there with our
//! token and lease and no predecessor is; otherwise watches the
//! predecessor's key and our own from the read's revision, and the
//! predecessor's again from the next revision (see [`open`]: told at the
//! commit, not at etcd's 100 ms catch-up).

use crate::error::{classify, timed_out};
use crate::inner::{header_revision, lease_id, prefix_end, txn_get, Inner};
use crate::watch::{create, next_message, WatchStream};
use std::time::Duration;
use tenure_elect::store::MAX_WAIT;
use tenure_elect::{Candidacy, Retry, StoreError, Waited};
use tenure_etcd_api::etcdserverpb::range_request::{SortOrder, SortTarget};
use tenure_etcd_api::etcdserverpb::request_op::Request;
use tenure_etcd_api::etcdserverpb::{RangeRequest, RequestOp, TxnRequest};
use tenure_etcd_api::mvccpb::event::EventType;
use tokio::time::Instant;

/// Pause after a watch or a read failed before reading again.
const WATCH_RETRY_PAUSE: Duration = Duration::from_millis(50);
/// The most keys ahead a wait reads (and counts: [`Waited::Ahead`] says at
/// most this many). etcd's range `count` ignores the creation-revision
/// filter, so the keys ahead are read, keys only, newest first.
pub const MAX_AHEAD_COUNTED: usize = 10_000;

/// Where a candidacy stands, as of one revision.
#[derive(Debug, PartialEq, Eq)]
enum Place {
    /// No key before ours: ours leads.
    First,
    /// Behind `predecessor` (the newest key created before ours), with
    /// `ahead` keys before ours, read at `revision`.
    Behind { predecessor: Vec<u8>, ahead: u64, revision: i64 },
}

/// How watching the predecessor ended.
enum Woken {
    /// The predecessor was deleted (or the history the watch needed was
    /// compacted): read again.
    ReadAgain,
    /// Our own key was deleted.
    OwnGone,
    /// The store moved on between the read and the watch's creation: the
    /// watch may lag by up to etcd's 100 ms catch-up period (see [`open`]),
    /// and the predecessor may be gone already: read again at once.
    Raced,
    /// The wait's deadline came.
    Deadline,
}

/// [`tenure_elect::Store::wait`] for etcd.
pub(crate) async fn wait(
    store: &Inner,
    c: &Candidacy,
    timeout: Duration,
) -> Result<Waited, StoreError> {
    let key = store.checked_key(c)?;
    let deadline = Instant::now() + timeout.min(MAX_WAIT);
    // Whether a watch created after a write sends the wait back to read at
    // once: not twice in a row, so a store busy with other keys (every
    // watch created after a write) costs one read more per round, no loop.
    let mut recheck = true;
    loop {
        let (predecessor, ahead, revision) = match place(store, c, &key).await {
            Ok(Place::First) => return Ok(Waited::Leads { token: c.token }),
            Ok(Place::Behind { predecessor, ahead, revision }) => (predecessor, ahead, revision),
            // Every member failed to answer the read in time: the raft
            // leader stopped and the others wait for a new one (a second
            // or two). The wait's own deadline bounds the retries; past
            // it the read's failure is the answer (no place is known).
            Err(e) if e.is_retryable() && Instant::now() < deadline => {
                tracing::debug!(error = %e, "etcd: the wait's read failed; reading again");
                tokio::time::sleep(WATCH_RETRY_PAUSE).await;
                continue;
            }
            Err(e) => return Err(e),
        };
        let woken = watch(store, &predecessor, key.as_bytes(), revision, deadline, recheck).await;
        recheck = !matches!(woken, Ok(Woken::Raced));
        match woken {
            Ok(Woken::ReadAgain | Woken::Raced) => {}
            Ok(Woken::OwnGone) => {
                return Err(StoreError::Gone(format!(
                    "election {}: candidacy {key} was deleted while waiting",
                    c.election
                )))
            }
            Ok(Woken::Deadline) => return Ok(Waited::Ahead { ahead }),
            Err(e) if e.is_retryable() => {
                tracing::debug!(error = %e, "etcd: watch failed; reading again");
                if Instant::now() >= deadline {
                    return Ok(Waited::Ahead { ahead });
                }
                tokio::time::sleep(WATCH_RETRY_PAUSE).await;
            }
            Err(e) => return Err(e),
        }
    }
}

/// One linearizable transaction of two reads at one revision: the keys
/// created before ours, newest first (the first is the predecessor), and
/// our own key. The
/// candidacy is [`StoreError::Gone`] unless our key is there with our
/// token and our lease.
async fn place(store: &Inner, c: &Candidacy, key: &str) -> Result<Place, StoreError> {
    let id = lease_id(c.session)?;
    let before = i64::try_from(c.token - 1)
        .map_err(|_| StoreError::Invalid(format!("token {} out of range", c.token)))?;
    let prefix = store.election_prefix(&c.election);
    let predecessor = RangeRequest {
        key: prefix.as_bytes().to_vec(),
        range_end: prefix_end(prefix.as_bytes()),
        max_create_revision: before,
        sort_order: SortOrder::Descend.into(),
        sort_target: SortTarget::Create.into(),
        limit: MAX_AHEAD_COUNTED as i64,
        keys_only: true,
        ..Default::default()
    };
    let own = RangeRequest { key: key.as_bytes().to_vec(), ..Default::default() };
    let txn = TxnRequest {
        compare: Vec::new(),
        success: [predecessor, own]
            .map(|r| RequestOp { request: Some(Request::RequestRange(r)) })
            .into(),
        failure: Vec::new(),
    };
    let endpoints = &store.endpoints;
    let (i, answer) = endpoints
        .call(Retry::Idempotent, |client| {
            let txn = txn.clone();
            async move { Ok(client.kv().txn(txn).await?.into_inner()) }
        })
        .await?;
    let endpoint = &endpoints.list()[i];
    let revision = header_revision(endpoint, answer.header.as_ref())?;
    let own = txn_get(endpoint, &answer, 1)?;
    match own.kvs.first() {
        Some(kv) if kv.lease == id && kv.create_revision == c.token as i64 => {}
        _ => {
            return Err(StoreError::Gone(format!(
                "election {}: candidacy {key} (token {}) no longer exists at revision {revision}",
                c.election, c.token
            )))
        }
    }
    let before = txn_get(endpoint, &answer, 0)?;
    match before.kvs.first() {
        None => Ok(Place::First),
        Some(kv) => Ok(Place::Behind {
            predecessor: kv.key.clone(),
            ahead: before.kvs.len() as u64,
            revision: revision as i64,
        }),
    }
}

/// Watches the deletions of `predecessor` and of our own `key` after
/// `revision`, on the current endpoint, until one comes or `deadline`;
/// with `recheck`, [`Woken::Raced`] if the store's revision had passed
/// `revision` when the first watch was created.
async fn watch(
    store: &Inner,
    predecessor: &[u8],
    key: &[u8],
    revision: i64,
    deadline: Instant,
    recheck: bool,
) -> Result<Woken, StoreError> {
    let endpoints = &store.endpoints;
    let i = endpoints.current();
    let endpoint = &endpoints.list()[i];
    let fail = |e: StoreError| {
        if e.is_retryable() {
            endpoints.skip(i);
        }
        e
    };
    let mut stream = open(store, i, predecessor, key, revision).await.map_err(fail)?;
    let (quiet, timeout) = (store.probe_after, endpoints.timeout);
    let mut first_created = true;
    loop {
        let answer = match next_message(&mut stream, endpoint, quiet, timeout, deadline).await {
            Ok(Some(answer)) => answer,
            Ok(None) => return Ok(Woken::Deadline),
            Err(e) => return Err(fail(e)),
        };
        if answer.created && !answer.canceled && std::mem::take(&mut first_created) {
            // The header of a creation carries the store's revision then:
            // above the read's, the watch from `revision + 1` is unsynced.
            let at = answer.header.as_ref().map_or(0, |h| h.revision);
            if recheck && at > revision {
                tracing::debug!(%endpoint, read = revision, created = at, "etcd: the store moved before the watch began; reading again");
                return Ok(Woken::Raced);
            }
        }
        if answer.canceled && answer.compact_revision == 0 {
            let message = format!("watch cancelled: {}", answer.cancel_reason);
            return Err(fail(StoreError::Unavailable { endpoint: endpoint.clone(), message }));
        }
        if answer.canceled {
            tracing::debug!(%endpoint, compacted = answer.compact_revision, "etcd: wait's watch compacted; reading again");
            return Ok(Woken::ReadAgain);
        }
        let deleted = |k: &[u8]| {
            answer.events.iter().any(|e| {
                e.r#type() == EventType::Delete && e.kv.as_ref().is_some_and(|kv| kv.key == k)
            })
        };
        if deleted(key) {
            return Ok(Woken::OwnGone);
        }
        if deleted(predecessor) {
            return Ok(Woken::ReadAgain);
        }
    }
}

/// A watch stream on endpoint `i` with three watches for the deletions of
/// `predecessor` and of `key`: both from `revision` (the read's), and the
/// predecessor's again from `revision + 1`.
///
/// From `revision`, not `revision + 1`: etcd compacting at `C` drops the
/// deletions made at `C` yet still accepts a watch from `C` (measured on
/// 3.4: the watch then never tells them). Watching from the read's revision
/// makes a compaction at `revision + 1` cancel the watch (read again)
/// instead. Deletions at `revision` itself cannot concern either key: the
/// read found both.
///
/// But a watch from a revision etcd already has is *unsynced*: it is told
/// of changes only by etcd's catch-up loop, every 100 ms, until that loop
/// has caught it up (`syncWatchersLoop`, read in etcd 3.4; measured in
/// docs/STORES.md §2.2). A successor that queued moments before its
/// predecessor resigned (a rolling restart: the new process queues, the
/// old one leaves) would wait up to 100 ms for the event. A watch from `revision + 1`, when nothing was written since
/// the read, starts *synced*: told at the commit. Either watch's event
/// wakes the wait, which then reads again; what it answers rests on that
/// read, never on an event.
async fn open(
    store: &Inner,
    i: usize,
    predecessor: &[u8],
    key: &[u8],
    revision: i64,
) -> Result<WatchStream, StoreError> {
    let endpoints = &store.endpoints;
    let endpoint = &endpoints.list()[i];
    let deletions = |key: &[u8], from: i64| create(key, false, from, true);
    let client = endpoints.client(i).await?;
    let opened = async {
        let mut stream = WatchStream::open(&client, deletions(predecessor, revision + 1)).await?;
        stream.watch(deletions(predecessor, revision)).await?;
        stream.watch(deletions(key, revision)).await?;
        Ok::<_, crate::error::EtcdError>(stream)
    };
    match tokio::time::timeout(endpoints.timeout, opened).await {
        Ok(Ok(stream)) => Ok(stream),
        Ok(Err(e)) => Err(classify(endpoint, e)),
        Err(_) => Err(timed_out(endpoint, endpoints.timeout)),
    }
}
