//! The client's `PartitionMember` against a real three-node cluster in this
//! process: a member alone takes all eight partitions; a second member
//! joins, the first is asked back four (their tokens cancelled first),
//! releases them, and the second receives them with higher epochs; the
//! second leaves and the first gets them back; a closed session cancels
//! every token and ends in `Lost`. Partitions asked back at once go back in
//! one release, and malformed releases change nothing.

use crate::servers::{agreement, call_as, eventually, start_cluster, Server, WRITE_TOKEN};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tenure_client::partitions::{Event, JoinOptions, PartitionMember};
use tenure_client::{
    parse_endpoints, CancellationToken, Client, ClientOptions, Cluster, Session, TenureStore,
};
use tenure_server::http::HttpLimits;

/// Bound on a first election and a first session, on a busy machine.
const START_BOUND: Duration = Duration::from_secs(10);
/// Bound on one event of a member (a grant or a revocation: a few commits).
const EVENT_BOUND: Duration = Duration::from_secs(10);
/// Bound on a server's clean stop.
const STOP_BOUND: Duration = Duration::from_secs(5);

/// The partitions a member holds, with their epochs and tokens.
type Held = BTreeMap<u32, (u64, CancellationToken)>;

fn cluster_of(servers: &[Server]) -> Arc<Cluster> {
    let client = Client::new(ClientOptions { cacert: None, token: Some(WRITE_TOKEN) }).unwrap();
    let list: Vec<String> = servers.iter().map(|s| s.http.to_string()).collect();
    let endpoints = parse_endpoints(&list.join(","), client.https()).unwrap();
    Arc::new(Cluster::new(client, endpoints).unwrap())
}

/// A three-node cluster in this process (heartbeat 50 ms) that agrees on a
/// leader, and a client of it.
async fn start(
    dir: &std::path::Path,
) -> (Vec<Server>, Arc<Cluster>, Arc<dyn tenure_client::Store>) {
    let heartbeat = Duration::from_millis(50);
    let servers = start_cluster(3, heartbeat, heartbeat * 10, HttpLimits::default(), dir);
    agreement(&servers).await;
    let cluster = cluster_of(&servers);
    let store: Arc<dyn tenure_client::Store> = TenureStore::shared(cluster.clone());
    (servers, cluster, store)
}

/// A first member of a new group `group` of eight partitions (no
/// stabilisation time), holding all eight.
async fn first_member(
    cluster: &Arc<Cluster>,
    store: &Arc<dyn tenure_client::Store>,
    group: &str,
) -> (Session, PartitionMember, Held) {
    let session = eventually("a session", START_BOUND, || async {
        Session::start(store.clone(), Duration::from_secs(5)).await.ok()
    })
    .await;
    let options = JoinOptions { partitions: Some(8), stabilise_ms: Some(0), ..Default::default() };
    let mut member = PartitionMember::join(cluster.clone(), &session, group, options)
        .await
        .expect("the first member creates the group");
    let mut held = Held::new();
    settle(&mut member, &mut held, 8).await;
    (session, member, held)
}

/// The next event of `m`, within [`EVENT_BOUND`].
async fn next(m: &mut PartitionMember) -> Event {
    match tokio::time::timeout(EVENT_BOUND, m.next()).await {
        Ok(e) => e.expect("an event"),
        Err(_) => {
            panic!("no event of {:?} within {EVENT_BOUND:?}; owns {:?}", m.group(), m.owned())
        }
    }
}

