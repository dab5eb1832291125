//! Tests of the key layout.

use super::*;

#[test]
fn names_are_validated() {
    assert!(QueueName::new("jobs-1.high_prio").is_ok());
    for bad in ["", ".hidden", "a/b", "sp ace", "ü", &"x".repeat(129)] {
        assert!(QueueName::new(bad).is_err(), "{bad:?} must be refused");
    }
}

#[test]
fn dead_letter_names() {
    let long = QueueName::new(&"x".repeat(QUEUE_NAME_LEN_MAX)).unwrap();
    let dead = long.dead_letter().unwrap();
    assert_eq!(QueueName::new(dead.as_str()), Ok(dead.clone()));
    assert!(dead.is_dead_letter());
    assert_eq!(
        dead.dead_letter(),
        None,
        "a dead-letter queue does not dead-letter"
    );
    assert!(QueueName::new(&"x".repeat(QUEUE_NAME_LEN_MAX + 1)).is_err());
}

#[test]
fn due_ranges_hold_exactly_what_is_due() {
    let (begin, end) = due_until(1_000);
    let (all_begin, all_end) = due_range();
    assert_eq!(begin, all_begin);
    assert!(end < all_end);
    for name in ["a", "zz", &"z".repeat(QUEUE_NAME_LEN_MAX)] {
        let keys = QueueKeys::new(&QueueName::new(name).unwrap());
        for (at, due) in [
            (0, true),
            (999, true),
            (1_000, true),
            (1_001, false),
            (u64::MAX - 1, false),
        ] {
            for receipt in [[0u8; 16], [0xff; 16]] {
                for (key, what, id) in [
                    (keys.lease(at, &receipt), DueWhat::Lease, receipt.to_vec()),
                    (
                        keys.delayed(at, &receipt),
                        DueWhat::Delayed,
                        receipt.to_vec(),
                    ),
                    (keys.reap_at(at), DueWhat::Reap, Vec::new()),
                ] {
                    assert_eq!(begin <= key && key < end, due, "{what:?} at {at}");
                    let entry = due_entry(&key).unwrap();
                    assert_eq!(
                        (entry.due_ms, entry.what, entry.id, entry.queue.as_str()),
                        (at, what, id, name)
                    );
                }
            }
        }
    }
    let keys = QueueKeys::new(&QueueName::new("q").unwrap());
    assert_eq!(due_entry(&keys.depth()), None);
}

#[test]
fn queue_of_key_names_the_queue_and_skips_past_it() {
    for kind in [QueueKind::Fifo, QueueKind::Priority] {
        let (root_begin, root_end) = queues_root_range(kind);
        let a = QueueKeys::of_kind(kind, &QueueName::new("a").unwrap());
        let a2 = QueueKeys::of_kind(kind, &QueueName::new("a-2").unwrap());
        let b = QueueKeys::of_kind(kind, &QueueName::new("b").unwrap());
        for key in [
            a.depth(),
            a.item(7, &[0xff; RANDOM_LEN]),
            a.receipt(&[0; 16]),
        ] {
            assert!(root_begin <= key && key < root_end);
            let (name, end) = queue_of_key(kind, &key).unwrap();
            assert_eq!(name.as_str(), "a");
            assert!(key < end);
            assert!(
                end <= a2.depth() && end <= a2.items_range().0,
                "a-2 is after a"
            );
            assert!(end <= b.items_range().0);
        }
        assert_eq!(queue_of_key(kind, &due_range().0), None);
    }
}

#[test]
fn item_keys_order_by_index_then_random_and_stay_in_range() {
    let keys = QueueKeys::new(&QueueName::new("q").unwrap());
    let (begin, end) = keys.items_range();
    let a = keys.item(1, &[0xff; RANDOM_LEN]);
    let b = keys.item(2, &[0x00; RANDOM_LEN]);
    let c = keys.item(256, &[0x00; RANDOM_LEN]);
    assert!(begin < a && a < b && b < c && c < end);
    assert_eq!(keys.item_index(&c), Some(256));
    let other = QueueKeys::new(&QueueName::new("q2").unwrap());
    let (other_begin, other_end) = other.items_range();
    assert!(
        other_begin >= end || other_end <= begin,
        "queues never overlap"
    );
}

#[test]
fn priority_item_keys_order_by_priority_then_count_and_stay_in_their_range() {
    let keys = QueueKeys::of_kind(QueueKind::Priority, &QueueName::new("q").unwrap());
    let (items_begin, items_end) = keys.items_range();
    let priorities = [i64::MIN, i64::MIN + 1, -256, -1, 0, 1, 255, i64::MAX];
    let mut previous: Option<Vec<u8>> = None;
    for &priority in &priorities {
        let (begin, end) = keys.priority_range(priority);
        assert!(items_begin <= begin && end <= items_end);
        for count in [0u64, 1, 255, 256, u64::MAX] {
            for random in [[0x00; RANDOM_LEN], [0xff; RANDOM_LEN]] {
                let key = keys.priority_item(priority, count, &random);
                assert!(begin < key && key < end, "{priority}/{count} in its range");
                assert_eq!(keys.priority_item_parts(&key), Some((priority, count)));
                if let Some(previous) = &previous {
                    assert!(
                        previous < &key,
                        "{priority}/{count} sorts after its predecessor"
                    );
                }
                previous = Some(key);
            }
        }
        if let Some(next) = priorities.iter().find(|&&p| p > priority) {
            let (next_begin, _) = keys.priority_range(*next);
            assert!(end <= next_begin, "priority ranges never overlap");
        }
    }
    assert_eq!(
        keys.priority_item_parts(&keys.item(3, &[0; RANDOM_LEN])),
        None
    );
    assert_eq!(keys.priority_item_parts(&keys.depth()), None);
}

#[test]
fn a_queue_layout_is_packed_once_and_the_cache_stays_bounded() {
    let name = QueueName::new("layout-shared").unwrap();
    let (a, b) = (QueueKeys::new(&name), QueueKeys::new(&name));
    assert!(Arc::ptr_eq(&a.0, &b.0), "one packed layout per queue");
    let priority = QueueKeys::of_kind(QueueKind::Priority, &name);
    assert!(!Arc::ptr_eq(&a.0, &priority.0), "kinds never share one");
    assert_ne!(a.items_range(), priority.items_range());
    let expected = Subspace::all()
        .subspace(&("hotq", "layout-shared"))
        .subspace(&"items")
        .pack(&(7u64, Bytes::from(&[1u8; RANDOM_LEN][..])));
    assert_eq!(a.item(7, &[1; RANDOM_LEN]), expected);
    // Past the bound the cache starts over: layouts stay right, and a
    // queue used again is packed again.
    for i in 0..=layout::LAYOUTS_CACHED_MAX {
        let other = QueueName::new(&format!("layout-{i}")).unwrap();
        assert_eq!(QueueKeys::new(&other).name(), &other);
    }
    let again = QueueKeys::new(&name);
    assert_eq!(again.item(7, &[1; RANDOM_LEN]), expected);
}
