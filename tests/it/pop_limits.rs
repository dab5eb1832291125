//! A queue's rate and concurrency limits over HTTP (issue #40,
//! `hotq::queue::limits`): `leases_max` is never exceeded by 64 workers on
//! two daemons sharing one store, `pop_rate_max` never hands out more than
//! its rate and burst allow, a pop held back waits (long-poll) or answers
//! empty (no wait) and never errors, an ack or an expired lease frees a
//! place at once, a settings change applies to pops already waiting, and
//! bad values are refused.

use crate::common;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use common::client::Client;
use common::daemon::{Daemon, http};
use common::eventually;
use reqwest::StatusCode;
use serde_json::{Value, json};

/// Generous bound on anything awaited.
const BOUND: Duration = Duration::from_secs(60);
/// A lease longer than any test: only an ack ends it.
const LONG_LEASE_MS: u64 = 600_000;

/// `PUT /v1/queues/{queue}/settings` with `change`: status and answer.
async fn set(url: &str, queue: &str, change: Value) -> (StatusCode, Value) {
    let response = http()
        .put(format!("{url}/v1/queues/{queue}/settings"))
        .json(&change)
        .send()
        .await
        .unwrap();
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn set_ok(url: &str, queue: &str, change: Value) -> Value {
    let (status, body) = set(url, queue, change.clone()).await;
    assert_eq!(status, StatusCode::OK, "{change}: {body}");
    body
}

/// A leased pop waiting up to `wait_ms`: the body and receipt, or None
/// on a 204. Any other status fails the test: a limit never errors.
async fn lease(url: &str, queue: &str, lease_ms: u64, wait_ms: u64) -> Option<(String, String)> {
    let path = format!("{url}/v1/queues/{queue}/pop?lease_ms={lease_ms}&wait_ms={wait_ms}");
    let response = http().post(path).send().await.unwrap();
    match response.status() {
        StatusCode::OK => {
            let receipt = response.headers()["hotq-receipt"].to_str().unwrap();
            let receipt = receipt.to_string();
            Some((response.text().await.unwrap(), receipt))
        }
        StatusCode::NO_CONTENT => None,
        other => panic!("leased pop: {other}: {}", response.text().await.unwrap()),
    }
}

async fn ack(url: &str, queue: &str, receipt: &str) {
    let status = Client::new(url).ack(queue, receipt).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "ack of {receipt}");
}

async fn push_numbered(url: &str, queue: &str, count: usize) {
    let items: Vec<String> = (0..count).map(|n| n.to_string()).collect();
    for chunk in items.chunks(500) {
        Client::new(url).push_batch(queue, chunk).await;
    }
}

/// Two daemons on one store (as two on one cluster), with `change` set
/// on `queue` through the first.
async fn two_daemons(queue: &str, change: Value) -> (Daemon, Daemon) {
    let first = Daemon::start(|_| {}).await;
    let second = Daemon::start_on(first.store.clone(), |_| {}).await;
    set_ok(&first.url, queue, change).await;
    (first, second)
}

/// The daemon worker `worker` talks to: workers alternate between two.
fn url_of(first: &Daemon, second: &Daemon, worker: usize) -> String {
    [&first.url, &second.url][worker % 2].clone()
}

/// Largest value seen by a concurrent high-water mark.
fn raise(mark: &AtomicI64, value: i64) {
    mark.fetch_max(value, Ordering::SeqCst);
}

/// 64 workers, half on each of two daemons on one store, lease and ack
/// 640 items under `leases_max = 10`: the workers never hold more than
/// 10 leases at once (counted by the workers: up after the pop answered,
/// down before the ack is sent, so never above the store's count), the
/// store's `leased` read every 10 ms never passes 10, and every item is
/// delivered once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn leases_max_holds_for_64_workers_on_two_daemons() {
    const ITEMS: usize = 640;
    let (first, second) = two_daemons("capped", json!({"leases_max": 10})).await;
    push_numbered(&first.url, "capped", ITEMS).await;
    let held = Arc::new(AtomicI64::new(0));
    let held_max = Arc::new(AtomicI64::new(0));
    let acked = Arc::new(AtomicI64::new(0));
    let sampler = spawn_leased_sampler(first.url.clone(), "capped", acked.clone());
    let deadline = Instant::now() + BOUND * 3;
    let mut workers = Vec::new();
    for worker in 0..64 {
        let url = url_of(&first, &second, worker);
        let (held, held_max, acked) = (held.clone(), held_max.clone(), acked.clone());
        workers.push(tokio::spawn(async move {
            let mut bodies = Vec::new();
            while acked.load(Ordering::SeqCst) < ITEMS as i64 {
                assert!(Instant::now() < deadline, "the drain took over its bound");
                let Some((body, receipt)) = lease(&url, "capped", LONG_LEASE_MS, 500).await else {
                    continue;
                };
                raise(&held_max, held.fetch_add(1, Ordering::SeqCst) + 1);
                tokio::task::yield_now().await;
                held.fetch_sub(1, Ordering::SeqCst);
                ack(&url, "capped", &receipt).await;
                acked.fetch_add(1, Ordering::SeqCst);
                bodies.push(body);
            }
            bodies
        }));
    }
    let mut seen = HashSet::new();
    for worker in workers {
        for body in worker.await.unwrap() {
            assert!(seen.insert(body.clone()), "{body} delivered twice");
        }
    }
    let leased_max = sampler.await.unwrap();
    assert_eq!(seen.len(), ITEMS);
    assert!(
        held_max.load(Ordering::SeqCst) <= 10,
        "workers held more than 10"
    );
    assert!(leased_max <= 10, "the store counted {leased_max} leases");
    assert_eq!(Client::new(&first.url).stats("capped").await.leased, 0);
    second.stop().await;
    first.stop().await;
}

