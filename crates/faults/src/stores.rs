//! External stores for application elections through a store: a 3-member
//! etcd cluster or a 3-server ZooKeeper ensemble, one member in each of the
//! namespaces given (the tenure node namespaces of a
//! [`crate::cluster::Cluster`] started without servers, so that
//! [`crate::cluster::Cluster::cut_host`] cuts an application host off from
//! every member). Members can be killed, paused, resumed and restarted;
//! their output is kept in a log file per member for failure reports.
//! Dropping a [`StoreCluster`] kills and reaps every member.
//!
//! The probes (readiness, which member leads, how many candidacies an
//! election has) speak each store's plain text or JSON interface over TCP
//! from the root namespace: etcd's HTTP gateway (`/health`,
//! `/v3/maintenance/status`, `/v3/kv/range`) and ZooKeeper's four-letter
//! words (`srvr`, `mntr`), so no client library or CLI is needed.

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::fs::File;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Environment variable naming the etcd binary (default `etcd` on `PATH`).
pub const ETCD_ENV: &str = "TENURE_ETCD_BIN";
/// Environment variable naming ZooKeeper's jar (default the Debian package's).
pub const ZK_JAR_ENV: &str = "TENURE_ZK_JAR";
/// The jar of the Debian package `zookeeper`; its manifest's `Class-Path`
/// names the dependency jars, which `java -cp` then loads too.
pub const ZK_JAR: &str = "/usr/share/java/zookeeper.jar";
/// A logger for ZooKeeper's slf4j, if installed.
const SLF4J_SIMPLE: &str = "/usr/share/java/slf4j-simple.jar";
/// etcd's client port in every member's namespace.
pub const ETCD_CLIENT_PORT: u16 = 2379;
/// etcd's peer port.
const ETCD_PEER_PORT: u16 = 2380;
/// ZooKeeper's client port.
pub const ZK_CLIENT_PORT: u16 = 2181;
/// ZooKeeper's quorum and leader-election ports.
const ZK_QUORUM_PORT: u16 = 2888;
const ZK_ELECTION_PORT: u16 = 3888;
/// ZooKeeper's tick, ms: sessions are checked and rounded per tick.
pub const ZK_TICK_MS: u64 = 200;
/// etcd's raft timings, ms (a lease TTL of 1 s is then accepted: etcd's
/// minimum is ⌈1.5 × election timeout⌉).
const ETCD_HEARTBEAT_MS: u64 = 50;
const ETCD_ELECTION_TIMEOUT_MS: u64 = 500;
/// Bound on one probe (connect, request, answer).
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);
/// The longest probe answer read.
const MAX_ANSWER: u64 = 1 << 20;
/// How often readiness is polled.
const READY_POLL: Duration = Duration::from_millis(100);
/// How long a killed member may take to be reaped.
const REAP_TIMEOUT: Duration = Duration::from_secs(5);
/// What makes a member's log line worth showing whatever its age: session
/// expiry and closing, role changes (ZooKeeper's INFO lines).
const NOTABLE: [&str; 4] = ["xpir", "closeSession", "LEADING", "FOLLOWING -"];
/// Log lines per member shown in failure reports.
const LOG_TAIL_LINES: usize = 25;

/// Which external store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    /// etcd v3.
    Etcd,
    /// ZooKeeper.
    ZooKeeper,
}

impl StoreKind {
    /// The scheme of `--store` URLs.
    pub fn scheme(self) -> &'static str {
        match self {
            StoreKind::Etcd => "etcd",
            StoreKind::ZooKeeper => "zk",
        }
    }

    /// The client port of every member.
    pub fn client_port(self) -> u16 {
        match self {
            StoreKind::Etcd => ETCD_CLIENT_PORT,
            StoreKind::ZooKeeper => ZK_CLIENT_PORT,
        }
    }
}

