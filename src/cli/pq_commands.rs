//! `hotq pq ...`: priority queues, with every command a FIFO queue has
//! (pops lease with `--lease-ms`; ack, nack, extend; leases, purge,
//! delete, settings, pause, resume), sharing the FIFO commands' arguments and output.

use clap::{Args, Subcommand};

use super::admin_commands::{LeasesArgs, SettingsArgs};
use super::http::{ItemFormat, emit_with, fetch_items, items_or_stdin, queue_path};
use super::queue_commands::{AckArgs, ExtendArgs, NackArgs, QueueArgs, item_format, query};
use super::{ClientArgs, EXIT_OK, FormatArgs, print};
use crate::keys::QueueKind;
use crate::server::items::PushAnswer;

/// Priority-queue subcommands.
#[derive(Debug, Subcommand)]
pub enum PqCommand {
    /// Push items with a priority.
    Push(PushArgs),
    /// Pop the lowest (`--end min`) or highest (`--end max`) priority
    /// items; with `--lease-ms`, leased (each line starts with its receipt
    /// and delivery count, tab-separated).
    Pop(PopArgs),
    /// Print the lowest or highest priority item without taking it.
    Peek(PeekArgs),
    /// Print a priority queue's stats.
    Stats(QueueArgs),
    /// Ack leased items: they are done (one `receipt outcome` line each).
    Ack(AckArgs),
    /// Nack a leased item: back to the queue under its priority, now or
    /// after a delay (or to the dead-letter queue once out of deliveries).
    Nack(NackArgs),
    /// Extend a lease to `--lease-ms` from now.
    Extend(ExtendArgs),
    /// List a priority queue's leases in flight.
    Leases(LeasesArgs),
    /// Drop a priority queue's visible and delayed items (leases stay).
    Purge(QueueArgs),
    /// Delete a priority queue: items, delayed items, leases, settings.
    Delete(QueueArgs),
    /// Show a priority queue's settings, or change them with `--set`.
    Settings(SettingsArgs),
    /// Pause a priority queue, as `hotq pause` a FIFO queue.
    Pause(QueueArgs),
    /// Resume a paused priority queue, as `hotq resume` a FIFO queue.
    Resume(QueueArgs),
}

/// `hotq pq push`.
#[derive(Debug, Args)]
pub struct PushArgs {
    /// Daemon connection.
    #[command(flatten)]
    pub client: ClientArgs,
    /// Queue name.
    pub queue: String,
    /// Signed 64-bit priority; lower pops first from `min`.
    #[arg(long, allow_hyphen_values = true)]
    pub priority: i64,
    /// Keep the items invisible for this long first (default: the
    /// queue's delivery delay).
    #[arg(long)]
    pub delay_ms: Option<u64>,
    /// Fairness key of the items (their tenant): `min` pops serve one
    /// priority's keys in proportion to their `fair_weights`.
    #[arg(long)]
    pub fair_key: Option<String>,
    /// Items; none reads stdin, one item per non-empty line.
    pub items: Vec<String>,
}

/// `hotq pq pop`.
#[derive(Debug, Args)]
pub struct PopArgs {
    /// Daemon connection.
    #[command(flatten)]
    pub client: ClientArgs,
    /// Queue name.
    pub queue: String,
    /// `min` or `max`.
    #[arg(long, value_parser = ["min", "max"])]
    pub end: String,
    /// Wait up to this long for an item.
    #[arg(long, default_value_t = 0)]
    pub wait_ms: u64,
    /// Pop up to this many items.
    #[arg(long, default_value_t = 1)]
    pub max: usize,
    /// Lease the items for this long instead of deleting them (default:
    /// the queue's default lease); ack, nack or extend them by receipt.
    #[arg(long)]
    pub lease_ms: Option<u64>,
    /// How to print the items.
    #[command(flatten)]
    pub format: FormatArgs,
}

/// `hotq pq peek`.
#[derive(Debug, Args)]
pub struct PeekArgs {
    /// Daemon connection.
    #[command(flatten)]
    pub client: ClientArgs,
    /// Queue name.
    pub queue: String,
    /// `min` or `max`.
    #[arg(long, value_parser = ["min", "max"])]
    pub end: String,
}

/// Runs one `hotq pq` subcommand.
pub async fn run(command: PqCommand) -> Result<u8, String> {
    let kind = QueueKind::Priority;
    match command {
        PqCommand::Push(args) => push(args).await,
        PqCommand::Pop(args) => pop(args).await,
        PqCommand::Peek(args) => {
            let path = format!("{}/peek?end={}", queue_path(kind, &args.queue), args.end);
            let format = if args.client.json {
                ItemFormat::Json
            } else {
                ItemFormat::Lines
            };
            fetch_items(&args.client, reqwest::Method::GET, &path, 0, format).await
        }
        PqCommand::Stats(args) => super::queue_commands::stats(kind, args).await,
        PqCommand::Ack(args) => super::queue_commands::ack(kind, args).await,
        PqCommand::Nack(args) => super::queue_commands::nack(kind, args).await,
        PqCommand::Extend(args) => super::queue_commands::extend(kind, args).await,
        PqCommand::Leases(args) => super::admin_commands::leases(kind, args).await,
        PqCommand::Purge(args) => super::admin_commands::purge(kind, args).await,
        PqCommand::Delete(args) => super::admin_commands::delete(kind, args).await,
        PqCommand::Settings(args) => super::admin_commands::settings(kind, args).await,
        PqCommand::Pause(args) => super::admin_commands::set_paused(kind, args, true).await,
        PqCommand::Resume(args) => super::admin_commands::set_paused(kind, args, false).await,
    }
}

/// Pushes each item in a request of its own (priority pushes take one
/// item per request), printing each answer.
async fn push(args: PushArgs) -> Result<u8, String> {
    let items = items_or_stdin(args.items)?;
    let query = query(&[
        ("priority", Some(args.priority.to_string())),
        ("delay_ms", args.delay_ms.map(|ms| ms.to_string())),
    ]);
    let path = format!(
        "{}/items{query}",
        queue_path(QueueKind::Priority, &args.queue)
    );
    let headers: Vec<(&str, &str)> = args
        .fair_key
        .as_deref()
        .map(|key| ("hotq-fair-key", key))
        .into_iter()
        .collect();
    for item in items {
        let request = (reqwest::Method::POST, path.as_str());
        let body = Some(item.into_bytes());
        emit_with(
            &args.client,
            request,
            body,
            &headers,
            |answer: &PushAnswer| print::pushed(answer, None),
        )
        .await?;
    }
    Ok(EXIT_OK)
}

async fn pop(args: PopArgs) -> Result<u8, String> {
    let format = match item_format(&args.client, args.format) {
        Ok(format) => format,
        Err(code) => return Ok(code),
    };
    let query = query(&[
        ("end", Some(args.end.clone())),
        ("wait_ms", Some(args.wait_ms.to_string())),
        ("max", Some(args.max.to_string())),
        ("lease_ms", args.lease_ms.map(|ms| ms.to_string())),
    ]);
    let path = format!(
        "{}/pop{query}",
        queue_path(QueueKind::Priority, &args.queue)
    );
    let method = reqwest::Method::POST;
    fetch_items(&args.client, method, &path, args.wait_ms, format).await
}
