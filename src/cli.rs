//! The `hotq` command line: `serve` runs the daemon; `push`, `pop`, `peek`,
//! `stats`, `ack`, `nack`, `extend`, `redrive` and `pq ...` talk to a
//! running daemon over HTTP; `bench` measures.
//!
//! Exit codes a script can rely on: 0 done (for `pop`/`peek`: got an item),
//! 3 empty (no item within the wait), 1 error, 2 usage.

use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use clap::{Args, Parser, Subcommand};

use crate::config::{Backend, Config, Overrides};

pub mod admin;
use crate::store::embedded::{Durability, EmbeddedConfig, EmbeddedStore};

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
        /// Items; none reads stdin, one item per non-empty line.
        items: Vec<String>,
    },
    /// Pop from a FIFO queue; prints the item's bytes. With `--lease-ms`,
    /// prints one line per item: receipt, delivery count and item,
    /// tab-separated (`read -r receipt count item`).
    Pop {
        /// Daemon connection.
        #[command(flatten)]
        client: ClientArgs,
        /// Queue name.
        queue: String,
        /// Wait up to this long for an item.
        #[arg(long, default_value_t = 0)]
        wait_ms: u64,
        /// Pop up to this many items, one per output line.
        #[arg(long, default_value_t = 1)]
        max: usize,
        /// Lease the items for this long instead of deleting them; ack,
        /// nack or extend them by receipt.
        #[arg(long)]
        lease_ms: Option<u64>,
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
    /// Print a queue's stats as JSON.
    Stats {
        /// Daemon connection.
        #[command(flatten)]
        client: ClientArgs,
        /// Queue name.
        queue: String,
    },
    /// Priority queues.
    #[command(subcommand)]
    Pq(PqCommand),
    /// Administration: queues, purge, delete, leases, settings.
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
    /// Print a priority queue's stats as JSON.
    Stats {
        /// Daemon connection.
        #[command(flatten)]
        client: ClientArgs,
        /// Queue name.
        queue: String,
    },
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
            items,
        } => {
            let delay = delay_ms.map_or(String::new(), |ms| format!("?delay_ms={ms}"));
            let path = format!("/v1/queues/{queue}/items:batch{delay}");
            push(&client, &path, items).await
        }
        Command::Pop {
            client,
            queue,
            wait_ms,
            max,
            lease_ms: None,
        } => {
            let path = format!("/v1/queues/{queue}/pop?wait_ms={wait_ms}&max={max}");
            fetch_items(&client, reqwest::Method::POST, &path, max > 1, wait_ms).await
        }
        Command::Pop {
            client,
            queue,
            wait_ms,
            max,
            lease_ms: Some(lease_ms),
        } => {
            let path =
                format!("/v1/queues/{queue}/pop?wait_ms={wait_ms}&max={max}&lease_ms={lease_ms}");
            fetch_leased(&client, &path, max > 1, wait_ms).await
        }
        Command::Ack {
            client,
            queue,
            receipts,
        } => match receipts.as_slice() {
            [receipt] => post_empty(&client, &format!("/v1/queues/{queue}/ack/{receipt}")).await,
            _ => ack_batch(&client, &queue, &receipts).await,
        },
        Command::Nack {
            client,
            queue,
            receipt,
            delay_ms,
        } => {
            let path = format!("/v1/queues/{queue}/nack/{receipt}?delay_ms={delay_ms}");
            post_empty(&client, &path).await
        }
        Command::Extend {
            client,
            queue,
            receipt,
            lease_ms,
        } => {
            let path = format!("/v1/queues/{queue}/extend/{receipt}?lease_ms={lease_ms}");
            post_empty(&client, &path).await
        }
        Command::Redrive { client, queue, max } => {
            let path = format!("/v1/queues/{queue}/redrive?max={max}");
            print_answer(&client, reqwest::Method::POST, &path).await
        }
        Command::Peek { client, queue } => {
            fetch_items(
                &client,
                reqwest::Method::GET,
                &format!("/v1/queues/{queue}/peek"),
                false,
                0,
            )
            .await
        }
        Command::Stats { client, queue } => stats(&client, &format!("/v1/queues/{queue}")).await,
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
            let http = http_client(0)?;
            for item in &items {
                let path = format!("/v1/pqueues/{queue}/items?priority={priority}");
                let response = send(
                    &http,
                    &client,
                    reqwest::Method::POST,
                    &path,
                    Some(item.clone().into_bytes()),
                )
                .await?;
                expect_success(response).await?;
            }
            Ok(EXIT_OK)
        }
        PqCommand::Pop {
            client,
            queue,
            end,
            wait_ms,
        } => {
            let path = format!("/v1/pqueues/{queue}/pop?end={end}&wait_ms={wait_ms}");
            fetch_items(&client, reqwest::Method::POST, &path, false, wait_ms).await
        }
        PqCommand::Peek { client, queue, end } => {
            let path = format!("/v1/pqueues/{queue}/peek?end={end}");
            fetch_items(&client, reqwest::Method::GET, &path, false, 0).await
        }
        PqCommand::Stats { client, queue } => stats(&client, &format!("/v1/pqueues/{queue}")).await,
    }
}

