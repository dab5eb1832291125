//! The `hotq` command line: `serve` runs the daemon; `push`, `pop`, `peek`,
//! `stats`, `ack`, `nack`, `extend`, `redrive` and `pq ...` talk to a
//! running daemon over HTTP; `bench` measures.
//!
//! Exit codes a script can rely on: 0 done (for `pop`/`peek`: got an item),
//! 3 empty (no item within the wait), 1 error, 2 usage.

pub mod admin;
mod http;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use crate::config::{Backend, Config, Overrides};
use crate::store::embedded::{Durability, EmbeddedConfig, EmbeddedStore};
use http::{ItemFormat, fetch_items, items_or_stdin, print_answer, push, segment, send};

/// Exit code: success.
pub const EXIT_OK: u8 = 0;
/// Exit code: an error (HTTP, connection, configuration, store).
pub const EXIT_ERROR: u8 = 1;
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
    Serve(ServeArgs),
    /// Push items to a FIFO queue (arguments, or one item per stdin line).
    Push {
        /// Daemon connection.
        #[command(flatten)]
        client: ClientArgs,
        /// Queue name.
        queue: String,
        /// Keep the items invisible for this long first (default: the
        /// queue's delivery delay).
        #[arg(long)]
        delay_ms: Option<u64>,
        /// Push into this message group: in order within it, one of the
        /// group out at a time.
        #[arg(long)]
        group: Option<String>,
        /// Dedup id of the (one) item: stored once within the dedup window.
        #[arg(long)]
        dedup_id: Option<String>,
        /// Items; none reads stdin, one item per non-empty line.
        items: Vec<String>,
    },
    /// Pop from a FIFO queue; prints the item's bytes (several: one per
    /// line, or see `-0`, `--base64`, `--json`). With `--lease-ms`, each
    /// item is prefixed with its receipt and delivery count, tab-separated
    /// (`read -r receipt count item`).
    Pop {
        /// Daemon connection.
        #[command(flatten)]
        client: ClientArgs,
        /// Queue name.
        queue: String,
        /// Wait up to this long for an item.
        #[arg(long, default_value_t = 0)]
        wait_ms: u64,
        /// Pop up to this many items.
        #[arg(long, default_value_t = 1)]
        max: usize,
        /// Lease the items for this long instead of deleting them; ack,
        /// nack or extend them by receipt.
        #[arg(long)]
        lease_ms: Option<u64>,
        /// How to print the items.
        #[command(flatten)]
        format: FormatArgs,
    },
    /// Ack leased items: they are done. Several receipts go in one batch
    /// ack (one line per receipt: `receipt outcome`; exit 1 unless all
    /// were acked).
    Ack {
        /// Daemon connection.
        #[command(flatten)]
        client: ClientArgs,
        /// Queue name.
        queue: String,
        /// The receipts `pop --lease-ms` printed (at most 1,000).
        #[arg(required = true, num_args = 1..)]
        receipts: Vec<String>,
    },
    /// Nack a leased item: it returns to the queue, now or after a delay
    /// (or goes to `<queue>.dead` once out of deliveries).
    Nack {
        /// Daemon connection.
        #[command(flatten)]
        client: ClientArgs,
        /// Queue name.
        queue: String,
        /// The receipt `pop --lease-ms` printed.
        receipt: String,
        /// Keep the item invisible for this long first.
        #[arg(long, default_value_t = 0)]
        delay_ms: u64,
    },
    /// Extend a lease to `--lease-ms` from now.
    Extend {
        /// Daemon connection.
        #[command(flatten)]
        client: ClientArgs,
        /// Queue name.
        queue: String,
        /// The receipt `pop --lease-ms` printed.
        receipt: String,
        /// The new lease, from now.
        #[arg(long)]
        lease_ms: u64,
    },
    /// Move items of a dead-letter queue (`<queue>.dead`) back to the
    /// queues they came from.
    Redrive {
        /// Daemon connection.
        #[command(flatten)]
        client: ClientArgs,
        /// The dead-letter queue's name.
        queue: String,
        /// Most items to move.
        #[arg(long, default_value_t = 1_000)]
        max: usize,
    },
    /// Print a FIFO queue's first item without taking it.
    Peek {
        /// Daemon connection.
        #[command(flatten)]
        client: ClientArgs,
        /// Queue name.
        queue: String,
    },
    /// Print a queue's stats (`--json`: as the daemon's JSON).
    Stats {
        /// Daemon connection.
        #[command(flatten)]
        client: ClientArgs,
        /// Queue name.
        queue: String,
        /// Print the JSON the daemon answered.
        #[arg(long)]
        json: bool,
    },
    /// Priority queues.
    #[command(subcommand)]
    Pq(PqCommand),
    /// Administration: queues, purge, delete, leases, settings, pause, resume.
    #[command(flatten)]
    Admin(admin::AdminCommand),
    /// Measure pops under contention (see `hotq bench --help`).
    Bench(crate::bench::BenchArgs),
}

