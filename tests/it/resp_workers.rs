//! Workers over RESP as peerbench's `resp-leased-next` runs them: 64
//! connections, each `POP <queue> LEASE 30000 WAIT 100 ACK <the receipt
//! of the item it popped last>`, drain a queue: every item is delivered
//! exactly once, every riding ack answers `acked`, and no lease is left.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::Value;

use crate::common::daemon::Daemon;
use crate::common::resp::redis;

const WORKERS: usize = 64;
const ITEMS: usize = 3_000;

fn strings(value: Value) -> Vec<Value> {
    match value {
        Value::Array(values) => values,
        other => panic!("expected an array, got {other:?}"),
    }
}

/// One worker: pops leased with the last receipt riding, until every item
/// was delivered; answers the items it got.
async fn worker(url: String, delivered: Arc<Mutex<HashSet<String>>>) -> Vec<String> {
    let mut con = redis(&url).await;
    let (mut got, mut last): (Vec<String>, Option<String>) = (Vec::new(), None);
    loop {
        let mut pop = redis::cmd("POP");
        pop.arg("work")
            .arg("LEASE")
            .arg(30_000)
            .arg("WAIT")
            .arg(100);
        let riding = last.take();
        if let Some(receipt) = &riding {
            pop.arg("ACK").arg(receipt);
        }
        let answer: Value = pop.query_async(&mut con).await.unwrap();
        let mut parts = strings(answer);
        let outcomes = strings(parts.pop().unwrap());
        let expected = usize::from(riding.is_some());
        assert_eq!(outcomes.len(), expected);
        for outcome in outcomes {
            assert_eq!(outcome, Value::SimpleString("acked".into()));
        }
        match strings(parts.pop().unwrap()).pop() {
            Some(entry) => {
                let entry = strings(entry);
                let (Value::BulkString(receipt), Value::BulkString(item)) = (&entry[0], &entry[2])
                else {
                    panic!("an entry is [receipt, count, item]: {entry:?}");
                };
                let item = String::from_utf8(item.clone()).unwrap();
                delivered.lock().unwrap().insert(item.clone());
                got.push(item);
                last = Some(String::from_utf8(receipt.clone()).unwrap());
            }
            // The last ack rode on this empty pop; stop once all came.
            None if delivered.lock().unwrap().len() == ITEMS => return got,
            None => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_leased_workers_with_riding_acks_lose_and_duplicate_nothing() {
    let daemon = Daemon::start_resp(|_| {}).await;
    let mut con = redis(&daemon.redis_url()).await;
    for batch in 0..ITEMS / 500 {
        let mut push = redis::cmd("PUSH");
        push.arg("work");
        for i in 0..500 {
            push.arg(format!("item-{:05}", batch * 500 + i));
        }
        let pushed: i64 = push.query_async(&mut con).await.unwrap();
        assert_eq!(pushed, 500);
    }
    let delivered = Arc::new(Mutex::new(HashSet::new()));
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| tokio::spawn(worker(daemon.redis_url(), delivered.clone())))
        .collect();
    let mut all = Vec::new();
    for worker in workers {
        let got = tokio::time::timeout(Duration::from_secs(300), worker)
            .await
            .expect("the drain ends")
            .unwrap();
        all.extend(got);
    }
    assert_eq!(all.len(), ITEMS, "each item delivered once");
    let distinct: HashSet<&String> = all.iter().collect();
    assert_eq!(distinct.len(), ITEMS, "no item twice");
    let stats: Value = redis::cmd("STATS")
        .arg("work")
        .query_async(&mut con)
        .await
        .unwrap();
    let fields = strings(stats);
    let field = |name: &str| {
        let at = fields
            .iter()
            .position(|value| *value == Value::BulkString(name.as_bytes().to_vec()))
            .unwrap();
        fields[at + 1].clone()
    };
    assert_eq!(field("depth"), Value::Int(0));
    assert_eq!(field("leased"), Value::Int(0), "every lease acked");
    daemon.stop().await;
}

/// The item of `[receipt, count, item]`, and its receipt.
fn entry_of(entry: Value) -> (String, String) {
    let entry = strings(entry);
    let (Value::BulkString(receipt), Value::BulkString(item)) = (&entry[0], &entry[2]) else {
        panic!("an entry is [receipt, count, item]: {entry:?}");
    };
    (
        String::from_utf8(receipt.clone()).unwrap(),
        String::from_utf8(item.clone()).unwrap(),
    )
}

/// What the load saw before the kill: pushes answered, items delivered,
/// items whose ack was answered `acked`.
#[derive(Default)]
struct Seen {
    pushed: Vec<String>,
    delivered: Vec<String>,
    acked: HashSet<String>,
}

/// One leased worker until its connection fails (the daemon was killed).
async fn worker_until_killed(url: String, seen: Arc<Mutex<Seen>>) {
    let Ok(client) = redis::Client::open(url) else {
        return;
    };
    let Ok(mut con) = client.get_multiplexed_async_connection().await else {
        return;
    };
    let mut last: Option<(String, String)> = None;
    loop {
        let mut pop = redis::cmd("POP");
        pop.arg("load").arg("LEASE").arg(2_000).arg("WAIT").arg(100);
        if let Some((receipt, _)) = &last {
            pop.arg("ACK").arg(receipt);
        }
        let Ok(answer) = pop.query_async::<Value>(&mut con).await else {
            return;
        };
        let mut parts = strings(answer);
        let outcomes = strings(parts.pop().unwrap());
        let mut seen = seen.lock().unwrap();
        if let Some((_, item)) = last.take()
            && outcomes == [Value::SimpleString("acked".into())]
        {
            seen.acked.insert(item);
        }
        if let Some(entry) = strings(parts.pop().unwrap()).pop() {
            let (receipt, item) = entry_of(entry);
            seen.delivered.push(item.clone());
            last = Some((receipt, item));
        }
    }
}

/// A daemon killed with SIGKILL while a producer pushes and workers pop
/// leased with riding acks, all over RESP, then restarted: every push that
/// was answered is delivered (before the kill or after), and no item whose
/// ack was answered `acked` is delivered again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkill_mid_load_loses_nothing_acknowledged() {
    use crate::common::process;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let path = data.clone();
    let running = tokio::task::spawn_blocking(move || process::start(&path))
        .await
        .unwrap();
    let url = format!("redis://{}/", running.resp);
    let seen = Arc::new(Mutex::new(Seen::default()));
    let producer = {
        let (url, seen) = (url.clone(), seen.clone());
        tokio::spawn(async move {
            let mut con = redis(&url).await;
            for i in 0..100_000 {
                let item = format!("load-{i:06}");
                let answer = redis::cmd("PUSH")
                    .arg("load")
                    .arg(&item)
                    .query_async::<i64>(&mut con)
                    .await;
                match answer {
                    Ok(1) => seen.lock().unwrap().pushed.push(item),
                    _ => return,
                }
            }
        })
    };
    let workers: Vec<_> = (0..8)
        .map(|_| tokio::spawn(worker_until_killed(url.clone(), seen.clone())))
        .collect();
    crate::common::wait_until(
        "200 acks answered before the kill",
        Duration::from_secs(120),
        || seen.lock().unwrap().acked.len() >= 200,
    )
    .await;
    let running = process::kill9_and_restart(running, &data).await;
    for task in workers.into_iter().chain([producer]) {
        tokio::time::timeout(Duration::from_secs(60), task)
            .await
            .unwrap()
            .unwrap();
    }
    // Drain what the restarted daemon holds (unacked leases come back).
    let mut con = redis(&format!("redis://{}/", running.resp)).await;
    let mut after = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the drain after the restart ends"
        );
        let popped: Value = redis::cmd("POP")
            .arg("load")
            .arg("MAX")
            .arg(100)
            .arg("WAIT")
            .arg(500)
            .query_async(&mut con)
            .await
            .unwrap();
        let items = strings(popped);
        if items.is_empty() {
            let stats = strings(
                redis::cmd("STATS")
                    .arg("load")
                    .query_async(&mut con)
                    .await
                    .unwrap(),
            );
            let leased = stats
                .iter()
                .position(|v| *v == Value::BulkString(b"leased".to_vec()))
                .unwrap();
            if stats[leased + 1] == Value::Int(0) {
                break;
            }
        }
        for item in items {
            let Value::BulkString(item) = item else {
                panic!("an item")
            };
            after.push(String::from_utf8(item).unwrap());
        }
    }
    process::kill9(running);
    let seen = seen.lock().unwrap();
    let delivered: HashSet<&String> = seen.delivered.iter().chain(&after).collect();
    let lost: Vec<&String> = seen
        .pushed
        .iter()
        .filter(|item| !delivered.contains(item))
        .collect();
    assert!(
        lost.is_empty(),
        "pushes answered and never delivered: {lost:?}"
    );
    let again: Vec<&String> = after
        .iter()
        .filter(|item| seen.acked.contains(*item))
        .collect();
    assert!(again.is_empty(), "acked items delivered again: {again:?}");
    assert!(seen.pushed.len() >= 200 && !after.is_empty());
}
