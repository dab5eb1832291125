//! The reaper: a result nobody collected by its deadline goes back to the
//! item's original key; a request past its deadline is cleared. Every
//! consumed key is read-conflict-checked, so a late collect or withdrawal
//! and the reaper can never both take the same result.

use crate::envelope::{decode_request, decode_result, encode_item};
use crate::keys::{QueueKeys, QueueKind, registry_entry, registry_range};
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
/// expired requests, in bounded transactions, until none is left or the
/// pass bound is reached.
pub async fn reap_queue<S: Store>(
    store: &S,
    keys: &QueueKeys,
    now_ms: u64,
) -> Result<Reaped, QueueError> {
    let mut total = Reaped::default();
    for _ in 0..REAP_PASSES_MAX {
        match reap_pass(store, keys, now_ms).await {
            Ok((reaped, more)) => {
                total.results += reaped.results;
                total.requests += reaped.requests;
                if !more {
                    break;
                }
            }
            // A collect, withdrawal or fulfiller won a key: look again.
            Err(QueueError::Store(StoreError::Conflict)) => crate::metrics::conflict("reap"),
            Err(error) => return Err(error),
        }
    }
    Ok(total)
}

async fn reap_pass<S: Store>(
    store: &S,
    keys: &QueueKeys,
    now_ms: u64,
) -> Result<(Reaped, bool), QueueError> {
    let txn = store.begin()?;
    let (begin, end) = keys.results_range();
    let results = txn
        .get_range(RangeRead::new(&begin, &end, REAP_BATCH_MAX).snapshot())
        .await?;
    let (begin, end) = keys.requests_range();
    let requests = txn
        .get_range(RangeRead::new(&begin, &end, REAP_BATCH_MAX).snapshot())
        .await?;
    let more = results.len() >= REAP_BATCH_MAX || requests.len() >= REAP_BATCH_MAX;
    let mut reaped = Reaped::default();
    for KeyValue { key, value } in results {
        let result =
            decode_result(&value).ok_or_else(|| QueueError::Corrupt { key: key.clone() })?;
        if result.deadline_ms >= now_ms {
            continue;
        }
        txn.add_read_conflict_key(&key)?;
        txn.clear(&key)?;
        txn.set(
            &result.item_key,
            &encode_item(result.enqueued_at_ms, &result.payload),
        )?;
        reaped.results += 1;
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
    if reaped.results > 0 {
        txn.atomic_add(&keys.depth(), reaped.results as i64)?;
    }
    if reaped.requests > 0 {
        txn.atomic_add(&keys.waiting(), -(reaped.requests as i64))?;
    }
    if reaped == Reaped::default() {
        return Ok((reaped, false));
    }
    txn.commit().await?;
    Ok((reaped, more))
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
