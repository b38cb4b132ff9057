//! `tenure server --store tenure://… | etcd://… | zk://…`: three servers
//! whose leadership comes from an election of a real store: a three-node
//! tenure cluster (HTTPS, tokens), one etcd member, one ZooKeeper server.
//! Exactly one answers `/v1/is-leader`, all three name the same leader with
//! its HTTP address and token, a follower's `/v1/watch` shows a SIGTERM's
//! handover (fast: a resignation) and a SIGKILL's (about one TTL), a leader
//! paused past its deadline does not claim to lead when it runs again, the
//! endpoints of tenure's own replicated state answer 404 saying why, and
//! bad flag combinations are refused with clear errors. And `tenure elect
//! --store` says when the store grants another TTL than asked for.

mod harness;

use tenure_testkit::{etcd, zookeeper as zk};

use harness::{
    free_ports, https_client, serial, tenure_cert, TestCluster, ADMIN_TOKEN, READ_TOKEN,
};
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::Value;
use std::fs::File;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Fast timings so that tenure's own cluster elects well under a second.
const HEARTBEAT_MS: u64 = 20;
const TIMEOUT_MS: u64 = 200;
/// The store-led servers' session TTL.
const TTL_MS: u64 = 1000;
/// Bound on the first agreement (process start-up on a busy machine included).
const START_BOUND: Duration = Duration::from_secs(15);
/// Bound on a handover after SIGTERM: the resignation, the successor's
/// wake-up and the observers' events (milliseconds on an idle machine).
const RESIGN_HANDOVER_BOUND: Duration = Duration::from_millis(1500);
/// Bound on a handover after SIGKILL: the TTL, the cluster's expiry and the
/// events, with room for a busy machine.
const KILL_HANDOVER_BOUND: Duration = Duration::from_millis(TTL_MS + 2000);
/// Per-request timeout.
const REQUEST_TIMEOUT: Duration = Duration::from_millis(1000);
/// The ids of the store-led servers (the cluster's nodes are 1 to 3).
const IDS: [u64; 3] = [11, 12, 13];

type HttpsClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// Three store-led servers in front of the cluster's election `svc`.
struct StoreServers {
    ports: Vec<u16>,
    children: Vec<Option<Child>>,
    logs: Vec<PathBuf>,
    client: HttpsClient,
}

impl StoreServers {
    /// Starts the servers of the first `n` ids of [`IDS`] with the `store`
    /// flags (certificates and API tokens from `c`).
    fn start(c: &TestCluster, n: usize, store: &[String]) -> StoreServers {
        let certs = c.dir.path().join("certs-store");
        std::fs::create_dir_all(&certs).unwrap();
        for f in ["ca.pem", "ca-key.pem"] {
            std::fs::copy(c.dir.path().join("certs").join(f), certs.join(f)).unwrap();
        }
        let nodes = IDS.map(|i| i.to_string()).join(",");
        tenure_cert(&["--out", certs.to_str().unwrap(), "--nodes", &nodes, "--cluster-id", "test"]);
        let ports = free_ports(n);
        let mut s = StoreServers {
            ports,
            children: Vec::new(),
            logs: Vec::new(),
            client: https_client(&c.ca()),
        };
        for (&id, &port) in IDS.iter().zip(&s.ports) {
            let log = c.dir.path().join(format!("store-{id}.log"));
            let child = store_server(c, &certs, id, port, store)
                .stdout(File::create(&log).unwrap())
                .stderr(File::options().append(true).open(&log).unwrap())
                .spawn()
                .expect("start tenure server --store");
            s.children.push(Some(child));
            s.logs.push(log);
        }
        s
    }

    fn signal(&self, i: usize, sig: Signal) {
        let child = self.children[i].as_ref().expect("running");
        kill(Pid::from_raw(child.id() as i32), sig).unwrap();
    }

    /// Sends `sig` to server `i` and waits for it to exit; whether with status 0.
    fn wait_exit_after(&mut self, i: usize, sig: Signal) -> bool {
        self.signal(i, sig);
        self.wait_exit(i, Duration::from_secs(10))
    }

