//! A local etcd cluster (the `etcd` binary on the PATH) with the same timings,
//! observed through its JSON gateway: `POST /v3/maintenance/status {}`.

use super::fetch::Fetch;
use super::system::{Rounds, System, View};
use anyhow::{bail, Context};
use hyper::Method;
use serde::Deserialize;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;
use tenure_client::ClientOptions;
use tenure_launch::{free_ports, temp_dir, Proc, LOG_TAIL_LINES};
use tokio::time::{sleep, Instant};

/// How to install etcd when it is missing.
pub const INSTALL_HINT: &str = "apt-get install etcd-server (Debian; etcd 3.4)";
/// How long a started cluster may take until every member reports its own id.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(20);
/// Pause between attempts while the members start.
const STARTUP_POLL: Duration = Duration::from_millis(50);
/// Timeout of one status request while waiting for start-up.
const STARTUP_REQUEST_TIMEOUT: Duration = Duration::from_millis(500);

/// The parts of etcd's status answer the benchmark reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EtcdStatus {
    /// The answering member's id.
    pub member_id: u64,
    /// The leader it knows of (None when etcd reports 0).
    pub leader: Option<u64>,
    /// Its raft term.
    pub term: u64,
}

#[derive(Deserialize)]
struct RawHeader {
    member_id: String,
    #[serde(default)]
    raft_term: Option<String>,
}

// The gRPC gateway writes uint64 as decimal strings and may omit zero values.
#[derive(Deserialize)]
struct RawStatus {
    header: RawHeader,
    #[serde(default)]
    leader: Option<String>,
    #[serde(default, rename = "raftTerm")]
    raft_term: Option<String>,
}

/// Parses the JSON of `POST /v3/maintenance/status`.
pub fn parse_status(body: &[u8]) -> anyhow::Result<EtcdStatus> {
    let raw: RawStatus = serde_json::from_slice(body).context("not an etcd status answer")?;
    let num = |s: &str| s.parse::<u64>().with_context(|| format!("not a number: {s:?}"));
    let member_id = num(&raw.header.member_id)?;
    let leader = match raw.leader.as_deref() {
        None | Some("0") => None,
        Some(l) => Some(num(l)?),
    };
    let term = match raw.raft_term.or(raw.header.raft_term) {
        Some(t) => num(&t)?,
        None => 0,
    };
    Ok(EtcdStatus { member_id, leader, term })
}

/// Whether `etcd` is on the PATH.
pub fn available() -> bool {
    runs("etcd")
}

/// Whether `tool --version` runs and succeeds.
fn runs(tool: &str) -> bool {
    Command::new(tool).arg("--version").output().map(|o| o.status.success()).unwrap_or(false)
}

/// One etcd member.
struct Member {
    name: String,
    peer_port: u16,
    client_port: u16,
    data_dir: PathBuf,
    /// `--initial-cluster`: the first members, or for a member added to the
    /// running cluster ([`Etcd::new_member`]) the members then and itself.
    initial_cluster: String,
    /// `--initial-cluster-state existing` (added to a running cluster)
    /// instead of `new`.
    existing: bool,
    proc: Proc,
}

impl Member {
    fn peer_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.peer_port)
    }
}

/// A local etcd cluster; dropping it kills the members and removes their data.
pub struct Etcd {
    members: Vec<Member>,
    heartbeat_ms: u64,
    election_timeout_ms: u64,
    pre_vote: bool,
    /// Milliseconds added to each of the members' syncs (None: the
    /// bench's [`FSYNC_DELAY_ENV`]).
    sync_delay_ms: Option<u64>,
    /// Member ids by index, learnt once the members answer.
    ids: Vec<u64>,
    fetch: Fetch,
    // Declared last: removed after the members are dead.
    dir: tempfile::TempDir,
}

