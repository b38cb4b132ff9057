//! The Lease service: LeaseGrant, LeaseRevoke, LeaseKeepAlive,
//! LeaseTimeToLive and LeaseLeases over tenure's sessions.
//!
//! An etcd lease **is** a tenure session: the same ids, the same store
//! leases, the same keys attached to them. Grant and Revoke are the log
//! commands `POST /v1/sessions` and `DELETE /v1/sessions/{id}` propose
//! (`Command::Grant`, `Command::Revoke`). Renewals and the time left are
//! the leader's lease clock, reached through the node's [`SessionClock`]
//! (tenure-server's sessions service: the same leader ask the HTTP
//! keepalive makes, forwarded over the peer connection from a follower).
//! There is no second lease machinery here.

use crate::auth::{self, Caller, Permission};
use crate::errors::{self, LEASE_NOT_FOUND, NO_LEADER, TOO_MANY_REQUESTS};
use crate::Shared;
use futures_util::stream::{FuturesOrdered, StreamExt};
use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tenure_etcd_api::etcdserverpb::lease_server::Lease;
use tenure_etcd_api::etcdserverpb::{
    LeaseGrantRequest, LeaseGrantResponse, LeaseKeepAliveRequest, LeaseKeepAliveResponse,
    LeaseLeasesRequest, LeaseLeasesResponse, LeaseRevokeRequest, LeaseRevokeResponse, LeaseStatus,
    LeaseTimeToLiveRequest, LeaseTimeToLiveResponse, ResponseHeader,
};
use tenure_kv::{
    Command, LeaseEnd, LeaseId, Response as KvResponse, Store, MAX_TTL_MS, MIN_TTL_MS,
};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

/// etcd's largest lease TTL in seconds (`lease.MaxLeaseTTL`): above it
/// etcd answers "etcdserver: too large lease TTL"; tenure answers the same
/// above its own largest, [`MAX_TTL_SECS`].
pub const ETCD_MAX_TTL_SECS: i64 = 9_000_000_000;

/// The longest TTL granted, in seconds: tenure's session maximum
/// ([`tenure_kv::MAX_TTL_MS`], one day).
pub const MAX_TTL_SECS: i64 = (MAX_TTL_MS / 1000) as i64;

/// The shortest TTL ever granted, in seconds: tenure's session minimum
/// ([`tenure_kv::MIN_TTL_MS`], half a second) rounded up to a whole
/// second. A cluster's own minimum is [`min_ttl_secs`] of its election
/// timeout, never less than this.
pub const MIN_TTL_SECS: i64 = MIN_TTL_MS.div_ceil(1000) as i64;

/// Most LeaseKeepAlive streams open at once on one connection (clientv3
/// opens one per client for all its leases); more are refused with
/// ResourceExhausted "etcdserver: too many requests".
pub const MAX_KEEPALIVE_STREAMS_PER_CONNECTION: usize = 16;

/// Most keepalive requests one stream is answered per second, on
/// average; requests beyond are answered later, in order (never dropped).
/// clientv3 sends one per lease every TTL/3: this covers a client keeping
/// 1,000 leases of 3 s alive.
pub const MAX_KEEPALIVES_PER_SECOND: u32 = 1_000;

/// How long a renewal no leader answered is retried, or waits for an
/// answer, before the stream ends with "etcdserver: no leader", or
/// "etcdserver: request timed out" while this node knows a leader
/// (clientv3 reopens it 500 ms later and asks again); under etcdctl's 3 s
/// first-answer deadline.
pub const RENEW_RETRY_FOR: Duration = Duration::from_secs(2);

/// Pause between two tries of a renewal no leader answered.
const RENEW_RETRY_PAUSE: Duration = Duration::from_millis(100);

/// How long a stream opened with `hasleader: true` stays open while the
/// node knows no leader (etcd: three election timeouts, then
/// "etcdserver: no leader").
pub const NO_LEADER_CUT: Duration = Duration::from_secs(3);

/// Answers queued on a keepalive stream before its reader waits for the
/// client to take them.
const KEEPALIVE_QUEUE: usize = 16;

/// Most renewals of one keepalive stream under way at once, answered in
/// the order they came. clientv3 sends each of its leases' requests
/// without waiting for the answers; taken one at a time, a stream would
/// renew once per round trip to the leader (a few hundred a second through
/// a follower), and its renewals would leave for the leader one by one
/// instead of together.
pub const MAX_KEEPALIVES_IN_FLIGHT: usize = 64;

