//! Every kind of pop on a contended queue goes through its line, against the
//! real daemon over HTTP: a pop without a wait answers 204 only when nothing
//! is visible, pops of several items take up to `max`, leased pops get their
//! lease from the fulfill commit, and nothing is lost or duplicated when
//! 256 clients mix every mode.

use crate::common;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use common::client::Client;
use common::daemon::{Daemon, http};
use tokio::sync::Mutex;

/// Bound on one load, far above what it takes on a loaded 2-core machine.
const LOAD_BOUND: Duration = Duration::from_secs(240);
/// Items per batch push.
const BATCH: usize = 500;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_pops_on_a_contended_queue_answer_empty_only_when_nothing_is_visible() {
    if !common::alone::here(
        module_path!(),
        "plain_pops_on_a_contended_queue_answer_empty_only_when_nothing_is_visible",
    )
    .await
    {
        return;
    }
    const ITEMS: usize = 3_000;
    const WORKERS: usize = 64;
    let daemon = Daemon::start(|_| {}).await;
    let client = http();
    let items: Vec<String> = (0..ITEMS).map(|n| format!("item-{n:05}")).collect();
    let api = Client::new(&daemon.url);
    for chunk in items.chunks(BATCH) {
        api.push_batch("plain", chunk).await;
    }

    // No pushes from here on: depth only falls, so a stats read after a 204
    // that still shows items proves the 204 was answered while they were
    // visible (a lost race reported as "empty").
    let delivered = Arc::new(Mutex::new(Vec::new()));
    let false_empties = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for _ in 0..WORKERS {
        let (client, url) = (client.clone(), daemon.url.clone());
        let (delivered, false_empties) = (delivered.clone(), false_empties.clone());
        workers.push(tokio::spawn(async move {
            loop {
                let answer = client
                    .post(format!("{url}/v1/queues/plain/pop"))
                    .send()
                    .await
                    .unwrap();
                match answer.status().as_u16() {
                    200 => {
                        let body = answer.bytes().await.unwrap();
                        delivered
                            .lock()
                            .await
                            .push(String::from_utf8(body.to_vec()).unwrap());
                    }
                    204 => {
                        let depth = Client::new(&url).depth("plain").await;
                        if depth > 0 {
                            false_empties.fetch_add(1, Ordering::SeqCst);
                        }
                        return;
                    }
                    other => panic!("pop answered {other}"),
                }
            }
        }));
    }
    tokio::time::timeout(LOAD_BOUND, async {
        for worker in workers {
            worker.await.unwrap();
        }
    })
    .await
    .expect("the drain finished within its bound");

    assert_eq!(
        false_empties.load(Ordering::SeqCst),
        0,
        "a pop without a wait answered 204 while items were visible"
    );
    let mut delivered = Arc::try_unwrap(delivered).unwrap().into_inner();
    delivered.sort();
    assert_eq!(delivered, items, "every item delivered exactly once");
    assert!(
        common::daemon::staged_pops(&daemon.metrics_url).await > 0.0,
        "the contended queue's pops went through its line"
    );
    daemon.stop().await;
}

/// How one worker pops.
#[derive(Clone, Copy, Debug)]
enum Mode {
    Plain,
    LongPoll,
    Many,
    Leased,
    LeasedLongPoll,
    LeasedMany,
}

const MODES: [Mode; 6] = [
    Mode::Plain,
    Mode::LongPoll,
    Mode::Many,
    Mode::Leased,
    Mode::LeasedLongPoll,
    Mode::LeasedMany,
];

impl Mode {
    fn query(self) -> &'static str {
        match self {
            Mode::Plain => "",
            Mode::LongPoll => "wait_ms=200",
            Mode::Many => "max=7",
            Mode::Leased => "lease_ms=120000",
            Mode::LeasedLongPoll => "lease_ms=120000&wait_ms=200",
            Mode::LeasedMany => "lease_ms=120000&max=5&wait_ms=50",
        }
    }

    fn leased(self) -> bool {
        matches!(self, Mode::Leased | Mode::LeasedLongPoll | Mode::LeasedMany)
    }

    fn many(self) -> bool {
        matches!(self, Mode::Many | Mode::LeasedMany)
    }
}

