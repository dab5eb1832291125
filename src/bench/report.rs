//! A drain's tally and its report: one table row or one JSON line per
//! (mode, W).

use parking_lot::Mutex;
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use serde::Serialize;

use super::{Mode, peak_rss_mib, percentile_ms};

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
    /// Items preloaded.
    pub items: usize,
    /// Items delivered (duplicates included).
    pub pops: usize,
    /// Seconds from the first pop (every connection open) to the last item.
    pub elapsed_s: f64,
    /// Items per second over `elapsed_s`.
    pub pops_per_s: f64,
    /// Pop latency percentiles, in ms (a leased pop's includes its ack).
    pub p50_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Slowest pop.
    pub max_ms: f64,
    /// Commit conflicts per delivered item (in process only).
    pub conflicts_per_pop: Option<f64>,
    /// Share of items delivered through requests (in process only).
    pub staged_share: Option<f64>,
    /// Mean requests served per fulfillment transaction (in process only).
    pub fulfill_batch_mean: Option<f64>,
    /// fsync groups during the run (in process only).
    pub fsync_groups: Option<u64>,
    /// Preloaded items never delivered.
    pub lost: usize,
    /// Deliveries beyond the first of an item.
    pub dup: usize,
    /// Pops that came back empty (or, for `naive`, out of retries),
    /// including each waiting worker's last long poll once the queue is dry.
    pub empty_polls: u64,
    /// Items the queue still held after the drain, queued or leased (over
    /// HTTP only).
    pub left: Option<u64>,
    /// Exactly `items` distinct items came out, each once (and, over HTTP,
    /// none was left).
    pub exact: bool,
    /// Peak resident memory of this process so far, in MiB.
    pub peak_rss_mib: Option<f64>,
    /// CPU (user + system) this process spent during the drain per item
    /// delivered, in µs: over HTTP, what the load generator itself costs
    /// (Linux only, 10 ms ticks: trust it for drains of a second or more;
    /// not measured in process, where the client is the daemon).
    pub client_cpu_us_per_pop: Option<f64>,
}

/// What the workers of one drain delivered.
pub(crate) struct Tally {
    latencies_us: Mutex<Vec<u64>>,
    seen: Mutex<HashSet<Vec<u8>>>,
    duplicates: AtomicUsize,
    pub(crate) delivered: AtomicUsize,
    pub(crate) empty_polls: AtomicU64,
    last_delivery_us: AtomicU64,
}

impl Tally {
    pub(crate) fn new(items: usize) -> Tally {
        Tally {
            latencies_us: Mutex::new(Vec::with_capacity(items)),
            seen: Mutex::new(HashSet::with_capacity(items)),
            duplicates: AtomicUsize::new(0),
            delivered: AtomicUsize::new(0),
            empty_polls: AtomicU64::new(0),
            last_delivery_us: AtomicU64::new(0),
        }
    }

    /// Whether all `items` are out (the workers' stop condition).
    pub(crate) fn done(&self, items: usize) -> bool {
        self.delivered.load(Ordering::SeqCst) >= items
    }

    /// One delivery: the pop began at `call`, the drain at `started`.
    pub(crate) fn record(&self, started: Instant, call: Instant, payload: Vec<u8>) {
        let now = Instant::now();
        self.latencies_us
            .lock()
            .push((now - call).as_micros() as u64);
        if !self.seen.lock().insert(payload) {
            self.duplicates.fetch_add(1, Ordering::Relaxed);
        }
        self.delivered.fetch_add(1, Ordering::SeqCst);
        self.last_delivery_us
            .fetch_max((now - started).as_micros() as u64, Ordering::Relaxed);
    }

