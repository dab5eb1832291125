//! A fulfillment commit whose outcome is unknown ("maybe committed", which
//! FoundationDB reports when a proxy fails mid-commit) while it hands items
//! to requesters in its own process: the fulfiller's marker key tells
//! whether it applied, so the items are handed over exactly when they left
//! the queue, never lost and never twice.
//!
//! The embedded store only reports "maybe committed" when its committer
//! thread dies, so the fault is injected: a store wrapper whose commits of
//! transactions that write the hand-off marker report `MaybeCommitted`,
//! after committing or instead of committing.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use hotq::envelope::{RequestValue, now_ms};
use hotq::keys::{QueueKeys, QueueName};
use hotq::queue::{Queue, QueueError};
use hotq::staging::line::{LineRequest, LocalId, MemoryRequest};
use hotq::staging::requester::register_with;
use hotq::staging::round::fulfill::{LocalHandoff, fulfill_once};
use hotq::store::embedded::{Durability, EmbeddedStore, EmbeddedTxn};
use hotq::store::{KeyValue, RangeRead, Store, StoreError, Transaction, Watch};

/// An embedded store whose marker-writing commits report "maybe committed".
#[derive(Clone)]
struct UnknownOutcome {
    inner: EmbeddedStore,
    marker: Arc<Vec<u8>>,
    /// Commit for real before reporting the unknown outcome.
    applies: Arc<AtomicBool>,
}

#[derive(Clone)]
struct Txn {
    inner: EmbeddedTxn,
    store: UnknownOutcome,
    writes_marker: Arc<AtomicBool>,
}

impl Store for UnknownOutcome {
    type Txn = Txn;

    fn begin(&self) -> Result<Txn, StoreError> {
        Ok(Txn {
            inner: self.inner.begin()?,
            store: self.clone(),
            writes_marker: Arc::new(AtomicBool::new(false)),
        })
    }
}

impl Transaction for Txn {
    async fn get(
        &self,
        key: &[u8],
        read: hotq::store::Read,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        self.inner.get(key, read).await
    }

    async fn get_range(&self, range: RangeRead<'_>) -> Result<Vec<KeyValue>, StoreError> {
        self.inner.get_range(range).await
    }

    fn add_read_conflict_range(&self, begin: &[u8], end: &[u8]) -> Result<(), StoreError> {
        self.inner.add_read_conflict_range(begin, end)
    }

    fn set(&self, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        if key == self.store.marker.as_slice() {
            self.writes_marker.store(true, Ordering::SeqCst);
        }
        self.inner.set(key, value)
    }

    fn clear(&self, key: &[u8]) -> Result<(), StoreError> {
        self.inner.clear(key)
    }

    fn clear_range(&self, begin: &[u8], end: &[u8]) -> Result<(), StoreError> {
        self.inner.clear_range(begin, end)
    }

    fn atomic_add(&self, key: &[u8], delta: i64) -> Result<(), StoreError> {
        self.inner.atomic_add(key, delta)
    }

    fn atomic_max(&self, key: &[u8], value: u64) -> Result<(), StoreError> {
        self.inner.atomic_max(key, value)
    }

    fn watch(&self, key: &[u8]) -> Result<Watch, StoreError> {
        self.inner.watch(key)
    }

    async fn commit(&self) -> Result<(), StoreError> {
        if !self.writes_marker.load(Ordering::SeqCst) {
            return self.inner.commit().await;
        }
        if self.store.applies.load(Ordering::SeqCst) {
            self.inner.commit().await?;
        }
        Err(StoreError::MaybeCommitted)
    }
}

async fn scenario(applies: bool) {
    let (embedded, _dir) = common::embedded_store(Durability::Buffered);
    let name = QueueName::new(if applies { "applied" } else { "not-applied" }).unwrap();
    let keys = QueueKeys::new(&name);
    let marker = keys.handoff_marker(7);
    let store = UnknownOutcome {
        inner: embedded.clone(),
        marker: Arc::new(marker.clone()),
        applies: Arc::new(AtomicBool::new(applies)),
    };
    let queue = Queue::new(embedded.clone(), name);
    queue
        .push_batch(&[b"one".as_slice(), b"two", b"three"])
        .await
        .unwrap();
    let mut local_ids = Vec::new();
    for _ in 0..2 {
        let request = RequestValue::front(now_ms() + 60_000);
        register_with(&store, &keys, &request, |id| local_ids.push(id.clone()))
            .await
            .unwrap();
    }
    let is_local = |requester: &hotq::keys::RequesterId| local_ids.iter().any(|id| id == requester);
    // And one pop waiting in memory, served between the two stored requests.
    let memory = [MemoryRequest {
        seq: 42,
        line: LineRequest::one(RequestValue::front(now_ms() + 60_000)),
    }];
    let outcome = fulfill_once(
        &store,
        &keys,
        16,
        1 << 20,
        0,
        LocalHandoff {
            is_local: &is_local,
            memory: &memory,
            acks: &[],
            marker_key: &marker,
            attempt: 3,
        },
    )
    .await;
    let remaining = queue.len().await.unwrap();
    let requests = common::scan(&embedded, keys.requests_range()).await.len();
    assert!(
        common::scan(&embedded, keys.results_range())
            .await
            .is_empty()
    );
    if applies {
        let fulfilled = outcome.expect("an applied commit is reported as done");
        let handed: Vec<(bool, &[u8])> = fulfilled
            .handover
            .handed
            .iter()
            .flat_map(|(id, items)| {
                items
                    .iter()
                    .map(move |item| (*id == LocalId::Memory(42), item.payload.as_slice()))
            })
            .collect();
        assert_eq!(
            handed,
            [
                (false, b"one".as_slice()),
                (true, b"two"),
                (false, b"three")
            ],
            "every item handed over, the memory request in its turn"
        );
        assert_eq!((remaining, requests), (0, 0), "and gone from the store");
    } else {
        assert_eq!(
            outcome.unwrap_err(),
            QueueError::Store(StoreError::MaybeCommitted),
            "an unapplied commit is reported, its items not handed over"
        );
        assert_eq!((remaining, requests), (3, 2), "everything is where it was");
    }
}

#[tokio::test]
async fn an_applied_commit_of_unknown_outcome_hands_its_items_over() {
    scenario(true).await;
}

#[tokio::test]
async fn an_unapplied_commit_of_unknown_outcome_hands_nothing_over() {
    scenario(false).await;
}
