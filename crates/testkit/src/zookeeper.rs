//! Real ZooKeeper servers for the tests: 1 (standalone) or 3 (an
//! ensemble) JVMs on loopback, free ports, a temp dir each; killed by pid
//! (SIGKILL, then waited for) when the `Ensemble` is dropped.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::stopped::wait_stopped;

/// The jar of the Debian package `zookeeper` (its manifest names its
/// dependencies in /usr/share/java).
pub const ZK_JAR: &str = "/usr/share/java/zookeeper.jar";
/// How long a server may take to serve.
pub const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// ZooKeeper's tick in these tests.
pub const TICK_MS: u64 = 200;

/// One test at a time: the JVMs and the timings share two cores.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// Fails (never skips) when ZooKeeper is not installed.
fn require_zookeeper() {
    let java =
        Command::new("java").arg("-version").stdout(Stdio::null()).stderr(Stdio::null()).status();
    if !matches!(java, Ok(s) if s.success()) || !Path::new(ZK_JAR).exists() {
        panic!(
            "these tests need java and {ZK_JAR}: install the Debian package `zookeeper` \
             (apt-get install zookeeper); CI installs it"
        );
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// One server.
pub struct Member {
    /// Its `myid` (1-based).
    pub id: usize,
    /// Its client port.
    pub port: u16,
    cfg: PathBuf,
    log: PathBuf,
    main_class: &'static str,
    child: Option<Child>,
}

impl Member {
    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&self.log).unwrap();
        let child = Command::new("java")
            .args(["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", ZK_JAR])
            .arg(self.main_class)
            .arg(&self.cfg)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start java");
        self.child = Some(child);
    }

    /// The server's pid.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("kill").args([sig, &self.pid().to_string()]).status().unwrap();
        assert!(ok.success(), "kill {sig} {}", self.pid());
    }
}

/// 1 or 3 servers.
pub struct Ensemble {
    dir: PathBuf,
    /// The servers, `members[i].id == i + 1`.
    pub members: Vec<Member>,
}

impl Ensemble {
    /// Starts `n` servers (1: standalone; more: a quorum) and waits until
    /// each serves.
    pub fn start(n: usize) -> Ensemble {
        require_zookeeper();
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let k = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("tenure-zk-{}-{k}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let ports: Vec<(u16, u16, u16)> =
            (0..n).map(|_| (free_port(), free_port(), free_port())).collect();
        let peers: String = if n == 1 {
            String::new()
        } else {
            let lines = ports.iter().enumerate();
            lines.map(|(i, (_, p, e))| format!("server.{}=127.0.0.1:{p}:{e}\n", i + 1)).collect()
        };
        let members = (0..n).map(|i| Self::member(&dir, i + 1, ports[i].0, &peers, n)).collect();
        let mut ensemble = Ensemble { dir, members };
        for m in &mut ensemble.members {
            m.spawn();
        }
        for i in 0..n {
            ensemble.wait_ready(i);
        }
        ensemble
    }

    fn member(dir: &Path, id: usize, port: u16, peers: &str, n: usize) -> Member {
        let home = dir.join(id.to_string());
        let data = home.join("data");
        std::fs::create_dir_all(&data).unwrap();
        std::fs::write(data.join("myid"), format!("{id}\n")).unwrap();
        let cfg = home.join("zoo.cfg");
        let text = format!(
            "tickTime={TICK_MS}\ninitLimit=20\nsyncLimit=10\ndataDir={}\nclientPort={port}\n\
             clientPortAddress=127.0.0.1\nadmin.enableServer=false\n\
             4lw.commands.whitelist=srvr,ruok,mntr,stat,cons\nminSessionTimeout=400\n\
             maxSessionTimeout=60000\nmaxClientCnxns=0\n{peers}",
            data.display()
        );
        std::fs::write(&cfg, text).unwrap();
        let main_class = if n == 1 {
            "org.apache.zookeeper.server.ZooKeeperServerMain"
        } else {
            "org.apache.zookeeper.server.quorum.QuorumPeerMain"
        };
        Member { id, port, cfg, log: home.join("server.log"), main_class, child: None }
    }

    /// `host:port` of every server.
    pub fn servers(&self) -> Vec<String> {
        self.members.iter().map(|m| format!("127.0.0.1:{}", m.port)).collect()
    }

    /// Sends a four-letter word to member `i`; `None` if it does not answer.
    pub fn four_letters(&self, i: usize, word: &str) -> Option<String> {
        let addr = format!("127.0.0.1:{}", self.members[i].port);
        let mut s =
            TcpStream::connect_timeout(&addr.parse().unwrap(), Duration::from_millis(500)).ok()?;
        s.set_read_timeout(Some(Duration::from_millis(1000))).ok()?;
        s.write_all(word.as_bytes()).ok()?;
        let mut out = String::new();
        s.read_to_string(&mut out).ok()?;
        Some(out)
    }

    /// Waits until member `i` serves (leader, follower or standalone).
    pub fn wait_ready(&self, i: usize) {
        let start = Instant::now();
        loop {
            if let Some(out) = self.four_letters(i, "srvr") {
                if ["Mode: leader", "Mode: follower", "Mode: standalone"]
                    .iter()
                    .any(|m| out.contains(m))
                {
                    return;
                }
            }
            if start.elapsed() > READY_TIMEOUT {
                let log = std::fs::read_to_string(&self.members[i].log).unwrap_or_default();
                panic!(
                    "ZooKeeper member {} not serving after {READY_TIMEOUT:?}; log:\n{log}",
                    i + 1
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The member whose connections include session `sid` (the `cons` word).
    pub fn serving(&self, sid: u64) -> Option<usize> {
        let needle = format!("sid=0x{sid:x}");
        (0..self.members.len())
            .find(|&i| self.four_letters(i, "cons").is_some_and(|o| o.contains(&needle)))
    }

    /// [`Ensemble::serving`], asked again every 100 ms for up to `bound`
    /// while no member lists the session.
    pub fn serving_within(&self, sid: u64, bound: Duration) -> Option<usize> {
        let start = Instant::now();
        loop {
            let found = self.serving(sid);
            if found.is_some() || start.elapsed() >= bound {
                return found;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The member in `Mode: leader`, if any.
    pub fn leader(&self) -> Option<usize> {
        (0..self.members.len())
            .find(|&i| self.four_letters(i, "srvr").is_some_and(|o| o.contains("Mode: leader")))
    }

    /// SIGKILLs member `i` and waits for it.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.members[i].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGSTOPs member `i`.
    pub fn pause(&self, i: usize) {
        self.members[i].signal("-STOP");
        wait_stopped(self.members[i].pid());
    }

    /// SIGCONTs member `i`.
    pub fn resume(&self, i: usize) {
        self.members[i].signal("-CONT");
    }

    /// Starts member `i` again (after [`Ensemble::kill`]) and waits until it serves.
    pub fn restart(&mut self, i: usize) {
        self.kill(i);
        self.members[i].spawn();
        self.wait_ready(i);
    }
}

impl Drop for Ensemble {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            if self.members[i].child.is_some() {
                // A stopped JVM dies of SIGKILL too.
                self.kill(i);
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
