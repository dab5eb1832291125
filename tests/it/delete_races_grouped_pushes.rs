//! DELETE racing pushes to message groups whose heads are out under a
//! lease, over HTTP: such pushes wait behind the heads (in the queue's
//! `grouped` subspace, not in `items`), and every one answered 201 must
//! be dropped and counted by a DELETE, or still be there.
//!
//! A DELETE drops the waiting items first, then the visible ones, then the
//! leases (which leaves each group's state saying it has a head), and
//! finally clears the whole queue if it holds no item, lease or delayed
//! item. A grouped push landing after the first step waited behind a head
//! the final check did not look for, and the clear took it uncounted
//! (issue #24, found by reading).

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use common::daemon::{Daemon, http};

const QUEUE: &str = "grouped-race";
const GROUPS: usize = 8;
const PUSHERS: usize = 4;

#[derive(Default)]
struct Books {
    pushed: AtomicU64,
    /// Items popped under a lease (never acked: the DELETE drops their
    /// leases, and its `leased` count is not added again).
    leased_out: AtomicU64,
    dropped: AtomicU64,
}

async fn pusher(url: String, books: Arc<Books>, stop: Arc<AtomicBool>, id: usize) {
    let client = http();
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let group = rand::random::<u64>() as usize % GROUPS;
        let answer = client
            .post(format!("{url}/v1/queues/{QUEUE}/items?group=g{group}"))
            .body(format!("p{id}-{n}"))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 201, "{}", answer.text().await.unwrap());
        books.pushed.fetch_add(1, Ordering::Relaxed);
        // Paced: a DELETE's final clear, which conflicts with every push
        // landing in the queue, then usually commits (unpaced pushers keep
        // most DELETEs busy until their bound, and the test long).
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
}

/// Takes every group's head under a long lease, so the items pushed
/// behind it wait.
async fn leaser(url: String, books: Arc<Books>, stop: Arc<AtomicBool>) {
    let client = http();
    while !stop.load(Ordering::Relaxed) {
        let answer = client
            .post(format!(
                "{url}/v1/queues/{QUEUE}/pop?lease_ms=600000&max={GROUPS}&wait_ms=100"
            ))
            .header("accept", "application/json")
            .send()
            .await
            .unwrap();
        match answer.status().as_u16() {
            200 => {
                let items: Vec<serde_json::Value> = answer.json().await.unwrap();
                books
                    .leased_out
                    .fetch_add(items.len() as u64, Ordering::Relaxed);
            }
            204 => {}
            other => panic!("pop answered {other}"),
        }
    }
}

async fn delete(url: &str, books: &Books) {
    let began = std::time::Instant::now();
    let answer = http()
        .delete(format!("{url}/v1/queues/{QUEUE}"))
        .send()
        .await
        .unwrap();
    let status = answer.status().as_u16();
    let body: serde_json::Value = answer.json().await.unwrap();
    assert!(status == 200 || status == 503, "{status}: {body}");
    eprintln!("DELETE answered {status} in {:?}", began.elapsed());
    let count = |field: &str| body[field].as_u64().unwrap_or(0);
    // Leased items were counted when they were popped.
    books.dropped.fetch_add(
        count("items") + count("delayed") + count("results"),
        Ordering::Relaxed,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_delete_counts_every_grouped_push_waiting_behind_a_leased_head() {
    let daemon = Daemon::start(|_| {}).await;
    let books = Arc::new(Books::default());
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for id in 0..PUSHERS {
        tasks.push(tokio::spawn(pusher(
            daemon.url.clone(),
            books.clone(),
            stop.clone(),
            id,
        )));
    }
    tasks.push(tokio::spawn(leaser(
        daemon.url.clone(),
        books.clone(),
        stop.clone(),
    )));
    for _ in 0..15 {
        tokio::time::sleep(Duration::from_millis(150)).await;
        delete(&daemon.url, &books).await;
    }
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.unwrap();
    }
    // What is left (visible heads, items waiting behind leased heads): a
    // last DELETE, with nothing racing it, drops and counts it all.
    let before = books.dropped.load(Ordering::Relaxed);
    delete(&daemon.url, &books).await;
    let left = books.dropped.load(Ordering::Relaxed) - before;
    books.dropped.store(before, Ordering::Relaxed);
    let pushed = books.pushed.load(Ordering::Relaxed);
    let leased_out = books.leased_out.load(Ordering::Relaxed);
    let dropped = books.dropped.load(Ordering::Relaxed);
    eprintln!("pushed {pushed}, leased out {leased_out}, dropped {dropped}, left {left}");
    assert_eq!(
        pushed as i64 - leased_out as i64 - dropped as i64 - left as i64,
        0,
        "pushed {pushed}, leased out {leased_out}, dropped {dropped}, left {left}"
    );
    daemon.stop().await;
}
