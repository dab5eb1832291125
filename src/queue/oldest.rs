//! The age of a queue's oldest item, for stats, listings and the
//! `hotq_oldest_item_age_seconds` gauge.
//!
//! A FIFO queue's oldest item is its front, unless the queue has
//! fairness keys (see [`crate::queue::fair`]): then items are in virtual
//! time, and a backlogged key's oldest item is within one step of the
//! head's virtual time, so the oldest is the oldest of the items in one
//! unit of virtual time from the head (at most [`FAIR_HEAD_ITEMS_READ_MAX`]
//! read: past that, a lower bound). A queue whose front has no fairness
//! key reads its front only, as before. A priority queue orders items
//! by priority first, so its front is the lowest priority, not the oldest
//! item; but within one priority items keep push order, so the oldest item
//! is the oldest of each priority's first item. Those are read by skipping
//! from one priority to the next (one single-row read per priority level),
//! up to [`PRIORITY_LEVELS_READ_MAX`] levels: past that the age is that of
//! the oldest level read (a lower bound), which the docs say. A level in
//! fair order (its first item has a fairness key) is read as a fair FIFO
//! queue's head is, within one shared bound of rows. Queues use a
//! handful of levels; an index by enqueue time would cost every push, pop
//! and settle of every priority queue a second write for this one gauge.

use crate::envelope::{End, decode_item, now_ms};
use crate::keys::{QueueKeys, QueueKind};
use crate::queue::fair::TAG_SCALE;
use crate::queue::{QueueError, read_end};
use crate::store::Read;
use crate::store::{RangeRead, Transaction};

/// Most items read from the front of a queue with fairness keys to find
/// its oldest item.
pub const FAIR_HEAD_ITEMS_READ_MAX: usize = 1_000;
/// Most priority levels read to find a priority queue's oldest item.
pub const PRIORITY_LEVELS_READ_MAX: usize = 256;

/// How long the queue's oldest item has waited, in ms; `None` when the
/// queue holds no visible item. Snapshot reads only.
pub async fn oldest_item_age_ms_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
) -> Result<Option<u64>, QueueError> {
    let enqueued_at_ms = match keys.kind() {
        QueueKind::Fifo => {
            let front = read_end(txn, keys, End::Front, 1, Read::Snapshot).await?;
            match front.first() {
                Some(item) if item.fair_key.is_some() => oldest_fair_in(txn, keys, item).await?,
                front => front.map(|item| item.enqueued_at_ms),
            }
        }
        QueueKind::Priority => oldest_priority_enqueued_in(txn, keys).await?,
    };
    Ok(enqueued_at_ms.map(|at| now_ms().saturating_sub(at)))
}

/// The earliest enqueue time among the items of the fair FIFO queue `keys`
/// within one unit of virtual time of its `front` (which every key with a
/// backlog has an item in), at most [`FAIR_HEAD_ITEMS_READ_MAX`].
async fn oldest_fair_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    front: &crate::queue::Item,
) -> Result<Option<u64>, QueueError> {
    let begin = front.key.clone();
    let Some(index) = keys.item_index(&begin) else {
        return Ok(Some(front.enqueued_at_ms));
    };
    let end = keys.item(index.saturating_add(crate::queue::fair::TAG_SCALE + 1), &[]);
    let rows = txn
        .get_range(RangeRead::new(&begin, &end, FAIR_HEAD_ITEMS_READ_MAX).snapshot())
        .await?;
    let mut oldest = front.enqueued_at_ms;
    for row in rows {
        let item = decode_item(&row.value).ok_or_else(|| QueueError::Corrupt {
            key: row.key.clone(),
        })?;
        oldest = oldest.min(item.enqueued_at_ms);
    }
    Ok(Some(oldest))
}

