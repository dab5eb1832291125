//! The API's one error shape: `{"error":{"code","message"}}` with a
//! fitting status and a stable `code` scripts can match on.

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use crate::keys::QueueName;
use crate::service;

/// An API error: status, stable code, human message.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Stable machine-readable code.
    pub code: &'static str,
    /// Human-readable detail.
    pub message: String,
}

impl ApiError {
    /// An error with `status`, `code` and `message`.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }

    /// 503 `store_unavailable`: the store has failed for good.
    pub fn store_unavailable(message: impl Into<String>) -> Self {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "store_unavailable",
            message,
        )
    }

    /// 400 `bad_parameter`.
    pub fn bad_parameter(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, "bad_parameter", message)
    }
}

/// The body of every error answer (the OpenAPI spec's `ErrorBody`).
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ErrorBody {
    /// What went wrong.
    pub error: ErrorDetail,
}

/// The `error` of an [`ErrorBody`].
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ErrorDetail {
    /// Stable machine-readable code (`invalid_queue_name`, `unknown_receipt`, ...).
    pub code: String,
    /// Human-readable detail; may change between versions.
    pub message: String,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = Json(ErrorBody {
            error: ErrorDetail {
                code: self.code.to_string(),
                message: self.message,
            },
        });
        let mut response = (self.status, body).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
        }
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
        }
        response
    }
}

impl From<service::Error> for ApiError {
    /// The core's errors on the wire: the status by the error's code; the
    /// code and message as the core gives them.
    fn from(error: service::Error) -> Self {
        let status = match error.code() {
            "item_too_large" | "batch_too_large" => StatusCode::PAYLOAD_TOO_LARGE,
            "unknown_receipt" => StatusCode::NOT_FOUND,
            "lease_expired" => StatusCode::CONFLICT,
            "corrupt_item" | "store_error" => StatusCode::INTERNAL_SERVER_ERROR,
            // Retry later or elsewhere: `Retry-After` goes with these.
            "pop_unanswered" | "store_busy" | "store_unavailable" | "maybe_committed" => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            _ => StatusCode::BAD_REQUEST,
        };
        ApiError::new(status, error.code(), error.to_string())
    }
}

/// `axum::extract::Path` whose refusal is an [`ApiError`] (JSON, like
/// every other error) rather than axum's plain text: a queue name that is
/// not UTF-8 once percent-decoded answers 400 `invalid_queue_name`.
#[derive(Debug)]
pub struct ApiPath<T>(pub T);

impl<T, S> axum::extract::FromRequestParts<S> for ApiPath<T>
where
    T: serde::de::DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, Self::Rejection> {
        use axum::extract::path::ErrorKind;
        use axum::extract::rejection::PathRejection;
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(value)) => Ok(ApiPath(value)),
            Err(PathRejection::FailedToDeserializePathParams(error)) => {
                let code = match error.kind() {
                    ErrorKind::InvalidUtf8InPathParam { key } if key == "queue" => {
                        "invalid_queue_name"
                    }
                    _ => "bad_parameter",
                };
                Err(ApiError::new(
                    StatusCode::BAD_REQUEST,
                    code,
                    error.body_text(),
                ))
            }
            Err(rejection) => Err(ApiError::new(
                rejection.status(),
                "bad_path",
                rejection.body_text(),
            )),
        }
    }
}

/// Validates a queue name from the path.
pub fn queue_name(raw: &str) -> Result<QueueName, ApiError> {
    QueueName::new(raw)
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "invalid_queue_name", e.to_string()))
}

/// A request body, or the error for a body that was refused.
pub fn body_bytes(body: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    body.map_err(|rejection| {
        let status = rejection.status();
        let code = if status == StatusCode::PAYLOAD_TOO_LARGE {
            "body_too_large"
        } else {
            "bad_body"
        };
        ApiError::new(status, code, rejection.body_text())
    })
}

/// The outcome label of a call.
pub fn outcome<T>(result: &Result<T, ApiError>) -> &'static str {
    if result.is_ok() { "ok" } else { "error" }
}

/// Runs a handler's `body` and counts it as operation `op` on `queue`,
/// "ok" or "error" (see [`crate::metrics::operation`]): the handlers'
/// one way to count themselves.
pub async fn counted<T>(
    queue: &str,
    op: &'static str,
    body: impl Future<Output = Result<T, ApiError>>,
) -> Result<T, ApiError> {
    counted_as(queue, op, outcome, body).await
}

/// [`counted`], with the outcome label given by `outcome_of` (a pop's
/// "empty").
pub async fn counted_as<T>(
    queue: &str,
    op: &'static str,
    outcome_of: fn(&Result<T, ApiError>) -> &'static str,
    body: impl Future<Output = Result<T, ApiError>>,
) -> Result<T, ApiError> {
    let result = body.await;
    crate::metrics::operation(queue, op, outcome_of(&result));
    result
}