/// The program (and leading arguments) that runs a member, or a message
/// saying what to install. Tests fail with it: CI installs `etcd-server`
/// and `zookeeper`.
pub fn launcher(kind: StoreKind) -> Result<Vec<String>, String> {
    match kind {
        StoreKind::Etcd => {
            let bin = std::env::var(ETCD_ENV).unwrap_or_else(|_| "etcd".into());
            let found = on_path(&bin).ok_or_else(|| {
                format!(
                    "etcd was not found ({bin:?}): install the Debian package `etcd-server` \
                     (.ci/run does) or set {ETCD_ENV}=/path/to/etcd"
                )
            })?;
            Ok(vec![found.display().to_string()])
        }
        StoreKind::ZooKeeper => {
            let jar = std::env::var(ZK_JAR_ENV).unwrap_or_else(|_| ZK_JAR.into());
            if !Path::new(&jar).is_file() {
                return Err(format!(
                    "ZooKeeper's jar {jar} was not found: install the Debian package \
                     `zookeeper` (.ci/run does) or set {ZK_JAR_ENV}=/path/to/zookeeper.jar"
                ));
            }
            let java = on_path("java").ok_or(
                "java was not found: install a JRE (the Debian \
                 package `zookeeper` depends on one)",
            )?;
            // slf4j-simple (Debian `libslf4j-java`, when there) makes the
            // servers log (sessions expired, leaders elected) to their log
            // files; without it they are silent.
            let cp = match Path::new(SLF4J_SIMPLE).is_file() {
                true => format!("{jar}:{SLF4J_SIMPLE}"),
                false => jar,
            };
            Ok([java.display().to_string(), "-Xmx256m".into(), "-XX:+UseSerialGC".into()]
                .into_iter()
                .chain(["-XX:TieredStopAtLevel=1".into(), "-cp".into(), cp])
                .chain(["org.apache.zookeeper.server.quorum.QuorumPeerMain".into()])
                .collect())
        }
    }
}

/// `program` as given if it has a `/`, else the first match on `PATH`.
fn on_path(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return Path::new(program).is_file().then(|| PathBuf::from(program));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(program)).find(|p| p.is_file())
}

/// One member: its namespace, address, data directory, log, process.
#[derive(Debug)]
struct Member {
    namespace: String,
    addr: Ipv4Addr,
    data_dir: PathBuf,
    log: PathBuf,
    args: Vec<String>,
    child: Option<Child>,
}

/// A running etcd cluster or ZooKeeper ensemble.
#[derive(Debug)]
pub struct StoreCluster {
    kind: StoreKind,
    members: Vec<Member>,
}

impl StoreCluster {
    /// Writes the members' configuration under `dir` and starts one member
    /// in each of `namespaces` (bound to the matching address of `addrs`).
    /// Readiness is [`StoreCluster::ready`]'s to wait for.
    pub fn start(
        kind: StoreKind,
        namespaces: &[String],
        addrs: &[Ipv4Addr],
        dir: &Path,
    ) -> Result<Self, String> {
        let launch = launcher(kind)?;
        let mut members = Vec::new();
        for (i, (ns, &addr)) in namespaces.iter().zip(addrs).enumerate() {
            let name = format!("{}{}", &kind.scheme()[..1], i + 1);
            let data_dir = dir.join(&name);
            std::fs::create_dir_all(&data_dir).map_err(|e| format!("{name}: {e}"))?;
            let args = match kind {
                StoreKind::Etcd => etcd_args(&name, &data_dir, addr, addrs),
                StoreKind::ZooKeeper => zk_config(i, &data_dir, addrs)?,
            };
            let args = launch.iter().cloned().chain(args).collect();
            let log = dir.join(format!("{name}.log"));
            members.push(Member { namespace: ns.clone(), addr, data_dir, log, args, child: None });
        }
        let mut store = StoreCluster { kind, members };
        for i in 0..store.len() {
            store.spawn(i)?;
        }
        Ok(store)
    }

    /// Which store.
    pub fn kind(&self) -> StoreKind {
        self.kind
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// True without members (never, once started).
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Member `i`'s client address.
    pub fn client_addr(&self, i: usize) -> SocketAddr {
        SocketAddr::from((self.members[i].addr, self.kind.client_port()))
    }

    /// The `--store` URL naming every member.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = (0..self.len()).map(|i| self.client_addr(i).to_string()).collect();
        format!("{}://{}", self.kind.scheme(), hosts.join(","))
    }

