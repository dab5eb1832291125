//! At-least-once delivery over HTTP: leased pops, ack, nack, extend,
//! redelivery after a worker dies, the dead-letter queue and its re-drive,
//! delayed items, and the errors for receipts that cannot be acted on.

use crate::common;
use hotq::store::Store;

use std::time::Duration;

use common::client::Client;
use common::daemon::{Daemon, http};
use hotq::envelope::{End, now_ms};
use hotq::keys::{QueueKeys, QueueName};
use hotq::staging::direct::try_pop;
use reqwest::{Response, StatusCode};
use serde_json::Value;

/// A leased item as the API hands it out.
#[derive(Debug)]
struct Leased {
    body: String,
    receipt: String,
    delivery_count: u32,
    expires_at_ms: u64,
}

fn header(response: &Response, name: &str) -> Option<String> {
    response
        .headers()
        .get(name)
        .map(|value| value.to_str().unwrap().to_string())
}

async fn leased(response: Response) -> Option<Leased> {
    if response.status() == StatusCode::NO_CONTENT {
        return None;
    }
    assert_eq!(response.status(), StatusCode::OK);
    let receipt = header(&response, "hotq-receipt").expect("a receipt header");
    let delivery_count = header(&response, "hotq-delivery-count")
        .expect("a delivery count header")
        .parse()
        .unwrap();
    let expires_at_ms = header(&response, "hotq-lease-expires-at-ms")
        .unwrap()
        .parse()
        .unwrap();
    Some(Leased {
        body: response.text().await.unwrap(),
        receipt,
        delivery_count,
        expires_at_ms,
    })
}

async fn pop_leased(url: &str, queue: &str, lease_ms: u64, wait_ms: u64) -> Option<Leased> {
    let response = http()
        .post(format!(
            "{url}/v1/queues/{queue}/pop?lease_ms={lease_ms}&wait_ms={wait_ms}"
        ))
        .send()
        .await
        .unwrap();
    leased(response).await
}

async fn post(url: String) -> Response {
    http().post(url).send().await.unwrap()
}

async fn error_code(response: Response) -> (StatusCode, String) {
    let status = response.status();
    let body: Value = response.json().await.unwrap();
    (status, body["error"]["code"].as_str().unwrap().to_string())
}

async fn a_worker_that_never_acks_sees_its_item_redelivered_with_count_2<S: Store>(store: S) {
    let daemon = Daemon::start_on(store, |_| {}).await;
    let url = &daemon.url;
    Client::new(url).push("jobs", "job-1").await;

    let first = pop_leased(url, "jobs", 200, 0).await.unwrap();
    assert_eq!((first.body.as_str(), first.delivery_count), ("job-1", 1));
    assert_eq!(first.receipt.len(), 32);
    let during = Client::new(url).stats("jobs").await;
    assert_eq!((during.depth, during.leased), (0, 1));

    // The worker "dies": it never acks. A long poll gets the redelivery.
    let second = pop_leased(url, "jobs", 60_000, 30_000).await.unwrap();
    assert_eq!((second.body.as_str(), second.delivery_count), ("job-1", 2));
    assert_ne!(second.receipt, first.receipt);
    assert!(
        now_ms() >= first.expires_at_ms,
        "redelivered only after the first lease expired"
    );

    // The dead worker's receipt no longer acts on the item.
    let late = post(format!("{url}/v1/queues/jobs/ack/{}", first.receipt)).await;
    assert_eq!(
        error_code(late).await,
        (StatusCode::NOT_FOUND, "unknown_receipt".into())
    );
    let ack = post(format!("{url}/v1/queues/jobs/ack/{}", second.receipt)).await;
    assert_eq!(ack.status(), StatusCode::NO_CONTENT);
    let again = post(format!("{url}/v1/queues/jobs/ack/{}", second.receipt)).await;
    assert_eq!(again.status(), StatusCode::NOT_FOUND, "an ack acts once");
    let after = Client::new(url).stats("jobs").await;
    assert_eq!((after.depth, after.leased), (0, 0));
    daemon.stop().await;
}

