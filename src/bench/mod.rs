//! `hotq bench`: pops under contention, measured, not claimed.
//!
//! Scenarios (each bounded by `--deadline-s`):
//! - `drain`: preload one queue with N unique items, then W workers pop
//!   until it is drained; for each W and each mode (`staged`: hotq's
//!   protocol; `naive`: the recipe as written — direct pop, retry on
//!   conflict with backoff, no staging). Checks that exactly N distinct
//!   items came out (exit 1 otherwise).
//! - `ceiling`: the embedded store's durable commits/s, one item per
//!   commit and 64 items per commit, from W concurrent committers.
//! - `tombstones`: push+pop cycles per queue pattern (FIFO, FIFO with
//!   items returned behind the head, priority queues at either end); push
//!   and pop latency at the start and at the end must match ([`tombstones`]).
//!
//! Transports: in-process (the library on an embedded store in
//! `--data-dir`, a fresh temporary directory by default) or `--url` (HTTP
//! against a running daemon; `naive` there asks for `pop?path=direct`).
//! Over HTTP the pops go through [`http1`], a lean keep-alive client (one
//! connection per worker), so the load generator, which shares the
//! daemon's cores, takes little of their CPU; each drain reports how much
//! it took (`client_cpu_us_per_pop`).

pub mod http1;
mod tombstones;

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use serde::Serialize;

use crate::coordinator::Coordinator;
use crate::envelope::End;
use crate::keys::{QueueKeys, QueueName};
use crate::queue::{Queue, QueueError};
use crate::staging::{StagingConfig, StagingStats};
use crate::store::embedded::{Durability, EmbeddedConfig, EmbeddedStore};
use crate::store::{Store, StoreError, Transaction};

/// What to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scenario {
    /// Preload N items, drain with W workers.
    Drain,
    /// Durable commits/s of the embedded store.
    Ceiling,
    /// Pop latency over many push+pop cycles.
    Tombstones,
}

/// Which pop to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// hotq: direct pop, then staged on conflict.
    Staged,
    /// The recipe: direct pop, retry on conflict, no staging.
    Naive,
}

/// `hotq bench` options.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// What to measure.
    #[arg(long, value_enum, default_value = "drain")]
    pub scenario: Scenario,
    /// Items preloaded per drain.
    #[arg(long, default_value_t = 20_000)]
    pub items: usize,
    /// Bytes per item.
    #[arg(long, default_value_t = 100)]
    pub payload_bytes: usize,
    /// Worker counts to sweep, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,8,64,256")]
    pub workers: Vec<usize>,
    /// Modes to run, comma-separated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "staged,naive"
    )]
    pub modes: Vec<Mode>,
    /// Push+pop cycles for the tombstone scenario.
    #[arg(long, default_value_t = 1_000_000)]
    pub cycles: usize,
    /// Run against a daemon at this URL instead of in process.
    #[arg(long)]
    pub url: Option<String>,
    /// Bearer token for `--url`.
    #[arg(long, env = "HOTQ_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// In-process store directory (default: a fresh temporary directory).
    #[arg(long)]
    pub data_dir: Option<std::path::PathBuf>,
    /// In-process store durability.
    #[arg(long, default_value = "sync")]
    pub durability: Durability,
    /// How long a worker waits on a staged pop, in ms.
    #[arg(long, default_value_t = 1_000)]
    pub wait_ms: u64,
    /// Bound on each run, in seconds.
    #[arg(long, default_value_t = 300)]
    pub deadline_s: u64,
    /// Print results as JSON lines.
    #[arg(long)]
    pub json: bool,
}

