//! etcd's Election and Lock gRPC services on a cluster of real `tenure
//! server` processes (`--etcd-listen`, TLS with client certificates),
//! driven by the generated tonic clients of `tenure-etcd-api` (what jetcd
//! sends): one script against a real etcd 3.4 and against tenure with the
//! same outcomes; campaigners and lockers on different nodes; a campaign
//! waiting on a follower while the leader node is killed.
//!
//! The script's comparison is skipped (with a message) when `etcd` is not
//! on PATH; CI installs it (`.ci/run`). Every process a test starts is
//! stopped when the test ends, also when it fails (the harness's
//! clusters kill their children when dropped).

use crate::etcdctl::installed;
use crate::harness::{serial, TestCluster};
use std::ffi::OsString;
use std::time::{Duration, Instant};
use tenure_etcd_api::etcdserverpb::kv_client::KvClient;
use tenure_etcd_api::etcdserverpb::lease_client::LeaseClient;
use tenure_etcd_api::etcdserverpb::{
    LeaseGrantRequest, LeaseRevokeRequest, PutRequest, RangeRequest, ResponseHeader,
};
use tenure_etcd_api::v3electionpb::election_client::ElectionClient;
use tenure_etcd_api::v3electionpb::{
    CampaignRequest, LeaderKey, LeaderRequest, LeaderResponse, ProclaimRequest, ResignRequest,
};
use tenure_etcd_api::v3lockpb::lock_client::LockClient;
use tenure_etcd_api::v3lockpb::{LockRequest, UnlockRequest};
use tenure_testkit::etcd::EtcdCluster;
use tonic::transport::Channel;

/// Bound on a first election and the etcd listeners' start on a busy machine.
const START_BOUND: Duration = Duration::from_secs(15);

/// How long a call that must wait is watched before it counts as waiting.
const STILL_WAITING: Duration = Duration::from_millis(700);

/// The clients of one endpoint.
#[derive(Clone)]
struct Etcd {
    kv: KvClient<Channel>,
    lease: LeaseClient<Channel>,
    election: ElectionClient<Channel>,
    lock: LockClient<Channel>,
}

impl Etcd {
    async fn connect(url: &str, tls: &[OsString]) -> Etcd {
        let channel = crate::harness::etcd_channel(url, tls).await;
        Etcd {
            kv: KvClient::new(channel.clone()),
            lease: LeaseClient::new(channel.clone()),
            election: ElectionClient::new(channel.clone()),
            lock: LockClient::new(channel),
        }
    }

    /// A lease of `ttl` seconds (nobody keeps it alive).
    async fn grant(&self, ttl: i64) -> i64 {
        let r = LeaseGrantRequest { ttl, id: 0 };
        self.lease.clone().lease_grant(r).await.expect("a lease").into_inner().id
    }

    async fn revoke(&self, id: i64) {
        self.lease.clone().lease_revoke(LeaseRevokeRequest { id }).await.expect("revoked");
    }

    /// The store's revision now (a linearizable read).
    async fn revision(&self) -> i64 {
        let r = RangeRequest { key: b"nothing".to_vec(), ..Default::default() };
        self.kv.clone().range(r).await.expect("a read").into_inner().header.unwrap().revision
    }

    /// The create revision of `key` now, if it exists.
    async fn created(&self, key: &[u8]) -> Option<i64> {
        let r = RangeRequest { key: key.to_vec(), ..Default::default() };
        let kvs = self.kv.clone().range(r).await.expect("a read").into_inner().kvs;
        kvs.first().map(|kv| kv.create_revision)
    }

    async fn campaign(&self, name: &str, lease: i64, value: &str) -> Result<LeaderKey, Failure> {
        let r = CampaignRequest { name: name.into(), lease, value: value.into() };
        let answer = self.election.clone().campaign(r).await.map_err(failure)?.into_inner();
        Ok(answer.leader.expect("a leader key"))
    }

    async fn leader(&self, name: &str) -> Result<LeaderResponse, Failure> {
        let r = LeaderRequest { name: name.into() };
        self.election.clone().leader(r).await.map(|a| a.into_inner()).map_err(failure)
    }

    async fn proclaim(&self, leader: Option<&LeaderKey>, value: &str) -> Result<i64, Failure> {
        let r = ProclaimRequest { leader: leader.cloned(), value: value.into() };
        let answer = self.election.clone().proclaim(r).await.map_err(failure)?.into_inner();
        Ok(revision(answer.header))
    }

