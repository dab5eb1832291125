//! `hotq bench --scenario due --items N`: N queues, each holding one lease
//! or one delayed item (half and half), due spread over a window that
//! starts after the setup. Measures:
//! - the idle process's CPU over ~10 s while all N are held and nothing
//!   is due yet (the timer must cost what is due, not what is held): all
//!   of it, and without fjall's worker threads, which compact the setup's
//!   writes right after it (at 1,000,000 queues, ~0.2 of a core);
//! - lateness of every redelivery and reveal (commit time minus due
//!   time): max and p99, from the timer's own counters.
//!
//! In process only (the timer's counters are this process's). The setup
//! writes straight through the store in batches of [`SETUP_BATCH`] queues
//! per commit, the same keys a leased pop or a delayed push writes.

use std::num::NonZeroU64;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rand::RngCore;

use crate::coordinator::Coordinator;
use crate::due;
use crate::envelope::{HeldItem, ItemValue, encode_held, now_ms};
use crate::keys::{QueueKeys, QueueName, RANDOM_LEN};
use crate::lease::lease_in;
use crate::queue::Item;
use crate::staging::StagingConfig;
use crate::store::embedded::EmbeddedStore;
use crate::store::{Store, Transaction};

use super::{BenchArgs, own_threads_cpu_us, process_cpu_us};

/// Queues written per setup commit.
const SETUP_BATCH: usize = 2_000;
/// Entries come due at most this fast (the window widens for more).
const DUE_PER_S_MAX: u64 = 20_000;
/// Shortest window over which entries come due.
const WINDOW_MS_MIN: u64 = 10_000;
/// The idle measurement.
const IDLE_MS: u64 = 10_000;

