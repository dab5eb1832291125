//! What a fulfillment round reads from the request subspace, sorted into
//! the sources it serves in request order (docs/design.md §4.1, *Fulfill*): plain
//! stored requests, other lines' counted requests, and this line's own,
//! which stand for its earliest waiting pops. Malformed and expired rows
//! are cleared in the round's transaction.

use crate::envelope::{RequestValue, decode_counted_request};
use crate::keys::{QueueKeys, RequesterId};
use crate::queue::Item;
use crate::staging::counted::{self, Counted};
use crate::staging::line::MemoryRequest;
use crate::store::{KeyValue, StoreError, Transaction};

/// The version byte of a counted request's value.
const COUNTED_VERSION: u8 = 2;

/// Where a live request came from.
pub(super) enum Source {
    /// A plain stored request (one pop of one item): its key and requester.
    Stored {
        key: Vec<u8>,
        requester: RequesterId,
    },
    /// Another process's counted request (`counted[row]`).
    Counted { row: usize },
    /// This process's counted request (`counted[row]`), standing for these
    /// memory requests (indexes into the round's memory), one item each.
    Own { row: usize, waiters: Vec<usize> },
    /// A memory request of this process's line (index into the round's
    /// memory), taking up to its `max`.
    Memory { index: usize },
}

/// A round's requests, sorted.
pub(super) struct Requests {
    /// Live requests in request order, each with what it asks for.
    pub(super) stored: Vec<(Source, RequestValue)>,
    /// The counted requests among them (`Source::Counted` and
    /// `Source::Own` index into this).
    pub(super) counted: Vec<Counted>,
    /// Rows cleared because their deadline had passed.
    pub(super) expired: usize,
    /// Pops those stood for (`waiting` is lowered by them).
    pub(super) expired_pops: i64,
    /// Another process's request is in the store: this line's pops not
    /// served must stand there too, behind it.
    pub(super) others_ahead: bool,
}

/// Sorts `rows` (the request subspace, in order, as read at `now`) for
/// line `line`'s round in `txn`; `is_local` tells a plain request
/// registered by this process.
pub(super) fn sort_requests<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    rows: Vec<KeyValue>,
    now: u64,
    line: &[u8],
    is_local: &(dyn Fn(&RequesterId) -> bool + Sync),
) -> Result<Requests, StoreError> {
    let mut expired = 0usize;
    let mut expired_pops = 0i64;
    let mut counted_rows: Vec<Counted> = Vec::new();
    let mut stored: Vec<(Source, RequestValue)> = Vec::with_capacity(rows.len());
    // Another process's request is in the store: this line's pops left
    // unserved must stand there too, behind it.
    let mut others_ahead = false;
    for row in rows {
        let parsed = keys
            .request_parts(&row.key)
            .zip(decode_counted_request(&row.value));
        let Some(((_, requester), (request, count))) = parsed else {
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
            expired_pops += i64::from(count);
            continue;
        }
        if row.value.first() != Some(&COUNTED_VERSION) {
            others_ahead |= !is_local(&requester);
            let source = Source::Stored {
                key: row.key,
                requester,
            };
            stored.push((source, request));
            continue;
        }
        let own = counted::is_own(line, &requester);
        others_ahead |= !own;
        let index = counted_rows.len();
        counted_rows.push(Counted {
            key: row.key,
            requester,
            request,
            count,
        });
        let source = if own {
            Source::Own {
                row: index,
                waiters: Vec::new(),
            }
        } else {
            Source::Counted { row: index }
        };
        stored.push((source, request));
    }

    Ok(Requests {
        stored,
        counted: counted_rows,
        expired,
        expired_pops,
        others_ahead,
    })
}

/// Gives each of this line's counted requests in `stored` (`Source::Own`)
/// its earliest waiting `memory` requests of its class, up to its count,
/// in line order: those not served yet (`got`) nor given to an earlier
/// request (`assigned`, marked here). Pops that must not wait are never
/// in the store.
pub(super) fn assign_own(
    stored: &mut [(Source, RequestValue)],
    counted: &[Counted],
    memory: &[&MemoryRequest],
    got: &[Option<Vec<Item>>],
    assigned: &mut [bool],
) {
    for (source, _) in stored.iter_mut() {
        let Source::Own { row, waiters } = source else {
            continue;
        };
        let row = &counted[*row];
        let class = (row.request.end, row.request.lease_ms);
        for (index, m) in memory.iter().enumerate() {
            if waiters.len() >= row.count as usize {
                break;
            }
            if got[index].is_none()
                && !assigned[index]
                && m.line.stands_in_store()
                && (m.line.request.end, m.line.request.lease_ms) == class
            {
                assigned[index] = true;
                waiters.push(index);
            }
        }
    }
}
