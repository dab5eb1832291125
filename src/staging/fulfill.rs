//! One fulfillment transaction: pair waiting requests with items, many at
//! once, and write each item under its requester's result key (or, for a
//! requester in this process, hand it over in memory after the commit;
//! see [`super::local`]).
//!
//! Requests and items are read with snapshot (so reading many costs no
//! conflicts), and a read-conflict key is added on each one consumed: the
//! commit fails only if another transaction consumed one of the same keys.
//! Requests are served in request order, front requests from the front
//! and back requests (priority `pop_max`) from the back.
//!
//! Two lines of requests are served together: the request subspace, and
//! the memory requests of pops waiting in this process (see
//! [`super::local`]). Each line keeps its order; when items are scarce the
//! two take turns, so neither starves the other.

use std::collections::{HashSet, VecDeque};

use crate::envelope::{End, LeaseTag, ResultValue, decode_request, encode_result, now_ms};
use crate::keys::QueueKeys;
use crate::lease::lease_in;
use crate::queue::{Item, QueueError};
use crate::staging::direct::read_end;
use crate::staging::local::{LocalId, MemoryRequest};
use crate::store::{RangeRead, Store, Transaction, Watch};

/// What one fulfillment transaction did.
#[derive(Debug)]
pub struct Fulfilled {
    /// Requests served with an item.
    pub served: usize,
    /// Requests cleared because their deadline had passed.
    pub expired: usize,
    /// Live requests left waiting for want of items.
    pub unserved: usize,
    /// True when the batch was full: more requests may be waiting.
    /// (Informational: the loop decides on [`Self::watch`], which is unset
    /// whenever requests were left while items remained.)
    pub batch_full: bool,
    /// Earliest deadline among the unserved requests, in epoch ms.
    pub next_deadline_ms: Option<u64>,
    /// Armed when nothing more can be done now: fires on a new request
    /// (none waiting) or a push (requests waiting, no items).
    pub watch: Option<Watch>,
    /// Each served pair: (request index order position, item enqueue time),
    /// for wait-time measurement.
    pub served_enqueue_ms: Vec<u64>,
    /// Items for requesters in this process, to hand over once the commit
    /// is durable (no result was written for them).
    pub handed: Vec<(LocalId, Item)>,
}

/// How a fulfiller hands items to requesters in its own process.
#[derive(Clone, Copy)]
pub struct LocalHandoff<'a> {
    /// True for a registered requester waiting in this process.
    pub is_local: &'a (dyn Fn(&[u8]) -> bool + Sync),
    /// The memory requests of this process, in arrival order (at most the
    /// batch bound is served).
    pub memory: &'a [MemoryRequest],
    /// A key only this fulfiller writes: every transaction that hands
    /// items over sets it to its `attempt`, so a commit whose outcome is
    /// unknown can be told applied (hand the items over) or not (they are
    /// still in the queue).
    pub marker_key: &'a [u8],
    /// This transaction's number, unique for `marker_key`.
    pub attempt: u64,
}

fn never_local(_: &[u8]) -> bool {
    false
}

impl LocalHandoff<'static> {
    /// No requester is local: every served request gets a result.
    pub const NONE: LocalHandoff<'static> = LocalHandoff {
        is_local: &never_local,
        memory: &[],
        marker_key: b"",
        attempt: 0,
    };
}

/// Where a live request came from.
enum Source {
    /// The request subspace: its key, and its requester id.
    Stored { key: Vec<u8>, requester: Vec<u8> },
    /// This process's memory line.
    Memory(u64),
}