/// The leader's lease clock, which only tenure's sessions service knows.
/// The node implements it with the sessions service's leader asks (the
/// same as `POST /v1/sessions/{id}/keepalive`).
pub trait SessionClock: Send + Sync + 'static {
    /// Renews `lease` on the leader: a full TTL from its answer.
    fn renew(&self, lease: LeaseId) -> ClockFuture<'_>;
    /// How long `lease` has left on the leader's clock.
    fn remaining(&self, lease: LeaseId) -> ClockFuture<'_>;
}

/// What a [`SessionClock`] call returns.
pub type ClockFuture<'a> = Pin<Box<dyn Future<Output = ClockAnswer> + Send + 'a>>;

/// The leader's answer about a lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClockAnswer {
    /// Renewed: it lives `ttl_ms` (its granted TTL) from the leader's answer.
    Renewed {
        /// The lease's TTL.
        ttl_ms: u64,
    },
    /// Its time left on the leader's clock.
    Remaining {
        /// Milliseconds until its expiry is proposed, if not renewed.
        remaining_ms: u64,
        /// The lease's TTL.
        ttl_ms: u64,
    },
    /// The lease does not exist (never granted, revoked or expired).
    NotFound,
    /// Its expiry was proposed: it will not be renewed.
    Expiring,
    /// No leader answered now (none, changing, busy): worth asking again.
    Unavailable(String),
}

/// A TTL in milliseconds as etcd's whole seconds: rounded down (a client
/// renewing at a third of it then renews early, never late), at least 1
/// (0 would tell the client the lease is gone).
pub(crate) fn ttl_secs(ttl_ms: u64) -> i64 {
    (ttl_ms / 1000).max(1) as i64
}

/// The Lease service.
pub(crate) struct LeaseService {
    shared: Arc<Shared>,
    streams: StreamCounts,
}

impl LeaseService {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        LeaseService { shared, streams: StreamCounts::default() }
    }
}

/// Keepalive streams open per connection (its peer address).
#[derive(Clone, Default)]
struct StreamCounts(Arc<Mutex<HashMap<SocketAddr, usize>>>);

impl StreamCounts {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<SocketAddr, usize>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A slot for one more keepalive stream of the connection at `peer`,
    /// or ResourceExhausted when it has
    /// [`MAX_KEEPALIVE_STREAMS_PER_CONNECTION`] open. (A connection whose
    /// address tonic does not know is not counted: every TCP one is known.)
    fn slot(&self, peer: Option<SocketAddr>) -> Result<StreamSlot, Status> {
        let Some(peer) = peer else {
            return Ok(StreamSlot(None));
        };
        let mut streams = self.lock();
        let open = streams.entry(peer).or_default();
        if *open >= MAX_KEEPALIVE_STREAMS_PER_CONNECTION {
            return Err(Status::resource_exhausted(TOO_MANY_REQUESTS));
        }
        *open += 1;
        Ok(StreamSlot(Some((self.clone(), peer))))
    }
}

/// One keepalive stream counted against its connection until dropped.
struct StreamSlot(Option<(StreamCounts, SocketAddr)>);

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let Some((counts, peer)) = &self.0 else { return };
        let mut streams = counts.lock();
        if let Some(open) = streams.get_mut(peer) {
            *open -= 1;
            if *open == 0 {
                streams.remove(peer);
            }
        }
    }
}

/// etcd's lease id as tenure's: positive, else NotFound.
fn lease_id(id: i64) -> Result<LeaseId, Status> {
    if id <= 0 {
        return Err(Status::not_found(LEASE_NOT_FOUND));
    }
    Ok(LeaseId(id as u64))
}

/// The shortest TTL a grant gets on a cluster of this election timeout,
/// in seconds: etcd's rule, `ceil(1.5 × election timeout)` (2 s at the
/// default 1 s), and never under [`MIN_TTL_SECS`]. A lease shorter than a
/// failover (an election timeout and a round or two) would end at every
/// leader change: clientv3 gives a lease up when no renewal was answered
/// within its TTL.
pub fn min_ttl_secs(election_timeout: Duration) -> i64 {
    let secs = (election_timeout.as_millis() * 3).div_ceil(2).div_ceil(1000);
    i64::try_from(secs).unwrap_or(i64::MAX).clamp(MIN_TTL_SECS, MAX_TTL_SECS)
}