fn items_or_stdin(items: Vec<String>) -> Result<Vec<String>, String> {
    if !items.is_empty() {
        return Ok(items);
    }
    let stdin = std::io::stdin();
    let mut lines = Vec::new();
    for line in stdin.lock().lines() {
        let line = line.map_err(|e| format!("reading stdin: {e}"))?;
        if !line.is_empty() {
            lines.push(line);
        }
    }
    if lines.is_empty() {
        return Err("no items: give them as arguments or one per line on stdin".into());
    }
    Ok(lines)
}

pub(crate) fn http_client(wait_ms: u64) -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        // A long poll may take its whole wait; allow that plus slack.
        .timeout(std::time::Duration::from_millis(wait_ms + 30_000))
        .build()
        .map_err(|e| e.to_string())
}

pub(crate) async fn send(
    http: &reqwest::Client,
    client: &ClientArgs,
    method: reqwest::Method,
    path: &str,
    body: Option<Vec<u8>>,
) -> Result<reqwest::Response, String> {
    let url = format!("{}{path}", client.url.trim_end_matches('/'));
    let mut request = http.request(method, &url);
    if let Some(token) = &client.token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    if let Some(body) = body {
        request = request.body(body);
    }
    request.send().await.map_err(|e| format!("{url}: {e}"))
}

pub(crate) async fn expect_success(
    response: reqwest::Response,
) -> Result<reqwest::Response, String> {
    if response.status().is_success() {
        return Ok(response);
    }
    let status = response.status();
    let body = response.text().await.unwrap_or_default();
    Err(format!("{status}: {body}"))
}

async fn push(client: &ClientArgs, path: &str, items: Vec<String>) -> Result<u8, String> {
    let items = items_or_stdin(items)?;
    let http = http_client(0)?;
    for chunk in items.chunks(crate::queue::PUSH_BATCH_MAX) {
        let encoded: Vec<String> = chunk.iter().map(|item| BASE64.encode(item)).collect();
        let body = serde_json::to_vec(&encoded).map_err(|e| e.to_string())?;
        let response = send(&http, client, reqwest::Method::POST, path, Some(body)).await?;
        expect_success(response).await?;
    }
    Ok(EXIT_OK)
}

async fn fetch_items(
    client: &ClientArgs,
    method: reqwest::Method,
    path: &str,
    as_array: bool,
    wait_ms: u64,
) -> Result<u8, String> {
    let http = http_client(wait_ms)?;
    let response = expect_success(send(&http, client, method, path, None).await?).await?;
    if response.status() == reqwest::StatusCode::NO_CONTENT {
        return Ok(EXIT_EMPTY);
    }
    let body = response.bytes().await.map_err(|e| e.to_string())?;
    let mut out = std::io::stdout().lock();
    if as_array {
        let encoded: Vec<String> = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
        for text in encoded {
            let item = BASE64.decode(text).map_err(|e| e.to_string())?;
            out.write_all(&item)
                .and_then(|()| out.write_all(b"\n"))
                .map_err(|e| e.to_string())?;
        }
    } else {
        out.write_all(&body).map_err(|e| e.to_string())?;
    }
    out.flush().map_err(|e| e.to_string())?;
    Ok(EXIT_OK)
}

