//! `--scenario limits` (issue #40): a queue's limits under load, with two
//! daemons (two cores, each with its own coordinator and fulfillment
//! loops, on one store) popping, W workers (the first of `--workers`)
//! split between them.
//!
//! - **Rate**: `pop_rate_max` = `--rate` (its default burst, a tenth of a
//!   second's worth), a backlog larger than the window can drain, plain
//!   pops for [`window_s`] seconds: the items handed out against the rate
//!   times the window (the burst adds 1%). Exact when no more went than
//!   GCRA allows (burst + rate × time).
//! - **Leases**: `leases_max` = [`LEASES_MAX`], `--items` items, each
//!   leased and then acked, while a sampler reads the queue's `leased`
//!   count every 10 ms: the largest count read, and the items per second.
//!   Exact when every item was acked and no sample passed the limit.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::json;

use super::BenchArgs;
use crate::config::Config;
use crate::keys::{QueueKeys, QueueName};
use crate::service::{End, Hotq, PUSH_BATCH_MAX, PopLease, PopOptions, PushItem, PushOptions};
use crate::store::embedded::EmbeddedStore;

/// The lease limit the leases run sets.
pub const LEASES_MAX: u64 = 10;
/// How often the leases run's sampler reads `leased`.
const SAMPLE_EVERY: Duration = Duration::from_millis(10);
/// How long a worker's pop waits for an item.
const POP_WAIT: Duration = Duration::from_millis(100);
/// The lease of a leased pop (acked long before it ends).
const LEASE_MS: u64 = 30_000;

/// The rate run's window: 10 s, or less under a shorter `--deadline-s`.
pub fn window_s(args: &BenchArgs) -> u64 {
    args.deadline_s.clamp(1, 10)
}

/// What one run measured.
#[derive(Debug, Serialize)]
pub struct LimitsResult {
    /// `limits`.
    pub scenario: &'static str,
    /// `rate` or `leases`.
    pub limit: &'static str,
    /// Workers popping, half on each daemon.
    pub workers: usize,
    /// The limit set: items per second, or leases.
    pub set: u64,
    /// Items handed out (rate: within the window).
    pub items: usize,
    /// How long the run took, in s (rate: the window).
    pub seconds: f64,
    /// Items per second.
    pub per_s: f64,
    /// Rate: items per second over the limit (1.0: exactly the limit).
    /// Leases: the largest `leased` count sampled over the limit.
    pub of_limit: f64,
    /// Leases: samples read.
    pub samples: usize,
    /// The limit held (never exceeded) and everything that should go went.
    pub exact: bool,
}

/// Runs the rate run, then the leases run; whether both were exact.
pub async fn run(store: &EmbeddedStore, args: &BenchArgs) -> Result<bool, String> {
    let workers = args.workers.first().copied().ok_or("give --workers")?;
    let workers = workers.max(2);
    let daemons = [
        Arc::new(Hotq::new(store.clone(), &Config::default())),
        Arc::new(Hotq::new(store.clone(), &Config::default())),
    ];
    let results = [
        rate(&daemons, args, workers).await?,
        leases(&daemons, args, workers).await?,
    ];
    for hotq in &daemons {
        hotq.shutdown(Duration::from_secs(5)).await;
    }
    for result in &results {
        if args.json {
            println!("{}", serde_json::to_string(result).expect("serializable"));
        } else {
            println!(
                "{:<6} W={:<4} set={:<6} items={:<7} in {:>6.2} s {:>9.1}/s  of limit {:>6.3}  samples={}",
                result.limit,
                result.workers,
                result.set,
                result.items,
                result.seconds,
                result.per_s,
                result.of_limit,
                result.samples,
            );
        }
    }
    Ok(results.iter().all(|result| result.exact))
}

/// A fresh queue named for `what`, with `change` set through the first
/// daemon, holding `items` items.
async fn queue_with(
    hotq: &Hotq<EmbeddedStore>,
    what: &str,
    change: serde_json::Value,
    items: usize,
) -> Result<QueueName, String> {
    let name = QueueName::new(&format!("bench-limits-{what}-{}", rand::random::<u32>()))
        .map_err(|e| e.to_string())?;
    let change: BTreeMap<String, serde_json::Value> =
        serde_json::from_value(change).map_err(|e| e.to_string())?;
    let keys = QueueKeys::new(&name);
    hotq.update_settings(&keys, &change)
        .await
        .map_err(|e| e.to_string())?;
    let mut left = items;
    while left > 0 {
        let n = left.min(PUSH_BATCH_MAX);
        let batch: Vec<PushItem> = (0..n)
            .map(|_| PushItem {
                payload: b"limited".to_vec(),
                dedup_id: None,
                group: None,
                fair_key: None,
            })
            .collect();
        let pushed = hotq.push(&name, &batch, PushOptions::default());
        pushed.await.map_err(|e| e.to_string())?;
        left -= n;
    }
    Ok(name)
}

fn options(lease: PopLease) -> PopOptions {
    PopOptions {
        end: End::Front,
        max: 1,
        wait: POP_WAIT,
        lease,
    }
}

