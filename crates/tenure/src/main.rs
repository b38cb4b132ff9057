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

// The server's settings from flags and the config file and the log output:
// this package's library (the fuzz targets parse config files with it). The
// modules here name it (`tenure::tokens`) and the API's bodies
// (`tenure_api`) directly, so none of them imports this file.
use tenure::{config, logging};

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// tenure: leader election for a cluster of servers.
#[derive(Parser)]
#[command(name = "tenure", version, about)]
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
    #[command(after_help = member_cli::EXIT_STATUS)]
    Member(member_cli::MemberArgs),
    /// Show a group of partitions: its members, every partition's owner and epoch, the balance.
    Partitions(partitions_cli::PartitionsArgs),
    /// Tell the nodes that a node's process is dead (systemd's ExecStopPost, a supervisor),
    /// so that they elect a new leader at once instead of after the election timeout.
    #[command(after_help = notify_cli::NOTIFY_HELP)]
    NotifyDead(notify_cli::NotifyDeadArgs),
    /// Read and write the cluster's replicated key-value store (put, get, del, list, watch, txn).
    #[command(after_help = kv_cli::EXIT_STATUS)]
    Kv(kv_cli::KvArgs),
    /// Campaign in a named election: block until elected, print the fencing token, hold
    /// until Ctrl-C (resign) or loss; or, with --observe, print every change of an election.
    #[command(after_help = elect_cli::EXIT_STATUS)]
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
    /// Make a CA and node certificates for a cluster (TLS for peers and the HTTP API).
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

fn main() -> ExitCode {
    let command = Cli::parse().command;
    if reports_only(&command) {
        die_on_broken_pipe();
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
            block_on(tenure_bench::partitions::member(args, |url| {
                store_url::open_external(&store_url::parse(url)?, &Default::default())
            }))
        }
        Command::Cert(args) => cert::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Whether `command` only reports (prints to stdout, holds nothing): such
/// a command ends as `cat` does when its reader goes away (`tenure kv list
/// | head -1`), by SIGPIPE. The others keep Rust's default, SIGPIPE
/// ignored, so that a write to a closed pipe is an error they handle: the
/// server and `tenure run` write to sockets and to their guard's stdin (a
/// guard that died must not kill `tenure run` before it stopped the
/// command and resigned), and `tenure elect` must resign before it exits.
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

/// Restores SIGPIPE's default action (the Rust runtime ignores it, which
/// makes `println!` panic, exit 101, when stdout is a closed pipe).
fn die_on_broken_pipe() {
    use nix::sys::signal::{signal, SigHandler, Signal};
    // SAFETY: no other thread runs yet and the default action installs no
    // handler code.
    if let Err(e) = unsafe { signal(Signal::SIGPIPE, SigHandler::SigDfl) } {
        eprintln!("warning: cannot restore SIGPIPE's default action: {e}");
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
