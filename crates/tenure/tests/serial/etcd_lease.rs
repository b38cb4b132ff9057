//! etcd's Lease service on a cluster of real `tenure server` processes
//! (`--etcd-listen`, TLS with client certificates), driven by the real
//! `etcdctl` (Debian's etcd-client 3.4): the lease script's output compared
//! with the same script against a real etcd 3.4, a lease granted through
//! one node kept alive through another, a lease nobody keeps alive expiring
//! with its keys, and etcd's answers to bad input.
//!
//! Skipped (with a message) when `etcdctl` or `etcd` is not on PATH; CI
//! installs both (`.ci/run`). The raw keepalive stream below is what
//! python-etcd3 sends (one request, then a half-close); the client itself
//! runs in `etcd_api.rs` (`python_etcd3_works_through_a_follower`).

use crate::etcdctl::{channel, installed, relative, tenure_cluster, Endpoint, START_BOUND};
use crate::harness::serial;
use hyper::Method;
use serde_json::Value;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};
use tenure_testkit::etcd::EtcdCluster;

impl Endpoint {
    /// `lease grant ttl`: the lease's id in etcdctl's hex.
    fn grant(&self, ttl: &str) -> String {
        let out = self.ok(&["lease", "grant", "--", ttl]);
        out.split_whitespace().nth(1).expect("lease <id> granted ...").to_string()
    }
}

/// The lease script on `e`, whose store's revision before it is `base`:
/// every command's outcome, the lease's id shown as `ID`, the remaining
/// time (which depends on timing) as `remaining(N)`, revisions relative
/// to `base`, header ids and terms left out.
fn run_script(e: &Endpoint, base: i64) -> Vec<String> {
    let id = e.grant("10");
    let mut outputs = vec![format!("granted {}", id.len())];
    let script: Vec<Vec<String>> = [
        "put lk1 v1 --lease=ID",
        "put lk2 v2 --lease=ID",
        "put plain v",
        "lease timetolive ID",
        "lease timetolive ID --keys",
        "lease list",
        "lease keep-alive --once ID",
        "get lk --prefix",
        "get plain -w json",
        "lease revoke ID",
        "get lk --prefix",
        "get plain -w json",
        "lease timetolive ID",
        "lease timetolive ID --keys -w json",
        "lease revoke ID",
        "lease keep-alive --once ID",
        "put lk3 v --lease=ID",
        "lease timetolive 1234abcd",
        "lease revoke 1234abcd",
        "lease grant 9000000001",
        "lease list",
        "get plain -w json",
        // Last: these may expire within a second (etcd's minimum is 1 s
        // with this cluster's election timeout, tenure's always).
        "lease grant -- 0",
        "lease grant -- -1",
    ]
    .iter()
    .map(|line| line.split(' ').map(|w| w.replace("ID", &id)).collect())
    .collect();
    for args in script {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (ok, out, err) = e.run(&args, None);
        let out = match serde_json::from_str::<Value>(&out) {
            Ok(mut v) => {
                relative(&mut v, base, &["id", "ID", "ttl", "TTL"]);
                v.to_string()
            }
            // etcd lists leases in its map's order, tenure by id.
            Err(_) if args[..2] == ["lease", "list"] => {
                let mut lines: Vec<&str> = out.lines().collect();
                lines.sort();
                lines.join("\n")
            }
            Err(_) => out,
        };
        let mut out =
            format!("$ etcdctl {} -> {ok}\n{out}{err}", args.join(" ")).replace(&id, "ID");
        // A new lease's id.
        if let Some(at) = out.find("\nlease ").filter(|_| args[..2] == ["lease", "grant"]) {
            let start = at + "\nlease ".len();
            let end = start + out[start..].find(' ').unwrap();
            out.replace_range(start..end, "NEW");
        }
        // etcd lists a lease's keys in its map's order, tenure in key order.
        if let Some(at) = out.find("attached keys([") {
            let start = at + "attached keys([".len();
            let end = start + out[start..].find(']').unwrap();
            let mut keys: Vec<&str> = out[start..end].split(' ').collect();
            keys.sort();
            out = format!("{}{}{}", &out[..start], keys.join(" "), &out[end..]);
        }
        if let Some(at) = out.find("remaining(") {
            let end = at + out[at..].find(')').unwrap();
            out.replace_range(at..end, "remaining(N");
        }
        outputs.push(out);
    }
    outputs
}