impl Etcd {
    /// Starts `nodes` members with etcd's own flags for the same timings and
    /// waits until each answers with its member id.
    pub async fn start_all(
        nodes: usize,
        heartbeat_ms: u64,
        election_timeout_ms: u64,
        pre_vote: bool,
        sync_delay_ms: Option<u64>,
    ) -> anyhow::Result<Self> {
        let dir = temp_dir("tenure-bench-etcd-")?;
        let ports = free_ports(2 * nodes)?;
        let initial_cluster = (0..nodes)
            .map(|i| format!("n{}=http://127.0.0.1:{}", i + 1, ports[2 * i]))
            .collect::<Vec<_>>()
            .join(",");
        let members: Vec<Member> = (0..nodes)
            .map(|i| Member {
                name: format!("n{}", i + 1),
                peer_port: ports[2 * i],
                client_port: ports[2 * i + 1],
                data_dir: dir.path().join(format!("n{}", i + 1)),
                initial_cluster: initial_cluster.clone(),
                existing: false,
                proc: Proc::new(
                    format!("etcd n{}", i + 1),
                    dir.path().join(format!("n{}.log", i + 1)),
                ),
            })
            .collect();
        let mut etcd = Etcd {
            members,
            heartbeat_ms,
            election_timeout_ms,
            pre_vote,
            sync_delay_ms,
            ids: Vec::new(),
            fetch: Fetch::new(ClientOptions::default())?,
            dir,
        };
        for i in 0..nodes {
            etcd.start(i)?;
        }
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        for i in 0..nodes {
            loop {
                if let Ok(s) = etcd.status(i, STARTUP_REQUEST_TIMEOUT).await {
                    etcd.ids.push(s.member_id);
                    break;
                }
                if Instant::now() > deadline {
                    bail!(
                        "etcd member {} did not answer within {STARTUP_TIMEOUT:?}\n{}",
                        i + 1,
                        etcd.log_tails()
                    );
                }
                sleep(STARTUP_POLL).await;
            }
        }
        Ok(etcd)
    }

    /// Prepares member `n{len + 1}` on free ports, not started: to be
    /// added to the running cluster (`etcdctl member add`), then started
    /// with `--initial-cluster-state existing` and every member so far in
    /// its `--initial-cluster`. Returns its index.
    pub fn new_member(&mut self) -> anyhow::Result<usize> {
        let i = self.members.len();
        let ports = free_ports(2)?;
        let name = format!("n{}", i + 1);
        let mut initial: Vec<String> =
            self.members.iter().map(|m| format!("{}={}", m.name, m.peer_url())).collect();
        initial.push(format!("{name}=http://127.0.0.1:{}", ports[0]));
        self.members.push(Member {
            peer_port: ports[0],
            client_port: ports[1],
            data_dir: self.dir.path().join(&name),
            initial_cluster: initial.join(","),
            existing: true,
            proc: Proc::new(format!("etcd {name}"), self.dir.path().join(format!("{name}.log"))),
            name,
        });
        Ok(i)
    }

    /// Records the id etcd gave member `i` (a member added to the running
    /// cluster: `etcdctl member add` says it).
    pub fn set_member_id(&mut self, i: usize, id: u64) -> anyhow::Result<()> {
        if i != self.ids.len() {
            bail!("etcd member {} is not the next one to learn its id", i + 1);
        }
        self.ids.push(id);
        Ok(())
    }

    /// Member `i`'s id, once known.
    pub fn member_id(&self, i: usize) -> Option<u64> {
        self.ids.get(i).copied()
    }

    /// Member `i`'s name (`n1`, ...).
    pub fn member_name(&self, i: usize) -> &str {
        &self.members[i].name
    }

    /// Member `i`'s peer URL.
    pub fn peer_url(&self, i: usize) -> String {
        self.members[i].peer_url()
    }

    /// Member `i`'s client URL (its JSON gateway).
    pub fn client_url(&self, i: usize) -> String {
        format!("http://127.0.0.1:{}", self.members[i].client_port)
    }

    async fn status(&self, i: usize, timeout: Duration) -> anyhow::Result<EtcdStatus> {
        let url = format!("{}/v3/maintenance/status", self.client_url(i));
        let (code, body) = self.fetch.send(Method::POST, &url, Some("{}"), timeout).await?;
        if !code.is_success() {
            bail!("{url}: HTTP {code}");
        }
        parse_status(&body)
    }
}

/// The servers' slow-disk knob (`tenure-node`'s `TENURE_FSYNC_DELAY_MS`):
/// milliseconds added to every sync of their logs. 0 when unset.
pub(crate) const FSYNC_DELAY_ENV: &str = "TENURE_FSYNC_DELAY_MS";

/// The delay [`FSYNC_DELAY_ENV`] asks for (an unreadable value is an error).
fn fsync_delay_ms() -> anyhow::Result<u64> {
    match std::env::var(FSYNC_DELAY_ENV) {
        Ok(v) => v.trim().parse().with_context(|| {
            format!("{FSYNC_DELAY_ENV}={v:?}: expected a whole number of milliseconds")
        }),
        Err(_) => Ok(0),
    }
}

