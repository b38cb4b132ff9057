//! `tenure sim` without the server binary: the same arguments and report,
//! built from this crate alone (quicker to compile when only the simulator
//! changed).
//!
//! ```text
//! cargo run --release -p tenure-sim --example sim -- --scenario spy --seeds 2000 --start-seed 1
//! ```

use clap::Parser;
use std::process::ExitCode;
use tenure_sim::cli::{self, SimArgs};

/// `tenure sim`'s arguments.
#[derive(Parser)]
#[command(name = "sim", about = "tenure's deterministic simulator (as `tenure sim`)")]
struct Cli {
    #[command(flatten)]
    sim: SimArgs,
}

fn main() -> ExitCode {
    cli::run(Cli::parse().sim)
}
