//! Fairness keys (issue #40, library level): a queue serves its keys in
//! proportion to their weights, FIFO within a key, whatever daemon pops,
//! because the fair order is the queue's own key order (see
//! `hotq::queue::fair`). The front ends are not wired yet; these tests
//! push with `queue::dedup::push_fair` and pop through real coordinators
//! on a real embedded store.

use crate::common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hotq::coordinator::Coordinator;
use hotq::envelope::{End, now_ms};
use hotq::keys::{QueueKeys, QueueName};
use hotq::queue::dedup::{PushItem, PushTerms, push_fair, push_with};
use hotq::queue::fair::{KeyBacklog, TAG_SCALE, prune_after_in, prune_in};
use hotq::queue::settings::{Defaults, apply_change, update};
use hotq::queue::{Item, Queue};
use hotq::staging::StagingConfig;
use hotq::store::embedded::{Durability, EmbeddedStore};
use hotq::store::{Store, Transaction};
use serde_json::json;

/// How long one pop waits: generous, the queue is never empty when popped.
const POP_WAIT: Duration = Duration::from_secs(10);
/// Bound on the concurrent drain.
const RUN_BOUND: Duration = Duration::from_secs(240);

fn queue(name: &str) -> QueueKeys {
    QueueKeys::new(&QueueName::new(name).unwrap())
}

/// Pushes `count` items `"{key}:{n}"` under fairness key `key` (`None`:
/// no key), numbered from `first`, in batches of at most 1,000.
async fn push(
    store: &EmbeddedStore,
    keys: &QueueKeys,
    key: Option<&str>,
    first: usize,
    count: usize,
) {
    let label = key.unwrap_or("-");
    let payloads: Vec<PushItem> = (first..first + count)
        .map(|n| PushItem {
            payload: format!("{label}:{n}").into_bytes(),
            dedup_id: None,
            group: None,
            fair_key: key.map(str::to_string),
        })
        .collect();
    for chunk in payloads.chunks(1_000) {
        push_fair(
            store,
            keys,
            chunk,
            PushTerms::default(),
            &Defaults::default(),
        )
        .await
        .unwrap();
    }
}

async fn set(store: &EmbeddedStore, keys: &QueueKeys, change: serde_json::Value) {
    let change: BTreeMap<String, serde_json::Value> = serde_json::from_value(change).unwrap();
    update(store, keys, &change, &Defaults::default())
        .await
        .unwrap()
        .unwrap();
}

/// The label and number of a payload pushed by [`push`].
fn parse(item: &Item) -> (String, usize) {
    let text = String::from_utf8(item.payload.clone()).unwrap();
    let (label, n) = text.split_once(':').unwrap();
    (label.to_string(), n.parse().unwrap())
}

/// How many of `labels` are `label`.
fn count(labels: &[String], label: &str) -> usize {
    labels.iter().filter(|l| *l == label).count()
}

/// The backlog of the queue's largest keys, under its stored weights.
async fn backlog(store: &EmbeddedStore, keys: &QueueKeys) -> Vec<KeyBacklog> {
    let weights = hotq::queue::settings::read(store, keys)
        .await
        .unwrap()
        .fair_weights
        .unwrap_or_default();
    hotq::queue::fair::backlog(store, keys, &weights, 10)
        .await
        .unwrap()
}

fn row(key: &str, items: u64) -> KeyBacklog {
    KeyBacklog {
        key: key.to_string(),
        items,
    }
}

/// The scenario of the first tests: a noisy key (weight 1) pushes 300
/// items first, then keys `a` (weight 3) and `b` (weight 2) push 60 each.
async fn noisy_then_weighted(store: &EmbeddedStore, keys: &QueueKeys, per_key: usize) {
    set(store, keys, json!({"fair_weights": {"a": 3, "b": 2}})).await;
    push(store, keys, Some("noisy"), 0, 5 * per_key).await;
    push(store, keys, Some("a"), 0, per_key).await;
    push(store, keys, Some("b"), 0, per_key).await;
}

/// After the noisy key's first item (at the head before the others came),
/// each unit of virtual time serves noisy 1, `a` 3 and `b` 2: the first
/// `1 + 6m` pops hold exactly `1 + m`, `3m` and `2m` of them, for every
/// `m` until `a` runs out; within each key in push order.
fn assert_exact_shares(labels: &[String], numbers: &BTreeMap<String, Vec<usize>>, rounds: usize) {
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
    for (label, seen) in numbers {
        assert!(
            seen.windows(2).all(|w| w[0] < w[1]),
            "{label} out of push order: {seen:?}"
        );
    }
}

