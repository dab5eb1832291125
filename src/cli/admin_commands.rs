//! `hotq queues`, `purge`, `delete`, `leases`, `settings`, `pause`,
//! `resume`: administration of a running daemon over HTTP (see
//! `crate::server::admin_routes`, `crate::console::api`), for FIFO queues here
//! and for priority queues under `hotq pq`.

use clap::{Args, Subcommand};

use super::http::{emit, queue_path, segment};
use super::queue_commands::{QueueArgs, query};
use super::{ClientArgs, EXIT_OK, print};
use crate::console::api::PauseAnswer;
use crate::keys::QueueKind;
use crate::server::admin_routes::{DeleteAnswer, LeaseList, PurgeAnswer, QueueList};
use crate::server::settings_routes::SettingsAnswer;

/// Administration subcommands (flattened into the top level).
#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// List FIFO queues (or priority queues) with depth, grouped, leased,
    /// delayed, waiting, oldest age and whether each is a dead-letter
    /// queue, one page at a time.
    Queues(QueuesArgs),
    /// Drop a FIFO queue's visible and delayed items (leased items stay).
    Purge(QueueArgs),
    /// Delete a FIFO queue: items, delayed items, leases, requests,
    /// settings, dedup ids.
    Delete(QueueArgs),
    /// List a FIFO queue's leases in flight.
    Leases(LeasesArgs),
    /// Show a FIFO queue's settings, or change them with `--set`.
    Settings(SettingsArgs),
    /// Pause a FIFO queue, for every daemon on the store: it takes pushes
    /// and hands nothing out (pops wait or answer empty); leases still
    /// settle. Prints `paused QUEUE`.
    Pause(QueueArgs),
    /// Resume a paused FIFO queue: pops waiting on it are served at once.
    /// Prints `resumed QUEUE`.
    Resume(QueueArgs),
}

/// `hotq queues`.
#[derive(Debug, Args)]
pub struct QueuesArgs {
    /// Daemon connection.
    #[command(flatten)]
    pub client: ClientArgs,
    /// Most queues in the page (1 to 100).
    #[arg(long, default_value_t = 20)]
    pub limit: usize,
    /// Continue after this queue (the `next` of the previous page).
    #[arg(long)]
    pub after: Option<String>,
    /// List priority queues.
    #[arg(long)]
    pub priority: bool,
}

/// `hotq leases`, `hotq pq leases`.
#[derive(Debug, Args)]
pub struct LeasesArgs {
    /// Daemon connection.
    #[command(flatten)]
    pub client: ClientArgs,
    /// Queue name.
    pub queue: String,
    /// Most leases in the page (1 to 1,000).
    #[arg(long, default_value_t = 100)]
    pub limit: usize,
    /// Continue where an earlier page's next says.
    #[arg(long)]
    pub after: Option<String>,
}

/// `hotq settings`, `hotq pq settings`.
#[derive(Debug, Args)]
pub struct SettingsArgs {
    /// Daemon connection.
    #[command(flatten)]
    pub client: ClientArgs,
    /// Queue name.
    pub queue: String,
    /// A JSON object of settings to change (`null` resets one), e.g.
    /// '{"max_deliveries": 3, "default_lease_ms": null}' or, for limits,
    /// '{"pop_rate_max": 1000, "pop_rate_burst": 100, "leases_max": 10}'.
    #[arg(long)]
    pub set: Option<String>,
}

/// Runs one administration subcommand on FIFO queues.
pub async fn run(command: AdminCommand) -> Result<u8, String> {
    let kind = QueueKind::Fifo;
    match command {
        AdminCommand::Queues(args) => queues(args).await,
        AdminCommand::Purge(args) => purge(kind, args).await,
        AdminCommand::Delete(args) => delete(kind, args).await,
        AdminCommand::Leases(args) => leases(kind, args).await,
        AdminCommand::Settings(args) => settings(kind, args).await,
        AdminCommand::Pause(args) => set_paused(kind, args, true).await,
        AdminCommand::Resume(args) => set_paused(kind, args, false).await,
    }
}

async fn queues(args: QueuesArgs) -> Result<u8, String> {
    let path = format!(
        "/v1/queues{}",
        query(&[
            ("limit", Some(args.limit.to_string())),
            ("after", args.after.as_deref().map(segment)),
            ("kind", args.priority.then(|| "priority".to_string())),
        ])
    );
    let method = reqwest::Method::GET;
    emit(&args.client, method, &path, None, |list: &QueueList| {
        print::queues(list)
    })
    .await?;
    Ok(EXIT_OK)
}

/// `hotq purge`, `hotq pq purge`.
pub async fn purge(kind: QueueKind, args: QueueArgs) -> Result<u8, String> {
    let path = format!("{}/purge", queue_path(kind, &args.queue));
    let queue = args.queue.clone();
    let method = reqwest::Method::POST;
    emit(&args.client, method, &path, None, |answer: &PurgeAnswer| {
        print::purged(&queue, answer)
    })
    .await?;
    Ok(EXIT_OK)
}

/// `hotq delete`, `hotq pq delete`.
pub async fn delete(kind: QueueKind, args: QueueArgs) -> Result<u8, String> {
    let path = queue_path(kind, &args.queue);
    let queue = args.queue.clone();
    let method = reqwest::Method::DELETE;
    emit(
        &args.client,
        method,
        &path,
        None,
        |answer: &DeleteAnswer| print::deleted(&queue, answer),
    )
    .await?;
    Ok(EXIT_OK)
}

/// `hotq leases`, `hotq pq leases`.
pub async fn leases(kind: QueueKind, args: LeasesArgs) -> Result<u8, String> {
    let path = format!(
        "{}/leases{}",
        queue_path(kind, &args.queue),
        query(&[
            ("limit", Some(args.limit.to_string())),
            ("after", args.after.as_deref().map(segment)),
        ])
    );
    let method = reqwest::Method::GET;
    emit(&args.client, method, &path, None, |list: &LeaseList| {
        print::leases(list)
    })
    .await?;
    Ok(EXIT_OK)
}

/// `hotq settings`, `hotq pq settings`.
pub async fn settings(kind: QueueKind, args: SettingsArgs) -> Result<u8, String> {
    let path = format!("{}/settings", queue_path(kind, &args.queue));
    let (method, body) = match args.set {
        None => (reqwest::Method::GET, None),
        Some(json) => (reqwest::Method::PUT, Some(json.into_bytes())),
    };
    emit(
        &args.client,
        method,
        &path,
        body,
        |answer: &SettingsAnswer| print::settings(answer),
    )
    .await?;
    Ok(EXIT_OK)
}

/// `hotq pause|resume`, `hotq pq pause|resume`.
pub async fn set_paused(kind: QueueKind, args: QueueArgs, paused: bool) -> Result<u8, String> {
    let verb = if paused { "pause" } else { "resume" };
    let path = format!("{}/{verb}", queue_path(kind, &args.queue));
    let method = reqwest::Method::POST;
    emit(&args.client, method, &path, None, |answer: &PauseAnswer| {
        print::paused(answer)
    })
    .await?;
    Ok(EXIT_OK)
}
