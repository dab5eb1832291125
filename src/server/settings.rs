//! `GET/PUT /v1/queues/{queue}/settings`: a FIFO queue's settings, kept in
//! the store (see [`crate::queue::settings`]).

use crate::server::error::counted;
use std::collections::{BTreeMap, HashMap};
use std::num::NonZeroU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::AppState;
use super::admin::op_name;
use super::error::{ApiError, ApiPath, ErrorBody};
use super::error::{body_bytes, queue_name};
use crate::keys::{QueueKeys, QueueKind, QueueName};
use crate::queue::QueueError;
use crate::queue::settings::{Effective, Stored, read, update};
use crate::store::Store;

/// The answer to a settings read or change.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SettingsAnswer {
    /// The queue's name.
    pub queue: String,
    /// The settings in force: what the queue set, else the daemon's defaults.
    pub settings: Effective,
    /// What the queue set; settings not named here are the defaults.
    pub stored: Stored,
}

fn settings_answer<S: Store>(
    state: &AppState<S>,
    name: &QueueName,
    stored: &Stored,
) -> SettingsAnswer {
    SettingsAnswer {
        queue: name.as_str().to_string(),
        settings: stored.effective(name, &state.settings_defaults),
        stored: stored.clone(),
    }
}

/// The settings of the queue `name` of `kind` (every front end's reads).
pub(crate) async fn get_checked<S: Store>(
    state: &AppState<S>,
    kind: QueueKind,
    name: &QueueName,
) -> Result<SettingsAnswer, ApiError> {
    let stored = read(&state.store, &QueueKeys::of_kind(kind, name)).await?;
    Ok(settings_answer(state, name, &stored))
}

/// Applies `change` to the settings of the queue `name` of `kind` (every
/// front end's changes): 400 `invalid_settings`, nothing changed, for an
/// unknown key or a value out of range.
pub(crate) async fn put_checked<S: Store>(
    state: &AppState<S>,
    kind: QueueKind,
    name: &QueueName,
    change: &BTreeMap<String, Value>,
) -> Result<SettingsAnswer, ApiError> {
    let keys = QueueKeys::of_kind(kind, name);
    let updated = update(&state.store, &keys, change, &state.settings_defaults).await;
    // Read afresh on this daemon's next pop, whatever the outcome (an
    // error may still have committed).
    state.default_leases.forget(&keys);
    match updated? {
        Ok(stored) => Ok(settings_answer(state, name, &stored)),
        Err(invalid) => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_settings",
            invalid.to_string(),
        )),
    }
}

/// `GET /v1/queues/{queue}/settings`: 200 `{"queue", "settings": in force,
/// "stored": what the queue set (the rest are the daemon's defaults)}`.
#[utoipa::path(get, path = "/v1/queues/{queue}/settings", tag = "admin", operation_id = "settings_get",
    params(("queue" = String, Path, description = "Queue name: 1 to 128 of A-Z a-z 0-9 . _ -, not starting with ., plus .dead for a dead-letter queue")),
    responses((status = 200, description = "The settings in force and what the queue set", body = SettingsAnswer),
        (status = "4XX", description = "Refused", body = ErrorBody),
        (status = "5XX", description = "The store failed or is busy", body = ErrorBody),))]
pub async fn get<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    ApiPath(queue): ApiPath<String>,
) -> Result<Response, ApiError> {
    get_of(&state, QueueKind::Fifo, &queue).await
}

/// `GET /v1/pqueues/{queue}/settings`: as [`get`], for a priority queue.
#[utoipa::path(get, path = "/v1/pqueues/{queue}/settings", tag = "admin", operation_id = "pq_settings_get",
    params(("queue" = String, Path, description = "Queue name: 1 to 128 of A-Z a-z 0-9 . _ -, not starting with ., plus .dead for a dead-letter queue")),
    responses((status = 200, description = "The settings in force and what the queue set", body = SettingsAnswer),
        (status = "4XX", description = "Refused", body = ErrorBody),
        (status = "5XX", description = "The store failed or is busy", body = ErrorBody),))]
pub async fn pq_get<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    ApiPath(queue): ApiPath<String>,
) -> Result<Response, ApiError> {
    get_of(&state, QueueKind::Priority, &queue).await
}

async fn get_of<S: Store>(
    state: &AppState<S>,
    kind: QueueKind,
    queue: &str,
) -> Result<Response, ApiError> {
    counted(queue, op_name(kind, "settings_get"), async {
        let name = queue_name(queue)?;
        Ok(Json(get_checked(state, kind, &name).await?).into_response())
    })
    .await
}

/// `PUT /v1/queues/{queue}/settings` with a JSON object: each key sets its
/// setting, `null` returns it to the default, keys not named are kept.
/// 200 as [`get`]; 400 `invalid_settings` (nothing changed) for an unknown
/// key or a value out of range.
#[utoipa::path(put, path = "/v1/queues/{queue}/settings", tag = "admin", operation_id = "settings_put",
    params(("queue" = String, Path, description = "Queue name: 1 to 128 of A-Z a-z 0-9 . _ -, not starting with ., plus .dead for a dead-letter queue")),
    request_body(content = Stored, description = "Settings to change; null returns one to the default; keys not named are kept"),
    responses((status = 200, description = "The settings now in force", body = SettingsAnswer),
        (status = 400, description = "invalid_settings (an unknown key or a value out of range) or bad_json; nothing changed", body = ErrorBody),
        (status = "4XX", description = "Refused; nothing was written", body = ErrorBody),
        (status = "5XX", description = "The store failed or is busy", body = ErrorBody),))]
pub async fn put<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    ApiPath(queue): ApiPath<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    put_of(&state, QueueKind::Fifo, &queue, body).await
}

