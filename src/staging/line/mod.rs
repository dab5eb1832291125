//! Requesters in the fulfiller's own process: their items are handed over
//! in memory instead of through the result key.
//!
//! Two kinds of local requester:
//! - A **memory request** ([`LocalWaiter::enqueue`]): a staged pop that
//!   waits in the process running its queue's fulfiller never writes its
//!   request to the store. It joins the queue's in-memory request line, in
//!   arrival order, and the fulfiller serves that line together with the
//!   request subspace (see [`crate::staging::round::fulfill`]). A staged pop is then one
//!   commit (the fulfiller's, shared with the whole batch) instead of a
//!   registration commit plus a share of the fulfillment commit. The
//!   request needs no durability: it dies with the process, and so does
//!   its waiter, while its item only ever leaves the store in a fulfill
//!   commit.
//! - A **registered request**: a pop that registered durably (with memory
//!   requests switched off, `StagingConfig::requests_in_memory`), when this
//!   process's fulfiller serves it, gets its item without a result write
//!   and a collect commit.
//!
//! A hand-off whose requester has gone (it timed out after the fulfiller
//! committed, or its task ended) finds no receiver, and the item is put
//! back where it was. Crash semantics are a direct pop's: an item left the
//! queue in a commit and is lost if the process dies before answering;
//! leases exist for work that must survive that.

use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::oneshot;

use crate::envelope::RequestValue;
use crate::keys::RequesterId;
use crate::keys::{QueueKeys, QueueKind, QueueName};
use crate::queue::Item;
pub use crate::staging::round::riding::{AckOutcome, SharedAcks};

/// Where a local requester's items go: one or more items, or none (a pop
/// that must not wait, told by its fulfiller's read that nothing is
/// visible).
type Slot = Arc<Mutex<Option<oneshot::Sender<Vec<Item>>>>>;

/// Who gets a locally handed item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LocalId {
    /// A request registered in the store, by requester id.
    Registered(RequesterId),
    /// A memory request, by its place in its queue's line.
    Memory(u64),
}

/// What a pop waiting in the line asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineRequest {
    /// Deadline, end and lease, as a stored request would carry them.
    pub request: RequestValue,
    /// Most items it takes from one round (a pop's `max`).
    pub max: usize,
    /// A pop without a wait: the first round whose read finds nothing
    /// visible answers it "empty" (a lost race is not an empty queue, so
    /// only the fulfiller's own read may say so).
    pub answers_empty: bool,
}

impl LineRequest {
    /// One item, waiting until `request`'s deadline.
    #[cfg(feature = "testing")]
    pub fn one(request: RequestValue) -> LineRequest {
        LineRequest {
            request,
            max: 1,
            answers_empty: false,
        }
    }

    /// True when the pop may stand in the store as part of a counted
    /// request, which stands for one item per pop: a pop that must not
    /// wait is answered by a round, and a pop of several items takes up
    /// to its `max` from the items a round reaches.
    pub fn stands_in_store(&self) -> bool {
        !self.answers_empty && self.max == 1
    }
}

/// One memory request, as the fulfiller sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryRequest {
    /// Its place in the queue's line (arrival order).
    pub seq: u64,
    /// What it asks for.
    pub line: LineRequest,
}

/// One entry of a memory request line.
#[derive(Debug)]
struct Entry {
    request: LineRequest,
    slot: Slot,
    /// Acks riding on the pop, if any.
    acks: Option<SharedAcks>,
    /// Offered to a fulfillment transaction whose outcome is not known yet:
    /// the entry stays until [`LocalWaiters::resolve_claims`], so a pop
    /// never leaves while an item may be taken for it.
    claimed: bool,
    /// Its pop has stopped waiting (deadline, shutdown, caller gone) while
    /// claimed: resolved unserved, it is removed and its pop told so.
    leaving: bool,
}

/// One queue's waiters in this process.
#[derive(Debug, Default)]
struct QueueWaiters {
    /// Pops waiting, whatever their kind of request.
    waiting: usize,
    /// The memory request line, in arrival order.
    line: BTreeMap<u64, Entry>,
}

