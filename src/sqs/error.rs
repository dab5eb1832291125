//! SQS's error shape in AWS JSON 1.0: the body
//! `{"__type":"com.amazonaws.sqs#<Shape>","message":…}` and the header
//! `x-amzn-query-error: <legacy code>;Sender|Receiver`.
//!
//! SDKs read both: botocore picks the exception class by the shape name
//! (`client.exceptions.QueueDoesNotExist`) and reports the legacy query
//! code as `Error.Code` (`AWS.SimpleQueueService.NonExistentQueue`), which
//! is what code written against the query protocol compares with. The
//! pairs below are SQS's own (its service model's exception shapes, and
//! the query codes those shapes had). An invalid or missing parameter is
//! the shape SQS answers, `InvalidParameterValueException` or
//! `MissingRequiredParameterException`, with the query code
//! `InvalidParameterValue` or `MissingParameter` (AWS-recorded snapshots
//! show `Error.Code` the one and `QueryErrorCode` the other); the
//! signature errors use their code as the shape name. SDKs raise their
//! generic client error with the query code, as for SQS itself.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::server::error::ApiError;

/// The content type of every SQS answer.
pub const JSON_1_0: &str = "application/x-amz-json-1.0";

/// An SQS error: status, shape, legacy code, whose fault, message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqsError {
    /// HTTP status.
    pub status: StatusCode,
    /// The exception shape (`QueueDoesNotExist`), also the metric outcome.
    pub shape: &'static str,
    /// The query protocol's code (`AWS.SimpleQueueService.NonExistentQueue`).
    pub query_code: &'static str,
    /// True when the caller's request was at fault.
    pub sender_fault: bool,
    /// Human-readable detail.
    pub message: String,
}

/// Shorthand for the constructors below: a sender's fault, 400.
fn sender(shape: &'static str, query_code: &'static str, message: String) -> SqsError {
    SqsError {
        status: StatusCode::BAD_REQUEST,
        shape,
        query_code,
        sender_fault: true,
        message,
    }
}

impl SqsError {
    /// `QueueDoesNotExist` (`AWS.SimpleQueueService.NonExistentQueue`),
    /// with SQS's text (which names no queue).
    pub fn no_queue(_name: &str) -> SqsError {
        sender(
            "QueueDoesNotExist",
            "AWS.SimpleQueueService.NonExistentQueue",
            "The specified queue does not exist.".into(),
        )
    }

    /// `QueueNameExists` (`QueueAlreadyExists`).
    pub fn queue_exists(message: String) -> SqsError {
        sender("QueueNameExists", "QueueAlreadyExists", message)
    }

    /// `InvalidParameterValue`.
    pub fn invalid(message: impl Into<String>) -> SqsError {
        sender(
            "InvalidParameterValueException",
            "InvalidParameterValue",
            message.into(),
        )
    }

    /// `MissingParameter`.
    pub fn missing(parameter: &str) -> SqsError {
        sender(
            "MissingRequiredParameterException",
            "MissingParameter",
            format!("The request must contain the parameter {parameter}."),
        )
    }

    /// `InvalidAttributeName`.
    pub fn attribute_name(message: impl Into<String>) -> SqsError {
        sender(
            "InvalidAttributeName",
            "InvalidAttributeName",
            message.into(),
        )
    }

    /// `InvalidAttributeValue`.
    pub fn attribute_value(message: impl Into<String>) -> SqsError {
        sender(
            "InvalidAttributeValue",
            "InvalidAttributeValue",
            message.into(),
        )
    }

    /// `ReceiptHandleIsInvalid`.
    pub fn receipt_invalid(handle: &str) -> SqsError {
        sender(
            "ReceiptHandleIsInvalid",
            "ReceiptHandleIsInvalid",
            format!("The input receipt handle \"{handle}\" is not a valid receipt handle."),
        )
    }

    /// `InvalidMessageContents`.
    pub fn contents(message: impl Into<String>) -> SqsError {
        sender(
            "InvalidMessageContents",
            "InvalidMessageContents",
            message.into(),
        )
    }

