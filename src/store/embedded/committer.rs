//! Group commit: one thread resolves queued commits in arrival order,
//! applies every accepted one as a single fjall batch, pays one fsync for
//! all of them, then fires watches and answers.
//!
//! Resolution and the stretch splits happen under the resolver lock before
//! the batch becomes visible, so no reader can see a write the resolver has
//! not recorded. A group is published (visible to new snapshots) only after
//! its fsync, so no reader acts on data a crash could take back.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use tokio::sync::{mpsc, oneshot};

use super::resolver::Resolver;
use super::watches::PendingWatch;
use super::write_set::{KeyOp, WriteSet, apply_all};
use super::{Durability, Shared};
use crate::store::StoreError;

/// A transaction handed to the committer.
pub(crate) struct CommitRequest {
    /// What each atomic key of `writes` held at `read_version`, in the
    /// order of `writes.ops` (read by the caller: see `atomic_bases`).
    pub(crate) atomic_bases: Vec<Option<Vec<u8>>>,
    pub(crate) read_version: u64,
    pub(crate) began: std::time::Instant,
    pub(crate) reads: Vec<(Vec<u8>, Vec<u8>)>,
    pub(crate) writes: WriteSet,
    pub(crate) watches: Vec<PendingWatch>,
    pub(crate) reply: oneshot::Sender<Result<(), StoreError>>,
}

/// Runs until every sender is gone, then cancels the armed watches.
pub(crate) fn run(
    shared: Arc<Shared>,
    mut requests: mpsc::Receiver<CommitRequest>,
    group_max: usize,
) {
    while let Some(first) = requests.blocking_recv() {
        let mut group = vec![first];
        while group.len() < group_max {
            match requests.try_recv() {
                Ok(request) => group.push(request),
                Err(_) => break,
            }
        }
        commit_group(&shared, group);
    }
    shared.watches.lock().cancel_all();
}

/// One group: resolve it, write and publish what it accepted (one fjall
/// batch, one fsync), fire and arm watches, answer every request.
fn commit_group(shared: &Shared, mut group: Vec<CommitRequest>) {
    if let Some(failure) = shared.failed.get() {
        // Poisoned: nothing more is written (see `Shared::failed`).
        let error = StoreError::Unavailable(failure.clone());
        for request in group {
            let _ = request.reply.send(Err(error.clone()));
        }
        return;
    }
    let Resolved {
        outcomes,
        fresh,
        version,
    } = resolve(shared, &group);
    let accepted = group
        .iter()
        .zip(&outcomes)
        .filter(|(request, outcome)| outcome.is_ok() && !request.writes.is_empty())
        .zip(&fresh)
        .map(|((request, _), fresh)| (request, fresh.as_slice()));
    let written = match version {
        Some(version) => {
            let began_us = shared.opened.elapsed().as_micros() as u64 + 1;
            shared.writing_since_us.store(began_us, Ordering::Release);
            let written = write_group(shared, version, accepted);
            shared.writing_since_us.store(0, Ordering::Release);
            written
        }
        None => Ok(BTreeMap::new()),
    };
    let final_values = match written {
        Ok(values) => values,
        Err(error) => {
            let _ = shared.failed.set(error.to_string());
            tracing::error!(%error, "the store failed to write a commit group; it refuses every transaction from now on");
            // The store is gone for this process: these writers are told
            // so, like every later caller, not that one write failed.
            let reason = shared.failed.get().cloned().unwrap_or_default();
            fail_writers(group, outcomes, StoreError::Unavailable(reason));
            prune(shared);
            return;
        }
    };
    if !final_values.is_empty() {
        shared.stats.groups.fetch_add(1, Ordering::Relaxed);
        // What the fsync carried: the accepted writers, not the group's
        // read-only, conflicting or too-old members.
        let carried = group
            .iter()
            .zip(&outcomes)
            .filter(|(request, outcome)| outcome.is_ok() && !request.writes.is_empty())
            .count();
        metrics::histogram!(crate::metrics::STORE_COMMIT_GROUP_SIZE).record(carried as f64);
    }
    arm_watches(shared, &mut group, &outcomes, &final_values);
    answer(shared, group, outcomes);
    prune(shared);
}