async fn an_item_nacked_max_deliveries_times_lands_in_the_dead_letter_queue<S: Store>(store: S) {
    let daemon = Daemon::start_on(store, |config| {
        config.leases.queues.insert(
            "picky".into(),
            hotq::config::QueueLeaseSection { max_deliveries: 2 },
        );
    })
    .await;
    let url = &daemon.url;
    for (queue, max_deliveries) in [("poison", 5), ("picky", 2)] {
        Client::new(url).push(queue, "bad-input").await;
        for delivery in 1..=max_deliveries {
            let item = pop_leased(url, queue, 60_000, 0).await.unwrap();
            assert_eq!(item.delivery_count, delivery);
            let nack = post(format!("{url}/v1/queues/{queue}/nack/{}", item.receipt)).await;
            assert_eq!(nack.status(), StatusCode::OK);
            // The nack says where the item went: the last one dead-letters.
            let nack: Value = nack.json().await.unwrap();
            if delivery == max_deliveries {
                assert_eq!(nack["outcome"], "dead_lettered", "{nack}");
                assert_eq!(nack["dead_letter_queue"], format!("{queue}.dead"));
            } else {
                assert_eq!(nack["outcome"], "requeued", "{nack}");
            }
        }
        assert!(
            pop_leased(url, queue, 60_000, 0).await.is_none(),
            "{queue}: out of deliveries, not back in the queue"
        );
        let dead = format!("{queue}.dead");
        assert_eq!(Client::new(url).stats(&dead).await.depth, 1);
        let peek = http()
            .get(format!("{url}/v1/queues/{dead}/peek"))
            .send()
            .await
            .unwrap();
        assert_eq!(peek.status(), StatusCode::OK);
        assert_eq!(
            header(&peek, "hotq-dead-letter-from").as_deref(),
            Some(queue)
        );
        let deliveries = max_deliveries.to_string();
        assert_eq!(
            header(&peek, "hotq-dead-letter-deliveries").as_deref(),
            Some(deliveries.as_str())
        );
        assert_eq!(peek.text().await.unwrap(), "bad-input");

        // Re-drive: back to its queue as a fresh item.
        let redriven: Value = post(format!("{url}/v1/queues/{dead}/redrive"))
            .await
            .json()
            .await
            .unwrap();
        assert_eq!(redriven["redriven"], 1);
        assert_eq!(Client::new(url).stats(&dead).await.depth, 0);
        let item = pop_leased(url, queue, 60_000, 0).await.unwrap();
        assert_eq!((item.body.as_str(), item.delivery_count), ("bad-input", 1));
        let ack = post(format!("{url}/v1/queues/{queue}/ack/{}", item.receipt)).await;
        assert_eq!(ack.status(), StatusCode::NO_CONTENT);
    }
    daemon.stop().await;
}

async fn delayed_pushes_and_nacks_stay_invisible_until_due<S: Store>(store: S) {
    let daemon = Daemon::start_on(store, |_| {}).await;
    let url = &daemon.url;
    let pushed: Value = http()
        .post(format!("{url}/v1/queues/later/items?delay_ms=300"))
        .body("delayed")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let visible_at_ms = pushed["visible_at_ms"].as_u64().unwrap();
    let now = Client::new(url).stats("later").await;
    assert_eq!((now.depth, now.delayed), (0, 1));
    let first = pop_leased(url, "later", 60_000, 30_000).await.unwrap();
    assert!(now_ms() >= visible_at_ms, "not visible before its time");
    assert_eq!((first.body.as_str(), first.delivery_count), ("delayed", 1));

    let nacked_at = now_ms();
    let nack = post(format!(
        "{url}/v1/queues/later/nack/{}?delay_ms=300",
        first.receipt
    ))
    .await;
    assert_eq!(nack.status(), StatusCode::OK);
    let nack: Value = nack.json().await.unwrap();
    assert_eq!(nack["outcome"], "delayed");
    assert!(nack["visible_at_ms"].as_u64().unwrap() >= nacked_at + 300);
    assert!(pop_leased(url, "later", 60_000, 0).await.is_none());
    let second = pop_leased(url, "later", 60_000, 30_000).await.unwrap();
    assert!(
        now_ms() >= nacked_at + 300,
        "a delayed nack waits its delay"
    );
    assert_eq!(
        (second.body.as_str(), second.delivery_count),
        ("delayed", 2)
    );

    // A delayed batch keeps its order.
    let batch = http()
        .post(format!("{url}/v1/queues/later/items:batch?delay_ms=50"))
        .json(&["YQ==", "Yg==", "Yw=="])
        .send()
        .await
        .unwrap();
    assert_eq!(batch.status(), StatusCode::CREATED);
    let mut order = String::new();
    for _ in 0..3 {
        let item = pop_leased(url, "later", 60_000, 30_000).await.unwrap();
        order.push_str(&item.body);
        post(format!("{url}/v1/queues/later/ack/{}", item.receipt)).await;
    }
    assert_eq!(order, "abc");
    daemon.stop().await;
}

