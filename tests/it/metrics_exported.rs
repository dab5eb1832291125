//! The Prometheus exporter of a real daemon: contention shows in the
//! scrape, and every series the Grafana dashboard queries is exported.
//!
//! The metrics recorder is process-global, so the tests that drive a
//! daemon run alone in a process (`common::alone`) and compare counters
//! without a queue label against a scrape taken before their load.

use crate::common;

use std::collections::{BTreeSet, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::client::Client;
use common::daemon::{Daemon, http};
use common::exposition::{
    HISTOGRAM_SUFFIXES, Sample, exported, parse, parse_line, scrape, total, value,
};
use hotq::envelope::{RequestValue, now_ms};
use hotq::keys::{QueueKeys, QueueName};
use hotq::metrics;
use reqwest::StatusCode;
use serde_json::Value;

/// Generous bound for anything the daemon does on its own (sampler, reaper).
const EVENT_BOUND: Duration = Duration::from_secs(60);

const DASHBOARD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/dashboards/hotq.json");

/// Every metric name src/metrics.rs defines.
const DEFINED: &[&str] = &[
    metrics::OPERATIONS,
    metrics::CONFLICTS,
    metrics::POPS,
    metrics::POPS_THROTTLED,
    metrics::REQUESTS_WAITING,
    metrics::FULFILL_BATCH_SIZE,
    metrics::POP_LATENCY,
    metrics::ITEM_WAIT,
    metrics::QUEUE_DEPTH,
    metrics::OLDEST_ITEM_AGE,
    metrics::QUEUE_DEAD_LETTER,
    metrics::REQUESTS_EXPIRED,
    metrics::RESULTS_REAPED,
    metrics::STORE_COMMIT_LATENCY,
    metrics::STORE_COMMIT_GROUP_SIZE,
    metrics::FSYNC_SECONDS,
    metrics::LEASED_ITEMS,
    metrics::DELAYED_ITEMS,
    metrics::QUEUE_PAUSED,
    metrics::ACKS,
    metrics::NACKS,
    metrics::REDELIVERIES,
    metrics::DEAD_LETTERED,
    metrics::PUSHED,
    metrics::POP_EMPTY_WAIT,
    metrics::HTTP_RESPONSES,
    metrics::BUILD_INFO,
    metrics::STORE_UNAVAILABLE,
    metrics::SQS_REQUESTS,
    // Rendered from /proc/self by src/metrics/process.rs.
    "process_cpu_seconds_total",
    "process_resident_memory_bytes",
];

/// The metrics labelled by queue (the others have no `queue` label).
const QUEUE_LABELLED: &[&str] = &[
    metrics::OPERATIONS,
    metrics::PUSHED,
    metrics::POPS,
    metrics::POPS_THROTTLED,
    metrics::REQUESTS_WAITING,
    metrics::QUEUE_DEPTH,
    metrics::OLDEST_ITEM_AGE,
    metrics::REQUESTS_EXPIRED,
    metrics::RESULTS_REAPED,
    metrics::LEASED_ITEMS,
    metrics::DELAYED_ITEMS,
    metrics::QUEUE_PAUSED,
    metrics::ACKS,
    metrics::NACKS,
    metrics::REDELIVERIES,
    metrics::DEAD_LETTERED,
];

// ---------------------------------------------------------------------------
// The dashboard

fn dashboard() -> Value {
    let text = std::fs::read_to_string(DASHBOARD)
        .unwrap_or_else(|e| panic!("cannot read {DASHBOARD}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{DASHBOARD} is not JSON: {e}"))
}

/// Every panel, rows' nested panels included.
fn all_panels(dashboard: &Value) -> Vec<&Value> {
    fn walk<'a>(panels: &'a Value, out: &mut Vec<&'a Value>) {
        for panel in panels.as_array().into_iter().flatten() {
            out.push(panel);
            walk(&panel["panels"], out);
        }
    }
    let mut out = Vec::new();
    walk(&dashboard["panels"], &mut out);
    out
}

