//! `GET/PUT /v1/queues/{queue}/settings`: a FIFO queue's settings, kept in
//! the store (see [`crate::service::QueueSettings`]).

use crate::server::error::counted;
use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::admin_routes::op_name;
use super::error::{ApiError, ApiPath, ErrorBody};
use super::error::{body_bytes, queue_name};
use super::state::AppState;
use crate::keys::{QueueKeys, QueueKind, QueueName};
use crate::service::{Effective, QueueSettings, Store, Stored};

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

impl SettingsAnswer {
    /// The answer for the queue `name` whose settings are `settings`.
    fn of(name: &QueueName, settings: QueueSettings) -> Self {
        SettingsAnswer {
            queue: name.as_str().to_string(),
            settings: settings.effective,
            stored: settings.stored,
        }
    }
}

/// The settings of the queue `name` of `kind` (every front end's reads).
pub(crate) async fn get_checked<S: Store>(
    state: &AppState<S>,
    kind: QueueKind,
    name: &QueueName,
) -> Result<SettingsAnswer, ApiError> {
    let settings = state.hotq.settings(&QueueKeys::of_kind(kind, name)).await?;
    Ok(SettingsAnswer::of(name, settings))
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
    let settings = state.hotq.update_settings(&keys, change).await?;
    Ok(SettingsAnswer::of(name, settings))
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