async fn extend_keeps_the_lease_and_max_returns_objects<S: Store>(store: S) {
    let daemon = Daemon::start_on(store, |_| {}).await;
    let url = &daemon.url;
    for body in ["a", "b", "c"] {
        Client::new(url).push("batch", body).await;
    }
    let response = post(format!("{url}/v1/queues/batch/pop?max=3&lease_ms=200")).await;
    assert_eq!(response.status(), StatusCode::OK);
    let items: Vec<Value> = response.json().await.unwrap();
    assert_eq!(items.len(), 3);
    for item in &items {
        assert_eq!(item["delivery_count"], 1);
        assert_eq!(item["receipt"].as_str().unwrap().len(), 32);
    }
    // Extended well past the original 200 ms: the items are not redelivered
    // while a long poll waits past the original expiry.
    for item in &items {
        let receipt = item["receipt"].as_str().unwrap();
        let extend = post(format!(
            "{url}/v1/queues/batch/extend/{receipt}?lease_ms=60000"
        ))
        .await;
        assert_eq!(extend.status(), StatusCode::OK);
        let extended: Value = extend.json().await.unwrap();
        let new_expiry = extended["lease_expires_at_ms"].as_u64().unwrap();
        assert!(new_expiry > item["lease_expires_at_ms"].as_u64().unwrap());
    }
    let waited_from = now_ms();
    let response = post(format!(
        "{url}/v1/queues/batch/pop?wait_ms=600&lease_ms=1000"
    ))
    .await;
    assert_eq!(response.status(), StatusCode::NO_CONTENT);
    assert!(now_ms() >= waited_from + 600);
    for item in &items {
        let receipt = item["receipt"].as_str().unwrap();
        let ack = post(format!("{url}/v1/queues/batch/ack/{receipt}")).await;
        assert_eq!(ack.status(), StatusCode::NO_CONTENT);
    }
    assert_eq!(Client::new(url).stats("batch").await.leased, 0);
    daemon.stop().await;
}

