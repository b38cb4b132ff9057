//! The handover of etcd's Election service as clientv3's `concurrency`
//! package drives it: two sessions (a lease each, renewed every third of
//! its TTL on a keepalive stream of its own connection), the first elected
//! on the leader's node, the second campaigning on a follower; then the
//! first resigns, or is "killed" (its keepalives stop and its connection
//! closes, as when its process gets SIGKILL), and the clock runs until the
//! second's Campaign returns.

use super::{Summary, Target, CALL_TIMEOUT};
use crate::stats::summarize;
use anyhow::Context;
use serde::Serialize;
use std::time::{Duration, Instant};
use tenure_etcd_api::etcdserverpb::kv_client::KvClient;
use tenure_etcd_api::etcdserverpb::lease_client::LeaseClient;
use tenure_etcd_api::etcdserverpb::{
    LeaseGrantRequest, LeaseKeepAliveRequest, LeaseRevokeRequest, RangeRequest,
};
use tenure_etcd_api::prefix_end;
use tenure_etcd_api::v3electionpb::election_client::ElectionClient;
use tenure_etcd_api::v3electionpb::{CampaignRequest, ResignRequest};
use tokio::task::JoinHandle;
use tonic::transport::Channel;

/// How long the second candidate may take to show up in the queue.
const QUEUE_BOUND: Duration = Duration::from_secs(10);

/// How a handover was timed.
#[derive(Debug, Serialize)]
pub(super) struct HandoverReport {
    /// "resign" or "kill".
    pub stop: &'static str,
    /// Handovers timed.
    pub trials: usize,
    /// Handovers that did not happen within the bound.
    pub failed: usize,
    /// From the resignation (or the kill) to the successor's Campaign
    /// answer, ms.
    pub latency_ms: Option<Summary>,
}

/// A session: a lease and the task renewing it, stopped when the session
/// is dropped (on every path, errors included).
struct Session {
    lease: i64,
    keepalive: JoinHandle<()>,
}

impl Drop for Session {
    fn drop(&mut self) {
        self.keepalive.abort();
    }
}

/// `call`, or an error once [`CALL_TIMEOUT`] has passed.
async fn bounded<T>(
    what: &str,
    call: impl std::future::Future<Output = Result<tonic::Response<T>, tonic::Status>>,
) -> anyhow::Result<T> {
    match tokio::time::timeout(CALL_TIMEOUT, call).await {
        Ok(answer) => Ok(answer.with_context(|| what.to_string())?.into_inner()),
        Err(_) => anyhow::bail!("{what}: no answer within {CALL_TIMEOUT:?}"),
    }
}

impl Session {
    /// A lease of `ttl` seconds on `channel`, renewed every third of it.
    async fn open(channel: &Channel, ttl: i64) -> anyhow::Result<Session> {
        let mut leases = LeaseClient::new(channel.clone());
        let grant = LeaseGrantRequest { ttl, id: 0 };
        let lease = bounded("a lease grant", leases.lease_grant(grant)).await?.id;
        let keepalive = tokio::spawn(async move {
            // The first renewal goes with the call: etcd (grpc-go) sends the
            // stream's headers with its first answer.
            let (tx, rx) = tokio::sync::mpsc::channel(1);
            if tx.send(LeaseKeepAliveRequest { id: lease }).await.is_err() {
                return;
            }
            let Ok(stream) =
                leases.lease_keep_alive(tokio_stream::wrappers::ReceiverStream::new(rx)).await
            else {
                return;
            };
            let mut stream = stream.into_inner();
            let every = Duration::from_millis(ttl as u64 * 1000 / 3);
            loop {
                // Stops at the end of the stream, and at a lease gone (TTL
                // 0), as clientv3's session does.
                match tokio::time::timeout(CALL_TIMEOUT, stream.message()).await {
                    Ok(Ok(Some(answer))) if answer.ttl > 0 => {}
                    _ => return,
                }
                tokio::time::sleep(every).await;
                if tx.send(LeaseKeepAliveRequest { id: lease }).await.is_err() {
                    return;
                }
            }
        });
        Ok(Session { lease, keepalive })
    }
}

