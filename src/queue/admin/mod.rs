//! Administration of queues over any store: list, purge, delete, and the
//! leases in flight.
//!
//! Purge and delete race workers' pops safely because they consume items
//! as pops do: every item they drop is read (or read-conflicted) in the
//! transaction that clears it, so of a purge and a pop taking one item,
//! exactly one commits; an item already delivered (leased, or handed to a
//! requester) is never touched by a purge. Purge takes items from the
//! *back* of the queue while pops take the front, so the two rarely meet
//! until the queue is nearly empty.
//!
//! SQS's PurgeQueue ([`purge_in_flight`]) drops the leased items too, last,
//! with the delete's lease path below; a leased group head it drops
//! releases its group as an ack would.
//!
//! Delete also drops the queue's leases (their receipts then answer
//! `unknown_receipt`: the item is gone, not redelivered) and delayed items,
//! then clears the queue's whole subspace — counters, settings (its
//! dead-letter link), dedup ids, stored requests and results — in one
//! transaction that read-conflicts on all of it, so nothing that raced in
//! survives uncounted.
//!
//! Message groups (see [`crate::queue::groups`]): a purge also drops the items
//! waiting behind group heads that were pushed before it began; each
//! visible or delayed head it drops releases its group's next item (one
//! pushed after the purge began, if any), in the same transaction. A
//! leased head stays out, and releases its group when it leaves. Delete
//! drops them all. Both count waiting items with the visible ones.
//!
//! A queue's delayed items live only in the store-wide due index (keyed by
//! due time first), so dropping them reads that index in bounded batches
//! from its start: the cost is every due entry of every queue, once per
//! purge or delete that finds the queue's delayed count above zero.

mod listing;

pub use listing::{
    LEASES_CURSOR_LEN_MAX, LEASES_LIMIT_MAX, LIST_LIMIT_MAX, LeaseCursor, LeaseSummary,
    QueueSummary, leases, list, stats,
};

use crate::envelope::{decode_held, decode_item, now_ms};
use crate::keys::{DueWhat, QueueKeys, QueueKind, due_entry, due_range};
use crate::queue::QueueError;
use crate::store::Read;
use crate::store::{
    KeyValue, RangeRead, RetryPolicy, Store, StoreError, Transaction, decode_counter, decode_mark,
    key_after, transact,
};

/// Most items one purge transaction drops.
pub const PURGE_BATCH_MAX: usize = 1_000;
/// Most transactions one purge or delete runs before answering (it says
/// whether work was left; calling it again continues).
pub const ADMIN_PASSES_MAX: usize = 1_000;
/// Most due-index rows one transaction reads looking for delayed items.
const DUE_SCAN_BATCH_MAX: usize = 10_000;
/// Longest a delete works before it answers: past it, with pushes still
/// landing, it reports what it dropped so far and that work is left.
pub const DELETE_WAIT_MS_MAX: u64 = 5_000;

/// What a purge or delete dropped.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Dropped {
    /// Visible items.
    pub items: u64,
    /// Delayed items.
    pub delayed: u64,
    /// Leased items (delete, and SQS's purge).
    pub leased: u64,
    /// Items handed to a stored requester but not yet collected (delete only).
    pub results: u64,
    /// False when a bound stopped it with work left.
    pub done: bool,
}

/// Admin transactions consume items: a retry after "maybe committed"
/// could count twice, so it is not retried.
const ADMIN_RETRY: RetryPolicy = RetryPolicy {
    attempts_max: 1_000,
    backoff_initial_ms: 1,
    backoff_max_ms: 20,
    retry_maybe_committed: false,
};

/// The final clear of a delete read-conflicts on the whole queue, so every
/// push landing meanwhile makes it conflict: a few quick tries, then the
/// delete drains what came back and tries again (bounded by
/// [`DELETE_WAIT_MS_MAX`]) rather than sleep through a thousand retries.
const CLEAR_REST_RETRY: RetryPolicy = RetryPolicy {
    attempts_max: 8,
    backoff_initial_ms: 1,
    backoff_max_ms: 5,
    retry_maybe_committed: false,
};

/// Drops up to [`PURGE_BATCH_MAX`] visible items below `end` from the
/// back; returns how many.
///
/// A conflict means pops took some of the items read, and pops take from
/// the front: on a short queue under pops a full batch reads the very items
/// they take, and lost every race to their quicker commits (one DELETE
/// retried for 76 s). So each retry reads half as many items from the back,
/// down to one, which leaves the front to the pops.
async fn purge_batch<S: Store>(store: &S, keys: &QueueKeys, end: &[u8]) -> Result<u64, QueueError> {
    let attempts = std::sync::atomic::AtomicU32::new(0);
    let dropped = transact(store, ADMIN_RETRY, |txn| {
        let attempt = attempts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let limit = PURGE_BATCH_MAX.checked_shr(attempt).unwrap_or(0).max(1);
        purge_batch_in(txn, keys, end, limit)
    })
    .await?;
    Ok(dropped)
}

