//! Go's etcd client, unchanged, against a tenure cluster: the
//! `clientv3/concurrency` recipes (`Session`, `Election`, `Mutex`) of
//! Debian's golang-etcd-server-dev (etcd 3.4), built offline from
//! `tests/go/recipes/main.go`. Two clients on different nodes take turns
//! holding an election, then a lock, while the tenure leader is killed
//! with SIGKILL: every round completes, no two holds overlap, and the
//! fencing revisions rise with time. Two clients increment one counter in
//! `STM` transactions on two nodes: no increment lost or counted twice.
//!
//! Skipped (with a message) without `go` and the Debian package; CI
//! installs them (`.ci/run`) and sets `TENURE_GO_REQUIRE=1`, which makes a
//! skip a failure.

use crate::harness::{etcd_cluster, serial, TestCluster};
use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Where Debian's golang-etcd-server-dev puts the client's sources.
const GOPATH: &str = "/usr/share/gocode";

/// Bound on a first election and the etcd listeners' start on a busy machine.
const START_BOUND: Duration = Duration::from_secs(15);

/// Bound on a client's whole run (its rounds, a failover among them).
const RUN_BOUND: Duration = Duration::from_secs(90);

/// Holds per client, and how long each lasts.
const ROUNDS: u32 = 4;
const HOLD_MS: u32 = 250;

