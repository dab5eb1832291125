//! Acks riding on a pop over HTTP: `POST …/pop?ack=R1,R2,…` acks the
//! receipts, then pops as any pop (see [`crate::staging::round::riding`]); the
//! answer, 200 or 204, carries `hotq-acked: <outcome>,…`, one outcome per
//! receipt in the order given, in the batch ack's words. A receipt that
//! fails is its outcome; it never fails the pop.

use axum::http::HeaderValue;
use axum::response::Response;

use super::error::ApiError;
use super::state::AppState;
use crate::keys::QueueKeys;
use crate::lease::{LeaseError, Receipt};
use crate::metrics;
use crate::queue::Item;
use crate::staging::line::AckOutcome;
use crate::staging::pop::PopAsk;
use crate::staging::round::riding::POP_ACKS_MAX;
use crate::store::Store;

/// The header of a pop's ack outcomes.
pub const ACKED_HEADER: &str = "hotq-acked";

/// The receipts a pop's `ack` names, in order (`None`: not a receipt).
#[derive(Debug, Default)]
pub struct Riding {
    parsed: Vec<Option<Receipt>>,
}

impl Riding {
    /// Parses `ack` (comma-separated receipts; empty: none). More than
    /// [`POP_ACKS_MAX`] is refused; a malformed receipt is its outcome.
    pub fn parse(ack: &str) -> Result<Riding, ApiError> {
        if ack.is_empty() {
            return Ok(Riding::default());
        }
        Riding::of(ack.split(','))
    }

    /// The receipts `receipts` names, in order: more than [`POP_ACKS_MAX`]
    /// is refused; a malformed receipt is its outcome.
    pub fn of<'a>(receipts: impl Iterator<Item = &'a str> + Clone) -> Result<Riding, ApiError> {
        let count = receipts.clone().count();
        if count > POP_ACKS_MAX {
            return Err(ApiError::bad_parameter(format!(
                "ack names at most {POP_ACKS_MAX} receipts, got {count}"
            )));
        }
        let parsed = receipts.map(Receipt::parse).collect();
        Ok(Riding { parsed })
    }

    /// True when `ack` named no receipt (`ack=`).
    pub fn is_empty(&self) -> bool {
        self.parsed.is_empty()
    }

    /// The well-formed receipts, in order.
    fn receipts(&self) -> Vec<Receipt> {
        self.parsed.iter().flatten().copied().collect()
    }

    /// Each receipt's outcome word, in order.
    fn words(&self, keys: &QueueKeys, acked: &[AckOutcome]) -> Vec<&'static str> {
        let mut outcomes = acked.iter();
        let words: Vec<&str> = self
            .parsed
            .iter()
            .map(|receipt| match receipt {
                None => "invalid",
                Some(receipt) => {
                    let outcome = outcomes.next().expect("one outcome per receipt");
                    word(keys, receipt, outcome)
                }
            })
            .collect();
        words
    }
}

/// The batch ack's word for `outcome` of `receipt` on `keys`' queue.
fn word(keys: &QueueKeys, receipt: &Receipt, outcome: &AckOutcome) -> &'static str {
    match outcome {
        Ok(()) => "acked",
        Err(LeaseError::UnknownReceipt) if !receipt.names_queue(keys) => "receipt_queue_mismatch",
        Err(LeaseError::Expired { .. }) => "lease_expired",
        Err(LeaseError::UnknownReceipt | LeaseError::Queue(_)) => "unknown_receipt",
    }
}

/// Pops `pop` from `keys` with `riding` acked first; returns the items
/// and, when the pop named `ack`, each receipt's outcome word in order
/// (every front end's pops).
pub async fn pop_with_acks<S: Store>(
    state: &AppState<S>,
    keys: &QueueKeys,
    pop: PopAsk,
    riding: Option<Riding>,
) -> Result<(Vec<Item>, Option<Vec<&'static str>>), ApiError> {
    let Some(riding) = riding else {
        let popped = state
            .hotq
            .coordinator
            .pop_acking(keys, pop, Vec::new())
            .await?;
        return Ok((popped.items, None));
    };
    let popped = state
        .hotq
        .coordinator
        .pop_acking(keys, pop, riding.receipts())
        .await?;
    let acked = popped.acked.iter().filter(|o| o.is_ok()).count() as u64;
    if acked > 0 {
        metrics::queue_count(metrics::ACKS, keys.kind(), keys.name(), acked);
    }
    Ok((popped.items, Some(riding.words(keys, &popped.acked))))
}

/// `response` with the `hotq-acked` header, when the pop named `ack`.
pub fn with_acked(mut response: Response, acked: Option<Vec<&'static str>>) -> Response {
    if let Some(acked) = acked {
        // Lowercase words and commas only: always a valid header value.
        let value = HeaderValue::from_str(&acked.join(",")).expect("a valid header value");
        response.headers_mut().insert(ACKED_HEADER, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::QueueName;

    #[test]
    fn receipts_parse_in_order_and_a_bad_one_is_its_own_outcome() {
        let keys = QueueKeys::new(&QueueName::new("jobs").unwrap());
        let good = Receipt::for_lease(&keys, 1);
        let foreign = Receipt::for_lease(&QueueKeys::new(&QueueName::new("other").unwrap()), 1);
        let riding = Riding::parse(&format!("{good},nope,{foreign},{good}")).unwrap();
        assert_eq!(riding.receipts(), [good, foreign, good]);
        let outcomes = [
            Ok(()),
            Err(LeaseError::UnknownReceipt),
            Err(LeaseError::Expired { expired_at_ms: 1 }),
        ];
        assert_eq!(
            riding.words(&keys, &outcomes).join(","),
            "acked,invalid,receipt_queue_mismatch,lease_expired"
        );
        assert!(Riding::parse("").unwrap().parsed.is_empty());
        let too_many = vec![good.to_string(); POP_ACKS_MAX + 1].join(",");
        assert!(Riding::parse(&too_many).is_err());
        let most = vec![good.to_string(); POP_ACKS_MAX].join(",");
        assert_eq!(Riding::parse(&most).unwrap().parsed.len(), POP_ACKS_MAX);
    }
}
