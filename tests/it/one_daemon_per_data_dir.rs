//! One daemon per data directory: a second `hotq serve` on a directory a
//! running daemon holds exits 1 with one line on stderr naming the
//! directory and the process holding it, and the first keeps serving.

use crate::common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::daemon::http;
use common::process::{serve_args, start, terminate};
use reqwest::StatusCode;

/// Runs `hotq serve` on `data_dir` to its exit (killed, and the test
/// failed, if it is still running after 60 s): its exit code and stderr.
fn serve_to_exit(data_dir: &std::path::Path) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_hotq"))
        .args(serve_args(data_dir))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("a second daemon on one data directory did not exit within 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (output.status.code(), stderr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_daemon_on_one_data_dir_says_which_process_holds_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    let first = tokio::task::spawn_blocking(move || start(&path))
        .await
        .unwrap();
    let path = dir.path().to_path_buf();
    let (code, stderr) = tokio::task::spawn_blocking(move || serve_to_exit(&path))
        .await
        .unwrap();
    assert_eq!(code, Some(1), "{stderr}");
    // The daemon's own log lines are JSON; the refusal is the one line
    // that is not.
    let refusals: Vec<&str> = stderr
        .lines()
        .filter(|line| serde_json::from_str::<serde_json::Value>(line).is_err())
        .collect();
    let [refusal] = refusals[..] else {
        panic!("one line of refusal, not {refusals:?}");
    };
    let expected = format!(
        "hotq: cannot open the store: data directory {} is in use by process {} (",
        dir.path().display(),
        first.child.id()
    );
    assert!(refusal.starts_with(&expected), "{refusal}");
    assert!(
        refusal.contains(" serve "),
        "names the holder's command: {refusal}"
    );
    assert!(
        refusal.ends_with(
            "one daemon per data directory (stop that one, or give this one another data_dir)"
        ),
        "{refusal}"
    );

    let health = http()
        .get(format!("{}/healthz", first.url))
        .send()
        .await
        .unwrap();
    assert_eq!(
        health.status(),
        StatusCode::OK,
        "the first daemon serves on"
    );
    tokio::task::spawn_blocking(move || terminate(first))
        .await
        .unwrap();
}
