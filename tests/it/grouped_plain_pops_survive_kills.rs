//! SIGKILL during the hand-off of grouped plain pops, over HTTP against
//! the built daemon.
//!
//! Items of twelve message groups are popped without a lease (a plain
//! pop's commit puts the group in hand-off until the item reached its
//! caller) by workers of one and of five items, while the daemon is killed
//! four times at moments the load sets and restarted on the same data
//! directory. Afterwards every group finishes (a hand-off cut short by the
//! kill is ended by the timer), no item is delivered twice, none comes
//! before an earlier item of its group, and the only items missing are
//! those of pops that got no answer (plain pops are at most once).

use crate::common;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use common::daemon::http;
use common::process::{kill9_and_restart, start, terminate};

const QUEUE: &str = "grouped";
const GROUPS: usize = 12;
const PER_GROUP: usize = 80;
const WORKERS: usize = 8;
const KILLS: usize = 4;

/// One delivery: when its pop was sent and answered (since the start).
#[derive(Clone, Copy)]
struct Delivery {
    seq: usize,
    sent: Duration,
    answered: Duration,
}

#[derive(Default)]
struct Log {
    /// Per group, its deliveries.
    by_group: BTreeMap<usize, Vec<Delivery>>,
    delivered: usize,
    /// Pops that got no answer (the daemon died under them), by their max.
    unanswered_max: usize,
}

/// `g{group}-{seq}` → (group, seq).
fn parse(payload: &str) -> (usize, usize) {
    let (group, seq) = payload.trim_start_matches('g').split_once('-').unwrap();
    (group.parse().unwrap(), seq.parse().unwrap())
}

async fn worker(
    url: Arc<RwLock<String>>,
    log: Arc<Mutex<Log>>,
    done: Arc<RwLock<bool>>,
    began: Instant,
    max: usize,
) {
    let client = http();
    while !*done.read().unwrap() {
        let base = url.read().unwrap().clone();
        let sent = began.elapsed();
        let answer = client
            .post(format!(
                "{base}/v1/queues/{QUEUE}/pop?max={max}&wait_ms=200"
            ))
            .header("accept", "application/json")
            .send()
            .await;
        let body = match answer {
            Ok(answer) if answer.status() == 200 => answer.bytes().await,
            Ok(answer) => {
                assert_eq!(answer.status(), 204);
                continue;
            }
            Err(error) => Err(error),
        };
        let body = match body {
            Ok(body) => body,
            // The daemon was down: this pop never reached it.
            Err(error) if error.is_connect() => {
                tokio::time::sleep(Duration::from_millis(5)).await;
                continue;
            }
            Err(_) => {
                // The daemon died under this pop: it may have taken items.
                log.lock().unwrap().unanswered_max += max;
                continue;
            }
        };
        let answered = began.elapsed();
        let items: Vec<serde_json::Value> = serde_json::from_slice(&body).unwrap();
        let mut log = log.lock().unwrap();
        for item in items {
            let bytes = BASE64.decode(item["item"].as_str().unwrap()).unwrap();
            let (group, seq) = parse(&String::from_utf8(bytes).unwrap());
            assert_eq!(item["group"], format!("g{group}"));
            log.by_group.entry(group).or_default().push(Delivery {
                seq,
                sent,
                answered,
            });
            log.delivered += 1;
        }
    }
}

async fn push_groups(url: &str) {
    let client = http();
    for start in (0..PER_GROUP).step_by(20) {
        for group in 0..GROUPS {
            let items: Vec<String> = (start..start + 20)
                .map(|seq| BASE64.encode(format!("g{group}-{seq}")))
                .collect();
            let answer = client
                .post(format!(
                    "{url}/v1/queues/{QUEUE}/items:batch?group=g{group}"
                ))
                .json(&items)
                .send()
                .await
                .unwrap();
            assert_eq!(answer.status(), 201);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn grouped_plain_pops_keep_order_and_lose_only_unanswered_pops_across_kills() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    let first = tokio::task::spawn_blocking(move || start(&path))
        .await
        .unwrap();
    push_groups(&first.url).await;
    let total = GROUPS * PER_GROUP;

    let began = Instant::now();
    let url = Arc::new(RwLock::new(first.url.clone()));
    let log = Arc::new(Mutex::new(Log::default()));
    let done = Arc::new(RwLock::new(false));
    let workers: Vec<_> = (0..WORKERS)
        .map(|id| {
            let max = if id.is_multiple_of(2) { 1 } else { 5 };
            tokio::spawn(worker(url.clone(), log.clone(), done.clone(), began, max))
        })
        .collect();
    let mut running = first;
    for kill in 1..=KILLS {
        let target = kill * total / (KILLS + 2);
        common::wait_until(
            "the load to reach the next kill",
            Duration::from_secs(120),
            || log.lock().unwrap().delivered >= target,
        )
        .await;
        // A random few ms more, so the kill lands anywhere in a pop's
        // commit, hand-off or promotion of the group's next item.
        tokio::time::sleep(Duration::from_millis(rand::random::<u64>() % 30)).await;
        running = kill9_and_restart(running, dir.path()).await;
        *url.write().unwrap() = running.url.clone();
    }
    // Done when nothing is left: a group whose hand-off the kill cut short
    // waits for the timer (the pop's deadline, the result grace and 30 s).
    let stats_url = format!("{}/v1/queues/{QUEUE}", running.url);
    common::eventually("every group to finish", Duration::from_secs(150), || {
        let (client, stats_url) = (http(), stats_url.clone());
        async move {
            let Ok(answer) = client.get(&stats_url).send().await else {
                return false;
            };
            let stats: serde_json::Value = answer.json().await.unwrap();
            stats["depth"] == 0 && stats["grouped"] == 0 && stats["delayed"] == 0
        }
    })
    .await;
    *done.write().unwrap() = true;
    for worker in workers {
        worker.await.unwrap();
    }
    tokio::task::spawn_blocking(move || terminate(running))
        .await
        .unwrap();

    let log = log.lock().unwrap();
    let mut inversions = Vec::new();
    let mut seen: HashMap<(usize, usize), usize> = HashMap::new();
    for (group, deliveries) in &log.by_group {
        for d in deliveries {
            *seen.entry((*group, d.seq)).or_default() += 1;
        }
        // An inversion for sure: a later item of the group answered before
        // the pop of an earlier one was even sent.
        for a in deliveries {
            for b in deliveries {
                if b.seq > a.seq && b.answered < a.sent {
                    inversions.push((*group, a.seq, b.seq));
                }
            }
        }
    }
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    let missing = total - seen.len();
    eprintln!(
        "{total} items in {GROUPS} groups, {KILLS} SIGKILLs: {} delivered, {missing} missing, pops unanswered could hold {}",
        log.delivered, log.unanswered_max
    );
    assert!(twice.is_empty(), "delivered twice: {twice:?}");
    assert!(inversions.is_empty(), "group order broken: {inversions:?}");
    assert!(
        missing <= log.unanswered_max,
        "{missing} items missing, but unanswered pops could hold only {}",
        log.unanswered_max
    );
}
