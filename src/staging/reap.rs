//! The reaper: a result nobody collected by its deadline goes back to the
//! item's original key; a request past its deadline is cleared. Every
//! consumed key is read-conflict-checked, so a late collect or withdrawal
//! and the reaper can never both take the same result.

use crate::envelope::{decode_request, decode_result, encode_item_value};
use crate::keys::{QueueKeys, QueueKind, registry_entry, registry_range};
use crate::lease::Receipt;
use crate::lease::settle::release_in;
use crate::queue::QueueError;
use crate::store::{KeyValue, RangeRead, Store, StoreError, Transaction};

/// What one sweep of one queue did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Reaped {
    /// Results returned to the queue.
    pub results: usize,
    /// Requests cleared.
    pub requests: usize,
}

/// Most keys one reap transaction reads per subspace.
const REAP_BATCH_MAX: usize = 500;
/// Most transactions one sweep of one queue runs.
const REAP_PASSES_MAX: usize = 100;
/// Most registry entries one sweep visits.
const REGISTRY_SCAN_MAX: usize = 100_000;

/// Sweeps one queue as of `now_ms`: returns expired results and clears
/// expired requests, page by page (expired entries behind unexpired ones
/// are reached too), in bounded transactions. A queue left with neither
/// requests nor results is dropped from the registry.
pub async fn reap_queue<S: Store>(
    store: &S,
    keys: &QueueKeys,
    now_ms: u64,
) -> Result<Reaped, QueueError> {
    let mut total = Reaped::default();
    let mut cursors = Cursors {
        results: Some(keys.results_range().0),
        requests: Some(keys.requests_range().0),
    };
    for _ in 0..REAP_PASSES_MAX {
        if cursors.results.is_none() && cursors.requests.is_none() {
            break;
        }
        match reap_pass(store, keys, now_ms, &cursors).await {
            Ok((reaped, next)) => {
                total.results += reaped.results;
                total.requests += reaped.requests;
                cursors = next;
            }
            // A collect, withdrawal or fulfiller won a key: read the page again.
            Err(QueueError::Store(StoreError::Conflict)) => crate::metrics::conflict("reap"),
            Err(error) => return Err(error),
        }
    }
    forget_if_idle(store, keys).await?;
    Ok(total)
}

/// Where the next page of each subspace starts; `None` when it is done.
struct Cursors {
    results: Option<Vec<u8>>,
    requests: Option<Vec<u8>>,
}

/// Reads one page of `[from, end)`; returns the rows and the next page's start.
async fn page<T: Transaction>(
    txn: &T,
    from: &Option<Vec<u8>>,
    end: &[u8],
) -> Result<(Vec<KeyValue>, Option<Vec<u8>>), QueueError> {
    let Some(from) = from else {
        return Ok((Vec::new(), None));
    };
    let rows = txn
        .get_range(RangeRead::new(from, end, REAP_BATCH_MAX).snapshot())
        .await?;
    let next = match rows.last() {
        Some(last) if rows.len() >= REAP_BATCH_MAX => Some(crate::store::key_after(&last.key)),
        _ => None,
    };
    Ok((rows, next))
}

async fn reap_pass<S: Store>(
    store: &S,
    keys: &QueueKeys,
    now_ms: u64,
    cursors: &Cursors,
) -> Result<(Reaped, Cursors), QueueError> {
    let txn = store.begin()?;
    let (results, next_results) = page(&txn, &cursors.results, &keys.results_range().1).await?;
    let (requests, next_requests) = page(&txn, &cursors.requests, &keys.requests_range().1).await?;
    let next = Cursors {
        results: next_results,
        requests: next_requests,
    };
    let mut reaped = Reaped::default();
    let mut leased_results_cleared = 0usize;
    for KeyValue { key, value } in results {
        let result =
            decode_result(&value).ok_or_else(|| QueueError::Corrupt { key: key.clone() })?;
        if result.deadline_ms >= now_ms {
            continue;
        }
        txn.add_read_conflict_key(&key)?;
        txn.clear(&key)?;
        match result.lease {
            None => {
                txn.set(&result.item_key, &encode_item_value(&result.item))?;
                txn.atomic_add(&keys.depth(), 1)?;
                reaped.results += 1;
            }
            // A leased item is held by its lease as well: released in this
            // commit with its delivery uncounted (nobody collected it), or
            // already returned by the lease's expiry.
            Some(lease) => {
                if release_in(&txn, keys, &Receipt(lease.receipt)).await?? {
                    reaped.results += 1;
                } else {
                    leased_results_cleared += 1;
                }
            }
        }
    }
    for KeyValue { key, value } in requests {
        let request =
            decode_request(&value).ok_or_else(|| QueueError::Corrupt { key: key.clone() })?;
        if request.deadline_ms >= now_ms {
            continue;
        }
        txn.add_read_conflict_key(&key)?;
        txn.clear(&key)?;
        reaped.requests += 1;
    }
    if reaped.requests > 0 {
        txn.atomic_add(&keys.waiting(), -(reaped.requests as i64))?;
    }
    if reaped != Reaped::default() || leased_results_cleared > 0 {
        txn.commit().await?;
    }
    Ok((reaped, next))
}

/// Drops the queue from the registry when it holds no request, result,
/// lease or delayed item. The reads are non-snapshot, so a registration,
/// leased pop or delayed push that commits meanwhile (each writes the
/// registry entry too) conflicts, and the entry stays.
async fn forget_if_idle<S: Store>(store: &S, keys: &QueueKeys) -> Result<(), QueueError> {
    let txn = store.begin()?;
    let (begin, end) = keys.requests_range();
    let requests = txn.get_range(RangeRead::new(&begin, &end, 1)).await?;
    let (begin, end) = keys.results_range();
    let results = txn.get_range(RangeRead::new(&begin, &end, 1)).await?;
    let (begin, end) = keys.leases_range();
    let leases = txn.get_range(RangeRead::new(&begin, &end, 1)).await?;
    let (begin, end) = keys.delayed_range();
    let delayed = txn.get_range(RangeRead::new(&begin, &end, 1)).await?;
    if !requests.is_empty() || !results.is_empty() || !leases.is_empty() || !delayed.is_empty() {
        return Ok(());
    }
    txn.add_read_conflict_key(&keys.registry_key())?;
    txn.clear(&keys.registry_key())?;
    match txn.commit().await {
        Ok(()) | Err(StoreError::Conflict) => Ok(()),
        Err(error) => Err(error.into()),
    }
}

/// The queues that ever staged a pop, from the registry (at most 100,000).
pub async fn registered_queues<S: Store>(store: &S) -> Result<Vec<QueueKeys>, QueueError> {
    let (mut begin, end) = registry_range();
    let mut queues = Vec::new();
    while queues.len() < REGISTRY_SCAN_MAX {
        let txn = store.begin()?;
        let rows = txn
            .get_range(RangeRead::new(&begin, &end, 1_000).snapshot())
            .await?;
        let Some(last) = rows.last() else { break };
        begin = crate::store::key_after(&last.key);
        let full = rows.len() >= 1_000;
        queues.extend(
            rows.iter()
                .filter_map(|row| registry_entry(&row.key))
                .map(|(kind, name): (QueueKind, _)| QueueKeys::of_kind(kind, &name)),
        );
        if !full {
            break;
        }
    }
    Ok(queues)
}