/// Pops `n` items one at a time, taking turns between `coordinators`.
async fn pop_in_turns(
    coordinators: &[Coordinator<EmbeddedStore>],
    keys: &QueueKeys,
    n: usize,
) -> (Vec<String>, BTreeMap<String, Vec<usize>>) {
    let mut labels = Vec::new();
    let mut numbers: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for turn in 0..n {
        let coordinator = &coordinators[turn % coordinators.len()];
        let item = coordinator
            .pop(keys, End::Front, POP_WAIT)
            .await
            .unwrap()
            .expect("the queue holds items");
        let (label, number) = parse(&item);
        assert_eq!(item.fair_key.as_deref(), Some(label.as_str()));
        numbers.entry(label.clone()).or_default().push(number);
        labels.push(label);
    }
    (labels, numbers)
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

/// Three keys with weights 1, 3 and 2, the weight-1 key's backlog of 300
/// pushed first: the next 120 pops share 1:3:2 exactly, and the backlog
/// per key reads what is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weighted_keys_share_exactly_behind_a_noisy_backlog() {
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    let keys = queue("tenants");
    noisy_then_weighted(&store, &keys, 60).await;
    assert_eq!(
        backlog(&store, &keys).await,
        vec![row("noisy", 300), row("a", 60), row("b", 60)]
    );
    let coordinator = coordinators(&store, 1);
    let (labels, numbers) = pop_in_turns(&coordinator, &keys, 121).await;
    assert_exact_shares(&labels, &numbers, 20);
    assert_eq!(
        backlog(&store, &keys).await,
        vec![row("noisy", 279), row("b", 20)]
    );
    shut_down(&coordinator).await;
}

/// The same order whichever of two coordinators on one store pops: the
/// order is in the store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_coordinators_taking_turns_serve_the_same_order() {
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    let keys = queue("tenants");
    noisy_then_weighted(&store, &keys, 60).await;
    let both = coordinators(&store, 2);
    let (labels, numbers) = pop_in_turns(&both, &keys, 121).await;
    assert_exact_shares(&labels, &numbers, 20);
    shut_down(&both).await;
}

/// Waiters on two coordinators drain the queue concurrently (direct and
/// staged pops, rounds of both fulfillers): every item comes out once, and
/// every window of the order they came out in holds each key's share to
/// within the number of waiters (an item is out of place only while a
/// waiter holds it). FIFO would hand out the noisy key's 2,000 first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_coordinators_popping_at_once_keep_the_shares() {
    pop_at_once(StagingConfig::default()).await
}

/// The same with every staged pop a stored request, served by whichever
/// coordinator's fulfiller gets there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_requests_of_two_coordinators_keep_the_shares() {
    pop_at_once(common::staging(false)).await
}

