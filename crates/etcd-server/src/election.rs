//! etcd's Election service (Campaign, Proclaim, Leader, Observe, Resign),
//! with etcd 3.4's semantics: what etcd's `v3election` server does with
//! clientv3's `Election` recipe, here over the same KV paths as the KV
//! service (transactions through the log, reads through the read index).
//!
//! A candidate is the key `name/<lease in hex>` attached to its lease
//! ([`crate::queue`]); the leader is the key of the election with the
//! lowest create revision, and that revision is its fencing token
//! (`LeaderKey.rev`). Campaign answers once the candidate leads, Proclaim
//! and Resign act on a `LeaderKey` only while its key is the one created
//! at its `rev`, Leader reads the first key, and Observe streams the
//! leader's key at every change. What differs from etcd: docs/ETCD.md.

use crate::auth::Caller;
use crate::errors::SERVER_STOPPED;
use crate::queue::{self, as_etcd, Withdrawal};
use crate::range::{prefix_end, range};
use crate::watch::{self, Watcher};
use crate::Shared;
use std::sync::Arc;
use tenure_etcd_api::etcdserverpb::range_request::{SortOrder, SortTarget};
use tenure_etcd_api::etcdserverpb::RangeRequest;
use tenure_etcd_api::mvccpb::{self, event::EventType};
use tenure_etcd_api::v3electionpb::election_server::Election;
use tenure_etcd_api::v3electionpb::{
    CampaignRequest, CampaignResponse, LeaderKey, LeaderRequest, LeaderResponse, ProclaimRequest,
    ProclaimResponse, ResignRequest, ResignResponse,
};
use tenure_kv::Store;
use tokio::sync::{mpsc, OwnedSemaphorePermit};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

/// clientv3's `ErrElectionNotLeader`: a `LeaderKey` whose key is gone.
pub const NOT_LEADER: &str = "election: not leader";
/// clientv3's `ErrElectionNoLeader`: Leader of an election without a candidate.
pub const NO_LEADER: &str = "election: no leader";
/// etcd's `ErrMissingLeaderKey`: Proclaim or Resign without a `leader`.
pub const MISSING_LEADER_KEY: &str = "\"leader\" field must be provided";

/// Answers queued on an Observe stream before it waits for its client.
pub const OBSERVE_QUEUE: usize = 16;

/// The Election service.
pub(crate) struct ElectionService(pub(crate) Arc<Shared>);

/// The first key of the election `name` by create revision (clientv3's
/// `WithFirstCreate`), as a Range with etcd's rules.
fn first_created(store: &Store, name: &[u8]) -> Result<Option<mvccpb::KeyValue>, Status> {
    let prefix = queue::line(name);
    let r = RangeRequest {
        range_end: prefix_end(&prefix),
        key: prefix,
        limit: 1,
        sort_order: SortOrder::Ascend as i32,
        sort_target: SortTarget::Create as i32,
        ..Default::default()
    };
    Ok(range(store, &r)?.kvs.into_iter().next())
}

#[tonic::async_trait]
impl Election for ElectionService {
    type ObserveStream = ReceiverStream<Result<LeaderResponse, Status>>;

    async fn campaign(
        &self,
        request: Request<CampaignRequest>,
    ) -> Result<Response<CampaignResponse>, Status> {
        self.0.check_leader(&request)?;
        let caller = Caller::of(&request);
        let _slot = self.0.waiting.take()?;
        let r = request.into_inner();
        let lease = queue::candidate_lease(r.lease)?;
        self.0.check_attach(&caller, tenure_kv::LeaseId(lease as u64)).await.map_err(as_etcd)?;
        let key = queue::candidate_key(&r.name, lease);
        let place = queue::join(&self.0, &key, lease, &r.value).await?;
        // Withdrawn unless it wins: a failure, or a client gone.
        let withdrawal = Withdrawal::new(self.0.clone(), key.clone(), place.rev);
        // The same lease campaigned before: its key stays, with this value.
        if place.standing.as_ref().is_some_and(|v| *v != r.value) {
            let put = queue::put(&key, &r.value, lease);
            let (proclaimed, _) = queue::if_created_at(&self.0, &key, place.rev, put).await?;
            if !proclaimed {
                return Err(Status::unknown(NOT_LEADER));
            }
        }
        let prefix = queue::line(&r.name);
        queue::wait_turn(&self.0, &prefix, &key, place.rev, lease, NOT_LEADER).await?;
        withdrawal.disarm();
        Ok(Response::new(CampaignResponse {
            // etcd answers the header of the campaign's transaction.
            header: Some(place.header),
            leader: Some(LeaderKey { name: r.name, key, rev: place.rev, lease }),
        }))
    }

    async fn proclaim(
        &self,
        request: Request<ProclaimRequest>,
    ) -> Result<Response<ProclaimResponse>, Status> {
        self.0.check_leader(&request)?;
        let caller = Caller::of(&request);
        let r = request.into_inner();
        let leader = r.leader.ok_or_else(|| Status::unknown(MISSING_LEADER_KEY))?;
        // The put attaches the key to the leader key's lease: the caller's
        // to use, as for a campaign.
        if leader.lease > 0 {
            let lease = tenure_kv::LeaseId(leader.lease as u64);
            self.0.check_attach(&caller, lease).await.map_err(as_etcd)?;
        }
        let put = queue::put(&leader.key, &r.value, leader.lease);
        let (proclaimed, header) =
            queue::if_created_at(&self.0, &leader.key, leader.rev, put).await?;
        if !proclaimed {
            return Err(Status::unknown(NOT_LEADER));
        }
        Ok(Response::new(ProclaimResponse { header: Some(header) }))
    }

