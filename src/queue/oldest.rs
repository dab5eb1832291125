//! The age of a queue's oldest item, for stats, listings and the
//! `hotq_oldest_item_age_seconds` gauge.
//!
//! A FIFO queue's oldest item is its front. A priority queue orders items
//! by priority first, so its front is the lowest priority, not the oldest
//! item; but within one priority items keep push order, so the oldest item
//! is the oldest of each priority's first item. Those are read by skipping
//! from one priority to the next (one single-row read per priority level),
//! up to [`PRIORITY_LEVELS_READ_MAX`] levels: past that the age is that of
//! the oldest level read (a lower bound), which the docs say. Queues use a
//! handful of levels; an index by enqueue time would cost every push, pop
//! and settle of every priority queue a second write for this one gauge.

use crate::envelope::{End, decode_item, now_ms};
use crate::keys::{QueueKeys, QueueKind};
use crate::queue::{QueueError, read_end};
use crate::store::Read;
use crate::store::{RangeRead, Transaction};

/// Most priority levels read to find a priority queue's oldest item.
pub const PRIORITY_LEVELS_READ_MAX: usize = 256;

/// How long the queue's oldest item has waited, in ms; `None` when the
/// queue holds no visible item. Snapshot reads only.
pub async fn oldest_item_age_ms_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
) -> Result<Option<u64>, QueueError> {
    let enqueued_at_ms = match keys.kind() {
        QueueKind::Fifo => read_end(txn, keys, End::Front, 1, Read::Snapshot)
            .await?
            .first()
            .map(|item| item.enqueued_at_ms),
        QueueKind::Priority => oldest_priority_enqueued_in(txn, keys).await?,
    };
    Ok(enqueued_at_ms.map(|at| now_ms().saturating_sub(at)))
}

/// The earliest enqueue time among the first items of the queue's first
/// [`PRIORITY_LEVELS_READ_MAX`] priority levels.
async fn oldest_priority_enqueued_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
) -> Result<Option<u64>, QueueError> {
    let (mut cursor, end) = keys.items_range();
    let mut oldest: Option<u64> = None;
    for _ in 0..PRIORITY_LEVELS_READ_MAX {
        let rows = txn
            .get_range(RangeRead::new(&cursor, &end, 1).snapshot())
            .await?;
        let Some(row) = rows.first() else {
            break;
        };
        let corrupt = || QueueError::Corrupt {
            key: row.key.clone(),
        };
        let item = decode_item(&row.value).ok_or_else(corrupt)?;
        let (priority, _) = keys.priority_item_parts(&row.key).ok_or_else(corrupt)?;
        oldest = Some(oldest.map_or(item.enqueued_at_ms, |at| at.min(item.enqueued_at_ms)));
        if priority == i64::MAX {
            break;
        }
        // The next level: the first key past this priority's sub-range.
        cursor = keys.priority_range(priority).1;
    }
    Ok(oldest)
}
