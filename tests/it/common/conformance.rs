//! The store conformance suite: FoundationDB's rules, one test per rule,
//! generic over [`Store`] so every backend runs the same cases with the
//! same expected outcomes.
//!
//! Each case works under a fresh random prefix, so cases can share one
//! cluster and leave nothing behind.

use std::time::Duration;

use hotq::store::Read;
use hotq::store::{KeyValue, RangeRead, Store, StoreError, Transaction, decode_counter};
use rand::RngCore;

/// A fresh key space for one case.
pub struct Space {
    prefix: Vec<u8>,
}

impl Space {
    pub fn new() -> Space {
        let mut random = [0u8; 8];
        rand::rng().fill_bytes(&mut random);
        let mut prefix = b"conformance/".to_vec();
        prefix.extend(random.iter().map(|b| b'a' + (b % 26)));
        prefix.push(b'/');
        Space { prefix }
    }

    pub fn key(&self, name: &str) -> Vec<u8> {
        let mut key = self.prefix.clone();
        key.extend_from_slice(name.as_bytes());
        key
    }

    pub fn begin(&self) -> Vec<u8> {
        self.prefix.clone()
    }

    pub fn end(&self) -> Vec<u8> {
        let mut end = self.prefix.clone();
        end.push(0xff);
        end
    }
}

async fn write<S: Store>(store: &S, pairs: &[(&[u8], &[u8])]) {
    let txn = store.begin().unwrap();
    for (key, value) in pairs {
        txn.set(key, value).unwrap();
    }
    txn.commit().await.unwrap();
}

async fn read<S: Store>(store: &S, key: &[u8]) -> Option<Vec<u8>> {
    store
        .begin()
        .unwrap()
        .get(key, Read::Snapshot)
        .await
        .unwrap()
}

async fn names<T: Transaction>(space: &Space, txn: &T, range: RangeRead<'_>) -> Vec<String> {
    let rows: Vec<KeyValue> = txn.get_range(range).await.unwrap();
    rows.iter()
        .map(|row| String::from_utf8(row.key[space.prefix.len()..].to_vec()).unwrap())
        .collect()
}

/// Two pops of the same head: exactly one commits, the other conflicts.
pub async fn first_key_pops_conflict<S: Store>(store: S) {
    let space = Space::new();
    let (a, b) = (space.key("a"), space.key("b"));
    write(&store, &[(&a, b"1"), (&b, b"2")]).await;
    let (begin, end) = (space.begin(), space.end());
    let one = store.begin().unwrap();
    let two = store.begin().unwrap();
    for txn in [&one, &two] {
        let rows = txn
            .get_range(RangeRead::new(&begin, &end, 1))
            .await
            .unwrap();
        assert_eq!(rows[0].key, a);
        txn.clear(&rows[0].key).unwrap();
    }
    assert_eq!(one.commit().await, Ok(()));
    assert_eq!(two.commit().await, Err(StoreError::Conflict));
    assert_eq!(read(&store, &a).await, None);
    assert_eq!(read(&store, &b).await, Some(b"2".to_vec()));
}

/// The same with snapshot reads: no read conflict, both commit.
pub async fn snapshot_pops_both_commit<S: Store>(store: S) {
    let space = Space::new();
    let a = space.key("a");
    write(&store, &[(&a, b"1")]).await;
    let (begin, end) = (space.begin(), space.end());
    let one = store.begin().unwrap();
    let two = store.begin().unwrap();
    for txn in [&one, &two] {
        let rows = txn
            .get_range(RangeRead::new(&begin, &end, 1).snapshot())
            .await
            .unwrap();
        txn.clear(&rows[0].key).unwrap();
    }
    assert_eq!(one.commit().await, Ok(()));
    assert_eq!(two.commit().await, Ok(()));
}

