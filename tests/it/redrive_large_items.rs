//! A re-drive of large items: the store limits a transaction to 10 MB, so
//! a re-drive moves its items in commits bounded by bytes. 150 items of
//! 98 kB once made the default re-drive fail with `batch_too_large`.

use crate::common;

use common::client::Client;
use common::daemon::{Daemon, http};
use reqwest::StatusCode;
use serde_json::Value;

const ITEM_BYTES: usize = 98_000;
const ITEMS: usize = 150;

/// Item `i`: its number, then filler up to [`ITEM_BYTES`].
fn item(i: usize) -> Vec<u8> {
    let mut bytes = format!("item-{i:04}-").into_bytes();
    bytes.resize(ITEM_BYTES, b'a' + (i % 26) as u8);
    bytes
}

async fn redrive(url: &str, query: &str) -> Value {
    let response = http()
        .post(format!("{url}/v1/queues/big.dead/redrive{query}"))
        .send()
        .await
        .unwrap();
    let status = response.status();
    let body: Value = response.json().await.unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

/// Pops `count` items of `big` and checks they are items `first..` in order.
async fn pop_in_order(url: &str, first: usize, count: usize) {
    for i in first..first + count {
        let response = http()
            .post(format!("{url}/v1/queues/big/pop"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "item {i}");
        let body = response.bytes().await.unwrap();
        assert!(
            body[..] == item(i)[..],
            "item {i} came back changed or out of order"
        );
    }
}

async fn dead_letter_large_items(url: &str) {
    for i in 0..ITEMS {
        let response = http()
            .post(format!("{url}/v1/queues/big.dead/items"))
            .body(item(i))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::CREATED);
    }
    assert_eq!(Client::new(url).depth("big.dead").await, ITEMS as i64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_default_redrive_moves_every_large_item() {
    let daemon = Daemon::start(|_| {}).await;
    let url = &daemon.url;
    dead_letter_large_items(url).await;
    // 150 × 98 kB is 14.7 MB: more than one transaction may write.
    assert_eq!(redrive(url, "").await["redriven"], ITEMS);
    assert_eq!(Client::new(url).depth("big.dead").await, 0);
    assert_eq!(Client::new(url).depth("big").await, ITEMS as i64);
    pop_in_order(url, 0, ITEMS).await;
    assert_eq!(Client::new(url).depth("big").await, 0);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redrive_stops_at_max_across_its_commits() {
    let daemon = Daemon::start(|_| {}).await;
    let url = &daemon.url;
    dead_letter_large_items(url).await;
    // 120 items (11.8 MB) take more than one commit; the 121st stays.
    assert_eq!(redrive(url, "?max=120").await["redriven"], 120);
    assert_eq!(
        Client::new(url).depth("big.dead").await,
        (ITEMS - 120) as i64
    );
    assert_eq!(Client::new(url).depth("big").await, 120);
    assert_eq!(redrive(url, "").await["redriven"], ITEMS - 120);
    assert_eq!(Client::new(url).depth("big.dead").await, 0);
    pop_in_order(url, 0, ITEMS).await;
    daemon.stop().await;
}
