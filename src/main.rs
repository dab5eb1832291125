//! The `hotq` binary: parses the command line and hands it to [`hotq::cli`].

use clap::Parser;

/// Every pop allocates and frees many small buffers (keys, envelopes,
/// HTTP bodies) across threads; glibc's malloc spent ~15% of the daemon's
/// CPU on them under load.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    hotq::cli::run(hotq::cli::Cli::parse())
}