/// Runs `read` in a transaction that also writes, lets `interloper` commit
/// `key`, and returns the reader's commit outcome.
async fn read_then_interleave<S: Store>(
    store: &S,
    space: &Space,
    read: RangeRead<'_>,
    interloper: &[u8],
) -> Result<(), StoreError> {
    let reader = store.begin().unwrap();
    reader.get_range(read).await.unwrap();
    // A read-only commit never conflicts; the write (outside every range
    // read here) makes it checked.
    reader.set(&space.end(), b"x").unwrap();
    write(store, &[(interloper, b"new")]).await;
    reader.commit().await
}

/// Conflict ranges of limit-hit and exhausted range reads, both directions.
pub async fn range_read_conflict_ranges<S: Store>(store: S) {
    let space = Space::new();
    let (b, d, f) = (space.key("b"), space.key("d"), space.key("f"));
    write(&store, &[(&b, b"1"), (&d, b"2"), (&f, b"3")]).await;
    let (begin, end) = (space.begin(), space.end());
    let forward = RangeRead::new(&begin, &end, 1);
    let reverse = RangeRead::new(&begin, &end, 1).reverse();
    let exhausted = RangeRead::new(&begin, &end, 100);

    // Limit hit at b: the read covered [begin, b\0).
    assert_eq!(
        read_then_interleave(&store, &space, forward, &space.key("c")).await,
        Ok(())
    );
    assert_eq!(
        read_then_interleave(&store, &space, forward, &b).await,
        Err(StoreError::Conflict),
        "rewriting the returned key is inside the read"
    );
    assert_eq!(
        read_then_interleave(&store, &space, forward, &space.key("a")).await,
        Err(StoreError::Conflict)
    );
    // Reverse limit hit at f: the read covered [f, end).
    assert_eq!(
        read_then_interleave(&store, &space, reverse, &space.key("e")).await,
        Ok(())
    );
    assert_eq!(
        read_then_interleave(&store, &space, reverse, &space.key("g")).await,
        Err(StoreError::Conflict)
    );
    // Exhausted: the whole range, an insert anywhere conflicts.
    for key in ["0", "c", "zz"] {
        assert_eq!(
            read_then_interleave(&store, &space, exhausted, &space.key(key)).await,
            Err(StoreError::Conflict),
            "insert at {key} is inside an exhausted read"
        );
    }
    let exhausted_reverse = exhausted.reverse();
    assert_eq!(
        read_then_interleave(&store, &space, exhausted_reverse, &space.key("0")).await,
        Err(StoreError::Conflict)
    );
    // Snapshot reads add nothing.
    assert_eq!(
        read_then_interleave(&store, &space, exhausted.snapshot(), &space.key("c")).await,
        Ok(())
    );
}

/// Point reads and explicit conflict keys.
pub async fn point_reads_and_explicit_conflicts<S: Store>(store: S) {
    let space = Space::new();
    let (k, other) = (space.key("k"), space.key("other"));
    let reader = store.begin().unwrap();
    assert_eq!(reader.get(&k, Read::Serializable).await.unwrap(), None);
    reader.set(&space.key("marker"), b"x").unwrap();
    write(&store, &[(&other, b"1")]).await;
    assert_eq!(
        reader.commit().await,
        Ok(()),
        "a write elsewhere is no conflict"
    );

    // An explicit conflict key counts from the read version, which the
    // snapshot read of another key took.
    let reader = store.begin().unwrap();
    reader.get(&other, Read::Snapshot).await.unwrap();
    reader.add_read_conflict_key(&k).unwrap();
    reader.set(&space.key("marker"), b"x").unwrap();
    write(&store, &[(&k, b"1")]).await;
    assert_eq!(reader.commit().await, Err(StoreError::Conflict));
}

