//! The requester's side: register, wait on the result's watch, collect;
//! or withdraw, taking the item if the fulfiller won the race.

use std::time::Duration;

use rand::RngCore;
use tokio::time::Instant;

use crate::envelope::{RequestValue, decode_result, encode_request, now_ms};
use crate::keys::{QueueKeys, RequesterId};
use crate::lease::settle::release_in;
use crate::lease::{Lease, Receipt};
use crate::queue::{Item, QueueError};
use crate::staging::line::LocalWaiter;
use crate::store::Read;
use crate::store::{RetryPolicy, Store, StoreError, Transaction, Watch, decode_mark, transact};

/// Bytes of a requester id.
pub const REQUESTER_LEN: usize = 16;
/// Most attempts of one withdraw or collect transaction.
const ATTEMPTS_MAX: u32 = 200;
/// Pause between collects when the store refused a watch (a fallback, not
/// the normal path).
const WATCH_FALLBACK_POLL_MS: u64 = 25;

/// A registered request, not yet resolved.
#[derive(Debug)]
pub struct Registration {
    /// The request's key.
    pub request_key: Vec<u8>,
    /// Where the fulfiller writes the item.
    pub result_key: Vec<u8>,
    /// Fires when the result key changes.
    pub watch: Watch,
}

/// Writes a request at the end of the request subspace and watches its
/// result key. The last index is read with snapshot, so registration never
/// conflicts; a fresh requester id per attempt means a request whose commit
/// was unknown can at worst strand a result, which the reaper returns.
#[cfg(feature = "testing")]
pub async fn register<S: Store>(
    store: &S,
    keys: &QueueKeys,
    request: &RequestValue,
) -> Result<Registration, StoreError> {
    register_with(store, keys, request, |_| {}).await
}

/// Registers `request` (a request written at the end of the request
/// subspace, its result key watched), calling `on_attempt` with each attempt's requester id
/// before that attempt commits (a local waiter maps the id to itself).
pub async fn register_with<S: Store>(
    store: &S,
    keys: &QueueKeys,
    request: &RequestValue,
    mut on_attempt: impl FnMut(&RequesterId),
) -> Result<Registration, StoreError> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let mut requester = [0u8; REQUESTER_LEN];
        rand::rng().fill_bytes(&mut requester);
        let requester = RequesterId::from_bytes(requester.to_vec());
        on_attempt(&requester);
        match try_register(store, keys, request, &requester).await {
            Ok(registration) => return Ok(registration),
            Err(error) if error.is_retryable() && attempt < ATTEMPTS_MAX => continue,
            Err(error) => return Err(error),
        }
    }
}

async fn try_register<S: Store>(
    store: &S,
    keys: &QueueKeys,
    request: &RequestValue,
    requester: &RequesterId,
) -> Result<Registration, StoreError> {
    let txn = store.begin()?;
    // Like a push's index: a snapshot read of a mark raised with
    // atomic_max, so registrations never conflict and never restart at 0.
    let index = decode_mark(
        txn.get(&keys.next_request(), Read::Snapshot)
            .await?
            .as_deref(),
    );
    let request_key = keys.request(index, requester);
    let result_key = keys.result(requester);
    txn.set(&request_key, &encode_request(request))?;
    txn.atomic_max(&keys.next_request(), index + 1)?;
    txn.atomic_add(&keys.waiting(), 1)?;
    txn.atomic_add(&keys.wake(), 1)?;
    txn.set(&keys.registry_key(), b"")?;
    crate::staging::reap::note_request(&txn, keys, request.deadline_ms)?;
    // The watch reads the result key (a read conflict, as in
    // FoundationDB): nobody writes it before this request exists, so it
    // costs this writing transaction no conflict.
    let watch = txn.watch(&result_key)?;
    txn.commit().await?;
    Ok(Registration {
        request_key,
        result_key,
        watch,
    })
}

/// What one collect attempt found.
// Returned once per attempt and moved straight to its caller, never
// stored: boxing the item would cost an allocation per pop for nothing
// (it crossed the lint's line when items gained their fairness key).
#[allow(clippy::large_enum_variant)]
enum CollectOutcome {
    /// The result, taken; `None` when it held a leased item whose lease
    /// ended meanwhile (see `crate::staging::results::deliver_results_in`).
    Item(Option<Item>),
    /// No result yet; wait on this new watch.
    Rewatch(Watch),
}

