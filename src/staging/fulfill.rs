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

use std::collections::{HashSet, VecDeque};

use crate::envelope::{End, LeaseTag, ResultValue, decode_request, encode_result, now_ms};
use crate::keys::QueueKeys;
use crate::lease::lease_in;
use crate::queue::{Item, QueueError};
use crate::staging::direct::read_end;
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
    pub batch_full: bool,
    /// Earliest deadline among the unserved requests, in epoch ms.
    pub next_deadline_ms: Option<u64>,
    /// Armed when nothing more can be done now: fires on a new request
    /// (none waiting) or a push (requests waiting, no items).
    pub watch: Option<Watch>,
    /// Each served pair: (request index order position, item enqueue time),
    /// for wait-time measurement.
    pub served_enqueue_ms: Vec<u64>,
    /// Items for requesters in this process, by requester id, to hand over
    /// once the commit is durable (no result was written for them).
    pub handed: Vec<(Vec<u8>, Item)>,
}

/// How a fulfiller hands items to requesters in its own process.
#[derive(Clone, Copy)]
pub struct LocalHandoff<'a> {
    /// True for a requester waiting in this process.
    pub is_local: &'a (dyn Fn(&[u8]) -> bool + Sync),
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
        marker_key: b"",
        attempt: 0,
    };
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
    let batch_full = rows.len() >= batch_max.max(1);
    if rows.is_empty() {
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

    let now = now_ms();
    let mut expired = 0usize;
    let mut live = Vec::with_capacity(rows.len());
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
            live.push((row.key, requester, request));
        }
    }

    let wanted_front = live.iter().filter(|(_, _, r)| r.end == End::Front).count();
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
    for (request_key, requester, request) in live {
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
        txn.add_read_conflict_key(&request_key)?;
        txn.add_read_conflict_key(&item.key)?;
        txn.clear(&request_key)?;
        txn.clear(&item.key)?;
        bytes += item.payload.len();
        // A leased request gets its item under a lease from this commit on;
        // the result carries the receipt to the requester.
        if request.lease_ms > 0 {
            lease_in(&txn, keys, &mut item, request.lease_ms, now)?;
        }
        served_enqueue_ms.push(item.enqueued_at_ms);
        served += 1;
        if (local.is_local)(&requester) {
            handed.push((requester, item));
            continue;
        }
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
    if served + expired > 0 {
        txn.atomic_add(&keys.waiting(), -((served + expired) as i64))?;
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
            let check = store.begin()?;
            let marker = check.get(local.marker_key, false).await?;
            if marker.as_deref() != Some(&local.attempt.to_be_bytes()[..]) {
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
