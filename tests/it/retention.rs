//! Retention over the real daemon's HTTP API (and RESP's `PUSH … RETENTION`):
//! a queue's `retention_ms` setting or a push's `hotq-retention-ms` drops
//! items older than their retention whether visible, delayed, waiting
//! behind a group head or leased past it; a popped item is never dropped
//! afterwards; each drop is counted in the queue's stats and in
//! `hotq_expired_items_total`; a queue without retention keeps everything;
//! no expiry entry is left in the due index once the items are gone.
//!
//! No sleep stands for time passing: each test waits for the event (the
//! stats' `expired` count), polled with a generous bound, and compares
//! against marker items that share the expiry it waits for.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use hotq::keys::{DueWhat, due_entry, due_range};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::common;
use crate::common::daemon::{Daemon, http};
use crate::common::resp::{call, redis};

/// How long an expiry may take to be seen (far above the timer's lateness).
const EXPIRY_BOUND: Duration = Duration::from_secs(20);
/// A retention short enough for a test, long enough to pop within it.
const SHORT_MS: u64 = 300;
const HOUR_MS: u64 = 3_600_000;

struct Api {
    url: String,
}

impl Api {
    fn of(daemon: &Daemon) -> Api {
        Api {
            url: daemon.url.clone(),
        }
    }

    async fn settings(&self, kind: &str, queue: &str, change: Value) -> (StatusCode, Value) {
        let response = http()
            .put(format!("{}/v1/{kind}/{queue}/settings", self.url))
            .json(&change)
            .send()
            .await
            .unwrap();
        (
            response.status(),
            response.json().await.unwrap_or(Value::Null),
        )
    }

