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
}

impl Watches {
    pub(crate) fn new(count_max: usize) -> Self {
        Watches {
            by_key: HashMap::new(),
            count: 0,
            count_max,
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
        if self.count >= self.count_max {
            self.drop_abandoned();
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
