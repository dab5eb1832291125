//! The Prometheus exporter of a real daemon: contention shows in the
//! scrape, and every series the Grafana dashboard queries is exported.
//!
//! The metrics recorder is process-global, so the tests that drive a
//! daemon take turns (`SERIAL`) and compare counters without a queue label
//! against a scrape taken before their load.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use common::daemon::{Daemon, http};
use hotq::envelope::{RequestValue, now_ms};
use hotq::keys::{QueueKeys, QueueName};
use hotq::metrics;
use reqwest::StatusCode;
use serde_json::Value;

/// Daemon tests take turns: they share one recorder.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Generous bound for anything the daemon does on its own (sampler, reaper).
const EVENT_BOUND: Duration = Duration::from_secs(60);

const DASHBOARD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/dashboards/hotq.json");

/// Every metric name src/metrics.rs defines.
const DEFINED: &[&str] = &[
    metrics::OPERATIONS,
    metrics::CONFLICTS,
    metrics::POPS,
    metrics::REQUESTS_WAITING,
    metrics::FULFILL_BATCH_SIZE,
    metrics::POP_LATENCY,
    metrics::ITEM_WAIT,
    metrics::QUEUE_DEPTH,
    metrics::OLDEST_ITEM_AGE,
    metrics::REQUESTS_EXPIRED,
    metrics::RESULTS_REAPED,
    metrics::STORE_COMMIT_LATENCY,
    metrics::STORE_COMMIT_GROUP_SIZE,
    metrics::FSYNC_SECONDS,
    metrics::LEASED_ITEMS,
    metrics::DELAYED_ITEMS,
    metrics::ACKS,
    metrics::NACKS,
    metrics::REDELIVERIES,
    metrics::DEAD_LETTERED,
    metrics::PUSHED,
    metrics::POP_EMPTY_WAIT,
    metrics::HTTP_RESPONSES,
    metrics::BUILD_INFO,
    metrics::STORE_UNAVAILABLE,
    // Rendered from /proc/self by src/metrics/process.rs.
    "process_cpu_seconds_total",
    "process_resident_memory_bytes",
];

/// The metrics labelled by queue (the others have no `queue` label).
const QUEUE_LABELLED: &[&str] = &[
    metrics::OPERATIONS,
    metrics::PUSHED,
    metrics::POPS,
    metrics::REQUESTS_WAITING,
    metrics::QUEUE_DEPTH,
    metrics::OLDEST_ITEM_AGE,
    metrics::REQUESTS_EXPIRED,
    metrics::RESULTS_REAPED,
    metrics::LEASED_ITEMS,
    metrics::DELAYED_ITEMS,
    metrics::ACKS,
    metrics::NACKS,
    metrics::REDELIVERIES,
    metrics::DEAD_LETTERED,
];

const HISTOGRAM_SUFFIXES: &[&str] = &["_bucket", "_sum", "_count"];

// ---------------------------------------------------------------------------
// Prometheus text format

/// One sample line of a scrape.
#[derive(Debug, Clone)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// Parses the sample lines of the text exposition format (comments skipped).
fn parse(text: &str) -> Vec<Sample> {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(|line| parse_line(line).unwrap_or_else(|| panic!("unparsable line: {line}")))
        .collect()
}

fn parse_line(line: &str) -> Option<Sample> {
    let name_end = line.find(['{', ' '])?;
    let name = line[..name_end].to_string();
    let mut labels = BTreeMap::new();
    let mut rest = line[name_end..].chars();
    if line[name_end..].starts_with('{') {
        rest.next();
        loop {
            let mut key = String::new();
            // A key up to `=`; `}` closes the set (also after a trailing comma).
            loop {
                match rest.next()? {
                    '}' if key.trim().trim_start_matches(',').is_empty() => {
                        key.clear();
                        break;
                    }
                    '=' => break,
                    c => key.push(c),
                }
            }
            let key = key.trim().trim_start_matches(',').trim().to_string();
            if key.is_empty() {
                break;
            }
            if rest.next()? != '"' {
                return None;
            }
            let mut value = String::new();
            loop {
                match rest.next()? {
                    '\\' => match rest.next()? {
                        'n' => value.push('\n'),
                        other => value.push(other),
                    },
                    '"' => break,
                    other => value.push(other),
                }
            }
            labels.insert(key, value);
        }
    }
    let value = rest.as_str().split_whitespace().next()?.parse().ok()?;
    Some(Sample {
        name,
        labels,
        value,
    })
}

