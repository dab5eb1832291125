//! Tests of [`super::LocalWaiters`] and [`super::LocalWaiter`].

use super::*;

/// A round's answer: `served` with their items, `emptied` with none.
fn answered(served: Vec<(u64, Vec<Item>)>, emptied: &[u64]) -> Answered {
    Answered {
        served,
        emptied: emptied.to_vec(),
        acked: Vec::new(),
    }
}

fn item(payload: &[u8]) -> Item {
    Item::from_value(
        b"key".to_vec(),
        crate::envelope::ItemValue::new(1, payload.to_vec()),
    )
}

#[tokio::test]
async fn a_hand_off_reaches_its_waiter_once_and_comes_back_when_nobody_waits() {
    let waiters = Arc::new(LocalWaiters::default());
    let keys = QueueKeys::new(&QueueName::new("q").unwrap());
    let mut waiter = LocalWaiter::new(waiters.clone(), &keys);
    assert_eq!(waiters.waiting_on(&keys), 1);
    waiter.add_id(&id("first-attempt"));
    waiter.add_id(&id("second-attempt"));
    assert!(waiters.is_local(&id("first-attempt")) && waiters.is_local(&id("second-attempt")));
    assert!(!waiters.is_local(&id("someone-else")));
    assert_eq!(waiters.hand_over(&id("second-attempt"), item(b"a")), vec![]);
    // The same waiter served twice (two attempts' requests): the second comes back.
    assert_eq!(
        waiters.hand_over(&id("first-attempt"), item(b"b")),
        vec![item(b"b")]
    );
    assert!(waiter.close(), "a hand-off was taken");
    assert_eq!((&mut waiter.receiver).await.unwrap(), vec![item(b"a")]);
    assert!(!waiters.is_local(&id("first-attempt")));

    let mut left = LocalWaiter::new(waiters.clone(), &keys);
    left.add_id(&id("left"));
    assert!(!left.close(), "nothing was handed over");
    assert_eq!(waiters.hand_over(&id("left"), item(b"c")), vec![item(b"c")]);
    let dropped = {
        let mut waiter = LocalWaiter::new(waiters.clone(), &keys);
        waiter.add_id(&id("dropped"));
        waiter
    };
    drop(dropped);
    assert!(waiters.slots.lock().is_empty(), "entries are removed");
}

#[tokio::test]
async fn a_claimed_pop_dropped_while_its_claim_is_resolved_loses_no_item() {
    // Found in review: the drop of a waiting pop whose request is
    // claimed, with the resolution landing between its checks.
    let waiters = Arc::new(LocalWaiters::default());
    let keys = QueueKeys::new(&QueueName::new("q").unwrap());
    let mut waiter = LocalWaiter::new(waiters.clone(), &keys);
    waiter.enqueue(LineRequest::one(RequestValue::front(u64::MAX)), None);
    let claimed = waiters.claim_memory(&keys, 8);
    assert_eq!(waiter.abandon(), None, "nothing handed yet");
    let put_back = waiters.resolve_claims(
        &keys,
        &claimed,
        answered(vec![(claimed[0].seq, vec![item(b"a")])], &[]),
    );
    drop(waiter);
    assert_eq!(
        put_back,
        vec![item(b"a")],
        "the fulfiller got it back to put back"
    );
    assert!(waiters.queues.lock().is_empty());
}

#[tokio::test]
async fn a_memory_request_claimed_by_a_fulfillment_leaves_only_once_resolved() {
    let waiters = Arc::new(LocalWaiters::default());
    let keys = QueueKeys::new(&QueueName::new("q").unwrap());
    let request = LineRequest::one(RequestValue::front(u64::MAX));
    let mut served = LocalWaiter::new(waiters.clone(), &keys);
    served.enqueue(request, None);
    let mut leaving = LocalWaiter::new(waiters.clone(), &keys);
    leaving.enqueue(request, None);
    let mut unclaimed = LocalWaiter::new(waiters.clone(), &keys);
    unclaimed.enqueue(request, None);
    let claimed = waiters.claim_memory(&keys, 2);
    assert_eq!(claimed.len(), 2, "the first two, in arrival order");
    assert!(claimed[0].seq < claimed[1].seq);
    let third = waiters.claim_memory(&keys, 8);
    assert_eq!(third.len(), 1, "claimed ones are not offered twice");
    assert!(
        waiters
            .resolve_claims(&keys, &third, answered(Vec::new(), &[]))
            .is_empty()
    );

    // The third leaves at once; the second, claimed, must wait.
    assert!(!unclaimed.close());
    assert!(
        leaving.close(),
        "a claimed request leaves through its resolution"
    );
    assert_eq!(
        waiters.memory_waiting(&keys),
        2,
        "still in the line until resolved"
    );
    let put_back = waiters.resolve_claims(
        &keys,
        &claimed,
        answered(vec![(claimed[0].seq, vec![item(b"a")])], &[]),
    );
    assert!(put_back.is_empty());
    assert_eq!((&mut served.receiver).await.unwrap(), vec![item(b"a")]);
    assert!(
        (&mut leaving.receiver).await.is_err(),
        "resolved unserved: told nothing came"
    );
    assert_eq!(waiters.memory_waiting(&keys), 0);

    // A claimed request whose pop task is dropped: its item comes back.
    let mut dropped = LocalWaiter::new(waiters.clone(), &keys);
    dropped.enqueue(request, None);
    let claimed = waiters.claim_memory(&keys, 8);
    drop(dropped);
    let put_back = waiters.resolve_claims(
        &keys,
        &claimed,
        answered(vec![(claimed[0].seq, vec![item(b"b")])], &[]),
    );
    assert_eq!(put_back, vec![item(b"b")]);
    drop((served, leaving, unclaimed));
    assert!(waiters.queues.lock().is_empty(), "entries are removed");
}

#[tokio::test]
async fn a_pop_that_must_not_wait_is_answered_empty_and_a_pop_of_many_takes_several() {
    let waiters = Arc::new(LocalWaiters::default());
    let keys = QueueKeys::new(&QueueName::new("q").unwrap());
    let request = RequestValue::front(u64::MAX);
    let mut many = LocalWaiter::new(waiters.clone(), &keys);
    many.enqueue(
        LineRequest {
            request,
            max: 3,
            answers_empty: false,
        },
        None,
    );
    let mut no_wait = LocalWaiter::new(waiters.clone(), &keys);
    no_wait.enqueue(
        LineRequest {
            request,
            max: 1,
            answers_empty: true,
        },
        None,
    );
    let claimed = waiters.claim_memory(&keys, 8);
    assert_eq!(claimed[0].line.max, 3);
    let served = vec![(claimed[0].seq, vec![item(b"a"), item(b"b")])];
    let put_back = waiters.resolve_claims(&keys, &claimed, answered(served, &[claimed[1].seq]));
    assert!(put_back.is_empty());
    assert_eq!(
        (&mut many.receiver).await.unwrap(),
        vec![item(b"a"), item(b"b")]
    );
    assert_eq!(
        (&mut no_wait.receiver).await.unwrap(),
        Vec::<Item>::new(),
        "answered: nothing visible"
    );
    drop((many, no_wait));
    assert!(waiters.queues.lock().is_empty());
}

fn id(name: &str) -> RequesterId {
    RequesterId::from_bytes(name.as_bytes().to_vec())
}
