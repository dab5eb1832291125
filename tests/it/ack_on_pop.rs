//! Acks riding on the next pop (`POST …/pop?ack=R1,R2,…`, issue #25):
//! an ack on a pop has exactly one winner against its lease's expiry, on
//! the direct path and in the line; each receipt's outcome comes back in
//! `hotq-acked` in order, on a 200 and on a 204; and 64 leased workers
//! whose acks ride on their staged pops lose and duplicate nothing and
//! leave no lease behind.

use crate::common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::client::Client;
use common::daemon::{Daemon, http};
use common::races::{leased_item, race_side};
use hotq::coordinator::Coordinator;
use hotq::envelope::End;
use hotq::keys::{QueueKeys, QueueName};
use hotq::lease::{LeaseError, Receipt};
use hotq::queue::Queue;
use hotq::staging::pop::PopAsk;
use hotq::staging::{StagingConfig, StagingStats};
use hotq::store::Read;
use hotq::store::embedded::{Durability, EmbeddedStore};
use reqwest::StatusCode;

const ROUNDS: usize = 200;
const LEASE_MS: u64 = 600_000;

/// (visible items, leases) of `keys`, from the counters.
async fn holdings(store: &EmbeddedStore, keys: &QueueKeys) -> (i64, i64) {
    use hotq::store::{Store, Transaction, decode_counter};
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
    (depth, leased)
}

