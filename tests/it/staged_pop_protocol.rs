//! The staged pop protocol's guarantees one by one: registration order,
//! cancellation races, dead requesters, dropped pops, and no polling;
//! each with staged pops waiting as memory requests (the default) and as
//! stored requests.

use crate::common;

use std::collections::HashSet;
use std::time::Duration;

use hotq::coordinator::Coordinator;
use hotq::envelope::{End, RequestValue, now_ms};
use hotq::keys::{QueueKeys, QueueName};
use hotq::queue::Queue;
use hotq::staging::requester::register;
use hotq::staging::{StagingConfig, StagingStats};
use hotq::store::Read;
use hotq::store::{Store, Transaction, decode_counter};

fn setup<S: Store>(store: S, config: StagingConfig) -> (S, Coordinator<S>, Queue<S>) {
    let coordinator = Coordinator::new(store.clone(), config);
    let queue = Queue::new(store.clone(), QueueName::new("proto").unwrap());
    (store, coordinator, queue)
}

async fn waiting_count(store: &impl Store, keys: &QueueKeys) -> i64 {
    let value = store
        .begin()
        .unwrap()
        .get(&keys.waiting(), Read::Snapshot)
        .await
        .unwrap();
    decode_counter(value.as_deref())
}

async fn assert_no_requests_or_results(store: &impl Store, keys: &QueueKeys) {
    assert!(
        common::scan(store, keys.requests_range()).await.is_empty(),
        "requests left behind"
    );
    assert!(
        common::scan(store, keys.results_range()).await.is_empty(),
        "results left behind"
    );
    assert_eq!(
        waiting_count(store, keys).await,
        0,
        "waiting counter back to zero"
    );
}

async fn served_in_request_order<S: Store>(store: S, requests_in_memory: bool) {
    let (store, coordinator, queue) = setup(store, common::staging(requests_in_memory));
    let keys = queue.keys().clone();
    let mut poppers = Vec::new();
    for i in 0..20u64 {
        let (popper, popper_keys) = (coordinator.clone(), keys.clone());
        poppers.push(tokio::spawn(async move {
            popper
                .pop(&popper_keys, End::Front, Duration::from_secs(60))
                .await
                .unwrap()
        }));
        // The next popper registers only after this one has.
        common::wait_until("registration", Duration::from_secs(30), || {
            common::requests_made(&coordinator) == i + 1
        })
        .await;
    }
    queue
        .push_batch(&(0..20).map(|n| format!("item {n}")).collect::<Vec<_>>())
        .await
        .unwrap();
    for (i, popper) in poppers.into_iter().enumerate() {
        let item = popper.await.unwrap().expect("served before its deadline");
        assert_eq!(
            item.payload,
            format!("item {i}").into_bytes(),
            "popper {i} got another's item"
        );
    }
    assert_no_requests_or_results(&store, &keys).await;
}