/// One drain run's figures.
#[derive(Debug, Serialize)]
pub struct DrainResult {
    /// `drain`.
    pub scenario: &'static str,
    /// `inproc` or `http`.
    pub transport: &'static str,
    /// Which pop.
    pub mode: Mode,
    /// Concurrent workers.
    pub workers: usize,
    /// Items drained.
    pub items: usize,
    /// Items per second, first pop to last delivery.
    pub pops_per_s: f64,
    /// Pop latency percentiles, in ms.
    pub p50_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Slowest pop.
    pub max_ms: f64,
    /// Commit conflicts per delivered item (in process only).
    pub conflicts_per_pop: Option<f64>,
    /// Share of items delivered through requests.
    pub staged_share: Option<f64>,
    /// Mean requests served per fulfillment transaction.
    pub fulfill_batch_mean: Option<f64>,
    /// fsync groups during the run (in process only).
    pub fsync_groups: Option<u64>,
    /// Exactly `items` distinct items came out.
    pub exact: bool,
    /// Peak resident memory of this process so far, in MiB.
    pub peak_rss_mib: Option<f64>,
    /// CPU (user + system) this process spent during the drain per item
    /// delivered, in µs: over HTTP, what the load generator itself costs
    /// (Linux only; not measured in process, where the client is the
    /// daemon).
    pub client_cpu_us_per_pop: Option<f64>,
}

fn percentile_ms(sorted_us: &[u64], fraction: f64) -> f64 {
    if sorted_us.is_empty() {
        return 0.0;
    }
    let index = ((sorted_us.len() as f64 - 1.0) * fraction).round() as usize;
    sorted_us[index] as f64 / 1_000.0
}

/// Peak resident set size of this process (Linux), in MiB.
pub fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1_024.0)
}

/// CPU time (user + system) this process has used so far, all threads, in
/// µs (Linux: `/proc/self/stat`, in clock ticks of 10 ms: `USER_HZ` is 100
/// on Linux's common architectures).
pub fn process_cpu_us() -> Option<u64> {
    const MICROSECONDS_PER_TICK: u64 = 1_000_000 / 100;
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) is in parentheses and may hold spaces.
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace();
    // Field 3 (state) comes first; utime and stime are fields 14 and 15.
    let utime_ticks: u64 = fields.nth(11)?.parse().ok()?;
    let stime_ticks: u64 = fields.next()?.parse().ok()?;
    Some((utime_ticks + stime_ticks) * MICROSECONDS_PER_TICK)
}

/// Runs the benchmark; exit 1 if a drain did not deliver exactly N items.
pub async fn run(args: BenchArgs) -> Result<u8, String> {
    let _temporary;
    let store = if args.url.is_none() {
        let path = match &args.data_dir {
            Some(path) => path.clone(),
            None => {
                let dir = tempfile_dir()?;
                let path = dir.path().to_path_buf();
                _temporary = dir;
                path
            }
        };
        let mut config = EmbeddedConfig::new(&path);
        config.durability = args.durability;
        Some(EmbeddedStore::open(config).map_err(|e| e.to_string())?)
    } else {
        None
    };
    let mut all_exact = true;
    match args.scenario {
        Scenario::Drain => {
            for &workers in &args.workers {
                for &mode in &args.modes {
                    let result = match (&store, &args.url) {
                        (Some(store), _) => drain_in_process(store, &args, mode, workers).await?,
                        (None, Some(url)) => drain_http(url, &args, mode, workers).await?,
                        (None, None) => unreachable!("no store means a URL was given"),
                    };
                    all_exact &= result.exact;
                    print_drain(&result, args.json);
                }
            }
        }
        Scenario::Ceiling => {
            let store = store.ok_or("the ceiling scenario runs in process only")?;
            for &workers in &args.workers {
                for items_per_commit in [1usize, 64] {
                    ceiling(&store, &args, workers, items_per_commit).await?;
                }
            }
        }
        Scenario::Tombstones => {
            let store = store.ok_or("the tombstone scenario runs in process only")?;
            tombstones::run(&store, &args).await?;
        }
    }
    Ok(if all_exact { 0 } else { 1 })
}

fn tempfile_dir() -> Result<TempDir, String> {
    TempDir::new()
}

