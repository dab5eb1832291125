//! A commit that returned survives `kill -9`: a child process commits from
//! many tasks (so commits share fsync groups), reports each commit after it
//! returns, and is killed mid-stream; every reported write must be readable
//! after reopening.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use hotq::store::Read;
use hotq::store::embedded::{Durability, EmbeddedConfig, EmbeddedStore};
use hotq::store::{Store, Transaction};

const CHILD_DIR_ENV: &str = "HOTQ_TEST_CHILD_DIR";
const CHILD_DURABILITY_ENV: &str = "HOTQ_TEST_CHILD_DURABILITY";
const WRITERS: u64 = 8;
const REPORTS_BEFORE_KILL: usize = 400;

fn key(writer: u64, n: u64) -> Vec<u8> {
    format!("kill/{writer:02}/{n:08}").into_bytes()
}

/// Not a test on its own: the child side, active only when the parent sets
/// the environment variable.
#[test]
fn child_commit_writer() {
    let Ok(dir) = std::env::var(CHILD_DIR_ENV) else {
        return;
    };
    let durability: Durability = std::env::var(CHILD_DURABILITY_ENV)
        .unwrap()
        .parse()
        .unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async move {
        let mut config = EmbeddedConfig::new(&dir);
        config.durability = durability;
        let store = EmbeddedStore::open(config).unwrap();
        let mut tasks = Vec::new();
        for writer in 0..WRITERS {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                // Bounded: the parent kills us long before this ends.
                for n in 0..1_000_000u64 {
                    let txn = store.begin().unwrap();
                    txn.set(&key(writer, n), &n.to_le_bytes()).unwrap();
                    txn.commit().await.unwrap();
                    let mut out = std::io::stdout().lock();
                    writeln!(out, "committed {writer} {n}").unwrap();
                    out.flush().unwrap();
                }
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
    });
}

fn kill_mid_stream_then_reopen(durability: &str) {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            common::alone::test_name(module_path!(), "child_commit_writer").as_str(),
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_DIR_ENV, dir.path())
        .env(CHILD_DURABILITY_ENV, durability)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (lines_tx, lines_rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut reported: Vec<(u64, u64)> = Vec::new();
    while reported.len() < REPORTS_BEFORE_KILL {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = lines_rx
            .recv_timeout(left)
            .expect("the child reports commits within 120 s");
        if let Some(rest) = line.strip_prefix("committed ") {
            let mut parts = rest.split(' ').map(|p| p.parse::<u64>().unwrap());
            reported.push((parts.next().unwrap(), parts.next().unwrap()));
        }
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    // Lines the child printed before dying are reports too.
    while let Ok(line) = lines_rx.recv_timeout(Duration::from_secs(5)) {
        if let Some(rest) = line.strip_prefix("committed ") {
            let mut parts = rest.split(' ').map(|p| p.parse::<u64>().unwrap());
            reported.push((parts.next().unwrap(), parts.next().unwrap()));
        }
    }

    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let store = EmbeddedStore::open(EmbeddedConfig::new(dir.path())).unwrap();
        let txn = store.begin().unwrap();
        for (writer, n) in &reported {
            let value = txn.get(&key(*writer, *n), Read::Snapshot).await.unwrap();
            assert_eq!(
                value,
                Some(n.to_le_bytes().to_vec()),
                "commit {writer}/{n} was reported, then lost to kill -9 ({durability})"
            );
        }
    });
    assert!(reported.len() >= REPORTS_BEFORE_KILL);
}

#[test]
fn sync_commits_survive_kill_9() {
    kill_mid_stream_then_reopen("sync");
}

#[test]
fn buffered_commits_survive_kill_9_of_the_process() {
    kill_mid_stream_then_reopen("buffered");
}
