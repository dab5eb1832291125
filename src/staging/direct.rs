//! One direct-pop attempt, at either end of a queue.

use crate::envelope::{End, decode_item};
use crate::keys::QueueKeys;
use crate::queue::{DirectPop, Item, QueueError};
use crate::store::{RangeRead, Store, StoreError, Transaction, decode_counter};

/// Why a direct pop was not even tried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// The attempt's outcome.
    Done(DirectPop),
    /// Requests are waiting: the popper queues behind them instead of
    /// racing the fulfiller for items.
    RequestsWaiting,
}

/// Reads the first (or last) item of `keys` in `txn`.
pub async fn read_end<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    end: End,
    limit: usize,
    snapshot: bool,
) -> Result<Vec<Item>, QueueError> {
    let (begin, stop) = keys.items_range();
    let mut read = RangeRead::new(&begin, &stop, limit);
    read.reverse = end == End::Back;
    read.snapshot = snapshot;
    txn.get_range(read)
        .await?
        .into_iter()
        .map(|row| {
            let (enqueued_at_ms, payload) =
                decode_item(&row.value).ok_or_else(|| QueueError::Corrupt {
                    key: row.key.clone(),
                })?;
            Ok(Item {
                enqueued_at_ms,
                payload: payload.to_vec(),
                key: row.key,
            })
        })
        .collect()
}

/// Tries once to take up to `max` items from `end` of the queue: if no
/// request is waiting (snapshot check), reads them without snapshot, clears
/// them and commits. A conflict is returned, not retried.
pub async fn try_pop<S: Store>(
    store: &S,
    keys: &QueueKeys,
    end: End,
    max: usize,
) -> Result<(Attempt, Vec<Item>), QueueError> {
    let txn = store.begin()?;
    let waiting = decode_counter(txn.get(&keys.waiting(), true).await?.as_deref());
    if waiting > 0 {
        return Ok((Attempt::RequestsWaiting, Vec::new()));
    }
    let items = read_end(&txn, keys, end, max.max(1), false).await?;
    if items.is_empty() {
        return Ok((Attempt::Done(DirectPop::Empty), items));
    }
    for item in &items {
        txn.clear(&item.key)?;
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
