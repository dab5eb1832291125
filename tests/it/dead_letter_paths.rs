//! The paths that move an item between queues, over HTTP against the real
//! daemon, for what each keeps of the item: dead-lettering (by nack and by
//! lease expiry) and redrive, for delivery counts, priorities, delays and
//! dead-letter origins; and dead-letter queues by role (named by a
//! setting) that must not dead-letter again.

use crate::common;

use std::time::Duration;

use common::client::Client;
use common::daemon::{Daemon, get_json, http};
use reqwest::StatusCode;
use serde_json::{Value, json};

const LEASE_MS: u64 = 600_000;
/// How long a test waits for an event (a lease expiry swept by the timer).
const BOUND: Duration = Duration::from_secs(60);

fn header(response: &reqwest::Response, name: &str) -> Option<String> {
    response
        .headers()
        .get(name)
        .map(|value| value.to_str().unwrap().to_string())
}

async fn post(url: String) -> reqwest::Response {
    http().post(url).send().await.unwrap()
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

/// A leased pop of `queue` (a `/v1/queues` or `/v1/pqueues` path prefix
/// `base`): (body, receipt, delivery count, dead-letter origin).
async fn pop_leased(url: &str, base: &str) -> Option<(String, String, u64, Option<String>)> {
    let response = post(format!("{url}{base}/pop?lease_ms={LEASE_MS}")).await;
    if response.status() == StatusCode::NO_CONTENT {
        return None;
    }
    assert_eq!(response.status(), StatusCode::OK, "leased pop of {base}");
    let receipt = header(&response, "hotq-receipt").unwrap();
    let count = header(&response, "hotq-delivery-count")
        .unwrap()
        .parse()
        .unwrap();
    let from = header(&response, "hotq-dead-letter-from");
    Some((response.text().await.unwrap(), receipt, count, from))
}

/// Nacks `receipt` on `base`: the answer's outcome.
async fn nack(url: &str, base: &str, receipt: &str) -> String {
    let response = post(format!("{url}{base}/nack/{receipt}")).await;
    assert_eq!(response.status(), StatusCode::OK, "nack on {base}");
    let answer: Value = response.json().await.unwrap();
    answer["outcome"].as_str().unwrap().to_string()
}

/// A dead-letter queue named by a setting is a dead-letter queue (the docs:
/// "Dead-letter queues do not dead-letter again"): an item nacked there any
/// number of times stays there, keeping the origin a redrive returns it to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_queue_named_by_a_setting_does_not_dead_letter_again() {
    let daemon = Daemon::start(|_| {}).await;
    let url = &daemon.url;
    set_settings(
        url,
        "jobs",
        json!({"max_deliveries": 1, "dead_letter_queue": "graveyard"}),
    )
    .await;
    // A second origin, so the dead letter's own origin is what a redrive
    // has to go by.
    set_settings(url, "other", json!({"dead_letter_queue": "graveyard"})).await;
    Client::new(url).push("jobs", "poison").await;
    let (_, receipt, _, _) = pop_leased(url, "/v1/queues/jobs").await.unwrap();
    assert_eq!(
        nack(url, "/v1/queues/jobs", &receipt).await,
        "dead_lettered"
    );
    // Many more deliveries than the default max_deliveries (5).
    for delivery in 1..=8u64 {
        let (body, receipt, count, from) = pop_leased(url, "/v1/queues/graveyard").await.unwrap();
        assert_eq!((body.as_str(), count), ("poison", delivery));
        assert_eq!(from.as_deref(), Some("jobs"));
        assert_eq!(
            nack(url, "/v1/queues/graveyard", &receipt).await,
            "requeued"
        );
    }
    let stats = Client::new(url).stats("graveyard.dead").await;
    assert_eq!(stats.depth, 0, "{stats}");
    let post_redrive = post(format!("{url}/v1/queues/graveyard/redrive")).await;
    assert_eq!(post_redrive.status(), StatusCode::OK);
    let (body, _, count, from) = pop_leased(url, "/v1/queues/jobs").await.unwrap();
    assert_eq!((body.as_str(), count, from), ("poison", 1, None));
    // What the settings say is what happens.
    let settings = get_json(&format!("{url}/v1/queues/graveyard/settings")).await;
    assert_eq!(
        settings["settings"]["max_deliveries"],
        Value::Null,
        "{settings}"
    );
    daemon.stop().await;
}

/// The timer's path: a grouped item whose lease expires out of deliveries
/// is dead-lettered with its group, its origin and its delivery count; its
/// group's next item is released; redriven while that one is out, it waits
/// behind it and comes back with a fresh delivery count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_grouped_lease_is_dead_lettered_with_its_group() {
    let daemon = Daemon::start(|_| {}).await;
    let url = &daemon.url;
    set_settings(url, "expiring", json!({"max_deliveries": 1})).await;
    for body in ["e-0", "e-1"] {
        let pushed = post_body(format!("{url}/v1/queues/expiring/items?group=g"), body).await;
        assert_eq!(pushed.status(), StatusCode::CREATED);
    }
    let short = post(format!("{url}/v1/queues/expiring/pop?lease_ms=50")).await;
    assert_eq!(short.text().await.unwrap(), "e-0");
    // Never acked: the timer dead-letters it at its expiry.
    common::eventually("the expired lease's dead letter", BOUND, || async {
        Client::new(url).depth("expiring.dead").await == 1
    })
    .await;
    let listed = get_json(&format!("{url}/v1/queues/expiring.dead/items")).await;
    let dead = &listed["items"][0];
    assert_eq!(
        (
            &dead["payload"],
            &dead["group"],
            &dead["dead_letter_from"],
            &dead["dead_letter_deliveries"]
        ),
        (&json!("e-0"), &json!("g"), &json!("expiring"), &json!(1)),
        "{listed}"
    );
    let (body, next, _, _) = pop_leased(url, "/v1/queues/expiring").await.unwrap();
    assert_eq!(body, "e-1", "the group's next item was released");
    let redriven = post(format!("{url}/v1/queues/expiring.dead/redrive")).await;
    assert_eq!(redriven.status(), StatusCode::OK);
    assert!(
        pop_leased(url, "/v1/queues/expiring").await.is_none(),
        "e-0 handed out while e-1 of its group is out"
    );
    let acked = post(format!("{url}/v1/queues/expiring/ack/{next}")).await;
    assert_eq!(acked.status(), StatusCode::NO_CONTENT);
    let (body, _, count, from) = pop_leased(url, "/v1/queues/expiring").await.unwrap();
    assert_eq!((body.as_str(), count, from), ("e-0", 1, None));
    daemon.stop().await;
}

async fn post_body(url: String, body: &'static str) -> reqwest::Response {
    http().post(url).body(body).send().await.unwrap()
}
