//! The reaper: a result nobody collected by its deadline goes back to the
//! item's original key; a request past its deadline is cleared. Every
//! consumed key is read-conflict-checked, so a late collect or withdrawal
//! and the reaper can never both take the same result.
//!
//! The reaper follows appointments in the store-wide due index (see
//! [`crate::keys::QueueKeys::reap_at`]), not the list of queues: a stored
//! request makes one when it registers ([`note_request`]), and a look at
//! a queue that leaves requests or results makes one for the earliest of
//! their deadlines ([`reap_due`]). The timer hands due appointments here.

use crate::envelope::{decode_counted_request, decode_result};
use crate::keys::QueueKeys;
#[cfg(feature = "testing")]
use crate::keys::{QueueKind, registry_entry, registry_range};
use crate::lease::Receipt;
use crate::lease::settle::release_in;
use crate::queue::QueueError;
use crate::store::{
    KeyValue, RangeRead, RetryPolicy, Store, StoreError, Transaction, cut_at_bytes, decode_counter,
    transact,
};

/// How long after a request's deadline the reaper looks at its queue: the
/// requester withdraws (or collects) itself first in the common case.
pub const REAP_SLACK_MS: u64 = 1_000;
/// When a look could not finish, the next one comes this much later.
const REAP_RETRY_MS: u64 = 1_000;

/// What one sweep of one queue did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Reaped {
    /// Results returned to the queue.
    pub results: usize,
    /// Requests cleared.
    pub requests: usize,
    /// The earliest deadline among requests and results left in place
    /// (`Some(now)` when the sweep could not read them all).
    pub next_deadline_ms: Option<u64>,
}

fn earliest(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// In the transaction that stores a request with `deadline_ms`: makes the
/// reaper look at the queue after that deadline (a dead requester's
/// request and result are then cleared or returned).
pub fn note_request<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    deadline_ms: u64,
) -> Result<(), StoreError> {
    txn.set(
        &keys.reap_at(deadline_ms.saturating_add(REAP_SLACK_MS)),
        b"",
    )
}

/// Reaps one queue whose appointments `appointments` (due-index keys read
/// by the timer) have come, then replaces them with one appointment at
/// the earliest deadline left, if any.
pub async fn reap_due<S: Store>(
    store: &S,
    keys: &QueueKeys,
    appointments: &[Vec<u8>],
    now_ms: u64,
) -> Result<Reaped, QueueError> {
    let reaped = reap_queue(store, keys, now_ms).await?;
    let next = reaped
        .next_deadline_ms
        .map(|deadline| deadline.max(now_ms).saturating_add(1));
    transact(store, RetryPolicy::default(), |txn| async move {
        // Cleared by key, not by range: an appointment made meanwhile
        // (a new registration) stays.
        for key in appointments {
            txn.clear(key)?;
        }
        if let Some(at) = next {
            txn.set(&keys.reap_at(at), b"")?;
        }
        Ok(())
    })
    .await?;
    Ok(reaped)
}

