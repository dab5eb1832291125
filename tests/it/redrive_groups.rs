//! Message groups through dead-lettering and redrive, over HTTP and the SQS
//! API against the real daemon (issue #35, defects 3 and 4): grouped items
//! dead-lettered and redriven all come back, in group order, one out per
//! group, behind whatever of their group is already there; grouped items
//! pushed straight into a dead-letter queue (`q.dead`, or one named by a
//! setting) come back whole; console deletes and purges after a partial
//! redrive leave no group stranded; new pushes to the groups still flow.

use crate::common;

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use common::client::Client;
use common::daemon::{Daemon, get_json, http};
use reqwest::StatusCode;
use serde_json::{Value, json};

/// A lease longer than any test: an item popped stays out until settled.
const LEASE_MS: u64 = 600_000;

fn header(response: &reqwest::Response, name: &str) -> Option<String> {
    response
        .headers()
        .get(name)
        .map(|value| value.to_str().unwrap().to_string())
}

/// Pushes `body` to `queue` in `group`.
async fn push_grouped(url: &str, queue: &str, group: &str, body: &str) {
    let response = http()
        .post(format!("{url}/v1/queues/{queue}/items?group={group}"))
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED, "push to {queue}");
}

/// Pushes `(group, body)` pairs to `queue` in one batch, in order.
async fn push_batch_grouped(url: &str, queue: &str, items: &[(String, String)]) {
    let batch: Vec<Value> = items
        .iter()
        .map(|(group, body)| json!({"item": BASE64.encode(body), "group": group}))
        .collect();
    let response = http()
        .post(format!("{url}/v1/queues/{queue}/items:batch"))
        .json(&batch)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED, "batch to {queue}");
}

/// One leased delivery: body, group, receipt.
#[derive(Debug, Clone)]
struct Out {
    body: String,
    group: Option<String>,
    receipt: String,
}

/// A leased pop of `queue` without a wait; `None` on 204.
async fn pop_out(url: &str, queue: &str) -> Option<Out> {
    let response = http()
        .post(format!("{url}/v1/queues/{queue}/pop?lease_ms={LEASE_MS}"))
        .send()
        .await
        .unwrap();
    if response.status() == StatusCode::NO_CONTENT {
        return None;
    }
    assert_eq!(response.status(), StatusCode::OK, "leased pop of {queue}");
    let receipt = header(&response, "hotq-receipt").unwrap();
    let group = header(&response, "hotq-group");
    Some(Out {
        body: response.text().await.unwrap(),
        group,
        receipt,
    })
}

async fn post(url: String) -> reqwest::Response {
    http().post(url).send().await.unwrap()
}

async fn ack(url: &str, queue: &str, receipt: &str) {
    let acked = post(format!("{url}/v1/queues/{queue}/ack/{receipt}")).await;
    assert_eq!(acked.status(), StatusCode::NO_CONTENT, "ack on {queue}");
}

/// Nacks `receipt`; the outcome the daemon answered.
async fn nack(url: &str, queue: &str, receipt: &str) -> String {
    let nacked = post(format!("{url}/v1/queues/{queue}/nack/{receipt}")).await;
    assert_eq!(nacked.status(), StatusCode::OK, "nack on {queue}");
    let answer: Value = nacked.json().await.unwrap();
    answer["outcome"].as_str().unwrap().to_string()
}

/// `POST …/redrive?max=`: how many moved.
async fn redrive(url: &str, dead: &str, max: usize) -> u64 {
    let response = post(format!("{url}/v1/queues/{dead}/redrive?max={max}")).await;
    assert_eq!(response.status(), StatusCode::OK, "redrive of {dead}");
    let answer: Value = response.json().await.unwrap();
    answer["redriven"].as_u64().unwrap()
}

async fn set_settings(url: &str, queue: &str, settings: Value) {
    let response = http()
        .put(format!("{url}/v1/queues/{queue}/settings"))
        .json(&settings)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK, "settings of {queue}");
}

