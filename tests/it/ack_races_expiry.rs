//! An ack, or an extend, racing the expiry of the same lease resolves to
//! exactly one outcome, every time: either the worker's call succeeds and
//! the item never comes back, or the expiry wins, the call is refused, and
//! the item is back in the queue with its delivery counted.
//!
//! The expiry is driven by calling the timer's sweep with a clock past the
//! lease's expiry while the worker's call runs with the real clock (the
//! lease is far from expired for it), so both sides really contend on the
//! store in every round.

use crate::common;

use common::races::{leased_item, race_side};
use hotq::coordinator::Coordinator;
use hotq::keys::{QueueKeys, QueueName};
use hotq::lease::LeaseError;
use hotq::queue::Queue;
use hotq::staging::StagingConfig;
use hotq::store::Read;
use hotq::store::embedded::{Durability, EmbeddedStore};

const ROUNDS: usize = 300;

/// What the timer's sweep did to the leases.
struct Swept {
    redelivered: usize,
}

/// The timer's sweep of the due index as of `now_ms` (one queue has leases here).
async fn expire_leases(
    store: &EmbeddedStore,
    _keys: &QueueKeys,
    now_ms: u64,
    max_deliveries: Option<u32>,
) -> Result<Swept, hotq::queue::QueueError> {
    let policy = hotq::lease::DeliveryPolicy {
        max_deliveries_default: max_deliveries.unwrap_or(u32::MAX),
        ..Default::default()
    };
    let swept = hotq::due::sweep(store, &policy, now_ms).await?;
    Ok(Swept {
        redelivered: swept.redelivered.values().sum(),
    })
}
const LEASE_MS: u64 = 600_000;

/// What the queue holds after a round: (visible items, leases); the depth
/// and leased counters must agree with the scans.
async fn holdings(store: &EmbeddedStore, keys: &QueueKeys) -> (usize, usize) {
    use hotq::store::{Store, Transaction, decode_counter};
    let items = common::scan(store, keys.items_range()).await.len();
    let leases = common::due_of(store, keys, hotq::keys::DueWhat::Lease)
        .await
        .len();
    let txn = store.begin().unwrap();
    let depth = decode_counter(
        txn.get(&keys.depth(), Read::Snapshot)
            .await
            .unwrap()
            .as_deref(),
    );
    let leased = decode_counter(
        txn.get(&keys.leased(), Read::Snapshot)
            .await
            .unwrap()
            .as_deref(),
    );
    assert_eq!(
        (depth as usize, leased as usize),
        (items, leases),
        "counters drifted"
    );
    (items, leases)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ack_racing_expiry_has_exactly_one_winner() {
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    let coordinator = Coordinator::new(store.clone(), StagingConfig::default());
    let name = QueueName::new("race-ack").unwrap();
    let keys = QueueKeys::new(&name);
    let queue = Queue::new(store.clone(), name);
    let (mut acked, mut expired) = (0, 0);
    for round in 0..ROUNDS {
        let lease = leased_item(&coordinator, &queue, &keys, round, LEASE_MS).await;
        let ack = {
            let (coordinator, keys) = (coordinator.clone(), keys.clone());
            race_side(round, 0, async move {
                coordinator.ack(&keys, &lease.receipt).await
            })
        };
        let sweep = {
            let (store, keys) = (store.clone(), keys.clone());
            race_side(round, 1, async move {
                expire_leases(&store, &keys, lease.expires_at_ms, Some(5)).await
            })
        };
        let (ack, swept) = (ack.await.unwrap(), sweep.await.unwrap().unwrap());
        match ack {
            Ok(()) => {
                assert_eq!(swept.redelivered, 0, "round {round}: acked and redelivered");
                assert_eq!(holdings(&store, &keys).await, (0, 0), "round {round}");
                acked += 1;
            }
            Err(LeaseError::UnknownReceipt) => {
                assert_eq!(
                    swept.redelivered, 1,
                    "round {round}: refused and not redelivered"
                );
                assert_eq!(holdings(&store, &keys).await, (1, 0), "round {round}");
                let item = queue.pop().await.unwrap().unwrap();
                assert_eq!(item.deliveries, 1, "the expired delivery is counted");
                expired += 1;
            }
            Err(other) => panic!("round {round}: unexpected {other}"),
        }
    }
    let (_, conflicts, _) = store.counts();
    eprintln!(
        "ack vs expiry, {ROUNDS} rounds: ack won {acked}, expiry won {expired}, \
         {conflicts} commits lost a conflict and were retried"
    );
    assert!(acked > 0 && expired > 0, "both outcomes were exercised");
    assert!(conflicts > 0, "the two sides overlapped in some rounds");
    assert!(queue.is_empty().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extend_racing_expiry_has_exactly_one_winner() {
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    let coordinator = Coordinator::new(store.clone(), StagingConfig::default());
    let name = QueueName::new("race-extend").unwrap();
    let keys = QueueKeys::new(&name);
    let queue = Queue::new(store.clone(), name);
    let (mut extended, mut expired) = (0, 0);
    for round in 0..ROUNDS {
        let lease = leased_item(&coordinator, &queue, &keys, round, LEASE_MS).await;
        let extend = {
            let (coordinator, keys) = (coordinator.clone(), keys.clone());
            race_side(round, 0, async move {
                coordinator
                    .extend(&keys, &lease.receipt, 2 * LEASE_MS)
                    .await
            })
        };
        let sweep = {
            let (store, keys) = (store.clone(), keys.clone());
            race_side(round, 1, async move {
                expire_leases(&store, &keys, lease.expires_at_ms, Some(5)).await
            })
        };
        let (extend, swept) = (extend.await.unwrap(), sweep.await.unwrap().unwrap());
        match extend {
            Ok(expires_at_ms) => {
                assert!(expires_at_ms > lease.expires_at_ms);
                assert_eq!(
                    swept.redelivered, 0,
                    "round {round}: extended and redelivered"
                );
                assert_eq!(holdings(&store, &keys).await, (0, 1), "round {round}");
                // The extended lease is the one that acts now.
                coordinator.ack(&keys, &lease.receipt).await.unwrap();
                extended += 1;
            }
            Err(LeaseError::UnknownReceipt) => {
                assert_eq!(
                    swept.redelivered, 1,
                    "round {round}: refused and not redelivered"
                );
                assert_eq!(holdings(&store, &keys).await, (1, 0), "round {round}");
                queue.pop().await.unwrap().unwrap();
                expired += 1;
            }
            Err(other) => panic!("round {round}: unexpected {other}"),
        }
        assert_eq!(holdings(&store, &keys).await, (0, 0));
    }
    let (_, conflicts, _) = store.counts();
    eprintln!(
        "extend vs expiry, {ROUNDS} rounds: extend won {extended}, expiry won {expired}, \
         {conflicts} commits lost a conflict and were retried"
    );
    assert!(extended > 0 && expired > 0, "both outcomes were exercised");
    assert!(conflicts > 0, "the two sides overlapped in some rounds");
}
