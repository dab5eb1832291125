//! A child process runs pushers, poppers and the coordinator on a durable
//! store and reports each push and each delivery as soon as the call
//! returns; it is killed with SIGKILL mid-load. After reopening and letting
//! the reaper run: no item was delivered twice, nothing is stranded in
//! `requests` or `results`, and every reported push is delivered or still
//! queued, apart from at most one in-flight pop per popper (the recipe's
//! pop is at-most-once across a crash). Run with staged pops waiting as
//! memory requests (the default) and as stored requests.

use crate::common;

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use hotq::coordinator::Coordinator;
use hotq::envelope::{End, decode_item};
use hotq::keys::{QueueKeys, QueueName};
use hotq::queue::Queue;
use hotq::staging::StagingConfig;
use hotq::store::Read;
use hotq::store::embedded::{EmbeddedConfig, EmbeddedStore};
use hotq::store::{Store, Transaction, decode_counter};

const CHILD_DIR_ENV: &str = "HOTQ_TEST_CRASH_DIR";
/// "memory" or "stored": where the child's staged pops wait.
const CHILD_REQUESTS_ENV: &str = "HOTQ_TEST_CRASH_REQUESTS";
const PUSHERS: usize = 4;
const POPPERS: usize = 16;
const DELIVERIES_BEFORE_KILL: usize = 2_000;

fn config(requests_in_memory: bool) -> StagingConfig {
    StagingConfig {
        result_grace_ms: 300,
        reap_interval_ms: 100,
        requests_in_memory,
        ..StagingConfig::default()
    }
}

fn say(line: String) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").unwrap();
    out.flush().unwrap();
}

/// Not a test on its own: the child side, active only under the parent.
#[test]
fn child_crash_load() {
    let Ok(dir) = std::env::var(CHILD_DIR_ENV) else {
        return;
    };
    let in_memory = std::env::var(CHILD_REQUESTS_ENV).as_deref() != Ok("stored");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async move {
        let store = EmbeddedStore::open(EmbeddedConfig::new(&dir)).unwrap();
        let coordinator = Coordinator::new(store.clone(), config(in_memory));
        let _timer = coordinator.spawn_timer();
        let name = QueueName::new("crash").unwrap();
        let keys = QueueKeys::new(&name);
        let mut tasks = Vec::new();
        for pusher in 0..PUSHERS {
            let queue = Queue::new(store.clone(), name.clone());
            tasks.push(tokio::spawn(async move {
                // Bounded: the parent kills us long before this ends.
                for n in 0..1_000_000u64 {
                    queue
                        .push(format!("{pusher}-{n}").as_bytes())
                        .await
                        .unwrap();
                    say(format!("pushed {pusher}-{n}"));
                }
            }));
        }
        for _ in 0..POPPERS {
            let (coordinator, keys) = (coordinator.clone(), keys.clone());
            tasks.push(tokio::spawn(async move {
                for _ in 0..10_000_000u64 {
                    let popped = coordinator
                        .pop(&keys, End::Front, Duration::from_millis(300))
                        .await
                        .unwrap();
                    if let Some(item) = popped {
                        say(format!(
                            "delivered {}",
                            String::from_utf8(item.payload).unwrap()
                        ));
                    }
                }
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
    });
}

#[test]
fn kill_9_mid_load_loses_and_duplicates_nothing() {
    kill_9_mid_load(true);
}

#[test]
fn kill_9_mid_load_with_stored_requests_loses_and_duplicates_nothing() {
    kill_9_mid_load(false);
}

fn kill_9_mid_load(in_memory: bool) {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            common::alone::test_name(module_path!(), "child_crash_load").as_str(),
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_DIR_ENV, dir.path())
        .env(
            CHILD_REQUESTS_ENV,
            if in_memory { "memory" } else { "stored" },
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (lines_tx, lines_rx) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut pushed: HashSet<String> = HashSet::new();
    let mut delivered: HashMap<String, usize> = HashMap::new();
    let record =
        |line: String, pushed: &mut HashSet<String>, delivered: &mut HashMap<String, usize>| {
            if let Some(id) = line.strip_prefix("pushed ") {
                pushed.insert(id.to_string());
            } else if let Some(id) = line.strip_prefix("delivered ") {
                *delivered.entry(id.to_string()).or_default() += 1;
            }
        };
    let deadline = Instant::now() + Duration::from_secs(240);
    while delivered.values().sum::<usize>() < DELIVERIES_BEFORE_KILL {
        let line = lines_rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("the child delivers within 240 s");
        record(line, &mut pushed, &mut delivered);
    }
    child.kill().unwrap(); // SIGKILL, mid-load
    child.wait().unwrap();
    while let Ok(line) = lines_rx.recv_timeout(Duration::from_secs(5)) {
        record(line, &mut pushed, &mut delivered);
    }

    let duplicates: Vec<_> = delivered.iter().filter(|(_, n)| **n > 1).collect();
    assert!(duplicates.is_empty(), "delivered twice: {duplicates:?}");

    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let store = EmbeddedStore::open(EmbeddedConfig::new(dir.path())).unwrap();
        let coordinator = Coordinator::new(store.clone(), config(in_memory));
        let keys = QueueKeys::new(&QueueName::new("crash").unwrap());
        // Deadlines were at most 300 ms out, plus 300 ms of grace.
        common::eventually("the reaper empties requests and results", Duration::from_secs(60), || async {
            coordinator.reap_all().await.unwrap();
            common::scan(&store, keys.requests_range()).await.is_empty()
                && common::scan(&store, keys.results_range()).await.is_empty()
        })
        .await;
        let remaining: HashSet<String> = common::scan(&store, keys.items_range())
            .await
            .iter()
            .map(|row| String::from_utf8(decode_item(&row.value).unwrap().payload).unwrap())
            .collect();
        let both: Vec<_> = remaining.iter().filter(|id| delivered.contains_key(*id)).collect();
        assert!(both.is_empty(), "delivered yet still queued: {both:?}");
        let lost: Vec<_> = pushed
            .iter()
            .filter(|id| !remaining.contains(*id) && !delivered.contains_key(*id))
            .collect();
        assert!(
            lost.len() <= POPPERS,
            "{} reported pushes neither delivered nor queued (at most one in-flight pop per popper): {lost:?}",
            lost.len()
        );
        let depth = store.begin().unwrap().get(&keys.depth(), Read::Snapshot).await.unwrap();
        assert_eq!(decode_counter(depth.as_deref()) as usize, remaining.len(), "depth counter matches the items");
        let waiting = store.begin().unwrap().get(&keys.waiting(), Read::Snapshot).await.unwrap();
        assert_eq!(decode_counter(waiting.as_deref()), 0, "waiting counter matches the requests");
        eprintln!(
            "crash ({}): {} pushes reported, {} deliveries, {} remaining, {} in flight at the kill",
            if in_memory { "memory requests" } else { "stored requests" },
            pushed.len(),
            delivered.len(),
            remaining.len(),
            lost.len()
        );
    });
}