/// Runs one fulfillment transaction on queue `keys`. A conflict is returned
/// as `StoreError::Conflict`: another fulfiller or a withdrawal won; the
/// caller retries.
pub async fn fulfill_once<S: Store>(
    store: &S,
    keys: &QueueKeys,
    batch_max: usize,
    bytes_max: usize,
    result_grace_ms: u64,
    local: LocalHandoff<'_>,
) -> Result<Fulfilled, QueueError> {
    let txn = store.begin()?;
    let (begin, end) = keys.requests_range();
    let rows = txn
        .get_range(RangeRead::new(&begin, &end, batch_max.max(1)).snapshot())
        .await?;
    let now = now_ms();
    // Memory requests past their deadline are skipped: their pops are
    // leaving (or left) on their own.
    let memory: Vec<&MemoryRequest> = local
        .memory
        .iter()
        .filter(|m| m.request.deadline_ms >= now)
        .take(batch_max.max(1))
        .collect();
    let mut batch_full = rows.len() >= batch_max.max(1) || local.memory.len() >= batch_max.max(1);
    if rows.is_empty() && memory.is_empty() {
        let watch = txn.watch(&keys.wake())?;
        txn.commit().await?;
        return Ok(Fulfilled {
            served: 0,
            expired: 0,
            unserved: 0,
            batch_full: false,
            next_deadline_ms: None,
            watch: Some(watch),
            served_enqueue_ms: Vec::new(),
            handed: Vec::new(),
        });
    }

    let mut expired = 0usize;
    let mut stored = Vec::with_capacity(rows.len());
    for row in rows {
        let parsed = keys.request_parts(&row.key).zip(decode_request(&row.value));
        let Some(((_, requester), request)) = parsed else {
            // Not something hotq wrote: clearing it keeps one bad row from
            // stalling the queue's every fulfillment.
            // It never counted as waiting, so `waiting` is left alone.
            tracing::warn!(queue = %keys.name(), key = ?row.key, "clearing a malformed request");
            txn.add_read_conflict_key(&row.key)?;
            txn.clear(&row.key)?;
            continue;
        };
        if request.deadline_ms < now {
            // Cleared, not served: its requester has stopped waiting.
            txn.add_read_conflict_key(&row.key)?;
            txn.clear(&row.key)?;
            expired += 1;
        } else {
            stored.push((
                Source::Stored {
                    key: row.key,
                    requester,
                },
                request,
            ));
        }
    }
    let offered = stored.len() + memory.len();
    let live = take_turns(
        stored,
        memory.iter().map(|m| (Source::Memory(m.seq), m.request)),
        batch_max.max(1),
    );
    // Requests left for the next round: it must come at once.
    batch_full |= live.len() < offered;

    let wanted_front = live.iter().filter(|(_, r)| r.end == End::Front).count();
    let wanted_back = live.len() - wanted_front;
    let front = if wanted_front > 0 {
        read_end(&txn, keys, End::Front, wanted_front, true).await?
    } else {
        Vec::new()
    };
    // The pool is the smallest `wanted_front` items and the largest
    // `wanted_back`, sorted and without overlap. Requests take from it in
    // request order, each from its own end, so when items are scarce the
    // earliest requests are served whatever their end; when they are not,
    // front requests take exactly the front read and back requests the back.
    let taken: HashSet<Vec<u8>> = front.iter().map(|item| item.key.clone()).collect();
    let back: Vec<_> = if wanted_back > 0 {
        read_end(&txn, keys, End::Back, wanted_back, true)
            .await?
            .into_iter()
            .filter(|item| !taken.contains(&item.key))
            .collect()
    } else {
        Vec::new()
    };
    let mut pool: VecDeque<_> = front.into_iter().chain(back.into_iter().rev()).collect();
    debug_assert!(
        pool.iter()
            .zip(pool.iter().skip(1))
            .all(|(a, b)| a.key < b.key),
        "the pool is sorted by key and holds each item once"
    );

    let mut served = 0usize;
    let mut bytes = 0usize;
    let mut served_enqueue_ms = Vec::new();
    let mut next_deadline_ms: Option<u64> = None;
    let mut unserved = 0usize;
    let mut handed = Vec::new();
    // Only stored requests count in `waiting`.
    let mut stored_served = 0usize;
    for (source, request) in live {
        let item = if bytes < bytes_max {
            match request.end {
                End::Front => pool.pop_front(),
                End::Back => pool.pop_back(),
            }
        } else {
            None
        };
        let Some(mut item) = item else {
            unserved += 1;
            next_deadline_ms =
                Some(next_deadline_ms.map_or(request.deadline_ms, |d| d.min(request.deadline_ms)));
            continue;
        };
        if let Source::Stored { key, .. } = &source {
            txn.add_read_conflict_key(key)?;
            txn.clear(key)?;
            stored_served += 1;
        }
        txn.add_read_conflict_key(&item.key)?;
        txn.clear(&item.key)?;
        bytes += item.payload.len();
        // A leased request gets its item under a lease from this commit on;
        // the result carries the receipt to the requester.
        if request.lease_ms > 0 {
            lease_in(&txn, keys, &mut item, request.lease_ms, now)?;
        }
        served_enqueue_ms.push(item.enqueued_at_ms);
        served += 1;
        let requester = match source {
            Source::Memory(seq) => {
                handed.push((LocalId::Memory(seq), item));
                continue;
            }
            Source::Stored { requester, .. } if (local.is_local)(&requester) => {
                handed.push((LocalId::Registered(requester), item));
                continue;
            }
            Source::Stored { requester, .. } => requester,
        };
        let lease = item.lease.map(|lease| LeaseTag {
            receipt: lease.receipt.0,
            expires_at_ms: lease.expires_at_ms,
        });
        let result = ResultValue {
            deadline_ms: request.deadline_ms + result_grace_ms,
            lease,
            item: item.value(),
            item_key: item.key,
        };
        txn.set(&keys.result(&requester), &encode_result(&result))?;
    }
    if served > 0 {
        txn.atomic_add(&keys.depth(), -(served as i64))?;
    }
    if stored_served + expired > 0 {
        txn.atomic_add(&keys.waiting(), -((stored_served + expired) as i64))?;
    }
    // Requests remain but items ran out: wake on the next push. If the
    // byte bound stopped us, items remain and the caller loops at once.
    let watch = if unserved > 0 && bytes < bytes_max {
        Some(txn.watch(&keys.depth())?)
    } else {
        None
    };
    if !handed.is_empty() {
        txn.set(local.marker_key, &local.attempt.to_be_bytes())?;
    }
    match txn.commit().await {
        Ok(()) => {}
        // Nobody else has the items handed over here, so an unknown
        // outcome must be resolved, not retried: the marker says.
        Err(error) if error.is_maybe_committed() && !handed.is_empty() => {
            if !marker_says_applied(store, local).await {
                return Err(error.into());
            }
        }
        Err(error) => return Err(error.into()),
    }
    Ok(Fulfilled {
        served,
        expired,
        unserved,
        batch_full,
        next_deadline_ms,
        watch,
        served_enqueue_ms,
        handed,
    })
}