/// The groups `queue` lists as having a head (the console's view).
async fn groups_listed(url: &str, queue: &str) -> Vec<Value> {
    let listed = get_json(&format!("{url}/v1/queues/{queue}/groups")).await;
    listed["groups"].as_array().unwrap().clone()
}

/// Asserts that `queue` holds nothing of any group: no visible item, none
/// waiting behind a head, no group with a head.
async fn assert_no_group_left(url: &str, queue: &str) {
    let stats = Client::new(url).stats(queue).await;
    assert_eq!((stats.depth, stats.grouped), (0, 0), "{queue}: {stats}");
    assert_eq!(
        groups_listed(url, queue).await,
        Vec::<Value>::new(),
        "{queue}"
    );
}

/// Drains `queue` with leased pops, acking only once every pop of a round
/// came back empty: so each round takes exactly the heads of the groups
/// (one out per group), and the rounds give each group's order. Returns
/// the bodies by group, in delivery order. Bounded by `items` rounds.
async fn drain_one_out_per_group(
    url: &str,
    queue: &str,
    items: usize,
) -> BTreeMap<String, Vec<String>> {
    let mut by_group: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut seen = 0;
    for _round in 0..=items {
        let mut out: Vec<Out> = Vec::new();
        while let Some(item) = pop_out(url, queue).await {
            let group = item.group.clone().expect("every item here has a group");
            assert!(
                out.iter()
                    .all(|o| o.group.as_deref() != Some(group.as_str())),
                "two items of group {group} out at once: {out:?} and {item:?}"
            );
            out.push(item);
            assert!(out.len() <= items, "more out than pushed: {out:?}");
        }
        if out.is_empty() {
            break;
        }
        for item in out {
            by_group
                .entry(item.group.clone().unwrap())
                .or_default()
                .push(item.body.clone());
            ack(url, queue, &item.receipt).await;
            seen += 1;
        }
    }
    assert_eq!(seen, items, "every item came back: {by_group:?}");
    by_group
}

fn bodies(group: &str, seqs: impl IntoIterator<Item = usize>) -> Vec<String> {
    seqs.into_iter()
        .map(|seq| format!("{group}-{seq}"))
        .collect()
}

/// Defect 4 over `/v1`: a dead-lettered group item, redriven while the
/// next item of its group is out, waits behind it; then every item of the
/// group comes back in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redriven_group_item_waits_behind_its_group_in_flight() {
    let daemon = Daemon::start(|_| {}).await;
    let url = &daemon.url;
    let queue = "orders";
    set_settings(url, queue, json!({"max_deliveries": 1})).await;
    for seq in 0..3 {
        push_grouped(url, queue, "g", &format!("g-{seq}")).await;
    }
    let first = pop_out(url, queue).await.unwrap();
    assert_eq!(first.body, "g-0");
    assert_eq!(nack(url, queue, &first.receipt).await, "dead_lettered");
    let second = pop_out(url, queue).await.unwrap();
    assert_eq!(second.body, "g-1", "the next of the group was released");
    assert_eq!(redrive(url, "orders.dead", 100).await, 1);
    // g-1 is out: nothing of g may be handed out, the redriven g-0 included.
    if let Some(wrong) = pop_out(url, queue).await {
        panic!("{wrong:?} handed out while g-1 of its group is out");
    }
    ack(url, queue, &second.receipt).await;
    // Redriven items go to their group's tail: g-2 was there first.
    let drained = drain_one_out_per_group(url, queue, 2).await;
    assert_eq!(drained["g"], ["g-2", "g-0"]);
    assert_no_group_left(url, "orders.dead").await;
    // The group still flows.
    push_grouped(url, queue, "g", "g-3").await;
    assert_eq!(pop_out(url, queue).await.unwrap().body, "g-3");
    daemon.stop().await;
}