async fn short_waits_race_the_fulfiller<S: Store>(store: S, requests_in_memory: bool) {
    let (store, coordinator, queue) = setup(store, common::staging(requests_in_memory));
    let keys = queue.keys().clone();
    let pusher = {
        let queue = queue.clone();
        tokio::spawn(async move {
            for n in 0..600 {
                queue.push(format!("{n}").as_bytes()).await.unwrap();
            }
        })
    };
    let mut poppers = Vec::new();
    for p in 0..20u64 {
        let (coordinator, keys) = (coordinator.clone(), keys.clone());
        poppers.push(tokio::spawn(async move {
            let mut got = Vec::new();
            for n in 0..50u64 {
                // Waits of 0 to 3 ms expire while the fulfiller is serving.
                let wait = Duration::from_micros((p * 50 + n) % 4 * 1_000);
                if let Some(item) = coordinator.pop(&keys, End::Front, wait).await.unwrap() {
                    got.push(String::from_utf8(item.payload).unwrap());
                }
            }
            got
        }));
    }
    pusher.await.unwrap();
    let mut delivered = Vec::new();
    for popper in poppers {
        delivered.extend(popper.await.unwrap());
    }
    let remaining: Vec<String> = common::scan(&store, keys.items_range())
        .await
        .into_iter()
        .map(|row| {
            String::from_utf8(hotq::envelope::decode_item(&row.value).unwrap().payload).unwrap()
        })
        .collect();
    let unique: HashSet<&String> = delivered.iter().collect();
    assert_eq!(unique.len(), delivered.len(), "an item was delivered twice");
    let mut all: Vec<String> = delivered.iter().chain(&remaining).cloned().collect();
    all.sort_by_key(|s| s.parse::<u32>().unwrap());
    let expected: Vec<String> = (0..600).map(|n| n.to_string()).collect();
    assert_eq!(all, expected, "every item delivered once or still queued");
    assert_eq!(queue.len().await.unwrap() as usize, remaining.len());
    assert_no_requests_or_results(&store, &keys).await;
    let stats = coordinator.stats();
    eprintln!("cancellation race: {:?}", coordinator.stats_snapshot());
    assert!(
        StagingStats::get(&stats.requests_withdrawn) > 0,
        "some waits expired"
    );
}

async fn a_dead_requesters_item_returns_to_its_place<S: Store>(store: S) {
    let config = StagingConfig {
        result_grace_ms: 200,
        reap_interval_ms: 100,
        ..StagingConfig::default()
    };
    let (store, coordinator, queue) = setup(store, config);
    let keys = queue.keys().clone();
    queue.push(b"first").await.unwrap();
    queue.push(b"second").await.unwrap();
    let original = queue.peek().await.unwrap().unwrap();
    // A requester registers (the direct pop it skipped would have
    // conflicted) and vanishes without ever collecting.
    let registration = register(&store, &keys, &RequestValue::front(now_ms() + 300))
        .await
        .unwrap();
    drop(registration);
    coordinator.ensure_fulfiller(&keys);
    common::wait_until(
        "the fulfiller serves the dead request",
        Duration::from_secs(30),
        || StagingStats::get(&coordinator.stats().fulfill_batches) > 0,
    )
    .await;
    assert_eq!(
        queue.len().await.unwrap(),
        1,
        "the item sits in the dead requester's result"
    );
    let timer = coordinator.spawn_timer();
    common::wait_until(
        "the reaper returns the item",
        Duration::from_secs(30),
        || StagingStats::get(&coordinator.stats().results_reaped) == 1,
    )
    .await;
    let back = queue.pop().await.unwrap().expect("the item is back");
    assert_eq!(
        back, original,
        "same key, so same position: first out again"
    );
    assert_eq!(queue.pop().await.unwrap().unwrap().payload, b"second");
    assert_no_requests_or_results(&store, &keys).await;
    coordinator.shutdown(Duration::from_secs(5)).await;
    timer.await.unwrap();
}