/// `resign_trials` handovers by resignation and `kill_trials` by a kill,
/// sessions of `ttl` seconds.
pub(super) async fn handovers(
    system: &str,
    target: &Target,
    resign_trials: usize,
    kill_trials: usize,
    ttl: i64,
) -> anyhow::Result<Vec<HandoverReport>> {
    let mut reports = Vec::new();
    for (stop, trials) in [("resign", resign_trials), ("kill", kill_trials)] {
        if trials == 0 {
            continue;
        }
        eprintln!("{system}: {trials} election handovers by {stop} ...");
        let (mut latencies, mut failed) = (Vec::new(), 0);
        for trial in 0..trials {
            let name = format!("bench-election-{stop}-{trial}");
            match handover(target, &name, stop == "kill", ttl).await? {
                Some(ms) => latencies.push(ms),
                None => failed += 1,
            }
        }
        reports.push(HandoverReport { stop, trials, failed, latency_ms: summarize(&latencies) });
    }
    Ok(reports)
}

/// One handover on election `name`: the latency in ms, or `None` if the
/// successor was not elected within the bound.
async fn handover(
    target: &Target,
    name: &str,
    kill: bool,
    ttl: i64,
) -> anyhow::Result<Option<f64>> {
    // Each candidate on a connection of its own, as two processes.
    let first_channel = target.connect(&target.url).await?;
    let second_channel = target.connect(&target.follower_url).await?;
    let first = Session::open(&first_channel, ttl).await?;
    let second = Session::open(&second_channel, ttl).await?;
    let campaign = |lease, value: &str| CampaignRequest {
        name: name.as_bytes().to_vec(),
        lease,
        value: value.as_bytes().to_vec(),
    };
    let mut elections = ElectionClient::new(first_channel.clone());
    let leader = bounded("the first campaign", elections.campaign(campaign(first.lease, "first")))
        .await?
        .leader
        .context("a campaign answer without its key")?;
    let mut waiting = ElectionClient::new(second_channel.clone());
    let request = campaign(second.lease, "second");
    let successor = tokio::spawn(async move {
        let answer = waiting.campaign(request).await;
        (Instant::now(), answer.map(|a| a.into_inner().leader))
    });
    wait_for_candidates(&first_channel, name, 2).await?;
    let stopped = Instant::now();
    let first_lease = first.lease;
    if kill {
        drop(first);
        drop(elections);
        drop(first_channel);
    } else {
        let resign = ResignRequest { leader: Some(leader) };
        bounded("the resignation", elections.resign(resign)).await?;
    }
    let bound = CALL_TIMEOUT + Duration::from_secs(3 * ttl as u64);
    let mut successor = successor;
    let outcome = tokio::time::timeout(bound, &mut successor).await;
    successor.abort();
    let latency = match &outcome {
        Ok(Ok((at, Ok(Some(_))))) => Some(at.duration_since(stopped).as_secs_f64() * 1e3),
        _ => None,
    };
    // Leave nothing behind: the successor resigns, both leases go.
    if let Ok(Ok((_, Ok(Some(key))))) = outcome {
        let mut elections = ElectionClient::new(second_channel.clone());
        let _ =
            bounded("a resignation", elections.resign(ResignRequest { leader: Some(key) })).await;
    }
    let second_lease = second.lease;
    drop(second);
    let mut leases = LeaseClient::new(second_channel);
    for lease in [first_lease, second_lease] {
        let _ = bounded("a revoke", leases.lease_revoke(LeaseRevokeRequest { id: lease })).await;
    }
    Ok(latency)
}

/// Waits until election `name` has `n` candidates.
async fn wait_for_candidates(channel: &Channel, name: &str, n: i64) -> anyhow::Result<()> {
    let mut kv = KvClient::new(channel.clone());
    let prefix = format!("{name}/").into_bytes();
    let deadline = Instant::now() + QUEUE_BOUND;
    loop {
        let range = RangeRequest {
            range_end: prefix_end(&prefix),
            key: prefix.clone(),
            count_only: true,
            ..Default::default()
        };
        if bounded("counting candidates", kv.range(range)).await?.count >= n {
            return Ok(());
        }
        anyhow::ensure!(Instant::now() < deadline, "the second candidate never queued on {name}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}
