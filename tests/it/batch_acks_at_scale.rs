//! Batch acks of 1,000 receipts at scale, racing lease expiries, over HTTP.
//!
//! Workers pop up to 1,000 items at a time under a lease and ack them in
//! one `POST /v1/queues/{q}/ack` of every receipt they got. Half the
//! workers hold short leases and ack after a random pause of up to twice
//! the lease, so many of their acks meet leases the timer is expiring: each
//! receipt's outcome must match what happens to its item. At the end every
//! item was acked exactly once, by the receipt of its last delivery; no
//! item came back after an ack said `acked`; nothing is left in the queue
//! or under a lease.

use crate::common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use common::daemon::{Daemon, http};

const QUEUE: &str = "acks";
const ITEMS: usize = 6_000;
const WORKERS: usize = 8;
const BATCH: usize = 1_000;
const LONG_LEASE_MS: u64 = 60_000;
const SHORT_LEASE_MS: u64 = 300;

/// Per item: its deliveries' receipts in order, and the receipt an ack
/// answered `acked` for.
#[derive(Default)]
struct Fate {
    receipts: Vec<String>,
    acked: Vec<String>,
}

#[derive(Default)]
struct Books {
    fates: HashMap<String, Fate>,
    /// Deliveries of an item after one of its acks answered `acked`.
    after_ack: Vec<String>,
    outcomes: HashMap<String, u64>,
}

/// The items of one leased pop: (payload, receipt).
async fn pop(client: &reqwest::Client, url: &str, lease_ms: u64) -> Vec<(String, String)> {
    let answer = client
        .post(format!(
            "{url}/v1/queues/{QUEUE}/pop?max={BATCH}&lease_ms={lease_ms}&wait_ms=200"
        ))
        .header("accept", "application/json")
        .send()
        .await
        .unwrap();
    match answer.status().as_u16() {
        204 => Vec::new(),
        200 => {
            let items: Vec<serde_json::Value> = answer.json().await.unwrap();
            items
                .iter()
                .map(|item| {
                    let payload = BASE64.decode(item["item"].as_str().unwrap()).unwrap();
                    (
                        String::from_utf8(payload).unwrap(),
                        item["receipt"].as_str().unwrap().to_string(),
                    )
                })
                .collect()
        }
        other => panic!("pop answered {other}: {}", answer.text().await.unwrap()),
    }
}

async fn worker(url: String, books: Arc<Mutex<Books>>, id: usize) {
    let client = http();
    let lease_ms = if id.is_multiple_of(2) {
        LONG_LEASE_MS
    } else {
        SHORT_LEASE_MS
    };
    loop {
        if books
            .lock()
            .unwrap()
            .fates
            .values()
            .filter(|f| !f.acked.is_empty())
            .count()
            >= ITEMS
        {
            return;
        }
        let popped = pop(&client, &url, lease_ms).await;
        if popped.is_empty() {
            continue;
        }
        {
            let mut books = books.lock().unwrap();
            for (payload, receipt) in &popped {
                let fate = books.fates.entry(payload.clone()).or_default();
                let late = !fate.acked.is_empty();
                fate.receipts.push(receipt.clone());
                if late {
                    books.after_ack.push(payload.clone());
                }
            }
        }
        if lease_ms == SHORT_LEASE_MS {
            // Races the timer: some leases expire first, some do not.
            let pause_ms = rand::random::<u64>() % (2 * SHORT_LEASE_MS);
            tokio::time::sleep(Duration::from_millis(pause_ms)).await;
        }
        let receipts: Vec<&String> = popped.iter().map(|(_, receipt)| receipt).collect();
        let answer = client
            .post(format!("{url}/v1/queues/{QUEUE}/ack"))
            .json(&receipts)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 200, "{}", answer.text().await.unwrap());
        let body: serde_json::Value = answer.json().await.unwrap();
        let results = body["results"].as_array().unwrap();
        assert_eq!(results.len(), popped.len(), "one outcome per receipt");
        let mut books = books.lock().unwrap();
        for ((payload, receipt), result) in popped.iter().zip(results) {
            assert_eq!(
                result["receipt"].as_str(),
                Some(receipt.as_str()),
                "in order"
            );
            let outcome = result["outcome"].as_str().unwrap().to_string();
            assert!(
                ["acked", "lease_expired", "unknown_receipt"].contains(&outcome.as_str()),
                "outcome {outcome}"
            );
            if outcome == "acked" {
                let fate = books.fates.get_mut(payload).unwrap();
                fate.acked.push(receipt.clone());
            }
            *books.outcomes.entry(outcome).or_default() += 1;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn thousand_receipt_batch_acks_racing_expiries_settle_each_item_once() {
    let daemon = Daemon::start(|config| {
        config.pop_max_items = BATCH;
        // Short leases expire often: no item may go to a dead-letter queue.
        config.leases.max_deliveries = 1_000;
    })
    .await;
    let client = http();
    for chunk in 0..ITEMS / BATCH {
        let items: Vec<String> = (0..BATCH)
            .map(|i| BASE64.encode(format!("item-{}", chunk * BATCH + i)))
            .collect();
        let answer = client
            .post(format!("{}/v1/queues/{QUEUE}/items:batch", daemon.url))
            .json(&items)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 201);
    }
    let books = Arc::new(Mutex::new(Books::default()));
    let workers: Vec<_> = (0..WORKERS)
        .map(|id| tokio::spawn(worker(daemon.url.clone(), books.clone(), id)))
        .collect();
    let all = async {
        for worker in workers {
            worker.await.unwrap();
        }
    };
    tokio::time::timeout(Duration::from_secs(300), all)
        .await
        .expect("every item acked within 300 s");

    {
        let books = books.lock().unwrap();
        eprintln!("outcomes: {:?}", books.outcomes);
        assert_eq!(books.fates.len(), ITEMS, "every item was delivered");
        for (payload, fate) in &books.fates {
            assert_eq!(
                fate.acked.len(),
                1,
                "{payload} acked once: {:?}",
                fate.acked
            );
            assert_eq!(
                fate.acked.first(),
                fate.receipts.last(),
                "{payload} acked by the receipt of its last delivery"
            );
        }
        assert!(
            books.after_ack.is_empty(),
            "delivered after an ack said acked: {:?}",
            books.after_ack
        );
        assert!(
            books.outcomes.get("lease_expired").copied().unwrap_or(0)
                + books.outcomes.get("unknown_receipt").copied().unwrap_or(0)
                > 0,
            "some acks raced an expiry: {:?}",
            books.outcomes
        );
    }
    let stats = common::daemon::get_json(&format!("{}/v1/queues/{QUEUE}", daemon.url)).await;
    assert_eq!(stats["depth"], 0, "{stats}");
    assert_eq!(stats["leased"], 0, "{stats}");
    let answer = client
        .post(format!("{}/v1/queues/{QUEUE}/pop", daemon.url))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 204);
    daemon.stop().await;
}
