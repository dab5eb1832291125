//! Pausing a queue over HTTP (issue #29): a paused queue takes pushes and
//! hands nothing out, whatever the pop (plain, leased, several items,
//! recipe, staged in the line, stored requests, long-poll, priority
//! either end); leases in flight still settle; long-polls waiting on it
//! are served once it resumes; and two daemons on one store both obey a
//! pause made through either.

use crate::common;

use std::time::Duration;

use common::client::Client;
use common::daemon::{Daemon, http};
use common::eventually;
use reqwest::StatusCode;
use serde_json::Value;

/// Generous bound on anything awaited.
const BOUND: Duration = Duration::from_secs(60);

async fn post(url: &str, path: &str) -> (StatusCode, Value) {
    let response = http().post(format!("{url}{path}")).send().await.unwrap();
    let status = response.status();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// A pop's status and body (JSON for 200: pops ask for JSON).
async fn pop(url: &str, path: &str) -> (StatusCode, Value) {
    let response = http()
        .post(format!("{url}{path}"))
        .header("accept", "application/json")
        .send()
        .await
        .unwrap();
    let status = response.status();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

async fn set_paused(url: &str, root: &str, queue: &str, paused: bool) {
    let action = if paused { "pause" } else { "resume" };
    let (status, body) = post(url, &format!("/v1/{root}/{queue}/{action}")).await;
    assert_eq!(status, StatusCode::OK, "{action}: {body}");
    assert_eq!(body["paused"], paused, "{action}: {body}");
}

/// Waits until daemon `url` has at least `n` pops of `queue` waiting.
async fn until_waiting(url: &str, queue: &str, n: i64) {
    eventually(&format!("{n} pops waiting on {queue}"), BOUND, || async {
        Client::new(url).stats(queue).await.waiting >= n
    })
    .await;
}

fn spawn_pop(url: &str, path: String) -> tokio::task::JoinHandle<(StatusCode, Value)> {
    let url = url.to_string();
    tokio::spawn(async move { pop(&url, &path).await })
}

const EVERY_FIFO_POP: [&str; 5] = [
    "pop",
    "pop?lease_ms=30000",
    "pop?max=3",
    "pop?path=direct",
    "pop?wait_ms=200",
];

/// Every kind of FIFO pop answers 204 on a paused queue holding items:
/// first with no fulfiller running (direct attempts), then with pops
/// standing in its line (the fulfiller's rounds answer them).
async fn nothing_comes_out(url: &str, queue: &str) {
    for pop_path in EVERY_FIFO_POP {
        let (status, body) = pop(url, &format!("/v1/queues/{queue}/{pop_path}")).await;
        assert_eq!(status, StatusCode::NO_CONTENT, "{pop_path}: {body}");
    }
    // A long-poll keeps the line (and its fulfiller) busy: the pops now
    // wait in line and the round, not a direct attempt, answers them.
    let long_poll = spawn_pop(url, format!("/v1/queues/{queue}/pop?wait_ms=60000"));
    until_waiting(url, queue, 1).await;
    for pop_path in EVERY_FIFO_POP {
        if pop_path.contains("direct") {
            continue;
        }
        let (status, body) = pop(url, &format!("/v1/queues/{queue}/{pop_path}")).await;
        assert_eq!(
            status,
            StatusCode::NO_CONTENT,
            "in line, {pop_path}: {body}"
        );
    }
    assert!(
        !long_poll.is_finished(),
        "the long-poll got an answer while paused"
    );
    long_poll.abort();
}

async fn paused_queue_hands_nothing_out(requests_in_memory: bool) {
    let daemon = Daemon::start(|config| {
        config.staging.requests_in_memory = requests_in_memory;
    })
    .await;
    let url = &daemon.url;
    for i in 0..3 {
        Client::new(url).push("jobs", format!("item-{i}")).await;
    }
    set_paused(url, "queues", "jobs", true).await;
    let stats = Client::new(url).stats("jobs").await;
    assert_eq!((stats.paused, stats.depth), (true, 3), "{stats}");

    nothing_comes_out(url, "jobs").await;
    // Pushes are taken while paused, and counted.
    Client::new(url).push("jobs", "pushed-while-paused").await;
    assert_eq!(Client::new(url).stats("jobs").await.depth, 4);

    // A long-poll waiting on the paused queue is served on resume.
    let waiting = spawn_pop(url, "/v1/queues/jobs/pop?wait_ms=60000".into());
    until_waiting(url, "jobs", 1).await;
    set_paused(url, "queues", "jobs", false).await;
    let (status, body) = tokio::time::timeout(BOUND, waiting).await.unwrap().unwrap();
    assert_eq!(status, StatusCode::OK, "the long-poll after resume: {body}");
    assert!(!Client::new(url).stats("jobs").await.paused);
    // Everything else comes out too, each item once.
    let (status, body) = pop(url, "/v1/queues/jobs/pop?max=10").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body.as_array().unwrap().len(), 3, "{body}");
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_paused_queue_hands_nothing_out_until_it_resumes() {
    paused_queue_hands_nothing_out(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_paused_queue_hands_nothing_out_with_stored_requests() {
    paused_queue_hands_nothing_out(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_paused_priority_queue_hands_nothing_out_at_either_end() {
    let daemon = Daemon::start(|_| {}).await;
    let url = &daemon.url;
    for priority in [1, 5, 9] {
        let response = http()
            .post(format!("{url}/v1/pqueues/tasks/items?priority={priority}"))
            .body(format!("p{priority}"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::CREATED);
    }
    set_paused(url, "pqueues", "tasks", true).await;
    for pop_path in [
        "pop?end=min",
        "pop?end=max",
        "pop?end=max&lease_ms=5000",
        "pop?end=min&max=3&wait_ms=200",
    ] {
        let (status, body) = pop(url, &format!("/v1/pqueues/tasks/{pop_path}")).await;
        assert_eq!(status, StatusCode::NO_CONTENT, "{pop_path}: {body}");
    }
    let stats: Value = http()
        .get(format!("{url}/v1/pqueues/tasks"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        (stats["paused"].clone(), stats["depth"].clone()),
        (Value::Bool(true), 3.into())
    );
    let waiting = spawn_pop(url, "/v1/pqueues/tasks/pop?end=max&wait_ms=60000".into());
    eventually("the priority long-poll waits", BOUND, || async {
        let stats: Value = http()
            .get(format!("{url}/v1/pqueues/tasks"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        stats["waiting"].as_i64().unwrap() >= 1
    })
    .await;
    set_paused(url, "pqueues", "tasks", false).await;
    let (status, body) = tokio::time::timeout(BOUND, waiting).await.unwrap().unwrap();
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body[0]["item"], "cDk=",
        "the highest priority (p9) first: {body}"
    );
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn leases_in_flight_settle_while_paused() {
    let daemon = Daemon::start(|_| {}).await;
    let url = &daemon.url;
    for payload in ["acked", "nacked", "extended"] {
        Client::new(url).push("work", payload).await;
    }
    let (status, leased) = pop(url, "/v1/queues/work/pop?max=3&lease_ms=60000").await;
    assert_eq!(status, StatusCode::OK);
    let receipt = |i: usize| leased[i]["receipt"].as_str().unwrap().to_string();
    set_paused(url, "queues", "work", true).await;

    let (status, body) = post(url, &format!("/v1/queues/work/ack/{}", receipt(0))).await;
    assert!(status.is_success(), "ack while paused: {status} {body}");
    let (status, body) = post(
        url,
        &format!("/v1/queues/work/extend/{}?lease_ms=90000", receipt(2)),
    )
    .await;
    assert!(status.is_success(), "extend while paused: {status} {body}");
    let (status, body) = post(url, &format!("/v1/queues/work/nack/{}", receipt(1))).await;
    assert!(status.is_success(), "nack while paused: {status} {body}");
    let stats = Client::new(url).stats("work").await;
    assert_eq!((stats.depth, stats.leased), (1, 1), "{stats}");
    // The nacked item is back, and stays in while paused.
    let (status, _) = pop(url, "/v1/queues/work/pop?lease_ms=1000").await;
    assert_eq!(status, StatusCode::NO_CONTENT);

    set_paused(url, "queues", "work", false).await;
    let (status, body) = pop(url, "/v1/queues/work/pop").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body[0]["item"], "bmFja2Vk", "the nacked item: {body}");
    daemon.stop().await;
}

/// Acks riding on pops of a paused queue settle though the pops take
/// nothing: on a pop that answers at once (direct) and on one that waits
/// in the line until its wait ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn acks_riding_on_pops_settle_while_paused() {
    let daemon = Daemon::start(|_| {}).await;
    let url = &daemon.url;
    for payload in ["one", "two", "three"] {
        Client::new(url).push("ride", payload).await;
    }
    let (status, leased) = pop(url, "/v1/queues/ride/pop?max=2&lease_ms=60000").await;
    assert_eq!(status, StatusCode::OK);
    let receipt = |i: usize| leased[i]["receipt"].as_str().unwrap().to_string();
    set_paused(url, "queues", "ride", true).await;
    for (i, wait_ms) in [(0, 0), (1, 300)] {
        let answer = http()
            .post(format!(
                "{url}/v1/queues/ride/pop?lease_ms=60000&wait_ms={wait_ms}&ack={}",
                receipt(i)
            ))
            .send()
            .await
            .unwrap();
        assert_eq!(
            answer.status(),
            StatusCode::NO_CONTENT,
            "paused: nothing out"
        );
        assert_eq!(answer.headers()["hotq-acked"], "acked", "wait_ms={wait_ms}");
    }
    let stats = Client::new(url).stats("ride").await;
    assert_eq!((stats.depth, stats.leased), (1, 0), "{stats}");
    daemon.stop().await;
}

/// Two daemons on one store: a pause made through one holds on the other
/// (direct pops and long-polls in both lines), and a resume made through
/// the other serves the long-polls waiting in both.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_daemons_on_one_store_both_obey() {
    let a = Daemon::start(|_| {}).await;
    let b = Daemon::start_on(a.store.clone(), |_| {}).await;
    Client::new(&a.url).push("shared", "first").await;
    set_paused(&a.url, "queues", "shared", true).await;
    assert!(Client::new(&b.url).stats("shared").await.paused);
    nothing_comes_out(&b.url, "shared").await;
    nothing_comes_out(&a.url, "shared").await;

    // Long-polls waiting in both daemons' lines, then items pushed through
    // both: none is handed out.
    let on_a = spawn_pop(&a.url, "/v1/queues/shared/pop?wait_ms=60000".into());
    let on_b = spawn_pop(&b.url, "/v1/queues/shared/pop?wait_ms=60000".into());
    until_waiting(&a.url, "shared", 1).await;
    until_waiting(&b.url, "shared", 1).await;
    Client::new(&a.url).push("shared", "second").await;
    Client::new(&b.url).push("shared", "third").await;
    let (status, _) = pop(&b.url, "/v1/queues/shared/pop?wait_ms=100").await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(Client::new(&a.url).stats("shared").await.depth, 3);
    assert!(
        !on_a.is_finished() && !on_b.is_finished(),
        "a long-poll was answered while paused"
    );

    set_paused(&b.url, "queues", "shared", false).await;
    let mut got = Vec::new();
    for waiting in [on_a, on_b] {
        let (status, body) = tokio::time::timeout(BOUND, waiting).await.unwrap().unwrap();
        assert_eq!(status, StatusCode::OK, "a long-poll after resume: {body}");
        got.push(body[0]["item"].as_str().unwrap().to_string());
    }
    got.sort();
    got.dedup();
    assert_eq!(got.len(), 2, "each long-poll got its own item");
    assert_eq!(Client::new(&a.url).stats("shared").await.depth, 1);
    b.stop().await;
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pause_is_a_setting_and_refuses_bad_values() {
    let daemon = Daemon::start(|_| {}).await;
    let url = &daemon.url;
    let put = |body: &'static str| {
        let url = url.clone();
        async move {
            let response = http()
                .put(format!("{url}/v1/queues/cfg/settings"))
                .body(body)
                .send()
                .await
                .unwrap();
            (response.status(), response.json::<Value>().await.unwrap())
        }
    };
    let (status, body) = put(r#"{"paused": "yes"}"#).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"]["code"], "invalid_settings", "{body}");
    let (status, body) = put(r#"{"paused": true}"#).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["settings"]["paused"], true, "{body}");
    assert!(Client::new(url).stats("cfg").await.paused);
    // Pausing twice is harmless; resume returns it to the default.
    set_paused(url, "queues", "cfg", true).await;
    set_paused(url, "queues", "cfg", false).await;
    let (status, body) = put("{}").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["stored"], serde_json::json!({}), "{body}");
    daemon.stop().await;
}