/// A directory removed on drop (the bench's default store location).
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new() -> Result<TempDir, String> {
        let path = std::env::temp_dir().join(format!(
            "hotq-bench-{}-{}",
            std::process::id(),
            rand::random::<u32>()
        ));
        std::fs::create_dir_all(&path).map_err(|e| e.to_string())?;
        Ok(TempDir(path))
    }

    fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn print_drain(result: &DrainResult, json: bool) {
    if json {
        println!("{}", serde_json::to_string(result).expect("serializable"));
        return;
    }
    let optional = |value: Option<f64>, digits: usize| match value {
        Some(value) => format!("{value:.digits$}"),
        None => "-".into(),
    };
    println!(
        "drain {:>6} {:>6} W={:<4} {:>9.0} pops/s  p50 {:>7.2} ms  p99 {:>7.2} ms  max {:>7.1} ms  conflicts/pop {:>5}  staged {:>5}  batch {:>6}  groups {:>6}  exact {}  rss {} MiB  client cpu {} us/pop",
        result.transport,
        format!("{:?}", result.mode).to_lowercase(),
        result.workers,
        result.pops_per_s,
        result.p50_ms,
        result.p99_ms,
        result.max_ms,
        optional(result.conflicts_per_pop, 2),
        optional(result.staged_share, 2),
        optional(result.fulfill_batch_mean, 1),
        result.fsync_groups.map_or("-".into(), |g| g.to_string()),
        result.exact,
        optional(result.peak_rss_mib, 0),
        optional(result.client_cpu_us_per_pop, 1),
    );
}

fn payloads(run: &str, count: usize, bytes: usize) -> Vec<Vec<u8>> {
    (0..count)
        .map(|n| {
            let mut payload = format!("{run}:{n}:").into_bytes();
            payload.resize(bytes.max(payload.len()), b'.');
            payload
        })
        .collect()
}

struct Tally {
    latencies_us: Mutex<Vec<u64>>,
    seen: Mutex<HashSet<Vec<u8>>>,
    duplicates: AtomicUsize,
    delivered: AtomicUsize,
    last_delivery_us: AtomicU64,
}

impl Tally {
    fn new(items: usize) -> Tally {
        Tally {
            latencies_us: Mutex::new(Vec::with_capacity(items)),
            seen: Mutex::new(HashSet::with_capacity(items)),
            duplicates: AtomicUsize::new(0),
            delivered: AtomicUsize::new(0),
            last_delivery_us: AtomicU64::new(0),
        }
    }

    fn record(&self, started: Instant, call: Instant, payload: Vec<u8>) {
        let now = Instant::now();
        self.latencies_us
            .lock()
            .expect("tally lock")
            .push((now - call).as_micros() as u64);
        if !self.seen.lock().expect("tally lock").insert(payload) {
            self.duplicates.fetch_add(1, Ordering::Relaxed);
        }
        self.delivered.fetch_add(1, Ordering::SeqCst);
        self.last_delivery_us
            .fetch_max((now - started).as_micros() as u64, Ordering::Relaxed);
    }
}

async fn drain_in_process(
    store: &EmbeddedStore,
    args: &BenchArgs,
    mode: Mode,
    workers: usize,
) -> Result<DrainResult, String> {
    let run = format!(
        "bench-{}-{workers}-{}",
        format!("{mode:?}").to_lowercase(),
        rand::random::<u32>()
    );
    let name = QueueName::new(&run).map_err(|e| e.to_string())?;
    let queue = Queue::new(store.clone(), name.clone());
    for chunk in payloads(&run, args.items, args.payload_bytes).chunks(1_000) {
        queue.push_batch(chunk).await.map_err(|e| e.to_string())?;
    }
    let coordinator = Coordinator::new(store.clone(), StagingConfig::default());
    let keys = QueueKeys::new(&name);
    let tally = Arc::new(Tally::new(args.items));
    let (commits_before, conflicts_before, groups_before) = store.counts();
    let started = Instant::now();
    let deadline = started + Duration::from_secs(args.deadline_s);
    let wait = Duration::from_millis(args.wait_ms);
    let mut tasks = Vec::with_capacity(workers);
    for _ in 0..workers {
        let (tally, coordinator, keys, queue) = (
            tally.clone(),
            coordinator.clone(),
            keys.clone(),
            queue.clone(),
        );
        let items = args.items;
        tasks.push(tokio::spawn(async move {
            while tally.delivered.load(Ordering::SeqCst) < items && Instant::now() < deadline {
                let call = Instant::now();
                let popped = match mode {
                    Mode::Staged => coordinator.pop(&keys, End::Front, wait).await,
                    Mode::Naive => queue.pop().await,
                };
                match popped {
                    Ok(Some(item)) => tally.record(started, call, item.payload),
                    Ok(None) => {}
                    // The recipe's retries ran out under contention (over
                    // HTTP this is a 503): the worker tries again.
                    Err(QueueError::Store(StoreError::Conflict)) if mode == Mode::Naive => {}
                    Err(error) => return Err(error.to_string()),
                }
            }
            Ok(())
        }));
    }
    for task in tasks {
        task.await.map_err(|e| e.to_string())??;
    }
    coordinator.shutdown(Duration::from_secs(5)).await;
    let (_, conflicts_after, groups_after) = store.counts();
    let _ = commits_before;
    let staged = StagingStats::get(&coordinator.stats().staged_pops);
    let batches = StagingStats::get(&coordinator.stats().fulfill_batches);
    let mut result = summarize(&tally, args.items, started, "inproc", mode, workers);
    result.conflicts_per_pop =
        Some((conflicts_after - conflicts_before) as f64 / args.items.max(1) as f64);
    result.staged_share = Some(staged as f64 / args.items.max(1) as f64);
    result.fulfill_batch_mean = (batches > 0).then(|| staged as f64 / batches as f64);
    result.fsync_groups = Some(groups_after - groups_before);
    Ok(result)
}