/// The read version is taken at the first read the store answers (a
/// `get` or `get_range`, snapshot or not), or at commit by a transaction
/// that read nothing, as FoundationDB's client takes it; conflicts count
/// from there. `begin` takes none: a conflict key added before any read
/// protects nothing the transaction learned elsewhere.
pub async fn read_version_is_taken_at_the_first_read<S: Store>(store: S) {
    let space = Space::new();
    let (k, other) = (space.key("k"), space.key("other"));
    write(&store, &[(&other, b"0")]).await;

    // Read nothing: the read version is the commit's, after the write.
    let blind = store.begin().unwrap();
    blind.add_read_conflict_key(&k).unwrap();
    blind.set(&space.key("marker"), b"x").unwrap();
    write(&store, &[(&k, b"1")]).await;
    assert_eq!(
        blind.commit().await,
        Ok(()),
        "a transaction that read nothing cannot conflict with a write before its commit"
    );

    // A read after another commit sees it, though the transaction began first.
    let late = store.begin().unwrap();
    write(&store, &[(&k, b"2")]).await;
    assert_eq!(
        late.get(&k, Read::Snapshot).await.unwrap(),
        Some(b"2".to_vec())
    );

    // Reads the transaction's own writes answer take no read version.
    let own = store.begin().unwrap();
    let (mine, cleared) = (space.key("mine"), space.key("cleared/"));
    own.set(&mine, b"m").unwrap();
    own.clear_range(&cleared, &space.key("cleared0")).unwrap();
    assert_eq!(
        own.get(&mine, Read::Serializable).await.unwrap(),
        Some(b"m".to_vec())
    );
    let rows = own
        .get_range(RangeRead::new(&cleared, &space.key("cleared0"), 10))
        .await
        .unwrap();
    assert!(rows.is_empty());
    own.add_read_conflict_key(&k).unwrap();
    write(&store, &[(&k, b"3")]).await;
    assert_eq!(
        own.commit().await,
        Ok(()),
        "reads of its own writes took no read version"
    );

    // A snapshot read takes it too: the write after it conflicts.
    let reader = store.begin().unwrap();
    reader.get(&other, Read::Snapshot).await.unwrap();
    reader.add_read_conflict_key(&k).unwrap();
    reader.set(&space.key("marker"), b"x").unwrap();
    write(&store, &[(&k, b"4")]).await;
    assert_eq!(reader.commit().await, Err(StoreError::Conflict));
}

/// Blind writes never conflict; concurrent atomic adds all commit and sum.
pub async fn blind_writes_and_atomic_adds<S: Store>(store: S) {
    let space = Space::new();
    let k = space.key("k");
    let one = store.begin().unwrap();
    let two = store.begin().unwrap();
    one.set(&k, b"one").unwrap();
    two.set(&k, b"two").unwrap();
    assert_eq!(one.commit().await, Ok(()));
    assert_eq!(two.commit().await, Ok(()));
    assert_eq!(read(&store, &k).await, Some(b"two".to_vec()));

    let counter = space.key("counter");
    // All begin before any commits, so every pair overlaps.
    let txns: Vec<S::Txn> = (0..50).map(|_| store.begin().unwrap()).collect();
    let mut tasks = Vec::new();
    for (i, txn) in txns.into_iter().enumerate() {
        let counter = counter.clone();
        tasks.push(tokio::spawn(async move {
            txn.atomic_add(&counter, i as i64 + 1).unwrap();
            txn.commit().await
        }));
    }
    for task in tasks {
        assert_eq!(task.await.unwrap(), Ok(()));
    }
    let total = read(&store, &counter).await;
    assert_eq!(decode_counter(total.as_deref()), (1..=50).sum::<i64>());
}

/// An atomic add applies to what is there when it commits, not to what its
/// transaction could see: a set, a clear or a range clear committed since
/// its read version counts.
pub async fn atomic_adds_apply_to_the_value_at_commit<S: Store>(store: S) {
    let space = Space::new();
    let counter = space.key("counter");
    write(&store, &[(&counter, &5i64.to_le_bytes())]).await;
    for step in ["set", "clear", "clear_range"] {
        // Begins while the counter holds 5 (then 10, see below).
        let adder = store.begin().unwrap();
        let other = store.begin().unwrap();
        match step {
            "set" => other.set(&counter, &100i64.to_le_bytes()).unwrap(),
            "clear" => other.clear(&counter).unwrap(),
            _ => other.clear_range(&space.key(""), &space.key("~")).unwrap(),
        }
        other.commit().await.unwrap();
        adder.atomic_add(&counter, 1).unwrap();
        adder.commit().await.unwrap();
        let expected = if step == "set" { 101 } else { 1 };
        let after = read(&store, &counter).await;
        assert_eq!(decode_counter(after.as_deref()), expected, "after a {step}");
        write(&store, &[(&counter, &10i64.to_le_bytes())]).await;
    }
}

