//! Skipping known-empty stretches never changes what a read returns.
//!
//! Random sets, clears and range reads (both directions, random bounds and
//! limits) on a small key space, from transactions begun at different
//! times and kept open while others commit, so stretches are recorded,
//! split by writes inside them, rejoined, and consulted by readers both
//! newer and older than them. Every read is checked against a model: the
//! committed state at the transaction's read version (taken at its first
//! read, not when it began) plus its own writes.

use crate::common;

use std::collections::BTreeMap;

use hotq::store::embedded::{Durability, EmbeddedStore, EmbeddedTxn};
use hotq::store::{RangeRead, Read, Store, StoreError, Transaction};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const KEYS: u8 = 48;
const STEPS: usize = 6_000;
const OPEN_MAX: usize = 6;

type State = BTreeMap<Vec<u8>, Vec<u8>>;

fn key(n: u8) -> Vec<u8> {
    vec![b'k', n]
}

/// An open transaction and what it must see.
struct Open {
    txn: EmbeddedTxn,
    /// From its read version on: the committed state then, plus its own
    /// writes. `None` before (`begin` takes no read version).
    view: Option<State>,
    /// Its own writes in order, applied to the committed state if it commits.
    writes: Vec<Write>,
}

#[derive(Clone)]
enum Write {
    Set(Vec<u8>, Vec<u8>),
    Clear(Vec<u8>),
    ClearRange(Vec<u8>, Vec<u8>),
}

fn apply(state: &mut State, write: Write) {
    match write {
        Write::Set(key, value) => {
            state.insert(key, value);
        }
        Write::Clear(key) => {
            state.remove(&key);
        }
        Write::ClearRange(begin, end) => state.retain(|key, _| *key < begin || *key >= end),
    }
}

fn expected(view: &State, begin: &[u8], end: &[u8], limit: usize, reverse: bool) -> Vec<Vec<u8>> {
    let rows = view.range::<[u8], _>((
        std::ops::Bound::Included(begin),
        std::ops::Bound::Excluded(end),
    ));
    let keys: Vec<Vec<u8>> = if reverse {
        rows.rev().take(limit).map(|(k, _)| k.clone()).collect()
    } else {
        rows.take(limit).map(|(k, _)| k.clone()).collect()
    };
    keys
}

async fn run(seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let (store, _dir): (EmbeddedStore, _) = common::embedded_store(Durability::Buffered);
    let mut committed = State::new();
    let mut open: Vec<Open> = Vec::new();
    let mut reads = 0usize;
    for step in 0..STEPS {
        if open.is_empty() || (open.len() < OPEN_MAX && rng.random_bool(0.2)) {
            open.push(Open {
                txn: store.begin().unwrap(),
                view: None,
                writes: Vec::new(),
            });
            continue;
        }
        let at = rng.random_range(0..open.len());
        match rng.random_range(0..11) {
            // A range clear, as a delete of a whole queue does.
            10 => {
                let (a, b) = (rng.random_range(0..=KEYS), rng.random_range(0..=KEYS));
                let (begin, end) = (key(a.min(b)), key(a.max(b)));
                let o = &mut open[at];
                o.txn.clear_range(&begin, &end).unwrap();
                if let Some(view) = o.view.as_mut() {
                    apply(view, Write::ClearRange(begin.clone(), end.clone()));
                }
                o.writes.push(Write::ClearRange(begin, end));
            }
            // Writes: mostly clears, so stretches of tombstones form.
            0..=2 => {
                let n = rng.random_range(0..KEYS);
                let o = &mut open[at];
                if rng.random_bool(0.4) {
                    o.txn.set(&key(n), &[step as u8]).unwrap();
                    if let Some(view) = o.view.as_mut() {
                        view.insert(key(n), vec![step as u8]);
                    }
                    o.writes.push(Write::Set(key(n), vec![step as u8]));
                } else {
                    o.txn.clear(&key(n)).unwrap();
                    if let Some(view) = o.view.as_mut() {
                        view.remove(&key(n));
                    }
                    o.writes.push(Write::Clear(key(n)));
                }
            }
            3 => {
                let o = open.swap_remove(at);
                match o.txn.commit().await {
                    Ok(()) => {
                        for write in o.writes {
                            apply(&mut committed, write);
                        }
                    }
                    // A non-snapshot read lost to a later commit.
                    Err(StoreError::Conflict | StoreError::TooOld) => {}
                    Err(error) => panic!("step {step}: commit failed: {error}"),
                }
            }
            _ => {
                let (a, b) = (rng.random_range(0..=KEYS), rng.random_range(0..=KEYS));
                let (begin, end) = (key(a.min(b)), key(a.max(b)));
                let limit = rng.random_range(1..6);
                let reverse = rng.random_bool(0.5);
                let o = &mut open[at];
                if o.view.is_none() {
                    // Its first read: a read of a key it never writes
                    // takes the read version now, so the view is the
                    // committed state now plus what it wrote before.
                    o.txn.get(b"anchor", Read::Snapshot).await.unwrap();
                    let mut view = committed.clone();
                    for write in &o.writes {
                        apply(&mut view, write.clone());
                    }
                    o.view = Some(view);
                }
                let o = &open[at];
                let mut read = RangeRead::new(&begin, &end, limit);
                read.reverse = reverse;
                read.read = if rng.random_bool(0.5) {
                    Read::Snapshot
                } else {
                    Read::Serializable
                };
                let got: Vec<Vec<u8>> = match o.txn.get_range(read).await {
                    Ok(rows) => rows.into_iter().map(|row| row.key).collect(),
                    Err(StoreError::TooOld) => {
                        open.swap_remove(at);
                        continue;
                    }
                    Err(error) => panic!("step {step}: read failed: {error}"),
                };
                let view = o.view.as_ref().expect("taken above");
                let want = expected(view, &begin, &end, limit, reverse);
                assert_eq!(
                    got,
                    want,
                    "seed {seed} step {step}: {} read of {begin:?}..{end:?} limit {limit}",
                    if reverse { "reverse" } else { "forward" }
                );
                reads += 1;
            }
        }
    }
    assert!(reads > STEPS / 3, "the run read enough: {reads}");
    let (_, _, stretches, _) = store.footprint();
    assert!(stretches > 0, "the run recorded empty stretches");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_over_skipped_stretches_match_the_model() {
    let seeds: u64 = std::env::var("MODEL_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4);
    for seed in 0..seeds {
        run(seed).await;
    }
}
