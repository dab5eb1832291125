//! What every handler of every HTTP front end shares (`/v1`, SQS, the
//! console): the daemon's state, below the routers that mount them, so
//! that a front end importing it imports no other front end.

use parking_lot::Mutex;
use std::collections::BTreeSet;
use std::sync::Arc;

use super::store_watch;
use crate::config::Config;
use crate::keys::{QueueKeys, QueueKind, QueueName};
use crate::service::{Dropped, Hotq, Store};

/// What every handler shares.
pub struct AppState<S: Store> {
    /// The core every front end calls (see [`crate::service`]).
    pub hotq: Hotq<S>,
    /// The running configuration.
    pub config: Config,
    /// Queues this daemon has served recently, for the sampler (bounded).
    /// Like every memory of a queue, forgotten when it is deleted (see
    /// [`AppState::delete_queue`]).
    pub known_queues: Arc<Mutex<KnownQueues>>,
    /// Whether the store answers, as the store watcher last saw it.
    pub store_health: store_watch::StoreHealth,
    /// The OpenAPI spec for this configuration, built on first request.
    pub openapi: std::sync::OnceLock<String>,
    /// SQS's message move tasks this daemon runs (see
    /// [`crate::sqs::move_tasks`]; its registry sits apart so this imports
    /// no SQS action).
    pub sqs_move_tasks: crate::sqs::move_registry::MoveTasks,
}

/// The most recently used queues, at most a bound of them: when full, the
/// queue used longest ago makes room.
#[derive(Debug, Default)]
pub struct KnownQueues {
    order: std::collections::VecDeque<(QueueKind, QueueName)>,
    members: BTreeSet<(QueueKind, QueueName)>,
}

impl KnownQueues {
    /// Notes a use of `queue`, keeping at most `max` queues; true when it
    /// was not held.
    pub fn note(&mut self, queue: (QueueKind, QueueName), max: usize) -> bool {
        if self.members.contains(&queue) {
            // Refreshing the order on every use would cost a scan; a queue
            // in steady use is re-noted after it ages out, which is enough.
            return false;
        }
        while self.order.len() >= max.max(1) {
            if let Some(oldest) = self.order.pop_front() {
                self.members.remove(&oldest);
            }
        }
        self.members.insert(queue.clone());
        self.order.push_back(queue);
        true
    }

    /// Drops `queue`, if held.
    pub fn forget(&mut self, queue: &(QueueKind, QueueName)) {
        if self.members.remove(queue) {
            self.order.retain(|held| held != queue);
        }
    }

    /// The queues held.
    pub fn iter(&self) -> impl Iterator<Item = &(QueueKind, QueueName)> {
        self.order.iter()
    }
}

impl<S: Store> AppState<S> {
    /// True when a token is configured and `presented` is it (the HTTP
    /// API's bearer token, RESP's `AUTH`), compared without an early exit,
    /// so timing does not reveal how much of it matched.
    pub fn token_matches(&self, presented: &[u8]) -> bool {
        self.config
            .token
            .as_deref()
            .is_some_and(|token| constant_time_eq(presented, token.as_bytes()))
    }

    /// Deletes the queue of `keys` (see [`Hotq::delete_queue`]): the one
    /// way every front end deletes a queue, so none can leave this daemon
    /// remembering it. The core forgets its own memories of the queue;
    /// this front end's are forgotten in the delete's own task, before the
    /// delete answers, even if the caller went away meanwhile (see
    /// [`forget_deleted`]).
    pub async fn delete_queue(&self, keys: &QueueKeys) -> crate::service::Result<Dropped> {
        let known = self.known_queues.clone();
        let gone = keys.clone();
        self.hotq
            .delete_queue(keys, move |finished| {
                if finished {
                    forget_deleted(&known, &gone);
                }
            })
            .await
    }

    /// Notes that `name` is in use, for the sampler.
    pub fn note_queue(&self, kind: QueueKind, name: &QueueName) {
        let mut known = self.known_queues.lock();
        if known.note((kind, name.clone()), self.config.metrics_sample_queues_max) {
            // Only valid names get here, after validation: the queue's
            // counters exist (at 0) from its first use on.
            crate::metrics::register_queue(kind, name);
        }
    }
}

/// Forgets what this front end keeps in memory of the queue of `keys`,
/// which a delete just finished (the core forgot its cached default lease
/// itself): the sampler stops sampling it, the exporter hides its series
/// and the console's traffic tally drops its counts, until it is used
/// again.
fn forget_deleted(known: &Mutex<KnownQueues>, keys: &QueueKeys) {
    let (kind, name) = (keys.kind(), keys.name());
    known.lock().forget(&(kind, name.clone()));
    crate::metrics::forget_queue(kind, name);
    crate::metrics::traffic::forget(kind, name.as_str());
    // Its chart history goes with its counts (the samples hold them).
    crate::console::history::forget(kind, name.as_str());
}

/// Why the daemon stopped with an error.
#[derive(Debug)]
pub struct ServeError(pub String);

impl std::fmt::Display for ServeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ServeError {}

/// Compares without an early exit.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut difference = a.len() ^ b.len();
    for (i, byte) in a.iter().enumerate() {
        difference |= (byte ^ b.get(i % b.len().max(1)).copied().unwrap_or(0)) as usize;
    }
    difference == 0
}
