//! Store-level race: pushes, pops and whole-range clears guarded by an
//! emptiness check, as a queue's delete does, on the embedded store.
//! Every committed set is popped, dropped by a guarded clear that saw it,
//! or still there.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hotq::store::Read;
use hotq::store::embedded::{Durability, EmbeddedConfig, EmbeddedStore};
use hotq::store::{RangeRead, Store, StoreError, Transaction, decode_mark};

const BEGIN: &[u8] = b"q/i/";
const END: &[u8] = b"q/i0";
const ALL: (&[u8], &[u8]) = (b"q/", b"q0");
const NEXT: &[u8] = b"q/m/next";

fn item(index: u64) -> Vec<u8> {
    let mut key = BEGIN.to_vec();
    key.extend_from_slice(&index.to_be_bytes());
    key.extend_from_slice(&rand::random::<[u8; 8]>());
    key
}

#[derive(Default)]
struct Books {
    pushed: Mutex<BTreeSet<Vec<u8>>>,
    taken: Mutex<BTreeSet<Vec<u8>>>,
}

async fn pusher(store: EmbeddedStore, books: Arc<Books>, stop: Arc<AtomicBool>) {
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let batch = 1 + n % 5;
        let txn = store.begin().unwrap();
        let next = decode_mark(txn.get(NEXT, Read::Snapshot).await.unwrap().as_deref());
        let keys: Vec<Vec<u8>> = (0..batch).map(|i| item(next + i)).collect();
        for key in &keys {
            txn.set(key, b"v").unwrap();
        }
        txn.atomic_max(NEXT, next + batch).unwrap();
        txn.atomic_add(b"q/m/depth", batch as i64).unwrap();
        match txn.commit().await {
            Ok(()) => books.pushed.lock().unwrap().extend(keys),
            Err(StoreError::Conflict) => panic!("pushes read nothing that conflicts"),
            Err(error) => panic!("push: {error}"),
        }
        if n.is_multiple_of(4) {
            tokio::task::yield_now().await;
        }
    }
}

async fn popper(store: EmbeddedStore, books: Arc<Books>, stop: Arc<AtomicBool>, max: usize) {
    while !stop.load(Ordering::Relaxed) {
        let txn = store.begin().unwrap();
        let rows = txn
            .get_range(RangeRead::new(BEGIN, END, max).snapshot())
            .await
            .unwrap();
        if rows.is_empty() {
            let watch = txn.watch(b"q/m/depth").unwrap();
            if txn.commit().await.is_ok() {
                let _ = tokio::time::timeout(Duration::from_millis(5), watch).await;
            }
            continue;
        }
        for row in &rows {
            txn.add_read_conflict_key(&row.key).unwrap();
            txn.clear(&row.key).unwrap();
        }
        txn.atomic_add(b"q/m/depth", -(rows.len() as i64)).unwrap();
        match txn.commit().await {
            Ok(()) => books
                .taken
                .lock()
                .unwrap()
                .extend(rows.into_iter().map(|r| r.key)),
            Err(StoreError::Conflict) => {}
            Err(error) => panic!("pop: {error}"),
        }
    }
}

/// Drops what it sees (counted), else clears everything at once in a
/// transaction that read-conflicts on all of it.
async fn deleter(store: EmbeddedStore, books: Arc<Books>, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(1 + rand::random::<u64>() % 20)).await;
        loop {
            let txn = store.begin().unwrap();
            txn.add_read_conflict_range(ALL.0, ALL.1).unwrap();
            let rows = txn
                .get_range(RangeRead::new(BEGIN, END, 1000).reverse().snapshot())
                .await
                .unwrap();
            if rows.is_empty() {
                txn.clear_range(ALL.0, ALL.1).unwrap();
            }
            for row in &rows {
                txn.clear(&row.key).unwrap();
            }
            match txn.commit().await {
                Ok(()) => {
                    let done = rows.is_empty();
                    books
                        .taken
                        .lock()
                        .unwrap()
                        .extend(rows.into_iter().map(|r| r.key));
                    if done {
                        break;
                    }
                }
                Err(StoreError::Conflict) => {}
                Err(error) => panic!("delete: {error}"),
            }
        }
    }
}

async fn remaining(store: &EmbeddedStore) -> BTreeSet<Vec<u8>> {
    let txn = store.begin().unwrap();
    txn.get_range(RangeRead::new(BEGIN, END, 10_000_000).snapshot())
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.key)
        .collect()
}

async fn run(durability: Durability, ms: u64) {
    let dir = tempfile::tempdir().unwrap();
    let mut config = EmbeddedConfig::new(dir.path());
    config.durability = durability;
    let store = EmbeddedStore::open(config.clone()).unwrap();
    let books = Arc::new(Books::default());
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for _ in 0..6 {
        tasks.push(tokio::spawn(pusher(
            store.clone(),
            books.clone(),
            stop.clone(),
        )));
    }
    for i in 0..8usize {
        let max = if i.is_multiple_of(2) { 1 } else { 5 };
        tasks.push(tokio::spawn(popper(
            store.clone(),
            books.clone(),
            stop.clone(),
            max,
        )));
    }
    for _ in 0..2 {
        tasks.push(tokio::spawn(deleter(
            store.clone(),
            books.clone(),
            stop.clone(),
        )));
    }
    let began = Instant::now();
    while began.elapsed() < Duration::from_millis(ms) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.unwrap();
    }
    let left = remaining(&store).await;
    let pushed = books.pushed.lock().unwrap().clone();
    let taken = books.taken.lock().unwrap().clone();
    let lost: Vec<&Vec<u8>> = pushed
        .iter()
        .filter(|k| !taken.contains(*k) && !left.contains(*k))
        .collect();
    eprintln!(
        "{durability:?}: pushed {}, taken {}, left {}, lost {}",
        pushed.len(),
        taken.len(),
        left.len(),
        lost.len()
    );
    if !lost.is_empty() {
        drop(store);
        tokio::time::sleep(Duration::from_millis(200)).await;
        let reopened = EmbeddedStore::open(config).unwrap();
        let there = remaining(&reopened).await;
        let found = lost.iter().filter(|k| there.contains(**k)).count();
        panic!(
            "{} pushed keys lost; after reopening, {found} of them are there",
            lost.len()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn guarded_clears_racing_pushes_and_pops_lose_nothing() {
    let ms: u64 = std::env::var("RACE_STORE_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3_000);
    let rounds: u64 = std::env::var("RACE_STORE_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    for _ in 0..rounds {
        run(Durability::Buffered, ms).await;
        run(Durability::Sync, ms).await;
    }
}