async fn receipts_that_cannot_be_acted_on_get_clear_errors<S: Store>(store: S) {
    // A timer that sweeps rarely: a lease written behind the daemon's back
    // stays expired-but-unreturned long enough to be acked late.
    let daemon = Daemon::start_on(store, |config| config.staging.reap_interval_ms = 600_000).await;
    let url = &daemon.url;
    // The timer's first sweep reads every due entry, so it must be over
    // before the lease is written: a delayed item this daemon scheduled
    // has come out. From then on nothing wakes the timer for 600 s.
    let probe = http()
        .post(format!("{url}/v1/queues/errs-probe/items?delay_ms=1"))
        .body("probe")
        .send()
        .await
        .unwrap();
    assert_eq!(probe.status(), StatusCode::CREATED);
    let api = Client::new(url);
    common::eventually(
        "the timer's first sweep",
        Duration::from_secs(60),
        || async { api.depth("errs-probe").await == 1 },
    )
    .await;
    let keys = QueueKeys::new(&QueueName::new("errs").unwrap());
    api.push("errs", "x").await;
    let items = try_pop(
        &daemon.store,
        &keys,
        (End::Front, 1, std::num::NonZeroU64::new(1)),
        &[],
    )
    .await
    .unwrap()
    .items;
    let receipt = items[0].lease.unwrap().receipt.to_string();
    common::wait_until("the 1 ms lease to expire", Duration::from_secs(10), || {
        now_ms() > items[0].lease.unwrap().expires_at_ms
    })
    .await;
    for op in ["ack", "nack", "extend"] {
        let response = post(format!("{url}/v1/queues/errs/{op}/{receipt}?lease_ms=10")).await;
        let expected = if op == "nack" {
            // nack takes no lease_ms: the parameter is refused first.
            (StatusCode::BAD_REQUEST, "bad_parameter".to_string())
        } else {
            (StatusCode::CONFLICT, "lease_expired".to_string())
        };
        assert_eq!(error_code(response).await, expected, "{op}");
    }
    let nack = post(format!("{url}/v1/queues/errs/nack/{receipt}")).await;
    assert_eq!(
        error_code(nack).await,
        (StatusCode::CONFLICT, "lease_expired".into())
    );

    // Unknown to the queue, yet issued for it: a lease that is gone.
    let unknown = hotq::lease::Receipt::for_lease(&keys, 1).to_string();
    let cases = [
        (
            format!("/v1/queues/errs/ack/{unknown}"),
            StatusCode::NOT_FOUND,
            "unknown_receipt",
        ),
        (
            "/v1/queues/errs/ack/not-a-receipt".to_string(),
            StatusCode::BAD_REQUEST,
            "invalid_receipt",
        ),
        (
            format!("/v1/queues/errs/nack/{unknown}"),
            StatusCode::NOT_FOUND,
            "unknown_receipt",
        ),
        (
            format!("/v1/queues/errs/extend/{unknown}?lease_ms=10"),
            StatusCode::NOT_FOUND,
            "unknown_receipt",
        ),
        (
            format!("/v1/queues/errs/extend/{unknown}"),
            StatusCode::BAD_REQUEST,
            "bad_parameter",
        ),
        (
            format!("/v1/queues/errs/extend/{unknown}?lease_ms=0"),
            StatusCode::BAD_REQUEST,
            "bad_parameter",
        ),
        (
            format!("/v1/queues/errs/nack/{unknown}?delay_ms=999999999999"),
            StatusCode::BAD_REQUEST,
            "bad_parameter",
        ),
        (
            "/v1/queues/errs/pop?lease_ms=0".to_string(),
            StatusCode::BAD_REQUEST,
            "bad_parameter",
        ),
        (
            "/v1/queues/errs/pop?lease_ms=99999999999".to_string(),
            StatusCode::BAD_REQUEST,
            "bad_parameter",
        ),
        (
            "/v1/queues/errs/pop?lease_ms=ten".to_string(),
            StatusCode::BAD_REQUEST,
            "bad_parameter",
        ),
        (
            "/v1/queues/errs/pop?lease_ms=10&path=direct".to_string(),
            StatusCode::BAD_REQUEST,
            "bad_parameter",
        ),
        (
            "/v1/queues/errs/items?delay_ms=-1".to_string(),
            StatusCode::BAD_REQUEST,
            "bad_parameter",
        ),
        (
            "/v1/queues/errs/redrive".to_string(),
            StatusCode::CONFLICT,
            "not_dead_letter_queue",
        ),
        (
            "/v1/queues/errs.dead/redrive?max=0".to_string(),
            StatusCode::BAD_REQUEST,
            "bad_parameter",
        ),
        (
            // Priority pops lease too; a lease of 0 ms is refused as for FIFO.
            "/v1/pqueues/errs/pop?end=min&lease_ms=0".to_string(),
            StatusCode::BAD_REQUEST,
            "bad_parameter",
        ),
        (
            format!("/v1/queues/bad%20name/ack/{unknown}"),
            StatusCode::BAD_REQUEST,
            "invalid_queue_name",
        ),
    ];
    for (path, status, code) in cases {
        let response = http()
            .post(format!("{url}{path}"))
            .body("x")
            .send()
            .await
            .unwrap();
        assert_eq!(
            error_code(response).await,
            (status, code.to_string()),
            "{path}"
        );
    }
    // None of it changed anything: the expired lease is still there, and
    // nothing else was written.
    let after = api.stats("errs").await;
    assert_eq!((after.depth, after.leased), (0, 1), "{after}");
    daemon.stop().await;
}

crate::on_every_backend! {
    a_worker_that_never_acks_sees_its_item_redelivered_with_count_2 [2] => a_worker_that_never_acks_sees_its_item_redelivered_with_count_2();
    an_item_nacked_max_deliveries_times_lands_in_the_dead_letter_queue [2] => an_item_nacked_max_deliveries_times_lands_in_the_dead_letter_queue();
    delayed_pushes_and_nacks_stay_invisible_until_due [2] => delayed_pushes_and_nacks_stay_invisible_until_due();
    extend_keeps_the_lease_and_max_returns_objects [2] => extend_keeps_the_lease_and_max_returns_objects();
    receipts_that_cannot_be_acted_on_get_clear_errors [2] => receipts_that_cannot_be_acted_on_get_clear_errors();
}
