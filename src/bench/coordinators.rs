//! `--scenario coordinators`: K coordinators in one process over one
//! embedded store, each with its own line and fulfiller exactly as K
//! daemons on one cluster would run (K cores, [`Hotq`], each over its own
//! coordinator), W waiters each, draining one queue.
//! Measures how the coordinators share the queue: throughput, commit
//! conflicts per pop, and each coordinator's share of the items against
//! its share of the waiters.

use parking_lot::Mutex;
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::BenchArgs;
use super::inproc::{pop_one, preload};
use super::report::payloads;
use crate::config::Config;
use crate::keys::{QueueKeys, QueueName};
use crate::service::Hotq;
use crate::store::embedded::EmbeddedStore;

/// One drain by K coordinators.
#[derive(Debug, Serialize)]
pub struct CoordinatorsResult {
    /// `coordinators`.
    pub scenario: &'static str,
    /// K.
    pub coordinators: usize,
    /// Waiters per coordinator.
    pub workers: usize,
    /// Whether staged pops waited in memory lines (the default) or as
    /// stored requests (`--stored-requests`).
    pub requests_in_memory: bool,
    /// Items preloaded.
    pub items: usize,
    /// Items delivered (duplicates included).
    pub pops: usize,
    /// Seconds from the first pop to the last item.
    pub elapsed_s: f64,
    /// Items per second over `elapsed_s`, all coordinators together.
    pub pops_per_s: f64,
    /// Commit conflicts (all transactions) per item.
    pub conflicts_per_pop: f64,
    /// Fulfillment rounds that conflicted, all coordinators, per item.
    pub fulfill_conflicts_per_pop: f64,
    /// Items that went through a result key (another coordinator's
    /// fulfiller took over a counted request), per item.
    pub results_per_pop: f64,
    /// Pops asked for in the store as counted requests, per item.
    pub asked_per_pop: f64,
    /// Fulfillment rounds that committed having served something, per item.
    pub rounds_per_pop: f64,
    /// Smallest (items share / waiters share) among the coordinators.
    pub share_min: f64,
    /// Largest (items share / waiters share) among the coordinators.
    pub share_max: f64,
    /// Items each coordinator delivered.
    pub per_coordinator: Vec<usize>,
    /// Preloaded items never delivered.
    pub lost: usize,
    /// Deliveries beyond the first of an item.
    pub dup: usize,
    /// Exactly `items` distinct items came out, each once.
    pub exact: bool,
}

/// Runs the drain once per K in `args.coordinators`; returns whether
/// every run was exact.
pub async fn run(store: &EmbeddedStore, args: &BenchArgs) -> Result<bool, String> {
    let workers = *args.workers.first().ok_or("give --workers")?;
    let mut all_exact = true;
    for &k in &args.coordinators {
        let result = drain(store, args, k.max(1), workers.max(1)).await?;
        all_exact &= result.exact;
        if args.json {
            println!("{}", serde_json::to_string(&result).expect("serializable"));
        } else {
            println!(
                "K={:<3} W={:<4} pops={:<7} {:>9.0} pops/s  confl/pop={:.3}  share {:.2}..{:.2}  lost={} dup={}  {:?}",
                result.coordinators,
                result.workers,
                result.pops,
                result.pops_per_s,
                result.conflicts_per_pop,
                result.share_min,
                result.share_max,
                result.lost,
                result.dup,
                result.per_coordinator,
            );
        }
    }
    Ok(all_exact)
}

/// The cores of K simulated daemons, one coordinator each.
type Cores = [Arc<Hotq<EmbeddedStore>>];

/// Stops `cores` and sums their fulfill conflicts, line results written,
/// pops asked for in the store and rounds.
async fn stop_and_count(cores: &Cores) -> [u64; 4] {
    const SUMMED: [&str; 4] = [
        "fulfill_conflicts",
        "line_results_written",
        "line_pops_asked",
        "fulfill_batches",
    ];
    let mut sums = [0; 4];
    for core in cores {
        core.shutdown(Duration::from_secs(5)).await;
        for (name, count) in core.pop_protocol_counts() {
            if let Some(at) = SUMMED.iter().position(|summed| *summed == name) {
                sums[at] += count;
            }
        }
    }
    sums
}