/// Concurrent `atomic_max`es all commit and leave the largest; reads in
/// the transaction see the mutation applied.
pub async fn atomic_max_keeps_the_largest<S: Store>(store: S) {
    let space = Space::new();
    let mark = space.key("mark");
    let txns: Vec<S::Txn> = (0..20).map(|_| store.begin().unwrap()).collect();
    let mut tasks = Vec::new();
    for (i, txn) in txns.into_iter().enumerate() {
        let mark = mark.clone();
        // Out of order on purpose: 7, 14, 1, 8, ...
        let value = (i as u64 * 7) % 20 + 100;
        tasks.push(tokio::spawn(async move {
            txn.atomic_max(&mark, value).unwrap();
            txn.commit().await
        }));
    }
    for task in tasks {
        assert_eq!(task.await.unwrap(), Ok(()));
    }
    assert_eq!(
        hotq::store::decode_mark(read(&store, &mark).await.as_deref()),
        119
    );
    let txn = store.begin().unwrap();
    txn.atomic_max(&mark, 50).unwrap();
    assert_eq!(
        txn.get(&mark, Read::Serializable).await.unwrap(),
        Some(119u64.to_le_bytes().to_vec())
    );
    txn.atomic_max(&mark, 500).unwrap();
    txn.atomic_add(&mark, 1).unwrap();
    assert_eq!(
        txn.get(&mark, Read::Serializable).await.unwrap(),
        Some(501u64.to_le_bytes().to_vec())
    );
    txn.commit().await.unwrap();
    assert_eq!(
        hotq::store::decode_mark(read(&store, &mark).await.as_deref()),
        501
    );
}

/// Reads see the transaction's own sets, clears and range clears.
pub async fn read_your_writes<S: Store>(store: S) {
    let space = Space::new();
    let keys: Vec<Vec<u8>> = ["a", "b", "c", "d", "e"]
        .iter()
        .map(|n| space.key(n))
        .collect();
    let pairs: Vec<(&[u8], &[u8])> = keys.iter().map(|k| (k.as_slice(), &b"old"[..])).collect();
    write(&store, &pairs).await;
    let (begin, end) = (space.begin(), space.end());
    let txn = store.begin().unwrap();
    txn.set(&space.key("bb"), b"new").unwrap();
    txn.clear(&space.key("c")).unwrap();
    txn.clear_range(&space.key("d"), &space.key("e\0")).unwrap();
    txn.set(&space.key("e"), b"again").unwrap();
    txn.atomic_add(&space.key("n"), 5).unwrap();

    assert_eq!(
        txn.get(&space.key("bb"), Read::Serializable).await.unwrap(),
        Some(b"new".to_vec())
    );
    assert_eq!(
        txn.get(&space.key("c"), Read::Serializable).await.unwrap(),
        None
    );
    assert_eq!(
        txn.get(&space.key("d"), Read::Serializable).await.unwrap(),
        None
    );
    assert_eq!(
        txn.get(&space.key("e"), Read::Serializable).await.unwrap(),
        Some(b"again".to_vec())
    );
    assert_eq!(
        txn.get(&space.key("n"), Read::Serializable).await.unwrap(),
        Some(5i64.to_le_bytes().to_vec())
    );

    let all = RangeRead::new(&begin, &end, 100);
    assert_eq!(names(&space, &txn, all).await, ["a", "b", "bb", "e", "n"]);
    assert_eq!(
        names(&space, &txn, RangeRead::new(&begin, &end, 3)).await,
        ["a", "b", "bb"]
    );
    assert_eq!(
        names(&space, &txn, all.reverse()).await,
        ["n", "e", "bb", "b", "a"]
    );
    assert_eq!(
        names(&space, &txn, RangeRead::new(&begin, &end, 2).reverse()).await,
        ["n", "e"]
    );
    txn.clear_range(&begin, &end).unwrap();
    assert!(names(&space, &txn, all).await.is_empty());
    txn.set(&space.key("z"), b"1").unwrap();
    assert_eq!(names(&space, &txn, all.reverse()).await, ["z"]);
    txn.commit().await.unwrap();

    let after = store.begin().unwrap();
    assert_eq!(names(&space, &after, all).await, ["z"]);
}

