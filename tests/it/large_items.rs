//! Items of 1 MiB (issue #38): over one store value (100 kB), so each is
//! split across part keys written in its push's own commit. Through a real
//! daemon over HTTP (and RESP, and SQS in tests/sqs), every path that
//! moves or ends an item: pop (direct and staged), lease and ack, nack,
//! lease expiry and redelivery, dead-letter and redrive, the console's
//! delete, purge, DELETE of the queue. After each the store holds exactly
//! the parts of the items still in it: nothing partial, nothing orphaned.

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use common::client::Client;
use common::daemon::{Daemon, http};
use hotq::envelope::{PARTS_ID_LEN, decode_held, decode_item};
use hotq::keys::{QueueKeys, QueueName, due_range};
use hotq::queue::parts::{all_parts_range, part_count, parts_id_of_key};
use hotq::store::embedded::EmbeddedStore;
use reqwest::StatusCode;
use serde_json::Value;

const MIB: usize = 1_048_576;

/// Item `i` of `len` bytes: its number, then a letter (text, so the
/// test client reads it as a string).
fn item(i: usize, len: usize) -> String {
    let mut text = format!("item-{i:04}-");
    let fill = (b'a' + (i % 26) as u8) as char;
    text.extend(std::iter::repeat_n(fill, len - text.len()));
    text
}

/// The parts ids held in the store, and how many part keys.
async fn parts_held(store: &EmbeddedStore) -> (BTreeSet<[u8; PARTS_ID_LEN]>, usize) {
    let rows = common::scan(store, all_parts_range()).await;
    let ids = rows
        .iter()
        .map(|row| parts_id_of_key(&row.key).expect("a part key"))
        .collect();
    (ids, rows.len())
}

/// The parts ids every envelope of queue `name` refers to: visible items
/// and every lease or delayed item in the due index.
async fn parts_referred(store: &EmbeddedStore, name: &str) -> Vec<[u8; PARTS_ID_LEN]> {
    let keys = QueueKeys::new(&QueueName::new(name).unwrap());
    let mut ids = Vec::new();
    for row in common::scan(store, keys.items_range()).await {
        ids.extend(decode_item(&row.value).unwrap().parts.map(|p| p.id));
    }
    for row in common::scan(store, due_range()).await {
        if let Some(held) = decode_held(&row.value) {
            ids.extend(held.item.parts.map(|p| p.id));
        }
    }
    ids
}

/// The store holds the parts of exactly `items` large items of `len`
/// bytes, and every one is referred to by an envelope of `queues`.
async fn assert_parts(store: &EmbeddedStore, queues: &[&str], items: usize, len: usize) {
    let (ids, keys) = parts_held(store).await;
    assert_eq!(ids.len(), items, "parts of {items} items are held");
    assert_eq!(keys, items * part_count(len), "every part, no more");
    let mut referred = BTreeSet::new();
    for queue in queues {
        referred.extend(parts_referred(store, queue).await);
    }
    assert_eq!(
        referred, ids,
        "each held item's envelope refers to its parts"
    );
}

