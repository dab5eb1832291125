//! Watches: registered when their transaction commits, fired by the
//! committer after a later commit changes the key's value.

use std::collections::HashMap;

use tokio::sync::oneshot;

use crate::store::StoreError;

/// The sending half of a watch, held until it fires.
pub(crate) type WatchSender = oneshot::Sender<Result<(), StoreError>>;

#[derive(Debug)]
struct Armed {
    /// The value the watching transaction saw; any other value fires.
    expected: Option<Vec<u8>>,
    sender: WatchSender,
}

/// Armed watches by key, with a bound on how many may be outstanding.
#[derive(Debug)]
pub(crate) struct Watches {
    by_key: HashMap<Vec<u8>, Vec<Armed>>,
    count: usize,
    count_max: usize,
    /// Sweep abandoned watches once `count` reaches this: twice what the
    /// last sweep kept, so sweeps cost O(1) per watch armed and abandoned
    /// watches never outnumber live ones by much (a watch whose waiter got
    /// its answer another way is abandoned, not fired).
    sweep_at: usize,
}

/// The smallest [`Watches::sweep_at`].
const SWEEP_AT_MIN: usize = 1_024;

impl Watches {
    pub(crate) fn new(count_max: usize) -> Self {
        Watches {
            by_key: HashMap::new(),
            count: 0,
            count_max,
            sweep_at: SWEEP_AT_MIN,
        }
    }

    /// Number of armed watches.
    pub(crate) fn len(&self) -> usize {
        self.count
    }

    /// Arms a watch on `key` expecting `expected`; fires at once if `current`
    /// already differs. Fails the watch when too many are outstanding.
    pub(crate) fn arm(
        &mut self,
        key: Vec<u8>,
        expected: Option<Vec<u8>>,
        current: Option<&[u8]>,
        sender: WatchSender,
    ) {
        if sender.is_closed() {
            return;
        }
        if expected.as_deref() != current {
            let _ = sender.send(Ok(()));
            return;
        }
        if self.count >= self.count_max.min(self.sweep_at) {
            self.drop_abandoned();
            self.sweep_at = (2 * self.count).max(SWEEP_AT_MIN);
        }
        if self.count >= self.count_max {
            let _ = sender.send(Err(StoreError::TooManyWatches));
            return;
        }
        self.count += 1;
        self.by_key
            .entry(key)
            .or_default()
            .push(Armed { expected, sender });
    }

    /// A commit set `key` to `value` (`None`: cleared): fire every watch
    /// expecting something else.
    pub(crate) fn changed(&mut self, key: &[u8], value: Option<&[u8]>) {
        let Some(armed) = self.by_key.get_mut(key) else {
            return;
        };
        let before = armed.len();
        let mut kept = Vec::with_capacity(armed.len());
        for watch in armed.drain(..) {
            if watch.expected.as_deref() != value {
                let _ = watch.sender.send(Ok(()));
            } else if !watch.sender.is_closed() {
                kept.push(watch);
            }
        }
        self.count -= before - kept.len();
        if kept.is_empty() {
            self.by_key.remove(key);
        } else {
            *armed = kept;
        }
    }

    #[cfg(test)]
    fn abandoned(&self) -> usize {
        self.by_key
            .values()
            .flatten()
            .filter(|watch| watch.sender.is_closed())
            .count()
    }

    /// Fails every armed watch: the store is closing.
    pub(crate) fn cancel_all(&mut self) {
        for (_, armed) in self.by_key.drain() {
            for watch in armed {
                let _ = watch.sender.send(Err(StoreError::Cancelled));
            }
        }
        self.count = 0;
    }

    /// Forgets watches whose receiver was dropped.
    fn drop_abandoned(&mut self) {
        self.by_key.retain(|_, armed| {
            armed.retain(|watch| !watch.sender.is_closed());
            !armed.is_empty()
        });
        self.count = self.by_key.values().map(Vec::len).sum();
    }
}

/// A watch asked for, armed when its transaction commits.
pub(crate) struct PendingWatch {
    pub(crate) key: Vec<u8>,
    /// What the watch read (through the transaction's own writes): any
    /// other value once the transaction committed fires it.
    pub(crate) seen: Option<Vec<u8>>,
    pub(crate) sender: WatchSender,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abandoned_watches_are_swept_long_before_the_limit() {
        let mut watches = Watches::new(100_000);
        let mut live = Vec::new();
        for n in 0..50_000u32 {
            let (sender, receiver) = oneshot::channel();
            watches.arm(n.to_be_bytes().to_vec(), None, None, sender);
            // One in ten waiters keeps listening; the rest got their
            // answer elsewhere and dropped the watch.
            if n % 10 == 0 {
                live.push(receiver);
            }
            if n % 1_000 == 0 {
                assert_eq!(
                    watches.len() - watches.abandoned(),
                    live.len(),
                    "the count covers every watch, live or abandoned"
                );
            }
            assert!(
                watches.len() <= (2 * live.len()).max(SWEEP_AT_MIN) * 2 + 1,
                "abandoned watches stay within a constant factor of live ones"
            );
        }
        assert_eq!(watches.len() - watches.abandoned(), live.len());
    }
}
