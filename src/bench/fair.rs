//! `--scenario fair` (issue #40): one noisy tenant pushes `--items` at
//! once, [`QUIET_TENANTS`] quiet tenants push [`QUIET_PER_S`] items/s
//! each, and W workers (the first of `--workers`) pop through the core
//! until the noisy backlog is drained (or `--deadline-s`). Measured: how
//! long a quiet tenant's item waits from its push to its pop, and the
//! noisy backlog's drain rate; once with FIFO (no keys), once with each
//! tenant's fairness key, side by side.

use parking_lot::Mutex;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::inproc::pop_one;
use super::{BenchArgs, percentile_ms};
use crate::config::Config;
use crate::keys::{QueueKeys, QueueName};
use crate::service::{Hotq, PUSH_BATCH_MAX, PushItem, PushOptions};
use crate::store::embedded::EmbeddedStore;

/// Quiet tenants pushing at a steady rate.
pub const QUIET_TENANTS: usize = 20;
/// Items each quiet tenant pushes per second.
pub const QUIET_PER_S: u64 = 10;
/// How long a worker's pop waits for an item.
const POP_WAIT: Duration = Duration::from_millis(100);

/// One run: FIFO or fair.
#[derive(Debug, Serialize)]
pub struct FairResult {
    /// `fair`.
    pub scenario: &'static str,
    /// True: every item pushed under its tenant's fairness key.
    pub fair_keys: bool,
    /// The noisy tenant's backlog.
    pub items: usize,
    /// Workers popping.
    pub workers: usize,
    /// Quiet items popped (each one's wait measured).
    pub quiet_items: usize,
    /// Median wait of a quiet item, push to pop, in ms.
    pub quiet_wait_p50_ms: f64,
    /// 99th percentile wait of a quiet item, in ms.
    pub quiet_wait_p99_ms: f64,
    /// Longest wait of a quiet item, in ms.
    pub quiet_wait_max_ms: f64,
    /// Noisy items popped.
    pub noisy_popped: usize,
    /// Noisy items per second, from the first pop to the last.
    pub noisy_per_s: f64,
    /// The backlog was drained and every quiet item pushed was popped
    /// within `--deadline-s`.
    pub exact: bool,
}

/// Runs the scenario without and with fairness keys; whether both runs
/// were exact (everything pushed popped in time).
pub async fn run(store: &EmbeddedStore, args: &BenchArgs) -> Result<bool, String> {
    let workers = args
        .workers
        .first()
        .copied()
        .ok_or("give --workers")?
        .max(1);
    let mut all_exact = true;
    for fair_keys in [false, true] {
        let result = once(store, args, workers, fair_keys).await?;
        all_exact &= result.exact;
        if args.json {
            println!("{}", serde_json::to_string(&result).expect("serializable"));
        } else {
            println!(
                "{:<4} W={:<4} noisy={:<7} {:>8.0} noisy/s  quiet={:<5} wait p50 {:>8.1} ms  p99 {:>8.1} ms  max {:>8.1} ms",
                if fair_keys { "fair" } else { "fifo" },
                result.workers,
                result.noisy_popped,
                result.noisy_per_s,
                result.quiet_items,
                result.quiet_wait_p50_ms,
                result.quiet_wait_p99_ms,
                result.quiet_wait_max_ms,
            );
        }
    }
    Ok(all_exact)
}

/// What the workers and pushers of one run share.
struct Run {
    hotq: Hotq<EmbeddedStore>,
    name: QueueName,
    fair_keys: bool,
    started: Instant,
    deadline: Instant,
    /// Set once the noisy backlog is drained (or the deadline passed).
    done: AtomicBool,
    noisy_items: usize,
    noisy_popped: AtomicUsize,
    /// When the last noisy item came, in µs from `started`.
    noisy_last_us: std::sync::atomic::AtomicU64,
    /// Quiet items pushed (counted before their push commits).
    quiet_pushed: AtomicUsize,
    quiet_waits_us: Mutex<Vec<u64>>,
}

impl Run {
    /// Done: the noisy backlog is drained and every quiet item pushed is
    /// popped (those stuck behind a FIFO backlog count too), or the
    /// deadline passed.
    fn finished(&self) -> bool {
        Instant::now() >= self.deadline
            || (self.done.load(Ordering::SeqCst)
                && self.quiet_waits_us.lock().len() >= self.quiet_pushed.load(Ordering::SeqCst))
    }
}

