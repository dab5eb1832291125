//! Re-drive: a dead-letter queue's items back to the queues they came
//! from (see [`crate::lease::redrive`]); `/v1`'s redrive and SQS's
//! message move tasks.

use super::{Error, Hotq, Result};
use crate::keys::{QueueKeys, QueueName};
use crate::store::Store;

pub use crate::lease::redrive::REDRIVE_BATCH_MAX;

impl<S: Store> Hotq<S> {
    /// Moves up to `max` (1 to [`REDRIVE_BATCH_MAX`]) items of the
    /// dead-letter queue `dead` back where they came from, in bounded
    /// commits; how many moved. Whether `dead` is a dead-letter queue is
    /// the caller's check ([`Self::is_dead_letter_queue`]): each front end
    /// answers it its own way. An error after some commits leaves those
    /// items moved and the rest in `dead`.
    pub async fn redrive(&self, dead: &QueueName, max: usize) -> Result<usize> {
        if max == 0 || max > REDRIVE_BATCH_MAX {
            return Err(Error::BadParameter(format!(
                "max must be 1 to {REDRIVE_BATCH_MAX}, got {max}"
            )));
        }
        Ok(crate::lease::redrive::redrive(&self.store, dead, max).await?)
    }

    /// How many items the queue of `keys` holds to re-drive: its visible
    /// items and those waiting behind their group's head.
    pub async fn redrivable(&self, keys: &QueueKeys) -> Result<u64> {
        let counts = self.queue_counts(keys).await?;
        Ok(counts.depth.max(0) as u64 + counts.grouped.max(0) as u64)
    }
}