    /// The member whose client address is `addr`.
    pub fn member_at(&self, addr: SocketAddr) -> Option<usize> {
        (0..self.len()).find(|&i| self.client_addr(i) == addr)
    }

    /// True while member `i`'s process runs (possibly paused).
    pub fn is_running(&self, i: usize) -> bool {
        self.members[i].child.is_some()
    }

    /// Starts (or restarts, on its data directory) member `i`.
    pub fn spawn(&mut self, i: usize) -> Result<(), String> {
        let m = &self.members[i];
        let log = File::options()
            .create(true)
            .append(true)
            .open(&m.log)
            .map_err(|e| format!("{}: {e}", m.log.display()))?;
        let err = log.try_clone().map_err(|e| format!("{}: {e}", m.log.display()))?;
        // `ip netns exec` execs in place: the child's pid is the member's.
        let child = Command::new("ip")
            .args(["netns", "exec", &m.namespace])
            .args(&m.args)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("start {} member {}: {e}", self.kind.scheme(), i + 1))?;
        self.members[i].child = Some(child);
        Ok(())
    }

    fn signal(&self, i: usize, sig: Signal) -> Result<(), String> {
        let child = self.members[i]
            .child
            .as_ref()
            .ok_or_else(|| format!("{} member {} is not running", self.kind.scheme(), i + 1))?;
        kill(Pid::from_raw(child.id() as i32), sig).map_err(|e| format!("{sig} member {i}: {e}"))
    }

    /// SIGKILLs member `i` and reaps it.
    pub fn kill(&mut self, i: usize) -> Result<(), String> {
        self.signal(i, Signal::SIGKILL)?;
        let mut child = self.members[i].child.take().expect("signalled, so running");
        let until = Instant::now() + REAP_TIMEOUT;
        while child.try_wait().map_err(|e| e.to_string())?.is_none() {
            if Instant::now() > until {
                return Err(format!("member {} not reaped {REAP_TIMEOUT:?} after SIGKILL", i + 1));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(())
    }

    /// SIGSTOPs member `i`.
    pub fn pause(&self, i: usize) -> Result<(), String> {
        self.signal(i, Signal::SIGSTOP)
    }

    /// SIGCONTs member `i`.
    pub fn resume(&self, i: usize) -> Result<(), String> {
        self.signal(i, Signal::SIGCONT)
    }

    /// Whether member `i` serves clients: etcd's `/health` says true (it has
    /// a leader), ZooKeeper's `srvr` says `Mode: leader` or `follower`.
    pub async fn is_ready(&self, i: usize) -> bool {
        let addr = self.client_addr(i);
        match self.kind {
            StoreKind::Etcd => http(addr, "GET", "/health", "")
                .await
                .is_some_and(|b| b.replace(' ', "").contains("\"health\":\"true\"")),
            StoreKind::ZooKeeper => four_letters(addr, "srvr")
                .await
                .is_some_and(|a| a.contains("Mode: leader") || a.contains("Mode: follower")),
        }
    }

    /// Waits until every member in `among` is ready, within `bound`.
    pub async fn ready(&self, among: &[usize], bound: Duration) -> Result<Duration, String> {
        let start = Instant::now();
        loop {
            let mut all = true;
            for &i in among {
                all &= self.is_ready(i).await;
            }
            if all {
                return Ok(start.elapsed());
            }
            if start.elapsed() > bound {
                return Err(format!(
                    "{} members {among:?} not all ready within {bound:?}\n{}",
                    self.kind.scheme(),
                    self.logs()
                ));
            }
            tokio::time::sleep(READY_POLL).await;
        }
    }

    /// The member that leads the store's own consensus (etcd's raft leader,
    /// ZooKeeper's ensemble leader), as the running members report it.
    pub async fn leader(&self) -> Option<usize> {
        for i in (0..self.len()).filter(|&i| self.is_running(i)) {
            let addr = self.client_addr(i);
            match self.kind {
                StoreKind::Etcd => {
                    let body = http(addr, "POST", "/v3/maintenance/status", "{}").await?;
                    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
                    let (me, leader) = (&v["header"]["member_id"], &v["leader"]);
                    if me.is_string() && me == leader {
                        return Some(i);
                    }
                }
                StoreKind::ZooKeeper => {
                    if four_letters(addr, "srvr").await.is_some_and(|a| a.contains("Mode: leader"))
                    {
                        return Some(i);
                    }
                }
            }
        }
        None
    }

    /// How many candidacies election `name` has, read from the first member
    /// that answers: etcd, the keys with a path segment `name` (the layout
    /// `<prefix>/<election>/<lease>` of docs/STORES.md §2.2); ZooKeeper,
    /// `zk_ephemerals_count` of `mntr` (the candidacies are the only
    /// ephemeral znodes of these tests). A candidacy whose session has not
    /// expired yet counts, as in tenure's own listing.
    pub async fn candidates(&self, name: &str) -> Option<usize> {
        for i in (0..self.len()).filter(|&i| self.is_running(i)) {
            let addr = self.client_addr(i);
            let found = match self.kind {
                StoreKind::Etcd => {
                    // Every key: from "\0" to the end ("\0" as range_end).
                    let req = r#"{"key":"AA==","range_end":"AA==","keys_only":true}"#;
                    let body = http(addr, "POST", "/v3/kv/range", req).await;
                    body.and_then(|b| count_etcd_keys(&b, name))
                }
                StoreKind::ZooKeeper => four_letters(addr, "mntr").await.and_then(|a| {
                    let line = a.lines().find(|l| l.starts_with("zk_ephemerals_count"))?;
                    line.split_whitespace().nth(1)?.parse().ok()
                }),
            };
            if found.is_some() {
                return found;
            }
        }
        None
    }

    /// The last lines of every member's log.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        for (i, m) in self.members.iter().enumerate() {
            let text = std::fs::read_to_string(&m.log).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let tail = lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n");
            let notable: Vec<&str> =
                lines.iter().copied().filter(|l| NOTABLE.iter().any(|n| l.contains(n))).collect();
            let notable = notable[notable.len().saturating_sub(LOG_TAIL_LINES)..].join("\n");
            out.push_str(&format!(
                "--- {} member {} ({}): sessions and roles ---\n{notable}\n--- last lines ---\n{tail}\n",
                self.kind.scheme(),
                i + 1,
                m.log.display()
            ));
        }
        out
    }

    /// Member `i`'s data directory.
    pub fn data_dir(&self, i: usize) -> &Path {
        &self.members[i].data_dir
    }
}

