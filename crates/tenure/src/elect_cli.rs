//! `tenure elect`: campaign in a named election and hold it until Ctrl-C or
//! loss; `tenure elect --observe`: print every change of an election.

use crate::client::{timestamp, CACERT_ENV, DEFAULT_ENDPOINTS, ENDPOINTS_ENV};
use crate::store_url::{
    StoreAuth, StoreUrl, STORE_CACERT_ENV, STORE_ENV, STORE_MIN_TTL_ENV, STORE_USER_ENV,
};
use anyhow::{bail, Context};
use clap::Args;
use futures_util::StreamExt;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tenure::tokens::TokenArgs;
use tenure_client::{
    Candidacy, Cluster, Election, Observed, Session, Store, StoreError, TenureStore,
};
use tokio::signal::unix::{signal, Signal, SignalKind};

/// Exit status when leadership (or the session) was lost.
pub const EXIT_LOST: u8 = 2;
/// The default session TTL, in milliseconds: 10 s (etcdctl's `elect` uses
/// a 60 s lease); a crashed leader is replaced about one TTL later.
pub const DEFAULT_TTL_MS: u64 = 10_000;

/// What `tenure elect --help` says after the flags: examples, the exit statuses and
/// when leadership is given up.
pub const ELECT_HELP: &str = "\
Examples:
  tenure elect nightly-report --value host-a --token-file ~/.tenure/write.token
  tenure elect nightly-report --observe
  tenure elect nightly-report --store etcd://10.0.0.1:2379,10.0.0.2:2379 --ttl-ms 5000