/// Pops leased items: one line each, `receipt \t delivery count \t item`.
async fn fetch_leased(
    client: &ClientArgs,
    path: &str,
    as_array: bool,
    wait_ms: u64,
) -> Result<u8, String> {
    let http = http_client(wait_ms)?;
    let response =
        expect_success(send(&http, client, reqwest::Method::POST, path, None).await?).await?;
    if response.status() == reqwest::StatusCode::NO_CONTENT {
        return Ok(EXIT_EMPTY);
    }
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::to_string)
            .ok_or_else(|| format!("the answer lacks the {name} header"))
    };
    let lines: Vec<(String, String, Vec<u8>)> = if as_array {
        let body = response.bytes().await.map_err(|e| e.to_string())?;
        let objects: Vec<serde_json::Value> =
            serde_json::from_slice(&body).map_err(|e| e.to_string())?;
        objects
            .iter()
            .map(|object| {
                let item = object["item"].as_str().unwrap_or_default();
                Ok((
                    object["receipt"].as_str().unwrap_or_default().to_string(),
                    object["delivery_count"].to_string(),
                    BASE64.decode(item).map_err(|e| e.to_string())?,
                ))
            })
            .collect::<Result<_, String>>()?
    } else {
        let receipt = header(crate::server::fifo::RECEIPT_HEADER)?;
        let count = header(crate::server::fifo::DELIVERY_COUNT_HEADER)?;
        let body = response.bytes().await.map_err(|e| e.to_string())?;
        vec![(receipt, count, body.to_vec())]
    };
    let mut out = std::io::stdout().lock();
    for (receipt, count, item) in lines {
        out.write_all(format!("{receipt}\t{count}\t").as_bytes())
            .and_then(|()| out.write_all(&item))
            .and_then(|()| out.write_all(b"\n"))
            .map_err(|e| e.to_string())?;
    }
    out.flush().map_err(|e| e.to_string())?;
    Ok(EXIT_OK)
}

/// Acks `receipts` in one batch; prints each one's outcome.
async fn ack_batch(client: &ClientArgs, queue: &str, receipts: &[String]) -> Result<u8, String> {
    let http = http_client(0)?;
    let body = serde_json::to_vec(receipts).map_err(|e| e.to_string())?;
    let path = format!("/v1/queues/{queue}/ack");
    let response = send(&http, client, reqwest::Method::POST, &path, Some(body)).await?;
    let answer: serde_json::Value = expect_success(response)
        .await?
        .json()
        .await
        .map_err(|e| e.to_string())?;
    let results = answer["results"]
        .as_array()
        .ok_or("the answer lacks results")?;
    let mut all_acked = true;
    for result in results {
        let outcome = result["outcome"].as_str().unwrap_or("");
        all_acked &= outcome == "acked";
        println!("{} {outcome}", result["receipt"].as_str().unwrap_or(""));
    }
    Ok(if all_acked { EXIT_OK } else { EXIT_ERROR })
}

/// POSTs to `path` with no body and expects success (ack, nack, extend).
async fn post_empty(client: &ClientArgs, path: &str) -> Result<u8, String> {
    let http = http_client(0)?;
    expect_success(send(&http, client, reqwest::Method::POST, path, None).await?).await?;
    Ok(EXIT_OK)
}

async fn stats(client: &ClientArgs, path: &str) -> Result<u8, String> {
    print_answer(client, reqwest::Method::GET, path).await
}

/// Sends a bodiless request and prints the answer's body (JSON).
async fn print_answer(
    client: &ClientArgs,
    method: reqwest::Method,
    path: &str,
) -> Result<u8, String> {
    let http = http_client(0)?;
    let response = expect_success(send(&http, client, method, path, None).await?).await?;
    let body = response.text().await.map_err(|e| e.to_string())?;
    println!("{body}");
    Ok(EXIT_OK)
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
            let store = crate::store::fdb::FdbStore::open(config.fdb_cluster_file.as_deref())
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
