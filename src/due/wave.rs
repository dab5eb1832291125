//! One wave of a sweep (see [`super::sweep_until`]): disjoint stretches of the
//! due index planned from one snapshot read, each consumed in its own
//! transaction, the commits awaited together so they share fsyncs.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::task::JoinHandle;

use crate::keys::{QueueKind, QueueName};
use crate::metrics;
use crate::queue::QueueError;
use crate::store::{RangeRead, Store, StoreError, Transaction, key_after};

use super::{
    Consumed, DUE_BATCH_BYTES_MAX, DUE_BATCH_MAX, DUE_WAVE_BYTES_MAX, consume, due_rows, stats,
};
use crate::lease::DeliveryPolicy;

/// Splits the due rows of `[begin, end)`, read in one snapshot, into at
/// most `chunks_max` disjoint stretches `[first key, next stretch's first
/// key)` of at most [`DUE_BATCH_MAX`] rows and [`DUE_BATCH_BYTES_MAX`]
/// bytes each (at least one row). Returns them, the key after the last
/// row planned, and whether more rows may follow it.
async fn plan<S: Store>(
    store: &S,
    begin: &[u8],
    end: &[u8],
    chunks_max: usize,
) -> Result<(Vec<(Vec<u8>, Vec<u8>)>, Vec<u8>, bool), StoreError> {
    let txn = store.begin()?;
    let limit = chunks_max * DUE_BATCH_MAX;
    let rows = txn
        .get_range(RangeRead::new(begin, end, limit).snapshot())
        .await?;
    let mut full = rows.len() >= limit;
    let mut starts: Vec<&[u8]> = Vec::new();
    let (mut chunk_rows, mut chunk_bytes, mut wave_bytes) = (0usize, 0usize, 0usize);
    let mut planned = 0;
    for row in &rows {
        let bytes = row.key.len() + row.value.len();
        if !starts.is_empty() && wave_bytes + bytes > DUE_WAVE_BYTES_MAX {
            full = true;
            break;
        }
        if starts.is_empty()
            || chunk_rows >= DUE_BATCH_MAX
            || chunk_bytes + bytes > DUE_BATCH_BYTES_MAX
        {
            if starts.len() == chunks_max {
                full = true;
                break;
            }
            starts.push(&row.key);
            (chunk_rows, chunk_bytes) = (0, 0);
        }
        chunk_rows += 1;
        chunk_bytes += bytes;
        wave_bytes += bytes;
        planned += 1;
    }
    let Some(last) = rows[..planned].last() else {
        return Ok((Vec::new(), begin.to_vec(), false));
    };
    let after_plan = key_after(&last.key);
    let ends = starts
        .iter()
        .skip(1)
        .copied()
        .chain([after_plan.as_slice()]);
    let chunks = starts
        .iter()
        .zip(ends)
        .map(|(begin, end)| (begin.to_vec(), end.to_vec()))
        .collect();
    Ok((chunks, after_plan, full))
}

/// A wave under way: each chunk is consumed and committed in a task of
/// its own, so the chunks' reads (and a commit's reads of the counters it
/// adds to) run on every core, and their commits reach the store together
/// and share its fsyncs.
pub(super) struct Wave {
    chunks: Vec<JoinHandle<Result<Chunk, QueueError>>>,
    /// The key after the last row planned.
    pub(super) after_plan: Vec<u8>,
    /// True when rows may follow `after_plan`.
    pub(super) full: bool,
}

/// Plans a wave of at most `chunks_max` chunks from `begin` and starts
/// them. `None`: nothing is due in `[begin, end)`.
pub(super) async fn start_wave<S: Store>(
    store: &S,
    policy: &Arc<DeliveryPolicy>,
    now_ms: u64,
    begin: &[u8],
    end: &[u8],
    chunks_max: usize,
) -> Result<Option<Wave>, QueueError> {
    let (chunks, after_plan, full) = plan(store, begin, end, chunks_max).await?;
    if chunks.is_empty() {
        return Ok(None);
    }
    let chunks = chunks
        .into_iter()
        .map(|(begin, end)| {
            let (store, policy) = (store.clone(), Arc::clone(policy));
            tokio::spawn(async move {
                match prepare_chunk(&store, &policy, now_ms, &begin, &end).await? {
                    Ok(prepared) => prepared.commit(&store).await,
                    Err(empty) => Ok(empty),
                }
            })
        })
        .collect();
    Ok(Some(Wave {
        chunks,
        after_plan,
        full,
    }))
}

