//! Listings: queues with their counters, and a queue's leases in flight.
//! Both read with snapshot and page, bounded: queues by name, leases by
//! their place in the store-wide due index (a lease is one row there).

use crate::envelope::{RECEIPT_LEN, decode_held};
use crate::keys::{
    DueWhat, QueueKeys, QueueKind, QueueName, due_entry, due_range, queue_of_key, queues_root_range,
};
use crate::lease::Receipt;
use crate::queue::QueueError;
use crate::store::Read;
use crate::store::{RangeRead, Store, Transaction, decode_counter, key_after};

/// Most queues one listing page holds.
pub const LIST_LIMIT_MAX: usize = 100;
/// Most leases one listing page holds.
pub const LEASES_LIMIT_MAX: usize = 1_000;
/// Most due-index rows one lease listing page reads: leases are ordered
/// by expiry across every queue, so a page of one queue's leases may have
/// to step over other queues' due entries. Past it the page ends short,
/// with a `next` to continue from.
pub const LEASES_SCAN_ROWS_MAX: usize = 100_000;
/// Due-index rows read at a time by a lease listing.
const LEASES_SCAN_BATCH: usize = 1_000;
/// Most bytes of due-index rows one lease listing page reads (other
/// queues' delayed items hold their payloads): past it the page ends
/// short, with a `next`.
const LEASES_SCAN_BYTES_MAX: usize = 16 << 20;
/// Longest `after` cursor of a lease listing, in hex digits (a due-index
/// key: its prefix, expiry, kind, queue name, what and id).
pub const LEASES_CURSOR_LEN_MAX: usize = 1_024;

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

/// Where a lease listing goes on: just after a due-index key, written as
/// hex (opaque to callers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseCursor(Vec<u8>);

impl LeaseCursor {
    /// Parses the `next` of an earlier page; `None` for anything else.
    pub fn parse(text: &str) -> Option<LeaseCursor> {
        if text.is_empty() || text.len() > LEASES_CURSOR_LEN_MAX {
            return None;
        }
        // Any key will do as a place to go on from: one outside the due
        // index lists from its start, or nothing.
        hex::decode(text).ok().map(LeaseCursor)
    }
}

impl std::fmt::Display for LeaseCursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&hex::encode(&self.0))
    }
}

/// Up to `limit` leases of the queue in expiry order, from after `after`;
/// and where to continue, when more may follow. Reads at most
/// [`LEASES_SCAN_ROWS_MAX`] due-index rows (and about
/// [`LEASES_SCAN_BYTES_MAX`] bytes): a page can end short (even empty)
/// with a `next`.
pub async fn leases<S: Store>(
    store: &S,
    keys: &QueueKeys,
    after: Option<&LeaseCursor>,
    limit: usize,
) -> Result<(Vec<LeaseSummary>, Option<LeaseCursor>), QueueError> {
    assert!(
        (1..=LEASES_LIMIT_MAX).contains(&limit),
        "limit is checked by the caller"
    );
    let txn = store.begin()?;
    let leased = decode_counter(txn.get(&keys.leased(), Read::Snapshot).await?.as_deref());
    if leased <= 0 {
        return Ok((Vec::new(), None));
    }
    let (begin, end) = due_range();
    let mut read_from = after.map_or(begin.clone(), |after| key_after(&after.0).max(begin));
    if read_from >= end {
        return Ok((Vec::new(), None));
    }
    let mut page = Vec::with_capacity(limit);
    // The last row read, this queue's or another's: everything before it
    // is listed or not this queue's.
    let mut last_read: Option<Vec<u8>> = None;
    let mut bytes_read = 0;
    for _ in 0..LEASES_SCAN_ROWS_MAX / LEASES_SCAN_BATCH {
        if bytes_read > LEASES_SCAN_BYTES_MAX {
            break;
        }
        let rows = txn
            .get_range(RangeRead::new(&read_from, &end, LEASES_SCAN_BATCH).snapshot())
            .await?;
        for row in &rows {
            bytes_read += row.key.len() + row.value.len();
            if let Some(lease) = lease_of(keys, &row.key, &row.value) {
                if page.len() == limit {
                    // One more exists: the next page starts with it.
                    return Ok((page, last_read.map(LeaseCursor)));
                }
                page.push(lease);
            }
            last_read = Some(row.key.clone());
        }
        let Some(last) = rows.last().filter(|_| rows.len() == LEASES_SCAN_BATCH) else {
            return Ok((page, None));
        };
        read_from = key_after(&last.key);
    }
    // Out of budget: the next page reads on after the last row read.
    Ok((page, last_read.map(LeaseCursor)))
}

/// The listing entry of due-index row `key` when it is a lease of `keys`' queue.
fn lease_of(keys: &QueueKeys, key: &[u8], value: &[u8]) -> Option<LeaseSummary> {
    let entry = due_entry(key)?;
    if entry.what != DueWhat::Lease || entry.kind != keys.kind() || &entry.queue != keys.name() {
        return None;
    }
    let receipt = Receipt(<[u8; RECEIPT_LEN]>::try_from(entry.id.as_slice()).ok()?);
    let held = decode_held(value);
    Some(LeaseSummary {
        receipt,
        delivery_count: held.as_ref().map_or(0, |held| held.item.deliveries),
        expires_at_ms: entry.due_ms,
        enqueued_at_ms: held.as_ref().map_or(0, |held| held.item.enqueued_at_ms),
        group: held.and_then(|held| held.item.group),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_cursor_is_one_to_512_bytes_of_hex() {
        let next = LeaseCursor(due_range().0).to_string();
        assert_eq!(LeaseCursor::parse(&next).map(|c| c.to_string()), Some(next));
        let longest = "ab".repeat(LEASES_CURSOR_LEN_MAX / 2);
        assert!(LeaseCursor::parse(&longest).is_some());
        for bad in ["", "a", "xyz", "0g", &format!("{longest}ab")] {
            assert_eq!(LeaseCursor::parse(bad), None, "{bad:?}");
        }
    }
}