/// The rate run: plain pops on both daemons for the window.
async fn rate(
    daemons: &[Arc<Hotq<EmbeddedStore>>; 2],
    args: &BenchArgs,
    workers: usize,
) -> Result<LimitsResult, String> {
    let per_s = args.rate.max(1);
    let window = Duration::from_secs(window_s(args));
    // More than the window can drain, so the workers never run dry.
    let backlog = (per_s * window.as_secs() * 2 + 1_000) as usize;
    let change = json!({"pop_rate_max": per_s});
    let name = queue_with(&daemons[0], "rate", change, backlog).await?;
    let keys = QueueKeys::new(&name);
    let popped = Arc::new(AtomicUsize::new(0));
    let began = Instant::now();
    let until = began + window;
    let mut tasks = Vec::new();
    for worker in 0..workers {
        let hotq = daemons[worker % 2].clone();
        let (keys, popped) = (keys.clone(), popped.clone());
        tasks.push(tokio::spawn(async move {
            while Instant::now() < until {
                let answer = hotq.pop(&keys, options(PopLease::Never), None).await;
                let items = answer.map_err(|e| e.to_string())?.items;
                // Items answered after the window are not counted.
                if Instant::now() <= until {
                    popped.fetch_add(items.len(), Ordering::SeqCst);
                }
            }
            Ok::<(), String>(())
        }));
    }
    for task in tasks {
        task.await.map_err(|e| e.to_string())??;
    }
    let items = popped.load(Ordering::SeqCst);
    let seconds = window.as_secs_f64();
    let burst = (per_s / 10).max(1);
    Ok(LimitsResult {
        scenario: "limits",
        limit: "rate",
        workers,
        set: per_s,
        items,
        seconds,
        per_s: items as f64 / seconds,
        of_limit: items as f64 / seconds / per_s as f64,
        samples: 0,
        exact: items as f64 <= burst as f64 + per_s as f64 * began.elapsed().as_secs_f64(),
    })
}

/// What the leases run's workers and sampler share.
struct Leasing {
    keys: QueueKeys,
    acked: AtomicUsize,
    items: usize,
    done: AtomicBool,
    deadline: Instant,
}

/// The leases run: every item leased, then acked, on both daemons, while
/// the sampler reads `leased` every [`SAMPLE_EVERY`].
async fn leases(
    daemons: &[Arc<Hotq<EmbeddedStore>>; 2],
    args: &BenchArgs,
    workers: usize,
) -> Result<LimitsResult, String> {
    let change = json!({"leases_max": LEASES_MAX});
    let name = queue_with(&daemons[0], "leases", change, args.items).await?;
    let run = Arc::new(Leasing {
        keys: QueueKeys::new(&name),
        acked: AtomicUsize::new(0),
        items: args.items,
        done: AtomicBool::new(false),
        deadline: Instant::now() + Duration::from_secs(args.deadline_s),
    });
    let largest = Arc::new(AtomicI64::new(0));
    let sampler = tokio::spawn(sample(daemons[0].clone(), run.clone(), largest.clone()));
    let began = Instant::now();
    let mut tasks = Vec::new();
    for worker in 0..workers {
        tasks.push(tokio::spawn(lease_and_ack(
            daemons[worker % 2].clone(),
            run.clone(),
        )));
    }
    for task in tasks {
        task.await.map_err(|e| e.to_string())??;
    }
    let seconds = began.elapsed().as_secs_f64();
    run.done.store(true, Ordering::SeqCst);
    let samples = sampler.await.map_err(|e| e.to_string())??;
    let items = run.acked.load(Ordering::SeqCst);
    let largest = largest.load(Ordering::SeqCst);
    Ok(LimitsResult {
        scenario: "limits",
        limit: "leases",
        workers,
        set: LEASES_MAX,
        items,
        seconds,
        per_s: items as f64 / seconds.max(1e-9),
        of_limit: largest as f64 / LEASES_MAX as f64,
        samples,
        exact: items == run.items && largest <= LEASES_MAX as i64,
    })
}

/// One worker of the leases run: lease an item, ack it, until all are
/// acked (or the deadline).
async fn lease_and_ack(hotq: Arc<Hotq<EmbeddedStore>>, run: Arc<Leasing>) -> Result<(), String> {
    let lease = PopLease::Ms(std::num::NonZeroU64::new(LEASE_MS).ok_or("a lease")?);
    while run.acked.load(Ordering::SeqCst) < run.items && Instant::now() < run.deadline {
        let answer = hotq.pop(&run.keys, options(lease), None).await;
        for item in answer.map_err(|e| e.to_string())?.items {
            let receipt = item.lease.ok_or("a leased pop's item has a lease")?.receipt;
            let acked = hotq.ack_receipt(&run.keys, &receipt).await;
            acked.map_err(|e| e.to_string())?;
            run.acked.fetch_add(1, Ordering::SeqCst);
        }
    }
    Ok(())
}

/// The sampler: the queue's `leased` count every [`SAMPLE_EVERY`] until
/// the workers are done; the largest read goes to `largest`. Returns the
/// samples read.
async fn sample(
    hotq: Arc<Hotq<EmbeddedStore>>,
    run: Arc<Leasing>,
    largest: Arc<AtomicI64>,
) -> Result<usize, String> {
    let mut every = tokio::time::interval(SAMPLE_EVERY);
    let mut samples = 0;
    while !run.done.load(Ordering::SeqCst) && Instant::now() < run.deadline {
        every.tick().await;
        let counts = hotq.queue_counts(&run.keys).await;
        let leased = counts.map_err(|e| e.to_string())?.leased;
        largest.fetch_max(leased, Ordering::SeqCst);
        samples += 1;
    }
    Ok(samples)
}
