//! Lease renewals: one `LeaseKeepAlive` stream per session, kept open
//! between renewals, each renewal one request we send (so we know when it
//! left) and one answer we read. A stream that fails or does not answer in
//! time is dropped and reopened on the next endpoint (a stream to a killed
//! member stalls silently).

use crate::conn::{requests, Endpoints, STREAM_REQUESTS};
use crate::error::{classify, odd, timed_out, EtcdError};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tenure_elect::{Renewal, SessionId, StoreError};
use tenure_etcd_api::etcdserverpb::{LeaseKeepAliveRequest, LeaseKeepAliveResponse};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// The most keepalive streams kept open at once; past it, the one used
/// least recently is closed (and reopened if its session renews again).
pub const MAX_KEEPALIVE_STREAMS: usize = 1024;

/// An open keepalive stream.
struct Stream {
    endpoint: usize,
    /// The request side: one keepalive request of the lease per renewal.
    keeper: mpsc::Sender<LeaseKeepAliveRequest>,
    /// The answer side.
    stream: tonic::Streaming<LeaseKeepAliveResponse>,
}

/// A session's stream (none until the first renewal, or after a failure)
/// and when it was last used.
struct Slot {
    stream: Arc<tokio::sync::Mutex<Option<Stream>>>,
    used: u64,
}

/// The keepalive streams of the sessions this store renews.
#[derive(Default)]
pub(crate) struct KeepAlives {
    slots: Mutex<(u64, HashMap<SessionId, Slot>)>,
}

impl std::fmt::Debug for KeepAlives {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.slots.lock().map(|s| s.1.len()).unwrap_or(0);
        f.debug_struct("KeepAlives").field("streams", &n).finish()
    }
}

impl KeepAlives {
    /// The slot of `session`, made if needed (closing the least recently
    /// used one past [`MAX_KEEPALIVE_STREAMS`]).
    fn slot(&self, session: SessionId) -> Arc<tokio::sync::Mutex<Option<Stream>>> {
        let mut guard = self.slots.lock().expect("keepalive map poisoned");
        let (clock, slots) = &mut *guard;
        *clock += 1;
        if !slots.contains_key(&session) && slots.len() >= MAX_KEEPALIVE_STREAMS {
            if let Some(oldest) = slots.iter().min_by_key(|(_, s)| s.used).map(|(k, _)| *k) {
                slots.remove(&oldest);
            }
        }
        let slot = slots.entry(session).or_insert_with(|| Slot { stream: Arc::default(), used: 0 });
        slot.used = *clock;
        slot.stream.clone()
    }

    /// Closes `session`'s stream (revoked or gone).
    pub(crate) fn forget(&self, session: SessionId) {
        self.slots.lock().expect("keepalive map poisoned").1.remove(&session);
    }

    /// Renews `session` (lease `id`) once, through its stream, opened (or
    /// reopened on the next endpoint) when needed; at most one attempt per
    /// endpoint.
    pub(crate) async fn renew(
        &self,
        endpoints: &Endpoints,
        session: SessionId,
        id: i64,
    ) -> Result<Renewal, StoreError> {
        let slot = self.slot(session);
        let mut guard = slot.lock().await;
        let mut last = None;
        for _ in 0..endpoints.list().len() {
            if guard.is_none() {
                let i = endpoints.current();
                match open(endpoints, i, id).await {
                    Ok(s) => *guard = Some(s),
                    Err(e) => {
                        if !e.is_retryable() {
                            drop(guard);
                            self.forget_if_gone(session, &e);
                            return Err(e);
                        }
                        endpoints.skip(i);
                        last = Some(e);
                        continue;
                    }
                }
            }
            // Out of the slot for the exchange: if this future is dropped
            // after the request left and before its answer was read, the
            // stream goes with it; left in the slot, its late answer would
            // be taken for the next request's, whose send time is later.
            let mut s = guard.take().expect("opened above");
            match once(&mut s, session, id, endpoints).await {
                Ok(r) => {
                    endpoints.answered(s.endpoint);
                    *guard = Some(s);
                    return Ok(r);
                }
                Err(e) => {
                    let i = s.endpoint;
                    if !e.is_retryable() {
                        drop(guard);
                        self.forget_if_gone(session, &e);
                        return Err(e);
                    }
                    tracing::debug!(%session, error = %e, "etcd: keepalive stream failed; reopening");
                    endpoints.skip(i);
                    last = Some(e);
                }
            }
        }
        Err(last.unwrap_or_else(|| StoreError::Config("no etcd endpoint".into())))
    }