/// Reads the queue's `leased` every 10 ms until `acked` reaches nothing
/// left to do (the workers' drain ended); returns the largest it read.
fn spawn_leased_sampler(
    url: String,
    queue: &'static str,
    acked: Arc<AtomicI64>,
) -> tokio::task::JoinHandle<i64> {
    tokio::spawn(async move {
        let client = Client::new(&url);
        let mut largest = 0;
        let mut every = tokio::time::interval(Duration::from_millis(10));
        let deadline = Instant::now() + BOUND * 3;
        while acked.load(Ordering::SeqCst) < 640 && Instant::now() < deadline {
            every.tick().await;
            largest = largest.max(client.stats(queue).await.leased);
        }
        largest
    })
}

/// Under `pop_rate_max = 50` (burst 5), 32 workers on two daemons pop
/// for a while: the items handed out never pass the burst plus the rate
/// times the time from before the first pop to after the last answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pop_rate_max_never_hands_out_more_than_rate_and_burst() {
    const ITEMS: i64 = 60;
    let first = Daemon::start(|_| {}).await;
    let second = Daemon::start_on(first.store.clone(), |_| {}).await;
    let answer = set_ok(
        &first.url,
        "metered",
        json!({"pop_rate_max": 50, "pop_rate_burst": 5}),
    )
    .await;
    assert_eq!(answer["settings"]["pop_rate_max"], 50, "{answer}");
    push_numbered(&first.url, "metered", 200).await;
    let popped = Arc::new(AtomicI64::new(0));
    let began = Instant::now();
    let mut workers = Vec::new();
    for worker in 0..32 {
        let url = url_of(&first, &second, worker);
        let popped = popped.clone();
        workers.push(tokio::spawn(async move {
            let client = Client::new(&url);
            while popped.load(Ordering::SeqCst) < ITEMS {
                assert!(began.elapsed() < BOUND, "the rate never let {ITEMS} go");
                if client.pop("metered", 500).await.is_some() {
                    popped.fetch_add(1, Ordering::SeqCst);
                }
            }
        }));
    }
    for worker in workers {
        worker.await.unwrap();
    }
    let elapsed_s = began.elapsed().as_secs_f64();
    let total = 200 - Client::new(&first.url).depth("metered").await;
    let allowed = 5.0 + 50.0 * elapsed_s;
    assert!(
        (total as f64) <= allowed,
        "{total} items in {elapsed_s:.3} s: the limit allows {allowed:.1}"
    );
    second.stop().await;
    first.stop().await;
}

/// At the limit a pop that must not wait answers empty (204), one that
/// waits is served when an ack frees a place, and pops that lease
/// nothing are not held back by `leases_max`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pop_at_the_lease_limit_waits_or_answers_empty_never_errors() {
    let daemon = Daemon::start(|_| {}).await;
    let url = &daemon.url;
    set_ok(url, "one", json!({"leases_max": 1})).await;
    push_numbered(url, "one", 3).await;
    let (first, receipt) = lease(url, "one", LONG_LEASE_MS, 0).await.unwrap();
    assert_eq!(first, "0");
    assert_eq!(lease(url, "one", LONG_LEASE_MS, 0).await, None);
    let waiting = {
        let url = url.clone();
        tokio::spawn(async move { lease(&url, "one", LONG_LEASE_MS, 30_000).await })
    };
    eventually("the leased pop waits", BOUND, || async {
        Client::new(url).stats("one").await.waiting >= 1
    })
    .await;
    // A plain pop takes no lease: the limit does not hold it.
    assert_eq!(Client::new(url).pop("one", 0).await.as_deref(), Some("1"));
    ack(url, "one", &receipt).await;
    let (second, _) = waiting
        .await
        .unwrap()
        .expect("served once the ack freed a place");
    assert_eq!(second, "2");
    assert_eq!(Client::new(url).stats("one").await.leased, 1);
    daemon.stop().await;
}

