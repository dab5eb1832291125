//! Fairness keys on priority queues (issue #40): within one priority, an
//! item of key `k` takes the count `max(last[p, k], V_p) + 720720 / w_k`
//! (`V_p`: the level's first count, or its mark when empty), so `min`
//! pops serve a level's keys in proportion to their weights, FIFO within
//! a key, while a lower priority still comes first; the order is in the
//! store (two coordinators serve the same), a nacked item returns to its
//! own tag, and `max` pops take the highest level's last tag first. Over
//! `/v1` (`hotq-fair-key`, 400 `bad_fair_key`) and RESP (`PQ PUSH … FAIR`).

use std::collections::BTreeMap;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::common;
use crate::common::daemon::{Daemon, http};
use crate::common::resp::{call, call_error, redis};
use hotq::coordinator::Coordinator;
use hotq::envelope::End;
use hotq::keys::{QueueKeys, QueueKind, QueueName};
use hotq::queue::Item;
use hotq::queue::fair::TAG_SCALE;
use hotq::queue::priority::{PriorityQueue, PushAsk};
use hotq::queue::settings::{Defaults, update};
use hotq::staging::StagingConfig;
use hotq::store::embedded::{Durability, EmbeddedStore};

/// How long a pop of a queue known to hold items may wait (never reached).
const POP_WAIT: Duration = Duration::from_secs(10);

fn queue(store: &EmbeddedStore, name: &str) -> PriorityQueue<EmbeddedStore> {
    PriorityQueue::new(store.clone(), QueueName::new(name).unwrap())
}

fn keys_of(name: &str) -> QueueKeys {
    QueueKeys::of_kind(QueueKind::Priority, &QueueName::new(name).unwrap())
}

/// Pushes `"{label}:{n}"` for `n` in `first..first + count` at `priority`
/// under fairness key `key` (`None`: no key, labelled `-`), one by one.
async fn push(
    queue: &PriorityQueue<EmbeddedStore>,
    priority: i64,
    key: Option<&str>,
    first: usize,
    count: usize,
) {
    let label = key.unwrap_or("-");
    for n in first..first + count {
        let ask = PushAsk {
            fair_key: key,
            ..PushAsk::default()
        };
        queue
            .push_one(
                format!("{label}:{n}").as_bytes(),
                priority,
                ask,
                &Defaults::default(),
            )
            .await
            .unwrap();
    }
}

async fn set(store: &EmbeddedStore, keys: &QueueKeys, change: Value) {
    let change: BTreeMap<String, Value> = serde_json::from_value(change).unwrap();
    update(store, keys, &change, &Defaults::default())
        .await
        .unwrap()
        .unwrap();
}

fn parse(item: &Item) -> (String, usize) {
    let text = String::from_utf8(item.payload.clone()).unwrap();
    let (label, n) = text.split_once(':').unwrap();
    (label.to_string(), n.parse().unwrap())
}

fn count(labels: &[String], label: &str) -> usize {
    labels.iter().filter(|l| *l == label).count()
}

/// Noisy (weight 1) pushes `5 * per_key` at priority 5, then `a` (weight
/// 3) and `b` (weight 2) `per_key` each at the same priority.
async fn noisy_then_weighted(store: &EmbeddedStore, name: &str, per_key: usize) {
    let pq = queue(store, name);
    set(
        store,
        &keys_of(name),
        json!({"fair_weights": {"a": 3, "b": 2}}),
    )
    .await;
    push(&pq, 5, Some("noisy"), 0, 5 * per_key).await;
    push(&pq, 5, Some("a"), 0, per_key).await;
    push(&pq, 5, Some("b"), 0, per_key).await;
}

/// After noisy's first item, each unit of virtual time serves noisy 1, `a`
/// 3 and `b` 2: the first `1 + 6m` pops hold exactly `1 + m`, `3m`, `2m`
/// for every `m` up to `rounds`; each key in push order.
fn assert_exact_shares(order: &[(String, usize)], rounds: usize) {
    let labels: Vec<String> = order.iter().map(|(label, _)| label.clone()).collect();
    for m in 0..=rounds {
        let window = &labels[..1 + 6 * m];
        assert_eq!(
            (
                count(window, "noisy"),
                count(window, "a"),
                count(window, "b")
            ),
            (1 + m, 3 * m, 2 * m),
            "the first {} pops",
            window.len()
        );
    }
    let mut numbers: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (label, n) in order {
        numbers.entry(label).or_default().push(*n);
    }
    for (label, seen) in numbers {
        assert!(
            seen.windows(2).all(|w| w[0] < w[1]),
            "{label} out of push order: {seen:?}"
        );
    }
}

fn coordinators(store: &EmbeddedStore, k: usize) -> Vec<Coordinator<EmbeddedStore>> {
    (0..k)
        .map(|_| Coordinator::new(store.clone(), StagingConfig::default()))
        .collect()
}