async fn dropped_pops_put_back<S: Store>(store: S, requests_in_memory: bool) {
    let (store, coordinator, queue) = setup(store, common::staging(requests_in_memory));
    let keys = queue.keys().clone();
    for round in 0..50u64 {
        let popping = {
            let (coordinator, keys) = (coordinator.clone(), keys.clone());
            tokio::spawn(async move {
                coordinator
                    .pop(&keys, End::Front, Duration::from_secs(60))
                    .await
            })
        };
        common::wait_until("registration", Duration::from_secs(30), || {
            common::requests_made(&coordinator) == round + 1
        })
        .await;
        // Push and abort at once: the abort lands before, during or after
        // the fulfillment; in every case the item ends up in exactly one place.
        queue.push(format!("{round}").as_bytes()).await.unwrap();
        popping.abort();
        let outcome = popping.await;
        let delivered = matches!(&outcome, Ok(Ok(Some(_))));
        // Withdrawn, or handed over and put back: eventually in exactly one place.
        common::eventually(
            &format!("round {round}: the item in exactly one place"),
            Duration::from_secs(30),
            || async {
                // Neither a stored request nor a memory request (which a
                // fulfiller could still serve) is left.
                outstanding(&store, &keys).await == 0
                    && coordinator.memory_waiting(&keys) == 0
                    && queue.len().await.unwrap() + delivered as u64 == 1
            },
        )
        .await;
        let queued = queue.len().await.unwrap();
        if queued == 1 {
            queue.pop().await.unwrap().unwrap();
        }
    }
    // Direct pops abandoned at once: a pop that committed after its caller
    // left puts the item back.
    for round in 0..50u64 {
        queue
            .push(format!("direct {round}").as_bytes())
            .await
            .unwrap();
        let popping = {
            let (coordinator, keys) = (coordinator.clone(), keys.clone());
            tokio::spawn(async move { coordinator.pop(&keys, End::Front, Duration::ZERO).await })
        };
        popping.abort();
        let delivered = matches!(popping.await, Ok(Ok(Some(_))));
        if !delivered {
            // The abandoned pop may still hold the item for a moment (taken,
            // not yet put back); it must come back, exactly once.
            let expected = format!("direct {round}").into_bytes();
            common::eventually(
                "the abandoned pop's item comes back",
                Duration::from_secs(30),
                || async {
                    match queue.pop().await.unwrap() {
                        Some(item) => {
                            assert_eq!(item.payload, expected);
                            true
                        }
                        None => false,
                    }
                },
            )
            .await;
        }
    }
    assert_eq!(queue.len().await.unwrap(), 0, "no item came back twice");
    assert_no_requests_or_results(&store, &keys).await;
}

/// Requests plus results outstanding.
async fn outstanding(store: &impl Store, keys: &QueueKeys) -> usize {
    common::scan(store, keys.requests_range()).await.len()
        + common::scan(store, keys.results_range()).await.len()
}

in_both_request_modes!(idle_pops_do_not_poll: idle_waiters_and_fulfillers_do_not_poll, idle_stored_waiters_and_fulfillers_do_not_poll);

/// Embedded only: it counts the store's transactions, which only the
/// embedded store tells.
async fn idle_pops_do_not_poll(requests_in_memory: bool) {
    let (store, coordinator, queue) = setup(
        common::backend::embedded(),
        common::staging(requests_in_memory),
    );
    let keys = queue.keys().clone();
    let waiter = {
        let (coordinator, keys) = (coordinator.clone(), keys.clone());
        tokio::spawn(async move {
            coordinator
                .pop(&keys, End::Front, Duration::from_secs(10))
                .await
        })
    };
    common::wait_until("registration", Duration::from_secs(30), || {
        common::requests_made(&coordinator) == 1
    })
    .await;
    // Let the fulfiller settle onto its watch, then count transactions
    // over a two-second window of idleness (measuring a rate, not waiting
    // for an event).
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = store
        .stats()
        .begins
        .load(std::sync::atomic::Ordering::Relaxed);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let during = store
        .stats()
        .begins
        .load(std::sync::atomic::Ordering::Relaxed)
        - before;
    assert!(
        during <= 4,
        "an idle waiter and fulfiller began {during} transactions in 2 s"
    );
    queue.push(b"wake up").await.unwrap();
    let item = waiter
        .await
        .unwrap()
        .unwrap()
        .expect("the push wakes the fulfiller");
    assert_eq!(item.payload, b"wake up");
}