impl Wave {
    /// The transactions this wave counts against a sweep's bound.
    pub(super) fn chunks(&self) -> usize {
        self.chunks.len()
    }

    /// Each chunk's outcome, in plan order. A chunk whose task panicked
    /// panics here too (it is a bug, not an outcome).
    pub(super) async fn finish(self) -> Vec<Result<Chunk, QueueError>> {
        let mut outcomes = Vec::with_capacity(self.chunks.len());
        for chunk in self.chunks {
            match chunk.await {
                Ok(outcome) => outcomes.push(outcome),
                Err(error) => std::panic::resume_unwind(error.into_panic()),
            }
        }
        outcomes
    }
}

/// What one chunk's transaction did.
pub(super) struct Chunk {
    pub(super) rows_read: usize,
    pub(super) reap: BTreeMap<(QueueKind, QueueName), BTreeSet<Vec<u8>>>,
    /// What it consumed, when it committed.
    pub(super) committed: Option<Consumed>,
    /// Where to read again: its start when it lost a race, the key after
    /// its last row when it found more rows than one transaction takes.
    pub(super) resume: Option<Vec<u8>>,
}

/// A chunk consumed in its transaction, not yet committed.
struct Prepared<T> {
    txn: T,
    chunk: Chunk,
    pass: Consumed,
    /// The key after its last row, when the read stopped at a bound.
    rest: Option<Vec<u8>>,
    begin: Vec<u8>,
    end: Vec<u8>,
}

/// Consumes the due rows of `[begin, end)` in one transaction that reads
/// them at its own read version and adds read conflicts on exactly the
/// rows it consumes, so an ack or extend of the same lease, or another
/// timer, conflicts with it: exactly one wins. `Err`: nothing is there.
async fn prepare_chunk<S: Store>(
    store: &S,
    policy: &DeliveryPolicy,
    now_ms: u64,
    begin: &[u8],
    end: &[u8],
) -> Result<Result<Prepared<S::Txn>, Chunk>, QueueError> {
    let txn = store.begin()?;
    let (rows, full) = due_rows(&txn, begin, end).await?;
    let mut chunk = Chunk {
        rows_read: rows.len(),
        reap: BTreeMap::new(),
        committed: None,
        resume: None,
    };
    let Some(last) = rows.last() else {
        return Ok(Err(chunk));
    };
    let rest = full.then(|| key_after(&last.key));
    let pass = consume(&txn, policy, now_ms, &rows, &mut chunk.reap).await?;
    Ok(Ok(Prepared {
        txn,
        chunk,
        pass,
        rest,
        begin: begin.to_vec(),
        end: end.to_vec(),
    }))
}

impl<T: Transaction> Prepared<T> {
    /// Commits the chunk; on a conflict it is to be read again.
    async fn commit<S: Store<Txn = T>>(self, store: &S) -> Result<Chunk, QueueError> {
        let Prepared {
            txn,
            mut chunk,
            pass,
            rest,
            begin,
            end,
        } = self;
        match txn.commit().await {
            Ok(()) => {
                let committed_ms = crate::envelope::now_ms();
                let stats = stats();
                for &due_ms in &pass.due_ms {
                    stats.record_lateness(committed_ms.saturating_sub(due_ms));
                }
                stats
                    .consumed
                    .fetch_add(pass.due_ms.len() as u64, Ordering::Relaxed);
                chunk.committed = Some(pass);
                // A read that stopped at a bound may have left rows before
                // the chunk's end (they came due since the plan, or were
                // bigger than planned).
                if let Some(rest) = rest
                    && rest < end
                    && !none_from(store, &rest, &end).await?
                {
                    chunk.resume = Some(rest);
                }
            }
            // An ack, extend or another daemon's timer won an entry: read
            // the chunk again (the winner's entries are gone from it).
            Err(StoreError::Conflict) => {
                metrics::conflict("expire");
                chunk.resume = Some(begin);
            }
            Err(error) => return Err(error.into()),
        }
        Ok(chunk)
    }
}

/// True when `[begin, end)` holds no row now.
async fn none_from<S: Store>(store: &S, begin: &[u8], end: &[u8]) -> Result<bool, StoreError> {
    let txn = store.begin()?;
    let rows = txn
        .get_range(RangeRead::new(begin, end, 1).snapshot())
        .await?;
    Ok(rows.is_empty())
}
