//! `hotq bench --backend fdb`: the in-process drain, the recipe's naive pop
//! and hotq's staged pop, on a FoundationDB cluster behind the marker
//! adapter as the daemon runs it. Each drain must deliver exactly its N
//! items and count its conflicts. Runs with `--features fdb` and
//! `FDB_CLUSTER_FILE`; says plainly that it skipped otherwise.
#![cfg(feature = "fdb")]

use crate::common;

use hotq::bench::{BenchArgs, BenchBackend, Mode, Scenario, drain_in_process};
use hotq::store::embedded::Durability;

const ITEMS: usize = 200;

fn args() -> BenchArgs {
    BenchArgs {
        scenario: Scenario::Drain,
        items: ITEMS,
        payload_bytes: 100,
        workers: vec![1, 8],
        modes: vec![Mode::Naive, Mode::Staged],
        coordinators: vec![1],
        stored_requests: false,
        cycles: 0,
        url: None,
        resp_addr: None,
        token: None,
        data_dir: None,
        backend: BenchBackend::Fdb,
        fdb_cluster_file: None,
        durability: Durability::Sync,
        // Short: workers still waiting when the queue runs dry come back
        // empty after this.
        wait_ms: 200,
        deadline_s: 120,
        rate: 1_000,
        json: true,
        groups: 0,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn naive_and_staged_drains_deliver_exactly_n_on_fdb() {
    let Some(store) = common::backend::fdb() else {
        return;
    };
    let args = args();
    for mode in [Mode::Naive, Mode::Staged] {
        for workers in [1, 8] {
            let result = drain_in_process(&store, &args, mode, workers)
                .await
                .unwrap();
            assert!(result.exact, "{mode:?} × {workers}: {result:?}");
            assert_eq!(result.transport, "inproc-fdb");
            assert!(result.conflicts_per_pop.is_some(), "conflicts are counted");
        }
    }
}