/// Defect 4, whole groups: every item of two groups dead-lettered in turn,
/// then redriven, comes back in group order with one out per group, and
/// new pushes to the groups flow after them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_lettered_groups_come_back_whole_in_order() {
    let daemon = Daemon::start(|_| {}).await;
    let url = &daemon.url;
    let queue = "tasks";
    set_settings(url, queue, json!({"max_deliveries": 1})).await;
    let mut items = Vec::new();
    for seq in 0..4 {
        for group in ["a", "b"] {
            items.push((group.to_string(), format!("{group}-{seq}")));
        }
    }
    push_batch_grouped(url, queue, &items).await;
    // Dead-letter everything, one delivery each, in group order.
    for _ in 0..items.len() {
        let item = pop_out(url, queue).await.expect("a head to dead-letter");
        assert_eq!(nack(url, queue, &item.receipt).await, "dead_lettered");
    }
    assert_eq!(Client::new(url).stats(queue).await.grouped, 0);
    assert_eq!(redrive(url, "tasks.dead", 1_000).await, 8);
    assert_no_group_left(url, "tasks.dead").await;
    let drained = drain_one_out_per_group(url, queue, 8).await;
    assert_eq!(drained["a"], bodies("a", 0..4));
    assert_eq!(drained["b"], bodies("b", 0..4));
    push_grouped(url, queue, "a", "a-4").await;
    push_grouped(url, queue, "a", "a-5").await;
    let drained = drain_one_out_per_group(url, queue, 2).await;
    assert_eq!(drained["a"], bodies("a", 4..6));
    daemon.stop().await;
}

/// Defect 3: grouped items pushed straight into a dead-letter queue — its
/// default `q.dead` and one named by a setting — all come back in group
/// order, the dead-letter queue keeps no group, and later pushes to the
/// same groups there are redriven too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grouped_items_pushed_into_a_dead_letter_queue_all_come_back() {
    let daemon = Daemon::start(|_| {}).await;
    let url = &daemon.url;
    set_settings(url, "named", json!({"dead_letter_queue": "graveyard"})).await;
    for (origin, dead) in [("plain", "plain.dead"), ("named", "graveyard")] {
        let mut items = Vec::new();
        for seq in 0..4 {
            for group in ["x", "y", "z"] {
                items.push((group.to_string(), format!("{group}-{seq}")));
            }
        }
        push_batch_grouped(url, dead, &items).await;
        // A page of one per commit would still move whole groups.
        assert_eq!(redrive(url, dead, 1_000).await, 12, "{dead}");
        assert_no_group_left(url, dead).await;
        let drained = drain_one_out_per_group(url, origin, 12).await;
        for group in ["x", "y", "z"] {
            assert_eq!(drained[group], bodies(group, 0..4), "{dead}");
        }
        // New pushes to those groups in the dead-letter queue are not
        // stranded behind a head that left.
        push_grouped(url, dead, "x", "x-4").await;
        assert_eq!(Client::new(url).depth(dead).await, 1, "{dead}");
        assert_eq!(redrive(url, dead, 1_000).await, 1, "{dead}");
        assert_eq!(pop_out(url, origin).await.unwrap().body, "x-4");
    }
    daemon.stop().await;
}

/// A redrive bounded by `max` moves a group's items in order over several
/// calls, and never leaves one behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redrive_in_small_steps_keeps_group_order() {
    let daemon = Daemon::start(|_| {}).await;
    let url = &daemon.url;
    let items: Vec<(String, String)> = (0..5)
        .flat_map(|seq| ["p", "q"].map(|group| (group.to_string(), format!("{group}-{seq}"))))
        .collect();
    push_batch_grouped(url, "steps.dead", &items).await;
    let mut moved = 0;
    for _ in 0..items.len() {
        let step = redrive(url, "steps.dead", 3).await;
        assert!(step <= 3, "moved {step} of at most 3");
        moved += step;
        if step == 0 {
            break;
        }
    }
    assert_eq!(moved, 10);
    assert_no_group_left(url, "steps.dead").await;
    let drained = drain_one_out_per_group(url, "steps", 10).await;
    assert_eq!(drained["p"], bodies("p", 0..5));
    assert_eq!(drained["q"], bodies("q", 0..5));
    daemon.stop().await;
}

