//! The `tenure` binary.
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
    /// Run the deterministic simulator against the real election core.
    Sim(tenure_sim::cli::SimArgs),
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Sim(args) => tenure_sim::cli::run(args),
    }
}