async fn shut_down(coordinators: &[Coordinator<EmbeddedStore>]) {
    for coordinator in coordinators {
        coordinator.shutdown(Duration::from_secs(5)).await;
    }
}

/// Pops `n` items from `end` one at a time, taking turns between
/// `coordinators` (staged pops through each one's rounds); each item's
/// envelope names its key.
async fn pop_in_turns(
    coordinators: &[Coordinator<EmbeddedStore>],
    keys: &QueueKeys,
    end: End,
    n: usize,
) -> Vec<(String, usize)> {
    let mut order = Vec::new();
    for turn in 0..n {
        let item = coordinators[turn % coordinators.len()]
            .pop(keys, end, POP_WAIT)
            .await
            .unwrap()
            .expect("the queue holds items");
        let (label, number) = parse(&item);
        let named = item.fair_key.as_deref().unwrap_or("-");
        assert_eq!(named, label, "the envelope carries the key");
        order.push((label, number));
    }
    order
}

/// Three keys of weights 1, 3 and 2 at one priority, noisy's backlog of
/// 300 first: a plain item pushed last at a lower priority comes first,
/// then the next 121 pops share 1:3:2 exactly; the items of a higher
/// priority wait for the level to drain. Popped in turns by two
/// coordinators: the order is in the store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weighted_keys_share_a_priority_exactly_and_lower_priorities_come_first() {
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    noisy_then_weighted(&store, "pq-tenants", 60).await;
    let pq = queue(&store, "pq-tenants");
    push(&pq, 9, Some("late"), 0, 2).await;
    push(&pq, 1, None, 0, 1).await;
    let keys = keys_of("pq-tenants");
    let both = coordinators(&store, 2);
    let first = pop_in_turns(&both, &keys, End::Front, 1).await;
    assert_eq!(first, vec![("-".to_string(), 0)]);
    let order = pop_in_turns(&both, &keys, End::Front, 121).await;
    assert_exact_shares(&order, 20);
    // The rest of priority 5 (what a and b left, then noisy), then 9.
    let rest = pop_in_turns(&both, &keys, End::Front, 300 + 120 - 121).await;
    assert!(rest.iter().all(|(label, _)| label != "late"), "{rest:?}");
    let last = pop_in_turns(&both, &keys, End::Front, 2).await;
    assert_eq!(last, vec![("late".to_string(), 0), ("late".to_string(), 1)]);
    shut_down(&both).await;
}

/// The tags are counts within the level: `items/(p, tag, random)`, the
/// noisy key's at 1, 2, 3 steps, `a`'s (weight 3) a third of a step apart
/// from the noisy head's; a plain push after them lands past them all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tags_are_counts_within_the_level() {
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    let name = "pq-tags";
    set(&store, &keys_of(name), json!({"fair_weights": {"a": 3}})).await;
    let pq = queue(&store, name);
    push(&pq, 5, Some("noisy"), 0, 3).await;
    push(&pq, 5, Some("a"), 0, 2).await;
    push(&pq, 5, None, 0, 1).await;
    let keys = keys_of(name);
    let rows = common::scan(&store, keys.items_range()).await;
    let counts: Vec<(i64, u64)> = rows
        .iter()
        .map(|row| keys.priority_item_parts(&row.key).unwrap())
        .collect();
    let s = TAG_SCALE;
    assert_eq!(
        counts,
        vec![
            (5, s),
            (5, s + s / 3),
            (5, s + 2 * s / 3),
            (5, 2 * s),
            (5, 3 * s),
            (5, 3 * s + 1)
        ]
    );
}

/// A leased priority item nacked returns to its own tag: the next pop
/// takes it again, ahead of the keys behind it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nacked_priority_item_keeps_its_place() {
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    let pq = queue(&store, "pq-nacked");
    push(&pq, 3, Some("x"), 0, 3).await;
    push(&pq, 3, Some("y"), 0, 3).await;
    let keys = keys_of("pq-nacked");
    let coordinator = coordinators(&store, 1);
    let lease_ms = std::num::NonZeroU64::new(60_000).unwrap();
    let leased = coordinator[0]
        .pop_leased(&keys, End::Front, 1, POP_WAIT, lease_ms)
        .await
        .unwrap();
    let first = leased[0].clone();
    assert_eq!(parse(&first), ("x".to_string(), 0));
    let receipt = first.lease.unwrap().receipt;
    coordinator[0].nack(&keys, &receipt, 0).await.unwrap();
    let again = coordinator[0]
        .pop(&keys, End::Front, POP_WAIT)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (again.key.clone(), again.fair_key.clone()),
        (first.key, Some("x".to_string()))
    );
    shut_down(&coordinator).await;
}

