//! `tenure sim`: command-line entry point of the simulator.
use std::process::ExitCode;

/// Arguments of `tenure sim`.
#[derive(Debug, clap::Args)]
pub struct SimArgs {}

/// Runs `tenure sim` and returns the process exit code.
pub fn run(_args: SimArgs) -> ExitCode {
    ExitCode::FAILURE
}
