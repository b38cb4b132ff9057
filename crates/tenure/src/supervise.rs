//! `tenure server --supervised`: the supervisor spy (docs/SPIES.md).
//!
//! The supervisor runs the node (the elector) as a child process, this same
//! binary with the same flags but the supervisor's own, and waits for it.
//! When the child is reaped, its process is certainly dead: the supervisor
//! reads the incarnation it took from the data directory (whose lock the
//! kernel released at its death) and posts the death notice to every other
//! node's HTTP API (`POST /v1/peers/{id}/dead`, the admin token of
//! `--notify-token-file`), so that they elect a new leader at once when it
//! led, instead of after the election timeout. Then it starts the node
//! again, at once after a long run, with a growing pause after quick deaths.
//!
//! The supervisor knows only what `waitpid` tells: it reports nothing while
//! the child lives, however silent, and a host that is down or cut off
//! reports nothing either (its notices are retried for
//! [`NOTICE_RETRY_FOR`], then given up): the election timeout is the
//! fallback. SIGTERM and SIGINT are passed to the child (a leader hands over
//! before it exits); the supervisor exits when the child has, after its
//! notices. The child never outlives its supervisor: it asks the kernel for
//! SIGTERM at the supervisor's death (`PR_SET_PDEATHSIG`, see
//! [`bind_to_supervisor`]), so a killed supervisor costs a graceful handover,
//! not an orphan that holds the data directory.

use crate::notify_cli::{ask, Answered};
use crate::rest::{parse_endpoints, AuthRefused, Client, ClientOptions};
use anyhow::{bail, Context};
use futures_util::future::join_all;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, ExitStatus};
use std::time::Duration;
use tenure::config::ServerArgs;
use tenure_core::NodeId;
use tenure_node::storage::dead_incarnation;
use tenure_node::Security;
use tenure_server::http::auth::read_token_file;
use tenure_server::http::{ApiAuth, Role};
use tokio::process::Command;
use tokio::signal::unix::{signal, SignalKind};
use tokio::task::JoinHandle;
use tokio::time::{sleep, Instant};
use tracing::{error, info, warn};

/// The environment variable that tells a child node its supervisor's pid.
pub const SUPERVISOR_PID_ENV: &str = "TENURE_SUPERVISOR_PID";

/// The supervisor's own flags, removed from the child's command line.
pub const SUPERVISED_FLAG: &str = "--supervised";
/// See [`SUPERVISED_FLAG`].
pub const NOTIFY_TOKEN_FLAG: &str = "--notify-token-file";

/// Pause before the first restart after a quick death; doubles up to
/// [`RESTART_PAUSE_MAX`].
pub const RESTART_PAUSE_MIN: Duration = Duration::from_millis(100);
/// Longest pause between restarts.
pub const RESTART_PAUSE_MAX: Duration = Duration::from_secs(10);
/// A child that ran this long is restarted at once, and the pause starts
/// again from [`RESTART_PAUSE_MIN`].
pub const LONG_RUN: Duration = Duration::from_secs(10);
/// How long one node is asked again after no answer (it may be restarting,
/// or the network cut); a refusal is final.
pub const NOTICE_RETRY_FOR: Duration = Duration::from_secs(30);
/// Pause between two tries of one node.
pub const NOTICE_RETRY_PAUSE: Duration = Duration::from_millis(200);
/// How long a node may take to stop after the supervisor passed it SIGTERM
/// or SIGINT (a leader hands over first, in milliseconds) before it is
/// killed.
pub const STOP_GRACE: Duration = Duration::from_secs(30);
/// How long a stopping supervisor waits for its notices.
pub const NOTICE_WAIT_AT_STOP: Duration = Duration::from_secs(5);

/// What the supervisor needs besides the child's flags.
pub struct Supervision {
    /// The node the child runs.
    pub node: NodeId,
    /// Its data directory, where the dead incarnation is read.
    pub data_dir: PathBuf,
    /// The HTTP API addresses (HOST:PORT) of the other nodes.
    pub others: Vec<String>,
    /// The CA of the HTTP API's certificates, when it has TLS.
    pub cacert: Option<PathBuf>,
    /// The admin token the notices carry; `None` for an open API.
    pub token: Option<String>,
}

