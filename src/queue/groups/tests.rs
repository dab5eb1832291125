//! Tests of [`super`] over the embedded store.

use super::*;
use crate::envelope::End;
use crate::keys::QueueName;
use crate::queue::read_end;
use crate::store::Read;
use crate::store::decode_counter;
use crate::store::embedded::{Durability, EmbeddedConfig, EmbeddedStore};

fn store() -> (EmbeddedStore, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let mut config = EmbeddedConfig::new(dir.path());
    config.durability = Durability::Buffered;
    (EmbeddedStore::open(config).expect("open store"), dir)
}

fn qkeys() -> QueueKeys {
    QueueKeys::new(&QueueName::new("groups").unwrap())
}

async fn push(store: &EmbeddedStore, keys: &QueueKeys, items: &[(Option<&str>, &str)]) {
    let items: Vec<NewItem<'_>> = items
        .iter()
        .map(|(group, payload)| NewItem {
            group: *group,
            payload: payload.as_bytes(),
            expires_at_ms: None,
            fair_key: None,
        })
        .collect();
    let txn = store.begin().unwrap();
    push_in(
        &txn,
        keys,
        &items,
        crate::envelope::now_ms(),
        0,
        &Default::default(),
    )
    .await
    .unwrap();
    txn.commit().await.unwrap();
}

/// The visible items' payloads, in key order.
async fn visible(store: &EmbeddedStore, keys: &QueueKeys) -> Vec<String> {
    let txn = store.begin().unwrap();
    read_end(&txn, keys, End::Front, 100, Read::Snapshot)
        .await
        .unwrap()
        .into_iter()
        .map(|item| String::from_utf8(item.payload).unwrap())
        .collect()
}

async fn counter(store: &EmbeddedStore, key: &[u8]) -> i64 {
    let txn = store.begin().unwrap();
    decode_counter(txn.get(key, Read::Snapshot).await.unwrap().as_deref())
}

/// Takes the visible item `payload` as a pop does (cleared, depth down),
/// leaving its group's state alone.
async fn take(store: &EmbeddedStore, keys: &QueueKeys, payload: &str) -> Item {
    let txn = store.begin().unwrap();
    let items = read_end(&txn, keys, End::Front, 100, Read::Serializable)
        .await
        .unwrap();
    let item = items
        .into_iter()
        .find(|item| item.payload == payload.as_bytes())
        .expect("the item is visible");
    txn.clear(&item.key).unwrap();
    txn.atomic_add(&keys.depth(), -1).unwrap();
    txn.commit().await.unwrap();
    item
}

async fn run<F, Fut>(store: &EmbeddedStore, body: F)
where
    F: FnOnce(<EmbeddedStore as Store>::Txn) -> Fut,
    Fut: std::future::Future<Output = Result<(), StoreError>>,
{
    let txn = store.begin().unwrap();
    body(txn.clone()).await.unwrap();
    txn.commit().await.unwrap();
}

#[test]
fn keys_are_checked() {
    assert!(check_key("customer-7").is_ok());
    assert!(check_key("tenant:1/order@x_y.z").is_ok());
    assert!(check_key(&"a".repeat(GROUP_KEY_LEN_MAX)).is_ok());
    assert!(check_key("").is_err());
    assert!(check_key(&"a".repeat(GROUP_KEY_LEN_MAX + 1)).is_err());
    assert!(check_key("a b").is_err());
    assert!(check_key("é").is_err());
}

#[test]
fn states_round_trip() {
    for state in [
        State::Head,
        State::Succession {
            due_ms: 7,
            item_key: b"key".to_vec(),
        },
        State::Batch { out: 3 },
    ] {
        assert_eq!(decode_state(&encode_state(&state)), Some(state));
    }
    assert_eq!(decode_state(b""), None);
    assert_eq!(decode_state(&[1, 2]), None);
}