/// A watch fires after another transaction changes the key, not for a
/// write of the same value.
pub async fn watch_fires_on_change_only<S: Store>(store: S) {
    let space = Space::new();
    let k = space.key("watched");
    write(&store, &[(&k, b"same")]).await;
    let watcher = store.begin().unwrap();
    watcher.get(&k, Read::Serializable).await.unwrap();
    let mut watch = watcher.watch(&k).unwrap();
    watcher.commit().await.unwrap();

    write(&store, &[(&k, b"same")]).await;
    let early = tokio::time::timeout(Duration::from_millis(300), &mut watch).await;
    assert!(
        early.is_err(),
        "a write of the same value must not fire the watch"
    );

    write(&store, &[(&k, b"different")]).await;
    let fired = tokio::time::timeout(Duration::from_secs(30), &mut watch).await;
    assert_eq!(
        fired.expect("the watch fires within 30 s of the change"),
        Ok(())
    );

    let dropped = store.begin().unwrap();
    let orphan = dropped.watch(&k).unwrap();
    drop(dropped);
    let outcome = tokio::time::timeout(Duration::from_secs(30), orphan).await;
    assert!(
        matches!(outcome, Ok(Err(_))),
        "a watch whose transaction never commits fails: {outcome:?}"
    );
}

/// A watch reads its key, as FoundationDB's client does: a read conflict
/// on it, so a writing transaction that watches a counter conflicts with
/// every add to it committed meanwhile. (The fulfiller therefore watches
/// in a transaction of its own, after its round commits.)
pub async fn a_watch_reads_its_key<S: Store>(store: S) {
    let space = Space::new();
    let counter = space.key("depth");
    let setup = store.begin().unwrap();
    setup.atomic_add(&counter, 5).unwrap();
    setup.commit().await.unwrap();

    let watcher = store.begin().unwrap();
    assert_eq!(
        watcher.get(&counter, Read::Snapshot).await.unwrap(),
        Some(5i64.to_le_bytes().to_vec())
    );
    watcher.atomic_add(&counter, -1).unwrap();
    let watch = watcher.watch(&counter).unwrap();
    let pusher = store.begin().unwrap();
    pusher.atomic_add(&counter, 1).unwrap();
    pusher.commit().await.unwrap();
    assert_eq!(watcher.commit().await, Err(StoreError::Conflict));
    let outcome = tokio::time::timeout(Duration::from_secs(30), watch).await;
    assert!(
        matches!(outcome, Ok(Err(_))),
        "the watch of a transaction that did not commit fails: {outcome:?}"
    );

    // A key the transaction set itself is read from its own write: no
    // conflict, and the watch waits for a value other than that one.
    let mine = space.key("mine");
    let setter = store.begin().unwrap();
    setter.set(&mine, b"mine").unwrap();
    let mut watch = setter.watch(&mine).unwrap();
    write(&store, &[(&mine, b"theirs")]).await;
    assert_eq!(setter.commit().await, Ok(()));
    let early = tokio::time::timeout(Duration::from_millis(300), &mut watch).await;
    assert!(early.is_err(), "the store holds what the watch read");
    write(&store, &[(&mine, b"later")]).await;
    let fired = tokio::time::timeout(Duration::from_secs(30), watch).await;
    assert_eq!(fired.expect("the watch fires for the change"), Ok(()));
}

