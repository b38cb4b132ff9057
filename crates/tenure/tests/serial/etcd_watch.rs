//! etcd's Watch on a cluster of real `tenure server` processes
//! (`--etcd-listen`, TLS with client certificates), driven by the real
//! `etcdctl watch` (Debian's etcd-client 3.4) running in the background:
//! a live watch on one node seeing writes made through another (and
//! through the HTTP API) in order; the same watches (`--prefix`,
//! `--prev-kv`, `--rev` into the past, from a compacted revision) over the
//! same script of puts, deletes and transactions give the same output on a
//! real etcd 3.4 as on tenure.
//!
//! Skipped (with a message) when `etcdctl` or `etcd` is not on PATH; CI
//! installs both (`.ci/run`). python3-etcd3 is not exercised here (not
//! installed on the machines this runs on).

use crate::etcdctl::{channel, errors, installed, tenure_cluster, Endpoint, START_BOUND};
use crate::harness::serial;
use hyper::Method;
use serde_json::Value;
use std::io::{Read, Write};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tenure_testkit::etcd::EtcdCluster;

/// Bound on a watch showing what it should (a busy machine's).
const SEE_BOUND: Duration = Duration::from_secs(15);

impl Endpoint {
    /// The store's revision now.
    fn revision(&self) -> i64 {
        let out = self.ok(&["get", "nosuch-probe", "-w", "json"]);
        let v: Value = serde_json::from_str(&out).expect("etcdctl's JSON");
        // (etcdctl leaves out a revision of 0: tenure's empty store.)
        v["header"]["revision"].as_i64().unwrap_or(0)
    }

    /// `etcdctl watch <args>` in the background.
    fn watch(&self, args: &[String]) -> Watching {
        self.watch_with(args, false)
    }

    /// `etcdctl watch -i` (commands on its stdin: `watch ...`, `progress`).
    fn interactive(&self) -> Watching {
        self.watch_with(&["-i".to_string()], true)
    }

    fn watch_with(&self, args: &[String], interactive: bool) -> Watching {
        let mut full = vec!["watch".to_string()];
        full.extend(args.iter().cloned());
        let mut child = self
            .command(&full)
            .stdin(if interactive { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run etcdctl watch");
        let pump = |mut from: Box<dyn Read + Send>| {
            let into = Arc::new(Mutex::new(Vec::new()));
            let sink = into.clone();
            let thread = std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n @ 1..) = from.read(&mut buf) {
                    sink.lock().unwrap().extend_from_slice(&buf[..n]);
                }
            });
            (into, thread)
        };
        let (out, out_thread) = pump(Box::new(child.stdout.take().unwrap()));
        let (err, err_thread) = pump(Box::new(child.stderr.take().unwrap()));
        let stdin = child.stdin.take();
        Watching { child, args: full, stdin, out, err, threads: vec![out_thread, err_thread] }
    }
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

/// A running `etcdctl watch`; killed when dropped, whatever happened.
struct Watching {
    child: Child,
    args: Vec<String>,
    stdin: Option<std::process::ChildStdin>,
    out: Arc<Mutex<Vec<u8>>>,
    err: Arc<Mutex<Vec<u8>>>,
    threads: Vec<JoinHandle<()>>,
}