/// Takes the result if it is there, else arms a new watch on it.
async fn collect_or_rewatch<S: Store>(
    store: &S,
    keys: &QueueKeys,
    result_key: &[u8],
) -> Result<CollectOutcome, QueueError> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let txn = store.begin()?;
        let outcome = async {
            match txn.get(result_key, Read::Serializable).await? {
                Some(value) => {
                    txn.clear(result_key)?;
                    // A large item's payload is read, and (unleased) its
                    // parts cleared, in the commit that takes its result.
                    let item = match decode(keys, result_key, &value) {
                        Ok(item) => {
                            let mut items = vec![item];
                            crate::staging::results::deliver_results_in(&txn, keys, &mut items)
                                .await
                                .map_err(crate::queue::corrupt_as_store)?;
                            Ok(items.pop())
                        }
                        Err(error) => Err(error),
                    };
                    Ok(Some(item))
                }
                None => Ok(None),
            }
        }
        .await;
        let outcome: Result<CollectOutcome, StoreError> = match outcome {
            Ok(Some(item)) => match txn.commit().await {
                Ok(()) => return item.map(CollectOutcome::Item),
                Err(error) => Err(error),
            },
            Ok(None) => match txn.watch(result_key) {
                Ok(watch) => txn.commit().await.map(|()| CollectOutcome::Rewatch(watch)),
                Err(error) => Err(error),
            },
            Err(error) => Err(error),
        };
        match outcome {
            Ok(collected) => return Ok(collected),
            Err(error) if retry_consuming(&error) && attempt < ATTEMPTS_MAX => {
                if error == StoreError::Conflict {
                    crate::metrics::conflict("collect");
                }
            }
            Err(error) => return Err(error.into()),
        }
    }
}

fn decode(_keys: &QueueKeys, result_key: &[u8], value: &[u8]) -> Result<Item, QueueError> {
    let result = decode_result(value).ok_or_else(|| QueueError::Corrupt {
        key: result_key.to_vec(),
    })?;
    Ok(item_of_result(result))
}

/// The item a result carries, with its lease if it was delivered under one.
pub(crate) fn item_of_result(result: crate::envelope::ResultValue) -> Item {
    let mut item = Item::from_value(result.item_key, result.item);
    item.lease = result.lease.map(|tag| Lease {
        receipt: Receipt(tag.receipt),
        expires_at_ms: tag.expires_at_ms,
        delivery_count: item.deliveries.saturating_add(1),
    });
    item
}

/// Waits for the registration's result until `deadline` (or until `stop`
/// resolves: the daemon is shutting down, or the caller left), then
/// withdraws. Returns the item if a fulfiller served the request, before
/// or during the withdrawal: through the result key, or, for a `local`
/// waiter served by this process's fulfiller, in memory. The wait is
/// interrupted only between store transactions, so a collected item is
/// never dropped on the floor.
pub async fn await_result<S: Store>(
    store: &S,
    keys: &QueueKeys,
    registration: &mut Registration,
    mut local: Option<&mut LocalWaiter>,
    deadline: Instant,
    stop: impl std::future::Future<Output = ()>,
) -> Result<Option<Item>, QueueError> {
    // Bounded by the deadline: every pass waits on a watch, the local
    // hand-off or a short fallback pause, and stops when the deadline passes.
    let mut stop = std::pin::pin!(stop);
    let mut local_open = local.is_some();
    let mut failed = None;
    while Instant::now() < deadline {
        let handed = async {
            match local.as_deref_mut() {
                Some(waiter) if local_open => (&mut waiter.receiver).await.ok(),
                _ => std::future::pending().await,
            }
        };
        let fired = tokio::select! {
            items = handed => match items.and_then(one_item) {
                Some(item) => return Ok(Some(item)),
                // The hand-off was dropped unsent: only the result key remains.
                None => { local_open = false; continue }
            },
            fired = &mut registration.watch => fired,
            _ = tokio::time::sleep_until(deadline) => break,
            _ = &mut stop => break,
        };
        if fired.is_err() {
            // The store refused or dropped the watch: look again shortly.
            let pause = Duration::from_millis(WATCH_FALLBACK_POLL_MS);
            tokio::time::sleep_until(deadline.min(Instant::now() + pause)).await;
        }
        match collect_or_rewatch(store, keys, &registration.result_key).await {
            Ok(CollectOutcome::Item(item)) => {
                return end_local_wait(store, keys, local, Ok(item)).await;
            }
            Ok(CollectOutcome::Rewatch(watch)) => registration.watch = watch,
            Err(error) => {
                failed = Some(error);
                break;
            }
        }
    }
    let outcome = match failed {
        Some(error) => Err(error),
        None => {
            withdraw(
                store,
                keys,
                &registration.request_key,
                &registration.result_key,
                false,
            )
            .await
        }
    };
    end_local_wait(store, keys, local, outcome).await
}

