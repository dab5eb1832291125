//! At-least-once delivery across crashes: workers pop with leases over
//! HTTP and ack each item after "processing" it, with an ack request of
//! its own or riding on their next pop (`?ack=`), while the built daemon
//! is killed with SIGKILL three times at moments set by the load and
//! restarted: items whose ack did not commit come back. At the end every
//! pushed item was acked (the store holds none of them anywhere), no
//! lease is left, and the redeliveries are at most the items that could
//! have been in flight at the kills.
//!
//! And leased pops served through a contended queue's line get their lease
//! in the fulfill commit, so a SIGKILL of the daemon loses none of them:
//! after a restart each comes back once its lease expires, with its
//! delivery count raised.

use crate::common;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use common::client::Client;
use common::daemon::http;
use common::process::{kill9_and_restart, start, terminate};
use hotq::keys::{QueueKeys, QueueName};
use hotq::store::embedded::{EmbeddedConfig, EmbeddedStore};
use reqwest::StatusCode;

const ITEMS: usize = 1_200;
const WORKERS: usize = 12;
const KILLS: usize = 3;
const LEASE_MS: u64 = 1_500;

#[derive(Default)]
struct Log {
    /// Deliveries per item.
    deliveries: HashMap<String, u32>,
    /// Items acked (204, or `acked` in `hotq-acked`).
    acked: HashSet<String>,
    /// Items whose ack got no answer (the daemon died under it): acked or not.
    ack_unanswered: HashSet<String>,
}

/// How workers ack.
#[derive(Clone, Copy)]
enum Acks {
    /// An ack request after each item.
    OwnRequest,
    /// Each item's receipt riding on the worker's next pop.
    RidingOnPops,
}

