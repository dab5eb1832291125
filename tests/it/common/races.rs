//! Forcing a race between two commits: an item under a lease to race on,
//! and each side of the race in its own task after a few yields that vary
//! by round and side, so each side sometimes reads before the other
//! commits (tests/it/ack_races_expiry.rs, tests/it/ack_on_pop.rs).

use std::time::Duration;

use hotq::coordinator::Coordinator;
use hotq::envelope::End;
use hotq::keys::QueueKeys;
use hotq::lease::Lease;
use hotq::queue::Queue;
use hotq::store::embedded::EmbeddedStore;

/// Pushes `item-{round}` and leases it for `lease_ms` (long: the race's
/// expiry is forced by a sweep at a later clock, not waited for).
pub async fn leased_item(
    coordinator: &Coordinator<EmbeddedStore>,
    queue: &Queue<EmbeddedStore>,
    keys: &QueueKeys,
    round: usize,
    lease_ms: u64,
) -> Lease {
    queue
        .push(format!("item-{round}").as_bytes())
        .await
        .unwrap();
    let items = coordinator
        .pop_leased(
            keys,
            End::Front,
            1,
            Duration::ZERO,
            std::num::NonZeroU64::new(lease_ms).expect("a lease of at least 1 ms"),
        )
        .await
        .unwrap();
    assert_eq!(items.len(), 1);
    items[0].lease.unwrap()
}

/// Runs one side of a race in its own task, after a few yields that vary
/// by round and side.
pub fn race_side<T: Send + 'static>(
    round: usize,
    side: usize,
    work: impl std::future::Future<Output = T> + Send + 'static,
) -> tokio::task::JoinHandle<T> {
    let yields = (round * 7 + side * 3) % 5;
    tokio::spawn(async move {
        for _ in 0..yields {
            tokio::task::yield_now().await;
        }
        work.await
    })
}