/// The TTL a grant of `ttl` seconds gets, in milliseconds: raised to
/// `min_secs` ([`min_ttl_secs`]), refused above [`MAX_TTL_SECS`] with
/// etcd's text.
pub(crate) fn granted_ttl_ms(ttl: i64, min_secs: i64) -> Result<u64, Status> {
    if ttl > MAX_TTL_SECS {
        return Err(Status::out_of_range(errors::LEASE_TTL_TOO_LARGE));
    }
    Ok(ttl.max(min_secs) as u64 * 1000)
}

/// A token bucket pacing one stream's requests.
struct Pace {
    tokens: f64,
    at: Instant,
}

impl Pace {
    fn new() -> Self {
        Pace { tokens: f64::from(MAX_KEEPALIVES_PER_SECOND), at: Instant::now() }
    }

    /// Waits until one more request may be answered.
    async fn take(&mut self) {
        let rate = f64::from(MAX_KEEPALIVES_PER_SECOND);
        let now = Instant::now();
        self.tokens = (self.tokens + now.duration_since(self.at).as_secs_f64() * rate).min(rate);
        self.at = now;
        if self.tokens < 1.0 {
            let wait = Duration::from_secs_f64((1.0 - self.tokens) / rate);
            tokio::time::sleep(wait).await;
            self.tokens = 1.0;
            self.at = Instant::now();
        }
        self.tokens -= 1.0;
    }
}

impl Shared {
    /// Renews `lease`, retrying while no leader answers, for at most
    /// [`RENEW_RETRY_FOR`] in all: the TTL to answer (the granted TTL; 0
    /// for a lease that is gone), or [`Shared::unanswered`]'s error.
    async fn renew(&self, lease: LeaseId) -> Result<i64, Status> {
        let until = Instant::now() + RENEW_RETRY_FOR;
        loop {
            // One try may wait far longer (a leader this node still knows
            // that does not answer: a forwarded question's own bound is
            // seconds): the stream ends on time instead, its renewal dropped.
            let Ok(answer) = tokio::time::timeout_at(until, self.ctx.sessions.renew(lease)).await
            else {
                tracing::debug!(lease = lease.0, "etcd keepalive: no answer in time");
                return Err(self.unanswered());
            };
            match answer {
                ClockAnswer::Renewed { ttl_ms } | ClockAnswer::Remaining { ttl_ms, .. } => {
                    return Ok(ttl_secs(ttl_ms))
                }
                ClockAnswer::NotFound | ClockAnswer::Expiring => return Ok(0),
                ClockAnswer::Unavailable(why) => {
                    if Instant::now() + RENEW_RETRY_PAUSE >= until {
                        tracing::debug!(lease = lease.0, why, "etcd keepalive: no leader answered");
                        return Err(self.unanswered());
                    }
                    tokio::time::sleep(RENEW_RETRY_PAUSE).await;
                }
            }
        }
    }

    /// The error for a question the leader's clock did not answer: "no
    /// leader" only while this node knows none. clientv3 takes "no leader"
    /// on a keepalive stream as the end of every keepalive of a context
    /// that requires a leader, so a busy or slow leader answers etcd's
    /// "request timed out" (also Unavailable: asked again).
    fn unanswered(&self) -> Status {
        if self.ctx.node.leadership().borrow().leader.is_none() {
            Status::unavailable(NO_LEADER)
        } else {
            Status::unavailable(errors::TIMEOUT)
        }
    }

    /// The store's revision on this node, for a header.
    fn applied_revision(&self) -> u64 {
        self.ctx.kv.read_stale(|s| s.revision()).0
    }

    /// Whether `caller` may renew or revoke `lease` (its owner's token or an
    /// administrator: [`Caller::may_use`]); `Ok(None)` when the lease does
    /// not exist. An owner never changes and ids are never reused, so an
    /// owner read once holds; a lease this node has not applied yet is
    /// looked up again after a linearizable read.
    async fn may_use(&self, caller: &Caller, lease: LeaseId) -> Result<Option<bool>, Status> {
        if caller.permission == Permission::Admin {
            return Ok(Some(true));
        }
        let owner = |s: &Store| s.lease(lease).map(|l| l.owner.clone());
        let found = match self.ctx.kv.read_stale(owner).0 {
            Some(found) => Some(found),
            None => self.read(false, owner).await?,
        };
        Ok(found.map(|owner| caller.may_use(owner.as_deref())))
    }

