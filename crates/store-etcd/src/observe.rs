//! Observing an election: the keys under its prefix at one revision `R`
//! (the first observation: the state as of `R`), then a watch on the prefix
//! from `R` (its replayed events of `R` skipped), the leader (the
//! first-created key) recomputed after each revision's events and reported
//! when it changed. A watch that fails is resumed on the next endpoint from
//! the last revision applied, so no change is missed or told twice; one the
//! cluster can no longer resume (compacted) is reported as
//! [`Observed::Missed`], then the state.

use crate::error::{classify, timed_out};
use crate::inner::{header_revision, prefix_by_creation, Inner};
use crate::watch::{create, next_message, WatchStream};
use futures_util::stream::BoxStream;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;
use tenure_elect::election::{OBSERVE_BACKOFF_MAX, OBSERVE_BACKOFF_MIN};
use tenure_elect::{Observed, Retry, StoreError};
use tenure_etcd_api::etcdserverpb::{RangeRequest, WatchResponse};
use tenure_etcd_api::mvccpb::event::EventType;
use tenure_etcd_api::mvccpb::KeyValue;
use tokio::time::Instant;

/// The most keys an observed election may hold (the observer keeps them
/// all, to tell the next leader when the current one leaves).
pub const MAX_OBSERVED_KEYS: usize = 65_536;
/// How long one receive waits at most before the observer loop turns
/// (a bound on each step; a quiet stream simply waits again).
const RECEIVE_ROUND: Duration = Duration::from_secs(60);

/// A key of the election: its place, owner and value.
struct Entry {
    create_revision: i64,
    lease: i64,
    value: String,
}

/// The leader's (session, value, token), if any.
type State = Option<(u64, String, u64)>;

struct Observer {
    inner: Arc<Inner>,
    prefix: String,
    /// The election's keys as of `next - 1`; none until read (again).
    keys: Option<HashMap<Vec<u8>, Entry>>,
    /// The revision the watch resumes from.
    next: i64,
    /// The watch stream and its endpoint.
    watch: Option<(usize, WatchStream)>,
    pending: VecDeque<Observed>,
    /// The last state reported.
    last: Option<State>,
    /// The watch was cancelled because changes up to this revision are gone.
    missed: Option<i64>,
    backoff: Duration,
}

/// The stream of [`tenure_elect::Store::observe`] for `election`.
pub(crate) fn observe(
    inner: Arc<Inner>,
    election: &str,
) -> BoxStream<'static, Result<Observed, StoreError>> {
    let observer = Observer {
        prefix: inner.election_prefix(election),
        inner,
        keys: None,
        next: 0,
        watch: None,
        pending: VecDeque::new(),
        last: None,
        missed: None,
        backoff: OBSERVE_BACKOFF_MIN,
    };
    Box::pin(futures_util::stream::unfold(observer, |mut o| async move {
        let next = o.next().await;
        Some((next, o))
    }))
}

impl Observer {
    /// The next observation. Errors only when trying again cannot help
    /// (the next call tries again anyway, after a pause).
    async fn next(&mut self) -> Result<Observed, StoreError> {
        loop {
            if let Some(o) = self.pending.pop_front() {
                return Ok(o);
            }
            let step = if self.keys.is_none() {
                self.read_all().await
            } else if self.watch.is_none() {
                self.open().await
            } else {
                self.receive().await
            };
            if let Err(e) = step {
                self.watch = None;
                tokio::time::sleep(self.backoff).await;
                self.backoff = (self.backoff * 2).min(OBSERVE_BACKOFF_MAX);
                if !e.is_retryable() {
                    return Err(e);
                }
                tracing::debug!(error = %e, "etcd observe: trying again");
            }
        }
    }

    /// Reads every key of the election at one revision, and reports the
    /// state (after [`Observed::Missed`] if the watch was compacted away).
    async fn read_all(&mut self) -> Result<(), StoreError> {
        let endpoints = &self.inner.endpoints;
        let read = RangeRequest {
            limit: MAX_OBSERVED_KEYS as i64 + 1,
            ..prefix_by_creation(&self.prefix)
        };
        let (i, answer) = endpoints
            .call(Retry::Idempotent, |c| {
                let read = read.clone();
                async move { Ok(c.kv().range(read).await?.into_inner()) }
            })
            .await?;
        let revision = header_revision(&endpoints.list()[i], answer.header.as_ref())?;
        if answer.kvs.len() > MAX_OBSERVED_KEYS {
            return Err(too_many(&self.prefix));
        }
        let keys: HashMap<_, _> = answer.kvs.iter().map(|kv| (kv.key.clone(), entry(kv))).collect();
        let state = leader(&keys);
        if let Some(compacted) = self.missed.take() {
            let compacted = u64::try_from(compacted).unwrap_or(0);
            self.pending.push_back(Observed::Missed { compacted, current: revision });
            self.last = None;
        }
        self.report(state, revision);
        self.keys = Some(keys);
        self.next = revision as i64 + 1;
        Ok(())
    }