/// `max` pops take the highest priority first, and within it the last
/// tag: the reverse of the fair order (the key furthest ahead, its newest
/// item first), as a level's plain items come out of `max` newest first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_pops_take_the_highest_level_s_last_tag() {
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    let pq = queue(&store, "pq-max");
    push(&pq, 7, Some("noisy"), 0, 4).await;
    push(&pq, 7, Some("quiet"), 0, 1).await;
    push(&pq, 2, Some("low"), 0, 1).await;
    let keys = keys_of("pq-max");
    let coordinator = coordinators(&store, 1);
    let order = pop_in_turns(&coordinator, &keys, End::Back, 6).await;
    let labels: Vec<String> = order
        .iter()
        .map(|(label, n)| format!("{label}:{n}"))
        .collect();
    assert_eq!(labels[..2], ["noisy:3", "noisy:2"], "{labels:?}");
    // quiet:0 ties noisy:1 at two steps: the random suffix orders them.
    let mut tied = labels[2..4].to_vec();
    tied.sort();
    assert_eq!(tied, ["noisy:1", "quiet:0"], "{labels:?}");
    assert_eq!(labels[4..], ["noisy:0", "low:0"], "{labels:?}");
    shut_down(&coordinator).await;
}

/// Over `/v1` and RESP: `hotq-fair-key` on a priority push and `PQ PUSH …
/// FAIR key` place items fairly; a malformed key is refused (400
/// `bad_fair_key`, RESP `ERR bad_fair_key`) and nothing is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn priority_pushes_take_a_fairness_key_over_http_and_resp() {
    let daemon = Daemon::start_resp(|_| {}).await;
    let url = |path: &str| format!("{}/v1/pqueues/pq-http/{path}", daemon.url);
    for n in 0..3 {
        let response = http()
            .post(url("items?priority=4"))
            .header("hotq-fair-key", "noisy")
            .body(format!("noisy:{n}"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::CREATED);
    }
    let mut conn = redis(&daemon.redis_url()).await;
    let words = ["PQ", "PUSH", "pq-http", "4", "FAIR", "quiet", "quiet:0"];
    assert_eq!(call(&mut conn, &words).await, redis::Value::Int(1));
    let refused = http()
        .post(url("items?priority=4"))
        .header("hotq-fair-key", "no spaces")
        .body("bad:0")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "bad_fair_key", "{body}");
    let error = call_error(
        &mut conn,
        &["PQ", "PUSH", "pq-http", "4", "FAIR", "no spaces", "bad:0"],
    )
    .await;
    assert!(error.starts_with("ERR bad_fair_key"), "{error}");
    let mut labels = Vec::new();
    for _ in 0..4 {
        let popped = http()
            .post(url("pop?end=min&wait_ms=5000"))
            .send()
            .await
            .unwrap();
        assert_eq!(popped.status(), StatusCode::OK);
        labels.push(String::from_utf8(popped.bytes().await.unwrap().to_vec()).unwrap());
    }
    // quiet:0 ties noisy:1 (both one step past the head noisy:0).
    assert_eq!(labels[0], "noisy:0");
    assert!(labels[1..3].contains(&"quiet:0".to_string()), "{labels:?}");
    assert_eq!(labels[3], "noisy:2");
    let empty = http()
        .post(url("pop?end=min&wait_ms=0"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        empty.status(),
        StatusCode::NO_CONTENT,
        "nothing refused was written"
    );
    daemon.stop().await;
}

/// The daemon prunes a priority queue's drained tags too (per level): ten
/// one-item keys behind `busy` at priority 3 and one key at priority 8,
/// all but `busy`'s backlog popped: only `(3, busy)` keeps its tag.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_prunes_drained_priority_tags() {
    let daemon = Daemon::start(|config| config.metrics_sample_interval_ms = 20).await;
    let push = |priority: i64, key: String, body: String| {
        let url = format!(
            "{}/v1/pqueues/pq-prune/items?priority={priority}",
            daemon.url
        );
        async move {
            let response = http()
                .post(url)
                .header("hotq-fair-key", key)
                .body(body)
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), StatusCode::CREATED);
        }
    };
    for n in 0..5 {
        push(3, "busy".into(), format!("busy:{n}")).await;
    }
    for key in 0..10 {
        push(3, format!("k{key}"), format!("k{key}:0")).await;
    }
    push(8, "high".into(), "high:0".into()).await;
    let keys = keys_of("pq-prune");
    let tags = || async {
        common::scan(&daemon.store, keys.fair_priority_tags_range())
            .await
            .iter()
            .filter_map(|row| keys.fair_priority_tag_parts(&row.key))
            .collect::<Vec<(i64, String)>>()
    };
    assert_eq!(tags().await.len(), 12);
    let pop = |end: &'static str| {
        let url = format!(
            "{}/v1/pqueues/pq-prune/pop?end={end}&wait_ms=5000",
            daemon.url
        );
        async move {
            let popped = http().post(url).send().await.unwrap();
            assert_eq!(popped.status(), StatusCode::OK);
            String::from_utf8(popped.bytes().await.unwrap().to_vec()).unwrap()
        }
    };
    assert_eq!(pop("max").await, "high:0");
    // busy:0, then busy:1 and the ten keys tied one step past it.
    let mut popped = Vec::new();
    for _ in 0..12 {
        popped.push(pop("min").await);
    }
    assert_eq!(popped[0], "busy:0");
    common::eventually("drained tags pruned", Duration::from_secs(20), || async {
        tags().await == vec![(3, "busy".to_string())]
    })
    .await;
    let rest = [pop("min").await, pop("min").await, pop("min").await];
    assert_eq!(rest, ["busy:2", "busy:3", "busy:4"]);
    daemon.stop().await;
}