    /// `EmptyBatchRequest`.
    /// `entry` is the action's entry type, `SendMessageBatchRequestEntry`.
    pub fn empty_batch(entry: &str) -> SqsError {
        sender(
            "EmptyBatchRequest",
            "AWS.SimpleQueueService.EmptyBatchRequest",
            format!("There should be at least one {entry} in the request."),
        )
    }

    /// `TooManyEntriesInBatchRequest`.
    pub fn too_many_entries(count: usize, max: usize) -> SqsError {
        sender(
            "TooManyEntriesInBatchRequest",
            "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
            format!("Maximum number of entries per request are {max}. You have sent {count}."),
        )
    }

    /// `BatchEntryIdsNotDistinct`.
    pub fn ids_not_distinct(id: &str) -> SqsError {
        sender(
            "BatchEntryIdsNotDistinct",
            "AWS.SimpleQueueService.BatchEntryIdsNotDistinct",
            format!("Id {id} repeated."),
        )
    }

    /// `InvalidBatchEntryId`.
    pub fn batch_entry_id(_id: &str) -> SqsError {
        sender(
            "InvalidBatchEntryId",
            "AWS.SimpleQueueService.InvalidBatchEntryId",
            // SQS's text, which names no id.
            "A batch entry id can only contain alphanumeric characters, hyphens and \
             underscores. It can be at most 80 letters long."
                .into(),
        )
    }

    /// `BatchRequestTooLong`.
    pub fn batch_too_long(len: usize, max: usize) -> SqsError {
        sender(
            "BatchRequestTooLong",
            "AWS.SimpleQueueService.BatchRequestTooLong",
            format!("Batch requests cannot be longer than {max} bytes. You have sent {len} bytes."),
        )
    }

    /// `ResourceNotFoundException` (404): a move task, or its queue.
    pub fn not_found(message: impl Into<String>) -> SqsError {
        SqsError {
            status: StatusCode::NOT_FOUND,
            ..sender(
                "ResourceNotFoundException",
                "ResourceNotFoundException",
                message.into(),
            )
        }
    }

    /// `InvalidAction`: a target this endpoint does not serve.
    pub fn unknown_action(target: &str) -> SqsError {
        sender(
            "InvalidAction",
            "InvalidAction",
            format!("The action {target} is not valid for this endpoint."),
        )
    }

    /// A signature problem: 403 with `code` (`SignatureDoesNotMatch`,
    /// `InvalidClientTokenId`, `MissingAuthenticationToken`,
    /// `IncompleteSignature`, `RequestExpired`).
    pub fn denied(code: &'static str, message: impl Into<String>) -> SqsError {
        SqsError {
            status: StatusCode::FORBIDDEN,
            ..sender(code, code, message.into())
        }
    }

    /// A failure of the service, not the request: 500 `InternalFailure`
    /// or 503 `ServiceUnavailable` (SDKs retry both).
    pub fn service(status: StatusCode, message: String) -> SqsError {
        let code = if status == StatusCode::SERVICE_UNAVAILABLE {
            "ServiceUnavailable"
        } else {
            "InternalFailure"
        };
        SqsError {
            status,
            shape: code,
            query_code: code,
            sender_fault: false,
            message,
        }
    }
}

impl From<crate::service::Error> for SqsError {
    /// The core's errors as SQS ones, as over HTTP (see [`From<ApiError>`]).
    fn from(error: crate::service::Error) -> Self {
        ApiError::from(error).into()
    }
}

impl From<ApiError> for SqsError {
    /// hotq's own errors as SQS ones: its server errors keep their status
    /// (503: retry), its refusals are invalid parameters.
    fn from(error: ApiError) -> Self {
        if error.status.is_server_error() {
            SqsError::service(error.status, error.message)
        } else {
            SqsError::invalid(error.message)
        }
    }
}

impl IntoResponse for SqsError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({
            "__type": format!("com.amazonaws.sqs#{}", self.shape),
            "message": self.message,
        });
        let fault = if self.sender_fault {
            "Sender"
        } else {
            "Receiver"
        };
        let query_error = format!("{};{fault}", self.query_code);
        let mut response = (self.status, body.to_string()).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(JSON_1_0));
        if let Ok(value) = HeaderValue::from_str(&query_error) {
            headers.insert("x-amzn-query-error", value);
        }
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        response
    }
}
