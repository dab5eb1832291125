//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod conformance;

use hotq::store::embedded::{Durability, EmbeddedConfig, EmbeddedStore};

/// An embedded store in a fresh temporary directory (deleted on drop).
pub fn embedded_store(durability: Durability) -> (EmbeddedStore, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let mut config = EmbeddedConfig::new(dir.path());
    config.durability = durability;
    (
        EmbeddedStore::open(config).expect("open embedded store"),
        dir,
    )
}