/// The requesters waiting in this process. Bounded by the number of pops
/// waiting here: each removes its own entries when it ends (a claimed
/// memory request is removed when its claim is resolved).
#[derive(Debug, Default)]
pub struct LocalWaiters {
    /// Longest wait for a hand-off a round already took (zero: the
    /// default, 30 s; see `StagingConfig::hand_off_wait_ms`).
    hand_off_wait_ms: u64,
    /// Registered requests' ids.
    slots: Mutex<HashMap<RequesterId, Slot>>,
    /// Per queue (entries removed when no pop waits and the line is empty).
    queues: Mutex<HashMap<(QueueKind, QueueName), QueueWaiters>>,
    /// The next memory request's place (one counter for every queue).
    next_seq: AtomicU64,
}

impl LocalWaiters {
    /// No waiters yet; a pop leaving waits at most `hand_off_wait_ms` for
    /// a round that claimed it.
    pub fn new(hand_off_wait_ms: u64) -> LocalWaiters {
        LocalWaiters {
            hand_off_wait_ms,
            ..LocalWaiters::default()
        }
    }

    fn hand_off_wait(&self) -> std::time::Duration {
        match self.hand_off_wait_ms {
            0 => std::time::Duration::from_secs(30),
            ms => std::time::Duration::from_millis(ms),
        }
    }

    /// How many pops of queue `keys` wait in this process now.
    pub fn waiting_on(&self, keys: &QueueKeys) -> usize {
        let queues = self.queues.lock();
        queues
            .get(&(keys.kind(), keys.name().clone()))
            .map_or(0, |queue| queue.waiting)
    }

    /// How many memory requests of queue `keys` are in this process's line
    /// now (including those whose pop is leaving, until their fulfillment
    /// is resolved: an item may still be taken for them).
    pub fn memory_waiting(&self, keys: &QueueKeys) -> usize {
        let queues = self.queues.lock();
        queues
            .get(&(keys.kind(), keys.name().clone()))
            .map_or(0, |queue| queue.line.len())
    }

    /// Claims the first `max` unclaimed memory requests of queue `keys`,
    /// in arrival order, for one fulfillment transaction. The caller must
    /// [`Self::resolve_claims`] them whatever the transaction's outcome.
    pub fn claim_memory(&self, keys: &QueueKeys, max: usize) -> Vec<MemoryRequest> {
        let mut queues = self.queues.lock();
        let Some(queue) = queues.get_mut(&(keys.kind(), keys.name().clone())) else {
            return Vec::new();
        };
        // The first `max` in arrival order, and up to `max` more pops that
        // must not wait: those need no item to be answered when the round
        // finds nothing left, so a line of waiting pops ahead must not keep
        // them waiting for their bound.
        let mut claimed = Vec::new();
        let mut extra_no_wait = 0;
        for (seq, entry) in queue.line.iter_mut() {
            if entry.claimed || entry.leaving {
                continue;
            }
            if claimed.len() >= max {
                if !entry.request.answers_empty {
                    continue;
                }
                if extra_no_wait >= max {
                    break;
                }
                extra_no_wait += 1;
            }
            entry.claimed = true;
            claimed.push(MemoryRequest {
                seq: *seq,
                line: entry.request,
            });
        }
        claimed
    }

