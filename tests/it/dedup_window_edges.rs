//! Dedup ids at the edge of their window and across a redrive, over HTTP.
//!
//! At the edge, a push that finds its id expired but not yet swept takes
//! it over while the timer may be sweeping it and other pushes of the id
//! race it: of eight pushes fired together as the window ends, at most one
//! is stored, never before the window has passed, and every 201 stored
//! exactly one item. A dead-lettered item redriven back is not a push: it
//! returns whatever its id says, and its id still counts for new pushes.

use crate::common;

use std::time::{Duration, Instant};

use common::daemon::{Daemon, http};

const WINDOW_MS: u64 = 300;
const RACERS: usize = 8;
const ROUNDS: usize = 15;

async fn push(client: &reqwest::Client, url: &str, queue: &str, id: &str, body: &str) -> u16 {
    client
        .post(format!("{url}/v1/queues/{queue}/items"))
        .header("hotq-dedup-id", id)
        .body(body.to_string())
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// Pops every visible item of `queue`; returns how many.
async fn drain(client: &reqwest::Client, url: &str, queue: &str) -> usize {
    let mut count = 0;
    loop {
        let answer = client
            .post(format!("{url}/v1/queues/{queue}/pop?max=100"))
            .header("accept", "application/json")
            .send()
            .await
            .unwrap();
        if answer.status() == 204 {
            return count;
        }
        let items: Vec<serde_json::Value> = answer.json().await.unwrap();
        count += items.len();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn at_the_end_of_the_window_one_racing_push_of_an_id_is_stored() {
    let daemon = Daemon::start(|config| config.leases.dedup_window_ms = WINDOW_MS).await;
    let client = http();
    let mut stored = 0usize;
    let mut rounds_with_a_winner = 0;
    for round in 0..ROUNDS {
        let id = format!("edge-{round}");
        let first_sent = Instant::now();
        assert_eq!(push(&client, &daemon.url, "edge", &id, "first").await, 201);
        stored += 1;
        assert_eq!(push(&client, &daemon.url, "edge", &id, "again").await, 200);
        // Aimed at the end of the window, give or take 60 ms (load shaping:
        // the checks below hold whichever side the racers land on).
        let aim_ms = WINDOW_MS - 60 + rand::random::<u64>() % 120;
        tokio::time::sleep(Duration::from_millis(aim_ms)).await;
        let racers = (0..RACERS).map(|n| {
            let (client, url, id) = (client.clone(), daemon.url.clone(), id.clone());
            tokio::spawn(async move {
                let status = push(&client, &url, "edge", &id, &format!("racer-{n}")).await;
                (status, first_sent.elapsed())
            })
        });
        let mut winners = Vec::new();
        for racer in racers {
            let (status, answered) = racer.await.unwrap();
            assert!(status == 200 || status == 201, "push answered {status}");
            if status == 201 {
                winners.push(answered);
            }
        }
        assert!(
            winners.len() <= 1,
            "round {round}: {} racers stored",
            winners.len()
        );
        if let Some(answered) = winners.first() {
            // (The store's clock counts whole ms: 2 ms of slack.)
            assert!(
                *answered >= Duration::from_millis(WINDOW_MS - 2),
                "round {round}: stored {answered:?} after the first push, within the window"
            );
            rounds_with_a_winner += 1;
            stored += 1;
        }
    }
    eprintln!("{ROUNDS} rounds, {rounds_with_a_winner} with a racer stored");
    assert_eq!(
        drain(&client, &daemon.url, "edge").await,
        stored,
        "every 201 stored one item, every 200 none"
    );
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redriven_item_keeps_its_id_counting_and_comes_back_once() {
    let daemon = Daemon::start(|config| config.leases.max_deliveries = 1).await;
    let client = http();
    let url = &daemon.url;
    assert_eq!(push(&client, url, "jobs", "order-7", "payload").await, 201);
    let popped = client
        .post(format!("{url}/v1/queues/jobs/pop?lease_ms=60000"))
        .send()
        .await
        .unwrap();
    assert_eq!(popped.status(), 200);
    let receipt = popped.headers()["hotq-receipt"]
        .to_str()
        .unwrap()
        .to_string();
    let nacked = client
        .post(format!("{url}/v1/queues/jobs/nack/{receipt}"))
        .send()
        .await
        .unwrap();
    assert!(
        nacked.status().is_success(),
        "nack answered {}",
        nacked.status()
    );
    let dead = common::daemon::get_json(&format!("{url}/v1/queues/jobs.dead")).await;
    assert_eq!(
        dead["depth"], 1,
        "dead-lettered after its one delivery: {dead}"
    );
    let redriven = client
        .post(format!("{url}/v1/queues/jobs.dead/redrive"))
        .send()
        .await
        .unwrap();
    assert_eq!(redriven.status(), 200);
    // The id still counts: a new push of it stores nothing.
    assert_eq!(push(&client, url, "jobs", "order-7", "payload").await, 200);
    assert_eq!(
        drain(&client, url, "jobs").await,
        1,
        "the redriven item, once"
    );
    assert_eq!(drain(&client, url, "jobs.dead").await, 0);
    daemon.stop().await;
}