async fn post(url: String) -> reqwest::Response {
    http().post(url).send().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mebibyte_item_pushes_and_pops_whole_on_every_pop_path() {
    let daemon = Daemon::start(|_| {}).await;
    let client = Client::new(&daemon.url);
    // A small item keeps its one-value layout: no part key.
    client.push("jobs", item(0, 100)).await;
    assert_parts(&daemon.store, &["jobs"], 0, MIB).await;
    assert_eq!(client.pop("jobs", 0).await.unwrap(), item(0, 100));
    // One item, then a batch of three, of exactly 1 MiB.
    client.push("jobs", item(1, MIB)).await;
    client
        .push_batch("jobs", &[item(2, MIB), item(3, MIB), item(4, MIB)])
        .await;
    assert_parts(&daemon.store, &["jobs"], 4, MIB).await;
    // A direct pop, then a pop of several at once (JSON, base64).
    assert_eq!(client.pop("jobs", 0).await.unwrap(), item(1, MIB));
    let many = http()
        .post(format!("{}/v1/queues/jobs/pop?max=3", daemon.url))
        .send()
        .await
        .unwrap();
    assert_eq!(many.status(), StatusCode::OK);
    let many: Value = many.json().await.unwrap();
    let bodies: Vec<String> = many
        .as_array()
        .unwrap()
        .iter()
        .map(|i| String::from_utf8(BASE64.decode(i["item"].as_str().unwrap()).unwrap()).unwrap())
        .collect();
    assert_eq!(bodies, [item(2, MIB), item(3, MIB), item(4, MIB)]);
    assert_parts(&daemon.store, &["jobs"], 0, MIB).await;
    // Staged pops: waiters in line first, served by fulfill rounds.
    let waiters: Vec<_> = (0..6)
        .map(|_| {
            let client = Client::new(&daemon.url);
            tokio::spawn(async move { client.pop("jobs", 30_000).await })
        })
        .collect();
    common::eventually("six pops wait", Duration::from_secs(30), || async {
        Client::new(&daemon.url).stats("jobs").await.waiting >= 6
    })
    .await;
    let six: Vec<String> = (10..16).map(|i| item(i, MIB)).collect();
    client.push_batch("jobs", &six[..3]).await;
    client.push_batch("jobs", &six[3..]).await;
    let mut got = Vec::new();
    for waiter in waiters {
        got.push(waiter.await.unwrap().expect("an item within the wait"));
    }
    got.sort();
    assert_eq!(got, six);
    assert_parts(&daemon.store, &["jobs"], 0, MIB).await;
    // Over `payload_bytes_max`: refused, nothing written.
    let (status, body) = client.try_push("jobs", item(0, MIB + 1)).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    assert_eq!(body["error"]["code"], "item_too_large");
    assert_parts(&daemon.store, &["jobs"], 0, MIB).await;
    assert_eq!(client.depth("jobs").await, 0);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payload_bytes_max_is_configurable() {
    let daemon = Daemon::start(|config| config.payload_bytes_max = 3 * MIB).await;
    let client = Client::new(&daemon.url);
    client.push("jobs", item(0, 3 * MIB)).await;
    let (status, _) = client.try_push("jobs", item(1, 3 * MIB + 1)).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_parts(&daemon.store, &["jobs"], 1, 3 * MIB).await;
    assert_eq!(client.pop("jobs", 0).await.unwrap(), item(0, 3 * MIB));
    assert_parts(&daemon.store, &["jobs"], 0, MIB).await;
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leased_item_keeps_its_parts_until_acked_and_a_nack_returns_it_whole() {
    let daemon = Daemon::start(|_| {}).await;
    let client = Client::new(&daemon.url);
    client.push("jobs", item(1, MIB)).await;
    let leased = client.pop_leased("jobs", 60_000).await.unwrap();
    assert_eq!(leased.body, item(1, MIB));
    // Leased: the lease refers to the parts.
    assert_parts(&daemon.store, &["jobs"], 1, MIB).await;
    let nacked = post(format!(
        "{}/v1/queues/jobs/nack/{}",
        daemon.url, leased.receipt
    ))
    .await;
    assert_eq!(nacked.status(), StatusCode::OK);
    assert_parts(&daemon.store, &["jobs"], 1, MIB).await;
    let again = client.pop_leased("jobs", 60_000).await.unwrap();
    assert_eq!(
        (again.body.as_str(), again.delivery_count),
        (item(1, MIB).as_str(), 2)
    );
    assert_eq!(
        client.ack("jobs", &again.receipt).await,
        StatusCode::NO_CONTENT
    );
    assert_parts(&daemon.store, &["jobs"], 0, MIB).await;
    // A leased pop served in line (a staged round), acked riding on the
    // next pop.
    let waiter = {
        let url = daemon.url.clone();
        tokio::spawn(async move {
            let response = post(format!(
                "{url}/v1/queues/jobs/pop?lease_ms=60000&wait_ms=30000"
            ))
            .await;
            let receipt = response.headers()["hotq-receipt"]
                .to_str()
                .unwrap()
                .to_string();
            (receipt, response.text().await.unwrap())
        })
    };
    common::eventually("a pop waits", Duration::from_secs(30), || async {
        Client::new(&daemon.url).stats("jobs").await.waiting >= 1
    })
    .await;
    client.push("jobs", item(2, MIB)).await;
    let (receipt, body) = waiter.await.unwrap();
    assert_eq!(body, item(2, MIB));
    assert_parts(&daemon.store, &["jobs"], 1, MIB).await;
    let riding = post(format!("{}/v1/queues/jobs/pop?ack={receipt}", daemon.url)).await;
    assert_eq!(riding.headers()["hotq-acked"], "acked");
    assert_parts(&daemon.store, &["jobs"], 0, MIB).await;
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expiry_redelivers_dead_letters_and_a_redrive_returns_the_item_whole() {
    let daemon = Daemon::start(|config| config.leases.max_deliveries = 2).await;
    let client = Client::new(&daemon.url);
    client.push("jobs", item(7, MIB)).await;
    // Two deliveries whose leases expire: redelivered once, then
    // dead-lettered to jobs.dead.
    for delivery in 1..=2 {
        let response = post(format!(
            "{}/v1/queues/jobs/pop?lease_ms=50&wait_ms=30000",
            daemon.url
        ))
        .await;
        assert_eq!(response.status(), StatusCode::OK, "delivery {delivery}");
        assert_eq!(
            response.headers()["hotq-delivery-count"],
            delivery.to_string().as_str()
        );
        assert_eq!(response.text().await.unwrap(), item(7, MIB));
    }
    common::eventually(
        "the item is dead-lettered",
        Duration::from_secs(30),
        || async { Client::new(&daemon.url).depth("jobs.dead").await == 1 },
    )
    .await;
    assert_parts(&daemon.store, &["jobs", "jobs.dead"], 1, MIB).await;
    let redriven = post(format!("{}/v1/queues/jobs.dead/redrive", daemon.url)).await;
    assert_eq!(redriven.status(), StatusCode::OK);
    assert_parts(&daemon.store, &["jobs", "jobs.dead"], 1, MIB).await;
    assert_eq!(client.pop("jobs", 0).await.unwrap(), item(7, MIB));
    assert_parts(&daemon.store, &["jobs", "jobs.dead"], 0, MIB).await;
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_purge_and_queue_delete_leave_no_part() {
    let daemon = Daemon::start(|_| {}).await;
    let client = Client::new(&daemon.url);
    // The console's view and delete of one item.
    client.push("jobs", item(1, MIB)).await;
    let listed: Value = http()
        .get(format!("{}/v1/queues/jobs/items?limit=10", daemon.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let first = &listed["items"][0];
    assert_eq!(first["size"], MIB);
    assert!(
        first["payload"].as_str().unwrap().starts_with("item-0001-"),
        "{first}"
    );
    let id = first["id"].as_str().unwrap();
    let deleted = http()
        .delete(format!("{}/v1/queues/jobs/items/{id}", daemon.url))
        .send()
        .await
        .unwrap();
    assert!(deleted.status().is_success(), "{}", deleted.status());
    assert_parts(&daemon.store, &["jobs"], 0, MIB).await;
    // Purge: visible and delayed items.
    client
        .push_batch("jobs", &[item(2, MIB), item(3, MIB)])
        .await;
    let delayed = http()
        .post(format!(
            "{}/v1/queues/jobs/items?delay_ms=600000",
            daemon.url
        ))
        .body(item(4, MIB))
        .send()
        .await
        .unwrap();
    assert_eq!(delayed.status(), StatusCode::CREATED);
    assert_parts(&daemon.store, &["jobs"], 3, MIB).await;
    let purged = post(format!("{}/v1/queues/jobs/purge", daemon.url)).await;
    assert_eq!(purged.status(), StatusCode::OK);
    assert_parts(&daemon.store, &["jobs"], 0, MIB).await;
    // DELETE of the queue: visible, delayed and leased items.
    client
        .push_batch("jobs", &[item(5, MIB), item(6, MIB)])
        .await;
    let delayed = http()
        .post(format!(
            "{}/v1/queues/jobs/items?delay_ms=600000",
            daemon.url
        ))
        .body(item(7, MIB))
        .send()
        .await
        .unwrap();
    assert_eq!(delayed.status(), StatusCode::CREATED);
    let leased = client.pop_leased("jobs", 600_000).await.unwrap();
    assert_eq!(leased.body, item(5, MIB));
    assert_parts(&daemon.store, &["jobs"], 3, MIB).await;
    let answer = client.delete("jobs").await;
    assert_eq!(answer["done"], true, "{answer}");
    assert_parts(&daemon.store, &["jobs"], 0, MIB).await;
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resp_push_and_pop_of_a_mebibyte() {
    let daemon = Daemon::start_resp(|_| {}).await;
    let mut con = common::resp::redis(&daemon.redis_url()).await;
    let big = item(3, MIB);
    assert_eq!(
        common::resp::call(&mut con, &["PUSH", "jobs", &big]).await,
        redis::Value::Int(1)
    );
    assert_eq!(
        common::resp::call(&mut con, &["LPUSH", "list", &big]).await,
        redis::Value::Int(1)
    );
    assert_parts(&daemon.store, &["jobs", "list"], 2, MIB).await;
    let popped = common::resp::call(&mut con, &["POP", "jobs"]).await;
    assert_eq!(popped, redis::Value::BulkString(big.clone().into_bytes()));
    let popped = common::resp::call(&mut con, &["RPOP", "list"]).await;
    assert_eq!(popped, redis::Value::BulkString(big.clone().into_bytes()));
    assert_parts(&daemon.store, &["jobs", "list"], 0, MIB).await;
    let too_big = item(4, MIB + 1);
    let refused = common::resp::call_error(&mut con, &["PUSH", "jobs", &too_big]).await;
    assert!(refused.contains("item_too_large"), "{refused}");
    daemon.stop().await;
}

/// Pushes batches of two 1 MiB items to `url` until it stops answering;
/// returns the items whose push was answered 201.
async fn push_until_killed(url: String, pusher: usize) -> Vec<String> {
    let mut pushed = Vec::new();
    // Bounded: the daemon is killed long before.
    for n in 0..10_000 {
        let batch = [
            item(pusher * 10_000 + 2 * n, MIB),
            item(pusher * 10_000 + 2 * n + 1, MIB),
        ];
        let body: Vec<String> = batch.iter().map(|i| BASE64.encode(i)).collect();
        let Ok(response) = http()
            .post(format!("{url}/v1/queues/big/items:batch"))
            .json(&body)
            .send()
            .await
        else {
            break;
        };
        if response.status() != StatusCode::CREATED {
            break;
        }
        pushed.extend(batch);
    }
    pushed
}

/// The store in `dir` (no daemon on it): every parts id is referred to by
/// exactly one item of `big`, and every item's parts are whole.
async fn assert_store_whole(dir: &std::path::Path) -> usize {
    use hotq::store::embedded::EmbeddedConfig;
    let store = EmbeddedStore::open(EmbeddedConfig::new(dir)).unwrap();
    let (held, keys) = parts_held(&store).await;
    let referred = parts_referred(&store, "big").await;
    let distinct: BTreeSet<_> = referred.iter().copied().collect();
    assert_eq!(distinct.len(), referred.len(), "no two items share parts");
    assert_eq!(
        distinct, held,
        "no orphaned part, no item missing its parts"
    );
    assert_eq!(
        keys,
        held.len() * part_count(MIB),
        "every item's parts are whole"
    );
    referred.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkill_mid_push_leaves_no_partial_item_and_no_orphaned_part() {
    use common::process::{kill9, start, terminate};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    let running = tokio::task::spawn_blocking(move || start(&path))
        .await
        .unwrap();
    let pushers: Vec<_> = (0..4)
        .map(|pusher| tokio::spawn(push_until_killed(running.url.clone(), pusher)))
        .collect();
    // Killed once pushes have been landing for a while: a dozen items
    // in, with every pusher's next batch in flight.
    let url = running.url.clone();
    common::eventually(
        "a dozen large items pushed",
        Duration::from_secs(120),
        || async { Client::new(&url).depth("big").await >= 12 },
    )
    .await;
    tokio::task::spawn_blocking(move || kill9(running))
        .await
        .unwrap();
    let mut acked = Vec::new();
    for pusher in pushers {
        acked.extend(pusher.await.unwrap());
    }
    let items = assert_store_whole(dir.path()).await;
    assert!(items >= acked.len(), "every answered push survived");
    // Restarted: every item pops whole, and then no part is left.
    let path = dir.path().to_path_buf();
    let running = tokio::task::spawn_blocking(move || start(&path))
        .await
        .unwrap();
    let client = Client::new(&running.url);
    let mut popped = BTreeSet::new();
    while let Some(body) = client.pop("big", 0).await {
        let number: usize = body[5..].split('-').next().unwrap().parse().unwrap();
        assert!(body == item(number, MIB), "item {number} comes back whole");
        popped.insert(body);
    }
    assert_eq!(popped.len(), items);
    assert!(acked.iter().all(|item| popped.contains(item)));
    tokio::task::spawn_blocking(move || terminate(running))
        .await
        .unwrap();
    assert_eq!(assert_store_whole(dir.path()).await, 0);
}

/// One SQS call (JSON protocol) to `daemon`; the answer's JSON.
async fn sqs(daemon: &Daemon, action: &str, body: Value) -> Value {
    let response = http()
        .post(format!("{}/", daemon.url))
        .header("X-Amz-Target", format!("AmazonSQS.{action}"))
        .header("Content-Type", "application/x-amz-json-1.0")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert!(
        response.status().is_success(),
        "{action}: {}",
        response.status()
    );
    response.json().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqs_purge_in_flight_and_a_stale_handle_delete_leave_no_part() {
    let daemon = Daemon::start(|_| {}).await;
    let created = sqs(
        &daemon,
        "CreateQueue",
        serde_json::json!({"QueueName": "big"}),
    )
    .await;
    let url = created["QueueUrl"].as_str().unwrap().to_string();
    let send = |i: usize| {
        let body = serde_json::json!({"QueueUrl": url, "MessageBody": item(i, 1_000_000)});
        sqs(&daemon, "SendMessage", body)
    };
    // A handle whose visibility timeout passed deletes its message (and
    // the message's parts) when no one received it since.
    send(1).await;
    let receive = |timeout_s: u64| {
        let body = serde_json::json!({"QueueUrl": url, "VisibilityTimeout": timeout_s});
        sqs(&daemon, "ReceiveMessage", body)
    };
    let received = receive(1).await;
    let handle = received["Messages"][0]["ReceiptHandle"].as_str().unwrap();
    assert_eq!(parts_held(&daemon.store).await.0.len(), 1);
    common::eventually(
        "the message is visible again",
        Duration::from_secs(30),
        || async {
            let body = serde_json::json!({"QueueUrl": url, "AttributeNames": ["All"]});
            let answer = sqs(&daemon, "GetQueueAttributes", body).await;
            answer["Attributes"]["ApproximateNumberOfMessages"] == "1"
        },
    )
    .await;
    let body = serde_json::json!({"QueueUrl": url, "ReceiptHandle": handle});
    sqs(&daemon, "DeleteMessage", body).await;
    assert_eq!(parts_held(&daemon.store).await, (BTreeSet::new(), 0));
    // PurgeQueue drops messages in flight too, with their parts.
    send(2).await;
    send(3).await;
    let received = receive(600).await;
    assert!(
        received["Messages"][0]["Body"]
            .as_str()
            .unwrap()
            .starts_with("item-000")
    );
    assert_eq!(parts_held(&daemon.store).await.0.len(), 2);
    sqs(&daemon, "PurgeQueue", serde_json::json!({"QueueUrl": url})).await;
    assert_eq!(parts_held(&daemon.store).await, (BTreeSet::new(), 0));
    daemon.stop().await;
}

/// Pushes one `MIB` item to `queue` with `query` and a retention.
async fn push_expiring(daemon: &Daemon, queue: &str, query: &str, retention_ms: u64, i: usize) {
    let response = http()
        .post(format!("{}/v1/queues/{queue}/items?{query}", daemon.url))
        .header("hotq-retention-ms", retention_ms.to_string())
        .body(item(i, MIB))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED, "push to {queue}");
}

/// Waits until `queue`'s stats count `expired` items.
async fn await_expired(daemon: &Daemon, queue: &str, expired: u64) {
    common::eventually("the expiry", Duration::from_secs(30), || async {
        let stats: Value = http()
            .get(format!("{}/v1/queues/{queue}", daemon.url))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        stats["expired"] == expired
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_items_past_their_retention_leave_no_part() {
    let daemon = Daemon::start(|_| {}).await;
    let client = Client::new(&daemon.url);
    // Visible, delayed, and waiting behind its group's head.
    push_expiring(&daemon, "visible", "", 300, 1).await;
    push_expiring(&daemon, "delayed", "delay_ms=600000", 300, 2).await;
    let head = http()
        .post(format!("{}/v1/queues/grouped/items?group=g", daemon.url))
        .body(item(3, MIB))
        .send()
        .await
        .unwrap();
    assert_eq!(head.status(), StatusCode::CREATED);
    push_expiring(&daemon, "grouped", "group=g", 300, 4).await;
    // Leased, its lease ending past its retention: dropped, not returned.
    push_expiring(&daemon, "leased", "", 2_000, 5).await;
    let leased = client.pop_leased("leased", 3_000).await.unwrap();
    assert_eq!(leased.body, item(5, MIB));
    for queue in ["visible", "delayed", "grouped", "leased"] {
        await_expired(&daemon, queue, 1).await;
    }
    // Only the group's head (no retention) keeps its parts.
    let queues = ["visible", "delayed", "grouped", "leased"];
    assert_parts(&daemon.store, &queues, 1, MIB).await;
    assert_eq!(client.pop("grouped", 0).await.unwrap(), item(3, MIB));
    assert_parts(&daemon.store, &queues, 0, MIB).await;
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_item_put_back_after_its_delivery_pops_whole_again() {
    // A pop whose caller left (a hang-up, the losing queue of a BLPOP,
    // a waiter gone before its hand-off) puts its item back; a delivery
    // had already read the parts and cleared them in its commit.
    let (store, _dir) = common::embedded_store(hotq::store::embedded::Durability::Buffered);
    let name = QueueName::new("back").unwrap();
    let queue = hotq::queue::Queue::new(store.clone(), name.clone());
    queue.push(item(1, MIB).as_bytes()).await.unwrap();
    let taken = queue.pop().await.unwrap().expect("the item");
    assert_eq!(taken.payload, item(1, MIB).as_bytes());
    assert_parts(&store, &["back"], 0, MIB).await;
    hotq::staging::requester::restore_items(&store, queue.keys(), vec![taken])
        .await
        .unwrap();
    assert_parts(&store, &["back"], 1, MIB).await;
    let again = queue.pop().await.unwrap().expect("the item, put back");
    assert_eq!(again.payload, item(1, MIB).as_bytes());
    assert_parts(&store, &["back"], 0, MIB).await;
}
