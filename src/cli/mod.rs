//! The `hotq` command line: `serve` runs the daemon; the other commands
//! talk to a running daemon over HTTP; `bench` measures.
//!
//! One convention for every client command (see `docs/cli.md`): text for
//! people by default (`key value` lines or a table, every line and every
//! item ending in a newline), `--json` for scripts (the daemon's JSON
//! answer, one document per line; for pops the array of items), errors on
//! stderr as `hotq: <message> (<status> <code>)`.
//!
//! Exit codes a script can rely on:
//!
//! | code | meaning |
//! |------|---------|
//! | 0 | done (`pop`/`peek`: got an item; `push`: stored, or a duplicate said so) |
//! | 1 | an error: the daemon refused (HTTP 4xx/5xx), could not be reached, or (`ack`) a receipt was not acked |
//! | 2 | usage: unknown command, flag or value |
//! | 3 | empty: nothing to pop or peek within the wait |
//!
//! - [`admin_commands`]: `queues`, `purge`, `delete`, `leases`, `settings`, `pause`,
//!   `resume`.
//! - [`http`]: requests to the daemon, its answers, its errors.
//! - [`pq_commands`]: `hotq pq ...`, priority queues.
//! - [`print`](mod@print): the text for people.
//! - [`queue_commands`]: `push`, `pop`, `peek`, `stats`, `ack`, `nack`, `extend`, `redrive`.
//! - [`serve`]: `hotq serve`.

pub(crate) mod admin_commands;
mod http;
pub(crate) mod pq_commands;
pub(crate) mod print;
pub(crate) mod queue_commands;
pub(crate) mod serve;

use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use crate::keys::QueueKind;
use http::ItemFormat;

/// Exit code: success.
pub const EXIT_OK: u8 = 0;
/// Exit code: an error (HTTP, connection, configuration, store).
pub const EXIT_ERROR: u8 = 1;
/// Exit code: a usage error (clap exits with it too).
pub const EXIT_USAGE: u8 = 2;
/// Exit code: nothing to pop or peek.
pub const EXIT_EMPTY: u8 = 3;

/// hotq: a queue service for worker fleets that hammer the same hot queue.
#[derive(Debug, Parser)]
#[command(name = "hotq", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the daemon.
    Serve(serve::ServeArgs),
    /// Push items to a FIFO queue (arguments, or one item per stdin line);
    /// prints `pushed N`, or `duplicate: ...` when a dedup id was seen.
    Push(queue_commands::PushArgs),
    /// Pop from a FIFO queue; prints each item's bytes and a newline (or
    /// see `-0`, `--base64`, `--json`). With `--lease-ms`, each item is
    /// prefixed with its receipt and delivery count, tab-separated
    /// (`read -r receipt count item`).
    Pop(queue_commands::PopArgs),
    /// Ack leased items: they are done. One `receipt outcome` line per
    /// receipt; exit 1 unless all were acked.
    Ack(queue_commands::AckArgs),
    /// Nack a leased item: it returns to the queue, now or after a delay
    /// (or goes to its dead-letter queue once out of deliveries).
    Nack(queue_commands::NackArgs),
    /// Extend a lease to `--lease-ms` from now.
    Extend(queue_commands::ExtendArgs),
    /// Move items of a dead-letter queue (`<queue>.dead`, or any queue a
    /// queue names as its `dead_letter_queue`) back to where they came from.
    Redrive(queue_commands::RedriveArgs),
    /// Print a FIFO queue's first item without taking it.
    Peek(queue_commands::QueueArgs),
    /// Print a FIFO queue's stats.
    Stats(queue_commands::QueueArgs),
    /// Priority queues.
    #[command(subcommand)]
    Pq(pq_commands::PqCommand),
    /// Administration: queues, purge, delete, leases, settings, pause, resume.
    #[command(flatten)]
    Admin(admin_commands::AdminCommand),
    /// Measure pops under contention (see `hotq bench --help`).
    Bench(crate::bench::BenchArgs),
}

/// How `pop` prints its items, besides `--json` (one of them at most).
#[derive(Debug, Args, Clone, Copy)]
#[group(multiple = false)]
pub struct FormatArgs {
    /// End each item with a NUL byte instead of a newline (`xargs -0`).
    #[arg(short = '0', long = "null")]
    pub null: bool,
    /// Print each item in base64, one per line: safe for any bytes.
    #[arg(long)]
    pub base64: bool,
}

impl FormatArgs {
    fn format(self) -> ItemFormat {
        match (self.null, self.base64) {
            (true, _) => ItemFormat::Nul,
            (_, true) => ItemFormat::Base64,
            _ => ItemFormat::Lines,
        }
    }
}

/// How to reach the daemon, and how to print its answer.
#[derive(Debug, Args, Clone)]
pub struct ClientArgs {
    /// Daemon URL.
    #[arg(long, env = "HOTQ_URL", default_value = "http://127.0.0.1:7070")]
    pub url: String,
    /// Bearer token.
    #[arg(long, env = "HOTQ_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Print the daemon's JSON answer (one document per line) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs the parsed command line. The daemon builds its own runtime from
/// its configuration; the client commands share a default one.
pub fn run(cli: Cli) -> ExitCode {
    let outcome = match cli.command {
        Command::Serve(args) => serve::serve(args),
        command => tokio::runtime::Runtime::new()
            .map_err(|e| format!("starting the runtime: {e}"))
            .and_then(|runtime| runtime.block_on(run_client(command))),
    };
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(message) => {
            eprintln!("hotq: {message}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}

/// Runs a command other than `serve`.
async fn run_client(command: Command) -> Result<u8, String> {
    let fifo = QueueKind::Fifo;
    match command {
        Command::Serve(_) => unreachable!("run starts the daemon itself"),
        Command::Push(args) => queue_commands::push(args).await,
        Command::Pop(args) => queue_commands::pop(args).await,
        Command::Ack(args) => queue_commands::ack(fifo, args).await,
        Command::Nack(args) => queue_commands::nack(fifo, args).await,
        Command::Extend(args) => queue_commands::extend(fifo, args).await,
        Command::Redrive(args) => queue_commands::redrive(args).await,
        Command::Peek(args) => queue_commands::peek(args).await,
        Command::Stats(args) => queue_commands::stats(fifo, args).await,
        Command::Pq(command) => pq_commands::run(command).await,
        Command::Admin(command) => admin_commands::run(command).await,
        Command::Bench(args) => crate::bench::run(args).await,
    }
}
