//! The API calls the web console added (issue #29), over HTTP: a
//! read-only item listing that pages and shows payloads as text or hex,
//! truncated; an exact delete of one item; groups with their heads;
//! traffic counts; and the console's page served without the token while
//! its data is not.

use crate::common;

use common::client::Client;
use common::daemon::{Daemon, http};
use reqwest::StatusCode;
use serde_json::{Value, json};

async fn call(method: reqwest::Method, url: String, body: Vec<u8>) -> (StatusCode, Value) {
    let response = http().request(method, url).body(body).send().await.unwrap();
    let status = response.status();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

async fn get(url: String) -> (StatusCode, Value) {
    call(reqwest::Method::GET, url, Vec::new()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn items_are_listed_in_order_without_being_taken() {
    let daemon = Daemon::start(|_| {}).await;
    let url = &daemon.url;
    let long_text = "é".repeat(400); // 800 bytes of UTF-8
    Client::new(url).push("browse", b"plain text").await;
    Client::new(url).push("browse", &[0xff, 0xfe, 0x00]).await;
    Client::new(url).push("browse", long_text.as_bytes()).await;
    Client::new(url).push("browse", &[0xab; 300]).await;

    let (status, page) = get(format!("{url}/v1/queues/browse/items?limit=2")).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let items = page["items"].as_array().unwrap();
    assert_eq!(items.len(), 2);
    assert_eq!(
        (
            &items[0]["payload"],
            &items[0]["encoding"],
            &items[0]["truncated"]
        ),
        (&json!("plain text"), &json!("text"), &json!(false))
    );
    assert_eq!(
        (
            &items[1]["payload"],
            &items[1]["encoding"],
            &items[1]["size"]
        ),
        (&json!("fffe00"), &json!("hex"), &json!(3))
    );
    let next = page["next"].as_str().unwrap();
    assert_eq!(next, items[1]["id"].as_str().unwrap());
    let (_, rest) = get(format!("{url}/v1/queues/browse/items?limit=2&after={next}")).await;
    let rest = rest["items"].as_array().unwrap().clone();
    assert_eq!(rest.len(), 2);
    let text = rest[0]["payload"].as_str().unwrap();
    assert!(
        text.len() <= 512 && long_text.starts_with(text),
        "cut on a character"
    );
    assert_eq!(
        (rest[0]["truncated"].as_bool(), rest[0]["size"].as_u64()),
        (Some(true), Some(800))
    );
    assert_eq!(
        rest[1]["payload"].as_str().unwrap().len(),
        256,
        "128 bytes as hex"
    );
    assert_eq!(rest[1]["truncated"], true);
    assert_eq!(
        Client::new(url).stats("browse").await.depth,
        4,
        "nothing taken"
    );

    let too_long = format!("after={}", "0".repeat(130));
    for bad in [
        "limit=0",
        "limit=101",
        "after=zz",
        "after=0",
        "color=red",
        &too_long,
    ] {
        let (status, body) = get(format!("{url}/v1/queues/browse/items?{bad}")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
        assert_eq!(body["error"]["code"], "bad_parameter", "{bad}: {body}");
    }
    // Any hex is a place in key order: `00` sorts before every item, `ff`
    // after them all.
    let (status, all) = get(format!("{url}/v1/queues/browse/items?after=00")).await;
    assert_eq!(status, StatusCode::OK, "{all}");
    assert_eq!(all["items"].as_array().unwrap().len(), 4);
    let (status, none) = get(format!("{url}/v1/queues/browse/items?after=ff")).await;
    assert_eq!(status, StatusCode::OK, "{none}");
    assert_eq!(none, json!({"items": [], "next": null}));
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_item_is_deleted_exactly_once() {
    let daemon = Daemon::start(|_| {}).await;
    let url = &daemon.url;
    for payload in ["keep-1", "drop", "keep-2"] {
        Client::new(url).push("del", payload.as_bytes()).await;
    }
    let (_, page) = get(format!("{url}/v1/queues/del/items")).await;
    let id = page["items"][1]["id"].as_str().unwrap().to_string();
    let delete = || {
        call(
            reqwest::Method::DELETE,
            format!("{url}/v1/queues/del/items/{id}"),
            Vec::new(),
        )
    };
    let (status, body) = delete().await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["item"]["payload"], "drop");
    let (status, body) = delete().await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["error"]["code"], "item_not_found");
    assert_eq!(Client::new(url).stats("del").await.depth, 2);
    // A popped item is no longer there to delete: the pop won.
    let (_, page) = get(format!("{url}/v1/queues/del/items")).await;
    let first = page["items"][0]["id"].as_str().unwrap().to_string();
    let (status, _) = call(
        reqwest::Method::POST,
        format!("{url}/v1/queues/del/pop"),
        Vec::new(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = call(
        reqwest::Method::DELETE,
        format!("{url}/v1/queues/del/items/{first}"),
        Vec::new(),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, body) = call(
        reqwest::Method::DELETE,
        format!("{url}/v1/queues/del/items/nothex"),
        Vec::new(),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (StatusCode::BAD_REQUEST, json!("bad_parameter"))
    );
    // Hex that names no item: nothing to delete.
    let (status, body) = call(
        reqwest::Method::DELETE,
        format!("{url}/v1/queues/del/items/00ff"),
        Vec::new(),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (StatusCode::NOT_FOUND, json!("item_not_found"))
    );
    let (_, page) = get(format!("{url}/v1/queues/del/items")).await;
    let left: Vec<&str> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["payload"].as_str().unwrap())
        .collect();
    assert_eq!(left, ["keep-2"]);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_group_head_releases_the_next_and_groups_are_listed() {
    let daemon = Daemon::start(|_| {}).await;
    let url = &daemon.url;
    for payload in ["g-1", "g-2", "g-3"] {
        let (status, body) = call(
            reqwest::Method::POST,
            format!("{url}/v1/queues/grp/items?group=customer-7"),
            payload.as_bytes().to_vec(),
        )
        .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    let (_, groups) = get(format!("{url}/v1/queues/grp/groups")).await;
    assert_eq!(groups["groups"][0]["group"], "customer-7", "{groups}");
    assert_eq!(
        (
            groups["groups"][0]["waiting"].as_u64(),
            groups["groups"][0]["head"].as_str()
        ),
        (Some(2), Some("out"))
    );
    let (_, page) = get(format!("{url}/v1/queues/grp/items")).await;
    assert_eq!(
        page["items"].as_array().unwrap().len(),
        1,
        "only the head is visible"
    );
    assert_eq!(page["items"][0]["group"], "customer-7");
    let head = page["items"][0]["id"].as_str().unwrap();
    let (status, _) = call(
        reqwest::Method::DELETE,
        format!("{url}/v1/queues/grp/items/{head}"),
        Vec::new(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (_, page) = get(format!("{url}/v1/queues/grp/items")).await;
    assert_eq!(
        page["items"][0]["payload"], "g-2",
        "the next item is the head now"
    );
    let (_, groups) = get(format!("{url}/v1/queues/grp/groups")).await;
    assert_eq!(groups["groups"][0]["waiting"], 1);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn priority_items_are_listed_with_their_priority_and_traffic_is_counted() {
    // The traffic tally is the process's, by queue name: alone in one.
    let name = "priority_items_are_listed_with_their_priority_and_traffic_is_counted";
    if !common::alone::here(module_path!(), name).await {
        return;
    }
    let daemon = Daemon::start(|_| {}).await;
    let url = &daemon.url;
    for priority in [7, -2] {
        let (status, _) = call(
            reqwest::Method::POST,
            format!("{url}/v1/pqueues/pq/items?priority={priority}"),
            format!("p{priority}").into_bytes(),
        )
        .await;
        assert_eq!(status, StatusCode::CREATED);
    }
    let (_, page) = get(format!("{url}/v1/pqueues/pq/items")).await;
    let priorities: Vec<i64> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["priority"].as_i64().unwrap())
        .collect();
    assert_eq!(priorities, [-2, 7]);
    let (status, _) = call(
        reqwest::Method::POST,
        format!("{url}/v1/pqueues/pq/pop?end=max"),
        Vec::new(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, traffic) = get(format!("{url}/v1/traffic?kind=priority&queues=pq,unknown")).await;
    assert_eq!(status, StatusCode::OK, "{traffic}");
    assert_eq!(
        traffic["queues"]["pq"],
        json!({"pushed": 2, "popped": 1, "popped_direct": 1, "acked": 0, "nacked": 0, "dead_lettered": 0})
    );
    assert!(traffic["queues"].get("unknown").is_none());
    let many = vec!["q"; 101].join(",");
    for (queues, code) in [
        (many.as_str(), "bad_parameter"),
        ("", "invalid_queue_name"),
        ("a,,b", "invalid_queue_name"),
        ("bad%20name", "invalid_queue_name"),
    ] {
        let (status, body) = get(format!("{url}/v1/traffic?queues={queues}")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{queues}: {body}");
        assert_eq!(body["error"]["code"], code, "{queues}: {body}");
    }
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_priority_dead_letter_names_the_priority_it_came_from() {
    let daemon = Daemon::start(|_| {}).await;
    let url = &daemon.url;
    let (status, body) = call(
        reqwest::Method::PUT,
        format!("{url}/v1/pqueues/urgent/settings"),
        br#"{"max_deliveries": 1}"#.to_vec(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, _) = call(
        reqwest::Method::POST,
        format!("{url}/v1/pqueues/urgent/items?priority=-4"),
        b"page".to_vec(),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, popped) = call(
        reqwest::Method::POST,
        format!("{url}/v1/pqueues/urgent/pop?end=min&lease_ms=60000&max=2"),
        Vec::new(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{popped}");
    let receipt = popped[0]["receipt"].as_str().unwrap();
    let (status, nacked) = call(
        reqwest::Method::POST,
        format!("{url}/v1/pqueues/urgent/nack/{receipt}"),
        Vec::new(),
    )
    .await;
    assert_eq!(
        (status, &nacked["outcome"]),
        (StatusCode::OK, &json!("dead_lettered"))
    );
    let (_, dead) = get(format!("{url}/v1/queues/urgent.dead/items")).await;
    let item = &dead["items"][0];
    assert_eq!(
        (
            &item["dead_letter_from"],
            &item["dead_letter_from_priority"],
            &item["priority"]
        ),
        (&json!("urgent"), &json!(-4), &Value::Null),
        "{dead}"
    );
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_is_served_without_the_token_and_its_data_is_not() {
    let daemon = Daemon::start(|config| config.token = Some("console-token".into())).await;
    let url = &daemon.url;
    for (path, kind) in [
        ("/ui", "text/html"),
        ("/ui/app.js", "text/javascript"),
        ("/ui/style.css", "text/css"),
    ] {
        let response = http().get(format!("{url}{path}")).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{path}");
        let content_type = response.headers()["content-type"]
            .to_str()
            .unwrap()
            .to_string();
        assert!(content_type.starts_with(kind), "{path}: {content_type}");
        assert!(response.headers().contains_key("content-security-policy"));
    }
    let (status, _) = get(format!("{url}/ui/secrets.txt")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    for path in [
        "/v1/queues",
        "/v1/queues/q/items",
        "/v1/queues/q/groups",
        "/v1/traffic?queues=q",
    ] {
        let (status, body) = get(format!("{url}{path}")).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{path}: {body}");
    }
    let (status, _) = call(
        reqwest::Method::POST,
        format!("{url}/v1/queues/q/pause"),
        Vec::new(),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let response = http()
        .get(format!("{url}/v1/queues/q/items"))
        .bearer_auth("console-token")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_show_their_payload_and_the_history_follows_the_queue() {
    // The history and the traffic tally are the process's: alone in one.
    let name = "leases_show_their_payload_and_the_history_follows_the_queue";
    if !common::alone::here(module_path!(), name).await {
        return;
    }
    let daemon = Daemon::start(|_| {}).await;
    let url = &daemon.url;
    Client::new(url).push("charted", b"first job").await;
    Client::new(url).push("charted", [0xffu8, 0x00]).await;
    Client::new(url)
        .pop_leased("charted", 60_000)
        .await
        .unwrap();
    let (status, leases) = get(format!("{url}/v1/queues/charted/leases")).await;
    assert_eq!(status, StatusCode::OK, "{leases}");
    let lease = &leases["leases"][0];
    assert_eq!(
        (
            &lease["payload"],
            &lease["encoding"],
            &lease["size"],
            &lease["truncated"]
        ),
        (
            &json!("first job"),
            &json!("text"),
            &json!(9),
            &json!(false)
        )
    );
    // The sampler (every second by default) records the queue: one leased,
    // one visible, one push and one pop counted, within a generous bound.
    let sampled = |h: &Value| {
        h["samples"]
            .as_array()
            .and_then(|samples| samples.last())
            .is_some_and(|last| {
                (
                    &last["depth"],
                    &last["leased"],
                    &last["pushed"],
                    &last["popped"],
                ) == (&json!(1), &json!(1), &json!(2), &json!(1))
            })
    };
    let mut history = Value::Null;
    for _ in 0..300 {
        history = get(format!("{url}/v1/history?kind=fifo&queue=charted"))
            .await
            .1;
        if sampled(&history) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(sampled(&history), "{history}");
    assert_eq!(history["step_ms"], json!(10_000));
    let (_, daemon_wide) = get(format!("{url}/v1/history?kind=fifo")).await;
    assert!(
        !daemon_wide["samples"].as_array().unwrap().is_empty(),
        "{daemon_wide}"
    );
    for bad in ["kind=nope", "queue=bad%20name", "unknown=1"] {
        let (status, body) = get(format!("{url}/v1/history?{bad}")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
    }
}

/// SQS queues as SQS users know them (issue #38): an item sent through SQS
/// is listed (and leased) with its body, attributes and group as sent, not
/// the stored envelope; `/sqs` answers a queue's type, URL, ARN and
/// attributes next to the hotq settings they are. A `/v1` item has no
/// `sqs`, and a `/v1` queue reads as a standard queue never created
/// through SQS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqs_messages_and_queues_are_shown_as_sqs_shows_them() {
    let daemon = Daemon::start(|_| {}).await;
    let url = &daemon.url;
    let sqs = |action: &str, body: Value| {
        http()
            .post(format!("{url}/"))
            .header("X-Amz-Target", format!("AmazonSQS.{action}"))
            .header("Content-Type", "application/x-amz-json-1.0")
            .body(body.to_string())
            .send()
    };
    let created = sqs(
        "CreateQueue",
        json!({"QueueName": "q.fifo", "Attributes": {"FifoQueue": "true", "VisibilityTimeout": "45"}}),
    )
    .await
    .unwrap()
    .json::<Value>()
    .await
    .unwrap();
    let queue_url = created["QueueUrl"].as_str().unwrap().to_string();
    let attributes = json!({"kind": {"DataType": "String", "StringValue": "order"}});
    let sent = json!({"QueueUrl": queue_url, "MessageBody": "body one", "MessageGroupId": "g#1",
        "MessageDeduplicationId": "d1", "MessageAttributes": attributes});
    assert!(
        sqs("SendMessage", sent)
            .await
            .unwrap()
            .status()
            .is_success()
    );

    let (status, page) = get(format!("{url}/v1/queues/q.fifo/items")).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let message = &page["items"][0]["sqs"];
    assert_eq!(
        (
            &message["body"],
            &message["message_group_id"],
            &message["message_deduplication_id"],
            &message["attributes"]
        ),
        (&json!("body one"), &json!("g#1"), &json!("d1"), &attributes),
        "{page}"
    );
    let receive = json!({"QueueUrl": queue_url, "VisibilityTimeout": 600});
    assert!(
        sqs("ReceiveMessage", receive)
            .await
            .unwrap()
            .status()
            .is_success()
    );
    let (_, leases) = get(format!("{url}/v1/queues/q.fifo/leases")).await;
    assert_eq!(leases["leases"][0]["sqs"]["body"], "body one", "{leases}");

    let (status, view) = get(format!("{url}/v1/queues/q.fifo/sqs")).await;
    assert_eq!(status, StatusCode::OK, "{view}");
    assert_eq!(view["queue_type"], "fifo");
    assert_eq!(view["created_through_sqs"], true);
    assert_eq!(view["queue_url"], json!(queue_url));
    assert_eq!(view["attributes"]["VisibilityTimeout"], "45");
    assert_eq!(view["hotq"]["default_lease_ms"], 45_000);
    assert_eq!(view["max_receive_count"], Value::Null);

    Client::new(url).push("plain", b"raw").await;
    let (_, page) = get(format!("{url}/v1/queues/plain/items")).await;
    assert_eq!(page["items"][0]["sqs"], Value::Null, "{page}");
    let (_, view) = get(format!("{url}/v1/queues/plain/sqs")).await;
    assert_eq!(
        (&view["queue_type"], &view["created_through_sqs"]),
        (&json!("standard"), &json!(false)),
        "{view}"
    );
    daemon.stop().await;
}