    /// Pushes `items` (one commit) with `query` and an optional retention header.
    async fn push(&self, queue: &str, query: &str, retention_ms: Option<u64>, items: &[&str]) {
        let body: Vec<String> = items.iter().map(|item| BASE64.encode(item)).collect();
        let mut request = http()
            .post(format!(
                "{}/v1/queues/{queue}/items:batch?{query}",
                self.url
            ))
            .json(&body);
        if let Some(ms) = retention_ms {
            request = request.header("hotq-retention-ms", ms.to_string());
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), StatusCode::CREATED, "push to {queue}");
    }

    async fn stats(&self, kind: &str, queue: &str) -> Value {
        let response = http()
            .get(format!("{}/v1/{kind}/{queue}", self.url))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        response.json().await.unwrap()
    }

    /// Waits until `queue`'s stats count `expired` drops.
    async fn await_expired(&self, kind: &str, queue: &str, expired: i64) -> Value {
        let deadline = tokio::time::Instant::now() + EXPIRY_BOUND;
        loop {
            let stats = self.stats(kind, queue).await;
            if stats["expired"] == json!(expired) {
                return stats;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{queue}: {expired} expired not seen within {EXPIRY_BOUND:?}: {stats}"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// A pop of `queue` (`query` adds `lease_ms`, …): the body and the
    /// receipt, or None on 204.
    async fn pop(&self, queue: &str, query: &str) -> Option<(String, Option<String>)> {
        let response = http()
            .post(format!("{}/v1/queues/{queue}/pop?{query}", self.url))
            .send()
            .await
            .unwrap();
        if response.status() == StatusCode::NO_CONTENT {
            return None;
        }
        assert_eq!(response.status(), StatusCode::OK);
        let receipt = response
            .headers()
            .get("hotq-receipt")
            .map(|value| value.to_str().unwrap().to_string());
        Some((response.text().await.unwrap(), receipt))
    }

    async fn post(&self, path: &str) -> (StatusCode, Value) {
        let response = http()
            .post(format!("{}{path}", self.url))
            .send()
            .await
            .unwrap();
        (
            response.status(),
            response.json().await.unwrap_or(Value::Null),
        )
    }
}

/// The due index's expiry entries of `queue`, of either kind.
async fn expiry_entries(daemon: &Daemon, queue: &str) -> usize {
    common::scan(&daemon.store, due_range())
        .await
        .iter()
        .filter_map(|row| due_entry(&row.key))
        .filter(|entry| entry.what == DueWhat::Expire && entry.queue.as_str() == queue)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn visible_items_expire_a_popped_one_does_not_and_a_queue_without_retention_keeps_all() {
    let daemon = Daemon::start(|_| {}).await;
    let api = Api::of(&daemon);
    let (status, answer) = api
        .settings("queues", "short", json!({"retention_ms": SHORT_MS}))
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["settings"]["retention_ms"], json!(SHORT_MS));
    api.push("short", "", None, &["a", "b", "c"]).await;
    api.push("plain", "", None, &["x", "y"]).await;
    // Taken within its retention: delivered, never expired afterwards.
    assert_eq!(api.pop("short", "").await.unwrap().0, "a");
    let stats = api.await_expired("queues", "short", 2).await;
    assert_eq!(stats["depth"], json!(0), "{stats}");
    assert_eq!(api.pop("short", "").await, None);
    // Pushed in the same moment, without retention: all there.
    let plain = api.stats("queues", "plain").await;
    assert_eq!(
        (plain["depth"].clone(), plain["expired"].clone()),
        (json!(2), json!(0))
    );
    assert_eq!(
        expiry_entries(&daemon, "short").await,
        0,
        "no entry left behind"
    );
    assert_eq!(expiry_entries(&daemon, "plain").await, 0, "none written");
    // Cleared: later pushes are kept (the marker of the same moment expires).
    api.settings("queues", "short", json!({"retention_ms": null}))
        .await;
    api.push("short", "", None, &["kept"]).await;
    api.push("short", "", Some(SHORT_MS), &["marker"]).await;
    api.await_expired("queues", "short", 3).await;
    assert_eq!(api.pop("short", "").await.unwrap().0, "kept");
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_pop_path_takes_the_expiry_entry_with_the_item() {
    let daemon = Daemon::start(|_| {}).await;
    let api = Api::of(&daemon);
    // A direct pop, a leased pop (acked), and a waiting pop served by the
    // fulfiller's round: each clears its item's entry in its own commit.
    api.push("taken", "", Some(HOUR_MS), &["direct", "leased"])
        .await;
    assert_eq!(expiry_entries(&daemon, "taken").await, 2);
    assert_eq!(api.pop("taken", "").await.unwrap().0, "direct");
    let (body, receipt) = api
        .pop("taken", &format!("lease_ms={HOUR_MS}"))
        .await
        .unwrap();
    assert_eq!(body, "leased");
    assert_eq!(expiry_entries(&daemon, "taken").await, 0);
    let (status, _) = api
        .post(&format!("/v1/queues/taken/ack/{}", receipt.unwrap()))
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let waiting = {
        let api = Api::of(&daemon);
        tokio::spawn(async move { api.pop("taken", "wait_ms=30000").await })
    };
    common::eventually("the pop waits", EXPIRY_BOUND, || async {
        api.stats("queues", "taken").await["waiting"] == json!(1)
    })
    .await;
    api.push("taken", "", Some(HOUR_MS), &["served"]).await;
    assert_eq!(waiting.await.unwrap().unwrap().0, "served");
    assert_eq!(expiry_entries(&daemon, "taken").await, 0);
    assert_eq!(api.stats("queues", "taken").await["expired"], json!(0));
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delayed_item_expires_before_it_is_revealed() {
    let daemon = Daemon::start(|_| {}).await;
    let api = Api::of(&daemon);
    api.push(
        "later",
        &format!("delay_ms={HOUR_MS}"),
        Some(SHORT_MS),
        &["d"],
    )
    .await;
    assert_eq!(api.stats("queues", "later").await["delayed"], json!(1));
    let stats = api.await_expired("queues", "later", 1).await;
    assert_eq!(
        (stats["delayed"].clone(), stats["depth"].clone()),
        (json!(0), json!(0))
    );
    assert_eq!(expiry_entries(&daemon, "later").await, 0);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_head_or_a_waiting_item_expiring_moves_the_group_on() {
    let daemon = Daemon::start(|_| {}).await;
    let api = Api::of(&daemon);
    // The head expires: the next item of the group is served.
    api.push("g", "group=one", Some(SHORT_MS), &["head"]).await;
    api.push("g", "group=one", None, &["next"]).await;
    assert_eq!(api.stats("queues", "g").await["grouped"], json!(1));
    api.await_expired("queues", "g", 1).await;
    assert_eq!(api.pop("g", "").await.unwrap().0, "next");
    // A waiting item expires behind a leased head: the one after it is
    // the next head once the head is acked.
    api.push("g", "group=two", None, &["leased-head"]).await;
    let (body, receipt) = api.pop("g", &format!("lease_ms={HOUR_MS}")).await.unwrap();
    assert_eq!(body, "leased-head");
    api.push("g", "group=two", Some(SHORT_MS), &["waits"]).await;
    api.push("g", "group=two", None, &["after"]).await;
    let stats = api.await_expired("queues", "g", 2).await;
    assert_eq!(stats["grouped"], json!(1), "{stats}");
    let (status, _) = api
        .post(&format!("/v1/queues/g/ack/{}", receipt.unwrap()))
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(api.pop("g", "").await.unwrap().0, "after");
    assert_eq!(api.pop("g", "").await, None);
    assert_eq!(expiry_entries(&daemon, "g").await, 0);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_ending_past_retention_drops_the_item_instead_of_redelivering_it() {
    let daemon = Daemon::start(|_| {}).await;
    let api = Api::of(&daemon);
    // The lease (1 s) outlives the retention: its expiry drops the item.
    api.push("l", "", Some(SHORT_MS), &["leased"]).await;
    let (body, _) = api.pop("l", "lease_ms=1000").await.unwrap();
    assert_eq!(body, "leased");
    let stats = api.await_expired("queues", "l", 1).await;
    assert_eq!(
        (stats["leased"].clone(), stats["depth"].clone()),
        (json!(0), json!(0))
    );
    assert_eq!(api.pop("l", "").await, None, "not redelivered");
    // A nack past the retention drops it too, and says so. The marker,
    // pushed in the same commit, tells when the retention has passed.
    api.push("l", "", Some(SHORT_MS), &["nacked", "marker"])
        .await;
    let (body, receipt) = api.pop("l", &format!("lease_ms={HOUR_MS}")).await.unwrap();
    assert_eq!(body, "nacked");
    api.await_expired("queues", "l", 2).await;
    let (status, answer) = api
        .post(&format!("/v1/queues/l/nack/{}", receipt.unwrap()))
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["outcome"], json!("expired"));
    let stats = api.stats("queues", "l").await;
    assert_eq!(
        (stats["expired"].clone(), stats["depth"].clone()),
        (json!(3), json!(0))
    );
    assert_eq!(expiry_entries(&daemon, "l").await, 0);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_s_retention_overrides_its_queue_s() {
    let daemon = Daemon::start(|_| {}).await;
    let api = Api::of(&daemon);
    api.settings("queues", "long", json!({"retention_ms": HOUR_MS}))
        .await;
    api.push("long", "", Some(SHORT_MS), &["short"]).await;
    api.push("long", "", None, &["kept"]).await;
    api.await_expired("queues", "long", 1).await;
    assert_eq!(api.pop("long", "").await.unwrap().0, "kept");
    api.settings("queues", "brief", json!({"retention_ms": SHORT_MS}))
        .await;
    api.push("brief", "", Some(HOUR_MS), &["kept"]).await;
    api.push("brief", "", None, &["marker"]).await;
    api.await_expired("queues", "brief", 1).await;
    assert_eq!(api.pop("brief", "").await.unwrap().0, "kept");
    // RESP's PUSH takes the same option.
    let daemon_resp = Daemon::start_resp(|_| {}).await;
    let resp_api = Api::of(&daemon_resp);
    let mut con = redis(&daemon_resp.redis_url()).await;
    let pushed = call(&mut con, &["PUSH", "r", "RETENTION", "300", "a", "b"]).await;
    assert_eq!(pushed, redis::Value::Int(2));
    resp_api.await_expired("queues", "r", 2).await;
    daemon_resp.stop().await;
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn priority_items_expire_at_every_priority() {
    let daemon = Daemon::start(|_| {}).await;
    let api = Api::of(&daemon);
    api.settings("pqueues", "pq", json!({"retention_ms": SHORT_MS}))
        .await;
    for priority in [1, 5, 9] {
        let response = http()
            .post(format!(
                "{}/v1/pqueues/pq/items?priority={priority}",
                api.url
            ))
            .body(format!("p{priority}"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::CREATED);
    }
    let stats = api.await_expired("pqueues", "pq", 3).await;
    assert_eq!(stats["depth"], json!(0), "{stats}");
    assert_eq!(expiry_entries(&daemon, "pq").await, 0);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_retentions_are_refused_with_clear_errors() {
    let daemon = Daemon::start(|_| {}).await;
    let api = Api::of(&daemon);
    for bad in [
        json!(0),
        json!(-5),
        json!("1s"),
        json!(366u64 * 24 * HOUR_MS),
    ] {
        let (status, answer) = api
            .settings("queues", "q", json!({"retention_ms": bad}))
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains("retention_ms"), "{message}");
    }
    for bad in ["0", "soon", "31622400001"] {
        let response = http()
            .post(format!("{}/v1/queues/q/items", api.url))
            .header("hotq-retention-ms", bad)
            .body("x")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{bad}");
        let answer: Value = response.json().await.unwrap();
        assert_eq!(answer["error"]["code"], json!("bad_parameter"), "{answer}");
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .contains("hotq-retention-ms")
        );
    }
    let stats = api.stats("queues", "q").await;
    assert_eq!(stats["depth"], json!(0), "nothing was written");
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_items_are_counted_in_the_metric() {
    if !common::alone::here(module_path!(), "expired_items_are_counted_in_the_metric").await {
        return;
    }
    let daemon = Daemon::start(|_| {}).await;
    let api = Api::of(&daemon);
    let metric = || {
        common::daemon::metric_sum(
            &daemon.metrics_url,
            "hotq_expired_items_total",
            &["queue=\"counted\""],
        )
    };
    api.push("counted", "", None, &["warm"]).await;
    assert_eq!(
        metric().await,
        0.0,
        "registered at 0 once the queue is used"
    );
    api.push("counted", "", Some(SHORT_MS), &["a", "b"]).await;
    api.push(
        "counted",
        &format!("delay_ms={HOUR_MS}"),
        Some(SHORT_MS),
        &["d"],
    )
    .await;
    api.await_expired("queues", "counted", 3).await;
    assert_eq!(metric().await, 3.0);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_timer_drops_a_delayed_item_once_and_reveals_nothing() {
    // A timer that looks late (a daemon was down) finds both the item's
    // expiry entry and, later in the index, its reveal: the expiry drops
    // it; the reveal's row, read in the same pass, must not bring it back.
    use hotq::keys::{QueueKeys, QueueName};
    use hotq::lease::DeliveryPolicy;
    use hotq::queue::dedup::{PushItem, push_with};
    use hotq::queue::settings::Defaults;
    let (store, _dir) = common::embedded_store(hotq::store::embedded::Durability::Buffered);
    let keys = QueueKeys::new(&QueueName::new("late").unwrap());
    let item = PushItem {
        payload: b"d".to_vec(),
        dedup_id: None,
        group: None,
        fair_key: None,
    };
    let pushed = push_with(
        &store,
        &keys,
        &[item],
        Some(1_000),
        Some(SHORT_MS),
        &Defaults::default(),
    )
    .await
    .unwrap();
    let visible_at_ms = pushed.visible_at_ms.unwrap();
    assert!(pushed.expires_at_ms.unwrap() < visible_at_ms);
    let swept = hotq::due::sweep(&store, &DeliveryPolicy::default(), visible_at_ms + 1_000)
        .await
        .unwrap();
    assert_eq!(swept.revealed, 0, "{swept:?}");
    assert_eq!(swept.expired.values().sum::<usize>(), 1, "{swept:?}");
    let counter = |key: Vec<u8>| {
        let store = store.clone();
        async move {
            use hotq::store::{Read, Store, Transaction};
            let txn = store.begin().unwrap();
            hotq::store::decode_counter(txn.get(&key, Read::Snapshot).await.unwrap().as_deref())
        }
    };
    assert_eq!(counter(keys.depth()).await, 0);
    assert_eq!(counter(keys.delayed_count()).await, 0);
    assert_eq!(counter(keys.expired_count()).await, 1);
    assert!(
        common::scan(&store, due_range()).await.is_empty(),
        "nothing left due"
    );
}
