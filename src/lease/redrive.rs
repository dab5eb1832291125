//! Re-driving a dead-letter queue: its items go back to the queues they
//! came from, as fresh items (delivery count 0), in one commit per batch.

use std::collections::BTreeMap;

use crate::envelope::{ItemValue, encode_item_value};
use crate::keys::{DEAD_LETTER_SUFFIX, QueueKeys, QueueName};
use crate::queue::read_end;
use crate::queue::{QueueError, append_in};
use crate::store::{RetryPolicy, Store, Transaction, transact};

/// Most items one re-drive moves.
pub const REDRIVE_BATCH_MAX: usize = 1_000;

/// Moves up to `max` items from the front of the dead-letter queue `dead`
/// to the tails of the queues they came from (an item pushed straight into
/// `q.dead` goes to `q`). Returns how many moved. Reads without snapshot,
/// so a concurrent pop of the same items conflicts and one side retries.
pub async fn redrive<S: Store>(
    store: &S,
    dead: &QueueName,
    max: usize,
) -> Result<usize, QueueError> {
    // Not a dead-letter queue: nothing to send anywhere.
    let Some(default_origin) = dead
        .as_str()
        .strip_suffix(DEAD_LETTER_SUFFIX)
        .and_then(|origin| QueueName::new(origin).ok())
    else {
        return Ok(0);
    };
    let dead_keys = QueueKeys::new(dead);
    let max = max.clamp(1, REDRIVE_BATCH_MAX);
    let moved = transact(store, RetryPolicy::default(), |txn| {
        let dead_keys = &dead_keys;
        let default_origin = &default_origin;
        async move {
            let items = read_end(&txn, dead_keys, crate::envelope::End::Front, max, false)
                .await
                .map_err(crate::queue::corrupt_as_store)?;
            let mut by_origin: BTreeMap<QueueName, Vec<Vec<u8>>> = BTreeMap::new();
            for item in &items {
                txn.clear(&item.key)?;
                let origin = item
                    .dead_letter
                    .as_ref()
                    .and_then(|dead| QueueName::new(&dead.queue).ok())
                    .unwrap_or_else(|| default_origin.clone());
                let fresh = ItemValue::new(item.enqueued_at_ms, item.payload.clone());
                by_origin
                    .entry(origin)
                    .or_default()
                    .push(encode_item_value(&fresh));
            }
            for (origin, values) in &by_origin {
                append_in(&txn, &QueueKeys::new(origin), values).await?;
            }
            if !items.is_empty() {
                txn.atomic_add(&dead_keys.depth(), -(items.len() as i64))?;
            }
            Ok(items.len())
        }
    })
    .await?;
    Ok(moved)
}