/// In `txn`: drops up to `limit` visible items below `end` from the back.
async fn purge_batch_in<T: Transaction>(
    txn: T,
    keys: &QueueKeys,
    end: &[u8],
    limit: usize,
) -> Result<u64, StoreError> {
    let begin = keys.items_range().0;
    let rows = txn
        .get_range(RangeRead::new(&begin, end, limit).reverse().snapshot())
        .await?;
    for row in &rows {
        // Conflicts with a pop (direct or fulfiller) that took it.
        txn.add_read_conflict_key(&row.key)?;
        txn.clear(&row.key)?;
        let parts = decode_item(&row.value).and_then(|item| item.parts);
        crate::queue::parts::clear_in(&txn, parts)?;
    }
    txn.atomic_add(&keys.depth(), -(rows.len() as i64))?;
    if keys.kind() == QueueKind::Fifo {
        let values = rows.iter().map(|row| decode_item(&row.value));
        crate::queue::groups::dropped_in(&txn, keys, values, now_ms()).await?;
    }
    Ok(rows.len() as u64)
}

/// Where a purge stops: a FIFO queue's items pushed before it began (the
/// index mark then); every item of a priority queue.
async fn purge_end<S: Store>(store: &S, keys: &QueueKeys) -> Result<Vec<u8>, QueueError> {
    Ok(match keys.kind() {
        QueueKind::Fifo => {
            let txn = store.begin()?;
            let mark = decode_mark(
                txn.get(&keys.next_index(), Read::Snapshot)
                    .await?
                    .as_deref(),
            );
            // A queue with fairness keys places pushes by virtual time, not
            // past the mark: its floor is raised first (see `queue::fair`).
            if crate::queue::fair::floor_for_purge_in(&txn, keys, mark).await? {
                txn.commit().await?;
            }
            keys.item(mark, &[])
        }
        QueueKind::Priority => keys.items_range().1,
    })
}

/// What a scan of the due index drops of one queue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct DueDropped {
    delayed: u64,
    leased: u64,
}

/// Which leases a scan of the due index drops with the delayed items.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Leases {
    /// None: they stay leased (`/v1` purge).
    Keep,
    /// All, their groups released to items pushed after the purge began
    /// (SQS's PurgeQueue, which deletes messages in flight too).
    Purge,
    /// All (delete: the whole queue goes, its groups with it).
    Delete,
}

/// Drops the queue's delayed items (and its leases, unless
/// [`Leases::Keep`]), in bounded transactions, scanning the due index
/// from its start; returns how many and whether the index was read to its
/// end. At most `passes` transactions.
async fn drop_due<S: Store>(
    store: &S,
    keys: &QueueKeys,
    leases: Leases,
    passes: &mut usize,
) -> Result<(DueDropped, bool), QueueError> {
    let (mut cursor, end) = due_range();
    let mut dropped = DueDropped::default();
    loop {
        if *passes >= ADMIN_PASSES_MAX {
            return Ok((dropped, false));
        }
        *passes += 1;
        let (batch, next) = transact(store, ADMIN_RETRY, |txn| {
            let (cursor, end) = (&cursor, &end);
            async move {
                let rows = txn
                    .get_range(RangeRead::new(cursor, end, DUE_SCAN_BATCH_MAX).snapshot())
                    .await?;
                let batch = drop_due_rows_in(&txn, keys, leases, &rows).await?;
                let next = (rows.len() >= DUE_SCAN_BATCH_MAX)
                    .then(|| key_after(&rows.last().expect("a full batch").key));
                Ok((batch, next))
            }
        })
        .await?;
        dropped.delayed += batch.delayed;
        dropped.leased += batch.leased;
        match next {
            Some(next) => cursor = next,
            None => return Ok((dropped, true)),
        }
    }
}

