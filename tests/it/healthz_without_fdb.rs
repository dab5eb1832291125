//! A daemon whose FoundationDB cluster cannot be reached answers
//! `GET /healthz` with 503 at once: the client library waits for an
//! unreachable cluster without end, so a health check that waited on a
//! read would hang until the daemon gave up on its store. Needs only the
//! client library (`--features fdb`), no cluster: the cluster file names a
//! port nothing listens on.
#![cfg(feature = "fdb")]

use std::time::Duration;

use crate::common;

use common::daemon::{Daemon, http};
use hotq::store::fdb::FdbStore;
use hotq::store::resolving::Resolving;
use reqwest::StatusCode;

/// Far above the probe's bound (1 s), far below the wait it replaced
/// (until the daemon gives up on its store, here a minute).
const ANSWER_BOUND: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_answers_503_at_once_when_no_cluster_answers() {
    let dir = tempfile::tempdir().unwrap();
    let cluster_file = dir.path().join("fdb.cluster");
    // Port 1 on loopback: nothing listens, nothing ever answers.
    std::fs::write(&cluster_file, "hotqtest:unreachable@127.0.0.1:1\n").unwrap();
    let store = FdbStore::open(Some(cluster_file.to_str().unwrap()))
        .expect("opening does not contact the cluster");
    let daemon = Daemon::start_on(Resolving::new(store), |config| {
        // The daemon stays up: the 503 must come from /healthz, not its exit.
        config.store_failure_exit_ms = 60_000;
    })
    .await;
    for attempt in 0..2 {
        let response = http()
            .get(format!("{}/healthz", daemon.url))
            .timeout(ANSWER_BOUND)
            .send()
            .await
            .unwrap_or_else(|error| panic!("/healthz (attempt {attempt}) did not answer: {error}"));
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        let body: serde_json::Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], "store_unavailable", "{body}");
    }
    drop(daemon);
}
