//! `hotq bench --url` against a real daemon on 127.0.0.1:0: the HTTP drain
//! (its lean keep-alive client) delivers exactly N distinct items, staged
//! and naive, with one worker and with several, through a bearer token.

mod common;

use common::daemon::Daemon;
use hotq::bench::{BenchArgs, Mode, Scenario};
use hotq::store::embedded::Durability;

const ITEMS: usize = 300;
const TOKEN: &str = "bench-secret";

fn args(url: &str, workers: Vec<usize>, modes: Vec<Mode>) -> BenchArgs {
    BenchArgs {
        scenario: Scenario::Drain,
        items: ITEMS,
        payload_bytes: 100,
        workers,
        modes,
        cycles: 0,
        url: Some(url.to_string()),
        token: Some(TOKEN.to_string()),
        data_dir: None,
        durability: Durability::Sync,
        // Short: workers still waiting when the queue runs dry come back
        // empty after this.
        wait_ms: 200,
        // Generous: a few hundred pops take well under a second.
        deadline_s: 120,
        json: true,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_drains_deliver_exactly_n_distinct_items() {
    let daemon = Daemon::start(|config| config.token = Some(TOKEN.into())).await;
    for workers in [1, 4] {
        for mode in [Mode::Staged, Mode::Naive] {
            let result = hotq::bench::drain_http(
                &daemon.url,
                &args(&daemon.url, vec![workers], vec![mode]),
                mode,
                workers,
            )
            .await
            .unwrap_or_else(|error| panic!("{mode:?} W={workers}: {error}"));
            assert!(result.exact, "{mode:?} W={workers}: {result:?}");
            assert_eq!(
                (result.transport, result.items, result.workers),
                ("http", ITEMS, workers)
            );
            assert!(result.pops_per_s > 0.0, "{result:?}");
            if cfg!(target_os = "linux") {
                // The daemon runs in this process too, so only its presence
                // is checked, not its size.
                assert!(result.client_cpu_us_per_pop.is_some(), "{result:?}");
            }
        }
    }
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_run_over_http_exits_zero() {
    let daemon = Daemon::start(|config| config.token = Some(TOKEN.into())).await;
    let code = hotq::bench::run(args(
        &daemon.url,
        vec![1, 4],
        vec![Mode::Staged, Mode::Naive],
    ))
    .await
    .unwrap();
    assert_eq!(code, 0, "a drain was not exact");
    daemon.stop().await;
}
