//! Commits of unknown outcome (FoundationDB's `commit_unknown_result`,
//! 1021, and its kin 1031 and 1039) through [`Resolving`], the adapter the
//! daemon runs its FoundationDB store behind: a push is never doubled and
//! a pop never loses its item, whether the commit applied, did not, or was
//! still in flight when the outcome was reported (and lands later).
//!
//! The embedded store never reports an unknown outcome while it works, so
//! the fault is injected by a wrapper that reports one for the next
//! writing commit: after committing, instead of committing, or instead of
//! committing *yet* (the transaction is kept and committed by the test
//! afterwards, as a proxy that delivers a commit late would).

use crate::common;

use std::collections::VecDeque;
use std::sync::Arc;

use common::hooked::{CommitHook, Hooked};
use parking_lot::Mutex;

use hotq::keys::QueueName;
use hotq::queue::{Queue, QueueError};
use hotq::store::embedded::{Durability, EmbeddedTxn};
use hotq::store::resolving::{MARKERS_ROOT, Resolving, markers_range, sweep_markers};
use hotq::store::{Store, StoreError, Transaction};

/// What the next writing commit does before reporting `code`.
#[derive(Debug, Clone, Copy)]
enum Fault {
    /// Commits, then reports the unknown outcome.
    Applied(i32),
    /// Reports it without committing.
    NotApplied(i32),
    /// Reports it without committing; the test commits it later.
    Late(i32),
}

/// The faults to inject, in order, and the commits kept to land late.
#[derive(Clone, Default)]
struct Faults {
    next: Arc<Mutex<VecDeque<Fault>>>,
    late: Arc<Mutex<Vec<EmbeddedTxn>>>,
}

/// An embedded store whose next writing commits report [`Faults`].
type Faulty = Hooked<Faults>;

impl Faults {
    fn inject(&self, fault: Fault) {
        self.next.lock().push_back(fault);
    }

    fn take_late(&self) -> EmbeddedTxn {
        self.late.lock().pop().expect("a late commit was kept")
    }
}

impl CommitHook for Faults {
    async fn commit(&self, txn: &EmbeddedTxn, _set_keys: &[Vec<u8>]) -> Result<(), StoreError> {
        let fault = self.next.lock().pop_front();
        match fault {
            None => txn.commit().await,
            Some(Fault::Applied(code)) => {
                txn.commit().await?;
                Err(StoreError::from_code(code, "injected after applying"))
            }
            Some(Fault::NotApplied(code)) => Err(StoreError::from_code(code, "injected")),
            Some(Fault::Late(code)) => {
                self.late.lock().push(txn.clone());
                Err(StoreError::from_code(
                    code,
                    "injected; the commit lands later",
                ))
            }
        }
    }
}

/// A queue on a fault-injecting embedded store behind [`Resolving`], and the
/// injector. The temporary directory is leaked with the store.
fn queue(name: &str) -> (Queue<Resolving<Faulty>>, Faulty, Resolving<Faulty>) {
    let (embedded, dir) = common::embedded_store(Durability::Buffered);
    std::mem::forget(dir);
    let faulty = Hooked {
        inner: embedded,
        hook: Faults::default(),
    };
    let marked = Resolving::new(faulty.clone());
    let queue = Queue::new(marked.clone(), QueueName::new(name).unwrap());
    (queue, faulty, marked)
}

async fn payloads<S: Store>(queue: &Queue<S>) -> Vec<Vec<u8>> {
    common::scan(queue.store(), queue.keys().items_range())
        .await
        .into_iter()
        .map(|row| row.value)
        .collect()
}

#[tokio::test]
async fn a_push_whose_commit_applied_unseen_is_not_pushed_twice() {
    for code in [1021, 1031, 1039] {
        let (queue, faulty, _) = queue(&format!("push-applied-{code}"));
        faulty.hook.inject(Fault::Applied(code));
        queue.push(b"once").await.expect("resolved as applied");
        assert_eq!(queue.len().await.unwrap(), 1, "code {code}");
        assert_eq!(
            payloads(&queue).await.len(),
            1,
            "one item under code {code}"
        );
    }
}

#[tokio::test]
async fn a_push_whose_commit_did_not_apply_is_pushed_once_by_its_retry() {
    for code in [1021, 1031, 1039] {
        let (queue, faulty, _) = queue(&format!("push-unapplied-{code}"));
        faulty.hook.inject(Fault::NotApplied(code));
        queue.push(b"once").await.expect("resolved, then retried");
        assert_eq!(queue.len().await.unwrap(), 1, "code {code}");
        assert_eq!(
            payloads(&queue).await.len(),
            1,
            "one item under code {code}"
        );
    }
}

#[tokio::test]
async fn a_pop_whose_commit_applied_unseen_returns_its_item() {
    for code in [1021, 1031, 1039] {
        let (queue, faulty, _) = queue(&format!("pop-applied-{code}"));
        queue
            .push_batch(&[b"first".as_slice(), b"second"])
            .await
            .unwrap();
        faulty.hook.inject(Fault::Applied(code));
        let item = queue.pop().await.expect("resolved as applied");
        assert_eq!(
            item.map(|i| i.payload),
            Some(b"first".to_vec()),
            "code {code}"
        );
        let popped = queue.pop().await.unwrap().map(|i| i.payload);
        assert_eq!(
            popped,
            Some(b"second".to_vec()),
            "nothing lost, nothing twice"
        );
        assert_eq!(queue.len().await.unwrap(), 0);
    }
}

