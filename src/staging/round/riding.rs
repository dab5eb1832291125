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

use parking_lot::Mutex;
use std::sync::Arc;

use crate::keys::QueueKeys;
use crate::lease::settle::ack_in;
use crate::lease::{LeaseError, Receipt};
use crate::store::{RetryPolicy, Store, StoreError, Transaction, transact};

/// What became of one receipt acked on a pop.
pub type AckOutcome = Result<(), LeaseError>;

/// The acks riding on one pop in line, shared by the pop and its line
/// entry. Who acks them is decided under its lock, once: a fulfill round
/// (in the commit that may also take the pop's items), or the pop itself
/// after it left the line, never both. A pop that gives up on a round
/// still committing (a stalled store) can learn no outcome: it reports
/// them unknown, and the round's outcome, when it comes, is dropped.
#[derive(Debug)]
pub struct RidingAcks {
    /// The receipts, in the order the pop named them.
    receipts: Vec<Receipt>,
    /// Who has them now.
    state: AckState,
}

/// Where riding acks are in their life.
#[derive(Debug)]
enum AckState {
    /// Nobody has taken them yet.
    Waiting,
    /// A round's transaction carries them; its outcome is not known yet.
    InRound,
    /// A round's commit settled them: one outcome per receipt, in order.
    Settled(Vec<AckOutcome>),
    /// The pop took them back to ack alone: no round may ack them.
    TakenBack,
    /// The pop left while a round carried them; its outcome goes unread.
    Abandoned,
}

/// What a pop leaving its line does about its riding acks.
#[derive(Debug)]
pub enum Leaving {
    /// A round settled them: these are their outcomes.
    Settled(Vec<AckOutcome>),
    /// No round took them: the pop acks these itself.
    AckAlone(Vec<Receipt>),
    /// A round carries them and has not answered: their outcome is unknown.
    Unknown,
}

impl RidingAcks {
    /// The receipts for a round to ack in its transaction (`None`: not a
    /// round's to ack: settled, taken back, or abandoned).
    pub fn take_for_round(&mut self) -> Option<Vec<Receipt>> {
        match self.state {
            AckState::Waiting | AckState::InRound => {
                self.state = AckState::InRound;
                Some(self.receipts.clone())
            }
            _ => None,
        }
    }

    /// A round's commit settled them with `outcomes`. True when a pop will
    /// read them; false when the pop had already left (the outcome is
    /// dropped) or the outcomes do not match the receipts (a bug, logged:
    /// a panic here would be under the line's lock).
    pub fn settle(&mut self, outcomes: Vec<AckOutcome>) -> bool {
        let expected = matches!(self.state, AckState::InRound);
        if !expected || outcomes.len() != self.receipts.len() {
            if !matches!(self.state, AckState::Abandoned) {
                tracing::error!(state = ?self.state, receipts = self.receipts.len(), outcomes = outcomes.len(),
                    "riding acks settled out of turn; outcome dropped");
            }
            self.state = AckState::Abandoned;
            return false;
        }
        self.state = AckState::Settled(outcomes);
        true
    }

    /// The round that carried them did not settle them (its transaction
    /// failed, or it deferred them): the next round, or the pop, may.
    pub fn release(&mut self) {
        if matches!(self.state, AckState::InRound) {
            self.state = AckState::Waiting;
        }
    }

    /// The pop leaves its line: what it does about its acks. Once.
    pub fn leave(&mut self) -> Leaving {
        let state = std::mem::replace(&mut self.state, AckState::Abandoned);
        match state {
            AckState::Settled(outcomes) => Leaving::Settled(outcomes),
            AckState::Waiting => {
                self.state = AckState::TakenBack;
                Leaving::AckAlone(self.receipts.clone())
            }
            AckState::InRound | AckState::Abandoned | AckState::TakenBack => Leaving::Unknown,
        }
    }
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
            state: AckState::Waiting,
        }))
    })
}

/// The outcomes of acks that rode in line, once the pop has left it: as
/// the round that took them settled them, or acked now if no round did.
/// A round still committing them (the pop gave up waiting for it) leaves
/// their outcome unknown: [`StoreError::MaybeCommitted`], as for any
/// commit whose answer never came.
pub async fn outcomes_after_line<S: Store>(
    store: &S,
    keys: &QueueKeys,
    acks: Option<SharedAcks>,
) -> Result<Vec<AckOutcome>, StoreError> {
    let Some(acks) = acks else {
        return Ok(Vec::new());
    };
    let leaving = acks.lock().leave();
    match leaving {
        Leaving::Settled(outcomes) => Ok(outcomes),
        Leaving::AckAlone(receipts) => ack_alone(store, keys, &receipts).await,
        Leaving::Unknown => Err(StoreError::MaybeCommitted),
    }
}
