//! The drain over HTTP against a running daemon, in each pop mode, with
//! peerbench's semantics (docs/benchmarks.md) so figures compare:
//! every worker's connection is open before the clock starts; the clock
//! stops at the last item delivered (not when idle long polls return); one
//! latency sample per item, from the pop's start to its item (a leased
//! pop's includes its ack); an empty answer while items are still out is
//! polled again after 1 ms.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::client::{ClientError, Connection, Endpoint, Limits};
use super::report::{DrainResult, Tally, payloads};
use super::{BenchArgs, Mode, process_cpu_us};

/// A leased pop's lease, as peerbench's `http-leased` target takes it.
pub const LEASE_MS: u64 = 30_000;
/// Bound on opening one worker's connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// Pause before polling again after an empty answer (peerbench's).
const EMPTY_POLL_PAUSE: Duration = Duration::from_millis(1);
/// Items per preload request.
const PRELOAD_BATCH: usize = 1_000;

/// The pop's query string for `mode` (with its leading `?`, or empty).
pub fn pop_query(mode: Mode, wait_ms: u64) -> String {
    match mode {
        Mode::Plain => String::new(),
        Mode::Staged | Mode::Longpoll => format!("?wait_ms={wait_ms}"),
        Mode::Naive => "?path=direct".into(),
        Mode::Leased => format!("?lease_ms={LEASE_MS}"),
        Mode::LeasedLongpoll => format!("?lease_ms={LEASE_MS}&wait_ms={wait_ms}"),
    }
}

/// One drain over HTTP against the daemon at `url`: preloads a fresh queue
/// with `args.items` items, then `workers` workers pop it empty in `mode`,
/// each over its own keep-alive connection. The result's `exact` says
/// whether exactly `args.items` distinct items came out, each once, and
/// the queue was left with nothing queued or leased.
pub async fn drain_http(
    url: &str,
    args: &BenchArgs,
    mode: Mode,
    workers: usize,
) -> Result<DrainResult, String> {
    let endpoint = Endpoint::resolve(url, args.token.as_deref(), Limits::default())
        .await
        .map_err(|e| e.to_string())?;
    // Every request: a long poll's wait plus room for a loaded daemon.
    let timeout = Duration::from_millis(args.wait_ms.saturating_add(30_000));
    let run = format!(
        "bench-http-{}-{workers}-{}",
        mode.name(),
        rand::random::<u32>()
    );
    let preloaded = payloads(&run, args.items, args.payload_bytes);
    let stats = Stats::new(url, &run, args.token.as_deref(), timeout)?;
    stats.preload(&preloaded, args.groups).await?;
    let pop = endpoint
        .target(&format!(
            "/v1/queues/{run}/pop{}",
            pop_query(mode, args.wait_ms)
        ))
        .map_err(|e| e.to_string())?;
    let pop = Arc::new(pop);
    let ack_prefix: Arc<str> = format!("/v1/queues/{run}/ack/").into();

    let mut connections = Vec::with_capacity(workers);
    for worker in 0..workers {
        let mut connection = Connection::new(endpoint.clone());
        connection
            .connect(CONNECT_TIMEOUT)
            .await
            .map_err(|e| format!("connecting worker {worker}: {e}"))?;
        connections.push(connection);
    }
    let tally = Arc::new(Tally::new(args.items));
    let cpu_before_us = process_cpu_us();
    let started = Instant::now();
    let deadline = started + Duration::from_secs(args.deadline_s);
    let mut tasks = Vec::with_capacity(workers);
    for mut connection in connections {
        let (tally, pop, ack_prefix, endpoint) = (
            tally.clone(),
            pop.clone(),
            ack_prefix.clone(),
            endpoint.clone(),
        );
        let items = args.items;
        tasks.push(tokio::spawn(async move {
            while !tally.done(items) {
                let call = Instant::now();
                let bound = deadline.saturating_duration_since(call).min(timeout);
                if bound.is_zero() {
                    // Past the deadline: the result shows what is missing.
                    break;
                }
                let response = match connection.post(&pop, bound).await {
                    Ok(response) => response,
                    Err(ClientError::Timeout { .. }) if Instant::now() >= deadline => break,
                    Err(error) => return Err(format!("pop: {error}")),
                };
                match response.status {
                    200 => {
                        if mode.leased() {
                            let receipt = response
                                .receipt
                                .ok_or("a leased pop answered without hotq-receipt")?;
                            let ack = endpoint
                                .target(&format!("{ack_prefix}{receipt}"))
                                .map_err(|e| e.to_string())?;
                            let acked = connection
                                .post(&ack, timeout)
                                .await
                                .map_err(|e| format!("ack: {e}"))?;
                            if acked.status != 204 {
                                return Err(format!("ack answered {}", acked.status));
                            }
                        }
                        tally.record(started, call, response.body.to_vec());
                    }
                    // 204: empty while other workers hold items in flight;
                    // 503: the recipe's retries ran out (naive). Again.
                    204 | 503 => {
                        tally.empty_polls.fetch_add(1, Ordering::Relaxed);
                        tokio::time::sleep(EMPTY_POLL_PAUSE).await;
                    }
                    status => {
                        let shown = &response.body[..response.body.len().min(200)];
                        return Err(format!(
                            "pop answered {status}: {}",
                            String::from_utf8_lossy(shown)
                        ));
                    }
                }
            }
            Ok::<(), String>(())
        }));
    }
    for task in tasks {
        task.await.map_err(|e| e.to_string())??;
    }
    let cpu_after_us = process_cpu_us();
    let scenario = if args.groups > 0 {
        "http-groups"
    } else {
        "http"
    };
    let mut result = tally.summarize(&preloaded, scenario, mode, workers);
    let delivered = tally.delivered.load(Ordering::SeqCst);
    result.client_cpu_us_per_pop = match (cpu_before_us, cpu_after_us) {
        (Some(before), Some(after)) if delivered > 0 => {
            Some(after.saturating_sub(before) as f64 / delivered as f64)
        }
        _ => None,
    };
    let left = stats.left().await?;
    result.exact &= left == 0;
    result.left = Some(left);
    Ok(result)
}

