//! Listings: queues with their counters, and a queue's leases in flight.
//! Both read with snapshot and page, bounded: queues by name, leases by
//! keys that do not move while the lease lives there (see [`leases`]).

use crate::envelope::{RECEIPT_LEN, decode_held};
use crate::keys::{
    DueWhat, QueueKeys, QueueKind, QueueName, due_entry, due_range, queue_of_key, queues_root_range,
};
use crate::lease::Receipt;
use crate::queue::QueueError;
use crate::queue::fair::{FAIR_BACKLOG_SHOWN_MAX, FAIR_KEYS_SCANNED_MAX, KeyBacklog, backlog_in};
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
    /// Items dropped by their retention, so far.
    pub expired: i64,
    /// Stored requests waiting.
    pub waiting: i64,
    /// Age of the oldest visible item (see [`crate::queue::oldest`]).
    pub oldest_item_age_ms: Option<u64>,
    /// The queue is paused (see [`crate::queue::settings::paused_in`]).
    pub paused: bool,
    /// A dead-letter queue (see [`crate::queue::dead_letters`]).
    pub dead_letter: bool,
    /// A FIFO queue's stats: its largest fairness keys' backlog, largest
    /// first (at most [`FAIR_BACKLOG_SHOWN_MAX`]; empty without keys).
    /// `None` in a listing (not read there) and for a priority queue.
    pub fair_backlog: Option<Vec<KeyBacklog>>,
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
        page.push(summary(&txn, QueueKeys::of_kind(kind, &name), false).await?);
    }
    let more = !txn
        .get_range(RangeRead::new(&cursor, &root_end, 1).snapshot())
        .await?
        .is_empty();
    let next = more.then(|| page.last().expect("a full page").name.to_string());
    Ok((page, next))
}

/// The summary of the queue of `keys` (its stats), read in one snapshot.
pub async fn stats<S: Store>(store: &S, keys: &QueueKeys) -> Result<QueueSummary, QueueError> {
    let txn = store.begin()?;
    summary(&txn, keys.clone(), true).await
}

/// The summary of `keys`' queue in `txn`; `with_backlog`: a FIFO queue's
/// largest fairness keys' backlog too (bounded by the keys shown and
/// scanned; a queue without keys reads one empty range for it).
async fn summary<T: Transaction>(
    txn: &T,
    keys: QueueKeys,
    with_backlog: bool,
) -> Result<QueueSummary, QueueError> {
    let counter = |value: Option<Vec<u8>>| decode_counter(value.as_deref());
    let depth = counter(txn.get(&keys.depth(), Read::Snapshot).await?);
    let leased = counter(txn.get(&keys.leased(), Read::Snapshot).await?);
    let delayed = counter(txn.get(&keys.delayed_count(), Read::Snapshot).await?);
    let grouped = counter(txn.get(&keys.grouped_count(), Read::Snapshot).await?);
    let expired = counter(txn.get(&keys.expired_count(), Read::Snapshot).await?);
    let waiting = counter(txn.get(&keys.waiting(), Read::Snapshot).await?);
    let oldest_item_age_ms = crate::queue::oldest::oldest_item_age_ms_in(txn, &keys).await?;
    let settings = crate::queue::settings::read_in(txn, &keys).await?;
    let paused = settings.paused == Some(true);
    let fair_backlog = if with_backlog && keys.kind() == QueueKind::Fifo {
        let weights = settings.fair_weights.unwrap_or_default();
        let (shown, scanned) = (FAIR_BACKLOG_SHOWN_MAX, FAIR_KEYS_SCANNED_MAX);
        Some(backlog_in(txn, &keys, &weights, shown, scanned).await?)
    } else {
        None
    };
    Ok(QueueSummary {
        paused,
        kind: keys.kind(),
        name: keys.name().clone(),
        depth,
        leased,
        delayed,
        grouped,
        expired,
        waiting,
        oldest_item_age_ms,
        dead_letter: crate::queue::dead_letters::is_dead_letter_queue_in(txn, &keys).await?,
        fair_backlog,
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
    /// The item's payload (empty for a lease older than the due index,
    /// whose item is not kept with it, and for a large item, whose parts a
    /// listing does not read): a listing shows its preview.
    pub payload: Vec<u8>,
    /// The payload's length in bytes, large items included.
    pub size: usize,
}

/// Where a lease listing goes on: the key of the first row the next page
/// reads, a due-index key or one of the queue's receipt rows, written as
/// hex (opaque to callers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseCursor(Vec<u8>);

impl LeaseCursor {
    /// Parses the `next` of an earlier page; `None` for anything else.
    pub fn parse(text: &str) -> Option<LeaseCursor> {
        if text.is_empty() || text.len() > LEASES_CURSOR_LEN_MAX {
            return None;
        }
        // Any key will do as a place to go on from: one before the due
        // index lists from its start, one past it lists the extended leases.
        hex::decode(text).ok().map(LeaseCursor)
    }
}

impl std::fmt::Display for LeaseCursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&hex::encode(&self.0))
    }
}

