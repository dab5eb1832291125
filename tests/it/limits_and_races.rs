//! The edges an adversarial review did not reach: names, group keys and
//! dedup ids at their limits; dedup ids across purge, delete and redrive;
//! a dead-letter target deleted while its origin still names it; settings
//! changed while workers pop and settle; queue listings while queues come
//! and go. Each over HTTP against the real daemon.

use crate::common;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use common::client::Client;
use common::daemon::{Daemon, http};
use hotq::keys::QUEUE_NAME_LEN_MAX;
use hotq::queue::dedup::DEDUP_ID_LEN_MAX;
use hotq::queue::groups::GROUP_KEY_LEN_MAX;
use serde_json::{Value, json};

async fn push_with(
    client: &reqwest::Client,
    url: &str,
    queue: &str,
    query: &str,
    header: Option<(&str, &str)>,
) -> u16 {
    let mut request = client
        .post(format!("{url}/v1/queues/{queue}/items?{query}"))
        .body("x");
    if let Some((name, value)) = header {
        request = request.header(name, value);
    }
    request.send().await.unwrap().status().as_u16()
}

/// Leases one item: (body, receipt), or `None` on 204.
async fn lease(client: &reqwest::Client, url: &str, queue: &str) -> Option<(String, String)> {
    let answer = client
        .post(format!("{url}/v1/queues/{queue}/pop?lease_ms=60000"))
        .send()
        .await
        .unwrap();
    if answer.status() == 204 {
        return None;
    }
    assert_eq!(answer.status(), 200);
    let receipt = answer.headers()["hotq-receipt"]
        .to_str()
        .unwrap()
        .to_string();
    Some((answer.text().await.unwrap(), receipt))
}

async fn put_settings(client: &reqwest::Client, url: &str, queue: &str, settings: Value) {
    let answer = client
        .put(format!("{url}/v1/queues/{queue}/settings"))
        .json(&settings)
        .send()
        .await
        .unwrap();
    let status = answer.status();
    assert_eq!(status, 200, "{}", answer.text().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_group_keys_and_dedup_ids_at_their_limits_work_and_one_more_is_refused() {
    let daemon = Daemon::start(|_| {}).await;
    let (client, url) = (http(), daemon.url.clone());
    let longest = "q".repeat(QUEUE_NAME_LEN_MAX);
    assert_eq!(Client::new(&url).try_push(&longest, "a").await.0, 201);
    assert_eq!(lease(&client, &url, &longest).await.unwrap().0, "a");
    let too_long = "q".repeat(QUEUE_NAME_LEN_MAX + 1);
    let (status, body) = Client::new(&url).try_push(&too_long, "a").await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "invalid_queue_name");

    let group = "g".repeat(GROUP_KEY_LEN_MAX);
    let query = format!("group={group}");
    assert_eq!(push_with(&client, &url, "edge", &query, None).await, 201);
    let query = format!("group={group}g");
    assert_eq!(push_with(&client, &url, "edge", &query, None).await, 400);

    let id = "d".repeat(DEDUP_ID_LEN_MAX);
    let header = Some(("hotq-dedup-id", id.as_str()));
    assert_eq!(push_with(&client, &url, "edge", "", header).await, 201);
    assert_eq!(push_with(&client, &url, "edge", "", header).await, 200);
    let id = "d".repeat(DEDUP_ID_LEN_MAX + 1);
    let header = Some(("hotq-dedup-id", id.as_str()));
    assert_eq!(push_with(&client, &url, "edge", "", header).await, 400);
    // A header id is printable ASCII, as the spec says: a tab is refused.
    let header = Some(("hotq-dedup-id", "a\tb"));
    assert_eq!(push_with(&client, &url, "edge", "", header).await, 400);
    let tabbed = client
        .post(format!("{url}/v1/pqueues/edge/items?priority=1"))
        .header("hotq-dedup-id", "a\tb")
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(
        tabbed.status(),
        400,
        "priority pushes read the header alike"
    );
    assert_eq!(
        Client::new(&url).stats("edge").await.depth,
        2,
        "only the stored ones"
    );
    daemon.stop().await;
}

/// A dedup id outlives a purge (the purge drops items, not what was
/// pushed), is gone with a delete (the queue starts afresh), and a
/// redriven item carries none (it is not a push).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dedup_ids_outlive_a_purge_not_a_delete() {
    let daemon = Daemon::start(|_| {}).await;
    let (client, url) = (http(), daemon.url.clone());
    let header = Some(("hotq-dedup-id", "order-1"));
    assert_eq!(push_with(&client, &url, "orders", "", header).await, 201);
    let purged = client
        .post(format!("{url}/v1/queues/orders/purge"))
        .send()
        .await
        .unwrap();
    assert_eq!(purged.status(), 200);
    assert_eq!(push_with(&client, &url, "orders", "", header).await, 200);
    let deleted = client
        .delete(format!("{url}/v1/queues/orders"))
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 200);
    assert_eq!(push_with(&client, &url, "orders", "", header).await, 201);
    assert_eq!(Client::new(&url).stats("orders").await.depth, 1);
    daemon.stop().await;
}

