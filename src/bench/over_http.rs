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

use super::client::{ClientError, Connection, Endpoint, Limits, Response};
use super::report::{DrainResult, Tally, payloads};
use super::sqs::{self, SqsCalls};
use super::{BenchArgs, LEASE_MS, Mode, process_cpu_us};

/// Bound on opening one worker's connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// Pause before polling again after an empty answer (peerbench's).
const EMPTY_POLL_PAUSE: Duration = Duration::from_millis(1);
/// Items per preload request.
const PRELOAD_BATCH: usize = 1_000;

/// The pop's query string for `mode` (with its leading `?`, or empty;
/// `sqs` does not pop through `/v1`).
pub fn pop_query(mode: Mode, wait_ms: u64) -> String {
    match mode {
        Mode::Plain | Mode::Sqs => String::new(),
        // The RESP modes do not pop over HTTP.
        Mode::Resp | Mode::RespLeased | Mode::RespLeasedNext | Mode::RespLpop => String::new(),
        Mode::Staged | Mode::Longpoll => format!("?wait_ms={wait_ms}"),
        Mode::Naive => "?path=direct".into(),
        Mode::Leased | Mode::LeasedNext => format!("?lease_ms={LEASE_MS}"),
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
    if mode == Mode::Sqs && args.token.is_some() {
        return Err(
            "the sqs mode sends unsigned SQS requests, which a daemon with a token \
                    refuses: run it against a loopback daemon without a token or [sqs] \
                    credentials (and without HOTQ_TOKEN set)"
                .into(),
        );
    }
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
    // Before the preload, so the queue has its SQS record throughout.
    let sqs = match mode {
        Mode::Sqs => Some(SqsCalls::new(
            &endpoint,
            sqs::create_queue(&stats.client, url, &run).await?,
        )?),
        _ => None,
    };
    stats.preload(&preloaded, args.groups).await?;
    let worker = Arc::new(Worker {
        endpoint: endpoint.clone(),
        mode,
        pop_path: format!("/v1/queues/{run}/pop{}", pop_query(mode, args.wait_ms)),
        ack_prefix: format!("/v1/queues/{run}/ack/"),
        sqs,
        timeout,
        items: args.items,
    });
    let connections = connect_all(&endpoint, workers).await?;
    let tally = Arc::new(Tally::new(args.items));
    let cpu_before_us = process_cpu_us();
    run_workers(&worker, connections, &tally, args.deadline_s).await?;
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

/// One open connection per worker, all before the clock starts.
async fn connect_all(endpoint: &Endpoint, workers: usize) -> Result<Vec<Connection>, String> {
    let mut connections = Vec::with_capacity(workers);
    for n in 0..workers {
        let mut connection = Connection::new(endpoint.clone());
        connection
            .connect(CONNECT_TIMEOUT)
            .await
            .map_err(|e| format!("connecting worker {n}: {e}"))?;
        connections.push(connection);
    }
    Ok(connections)
}

/// Starts the clock and one task per connection; returns when all ended.
async fn run_workers(
    worker: &Arc<Worker>,
    connections: Vec<Connection>,
    tally: &Arc<Tally>,
    deadline_s: u64,
) -> Result<(), String> {
    let started = Instant::now();
    let deadline = started + Duration::from_secs(deadline_s);
    let mut tasks = Vec::with_capacity(connections.len());
    for connection in connections {
        let (worker, tally) = (worker.clone(), tally.clone());
        tasks.push(tokio::spawn(async move {
            worker.drain(connection, &tally, started, deadline).await
        }));
    }
    for task in tasks {
        task.await.map_err(|e| e.to_string())??;
    }
    Ok(())
}

/// What every worker of a drain shares.
struct Worker {
    endpoint: Endpoint,
    mode: Mode,
    /// The pop's path and query.
    pop_path: String,
    /// The ack's path, less the receipt.
    ack_prefix: String,
    /// The SQS calls, in mode `sqs` (which pops and acks through them).
    sqs: Option<SqsCalls>,
    /// Bound on one request.
    timeout: Duration,
    /// Items in the drain.
    items: usize,
}

/// What one pop gave.
enum Popped {
    /// An item's payload, and its lease's receipt when leased.
    Item {
        payload: Vec<u8>,
        receipt: Option<String>,
    },
    /// Nothing: empty while other workers hold items in flight (204, an
    /// SQS answer without messages), or the recipe's retries ran out
    /// (`naive`'s 503).
    Empty,
}

impl Worker {
    /// One worker's loop: pops (acking each item after it, or with the
    /// next pop) until every item is delivered or `deadline` passes.
    async fn drain(
        &self,
        mut connection: Connection,
        tally: &Tally,
        started: Instant,
        deadline: Instant,
    ) -> Result<(), String> {
        // The receipt riding on the next pop (`leased-next`).
        let mut carried: Option<String> = None;
        while !tally.done(self.items) || carried.is_some() {
            let call = Instant::now();
            let bound = deadline.saturating_duration_since(call).min(self.timeout);
            if bound.is_zero() {
                // Past the deadline: the result shows what is missing.
                break;
            }
            let rode = carried.is_some();
            let response = match self.send_pop(&mut connection, carried.take(), bound).await {
                Ok(response) => response,
                Err(ClientError::Timeout { .. }) if Instant::now() >= deadline => break,
                Err(error) => return Err(format!("pop: {error}")),
            };
            match self.popped(&response, rode)? {
                Popped::Item { payload, receipt } => {
                    carried = self.settle(&mut connection, receipt).await?;
                    tally.record(started, call, payload);
                }
                Popped::Empty => {
                    tally.empty_polls.fetch_add(1, Ordering::Relaxed);
                    if !tally.done(self.items) {
                        tokio::time::sleep(EMPTY_POLL_PAUSE).await;
                    }
                }
            }
        }
        Ok(())
    }

    /// Sends one pop (in `sqs`, a ReceiveMessage), with `carried`'s ack
    /// riding on it.
    async fn send_pop(
        &self,
        connection: &mut Connection,
        carried: Option<String>,
        bound: Duration,
    ) -> Result<Response, ClientError> {
        if let Some(sqs) = &self.sqs {
            return sqs.receive(connection, bound).await;
        }
        let target = match carried {
            Some(receipt) => format!("{}&ack={receipt}", self.pop_path),
            None => self.pop_path.clone(),
        };
        let target = self.endpoint.target(&target)?;
        connection.post(&target, bound).await
    }

    /// What a pop's `response` gave; `rode`: an ack rode on it.
    fn popped(&self, response: &Response, rode: bool) -> Result<Popped, String> {
        if self.sqs.is_some() {
            return Ok(match sqs::received(response)? {
                Some(received) => Popped::Item {
                    payload: received.body,
                    receipt: Some(received.receipt_handle),
                },
                None => Popped::Empty,
            });
        }
        if rode && response.acked.as_deref() != Some("acked") {
            return Err(format!("a pop's ack answered {:?}", response.acked));
        }
        match response.status {
            200 => Ok(Popped::Item {
                payload: response.body.to_vec(),
                receipt: response.receipt.clone(),
            }),
            204 | 503 => Ok(Popped::Empty),
            status => {
                let shown = &response.body[..response.body.len().min(200)];
                Err(format!(
                    "pop answered {status}: {}",
                    String::from_utf8_lossy(shown)
                ))
            }
        }
    }

    /// After a leased pop: acks `receipt` now (in `sqs`, DeleteMessage),
    /// or returns it to ride on the next pop (`leased-next`); nothing for
    /// an unleased pop.
    async fn settle(
        &self,
        connection: &mut Connection,
        receipt: Option<String>,
    ) -> Result<Option<String>, String> {
        if !self.mode.leased() {
            return Ok(None);
        }
        let receipt = receipt.ok_or("a leased pop answered without hotq-receipt")?;
        if let Some(sqs) = &self.sqs {
            sqs.delete(connection, &receipt, self.timeout).await?;
            return Ok(None);
        }
        if self.mode == Mode::LeasedNext {
            return Ok(Some(receipt));
        }
        let ack = self
            .endpoint
            .target(&format!("{}{receipt}", self.ack_prefix))
            .map_err(|e| e.to_string())?;
        let acked = connection
            .post(&ack, self.timeout)
            .await
            .map_err(|e| format!("ack: {e}"))?;
        if acked.status != 204 {
            return Err(format!("ack answered {}", acked.status));
        }
        Ok(None)
    }
}

/// The untimed calls around a drain (preload, the stats at the end), over
/// reqwest: a few requests with JSON bodies.
pub(super) struct Stats {
    pub(super) client: reqwest::Client,
    queue_url: String,
    authorization: Option<String>,
}

impl Stats {
    pub(super) fn new(
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
    pub(super) async fn preload(&self, items: &[Vec<u8>], groups: usize) -> Result<(), String> {
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
    pub(super) async fn left(&self) -> Result<u64, String> {
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
