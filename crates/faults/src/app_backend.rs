//! Where the fenced application election of [`crate::app_elections`] is
//! held: tenure's own named elections (a three-node tenure cluster with its
//! checker), or an external store ([`crate::stores`]: etcd, ZooKeeper) in
//! the namespaces a tenure cluster would use. Whatever the store, who leads
//! with which token is read the same way: from one long-lived
//! `tenure elect NAME --observe --store URL` in the root namespace (which no
//! fault cuts off), whose lines ([`parse_observed`]) say the leader's
//! token and value.

use crate::checker::{get_once, Api};
use crate::cluster::{Cluster, Timings};
use crate::scenarios::{Run, FIRST_ELECTION_BOUND};
use crate::skip::Skip;
use crate::stores::{StoreCluster, StoreKind};
use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Bound on an external store's members all being ready (a JVM per
/// ZooKeeper server starts in seconds on a loaded two-core machine).
pub const STORE_READY_BOUND: Duration = Duration::from_secs(60);
/// Timeout of one election read through tenure's API.
const READ_TIMEOUT: Duration = Duration::from_secs(2);
/// Observer lines kept for failure reports.
const OBSERVED_KEPT: usize = 12;
/// How long the "can this build reach the store" probe may run.
const REACH_PROBE: Duration = Duration::from_secs(3);
/// What `tenure` says when a store scheme is not wired into it.
const NOT_WIRED: &str = "this build cannot reach that store yet";

/// Which store holds the election.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// tenure's own named elections.
    Tenure,
    /// An external store.
    External(StoreKind),
}

impl Held {
    /// A short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            Held::Tenure => "tenure",
            Held::External(StoreKind::Etcd) => "etcd",
            Held::External(StoreKind::ZooKeeper) => "ZooKeeper",
        }
    }
}

/// The running store (and, for tenure, its cluster checker). One per run:
/// the size of its variants does not matter (tenure's cluster is shared,
/// behind an `Arc`; an external store's is held here).
#[allow(clippy::large_enum_variant)]
pub enum Backend {
    /// tenure's cluster, its checker, and its API for the candidate count.
    Tenure {
        /// The servers and their checker (shared with whoever else drives
        /// them: [`Backend::shared`]).
        run: Arc<Run>,
        /// The read API.
        api: Api,
        /// Every node's API address.
        nodes: Vec<SocketAddr>,
    },
    /// An external store in the node namespaces of a server-less cluster.
    External {
        /// The members (dropped before the network: field order).
        store: StoreCluster,
        /// The namespaces, the application hosts, the `tenure` binary.
        cluster: Cluster,
    },
}

impl Backend {
    /// Starts `nodes` members of the store (tenure servers with `timings`,
    /// or etcd members / ZooKeeper servers) and `hosts` application hosts,
    /// and waits until the store serves.
    pub async fn start(
        held: Held,
        nodes: usize,
        hosts: usize,
        timings: Timings,
    ) -> Result<Self, String> {
        match held {
            Held::Tenure => {
                let run = Run::start_with_hosts(nodes, hosts, timings).await?;
                let all: Vec<usize> = (0..nodes).collect();
                run.agreement(&all, Instant::now(), FIRST_ELECTION_BOUND).await?;
                Self::shared(Arc::new(run))
            }
            Held::External(kind) => {
                let cluster = Cluster::network_only(nodes, hosts, timings)
                    .map_err(|e| format!("network: {e}"))?;
                let net = cluster.net();
                let namespaces: Vec<String> =
                    (0..nodes).map(|i| net.namespace(i).to_string()).collect();
                let addrs: Vec<_> = (0..nodes).map(|i| net.node_addr(i)).collect();
                let store = StoreCluster::start(kind, &namespaces, &addrs, cluster.dir())?;
                let all: Vec<usize> = (0..nodes).collect();
                store.ready(&all, STORE_READY_BOUND).await?;
                Ok(Backend::External { store, cluster })
            }
        }
    }

    /// An election held by `run`'s tenure cluster, which someone else keeps
    /// driving as well (a membership scenario changes its members while the
    /// applications run). The applications run on its application hosts and
    /// reach it through every slot's API ([`Cluster::endpoints`]).
    pub fn shared(run: Arc<Run>) -> Result<Self, String> {
        let api = run.cluster.api().map_err(|e| run.fail(e))?;
        let nodes = run.cluster.http_addrs();
        Ok(Backend::Tenure { run, api, nodes })
    }

    /// The namespaces and application hosts.
    pub fn cluster(&self) -> &Cluster {
        match self {
            Backend::Tenure { run, .. } => &run.cluster,
            Backend::External { cluster, .. } => cluster,
        }
    }

