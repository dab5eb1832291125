//! Acks riding on a pop (`POST …/pop?ack=R1,R2,…`): the receipts a worker
//! finished are acked, then the pop proceeds, in as few commits as the
//! path allows. A pop waiting in line carries its acks into its queue's
//! fulfill round, which acks them in the commit that takes the next items
//! ([`crate::staging::round::fulfill`]), or, when the round finds no item, in a
//! commit all the same (the acks never wait for items). A direct pop acks
//! in its own transaction ([`crate::staging::direct`]). Acks a round never
//! took (the pop left before one committed) are acked here, in a
//! transaction of their own. Every ack reads its lease without snapshot,
//! so an ack racing the lease's expiry has exactly one winner.

use std::sync::{Arc, Mutex};

use crate::keys::QueueKeys;
use crate::lease::settle::ack_in;
use crate::lease::{LeaseError, Receipt};
use crate::store::{RetryPolicy, Store, StoreError, Transaction, transact};

/// What became of one receipt acked on a pop.
pub type AckOutcome = Result<(), LeaseError>;

/// The acks riding on one pop in line: the receipts, then, once a fulfill
/// round's commit settled them, their outcomes in the same order. Shared
/// by the pop and its line entry.
#[derive(Debug, Default)]
pub struct RidingAcks {
    /// The receipts, in the order the pop named them.
    pub receipts: Vec<Receipt>,
    /// Set by the round that committed them; `None`: not acked yet.
    pub outcomes: Option<Vec<AckOutcome>>,
}

/// [`RidingAcks`] as shared.
pub type SharedAcks = Arc<Mutex<RidingAcks>>;

/// Most receipts one pop carries.
pub const POP_ACKS_MAX: usize = 1_000;

/// Acks consume leases: after "maybe committed" a first run may have
/// taken them, and a second would report wrong outcomes.
const RIDING_ACK_RETRY: RetryPolicy = RetryPolicy {
    attempts_max: 100,
    backoff_initial_ms: 1,
    backoff_max_ms: 50,
    retry_maybe_committed: false,
};

/// In `txn`, as of `now_ms`: acks each of `receipts`, in order; one
/// outcome each. A receipt's failure is its outcome (a lease hotq cannot
/// read counts as unknown, and is logged); only the store failing fails.
pub async fn ack_all_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    receipts: &[Receipt],
    now_ms: u64,
) -> Result<Vec<AckOutcome>, StoreError> {
    let mut outcomes = Vec::with_capacity(receipts.len());
    for receipt in receipts {
        let outcome = match ack_in(txn, keys, receipt, now_ms).await? {
            Err(LeaseError::Queue(error)) => {
                tracing::warn!(queue = %keys.name(), %error, "a receipt riding on a pop names a lease hotq cannot read");
                Err(LeaseError::UnknownReceipt)
            }
            other => other,
        };
        outcomes.push(outcome);
    }
    Ok(outcomes)
}

/// Acks `receipts` in a transaction of their own.
pub async fn ack_alone<S: Store>(
    store: &S,
    keys: &QueueKeys,
    receipts: &[Receipt],
) -> Result<Vec<AckOutcome>, StoreError> {
    if receipts.is_empty() {
        return Ok(Vec::new());
    }
    transact(store, RIDING_ACK_RETRY, |txn| async move {
        ack_all_in(&txn, keys, receipts, crate::envelope::now_ms()).await
    })
    .await
}

/// The acks `receipts` as they ride in line (none: no acks).
pub fn riding(receipts: Vec<Receipt>) -> Option<SharedAcks> {
    (!receipts.is_empty()).then(|| {
        Arc::new(Mutex::new(RidingAcks {
            receipts,
            outcomes: None,
        }))
    })
}

/// The outcomes of acks that rode in line, once the pop has left it: as
/// the round that took them settled them, or acked now if no round did.
pub async fn outcomes_after_line<S: Store>(
    store: &S,
    keys: &QueueKeys,
    acks: Option<SharedAcks>,
) -> Result<Vec<AckOutcome>, StoreError> {
    let Some(acks) = acks else {
        return Ok(Vec::new());
    };
    let (receipts, outcomes) = {
        let mut acks = acks.lock().expect("riding acks lock");
        (std::mem::take(&mut acks.receipts), acks.outcomes.take())
    };
    match outcomes {
        Some(outcomes) => Ok(outcomes),
        None => ack_alone(store, keys, &receipts).await,
    }
}
