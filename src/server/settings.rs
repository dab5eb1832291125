//! `GET/PUT /v1/queues/{queue}/settings`: a FIFO queue's settings, kept in
//! the store (see [`crate::queue_settings`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::AppState;
use super::error::ApiError;
use super::fifo::{body_bytes, outcome, queue_name};
use crate::keys::{QueueKeys, QueueName};
use crate::metrics::operation;
use crate::queue::QueueError;
use crate::queue_settings::{Stored, read, update};
use crate::store::Store;

fn answer<S: Store>(state: &AppState<S>, name: &QueueName, stored: &Stored) -> Response {
    let effective = stored.effective(name, &state.settings_defaults);
    Json(json!({
        "queue": name.as_str(),
        "settings": effective,
        "stored": stored,
    }))
    .into_response()
}

/// `GET /v1/queues/{queue}/settings`: 200 `{"queue", "settings": in force,
/// "stored": what the queue set (the rest are the daemon's defaults)}`.
pub async fn get<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    Path(queue): Path<String>,
) -> Result<Response, ApiError> {
    let result = async {
        let name = queue_name(&queue)?;
        let stored = read(&state.store, &QueueKeys::new(&name)).await?;
        Ok(answer(&state, &name, &stored))
    }
    .await;
    operation(&queue, "settings_get", outcome(&result));
    result
}

/// `PUT /v1/queues/{queue}/settings` with a JSON object: each key sets its
/// setting, `null` returns it to the default, keys not named are kept.
/// 200 as [`get`]; 400 `invalid_settings` (nothing changed) for an unknown
/// key or a value out of range.
pub async fn put<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    Path(queue): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let result = async {
        let name = queue_name(&queue)?;
        let change: BTreeMap<String, Value> =
            serde_json::from_slice(&body_bytes(body)?).map_err(|e| {
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "bad_json",
                    format!("the body must be a JSON object of settings: {e}"),
                )
            })?;
        let keys = QueueKeys::new(&name);
        match update(&state.store, &keys, &change, &state.settings_defaults).await? {
            Ok(stored) => Ok(answer(&state, &name, &stored)),
            Err(invalid) => Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_settings",
                invalid.to_string(),
            )),
        }
    }
    .await;
    operation(&queue, "settings_put", outcome(&result));
    result
}

/// The lease of a pop of `keys` that named no `lease_ms`: the queue's
/// default lease, or 0 (no lease).
pub async fn default_lease_ms<S: Store>(
    state: &AppState<S>,
    keys: &QueueKeys,
) -> Result<u64, QueueError> {
    let stored = read(&state.store, keys).await?;
    Ok(stored
        .effective(keys.name(), &state.settings_defaults)
        .default_lease_ms
        .unwrap_or(0))
}