async fn pop_at_once(config: StagingConfig) {
    const WAITERS: usize = 8;
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    let keys = queue("tenants");
    noisy_then_weighted(&store, &keys, 400).await;
    let total = 5 * 400 + 2 * 400;
    let both: Vec<Coordinator<EmbeddedStore>> = (0..2)
        .map(|_| Coordinator::new(store.clone(), config.clone()))
        .collect();
    let order = Arc::new(Mutex::new(Vec::new()));
    let taken = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for waiter in 0..2 * WAITERS {
        let (coordinator, keys) = (both[waiter % 2].clone(), keys.clone());
        let (order, taken) = (order.clone(), taken.clone());
        tasks.push(tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + RUN_BOUND;
            while taken.load(Ordering::SeqCst) < total {
                assert!(tokio::time::Instant::now() < deadline, "drain too slow");
                let popped = coordinator
                    .pop(&keys, End::Front, Duration::from_millis(200))
                    .await
                    .unwrap();
                if let Some(item) = popped {
                    order.lock().unwrap().push(parse(&item));
                    taken.fetch_add(1, Ordering::SeqCst);
                }
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let order = order.lock().unwrap().clone();
    let distinct: std::collections::BTreeSet<_> = order.iter().collect();
    assert_eq!(
        (order.len(), distinct.len()),
        (total, total),
        "each item once"
    );
    let labels: Vec<String> = order.into_iter().map(|(label, _)| label).collect();
    let tolerance = 2 * WAITERS;
    for m in (0..=400 / 3).step_by(7) {
        let window = &labels[..1 + 6 * m];
        let got = [
            count(window, "noisy"),
            count(window, "a"),
            count(window, "b"),
        ];
        let want = [1 + m, 3 * m, 2 * m];
        for (got, want) in got.iter().zip(want) {
            assert!(
                got.abs_diff(want) <= tolerance,
                "the first {} pops: {got:?} of a key, {want} expected (± {tolerance})",
                window.len()
            );
        }
    }
    let staged: u64 = both
        .iter()
        .flat_map(|c| c.stats_snapshot())
        .filter(|(name, _)| *name == "staged_pops")
        .map(|(_, n)| n)
        .sum();
    assert!(staged > 0, "some pops went through the fulfill rounds");
    shut_down(&both).await;
}

/// A queue whose pushes name no key keeps today's keys: items at their
/// push counts, no fairness state written, the mark at the count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_without_keys_keeps_its_push_indexes() {
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    let keys = queue("plain");
    push(&store, &keys, None, 0, 5).await;
    let items: Vec<PushItem> = (5..8)
        .map(|n| PushItem {
            payload: format!("-:{n}").into_bytes(),
            dedup_id: None,
            group: None,
            fair_key: None,
        })
        .collect();
    push_with(&store, &keys, &items, None, None, &Defaults::default())
        .await
        .unwrap();
    Queue::new(store.clone(), keys.name().clone())
        .push_batch(&["-:8", "-:9"])
        .await
        .unwrap();
    let rows = common::scan(&store, keys.items_range()).await;
    let indexes: Vec<u64> = rows
        .iter()
        .map(|row| keys.item_index(&row.key).unwrap())
        .collect();
    assert_eq!(indexes, (0..10).collect::<Vec<u64>>());
    assert!(
        common::scan(&store, keys.fair_tags_range())
            .await
            .is_empty()
    );
    let coordinator = coordinators(&store, 1);
    let (labels, numbers) = pop_in_turns_unkeyed(&coordinator, &keys, 10).await;
    assert_eq!(labels, vec!["-"; 10]);
    assert_eq!(numbers, (0..10).collect::<Vec<usize>>());
    shut_down(&coordinator).await;
}

async fn pop_in_turns_unkeyed(
    coordinators: &[Coordinator<EmbeddedStore>],
    keys: &QueueKeys,
    n: usize,
) -> (Vec<String>, Vec<usize>) {
    let mut labels = Vec::new();
    let mut numbers = Vec::new();
    for _ in 0..n {
        let item = coordinators[0]
            .pop(keys, End::Front, POP_WAIT)
            .await
            .unwrap()
            .expect("the queue holds items");
        assert_eq!(item.fair_key, None);
        let (label, number) = parse(&item);
        labels.push(label);
        numbers.push(number);
    }
    (labels, numbers)
}

/// With `fair` on, items pushed without a key are the tenant `""`: a
/// backlog of them does not hold back a keyed tenant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unkeyed_items_of_a_fair_queue_are_one_tenant() {
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    let keys = queue("fair-default");
    set(&store, &keys, json!({"fair": true})).await;
    push(&store, &keys, None, 0, 100).await;
    push(&store, &keys, Some("quiet"), 0, 5).await;
    let coordinator = coordinators(&store, 1);
    let mut labels = Vec::new();
    for _ in 0..11 {
        let item = coordinator[0]
            .pop(&keys, End::Front, POP_WAIT)
            .await
            .unwrap()
            .unwrap();
        let (label, _) = parse(&item);
        let expected_key = if label == "-" { "" } else { "quiet" };
        assert_eq!(item.fair_key.as_deref(), Some(expected_key));
        labels.push(label);
    }
    assert_eq!((count(&labels, "-"), count(&labels, "quiet")), (6, 5));
    shut_down(&coordinator).await;
}

/// A delayed item takes its place when the timer reveals it (it arrives
/// then): right behind the head, not behind the noisy key's backlog.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delayed_keyed_item_is_placed_when_revealed() {
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    let keys = queue("delayed");
    push(&store, &keys, Some("noisy"), 0, 200).await;
    let item = PushItem {
        payload: b"late:0".to_vec(),
        dedup_id: None,
        group: None,
        fair_key: Some("late".to_string()),
    };
    let terms = PushTerms {
        delay_ms: Some(1),
        ..PushTerms::default()
    };
    let pushed = push_fair(&store, &keys, &[item], terms, &Defaults::default())
        .await
        .unwrap();
    let visible_at_ms = pushed.visible_at_ms.unwrap();
    let policy = hotq::lease::DeliveryPolicy::default();
    hotq::due::sweep(&store, &policy, visible_at_ms.max(now_ms()) + 1)
        .await
        .unwrap();
    let coordinator = coordinators(&store, 1);
    let mut labels = Vec::new();
    for _ in 0..3 {
        let item = coordinator[0]
            .pop(&keys, End::Front, POP_WAIT)
            .await
            .unwrap()
            .unwrap();
        labels.push(parse(&item).0);
    }
    assert_eq!(count(&labels, "late"), 1, "first pops: {labels:?}");
    shut_down(&coordinator).await;
}