/// A watch fires for any value other than the one it read, even one
/// committed before the watching transaction did: a read-only
/// transaction (which never conflicts) watching after another writer's
/// commit loses no change made since its read.
pub async fn a_watch_fires_for_a_change_after_its_read<S: Store>(store: S) {
    let space = Space::new();
    let counter = space.key("depth");
    write(&store, &[(&counter, &4i64.to_le_bytes())]).await;
    let watcher = store.begin().unwrap();
    assert_eq!(
        watcher.get(&counter, Read::Snapshot).await.unwrap(),
        Some(4i64.to_le_bytes().to_vec())
    );
    let watch = watcher.watch(&counter).unwrap();
    let pusher = store.begin().unwrap();
    pusher.atomic_add(&counter, 1).unwrap();
    pusher.commit().await.unwrap();
    assert_eq!(
        watcher.commit().await,
        Ok(()),
        "a read-only watch never conflicts"
    );
    let fired = tokio::time::timeout(Duration::from_secs(30), watch).await;
    assert_eq!(
        fired.expect("the watch fires for the add after its read"),
        Ok(())
    );
}

/// A transaction older than 5 s fails as too old and writes nothing.
pub async fn old_transaction_is_too_old<S: Store>(store: S) {
    let space = Space::new();
    let k = space.key("late");
    let txn = store.begin().unwrap();
    txn.get(&k, Read::Serializable).await.unwrap();
    // The subject of the test is elapsed time itself, not synchronisation.
    tokio::time::sleep(Duration::from_millis(5_500)).await;
    txn.set(&k, b"late").unwrap_or(());
    assert_eq!(txn.commit().await, Err(StoreError::TooOld));
    assert_eq!(read(&store, &k).await, None);
}

/// Oversized keys and values are errors, and nothing is written.
pub async fn oversized_writes_fail<S: Store>(store: S) {
    let space = Space::new();
    let mut big_key = space.key("big");
    big_key.resize(hotq::store::KEY_SIZE_MAX + 1, b'k');
    let k = space.key("k");
    let txn = store.begin().unwrap();
    assert_eq!(
        txn.set(&big_key, b"v"),
        Err(StoreError::KeyTooLarge { len: big_key.len() })
    );
    let big_value = vec![0u8; hotq::store::VALUE_SIZE_MAX + 1];
    assert_eq!(
        txn.set(&k, &big_value),
        Err(StoreError::ValueTooLarge {
            len: big_value.len()
        })
    );
    assert!(txn.get(&big_key, Read::Snapshot).await.is_err());
    txn.commit().await.unwrap();
    assert_eq!(read(&store, &k).await, None);
    let (begin, end) = (space.begin(), space.end());
    let rows = store
        .begin()
        .unwrap()
        .get_range(RangeRead::new(&begin, &end, 10).snapshot())
        .await
        .unwrap();
    assert!(rows.is_empty(), "nothing was written: {rows:?}");
    let exact = vec![1u8; hotq::store::VALUE_SIZE_MAX];
    write(&store, &[(&k, &exact)]).await;
    assert_eq!(read(&store, &k).await.map(|v| v.len()), Some(exact.len()));
}

/// Generates one `#[tokio::test]` per case; `$store` is an async
/// expression giving `Option<impl Store>` (`None` skips, loudly).
#[macro_export]
macro_rules! conformance_tests {
    ($store:expr) => {
        $crate::conformance_tests!(@cases $store;
            first_key_pops_conflict,
            snapshot_pops_both_commit,
            range_read_conflict_ranges,
            point_reads_and_explicit_conflicts,
            read_version_is_taken_at_the_first_read,
            blind_writes_and_atomic_adds,
            atomic_adds_apply_to_the_value_at_commit,
            atomic_max_keeps_the_largest,
            read_your_writes,
            watch_fires_on_change_only,
            a_watch_reads_its_key,
            a_watch_fires_for_a_change_after_its_read,
            old_transaction_is_too_old,
            oversized_writes_fail,
        );
    };
    (@cases $store:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                match $store {
                    Some(store) => common::conformance::$case(store).await,
                    None => eprintln!(concat!("SKIPPED ", stringify!($case), ": no store for this backend")),
                }
            }
        )*
    };
}
