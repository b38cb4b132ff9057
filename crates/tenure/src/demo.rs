//! `tenure demo` (being written).
use clap::Args;
use std::process::ExitCode;
/// Flags of `tenure demo`.
#[derive(Args, Debug)]
pub struct DemoArgs {}
/// Runs the demo.
pub async fn run(_args: DemoArgs) -> anyhow::Result<ExitCode> { Ok(ExitCode::SUCCESS) }
