//! Listings: queues with their counters, and a queue's leases in flight.
//! Both read with snapshot and page by name (or receipt), bounded.

use super::receipt_row;
use crate::envelope::decode_held;
use crate::keys::{QueueKeys, QueueKind, QueueName, queue_of_key, queues_root_range};
use crate::lease::Receipt;
use crate::queue::QueueError;
use crate::store::Read;
use crate::store::{RangeRead, Store, Transaction, decode_counter, key_after};

/// Most queues one listing page holds.
pub const LIST_LIMIT_MAX: usize = 100;
/// Most leases one listing page holds.
pub const LEASES_LIMIT_MAX: usize = 1_000;

/// One queue of a listing: its counters and oldest item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueSummary {
    /// The queue's kind.
    pub kind: QueueKind,
    /// The queue's name.
    pub name: QueueName,
    /// Visible items.
    pub depth: i64,
    /// Leased items.
    pub leased: i64,
    /// Delayed items.
    pub delayed: i64,
    /// Items waiting behind their message group's head.
    pub grouped: i64,
    /// Stored requests waiting.
    pub waiting: i64,
    /// Age of the oldest visible item (see [`crate::queue::oldest`]).
    pub oldest_item_age_ms: Option<u64>,
    /// The queue is paused (see [`crate::queue::settings::paused_in`]).
    pub paused: bool,
    /// A dead-letter queue (see [`crate::queue::dead_letters`]).
    pub dead_letter: bool,
}

/// Up to `limit` queues of `kind` in name order, from after the queue
/// named `after`; and the name to continue after, when more may follow.
/// Reads one key per queue to find the next (the store skips the
/// subspaces between).
pub async fn list<S: Store>(
    store: &S,
    kind: QueueKind,
    after: Option<&QueueName>,
    limit: usize,
) -> Result<(Vec<QueueSummary>, Option<String>), QueueError> {
    assert!(
        (1..=LIST_LIMIT_MAX).contains(&limit),
        "limit is checked by the caller"
    );
    let (root_begin, root_end) = queues_root_range(kind);
    let mut cursor = match after {
        Some(name) => QueueKeys::of_kind(kind, name).queue_range().1,
        None => root_begin,
    };
    let txn = store.begin()?;
    let mut page = Vec::new();
    while page.len() < limit {
        let rows = txn
            .get_range(RangeRead::new(&cursor, &root_end, 1).snapshot())
            .await?;
        let Some(row) = rows.first() else {
            return Ok((page, None));
        };
        let Some((name, end)) = queue_of_key(kind, &row.key) else {
            // Not a queue's key: step over it.
            cursor = key_after(&row.key);
            continue;
        };
        cursor = end;
        page.push(summary(&txn, QueueKeys::of_kind(kind, &name)).await?);
    }
    let more = !txn
        .get_range(RangeRead::new(&cursor, &root_end, 1).snapshot())
        .await?
        .is_empty();
    let next = more.then(|| page.last().expect("a full page").name.to_string());
    Ok((page, next))
}

async fn summary<T: Transaction>(txn: &T, keys: QueueKeys) -> Result<QueueSummary, QueueError> {
    let counter = |value: Option<Vec<u8>>| decode_counter(value.as_deref());
    let depth = counter(txn.get(&keys.depth(), Read::Snapshot).await?);
    let leased = counter(txn.get(&keys.leased(), Read::Snapshot).await?);
    let delayed = counter(txn.get(&keys.delayed_count(), Read::Snapshot).await?);
    let grouped = counter(txn.get(&keys.grouped_count(), Read::Snapshot).await?);
    let waiting = counter(txn.get(&keys.waiting(), Read::Snapshot).await?);
    let oldest_item_age_ms = crate::queue::oldest::oldest_item_age_ms_in(txn, &keys).await?;
    let paused = crate::queue::settings::read_in(txn, &keys).await?.paused == Some(true);
    Ok(QueueSummary {
        paused,
        kind: keys.kind(),
        name: keys.name().clone(),
        depth,
        leased,
        delayed,
        grouped,
        waiting,
        oldest_item_age_ms,
        dead_letter: crate::queue::dead_letters::is_dead_letter_queue_in(txn, &keys).await?,
    })
}

/// One lease in flight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseSummary {
    /// Its receipt.
    pub receipt: Receipt,
    /// Deliveries so far, this one included.
    pub delivery_count: u32,
    /// When it expires, in ms since the epoch.
    pub expires_at_ms: u64,
    /// When the item was pushed, in ms since the epoch.
    pub enqueued_at_ms: u64,
    /// The item's message group.
    pub group: Option<String>,
}

/// Whether `keys`' queue holds a lease under `receipt`.
pub async fn holds_receipt<S: Store>(
    store: &S,
    keys: &QueueKeys,
    receipt: &Receipt,
) -> Result<bool, QueueError> {
    let txn = store.begin()?;
    Ok(txn
        .get(&keys.receipt(&receipt.0), Read::Snapshot)
        .await?
        .is_some())
}

/// Up to `limit` leases of the queue in receipt order, from after `after`;
/// and the receipt to continue after, when more may follow.
pub async fn leases<S: Store>(
    store: &S,
    keys: &QueueKeys,
    after: Option<&Receipt>,
    limit: usize,
) -> Result<(Vec<LeaseSummary>, Option<String>), QueueError> {
    assert!(
        (1..=LEASES_LIMIT_MAX).contains(&limit),
        "limit is checked by the caller"
    );
    let (begin, end) = keys.receipts_range();
    let begin = match after {
        Some(receipt) => key_after(&keys.receipt(&receipt.0)),
        None => begin,
    };
    let txn = store.begin()?;
    let rows = txn
        .get_range(RangeRead::new(&begin, &end, limit + 1).snapshot())
        .await?;
    let more = rows.len() > limit;
    let mut page = Vec::with_capacity(limit);
    for row in rows.iter().take(limit) {
        let Some((receipt, expires_at_ms)) = receipt_row(keys, row) else {
            return Err(QueueError::Corrupt {
                key: row.key.clone(),
            });
        };
        // Receipt and lease are written and cleared together; a legacy
        // lease (before the due index) shows without its item's details.
        let held = txn
            .get(&keys.lease(expires_at_ms, &receipt.0), Read::Snapshot)
            .await?
            .as_deref()
            .and_then(decode_held);
        page.push(LeaseSummary {
            receipt,
            delivery_count: held.as_ref().map_or(0, |held| held.item.deliveries),
            expires_at_ms,
            enqueued_at_ms: held.as_ref().map_or(0, |held| held.item.enqueued_at_ms),
            group: held.and_then(|held| held.item.group),
        });
    }
    let next = more.then(|| page.last().expect("a full page").receipt.to_string());
    Ok((page, next))
}