#[tokio::test]
async fn only_heads_are_visible_and_leaving_promotes_in_push_order() {
    let (store, _dir) = store();
    let keys = qkeys();
    push(
        &store,
        &keys,
        &[
            (Some("a"), "a1"),
            (Some("b"), "b1"),
            (None, "x"),
            (Some("a"), "a2"),
        ],
    )
    .await;
    push(&store, &keys, &[(Some("a"), "a3"), (Some("b"), "b2")]).await;
    assert_eq!(visible(&store, &keys).await, ["a1", "b1", "x"]);
    assert_eq!(counter(&store, &keys.depth()).await, 3);
    assert_eq!(counter(&store, &keys.grouped_count()).await, 3);

    let a1 = take(&store, &keys, "a1").await;
    assert_eq!(a1.group.as_deref(), Some("a"));
    // Still out: nothing of a is visible.
    assert_eq!(visible(&store, &keys).await, ["b1", "x"]);
    run(&store, |txn| async move {
        leave_in(&txn, &qkeys(), "a", crate::envelope::now_ms()).await
    })
    .await;
    // a2 keeps its push index: behind x, which was pushed before it.
    assert_eq!(visible(&store, &keys).await, ["b1", "x", "a2"]);
    take(&store, &keys, "a2").await;
    run(&store, |txn| async move {
        leave_in(&txn, &qkeys(), "a", crate::envelope::now_ms()).await
    })
    .await;
    take(&store, &keys, "b1").await;
    run(&store, |txn| async move {
        leave_in(&txn, &qkeys(), "b", crate::envelope::now_ms()).await
    })
    .await;
    // a3 was pushed before b2: its own index puts it first.
    assert_eq!(visible(&store, &keys).await, ["x", "a3", "b2"]);
    take(&store, &keys, "a3").await;
    run(&store, |txn| async move {
        leave_in(&txn, &qkeys(), "a", crate::envelope::now_ms()).await
    })
    .await;
    let txn = store.begin().unwrap();
    assert_eq!(state_in(&txn, &keys, "a").await.unwrap(), None, "a drained");
    assert_eq!(state_in(&txn, &keys, "b").await.unwrap(), Some(State::Head));
    assert_eq!(counter(&store, &keys.grouped_count()).await, 0);
    // A push to a drained group is its head at once.
    push(&store, &keys, &[(Some("a"), "a4")]).await;
    assert_eq!(visible(&store, &keys).await, ["x", "b2", "a4"]);
}

#[tokio::test]
async fn a_hand_off_promotes_once_delivered_and_a_give_back_keeps_the_head() {
    let (store, _dir) = store();
    let keys = qkeys();
    push(&store, &keys, &[(Some("g"), "1"), (Some("g"), "2")]).await;
    let one = take(&store, &keys, "1").await;
    run(&store, |txn| {
        let one = one.clone();
        async move { succession_in(&txn, &qkeys(), &one, 1_000) }
    })
    .await;
    let due = keys.due(1_000, DueWhat::Group, b"g");
    let txn = store.begin().unwrap();
    assert!(txn.get(&due, Read::Snapshot).await.unwrap().is_some());
    // The caller left: the item is the head again, its due entry gone.
    run(&store, |txn| {
        let one = one.clone();
        async move { give_back_in(&txn, &qkeys(), &one.key, &one.value()).await }
    })
    .await;
    assert_eq!(visible(&store, &keys).await, ["1"]);
    let txn = store.begin().unwrap();
    assert!(txn.get(&due, Read::Snapshot).await.unwrap().is_none());
    assert_eq!(state_in(&txn, &keys, "g").await.unwrap(), Some(State::Head));

    // Popped again and delivered: 2 follows; a second delivery does nothing.
    let one = take(&store, &keys, "1").await;
    run(&store, |txn| {
        let one = one.clone();
        async move { succession_in(&txn, &qkeys(), &one, 2_000) }
    })
    .await;
    let handed = vec![("g".to_string(), one.key.clone())];
    delivered(&store, &keys, &handed).await.unwrap();
    delivered(&store, &keys, &handed).await.unwrap();
    assert_eq!(visible(&store, &keys).await, ["2"]);
    let txn = store.begin().unwrap();
    let due = keys.due(2_000, DueWhat::Group, b"g");
    assert!(txn.get(&due, Read::Snapshot).await.unwrap().is_none());
}