    async fn resign(&self, leader: &LeaderKey) -> Result<i64, Failure> {
        let r = ResignRequest { leader: Some(leader.clone()) };
        let answer = self.election.clone().resign(r).await.map_err(failure)?.into_inner();
        Ok(revision(answer.header))
    }

    async fn lock(&self, name: &str, lease: i64) -> Result<Vec<u8>, Failure> {
        let r = LockRequest { name: name.into(), lease };
        Ok(self.lock.clone().lock(r).await.map_err(failure)?.into_inner().key)
    }

    async fn unlock(&self, key: &[u8]) -> Result<i64, Failure> {
        let r = UnlockRequest { key: key.to_vec() };
        let answer = self.lock.clone().unlock(r).await.map_err(failure)?.into_inner();
        Ok(revision(answer.header))
    }

    /// Waits until a linearizable read works (a leader is known).
    async fn wait_serving(&self, c: &TestCluster) {
        let since = Instant::now();
        loop {
            let r = RangeRequest { key: b"health".to_vec(), ..Default::default() };
            if self.kv.clone().range(r).await.is_ok() {
                return;
            }
            assert!(since.elapsed() < START_BOUND, "no etcd listener served a read\n{}", c.logs());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// A failed call: its gRPC code and message.
type Failure = (tonic::Code, String);

fn failure(s: tonic::Status) -> Failure {
    (s.code(), s.message().to_string())
}

fn revision(header: Option<ResponseHeader>) -> i64 {
    header.expect("a header").revision
}

/// The three tenure endpoints of a fresh cluster, once each serves.
async fn tenure_cluster() -> (TestCluster, Vec<Etcd>) {
    let (c, endpoints) = crate::harness::etcd_cluster();
    let mut clients = Vec::new();
    for (url, tls) in &endpoints {
        // The listener is up once it accepts a connection.
        let address = url.trim_start_matches("https://");
        let since = Instant::now();
        while std::net::TcpStream::connect(address).is_err() {
            assert!(since.elapsed() < START_BOUND, "{url} never listened\n{}", c.logs());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let e = Etcd::connect(url, tls).await;
        e.wait_serving(&c).await;
        clients.push(e);
    }
    (c, clients)
}

/// Whether `call` is still running after [`STILL_WAITING`].
async fn waits<T>(call: &tokio::task::JoinHandle<T>) -> bool {
    tokio::time::sleep(STILL_WAITING).await;
    !call.is_finished()
}

/// The outcome of the script's steps, with lease ids shown as the names
/// the script gives them and revisions counted from `base`.
struct Transcript {
    lines: Vec<String>,
    base: i64,
    leases: Vec<(i64, &'static str)>,
}

impl Transcript {
    /// `text` with the lease ids in keys (`name/<hex>`) shown as names.
    fn mask(&self, text: String) -> String {
        let mut text = text;
        for (id, name) in &self.leases {
            for end in [" ", ";", "\n"] {
                text = text.replace(&format!("/{id:x}{end}"), &format!("/{name}{end}"));
            }
            if text.ends_with(&format!("/{id:x}")) {
                text = format!("{}/{name}", &text[..text.len() - format!("/{id:x}").len()]);
            }
        }
        text
    }

    /// A lease id as the script names it.
    fn lease(&self, id: i64) -> String {
        let named = self.leases.iter().find(|(l, _)| *l == id);
        named.map_or_else(|| id.to_string(), |(_, name)| name.to_string())
    }

    fn key(&self, k: &LeaderKey) -> String {
        let key = String::from_utf8_lossy(&k.key).into_owned();
        let name = String::from_utf8_lossy(&k.name).into_owned();
        let lease = self.lease(k.lease);
        self.mask(format!("name={name} key={key} rev={} lease={lease}", k.rev - self.base))
    }

    fn kv(&self, r: &LeaderResponse) -> String {
        let kv = r.kv.as_ref().expect("a kv");
        self.mask(format!(
            "key={} value={} create={} mod={} version={} lease={} header={}",
            String::from_utf8_lossy(&kv.key),
            String::from_utf8_lossy(&kv.value),
            kv.create_revision - self.base,
            kv.mod_revision - self.base,
            kv.version,
            self.lease(kv.lease),
            revision(r.header) - self.base,
        ))
    }

    fn say(&mut self, step: &str, outcome: String) {
        let line = self.mask(format!("{step}: {outcome}"));
        eprintln!("{line}");
        self.lines.push(line);
    }

    fn result<T>(&mut self, step: &str, r: Result<T, Failure>, show: impl Fn(&Self, T) -> String) {
        let outcome = match r {
            Ok(v) => format!("ok {}", show(self, v)),
            Err((code, message)) => format!("error {code:?} {message:?}"),
        };
        self.say(step, outcome);
    }
}

/// The script: campaigns in order, leader, proclaim, re-campaign with the
/// same lease, resign, observe, lock and unlock, and etcd's errors.
async fn script(e: &Etcd) -> Vec<String> {
    let (a, b) = (e.grant(60).await, e.grant(60).await);
    let put = PutRequest { key: b"base".to_vec(), ..Default::default() };
    let base = e.kv.clone().put(put).await.unwrap().into_inner().header.unwrap().revision;
    let mut t = Transcript { lines: Vec::new(), base, leases: vec![(a, "A"), (b, "B")] };

    t.result("leader of an empty election", e.leader("e").await, |t, r| t.kv(&r));
    let first = e.campaign("e", a, "a1").await;
    t.result("A campaigns", first.clone(), |t, k| t.key(&k));
    let first = first.expect("A leads");
    t.result("leader", e.leader("e").await, |t, r| t.kv(&r));
    let second = tokio::spawn({
        let e = e.clone();
        async move { e.campaign("e", b, "b1").await }
    });
    t.say("B campaigns and waits", waits(&second).await.to_string());
    let header = |t: &Transcript, r: i64| format!("header={}", r - t.base);
    t.result("A proclaims a2", e.proclaim(Some(&first), "a2").await, header);
    t.result("leader", e.leader("e").await, |t, r| t.kv(&r));
    let wrong = LeaderKey { rev: first.rev + 100, ..first.clone() };
    t.result("proclaim with a wrong rev", e.proclaim(Some(&wrong), "x").await, header);
    t.result("proclaim without a leader", e.proclaim(None, "x").await, header);
    let again = e.campaign("e", a, "a3").await;
    t.result("A campaigns again with a3", again, |t, k| t.key(&k));
    t.result("leader", e.leader("e").await, |t, r| t.kv(&r));
    t.result("resign with a wrong rev", e.resign(&wrong).await, header);
    t.result("leader", e.leader("e").await, |t, r| t.kv(&r));
    t.say("B still waits", (!second.is_finished()).to_string());
    t.result("A resigns", e.resign(&first).await, header);
    let won = tokio::time::timeout(Duration::from_secs(10), second).await;
    let won = won.expect("B's campaign ends").unwrap();
    t.result("B's campaign", won.clone(), |t, k| t.key(&k));
    t.result("leader", e.leader("e").await, |t, r| t.kv(&r));
    t.result("A proclaims after resigning", e.proclaim(Some(&first), "x").await, header);
    t.result("A resigns again", e.resign(&first).await, header);
    let unknown = 0x1234abcd;
    t.result("campaign with an unknown lease", e.campaign("e", unknown, "u").await, |t, k| {
        t.key(&k)
    });
    t.result("B resigns", e.resign(&won.expect("B leads")).await, header);
    t.result("leader", e.leader("e").await, |t, r| t.kv(&r));

    // Observe: the leader at every change, in order (etcd answers the
    // call only with its first leader: it runs in a task of its own).
    let observer = tokio::spawn({
        let mut election = e.election.clone();
        async move {
            let request = LeaderRequest { name: b"o".to_vec() };
            let mut stream = election.observe(request).await.map_err(failure)?.into_inner();
            let mut seen = Vec::new();
            while seen.len() < 3 {
                match stream.message().await.map_err(failure)? {
                    Some(answer) => seen.push(answer),
                    None => break,
                }
            }
            Ok::<_, Failure>(seen)
        }
    });
    tokio::time::sleep(STILL_WAITING).await;
    let o1 = e.campaign("o", a, "o1").await.expect("A leads o");
    e.proclaim(Some(&o1), "o2").await.expect("A proclaims");
    let next = tokio::spawn({
        let e = e.clone();
        async move { e.campaign("o", b, "o3").await }
    });
    assert!(waits(&next).await, "B waits behind A");
    e.resign(&o1).await.expect("A resigns o");
    let o3 = next.await.unwrap().expect("B leads o");
    let seen = tokio::time::timeout(Duration::from_secs(10), observer).await;
    let seen = seen.expect("three leaders observed").unwrap();
    t.result("observed", seen, |t, seen| {
        seen.iter().map(|r| t.kv(r)).collect::<Vec<_>>().join("; ")
    });
    e.resign(&o3).await.expect("B resigns o");

    // Lock: the first locker holds it, the second waits until Unlock.
    let held = e.lock("l", a).await;
    t.result("A locks", held.clone(), |t, k| t.mask(String::from_utf8_lossy(&k).into_owned()));
    let held = held.expect("A holds l");
    let created = |t: &Transcript, k: Option<i64>| format!("{:?}", k.map(|r| r - t.base));
    t.say("A's key created at", created(&t, e.created(&held).await));
    let waiting = tokio::spawn({
        let e = e.clone();
        async move { e.lock("l", b).await }
    });
    t.say("B locks and waits", waits(&waiting).await.to_string());
    let relock = e.lock("l", a).await;
    t.result("A locks again", relock, |t, k| t.mask(String::from_utf8_lossy(&k).into_owned()));
    t.result("A unlocks", e.unlock(&held).await, header);
    let got = tokio::time::timeout(Duration::from_secs(10), waiting).await;
    let got = got.expect("B's lock ends").unwrap();
    t.result("B's lock", got.clone(), |t, k| t.mask(String::from_utf8_lossy(&k).into_owned()));
    let got = got.expect("B holds l");
    t.say("B's key created at", created(&t, e.created(&got).await));
    t.result("B unlocks", e.unlock(&got).await, header);
    t.result("unlock of a key that is gone", e.unlock(&got).await, header);
    t.result("unlock of no key", e.unlock(b"").await, header);
    t.result("lock with an unknown lease", e.lock("l", unknown).await, |t, k| {
        t.mask(String::from_utf8_lossy(&k).into_owned())
    });
    e.revoke(a).await;
    e.revoke(b).await;
    t.lines
}

/// The same script against a real etcd 3.4 and against tenure: the same
/// outcomes (campaign order, leader, proclaim, resign, observe, lock,
/// unlock, errors), lease ids masked, revisions counted from the script's
/// start.
#[tokio::test(flavor = "multi_thread")]
async fn the_election_and_lock_script_gives_what_etcd_gives() {
    if !installed("etcd", "--version") {
        eprintln!("SKIPPED: etcd is not on PATH (Debian: etcd-server)");
        return;
    }
    let _serial = serial().await;
    let etcd = EtcdCluster::start(1);
    let real = Etcd::connect(&etcd.endpoints()[0], &[]).await;
    let expected = script(&real).await;
    drop(etcd);

    let (c, clients) = tenure_cluster().await;
    let got = script(&clients[1]).await;
    for (want, got) in expected.iter().zip(&got) {
        assert_eq!(
            got,
            want,
            "tenure differs from etcd\netcd:\n{}\n{}",
            expected.join("\n"),
            c.logs()
        );
    }
    assert_eq!(got.len(), expected.len());
}

/// Two campaigners on two nodes: the second wins only once the first
/// resigns, or once its lease is revoked, with a higher rev; a campaigner
/// whose client gives up is withdrawn.
#[tokio::test(flavor = "multi_thread")]
async fn a_second_campaigner_on_another_node_wins_only_after_the_first_goes() {
    let _serial = serial().await;
    let (c, e) = tenure_cluster().await;
    for (round, by_revoking) in [("resign", false), ("revoke", true)] {
        let (a, b) = (e[0].grant(60).await, e[1].grant(60).await);
        let first = e[0].campaign(round, a, "first").await.expect("the first leads");
        let second = tokio::spawn({
            let e = e[1].clone();
            async move { e.campaign(round, b, "second").await }
        });
        assert!(waits(&second).await, "{round}: the second won while the first led");
        let leader = e[2].leader(round).await.expect("a leader");
        assert_eq!(leader.kv.unwrap().key, first.key, "{round}");
        assert!(!second.is_finished(), "{round}");
        match by_revoking {
            false => drop(e[0].resign(&first).await.expect("resigned")),
            true => e[2].revoke(a).await,
        }
        let won = tokio::time::timeout(Duration::from_secs(10), second).await;
        let won = won.expect("the second wins").unwrap().expect("the second leads");
        assert!(won.rev > first.rev, "{round}: {won:?} after {first:?}");
        let leader = e[0].leader(round).await.expect("a leader");
        assert_eq!(leader.kv.unwrap().value, b"second", "{round}");
        e[1].revoke(b).await;
    }

    // A campaigner whose client gives up (its deadline) is withdrawn: its
    // key is deleted, as etcd does when the campaign's context ends.
    let (a, b) = (e[0].grant(60).await, e[2].grant(60).await);
    e[0].campaign("gives-up", a, "first").await.expect("the first leads");
    let mut request = tonic::Request::new(CampaignRequest {
        name: b"gives-up".to_vec(),
        lease: b,
        value: b"second".to_vec(),
    });
    request.set_timeout(Duration::from_millis(500));
    let ended = e[2].election.clone().campaign(request).await;
    assert!(ended.is_err(), "{ended:?}");
    let key = format!("gives-up/{b:x}");
    let since = Instant::now();
    while e[1].created(key.as_bytes()).await.is_some() {
        assert!(since.elapsed() < Duration::from_secs(10), "{key} stayed\n{}", c.logs());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // A lease revoked while its campaign waits ends the wait at once.
    let waiting = tokio::spawn({
        let e = e[2].clone();
        async move { e.campaign("gives-up", b, "again").await }
    });
    assert!(waits(&waiting).await);
    e[1].revoke(b).await;
    let ended = tokio::time::timeout(Duration::from_secs(10), waiting).await;
    let ended = ended.expect("the wait ends").unwrap();
    assert_eq!(
        ended.unwrap_err(),
        (tonic::Code::Unknown, "etcdserver: requested lease not found".to_string())
    );
}

/// One hold of the lock: when it began and ended (as the holder saw it)
/// and its fencing token (the key's create revision).
#[derive(Debug)]
struct Hold {
    start: Instant,
    end: Instant,
    token: i64,
}

/// A lock contended by three clients on three nodes is never held twice
/// at once, and its fencing tokens rise from one hold to the next.
#[tokio::test(flavor = "multi_thread")]
async fn a_lock_contended_on_three_nodes_is_never_held_twice() {
    let _serial = serial().await;
    let (c, e) = tenure_cluster().await;
    let mut lockers = Vec::new();
    for node in &e {
        let node = node.clone();
        lockers.push(tokio::spawn(async move {
            let lease = node.grant(60).await;
            let mut holds = Vec::new();
            for _ in 0..6 {
                let key = node.lock("contended", lease).await.expect("the lock");
                let start = Instant::now();
                let token = node.created(&key).await.expect("the key stands while held");
                tokio::time::sleep(Duration::from_millis(30)).await;
                let end = Instant::now();
                node.unlock(&key).await.expect("unlocked");
                holds.push(Hold { start, end, token });
            }
            holds
        }));
    }
    let mut holds = Vec::new();
    for locker in lockers {
        let done = tokio::time::timeout(Duration::from_secs(60), locker).await;
        holds.extend(done.unwrap_or_else(|_| panic!("a locker got stuck\n{}", c.logs())).unwrap());
    }
    holds.sort_by_key(|h| h.start);
    assert_eq!(holds.len(), 18);
    for pair in holds.windows(2) {
        assert!(pair[0].end <= pair[1].start, "two holds overlap: {pair:?}");
        assert!(pair[0].token < pair[1].token, "the tokens did not rise: {pair:?}");
    }
}

/// A campaign waiting on a follower while the leader node is killed with
/// SIGKILL completes once the next leader expires the first candidate's
/// lease, with a higher rev.
#[tokio::test(flavor = "multi_thread")]
async fn a_campaign_waiting_on_a_follower_completes_after_the_leader_node_dies() {
    let _serial = serial().await;
    let (mut c, e) = tenure_cluster().await;
    let (leader, _, _) = c.wait_leader(&[0, 1, 2], 0, Instant::now(), START_BOUND).await;
    let follower = (leader + 1) % 3;
    let f = &e[follower];
    // The first candidate's lease is not kept alive: it ends 3 s after the
    // next leader takes office (a failover gives every lease a full TTL).
    let (a, b) = (f.grant(3).await, f.grant(60).await);
    let first = f.campaign("failover", a, "first").await.expect("the first leads");
    let second = tokio::spawn({
        let f = f.clone();
        async move { f.campaign("failover", b, "second").await }
    });
    assert!(waits(&second).await, "the second won while the first led");
    let killed = Instant::now();
    c.crash(leader);
    let won = tokio::time::timeout(Duration::from_secs(30), second).await;
    let won = won.unwrap_or_else(|_| panic!("the campaign never completed\n{}", c.logs()));
    let won = won.unwrap().expect("the second leads");
    assert!(won.rev > first.rev, "{won:?} after {first:?}");
    let leader = f.leader("failover").await.expect("a leader");
    assert_eq!(leader.kv.unwrap().key, won.key);
    eprintln!("the waiting campaign completed {:?} after the kill", killed.elapsed());
    assert!(f.revision().await >= won.rev);
}
