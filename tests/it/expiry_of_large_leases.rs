//! Expiring many large leases at once: one sweep's transactions stay under
//! the store's 10 MB limit (batches are bounded by bytes as well as rows),
//! so 200 leases of 60 kB that expired together all go back.

use crate::common;

use std::time::Duration;

use hotq::coordinator::Coordinator;
use hotq::envelope::End;
use hotq::keys::{QueueKeys, QueueName};
use hotq::queue::Queue;
use hotq::staging::StagingConfig;
use hotq::store::embedded::Durability;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_large_leases_expiring_together_all_go_back() {
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    let coordinator = Coordinator::new(store.clone(), StagingConfig::default());
    let name = QueueName::new("large").unwrap();
    let keys = QueueKeys::new(&name);
    let queue = Queue::new(store.clone(), name);
    let payload = vec![7u8; 60_000];
    for _ in 0..2 {
        queue.push_batch(&vec![payload.clone(); 100]).await.unwrap();
    }
    let mut expires_at_ms = 0;
    for _ in 0..4 {
        let items = coordinator
            .pop_leased(
                &keys,
                End::Front,
                50,
                Duration::ZERO,
                std::num::NonZeroU64::new(60_000).expect("a lease of at least 1 ms"),
            )
            .await
            .unwrap();
        assert_eq!(items.len(), 50);
        expires_at_ms = expires_at_ms.max(
            items
                .iter()
                .map(|i| i.lease.unwrap().expires_at_ms)
                .max()
                .unwrap(),
        );
    }
    assert!(queue.is_empty().await.unwrap());
    coordinator.sweep_due(expires_at_ms).await.unwrap();
    assert_eq!(
        queue.len().await.unwrap(),
        200,
        "every expired lease went back"
    );
    assert!(
        common::due_of(&store, &keys, hotq::keys::DueWhat::Lease)
            .await
            .is_empty()
    );
}