/// A priority item's dead letter keeps its key (in the envelope), and a
/// redrive places it at its key's tag in its priority: one step past the
/// level's head, tied with the noisy key's second item, not behind the
/// noisy backlog pushed while it was dead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redriven_priority_dead_letter_rejoins_its_tenant() {
    let daemon = Daemon::start(|config| config.leases.max_deliveries = 2).await;
    let base = daemon.url.clone();
    let push = |key: &'static str, body: String| {
        let url = format!("{base}/v1/pqueues/pq-dead/items?priority=4");
        async move {
            let response = http()
                .post(url)
                .header("hotq-fair-key", key)
                .body(body)
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), StatusCode::CREATED);
        }
    };
    push("x", "x:0".into()).await;
    for _ in 0..2 {
        let leased = http()
            .post(format!(
                "{base}/v1/pqueues/pq-dead/pop?end=min&lease_ms=60000"
            ))
            .send()
            .await
            .unwrap();
        assert_eq!(leased.status(), StatusCode::OK);
        let receipt = leased.headers()["hotq-receipt"]
            .to_str()
            .unwrap()
            .to_string();
        let nacked = http()
            .post(format!("{base}/v1/pqueues/pq-dead/nack/{receipt}"))
            .send()
            .await
            .unwrap();
        assert_eq!(nacked.status(), StatusCode::OK);
    }
    for n in 0..5 {
        push("noisy", format!("noisy:{n}")).await;
    }
    let redriven: Value = http()
        .post(format!("{base}/v1/queues/pq-dead.dead/redrive"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(redriven["redriven"], 1, "{redriven}");
    let mut labels = Vec::new();
    for _ in 0..6 {
        let popped = http()
            .post(format!(
                "{base}/v1/pqueues/pq-dead/pop?end=min&wait_ms=5000"
            ))
            .send()
            .await
            .unwrap();
        assert_eq!(popped.status(), StatusCode::OK);
        labels.push(String::from_utf8(popped.bytes().await.unwrap().to_vec()).unwrap());
    }
    assert_eq!(labels[0], "noisy:0");
    assert!(labels[1..3].contains(&"x:0".to_string()), "{labels:?}");
    daemon.stop().await;
}

/// A delayed priority item takes its key's tag when pushed (as a delayed
/// priority item's key always is) and is revealed there, its key in its
/// envelope: pushed delayed behind a noisy backlog, it comes out one step
/// past the head once due, and the key's next item follows it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delayed_priority_item_keeps_its_tag() {
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    let pq = queue(&store, "pq-delayed");
    push(&pq, 6, Some("noisy"), 0, 50).await;
    let ask = PushAsk {
        delay_ms: Some(1),
        fair_key: Some("late"),
        ..PushAsk::default()
    };
    let pushed = pq
        .push_one(b"late:0", 6, ask, &Defaults::default())
        .await
        .unwrap();
    let hotq::queue::priority::Deduplicated::Pushed {
        visible_at_ms: Some(visible_at_ms),
        ..
    } = pushed
    else {
        panic!("delayed: {pushed:?}");
    };
    push(&pq, 6, Some("late"), 1, 1).await;
    let policy = hotq::lease::DeliveryPolicy::default();
    let now = hotq::envelope::now_ms();
    hotq::due::sweep(&store, &policy, visible_at_ms.max(now) + 1)
        .await
        .unwrap();
    let coordinator = coordinators(&store, 1);
    let order = pop_in_turns(&coordinator, &keys_of("pq-delayed"), End::Front, 5).await;
    let late: Vec<usize> = order
        .iter()
        .filter(|(label, _)| label == "late")
        .map(|(_, n)| *n)
        .collect();
    assert_eq!(late, [0, 1], "{order:?}");
    shut_down(&coordinator).await;
}