    /// Settles the memory requests `claimed` of queue `keys` after their
    /// fulfillment transaction: `served` (durable now) are handed their
    /// items, and `emptied` (pops that must not wait, whose round found
    /// nothing visible) are answered with none; the rest go back to the
    /// line, or, if their pop is leaving, are removed and their pop told
    /// it got nothing. Returns the items nobody took (their pop's task was
    /// dropped), to put back.
    pub fn resolve_claims(
        &self,
        keys: &QueueKeys,
        claimed: &[MemoryRequest],
        answered: Answered,
    ) -> Vec<Item> {
        let Answered {
            served,
            emptied,
            acked,
        } = answered;
        let id = (keys.kind(), keys.name().clone());
        let mut unclaimed = Vec::new();
        let mut queues = self.queues.lock();
        let Some(queue) = queues.get_mut(&id) else {
            // Entries live until resolved: a claimed one keeps its queue's.
            assert!(
                claimed.is_empty() && served.is_empty() && emptied.is_empty() && acked.is_empty(),
                "a claimed memory request vanished before it was resolved"
            );
            return unclaimed;
        };
        // Ack outcomes first: a pop answered below reads them at once.
        // Acks this round carried but did not settle go back to waiting.
        let settled: std::collections::HashSet<u64> = acked.iter().map(|(seq, _)| *seq).collect();
        for (seq, outcomes) in acked {
            if let Some(acks) = queue.line.get(&seq).and_then(|entry| entry.acks.as_ref()) {
                acks.lock().settle(outcomes);
            }
        }
        for request in claimed.iter().filter(|r| !settled.contains(&r.seq)) {
            if let Some(acks) = queue.line.get(&request.seq).and_then(|e| e.acks.as_ref()) {
                acks.lock().release();
            }
        }
        let answered = served
            .into_iter()
            .chain(emptied.into_iter().map(|seq| (seq, Vec::new())));
        for (seq, items) in answered {
            let entry = queue
                .line
                .remove(&seq)
                .expect("a claimed memory request stays until resolved");
            assert!(entry.claimed, "an unclaimed memory request was answered");
            assert!(
                items.len() <= entry.request.max,
                "a memory request got more items than it asked for"
            );
            assert!(
                !items.is_empty() || entry.request.answers_empty,
                "only a pop that must not wait is answered empty"
            );
            unclaimed.extend(send(&entry.slot, items));
        }
        for request in claimed {
            let Some(entry) = queue.line.get_mut(&request.seq) else {
                continue; // served above
            };
            if entry.leaving {
                let entry = queue.line.remove(&request.seq).expect("present");
                // Dropping the sender tells the leaving pop: nothing came.
                drop(entry.slot.lock().take());
            } else {
                entry.claimed = false;
            }
        }
        if queue.waiting == 0 && queue.line.is_empty() {
            queues.remove(&id);
        }
        unclaimed
    }

    /// Hands `item` to the registered requester `requester`; gives it back
    /// when nobody here takes it (the requester has gone, or was already
    /// handed one).
    pub fn hand_over(&self, requester: &RequesterId, item: Item) -> Vec<Item> {
        let slot = self.slots.lock().remove(requester);
        let Some(slot) = slot else {
            return vec![item];
        };
        send(&slot, vec![item])
    }

    /// True when `requester` waits in this process.
    pub fn is_local(&self, requester: &RequesterId) -> bool {
        self.slots.lock().contains_key(requester)
    }
}

/// Sends `items` through `slot`; gives them back when the slot was
/// already used or closed, or its receiver has gone.
fn send(slot: &Slot, items: Vec<Item>) -> Vec<Item> {
    let sender = slot.lock().take();
    match sender {
        Some(sender) => sender.send(items).err().unwrap_or_default(),
        None => items,
    }
}

/// One waiting pop's entry in [`LocalWaiters`]: its memory request, or its
/// ids (one per registration attempt, all leading to the same receiver),
/// removed on drop.
pub struct LocalWaiter {
    waiters: Arc<LocalWaiters>,
    queue: (QueueKind, QueueName),
    slot: Slot,
    ids: Vec<RequesterId>,
    seq: Option<u64>,
    /// The items, when this process's fulfiller served the request (none:
    /// it must not wait and its round found the queue empty).
    pub receiver: oneshot::Receiver<Vec<Item>>,
}

impl LocalWaiter {
    /// A waiter on queue `keys`, with no id yet.
    pub fn new(waiters: Arc<LocalWaiters>, keys: &QueueKeys) -> LocalWaiter {
        let (sender, receiver) = oneshot::channel();
        let queue = (keys.kind(), keys.name().clone());
        waiters
            .queues
            .lock()
            .entry(queue.clone())
            .or_default()
            .waiting += 1;
        LocalWaiter {
            waiters,
            queue,
            slot: Arc::new(Mutex::new(Some(sender))),
            ids: Vec::new(),
            seq: None,
            receiver,
        }
    }

