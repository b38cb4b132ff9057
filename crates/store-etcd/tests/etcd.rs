//! EtcdStore against real etcd members on loopback (`tenure_testkit::etcd`).

use tenure_testkit::etcd as common;

use common::EtcdCluster;
use futures_util::StreamExt;
use std::time::Duration;
use tenure_elect::{Candidacy, Observed, Renewal, SessionId, Store, StoreError, Waited};
use tenure_etcd_api::etcdserverpb::cluster_client::ClusterClient;
use tenure_etcd_api::etcdserverpb::kv_client::KvClient;
use tenure_etcd_api::etcdserverpb::lease_client::LeaseClient;
use tenure_etcd_api::etcdserverpb::maintenance_client::MaintenanceClient;
use tenure_etcd_api::etcdserverpb::range_request::{SortOrder, SortTarget};
use tenure_etcd_api::etcdserverpb::{
    CompactionRequest, DeleteRangeRequest, LeaseLeasesRequest, LeaseRevokeRequest,
    LeaseTimeToLiveRequest, MemberListRequest, PutRequest, RangeRequest, RangeResponse,
    StatusRequest,
};
use tenure_store_etcd::{EtcdOptions, EtcdStore};
use tokio::time::Instant;
use tonic::transport::Channel;

const PREFIX: &str = "/test/elections";

fn store(cluster: &EtcdCluster) -> EtcdStore {
    let options = EtcdOptions { prefix: PREFIX.into(), ..Default::default() };
    EtcdStore::new(cluster.endpoints(), options).expect("a valid store")
}

/// A plain client of one member, for the tests' own reads and writes
/// (the store's are what is tested).
struct Raw {
    kv: KvClient<Channel>,
    lease: LeaseClient<Channel>,
    maintenance: MaintenanceClient<Channel>,
    cluster: ClusterClient<Channel>,
}

impl Raw {
    async fn at(endpoint: &str) -> Raw {
        let channel = Channel::from_shared(endpoint.to_string()).unwrap().connect().await.unwrap();
        Raw {
            kv: KvClient::new(channel.clone()),
            lease: LeaseClient::new(channel.clone()),
            maintenance: MaintenanceClient::new(channel.clone()),
            cluster: ClusterClient::new(channel),
        }
    }

    async fn range(&mut self, request: RangeRequest) -> RangeResponse {
        self.kv.range(request).await.expect("range").into_inner()
    }

    async fn get(&mut self, key: &str) -> RangeResponse {
        self.range(RangeRequest { key: key.into(), ..Default::default() }).await
    }

    async fn put(&mut self, key: &str, value: &str, lease: i64) {
        let put = PutRequest { key: key.into(), value: value.into(), lease, ..Default::default() };
        self.kv.put(put).await.expect("put");
    }

    async fn delete(&mut self, key: Vec<u8>) {
        self.kv
            .delete_range(DeleteRangeRequest { key, ..Default::default() })
            .await
            .expect("delete");
    }

    async fn lease_revoke(&mut self, id: i64) {
        self.lease.lease_revoke(LeaseRevokeRequest { id }).await.expect("revoke");
    }

    async fn compact(&mut self, revision: i64) {
        let compact = CompactionRequest { revision, physical: false };
        self.kv.compact(compact).await.expect("compact");
    }
}

/// The end of the range of the keys under `prefix` (its last byte is no 0xff here).
fn prefix_end(prefix: &str) -> Vec<u8> {
    let mut end = prefix.as_bytes().to_vec();
    *end.last_mut().unwrap() += 1;
    end
}

async fn raw(cluster: &EtcdCluster) -> Raw {
    Raw::at(&cluster.endpoints()[0]).await
}

/// A session of `ttl` and its candidacy in `election`.
async fn candidate(store: &EtcdStore, ttl: Duration, election: &str, value: &str) -> Candidacy {
    let session = store.grant(ttl).await.expect("grant").session;
    store.campaign(session, election, value).await.expect("campaign")
}

/// `c`'s wait of at most `timeout`, in a task of its own.
fn spawn_wait(
    store: &EtcdStore,
    c: &Candidacy,
    timeout: Duration,
) -> tokio::task::JoinHandle<Result<Waited, StoreError>> {
    let (store, c) = (store.clone(), c.clone());
    tokio::spawn(async move { store.wait(&c, timeout).await })
}