/// The built client, or `None` (after saying why) when Go or the etcd
/// sources are missing and the test may be skipped.
fn build_client() -> Option<PathBuf> {
    let go = Command::new("go").arg("version").output().is_ok_and(|o| o.status.success());
    let sources = Path::new(GOPATH).join("src/go.etcd.io/etcd/clientv3/concurrency").is_dir();
    if !go || !sources {
        let why =
            "SKIPPED: needs `go` and Go's etcd client (Debian: golang-go golang-etcd-server-dev)";
        assert!(std::env::var_os("TENURE_GO_REQUIRE").is_none(), "{why}; TENURE_GO_REQUIRE is set");
        eprintln!("{why}");
        return None;
    }
    // Built from a copy outside the repository (GOPATH mode compiles the
    // directory it is given); the build cache is kept between runs.
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let src = tmp.join("go-recipes");
    std::fs::create_dir_all(&src).unwrap();
    let main = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/go/recipes/main.go");
    std::fs::copy(main, src.join("main.go")).unwrap();
    let exe = src.join("recipes");
    let out = Command::new("go")
        .args(["build", "-o"])
        .arg(&exe)
        .arg(".")
        .current_dir(&src)
        .env("GO111MODULE", "off")
        .env("GOPROXY", "off")
        .env("GOFLAGS", "")
        .env("GOPATH", GOPATH)
        .env("GOCACHE", tmp.join("go-cache"))
        .output()
        .expect("run go build");
    assert!(
        out.status.success(),
        "go build failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Some(exe)
}

/// One hold a client reported.
#[derive(Clone, Copy, Debug)]
struct Hold {
    client: usize,
    start_ns: u128,
    end_ns: u128,
    revision: i64,
}

/// A running client; killed if the test ends first.
struct Client {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the client in `mode` on `name`, talking to `endpoints` (the first
/// is the one it tries first) with the certificate files in `tls`.
fn start(exe: &Path, mode: &str, name: &str, endpoints: &[String], tls: &[OsString]) -> Client {
    start_rounds(exe, mode, name, ROUNDS, endpoints, tls)
}

/// [`start`] with `rounds` rounds.
fn start_rounds(
    exe: &Path,
    mode: &str,
    name: &str,
    rounds: u32,
    endpoints: &[String],
    tls: &[OsString],
) -> Client {
    // etcd_cluster's TLS arguments: --cacert CA --cert CERT --key KEY.
    let file = |flag: &str| {
        let at = tls.iter().position(|a| a == flag).expect("the flag is given");
        tls[at + 1].clone()
    };
    let mut child = Command::new(exe)
        .args([mode, name, &rounds.to_string(), &HOLD_MS.to_string(), &endpoints.join(",")])
        .args([file("--cacert"), file("--cert"), file("--key")])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the Go client");
    let (tx, lines) = mpsc::channel();
    let out = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    Client { child, lines }
}

/// Runs two clients of `mode` against the cluster, the first on one
/// follower, the second on the other; SIGKILLs the leader once the first
/// hold was reported. Returns every hold.
fn two_clients_through_a_kill(
    c: &mut TestCluster,
    exe: &Path,
    endpoints: &[(String, Vec<OsString>)],
    mode: &str,
    leader: usize,
) -> Vec<Hold> {
    let name = format!("/go-{mode}");
    let followers: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    let mut clients: Vec<Client> = followers
        .iter()
        .map(|&first| {
            let order: Vec<String> = (0..3).map(|k| endpoints[(first + k) % 3].0.clone()).collect();
            start(exe, mode, &name, &order, &endpoints[first].1)
        })
        .collect();
    let mut holds = Vec::new();
    let mut output = vec![String::new(), String::new()];
    let mut done = [false, false];
    let mut killed = false;
    let since = Instant::now();
    while !done.iter().all(|&d| d) {
        assert!(
            since.elapsed() < RUN_BOUND,
            "{mode}: the clients did not finish within {RUN_BOUND:?}:\n{output:?}\n{}",
            c.logs()
        );
        for (k, client) in clients.iter_mut().enumerate() {
            while let Ok(line) = client.lines.try_recv() {
                output[k].push_str(&line);
                output[k].push('\n');
                let words: Vec<&str> = line.split(' ').collect();
                match words[..] {
                    ["HOLD", start, end, revision] => holds.push(Hold {
                        client: k,
                        start_ns: start.parse().unwrap(),
                        end_ns: end.parse().unwrap(),
                        revision: revision.parse().unwrap(),
                    }),
                    ["DONE"] => done[k] = true,
                    ["ERROR", ..] => panic!("{mode}: client {k}: {line}\n{}", c.logs()),
                    _ => {}
                }
            }
            if !done[k] {
                if let Some(status) = client.child.try_wait().unwrap() {
                    panic!("{mode}: client {k} exited ({status}) early:\n{}", output[k]);
                }
            }
        }
        if !killed && !holds.is_empty() {
            c.crash(leader);
            killed = true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    eprintln!("{mode}: {output:?}");
    holds
}

/// No two holds overlap in time, the revisions rise in the order of the
/// holds, and each client held `ROUNDS` times. A revision may repeat only
/// for the same client: clientv3's `Resign` forgets its key even when the
/// delete failed (the leader was killed under it), and the next
/// `Campaign` of the same session finds the key still there and holds
/// again with it, as it should (nobody else could win meanwhile).
fn check_holds(mode: &str, mut holds: Vec<Hold>) {
    holds.sort_by_key(|h| h.start_ns);
    for w in holds.windows(2) {
        assert!(w[0].end_ns <= w[1].start_ns, "{mode}: two holds overlap: {w:?} of {holds:?}");
        let kept = w[0].client == w[1].client && w[0].revision == w[1].revision;
        assert!(
            w[0].revision < w[1].revision || kept,
            "{mode}: the revision fell: {w:?} of {holds:?}"
        );
    }
    for k in 0..2 {
        let n = holds.iter().filter(|h| h.client == k).count();
        assert_eq!(n, ROUNDS as usize, "{mode}: client {k} held {n} times: {holds:?}");
    }
}

/// Waits until the node at `url` answers on its etcd listener's port.
fn wait_listening(url: &str, c: &TestCluster) {
    let addr = url.trim_start_matches("https://");
    let since = Instant::now();
    while std::net::TcpStream::connect(addr).is_err() {
        assert!(since.elapsed() < START_BOUND, "{url} never listened\n{}", c.logs());
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn go_clientv3_election_and_mutex_through_leader_kills() {
    // The Go build under the lock too: it takes both cores for a while.
    let _serial = serial().await;
    let Some(exe) = build_client() else { return };
    let (mut c, endpoints) = etcd_cluster();
    let (leader, term, _) = c.wait_leader(&[0, 1, 2], 0, Instant::now(), START_BOUND).await;
    for (url, _) in &endpoints {
        wait_listening(url, &c);
    }
    let holds = two_clients_through_a_kill(&mut c, &exe, &endpoints, "elect", leader);
    check_holds("elect", holds);
    // The killed node comes back; the next leader is killed in its turn.
    c.spawn_with(leader, &["--etcd-listen", endpoints[leader].0.trim_start_matches("https://")]);
    let others: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    let (next, _, _) = c.wait_leader(&others, term, Instant::now(), START_BOUND).await;
    wait_listening(&endpoints[leader].0, &c);
    let holds = two_clients_through_a_kill(&mut c, &exe, &endpoints, "lock", next);
    check_holds("lock", holds);
}

/// Increments per client in the STM test.
const STM_ROUNDS: u32 = 40;

/// Two clients increment one counter `STM_ROUNDS` times each, in clientv3's
/// STM (serializable snapshot: reads at one revision, a commit that
/// compares every key read), each through another node: the values they
/// wrote are exactly 1..=2 x STM_ROUNDS, none lost or written twice.
#[tokio::test(flavor = "multi_thread")]
async fn go_clientv3_stm_loses_no_increment() {
    // The Go build under the lock too: it takes both cores for a while.
    let _serial = serial().await;
    let Some(exe) = build_client() else { return };
    let (c, endpoints) = etcd_cluster();
    c.wait_leader(&[0, 1, 2], 0, Instant::now(), START_BOUND).await;
    for (url, _) in &endpoints {
        wait_listening(url, &c);
    }
    let mut clients: Vec<Client> = (0..2)
        .map(|first| {
            let order: Vec<String> = (0..3).map(|k| endpoints[(first + k) % 3].0.clone()).collect();
            start_rounds(&exe, "stm", "/go-stm-counter", STM_ROUNDS, &order, &endpoints[first].1)
        })
        .collect();
    let (mut wrote, mut runs) = (Vec::new(), 0);
    let since = Instant::now();
    for (k, client) in clients.iter_mut().enumerate() {
        loop {
            let left = RUN_BOUND.saturating_sub(since.elapsed());
            let line = client.lines.recv_timeout(left).unwrap_or_else(|_| {
                panic!("stm: client {k} did not finish within {RUN_BOUND:?}\n{}", c.logs())
            });
            match line.split(' ').collect::<Vec<_>>()[..] {
                ["INCR", value, ran] => {
                    wrote.push(value.parse::<u32>().unwrap());
                    runs += ran.parse::<u32>().unwrap();
                }
                ["DONE"] => break,
                ["ERROR", ..] => panic!("stm: client {k}: {line}\n{}", c.logs()),
                _ => {}
            }
        }
    }
    wrote.sort_unstable();
    let all: Vec<u32> = (1..=2 * STM_ROUNDS).collect();
    assert_eq!(wrote, all, "the counter's values, both clients together");
    // Conflicts are likely, not certain: reported, not required.
    eprintln!("stm: {} increments in {runs} transaction runs", all.len());
}
