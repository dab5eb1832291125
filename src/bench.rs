//! `hotq bench`: measured pops under contention.

use clap::Args;

/// `hotq bench` options.
#[derive(Debug, Args)]
pub struct BenchArgs {}

/// Runs the benchmark.
pub async fn run(_args: BenchArgs) -> Result<u8, String> {
    Err("hotq bench is not built yet".into())
}
