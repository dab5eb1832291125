//! DELETE racing pushes and pops over HTTP, kept by payload: every item
//! answered 201 is delivered exactly once, dropped (counted in a DELETE's
//! answer) or still there, and a daemon restarted on the same data
//! directory finds nothing the first one could not see.
//!
//! `tests/delete_races_pushes.rs` keeps counts; this one keeps a ledger of
//! payloads, so a loss names the items, when they were pushed and which
//! DELETEs ran then, and tells an item the store hid (found after the
//! restart) from one it lost. Knobs (environment): `HOTQ_RACE_MS` (run
//! length, default 3,000), `HOTQ_RACE_UNPACED` (pushers do not pause),
//! `HOTQ_RACE_BATCH_MAX` (the fulfiller's batch), `HOTQ_RACE_STORED`
//! (stored requests instead of the memory line), `HOTQ_RACE_BUFFERED`
//! (buffered durability), `HOTQ_RACE_GROUPS` (pushes name one of that many
//! message groups), `HOTQ_RACE_DAEMONS` (daemons on the one store,
//! default 1), `HOTQ_RACE_MEMTABLE` (fjall's memtable size in
//! bytes: a small one flushes throughout the race).

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use common::daemon::{Daemon, http};
use hotq::config::Config;
use hotq::store::embedded::{Durability, EmbeddedConfig, EmbeddedStore};

const QUEUE: &str = "ledger";
const PUSHERS: usize = 6;
const POPPERS: usize = 8;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

fn configure(config: &mut Config) {
    if let Ok(batch) = std::env::var("HOTQ_RACE_BATCH_MAX") {
        config.staging.fulfill_batch_max = batch.parse().expect("a batch size");
    }
    if std::env::var("HOTQ_RACE_STORED").is_ok() {
        config.staging.requests_in_memory = false;
    }
}

/// What the clients saw, by payload; times in ms since the run began.
#[derive(Default)]
struct Ledger {
    /// Payload → (sent, answered 201).
    pushed: BTreeMap<String, (u64, u64)>,
    /// Payload → how many times a pop delivered it.
    delivered: BTreeMap<String, u32>,
    /// Each DELETE: (sent, answered, status, items it says it dropped).
    deletes: Vec<(u64, u64, u16, u64)>,
    /// The longest push, in ms.
    push_ms_max: u64,
}

struct Run {
    /// The daemons sharing the store; client `i` talks to `urls[i % len]`.
    urls: Vec<String>,
    began: Instant,
    ledger: Mutex<Ledger>,
    stop: AtomicBool,
}

impl Run {
    fn url(&self, client: usize) -> &str {
        &self.urls[client % self.urls.len()]
    }

    fn ms(&self) -> u64 {
        self.began.elapsed().as_millis() as u64
    }
}