/// The untimed calls around a drain (preload, the stats at the end), over
/// reqwest: a few requests with JSON bodies.
struct Stats {
    client: reqwest::Client,
    queue_url: String,
    authorization: Option<String>,
}

impl Stats {
    fn new(
        url: &str,
        queue: &str,
        token: Option<&str>,
        timeout: Duration,
    ) -> Result<Stats, String> {
        Ok(Stats {
            client: reqwest::Client::builder()
                .timeout(timeout)
                .build()
                .map_err(|e| e.to_string())?,
            queue_url: format!("{}/v1/queues/{queue}", url.trim_end_matches('/')),
            authorization: token.map(|token| format!("Bearer {token}")),
        })
    }

    fn request(&self, method: reqwest::Method, url: String) -> reqwest::RequestBuilder {
        let request = self.client.request(method, url);
        match &self.authorization {
            Some(authorization) => request.header("authorization", authorization),
            None => request,
        }
    }

    /// Pushes `items`; with `groups` > 0, item `i` into group `g{i % groups}`.
    async fn preload(&self, items: &[Vec<u8>], groups: usize) -> Result<(), String> {
        use base64::Engine;
        let base64 = base64::engine::general_purpose::STANDARD;
        for (chunk_index, chunk) in items.chunks(PRELOAD_BATCH).enumerate() {
            let encoded: Vec<serde_json::Value> = chunk
                .iter()
                .enumerate()
                .map(|(offset, p)| {
                    let item = base64.encode(p);
                    if groups == 0 {
                        return serde_json::Value::from(item);
                    }
                    let group = (chunk_index * PRELOAD_BATCH + offset) % groups;
                    serde_json::json!({"item": item, "group": format!("g{group}")})
                })
                .collect();
            let response = self
                .request(
                    reqwest::Method::POST,
                    format!("{}/items:batch", self.queue_url),
                )
                .json(&encoded)
                .send()
                .await
                .map_err(|e| format!("preload: {e}"))?;
            if !response.status().is_success() {
                return Err(format!("preload failed: {}", response.status()));
            }
        }
        Ok(())
    }

    /// Items the queue still holds, queued or leased.
    async fn left(&self) -> Result<u64, String> {
        let response = self
            .request(reqwest::Method::GET, self.queue_url.clone())
            .send()
            .await
            .map_err(|e| format!("stats: {e}"))?;
        if !response.status().is_success() {
            return Err(format!("stats answered {}", response.status()));
        }
        let stats: serde_json::Value = response.json().await.map_err(|e| e.to_string())?;
        let count = |field: &str| {
            stats[field]
                .as_u64()
                .ok_or_else(|| format!("stats without {field}: {stats}"))
        };
        // Daemons before message groups have no `grouped`.
        let grouped = stats["grouped"].as_u64().unwrap_or(0);
        Ok(count("depth")? + count("leased")? + grouped)
    }
}
