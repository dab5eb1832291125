//! Requesters in the fulfiller's own process: their items are handed over
//! in memory instead of through the result key.
//!
//! A staged pop registers its request durably, like any other. When this
//! process's fulfiller serves a request whose requester waits here, it
//! clears the request and the item in its transaction without writing a
//! result, and hands the item over once that commit is durable: the
//! result write and the requester's collect commit (two of a staged pop's
//! three sequential commits' worth of work, one of them on the critical
//! path) disappear. Requests from other processes get results as before.
//!
//! A hand-off whose requester has gone (it timed out and withdrew after
//! the fulfiller committed, or its task ended) finds no receiver, and the
//! item is put back where it was. Crash semantics are a direct pop's: an
//! item left the queue in a commit and is lost if the process dies before
//! answering; leases exist for work that must survive that.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use crate::keys::{QueueKeys, QueueKind, QueueName};
use crate::queue::Item;

/// Longest wait for a hand-off the fulfiller already took.
const HAND_OFF_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Where a local requester's item goes.
type Slot = Arc<Mutex<Option<oneshot::Sender<Item>>>>;

/// The requesters waiting in this process, by requester id. Bounded by the
/// number of pops waiting here: each removes its own ids when it ends.
#[derive(Debug, Default)]
pub struct LocalWaiters {
    slots: Mutex<HashMap<Vec<u8>, Slot>>,
    /// Pops waiting here, per queue (entries removed at zero).
    per_queue: Mutex<HashMap<(QueueKind, QueueName), usize>>,
}

impl LocalWaiters {
    /// How many pops of queue `keys` wait in this process now.
    pub fn waiting_on(&self, keys: &QueueKeys) -> usize {
        let per_queue = self.per_queue.lock().expect("local waiters lock");
        per_queue
            .get(&(keys.kind(), keys.name().clone()))
            .copied()
            .unwrap_or(0)
    }

    /// True when `requester` waits in this process.
    pub fn is_local(&self, requester: &[u8]) -> bool {
        self.slots
            .lock()
            .expect("local waiters lock")
            .contains_key(requester)
    }

    /// Hands `item` to `requester`; gives it back (`Some`) when nobody
    /// here takes it (the requester has gone, or was already handed one).
    pub fn hand_over(&self, requester: &[u8], item: Item) -> Option<Item> {
        let slot = self
            .slots
            .lock()
            .expect("local waiters lock")
            .remove(requester);
        let Some(slot) = slot else {
            return Some(item);
        };
        let sender = slot.lock().expect("local slot lock").take();
        match sender {
            Some(sender) => sender.send(item).err(),
            None => Some(item),
        }
    }
}

/// One waiting pop's entry in [`LocalWaiters`]: its ids (one per
/// registration attempt, all leading to the same receiver), removed on drop.
pub struct LocalWaiter {
    waiters: Arc<LocalWaiters>,
    queue: (QueueKind, QueueName),
    slot: Slot,
    ids: Vec<Vec<u8>>,
    /// The item, when this process's fulfiller served the request.
    pub receiver: oneshot::Receiver<Item>,
}

impl LocalWaiter {
    /// A waiter on queue `keys`, with no id yet.
    pub fn new(waiters: Arc<LocalWaiters>, keys: &QueueKeys) -> LocalWaiter {
        let (sender, receiver) = oneshot::channel();
        let queue = (keys.kind(), keys.name().clone());
        *waiters
            .per_queue
            .lock()
            .expect("local waiters lock")
            .entry(queue.clone())
            .or_default() += 1;
        LocalWaiter {
            waiters,
            queue,
            slot: Arc::new(Mutex::new(Some(sender))),
            ids: Vec::new(),
            receiver,
        }
    }

    /// Makes `requester` (a registration attempt's id) lead here. Called
    /// before the registration commits, so the fulfiller never sees the
    /// request before it knows the requester is local.
    pub fn add_id(&mut self, requester: &[u8]) {
        self.waiters
            .slots
            .lock()
            .expect("local waiters lock")
            .insert(requester.to_vec(), self.slot.clone());
        self.ids.push(requester.to_vec());
    }

    /// Stops taking hand-offs, and returns the item of one already taken
    /// for this waiter (the fulfiller sends right after taking it, so the
    /// wait is short; bounded all the same).
    pub async fn take_handed(&mut self) -> Option<Item> {
        if !self.close() {
            return None;
        }
        tokio::time::timeout(HAND_OFF_WAIT, &mut self.receiver)
            .await
            .ok()
            .and_then(Result::ok)
    }

    /// Stops taking hand-offs. True when one was already taken for this
    /// waiter (its item is in, or about to be in, [`Self::receiver`]).
    pub fn close(&mut self) -> bool {
        {
            let mut slots = self.waiters.slots.lock().expect("local waiters lock");
            for id in self.ids.drain(..) {
                slots.remove(&id);
            }
        }
        self.slot.lock().expect("local slot lock").take().is_none()
    }
}

impl Drop for LocalWaiter {
    fn drop(&mut self) {
        if self.close() && self.receiver.try_recv().is_ok() {
            // Only a pop task dropped mid-wait (the runtime shutting down)
            // gets here; every path of a running pop takes its hand-off.
            tracing::error!(queue = %self.queue.1, "an item handed to a pop whose task was dropped is lost");
        }
        let mut per_queue = self.waiters.per_queue.lock().expect("local waiters lock");
        if let Some(count) = per_queue.get_mut(&self.queue) {
            *count -= 1;
            if *count == 0 {
                per_queue.remove(&self.queue);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(payload: &[u8]) -> Item {
        Item::from_value(
            b"key".to_vec(),
            crate::envelope::ItemValue::new(1, payload.to_vec()),
        )
    }

    #[tokio::test]
    async fn a_hand_off_reaches_its_waiter_once_and_comes_back_when_nobody_waits() {
        let waiters = Arc::new(LocalWaiters::default());
        let keys = QueueKeys::new(&QueueName::new("q").unwrap());
        let mut waiter = LocalWaiter::new(waiters.clone(), &keys);
        assert_eq!(waiters.waiting_on(&keys), 1);
        waiter.add_id(b"first-attempt");
        waiter.add_id(b"second-attempt");
        assert!(waiters.is_local(b"first-attempt") && waiters.is_local(b"second-attempt"));
        assert!(!waiters.is_local(b"someone-else"));
        assert_eq!(waiters.hand_over(b"second-attempt", item(b"a")), None);
        // The same waiter served twice (two attempts' requests): the second comes back.
        assert_eq!(
            waiters.hand_over(b"first-attempt", item(b"b")),
            Some(item(b"b"))
        );
        assert!(waiter.close(), "a hand-off was taken");
        assert_eq!((&mut waiter.receiver).await.unwrap(), item(b"a"));
        assert!(!waiters.is_local(b"first-attempt"));

        let mut left = LocalWaiter::new(waiters.clone(), &keys);
        left.add_id(b"left");
        assert!(!left.close(), "nothing was handed over");
        assert_eq!(waiters.hand_over(b"left", item(b"c")), Some(item(b"c")));
        let dropped = {
            let mut waiter = LocalWaiter::new(waiters.clone(), &keys);
            waiter.add_id(b"dropped");
            waiter
        };
        drop(dropped);
        assert!(
            waiters.slots.lock().unwrap().is_empty(),
            "entries are removed"
        );
    }
}