/// A nacked item returns to its own place (its tag), ahead of the keys
/// that were behind it, as a returned item does in a plain queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nacked_item_keeps_its_place() {
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    let keys = queue("nacked");
    push(&store, &keys, Some("x"), 0, 3).await;
    push(&store, &keys, Some("y"), 0, 3).await;
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
        (first.key, first.fair_key)
    );
    shut_down(&coordinator).await;
}

/// Weights are read by every push: a change applies to the next push,
/// without a restart; a drained key's tag is pruned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weights_apply_from_the_next_push_and_drained_tags_are_pruned() {
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    let keys = queue("reweighed");
    push(&store, &keys, Some("k"), 0, 2).await;
    set(&store, &keys, json!({"fair_weights": {"k": 4}})).await;
    push(&store, &keys, Some("k"), 2, 2).await;
    let rows = common::scan(&store, keys.items_range()).await;
    let indexes: Vec<u64> = rows
        .iter()
        .map(|row| keys.item_index(&row.key).unwrap())
        .collect();
    let s = TAG_SCALE;
    assert_eq!(indexes, vec![s, 2 * s, 2 * s + s / 4, 2 * s + s / 2]);
    let coordinator = coordinators(&store, 1);
    for _ in 0..4 {
        coordinator[0]
            .pop(&keys, End::Front, POP_WAIT)
            .await
            .unwrap()
            .unwrap();
    }
    assert_eq!(common::scan(&store, keys.fair_tags_range()).await.len(), 1);
    push(&store, &keys, Some("other"), 0, 1).await;
    let txn = store.begin().unwrap();
    assert_eq!(prune_in(&txn, &keys, 100).await.unwrap(), 1, "k's tag goes");
    txn.commit().await.unwrap();
    let left: Vec<String> = common::scan(&store, keys.fair_tags_range())
        .await
        .iter()
        .filter_map(|row| keys.fair_key_of(&row.key))
        .collect();
    assert_eq!(left, vec!["other".to_string()]);
    shut_down(&coordinator).await;
}

/// A pruning pass cut at its bound continues after the last tag it read,
/// clears only drained keys' tags (never a backlogged key's, wherever it
/// sorts), and a push raising a tag it clears makes it conflict: the
/// push's tag stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pruning_continues_past_its_bound_and_yields_to_pushes() {
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    let keys = queue("pruned-in-steps");
    for key in ["a", "b", "c", "d", "e"] {
        push(&store, &keys, Some(key), 0, 1).await;
    }
    let coordinator = coordinators(&store, 1);
    for _ in 0..5 {
        coordinator[0]
            .pop(&keys, End::Front, POP_WAIT)
            .await
            .unwrap()
            .unwrap();
    }
    push(&store, &keys, Some("c"), 1, 3).await;
    let mut after = None;
    let mut cleared = 0;
    for _ in 0..3 {
        let txn = store.begin().unwrap();
        let pruned = prune_after_in(&txn, &keys, after.as_deref(), 2)
            .await
            .unwrap();
        txn.commit().await.unwrap();
        cleared += pruned.cleared;
        after = pruned.after;
    }
    assert_eq!(
        (cleared, after),
        (4, None),
        "a, b, d, e in three passes of 2"
    );
    let tag_keys = || async {
        common::scan(&store, keys.fair_tags_range())
            .await
            .iter()
            .filter_map(|row| keys.fair_key_of(&row.key))
            .collect::<Vec<String>>()
    };
    assert_eq!(tag_keys().await, vec!["c".to_string()]);
    // `x` drained; a pass finds its tag stale while `x` pushes again.
    push(&store, &keys, Some("x"), 0, 1).await;
    for _ in 0..4 {
        coordinator[0]
            .pop(&keys, End::Front, POP_WAIT)
            .await
            .unwrap()
            .unwrap();
    }
    let txn = store.begin().unwrap();
    let pruned = prune_after_in(&txn, &keys, None, 100).await.unwrap();
    assert_eq!(pruned.cleared, 2, "c and x drained");
    push(&store, &keys, Some("x"), 1, 1).await;
    assert!(txn.commit().await.is_err(), "the push's tag is read");
    assert_eq!(tag_keys().await, vec!["c".to_string(), "x".to_string()]);
    shut_down(&coordinator).await;
}