/// The earliest enqueue time among the first items of the queue's first
/// [`PRIORITY_LEVELS_READ_MAX`] priority levels; for a level whose first
/// item has a fairness key, among its items within one unit of virtual
/// time of it (at most [`FAIR_HEAD_ITEMS_READ_MAX`] read over all levels).
async fn oldest_priority_enqueued_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
) -> Result<Option<u64>, QueueError> {
    let (mut cursor, end) = keys.items_range();
    let mut oldest: Option<u64> = None;
    let mut fair_rows_left = FAIR_HEAD_ITEMS_READ_MAX;
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
        let (priority, count) = keys.priority_item_parts(&row.key).ok_or_else(corrupt)?;
        let mut level_oldest = item.enqueued_at_ms;
        if item.fair_key.is_some() && fair_rows_left > 0 {
            // A level in fair order: its oldest item is within one unit of
            // virtual time of its first (as in a fair FIFO queue).
            let end = keys.priority_item(priority, count.saturating_add(TAG_SCALE + 1), &[]);
            let rows = txn
                .get_range(RangeRead::new(&row.key, &end, fair_rows_left).snapshot())
                .await?;
            fair_rows_left -= rows.len();
            for row in rows {
                let item = decode_item(&row.value).ok_or_else(|| QueueError::Corrupt {
                    key: row.key.clone(),
                })?;
                level_oldest = level_oldest.min(item.enqueued_at_ms);
            }
        }
        oldest = Some(oldest.map_or(level_oldest, |at| at.min(level_oldest)));
        if priority == i64::MAX {
            break;
        }
        // The next level: the first key past this priority's sub-range.
        cursor = keys.priority_range(priority).1;
    }
    Ok(oldest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::{ItemValue, encode_item_value};
    use crate::keys::QueueName;
    use crate::queue::fair::{TAG_SCALE, append_at_in};
    use crate::store::Store;
    use crate::store::embedded::{Durability, EmbeddedConfig, EmbeddedStore};

    fn item(enqueued_at_ms: u64, key: Option<&str>) -> Vec<u8> {
        encode_item_value(&ItemValue {
            fair_key: key.map(str::to_string),
            ..ItemValue::new(enqueued_at_ms, b"p".to_vec())
        })
    }

    /// In fair order a quiet key's new item may be the front while a noisy
    /// key's old backlog is right behind it: the age is the backlog's.
    #[tokio::test]
    async fn a_fair_queue_ages_by_its_oldest_key_not_its_front() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = EmbeddedConfig::new(dir.path());
        config.durability = Durability::Buffered;
        let store = EmbeddedStore::open(config).unwrap();
        let keys = QueueKeys::new(&QueueName::new("fair-ages").unwrap());
        let now = now_ms();
        let s = TAG_SCALE;
        let txn = store.begin().unwrap();
        let values = [
            item(now - 5_000, Some("quiet")),
            item(now - 60_000, Some("noisy")),
            item(now - 59_000, Some("noisy")),
            item(now - 90_000, Some("far")),
        ];
        append_at_in(
            &txn,
            &keys,
            &values,
            &[],
            &[s, s + s / 2, 2 * s + s / 2, 3 * s],
        )
        .unwrap();
        txn.commit().await.unwrap();
        let txn = store.begin().unwrap();
        let age = oldest_item_age_ms_in(&txn, &keys).await.unwrap().unwrap();
        // The noisy key's first item, one step behind the front; the item
        // two units of virtual time on is not read (no key's first item
        // is that far from the front).
        assert!((60_000..90_000).contains(&age), "age {age}");
        let plain = QueueKeys::new(&QueueName::new("plain-ages").unwrap());
        let txn = store.begin().unwrap();
        let values = [item(now - 5_000, None), item(now - 60_000, None)];
        append_at_in(&txn, &plain, &values, &[], &[0, 1]).unwrap();
        txn.commit().await.unwrap();
        let txn = store.begin().unwrap();
        let age = oldest_item_age_ms_in(&txn, &plain).await.unwrap().unwrap();
        assert!(
            (5_000..60_000).contains(&age),
            "a plain queue's front: {age}"
        );
    }

    /// The same within a priority level in fair order: its first item is
    /// new, a noisy key's old one half a step behind it.
    #[tokio::test]
    async fn a_fair_priority_level_ages_by_its_oldest_key_not_its_first() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = EmbeddedConfig::new(dir.path());
        config.durability = Durability::Buffered;
        let store = EmbeddedStore::open(config).unwrap();
        let name = QueueName::new("fair-levels").unwrap();
        let keys = QueueKeys::of_kind(QueueKind::Priority, &name);
        let now = now_ms();
        let s = TAG_SCALE;
        let txn = store.begin().unwrap();
        for (priority, count, value) in [
            (5, s, item(now - 5_000, Some("quiet"))),
            (5, s + s / 2, item(now - 60_000, Some("noisy"))),
            (5, 3 * s, item(now - 90_000, Some("far"))),
            (9, s, item(now - 10_000, Some("high"))),
        ] {
            txn.set(&keys.priority_item(priority, count, &[1]), &value)
                .unwrap();
        }
        txn.commit().await.unwrap();
        let txn = store.begin().unwrap();
        let age = oldest_item_age_ms_in(&txn, &keys).await.unwrap().unwrap();
        assert!((60_000..90_000).contains(&age), "age {age}");
    }
}
