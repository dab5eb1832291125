//! Pops must not rescan the drained head of a queue (docs/design.md §3). A naive
//! first-key pop on fjall slows from ~21 µs to ~6 ms after 50,000 pops;
//! with the resolver's empty stretches it stays flat. The test compares the
//! median of early and late pops as a ratio measured in one run, so a noisy
//! machine moves both sides alike.

mod common;

use std::time::Instant;

use hotq::keys::QueueName;
use hotq::queue::Queue;
use hotq::store::embedded::Durability;

const ITEMS: usize = 30_000;
const WINDOW: usize = 1_000;

fn median_us(samples: &mut [u128]) -> u128 {
    samples.sort_unstable();
    samples[samples.len() / 2]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_pops_cost_what_early_pops_cost() {
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    let q = Queue::new(store.clone(), QueueName::new("flat").unwrap());
    let payloads: Vec<Vec<u8>> = (0..1_000).map(|n| vec![n as u8; 100]).collect();
    for _ in 0..ITEMS / payloads.len() {
        q.push_batch(&payloads).await.unwrap();
    }
    let mut latencies_us = Vec::with_capacity(ITEMS);
    for _ in 0..ITEMS {
        let started = Instant::now();
        q.pop().await.unwrap().expect("queue holds the item");
        latencies_us.push(started.elapsed().as_micros());
    }
    assert_eq!(q.pop().await.unwrap(), None);
    let early = median_us(&mut latencies_us[..WINDOW].to_vec());
    let late = median_us(&mut latencies_us[ITEMS - WINDOW..].to_vec());
    // Without the fix the late median is hundreds of times the early one.
    assert!(
        late <= early.max(1) * 3,
        "pops slowed down over {ITEMS} pops: early median {early} µs, late median {late} µs"
    );
    // The push after a full drain reads the tail past the same tombstones.
    let started = Instant::now();
    q.push(b"after").await.unwrap();
    let push_us = started.elapsed().as_micros();
    assert_eq!(q.pop().await.unwrap().unwrap().payload, b"after");
    let (_, _, stretches, _) = store.footprint();
    assert!(stretches < 1_000, "empty stretches stay few: {stretches}");
    eprintln!("early pop median {early} µs, late {late} µs, push after drain {push_us} µs");
}
