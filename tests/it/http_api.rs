//! The HTTP API against a real daemon on 127.0.0.1:0: the happy paths, a
//! table of bad inputs that must change nothing, long polls.

use crate::common;

use std::collections::HashSet;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use common::daemon::{Daemon, http};
use hotq::store::{KeyValue, RangeRead, Store, Transaction};
use reqwest::{Method, StatusCode};

async fn everything(store: &hotq::store::embedded::EmbeddedStore) -> Vec<KeyValue> {
    let txn = store.begin().unwrap();
    txn.get_range(RangeRead::new(&[0x00], &[0xff], 100_000).snapshot())
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_pop_peek_stats_and_batches() {
    let daemon = Daemon::start(|_| {}).await;
    let client = http();
    let url = &daemon.url;
    let pushed = client
        .post(format!("{url}/v1/queues/jobs/items"))
        .body("one")
        .send()
        .await
        .unwrap();
    assert_eq!(pushed.status(), StatusCode::CREATED);
    let batch: Vec<String> = ["two", "three", "four"]
        .iter()
        .map(|s| BASE64.encode(s))
        .collect();
    let pushed = client
        .post(format!("{url}/v1/queues/jobs/items:batch"))
        .json(&batch)
        .send()
        .await
        .unwrap();
    assert_eq!(pushed.status(), StatusCode::CREATED);
    let stats: serde_json::Value = client
        .get(format!("{url}/v1/queues/jobs"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(stats["depth"], 4);
    assert_eq!(stats["waiting"], 0);
    assert!(stats["oldest_item_age_ms"].as_u64().is_some());

    let peeked = client
        .get(format!("{url}/v1/queues/jobs/peek"))
        .send()
        .await
        .unwrap();
    assert_eq!(peeked.status(), StatusCode::OK);
    assert!(peeked.headers().contains_key("hotq-enqueued-at-ms"));
    assert_eq!(peeked.bytes().await.unwrap(), "one");
    let popped = client
        .post(format!("{url}/v1/queues/jobs/pop"))
        .send()
        .await
        .unwrap();
    assert_eq!(popped.bytes().await.unwrap(), "one");
    let many = client
        .post(format!("{url}/v1/queues/jobs/pop?max=10"))
        .send()
        .await
        .unwrap();
    assert_eq!(many.status(), StatusCode::OK);
    // A JSON pop is an array of objects, every field present.
    let many: Vec<serde_json::Value> = many.json().await.unwrap();
    for object in &many {
        assert!(object["enqueued_at_ms"].is_u64(), "{object}");
        for unleased in ["receipt", "delivery_count", "lease_expires_at_ms"] {
            assert!(object[unleased].is_null(), "{object}");
        }
        for field in ["dead_letter_from", "dead_letter_deliveries"] {
            assert!(object.get(field).is_some_and(|v| v.is_null()), "{object}");
        }
    }
    let many: Vec<Vec<u8>> = many
        .iter()
        .map(|o| BASE64.decode(o["item"].as_str().unwrap()).unwrap())
        .collect();
    assert_eq!(many, [b"two".to_vec(), b"three".to_vec(), b"four".to_vec()]);
    let empty = client
        .post(format!("{url}/v1/queues/jobs/pop"))
        .send()
        .await
        .unwrap();
    assert_eq!(empty.status(), StatusCode::NO_CONTENT);
    let empty = client
        .get(format!("{url}/v1/queues/jobs/peek"))
        .send()
        .await
        .unwrap();
    assert_eq!(empty.status(), StatusCode::NO_CONTENT);
    let health = client.get(format!("{url}/healthz")).send().await.unwrap();
    assert_eq!(health.status(), StatusCode::OK);
    daemon.stop().await;
}

struct Case {
    name: &'static str,
    method: Method,
    path: String,
    body: Vec<u8>,
    token: Option<&'static str>,
    status: StatusCode,
    code: &'static str,
}

fn case(
    name: &'static str,
    method: Method,
    path: &str,
    body: &[u8],
    status: StatusCode,
    code: &'static str,
) -> Case {
    Case {
        name,
        method,
        path: path.to_string(),
        body: body.to_vec(),
        token: Some("secret"),
        status,
        code,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_a_clear_error_and_changes_nothing() {
    let daemon = Daemon::start(|config| {
        config.token = Some("secret".into());
        config.body_max_bytes = 200_000;
        config.payload_bytes_max = 100_000;
        config.pop_max_items = 50;
        config.wait_max_ms = 30_000;
    })
    .await;
    let client = http();
    // Something to leave untouched.
    let seeded = client
        .post(format!("{}/v1/queues/jobs/items", daemon.url))
        .bearer_auth("secret")
        .body("keep me")
        .send()
        .await
        .unwrap();
    assert_eq!(seeded.status(), StatusCode::CREATED);
    // Over the configured `payload_bytes_max`, under the body cap.
    let big = vec![b'x'; 100_001];
    let body_over_cap = vec![b'x'; 200_001];
    let long_name = "q".repeat(129);
    let batch_with_big = serde_json::to_vec(&[BASE64.encode("ok"), BASE64.encode(&big)]).unwrap();
    let batch_too_many = serde_json::to_vec(&vec![BASE64.encode("x"); 1_001]).unwrap();
    let mut cases = vec![
        case(
            "queue name with a bad character",
            Method::POST,
            "/v1/queues/bad%20name/items",
            b"x",
            StatusCode::BAD_REQUEST,
            "invalid_queue_name",
        ),
        case(
            "queue name too long",
            Method::POST,
            &format!("/v1/queues/{long_name}/items"),
            b"x",
            StatusCode::BAD_REQUEST,
            "invalid_queue_name",
        ),
        case(
            "queue name starting with a dot",
            Method::POST,
            "/v1/queues/.hidden/pop",
            b"",
            StatusCode::BAD_REQUEST,
            "invalid_queue_name",
        ),
        case(
            "empty item",
            Method::POST,
            "/v1/queues/jobs/items",
            b"",
            StatusCode::BAD_REQUEST,
            "empty_item",
        ),
        case(
            "item over the payload limit",
            Method::POST,
            "/v1/queues/jobs/items",
            &big,
            StatusCode::PAYLOAD_TOO_LARGE,
            "item_too_large",
        ),
        case(
            "body over the body cap",
            Method::POST,
            "/v1/queues/jobs/items",
            &body_over_cap,
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
        ),
        case(
            "batch that is not JSON",
            Method::POST,
            "/v1/queues/jobs/items:batch",
            b"[not json",
            StatusCode::BAD_REQUEST,
            "bad_json",
        ),
        case(
            "batch of numbers",
            Method::POST,
            "/v1/queues/jobs/items:batch",
            b"[1,2]",
            StatusCode::BAD_REQUEST,
            "bad_json",
        ),
        case(
            "batch with malformed base64",
            Method::POST,
            "/v1/queues/jobs/items:batch",
            br#"["ok==", "!!!"]"#,
            StatusCode::BAD_REQUEST,
            "bad_base64",
        ),
        case(
            "empty batch",
            Method::POST,
            "/v1/queues/jobs/items:batch",
            b"[]",
            StatusCode::BAD_REQUEST,
            "bad_batch",
        ),
        case(
            "batch over 1000 items",
            Method::POST,
            "/v1/queues/jobs/items:batch",
            &batch_too_many,
            StatusCode::BAD_REQUEST,
            "bad_batch",
        ),
        case(
            "batch with an oversized item",
            Method::POST,
            "/v1/queues/jobs/items:batch",
            &batch_with_big,
            StatusCode::PAYLOAD_TOO_LARGE,
            "item_too_large",
        ),
        case(
            "wait_ms over the cap",
            Method::POST,
            "/v1/queues/jobs/pop?wait_ms=30001",
            b"",
            StatusCode::BAD_REQUEST,
            "bad_parameter",
        ),
        case(
            "wait_ms not a number",
            Method::POST,
            "/v1/queues/jobs/pop?wait_ms=soon",
            b"",
            StatusCode::BAD_REQUEST,
            "bad_parameter",
        ),
        case(
            "negative wait_ms",
            Method::POST,
            "/v1/queues/jobs/pop?wait_ms=-5",
            b"",
            StatusCode::BAD_REQUEST,
            "bad_parameter",
        ),
        case(
            "max zero",
            Method::POST,
            "/v1/queues/jobs/pop?max=0",
            b"",
            StatusCode::BAD_REQUEST,
            "bad_parameter",
        ),
        case(
            "max over the cap",
            Method::POST,
            "/v1/queues/jobs/pop?max=51",
            b"",
            StatusCode::BAD_REQUEST,
            "bad_parameter",
        ),
        case(
            "unknown query parameter",
            Method::POST,
            "/v1/queues/jobs/pop?wait=5",
            b"",
            StatusCode::BAD_REQUEST,
            "bad_parameter",
        ),
        case(
            "unknown pop path",
            Method::POST,
            "/v1/queues/jobs/pop?path=sideways",
            b"",
            StatusCode::BAD_REQUEST,
            "bad_parameter",
        ),
        case(
            "direct pop with a wait",
            Method::POST,
            "/v1/queues/jobs/pop?path=direct&wait_ms=5",
            b"",
            StatusCode::BAD_REQUEST,
            "bad_parameter",
        ),
        case(
            "wrong method on pop",
            Method::GET,
            "/v1/queues/jobs/pop",
            b"",
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
        ),
        case(
            "wrong method on items",
            Method::DELETE,
            "/v1/queues/jobs/items",
            b"",
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
        ),
        case(
            "unknown route",
            Method::GET,
            "/v1/nothing/here",
            b"",
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        case(
            "priority not a number",
            Method::POST,
            "/v1/pqueues/jobs/items?priority=high",
            b"x",
            StatusCode::BAD_REQUEST,
            "bad_priority",
        ),
        case(
            "priority out of range",
            Method::POST,
            "/v1/pqueues/jobs/items?priority=9223372036854775808",
            b"x",
            StatusCode::BAD_REQUEST,
            "bad_priority",
        ),
        case(
            "priority pop without end",
            Method::POST,
            "/v1/pqueues/jobs/pop",
            b"",
            StatusCode::BAD_REQUEST,
            "bad_end",
        ),
        case(
            "priority peek with a bad end",
            Method::GET,
            "/v1/pqueues/jobs/peek?end=middle",
            b"",
            StatusCode::BAD_REQUEST,
            "bad_end",
        ),
    ];
    let mut missing = case(
        "missing token",
        Method::POST,
        "/v1/queues/jobs/pop",
        b"",
        StatusCode::UNAUTHORIZED,
        "unauthorized",
    );
    missing.token = None;
    let mut wrong = case(
        "wrong token",
        Method::POST,
        "/v1/queues/jobs/pop",
        b"",
        StatusCode::UNAUTHORIZED,
        "unauthorized",
    );
    wrong.token = Some("guess");
    cases.push(missing);
    cases.push(wrong);
    assert!(cases.len() >= 12);

    for case in cases {
        let before = everything(&daemon.store).await;
        let mut request = client
            .request(case.method.clone(), format!("{}{}", daemon.url, case.path))
            .body(case.body.clone());
        if let Some(token) = case.token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.unwrap();
        let status = response.status();
        let body: serde_json::Value = response
            .json()
            .await
            .unwrap_or_else(|e| panic!("{}: the error body is JSON ({e})", case.name));
        assert_eq!(status, case.status, "{}: status ({body})", case.name);
        assert_eq!(
            body["error"]["code"], case.code,
            "{}: code ({body})",
            case.name
        );
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{}: message",
            case.name
        );
        assert_eq!(
            everything(&daemon.store).await,
            before,
            "{}: the store changed",
            case.name
        );
    }
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_poll_returns_the_item_pushed_while_it_waited() {
    let daemon = Daemon::start(|_| {}).await;
    let client = http();
    let url = daemon.url.clone();
    let waiting = {
        let (client, url) = (client.clone(), url.clone());
        tokio::spawn(async move {
            client
                .post(format!("{url}/v1/queues/lp/pop?wait_ms=30000"))
                .send()
                .await
                .unwrap()
        })
    };
    common::eventually("the pop is waiting", Duration::from_secs(30), || async {
        let stats: serde_json::Value = client
            .get(format!("{url}/v1/queues/lp"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        stats["waiting"] == 1
    })
    .await;
    client
        .post(format!("{url}/v1/queues/lp/items"))
        .body("hello")
        .send()
        .await
        .unwrap();
    let response = waiting.await.unwrap();
    // 200, not the 204 a wait that ran out would give.
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.bytes().await.unwrap(), "hello");
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_long_polls_then_two_hundred_pushes_each_delivered_once() {
    let daemon = Daemon::start(|_| {}).await;
    let client = http();
    let url = daemon.url.clone();
    let mut polls = Vec::new();
    for _ in 0..200 {
        let (client, url) = (client.clone(), url.clone());
        polls.push(tokio::spawn(async move {
            let response = client
                .post(format!("{url}/v1/queues/many/pop?wait_ms=60000"))
                .send()
                .await
                .unwrap();
            assert_eq!(
                response.status(),
                StatusCode::OK,
                "every long poll gets an item"
            );
            String::from_utf8(response.bytes().await.unwrap().to_vec()).unwrap()
        }));
    }
    common::eventually("200 pops waiting", Duration::from_secs(60), || async {
        let stats: serde_json::Value = client
            .get(format!("{url}/v1/queues/many"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        stats["waiting"] == 200
    })
    .await;
    for n in 0..200 {
        let pushed = client
            .post(format!("{url}/v1/queues/many/items"))
            .body(format!("item-{n}"))
            .send()
            .await
            .unwrap();
        assert_eq!(pushed.status(), StatusCode::CREATED);
    }
    let mut got = HashSet::new();
    for poll in polls {
        assert!(
            got.insert(poll.await.unwrap()),
            "an item was delivered twice"
        );
    }
    let expected: HashSet<String> = (0..200).map(|n| format!("item-{n}")).collect();
    assert_eq!(got, expected);
    daemon.stop().await;
}