Exit status: 0 after Ctrl-C or SIGTERM (it resigned first, so the next candidate leads at \
once), 2 when leadership was lost (the reason is printed: no renewal succeeded before the \
session's deadline, or the cluster ended the session), 1 on other errors.

The session is renewed every TTL/3; without a successful renewal, leadership is given up at \
the deadline: the last successful renewal's send time + TTL x 0.9/1.1 (the 10% clock-drift \
bound), before the cluster can elect a successor.";

/// How every election command reaches the cluster.
#[derive(Args, Debug, Clone)]
pub struct ConnArgs {
    /// HTTP API endpoints of the nodes, comma-separated; when one does not answer, the next
    /// is asked.
    #[arg(long, short = 'e', env = ENDPOINTS_ENV, value_name = "URL,...", default_value = DEFAULT_ENDPOINTS)]
    pub endpoints: String,
    /// The store that holds the election: tenure://HOST:PORT,... (tenure's own cluster; the
    /// default, through --endpoints), etcd://HOST:PORT,... (an etcd cluster's client URLs) or
    /// zk://HOST:PORT,... (a ZooKeeper ensemble); see docs/STORES.md.
    #[arg(long, env = STORE_ENV, value_name = "URL")]
    pub store: Option<String>,
    /// With an etcd store: the CA certificate (PEM) that signed the members' certificates;
    /// the endpoints are then https://.
    #[arg(long, env = STORE_CACERT_ENV, value_name = "FILE", requires = "store")]
    pub store_cacert: Option<PathBuf>,
    /// With an etcd store whose authentication is on: the user, whose password is read
    /// from TENURE_STORE_PASSWORD.
    #[arg(long, env = STORE_USER_ENV, value_name = "NAME", requires = "store")]
    pub store_user: Option<String>,
    /// With --store zk://: refuse a session the ensemble negotiates below this many
    /// milliseconds. Set it to 2 x syncLimit x tickTime of the ensemble when its
    /// minSessionTimeout was lowered below 2 ticks (docs/STORES.md, section 3.3: the
    /// deadline's argument needs renewals no closer than the followers' pings).
    #[arg(long, env = STORE_MIN_TTL_ENV, value_name = "N", requires = "store")]
    pub store_min_ttl_ms: Option<u64>,
    /// The cluster's CA certificate (PEM, from `tenure cert`): endpoints without a scheme
    /// are then https://, and the servers' certificates are checked against it.
    #[arg(long, env = CACERT_ENV, value_name = "FILE")]
    pub cacert: Option<PathBuf>,
    /// Campaigning needs a token of role write; --observe role read.
    #[command(flatten)]
    pub auth: TokenArgs,
}

impl ConnArgs {
    /// The tenure cluster these flags name (`--endpoints`).
    pub fn cluster(&self) -> anyhow::Result<Arc<Cluster>> {
        crate::store_url::tenure_cluster(self.cacert.as_deref(), &self.auth, &self.endpoints)
    }

    /// The store these flags name: `--store`, else tenure's cluster at
    /// `--endpoints`.
    pub fn store(&self) -> anyhow::Result<Arc<dyn Store>> {
        let Some(url) = self.store.as_deref() else {
            return Ok(Arc::new(TenureStore::new(self.cluster()?)));
        };
        // Not clap's `conflicts_with`: that counts TENURE_ENDPOINTS set in
        // the environment as the flag given, and --store would then be
        // refused for a variable meant for other commands.
        let from_env = std::env::var(ENDPOINTS_ENV).ok();
        if self.endpoints != DEFAULT_ENDPOINTS && from_env.as_deref() != Some(&self.endpoints) {
            return Err(crate::usage::usage(format!(
                "--store and --endpoints both name the store: give one (--store tenure://{} for \
                 tenure's cluster)",
                self.endpoints
            )));
        }
        let url = crate::store_url::parse(url)?;
        if matches!(url, StoreUrl::Tenure(_))
            && (self.store_cacert.is_some() || self.store_user.is_some())
        {
            return Err(crate::usage::usage(
                "--store-cacert and --store-user are for etcd stores; tenure's cluster takes \
                 --cacert and --token",
            ));
        }
        let auth = StoreAuth {
            cacert: self.store_cacert.clone(),
            user: self.store_user.clone(),
            zk_min_ttl: self.store_min_ttl_ms.map(Duration::from_millis),
        };
        crate::store_url::open(&url, self.cacert.as_deref(), &self.auth, &auth)
    }
}

/// Flags of `tenure elect`.
#[derive(Args, Debug)]
pub struct ElectArgs {
    /// The election: 1 to 128 characters of A-Z a-z 0-9 . _ -
    #[arg(value_name = "NAME")]
    pub name: String,
    /// The value this candidate publishes while it leads (observers see it; at most 4096
    /// bytes) [default: "pid <PID>"].
    #[arg(long, value_name = "V", conflicts_with = "observe")]
    pub value: Option<String>,
    /// The session's TTL in milliseconds (500 to 86400000): a leader that crashed is
    /// replaced about this long after its last renewal. A store may grant another
    /// (etcd: whole seconds, at least 1.5 of its election timeouts; ZooKeeper: 2 to 20
    /// ticks); a line on standard error says so. To ride out a tenure failover:
    /// TTL x 0.9/1.1 - TTL/3 - grace >= failover bound (GET /v1/status; 1555 ms at the
    /// default timings) + 200 ms + 2 round trips; a warning says when it does not.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_TTL_MS, conflicts_with = "observe")]
    pub ttl_ms: u64,
    /// Do not campaign: print every change of the election (its leader with value and
    /// fencing token, and "no leader") until Ctrl-C. A dropped connection is resumed on
    /// the next endpoint from the last change printed: the changes in between are printed.
    #[arg(long)]
    pub observe: bool,
    #[command(flatten)]
    pub conn: ConnArgs,
}

/// The value of a candidate: `--value`, else `pid <PID>`.
pub fn value_or_pid(value: Option<&str>) -> String {
    value.map_or_else(|| format!("pid {}", std::process::id()), str::to_string)
}

/// The TTL flag as a duration, checked against the servers' range.
pub fn ttl_of(ttl_ms: u64) -> anyhow::Result<Duration> {
    let ttl = Duration::from_millis(ttl_ms);
    tenure_client::session::check_ttl(ttl)
        .map_err(|e| crate::usage::usage(format!("bad --ttl-ms: {e}")))?;
    Ok(ttl)
}

/// SIGINT (Ctrl-C) and SIGTERM, the requests to stop.
pub struct StopSignals {
    int: Signal,
    term: Signal,
}

impl StopSignals {
    /// Starts catching SIGINT and SIGTERM.
    pub fn new() -> anyhow::Result<StopSignals> {
        Ok(StopSignals {
            int: signal(SignalKind::interrupt()).context("catching SIGINT")?,
            term: signal(SignalKind::terminate()).context("catching SIGTERM")?,
        })
    }

    /// Returns at the next SIGINT or SIGTERM.
    pub async fn recv(&mut self) {
        tokio::select! {
            _ = self.int.recv() => {}
            _ = self.term.recv() => {}
        }
    }
}

/// `tenure elect`.
pub async fn run(args: ElectArgs) -> anyhow::Result<ExitCode> {
    tenure_client::election::check_name(&args.name).map_err(crate::usage::usage)?;
    let store = args.conn.store()?;
    let election = Election::new(store.clone(), &args.name)?;
    let mut signals = StopSignals::new()?;
    if args.observe {
        return observe(&election, &mut signals).await;
    }
    let value = value_or_pid(args.value.as_deref());
    tenure_client::election::check_value(&value)
        .map_err(|e| crate::usage::usage(format!("bad --value: {e}")))?;
    let ttl = ttl_of(args.ttl_ms)?;
    warn_failover(&store, ttl, |_| Duration::ZERO).await;
    let session = grant(&store, ttl).await?;
    let (token, candidacy) = tokio::select! {
        _ = signals.recv() => {
            let _ = session.close().await;
            return Ok(ExitCode::SUCCESS);
        }
        t = campaign(&election, &session, &value) => match t {
            Ok(t) => t,
            Err(e) => {
                let _ = session.close().await;
                return Err(e);
            }
        },
    };
    println!("elected {}: fencing token {token} (session {})", args.name, session.id());
    let _ = std::io::stdout().flush();
    tokio::select! {
        _ = signals.recv() => {
            let resigned = election.resign(&candidacy).await;
            let _ = session.close().await;
            resigned.context("resigning")?;
            eprintln!("{}  resigned {}", timestamp(), args.name);
            Ok(ExitCode::SUCCESS)
        }
        loss = session.lost() => {
            eprintln!("{}  lost leadership of {}: {loss}", timestamp(), args.name);
            let _ = session.close().await;
            Ok(ExitCode::from(EXIT_LOST))
        }
        why = election.deposed(&session, &candidacy) => {
            eprintln!("{}  lost leadership of {}: deposed ({why})", timestamp(), args.name);
            let _ = session.close().await;
            Ok(ExitCode::from(EXIT_LOST))
        }
    }
}

/// Says on standard error (once per process) when a session of `ttl`
/// whose work stops `grace(ttl)` before its deadline cannot ride out one
/// failover of tenure's cluster (docs/ELECTIONS.md, "Riding out a tenure
/// failover"). A warning, not a refusal: the leadership is then given up
/// safely, at its deadline, during a tenure failover, which a user may
/// prefer to a slower application failover. etcd and ZooKeeper stores do
/// not tell their election timeouts: nothing is checked.
pub async fn warn_failover(
    store: &Arc<dyn Store>,
    ttl: Duration,
    grace: impl Fn(Duration) -> Duration,
) {
    let plan = |ttl| tenure_client::failover::Plan {
        ttl,
        interval: store.renew_interval(ttl),
        lag: store.renewal_lag(ttl),
        grace: grace(ttl),
    };
    if let Some(w) = tenure_client::failover::warning(&**store, ttl, plan).await {
        if !FAILOVER_TOLD.swap(true, Ordering::Relaxed) {
            eprintln!("{}  warning: {w}", timestamp());
        }
    }
}

/// Whether this process warned that its TTL cannot ride out a failover.
static FAILOVER_TOLD: AtomicBool = AtomicBool::new(false);

/// How long a grant is tried again while the cluster has no ready leader
/// (503 from every endpoint, or none reachable before the request was sent).
pub const GRANT_WAIT: Duration = Duration::from_secs(5);
/// Pause between grant attempts.
const GRANT_RETRY_PAUSE: Duration = Duration::from_millis(100);
/// Whether this process said that the store granted another TTL.
static TTL_TOLD: AtomicBool = AtomicBool::new(false);

/// Grants a session, trying again for up to [`GRANT_WAIT`] while no node
/// can grant one (during a tenure election), also after a grant whose
/// outcome is unknown (no answer, or the server's 504 at a failover): a
/// session granted then is never renewed and expires within its TTL,
/// holding nothing, while giving up would end `tenure run --keep-trying`.
pub async fn grant(store: &Arc<dyn Store>, ttl: Duration) -> anyhow::Result<Session> {
    let until = tokio::time::Instant::now() + GRANT_WAIT;
    loop {
        let e = match Session::start(store.clone(), ttl).await {
            Ok(session) => {
                // Once per process (`tenure run` may grant many sessions).
                if session.ttl() != ttl && !TTL_TOLD.swap(true, Ordering::Relaxed) {
                    // etcd takes whole seconds (rounded up) and raises a
                    // lease to 1.5 of its election timeouts; ZooKeeper keeps
                    // sessions within 2 to 20 ticks. The TTL was chosen for
                    // the failover time.
                    eprintln!(
                        "{}  the store granted session {} a TTL of {} ms, not the {} ms asked \
                         for: if this holder dies, the next one leads about {} ms after its \
                         last renewal",
                        timestamp(),
                        session.id(),
                        session.ttl().as_millis(),
                        ttl.as_millis(),
                        session.ttl().as_millis()
                    );
                }
                return Ok(session);
            }
            Err(e) => e,
        };
        let retry = matches!(
            &e,
            tenure_client::elect::Error::Store(
                StoreError::Unavailable { .. } | StoreError::NoAnswer { .. }
            )
        );
        if !retry || tokio::time::Instant::now() + GRANT_RETRY_PAUSE > until {
            return Err(crate::rest::lift(e).context("granting a session"));
        }
        tokio::time::sleep(GRANT_RETRY_PAUSE).await;
    }
}

/// Campaigns with `session` and waits until it leads: its token and candidacy.
pub async fn campaign(
    election: &Election,
    session: &Session,
    value: &str,
) -> anyhow::Result<(u64, Candidacy)> {
    let c = election
        .campaign(session, value)
        .await
        .with_context(|| format!("campaigning in {}", election.name()))?;
    if c.leader {
        return Ok((c.token, c));
    }
    eprintln!(
        "{}  campaigning in {} as session {} (candidacy {}, token {} if elected)",
        timestamp(),
        election.name(),
        session.id(),
        c.key,
        c.token
    );
    let token = election
        .wait_until_leader(session, &c)
        .await
        .with_context(|| format!("waiting to lead {}", election.name()))?;
    Ok((token, c))
}

/// `tenure elect --observe`.
async fn observe(election: &Election, signals: &mut StopSignals) -> anyhow::Result<ExitCode> {
    let mut observer = election.observe()?;
    loop {
        let event = tokio::select! {
            _ = signals.recv() => return Ok(ExitCode::SUCCESS),
            e = observer.next() => match e {
                Some(e) => e?,
                None => bail!("observing {}: the store ended the stream", election.name()),
            },
        };
        println!("{}  {}", timestamp(), describe(&event));
        let _ = std::io::stdout().flush();
    }
}

/// One line of `tenure elect --observe`.
pub fn describe(event: &Observed) -> String {
    match event {
        Observed::Leader { session, value, token, revision } => format!(
            "leader  token {token}  session {session}  value {value:?}  (revision {revision})"
        ),
        Observed::NoLeader { revision } => format!("no leader  (revision {revision})"),
        // A resumption the cluster refused (restored with a lower revision).
        Observed::Missed { compacted, current } if compacted >= current => format!(
            "changes missed: the cluster cannot resume after revision {compacted} (it is at \
             {current}); the state as of revision {current} follows"
        ),
        Observed::Missed { compacted, current } => format!(
            "changes missed while disconnected (history up to revision {compacted} is no \
             longer kept); the state as of revision {current} follows"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_and_value_flags_are_checked() {
        assert!(ttl_of(10_000).is_ok());
        let err = format!("{:#}", ttl_of(100).unwrap_err());
        assert!(err.contains("--ttl-ms") && err.contains("500"), "{err}");
        assert_eq!(value_or_pid(Some("a")), "a");
        assert!(value_or_pid(None).starts_with("pid "));
    }

    #[derive(clap::Parser)]
    struct Wrap {
        #[command(flatten)]
        elect: ElectArgs,
    }

    #[test]
    fn observe_takes_neither_a_value_nor_a_ttl() {
        use clap::Parser;
        let w = Wrap::try_parse_from(["t", "--observe", "app"]).unwrap();
        assert!(w.elect.observe && w.elect.name == "app");
        assert!(Wrap::try_parse_from(["t", "--observe", "app", "--value", "v"]).is_err());
        assert!(Wrap::try_parse_from(["t", "--observe", "app", "--ttl-ms", "900"]).is_err());
        let w = Wrap::try_parse_from(["t", "app", "--value", "v", "--ttl-ms", "900"]).unwrap();
        assert_eq!((w.elect.value.as_deref(), w.elect.ttl_ms), (Some("v"), 900));
        assert!(Wrap::try_parse_from(["t"]).is_err(), "a name is required");
    }

    #[test]
    fn observed_changes_are_printed_with_value_token_and_no_leader() {
        let leader = Observed::Leader { session: 7, value: "a b".into(), token: 42, revision: 42 };
        assert_eq!(describe(&leader), "leader  token 42  session 7  value \"a b\"  (revision 42)");
        assert_eq!(describe(&Observed::NoLeader { revision: 50 }), "no leader  (revision 50)");
        let missed = describe(&Observed::Missed { compacted: 60, current: 70 });
        assert!(missed.contains("missed") && missed.contains("as of revision 70"), "{missed}");
        let refused = describe(&Observed::Missed { compacted: 90, current: 70 });
        assert!(refused.contains("cannot resume after revision 90"), "{refused}");
    }
}