/// Under `pop_rate_max = 1` (burst 1), the first pop takes the token and
/// the next no-wait pop answers empty; a long poll is served when the
/// next token comes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pop_over_the_rate_answers_empty_or_waits_for_the_next_token() {
    let daemon = Daemon::start(|_| {}).await;
    let (url, client) = (&daemon.url, Client::new(&daemon.url));
    set_ok(url, "slow", json!({"pop_rate_max": 1, "pop_rate_burst": 1})).await;
    push_numbered(url, "slow", 3).await;
    assert_eq!(client.pop("slow", 0).await.as_deref(), Some("0"));
    let empty_at = Instant::now();
    let empty = client.pop("slow", 0).await;
    // A token came back only if the pop took over the interval (a slow
    // machine): then it must have the next item, not an error.
    if empty_at.elapsed() < Duration::from_millis(900) {
        assert_eq!(empty, None);
    }
    let waited = client.pop("slow", 30_000).await;
    assert!(
        waited.is_some(),
        "the long poll is served by the next token"
    );
    daemon.stop().await;
}

/// A lease whose worker is gone frees its place when it expires: a pop
/// waiting at the limit (with another item free to take) is served
/// then, with the expired item again (it keeps its place at the front).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_lease_frees_its_place() {
    let daemon = Daemon::start(|_| {}).await;
    let url = &daemon.url;
    set_ok(url, "lost", json!({"leases_max": 1})).await;
    push_numbered(url, "lost", 2).await;
    let (body, _forgotten) = lease(url, "lost", 300, 0).await.unwrap();
    let again = lease(url, "lost", LONG_LEASE_MS, 30_000).await;
    assert_eq!(again.map(|(body, _)| body), Some(body));
    daemon.stop().await;
}

/// Pops waiting at a limit are served as soon as the limit is raised or
/// removed, on the daemon they wait on, though the change was made
/// through another daemon on the same store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settings_change_applies_to_pops_already_waiting() {
    let (first, second) = two_daemons("gated", json!({"leases_max": 1})).await;
    push_numbered(&first.url, "gated", 4).await;
    let _held = lease(&first.url, "gated", LONG_LEASE_MS, 0).await.unwrap();
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let url = second.url.clone();
            tokio::spawn(async move { lease(&url, "gated", LONG_LEASE_MS, 30_000).await })
        })
        .collect();
    eventually("three leased pops wait", BOUND, || async {
        Client::new(&second.url).stats("gated").await.waiting >= 3
    })
    .await;
    set_ok(&first.url, "gated", json!({"leases_max": null})).await;
    for waiter in waiters {
        assert!(
            waiter.await.unwrap().is_some(),
            "served once the limit went"
        );
    }
    assert_eq!(Client::new(&first.url).stats("gated").await.leased, 4);
    second.stop().await;
    first.stop().await;
}

/// Bad limits are refused whole with a clear error, and nothing changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_limits_are_refused_and_change_nothing() {
    let daemon = Daemon::start(|_| {}).await;
    let url = &daemon.url;
    set_ok(url, "strict", json!({"leases_max": 5})).await;
    for bad in [
        json!({"leases_max": 0}),
        json!({"leases_max": -1}),
        json!({"leases_max": "ten"}),
        json!({"leases_max": 1_000_001}),
        json!({"pop_rate_max": 0}),
        json!({"pop_rate_max": 0.5}),
        json!({"pop_rate_burst": 0}),
        json!({"pop_rate_max": 100, "leases_max": 0}),
    ] {
        let (status, body) = set(url, "strict", bad.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
        assert_eq!(body["error"]["code"], "invalid_settings", "{bad}: {body}");
        let named = bad.as_object().unwrap().keys().any(|key| {
            let message = body["error"]["message"].as_str().unwrap_or_default();
            message.contains(key.as_str())
        });
        assert!(named, "{bad}: the message names the setting: {body}");
    }
    let settings = common::daemon::get_json(&format!("{url}/v1/queues/strict/settings")).await;
    assert_eq!(settings["settings"]["leases_max"], 5, "{settings}");
    assert_eq!(
        settings["settings"]["pop_rate_max"],
        Value::Null,
        "{settings}"
    );
    daemon.stop().await;
}

