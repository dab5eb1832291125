//! What one fulfillment round reads and the order it serves in: the pool
//! of items at either end, taking from it, and two lines taking turns.

use std::collections::{HashSet, VecDeque};

use crate::envelope::{End, LeaseTag, RequestValue, ResultValue};
use crate::keys::QueueKeys;
use crate::lease::lease_in;
use crate::queue::limits::Budget;
use crate::queue::{Item, QueueError, read_end};
use crate::store::Read;
use crate::store::Transaction;

/// The items one round may take, sorted by key, each once.
pub struct Pool {
    /// Front requests take from the front, back requests from the back.
    pub items: VecDeque<Item>,
    /// True when the pool holds every item visible at the read version:
    /// only then is "nothing left" true.
    pub is_everything: bool,
}

impl Pool {
    /// No item, and that is everything (a paused queue's round).
    pub fn nothing() -> Pool {
        Pool {
            items: VecDeque::new(),
            is_everything: true,
        }
    }
}

/// Reads (snapshot) the smallest `wanted_front` items and the largest
/// `wanted_back`, without overlap. Requests take from it in request order,
/// each from its own end, so when items are scarce the earliest requests
/// are served whatever their end; when they are not, front requests take
/// exactly the front read and back requests the back.
pub async fn read_pool<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    wanted_front: usize,
    wanted_back: usize,
) -> Result<Pool, QueueError> {
    let front = if wanted_front > 0 {
        read_end(txn, keys, End::Front, wanted_front, Read::Snapshot).await?
    } else {
        Vec::new()
    };
    let taken: HashSet<Vec<u8>> = front.iter().map(|item| item.key.clone()).collect();
    let back_read = if wanted_back > 0 {
        read_end(txn, keys, End::Back, wanted_back, Read::Snapshot).await?
    } else {
        Vec::new()
    };
    let back_read_len = back_read.len();
    let back: Vec<_> = back_read
        .into_iter()
        .filter(|item| !taken.contains(&item.key))
        .collect();
    // Everything is in the pool when a read came back short of its limit
    // (it reached the end of the subspace), or when the two ends' reads met.
    let is_everything = (wanted_front > 0 && front.len() < wanted_front)
        || (wanted_back > 0 && back_read_len < wanted_back)
        || back.len() < back_read_len;
    let items: VecDeque<_> = front.into_iter().chain(back.into_iter().rev()).collect();
    debug_assert!(
        items
            .iter()
            .zip(items.iter().skip(1))
            .all(|(a, b)| a.key < b.key),
        "the pool is sorted by key and holds each item once"
    );
    Ok(Pool {
        items,
        is_everything,
    })
}

/// Up to `max` requests from two lines, each in its own order, taking
/// turns (stored first).
pub fn take_turns<T>(stored: Vec<T>, memory: impl Iterator<Item = T>, max: usize) -> Vec<T> {
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

/// The result of `item` for `request`: kept `grace_ms` past its deadline.
pub fn result_of(item: Item, request: &RequestValue, grace_ms: u64) -> ResultValue {
    let lease = item.lease.map(|lease| LeaseTag {
        receipt: lease.receipt.0,
        expires_at_ms: lease.expires_at_ms,
    });
    ResultValue {
        deadline_ms: request.deadline_ms.saturating_add(grace_ms),
        lease,
        item: item.value(),
        item_key: item.key,
    }
}

/// Takes items from a round's pool.
pub struct PoolTaker<'a, T: Transaction> {
    /// The round's transaction.
    pub txn: &'a T,
    /// The queue.
    pub keys: &'a QueueKeys,
    /// Epoch ms leases start from.
    pub now: u64,
    /// Payload bytes taken so far.
    pub bytes: usize,
    /// Most payload bytes the round takes.
    pub bytes_max: usize,
    /// How long past its request's deadline a result is kept (a grouped
    /// item's hand-off has ended by then, or by the timer).
    pub result_grace_ms: u64,
    /// What the queue's limits still allow this round.
    pub budget: Budget,
    /// The last take found nothing because a limit held its items back.
    pub held_last: bool,
}

impl<T: Transaction> PoolTaker<'_, T> {
    /// The next item for `request` from its end of `pool`, cleared with a
    /// read conflict on it, and leased from this commit on if the request
    /// is; `None` when the pool, the byte bound or the limits' budget is
    /// used up.
    pub fn take(
        &mut self,
        pool: &mut VecDeque<Item>,
        request: &RequestValue,
    ) -> Result<Option<Item>, QueueError> {
        self.held_last = false;
        if self.bytes >= self.bytes_max {
            return Ok(None);
        }
        let leasing = request.lease_ms.is_some();
        if !self.budget.allows(leasing) {
            self.budget.refuse(leasing);
            self.held_last = true;
            return Ok(None);
        }
        // The first item from its end whose fairness key's limits let it
        // go (without limits per key, the first item).
        let budget = &self.budget;
        let place = match request.end {
            End::Front => pool
                .iter()
                .position(|item| budget.allows_item(item, leasing)),
            End::Back => pool
                .iter()
                .rposition(|item| budget.allows_item(item, leasing)),
        };
        let Some(mut item) = place.and_then(|place| pool.remove(place)) else {
            if !pool.is_empty() {
                self.budget.refuse_keys();
                self.held_last = true;
            }
            return Ok(None);
        };
        self.txn.add_read_conflict_key(&item.key)?;
        self.txn.clear(&item.key)?;
        crate::queue::expiry::unindex_in(self.txn, self.keys, &item.key, item.expires_at_ms)?;
        self.bytes += item.len();
        self.budget.take_item(&item, leasing);
        // The hand-off or result carries the receipt.
        if let Some(lease_ms) = request.lease_ms {
            lease_in(self.txn, self.keys, &mut item, lease_ms, self.now)?;
        } else if item.group.is_some() {
            // Its group's next item waits until this one is known delivered.
            let due_ms =
                crate::queue::groups::succession_due_ms(request.deadline_ms, self.result_grace_ms);
            crate::queue::groups::succession_in(self.txn, self.keys, &item, due_ms)?;
        }
        Ok(Some(item))
    }

    /// True when the last take came back empty because the limits held
    /// its items back (the queue's, or those of every key left in the
    /// pool).
    pub fn held_back(&self) -> bool {
        self.held_last
    }

    /// Passes over up to `count` items at `request`'s end of `pool`,
    /// leaving them in the queue (no read conflict, nothing written): they
    /// are another line's, whose own round takes them (see
    /// [`crate::staging::takeover`]). Returns how many were passed over.
    pub fn leave(&self, pool: &mut VecDeque<Item>, request: &RequestValue, count: usize) -> usize {
        let count = count.min(pool.len());
        match request.end {
            End::Front => drop(pool.drain(..count)),
            End::Back => drop(pool.drain(pool.len() - count..)),
        }
        count
    }
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
