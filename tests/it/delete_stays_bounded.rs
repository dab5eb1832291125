//! A DELETE answers within its bound (`DELETE_WAIT_MS_MAX`, then 503
//! `queue_busy` with what it dropped) while pushers that never pause keep a
//! few hundred items in the queue and poppers take them from the front.
//!
//! Each batch of a DELETE's drain used to read up to 1,000 items from the
//! back and retry up to 1,000 times: on a short queue under pops it read
//! the very items the pops took, lost every race to their quicker commits,
//! and one DELETE took 76 s (more than two minutes on a loaded machine),
//! though the deadline is checked between batches.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use base64::Engine;
use common::daemon::{Daemon, http};

const QUEUE: &str = "bounded";
/// Slack over `DELETE_WAIT_MS_MAX`: the batch under way when the deadline
/// passes, and a slow machine.
const SLACK_MS: u64 = 10_000;

async fn pusher(url: String, stop: Arc<AtomicBool>, id: usize) {
    let client = http();
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let items: Vec<String> = (0..5)
            .map(|i| base64::engine::general_purpose::STANDARD.encode(format!("p{id}-{n}-{i}")))
            .collect();
        let answer = client
            .post(format!("{url}/v1/queues/{QUEUE}/items:batch"))
            .json(&items)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 201);
    }
}

async fn popper(url: String, stop: Arc<AtomicBool>, id: usize) {
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
        assert!(matches!(answer.status().as_u16(), 200 | 204));
    }
}

/// One DELETE: how long it took, and its status.
async fn timed_delete(url: String) -> (Duration, u16) {
    let began = Instant::now();
    let answer = http()
        .delete(format!("{url}/v1/queues/{QUEUE}"))
        .send()
        .await
        .unwrap();
    (began.elapsed(), answer.status().as_u16())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn a_delete_under_unpaused_pushers_and_poppers_answers_within_its_bound() {
    let daemon = Daemon::start(|_| {}).await;
    let stop = Arc::new(AtomicBool::new(false));
    let mut clients = Vec::new();
    for id in 0..6 {
        clients.push(tokio::spawn(pusher(daemon.url.clone(), stop.clone(), id)));
    }
    for id in 0..8 {
        clients.push(tokio::spawn(popper(daemon.url.clone(), stop.clone(), id)));
    }
    let mut deletes = Vec::new();
    for _ in 0..12 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        deletes.push(tokio::spawn(timed_delete(daemon.url.clone())));
    }
    let bound = Duration::from_millis(hotq::queue::DELETE_WAIT_MS_MAX + SLACK_MS);
    let mut longest = Duration::ZERO;
    for delete in deletes {
        // Awaited with a bound of its own, so a DELETE stuck for minutes
        // fails here rather than hangs the test.
        let (took, status) = tokio::time::timeout(bound * 3, delete)
            .await
            .expect("a DELETE answered")
            .unwrap();
        assert!(status == 200 || status == 503, "DELETE answered {status}");
        longest = longest.max(took);
    }
    stop.store(true, Ordering::Relaxed);
    for client in clients {
        client.await.unwrap();
    }
    eprintln!("longest DELETE: {longest:?}");
    assert!(
        longest <= bound,
        "a DELETE took {longest:?}, past its bound of {} ms and {SLACK_MS} ms of slack",
        hotq::queue::DELETE_WAIT_MS_MAX
    );
    daemon.stop().await;
}
