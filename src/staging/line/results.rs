//! A line's results in the store: what other processes' fulfillers wrote
//! for its counted requests when they took them over
//! ([`crate::staging::takeover`]). Its own rounds collect them for its pops in line
//! order ([`collect_in`]); when its fulfiller stops, what is left goes back
//! to the queue ([`withdraw_line`]). Every result is consumed with a read
//! conflict on its key, so exactly one of the collector, the withdrawal
//! and the reaper takes it.

use crate::envelope::{decode_counted_request, decode_result};
use crate::keys::{QueueKeys, RequesterId};
use crate::queue::{Item, QueueError};
use crate::staging::counted::{Counted, LineLevel, class_of, is_own, set_count_in};
use crate::staging::line::MemoryRequest;
use crate::staging::requester::{item_of_result, restore_in};
use crate::store::{RangeRead, RetryPolicy, Store, Transaction, transact};

/// What [`collect_in`] collected.
pub struct Collected {
    /// Results nobody here waits for: back to the queue in this commit.
    pub give_back: Vec<Item>,
    /// Results read and cleared.
    pub collected: usize,
    /// Requesters with more results than one round reads.
    pub collect_next: Vec<RequesterId>,
}

/// In a round's `txn`: takes the results other processes wrote for this
/// line (its requesters in `line.collect`, and those of its requests in
/// `rows`), each with a read conflict (a reaper returning it makes one
/// side retry), and gives them to its waiting `memory` requests of their
/// class in line order, one each (into `got`). Takes at most `batch`
/// results per requester and `bytes_max` bytes of results in all (at
/// least one): what nobody waits for is written back in this commit,
/// which must stay under the store's transaction limit.
pub async fn collect_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    line: &LineLevel<'_>,
    rows: &[Counted],
    memory: &[&MemoryRequest],
    got: &mut [Option<Vec<Item>>],
    (batch, bytes_max): (usize, usize),
) -> Result<Collected, QueueError> {
    let mut requesters: Vec<RequesterId> = line.collect.to_vec();
    for row in rows {
        if is_own(line.line, &row.requester) && !requesters.contains(&row.requester) {
            requesters.push(row.requester.clone());
        }
    }
    let mut collected = Collected {
        give_back: Vec::new(),
        collected: 0,
        collect_next: Vec::new(),
    };
    let mut bytes = 0usize;
    for requester in &requesters {
        if bytes >= bytes_max {
            collected.collect_next.push(requester.clone());
            continue;
        }
        let class = class_of(requester).expect("a counted requester of this line");
        let (begin, end) = keys.counted_results_range(requester);
        let results = txn
            .get_range(RangeRead::new(&begin, &end, batch).snapshot())
            .await?;
        let mut full = results.len() >= batch;
        let mut cursor = 0;
        for row in results {
            if bytes >= bytes_max {
                full = true;
                break;
            }
            let result = decode_result(&row.value).ok_or_else(|| QueueError::Corrupt {
                key: row.key.clone(),
            })?;
            // A large item's result holds a reference, not its payload:
            // the payload's length counts, since the round reads its parts.
            bytes += row.key.len() + row.value.len() + result.item.len();
            txn.add_read_conflict_key(&row.key)?;
            txn.clear(&row.key)?;
            collected.collected += 1;
            let item = item_of_result(result);
            let takes = |m: &MemoryRequest| {
                !m.line.answers_empty && (m.line.request.end, m.line.request.lease_ms) == class
            };
            while cursor < memory.len() && !(got[cursor].is_none() && takes(memory[cursor])) {
                cursor += 1;
            }
            match got.get_mut(cursor) {
                Some(slot) => *slot = Some(vec![item]),
                None => collected.give_back.push(item),
            }
        }
        if full {
            collected.collect_next.push(requester.clone());
        }
    }
    Ok(collected)
}

/// Most key and value bytes of results one withdrawal gives back.
const WITHDRAW_BYTES_MAX: usize = 4 * 1024 * 1024;

/// When line `line`'s fulfiller of queue `keys` stops (shutdown, or idle
/// with no pop waiting): clears the line's counted requests (`waiting`
/// lowered by their counts) and returns the results nobody here will
/// collect (those of `collect` and of the requests found) to their keys,
/// in one transaction, so other daemons neither serve a line that is gone
/// nor leave its items to the reaper. Reads bounded by `batch_max` per
/// range; what a bound leaves, the reaper returns.
pub async fn withdraw_line<S: Store>(
    store: &S,
    keys: &QueueKeys,
    line: &[u8],
    collect: &[RequesterId],
    batch_max: usize,
) -> Result<(), QueueError> {
    let batch = batch_max.max(1);
    transact(store, RetryPolicy::default(), |txn| async move {
        let (begin, end) = keys.requests_range();
        let rows = txn
            .get_range(RangeRead::new(&begin, &end, batch).snapshot())
            .await?;
        let mut requesters = collect.to_vec();
        for row in rows {
            let Some((_, requester)) = keys.request_parts(&row.key) else {
                continue;
            };
            let Some((request, count)) = decode_counted_request(&row.value) else {
                continue;
            };
            if !is_own(line, &requester) {
                continue;
            }
            if !requesters.contains(&requester) {
                requesters.push(requester.clone());
            }
            let counted = Counted {
                key: row.key,
                requester,
                request,
                count,
            };
            set_count_in(&txn, keys, &counted, 0)?;
        }
        // Every result read is written back: bounded like a round's bytes
        // (what is left, the reaper returns).
        let mut bytes = 0usize;
        for requester in &requesters {
            let (begin, end) = keys.counted_results_range(requester);
            let results = txn
                .get_range(RangeRead::new(&begin, &end, batch).snapshot())
                .await?;
            for row in results {
                if bytes >= WITHDRAW_BYTES_MAX {
                    break;
                }
                bytes += row.key.len() + row.value.len();
                let Some(result) = decode_result(&row.value) else {
                    return Ok(Err(QueueError::Corrupt { key: row.key }));
                };
                txn.add_read_conflict_key(&row.key)?;
                txn.clear(&row.key)?;
                if let Err(error) = restore_in(&txn, keys, &item_of_result(result)).await? {
                    return Ok(Err(error));
                }
            }
        }
        Ok(Ok(()))
    })
    .await?
}
