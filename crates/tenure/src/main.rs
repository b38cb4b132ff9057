//! The `tenure` binary: run a node, inspect and steer a cluster, watch a demo.
//!
//! `main` only dispatches; each subcommand lives in a module of its own. The
//! server itself (node, HTTP API, metrics) is the `tenure-server` library;
//! this binary reads its settings (the `tenure` library: flags, config file,
//! tokens, logging), binds its listeners and handles the signals.
#![warn(missing_docs)]

mod cert;
mod client;
mod demo;
mod elect_cli;
mod kv_cli;
mod member_cli;
mod notify_cli;
mod partitions_cli;
mod rest;
mod run_cli;
mod run_group;
mod run_keeper;
mod server_command;
mod store_settings;
mod store_url;
mod supervise;
mod usage;

// The server's settings from flags and the config file and the log output:
// this package's library (the fuzz targets parse config files with it). The
// modules here name it (`tenure::tokens`) and the API's bodies
// (`tenure_api`) directly, so none of them imports this file.
use tenure::{config, logging};

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// tenure: leader election for a cluster of servers.
#[derive(Parser)]
#[command(
    name = "tenure",
    version,
    about,
    after_help = "Examples:
  tenure demo
  tenure server --config /etc/tenure/tenure.toml
  tenure status --endpoints https://10.0.0.1:8001,https://10.0.0.2:8001

Every command exits 64 on a usage error (an unknown flag, a missing or malformed argument: \
nothing was done); its other exit statuses are in its --help."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a node of a cluster (peer transport + HTTP API).
    Server(Box<config::ServerArgs>),
    /// Show a table of the cluster, one row per endpoint.
    Status(client::StatusArgs),
    /// Print each leadership change as it happens.
    Watch(client::WatchArgs),
    /// Hand leadership to another node.
    Transfer(client::TransferArgs),
    /// List, add, remove, promote or replace the cluster's members (voters and learners).
    #[command(after_help = member_cli::MEMBER_HELP)]
    Member(member_cli::MemberArgs),
    /// Show a group of partitions: its members, every partition's owner and epoch, the balance.
    Partitions(partitions_cli::PartitionsArgs),
    /// Tell the nodes that a node's process is dead (systemd's ExecStopPost, a supervisor),
    /// so that they elect a new leader at once instead of after the election timeout.
    #[command(after_help = notify_cli::NOTIFY_HELP)]
    NotifyDead(notify_cli::NotifyDeadArgs),
    /// Read and write the cluster's replicated key-value store (put, get, del, list, watch, txn).
    #[command(after_help = kv_cli::kv_help())]
    Kv(kv_cli::KvArgs),
    /// Campaign in a named election: block until elected, print the fencing token, hold
    /// until Ctrl-C (resign) or loss; or, with --observe, print every change of an election.
    #[command(after_help = elect_cli::ELECT_HELP)]
    Elect(elect_cli::ElectArgs),
    /// Run a command only while leading a named election; stop it before a successor can lead.
    #[command(after_help = run_cli::RUN_HELP)]
    Run(run_cli::RunArgs),
    /// The guard of `tenure run`'s command (internal).
    #[command(hide = true)]
    RunGuard(run_cli::GuardArgs),
    /// The keeper of `tenure run`'s command, in the command's process group (internal).
    #[command(hide = true)]
    RunKeeper(run_keeper::KeeperArgs),
    /// Make a CA and node certificates for a cluster (TLS for peers and the HTTP API), and
    /// client certificates for applications of the etcd listener.
    Cert(cert::CertArgs),
    /// Start a local cluster, kill its leader, and show the failover.
    Demo(demo::DemoArgs),
    /// Run the deterministic simulator against the real election core.
    Sim(tenure_sim::cli::SimArgs),
    /// Measure failover latency (optionally against etcd) or soak a cluster under CPU load.
    Bench(tenure_bench::BenchArgs),
    /// CPU burner for `tenure bench soak` (internal).
    #[command(hide = true)]
    Burn(tenure_bench::soak::BurnArgs),
    /// A member process of `tenure bench partitions` (internal).
    #[command(hide = true)]
    BenchPartitionsMember(tenure_bench::partitions::MemberArgs),
}

/// Exit status of a usage error (an unknown flag, a missing or malformed
/// argument: nothing was done), sysexits' `EX_USAGE`. clap's own 2 would
/// read as a command's documented 2 (`tenure status`: the endpoints
/// disagree; `tenure elect`: leadership lost; `tenure kv`: a conflict).
const USAGE_ERROR: u8 = 64;