    /// PermissionDenied unless `caller` may attach keys to `lease` (a put,
    /// a campaign, a proclaim or a lock with it): the lease's owner or an
    /// administrator. A lease that does not exist yet is refused with
    /// etcd's "requested lease not found" (for an administrator, the write
    /// answers that): ids count up, and a check that let it pass could be
    /// followed by its grant to another token before the write applies.
    pub(crate) async fn check_attach(&self, caller: &Caller, lease: LeaseId) -> Result<(), Status> {
        match self.may_use(caller, lease).await? {
            Some(true) => Ok(()),
            Some(false) => Err(Status::permission_denied(auth::PERMISSION_DENIED)),
            None => Err(Status::not_found(errors::LEASE_NOT_FOUND)),
        }
    }
}

#[tonic::async_trait]
impl Lease for LeaseService {
    type LeaseKeepAliveStream = ReceiverStream<Result<LeaseKeepAliveResponse, Status>>;

    async fn lease_grant(
        &self,
        request: Request<LeaseGrantRequest>,
    ) -> Result<Response<LeaseGrantResponse>, Status> {
        self.shared.check_leader(&request)?;
        let owner = Caller::of(&request).grant_owner();
        let r = request.into_inner();
        let ttl_ms = granted_ttl_ms(r.ttl, min_ttl_secs(self.shared.ctx.node.election_timeout()))?;
        if r.id != 0 {
            // tenure's lease ids come from the store's counter (never
            // reused, which the leader's clock relies on): a client's own
            // id cannot be granted.
            if r.id > 0 {
                let id = LeaseId(r.id as u64);
                if self.shared.read(false, |s| s.lease(id).is_some()).await? {
                    return Err(Status::failed_precondition(errors::LEASE_EXISTS));
                }
            }
            return Err(errors::invalid(errors::LEASE_ID_CHOSEN));
        }
        match self.shared.propose(&Command::Grant { ttl_ms, owner }).await? {
            KvResponse::Granted { lease, ttl_ms, revision } => {
                Ok(Response::new(LeaseGrantResponse {
                    header: Some(self.shared.header(revision)),
                    id: lease.0 as i64,
                    ttl: ttl_secs(ttl_ms),
                    error: String::new(),
                }))
            }
            other => Err(unexpected(&other)),
        }
    }

    async fn lease_revoke(
        &self,
        request: Request<LeaseRevokeRequest>,
    ) -> Result<Response<LeaseRevokeResponse>, Status> {
        self.shared.check_leader(&request)?;
        let caller = Caller::of(&request);
        let lease = lease_id(request.into_inner().id)?;
        match self.shared.may_use(&caller, lease).await? {
            Some(true) => {}
            Some(false) => return Err(Status::permission_denied(auth::PERMISSION_DENIED)),
            None => return Err(Status::not_found(errors::LEASE_NOT_FOUND)),
        }
        match self.shared.propose(&Command::Revoke { lease }).await? {
            KvResponse::LeaseEnded { reason: LeaseEnd::Revoked, revision, .. } => {
                Ok(Response::new(LeaseRevokeResponse {
                    header: Some(self.shared.header(revision)),
                }))
            }
            other => Err(unexpected(&other)),
        }
    }