/// Priority queues obey `leases_max` too, at either end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_priority_queue_obeys_leases_max() {
    let daemon = Daemon::start(|_| {}).await;
    let url = &daemon.url;
    let (status, body) = http()
        .put(format!("{url}/v1/pqueues/ranked/settings"))
        .json(&json!({"leases_max": 1}))
        .send()
        .await
        .map(|r| (r.status(), r))
        .unwrap();
    assert_eq!(status, StatusCode::OK, "{:?}", body.text().await);
    for priority in [1, 2] {
        let response = http()
            .post(format!("{url}/v1/pqueues/ranked/items?priority={priority}"))
            .body(format!("p{priority}"))
            .send()
            .await
            .unwrap();
        assert!(
            response.status().is_success(),
            "push: {}",
            response.status()
        );
    }
    let pop = |end: &'static str| {
        let url = url.clone();
        async move {
            let path = format!("{url}/v1/pqueues/ranked/pop?end={end}&lease_ms={LONG_LEASE_MS}");
            http().post(path).send().await.unwrap().status()
        }
    };
    assert_eq!(pop("min").await, StatusCode::OK);
    assert_eq!(pop("max").await, StatusCode::NO_CONTENT);
    daemon.stop().await;
}

/// What the workers of [`a_sigkill_mid_load_leaves_no_limit_stuck`] saw.
#[derive(Default)]
struct Drain {
    acked: HashSet<String>,
    /// Items whose ack got no answer (the daemon died under it): acked
    /// or not; if not, the item comes back when its lease expires.
    ack_unanswered: HashSet<String>,
    /// Set once every item is settled.
    done: bool,
    leases_held: i64,
    leases_held_max: i64,
}

/// 16 workers lease and ack 400 items under `leases_max = 8` on the
/// built daemon, which is SIGKILLed once mid-load and restarted: the
/// leases its workers held at the kill expire and free their places,
/// so the drain ends with every item acked (or its ack unanswered by the
/// killed daemon, and then nothing left in the queue), no lease left,
/// and the workers never holding more than 8 leases at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sigkill_mid_load_leaves_no_limit_stuck() {
    const ITEMS: usize = 400;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    let running = tokio::task::spawn_blocking(move || common::process::start(&path))
        .await
        .unwrap();
    let url = Arc::new(std::sync::RwLock::new(running.url.clone()));
    set_ok(&running.url, "crash", json!({"leases_max": 8})).await;
    push_numbered(&running.url, "crash", ITEMS).await;
    let drain = Arc::new(std::sync::Mutex::new(Drain::default()));
    let deadline = Instant::now() + BOUND * 3;
    let workers: Vec<_> = (0..16)
        .map(|_| {
            let (url, drain) = (url.clone(), drain.clone());
            tokio::spawn(async move {
                while !drain.lock().unwrap().done {
                    assert!(Instant::now() < deadline, "the drain took over its bound");
                    let url = url.read().unwrap().clone();
                    work_once(&url, &drain).await;
                }
            })
        })
        .collect();
    eventually("a quarter acked before the kill", BOUND, || async {
        drain.lock().unwrap().acked.len() >= ITEMS / 4
    })
    .await;
    let acked_at_kill = drain.lock().unwrap().acked.len();
    let restarted = common::process::kill9_and_restart(running, dir.path()).await;
    *url.write().unwrap() = restarted.url.clone();
    let client = Client::new(&restarted.url);
    eventually("every item settled, nothing left", BOUND * 3, || async {
        let settled = {
            let drain = drain.lock().unwrap();
            drain.acked.union(&drain.ack_unanswered).count()
        };
        let stats = client.stats("crash").await;
        settled == ITEMS && (stats.depth, stats.leased, stats.delayed) == (0, 0, 0)
    })
    .await;
    drain.lock().unwrap().done = true;
    for worker in workers {
        worker.await.unwrap();
    }
    let leases_held_max = drain.lock().unwrap().leases_held_max;
    assert!(acked_at_kill < ITEMS, "killed mid-load");
    assert!(leases_held_max <= 8, "{leases_held_max} leases held");
    let stats = Client::new(&restarted.url).stats("crash").await;
    assert_eq!((stats.depth, stats.leased), (0, 0), "{stats}");
    tokio::task::spawn_blocking(move || common::process::terminate(restarted))
        .await
        .unwrap();
}

/// One leased pop and its ack; a request the killed daemon never
/// answered is just tried again (its lease, if it committed, expires).
async fn work_once(url: &str, drain: &std::sync::Mutex<Drain>) {
    let path = format!("{url}/v1/queues/crash/pop?lease_ms=1000&wait_ms=200");
    let Ok(response) = http().post(path).send().await else {
        return;
    };
    if response.status() == StatusCode::NO_CONTENT {
        return;
    }
    assert_eq!(response.status(), StatusCode::OK, "a held pop never errors");
    let receipt = response.headers()["hotq-receipt"]
        .to_str()
        .unwrap()
        .to_string();
    let Ok(body) = response.text().await else {
        return;
    };
    {
        let mut drain = drain.lock().unwrap();
        drain.leases_held += 1;
        drain.leases_held_max = drain.leases_held_max.max(drain.leases_held);
    }
    // Other workers' leases overlap this one here.
    tokio::task::yield_now().await;
    drain.lock().unwrap().leases_held -= 1;
    let ack = format!("{url}/v1/queues/crash/ack/{receipt}");
    match http().post(ack).send().await {
        Ok(response) if response.status() == StatusCode::NO_CONTENT => {
            drain.lock().unwrap().acked.insert(body);
        }
        // Its lease had expired and another worker has the item.
        Ok(_) => {}
        Err(_) => {
            drain.lock().unwrap().ack_unanswered.insert(body);
        }
    }
}