/// A queue's dead-letter target deleted while the queue still names it
/// is recreated by the next dead letter, which a redrive returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_dead_letter_target_takes_the_next_dead_letter() {
    let daemon = Daemon::start(|_| {}).await;
    let (client, url) = (http(), daemon.url.clone());
    let settings = json!({"max_deliveries": 1, "dead_letter_queue": "graveyard"});
    put_settings(&client, &url, "gy", settings).await;
    let nack = |receipt: String| {
        client
            .post(format!("{url}/v1/queues/gy/nack/{receipt}"))
            .send()
    };
    for body in ["first", "second"] {
        assert_eq!(Client::new(&url).try_push("gy", body).await.0, 201);
        let (popped, receipt) = lease(&client, &url, "gy").await.unwrap();
        assert_eq!(popped, body);
        let nacked: Value = nack(receipt).await.unwrap().json().await.unwrap();
        assert_eq!(nacked["outcome"], "dead_lettered", "{nacked}");
        if body == "first" {
            let deleted = client
                .delete(format!("{url}/v1/queues/graveyard"))
                .send()
                .await;
            let deleted: Value = deleted.unwrap().json().await.unwrap();
            assert_eq!(deleted["items"], 1, "{deleted}");
        }
    }
    assert_eq!(Client::new(&url).stats("graveyard").await.depth, 1);
    let redriven = client
        .post(format!("{url}/v1/queues/graveyard/redrive"))
        .send()
        .await
        .unwrap();
    let redriven: Value = redriven.json().await.unwrap();
    assert_eq!(redriven["redriven"], 1, "{redriven}");
    assert_eq!(lease(&client, &url, "gy").await.unwrap().0, "second");
    daemon.stop().await;
}

/// Settings rewritten over and over while leased workers pop and ack:
/// every item is delivered and acked once, no lease is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn settings_changes_racing_pops_and_settles_lose_nothing() {
    const ITEMS: usize = 400;
    let daemon = Daemon::start(|_| {}).await;
    let (client, url) = (http(), daemon.url.clone());
    let items: Vec<String> = (0..ITEMS).map(|i| format!("item-{i}")).collect();
    for chunk in items.chunks(100) {
        let batch: Vec<String> = chunk
            .iter()
            .map(|item| base64_of(item.as_bytes()))
            .collect();
        let answer = client
            .post(format!("{url}/v1/queues/busy/items:batch"))
            .json(&batch)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 201);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let changer = {
        let (client, url, stop) = (client.clone(), url.clone(), stop.clone());
        tokio::spawn(async move {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let settings =
                    json!({"default_lease_ms": 30_000 + n % 7, "max_deliveries": 10 + n % 3});
                put_settings(&client, &url, "busy", settings).await;
            }
            n
        })
    };
    let mut workers = Vec::new();
    for _ in 0..8 {
        let (client, url) = (client.clone(), url.clone());
        workers.push(tokio::spawn(async move {
            let mut seen = Vec::new();
            while let Some((body, receipt)) = lease(&client, &url, "busy").await {
                let acked = client
                    .post(format!("{url}/v1/queues/busy/ack/{receipt}"))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(acked.status(), 204);
                seen.push(body);
            }
            seen
        }));
    }
    let mut delivered = Vec::new();
    for worker in workers {
        delivered.extend(worker.await.unwrap());
    }
    stop.store(true, Ordering::Relaxed);
    let changes = changer.await.unwrap();
    assert!(changes > 0);
    let distinct: HashSet<&String> = delivered.iter().collect();
    assert_eq!(delivered.len(), ITEMS, "each delivered once");
    assert_eq!(distinct.len(), ITEMS);
    let stats = Client::new(&url).stats("busy").await;
    assert_eq!((stats.depth, stats.leased), (0, 0), "{stats}");
    daemon.stop().await;
}

/// Listing pages while other queues are created and deleted: every page
/// answers, names only grow across pages, and a queue that lives through
/// the whole listing is in it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn queue_listings_while_queues_come_and_go_page_in_order() {
    let daemon = Daemon::start(|_| {}).await;
    let (client, url) = (http(), daemon.url.clone());
    for i in 0..30 {
        assert_eq!(
            Client::new(&url)
                .try_push(&format!("stay-{i:02}"), "x")
                .await
                .0,
            201
        );
    }
    let stop = Arc::new(AtomicBool::new(false));
    let churn = {
        let (client, url, stop) = (client.clone(), url.clone(), stop.clone());
        tokio::spawn(async move {
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let queue = format!("churn-{:02}", i % 40);
                Client::new(&url).try_push(&queue, "x").await;
                let gone = client
                    .delete(format!("{url}/v1/queues/{queue}"))
                    .send()
                    .await;
                assert!(gone.unwrap().status().is_success());
            }
        })
    };
    for _ in 0..5 {
        let mut names = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let page_url = match &after {
                Some(after) => format!("{url}/v1/queues?limit=7&after={after}"),
                None => format!("{url}/v1/queues?limit=7"),
            };
            let answer = client.get(page_url).send().await.unwrap();
            assert_eq!(answer.status(), 200);
            let page: Value = answer.json().await.unwrap();
            for queue in page["queues"].as_array().unwrap() {
                names.push(queue["queue"].as_str().unwrap().to_string());
            }
            match page["next"].as_str() {
                Some(next) => after = Some(next.to_string()),
                None => break,
            }
        }
        assert!(names.windows(2).all(|pair| pair[0] < pair[1]), "{names:?}");
        let stayed = names
            .iter()
            .filter(|name| name.starts_with("stay-"))
            .count();
        assert_eq!(stayed, 30, "{names:?}");
    }
    stop.store(true, Ordering::Relaxed);
    churn.await.unwrap();
    daemon.stop().await;
}

fn base64_of(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}