    async fn leader(
        &self,
        request: Request<LeaderRequest>,
    ) -> Result<Response<LeaderResponse>, Status> {
        self.0.check_leader(&request)?;
        let name = request.into_inner().name;
        let (first, revision) = self
            .0
            .read(false, |s| (first_created(s, &name), s.revision()))
            .await
            .map_err(as_etcd)?;
        match first.map_err(as_etcd)? {
            Some(kv) => Ok(Response::new(LeaderResponse {
                header: Some(self.0.header(revision)),
                kv: Some(kv),
            })),
            None => Err(Status::unknown(NO_LEADER)),
        }
    }

    async fn observe(
        &self,
        request: Request<LeaderRequest>,
    ) -> Result<Response<Self::ObserveStream>, Status> {
        self.0.check_leader(&request)?;
        let slot = self.0.observing.take()?;
        let name = request.into_inner().name;
        let (tx, rx) = mpsc::channel(OBSERVE_QUEUE);
        tokio::spawn(observe(self.0.clone(), name, tx, slot));
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn resign(
        &self,
        request: Request<ResignRequest>,
    ) -> Result<Response<ResignResponse>, Status> {
        self.0.check_leader(&request)?;
        let leader =
            request.into_inner().leader.ok_or_else(|| Status::unknown(MISSING_LEADER_KEY))?;
        // As etcd: a key that is no longer the leader's is left alone, and
        // that is no error.
        let delete = queue::delete(&leader.key);
        let (_, header) = queue::if_created_at(&self.0, &leader.key, leader.rev, delete).await?;
        Ok(Response::new(ResignResponse { header: Some(header) }))
    }
}

/// What one look at the store found for an Observe stream: the answers
/// to send (revision of the header, the leader's key), and whether the
/// leader's history is still being read (more to read at once).
type Found = (Vec<(u64, mvccpb::KeyValue)>, bool);

/// Follows the leader of `name` in `store` from where `leader` (a watch on
/// the current leader's key, if one is known) left off, as clientv3's
/// `Observe` does: with no leader known, the first key by create revision
/// now; then every put of that key, until it is deleted; then again.
fn follow(store: &Store, name: &[u8], leader: &mut Option<Watcher>) -> Result<Found, Status> {
    let mut found = Vec::new();
    loop {
        let Some(w) = leader else {
            let Some(kv) = first_created(store, name)? else { return Ok((found, false)) };
            *leader = Some(Watcher::on_key(kv.key.clone(), store.revision() + 1));
            found.push((store.revision(), kv));
            return Ok((found, false));
        };
        match watch::read(store, w, watch::SCAN_PER_ROUND, watch::ROUND_BYTES) {
            // Fell behind the history the store keeps: start again from
            // the leader now.
            Err(_) => *leader = None,
            Ok((revisions, through)) => {
                w.next = through + 1;
                for (revision, events) in revisions {
                    for event in events {
                        match (EventType::try_from(event.r#type), event.kv) {
                            (Ok(EventType::Put), Some(kv)) => found.push((revision, kv)),
                            _ => *leader = None,
                        }
                    }
                    if leader.is_none() {
                        break;
                    }
                }
                // Caught up, or a round's worth read (then more at once).
                if leader.is_some() {
                    return Ok((found, through < store.revision()));
                }
            }
        }
    }
}

/// Serves one Observe stream until its client goes away or the listener
/// stops.
async fn observe(
    shared: Arc<Shared>,
    name: Vec<u8>,
    tx: mpsc::Sender<Result<LeaderResponse, Status>>,
    _slot: OwnedSemaphorePermit,
) {
    let mut applied = shared.ctx.kv.applied();
    let mut stopping = shared.stopping.clone();
    let mut leader: Option<Watcher> = None;
    loop {
        applied.borrow_and_update();
        let found = shared.ctx.kv.read_stale(|s| follow(s, &name, &mut leader)).0;
        let (answers, behind) = match found {
            Ok(found) => found,
            Err(e) => {
                let _ = tx.send(Err(as_etcd(e))).await;
                return;
            }
        };
        for (revision, kv) in answers {
            let answer = LeaderResponse { header: Some(shared.header(revision)), kv: Some(kv) };
            tokio::select! {
                sent = tx.send(Ok(answer)) => if sent.is_err() { return },
                _ = stopping.wait_for(|s| *s) => return,
            }
        }
        if behind {
            continue;
        }
        tokio::select! {
            changed = applied.changed() => if changed.is_err() {
                let _ = tx.try_send(Err(Status::unavailable(SERVER_STOPPED)));
                return;
            },
            () = tx.closed() => return,
            _ = stopping.wait_for(|s| *s) => {
                let _ = tx.try_send(Err(Status::unavailable(SERVER_STOPPED)));
                return;
            }
        }
    }
}