#[tokio::test]
async fn the_timer_ends_a_stale_hand_off_and_a_late_give_back_waits_behind() {
    let (store, _dir) = store();
    let keys = qkeys();
    push(
        &store,
        &keys,
        &[(Some("g"), "1"), (Some("g"), "2"), (Some("g"), "3")],
    )
    .await;
    let one = take(&store, &keys, "1").await;
    run(&store, |txn| {
        let one = one.clone();
        async move { succession_in(&txn, &qkeys(), &one, 5) }
    })
    .await;
    // A due entry for another time is stale: nothing happens.
    run(&store, |txn| async move {
        succession_due_in(&txn, &qkeys(), b"g", 4, crate::envelope::now_ms()).await
    })
    .await;
    assert!(visible(&store, &keys).await.is_empty());
    run(&store, |txn| async move {
        succession_due_in(&txn, &qkeys(), b"g", 5, crate::envelope::now_ms()).await
    })
    .await;
    assert_eq!(visible(&store, &keys).await, ["2"]);
    // The popper was alive after all, and its caller gone: 1 comes back
    // behind the head, never beside it.
    run(&store, |txn| {
        let one = one.clone();
        async move { give_back_in(&txn, &qkeys(), &one.key, &one.value()).await }
    })
    .await;
    assert_eq!(visible(&store, &keys).await, ["2"]);
    take(&store, &keys, "2").await;
    run(&store, |txn| async move {
        leave_in(&txn, &qkeys(), "g", crate::envelope::now_ms()).await
    })
    .await;
    assert_eq!(visible(&store, &keys).await, ["1"]);
    assert_eq!(counter(&store, &keys.grouped_count()).await, 1);
}

#[tokio::test]
async fn delayed_pushes_and_dropping_waiting_items() {
    let (store, _dir) = store();
    let keys = qkeys();
    let txn = store.begin().unwrap();
    let items = [
        NewItem {
            group: Some("d"),
            payload: b"d1",
            expires_at_ms: None,
            fair_key: None,
        },
        NewItem {
            group: Some("d"),
            payload: b"d2",
            expires_at_ms: None,
            fair_key: None,
        },
    ];
    let now = crate::envelope::now_ms();
    let at = push_in(&txn, &keys, &items, now, 60_000, &Default::default())
        .await
        .unwrap();
    txn.commit().await.unwrap();
    assert_eq!(at, Some(now + 60_000));
    assert!(visible(&store, &keys).await.is_empty());
    assert_eq!(counter(&store, &keys.delayed_count()).await, 1);
    assert_eq!(counter(&store, &keys.grouped_count()).await, 1);
    // The delayed head leaves: d2's own delay still holds it back.
    run(&store, |txn| async move {
        leave_in(&txn, &qkeys(), "d", now).await
    })
    .await;
    assert!(visible(&store, &keys).await.is_empty());
    assert_eq!(counter(&store, &keys.delayed_count()).await, 2);
    // Waiting items pushed below an index go; later ones stay.
    push(&store, &keys, &[(Some("d"), "d3"), (Some("d"), "d4")]).await;
    let txn = store.begin().unwrap();
    let mark = decode_mark(
        txn.get(&keys.next_index(), Read::Snapshot)
            .await
            .unwrap()
            .as_deref(),
    );
    push(&store, &keys, &[(Some("d"), "d5")]).await;
    let from = keys.grouped_all_range().0;
    let (dropped, more) = drop_waiting(&store, &keys, Some(mark), &from)
        .await
        .unwrap();
    assert_eq!((dropped, more), (2, None));
    assert_eq!(counter(&store, &keys.grouped_count()).await, 1);
    let (dropped, _) = drop_waiting(&store, &keys, None, &from).await.unwrap();
    assert_eq!(dropped, 1);
    assert_eq!(counter(&store, &keys.grouped_count()).await, 0);
}