/// One worker: pop with a lease, ack, repeat; survives the daemon's deaths
/// by retrying against its current address. Ends when `done` is set.
async fn acking_worker(url: Arc<RwLock<String>>, log: Arc<Mutex<Log>>, done: Arc<RwLock<bool>>) {
    let client = http();
    while !*done.read().unwrap() {
        let base = url.read().unwrap().clone();
        let popped = client
            .post(format!(
                "{base}/v1/queues/work/pop?lease_ms={LEASE_MS}&wait_ms=200"
            ))
            .send()
            .await;
        let Ok(response) = popped else {
            // The daemon is down: try again at its next address.
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        };
        if response.status() != StatusCode::OK {
            continue;
        }
        let receipt = response.headers()["hotq-receipt"]
            .to_str()
            .unwrap()
            .to_string();
        let Ok(body) = response.text().await else {
            continue;
        };
        *log.lock()
            .unwrap()
            .deliveries
            .entry(body.clone())
            .or_default() += 1;
        // The ack goes to whichever daemon runs now; if it dies under the
        // ack, the ack is retried, and a 404 then is ambiguous.
        let mut unanswered = false;
        loop {
            let base = url.read().unwrap().clone();
            match client
                .post(format!("{base}/v1/queues/work/ack/{receipt}"))
                .send()
                .await
            {
                Ok(response) if response.status() == StatusCode::NO_CONTENT => {
                    log.lock().unwrap().acked.insert(body);
                    break;
                }
                Ok(response) => {
                    let status = response.status();
                    assert!(
                        status == StatusCode::NOT_FOUND || status == StatusCode::CONFLICT,
                        "ack answered {status}"
                    );
                    if unanswered {
                        log.lock().unwrap().ack_unanswered.insert(body);
                    }
                    break;
                }
                Err(_) => {
                    unanswered = true;
                    if *done.read().unwrap() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
        }
    }
}

/// One worker: pops with a lease, the previous item's receipt riding on
/// the next pop; survives the daemon's deaths by retrying against its
/// current address, the receipt still riding. Ends when `done` is set.
async fn riding_worker(url: Arc<RwLock<String>>, log: Arc<Mutex<Log>>, done: Arc<RwLock<bool>>) {
    let client = http();
    // The receipt riding on the next pop, its item, and whether a pop
    // carrying it got no answer (it may have been acked then).
    let mut carried: Option<(String, String, bool)> = None;
    while !*done.read().unwrap() {
        let base = url.read().unwrap().clone();
        let ack = carried
            .as_ref()
            .map(|(r, _, _)| format!("&ack={r}"))
            .unwrap_or_default();
        let popped = client
            .post(format!(
                "{base}/v1/queues/work/pop?lease_ms={LEASE_MS}&wait_ms=200{ack}"
            ))
            .send()
            .await;
        let Ok(response) = popped else {
            // The daemon is down: try again at its next address.
            if let Some((_, _, unanswered)) = carried.as_mut() {
                *unanswered = true;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        };
        if !response.status().is_success() {
            continue;
        }
        if let Some((_, item, unanswered)) = carried.take() {
            let word = response.headers()["hotq-acked"]
                .to_str()
                .unwrap()
                .to_string();
            let mut log = log.lock().unwrap();
            match word.as_str() {
                "acked" => {
                    log.acked.insert(item);
                }
                "unknown_receipt" | "lease_expired" if unanswered => {
                    log.ack_unanswered.insert(item);
                }
                // The lease expired before the ack came (a restart took
                // longer than the lease): the item is redelivered.
                "unknown_receipt" | "lease_expired" => {}
                other => panic!("ack answered {other}"),
            }
        }
        if response.status() != StatusCode::OK {
            continue;
        }
        let receipt = response.headers()["hotq-receipt"]
            .to_str()
            .unwrap()
            .to_string();
        let Ok(body) = response.text().await else {
            continue;
        };
        *log.lock()
            .unwrap()
            .deliveries
            .entry(body.clone())
            .or_default() += 1;
        carried = Some((receipt, body, false));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leased_pops_lose_nothing_when_the_daemon_is_killed() {
    kill_drill(Acks::OwnRequest).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_riding_on_pops_lose_nothing_when_the_daemon_is_killed() {
    kill_drill(Acks::RidingOnPops).await;
}

/// Pushes, runs the workers, kills the daemon `KILLS` times, and checks
/// the books and the store.
async fn kill_drill(acks: Acks) {
    let dir = tempfile::tempdir().unwrap();
    let first = tokio::task::spawn_blocking({
        let path = dir.path().to_path_buf();
        move || start(&path)
    })
    .await
    .unwrap();
    let client = http();
    let pushed: Vec<String> = (0..ITEMS).map(|n| format!("item-{n}")).collect();
    for chunk in pushed.chunks(500) {
        use base64::Engine;
        let encoded: Vec<String> = chunk
            .iter()
            .map(|item| base64::engine::general_purpose::STANDARD.encode(item))
            .collect();
        let response = client
            .post(format!("{}/v1/queues/work/items:batch", first.url))
            .json(&encoded)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::CREATED);
    }

    let url = Arc::new(RwLock::new(first.url.clone()));
    let log = Arc::new(Mutex::new(Log::default()));
    let done = Arc::new(RwLock::new(false));
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            let (url, log, done) = (url.clone(), log.clone(), done.clone());
            match acks {
                Acks::OwnRequest => tokio::spawn(acking_worker(url, log, done)),
                Acks::RidingOnPops => tokio::spawn(riding_worker(url, log, done)),
            }
        })
        .collect();

    let mut running = first;
    for kill in 1..=KILLS {
        // Kill when the load has acked its share: a moment the load sets.
        let target = kill * ITEMS / (KILLS + 1);
        common::wait_until(
            "the load to reach the next kill",
            Duration::from_secs(120),
            || log.lock().unwrap().acked.len() >= target,
        )
        .await;
        // ... plus a random few milliseconds, so the kill lands anywhere
        // in a pop, an ack or a fulfillment.
        tokio::time::sleep(Duration::from_millis(rand::random::<u64>() % 40)).await;
        running = kill9_and_restart(running, dir.path()).await;
        *url.write().unwrap() = running.url.clone();
    }

    // Done when every item is acked, or unanswered-acked and gone.
    let stats_url = format!("{}/v1/queues/work", running.url);
    common::eventually("every item to be acked", Duration::from_secs(120), || {
        let (client, stats_url, log) = (client.clone(), stats_url.clone(), log.clone());
        async move {
            let settled = {
                let log = log.lock().unwrap();
                log.acked.len() + log.ack_unanswered.difference(&log.acked).count() >= ITEMS
            };
            let Ok(response) = client.get(&stats_url).send().await else {
                return false;
            };
            let stats: serde_json::Value = response.json().await.unwrap();
            settled && stats["depth"] == 0 && stats["leased"] == 0
        }
    })
    .await;
    *done.write().unwrap() = true;
    for worker in workers {
        worker.await.unwrap();
    }
    tokio::task::spawn_blocking(move || terminate(running))
        .await
        .unwrap();

    let log = std::mem::take(&mut *log.lock().unwrap());
    let keys = QueueKeys::new(&QueueName::new("work").unwrap());
    let store = EmbeddedStore::open(EmbeddedConfig::new(dir.path())).unwrap();
    for (what, range) in [
        ("items", keys.items_range()),
        ("requests", keys.requests_range()),
    ] {
        let left = common::scan(&store, range).await;
        assert!(left.is_empty(), "{} {what} left after the load", left.len());
    }
    for what in [hotq::keys::DueWhat::Lease, hotq::keys::DueWhat::Delayed] {
        let left = common::due_of(&store, &keys, what).await;
        assert!(
            left.is_empty(),
            "{} {what:?} left after the load",
            left.len()
        );
    }
    // A staged pop's result whose requester died with a daemon waits for
    // the reaper (its deadline plus grace); a leased one holds no item of
    // its own: its lease returned the item, and the lease is gone.
    let stale = common::scan(&store, keys.results_range()).await;
    for row in &stale {
        let result = hotq::envelope::decode_result(&row.value).unwrap();
        let lease = result.lease.expect("every pop in this test is leased");
        let receipt = hotq::lease::Receipt(lease.receipt);
        for key in [
            keys.lease(receipt.issued_expiry_ms(), &receipt.0),
            keys.receipt(&receipt.0),
        ] {
            let row = common::scan(&store, (key.clone(), [key, vec![0]].concat())).await;
            assert!(row.is_empty(), "a stale result's lease still exists");
        }
    }
    let delivered: HashSet<&String> = log.deliveries.keys().collect();
    assert_eq!(delivered.len(), ITEMS, "every pushed item was delivered");
    for item in &pushed {
        assert!(
            log.acked.contains(item) || log.ack_unanswered.contains(item),
            "{item} was never acked"
        );
    }
    let deliveries: u32 = log.deliveries.values().sum();
    let redeliveries = deliveries as usize - ITEMS;
    eprintln!(
        "{ITEMS} items, {KILLS} SIGKILLs, {WORKERS} workers: {deliveries} deliveries, \
         {redeliveries} redeliveries, {} acks unanswered, {} stale leased results awaiting the reaper",
        log.ack_unanswered.len(),
        stale.len()
    );
    // A worker holds at most one item at a time (and, riding, carries at
    // most one ack), so at most one item (two) per worker was in flight at
    // each kill.
    let in_flight = match acks {
        Acks::OwnRequest => 1,
        Acks::RidingOnPops => 2,
    };
    assert!(
        redeliveries <= in_flight * KILLS * WORKERS,
        "{redeliveries} redeliveries for {KILLS} kills of {WORKERS} workers"
    );
}

/// Items, workers and lease of the unacked run through the line.
const LINE_ITEMS: usize = 600;
const LINE_WORKERS: usize = 32;
const LINE_LEASE_MS: u64 = 2_000;

/// Leased pops (no wait, as most workers send them) by `LINE_WORKERS` clients
/// until every one of `LINE_ITEMS` items was delivered; returns each item's
/// latest delivery count. (On a slow machine a lease can expire within the
/// run: the item then comes again, counted higher.)
async fn lease_everything(url: &str) -> HashMap<String, u64> {
    let held: Arc<tokio::sync::Mutex<HashMap<String, u64>>> = Arc::default();
    let mut workers = Vec::new();
    for _ in 0..LINE_WORKERS {
        let (api, held) = (Client::new(url), held.clone());
        workers.push(tokio::spawn(async move {
            while held.lock().await.len() < LINE_ITEMS {
                let Some(leased) = api.pop_leased("kept", LINE_LEASE_MS).await else {
                    // Leases of the previous daemon not yet expired.
                    tokio::task::yield_now().await;
                    continue;
                };
                let (item, count) = (leased.body, leased.delivery_count);
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
    let items: Vec<String> = (0..LINE_ITEMS).map(|n| format!("kept-{n:04}")).collect();
    let api = Client::new(&running.url);
    for chunk in items.chunks(200) {
        api.push_batch("kept", chunk).await;
    }

    let first = lease_everything(&running.url).await;
    assert!(
        common::daemon::staged_pops(&running.metrics_url).await > 0.0,
        "leased pops went through the line"
    );
    // Nothing acked: every item is held under a lease written by the commit
    // that took it. The daemon dies without a shutdown.
    let running = kill9_and_restart(running, dir.path()).await;
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
