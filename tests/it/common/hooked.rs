//! An embedded store whose writing commits go through a test's hook: the
//! one wrapper the fault-injection tests share (a commit stalled behind a
//! slow fsync, a commit of unknown outcome, a push landing mid-round).
//! Reads, writes and watches pass through unchanged.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hotq::store::embedded::{EmbeddedStore, EmbeddedTxn};
use hotq::store::{KeyValue, RangeRead, Read, Store, StoreError, Transaction, Watch};
use parking_lot::Mutex;

/// What a test does in place of a writing commit.
pub trait CommitHook: Clone + Send + Sync + 'static {
    /// Commits `txn` (or not, or later) and reports the outcome;
    /// `set_keys` are the keys it set, in order.
    fn commit(
        &self,
        txn: &EmbeddedTxn,
        set_keys: &[Vec<u8>],
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// What the store reports to `/healthz` as a write under way.
    fn write_under_way_for(&self) -> Option<Duration> {
        None
    }
}

/// An embedded store whose writing commits call `hook`.
#[derive(Clone)]
pub struct Hooked<H> {
    pub inner: EmbeddedStore,
    pub hook: H,
}

/// A transaction of [`Hooked`]: it remembers whether it wrote.
#[derive(Clone)]
pub struct HookedTxn<H> {
    inner: EmbeddedTxn,
    hook: H,
    writes: Arc<Mutex<Writes>>,
}

#[derive(Default)]
struct Writes {
    any: bool,
    set_keys: Vec<Vec<u8>>,
}

impl<H: CommitHook> Store for Hooked<H> {
    type Txn = HookedTxn<H>;

    fn begin(&self) -> Result<HookedTxn<H>, StoreError> {
        Ok(HookedTxn {
            inner: self.inner.begin()?,
            hook: self.hook.clone(),
            writes: Arc::default(),
        })
    }

    fn flush(&self) -> Result<(), StoreError> {
        self.inner.flush()
    }

    fn write_under_way_for(&self) -> Option<Duration> {
        self.hook.write_under_way_for()
    }
}

impl<H> HookedTxn<H> {
    fn wrote(&self) {
        self.writes.lock().any = true;
    }
}

impl<H: CommitHook> Transaction for HookedTxn<H> {
    async fn get(&self, key: &[u8], read: Read) -> Result<Option<Vec<u8>>, StoreError> {
        self.inner.get(key, read).await
    }

    async fn get_range(&self, range: RangeRead<'_>) -> Result<Vec<KeyValue>, StoreError> {
        self.inner.get_range(range).await
    }

    fn add_read_conflict_range(&self, begin: &[u8], end: &[u8]) -> Result<(), StoreError> {
        self.inner.add_read_conflict_range(begin, end)
    }

    fn set(&self, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        {
            let mut writes = self.writes.lock();
            writes.any = true;
            writes.set_keys.push(key.to_vec());
        }
        self.inner.set(key, value)
    }

    fn clear(&self, key: &[u8]) -> Result<(), StoreError> {
        self.wrote();
        self.inner.clear(key)
    }

    fn clear_range(&self, begin: &[u8], end: &[u8]) -> Result<(), StoreError> {
        self.wrote();
        self.inner.clear_range(begin, end)
    }

    fn atomic_add(&self, key: &[u8], delta: i64) -> Result<(), StoreError> {
        self.wrote();
        self.inner.atomic_add(key, delta)
    }

    fn atomic_max(&self, key: &[u8], value: u64) -> Result<(), StoreError> {
        self.wrote();
        self.inner.atomic_max(key, value)
    }

    fn watch(&self, key: &[u8]) -> Result<Watch, StoreError> {
        self.inner.watch(key)
    }

    async fn commit(&self) -> Result<(), StoreError> {
        let set_keys = {
            let writes = self.writes.lock();
            writes.any.then(|| writes.set_keys.clone())
        };
        match set_keys {
            Some(set_keys) => self.hook.commit(&self.inner, &set_keys).await,
            None => self.inner.commit().await,
        }
    }
}
