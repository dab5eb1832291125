//! A store write that stalls past a pop's hand-off wait while acks ride on
//! the pop (issue #35, defect 1). The pop gives up on the round that
//! claimed it and answers 503 `maybe_committed`; when the stalled round
//! then commits, nothing panics and no lock is left poisoned: every queue
//! serves again, `/healthz` says 503 `store_stalled` during the stall and
//! 200 after, and the acks the round carried applied exactly once.
//!
//! The stall is injected by a store wrapper whose writing commits wait at
//! a gate, as they would behind a slow fsync.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::client::Client;
use common::daemon::http;
use common::hooked::{CommitHook, Hooked};
use hotq::config::Config;
use hotq::store::StoreError;
use hotq::store::Transaction;
use hotq::store::embedded::{Durability, EmbeddedTxn};
use reqwest::StatusCode;
use tokio::sync::watch;

/// Longest any wait of this test may take.
const BOUND: Duration = Duration::from_secs(60);

/// Writing commits wait here while the gate is shut.
#[derive(Clone)]
struct Gate(Arc<GateState>);

struct GateState {
    shut: watch::Sender<bool>,
    /// Writing commits waiting at the gate now.
    waiting: AtomicUsize,
    /// When the first of them arrived, while any waits.
    since: parking_lot::Mutex<Option<Instant>>,
}

/// An embedded store whose writing commits wait at a [`Gate`].
type Stalling = Hooked<Gate>;

impl Gate {
    fn new() -> Gate {
        Gate(Arc::new(GateState {
            shut: watch::channel(false).0,
            waiting: AtomicUsize::new(0),
            since: parking_lot::Mutex::new(None),
        }))
    }

    fn shut(&self) {
        self.0.shut.send_replace(true);
    }

    fn open(&self) {
        self.0.shut.send_replace(false);
    }

    fn waiting(&self) -> usize {
        self.0.waiting.load(Ordering::SeqCst)
    }

    /// Waits while the gate is shut (bounded), as a commit behind a
    /// stalled fsync would.
    async fn pass(&self) {
        let gate = &self.0;
        let mut shut = gate.shut.subscribe();
        if !*shut.borrow() {
            return;
        }
        if gate.waiting.fetch_add(1, Ordering::SeqCst) == 0 {
            *gate.since.lock() = Some(Instant::now());
        }
        let _ = tokio::time::timeout(BOUND, shut.wait_for(|shut| !*shut)).await;
        if gate.waiting.fetch_sub(1, Ordering::SeqCst) == 1 {
            *gate.since.lock() = None;
        }
    }
}

impl CommitHook for Gate {
    async fn commit(&self, txn: &EmbeddedTxn, _set_keys: &[Vec<u8>]) -> Result<(), StoreError> {
        self.pass().await;
        txn.commit().await
    }

    fn write_under_way_for(&self) -> Option<Duration> {
        let since = *self.0.since.lock();
        since.map(|since| since.elapsed())
    }
}

/// The daemon on `store`: its API and metrics URLs.
async fn start(store: Stalling) -> (String, String) {
    let mut config = Config::default();
    // A pop gives up on its round's commit after 300 ms, and /healthz
    // reports a write stalled past 200 ms: the test's stall is short.
    config.staging.hand_off_wait_ms = 300;
    config.store_stall_ms = 200;
    let api = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let metrics = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let urls = (
        format!("http://{}", api.local_addr().unwrap()),
        format!("http://{}/metrics", metrics.local_addr().unwrap()),
    );
    let listeners = hotq::server::Listeners {
        api,
        metrics: Some(metrics),
        resp: None,
    };
    tokio::spawn(hotq::server::serve_on(
        store,
        config,
        listeners,
        std::future::pending(),
    ));
    urls
}

async fn health(url: &str) -> (StatusCode, serde_json::Value) {
    let response = http().get(format!("{url}/healthz")).send().await.unwrap();
    let status = response.status();
    (status, response.json().await.unwrap())
}

