//! One fulfillment transaction: pair waiting requests with items, many at
//! once, and write each item under its requester's result key (or, for a
//! requester in this process, hand it over in memory after the commit;
//! see [`super::line`]).
//!
//! Requests and items are read with snapshot (so reading many costs no
//! conflicts), and a read-conflict key is added on each one consumed: the
//! commit fails only if another transaction consumed one of the same keys.
//! Requests are served in request order, front requests from the front
//! and back requests (priority `pop_max`) from the back.
//!
//! Two lines of requests are served together: the request subspace, and
//! the memory requests of pops waiting in this process (see
//! [`super::line`]). Each line keeps its order; when items are scarce the
//! two take turns, so neither starves the other.

use std::collections::{HashSet, VecDeque};

use crate::envelope::{End, LeaseTag, ResultValue, decode_request, encode_result, now_ms};
use crate::keys::QueueKeys;
use crate::lease::lease_in;
use crate::queue::read_end;
use crate::queue::{Item, QueueError};
use crate::staging::line::{LocalId, MemoryRequest};
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
    /// Items taken (a memory request may take several).
    pub items: usize,
    /// Items for requesters in this process, to hand over once the commit
    /// is durable (no result was written for them).
    pub handed: Vec<(LocalId, Vec<Item>)>,
    /// Memory requests of pops that must not wait, which this round's own
    /// read found nothing visible for: answered "empty".
    pub emptied: Vec<u64>,
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
    /// This process's memory line: its place, how many items it takes,
    /// and whether "nothing visible" answers it.
    Memory {
        seq: u64,
        max: usize,
        answers_empty: bool,
    },
}

impl Source {
    fn max(&self) -> usize {
        match self {
            Source::Stored { .. } => 1,
            Source::Memory { max, .. } => (*max).max(1),
        }
    }
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
    // leaving (or left) on their own. (The claims are bounded: `batch_max`
    // in line order, and as many pops that must not wait behind them.)
    let memory: Vec<&MemoryRequest> = local
        .memory
        .iter()
        .filter(|m| m.line.request.deadline_ms >= now)
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
            items: 0,
            handed: Vec::new(),
            emptied: Vec::new(),
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
        memory.iter().map(|m| {
            let source = Source::Memory {
                seq: m.seq,
                max: m.line.max,
                answers_empty: m.line.answers_empty,
            };
            (source, m.line.request)
        }),
        batch_max.max(1),
    );
    // Requests left for the next round: it must come at once.
    batch_full |= live.len() < offered;
    let live_memory: HashSet<u64> = live
        .iter()
        .filter_map(|(source, _)| match source {
            Source::Memory { seq, .. } => Some(*seq),
            Source::Stored { .. } => None,
        })
        .collect();

    // One round reads at most `batch_max` items: a pop of many takes what
    // the bound leaves, the rest wait for the next round.
    let wanted = |end: End| {
        live.iter()
            .filter(|(_, r)| r.end == end)
            .map(|(source, _)| source.max())
            .sum::<usize>()
            .min(batch_max.max(1))
    };
    let (wanted_front, wanted_back) = (wanted(End::Front), wanted(End::Back));
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
    let back_read = if wanted_back > 0 {
        read_end(&txn, keys, End::Back, wanted_back, true).await?
    } else {
        Vec::new()
    };
    let back_read_len = back_read.len();
    let back: Vec<_> = back_read
        .into_iter()
        .filter(|item| !taken.contains(&item.key))
        .collect();
    // The pool holds every item visible at this read version when a read
    // came back short of its limit (it reached the end of the subspace), or
    // when the two ends' reads met. Only then is "nothing left" true.
    let pool_is_everything = (wanted_front > 0 && front.len() < wanted_front)
        || (wanted_back > 0 && back_read_len < wanted_back)
        || back.len() < back_read_len;
    let mut pool: VecDeque<_> = front.into_iter().chain(back.into_iter().rev()).collect();
    debug_assert!(
        pool.iter()
            .zip(pool.iter().skip(1))
            .all(|(a, b)| a.key < b.key),
        "the pool is sorted by key and holds each item once"
    );
    debug_assert!(
        crate::groups::heads_are_distinct(&pool),
        "one head per group"
    );

    let mut served = 0usize;
    let mut taken = 0usize;
    let mut bytes = 0usize;
    let mut next_deadline_ms: Option<u64> = None;
    let mut unserved = 0usize;
    let mut handed = Vec::new();
    let mut emptied = Vec::new();
    // Only stored requests count in `waiting`.
    let mut stored_served = 0usize;
    for (source, request) in live {
        let mut items = Vec::new();
        while items.len() < source.max() && bytes < bytes_max {
            let next = match request.end {
                End::Front => pool.pop_front(),
                End::Back => pool.pop_back(),
            };
            let Some(mut item) = next else { break };
            txn.add_read_conflict_key(&item.key)?;
            txn.clear(&item.key)?;
            bytes += item.payload.len();
            // A leased request gets its item under a lease from this
            // commit on; the hand-off or result carries the receipt.
            if request.lease_ms > 0 {
                lease_in(&txn, keys, &mut item, request.lease_ms, now)?;
            } else if item.group.is_some() {
                let due_ms = crate::groups::handoff_due_ms(request.deadline_ms, result_grace_ms);
                crate::groups::handoff_in(&txn, keys, &item, due_ms)?;
            }
            items.push(item);
        }
        if items.is_empty() {
            match source {
                // The byte bound held items back: that is not "empty".
                Source::Memory {
                    seq,
                    answers_empty: true,
                    ..
                } if pool_is_everything && bytes < bytes_max => emptied.push(seq),
                _ => {
                    unserved += 1;
                    next_deadline_ms = Some(
                        next_deadline_ms
                            .map_or(request.deadline_ms, |d| d.min(request.deadline_ms)),
                    );
                }
            }
            continue;
        }
        served += 1;
        taken += items.len();
        let requester = match source {
            Source::Memory { seq, .. } => {
                handed.push((LocalId::Memory(seq), items));
                continue;
            }
            Source::Stored { key, requester } => {
                txn.add_read_conflict_key(&key)?;
                txn.clear(&key)?;
                stored_served += 1;
                requester
            }
        };
        assert_eq!(items.len(), 1, "a stored request takes one item");
        if (local.is_local)(&requester) {
            handed.push((LocalId::Registered(requester), items));
            continue;
        }
        let item = items.pop().expect("one item");
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
    // Pops that must not wait and were left out of this round's batch are
    // answered too once it found nothing left: the requests ahead of them
    // took every visible item.
    if pool_is_everything && pool.is_empty() && bytes < bytes_max {
        emptied.extend(
            memory
                .iter()
                .filter(|m| m.line.answers_empty && !live_memory.contains(&m.seq))
                .map(|m| m.seq),
        );
    }
    if taken > 0 {
        txn.atomic_add(&keys.depth(), -(taken as i64))?;
    }
    if stored_served + expired > 0 {
        txn.atomic_add(&keys.waiting(), -((stored_served + expired) as i64))?;
    }
    // Requests remain but items ran out: wake on the next push. If a bound
    // stopped us (bytes, or items per round), items remain and the caller
    // loops at once.
    let watch = if unserved > 0 && bytes < bytes_max && pool_is_everything {
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
        items: taken,
        handed,
        emptied,
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