impl Supervision {
    /// The supervisor's settings, from the node's own: refused when nothing
    /// could be told (no other node's HTTP address) or the token would be
    /// refused.
    pub fn new(
        args: &ServerArgs,
        settings: &tenure::config::ServerSettings,
    ) -> anyhow::Result<Self> {
        let node = settings.node.id;
        let others: Vec<String> = settings
            .http_addresses
            .iter()
            .filter(|(id, _)| **id != node)
            .map(|(_, address)| address.clone())
            .collect();
        if others.is_empty() {
            bail!(
                "--supervised tells the other nodes' HTTP APIs of a death, but none is known: \
                 give --peer-http ID=HOST:PORT,... (peer_http in the config file)"
            );
        }
        let token = notify_token(args.notify_token_file.as_deref(), &settings.api)?;
        let cacert = match &settings.node.security {
            Security::MutualTls(files) => Some(files.ca.clone()),
            Security::InsecureNoTls => None,
        };
        Ok(Supervision { node, data_dir: settings.node.data_dir.clone(), others, cacert, token })
    }
}

/// The token of `--notify-token-file`, checked against this node's own
/// `api_tokens` (every node has the same): it must be an admin's. None with
/// an open API.
fn notify_token(file: Option<&Path>, api: &ApiAuth) -> anyhow::Result<Option<String>> {
    let Some(file) = file else {
        if api.is_insecure_open() {
            return Ok(None);
        }
        bail!(
            "--supervised sends death notices, which need a token of role admin: give \
             {NOTIFY_TOKEN_FLAG} FILE, a token of the config file's api_tokens"
        );
    };
    let token = read_token_file(file).context(NOTIFY_TOKEN_FLAG)?;
    if api.is_insecure_open() {
        return Ok(Some(token));
    }
    match api.role_of(&token) {
        Some(Role::Admin) => Ok(Some(token)),
        Some(role) => bail!(
            "{NOTIFY_TOKEN_FLAG} {}: the token has role {role}; death notices need admin",
            file.display()
        ),
        None => bail!(
            "{NOTIFY_TOKEN_FLAG} {}: the token is not one of the config file's api_tokens",
            file.display()
        ),
    }
}

/// The child's command line: this process's arguments without the
/// supervisor's flags (`--notify-token-file FILE` and its `=FILE` form).
pub fn child_args(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut out = Vec::new();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let text = arg.to_string_lossy();
        if text == SUPERVISED_FLAG {
            continue;
        }
        if text == NOTIFY_TOKEN_FLAG {
            args.next();
            continue;
        }
        if text.starts_with(&format!("{NOTIFY_TOKEN_FLAG}=")) {
            continue;
        }
        out.push(arg);
    }
    out
}