    /// Waits for server `i` to exit; whether it exited with status 0.
    fn wait_exit(&mut self, i: usize, bound: Duration) -> bool {
        let until = Instant::now() + bound;
        let mut child = self.children[i].take().expect("running");
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status.success();
            }
            assert!(Instant::now() < until, "server {} did not exit\n{}", IDS[i], self.logs());
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn logs(&self) -> String {
        let mut out = String::new();
        for (id, log) in IDS.iter().zip(&self.logs) {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            out.push_str(&format!("--- store server {id} ---\n"));
            for l in &lines[lines.len().saturating_sub(30)..] {
                out.push_str(l);
                out.push('\n');
            }
        }
        out
    }

    /// `method path` on server `i` with `token` (or none).
    async fn send(
        &self,
        i: usize,
        token: Option<&str>,
        method: Method,
        path: &str,
    ) -> Option<hyper::Response<Incoming>> {
        let mut req = Request::builder()
            .method(method)
            .uri(format!("https://127.0.0.1:{}{path}", self.ports[i]));
        if let Some(token) = token {
            req = req.header("authorization", format!("Bearer {token}"));
        }
        let req = req.body(Full::new(Bytes::new())).unwrap();
        tokio::time::timeout(REQUEST_TIMEOUT, self.client.request(req)).await.ok()?.ok()
    }

    /// The status and JSON body of `method path` on server `i` with the
    /// admin token, if it answers.
    async fn call(&self, i: usize, method: Method, path: &str) -> Option<(u16, Value)> {
        self.call_as(i, Some(ADMIN_TOKEN), method, path).await
    }

    /// [`Self::call`] with `token` (or none).
    async fn call_as(
        &self,
        i: usize,
        token: Option<&str>,
        method: Method,
        path: &str,
    ) -> Option<(u16, Value)> {
        let resp = self.send(i, token, method, path).await?;
        let status = resp.status().as_u16();
        let body = tokio::time::timeout(REQUEST_TIMEOUT, resp.into_body().collect()).await.ok()?;
        let bytes = body.ok()?.to_bytes();
        Some((status, serde_json::from_slice(&bytes).unwrap_or(Value::Null)))
    }

