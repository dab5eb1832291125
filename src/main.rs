//! The `hotq` binary: parses the command line and hands it to [`hotq::cli`].

use clap::Parser;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    hotq::cli::run(hotq::cli::Cli::parse()).await
}