async fn pusher(run: Arc<Run>, id: usize) {
    let client = http();
    let tag = rand::random::<u32>();
    let mut n = 0u64;
    while !run.stop.load(Ordering::Relaxed) {
        n += 1;
        let batch = 1 + (n as usize % 5);
        let payloads: Vec<String> = (0..batch).map(|i| format!("{tag}-p{id}-{n}-{i}")).collect();
        let sent = run.ms();
        let groups = env_u64("HOTQ_RACE_GROUPS", 0);
        let query = match groups {
            0 => String::new(),
            groups => format!("?group=g{}", rand::random::<u64>() % groups),
        };
        let request = if batch == 1 {
            let request = client
                .post(format!("{}/v1/queues/{QUEUE}/items{query}", run.url(id)))
                .body(payloads[0].clone());
            if n.is_multiple_of(2) {
                request.header("hotq-dedup-id", payloads[0].clone())
            } else {
                request
            }
        } else {
            let items: Vec<serde_json::Value> = payloads
                .iter()
                .enumerate()
                .map(|(i, p)| match i % 2 {
                    0 => serde_json::json!(BASE64.encode(p)),
                    _ => serde_json::json!({"item": BASE64.encode(p), "dedup_id": p}),
                })
                .collect();
            client
                .post(format!(
                    "{}/v1/queues/{QUEUE}/items:batch{query}",
                    run.url(id)
                ))
                .json(&items)
        };
        let answer = request.send().await.unwrap();
        let status = answer.status();
        assert_eq!(status, 201, "{}", answer.text().await.unwrap());
        let answered = run.ms();
        {
            let mut ledger = run.ledger.lock().unwrap();
            ledger.push_ms_max = ledger.push_ms_max.max(answered - sent);
            for payload in payloads {
                ledger.pushed.insert(payload, (sent, answered));
            }
        }
        if std::env::var("HOTQ_RACE_UNPACED").is_err() {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
}

/// The payloads of a 200 pop answered in JSON.
async fn payloads_of(answer: reqwest::Response) -> Vec<String> {
    let items: Vec<serde_json::Value> = answer.json().await.unwrap();
    items
        .iter()
        .map(|item| {
            let bytes = BASE64.decode(item["item"].as_str().unwrap()).unwrap();
            String::from_utf8(bytes).unwrap()
        })
        .collect()
}

async fn popper(run: Arc<Run>, id: usize) {
    let client = http();
    let wait_ms = [0, 200, 1000][id % 3];
    let max = if id.is_multiple_of(2) { 1 } else { 5 };
    while !run.stop.load(Ordering::Relaxed) {
        let answer = client
            .post(format!(
                "{}/v1/queues/{QUEUE}/pop?wait_ms={wait_ms}&max={max}",
                run.url(id)
            ))
            .header("accept", "application/json")
            .send()
            .await
            .unwrap();
        match answer.status().as_u16() {
            200 => {
                let payloads = payloads_of(answer).await;
                let mut ledger = run.ledger.lock().unwrap();
                for payload in payloads {
                    *ledger.delivered.entry(payload).or_default() += 1;
                }
            }
            204 => {}
            other => panic!("pop answered {other}: {}", answer.text().await.unwrap()),
        }
    }
}

async fn delete(run: Arc<Run>) {
    let sent = run.ms();
    let answer = http()
        .delete(format!(
            "{}/v1/queues/{QUEUE}",
            run.url(rand::random::<u32>() as usize)
        ))
        .send()
        .await
        .unwrap();
    let status = answer.status().as_u16();
    let body: serde_json::Value = answer.json().await.unwrap();
    assert!(status == 200 || status == 503, "{status}: {body}");
    let count = |field: &str| body[field].as_u64().unwrap_or(0);
    let dropped = count("items") + count("delayed") + count("leased") + count("results");
    let answered = run.ms();
    run.ledger
        .lock()
        .unwrap()
        .deletes
        .push((sent, answered, status, dropped));
}

/// Pops everything at `url` and returns the payloads: until a pop finds
/// nothing and the queue counts no visible item and none waiting behind a
/// group head (a grouped item is promoted once its head reached its
/// caller, a moment after that pop answered).
async fn drain(url: &str) -> Vec<String> {
    let client = http();
    let mut left = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let answer = client
            .post(format!("{url}/v1/queues/{QUEUE}/pop?max=100&wait_ms=100"))
            .header("accept", "application/json")
            .send()
            .await
            .unwrap();
        if answer.status() == 200 {
            left.extend(payloads_of(answer).await);
            continue;
        }
        assert_eq!(answer.status(), 204);
        let stats = common::daemon::get_json(&format!("{url}/v1/queues/{QUEUE}")).await;
        // A deleted queue has no stats (404): nothing in it either.
        let count = |field: &str| stats[field].as_i64().unwrap_or(0);
        if count("depth") == 0 && count("grouped") == 0 {
            return left;
        }
        assert!(Instant::now() < deadline, "drained within 60 s: {stats}");
    }
}

/// Runs the race against `url` until `run_ms`, then stops every client.
async fn race(run: &Arc<Run>, run_ms: u64) {
    let mut tasks = Vec::new();
    for id in 0..PUSHERS {
        tasks.push(tokio::spawn(pusher(run.clone(), id)));
    }
    for id in 0..POPPERS {
        tasks.push(tokio::spawn(popper(run.clone(), id)));
    }
    let mut deletes = Vec::new();
    // On a clock: a slow DELETE overlaps the next.
    while run.began.elapsed() < Duration::from_millis(run_ms) {
        tokio::time::sleep(Duration::from_millis(200 + rand::random::<u64>() % 400)).await;
        deletes.push(tokio::spawn(delete(run.clone())));
    }
    for task in deletes {
        task.await.unwrap();
    }
    run.stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.unwrap();
    }
}

/// Files under `dir` (fjall's tables and journals: more tables, more flushes).
fn files_in(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .map(|path| if path.is_dir() { files_in(&path) } else { 1 })
        .sum()
}

