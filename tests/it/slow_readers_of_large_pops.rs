//! Slow readers of large pops over HTTP: clients that ask for 1,000 items
//! of 4 KiB (an answer of about 5.5 MB, more than the socket buffers hold)
//! and read it 16 KiB at a time, or hang up after the first 64 KiB.
//!
//! While their answers are stuck in the sockets the daemon stays
//! responsive (pushes, pops and `/healthz` of another queue answer), and
//! at the end the books balance: every item read whole is delivered once;
//! a leased pop hung up mid-body gets its items back when the leases
//! expire; a plain pop hung up mid-body loses at most its own answer
//! (plain pops are at most once) and nothing else.

use crate::common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use common::daemon::{Daemon, http};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const POP_MAX: usize = 1_000;
const PAYLOAD_BYTES: usize = 4 * 1024;
const READ_CHUNK: usize = 16 * 1024;
const HANG_UP_AFTER: usize = 64 * 1024;

fn payload(queue: &str, n: usize) -> String {
    let head = format!("{queue}-{n}-");
    format!("{head}{}", "x".repeat(PAYLOAD_BYTES - head.len()))
}

async fn push_all(url: &str, queue: &str, count: usize) {
    let client = http();
    for start in (0..count).step_by(200) {
        let items: Vec<String> = (start..(start + 200).min(count))
            .map(|n| BASE64.encode(payload(queue, n)))
            .collect();
        let answer = client
            .post(format!("{url}/v1/queues/{queue}/items:batch"))
            .json(&items)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 201);
    }
}

/// The payloads of a JSON pop answer.
fn payloads(body: &[u8]) -> Vec<String> {
    let items: Vec<serde_json::Value> = serde_json::from_slice(body).unwrap();
    items
        .iter()
        .map(|item| {
            String::from_utf8(BASE64.decode(item["item"].as_str().unwrap()).unwrap()).unwrap()
        })
        .collect()
}

/// A pop over a raw connection, read `READ_CHUNK` bytes at a time with a
/// pause between reads. `hang_up`: close the connection once that much of
/// the answer was read (`None` then). Returns the payloads read.
async fn slow_pop(url: &str, path: &str, hang_up: bool) -> Option<Vec<String>> {
    let address = url.trim_start_matches("http://");
    let mut stream = TcpStream::connect(address).await.unwrap();
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {address}\r\nAccept: application/json\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let mut chunk = vec![0u8; READ_CHUNK];
    loop {
        let read = stream.read(&mut chunk).await.unwrap();
        if read == 0 {
            break;
        }
        answer.extend_from_slice(&chunk[..read]);
        if hang_up && answer.len() >= HANG_UP_AFTER {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let split = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a header block");
    let head = String::from_utf8_lossy(&answer[..split]).to_string();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    Some(payloads(&answer[split + 4..]))
}

/// Pushes, pops and health checks on queue `other` until `stop`: the
/// longest of them, in ms.
async fn probe(url: String, stop: Arc<AtomicBool>, longest_ms: Arc<AtomicU64>) {
    let client = http();
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let began = Instant::now();
        let pushed = client
            .post(format!("{url}/v1/queues/other/items"))
            .body(format!("probe-{n}"))
            .send()
            .await
            .unwrap();
        assert_eq!(pushed.status(), 201);
        let popped = client
            .post(format!("{url}/v1/queues/other/pop"))
            .send()
            .await
            .unwrap();
        assert_eq!(popped.status(), 200);
        let health = client.get(format!("{url}/healthz")).send().await.unwrap();
        assert_eq!(health.status(), 200);
        longest_ms.fetch_max(began.elapsed().as_millis() as u64, Ordering::Relaxed);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Pops everything of `queue` (waiting out leases that are due to expire).
async fn drain(url: &str, queue: &str) -> Vec<String> {
    let client = http();
    let mut left = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let answer = client
            .post(format!("{url}/v1/queues/{queue}/pop?max=100&wait_ms=500"))
            .header("accept", "application/json")
            .send()
            .await
            .unwrap();
        if answer.status() == 200 {
            left.extend(payloads(&answer.bytes().await.unwrap()));
            continue;
        }
        assert_eq!(answer.status(), 204);
        let stats = common::daemon::get_json(&format!("{url}/v1/queues/{queue}")).await;
        if stats["leased"] == 0 && stats["depth"] == 0 {
            return left;
        }
        assert!(
            Instant::now() < deadline,
            "{queue} drained within 60 s: {stats}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn slow_and_vanishing_readers_of_thousand_item_pops_lose_and_block_nothing() {
    let daemon = Daemon::start(|config| config.pop_max_items = POP_MAX).await;
    let url = daemon.url.clone();
    push_all(&url, "big", 3 * POP_MAX).await;
    push_all(&url, "plain", 2 * POP_MAX).await;

    let stop = Arc::new(AtomicBool::new(false));
    let longest_ms = Arc::new(AtomicU64::new(0));
    let prober = tokio::spawn(probe(url.clone(), stop.clone(), longest_ms.clone()));
    let whole = format!("/v1/queues/big/pop?max={POP_MAX}");
    let leased = format!("/v1/queues/big/pop?max={POP_MAX}&lease_ms=1500");
    let plain = format!("/v1/queues/plain/pop?max={POP_MAX}");
    let (first, second, vanished_leased, vanished_plain) = tokio::join!(
        slow_pop(&url, &whole, false),
        slow_pop(&url, &whole, false),
        slow_pop(&url, &leased, true),
        slow_pop(&url, &plain, true),
    );
    stop.store(true, Ordering::Relaxed);
    prober.await.unwrap();
    assert!(vanished_leased.is_none() && vanished_plain.is_none());
    let (first, second) = (first.unwrap(), second.unwrap());
    assert!(!first.is_empty() && !second.is_empty());
    let longest_ms = longest_ms.load(Ordering::Relaxed);
    eprintln!(
        "read whole: {} + {}; longest probe (push, pop, healthz) while stuck: {longest_ms} ms",
        first.len(),
        second.len()
    );
    assert!(
        longest_ms < 10_000,
        "the daemon stayed responsive: a probe took {longest_ms} ms"
    );

    // "big": every item read whole once, or still there (the leased
    // answer's items came back when its leases expired).
    let left = drain(&url, "big").await;
    let mut seen = BTreeSet::new();
    for item in first.iter().chain(&second).chain(&left) {
        assert!(
            seen.insert(item.clone()),
            "delivered twice: {}",
            &item[..20]
        );
    }
    let pushed: BTreeSet<String> = (0..3 * POP_MAX).map(|n| payload("big", n)).collect();
    assert_eq!(seen, pushed, "every item of big read whole once or left");

    // "plain": the vanished answer's items are gone, at most one answer's.
    let left = drain(&url, "plain").await;
    let lost = 2 * POP_MAX - left.len();
    eprintln!("plain: {lost} items went with the answer hung up mid-body");
    assert!(lost > 0 && lost <= POP_MAX, "lost {lost}");
    assert_eq!(
        left.iter().collect::<BTreeSet<_>>().len(),
        left.len(),
        "no item of plain twice"
    );
    daemon.stop().await;
}