    /// Waits until exactly one server answers 200 on `/v1/is-leader` and
    /// every status names it with its address and token: (leader index,
    /// token).
    async fn wait_agreement(&self, among: &[usize], bound: Duration) -> (usize, u64) {
        let since = Instant::now();
        loop {
            let mut leaders = Vec::new();
            let mut views = Vec::new();
            for &i in among {
                if let Some((200, _)) = self.call(i, Method::GET, "/v1/is-leader").await {
                    leaders.push(i);
                }
                views.push(self.call(i, Method::GET, "/v1/status").await.map(|(_, v)| v));
            }
            if let ([l], Some(first)) = (leaders.as_slice(), views[0].as_ref()) {
                let address = format!("127.0.0.1:{}", self.ports[*l]);
                let agreed = views.iter().all(|v| {
                    v.as_ref().is_some_and(|v| {
                        v["leader"] == IDS[*l]
                            && v["leader_address"] == address.as_str()
                            && v["fencing_token"] == first["fencing_token"]
                            && v["term"] == first["fencing_token"]
                    })
                });
                if agreed {
                    return (*l, first["fencing_token"].as_u64().unwrap());
                }
            }
            assert!(
                since.elapsed() < bound,
                "no agreement among {among:?}: leaders {leaders:?}, {views:?}\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

impl Drop for StoreServers {
    fn drop(&mut self) {
        for child in self.children.iter_mut().filter_map(Option::take) {
            let mut child = child;
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The store flags for the tenure cluster `c` (its CA, the admin token).
fn tenure_store(c: &TestCluster) -> Vec<String> {
    let hosts = (0..c.servers.len())
        .map(|i| format!("127.0.0.1:{}", c.servers[i].http_port))
        .collect::<Vec<_>>()
        .join(",");
    let ca = c.ca().to_str().unwrap().to_string();
    let token = c.token_file("admin").to_str().unwrap().to_string();
    let flags = ["--store", &format!("tenure://{hosts}"), "--store-cacert", &ca];
    let mut flags: Vec<String> = flags.iter().map(|f| f.to_string()).collect();
    flags.extend(["--store-token-file".to_string(), token]);
    flags
}

/// `tenure server --store` for id `id` on `port` (its certificate in
/// `certs`, the API tokens of `c`), with the `store` flags.
fn store_server(
    c: &TestCluster,
    certs: &std::path::Path,
    id: u64,
    port: u16,
    store: &[String],
) -> Command {
    let mut command = Command::new(harness::exe());
    command
        .arg("server")
        .arg("--config")
        .arg(&c.config)
        .args(["--id", &id.to_string(), "--http", &format!("127.0.0.1:{port}")])
        .arg("--tls-cert")
        .arg(certs.join(format!("node-{id}.pem")))
        .arg("--tls-key")
        .arg(certs.join(format!("node-{id}-key.pem")))
        .arg("--tls-ca")
        .arg(c.ca())
        .args(["--cluster-id", "test"])
        .args(store)
        .args(["--election", "svc", "--ttl-ms", &TTL_MS.to_string()])
        .env_remove("TENURE_TOKEN")
        .stdin(Stdio::null());
    command
}

/// An open `/v1/watch` stream (read token), read event by event.
struct Watch {
    body: Incoming,
    buffered: String,
}

impl Watch {
    async fn open(s: &StoreServers, i: usize) -> Watch {
        let req = Request::builder()
            .uri(format!("https://127.0.0.1:{}/v1/watch", s.ports[i]))
            .header("authorization", format!("Bearer {READ_TOKEN}"))
            .body(Full::new(Bytes::new()))
            .unwrap();
        let resp = s.client.request(req).await.expect("open /v1/watch");
        assert_eq!(resp.status(), 200);
        Watch { body: resp.into_body(), buffered: String::new() }
    }

    /// The next `leadership` event's data, within `bound`.
    async fn next(&mut self, bound: Duration) -> Value {
        let read = async {
            loop {
                if let Some(end) = self.buffered.find("\n\n") {
                    let event: String = self.buffered.drain(..end + 2).collect();
                    if event.lines().any(|l| l == "event: leadership") {
                        let data = event.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
                        return serde_json::from_str(data).unwrap();
                    }
                    continue;
                }
                let frame = self.body.frame().await.expect("the stream ended").unwrap();
                if let Ok(data) = frame.into_data() {
                    self.buffered.push_str(&String::from_utf8_lossy(&data));
                }
            }
        };
        tokio::time::timeout(bound, read).await.expect("a leadership event in time")
    }

    /// Reads events until one names a leader other than `old` that says it
    /// leads (or, from a follower, names it); its data and the time since
    /// `since`.
    async fn until_leader_other_than(
        &mut self,
        old: u64,
        since: Instant,
        bound: Duration,
    ) -> (Value, Duration) {
        loop {
            let left = bound.saturating_sub(since.elapsed()).max(Duration::from_millis(1));
            let event = self.next(left).await;
            let other = event["leader"].as_u64().is_some_and(|l| l != old);
            if other && event["role"] != "candidate" {
                return (event, since.elapsed());
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_led_servers_agree_hand_over_on_sigterm_and_take_over_after_sigkill() {
    let _serial = serial().await;
    let cluster = TestCluster::start(3, HEARTBEAT_MS, TIMEOUT_MS);
    cluster.wait_agreement(&[0, 1, 2], START_BOUND).await;
    let mut s = StoreServers::start(&cluster, IDS.len(), &tenure_store(&cluster));
    three_servers_agree_and_hand_over(&mut s, "tenure").await;
}

/// The same with etcd as the store (one real member; etcd grants TTLs
/// from 1 s with its 500 ms election timeout, and sweeps expired leases
/// every 500 ms, so a SIGKILL's takeover is up to half a second later than
/// with tenure).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_led_servers_in_etcd_agree_and_hand_over() {
    let _serial = serial().await;
    let etcd = etcd::EtcdCluster::start(1);
    let hosts: Vec<String> =
        etcd.endpoints().iter().map(|e| e.trim_start_matches("http://").to_string()).collect();
    // Not started: its certificates and API tokens serve the store-led servers.
    let certs = TestCluster::new(1, HEARTBEAT_MS, TIMEOUT_MS);
    let store = ["--store".to_string(), format!("etcd://{}", hosts.join(","))];
    let mut s = StoreServers::start(&certs, IDS.len(), &store);
    three_servers_agree_and_hand_over(&mut s, "etcd").await;
}

/// The same with ZooKeeper as the store (one real standalone server, tick
/// 200 ms).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_led_servers_in_zookeeper_agree_and_hand_over() {
    let _serial = serial().await;
    let zk = zk::Ensemble::start(1);
    let certs = TestCluster::new(1, HEARTBEAT_MS, TIMEOUT_MS);
    let store = ["--store".to_string(), format!("zk://{}", zk.servers().join(","))];
    let mut s = StoreServers::start(&certs, IDS.len(), &store);
    three_servers_agree_and_hand_over(&mut s, "zk").await;
}

/// Three servers of `store` (its scheme): one leader that every status
/// names, the API's answers, a handover after SIGTERM and a takeover after
/// SIGKILL, timed on a follower's `/v1/watch`.
async fn three_servers_agree_and_hand_over(s: &mut StoreServers, store: &str) {
    let (leader, token) = s.wait_agreement(&[0, 1, 2], START_BOUND).await;
    let followers: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    println!("store-led leader: server {} with token {token}", IDS[leader]);

    let (code, status) = s.call(followers[0], Method::GET, "/v1/status").await.unwrap();
    assert_eq!(
        (code, status["protocol"].as_str(), status["role"].as_str()),
        (200, Some(format!("store:{store}").as_str()), Some("follower"))
    );
    assert_eq!(status["peers"], Value::Array(Vec::new()));
    assert_eq!(status["storage_failed"], false);
    let (code, body) = s.call(followers[0], Method::GET, "/v1/leader").await.unwrap();
    assert_eq!(
        (code, &body["id"], body["fencing_token"].as_u64()),
        (200, &Value::from(IDS[leader]), Some(token))
    );
    let (_, status) = s.call(leader, Method::GET, "/v1/status").await.unwrap();
    assert_eq!(status["role"], "leader");
    let metrics = s.send(leader, Some(ADMIN_TOKEN), Method::GET, "/metrics").await.unwrap();
    let text = String::from_utf8_lossy(&metrics.into_body().collect().await.unwrap().to_bytes())
        .into_owned();
    assert!(
        text.contains("tenure_is_leader 1") && text.contains("tenure_failover_duration_seconds"),
        "{text}"
    );

    not_served_endpoints_say_why(s, followers[1], store).await;
    the_api_asks_the_same_tokens(s, followers[1], IDS[leader]).await;

    // SIGTERM: the leader resigns, a successor leads at once.
    let mut watch = Watch::open(s, followers[0]).await;
    let first = watch.next(Duration::from_secs(2)).await;
    assert_eq!(first["leader"], IDS[leader], "{first}");
    let t0 = Instant::now();
    s.signal(leader, Signal::SIGTERM);
    let (event, took) = watch.until_leader_other_than(IDS[leader], t0, RESIGN_HANDOVER_BOUND).await;
    println!("{store}: handover after SIGTERM: {took:?} (follower's /v1/watch: {event})");
    assert!(event["fencing_token"].as_u64().unwrap() > token, "{event}");
    assert!(s.wait_exit(leader, Duration::from_secs(10)), "SIGTERM exits 0\n{}", s.logs());
    let (next, token2) = s.wait_agreement(&followers, START_BOUND).await;
    assert_eq!(event["leader"], IDS[next]);

    // SIGKILL: the successor leads once the session expired, about one TTL.
    let last = followers.iter().copied().find(|&i| i != next).unwrap();
    let mut watch = Watch::open(s, last).await;
    assert_eq!(watch.next(Duration::from_secs(2)).await["leader"], IDS[next]);
    let t1 = Instant::now();
    s.signal(next, Signal::SIGKILL);
    let (event, took) = watch.until_leader_other_than(IDS[next], t1, KILL_HANDOVER_BOUND).await;
    println!("{store}: takeover after SIGKILL (TTL {TTL_MS} ms): {took:?} (/v1/watch: {event})");
    assert_eq!(
        (event["leader"].as_u64(), event["role"].as_str()),
        (Some(IDS[last]), Some("leader"))
    );
    assert!(event["fencing_token"].as_u64().unwrap() > token2, "{event}");
    assert!(
        took >= Duration::from_millis(TTL_MS / 2),
        "a killed leader's session lives on: {took:?}"
    );
    assert_eq!(s.call(last, Method::GET, "/v1/is-leader").await.map(|r| r.0), Some(200));
}

/// The endpoints of tenure's own replicated state answer 404 naming the store.
async fn not_served_endpoints_say_why(s: &StoreServers, i: usize, store: &str) {
    for (method, path, shown) in [
        (Method::GET, "/v1/kv/some-key", "/v1/kv/{key}"),
        (Method::POST, "/v1/sessions", "/v1/sessions"),
        (Method::GET, "/v1/elections/svc", "/v1/elections/{name}"),
        (Method::POST, "/v1/transfer", "/v1/transfer"),
    ] {
        let (code, body) = s.call(i, method.clone(), path).await.unwrap();
        let error = body["error"].as_str().unwrap_or_default();
        assert_eq!(code, 404, "{method} {path}: {body}");
        assert!(
            error.contains(&format!("leadership comes from {store}://"))
                && error.contains(&format!(
                    "{shown} is served only by servers of tenure's own cluster"
                )),
            "{method} {path}: {error}"
        );
    }
    let (code, body) = s.call(i, Method::GET, "/v1/nothing").await.unwrap();
    assert_eq!(code, 404);
    assert!(body["error"].as_str().unwrap().contains("no such endpoint"), "{body}");
}

/// The gate of a node: no token 401, a read token is not enough for a
/// write endpoint (403), the probes are open; a follower's 503 names the
/// leader.
async fn the_api_asks_the_same_tokens(s: &StoreServers, i: usize, leader: u64) {
    let (code, _) = s.call_as(i, None, Method::GET, "/v1/status").await.unwrap();
    assert_eq!(code, 401);
    let (code, _) = s.call_as(i, Some(READ_TOKEN), Method::POST, "/v1/transfer").await.unwrap();
    assert_eq!(code, 403);
    let (code, body) = s.call_as(i, None, Method::GET, "/v1/is-leader").await.unwrap();
    assert_eq!((code, body["leader"].as_u64()), (503, Some(leader)), "{body}");
    let (code, _) = s.call_as(i, None, Method::GET, "/healthz").await.unwrap();
    assert_eq!(code, 200);
}

/// A leader paused (SIGSTOP) past its session's deadline is replaced, and
/// once it runs again its first `/v1/is-leader` answer is 503: validity is
/// checked at the request (context and deadline), not read from the last
/// published role.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_paused_past_its_deadline_does_not_claim_to_lead() {
    let _serial = serial().await;
    let cluster = TestCluster::start(3, HEARTBEAT_MS, TIMEOUT_MS);
    cluster.wait_agreement(&[0, 1, 2], START_BOUND).await;
    let mut s = StoreServers::start(&cluster, 2, &tenure_store(&cluster));
    let (leader, token) = s.wait_agreement(&[0, 1], START_BOUND).await;
    let other = 1 - leader;
    s.signal(leader, Signal::SIGSTOP);
    let since = Instant::now();
    let (next, token2) = s.wait_agreement(&[other], KILL_HANDOVER_BOUND).await;
    println!("takeover from a paused leader: {:?}", since.elapsed());
    assert!(next == other && token2 > token, "{token2} after {token}");
    s.signal(leader, Signal::SIGCONT);
    let answer = s.call_as(leader, None, Method::GET, "/v1/is-leader").await;
    assert_ne!(answer.as_ref().map(|a| a.0), Some(200), "the paused leader claims: {answer:?}");
    s.wait_agreement(&[0, 1], START_BOUND).await;
    let (_, status) = s.call(leader, Method::GET, "/v1/status").await.unwrap();
    assert_eq!(
        (&status["leader"], &status["role"]),
        (&Value::from(IDS[other]), &Value::from("follower"))
    );
    assert!(s.wait_exit_after(leader, Signal::SIGTERM), "{}", s.logs());
}

/// A leader whose value is not a store-led server's (another program in the
/// same election): its id is unknown, its token is known, and a warning says
/// so; once it resigns, the store-led server leads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_leader_is_reported_without_an_id() {
    let _serial = serial().await;
    let cluster = TestCluster::start(3, HEARTBEAT_MS, TIMEOUT_MS);
    cluster.wait_agreement(&[0, 1, 2], START_BOUND).await;
    let endpoints = (0..3).map(|i| cluster.endpoint(i)).collect::<Vec<_>>().join(",");
    let (mut elect, line) = elect_first_line(
        Command::new(harness::exe())
            .args(["elect", "svc", "--value", "not json", "--endpoints", &endpoints, "--cacert"])
            .arg(cluster.ca())
            .arg("--token-file")
            .arg(cluster.token_file("admin"))
            .stderr(Stdio::null()),
    );
    let foreign: u64 = line
        .strip_prefix("elected svc: fencing token ")
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("not elected: {line}"));
    let s = StoreServers::start(&cluster, 1, &tenure_store(&cluster));
    let since = Instant::now();
    let status = loop {
        let status = s.call(0, Method::GET, "/v1/status").await;
        if let Some((200, v)) = status.filter(|(_, v)| v["fencing_token"] == foreign) {
            break v;
        }
        assert!(since.elapsed() < START_BOUND, "no status naming token {foreign}\n{}", s.logs());
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!((&status["leader"], status["role"].as_str()), (&Value::Null, Some("follower")));
    assert!(s.logs().contains("is not a store-led server's"), "{}", s.logs());
    kill(Pid::from_raw(elect.id() as i32), Signal::SIGTERM).unwrap();
    assert!(elect.wait().unwrap().success());
    let (leader, token) = s.wait_agreement(&[0], START_BOUND).await;
    assert!(leader == 0 && token > foreign, "{token} after {foreign}");
}

/// `tenure elect --store etcd://` says when it is granted another TTL than
/// asked for, since the TTL is the failover time the user chose: etcd takes
/// whole seconds (1.5 s becomes 2 s) and raises a lease to 1.5 election
/// timeouts (1 s becomes 2 s at etcd's default 1 s timeout). It says
/// nothing when it is granted the TTL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elect_says_when_the_store_grants_another_ttl() {
    let _serial = serial().await;
    // etcd's default election timeout, so its minimum lease TTL is 2 s.
    let etcd = etcd::EtcdCluster::start_with(1, 1000);
    let url = format!("etcd://{}", etcd.endpoints()[0].trim_start_matches("http://"));
    let elect = |ttl_ms: &str| {
        let (child, line) = elect_first_line(
            Command::new(harness::exe())
                .args(["elect", "ttl", "--store", &url, "--ttl-ms", ttl_ms])
                .stderr(Stdio::piped()),
        );
        assert!(line.starts_with("elected ttl: "), "{line}");
        kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
        let done = child.wait_with_output().unwrap();
        assert!(done.status.success(), "{done:?}");
        String::from_utf8_lossy(&done.stderr).into_owned()
    };
    let rounded = elect("1500");
    assert!(rounded.contains("a TTL of 2000 ms, not the 1500 ms asked for"), "{rounded}");
    let raised = elect("1000");
    assert!(raised.contains("a TTL of 2000 ms, not the 1000 ms asked for"), "{raised}");
    let granted = elect("2000");
    assert!(!granted.contains("asked for"), "{granted}");
}

/// Starts `elect` (a `tenure elect` command) with its standard output
/// piped, and returns it with the first line it printed: "elected …" once
/// it leads. The pipe stays open (handed back to the child's handle).
fn elect_first_line(elect: &mut Command) -> (Child, String) {
    let mut child = elect.stdout(Stdio::piped()).spawn().unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    child.stdout = Some(out.into_inner());
    (child, line)
}

#[test]
fn bad_flag_combinations_are_refused_with_clear_errors() {
    let run = |args: &[&str]| {
        let out = Command::new(harness::exe())
            .arg("server")
            .args(args)
            .env_remove("TENURE_TOKEN")
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?} must fail");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let base = [
        "--id",
        "11",
        "--insecure-no-tls",
        "--insecure-open-api",
        "--store",
        "tenure://127.0.0.1:1",
    ];
    let err = run(&[
        &base[..],
        &[
            "--store-token",
            "0123456789abcdef0123",
            "--peers",
            "1=127.0.0.1:7001",
            "--heartbeat-ms",
            "50",
        ],
    ]
    .concat());
    assert!(
        err.contains("no consensus node") && err.contains("remove --peers, --heartbeat-ms"),
        "{err}"
    );
    let err = run(&base);
    assert!(
        err.contains("needs an API token of role write") && err.contains("--store-token-file"),
        "{err}"
    );
    let err = run(&["--id", "11", "--election", "svc"]);
    assert!(err.contains("--store"), "{err}");
    let err =
        run(&[&base[..], &["--store-token", "0123456789abcdef0123", "--ttl-ms", "10"]].concat());
    assert!(err.contains("--ttl-ms"), "{err}");
    let err = run(&[
        "--id",
        "11",
        "--insecure-no-tls",
        "--insecure-open-api",
        "--store",
        "zk://127.0.0.1:2181",
        "--store-token",
        "0123456789abcdef0123",
    ]);
    assert!(err.contains("are for tenure:// stores"), "{err}");
}
