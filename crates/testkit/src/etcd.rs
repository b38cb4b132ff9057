//! A real etcd cluster on loopback for the tests: 1 or 3 members on free
//! ports, a temporary data directory, killed (SIGKILL) and removed on drop.
//! A missing `etcd` binary fails the test with what to install.

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::stopped::wait_stopped;

/// How long a cluster may take to have a leader after a start.
const HEALTHY_WITHIN: Duration = Duration::from_secs(30);

static CLUSTERS: AtomicUsize = AtomicUsize::new(0);

struct Member {
    name: String,
    client_port: u16,
    peer_port: u16,
    /// Plain HTTP `/health` (and `/metrics`), whether clients use TLS or not.
    metrics_port: u16,
    child: Option<Child>,
}

/// An etcd cluster started by a test.
pub struct EtcdCluster {
    dir: PathBuf,
    /// The members' certificate and key for https client URLs, if any.
    tls: Option<(PathBuf, PathBuf)>,
    token: String,
    election_ms: u64,
    members: Vec<Member>,
}

/// Ports are taken below the kernel's ephemeral range (32768 and up), so
/// that etcd's own outgoing connections cannot take them between the
/// check and etcd's bind.
const PORTS: std::ops::Range<u16> = 20_000..32_000;
/// How many times a cluster is started on new ports after a member failed to start.
const START_ATTEMPTS: usize = 3;

static NEXT_PORT: AtomicUsize = AtomicUsize::new(0);