async fn once(
    store: &EmbeddedStore,
    args: &BenchArgs,
    workers: usize,
    fair_keys: bool,
) -> Result<FairResult, String> {
    let queue = format!("bench-fair-{fair_keys}-{}", rand::random::<u32>());
    let run = Arc::new(Run {
        hotq: Hotq::new(store.clone(), &Config::default()),
        name: QueueName::new(&queue).map_err(|e| e.to_string())?,
        fair_keys,
        started: Instant::now(),
        deadline: Instant::now() + Duration::from_secs(args.deadline_s),
        done: AtomicBool::new(false),
        noisy_items: args.items,
        noisy_popped: AtomicUsize::new(0),
        noisy_last_us: std::sync::atomic::AtomicU64::new(0),
        quiet_pushed: AtomicUsize::new(0),
        quiet_waits_us: Mutex::new(Vec::new()),
    });
    push_noisy(&run, args.payload_bytes).await?;
    let popping_since = run.started.elapsed();
    let mut tasks = Vec::new();
    for tenant in 0..QUIET_TENANTS {
        tasks.push(tokio::spawn(push_quiet(run.clone(), tenant)));
    }
    for _ in 0..workers {
        tasks.push(tokio::spawn(work(run.clone())));
    }
    for task in tasks {
        task.await.map_err(|e| e.to_string())??;
    }
    run.hotq.shutdown(Duration::from_secs(5)).await;
    let mut waits = std::mem::take(&mut *run.quiet_waits_us.lock());
    waits.sort_unstable();
    let noisy_popped = run.noisy_popped.load(Ordering::SeqCst);
    let exact =
        noisy_popped == run.noisy_items && waits.len() == run.quiet_pushed.load(Ordering::SeqCst);
    let noisy_us = run
        .noisy_last_us
        .load(Ordering::SeqCst)
        .saturating_sub(popping_since.as_micros() as u64);
    Ok(FairResult {
        scenario: "fair",
        fair_keys,
        items: args.items,
        workers,
        quiet_items: waits.len(),
        quiet_wait_p50_ms: percentile_ms(&waits, 0.50),
        quiet_wait_p99_ms: percentile_ms(&waits, 0.99),
        quiet_wait_max_ms: percentile_ms(&waits, 1.0),
        noisy_popped,
        noisy_per_s: noisy_popped as f64 / (noisy_us.max(1) as f64 / 1e6),
        exact,
    })
}

/// The noisy tenant's backlog, a full batch per commit, before anyone pops.
async fn push_noisy(run: &Run, payload_bytes: usize) -> Result<(), String> {
    let mut payload = b"n:".to_vec();
    payload.resize(payload_bytes.max(payload.len()), b'.');
    let key = run.fair_keys.then(|| "noisy".to_string());
    let mut left = run.noisy_items;
    while left > 0 {
        let n = left.min(PUSH_BATCH_MAX);
        let items: Vec<PushItem> = (0..n).map(|_| item(payload.clone(), key.clone())).collect();
        let pushed = run.hotq.push(&run.name, &items, PushOptions::default());
        pushed.await.map_err(|e| e.to_string())?;
        left -= n;
    }
    Ok(())
}

fn item(payload: Vec<u8>, fair_key: Option<String>) -> PushItem {
    PushItem {
        payload,
        dedup_id: None,
        group: None,
        fair_key,
    }
}

/// One quiet tenant: an item every `1 / QUIET_PER_S` s, stamped with its
/// push time, until the noisy backlog is drained.
async fn push_quiet(run: Arc<Run>, tenant: usize) -> Result<(), String> {
    let key = run.fair_keys.then(|| format!("quiet-{tenant}"));
    let mut every = tokio::time::interval(Duration::from_millis(1_000 / QUIET_PER_S));
    while !run.done.load(Ordering::SeqCst) && Instant::now() < run.deadline {
        every.tick().await;
        let at_us = run.started.elapsed().as_micros() as u64;
        let payload = format!("q:{at_us}").into_bytes();
        let items = [item(payload, key.clone())];
        run.quiet_pushed.fetch_add(1, Ordering::SeqCst);
        let pushed = run.hotq.push(&run.name, &items, PushOptions::default());
        pushed.await.map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// One worker: pops until the run is finished.
async fn work(run: Arc<Run>) -> Result<(), String> {
    let keys = QueueKeys::new(&run.name);
    while !run.finished() {
        let Some(item) = pop_one(&run.hotq, &keys, POP_WAIT)
            .await
            .map_err(|e| e.to_string())?
        else {
            continue;
        };
        let now_us = run.started.elapsed().as_micros() as u64;
        match item.payload.strip_prefix(b"q:") {
            Some(stamp) => {
                let pushed_us: u64 = std::str::from_utf8(stamp)
                    .ok()
                    .and_then(|text| text.parse().ok())
                    .ok_or("a quiet item without its stamp")?;
                run.quiet_waits_us
                    .lock()
                    .push(now_us.saturating_sub(pushed_us));
            }
            None => {
                run.noisy_last_us.fetch_max(now_us, Ordering::SeqCst);
                let popped = run.noisy_popped.fetch_add(1, Ordering::SeqCst) + 1;
                if popped >= run.noisy_items {
                    run.done.store(true, Ordering::SeqCst);
                }
            }
        }
    }
    Ok(())
}
