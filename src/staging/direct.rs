//! One direct-pop attempt, at either end of a queue.

use crate::envelope::{End, now_ms};
use crate::keys::QueueKeys;
use crate::lease::lease_in;
use crate::queue::{DirectPop, Item, QueueError, read_end};
use crate::store::{Store, StoreError, Transaction, decode_counter};

/// Why a direct pop was not even tried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// The attempt's outcome.
    Done(DirectPop),
    /// Requests are waiting: the popper queues behind them instead of
    /// racing the fulfiller for items.
    RequestsWaiting,
}

/// Tries once to take up to `max` items from `end` of the queue: if no
/// request is waiting (snapshot check) and the queue is not paused, reads them without snapshot, clears
/// them (moving each under a lease when `lease_ms` > 0) and commits. A
/// conflict is returned, not retried.
pub async fn try_pop<S: Store>(
    store: &S,
    keys: &QueueKeys,
    end: End,
    max: usize,
    lease_ms: u64,
) -> Result<(Attempt, Vec<Item>), QueueError> {
    let txn = store.begin()?;
    let waiting = decode_counter(txn.get(&keys.waiting(), true).await?.as_deref());
    if waiting > 0 {
        return Ok((Attempt::RequestsWaiting, Vec::new()));
    }
    if crate::queue_settings::paused_in(&txn, keys).await? {
        // Paused: nothing to take. A pop that may wait joins the line,
        // whose rounds hand nothing out until the queue resumes.
        return Ok((Attempt::Done(DirectPop::Empty), Vec::new()));
    }
    let mut items = read_end(&txn, keys, end, max.max(1), false).await?;
    if items.is_empty() {
        return Ok((Attempt::Done(DirectPop::Empty), items));
    }
    debug_assert!(
        crate::groups::heads_are_distinct(&items),
        "one head per group"
    );
    let now = now_ms();
    for item in &mut items {
        txn.clear(&item.key)?;
        if lease_ms > 0 {
            lease_in(&txn, keys, item, lease_ms, now)?;
        } else if item.group.is_some() {
            // Its successor waits until the pop has reached its caller.
            let due_ms = now.saturating_add(crate::groups::HANDOFF_SLACK_MS);
            crate::groups::handoff_in(&txn, keys, item, due_ms)?;
        }
    }
    txn.atomic_add(&keys.depth(), -(items.len() as i64))?;
    match txn.commit().await {
        Ok(()) => {
            let first = DirectPop::Popped(items[0].clone());
            Ok((Attempt::Done(first), items))
        }
        Err(StoreError::Conflict) => Ok((Attempt::Done(DirectPop::Conflict), Vec::new())),
        Err(error) => Err(error.into()),
    }
}