/// Pops a limit held back are counted by the limit that held them:
/// `hotq_pops_throttled_total{limit="leases"}` and `{limit="rate"}`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_pops_are_counted_by_their_limit() {
    let name = "held_pops_are_counted_by_their_limit";
    if !common::alone::here(module_path!(), name).await {
        return;
    }
    let daemon = Daemon::start(|_| {}).await;
    let (url, client) = (&daemon.url, Client::new(&daemon.url));
    set_ok(url, "counted", json!({"leases_max": 1})).await;
    set_ok(
        url,
        "metered",
        json!({"pop_rate_max": 1, "pop_rate_burst": 1}),
    )
    .await;
    push_numbered(url, "counted", 2).await;
    push_numbered(url, "metered", 2).await;
    assert!(lease(url, "counted", LONG_LEASE_MS, 0).await.is_some());
    assert_eq!(lease(url, "counted", LONG_LEASE_MS, 0).await, None);
    assert!(client.pop("metered", 0).await.is_some());
    let second = Instant::now();
    let empty = client.pop("metered", 0).await.is_none();
    let throttled = |queue: &'static str, limit: &'static str| {
        let metrics_url = daemon.metrics_url.clone();
        async move {
            let labels = [format!("queue=\"{queue}\""), format!("limit=\"{limit}\"")];
            let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
            common::daemon::metric_sum(&metrics_url, "hotq_pops_throttled_total", &labels).await
        }
    };
    assert_eq!(throttled("counted", "leases").await, 1.0);
    assert_eq!(throttled("counted", "rate").await, 0.0);
    // A token came back only if the pop took over a second (a slow machine).
    if empty || second.elapsed() < Duration::from_millis(900) {
        assert_eq!(throttled("metered", "rate").await, 1.0);
    }
    daemon.stop().await;
}

/// `hotq bench --scenario limits` runs (a short window) and exits 0: the
/// rate run handed out no more than GCRA allows, the leases run acked
/// every item and never sampled more than its limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bench_scenario_holds_both_limits() {
    let args = hotq::bench::BenchArgs {
        scenario: hotq::bench::Scenario::Limits,
        items: 200,
        payload_bytes: 100,
        workers: vec![16],
        modes: Vec::new(),
        coordinators: vec![1],
        stored_requests: false,
        cycles: 0,
        url: None,
        resp_addr: None,
        token: None,
        data_dir: None,
        backend: hotq::bench::BenchBackend::Embedded,
        fdb_cluster_file: None,
        durability: hotq::store::embedded::Durability::Buffered,
        wait_ms: 200,
        // The rate run's window is this, at most 10 s: 3 s here; the
        // leases run's 200 items take a fraction of it.
        deadline_s: 3,
        json: true,
        groups: 0,
        rate: 200,
    };
    assert_eq!(hotq::bench::run(args).await, Ok(0));
}

/// Pushes `key:0` .. `key:{count-1}` under fairness key `key`.
async fn push_keyed(url: &str, queue: &str, key: &str, count: usize) {
    use base64::Engine;
    let body: Vec<String> = (0..count)
        .map(|n| base64::engine::general_purpose::STANDARD.encode(format!("{key}:{n}")))
        .collect();
    let response = http()
        .post(format!("{url}/v1/queues/{queue}/items:batch"))
        .header("hotq-fair-key", key)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
}