/// Each round leases an item, then races a pop carrying its receipt (on
/// the direct path, or in the line with a fulfiller running)
/// (`lease_ms` 0: what it pops is deleted) against the timer's sweep
/// with a clock past the expiry. Exactly one wins: acked and never
/// redelivered, or refused and redelivered (the pop may then take the
/// returned item itself, with its delivery counted).
async fn ack_on_pop_races_expiry(staged: bool) {
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    // Without memory requests every pop tries the direct path first (a
    // conflicting one acks alone, then waits as a stored request, briefly).
    let config = StagingConfig {
        requests_in_memory: staged,
        lost_race_wait_ms: 100,
        ..StagingConfig::default()
    };
    let coordinator = Coordinator::new(store.clone(), config);
    let name = QueueName::new(if staged { "race-staged" } else { "race-direct" }).unwrap();
    let keys = QueueKeys::new(&name);
    let queue = Queue::new(store.clone(), name);
    let (mut acked, mut expired) = (0, 0);
    for round in 0..ROUNDS {
        if staged {
            // A running fulfiller makes every pop join the line.
            coordinator.ensure_fulfiller(&keys);
        }
        let lease = leased_item(&coordinator, &queue, &keys, round, LEASE_MS).await;
        let pop = {
            let (coordinator, keys) = (coordinator.clone(), keys.clone());
            race_side(round, 0, async move {
                let ask = PopAsk {
                    end: End::Front,
                    max: 1,
                    wait: Duration::ZERO,
                    lease_ms: None,
                };
                coordinator
                    .pop_acking(&keys, ask, vec![lease.receipt])
                    .await
            })
        };
        let sweep = {
            let store = store.clone();
            race_side(round, 1, async move {
                let policy = hotq::lease::DeliveryPolicy::default();
                hotq::due::sweep(&store, &policy, lease.expires_at_ms).await
            })
        };
        let popped = pop.await.unwrap().unwrap();
        let redelivered: usize = sweep.await.unwrap().unwrap().redelivered.values().sum();
        match popped.acked.as_slice() {
            [Ok(())] => {
                assert_eq!(redelivered, 0, "round {round}: acked and redelivered");
                assert!(
                    popped.items.is_empty(),
                    "round {round}: nothing else queued"
                );
                acked += 1;
            }
            [Err(LeaseError::UnknownReceipt | LeaseError::Expired { .. })] => {
                assert_eq!(redelivered, 1, "round {round}: refused, not redelivered");
                if popped.items.is_empty() {
                    let item = queue.pop().await.unwrap().expect("the item came back");
                    assert_eq!(item.deliveries, 1, "the expired delivery is counted");
                } else {
                    assert_eq!(popped.items[0].deliveries, 1);
                }
                expired += 1;
            }
            other => panic!("round {round}: unexpected {other:?}"),
        }
        assert_eq!(holdings(&store, &keys).await, (0, 0), "round {round}");
    }
    let in_rounds = StagingStats::get(&coordinator.stats().acks_on_pops);
    eprintln!(
        "ack on pop (staged: {staged}) vs expiry: ack won {acked} ({in_rounds} in fulfill rounds), \
         expiry won {expired}"
    );
    if staged {
        assert!(in_rounds > 0, "acks rode into fulfill rounds");
    } else {
        assert_eq!(
            in_rounds, 0,
            "every ack took the direct path or its own commit"
        );
    }
    assert!(acked > 0 && expired > 0, "both outcomes were exercised");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ack_on_a_direct_pop_racing_expiry_has_exactly_one_winner() {
    ack_on_pop_races_expiry(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ack_on_a_pop_in_line_racing_expiry_has_exactly_one_winner() {
    ack_on_pop_races_expiry(true).await;
}

/// A mix of a good receipt, an unknown one, an expired one, one of another
/// queue and a malformed one gets its outcomes in order, with the pop's
/// answer: a 200 with the next item, then a 204 with the queue empty.
/// Past 1,000 receipts the pop is refused and acks nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outcomes_come_back_in_order_on_a_200_and_on_a_204() {
    let daemon = Daemon::start(|_| {}).await;
    let (client, url) = (http(), daemon.url.clone());
    let api = Client::new(&url);
    for n in 0..5 {
        api.push("mix", format!("item-{n}")).await;
    }
    api.push("other", "x").await;
    let receipt = |queue: &'static str| {
        let api = api.clone();
        async move { api.pop_leased(queue, 60_000).await.unwrap().receipt }
    };
    let foreign = receipt("other").await;
    let good = [receipt("mix").await, receipt("mix").await];
    // A lease of 1 ms is past its expiry at once; the timer may or may not
    // have returned it yet, so either word is right for it.
    let expiring = {
        let response = client
            .post(format!("{url}/v1/queues/mix/pop?lease_ms=1"))
            .send()
            .await
            .unwrap();
        response.headers()["hotq-receipt"]
            .to_str()
            .unwrap()
            .to_string()
    };
    tokio::time::sleep(Duration::from_millis(5)).await;
    let unknown =
        Receipt::for_lease(&QueueKeys::new(&QueueName::new("mix").unwrap()), 1).to_string();
    let pop = |acks: Vec<&str>, wait: bool| {
        let (client, url) = (client.clone(), url.clone());
        let acks = acks.join(",");
        async move {
            let wait = if wait { "&wait_ms=50" } else { "" };
            client
                .post(format!(
                    "{url}/v1/queues/mix/pop?lease_ms=60000&ack={acks}{wait}"
                ))
                .send()
                .await
                .unwrap()
        }
    };
    let words = |response: &reqwest::Response| -> Vec<String> {
        let header = response.headers()["hotq-acked"].to_str().unwrap();
        header.split(',').map(str::to_string).collect()
    };
    let response = pop(
        vec![&good[0], &unknown, &expiring, &foreign, "not-a-receipt"],
        false,
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK, "the pop is served");
    let words_200 = words(&response);
    assert_eq!(words_200[..2], ["acked", "unknown_receipt"]);
    assert!(
        ["lease_expired", "unknown_receipt"].contains(&words_200[2].as_str()),
        "{words_200:?}"
    );
    assert_eq!(words_200[3..], ["receipt_queue_mismatch", "invalid"]);
    let next = response.headers()["hotq-receipt"]
        .to_str()
        .unwrap()
        .to_string();
    // The expired lease goes back once the timer has swept it (only
    // `next` and `good[1]` are leased then); drain what it returned.
    common::eventually(
        "the expired lease to be swept",
        Duration::from_secs(30),
        || {
            let api = api.clone();
            async move { api.stats("mix").await.leased == 2 }
        },
    )
    .await;
    while client
        .post(format!("{url}/v1/queues/mix/pop"))
        .send()
        .await
        .unwrap()
        .status()
        == StatusCode::OK
    {}
    let response = pop(vec![&next, &good[0], "", &good[1], &foreign], true).await;
    assert_eq!(response.status(), StatusCode::NO_CONTENT);
    assert_eq!(
        words(&response),
        [
            "acked",
            "unknown_receipt",
            "invalid",
            "acked",
            "receipt_queue_mismatch"
        ],
        "the second ack of a receipt finds it gone"
    );
    let too_many = vec![unknown.as_str(); 1_001];
    assert_eq!(pop(too_many, false).await.status(), StatusCode::BAD_REQUEST);
    let stats = api.stats("mix").await;
    assert_eq!((stats.depth, stats.leased), (0, 0), "{stats}");
    daemon.stop().await;
}

const WORKERS: usize = 64;
const ITEMS: usize = 3_000;

/// One worker: pops with a lease and the previous item's receipt riding
/// on the pop, until every item is delivered; its last ack rides on a
/// final empty pop.
async fn worker(url: String, log: Arc<Mutex<HashMap<String, u32>>>) {
    let client = http();
    let mut carried: Option<String> = None;
    loop {
        let ack = carried
            .take()
            .map(|r| format!("&ack={r}"))
            .unwrap_or_default();
        let response = client
            .post(format!(
                "{url}/v1/queues/many/pop?lease_ms=60000&wait_ms=100{ack}"
            ))
            .send()
            .await
            .unwrap();
        if !ack.is_empty() {
            assert_eq!(response.headers()["hotq-acked"], "acked");
        }
        if response.status() == StatusCode::NO_CONTENT {
            if log.lock().unwrap().len() >= ITEMS {
                return;
            }
            continue;
        }
        assert_eq!(response.status(), StatusCode::OK);
        carried = Some(
            response.headers()["hotq-receipt"]
                .to_str()
                .unwrap()
                .to_string(),
        );
        let body = response.text().await.unwrap();
        *log.lock().unwrap().entry(body).or_default() += 1;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_workers_with_acks_on_their_pops_lose_and_duplicate_nothing() {
    if !common::alone::here(
        module_path!(),
        "sixty_four_workers_with_acks_on_their_pops_lose_and_duplicate_nothing",
    )
    .await
    {
        return;
    }
    let daemon = Daemon::start(|_| {}).await;
    let client = http();
    for chunk in (0..ITEMS).collect::<Vec<_>>().chunks(500) {
        use base64::Engine;
        let encoded: Vec<String> = chunk
            .iter()
            .map(|n| base64::engine::general_purpose::STANDARD.encode(format!("item-{n}")))
            .collect();
        let response = client
            .post(format!("{}/v1/queues/many/items:batch", daemon.url))
            .json(&encoded)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::CREATED);
    }
    let log = Arc::new(Mutex::new(HashMap::new()));
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| tokio::spawn(worker(daemon.url.clone(), log.clone())))
        .collect();
    for worker in workers {
        worker.await.unwrap();
    }
    let log = log.lock().unwrap().clone();
    assert_eq!(log.len(), ITEMS, "every item delivered");
    assert!(log.values().all(|&n| n == 1), "no item delivered twice");
    let stats = Client::new(&daemon.url).stats("many").await;
    assert_eq!(stats.depth, 0, "{stats}");
    assert_eq!(stats.leased, 0, "no lease left: {stats}");
    let staged = common::daemon::staged_pops(&daemon.metrics_url).await;
    assert!(staged > 0.0, "some pops were served in line");
    daemon.stop().await;
}

/// A leased pop of `max=5` carrying the previous five receipts: each
/// answer holds the next five items (JSON) and five `acked`, until the
/// queue is empty and the last five ride on a 204.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pop_of_many_carries_the_receipts_of_the_previous_batch() {
    let daemon = Daemon::start(|_| {}).await;
    let (client, url) = (http(), daemon.url.clone());
    let api = Client::new(&url);
    for n in 0..15 {
        api.push("batches", format!("item-{n}")).await;
    }
    let mut carried: Vec<String> = Vec::new();
    let mut delivered = 0;
    loop {
        let ack = carried.join(",");
        let response = client
            .post(format!(
                "{url}/v1/queues/batches/pop?lease_ms=60000&max=5&ack={ack}"
            ))
            .send()
            .await
            .unwrap();
        let words = response.headers()["hotq-acked"]
            .to_str()
            .unwrap()
            .to_string();
        let expected = vec!["acked"; carried.len()].join(",");
        assert_eq!(words, expected, "every receipt of the previous batch acked");
        if response.status() == StatusCode::NO_CONTENT {
            break;
        }
        let items: Vec<serde_json::Value> = response.json().await.unwrap();
        assert_eq!(items.len(), 5);
        delivered += items.len();
        carried = items
            .iter()
            .map(|item| item["receipt"].as_str().unwrap().to_string())
            .collect();
    }
    assert_eq!(delivered, 15);
    let stats = api.stats("batches").await;
    assert_eq!((stats.depth, stats.leased), (0, 0), "{stats}");
    daemon.stop().await;
}