async fn pop_status(url: &str, queue: &str, query: &str) -> (StatusCode, serde_json::Value) {
    let response = http()
        .post(format!("{url}/v1/queues/{queue}/pop?{query}"))
        .send()
        .await
        .unwrap();
    let status = response.status();
    let body = response.bytes().await.unwrap();
    (status, serde_json::from_slice(&body).unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_stalled_past_the_hand_off_wait_takes_nothing_down() {
    // Alone in its process: `hotq_panics_total` counts every panic of the
    // process, other tests' failing assertions included.
    let name = "a_commit_stalled_past_the_hand_off_wait_takes_nothing_down";
    if !common::alone::here(module_path!(), name).await {
        return;
    }
    let (embedded, _dir) = common::embedded_store(Durability::Buffered);
    let store = Hooked {
        inner: embedded,
        hook: Gate::new(),
    };
    let (url, metrics_url) = start(store.clone()).await;
    let api = Client::new(&url);
    for item in ["r1", "r2", "r3"] {
        api.push("stalled", item).await;
    }
    let mut receipts = Vec::new();
    for _ in 0..3 {
        receipts.push(api.pop_leased("stalled", 600_000).await.unwrap().receipt);
    }
    // A long poll keeps the queue's fulfiller running, so the next pop
    // joins the line at once and its acks ride into the round.
    let waiting = tokio::spawn({
        let url = url.clone();
        async move { pop_status(&url, "stalled", "wait_ms=3000").await.0 }
    });
    common::eventually("the long poll waits in line", BOUND, || async {
        api.stats("stalled").await.waiting >= 1
    })
    .await;

    store.hook.shut();
    // The riding pop waits long enough (2 s) that its queue's round claims
    // it before its deadline even on a loaded machine; unclaimed, it would
    // ack alone, and that commit would wait at the shut gate.
    let ack = receipts.join(",");
    let riding = tokio::spawn({
        let url = url.clone();
        async move {
            pop_status(
                &url,
                "stalled",
                &format!("wait_ms=2000&lease_ms=600000&ack={ack}"),
            )
            .await
        }
    });
    common::eventually("the round's commit stalls", BOUND, || async {
        store.hook.waiting() >= 1
    })
    .await;
    common::eventually("/healthz reports the stall", BOUND, || async {
        let (status, body) = health(&url).await;
        status == StatusCode::SERVICE_UNAVAILABLE && body["error"]["code"] == "store_stalled"
    })
    .await;
    let (status, body) = riding.await.unwrap();
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["error"]["code"], "maybe_committed", "{body}");

    store.hook.open();
    assert_eq!(waiting.await.unwrap(), StatusCode::NO_CONTENT);
    common::eventually("/healthz is healthy again", BOUND, || async {
        health(&url).await.0 == StatusCode::OK
    })
    .await;
    // Every queue serves, this one and others, plain and leased.
    for queue in ["stalled", "other"] {
        api.push(queue, format!("after-{queue}")).await;
        assert_eq!(
            api.pop(queue, 5_000).await.unwrap(),
            format!("after-{queue}")
        );
        api.push(queue, "leased").await;
        let leased = api.pop_leased(queue, 600_000).await.unwrap();
        assert_eq!(
            api.ack(queue, &leased.receipt).await,
            StatusCode::NO_CONTENT
        );
    }
    // The stalled round committed the acks: each applied once, none twice.
    for receipt in &receipts {
        assert_eq!(api.ack("stalled", receipt).await, StatusCode::NOT_FOUND);
    }
    let stats = api.stats("stalled").await;
    assert_eq!(stats.depth, 0, "{stats}");
    assert_eq!(panics(&metrics_url).await, 0.0);
}

/// `hotq_panics_total`, which has no labels (and must be exported).
async fn panics(metrics_url: &str) -> f64 {
    let text = http().get(metrics_url).send().await.unwrap();
    let text = text.text().await.unwrap();
    let line = text
        .lines()
        .find(|line| line.starts_with("hotq_panics_total "))
        .expect("hotq_panics_total is exported");
    line.rsplit(' ').next().unwrap().parse().unwrap()
}