async fn the_reaper_pages_past_live_requests_and_forgets_idle_queues<S: Store>(store: S) {
    let (store, coordinator, queue) = setup(store, StagingConfig::default());
    let keys = queue.keys().clone();
    // 600 live requests (more than one reaper page), then one already expired.
    let mut live = Vec::new();
    for _ in 0..600 {
        live.push(
            register(&store, &keys, &RequestValue::front(now_ms() + 600_000))
                .await
                .unwrap(),
        );
    }
    register(
        &store,
        &keys,
        &RequestValue::front(now_ms().saturating_sub(1)),
    )
    .await
    .unwrap();
    let reaped = coordinator.reap_all().await.unwrap();
    assert_eq!(
        reaped.requests, 1,
        "the expired request behind 600 live ones is cleared"
    );
    assert_eq!(waiting_count(&store, &keys).await, 600);
    let listed = |queues: Vec<QueueKeys>| queues.iter().any(|q| q.name() == keys.name());
    assert!(listed(
        hotq::staging::reap::registered_queues(&store)
            .await
            .unwrap()
    ));

    for registration in &live {
        hotq::staging::requester::withdraw(
            &store,
            &keys,
            &registration.request_key,
            &registration.result_key,
            true,
        )
        .await
        .unwrap();
    }
    assert_no_requests_or_results(&store, &keys).await;
    coordinator.reap_all().await.unwrap();
    assert!(
        !listed(
            hotq::staging::reap::registered_queues(&store)
                .await
                .unwrap()
        ),
        "a queue with nothing staged leaves the registry"
    );
    // The next registration lists it again.
    register(&store, &keys, &RequestValue::front(now_ms() + 1_000))
        .await
        .unwrap();
    assert!(listed(
        hotq::staging::reap::registered_queues(&store)
            .await
            .unwrap()
    ));
}

async fn lost_race_served_through_the_line<S: Store>(store: S, requests_in_memory: bool) {
    // The bound only has to outlast one fulfillment round; generous, so
    // that a slow machine cannot fail the test.
    let config = StagingConfig {
        lost_race_wait_ms: 30_000,
        ..common::staging(requests_in_memory)
    };
    let (store, coordinator, queue) = setup(store, config);
    let keys = queue.keys().clone();
    queue.push_batch(&["first", "second"]).await.unwrap();
    // Another process's request is ahead: a pop that must not wait finds
    // items, but not its turn. That is a lost race, not an empty queue.
    let ahead = register(&store, &keys, &RequestValue::front(now_ms() + 60_000))
        .await
        .unwrap();
    let popped = coordinator
        .pop(&keys, End::Front, Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(
        popped.map(|item| item.payload),
        Some(b"second".to_vec()),
        "served through the line, after the request ahead"
    );
    let first = hotq::staging::requester::withdraw(
        &store,
        &keys,
        &ahead.request_key,
        &ahead.result_key,
        false,
    )
    .await
    .unwrap();
    assert_eq!(
        first.map(|item| item.payload),
        Some(b"first".to_vec()),
        "the request ahead was served first"
    );
    assert_eq!(queue.len().await.unwrap(), 0);
    assert_no_requests_or_results(&store, &keys).await;
    coordinator.shutdown(Duration::from_secs(5)).await;
}

crate::on_every_backend! {
    waiting_requests_are_served_in_registration_order [2] => served_in_request_order(true);
    stored_requests_are_served_in_registration_order [2] => served_in_request_order(false);
    short_waits_racing_the_fulfiller_lose_nothing [2] => short_waits_race_the_fulfiller(true);
    short_stored_waits_racing_the_fulfiller_lose_nothing [2] => short_waits_race_the_fulfiller(false);
    a_dropped_pop_withdraws_and_puts_back_what_it_was_handed [2] => dropped_pops_put_back(true);
    a_dropped_stored_pop_withdraws_and_puts_back_what_it_was_handed [2] => dropped_pops_put_back(false);
    a_pop_that_must_not_wait_and_loses_the_race_is_served_through_the_line [2] => lost_race_served_through_the_line(true);
    a_stored_pop_that_must_not_wait_and_loses_the_race_is_served_through_the_line [2] => lost_race_served_through_the_line(false);
    a_dead_requesters_item_returns_to_its_place [2] => a_dead_requesters_item_returns_to_its_place();
    the_reaper_pages_past_live_requests_and_forgets_idle_queues [2] => the_reaper_pages_past_live_requests_and_forgets_idle_queues();
}