/// Every PromQL text the dashboard runs: panel targets and variable queries.
fn dashboard_queries(dashboard: &Value) -> Vec<String> {
    let mut queries = Vec::new();
    for panel in all_panels(dashboard) {
        for target in panel["targets"].as_array().into_iter().flatten() {
            if let Some(expr) = target["expr"].as_str() {
                queries.push(expr.to_string());
            }
        }
    }
    for variable in dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if variable["type"] == "datasource" {
            continue;
        }
        for query in [
            &variable["query"],
            &variable["query"]["query"],
            &variable["definition"],
        ] {
            if let Some(text) = query.as_str() {
                queries.push(text.to_string());
            }
        }
    }
    queries
}

/// Every `hotq_[a-z0-9_]+` name in `queries`.
fn series_names(queries: &[String]) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for query in queries {
        for prefix in ["hotq_", "process_"] {
            let bytes = query.as_bytes();
            let mut at = 0;
            while let Some(found) = query[at..].find(prefix) {
                let start = at + found;
                let boundary = start == 0 || {
                    let before = bytes[start - 1];
                    !(before.is_ascii_alphanumeric() || before == b'_' || before == b':')
                };
                let mut end = start + prefix.len();
                while end < bytes.len()
                    && (bytes[end].is_ascii_lowercase()
                        || bytes[end].is_ascii_digit()
                        || bytes[end] == b'_')
                {
                    end += 1;
                }
                if boundary && end > start + prefix.len() {
                    names.insert(query[start..end].to_string());
                }
                at = end;
            }
        }
    }
    names
}

/// The metric a series belongs to: histogram suffixes stripped.
fn base_name(series: &str) -> &str {
    HISTOGRAM_SUFFIXES
        .iter()
        .find_map(|suffix| series.strip_suffix(suffix))
        .filter(|base| DEFINED.contains(base))
        .unwrap_or(series)
}

// ---------------------------------------------------------------------------
// Scrapes

/// Waits until a scrape satisfies `condition`.
async fn scrape_until(
    client: &reqwest::Client,
    metrics_url: &str,
    what: &str,
    condition: impl Fn(&[Sample]) -> bool,
) {
    let condition = &condition;
    common::eventually(what, EVENT_BOUND, || async move {
        condition(&parse(&scrape(client, metrics_url).await))
    })
    .await;
}