/// A group's resolution: each request's outcome, the freshness of the
/// accepted writers' atomic bases, and the group's version when it
/// accepted a write.
struct Resolved {
    outcomes: Vec<Result<(), StoreError>>,
    fresh: Vec<Vec<bool>>,
    version: Option<u64>,
}

/// Resolves the group's requests in order under the resolver lock: too
/// old, read-only, conflicting, or accepted (its writes recorded at the
/// group's version, so later requests of the group conflict with them as
/// with a committed batch).
fn resolve(shared: &Shared, group: &[CommitRequest]) -> Resolved {
    let mut outcomes: Vec<Result<(), StoreError>> = Vec::with_capacity(group.len());
    // Per accepted request: which of its atomic bases are still the latest value.
    let mut fresh: Vec<Vec<bool>> = Vec::with_capacity(group.len());
    let mut resolver = shared.resolver.lock();
    let version = resolver.last_version + 1;
    let mut accepted_writes = false;
    for request in group {
        let outcome = if request.began.elapsed() > shared.age_max
            || resolver.is_too_old(request.read_version)
        {
            Err(StoreError::TooOld)
        } else if request.writes.is_empty() {
            // Read-only: serializable at its read version, nothing to check.
            Ok(())
        } else if resolver.intersects_since(request.read_version, &request.reads) {
            Err(StoreError::Conflict)
        } else {
            // Checked before this request's own writes are recorded, and
            // after those of the group's earlier requests.
            fresh.push(fresh_bases(&resolver, request));
            resolver.record_writes(version, &request.writes);
            accepted_writes = true;
            Ok(())
        };
        outcomes.push(outcome);
    }
    if accepted_writes {
        resolver.last_version = version;
    }
    Resolved {
        outcomes,
        fresh,
        version: accepted_writes.then_some(version),
    }
}

/// Fires the watches the group's writes changed, and arms the watches its
/// committed requests asked for against what each read.
fn arm_watches(
    shared: &Shared,
    group: &mut [CommitRequest],
    outcomes: &[Result<(), StoreError>],
    final_values: &BTreeMap<Vec<u8>, Option<Vec<u8>>>,
) {
    let mut watches = shared.watches.lock();
    for (key, value) in final_values {
        watches.changed(key, value.as_deref());
    }
    for (request, outcome) in group.iter_mut().zip(outcomes) {
        if outcome.is_err() {
            continue;
        }
        for watch in std::mem::take(&mut request.watches) {
            let current = final_values
                .get(&watch.key)
                .cloned()
                .unwrap_or_else(|| read_latest(shared, &watch.key));
            // What the watch read: any other value, whoever wrote it (this
            // transaction too, after the watch), fires it.
            watches.arm(watch.key, watch.seen, current.as_deref(), watch.sender);
        }
    }
}

/// Counts the group's commits and conflicts, then answers each request.
/// Counted before answering, so a caller that saw its commit return also
/// sees it counted.
fn answer(shared: &Shared, group: Vec<CommitRequest>, outcomes: Vec<Result<(), StoreError>>) {
    let committed = outcomes.iter().filter(|outcome| outcome.is_ok()).count() as u64;
    let conflicted = outcomes
        .iter()
        .filter(|outcome| matches!(outcome, Err(StoreError::Conflict)))
        .count() as u64;
    shared.stats.commits.fetch_add(committed, Ordering::Relaxed);
    shared
        .stats
        .conflicts
        .fetch_add(conflicted, Ordering::Relaxed);
    for (request, outcome) in group.into_iter().zip(outcomes) {
        let _ = request.reply.send(outcome);
    }
}

fn prune(shared: &Shared) {
    let visible = shared.visibility.lock().published + 1;
    shared.resolver.lock().prune(visible);
}