/// Sum of the samples named `name` carrying every label in `filter`.
fn total(samples: &[Sample], name: &str, filter: &[(&str, &str)]) -> f64 {
    matching(samples, name, filter).map(|s| s.value).sum()
}

/// The one sample named `name` carrying the labels in `filter`, if any.
fn value(samples: &[Sample], name: &str, filter: &[(&str, &str)]) -> Option<f64> {
    matching(samples, name, filter).next().map(|s| s.value)
}

fn matching<'a>(
    samples: &'a [Sample],
    name: &'a str,
    filter: &'a [(&'a str, &'a str)],
) -> impl Iterator<Item = &'a Sample> + 'a {
    samples.iter().filter(move |s| {
        s.name == name
            && filter
                .iter()
                .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
    })
}

/// True when `series` appears in `text`: as the name of a sample line, or
/// (for a name without a histogram suffix) in a `# TYPE` line.
fn exported(text: &str, samples: &[Sample], series: &str) -> bool {
    let suffixed = HISTOGRAM_SUFFIXES.iter().any(|s| series.ends_with(s));
    let typed = text.lines().any(|line| {
        line.strip_prefix("# TYPE ")
            .and_then(|rest| rest.split_whitespace().next())
            == Some(series)
    });
    samples.iter().any(|s| s.name == series) || (!suffixed && typed)
}

async fn scrape(client: &reqwest::Client, url: &str) -> String {
    let response = client.get(url).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK, "GET {url}");
    response.text().await.unwrap()
}

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
// HTTP helpers

fn batch_body(payloads: &[String]) -> Vec<u8> {
    let encoded: Vec<String> = payloads.iter().map(|p| BASE64.encode(p)).collect();
    serde_json::to_vec(&encoded).unwrap()
}

async fn push(client: &reqwest::Client, url: &str, queue: &str, payload: &str) {
    let response = client
        .post(format!("{url}/v1/queues/{queue}/items"))
        .body(payload.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED, "push to {queue}");
}

/// One pop: the item's payload, or `None` on 204.
async fn pop(client: &reqwest::Client, url: &str, queue: &str, wait_ms: u64) -> Option<String> {
    let response = client
        .post(format!("{url}/v1/queues/{queue}/pop?wait_ms={wait_ms}"))
        .send()
        .await
        .unwrap();
    match response.status() {
        StatusCode::OK => Some(response.text().await.unwrap()),
        StatusCode::NO_CONTENT => None,
        other => panic!(
            "pop from {queue}: {other}: {}",
            response.text().await.unwrap()
        ),
    }
}