    /// The figures common to both transports; `preloaded` are the items
    /// pushed, so anything else delivered counts as neither lost nor
    /// distinct.
    pub(crate) fn summarize(
        &self,
        preloaded: &[Vec<u8>],
        transport: &'static str,
        mode: Mode,
        workers: usize,
    ) -> DrainResult {
        let mut latencies = self.latencies_us.lock().clone();
        latencies.sort_unstable();
        let delivered = self.delivered.load(Ordering::SeqCst);
        let seen = self.seen.lock();
        let lost = preloaded
            .iter()
            .filter(|item| !seen.contains(*item))
            .count();
        let foreign = seen.len() + lost - preloaded.len();
        let dup = self.duplicates.load(Ordering::Relaxed);
        let elapsed_s = self.last_delivery_us.load(Ordering::Relaxed).max(1) as f64 / 1e6;
        DrainResult {
            scenario: "drain",
            transport,
            mode,
            workers,
            items: preloaded.len(),
            pops: delivered,
            elapsed_s,
            pops_per_s: delivered as f64 / elapsed_s,
            p50_ms: percentile_ms(&latencies, 0.50),
            p99_ms: percentile_ms(&latencies, 0.99),
            max_ms: latencies.last().map_or(0.0, |us| *us as f64 / 1_000.0),
            conflicts_per_pop: None,
            staged_share: None,
            fulfill_batch_mean: None,
            fsync_groups: None,
            lost,
            dup,
            empty_polls: self.empty_polls.load(Ordering::Relaxed),
            left: None,
            exact: lost == 0 && dup == 0 && foreign == 0 && delivered == preloaded.len(),
            peak_rss_mib: peak_rss_mib(),
            client_cpu_us_per_pop: None,
        }
    }
}

/// `count` distinct payloads of `bytes` bytes (at least their unique
/// prefix), tagged with `run`.
pub(crate) fn payloads(run: &str, count: usize, bytes: usize) -> Vec<Vec<u8>> {
    (0..count)
        .map(|n| {
            let mut payload = format!("{run}:{n}:").into_bytes();
            payload.resize(bytes.max(payload.len()), b'.');
            payload
        })
        .collect()
}

/// The table's column names (printed once before the first row).
pub(crate) fn print_header() {
    println!(
        "{:<6} {:<15} {:>5} {:>7} {:>8} {:>9} {:>8} {:>8} {:>8} {:>7} {:>5} {:>4} {:>7} {:>9} {:>7} {:>6} {:>6}  status",
        "drain",
        "mode",
        "W",
        "pops",
        "secs",
        "pops/s",
        "p50 ms",
        "p99 ms",
        "max ms",
        "cli us",
        "lost",
        "dup",
        "empties",
        "confl/pop",
        "staged",
        "batch",
        "groups"
    );
}

/// One row of the table, or one JSON line.
pub(crate) fn print_drain(result: &DrainResult, json: bool) {
    if json {
        println!("{}", serde_json::to_string(result).expect("serializable"));
        return;
    }
    let optional = |value: Option<f64>, digits: usize| match value {
        Some(value) => format!("{value:.digits$}"),
        None => "-".into(),
    };
    let status = if result.exact {
        "ok".to_string()
    } else {
        format!("NOT EXACT: {} of {} delivered", result.pops, result.items)
    };
    println!(
        "{:<6} {:<15} {:>5} {:>7} {:>8.2} {:>9.0} {:>8.3} {:>8.3} {:>8.1} {:>7} {:>5} {:>4} {:>7} {:>9} {:>7} {:>6} {:>6}  {status}",
        result.transport,
        result.mode.name(),
        result.workers,
        result.pops,
        result.elapsed_s,
        result.pops_per_s,
        result.p50_ms,
        result.p99_ms,
        result.max_ms,
        optional(result.client_cpu_us_per_pop, 1),
        result.lost,
        result.dup,
        result.empty_polls,
        optional(result.conflicts_per_pop, 2),
        optional(result.staged_share, 2),
        optional(result.fulfill_batch_mean, 1),
        result.fsync_groups.map_or("-".into(), |g| g.to_string()),
    );
}