/// The environment variables that stand for flags (clap's `env`).
const FLAG_VARIABLES: [&str; 6] = [
    tenure_client::CACERT_ENV,
    client::ENDPOINTS_ENV,
    store_url::STORE_ENV,
    store_url::STORE_CACERT_ENV,
    store_url::STORE_USER_ENV,
    store_url::STORE_MIN_TTL_ENV,
];

/// A variable of [`FLAG_VARIABLES`] set to nothing (`export
/// TENURE_CACERT=`, or `TENURE_CACERT= tenure status`) means unset to a
/// shell user; clap would read it as the flag given without its value.
fn forget_empty_flag_variables() {
    for var in FLAG_VARIABLES {
        if std::env::var_os(var).is_some_and(|v| v.is_empty()) {
            // Before any other thread runs: nothing reads the environment
            // meanwhile.
            std::env::remove_var(var);
        }
    }
}

fn main() -> ExitCode {
    forget_empty_flag_variables();
    let command = match Cli::try_parse() {
        Ok(cli) => cli.command,
        Err(e) => {
            // Help and version go to stdout and exit 0, as with `parse`.
            let _ = e.print();
            return if e.exit_code() == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(USAGE_ERROR)
            };
        }
    };
    if reports_only(&command) {
        die_when_stdout_breaks();
    }
    if matches!(command, Command::Server(_)) {
        survive_file_size_limit();
    }
    let result = match command {
        Command::Sim(args) => return tenure_sim::cli::run(args),
        Command::Server(args) => block_on(server_command::run(*args)),
        Command::Status(args) => block_on(client::status(args)),
        Command::Watch(args) => block_on(client::watch(args)),
        Command::Transfer(args) => block_on(client::transfer(args)),
        Command::Member(args) => block_on(member_cli::run(args)),
        Command::Partitions(args) => block_on(partitions_cli::run(args)),
        Command::NotifyDead(args) => block_on(notify_cli::run(args)),
        Command::Kv(args) => block_on(kv_cli::run(args)),
        Command::Elect(args) => block_on(elect_cli::run(args)),
        Command::Run(args) => block_on(run_cli::run(args)),
        Command::RunGuard(args) => block_on_then_leave(run_cli::guard(args)),
        // Synchronous, one thread: see `run_keeper`.
        Command::RunKeeper(args) => return run_keeper::keeper(args),
        Command::Demo(args) => block_on(demo::run(args)),
        Command::Bench(args) => block_on(tenure_bench::run(args)),
        Command::Burn(args) => return tenure_bench::soak::burn(args),
        Command::BenchPartitionsMember(args) => {
            block_on_one_thread(tenure_bench::partitions::member(args, |url| {
                store_url::open_external(&store_url::parse(url)?, &Default::default())
            }))
        }
        Command::Cert(args) => cert::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) if usage::is_usage(&e) => {
            eprintln!("error: {e:#}\n\nFor more information, try '--help'.");
            ExitCode::from(USAGE_ERROR)
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Whether `command` only reports (prints to stdout, holds nothing): such
/// a command ends as `cat` does when its reader goes away (`tenure kv list
/// | head -1`), by SIGPIPE ([`die_when_stdout_breaks`]). The others keep
/// Rust's default, SIGPIPE ignored, so that a write to a closed pipe is an
/// error they handle: the server and `tenure run` write to sockets and to
/// their guard's stdin (a guard that died must not kill `tenure run` before
/// it stopped the command and resigned), and `tenure elect` must resign
/// before it exits.
fn reports_only(command: &Command) -> bool {
    match command {
        Command::Status(_)
        | Command::Watch(_)
        | Command::Transfer(_)
        | Command::Member(_)
        | Command::Partitions(_)
        | Command::NotifyDead(_)
        | Command::Kv(_)
        | Command::Cert(_)
        | Command::Sim(_) => true,
        Command::Elect(args) => args.observe,
        Command::Server(_)
        | Command::Run(_)
        | Command::RunGuard(_)
        | Command::RunKeeper(_)
        | Command::Demo(_)
        | Command::Bench(_)
        | Command::Burn(_)
        | Command::BenchPartitionsMember(_) => false,
    }
}

/// Ends the process by SIGPIPE when stdout's reader went away, as `cat`
/// does (the Rust runtime ignores SIGPIPE, which makes `println!` panic,
/// exit 101, on a closed pipe), and only then: a SIGPIPE raised by a write
/// to a socket the server closed (TLS writes its records with `writev`,
/// which has no `MSG_NOSIGNAL`) is ignored, so that write fails with
/// `EPIPE` and the command says what happened. With SIGPIPE's default
/// action, `tenure status` against a port that hung up after the TLS
/// handshake died silently with exit 141.
fn die_when_stdout_breaks() {
    use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
    let action =
        SigAction::new(SigHandler::Handler(on_sigpipe), SaFlags::SA_RESTART, SigSet::empty());
    // SAFETY: no other thread runs yet; the handler calls only
    // async-signal-safe functions (poll, signal, raise).
    if let Err(e) = unsafe { sigaction(Signal::SIGPIPE, &action) } {
        eprintln!("warning: cannot handle SIGPIPE: {e}");
    }
}

/// The SIGPIPE handler of [`die_when_stdout_breaks`]: if stdout is a pipe
/// (or socket) whose reader is gone, SIGPIPE's default action ends the
/// process once the handler returns (the signal is blocked until then);
/// otherwise nothing, and the write that raised it fails with `EPIPE`.
extern "C" fn on_sigpipe(_: nix::libc::c_int) {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use nix::sys::signal::{raise, signal, SigHandler, Signal};
    // SAFETY: descriptor 1 outlives this call (nothing here closes it).
    let stdout = unsafe { std::os::fd::BorrowedFd::borrow_raw(1) };
    let mut fds = [PollFd::new(stdout, PollFlags::empty())];
    let broken = poll(&mut fds, PollTimeout::ZERO).is_ok_and(|n| n > 0)
        && fds[0].revents().is_some_and(|r| r.intersects(PollFlags::POLLERR | PollFlags::POLLHUP));
    if broken {
        // SAFETY: the default action installs no handler code.
        let _ = unsafe { signal(Signal::SIGPIPE, SigHandler::SigDfl) };
        let _ = raise(Signal::SIGPIPE);
    }
}

/// Ignores SIGXFSZ, whose default action kills the process at a write
/// past its file size limit (`ulimit -f`, RLIMIT_FSIZE): the write fails
/// with EFBIG instead, and the server handles it as any failed write of its
/// log (docs/REPLICATION.md: it stops taking part, a leader gives its
/// leadership up, and it reopens the log once writes work again).
fn survive_file_size_limit() {
    use nix::sys::signal::{signal, SigHandler, Signal};
    // SAFETY: no other thread runs yet and ignoring installs no handler code.
    if let Err(e) = unsafe { signal(Signal::SIGXFSZ, SigHandler::SigIgn) } {
        eprintln!("warning: cannot ignore SIGXFSZ: {e}");
    }
}

/// Runs a subcommand on a multi-threaded tokio runtime.
fn block_on<F>(future: F) -> anyhow::Result<ExitCode>
where
    F: std::future::Future<Output = anyhow::Result<ExitCode>>,
{
    runtime()?.block_on(future)
}

/// Runs a subcommand on a current-thread tokio runtime: a bench's member
/// process, one of many sharing the machine with the servers it measures,
/// whose wake-ups then stay on one thread.
fn block_on_one_thread<F>(future: F) -> anyhow::Result<ExitCode>
where
    F: std::future::Future<Output = anyhow::Result<ExitCode>>,
{
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| anyhow::anyhow!("cannot start the async runtime: {e}"))?
        .block_on(future)
}

