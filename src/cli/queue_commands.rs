//! `hotq push`, `pop`, `peek`, `stats`, `ack`, `nack`, `extend`,
//! `redrive`: a FIFO queue's items and leases. The lease commands take a
//! queue kind, so `hotq pq ack|nack|extend` share them.

use clap::Args;

use super::http::{ItemFormat, emit, fetch_items, queue_path, segment};
use super::print;
use super::{ClientArgs, EXIT_ERROR, EXIT_OK, EXIT_USAGE, FormatArgs};
use crate::keys::QueueKind;
use crate::server::items::{AckBatchAnswer, AckResult, QueueStats};

/// `hotq push`.
#[derive(Debug, Args)]
pub struct PushArgs {
    /// Daemon connection.
    #[command(flatten)]
    pub client: ClientArgs,
    /// Queue name.
    pub queue: String,
    /// Keep the items invisible for this long first (default: the
    /// queue's delivery delay).
    #[arg(long)]
    pub delay_ms: Option<u64>,
    /// Push into this message group: in order within it, one of the
    /// group out at a time.
    #[arg(long)]
    pub group: Option<String>,
    /// Dedup id of the (one) item: stored once within the dedup window.
    #[arg(long)]
    pub dedup_id: Option<String>,
    /// Fairness key of the items (their tenant): pops serve the queue's
    /// keys in proportion to their `fair_weights`, FIFO within a key.
    #[arg(long)]
    pub fair_key: Option<String>,
    /// Items; none reads stdin, one item per non-empty line.
    pub items: Vec<String>,
}

/// `hotq pop`.
#[derive(Debug, Args)]
pub struct PopArgs {
    /// Daemon connection.
    #[command(flatten)]
    pub client: ClientArgs,
    /// Queue name.
    pub queue: String,
    /// Wait up to this long for an item.
    #[arg(long, default_value_t = 0)]
    pub wait_ms: u64,
    /// Pop up to this many items.
    #[arg(long, default_value_t = 1)]
    pub max: usize,
    /// Lease the items for this long instead of deleting them; ack,
    /// nack or extend them by receipt.
    #[arg(long)]
    pub lease_ms: Option<u64>,
    /// How to print the items.
    #[command(flatten)]
    pub format: FormatArgs,
}

/// `hotq ack`, `hotq pq ack`.
#[derive(Debug, Args)]
pub struct AckArgs {
    /// Daemon connection.
    #[command(flatten)]
    pub client: ClientArgs,
    /// Queue name.
    pub queue: String,
    /// The receipts `pop --lease-ms` printed (at most 1,000).
    #[arg(required = true, num_args = 1..)]
    pub receipts: Vec<String>,
}

/// `hotq nack`, `hotq pq nack`.
#[derive(Debug, Args)]
pub struct NackArgs {
    /// Daemon connection.
    #[command(flatten)]
    pub client: ClientArgs,
    /// Queue name.
    pub queue: String,
    /// The receipt `pop --lease-ms` printed.
    pub receipt: String,
    /// Keep the item invisible for this long first.
    #[arg(long, default_value_t = 0)]
    pub delay_ms: u64,
}

/// `hotq extend`, `hotq pq extend`.
#[derive(Debug, Args)]
pub struct ExtendArgs {
    /// Daemon connection.
    #[command(flatten)]
    pub client: ClientArgs,
    /// Queue name.
    pub queue: String,
    /// The receipt `pop --lease-ms` printed.
    pub receipt: String,
    /// The new lease, from now.
    #[arg(long)]
    pub lease_ms: u64,
}

/// `hotq redrive`.
#[derive(Debug, Args)]
pub struct RedriveArgs {
    /// Daemon connection.
    #[command(flatten)]
    pub client: ClientArgs,
    /// The dead-letter queue's name.
    pub queue: String,
    /// Most items to move.
    #[arg(long, default_value_t = 1_000)]
    pub max: usize,
}

/// `hotq peek`, `hotq stats` (and their `pq` forms).
#[derive(Debug, Args)]
pub struct QueueArgs {
    /// Daemon connection.
    #[command(flatten)]
    pub client: ClientArgs,
    /// Queue name.
    pub queue: String,
}

/// The query string of `pairs` (`?a=1&b=2`; empty when none).
pub fn query(pairs: &[(&str, Option<String>)]) -> String {
    let set: Vec<String> = pairs
        .iter()
        .filter_map(|(key, value)| value.as_ref().map(|value| format!("{key}={value}")))
        .collect();
    if set.is_empty() {
        String::new()
    } else {
        format!("?{}", set.join("&"))
    }
}

/// `hotq push`.
pub async fn push(args: PushArgs) -> Result<u8, String> {
    let query = query(&[
        ("delay_ms", args.delay_ms.map(|ms| ms.to_string())),
        ("group", args.group.as_deref().map(segment)),
    ]);
    let path = format!(
        "{}/items:batch{query}",
        queue_path(QueueKind::Fifo, &args.queue)
    );
    let terms = super::http::ItemTerms {
        dedup_id: args.dedup_id.as_deref(),
        fair_key: args.fair_key.as_deref(),
    };
    super::http::push(&args.client, &path, args.items, terms).await
}

/// How pops print, or the usage error of two formats at once.
pub fn item_format(client: &ClientArgs, format: FormatArgs) -> Result<ItemFormat, u8> {
    match (client.json, format.format()) {
        (false, format) => Ok(format),
        (true, ItemFormat::Lines) => Ok(ItemFormat::Json),
        (true, _) => {
            eprintln!("hotq: --json, -0 and --base64 each choose the output; give one");
            Err(EXIT_USAGE)
        }
    }
}