    /// A failure message: `what` and the store's logs (tenure: the
    /// checker's violations and view changes too).
    pub fn fail(&self, what: impl std::fmt::Display) -> String {
        match self {
            Backend::Tenure { run, .. } => run.fail(what),
            Backend::External { store, .. } => format!("{what}\n{}", store.logs()),
        }
    }

    /// tenure's checker found nothing wrong (nothing to check for others).
    pub fn check_safety(&self) -> Result<(), String> {
        match self {
            Backend::Tenure { run, .. } => run.check_safety(),
            Backend::External { .. } => Ok(()),
        }
    }

    /// The flags by which `tenure run` and `tenure elect` reach the store:
    /// `--endpoints` (with the CA and the write token) for tenure, `--store
    /// URL` for the others.
    pub fn client_args(&self) -> Vec<String> {
        match self {
            Backend::Tenure { run, .. } => tenure_args(&run.cluster, run.cluster.endpoints()),
            Backend::External { store, .. } => vec!["--store".into(), store.url()],
        }
    }

    /// The observer's flags: `--store URL` for every store.
    fn observer_args(&self) -> Vec<String> {
        match self {
            Backend::Tenure { run, .. } => {
                let hosts: Vec<String> =
                    run.cluster.http_addrs().iter().map(|a| a.to_string()).collect();
                let mut args = tenure_args(&run.cluster, String::new());
                args.splice(0..2, ["--store".to_string(), format!("tenure://{}", hosts.join(","))]);
                args
            }
            Backend::External { .. } => self.client_args(),
        }
    }

    /// How many candidacies election `name` has (a candidacy whose session
    /// has not expired yet included), from the store.
    pub async fn candidates(&self, name: &str) -> Option<usize> {
        match self {
            Backend::Tenure { api, nodes, .. } => {
                let path = format!("/v1/elections/{name}");
                for &addr in nodes {
                    let Some((200, body)) = get_once(api.clone(), addr, &path, READ_TIMEOUT).await
                    else {
                        continue;
                    };
                    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
                    return Some(v["candidates"].as_array().map_or(0, Vec::len));
                }
                None
            }
            Backend::External { store, .. } => store.candidates(name).await,
        }
    }
}

/// `--endpoints E [--cacert CA] --token-file F` of tenure's cluster.
fn tenure_args(cluster: &Cluster, endpoints: String) -> Vec<String> {
    let mut args = vec!["--endpoints".to_string(), endpoints];
    if let Some(ca) = cluster.ca_file() {
        args.extend(["--cacert".to_string(), ca.display().to_string()]);
    }
    args.extend(["--token-file".into(), cluster.write_token_file().display().to_string()]);
    args
}