/// Runs the node as a supervised child until a stop signal or a clean exit
/// of the child.
pub async fn run(supervision: Supervision) -> anyhow::Result<ExitCode> {
    let exe = std::env::current_exe().context("--supervised: cannot find this program")?;
    let args = child_args(std::env::args_os().skip(1));
    let client = Client::new(ClientOptions {
        cacert: supervision.cacert.as_deref(),
        token: supervision.token.as_deref(),
    })?;
    let others = parse_endpoints(&supervision.others.join(","), client.https())?;
    let mut term = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
    let mut pause = RESTART_PAUSE_MIN;
    let mut notices: Vec<JoinHandle<()>> = Vec::new();
    loop {
        let started = Instant::now();
        let mut child = Command::new(&exe)
            .args(&args)
            .env(SUPERVISOR_PID_ENV, std::process::id().to_string())
            .spawn()
            .with_context(|| format!("--supervised: cannot start {}", exe.display()))?;
        let pid = child.id().context("the child has no pid")?;
        info!(node = %supervision.node, pid, "supervisor: node started");
        let (status, stopping) = tokio::select! {
            status = child.wait() => (status?, None),
            _ = term.recv() => (forward(&mut child, pid, Signal::SIGTERM).await?, Some("SIGTERM")),
            _ = int.recv() => (forward(&mut child, pid, Signal::SIGINT).await?, Some("SIGINT")),
        };
        notices.retain(|n| !n.is_finished());
        // Reaped: the process is dead, whatever its status says.
        notices.extend(report(&supervision, &client, &others, pid, status));
        if let Some(signal) = stopping {
            info!(node = %supervision.node, signal, %status, "supervisor: node stopped; exiting");
            finish(notices).await;
            return Ok(exit_code(status));
        }
        if let Some((code, why)) = final_exit(status) {
            info!(node = %supervision.node, %status, "supervisor: {why}; exiting");
            finish(notices).await;
            return Ok(code);
        }
        if started.elapsed() >= LONG_RUN {
            pause = RESTART_PAUSE_MIN;
        } else {
            warn!(node = %supervision.node, pause_ms = pause.as_millis() as u64,
                "supervisor: node died soon after its start; pausing before the restart");
            tokio::select! {
                _ = sleep(pause) => {}
                _ = term.recv() => { finish(notices).await; return Ok(ExitCode::FAILURE) }
                _ = int.recv() => { finish(notices).await; return Ok(ExitCode::FAILURE) }
            }
            pause = (pause * 2).min(RESTART_PAUSE_MAX);
        }
    }
}

/// The supervisor's exit status, and why, if the node's exit `status` is
/// final: it exited cleanly, or it was removed from the cluster
/// ([`crate::server_command::REMOVED_EXIT`]: a restart cannot help).
/// `None`: restart it.
fn final_exit(status: std::process::ExitStatus) -> Option<(ExitCode, &'static str)> {
    let removed = i32::from(crate::server_command::REMOVED_EXIT);
    match status.code() {
        Some(0) => Some((ExitCode::SUCCESS, "node exited cleanly")),
        Some(c) if c == removed => Some((
            ExitCode::from(crate::server_command::REMOVED_EXIT),
            "the node was removed from the cluster, which no restart mends",
        )),
        _ => None,
    }
}

/// In a child node (run with [`SUPERVISOR_PID_ENV`]): asks for SIGTERM when
/// the supervisor dies, and refuses to start if it is gone already. The
/// kernel sends it when the thread that forked this process exits; the
/// supervisor forks from its main thread, which lives as long as it does.
pub fn bind_to_supervisor() -> anyhow::Result<()> {
    let Ok(text) = std::env::var(SUPERVISOR_PID_ENV) else { return Ok(()) };
    let supervisor: i32 =
        text.parse().with_context(|| format!("{SUPERVISOR_PID_ENV}={text:?} is not a pid"))?;
    nix::sys::prctl::set_pdeathsig(Signal::SIGTERM)
        .context("cannot ask for a signal at the supervisor's death")?;
    // The supervisor may have died before the request above: then no
    // signal comes, and this process has another parent already.
    if nix::unistd::getppid() != Pid::from_raw(supervisor) {
        bail!("the supervisor ({supervisor}) is gone; not starting");
    }
    Ok(())
}

/// Passes `signal` to the child and waits for it to exit, at most
/// [`STOP_GRACE`]: then it is killed (and reported dead like any other).
async fn forward(
    child: &mut tokio::process::Child,
    pid: u32,
    signal: Signal,
) -> anyhow::Result<ExitStatus> {
    let pid = Pid::from_raw(i32::try_from(pid).context("pid out of range")?);
    if let Err(e) = kill(pid, signal) {
        warn!(%pid, %signal, error = %e, "supervisor: cannot signal the node");
    }
    if let Ok(status) = tokio::time::timeout(STOP_GRACE, child.wait()).await {
        return Ok(status?);
    }
    warn!(%pid, grace_s = STOP_GRACE.as_secs(), "supervisor: the node did not stop in time; killing it");
    child.kill().await?;
    Ok(child.wait().await?)
}

