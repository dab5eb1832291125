//! Fairness keys through the real daemon (issue #40): pushed over `/v1`
//! (`hotq-fair-key` on single and batch pushes, `fair_key` in a batch
//! element) and RESP (`PUSH … FAIR key`), popped over HTTP, served in
//! proportion to the queue's `fair_weights`, with each key's backlog in
//! the queue's stats; a malformed key refused with 400 `bad_fair_key`
//! (RESP: `ERR bad_fair_key`) and nothing written; the tags of drained
//! keys pruned by the daemon.
//!
//! The order is decided at push time (each item's place is its virtual
//! tag), so popping one at a time gives exact counts over every window.

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::common::client::Client;
use crate::common::daemon::{Daemon, http, metric_sum};
use crate::common::resp::{call, call_error, redis};

/// How long a pop of a queue known to hold items may wait (never reached).
const POP_WAIT_MS: u64 = 5_000;
/// How long the sampler may take to publish what a test waits for.
const SAMPLE_BOUND: std::time::Duration = std::time::Duration::from_secs(20);

/// Sets the FIFO queue's settings, answered 200.
async fn settings(daemon: &Daemon, queue: &str, change: Value) {
    let response = http()
        .put(format!("{}/v1/queues/{queue}/settings", daemon.url))
        .json(&change)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
}

/// Pushes `label:first` .. `label:first+count-1` in one batch, under the
/// header `hotq-fair-key: label`.
async fn push_batch_keyed(daemon: &Daemon, queue: &str, label: &str, count: usize) {
    let body: Vec<String> = (0..count)
        .map(|n| BASE64.encode(format!("{label}:{n}")))
        .collect();
    let response = http()
        .post(format!("{}/v1/queues/{queue}/items:batch", daemon.url))
        .header("hotq-fair-key", label)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
}

