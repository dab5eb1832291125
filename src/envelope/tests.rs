//! Tests of [`super`]: round trips, old versions, malformed values.

use std::num::NonZeroU64;

use super::*;

fn dead_item() -> ItemValue {
    ItemValue {
        enqueued_at_ms: 3,
        deliveries: 5,
        dead_letter: Some(DeadLetter {
            queue: "jobs".into(),
            deliveries: 5,
            priority: None,
        }),
        group: None,
        expires_at_ms: None,
        fair_key: None,
        payload: b"payload".to_vec(),
        parts: None,
    }
}

#[test]
fn grouped_items_round_trip_and_ungrouped_ones_keep_their_form() {
    let grouped = ItemValue {
        group: Some("customer-7".into()),
        ..ItemValue::new(42, b"p".to_vec())
    };
    let encoded = encode_item_value(&grouped);
    assert_eq!(encoded[0], 3);
    assert_eq!(decode_item(&encoded), Some(grouped.clone()));
    let dead = ItemValue {
        group: Some("g".into()),
        ..dead_item()
    };
    assert_eq!(decode_item(&encode_item_value(&dead)), Some(dead));
    for len in 0..encoded.len() - 1 {
        assert_ne!(decode_item(&encoded[..len]), Some(grouped.clone()));
    }
    assert_eq!(encode_item_value(&ItemValue::new(42, b"p".to_vec()))[0], 1);
}

#[test]
fn items_round_trip_and_version_1_still_reads() {
    let item = dead_item();
    assert_eq!(decode_item(&encode_item_value(&item)), Some(item));
    let fresh = decode_item(&encode_item(42, b"p")).unwrap();
    assert_eq!(fresh, ItemValue::new(42, b"p".to_vec()));
    let mut v1 = vec![1];
    v1.extend_from_slice(&42u64.to_be_bytes());
    v1.extend_from_slice(b"p");
    assert_eq!(
        encode_item(42, b"p"),
        v1,
        "a fresh item is written as version 1"
    );
    assert_eq!(decode_item(&v1), Some(fresh));
    let leased_once = ItemValue {
        deliveries: 1,
        ..ItemValue::new(42, b"p".to_vec())
    };
    assert_eq!(
        decode_item(&encode_item_value(&leased_once)),
        Some(leased_once)
    );
}

#[test]
fn requests_results_and_held_items_round_trip() {
    let request = RequestValue {
        deadline_ms: 7,
        end: End::Back,
        lease_ms: NonZeroU64::new(30_000),
    };
    assert_eq!(decode_request(&encode_request(&request)), Some(request));
    let counted = encode_counted_request(&request, 64);
    assert_eq!(decode_counted_request(&counted), Some((request, 64)));
    assert_eq!(decode_request(&counted), Some(request));
    assert_eq!(
        decode_counted_request(&encode_request(&request)),
        Some((request, 1))
    );
    let mut none = counted.clone();
    none[18..].copy_from_slice(&0u32.to_be_bytes());
    assert_eq!(decode_counted_request(&none), None, "a count of 0");
    let mut old = encode_request(&RequestValue {
        deadline_ms: 7,
        end: End::Front,
        lease_ms: None,
    });
    old.truncate(10);
    assert_eq!(decode_request(&old).map(|r| r.lease_ms), Some(None));
    for lease in [
        None,
        Some(LeaseTag {
            receipt: [7; RECEIPT_LEN],
            expires_at_ms: 99,
        }),
    ] {
        let result = ResultValue {
            deadline_ms: 9,
            lease,
            item_key: b"key".to_vec(),
            item: dead_item(),
        };
        assert_eq!(decode_result(&encode_result(&result)), Some(result));
    }
    let held = HeldItem {
        item_key: Vec::new(),
        item: dead_item(),
    };
    assert_eq!(decode_held(&encode_held(&held)), Some(held));
    // A result written by a binary without leases.
    let mut v1 = vec![1];
    v1.extend_from_slice(&9u64.to_be_bytes());
    v1.extend_from_slice(&3u64.to_be_bytes());
    v1.extend_from_slice(&3u32.to_be_bytes());
    v1.extend_from_slice(b"keypayload");
    assert_eq!(
        decode_result(&v1),
        Some(ResultValue {
            deadline_ms: 9,
            lease: None,
            item_key: b"key".to_vec(),
            item: ItemValue::new(3, b"payload".to_vec()),
        })
    );
}