/// A daemon on the store in `dir`, as the knobs say.
async fn start_in(dir: &std::path::Path, durability: Durability) -> Daemon {
    let mut store = EmbeddedConfig::new(dir);
    store.durability = durability;
    store.memtable_bytes = std::env::var("HOTQ_RACE_MEMTABLE")
        .ok()
        .map(|bytes| bytes.parse().expect("a memtable size in bytes"));
    Daemon::start_on(EmbeddedStore::open(store).unwrap(), configure).await
}

// More worker threads than cores: the OS preempts handlers anywhere, not
// only where they await.
#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn every_acknowledged_push_is_delivered_dropped_or_left_even_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let durability = if std::env::var("HOTQ_RACE_BUFFERED").is_ok() {
        Durability::Buffered
    } else {
        Durability::Sync
    };
    let daemon = start_in(dir.path(), durability).await;
    // `HOTQ_RACE_DAEMONS`: more daemons on the same store (as on one
    // cluster), each its own line of pops.
    let mut others = Vec::new();
    for _ in 1..env_u64("HOTQ_RACE_DAEMONS", 1) {
        others.push(Daemon::start_on(daemon.store.clone(), configure).await);
    }
    let mut urls = vec![daemon.url.clone()];
    urls.extend(others.iter().map(|other| other.url.clone()));
    let run = Arc::new(Run {
        urls,
        began: Instant::now(),
        ledger: Mutex::new(Ledger::default()),
        stop: AtomicBool::new(false),
    });
    race(&run, env_u64("HOTQ_RACE_MS", 3_000)).await;
    let raced = run.ms();
    let left: BTreeSet<String> = drain(&daemon.url).await.into_iter().collect();
    for other in others {
        other.stop().await;
    }
    daemon.stop().await;
    // A second daemon on the same directory: no memory of the first one's
    // reads (nor of its known-empty stretches).
    let again = start_in(dir.path(), durability).await;
    let hidden: BTreeSet<String> = drain(&again.url).await.into_iter().collect();
    again.stop().await;

    let ledger = run.ledger.lock().unwrap();
    let delete_ms_max = ledger.deletes.iter().map(|d| d.1 - d.0).max().unwrap_or(0);
    eprintln!(
        "race ended at {raced} ms, all done at {} ms; longest push {} ms, longest DELETE {delete_ms_max} ms; fjall files {}",
        run.ms(),
        ledger.push_ms_max,
        files_in(dir.path())
    );
    let twice: Vec<&String> = ledger
        .delivered
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(p, _)| p)
        .collect();
    let unknown: Vec<&String> = ledger
        .delivered
        .keys()
        .chain(left.iter())
        .chain(hidden.iter())
        .filter(|p| !ledger.pushed.contains_key(*p))
        .collect();
    let gone: Vec<(&String, &(u64, u64))> = ledger
        .pushed
        .iter()
        .filter(|(p, _)| {
            !ledger.delivered.contains_key(*p) && !left.contains(*p) && !hidden.contains(*p)
        })
        .collect();
    let dropped: u64 = ledger.deletes.iter().map(|d| d.3).sum();
    eprintln!(
        "deletes {}: pushed {}, delivered {}, dropped {dropped}, left {}, hidden (found after restart) {}, not seen again {}",
        ledger.deletes.len(),
        ledger.pushed.len(),
        ledger.delivered.len(),
        left.len(),
        hidden.len(),
        gone.len(),
    );
    let lost = gone.len() as i64 - dropped as i64;
    if lost != 0 || !hidden.is_empty() {
        let overlapping = |(sent, answered): (u64, u64)| -> Vec<(u64, u64, u16, u64)> {
            ledger
                .deletes
                .iter()
                .filter(|d| d.0 <= answered + 5 && sent <= d.1 + 5)
                .copied()
                .collect()
        };
        for payload in hidden.iter().take(20) {
            let times = ledger.pushed[payload];
            eprintln!(
                "hidden {payload}: pushed {times:?}, DELETEs then (sent, answered, status, dropped): {:?}",
                overlapping(times)
            );
        }
        for (payload, times) in gone.iter().take(40) {
            eprintln!(
                "not seen again {payload}: pushed {times:?}, DELETEs then: {:?}",
                overlapping(**times)
            );
        }
    }
    assert!(!ledger.deletes.is_empty());
    assert!(twice.is_empty(), "delivered more than once: {twice:?}");
    assert!(unknown.is_empty(), "never pushed: {unknown:?}");
    assert!(
        hidden.is_empty(),
        "{} items the first daemon could not see were found after a restart",
        hidden.len()
    );
    assert_eq!(
        lost,
        0,
        "not seen again {} - dropped {dropped} (DELETE answers)",
        gone.len()
    );
}
