//! Dead-letter queues by role, not by name.
//!
//! A queue is a dead-letter queue when its name ends in `.dead` (every
//! queue's default target) or when some queue's stored `dead_letter_queue`
//! setting names it. The second is kept as a store-wide index,
//! `("hotq-dlq", target, kind, origin)` (see
//! [`crate::keys::dead_letter_role_key`]), written in the same transaction
//! as the setting (see [`crate::queue::settings::note_target_in`]), so
//! every daemon on one store
//! sees the role from the setting's commit on.
//!
//! An entry outlives its origin's settings when the origin queue is
//! deleted (the delete clears the queue's own subspace, not this index):
//! so an entry counts only while the origin's stored settings still name
//! the target ([`origins_in`] checks each). A stale entry costs one read
//! until the origin sets its dead-letter queue again, which rewrites it.
//!
//! The role matters to: redrive (which queues may be re-driven, and where
//! an item that carries no origin goes), queue stats and listings (the
//! `dead_letter` flag), and the `hotq_queue_dead_letter` gauge that the
//! dashboard and alerts use to tell dead-letter queues from live ones.

use crate::keys::{
    QueueKeys, QueueKind, QueueName, dead_letter_role_origin, dead_letter_roles_range,
};
use crate::queue::QueueError;
use crate::store::{RangeRead, Transaction};

/// Most index entries read for one target: a dead-letter queue shared by
/// more origins than this is still one (the role needs one valid entry),
/// but only these are offered as a redrive's default origin.
pub const ORIGINS_READ_MAX: usize = 64;

/// The queues whose stored settings name `target` as their dead-letter
/// queue (up to [`ORIGINS_READ_MAX`] index entries read), in index order.
/// Snapshot reads.
pub async fn origins_in<T: Transaction>(
    txn: &T,
    target: &QueueName,
) -> Result<Vec<(QueueKind, QueueName)>, QueueError> {
    let (begin, end) = dead_letter_roles_range(target);
    let rows = txn
        .get_range(RangeRead::new(&begin, &end, ORIGINS_READ_MAX).snapshot())
        .await?;
    let mut origins = Vec::new();
    for row in rows {
        let Some((kind, origin)) = dead_letter_role_origin(&row.key) else {
            continue;
        };
        let stored =
            crate::queue::settings::read_in(txn, &QueueKeys::of_kind(kind, &origin)).await?;
        if stored.dead_letter_queue.as_deref() == Some(target.as_str()) {
            origins.push((kind, origin));
        }
    }
    Ok(origins)
}

/// True when `keys` is a dead-letter queue: a FIFO queue (dead letters are
/// always appended to a FIFO queue) whose name ends in `.dead` or that some
/// queue names as its `dead_letter_queue`.
pub async fn is_dead_letter_queue_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
) -> Result<bool, QueueError> {
    if keys.kind() != QueueKind::Fifo {
        return Ok(false);
    }
    if keys.name().is_dead_letter() {
        return Ok(true);
    }
    Ok(!origins_in(txn, keys.name()).await?.is_empty())
}

/// Where a re-drive of `dead` sends an item that does not say where it came
/// from (one pushed straight into the dead-letter queue): `q` for `q.dead`;
/// the one FIFO queue naming `dead` as its dead-letter queue, when exactly
/// one does; else nowhere (`None`: such an item stays, see
/// [`crate::lease::redrive`]).
pub async fn default_origin_in<T: Transaction>(
    txn: &T,
    dead: &QueueName,
) -> Result<Option<QueueName>, QueueError> {
    if let Some(origin) = dead
        .as_str()
        .strip_suffix(crate::keys::DEAD_LETTER_SUFFIX)
        .and_then(|origin| QueueName::new(origin).ok())
    {
        return Ok(Some(origin));
    }
    let origins = origins_in(txn, dead).await?;
    Ok(match origins.as_slice() {
        [(QueueKind::Fifo, origin)] => Some(origin.clone()),
        _ => None,
    })
}