impl Watching {
    /// Sends a line to an interactive watch.
    fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("an interactive watch");
        stdin.write_all(format!("{line}\n").as_bytes()).expect("etcdctl's stdin");
    }

    fn output(&self) -> String {
        String::from_utf8_lossy(&self.out.lock().unwrap()).into_owned()
    }

    /// Waits until the output satisfies `done`; panics with it after
    /// [`SEE_BOUND`].
    fn wait_for(&self, what: &str, done: impl Fn(&str) -> bool) -> String {
        let since = Instant::now();
        loop {
            let out = self.output();
            if done(&out) {
                return out;
            }
            assert!(
                since.elapsed() < SEE_BOUND,
                "etcdctl {:?} never showed {what}: {out:?}, stderr {:?}",
                self.args,
                String::from_utf8_lossy(&self.err.lock().unwrap())
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until the process ends by itself (bounded), then its stdout
    /// and `Error` lines.
    fn wait_exit(mut self) -> (String, String) {
        let since = Instant::now();
        while self.child.try_wait().unwrap().is_none() {
            assert!(since.elapsed() < SEE_BOUND, "etcdctl {:?} did not end", self.args);
            std::thread::sleep(Duration::from_millis(20));
        }
        self.finish()
    }

    /// Kills the process: its stdout and `Error` lines.
    fn stop(mut self) -> (String, String) {
        let _ = self.child.kill();
        self.finish()
    }

    fn finish(&mut self) -> (String, String) {
        let _ = self.child.wait();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        (self.output(), errors(&self.err.lock().unwrap()))
    }
}

impl Drop for Watching {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `{N}` in `arg` is revision `base + N`.
fn at(arg: &str, base: i64) -> String {
    match arg.strip_prefix('{').and_then(|a| a.strip_suffix('}')) {
        Some(n) => (base + n.parse::<i64>().unwrap()).to_string(),
        None => arg.to_string(),
    }
}

fn args_at(args: &[&str], base: i64) -> Vec<String> {
    args.iter().map(|a| at(a, base)).collect()
}

/// The writes of the script: etcdctl arguments and stdin. `{N}` after the
/// line is the revision it makes, counted from the store's before it.
fn writes() -> Vec<(Vec<&'static str>, Option<&'static str>)> {
    vec![
        (vec!["put", "a", "1"], None),   // {1}
        (vec!["put", "b", "2"], None),   // {2}
        (vec!["put", "a", "11"], None),  // {3}
        (vec!["put", "d/x", "4"], None), // {4}
        (vec!["del", "b"], None),        // {5}
        // {6}: two puts in one revision.
        (vec!["txn"], Some("\nput x yes\nput d/y 5\n\n\n")),
        (vec!["del", "d/", "--prefix"], None), // {7}: two deletes in one revision
        (vec!["del", "nosuch"], None),         // no revision
        // {8}: a put and a delete in one revision.
        (vec!["txn"], Some("val(\"a\") = \"11\"\n\nput a 111\ndel x\n\nput a no\n\n")),
        (vec!["put", "end", "."], None), // {9}
    ]
}

/// The watches compared, started before the writes (from their first
/// revision, so that when they connect does not matter) and after them.
const WATCHES: &[&[&str]] = &[
    &["--prefix", "", "--rev", "{1}"],
    &["a", "--prev-kv", "--rev", "{1}"],
    &["d/", "--prefix", "--rev", "{1}"],
    &["a", "z", "--rev", "{1}"],
    &["x", "--prev-kv", "--rev", "{1}"],
];

/// Runs the script with watches on `watch` and writes through `write`;
/// returns each watch's output (live, then replayed from the past), then
/// what a watch from a compacted revision shows.
fn run_watch_script(
    watch: &Endpoint,
    write: &Endpoint,
    expected: Option<&[String]>,
) -> Vec<String> {
    let base = write.revision();
    let live: Vec<Watching> = WATCHES.iter().map(|w| watch.watch(&args_at(w, base))).collect();
    for (args, stdin) in writes() {
        let (ok, out, err) = write.run(&strings(&args), stdin);
        assert!(ok, "etcdctl {args:?}: {out}{err}");
    }
    let replayed: Vec<Watching> = WATCHES.iter().map(|w| watch.watch(&args_at(w, base))).collect();
    let mut outputs = Vec::new();
    for (i, w) in live.into_iter().chain(replayed).enumerate() {
        let header = format!("watch {:?}\n", WATCHES[i % WATCHES.len()]);
        // Until the output is as long as etcd's (or, for etcd, shows the
        // last revision's write), then a little more for anything extra.
        match expected {
            Some(e) => {
                let want = e[i].len() - header.len();
                w.wait_for("etcd's output", |o| o.len() >= want);
            }
            None if i == 0 => {
                w.wait_for("the last write", |o| o.contains("end\n.\n"));
            }
            None => {
                w.wait_for("an event", |o| !o.is_empty());
            }
        }
        std::thread::sleep(Duration::from_millis(300));
        let (out, err) = w.stop();
        outputs.push(format!("{header}{out}{err}"));
    }
    // Two watches on one stream (created one after the other), then a
    // progress request once their events are shown: every watch is told
    // the store's revision.
    let mut interactive = watch.interactive();
    interactive.send(&format!("watch d/ --prefix --rev {}", at("{1}", base)));
    interactive.wait_for("the deletes of d/", |o| o.contains("DELETE\nd/y\n"));
    interactive.send(&format!("watch x --rev {}", at("{1}", base)));
    interactive.wait_for("the delete of x", |o| o.contains("DELETE\nx\n"));
    interactive.send("progress");
    interactive
        .wait_for("two progress notifications", |o| o.matches("progress notify").count() == 2);
    std::thread::sleep(Duration::from_millis(300));
    let (out, err) = interactive.stop();
    let out: String = out
        .lines()
        .map(|l| match l.strip_prefix("progress notify: ") {
            Some(n) => format!("progress notify: +{}\n", n.parse::<i64>().unwrap() - base),
            None => format!("{l}\n"),
        })
        .collect();
    outputs.push(format!("watch -i\n{out}{err}"));
    // An empty range: etcd's reason, and etcdctl ends.
    let (out, err) = watch.watch(&strings(&["b", "a"])).wait_exit();
    outputs.push(format!("watch b a\n{out}{err}"));
    // A watch from a compacted revision: etcd's error, and etcdctl ends.
    write.ok(&["compact", &at("{3}", base)]);
    let compacted = watch.watch(&args_at(&["a", "--rev", "{2}"], base));
    let (out, err) = compacted.wait_exit();
    outputs.push(format!("watch a --rev 2 after compact 3\n{out}{err}"));
    outputs
}

/// The same etcdctl watches over the same writes against a real etcd 3.4
/// and against tenure (watches on one node, writes through another): the
/// same output.
#[tokio::test(flavor = "multi_thread")]
async fn etcdctl_watch_sees_the_same_events_on_tenure_as_on_etcd() {
    if !installed("etcdctl", "version") || !installed("etcd", "--version") {
        eprintln!("SKIPPED: etcdctl or etcd is not on PATH (Debian: etcd-client, etcd-server)");
        return;
    }
    let _serial = serial().await;
    let etcd = EtcdCluster::start(1);
    let real = Endpoint { url: etcd.endpoints()[0].clone(), tls: Vec::new() };
    let expected = run_watch_script(&real, &real, None);
    drop(etcd);
    // etcd's output is what the script means: spot-check it.
    assert!(expected[0].contains("PUT\nx\nyes\nPUT\nd/y\n5\nDELETE\nd/x\n\nDELETE\nd/y\n\n"));
    assert!(
        expected.last().unwrap().contains("required revision has been compacted"),
        "{expected:#?}"
    );
    let empty = &expected[expected.len() - 2];
    assert!(empty.contains("mvcc: watcher range is empty"), "{expected:#?}");

    let (c, endpoints) = tenure_cluster();
    let (leader, _, _) = c.wait_leader(&[0, 1, 2], 0, Instant::now(), START_BOUND).await;
    for e in &endpoints {
        e.wait_serving(&c);
    }
    let follower = (leader + 1) % 3;
    let got = run_watch_script(&endpoints[follower], &endpoints[leader], Some(&expected));
    for (want, got) in expected.iter().zip(&got) {
        assert_eq!(got, want, "tenure's watch output differs from etcd's\n{}", c.logs());
    }
    assert_eq!(got.len(), expected.len());
}

/// A live watch (no start revision) on a follower sees, in order, writes
/// made through another node's etcd listener and through the HTTP API;
/// `-w json` shows etcd's event fields and each revision once.
#[tokio::test(flavor = "multi_thread")]
async fn a_live_etcdctl_watch_on_a_follower_sees_every_write_in_order() {
    if !installed("etcdctl", "version") {
        eprintln!("SKIPPED: etcdctl is not on PATH (Debian: etcd-client)");
        return;
    }
    let _serial = serial().await;
    let (c, endpoints) = tenure_cluster();
    let (leader, _, _) = c.wait_leader(&[0, 1, 2], 0, Instant::now(), START_BOUND).await;
    for e in &endpoints {
        e.wait_serving(&c);
    }
    let follower = (leader + 1) % 3;
    let other = (leader + 2) % 3;
    let watch = endpoints[follower].watch(&strings(&["live/", "--prefix", "-w", "json"]));
    // The watch starts after the store's revision when it is created: put
    // a marker until it is seen, then the writes.
    let mut n = 0;
    loop {
        n += 1;
        let marker = format!("ready-{n}");
        endpoints[other].ok(&["put", "live/ready", &marker]);
        std::thread::sleep(Duration::from_millis(200));
        if watch.output().contains(&marker_json(&marker)) {
            break;
        }
        assert!(n < 50, "the watch never saw a write: {:?}", watch.output());
    }
    let last = marker_json(&format!("ready-{n}"));
    let before = endpoints[other].revision();
    endpoints[other].ok(&["put", "live/a", "1"]);
    let (status, body, _) =
        c.request(leader, Method::PUT, "/v1/kv/live/b", Some(("text/plain", "2"))).await.unwrap();
    assert_eq!(status, 200, "{body}");
    endpoints[leader].ok(&["del", "live/a"]);
    endpoints[other].ok(&["put", "live/b", "3", "--lease", "0"]);
    watch.wait_for("the last write", |o| o.contains(&marker_json("3")));
    let (out, _) = watch.stop();
    let after = out.split(&last).nth(1).expect("the marker").to_string();
    let responses: Vec<Value> = after
        .lines()
        .skip(1)
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).expect("etcdctl's JSON"))
        .collect();
    let events: Vec<(i64, String, i64, i64)> = responses
        .iter()
        .flat_map(|r| r["Events"].as_array().cloned().unwrap_or_default())
        .map(|e| {
            let kv = &e["kv"];
            (
                e["type"].as_i64().unwrap_or(0),
                kv["key"].as_str().unwrap_or("").to_string(),
                kv["mod_revision"].as_i64().unwrap(),
                kv["version"].as_i64().unwrap_or(0),
            )
        })
        .collect();
    // Keys are base64 in etcdctl's JSON: "live/a" and "live/b".
    let (a, b) = ("bGl2ZS9h".to_string(), "bGl2ZS9i".to_string());
    assert_eq!(
        events,
        vec![
            (0, a.clone(), before + 1, 1),
            (0, b.clone(), before + 2, 1),
            (1, a, before + 3, 0),
            (0, b, before + 4, 2),
        ],
        "{after}"
    );
    for r in &responses {
        assert!(r["Header"]["revision"].as_i64().unwrap() > before, "{r}");
    }
}

/// How etcdctl's JSON shows `value` (base64).
fn marker_json(value: &str) -> String {
    format!("\"value\":\"{}\"", base64(value.as_bytes()))
}

fn base64(bytes: &[u8]) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                s.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                s.push('=');
            }
        }
    }
    s
}

