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