    fn forget_if_gone(&self, session: SessionId, e: &StoreError) {
        if matches!(e, StoreError::Gone(_)) {
            self.forget(session);
        }
    }
}

/// Opens a keepalive stream for lease `id` on endpoint `i`: sends a first
/// keepalive and reads its answer (a lease that is gone fails here).
async fn open(endpoints: &Endpoints, i: usize, id: i64) -> Result<Stream, StoreError> {
    let endpoint = &endpoints.list()[i];
    let client = endpoints.client(i).await?;
    let opened = async {
        let (keeper, mut stream) = client
            .run(|c| async move {
                let (keeper, rx) = mpsc::channel(STREAM_REQUESTS);
                keeper.send(LeaseKeepAliveRequest { id }).await.map_err(closed)?;
                let stream = c.lease().lease_keep_alive(requests(rx)).await?.into_inner();
                Ok((keeper, stream))
            })
            .await?;
        match stream.message().await? {
            Some(answer) if answer.ttl > 0 => Ok((keeper, stream)),
            Some(_) => Err(EtcdError::LeaseKeepAliveError("lease not found".into())),
            None => Err(EtcdError::LeaseKeepAliveError(
                "the keepalive stream ended before its first answer".into(),
            )),
        }
    };
    match tokio::time::timeout(endpoints.timeout, opened).await {
        Ok(Ok((keeper, stream))) => Ok(Stream { endpoint: i, keeper, stream }),
        Ok(Err(e)) => Err(classify(endpoint, e)),
        Err(_) => Err(timed_out(endpoint, endpoints.timeout)),
    }
}

/// One renewal on an open stream: the send time is read just before the
/// request is queued; the answer's TTL is the TTL granted, 0 if the lease
/// is gone.
async fn once(
    s: &mut Stream,
    session: SessionId,
    id: i64,
    endpoints: &Endpoints,
) -> Result<Renewal, StoreError> {
    let endpoint = &endpoints.list()[s.endpoint];
    let sent = Instant::now();
    let exchange = async {
        s.keeper.send(LeaseKeepAliveRequest { id }).await.map_err(closed)?;
        Ok::<_, EtcdError>(s.stream.message().await?)
    };
    let answer = match tokio::time::timeout(endpoints.timeout, exchange).await {
        Err(_) => return Err(timed_out(endpoint, endpoints.timeout)),
        Ok(Err(e)) => return Err(classify(endpoint, e)),
        Ok(Ok(None)) => {
            return Err(StoreError::NoAnswer {
                endpoint: endpoint.clone(),
                sent: true,
                source: "the keepalive stream ended".into(),
            })
        }
        Ok(Ok(Some(answer))) => answer,
    };
    if answer.id != id {
        return Err(odd(endpoint, &format!("keepalive of lease {id} answered for {}", answer.id)));
    }
    match u64::try_from(answer.ttl) {
        Ok(ttl) if ttl > 0 => {
            let ttl = Duration::from_secs(ttl);
            tenure_elect::session::check_ttl(ttl)
                .map_err(|e| odd(endpoint, &format!("keepalive of lease {id} granted {e}")))?;
            Ok(Renewal { session, sent, ttl })
        }
        _ => Err(StoreError::Gone(format!("{endpoint}: lease {id:016x} not found (TTL 0)"))),
    }
}

/// The error of a keepalive request that could not be queued: the stream
/// is gone.
fn closed<T>(e: mpsc::error::SendError<T>) -> EtcdError {
    EtcdError::LeaseKeepAliveError(e.to_string())
}