async fn drain(
    store: &EmbeddedStore,
    args: &BenchArgs,
    k: usize,
    workers: usize,
) -> Result<CoordinatorsResult, String> {
    let run = format!("bench-coord-{k}-{workers}-{}", rand::random::<u32>());
    let name = QueueName::new(&run).map_err(|e| e.to_string())?;
    let preloaded = payloads(&run, args.items, args.payload_bytes);
    // K daemons: K cores over one store, each with its own line.
    let mut config = Config::default();
    config.staging.requests_in_memory = !args.stored_requests;
    let coordinators: Vec<_> = (0..k)
        .map(|_| Arc::new(Hotq::new(store.clone(), &config)))
        .collect();
    if let Some(first) = coordinators.first() {
        preload(first, &name, &preloaded).await?;
    }
    let (_, conflicts_before, _) = store.counts();
    let drained = Arc::new(Drained::new(k, args.items));
    pop_all(
        &coordinators,
        &QueueKeys::new(&name),
        args,
        workers,
        &drained,
    )
    .await?;
    let (_, conflicts_after, _) = store.counts();
    let [fulfill_conflicts, results, asked, rounds] = stop_and_count(&coordinators).await;
    let per_item = |n: u64| n as f64 / args.items.max(1) as f64;
    let mut result = drained.result(&preloaded, !args.stored_requests, workers);
    result.conflicts_per_pop = per_item(conflicts_after - conflicts_before);
    result.fulfill_conflicts_per_pop = per_item(fulfill_conflicts);
    result.results_per_pop = per_item(results);
    result.asked_per_pop = per_item(asked);
    result.rounds_per_pop = per_item(rounds);
    Ok(result)
}

/// What a drain's workers share: what they were handed, and when.
struct Drained {
    started: Instant,
    items: usize,
    delivered: AtomicUsize,
    seen: Mutex<Vec<Vec<u8>>>,
    /// Items each coordinator's workers got.
    counts: Vec<AtomicUsize>,
    /// When the last item came, in µs from `started`.
    last_us: std::sync::atomic::AtomicU64,
}

impl Drained {
    fn new(k: usize, items: usize) -> Self {
        Drained {
            started: Instant::now(),
            items,
            delivered: AtomicUsize::new(0),
            seen: Mutex::new(Vec::with_capacity(items)),
            counts: (0..k).map(|_| AtomicUsize::new(0)).collect(),
            last_us: std::sync::atomic::AtomicU64::new(0),
        }
    }

    fn took(&self, index: usize, payload: Vec<u8>) {
        self.seen.lock().push(payload);
        self.counts[index].fetch_add(1, Ordering::Relaxed);
        self.delivered.fetch_add(1, Ordering::SeqCst);
        let at_us = self.started.elapsed().as_micros() as u64;
        self.last_us.fetch_max(at_us, Ordering::Relaxed);
    }

    /// The drain's result, the store's and coordinators' counts at 0.
    fn result(&self, preloaded: &[Vec<u8>], in_memory: bool, workers: usize) -> CoordinatorsResult {
        let seen = std::mem::take(&mut *self.seen.lock());
        let (k, pops) = (self.counts.len(), seen.len());
        let distinct: HashSet<&Vec<u8>> = seen.iter().collect();
        let dup = pops - distinct.len();
        let lost = preloaded.iter().filter(|p| !distinct.contains(p)).count();
        let per_coordinator: Vec<usize> = self
            .counts
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        // Every coordinator has the same number of waiters, so its waiters'
        // share is 1/K.
        let shares: Vec<f64> = per_coordinator
            .iter()
            .map(|&n| n as f64 / pops.max(1) as f64 * k as f64)
            .collect();
        let elapsed_s = self.last_us.load(Ordering::Relaxed).max(1) as f64 / 1e6;
        CoordinatorsResult {
            scenario: "coordinators",
            coordinators: k,
            workers,
            requests_in_memory: in_memory,
            items: self.items,
            pops,
            elapsed_s,
            pops_per_s: pops as f64 / elapsed_s,
            conflicts_per_pop: 0.0,
            fulfill_conflicts_per_pop: 0.0,
            results_per_pop: 0.0,
            asked_per_pop: 0.0,
            rounds_per_pop: 0.0,
            share_min: shares.iter().cloned().fold(f64::INFINITY, f64::min),
            share_max: shares.iter().cloned().fold(0.0, f64::max),
            per_coordinator,
            lost,
            dup,
            exact: lost == 0 && dup == 0 && pops == self.items,
        }
    }
}

/// `workers` pops per coordinator until every item came or the deadline.
async fn pop_all(
    coordinators: &Cores,
    keys: &QueueKeys,
    args: &BenchArgs,
    workers: usize,
    drained: &Arc<Drained>,
) -> Result<(), String> {
    let deadline = drained.started + Duration::from_secs(args.deadline_s);
    let wait = Duration::from_millis(args.wait_ms);
    let mut tasks = Vec::with_capacity(coordinators.len() * workers);
    for (index, coordinator) in coordinators.iter().enumerate() {
        for _ in 0..workers {
            let (coordinator, keys, drained) = (coordinator.clone(), keys.clone(), drained.clone());
            tasks.push(tokio::spawn(async move {
                while drained.delivered.load(Ordering::SeqCst) < drained.items
                    && Instant::now() < deadline
                {
                    let popped = pop_one(&coordinator, &keys, wait)
                        .await
                        .map_err(|e| e.to_string())?;
                    if let Some(item) = popped {
                        drained.took(index, item.payload);
                    }
                }
                Ok::<(), String>(())
            }));
        }
    }
    for task in tasks {
        task.await.map_err(|e| e.to_string())??;
    }
    Ok(())
}
