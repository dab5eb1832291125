//! Results nobody collected go back to their queue in byte-bounded passes:
//! 150 results of 96 kB (14.4 MB) would not fit one 10 MB commit, and a
//! reaper that read them all in one pass failed every time, leaving the
//! items stranded in `results` for good.

use hotq::envelope::{ItemValue, ResultValue, encode_result, now_ms};
use hotq::keys::{QueueKeys, QueueName};
use hotq::queue::Queue;
use hotq::staging::reap::reap_queue;
use hotq::store::embedded::{EmbeddedConfig, EmbeddedStore};
use hotq::store::{Store, Transaction};

const RESULTS: usize = 150;
const PAYLOAD_BYTES: usize = 96 * 1024;
/// Results written per setup commit (well under the 10 MB limit).
const SETUP_BATCH: usize = 40;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uncollected_results_of_large_items_all_return_to_the_queue() {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedStore::open(EmbeddedConfig::new(dir.path())).unwrap();
    let name = QueueName::new("big").unwrap();
    let keys = QueueKeys::new(&name);
    let past_ms = now_ms() - 60_000;
    for first in (0..RESULTS).step_by(SETUP_BATCH) {
        let txn = store.begin().unwrap();
        for i in first..(first + SETUP_BATCH).min(RESULTS) {
            let random = (i as u128).to_be_bytes();
            let result = ResultValue {
                deadline_ms: past_ms,
                lease: None,
                item_key: keys.item(i as u64, &random),
                item: ItemValue::new(past_ms, vec![i as u8; PAYLOAD_BYTES]),
            };
            txn.set(
                &keys.result(&hotq::keys::RequesterId::from_bytes(random.to_vec())),
                &encode_result(&result),
            )
            .unwrap();
        }
        txn.commit().await.unwrap();
    }

    let reaped = reap_queue(&store, &keys, now_ms()).await.unwrap();

    assert_eq!(reaped.results, RESULTS, "every result went back");
    let queue = Queue::new(store.clone(), name);
    let mut seen = [false; RESULTS];
    while let Some(item) = queue.pop().await.unwrap() {
        let i = item.payload[0] as usize;
        assert_eq!(item.payload.len(), PAYLOAD_BYTES);
        assert!(!seen[i], "item {i} came back twice");
        seen[i] = true;
    }
    assert!(seen.iter().all(|&s| s), "every item is in the queue again");
}