async fn queue_stats(client: &reqwest::Client, url: &str, queue: &str) -> Value {
    client
        .get(format!("{url}/v1/queues/{queue}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

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
    const QUEUE: &str = "contended";
    const ITEMS: usize = 2_000;
    const PUSHERS: usize = 2;
    const POPPERS: usize = 32;
    const BATCH: usize = 10;

    let _turn = SERIAL.lock().await;
    // Stored requests: a daemon's memory requests (the default) never race
    // its fulfiller, so direct-pop conflicts show only with stored
    // requests, or with pops from several processes.
    let daemon = Daemon::start(|config| {
        config.metrics_sample_interval_ms = 50;
        config.staging.requests_in_memory = false;
    })
    .await;
    let client = http();
    let before = parse(&scrape(&client, &daemon.metrics_url).await);

    let delivered = Arc::new(Mutex::new(HashSet::with_capacity(ITEMS)));
    let count = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..POPPERS {
        let (client, url) = (client.clone(), daemon.url.clone());
        let (delivered, count) = (delivered.clone(), count.clone());
        tasks.push(tokio::spawn(async move {
            while count.load(Ordering::SeqCst) < ITEMS {
                if let Some(payload) = pop(&client, &url, QUEUE, 300).await {
                    let fresh = delivered.lock().unwrap().insert(payload.clone());
                    assert!(fresh, "{payload} delivered twice");
                    count.fetch_add(1, Ordering::SeqCst);
                }
            }
        }));
    }
    for pusher in 0..PUSHERS {
        let (client, url) = (client.clone(), daemon.url.clone());
        tasks.push(tokio::spawn(async move {
            let numbers: Vec<usize> = (0..ITEMS / PUSHERS).collect();
            for chunk in numbers.chunks(BATCH) {
                let payloads: Vec<String> = chunk.iter().map(|n| format!("{pusher}-{n}")).collect();
                let response = client
                    .post(format!("{url}/v1/queues/{QUEUE}/items:batch"))
                    .body(batch_body(&payloads))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(response.status(), StatusCode::CREATED);
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
    let stats = queue_stats(&client, &daemon.url, QUEUE).await;
    assert_eq!(stats["depth"], 0, "{stats}");

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

    let _turn = SERIAL.lock().await;
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
    push(&client, url, "dash-lease", "ack").await;
    push(&client, url, "dash-lease", "poison").await;
    push(&client, url, "dash-lease", "expires").await;
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
    push(&client, url, "dash-traffic", "direct").await;
    assert_eq!(
        pop(&client, url, "dash-traffic", 0).await.as_deref(),
        Some("direct")
    );

    // A staged pop: the request is registered before the item arrives.
    let waiting_pop = {
        let (client, url) = (client.clone(), url.to_string());
        tokio::spawn(async move { pop(&client, &url, "dash-traffic", 30_000).await })
    };
    common::eventually("the long poll's request is registered", EVENT_BOUND, || {
        let client = client.clone();
        async move { queue_stats(&client, url, "dash-traffic").await["waiting"] == 1 }
    })
    .await;
    push(&client, url, "dash-traffic", "staged").await;
    assert_eq!(waiting_pop.await.unwrap().as_deref(), Some("staged"));
    let staged = [("queue", "dash-traffic"), ("path", "staged")];
    scrape_until(&client, metrics_url, "a staged pop and its batch", |s| {
        total(s, metrics::POPS, &staged) > 0.0
            && total(s, "hotq_fulfill_batch_size_count", &[]) > 0.0
    })
    .await;

    // A conflict: bursts of concurrent pops on a short queue.
    common::eventually("a commit conflict", EVENT_BOUND, || {
        let client = client.clone();
        async move {
            let payloads: Vec<String> = (0..32).map(|n| format!("burst-{n}")).collect();
            let response = client
                .post(format!("{url}/v1/queues/dash-burst/items:batch"))
                .body(batch_body(&payloads))
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), StatusCode::CREATED);
            let pops: Vec<_> = (0..32)
                .map(|_| {
                    let (client, url) = (client.clone(), url.to_string());
                    tokio::spawn(async move { pop(&client, &url, "dash-burst", 0).await })
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
    push(&client, url, "dash-reap", "stranded").await;
    let reap = QueueKeys::new(&QueueName::new("dash-reap").unwrap());
    let _dead = hotq::staging::requester::register(
        &daemon.store,
        &reap,
        &RequestValue::front(now_ms() + 2_000),
    )
    .await
    .unwrap();
    assert_eq!(
        pop(&client, url, "dash-reap", 300).await,
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

// ---------------------------------------------------------------------------
// The disk's limit: transactions per fsync and fsync latency

/// The `le` bounds of histogram `name`'s buckets in a scrape, `+Inf` left out.
fn bucket_bounds(samples: &[Sample], name: &str) -> Vec<f64> {
    let bucket = format!("{name}_bucket");
    let mut bounds: Vec<f64> = matching(samples, &bucket, &[])
        .filter_map(|s| s.labels.get("le"))
        .filter(|le| le.as_str() != "+Inf")
        .map(|le| le.parse().unwrap())
        .collect();
    bounds.sort_by(f64::total_cmp);
    bounds.dedup();
    bounds
}

/// One scrape and the store's group count, taken while no group was written
/// (the count is the same before and after the scrape).
async fn quiet_scrape(client: &reqwest::Client, daemon: &Daemon) -> (Vec<Sample>, u64) {
    let deadline = tokio::time::Instant::now() + EVENT_BOUND;
    loop {
        let (_, _, groups_before) = daemon.store.counts();
        let samples = parse(&scrape(client, &daemon.metrics_url).await);
        let (_, _, groups_after) = daemon.store.counts();
        if groups_before == groups_after {
            return (samples, groups_after);
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no scrape between two commit groups within {EVENT_BOUND:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fsync_histograms_count_each_fsync_and_what_it_carried() {
    const PUSHES: usize = 20;
    let group_count = format!("{}_count", metrics::STORE_COMMIT_GROUP_SIZE);
    let group_sum = format!("{}_sum", metrics::STORE_COMMIT_GROUP_SIZE);
    let fsync_count = format!("{}_count", metrics::FSYNC_SECONDS);
    let fsync_sum = format!("{}_sum", metrics::FSYNC_SECONDS);

    let _turn = SERIAL.lock().await;
    for durability in [
        hotq::store::embedded::Durability::Sync,
        hotq::store::embedded::Durability::Buffered,
    ] {
        let dir = tempfile::tempdir().unwrap();
        let daemon = Daemon::start_in(dir.path(), durability, |_| {}).await;
        let client = http();
        let (before, groups_before) = quiet_scrape(&client, &daemon).await;
        assert_eq!(
            bucket_bounds(&before, metrics::FSYNC_SECONDS),
            [
                0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05,
                0.1, 0.25, 0.5, 1.0
            ]
        );
        assert_eq!(
            bucket_bounds(&before, metrics::STORE_COMMIT_GROUP_SIZE),
            [
                0.999, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0,
                1_024.0
            ]
        );
        // One at a time: each push's commit is a group of its own.
        for n in 0..PUSHES {
            push(&client, &daemon.url, "fsync-carried", &format!("item-{n}")).await;
        }
        let (after, groups_after) = quiet_scrape(&client, &daemon).await;
        let delta = |name: &str| total(&after, name, &[]) - total(&before, name, &[]);
        let groups = (groups_after - groups_before) as f64;
        assert!(groups >= PUSHES as f64, "{durability:?}: {groups} groups");
        // One sample per written group, however many it carried.
        assert_eq!(delta(&group_count), groups, "{durability:?}");
        assert!(
            delta(&group_sum) >= PUSHES as f64,
            "{durability:?}: every push's transaction is counted"
        );
        match durability {
            hotq::store::embedded::Durability::Sync => {
                assert_eq!(delta(&fsync_count), groups, "one fsync per group");
                assert!(delta(&fsync_sum) > 0.0, "fsyncs take time");
            }
            hotq::store::embedded::Durability::Buffered => {
                assert_eq!(delta(&fsync_count), 0.0, "buffered makes no fsync");
            }
        }
        daemon.stop().await;
    }
}

/// Starts the built binary on port 0 with metrics on port 0; returns the
/// child and its metrics URL (from its log).
fn spawn_daemon(data_dir: &std::path::Path) -> (std::process::Child, String) {
    use std::io::{BufRead, BufReader};
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_hotq"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--metrics-listen",
            "127.0.0.1:0",
        ])
        .arg("--data-dir")
        .arg(data_dir)
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (lines, received) = std::sync::mpsc::channel::<String>();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    let deadline = std::time::Instant::now() + EVENT_BOUND;
    loop {
        let wait = deadline.saturating_duration_since(std::time::Instant::now());
        let Ok(line) = received.recv_timeout(wait) else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the daemon did not log its metrics address within {EVENT_BOUND:?}");
        };
        let Ok(log) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if log["fields"]["message"] == "metrics exporter listening" {
            let address = log["fields"]["address"].as_str().unwrap();
            return (child, format!("http://{address}/metrics"));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fsync_histograms_are_exported_from_start_up() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, metrics_url) = spawn_daemon(dir.path());
    // Before any API request: a process of its own, so nothing else in
    // this test binary has recorded into its exporter.
    let text = scrape(&http(), &metrics_url).await;
    child.kill().unwrap();
    child.wait().unwrap();
    let samples = parse(&text);
    for name in [metrics::FSYNC_SECONDS, metrics::STORE_COMMIT_GROUP_SIZE] {
        for suffix in HISTOGRAM_SUFFIXES {
            let series = format!("{name}{suffix}");
            assert!(
                exported(&text, &samples, &series),
                "{series} missing from a fresh daemon's scrape:\n{text}"
            );
        }
        assert!(
            text.contains(&format!("# HELP {name} ")),
            "{name} has no description"
        );
    }
}