/// A watch on a follower keeps working when the leader dies: the
/// follower's store keeps applying what the next leader commits, and the
/// stream (opened by etcdctl with `hasleader`) outlives an election shorter
/// than its grace.
#[tokio::test(flavor = "multi_thread")]
async fn an_etcdctl_watch_outlives_the_leaders_death() {
    if !installed("etcdctl", "version") {
        eprintln!("SKIPPED: etcdctl is not on PATH (Debian: etcd-client)");
        return;
    }
    let _serial = serial().await;
    let (mut c, endpoints) = tenure_cluster();
    let (leader, term, _) = c.wait_leader(&[0, 1, 2], 0, Instant::now(), START_BOUND).await;
    for e in &endpoints {
        e.wait_serving(&c);
    }
    let follower = (leader + 1) % 3;
    let other = (leader + 2) % 3;
    let base = endpoints[other].revision();
    let watch = endpoints[follower].watch(&args_at(&["f/", "--prefix", "--rev", "{1}"], base));
    endpoints[other].ok(&["put", "f/1", "before"]);
    watch.wait_for("the write before", |o| o.contains("f/1\nbefore\n"));
    c.crash(leader);
    c.wait_leader(&[follower, other], term, Instant::now(), START_BOUND).await;
    endpoints[other].wait_serving(&c);
    endpoints[other].ok(&["put", "f/2", "after"]);
    let out = watch.wait_for("the write after", |o| o.contains("f/2\nafter\n"));
    assert_eq!(out, "PUT\nf/1\nbefore\nPUT\nf/2\nafter\n");
    let (_, err) = watch.stop();
    assert_eq!(err, "", "the watch ended");
}