/// Takes events until `m` holds `want` partitions and nothing is asked
/// back; releases what is asked back (its token must be cancelled first).
async fn settle(m: &mut PartitionMember, held: &mut Held, want: usize) {
    while held.len() != want || m.owned().len() != want {
        match next(m).await {
            Event::Assigned { partition, epoch, stop } => {
                assert!(!stop.is_cancelled());
                if let Some((old, _)) = held.insert(partition, (epoch, stop)) {
                    assert!(epoch > old, "partition {partition}: epoch {epoch} after {old}");
                }
            }
            Event::Revoked { partition, release, .. } => {
                let (_, stop) = held.remove(&partition).expect("revoked what it held");
                assert!(stop.is_cancelled(), "revoked before its token was cancelled");
                if release {
                    m.release(partition).await.expect("released");
                }
            }
            Event::Lost { loss } => panic!("lost: {loss}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn members_share_partitions_hand_them_over_and_lose_them_with_their_session() {
    let dir = tempfile::tempdir().unwrap();
    let (mut servers, cluster, store) = start(dir.path()).await;
    let (session_a, mut a, mut held_a) = first_member(&cluster, &store, "shards").await;
    let first: BTreeMap<u32, u64> = held_a.iter().map(|(p, (e, _))| (*p, *e)).collect();

    // A second member: four partitions move, each after its release.
    let session_b = Session::start(store.clone(), Duration::from_secs(5)).await.unwrap();
    let mut b =
        PartitionMember::join(cluster.clone(), &session_b, "shards", JoinOptions::default())
            .await
            .expect("a second member joins");
    let mut held_b = Held::new();
    let (ra, rb) = tokio::join!(settle(&mut a, &mut held_a, 4), settle(&mut b, &mut held_b, 4));
    let _ = (ra, rb);
    for (p, (epoch, _)) in &held_b {
        assert!(*epoch > first[p], "partition {p} moved without a higher epoch");
        assert!(!held_a.contains_key(p));
    }

    // The second leaves (its work over): the first gets everything back.
    let tokens_b: Vec<CancellationToken> = held_b.values().map(|(_, t)| t.clone()).collect();
    b.leave().await.expect("leaves");
    assert!(tokens_b.iter().all(CancellationToken::is_cancelled));
    settle(&mut a, &mut held_a, 8).await;

    // A third member: the first is asked for four back. It gives one back
    // and holds the other three releases: the group changing (the one
    // given back granted to the third) tells it nothing again of those.
    let session_c = Session::start(store.clone(), Duration::from_secs(5)).await.unwrap();
    let mut c =
        PartitionMember::join(cluster.clone(), &session_c, "shards", JoinOptions::default())
            .await
            .expect("a third member joins");
    let mut releases = Vec::new();
    while releases.len() < 4 {
        match next(&mut a).await {
            Event::Revoked { partition, release: true, .. } => {
                let (_, stop) = held_a.remove(&partition).expect("revoked what it held");
                assert!(stop.is_cancelled());
                releases.push(a.release_later(partition).expect("owned"));
            }
            e => panic!("expected a partition asked back: {e:?}"),
        }
    }
    releases.pop().unwrap().send().await.expect("released");
    let mut held_c = Held::new();
    settle(&mut c, &mut held_c, 1).await;
    if let Ok(e) = tokio::time::timeout(Duration::from_millis(500), a.next()).await {
        panic!("a release on its way was told again: {e:?}");
    }
    for r in releases {
        r.send().await.expect("released");
    }
    settle(&mut c, &mut held_c, 4).await;
    assert_eq!(a.owned().len(), 4);
    drop(c);

    // The first's session closes: every token is cancelled, then Lost.
    let tokens_a: Vec<CancellationToken> = held_a.values().map(|(_, t)| t.clone()).collect();
    session_a.close().await.expect("closed");
    loop {
        match next(&mut a).await {
            Event::Lost { .. } => break,
            Event::Revoked { .. } => {}
            Event::Assigned { partition, .. } => panic!("granted {partition} after the close"),
        }
    }
    assert!(tokens_a.iter().all(CancellationToken::is_cancelled));
    assert!(a.owned().is_empty());
    drop((session_b, session_c));
    for s in &mut servers {
        s.stop(STOP_BOUND).await.expect("stops");
    }
}

/// With the cluster gone, every partition's token is cancelled by the
/// session's deadline less the stop margin, even while the caller is not
/// inside `next()` (it may be doing its work, or waiting for a release).
#[tokio::test(flavor = "multi_thread")]
async fn tokens_are_cancelled_by_the_deadline_whatever_the_caller_awaits() {
    let dir = tempfile::tempdir().unwrap();
    let (mut servers, cluster, store) = start(dir.path()).await;
    let ttl = Duration::from_millis(1_500);
    let session = eventually("a session", START_BOUND, || async {
        Session::start(store.clone(), ttl).await.ok()
    })
    .await;
    let options = JoinOptions { partitions: Some(2), stabilise_ms: Some(0), ..Default::default() };
    let mut m = PartitionMember::join(cluster.clone(), &session, "jobs", options).await.unwrap();
    let mut held = Held::new();
    settle(&mut m, &mut held, 2).await;
    for s in &mut servers {
        s.stop(STOP_BOUND).await.expect("stops");
    }
    // Not in `next()`: the tokens must be cancelled by the deadline anyway.
    let deadline = session.deadline();
    let margin = ttl / 10;
    tokio::time::sleep_until(deadline - margin + Duration::from_millis(50)).await;
    for (p, (_, stop)) in &held {
        assert!(stop.is_cancelled(), "partition {p}'s token still valid at deadline - margin");
    }
    assert!(matches!(next(&mut m).await, Event::Lost { .. }));
}

/// A member asked for several partitions at once learns of them from one
/// assignment (`next`, then `try_next` without asking the cluster) and
/// gives them back in one release: one revision, so the keeper grants them
/// to the joiner in one transaction, at one epoch. Malformed releases are
/// refused and change nothing.
#[tokio::test(flavor = "multi_thread")]
async fn partitions_asked_back_at_once_go_back_in_one_release() {
    let dir = tempfile::tempdir().unwrap();
    let (mut servers, cluster, store) = start(dir.path()).await;
    let (session_a, mut a, mut held_a) = first_member(&cluster, &store, "batch").await;
    let addr = servers[0].http;
    let release = |body: serde_json::Value| async move {
        call_as(addr, WRITE_TOKEN, "POST", "/v1/groups/batch/release", &body.to_string()).await
    };
    let id = session_a.id();
    let (p0, (e0, _)) = held_a.iter().next().map(|(p, (e, t))| (*p, (*e, t.clone()))).unwrap();
    for (body, why) in [
        (serde_json::json!({"session": id, "partitions": []}), "names no partition"),
        (
            serde_json::json!({"session": id, "partitions": [{"partition": p0, "epoch": e0}, {"partition": p0, "epoch": e0}]}),
            "twice",
        ),
        (
            serde_json::json!({"session": id, "partition": p0, "epoch": e0, "partitions": [{"partition": p0, "epoch": e0}]}),
            "not both",
        ),
        (
            serde_json::json!({"session": id, "partitions": (0..64).map(|p| serde_json::json!({"partition": p, "epoch": 1})).collect::<Vec<_>>()}),
            "at most 63",
        ),
    ] {
        let answer = release(body.clone()).await;
        assert_eq!(answer.status, 400, "{body}: {}", answer.body);
        assert!(answer.body.contains(why), "{body}: {}", answer.body);
    }
    // None of those changed anything: a list of grants not held is a 409.
    let stale =
        serde_json::json!({"session": id, "partitions": [{"partition": p0, "epoch": e0 - 1}]});
    assert_eq!(release(stale).await.status, 409);
    assert_eq!(a.owned().len(), 8);

    let session_b = Session::start(store.clone(), Duration::from_secs(5)).await.unwrap();
    let mut b = PartitionMember::join(cluster.clone(), &session_b, "batch", JoinOptions::default())
        .await
        .expect("a second member joins");
    let mut asked = Vec::new();
    let mut event = Some(next(&mut a).await);
    while let Some(e) = event.take() {
        match e {
            Event::Revoked { partition, release: true, .. } => {
                let (_, stop) = held_a.remove(&partition).expect("revoked what it held");
                assert!(stop.is_cancelled());
                asked.push(partition);
            }
            e => panic!("expected a partition asked back: {e:?}"),
        }
        event = a.try_next();
    }
    assert_eq!(asked.len(), 4, "the keeper asks for the four back in one transaction");
    let releases = a.release_all_later(&asked);
    assert_eq!(releases.len(), 1, "four grants go in one release");
    assert_eq!(releases[0].grants().len(), 4);
    releases.into_iter().next().unwrap().send().await.expect("released");
    let mut held_b = Held::new();
    settle(&mut b, &mut held_b, 4).await;
    let epochs: std::collections::BTreeSet<u64> = held_b.values().map(|(e, _)| *e).collect();
    assert_eq!(epochs.len(), 1, "granted in one transaction: {held_b:?}");
    assert_eq!(a.owned().len(), 4);
    drop((a, b, session_a, session_b));
    for s in &mut servers {
        s.stop(STOP_BOUND).await.expect("stops");
    }
}