/// A group longer than one commit of a redrive (300 items; 256 a commit)
/// and a group of large items (cut by the commit's 4 MB) both come back
/// whole and in order in one redrive call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_longer_than_a_commit_come_back_whole_in_order() {
    let daemon = Daemon::start(|_| {}).await;
    let url = &daemon.url;
    let long: Vec<(String, String)> = (0..300)
        .map(|seq| ("long".to_string(), format!("long-{seq}")))
        .collect();
    push_batch_grouped(url, "long.dead", &long).await;
    assert_eq!(redrive(url, "long.dead", 1_000).await, 300);
    assert_no_group_left(url, "long.dead").await;
    let drained = drain_one_out_per_group(url, "long", 300).await;
    assert_eq!(drained["long"], bodies("long", 0..300));

    // 60 items of 98 kB: about 42 fit one commit's 4 MB.
    let filler = "x".repeat(98_000);
    for seq in 0..60 {
        push_grouped(url, "large.dead", "big", &format!("big-{seq} {filler}")).await;
    }
    assert_eq!(redrive(url, "large.dead", 1_000).await, 60);
    assert_no_group_left(url, "large.dead").await;
    let drained = drain_one_out_per_group(url, "large", 60).await;
    let seqs: Vec<String> = drained["big"]
        .iter()
        .map(|body| body.split_once(' ').unwrap().0.to_string())
        .collect();
    assert_eq!(seqs, bodies("big", 0..60));
    daemon.stop().await;
}

/// Console actions on grouped dead letters after a partial redrive: the
/// item delete and the purge leave no group stranded in the dead-letter
/// queue, and what the redrive moved flows in its origin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_delete_and_purge_of_grouped_dead_letters_strand_no_group() {
    let daemon = Daemon::start(|_| {}).await;
    let url = &daemon.url;
    let items: Vec<(String, String)> = (0..4)
        .map(|seq| ("k".to_string(), format!("k-{seq}")))
        .collect();
    push_batch_grouped(url, "desk.dead", &items).await;
    assert_eq!(redrive(url, "desk.dead", 1).await, 1);
    // The console lists k's next item as the dead-letter queue's head...
    let listed = get_json(&format!("{url}/v1/queues/desk.dead/items")).await;
    let head = &listed["items"][0];
    assert_eq!(head["group"], "k", "{listed}");
    assert_eq!(head["payload"], "k-1", "{listed}");
    // ...deleting it releases k-2...
    let id = head["id"].as_str().unwrap();
    let deleted = http()
        .delete(format!("{url}/v1/queues/desk.dead/items/{id}"))
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), StatusCode::OK);
    let stats = Client::new(url).stats("desk.dead").await;
    assert_eq!((stats.depth, stats.grouped), (1, 1), "{stats}");
    // ...and a purge drops the rest with the group.
    let purged = post(format!("{url}/v1/queues/desk.dead/purge")).await;
    assert_eq!(purged.status(), StatusCode::OK);
    assert_no_group_left(url, "desk.dead").await;
    push_grouped(url, "desk.dead", "k", "k-5").await;
    assert_eq!(Client::new(url).depth("desk.dead").await, 1);
    // What the redrive moved is in its origin, and k flows there.
    assert_eq!(pop_out(url, "desk").await.unwrap().body, "k-0");
    daemon.stop().await;
}

// ---- the SQS API ----

async fn sqs(daemon: &Daemon, action: &str, body: Value) -> Value {
    let response = http()
        .post(format!("{}/", daemon.url))
        .header("X-Amz-Target", format!("AmazonSQS.{action}"))
        .header("Content-Type", "application/x-amz-json-1.0")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = response.status();
    let answer: Value = response.json().await.unwrap_or(Value::Null);
    assert_eq!(status, StatusCode::OK, "{action}: {answer}");
    answer
}