/// The item handed to a registered request: one (a stored request stands
/// for one pop of one item).
fn one_item(items: Vec<Item>) -> Option<Item> {
    assert!(items.len() <= 1, "a stored request is handed one item");
    items.into_iter().next()
}

/// Ends a local waiter's wait: if this process's fulfiller took the
/// hand-off (it consumed a request of ours before we stopped listening),
/// the item follows at once and is the answer, even when `found` is an
/// error; an item found in the store as well (a second request of ours,
/// from a retried registration, served by another process) goes back.
async fn end_local_wait<S: Store>(
    store: &S,
    keys: &QueueKeys,
    local: Option<&mut LocalWaiter>,
    found: Result<Option<Item>, QueueError>,
) -> Result<Option<Item>, QueueError> {
    let Some(waiter) = local else { return found };
    let Some(handed) = waiter.take_handed().await.and_then(one_item) else {
        return found;
    };
    if let Ok(Some(other)) = found
        && let Err(error) = restore_items(store, keys, vec![other]).await
    {
        tracing::error!(queue = %keys.name(), %error, "could not put back a second item served to one pop");
    }
    Ok(Some(handed))
}

/// Withdraws a request. If the fulfiller already served it, the result is
/// taken: returned to the caller, or with `restore` put back under the
/// item's original key (the caller is gone; a leased item is released from
/// its lease in the same commit). Both reads are non-snapshot, so a concurrent
/// fulfillment or reap makes one side conflict and retry.
pub async fn withdraw<S: Store>(
    store: &S,
    keys: &QueueKeys,
    request_key: &[u8],
    result_key: &[u8],
    restore: bool,
) -> Result<Option<Item>, QueueError> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let txn = store.begin()?;
        let (outcome, expired) = withdraw_in(&txn, keys, request_key, result_key, restore).await?;
        if expired && matches!(outcome, Ok(None)) {
            crate::metrics::queue_count(
                crate::metrics::REQUESTS_EXPIRED,
                keys.kind(),
                keys.name(),
                1,
            );
        }
        match outcome {
            Ok(Some(_)) if restore => return Ok(None),
            Ok(item) => return Ok(item),
            Err(error) if retry_consuming(&error) && attempt < ATTEMPTS_MAX => {
                if error == StoreError::Conflict {
                    crate::metrics::conflict("withdraw");
                }
                // Jitter so a withdrawal racing a fulfiller does not lock-step it.
                let pause_us = rand::random::<u64>() % 2_000;
                tokio::time::sleep(Duration::from_micros(pause_us)).await;
            }
            Err(error) => return Err(error.into()),
        }
    }
}

/// One attempt of [`withdraw`] in `txn`, committed: the item taken, if
/// any, or the store's error (retried by the caller); and whether the
/// request cleared was past its deadline (a long poll that timed out
/// unserved, counted once it commits, as the fulfiller and reaper count
/// the ones they clear). A failure other than the store's ends the
/// withdrawal.
async fn withdraw_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    request_key: &[u8],
    result_key: &[u8],
    restore: bool,
) -> Result<(Result<Option<Item>, StoreError>, bool), QueueError> {
    let mut expired = false;
    let body = async {
        let result = txn.get(result_key, Read::Serializable).await?;
        let request = txn.get(request_key, Read::Serializable).await?;
        if let Some(request) = request {
            expired = crate::envelope::decode_request(&request)
                .is_some_and(|request| request.deadline_ms <= now_ms());
            txn.clear(request_key)?;
            txn.atomic_add(&keys.waiting(), -1)?;
        }
        let Some(value) = result else {
            return Ok(None);
        };
        txn.clear(result_key)?;
        Ok(Some(value))
    };
    let outcome: Result<Option<Vec<u8>>, StoreError> = body.await;
    let value = match outcome {
        Ok(Some(value)) => value,
        Ok(None) => return Ok((txn.commit().await.map(|()| None), expired)),
        Err(error) => return Ok((Err(error), expired)),
    };
    let mut items = vec![decode(keys, result_key, &value)?];
    // A leased item is held by its lease too: released in the same commit,
    // its delivery uncounted (nobody saw it). One handed to the caller is
    // delivered: its parts are read (and an unleased one's cleared) in
    // this commit, or it is left out if its lease ended meanwhile.
    let restored = if restore {
        restore_in(txn, keys, &items[0]).await
    } else {
        match crate::staging::results::deliver_results_in(txn, keys, &mut items).await {
            Ok(()) => Ok(Ok(())),
            Err(QueueError::Store(error)) => Err(error),
            Err(error) => Ok(Err(error)),
        }
    };
    match restored {
        Ok(Ok(())) => Ok((txn.commit().await.map(|()| items.pop()), expired)),
        Ok(Err(error)) => Err(error),
        Err(error) => Ok((Err(error), expired)),
    }
}