/// The same etcdctl lease script against a real etcd 3.4 and against
/// tenure: the same output (ids and the seconds left masked), revisions
/// counted from each store's start. etcd's minimum TTL with this
/// cluster's 500 ms election timeout is 1 s, tenure's too.
#[tokio::test(flavor = "multi_thread")]
async fn etcdctl_sees_the_same_leases_on_tenure_as_on_etcd() {
    if !installed("etcdctl", "version") || !installed("etcd", "--version") {
        eprintln!("SKIPPED: etcdctl or etcd is not on PATH (Debian: etcd-client, etcd-server)");
        return;
    }
    let _serial = serial().await;
    let etcd = EtcdCluster::start(1);
    let real = Endpoint { url: etcd.endpoints()[0].clone(), tls: Vec::new() };
    let expected = run_script(&real, 1);
    let expected_stream = stream_script(&real).await;
    let unknown = 0x1234abcd.to_string();
    let want: Vec<(String, i64)> =
        [("ID", 7), (unknown.as_str(), 0), ("ID", 7), ("0", 0), ("-5", 0)]
            .into_iter()
            .map(|(id, ttl)| (id.to_string(), ttl))
            .collect();
    assert_eq!(expected_stream, (want, Ok(())), "etcd's own keepalive answers");
    drop(etcd);

    let (c, endpoints) = tenure_cluster();
    endpoints[0].wait_serving(&c);
    let got = run_script(&endpoints[0], 1);
    endpoints[1].wait_serving(&c);
    let got_stream = stream_script(&endpoints[1]).await;
    assert_eq!(got_stream, expected_stream, "tenure's keepalive stream differs from etcd's");
    for (want, got) in expected.iter().zip(&got) {
        assert_eq!(got, want, "tenure's output differs from etcd's\n{}", c.logs());
    }
    assert_eq!(got.len(), expected.len());
}

/// `etcdctl lease keep-alive` in the background until killed.
struct KeepingAlive(Child);