    async fn lease_keep_alive(
        &self,
        request: Request<Streaming<LeaseKeepAliveRequest>>,
    ) -> Result<Response<Self::LeaseKeepAliveStream>, Status> {
        self.shared.check_leader(&request)?;
        let wants_leader = request.metadata().get("hasleader").is_some_and(|v| v == "true");
        let caller = Caller::of(&request);
        let slot = self.streams.slot(request.remote_addr())?;
        let mut requests = request.into_inner();
        let (tx, rx) = mpsc::channel(KEEPALIVE_QUEUE);
        let shared = self.shared.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let mut pace = Pace::new();
            let mut in_flight = FuturesOrdered::new();
            // False once the client half-closed: the renewals under way are
            // still answered, then the stream ends.
            let mut reading = true;
            let mut leadership = shared.ctx.node.leadership();
            let mut stopping = shared.stopping.clone();
            let mut leaderless_since =
                leadership.borrow_and_update().leader.is_none().then(Instant::now);
            loop {
                if !reading && in_flight.is_empty() {
                    return;
                }
                // etcd's monitorLeader: a stream that asked for a leader
                // ends once the node has known none for NO_LEADER_CUT.
                let cut = async {
                    match leaderless_since {
                        Some(since) if wants_leader => {
                            tokio::time::sleep_until(since + NO_LEADER_CUT).await
                        }
                        _ => std::future::pending().await,
                    }
                };
                let next = tokio::select! {
                    Some(answer) = in_flight.next() => {
                        let answer: Result<LeaseKeepAliveResponse, Status> = answer;
                        let failed = answer.is_err();
                        if tx.send(answer).await.is_err() || failed {
                            return;
                        }
                        continue;
                    }
                    next = requests.message(), if reading && in_flight.len() < MAX_KEEPALIVES_IN_FLIGHT => next,
                    changed = leadership.changed() => {
                        if changed.is_err() {
                            return;
                        }
                        let leaderless = leadership.borrow_and_update().leader.is_none();
                        leaderless_since = match (leaderless, leaderless_since) {
                            (false, _) => None,
                            (true, Some(since)) => Some(since),
                            (true, None) => Some(Instant::now()),
                        };
                        continue;
                    }
                    () = cut => {
                        let _ = tx.send(Err(Status::unavailable(NO_LEADER))).await;
                        return;
                    }
                    () = tx.closed() => return,
                    () = stopped(&mut stopping) => {
                        let _ = tx.send(Err(Status::unavailable(errors::SERVER_STOPPED))).await;
                        return;
                    }
                };
                // The client half-closed (Ok(None)) or the stream broke:
                // done once the renewals under way are answered, as etcd
                // returns on io.EOF.
                let Ok(Some(r)) = next else {
                    reading = false;
                    continue;
                };
                pace.take().await;
                // etcd takes the header before the renewal.
                let header = shared.header(shared.applied_revision());
                in_flight.push_back(keepalive(shared.clone(), caller.clone(), header, r.id));
            }
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn lease_time_to_live(
        &self,
        request: Request<LeaseTimeToLiveRequest>,
    ) -> Result<Response<LeaseTimeToLiveResponse>, Status> {
        self.shared.check_leader(&request)?;
        let r = request.into_inner();
        let gone = |revision| LeaseTimeToLiveResponse {
            header: Some(self.shared.header(revision)),
            id: r.id,
            ttl: -1,
            granted_ttl: 0,
            keys: Vec::new(),
        };
        let Ok(lease) = lease_id(r.id) else {
            return Ok(Response::new(gone(self.shared.applied_revision())));
        };
        let found = self
            .shared
            .read(false, |s| {
                let found = s.lease(lease).map(|l| {
                    let keys: Vec<Vec<u8>> = if r.keys {
                        l.keys.iter().map(|k| k.as_bytes().to_vec()).collect()
                    } else {
                        Vec::new()
                    };
                    (l.ttl_ms, keys)
                });
                (found, s.revision())
            })
            .await?;
        let (Some((ttl_ms, keys)), revision) = found else {
            return Ok(Response::new(gone(found.1)));
        };
        // Only the leader's clock knows the time left; etcd truncates it
        // to whole seconds.
        let ttl = match self.shared.ctx.sessions.remaining(lease).await {
            ClockAnswer::Remaining { remaining_ms, .. } => (remaining_ms / 1000) as i64,
            ClockAnswer::Renewed { .. } | ClockAnswer::Expiring => 0,
            ClockAnswer::NotFound => return Ok(Response::new(gone(revision))),
            ClockAnswer::Unavailable(_) => return Err(self.shared.unanswered()),
        };
        Ok(Response::new(LeaseTimeToLiveResponse {
            header: Some(self.shared.header(revision)),
            id: r.id,
            ttl,
            granted_ttl: ttl_secs(ttl_ms),
            keys,
        }))
    }

    async fn lease_leases(
        &self,
        request: Request<LeaseLeasesRequest>,
    ) -> Result<Response<LeaseLeasesResponse>, Status> {
        self.shared.check_leader(&request)?;
        // This node's applied leases, without a read index, as etcd reads
        // its local lessor: answered without a leader too (`etcdctl lease
        // list` retries an Unavailable answer for ever).
        let (leases, revision) = self
            .shared
            .read(true, |s| {
                let leases: Vec<LeaseStatus> =
                    s.leases().map(|l| LeaseStatus { id: l.id.0 as i64 }).collect();
                (leases, s.revision())
            })
            .await?;
        Ok(Response::new(LeaseLeasesResponse {
            header: Some(self.shared.header(revision)),
            leases,
        }))
    }
}

/// The answer to one keepalive request for lease `id`, with `header`.
async fn keepalive(
    shared: Arc<Shared>,
    caller: Caller,
    header: ResponseHeader,
    id: i64,
) -> Result<LeaseKeepAliveResponse, Status> {
    let ttl = match lease_id(id) {
        Err(_) => 0,
        Ok(lease) => match shared.may_use(&caller, lease).await? {
            Some(true) => shared.renew(lease).await?,
            // etcd's answer to a lease it does not have, also for another
            // token's, which is not renewed: the stream goes on for the
            // caller's own leases (clientv3 renews all of them on one
            // stream).
            None | Some(false) => 0,
        },
    };
    Ok(LeaseKeepAliveResponse { header: Some(header), id, ttl })
}

/// Returns once the server stops (at once if it has).
async fn stopped(stopping: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = stopping.wait_for(|s| *s).await;
}

/// An answer of the store that does not fit the command (a node of
/// another build).
fn unexpected(r: &KvResponse) -> Status {
    Status::internal(format!("tenure: the store answered {r:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Code;

    #[test]
    fn ttls_are_raised_to_the_minimum_and_refused_above_the_maximum() {
        assert_eq!(MIN_TTL_SECS, 1);
        // etcd's rule: 1.5 election timeouts, in whole seconds up.
        let ms = Duration::from_millis;
        assert_eq!(min_ttl_secs(ms(1000)), 2);
        assert_eq!(min_ttl_secs(ms(500)), 1);
        assert_eq!(min_ttl_secs(ms(100)), 1, "never under tenure's own minimum");
        assert_eq!(min_ttl_secs(ms(3000)), 5);
        assert_eq!(min_ttl_secs(Duration::MAX), MAX_TTL_SECS);
        let min = min_ttl_secs(ms(1000));
        assert_eq!(granted_ttl_ms(-5, min).unwrap(), 2000);
        assert_eq!(granted_ttl_ms(0, min).unwrap(), 2000);
        assert_eq!(granted_ttl_ms(1, min).unwrap(), 2000);
        assert_eq!(granted_ttl_ms(10, min).unwrap(), 10_000);
        assert_eq!(granted_ttl_ms(86_400, min).unwrap(), MAX_TTL_MS);
        for big in [86_401, ETCD_MAX_TTL_SECS + 1, i64::MAX] {
            let e = granted_ttl_ms(big, min).unwrap_err();
            assert_eq!((e.code(), e.message()), (Code::OutOfRange, errors::LEASE_TTL_TOO_LARGE));
        }
    }

    #[test]
    fn ttls_in_seconds_round_down_but_never_to_zero() {
        assert_eq!(ttl_secs(10_000), 10);
        assert_eq!(ttl_secs(1_500), 1);
        assert_eq!(ttl_secs(500), 1);
    }

    #[test]
    fn keepalive_streams_are_bounded_per_connection() {
        let counts = StreamCounts::default();
        let (a, b) = ("127.0.0.1:1".parse().unwrap(), "127.0.0.1:2".parse().unwrap());
        let mut slots: Vec<StreamSlot> = (0..MAX_KEEPALIVE_STREAMS_PER_CONNECTION)
            .map(|_| counts.slot(Some(a)).unwrap())
            .collect();
        let refused = counts.slot(Some(a)).err().unwrap();
        assert_eq!(
            (refused.code(), refused.message()),
            (Code::ResourceExhausted, TOO_MANY_REQUESTS)
        );
        let other = counts.slot(Some(b)).unwrap();
        slots.pop();
        slots.push(counts.slot(Some(a)).unwrap());
        drop((slots, other));
        assert!(counts.lock().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_is_paced_to_its_rate_after_a_burst() {
        let mut pace = Pace::new();
        let start = Instant::now();
        for _ in 0..MAX_KEEPALIVES_PER_SECOND {
            pace.take().await;
        }
        assert_eq!(start.elapsed(), Duration::ZERO, "a second's worth passes at once");
        for _ in 0..MAX_KEEPALIVES_PER_SECOND {
            pace.take().await;
        }
        let took = start.elapsed();
        assert!(
            took >= Duration::from_millis(990) && took <= Duration::from_millis(1010),
            "{took:?}"
        );
    }

    #[test]
    fn ids_are_positive() {
        assert_eq!(lease_id(7).unwrap(), LeaseId(7));
        for bad in [0, -1, i64::MIN] {
            assert_eq!(lease_id(bad).unwrap_err().message(), LEASE_NOT_FOUND);
        }
    }
}