/// Tries to read the marker this many times before giving up.
const MARKER_READ_ATTEMPTS: u32 = 20;
/// Pause between marker reads.
const MARKER_READ_PAUSE_MS: u64 = 50;

/// True when the hand-off marker holds `local.attempt`: the transaction
/// whose outcome was unknown applied. A failed read is retried (bounded):
/// answering "not applied" for one that did apply loses its items.
async fn marker_says_applied<S: Store>(store: &S, local: LocalHandoff<'_>) -> bool {
    let mut last_error = None;
    for _ in 0..MARKER_READ_ATTEMPTS {
        let read = async {
            let check = store.begin()?;
            check.get(local.marker_key, false).await
        };
        match read.await {
            Ok(marker) => return marker.as_deref() == Some(&local.attempt.to_be_bytes()[..]),
            Err(error) => last_error = Some(error),
        }
        tokio::time::sleep(std::time::Duration::from_millis(MARKER_READ_PAUSE_MS)).await;
    }
    // Out of attempts: the items are reported as not taken. If the commit
    // did apply, they are lost, like a direct pop's in a crash.
    tracing::error!(
        error = ?last_error,
        "could not read a fulfiller's hand-off marker after an unknown commit outcome; its items may be lost"
    );
    false
}

/// Up to `max` requests from two lines, each in its own order, taking
/// turns (stored first).
fn take_turns<T>(stored: Vec<T>, memory: impl Iterator<Item = T>, max: usize) -> Vec<T> {
    let mut stored = stored.into_iter().peekable();
    let mut memory = memory.peekable();
    let mut out = Vec::new();
    while out.len() < max && (stored.peek().is_some() || memory.peek().is_some()) {
        out.extend(stored.next());
        if out.len() < max {
            out.extend(memory.next());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::take_turns;

    #[test]
    fn two_lines_take_turns_and_keep_their_order() {
        assert_eq!(
            take_turns(vec![1, 3], [2, 4, 6, 8].into_iter(), 5),
            [1, 2, 3, 4, 6]
        );
        assert_eq!(
            take_turns(vec![1, 3, 5, 7], [2].into_iter(), 4),
            [1, 2, 3, 5]
        );
        assert_eq!(take_turns(Vec::<u8>::new(), [2, 4].into_iter(), 1), [2]);
        assert_eq!(take_turns(vec![1], std::iter::empty(), 8), [1]);
    }
}