/// Pops once in `mode`; returns the items (acked when leased).
async fn pop_once(client: &reqwest::Client, url: &str, mode: Mode) -> Vec<String> {
    let answer = client
        .post(format!("{url}/v1/queues/mixed/pop?{}", mode.query()))
        .send()
        .await
        .unwrap();
    let status = answer.status().as_u16();
    if status == 204 {
        return Vec::new();
    }
    assert_eq!(status, 200, "{mode:?} pop answered {status}");
    let mut got = Vec::new();
    if mode.many() {
        let array: Vec<serde_json::Value> = answer.json().await.unwrap();
        let limit = if mode.leased() { 5 } else { 7 };
        assert!(
            !array.is_empty() && array.len() <= limit,
            "{mode:?}: 1 to max items"
        );
        for entry in array {
            // One shape whatever the lease: the receipt is null without one.
            let item = entry["item"].as_str().unwrap().to_string();
            let receipt = entry["receipt"].as_str().map(str::to_string);
            assert_eq!(receipt.is_some(), mode.leased(), "{entry}");
            got.push((BASE64.decode(item).unwrap(), receipt));
        }
    } else {
        let receipt = answer
            .headers()
            .get("hotq-receipt")
            .map(|r| r.to_str().unwrap().to_string());
        assert_eq!(
            receipt.is_some(),
            mode.leased(),
            "{mode:?}: a receipt iff leased"
        );
        got.push((answer.bytes().await.unwrap().to_vec(), receipt));
    }
    let mut items = Vec::new();
    for (item, receipt) in got {
        if let Some(receipt) = receipt {
            let acked = client
                .post(format!("{url}/v1/queues/mixed/ack/{receipt}"))
                .send()
                .await
                .unwrap();
            assert_eq!(acked.status(), 204, "an ack of a fresh lease succeeds");
        }
        items.push(String::from_utf8(item).unwrap());
    }
    items
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_fifty_six_pops_mixing_every_mode_lose_and_duplicate_nothing() {
    if !common::alone::here(
        module_path!(),
        "two_hundred_fifty_six_pops_mixing_every_mode_lose_and_duplicate_nothing",
    )
    .await
    {
        return;
    }
    const ITEMS: usize = 6_000;
    const WORKERS: usize = 256;
    let daemon = Daemon::start(|_| {}).await;
    let client = http();
    let items: Vec<String> = (0..ITEMS).map(|n| format!("mixed-{n:05}")).collect();
    // Half before the load, half while it runs: pops meet a non-empty
    // queue and an emptied one that fills again.
    let (first, second) = items.split_at(ITEMS / 2);
    let api = Client::new(&daemon.url);
    for chunk in first.chunks(BATCH) {
        api.push_batch("mixed", chunk).await;
    }

    let delivered: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let count = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for worker in 0..WORKERS {
        let mode = MODES[worker % MODES.len()];
        let (client, url) = (client.clone(), daemon.url.clone());
        let (delivered, count) = (delivered.clone(), count.clone());
        workers.push(tokio::spawn(async move {
            while count.load(Ordering::SeqCst) < ITEMS {
                let got = pop_once(&client, &url, mode).await;
                count.fetch_add(got.len(), Ordering::SeqCst);
                let mut delivered = delivered.lock().await;
                for item in got {
                    *delivered.entry(item).or_default() += 1;
                }
            }
        }));
    }
    for chunk in second.chunks(BATCH) {
        api.push_batch("mixed", chunk).await;
    }
    tokio::time::timeout(LOAD_BOUND, async {
        for worker in workers {
            worker.await.unwrap();
        }
    })
    .await
    .expect("the load finished within its bound");

    let delivered = Arc::try_unwrap(delivered).unwrap().into_inner();
    let twice: Vec<_> = delivered.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "delivered more than once: {twice:?}");
    let mut got: Vec<String> = delivered.into_keys().collect();
    got.sort();
    assert_eq!(got, items, "every item delivered");
    let stats = api.stats("mixed").await;
    assert_eq!(
        (stats.depth, stats.leased),
        (0, 0),
        "nothing left queued or leased: {stats}"
    );
    assert!(
        common::daemon::staged_pops(&daemon.metrics_url).await > 0.0,
        "the contended queue's pops went through its line"
    );
    daemon.stop().await;
}
