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

use common::hooked::{CommitHook, Hooked};

use hotq::envelope::{RequestValue, now_ms};
use hotq::keys::{QueueKeys, QueueName};
use hotq::queue::{Queue, QueueError};
use hotq::staging::line::{LineRequest, LocalId, MemoryRequest};
use hotq::staging::requester::register_with;
use hotq::staging::round::fulfill::{LocalHandoff, fulfill_once};
use hotq::store::embedded::{Durability, EmbeddedTxn};
use hotq::store::{StoreError, Transaction};

/// Commits of transactions that set `marker` report "maybe committed",
/// after committing when `applies`, instead of committing otherwise.
#[derive(Clone)]
struct UnknownOutcome {
    marker: Arc<Vec<u8>>,
    applies: bool,
}

impl CommitHook for UnknownOutcome {
    async fn commit(&self, txn: &EmbeddedTxn, set_keys: &[Vec<u8>]) -> Result<(), StoreError> {
        if !set_keys.contains(&self.marker) {
            return txn.commit().await;
        }
        if self.applies {
            txn.commit().await?;
        }
        Err(StoreError::MaybeCommitted)
    }
}

async fn scenario(applies: bool) {
    let (embedded, _dir) = common::embedded_store(Durability::Buffered);
    let name = QueueName::new(if applies { "applied" } else { "not-applied" }).unwrap();
    let keys = QueueKeys::new(&name);
    let marker = keys.handoff_marker(7);
    let store = Hooked {
        inner: embedded.clone(),
        hook: UnknownOutcome {
            marker: Arc::new(marker.clone()),
            applies,
        },
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
