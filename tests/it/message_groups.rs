//! Message groups over HTTP against the real daemon: push order within a
//! group and at most one item of a group out at a time, checked from the
//! workers' own records, while the groups progress in parallel; with
//! leases (acks, nacks, expiries) and with plain pops whose callers hang
//! up; the 400s; what stats and purge say about items behind group heads.

use crate::common;
use hotq::store::Store;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use common::client::Client;
use common::daemon::{Daemon, http};
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// How long a test waits for the whole run, or for an event.
const BOUND: Duration = Duration::from_secs(120);

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

fn header(response: &reqwest::Response, name: &str) -> Option<String> {
    response
        .headers()
        .get(name)
        .map(|value| value.to_str().unwrap().to_string())
}

/// Pushes `per_group` items into each of `groups` groups, interleaved
/// (`g{group}-{seq}`), in batches whose elements name their group.
async fn push_groups(url: &str, queue: &str, groups: usize, per_group: usize) {
    for seq in 0..per_group {
        let batch: Vec<Value> = (0..groups)
            .map(|group| {
                json!({"item": BASE64.encode(format!("g{group}-{seq}")), "group": format!("g{group}")})
            })
            .collect();
        let response = http()
            .post(format!("{url}/v1/queues/{queue}/items:batch"))
            .json(&batch)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::CREATED);
    }
}

fn parse(body: &str) -> (usize, usize) {
    let (group, seq) = body.trim_start_matches('g').split_once('-').unwrap();
    (group.parse().unwrap(), seq.parse().unwrap())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Acked,
    Nacked,
    /// Never acked (or acked too late): out until its lease expired.
    Expired,
}

/// One delivery, as its worker saw it.
#[derive(Debug, Clone, Copy)]
struct Delivery {
    group: usize,
    seq: usize,
    delivery_count: u32,
    /// When the pop's answer arrived (µs since the epoch).
    popped_us: u64,
    /// When the item stopped being out at the latest, from the worker's
    /// side: the ack or nack was sent, or the lease's expiry.
    released_us: u64,
    outcome: Outcome,
}

const GROUPS: usize = 16;
const PER_GROUP: usize = 12;
const LEASE_MS: u64 = 1_500;

/// What a worker does with delivery `count` of item `seq`: some items are
/// nacked, some abandoned, once each (never near `max_deliveries`).
fn plan(group: usize, seq: usize, count: u32) -> Outcome {
    match ((group + seq) % 5, count) {
        (2, 1) => Outcome::Expired,
        (4, 1) => Outcome::Nacked,
        _ => Outcome::Acked,
    }
}

async fn leased_worker(url: String, queue: String, acked: Arc<AtomicUsize>) -> Vec<Delivery> {
    let client = http();
    let mut seen = Vec::new();
    while acked.load(Ordering::SeqCst) < GROUPS * PER_GROUP {
        let response = client
            .post(format!(
                "{url}/v1/queues/{queue}/pop?lease_ms={LEASE_MS}&wait_ms=200"
            ))
            .send()
            .await
            .unwrap();
        let popped_us = now_us();
        if response.status() == StatusCode::NO_CONTENT {
            continue;
        }
        assert_eq!(response.status(), StatusCode::OK);
        let receipt = header(&response, "hotq-receipt").unwrap();
        let count: u32 = header(&response, "hotq-delivery-count")
            .unwrap()
            .parse()
            .unwrap();
        let expires_at_ms: u64 = header(&response, "hotq-lease-expires-at-ms")
            .unwrap()
            .parse()
            .unwrap();
        let group_header = header(&response, "hotq-group").unwrap();
        let (group, seq) = parse(&response.text().await.unwrap());
        assert_eq!(group_header, format!("g{group}"));
        // Some work, so that an item of the group popped meanwhile would
        // overlap this one in the records.
        tokio::time::sleep(Duration::from_millis(3)).await;
        let mut outcome = plan(group, seq, count);
        let mut released_us = now_us();
        match outcome {
            Outcome::Acked => {
                let ack = client
                    .post(format!("{url}/v1/queues/{queue}/ack/{receipt}"))
                    .send()
                    .await
                    .unwrap();
                if ack.status() == StatusCode::NO_CONTENT {
                    acked.fetch_add(1, Ordering::SeqCst);
                } else {
                    // Too slow for the lease (a loaded machine): it expires.
                    assert_eq!(ack.status(), StatusCode::CONFLICT);
                    outcome = Outcome::Expired;
                }
            }
            Outcome::Nacked => {
                let nack = client
                    .post(format!("{url}/v1/queues/{queue}/nack/{receipt}"))
                    .send()
                    .await
                    .unwrap();
                if nack.status() != StatusCode::OK {
                    assert_eq!(nack.status(), StatusCode::CONFLICT);
                    outcome = Outcome::Expired;
                }
            }
            Outcome::Expired => {}
        }
        if outcome == Outcome::Expired {
            released_us = expires_at_ms * 1_000;
        }
        seen.push(Delivery {
            group,
            seq,
            delivery_count: count,
            popped_us,
            released_us,
            outcome,
        });
    }
    seen
}

