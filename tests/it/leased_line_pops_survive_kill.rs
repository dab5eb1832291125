//! Leased pops served through a contended queue's line get their lease in
//! the fulfill commit, so a SIGKILL of the daemon loses none of them: after
//! a restart each comes back once its lease expires, with its delivery
//! count raised.

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use common::daemon::http;
use common::process::{kill9, start, terminate};
use tokio::sync::Mutex;

const ITEMS: usize = 600;
const WORKERS: usize = 32;
const LEASE_MS: u64 = 2_000;

/// Leased pops (no wait, as most workers send them) by `WORKERS` clients
/// until every one of `ITEMS` items was delivered; returns each item's
/// latest delivery count. (On a slow machine a lease can expire within the
/// run: the item then comes again, counted higher.)
async fn lease_everything(url: &str) -> HashMap<String, u64> {
    let held: Arc<Mutex<HashMap<String, u64>>> = Arc::default();
    let mut workers = Vec::new();
    for _ in 0..WORKERS {
        let (client, url, held) = (http(), url.to_string(), held.clone());
        workers.push(tokio::spawn(async move {
            while held.lock().await.len() < ITEMS {
                let answer = client
                    .post(format!("{url}/v1/queues/kept/pop?lease_ms={LEASE_MS}"))
                    .send()
                    .await
                    .unwrap();
                if answer.status() == 204 {
                    // Leases of the previous daemon not yet expired.
                    tokio::task::yield_now().await;
                    continue;
                }
                assert_eq!(answer.status(), 200);
                let count: u64 = answer.headers()["hotq-delivery-count"]
                    .to_str()
                    .unwrap()
                    .parse()
                    .unwrap();
                let item = String::from_utf8(answer.bytes().await.unwrap().to_vec()).unwrap();
                let previous = held.lock().await.insert(item.clone(), count);
                assert!(
                    previous.is_none_or(|previous| previous < count),
                    "{item} delivered again under one run without a higher count"
                );
            }
        }));
    }
    tokio::time::timeout(Duration::from_secs(240), async {
        for worker in workers {
            worker.await.unwrap();
        }
    })
    .await
    .expect("every item leased within the bound");
    Arc::try_unwrap(held).unwrap().into_inner()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leased_pops_through_the_line_are_redelivered_after_a_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    let running = tokio::task::spawn_blocking(move || start(&path))
        .await
        .unwrap();
    let items: Vec<String> = (0..ITEMS).map(|n| format!("kept-{n:04}")).collect();
    let client = http();
    for chunk in items.chunks(200) {
        let body: Vec<String> = chunk.iter().map(|i| BASE64.encode(i)).collect();
        let answer = client
            .post(format!("{}/v1/queues/kept/items:batch", running.url))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 201);
    }

    let first = lease_everything(&running.url).await;
    assert!(
        common::daemon::staged_pops(&running.metrics_url).await > 0.0,
        "leased pops went through the line"
    );
    // Nothing acked: every item is held under a lease written by the commit
    // that took it. The daemon dies without a shutdown.
    tokio::task::spawn_blocking(move || kill9(running))
        .await
        .unwrap();

    let path = dir.path().to_path_buf();
    let running = tokio::task::spawn_blocking(move || start(&path))
        .await
        .unwrap();
    let second = lease_everything(&running.url).await;
    let mut redelivered: Vec<&String> = second.keys().collect();
    redelivered.sort();
    let expected: Vec<&String> = items.iter().collect();
    assert_eq!(redelivered, expected, "every item came back after the kill");
    for (item, count) in &second {
        assert!(
            *count > first[item],
            "{item} came back counted: {count} after {}",
            first[item]
        );
    }
    tokio::task::spawn_blocking(move || terminate(running))
        .await
        .unwrap();
}