/// Under `leases_per_key_max = 1`, a tenant at its limit is passed over
/// for the next tenant's item, a pop finding only tenants at their limit
/// answers empty, a plain pop is not held, and an ack, a nack or an
/// expired lease gives the tenant its place back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_at_its_lease_limit_is_passed_over() {
    let daemon = Daemon::start(|_| {}).await;
    let url = &daemon.url;
    set_ok(url, "tenants", json!({"leases_per_key_max": 1})).await;
    push_keyed(url, "tenants", "a", 4).await;
    push_keyed(url, "tenants", "b", 4).await;
    let body = |leased: Option<(String, String)>| leased.map(|(body, _)| body);
    let key_of = |body: &str| body.split(':').next().unwrap().to_string();
    // a:0 and b:0 tie in the fair order (both start at the head): one of
    // each, in either order.
    let first = lease(url, "tenants", LONG_LEASE_MS, 0).await.unwrap();
    let second = lease(url, "tenants", LONG_LEASE_MS, 0).await.unwrap();
    let mut leased = [first, second];
    leased.sort();
    assert_eq!([leased[0].0.as_str(), leased[1].0.as_str()], ["a:0", "b:0"]);
    let [(_, a_receipt), (_, b_receipt)] = leased;
    assert_eq!(body(lease(url, "tenants", LONG_LEASE_MS, 0).await), None);
    let plain = Client::new(url).pop("tenants", 0).await;
    assert!(
        plain.is_some(),
        "a plain pop is not held by the tenants' limit"
    );
    ack(url, "tenants", &a_receipt).await;
    let (a_next, _short) = lease(url, "tenants", 300, 0).await.unwrap();
    assert_eq!(key_of(&a_next), "a", "a's place came back with its ack");
    let nack = format!("{url}/v1/queues/tenants/nack/{b_receipt}");
    let status = http().post(nack).send().await.unwrap().status();
    assert!(status.is_success(), "nack: {status}");
    assert_eq!(
        body(lease(url, "tenants", LONG_LEASE_MS, 0).await).as_deref(),
        Some("b:0")
    );
    // a's lease expires unacked: a's place comes back with its item.
    let again = lease(url, "tenants", LONG_LEASE_MS, 30_000).await;
    assert_eq!(body(again), Some(a_next));
    daemon.stop().await;
}

/// 24 workers on two daemons lease and ack three tenants' 60 items under
/// `leases_per_key_max = 2`: no tenant ever has more than 2 items held
/// (counted by the workers), every item is delivered once, and the
/// tenants' places all come back (nothing left leased).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn leases_per_key_max_holds_for_every_tenant_on_two_daemons() {
    let (first, second) = two_daemons("shared", json!({"leases_per_key_max": 2})).await;
    for key in ["a", "b", "c"] {
        push_keyed(&first.url, "shared", key, 20).await;
    }
    let held: Arc<std::sync::Mutex<std::collections::HashMap<String, (i64, i64)>>> = Arc::default();
    let acked = Arc::new(AtomicI64::new(0));
    let deadline = Instant::now() + BOUND * 3;
    let mut workers = Vec::new();
    for worker in 0..24 {
        let url = url_of(&first, &second, worker);
        let (held, acked) = (held.clone(), acked.clone());
        workers.push(tokio::spawn(async move {
            let mut bodies = Vec::new();
            while acked.load(Ordering::SeqCst) < 60 {
                assert!(Instant::now() < deadline, "the drain took over its bound");
                let Some((body, receipt)) = lease(&url, "shared", LONG_LEASE_MS, 300).await else {
                    continue;
                };
                let key = body.split(':').next().unwrap().to_string();
                {
                    let mut held = held.lock().unwrap();
                    let (now, most) = held.entry(key.clone()).or_default();
                    *now += 1;
                    *most = (*most).max(*now);
                }
                tokio::task::yield_now().await;
                held.lock().unwrap().get_mut(&key).unwrap().0 -= 1;
                ack(&url, "shared", &receipt).await;
                acked.fetch_add(1, Ordering::SeqCst);
                bodies.push(body);
            }
            bodies
        }));
    }
    let mut seen = HashSet::new();
    for worker in workers {
        for body in worker.await.unwrap() {
            assert!(seen.insert(body.clone()), "{body} delivered twice");
        }
    }
    assert_eq!(seen.len(), 60);
    for (key, (_, most)) in held.lock().unwrap().iter() {
        assert!(*most <= 2, "tenant {key} held {most} leases");
    }
    assert_eq!(Client::new(&first.url).stats("shared").await.leased, 0);
    second.stop().await;
    first.stop().await;
}

