//! A purge or delete commits batch after batch. Run in its HTTP handler,
//! it stopped where its client hung up: the batches committed by then had
//! dropped items that no answer reported, and the queue was left half
//! deleted (issue #24: a client that gives up on a DELETE sees pushes
//! answered 201 and never seen again). Now it runs to its end, and the
//! daemon counts what it dropped in `hotq_dropped_items_total`.
//!
//! Runs alone (`common::alone`): it reads the process-global metrics.

use crate::common;
use crate::common::client::Client;
use crate::common::daemon::{Daemon, http, metric_sum};

use std::time::Duration;

const QUEUE: &str = "outlived";
const BATCHES: usize = 10;
const BATCH: usize = 1_000;
const EVENT_BOUND: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_whose_client_hangs_up_runs_to_its_end_and_is_counted() {
    if !common::alone::here(
        module_path!(),
        "a_delete_whose_client_hangs_up_runs_to_its_end_and_is_counted",
    )
    .await
    {
        return;
    }
    let daemon = Daemon::start(|_| {}).await;
    let client = Client::new(&daemon.url);
    let items: Vec<String> = (0..BATCH).map(|n| format!("item {n}")).collect();
    for _ in 0..BATCHES {
        client.push_batch(QUEUE, &items).await;
    }
    let pushed = (BATCHES * BATCH) as i64;

    // The client gives up once the delete has begun (its first batch is
    // gone), long before it can drop all 10 (and well inside the 5 s a
    // delete may take before it answers busy).
    let url = format!("{}/v1/queues/{QUEUE}", daemon.url);
    let delete = tokio::spawn(async move { http().delete(url).send().await });
    common::eventually("the delete began", EVENT_BOUND, || async {
        client.depth(QUEUE).await < pushed
    })
    .await;
    delete.abort();
    assert!(
        delete.await.unwrap_err().is_cancelled(),
        "the client hung up"
    );

    // The delete goes on without it, to the end, and is counted. Its end
    // hides the deleted queue's series, as a delete whose client waits
    // does; they come back, counting on, once the queue is used again.
    common::eventually("the queue is deleted", EVENT_BOUND, || async {
        client.depth(QUEUE).await == 0 && client.stats(QUEUE).await.leased == 0
    })
    .await;
    // Its series exist (at 0 from the queue's first push) until then.
    common::eventually(
        "the deleted queue leaves the exporter",
        EVENT_BOUND,
        || async {
            let text = http().get(&daemon.metrics_url).send().await.unwrap();
            !text
                .text()
                .await
                .unwrap()
                .contains(&format!("queue=\"{QUEUE}\""))
        },
    )
    .await;
    client.push(QUEUE, "again").await;
    common::eventually("what it dropped is counted", EVENT_BOUND, || async {
        let series = format!("queue=\"{QUEUE}\"");
        metric_sum(&daemon.metrics_url, "hotq_dropped_items_total", &[&series]).await
            == pushed as f64
    })
    .await;
    daemon.stop().await;
}
