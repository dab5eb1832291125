//! The backends a suite runs on, and the macro that runs one suite on each:
//! one body per case, generic over [`Store`](hotq::store::Store), one module
//! per backend (`on_embedded`, always; `on_fdb`, built with `--features fdb`
//! and run when `FDB_CLUSTER_FILE` names a cluster, saying plainly that it
//! skipped otherwise).
//!
//! On FoundationDB every case gets a store of its own under a fresh random
//! key prefix, so a suite can run against a cluster that other suites or
//! daemons use at the same time: nothing of theirs is seen, served or
//! reaped by the case, and nothing of the case's by them.

use hotq::store::embedded::{Durability, EmbeddedStore};

/// A fresh embedded store (`sync`). Its temporary directory outlives the
/// store: fjall keeps working in it until every handle is gone, and the
/// OS reclaims it with the process.
pub fn embedded() -> EmbeddedStore {
    let (store, dir) = super::embedded_store(Durability::Sync);
    std::mem::forget(dir);
    store
}

/// Why the FoundationDB cases skip when they do.
#[cfg_attr(not(feature = "fdb"), allow(dead_code))]
pub const FDB_SKIPPED_BECAUSE: &str = "FDB_CLUSTER_FILE is unset: no FoundationDB cluster to run \
     against (set it to a cluster file to run this suite on FoundationDB)";

/// The cluster named by `FDB_CLUSTER_FILE`, opened once per process (the
/// client library boots once; every case shares its connection).
#[cfg(feature = "fdb")]
fn cluster() -> Option<hotq::store::fdb::FdbStore> {
    use hotq::store::fdb::{FdbStore, cluster_file_from_env};
    static CLUSTER: std::sync::OnceLock<Option<FdbStore>> = std::sync::OnceLock::new();
    CLUSTER
        .get_or_init(|| {
            let path = cluster_file_from_env()?;
            Some(FdbStore::open(Some(&path)).expect("open the FoundationDB cluster"))
        })
        .clone()
}

/// A keyspace of its own on the cluster: `hotq-test/<random>/`.
#[cfg(feature = "fdb")]
pub fn fdb_raw() -> Option<hotq::store::fdb::FdbStore> {
    let prefix = format!("hotq-test/{:016x}/", rand::random::<u64>());
    Some(cluster()?.with_prefix(prefix.as_bytes()))
}

/// The store a daemon serves from on a cluster ([`Resolving`] over
/// FoundationDB, as `open_for_daemon` builds it), in a keyspace of its own;
/// `None` (and a line on stderr) without `FDB_CLUSTER_FILE`.
///
/// [`Resolving`]: hotq::store::resolving::Resolving
#[cfg(feature = "fdb")]
pub fn fdb() -> Option<hotq::store::resolving::Resolving<hotq::store::fdb::FdbStore>> {
    match fdb_raw() {
        Some(store) => Some(hotq::store::resolving::Resolving::new(store)),
        None => {
            eprintln!("SKIPPED: {FDB_SKIPPED_BECAUSE}");
            None
        }
    }
}

/// Runs each listed case on every backend: `name [threads] => case(args)`
/// makes the test `on_embedded::name` (and `on_fdb::name` with the `fdb`
/// feature) on a multi-threaded runtime of `threads` workers, calling
/// `super::case(store, args…)`, `case` being generic over the store.
#[macro_export]
macro_rules! on_every_backend {
    ($($name:ident [$threads:literal] => $case:ident($($arg:expr),*);)*) => {
        mod on_embedded {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = $threads)]
                async fn $name() {
                    super::$case($crate::common::backend::embedded() $(, $arg)*).await
                }
            )*
        }

        #[cfg(feature = "fdb")]
        mod on_fdb {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = $threads)]
                async fn $name() {
                    match $crate::common::backend::fdb() {
                        Some(store) => super::$case(store $(, $arg)*).await,
                        None => eprintln!(
                            "SKIPPED {}: {}",
                            stringify!($name),
                            $crate::common::backend::FDB_SKIPPED_BECAUSE
                        ),
                    }
                }
            )*
        }
    };
}