/// 32 workers lease and ack under `leases_max = 20` on two daemons; mid
/// drain the limit drops to 4 through one daemon: once the leases taken
/// before the change have ended, the workers never again hold more than
/// 4, with no restart, and every item is still delivered once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_limit_lowered_under_load_holds_from_then_on() {
    const ITEMS: i64 = 600;
    let (first, second) = two_daemons("lowered", json!({"leases_max": 20})).await;
    push_numbered(&first.url, "lowered", ITEMS as usize).await;
    let held = Arc::new(AtomicI64::new(0));
    // The most held since the last reset (reset once the change applies).
    let held_max = Arc::new(AtomicI64::new(0));
    let acked = Arc::new(AtomicI64::new(0));
    let deadline = Instant::now() + BOUND * 3;
    let mut workers = Vec::new();
    for worker in 0..32 {
        let url = url_of(&first, &second, worker);
        let (held, held_max, acked) = (held.clone(), held_max.clone(), acked.clone());
        workers.push(tokio::spawn(async move {
            while acked.load(Ordering::SeqCst) < ITEMS {
                assert!(Instant::now() < deadline, "the drain took over its bound");
                let Some((_, receipt)) = lease(&url, "lowered", LONG_LEASE_MS, 300).await else {
                    continue;
                };
                raise(&held_max, held.fetch_add(1, Ordering::SeqCst) + 1);
                tokio::task::yield_now().await;
                held.fetch_sub(1, Ordering::SeqCst);
                ack(&url, "lowered", &receipt).await;
                acked.fetch_add(1, Ordering::SeqCst);
            }
        }));
    }
    eventually("a third acked", BOUND, || async {
        acked.load(Ordering::SeqCst) >= ITEMS / 3
    })
    .await;
    set_ok(&second.url, "lowered", json!({"leases_max": 4})).await;
    // The leases taken before the change end; from then on, at most 4.
    let client = Client::new(&first.url);
    eventually(
        "the leases in flight fall to the new limit",
        BOUND,
        || async { client.stats("lowered").await.leased <= 4 },
    )
    .await;
    held_max.store(held.load(Ordering::SeqCst), Ordering::SeqCst);
    let acked_at_change = acked.load(Ordering::SeqCst);
    for worker in workers {
        worker.await.unwrap();
    }
    assert!(acked_at_change < ITEMS, "changed under load");
    let most = held_max.load(Ordering::SeqCst);
    assert!(most <= 4, "{most} held after the limit fell to 4");
    assert_eq!(client.stats("lowered").await.leased, 0);
    second.stop().await;
    first.stop().await;
}

/// Under `pop_rate_per_key_max = 1` (burst 1), a tenant that just had
/// its item is passed over for the next tenant's, and a pop finding only
/// tenants waiting for their next token answers empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_over_its_rate_is_passed_over() {
    let daemon = Daemon::start(|_| {}).await;
    let (url, client) = (&daemon.url, Client::new(&daemon.url));
    set_ok(url, "metered", json!({"pop_rate_per_key_max": 1})).await;
    push_keyed(url, "metered", "a", 3).await;
    push_keyed(url, "metered", "b", 3).await;
    let began = Instant::now();
    let first = client.pop("metered", 0).await.unwrap();
    let second = client.pop("metered", 0).await.unwrap();
    let third = client.pop("metered", 0).await;
    let mut both = [first.clone(), second.clone()];
    both.sort();
    // A token came back only if this took over a second (a slow machine).
    if began.elapsed() < Duration::from_millis(900) {
        assert_eq!(both, ["a:0", "b:0"], "one item of each tenant");
        assert_eq!(third, None, "both tenants wait for their next token");
    }
    daemon.stop().await;
}

/// 16 workers on two daemons pop two tenants' items under
/// `pop_rate_per_key_max = 5` (burst 1): neither tenant ever gets more
/// than its burst plus its rate times the time since the first pop.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pop_rate_per_key_max_holds_for_each_tenant_on_two_daemons() {
    const PER_KEY: usize = 10;
    let (first, second) = two_daemons("paced", json!({"pop_rate_per_key_max": 5})).await;
    push_keyed(&first.url, "paced", "a", 40).await;
    push_keyed(&first.url, "paced", "b", 40).await;
    let got: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
    let began = Instant::now();
    let mut workers = Vec::new();
    for worker in 0..16 {
        let url = url_of(&first, &second, worker);
        let got = got.clone();
        workers.push(tokio::spawn(async move {
            let client = Client::new(&url);
            while got.lock().unwrap().len() < 2 * PER_KEY {
                assert!(began.elapsed() < BOUND, "the rates never let 20 go");
                if let Some(body) = client.pop("paced", 300).await {
                    got.lock().unwrap().push(body);
                }
            }
        }));
    }
    for worker in workers {
        worker.await.unwrap();
    }
    let elapsed_s = began.elapsed().as_secs_f64();
    let allowed = 1.0 + 5.0 * elapsed_s;
    let got = std::mem::take(&mut *got.lock().unwrap());
    for key in ["a", "b"] {
        let count = got.iter().filter(|body| body.starts_with(key)).count();
        assert!(
            count as f64 <= allowed,
            "{key}: {count} in {elapsed_s:.3} s, the rate allows {allowed:.1}"
        );
    }
    second.stop().await;
    first.stop().await;
}