/// The dead child's incarnation, read now (before a restart takes the
/// next), and its notice sent to every other node in the background: the
/// task that sends it, or None when there is nothing to report.
fn report(
    s: &Supervision,
    client: &Client,
    others: &[String],
    pid: u32,
    status: ExitStatus,
) -> Option<JoinHandle<()>> {
    let node = s.node;
    let dead = match dead_incarnation(&s.data_dir) {
        Ok(dead) if dead.node_id == node => dead.incarnation,
        Ok(dead) => {
            error!(%node, found = %dead.node_id, "supervisor: the data directory is another node's; no notice");
            return None;
        }
        Err(e) => {
            // A child that died before it took an incarnation leaves none
            // (or the last one, also dead: a stale notice does nothing).
            warn!(%node, pid, error = %e, "supervisor: no incarnation to report");
            return None;
        }
    };
    warn!(%node, pid, %status, incarnation = dead, "supervisor: node died; telling the others");
    let client = client.clone();
    let others = others.to_vec();
    Some(tokio::spawn(async move {
        let tells = others.iter().map(|e| tell(&client, e, node, dead));
        join_all(tells).await;
    }))
}

/// Tells one node, again after no answer for up to [`NOTICE_RETRY_FOR`]; a
/// refusal, of the notice or of the token, is final.
async fn tell(client: &Client, endpoint: &str, node: NodeId, incarnation: u64) {
    let until = Instant::now() + NOTICE_RETRY_FOR;
    loop {
        match ask(client, endpoint, node.0, incarnation).await {
            Answered::Accepted(body) => {
                info!(%node, incarnation, endpoint, was_leader = body.was_leader,
                    "supervisor: death notice accepted");
                return;
            }
            Answered::Refused { status, error, .. } => {
                info!(%node, incarnation, endpoint, status, error, "supervisor: death notice refused");
                return;
            }
            Answered::Failed(e) if e.is::<AuthRefused>() => {
                error!(%node, incarnation, endpoint, error = %format!("{e:#}"),
                    "supervisor: the notice token was refused (was api_tokens changed?); not retried");
                return;
            }
            Answered::Failed(e) if Instant::now() + NOTICE_RETRY_PAUSE < until => {
                tracing::debug!(%node, endpoint, error = %format!("{e:#}"), "supervisor: no answer; trying again");
                sleep(NOTICE_RETRY_PAUSE).await;
            }
            Answered::Failed(e) => {
                warn!(%node, incarnation, endpoint, error = %format!("{e:#}"),
                    "supervisor: death notice not delivered; that node waits for its election timeout");
                return;
            }
        }
    }
}

/// Waits for the notices still under way, at most [`NOTICE_WAIT_AT_STOP`].
async fn finish(notices: Vec<JoinHandle<()>>) {
    if tokio::time::timeout(NOTICE_WAIT_AT_STOP, join_all(notices)).await.is_err() {
        warn!("supervisor: exiting with death notices still unanswered");
    }
}

/// The supervisor's exit status for the child's.
fn exit_code(status: ExitStatus) -> ExitCode {
    match status.code() {
        Some(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        None => ExitCode::FAILURE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    #[test]
    fn a_clean_exit_and_a_removal_are_final_and_the_rest_restarts() {
        use std::os::unix::process::ExitStatusExt;
        use std::process::ExitStatus;
        let code = |c: i32| ExitStatus::from_raw(c << 8);
        assert_eq!(final_exit(code(0)).map(|(c, _)| c), Some(ExitCode::SUCCESS));
        assert_eq!(final_exit(code(78)).map(|(c, _)| c), Some(ExitCode::from(78)));
        for restarted in [code(1), code(64), code(101), ExitStatus::from_raw(9)] {
            assert!(final_exit(restarted).is_none(), "{restarted}");
        }
    }

    #[test]
    fn the_child_gets_every_flag_but_the_supervisors() {
        let given = args(&[
            "server",
            "--id",
            "2",
            "--supervised",
            "--notify-token-file",
            "/etc/t",
            "--data-dir",
            "d",
            "--notify-token-file=/x",
        ]);
        assert_eq!(child_args(given), args(&["server", "--id", "2", "--data-dir", "d"]));
    }
}
