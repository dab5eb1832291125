//! `hotq queues`, `purge`, `delete`, `leases`, `settings`, `pause`,
//! `resume`: administration
//! of a running daemon over HTTP (see `crate::server::admin`). Each prints
//! the daemon's JSON answer.

use clap::Subcommand;

use super::http::{expect_success, http_client, segment, send};
use super::{ClientArgs, EXIT_OK};

/// Administration subcommands (flattened into the top level).
#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// List FIFO queues (or priority queues) with depth, leased, delayed,
    /// waiting and oldest age, one page at a time.
    Queues {
        /// Daemon connection.
        #[command(flatten)]
        client: ClientArgs,
        /// Most queues in the page (1 to 100).
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Continue after this queue (the `next` of the previous page).
        #[arg(long)]
        after: Option<String>,
        /// List priority queues.
        #[arg(long)]
        priority: bool,
    },
    /// Drop a FIFO queue's visible and delayed items (leased items stay).
    Purge {
        /// Daemon connection.
        #[command(flatten)]
        client: ClientArgs,
        /// Queue name.
        queue: String,
    },
    /// Delete a FIFO queue: items, delayed items, leases, requests,
    /// settings, dedup ids.
    Delete {
        /// Daemon connection.
        #[command(flatten)]
        client: ClientArgs,
        /// Queue name.
        queue: String,
    },
    /// List a FIFO queue's leases in flight.
    Leases {
        /// Daemon connection.
        #[command(flatten)]
        client: ClientArgs,
        /// Queue name.
        queue: String,
        /// Most leases in the page (1 to 1,000).
        #[arg(long, default_value_t = 100)]
        limit: usize,
        /// Continue after this receipt.
        #[arg(long)]
        after: Option<String>,
    },
    /// Show a FIFO queue's settings, or change them with `--set` (JSON,
    /// e.g. '{"max_deliveries": 3, "default_lease_ms": null}').
    Settings {
        /// Daemon connection.
        #[command(flatten)]
        client: ClientArgs,
        /// Queue name.
        queue: String,
        /// A JSON object of settings to change (`null` resets one).
        #[arg(long)]
        set: Option<String>,
    },
    /// Pause a queue, for every daemon on the store: it takes pushes and
    /// hands nothing out (pops wait or answer empty); leases still settle.
    Pause {
        /// Daemon connection.
        #[command(flatten)]
        client: ClientArgs,
        /// Queue name.
        queue: String,
        /// A priority queue.
        #[arg(long)]
        priority: bool,
    },
    /// Resume a paused queue: pops waiting on it are served at once.
    Resume {
        /// Daemon connection.
        #[command(flatten)]
        client: ClientArgs,
        /// Queue name.
        queue: String,
        /// A priority queue.
        #[arg(long)]
        priority: bool,
    },
}

/// `/v1/queues` or `/v1/pqueues`.
fn root(priority: bool) -> &'static str {
    if priority {
        "/v1/pqueues"
    } else {
        "/v1/queues"
    }
}

/// Runs one administration subcommand.
pub async fn run(command: AdminCommand) -> Result<u8, String> {
    let (client, method, path, body) = match command {
        AdminCommand::Queues {
            client,
            limit,
            after,
            priority,
        } => {
            let mut path = format!("/v1/queues?limit={limit}");
            if let Some(after) = after {
                path.push_str(&format!("&after={}", segment(&after)));
            }
            if priority {
                path.push_str("&kind=priority");
            }
            (client, reqwest::Method::GET, path, None)
        }
        AdminCommand::Purge { client, queue } => (
            client,
            reqwest::Method::POST,
            format!("/v1/queues/{}/purge", segment(&queue)),
            None,
        ),
        AdminCommand::Delete { client, queue } => (
            client,
            reqwest::Method::DELETE,
            format!("/v1/queues/{}", segment(&queue)),
            None,
        ),
        AdminCommand::Leases {
            client,
            queue,
            limit,
            after,
        } => {
            let mut path = format!("/v1/queues/{}/leases?limit={limit}", segment(&queue));
            if let Some(after) = after {
                path.push_str(&format!("&after={}", segment(&after)));
            }
            (client, reqwest::Method::GET, path, None)
        }
        AdminCommand::Pause {
            client,
            queue,
            priority,
        } => (
            client,
            reqwest::Method::POST,
            format!("{}/{}/pause", root(priority), segment(&queue)),
            None,
        ),
        AdminCommand::Resume {
            client,
            queue,
            priority,
        } => (
            client,
            reqwest::Method::POST,
            format!("{}/{}/resume", root(priority), segment(&queue)),
            None,
        ),
        AdminCommand::Settings { client, queue, set } => {
            let path = format!("/v1/queues/{}/settings", segment(&queue));
            match set {
                None => (client, reqwest::Method::GET, path, None),
                Some(json) => (client, reqwest::Method::PUT, path, Some(json.into_bytes())),
            }
        }
    };
    let http = http_client(0)?;
    let response = expect_success(send(&http, &client, method, &path, body, true).await?).await?;
    println!("{}", response.text().await.map_err(|e| e.to_string())?);
    Ok(EXIT_OK)
}
