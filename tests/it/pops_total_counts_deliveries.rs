//! `hotq_pops_total` counts items that left a queue to a caller, once
//! each: an item handed to a pop whose caller had already left goes back
//! to its key (`hotq_put_backs_total`) and is counted only when it is
//! delivered again. (It once counted at the fulfill commit: 3,026 pops for
//! 3,000 items, each delivered once.)
//!
//! Callers that give up mid-pop (client timeouts of a few ms) race the
//! hand-off, while steady workers drain. Whatever the interleaving, once
//! the queue is empty every item left it exactly once, so the counter must
//! equal the number pushed; a round is repeated on a fresh queue until at
//! least one put-back happened, so the race was exercised.

use crate::common;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use common::client::Client;
use common::daemon::{Daemon, http, metric_sum};
use tokio::sync::Mutex;

const ITEMS: usize = 3_000;
const STEADY_WORKERS: usize = 32;
const FICKLE_WORKERS: usize = 96;
const ROUNDS_MAX: usize = 10;

async fn counter(metrics_url: &str, name: &str, queue: &str) -> f64 {
    metric_sum(metrics_url, name, &[&format!("queue=\"{queue}\"")]).await
}

/// One round on `queue`: returns the put-backs it caused.
async fn round(daemon: &Daemon, queue: &str) -> f64 {
    let url = daemon.url.clone();
    let stop = Arc::new(AtomicBool::new(false));
    let received = Arc::new(Mutex::new(Vec::<Vec<u8>>::new()));
    let mut workers = Vec::new();
    for _ in 0..STEADY_WORKERS {
        let (url, queue, stop, received) = (
            url.clone(),
            queue.to_owned(),
            stop.clone(),
            received.clone(),
        );
        workers.push(tokio::spawn(async move {
            let client = http();
            while !stop.load(Ordering::Relaxed) {
                let answer = client
                    .post(format!("{url}/v1/queues/{queue}/pop?wait_ms=200"))
                    .send()
                    .await
                    .unwrap();
                if answer.status() == 200 {
                    received
                        .lock()
                        .await
                        .push(answer.bytes().await.unwrap().to_vec());
                }
            }
        }));
    }
    for worker in 0..FICKLE_WORKERS {
        let (url, queue, stop, received) = (
            url.clone(),
            queue.to_owned(),
            stop.clone(),
            received.clone(),
        );
        workers.push(tokio::spawn(async move {
            // Gives up after 1–8 ms: before, during or after the hand-off.
            let timeout_ms = 1 + (worker as u64 % 8);
            let client = reqwest::Client::builder()
                .timeout(Duration::from_millis(timeout_ms))
                .build()
                .unwrap();
            while !stop.load(Ordering::Relaxed) {
                let sent = client
                    .post(format!("{url}/v1/queues/{queue}/pop?wait_ms=5000"))
                    .send()
                    .await;
                if let Ok(answer) = sent
                    && answer.status() == 200
                    && let Ok(body) = answer.bytes().await
                {
                    received.lock().await.push(body.to_vec());
                }
            }
        }));
    }
    let pushed: Vec<String> = (0..ITEMS).map(|i| format!("{queue}-{i}")).collect();
    for chunk in pushed.chunks(100) {
        let batch: Vec<String> = chunk.iter().map(|s| BASE64.encode(s)).collect();
        let answer = http()
            .post(format!("{url}/v1/queues/{queue}/items:batch"))
            .json(&batch)
            .send()
            .await
            .unwrap();
        assert!(answer.status().is_success(), "{}", answer.status());
    }
    // Drained: empty, and every item delivered (an item on its way back
    // from a caller that left is out of the depth but not yet delivered).
    let metrics_url = daemon.metrics_url.clone();
    common::eventually("the queue drains", Duration::from_secs(120), || async {
        Client::new(&url).depth(queue).await == 0
            && counter(&metrics_url, "hotq_pops_total", queue).await >= ITEMS as f64
    })
    .await;
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        worker.await.unwrap();
    }
    // Every item left the queue once; the counter says so exactly.
    assert_eq!(Client::new(&url).depth(queue).await, 0);
    let pops = counter(&daemon.metrics_url, "hotq_pops_total", queue).await;
    assert_eq!(
        pops, ITEMS as f64,
        "each item counted once as it left the queue"
    );
    // What callers received is a subset, without duplicates: the rest went
    // to callers that left after their answer was written.
    let received = received.lock().await;
    let distinct: HashSet<&Vec<u8>> = received.iter().collect();
    assert_eq!(distinct.len(), received.len(), "no item delivered twice");
    let pushed: HashSet<Vec<u8>> = pushed.into_iter().map(String::into_bytes).collect();
    assert!(received.iter().all(|item| pushed.contains(item)));
    let put_backs = counter(&daemon.metrics_url, "hotq_put_backs_total", queue).await;
    println!(
        "{queue}: {} of {ITEMS} received, {put_backs} put back",
        received.len()
    );
    put_backs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pops_total_counts_each_item_once_when_callers_leave_mid_hand_off() {
    if !common::alone::here(
        module_path!(),
        "pops_total_counts_each_item_once_when_callers_leave_mid_hand_off",
    )
    .await
    {
        return;
    }
    let daemon = Daemon::start(|_| {}).await;
    let mut put_backs = 0.0;
    for round_index in 0..ROUNDS_MAX {
        put_backs += round(&daemon, &format!("leavers{round_index}")).await;
        if put_backs > 0.0 {
            break;
        }
    }
    assert!(
        put_backs > 0.0,
        "no item went back in {ROUNDS_MAX} rounds: the race was never exercised"
    );
    daemon.stop().await;
}