/// Runs the scenario over `store`.
pub async fn run(store: &EmbeddedStore, args: &BenchArgs) -> Result<(), String> {
    let queues = args.items.max(1);
    let deadline = Instant::now() + Duration::from_secs(args.deadline_s);
    let setup = set_up(store, queues, deadline).await?;
    let coordinator = Coordinator::new(store.clone(), StagingConfig::default());
    let timer = coordinator.spawn_timer();
    let stats = due::stats();
    let consumed_before = stats.consumed.load(Ordering::Relaxed);
    let idle = idle(setup.base_ms).await;
    // Everything comes due within the window; wait for all of it.
    let store_stats = store.stats();
    let groups_before = store_stats.groups.load(Ordering::Relaxed);
    let commits_before = store_stats.commits.load(Ordering::Relaxed);
    loop {
        let consumed = stats.consumed.load(Ordering::Relaxed) - consumed_before;
        if consumed >= queues as u64 {
            break;
        }
        if Instant::now() > deadline {
            return Err(format!("{consumed} of {queues} consumed by the deadline"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let groups = store_stats.groups.load(Ordering::Relaxed) - groups_before;
    let commits = store_stats.commits.load(Ordering::Relaxed) - commits_before;
    coordinator.shutdown(Duration::from_secs(5)).await;
    let _ = timer.await;
    report(args, queues, &setup, &idle, (commits, groups));
    Ok(())
}

/// The scenario's queues, written, and when they come due.
struct Setup {
    /// When the window starts, in ms since the epoch.
    base_ms: u64,
    window_ms: u64,
    setup_s: f64,
}

/// Writes `queues` queues with an entry each, coming due over a window
/// that starts well after the setup and the idle measurement.
async fn set_up(store: &EmbeddedStore, queues: usize, deadline: Instant) -> Result<Setup, String> {
    let window_ms = (queues as u64 * 1_000 / DUE_PER_S_MAX).max(WINDOW_MS_MIN);
    // Estimate the setup from a first batch, then start the window well after it.
    let setup_started = Instant::now();
    let probe = queues.min(SETUP_BATCH);
    // The probe's queues are others, held far in the future: never due.
    write_batch(store, "probe", 0..probe, u64::MAX / 4, 1).await?;
    let per_queue_us = setup_started.elapsed().as_micros() as u64 / probe as u64;
    let setup_estimate_ms = per_queue_us * queues as u64 / 1_000;
    let base_ms = now_ms() + 2 * setup_estimate_ms + IDLE_MS + 5_000;
    let mut start = 0;
    while start < queues {
        let end = (start + SETUP_BATCH).min(queues);
        write_batch(store, "due", start..end, base_ms, window_ms).await?;
        start = end;
        if Instant::now() > deadline {
            return Err(format!("setup passed the deadline after {start} queues"));
        }
    }
    Ok(Setup {
        base_ms,
        window_ms,
        setup_s: setup_started.elapsed().as_secs_f64(),
    })
}

/// The idle measurement: the CPU the timer takes with everything held.
struct Idle {
    cpu_share: Option<f64>,
    /// Without fjall's workers compacting the setup's writes.
    own_cpu_share: Option<f64>,
    sweeps: u64,
    /// The window began before the measurement ended (it is then not idle).
    early: bool,
}

/// Measures [`IDLE_MS`] of the daemon with nothing due.
async fn idle(base_ms: u64) -> Idle {
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (cpu_before, idle_started) = (process_cpu_us(), Instant::now());
    let own_before = own_threads_cpu_us();
    tokio::time::sleep(Duration::from_millis(IDLE_MS)).await;
    let idle_us = idle_started.elapsed().as_micros() as f64;
    Idle {
        cpu_share: cpu_before
            .zip(process_cpu_us())
            .map(|(before, after)| (after - before) as f64 / idle_us),
        own_cpu_share: own_before
            .zip(own_threads_cpu_us())
            .map(|(before, after)| (after - before) as f64 / idle_us),
        sweeps: due::stats().sweeps.load(Ordering::Relaxed),
        early: now_ms() > base_ms,
    }
}

/// Prints the scenario's line (JSON with `--json`).
fn report(
    args: &BenchArgs,
    queues: usize,
    setup: &Setup,
    idle: &Idle,
    (commits, groups): (u64, u64),
) {
    let stats = due::stats();
    let line = serde_json::json!({
        "scenario": "due",
        "queues": queues,
        "setup_s": setup.setup_s,
        "window_ms": setup.window_ms,
        "idle_cpu_share": idle.cpu_share,
        "idle_cpu_share_without_compaction": idle.own_cpu_share,
        "idle_sweeps_total": idle.sweeps,
        "window_started_before_idle_ended": idle.early,
        "lateness_max_ms": stats.lateness_max_ms.load(Ordering::Relaxed),
        "lateness_p99_ms": stats.lateness_quantile_ms(0.99),
        "lateness_p50_ms": stats.lateness_quantile_ms(0.5),
        "due_rows_read": stats.rows_read.load(Ordering::Relaxed),
        // Commits and fsync groups while the entries came due: the timer's
        // chunks of one wave should share groups.
        "window_commits": commits,
        "window_commit_groups": groups,
        "peak_rss_mib": super::peak_rss_mib(),
    });
    if args.json {
        println!("{line}");
    } else {
        println!(
            "due {queues} queues (setup {:.1} s, window {} ms): idle CPU {:.2}% of a core ({:.2}% without fjall's compactions); lateness p50 {} ms, p99 {} ms, max {} ms",
            setup.setup_s,
            setup.window_ms,
            idle.cpu_share.unwrap_or(f64::NAN) * 100.0,
            idle.own_cpu_share.unwrap_or(f64::NAN) * 100.0,
            line["lateness_p50_ms"],
            line["lateness_p99_ms"],
            line["lateness_max_ms"],
        );
    }
}

fn queue_keys(prefix: &str, n: usize) -> QueueKeys {
    QueueKeys::new(&QueueName::new(&format!("{prefix}-{n:07}")).expect("a valid name"))
}

/// Queue `n` of `range` gets one entry due at `base_ms + window_ms * n / len`:
/// even queues a lease (an item leased as a pop would), odd ones a delayed item.
async fn write_batch(
    store: &EmbeddedStore,
    prefix: &str,
    range: std::ops::Range<usize>,
    base_ms: u64,
    window_ms: u64,
) -> Result<(), String> {
    let txn = store.begin().map_err(|e| e.to_string())?;
    let now = now_ms();
    let mut rng = rand::rng();
    for n in range.clone() {
        let keys = queue_keys(prefix, n);
        let offset = window_ms * (n - range.start) as u64 / range.len().max(1) as u64;
        let due_ms = base_ms.saturating_add(offset).max(now + 1);
        let mut random = [0u8; RANDOM_LEN];
        rng.fill_bytes(&mut random);
        let value = ItemValue::new(now, format!("item {n}").into_bytes());
        let result = if n % 2 == 0 {
            let mut item = Item::from_value(keys.item(0, &random), value);
            let lease_ms = NonZeroU64::new(due_ms - now).expect("due after now");
            lease_in(&txn, &keys, &mut item, lease_ms, now)
        } else {
            let held = HeldItem {
                item_key: Vec::new(),
                item: value,
            };
            txn.set(&keys.delayed(due_ms, &random), &encode_held(&held))
                .and_then(|()| txn.atomic_add(&keys.delayed_count(), 1))
        };
        result.map_err(|e| e.to_string())?;
    }
    txn.commit().await.map_err(|e| e.to_string())
}
