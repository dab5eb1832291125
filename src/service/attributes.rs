//! What SQS keeps with a queue beyond hotq's settings (its record:
//! attributes, tags), kept in the store under the queue's subspace (see
//! [`crate::keys::QueueKeys::sqs_queue`]), so deleting the queue drops it.
//! The record's shape is the front end's (`R`, JSON); its reads and
//! writes, and the settings written with it, are one transaction here.

use std::collections::BTreeMap;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{Hotq, Result};
use crate::keys::{QueueKeys, QueueName};
use crate::queue::settings::{Stored, read_in, update_in};
use crate::store::{RangeRead, Read, RetryPolicy, Store, StoreError, Transaction, transact};

/// A queue as a front end that keeps a record with it sees it: read in
/// one snapshot, or in the transaction of a change.
#[derive(Debug, Clone)]
pub struct RecordedQueue<R> {
    /// The queue's record; `None` when none was written.
    pub record: Option<R>,
    /// Whether the queue holds any key (a queue used only through `/v1`
    /// exists without a record).
    pub exists: bool,
    /// Its stored settings.
    pub settings: Stored,
}

/// A change of a queue's record and settings, written together.
#[derive(Debug, Clone)]
pub struct RecordChange<R> {
    /// The record to write.
    pub record: R,
    /// Settings to change, as [`Hotq::update_settings`] takes them.
    pub settings: BTreeMap<String, Value>,
    /// The dead-letter queue the change names, checked first (see
    /// [`Hotq::change_recorded_queue`]).
    pub dead_letter: Option<QueueName>,
}

/// How a front end judges a change of a queue's record, in its
/// transaction: `E` is its refusal, which writes nothing.
pub trait RecordEditor<R, E> {
    /// The change to write, `Ok(None)` for none, or a refusal.
    fn edit(&self, queue: &RecordedQueue<R>) -> std::result::Result<Option<RecordChange<R>>, E>;
    /// Whether the change may name `dead` (as it is now) as its dead-letter queue.
    fn check_dead_letter(
        &self,
        change: &RecordChange<R>,
        dead: &RecordedQueue<R>,
    ) -> std::result::Result<(), E>;
    /// The refusal of settings the core finds invalid (`message` says why).
    fn invalid_settings(&self, message: String) -> E;
}

impl<S: Store> Hotq<S> {
    /// The queue of `keys` with its record, in one snapshot.
    pub async fn recorded_queue<R: DeserializeOwned>(
        &self,
        keys: &QueueKeys,
    ) -> Result<RecordedQueue<R>> {
        let txn = self.store.begin()?;
        Ok(recorded_in(&txn, keys, Read::Snapshot).await?)
    }

    /// Judges a change of the record and settings of `keys` with `editor`
    /// and writes it, in one transaction that reads both without snapshot
    /// (two racing changes serialize); every check runs before the first
    /// write, so a refused change writes nothing. This daemon's cached
    /// default lease of the queue is forgotten after.
    pub async fn change_recorded_queue<R, E>(
        &self,
        keys: &QueueKeys,
        editor: &(impl RecordEditor<R, E> + Sync),
    ) -> Result<std::result::Result<(), E>>
    where
        R: Serialize + DeserializeOwned + Send + Sync,
        E: Send,
    {
        let defaults = &self.settings_defaults;
        let outcome = transact(&self.store, RetryPolicy::default(), |txn| async move {
            let queue = recorded_in(&txn, keys, Read::Serializable).await?;
            let change = match editor.edit(&queue) {
                Ok(Some(change)) => change,
                Ok(None) => return Ok(Ok(())),
                Err(refused) => return Ok(Err(refused)),
            };
            if let Some(dead) = &change.dead_letter {
                let dead = recorded_in(&txn, &QueueKeys::new(dead), Read::Snapshot).await?;
                if let Err(refused) = editor.check_dead_letter(&change, &dead) {
                    return Ok(Err(refused));
                }
            }
            match update_in(&txn, keys, &change.settings, defaults).await? {
                Err(invalid) => return Ok(Err(editor.invalid_settings(invalid.to_string()))),
                Ok(_) => write_record_in(&txn, keys, &change.record)?,
            }
            Ok(Ok(()))
        })
        .await;
        self.default_leases.forget(keys);
        Ok(outcome?)
    }
}

/// The queue of `keys` with its record, read in `txn` (its record as `read`).
async fn recorded_in<T: Transaction, R: DeserializeOwned>(
    txn: &T,
    keys: &QueueKeys,
    read: Read,
) -> std::result::Result<RecordedQueue<R>, StoreError> {
    let key = keys.sqs_queue();
    let record = match txn.get(&key, read).await? {
        None => None,
        Some(value) => Some(serde_json::from_slice(&value).map_err(|_| malformed(&key))?),
    };
    // The record is a key of the queue's: with one, the queue exists
    // without a range read (every SQS action loads its queue).
    let exists = record.is_some() || {
        let (begin, end) = keys.queue_range();
        !txn.get_range(RangeRead::new(&begin, &end, 1).snapshot())
            .await?
            .is_empty()
    };
    let settings = read_in(txn, keys)
        .await
        .map_err(crate::queue::corrupt_as_store)?;
    Ok(RecordedQueue {
        record,
        exists,
        settings,
    })
}

/// Writes `record` for `keys` in `txn`.
fn write_record_in<T: Transaction, R: Serialize>(
    txn: &T,
    keys: &QueueKeys,
    record: &R,
) -> std::result::Result<(), StoreError> {
    let key = keys.sqs_queue();
    let value = serde_json::to_vec(record).map_err(|_| malformed(&key))?;
    txn.set(&key, &value)
}

/// A record that is not JSON of its shape (nothing hotq writes).
fn malformed(key: &[u8]) -> StoreError {
    StoreError::Backend {
        code: 4100,
        message: format!("malformed SQS record under key {key:?}"),
    }
}
