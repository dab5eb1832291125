//! `hotq bench --url` against a real daemon on 127.0.0.1:0: a drain in
//! each pop mode (plain, long poll, leased with an ack per item, leased
//! long poll, and the recipe's direct pop) delivers exactly N distinct
//! items and leaves nothing queued or leased, with one worker and with
//! several, through a bearer token; the `sqs` mode (ReceiveMessage then
//! DeleteMessage) does the same against a daemon without a token, and is
//! refused with one; a drain that falls short exits 1; the command line
//! takes `--mode` and prints one JSON line per (mode, W).

use crate::common;

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
        coordinators: vec![1],
        stored_requests: false,
        cycles: 0,
        url: Some(url.to_string()),
        resp_addr: None,
        token: Some(TOKEN.to_string()),
        data_dir: None,
        backend: hotq::bench::BenchBackend::Embedded,
        fdb_cluster_file: None,
        durability: Durability::Sync,
        // Short: workers still waiting when the queue runs dry come back
        // empty after this.
        wait_ms: 200,
        // Generous: a few hundred pops take well under a second.
        deadline_s: 120,
        rate: 1_000,
        json: true,
        groups: 0,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_pop_mode_drains_exactly_n_distinct_items() {
    let daemon = Daemon::start(|config| config.token = Some(TOKEN.into())).await;
    let modes = [
        Mode::Plain,
        Mode::Longpoll,
        Mode::Leased,
        Mode::LeasedLongpoll,
        Mode::LeasedNext,
        Mode::Naive,
        Mode::Staged,
    ];
    for mode in modes {
        for workers in [1, 4] {
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
                (result.transport, result.mode, result.items, result.workers),
                ("http", mode, ITEMS, workers)
            );
            assert_eq!(
                (result.pops, result.lost, result.dup, result.left),
                (ITEMS, 0, 0, Some(0)),
                "{mode:?} W={workers}"
            );
            assert!(result.pops_per_s > 0.0, "{result:?}");
            assert!(result.p50_ms <= result.p99_ms, "{result:?}");
            if cfg!(target_os = "linux") {
                // The daemon runs in this process too, so only its presence
                // is checked, not its size.
                assert!(result.client_cpu_us_per_pop.is_some(), "{result:?}");
            }
        }
    }
    daemon.stop().await;
}

/// The RESP modes (`--resp-addr`, preloaded over `--url`), through the
/// token (`AUTH`): each drains exactly N distinct items.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_resp_mode_drains_exactly_n_distinct_items() {
    let daemon = Daemon::start_resp(|config| config.token = Some(TOKEN.into())).await;
    let modes = [
        Mode::Resp,
        Mode::RespLeased,
        Mode::RespLeasedNext,
        Mode::RespLpop,
    ];
    let resp_addr = daemon.resp.unwrap().to_string();
    for mode in modes {
        for workers in [1, 4] {
            let mut args = args(&daemon.url, vec![workers], vec![mode]);
            args.resp_addr = Some(resp_addr.clone());
            let result = hotq::bench::drain_resp(&daemon.url, &resp_addr, &args, mode, workers)
                .await
                .unwrap_or_else(|error| panic!("{mode:?} W={workers}: {error}"));
            assert!(result.exact, "{mode:?} W={workers}: {result:?}");
            assert_eq!(
                (
                    result.transport,
                    result.pops,
                    result.lost,
                    result.dup,
                    result.left
                ),
                ("resp", ITEMS, 0, 0, Some(0)),
                "{mode:?} W={workers}"
            );
        }
    }
    // Without --resp-addr, a resp mode is refused.
    let args = args(&daemon.url, vec![1], vec![Mode::Resp]);
    let refused = hotq::bench::run(args).await.unwrap_err();
    assert!(refused.contains("--resp-addr"), "{refused}");
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sqs_mode_drains_exactly_n_distinct_items() {
    // Unsigned SQS calls: the daemon has no token and no SQS credentials.
    let daemon = Daemon::start(|_| {}).await;
    for workers in [1, 4] {
        let mut sqs = args(&daemon.url, vec![workers], vec![Mode::Sqs]);
        sqs.token = None;
        let result = hotq::bench::drain_http(&daemon.url, &sqs, Mode::Sqs, workers)
            .await
            .unwrap_or_else(|error| panic!("sqs W={workers}: {error}"));
        assert!(result.exact, "sqs W={workers}: {result:?}");
        assert_eq!(
            (
                result.mode,
                result.pops,
                result.lost,
                result.dup,
                result.left
            ),
            (Mode::Sqs, ITEMS, 0, 0, Some(0)),
            "sqs W={workers}"
        );
    }
    // With a token the daemon would answer every unsigned call 403: the
    // bench says so before preloading anything.
    let signed = args(&daemon.url, vec![1], vec![Mode::Sqs]);
    let refused = hotq::bench::drain_http(&daemon.url, &signed, Mode::Sqs, 1)
        .await
        .unwrap_err();
    assert!(refused.contains("token"), "{refused}");
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_run_over_http_exits_zero() {
    let daemon = Daemon::start(|config| config.token = Some(TOKEN.into())).await;
    let code = hotq::bench::run(args(&daemon.url, vec![1, 4], vec![]))
        .await
        .unwrap();
    assert_eq!(code, 0, "a drain was not exact");
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_that_falls_short_exits_one() {
    let daemon = Daemon::start(|config| config.token = Some(TOKEN.into())).await;
    // No time to pop: every item is still queued at the end.
    let mut short = args(&daemon.url, vec![2], vec![Mode::Plain]);
    short.deadline_s = 0;
    let result = hotq::bench::drain_http(&daemon.url, &short, Mode::Plain, 2)
        .await
        .unwrap();
    assert!(!result.exact, "{result:?}");
    assert_eq!(
        (result.pops, result.lost, result.left),
        (0, ITEMS, Some(ITEMS as u64))
    );
    assert_eq!(hotq::bench::run(short).await.unwrap(), 1);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_prints_one_json_line_per_mode_and_worker_count() {
    let daemon = Daemon::start(|config| config.token = Some(TOKEN.into())).await;
    let url = daemon.url.clone();
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_hotq"))
            .args(["bench", "--url", &url, "--mode", "plain,leased"])
            .args([
                "--workers",
                "1,3",
                "--items",
                "100",
                "--deadline-s",
                "120",
                "--json",
            ])
            .env("HOTQ_TOKEN", TOKEN)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let cells: Vec<(String, u64)> = stdout
        .lines()
        .map(|line| {
            let cell: serde_json::Value = serde_json::from_str(line).unwrap();
            assert_eq!(cell["exact"], true, "{cell}");
            assert_eq!(
                (cell["lost"].as_u64(), cell["dup"].as_u64()),
                (Some(0), Some(0))
            );
            for field in ["pops_per_s", "p50_ms", "p99_ms", "client_cpu_us_per_pop"] {
                assert!(cell[field].is_number(), "{field} in {cell}");
            }
            (
                cell["mode"].as_str().unwrap().to_string(),
                cell["workers"].as_u64().unwrap(),
            )
        })
        .collect();
    let expected: Vec<(String, u64)> = ["plain", "leased"]
        .iter()
        .flat_map(|mode| [1, 3].map(|w| (mode.to_string(), w)))
        .collect();
    assert_eq!(cells, expected);
    daemon.stop().await;
}