/// 64 contending leased workers on 16 groups: within each group every
/// delivery comes after the previous one was released, items in push
/// order (an item nacked or expired comes again before the next); every
/// item acked once; and the groups were out at the same time.
async fn leased_workers_keep_each_group_in_order_and_one_out_while_groups_run_in_parallel<
    S: Store,
>(
    store: S,
) {
    let daemon = Daemon::start_on(store, |_| {}).await;
    let url = daemon.url.clone();
    let queue = "grouped-leased";
    push_groups(&url, queue, GROUPS, PER_GROUP).await;
    let stats_before = Client::new(&url).stats(queue).await;
    assert_eq!(stats_before.depth, GROUPS as i64, "{stats_before}");
    assert_eq!(
        stats_before.grouped,
        (GROUPS * (PER_GROUP - 1)) as i64,
        "{stats_before}"
    );

    let acked = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..64)
        .map(|_| tokio::spawn(leased_worker(url.clone(), queue.into(), acked.clone())))
        .collect();
    let mut deliveries = Vec::new();
    for worker in workers {
        deliveries.extend(
            tokio::time::timeout(BOUND, worker)
                .await
                .expect("the workers drain the queue in time")
                .unwrap(),
        );
    }

    let mut by_group: BTreeMap<usize, Vec<Delivery>> = BTreeMap::new();
    for delivery in &deliveries {
        by_group.entry(delivery.group).or_default().push(*delivery);
    }
    assert_eq!(by_group.len(), GROUPS);
    let mut expired = 0;
    let mut nacked = 0;
    for (group, list) in &mut by_group {
        list.sort_by_key(|d| d.popped_us);
        let mut expected_seq = 0;
        for pair in list.windows(2) {
            let (previous, next) = (pair[0], pair[1]);
            assert!(
                next.popped_us >= previous.released_us,
                "group {group}: {next:?} was popped while {previous:?} was out"
            );
        }
        for delivery in list.iter() {
            assert_eq!(
                delivery.seq, expected_seq,
                "group {group}: delivered out of push order: {list:?}"
            );
            match delivery.outcome {
                Outcome::Acked => expected_seq += 1,
                Outcome::Nacked => nacked += 1,
                Outcome::Expired => expired += 1,
            }
        }
        assert_eq!(
            expected_seq, PER_GROUP,
            "group {group}: every item acked once"
        );
        assert!(list.iter().all(|d| d.delivery_count <= 3), "{list:?}");
    }
    assert!(
        expired > 0 && nacked > 0,
        "expired {expired}, nacked {nacked}"
    );

    // Parallel: every group had an item out while another group's was.
    for (group, list) in &by_group {
        let overlapped = list.iter().any(|mine| {
            deliveries.iter().any(|other| {
                other.group != *group
                    && other.popped_us < mine.released_us
                    && mine.popped_us < other.released_us
            })
        });
        assert!(overlapped, "group {group} never ran beside another group");
    }
    let mut most_out = 0;
    for mine in &deliveries {
        let out: BTreeSet<usize> = deliveries
            .iter()
            .filter(|o| o.popped_us <= mine.popped_us && mine.popped_us < o.released_us)
            .map(|o| o.group)
            .collect();
        most_out = most_out.max(out.len());
    }
    assert!(most_out >= 2, "at most {most_out} groups were out at once");
    eprintln!(
        "{} deliveries, {nacked} nacked, {expired} expired; up to {most_out} groups out at once",
        deliveries.len()
    );

    let after = Client::new(&url).stats(queue).await;
    assert_eq!(
        (after.depth, after.leased, after.delayed, after.grouped),
        (0, 0, 0, 0),
        "{after}"
    );
    daemon.stop().await;
}

