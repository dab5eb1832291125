//! A plain pop's succession of a group's head (see the module doc of
//! [`crate::queue::groups`]): the pop's commit marks the group in succession; the
//! successor is released once the item reached its caller, a put-back
//! makes it the head again, and the timer ends a succession whose daemon
//! died.

use super::*;

/// The due time of a succession through a request waiting until
/// `deadline_ms`: after its result would be reaped, with
/// [`SUCCESSION_SLACK_MS`] to spare.
pub fn succession_due_ms(deadline_ms: u64, result_grace_ms: u64) -> u64 {
    deadline_ms
        .saturating_add(result_grace_ms)
        .saturating_add(SUCCESSION_SLACK_MS)
}

/// In the commit that takes `item` (a group's head) out of `items` without
/// a lease: its group is in succession until `due_ms` (see the module doc).
/// A blind write: while the head is visible nothing else writes its state
/// (pushes only read it; promotion needs the head to leave), and the
/// commit's read conflict on the item orders it against a purge.
pub fn succession_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    item: &Item,
    due_ms: u64,
) -> Result<(), StoreError> {
    let group = item.group.as_deref().expect("only grouped items hand off");
    assert!(
        item.lease.is_none(),
        "a leased head holds its group by its lease"
    );
    let state = State::Succession {
        due_ms,
        item_key: item.key.clone(),
    };
    txn.set(&keys.group(group), &encode_state(&state))?;
    txn.set(&keys.due(due_ms, DueWhat::Group, group.as_bytes()), &[])
}

/// In `txn`: the plain-popped head of `group` under `item_key` reached its
/// caller: the next item becomes the head. Nothing if its succession already
/// ended (the timer took it as delivered).
pub async fn delivered_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    group: &str,
    item_key: &[u8],
    now_ms: u64,
) -> Result<(), StoreError> {
    let state = state_in(txn, keys, group).await?;
    if ends_handoff(txn, keys, group, item_key, state.as_ref())? {
        leave_in(txn, keys, group, now_ms).await?;
    }
    Ok(())
}

/// In `txn`: when `state` is `group`'s succession of `item_key`, clears its
/// due entry (the succession ends here, not by the timer) and says so.
fn ends_handoff<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    group: &str,
    item_key: &[u8],
    state: Option<&State>,
) -> Result<bool, StoreError> {
    match state {
        Some(State::Succession {
            due_ms,
            item_key: key,
        }) if key.as_slice() == item_key => {
            txn.clear(&keys.due(*due_ms, DueWhat::Group, group.as_bytes()))?;
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// Promotes the successors of the plain-popped grouped `items` once they
/// have reached their caller: in a task of its own (the caller has its
/// items; a failure leaves the timer to promote at the succession's due
/// time). Leased and ungrouped items need nothing.
pub fn deliver_soon<S: Store>(store: &S, keys: &QueueKeys, items: &[Item]) {
    let handed: Vec<(String, Vec<u8>)> = items
        .iter()
        .filter(|item| item.lease.is_none())
        .filter_map(|item| Some((item.group.clone()?, item.key.clone())))
        .collect();
    if handed.is_empty() {
        return;
    }
    let (store, queue) = (store.clone(), keys.clone());
    let promote = async move {
        if let Err(error) = delivered(&store, &queue, &handed).await {
            tracing::warn!(queue = %queue.name(), %error, "promoting behind delivered group heads failed; the timer will");
        }
    };
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => drop(runtime.spawn(promote)),
        Err(_) => {
            tracing::warn!(queue = %keys.name(), "no runtime to promote behind delivered group heads; the timer will")
        }
    }
}

/// [`delivered_in`] for `(group, item key)` pairs, in one transaction.
pub async fn delivered<S: Store>(
    store: &S,
    keys: &QueueKeys,
    handed: &[(String, Vec<u8>)],
) -> Result<(), QueueError> {
    // Rerunning after "maybe committed" is harmless: the state then no
    // longer names the item, and nothing happens.
    let policy = RetryPolicy {
        retry_maybe_committed: true,
        ..RetryPolicy::default()
    };
    transact(store, policy, |txn| async move {
        let now = crate::envelope::now_ms();
        for (group, key) in handed {
            delivered_in(&txn, keys, group, key, now).await?;
        }
        Ok(())
    })
    .await?;
    Ok(())
}

/// In `txn`: puts back under `item_key` an item that was taken without a
/// lease but reached nobody. An item without a group goes back as it
/// always did. A group head in succession is the head again; if its succession
/// already ended and the group has another head, it waits behind that one.
pub async fn give_back_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    item_key: &[u8],
    item: &ItemValue,
) -> Result<(), StoreError> {
    let Some(group) = item.group.as_deref() else {
        txn.set(item_key, &encode_item_value(item))?;
        crate::queue::expiry::index_in(txn, keys, item_key, item.expires_at_ms)?;
        return txn.atomic_add(&keys.depth(), 1);
    };
    let state = state_in(txn, keys, group).await?;
    let ended = ends_handoff(txn, keys, group, item_key, state.as_ref())?;
    if !ended && state.is_some() {
        tracing::warn!(queue = %keys.name(), group, "a group head came back after its succession ended: it waits behind the group's next head");
        let (index, random) = keys.item_parts(item_key).unwrap_or_default();
        let pending = encode_pending(0, &encode_item_value(item));
        let key = keys.grouped_item(group, index, &random);
        txn.set(&key, &pending)?;
        crate::queue::expiry::index_in(txn, keys, &key, item.expires_at_ms)?;
        return txn.atomic_add(&keys.grouped_count(), 1);
    }
    txn.set(&keys.group(group), &encode_state(&State::Head))?;
    txn.set(item_key, &encode_item_value(item))?;
    crate::queue::expiry::index_in(txn, keys, item_key, item.expires_at_ms)?;
    txn.atomic_add(&keys.depth(), 1)
}

/// In the timer's transaction (which consumed the due entry): the succession
/// of `group`'s head due at `due_ms` did not end in time (the daemon that
/// popped it died): taken as delivered.
pub async fn succession_due_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    group: &[u8],
    due_ms: u64,
    now_ms: u64,
) -> Result<(), StoreError> {
    let Ok(group) = std::str::from_utf8(group) else {
        return Ok(());
    };
    if let Some(State::Succession { due_ms: at, .. }) = state_in(txn, keys, group).await?
        && at == due_ms
    {
        tracing::info!(queue = %keys.name(), group, "a plain-popped group head's succession did not end: taken as delivered");
        leave_in(txn, keys, group, now_ms).await?;
    }
    Ok(())
}