#[tokio::test]
async fn a_pop_whose_commit_did_not_apply_takes_its_item_on_retry() {
    let (queue, faulty, _) = queue("pop-unapplied");
    queue
        .push_batch(&[b"first".as_slice(), b"second"])
        .await
        .unwrap();
    faulty.hook.inject(Fault::NotApplied(1021));
    let item = queue.pop().await.expect("resolved, then retried");
    assert_eq!(item.map(|i| i.payload), Some(b"first".to_vec()));
    assert_eq!(queue.len().await.unwrap(), 1);
    assert_eq!(
        payloads(&queue).await.len(),
        1,
        "the second item is still there"
    );
}

#[tokio::test]
async fn a_late_commit_is_fenced_off_so_its_retry_is_the_only_one() {
    let (queue, faulty, _) = queue("push-late");
    faulty.hook.inject(Fault::Late(1031));
    queue.push(b"once").await.expect("fenced, then retried");
    assert_eq!(queue.len().await.unwrap(), 1);
    // The first attempt reaches the resolver only now: the fence on its
    // marker makes it conflict, so the item is not pushed a second time.
    let late = faulty.hook.take_late();
    assert_eq!(late.commit().await, Err(StoreError::Conflict));
    assert_eq!(queue.len().await.unwrap(), 1);
    assert_eq!(payloads(&queue).await.len(), 1);
}

#[tokio::test]
async fn a_late_pop_is_fenced_off_so_the_item_is_taken_once() {
    let (queue, faulty, _) = queue("pop-late");
    queue
        .push_batch(&[b"first".as_slice(), b"second"])
        .await
        .unwrap();
    faulty.hook.inject(Fault::Late(1039));
    let item = queue.pop().await.expect("fenced, then retried");
    assert_eq!(item.map(|i| i.payload), Some(b"first".to_vec()));
    assert_eq!(
        faulty.hook.take_late().commit().await,
        Err(StoreError::Conflict)
    );
    assert_eq!(
        queue.len().await.unwrap(),
        1,
        "the second item is still there"
    );
}

#[tokio::test]
async fn without_markers_the_outcome_stays_unknown() {
    // The control: the same fault on the bare store reaches the caller as
    // "maybe committed", with the item gone: a pop that cannot tell.
    let (embedded, _dir) = common::embedded_store(Durability::Buffered);
    let faulty = Hooked {
        inner: embedded,
        hook: Faults::default(),
    };
    let queue = Queue::new(faulty.clone(), QueueName::new("bare").unwrap());
    queue.push(b"only").await.unwrap();
    faulty.hook.inject(Fault::Applied(1021));
    assert_eq!(
        queue.pop().await.unwrap_err(),
        QueueError::Store(StoreError::MaybeCommitted)
    );
    assert_eq!(queue.len().await.unwrap(), 0, "taken, yet not returned");
}

#[tokio::test]
async fn markers_stay_bounded_and_stale_ones_are_swept() {
    let (queue, _, marked) = queue("bounded");
    for round in 0..50u32 {
        queue.push(&round.to_be_bytes()).await.unwrap();
        queue.pop().await.unwrap().expect("the item just pushed");
    }
    assert_eq!(
        marked.slots_minted(),
        1,
        "one commit at a time needs one slot"
    );
    let markers = common::scan(marked.inner(), markers_range()).await;
    assert_eq!(markers.len(), 1, "each commit clears its slot's older keys");
    // A marker of a process long gone (written at time 0), next to ours.
    let gone = foundationdb_tuple::Subspace::all().pack(&(MARKERS_ROOT, 7u64, 0u64, 0u64));
    let stale = marked.inner().begin().unwrap();
    stale.set(&gone, &[0; 24]).unwrap();
    stale.commit().await.unwrap();
    let cleared = sweep_markers(marked.inner(), 3_600_000).await.unwrap();
    assert_eq!(cleared, 1, "only the stale marker is cleared");
    let left = common::scan(marked.inner(), markers_range()).await;
    assert_eq!(left, markers, "this process's fresh marker stays");
}

#[tokio::test]
async fn markers_add_no_conflict_between_unrelated_commits() {
    // Transactions begun before other commits reused their marker slot
    // still commit: each marker key is fresh, so no read conflict on it
    // meets another commit's write.
    let (_, _, marked) = queue("unrelated");
    let early: Vec<_> = (0..8).map(|_| marked.begin().unwrap()).collect();
    for round in 0..8u8 {
        let txn = marked.begin().unwrap();
        txn.set(&[b'x', round], b"later").unwrap();
        txn.commit().await.unwrap();
    }
    for (n, txn) in early.into_iter().enumerate() {
        txn.set(&[b'y', n as u8], b"earlier").unwrap();
        assert_eq!(txn.commit().await, Ok(()), "transaction {n}");
    }
    assert_eq!(marked.slots_minted(), 1);
}

#[tokio::test]
async fn an_outcome_no_check_can_learn_is_reported_unknown() {
    // The commit's outcome is unknown and the check fails for good (here:
    // its fence commit is refused as too large): the caller must hear
    // "maybe committed", never a plain failure it could take as "not applied".
    let (queue, faulty, _) = queue("unresolvable");
    faulty.hook.inject(Fault::NotApplied(1021));
    faulty.hook.inject(Fault::NotApplied(2101));
    assert_eq!(
        queue.push(b"unknown").await.unwrap_err(),
        QueueError::Store(StoreError::MaybeCommitted)
    );
}
