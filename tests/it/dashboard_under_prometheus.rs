//! Every expression of the shipped dashboard and alert rules, evaluated by
//! a real Prometheus scraping a real daemon after a mixed load (issue 17,
//! parts 4 and 5): no expression may fail, and none may be empty, since
//! after this load each has data to show.
//!
//! The load: pushes (single, batch, priority), plain and leased pops, acks,
//! a nack that dead-letters, long polls that time out, long polls served
//! in line, and client errors (bad name, unknown route and method, unknown
//! receipt). Prometheus scrapes every second; the test waits on events
//! (Prometheus holding the load's final counts, the dead-letter queue's
//! sampled depth, enough samples for rates), each bounded.
//!
//! Prints the table expression → ok / empty / error.

use crate::common;

use std::path::Path;

use common::daemon::{Daemon, http};
use common::prom::{PROMETHEUS_BOUND, Prometheus};
use reqwest::StatusCode;
use serde_json::Value;

const DASHBOARD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/dashboards/hotq.json");
const RULES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/dashboards/alerts.yml");
/// What `$__rate_interval` stands for: 15 scrapes at 1 s.
const RATE_INTERVAL: &str = "15s";
/// Pushes of the load, to know when Prometheus has scraped all of it.
const LONG_POLLS_SERVED: usize = 4;

async fn call(method: reqwest::Method, url: String) -> reqwest::Response {
    http()
        .request(method, url)
        .body("item")
        .send()
        .await
        .unwrap()
}

