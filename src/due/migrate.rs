//! Moves leases and delayed items written by binaries before the due index
//! (kept under their queue, listed in the staging registry) into the due
//! index, and gives every registered queue a reap appointment now, so its
//! stored requests and results are looked at once. Runs once per store: a
//! marker records that it finished. Until then a settle finds a lease in
//! either place (see `settle::open`), and the reads here are not snapshot,
//! so a settle racing the move has exactly one winner.

use crate::keys::{DueWhat, QueueKeys, registry_entry, registry_range};
use crate::queue::QueueError;
use crate::store::Read;
use crate::store::{RangeRead, RetryPolicy, Store, Transaction, key_after, transact};

/// Registry entries read per transaction.
const REGISTRY_PAGE_MAX: usize = 1_000;
/// Legacy rows moved per transaction (each is at most ~100 kB).
const MOVE_BATCH_MAX: usize = 64;
/// Most transactions moving one queue's legacy rows of one kind.
const MOVE_PASSES_MAX: usize = 100_000;

fn marker() -> Vec<u8> {
    foundationdb_tuple::pack(&("hotq-due-meta", "migrated", 1i64))
}

/// Moves what the previous layout left; returns the rows moved (0 once done).
pub async fn migrate<S: Store>(store: &S, now_ms: u64) -> Result<usize, QueueError> {
    let txn = store.begin()?;
    if txn.get(&marker(), Read::Snapshot).await?.is_some() {
        return Ok(0);
    }
    let (mut begin, end) = registry_range();
    let mut moved = 0usize;
    loop {
        let rows = store
            .begin()?
            .get_range(RangeRead::new(&begin, &end, REGISTRY_PAGE_MAX).snapshot())
            .await?;
        let Some(last) = rows.last() else { break };
        begin = key_after(&last.key);
        for (kind, name) in rows.iter().filter_map(|row| registry_entry(&row.key)) {
            let keys = QueueKeys::of_kind(kind, &name);
            for (what, range) in keys.legacy_ranges() {
                moved += move_rows(store, &keys, what, range).await?;
            }
            transact(store, RetryPolicy::default(), |txn| {
                let keys = &keys;
                async move { txn.set(&keys.reap_at(now_ms), b"") }
            })
            .await?;
        }
        if rows.len() < REGISTRY_PAGE_MAX {
            break;
        }
    }
    transact(store, RetryPolicy::default(), |txn| async move {
        txn.set(&marker(), b"")
    })
    .await?;
    if moved > 0 {
        tracing::info!(moved, "moved leases and delayed items into the due index");
    }
    Ok(moved)
}

async fn move_rows<S: Store>(
    store: &S,
    keys: &QueueKeys,
    what: DueWhat,
    (begin, end): (Vec<u8>, Vec<u8>),
) -> Result<usize, QueueError> {
    let mut moved = 0;
    let mut cursor = begin;
    for _ in 0..MOVE_PASSES_MAX {
        let (count, next) = transact(store, RetryPolicy::default(), |txn| {
            let (cursor, end) = (&cursor, &end);
            async move {
                // Not snapshot: a settle that takes a row meanwhile conflicts.
                let rows = txn
                    .get_range(RangeRead::new(cursor, end, MOVE_BATCH_MAX))
                    .await?;
                let mut count = 0;
                for row in &rows {
                    // A row this layout cannot name stays where it is.
                    let Some((due_ms, id)) = keys.legacy_parts(what, &row.key) else {
                        tracing::warn!(queue = %keys.name(), key = ?row.key, "leaving a malformed legacy row");
                        continue;
                    };
                    txn.clear(&row.key)?;
                    txn.set(&keys.due(due_ms, what, &id), &row.value)?;
                    count += 1;
                }
                let next = (rows.len() >= MOVE_BATCH_MAX)
                    .then(|| rows.last().map(|row| key_after(&row.key)))
                    .flatten();
                Ok((count, next))
            }
        })
        .await?;
        moved += count;
        let Some(next) = next else { break };
        cursor = next;
    }
    Ok(moved)
}