/// Bad fairness settings are refused with a message naming the setting.
#[test]
fn bad_fairness_settings_are_refused() {
    let name = QueueName::new("q").unwrap();
    let stored = hotq::queue::settings::Stored::default();
    let too_many: serde_json::Map<String, serde_json::Value> =
        (0..101).map(|n| (format!("k{n}"), json!(1))).collect();
    for bad in [
        json!({"fair": 1}),
        json!({"fair_weights": {"a": 0}}),
        json!({"fair_weights": {"a": 1001}}),
        json!({"fair_weights": {"a": 1.5}}),
        json!({"fair_weights": {"a b": 1}}),
        json!({"fair_weights": [1, 2]}),
        json!({"fair_weights": too_many}),
    ] {
        let change: BTreeMap<String, serde_json::Value> =
            serde_json::from_value(bad.clone()).unwrap();
        let refused = apply_change(&stored, &name, &change, &Defaults::default()).unwrap_err();
        assert!(refused.0.starts_with("fair"), "{bad}: {refused}");
    }
    let change: BTreeMap<String, serde_json::Value> =
        serde_json::from_value(json!({"fair": true, "fair_weights": {"a": 1000}})).unwrap();
    let ok = apply_change(&stored, &name, &change, &Defaults::default()).unwrap();
    let effective = ok.effective(&name, &Defaults::default());
    assert!(effective.fair);
    assert_eq!(effective.fair_weights.get("a"), Some(&1000));
}

/// Pushes `payload` under fairness key `key` and message group `group`.
async fn push_grouped(store: &EmbeddedStore, keys: &QueueKeys, key: &str, group: &str, n: usize) {
    let item = PushItem {
        payload: format!("{key}:{n}").into_bytes(),
        dedup_id: None,
        group: Some(group.to_string()),
        fair_key: Some(key.to_string()),
    };
    push_fair(
        store,
        keys,
        &[item],
        PushTerms::default(),
        &Defaults::default(),
    )
    .await
    .unwrap();
}

/// Message groups inside a tenant: a group's items (one key) come out in
/// push order, one at a time, and the tenant's other group and another
/// tenant are served beside them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_keep_their_order_inside_a_tenant() {
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    let keys = queue("grouped");
    for n in 0..4 {
        push_grouped(&store, &keys, "t", "g1", n).await;
        push_grouped(&store, &keys, "t", "g2", 10 + n).await;
    }
    push(&store, &keys, Some("u"), 0, 3).await;
    let coordinator = coordinators(&store, 1);
    let lease_ms = std::num::NonZeroU64::new(60_000).unwrap();
    let mut order = Vec::new();
    for _ in 0..11 {
        let items = coordinator[0]
            .pop_leased(&keys, End::Front, 1, POP_WAIT, lease_ms)
            .await
            .unwrap();
        let item = items.into_iter().next().expect("an item within the wait");
        order.push(parse(&item));
        coordinator[0]
            .ack(&keys, &item.lease.unwrap().receipt)
            .await
            .unwrap();
    }
    let numbers = |pick: &dyn Fn(usize) -> bool| -> Vec<usize> {
        order
            .iter()
            .filter(|(label, n)| label == "t" && pick(*n))
            .map(|(_, n)| *n)
            .collect()
    };
    assert_eq!(numbers(&|n| n < 10), vec![0, 1, 2, 3], "g1 in push order");
    assert_eq!(
        numbers(&|n| n >= 10),
        vec![10, 11, 12, 13],
        "g2 in push order"
    );
    let first_u = order.iter().position(|(label, _)| label == "u").unwrap();
    assert!(first_u <= 2, "u waited behind t's groups: {order:?}");
    shut_down(&coordinator).await;
}