/// In `txn`: drops the queue's delayed items among due-index `rows` (and
/// its leases, unless [`Leases::Keep`]); the delayed heads among them
/// release their groups, and the leased ones too in a purge.
async fn drop_due_rows_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    leases: Leases,
    rows: &[KeyValue],
) -> Result<DueDropped, StoreError> {
    let mut dropped = DueDropped::default();
    let mut heads = Vec::new();
    for KeyValue { key, value } in rows {
        let Some(entry) = due_entry(key) else {
            continue;
        };
        if entry.kind != keys.kind() || &entry.queue != keys.name() {
            continue;
        }
        match entry.what {
            DueWhat::Delayed => {
                dropped.delayed += 1;
                let item = decode_held(value).map(|held| held.item);
                crate::queue::parts::clear_in(txn, item.as_ref().and_then(|item| item.parts))?;
                heads.push(item);
            }
            DueWhat::Lease if leases != Leases::Keep => {
                dropped.leased += 1;
                crate::lease::clear_receipt_row_in(txn, keys, &entry.id, entry.due_ms)?;
                let item = decode_held(value).map(|held| held.item);
                // The queue's count drops once for all, below; the key's row here.
                let fair_key = item.as_ref().and_then(|item| item.fair_key.as_deref());
                crate::lease::clear_lease_of_in(txn, keys, fair_key, key)?;
                crate::queue::parts::clear_in(txn, item.as_ref().and_then(|item| item.parts))?;
                if leases == Leases::Purge {
                    heads.push(item);
                }
            }
            _ => continue,
        }
        // Conflicts with the timer revealing or expiring it, and with a
        // settle of the lease (which reads it).
        txn.add_read_conflict_key(key)?;
        txn.clear(key)?;
    }
    txn.atomic_add(&keys.delayed_count(), -(dropped.delayed as i64))?;
    txn.atomic_add(&keys.leased(), -(dropped.leased as i64))?;
    crate::queue::groups::dropped_in(txn, keys, heads.into_iter(), now_ms()).await?;
    Ok(dropped)
}

impl Dropped {
    /// Every item dropped, of every kind.
    pub fn total(&self) -> u64 {
        self.items + self.delayed + self.leased + self.results
    }
}

/// Drops the visible and delayed items of the queue (those pushed before
/// the purge began, for a FIFO queue), in transactions of at most
/// [`PURGE_BATCH_MAX`] items; leased items stay leased. Runs to its end
/// even if its caller goes away (see [`to_the_end`]).
pub async fn purge<S: Store>(store: &S, keys: &QueueKeys) -> Result<Dropped, QueueError> {
    let (store, keys) = (store.clone(), keys.clone());
    to_the_end(
        keys.clone(),
        async move { purge_now(&store, &keys, Leases::Keep).await },
        |_| {},
    )
    .await
}

/// Purges as [`purge`] does, and drops the queue's leased items too (their
/// receipts then answer `unknown_receipt`); each leased group head dropped
/// releases its group to the items pushed after the purge began. SQS's
/// PurgeQueue ("deletes the messages in a queue, including in-flight
/// messages").
pub async fn purge_in_flight<S: Store>(store: &S, keys: &QueueKeys) -> Result<Dropped, QueueError> {
    let (store, keys) = (store.clone(), keys.clone());
    to_the_end(
        keys.clone(),
        async move { purge_now(&store, &keys, Leases::Purge).await },
        |_| {},
    )
    .await
}

/// Deletes the queue (see [`delete_now`]), to its end even if its caller
/// goes away (see [`to_the_end`]), then calls `after` with its outcome in
/// the delete's own task: a daemon forgets what it keeps in memory of the
/// queue there (see `service::Hotq::delete_queue`, the one caller), so
/// a caller that goes away mid-delete cannot leave it remembering a
/// deleted queue.
pub async fn delete<S: Store>(
    store: &S,
    keys: &QueueKeys,
    after: impl FnOnce(&Result<Dropped, QueueError>) + Send + 'static,
) -> Result<Dropped, QueueError> {
    let (store, keys) = (store.clone(), keys.clone());
    to_the_end(
        keys.clone(),
        async move { delete_now(&store, &keys).await },
        after,
    )
    .await
}

/// Runs a purge or delete in a task of its own, counts what it dropped
/// in [`crate::metrics::DROPPED_ITEMS`] when it ends, then calls `after`.
///
/// A purge or delete commits batch after batch, and each batch drops items
/// for good. Run in its caller's task, it stopped wherever the caller was
/// dropped (an HTTP client hanging up drops the handler): the batches
/// committed by then had dropped items that no answer reported, and the
/// queue was left half deleted. A client with a short timeout on DELETE
/// saw exactly issue #24's "pushes answered 201 and never seen again".
async fn to_the_end(
    keys: QueueKeys,
    work: impl Future<Output = Result<Dropped, QueueError>> + Send + 'static,
    after: impl FnOnce(&Result<Dropped, QueueError>) + Send + 'static,
) -> Result<Dropped, QueueError> {
    let task = tokio::spawn(async move {
        let outcome = work.await;
        if let Ok(dropped) = &outcome {
            crate::metrics::queue_count(
                crate::metrics::DROPPED_ITEMS,
                keys.kind(),
                keys.name(),
                dropped.total(),
            );
        }
        after(&outcome);
        outcome
    });
    match task.await {
        Ok(outcome) => outcome,
        Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
        Err(_) => Err(QueueError::Store(StoreError::Unavailable(
            "the runtime shut down during a purge or delete".into(),
        ))),
    }
}

