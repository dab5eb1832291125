//! Acks riding on a pop over HTTP: `POST …/pop?ack=R1,R2,…` acks the
//! receipts, then pops as any pop (see [`crate::service::Riding`]); the
//! answer, 200 or 204, carries `hotq-acked: <outcome>,…`, one outcome per
//! receipt in the order given, in the batch ack's words. A receipt that
//! fails is its outcome; it never fails the pop.

use axum::http::HeaderValue;
use axum::response::Response;

use crate::service::ReceiptOutcome;

/// The header of a pop's ack outcomes.
pub const ACKED_HEADER: &str = "hotq-acked";

/// `response` with the `hotq-acked` header, when the pop named `ack`.
pub fn with_acked(mut response: Response, acked: Option<Vec<ReceiptOutcome>>) -> Response {
    if let Some(acked) = acked {
        let words: Vec<&str> = acked.into_iter().map(ReceiptOutcome::word).collect();
        // Lowercase words and commas only: always a valid header value.
        if let Ok(value) = HeaderValue::from_str(&words.join(",")) {
            response.headers_mut().insert(ACKED_HEADER, value);
        }
    }
    response
}
