//! Queues' default leases, remembered briefly so a plain pop does not
//! read its queue's settings key each time.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::keys::{QueueKeys, QueueKind, QueueName};

/// How long a daemon answers a pop's default lease from memory: a change
/// made through another daemon reaches pops here within this (as an SQS
/// attribute change takes up to 60 s to propagate). Reading the settings
/// key in a transaction of its own cost every plain pop ~10 µs of the
/// daemon's CPU (peerbench, W=64: 58 → 69 µs per pop).
pub const DEFAULT_LEASE_CACHE_MS: u64 = 1_000;
/// Most queues whose default lease is held; past it the cache starts over.
const DEFAULT_LEASE_CACHE_MAX: usize = 10_000;

/// Default leases of recently popped queues, read at most once per
/// [`DEFAULT_LEASE_CACHE_MS`] per queue. Every path that changes a
/// queue's settings through this daemon forgets its entry: `PUT
/// .../settings`, SQS CreateQueue and SetQueueAttributes, and a delete
/// through any front end ([`super::Hotq::delete_queue`]); a stale entry would
/// lease a plain pop, which is at-most-once, and deliver its item twice.
#[derive(Debug, Default)]
pub struct DefaultLeases {
    /// Queue → (default lease in ms, or `None` once forgotten; when it
    /// was read or forgotten).
    entries: Mutex<HashMap<QueueEntry, (Option<u64>, Instant)>>,
}

impl DefaultLeases {
    pub(crate) fn fresh(&self, keys: &QueueKeys) -> Option<u64> {
        let entries = self.entries.lock();
        let (lease_ms, read_at) = entries.get(&entry(keys))?;
        let fresh = read_at.elapsed() < Duration::from_millis(DEFAULT_LEASE_CACHE_MS);
        if fresh { *lease_ms } else { None }
    }

    pub(crate) fn remember(&self, keys: &QueueKeys, lease_ms: u64, read_at: Instant) {
        let name = &entry(keys);
        let mut entries = self.entries.lock();
        // A read that began before a change through this daemon (or before
        // a newer read) must not put its older value back.
        if let Some((_, newer)) = entries.get(name)
            && *newer >= read_at
        {
            return;
        }
        if entries.len() >= DEFAULT_LEASE_CACHE_MAX && !entries.contains_key(name) {
            entries.clear();
        }
        entries.insert(name.clone(), (Some(lease_ms), read_at));
    }

    /// The queue's settings changed, or the queue was deleted, through
    /// this daemon: its next pop here reads them afresh.
    pub fn forget(&self, keys: &QueueKeys) {
        // Kept as a mark, so a read already under way is not remembered.
        self.entries
            .lock()
            .insert(entry(keys), (None, Instant::now()));
    }
}

/// A queue of either kind: a FIFO queue and a priority queue may share a name.
type QueueEntry = (QueueKind, QueueName);

fn entry(keys: &QueueKeys) -> QueueEntry {
    (keys.kind(), keys.name().clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::QueueName;

    #[test]
    fn a_read_begun_before_a_change_is_not_remembered_after_it() {
        let leases = DefaultLeases::default();
        let name = QueueKeys::new(&QueueName::new("jobs").unwrap());
        let read_at = Instant::now();
        leases.remember(&name, 0, read_at);
        assert_eq!(leases.fresh(&name), Some(0));
        // A second pop began reading, then the settings changed here.
        let second_read_at = Instant::now();
        leases.forget(&name);
        assert_eq!(leases.fresh(&name), None, "a change is read afresh");
        leases.remember(&name, 0, second_read_at);
        assert_eq!(leases.fresh(&name), None, "the older read is not put back");
        leases.remember(&name, 30_000, Instant::now());
        assert_eq!(leases.fresh(&name), Some(30_000));
    }
}