/// Pushes `label:0` .. one request each, under the header.
async fn push_one_by_one(daemon: &Daemon, queue: &str, label: &str, count: usize) {
    for n in 0..count {
        let response = http()
            .post(format!("{}/v1/queues/{queue}/items", daemon.url))
            .header("hotq-fair-key", label)
            .body(format!("{label}:{n}"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::CREATED);
    }
}

/// Pushes `label:0` .. in one batch whose elements name their key.
async fn push_batch_elements(daemon: &Daemon, queue: &str, label: &str, count: usize) {
    let body: Vec<Value> = (0..count)
        .map(|n| json!({"item": BASE64.encode(format!("{label}:{n}")), "fair_key": label}))
        .collect();
    let response = http()
        .post(format!("{}/v1/queues/{queue}/items:batch", daemon.url))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
}

/// The stats' `fair_backlog` as `(key, items)` pairs.
async fn backlog(daemon: &Daemon, queue: &str) -> Vec<(String, u64)> {
    let stats: Value = http()
        .get(format!("{}/v1/queues/{queue}", daemon.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    stats["fair_backlog"]
        .as_array()
        .unwrap_or_else(|| panic!("fair_backlog in {stats}"))
        .iter()
        .map(|row| {
            let key = row["key"].as_str().unwrap().to_string();
            (key, row["items"].as_u64().unwrap())
        })
        .collect()
}

fn rows(expected: &[(&str, u64)]) -> Vec<(String, u64)> {
    expected
        .iter()
        .map(|(key, items)| (key.to_string(), *items))
        .collect()
}

/// Pops `n` items over HTTP one at a time: their labels in pop order,
/// and each label's numbers in pop order.
async fn pop_labels(daemon: &Daemon, queue: &str, n: usize) -> (Vec<String>, Numbers) {
    let client = Client::new(&daemon.url);
    let mut labels = Vec::new();
    let mut numbers = Numbers::new();
    for _ in 0..n {
        let item = client.pop(queue, POP_WAIT_MS).await.expect("items left");
        let (label, number) = item.split_once(':').unwrap();
        numbers
            .entry(label.to_string())
            .or_default()
            .push(number.parse().unwrap());
        labels.push(label.to_string());
    }
    (labels, numbers)
}

type Numbers = BTreeMap<String, Vec<usize>>;

/// After `first`'s first item (at the head before the others came), each
/// unit of virtual time serves every key its weight's worth: the first
/// `1 + total * m` pops hold exactly `weight * m` of each key (plus the
/// head for `first`), for every `m` up to `rounds`; each key in push order.
fn assert_exact_shares(
    labels: &[String],
    numbers: &Numbers,
    weights: &[(&str, usize)],
    rounds: usize,
) {
    let (first, _) = weights[0];
    let total: usize = weights.iter().map(|(_, weight)| weight).sum();
    for m in 0..=rounds {
        let window = &labels[..1 + total * m];
        for (key, weight) in weights {
            let seen = window.iter().filter(|label| label == key).count();
            let expected = weight * m + usize::from(*key == first);
            assert_eq!(seen, expected, "{key} in the first {} pops", window.len());
        }
    }
    for (label, seen) in numbers {
        assert!(
            seen.windows(2).all(|w| w[0] < w[1]),
            "{label} out of push order: {seen:?}"
        );
    }
}

/// A noisy key (weight 1) pushes 300 items in one batch, then `a` (weight
/// 3, one push per item) and `b` (weight 2, a batch naming the key per
/// element) 60 each: pops over HTTP serve 1 : 3 : 2 exactly until `a`
/// runs out, FIFO within each key; the stats show each key's backlog.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_weighted_keys_share_exactly_over_http() {
    let daemon = Daemon::start(|_| {}).await;
    // 3.0: a weight written as a float is the integer (JSON Schema's rule).
    settings(
        &daemon,
        "tenants",
        json!({"fair_weights": {"a": 3.0, "b": 2}}),
    )
    .await;
    push_batch_keyed(&daemon, "tenants", "noisy", 300).await;
    push_one_by_one(&daemon, "tenants", "a", 60).await;
    push_batch_elements(&daemon, "tenants", "b", 60).await;
    assert_eq!(
        backlog(&daemon, "tenants").await,
        rows(&[("noisy", 300), ("a", 60), ("b", 60)])
    );
    let (labels, numbers) = pop_labels(&daemon, "tenants", 121).await;
    assert_exact_shares(&labels, &numbers, &[("noisy", 1), ("a", 3), ("b", 2)], 20);
    assert_eq!(
        backlog(&daemon, "tenants").await,
        rows(&[("noisy", 279), ("b", 20)])
    );
    // A queue without keys shows an empty backlog, a listing none.
    Client::new(&daemon.url).push("plain", "x").await;
    assert_eq!(backlog(&daemon, "plain").await, rows(&[]));
    daemon.stop().await;
}

/// RESP's `PUSH queue FAIR key …` places items as the header does: three
/// keys of weight 1 behind a noisy backlog are served round-robin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resp_push_takes_a_fairness_key() {
    let daemon = Daemon::start_resp(|_| {}).await;
    let mut con = redis(&daemon.redis_url()).await;
    let noisy: Vec<String> = (0..30).map(|n| format!("noisy:{n}")).collect();
    let mut words = vec!["PUSH", "q", "FAIR", "noisy", "ITEMS"];
    words.extend(noisy.iter().map(String::as_str));
    assert_eq!(call(&mut con, &words).await, redis::Value::Int(30));
    for key in ["a", "b"] {
        let items: Vec<String> = (0..5).map(|n| format!("{key}:{n}")).collect();
        let mut words = vec!["PUSH", "q", "FAIR", key];
        words.extend(items.iter().map(String::as_str));
        assert_eq!(call(&mut con, &words).await, redis::Value::Int(5));
    }
    assert_eq!(
        backlog(&daemon, "q").await,
        rows(&[("noisy", 30), ("a", 5), ("b", 5)])
    );
    let (labels, numbers) = pop_labels(&daemon, "q", 16).await;
    assert_exact_shares(&labels, &numbers, &[("noisy", 1), ("a", 1), ("b", 1)], 5);
    daemon.stop().await;
}

/// A malformed key is refused before anything is written: over `/v1`
/// (header or batch element: empty, too long, out of the alphabet, not
/// text) with 400 `bad_fair_key`, over RESP with `ERR bad_fair_key`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_fairness_key_is_refused() {
    let daemon = Daemon::start_resp(|_| {}).await;
    let too_long = "k".repeat(129);
    for bad in ["", "two words", "tenant#1", too_long.as_str()] {
        let response = http()
            .post(format!("{}/v1/queues/q/items", daemon.url))
            .header("hotq-fair-key", bad)
            .body("x")
            .send()
            .await
            .unwrap();
        assert_refused(response, bad).await;
        let element = json!([{"item": BASE64.encode("x"), "fair_key": bad}]);
        let response = http()
            .post(format!("{}/v1/queues/q/items:batch", daemon.url))
            .json(&element)
            .send()
            .await
            .unwrap();
        assert_refused(response, bad).await;
    }
    let not_text = reqwest::header::HeaderValue::from_bytes(b"caf\xe9").unwrap();
    let response = http()
        .post(format!("{}/v1/queues/q/items:batch", daemon.url))
        .header("hotq-fair-key", not_text)
        .json(&json!([BASE64.encode("x")]))
        .send()
        .await
        .unwrap();
    assert_refused(response, "caf\\xe9").await;
    let mut con = redis(&daemon.redis_url()).await;
    let refused = call_error(&mut con, &["PUSH", "q", "FAIR", "two words", "x"]).await;
    assert!(refused.starts_with("ERR bad_fair_key"), "{refused}");
    assert_eq!(Client::new(&daemon.url).depth("q").await, 0);
    daemon.stop().await;
}