/// A store at `endpoints` whose requests time out after `timeout` and whose
/// quiet watch streams are probed after `probe_after`.
fn store_timed(endpoints: Vec<String>, timeout: Duration, probe_after: Duration) -> EtcdStore {
    let options = EtcdOptions {
        prefix: PREFIX.into(),
        request_timeout: timeout,
        probe_after,
        ..Default::default()
    };
    EtcdStore::new(endpoints, options).expect("a valid store")
}

/// The number of keys under `election`'s prefix.
async fn keys(cluster: &EtcdCluster, election: &str) -> i64 {
    let prefix = format!("{PREFIX}/{election}/");
    let count = RangeRequest {
        range_end: prefix_end(&prefix),
        key: prefix.into(),
        count_only: true,
        ..Default::default()
    };
    raw(cluster).await.range(count).await.count
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grants_report_the_ttl_etcd_granted_and_renewals_their_send_time() {
    // A 1 s election timeout: etcd's shortest TTL is then ⌈1.5 s⌉ = 2 s.
    let cluster = EtcdCluster::start_with(1, 1000);
    let store = store(&cluster);
    let raised = store.grant(Duration::from_secs(1)).await.unwrap();
    assert_eq!(raised.ttl, Duration::from_secs(2), "etcd raises a 1 s TTL to its minimum");
    let rounded = store.grant(Duration::from_millis(2500)).await.unwrap();
    assert_eq!(rounded.ttl, Duration::from_secs(3), "a TTL is rounded up to whole seconds");
    for _ in 0..3 {
        let before = Instant::now();
        let r: Renewal = store.renew(rounded.session).await.unwrap();
        let after = Instant::now();
        assert_eq!(r.session, rounded.session);
        assert_eq!(r.ttl, Duration::from_secs(3));
        assert!(before <= r.sent && r.sent <= after, "sent is read while the renewal runs");
    }
    store.revoke(rounded.session).await.unwrap();
    let gone = store.renew(rounded.session).await.unwrap_err();
    assert!(matches!(gone, StoreError::Gone(_)), "{gone:?}");
    store.revoke(rounded.session).await.expect("revoking a revoked lease is fine");
    let never = store.renew(SessionId(0x1234_5678)).await.unwrap_err();
    assert!(matches!(never, StoreError::Gone(_)), "{never:?}");
    // A lease revoked behind the back of an open keepalive stream.
    store.renew(raised.session).await.unwrap();
    raw(&cluster).await.lease_revoke(raised.session.0 as i64).await;
    let behind = store.renew(raised.session).await.unwrap_err();
    assert!(matches!(behind, StoreError::Gone(_)), "{behind:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn campaigns_queue_by_creation_revision_and_a_retry_makes_no_second_key() {
    let cluster = EtcdCluster::start(1);
    let store = store(&cluster);
    let a = candidate(&store, Duration::from_secs(5), "jobs", "a").await;
    assert!(a.leader, "the first candidacy leads");
    let mut client = raw(&cluster).await;
    let kv = client.get(a.key.as_str()).await.kvs[0].clone();
    assert_eq!(a.token, kv.create_revision as u64, "token = the key's create_revision");
    assert_eq!((kv.lease as u64, &kv.value[..]), (a.session.0, &b"a"[..]));
    assert_eq!(a.key, format!("{PREFIX}/jobs/{:016x}", a.session.0));
    let b = candidate(&store, Duration::from_secs(5), "jobs", "b").await;
    assert!(!b.leader, "the second queues");
    assert!(b.token > a.token);
    let again = store.campaign(b.session, "jobs", "b").await.unwrap();
    assert_eq!(again, b, "a retried campaign returns the same candidacy");
    assert_eq!(keys(&cluster, "jobs").await, 2, "and makes no second key");
    // Another election is another queue.
    let other = candidate(&store, Duration::from_secs(5), "jobs2", "c").await;
    assert!(other.leader);
    // A key of that name held by another lease is not ours.
    let foreign = store.grant(Duration::from_secs(5)).await.unwrap().session;
    let key = store.key("jobs", foreign);
    client.put(&key, "x", a.session.0 as i64).await;
    let refused = store.campaign(foreign, "jobs", "f").await.unwrap_err();
    assert!(matches!(refused, StoreError::Refused(_)), "{refused:?}");
    let bad = store.campaign(foreign, "no/slash", "f").await.unwrap_err();
    assert!(matches!(bad, StoreError::Invalid(_)), "{bad:?}");
    // A session that ended cannot campaign.
    let ended = store.grant(Duration::from_secs(5)).await.unwrap().session;
    store.revoke(ended).await.unwrap();
    let gone = store.campaign(ended, "jobs", "e").await.unwrap_err();
    assert!(matches!(gone, StoreError::Gone(_)), "{gone:?}");
    assert_eq!(keys(&cluster, "jobs").await, 3, "A, B and the foreign key only");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resignation_hands_over_to_the_waiting_successor_at_once() {
    let cluster = EtcdCluster::start(1);
    let store = store(&cluster);
    let a = candidate(&store, Duration::from_secs(5), "handover", "a").await;
    let b = candidate(&store, Duration::from_secs(5), "handover", "b").await;
    let short = store.wait(&b, Duration::from_millis(300)).await.unwrap();
    assert_eq!(short, Waited::Ahead { ahead: 1 });
    let waiting = {
        let (store, b) = (store.clone(), b.clone());
        tokio::spawn(async move { (store.wait(&b, Duration::from_secs(10)).await, Instant::now()) })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let wrong = Candidacy { token: a.token + 1000, ..a.clone() };
    store.resign(&wrong).await.expect("a resign with a wrong token is not an error");
    assert!(store.check("handover", a.token).await.unwrap().current, "and deletes nothing");
    assert!(!waiting.is_finished());
    let resigned = Instant::now();
    store.resign(&a).await.unwrap();
    let (waited, at) = waiting.await.unwrap();
    assert_eq!(waited.unwrap(), Waited::Leads { token: b.token });
    let handover = at - resigned;
    println!("handover: B leads {handover:?} after A's resign was sent");
    assert!(handover < Duration::from_secs(1), "{handover:?}");
    store.resign(&a).await.expect("resigning twice is fine");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_whose_key_expired_is_gone_never_leader_etcd_19597() {
    let cluster = EtcdCluster::start(1);
    let store = store(&cluster);
    let a = candidate(&store, Duration::from_secs(5), "e19597", "a").await;
    let b = candidate(&store, Duration::from_secs(5), "e19597", "b").await;
    let waiting = spawn_wait(&store, &b, Duration::from_secs(10));
    tokio::time::sleep(Duration::from_millis(200)).await;
    // B's session ends (its key goes with it), then A leaves at once.
    let mut client = raw(&cluster).await;
    client.lease_revoke(b.session.0 as i64).await;
    store.resign(&a).await.unwrap();
    let waited = tokio::time::timeout(Duration::from_secs(5), waiting).await.unwrap().unwrap();
    assert!(matches!(waited, Err(StoreError::Gone(_))), "B must not lead: {waited:?}");
    let again = store.wait(&b, Duration::from_secs(1)).await;
    assert!(matches!(again, Err(StoreError::Gone(_))), "{again:?}");
    // The same when A leaves first and B's key is already gone when the wait starts.
    let c = candidate(&store, Duration::from_secs(5), "e19597", "c").await;
    let d = candidate(&store, Duration::from_secs(5), "e19597", "d").await;
    client.lease_revoke(d.session.0 as i64).await;
    store.resign(&c).await.unwrap();
    let late = store.wait(&d, Duration::from_secs(1)).await;
    assert!(matches!(late, Err(StoreError::Gone(_))), "{late:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_leader_is_followed_after_its_ttl_and_the_sweep() {
    let cluster = EtcdCluster::start(1);
    let store = store(&cluster);
    let granted = store.grant(Duration::from_secs(1)).await.unwrap();
    assert_eq!(granted.ttl, Duration::from_secs(1));
    let a = store.campaign(granted.session, "expiry", "a").await.unwrap();
    let b = candidate(&store, Duration::from_secs(5), "expiry", "b").await;
    let renewer = {
        let (store, session) = (store.clone(), b.session);
        tokio::spawn(async move {
            loop {
                store.renew(session).await.expect("B's renewal");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        })
    };
    let waited = store.wait(&b, Duration::from_secs(10)).await.unwrap();
    let after = granted.sent.elapsed();
    renewer.abort();
    assert_eq!(waited, Waited::Leads { token: b.token });
    println!("expiry: B leads {after:?} after A's last renewal was sent (TTL 1 s)");
    assert!(after >= Duration::from_secs(1), "never before A's TTL: {after:?}");
    assert!(after < Duration::from_secs(3), "{after:?}");
    assert!(!store.check("expiry", a.token).await.unwrap().current);
}

type Observations = futures_util::stream::BoxStream<'static, Result<Observed, StoreError>>;

/// The next observation, within 5 s.
async fn next(o: &mut Observations) -> Observed {
    let item = tokio::time::timeout(Duration::from_secs(5), o.next()).await.expect("in time");
    item.expect("the stream goes on").expect("no error")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_and_observe_follow_the_leader() {
    let cluster = EtcdCluster::start(1);
    let store = store(&cluster);
    let mut observed = store.observe("watched").unwrap();
    assert!(matches!(next(&mut observed).await, Observed::NoLeader { .. }));
    let a = candidate(&store, Duration::from_secs(5), "watched", "a").await;
    let b = candidate(&store, Duration::from_secs(5), "watched", "b").await;
    let leader = |c: &Candidacy, value: &str, revision| Observed::Leader {
        session: c.session.0,
        value: value.into(),
        token: c.token,
        revision,
    };
    assert_eq!(next(&mut observed).await, leader(&a, "a", a.token));
    let check = store.check("watched", a.token).await.unwrap();
    assert!(check.current);
    assert_eq!(check.token, Some(a.token));
    assert!(check.revision >= b.token);
    assert!(!store.check("watched", b.token).await.unwrap().current);
    store.resign(&a).await.unwrap();
    match next(&mut observed).await {
        Observed::Leader { session, value, token, revision } => {
            assert_eq!((session, value.as_str(), token), (b.session.0, "b", b.token));
            assert!(revision > b.token, "the revision of A's resign");
        }
        o => panic!("B leads after A's resign, not {o:?}"),
    }
    let check = store.check("watched", a.token).await.unwrap();
    assert_eq!((check.current, check.token), (false, Some(b.token)));
    store.resign(&b).await.unwrap();
    assert!(matches!(next(&mut observed).await, Observed::NoLeader { .. }));
    assert_eq!(store.check("watched", b.token).await.unwrap().token, None);
    // A late observer starts with the state.
    let c = candidate(&store, Duration::from_secs(5), "watched", "c").await;
    let mut late = store.observe("watched").unwrap();
    let Observed::Leader { token, .. } = next(&mut late).await else { panic!("a leader") };
    assert_eq!(token, c.token);
}

/// Calls `f` until it succeeds or fails with an error that is not
/// retryable, at most `within`; returns the result and how long it took.
async fn retrying<T, F, Fut>(within: Duration, mut f: F) -> (Result<T, StoreError>, Duration)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, StoreError>>,
{
    let start = Instant::now();
    loop {
        match f().await {
            Err(e) if e.is_retryable() && start.elapsed() < within => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            r => return (r, start.elapsed()),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_fails_over_when_its_member_is_killed() {
    let mut cluster = EtcdCluster::start(3);
    let store = store(&cluster);
    assert_eq!(store.endpoints(), cluster.endpoints());
    let a = candidate(&store, Duration::from_secs(3), "failover", "a").await;
    let b = candidate(&store, Duration::from_secs(3), "failover", "b").await;
    store.renew(a.session).await.unwrap();
    store.renew(b.session).await.unwrap();
    let waiting = spawn_wait(&store, &b, Duration::from_secs(20));
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Every call so far went to the first endpoint, which answered.
    cluster.kill(0);
    let bound = Duration::from_secs(6);
    let (renewed, took) = retrying(bound, || store.renew(a.session)).await;
    renewed.expect("A's renewal through another member");
    println!("failover: A renewed through another member {took:?} after the kill");
    assert!(took < bound, "{took:?}");
    let (renewed, took_b) = retrying(bound, || store.renew(b.session)).await;
    renewed.expect("B's renewal through another member");
    println!("failover: B renewed {took_b:?} after A's renewal");
    let (c, took) = retrying(bound, || async {
        let s = store.grant(Duration::from_secs(3)).await?.session;
        store.campaign(s, "failover", "c").await
    })
    .await;
    let c = c.expect("a campaign through another member");
    println!("failover: grant + campaign {took:?}");
    assert!(c.token > b.token && !c.leader);
    let (resigned, _) = retrying(bound, || store.resign(&a)).await;
    resigned.unwrap();
    let resigned_at = Instant::now();
    let waited = tokio::time::timeout(bound, waiting).await.expect("the wait ends").unwrap();
    println!(
        "failover: B's wait (begun before the kill) ended {:?} after A resigned",
        resigned_at.elapsed()
    );
    assert_eq!(waited.unwrap(), Waited::Leads { token: b.token });
    // The killed member comes back; then another one goes: still served.
    cluster.restart(0);
    cluster.kill(1);
    let (renewed, took) = retrying(bound, || store.renew(b.session)).await;
    renewed.expect("B's renewal after a second kill");
    println!("failover: B renewed {took:?} after member 2 was killed (member 1 restarted)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_member_is_left_after_the_timeouts() {
    // The member that goes silent is the raft group's leader, the worst
    // case: until the others elect a new one (a second or two), none of
    // them answers a linearizable read or a keepalive either. Listed
    // first, it is the member every stream is open to.
    let mut cluster = EtcdCluster::start(3);
    let silent = raft_leader(&cluster).await;
    let mut endpoints = cluster.endpoints();
    endpoints.rotate_left(silent);
    let timeout = Duration::from_millis(1000);
    let store = store_timed(endpoints, timeout, Duration::from_millis(500));
    let a = candidate(&store, Duration::from_secs(5), "silent", "a").await;
    let b = candidate(&store, Duration::from_secs(5), "silent", "b").await;
    store.renew(a.session).await.unwrap();
    let mut observed = store.observe("silent").unwrap();
    assert!(
        matches!(next(&mut observed).await, Observed::Leader { token, .. } if token == a.token)
    );
    let waiting = spawn_wait(&store, &b, Duration::from_secs(20));
    tokio::time::sleep(Duration::from_millis(200)).await;
    // The member every stream is open to stops answering, without closing anything.
    cluster.pause(silent);
    let bound = Duration::from_secs(6);
    let (renewed, took) = retrying(bound, || store.renew(a.session)).await;
    renewed.expect("A's renewal through another member");
    println!("silent member: A renewed {took:?} after the SIGSTOP (request timeout {timeout:?})");
    // At least the stopped member's timeout; more since it led the raft
    // group (a follower forwards the keepalive to it until a new election).
    assert!(took >= timeout && took < 5 * timeout, "{took:?}");
    let (resigned, _) = retrying(bound, || store.resign(&a)).await;
    resigned.unwrap();
    let resigned_at = Instant::now();
    let waited = tokio::time::timeout(bound, waiting).await.expect("the wait ends").unwrap();
    println!("silent member: B's wait ended {:?} after A resigned", resigned_at.elapsed());
    assert_eq!(waited.unwrap(), Waited::Leads { token: b.token });
    let seen = next(&mut observed).await;
    println!("silent member: the observer saw B {:?} after A resigned", resigned_at.elapsed());
    assert!(matches!(seen, Observed::Leader { token, .. } if token == b.token), "{seen:?}");
    cluster.resume(silent);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_outlasts_a_store_that_answers_nothing_for_a_while() {
    // CI once saw a wait end in NoAnswer when, under load, no member
    // answered its read within the request timeout. A wait's deadline is
    // the caller's: a read or a watch that fails before it is tried again.
    let mut cluster = EtcdCluster::start(1);
    let timeout = Duration::from_millis(300);
    let store = store_timed(cluster.endpoints(), timeout, Duration::from_millis(150));
    let a = candidate(&store, Duration::from_secs(10), "mute", "a").await;
    let b = candidate(&store, Duration::from_secs(10), "mute", "b").await;
    let waiting = spawn_wait(&store, &b, Duration::from_secs(20));
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Several request timeouts without any answer: the watch's probe
    // fails, then every read of the place.
    cluster.pause(0);
    tokio::time::sleep(6 * timeout).await;
    assert!(!waiting.is_finished(), "the wait gave up: {:?}", waiting.await);
    cluster.resume(0);
    let (resigned, _) = retrying(Duration::from_secs(5), || store.resign(&a)).await;
    resigned.unwrap();
    let waited = tokio::time::timeout(Duration::from_secs(5), waiting).await;
    let waited = waited.expect("the wait ends after the resignation").unwrap();
    assert_eq!(waited.unwrap(), Waited::Leads { token: b.token });
    // Past its deadline, a wait on a store that does not answer fails.
    cluster.pause(0);
    let started = Instant::now();
    let gave_up = store.wait(&b, Duration::from_millis(500)).await;
    assert!(
        matches!(gave_up, Err(ref e) if e.is_retryable()),
        "{gave_up:?} after {:?}",
        started.elapsed()
    );
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    cluster.resume(0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_moves_past_an_endpoint_that_refuses_connections() {
    let cluster = EtcdCluster::start(1);
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let alone = EtcdStore::new(vec![format!("http://{closed}")], EtcdOptions::default()).unwrap();
    let refused = alone.grant(Duration::from_secs(2)).await.unwrap_err();
    assert!(matches!(refused, StoreError::NoAnswer { sent: false, .. }), "{refused:?}");
    // A grant is not resent after it may have arrived, but a refused
    // connection proves it did not: the next endpoint gets it.
    let endpoints = vec![format!("http://{closed}"), cluster.endpoints()[0].clone()];
    let store = EtcdStore::new(endpoints, EtcdOptions::default()).unwrap();
    let granted = store.grant(Duration::from_secs(2)).await.expect("granted by the second");
    store.renew(granted.session).await.unwrap();
}

/// The index of the member that leads the raft group now.
async fn raft_leader(cluster: &EtcdCluster) -> usize {
    for (i, endpoint) in cluster.endpoints().iter().enumerate() {
        let mut c = Raw::at(endpoint).await;
        let status = c.maintenance.status(StatusRequest {}).await.unwrap().into_inner();
        if status.header.map(|h| h.member_id) == Some(status.leader) {
            return i;
        }
    }
    panic!("no member says it leads");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_cut_off_from_its_quorum_stops_renewing_within_an_election_timeout() {
    // etcd 3.4's lessor answers keepalives while its member leads, and
    // CheckQuorum makes a leader without a quorum step down between one
    // and two election timeouts (500 ms here) after it lost it: after that
    // its keepalives fail. (A new leader, elected at least one election
    // timeout after the cut, extends every lease by one more: later than
    // any deadline the deposed leader's answers allowed.)
    let mut cluster = EtcdCluster::start(3);
    let leader = raft_leader(&cluster).await;
    let only_leader = vec![cluster.endpoints()[leader].clone()];
    let options = EtcdOptions { request_timeout: Duration::from_millis(500), ..Default::default() };
    let store = EtcdStore::new(only_leader, options).unwrap();
    let session = store.grant(Duration::from_secs(5)).await.unwrap().session;
    store.renew(session).await.unwrap();
    let cut = Instant::now();
    for i in (0..3).filter(|i| *i != leader) {
        cluster.pause(i);
    }
    let mut last_answered = None;
    while cut.elapsed() < Duration::from_secs(4) {
        let before = Instant::now();
        match store.renew(session).await {
            Ok(_) => last_answered = Some(before - cut),
            Err(e) => assert!(e.is_retryable(), "{e:?}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!("deposed leader: its last keepalive answer was sent {last_answered:?} after the cut");
    let last = last_answered.expect("renewals answered right after the cut");
    assert!(last < Duration::from_millis(1500), "answered {last:?} after losing its quorum");
    for i in (0..3).filter(|i| *i != leader) {
        cluster.resume(i);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_that_cannot_resume_reports_missed_then_the_state() {
    let mut cluster = EtcdCluster::start(3);
    let options = EtcdOptions {
        prefix: PREFIX.into(),
        request_timeout: Duration::from_millis(1000),
        probe_after: Duration::from_millis(500),
        ..Default::default()
    };
    let observer = EtcdStore::new(cluster.endpoints(), options).unwrap();
    // Changes go through the other two members.
    let others = cluster.endpoints()[1..].to_vec();
    let store =
        EtcdStore::new(others.clone(), EtcdOptions { prefix: PREFIX.into(), ..Default::default() })
            .unwrap();
    let a = candidate(&store, Duration::from_secs(5), "missed", "a").await;
    let b = candidate(&store, Duration::from_secs(5), "missed", "b").await;
    let mut observed = observer.observe("missed").unwrap();
    assert!(
        matches!(next(&mut observed).await, Observed::Leader { token, .. } if token == a.token)
    );
    // The observer's member goes silent; meanwhile A leaves and the
    // history is compacted past it.
    cluster.pause(0);
    store.resign(&a).await.unwrap();
    let mut client = Raw::at(&others[0]).await;
    let revision = client.get("x").await.header.unwrap().revision;
    client.compact(revision).await;
    match next(&mut observed).await {
        Observed::Missed { compacted, current } => {
            assert_eq!(compacted, revision as u64);
            assert!(current >= revision as u64);
        }
        o => panic!("the gap must be told, not {o:?}"),
    }
    let state = next(&mut observed).await;
    assert!(matches!(state, Observed::Leader { token, .. } if token == b.token), "{state:?}");
    cluster.resume(0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_endpoints_with_the_ca_and_credentials() {
    let certs = common::Certs::make();
    let mut cluster = EtcdCluster::start_tls(1, certs.cert.clone(), certs.key.clone());
    let endpoints = cluster.endpoints();
    assert!(endpoints[0].starts_with("https://"));
    // Authentication on, with a root user.
    // By etcdctl: the store needs no user administration, so the API
    // crate has none.
    let etcdctl = |args: &[&str]| {
        let out = std::process::Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .arg(format!("--endpoints={}", endpoints.join(",")))
            .arg(format!("--cacert={}", certs.ca.display()))
            .args(args)
            .output()
            .expect("etcdctl runs (apt-get install etcd-client)");
        assert!(out.status.success(), "etcdctl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    etcdctl(&["role", "add", "root"]);
    etcdctl(&["user", "add", "root:s3cret"]);
    etcdctl(&["user", "grant-role", "root", "root"]);
    etcdctl(&["auth", "enable"]);

    let no_ca = EtcdStore::new(endpoints.clone(), EtcdOptions::default()).unwrap_err();
    assert!(matches!(no_ca, StoreError::Config(_)), "{no_ca:?}");
    let with = |user: Option<(&str, &str)>| {
        let options = EtcdOptions {
            prefix: PREFIX.into(),
            cacert: Some(certs.ca.clone()),
            user: user.map(|(u, p)| (u.to_string(), p.to_string())),
            ..Default::default()
        };
        EtcdStore::new(endpoints.clone(), options).unwrap()
    };
    // etcd 3.4 grants leases without checking who asks, but writes need a user.
    let nobody = with(None);
    let lease = nobody.grant(Duration::from_secs(2)).await.unwrap().session;
    let anonymous = nobody.campaign(lease, "tls", "x").await.unwrap_err();
    assert!(!anonymous.is_retryable(), "refused, not retried: {anonymous:?}");
    let wrong = with(Some(("root", "wrong"))).grant(Duration::from_secs(2)).await.unwrap_err();
    assert!(!wrong.is_retryable(), "refused, not retried: {wrong:?}");
    println!("tls: anonymous: {anonymous}; wrong password: {wrong}");

    let store = with(Some(("root", "s3cret")));
    let a = candidate(&store, Duration::from_secs(2), "tls", "a").await;
    assert!(a.leader);
    store.renew(a.session).await.unwrap();
    assert_eq!(
        store.wait(&a, Duration::from_secs(1)).await.unwrap(),
        Waited::Leads { token: a.token }
    );
    let mut observed = store.observe("tls").unwrap();
    assert!(
        matches!(next(&mut observed).await, Observed::Leader { token, .. } if token == a.token)
    );
    assert!(store.check("tls", a.token).await.unwrap().current);
    store.resign(&a).await.unwrap();
    assert!(matches!(next(&mut observed).await, Observed::NoLeader { .. }));
    store.revoke(a.session).await.unwrap();
    // A restarted member has forgotten the login tokens it gave (etcd's
    // simple tokens live in its memory): the store's next request is
    // refused as unauthenticated, and the store logs in again and carries on.
    drop(observed);
    cluster.restart(0);
    let b = candidate(&store, Duration::from_secs(2), "tls", "b").await;
    assert!(b.leader);
    store.revoke(b.session).await.unwrap();
}

/// A renewal dropped after its request left (its caller's timeout) must
/// not leave its answer to be taken for the next renewal's: that answer
/// would prove an instant earlier than the next renewal's send time. Found
/// in review: the next renewal, with the only member paused again, came
/// back `Ok` with its own (later) send time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_renewal_leaves_no_answer_for_the_next() {
    let mut cluster = EtcdCluster::start(1);
    let store = store(&cluster);
    let s = store.grant(Duration::from_secs(5)).await.unwrap().session;
    store.renew(s).await.expect("a first renewal opens the stream");
    cluster.pause(0);
    let abandoned = tokio::time::timeout(Duration::from_millis(100), store.renew(s)).await;
    assert!(abandoned.is_err(), "a paused member cannot answer: {abandoned:?}");
    // The member answers the abandoned request, then stops again.
    cluster.resume(0);
    tokio::time::sleep(Duration::from_millis(300)).await;
    cluster.pause(0);
    let next = store.renew(s).await;
    cluster.resume(0);
    assert!(next.is_err(), "a renewal no member answered: {next:?}");
    store.renew(s).await.expect("renewed once the member runs again");
}

/// A leader whose key someone else deletes (an operator, a client with
/// write access) keeps its session, so no deadline ends its leadership:
/// the layer above checks, every renewal interval, that its token still
/// leads, and cancels the leading context when it does not. Found in
/// review: both latches said they led, for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_key_someone_deletes_is_deposed() {
    use std::sync::Arc;
    use tenure_elect::LeaderLatch;
    let cluster = EtcdCluster::start(1);
    let store: Arc<dyn Store> = Arc::new(store(&cluster));
    let ttl = Duration::from_secs(3);
    let a = LeaderLatch::start(store.clone(), "deposed", "a", ttl).unwrap();
    assert!(a.await_leadership(Duration::from_secs(10)).await, "a leads");
    let leading = a.leadership().expect("a leads");
    let b = LeaderLatch::start(store.clone(), "deposed", "b", ttl).unwrap();
    let queued = Instant::now() + Duration::from_secs(10);
    while keys(&cluster, "deposed").await < 2 {
        assert!(Instant::now() < queued, "b did not queue");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Delete a's key (the first created) behind its back.
    let prefix = format!("{PREFIX}/deposed/");
    let first = RangeRequest {
        range_end: prefix_end(&prefix),
        key: prefix.into(),
        sort_order: SortOrder::Ascend.into(),
        sort_target: SortTarget::Create.into(),
        limit: 1,
        ..Default::default()
    };
    let mut raw = raw(&cluster).await;
    let answer = raw.range(first).await;
    let key = answer.kvs[0].key.clone();
    let deleted = Instant::now();
    raw.delete(key).await;
    let bound = ttl / 3 + Duration::from_secs(2);
    tokio::time::timeout(bound, leading.cancel.cancelled())
        .await
        .expect("a's leading context is cancelled within a renewal interval and a read");
    let took = deleted.elapsed();
    println!("deposed {} ms after its key was deleted", took.as_millis());
    assert!(!leading.is_valid());
    assert!(b.await_leadership(Duration::from_secs(5)).await, "b leads");
    a.close().await;
    b.close().await;
}

/// The messages of tenure-etcd-api that the store does not use (yet: a
/// server will) carry etcd's field numbers: read from a real member, every
/// field holds what etcd put there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_messages_read_what_etcd_answers() {
    let cluster = EtcdCluster::start(1);
    let store = store(&cluster);
    let a = candidate(&store, Duration::from_secs(5), "api", "a").await;
    let id = a.session.0 as i64;
    let mut raw = raw(&cluster).await;
    let members = raw.cluster.member_list(MemberListRequest::default()).await.unwrap().into_inner();
    let member = &members.members[0];
    assert_eq!(members.members.len(), 1);
    assert_eq!(member.name, "e1");
    assert_eq!(member.client_ur_ls, cluster.endpoints());
    assert!(member.peer_ur_ls[0].starts_with("http://127.0.0.1:"), "{member:?}");
    assert_eq!(Some(member.id), members.header.map(|h| h.member_id));
    let status = raw.maintenance.status(StatusRequest {}).await.unwrap().into_inner();
    assert!(status.version.starts_with("3."), "{status:?}");
    assert_eq!((status.leader, status.is_learner), (member.id, false));
    assert!(status.db_size > 0 && status.raft_index > 0 && status.raft_term > 0, "{status:?}");
    let ttl = LeaseTimeToLiveRequest { id, keys: true };
    let ttl = raw.lease.lease_time_to_live(ttl).await.unwrap().into_inner();
    assert_eq!((ttl.id, ttl.granted_ttl), (id, 5));
    assert!((1..=5).contains(&ttl.ttl), "{ttl:?}");
    assert_eq!(ttl.keys, [a.key.as_bytes()]);
    let leases = raw.lease.lease_leases(LeaseLeasesRequest {}).await.unwrap().into_inner();
    assert!(leases.leases.iter().any(|l| l.id == id), "{leases:?}");
    store.revoke(a.session).await.unwrap();
}