impl Drop for KeepingAlive {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A lease granted through one node, kept alive through another (a
/// follower: its renewals reach the leader's clock), read through the
/// third and the HTTP API as the same tenure session; once nobody keeps
/// it alive it expires and its keys vanish. Then etcd's answers to bad
/// input, and the limits tenure sets apart from etcd's.
#[tokio::test(flavor = "multi_thread")]
async fn a_lease_lives_while_any_node_keeps_it_alive() {
    if !installed("etcdctl", "version") {
        eprintln!("SKIPPED: etcdctl is not on PATH (Debian: etcd-client)");
        return;
    }
    let _serial = serial().await;
    let (mut c, endpoints) = tenure_cluster();
    let (leader, _, _) = c.wait_leader(&[0, 1, 2], 0, Instant::now(), START_BOUND).await;
    for e in &endpoints {
        e.wait_serving(&c);
    }
    let (granter, keeper, reader) = (leader, (leader + 1) % 3, (leader + 2) % 3);

    // Granted through the leader with a TTL of 2 s (no revision spent, as
    // in etcd), a key attached through another node.
    let revision = |e: &Endpoint| e.json(&["get", "nothing"])["header"]["revision"].as_i64();
    let before = revision(&endpoints[granter]);
    let id = endpoints[granter].grant("2");
    let decimal = u64::from_str_radix(&id, 16).unwrap();
    assert_eq!(revision(&endpoints[granter]), before, "the grant spent a revision");
    endpoints[reader].ok(&["put", "held", "yes", &format!("--lease={id}")]);
    // The same lease is tenure's session, with the key.
    let (status, body, _) =
        c.request(leader, Method::GET, &format!("/v1/sessions/{decimal}"), None).await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!((body["ttl_ms"].as_u64(), &body["keys"][0]), (Some(2000), &Value::from("held")));

    // Kept alive through a follower for three TTLs.
    let child = endpoints[keeper]
        .command(&["lease", "keep-alive", &id])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let keeping = KeepingAlive(child);
    std::thread::sleep(Duration::from_secs(6));
    let ttl = endpoints[reader].json(&["lease", "timetolive", &id, "--keys"]);
    assert!(ttl["ttl"].as_i64().unwrap() >= 0, "{ttl}");
    assert_eq!(ttl["granted-ttl"].as_i64(), Some(2), "{ttl}");
    assert_eq!(endpoints[reader].ok(&["get", "held", "--print-value-only"]), "yes\n");
    let once = endpoints[reader].ok(&["lease", "keep-alive", "--once", &id]);
    assert_eq!(once, format!("lease {id} keepalived with TTL(2)\n"));
    // Pipelined through the follower, as clientv3 sends (each request
    // without waiting for an answer; the node has up to 64 under way per
    // stream): one answer per request, in their order.
    let live = decimal as i64;
    let ids: Vec<i64> = (0..200).map(|i| if i % 3 == 2 { 0x1234abcd } else { live }).collect();
    let want: Vec<(i64, i64)> = ids.iter().map(|&i| (i, if i == live { 2 } else { 0 })).collect();
    assert_eq!(keepalive_stream(&endpoints[keeper], &ids, false).await, (want, Ok(())));

    // Nobody keeps it alive: it expires within its TTL (and the leader's
    // expiry proposal), and its key with it.
    drop(keeping);
    let since = Instant::now();
    loop {
        let out = endpoints[reader].ok(&["lease", "timetolive", &id]);
        if out == format!("lease {id} already expired\n") {
            break;
        }
        assert!(since.elapsed() < Duration::from_secs(10), "{out}\n{}", c.logs());
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(endpoints[reader].ok(&["get", "held"]), "");
    let (ok, out, err) = endpoints[keeper].run(&["lease", "keep-alive", "--once", &id], None);
    assert!(!ok && err.contains("etcdserver: requested lease not found"), "{out}{err}");

    // Bad input: etcd's answers, and tenure's own limits.
    let e = &endpoints[keeper];
    let cases: Vec<(&[&str], &str)> = vec![
        (&["lease", "grant", "9000000001"], "etcdserver: too large lease TTL"),
        (&["lease", "grant", "86401"], "etcdserver: too large lease TTL"),
        (&["lease", "revoke", "ffff"], "etcdserver: requested lease not found"),
        (&["lease", "keep-alive", "--once", "ffff"], "etcdserver: requested lease not found"),
    ];
    for (args, want) in cases {
        let (ok, out, err) = e.run(args, None);
        assert!(!ok && err.contains(want), "{args:?}: {out}{err} (wanted {want:?})");
    }
    assert_eq!(e.ok(&["lease", "timetolive", "ffff"]), "lease 000000000000ffff already expired\n");
    let max = e.grant("86400");
    assert_eq!(e.ok(&["lease", "revoke", &max]), format!("lease {max} revoked\n"));
    let min = e.json(&["lease", "grant", "0"]);
    assert_eq!(min["TTL"].as_i64(), Some(1), "{min}");

    // `hasleader: true` on a stream's open: refused with etcd's answer once
    // the node knows no leader (the other two stopped).
    assert_eq!(keepalive_stream(e, &[], true).await, (vec![], Ok(())));
    for i in [granter, reader] {
        c.crash(i);
    }
    let since = Instant::now();
    loop {
        let (_, end) = keepalive_stream(e, &[], true).await;
        if end == Err((tonic::Code::Unavailable, "etcdserver: no leader".to_string())) {
            break;
        }
        assert!(since.elapsed() < Duration::from_secs(10), "{end:?}\n{}", c.logs());
        std::thread::sleep(Duration::from_millis(100));
    }

    // A keepalive stream the client keeps open does not hold up the node's
    // shutdown: it ends with etcd's "server stopped".
    use tenure_etcd_api::etcdserverpb::{lease_client::LeaseClient, LeaseKeepAliveRequest};
    let mut client = LeaseClient::new(channel(e).await);
    let requests = tokio_stream::pending::<LeaseKeepAliveRequest>();
    let mut open = client.lease_keep_alive(requests).await.expect("a stream").into_inner();
    c.signal(keeper, nix::sys::signal::Signal::SIGTERM);
    let exit = c.wait_exit(keeper, Duration::from_secs(10));
    assert!(exit.success(), "{exit:?}\n{}", c.logs());
    let end = tokio::time::timeout(Duration::from_secs(5), open.message()).await.unwrap();
    assert!(matches!(&end, Err(s) if s.message() == "etcdserver: server stopped"), "{end:?}");
}

/// A renewal asked of a node that still knows a leader which does not
/// answer (stopped, with the other follower, before this node's election
/// timeout runs out): the stream ends with etcd's "request timed out", not
/// "no leader", which clientv3 takes as the end of every keepalive of a
/// context that requires a leader.
#[tokio::test(flavor = "multi_thread")]
async fn a_renewal_the_known_leader_does_not_answer_times_out() {
    if !installed("etcdctl", "version") {
        eprintln!("SKIPPED: etcdctl is not on PATH (Debian: etcd-client)");
        return;
    }
    let _serial = serial().await;
    // An election timeout well beyond the 2 s a renewal is retried.
    let (mut c, endpoints) = crate::harness::etcd_cluster_timed(100, 6_000, &[]);
    let endpoints: Vec<Endpoint> =
        endpoints.into_iter().map(|(url, tls)| Endpoint { url, tls }).collect();
    let (leader, _, _) =
        c.wait_leader(&[0, 1, 2], 0, Instant::now(), START_BOUND + Duration::from_secs(6)).await;
    let (asked, other) = ((leader + 1) % 3, (leader + 2) % 3);
    endpoints[asked].wait_serving(&c);
    let id = i64::from_str_radix(&endpoints[asked].grant("60"), 16).unwrap();
    assert_eq!(keepalive_stream(&endpoints[asked], &[id], false).await, (vec![(id, 60)], Ok(())));

    c.signal(leader, nix::sys::signal::Signal::SIGSTOP);
    c.signal(other, nix::sys::signal::Signal::SIGSTOP);
    let since = Instant::now();
    let ended = keepalive_stream(&endpoints[asked], &[id], false).await;
    let waited = since.elapsed();
    c.signal(leader, nix::sys::signal::Signal::SIGCONT);
    c.signal(other, nix::sys::signal::Signal::SIGCONT);
    assert_eq!(
        ended,
        (vec![], Err((tonic::Code::Unavailable, "etcdserver: request timed out".to_string()))),
        "after {waited:?}\n{}",
        c.logs()
    );
    assert!(waited < Duration::from_secs(5), "answered after {waited:?}");
}

/// One LeaseKeepAlive stream as python-etcd3 and clientv3 use it: the
/// requests sent, the stream half-closed, every answer read to the end.
/// Returns (id, TTL) per answer, and how the stream ended.
async fn keepalive_stream(
    e: &Endpoint,
    ids: &[i64],
    has_leader: bool,
) -> (Vec<(i64, i64)>, Result<(), (tonic::Code, String)>) {
    use tenure_etcd_api::etcdserverpb::{lease_client::LeaseClient, LeaseKeepAliveRequest};
    let mut client = LeaseClient::new(channel(e).await);
    let requests: Vec<LeaseKeepAliveRequest> =
        ids.iter().map(|&id| LeaseKeepAliveRequest { id }).collect();
    let mut request = tonic::Request::new(tokio_stream::iter(requests));
    if has_leader {
        request.metadata_mut().insert("hasleader", "true".parse().unwrap());
    }
    let mut answers = Vec::new();
    let mut stream = match client.lease_keep_alive(request).await {
        Ok(s) => s.into_inner(),
        Err(s) => return (answers, Err((s.code(), s.message().to_string()))),
    };
    loop {
        match tokio::time::timeout(Duration::from_secs(10), stream.message()).await {
            Ok(Ok(Some(a))) => answers.push((a.id, a.ttl)),
            Ok(Ok(None)) => return (answers, Ok(())),
            Ok(Err(s)) => return (answers, Err((s.code(), s.message().to_string()))),
            Err(_) => {
                panic!("the keepalive stream neither answered nor ended in 10 s: {answers:?}")
            }
        }
    }
}

/// A keepalive stream of a live lease, an unknown one, the live one again
/// and two ids that cannot be leases, half-closed after the last: one
/// answer per request, in order (the granted TTL; 0 for the others), then
/// a clean end; the live lease is revoked after. Ids masked as in the script.
async fn stream_script(e: &Endpoint) -> (Vec<(String, i64)>, Result<(), (tonic::Code, String)>) {
    let hex = e.grant("7");
    let id = i64::from_str_radix(&hex, 16).unwrap();
    let (answers, end) = keepalive_stream(e, &[id, 0x1234abcd, id, 0, -5], true).await;
    e.ok(&["lease", "revoke", &hex]);
    let masked = answers
        .into_iter()
        .map(|(got, ttl)| (if got == id { "ID".to_string() } else { got.to_string() }, ttl))
        .collect();
    (masked, end)
}