/// `PUT /v1/pqueues/{queue}/settings`: as [`put`], for a priority queue.
#[utoipa::path(put, path = "/v1/pqueues/{queue}/settings", tag = "admin", operation_id = "pq_settings_put",
    params(("queue" = String, Path, description = "Queue name: 1 to 128 of A-Z a-z 0-9 . _ -, not starting with ., plus .dead for a dead-letter queue")),
    request_body(content = Stored, description = "Settings to change; null returns one to the default; keys not named are kept"),
    responses((status = 200, description = "The settings now in force", body = SettingsAnswer),
        (status = 400, description = "invalid_settings (an unknown key or a value out of range) or bad_json; nothing changed", body = ErrorBody),
        (status = "4XX", description = "Refused; nothing was written", body = ErrorBody),
        (status = "5XX", description = "The store failed or is busy", body = ErrorBody),))]
pub async fn pq_put<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    ApiPath(queue): ApiPath<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    put_of(&state, QueueKind::Priority, &queue, body).await
}

async fn put_of<S: Store>(
    state: &AppState<S>,
    kind: QueueKind,
    queue: &str,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    counted(queue, op_name(kind, "settings_put"), async {
        let name = queue_name(queue)?;
        let change: BTreeMap<String, Value> =
            serde_json::from_slice(&body_bytes(body)?).map_err(|e| {
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "bad_json",
                    format!("the body must be a JSON object of settings: {e}"),
                )
            })?;
        Ok(Json(put_checked(state, kind, &name, &change).await?).into_response())
    })
    .await
}

/// How long a daemon answers a pop's default lease from memory: a change
/// made through another daemon reaches pops here within this (as an SQS
/// attribute change takes up to 60 s to propagate). Reading the settings
/// key in a transaction of its own cost every plain pop ~10 µs of the
/// daemon's CPU (peerbench, W=64: 58 → 69 µs per pop).
pub const DEFAULT_LEASE_CACHE_MS: u64 = 1_000;
/// Most queues whose default lease is held; past it the cache starts over.
const DEFAULT_LEASE_CACHE_MAX: usize = 10_000;

/// Default leases of recently popped queues, read at most once per
/// [`DEFAULT_LEASE_CACHE_MS`] per queue.
#[derive(Debug, Default)]
pub struct DefaultLeases {
    /// Queue → (default lease in ms, or `None` once forgotten; when it
    /// was read or forgotten).
    entries: Mutex<HashMap<QueueEntry, (Option<u64>, Instant)>>,
}

impl DefaultLeases {
    fn fresh(&self, keys: &QueueKeys) -> Option<u64> {
        let entries = self.entries.lock().expect("default leases lock");
        let (lease_ms, read_at) = entries.get(&entry(keys))?;
        let fresh = read_at.elapsed() < Duration::from_millis(DEFAULT_LEASE_CACHE_MS);
        if fresh { *lease_ms } else { None }
    }

    fn remember(&self, keys: &QueueKeys, lease_ms: u64, read_at: Instant) {
        let name = &entry(keys);
        let mut entries = self.entries.lock().expect("default leases lock");
        // A read that began before a change through this daemon (or before
        // a newer read) must not put its older value back.
        if let Some((_, newer)) = entries.get(name)
            && *newer >= read_at
        {
            return;
        }
        if entries.len() >= DEFAULT_LEASE_CACHE_MAX && !entries.contains_key(name) {
            entries.clear();
        }
        entries.insert(name.clone(), (Some(lease_ms), read_at));
    }

    /// The queue's settings changed through this daemon.
    pub fn forget(&self, keys: &QueueKeys) {
        // Kept as a mark, so a read already under way is not remembered.
        self.entries
            .lock()
            .expect("default leases lock")
            .insert(entry(keys), (None, Instant::now()));
    }
}

/// A queue of either kind: a FIFO queue and a priority queue may share a name.
type QueueEntry = (QueueKind, QueueName);

fn entry(keys: &QueueKeys) -> QueueEntry {
    (keys.kind(), keys.name().clone())
}

/// The lease of a pop of `keys` that named no `lease_ms`: the queue's
/// default lease, or 0 (no lease), as read at most
/// [`DEFAULT_LEASE_CACHE_MS`] ago.
pub async fn default_lease_ms<S: Store>(
    state: &AppState<S>,
    keys: &QueueKeys,
) -> Result<Option<NonZeroU64>, QueueError> {
    if let Some(lease_ms) = state.default_leases.fresh(keys) {
        return Ok(NonZeroU64::new(lease_ms));
    }
    // Taken before the read: an entry is never younger than what it holds.
    let read_at = Instant::now();
    let stored = read(&state.store, keys).await?;
    let lease_ms = stored
        .effective(keys.name(), &state.settings_defaults)
        .default_lease_ms
        .unwrap_or(0);
    state.default_leases.remember(keys, lease_ms, read_at);
    Ok(NonZeroU64::new(lease_ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_begun_before_a_change_is_not_remembered_after_it() {
        let leases = DefaultLeases::default();
        let name = QueueKeys::new(&QueueName::new("jobs").unwrap());
        let read_at = Instant::now();
        leases.remember(&name, 0, read_at);
        assert_eq!(leases.fresh(&name), Some(0));
        // A second pop began reading, then the settings changed here.
        let second_read_at = Instant::now();
        leases.forget(&name);
        assert_eq!(leases.fresh(&name), None, "a change is read afresh");
        leases.remember(&name, 0, second_read_at);
        assert_eq!(leases.fresh(&name), None, "the older read is not put back");
        leases.remember(&name, 30_000, Instant::now());
        assert_eq!(leases.fresh(&name), Some(30_000));
    }
}
