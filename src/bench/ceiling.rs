//! The embedded store's ceiling: durable commits/s from W concurrent
//! committers, one item per commit and 64 per commit.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::BenchArgs;
use crate::store::embedded::EmbeddedStore;
use crate::store::{Store, Transaction};

/// Durable commits of `items_per_commit` items each, from `workers`
/// committers, until `args.items` items (at least one commit per worker).
pub(crate) async fn ceiling(
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