/// Writes the accepted requests of group `version` as one fjall batch and
/// publishes the version, whether or not the write succeeded (a failed
/// write poisons fjall; its recorded writes then only cause conflicts).
fn write_group<'a>(
    shared: &Shared,
    version: u64,
    accepted: impl Iterator<Item = (&'a CommitRequest, &'a [bool])>,
) -> Result<BTreeMap<Vec<u8>, Option<Vec<u8>>>, StoreError> {
    let values = final_values(shared, accepted);
    let written = values.and_then(|values| {
        if values.is_empty() {
            return Ok(values);
        }
        // The fsync happens inside `commit`, before fjall makes the batch
        // visible: fsyncing after it (to time the call alone) kept every new
        // snapshot torn, and so `begin` spinning, for the whole fsync.
        let mut batch = shared
            .db
            .batch()
            .durability(Some(super::persist_mode(shared.durability)));
        for (key, value) in &values {
            match value {
                Some(value) => batch.insert(&shared.data, key.as_slice(), value.as_slice()),
                None => batch.remove(&shared.data, key.as_slice()),
            }
        }
        // From here until published, new snapshots that could see part of
        // this batch are refused (see `Visibility`).
        shared.visibility.lock().inflight_floor = Some(shared.db.seqno());
        let write_began = Instant::now();
        batch.commit().map_err(|e| StoreError::Io(e.to_string()))?;
        if shared.durability == Durability::Sync {
            metrics::histogram!(crate::metrics::FSYNC_SECONDS)
                .record(write_began.elapsed().as_secs_f64());
        }
        Ok(values)
    });
    let mut visibility = shared.visibility.lock();
    assert!(version > visibility.published, "group versions only grow");
    visibility.published = version;
    visibility.inflight_floor = None;
    written
}

/// The value every key written by the accepted requests ends up with, in
/// request order (atomic adds apply to the latest committed value).
/// Which atomic bases of `request` no commit since its read version has
/// written (those are the latest values: no need to read them again).
fn fresh_bases(resolver: &Resolver, request: &CommitRequest) -> Vec<bool> {
    let atomic_keys = request
        .writes
        .ops
        .iter()
        .filter(|(_, op)| matches!(op, KeyOp::Atomic(_)));
    let fresh: Vec<bool> = atomic_keys
        .map(|(key, _)| !resolver.key_written_since(request.read_version, key))
        .collect();
    assert_eq!(
        fresh.len(),
        request.atomic_bases.len(),
        "one base per atomic key"
    );
    fresh
}

fn final_values<'a>(
    shared: &Shared,
    accepted: impl Iterator<Item = (&'a CommitRequest, &'a [bool])>,
) -> Result<BTreeMap<Vec<u8>, Option<Vec<u8>>>, StoreError> {
    let mut values: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
    for (request, fresh) in accepted {
        let writes = &request.writes;
        let mut bases = request.atomic_bases.iter().zip(fresh);
        for (begin, end) in &writes.cleared {
            for row in shared.data.range(begin.as_slice()..end.as_slice()) {
                let key = row.key().map_err(|e| StoreError::Io(e.to_string()))?;
                values.insert(key.to_vec(), None);
            }
            for (_, value) in values.range_mut(begin.clone()..end.clone()) {
                *value = None;
            }
        }
        for (key, op) in &writes.ops {
            let value = match op {
                KeyOp::Set(value) => Some(value.clone()),
                KeyOp::Clear => None,
                KeyOp::Atomic(mutations) => {
                    let (read, fresh) = bases.next().expect("one base per atomic key");
                    let base = match values.get(key) {
                        Some(value) => value.clone(),
                        None if *fresh => read.clone(),
                        None => read_latest(shared, key),
                    };
                    Some(apply_all(base.as_deref(), mutations))
                }
            };
            values.insert(key.clone(), value);
        }
    }
    Ok(values)
}

fn read_latest(shared: &Shared, key: &[u8]) -> Option<Vec<u8>> {
    // A read failure here is an I/O fault fjall already poisoned itself for;
    // treating it as absent only fires a watch early, which callers tolerate.
    shared.data.get(key).ok().flatten().map(|v| v.to_vec())
}

fn fail_writers(
    group: Vec<CommitRequest>,
    outcomes: Vec<Result<(), StoreError>>,
    error: StoreError,
) {
    for (request, outcome) in group.into_iter().zip(outcomes) {
        let outcome = match outcome {
            Ok(()) if !request.writes.is_empty() => Err(error.clone()),
            other => other,
        };
        let _ = request.reply.send(outcome);
    }
}