/// A multi-threaded tokio runtime with every driver enabled.
fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| anyhow::anyhow!("cannot start the async runtime: {e}"))
}

/// Like [`block_on`], but does not wait for blocking tasks at the end: the
/// guard of `tenure run` reads its stdin on a blocking thread, which stays
/// blocked while its parent keeps the pipe open (a paused `tenure run`), and
/// the guard must exit as soon as its command did.
fn block_on_then_leave<F>(future: F) -> anyhow::Result<ExitCode>
where
    F: std::future::Future<Output = anyhow::Result<ExitCode>>,
{
    let runtime = runtime()?;
    let result = runtime.block_on(future);
    runtime.shutdown_background();
    result
}

#[cfg(test)]
mod tests {
    use super::Cli;
    use clap::{CommandFactory, Parser};

    /// Every command a user can see, with its path (`tenure kv put`).
    fn visible(cmd: &clap::Command, path: String, out: &mut Vec<(String, clap::Command)>) {
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set() && s.get_name() != "help") {
            let p = format!("{path} {}", sub.get_name());
            out.push((p.clone(), sub.clone()));
            visible(sub, p, out);
        }
    }

    /// The command lines of the examples in `help`. An example block is the paragraph (up
    /// to a blank line) from a line that says "Example" ("Example:", "Examples:", "Example,
    /// three hosts:"); its commands are its indented lines and what follows the colon on
    /// that line (`Example: tenure ...`). A trailing `\` joins the next line. Only lines
    /// that are a `tenure` command, after a `$ ` prompt and `VAR=value` assignments, count:
    /// the others are output or prose.
    fn example_commands(help: &str) -> Vec<String> {
        let mut commands = Vec::new();
        let mut lines = help.lines();
        let mut in_block = false;
        while let Some(line) = lines.next() {
            let text = if let Some(at) = line.find("Example") {
                in_block = true;
                line[at..].split_once(':').map_or("", |(_, rest)| rest)
            } else if line.trim().is_empty() {
                in_block = false;
                continue;
            } else if in_block && line.starts_with(char::is_whitespace) {
                line
            } else {
                continue;
            };
            let mut text = text.trim().to_string();
            while let Some(head) = text.strip_suffix('\\') {
                text = format!("{} {}", head.trim_end(), lines.next().unwrap_or_default().trim());
            }
            let command = text
                .split_whitespace()
                .find(|word| *word != "$" && !is_assignment(word))
                .is_some_and(|word| word == "tenure");
            if command {
                commands.push(text);
            }
        }
        commands
    }

    /// Whether `word` is a shell variable assignment (`TENURE_FSYNC_DELAY_MS=4`).
    fn is_assignment(word: &str) -> bool {
        word.split_once('=').is_some_and(|(name, _)| {
            !name.is_empty() && name.chars().all(|c| c == '_' || c.is_ascii_alphanumeric())
        })
    }

    /// `line` split as a shell splits it, simply: at whitespace outside quotes, '...' and
    /// "..." taken literally, an unquoted `#` at the start of a word beginning a comment;
    /// without the leading `$ ` prompt and variable assignments.
    fn shell_words(line: &str) -> Result<Vec<String>, String> {
        let mut words = Vec::new();
        let mut word: Option<String> = None;
        let mut chars = line.chars();
        while let Some(c) = chars.next() {
            match c {
                '\'' | '"' => {
                    let w = word.get_or_insert_with(String::new);
                    loop {
                        match chars.next() {
                            Some(q) if q == c => break,
                            Some(other) => w.push(other),
                            None => return Err(format!("unbalanced {c}")),
                        }
                    }
                }
                '#' if word.is_none() => break,
                c if c.is_whitespace() => words.extend(word.take()),
                c => word.get_or_insert_with(String::new).push(c),
            }
        }
        words.extend(word);
        let start = words.iter().position(|w| w != "$" && !is_assignment(w)).unwrap_or(0);
        Ok(words.split_off(start))
    }

    /// Every command's `--help` shows at least one example, and every example parses: the
    /// flags it uses exist and take the values it gives (nothing is run).
    #[test]
    fn every_command_s_help_shows_an_example() {
        let mut commands = Vec::new();
        visible(&Cli::command(), "tenure".into(), &mut commands);
        assert!(commands.len() > 20, "{} commands", commands.len());
        let mut missing = Vec::new();
        let mut broken = Vec::new();
        for (path, cmd) in &mut commands {
            let examples = example_commands(&cmd.render_long_help().to_string());
            if examples.is_empty() {
                missing.push(path.clone());
            }
            for line in examples {
                let parsed = shell_words(&line)
                    .and_then(|words| Cli::try_parse_from(words).map_err(|e| e.to_string()));
                if let Err(e) = parsed {
                    broken.push(format!("{path}: {line}\n{e}"));
                }
            }
        }
        assert!(missing.is_empty(), "--help without an example: {missing:#?}");
        assert!(broken.is_empty(), "examples that do not parse:\n\n{}", broken.join("\n"));
    }

    #[test]
    fn examples_are_found_and_split_as_a_shell_would() {
        let help = "\
Usage: tenure x

Examples, a few:
  tenure kv put k 'a b' --json   # a comment
  $ tenure kv get \"k\" \\
      --stale
  some output
  TENURE_X=1 tenure status
prose: tenure status is prose
  tenure status --json

  tenure status --not-an-example
Example: tenure watch --count 1";
        let found = example_commands(help);
        assert_eq!(
            found,
            [
                "tenure kv put k 'a b' --json   # a comment",
                "$ tenure kv get \"k\" --stale",
                "TENURE_X=1 tenure status",
                "tenure status --json",
                "tenure watch --count 1",
            ]
        );
        let words: Vec<_> = found.iter().map(|l| shell_words(l).unwrap()).collect();
        assert_eq!(words[0], ["tenure", "kv", "put", "k", "a b", "--json"]);
        assert_eq!(words[1], ["tenure", "kv", "get", "k", "--stale"]);
        assert_eq!(words[2], ["tenure", "status"]);
        assert!(shell_words("tenure kv put k 'a").is_err());
    }
}