/// One leased pop held back by `leases_max` (the queue's one place is
/// taken): it answers empty, never an error; returns the items pushed.
async fn throttled_pop(url: &str) -> usize {
    use reqwest::Method;
    let settings = http()
        .put(format!("{url}/v1/queues/limited/settings"))
        .json(&serde_json::json!({"leases_max": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(settings.status(), StatusCode::OK);
    for _ in 0..2 {
        let push = call(Method::POST, format!("{url}/v1/queues/limited/items")).await;
        assert_eq!(push.status(), StatusCode::CREATED);
    }
    let leased = format!("{url}/v1/queues/limited/pop?lease_ms=60000");
    assert_eq!(
        call(Method::POST, leased.clone()).await.status(),
        StatusCode::OK
    );
    assert_eq!(
        call(Method::POST, leased).await.status(),
        StatusCode::NO_CONTENT
    );
    2
}

/// Drives the daemon through every path the dashboard shows; returns the
/// items pushed.
async fn mixed_load(url: &str, prometheus: &Prometheus) -> usize {
    use reqwest::Method;
    let mut pushed = 0;
    for n in 0..20 {
        let response = call(Method::POST, format!("{url}/v1/queues/jobs/items")).await;
        assert_eq!(response.status(), StatusCode::CREATED, "push {n}");
        pushed += 1;
    }
    let batch = http()
        .post(format!("{url}/v1/queues/jobs/items:batch"))
        .json(&["YQ==", "Yg==", "Yw=="])
        .send()
        .await
        .unwrap();
    assert_eq!(batch.status(), StatusCode::CREATED);
    pushed += 3;
    for priority in 0..5 {
        let path = format!("{url}/v1/pqueues/jobs/items?priority={priority}");
        assert_eq!(call(Method::POST, path).await.status(), StatusCode::CREATED);
        pushed += 1;
    }
    for _ in 0..5 {
        let pop = call(Method::POST, format!("{url}/v1/queues/jobs/pop")).await;
        assert_eq!(pop.status(), StatusCode::OK);
        let pq = call(Method::POST, format!("{url}/v1/pqueues/jobs/pop?end=max")).await;
        assert_eq!(pq.status(), StatusCode::OK);
    }
    // Leased pops, acked.
    for _ in 0..3 {
        let pop = call(
            Method::POST,
            format!("{url}/v1/queues/jobs/pop?lease_ms=30000"),
        )
        .await;
        assert_eq!(pop.status(), StatusCode::OK);
        let receipt = pop.headers()["hotq-receipt"].to_str().unwrap().to_string();
        let ack = call(Method::POST, format!("{url}/v1/queues/jobs/ack/{receipt}")).await;
        assert_eq!(ack.status(), StatusCode::NO_CONTENT);
    }
    // A nack on the last delivery (max_deliveries = 1 for "mail")
    // dead-letters, once Prometheus has seen the queue's counter at 0 (it
    // exists from the queue's first use): then the growth alert can fire.
    assert_eq!(
        call(Method::POST, format!("{url}/v1/queues/mail/items"))
            .await
            .status(),
        StatusCode::CREATED
    );
    pushed += 1;
    let seen = "hotq_dead_lettered_total{queue=\"mail\"}";
    common::eventually(
        "Prometheus scrapes mail's dead-letter counter at 0",
        PROMETHEUS_BOUND,
        || async { prometheus.value(seen).await == Some(0.0) },
    )
    .await;
    let pop = call(
        Method::POST,
        format!("{url}/v1/queues/mail/pop?lease_ms=30000"),
    )
    .await;
    assert_eq!(pop.status(), StatusCode::OK);
    let receipt = pop.headers()["hotq-receipt"].to_str().unwrap().to_string();
    let nack = call(Method::POST, format!("{url}/v1/queues/mail/nack/{receipt}")).await;
    assert!(nack.status().is_success(), "nack: {}", nack.status());
    // A pop a limit holds back (leases_max = 1, one lease out): empty,
    // counted as throttled.
    pushed += throttled_pop(url).await;
    // Long polls that time out on an empty queue.
    for _ in 0..3 {
        let poll = call(
            Method::POST,
            format!("{url}/v1/queues/idle/pop?wait_ms=200"),
        )
        .await;
        assert_eq!(poll.status(), StatusCode::NO_CONTENT);
    }
    // Long polls served in line by one push batch: staged pops, a
    // fulfillment batch, time waited on an empty queue.
    let polls: Vec<_> = (0..LONG_POLLS_SERVED)
        .map(|_| {
            tokio::spawn(call(
                Method::POST,
                format!("{url}/v1/queues/staged/pop?wait_ms=60000"),
            ))
        })
        .collect();
    let client = http();
    common::eventually("the long polls wait in line", PROMETHEUS_BOUND, || async {
        let stats: Value = client
            .get(format!("{url}/v1/queues/staged"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        stats["waiting"].as_u64() == Some(LONG_POLLS_SERVED as u64)
    })
    .await;
    let items: Vec<&str> = vec!["YQ=="; LONG_POLLS_SERVED];
    let batch = client
        .post(format!("{url}/v1/queues/staged/items:batch"))
        .json(&items)
        .send()
        .await
        .unwrap();
    assert_eq!(batch.status(), StatusCode::CREATED);
    pushed += LONG_POLLS_SERVED;
    for poll in polls {
        assert_eq!(poll.await.unwrap().status(), StatusCode::OK);
    }
    // Client errors: bad name, unknown route, wrong method, unknown receipt.
    let bad = call(Method::POST, format!("{url}/v1/queues/bad%20name/items")).await;
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    assert_eq!(
        call(Method::GET, format!("{url}/nope")).await.status(),
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        call(Method::DELETE, format!("{url}/v1/queues/jobs/items"))
            .await
            .status(),
        StatusCode::METHOD_NOT_ALLOWED
    );
    let late = call(Method::POST, format!("{url}/v1/queues/jobs/ack/nope")).await;
    assert!(
        late.status().is_client_error(),
        "late ack: {}",
        late.status()
    );
    pushed
}

/// The dashboard's expressions (panel targets, then variable queries as
/// `count by (label) (metric)`), with Grafana's variables substituted.
fn dashboard_expressions(instance: &str) -> Vec<String> {
    let dashboard: Value =
        serde_json::from_str(&std::fs::read_to_string(DASHBOARD).unwrap()).unwrap();
    fn walk(panels: &Value, out: &mut Vec<String>) {
        for panel in panels.as_array().into_iter().flatten() {
            for target in panel["targets"].as_array().into_iter().flatten() {
                out.extend(target["expr"].as_str().map(str::to_string));
            }
            walk(&panel["panels"], out);
        }
    }
    let mut expressions = Vec::new();
    walk(&dashboard["panels"], &mut expressions);
    for variable in dashboard["templating"]["list"].as_array().unwrap() {
        let query = variable["query"]["query"].as_str().unwrap_or_default();
        if let Some(inner) = query
            .strip_prefix("label_values(")
            .and_then(|q| q.strip_suffix(')'))
            && let Some((metric, label)) = inner.rsplit_once(',')
        {
            expressions.push(format!("count by ({}) ({metric})", label.trim()));
        }
    }
    expressions
        .into_iter()
        .map(|expr| {
            expr.replace("$__rate_interval", RATE_INTERVAL)
                .replace("$instance", instance)
                .replace("$queue", ".*")
        })
        .collect()
}

/// An alert rule's expression without its threshold: what must have data
/// (the rule itself is rightly empty while nothing is wrong).
fn without_threshold(expr: &str) -> String {
    for comparison in [" > ", " == ", " < "] {
        if let Some((left, _)) = expr.rsplit_once(comparison) {
            return left.trim().to_string();
        }
    }
    expr.trim().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_dashboard_and_alert_expression_evaluates_with_data() {
    if !common::alone::here(
        module_path!(),
        "every_dashboard_and_alert_expression_evaluates_with_data",
    )
    .await
    {
        return;
    }
    let Some(binary) = common::prom::tool("prometheus") else {
        return;
    };
    let daemon = Daemon::start(|config| {
        config.metrics_sample_interval_ms = 200;
        config.leases.queues.insert(
            "mail".into(),
            hotq::config::QueueLeaseSection { max_deliveries: 1 },
        );
    })
    .await;
    let target = daemon
        .metrics_url
        .trim_start_matches("http://")
        .trim_end_matches("/metrics")
        .to_string();
    let prometheus = Prometheus::start(&binary, &target, Path::new(RULES)).await;
    let pushed = mixed_load(&daemon.url, &prometheus).await;

    // Prometheus holds the whole load, the sampled dead-letter depth, and
    // enough samples since for every rate window.
    let waits = [
        (
            "sum(hotq_pushed_items_total{job=\"hotq\"})".to_string(),
            pushed as f64,
        ),
        (
            "sum(hotq_queue_depth{queue=\"mail.dead\"})".to_string(),
            1.0,
        ),
        (
            format!("count_over_time(up{{job=\"hotq\"}}[{RATE_INTERVAL}]) >= 5"),
            0.0,
        ),
    ];
    for (expr, wanted) in &waits {
        common::eventually(&format!("Prometheus: {expr}"), PROMETHEUS_BOUND, || async {
            match prometheus.value(expr).await {
                // A threshold query's value is the sample itself.
                Some(_) if expr.contains(">=") => true,
                Some(value) => value == *wanted,
                None => false,
            }
        })
        .await;
    }

    let mut table: Vec<(String, &'static str, String)> = Vec::new();
    for expr in dashboard_expressions(&target) {
        let (outcome, detail) = match prometheus.query(&expr).await {
            Ok(result) if result.is_empty() => ("empty", String::new()),
            Ok(result) => ("ok", format!("{} series", result.len())),
            Err(error) => ("error", error),
        };
        table.push((expr, outcome, detail));
    }
    let rules = prometheus.rules().await;
    assert_eq!(rules.len(), 7, "every rule of {RULES} loaded: {rules:?}");
    for (name, query, health, last_error) in &rules {
        let label = format!("alert {name}: {query}");
        let (outcome, detail) = match prometheus.query(query).await {
            Err(error) => ("error", error),
            _ if health == "err" => ("error", last_error.clone()),
            Ok(firing) => match prometheus.query(&without_threshold(query)).await {
                Ok(data) if data.is_empty() => ("empty", "no data below the threshold".into()),
                Ok(data) => (
                    "ok",
                    format!("{} series, {} over the threshold", data.len(), firing.len()),
                ),
                Err(error) => ("error", error),
            },
        };
        table.push((label, outcome, detail));
    }

    // The dead letter of the load is what the growth alert is for.
    let growth = rules
        .iter()
        .find(|(name, ..)| name == "HotqDeadLettersGrowing")
        .map(|(_, query, ..)| query.clone())
        .unwrap();
    let firing = prometheus.query(&growth).await.unwrap();
    assert!(
        firing
            .iter()
            .any(|sample| sample["metric"]["queue"] == "mail"),
        "HotqDeadLettersGrowing fires for mail after its dead letter: {firing:?}"
    );

    println!("\n| expression | result | detail |\n| --- | --- | --- |");
    for (expr, outcome, detail) in &table {
        println!(
            "| `{}` | {outcome} | {detail} |",
            expr.replace('\n', " ").replace('|', "\\|")
        );
    }
    let ok = table
        .iter()
        .filter(|(_, outcome, _)| *outcome == "ok")
        .count();
    println!("\n{ok} of {} expressions ok", table.len());
    let bad: Vec<_> = table
        .iter()
        .filter(|(_, outcome, _)| *outcome != "ok")
        .collect();
    assert!(
        bad.is_empty(),
        "expressions without data or failing: {bad:#?}"
    );
    drop(prometheus);
    daemon.stop().await;
}
