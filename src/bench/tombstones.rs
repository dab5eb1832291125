//! `hotq bench --scenario tombstones`: push+pop cycles over the keys they
//! delete, per queue pattern; push and pop latency at the start and at the
//! end of the run must match (docs/design.md §3).
//!
//! Patterns, each on a fresh queue in the same store:
//! - `fifo`: push, pop.
//! - `fifo-returned`: each cycle an item taken before the run goes back to
//!   its original key behind the head (as a put-back, an expired lease or
//!   a reaped result does), farther behind as the run goes on; it is
//!   popped, then the item pushed this cycle.
//! - `priority-stack`: push at one priority, `pop_max` (stack order).
//! - `priority-min-rotating`: push at priorities 0..8 in turn, `pop_min`.
//! - `priority-max-rotating`: the same, `pop_max`.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::envelope::End;
use crate::keys::QueueName;
use crate::queue::priority::PriorityQueue;
use crate::queue::{Item, PUSH_BATCH_MAX, Queue};
use crate::staging::direct::try_pop;
use crate::staging::requester::restore_items;
use crate::store::embedded::EmbeddedStore;

use super::BenchArgs;

/// Priorities the rotating patterns cycle through.
const PRIORITIES: u64 = 8;
/// Most items `fifo-returned` takes before its run (one returns per cycle).
const HELD_MAX: usize = 200_000;

#[derive(Debug, Clone, Copy)]
enum Pattern {
    Fifo,
    FifoReturned,
    PriorityStack,
    PriorityMinRotating,
    PriorityMaxRotating,
}

impl Pattern {
    const ALL: [Pattern; 5] = [
        Pattern::Fifo,
        Pattern::FifoReturned,
        Pattern::PriorityStack,
        Pattern::PriorityMinRotating,
        Pattern::PriorityMaxRotating,
    ];

    fn name(self) -> &'static str {
        match self {
            Pattern::Fifo => "fifo",
            Pattern::FifoReturned => "fifo-returned",
            Pattern::PriorityStack => "priority-stack",
            Pattern::PriorityMinRotating => "priority-min-rotating",
            Pattern::PriorityMaxRotating => "priority-max-rotating",
        }
    }
}

/// Latencies of the first and the last `window` cycles, in µs.
struct Windows {
    window: usize,
    first: Vec<(u64, u64)>,
    last: VecDeque<(u64, u64)>,
}

impl Windows {
    fn new(window: usize) -> Windows {
        Windows {
            window,
            first: Vec::with_capacity(window),
            last: VecDeque::with_capacity(window),
        }
    }

    fn add(&mut self, push_us: u64, pop_us: u64) {
        if self.first.len() < self.window {
            self.first.push((push_us, pop_us));
        }
        if self.last.len() == self.window {
            self.last.pop_front();
        }
        self.last.push_back((push_us, pop_us));
    }
}

fn median_ms(samples: impl Iterator<Item = u64>) -> f64 {
    let mut sorted: Vec<u64> = samples.collect();
    if sorted.is_empty() {
        return 0.0;
    }
    sorted.sort_unstable();
    sorted[sorted.len() / 2] as f64 / 1_000.0
}

fn err(error: impl std::fmt::Display) -> String {
    error.to_string()
}

/// Runs every pattern for up to `args.cycles` cycles (each bounded by
/// `args.deadline_s`) and prints the start and end medians.
pub(crate) async fn run(store: &EmbeddedStore, args: &BenchArgs) -> Result<(), String> {
    for pattern in Pattern::ALL {
        run_pattern(store, args, pattern).await?;
    }
    Ok(())
}

