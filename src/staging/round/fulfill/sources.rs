//! How a round serves each source of request (see
//! [`super::serve::RoundState::serve`]), syncs this line's counted requests in
//! the store, and writes its counters.

use std::collections::VecDeque;

use crate::envelope::{RequestValue, encode_result};
use crate::keys::RequesterId;
use crate::queue::{Item, QueueError};
use crate::staging::counted::{self, LineLevel, OwnLine};
use crate::staging::line::LocalId;
use crate::staging::requester::restore_in;
use crate::staging::round::answer::{Carry, Fulfilled, Next};
use crate::staging::round::pool::result_of;
use crate::store::{StoreError, Transaction};

use super::items_by_seq;
use super::serve::RoundState;

impl<T: Transaction> RoundState<'_, '_, T> {
    /// This line's counted request `row`, standing for memory requests
    /// `waiters`: one item each, handed over after the commit.
    pub(super) fn serve_own(
        &mut self,
        pool: &mut VecDeque<Item>,
        row: usize,
        waiters: &[usize],
        request: &RequestValue,
    ) -> Result<(), QueueError> {
        for &index in waiters {
            let Some(item) = self.take.take(pool, request)? else {
                break;
            };
            self.got[index] = Some(vec![item]);
            let seq = self.memory[index].seq;
            self.handover
                .handed
                .push((LocalId::Memory(seq), Vec::new()));
            self.own_served[row] += 1;
        }
        let served = self.own_served[row] as usize;
        self.counts.served += served;
        self.counts.items += served;
        if served < waiters.len() {
            self.left_waiting(request);
        }
        Ok(())
    }

    /// Another line's counted request `row`, which its owner's round
    /// serves: this round passes over the items it stands for and takes
    /// those behind them, so the two never conflict.
    pub(super) fn leave_to_owner(
        &mut self,
        pool: &mut VecDeque<Item>,
        row: usize,
        request: &RequestValue,
    ) {
        let counted = &self.sorted.counted[row];
        let count = counted.count as usize;
        let passed = self.take.leave(pool, request, count);
        if passed > 0 {
            self.counts.left_items += passed;
            self.left_for.push((counted.key.clone(), counted.count));
        }
        if passed < count {
            // Waiting for items, as its owner's round sees it (no take was
            // refused here).
            self.take.held_last = false;
            self.left_waiting(request);
        }
    }

    /// Another line's counted request `row`, taken over: up to its count
    /// of items, each under its own result key, and its count lowered.
    pub(super) fn serve_taken_over(
        &mut self,
        pool: &mut VecDeque<Item>,
        row: usize,
        request: &RequestValue,
    ) -> Result<(), QueueError> {
        let (txn, keys) = (self.take.txn, self.take.keys);
        let counted = &self.sorted.counted[row];
        let mut count = 0u32;
        while count < counted.count {
            let Some(item) = self.take.take(pool, request)? else {
                break;
            };
            let result_key = keys.counted_result(&counted.requester, &item.key);
            let result = result_of(item, request, self.bounds.result_grace_ms);
            txn.set(&result_key, &encode_result(&result))?;
            count += 1;
        }
        if count > 0 {
            counted::set_count_in(txn, keys, counted, counted.count - count)?;
            self.counts.served += 1;
            self.counts.items += count as usize;
            self.counts.results_written += count as usize;
        }
        if count < counted.count {
            self.left_waiting(request);
        }
        Ok(())
    }

    /// A plain stored request: one item, handed over in memory when its
    /// requester waits here, else written under its result key; the
    /// request cleared.
    pub(super) fn serve_stored(
        &mut self,
        pool: &mut VecDeque<Item>,
        key: &[u8],
        requester: RequesterId,
        request: &RequestValue,
    ) -> Result<(), QueueError> {
        let Some(item) = self.take.take(pool, request)? else {
            self.left_waiting(request);
            return Ok(());
        };
        let (txn, keys) = (self.take.txn, self.take.keys);
        self.counts.served += 1;
        self.counts.items += 1;
        txn.add_read_conflict_key(key)?;
        txn.clear(key)?;
        self.stored_served += 1;
        if (self.is_local)(&requester) {
            self.handover
                .handed
                .push((LocalId::Registered(requester), vec![item]));
            return Ok(());
        }
        let result = result_of(item, request, self.bounds.result_grace_ms);
        txn.set(&keys.result(&requester), &encode_result(&result))?;
        Ok(())
    }

    /// Brings this line's counted requests to its pops still waiting
    /// (`joins_store`: those not in the store yet join it), notes which
    /// of its requesters to collect from and which request to watch, and
    /// gives back the collected results nobody here waits for.
    pub(super) async fn sync_line(
        &mut self,
        line: &LineLevel<'_>,
        joins_store: bool,
    ) -> Result<(), QueueError> {
        let (txn, keys) = (self.take.txn, self.take.keys);
        let own = OwnLine {
            line: line.line,
            memory: &self.memory,
            got: &self.got,
            rows: &self.sorted.counted,
            served: &self.own_served,
            joins_store,
            rows_complete: self.rows_read < self.bounds.batch,
        };
        let kept = own.sync_counts_in(txn, keys).await?;
        for requester in kept.requesters {
            if !self.collect_next.contains(&requester) {
                self.collect_next.push(requester);
            }
        }
        self.counts.pops_asked = kept.pops_asked;
        self.own_watch_key = kept.oldest;
        for item in &self.give_back {
            restore_in(txn, keys, item).await??;
        }
        Ok(())
    }

    /// Moves the queue's `depth` by the items taken and `waiting` by the
    /// stored requests served or expired.
    pub(super) fn write_counters(&self) -> Result<(), StoreError> {
        let (txn, keys) = (self.take.txn, self.take.keys);
        let taken = self.counts.items;
        if taken > 0 {
            txn.atomic_add(&keys.depth(), -(taken as i64))?;
        }
        let expired_pops = self.sorted.expired_pops;
        if self.stored_served > 0 || expired_pops > 0 {
            txn.atomic_add(&keys.waiting(), -(self.stored_served as i64 + expired_pops))?;
        }
        Ok(())
    }

    /// The round's answer (its watches are armed by the caller, after the
    /// commit): each memory request's items filled in, in service order.
    pub(super) fn finish(mut self) -> Fulfilled {
        let got = std::mem::take(&mut self.got);
        let mut got = items_by_seq(&self.memory, got);
        for (id, items) in self.handover.handed.iter_mut() {
            if let LocalId::Memory(seq) = id {
                *items = got.remove(seq).expect("each memory request is handed once");
            }
        }
        debug_assert!(got.is_empty(), "every memory request served is handed over");
        Fulfilled {
            handover: self.handover,
            counts: self.counts,
            carry: Carry {
                collect: self.collect_next,
                left_for: self.left_for,
                others_ahead: self.sorted.others_ahead,
            },
            next: Next {
                watch: None,
                own_watch: None,
                next_deadline_ms: self.next_deadline_ms,
            },
        }
    }
}