async fn assert_refused(response: reqwest::Response, bad: &str) {
    assert_eq!(response.status(), StatusCode::BAD_REQUEST, "key {bad:?}");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "bad_fair_key", "key {bad:?}: {body}");
}

/// The OpenAPI spec names the header on both pushes with its form and
/// length, the batch element's `fair_key`, and `fair_backlog` in the stats.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_spec_states_the_fairness_key_and_its_limits() {
    let daemon = Daemon::start(|_| {}).await;
    let spec: Value = http()
        .get(format!("{}/v1/openapi.json", daemon.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let pattern = "^[A-Za-z0-9._:@/-]{1,128}$";
    for path in ["/v1/queues/{queue}/items", "/v1/queues/{queue}/items:batch"] {
        let header = spec["paths"][path]["post"]["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "hotq-fair-key")
            .unwrap_or_else(|| panic!("no hotq-fair-key on {path}"))
            .clone();
        assert_eq!(header["in"], "header", "{path}");
        assert_eq!(header["schema"]["pattern"], pattern, "{path}");
    }
    let batch = &spec["paths"]["/v1/queues/{queue}/items:batch"]["post"]["requestBody"];
    let element = &batch["content"]["application/json"]["schema"]["items"]["anyOf"][1];
    assert_eq!(
        element["properties"]["fair_key"]["anyOf"][0]["pattern"],
        pattern
    );
    let stats = &spec["components"]["schemas"]["QueueStats"];
    assert!(
        stats["required"]
            .as_array()
            .unwrap()
            .contains(&json!("fair_backlog")),
        "{stats}"
    );
    daemon.stop().await;
}

/// The sampler publishes `hotq_fair_key_backlog` for a queue's keys, and
/// hides a key's line once its backlog is gone.
///
/// The exporter is the process's (its queue labels capped, as every test
/// daemon registers queues): the test runs alone in a child process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sampler_exports_each_key_s_backlog() {
    if !crate::common::alone::here(module_path!(), "the_sampler_exports_each_key_s_backlog").await {
        return;
    }
    let daemon = Daemon::start(|config| config.metrics_sample_interval_ms = 20).await;
    push_batch_keyed(&daemon, "fair-gauge", "noisy", 5).await;
    push_batch_keyed(&daemon, "fair-gauge", "quiet", 2).await;
    let gauge = |key: &'static str| {
        let url = daemon.metrics_url.clone();
        async move {
            let labels = ["queue=\"fair-gauge\"".to_string(), format!("key=\"{key}\"")];
            let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
            metric_sum(&url, "hotq_fair_key_backlog", &labels).await
        }
    };
    let deadline = tokio::time::Instant::now() + SAMPLE_BOUND;
    while (gauge("noisy").await, gauge("quiet").await) != (5.0, 2.0) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not exported in time"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    pop_labels(&daemon, "fair-gauge", 7).await;
    while (gauge("noisy").await, gauge("quiet").await) != (0.0, 0.0) {
        assert!(tokio::time::Instant::now() < deadline, "not hidden in time");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    daemon.stop().await;
}

/// The daemon prunes the tags of drained keys (the sampler's rotation):
/// 50 short-lived keys of one item each, behind a `busy` key of 100, all
/// popped (the first 52 pops: `busy:0`, then the 50 keys' items tied with
/// `busy:1`); their 50 tags go within the bound while `busy`'s stays, and
/// `busy` keeps its order to the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_prunes_the_tags_of_drained_keys() {
    let daemon = Daemon::start(|config| config.metrics_sample_interval_ms = 20).await;
    push_batch_keyed(&daemon, "fair-prune", "busy", 100).await;
    for key in 0..50 {
        push_one_by_one(&daemon, "fair-prune", &format!("k{key}"), 1).await;
    }
    let keys = hotq::keys::QueueKeys::new(&hotq::keys::QueueName::new("fair-prune").unwrap());
    let tag_keys = || async {
        crate::common::scan(&daemon.store, keys.fair_tags_range())
            .await
            .iter()
            .filter_map(|row| keys.fair_key_of(&row.key))
            .collect::<Vec<String>>()
    };
    assert_eq!(tag_keys().await.len(), 51);
    let (_, numbers) = pop_labels(&daemon, "fair-prune", 52).await;
    assert_eq!(numbers.len(), 51, "every short key popped: {numbers:?}");
    crate::common::eventually("the drained keys' tags pruned", SAMPLE_BOUND, || async {
        tag_keys().await == vec!["busy".to_string()]
    })
    .await;
    let (labels, numbers) = pop_labels(&daemon, "fair-prune", 98).await;
    assert!(labels.iter().all(|label| label == "busy"), "{labels:?}");
    assert_eq!(numbers["busy"], (2..100).collect::<Vec<usize>>());
    daemon.stop().await;
}

