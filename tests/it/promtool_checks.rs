//! `promtool` on what hotq ships and serves (issue 17, part 4): a live
//! scrape of a real daemon after some traffic passes `promtool check
//! metrics` (format and naming lint: units, `_total` on counters, help
//! texts), and the alert rules pass `promtool check rules`.

use crate::common;

use std::io::Write;
use std::process::{Command, Stdio};

use common::daemon::{Daemon, http};

const RULES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/dashboards/alerts.yml");

#[test]
fn the_alert_rules_pass_promtool() {
    let Some(promtool) = common::prom::tool("promtool") else {
        return;
    };
    let output = Command::new(promtool)
        .args(["check", "rules", RULES])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout).to_string()
        + &String::from_utf8_lossy(&output.stderr);
    println!("{text}");
    assert!(output.status.success(), "promtool check rules: {text}");
    assert!(text.contains("SUCCESS"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_scrape_passes_promtool() {
    if !common::alone::here(module_path!(), "a_live_scrape_passes_promtool").await {
        return;
    }
    let Some(promtool) = common::prom::tool("promtool") else {
        return;
    };
    let daemon = Daemon::start(|_| {}).await;
    let client = http();
    // Traffic, so queue-labelled series, histograms with samples and an
    // error status are in the scrape too.
    for path in [
        "/v1/queues/jobs/items",
        "/v1/pqueues/jobs/items?priority=1",
        "/v1/queues/jobs/pop",
        "/v1/queues/bad%20name/items",
        "/nope",
    ] {
        let response = client
            .post(format!("{}{path}", daemon.url))
            .body("x")
            .send()
            .await
            .unwrap();
        assert!(
            response.status().as_u16() < 500,
            "{path}: {}",
            response.status()
        );
    }
    let scrape = client
        .get(&daemon.metrics_url)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    daemon.stop().await;
    for name in [
        "hotq_pushed_items_total{",
        "hotq_http_responses_total{",
        "process_cpu_seconds_total ",
        "hotq_build_info{",
    ] {
        assert!(scrape.contains(name), "{name} missing from the scrape");
    }
    let mut check = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    check
        .stdin
        .take()
        .unwrap()
        .write_all(scrape.as_bytes())
        .unwrap();
    let output = check.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout).to_string()
        + &String::from_utf8_lossy(&output.stderr);
    println!(
        "promtool check metrics on {} lines: {}",
        scrape.lines().count(),
        if text.trim().is_empty() {
            "clean"
        } else {
            text.trim()
        }
    );
    assert!(
        output.status.success() && text.trim().is_empty(),
        "promtool check metrics found problems:\n{text}"
    );
}