/// Over RESP (`SETTINGS` with JSON, `POP … LEASE`, redis-rs as a client):
/// a leased pop at `leases_max` answers an empty array, never an error,
/// and the next after an `ACK` gets the item.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_resp_a_held_pop_answers_empty() {
    use common::resp::{call, redis};
    use redis::Value as R;
    let daemon = Daemon::start_resp(|_| {}).await;
    let mut con = redis(&daemon.redis_url()).await;
    call(&mut con, &["SETTINGS", "capped", r#"{"leases_max": 1}"#]).await;
    call(&mut con, &["PUSH", "capped", "one", "two"]).await;
    let entries = |reply: R| match reply {
        R::Array(mut parts) => match parts.remove(0) {
            R::Array(entries) => entries,
            other => panic!("entries: {other:?}"),
        },
        other => panic!("a POP reply: {other:?}"),
    };
    let first = entries(call(&mut con, &["POP", "capped", "LEASE", "30000"]).await);
    let receipt = match &first[..] {
        [R::Array(entry)] => match &entry[0] {
            R::BulkString(bytes) => String::from_utf8(bytes.clone()).unwrap(),
            other => panic!("a receipt: {other:?}"),
        },
        other => panic!("one entry: {other:?}"),
    };
    let held = entries(call(&mut con, &["POP", "capped", "LEASE", "30000"]).await);
    assert!(held.is_empty(), "held back: {held:?}");
    call(&mut con, &["ACK", "capped", &receipt]).await;
    let next = entries(call(&mut con, &["POP", "capped", "LEASE", "30000"]).await);
    assert_eq!(next.len(), 1, "{next:?}");
    daemon.stop().await;
}

/// `path=direct` (the recipe's pop, for comparison) counts against the
/// rate too: under `pop_rate_max = 1` the second direct pop answers 204.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_direct_path_pop_obeys_the_rate() {
    let daemon = Daemon::start(|_| {}).await;
    let url = &daemon.url;
    set_ok(
        url,
        "recipe",
        json!({"pop_rate_max": 1, "pop_rate_burst": 1}),
    )
    .await;
    push_numbered(url, "recipe", 3).await;
    let direct = || async {
        let path = format!("{url}/v1/queues/recipe/pop?path=direct");
        http().post(path).send().await.unwrap().status()
    };
    assert_eq!(direct().await, StatusCode::OK);
    let second = Instant::now();
    let status = direct().await;
    if second.elapsed() < Duration::from_millis(900) {
        assert_eq!(status, StatusCode::NO_CONTENT, "held by the rate");
    }
    daemon.stop().await;
}

/// A tenant held at its `leases_per_key_max` whose backlog fills the head
/// of the queue (the other tenant's items went) does not hide the other
/// tenant's items: 60 leased pops in a row each get one of b's, far past
/// the 32 items a pop first reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_tenant_s_backlog_does_not_hide_the_others() {
    let daemon = Daemon::start(|_| {}).await;
    let url = &daemon.url;
    set_ok(url, "crowded", json!({"leases_per_key_max": 1})).await;
    push_keyed(url, "crowded", "a", 100).await;
    push_keyed(url, "crowded", "b", 100).await;
    // Hold a: its one lease, never acked here.
    let mut held = None;
    while held.is_none() {
        let (body, receipt) = lease(url, "crowded", LONG_LEASE_MS, 0).await.unwrap();
        match body.starts_with("a:") {
            true => held = Some(receipt),
            false => ack(url, "crowded", &receipt).await,
        }
    }
    for n in 0..60 {
        let (body, receipt) = lease(url, "crowded", LONG_LEASE_MS, 0)
            .await
            .unwrap_or_else(|| panic!("pop {n}: b's items were hidden"));
        assert!(body.starts_with("b:"), "pop {n}: {body}");
        ack(url, "crowded", &receipt).await;
    }
    daemon.stop().await;
}

/// A lease row nothing cleared (an older binary settled its lease, say)
/// stops counting when its lease would have ended: a pop waiting behind
/// it is served then, not stuck.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_row_left_behind_stops_counting_past_its_expiry() {
    use hotq::store::{Store, Transaction};
    let daemon = Daemon::start(|_| {}).await;
    let url = &daemon.url;
    set_ok(url, "healing", json!({"leases_per_key_max": 1})).await;
    push_keyed(url, "healing", "a", 1).await;
    let keys = hotq::keys::QueueKeys::new(&hotq::keys::QueueName::new("healing").unwrap());
    // Its lease ended 9.6 s ago: it counts for 0.4 s more.
    let ghost_ends_ms = hotq::envelope::now_ms() + 400;
    let expired_at_ms = ghost_ends_ms - 10_000;
    let txn = daemon.store.begin().unwrap();
    txn.set(&keys.lease_of("a", expired_at_ms, b"ghost"), b"")
        .unwrap();
    txn.commit().await.unwrap();
    let began = hotq::envelope::now_ms();
    if began < ghost_ends_ms {
        let held = lease(url, "healing", LONG_LEASE_MS, 0).await;
        if hotq::envelope::now_ms() < ghost_ends_ms {
            assert_eq!(held, None, "the row counts until then");
        }
    }
    let served = lease(url, "healing", LONG_LEASE_MS, 30_000).await;
    assert_eq!(served.map(|(body, _)| body).as_deref(), Some("a:0"));
    daemon.stop().await;
}