    /// Joins the queue's memory request line with `request`, with `acks`
    /// riding on it (settled by the round that commits them). Once only:
    /// a pop waits in one place.
    pub fn enqueue(&mut self, request: LineRequest, acks: Option<SharedAcks>) {
        assert!(
            self.seq.is_none() && self.ids.is_empty(),
            "a pop waits in one line"
        );
        let seq = self.waiters.next_seq.fetch_add(1, Ordering::Relaxed);
        let mut queues = self.waiters.queues.lock();
        let queue = queues
            .get_mut(&self.queue)
            .expect("a waiter's queue entry lives as long as the waiter");
        let entry = Entry {
            request,
            slot: self.slot.clone(),
            acks,
            claimed: false,
            leaving: false,
        };
        queue.line.insert(seq, entry);
        self.seq = Some(seq);
    }

    /// Makes `requester` (a registration attempt's id) lead here. Called
    /// before the registration commits, so the fulfiller never sees the
    /// request before it knows the requester is local.
    pub fn add_id(&mut self, requester: &RequesterId) {
        self.waiters
            .slots
            .lock()
            .insert(requester.clone(), self.slot.clone());
        self.ids.push(requester.clone());
    }

    /// Stops taking hand-offs, and returns the items of one already taken
    /// for this waiter (the fulfiller sends right after its commit, so the
    /// wait is short; bounded all the same).
    pub async fn take_handed(&mut self) -> Option<Vec<Item>> {
        if !self.close() {
            return None;
        }
        let wait = self.waiters.hand_off_wait();
        match tokio::time::timeout(wait, &mut self.receiver).await {
            Ok(received) => received.ok(),
            // Gave up: a hand-off landing from now on must fail (so its
            // fulfiller puts the item back), and one that just landed is
            // still ours.
            Err(_) => self.abandon(),
        }
    }

    /// Leaves for good (the pop gives up, or its future is being dropped):
    /// closes the receiver first, so a hand-off landing from now on fails
    /// and its fulfiller puts the items back; returns items handed over
    /// before that, which the caller must deliver or put back.
    pub fn abandon(&mut self) -> Option<Vec<Item>> {
        self.receiver.close();
        self.close();
        self.receiver.try_recv().ok()
    }

    /// Stops taking hand-offs. True when one may already be under way:
    /// an item was taken for this waiter, or its memory request is claimed
    /// by a fulfillment not yet resolved. [`Self::receiver`] then gets the
    /// item, or an error once the claim is resolved without one.
    pub fn close(&mut self) -> bool {
        if !self.ids.is_empty() {
            let mut slots = self.waiters.slots.lock();
            for id in self.ids.drain(..) {
                slots.remove(&id);
            }
        }
        if let Some(seq) = self.seq.take() {
            let mut queues = self.waiters.queues.lock();
            if let Some(queue) = queues.get_mut(&self.queue)
                && let Some(entry) = queue.line.get_mut(&seq)
            {
                if entry.claimed {
                    // Its claim's resolution answers it: leaving now could let an
                    // item be taken for a pop that is gone.
                    entry.leaving = true;
                    return true;
                }
                queue.line.remove(&seq);
            }
        }
        self.slot.lock().take().is_none()
    }
}

impl Drop for LocalWaiter {
    fn drop(&mut self) {
        if self.abandon().is_some_and(|items| !items.is_empty()) {
            // Only a pop task dropped mid-wait (the runtime shutting down)
            // gets here; every path of a running pop takes its hand-off,
            // and `InLine` abandons (and puts back) before this runs. A
            // hand-off landing after this fails and is put back by its
            // fulfiller.
            tracing::error!(queue = %self.queue.1, "an item handed to a pop whose task was dropped is lost");
        }
        let mut queues = self.waiters.queues.lock();
        if let Some(queue) = queues.get_mut(&self.queue) {
            queue.waiting -= 1;
            // A leaving memory request stays until its claim is resolved.
            if queue.waiting == 0 && queue.line.is_empty() {
                queues.remove(&self.queue);
            }
        }
    }
}

mod claims;
pub use claims::{Answered, Claims};

mod classes;
pub use classes::Waiting;
pub mod results;

#[cfg(test)]
mod tests;