/// Most keys one reap transaction reads per subspace.
const REAP_BATCH_MAX: usize = 500;
/// Most key and value bytes one reap pass reads from a subspace: results
/// hold items (up to 100 kB each), and a pass writes each one back, so
/// 500 of them could pass the store's 10 MB transaction limit. At least
/// one row is always read.
const REAP_BYTES_MAX: usize = 4 * 1024 * 1024;
/// Most transactions one sweep of one queue runs.
const REAP_PASSES_MAX: usize = 100;
/// Most registry entries one sweep visits.
#[cfg(feature = "testing")]
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
    let mut complete = false;
    let mut cursors = Cursors {
        results: Some(keys.results_range().0),
        requests: Some(keys.requests_range().0),
    };
    for _ in 0..REAP_PASSES_MAX {
        if cursors.results.is_none() && cursors.requests.is_none() {
            complete = true;
            break;
        }
        match reap_pass(store, keys, now_ms, &cursors).await {
            Ok((reaped, next)) => {
                total.results += reaped.results;
                total.requests += reaped.requests;
                total.next_deadline_ms = earliest(total.next_deadline_ms, reaped.next_deadline_ms);
                cursors = next;
            }
            // A collect, withdrawal or fulfiller won a key: read the page again.
            Err(QueueError::Store(StoreError::Conflict)) => crate::metrics::conflict("reap"),
            Err(error) => return Err(error),
        }
    }
    if !complete {
        total.next_deadline_ms = Some(now_ms.saturating_add(REAP_RETRY_MS));
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
    let mut rows = txn
        .get_range(RangeRead::new(from, end, REAP_BATCH_MAX).snapshot())
        .await?;
    let mut full = rows.len() >= REAP_BATCH_MAX;
    if cut_at_bytes(&mut rows, REAP_BYTES_MAX) {
        full = true;
    }
    let next = match rows.last() {
        Some(last) if full => Some(crate::store::key_after(&last.key)),
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
            reaped.next_deadline_ms = earliest(reaped.next_deadline_ms, Some(result.deadline_ms));
            continue;
        }
        txn.add_read_conflict_key(&key)?;
        txn.clear(&key)?;
        match result.lease {
            None => {
                crate::queue::groups::give_back_in(&txn, keys, &result.item_key, &result.item)
                    .await?;
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
    // Pops the cleared requests stood for (a counted request, several).
    let mut pops = 0i64;
    for KeyValue { key, value } in requests {
        let (request, count) = decode_counted_request(&value)
            .ok_or_else(|| QueueError::Corrupt { key: key.clone() })?;
        if request.deadline_ms >= now_ms {
            reaped.next_deadline_ms = earliest(reaped.next_deadline_ms, Some(request.deadline_ms));
            continue;
        }
        txn.add_read_conflict_key(&key)?;
        txn.clear(&key)?;
        reaped.requests += 1;
        pops += i64::from(count);
    }
    if pops > 0 {
        txn.atomic_add(&keys.waiting(), -pops)?;
    }
    if reaped.results + reaped.requests + leased_results_cleared > 0 {
        txn.commit().await?;
    }
    Ok((reaped, next))
}

/// Drops the queue from the registry when it holds no request, result,
/// or lease or delayed item of the layout before the due index. The reads
/// are non-snapshot, so a registration, leased pop or delayed push that
/// commits meanwhile (each writes the registry entry too) conflicts; the
/// retry reads again and keeps the entry when it finds the new work. (A
/// conflict taken as done left the entry until the queue's next use: a
/// deleted queue stayed listed.)
async fn forget_if_idle<S: Store>(store: &S, keys: &QueueKeys) -> Result<(), QueueError> {
    transact(store, RetryPolicy::default(), |txn| async move {
        let (begin, end) = keys.requests_range();
        let requests = txn.get_range(RangeRead::new(&begin, &end, 1)).await?;
        let (begin, end) = keys.results_range();
        let results = txn.get_range(RangeRead::new(&begin, &end, 1)).await?;
        let mut legacy = false;
        for (_, (begin, end)) in keys.legacy_ranges() {
            legacy |= !txn
                .get_range(RangeRead::new(&begin, &end, 1))
                .await?
                .is_empty();
        }
        if !requests.is_empty() || !results.is_empty() || legacy {
            return Ok(());
        }
        txn.add_read_conflict_key(&keys.registry_key())?;
        txn.clear(&keys.registry_key())?;
        clear_residue_in(&txn, keys).await
    })
    .await?;
    Ok(())
}

/// Most keys a queue holds when all it holds is what stored requests leave
/// behind: its `waiting` count, request index mark and wake counter.
const RESIDUE_KEYS_MAX: usize = 3;

/// In the transaction of [`forget_if_idle`]: clears the queue's `waiting`
/// count (at 0), request index mark and wake counter when they are all its
/// subspace holds. A pop that waits as a stored request on a queue nobody
/// pushed to, or that a delete just cleared, writes them under the queue,
/// and its request going leaves them there: the queue stayed listed (a key
/// under it is what makes it exist) with every count 0, for good. Any other
/// key (an item, a count a push or lease writes, settings) means the queue
/// exists, and they stay. The range read is not snapshot, so anything
/// written under the queue meanwhile conflicts, and the retry sees it; the
/// mark may start again at 0, since no request stands (read above).
async fn clear_residue_in<T: Transaction>(txn: &T, keys: &QueueKeys) -> Result<(), StoreError> {
    let (begin, end) = keys.queue_range();
    let rows = txn
        .get_range(RangeRead::new(&begin, &end, RESIDUE_KEYS_MAX + 1))
        .await?;
    let residue = [keys.waiting(), keys.next_request(), keys.wake()];
    let only_residue = rows.len() <= RESIDUE_KEYS_MAX
        && rows.iter().all(|row| residue.contains(&row.key))
        && rows
            .iter()
            .filter(|row| row.key == residue[0])
            .all(|row| decode_counter(Some(&row.value)) == 0);
    if only_residue {
        for row in &rows {
            txn.clear(&row.key)?;
        }
    }
    Ok(())
}

/// The queues that ever staged a pop, from the registry (at most 100,000):
/// for an explicit full sweep ([`crate::coordinator::Coordinator::reap_all`]);
/// the daemon's reaper follows due appointments instead.
#[cfg(feature = "testing")]
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