/// Priority-queue subcommands.
#[derive(Debug, Subcommand)]
pub enum PqCommand {
    /// Push items with a priority.
    Push {
        /// Daemon connection.
        #[command(flatten)]
        client: ClientArgs,
        /// Queue name.
        queue: String,
        /// Signed 64-bit priority; lower pops first from `min`.
        #[arg(long, allow_hyphen_values = true)]
        priority: i64,
        /// Items; none reads stdin, one item per non-empty line.
        items: Vec<String>,
    },
    /// Pop the lowest (`--end min`) or highest (`--end max`) priority item.
    Pop {
        /// Daemon connection.
        #[command(flatten)]
        client: ClientArgs,
        /// Queue name.
        queue: String,
        /// `min` or `max`.
        #[arg(long)]
        end: String,
        /// Wait up to this long for an item.
        #[arg(long, default_value_t = 0)]
        wait_ms: u64,
    },
    /// Print the lowest or highest priority item without taking it.
    Peek {
        /// Daemon connection.
        #[command(flatten)]
        client: ClientArgs,
        /// Queue name.
        queue: String,
        /// `min` or `max`.
        #[arg(long)]
        end: String,
    },
    /// Print a priority queue's stats (`--json`: as the daemon's JSON).
    Stats {
        /// Daemon connection.
        #[command(flatten)]
        client: ClientArgs,
        /// Queue name.
        queue: String,
        /// Print the JSON the daemon answered.
        #[arg(long)]
        json: bool,
    },
}

/// How `pop` prints its items (one of them at most).
#[derive(Debug, Args, Clone, Copy)]
#[group(multiple = false)]
pub struct FormatArgs {
    /// End each item with a NUL byte instead of a newline (`xargs -0`).
    #[arg(short = '0', long = "null")]
    pub null: bool,
    /// Print each item in base64, one per line: safe for any bytes.
    #[arg(long)]
    pub base64: bool,
    /// Print the daemon's JSON array of items (base64 items and metadata).
    #[arg(long)]
    pub json: bool,
}

impl FormatArgs {
    fn format(self) -> ItemFormat {
        match (self.null, self.base64, self.json) {
            (true, _, _) => ItemFormat::Nul,
            (_, true, _) => ItemFormat::Base64,
            (_, _, true) => ItemFormat::Json,
            _ => ItemFormat::Lines,
        }
    }
}

