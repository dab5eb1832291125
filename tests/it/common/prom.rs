//! Real Prometheus tools for tests: `promtool`, and a `prometheus` server
//! scraping a test daemon every second, on a free port with its storage
//! in a temporary directory, killed on drop.
//!
//! CI installs Debian's `prometheus` package (`.ci/run`). Where a tool is
//! missing a test says so loudly and returns, except under `CI=true`,
//! where a missing tool is a failure: CI must not pass by skipping.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

/// How long Prometheus may take to start, or to show an awaited sample.
pub const PROMETHEUS_BOUND: Duration = Duration::from_secs(90);

/// The tool `name` on `PATH`; `None` (after saying so) when absent outside
/// CI; a panic when absent under `CI=true`.
pub fn tool(name: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file())
    });
    if found.is_none() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{name} is not installed: CI must run the Prometheus checks (.ci/run installs \
             Debian's prometheus package)"
        );
        eprintln!(
            "SKIPPED: {name} is not installed (apt-get install prometheus); this test did not run"
        );
    }
    found
}

/// A running Prometheus.
pub struct Prometheus {
    child: Child,
    /// Its HTTP API, e.g. `http://127.0.0.1:40000`.
    pub url: String,
    _dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `text` percent-encoded for a query string.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (byte as char).to_string()
            }
            byte => format!("%{byte:02X}"),
        })
        .collect()
}

/// A port nothing listens on right now (Prometheus binds it a moment later).
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

impl Prometheus {
    /// Starts `binary` scraping `target` (`host:port`) every second as job
    /// `hotq`, evaluating `rules` every second; returns once it is ready.
    pub async fn start(binary: &Path, target: &str, rules: &Path) -> Prometheus {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
                 rule_files: [\"{}\"]\n\
                 scrape_configs:\n  - job_name: hotq\n    static_configs:\n      \
                 - targets: [\"{target}\"]\n",
                rules.display()
            ),
        )
        .unwrap();
        let port = free_port();
        let child = Command::new(binary)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--log.level=warn")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let prometheus = Prometheus {
            child,
            url: format!("http://127.0.0.1:{port}"),
            _dir: dir,
        };
        let client = super::daemon::http();
        let ready = format!("{}/-/ready", prometheus.url);
        super::eventually("Prometheus is ready", PROMETHEUS_BOUND, || async {
            client
                .get(&ready)
                .send()
                .await
                .is_ok_and(|response| response.status().is_success())
        })
        .await;
        prometheus
    }

    /// Evaluates `expr` now: the result vector, or Prometheus's error.
    pub async fn query(&self, expr: &str) -> Result<Vec<Value>, String> {
        let response = super::daemon::http()
            .get(format!("{}/api/v1/query?query={}", self.url, encode(expr)))
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let body: Value = response.json().await.map_err(|e| e.to_string())?;
        if body["status"] != "success" {
            return Err(format!("{}: {}", body["errorType"], body["error"]));
        }
        Ok(body["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default())
    }

    /// The single value of `expr` now, if it has exactly one sample.
    pub async fn value(&self, expr: &str) -> Option<f64> {
        let result = self.query(expr).await.ok()?;
        match result.as_slice() {
            [sample] => sample["value"][1].as_str()?.parse().ok(),
            _ => None,
        }
    }

    /// Every loaded alerting rule: (name, query, health, last error).
    pub async fn rules(&self) -> Vec<(String, String, String, String)> {
        let body: Value = super::daemon::http()
            .get(format!("{}/api/v1/rules", self.url))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
        body["data"]["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|group| group["rules"].as_array().cloned().unwrap_or_default())
            .map(|rule| {
                (
                    text(&rule["name"]),
                    text(&rule["query"]),
                    text(&rule["health"]),
                    text(&rule["lastError"]),
                )
            })
            .collect()
    }
}