#[test]
fn garbage_and_truncations_decode_to_none() {
    assert_eq!(decode_item(b""), None);
    assert_eq!(decode_item(b"short"), None);
    assert_eq!(decode_item(&[9; 20]), None);
    assert_eq!(decode_request(b"garbage"), None);
    let result = encode_result(&ResultValue {
        deadline_ms: 1,
        lease: None,
        item_key: vec![1; 10],
        item: dead_item(),
    });
    for len in 0..result.len() - b"payload".len() {
        assert_eq!(decode_result(&result[..len]), None, "truncated at {len}");
    }
    let held = encode_held(&HeldItem {
        item_key: vec![1; 10],
        item: dead_item(),
    });
    for len in 0..held.len() - b"payload".len() {
        assert_eq!(decode_held(&held[..len]), None, "truncated at {len}");
    }
}

#[test]
fn a_dead_letter_from_a_priority_queue_keeps_its_origin_and_priority() {
    for group in [None, Some("g".to_string())] {
        let mut item = dead_item();
        item.group = group.clone();
        item.dead_letter.as_mut().unwrap().priority = Some(-7);
        let encoded = encode_item_value(&item);
        assert_eq!(encoded[0], if group.is_some() { 5 } else { 4 });
        assert_eq!(decode_item(&encoded), Some(item.clone()));
        for len in 0..encoded.len() - item.payload.len() {
            assert_eq!(decode_item(&encoded[..len]), None, "cut at {len}");
        }
    }
}

#[test]
fn spilled_items_carry_their_parts_reference_everywhere() {
    let parts = PartsRef {
        id: [9; PARTS_ID_LEN],
        len: 1_048_576,
    };
    for item in [ItemValue::new(42, Vec::new()), dead_item()] {
        let spilled = ItemValue {
            payload: Vec::new(),
            parts: Some(parts),
            ..item
        };
        let encoded = encode_item_value(&spilled);
        assert_ne!(encoded[0] & SPILLED_FLAG, 0);
        assert_eq!(decode_item(&encoded), Some(spilled.clone()));
        assert_eq!(spilled.len(), 1_048_576);
        let held = HeldItem {
            item_key: b"k".to_vec(),
            item: spilled.clone(),
        };
        assert_eq!(decode_held(&encode_held(&held)), Some(held));
        for len in 0..encoded.len() {
            assert_eq!(decode_item(&encoded[..len]).and_then(|i| i.parts), None);
        }
    }
}

#[test]
fn an_expiry_round_trips_in_every_form_and_items_without_one_keep_theirs() {
    let plain = ItemValue::new(42, b"p".to_vec());
    let forms = [
        plain.clone(),
        ItemValue {
            group: Some("g".into()),
            ..plain.clone()
        },
        ItemValue {
            deliveries: 2,
            ..plain.clone()
        },
        dead_item(),
    ];
    for form in forms {
        let without = encode_item_value(&form);
        assert_eq!(without[0] & 0x10, 0, "no expiry, no flag");
        let expiring = ItemValue {
            expires_at_ms: Some(1_000),
            ..form.clone()
        };
        let encoded = encode_item_value(&expiring);
        assert_eq!(encoded.len(), without.len() + 8);
        assert_eq!(decode_item(&encoded), Some(expiring));
        assert_eq!(decode_item(&without), Some(form));
    }
    assert_eq!(decode_item(&[0x11, 0, 0, 0, 0, 0, 0, 0, 42]), None);
}

#[test]
fn a_fairness_key_round_trips_in_every_form_and_items_without_one_keep_theirs() {
    let plain = ItemValue::new(42, b"p".to_vec());
    let spilled = ItemValue {
        payload: Vec::new(),
        parts: Some(PartsRef {
            id: [7; PARTS_ID_LEN],
            len: 200_000,
        }),
        ..plain.clone()
    };
    let forms = [
        plain.clone(),
        ItemValue {
            group: Some("g".into()),
            ..plain.clone()
        },
        ItemValue {
            expires_at_ms: Some(1_000),
            deliveries: 2,
            ..plain.clone()
        },
        dead_item(),
        spilled,
    ];
    for form in forms {
        let without = encode_item_value(&form);
        assert_eq!(without[0] & FAIR_FLAG, 0, "no key, no flag");
        for key in ["tenant-7", ""] {
            let keyed = ItemValue {
                fair_key: Some(key.into()),
                ..form.clone()
            };
            let encoded = encode_item_value(&keyed);
            assert_eq!(encoded.len(), without.len() + 1 + key.len());
            assert_eq!(decode_item(&encoded), Some(keyed.clone()));
            let held = HeldItem {
                item_key: b"k".to_vec(),
                item: keyed.clone(),
            };
            assert_eq!(decode_held(&encode_held(&held)), Some(held));
            for len in 0..encoded.len() - 1 {
                assert_ne!(decode_item(&encoded[..len]), Some(keyed.clone()));
            }
        }
        assert_eq!(decode_item(&without), Some(form));
    }
}
