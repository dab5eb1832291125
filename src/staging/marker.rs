//! A fulfiller's hand-off marker: a key only it writes, set to the
//! attempt number by every round that hands items over in memory, so a
//! commit whose outcome is unknown can be told applied or not.

use crate::store::Read;
use crate::store::{Store, Transaction};

/// Tries to read the marker this many times before giving up.
const MARKER_READ_ATTEMPTS: u32 = 20;
/// Pause between marker reads.
const MARKER_READ_PAUSE_MS: u64 = 50;

/// True when the hand-off marker holds `attempt`: the transaction
/// whose outcome was unknown applied. A failed read is retried (bounded):
/// answering "not applied" for one that did apply loses its items.
pub async fn marker_says_applied<S: Store>(store: &S, marker_key: &[u8], attempt: u64) -> bool {
    let mut last_error = None;
    for _ in 0..MARKER_READ_ATTEMPTS {
        let read = async {
            let check = store.begin()?;
            check.get(marker_key, Read::Serializable).await
        };
        match read.await {
            Ok(marker) => return marker.as_deref() == Some(&attempt.to_be_bytes()[..]),
            Err(error) => last_error = Some(error),
        }
        tokio::time::sleep(std::time::Duration::from_millis(MARKER_READ_PAUSE_MS)).await;
    }
    // Out of attempts: the items are reported as not taken. If the commit
    // did apply, they are lost, like a direct pop's in a crash.
    tracing::error!(
        error = ?last_error,
        "could not read a fulfiller's hand-off marker after an unknown commit outcome; its items may be lost"
    );
    false
}