/// A client that stops reading (etcdctl stopped with SIGSTOP): its stream
/// waits, and once the store's history has moved past its watch, the watch
/// is cancelled as a compacted one when the client reads again; the events
/// it got before are whole and in order.
#[tokio::test(flavor = "multi_thread")]
async fn a_watch_that_falls_behind_the_history_is_cancelled_as_compacted() {
    if !installed("etcdctl", "version") {
        eprintln!("SKIPPED: etcdctl is not on PATH (Debian: etcd-client)");
        return;
    }
    /// Watched puts of 60,000 bytes: 36 MB, more than the stream's queue,
    /// a round of reading, the HTTP/2 windows and the sockets' buffers hold.
    const BIG: usize = 600;
    let _serial = serial().await;
    let (c, endpoints) = tenure_cluster();
    let (leader, _, _) = c.wait_leader(&[0, 1, 2], 0, Instant::now(), START_BOUND).await;
    for e in &endpoints {
        e.wait_serving(&c);
    }
    let follower = (leader + 1) % 3;
    let base = endpoints[leader].revision();
    let mut watch =
        endpoints[follower].watch(&args_at(&["slow/", "--prefix", "--rev", "{1}"], base));
    endpoints[leader].ok(&["put", "slow/first", "1"]);
    watch.wait_for("the first event", |o| o.contains("slow/first\n"));
    let pid = nix::unistd::Pid::from_raw(watch.child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
    let value = "v".repeat(60_000);
    for n in 0..BIG {
        let path = format!("/v1/kv/slow/{n:04}");
        let (status, body, _) =
            c.request(leader, Method::PUT, &path, Some(("text/plain", &value))).await.unwrap();
        assert_eq!(status, 200, "{body}");
    }
    // Then more changes than the store keeps, which the watch does not
    // follow.
    for t in 0..80 {
        let ops: Vec<Value> = (0..128)
            .map(|n| serde_json::json!({"put": {"key": format!("other/{t}/{n}"), "value": "1"}}))
            .collect();
        let body = serde_json::json!({ "success": ops }).to_string();
        let (status, body, _) = c
            .request(leader, Method::POST, "/v1/txn", Some(("application/json", &body)))
            .await
            .unwrap();
        assert_eq!(status, 200, "{body}");
    }
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).unwrap();
    let since = Instant::now();
    while watch.child.try_wait().unwrap().is_none() {
        assert!(since.elapsed() < Duration::from_secs(60), "the slow watch went on");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (out, err) = watch.finish();
    assert!(
        err.contains("watch was canceled (etcdserver: mvcc: required revision has been compacted)"),
        "{err}"
    );
    // In order from the first, cut before the last.
    let keys: Vec<&str> = out.lines().filter(|l| l.starts_with("slow/")).collect();
    assert_eq!(keys[0], "slow/first");
    let seen = keys.len() - 1;
    eprintln!("the stopped client got {seen} of the {BIG} big puts, then the compaction");
    assert!(seen < BIG, "{seen} of the {BIG} big puts were seen");
    for (n, k) in keys[1..].iter().enumerate() {
        assert_eq!(*k, format!("slow/{n:04}"));
    }
}

/// One step of the raw Watch script: a request on the stream, or a write.
enum Step {
    Watch(tenure_etcd_api::etcdserverpb::watch_request::RequestUnion),
    Put(&'static str, &'static str),
    Delete(&'static str),
    /// Compacts at `base + N`.
    Compact(i64),
}

/// The raw Watch script: what etcdctl cannot ask (client-chosen and
/// duplicate ids, filters, cancels, a progress request) on one stream,
/// with writes in between.
fn raw_script() -> Vec<Step> {
    use tenure_etcd_api::etcdserverpb::watch_create_request::FilterType;
    use tenure_etcd_api::etcdserverpb::watch_request::RequestUnion as R;
    use tenure_etcd_api::etcdserverpb::{
        WatchCancelRequest, WatchCreateRequest, WatchProgressRequest,
    };
    let create = |key: &str, end: &str, id: i64| WatchCreateRequest {
        key: key.as_bytes().to_vec(),
        range_end: end.as_bytes().to_vec(),
        watch_id: id,
        ..Default::default()
    };
    let cancel = |watch_id| Step::Watch(R::CancelRequest(WatchCancelRequest { watch_id }));
    vec![
        Step::Watch(R::CreateRequest(create("g/a", "", 0))),
        Step::Watch(R::CreateRequest(WatchCreateRequest {
            prev_kv: true,
            filters: vec![FilterType::Nodelete as i32],
            ..create("g/", "g0", 7)
        })),
        Step::Watch(R::CreateRequest(create("g/b", "", 7))),
        Step::Watch(R::CreateRequest(create("g/b", "g/a", 0))),
        Step::Put("g/a", "1"),
        Step::Put("g/b", "2"),
        Step::Put("g/a", "3"),
        Step::Delete("g/a"),
        Step::Watch(R::CreateRequest(WatchCreateRequest {
            filters: vec![FilterType::Noput as i32],
            ..create("g/b", "", 0)
        })),
        Step::Put("g/b", "4"),
        Step::Delete("g/b"),
        cancel(0),
        cancel(0),
        cancel(99),
        Step::Watch(R::ProgressRequest(WatchProgressRequest {})),
        // From the past: replayed.
        Step::Watch(R::CreateRequest(WatchCreateRequest {
            start_revision: -1, // replaced by base + 1
            prev_kv: true,
            ..create("g/", "g0", 0)
        })),
        Step::Compact(3),
        Step::Watch(R::CreateRequest(WatchCreateRequest {
            start_revision: -2, // replaced by base + 2
            ..create("g/", "g0", 0)
        })),
    ]
}

/// A key and value as text with its revisions relative to `base`.
fn kv_text(kv: &tenure_etcd_api::mvccpb::KeyValue, base: i64) -> String {
    let rel = |r: i64| if r > 0 { r - base } else { r };
    format!(
        "{}={} c{} m{} v{} l{}",
        String::from_utf8_lossy(&kv.key),
        String::from_utf8_lossy(&kv.value),
        rel(kv.create_revision),
        rel(kv.mod_revision),
        kv.version,
        kv.lease
    )
}

/// An answer as lines, revisions relative to `base`, ids and terms left
/// out; events one line per revision (etcd groups a replay's revisions).
/// `compact_revision` is shown as set or not (tenure's is etcd's + 1:
/// docs/ETCD.md).
fn answer_lines(r: &tenure_etcd_api::etcdserverpb::WatchResponse, base: i64) -> Vec<String> {
    // (A revision of 0, which etcd's compacted answer carries, stays 0.)
    let header =
        r.header.as_ref().map_or(0, |h| if h.revision > 0 { h.revision - base } else { 0 });
    if r.events.is_empty() {
        return vec![format!(
            "watch {} rev {header} created {} canceled {} compacted {} reason {:?} fragment {}",
            r.watch_id,
            r.created,
            r.canceled,
            r.compact_revision > 0,
            r.cancel_reason,
            r.fragment
        )];
    }
    let mut lines: Vec<String> = Vec::new();
    let mut last = 0;
    for e in &r.events {
        let kv = e.kv.as_ref().unwrap();
        let text = format!(
            " {} {}{}",
            if e.r#type == 0 { "PUT" } else { "DELETE" },
            kv_text(kv, base),
            e.prev_kv.as_ref().map_or(String::new(), |p| format!(" prev {}", kv_text(p, base)))
        );
        if kv.mod_revision != last || lines.is_empty() {
            lines.push(format!("watch {} events:", r.watch_id));
            last = kv.mod_revision;
        }
        lines.last_mut().unwrap().push_str(&text);
    }
    lines
}

/// Runs the raw script on one Watch stream to `e`; per step, the answers
/// as lines (sorted by watch id: etcd tells its watches in no set order).
/// With `expected`, a step reads until it has as many lines as etcd's.
async fn run_raw_script(e: &Endpoint, expected: Option<&[Vec<String>]>) -> Vec<Vec<String>> {
    use tenure_etcd_api::etcdserverpb::watch_request::RequestUnion as R;
    use tenure_etcd_api::etcdserverpb::{
        kv_client::KvClient, watch_client::WatchClient, CompactionRequest, DeleteRangeRequest,
        PutRequest, WatchRequest,
    };
    let ch = channel(e).await;
    let mut kv = KvClient::new(ch.clone());
    let base = e.revision();
    let (tx, rx) = tokio::sync::mpsc::channel::<WatchRequest>(16);
    let mut client = WatchClient::new(ch);
    let mut rx = Some(rx);
    // Opened after the first request is queued: etcd sends the stream's
    // headers with its first answer.
    let mut answers = None;
    let mut steps = Vec::new();
    let mut compact_revisions = Vec::new();
    for (i, step) in raw_script().into_iter().enumerate() {
        match step {
            Step::Watch(mut r) => {
                if let R::CreateRequest(c) = &mut r {
                    if c.start_revision < 0 {
                        c.start_revision = base - c.start_revision;
                    }
                }
                tx.send(WatchRequest { request_union: Some(r) }).await.unwrap();
            }
            Step::Put(k, v) => {
                let put = PutRequest { key: k.into(), value: v.into(), ..Default::default() };
                kv.put(put).await.unwrap();
            }
            Step::Delete(k) => {
                kv.delete_range(DeleteRangeRequest { key: k.into(), ..Default::default() })
                    .await
                    .unwrap();
            }
            Step::Compact(n) => {
                let c = CompactionRequest { revision: base + n, physical: false };
                kv.compact(c).await.unwrap();
            }
        }
        if let Some(rx) = rx.take() {
            let stream = tokio_stream::wrappers::ReceiverStream::new(rx);
            answers = Some(client.watch(stream).await.expect("a Watch stream").into_inner());
        }
        let answers = answers.as_mut().unwrap();
        let want = expected.map(|e| e[i].len());
        let mut lines = Vec::new();
        let since = Instant::now();
        loop {
            let quiet = match want {
                Some(n) if lines.len() < n => Duration::from_secs(10),
                _ => Duration::from_millis(300),
            };
            match tokio::time::timeout(quiet, answers.message()).await {
                Ok(Ok(Some(r))) => {
                    if r.compact_revision > 0 {
                        compact_revisions.push(r.compact_revision - base);
                    }
                    lines.extend(answer_lines(&r, base));
                }
                Ok(other) => panic!("the Watch stream ended: {other:?}"),
                Err(_) => break,
            }
            assert!(since.elapsed() < Duration::from_secs(20), "step {i} went on: {lines:?}");
        }
        lines.sort_by_key(|l| l.split(' ').nth(1).unwrap_or("").parse::<i64>().unwrap_or(0));
        steps.push(lines);
    }
    steps.push(vec![format!("compact_revision {compact_revisions:?}")]);
    steps
}

/// What etcdctl cannot ask, asked on one raw gRPC Watch stream of a real
/// etcd 3.4 and of a tenure follower: the same answers, but for
/// `compact_revision` (tenure's is the oldest revision it can replay: the
/// compacted one + 1).
#[tokio::test(flavor = "multi_thread")]
async fn a_raw_watch_stream_gets_the_same_answers_from_tenure_as_from_etcd() {
    if !installed("etcdctl", "version") || !installed("etcd", "--version") {
        eprintln!("SKIPPED: etcdctl or etcd is not on PATH (Debian: etcd-client, etcd-server)");
        return;
    }
    let _serial = serial().await;
    let etcd = EtcdCluster::start(1);
    let real = Endpoint { url: etcd.endpoints()[0].clone(), tls: Vec::new() };
    let mut expected = run_raw_script(&real, None).await;
    drop(etcd);
    assert_eq!(expected.pop().unwrap(), ["compact_revision [3]"]);
    eprintln!("etcd's answers: {expected:#?}");

    let (c, endpoints) = tenure_cluster();
    let (leader, _, _) = c.wait_leader(&[0, 1, 2], 0, Instant::now(), START_BOUND).await;
    for e in &endpoints {
        e.wait_serving(&c);
    }
    let mut got = run_raw_script(&endpoints[(leader + 1) % 3], Some(&expected)).await;
    assert_eq!(got.pop().unwrap(), ["compact_revision [4]"]);
    for (i, (want, got)) in expected.iter().zip(&got).enumerate() {
        assert_eq!(got, want, "step {i}: tenure's answers differ from etcd's\n{}", c.logs());
    }
}