/// The command that starts an etcd member. With a sync delay, etcd gets the
/// same slow disk as tenure's servers: `strace` adds `delay_ms` to each of
/// its `fsync` and `fdatasync` calls (system-call injection: etcd is a
/// static Go binary, out of reach of an `LD_PRELOAD`), and `setpriv`
/// makes etcd die with strace, so that killing the member's process kills
/// etcd rather than leave it running untraced.
fn etcd_command(delay_ms: u64) -> anyhow::Result<Command> {
    if delay_ms == 0 {
        return Ok(Command::new("etcd"));
    }
    if !runs("strace") || !runs("setpriv") {
        bail!(
            "{FSYNC_DELAY_ENV} slows etcd's disk through strace and setpriv: apt-get install strace util-linux"
        );
    }
    let mut c = Command::new("strace");
    let inject = format!("inject=fsync,fdatasync:delay_exit={delay_ms}ms");
    c.args(["-f", "--seccomp-bpf", "-qq", "-o", "/dev/null", "-e", "trace=fsync,fdatasync"])
        .args(["-e", &inject, "setpriv", "--pdeathsig", "KILL", "etcd"]);
    Ok(c)
}

impl System for Etcd {
    fn name(&self) -> &'static str {
        "etcd"
    }

    fn len(&self) -> usize {
        self.members.len()
    }

    async fn view(&self, i: usize, timeout: Duration) -> Option<View> {
        let s = self.status(i, timeout).await.ok()?;
        let leader = s.leader.and_then(|l| self.ids.iter().position(|&id| id == l));
        Some(View { leader, term: s.term, is_leader: s.leader == Some(s.member_id) })
    }

    async fn rounds(&self, _i: usize) -> Option<Rounds> {
        // etcd exports no count of elections started; rounds come from terms.
        None
    }

    fn start(&mut self, i: usize) -> anyhow::Result<()> {
        let m = &self.members[i];
        let peer = m.peer_url();
        let client = self.client_url(i);
        let state = if m.existing { "existing" } else { "new" };
        let delay = match self.sync_delay_ms {
            Some(ms) => ms,
            None => fsync_delay_ms()?,
        };
        let mut c = etcd_command(delay)?;
        c.args(["--name", &m.name])
            .arg("--data-dir")
            .arg(&m.data_dir)
            .args(["--listen-peer-urls", &peer])
            .args(["--initial-advertise-peer-urls", &peer])
            .args(["--listen-client-urls", &client])
            .args(["--advertise-client-urls", &client])
            .args(["--initial-cluster", &m.initial_cluster])
            .args(["--initial-cluster-state", state])
            .args(["--initial-cluster-token", "tenure-bench"])
            .args(["--heartbeat-interval", &self.heartbeat_ms.to_string()])
            .args(["--election-timeout", &self.election_timeout_ms.to_string()]);
        if self.pre_vote {
            c.arg("--pre-vote");
        }
        Ok(self.members[i].proc.spawn(c)?)
    }

    fn proc(&mut self, i: usize) -> &mut Proc {
        &mut self.members[i].proc
    }

    fn log_tails(&self) -> String {
        let _ = self.dir.path();
        self.members.iter().map(|m| m.proc.log_tail(LOG_TAIL_LINES)).collect()
    }

    fn log_files(&self) -> Vec<PathBuf> {
        self.members.iter().map(|m| m.proc.log.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_real_status_answer() {
        // Captured from etcd 3.4.23.
        let body = br#"{"header":{"cluster_id":"15118495548433857066","member_id":"13668033151171901709","revision":"1","raft_term":"2"},"version":"3.4.23","dbSize":"20480","leader":"13668033151171901709","raftIndex":"4","raftTerm":"2","raftAppliedIndex":"4","dbSizeInUse":"16384"}"#;
        let s = parse_status(body).unwrap();
        assert_eq!(s.member_id, 13668033151171901709);
        assert_eq!(s.leader, Some(13668033151171901709));
        assert_eq!(s.term, 2);
    }

    #[test]
    fn no_leader_and_missing_fields() {
        let s =
            parse_status(br#"{"header":{"member_id":"7","raft_term":"5"},"leader":"0"}"#).unwrap();
        assert_eq!(s, EtcdStatus { member_id: 7, leader: None, term: 5 });
        let s = parse_status(br#"{"header":{"member_id":"7"}}"#).unwrap();
        assert_eq!(s, EtcdStatus { member_id: 7, leader: None, term: 0 });
        assert!(parse_status(br#"{"header":{"member_id":"x"}}"#).is_err());
        assert!(parse_status(b"404 page not found").is_err());
    }
}