/// Puts items that were taken but reached nobody back where they were:
/// unleased ones under their key as they stood, leased ones released from
/// their lease with the delivery uncounted.
pub async fn restore_items<S: Store>(
    store: &S,
    keys: &QueueKeys,
    items: Vec<Item>,
) -> Result<(), QueueError> {
    if items.is_empty() {
        return Ok(());
    }
    transact(store, RetryPolicy::default(), |txn| {
        let items = &items;
        async move {
            for item in items {
                if let Err(error) = restore_in(&txn, keys, item).await? {
                    return Ok(Err(error));
                }
            }
            Ok(Ok(()))
        }
    })
    .await?
}

/// In `txn`: puts back one item that was taken but reached nobody (see
/// [`restore_items`]); a leased one whose lease the timer already
/// returned needs nothing.
pub(crate) async fn restore_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    item: &Item,
) -> Result<Result<(), QueueError>, StoreError> {
    match &item.lease {
        None => {
            let mut value = item.value();
            if let Some(parts) = item.parts.filter(|p| item.payload.len() == p.len as usize) {
                // Delivered: the commit that took it cleared its parts (see
                // `crate::queue::parts::deliver_in`), so the payload it read
                // goes back into fresh parts. Clearing the old ones again
                // is a no-op then, and orphans none if they were kept.
                crate::queue::parts::clear_in(txn, Some(parts))?;
                value.parts = None;
                value.payload = item.payload.clone();
                crate::queue::parts::spill_in(txn, &mut value)?;
            }
            crate::queue::groups::give_back_in(txn, keys, &item.key, &value).await?;
            Ok(Ok(()))
        }
        Some(lease) => Ok(release_in(txn, keys, &lease.receipt)
            .await?
            .map(|_released| ())),
    }
}

/// Withdraws a registration when dropped unresolved (the waiting caller went
/// away): the request is cleared, or a result already written goes back to
/// the queue. Needs a tokio runtime; without one, the reaper cleans up.
pub struct WithdrawOnDrop<S: Store> {
    store: S,
    keys: QueueKeys,
    keys_to_withdraw: Option<(Vec<u8>, Vec<u8>)>,
}

impl<S: Store> WithdrawOnDrop<S> {
    /// Arms the guard for `registration`.
    pub fn new(store: S, keys: QueueKeys, registration: &Registration) -> Self {
        WithdrawOnDrop {
            store,
            keys,
            keys_to_withdraw: Some((
                registration.request_key.clone(),
                registration.result_key.clone(),
            )),
        }
    }

    /// The registration was resolved: nothing to do on drop.
    pub fn disarm(mut self) {
        self.keys_to_withdraw = None;
    }
}

impl<S: Store> Drop for WithdrawOnDrop<S> {
    fn drop(&mut self) {
        let Some((request_key, result_key)) = self.keys_to_withdraw.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let store = self.store.clone();
        let keys = self.keys.clone();
        runtime.spawn(async move {
            if let Err(error) = withdraw(&store, &keys, &request_key, &result_key, true).await {
                tracing::warn!(queue = %keys.name(), %error, "withdrawing a dropped pop failed; the reaper will clean up");
            }
        });
    }
}

/// Whether a transaction that consumes a result may be run again after
/// `error`. Not after "maybe committed": the first run may have taken the
/// result, and a second would find nothing and lose the item.
fn retry_consuming(error: &StoreError) -> bool {
    error.is_retryable() && !error.is_maybe_committed()
}

/// A deadline `wait` from now, as both a tokio instant and epoch milliseconds.
pub fn deadline_after(wait: Duration) -> (Instant, u64) {
    (Instant::now() + wait, now_ms() + wait.as_millis() as u64)
}