/// Plain pops from many workers while callers hang up mid-wait: each item
/// is delivered once, none lost; within a group no item arrives before an
/// earlier one was even asked for. Pops waiting in memory, or as stored
/// requests (results collected, or reaped, by their requesters).
async fn plain_pops_with_hang_ups<S: Store>(store: S, requests_in_memory: bool) {
    const PLAIN_GROUPS: usize = 8;
    const PLAIN_PER_GROUP: usize = 25;
    const HANG_UPS: usize = 20;
    let daemon = Daemon::start_on(store, |config| {
        config.wait_max_ms = 600_000;
        config.staging.requests_in_memory = requests_in_memory;
    })
    .await;
    let url = daemon.url.clone();
    let queue = "grouped-plain";
    // Callers waiting in line that hang up as the items arrive: the line
    // may hand them items (rarely: the daemon notices a hang-up at once),
    // which go back to their group; the put-backs are printed.
    let address = url.trim_start_matches("http://").to_string();
    let mut hanging = Vec::new();
    for _ in 0..HANG_UPS {
        let mut stream = TcpStream::connect(&address).await.unwrap();
        let request = format!(
            "POST /v1/queues/{queue}/pop?wait_ms=600000 HTTP/1.1\r\nHost: hotq\r\ncontent-length: 0\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        hanging.push(stream);
    }
    common::eventually("the hanging pops wait", BOUND, || async {
        Client::new(&url).stats(queue).await.waiting == HANG_UPS as i64
    })
    .await;
    let pushing = {
        let url = url.clone();
        tokio::spawn(async move { push_groups(&url, queue, PLAIN_GROUPS, PLAIN_PER_GROUP).await })
    };
    drop(hanging);
    pushing.await.unwrap();

    let total = PLAIN_GROUPS * PLAIN_PER_GROUP;
    let delivered = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..32)
        .map(|_| {
            let (url, delivered) = (url.clone(), delivered.clone());
            tokio::spawn(async move {
                let client = http();
                let mut seen = Vec::new();
                while delivered.load(Ordering::SeqCst) < total {
                    let asked_us = now_us();
                    let response = client
                        .post(format!("{url}/v1/queues/{queue}/pop?wait_ms=200"))
                        .send()
                        .await
                        .unwrap();
                    if response.status() == StatusCode::NO_CONTENT {
                        continue;
                    }
                    assert_eq!(response.status(), StatusCode::OK);
                    let (group, seq) = parse(&response.text().await.unwrap());
                    seen.push((group, seq, asked_us, now_us()));
                    delivered.fetch_add(1, Ordering::SeqCst);
                }
                seen
            })
        })
        .collect();
    let mut seen = Vec::new();
    for worker in workers {
        seen.extend(tokio::time::timeout(BOUND, worker).await.unwrap().unwrap());
    }
    assert_eq!(seen.len(), total, "each item delivered once");
    let mut by_group: BTreeMap<usize, BTreeMap<usize, (u64, u64)>> = BTreeMap::new();
    for (group, seq, asked_us, answered_us) in seen {
        let previous = by_group
            .entry(group)
            .or_default()
            .insert(seq, (asked_us, answered_us));
        assert!(previous.is_none(), "g{group}-{seq} delivered twice");
    }
    for (group, items) in &by_group {
        assert_eq!(items.len(), PLAIN_PER_GROUP, "group {group} lost items");
        // The next item is released only after the previous one reached
        // its pop: it cannot arrive before that pop was sent.
        for (seq, (_, answered_us)) in items {
            for (earlier, (asked_us, _)) in items.range(..seq) {
                assert!(
                    answered_us > asked_us,
                    "group {group}: item {seq} arrived before item {earlier} was asked for"
                );
            }
        }
    }
    common::eventually("the queue is empty", BOUND, || async {
        let after = Client::new(&url).stats(queue).await;
        after.depth == 0 && after.grouped == 0 && after.waiting == 0
    })
    .await;
    // Informational: how many items went back from callers who hung up.
    let put_back =
        common::daemon::metric_sum(&daemon.metrics_url, "hotq_put_backs_total", &[]).await;
    eprintln!("requests_in_memory {requests_in_memory}: {put_back} put back");
    daemon.stop().await;
}

async fn groups_on_priority_queues_and_invalid_keys_are_refused<S: Store>(store: S) {
    let daemon = Daemon::start_on(store, |_| {}).await;
    let url = &daemon.url;
    let refused = |response: reqwest::Response, code: &'static str| async move {
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], code, "{body}");
    };
    let response = http()
        .post(format!("{url}/v1/pqueues/p/items?priority=1&group=g"))
        .body("x")
        .send()
        .await
        .unwrap();
    refused(response, "groups_need_fifo").await;
    let too_long = "a".repeat(129);
    for bad in ["a%20b", "", "%C3%A9", too_long.as_str()] {
        let response = http()
            .post(format!("{url}/v1/queues/q/items?group={bad}"))
            .body("x")
            .send()
            .await
            .unwrap();
        refused(response, "bad_group").await;
    }
    let response = http()
        .post(format!("{url}/v1/queues/q/items:batch"))
        .json(&json!([{"item": BASE64.encode("x"), "group": "no spaces"}]))
        .send()
        .await
        .unwrap();
    refused(response, "bad_group").await;
    let after = Client::new(url).stats("q").await;
    assert_eq!((after.depth, after.grouped), (0, 0));
    daemon.stop().await;
}