async fn run_pattern(
    store: &EmbeddedStore,
    args: &BenchArgs,
    pattern: Pattern,
) -> Result<(), String> {
    let name = QueueName::new(&format!(
        "bench-tombstones-{}-{}",
        pattern.name(),
        rand::random::<u32>()
    ))
    .map_err(err)?;
    let fifo = Queue::new(store.clone(), name.clone());
    let priority = PriorityQueue::new(store.clone(), name);
    let payload = vec![b'p'; args.payload_bytes];
    let deadline = Instant::now() + Duration::from_secs(args.deadline_s);
    let mut held = Vec::new();
    if let Pattern::FifoReturned = pattern {
        // Taken in batches before the clock starts: the setup is not measured.
        let batch = vec![payload.as_slice(); PUSH_BATCH_MAX];
        while held.len() < args.cycles.min(HELD_MAX) && Instant::now() < deadline {
            fifo.push_batch(&batch).await.map_err(err)?;
            let items = try_pop(store, fifo.keys(), (End::Front, PUSH_BATCH_MAX, None), &[])
                .await
                .map_err(err)?
                .items;
            held.extend(items);
        }
    }
    let cycles_max = match pattern {
        Pattern::FifoReturned => args.cycles.min(held.len()),
        _ => args.cycles,
    };
    let window = (cycles_max / 100).clamp(1, 10_000);
    let mut windows = Windows::new(window);
    let started = Instant::now();
    let mut cycles = 0usize;
    while cycles < cycles_max && Instant::now() < deadline {
        let rotating = (cycles as u64 % PRIORITIES) as i64;
        let push = Instant::now();
        match pattern {
            Pattern::Fifo => fifo.push(&payload).await.map_err(err)?,
            Pattern::FifoReturned => {
                fifo.push(&payload).await.map_err(err)?;
                let item = held.pop().ok_or("held items ran out")?;
                restore_items(store, fifo.keys(), vec![item])
                    .await
                    .map_err(err)?;
            }
            Pattern::PriorityStack => priority.push(&payload, 7).await.map_err(err)?,
            Pattern::PriorityMinRotating | Pattern::PriorityMaxRotating => {
                priority.push(&payload, rotating).await.map_err(err)?
            }
        }
        let push_us = push.elapsed().as_micros() as u64;
        let pop = Instant::now();
        let popped: Option<Item> = match pattern {
            Pattern::Fifo => fifo.pop().await.map_err(err)?,
            Pattern::FifoReturned => {
                fifo.pop()
                    .await
                    .map_err(err)?
                    .ok_or("returned item missing")?;
                fifo.pop().await.map_err(err)?
            }
            Pattern::PriorityStack | Pattern::PriorityMaxRotating => {
                priority.pop_max().await.map_err(err)?
            }
            Pattern::PriorityMinRotating => priority.pop_min().await.map_err(err)?,
        };
        popped.ok_or("pushed item missing")?;
        windows.add(push_us, pop.elapsed().as_micros() as u64);
        cycles += 1;
    }
    report(store, args, pattern, cycles, &windows, started.elapsed());
    Ok(())
}

fn report(
    store: &EmbeddedStore,
    args: &BenchArgs,
    pattern: Pattern,
    cycles: usize,
    windows: &Windows,
    elapsed: Duration,
) {
    let push = |w: &[(u64, u64)]| median_ms(w.iter().map(|(push, _)| *push));
    let pop = |w: &[(u64, u64)]| median_ms(w.iter().map(|(_, pop)| *pop));
    let cycle = |w: &[(u64, u64)]| median_ms(w.iter().map(|(push, pop)| push + pop));
    let last: Vec<(u64, u64)> = windows.last.iter().copied().collect();
    let first = windows.first.as_slice();
    let ratio = cycle(&last) / cycle(first).max(1e-6);
    let (_, _, stretches, _) = store.footprint();
    let line = serde_json::json!({
        "scenario": "tombstones",
        "pattern": pattern.name(),
        "cycles": cycles,
        "window": windows.window,
        "push_p50_ms_start": push(first),
        "push_p50_ms_end": push(&last),
        "pop_p50_ms_start": pop(first),
        "pop_p50_ms_end": pop(&last),
        "cycle_p50_ms_start": cycle(first),
        "cycle_p50_ms_end": cycle(&last),
        "end_over_start": ratio,
        "cycles_per_s": cycles as f64 / elapsed.as_secs_f64(),
        "empty_stretches": stretches,
        "peak_rss_mib": super::peak_rss_mib(),
    });
    if args.json {
        println!("{line}");
    } else {
        println!(
            "tombstones {:<22} {cycles} cycles, p50 of first/last {}: push {:.3}/{:.3} ms, pop {:.3}/{:.3} ms, cycle {:.3}/{:.3} ms, ratio {ratio:.2}, {stretches} stretches, rss {:.0} MiB",
            pattern.name(),
            windows.window,
            push(first),
            push(&last),
            pop(first),
            pop(&last),
            cycle(first),
            cycle(&last),
            super::peak_rss_mib().unwrap_or(0.0)
        );
    }
}