impl Drop for StoreCluster {
    fn drop(&mut self) {
        for m in &mut self.members {
            if let Some(mut child) = m.child.take() {
                let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGCONT);
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// etcd's flags for member `name` at `addr`, of a cluster at `all`.
fn etcd_args(name: &str, data_dir: &Path, addr: Ipv4Addr, all: &[Ipv4Addr]) -> Vec<String> {
    let client = format!("http://{addr}:{ETCD_CLIENT_PORT}");
    let peer = format!("http://{addr}:{ETCD_PEER_PORT}");
    let cluster: Vec<String> = all
        .iter()
        .enumerate()
        .map(|(i, a)| format!("e{}=http://{a}:{ETCD_PEER_PORT}", i + 1))
        .collect();
    let data_dir = data_dir.join("data").display().to_string();
    [
        "--name",
        name,
        "--data-dir",
        &data_dir,
        "--listen-client-urls",
        &client,
        "--advertise-client-urls",
        &client,
        "--listen-peer-urls",
        &peer,
        "--initial-advertise-peer-urls",
        &peer,
        "--initial-cluster",
        &cluster.join(","),
        "--initial-cluster-state",
        "new",
        "--initial-cluster-token",
        "tenure-faults",
        "--heartbeat-interval",
        &ETCD_HEARTBEAT_MS.to_string(),
        "--election-timeout",
        &ETCD_ELECTION_TIMEOUT_MS.to_string(),
        "--logger",
        "zap",
        "--log-level",
        "error",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// Writes server `i`'s `zoo.cfg` and `myid` in `dir`; returns the launcher's
/// last argument (the config file).
fn zk_config(i: usize, dir: &Path, all: &[Ipv4Addr]) -> Result<Vec<String>, String> {
    let servers: String = all
        .iter()
        .enumerate()
        .map(|(j, a)| format!("server.{}={a}:{ZK_QUORUM_PORT}:{ZK_ELECTION_PORT}\n", j + 1))
        .collect();
    let config = format!(
        "tickTime={ZK_TICK_MS}\ninitLimit=20\nsyncLimit=10\ndataDir={}\n\
         clientPort={ZK_CLIENT_PORT}\nclientPortAddress={}\n{servers}\
         admin.enableServer=false\n4lw.commands.whitelist=srvr,ruok,mntr,stat\n\
         minSessionTimeout=400\nmaxSessionTimeout=60000\nmaxClientCnxns=0\n",
        dir.display(),
        all[i]
    );
    let file = dir.join("zoo.cfg");
    std::fs::write(&file, config).map_err(|e| format!("{}: {e}", file.display()))?;
    std::fs::write(dir.join("myid"), format!("{}\n", i + 1)).map_err(|e| format!("myid: {e}"))?;
    Ok(vec![file.display().to_string()])
}

/// The keys of an etcd range answer (base64 in JSON) with a path segment
/// `name`, counted.
fn count_etcd_keys(body: &str, name: &str) -> Option<usize> {
    let v: serde_json::Value = serde_json::from_str(body).ok()?;
    v.get("header")?;
    let kvs = v["kvs"].as_array().map_or(&[][..], Vec::as_slice);
    let keys = kvs.iter().filter_map(|kv| base64_decode(kv["key"].as_str()?));
    Some(keys.filter(|k| String::from_utf8_lossy(k).split('/').any(|s| s == name)).count())
}

/// Standard base64 (with padding), as etcd's gateway encodes bytes.
fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let s = s.trim_end_matches('=').as_bytes();
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for &c in s {
        acc = (acc << 6) | u32::from(value(c)?);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Some(out)
}

/// Sends `request` to `addr` and reads the whole answer, within
/// [`PROBE_TIMEOUT`].
async fn exchange(addr: SocketAddr, request: &[u8]) -> Option<String> {
    let talk = async {
        let mut s = TcpStream::connect(addr).await.ok()?;
        s.write_all(request).await.ok()?;
        let mut answer = Vec::new();
        s.take(MAX_ANSWER).read_to_end(&mut answer).await.ok()?;
        Some(String::from_utf8_lossy(&answer).into_owned())
    };
    tokio::time::timeout(PROBE_TIMEOUT, talk).await.ok().flatten()
}

/// A ZooKeeper four-letter word's answer.
pub async fn four_letters(addr: SocketAddr, word: &str) -> Option<String> {
    exchange(addr, word.as_bytes()).await
}

/// An HTTP/1.1 request's body, when the status is 200.
async fn http(addr: SocketAddr, method: &str, path: &str, body: &str) -> Option<String> {
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let answer = exchange(addr, request.as_bytes()).await?;
    let (head, body) = answer.split_once("\r\n\r\n")?;
    if !head.starts_with("HTTP/1.1 200") {
        return None;
    }
    // A chunked body: good enough to strip the chunk sizes for JSON of one chunk.
    if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        let mut lines = body.split("\r\n");
        let mut out = String::new();
        while let (Some(size), Some(data)) = (lines.next(), lines.next()) {
            if usize::from_str_radix(size.trim(), 16).ok()? == 0 {
                break;
            }
            out.push_str(data);
        }
        return Some(out);
    }
    Some(body.to_string())
}

/// Bound on a store electing a new leader of its own after its leader's
/// SIGKILL (etcd: election timeout 500 ms; ZooKeeper: its leader election
/// and the followers' sync, with JVMs on a loaded machine).
const RE_ELECTION_BOUND: Duration = Duration::from_secs(30);
/// Bound on a store's members all being ready.
const START_BOUND: Duration = Duration::from_secs(60);

/// Checks the launcher on its own: starts `kind` in three namespaces, sees
/// every member ready and one leader, SIGKILLs the leader and sees the two
/// others elect another, pauses and resumes one member, restarts the killed
/// one on its data directory and sees all three ready again.
pub async fn launcher_check(kind: StoreKind) -> Result<crate::scenarios::Outcome, String> {
    let timings = crate::cluster::Timings { heartbeat_ms: 50, election_timeout_ms: 500 };
    let cluster = crate::cluster::Cluster::network_only(3, 0, timings)
        .map_err(|e| format!("network: {e}"))?;
    let namespaces: Vec<String> = (0..3).map(|i| cluster.net().namespace(i).to_string()).collect();
    let addrs: Vec<Ipv4Addr> = (0..3).map(|i| cluster.net().node_addr(i)).collect();
    let mut store = StoreCluster::start(kind, &namespaces, &addrs, cluster.dir())?;
    let mut out = crate::scenarios::Outcome::default();
    let took = store.ready(&[0, 1, 2], START_BOUND).await?;
    out.note(format!("{}: 3 members ready after {} ms", store.url(), took.as_millis()));
    let leader = leader_within(&store, |_| true).await?;
    let killed = Instant::now();
    store.kill(leader)?;
    let next = leader_within(&store, |l| l != leader).await?;
    out.note(format!(
        "SIGKILL of the leader, member {}: member {} leads after {} ms",
        leader + 1,
        next + 1,
        killed.elapsed().as_millis()
    ));
    let other = (0..3).find(|&i| i != leader && i != next).expect("three members");
    store.pause(other)?;
    let paused = store.is_ready(other).await;
    store.resume(other)?;
    if paused {
        return Err(format!(
            "paused member {} still answered
{}",
            other + 1,
            store.logs()
        ));
    }
    store.spawn(leader)?;
    let back = store.ready(&[0, 1, 2], START_BOUND).await?;
    out.note(format!(
        "a paused member does not answer; the killed member is back after {} ms",
        back.as_millis()
    ));
    Ok(out)
}

/// Waits for a store leader for which `want` holds.
async fn leader_within(
    store: &StoreCluster,
    want: impl Fn(usize) -> bool,
) -> Result<usize, String> {
    let start = Instant::now();
    loop {
        if let Some(l) = store.leader().await.filter(|&l| want(l)) {
            return Ok(l);
        }
        if start.elapsed() > RE_ELECTION_BOUND {
            return Err(format!("no such leader within {RE_ELECTION_BOUND:?}\n{}", store.logs()));
        }
        tokio::time::sleep(READY_POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etcd_keys_are_counted_by_their_election_segment() {
        // "/tenure/elections/fenced-job/0a", "/tenure/elections/other/0b", "/x/fenced-job/1"
        let body = r#"{"header":{"revision":"9"},"kvs":[
            {"key":"L3RlbnVyZS9lbGVjdGlvbnMvZmVuY2VkLWpvYi8wYQ=="},
            {"key":"L3RlbnVyZS9lbGVjdGlvbnMvb3RoZXIvMGI="},
            {"key":"L3gvZmVuY2VkLWpvYi8x"}]}"#;
        assert_eq!(count_etcd_keys(body, "fenced-job"), Some(2));
        assert_eq!(count_etcd_keys(r#"{"header":{}}"#, "fenced-job"), Some(0));
        assert_eq!(count_etcd_keys("not json", "fenced-job"), None);
        assert_eq!(base64_decode("aGk=").as_deref(), Some(&b"hi"[..]));
        assert_eq!(base64_decode("a?"), None);
    }

    #[test]
    fn zoo_cfg_names_every_server_and_the_whitelist() {
        let dir = tempfile::tempdir().unwrap();
        let all = [Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2)];
        let args = zk_config(1, dir.path(), &all).unwrap();
        let cfg = std::fs::read_to_string(&args[0]).unwrap();
        assert!(cfg.contains("clientPortAddress=10.0.0.2\n"), "{cfg}");
        assert!(cfg.contains("server.1=10.0.0.1:2888:3888\nserver.2=10.0.0.2:2888:3888\n"));
        assert!(cfg.contains("4lw.commands.whitelist=srvr,ruok,mntr,stat\n"));
        assert_eq!(std::fs::read_to_string(dir.path().join("myid")).unwrap(), "2\n");
    }
}