async fn purge_now<S: Store>(
    store: &S,
    keys: &QueueKeys,
    leases: Leases,
) -> Result<Dropped, QueueError> {
    let end = purge_end(store, keys).await?;
    let mut dropped = Dropped::default();
    let mut passes = 0;
    // Items waiting behind group heads first, so a dropped head releases
    // only items pushed after the purge began.
    let below = keys.item_index(&end);
    let (count, waiting_done) = drop_waiting(store, keys, below, &mut passes).await?;
    dropped.items += count;
    let mut items_done = false;
    while passes < ADMIN_PASSES_MAX {
        passes += 1;
        let count = purge_batch(store, keys, &end).await?;
        dropped.items += count;
        if count == 0 {
            items_done = true;
            break;
        }
    }
    let mut delayed_done = true;
    let leased = leases != Leases::Keep && counter(store, &keys.leased()).await? > 0;
    if leased || counter(store, &keys.delayed_count()).await? > 0 {
        // Leases last: a leased head releases its group to what is left
        // waiting then, items pushed after the purge began.
        let (due, done) = drop_due(store, keys, leases, &mut passes).await?;
        dropped.delayed = due.delayed;
        dropped.leased = due.leased;
        delayed_done = done;
    }
    dropped.done = items_done && delayed_done && waiting_done;
    Ok(dropped)
}

/// Drops the FIFO queue's items waiting behind group heads, pushed below
/// `below_index` (`None`: all), in bounded transactions; returns how many
/// and whether it finished.
async fn drop_waiting<S: Store>(
    store: &S,
    keys: &QueueKeys,
    below_index: Option<u64>,
    passes: &mut usize,
) -> Result<(u64, bool), QueueError> {
    if keys.kind() != QueueKind::Fifo {
        return Ok((0, true));
    }
    let mut cursor = keys.grouped_all_range().0;
    let mut dropped = 0;
    while *passes < ADMIN_PASSES_MAX {
        *passes += 1;
        let (count, next) =
            crate::queue::groups::drop_waiting(store, keys, below_index, &cursor).await?;
        dropped += count;
        match next {
            Some(next) => cursor = next,
            None => return Ok((dropped, true)),
        }
    }
    Ok((dropped, false))
}

/// A counter of the queue, read with snapshot.
async fn counter<S: Store>(store: &S, key: &[u8]) -> Result<i64, QueueError> {
    let txn = store.begin()?;
    Ok(decode_counter(
        txn.get(key, Read::Snapshot).await?.as_deref(),
    ))
}

/// Deletes the queue: its items, delayed items, leases, stored requests
/// and results, counters, settings and dedup ids. Workers holding a lease
/// of it get `unknown_receipt` for their receipt. Gives up after
/// [`DELETE_WAIT_MS_MAX`] (or [`ADMIN_PASSES_MAX`] transactions) while
/// items keep arriving: `done` is false and the counts say what it
/// dropped until then.
async fn delete_now<S: Store>(store: &S, keys: &QueueKeys) -> Result<Dropped, QueueError> {
    let began = std::time::Instant::now();
    let in_time = || began.elapsed().as_millis() < u128::from(DELETE_WAIT_MS_MAX);
    let mut dropped = Dropped::default();
    let mut passes = 0;
    while passes < ADMIN_PASSES_MAX && in_time() {
        // Drain what can be large in bounded batches first ...
        drain_for_delete(store, keys, &mut dropped, &mut passes, &in_time).await?;
        // ... then clear the rest at once, if nothing came back meanwhile.
        passes += 1;
        match clear_rest(store, keys).await {
            Ok(Rest::Cleared(results)) => {
                dropped.results += results;
                dropped.done = true;
                return Ok(dropped);
            }
            Ok(Rest::MoreResults(results)) => dropped.results += results,
            Ok(Rest::Back) => {}
            // Pushes kept landing inside the queue's range: drain again.
            Err(QueueError::Store(StoreError::Conflict)) => {}
            Err(error) => return Err(error),
        }
    }
    Ok(dropped)
}