#[tokio::test]
async fn two_pushes_to_one_empty_group_conflict() {
    let (store, _dir) = store();
    let keys = qkeys();
    let items = [NewItem {
        group: Some("g"),
        payload: b"p",
        expires_at_ms: None,
        fair_key: None,
    }];
    let now = crate::envelope::now_ms();
    let first = store.begin().unwrap();
    let second = store.begin().unwrap();
    push_in(&first, &keys, &items, now, 0, &Default::default())
        .await
        .unwrap();
    push_in(&second, &keys, &items, now, 0, &Default::default())
        .await
        .unwrap();
    first.commit().await.unwrap();
    assert_eq!(second.commit().await, Err(StoreError::Conflict));
}

#[tokio::test]
async fn the_timer_releases_a_group_whose_plain_pop_never_reported() {
    let (store, _dir) = store();
    let keys = qkeys();
    push(&store, &keys, &[(Some("g"), "1"), (Some("g"), "2")]).await;
    // A direct plain pop whose daemon dies before the pop reaches its
    // caller: nobody calls `delivered`.
    let items = crate::staging::direct::try_pop(&store, &keys, (End::Front, 1, None), &[])
        .await
        .unwrap()
        .items;
    assert_eq!(items.len(), 1);
    assert!(visible(&store, &keys).await.is_empty());
    let policy = crate::lease::DeliveryPolicy::default();
    let now = crate::envelope::now_ms();
    crate::due::sweep(&store, &policy, now).await.unwrap();
    assert!(visible(&store, &keys).await.is_empty(), "not due yet");
    let later = now + SUCCESSION_SLACK_MS + 1_000;
    crate::due::sweep(&store, &policy, later).await.unwrap();
    assert_eq!(visible(&store, &keys).await, ["2"]);
    // A late `delivered` for the first pop changes nothing.
    let handed = vec![("g".to_string(), items[0].key.clone())];
    delivered(&store, &keys, &handed).await.unwrap();
    assert_eq!(visible(&store, &keys).await, ["2"]);
}

#[test]
fn heads_are_distinct_tells_two_of_one_group() {
    let item = |group: Option<&str>| Item {
        group: group.map(str::to_string),
        ..Item::from_value(b"k".to_vec(), ItemValue::new(1, b"p".to_vec()))
    };
    let ok = [item(Some("a")), item(None), item(None), item(Some("b"))];
    assert!(heads_are_distinct(&ok));
    assert!(!heads_are_distinct(&[item(Some("a")), item(Some("a"))]));
}

#[tokio::test]
async fn a_plain_pop_put_back_by_the_line_is_the_head_again() {
    let (store, _dir) = store();
    let keys = qkeys();
    push(&store, &keys, &[(Some("g"), "1"), (Some("g"), "2")]).await;
    let items = crate::staging::direct::try_pop(&store, &keys, (End::Front, 1, None), &[])
        .await
        .unwrap()
        .items;
    // The pop's caller left: the line's put-back, as the daemon runs it.
    crate::staging::requester::restore_items(&store, &keys, items.clone())
        .await
        .unwrap();
    assert_eq!(visible(&store, &keys).await, ["1"]);
    // A `delivered` racing in for the put-back item finds it the head, not
    // handed off: the successor stays behind.
    let handed = vec![("g".to_string(), items[0].key.clone())];
    delivered(&store, &keys, &handed).await.unwrap();
    assert_eq!(visible(&store, &keys).await, ["1"]);
    let policy = crate::lease::DeliveryPolicy::default();
    let later = crate::envelope::now_ms() + SUCCESSION_SLACK_MS + 1_000;
    crate::due::sweep(&store, &policy, later).await.unwrap();
    assert_eq!(
        visible(&store, &keys).await,
        ["1"],
        "no succession left to end"
    );
    assert_eq!(counter(&store, &keys.depth()).await, 1);
    assert_eq!(counter(&store, &keys.grouped_count()).await, 1);
}