/// `hotq pop`.
pub async fn pop(args: PopArgs) -> Result<u8, String> {
    let format = match item_format(&args.client, args.format) {
        Ok(format) => format,
        Err(code) => return Ok(code),
    };
    let query = query(&[
        ("wait_ms", Some(args.wait_ms.to_string())),
        ("max", Some(args.max.to_string())),
        ("lease_ms", args.lease_ms.map(|ms| ms.to_string())),
    ]);
    let path = format!("{}/pop{query}", queue_path(QueueKind::Fifo, &args.queue));
    let method = reqwest::Method::POST;
    fetch_items(&args.client, method, &path, args.wait_ms, format).await
}

/// `hotq peek`.
pub async fn peek(args: QueueArgs) -> Result<u8, String> {
    let path = format!("{}/peek", queue_path(QueueKind::Fifo, &args.queue));
    let format = if args.client.json {
        ItemFormat::Json
    } else {
        ItemFormat::Lines
    };
    fetch_items(&args.client, reqwest::Method::GET, &path, 0, format).await
}

/// `hotq stats`, `hotq pq stats`.
pub async fn stats(kind: QueueKind, args: QueueArgs) -> Result<u8, String> {
    let path = queue_path(kind, &args.queue);
    emit(
        &args.client,
        reqwest::Method::GET,
        &path,
        None,
        print::stats,
    )
    .await
    .map(|_: QueueStats| EXIT_OK)
}

/// `hotq ack`, `hotq pq ack`: one `receipt outcome` line per receipt
/// (`acked`, `unknown_receipt`, `lease_expired`, `receipt_queue_mismatch`,
/// `invalid`); exit 1 unless every one was acked. A FIFO queue's receipts
/// go in one batch; a priority queue's one by one.
pub async fn ack(kind: QueueKind, args: AckArgs) -> Result<u8, String> {
    let answer = match kind {
        QueueKind::Fifo => {
            let path = format!("{}/ack", queue_path(kind, &args.queue));
            let body = serde_json::to_vec(&args.receipts).map_err(|e| e.to_string())?;
            let method = reqwest::Method::POST;
            emit(&args.client, method, &path, Some(body), print::acked).await?
        }
        QueueKind::Priority => {
            let answer = ack_each(&args).await?;
            if args.client.json {
                println!(
                    "{}",
                    serde_json::to_string(&answer).map_err(|e| e.to_string())?
                );
            } else {
                print!("{}", print::acked(&answer));
            }
            answer
        }
    };
    let all_acked = answer.results.iter().all(|r| r.outcome == "acked");
    Ok(if all_acked { EXIT_OK } else { EXIT_ERROR })
}

/// Acks a priority queue's receipts one request each, with the batch
/// ack's outcome names.
async fn ack_each(args: &AckArgs) -> Result<AckBatchAnswer, String> {
    let http = super::http::http_client(0)?;
    let mut results = Vec::with_capacity(args.receipts.len());
    for receipt in &args.receipts {
        let path = format!(
            "{}/ack/{}",
            queue_path(QueueKind::Priority, &args.queue),
            segment(receipt)
        );
        let method = reqwest::Method::POST;
        let response = super::http::send(&http, &args.client, method, &path, None, true).await?;
        let outcome = if response.status().is_success() {
            "acked".to_string()
        } else {
            let body = response.bytes().await.unwrap_or_default();
            match serde_json::from_slice::<crate::server::error::ErrorBody>(&body) {
                Ok(error) if error.error.code == "invalid_receipt" => "invalid".to_string(),
                Ok(error) => error.error.code,
                Err(_) => return Err(format!("ack failed: {}", String::from_utf8_lossy(&body))),
            }
        };
        results.push(AckResult {
            receipt: receipt.clone(),
            outcome,
        });
    }
    Ok(AckBatchAnswer { results })
}

/// `hotq nack`, `hotq pq nack`.
pub async fn nack(kind: QueueKind, args: NackArgs) -> Result<u8, String> {
    let path = format!(
        "{}/nack/{}?delay_ms={}",
        queue_path(kind, &args.queue),
        segment(&args.receipt),
        args.delay_ms
    );
    emit(
        &args.client,
        reqwest::Method::POST,
        &path,
        None,
        print::nacked,
    )
    .await?;
    Ok(EXIT_OK)
}

/// `hotq extend`, `hotq pq extend`.
pub async fn extend(kind: QueueKind, args: ExtendArgs) -> Result<u8, String> {
    let path = format!(
        "{}/extend/{}?lease_ms={}",
        queue_path(kind, &args.queue),
        segment(&args.receipt),
        args.lease_ms
    );
    emit(
        &args.client,
        reqwest::Method::POST,
        &path,
        None,
        print::extended,
    )
    .await?;
    Ok(EXIT_OK)
}

/// `hotq redrive`.
pub async fn redrive(args: RedriveArgs) -> Result<u8, String> {
    let path = format!(
        "{}/redrive?max={}",
        queue_path(QueueKind::Fifo, &args.queue),
        args.max
    );
    emit(
        &args.client,
        reqwest::Method::POST,
        &path,
        None,
        print::redriven,
    )
    .await?;
    Ok(EXIT_OK)
}