/// One pass of a delete's draining: items waiting behind group heads,
/// visible items, leases and delayed items, each in bounded transactions;
/// the batch loops stop when `in_time` says the delete's time is up (pushes
/// landing as fast as it drops would keep them going).
async fn drain_for_delete<S: Store>(
    store: &S,
    keys: &QueueKeys,
    dropped: &mut Dropped,
    passes: &mut usize,
    in_time: &impl Fn() -> bool,
) -> Result<(), QueueError> {
    let everything = keys.items_range().1;
    let (count, _) = drop_waiting(store, keys, None, passes).await?;
    dropped.items += count;
    while *passes < ADMIN_PASSES_MAX && in_time() {
        *passes += 1;
        let count = purge_batch(store, keys, &everything).await?;
        dropped.items += count;
        if count == 0 {
            break;
        }
    }
    // Leases and delayed items live in the store-wide due index: one scan
    // of it drops both, when the queue's counters say it holds any.
    if counter(store, &keys.leased()).await? > 0 || counter(store, &keys.delayed_count()).await? > 0
    {
        let (due, _) = drop_due(store, keys, Leases::Delete, passes).await?;
        dropped.leased += due.leased;
        dropped.delayed += due.delayed;
    }
    // Pushes to a group whose head is out (leased, dropped with its lease,
    // or mid hand-off) waited behind it meanwhile: dropped again last, so
    // the final clear, which looks for them, finds none if pushes pause.
    let (count, _) = drop_waiting(store, keys, None, passes).await?;
    dropped.items += count;
    Ok(())
}

/// In one transaction that read-conflicts on the queue's whole subspace:
/// if it holds no item (visible or waiting behind a group head), lease or
/// delayed item, clears it (and the queue's registry entry) with the
/// uncollected results, a batch of them at a time (see [`Rest`]).
async fn clear_rest<S: Store>(store: &S, keys: &QueueKeys) -> Result<Rest, QueueError> {
    let cleared = transact(store, CLEAR_REST_RETRY, |txn| async move {
        let (begin, end) = keys.queue_range();
        txn.add_read_conflict_range(&begin, &end)?;
        let (items_begin, items_end) = keys.items_range();
        let items = txn
            .get_range(RangeRead::new(&items_begin, &items_end, 1).snapshot())
            .await?;
        // Items waiting behind group heads are not in `items`: a head out
        // under a lease or mid hand-off keeps its group's pushes waiting
        // there, and the clear below would drop them uncounted.
        let (grouped_begin, grouped_end) = keys.grouped_all_range();
        let waiting = txn
            .get_range(RangeRead::new(&grouped_begin, &grouped_end, 1).snapshot())
            .await?;
        // Leases and delayed items are counted under the queue (and so
        // under its read conflict); their rows are in the due index.
        let leased = decode_counter(txn.get(&keys.leased(), Read::Snapshot).await?.as_deref());
        let delayed = decode_counter(
            txn.get(&keys.delayed_count(), Read::Snapshot)
                .await?
                .as_deref(),
        );
        if !items.is_empty() || !waiting.is_empty() || leased > 0 || delayed > 0 {
            return Ok(Rest::Back);
        }
        let (results_begin, results_end) = keys.results_range();
        let results = txn
            .get_range(RangeRead::new(&results_begin, &results_end, PURGE_BATCH_MAX).snapshot())
            .await?;
        // An uncollected result owns its item's parts unless leased (its
        // lease, dropped above, owned them).
        for row in &results {
            let parts = crate::envelope::decode_result(&row.value)
                .filter(|result| result.lease.is_none())
                .and_then(|result| result.item.parts);
            crate::queue::parts::clear_in(&txn, parts)?;
        }
        if results.len() >= PURGE_BATCH_MAX {
            // More results than one batch: these go (with their parts)
            // and the next pass reads on, so no result's parts outlive it.
            for row in &results {
                txn.clear(&row.key)?;
            }
            return Ok(Rest::MoreResults(results.len() as u64));
        }
        txn.clear_range(&begin, &end)?;
        txn.clear(&keys.registry_key())?;
        Ok(Rest::Cleared(results.len() as u64))
    })
    .await?;
    Ok(cleared)
}

/// What [`clear_rest`] did.
enum Rest {
    /// Everything is gone; so many uncollected results went with it.
    Cleared(u64),
    /// Something is back: the caller drains it and tries again.
    Back,
    /// A full batch of uncollected results went; more are left.
    MoreResults(u64),
}
