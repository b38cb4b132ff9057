//! A real etcd cluster on loopback for the tests: 1 or 3 members on free
//! ports, a temporary data directory, killed (SIGKILL) and removed on drop.
//! A missing `etcd` binary fails the test with what to install.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How long a cluster may take to have a leader after a start.
const HEALTHY_WITHIN: Duration = Duration::from_secs(30);

static CLUSTERS: AtomicUsize = AtomicUsize::new(0);

struct Member {
    name: String,
    client_port: u16,
    peer_port: u16,
    child: Option<Child>,
}

/// An etcd cluster started by a test.
pub struct EtcdCluster {
    dir: PathBuf,
    token: String,
    election_ms: u64,
    members: Vec<Member>,
}

/// Free loopback ports (held together, then released, so they differ).
fn free_ports(n: usize) -> Vec<u16> {
    let listeners: Vec<_> =
        (0..n).map(|_| TcpListener::bind("127.0.0.1:0").expect("bind a free port")).collect();
    listeners.iter().map(|l| l.local_addr().unwrap().port()).collect()
}

fn check_binary() {
    let found = Command::new("etcd")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(
        found,
        "the `etcd` binary (3.4 or later) is needed by these tests and was not found on PATH: \
         install it (Debian/Ubuntu: `apt-get install etcd-server`)"
    );
}

impl EtcdCluster {
    /// Starts `n` members with a 50 ms heartbeat and a 500 ms election
    /// timeout (etcd then grants TTLs from 1 s), and waits until healthy.
    pub fn start(n: usize) -> EtcdCluster {
        EtcdCluster::start_with(n, 500)
    }

    /// Starts `n` members with election timeout `election_ms` (heartbeat a tenth).
    pub fn start_with(n: usize, election_ms: u64) -> EtcdCluster {
        check_binary();
        let k = CLUSTERS.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let token = format!("tenure-test-{}-{k}-{nanos}", std::process::id());
        let dir = std::env::temp_dir().join(&token);
        std::fs::create_dir_all(&dir).expect("make the cluster's directory");
        let ports = free_ports(2 * n);
        let members = (0..n)
            .map(|i| Member {
                name: format!("e{}", i + 1),
                client_port: ports[2 * i],
                peer_port: ports[2 * i + 1],
                child: None,
            })
            .collect();
        let mut cluster = EtcdCluster { dir, token, election_ms, members };
        for i in 0..n {
            cluster.spawn(i);
        }
        cluster.wait_healthy();
        cluster
    }

    fn initial_cluster(&self) -> String {
        let peers: Vec<_> = self
            .members
            .iter()
            .map(|m| format!("{}=http://127.0.0.1:{}", m.name, m.peer_port))
            .collect();
        peers.join(",")
    }

    fn spawn(&mut self, i: usize) {
        let initial = self.initial_cluster();
        let m = &self.members[i];
        let client = format!("http://127.0.0.1:{}", m.client_port);
        let peer = format!("http://127.0.0.1:{}", m.peer_port);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("{}.log", m.name)))
            .expect("open the member's log");
        let child = Command::new("etcd")
            .args(["--name", &m.name])
            .arg("--data-dir")
            .arg(self.dir.join(&m.name))
            .args(["--listen-client-urls", &client, "--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer, "--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &initial, "--initial-cluster-state", "new"])
            .args(["--initial-cluster-token", &self.token])
            .args(["--heartbeat-interval", &(self.election_ms / 10).to_string()])
            .args(["--election-timeout", &self.election_ms.to_string()])
            .args(["--logger", "zap", "--log-level", "error"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start etcd");
        self.members[i].child = Some(child);
    }

    /// The client URLs of every member, in order.
    pub fn endpoints(&self) -> Vec<String> {
        self.members.iter().map(|m| format!("http://127.0.0.1:{}", m.client_port)).collect()
    }

    /// Kills member `i` (SIGKILL) and reaps it.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.members[i].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops member `i` (SIGSTOP): its connections stay open and silent.
    pub fn pause(&mut self, i: usize) {
        self.signal(i, "-STOP");
    }

    /// Lets member `i` run again (SIGCONT).
    pub fn resume(&mut self, i: usize) {
        self.signal(i, "-CONT");
    }

    fn signal(&self, i: usize, signal: &str) {
        let pid = self.members[i].child.as_ref().expect("a running member").id();
        let ok = Command::new("kill").args([signal, &pid.to_string()]).status();
        assert!(ok.map(|s| s.success()).unwrap_or(false), "kill {signal} {pid}");
    }

    /// Starts member `i` again on its data and waits until the running members are healthy.
    pub fn restart(&mut self, i: usize) {
        self.kill(i);
        self.spawn(i);
        self.wait_healthy();
    }

    /// Waits until every running member answers `/health` with a leader.
    pub fn wait_healthy(&self) {
        let start = Instant::now();
        for m in self.members.iter().filter(|m| m.child.is_some()) {
            while !healthy(m.client_port) {
                assert!(
                    start.elapsed() < HEALTHY_WITHIN,
                    "etcd member {} not healthy within {HEALTHY_WITHIN:?}; logs in {}",
                    m.name,
                    self.dir.display()
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// Whether the member on `port` says it is healthy (it has a leader).
fn healthy(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else { return false };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let request = format!("GET /health HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n");
    if s.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    answer.contains("\"health\":\"true\"")
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
            return;
        }
        // Keep the logs of a failed test, not the data (etcd preallocates its WAL).
        for m in &self.members {
            let _ = std::fs::remove_dir_all(self.dir.join(&m.name));
        }
        eprintln!("etcd logs kept in {}", self.dir.display());
    }
}
