//! The built `hotq` binary as a child process, for tests that kill it.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A running `hotq serve` child.
pub struct Running {
    pub child: Child,
    pub url: String,
    /// Its Prometheus endpoint.
    pub metrics_url: String,
    /// Its RESP listener's address.
    pub resp: String,
}

/// The arguments of `hotq serve` on port 0 over `data_dir`.
pub fn serve_args(data_dir: &std::path::Path) -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> = [
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--metrics-listen",
        "127.0.0.1:0",
        "--resp-listen",
        "127.0.0.1:0",
        "--data-dir",
    ]
    .iter()
    .map(Into::into)
    .collect();
    args.push(data_dir.into());
    args
}

/// Starts `hotq serve` on port 0 and reads the bound address from its log.
pub fn start(data_dir: &std::path::Path) -> Running {
    let mut command = Command::new(env!("CARGO_BIN_EXE_hotq"));
    command.args(serve_args(data_dir));
    start_command(command)
}

/// Starts `command` (a `hotq serve` on port 0, perhaps behind a wrapper)
/// and reads the bound addresses from its log.
pub fn start_command(mut command: Command) -> Running {
    let mut child = command
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut metrics_url = String::new();
    let mut resp = String::new();
    loop {
        let Ok(line) = rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the daemon did not log its address within 60 s");
        };
        let Ok(log) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        let address = log["fields"]["address"].as_str().unwrap_or_default();
        if log["fields"]["message"] == "metrics exporter listening" {
            metrics_url = format!("http://{address}/metrics");
        }
        if log["fields"]["message"] == "RESP listening" {
            resp = address.to_string();
        }
        if log["fields"]["message"] == "API listening" {
            return Running {
                child,
                url: format!("http://{address}"),
                metrics_url,
                resp,
            };
        }
    }
}

pub fn terminate(mut running: Running) {
    let status = Command::new("kill")
        .args(["-TERM", &running.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = running.child.try_wait().unwrap() {
            assert!(
                status.success(),
                "the daemon exits 0 on SIGTERM, got {status}"
            );
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the daemon exits within 30 s of SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Kills the daemon with SIGKILL (no shutdown, no flush) and reaps it.
pub fn kill9(mut running: Running) {
    running.child.kill().unwrap();
    running.child.wait().unwrap();
}

/// Kills `running` with SIGKILL and starts a daemon again on `data_dir`
/// (both off the async runtime's threads).
pub async fn kill9_and_restart(running: Running, data_dir: &std::path::Path) -> Running {
    tokio::task::spawn_blocking(move || kill9(running))
        .await
        .unwrap();
    let path = data_dir.to_path_buf();
    tokio::task::spawn_blocking(move || start(&path))
        .await
        .unwrap()
}