// ---------------------------------------------------------------------------
// Tests

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn contention_shows_in_the_scrape() {
    if !common::alone::here(module_path!(), "contention_shows_in_the_scrape").await {
        return;
    }
    const QUEUE: &str = "contended";
    const ITEMS: usize = 2_000;
    const PUSHERS: usize = 2;
    const POPPERS: usize = 32;
    const BATCH: usize = 10;

    // Stored requests: a daemon's memory requests (the default) never race
    // its fulfiller, so direct-pop conflicts show only with stored
    // requests, or with pops from several processes.
    let daemon = Daemon::start(|config| {
        config.metrics_sample_interval_ms = 50;
        config.staging.requests_in_memory = false;
    })
    .await;
    let client = http();
    let api = Client::new(&daemon.url);
    let before = parse(&scrape(&client, &daemon.metrics_url).await);

    let delivered = Arc::new(Mutex::new(HashSet::with_capacity(ITEMS)));
    let count = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..POPPERS {
        let api = api.clone();
        let (delivered, count) = (delivered.clone(), count.clone());
        tasks.push(tokio::spawn(async move {
            while count.load(Ordering::SeqCst) < ITEMS {
                if let Some(payload) = api.pop(QUEUE, 300).await {
                    let fresh = delivered.lock().unwrap().insert(payload.clone());
                    assert!(fresh, "{payload} delivered twice");
                    count.fetch_add(1, Ordering::SeqCst);
                }
            }
        }));
    }
    for pusher in 0..PUSHERS {
        let api = api.clone();
        tasks.push(tokio::spawn(async move {
            let numbers: Vec<usize> = (0..ITEMS / PUSHERS).collect();
            for chunk in numbers.chunks(BATCH) {
                let payloads: Vec<String> = chunk.iter().map(|n| format!("{pusher}-{n}")).collect();
                api.push_batch(QUEUE, &payloads).await;
            }
        }));
    }
    tokio::time::timeout(Duration::from_secs(300), async {
        for task in tasks {
            task.await.unwrap();
        }
    })
    .await
    .expect("2,000 items pushed and delivered within 300 s");
    assert_eq!(delivered.lock().unwrap().len(), ITEMS);

    // The depth gauge is sampled: wait for a sample taken after the drain.
    let queue = [("queue", QUEUE)];
    scrape_until(
        &client,
        &daemon.metrics_url,
        "hotq_queue_depth{queue=\"contended\"} = 0 and hotq_requests_waiting = 0",
        |samples| {
            value(samples, metrics::QUEUE_DEPTH, &queue) == Some(0.0)
                && value(samples, metrics::REQUESTS_WAITING, &queue) == Some(0.0)
        },
    )
    .await;
    let stats = api.stats(QUEUE).await;
    assert_eq!(stats.depth, 0, "{stats}");

    let text = scrape(&client, &daemon.metrics_url).await;
    let after = parse(&text);
    let delta = |name: &str, filter: &[(&str, &str)]| {
        total(&after, name, filter) - total(&before, name, filter)
    };
    let conflicts = delta(metrics::CONFLICTS, &[]);
    let staged = total(
        &after,
        metrics::POPS,
        &[("queue", QUEUE), ("path", "staged")],
    );
    let pops = total(&after, metrics::POPS, &[("queue", QUEUE)]);
    let latency_count = delta("hotq_pop_latency_seconds_count", &[]);
    let batches = delta("hotq_fulfill_batch_size_count", &[]);

    eprintln!("scrape excerpt after {ITEMS} items, {POPPERS} poppers, {PUSHERS} pushers:");
    let shown = [
        "hotq_commit_conflicts_total",
        "hotq_pops_total",
        "hotq_requests_waiting",
        "hotq_queue_depth",
        "hotq_fulfill_batch_size_count",
        "hotq_fulfill_batch_size_sum",
        "hotq_pop_latency_seconds_count",
        "hotq_pop_latency_seconds_sum",
    ];
    for line in text.lines() {
        let Some(sample) = parse_line(line).filter(|_| !line.starts_with('#')) else {
            continue;
        };
        let ours = sample.labels.get("queue").is_none_or(|q| q == QUEUE);
        if ours && shown.contains(&sample.name.as_str()) {
            eprintln!("  {line}");
        }
    }

    assert!(
        conflicts > 0.0,
        "no commit conflict counted under contention"
    );
    assert!(staged > 0.0, "no staged pop counted under contention");
    assert_eq!(pops, ITEMS as f64, "every delivered item counted once");
    assert!(latency_count > 0.0, "no pop latency recorded");
    assert!(
        latency_count >= ITEMS as f64,
        "one latency sample per delivering pop: {latency_count}"
    );
    assert!(batches > 0.0, "no fulfillment batch recorded");
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_dashboard_series_is_exported() {
    if !common::alone::here(module_path!(), "every_dashboard_series_is_exported").await {
        return;
    }
    let dashboard = dashboard();
    let series = series_names(&dashboard_queries(&dashboard));
    assert!(
        series.len() >= DEFINED.len(),
        "the dashboard queries only {series:?}"
    );
    for name in &series {
        let base = base_name(name);
        assert!(
            DEFINED.contains(&base),
            "the dashboard queries {name}, but src/metrics.rs defines no metric {base}"
        );
    }
    let unused: Vec<_> = DEFINED
        .iter()
        .filter(|defined| !series.iter().any(|s| base_name(s) == **defined))
        .collect();
    assert!(unused.is_empty(), "no dashboard panel shows {unused:?}");

    let daemon = Daemon::start(|config| {
        config.metrics_sample_interval_ms = 50;
        config.staging.result_grace_ms = 100;
        config.staging.reap_interval_ms = 50;
        config.leases.queues.insert(
            "dash-lease".into(),
            hotq::config::QueueLeaseSection { max_deliveries: 2 },
        );
    })
    .await;
    let client = http();
    let (url, metrics_url) = (daemon.url.as_str(), daemon.metrics_url.as_str());
    let api = Client::new(url);

    // Leases: an ack, a nack, an expiry that redelivers, a second nack
    // that dead-letters (max_deliveries is 2), and a delayed push.
    let leased_pop = |lease_ms: u64| {
        let client = client.clone();
        async move {
            let response = client
                .post(format!(
                    "{url}/v1/queues/dash-lease/pop?lease_ms={lease_ms}&wait_ms=30000"
                ))
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), StatusCode::OK);
            response.headers()["hotq-receipt"]
                .to_str()
                .unwrap()
                .to_string()
        }
    };
    api.push("dash-lease", "ack").await;
    api.push("dash-lease", "poison").await;
    api.push("dash-lease", "expires").await;
    for op in ["ack", "nack", "nack"] {
        let receipt = leased_pop(60_000).await;
        let response = client
            .post(format!("{url}/v1/queues/dash-lease/{op}/{receipt}"))
            .send()
            .await
            .unwrap();
        // An ack answers 204; a nack 200 with where the item went.
        assert!(response.status().is_success(), "{op}");
    }
    leased_pop(1).await;
    let response = client
        .post(format!("{url}/v1/queues/dash-lease/items?delay_ms=60000"))
        .body("later")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    let lease = [("queue", "dash-lease")];
    scrape_until(&client, metrics_url, "lease counters", |s| {
        total(s, metrics::ACKS, &lease) > 0.0
            && total(s, metrics::NACKS, &lease) > 0.0
            && total(s, metrics::DEAD_LETTERED, &lease) > 0.0
            && total(s, metrics::REDELIVERIES, &lease) > 0.0
    })
    .await;

    // Normal traffic: a push and a direct pop.
    api.push("dash-traffic", "direct").await;
    assert_eq!(api.pop("dash-traffic", 0).await.as_deref(), Some("direct"));

    // A staged pop: the request is registered before the item arrives.
    let waiting_pop = {
        let api = api.clone();
        tokio::spawn(async move { api.pop("dash-traffic", 30_000).await })
    };
    common::eventually("the long poll's request is registered", EVENT_BOUND, || {
        let api = api.clone();
        async move { api.stats("dash-traffic").await.waiting == 1 }
    })
    .await;
    api.push("dash-traffic", "staged").await;
    assert_eq!(waiting_pop.await.unwrap().as_deref(), Some("staged"));
    let staged = [("queue", "dash-traffic"), ("path", "staged")];
    scrape_until(&client, metrics_url, "a staged pop and its batch", |s| {
        total(s, metrics::POPS, &staged) > 0.0
            && total(s, "hotq_fulfill_batch_size_count", &[]) > 0.0
    })
    .await;

    // A throttled pop: leases_max = 1 with its place taken, so a second
    // leased pop answers empty (204) and is counted.
    let response = client
        .put(format!("{url}/v1/queues/dash-limit/settings"))
        .json(&serde_json::json!({"leases_max": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    api.push("dash-limit", "one").await;
    api.push("dash-limit", "two").await;
    assert!(api.pop_leased("dash-limit", 60_000).await.is_some());
    assert!(api.pop_leased("dash-limit", 60_000).await.is_none());
    let throttled = [("queue", "dash-limit"), ("limit", "leases")];
    scrape_until(&client, metrics_url, "a throttled pop counted", |s| {
        total(s, metrics::POPS_THROTTLED, &throttled) > 0.0
    })
    .await;

    // A conflict: bursts of concurrent pops on a short queue.
    common::eventually("a commit conflict", EVENT_BOUND, || {
        let (client, api) = (client.clone(), api.clone());
        async move {
            let payloads: Vec<String> = (0..32).map(|n| format!("burst-{n}")).collect();
            api.push_batch("dash-burst", &payloads).await;
            let pops: Vec<_> = (0..32)
                .map(|_| {
                    let api = api.clone();
                    tokio::spawn(async move { api.pop("dash-burst", 0).await })
                })
                .collect();
            for task in pops {
                task.await.unwrap();
            }
            total(
                &parse(&scrape(&client, metrics_url).await),
                metrics::CONFLICTS,
                &[],
            ) > 0.0
        }
    })
    .await;

    // An expired request: registered with a deadline already past, cleared
    // by the daemon's reaper.
    let expire = QueueKeys::new(&QueueName::new("dash-expire").unwrap());
    hotq::staging::requester::register(&daemon.store, &expire, &RequestValue::front(now_ms() - 1))
        .await
        .unwrap();
    scrape_until(&client, metrics_url, "an expired request counted", |s| {
        total(s, metrics::REQUESTS_EXPIRED, &[("queue", "dash-expire")]) > 0.0
    })
    .await;

    // A reaped result: a dead requester is served (it is first in line,
    // the HTTP pop behind it started the fulfiller) and never collects.
    api.push("dash-reap", "stranded").await;
    let reap = QueueKeys::new(&QueueName::new("dash-reap").unwrap());
    let _dead = hotq::staging::requester::register(
        &daemon.store,
        &reap,
        &RequestValue::front(now_ms() + 2_000),
    )
    .await
    .unwrap();
    assert_eq!(
        api.pop("dash-reap", 300).await,
        None,
        "the item went to the dead requester queued first"
    );
    scrape_until(&client, metrics_url, "a reaped result counted", |s| {
        total(s, metrics::RESULTS_REAPED, &[("queue", "dash-reap")]) > 0.0
    })
    .await;

    // Everything the dashboard queries is in a live scrape (the sampled
    // gauges may need one more sampling pass).
    let missing = Mutex::new(Vec::<String>::new());
    let (series, missing_ref) = (&series, &missing);
    common::eventually("every dashboard series in the scrape", EVENT_BOUND, || {
        let client = client.clone();
        async move {
            let text = scrape(&client, metrics_url).await;
            let samples = parse(&text);
            let now: Vec<String> = series
                .iter()
                .filter(|name| !exported(&text, &samples, name))
                .cloned()
                .collect();
            let mut last = missing_ref.lock().unwrap();
            if *last != now {
                eprintln!("dashboard series not (yet) exported: {now:?}");
                *last = now.clone();
            }
            now.is_empty()
        }
    })
    .await;
    eprintln!("all {} dashboard series exported: {series:?}", series.len());
    daemon.stop().await;
}

#[test]
fn dashboard_is_importable_and_uses_the_variables() {
    let dashboard = dashboard();
    assert!(
        dashboard["schemaVersion"].as_u64().unwrap_or(0) >= 38,
        "schemaVersion {}",
        dashboard["schemaVersion"]
    );
    let variables = dashboard["templating"]["list"].as_array().unwrap();
    let variable = |name: &str| {
        variables
            .iter()
            .find(|v| v["name"] == name)
            .unwrap_or_else(|| panic!("no ${name} variable"))
    };
    let datasource = variable("datasource");
    assert_eq!(datasource["type"], "datasource");
    assert_eq!(datasource["query"], "prometheus");
    let queue = variable("queue");
    assert_eq!(queue["type"], "query");
    assert_eq!(queue["multi"], true);
    assert_eq!(queue["includeAll"], true);
    let query = queue["query"]["query"]
        .as_str()
        .or(queue["query"].as_str())
        .unwrap();
    assert_eq!(
        query,
        "label_values(hotq_queue_depth{instance=~\"$instance\"}, queue)"
    );
    let instance = variable("instance");
    assert_eq!(instance["multi"], true);
    assert_eq!(instance["includeAll"], true);

    let panels = all_panels(&dashboard);
    let mut ids = HashSet::new();
    for panel in &panels {
        let title = panel["title"].as_str().unwrap_or("?");
        assert!(ids.insert(panel["id"].as_u64()), "panel id reused: {title}");
        assert_eq!(panel["datasource"]["uid"], "${datasource}", "panel {title}");
        if panel["type"] == "row" {
            continue;
        }
        let unit = panel["fieldConfig"]["defaults"]["unit"].as_str();
        assert!(
            unit.is_some_and(|u| !u.is_empty()),
            "panel {title} has no unit"
        );
        let targets = panel["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "panel {title} queries nothing");
        for target in targets {
            assert_eq!(
                target["datasource"]["uid"], "${datasource}",
                "panel {title}"
            );
            let expr = target["expr"].as_str().unwrap_or("");
            assert!(
                expr.contains("hotq_") || expr.contains("process_"),
                "panel {title}: {expr}"
            );
            assert!(
                expr.contains("instance=~\"$instance\""),
                "panel {title} ignores the instance selection: {expr}"
            );
            assert!(
                !expr.contains("[1m]") && !expr.contains("[5m]"),
                "panel {title} hard-codes a rate window instead of $__rate_interval: {expr}"
            );
            let per_queue = series_names(&[expr.to_string()])
                .iter()
                .any(|name| QUEUE_LABELLED.contains(&base_name(name)));
            assert!(
                !per_queue || expr.contains("queue=~\"$queue\""),
                "panel {title} ignores the queue selection: {expr}"
            );
        }
    }
    assert!(panels.len() >= 15, "only {} panels", panels.len());
}