#[tokio::test]
async fn a_stored_result_nobody_collected_is_reaped_back_as_the_head() {
    let (store, _dir) = store();
    let keys = qkeys();
    push(&store, &keys, &[(Some("g"), "1"), (Some("g"), "2")]).await;
    let now = crate::envelope::now_ms();
    let request = crate::envelope::RequestValue::front(now + 60_000);
    crate::staging::requester::register(&store, &keys, &request)
        .await
        .unwrap();
    let local = crate::staging::round::fulfill::LocalHandoff::NONE;
    let grace_ms = 5_000;
    let fulfilled =
        crate::staging::round::fulfill::fulfill_once(&store, &keys, 16, 1 << 20, grace_ms, local)
            .await
            .unwrap();
    assert_eq!(fulfilled.counts.served, 1);
    assert!(visible(&store, &keys).await.is_empty(), "2 waits: 1 is out");
    // Its requester never collected it: reaped past the result's deadline,
    // which comes before the succession's.
    let past_result = now + 60_000 + grace_ms + 1;
    assert!(past_result < succession_due_ms(now + 60_000, grace_ms));
    let reaped = crate::staging::reap::reap_queue(&store, &keys, past_result)
        .await
        .unwrap();
    assert_eq!(reaped.results, 1);
    assert_eq!(visible(&store, &keys).await, ["1"]);
    let policy = crate::lease::DeliveryPolicy::default();
    let later = succession_due_ms(now + 60_000, grace_ms) + 1;
    crate::due::sweep(&store, &policy, later).await.unwrap();
    assert_eq!(visible(&store, &keys).await, ["1"], "the succession ended");
}

#[tokio::test]
async fn moved_items_join_their_groups_tails_and_waiting_items_leave_in_order() {
    let (store, _dir) = store();
    let keys = qkeys();
    push(&store, &keys, &[(Some("a"), "a1"), (Some("a"), "a2")]).await;
    let now = crate::envelope::now_ms();
    let moved = |group: Option<&str>, payload: &str, visible_at_ms: u64| Moved {
        item: ItemValue {
            group: group.map(str::to_string),
            ..ItemValue::new(now, payload.as_bytes().to_vec())
        },
        visible_at_ms,
    };
    let items = vec![
        moved(Some("a"), "a0", now),
        moved(Some("b"), "b0", now),
        moved(Some("b"), "b1", now),
        moved(None, "x", now),
        moved(Some("c"), "c0", now + 60_000),
    ];
    run(&store, |txn| async move {
        move_in(&txn, &qkeys(), &items, now).await
    })
    .await;
    // a already had a head: a0 waits behind a2; b0 heads b, b1 waits; c0
    // heads c but is not visible yet.
    assert_eq!(visible(&store, &keys).await, ["a1", "b0", "x"]);
    assert_eq!(counter(&store, &keys.grouped_count()).await, 3);
    assert_eq!(counter(&store, &keys.delayed_count()).await, 1);
    let waiting = {
        let txn = store.begin().unwrap();
        waiting_in(&txn, &keys, "a", 10).await.unwrap()
    };
    let payloads: Vec<&[u8]> = waiting.iter().map(|w| w.item.payload.as_slice()).collect();
    assert_eq!(payloads, [b"a2".as_slice(), b"a0".as_slice()]);
    // Taking the first waiting item, then the head's leave: the next one
    // left becomes the head, at the index it was moved in at (before b0).
    take(&store, &keys, "a1").await;
    let first = waiting[0].clone();
    run(&store, |txn| async move {
        take_waiting_in(&txn, &qkeys(), &first)?;
        leave_in(&txn, &qkeys(), "a", now).await
    })
    .await;
    assert_eq!(visible(&store, &keys).await, ["a0", "b0", "x"]);
    assert_eq!(counter(&store, &keys.grouped_count()).await, 1);
}