/// `hotq serve` flags; each overrides the configuration file.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Configuration file (default: config/hotq.toml if it exists).
    #[arg(long, env = "HOTQ_CONFIG")]
    pub config: Option<PathBuf>,
    /// HTTP API address (default 127.0.0.1:7070).
    #[arg(long, env = "HOTQ_LISTEN")]
    pub listen: Option<SocketAddr>,
    /// Prometheus exporter address (default 127.0.0.1:9464).
    #[arg(long, env = "HOTQ_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,
    /// Embedded store directory (default ./data).
    #[arg(long, env = "HOTQ_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Bearer token API calls must carry.
    #[arg(long, env = "HOTQ_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Embedded store durability: sync or buffered.
    #[arg(long, env = "HOTQ_DURABILITY")]
    pub durability: Option<Durability>,
    /// Serve a non-loopback address without a token.
    #[arg(long)]
    pub allow_insecure_bind: bool,
}

/// How to reach the daemon.
#[derive(Debug, Args, Clone)]
pub struct ClientArgs {
    /// Daemon URL.
    #[arg(long, env = "HOTQ_URL", default_value = "http://127.0.0.1:7070")]
    pub url: String,
    /// Bearer token.
    #[arg(long, env = "HOTQ_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

/// Runs the parsed command line.
pub async fn run(cli: Cli) -> ExitCode {
    let outcome = match cli.command {
        Command::Serve(args) => serve(args).await,
        Command::Push {
            client,
            queue,
            delay_ms,
            group,
            dedup_id,
            items,
        } => {
            let mut query: Vec<String> = delay_ms
                .map(|ms| format!("delay_ms={ms}"))
                .into_iter()
                .collect();
            query.extend(group.map(|group| format!("group={}", segment(&group))));
            let query = if query.is_empty() {
                String::new()
            } else {
                format!("?{}", query.join("&"))
            };
            let path = format!("/v1/queues/{}/items:batch{query}", segment(&queue));
            push(&client, &path, items, dedup_id.as_deref()).await
        }
        Command::Pop {
            client,
            queue,
            wait_ms,
            max,
            lease_ms,
            format,
        } => {
            let lease = lease_ms.map_or(String::new(), |ms| format!("&lease_ms={ms}"));
            let path = format!(
                "/v1/queues/{}/pop?wait_ms={wait_ms}&max={max}{lease}",
                segment(&queue)
            );
            let method = reqwest::Method::POST;
            fetch_items(&client, method, &path, wait_ms, format.format()).await
        }
        Command::Ack {
            client,
            queue,
            receipts,
        } => match receipts.as_slice() {
            [receipt] => {
                let path = format!("/v1/queues/{}/ack/{}", segment(&queue), segment(receipt));
                http::post_empty(&client, &path).await
            }
            _ => http::ack_batch(&client, &queue, &receipts).await,
        },
        Command::Nack {
            client,
            queue,
            receipt,
            delay_ms,
        } => {
            let (queue, receipt) = (segment(&queue), segment(&receipt));
            let path = format!("/v1/queues/{queue}/nack/{receipt}?delay_ms={delay_ms}");
            print_answer(&client, reqwest::Method::POST, &path).await
        }
        Command::Extend {
            client,
            queue,
            receipt,
            lease_ms,
        } => {
            let (queue, receipt) = (segment(&queue), segment(&receipt));
            let path = format!("/v1/queues/{queue}/extend/{receipt}?lease_ms={lease_ms}");
            print_answer(&client, reqwest::Method::POST, &path).await
        }
        Command::Redrive { client, queue, max } => {
            let path = format!("/v1/queues/{}/redrive?max={max}", segment(&queue));
            print_answer(&client, reqwest::Method::POST, &path).await
        }
        Command::Peek { client, queue } => {
            let path = format!("/v1/queues/{}/peek", segment(&queue));
            fetch_items(&client, reqwest::Method::GET, &path, 0, ItemFormat::Lines).await
        }
        Command::Stats {
            client,
            queue,
            json,
        } => http::stats(&client, &format!("/v1/queues/{}", segment(&queue)), json).await,
        Command::Pq(command) => pq(command).await,
        Command::Admin(command) => admin::run(command).await,
        Command::Bench(args) => crate::bench::run(args).await,
    };
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(message) => {
            eprintln!("hotq: {message}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}

async fn pq(command: PqCommand) -> Result<u8, String> {
    match command {
        PqCommand::Push {
            client,
            queue,
            priority,
            items,
        } => {
            let items = items_or_stdin(items)?;
            let http = http::http_client(0)?;
            let path = format!("/v1/pqueues/{}/items?priority={priority}", segment(&queue));
            for item in &items {
                let body = Some(item.clone().into_bytes());
                let method = reqwest::Method::POST;
                http::expect_success(send(&http, &client, method, &path, body, false).await?)
                    .await?;
            }
            Ok(EXIT_OK)
        }
        PqCommand::Pop {
            client,
            queue,
            end,
            wait_ms,
        } => {
            let queue = segment(&queue);
            let path = format!("/v1/pqueues/{queue}/pop?end={end}&wait_ms={wait_ms}");
            let method = reqwest::Method::POST;
            fetch_items(&client, method, &path, wait_ms, ItemFormat::Lines).await
        }
        PqCommand::Peek { client, queue, end } => {
            let path = format!("/v1/pqueues/{}/peek?end={end}", segment(&queue));
            fetch_items(&client, reqwest::Method::GET, &path, 0, ItemFormat::Lines).await
        }
        PqCommand::Stats {
            client,
            queue,
            json,
        } => http::stats(&client, &format!("/v1/pqueues/{}", segment(&queue)), json).await,
    }
}

/// Installs JSON logs on stderr, level from `RUST_LOG` (default `info`).
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        // fjall's own info lines (file ingestion, recovery) are noise here.
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,fjall=warn,lsm_tree=warn"));
    let _ = tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

async fn serve(args: ServeArgs) -> Result<u8, String> {
    init_logging();
    let config = Config::load(args.config.as_deref())
        .and_then(|config| {
            config.apply(Overrides {
                listen: args.listen,
                metrics_listen: args.metrics_listen,
                data_dir: args.data_dir,
                token: args.token,
                durability: args.durability,
                allow_insecure_bind: args.allow_insecure_bind,
            })
        })
        .map_err(|e| format!("configuration: {e}"))?;
    tracing::info!(
        listen = %config.listen,
        metrics_listen = %config.metrics_listen,
        backend = ?config.backend,
        data_dir = %config.data_dir.display(),
        durability = ?config.durability,
        token = config.token.is_some(),
        "starting"
    );
    let api = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", config.listen))?;
    let metrics = tokio::net::TcpListener::bind(config.metrics_listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", config.metrics_listen))?;
    let shutdown = shutdown_signal();
    let served = match config.backend {
        Backend::Embedded => {
            let mut store_config = EmbeddedConfig::new(&config.data_dir);
            store_config.durability = config.durability;
            let store =
                EmbeddedStore::open(store_config).map_err(|e| format!("opening the store: {e}"))?;
            crate::server::serve(store, config, api, Some(metrics), shutdown).await
        }
        #[cfg(feature = "fdb")]
        Backend::Fdb => {
            let store = crate::store::fdb::open_for_daemon(config.fdb_cluster_file.as_deref())
                .map_err(|e| format!("opening the FoundationDB cluster: {e}"))?;
            crate::server::serve(store, config, api, Some(metrics), shutdown).await
        }
        #[cfg(not(feature = "fdb"))]
        Backend::Fdb => unreachable!("Config::validate refuses backend fdb without the feature"),
    };
    served.map_err(|e| e.to_string())?;
    Ok(EXIT_OK)
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate = match tokio::signal::unix::signal(
            tokio::signal::unix::SignalKind::terminate(),
        ) {
            Ok(signal) => signal,
            Err(error) => {
                tracing::error!(%error, "cannot listen for SIGTERM; only SIGINT stops the daemon");
                let _ = interrupt.await;
                return;
            }
        };
        tokio::select! {
            _ = interrupt => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = interrupt.await;
    }
}