    /// Opens a watch on the election's prefix from `next`, on the current endpoint.
    async fn open(&mut self) -> Result<(), StoreError> {
        let endpoints = &self.inner.endpoints;
        let i = endpoints.current();
        let endpoint = &endpoints.list()[i];
        // From the last revision applied, not the next one: etcd compacting
        // at `C` drops the deletions made at `C` yet accepts a watch from
        // `C` (measured on 3.4), so a watch from `next` could miss them
        // silently; from `next - 1` it is cancelled as compacted instead.
        // The replayed events of `next - 1` are skipped in `apply`.
        let start = (self.next - 1).max(1);
        let watch = create(self.prefix.as_bytes(), true, start, false);
        let client = endpoints.client(i).await?;
        let opened = tokio::time::timeout(endpoints.timeout, WatchStream::open(&client, watch));
        let e = match opened.await {
            Ok(Ok(stream)) => {
                self.watch = Some((i, stream));
                return Ok(());
            }
            Ok(Err(e)) => classify(endpoint, e),
            Err(_) => timed_out(endpoint, endpoints.timeout),
        };
        endpoints.skip(i);
        Err(e)
    }

    /// Receives the watch's next message and applies it (see
    /// [`next_message`] for a stream that went quiet).
    async fn receive(&mut self) -> Result<(), StoreError> {
        let inner = self.inner.clone();
        let endpoints = &inner.endpoints;
        let (i, stream) = self.watch.as_mut().expect("receive is called with a watch");
        let (i, endpoint) = (*i, &endpoints.list()[*i]);
        let (quiet, timeout) = (inner.probe_after, endpoints.timeout);
        let until = Instant::now() + RECEIVE_ROUND;
        match next_message(stream, endpoint, quiet, timeout, until).await {
            Ok(Some(answer)) => {
                self.backoff = OBSERVE_BACKOFF_MIN;
                self.apply(i, answer).inspect_err(|e| {
                    if e.is_retryable() {
                        endpoints.skip(i);
                    }
                })
            }
            Ok(None) => Ok(()),
            Err(e) => {
                endpoints.skip(i);
                Err(e)
            }
        }
    }

    /// Applies one watch answer (from endpoint `i`): the leader after each
    /// revision's events is reported if it changed; a watch cancelled for
    /// another reason than compaction is an error of that endpoint.
    fn apply(&mut self, i: usize, answer: WatchResponse) -> Result<(), StoreError> {
        if answer.canceled {
            self.watch = None;
            if answer.compact_revision == 0 {
                return Err(StoreError::Unavailable {
                    endpoint: self.inner.endpoints.list()[i].clone(),
                    message: format!("watch cancelled: {}", answer.cancel_reason),
                });
            }
            self.missed = Some(answer.compact_revision);
            self.keys = None;
            return Ok(());
        }
        // A progress report is not taken as "every change up to its
        // revision was sent" (not so in etcd 3.4, etcd-io/etcd#15220): the
        // watch resumes after the last event only.
        let keys = self.keys.as_mut().expect("a watch runs after a read");
        let mut states = Vec::new();
        let mut revision = None;
        for event in &answer.events {
            let Some(kv) = event.kv.as_ref().filter(|kv| kv.mod_revision >= self.next) else {
                continue;
            };
            if let Some(r) = revision.filter(|r| *r != kv.mod_revision) {
                states.push((leader(keys), r));
            }
            match event.r#type() {
                EventType::Put => keys.insert(kv.key.clone(), entry(kv)),
                EventType::Delete => keys.remove(&kv.key),
            };
            revision = Some(kv.mod_revision);
        }
        if let Some(r) = revision {
            states.push((leader(keys), r));
            self.next = r + 1;
        }
        let overflow = keys.len() > MAX_OBSERVED_KEYS;
        for (state, r) in states {
            self.report(state, u64::try_from(r).unwrap_or(0));
        }
        if overflow {
            self.keys = None;
            return Err(too_many(&self.prefix));
        }
        Ok(())
    }

    /// Queues `state` as of `revision` if it differs from the last reported.
    fn report(&mut self, state: State, revision: u64) {
        if self.last.as_ref() == Some(&state) {
            return;
        }
        self.pending.push_back(match &state {
            Some((session, value, token)) => Observed::Leader {
                session: *session,
                value: value.clone(),
                token: *token,
                revision,
            },
            None => Observed::NoLeader { revision },
        });
        self.last = Some(state);
    }
}

fn entry(kv: &KeyValue) -> Entry {
    Entry {
        create_revision: kv.create_revision,
        lease: kv.lease,
        value: String::from_utf8_lossy(&kv.value).into_owned(),
    }
}

/// The first-created key's owner, value and token.
fn leader(keys: &HashMap<Vec<u8>, Entry>) -> State {
    keys.values().min_by_key(|e| e.create_revision).map(|e| {
        (
            u64::try_from(e.lease).unwrap_or(0),
            e.value.clone(),
            u64::try_from(e.create_revision).unwrap_or(0),
        )
    })
}

fn too_many(prefix: &str) -> StoreError {
    StoreError::Refused(format!(
        "election {prefix}: more than {MAX_OBSERVED_KEYS} keys, more than an observer follows"
    ))
}