/// Stats count items behind heads apart from `depth`; a purge drops them
/// and the visible heads, keeps a leased head, and an item pushed after
/// the purge waits behind that head until it is acked.
async fn purge_drops_waiting_items_and_a_leased_head_still_holds_its_group<S: Store>(store: S) {
    let daemon = Daemon::start_on(store, |_| {}).await;
    let url = &daemon.url;
    let queue = "grouped-purge";
    let push = |group: &'static str, body: &'static str| async move {
        let response = http()
            .post(format!("{url}/v1/queues/{queue}/items?group={group}"))
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::CREATED);
    };
    for body in ["a0", "a1", "a2"] {
        push("a", body).await;
    }
    let popped = http()
        .post(format!("{url}/v1/queues/{queue}/pop?lease_ms=60000"))
        .send()
        .await
        .unwrap();
    assert_eq!(popped.status(), StatusCode::OK);
    let receipt = header(&popped, "hotq-receipt").unwrap();
    assert_eq!(popped.text().await.unwrap(), "a0");
    let leases = common::daemon::get_json(&format!("{url}/v1/queues/{queue}/leases")).await;
    assert_eq!(leases["leases"][0]["group"], "a", "{leases}");
    for body in ["b0", "b1", "b2"] {
        push("b", body).await;
    }
    let before = Client::new(url).stats(queue).await;
    assert_eq!(
        (before.depth, before.leased, before.grouped),
        (1, 1, 4),
        "{before}"
    );
    let purged: Value = http()
        .post(format!("{url}/v1/queues/{queue}/purge"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(purged["purged"], 5, "{purged}");
    let after = Client::new(url).stats(queue).await;
    assert_eq!(
        (after.depth, after.leased, after.grouped),
        (0, 1, 0),
        "{after}"
    );
    // b lost its head: a push to it is visible at once; a's head is out.
    push("b", "b3").await;
    push("a", "a3").await;
    let after = Client::new(url).stats(queue).await;
    assert_eq!((after.depth, after.grouped), (1, 1), "{after}");
    let ack = http()
        .post(format!("{url}/v1/queues/{queue}/ack/{receipt}"))
        .send()
        .await
        .unwrap();
    assert_eq!(ack.status(), StatusCode::NO_CONTENT);
    let mut rest = Vec::new();
    for _ in 0..2 {
        let popped = http()
            .post(format!("{url}/v1/queues/{queue}/pop"))
            .send()
            .await
            .unwrap();
        assert_eq!(popped.status(), StatusCode::OK);
        rest.push(popped.text().await.unwrap());
    }
    rest.sort();
    assert_eq!(rest, ["a3", "b3"]);

    // Delete drops waiting items and group states: a push to a group whose
    // head was out is visible at once afterwards.
    for body in ["c0", "c1", "c2"] {
        push("c", body).await;
    }
    let deleted = http()
        .delete(format!("{url}/v1/queues/{queue}"))
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), StatusCode::OK);
    push("c", "c3").await;
    let after = Client::new(url).stats(queue).await;
    assert_eq!((after.depth, after.grouped), (1, 0), "{after}");
    daemon.stop().await;
}

crate::on_every_backend! {
    leased_workers_keep_each_group_in_order_and_one_out_while_groups_run_in_parallel [4] => leased_workers_keep_each_group_in_order_and_one_out_while_groups_run_in_parallel();
    groups_on_priority_queues_and_invalid_keys_are_refused [2] => groups_on_priority_queues_and_invalid_keys_are_refused();
    purge_drops_waiting_items_and_a_leased_head_still_holds_its_group [2] => purge_drops_waiting_items_and_a_leased_head_still_holds_its_group();
    plain_pops_with_callers_hanging_up_deliver_each_grouped_item_once_in_order_in_memory [4] => plain_pops_with_hang_ups(true);
    plain_pops_with_callers_hanging_up_deliver_each_grouped_item_once_in_order_stored [4] => plain_pops_with_hang_ups(false);
}