fn summarize(
    tally: &Tally,
    items: usize,
    _started: Instant,
    transport: &'static str,
    mode: Mode,
    workers: usize,
) -> DrainResult {
    let mut latencies = tally.latencies_us.lock().expect("tally lock").clone();
    latencies.sort_unstable();
    let delivered = tally.delivered.load(Ordering::SeqCst);
    let distinct = tally.seen.lock().expect("tally lock").len();
    let elapsed_s = tally.last_delivery_us.load(Ordering::Relaxed).max(1) as f64 / 1e6;
    DrainResult {
        scenario: "drain",
        transport,
        mode,
        workers,
        items,
        pops_per_s: delivered as f64 / elapsed_s,
        p50_ms: percentile_ms(&latencies, 0.50),
        p99_ms: percentile_ms(&latencies, 0.99),
        max_ms: latencies.last().map_or(0.0, |us| *us as f64 / 1_000.0),
        conflicts_per_pop: None,
        staged_share: None,
        fulfill_batch_mean: None,
        fsync_groups: None,
        exact: delivered == items
            && distinct == items
            && tally.duplicates.load(Ordering::Relaxed) == 0,
        peak_rss_mib: peak_rss_mib(),
        client_cpu_us_per_pop: None,
    }
}

/// One drain over HTTP against the daemon at `url`: preloads a fresh
/// queue with `args.items` items, then `workers` workers pop it empty, each
/// over its own keep-alive connection ([`http1`]). The result's `exact`
/// says whether exactly `args.items` distinct items came out.
pub async fn drain_http(
    url: &str,
    args: &BenchArgs,
    mode: Mode,
    workers: usize,
) -> Result<DrainResult, String> {
    use base64::Engine;
    let base64 = base64::engine::general_purpose::STANDARD;
    let endpoint = http1::Endpoint::resolve(url)
        .await
        .map_err(|e| e.to_string())?;
    let timeout = Duration::from_millis(args.wait_ms.saturating_add(30_000));
    // The preload is a few calls; reqwest is simplest for a JSON body.
    let client = reqwest::Client::builder()
        .timeout(timeout)
        .build()
        .map_err(|e| e.to_string())?;
    let run = format!("bench-http-{workers}-{}", rand::random::<u32>());
    let url = url.trim_end_matches('/').to_string();
    let auth = args.token.clone().map(|token| format!("Bearer {token}"));
    for chunk in payloads(&run, args.items, args.payload_bytes).chunks(1_000) {
        let encoded: Vec<String> = chunk.iter().map(|p| base64.encode(p)).collect();
        let mut request = client
            .post(format!("{url}/v1/queues/{run}/items:batch"))
            .json(&encoded);
        if let Some(auth) = &auth {
            request = request.header("authorization", auth);
        }
        let response = request.send().await.map_err(|e| e.to_string())?;
        if !response.status().is_success() {
            return Err(format!("preload failed: {}", response.status()));
        }
    }
    let query = match mode {
        Mode::Staged => format!("wait_ms={}", args.wait_ms),
        Mode::Naive => "path=direct".to_string(),
    };
    // Every pop sends the same bytes.
    let request: Arc<[u8]> = endpoint
        .post_request(
            &format!("/v1/queues/{run}/pop?{query}"),
            args.token.as_deref(),
        )
        .map_err(|e| e.to_string())?
        .into();
    let tally = Arc::new(Tally::new(args.items));
    let cpu_before_us = process_cpu_us();
    let started = Instant::now();
    let deadline = started + Duration::from_secs(args.deadline_s);
    let mut tasks = Vec::with_capacity(workers);
    for _ in 0..workers {
        let (tally, request) = (tally.clone(), request.clone());
        let mut connection = http1::Connection::new(endpoint.address(), http1::Limits::default());
        let items = args.items;
        tasks.push(tokio::spawn(async move {
            while tally.delivered.load(Ordering::SeqCst) < items && Instant::now() < deadline {
                let call = Instant::now();
                let response = connection
                    .request(&request, timeout)
                    .await
                    .map_err(|e| format!("pop: {e}"))?;
                match response.status {
                    200 => tally.record(started, call, response.body),
                    // 503: the recipe's retries ran out under contention; try again.
                    204 | 503 => {}
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
    let mut result = summarize(&tally, args.items, started, "http", mode, workers);
    let delivered = tally.delivered.load(Ordering::SeqCst);
    result.client_cpu_us_per_pop = match (cpu_before_us, cpu_after_us) {
        (Some(before), Some(after)) if delivered > 0 => {
            Some(after.saturating_sub(before) as f64 / delivered as f64)
        }
        _ => None,
    };
    Ok(result)
}

async fn ceiling(
    store: &EmbeddedStore,
    args: &BenchArgs,
    workers: usize,
    items_per_commit: usize,
) -> Result<(), String> {
    let commits_total = (args.items / items_per_commit).max(workers);
    let next = Arc::new(AtomicUsize::new(0));
    let (_, _, groups_before) = store.counts();
    let started = Instant::now();
    let deadline = started + Duration::from_secs(args.deadline_s);
    let value = vec![b'v'; args.payload_bytes];
    let mut tasks = Vec::new();
    for worker in 0..workers.max(1) {
        let (store, next, value) = (store.clone(), next.clone(), value.clone());
        tasks.push(tokio::spawn(async move {
            while next.fetch_add(1, Ordering::Relaxed) < commits_total && Instant::now() < deadline
            {
                let txn = store.begin().map_err(|e| e.to_string())?;
                for i in 0..items_per_commit {
                    let key = format!("bench-ceiling/{worker}/{}/{i}", rand::random::<u64>());
                    txn.set(key.as_bytes(), &value).map_err(|e| e.to_string())?;
                }
                txn.commit().await.map_err(|e| e.to_string())?;
            }
            Ok::<(), String>(())
        }));
    }
    for task in tasks {
        task.await.map_err(|e| e.to_string())??;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let (_, _, groups_after) = store.counts();
    let commits = commits_total as f64;
    let groups = (groups_after - groups_before).max(1);
    let line = serde_json::json!({
        "scenario": "ceiling",
        "durability": format!("{:?}", args.durability).to_lowercase(),
        "workers": workers,
        "items_per_commit": items_per_commit,
        "commits_per_s": commits / elapsed,
        "items_per_s": commits * items_per_commit as f64 / elapsed,
        "fsync_groups_per_s": groups as f64 / elapsed,
        "commits_per_group": commits / groups as f64,
    });
    if args.json {
        println!("{line}");
    } else {
        println!(
            "ceiling {:?} W={:<4} {:>3} items/commit: {:>9.0} commits/s {:>9.0} items/s {:>7.0} groups/s {:>6.1} commits/group",
            args.durability,
            workers,
            items_per_commit,
            commits / elapsed,
            commits * items_per_commit as f64 / elapsed,
            groups as f64 / elapsed,
            commits / groups as f64
        );
    }
    Ok(())
}