/// `n` loopback ports that are free now, from [`PORTS`], each process
/// starting at its own offset.
fn free_ports(n: usize) -> Vec<u16> {
    let span = usize::from(PORTS.end - PORTS.start);
    let offset = (std::process::id() as usize * 7919) % span;
    let mut ports = Vec::new();
    while ports.len() < n {
        let k = NEXT_PORT.fetch_add(1, Ordering::Relaxed);
        let port = PORTS.start + ((offset + k) % span) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            ports.push(port);
        }
    }
    ports
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

    /// Starts `n` members with election timeout `election_ms` (heartbeat a
    /// tenth), on new ports again if a member fails to start (a port taken
    /// meanwhile).
    pub fn start_with(n: usize, election_ms: u64) -> EtcdCluster {
        EtcdCluster::start_opts(n, election_ms, None)
    }

    /// Starts `n` members serving clients over TLS with `cert` and `key` (PEM files).
    pub fn start_tls(n: usize, cert: PathBuf, key: PathBuf) -> EtcdCluster {
        EtcdCluster::start_opts(n, 500, Some((cert, key)))
    }

    fn start_opts(n: usize, election_ms: u64, tls: Option<(PathBuf, PathBuf)>) -> EtcdCluster {
        check_binary();
        for attempt in 1..=START_ATTEMPTS {
            let mut cluster = EtcdCluster::new(n, election_ms, tls.clone());
            for i in 0..n {
                cluster.spawn(i);
            }
            match cluster.try_wait_healthy() {
                Ok(()) => return cluster,
                Err(e) if attempt < START_ATTEMPTS => eprintln!("{e}; starting again"),
                Err(e) => panic!("{e}"),
            }
        }
        unreachable!("the last attempt returns or panics")
    }

    fn new(n: usize, election_ms: u64, tls: Option<(PathBuf, PathBuf)>) -> EtcdCluster {
        let k = CLUSTERS.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let token = format!("tenure-test-{}-{k}-{nanos}", std::process::id());
        let dir = std::env::temp_dir().join(&token);
        std::fs::create_dir_all(&dir).expect("make the cluster's directory");
        let ports = free_ports(3 * n);
        let members = (0..n)
            .map(|i| Member {
                name: format!("e{}", i + 1),
                client_port: ports[3 * i],
                peer_port: ports[3 * i + 1],
                metrics_port: ports[3 * i + 2],
                child: None,
            })
            .collect();
        EtcdCluster { dir, tls, token, election_ms, members }
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
        let client = format!("{}://127.0.0.1:{}", self.scheme(), m.client_port);
        let peer = format!("http://127.0.0.1:{}", m.peer_port);
        let metrics = format!("http://127.0.0.1:{}", m.metrics_port);
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
            .args(["--listen-metrics-urls", &metrics])
            .args(self.tls.iter().flat_map(|(cert, key)| {
                [
                    OsStr::new("--cert-file"),
                    cert.as_os_str(),
                    OsStr::new("--key-file"),
                    key.as_os_str(),
                ]
            }))
            .args(["--logger", "zap", "--log-level", "error"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start etcd");
        self.members[i].child = Some(child);
    }

    /// The client URLs of every member, in order.
    pub fn endpoints(&self) -> Vec<String> {
        let scheme = self.scheme();
        self.members.iter().map(|m| format!("{scheme}://127.0.0.1:{}", m.client_port)).collect()
    }

    fn scheme(&self) -> &'static str {
        if self.tls.is_some() {
            "https"
        } else {
            "http"
        }
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
        wait_stopped(self.members[i].child.as_ref().expect("a running member").id());
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
    pub fn wait_healthy(&mut self) {
        if let Err(e) = self.try_wait_healthy() {
            panic!("{e}");
        }
    }

    /// Waits until every running member is alive and answers `/health`
    /// with a leader (alive: another cluster's member could answer on a
    /// port ours failed to bind).
    fn try_wait_healthy(&mut self) -> Result<(), String> {
        let start = Instant::now();
        let logs = self.dir.display().to_string();
        for m in self.members.iter_mut().filter(|m| m.child.is_some()) {
            loop {
                let child = m.child.as_mut().expect("filtered");
                if let Ok(Some(status)) = child.try_wait() {
                    m.child = None;
                    return Err(format!(
                        "etcd member {} exited ({status}); logs in {logs}",
                        m.name
                    ));
                }
                if healthy(m.metrics_port) {
                    break;
                }
                if start.elapsed() > HEALTHY_WITHIN {
                    return Err(format!(
                        "etcd member {} not healthy within {HEALTHY_WITHIN:?}; logs in {logs}",
                        m.name
                    ));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Ok(())
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

/// A CA and a server certificate for 127.0.0.1 (PEM files made with the
/// `openssl` command), removed on drop.
pub struct Certs {
    dir: PathBuf,
    /// The CA certificate.
    pub ca: PathBuf,
    /// The server certificate, signed by the CA, for IP 127.0.0.1.
    pub cert: PathBuf,
    /// The server's private key.
    pub key: PathBuf,
}

impl Certs {
    /// Makes them in a new temporary directory.
    pub fn make() -> Certs {
        let k = CLUSTERS.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("tenure-test-certs-{}-{k}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let certs = Certs {
            ca: dir.join("ca.pem"),
            cert: dir.join("server.pem"),
            key: dir.join("server.key"),
            dir,
        };
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
        let ca_key = certs.dir.join("ca.key");
        let csr = certs.dir.join("server.csr");
        let ext = certs.dir.join("server.ext");
        std::fs::write(&ext, "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n").unwrap();
        openssl(&certs.dir, &["req", "-x509"], &ec, &[&ca_key, &certs.ca], "/CN=tenure test CA");
        openssl(&certs.dir, &["req"], &ec, &[&certs.key, &csr], "/CN=127.0.0.1");
        let status = Command::new("openssl")
            .args(["x509", "-req", "-days", "1", "-CAcreateserial", "-in"])
            .arg(&csr)
            .arg("-CA")
            .arg(&certs.ca)
            .arg("-CAkey")
            .arg(&ca_key)
            .arg("-out")
            .arg(&certs.cert)
            .arg("-extfile")
            .arg(&ext)
            .stderr(Stdio::null())
            .status()
            .expect("the `openssl` command is needed to make test certificates");
        assert!(status.success(), "openssl x509 failed");
        certs
    }
}

/// `openssl <cmd> <key options> -keyout KEY -out OUT -subj SUBJ -days 1`.
fn openssl(dir: &std::path::Path, cmd: &[&str], key: &[&str], files: &[&PathBuf; 2], subj: &str) {
    let status = Command::new("openssl")
        .current_dir(dir)
        .args(cmd)
        .args(key)
        .arg("-keyout")
        .arg(files[0])
        .arg("-out")
        .arg(files[1])
        .args(["-subj", subj, "-days", "1"])
        .stderr(Stdio::null())
        .status()
        .expect("the `openssl` command is needed to make test certificates");
    assert!(status.success(), "openssl {cmd:?} failed");
}

impl Drop for Certs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