/// `None` when the `tenure` binary can reach `kind` stores; otherwise why
/// not (the store's crate is not merged into this build yet), as a skip.
pub fn unsupported(kind: StoreKind) -> Option<Skip> {
    let binary = match crate::cluster::tenure_binary() {
        Ok(b) => b,
        Err(e) => return Some(Skip { reason: e.to_string() }),
    };
    // Port 9 (discard) on loopback: nothing answers, so a build that can
    // reach the store keeps trying and is killed; one that cannot says so.
    let url = format!("{}://127.0.0.1:9", kind.scheme());
    let mut child = Command::new(&binary)
        .args(["elect", "reach-probe", "--observe", "--store", &url])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    let until = Instant::now() + REACH_PROBE;
    while Instant::now() < until {
        if let Ok(Some(_)) = child.try_wait() {
            let mut err = String::new();
            use std::io::Read;
            let _ = child.stderr.take()?.read_to_string(&mut err);
            return err.contains(NOT_WIRED).then(|| Skip {
                reason: format!("{} says for {url}: {}", binary.display(), err.trim()),
            });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// What one observer line says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ObservedLine {
    /// `leader  token T  session S  value "V"  (revision R)`: (T, V).
    Leader(u64, String),
    /// `no leader  (revision R)`.
    NoLeader,
}

/// Parses a line of `tenure elect --observe` (after its timestamp); other
/// lines (a "changes missed" notice, whose state follows) are `None`.
pub fn parse_observed(line: &str) -> Option<ObservedLine> {
    let rest = line.split_once("  ").map_or(line, |(_, r)| r);
    if rest.starts_with("no leader") {
        return Some(ObservedLine::NoLeader);
    }
    let rest = rest.strip_prefix("leader  token ")?;
    let (token, rest) = rest.split_once("  session ")?;
    let (_, rest) = rest.split_once("  value \"")?;
    let (value, _) = rest.rsplit_once("\"  (revision ")?;
    Some(ObservedLine::Leader(token.parse().ok()?, value.to_string()))
}

/// What the observer has seen so far.
#[derive(Debug, Default)]
struct Seen {
    /// The latest state: (token, value) of the leader, or none.
    leader: Option<(u64, String)>,
    /// Whether any state was printed yet.
    any: bool,
    /// The last lines, for failure reports.
    recent: VecDeque<String>,
}

/// A `tenure elect NAME --observe` in the root namespace.
pub struct Observer {
    child: Child,
    seen: Arc<Mutex<Seen>>,
    errors: std::path::PathBuf,
}

impl Observer {
    /// Starts observing election `name` of `backend`'s store; stderr goes
    /// to `dir/observer.log`.
    pub fn start(backend: &Backend, name: &str, dir: &Path) -> Result<Self, String> {
        let errors = dir.join("observer.log");
        let err = File::options()
            .create(true)
            .append(true)
            .open(&errors)
            .map_err(|e| format!("{}: {e}", errors.display()))?;
        let mut child = Command::new(backend.cluster().binary())
            .args(["elect", name, "--observe"])
            .args(backend.observer_args())
            .env_remove("TENURE_TOKEN")
            .env_remove("TENURE_CACERT")
            .env_remove("TENURE_STORE")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(err)
            .spawn()
            .map_err(|e| format!("start the observer: {e}"))?;
        let out = child.stdout.take().expect("piped above");
        let seen = Arc::new(Mutex::new(Seen::default()));
        let shared = seen.clone();
        // A thread of its own: it ends at the pipe's end, when the child dies.
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let mut s = lock(&shared);
                match parse_observed(&line) {
                    Some(ObservedLine::Leader(t, v)) => (s.leader, s.any) = (Some((t, v)), true),
                    Some(ObservedLine::NoLeader) => (s.leader, s.any) = (None, true),
                    None => {}
                }
                if s.recent.len() == OBSERVED_KEPT {
                    s.recent.pop_front();
                }
                s.recent.push_back(line);
            }
        });
        Ok(Observer { child, seen, errors })
    }

    /// The latest leader, or `Err` with the observer's stderr when it
    /// exited (it resumes on its own after a store member's loss).
    pub fn leader(&mut self) -> Result<Option<(u64, String)>, String> {
        if let Ok(Some(status)) = self.child.try_wait() {
            return Err(format!("the observer exited ({status}): {}", self.report()));
        }
        Ok(lock(&self.seen).leader.clone())
    }

    /// Whether a state was printed yet.
    pub fn started(&self) -> bool {
        lock(&self.seen).any
    }

    /// The observer's last lines and stderr.
    pub fn report(&self) -> String {
        let recent: Vec<String> = lock(&self.seen).recent.iter().cloned().collect();
        let errors = std::fs::read_to_string(&self.errors).unwrap_or_default();
        let tail: Vec<&str> = errors.lines().rev().take(10).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        format!(
            "--- observer: last lines ---\n{}\n--- observer: stderr ---\n{}\n",
            recent.join("\n"),
            tail.join("\n")
        )
    }
}

impl Drop for Observer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn lock(m: &Mutex<Seen>) -> MutexGuard<'_, Seen> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The store members application host `h` has an established connection
/// to (its client's endpoints), from `ss` in its namespace.
pub fn connected_members(cluster: &Cluster, store: &StoreCluster, h: usize) -> Vec<usize> {
    let ns = cluster.host_namespace(h);
    let Ok(out) =
        crate::net::run("ip", &["netns", "exec", ns, "ss", "-tnH", "state", "established"])
    else {
        return Vec::new();
    };
    let mut members: Vec<usize> = out
        .lines()
        .filter_map(|l| l.split_whitespace().last()?.parse::<SocketAddr>().ok())
        .filter_map(|peer| store.member_at(peer))
        .collect();
    members.sort_unstable();
    members.dedup();
    members
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observer_lines_give_the_leader_token_and_value() {
        let line =
            "2026-11-23T04:00:00.123Z  leader  token 42  session 7  value \"app2\"  (revision 43)";
        assert_eq!(parse_observed(line), Some(ObservedLine::Leader(42, "app2".into())));
        let odd = "t  leader  token 9  session 1  value \"a\\\"  (revision b\"  (revision 9)";
        assert_eq!(parse_observed(odd), Some(ObservedLine::Leader(9, "a\\\"  (revision b".into())));
        assert_eq!(parse_observed("t  no leader  (revision 50)"), Some(ObservedLine::NoLeader));
        assert_eq!(parse_observed("t  changes missed: the cluster cannot resume"), None);
        assert_eq!(
            parse_observed("t  leader  token x  session 1  value \"a\"  (revision 2)"),
            None
        );
    }
}