/// Leases the visible head `payload` as a receive does, then the batch
/// behind it: up to `more` waiting items. Returns the head and the batch.
async fn receive_batch(
    store: &EmbeddedStore,
    keys: &QueueKeys,
    payload: &str,
    more: usize,
) -> Vec<Item> {
    let mut head = take(store, keys, payload).await;
    let lease_ms = std::num::NonZeroU64::new(60_000).unwrap();
    let now = crate::envelope::now_ms();
    let txn = store.begin().unwrap();
    crate::lease::lease_in(&txn, keys, &mut head, lease_ms, now).unwrap();
    let mut budget = crate::queue::limits::Budget::unlimited();
    let batch = batch::take_batch_in(&txn, keys, (&head, more), (lease_ms, now), &mut budget)
        .await
        .unwrap();
    txn.commit().await.unwrap();
    std::iter::once(head).chain(batch).collect()
}

fn payloads(items: &[Item]) -> Vec<String> {
    items
        .iter()
        .map(|item| String::from_utf8(item.payload.clone()).unwrap())
        .collect()
}

async fn group_state(store: &EmbeddedStore, keys: &QueueKeys, group: &str) -> Option<State> {
    let txn = store.begin().unwrap();
    state_in(&txn, keys, group).await.unwrap()
}

#[tokio::test]
async fn a_batch_holds_its_group_and_its_returns_come_back_first_in_order() {
    let (store, _dir) = store();
    let keys = qkeys();
    let group = [(Some("a"), "a1"), (Some("a"), "a2"), (Some("a"), "a3")];
    push(&store, &keys, &group).await;
    push(&store, &keys, &[(Some("a"), "a4"), (Some("b"), "b1")]).await;
    let out = receive_batch(&store, &keys, "a1", 2).await;
    assert_eq!(payloads(&out), ["a1", "a2", "a3"]);
    assert_eq!(
        group_state(&store, &keys, "a").await,
        Some(State::Batch { out: 3 })
    );
    assert_eq!(counter(&store, &keys.grouped_count()).await, 1);
    let receipt = |i: usize| out[i].lease.as_ref().unwrap().receipt;
    let now = crate::envelope::now_ms();
    use crate::lease::settle::{ack_in, nack_in};
    // a2 done, a3 back: the group stays out while a1 is.
    let k = keys.clone();
    run(&store, |txn| async move {
        ack_in(&txn, &k, &receipt(1), now).await?.unwrap();
        nack_in(&txn, &k, &receipt(2), 0, None, now).await?.unwrap();
        Ok(())
    })
    .await;
    assert_eq!(visible(&store, &keys).await, ["b1"]);
    // a1 back too: it is the head again, a3 behind it ahead of a4.
    let k = keys.clone();
    run(&store, |txn| async move {
        nack_in(&txn, &k, &receipt(0), 0, None, now).await?.unwrap();
        Ok(())
    })
    .await;
    assert_eq!(visible(&store, &keys).await, ["a1", "b1"]);
    assert_eq!(group_state(&store, &keys, "a").await, Some(State::Head));
    assert_eq!(counter(&store, &keys.grouped_count()).await, 2);
    assert_eq!(counter(&store, &keys.leased()).await, 0);
    let again = receive_batch(&store, &keys, "a1", 9).await;
    assert_eq!(payloads(&again), ["a1", "a3", "a4"]);
    assert_eq!(again[0].lease.as_ref().unwrap().delivery_count, 2);
    // A purge dropping the whole batch releases the group once.
    let values: Vec<Option<ItemValue>> = again.iter().map(|item| Some(item.value())).collect();
    let k = keys.clone();
    run(&store, |txn| async move {
        dropped_in(&txn, &k, values.into_iter(), now).await
    })
    .await;
    assert_eq!(group_state(&store, &keys, "a").await, None);
}