/// Up to `limit` leases of the queue, from `after` on; and where to
/// continue, when more may follow. A listing is two runs, each over keys
/// that do not move while a lease is in its run:
///
/// 1. the leases at the expiry their receipt was issued with, in expiry
///    order: their due-index rows. The first extend moves a lease out of
///    this run for good (see [`crate::lease::settle::extend_in`]);
/// 2. the extended leases, in receipt order: the queue's receipt rows,
///    each naming where its lease is, from the lease's first extend to
///    its end.
///
/// So a lease that exists from a listing's first page to its last is
/// listed: it is in the first run when that run passes its row, or in the
/// second from then on. One extended during the listing may be listed
/// twice, once in each run. Reads at most [`LEASES_SCAN_ROWS_MAX`] rows
/// (and about [`LEASES_SCAN_BYTES_MAX`] bytes): a page can end short
/// (even empty) with a `next`.
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
    let mut page = Page {
        leases: Vec::with_capacity(limit),
        limit,
        rows_read: 0,
        bytes_read: 0,
    };
    let (receipts_begin, receipts_end) = keys.receipts_range();
    let extended_from = match after {
        Some(after) if (receipts_begin..receipts_end).contains(&after.0) => after.0.clone(),
        _ => match issued_leases(&txn, keys, after, &mut page).await? {
            Some(next) => return Ok((page.leases, Some(next))),
            None => keys.receipts_range().0,
        },
    };
    let next = extended_leases(&txn, keys, extended_from, &mut page).await?;
    Ok((page.leases, next))
}

/// A lease listing page being read, and what it has read.
struct Page {
    leases: Vec<LeaseSummary>,
    limit: usize,
    rows_read: usize,
    bytes_read: usize,
}

impl Page {
    fn full(&self) -> bool {
        self.leases.len() >= self.limit
    }

    fn read(&mut self, key: &[u8], value: &[u8]) {
        self.rows_read += 1;
        self.bytes_read += key.len() + value.len();
    }

    fn out_of_budget(&self) -> bool {
        self.rows_read >= LEASES_SCAN_ROWS_MAX || self.bytes_read > LEASES_SCAN_BYTES_MAX
    }
}

/// The listing's first run, from `after` on: the queue's leases at their
/// issued expiry, in the due index (ordered by expiry across every queue,
/// so a page may step over other queues' rows). Where the page stops, or
/// `None` once the run is over (the page goes on with the second run).
async fn issued_leases<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    after: Option<&LeaseCursor>,
    page: &mut Page,
) -> Result<Option<LeaseCursor>, QueueError> {
    let (begin, end) = due_range();
    let mut read_from = after.map_or(begin.clone(), |after| after.0.clone().max(begin));
    for _ in 0..LEASES_SCAN_ROWS_MAX / LEASES_SCAN_BATCH {
        if read_from >= end {
            return Ok(None);
        }
        let rows = txn
            .get_range(RangeRead::new(&read_from, &end, LEASES_SCAN_BATCH).snapshot())
            .await?;
        for row in &rows {
            page.read(&row.key, &row.value);
            let lease = lease_of(keys, &row.key, &row.value)
                .filter(|lease| lease.expires_at_ms == lease.receipt.issued_expiry_ms());
            if let Some(lease) = lease {
                if page.full() {
                    // One more exists: the next page starts with it.
                    return Ok(Some(LeaseCursor(row.key.clone())));
                }
                page.leases.push(lease);
            }
        }
        let Some(last) = rows.last().filter(|_| rows.len() == LEASES_SCAN_BATCH) else {
            return Ok(None);
        };
        read_from = key_after(&last.key);
        if page.out_of_budget() {
            break;
        }
    }
    // Out of budget: the next page reads on after the last row read.
    Ok(Some(LeaseCursor(read_from)))
}

/// The listing's second run, from receipt row `from` on: the queue's
/// extended leases, each found by its receipt row. Where the page stops,
/// or `None` once the listing is complete.
async fn extended_leases<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    from: Vec<u8>,
    page: &mut Page,
) -> Result<Option<LeaseCursor>, QueueError> {
    let end = keys.receipts_range().1;
    let mut read_from = from;
    for _ in 0..LEASES_SCAN_ROWS_MAX / LEASES_SCAN_BATCH {
        let rows = txn
            .get_range(RangeRead::new(&read_from, &end, LEASES_SCAN_BATCH).snapshot())
            .await?;
        for row in &rows {
            if page.out_of_budget() {
                return Ok(Some(LeaseCursor(row.key.clone())));
            }
            page.read(&row.key, &row.value);
            let Some(lease) = extended_lease(txn, keys, &row.key, &row.value, page).await? else {
                continue;
            };
            if page.full() {
                return Ok(Some(LeaseCursor(row.key.clone())));
            }
            page.leases.push(lease);
        }
        let Some(last) = rows.last().filter(|_| rows.len() == LEASES_SCAN_BATCH) else {
            return Ok(None);
        };
        read_from = key_after(&last.key);
    }
    Ok(Some(LeaseCursor(read_from)))
}

/// The lease receipt row `key` (value: the lease's expiry) names; `None`
/// when there is none in the due index (a lease an older binary wrote,
/// not yet moved there: see [`crate::due::migrate`]).
async fn extended_lease<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    key: &[u8],
    value: &[u8],
    page: &mut Page,
) -> Result<Option<LeaseSummary>, QueueError> {
    let (Some(receipt), Ok(expires)) = (keys.receipt_of(key), <[u8; 8]>::try_from(value)) else {
        return Err(QueueError::Corrupt { key: key.to_vec() });
    };
    let lease_key = keys.lease(u64::from_be_bytes(expires), &receipt);
    let Some(lease) = txn.get(&lease_key, Read::Snapshot).await? else {
        return Ok(None);
    };
    page.read(&lease_key, &lease);
    Ok(lease_of(keys, &lease_key, &lease))
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
        payload: held
            .as_ref()
            .map_or(Vec::new(), |held| held.item.payload.clone()),
        size: held.as_ref().map_or(0, |held| held.item.len()),
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