/// Leased `max` pops over HTTP take the fair order too (what a round or a
/// direct pop takes is the queue's first items): a noisy backlog, then
/// two quiet keys; the first 7 leased hold noisy 3, `a` 2, `b` 2; acked,
/// the next 6 noisy 2, `a` 2, `b` 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leased_batch_pops_take_the_fair_order() {
    let daemon = Daemon::start(|_| {}).await;
    push_batch_keyed(&daemon, "leased", "noisy", 30).await;
    push_batch_keyed(&daemon, "leased", "a", 4).await;
    push_batch_keyed(&daemon, "leased", "b", 4).await;
    for (max, expected) in [(7, (3, 2, 2)), (6, (2, 2, 2))] {
        let popped: Vec<Value> = http()
            .post(format!(
                "{}/v1/queues/leased/pop?max={max}&lease_ms=60000",
                daemon.url
            ))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(popped.len(), max);
        let labels: Vec<String> = popped
            .iter()
            .map(|item| {
                let bytes = BASE64.decode(item["item"].as_str().unwrap()).unwrap();
                let text = String::from_utf8(bytes).unwrap();
                text.split_once(':').unwrap().0.to_string()
            })
            .collect();
        let count = |key: &str| labels.iter().filter(|label| *label == key).count();
        assert_eq!(
            (count("noisy"), count("a"), count("b")),
            expected,
            "{labels:?}"
        );
        let client = Client::new(&daemon.url);
        for item in &popped {
            let receipt = item["receipt"].as_str().unwrap();
            assert_eq!(client.ack("leased", receipt).await, StatusCode::NO_CONTENT);
        }
    }
    daemon.stop().await;
}

/// `hotq bench --scenario fair` in process, small: both runs (FIFO, then
/// fairness keys) drain the noisy backlog and pop every quiet item.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bench_scenario_runs_both_ways() {
    let args = hotq::bench::BenchArgs {
        scenario: hotq::bench::Scenario::Fair,
        items: 2_000,
        payload_bytes: 100,
        workers: vec![4],
        modes: Vec::new(),
        coordinators: vec![1],
        stored_requests: false,
        cycles: 0,
        url: None,
        resp_addr: None,
        token: None,
        data_dir: None,
        backend: hotq::bench::BenchBackend::Embedded,
        fdb_cluster_file: None,
        durability: hotq::store::embedded::Durability::Buffered,
        wait_ms: 200,
        // Generous: 2,000 pops take well under a second.
        deadline_s: 120,
        rate: 1_000,
        json: true,
        groups: 0,
    };
    assert_eq!(hotq::bench::run(args).await, Ok(0));
}
