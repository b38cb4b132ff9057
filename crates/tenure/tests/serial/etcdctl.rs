//! What the etcdctl tests (`etcd_api`, `etcd_lease`, `etcd_watch`) share:
//! etcdctl run against one node's etcd listener, and a cluster of three
//! with one listener each.

use crate::harness::TestCluster;
use serde_json::Value;
use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Bound on a first election and the etcd listeners' start on a busy machine.
pub const START_BOUND: Duration = Duration::from_secs(15);

/// True if `program` runs (`--version`, or `version` for etcdctl).
pub fn installed(program: &str, arg: &str) -> bool {
    Command::new(program)
        .arg(arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// How etcdctl reaches one server.
pub struct Endpoint {
    pub url: String,
    /// etcdctl's TLS flags (`--cacert`, `--cert`, `--key`), and any others
    /// every call takes (`--user`).
    pub tls: Vec<OsString>,
}

impl Endpoint {
    /// etcdctl with `args`, on this endpoint, with a 5 s dial timeout and
    /// a 10 s command timeout; its stdin, stdout and stderr are the
    /// caller's to set.
    pub fn command<A: AsRef<OsStr>>(&self, args: &[A]) -> Command {
        let mut cmd = Command::new("etcdctl");
        cmd.env("ETCDCTL_API", "3")
            .arg("--endpoints")
            .arg(&self.url)
            .args(&self.tls)
            .args(["--dial-timeout", "5s", "--command-timeout", "10s"])
            .args(args);
        cmd
    }

    /// Runs etcdctl with `args` (and `stdin`) to its end: its exit
    /// success, stdout and what [`errors`] keeps of its stderr.
    pub fn run<A: AsRef<OsStr>>(&self, args: &[A], stdin: Option<&str>) -> (bool, String, String) {
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run etcdctl");
        let mut input = child.stdin.take().unwrap();
        input.write_all(stdin.unwrap_or("").as_bytes()).unwrap();
        drop(input);
        let out = child.wait_with_output().expect("etcdctl's output");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        (out.status.success(), stdout, errors(&out.stderr))
    }

    /// Runs `args`, which must succeed; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let (ok, out, err) = self.run(args, None);
        assert!(ok, "etcdctl {args:?} failed: {out}{err}");
        out
    }

    /// Runs `args` with `-w json`, which must succeed; returns the answer.
    pub fn json(&self, args: &[&str]) -> Value {
        let mut a = args.to_vec();
        a.extend(["-w", "json"]);
        serde_json::from_str(&self.ok(&a)).expect("etcdctl's JSON")
    }

    /// Waits until this endpoint answers a linearizable get (a leader is
    /// known).
    pub fn wait_serving(&self, c: &TestCluster) {
        let since = Instant::now();
        while !self.run(&["get", "health"], None).0 {
            assert!(since.elapsed() < START_BOUND, "{} never served a get\n{}", self.url, c.logs());
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The lines of etcdctl's stderr a test may compare: `Error` lines, the
/// health lines, and a cancelled watch's; its JSON warnings, which carry
/// times and ids, are left out.
pub fn errors(stderr: &[u8]) -> String {
    String::from_utf8_lossy(stderr)
        .lines()
        .filter(|l| {
            l.starts_with("Error")
                || l.starts_with("watch was canceled")
                || l.contains(" is healthy")
                || l.contains("unhealthy")
        })
        .map(|l| format!("{l}\n"))
        .collect()
}

/// A tenure cluster of three with etcd listeners, and how to reach each.
pub fn tenure_cluster() -> (TestCluster, Vec<Endpoint>) {
    let (c, endpoints) = crate::harness::etcd_cluster();
    (c, endpoints.into_iter().map(|(url, tls)| Endpoint { url, tls }).collect())
}

/// `v`, an etcdctl JSON answer, with its revisions counted from `base`
/// and the fields that differ between runs left out: the header's cluster
/// id, member id and term, and `also` (ids, times left).
pub fn relative(v: &mut Value, base: i64, also: &[&str]) {
    match v {
        Value::Object(map) => {
            for k in ["cluster_id", "member_id", "raft_term"].iter().chain(also) {
                map.remove(*k);
            }
            for (k, x) in map.iter_mut() {
                match (k.as_str(), x.as_i64()) {
                    ("revision" | "create_revision" | "mod_revision", Some(n)) if n > 0 => {
                        *x = Value::from(n - base)
                    }
                    _ => relative(x, base, also),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|x| relative(x, base, also)),
        _ => {}
    }
}

/// A gRPC channel to `e` (with its client certificate, if any).
pub async fn channel(e: &Endpoint) -> tonic::transport::Channel {
    crate::harness::etcd_channel(&e.url, &e.tls).await
}
