//! The built `hotq` binary under a load of waiting pops and pushes gets
//! SIGTERM: it exits 0 within a bound, waiting pops withdraw (nothing is
//! stranded in requests or results), and after a restart every pushed item
//! was either delivered or is still there.

use crate::common;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::daemon::http;
use common::process::{start, terminate};
use hotq::envelope::decode_item;
use hotq::keys::{QueueKeys, QueueName};
use hotq::store::embedded::{EmbeddedConfig, EmbeddedStore};
use reqwest::StatusCode;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_under_load_strands_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let running = start(dir.path());
    let client = http();
    let url = running.url.clone();
    let pushed = Arc::new(Mutex::new(Vec::<String>::new()));
    let delivered = Arc::new(Mutex::new(Vec::<String>::new()));
    let mut tasks = Vec::new();
    for pusher in 0..4 {
        let (client, url, pushed) = (client.clone(), url.clone(), pushed.clone());
        tasks.push(tokio::spawn(async move {
            for n in 0..100_000 {
                let id = format!("{pusher}-{n}");
                let Ok(response) = client
                    .post(format!("{url}/v1/queues/load/items"))
                    .body(id.clone())
                    .send()
                    .await
                else {
                    return;
                };
                if response.status() != StatusCode::CREATED {
                    return;
                }
                pushed.lock().unwrap().push(id);
            }
        }));
    }
    for _ in 0..40 {
        let (client, url, delivered) = (client.clone(), url.clone(), delivered.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..1_000_000 {
                let Ok(response) = client
                    .post(format!("{url}/v1/queues/load/pop?wait_ms=20000"))
                    .send()
                    .await
                else {
                    return;
                };
                match response.status() {
                    StatusCode::OK => {
                        let Ok(body) = response.bytes().await else {
                            return;
                        };
                        delivered
                            .lock()
                            .unwrap()
                            .push(String::from_utf8(body.to_vec()).unwrap());
                    }
                    StatusCode::NO_CONTENT => {}
                    _ => return,
                }
            }
        }));
    }
    common::wait_until("a load is running", Duration::from_secs(60), || {
        delivered.lock().unwrap().len() >= 300
    })
    .await;
    let term = tokio::task::spawn_blocking(move || terminate(running));
    term.await.unwrap();
    for task in tasks {
        task.await.unwrap();
    }

    let pushed: HashSet<String> = pushed.lock().unwrap().iter().cloned().collect();
    let delivered_list = delivered.lock().unwrap().clone();
    let delivered: HashSet<String> = delivered_list.iter().cloned().collect();
    assert_eq!(
        delivered.len(),
        delivered_list.len(),
        "an item was delivered twice"
    );

    let keys = QueueKeys::new(&QueueName::new("load").unwrap());
    let remaining: HashSet<String> = {
        let store = EmbeddedStore::open(EmbeddedConfig::new(dir.path())).unwrap();
        assert!(
            common::scan(&store, keys.requests_range()).await.is_empty(),
            "requests stranded"
        );
        assert!(
            common::scan(&store, keys.results_range()).await.is_empty(),
            "results stranded"
        );
        common::scan(&store, keys.items_range())
            .await
            .iter()
            .map(|row| String::from_utf8(decode_item(&row.value).unwrap().payload).unwrap())
            .collect()
    };
    assert!(
        remaining.is_disjoint(&delivered),
        "an item was delivered yet remains"
    );
    let missing: Vec<_> = pushed
        .iter()
        .filter(|id| !delivered.contains(*id) && !remaining.contains(*id))
        .collect();
    assert!(
        missing.is_empty(),
        "pushed but neither delivered nor present: {missing:?}"
    );

    // After a restart the remaining items come out over HTTP.
    let running = start(dir.path());
    let mut drained = HashSet::new();
    loop {
        let response = client
            .post(format!("{}/v1/queues/load/pop?max=100", running.url))
            .send()
            .await
            .unwrap();
        if response.status() == StatusCode::NO_CONTENT {
            break;
        }
        let items: Vec<serde_json::Value> = response.json().await.unwrap();
        for item in items {
            let item = item["item"].as_str().unwrap().to_string();
            use base64::Engine;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(item)
                .unwrap();
            drained.insert(String::from_utf8(bytes).unwrap());
        }
    }
    assert_eq!(drained, remaining);
    tokio::task::spawn_blocking(move || terminate(running))
        .await
        .unwrap();
    eprintln!(
        "shutdown: {} pushed, {} delivered before SIGTERM, {} drained after restart",
        pushed.len(),
        delivered.len(),
        drained.len()
    );
}

/// A SIGTERM the moment the daemon says it listens stops it cleanly
/// (exit 0, as `terminate` checks), five times over: its signal handlers
/// are in place before its listeners are bound. (They were installed at
/// the shutdown future's first poll, after the listeners: a SIGTERM in
/// between killed the daemon, as CI once saw after a restart.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigterm_right_after_start_stops_the_daemon_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    tokio::task::spawn_blocking(move || {
        for _ in 0..5 {
            terminate(start(&path));
        }
    })
    .await
    .unwrap();
}
