//! DELETE racing pushes and pops over HTTP: every push answered 201 is
//! delivered, dropped (counted in a DELETE's answer) or still there.
//!
//! Pushers (single and batch, with and without dedup ids), poppers of
//! every wait and `max`, and a DELETE every few hundred ms; then a drain.
//! The books must balance: pushed = delivered + dropped + left.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use base64::Engine;
use common::daemon::{Daemon, http};

const QUEUE: &str = "race";
/// How long the race runs; `HOTQ_RACE_MS` sets it (the check is
/// twenty runs of 10,000 ms).
fn run_ms() -> u64 {
    std::env::var("HOTQ_RACE_MS")
        .ok()
        .and_then(|ms| ms.parse().ok())
        .unwrap_or(3_000)
}
const PUSHERS: usize = 6;
const POPPERS: usize = 8;

#[derive(Default)]
struct Books {
    pushed: AtomicU64,
    delivered: AtomicU64,
    dropped: AtomicU64,
}

async fn pusher(url: String, books: Arc<Books>, stop: Arc<AtomicBool>, id: usize) {
    let client = http();
    // Dedup ids unique to this run (a daemon given by HOTQ_RACE_URL keeps
    // those of earlier runs).
    let run = rand::random::<u64>();
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let batch = 1 + (n as usize % 5);
        let dedup = n.is_multiple_of(2);
        let answer = if batch == 1 {
            let mut request = client
                .post(format!("{url}/v1/queues/{QUEUE}/items"))
                .body(format!("p{id}-{n}"));
            if dedup {
                request = request.header("hotq-dedup-id", format!("{run}-d{id}-{n}"));
            }
            request.send().await.unwrap()
        } else {
            let items: Vec<String> = (0..batch)
                .map(|i| base64::engine::general_purpose::STANDARD.encode(format!("p{id}-{n}-{i}")))
                .collect();
            client
                .post(format!("{url}/v1/queues/{QUEUE}/items:batch"))
                .json(&items)
                .send()
                .await
                .unwrap()
        };
        assert_eq!(answer.status(), 201, "{}", answer.text().await.unwrap());
        books.pushed.fetch_add(batch as u64, Ordering::Relaxed);
        // Paced, so the poppers keep the queue near empty (where the
        // delete's final clear meets pushes and pops at once).
        if std::env::var("HOTQ_RACE_UNPACED").is_err() {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
}

async fn popper(url: String, books: Arc<Books>, stop: Arc<AtomicBool>, id: usize) {
    let client = http();
    let wait_ms = [0, 200, 1000][id % 3];
    let max = if id.is_multiple_of(2) { 1 } else { 5 };
    while !stop.load(Ordering::Relaxed) {
        let answer = client
            .post(format!(
                "{url}/v1/queues/{QUEUE}/pop?wait_ms={wait_ms}&max={max}"
            ))
            .header("accept", "application/json")
            .send()
            .await
            .unwrap();
        match answer.status().as_u16() {
            200 => {
                let items: serde_json::Value = answer.json().await.unwrap();
                let count = items.as_array().map_or(1, |items| items.len());
                books.delivered.fetch_add(count as u64, Ordering::Relaxed);
            }
            204 => {}
            other => panic!("pop answered {other}: {}", answer.text().await.unwrap()),
        }
    }
}

async fn delete(client: &reqwest::Client, url: &str, books: &Books) {
    let answer = client
        .delete(format!("{url}/v1/queues/{QUEUE}"))
        .send()
        .await
        .unwrap();
    let status = answer.status().as_u16();
    let body: serde_json::Value = answer.json().await.unwrap();
    assert!(status == 200 || status == 503, "{status}: {body}");
    let count = |field: &str| body[field].as_u64().unwrap_or(0);
    books.dropped.fetch_add(
        count("items") + count("delayed") + count("leased") + count("results"),
        Ordering::Relaxed,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_delete_racing_pushes_and_pops_drops_only_what_it_counts() {
    // HOTQ_RACE_URL points the race at a daemon already running (a release
    // build behaves with other timings than this test's debug daemon).
    let external = std::env::var("HOTQ_RACE_URL").ok();
    let daemon = match &external {
        Some(_) => None,
        None => Some(Daemon::start(|_| {}).await),
    };
    let url = external.unwrap_or_else(|| daemon.as_ref().unwrap().url.clone());
    let books = Arc::new(Books::default());
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for id in 0..PUSHERS {
        tasks.push(tokio::spawn(pusher(
            url.clone(),
            books.clone(),
            stop.clone(),
            id,
        )));
    }
    for id in 0..POPPERS {
        tasks.push(tokio::spawn(popper(
            url.clone(),
            books.clone(),
            stop.clone(),
            id,
        )));
    }
    let client = http();
    let began = Instant::now();
    let mut deletes = Vec::new();
    // Fired on a clock, not one after the other: a slow delete overlaps
    // the next one.
    while began.elapsed() < Duration::from_millis(run_ms()) {
        tokio::time::sleep(Duration::from_millis(200 + rand::random::<u64>() % 400)).await;
        let (client, url, books) = (client.clone(), url.clone(), books.clone());
        deletes.push(tokio::spawn(
            async move { delete(&client, &url, &books).await },
        ));
    }
    let deletes_count = deletes.len();
    for task in deletes {
        task.await.unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.unwrap();
    }
    // Drain what is left.
    let mut left = 0u64;
    loop {
        let answer = client
            .post(format!("{url}/v1/queues/{QUEUE}/pop?max=100"))
            .header("accept", "application/json")
            .send()
            .await
            .unwrap();
        if answer.status() == 204 {
            break;
        }
        let items: serde_json::Value = answer.json().await.unwrap();
        left += items.as_array().unwrap().len() as u64;
    }
    let pushed = books.pushed.load(Ordering::Relaxed);
    let delivered = books.delivered.load(Ordering::Relaxed);
    let dropped = books.dropped.load(Ordering::Relaxed);
    eprintln!(
        "deletes {deletes_count}: pushed {pushed}, delivered {delivered}, dropped {dropped}, left {left}"
    );
    assert!(deletes_count > 0);
    assert_eq!(
        pushed as i64 - delivered as i64 - dropped as i64 - left as i64,
        0,
        "pushed {pushed}, delivered {delivered}, dropped {dropped}, left {left}"
    );
    if let Some(daemon) = daemon {
        daemon.stop().await;
    }
}