/// A dead letter keeps its key in the dead-letter queue, and a redrive
/// puts it back at its tenant's tail in its origin (it arrives again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redriven_dead_letter_rejoins_its_tenant() {
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    let keys = queue("origin");
    set(&store, &keys, json!({"max_deliveries": 1})).await;
    push(&store, &keys, Some("t"), 0, 3).await;
    push(&store, &keys, Some("u"), 0, 1).await;
    let coordinator = coordinators(&store, 1);
    let lease_ms = std::num::NonZeroU64::new(60_000).unwrap();
    let leased = coordinator[0]
        .pop_leased(&keys, End::Front, 1, POP_WAIT, lease_ms)
        .await
        .unwrap();
    assert_eq!(parse(&leased[0]), ("t".to_string(), 0));
    coordinator[0]
        .nack(&keys, &leased[0].lease.unwrap().receipt, 0)
        .await
        .unwrap();
    let dead = QueueName::new("origin.dead").unwrap();
    let dead_rows = common::scan(&store, QueueKeys::new(&dead).items_range()).await;
    assert_eq!(dead_rows.len(), 1, "dead-lettered");
    let dead_item = hotq::envelope::decode_item(&dead_rows[0].value).unwrap();
    assert_eq!(dead_item.fair_key.as_deref(), Some("t"));
    assert_eq!(
        hotq::lease::redrive::redrive(&store, &dead, 10)
            .await
            .unwrap(),
        1
    );
    let mut order = Vec::new();
    for _ in 0..4 {
        let item = coordinator[0]
            .pop(&keys, End::Front, POP_WAIT)
            .await
            .unwrap()
            .unwrap();
        order.push(parse(&item));
    }
    let t: Vec<usize> = order
        .iter()
        .filter(|(label, _)| label == "t")
        .map(|(_, n)| *n)
        .collect();
    assert_eq!(t, vec![1, 2, 0], "behind its tenant's backlog: {order:?}");
    shut_down(&coordinator).await;
}

/// A purge drops the items below the mark it read when it began. A fair
/// push places by virtual time, which the purge's own deletes hold back
/// (the head is still below the mark), so a purge first raises the
/// queue's floor to its mark: pushes after that land past it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pushes_after_a_purge_began_land_past_its_mark() {
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    let keys = queue("purged");
    push(&store, &keys, Some("noisy"), 0, 100).await;
    let txn = store.begin().unwrap();
    let mark = hotq::store::decode_mark(
        txn.get(&keys.next_index(), hotq::store::Read::Snapshot)
            .await
            .unwrap()
            .as_deref(),
    );
    assert!(
        hotq::queue::fair::floor_for_purge_in(&txn, &keys, mark)
            .await
            .unwrap()
    );
    txn.commit().await.unwrap();
    push(&store, &keys, Some("quiet"), 0, 1).await;
    let rows = common::scan(&store, keys.items_range()).await;
    let last = rows.last().unwrap();
    assert_eq!(
        hotq::envelope::decode_item(&last.value)
            .unwrap()
            .fair_key
            .as_deref(),
        Some("quiet")
    );
    assert!(keys.item_index(&last.key).unwrap() >= mark);
    // A queue that never had a fair push is left as it was.
    let plain = queue("plain-purged");
    push(&store, &plain, None, 0, 3).await;
    let txn = store.begin().unwrap();
    assert!(
        !hotq::queue::fair::floor_for_purge_in(&txn, &plain, 3)
            .await
            .unwrap()
    );
}

/// The fair order is in the store: a restart (the store reopened, new
/// coordinators) continues it exactly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_order_survives_a_restart() {
    let (store, dir) = common::embedded_store(Durability::Sync);
    let keys = queue("tenants");
    noisy_then_weighted(&store, &keys, 60).await;
    let before = coordinators(&store, 1);
    let (mut labels, mut numbers) = pop_in_turns(&before, &keys, 61).await;
    shut_down(&before).await;
    drop(before);
    drop(store);
    let config = hotq::store::embedded::EmbeddedConfig::new(dir.path());
    let store = EmbeddedStore::open(config).unwrap();
    let after = coordinators(&store, 1);
    let (more_labels, more_numbers) = pop_in_turns(&after, &keys, 60).await;
    labels.extend(more_labels);
    for (label, seen) in more_numbers {
        numbers.entry(label).or_default().extend(seen);
    }
    assert_exact_shares(&labels, &numbers, 20);
    shut_down(&after).await;
}