/// One ReceiveMessage of at most 10, without a wait: (body, group, handle).
async fn receive(daemon: &Daemon, queue_url: &Value, max: usize) -> Vec<(String, String, String)> {
    let answer = sqs(
        daemon,
        "ReceiveMessage",
        json!({"QueueUrl": queue_url, "MaxNumberOfMessages": max, "AttributeNames": ["All"]}),
    )
    .await;
    let messages = answer["Messages"].as_array().cloned().unwrap_or_default();
    messages
        .iter()
        .map(|m| {
            (
                m["Body"].as_str().unwrap().to_string(),
                m["Attributes"]["MessageGroupId"]
                    .as_str()
                    .unwrap()
                    .to_string(),
                m["ReceiptHandle"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Defect 4 over the SQS API: a FIFO message dead-lettered after its
/// receives and redriven is not received while the next message of its
/// `MessageGroupId` is in flight; it comes back after it, with its group.
/// (A FIFO receive of up to 10 takes several of one group: the receives
/// that pick one message ask for one.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sqs_fifo_message_redriven_keeps_one_in_flight_per_group() {
    let daemon = Daemon::start(|_| {}).await;
    let fifo = json!({"FifoQueue": "true"});
    let dead_url = sqs(
        &daemon,
        "CreateQueue",
        json!({"QueueName": "rdq.fifo", "Attributes": fifo}),
    )
    .await["QueueUrl"]
        .clone();
    let dead_arn = sqs(
        &daemon,
        "GetQueueAttributes",
        json!({"QueueUrl": dead_url, "AttributeNames": ["QueueArn"]}),
    )
    .await["Attributes"]["QueueArn"]
        .clone();
    let policy = json!({"deadLetterTargetArn": dead_arn, "maxReceiveCount": 1}).to_string();
    let url = sqs(
        &daemon,
        "CreateQueue",
        json!({"QueueName": "src.fifo", "Attributes": {"FifoQueue": "true", "RedrivePolicy": policy}}),
    )
    .await["QueueUrl"]
        .clone();
    for (body, dedup) in [("m1", "d1"), ("m2", "d2"), ("m3", "d3")] {
        sqs(
            &daemon,
            "SendMessage",
            json!({"QueueUrl": url, "MessageBody": body, "MessageGroupId": "g",
                   "MessageDeduplicationId": dedup}),
        )
        .await;
    }
    let got = receive(&daemon, &url, 1).await;
    assert_eq!(got.len(), 1, "one of a group in flight: {got:?}");
    assert_eq!((got[0].0.as_str(), got[0].1.as_str()), ("m1", "g"));
    // Visible again after its one receive: dead-lettered.
    sqs(
        &daemon,
        "ChangeMessageVisibility",
        json!({"QueueUrl": url, "ReceiptHandle": got[0].2, "VisibilityTimeout": 0}),
    )
    .await;
    let got = receive(&daemon, &url, 1).await;
    assert_eq!(got.iter().map(|m| m.0.as_str()).collect::<Vec<_>>(), ["m2"]);
    let m2 = got[0].2.clone();
    assert_eq!(redrive(&daemon.url, "rdq.fifo", 10).await, 1);
    let got = receive(&daemon, &url, 10).await;
    assert!(
        got.is_empty(),
        "received {got:?} while m2 of group g is in flight"
    );
    sqs(
        &daemon,
        "DeleteMessage",
        json!({"QueueUrl": url, "ReceiptHandle": m2}),
    )
    .await;
    // m3 was in the group first; the redriven m1 follows it, with its group
    // (its dedup id, still in the window, does not hold it back): one
    // receive of 10 takes both, in that order.
    let got = receive(&daemon, &url, 10).await;
    let order: Vec<(&str, &str)> = got.iter().map(|m| (m.0.as_str(), m.1.as_str())).collect();
    assert_eq!(order, [("m3", "g"), ("m1", "g")]);
    for (_, _, handle) in &got {
        sqs(
            &daemon,
            "DeleteMessage",
            json!({"QueueUrl": url, "ReceiptHandle": handle}),
        )
        .await;
    }
    assert!(receive(&daemon, &url, 10).await.is_empty());
    daemon.stop().await;
}
